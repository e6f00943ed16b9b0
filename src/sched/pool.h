/*
 * Scheduler: a warm pool of prepared sandboxes per policy (launcher.pool).
 * A claim takes a warm one at once, or builds the identical sandbox on the
 * cold path when the pool is empty; the pool refills in the background on
 * the main loop. The target size follows a forecast of the claim rate;
 * claimed sandboxes left idle are evicted, least recently used first.
 *
 * With launcher.backend qemu, warm VMs wait paused and a claim resumes
 * one; a claimed VM left idle is paused, and evicted under memory
 * pressure.
 *
 * With launcher.backend none a sandbox is an identity: id, proxy token and
 * CA, which is what preparing one costs (two P-256 keys and a signature).
 */
#ifndef AIRLOCK_POOL_H
#define AIRLOCK_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/sbx.h"

struct cfg;
struct event_base;

struct pool_stat {
	char		*ps_policy;
	size_t		 ps_warm;	/* ready now */
	size_t		 ps_launched;	/* handed out, alive */
	size_t		 ps_target;	/* what the refill aims at */
	double		 ps_rate;	/* forecast claims per second */
	double		 ps_refill_ms;	/* time to prepare one */
	uint64_t	 ps_claims;	/* since start */
	uint64_t	 ps_claims_cold;
	uint64_t	 ps_evicted;
};

/* Start the refill/eviction timer. <cfg_fn> returns the running config. */
int		 pool_start(struct event_base *, const struct cfg *(*cfg_fn)(void));
/* A sandbox for <policy>: warm when one is ready (*warm = 1), else built
 * now. *out gets a reference. */
enum sbx_err	 pool_claim(const char *policy, struct sbx **out, int *warm);
/*
 * The same for the qemu backend, where a cold claim boots a VM (seconds):
 * <done> is called later on the main loop with the outcome, a reference
 * to the sandbox (SBX_OK) and whether it was warm. A cold build runs on a
 * thread of its own. Returns 0, or -1 (SBX_E_POLICY: unknown policy, *e
 * set; <done> is not called).
 */
typedef void	(*pool_claim_cb)(enum sbx_err, struct sbx *, int warm,
		    void *arg);
int		 pool_claim_async(const char *policy, pool_claim_cb done,
		    void *arg, enum sbx_err *e);
/* Does a cold claim take seconds (backend qemu)? */
int		 pool_claim_is_slow(void);
/* Prepare <count> more for <policy> ahead of demand (up to pool.max),
 * from snapshot <from> (NULL: as the policy's own pool; else a pool of
 * its own that pins the snapshot while it holds any, netns backend only).
 * Returns how many were scheduled, or -1 with the reason (an unknown
 * policy or snapshot). */
long		 pool_prewarm(const char *policy, const char *from,
		    size_t count, char *why, size_t whysz);
/* Per-policy figures of the running config's policies; free with
 * pool_stats_free. */
size_t		 pool_stats(struct pool_stat **);
void		 pool_stats_free(struct pool_stat *, size_t);
/* launcher.backend netns: sandboxes get namespaces from <launcher>. */
struct launcher;
void		 pool_set_launcher(struct launcher *);
struct launcher	*pool_get_launcher(void);
/* pool_claim, from snapshot <from> (cold unless the pool is built from
 * it); SBX_E_LAUNCH without a netns launcher. */
enum sbx_err	 pool_claim_from(const char *policy, const char *from,
		    struct sbx **out, int *warm);
/* Restart launched netns sandbox <s> from snapshot <from>: the same id,
 * token and CA, new processes and namespaces, a fresh upper layer over
 * the snapshot's (issue 22, point 2). 0, or -1 with the reason. */
int		 pool_rollback(struct sbx *s, const char *from, char *why,
		    size_t);
/*
 * Backend qemu: pause a VM (QMP stop; with <if_idle> refused while
 * someone is attached to its agent) or resume it. 0, or -1 with the
 * reason (ENOTSUP: not a VM).
 */
int		 pool_pause(struct sbx *, int if_idle, char *why, size_t);
int		 pool_resume(struct sbx *, char *why, size_t);
/* launcher_probe() on a netns sandbox of ours (sched/canary.c). */
int		 pool_probe(struct sbx *, char *res, size_t);
/* Stop the timer and drop every warm sandbox. */
void		 pool_stop(void);

#endif
