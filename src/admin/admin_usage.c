/*
 * GET /v1/sandboxes/{id}/usage?by=model|day: the sandbox's spend broken
 * down from the budget ledger's rows (src/budget/usage_tab.c), added to
 * the usage object adm_usage() builds; and that route itself (spend,
 * caps, window).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "admin/admin_internal.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "cfg/cfg_internal.h"
#include "sbx/sbx.h"
#include "sbx/sbx_fleet.h"

/* µUSD as an exact decimal JSON number. */
static json_object *
usd_json(uint64_t micro)
{
	char	text[32];

	snprintf(text, sizeof(text), "%" PRIu64 ".%06" PRIu64,
	    micro / 1000000, micro % 1000000);
	return json_object_new_double_s((double)micro / 1e6, text);
}

static json_object *
row_json(const struct bud_use_row *u, enum bud_by by)
{
	json_object	*o = json_object_new_object();
	char		 day[16];
	time_t		 t;
	struct tm	 tm;

	if (by == BUD_BY_MODEL)
		json_object_object_add(o, "model",
		    json_object_new_string(u->ur_model));
	else {
		t = (time_t)(u->ur_day * 86400);
		gmtime_r(&t, &tm);
		strftime(day, sizeof(day), "%Y-%m-%d", &tm);
		json_object_object_add(o, "day", json_object_new_string(day));
	}
	admin_jint(o, "requests", u->ur_requests);
	admin_jint(o, "cost_microusd", u->ur_cost);
	json_object_object_add(o, "cost_usd", usd_json(u->ur_cost));
	admin_jint(o, "input_tokens", u->ur_input);
	admin_jint(o, "cached_tokens", u->ur_cached);
	admin_jint(o, "cache_write_tokens", u->ur_cache_write);
	admin_jint(o, "output_tokens", u->ur_output);
	return o;
}

/*
 * The value of "by" in the query of <url>: 0 and *by set, 1 when there
 * is no query parameter at all, -1 (with <why>) for anything else.
 */
static int
query_by(const char *url, enum bud_by *by, char *why, size_t whysz)
{
	const char	*q = strchr(url, '?');

	if (q == NULL || q[1] == '\0')
		return 1;
	q++;
	if (strcmp(q, "by=model") == 0)
		*by = BUD_BY_MODEL;
	else if (strcmp(q, "by=day") == 0)
		*by = BUD_BY_DAY;
	else {
		snprintf(why, whysz, "query must be by=model or by=day, not "
		    "\"%.60s\"", q);
		return -1;
	}
	return 0;
}

int
admin_usage_by(const struct admin_req *q, struct admin_resp *r,
    const char *sandbox, json_object *o)
{
	struct bud_use_row	*rows;
	json_object		*a;
	enum bud_by		 by = BUD_BY_MODEL;
	size_t			 n, i;
	char			 why[120];
	int			 rc;

	if ((rc = query_by(q->aq_url, &by, why, sizeof(why))) == 1)
		return 0;
	if (rc == -1) {
		admin_error(r, 400, "bad_request", why);
		return -1;
	}
	if (bud_usage_by(sandbox, by, &rows, &n) == -1)
		n = 0, rows = NULL;	/* no traffic yet */
	a = json_object_new_array();
	for (i = 0; i < n; i++)
		json_object_array_add(a, row_json(&rows[i], by));
	free(rows);
	json_object_object_add(o, "by", json_object_new_string(
	    by == BUD_BY_MODEL ? "model" : "day"));
	json_object_object_add(o, "breakdown", a);
	/* the rows are this gateway's ledger's, even in fleet mode: said
	   so, next to counters that may be the fleet's */
	json_object_object_add(o, "breakdown_scope",
	    json_object_new_string("gateway"));
	return 0;
}

static json_object *
caps_json(const struct cfg_caps *caps)
{
	json_object	*o;
	char		 buf[64];

	if (caps == NULL || !(caps->cp_has_usd || caps->cp_has_requests ||
	    caps->cp_has_bytes_in || caps->cp_has_bytes_out ||
	    caps->cp_has_rate))
		return NULL;
	o = json_object_new_object();
	if (caps->cp_has_usd) {
		admin_jint(o, "usd_microusd", caps->cp_usd);
		json_object_object_add(o, "usd", usd_json(caps->cp_usd));
	}
	if (caps->cp_has_requests)
		admin_jint(o, "requests", caps->cp_requests);
	if (caps->cp_has_bytes_in)
		admin_jint(o, "bytes_in", caps->cp_bytes_in);
	if (caps->cp_has_bytes_out)
		admin_jint(o, "bytes_out", caps->cp_bytes_out);
	if (caps->cp_has_rate) {
		char	per[32];

		cfg_fmt_duration(caps->cp_rate_ms, per, sizeof(per));
		snprintf(buf, sizeof(buf), "%" PRIu32 "/%s", caps->cp_rate_n,
		    per);
		json_object_object_add(o, "rate", json_object_new_string(buf));
	}
	if (caps->cp_window_ms > 0) {
		cfg_fmt_duration(caps->cp_window_ms, buf, sizeof(buf));
		json_object_object_add(o, "window", json_object_new_string(buf));
	}
	return o;
}

/* The usage object of <s>; NULL after answering 503. */
static json_object *
usage_object(struct admin_resp *r, struct sbx *s)
{
	const struct cfg	*cfg = admin_hooks.ah_cfg();
	const struct cfg_policy	*pol = cfg_policy_find(cfg, s->sb_policy);
	const struct cfg_caps	*caps = pol != NULL ? &pol->p_caps : NULL;
	struct bud_counters	 bc;
	json_object		*o;
	char			 ts[32];

	if (bud_redis_on()) {
		/* fleet mode: the whole fleet's figures, from Redis */
		if (bud_redis_get(s->sb_id, caps, &bc) == -1) {
			admin_error(r, 503, "budget_unavailable", "the budget "
			    "store (Redis) did not answer");
			return NULL;
		}
	} else if (bud_get(s->sb_id, caps, &bc) == -1)
		memset(&bc, 0, sizeof(bc));	/* no traffic yet */
	o = json_object_new_object();
	json_object_object_add(o, "sandbox", json_object_new_string(s->sb_id));
	json_object_object_add(o, "scope", json_object_new_string(
	    bud_redis_on() ? "fleet" : "gateway"));
	if (bc.bc_window_start > 0) {
		admin_fmt_time((int64_t)bc.bc_window_start, ts, sizeof(ts));
		json_object_object_add(o, "window_start",
		    json_object_new_string(ts));
	} else
		json_object_object_add(o, "window_start", NULL);
	admin_jint(o, "requests", bc.bc_requests);
	admin_jint(o, "bytes_in", bc.bc_bytes_in);
	admin_jint(o, "bytes_out", bc.bc_bytes_out);
	admin_jint(o, "spend_microusd", bc.bc_spend);
	admin_jint(o, "reserved_microusd", bc.bc_reserved);
	json_object_object_add(o, "spend_usd", usd_json(bc.bc_spend));
	json_object_object_add(o, "caps", caps_json(caps));
	return o;
}

/* A reset: answered once Redis has cleared the fleet's counters too. */
static void
reset_fill(struct admin_resp *r, void *arg, int acked)
{
	struct sbx	*s = arg;
	json_object	*o;

	if (acked <= 0)
		adm_fleet_unconfirmed(r, "reset on this gateway, not yet in "
		    "the fleet's counters (done when Redis answers)");
	else if ((o = usage_object(r, s)) != NULL)
		admin_json(r, 200, o);
	sbx_unref(s);
}

void
adm_usage(const struct admin_req *q, struct admin_resp *r, struct sbx *s,
    int reset)
{
	json_object	*o;

	if (reset) {
		bud_reset(s->sb_id);
		sbx_fleet_reset(s->sb_id);	/* fleet mode: Redis too */
		adm_fleet_answer(r, sbx_fleet_last_seq(), reset_fill,
		    sbx_ref(s));
		return;
	}
	if ((o = usage_object(r, s)) == NULL)
		return;
	if (admin_usage_by(q, r, s->sb_id, o) == -1) {
		json_object_put(o);
		return;
	}
	admin_json(r, 200, o);
}
