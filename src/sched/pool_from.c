/*
 * The pools prewarmed from a snapshot (issue 22, point 3): "prewarm
 * POLICY from SNAPSHOT" makes a pool of its own per (policy, snapshot),
 * refilled and trimmed like the policy's own; while it holds or may hold
 * a sandbox it pins the snapshot in the launcher, so that the snapshot is
 * neither deleted nor pruned under it.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "launcher/launcher.h"
#include "launcher/lnc_proto.h"
#include "sched/pool.h"
#include "sched/pool_int.h"
#include "util/log.h"
#include "util/util.h"

/*
 * The pools prewarmed from snapshots: each refills what prewarm asked for
 * and drops its unclaimed surplus like the policy's own; one left empty
 * (or of a policy a reload removed) unpins its snapshot: its name goes
 * into *unpin for pool_unpin, after pool_mtx is released. Caller holds
 * pool_mtx.
 */
int
pool_from_tick(const struct cfg *cfg, struct sbx **list, size_t n,
    uint64_t now, char ***unpin, size_t *nunpin)
{
	struct pool_pol	*pp;
	size_t		 i;
	int		 more = 0, nopressure = 0;

	for (i = 0; i < pool_npols; i++) {
		pp = &pool_pols[i];
		if (pp->pp_from == NULL)
			continue;
		if (cfg_policy_find(cfg, pp->pp_name) == NULL)
			pp->pp_extra = 0;
		else
			more |= pool_policy_tick(cfg, pp, list, n, now,
			    &nopressure, NULL);
		if (pp->pp_pinned && pp->pp_warm == 0 &&
		    pp->pp_preparing == 0 && pp->pp_extra == 0) {
			pp->pp_pinned = 0;
			*unpin = xrealloc(*unpin, (*nunpin + 1) *
			    sizeof(**unpin));
			(*unpin)[(*nunpin)++] = xstrdup(pp->pp_from);
		}
	}
	return more;
}

/* Release the launcher's pins on <names> (freed here). */
void
pool_unpin(char **names, size_t n)
{
	char	why[160];
	size_t	i;

	for (i = 0; i < n; i++) {
		if (pool_launcher != NULL && launcher_snap(pool_launcher,
		    LNC_SNAP_UNPIN, NULL, names[i], 0, why, sizeof(why)) == -1)
			log_warnx("pool: unpin snapshot %s: %s", names[i], why);
		free(names[i]);
	}
	free(names);
}

/*
 * The pool of <policy> from <from> (NULL: the policy's own), its snapshot
 * pinned when it was not yet. Returns it with pool_mtx held, or NULL with
 * the reason (pool_mtx not held).
 */
struct pool_pol *
pool_from_pin(const char *policy, const char *from, char *why, size_t whysz)
{
	struct pool_pol	*pp;
	int		 pin;

	pthread_mutex_lock(&pool_mtx);
	pp = pol_get_from(policy, from);
	pin = from != NULL && !pp->pp_pinned;
	pthread_mutex_unlock(&pool_mtx);
	/* a pool built from it keeps the snapshot from delete and pruning */
	if (pin && launcher_snap(pool_launcher, LNC_SNAP_PIN, NULL, from, 0,
	    why, whysz) == -1)
		return NULL;
	pthread_mutex_lock(&pool_mtx);
	pp = pol_get_from(policy, from);
	if (pin) {
		if (pp->pp_pinned)	/* another prewarm pinned it meanwhile */
			(void)launcher_snap(pool_launcher, LNC_SNAP_UNPIN,
			    NULL, from, 0, why, whysz);
		pp->pp_pinned = 1;
	}
	return pp;
}
