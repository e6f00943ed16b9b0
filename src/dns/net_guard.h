/*
 * Destination guard: which addresses the gateway may connect to.
 * Pure functions, no I/O; shared read-only by all workers once built.
 */
#ifndef AIRLOCK_NET_GUARD_H
#define AIRLOCK_NET_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct net_addr {
	int		na_family;	/* AF_INET or AF_INET6 */
	uint8_t		na_bytes[16];	/* network order; 4 used for AF_INET */
};

struct net_cidr {
	struct net_addr	nc_addr;
	int		nc_prefix;	/* 0..32 or 0..128 */
};

struct net_guard;

/*
 * Parse "ADDR/PREFIX" or a bare address (host prefix). Bits beyond the
 * prefix must be zero. Returns 0 or -1.
 */
int	net_cidr_parse(const char *, struct net_cidr *);

/*
 * Is <host> an IP literal? Accepts IPv6 with or without brackets and IPv4
 * in every form inet_aton(3) takes (decimal "2130706433", octal "0177.1",
 * hex "0x7f.0.0.1", short "127.1"). Returns 1 and fills <out> for a
 * literal, 0 for a name, -1 for something numeric-looking but invalid
 * (e.g. "1.2.3.4.5", "0x1g"), which callers must refuse.
 */
int	net_host_literal(const char *host, struct net_addr *out);

/* Canonical text: dotted quad, or RFC 5952 IPv6 without brackets. */
void	net_addr_format(const struct net_addr *, char *, size_t);
/* Reorder <a> in place so that the families alternate, the first
   address's family first (RFC 8305 section 4). */
void	net_addrs_interleave(struct net_addr *a, size_t n);
int	net_addr_from_sockaddr(const struct sockaddr *, struct net_addr *);
int	net_cidr_contains(const struct net_cidr *, const struct net_addr *);

/* A guard starts empty (everything allowed). */
struct net_guard *net_guard_new(void);
void	net_guard_free(struct net_guard *);
/* SPEC's "default" deny list (see SPEC "Details tests rely on"). */
void	net_guard_deny_default(struct net_guard *);
void	net_guard_deny(struct net_guard *, const struct net_cidr *);
void	net_guard_allow(struct net_guard *, const struct net_cidr *);

/*
 * Returns 1 when <a> may be connected to: not in a deny range, or in an
 * allow range. IPv6 addresses that embed an IPv4 address (::ffff:0:0/96,
 * ::/96, 64:ff9b::/96, 2002::/16, Teredo 2001::/32) are judged by the IPv4
 * address they carry, against both lists. On 0, <why> (may be NULL) gets
 * the denied range as text, e.g. "127.0.0.0/8".
 */
int	net_guard_check(const struct net_guard *, const struct net_addr *a,
	    char *why, size_t whysz);

#endif
