/*
 * Caps: admission (every cap under the sandbox's one lock, the rate
 * bucket), counters added and settled, the usage view. The state and the
 * ledger they write to live in bud.c.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "budget/bud.h"
#include "budget/bud_internal.h"
#include "cfg/cfg.h"
#include "metrics/metrics.h"
#include "util/util.h"

__extension__ typedef unsigned __int128 u128;

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* ---- caps ----------------------------------------------------------- */

static void
fmt_rate(char *buf, size_t bufsz, uint32_t n, uint64_t ms)
{
	switch (ms) {
	case 1000:
		snprintf(buf, bufsz, "%" PRIu32 "/s", n);
		break;
	case 60000:
		snprintf(buf, bufsz, "%" PRIu32 "/m", n);
		break;
	case 3600000:
		snprintf(buf, bufsz, "%" PRIu32 "/h", n);
		break;
	case 86400000:
		snprintf(buf, bufsz, "%" PRIu32 "/d", n);
		break;
	default:
		snprintf(buf, bufsz, "%" PRIu32 "/%" PRIu64 "ms", n, ms);
		break;
	}
}

/*
 * Take one token from the rate bucket (capacity n, refilled n per ms
 * milliseconds). 0, or -1 with *retry_s = whole seconds until a token.
 * Units: a token is <ms> units and the bucket gains <n> units a
 * millisecond, so the refill is exact integer arithmetic.
 */
static int
bud_rate_take(struct bud_sb *sb, uint32_t n, uint64_t ms, int *retry_s)
{
	u128		cap, tok;
	uint64_t	now = bud_mono_ms(), el, need, wait;

	if (ms == 0)
		ms = 1;
	cap = (u128)n * ms;
	if (cap > UINT64_MAX)
		cap = UINT64_MAX;
	if (sb->sb_rate_n != n || sb->sb_rate_ms != ms) {
		/* New or changed cap: start full. */
		sb->sb_rate_n = n;
		sb->sb_rate_ms = ms;
		sb->sb_tok = (uint64_t)cap;
		sb->sb_tok_ms = now;
	}
	el = now > sb->sb_tok_ms ? now - sb->sb_tok_ms : 0;
	sb->sb_tok_ms = now > sb->sb_tok_ms ? now : sb->sb_tok_ms;
	tok = el >= ms ? cap : (u128)sb->sb_tok + (u128)el * n;
	sb->sb_tok = (uint64_t)(tok > cap ? cap : tok);
	if (sb->sb_tok >= ms) {
		sb->sb_tok -= ms;
		return 0;
	}
	if (n == 0)
		wait = ms;
	else {
		need = ms - sb->sb_tok;
		wait = need / n + (need % n != 0);
	}
	wait = wait / 1000 + (wait % 1000 != 0);
	*retry_s = wait == 0 ? 1 : wait > INT32_MAX ? INT32_MAX : (int)wait;
	return -1;
}

enum bud_verdict
bud_admit(const char *sandbox, const struct cfg_caps *caps, uint64_t reserve,
    char *why, size_t whysz, int *retry_after_s)
{
	struct bud_sb		*sb;
	struct bud_counters	*c;
	uint64_t		 seq = 0;
	char			 rate[64];
	int			 retry = 1;

	if (why == NULL)
		whysz = 0;	/* snprintf(NULL, 0, ...) writes nothing */
	else if (whysz > 0)
		why[0] = '\0';
	if (retry_after_s != NULL)
		*retry_after_s = 0;
	if (sandbox == NULL || sandbox[0] == '\0') {
		snprintf(why, whysz, "no sandbox");
		return BUD_EXCEEDED;
	}
	sb = bud_find(sandbox, 1);
	c = &sb->sb_c;

	pthread_mutex_lock(&sb->sb_lock);
	bud_roll_caps(sb, caps);
	/* Spent caps first: a refused request takes no rate token. */
	if (caps != NULL && caps->cp_has_requests &&
	    c->bc_requests >= caps->cp_requests) {
		snprintf(why, whysz, "requests cap %" PRIu64 " reached",
		    caps->cp_requests);
		goto exceeded;
	}
	if (caps != NULL && caps->cp_has_bytes_in &&
	    c->bc_bytes_in >= caps->cp_bytes_in) {
		snprintf(why, whysz, "bytes_in cap %" PRIu64 " reached",
		    caps->cp_bytes_in);
		goto exceeded;
	}
	if (caps != NULL && caps->cp_has_bytes_out &&
	    c->bc_bytes_out >= caps->cp_bytes_out) {
		snprintf(why, whysz, "bytes_out cap %" PRIu64 " reached",
		    caps->cp_bytes_out);
		goto exceeded;
	}
	if (caps != NULL && caps->cp_has_usd &&
	    sat_add(sat_add(c->bc_spend, c->bc_reserved), reserve) >
	    caps->cp_usd) {
		snprintf(why, whysz, "usd cap %" PRIu64 ".%06" PRIu64
		    " reached", caps->cp_usd / 1000000, caps->cp_usd % 1000000);
		goto exceeded;
	}
	if (caps != NULL && caps->cp_has_rate &&
	    bud_rate_take(sb, caps->cp_rate_n, caps->cp_rate_ms, &retry) ==
	    -1) {
		pthread_mutex_unlock(&sb->sb_lock);
		fmt_rate(rate, sizeof(rate), caps->cp_rate_n, caps->cp_rate_ms);
		snprintf(why, whysz, "rate cap %s", rate);
		if (retry_after_s != NULL)
			*retry_after_s = retry;
		return BUD_RATE;
	}
	c->bc_requests = sat_add(c->bc_requests, 1);
	sb->sb_d_req++;
	if (reserve > 0) {
		c->bc_reserved = sat_add(c->bc_reserved, reserve);
		seq = bud_led_queue("R %s %" PRIu64 " %" PRIu64 "\n", sb->sb_esc,
		    sb->sb_ws_ms, reserve);
	}
	pthread_mutex_unlock(&sb->sb_lock);

	/* Outside the lock: the sandbox's other requests join the batch. */
	if (bud_led_wait(seq) == -1) {
		/*
		 * Not durable, so not forwarded. The line may still reach the
		 * disk and count as spend after a restart: too high, which
		 * is the safe side.
		 */
		pthread_mutex_lock(&sb->sb_lock);
		c->bc_reserved -= reserve < c->bc_reserved ? reserve :
		    c->bc_reserved;
		pthread_mutex_unlock(&sb->sb_lock);
		snprintf(why, whysz, "budget ledger unavailable");
		return BUD_EXCEEDED;
	}
	return BUD_OK;
 exceeded:
	pthread_mutex_unlock(&sb->sb_lock);
	return BUD_EXCEEDED;
}

void
bud_add_bytes(const char *sandbox, uint64_t in, uint64_t out)
{
	struct bud_sb	*sb;

	if (sandbox == NULL || sandbox[0] == '\0' || (in == 0 && out == 0))
		return;
	sb = bud_find(sandbox, 1);
	pthread_mutex_lock(&sb->sb_lock);
	bud_roll_known(sb);
	sb->sb_c.bc_bytes_in = sat_add(sb->sb_c.bc_bytes_in, in);
	sb->sb_c.bc_bytes_out = sat_add(sb->sb_c.bc_bytes_out, out);
	sb->sb_d_in = sat_add(sb->sb_d_in, in);
	sb->sb_d_out = sat_add(sb->sb_d_out, out);
	pthread_mutex_unlock(&sb->sb_lock);
}

static void
use_emit(void *arg, const char *line)
{
	(void)arg;
	(void)bud_led_queue("%s", line);
}

/* The breakdown row of one settled request. */
static void
use_row(struct bud_use_row *r, uint64_t cost, const struct usage *u,
    const char *model)
{
	memset(r, 0, sizeof(*r));
	r->ur_day = bud_wall_ms() / 86400000;
	util_copy_str(r->ur_model, model != NULL ? model : "",
	    sizeof(r->ur_model));
	r->ur_requests = 1;
	r->ur_cost = cost;
	if (u != NULL && u->u_found) {
		r->ur_input = u->u_input;
		r->ur_cached = u->u_cached;
		r->ur_cache_write = u->u_cache_write;
		r->ur_output = u->u_output;
	}
}

void
bud_settle_usage(const char *sandbox, uint64_t reserved, uint64_t cost,
    const struct usage *u, const char *model)
{
	struct bud_sb		*sb;
	struct bud_counters	*c;
	struct bud_use_row	 row;

	if (sandbox == NULL || sandbox[0] == '\0')
		return;
	if (model != NULL) {
		use_row(&row, cost, u, model);
		met_llm_usage(sandbox, row.ur_model, row.ur_input,
		    row.ur_cached, row.ur_cache_write, row.ur_output, cost);
	}
	if (reserved == 0 && cost == 0 && model == NULL)
		return;
	sb = bud_find(sandbox, 1);
	c = &sb->sb_c;
	pthread_mutex_lock(&sb->sb_lock);
	bud_roll_known(sb);
	if (reserved != 0 || cost != 0) {
		c->bc_reserved -= reserved < c->bc_reserved ? reserved :
		    c->bc_reserved;
		c->bc_spend = sat_add(c->bc_spend, cost);
		/* Not waited for: without it the reservation counts in
		   full. */
		(void)bud_led_queue("S %s %" PRIu64 " %" PRIu64 " %" PRIu64
		    "\n", sb->sb_esc, sb->sb_ws_ms, reserved, cost);
	}
	if (model != NULL) {
		bud_use_add(sb, &row);
		bud_use_line(sb, &row, use_emit, NULL);
	}
	pthread_mutex_unlock(&sb->sb_lock);
}

void
bud_settle(const char *sandbox, uint64_t reserved, uint64_t cost)
{
	bud_settle_usage(sandbox, reserved, cost, NULL, NULL);
}

int
bud_get(const char *sandbox, const struct cfg_caps *caps,
    struct bud_counters *out)
{
	struct bud_sb	*sb;

	memset(out, 0, sizeof(*out));
	if (sandbox == NULL || (sb = bud_find(sandbox, 0)) == NULL)
		return -1;
	pthread_mutex_lock(&sb->sb_lock);
	/* Show the current window, even before its first request. */
	if (caps != NULL)
		bud_roll_caps(sb, caps);
	*out = sb->sb_c;
	out->bc_window_start = sb->sb_ws_ms / 1000;
	pthread_mutex_unlock(&sb->sb_lock);
	return 0;
}

void
bud_reset(const char *sandbox)
{
	struct bud_sb	*sb;

	if (sandbox == NULL || (sb = bud_find(sandbox, 0)) == NULL)
		return;
	pthread_mutex_lock(&sb->sb_lock);
	/* Reservations stay: their requests are still in flight. */
	sb->sb_c.bc_requests = sb->sb_c.bc_bytes_in = 0;
	sb->sb_c.bc_bytes_out = sb->sb_c.bc_spend = 0;
	sb->sb_d_in = sb->sb_d_out = sb->sb_d_req = 0;
	bud_use_clear(sb);
	(void)bud_led_queue("Z %s\n", sb->sb_esc);
	pthread_mutex_unlock(&sb->sb_lock);
}
