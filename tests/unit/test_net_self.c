/*
 * net_self: the gateway's own listeners are never an upstream. Exact
 * IP:port matches, IPv4-mapped and unspecified destinations, wildcard
 * listens covering every local address on their port, other ports free.
 */
#include "config.h"

#include <string.h>

#include <check.h>

#include "dns/net_guard.h"
#include "dns/net_self.h"
#include "unit.h"

static struct net_addr
addr(const char *s)
{
	struct net_addr	a;

	ck_assert_int_eq(net_host_literal(s, &a), 1);
	return a;
}

struct self_case {
	const char	*sc_dst;
	int		 sc_port;
	int		 sc_self;	/* expected net_self_check() */
	const char	*sc_what;	/* listener kind in the reason */
};

static const struct self_case self_cases[] = {
	{ "127.0.0.1", 3128, 1, "proxy" },
	{ "::ffff:127.0.0.1", 3128, 1, "proxy" },
	{ "0.0.0.0", 3128, 1, "proxy" },
	{ "::", 3128, 1, "proxy" },
	{ "127.0.0.2", 3128, 0, NULL },		/* not bound there */
	{ "127.0.0.1", 3129, 0, NULL },		/* another port */
	{ "::1", 3180, 1, "admin" },
	{ "127.0.0.1", 3180, 0, NULL },
	{ "10.88.0.1", 3130, 1, "transparent" },
	{ "10.88.0.2", 3130, 0, NULL },
	{ "10.88.0.1", 53, 1, "DNS" },
	/* 0.0.0.0:8080: any local address on the port */
	{ "127.0.0.1", 8080, 1, "proxy" },
	{ "127.45.6.7", 8080, 1, "proxy" },
	{ "::1", 8080, 1, "proxy" },
	{ "0.0.0.0", 8080, 1, "proxy" },
	{ "192.0.2.77", 8080, 0, NULL },	/* not an address of ours */
	{ "192.0.2.77", 8081, 0, NULL },
};

START_TEST(test_net_self_cases)
{
	const struct self_case	*sc = &self_cases[_i];
	struct net_self		*ns = net_self_new();
	struct net_addr		 a = addr(sc->sc_dst);
	char			 why[256];

	ck_assert_int_eq(net_self_add(ns, "127.0.0.1:3128", "proxy"), 0);
	ck_assert_int_eq(net_self_add(ns, "0.0.0.0:8080", "proxy"), 0);
	ck_assert_int_eq(net_self_add(ns, "[::1]:3180", "admin"), 0);
	ck_assert_int_eq(net_self_add(ns, "10.88.0.1:3130", "transparent"), 0);
	ck_assert_int_eq(net_self_add(ns, "10.88.0.1:53", "DNS"), 0);
	ck_assert_int_eq(net_self_add(ns, "not an address", "x"), -1);
	why[0] = '\0';
	ck_assert_msg(net_self_check(ns, &a, sc->sc_port, why, sizeof(why)) ==
	    sc->sc_self, "%s:%d: want %d (%s)", sc->sc_dst, sc->sc_port,
	    sc->sc_self, why);
	if (sc->sc_what != NULL) {
		ck_assert_msg(strstr(why, sc->sc_what) != NULL &&
		    strstr(why, "gateway's own") != NULL, "%s", why);
	}
	net_self_free(ns);
}
END_TEST

START_TEST(test_net_self_empty)
{
	struct net_addr	a = addr("127.0.0.1");

	ck_assert_int_eq(net_self_check(NULL, &a, 3128, NULL, 0), 0);
	net_self_free(NULL);
}
END_TEST

Suite *
suite_net_self(void)
{
	Suite	*s = suite_create("net_self");
	TCase	*tc = tcase_create("self");

	tcase_add_loop_test(tc, test_net_self_cases, 0,
	    sizeof(self_cases) / sizeof(self_cases[0]));
	tcase_add_test(tc, test_net_self_empty);
	suite_add_tcase(s, tc);
	return s;
}
