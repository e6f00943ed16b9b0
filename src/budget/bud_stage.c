/*
 * The budget stage (pipe/stage.h): a metered request's body is held and
 * read (model, output bound, stream_options.include_usage put in so the
 * provider reports usage), the request admitted against the sandbox's
 * caps (reserving its worst case, bounding how many run at once), the
 * response refused when it would pass bytes_in, metered as it streams,
 * and the exchange settled to its metered cost. The bytes moving in
 * flight are charged through bud_xchg.c; with the Redis store they
 * move within the fleet's byte grants (bud_grant.c, the room hook).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "budget/bud_internal.h"
#include "budget/decode.h"
#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "policy/pol.h"
#include "util/log.h"
#include "util/util.h"

static int
caps_any(const struct cfg_caps *cp)
{
	return cp->cp_has_usd || cp->cp_has_requests || cp->cp_has_bytes_in ||
	    cp->cp_has_bytes_out || cp->cp_has_rate;
}

const struct cfg_caps *
bud_caps_of(const struct cfg_policy *p)
{
	if (p == NULL || !caps_any(&p->p_caps))
		return NULL;
	return &p->p_caps;
}

static int
is_multipart(const struct http_msg *m)
{
	const char	*v;
	size_t		 vlen;
	int		 i;

	if ((i = http_msg_find(m, "content-type", 0)) == -1)
		return 0;
	http_msg_value(m, i, &v, &vlen);
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
 * Apply <ed> (sorted) to the held body (contiguous at <p>) without
 * copying it: the new body refers to the old one's bytes between the
 * edits, the old one freed with the last piece.
 */
static void
body_edit(struct evbuffer **body, const unsigned char *p, size_t len,
    const struct req_edits *ed)
{
	struct evbuffer	*old = *body, *b = evbuffer_new();
	uint64_t	 at = 0;
	size_t		 i;

	if (b == NULL)
		fatalx("evbuffer_new");
	for (i = 0; i < ed->re_n; i++) {
		if (ed->re[i].re_from > at)
			evbuffer_add_reference(b, p + at,
			    (size_t)(ed->re[i].re_from - at), NULL, NULL);
		evbuffer_add(b, ed->re[i].re_text, strlen(ed->re[i].re_text));
		at = ed->re[i].re_to;
	}
	/* the root's closing brace is after every edit: a tail is left */
	evbuffer_add_reference(b, p + at, len - (size_t)at, body_unref, old);
	*body = b;
}

static struct evbuffer *
held_body(const struct xs_call *xc)
{
	return xc->xc_body != NULL ? *xc->xc_body : NULL;
}

/*
 * The path as an upstream may read it (%2F as '/') into <buf>: <buf> or
 * the exchange's path, NULL when that cannot be told.
 */
static const char *
upstream_path(const struct xs_call *xc, char *buf, size_t bufsz)
{
	const char	*p = xc->xc_x->x_path;

	if (p != NULL && pol_path_has_enc_slash(p)) {
		if (pol_path_slash_reading(p, buf, bufsz) == -1)
			return NULL;
		p = buf;
	}
	return p;
}

/*
 * Read the held body of a metered request. XS_GO, or XS_DENY (400): a
 * body the provider may read differently from us is not forwarded.
 */
static enum xs_verdict
inspect_body(struct xs_call *xc, enum cfg_meter dialect, struct req_facts *rf)
{
	struct xchg		*x = xc->xc_x;
	struct evbuffer		*b = held_body(xc);
	const unsigned char	*p;
	size_t			 len = b ? evbuffer_get_length(b) : 0;
	char			 path[POL_PATH_MAX];
	enum req_api		 api;

	memset(rf, 0, sizeof(*rf));
	rf->rf_choices = 1;
	/* uploads (files, audio) are not JSON: reserved at the maximum */
	if (len == 0 || is_multipart(xc->xc_req))
		return XS_GO;
	/* one piece already when the length was declared (conn.c) */
	if ((p = evbuffer_pullup(b, (ssize_t)len)) == NULL)
		fatalx("evbuffer_pullup");
	/* include_usage only where OpenAI takes it: never the Responses API,
	   which reports usage in response.completed */
	api = req_api_of(upstream_path(xc, path, sizeof(path)));
	if (req_scan((const char *)p, len, dialect == CFG_METER_OPENAI &&
	    (api == REQ_API_CHAT || api == REQ_API_COMPLETIONS), rf) ==
	    -1) {
		x->x_allowed = 0;
		return xs_deny(xc, AUD_R_BAD_REQUEST, "%s", rf->rf_why);
	}
	util_copy_str(x->x_bud.b_model, rf->rf_model,
	    sizeof(x->x_bud.b_model));
	if (dialect == CFG_METER_GEMINI && rf->rf_model[0] == '\0')
		req_path_model(x->x_path, x->x_bud.b_model,
		    sizeof(x->x_bud.b_model));
	return XS_GO;
}

/*
 * Does the request start asynchronous work? Judged on the path as an
 * upstream may read it and on the method it may act on (a
 * method-override header, which policy already judged).
 */
static int
is_async(const struct xs_call *xc)
{
	char		 path[POL_PATH_MAX], method[24];
	const char	*p;

	if ((p = upstream_path(xc, path, sizeof(path))) == NULL)
		return 1;	/* cannot tell: assume the worst */
	if (req_async_path(xc->xc_x->x_method, p))
		return 1;
	if (http_msg_method_override(xc->xc_req, method, sizeof(method)) == 1)
		return req_async_path(method, p);
	return 0;
}

/*
 * Does the request generate nothing (model lists, token counts, files,
 * status)? Only when both its method and any method-override say so; a
 * WebSocket upgrade (a realtime session) generates.
 */
static int
is_free(const struct xs_call *xc)
{
	char		 path[POL_PATH_MAX], method[24];
	const char	*p;
	int		 ov;

	if (xc->xc_upgrade ||
	    (p = upstream_path(xc, path, sizeof(path))) == NULL)
		return 0;
	if (!req_free_path(xc->xc_x->x_method, p))
		return 0;
	ov = http_msg_method_override(xc->xc_req, method, sizeof(method));
	if (ov == 1)
		return req_free_path(method, p);
	return ov == 0;
}

/* The fewest output tokens a request is clamped to; fewer: refused. */
#define BUD_CLAMP_MIN	16

/*
 * The largest output bound (per completion, of <choices>) whose worst
 * case fits in <left> µUSD, at most <max_out>; 0 when none does.
 */
static uint64_t
bound_that_fits(const struct cfg *cfg, const char *model, uint64_t input,
    uint64_t choices, uint64_t max_out, uint64_t left)
{
	uint64_t	lo = 0, hi = max_out, mid;

	if (choices == 0 || price_worst(cfg, model, input, choices) > left)
		return 0;
	while (lo < hi) {	/* price_worst grows with the bound */
		mid = lo + (hi - lo + 1) / 2;
		if (mid > UINT64_MAX / choices ||
		    price_worst(cfg, model, input, mid * choices) > left)
			hi = mid - 1;
		else
			lo = mid;
	}
	return lo;
}

/*
 * A worst case over what the usd cap leaves: lower the output bound to
 * what fits (the body rewritten, *reserve lowered, the audit says
 * budget_clamped), when at least BUD_CLAMP_MIN tokens do and the API's
 * bound can be written. Otherwise admission refuses it as before.
 */
static uint64_t
clamp_to_room(struct xs_call *xc, const struct req_facts *rf,
    struct req_edits *ed, uint64_t max_out, uint64_t input,
    uint64_t *reserve)
{
	const struct cfg_caps	*caps = &xc->xc_policy->p_caps;
	struct xchg		*x = xc->xc_x;
	struct bud_counters	 bc;
	struct req_edits	 t;
	uint64_t		 used, left, k;
	char			 path[POL_PATH_MAX];

	if (!caps->cp_has_usd || !caps->cp_clamp)
		return max_out;
	if (bud_get(xc->xc_sandbox, caps, &bc) == -1)
		memset(&bc, 0, sizeof(bc));
	used = bc.bc_spend + bc.bc_reserved;
	left = used >= caps->cp_usd ? 0 : caps->cp_usd - used;
	if (*reserve <= left)
		return max_out;
	k = bound_that_fits(xc->xc_cfg, x->x_bud.b_model, input,
	    rf->rf_choices, max_out, left);
	if (k < BUD_CLAMP_MIN || k >= max_out)
		return max_out;
	t = *ed;
	if (req_edits_clamp(rf, req_api_of(upstream_path(xc, path,
	    sizeof(path))), k, &t) == -1 || req_edits_sort(&t) == -1)
		return max_out;
	*ed = t;
	*reserve = price_worst(xc->xc_cfg, x->x_bud.b_model, input,
	    k * rf->rf_choices);
	snprintf(x->x_reason, sizeof(x->x_reason), "%s: output bound %llu "
	    "lowered to %llu tokens to fit the usd cap (%llu.%06llu left)",
	    aud_reason(AUD_R_BUDGET_CLAMPED)->ri_text,
	    (unsigned long long)max_out, (unsigned long long)k,
	    (unsigned long long)(left / 1000000),
	    (unsigned long long)(left % 1000000));
	return k;
}

/*
 * The reservation of a metered request: body bytes as the prompt (a
 * token is at least a byte), the output bound times the completions
 * asked for, lowered to what the usd cap leaves when that can be done.
 * Asynchronous work is refused unless the rule prices it.
 */
static enum xs_verdict
metered_reserve(struct xs_call *xc, const struct cfg_rule *rule,
    uint64_t *reserve)
{
	struct xchg		*x = xc->xc_x;
	struct req_facts	 rf;
	struct req_edits	 ed;
	struct evbuffer		*b;
	uint64_t		 max_out, input_est, out;
	char			 path[POL_PATH_MAX];
	const char		*up;
	enum req_api		 api;

	if (inspect_body(xc, rule->r_meter, &rf) != XS_GO)
		return XS_DENY;
	if (is_async(xc) || rf.rf_background) {
		if (!rule->r_has_async) {
			x->x_allowed = 0;
			return xs_deny(xc, AUD_R_DENIED, "asynchronous LLM "
			    "work (batches, fine-tuning, runs, background "
			    "responses) reports no usage to meter; the rule "
			    "must price it with async_usd");
		}
		x->x_bud.b_async = 1;
		*reserve = rule->r_async_usd;
		return XS_GO;
	}
	max_out = rf.rf_max_out != 0 ? rf.rf_max_out :
	    price_max_output(xc->xc_cfg, x->x_bud.b_model);
	out = rf.rf_choices > UINT64_MAX / (max_out ? max_out : 1) ?
	    UINT64_MAX : max_out * rf.rf_choices;
	b = held_body(xc);
	input_est = b != NULL ? evbuffer_get_length(b) : 0;
	*reserve = price_worst(xc->xc_cfg, x->x_bud.b_model, input_est, out);
	memset(&ed, 0, sizeof(ed));
	req_edits_usage(&rf, &ed);
	if (rf.rf_root_brace > 0)	/* a JSON object was read */
		max_out = clamp_to_room(xc, &rf, &ed, max_out, input_est,
		    reserve);
	up = upstream_path(xc, path, sizeof(path));
	api = req_api_of(up);
	/* Gemini streams by its method (SSE with alt=sse, else an array) */
	bud_stream_plan(xc, &rf, rf.rf_stream || (api == REQ_API_GEMINI &&
	    up != NULL && strstr(up, ":streamGenerateContent") != NULL),
	    input_est, rf.rf_choices > UINT64_MAX / (max_out ? max_out : 1) ?
	    UINT64_MAX : max_out * rf.rf_choices);
	if (ed.re_n > 0 && req_edits_sort(&ed) == 0)
		body_edit(xc->xc_body, evbuffer_pullup(b, -1), input_est,
		    &ed);
	return XS_GO;
}

/* The request body's length, held or declared; 0: none, or unknown. */
static uint64_t
body_len(const struct xs_call *xc)
{
	const struct http_msg	*m = xc->xc_req;
	struct evbuffer		*b = held_body(xc);

	return b != NULL ? evbuffer_get_length(b) :
	    m->hm_framing == HTTP_BODY_LENGTH ? m->hm_content_length : 0;
}

static void
body_over_reason(struct xs_call *xc, uint64_t body, const char *shared)
{
	snprintf(xc->xc_reason, sizeof(xc->xc_reason), "bytes_out cap %llu: "
	    "this request's %llu-byte body would pass it%s",
	    (unsigned long long)xc->xc_policy->p_caps.cp_bytes_out,
	    (unsigned long long)body, shared);
}

/* The request body it declares would pass bytes_out: refuse it now. */
static int
declared_over(struct xs_call *xc, struct bud_sb *sb)
{
	const struct cfg_caps	*caps = bud_caps_of(xc->xc_policy);
	struct bud_room		 room;
	uint64_t		 body;

	if (caps == NULL || !caps->cp_has_bytes_out ||
	    (body = body_len(xc)) == 0)
		return 0;
	(void)bud_charge(sb, caps, 0, 0, &room);
	if (body <= room.br_out)
		return 0;
	body_over_reason(xc, body, "");
	return 1;
}

/*
 * Admitted by the fleet, whose window has less room than the body
 * declared or held (a held one is written whole, past any grant): refused
 * as one gateway refuses it, the reservation and grants given back.
 */
static enum xs_verdict
fleet_body_over(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;
	uint64_t	 body;

	if (!(x->x_bud.b_grant & 2) || (body = body_len(xc)) == 0 ||
	    body <= bud_grant_fleet_room(x, bud_caps_of(xc->xc_policy), 1))
		return XS_GO;
	bud_grant_end(x);
	bud_redis_settle(x->x_bud.b_rres, 0, 0, 0);
	x->x_bud.b_rres = NULL;
	x->x_bud.b_admitted = 0;
	x->x_bud.b_reserved = 0;
	x->x_allowed = 0;
	body_over_reason(xc, body, " (shared)");
	xc->xc_why = AUD_R_BUDGET_EXCEEDED;
	return XS_DENY;
}

/* A metered rule reads the body: hold it (within limits.body_bytes). */
static enum xs_verdict
bud_req_head(struct xs_call *xc)
{
	const struct cfg_rule	*rule = xc->xc_x->x_rule_p;

	if (rule == NULL || rule->r_meter == CFG_METER_NONE)
		return XS_GO;
	if (is_free(xc)) {
		xc->xc_x->x_bud.b_free = 1;
		return XS_GO;
	}
	xc->xc_hold = (size_t)xc->xc_cfg->c_limits.l_body_bytes;
	return XS_HOLD;
}

/*
 * Content codings of a metered request towards no secret's host (those
 * are forced to identity already, sec_inject.c): its Accept-Encoding is
 * passed on when the meter decodes every coding it names (budget/
 * decode.c), else replaced with identity.
 */
static int
accept_encoding_unreadable(const struct xs_call *xc)
{
	const struct http_msg	*m = xc->xc_req;
	const struct cfg_rule	*rule = xc->xc_x->x_rule_p;
	int			 i;

	if (rule == NULL || rule->r_meter == CFG_METER_NONE ||
	    xc->xc_x->x_sec.s_req != NULL)
		return 0;
	for (i = 0; (i = http_msg_find(m, "accept-encoding", i)) != -1; i++)
		if (!dec_accept_readable(http_msg_str(m,
		    m->hm_hdrs[i].h_value), m->hm_hdrs[i].h_value_len))
			return 1;
	return 0;
}

/* Also identity for an event stream the budget filters (bud_stream.c). */
static int
want_identity(const struct xs_call *xc)
{
	return accept_encoding_unreadable(xc) ||
	    (xc->xc_x->x_sec.s_req == NULL &&
	    bud_stream_identity(xc->xc_x));
}

static int
bud_req_drop(struct xs_call *xc, const char *name, size_t nlen)
{
	return util_strncaseeq(name, nlen, "accept-encoding") &&
	    want_identity(xc);
}

static void
bud_req_fields(struct xs_call *xc)
{
	if (want_identity(xc))
		xc->xc_add_field(xc, "Accept-Encoding", "identity");
}

/*
 * An admitted exchange whose reservation line is not durable yet: wait
 * (the ledger makes xc_resume active), go on once it is, or refuse and
 * undo when the ledger failed.
 */
static enum xs_verdict
bud_ready_resume(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;
	struct event	*ev = NULL;
	int		 st;

	st = bud_led_state(x->x_bud.b_wait_seq);
	if (st == 0 && xc->xc_resume != NULL &&
	    (ev = xc->xc_resume(xc)) != NULL &&
	    bud_led_watch(x->x_bud.b_wait_seq, ev) == 0)
		return XS_WAIT;
	if (st == 0 && ev == NULL)	/* no event to wait on: block */
		st = bud_led_wait(x->x_bud.b_wait_seq) == 0 ? 1 : -1;
	if (st == 0)
		st = bud_led_state(x->x_bud.b_wait_seq);
	x->x_bud.b_waiting = 0;
	if (st == 1)
		return XS_GO;
	bud_admit_undo(xc->xc_sandbox, x->x_bud.b_reserved, xc->xc_reason,
	    sizeof(xc->xc_reason));
	if (x->x_bud.b_llm) {
		bud_llm_leave(x->x_bud.b_sb);
		x->x_bud.b_llm = 0;
	}
	x->x_bud.b_admitted = 0;
	x->x_bud.b_reserved = 0;
	x->x_allowed = 0;
	xc->xc_why = AUD_R_BUDGET_EXCEEDED;
	return XS_DENY;
}

/*
 * The Redis store answered (or could not): go on, or refuse with the
 * cap, the rate, or 503 budget_unavailable.
 */
static enum xs_verdict
bud_redis_resume(struct xs_call *xc)
{
	struct xchg		*x = xc->xc_x;
	const struct cfg_caps	*caps = &xc->xc_policy->p_caps;
	struct bud_rres		*res = NULL;
	struct bud_grant	 g;
	enum bud_verdict	 v;
	char			 why[120];
	int			 retry = 0, granted;

	if (!bud_rop_done(x->x_bud.b_rop))
		return XS_WAIT;		/* woken by something else */
	granted = bud_rop_grant(x->x_bud.b_rop, &g) == 0;
	v = bud_rop_take(x->x_bud.b_rop, why, sizeof(why), &retry, &res);
	x->x_bud.b_rop = NULL;
	if (v != BUD_OK && x->x_bud.b_llm) {
		bud_llm_leave(x->x_bud.b_sb);
		x->x_bud.b_llm = 0;
	}
	x->x_allowed = v == BUD_OK ? x->x_allowed : 0;
	switch (v) {
	case BUD_OK:
		x->x_bud.b_admitted = 1;
		x->x_bud.b_rres = res;
		x->x_bud.b_room_in = x->x_bud.b_room_out = UINT64_MAX;
		if (caps->cp_has_bytes_in || caps->cp_has_bytes_out) {
			(void)bud_xchg_charge(x, bud_caps_of(xc->xc_policy));
			/* the fleet's bytes: within its grants only */
			bud_grant_begin(x, caps, granted ? &g : NULL,
			    xc->xc_resume(xc));
		}
		return fleet_body_over(xc);
	case BUD_EXCEEDED:
		x->x_bud.b_reserved = 0;
		return xs_deny(xc, AUD_R_BUDGET_EXCEEDED, "%s", why);
	case BUD_RATE:
		x->x_bud.b_reserved = 0;
		x->x_bud.b_retry_after = retry > 0 ? retry : 1;
		return xs_deny(xc, AUD_R_RATE_LIMITED, "%s", why);
	case BUD_UNAVAILABLE:
		break;
	}
	x->x_bud.b_reserved = 0;
	return xs_deny(xc, AUD_R_BUDGET_UNAVAILABLE, "%s", why);
}

/* Admission against the caps, reserving a metered call's worst case. */
static enum xs_verdict
bud_req_ready(struct xs_call *xc)
{
	struct xchg		*x = xc->xc_x;
	const struct cfg_rule	*rule = x->x_rule_p;
	const struct cfg_caps	*caps;
	struct bud_sb		*sb;
	enum bud_verdict	 v;
	struct event		*ev;
	uint64_t		 reserve = 0, seq = 0;
	char			 why[200];
	int			 retry = 0, metered;

	if (x->x_bud.b_waiting)
		return bud_ready_resume(xc);
	if (x->x_bud.b_rop != NULL)
		return bud_redis_resume(xc);
	if (xc->xc_sandbox == NULL || xc->xc_policy == NULL)
		return XS_GO;
	caps = &xc->xc_policy->p_caps;
	metered = rule != NULL && rule->r_meter != CFG_METER_NONE &&
	    !x->x_bud.b_free;
	if (metered && metered_reserve(xc, rule, &reserve) != XS_GO)
		return XS_DENY;
	sb = bud_handle(xc->xc_sandbox);
	if (declared_over(xc, sb)) {
		x->x_allowed = 0;
		xc->xc_why = AUD_R_BUDGET_EXCEEDED;
		return XS_DENY;
	}
	/*
	 * The Redis store, for a rule that needs it (capped or metered);
	 * the driver lends every exchange, tunnels included, an event to
	 * resume on (a unit test's fake exchange has none: file store).
	 * There the llm_concurrency slots are the fleet's (a leased slot in
	 * the admission script), not this gateway's.
	 */
	if (bud_redis_on() && (caps_any(caps) || metered) &&
	    xc->xc_resume != NULL && (ev = xc->xc_resume(xc)) != NULL) {
		x->x_bud.b_sb = sb;
		x->x_bud.b_reserved = reserve;
		x->x_bud.b_rop = bud_redis_admit(ev, xc->xc_sandbox,
		    caps_any(caps) ? caps : NULL, reserve,
		    metered ? caps->cp_llm_concurrency : 0,
		    caps->cp_has_bytes_in ? BUD_GRANT_CHUNK : 0,
		    caps->cp_has_bytes_out ? BUD_GRANT_CHUNK : 0);
		return bud_redis_resume(xc);
	}
	if (metered) {
		if (bud_llm_enter(sb, caps->cp_llm_concurrency) == -1) {
			x->x_bud.b_retry_after = 1;
			x->x_allowed = 0;
			return xs_deny(xc, AUD_R_RATE_LIMITED,
			    "llm_concurrency cap %llu: that many metered "
			    "requests are in flight",
			    (unsigned long long)caps->cp_llm_concurrency);
		}
		x->x_bud.b_llm = caps->cp_llm_concurrency != 0;
	}
	/* the worker does not wait for the ledger's fsync: the exchange
	 * does (the driver always lends an event; without one, a fake
	 * exchange in a unit test, bud_admit blocks) */
	if (xc->xc_resume != NULL)
		v = bud_admit_begin(xc->xc_sandbox, caps_any(caps) ? caps :
		    NULL, reserve, why, sizeof(why), &retry, &seq);
	else
		v = bud_admit(xc->xc_sandbox, caps_any(caps) ? caps : NULL,
		    reserve, why, sizeof(why), &retry);
	if (v != BUD_OK && x->x_bud.b_llm) {
		bud_llm_leave(sb);
		x->x_bud.b_llm = 0;
	}
	switch (v) {
	case BUD_OK:
		x->x_bud.b_admitted = 1;
		x->x_bud.b_reserved = reserve;
		x->x_bud.b_sb = sb;
		x->x_bud.b_room_in = x->x_bud.b_room_out = UINT64_MAX;
		if (caps->cp_has_bytes_in || caps->cp_has_bytes_out)
			(void)bud_xchg_charge(x, bud_caps_of(xc->xc_policy));
		if (seq == 0)
			return XS_GO;
		x->x_bud.b_waiting = 1;
		x->x_bud.b_wait_seq = seq;
		return bud_ready_resume(xc);
	case BUD_EXCEEDED:
		x->x_allowed = 0;
		return xs_deny(xc, AUD_R_BUDGET_EXCEEDED, "%s", why);
	case BUD_RATE:
		x->x_bud.b_retry_after = retry > 0 ? retry : 1;
		x->x_allowed = 0;
		return xs_deny(xc, AUD_R_RATE_LIMITED, "%s", why);
	case BUD_UNAVAILABLE:	/* the file store does not say it */
		break;
	}
	return XS_DENY;
}

/*
 * The meter reads a compressed response through a decoder of its own
 * (budget/decode.c); several Content-Encoding fields (layered codings) it
 * does not read.
 */
static void
meter_coding(struct meter *mt, const struct http_msg *m)
{
	int	i;

	if ((i = http_msg_find(m, "content-encoding", 0)) == -1)
		return;
	if (http_msg_find(m, "content-encoding", i + 1) != -1) {
		(void)meter_encoding(mt, "layered", 7);
		return;
	}
	(void)meter_encoding(mt, http_msg_str(m, m->hm_hdrs[i].h_value),
	    m->hm_hdrs[i].h_value_len);
}

/* A response that would pass bytes_in is refused; a metered one read. */
static enum xs_verdict
bud_resp_head(struct xs_call *xc)
{
	struct xchg		*x = xc->xc_x;
	const struct cfg_rule	*rule = x->x_rule_p;
	struct http_msg		*m = xc->xc_resp;
	const char		*v;
	size_t			 vlen;
	int			 i, sse = 0;

	if (m->hm_framing == HTTP_BODY_LENGTH && (x->x_bud.b_grant & 1 ?
	    bud_grant_fleet_room(x, bud_caps_of(xc->xc_policy), 0) <
	    m->hm_content_length :
	    bud_xchg_allow(x, bud_caps_of(xc->xc_policy), 0,
	    m->hm_content_length) < m->hm_content_length)) {
		/* nothing went back yet: the sandbox gets a clean 402 */
		xc->xc_close = 1;
		return xs_deny(xc, AUD_R_BUDGET_EXCEEDED, "bytes_in cap "
		    "reached: the response would pass it");
	}
	if (rule == NULL || rule->r_meter == CFG_METER_NONE ||
	    !x->x_bud.b_admitted || x->x_bud.b_meter != NULL ||
	    x->x_bud.b_free)
		return XS_GO;
	if ((i = http_msg_find(m, "content-type", 0)) != -1) {
		http_msg_value(m, i, &v, &vlen);
		sse = vlen >= 17 &&
		    strncasecmp(v, "text/event-stream", 17) == 0;
	}
	x->x_bud.b_meter = meter_new(rule->r_meter == CFG_METER_OPENAI ?
	    METER_OPENAI : rule->r_meter == CFG_METER_GEMINI ? METER_GEMINI :
	    METER_ANTHROPIC, sse, (size_t)xc->xc_cfg->c_limits.l_body_bytes);
	/* a compressed stream the filter decodes is read decoded */
	if (!bud_stream_head(xc, sse))
		meter_coding(x->x_bud.b_meter, m);
	return XS_GO;
}

/*
 * What went past a bytes cap: the exchange ends (a 402 while nothing went
 * back yet, else a cut audited budget_cut). The driver answers.
 */
static enum xs_verdict
over_cap(struct xs_call *xc)
{
	const struct cfg_caps	*caps = bud_caps_of(xc->xc_policy);
	struct xchg		*x = xc->xc_x;

	if (x->x_bud.b_over == 0)
		x->x_bud.b_over = x->x_bud.b_room_out == 0 ? 2 : 1;
	if (x->x_bud.b_gunav)
		/* no next grant: fail closed (a 503 while nothing went back,
		   else a cut with this reason) */
		return xs_deny(xc, AUD_R_BUDGET_UNAVAILABLE, "%s: the budget "
		    "store did not answer: no byte grant for the %s cap "
		    "mid-%s", aud_reason(AUD_R_BUDGET_UNAVAILABLE)->ri_code,
		    x->x_bud.b_over == 2 ? "bytes_out" : "bytes_in",
		    xc->xc_tunnel ? "tunnel" : x->x_bud.b_over == 2 ?
		    "request" : "response");
	xc->xc_cut = AUD_R_BUDGET_CUT;
	if (caps != NULL && caps->cp_has_bytes_out && x->x_bud.b_over == 2)
		return xs_deny(xc, AUD_R_BUDGET_EXCEEDED, "bytes_out cap %llu "
		    "reached mid-request",
		    (unsigned long long)caps->cp_bytes_out);
	if (caps != NULL && caps->cp_has_bytes_in)
		return xs_deny(xc, AUD_R_BUDGET_EXCEEDED, "bytes_in cap %llu "
		    "reached mid-response",
		    (unsigned long long)caps->cp_bytes_in);
	return xs_deny(xc, AUD_R_BUDGET_EXCEEDED, "bytes cap reached");
}

/* A request body chunk, or tunnel bytes towards the upstream: what
 * passes the bytes_out cap does not go on. */
static enum xs_verdict
bud_req_body(struct xs_call *xc, const char *p, size_t len)
{
	size_t	ok;

	(void)p;
	ok = bud_grant_allow(xc, 1, len);
	if (ok == len && !xc->xc_x->x_bud.b_over)
		return XS_GO;
	over_cap(xc);
	xc->xc_pass = ok;	/* up to the cap */
	return XS_DENY;
}

/*
 * The response body, or tunnel bytes towards the client: what fits under
 * bytes_in goes on (the rest is dropped and the exchange ends), and a
 * metered response is read as it streams.
 */
static enum xs_verdict
bud_resp_body(struct xs_call *xc, struct evbuffer *in, struct evbuffer *out)
{
	struct xchg		*x = xc->xc_x;
	struct evbuffer_iovec	 v[8];
	size_t			 n = evbuffer_get_length(in), ok, left, m;
	int			 i, k;

	ok = bud_grant_allow(xc, 0, n);
	/* a filtered stream is read by the meter event by event */
	if (x->x_bud.b_meter != NULL && !xc->xc_tunnel && ok > 0 &&
	    !bud_stream_filtered(x)) {
		if ((k = evbuffer_peek(in, (ssize_t)ok, NULL, v, 8)) > 8) {
			/* in more pieces than we look at: make it one */
			evbuffer_pullup(in, (ssize_t)ok);
			k = evbuffer_peek(in, (ssize_t)ok, NULL, v, 1);
		}
		for (i = 0, left = ok; i < k && left > 0; i++) {
			m = v[i].iov_len < left ? v[i].iov_len : left;
			meter_feed(x->x_bud.b_meter, v[i].iov_base, m);
			left -= m;
		}
	}
	if (ok == n && !x->x_bud.b_over)
		return bud_stream_filtered(x) && !xc->xc_tunnel ?
		    bud_stream_body(xc, in, out) : XS_GO;
	evbuffer_remove_buffer(in, out, ok);
	evbuffer_drain(in, evbuffer_get_length(in));
	return over_cap(xc);
}

/*
 * Bytes moved: charged in batches (64 KiB with no bytes cap, the rest at
 * the end). Bodies and tunnel bytes were checked before they moved
 * (bud_req_body, bud_resp_body); what passes a cap here is a head, or
 * another request of the sandbox: a tunnel ends (more would follow), a
 * request goes on (its next body byte is refused; the sandbox's next
 * request is refused at admission).
 */
static enum xs_verdict
bud_flow(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;

	if (!x->x_bud.b_admitted || x->x_bud.b_sb == NULL)
		return XS_GO;
	if (bud_xchg_batch_due(x) &&
	    bud_xchg_charge(x, bud_caps_of(xc->xc_policy)) == -1 &&
	    !x->x_bud.b_over && xc->xc_tunnel)
		x->x_bud.b_over = x->x_bud.b_room_out == 0 ? 2 : 1;
	if (x->x_bud.b_over)
		return over_cap(xc);
	xc->xc_flow_at = bud_xchg_next_due(x);
	return XS_GO;
}

/*
 * The exchange ended: settle. A metered response costs its usage; one cut
 * short, or a complete 2xx that reported none, costs what was reserved
 * (flagged "unmetered" in the audit), so recorded spend never falls below
 * what was consumed. A call that generates nothing costs nothing. An
 * asynchronous job costs what its rule prices it at.
 */
static void
bud_done(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;
	struct aud_rec	*r = xc->xc_rec;
	struct usage	*u = xc->xc_usage;
	struct bud_room	 room;
	uint64_t	 cost = 0;
	int		 unpriced = 0, done = x->x_resp_done;

	bud_stream_free(x);
	bud_grant_end(x);
	if (x->x_bud.b_dec_bad)
		done = 0;	/* its usage cannot be known */
	if (x->x_bud.b_rop != NULL) {
		/* ended before Redis answered: never forwarded */
		bud_rop_abandon(x->x_bud.b_rop);
		x->x_bud.b_rop = NULL;
		if (x->x_bud.b_llm) {
			bud_llm_leave(x->x_bud.b_sb);
			x->x_bud.b_llm = 0;
		}
		return;
	}
	if (!x->x_bud.b_admitted || xc->xc_sandbox == NULL)
		return;
	x->x_bud.b_admitted = 0;
	memset(u, 0, sizeof(*u));
	if (x->x_bud.b_waiting)
		/* ended before its reservation was durable: never forwarded */
		x->x_bud.b_waiting = 0;
	else if (x->x_bud.b_async)
		/* the job's price, unless the provider said no */
		cost = done && (x->x_status < 200 || x->x_status >= 300) ? 0 :
		    x->x_bud.b_reserved;
	else if (x->x_bud.b_meter != NULL) {
		meter_finish(x->x_bud.b_meter, u);
		if (u->u_model[0] == '\0')
			snprintf(u->u_model, sizeof(u->u_model), "%s",
			    x->x_bud.b_model);
		if (bud_stream_cost(x, &cost))
			;	/* cut at the usd cap: what it had cost */
		else if (!done)
			cost = x->x_bud.b_reserved;
		else if (u->u_found)
			cost = price_usage(xc->xc_cfg, u, &unpriced);
		else if (x->x_status >= 200 && x->x_status < 300) {
			cost = x->x_bud.b_reserved;	/* served, unmetered */
			r->ar_unmetered = 1;
			r->ar_usage_partial = u->u_partial;
		}
		r->ar_usage = u->u_found ? u : NULL;
		r->ar_cost_micro = (int64_t)cost;
		r->ar_unpriced = unpriced;
	} else if (x->x_bud.b_reserved > 0)
		cost = x->x_bud.b_reserved;
	if (x->x_bud.b_async || x->x_bud.b_free)
		r->ar_cost_micro = (int64_t)cost;
	/* metered: filed by model and day, counted in /metrics */
	bud_settle_usage(xc->xc_sandbox, x->x_bud.b_reserved, cost, u,
	    x->x_bud.b_meter != NULL ? u->u_model : x->x_bud.b_async ||
	    (x->x_rule_p != NULL && x->x_rule_p->r_meter != CFG_METER_NONE &&
	    !x->x_bud.b_free) ? x->x_bud.b_model : NULL);
	if (x->x_bud.b_rres != NULL) {
		bud_redis_settle(x->x_bud.b_rres, cost, x->x_bytes_in,
		    x->x_bytes_out);
		x->x_bud.b_rres = NULL;
	}
	if (x->x_bud.b_sb == NULL)
		x->x_bud.b_sb = bud_handle(xc->xc_sandbox);
	(void)bud_charge(x->x_bud.b_sb, NULL, x->x_bytes_in -
	    x->x_bud.b_charged_in, x->x_bytes_out - x->x_bud.b_charged_out,
	    &room);
	x->x_bud.b_charged_in = x->x_bytes_in;
	x->x_bud.b_charged_out = x->x_bytes_out;
	if (x->x_bud.b_llm) {
		bud_llm_leave(x->x_bud.b_sb);
		x->x_bud.b_llm = 0;
	}
}

/* Admitted: the bytes moved are charged in batches; under a cap (or the
 * fleet's grants) each chunk is checked before it moves; metered or
 * filtered: the body is read. */
static unsigned
bud_watch(struct xs_call *xc)
{
	const struct xchg	*x = xc->xc_x;
	unsigned		 w = 0;

	if (!x->x_bud.b_admitted || x->x_bud.b_sb == NULL)
		return x->x_bud.b_meter != NULL || bud_stream_filtered(x) ?
		    XS_W_RESP_BODY : 0;
	w = XS_W_FLOW;
	if (bud_caps_of(xc->xc_policy) != NULL || x->x_bud.b_over ||
	    x->x_bud.b_meter != NULL || bud_stream_filtered(x))
		w |= XS_W_RESP_BODY;
	if (x->x_bud.b_grant)
		w |= XS_W_ROOM;
	return w;
}

const struct xstage bud_stage = {
	.xs_name = "budget",
	.xs_req_head = bud_req_head,
	.xs_req_ready = bud_req_ready,
	.xs_req_drop = bud_req_drop,
	.xs_req_fields = bud_req_fields,
	.xs_req_body = bud_req_body,
	.xs_resp_head = bud_resp_head,
	.xs_resp_body = bud_resp_body,
	.xs_room = bud_grant_room_hook,
	.xs_flow = bud_flow,
	.xs_done = bud_done,
	.xs_watch = bud_watch,
};
