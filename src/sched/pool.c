/*
 * The warm pool. Everything here runs on the main thread (admin API and
 * timer), so its own state needs no lock; the sandboxes themselves live in
 * the registry (sbx.c), which the workers read.
 *
 * Forecast: every second the claim rate of each policy is folded into an
 * exponentially weighted moving average (weight 0.3 for the newest second),
 * and so is the time one sandbox takes to prepare. The pool aims at
 *
 *	target = min(max, warm + ceil(2 * rate * refill_time) + prewarmed)
 *
 * i.e. enough to cover twice the claims expected while one refill runs,
 * on top of the configured floor. Preparing (keys, CA files, fsync) takes
 * milliseconds, so it runs on a thread of its own: the main loop only
 * decides, and a claim never waits behind a refill.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "ca/ca.h"
#include "cfg/cfg.h"
#include "conn/worker.h"
#include "launcher/launcher.h"
#include "launcher/lnc_proto.h"
#include "sched/canary.h"
#include "sched/pool.h"
#include "sched/pool_int.h"
#include "util/log.h"
#include "util/util.h"

#define POOL_TICK_MS	1000
#define POOL_EWMA_NEW	0.3
/*
 * Refills yield to a burst of claims: while claims keep coming (one in the
 * last POOL_QUIET_MS) and more than half the target is still warm, the
 * pool waits, so that building namespaces does not compete with the
 * claims for the CPU; below half it refills at once.
 */
#define POOL_QUIET_MS	200
/* a sandbox claimed (or used) this recently is not evicted for pool.max:
   its claimer has had no time to use it yet */
#define POOL_CLAIM_GRACE_MS	3000


/* pool_pols is shared with the preparing thread: under pool_mtx */
pthread_mutex_t		  pool_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	  pool_cv = PTHREAD_COND_INITIALIZER;
static pthread_t	  pool_thread;
static int		  pool_thread_up;
static int		  pool_quit;
struct pool_pol		 *pool_pols;
size_t			  pool_npols;
static struct event	 *pool_ev;
static const struct cfg	*(*pool_cfg)(void);
static uint64_t		  pool_rate_ms;	/* last rate update */
static int		  pool_async_n;	/* cold builds in flight, atomic */
/* finished async claims, for the main loop (pool_done_ev): under pool_mtx */
static struct pool_async *pool_done;
static struct event	 *pool_done_ev;

static void	pool_done_cb(evutil_socket_t, short, void *);
struct launcher		 *pool_launcher;	/* netns backend, or NULL */

void
pool_set_launcher(struct launcher *l)
{
	pool_launcher = l;
}

struct launcher *
pool_get_launcher(void)
{
	return pool_launcher;
}

/*
 * Build one sandbox of <policy> with <flags> (SBX_F_POOLED: warm, or
 * SBX_F_LAUNCHED: claimed now). With the netns backend it gets its
 * namespaces before anyone can claim it: it joins the pool only when
 * they are up.
 */
static enum sbx_err
pool_build_from(const struct cfg *cfg, const char *policy, const char *from,
    const char *pool_from, int flags, struct sbx **out)
{
	struct lnc_create_req	 req;
	struct lnc_sandbox	 ls;
	struct ca		*ca;
	enum sbx_err		 e;
	char			 why[200], id[64];

	if (pool_launcher == NULL)
		return sbx_create(cfg, policy, NULL, flags, out);
	/* neither pooled nor launched until it is up: a VM boots for
	   seconds, and a launched sandbox that old would look idle */
	e = sbx_create(cfg, policy, NULL, SBX_F_NETNS, out);
	if (e != SBX_OK)
		return e;
	snprintf(id, sizeof(id), "%s", (*out)->sb_id);
	memset(&req, 0, sizeof(req));
	req.cr_id = id;
	req.cr_from = from;	/* its snapshot's layers (issue 22) */
	if ((ca = ca_get(cfg->c_state_dir, id)) != NULL) {
		req.cr_ca_pem = ca_cert_pem(ca);
		req.cr_ca_len = strlen(req.cr_ca_pem);
	}
	if (launcher_create(pool_launcher, &req, &ls, why, sizeof(why)) ==
	    -1 || sbx_set_addr(*out, &ls.ls_addr) == -1) {
		log_warnx("pool %s: sandbox %s: launcher: %s", policy, id,
		    why);
		sbx_unref(*out);
		*out = NULL;
		sbx_delete(id);
		return SBX_E_LAUNCH;
	}
	(*out)->sb_init_pid = (int)ls.ls_init_pid;
	if (ls.ls_ctl[0] != '\0') {
		log_info("pool %s: sandbox %s: VM ready in %u ms", policy, id,
		    (unsigned)(ls.ls_usec / 1000));
		memcpy((*out)->sb_ctl, ls.ls_ctl, sizeof((*out)->sb_ctl));
		sbx_add_flags(*out, SBX_F_VM);
		/* a warm VM waits paused: no CPU until it is claimed */
		if ((flags & SBX_F_POOLED) &&
		    pool_pause(*out, 0, why, sizeof(why)) == -1)
			log_warnx("pool %s: sandbox %s: %s (left running)",
			    policy, id, why);
	}
	__atomic_store_n(&(*out)->sb_last_used_ms, util_now_ms(),
	    __ATOMIC_RELAXED);
	/* which warm list it joins: set before it can be claimed */
	if (pool_from != NULL)
		snprintf((*out)->sb_pool_from, sizeof((*out)->sb_pool_from),
		    "%s", pool_from);
	sbx_add_flags(*out, flags & (SBX_F_POOLED | SBX_F_LAUNCHED));
	return SBX_OK;
}

/* The pool's own: from launcher.pool.from, the same warm and cold. */
static enum sbx_err
pool_build(const struct cfg *cfg, const char *policy, int flags,
    struct sbx **out)
{
	return pool_build_from(cfg, policy, cfg->c_pool_from, NULL, flags,
	    out);
}

/* Is <from> the snapshot the policies' own pools are built from? */
static int
pool_own_from(const struct cfg *cfg, const char *from)
{
	return from == NULL || (cfg->c_pool_from != NULL &&
	    strcmp(cfg->c_pool_from, from) == 0);
}

int
pool_pause(struct sbx *s, int if_idle, char *why, size_t whysz)
{
	if (!(s->sb_flags & SBX_F_VM) || pool_launcher == NULL) {
		snprintf(why, whysz, "sandbox %s is not a VM", s->sb_id);
		errno = ENOTSUP;
		return -1;
	}
	if (s->sb_flags & SBX_F_PAUSED)
		return 0;
	if (launcher_pause(pool_launcher, s->sb_id, if_idle, why, whysz) ==
	    -1)
		return -1;
	sbx_add_flags(s, SBX_F_PAUSED);
	return 0;
}

int
pool_probe(struct sbx *s, char *res, size_t ressz)
{
	if ((s->sb_flags & SBX_F_VM) || pool_launcher == NULL) {
		snprintf(res, ressz, "sandbox %s is not a netns sandbox of "
		    "this gateway's launcher", s->sb_id);
		errno = ENOTSUP;
		return -1;
	}
	return launcher_probe(pool_launcher, s->sb_id, res, ressz);
}

int
pool_resume(struct sbx *s, char *why, size_t whysz)
{
	if (!(s->sb_flags & SBX_F_VM) || pool_launcher == NULL) {
		snprintf(why, whysz, "sandbox %s is not a VM", s->sb_id);
		errno = ENOTSUP;
		return -1;
	}
	if (!(s->sb_flags & SBX_F_PAUSED))
		return 0;
	if (launcher_resume(pool_launcher, s->sb_id, why, whysz) == -1)
		return -1;
	sbx_clear_flags(s, SBX_F_PAUSED);
	/* its idle time starts again now */
	__atomic_store_n(&s->sb_last_used_ms, util_now_ms(),
	    __ATOMIC_RELAXED);
	return 0;
}

/* MemAvailable of /proc/meminfo in bytes; UINT64_MAX when unknown. */
static uint64_t
mem_available(void)
{
	FILE			*f;
	char			 line[128];
	unsigned long long	 kb;
	uint64_t		 v = UINT64_MAX;

	if ((f = fopen("/proc/meminfo", "re")) == NULL)
		return v;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
			v = (uint64_t)kb * 1024;
			break;
		}
	fclose(f);
	return v;
}

/* The pool of <name> prewarmed from snapshot <from> (NULL: the policy's
 * own), made on first use. Caller holds pool_mtx. */
struct pool_pol *
pol_get_from(const char *name, const char *from)
{
	struct pool_pol	*pp;
	size_t		 i;

	for (i = 0; i < pool_npols; i++) {
		pp = &pool_pols[i];
		if (strcmp(pp->pp_name, name) == 0 && (from == NULL ?
		    pp->pp_from == NULL : pp->pp_from != NULL &&
		    strcmp(pp->pp_from, from) == 0))
			return pp;
	}
	pool_pols = xrealloc(pool_pols, (pool_npols + 1) * sizeof(*pool_pols));
	pp = &pool_pols[pool_npols++];
	memset(pp, 0, sizeof(*pp));
	pp->pp_name = xstrdup(name);
	pp->pp_from = from != NULL ? xstrdup(from) : NULL;
	return pp;
}

static struct pool_pol *
pol_get(const char *name)
{
	return pol_get_from(name, NULL);
}

static void
pool_kick(uint64_t ms)
{
	struct timeval	tv;

	if (pool_ev == NULL)
		return;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(pool_ev, &tv);
}

static size_t
pool_target(const struct cfg *cfg, const struct pool_pol *pp)
{
	size_t	t = 0;

	/* a pool prewarmed from a snapshot holds what prewarm asked for */
	if (cfg->c_launcher_set && pp->pp_from == NULL)
		t = cfg->c_pool_warm + (size_t)ceil(2.0 * pp->pp_rate *
		    pp->pp_refill_ms / 1000.0);
	t += pp->pp_extra;
	return t < cfg->c_pool_max ? t : cfg->c_pool_max;
}

/*
 * The preparing thread: takes one request at a time (a policy with
 * pp_preparing > 0), builds the sandbox without holding pool_mtx, and
 * folds the time it took into the forecast.
 */
static void *
pool_thread_main(void *arg)
{
	struct pool_pol	*pp;
	struct cfg	*cfg;
	struct sbx	*s;
	char		*name, *from;
	uint64_t	 t0;
	double		 ms;
	size_t		 i;
	int		 ok;

	/* refills are background work: requests and claims come first */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
	pthread_mutex_lock(&pool_mtx);
	for (;;) {
		pp = NULL;
		for (i = 0; i < pool_npols && pp == NULL; i++)
			if (pool_pols[i].pp_preparing > 0)
				pp = &pool_pols[i];
		if (pool_quit)
			break;
		if (pp == NULL) {
			pthread_cond_wait(&pool_cv, &pool_mtx);
			continue;
		}
		name = xstrdup(pp->pp_name);
		from = pp->pp_from != NULL ? xstrdup(pp->pp_from) : NULL;
		cfg = cfg_ref(pp->pp_cfg);
		pthread_mutex_unlock(&pool_mtx);

		t0 = util_now_ms();
		ok = (from == NULL ? pool_build(cfg, name, SBX_F_POOLED, &s) :
		    pool_build_from(cfg, name, from, from, SBX_F_POOLED, &s)) ==
		    SBX_OK;
		if (ok)
			sbx_unref(s);
		ms = (double)(util_now_ms() - t0);
		cfg_unref(cfg);

		pthread_mutex_lock(&pool_mtx);
		pp = pol_get_from(name, from);	/* the array may have moved */
		free(from);
		if (pp->pp_preparing > 0)
			pp->pp_preparing--;
		if (!ok) {
			/* a broken image or host must not spin the refill */
			pp->pp_backoff_ms = pp->pp_backoff_ms == 0 ? 1000 :
			    pp->pp_backoff_ms * 2 > 60000 ? 60000 :
			    pp->pp_backoff_ms * 2;
			pp->pp_retry_ms = util_now_ms() + pp->pp_backoff_ms;
			log_warnx("pool %s: could not prepare a sandbox; next "
			    "try in %llu ms", name,
			    (unsigned long long)pp->pp_backoff_ms);
			free(name);
			continue;
		}
		free(name);
		pp->pp_backoff_ms = 0;
		pp->pp_refill_ms = pp->pp_refill_ms == 0 ? ms :
		    (1 - POOL_EWMA_NEW) * pp->pp_refill_ms +
		    POOL_EWMA_NEW * ms;
	}
	pthread_mutex_unlock(&pool_mtx);
	return NULL;
}

/* Ask the thread for one more sandbox of <pp>. Caller holds pool_mtx. */
static void
pool_prepare(const struct cfg *cfg, struct pool_pol *pp)
{
	if (pp->pp_cfg != cfg) {
		cfg_unref(pp->pp_cfg);
		pp->pp_cfg = cfg_ref((struct cfg *)cfg);
	}
	pp->pp_preparing++;
	pthread_cond_signal(&pool_cv);
}

static void
pool_evict(struct pool_pol *pp, struct sbx *s, const char *why)
{
	if (sbx_delete(s->sb_id) == SBX_OK) {
		pp->pp_evicted++;
		log_info("pool %s: sandbox %s evicted (%s)", pp->pp_name,
		    s->sb_id, why);
	}
}

static int
lru_cmp(const void *a, const void *b)
{
	const struct sbx *x = *(struct sbx *const *)a;
	const struct sbx *y = *(struct sbx *const *)b;
	uint64_t	  lx = __atomic_load_n(&x->sb_last_used_ms,
			    __ATOMIC_RELAXED);
	uint64_t	  ly = __atomic_load_n(&y->sb_last_used_ms,
			    __ATOMIC_RELAXED);

	return lx < ly ? -1 : lx > ly;
}

/*
 * One policy: refill one sandbox if below target, drop warm surplus that
 * stayed unclaimed past idle_timeout, evict launched sandboxes idle past
 * idle_timeout or beyond max (least recently used first; never one with
 * open connections). VMs idle past idle_timeout are paused instead, and
 * a paused one is evicted when memory runs short (*pressure, cleared
 * once one went). With launcher.canary due, *canary (if still NULL) gets
 * a reference to a warm sandbox to probe. Returns 1 when more refilling is
 * due.
 */
int
pool_policy_tick(const struct cfg *cfg, struct pool_pol *pp,
    struct sbx **list, size_t n, uint64_t now, int *pressure,
    struct sbx **canary)
{
	struct sbx	**warm, **launched;
	size_t		  i, nwarm = 0, nl = 0, evicted = 0;
	int		  more = 0;

	warm = xcalloc(n + 1, sizeof(*warm));
	launched = xcalloc(n + 1, sizeof(*launched));
	for (i = 0; i < n; i++) {
		if (strcmp(list[i]->sb_policy, pp->pp_name) != 0)
			continue;
		/* warm ones by the pool they wait in; the policy's own pool
		   looks after every launched one */
		if (list[i]->sb_flags & SBX_F_POOLED) {
			if (strcmp(list[i]->sb_pool_from, pp->pp_from != NULL ?
			    pp->pp_from : "") == 0)
				warm[nwarm++] = list[i];
		} else if ((list[i]->sb_flags & SBX_F_LAUNCHED) &&
		    pp->pp_from == NULL)
			launched[nl++] = list[i];
	}
	/* what prewarm asked for and nobody claimed stops counting once it
	   idled too long; the surplus is then dropped below */
	if (pp->pp_extra > 0 && now - pp->pp_extra_ms > cfg->c_pool_idle_ms)
		pp->pp_extra = 0;
	pp->pp_target = pool_target(cfg, pp);
	/* over pool.max, unclaimed warm ones give way first: they are
	   rebuilt in the background, a claimed one is someone's work */
	qsort(warm, nwarm, sizeof(*warm), lru_cmp);
	while (nwarm > 0 && nwarm + nl > cfg->c_pool_max &&
	    sbx_delete(warm[nwarm - 1]->sb_id) == SBX_OK)
		nwarm--;
	qsort(launched, nl, sizeof(*launched), lru_cmp);
	for (i = 0; i < nl; i++) {
		struct sbx *s = launched[i];
		int idle = __atomic_load_n(&s->sb_conns, __ATOMIC_RELAXED) ==
		    0;
		uint64_t used = __atomic_load_n(&s->sb_last_used_ms,
		    __ATOMIC_RELAXED);

		if (idle && (s->sb_flags & SBX_F_PAUSED) && *pressure) {
			/* the least recently used paused VM gives way */
			pool_evict(pp, s, "memory pressure");
			*pressure = 0;
		} else if (idle && nwarm + nl - evicted > cfg->c_pool_max &&
		    used + POOL_CLAIM_GRACE_MS <= now)
			pool_evict(pp, s, "over pool.max");
		else if (idle && now - used > cfg->c_pool_idle_ms &&
		    (s->sb_flags & SBX_F_VM)) {
			/* scale to zero: paused, resumed on its next use
			   (refused while someone is attached to it) */
			char why[160];

			if (!(s->sb_flags & SBX_F_PAUSED) &&
			    pool_pause(s, 1, why, sizeof(why)) == 0)
				log_info("pool %s: sandbox %s paused (idle past "
				    "idle_timeout)", pp->pp_name, s->sb_id);
			continue;
		} else if (idle && now - used > cfg->c_pool_idle_ms)
			pool_evict(pp, s, "idle past idle_timeout");
		else
			continue;
		evicted++;
	}
	nl -= evicted;
	if (nwarm > pp->pp_target / 2 &&
	    now - pp->pp_last_claim_ms < POOL_QUIET_MS) {
		more = 1;	/* look again once the burst is over */
	} else if (now >= pp->pp_retry_ms) {	/* not backing off */
		/* what the thread is preparing counts as warm already */
		while (nwarm + pp->pp_preparing < pp->pp_target &&
		    nwarm + pp->pp_preparing + nl < cfg->c_pool_max) {
			pool_prepare(cfg, pp);
			more = 1;
		}
	}
	if (nwarm + pp->pp_preparing > pp->pp_target && nwarm > 0) {
		/* the oldest unclaimed surplus goes once it idled too long */
		if (now - __atomic_load_n(&warm[0]->sb_last_used_ms,
		    __ATOMIC_RELAXED) > cfg->c_pool_idle_ms &&
		    sbx_delete(warm[0]->sb_id) == SBX_OK) {
			/* gone: not the canary's either */
			memmove(&warm[0], &warm[1], --nwarm * sizeof(*warm));
		}
	}
	/* launcher.canary: one warm netns sandbox per policy, now and then
	   (probed by pool_tick once the lock is released) */
	if (cfg->c_launcher_canary_ms > 0 && canary != NULL && *canary ==
	    NULL && nwarm > 0 && !(warm[0]->sb_flags & SBX_F_VM) &&
	    now - pp->pp_canary_ms >= cfg->c_launcher_canary_ms) {
		pp->pp_canary_ms = now;
		*canary = sbx_ref(warm[0]);
	}
	pp->pp_warm = nwarm;
	pp->pp_launched = nl;
	free(warm);
	free(launched);
	return more;
}

/* The periodic escape canary on <s> (a reference, dropped here). */
static void
pool_canary(struct sbx *s)
{
	json_object	*o = NULL;
	char		 why[200];

	if (canary_probe(s, &o, why, sizeof(why)) == -1)
		log_warnx("canary: sandbox %s: %s", s->sb_id, why);
	else if (json_object_get_boolean(json_object_object_get(o,
	    "passed")))
		log_info("canary: sandbox %s: every containment check passes",
		    s->sb_id);
	json_object_put(o);
	sbx_unref(s);
}

static void
pool_tick(evutil_socket_t fd, short what, void *arg)
{
	const struct cfg	*cfg = pool_cfg();
	struct sbx		**list;
	struct pool_pol		*pp;
	uint64_t		  now = util_now_ms();
	size_t			  i, n;
	double			  inst;
	struct sbx		 *canary = NULL;
	char			**unpin = NULL;
	size_t			  nunpin = 0;
	int			  more = 0, evicted_any, pressure;

	pthread_mutex_lock(&pool_mtx);
	if (now - pool_rate_ms >= POOL_TICK_MS) {
		for (i = 0; i < pool_npols; i++) {
			pp = &pool_pols[i];
			inst = (double)pp->pp_claims_tick * 1000.0 /
			    (double)(now - pool_rate_ms);
			pp->pp_rate = (1 - POOL_EWMA_NEW) * pp->pp_rate +
			    POOL_EWMA_NEW * inst;
			pp->pp_claims_tick = 0;
		}
		pool_rate_ms = now;
	}
	n = sbx_list(&list);
	evicted_any = 0;
	pressure = pool_launcher != NULL && cfg->c_launcher_backend ==
	    CFG_BACKEND_QEMU && mem_available() < cfg->c_qemu_min_free;
	/* warm sandboxes of a policy a reload removed are of no use */
	for (i = 0; i < n; i++)
		if ((list[i]->sb_flags & SBX_F_POOLED) &&
		    cfg_policy_find(cfg, list[i]->sb_policy) == NULL)
			sbx_delete(list[i]->sb_id);
	for (i = 0; i < cfg->c_npolicies; i++) {
		uint64_t before;

		pp = pol_get(cfg->c_policies[i].p_name);
		before = pp->pp_evicted;
		more |= pool_policy_tick(cfg, pp, list, n, now, &pressure,
		    pool_launcher != NULL ? &canary : NULL);
		evicted_any |= pp->pp_evicted != before;
	}
	more |= pool_from_tick(cfg, list, n, now, &unpin, &nunpin);
	pthread_mutex_unlock(&pool_mtx);
	sbx_list_free(list, n);
	pool_unpin(unpin, nunpin);
	if (evicted_any)
		workers_revoke();
	if (canary != NULL)
		pool_canary(canary);
	/* while the thread prepares, look again soon to see it finish */
	pool_kick(more ? 50 : POOL_TICK_MS);
}

int
pool_start(struct event_base *base, const struct cfg *(*cfg_fn)(void))
{
	pool_cfg = cfg_fn;
	pool_rate_ms = util_now_ms();
	if ((pool_ev = evtimer_new(base, pool_tick, NULL)) == NULL ||
	    (pool_done_ev = event_new(base, -1, 0, pool_done_cb, NULL)) ==
	    NULL)
		return -1;
	if (pthread_create(&pool_thread, NULL, pool_thread_main, NULL) != 0)
		return -1;
	pool_thread_up = 1;
	pool_kick(0);
	return 0;
}

/* A warm sandbox of <policy> from the pool prewarmed from <from> (NULL:
 * the policy's own) ready to use (a VM resumed), or NULL. */
static struct sbx *
pool_take_warm(const char *policy, const char *from)
{
	struct pool_pol	*pp;
	struct sbx	*s;
	char		 why[160];

	pthread_mutex_lock(&pool_mtx);
	pp = pol_get_from(policy, from);
	pp->pp_claims++;
	pp->pp_claims_tick++;
	pp->pp_last_claim_ms = util_now_ms();
	for (;;) {
		if ((s = sbx_claim_pooled(policy, from)) == NULL) {
			pp = pol_get_from(policy, from);
			pp->pp_cold++;
			break;
		}
		pp = pol_get_from(policy, from);
		if (pp->pp_warm > 0)
			pp->pp_warm--;
		if (pp->pp_extra > 0)	/* a prewarmed one served its claim */
			pp->pp_extra--;
		pthread_mutex_unlock(&pool_mtx);
		if (!(s->sb_flags & SBX_F_PAUSED) ||
		    pool_resume(s, why, sizeof(why)) == 0) {
			pool_kick(0);	/* refill behind the caller */
			return s;
		}
		/* a VM that cannot run is of no use: the next one */
		log_warnx("pool %s: sandbox %s: %s", policy, s->sb_id, why);
		(void)sbx_delete(s->sb_id);
		sbx_unref(s);
		pthread_mutex_lock(&pool_mtx);
	}
	pthread_mutex_unlock(&pool_mtx);
	return NULL;
}

int
pool_claim_is_slow(void)
{
	const struct cfg	*cfg = pool_cfg();

	return pool_launcher != NULL &&
	    cfg->c_launcher_backend == CFG_BACKEND_QEMU;
}

/* An async claim, from its thread back to the main loop. */
struct pool_async {
	struct pool_async *pa_next;	/* on pool_done */
	char		*pa_policy;
	struct cfg	*pa_cfg;
	pool_claim_cb	 pa_done;
	void		*pa_arg;
	enum sbx_err	 pa_err;
	struct sbx	*pa_sbx;
	int		 pa_warm;
};

/* Queue a finished claim for the main loop; any thread. */
static void
pool_async_finish(struct pool_async *pa)
{
	pthread_mutex_lock(&pool_mtx);
	pa->pa_next = pool_done;
	pool_done = pa;
	pthread_mutex_unlock(&pool_mtx);
	event_active(pool_done_ev, 0, 0);
}

/* On the main loop (or at pool_stop): answer the finished claims. */
static void
pool_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pool_async	*pa, *next;

	pthread_mutex_lock(&pool_mtx);
	pa = pool_done;
	pool_done = NULL;
	pthread_mutex_unlock(&pool_mtx);
	for (; pa != NULL; pa = next) {
		next = pa->pa_next;
		pa->pa_done(pa->pa_err, pa->pa_sbx, pa->pa_warm, pa->pa_arg);
		cfg_unref(pa->pa_cfg);
		free(pa->pa_policy);
		free(pa);
	}
}

static void *
pool_async_build(void *arg)
{
	struct pool_async	*pa = arg;

	pa->pa_err = pool_build(pa->pa_cfg, pa->pa_policy, SBX_F_LAUNCHED,
	    &pa->pa_sbx);
	pool_async_finish(pa);
	__atomic_sub_fetch(&pool_async_n, 1, __ATOMIC_RELEASE);
	return NULL;
}

int
pool_claim_async(const char *policy, pool_claim_cb done, void *arg,
    enum sbx_err *e)
{
	const struct cfg	*cfg = pool_cfg();
	struct pool_async	*pa;
	pthread_attr_t		 attr;
	pthread_t		 t;

	if (cfg_policy_find(cfg, policy) == NULL) {
		*e = SBX_E_POLICY;
		return -1;
	}
	pa = xcalloc(1, sizeof(*pa));
	pa->pa_policy = xstrdup(policy);
	pa->pa_cfg = cfg_ref((struct cfg *)cfg);
	pa->pa_done = done;
	pa->pa_arg = arg;
	if ((pa->pa_sbx = pool_take_warm(policy, NULL)) != NULL) {
		pa->pa_warm = 1;
		pool_async_finish(pa);
		return 0;
	}
	/* cold: the identical sandbox, built off the main loop */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	__atomic_add_fetch(&pool_async_n, 1, __ATOMIC_RELAXED);
	if (pthread_create(&t, &attr, pool_async_build, pa) != 0) {
		__atomic_sub_fetch(&pool_async_n, 1, __ATOMIC_RELAXED);
		pa->pa_err = SBX_E_LAUNCH;
		pool_async_finish(pa);
	}
	pthread_attr_destroy(&attr);
	pool_kick(0);
	return 0;
}

enum sbx_err
pool_claim(const char *policy, struct sbx **out, int *warm)
{
	const struct cfg	*cfg = pool_cfg();
	enum sbx_err		 e;

	if (cfg_policy_find(cfg, policy) == NULL)
		return SBX_E_POLICY;
	if ((*out = pool_take_warm(policy, NULL)) != NULL) {
		*warm = 1;
		return SBX_OK;
	}
	/* cold path: the identical sandbox, built now */
	*warm = 0;
	e = pool_build(cfg, policy, SBX_F_LAUNCHED, out);
	pool_kick(0);
	return e;
}

int
pool_rollback(struct sbx *s, const char *from, char *why, size_t whysz)
{
	const struct cfg	*cfg = pool_cfg();
	struct lnc_create_req	 req;
	struct lnc_sandbox	 ls;
	struct ca		*ca;
	char			 id[64];

	if (pool_launcher == NULL || (s->sb_flags & SBX_F_VM) ||
	    !(s->sb_flags & SBX_F_NETNS)) {
		snprintf(why, whysz, "sandbox %s is not a netns sandbox of "
		    "this gateway's launcher", s->sb_id);
		errno = ENOTSUP;
		return -1;
	}
	snprintf(id, sizeof(id), "%s", s->sb_id);
	/* its old address names no one from here on */
	sbx_clear_addrs(s);
	if (launcher_destroy(pool_launcher, id) == -1)
		log_warnx("rollback %s: destroy: %s", id, strerror(errno));
	memset(&req, 0, sizeof(req));
	req.cr_id = id;
	req.cr_from = from;
	if ((ca = ca_get(cfg->c_state_dir, id)) != NULL) {
		req.cr_ca_pem = ca_cert_pem(ca);
		req.cr_ca_len = strlen(req.cr_ca_pem);
	}
	if (launcher_create(pool_launcher, &req, &ls, why, whysz) == -1 ||
	    sbx_set_addr(s, &ls.ls_addr) == -1) {
		log_warnx("rollback %s: %s (the sandbox is gone)", id, why);
		sbx_delete(id);
		errno = EIO;
		return -1;
	}
	s->sb_init_pid = (int)ls.ls_init_pid;
	log_info("sandbox %s: rolled back to snapshot %s", id, from);
	return 0;
}

/* A sandbox from snapshot <from>: the pool's when it is built from that
 * one, or a warm one prewarmed from it, else built now, identical to the
 * warm ones (issue 22, points 2, 3). */
enum sbx_err
pool_claim_from(const char *policy, const char *from, struct sbx **out,
    int *warm)
{
	const struct cfg	*cfg = pool_cfg();

	if (pool_own_from(cfg, from))
		return pool_claim(policy, out, warm);
	if (cfg_policy_find(cfg, policy) == NULL)
		return SBX_E_POLICY;
	if (pool_launcher == NULL)
		return SBX_E_LAUNCH;
	if ((*out = pool_take_warm(policy, from)) != NULL) {
		*warm = 1;
		return SBX_OK;
	}
	*warm = 0;
	pool_kick(0);
	return pool_build_from(cfg, policy, from, NULL, SBX_F_LAUNCHED, out);
}

long
pool_prewarm(const char *policy, const char *from, size_t count, char *why,
    size_t whysz)
{
	const struct cfg	*cfg = pool_cfg();
	struct pool_pol		*pp;
	size_t			 room, have;

	if (cfg_policy_find(cfg, policy) == NULL) {
		snprintf(why, whysz, "no policy \"%.64s\" in the running "
		    "config", policy);
		errno = EINVAL;
		return -1;
	}
	if (pool_own_from(cfg, from))
		from = NULL;
	else if (pool_launcher == NULL) {
		snprintf(why, whysz, "\"from\" needs launcher.backend netns");
		errno = EINVAL;
		return -1;
	}
	if ((pp = pool_from_pin(policy, from, why, whysz)) == NULL)
		return -1;
	have = pool_target(cfg, pp);
	room = cfg->c_pool_max > have ? cfg->c_pool_max - have : 0;
	if (count > room)
		count = room;
	pp->pp_extra += count;
	pp->pp_extra_ms = util_now_ms();
	pthread_mutex_unlock(&pool_mtx);
	pool_kick(0);
	return (long)count;
}

size_t
pool_stats(struct pool_stat **out)
{
	const struct cfg	*cfg = pool_cfg();
	struct pool_pol		*pp;
	size_t			 i;

	*out = xcalloc(cfg->c_npolicies + 1, sizeof(**out));
	pthread_mutex_lock(&pool_mtx);
	for (i = 0; i < cfg->c_npolicies; i++) {
		pp = pol_get(cfg->c_policies[i].p_name);
		(*out)[i].ps_policy = xstrdup(pp->pp_name);
		(*out)[i].ps_warm = pp->pp_warm;
		(*out)[i].ps_launched = pp->pp_launched;
		(*out)[i].ps_target = pool_target(cfg, pp);
		(*out)[i].ps_rate = pp->pp_rate;
		(*out)[i].ps_refill_ms = pp->pp_refill_ms;
		(*out)[i].ps_claims = pp->pp_claims;
		(*out)[i].ps_claims_cold = pp->pp_cold;
		(*out)[i].ps_evicted = pp->pp_evicted;
	}
	pthread_mutex_unlock(&pool_mtx);
	return cfg->c_npolicies;
}

void
pool_stats_free(struct pool_stat *v, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		free(v[i].ps_policy);
	free(v);
}

void
pool_stop(void)
{
	size_t	i;

	if (pool_ev != NULL)
		event_free(pool_ev);
	pool_ev = NULL;
	if (pool_thread_up) {
		pthread_mutex_lock(&pool_mtx);
		pool_quit = 1;
		pthread_cond_signal(&pool_cv);
		pthread_mutex_unlock(&pool_mtx);
		pthread_join(pool_thread, NULL);
		pool_thread_up = 0;
	}
	/* cold builds in flight end within boot_timeout; their answers go
	   nowhere now, but they release what they hold */
	while (__atomic_load_n(&pool_async_n, __ATOMIC_ACQUIRE) > 0)
		usleep(10000);
	pool_done_cb(-1, 0, NULL);
	if (pool_done_ev != NULL)
		event_free(pool_done_ev);
	pool_done_ev = NULL;
	sbx_drop_pooled();
	for (i = 0; i < pool_npols; i++) {
		free(pool_pols[i].pp_name);
		free(pool_pols[i].pp_from);
		cfg_unref(pool_pols[i].pp_cfg);
	}
	free(pool_pols);
	pool_pols = NULL;
	pool_npols = 0;
}
