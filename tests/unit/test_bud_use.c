/*
 * The spend breakdown by model and UTC day (src/budget/usage_tab.c): sums
 * per model and per day, the U lines of the ledger across restarts and
 * compaction, an old ledger without them, the bounds, reset.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "budget/bud.h"
#include "unit.h"

void	bud_test_set_clock(uint64_t (*)(void));
void	bud_test_set_compact_size(uint64_t);

#define T_2026		1767225600000ULL	/* 2026-01-01T00:00Z, ms */
#define DAY_MS		86400000ULL
#define DAY_2026	(T_2026 / DAY_MS)

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
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/airlock-use-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(ledger, sizeof(ledger), "%s/budget/ledger", tmpdir);
	fake_now = T_2026 + 3600000;
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

static void
settle(const char *sb, const char *model, uint64_t cost, uint64_t in,
    uint64_t cached, uint64_t out)
{
	struct usage	u;

	memset(&u, 0, sizeof(u));
	u.u_found = 1;
	u.u_input = in;
	u.u_cached = cached;
	u.u_output = out;
	bud_settle_usage(sb, cost, cost, &u, model);
}

static const struct bud_use_row *
row_of(const struct bud_use_row *rows, size_t n, const char *model,
    uint64_t day)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if ((model == NULL || strcmp(rows[i].ur_model, model) == 0) &&
		    (day == 0 || rows[i].ur_day == day))
			return &rows[i];
	return NULL;
}

/* Two models over two days, summed both ways. */
static void
check_sums(const char *sb)
{
	struct bud_use_row		*rows;
	const struct bud_use_row	*r;
	size_t				 n;

	ck_assert_int_eq(bud_usage_by(sb, BUD_BY_MODEL, &rows, &n), 0);
	ck_assert_uint_eq(n, 3);
	/* sorted by name */
	ck_assert_str_eq(rows[0].ur_model, "claude-sonnet-4");
	ck_assert_str_eq(rows[1].ur_model, "gpt-4o-mini");
	ck_assert_str_eq(rows[2].ur_model, "unknown");
	r = row_of(rows, n, "gpt-4o-mini", 0);
	ck_assert_uint_eq(r->ur_requests, 3);
	ck_assert_uint_eq(r->ur_cost, 10 + 20 + 5);
	ck_assert_uint_eq(r->ur_input, 100 + 200 + 50);
	ck_assert_uint_eq(r->ur_cached, 10 + 0 + 50);
	ck_assert_uint_eq(r->ur_output, 7 + 8 + 1);
	r = row_of(rows, n, "claude-sonnet-4", 0);
	ck_assert_uint_eq(r->ur_requests, 1);
	ck_assert_uint_eq(r->ur_cost, 1000);
	free(rows);
	ck_assert_int_eq(bud_usage_by(sb, BUD_BY_DAY, &rows, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(rows[0].ur_day, DAY_2026);
	ck_assert_uint_eq(rows[1].ur_day, DAY_2026 + 1);
	ck_assert_uint_eq(rows[0].ur_requests, 3);
	ck_assert_uint_eq(rows[0].ur_cost, 10 + 20 + 1000);
	ck_assert_uint_eq(rows[1].ur_requests, 2);
	ck_assert_uint_eq(rows[1].ur_cost, 5 + 77);
	free(rows);
}

static void
spend_two_days(const char *sb)
{
	fake_now = T_2026 + 3600000;
	settle(sb, "gpt-4o-mini", 10, 100, 10, 7);
	settle(sb, "gpt-4o-mini", 20, 200, 0, 8);
	settle(sb, "claude-sonnet-4", 1000, 5, 0, 9);
	fake_now = T_2026 + DAY_MS + 60000;
	settle(sb, "gpt-4o-mini", 5, 50, 50, 1);
	/* charged without usage (its reservation): filed, no tokens */
	bud_settle_usage(sb, 77, 77, NULL, "");
}

START_TEST(test_use_sums)
{
	spend_two_days("use-mem");
	check_sums("use-mem");
	{
		struct bud_use_row	*rows;
		size_t			 n;

		ck_assert_int_eq(bud_usage_by("use-none", BUD_BY_MODEL, &rows,
		    &n), -1);
		ck_assert_ptr_null(rows);
	}
}
END_TEST

/* The rows come back after a restart, and after a compaction. */
START_TEST(test_use_durable)
{
	char	 line[512];
	FILE	*fp;
	int	 u_lines = 0, i;

	ck_assert_int_eq(bud_open(tmpdir), 0);
	spend_two_days("use-dur");
	bud_close();
	ck_assert_ptr_nonnull(fp = fopen(ledger, "r"));
	while (fgets(line, sizeof(line), fp) != NULL)
		u_lines += line[0] == 'U';
	fclose(fp);
	ck_assert_int_ge(u_lines, 3);
	ck_assert_int_eq(bud_open(tmpdir), 0);	/* replay, compaction */
	check_sums("use-dur");
	/* compaction at run time, under traffic */
	bud_test_set_compact_size(4096);
	for (i = 0; i < 300; i++)
		bud_settle_usage("use-dur", 0, 0, NULL, "noise");
	bud_close();
	ck_assert_int_eq(bud_open(tmpdir), 0);
	{
		struct bud_use_row		*rows;
		const struct bud_use_row	*r;
		size_t				 n;

		ck_assert_int_eq(bud_usage_by("use-dur", BUD_BY_MODEL, &rows,
		    &n), 0);
		ck_assert_uint_eq(n, 4);
		r = row_of(rows, n, "noise", 0);
		ck_assert_ptr_nonnull(r);
		ck_assert_uint_eq(r->ur_requests, 300);
		r = row_of(rows, n, "gpt-4o-mini", 0);
		ck_assert_uint_eq(r->ur_cost, 35);
		free(rows);
	}
}
END_TEST

/* A ledger written before U lines existed replays as before; a broken U
 * line is skipped, the rest kept. */
START_TEST(test_use_old_ledger)
{
	struct bud_counters	 c;
	struct bud_use_row	*rows;
	size_t			 n;
	char			 dir[300];
	FILE			*fp;

	snprintf(dir, sizeof(dir), "%s/budget", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_ptr_nonnull(fp = fopen(ledger, "w"));
	fprintf(fp, "C use-old 0 4 10 20 500 0\n"
	    "R use-old 0 100\nS use-old 0 100 60\n"
	    "U use-old 20454 gpt-4o 1 60 9 0 0\n"
	    "U use-old 20454 gpt%%zz 1 60 9 0 0 3\n"
	    "U use-old x gpt-4o 1 60 9 0 0 3\n"
	    "U use-old 20454 gpt-4o 1 60 9 0 0 -3\n"
	    "U use-old 20454 gpt-4o 1 60 9 0 0 3\n");
	fclose(fp);
	ck_assert_int_eq(bud_open(tmpdir), 0);
	ck_assert_int_eq(bud_get("use-old", NULL, &c), 0);
	ck_assert_uint_eq(c.bc_spend, 560);
	ck_assert_uint_eq(c.bc_requests, 4);
	ck_assert_int_eq(bud_usage_by("use-old", BUD_BY_DAY, &rows, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(rows[0].ur_day, 20454);
	ck_assert_uint_eq(rows[0].ur_requests, 1);
	ck_assert_uint_eq(rows[0].ur_output, 3);
	free(rows);
}
END_TEST

/* Bounded: models beyond the limit count as "other"; the oldest day goes
 * when the rows are full. */
START_TEST(test_use_bounds)
{
	struct bud_use_row		*rows;
	const struct bud_use_row	*r;
	char				 model[32];
	size_t				 n;
	int				 i;

	for (i = 0; i < 100; i++) {
		snprintf(model, sizeof(model), "m-%03d", i);
		settle("use-models", model, 1, 1, 0, 1);
	}
	ck_assert_int_eq(bud_usage_by("use-models", BUD_BY_MODEL, &rows, &n),
	    0);
	ck_assert_uint_le(n, 65);
	r = row_of(rows, n, "other", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->ur_requests, 100 - (n - 1));
	free(rows);
	for (i = 0; i < 4200; i++) {
		fake_now = T_2026 + (uint64_t)i * DAY_MS;
		settle("use-days", "d", 1, 1, 0, 1);
	}
	ck_assert_int_eq(bud_usage_by("use-days", BUD_BY_DAY, &rows, &n), 0);
	ck_assert_uint_le(n, 4096);
	ck_assert_uint_ge(n, 4000);
	ck_assert_uint_eq(rows[n - 1].ur_day, DAY_2026 + 4199);
	ck_assert_uint_gt(rows[0].ur_day, DAY_2026);
	free(rows);
}
END_TEST

START_TEST(test_use_reset)
{
	struct bud_use_row	*rows;
	size_t			 n;

	ck_assert_int_eq(bud_open(tmpdir), 0);
	settle("use-reset", "gpt-4o", 5, 1, 0, 1);
	bud_reset("use-reset");
	ck_assert_int_eq(bud_usage_by("use-reset", BUD_BY_MODEL, &rows, &n),
	    0);
	ck_assert_uint_eq(n, 0);
	free(rows);
	settle("use-reset", "gpt-4o", 7, 1, 0, 1);
	bud_close();
	ck_assert_int_eq(bud_open(tmpdir), 0);
	ck_assert_int_eq(bud_usage_by("use-reset", BUD_BY_MODEL, &rows, &n),
	    0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(rows[0].ur_cost, 7);
	free(rows);
}
END_TEST

Suite *
suite_bud_use(void)
{
	Suite	*s = suite_create("bud_use");
	TCase	*tc = tcase_create("breakdown");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_use_sums);
	tcase_add_test(tc, test_use_durable);
	tcase_add_test(tc, test_use_old_ledger);
	tcase_add_test(tc, test_use_bounds);
	tcase_add_test(tc, test_use_reset);
	suite_add_tcase(s, tc);
	return s;
}
