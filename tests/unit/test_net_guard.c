/* Check suite for src/dns/net_guard.c: literals, ranges, the guard. */
#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <stdlib.h>
#include <string.h>

#include "dns/net_guard.h"
#include "unit.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* Parse a test address strictly, independent of the code under test. */
static struct net_addr
addr(const char *s)
{
	struct net_addr	a;

	memset(&a, 0, sizeof(a));
	if (inet_pton(AF_INET, s, a.na_bytes) == 1)
		a.na_family = AF_INET;
	else if (inet_pton(AF_INET6, s, a.na_bytes) == 1)
		a.na_family = AF_INET6;
	else
		ck_abort_msg("bad test address %s", s);
	return a;
}

static void
add_cidr(struct net_guard *g, const char *s, int allow)
{
	struct net_cidr	c;

	ck_assert_msg(net_cidr_parse(s, &c) == 0, "parse %s", s);
	if (allow)
		net_guard_allow(g, &c);
	else
		net_guard_deny(g, &c);
}

/* net_cidr_parse */

static const struct {
	const char	*in;
	int		 ret;
	int		 family;
	int		 prefix;
} cidr_cases[] = {
	{ "10.0.0.0/8",		 0, AF_INET,	8 },
	{ "0.0.0.0/0",		 0, AF_INET,	0 },
	{ "172.16.0.0/12",	 0, AF_INET,	12 },
	{ "100.64.0.0/10",	 0, AF_INET,	10 },
	{ "1.2.3.4",		 0, AF_INET,	32 },
	{ "1.2.3.4/32",		 0, AF_INET,	32 },
	{ "::/0",		 0, AF_INET6,	0 },
	{ "::1",		 0, AF_INET6,	128 },
	{ "fe80::/10",		 0, AF_INET6,	10 },
	{ "2001:db8::/32",	 0, AF_INET6,	32 },
	{ "::ffff:0:0/96",	 0, AF_INET6,	96 },
	{ "10.0.0.1/8",		-1, 0, 0 },	/* host bits set */
	{ "172.17.0.0/12",	-1, 0, 0 },
	{ "fe80::1/10",		-1, 0, 0 },
	{ "fec0::/9",		-1, 0, 0 },
	{ "10/8",		-1, 0, 0 },	/* not inet_aton's 0.0.0.10 */
	{ "010.0.0.0/8",	-1, 0, 0 },
	{ "1.2.3.4/33",		-1, 0, 0 },
	{ "::/129",		-1, 0, 0 },
	{ "1.2.3.4/",		-1, 0, 0 },
	{ "1.2.3.4/-1",		-1, 0, 0 },
	{ "1.2.3.4/ 8",		-1, 0, 0 },
	{ "1.2.3.0/24x",	-1, 0, 0 },
	{ "/8",			-1, 0, 0 },
	{ "",			-1, 0, 0 },
	{ "[::1]/128",		-1, 0, 0 },
	{ "example.com/24",	-1, 0, 0 },
	{ "1.2.3.4/8/8",	-1, 0, 0 },
};

START_TEST(test_cidr_parse)
{
	struct net_cidr	c;
	int		r;

	r = net_cidr_parse(cidr_cases[_i].in, &c);
	ck_assert_msg(r == cidr_cases[_i].ret, "%s: got %d",
	    cidr_cases[_i].in, r);
	if (r == 0) {
		ck_assert_int_eq(c.nc_addr.na_family, cidr_cases[_i].family);
		ck_assert_int_eq(c.nc_prefix, cidr_cases[_i].prefix);
	}
}
END_TEST

/* net_host_literal */

static const struct {
	const char	*in;
	int		 ret;
	const char	*text;		/* canonical form when ret == 1 */
} lit_cases[] = {
	{ "127.0.0.1",			 1, "127.0.0.1" },
	{ "2130706433",			 1, "127.0.0.1" },
	{ "0x7f000001",			 1, "127.0.0.1" },
	{ "0X7F000001",			 1, "127.0.0.1" },
	{ "017700000001",		 1, "127.0.0.1" },
	{ "0177.0.0.1",			 1, "127.0.0.1" },
	{ "0x7f.1",			 1, "127.0.0.1" },
	{ "0x7f.0.0.1",			 1, "127.0.0.1" },
	{ "127.1",			 1, "127.0.0.1" },
	{ "127.0.1",			 1, "127.0.0.1" },
	{ "127.0.0.1.",			 1, "127.0.0.1" },
	{ "2852039166",			 1, "169.254.169.254" },
	{ "0xa9fea9fe",			 1, "169.254.169.254" },
	{ "0xa9.0xfe.0xa9.0xfe",	 1, "169.254.169.254" },
	{ "0251.0376.0251.0376",	 1, "169.254.169.254" },
	{ "169.254.43518",		 1, "169.254.169.254" },
	{ "169.16689662",		 1, "169.254.169.254" },
	{ "0",				 1, "0.0.0.0" },
	{ "0x0",			 1, "0.0.0.0" },
	{ "4294967295",			 1, "255.255.255.255" },
	{ "0xffffffff",			 1, "255.255.255.255" },
	{ "00000000000000000000010.1", 1, "8.0.0.1" },
	{ "93.184.216.34",		 1, "93.184.216.34" },
	{ "::1",			 1, "::1" },
	{ "[::1]",			 1, "::1" },
	{ "[::ffff:127.0.0.1]",		 1, "::ffff:127.0.0.1" },
	{ "::FFFF:7F00:1",		 1, "::ffff:127.0.0.1" },
	{ "2606:4700:0:0:0:0:0:1111",	 1, "2606:4700::1111" },
	{ "2001:0DB8:0000:0000:0001:0000:0000:0001", 1, "2001:db8::1:0:0:1" },
	{ "[FE80::1]",			 1, "fe80::1" },
	{ "example.com",		 0, NULL },
	{ "localhost",			 0, NULL },
	{ "1password.com",		 0, NULL },
	{ "123.example",		 0, NULL },
	{ "1.2.3.example",		 0, NULL },
	{ "0x1.example",		 0, NULL },
	{ "a1.b2",			 0, NULL },
	{ "example.com.",		 0, NULL },
	{ "1.2.3.4.5",			-1, NULL },
	{ "256.1.1.1",			-1, NULL },
	{ "1.256.1.1",			-1, NULL },
	{ "1.1.1.256",			-1, NULL },
	{ "1.1.65536",			-1, NULL },
	{ "1.16777216",			-1, NULL },
	{ "0x100000000",		-1, NULL },
	{ "4294967296",			-1, NULL },
	{ "99999999999999999999999",	-1, NULL },
	{ "0x1g",			-1, NULL },
	{ "0x",				-1, NULL },
	{ "08",				-1, NULL },
	{ "09.1.1.1",			-1, NULL },
	{ "1..2.3",			-1, NULL },
	{ ".1.2.3",			-1, NULL },
	{ "1.2.3.4..",			-1, NULL },
	{ "1.2.3.4 ",			-1, NULL },
	{ " 1.2.3.4",			-1, NULL },
	{ "+1.2.3.4",			-1, NULL },
	{ "1.2.3.-4",			 0, NULL },	/* a (bad) name */
	{ "example.123",		-1, NULL },
	{ "[::1",			-1, NULL },
	{ "::1]",			-1, NULL },
	{ "[]",				-1, NULL },
	{ "[1.2.3.4]",			-1, NULL },
	{ "[example.com]",		-1, NULL },
	{ "fe80::1%eth0",		-1, NULL },
	{ "[fe80::1%25eth0]",		-1, NULL },
	{ "1:2",			-1, NULL },
	{ ":::",			-1, NULL },
	{ "::ffff:127.1",		-1, NULL },
	{ "example.com:443",		-1, NULL },
};

START_TEST(test_host_literal)
{
	struct net_addr	a;
	char		buf[64];
	int		r;

	memset(&a, 0, sizeof(a));
	r = net_host_literal(lit_cases[_i].in, &a);
	ck_assert_msg(r == lit_cases[_i].ret, "\"%s\": got %d want %d",
	    lit_cases[_i].in, r, lit_cases[_i].ret);
	if (r == 1) {
		net_addr_format(&a, buf, sizeof(buf));
		ck_assert_str_eq(buf, lit_cases[_i].text);
	}
}
END_TEST

START_TEST(test_host_literal_null_out)
{
	ck_assert_int_eq(net_host_literal("127.1", NULL), 1);
	ck_assert_int_eq(net_host_literal("a.test", NULL), 0);
	ck_assert_int_eq(net_host_literal("1.2.3.4.5", NULL), -1);
}
END_TEST

/* The default deny list, with addresses inside and just outside. */

static const struct {
	const char	*addr;
	const char	*why;		/* NULL: allowed */
} deny_cases[] = {
	{ "0.0.0.0",		"0.0.0.0/8" },
	{ "0.255.255.255",	"0.0.0.0/8" },
	{ "1.0.0.0",		NULL },
	{ "9.255.255.255",	NULL },
	{ "10.0.0.0",		"10.0.0.0/8" },
	{ "10.255.255.255",	"10.0.0.0/8" },
	{ "11.0.0.0",		NULL },
	{ "100.63.255.255",	NULL },
	{ "100.64.0.0",		"100.64.0.0/10" },
	{ "100.127.255.255",	"100.64.0.0/10" },
	{ "100.128.0.0",	NULL },
	{ "126.255.255.255",	NULL },
	{ "127.0.0.1",		"127.0.0.0/8" },
	{ "127.255.255.255",	"127.0.0.0/8" },
	{ "128.0.0.0",		NULL },
	{ "169.253.255.255",	NULL },
	{ "169.254.0.0",	"169.254.0.0/16" },
	{ "169.254.169.254",	"169.254.0.0/16" },
	{ "169.255.0.0",	NULL },
	{ "172.15.255.255",	NULL },
	{ "172.16.0.0",		"172.16.0.0/12" },
	{ "172.31.255.255",	"172.16.0.0/12" },
	{ "172.32.0.0",		NULL },
	{ "191.255.255.255",	NULL },
	{ "192.0.0.0",		"192.0.0.0/24" },
	{ "192.0.0.255",	"192.0.0.0/24" },
	{ "192.0.1.0",		NULL },
	{ "192.0.2.0",		"192.0.2.0/24" },
	{ "192.0.2.255",	"192.0.2.0/24" },
	{ "192.0.3.0",		NULL },
	{ "192.88.98.255",	NULL },
	{ "192.88.99.1",	"192.88.99.0/24" },
	{ "192.88.100.0",	NULL },
	{ "192.167.255.255",	NULL },
	{ "192.168.0.0",	"192.168.0.0/16" },
	{ "192.168.255.255",	"192.168.0.0/16" },
	{ "192.169.0.0",	NULL },
	{ "198.17.255.255",	NULL },
	{ "198.18.0.0",		"198.18.0.0/15" },
	{ "198.19.255.255",	"198.18.0.0/15" },
	{ "198.20.0.0",		NULL },
	{ "198.51.99.255",	NULL },
	{ "198.51.100.7",	"198.51.100.0/24" },
	{ "198.51.101.0",	NULL },
	{ "203.0.112.255",	NULL },
	{ "203.0.113.9",	"203.0.113.0/24" },
	{ "203.0.114.0",	NULL },
	{ "223.255.255.255",	NULL },
	{ "224.0.0.1",		"224.0.0.0/4" },
	{ "239.255.255.255",	"224.0.0.0/4" },
	{ "240.0.0.0",		"240.0.0.0/4" },
	{ "255.255.255.254",	"240.0.0.0/4" },
	{ "255.255.255.255",	"240.0.0.0/4" },
	{ "8.8.8.8",		NULL },
	{ "1.1.1.1",		NULL },
	{ "93.184.216.34",	NULL },
	/* IPv6 ranges */
	{ "::",			"::/128" },
	{ "::1",		"::1/128" },
	{ "100::",		"100::/64" },
	{ "100::ffff:ffff:ffff:ffff", "100::/64" },
	{ "100:0:0:1::",	NULL },
	{ "ff::1",		NULL },
	{ "2001:db8::1",	"2001:db8::/32" },
	{ "2001:db8:ffff:ffff::1", "2001:db8::/32" },
	{ "2001:db7:ffff::1",	NULL },
	{ "2001:db9::1",	NULL },
	{ "fbff:ffff::1",	NULL },
	{ "fc00::1",		"fc00::/7" },
	{ "fdff:ffff::1",	"fc00::/7" },
	{ "fe00::1",		NULL },
	{ "fe7f:ffff::1",	NULL },
	{ "fe80::1",		"fe80::/10" },
	{ "febf:ffff::1",	"fe80::/10" },
	{ "fec0::1",		NULL },
	{ "feff:ffff::1",	NULL },
	{ "ff00::",		"ff00::/8" },
	{ "ff02::1",		"ff00::/8" },
	{ "2606:4700::1111",	NULL },
	{ "2a00:1450:4001:81d::200e", NULL },
	/* IPv4-mapped ::ffff:0:0/96 */
	{ "::ffff:127.0.0.1",	"127.0.0.0/8" },
	{ "::ffff:169.254.169.254", "169.254.0.0/16" },
	{ "::ffff:10.1.2.3",	"10.0.0.0/8" },
	{ "::ffff:0.0.0.0",	"0.0.0.0/8" },
	{ "::ffff:8.8.8.8",	NULL },
	/* IPv4-compatible ::/96; "::" and "::1" are judged above */
	{ "::127.0.0.1",	"127.0.0.0/8" },
	{ "::2",		"0.0.0.0/8" },
	{ "::192.168.1.1",	"192.168.0.0/16" },
	{ "::8.8.8.8",		NULL },
	/* NAT64 64:ff9b::/96 */
	{ "64:ff9b::a9fe:a9fe",	"169.254.0.0/16" },
	{ "64:ff9b::127.0.0.1",	"127.0.0.0/8" },
	{ "64:ff9b::808:808",	NULL },
	{ "64:ff9b:0:1::7f00:1", NULL },	/* not the /96 */
	/* 6to4 2002::/16, IPv4 in bytes 2..5 */
	{ "2002:7f00:1::",	"127.0.0.0/8" },
	{ "2002:a9fe:a9fe::1",	"169.254.0.0/16" },
	{ "2002:c0a8:101::",	"192.168.0.0/16" },
	{ "2002:808:808::1",	NULL },
	/* Teredo 2001::/32: server in bytes 4..7, client ^0xff in 12..15 */
	{ "2001:0:808:808::80ff:fffe",	"127.0.0.0/8" },	/* client */
	{ "2001:0:808:808::5601:5601",	"169.254.0.0/16" },
	{ "2001:0:a00:1::f7f7:f7f7",	"10.0.0.0/8" },		/* server */
	{ "2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.0/24" },
	{ "2001:0:808:808::f7f7:f7f7",	NULL },
	{ "2001:1::80ff:fffe",		NULL },	/* not Teredo */
};

START_TEST(test_default_deny)
{
	struct net_guard	*g;
	struct net_addr		 a;
	char			 why[64];
	int			 r;

	g = net_guard_new();
	ck_assert_ptr_nonnull(g);
	net_guard_deny_default(g);
	a = addr(deny_cases[_i].addr);
	why[0] = '\0';
	r = net_guard_check(g, &a, why, sizeof(why));
	if (deny_cases[_i].why == NULL)
		ck_assert_msg(r == 1, "%s denied (%s)", deny_cases[_i].addr,
		    why);
	else {
		ck_assert_msg(r == 0, "%s allowed", deny_cases[_i].addr);
		ck_assert_str_eq(why, deny_cases[_i].why);
	}
	/* why may be NULL */
	ck_assert_int_eq(net_guard_check(g, &a, NULL, 0), r);
	net_guard_free(g);
}
END_TEST

/* Odd radix forms of denied addresses reach the guard canonicalised. */

static const struct {
	const char	*host;
	const char	*text;
	const char	*why;
} radix_cases[] = {
	{ "2130706433",		"127.0.0.1",	   "127.0.0.0/8" },
	{ "0x7f000001",		"127.0.0.1",	   "127.0.0.0/8" },
	{ "017700000001",	"127.0.0.1",	   "127.0.0.0/8" },
	{ "0177.0.0.1",		"127.0.0.1",	   "127.0.0.0/8" },
	{ "0x7f.1",		"127.0.0.1",	   "127.0.0.0/8" },
	{ "127.1",		"127.0.0.1",	   "127.0.0.0/8" },
	{ "127.0.1",		"127.0.0.1",	   "127.0.0.0/8" },
	{ "2852039166",		"169.254.169.254", "169.254.0.0/16" },
	{ "0xa9.0xfe.0xa9.0xfe", "169.254.169.254", "169.254.0.0/16" },
	{ "012.1",		"10.0.0.1",	   "10.0.0.0/8" },
	{ "3232235777",		"192.168.1.1",	   "192.168.0.0/16" },
	{ "0",			"0.0.0.0",	   "0.0.0.0/8" },
	{ "[::ffff:7f00:1]",	"::ffff:127.0.0.1", "127.0.0.0/8" },
};

START_TEST(test_radix_denied)
{
	struct net_guard	*g;
	struct net_addr		 a;
	char			 buf[64], why[64];

	g = net_guard_new();
	net_guard_deny_default(g);
	ck_assert_int_eq(net_host_literal(radix_cases[_i].host, &a), 1);
	net_addr_format(&a, buf, sizeof(buf));
	ck_assert_str_eq(buf, radix_cases[_i].text);
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 0);
	ck_assert_str_eq(why, radix_cases[_i].why);
	net_guard_free(g);
}
END_TEST

START_TEST(test_public_allowed)
{
	struct net_guard	*g;
	struct net_addr		 a;

	g = net_guard_new();
	net_guard_deny_default(g);
	ck_assert_int_eq(net_host_literal("93.184.216.34", &a), 1);
	ck_assert_int_eq(net_guard_check(g, &a, NULL, 0), 1);
	ck_assert_int_eq(net_host_literal("1572395042", &a), 1);
	ck_assert_int_eq(net_guard_check(g, &a, NULL, 0), 1);
	ck_assert_int_eq(net_host_literal("[2606:4700::1111]", &a), 1);
	ck_assert_int_eq(net_guard_check(g, &a, NULL, 0), 1);
	net_guard_free(g);
}
END_TEST

/* allow_networks: exceptions to the deny list, also through IPv6 forms. */

static const struct {
	const char	*addr;
	int		 allowed;
} allow_cases[] = {
	{ "127.0.0.1",			1 },
	{ "127.0.0.2",			0 },
	{ "::ffff:127.0.0.1",		1 },
	{ "::ffff:127.0.0.2",		0 },
	{ "64:ff9b::7f00:1",		1 },
	{ "2002:7f00:1::",		1 },
	{ "10.1.2.3",			1 },
	{ "10.1.255.255",		1 },
	{ "10.2.0.0",			0 },
	{ "10.0.255.255",		0 },
	{ "::ffff:127.0.0.3",		1 },	/* the IPv6 form itself */
	{ "127.0.0.3",			0 },
	{ "fd00::1",			1 },
	{ "fd00::2",			0 },
	/* both Teredo addresses must pass: a public server is not enough */
	{ "2001:0:808:808::80ff:fffe",	1 },	/* client 127.0.0.1 */
	{ "2001:0:808:808::80ff:fffd",	0 },	/* client 127.0.0.2 */
	{ "2001:0:a00:1::80ff:fffe",	1 },	/* 10.0.0.1, 127.0.0.1 */
	{ "2001:0:a00:1::80ff:fffd",	0 },
	{ "169.254.169.254",		0 },
};

START_TEST(test_allow_exception)
{
	struct net_guard	*g;
	struct net_addr		 a;
	char			 why[64];

	g = net_guard_new();
	net_guard_deny_default(g);
	add_cidr(g, "127.0.0.1/32", 1);
	add_cidr(g, "10.1.0.0/16", 1);
	add_cidr(g, "10.0.0.1", 1);
	add_cidr(g, "::ffff:127.0.0.3/128", 1);
	add_cidr(g, "fd00::1/128", 1);
	a = addr(allow_cases[_i].addr);
	ck_assert_msg(net_guard_check(g, &a, why, sizeof(why)) ==
	    allow_cases[_i].allowed, "%s", allow_cases[_i].addr);
	net_guard_free(g);
}
END_TEST

START_TEST(test_guard_empty_and_custom)
{
	struct net_guard	*g;
	struct net_addr		 a;
	char			 why[64];

	g = net_guard_new();
	a = addr("127.0.0.1");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 1);
	a = addr("::1");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 1);

	add_cidr(g, "8.8.8.0/24", 0);
	add_cidr(g, "2001:4860::/32", 0);
	a = addr("8.8.8.8");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "8.8.8.0/24");
	a = addr("::ffff:8.8.8.8");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "8.8.8.0/24");
	a = addr("2001:4860:4860::8888");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "2001:4860::/32");
	a = addr("8.8.4.4");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 1);
	/* deny everything */
	add_cidr(g, "0.0.0.0/0", 0);
	add_cidr(g, "::/0", 0);
	a = addr("93.184.216.34");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "0.0.0.0/0");
	a = addr("2606:4700::1111");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "::/0");
	/* why is truncated, not overrun */
	ck_assert_int_eq(net_guard_check(g, &a, why, 3), 0);
	ck_assert_str_eq(why, "::");
	net_guard_free(g);
	net_guard_free(NULL);
}
END_TEST

START_TEST(test_guard_many_ranges)
{
	struct net_guard	*g;
	struct net_cidr		 c;
	struct net_addr		 a;
	char			 why[64];
	int			 i;

	/* grows past the first allocation */
	g = net_guard_new();
	for (i = 0; i < 200; i++) {
		memset(&c, 0, sizeof(c));
		c.nc_addr.na_family = AF_INET;
		c.nc_addr.na_bytes[0] = 11;
		c.nc_addr.na_bytes[1] = (uint8_t)i;
		c.nc_prefix = 16;
		net_guard_deny(g, &c);
	}
	a = addr("11.199.0.1");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "11.199.0.0/16");
	a = addr("11.200.0.1");
	ck_assert_int_eq(net_guard_check(g, &a, why, sizeof(why)), 1);
	net_guard_free(g);
}
END_TEST

START_TEST(test_cidr_contains)
{
	struct net_cidr	c;
	struct net_addr	a;

	ck_assert_int_eq(net_cidr_parse("0.0.0.0/0", &c), 0);
	a = addr("255.1.2.3");
	ck_assert_int_eq(net_cidr_contains(&c, &a), 1);
	a = addr("::ffff:1.2.3.4");	/* families never mix here */
	ck_assert_int_eq(net_cidr_contains(&c, &a), 0);

	ck_assert_int_eq(net_cidr_parse("100.64.0.0/10", &c), 0);
	a = addr("100.127.1.1");
	ck_assert_int_eq(net_cidr_contains(&c, &a), 1);
	a = addr("100.128.1.1");
	ck_assert_int_eq(net_cidr_contains(&c, &a), 0);

	ck_assert_int_eq(net_cidr_parse("fe80::/10", &c), 0);
	a = addr("febf::1");
	ck_assert_int_eq(net_cidr_contains(&c, &a), 1);
	a = addr("fec0::1");
	ck_assert_int_eq(net_cidr_contains(&c, &a), 0);

	ck_assert_int_eq(net_cidr_parse("2001:db8::1", &c), 0);
	a = addr("2001:db8::1");
	ck_assert_int_eq(net_cidr_contains(&c, &a), 1);
	a = addr("2001:db8::2");
	ck_assert_int_eq(net_cidr_contains(&c, &a), 0);
}
END_TEST

START_TEST(test_from_sockaddr)
{
	struct sockaddr_in	sin;
	struct sockaddr_in6	sin6;
	struct sockaddr_un	sun;
	struct net_addr		a;
	char			buf[64];

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(443);
	inet_pton(AF_INET, "93.184.216.34", &sin.sin_addr);
	ck_assert_int_eq(net_addr_from_sockaddr((struct sockaddr *)&sin,
	    &a), 0);
	ck_assert_int_eq(a.na_family, AF_INET);
	net_addr_format(&a, buf, sizeof(buf));
	ck_assert_str_eq(buf, "93.184.216.34");

	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6.sin6_addr);
	ck_assert_int_eq(net_addr_from_sockaddr((struct sockaddr *)&sin6,
	    &a), 0);
	ck_assert_int_eq(a.na_family, AF_INET6);
	net_addr_format(&a, buf, sizeof(buf));
	ck_assert_str_eq(buf, "::ffff:127.0.0.1");

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	ck_assert_int_eq(net_addr_from_sockaddr((struct sockaddr *)&sun,
	    &a), -1);
}
END_TEST

START_TEST(test_addr_format)
{
	struct net_addr	a;
	char		buf[64];

	a = addr("2001:db8:0:0:1:0:0:1");
	net_addr_format(&a, buf, sizeof(buf));
	ck_assert_str_eq(buf, "2001:db8::1:0:0:1");
	a = addr("2001:db8:0:1:1:1:1:1");
	net_addr_format(&a, buf, sizeof(buf));
	ck_assert_str_eq(buf, "2001:db8:0:1:1:1:1:1");
	a = addr("::");
	net_addr_format(&a, buf, sizeof(buf));
	ck_assert_str_eq(buf, "::");
	a = addr("10.0.0.1");
	net_addr_format(&a, buf, 5);	/* truncated, terminated */
	ck_assert_str_eq(buf, "10.0");
	memset(&a, 0, sizeof(a));	/* no family: empty text */
	net_addr_format(&a, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
}
END_TEST

/* RFC 8305: the families alternate, the first address's first */
START_TEST(test_interleave)
{
	struct net_addr	 a[5];
	char		 b[5][64];
	int		 i;

	a[0] = addr("::1");
	a[1] = addr("::2");
	a[2] = addr("::3");
	a[3] = addr("10.0.0.1");
	a[4] = addr("10.0.0.2");
	net_addrs_interleave(a, 5);
	for (i = 0; i < 5; i++)
		net_addr_format(&a[i], b[i], sizeof(b[i]));
	ck_assert_str_eq(b[0], "::1");
	ck_assert_str_eq(b[1], "10.0.0.1");
	ck_assert_str_eq(b[2], "::2");
	ck_assert_str_eq(b[3], "10.0.0.2");
	ck_assert_str_eq(b[4], "::3");
	a[0] = addr("10.0.0.1");
	a[1] = addr("10.0.0.2");
	net_addrs_interleave(a, 2);	/* one family: unchanged */
	net_addr_format(&a[1], b[1], sizeof(b[1]));
	ck_assert_str_eq(b[1], "10.0.0.2");
}
END_TEST

Suite *
suite_net_guard(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("net_guard");

	tc = tcase_create("cidr");
	tcase_add_loop_test(tc, test_cidr_parse, 0, NELEM(cidr_cases));
	tcase_add_test(tc, test_cidr_contains);
	suite_add_tcase(s, tc);

	tc = tcase_create("literal");
	tcase_add_loop_test(tc, test_host_literal, 0, NELEM(lit_cases));
	tcase_add_test(tc, test_host_literal_null_out);
	tcase_add_test(tc, test_from_sockaddr);
	tcase_add_test(tc, test_addr_format);
	tcase_add_test(tc, test_interleave);
	suite_add_tcase(s, tc);

	tc = tcase_create("guard");
	tcase_add_loop_test(tc, test_default_deny, 0, NELEM(deny_cases));
	tcase_add_loop_test(tc, test_radix_denied, 0, NELEM(radix_cases));
	tcase_add_test(tc, test_public_allowed);
	tcase_add_loop_test(tc, test_allow_exception, 0, NELEM(allow_cases));
	tcase_add_test(tc, test_guard_empty_and_custom);
	tcase_add_test(tc, test_guard_many_ranges);
	suite_add_tcase(s, tc);

	return s;
}
