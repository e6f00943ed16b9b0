/*
 * The budget stage of a request: admit it against the sandbox's caps
 * (reserving the worst case of a metered LLM call), meter the response,
 * settle to the metered cost, and report usage to the audit.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <json-c/json.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

static int
caps_any(const struct cfg_caps *cp)
{
	return cp->cp_has_usd || cp->cp_has_requests || cp->cp_has_bytes_in ||
	    cp->cp_has_bytes_out || cp->cp_has_rate;
}

static uint64_t
json_u64(json_object *o, const char *key)
{
	json_object	*v;

	if (o != NULL && json_object_object_get_ex(o, key, &v) &&
	    json_object_is_type(v, json_type_int) && json_object_get_int64(v) > 0)
		return (uint64_t)json_object_get_int64(v);
	return 0;
}

/*
 * Read model, output bound and streaming from a metered request body.
 * An OpenAI stream without stream_options.include_usage gets it set, so
 * that every stream reports its usage (the body is rewritten).
 */
static uint64_t
inspect_body(struct conn *c, enum cfg_meter dialect)
{
	struct evbuffer	*b = c->c_r.r_body;
	json_tokener	*tok;
	json_object	*o, *v, *so;
	const char	*text;
	size_t		 len = b ? evbuffer_get_length(b) : 0;
	uint64_t	 max_out = 0;

	if (len == 0)
		return 0;
	/* the held body is not NUL-terminated: parse with its length */
	if ((tok = json_tokener_new()) == NULL)
		return 0;
	o = json_tokener_parse_ex(tok, (const char *)evbuffer_pullup(b,
	    (ssize_t)len), (int)len);
	if (o != NULL && json_tokener_get_parse_end(tok) != len) {
		json_object_put(o);	/* trailing garbage: not one object */
		o = NULL;
	}
	json_tokener_free(tok);
	if (o == NULL || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return 0;
	}
	if (json_object_object_get_ex(o, "model", &v) &&
	    json_object_is_type(v, json_type_string))
		snprintf(c->c_r.r_model, sizeof(c->c_r.r_model), "%s",
		    json_object_get_string(v));
	max_out = json_u64(o, "max_tokens");
	if (max_out == 0)
		max_out = json_u64(o, "max_completion_tokens");
	if (max_out == 0)
		max_out = json_u64(o, "max_output_tokens");
	if (dialect == CFG_METER_OPENAI &&
	    json_object_object_get_ex(o, "stream", &v) &&
	    json_object_get_boolean(v)) {
		if (!json_object_object_get_ex(o, "stream_options", &so) ||
		    !json_object_is_type(so, json_type_object)) {
			so = json_object_new_object();
			json_object_object_add(o, "stream_options", so);
		}
		if (!json_object_object_get_ex(so, "include_usage", &v) ||
		    !json_object_get_boolean(v)) {
			json_object_object_add(so, "include_usage",
			    json_object_new_boolean(1));
			text = json_object_to_json_string_ext(o,
			    JSON_C_TO_STRING_PLAIN |
			    JSON_C_TO_STRING_NOSLASHESCAPE);
			evbuffer_drain(b, len);
			evbuffer_add(b, text, strlen(text));
		}
	}
	json_object_put(o);
	return max_out;
}

int
conn_budget_admit(struct conn *c)
{
	const struct cfg_rule	*rule = c->c_r.r_rule_p;
	const struct cfg_caps	*caps;
	enum bud_verdict	 v;
	uint64_t		 reserve = 0, max_out, input_est;
	char			 why[200];
	int			 retry = 0;

	if (c->c_sbx == NULL || c->c_policy == NULL)
		return 0;
	caps = &c->c_policy->p_caps;
	if (rule != NULL && rule->r_meter != CFG_METER_NONE) {
		max_out = inspect_body(c, rule->r_meter);
		if (max_out == 0)
			max_out = c->c_cfg->c_limits.l_default_max_tokens;
		/* a token is at least a byte: the body bounds the prompt */
		input_est = c->c_r.r_body ? evbuffer_get_length(c->c_r.r_body) :
		    0;
		reserve = price_worst(c->c_cfg, c->c_r.r_model, input_est,
		    max_out);
	}
	v = bud_admit(c->c_sbx->sb_id, caps_any(caps) ? caps : NULL,
	    reserve, why, sizeof(why), &retry);
	switch (v) {
	case BUD_OK:
		c->c_r.r_admitted = 1;
		c->c_r.r_reserved = reserve;
		return 0;
	case BUD_EXCEEDED:
		c->c_r.r_allowed = 0;
		conn_deny(c, 402, "budget_exceeded", why);
		return -1;
	case BUD_RATE:
		c->c_r.r_retry_after = retry > 0 ? retry : 1;
		c->c_r.r_allowed = 0;
		conn_deny(c, 429, "rate_limited", why);
		return -1;
	}
	return -1;
}

void
conn_budget_response_head(struct conn *c)
{
	const struct cfg_rule	*rule = c->c_r.r_rule_p;
	struct http_msg		*m = &c->c_resp;
	const char		*v;
	size_t			 vlen;
	int			 i, sse = 0;

	if (rule == NULL || rule->r_meter == CFG_METER_NONE ||
	    !c->c_r.r_admitted || c->c_r.r_meter != NULL)
		return;
	if ((i = http_msg_find(m, "content-type", 0)) != -1) {
		v = http_msg_str(m, m->hm_hdrs[i].h_value);
		vlen = m->hm_hdrs[i].h_value_len;
		util_trim_ows(&v, &vlen);
		sse = vlen >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
	}
	c->c_r.r_meter = meter_new(rule->r_meter == CFG_METER_OPENAI ?
	    METER_OPENAI : METER_ANTHROPIC, sse,
	    (size_t)c->c_cfg->c_limits.l_body_bytes);
}

void
conn_budget_body(struct conn *c, const char *p, size_t len)
{
	if (c->c_r.r_meter != NULL)
		meter_feed(c->c_r.r_meter, p, len);
}

/*
 * The request ended (exactly once, from conn_audit): settle. A response
 * that completed without usage cost nothing; one cut short costs what was
 * reserved, so recorded spend never falls below what was consumed.
 */
void
conn_budget_end(struct conn *c, struct aud_rec *r, struct usage *u)
{
	uint64_t	cost = 0;
	int		unpriced = 0;

	if (!c->c_r.r_admitted || c->c_sbx == NULL)
		return;
	c->c_r.r_admitted = 0;
	memset(u, 0, sizeof(*u));
	if (c->c_r.r_meter != NULL) {
		meter_finish(c->c_r.r_meter, u);
		if (u->u_model[0] == '\0')
			snprintf(u->u_model, sizeof(u->u_model), "%s",
			    c->c_r.r_model);
		if (!c->c_r.r_resp_done)
			cost = c->c_r.r_reserved;
		else if (u->u_found)
			cost = price_usage(c->c_cfg, u, &unpriced);
		else if (c->c_r.r_status >= 200 && c->c_r.r_status < 300)
			cost = c->c_r.r_reserved;	/* served, unmetered */
		r->ar_usage = u->u_found ? u : NULL;
		r->ar_cost_micro = (int64_t)cost;
		r->ar_unpriced = unpriced;
	} else if (c->c_r.r_reserved > 0)
		cost = c->c_r.r_reserved;
	bud_settle(c->c_sbx->sb_id, c->c_r.r_reserved, cost);
	bud_add_bytes(c->c_sbx->sb_id, c->c_r.r_bytes_in,
	    c->c_r.r_bytes_out);
}
