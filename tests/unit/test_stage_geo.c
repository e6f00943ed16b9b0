/*
 * The destination stage (geo/geo_stage.c) driven by a fake exchange (no
 * connection, no event loop): the addresses a host resolved to, a
 * destination guard, the gateway's own listeners and a small GeoIP
 * database (written by tests/integration/mkmmdb.pl, see test_geo.c) built
 * in place, the stage's dest hook through the walker. What the driver is
 * told (verdict, reason) and what the exchange keeps (x_allowed).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg/cfg.h"
#include "dns/net_guard.h"
#include "dns/net_self.h"
#include "geo/geo.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "unit.h"

static char		 tmpdir[256], db[300];
static struct geo	*geodb;

struct fake {
	struct xs_call	 xc;
	struct xchg	 x;
	struct cfg	 cfg;
	struct cfg_policy pol;
	struct net_addr	 addrs[4];
	char		 deny[2][3];
	char		 allow[2][3];
};

/* An exchange to host:port resolved to <ips> (NULL-terminated). */
static void
fake_new(struct fake *f, struct net_guard *g, struct net_self *self,
    const char *host, int port, const char *const *ips)
{
	size_t	n;

	memset(f, 0, sizeof(*f));
	f->cfg.c_guard = g;
	f->cfg.c_self = self;
	f->cfg.c_geo = geodb;
	f->pol.p_name = "p";
	snprintf(f->x.x_host, sizeof(f->x.x_host), "%s", host);
	f->x.x_port = port;
	f->x.x_allowed = 1;
	for (n = 0; ips[n] != NULL; n++)
		ck_assert_int_eq(net_host_literal(ips[n], &f->addrs[n]), 1);
	f->xc.xc_x = &f->x;
	f->xc.xc_cfg = &f->cfg;
	f->xc.xc_policy = &f->pol;
	f->xc.xc_addrs = f->addrs;
	f->xc.xc_naddrs = n;
}

static enum xs_verdict
run(struct fake *f)
{
	f->xc.xc_at = 0;
	/* the whole table: only the destination stage has this hook */
	return xs_run(xs_table, XS_DEST, &f->xc);
}

static struct net_guard *
guard_default(void)
{
	struct net_guard	*g = net_guard_new();

	net_guard_deny_default(g);
	return g;
}

static void
deny_case(struct net_guard *g, const char *ip, const char *range)
{
	const char *const	 ips[] = { ip, NULL };
	struct fake		 f;
	char			 want[512];

	fake_new(&f, g, NULL, "svc.example", 443, ips);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_DENIED);
	snprintf(want, sizeof(want), "destination svc.example resolves to "
	    "%s in denied network %s", ip, range);
	ck_assert_str_eq(f.xc.xc_reason, want);
	ck_assert_int_eq(f.x.x_allowed, 0);
}

START_TEST(test_geo_stage_private)
{
	struct net_guard	*g = guard_default();

	deny_case(g, "10.0.0.1", "10.0.0.0/8");
	deny_case(g, "192.168.1.20", "192.168.0.0/16");
	deny_case(g, "169.254.169.254", "169.254.0.0/16");
	deny_case(g, "127.0.0.1", "127.0.0.0/8");
	deny_case(g, "::1", "::1/128");
	net_guard_free(g);
}
END_TEST

/* An IPv6 address that carries an IPv4 one is judged by it. */
START_TEST(test_geo_stage_mapped)
{
	struct net_guard	*g = guard_default();
	const char *const	 ips[] = { "::ffff:127.0.0.1", NULL };
	struct fake		 f;

	fake_new(&f, g, NULL, "svc.example", 443, ips);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_DENIED);
	ck_assert_msg(strstr(f.xc.xc_reason, "in denied network "
	    "127.0.0.0/8") != NULL, "reason: %s", f.xc.xc_reason);
	net_guard_free(g);
}
END_TEST

START_TEST(test_geo_stage_public)
{
	struct net_guard	*g = guard_default();
	const char *const	 ips[] = { "93.184.216.34",
				    "2606:2800:220:1:248:1893:25c8:1946",
				    NULL };
	struct fake		 f;

	fake_new(&f, g, NULL, "example.com", 443, ips);
	ck_assert_int_eq(run(&f), XS_GO);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_NONE);
	ck_assert_str_eq(f.xc.xc_reason, "");
	ck_assert_int_eq(f.x.x_allowed, 1);
	net_guard_free(g);
}
END_TEST

/* One bad answer spoils the name, wherever it is in the list. */
START_TEST(test_geo_stage_one_bad)
{
	struct net_guard	*g = guard_default();
	const char *const	 ips[] = { "93.184.216.34", "192.168.7.7",
				    NULL };
	struct fake		 f;

	fake_new(&f, g, NULL, "rebind.example", 80, ips);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_str_eq(f.xc.xc_reason, "destination rebind.example "
	    "resolves to 192.168.7.7 in denied network 192.168.0.0/16");
	net_guard_free(g);
}
END_TEST

/* allow_networks opens loopback, never the gateway's own listeners. */
START_TEST(test_geo_stage_self)
{
	struct net_guard	*g = guard_default();
	struct net_self		*self = net_self_new();
	const char *const	 ips[] = { "127.0.0.1", NULL };
	struct net_cidr		 lo;
	struct fake		 f;

	ck_assert_int_eq(net_cidr_parse("127.0.0.0/8", &lo), 0);
	net_guard_allow(g, &lo);
	ck_assert_int_eq(net_self_add(self, "127.0.0.1:3128", "proxy"), 0);
	ck_assert_int_eq(net_self_add(self, "0.0.0.0:9090", "admin"), 0);

	fake_new(&f, g, self, "localhost", 3128, ips);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_DENIED);
	ck_assert_str_eq(f.xc.xc_reason, "destination 127.0.0.1:3128 is the "
	    "gateway's own proxy listener 127.0.0.1:3128 (never an "
	    "upstream)");
	ck_assert_int_eq(f.x.x_allowed, 0);

	/* a wildcard listener stands for every local address */
	fake_new(&f, g, self, "localhost", 9090, ips);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_msg(strstr(f.xc.xc_reason, "admin listener") != NULL,
	    "reason: %s", f.xc.xc_reason);

	/* another port of an allowed network goes */
	fake_new(&f, g, self, "localhost", 8080, ips);
	ck_assert_int_eq(run(&f), XS_GO);
	ck_assert_int_eq(f.x.x_allowed, 1);
	net_self_free(self);
	net_guard_free(g);
}
END_TEST

START_TEST(test_geo_stage_deny_country)
{
	struct net_guard	*g = net_guard_new();	/* allows all */
	const char *const	 jp[] = { "10.1.2.3", NULL };
	const char *const	 nl[] = { "2001:db8::1", NULL };
	struct fake		 f;

	fake_new(&f, g, NULL, "api.example.jp", 443, jp);
	memcpy(f.deny[0], "JP", 3);
	f.pol.p_geo_deny = f.deny;
	f.pol.p_ngeo_deny = 1;
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_DENIED);
	ck_assert_str_eq(f.xc.xc_reason, "destination api.example.jp "
	    "resolves to 10.1.2.3 in country JP, denied by policy \"p\" "
	    "(geo.deny_countries)");
	ck_assert_int_eq(f.x.x_allowed, 0);

	fake_new(&f, g, NULL, "api.example.nl", 443, nl);
	memcpy(f.deny[0], "JP", 3);
	f.pol.p_geo_deny = f.deny;
	f.pol.p_ngeo_deny = 1;
	ck_assert_int_eq(run(&f), XS_GO);
	ck_assert_int_eq(f.x.x_allowed, 1);
	net_guard_free(g);
}
END_TEST

START_TEST(test_geo_stage_allow_country)
{
	struct net_guard	*g = net_guard_new();
	const char *const	 nl[] = { "2001:db8::1", NULL };
	const char *const	 mixed[] = { "2001:db8::1", "10.1.0.9", NULL };
	const char *const	 unknown[] = { "127.0.0.5", NULL };
	struct fake		 f;

#define ALLOW_NL(f) do {						\
	memcpy((f).allow[0], "NL", 3);					\
	(f).pol.p_geo_allow = (f).allow;				\
	(f).pol.p_ngeo_allow = 1;					\
} while (0)
	fake_new(&f, g, NULL, "a.example", 443, nl);
	ALLOW_NL(f);
	ck_assert_int_eq(run(&f), XS_GO);

	fake_new(&f, g, NULL, "b.example", 443, mixed);
	ALLOW_NL(f);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_str_eq(f.xc.xc_reason, "destination b.example resolves "
	    "to 10.1.0.9 in country JP, denied by policy \"p\" "
	    "(geo.allow_countries)");

	/* an allow list is closed: no known country is not on it */
	fake_new(&f, g, NULL, "c.example", 443, unknown);
	ALLOW_NL(f);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_str_eq(f.xc.xc_reason, "destination c.example resolves "
	    "to 127.0.0.5 in no known country, denied by policy \"p\" "
	    "(geo.allow_countries)");
#undef ALLOW_NL
	net_guard_free(g);
}
END_TEST

/* The guard is judged first, then the countries. */
START_TEST(test_geo_stage_guard_first)
{
	struct net_guard	*g = guard_default();
	const char *const	 ips[] = { "10.1.2.3", NULL };
	struct fake		 f;

	fake_new(&f, g, NULL, "api.example.jp", 443, ips);
	memcpy(f.deny[0], "JP", 3);
	f.pol.p_geo_deny = f.deny;
	f.pol.p_ngeo_deny = 1;
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_str_eq(f.xc.xc_reason, "destination api.example.jp "
	    "resolves to 10.1.2.3 in denied network 10.0.0.0/8");
	net_guard_free(g);
}
END_TEST

/* No policy (or no country lists) and no database: the guard alone. */
START_TEST(test_geo_stage_no_policy)
{
	struct net_guard	*g = net_guard_new();
	const char *const	 ips[] = { "10.1.2.3", NULL };
	struct fake		 f;

	fake_new(&f, g, NULL, "api.example.jp", 443, ips);
	f.xc.xc_policy = NULL;
	ck_assert_int_eq(run(&f), XS_GO);
	fake_new(&f, g, NULL, "api.example.jp", 443, ips);
	f.cfg.c_geo = NULL;
	memcpy(f.deny[0], "JP", 3);
	f.pol.p_geo_deny = f.deny;
	f.pol.p_ngeo_deny = 1;
	/* nothing is known of the address: no country to deny */
	ck_assert_int_eq(run(&f), XS_GO);
	net_guard_free(g);
}
END_TEST

static void
setup(void)
{
	const char	*t;
	char		 why[256];

	if ((t = getenv("TMPDIR")) == NULL || *t == '\0')
		t = "/tmp";
	snprintf(tmpdir, sizeof(tmpdir), "%s/airlock-sgeo-XXXXXX", t);
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(db, sizeof(db), "%s/test.mmdb", tmpdir);
	ck_assert_msg(unit_mkmmdb(db) == 0, "mkmmdb.pl failed (is "
	    "libmaxmind-db-writer-perl installed?)");
	geodb = geo_open(db, why, sizeof(why));
	ck_assert_msg(geodb != NULL, "%s: %s", db, why);
}

static void
teardown(void)
{
	geo_close(geodb);
	geodb = NULL;
	unlink(db);
	rmdir(tmpdir);
}

Suite *
suite_stage_geo(void)
{
	Suite	*s = suite_create("stage_geo");
	TCase	*tc = tcase_create("fake exchange");

	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_geo_stage_private);
	tcase_add_test(tc, test_geo_stage_mapped);
	tcase_add_test(tc, test_geo_stage_public);
	tcase_add_test(tc, test_geo_stage_one_bad);
	tcase_add_test(tc, test_geo_stage_self);
	tcase_add_test(tc, test_geo_stage_deny_country);
	tcase_add_test(tc, test_geo_stage_allow_country);
	tcase_add_test(tc, test_geo_stage_guard_first);
	tcase_add_test(tc, test_geo_stage_no_policy);
	suite_add_tcase(s, tc);
	return s;
}
