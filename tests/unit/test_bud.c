/*
 * Budget: pricing arithmetic to the micro-dollar, every cap, window
 * rollover, admission racing a money cap, and the ledger's durability
 * across a kill -9, replay rules and compaction.
 */
#include "config.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "budget/bud.h"
#include "cfg/cfg.h"
#include "unit.h"

/* Test hooks of src/budget/bud.c. */
void	bud_test_set_clock(uint64_t (*)(void));
void	bud_test_set_compact_size(uint64_t);

Suite	*suite_bud(void);

#define T_2026		1767225600000ULL /* 2026-01-01T00:00Z, ms */
#define HOUR_MS		3600000ULL
#define DAY_MS		86400000ULL

static char		tmpdir[256];
static char		ledger[300];
static uint64_t		fake_now;

static uint64_t
fake_clock(void)
{
	return __atomic_load_n(&fake_now, __ATOMIC_RELAXED);
}

static void
setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/airlock-bud-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(ledger, sizeof(ledger), "%s/budget/ledger", tmpdir);
	fake_now = T_2026 + 10 * HOUR_MS;
	bud_test_set_clock(fake_clock);
}

static void
teardown(void)
{
	char	cmd[300];

	bud_close();
	bud_test_set_clock(NULL);
	bud_test_set_compact_size(0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static off_t
file_size(const char *path)
{
	struct stat	st;

	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_size;
}

static int
file_lines(const char *path)
{
	FILE	*fp;
	int	 ch, n = 0;

	ck_assert_ptr_nonnull(fp = fopen(path, "r"));
	while ((ch = fgetc(fp)) != EOF)
		n += ch == '\n';
	fclose(fp);
	return n;
}

static void
file_put(const char *path, const char *text)
{
	FILE	*fp;

	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	fputs(text, fp);
	ck_assert_int_eq(fclose(fp), 0);
}

static struct bud_counters
get(const char *sb)
{
	struct bud_counters	c;

	ck_assert_int_eq(bud_get(sb, NULL, &c), 0);
	return c;
}

/* ---- pricing -------------------------------------------------------- */

static struct cfg_price	prices[] = {
	/* gpt-4o-mini: 0.15 / 0.60, cached 0.075 */
	{ "gpt-4o-mini*", 150000, 600000, 75000, 150000, 16384 },
	/* claude: 3 / 15, cache read 0.30, cache write 3.75 */
	{ "claude-sonnet-4*", 3000000, 15000000, 300000, 3750000, 64000 },
	/* defaults as the loader fills them: cached = cache_write = input */
	{ "plain-*", 2000000, 8000000, 2000000, 2000000, 0 },
	/* shadowed by the first entry for gpt-4o-mini */
	{ "gpt-4o*", 2500000, 10000000, 1250000, 2500000, 0 },
};

static struct cfg *
pcfg(void)
{
	static struct cfg	c;

	memset(&c, 0, sizeof(c));
	c.c_pricing = prices;
	c.c_npricing = sizeof(prices) / sizeof(prices[0]);
	return &c;
}

static struct usage
usage(const char *model, uint64_t in, uint64_t cached, uint64_t cw,
    uint64_t out)
{
	struct usage	u;

	memset(&u, 0, sizeof(u));
	snprintf(u.u_model, sizeof(u.u_model), "%s", model);
	u.u_input = in;
	u.u_cached = cached;
	u.u_cache_write = cw;
	u.u_output = out;
	u.u_found = 1;
	return u;
}

START_TEST(test_price_exact)
{
	struct usage	u;
	int		unp = -1;

	/* 800*0.15 + 200*0.075 + 500*0.60 = 435 µUSD, exactly */
	u = usage("gpt-4o-mini-2024-07-18", 1000, 200, 0, 500);
	ck_assert_uint_eq(price_usage(pcfg(), &u, &unp), 435);
	ck_assert_int_eq(unp, 0);

	/* 500*3 + 300*0.30 + 200*3.75 + 10*15 = 2490 µUSD */
	u = usage("claude-sonnet-4-5", 1000, 300, 200, 10);
	ck_assert_uint_eq(price_usage(pcfg(), &u, &unp), 2490);
	ck_assert_int_eq(unp, 0);

	/* rounding up: 1 token at 0.15 µUSD costs 1; 7 (1.05) cost 2 */
	u = usage("gpt-4o-mini", 1, 0, 0, 0);
	ck_assert_uint_eq(price_usage(pcfg(), &u, NULL), 1);
	u = usage("gpt-4o-mini", 7, 0, 0, 0);
	ck_assert_uint_eq(price_usage(pcfg(), &u, NULL), 2);
	/* 20 tokens: exactly 3, no rounding up past it */
	u = usage("gpt-4o-mini", 20, 0, 0, 0);
	ck_assert_uint_eq(price_usage(pcfg(), &u, NULL), 3);
	/* the sum is rounded, not each term: 0.6 + 0.375 -> 1, not 2 */
	u = usage("gpt-4o-mini", 0, 0, 0, 0);
	u.u_output = 1;			/* 0.6 */
	u.u_input = u.u_cached = 5;	/* 5 * 0.075 = 0.375 */
	ck_assert_uint_eq(price_usage(pcfg(), &u, NULL), 1);
	u = usage("gpt-4o-mini", 0, 0, 0, 0);
	ck_assert_uint_eq(price_usage(pcfg(), &u, NULL), 0);
}
END_TEST

START_TEST(test_price_defaults)
{
	struct usage	u, v;

	/* cached and cache_write at the input price: same as uncached */
	u = usage("plain-x", 1000, 400, 300, 100);
	v = usage("plain-x", 1000, 0, 0, 100);
	ck_assert_uint_eq(price_usage(pcfg(), &u, NULL), 2800);
	ck_assert_uint_eq(price_usage(pcfg(), &v, NULL), 2800);
	/* an inconsistent report (more cached than input) clamps at 0 */
	u = usage("gpt-4o-mini", 100, 150, 50, 0);
	/* 150*0.075 + 50*0.15 = 18.75 -> 19 */
	ck_assert_uint_eq(price_usage(pcfg(), &u, NULL), 19);
}
END_TEST

START_TEST(test_price_first_match)
{
	struct usage	u;
	int		unp;

	/* "gpt-4o-mini" matches both "gpt-4o-mini*" and "gpt-4o*" */
	u = usage("gpt-4o-mini", 1000000, 0, 0, 0);
	ck_assert_uint_eq(price_usage(pcfg(), &u, &unp), 150000);
	ck_assert_int_eq(unp, 0);
	u = usage("gpt-4o-2024-08-06", 1000000, 0, 0, 0);
	ck_assert_uint_eq(price_usage(pcfg(), &u, &unp), 2500000);
	ck_assert_int_eq(unp, 0);
	/* globs are anchored and case-sensitive */
	u = usage("xgpt-4o", 1000000, 0, 0, 0);
	(void)price_usage(pcfg(), &u, &unp);
	ck_assert_int_eq(unp, 1);
	u = usage("GPT-4o", 1000000, 0, 0, 0);
	(void)price_usage(pcfg(), &u, &unp);
	ck_assert_int_eq(unp, 1);
}
END_TEST

START_TEST(test_price_unpriced)
{
	struct cfg	empty;
	struct usage	u;
	int		unp = 0;

	/* highest of each kind: input 3, output 15, cached 2, write 3.75 */
	u = usage("llama-3", 1000000, 100000, 10000, 1000);
	ck_assert_uint_eq(price_usage(pcfg(), &u, &unp),
	    890000 * 3 + 100000 * 2 + 10000 * 375 / 100 + 1000 * 15);
	ck_assert_int_eq(unp, 1);
	/* no model reported: unpriced too */
	u = usage("", 1000000, 0, 0, 0);
	unp = 0;
	ck_assert_uint_eq(price_usage(pcfg(), &u, &unp), 3000000);
	ck_assert_int_eq(unp, 1);
	/* empty table: 0, still flagged */
	memset(&empty, 0, sizeof(empty));
	unp = 0;
	ck_assert_uint_eq(price_usage(&empty, &u, &unp), 0);
	ck_assert_int_eq(unp, 1);
	ck_assert_uint_eq(price_worst(&empty, "x", 1000, 1000), 0);
}
END_TEST

START_TEST(test_price_huge)
{
	struct cfg_price	p = { "big", 100000000, 100000000, 100000000,
				    100000000, 0 };
	struct cfg		c;
	struct usage		u;

	memset(&c, 0, sizeof(c));
	c.c_pricing = &p;
	c.c_npricing = 1;
	/* 2^40 tokens at $100/M: 2^40 * 10^8 / 10^6 = 2^40 * 100 */
	u = usage("big", 1ULL << 40, 0, 0, 1ULL << 40);
	ck_assert_uint_eq(price_usage(&c, &u, NULL), (1ULL << 40) * 200);
	/* 2^40 at a 2^40 price: 2^80 / 10^6, rounded up */
	p.pr_input = 1ULL << 40;
	u = usage("big", 1ULL << 40, 0, 0, 0);
	ck_assert_uint_eq(price_usage(&c, &u, NULL), 1208925819614629175ULL);
	/* beyond 64 bits of µUSD: saturates instead of wrapping */
	p.pr_input = p.pr_output = UINT64_MAX;
	u = usage("big", UINT64_MAX, 0, 0, UINT64_MAX);
	ck_assert_uint_eq(price_usage(&c, &u, NULL), UINT64_MAX);
	ck_assert_uint_eq(price_worst(&c, "big", UINT64_MAX, UINT64_MAX),
	    UINT64_MAX);
}
END_TEST

START_TEST(test_price_worst)
{
	/* 1000 * 0.15 + 4096 * 0.60 = 2607.6 -> 2608 */
	ck_assert_uint_eq(price_worst(pcfg(), "gpt-4o-mini", 1000, 4096),
	    2608);
	/* unknown model and no model: highest input 3 and output 15 */
	ck_assert_uint_eq(price_worst(pcfg(), "mystery", 1000, 100), 4500);
	ck_assert_uint_eq(price_worst(pcfg(), NULL, 1000, 100), 4500);
	ck_assert_uint_eq(price_worst(pcfg(), "gpt-4o-mini", 0, 0), 0);
}
END_TEST

/* ---- caps (in memory) ----------------------------------------------- */

static enum bud_verdict
admit(const char *sb, const struct cfg_caps *caps, uint64_t reserve,
    char *why, int *retry)
{
	int	r;

	return bud_admit(sb, caps, reserve, why, 128, retry ? retry : &r);
}

START_TEST(test_cap_requests)
{
	struct cfg_caps	caps = { .cp_has_requests = 1,
			    .cp_requests = 3 };
	char		why[128];
	int		i;

	for (i = 0; i < 3; i++)
		ck_assert_int_eq(admit("s", &caps, 0, why, NULL), BUD_OK);
	for (i = 0; i < 5; i++) {
		ck_assert_int_eq(admit("s", &caps, 0, why, NULL),
		    BUD_EXCEEDED);
		ck_assert_str_eq(why, "requests cap 3 reached");
	}
	/* refusals are not counted */
	ck_assert_uint_eq(get("s").bc_requests, 3);
	/* other sandboxes are independent */
	ck_assert_int_eq(admit("t", &caps, 0, why, NULL), BUD_OK);
	/* no caps at all: always admitted, still counted */
	ck_assert_int_eq(admit("s", NULL, 0, why, NULL), BUD_OK);
	ck_assert_uint_eq(get("s").bc_requests, 4);
	ck_assert_int_eq(admit("", NULL, 0, why, NULL), BUD_EXCEEDED);
	ck_assert_int_eq(bud_admit(NULL, NULL, 0, NULL, 0, NULL),
	    BUD_EXCEEDED);
}
END_TEST

START_TEST(test_cap_bytes)
{
	struct cfg_caps		caps = { .cp_has_bytes_in = 1,
				    .cp_bytes_in = 100, .cp_has_bytes_out = 1,
				    .cp_bytes_out = 50 };
	struct bud_counters	c;
	char			why[128];

	ck_assert_int_eq(admit("s", &caps, 0, why, NULL), BUD_OK);
	bud_add_bytes("s", 99, 49);
	ck_assert_int_eq(admit("s", &caps, 0, why, NULL), BUD_OK);
	bud_add_bytes("s", 1, 0);
	ck_assert_int_eq(admit("s", &caps, 0, why, NULL), BUD_EXCEEDED);
	ck_assert_str_eq(why, "bytes_in cap 100 reached");
	c = get("s");
	ck_assert_uint_eq(c.bc_bytes_in, 100);
	ck_assert_uint_eq(c.bc_bytes_out, 49);
	ck_assert_uint_eq(c.bc_requests, 2);

	ck_assert_int_eq(admit("o", &caps, 0, why, NULL), BUD_OK);
	bud_add_bytes("o", 0, 70);
	ck_assert_int_eq(admit("o", &caps, 0, why, NULL), BUD_EXCEEDED);
	ck_assert_str_eq(why, "bytes_out cap 50 reached");
}
END_TEST

START_TEST(test_cap_usd)
{
	struct cfg_caps		caps = { .cp_has_usd = 1,
				    .cp_usd = 1000 };
	struct bud_counters	c;
	char			why[128];

	ck_assert_int_eq(admit("s", &caps, 600, why, NULL), BUD_OK);
	ck_assert_int_eq(admit("s", &caps, 500, why, NULL), BUD_EXCEEDED);
	ck_assert_str_eq(why, "usd cap 0.001000 reached");
	ck_assert_int_eq(admit("s", &caps, 400, why, NULL), BUD_OK); /* = */
	c = get("s");
	ck_assert_uint_eq(c.bc_reserved, 1000);
	ck_assert_uint_eq(c.bc_spend, 0);
	ck_assert_uint_eq(c.bc_requests, 2);
	/* settling below the reservation frees the difference */
	bud_settle("s", 600, 100);
	c = get("s");
	ck_assert_uint_eq(c.bc_reserved, 400);
	ck_assert_uint_eq(c.bc_spend, 100);
	ck_assert_int_eq(admit("s", &caps, 501, why, NULL), BUD_EXCEEDED);
	ck_assert_int_eq(admit("s", &caps, 500, why, NULL), BUD_OK);
	bud_settle("s", 400, 400);
	bud_settle("s", 500, 500);
	c = get("s");
	ck_assert_uint_eq(c.bc_spend, 1000);
	ck_assert_uint_eq(c.bc_reserved, 0);
	/* spent exactly: nothing more that costs */
	ck_assert_int_eq(admit("s", &caps, 1, why, NULL), BUD_EXCEEDED);
	/* a cost above the reservation is recorded in full */
	caps.cp_usd = 5000000;
	ck_assert_int_eq(admit("s", &caps, 10, why, NULL), BUD_OK);
	bud_settle("s", 10, 2500);
	ck_assert_uint_eq(get("s").bc_spend, 3500);
	ck_assert_int_eq(admit("s", &caps, 5000000, why, NULL), BUD_EXCEEDED);
	ck_assert_str_eq(why, "usd cap 5.000000 reached");
}
END_TEST

START_TEST(test_cap_rate)
{
	struct cfg_caps	caps = { .cp_has_rate = 1, .cp_rate_n = 2,
			    .cp_rate_ms = 1000 };
	char		why[128];
	int		retry;

	ck_assert_int_eq(admit("s", &caps, 0, why, &retry), BUD_OK);
	ck_assert_int_eq(admit("s", &caps, 0, why, &retry), BUD_OK);
	ck_assert_int_eq(admit("s", &caps, 0, why, &retry), BUD_RATE);
	ck_assert_str_eq(why, "rate cap 2/s");
	ck_assert_int_eq(retry, 1);
	ck_assert_uint_eq(get("s").bc_requests, 2);
	/* half a second refills one token (2/s) */
	fake_now += 499;
	ck_assert_int_eq(admit("s", &caps, 0, why, &retry), BUD_RATE);
	fake_now += 1;
	ck_assert_int_eq(admit("s", &caps, 0, why, &retry), BUD_OK);
	ck_assert_int_eq(admit("s", &caps, 0, why, &retry), BUD_RATE);
	/* a long pause refills to capacity, not beyond */
	fake_now += 3600 * 1000;
	ck_assert_int_eq(admit("s", &caps, 0, why, &retry), BUD_OK);
	ck_assert_int_eq(admit("s", &caps, 0, why, &retry), BUD_OK);
	ck_assert_int_eq(admit("s", &caps, 0, why, &retry), BUD_RATE);

	/* 1/m: Retry-After counts the seconds to the next token */
	caps.cp_rate_n = 1;
	caps.cp_rate_ms = 60000;
	ck_assert_int_eq(admit("m", &caps, 0, why, &retry), BUD_OK);
	ck_assert_int_eq(admit("m", &caps, 0, why, &retry), BUD_RATE);
	ck_assert_str_eq(why, "rate cap 1/m");
	ck_assert_int_eq(retry, 60);
	fake_now += 30500;
	ck_assert_int_eq(admit("m", &caps, 0, why, &retry), BUD_RATE);
	ck_assert_int_eq(retry, 30);	/* 29.5 s, rounded up */

	/* refused by money: no rate token taken */
	caps.cp_has_usd = 1;
	caps.cp_usd = 0;
	ck_assert_int_eq(admit("u", &caps, 1, why, &retry), BUD_EXCEEDED);
	ck_assert_int_eq(admit("u", &caps, 0, why, &retry), BUD_OK);
}
END_TEST

START_TEST(test_window_rollover)
{
	struct cfg_caps		caps = { .cp_has_requests = 1,
				    .cp_requests = 2, .cp_has_usd = 1,
				    .cp_usd = 1000, .cp_window_ms = HOUR_MS };
	struct bud_counters	c;
	char			why[128];

	fake_now = T_2026 + 10 * HOUR_MS + HOUR_MS - 1000;	/* 10:59:59 */
	ck_assert_int_eq(admit("s", &caps, 300, why, NULL), BUD_OK);
	ck_assert_int_eq(admit("s", &caps, 0, why, NULL), BUD_OK);
	bud_settle("s", 300, 200);
	ck_assert_int_eq(admit("s", &caps, 100, why, NULL), BUD_EXCEEDED);
	bud_add_bytes("s", 10, 20);
	c = get("s");
	ck_assert_uint_eq(c.bc_window_start, (T_2026 + 10 * HOUR_MS) / 1000);
	ck_assert_uint_eq(c.bc_requests, 2);
	ck_assert_uint_eq(c.bc_spend, 200);
	/* an unsettled reservation, in flight across the boundary */
	caps.cp_requests = 3;
	ck_assert_int_eq(admit("s", &caps, 700, why, NULL), BUD_OK);
	caps.cp_requests = 2;

	fake_now += 999;		/* 10:59:59.999: same window */
	ck_assert_int_eq(admit("s", &caps, 0, why, NULL), BUD_EXCEEDED);
	fake_now += 1;			/* 11:00:00.000: new window */
	ck_assert_int_eq(bud_get("s", &caps, &c), 0);
	ck_assert_uint_eq(c.bc_window_start, (T_2026 + 11 * HOUR_MS) / 1000);
	ck_assert_uint_eq(c.bc_requests, 0);
	ck_assert_uint_eq(c.bc_spend, 0);
	ck_assert_uint_eq(c.bc_bytes_in, 0);
	ck_assert_uint_eq(c.bc_bytes_out, 0);
	ck_assert_uint_eq(c.bc_reserved, 700);	/* carried over */
	ck_assert_int_eq(admit("s", &caps, 301, why, NULL), BUD_EXCEEDED);
	ck_assert_int_eq(admit("s", &caps, 300, why, NULL), BUD_OK);
	bud_settle("s", 700, 650);
	c = get("s");
	ck_assert_uint_eq(c.bc_spend, 650);
	ck_assert_uint_eq(c.bc_reserved, 300);
	ck_assert_uint_eq(c.bc_requests, 1);

	/* 24h windows start at 00:00 UTC */
	caps.cp_window_ms = DAY_MS;
	fake_now = T_2026 + 23 * HOUR_MS + 59 * 60000;
	ck_assert_int_eq(admit("d", &caps, 0, why, NULL), BUD_OK);
	ck_assert_uint_eq(get("d").bc_window_start, T_2026 / 1000);
	fake_now = T_2026 + DAY_MS;
	ck_assert_int_eq(admit("d", &caps, 0, why, NULL), BUD_OK);
	c = get("d");
	ck_assert_uint_eq(c.bc_window_start, (T_2026 + DAY_MS) / 1000);
	ck_assert_uint_eq(c.bc_requests, 1);
	/* the wall clock stepping back does not reopen a window */
	fake_now = T_2026 + 5 * HOUR_MS;
	ck_assert_int_eq(admit("d", &caps, 0, why, NULL), BUD_OK);
	c = get("d");
	ck_assert_uint_eq(c.bc_window_start, (T_2026 + DAY_MS) / 1000);
	ck_assert_uint_eq(c.bc_requests, 2);
}
END_TEST

START_TEST(test_lifetime)
{
	struct cfg_caps		caps = { .cp_has_requests = 1,
				    .cp_requests = 3 };
	struct bud_counters	c;
	char			why[128];
	int			i;

	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(admit("s", &caps, 0, why, NULL), BUD_OK);
		fake_now += 400 * DAY_MS;
	}
	ck_assert_int_eq(admit("s", &caps, 0, why, NULL), BUD_EXCEEDED);
	ck_assert_int_eq(bud_get("s", &caps, &c), 0);
	ck_assert_uint_eq(c.bc_window_start, 0);
	ck_assert_uint_eq(c.bc_requests, 3);
	/* switching a windowed sandbox to lifetime keeps its counters */
	caps.cp_window_ms = HOUR_MS;
	caps.cp_requests = 10;
	ck_assert_int_eq(admit("w", &caps, 0, why, NULL), BUD_OK);
	ck_assert_uint_ne(get("w").bc_window_start, 0);
	caps.cp_window_ms = 0;
	ck_assert_int_eq(admit("w", &caps, 0, why, NULL), BUD_OK);
	c = get("w");
	ck_assert_uint_eq(c.bc_window_start, 0);
	ck_assert_uint_eq(c.bc_requests, 2);
}
END_TEST

START_TEST(test_reset_get)
{
	struct cfg_caps		caps = { .cp_has_requests = 1,
				    .cp_requests = 1, .cp_has_usd = 1,
				    .cp_usd = 100 };
	struct bud_counters	c;
	char			why[128];

	ck_assert_int_eq(bud_get("nobody", NULL, &c), -1);
	ck_assert_int_eq(admit("s", &caps, 40, why, NULL), BUD_OK);
	bud_add_bytes("s", 5, 6);
	ck_assert_int_eq(admit("s", &caps, 0, why, NULL), BUD_EXCEEDED);
	bud_reset("s");
	bud_reset("nobody");
	c = get("s");
	ck_assert_uint_eq(c.bc_requests, 0);
	ck_assert_uint_eq(c.bc_bytes_in, 0);
	ck_assert_uint_eq(c.bc_bytes_out, 0);
	ck_assert_uint_eq(c.bc_spend, 0);
	ck_assert_uint_eq(c.bc_reserved, 40);	/* still in flight */
	ck_assert_int_eq(admit("s", &caps, 60, why, NULL), BUD_OK);
	bud_settle("s", 40, 40);
	ck_assert_uint_eq(get("s").bc_spend, 40);
}
END_TEST

/* ---- concurrency ---------------------------------------------------- */

#define NRACE	64

static pthread_barrier_t	race_bar;
static const struct cfg_caps	*race_caps;
static uint64_t			 race_reserve;
static int			 race_ok;

static void *
race_main(void *arg)
{
	char	why[128];
	int	retry;

	pthread_barrier_wait(&race_bar);
	if (bud_admit("racer", race_caps, race_reserve, why, sizeof(why),
	    &retry) == BUD_OK)
		__atomic_add_fetch(&race_ok, 1, __ATOMIC_RELAXED);
	return NULL;
}

static int
race(const struct cfg_caps *caps, uint64_t reserve)
{
	pthread_t	t[NRACE];
	int		i;

	race_caps = caps;
	race_reserve = reserve;
	race_ok = 0;
	pthread_barrier_init(&race_bar, NULL, NRACE);
	for (i = 0; i < NRACE; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, race_main, NULL),
		    0);
	for (i = 0; i < NRACE; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&race_bar);
	return race_ok;
}

START_TEST(test_race_usd)
{
	struct cfg_caps		caps = { .cp_has_usd = 1,
				    .cp_usd = 1000 };
	struct bud_counters	c;

	/* durable: every admission waits for its group commit */
	ck_assert_int_eq(bud_open(tmpdir), 0);
	ck_assert_int_eq(race(&caps, 70), 14);	/* floor(1000 / 70) */
	c = get("racer");
	ck_assert_uint_eq(c.bc_reserved, 14 * 70);
	ck_assert_uint_le(c.bc_reserved, caps.cp_usd);
	ck_assert_uint_eq(c.bc_requests, 14);
	/* nothing left for anyone */
	ck_assert_int_eq(race(&caps, 70), 0);
	bud_close();
	/* after a restart the open reservations are spend */
	ck_assert_int_eq(bud_open(tmpdir), 0);
	c = get("racer");
	ck_assert_uint_eq(c.bc_spend, 14 * 70);
	ck_assert_uint_eq(c.bc_reserved, 0);
	ck_assert_uint_eq(c.bc_requests, 14);
	bud_close();

	/* in memory, an exact fit: all but the last four */
	caps.cp_usd = 60 * 1000;
	ck_assert_int_eq(race(&caps, 1000), 60);
	ck_assert_uint_eq(get("racer").bc_reserved, 60 * 1000);
}
END_TEST

/* ---- ledger --------------------------------------------------------- */

START_TEST(test_ledger_files)
{
	struct stat	st;
	char		path[320], c;
	pid_t		pid;
	int		status, p[2];

	/* The child forks first, so its bud state is fresh; it tries the
	 * directory while we hold it. */
	ck_assert_int_eq(pipe(p), 0);
	if ((pid = fork()) == 0) {
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(2);
		_exit(bud_open(tmpdir) == -1 ? 0 : 1);
	}
	ck_assert_int_ne(pid, -1);
	close(p[0]);
	ck_assert_int_eq(bud_open(tmpdir), 0);
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	close(p[1]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);

	snprintf(path, sizeof(path), "%s/budget", tmpdir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	ck_assert_int_eq(stat(ledger, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	/* one per process */
	ck_assert_int_eq(bud_open(tmpdir), -1);
	bud_close();
	ck_assert_int_eq(bud_open(tmpdir), 0);
}
END_TEST

/* A reservation without its settle (the crash) is spend, in full. */
START_TEST(test_ledger_crash_exact)
{
	struct cfg_caps		caps = { .cp_has_usd = 1,
				    .cp_usd = 100000 };
	struct bud_counters	c;
	char			why[128];
	pid_t			pid;
	int			status, r;

	if ((pid = fork()) == 0) {
		if (bud_open(tmpdir) != 0 ||
		    admit("s", &caps, 100, why, NULL) != BUD_OK ||
		    admit("s", &caps, 200, why, NULL) != BUD_OK ||
		    admit("s", &caps, 300, why, NULL) != BUD_OK)
			_exit(1);
		bud_settle("s", 200, 50);
		/* its R line is committed after the S line: both durable */
		if (bud_admit("s", &caps, 400, why, sizeof(why), &r) != BUD_OK)
			_exit(1);
		kill(getpid(), SIGKILL);
		_exit(2);
	}
	ck_assert_int_ne(pid, -1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	ck_assert_int_eq(bud_open(tmpdir), 0);
	c = get("s");
	ck_assert_uint_eq(c.bc_spend, 100 + 50 + 300 + 400);
	ck_assert_uint_eq(c.bc_reserved, 0);
	ck_assert_uint_le(c.bc_requests, 4);	/* flushed 1/s */
	/* compacted: one snapshot line */
	ck_assert_int_eq(file_lines(ledger), 1);
	/* the cap still holds after the restart */
	ck_assert_int_eq(bud_admit("s", &caps, 100000 - 850 + 1, why,
	    sizeof(why), &r), BUD_EXCEEDED);
	ck_assert_int_eq(bud_admit("s", &caps, 100000 - 850, why,
	    sizeof(why), &r), BUD_OK);
}
END_TEST

#define KTHREADS	8
#define KMAXRES		1000

static int	kill_fd;

static void *
kill_main(void *arg)
{
	struct cfg_caps	caps = { .cp_has_usd = 1, .cp_usd = 2000000 };
	char		why[128], line[64];
	unsigned int	seed = (unsigned int)(uintptr_t)arg;
	uint64_t	r, c;
	int		retry, n;

	for (;;) {
		r = 1 + (uint64_t)rand_r(&seed) % KMAXRES;
		if (bud_admit("k", &caps, r, why, sizeof(why), &retry) !=
		    BUD_OK)
			continue;
		n = snprintf(line, sizeof(line), "A %llu\n",
		    (unsigned long long)r);
		if (write(kill_fd, line, (size_t)n) != n)
			_exit(3);
		if (rand_r(&seed) % 3 == 0)
			continue;	/* left in flight */
		c = (uint64_t)rand_r(&seed) % (r + 1);
		bud_settle("k", r, c);
		n = snprintf(line, sizeof(line), "S %llu %llu\n",
		    (unsigned long long)r, (unsigned long long)c);
		if (write(kill_fd, line, (size_t)n) != n)
			_exit(3);
	}
	return NULL;
}

/*
 * kill -9 in the middle of parallel admissions and settles: the recorded
 * spend covers every admission that returned (settled at its cost, or in
 * full), and exceeds it by no more than the admissions that had not.
 */
START_TEST(test_ledger_kill9)
{
	struct bud_counters	c;
	unsigned long long	a, b;
	uint64_t		admitted = 0, lower = 0;
	pthread_t		t;
	FILE			*fp;
	char			line[64];
	pid_t			pid;
	int			p[2], status, i, nadmit = 0;

	ck_assert_int_eq(pipe(p), 0);
	if ((pid = fork()) == 0) {
		close(p[0]);
		kill_fd = p[1];
		bud_test_set_clock(NULL);
		bud_test_set_compact_size(16384); /* compact under load */
		if (bud_open(tmpdir) != 0)
			_exit(1);
		for (i = 0; i < KTHREADS; i++)
			if (pthread_create(&t, NULL, kill_main,
			    (void *)(uintptr_t)(i + 1)) != 0)
				_exit(1);
		usleep(300 * 1000);
		kill(getpid(), SIGKILL);
		_exit(2);
	}
	ck_assert_int_ne(pid, -1);
	close(p[1]);
	ck_assert_ptr_nonnull(fp = fdopen(p[0], "r"));
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (sscanf(line, "A %llu", &a) == 1) {
			admitted += a;
			lower += a;
			nadmit++;
		} else if (sscanf(line, "S %llu %llu", &a, &b) == 2)
			lower = lower - a + b;
	}
	fclose(fp);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_int_gt(nadmit, 10);

	bud_test_set_clock(NULL);
	ck_assert_int_eq(bud_open(tmpdir), 0);
	c = get("k");
	ck_assert_uint_eq(c.bc_reserved, 0);
	ck_assert_uint_ge(c.bc_spend, lower);
	ck_assert_uint_le(c.bc_spend, admitted + KTHREADS * KMAXRES);
	ck_assert_uint_le(c.bc_spend, 2000000);
	ck_assert_int_eq(file_lines(ledger), 1);
}
END_TEST

START_TEST(test_ledger_compact)
{
	struct cfg_caps		caps = { .cp_has_usd = 1,
				    .cp_usd = 1000000000,
				    .cp_window_ms = DAY_MS };
	struct bud_counters	before[3], c;
	const char		*ids[3] = { "alpha", "beta", "gamma" };
	char			why[128];
	off_t			big;
	int			i, j, r;

	ck_assert_int_eq(bud_open(tmpdir), 0);
	for (i = 0; i < 300; i++)
		for (j = 0; j < 3; j++) {
			ck_assert_int_eq(bud_admit(ids[j], &caps, 1000 + j,
			    why, sizeof(why), &r), BUD_OK);
			bud_add_bytes(ids[j], 10, 20 + j);
			bud_settle(ids[j], 1000 + j, 7 + j);
		}
	/* one in flight at the close: spend after the restart */
	ck_assert_int_eq(bud_admit("gamma", &caps, 99, why, sizeof(why), &r),
	    BUD_OK);
	for (j = 0; j < 3; j++)
		ck_assert_int_eq(bud_get(ids[j], &caps, &before[j]), 0);
	bud_close();
	big = file_size(ledger);
	ck_assert_int_gt(big, 300 * 3 * 30);

	ck_assert_int_eq(bud_open(tmpdir), 0);
	ck_assert_int_lt(file_size(ledger), 400);
	ck_assert_int_eq(file_lines(ledger), 3);
	for (j = 0; j < 3; j++) {
		ck_assert_int_eq(bud_get(ids[j], &caps, &c), 0);
		ck_assert_uint_eq(c.bc_window_start, before[j].bc_window_start);
		ck_assert_uint_eq(c.bc_requests, before[j].bc_requests);
		ck_assert_uint_eq(c.bc_bytes_in, before[j].bc_bytes_in);
		ck_assert_uint_eq(c.bc_bytes_out, before[j].bc_bytes_out);
		ck_assert_uint_eq(c.bc_spend, before[j].bc_spend +
		    before[j].bc_reserved);
		ck_assert_uint_eq(c.bc_reserved, 0);
	}
	ck_assert_uint_eq(before[0].bc_requests, 300);
	ck_assert_uint_eq(before[0].bc_spend, 300 * 7);
	ck_assert_uint_eq(before[2].bc_bytes_out, 300 * 22);
	ck_assert_uint_eq(before[2].bc_reserved, 99);
	/* a second open changes nothing */
	bud_close();
	ck_assert_int_eq(bud_open(tmpdir), 0);
	c = get("gamma");
	ck_assert_uint_eq(c.bc_spend, 300 * 9 + 99);
	ck_assert_uint_eq(c.bc_requests, 301);
}
END_TEST

START_TEST(test_ledger_compact_runtime)
{
	struct cfg_caps		caps = { .cp_has_usd = 1,
				    .cp_usd = 1000000000 };
	struct bud_counters	c;
	char			why[128], id[32];
	int			i, r;

	bud_test_set_compact_size(8192);
	ck_assert_int_eq(bud_open(tmpdir), 0);
	for (i = 0; i < 5000; i++) {
		snprintf(id, sizeof(id), "sb-%d", i % 5);
		ck_assert_int_eq(bud_admit(id, &caps, 500, why, sizeof(why),
		    &r), BUD_OK);
		bud_add_bytes(id, 1, 2);
		bud_settle(id, 500, 3);
		/* Each admission is its own commit here, so the file never
		 * grows by more than a few lines past the threshold. */
		ck_assert_int_lt(file_size(ledger), 8192 + 4096);
	}
	ck_assert_int_eq(bud_admit("sb-0", &caps, 11, why, sizeof(why), &r),
	    BUD_OK);
	bud_close();
	ck_assert_int_eq(bud_open(tmpdir), 0);
	for (i = 0; i < 5; i++) {
		snprintf(id, sizeof(id), "sb-%d", i);
		c = get(id);
		ck_assert_uint_eq(c.bc_requests, 1000 + (i == 0));
		ck_assert_uint_eq(c.bc_bytes_in, 1000);
		ck_assert_uint_eq(c.bc_bytes_out, 2000);
		ck_assert_uint_eq(c.bc_spend, 3000 + (i == 0) * 11);
		ck_assert_uint_eq(c.bc_reserved, 0);
	}
	ck_assert_int_eq(file_lines(ledger), 5);
}
END_TEST

START_TEST(test_ledger_replay_rules)
{
	struct bud_counters	c;
	char			dir[300];

	snprintf(dir, sizeof(dir), "%s/budget", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	file_put(ledger,
	    /* window 1h: settled in the next window, then bytes there */
	    "R w 3600000 100\n"
	    "B w 3600000 1 1 1\n"
	    "S w 7200000 100 40\n"
	    "B w 7200000 5 6 2\n"
	    /* a reset drops counters, not what is in flight */
	    "B z 0 9 9 9\n"
	    "R z 0 70\n"
	    "S z 0 0 5\n"
	    "Z z\n"
	    "S z 0 0 3\n"
	    /* a snapshot replaces what came before */
	    "R c 0 1000\n"
	    "C c 0 4 5 6 7 8\n"
	    "S c 0 8 2\n"
	    /* malformed lines are skipped */
	    "R bad 0 -1\n"
	    "R bad 0 12x\n"
	    "R bad 0\n"
	    "Q bad 0 1\n"
	    "R bad%2 0 1\n"
	    "RR bad 0 1\n"
	    "R  bad 0 1 1\n"
	    /* escaped ids */
	    "R a%20b%25 0 11\n"
	    /* a torn tail: never acknowledged, ignored */
	    "S w 7200000 100 1");
	ck_assert_int_eq(bud_open(tmpdir), 0);
	c = get("w");
	ck_assert_uint_eq(c.bc_window_start, 7200);
	ck_assert_uint_eq(c.bc_spend, 40);
	ck_assert_uint_eq(c.bc_requests, 2);
	ck_assert_uint_eq(c.bc_bytes_in, 5);
	ck_assert_uint_eq(c.bc_bytes_out, 6);
	ck_assert_uint_eq(c.bc_reserved, 0);
	c = get("z");
	ck_assert_uint_eq(c.bc_spend, 70 + 3);
	ck_assert_uint_eq(c.bc_requests, 0);
	c = get("c");
	ck_assert_uint_eq(c.bc_requests, 4);
	ck_assert_uint_eq(c.bc_bytes_in, 5);
	ck_assert_uint_eq(c.bc_bytes_out, 6);
	ck_assert_uint_eq(c.bc_spend, 7 + 2);
	ck_assert_int_eq(bud_get("bad", NULL, &c), -1);
	ck_assert_uint_eq(get("a b%").bc_spend, 11);
	ck_assert_int_eq(file_lines(ledger), 4);
}
END_TEST

START_TEST(test_ledger_escape)
{
	struct cfg_caps		caps = { .cp_has_usd = 1,
				    .cp_usd = 1000 };
	const char		*odd = "a b%c\nR x 0 999";
	char			why[128], buf[512];
	FILE			*fp;
	size_t			n;
	int			r;

	ck_assert_int_eq(bud_open(tmpdir), 0);
	ck_assert_int_eq(bud_admit(odd, &caps, 5, why, sizeof(why), &r),
	    BUD_OK);
	bud_close();
	ck_assert_ptr_nonnull(fp = fopen(ledger, "r"));
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	ck_assert_ptr_nonnull(strstr(buf,
	    "R a%20b%25c%0AR%20x%200%20999 0 5\n"));
	ck_assert_int_eq(file_lines(ledger), 2);	/* R, B */
	ck_assert_int_eq(bud_open(tmpdir), 0);
	ck_assert_uint_eq(get(odd).bc_spend, 5);
	ck_assert_int_eq(bud_get("x", NULL, &(struct bud_counters){ 0 }), -1);
}
END_TEST

START_TEST(test_ledger_window_reset)
{
	struct cfg_caps		caps = { .cp_has_requests = 1,
				    .cp_requests = 5, .cp_window_ms = HOUR_MS };
	struct bud_counters	c;
	char			why[128];
	int			i, r;

	ck_assert_int_eq(bud_open(tmpdir), 0);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(bud_admit("s", &caps, 1, why, sizeof(why),
		    &r), BUD_OK);
	bud_add_bytes("s", 3, 4);
	fake_now += HOUR_MS;
	ck_assert_int_eq(bud_admit("s", &caps, 2, why, sizeof(why), &r),
	    BUD_OK);
	bud_add_bytes("s", 30, 40);
	bud_reset("r");
	ck_assert_int_eq(bud_admit("r", &caps, 0, why, sizeof(why), &r),
	    BUD_OK);
	bud_add_bytes("r", 1, 1);
	bud_reset("r");
	bud_close();

	ck_assert_int_eq(bud_open(tmpdir), 0);
	c = get("s");
	ck_assert_uint_eq(c.bc_window_start, (T_2026 + 11 * HOUR_MS) / 1000);
	ck_assert_uint_eq(c.bc_requests, 1);
	ck_assert_uint_eq(c.bc_bytes_in, 30);
	ck_assert_uint_eq(c.bc_bytes_out, 40);
	ck_assert_uint_eq(c.bc_spend, 5 + 2);	/* in flight: both */
	c = get("r");
	ck_assert_uint_eq(c.bc_requests, 0);
	ck_assert_uint_eq(c.bc_bytes_in, 0);
	/* the next window resets what the restart brought back */
	fake_now += HOUR_MS;
	ck_assert_int_eq(bud_get("s", &caps, &c), 0);
	ck_assert_uint_eq(c.bc_spend, 0);
	ck_assert_uint_eq(c.bc_requests, 0);
}
END_TEST

/*
 * A failed write: that reservation and every later one is refused (what
 * reached the disk is unknowable), requests without money still pass.
 */
START_TEST(test_ledger_broken)
{
	struct cfg_caps		caps = { .cp_has_usd = 1,
				    .cp_usd = 1000000 };
	struct rlimit		rl = { 4096, 4096 };
	struct bud_counters	c;
	char			why[128];
	pid_t			pid;
	int			status, i, rc = 0;

	if ((pid = fork()) == 0) {
		signal(SIGXFSZ, SIG_IGN);	/* EFBIG instead */
		if (bud_open(tmpdir) != 0 ||
		    setrlimit(RLIMIT_FSIZE, &rl) != 0)
			_exit(10);
		for (i = 0; i < 1000; i++)
			if (admit("s", &caps, 1, why, NULL) != BUD_OK)
				break;
		if (i == 1000 || i < 10)
			_exit(11);
		if (strcmp(why, "budget ledger unavailable") != 0)
			_exit(12);
		if (admit("s", &caps, 1, why, NULL) != BUD_EXCEEDED)
			_exit(13);
		if (admit("s", &caps, 0, why, NULL) != BUD_OK)
			_exit(14);
		/* the refused reservations were released */
		if (bud_get("s", NULL, &c) != 0 || c.bc_reserved != (uint64_t)i)
			_exit(15);
		bud_close();
		_exit(0);
	}
	ck_assert_int_ne(pid, -1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	rc = WEXITSTATUS(status);
	ck_assert_int_eq(rc, 0);
	/* what did reach the file is kept, and counts at most as reserved */
	ck_assert_int_eq(bud_open(tmpdir), 0);
	c = get("s");
	ck_assert_uint_ge(c.bc_spend, 10);
	ck_assert_uint_le(c.bc_spend, 1000);
}
END_TEST

/* Bytes charged in flight: the room left under each cap, -1 once past. */
START_TEST(test_flow_charge)
{
	struct cfg_caps		caps = { .cp_has_bytes_in = 1,
				    .cp_bytes_in = 100, .cp_has_bytes_out = 1,
				    .cp_bytes_out = 50 };
	struct bud_room		r;
	struct bud_sb		*sb = bud_handle("f");
	struct bud_counters	c;

	ck_assert_ptr_nonnull(sb);
	ck_assert_ptr_eq(bud_handle("f"), sb);
	ck_assert_ptr_null(bud_handle(""));
	ck_assert_int_eq(bud_charge(sb, &caps, 0, 0, &r), 0);
	ck_assert_uint_eq(r.br_in, 100);
	ck_assert_uint_eq(r.br_out, 50);
	ck_assert_int_eq(bud_charge(sb, &caps, 60, 50, &r), 0);
	ck_assert_uint_eq(r.br_in, 40);
	ck_assert_uint_eq(r.br_out, 0);	/* at the cap: not past it */
	ck_assert_int_eq(bud_charge(sb, &caps, 41, 0, &r), -1);
	ck_assert_uint_eq(r.br_in, 0);
	c = get("f");
	ck_assert_uint_eq(c.bc_bytes_in, 101);
	ck_assert_uint_eq(c.bc_bytes_out, 50);
	/* counted: the next admission is refused */
	ck_assert_int_eq(admit("f", &caps, 0, NULL, NULL), BUD_EXCEEDED);
	/* no caps: no room limit */
	ck_assert_int_eq(bud_charge(sb, NULL, 1, 1, &r), 0);
	ck_assert_uint_eq(r.br_in, UINT64_MAX);
	ck_assert_uint_eq(r.br_out, UINT64_MAX);
	ck_assert_int_eq(bud_charge(NULL, &caps, 1, 1, &r), 0);
}
END_TEST

START_TEST(test_llm_slots)
{
	struct bud_sb	*sb = bud_handle("l");
	int		 i;

	for (i = 0; i < 4; i++)
		ck_assert_int_eq(bud_llm_enter(sb, 4), 0);
	ck_assert_int_eq(bud_llm_enter(sb, 4), -1);
	ck_assert_uint_eq(bud_llm_inflight("l"), 4);
	bud_llm_leave(sb);
	ck_assert_int_eq(bud_llm_enter(sb, 4), 0);
	ck_assert_int_eq(bud_llm_enter(sb, 0), 0);	/* 0: no limit */
	for (i = 0; i < 10; i++)
		bud_llm_leave(sb);
	ck_assert_uint_eq(bud_llm_inflight("l"), 0);	/* never below */
	ck_assert_uint_eq(bud_llm_inflight("nobody"), 0);
}
END_TEST

START_TEST(test_price_max_output)
{
	struct cfg	*c = pcfg();

	c->c_limits.l_default_max_tokens = 128000;
	ck_assert_uint_eq(price_max_output(c, "gpt-4o-mini-2024"), 16384);
	ck_assert_uint_eq(price_max_output(c, "claude-sonnet-4-5"), 64000);
	/* an entry without max_output: the default */
	ck_assert_uint_eq(price_max_output(c, "plain-x"), 128000);
	/* unpriced: the largest of the table and the default */
	ck_assert_uint_eq(price_max_output(c, "unknown"), 128000);
	ck_assert_uint_eq(price_max_output(c, ""), 128000);
	c->c_limits.l_default_max_tokens = 1000;
	ck_assert_uint_eq(price_max_output(c, "unknown"), 64000);
}
END_TEST

Suite *
suite_bud(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("bud");
	tc = tcase_create("price");
	tcase_add_test(tc, test_price_exact);
	tcase_add_test(tc, test_price_defaults);
	tcase_add_test(tc, test_price_first_match);
	tcase_add_test(tc, test_price_unpriced);
	tcase_add_test(tc, test_price_huge);
	tcase_add_test(tc, test_price_worst);
	tcase_add_test(tc, test_price_max_output);
	suite_add_tcase(s, tc);

	tc = tcase_create("caps");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_cap_requests);
	tcase_add_test(tc, test_cap_bytes);
	tcase_add_test(tc, test_cap_usd);
	tcase_add_test(tc, test_cap_rate);
	tcase_add_test(tc, test_window_rollover);
	tcase_add_test(tc, test_lifetime);
	tcase_add_test(tc, test_reset_get);
	tcase_add_test(tc, test_flow_charge);
	tcase_add_test(tc, test_llm_slots);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrency");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_race_usd);
	suite_add_tcase(s, tc);

	tc = tcase_create("ledger");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_ledger_files);
	tcase_add_test(tc, test_ledger_crash_exact);
	tcase_add_test(tc, test_ledger_kill9);
	tcase_add_test(tc, test_ledger_compact);
	tcase_add_test(tc, test_ledger_compact_runtime);
	tcase_add_test(tc, test_ledger_replay_rules);
	tcase_add_test(tc, test_ledger_escape);
	tcase_add_test(tc, test_ledger_window_reset);
	tcase_add_test(tc, test_ledger_broken);
	suite_add_tcase(s, tc);
	return s;
}
