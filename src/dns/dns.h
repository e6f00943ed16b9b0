/*
 * Name resolution for upstream connections: upstream.hosts overrides, IP
 * literals, else evdns (system resolv.conf or upstream.resolver). Results
 * come back as addresses; the caller checks every one with the guard and
 * connects only to an address it checked (no second lookup).
 */
#ifndef AIRLOCK_DNS_H
#define AIRLOCK_DNS_H

#include <stddef.h>

#include "dns/net_guard.h"

struct event_base;
struct evdns_base;
struct cfg;
struct dns_req;

#define DNS_MAX_ADDRS	8

/* err 0: naddrs >= 1 addresses; else a static message. */
typedef void (*dns_cb)(const char *err, const struct net_addr *addrs,
	    size_t naddrs, void *arg);

/* Per-worker resolver following cfg->c_upstream_resolver. */
struct evdns_base *dns_base_new(struct event_base *, const struct cfg *);
void	dns_base_free(struct evdns_base *);

/*
 * Resolve <host> (normalised). The callback always runs later from the
 * event loop, never inside this call. Returns a handle for dns_cancel()
 * (valid until the callback ran).
 */
struct dns_req *dns_resolve(struct event_base *, struct evdns_base *,
	    const struct cfg *, const char *host, dns_cb, void *arg);
void	dns_cancel(struct dns_req *);

#endif
