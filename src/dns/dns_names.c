/*
 * Per-sandbox name sets of the DNS stub (dns_names.h). A sandbox's set is
 * an open-addressing table of (SipHash of the name, its address): the
 * name itself stays in the shared map, which holds it for us. Sandboxes
 * hash into chains under the same random key, since their ids are ours
 * but the names are the workload's.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <event2/util.h>

#include "dns/dns_names.h"
#include "dns/dns_synth.h"
#include "util/util.h"

#define DN_BUCKETS	256

struct dn_slot {
	uint64_t	 ns_hash;	/* 0: empty (hashes are made odd) */
	struct net_addr	 ns_addr;
};

struct dn_sbx {
	struct dn_sbx	*d_next;
	uint64_t	 d_hash;
	struct dn_slot	*d_slots;
	size_t		 d_cap;		/* a power of two */
	size_t		 d_n;
	uint64_t	 d_milli;	/* new-name tokens x 1000 */
	uint64_t	 d_last_ms;
	int		 d_bucket_set;
	char		 d_id[];
};

struct dns_names {
	struct dns_synth	*dn_synth;
	struct dn_sbx		*dn_tab[DN_BUCKETS];
	size_t			 dn_n;
	uint64_t		 dn_k0, dn_k1;
};

struct dns_names *
dns_names_new(struct dns_synth *synth)
{
	struct dns_names	*dn;

	dn = xcalloc(1, sizeof(*dn));
	dn->dn_synth = synth;
	evutil_secure_rng_get_bytes(&dn->dn_k0, sizeof(dn->dn_k0));
	evutil_secure_rng_get_bytes(&dn->dn_k1, sizeof(dn->dn_k1));
	return dn;
}

static uint64_t
dn_hash(const struct dns_names *dn, const char *s)
{
	return util_siphash(dn->dn_k0, dn->dn_k1, (const unsigned char *)s,
	    strlen(s)) | 1;
}

static void
dn_sbx_free(struct dns_names *dn, struct dn_sbx *d)
{
	size_t	i;

	for (i = 0; i < d->d_cap; i++)
		if (d->d_slots[i].ns_hash != 0)
			dns_synth_release(dn->dn_synth, &d->d_slots[i].ns_addr);
	free(d->d_slots);
	free(d);
}

void
dns_names_free(struct dns_names *dn)
{
	struct dn_sbx	*d;
	size_t		 i;

	if (dn == NULL)
		return;
	for (i = 0; i < DN_BUCKETS; i++)
		while ((d = dn->dn_tab[i]) != NULL) {
			dn->dn_tab[i] = d->d_next;
			dn_sbx_free(dn, d);
		}
	free(dn);
}

static struct dn_sbx *
dn_sbx_get(struct dns_names *dn, const char *id, int create)
{
	struct dn_sbx	*d;
	uint64_t	 h = dn_hash(dn, id);
	size_t		 len;

	for (d = dn->dn_tab[h % DN_BUCKETS]; d != NULL; d = d->d_next)
		if (d->d_hash == h && strcmp(d->d_id, id) == 0)
			return d;
	if (!create)
		return NULL;
	len = strlen(id);
	d = xcalloc(1, sizeof(*d) + len + 1);
	memcpy(d->d_id, id, len + 1);
	d->d_hash = h;
	d->d_cap = 16;
	d->d_slots = xcalloc(d->d_cap, sizeof(*d->d_slots));
	d->d_next = dn->dn_tab[h % DN_BUCKETS];
	dn->dn_tab[h % DN_BUCKETS] = d;
	dn->dn_n++;
	return d;
}

static struct dn_slot *
dn_slot(struct dn_sbx *d, uint64_t h)
{
	size_t	i = (size_t)(h >> 1) & (d->d_cap - 1);

	while (d->d_slots[i].ns_hash != 0 && d->d_slots[i].ns_hash != h)
		i = (i + 1) & (d->d_cap - 1);
	return &d->d_slots[i];
}

/* Keep the table at most half full. */
static void
dn_grow(struct dn_sbx *d)
{
	struct dn_slot	*old = d->d_slots;
	size_t		 oldcap = d->d_cap, i;

	if ((d->d_n + 1) * 2 <= d->d_cap)
		return;
	d->d_cap *= 2;
	d->d_slots = xcalloc(d->d_cap, sizeof(*d->d_slots));
	for (i = 0; i < oldcap; i++)
		if (old[i].ns_hash != 0)
			*dn_slot(d, old[i].ns_hash) = old[i];
	free(old);
}

/* One new-name token, refilled at <per_minute>, bursts of as many. */
static int
dn_take(struct dn_sbx *d, unsigned per_minute, uint64_t now)
{
	uint64_t	cap = (uint64_t)per_minute * 1000;

	if (!d->d_bucket_set) {
		d->d_milli = cap;
		d->d_last_ms = now;
		d->d_bucket_set = 1;
	}
	if (now > d->d_last_ms) {
		d->d_milli += (now - d->d_last_ms) * per_minute / 60;
		if (d->d_milli > cap)
			d->d_milli = cap;
		d->d_last_ms = now;
	}
	if (d->d_milli < 1000)
		return 0;
	d->d_milli -= 1000;
	return 1;
}

enum dns_names_verdict
dns_names_admit(struct dns_names *dn, const char *id, const char *name,
    int wildcard, size_t max_names, unsigned per_minute, uint64_t now,
    struct net_addr *out, size_t *count)
{
	struct dn_sbx	*d = dn_sbx_get(dn, id, 1);
	struct dn_slot	*sl;
	uint64_t	 h = dn_hash(dn, name);

	*count = d->d_n;
	sl = dn_slot(d, h);
	if (sl->ns_hash == h) {
		struct net_addr	again;

		/* held by us: the same address as before (the lookup only
		   marks it used) */
		(void)dns_synth_get(dn->dn_synth, name, &again);
		*out = sl->ns_addr;
		return DNS_NAMES_KNOWN;
	}
	if (max_names > 0 && d->d_n >= max_names)
		return DNS_NAMES_OVER_BOUND;
	if (wildcard && per_minute > 0 && !dn_take(d, per_minute, now))
		return DNS_NAMES_OVER_RATE;
	if (dns_synth_hold(dn->dn_synth, name, out) == -1)
		return DNS_NAMES_NO_ADDRESS;
	dn_grow(d);
	sl = dn_slot(d, h);
	sl->ns_hash = h;
	sl->ns_addr = *out;
	*count = ++d->d_n;
	return DNS_NAMES_NEW;
}

void
dns_names_forget(struct dns_names *dn, const char *id)
{
	struct dn_sbx	**dp, *d;
	uint64_t	  h = dn_hash(dn, id);

	for (dp = &dn->dn_tab[h % DN_BUCKETS]; (d = *dp) != NULL;
	    dp = &d->d_next)
		if (d->d_hash == h && strcmp(d->d_id, id) == 0) {
			*dp = d->d_next;
			dn->dn_n--;
			dn_sbx_free(dn, d);
			return;
		}
}

void
dns_names_sweep(struct dns_names *dn, int (*alive)(const char *id))
{
	struct dn_sbx	**dp, *d;
	size_t		  i;

	for (i = 0; i < DN_BUCKETS; i++)
		for (dp = &dn->dn_tab[i]; (d = *dp) != NULL; ) {
			if (alive(d->d_id)) {
				dp = &d->d_next;
				continue;
			}
			*dp = d->d_next;
			dn->dn_n--;
			dn_sbx_free(dn, d);
		}
}

size_t
dns_names_sandboxes(const struct dns_names *dn)
{
	return dn->dn_n;
}
