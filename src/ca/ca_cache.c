/*
 * The leaf cache shared by all workers: (CA generation, host) -> X509.
 *
 * Sharded so that workers minting for different hosts rarely meet on a
 * lock (HAProxy ssl_gencert, SSLsplit cachefkcrt). Each shard has its own
 * mutex, chained hash table and LRU list, and a fixed share of the
 * capacity, so the LRU order is exact within a shard and approximate
 * across them. Signing (tens of microseconds) happens outside the shard
 * lock; two workers missing the same host at once both sign, and the
 * first to insert wins.
 *
 * Hosts come from the sandbox (SNI, request lines), which we do not trust:
 * the table hash is SipHash with a per-cache random key, so chains cannot
 * be lengthened on purpose.
 *
 * Entries hold a certificate reference and the CA's generation, never the
 * CA itself, so a dropped CA's leaves just age out of the LRU.
 */
#include "config.h"

#include <sys/queue.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/asn1.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "ca/ca.h"
#include "util/log.h"
#include "util/util.h"

#define CC_SHARDS_MAX	16
#define CC_SHARD_MIN	64	/* below this per shard, fewer shards */
#define CC_REMINT_S	3600	/* re-mint leaves closer than this to expiry */
#define CC_ALIGN	64	/* one cache line per shard header */

struct cc_entry {
	LIST_ENTRY(cc_entry)	 ce_chain;
	TAILQ_ENTRY(cc_entry)	 ce_lru;
	uint64_t		 ce_hash;
	uint64_t		 ce_gen;
	time_t			 ce_not_after;
	X509			*ce_cert;	/* one reference, ours */
	size_t			 ce_hostlen;
	char			 ce_host[];
};

LIST_HEAD(cc_chain, cc_entry);
TAILQ_HEAD(cc_lru, cc_entry);

struct cc_shard {
	pthread_mutex_t	 cs_lock;
	struct cc_chain	*cs_table;
	size_t		 cs_mask;	/* buckets - 1, a power of two less 1 */
	size_t		 cs_cap;
	size_t		 cs_n;
	struct cc_lru	 cs_lru;	/* most recently used first */
	uint64_t	 cs_hits;
	uint64_t	 cs_misses;
} __attribute__((aligned(CC_ALIGN)));	/* no false sharing of locks */

struct ca_cache {
	struct cc_shard	*cc_shards;
	size_t		 cc_nshards;
	uint64_t	 cc_k0;
	uint64_t	 cc_k1;
};

struct ca_cache *
ca_cache_new(size_t capacity)
{
	struct ca_cache	*cc;
	struct cc_shard	*cs;
	size_t		 i, nb;
	void		*mem;

	cc = xcalloc(1, sizeof(*cc));
	cc->cc_nshards = capacity / CC_SHARD_MIN;
	if (cc->cc_nshards > CC_SHARDS_MAX)
		cc->cc_nshards = CC_SHARDS_MAX;
	if (cc->cc_nshards == 0)
		cc->cc_nshards = 1;
	if (posix_memalign(&mem, CC_ALIGN,
	    cc->cc_nshards * sizeof(*cc->cc_shards)) != 0)
		fatalx("posix_memalign");
	memset(mem, 0, cc->cc_nshards * sizeof(*cc->cc_shards));
	cc->cc_shards = mem;
	if (RAND_bytes((unsigned char *)&cc->cc_k0, sizeof(cc->cc_k0)) != 1 ||
	    RAND_bytes((unsigned char *)&cc->cc_k1, sizeof(cc->cc_k1)) != 1)
		fatalx("RAND_bytes failed");

	for (i = 0; i < cc->cc_nshards; i++) {
		cs = &cc->cc_shards[i];
		/* the first (capacity % n) shards take one more each */
		cs->cs_cap = capacity / cc->cc_nshards +
		    (i < capacity % cc->cc_nshards ? 1 : 0);
		for (nb = 1; nb < cs->cs_cap; nb <<= 1)
			;
		cs->cs_table = xcalloc(nb, sizeof(*cs->cs_table));
		cs->cs_mask = nb - 1;
		TAILQ_INIT(&cs->cs_lru);
		if (pthread_mutex_init(&cs->cs_lock, NULL) != 0)
			fatalx("pthread_mutex_init");
	}
	return cc;
}

static void
cc_entry_free(struct cc_entry *ce)
{
	X509_free(ce->ce_cert);
	free(ce);
}

/* Unlink <ce> from its shard's table and LRU; the caller frees it. */
static void
cc_unlink(struct cc_shard *cs, struct cc_entry *ce)
{
	LIST_REMOVE(ce, ce_chain);
	TAILQ_REMOVE(&cs->cs_lru, ce, ce_lru);
	cs->cs_n--;
}

void
ca_cache_free(struct ca_cache *cc)
{
	struct cc_shard	*cs;
	struct cc_entry	*ce;
	size_t		 i;

	if (cc == NULL)
		return;
	for (i = 0; i < cc->cc_nshards; i++) {
		cs = &cc->cc_shards[i];
		while ((ce = TAILQ_FIRST(&cs->cs_lru)) != NULL) {
			cc_unlink(cs, ce);
			cc_entry_free(ce);
		}
		free(cs->cs_table);
		pthread_mutex_destroy(&cs->cs_lock);
	}
	free(cc->cc_shards);
	free(cc);
}

/* Called with cs_lock held. */
static struct cc_entry *
cc_find(struct cc_shard *cs, uint64_t h, uint64_t gen, const char *host,
    size_t len)
{
	struct cc_entry	*ce;

	LIST_FOREACH(ce, &cs->cs_table[h & cs->cs_mask], ce_chain)
		if (ce->ce_hash == h && ce->ce_gen == gen &&
		    ce->ce_hostlen == len &&
		    memcmp(ce->ce_host, host, len) == 0)
			return ce;
	return NULL;
}

/*
 * A hit, called with cs_lock held: to the front of the LRU, and a new
 * reference for the caller.
 */
static X509 *
cc_hit(struct cc_shard *cs, struct cc_entry *ce)
{
	TAILQ_REMOVE(&cs->cs_lru, ce, ce_lru);
	TAILQ_INSERT_HEAD(&cs->cs_lru, ce, ce_lru);
	X509_up_ref(ce->ce_cert);
	return ce->ce_cert;
}

/* Wall-clock notAfter of <x>, from the certificate itself. */
static time_t
cc_not_after(X509 *x, time_t now)
{
	int	days, secs;

	if (ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(x)) != 1)
		return now;		/* unreadable: re-mint next time */
	return now + (time_t)days * 86400 + secs;
}

X509 *
ca_cache_get(struct ca_cache *cc, struct ca *ca, const char *host,
    uint64_t validity_ms, int *minted)
{
	struct cc_shard	*cs;
	struct cc_entry	*ce, *ne;
	X509		*x, *ret;
	uint64_t	 gen, h;
	size_t		 len;
	time_t		 now;

	if (minted != NULL)
		*minted = 0;
	if (cc == NULL || ca == NULL || host == NULL)
		return NULL;
	gen = ca_generation(ca);
	len = strlen(host);
	h = util_siphash(cc->cc_k0 ^ gen, cc->cc_k1, (const unsigned char *)host,
	    len);
	cs = &cc->cc_shards[(h >> 32) % cc->cc_nshards];

	now = time(NULL);
	pthread_mutex_lock(&cs->cs_lock);
	if ((ce = cc_find(cs, h, gen, host, len)) != NULL) {
		if (ce->ce_not_after - now >= CC_REMINT_S) {
			cs->cs_hits++;
			ret = cc_hit(cs, ce);
			pthread_mutex_unlock(&cs->cs_lock);
			return ret;
		}
		cc_unlink(cs, ce);
		cc_entry_free(ce);
	}
	cs->cs_misses++;
	pthread_mutex_unlock(&cs->cs_lock);

	if ((x = ca_mint_leaf(ca, host, validity_ms)) == NULL)
		return NULL;
	if (minted != NULL)
		*minted = 1;
	if (cs->cs_cap == 0)
		return x;		/* caching disabled */

	ne = xmalloc(sizeof(*ne) + len + 1);
	ne->ce_hash = h;
	ne->ce_gen = gen;
	ne->ce_not_after = cc_not_after(x, now);
	ne->ce_cert = x;
	ne->ce_hostlen = len;
	memcpy(ne->ce_host, host, len + 1);

	pthread_mutex_lock(&cs->cs_lock);
	if ((ce = cc_find(cs, h, gen, host, len)) != NULL) {
		if (ce->ce_not_after - now >= CC_REMINT_S) {
			/* another worker minted it meanwhile: share theirs */
			ret = cc_hit(cs, ce);
			pthread_mutex_unlock(&cs->cs_lock);
			cc_entry_free(ne);
			return ret;
		}
		cc_unlink(cs, ce);
		cc_entry_free(ce);
	}
	while (cs->cs_n >= cs->cs_cap) {
		ce = TAILQ_LAST(&cs->cs_lru, cc_lru);
		cc_unlink(cs, ce);
		cc_entry_free(ce);
	}
	LIST_INSERT_HEAD(&cs->cs_table[h & cs->cs_mask], ne, ce_chain);
	TAILQ_INSERT_HEAD(&cs->cs_lru, ne, ce_lru);
	cs->cs_n++;
	X509_up_ref(x);			/* one for the cache, one returned */
	pthread_mutex_unlock(&cs->cs_lock);
	return x;
}

void
ca_cache_stats(struct ca_cache *cc, uint64_t *hits, uint64_t *misses,
    size_t *entries)
{
	struct cc_shard	*cs;
	uint64_t	 th = 0, tm = 0;
	size_t		 i, tn = 0;

	for (i = 0; i < cc->cc_nshards; i++) {
		cs = &cc->cc_shards[i];
		pthread_mutex_lock(&cs->cs_lock);
		th += cs->cs_hits;
		tm += cs->cs_misses;
		tn += cs->cs_n;
		pthread_mutex_unlock(&cs->cs_lock);
	}
	if (hits != NULL)
		*hits = th;
	if (misses != NULL)
		*misses = tm;
	if (entries != NULL)
		*entries = tn;
}
