/* Between the admin transport (admin.c) and its routes (admin_routes.c). */
#ifndef AIRLOCK_ADMIN_INTERNAL_H
#define AIRLOCK_ADMIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "admin/admin.h"
#include "sbx/sbx.h"

struct evbuffer;

struct admin_req {
	int		 aq_method;	/* llhttp_method_t */
	const char	*aq_url;	/* request target as sent */
	const char	*aq_body;
	size_t		 aq_body_len;
};

struct admin_conn;

struct admin_resp {
	int		 ar_status;
	const char	*ar_ctype;	/* NULL = application/json */
	struct evbuffer	*ar_body;
	char		 ar_id[25];	/* X-Airlock-Request-Id */
	struct admin_conn *ar_conn;
	int		 ar_deferred;	/* admin_defer() was called */
};

/*
 * A route whose answer takes seconds (a VM's cold claim) must not hold the
 * main loop, which also serves the DNS stub: it calls admin_defer() and
 * returns; later, on the main loop, admin_defer_answer() calls <fill> with
 * a fresh response and sends it (the connection closes after it). <fill>
 * is called even when the client has gone, so it can release what it
 * holds; the answer is then dropped. A client that hangs up meanwhile is
 * noticed (its connection freed at once); one that half-closes its side
 * loses the answer. Whoever defers must answer at its stop too, without
 * the loop (see adm_fleet_stop, pool_stop).
 */
struct admin_defer;
struct admin_defer *admin_defer(struct admin_resp *);
void	admin_defer_answer(struct admin_defer *,
	    void (*fill)(struct admin_resp *, void *), void *arg);

/* The main loop the admin API runs on (admin.c). */
struct event_base *admin_base(void);

/*
 * Fleet mode (adm_fleet.c): answer <r> once change <seq> of the shared
 * registry (sbx_fleet_last_seq) is in Redis, or limits.store_timeout
 * passed: <fill>(resp, arg, acked) on the main loop (deferred), or at
 * once when not fleet mode (acked 1), or nothing was queued or the
 * registry is not connected (acked 0). acked -1: the gateway stops
 * before Redis confirmed (adm_fleet_stop); the answer goes nowhere and
 * the change stays (the registry resynchronises at the next start).
 * <fill> is called exactly once, whether the client is still there or not.
 */
typedef void adm_fleet_fill_fn(struct admin_resp *, void *, int acked);
void	adm_fleet_answer(struct admin_resp *, uint64_t seq,
	    adm_fleet_fill_fn *, void *arg);
/* admin_stop: end the waits still there (acked -1 unless confirmed). */
void	adm_fleet_stop(void);
/* 503 budget_unavailable: <what> was not confirmed by Redis in time. */
void	adm_fleet_unconfirmed(struct admin_resp *, const char *what);

extern struct admin_hooks admin_hooks;
extern time_t		  admin_started;	/* for uptime */

void	admin_route(const struct admin_req *, struct admin_resp *);
/* GET .../usage?by=model|day: add "by" and "breakdown" to the usage
 * object <o> (admin_usage.c); 0, or -1 after answering 400. */
struct json_object;
int	admin_usage_by(const struct admin_req *, struct admin_resp *,
	    const char *sandbox, struct json_object *o);
/* Shared by the route files (admin_routes.c). */
void	admin_json(struct admin_resp *, int status, struct json_object *);
/* <o>'s member <key> (borrowed), a JSON integer. */
void	admin_jint(struct json_object *, const char *key, int64_t);
struct json_object *admin_body_object(const struct admin_req *,
	    struct admin_resp *, const char *const *allowed);
int	admin_body_string(struct json_object *, const char *key,
	    const char **out, struct admin_resp *);
/* /v1/snapshots[/NAME] (adm_snap.c): <seg> after "snapshots". */
void	adm_snap_route(const struct admin_req *, struct admin_resp *,
	    char **seg, int n);
/* Snapshot <from> exists (0), or -1 after answering 404/409. */
int	adm_snap_from_ok(struct admin_resp *, const char *from);
/* POST /v1/sandboxes/ID/rollback {"snapshot"} (adm_snap.c). */
struct sbx;
void	adm_snap_rollback(const struct admin_req *, struct admin_resp *,
	    struct sbx *);
/* /v1/pending..., /v1/rules... (adm_ask.c): <seg> from "pending"/"rules". */
void	adm_ask_route(const struct admin_req *, struct admin_resp *,
	    char **seg, int n);
/* "YYYY-MM-DDTHH:MM:SSZ" of <t> (admin_routes.c). */
void	admin_fmt_time(int64_t t, char *buf, size_t bufsz);
/* The routes, by topic: adm_sandbox.c, adm_pool.c, admin_usage.c. */
void	adm_sandbox_list(const struct admin_req *, struct admin_resp *);
void	adm_sandbox_create(const struct admin_req *, struct admin_resp *);
void	adm_sandbox_show(const struct admin_req *, struct admin_resp *,
	    struct sbx *);
void	adm_sandbox_vm(const struct admin_req *, struct admin_resp *,
	    struct sbx *, int pause);
void	adm_sandbox_probe(const struct admin_req *, struct admin_resp *,
	    struct sbx *);
void	adm_sandbox_delete(const struct admin_req *, struct admin_resp *,
	    struct sbx *);
void	adm_usage(const struct admin_req *, struct admin_resp *,
	    struct sbx *, int reset);
void	adm_claim(const struct admin_req *, struct admin_resp *);
void	adm_prewarm(const struct admin_req *, struct admin_resp *);
void	adm_pool(const struct admin_req *, struct admin_resp *);
/* A claim's answer: the sandbox, its env and launch, or why not. */
void	adm_claim_answer(struct admin_resp *, enum sbx_err, struct sbx *,
	    int warm, const char *policy);
/* "netns" | "qemu" ... of cfg's launcher backend. */
const char *adm_backend_name(int backend);

/* The gateway's error shape: {"error","reason","request_id"}. */
void	admin_error(struct admin_resp *, int status, const char *code,
	    const char *reason);

#endif
