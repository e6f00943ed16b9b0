/*
 * The names each sandbox resolved through the DNS stub (issue 24, points
 * 5 and 6). Per sandbox: the set of names it was given a synthetic
 * address for, each mapping held in the shared map (dns_synth_hold) so no
 * other sandbox's names can take that address over while this sandbox
 * lives; a bound on how many distinct names it may have; and, for names
 * allowed only by a wildcard rule, a bound on how many new ones it may
 * add per minute (a wildcard lets a workload encode data in the names it
 * asks for). Used by the stub's thread only: no lock.
 */
#ifndef AIRLOCK_DNS_NAMES_H
#define AIRLOCK_DNS_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "dns/net_guard.h"

struct dns_synth;
struct dns_names;

/* Defaults of launcher.dns.max_names and .new_names_per_minute. */
#define DNS_NAMES_MAX_DEFAULT		4096
#define DNS_NAMES_PER_MIN_DEFAULT	30

enum dns_names_verdict {
	DNS_NAMES_KNOWN = 0,	/* this sandbox has it: its address */
	DNS_NAMES_NEW,		/* added: its address */
	DNS_NAMES_OVER_BOUND,	/* max_names distinct names already */
	DNS_NAMES_OVER_RATE,	/* wildcard: too many new names this minute */
	DNS_NAMES_NO_ADDRESS,	/* the shared map has none free */
};

/* Borrows <synth>, which must outlive it. */
struct dns_names *dns_names_new(struct dns_synth *synth);
/* Gives back every hold. NULL ok. */
void	dns_names_free(struct dns_names *);

/*
 * May sandbox <id> have an address for <name> (normalised)? <wildcard>:
 * only a wildcard rule allows it. <max_names> 0 = no bound,
 * <per_minute> 0 = no rate. KNOWN and NEW fill <out>; the others say
 * why not (the stub answers REFUSED, or SERVFAIL for NO_ADDRESS).
 * <count> gets the sandbox's number of names afterwards.
 */
enum dns_names_verdict dns_names_admit(struct dns_names *, const char *id,
	    const char *name, int wildcard, size_t max_names,
	    unsigned per_minute, uint64_t now_ms, struct net_addr *out,
	    size_t *count);

/* Forget sandbox <id>: its holds are given back. */
void	dns_names_forget(struct dns_names *, const char *id);

/* Forget every sandbox <alive> says is gone (returns 0 for it). */
void	dns_names_sweep(struct dns_names *, int (*alive)(const char *id));

/* Sandboxes tracked (tests). */
size_t	dns_names_sandboxes(const struct dns_names *);

#endif
