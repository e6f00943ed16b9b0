/*
 * Synthetic address map: name <-> IPv4 address of launcher.dns_pool.
 *
 * Addresses are handed out in order, so the address offset in the pool
 * indexes an array (by address: no hashing on the transparent listener's
 * path); names hash into chains with SipHash under a random key, because
 * the names come from sandboxes and must not be able to pile up in one
 * chain. One rwlock: lookups (every transparent connection, and repeated
 * answers for a known name) take it shared and only mark the entry used
 * with relaxed atomics; making a mapping takes it exclusive.
 *
 * When every address is taken, an old mapping gives its address to the
 * new name: the "clock" (second chance) scan over the mappings, oldest
 * first, skips and requeues any entry marked used since the scan last saw
 * it or used within min_idle_ms, and takes the first other one. That is
 * LRU in effect without a list update on every lookup.
 */
#include "config.h"

#include <sys/queue.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <event2/util.h>

#include "dns/dns_synth.h"
#include "util/log.h"
#include "util/util.h"

struct ds_entry {
	struct ds_entry		*e_hnext;	/* name hash chain */
	TAILQ_ENTRY(ds_entry)	 e_clock;	/* oldest (next to look at)
						   at the tail */
	uint64_t		 e_hash;
	uint64_t		 e_used_ms;	/* atomic: last answer/lookup */
	int			 e_ref;		/* atomic: used since the
						   clock last passed */
	int			 e_holds;	/* atomic: live sandboxes
						   holding it: never evicted
						   while > 0 */
	uint32_t		 e_off;		/* address - ds_first */
	size_t			 e_len;
	char			 e_name[];
};

TAILQ_HEAD(ds_clock, ds_entry);

struct dns_synth {
	pthread_rwlock_t	 ds_lock;
	struct net_cidr		 ds_pool;
	uint32_t		 ds_first;	/* host order */
	uint32_t		 ds_cap;	/* addresses (= names) at most */
	uint32_t		 ds_next;	/* next never used offset */
	uint64_t		 ds_min_idle_ms;
	struct ds_entry		**ds_byaddr;	/* [ds_cap] */
	struct ds_entry		**ds_buckets;
	size_t			 ds_mask;	/* buckets - 1 */
	size_t			 ds_n;
	struct ds_clock		 ds_clock;	/* most recently queued first */
	uint64_t		 ds_evictions;
	uint64_t		 ds_k0;
	uint64_t		 ds_k1;
};

struct dns_synth *
dns_synth_new(const struct net_cidr *pool, size_t max_names,
    uint64_t min_idle_ms)
{
	struct dns_synth	*ds;
	uint32_t		 net, mask, be;
	uint64_t		 usable, first, last;
	size_t			 nb;

	if (pool == NULL || pool->nc_addr.na_family != AF_INET ||
	    pool->nc_prefix < 0 || pool->nc_prefix > 32)
		return NULL;
	if (max_names == 0)
		max_names = DNS_SYNTH_MAX_NAMES;
	memcpy(&be, pool->nc_addr.na_bytes, 4);
	mask = pool->nc_prefix == 0 ? 0 :
	    (uint32_t)(0xffffffffUL << (32 - pool->nc_prefix));
	net = ntohl(be) & mask;
	first = net;
	last = (uint64_t)(net | ~mask);
	if (pool->nc_prefix <= 30) {
		first++;		/* network and broadcast addresses */
		last--;
	}
	usable = last - first + 1;

	ds = xcalloc(1, sizeof(*ds));
	if (pthread_rwlock_init(&ds->ds_lock, NULL) != 0)
		fatalx("pthread_rwlock_init");
	ds->ds_pool = *pool;
	ds->ds_first = (uint32_t)first;
	ds->ds_cap = (uint32_t)(usable < max_names ? usable : max_names);
	ds->ds_min_idle_ms = min_idle_ms;
	ds->ds_byaddr = xcalloc(ds->ds_cap, sizeof(*ds->ds_byaddr));
	for (nb = 16; nb < ds->ds_cap; nb <<= 1)
		;
	ds->ds_buckets = xcalloc(nb, sizeof(*ds->ds_buckets));
	ds->ds_mask = nb - 1;
	TAILQ_INIT(&ds->ds_clock);
	evutil_secure_rng_get_bytes(&ds->ds_k0, sizeof(ds->ds_k0));
	evutil_secure_rng_get_bytes(&ds->ds_k1, sizeof(ds->ds_k1));
	return ds;
}

void
dns_synth_free(struct dns_synth *ds)
{
	struct ds_entry	*e;

	if (ds == NULL)
		return;
	while ((e = TAILQ_FIRST(&ds->ds_clock)) != NULL) {
		TAILQ_REMOVE(&ds->ds_clock, e, e_clock);
		free(e);
	}
	free(ds->ds_byaddr);
	free(ds->ds_buckets);
	pthread_rwlock_destroy(&ds->ds_lock);
	free(ds);
}

static struct ds_entry *
ds_find(struct dns_synth *ds, const char *name, size_t len, uint64_t h)
{
	struct ds_entry	*e;

	for (e = ds->ds_buckets[h & ds->ds_mask]; e != NULL; e = e->e_hnext)
		if (e->e_hash == h && e->e_len == len &&
		    memcmp(e->e_name, name, len) == 0)
			return e;
	return NULL;
}

/* Mark <e> used; called under either lock, so atomics only. */
static void
ds_touch(struct ds_entry *e, uint64_t now)
{
	/* skip the stores when nothing changes: fewer shared cache-line
	   writes from the workers */
	if (!__atomic_load_n(&e->e_ref, __ATOMIC_RELAXED))
		__atomic_store_n(&e->e_ref, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&e->e_used_ms, __ATOMIC_RELAXED) != now)
		__atomic_store_n(&e->e_used_ms, now, __ATOMIC_RELAXED);
}

static void
ds_addr(const struct dns_synth *ds, uint32_t off, struct net_addr *out)
{
	uint32_t	be = htonl(ds->ds_first + off);

	memset(out, 0, sizeof(*out));
	out->na_family = AF_INET;
	memcpy(out->na_bytes, &be, 4);
}

static void
ds_unhash(struct dns_synth *ds, struct ds_entry *victim)
{
	struct ds_entry	**ep;

	for (ep = &ds->ds_buckets[victim->e_hash & ds->ds_mask]; *ep != NULL;
	    ep = &(*ep)->e_hnext)
		if (*ep == victim) {
			*ep = victim->e_hnext;
			return;
		}
}

/*
 * Under the write lock: the offset of an address free for a new name, or
 * -1. Evicts the mapping that held it.
 */
static int64_t
ds_take_slot(struct dns_synth *ds, uint64_t now)
{
	struct ds_entry	*e;
	uint64_t	 used;
	uint32_t	 off;
	int		 i;

	if (ds->ds_next < ds->ds_cap)
		return ds->ds_next++;
	/*
	 * Readers are out (we hold the lock exclusive), so no mark comes
	 * back while we scan: clearing marks ends within one turn of the
	 * clock, and only entries kept for min_idle_ms count against the
	 * scan budget.
	 */
	for (i = 0; i < DNS_SYNTH_SCAN_MAX; ) {
		if ((e = TAILQ_LAST(&ds->ds_clock, ds_clock)) == NULL)
			return -1;
		TAILQ_REMOVE(&ds->ds_clock, e, e_clock);
		TAILQ_INSERT_HEAD(&ds->ds_clock, e, e_clock);
		if (__atomic_load_n(&e->e_ref, __ATOMIC_RELAXED)) {
			/* second chance: to the front, unmarked */
			__atomic_store_n(&e->e_ref, 0, __ATOMIC_RELAXED);
			continue;
		}
		/* a sandbox that resolved it may still use it */
		if (__atomic_load_n(&e->e_holds, __ATOMIC_RELAXED) > 0) {
			i++;
			continue;
		}
		/* a worker's clock may be a little ahead of ours */
		used = __atomic_load_n(&e->e_used_ms, __ATOMIC_RELAXED);
		if (used > now || now - used < ds->ds_min_idle_ms) {
			i++;
			continue;
		}
		TAILQ_REMOVE(&ds->ds_clock, e, e_clock);
		ds_unhash(ds, e);
		off = e->e_off;
		ds->ds_byaddr[off] = NULL;
		ds->ds_n--;
		ds->ds_evictions++;
		log_debug("dns: synthetic address of %s reused (idle %llu ms)",
		    e->e_name, (unsigned long long)(now - used));
		free(e);
		return off;
	}
	return -1;
}

static int
ds_get(struct dns_synth *ds, const char *name, struct net_addr *out,
    int hold)
{
	struct ds_entry	*e;
	uint64_t	 h, now;
	int64_t		 off;
	size_t		 len;

	if (name == NULL || (len = strlen(name)) == 0 ||
	    len > DNS_SYNTH_NAME_MAX)
		return -1;
	h = util_siphash(ds->ds_k0, ds->ds_k1, (const unsigned char *)name, len);
	now = util_now_ms();

	pthread_rwlock_rdlock(&ds->ds_lock);
	if ((e = ds_find(ds, name, len, h)) != NULL) {
		ds_touch(e, now);
		if (hold)
			__atomic_add_fetch(&e->e_holds, 1, __ATOMIC_RELAXED);
		ds_addr(ds, e->e_off, out);
		pthread_rwlock_unlock(&ds->ds_lock);
		return 0;
	}
	pthread_rwlock_unlock(&ds->ds_lock);

	pthread_rwlock_wrlock(&ds->ds_lock);
	/* readers touched entries with their clock while we waited: take
	   ours now, so none of theirs is ahead of it */
	now = util_now_ms();
	/* another thread may have made it in between */
	if ((e = ds_find(ds, name, len, h)) != NULL) {
		ds_touch(e, now);
		if (hold)
			__atomic_add_fetch(&e->e_holds, 1, __ATOMIC_RELAXED);
		ds_addr(ds, e->e_off, out);
		pthread_rwlock_unlock(&ds->ds_lock);
		return 0;
	}
	if ((off = ds_take_slot(ds, now)) < 0) {
		pthread_rwlock_unlock(&ds->ds_lock);
		return -1;
	}
	e = xmalloc(sizeof(*e) + len + 1);
	e->e_hash = h;
	e->e_used_ms = now;
	e->e_ref = 0;
	e->e_holds = hold;
	e->e_off = (uint32_t)off;
	e->e_len = len;
	memcpy(e->e_name, name, len + 1);
	e->e_hnext = ds->ds_buckets[h & ds->ds_mask];
	ds->ds_buckets[h & ds->ds_mask] = e;
	TAILQ_INSERT_HEAD(&ds->ds_clock, e, e_clock);
	ds->ds_byaddr[off] = e;
	ds->ds_n++;
	ds_addr(ds, e->e_off, out);
	pthread_rwlock_unlock(&ds->ds_lock);
	return 0;
}

int
dns_synth_get(struct dns_synth *ds, const char *name, struct net_addr *out)
{
	return ds_get(ds, name, out, 0);
}

int
dns_synth_hold(struct dns_synth *ds, const char *name, struct net_addr *out)
{
	return ds_get(ds, name, out, 1);
}

void
dns_synth_release(struct dns_synth *ds, const struct net_addr *addr)
{
	struct ds_entry	*e;
	uint32_t	 be, a;

	if (addr == NULL || addr->na_family != AF_INET)
		return;
	memcpy(&be, addr->na_bytes, 4);
	a = ntohl(be);
	if (a < ds->ds_first || a - ds->ds_first >= ds->ds_cap)
		return;
	pthread_rwlock_rdlock(&ds->ds_lock);
	if ((e = ds->ds_byaddr[a - ds->ds_first]) != NULL &&
	    __atomic_load_n(&e->e_holds, __ATOMIC_RELAXED) > 0)
		__atomic_sub_fetch(&e->e_holds, 1, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&ds->ds_lock);
}

int
dns_synth_lookup(struct dns_synth *ds, const struct net_addr *addr,
    char *name, size_t namesz)
{
	struct ds_entry	*e;
	uint32_t	 be, a;
	int		 rv = 0;

	if (namesz < DNS_SYNTH_NAME_MAX + 1)
		return -1;
	if (addr == NULL || addr->na_family != AF_INET)
		return 0;
	memcpy(&be, addr->na_bytes, 4);
	a = ntohl(be);
	if (a < ds->ds_first || a - ds->ds_first >= ds->ds_cap)
		return 0;
	pthread_rwlock_rdlock(&ds->ds_lock);
	if ((e = ds->ds_byaddr[a - ds->ds_first]) != NULL) {
		ds_touch(e, util_now_ms());
		memcpy(name, e->e_name, e->e_len + 1);
		rv = 1;
	}
	pthread_rwlock_unlock(&ds->ds_lock);
	return rv;
}

int
dns_synth_in_pool(const struct dns_synth *ds, const struct net_addr *addr)
{
	return addr != NULL && net_cidr_contains(&ds->ds_pool, addr);
}

size_t
dns_synth_count(struct dns_synth *ds)
{
	size_t	n;

	pthread_rwlock_rdlock(&ds->ds_lock);
	n = ds->ds_n;
	pthread_rwlock_unlock(&ds->ds_lock);
	return n;
}

size_t
dns_synth_capacity(const struct dns_synth *ds)
{
	return ds->ds_cap;
}

uint64_t
dns_synth_evictions(struct dns_synth *ds)
{
	uint64_t	n;

	pthread_rwlock_rdlock(&ds->ds_lock);
	n = ds->ds_evictions;
	pthread_rwlock_unlock(&ds->ds_lock);
	return n;
}
