/*
 * Approval holds (action: ask, on_unmatched: ask): requests held for an
 * operator, and the runtime rules scoped approvals leave behind.
 *
 * One process-wide registry, under one mutex: workers hold and look up,
 * the admin API lists and decides, a thread of its own times holds out
 * and posts the webhook. A held exchange waits on its connection's
 * resume event (pipe/stage.h XS_WAIT); the registry makes that event
 * active when the hold is decided, times out or is refused, and forgets
 * it (ask_unwatch) before the connection frees it.
 *
 * Runtime rules answer asks only (never a denial): "HOST:PORT is approved
 * for this sandbox, or for every sandbox of this policy", maybe until a
 * time. They live in <state_dir>/approvals.json, across reloads and
 * restarts, until revoked or expired.
 */
#ifndef AIRLOCK_POL_ASK_H
#define AIRLOCK_POL_ASK_H

#include <stddef.h>
#include <stdint.h>

struct event;
struct json_object;

enum ask_state {
	ASK_WAITING = 0,
	ASK_APPROVED,
	ASK_DENIED,
	ASK_TIMEOUT,
	ASK_REFUSED,	/* the sandbox's pending list was full */
	ASK_GONE,	/* no such hold */
};

enum ask_scope {
	ASK_ONCE = 0,
	ASK_SANDBOX,
	ASK_POLICY,
};

/* The audit's reason for a client (an HTTP/1 connection, an h2 stream)
 * that went away while held. */
#define ASK_LEFT_HELD	"client left while held for approval"

/* What a hold shows the operator (never a header or body value). */
#define ASK_RULE_PATH	1024	/* a request-kept rule's path, at most */

struct ask_req {
	const char	*aq_request_id;
	const char	*aq_sandbox;
	const char	*aq_policy;
	const char	*aq_method;
	const char	*aq_host;
	int		 aq_port;
	const char	*aq_path;	/* normalised, no query; or NULL */
};

/*
 * Load the runtime rules of <state_dir> and start the registry's thread.
 * 0, or -1 (logged) when the file exists and cannot be read.
 */
int	ask_open(const char *state_dir);
void	ask_close(void);

/* Does a runtime rule approve HOST:PORT (and, for a rule kept to the
 * request, METHOD and PATH: NULL for a tunnel) for this sandbox or
 * policy? */
int	ask_rule_allows(const char *sandbox, const char *policy,
	    const char *host, int port, const char *method, const char *path);

/*
 * Hold <q> until <timeout_ms> from now; <ev> made active when it ends.
 * At <max_per_sandbox> holds of that sandbox the oldest is refused.
 * <webhook>: an http:// URL told of it, or NULL. Returns the hold's id.
 */
uint64_t ask_hold(const struct ask_req *q, struct event *ev,
	    uint64_t timeout_ms, size_t max_per_sandbox, const char *webhook);
/* How hold <id> stands; anything but ASK_WAITING also forgets it. */
enum ask_state ask_take(uint64_t id, uint64_t *left_ms);
/* The connection frees <ev>: forget the holds that would make it active. */
void	ask_unwatch(struct event *ev);

/* GET /v1/pending: {"pending": [...]}, oldest first. */
struct json_object *ask_pending_json(void);
/*
 * Decide hold <id>: approve (with <scope>; a runtime rule for HOST:PORT
 * when not once, with <request> also for the hold's method and exact
 * path, until <ttl_ms> from now, 0 = no end: its id in <rule_id>) or
 * deny. Other holds the new rule covers are approved too. 0, or -1: no
 * such hold (or no longer waiting).
 */
int	ask_decide(uint64_t id, int approve, enum ask_scope scope,
	    int request, uint64_t ttl_ms, char *rule_id, size_t rule_idsz);
/* GET /v1/rules: {"rules": [...]}. */
struct json_object *ask_rules_json(void);
/* Revoke runtime rule <id>: 0, or -1 when there is none. */
int	ask_rule_revoke(const char *id);

#endif
