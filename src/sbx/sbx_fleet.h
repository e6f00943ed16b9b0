/*
 * The fleet's shared sandbox registry (issue 18.3): with a Redis budget
 * store, every gateway announces the sandboxes created through its admin
 * API to the others, and forgets those deleted anywhere.
 *
 * In Redis: airlock:sbx:<id> is a hash (policy, tok = hex SHA-256 of the
 * token, created, addr), airlock:sbxs the set of ids, airlock:sbx-gone:<id>
 * a tombstone kept a week; changes are published on channel airlock:sbx
 * as "+<id>" or "-<id>". The token itself never leaves the gateway that
 * minted it.
 *
 * One thread of its own with two blocking hiredis connections (a
 * subscribed connection runs no other command): no worker ever waits on
 * it. Announcements are queued and sent in order, kept while Redis is
 * away; a (re)subscription is followed by a full resynchronisation.
 */
#ifndef AIRLOCK_SBX_FLEET_H
#define AIRLOCK_SBX_FLEET_H

#include <stdint.h>

struct cfg;
struct event;

/* Called after the fleet deleted sandboxes here: close their
 * connections (workers_revoke; set before sbx_fleet_start). */
void	sbx_fleet_set_revoke_hook(void (*)(void));
/* Start it when <cfg>'s budget store is Redis. 0 or -1 (logged). */
int	sbx_fleet_start(const struct cfg *);
void	sbx_fleet_stop(void);
int	sbx_fleet_on(void);
/* Off, or connected and subscribed: a creation can be announced. */
int	sbx_fleet_ready(void);
/* Queue an announcement (any thread, never blocks on Redis). */
void	sbx_fleet_announce(const char *id, const char *policy,
	    const unsigned char sha[32], int64_t created, const char *addr);
void	sbx_fleet_retract(const char *id);
/* usage/reset: the shared (Redis) counters of <id> too. */
void	sbx_fleet_reset(const char *id);
/* A token for an unknown id: look it up in Redis (rate bound). */
void	sbx_fleet_miss(const char *id);
/*
 * A login with an id unknown here waits for one lookup of it in Redis:
 * <ev> (a worker's) is made active once that lookup ended (the sandbox
 * is then known here, or Redis has no such sandbox) or Redis went away.
 * 0, or -1: nothing to wait for (not fleet mode, Redis away, too many
 * lookups pending): refuse now. The caller bounds the wait itself
 * (limits.store_timeout) and calls sbx_fleet_unwatch(ev) before freeing
 * <ev>. Any thread.
 */
int	sbx_fleet_watch(const char *id, struct event *ev);
void	sbx_fleet_unwatch(struct event *ev);
/*
 * Create-after-write (an admin answer waits for Redis): the order number
 * of the last change (announce, retract, reset) this thread queued, 0 if
 * it queued none (the queue was full). Changes are written in order.
 */
uint64_t sbx_fleet_last_seq(void);
/* Change <seq> (and all before it) is in Redis; 1 when not fleet mode. */
int	sbx_fleet_acked(uint64_t seq);
/*
 * Make <ev> active once change <seq> is in Redis (or at stop): 0; 1 when
 * it already is; -1 not fleet mode or <seq> 0. The caller bounds the
 * wait (limits.store_timeout) and calls sbx_fleet_unwatch(ev) before
 * freeing <ev>. Any thread.
 */
int	sbx_fleet_ack_watch(uint64_t seq, struct event *ev);
/*
 * Drop change <seq> if it was never sent: 1 (Redis never sees it), or 0:
 * it is in Redis, being sent, or was sent once without an answer (a
 * timeout: Redis may still run it), so only a later change undoes it.
 */
int	sbx_fleet_cancel(uint64_t seq);

/*
 * The deletions not yet in Redis, kept across a restart (sbx_fleet_pend.c;
 * for sbx_fleet.c): marked when queued, cleared once in Redis or
 * superseded by a creation; at start <fn>(id) for each one kept.
 */
void	sbx_fleet_pend_mark(const char *id);
void	sbx_fleet_pend_clear(const char *id);
void	sbx_fleet_pend_load(const char *state_dir, void (*fn)(const char *));
void	sbx_fleet_pend_free(void);

#endif
