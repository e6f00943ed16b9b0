/*
 * GeoIP: country (ISO 3166 alpha-2) and AS number of an address, from a
 * MaxMind DB opened read-only (libmaxminddb, MMDB_MODE_MMAP). Lookups are
 * thread-safe; one handle per loaded config, so a reload may point at a
 * new file.
 */
#ifndef AIRLOCK_GEO_H
#define AIRLOCK_GEO_H

#include <stdint.h>
#include <sys/socket.h>

struct geo;
struct cfg_policy;
struct net_addr;

/* NULL with *why set when the file cannot be opened or is not an mmdb. */
struct geo	*geo_open(const char *path, char *why, size_t whysz);
void		 geo_close(struct geo *);	/* NULL ok */
/*
 * Look <sa> up. country gets "" when unknown; *asn 0 when unknown.
 * Returns 0, or -1 when the address is not in the database.
 */
int		 geo_lookup(const struct geo *, const struct sockaddr *sa,
		    char country[3], uint32_t *asn);
/* Same for a resolved address (dns/net_guard.h). */
int		 geo_lookup_addr(const struct geo *, const struct net_addr *,
		    char country[3], uint32_t *asn);
/*
 * May <p> (NULL: no rules) use an address in <country> ("" when unknown)?
 * 1 yes; 0 no, with *rule naming the list that refused it,
 * "geo.deny_countries" or "geo.allow_countries" (a non-empty allow list
 * refuses an unknown country).
 */
int		 geo_policy_allows(const struct cfg_policy *p,
		    const char *country, const char **rule);

#endif
