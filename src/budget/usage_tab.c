/*
 * Spend by model and by UTC day, per sandbox: what `airlockctl usage ID
 * --by model|day` and GET /v1/sandboxes/{id}/usage?by= show.
 *
 * Each settled metered request adds to one row (UTC day, model): request
 * count, cost, and tokens by kind. A row is a "U" line of the ledger
 * (bud.c), added on settle and written again whole at compaction, so the
 * rows outlive both restarts and compaction; replay adds the lines up. A
 * ledger from before these lines replays as before, with no rows.
 *
 * Bounded: USE_MODELS distinct model names per sandbox (further ones
 * count under "other") and USE_ROWS rows (when full, the oldest day's
 * rows are dropped to make room: the breakdown keeps the recent past,
 * the spend counters are not affected).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/bud.h"
#include "budget/bud_internal.h"
#include "util/util.h"

#define USE_MODELS	64
#define USE_ROWS	4096
#define USE_OTHER	"other"
#define USE_UNKNOWN	"unknown"

struct bud_use {
	struct bud_use_row	*u_rows;
	size_t			 u_n;
	size_t			 u_cap;
	size_t			 u_models;	/* distinct names in rows */
};

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static void
row_add(struct bud_use_row *r, const struct bud_use_row *d)
{
	r->ur_requests = sat_add(r->ur_requests, d->ur_requests);
	r->ur_cost = sat_add(r->ur_cost, d->ur_cost);
	r->ur_input = sat_add(r->ur_input, d->ur_input);
	r->ur_cached = sat_add(r->ur_cached, d->ur_cached);
	r->ur_cache_write = sat_add(r->ur_cache_write, d->ur_cache_write);
	r->ur_output = sat_add(r->ur_output, d->ur_output);
}

static int
model_known(const struct bud_use *u, const char *model)
{
	size_t	i;

	for (i = 0; i < u->u_n; i++)
		if (strcmp(u->u_rows[i].ur_model, model) == 0)
			return 1;
	return 0;
}

/* Distinct model names, recounted after rows were dropped. */
static size_t
model_count(const struct bud_use *u)
{
	size_t	i, j, n = 0;

	for (i = 0; i < u->u_n; i++) {
		for (j = 0; j < i; j++)
			if (strcmp(u->u_rows[i].ur_model,
			    u->u_rows[j].ur_model) == 0)
				break;
		n += j == i;
	}
	return n;
}

/* Full: drop the rows of the oldest day. */
static void
drop_oldest_day(struct bud_use *u)
{
	uint64_t	oldest = UINT64_MAX;
	size_t		i, o = 0;

	for (i = 0; i < u->u_n; i++)
		if (u->u_rows[i].ur_day < oldest)
			oldest = u->u_rows[i].ur_day;
	for (i = 0; i < u->u_n; i++)
		if (u->u_rows[i].ur_day != oldest)
			u->u_rows[o++] = u->u_rows[i];
	u->u_n = o;
	u->u_models = model_count(u);
}

void
bud_use_add(struct bud_sb *sb, const struct bud_use_row *d)
{
	struct bud_use		*u;
	const char		*model = d->ur_model[0] != '\0' ? d->ur_model :
				    USE_UNKNOWN;
	size_t			 i;

	if ((u = sb->sb_use) == NULL)
		u = sb->sb_use = xcalloc(1, sizeof(*u));
	if (!model_known(u, model) && u->u_models >= USE_MODELS)
		model = USE_OTHER;
	for (i = 0; i < u->u_n; i++)
		if (u->u_rows[i].ur_day == d->ur_day &&
		    strcmp(u->u_rows[i].ur_model, model) == 0) {
			row_add(&u->u_rows[i], d);
			return;
		}
	if (u->u_n == USE_ROWS)
		drop_oldest_day(u);
	if (u->u_n == u->u_cap) {
		u->u_cap = u->u_cap ? u->u_cap * 2 : 8;
		u->u_rows = xrealloc(u->u_rows, u->u_cap *
		    sizeof(*u->u_rows));
	}
	if (!model_known(u, model))
		u->u_models++;
	memset(&u->u_rows[u->u_n], 0, sizeof(u->u_rows[0]));
	u->u_rows[u->u_n].ur_day = d->ur_day;
	util_copy_str(u->u_rows[u->u_n].ur_model, model,
	    sizeof(u->u_rows[0].ur_model));
	row_add(&u->u_rows[u->u_n], d);
	u->u_n++;
}

void
bud_use_clear(struct bud_sb *sb)
{
	if (sb->sb_use == NULL)
		return;
	free(sb->sb_use->u_rows);
	free(sb->sb_use);
	sb->sb_use = NULL;
}

/* The ledger line of one row (bud.c writes and replays them). */
static void
row_line(const char *esc_sb, const struct bud_use_row *r,
    void (*emit)(void *, const char *), void *arg)
{
	char	*model = bud_escape(r->ur_model), *line;
	size_t	 cap = strlen(esc_sb) + strlen(model) + 8 * 21 + 16;

	line = xmalloc(cap);
	snprintf(line, cap, "U %s %" PRIu64 " %s %" PRIu64 " %" PRIu64
	    " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", esc_sb,
	    r->ur_day, model, r->ur_requests, r->ur_cost, r->ur_input,
	    r->ur_cached, r->ur_cache_write, r->ur_output);
	emit(arg, line);
	free(line);
	free(model);
}

void
bud_use_lines(const struct bud_sb *sb, void (*emit)(void *, const char *),
    void *arg)
{
	size_t	i;

	if (sb->sb_use == NULL)
		return;
	for (i = 0; i < sb->sb_use->u_n; i++)
		row_line(sb->sb_esc, &sb->sb_use->u_rows[i], emit, arg);
}

void
bud_use_line(const struct bud_sb *sb, const struct bud_use_row *d,
    void (*emit)(void *, const char *), void *arg)
{
	struct bud_use_row	r = *d;

	if (r.ur_model[0] == '\0')
		util_copy_str(r.ur_model, USE_UNKNOWN, sizeof(r.ur_model));
	row_line(sb->sb_esc, &r, emit, arg);
}

/* Unsigned decimal fields only (strtoull alone would take "-1"). */
static int
parse_u64(const char *s, uint64_t *v)
{
	char	*end;

	if (s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno != 0 || *end != '\0' ? -1 : 0;
}

int
bud_use_replay(char **f, int n)
{
	struct bud_use_row	r;
	uint64_t		v[7];
	int			i;

	if (n != 10 || parse_u64(f[2], &v[0]) == -1)
		return -1;
	for (i = 1; i < 7; i++)
		if (parse_u64(f[3 + i], &v[i]) == -1)
			return -1;
	if (bud_unescape(f[1]) == -1 || bud_unescape(f[3]) == -1 ||
	    strlen(f[3]) >= sizeof(r.ur_model))
		return -1;
	memset(&r, 0, sizeof(r));
	r.ur_day = v[0];
	util_copy_str(r.ur_model, f[3], sizeof(r.ur_model));
	r.ur_requests = v[1];
	r.ur_cost = v[2];
	r.ur_input = v[3];
	r.ur_cached = v[4];
	r.ur_cache_write = v[5];
	r.ur_output = v[6];
	bud_use_add(bud_find(f[1], 1), &r);
	return 0;
}

/* ---- the breakdown -------------------------------------------------- */

static int
by_model_cmp(const void *a, const void *b)
{
	return strcmp(((const struct bud_use_row *)a)->ur_model,
	    ((const struct bud_use_row *)b)->ur_model);
}

static int
by_day_cmp(const void *a, const void *b)
{
	uint64_t	x = ((const struct bud_use_row *)a)->ur_day;
	uint64_t	y = ((const struct bud_use_row *)b)->ur_day;

	return x < y ? -1 : x > y;
}

int
bud_usage_by(const char *sandbox, enum bud_by by, struct bud_use_row **out,
    size_t *nout)
{
	struct bud_sb		*sb;
	struct bud_use_row	*rows = NULL, *r;
	size_t			 i, j, n = 0;

	*out = NULL;
	*nout = 0;
	if (sandbox == NULL || (sb = bud_find(sandbox, 0)) == NULL)
		return -1;
	pthread_mutex_lock(&sb->sb_lock);
	if (sb->sb_use != NULL && sb->sb_use->u_n > 0) {
		rows = xcalloc(sb->sb_use->u_n, sizeof(*rows));
		for (i = 0; i < sb->sb_use->u_n; i++) {
			r = &sb->sb_use->u_rows[i];
			for (j = 0; j < n; j++)
				if (by == BUD_BY_MODEL ?
				    strcmp(rows[j].ur_model, r->ur_model) == 0 :
				    rows[j].ur_day == r->ur_day)
					break;
			if (j == n) {
				if (by == BUD_BY_MODEL)
					util_copy_str(rows[n].ur_model,
					    r->ur_model,
					    sizeof(rows[n].ur_model));
				else
					rows[n].ur_day = r->ur_day;
				n++;
			}
			row_add(&rows[j], r);
		}
	}
	pthread_mutex_unlock(&sb->sb_lock);
	if (n > 1)
		qsort(rows, n, sizeof(*rows), by == BUD_BY_MODEL ?
		    by_model_cmp : by_day_cmp);
	*out = rows;
	*nout = n;
	return 0;
}
