/*
 * Internals of the warm pool shared by sched/pool.c and sched/pool_from.c
 * (the pools prewarmed from snapshots). Not for other planes.
 */
#ifndef SCHED_POOL_INT_H
#define SCHED_POOL_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct cfg;
struct launcher;
struct sbx;

struct pool_pol {
	char		*pp_name;
	char		*pp_from;	/* prewarmed from this snapshot (not
					   launcher.pool.from), or NULL: the
					   policy's own pool */
	int		 pp_pinned;	/* pp_from pinned in the launcher */
	double		 pp_rate;	/* claims/s, EWMA */
	double		 pp_refill_ms;	/* EWMA; 0 = not measured yet */
	uint64_t	 pp_claims_tick;
	uint64_t	 pp_claims;
	uint64_t	 pp_cold;
	uint64_t	 pp_evicted;
	size_t		 pp_extra;	/* prewarm asked for, not claimed yet:
					   part of the target until claimed or
					   idle_timeout after the last prewarm */
	uint64_t	 pp_extra_ms;	/* the last prewarm */
	size_t		 pp_target;
	size_t		 pp_warm;	/* as of the last tick */
	size_t		 pp_launched;
	size_t		 pp_preparing;	/* handed to the thread */
	uint64_t	 pp_last_claim_ms;
	/* after a failed build, refills wait (1 s doubling to 60 s) */
	uint64_t	 pp_retry_ms;
	uint64_t	 pp_backoff_ms;
	uint64_t	 pp_canary_ms;	/* last periodic escape canary */
	struct cfg	*pp_cfg;	/* reference for the thread */
};

/* pool_pols is shared with the preparing thread: under pool_mtx */
extern pthread_mutex_t	 pool_mtx;
extern struct pool_pol	*pool_pols;
extern size_t		 pool_npols;
extern struct launcher	*pool_launcher;	/* netns backend, or NULL */

/* sched/pool.c; both with pool_mtx held */
struct pool_pol	*pol_get_from(const char *name, const char *from);
int		 pool_policy_tick(const struct cfg *, struct pool_pol *,
		    struct sbx **, size_t, uint64_t, int *, struct sbx **);

/* sched/pool_from.c */
int		 pool_from_tick(const struct cfg *, struct sbx **, size_t,
		    uint64_t, char ***, size_t *);
void		 pool_unpin(char **, size_t);
struct pool_pol	*pool_from_pin(const char *policy, const char *from,
		    char *why, size_t whysz);

#endif
