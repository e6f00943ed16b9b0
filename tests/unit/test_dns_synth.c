/* Check suite for src/dns/dns_synth.c: the synthetic address map. */
#include "config.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dns/dns_names.h"
#include "dns/dns_synth.h"
#include "dns/net_guard.h"
#include "unit.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

static struct dns_synth *
synth(const char *cidr, size_t max, uint64_t idle)
{
	struct net_cidr		 c;
	struct dns_synth	*ds;

	ck_assert_int_eq(net_cidr_parse(cidr, &c), 0);
	ds = dns_synth_new(&c, max, idle);
	ck_assert_ptr_nonnull(ds);
	return ds;
}

/* The address of <name> as text. */
static const char *
get(struct dns_synth *ds, const char *name)
{
	static char	buf[INET6_ADDRSTRLEN];
	struct net_addr	a;

	ck_assert_int_eq(dns_synth_get(ds, name, &a), 0);
	ck_assert_int_eq(a.na_family, AF_INET);
	net_addr_format(&a, buf, sizeof(buf));
	return buf;
}

/* The name <ip> stands for, or "" */
static const char *
lookup(struct dns_synth *ds, const char *ip)
{
	static char	name[DNS_SYNTH_NAME_MAX + 1];
	struct net_addr	a;
	int		r;

	ck_assert_int_eq(net_host_literal(ip, &a), 1);
	r = dns_synth_lookup(ds, &a, name, sizeof(name));
	ck_assert_int_ge(r, 0);
	return r == 1 ? name : "";
}

static const struct {
	const char	*cidr;
	size_t		 max;
	size_t		 cap;
	const char	*first;
	const char	*last;		/* the cap-th address */
} cap_cases[] = {
	{ "198.18.0.0/15",	0,	131070,	"198.18.0.1",	"198.19.255.254" },
	{ "198.18.0.0/15",	1000,	1000,	"198.18.0.1",	"198.18.3.232" },
	{ "10.0.0.0/8",		0,	DNS_SYNTH_MAX_NAMES, "10.0.0.1",
	    "10.2.0.0" },
	{ "192.0.2.0/24",	0,	254,	"192.0.2.1",	"192.0.2.254" },
	{ "192.0.2.8/29",	0,	6,	"192.0.2.9",	"192.0.2.14" },
	{ "192.0.2.8/30",	0,	2,	"192.0.2.9",	"192.0.2.10" },
	{ "192.0.2.8/31",	0,	2,	"192.0.2.8",	"192.0.2.9" },
	{ "192.0.2.8/32",	0,	1,	"192.0.2.8",	"192.0.2.8" },
};

START_TEST(test_capacity)
{
	struct dns_synth	*ds;
	char			 name[32];
	size_t			 i;

	ds = synth(cap_cases[_i].cidr, cap_cases[_i].max, 0);
	ck_assert_uint_eq(dns_synth_capacity(ds), cap_cases[_i].cap);
	snprintf(name, sizeof(name), "n0.test");
	ck_assert_str_eq(get(ds, name), cap_cases[_i].first);
	if (cap_cases[_i].cap <= 1000) {
		for (i = 1; i < cap_cases[_i].cap; i++) {
			snprintf(name, sizeof(name), "n%zu.test", i);
			(void)get(ds, name);
		}
		ck_assert_str_eq(get(ds, name), cap_cases[_i].last);
		ck_assert_uint_eq(dns_synth_count(ds), cap_cases[_i].cap);
		ck_assert_uint_eq(dns_synth_evictions(ds), 0);
	}
	dns_synth_free(ds);
}
END_TEST

START_TEST(test_bad_pool)
{
	struct net_cidr	c;

	ck_assert_int_eq(net_cidr_parse("2001:db8::/64", &c), 0);
	ck_assert_ptr_null(dns_synth_new(&c, 0, 0));
	ck_assert_ptr_null(dns_synth_new(NULL, 0, 0));
	dns_synth_free(NULL);
}
END_TEST

START_TEST(test_stable)
{
	struct dns_synth	*ds = synth("198.18.0.0/15", 0, 0);
	struct net_addr		 a, b;
	char			 name[64], ip[INET6_ADDRSTRLEN];
	int			 i;

	ck_assert_str_eq(get(ds, "api.openai.com"), "198.18.0.1");
	ck_assert_str_eq(get(ds, "github.com"), "198.18.0.2");
	ck_assert_str_eq(get(ds, "api.openai.com"), "198.18.0.1");
	ck_assert_str_eq(lookup(ds, "198.18.0.1"), "api.openai.com");
	ck_assert_str_eq(lookup(ds, "198.18.0.2"), "github.com");
	/* in the pool, but no name yet; outside the pool */
	ck_assert_str_eq(lookup(ds, "198.18.0.3"), "");
	ck_assert_str_eq(lookup(ds, "198.18.0.0"), "");
	ck_assert_str_eq(lookup(ds, "198.19.255.255"), "");
	ck_assert_str_eq(lookup(ds, "10.0.0.1"), "");
	ck_assert_str_eq(lookup(ds, "::1"), "");
	ck_assert_int_eq(dns_synth_in_pool(ds, &(struct net_addr){
	    .na_family = AF_INET, .na_bytes = { 198, 19, 1, 1 } }), 1);
	ck_assert_int_eq(dns_synth_in_pool(ds, &(struct net_addr){
	    .na_family = AF_INET, .na_bytes = { 198, 20, 0, 1 } }), 0);

	/* many names: all different, all stable */
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "host-%d.example.com", i);
		ck_assert_int_eq(dns_synth_get(ds, name, &a), 0);
		ck_assert_int_eq(dns_synth_get(ds, name, &b), 0);
		ck_assert_mem_eq(a.na_bytes, b.na_bytes, 4);
		net_addr_format(&a, ip, sizeof(ip));
		ck_assert_str_eq(lookup(ds, ip), name);
	}
	ck_assert_uint_eq(dns_synth_count(ds), 5002);
	ck_assert_str_eq(get(ds, "api.openai.com"), "198.18.0.1");
	dns_synth_free(ds);
}
END_TEST

START_TEST(test_names)
{
	struct dns_synth	*ds = synth("198.18.0.0/15", 0, 0);
	struct net_addr		 a;
	char			 name[DNS_SYNTH_NAME_MAX + 2], small[16];

	ck_assert_int_eq(dns_synth_get(ds, "", &a), -1);
	ck_assert_int_eq(dns_synth_get(ds, NULL, &a), -1);
	memset(name, 'a', sizeof(name));
	name[DNS_SYNTH_NAME_MAX + 1] = '\0';
	ck_assert_int_eq(dns_synth_get(ds, name, &a), -1);
	name[DNS_SYNTH_NAME_MAX] = '\0';
	ck_assert_int_eq(dns_synth_get(ds, name, &a), 0);
	ck_assert_str_eq(lookup(ds, "198.18.0.1"), name);
	/* the map compares bytes: normalising is the stub's job */
	ck_assert_str_eq(get(ds, "A.test"), "198.18.0.2");
	ck_assert_str_eq(get(ds, "a.test"), "198.18.0.3");
	/* too small a buffer is an error, never a cut name */
	ck_assert_int_eq(dns_synth_lookup(ds, &a, small, sizeof(small)), -1);
	dns_synth_free(ds);
}
END_TEST

START_TEST(test_lru)
{
	struct dns_synth	*ds = synth("192.0.2.8/29", 3, 0);

	/*
	 * Every get and lookup marks a mapping used, so the sequence avoids
	 * looking at the map between the steps it checks.
	 */
	ck_assert_uint_eq(dns_synth_capacity(ds), 3);
	ck_assert_str_eq(get(ds, "a.test"), "192.0.2.9");
	ck_assert_str_eq(get(ds, "b.test"), "192.0.2.10");
	ck_assert_str_eq(get(ds, "c.test"), "192.0.2.11");
	/* a used again: b is the least recently used */
	ck_assert_str_eq(get(ds, "a.test"), "192.0.2.9");
	ck_assert_str_eq(get(ds, "d.test"), "192.0.2.10");
	/* then c */
	ck_assert_str_eq(get(ds, "e.test"), "192.0.2.11");
	/* a lookup by address counts as a use: a stays, d goes */
	ck_assert_str_eq(lookup(ds, "192.0.2.9"), "a.test");
	ck_assert_str_eq(get(ds, "f.test"), "192.0.2.10");
	ck_assert_uint_eq(dns_synth_evictions(ds), 3);
	ck_assert_uint_eq(dns_synth_count(ds), 3);
	ck_assert_str_eq(lookup(ds, "192.0.2.9"), "a.test");
	ck_assert_str_eq(lookup(ds, "192.0.2.10"), "f.test");
	ck_assert_str_eq(lookup(ds, "192.0.2.11"), "e.test");
	/* never the network (.8) or broadcast (.15) address */
	ck_assert_str_eq(lookup(ds, "192.0.2.8"), "");
	ck_assert_str_eq(lookup(ds, "192.0.2.12"), "");
	ck_assert_str_eq(lookup(ds, "192.0.2.15"), "");
	dns_synth_free(ds);
}
END_TEST

START_TEST(test_min_idle)
{
	struct dns_synth	*ds = synth("192.0.2.8/30", 0, 300);
	struct net_addr		 a;

	ck_assert_str_eq(get(ds, "a.test"), "192.0.2.9");
	ck_assert_str_eq(get(ds, "b.test"), "192.0.2.10");
	/* both answered just now: no address for a third name */
	ck_assert_int_eq(dns_synth_get(ds, "c.test", &a), -1);
	ck_assert_int_eq(dns_synth_get(ds, "c.test", &a), -1);
	ck_assert_str_eq(lookup(ds, "192.0.2.9"), "a.test");
	ck_assert_str_eq(lookup(ds, "192.0.2.10"), "b.test");
	ck_assert_uint_eq(dns_synth_evictions(ds), 0);
	usleep(150 * 1000);
	ck_assert_str_eq(lookup(ds, "192.0.2.10"), "b.test");	/* keep b */
	usleep(200 * 1000);
	/* a idle for 350 ms, b for 200 ms */
	ck_assert_str_eq(get(ds, "c.test"), "192.0.2.9");
	ck_assert_str_eq(lookup(ds, "192.0.2.10"), "b.test");
	ck_assert_int_eq(dns_synth_get(ds, "a.test", &a), -1);
	dns_synth_free(ds);
}
END_TEST

/* Threads: answers, lookups and evictions at once must stay coherent. */

struct synth_thr {
	struct dns_synth	*st_ds;
	int			 st_id;
	int			 st_bad;
};

static void *
synth_worker(void *arg)
{
	struct synth_thr	*t = arg;
	struct net_addr		 a;
	char			 name[64], back[DNS_SYNTH_NAME_MAX + 1];
	int			 i, r;

	for (i = 0; i < 20000; i++) {
		/* names shared between threads, more than the map holds */
		snprintf(name, sizeof(name), "n%d.test", (i * 7 + t->st_id) %
		    700);
		if (dns_synth_get(t->st_ds, name, &a) == -1) {
			t->st_bad++;
			continue;
		}
		r = dns_synth_lookup(t->st_ds, &a, back, sizeof(back));
		/* evicted in between, or still ours: never garbage */
		if (r == 1 && strncmp(back, "n", 1) != 0)
			t->st_bad++;
		if (r == -1)
			t->st_bad++;
	}
	return NULL;
}

START_TEST(test_threads)
{
	struct dns_synth	*ds = synth("192.0.2.0/24", 0, 0);
	struct synth_thr	 t[8];
	pthread_t		 th[8];
	int			 i;

	for (i = 0; i < 8; i++) {
		t[i].st_ds = ds;
		t[i].st_id = i;
		t[i].st_bad = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, synth_worker,
		    &t[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(t[i].st_bad, 0);
	}
	ck_assert_uint_eq(dns_synth_count(ds), 254);
	ck_assert_uint_gt(dns_synth_evictions(ds), 0);
	dns_synth_free(ds);
}
END_TEST

/* Without eviction, concurrent first answers give one address per name. */
static void *
synth_racer(void *arg)
{
	struct synth_thr	*t = arg;
	struct net_addr		 a;
	char			 name[32];
	int			 i;

	for (i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "r%d.test", i);
		if (dns_synth_get(t->st_ds, name, &a) == -1)
			t->st_bad++;
	}
	return NULL;
}

START_TEST(test_threads_unique)
{
	struct dns_synth	*ds = synth("198.18.0.0/15", 0, 0);
	struct synth_thr	 t[4];
	pthread_t		 th[4];
	struct net_addr		 a;
	char			 name[32], back[DNS_SYNTH_NAME_MAX + 1];
	int			 i;

	for (i = 0; i < 4; i++) {
		t[i].st_ds = ds;
		t[i].st_id = i;
		t[i].st_bad = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, synth_racer,
		    &t[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(t[i].st_bad, 0);
	}
	ck_assert_uint_eq(dns_synth_count(ds), 2000);
	for (i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "r%d.test", i);
		ck_assert_int_eq(dns_synth_get(ds, name, &a), 0);
		ck_assert_int_eq(dns_synth_lookup(ds, &a, back, sizeof(back)),
		    1);
		ck_assert_str_eq(back, name);
	}
	dns_synth_free(ds);
}
END_TEST

/*
 * Issue 24, point 5: a mapping a sandbox holds is never given to another
 * name, however full the map and idle the mapping; released, it is. And
 * the per-sandbox sets (dns_names.c) on top: bound, rate, forgetting.
 */
START_TEST(test_hold)
{
	struct dns_synth	*ds = synth("192.0.2.8/29", 3, 0);
	struct net_addr		 a;
	char			 name[32];
	int			 i;

	ck_assert_int_eq(dns_synth_hold(ds, "mine.test", &a), 0);
	ck_assert_str_eq(get(ds, "b.test"), "192.0.2.10");
	ck_assert_str_eq(get(ds, "c.test"), "192.0.2.11");
	/* full: others rotate through b's and c's addresses, never ours */
	ck_assert_str_ne(get(ds, "d.test"), "192.0.2.9");
	ck_assert_str_ne(get(ds, "e.test"), "192.0.2.9");
	ck_assert_str_ne(get(ds, "f.test"), "192.0.2.9");
	ck_assert_str_eq(lookup(ds, "192.0.2.9"), "mine.test");
	/* released: it may go like any other */
	dns_synth_release(ds, &a);
	for (i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "later%d.test", i);
		(void)get(ds, name);
	}
	ck_assert_str_ne(lookup(ds, "192.0.2.9"), "mine.test");
	dns_synth_free(ds);
}
END_TEST

START_TEST(test_names_per_sandbox)
{
	struct dns_synth	*ds = synth("192.0.2.0/24", 0, 0);
	struct dns_names	*dn = dns_names_new(ds);
	struct net_addr		 a, b;
	size_t			 n;
	uint64_t		 t = 1000000;

	ck_assert_int_eq(dns_names_admit(dn, "s1", "x.test", 0, 2, 2, t, &a,
	    &n), DNS_NAMES_NEW);
	ck_assert_int_eq(dns_names_admit(dn, "s1", "x.test", 0, 2, 2, t, &b,
	    &n), DNS_NAMES_KNOWN);
	ck_assert(memcmp(&a, &b, sizeof(a)) == 0);
	/* the wildcard rate: 2 a minute */
	ck_assert_int_eq(dns_names_admit(dn, "s1", "w1.test", 1, 9, 2, t, &a,
	    &n), DNS_NAMES_NEW);
	ck_assert_int_eq(dns_names_admit(dn, "s1", "w2.test", 1, 9, 2, t, &a,
	    &n), DNS_NAMES_NEW);
	ck_assert_int_eq(dns_names_admit(dn, "s1", "w3.test", 1, 9, 2, t, &a,
	    &n), DNS_NAMES_OVER_RATE);
	/* 30 s later: one more */
	ck_assert_int_eq(dns_names_admit(dn, "s1", "w3.test", 1, 9, 2,
	    t + 30000, &a, &n), DNS_NAMES_NEW);
	ck_assert_uint_eq(n, 4);
	/* the bound */
	ck_assert_int_eq(dns_names_admit(dn, "s1", "y.test", 0, 4, 2, t, &a,
	    &n), DNS_NAMES_OVER_BOUND);
	/* per sandbox */
	ck_assert_int_eq(dns_names_admit(dn, "s2", "y.test", 0, 4, 2, t, &a,
	    &n), DNS_NAMES_NEW);
	ck_assert_uint_eq(dns_names_sandboxes(dn), 2);
	dns_names_forget(dn, "s1");
	ck_assert_uint_eq(dns_names_sandboxes(dn), 1);
	dns_names_free(dn);
	dns_synth_free(ds);
}
END_TEST

Suite *
suite_dns_synth(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("dns_synth");
	tc = tcase_create("map");
	tcase_add_loop_test(tc, test_capacity, 0, NELEM(cap_cases));
	tcase_add_test(tc, test_bad_pool);
	tcase_add_test(tc, test_stable);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_lru);
	tcase_add_test(tc, test_min_idle);
	tcase_add_test(tc, test_hold);
	tcase_add_test(tc, test_names_per_sandbox);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_threads_unique);
	suite_add_tcase(s, tc);
	return s;
}
