/*
 * The budget stage of a request: admit it against the sandbox's caps
 * (reserving the worst case of a metered LLM call, bounding how many run
 * at once), charge its bytes as they flow and cut it at a bytes cap,
 * meter the response, settle to the metered cost, and report usage to
 * the audit.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "policy/pol.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

/* Bytes a request may move between two charges while under a cap: with
 * k requests of a sandbox in flight, a cap is passed by at most k times
 * this (docs/configuration.md, caps). */
#define CONN_BUDGET_BATCH	(64 * 1024)

static int
caps_any(const struct cfg_caps *cp)
{
	return cp->cp_has_usd || cp->cp_has_requests || cp->cp_has_bytes_in ||
	    cp->cp_has_bytes_out || cp->cp_has_rate;
}

/* The caps that apply to <c>'s requests, or NULL. */
static const struct cfg_caps *
caps_of(const struct conn *c)
{
	if (c->c_policy == NULL || !caps_any(&c->c_policy->p_caps))
		return NULL;
	return &c->c_policy->p_caps;
}

static int
is_multipart(struct conn *c)
{
	const char	*v;
	size_t		 vlen;
	int		 i;

	if ((i = http_msg_find(&c->c_req, "content-type", 0)) == -1)
		return 0;
	v = http_msg_str(&c->c_req, c->c_req.hm_hdrs[i].h_value);
	vlen = c->c_req.hm_hdrs[i].h_value_len;
	util_trim_ows(&v, &vlen);
	return vlen >= 19 && strncasecmp(v, "multipart/form-data", 19) == 0;
}

/* The original body behind a rewritten one: freed with its last piece. */
static void
body_unref(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	evbuffer_free(arg);
}

/*
 * Put stream_options.include_usage into the held body (contiguous at
 * <p>) without copying it: the new body refers to the old one's bytes
 * around the inserted text.
 */
static void
usage_option_insert(struct conn *c, const unsigned char *p, size_t len,
    const struct req_facts *rf)
{
	struct evbuffer	*old = c->c_r.r_body, *b = evbuffer_new();

	if (b == NULL)
		fatalx("evbuffer_new");
	evbuffer_add_reference(b, p, (size_t)rf->rf_cut_from, NULL, NULL);
	evbuffer_add(b, rf->rf_insert, strlen(rf->rf_insert));
	evbuffer_add_reference(b, p + rf->rf_cut_to, len - rf->rf_cut_to,
	    body_unref, old);
	c->c_r.r_body = b;
}

/*
 * Read the held body of a metered request. 0, or -1 after answering 400:
 * a body the provider may read differently from us is not forwarded.
 */
static int
inspect_body(struct conn *c, enum cfg_meter dialect, struct req_facts *rf)
{
	struct evbuffer		*b = c->c_r.r_body;
	const unsigned char	*p;
	size_t			 len = b ? evbuffer_get_length(b) : 0;

	memset(rf, 0, sizeof(*rf));
	rf->rf_choices = 1;
	/* uploads (files, audio) are not JSON: reserved at the maximum */
	if (len == 0 || is_multipart(c))
		return 0;
	/* one piece already when the length was declared (conn.c) */
	if ((p = evbuffer_pullup(b, (ssize_t)len)) == NULL)
		fatalx("evbuffer_pullup");
	if (req_scan((const char *)p, len, dialect == CFG_METER_OPENAI, rf) ==
	    -1) {
		c->c_r.r_allowed = 0;
		conn_deny(c, 400, "bad_request", rf->rf_why);
		return -1;
	}
	util_copy_str(c->c_r.r_model, rf->rf_model, sizeof(c->c_r.r_model));
	if (dialect == CFG_METER_GEMINI && rf->rf_model[0] == '\0')
		req_path_model(c->c_r.r_path, c->c_r.r_model,
		    sizeof(c->c_r.r_model));
	if (rf->rf_rewrite)
		usage_option_insert(c, p, len, rf);
	return 0;
}

/*
 * Does the request start asynchronous work? Judged on the path as an
 * upstream may read it (%2F as '/') and on the method it may act on (a
 * method-override header, which policy already judged).
 */
static int
is_async(struct conn *c)
{
	char	path[POL_PATH_MAX], method[24];
	const char *p = c->c_r.r_path;

	if (p != NULL && pol_path_has_enc_slash(p)) {
		if (pol_path_slash_reading(p, path, sizeof(path)) == -1)
			return 1;	/* cannot tell: assume the worst */
		p = path;
	}
	if (req_async_path(c->c_r.r_method, p))
		return 1;
	if (http_msg_method_override(&c->c_req, method, sizeof(method)) == 1)
		return req_async_path(method, p);
	return 0;
}

/*
 * The reservation of a metered request: body bytes as the prompt (a
 * token is at least a byte), the output bound times the completions
 * asked for. Asynchronous work is refused unless the rule prices it.
 * 0, or -1 after answering.
 */
static int
metered_reserve(struct conn *c, const struct cfg_rule *rule,
    uint64_t *reserve)
{
	struct req_facts	 rf;
	uint64_t		 max_out, input_est, out;

	if (inspect_body(c, rule->r_meter, &rf) == -1)
		return -1;
	if (is_async(c) || rf.rf_background) {
		if (!rule->r_has_async) {
			c->c_r.r_allowed = 0;
			conn_deny(c, 403, "denied", "asynchronous LLM work "
			    "(batches, fine-tuning, runs, background "
			    "responses) reports no usage to meter; the rule "
			    "must price it with async_usd");
			return -1;
		}
		c->c_r.r_async = 1;
		*reserve = rule->r_async_usd;
		return 0;
	}
	max_out = rf.rf_max_out != 0 ? rf.rf_max_out :
	    price_max_output(c->c_cfg, c->c_r.r_model);
	out = rf.rf_choices > UINT64_MAX / (max_out ? max_out : 1) ?
	    UINT64_MAX : max_out * rf.rf_choices;
	input_est = c->c_r.r_body ? evbuffer_get_length(c->c_r.r_body) : 0;
	*reserve = price_worst(c->c_cfg, c->c_r.r_model, input_est, out);
	return 0;
}

/* Charge what moved since the last charge; -1 if a bytes cap is passed. */
static int
flow_charge(struct conn *c)
{
	struct conn_req	*q = &c->c_r;
	struct bud_room	 room;
	int		 rc;

	rc = bud_charge(q->r_bud, caps_of(c), q->r_bytes_in - q->r_charged_in,
	    q->r_bytes_out - q->r_charged_out, &room);
	q->r_charged_in = q->r_bytes_in;
	q->r_charged_out = q->r_bytes_out;
	q->r_room_in = room.br_in;
	q->r_room_out = room.br_out;
	return rc;
}

/* The request body it declares would pass bytes_out: refuse it now. */
static int
declared_over(struct conn *c, struct bud_sb *sb, char *why, size_t whysz)
{
	const struct cfg_caps	*caps = caps_of(c);
	struct bud_room		 room;
	uint64_t		 body;

	if (caps == NULL || !caps->cp_has_bytes_out)
		return 0;
	body = c->c_r.r_body != NULL ? evbuffer_get_length(c->c_r.r_body) :
	    c->c_req.hm_framing == HTTP_BODY_LENGTH ?
	    c->c_req.hm_content_length : 0;
	if (body == 0)
		return 0;
	(void)bud_charge(sb, caps, 0, 0, &room);
	if (body <= room.br_out)
		return 0;
	snprintf(why, whysz, "bytes_out cap %llu: this request's %llu-byte "
	    "body would pass it", (unsigned long long)caps->cp_bytes_out,
	    (unsigned long long)body);
	return 1;
}

int
conn_budget_admit(struct conn *c)
{
	const struct cfg_rule	*rule = c->c_r.r_rule_p;
	const struct cfg_caps	*caps;
	struct bud_sb		*sb;
	enum bud_verdict	 v;
	uint64_t		 reserve = 0;
	char			 why[200];
	int			 retry = 0, metered;

	if (c->c_sbx == NULL || c->c_policy == NULL)
		return 0;
	caps = &c->c_policy->p_caps;
	metered = rule != NULL && rule->r_meter != CFG_METER_NONE;
	if (metered && metered_reserve(c, rule, &reserve) == -1)
		return -1;
	sb = bud_handle(c->c_sbx->sb_id);
	if (declared_over(c, sb, why, sizeof(why))) {
		c->c_r.r_allowed = 0;
		conn_deny(c, 402, "budget_exceeded", why);
		return -1;
	}
	if (metered) {
		if (bud_llm_enter(sb, caps->cp_llm_concurrency) == -1) {
			snprintf(why, sizeof(why), "llm_concurrency cap %llu: "
			    "that many metered requests are in flight",
			    (unsigned long long)caps->cp_llm_concurrency);
			c->c_r.r_retry_after = 1;
			c->c_r.r_allowed = 0;
			conn_deny(c, 429, "rate_limited", why);
			return -1;
		}
		c->c_r.r_llm = caps->cp_llm_concurrency != 0;
	}
	v = bud_admit(c->c_sbx->sb_id, caps_any(caps) ? caps : NULL,
	    reserve, why, sizeof(why), &retry);
	if (v != BUD_OK && c->c_r.r_llm) {
		bud_llm_leave(sb);
		c->c_r.r_llm = 0;
	}
	switch (v) {
	case BUD_OK:
		c->c_r.r_admitted = 1;
		c->c_r.r_reserved = reserve;
		c->c_r.r_bud = sb;
		c->c_r.r_room_in = c->c_r.r_room_out = UINT64_MAX;
		if (caps->cp_has_bytes_in || caps->cp_has_bytes_out)
			(void)flow_charge(c);	/* the room left */
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

size_t
conn_budget_allow(struct conn *c, int up, size_t len)
{
	struct conn_req	*q = &c->c_r;
	uint64_t	 room, pending;

	if (!q->r_admitted || q->r_bud == NULL)
		return len;
	if (q->r_budget_over)
		return 0;
	room = up ? q->r_room_out : q->r_room_in;
	if (room == UINT64_MAX)
		return len;
	pending = up ? q->r_bytes_out - q->r_charged_out :
	    q->r_bytes_in - q->r_charged_in;
	if (pending + len > room || pending + len > CONN_BUDGET_BATCH) {
		/* others of the sandbox may have used the room meanwhile */
		(void)flow_charge(c);
		room = up ? q->r_room_out : q->r_room_in;
		pending = 0;
	}
	if (pending + len <= room)
		return len;
	q->r_budget_over = up ? 2 : 1;
	return pending < room ? (size_t)(room - pending) : 0;
}

void
conn_budget_flow(struct conn *c)
{
	struct conn_req	*q = &c->c_r;

	if (!q->r_admitted || q->r_bud == NULL || c->c_closing)
		return;
	if (!q->r_budget_over && q->r_room_in == UINT64_MAX &&
	    q->r_room_out == UINT64_MAX &&
	    (q->r_bytes_in - q->r_charged_in) +
	    (q->r_bytes_out - q->r_charged_out) < CONN_BUDGET_BATCH)
		return;	/* no bytes cap: 64 KiB batches, the rest at end */
	/*
	 * Bodies and tunnel bytes were checked before they moved
	 * (conn_budget_allow); what passes a cap here is a head, or another
	 * request of the sandbox: a tunnel is cut (more would follow), a
	 * request goes on (its next body byte is refused; the sandbox's next
	 * request is refused at admission).
	 */
	if (flow_charge(c) == -1 && !q->r_budget_over &&
	    c->c_state == CONN_TUNNEL)
		q->r_budget_over = q->r_room_out == 0 ? 2 : 1;
	if (q->r_budget_over)
		conn_budget_cut(c);
}

void
conn_budget_cut(struct conn *c)
{
	const struct cfg_caps	*caps = caps_of(c);
	char			 why[200];

	if (c->c_r.r_budget_over == 0)
		c->c_r.r_budget_over = c->c_r.r_room_out == 0 ? 2 : 1;
	if (caps != NULL && caps->cp_has_bytes_out &&
	    c->c_r.r_budget_over == 2)
		snprintf(why, sizeof(why), "bytes_out cap %llu reached "
		    "mid-request", (unsigned long long)caps->cp_bytes_out);
	else if (caps != NULL && caps->cp_has_bytes_in)
		snprintf(why, sizeof(why), "bytes_in cap %llu reached "
		    "mid-response", (unsigned long long)caps->cp_bytes_in);
	else
		snprintf(why, sizeof(why), "bytes cap reached");
	if (!c->c_r.r_resp_started && !c->c_r.r_connect_replied) {
		conn_reply_error(c, 402, "budget_exceeded", why, 1);
		return;
	}
	log_info("%s: sandbox %s: %s: cut", c->c_client,
	    c->c_sbx != NULL ? c->c_sbx->sb_id : "-", why);
	conn_cut(c, "budget_cut");
}

int
conn_budget_response_head(struct conn *c)
{
	const struct cfg_rule	*rule = c->c_r.r_rule_p;
	struct http_msg		*m = &c->c_resp;
	const char		*v;
	size_t			 vlen;
	int			 i, sse = 0;

	if (m->hm_framing == HTTP_BODY_LENGTH &&
	    conn_budget_allow(c, 0, m->hm_content_length) <
	    m->hm_content_length) {
		/* nothing went back yet: the sandbox gets a clean 402 */
		conn_reply_error(c, 402, "budget_exceeded", "bytes_in cap "
		    "reached: the response would pass it", 1);
		return -1;
	}
	if (rule == NULL || rule->r_meter == CFG_METER_NONE ||
	    !c->c_r.r_admitted || c->c_r.r_meter != NULL)
		return 0;
	if ((i = http_msg_find(m, "content-type", 0)) != -1) {
		v = http_msg_str(m, m->hm_hdrs[i].h_value);
		vlen = m->hm_hdrs[i].h_value_len;
		util_trim_ows(&v, &vlen);
		sse = vlen >= 17 &&
		    strncasecmp(v, "text/event-stream", 17) == 0;
	}
	c->c_r.r_meter = meter_new(rule->r_meter == CFG_METER_OPENAI ?
	    METER_OPENAI : rule->r_meter == CFG_METER_GEMINI ? METER_GEMINI :
	    METER_ANTHROPIC, sse, (size_t)c->c_cfg->c_limits.l_body_bytes);
	conn_budget_coding(c);
	return 0;
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
 * reserved, so recorded spend never falls below what was consumed. An
 * asynchronous job costs what its rule prices it at.
 */
void
conn_budget_end(struct conn *c, struct aud_rec *r, struct usage *u)
{
	struct bud_room	room;
	uint64_t	cost = 0;
	int		unpriced = 0;

	if (!c->c_r.r_admitted || c->c_sbx == NULL)
		return;
	c->c_r.r_admitted = 0;
	memset(u, 0, sizeof(*u));
	if (c->c_r.r_async)
		/* the job's price, unless the provider said no */
		cost = c->c_r.r_resp_done && (c->c_r.r_status < 200 ||
		    c->c_r.r_status >= 300) ? 0 : c->c_r.r_reserved;
	else if (c->c_r.r_meter != NULL) {
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
	if (c->c_r.r_async)
		r->ar_cost_micro = (int64_t)cost;
	/* metered: filed by model and day, counted in /metrics */
	bud_settle_usage(c->c_sbx->sb_id, c->c_r.r_reserved, cost, u,
	    c->c_r.r_meter != NULL ? u->u_model : c->c_r.r_async ||
	    (c->c_r.r_rule_p != NULL && c->c_r.r_rule_p->r_meter !=
	    CFG_METER_NONE) ? c->c_r.r_model : NULL);
	if (c->c_r.r_bud == NULL)
		c->c_r.r_bud = bud_handle(c->c_sbx->sb_id);
	(void)bud_charge(c->c_r.r_bud, NULL, c->c_r.r_bytes_in -
	    c->c_r.r_charged_in, c->c_r.r_bytes_out - c->c_r.r_charged_out,
	    &room);
	c->c_r.r_charged_in = c->c_r.r_bytes_in;
	c->c_r.r_charged_out = c->c_r.r_bytes_out;
	if (c->c_r.r_llm) {
		bud_llm_leave(c->c_r.r_bud);
		c->c_r.r_llm = 0;
	}
}
