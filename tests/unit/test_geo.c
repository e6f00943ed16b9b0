/*
 * GeoIP: opening (missing file, not an mmdb), lookups on small databases
 * written at test time by tests/integration/mkmmdb.pl (IPv6 tree with
 * IPv4 aliased, and IPv4 only), IPv4-mapped IPv6, concurrent lookups, and
 * the policy's deny_countries / allow_countries verdict.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "cfg/cfg.h"
#include "dns/net_guard.h"
#include "geo/geo.h"
#include "unit.h"

extern char	**environ;

static char	 tmpdir[256];
static char	 db6[300], db4[300], junk[300], empty[300];

/* The networks both databases hold. */
static const char *const entries[] = {
	"127.0.0.2/32=KP:64500",
	"127.0.0.1/32=DE:3320",
	"127.0.0.4/32=@FR",		/* registered_country only */
	"127.0.0.5/32=:65001",		/* ASN, no country */
	"127.0.0.6/32=se",		/* lower case in the file */
	"10.1.0.0/16=JP:2516",
};

/* perl mkmmdb.pl [-4] OUT entries... [2001:db8::/32=NL:1136]; 0 or -1. */
static int
mkmmdb(const char *out, int v4)
{
	const char	*top, *argv[16];
	char		 script[4096];
	pid_t		 pid;
	size_t		 i, n = 0;
	int		 st;

	if ((top = getenv("top_srcdir")) != NULL && *top != '\0')
		snprintf(script, sizeof(script),
		    "%s/tests/integration/mkmmdb.pl", top);
	else
		snprintf(script, sizeof(script),
		    "../tests/integration/mkmmdb.pl");
	argv[n++] = "perl";
	argv[n++] = script;
	if (v4)
		argv[n++] = "-4";
	argv[n++] = out;
	for (i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
		argv[n++] = entries[i];
	if (!v4)
		argv[n++] = "2001:db8::/32=NL:1136";
	argv[n] = NULL;
	if (posix_spawnp(&pid, "perl", NULL, NULL, (char *const *)argv,
	    environ) != 0)
		return -1;
	if (waitpid(pid, &st, 0) == -1 || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return -1;
	return 0;
}

/* For other suites: a small IPv6 database (loopback ranges) at <out>. */
int
unit_mkmmdb(const char *out)
{
	return mkmmdb(out, 0);
}

static void
write_file(const char *path, const char *text)
{
	FILE	*f;

	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* Once, in the runner: the forked tests only read these. */
static void
setup(void)
{
	const char	*t;

	if ((t = getenv("TMPDIR")) == NULL || *t == '\0')
		t = "/tmp";
	snprintf(tmpdir, sizeof(tmpdir), "%s/airlock-geo-XXXXXX", t);
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(db6, sizeof(db6), "%s/test6.mmdb", tmpdir);
	snprintf(db4, sizeof(db4), "%s/test4.mmdb", tmpdir);
	snprintf(junk, sizeof(junk), "%s/junk.mmdb", tmpdir);
	snprintf(empty, sizeof(empty), "%s/empty.mmdb", tmpdir);
	ck_assert_msg(mkmmdb(db6, 0) == 0, "mkmmdb.pl failed (IPv6 tree; "
	    "is libmaxmind-db-writer-perl installed?)");
	ck_assert_msg(mkmmdb(db4, 1) == 0, "mkmmdb.pl -4 failed");
	write_file(junk, "this is not a MaxMind database\n");
	write_file(empty, "");
}

static void
teardown(void)
{
	unlink(db6);
	unlink(db4);
	unlink(junk);
	unlink(empty);
	rmdir(tmpdir);
}

static int
lookup_str(const struct geo *g, const char *ip, char cc[3], uint32_t *asn)
{
	struct sockaddr_in	sin;
	struct sockaddr_in6	sin6;

	memset(&sin, 0, sizeof(sin));
	memset(&sin6, 0, sizeof(sin6));
	if (inet_pton(AF_INET, ip, &sin.sin_addr) == 1) {
		sin.sin_family = AF_INET;
		return geo_lookup(g, (struct sockaddr *)&sin, cc, asn);
	}
	ck_assert_int_eq(inet_pton(AF_INET6, ip, &sin6.sin6_addr), 1);
	sin6.sin6_family = AF_INET6;
	return geo_lookup(g, (struct sockaddr *)&sin6, cc, asn);
}

START_TEST(test_geo_open_missing)
{
	char		 why[256], path[400];
	struct geo	*g;

	snprintf(path, sizeof(path), "%s/nope.mmdb", tmpdir);
	why[0] = '\0';
	g = geo_open(path, why, sizeof(why));
	ck_assert_ptr_null(g);
	ck_assert_msg(strstr(why, "No such file") != NULL, "why: %s", why);
}
END_TEST

START_TEST(test_geo_open_not_mmdb)
{
	const char	*files[] = { junk, empty };
	char		 why[256];
	size_t		 i;

	for (i = 0; i < 2; i++) {
		why[0] = '\0';
		ck_assert_ptr_null(geo_open(files[i], why, sizeof(why)));
		ck_assert_msg(strstr(why, "not a MaxMind DB") != NULL,
		    "%s: why: %s", files[i], why);
	}
	ck_assert_ptr_null(geo_open(tmpdir, why, sizeof(why)));
	ck_assert_str_eq(why, "not a regular file");
}
END_TEST

START_TEST(test_geo_close_null)
{
	char		cc[3] = "XX";
	uint32_t	asn = 7;

	geo_close(NULL);
	/* no database: nothing known, and no crash */
	ck_assert_int_eq(lookup_str(NULL, "127.0.0.2", cc, &asn), -1);
	ck_assert_str_eq(cc, "");
	ck_assert_uint_eq(asn, 0);
}
END_TEST

static const struct {
	const char	*ip;
	int		 rc;
	const char	*cc;
	uint32_t	 asn;
	int		 v6_only;	/* not in the IPv4-only file */
} lookups[] = {
	{ "127.0.0.2", 0, "KP", 64500, 0 },
	{ "127.0.0.1", 0, "DE", 3320, 0 },
	{ "::ffff:127.0.0.2", 0, "KP", 64500, 0 },	/* mapped */
	{ "::ffff:127.0.0.1", 0, "DE", 3320, 0 },
	{ "127.0.0.4", 0, "FR", 0, 0 },		/* registered_country */
	{ "127.0.0.5", 0, "", 65001, 0 },	/* no country */
	{ "127.0.0.6", 0, "SE", 0, 0 },		/* upper-cased */
	{ "10.1.200.3", 0, "JP", 2516, 0 },
	{ "::ffff:10.1.0.1", 0, "JP", 2516, 0 },
	{ "127.0.0.3", -1, "", 0, 0 },		/* not in the file */
	{ "192.0.2.1", -1, "", 0, 0 },
	{ "::ffff:127.0.0.3", -1, "", 0, 0 },
	{ "2001:db8::1", 0, "NL", 1136, 1 },
	{ "2001:db9::1", -1, "", 0, 0 },
	{ "::1", -1, "", 0, 0 },
};

static void
check_lookups(const char *path, int v4)
{
	struct geo	*g;
	char		 why[256], cc[3];
	uint32_t	 asn;
	size_t		 i;
	int		 rc, want;

	g = geo_open(path, why, sizeof(why));
	ck_assert_msg(g != NULL, "%s: %s", path, why);
	for (i = 0; i < sizeof(lookups) / sizeof(lookups[0]); i++) {
		memcpy(cc, "??", 3);
		asn = 99;
		rc = lookup_str(g, lookups[i].ip, cc, &asn);
		want = v4 && lookups[i].v6_only ? -1 : lookups[i].rc;
		ck_assert_msg(rc == want, "%s (v4 %d): rc %d, want %d",
		    lookups[i].ip, v4, rc, want);
		ck_assert_msg(strcmp(cc, want == 0 ? lookups[i].cc : "") == 0,
		    "%s (v4 %d): country \"%s\"", lookups[i].ip, v4, cc);
		ck_assert_msg(asn == (want == 0 ? lookups[i].asn : 0),
		    "%s (v4 %d): asn %u", lookups[i].ip, v4, asn);
	}
	geo_close(g);
}

START_TEST(test_geo_lookup_v6_tree)
{
	check_lookups(db6, 0);
}
END_TEST

START_TEST(test_geo_lookup_v4_tree)
{
	check_lookups(db4, 1);
}
END_TEST

/* The resolver's form of an address, as dns_done() has it. */
START_TEST(test_geo_lookup_addr)
{
	struct geo	*g;
	struct net_addr	 a;
	char		 why[256], cc[3];
	uint32_t	 asn;

	ck_assert_ptr_nonnull(g = geo_open(db6, why, sizeof(why)));
	ck_assert_int_eq(net_host_literal("127.0.0.2", &a), 1);
	ck_assert_int_eq(geo_lookup_addr(g, &a, cc, &asn), 0);
	ck_assert_str_eq(cc, "KP");
	ck_assert_uint_eq(asn, 64500);
	ck_assert_int_eq(net_host_literal("[::ffff:127.0.0.1]", &a), 1);
	ck_assert_int_eq(geo_lookup_addr(g, &a, cc, &asn), 0);
	ck_assert_str_eq(cc, "DE");
	ck_assert_int_eq(net_host_literal("2001:db8::5", &a), 1);
	ck_assert_int_eq(geo_lookup_addr(g, &a, cc, &asn), 0);
	ck_assert_str_eq(cc, "NL");
	ck_assert_int_eq(net_host_literal("127.0.0.3", &a), 1);
	ck_assert_int_eq(geo_lookup_addr(g, &a, cc, &asn), -1);
	ck_assert_str_eq(cc, "");
	geo_close(g);
}
END_TEST

/* One handle, many threads at once (as the workers use it). */
struct geo_thr {
	const struct geo	*gt_geo;
	int			 gt_bad;
};

static void *
geo_thread(void *arg)
{
	struct geo_thr	*t = arg;
	char		 cc[3];
	uint32_t	 asn;
	int		 i;

	for (i = 0; i < 20000; i++) {
		if (lookup_str(t->gt_geo, i % 2 ? "127.0.0.2" :
		    "::ffff:127.0.0.1", cc, &asn) != 0 ||
		    strcmp(cc, i % 2 ? "KP" : "DE") != 0 ||
		    asn != (i % 2 ? 64500u : 3320u))
			t->gt_bad++;
	}
	return NULL;
}

START_TEST(test_geo_threads)
{
	struct geo_thr	 t[4];
	pthread_t	 th[4];
	struct geo	*g;
	char		 why[256];
	int		 i;

	ck_assert_ptr_nonnull(g = geo_open(db6, why, sizeof(why)));
	for (i = 0; i < 4; i++) {
		t[i].gt_geo = g;
		t[i].gt_bad = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, geo_thread,
		    &t[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_int_eq(t[i].gt_bad, 0);
	}
	geo_close(g);
}
END_TEST

START_TEST(test_geo_policy)
{
	char			 deny[][3] = { "KP", "IR" };
	char			 allow[][3] = { "DE", "FR" };
	struct cfg_policy	 p;
	const char		*rule;

	memset(&p, 0, sizeof(p));
	p.p_name = "p";
	/* no rules: anything, known or not */
	ck_assert_int_eq(geo_policy_allows(NULL, "KP", &rule), 1);
	ck_assert_int_eq(geo_policy_allows(&p, "KP", &rule), 1);
	ck_assert_int_eq(geo_policy_allows(&p, "", &rule), 1);
	ck_assert_ptr_null(rule);
	/* deny list only: unknown passes */
	p.p_geo_deny = deny;
	p.p_ngeo_deny = 2;
	ck_assert_int_eq(geo_policy_allows(&p, "IR", &rule), 0);
	ck_assert_str_eq(rule, "geo.deny_countries");
	ck_assert_int_eq(geo_policy_allows(&p, "DE", &rule), 1);
	ck_assert_int_eq(geo_policy_allows(&p, "", &rule), 1);
	/* allow list: only those; unknown is refused */
	p.p_geo_allow = allow;
	p.p_ngeo_allow = 2;
	ck_assert_int_eq(geo_policy_allows(&p, "FR", &rule), 1);
	ck_assert_int_eq(geo_policy_allows(&p, "US", &rule), 0);
	ck_assert_str_eq(rule, "geo.allow_countries");
	ck_assert_int_eq(geo_policy_allows(&p, "", &rule), 0);
	ck_assert_str_eq(rule, "geo.allow_countries");
	/* both: deny is named first */
	ck_assert_int_eq(geo_policy_allows(&p, "KP", &rule), 0);
	ck_assert_str_eq(rule, "geo.deny_countries");
	/* a country on both lists is denied */
	memcpy(allow[1], "KP", 3);
	ck_assert_int_eq(geo_policy_allows(&p, "KP", &rule), 0);
	ck_assert_str_eq(rule, "geo.deny_countries");
}
END_TEST

Suite *
suite_geo(void)
{
	Suite	*s = suite_create("geo");
	TCase	*tc;

	tc = tcase_create("mmdb");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_geo_open_missing);
	tcase_add_test(tc, test_geo_open_not_mmdb);
	tcase_add_test(tc, test_geo_close_null);
	tcase_add_test(tc, test_geo_lookup_v6_tree);
	tcase_add_test(tc, test_geo_lookup_v4_tree);
	tcase_add_test(tc, test_geo_lookup_addr);
	tcase_add_test(tc, test_geo_threads);
	suite_add_tcase(s, tc);

	tc = tcase_create("policy");
	tcase_add_test(tc, test_geo_policy);
	suite_add_tcase(s, tc);
	return s;
}
