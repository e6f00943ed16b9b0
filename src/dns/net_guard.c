/*
 * Destination guard: which addresses the gateway may connect to.
 *
 * The guard holds two lists of ranges. An address is refused when it
 * falls in a deny range and in no allow range. IPv6 forms that carry an
 * IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are also judged
 * by the IPv4 address inside, so "::ffff:127.0.0.1" cannot slip past a
 * rule written for 127.0.0.0/8.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/net_guard.h"

struct net_list {
	struct net_cidr	*nl_v;
	size_t		 nl_n;
	size_t		 nl_cap;
};

struct net_guard {
	struct net_list	 ng_deny;
	struct net_list	 ng_allow;
	int		 ng_broken;	/* a range was lost: refuse all */
};

/* SPEC "deny_networks: [default]", in the order SPEC lists them. */
static const char *const net_default_deny[] = {
	"0.0.0.0/8",
	"10.0.0.0/8",
	"100.64.0.0/10",
	"127.0.0.0/8",
	"169.254.0.0/16",
	"172.16.0.0/12",
	"192.0.0.0/24",
	"192.0.2.0/24",
	"192.88.99.0/24",
	"192.168.0.0/16",
	"198.18.0.0/15",
	"198.51.100.0/24",
	"203.0.113.0/24",
	"224.0.0.0/4",
	"240.0.0.0/4",
	"255.255.255.255/32",
	"::/128",
	"::1/128",
	"100::/64",
	"2001:db8::/32",
	"fc00::/7",
	"fe80::/10",
	"ff00::/8",
};

#define NET_MAX_VIEWS	3	/* the address itself + up to two IPv4 */

static int
net_parse_prefix(const char *s, int max)
{
	int	v = 0;

	if (*s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
		if (v > max)
			return -1;
	}
	return v;
}

int
net_cidr_parse(const char *s, struct net_cidr *c)
{
	char		 buf[INET6_ADDRSTRLEN + 8];
	const char	*slash;
	size_t		 len, i;
	int		 max, bits;

	if (s == NULL || c == NULL)
		return -1;
	slash = strchr(s, '/');
	len = slash != NULL ? (size_t)(slash - s) : strlen(s);
	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';

	/*
	 * Strict parsing on purpose: a config that says "10/8" must not be
	 * read as 0.0.0.10/8 the way inet_aton(3) would.
	 */
	memset(c, 0, sizeof(*c));
	if (inet_pton(AF_INET, buf, c->nc_addr.na_bytes) == 1) {
		c->nc_addr.na_family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, buf, c->nc_addr.na_bytes) == 1) {
		c->nc_addr.na_family = AF_INET6;
		max = 128;
	} else
		return -1;

	if (slash == NULL)
		c->nc_prefix = max;
	else if ((c->nc_prefix = net_parse_prefix(slash + 1, max)) < 0)
		return -1;

	/* Host bits set usually means a typo in the range: refuse it. */
	for (i = 0; i < (size_t)max / 8; i++) {
		bits = c->nc_prefix - (int)i * 8;
		if (bits >= 8)
			continue;
		if (bits <= 0) {
			if (c->nc_addr.na_bytes[i] != 0)
				return -1;
		} else if (c->nc_addr.na_bytes[i] & (0xff >> bits))
			return -1;
	}
	return 0;
}

/* One inet_aton(3) component: decimal, octal (0...) or hex (0x...). */
static int
net_v4_part(const char *s, size_t len, uint32_t max, uint32_t *out)
{
	uint64_t	v = 0;
	unsigned	base = 10, d;
	size_t		i = 0;
	char		ch;

	if (len == 0)
		return -1;
	if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		i = 2;
		if (len == 2)
			return -1;	/* bare "0x" is refused */
	} else if (len >= 2 && s[0] == '0') {
		base = 8;
		i = 1;
	}
	for (; i < len; i++) {
		ch = s[i];
		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a') + 10;
		else if (ch >= 'A' && ch <= 'F')
			d = (unsigned)(ch - 'A') + 10;
		else
			return -1;
		if (d >= base)
			return -1;
		v = v * base + d;
		/* checked at every digit so long inputs cannot wrap */
		if (v > max)
			return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/*
 * IPv4 in every form inet_aton(3) takes: a, a.b, a.b.c, a.b.c.d; the last
 * part fills the remaining bytes. Unlike some inet_aton versions, values
 * that overflow their part are errors, as is trailing garbage.
 */
static int
net_v4_parse(const char *s, size_t len, uint8_t out[4])
{
	const char	*p, *end = s + len, *dot;
	uint32_t	 parts[4], v, last_max;
	size_t		 n = 0, i;

	for (p = s; ; p = dot + 1) {
		if (n == 4)
			return -1;
		dot = memchr(p, '.', (size_t)(end - p));
		if (dot == NULL)
			dot = end;
		if (net_v4_part(p, (size_t)(dot - p), UINT32_MAX,
		    &parts[n]) == -1)
			return -1;
		n++;
		if (dot == end)
			break;
	}
	/* all but the last part are single bytes */
	last_max = n == 1 ? UINT32_MAX : (UINT32_MAX >> ((n - 1) * 8));
	for (i = 0; i + 1 < n; i++)
		if (parts[i] > 0xff)
			return -1;
	if (parts[n - 1] > last_max)
		return -1;
	v = parts[n - 1];
	for (i = 0; i + 1 < n; i++)
		v |= parts[i] << (24 - 8 * i);
	out[0] = (uint8_t)(v >> 24);
	out[1] = (uint8_t)(v >> 16);
	out[2] = (uint8_t)(v >> 8);
	out[3] = (uint8_t)v;
	return 0;
}

int
net_host_literal(const char *host, struct net_addr *out)
{
	char		 buf[INET6_ADDRSTRLEN + 2];
	struct net_addr	 a;
	const char	*lab;
	size_t		 len;

	if (host == NULL)
		return -1;
	len = strlen(host);
	memset(&a, 0, sizeof(a));

	if (host[0] == '[' || strchr(host, ':') != NULL) {
		/* Names never hold ':' or '[': this is IPv6 or garbage. */
		if (host[0] == '[') {
			if (len < 2 || host[len - 1] != ']')
				return -1;
			host++;
			len -= 2;
		}
		if (len == 0 || len >= sizeof(buf))
			return -1;
		memcpy(buf, host, len);
		buf[len] = '\0';
		if (inet_pton(AF_INET6, buf, a.na_bytes) != 1)
			return -1;
		a.na_family = AF_INET6;
		goto found;
	}

	/* "127.0.0.1." is the same host as "127.0.0.1". */
	if (len > 1 && host[len - 1] == '.')
		len--;
	if (len == 0)
		return 0;

	/*
	 * Numeric-looking means the last label starts with a digit: no
	 * top-level domain does, so "1password.com" and "123.example" stay
	 * names while "1.2.3.4.5", "256.1.1.1" and "0x1g" are bad literals.
	 */
	for (lab = host + len; lab > host && lab[-1] != '.'; lab--)
		;
	if (lab == host + len) {
		/* empty last label ("1.2.3.."): judge by the one before */
		if (len >= 2 && host[len - 2] >= '0' && host[len - 2] <= '9')
			return -1;
		return 0;
	}
	if (*lab < '0' || *lab > '9')
		return 0;
	if (net_v4_parse(host, len, a.na_bytes) == -1)
		return -1;
	a.na_family = AF_INET;

 found:
	if (out != NULL)
		*out = a;
	return 1;
}

void
net_addr_format(const struct net_addr *a, char *buf, size_t bufsz)
{
	char	tmp[INET6_ADDRSTRLEN];

	if (bufsz == 0)
		return;
	if (a == NULL || (a->na_family != AF_INET &&
	    a->na_family != AF_INET6) ||
	    inet_ntop(a->na_family, a->na_bytes, tmp, sizeof(tmp)) == NULL)
		tmp[0] = '\0';
	/* glibc's inet_ntop already writes RFC 5952 text */
	snprintf(buf, bufsz, "%s", tmp);
}

int
net_addr_from_sockaddr(const struct sockaddr *sa, struct net_addr *a)
{
	const struct sockaddr_in	*sin;
	const struct sockaddr_in6	*sin6;

	if (sa == NULL || a == NULL)
		return -1;
	memset(a, 0, sizeof(*a));
	switch (sa->sa_family) {
	case AF_INET:
		sin = (const struct sockaddr_in *)(const void *)sa;
		a->na_family = AF_INET;
		memcpy(a->na_bytes, &sin->sin_addr, 4);
		return 0;
	case AF_INET6:
		sin6 = (const struct sockaddr_in6 *)(const void *)sa;
		a->na_family = AF_INET6;
		memcpy(a->na_bytes, &sin6->sin6_addr, 16);
		return 0;
	default:
		return -1;
	}
}

int
net_cidr_contains(const struct net_cidr *c, const struct net_addr *a)
{
	int	bits = c->nc_prefix, i;

	if (c->nc_addr.na_family != a->na_family)
		return 0;
	for (i = 0; bits >= 8; i++, bits -= 8)
		if (c->nc_addr.na_bytes[i] != a->na_bytes[i])
			return 0;
	if (bits > 0 && ((c->nc_addr.na_bytes[i] ^ a->na_bytes[i]) &
	    (0xff << (8 - bits)) & 0xff))
		return 0;
	return 1;
}

struct net_guard *
net_guard_new(void)
{
	return calloc(1, sizeof(struct net_guard));
}

void
net_guard_free(struct net_guard *g)
{
	if (g == NULL)
		return;
	free(g->ng_deny.nl_v);
	free(g->ng_allow.nl_v);
	free(g);
}

static void
net_list_add(struct net_guard *g, struct net_list *l,
    const struct net_cidr *c)
{
	struct net_cidr	*v;
	size_t		 cap;

	if (l->nl_n == l->nl_cap) {
		cap = l->nl_cap == 0 ? 32 : l->nl_cap * 2;
		v = reallocarray(l->nl_v, cap, sizeof(*v));
		if (v == NULL) {
			/* losing a deny range would fail open: refuse all */
			g->ng_broken = 1;
			return;
		}
		l->nl_v = v;
		l->nl_cap = cap;
	}
	l->nl_v[l->nl_n++] = *c;
}

void
net_guard_deny(struct net_guard *g, const struct net_cidr *c)
{
	net_list_add(g, &g->ng_deny, c);
}

void
net_guard_allow(struct net_guard *g, const struct net_cidr *c)
{
	net_list_add(g, &g->ng_allow, c);
}

void
net_guard_deny_default(struct net_guard *g)
{
	struct net_cidr	c;
	size_t		i;

	for (i = 0; i < sizeof(net_default_deny) /
	    sizeof(net_default_deny[0]); i++) {
		if (net_cidr_parse(net_default_deny[i], &c) == -1) {
			g->ng_broken = 1;	/* cannot happen; fail closed */
			continue;
		}
		net_guard_deny(g, &c);
	}
}

static void
net_v4_view(struct net_addr *v, const uint8_t *b, int teredo)
{
	int	i;

	memset(v, 0, sizeof(*v));
	v->na_family = AF_INET;
	for (i = 0; i < 4; i++)
		v->na_bytes[i] = teredo ? b[i] ^ 0xff : b[i];
}

/*
 * The addresses <a> stands for: itself, plus every IPv4 address it
 * carries. Returns how many were written to <v>.
 */
static size_t
net_views(const struct net_addr *a, struct net_addr v[NET_MAX_VIEWS])
{
	static const uint8_t	 mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0,
				    0, 0, 0xff, 0xff };
	static const uint8_t	 nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
	static const uint8_t	 zero[12];
	const uint8_t		*b = a->na_bytes;
	size_t			 n = 0;

	v[n++] = *a;
	if (a->na_family != AF_INET6)
		return n;

	if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0)
		net_v4_view(&v[n++], b + 12, 0);
	else if (memcmp(b, zero, 12) == 0) {
		/* "::" and "::1" are IPv6's own, not 0.0.0.0 / 0.0.0.1 */
		if (b[12] != 0 || b[13] != 0 || b[14] != 0 || b[15] > 1)
			net_v4_view(&v[n++], b + 12, 0);
	} else if (b[0] == 0x20 && b[1] == 0x02)
		net_v4_view(&v[n++], b + 2, 0);		/* 6to4 */
	else if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
		/* Teredo: server, then the obfuscated client address */
		net_v4_view(&v[n++], b + 4, 0);
		net_v4_view(&v[n++], b + 12, 1);
	}
	return n;
}

static const struct net_cidr *
net_list_find(const struct net_list *l, const struct net_addr *a)
{
	size_t	i;

	for (i = 0; i < l->nl_n; i++)
		if (net_cidr_contains(&l->nl_v[i], a))
			return &l->nl_v[i];
	return NULL;
}

int
net_guard_check(const struct net_guard *g, const struct net_addr *a,
    char *why, size_t whysz)
{
	struct net_addr		 v[NET_MAX_VIEWS];
	const struct net_cidr	*d;
	char			 txt[INET6_ADDRSTRLEN];
	size_t			 n, i;

	if (g->ng_broken) {
		if (why != NULL && whysz > 0)
			snprintf(why, whysz, "guard incomplete");
		return 0;
	}
	if (a->na_family != AF_INET && a->na_family != AF_INET6) {
		if (why != NULL && whysz > 0)
			snprintf(why, whysz, "unknown address family");
		return 0;
	}
	/* An exception naming the address as given covers all it carries. */
	if (net_list_find(&g->ng_allow, a) != NULL)
		return 1;

	n = net_views(a, v);
	for (i = 0; i < n; i++) {
		if ((d = net_list_find(&g->ng_deny, &v[i])) == NULL)
			continue;
		if (net_list_find(&g->ng_allow, &v[i]) != NULL)
			continue;
		if (why != NULL && whysz > 0) {
			net_addr_format(&d->nc_addr, txt, sizeof(txt));
			snprintf(why, whysz, "%s/%d", txt, d->nc_prefix);
		}
		return 0;
	}
	return 1;
}

void
net_addrs_interleave(struct net_addr *a, size_t n)
{
	struct net_addr	 out[16];
	size_t		 i = 0, j = 0, o = 0;
	int		 first, turn = 0;

	if (n < 2 || n > sizeof(out) / sizeof(out[0]))
		return;
	first = a[0].na_family;
	/* i: the next of the first family, j: the next of the other; each
	   two turns take at least one address while some are left */
	while (o < n) {
		if (turn == 0) {
			while (i < n && a[i].na_family != first)
				i++;
			if (i < n)
				out[o++] = a[i++];
		} else {
			while (j < n && a[j].na_family == first)
				j++;
			if (j < n)
				out[o++] = a[j++];
		}
		turn = !turn;
	}
	memcpy(a, out, n * sizeof(out[0]));
}
