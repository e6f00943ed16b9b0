/*
 * Synthetic addresses: the DNS stub answers a sandbox's A query for a name
 * its policy allows with an IPv4 address of launcher.dns_pool that stands
 * for that name, and the transparent listener turns a connection to such
 * an address back into the name. The gateway never connects to a synthetic
 * address: it resolves the name itself and checks what it got.
 *
 * One map per process, shared by the stub and every worker. A name keeps
 * its address for the life of the map, except that a full map reuses the
 * address of a mapping idle for at least <min_idle_ms> (see
 * dns_synth_get()). The map is tied to its pool: changing dns_pool needs a
 * restart.
 */
#ifndef AIRLOCK_DNS_SYNTH_H
#define AIRLOCK_DNS_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "dns/net_guard.h"

#define DNS_SYNTH_NAME_MAX	253	/* RFC 1035, without the trailing dot */

/*
 * Bound on the names kept, whatever the pool's size: about 300 bytes of
 * memory each, so 40 MiB at most; the default pool (198.18.0.0/15, 131070
 * usable addresses) stays just under it.
 */
#define DNS_SYNTH_MAX_NAMES	131072

/*
 * A mapping answered or looked up this recently is never taken over by
 * another name: a client caching an answer past its TTL (60 s) must not
 * find the address pointing elsewhere. When every candidate is this
 * recent, dns_synth_get() fails and the stub answers SERVFAIL.
 */
#define DNS_SYNTH_MIN_IDLE_MS	(10 * 60 * 1000)

/* Recent mappings one dns_synth_get() passes, at most, to find one to
   evict. */
#define DNS_SYNTH_SCAN_MAX	64

struct dns_synth;

/*
 * A map over <pool> (IPv4; borrowed, copied). Its addresses are handed
 * out in order from the first usable one: the network and broadcast
 * addresses are skipped for prefixes up to /30, none for /31 and /32. At
 * most min(usable addresses, <max_names>) names are kept (<max_names> 0:
 * DNS_SYNTH_MAX_NAMES). Returns NULL for a pool that is not IPv4.
 */
struct dns_synth *dns_synth_new(const struct net_cidr *pool, size_t max_names,
	    uint64_t min_idle_ms);
void	dns_synth_free(struct dns_synth *);	/* NULL ok */

/*
 * The address of <name> (normalised: lowercase, no trailing dot; borrowed,
 * copied), given one if it has none: the next never used address, or when
 * all are taken, the one of the least recently used mapping idle for at
 * least min_idle_ms. The eviction is a second-chance "clock" over the
 * mappings, oldest first: one used since the clock last passed it goes
 * back to the front unmarked, so the scan approximates LRU without a list
 * update on every lookup. It gives up after passing DNS_SYNTH_SCAN_MAX
 * mappings that are unmarked but used within min_idle_ms. Returns 0 and
 * fills <out>, or -1 for an empty or too long name or when nothing can be
 * evicted.
 */
int	dns_synth_get(struct dns_synth *, const char *name, struct net_addr *out);

/*
 * dns_synth_get() for a sandbox that keeps the answer (the DNS stub, per
 * sandbox: dns_names.c): the mapping is also held, and a held mapping is
 * never evicted, whatever its idle time, until every holder released it
 * (issue 24, point 5: a sandbox filling the map cannot repoint another
 * sandbox's cached address). Same returns.
 */
int	dns_synth_hold(struct dns_synth *, const char *name,
	    struct net_addr *out);
/* Give back one hold on the mapping of <addr> (from dns_synth_hold). */
void	dns_synth_release(struct dns_synth *, const struct net_addr *addr);

/*
 * The name <addr> stands for, copied into <name> (<namesz> at least
 * DNS_SYNTH_NAME_MAX + 1). Returns 1 when mapped, 0 when <addr> is outside
 * the pool or stands for no name, -1 when <namesz> is too small. Takes the
 * lock shared: this runs for every transparent connection.
 */
int	dns_synth_lookup(struct dns_synth *, const struct net_addr *addr,
	    char *name, size_t namesz);

/* Is <addr> in the pool (mapped or not)? No lock. */
int	dns_synth_in_pool(const struct dns_synth *, const struct net_addr *);

size_t	dns_synth_count(struct dns_synth *);		/* names mapped */
size_t	dns_synth_capacity(const struct dns_synth *);	/* names at most */
uint64_t dns_synth_evictions(struct dns_synth *);	/* since creation */

#endif
