/*
 * The gateway's own listening endpoints (proxy, transparent, DNS, admin):
 * never an upstream, whatever allow_networks says, so that a sandbox
 * cannot reach the admin API or loop the proxy through itself.
 */
#ifndef AIRLOCK_NET_SELF_H
#define AIRLOCK_NET_SELF_H

#include <stddef.h>

#include "dns/net_guard.h"

struct net_self;
struct cfg;

struct net_self	*net_self_new(void);
/* Every TCP listener of <cfg> (borrowed): proxy, transparent, admin (when
   not a unix socket), and the DNS stub's address. */
struct net_self	*net_self_from_cfg(const struct cfg *);
void		 net_self_free(struct net_self *);	/* NULL ok */
/*
 * Add the listener "IP:PORT" (IPv6 in brackets) of kind <what> ("proxy",
 * "admin", ...; a static string, borrowed). A wildcard address (0.0.0.0,
 * ::) stands for every local address on that port. Returns 0, or -1 when
 * <hostport> is not an IP:PORT (nothing added).
 */
int		 net_self_add(struct net_self *, const char *hostport,
		    const char *what);
/*
 * Is <a>:<port> one of the gateway's own listeners? An unspecified or
 * IPv4-mapped destination is judged by what it reaches. Returns 1 and
 * writes e.g. "the gateway's own proxy listener 127.0.0.1:3128" to <why>
 * (may be NULL), else 0.
 */
int		 net_self_check(const struct net_self *,
		    const struct net_addr *a, int port, char *why,
		    size_t whysz);

#endif
