/*
 * The gateway never connects to itself: a request whose destination is
 * one of its own listeners is denied before any connect, so neither the
 * admin API nor a proxy loop can be reached through the proxy.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/util.h>

#include "cfg/cfg.h"
#include "dns/net_self.h"
#include "util/util.h"

struct net_self_ep {
	struct net_addr	 ep_addr;
	int		 ep_port;
	int		 ep_wildcard;	/* 0.0.0.0 or ::: every local address */
	const char	*ep_what;
	char		 ep_text[64];	/* as configured, for reasons */
};

struct net_self {
	struct net_self_ep	*ns_v;
	size_t			 ns_n;
};

struct net_self *
net_self_new(void)
{
	return xcalloc(1, sizeof(struct net_self));
}

void
net_self_free(struct net_self *ns)
{
	if (ns == NULL)
		return;
	free(ns->ns_v);
	free(ns);
}

static int
addr_is_zero(const struct net_addr *a)
{
	static const uint8_t	zero[16];

	return memcmp(a->na_bytes, zero, a->na_family == AF_INET ? 4 : 16) ==
	    0;
}

int
net_self_add(struct net_self *ns, const char *hostport, const char *what)
{
	struct sockaddr_storage	 ss;
	struct net_self_ep	*ep;
	int			 len = sizeof(ss);

	if (evutil_parse_sockaddr_port(hostport, (struct sockaddr *)&ss,
	    &len) != 0)
		return -1;
	ns->ns_v = xrealloc(ns->ns_v, (ns->ns_n + 1) * sizeof(*ns->ns_v));
	ep = &ns->ns_v[ns->ns_n];
	memset(ep, 0, sizeof(*ep));
	if (net_addr_from_sockaddr((struct sockaddr *)&ss, &ep->ep_addr) ==
	    -1)
		return -1;
	ep->ep_port = ss.ss_family == AF_INET ?
	    ntohs(((struct sockaddr_in *)&ss)->sin_port) :
	    ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	ep->ep_wildcard = addr_is_zero(&ep->ep_addr);
	ep->ep_what = what;
	snprintf(ep->ep_text, sizeof(ep->ep_text), "%s", hostport);
	ns->ns_n++;
	return 0;
}

/* ::ffff:a.b.c.d reaches a.b.c.d: judge that. */
static void
net_self_unmap(const struct net_addr *a, struct net_addr *out)
{
	static const uint8_t	mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
				    0xff, 0xff };

	*out = *a;
	if (a->na_family == AF_INET6 && memcmp(a->na_bytes, mapped, 12) == 0) {
		memset(out, 0, sizeof(*out));
		out->na_family = AF_INET;
		memcpy(out->na_bytes, a->na_bytes + 12, 4);
	}
}

static int
addr_is_loopback(const struct net_addr *a)
{
	static const uint8_t	one6[16] = { [15] = 1 };

	if (a->na_family == AF_INET)
		return a->na_bytes[0] == 127;
	return memcmp(a->na_bytes, one6, 16) == 0;
}

static int
addr_eq(const struct net_addr *a, const struct net_addr *b)
{
	return a->na_family == b->na_family && memcmp(a->na_bytes,
	    b->na_bytes, a->na_family == AF_INET ? 4 : 16) == 0;
}

/* An address of one of this host's interfaces (asked when needed: the
   sandboxes' links come and go). */
static int
addr_is_interface(const struct net_addr *a)
{
	struct ifaddrs	*ifa, *i;
	struct net_addr	 na;
	int		 found = 0;

	if (getifaddrs(&ifa) == -1)
		return 1;		/* cannot tell: fail closed */
	for (i = ifa; i != NULL && !found; i = i->ifa_next) {
		if (i->ifa_addr == NULL ||
		    (i->ifa_addr->sa_family != AF_INET &&
		    i->ifa_addr->sa_family != AF_INET6))
			continue;
		if (net_addr_from_sockaddr(i->ifa_addr, &na) == 0 &&
		    addr_eq(&na, a))
			found = 1;
	}
	freeifaddrs(ifa);
	return found;
}

static int
addr_is_local(const struct net_addr *a)
{
	return addr_is_zero(a) || addr_is_loopback(a) || addr_is_interface(a);
}

int
net_self_check(const struct net_self *ns, const struct net_addr *dst,
    int port, char *why, size_t whysz)
{
	const struct net_self_ep	*ep;
	struct net_addr			 a;
	char				 ip[INET6_ADDRSTRLEN];
	size_t				 i;
	int				 hit;

	if (ns == NULL)
		return 0;
	net_self_unmap(dst, &a);
	for (i = 0; i < ns->ns_n; i++) {
		ep = &ns->ns_v[i];
		if (ep->ep_port != port)
			continue;
		/* 0.0.0.0 and :: as a destination reach this host itself */
		if (ep->ep_wildcard)
			hit = addr_is_local(&a);
		else
			hit = addr_eq(&a, &ep->ep_addr) || addr_is_zero(&a);
		if (!hit)
			continue;
		if (why != NULL && whysz > 0) {
			net_addr_format(dst, ip, sizeof(ip));
			snprintf(why, whysz, "destination %s%s%s:%d is the "
			    "gateway's own %s listener %s (never an upstream)",
			    dst->na_family == AF_INET6 ? "[" : "", ip,
			    dst->na_family == AF_INET6 ? "]" : "", port,
			    ep->ep_what, ep->ep_text);
		}
		return 1;
	}
	return 0;
}

struct net_self *
net_self_from_cfg(const struct cfg *c)
{
	struct net_self	*ns = net_self_new();
	size_t		 i;

	for (i = 0; i < c->c_nlisten_proxy; i++)
		(void)net_self_add(ns, c->c_listen_proxy[i], "proxy");
	if (c->c_listen_transparent != NULL)
		(void)net_self_add(ns, c->c_listen_transparent, "transparent");
	if (c->c_listen_socks5 != NULL)
		(void)net_self_add(ns, c->c_listen_socks5, "socks5");
	if (c->c_listen_dns != NULL)
		(void)net_self_add(ns, c->c_listen_dns, "DNS");
	if (c->c_listen_admin != NULL &&
	    strncmp(c->c_listen_admin, "unix:", 5) != 0)
		(void)net_self_add(ns, c->c_listen_admin, "admin");
	return ns;
}
