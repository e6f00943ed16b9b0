/*
 * A metered event stream on its way to the client (the budget stage's
 * resp_body, bud_stage.c): events pass whole (sse_filt.c), the usage-only
 * chunk that airlock's include_usage made the provider send is left out,
 * and with caps.cut_streams the stream is priced as it goes (usage
 * reported so far, else the streamed text as a bound on its tokens) and
 * ended at an event boundary with the provider's error event when the
 * sandbox's spend plus its running cost would pass the usd cap.
 */
#include "config.h"

#include <stdio.h>
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
#include "util/util.h"

/* An event held whole at most this long (Responses API's completed event
 * carries the whole response); longer ones pass as they come. */
#define BUD_EVENT_MAX	(1024 * 1024)

static int
cut_streams(const struct cfg_caps *cp)
{
	return cp->cp_has_usd && cp->cp_cut_streams != 0;
}

void
bud_stream_plan(struct xs_call *xc, const struct req_facts *rf, int stream,
    uint64_t input, uint64_t out)
{
	struct xchg	*x = xc->xc_x;

	if (!stream || xc->xc_policy == NULL)
		return;
	/* include_usage put in (or turned on) by us: the client did not ask
	   for the chunk it brings */
	x->x_bud.b_strip = rf->rf_rewrite;
	x->x_bud.b_cut = cut_streams(&xc->xc_policy->p_caps);
	x->x_bud.b_input_est = input;
	x->x_bud.b_max_out = out;
}

int
bud_stream_identity(const struct xchg *x)
{
	/* the filter reads the bytes the client gets: not compressed */
	return x->x_bud.b_strip || x->x_bud.b_cut;
}

/*
 * A compressed stream (the upstream ignored our Accept-Encoding:
 * identity) is decoded for the filter, bounded (budget/decode.h), and
 * sent on decoded with its Content-Encoding removed: its length changes
 * anyway, and every SDK reads an identity event stream. One coding the
 * meter reads, else the stream passes as it is (unfiltered, charged its
 * reservation when no usage can be read).
 */
static int
stream_decoder(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;
	struct http_msg	*m = xc->xc_resp;
	enum dec_coding	 coding;
	const char	*v;
	size_t		 vlen;
	int		 i;

	if ((i = http_msg_find(m, "content-encoding", 0)) == -1)
		return 0;
	if (http_msg_find(m, "content-encoding", i + 1) != -1)
		return -1;	/* layered */
	v = http_msg_str(m, m->hm_hdrs[i].h_value);
	vlen = m->hm_hdrs[i].h_value_len;
	coding = dec_coding_parse(v, vlen);
	if (coding == DEC_IDENTITY)
		return 0;
	if (coding == DEC_UNKNOWN)
		return -1;
	x->x_bud.b_dec = dec_new(coding, 0);
	http_msg_remove(m, i);
	return 1;
}

int
bud_stream_head(struct xs_call *xc, int sse)
{
	struct xchg		*x = xc->xc_x;
	const struct http_msg	*m = xc->xc_resp;
	int			 dec;

	if (!bud_stream_identity(x) || m->hm_status < 200 ||
	    m->hm_status >= 300 || bud_stream_filtered(x))
		return 0;
	/* Gemini's stream without alt=sse: a JSON array, cut between
	   elements */
	if (!sse && (x->x_rule_p->r_meter != CFG_METER_GEMINI ||
	    !x->x_bud.b_cut))
		return 0;
	if ((dec = stream_decoder(xc)) == -1)
		return 0;	/* compressed, unreadably: passed as it is */
	if (sse)
		x->x_bud.b_filt = sse_filt_new(BUD_EVENT_MAX);
	else
		x->x_bud.b_afilt = arr_filt_new(BUD_EVENT_MAX);
	if (x->x_bud.b_cut)
		meter_count_text(x->x_bud.b_meter);
	xc->xc_reframe = 1;
	return dec;
}

/* What the stream has cost so far, at the model's prices. */
static uint64_t
running_cost(const struct xs_call *xc)
{
	const struct xchg	*x = xc->xc_x;
	struct usage		 u;
	uint64_t		 text;
	int			 unpriced;

	if (meter_peek(x->x_bud.b_meter, &u, &text) == -1)
		return 0;
	if (u.u_model[0] == '\0')
		snprintf(u.u_model, sizeof(u.u_model), "%s", x->x_bud.b_model);
	if (!u.u_found || u.u_input == 0) {
		u.u_input = x->x_bud.b_input_est;
		u.u_cached = u.u_cache_write = 0;
	}
	/* text bytes bound the tokens sent, the request's bound all */
	if (text > x->x_bud.b_max_out)
		text = x->x_bud.b_max_out;
	if (text > u.u_output)
		u.u_output = text;
	return price_usage(xc->xc_cfg, &u, &unpriced);
}

/* Would the stream pass the usd cap? *cost is what it has cost. */
static int
over_usd(const struct xs_call *xc, uint64_t *cost)
{
	const struct cfg_caps	*caps = &xc->xc_policy->p_caps;
	const struct xchg	*x = xc->xc_x;
	struct bud_counters	 bc;
	uint64_t		 others;

	*cost = running_cost(xc);
	if (*cost <= x->x_bud.b_reserved)
		return 0;	/* within its own reservation */
	if (bud_get(xc->xc_sandbox, caps, &bc) == -1)
		return 0;
	/* spend and the reservations of the sandbox's other requests */
	others = bc.bc_spend + bc.bc_reserved;
	others = others > x->x_bud.b_reserved ? others - x->x_bud.b_reserved :
	    0;
	return others + *cost > caps->cp_usd;
}

struct emit_ctx {
	struct xs_call	*xc;
	struct evbuffer	*out;
	int		 cut;		/* the cap was passed */
	uint64_t	 cost;		/* then */
	int		 cr;		/* what went out ends with CR */
};

/*
 * Every byte of the body, in order: read by the meter (also what is left
 * out: the provider bills it); an event is sent unless it is the
 * usage-only chunk to strip or comes after the one that passed the cap.
 */
static int
emit(void *arg, const char *p, size_t n, int whole)
{
	struct emit_ctx	*ec = arg;
	struct xchg	*x = ec->xc->xc_x;

	meter_feed(x->x_bud.b_meter, p, n);
	if (ec->cut)
		return 0;
	if (whole && x->x_bud.b_strip && sse_usage_only(p, n))
		return 0;
	evbuffer_add(ec->out, p, n);
	ec->cr = n > 0 && p[n - 1] == '\r';
	/* the event that passes the cap went out: it is paid for */
	if (x->x_bud.b_cut && over_usd(ec->xc, &ec->cost))
		ec->cut = 1;
	return 1;
}

/* Bytes of the stream (decoded when it was compressed), to its filter. */
static void
filter(void *arg, const char *p, size_t n)
{
	struct emit_ctx	*ec = arg;
	struct xchg	*x = ec->xc->xc_x;

	if (x->x_bud.b_filt != NULL)
		(void)sse_filt_feed(x->x_bud.b_filt, p, n, emit, ec);
	else
		arr_filt_feed(x->x_bud.b_afilt, p, n, emit, ec);
}

int
bud_stream_filtered(const struct xchg *x)
{
	return x->x_bud.b_filt != NULL || x->x_bud.b_afilt != NULL;
}

void
bud_stream_free(struct xchg *x)
{
	sse_filt_free(x->x_bud.b_filt);
	x->x_bud.b_filt = NULL;
	arr_filt_free(x->x_bud.b_afilt);
	x->x_bud.b_afilt = NULL;
	dec_free(x->x_bud.b_dec);
	x->x_bud.b_dec = NULL;
}

/* Where the stream ends when cut, if it can end cleanly there. */
static void
cut_tail(struct xs_call *xc, struct evbuffer *out, int cr)
{
	struct xchg	*x = xc->xc_x;
	char		 ev[1024];

	if (x->x_bud.b_filt != NULL && sse_filt_at_boundary(x->x_bud.b_filt))
		sse_cut_event(x->x_rule_p->r_meter, xc->xc_reason, x->x_id, ev,
		    sizeof(ev));
	else if (x->x_bud.b_afilt != NULL &&
	    arr_filt_at_boundary(x->x_bud.b_afilt))
		arr_cut_tail(x->x_bud.b_afilt, xc->xc_reason, x->x_id, ev,
		    sizeof(ev));
	else
		return;
	/* events ended by CRLF CRLF end at the CR (the last LF is left
	   out): one that splits lines at LF only would read "\rdata:" */
	if (cr && ev[0] != '\0')
		evbuffer_add(out, "\n", 1);
	evbuffer_add(out, ev, strlen(ev));
	xc->xc_cut_whole = ev[0] != '\0';
}

enum xs_verdict
bud_stream_body(struct xs_call *xc, struct evbuffer *in, struct evbuffer *out)
{
	struct xchg	*x = xc->xc_x;
	struct emit_ctx	 ec = { xc, out, 0, 0, 0 };
	size_t		 n = evbuffer_get_length(in);
	const char	*p;
	enum dec_status	 ds = DEC_OK;

	if (n > 0) {
		p = (const char *)evbuffer_pullup(in, (ssize_t)n);
		if (x->x_bud.b_dec != NULL)
			ds = dec_feed(x->x_bud.b_dec, p, n, filter, &ec);
		else
			filter(&ec, p, n);
	}
	evbuffer_drain(in, n);
	if (ds == DEC_OK && xc->xc_eof && x->x_bud.b_dec != NULL && !ec.cut)
		ds = dec_finish(x->x_bud.b_dec);
	if (ds != DEC_OK && !ec.cut) {
		/* what was decoded went on; the rest cannot be read */
		x->x_bud.b_dec_bad = 1;
		xc->xc_cut = AUD_R_UPSTREAM_ENCODED_BODY;
		return xs_deny(xc, AUD_R_UPSTREAM_ENCODED_BODY, "upstream's "
		    "compressed event stream could not be decoded: %s",
		    dec_status_str(ds));
	}
	if (xc->xc_eof && !ec.cut && x->x_bud.b_filt != NULL)
		sse_filt_flush(x->x_bud.b_filt, emit, &ec);
	else if (xc->xc_eof && !ec.cut)
		arr_filt_flush(x->x_bud.b_afilt, emit, &ec);
	if (!ec.cut)
		return XS_GO;
	/* what is held (an unfinished event) is dropped */
	x->x_bud.b_was_cut = 1;
	x->x_bud.b_cut_cost = running_cost(xc);	/* all that came */
	xc->xc_cut = AUD_R_BUDGET_CUT;
	snprintf(xc->xc_reason, sizeof(xc->xc_reason), "usd cap %llu.%06llu "
	    "reached mid-stream: %llu.%06llu spent by it",
	    (unsigned long long)(xc->xc_policy->p_caps.cp_usd / 1000000),
	    (unsigned long long)(xc->xc_policy->p_caps.cp_usd % 1000000),
	    (unsigned long long)(ec.cost / 1000000),
	    (unsigned long long)(ec.cost % 1000000));
	cut_tail(xc, out, ec.cr);
	xc->xc_why = AUD_R_BUDGET_EXCEEDED;
	return XS_DENY;
}

int
bud_stream_cost(const struct xchg *x, uint64_t *cost)
{
	if (!x->x_bud.b_was_cut)
		return 0;
	*cost = x->x_bud.b_cut_cost;
	return 1;
}
