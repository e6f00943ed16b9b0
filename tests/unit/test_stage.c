/*
 * The stage table (pipe/stage.h) without a connection or an event loop:
 * the walker over fake stages (order, hold bounds, the first refusal
 * stops the walk, a wait resumes at its stage), the reason table, and the
 * budget and secrets stages driven by a fake exchange.
 */
#include "config.h"

#include <string.h>

#include <event2/buffer.h>

#include "audit/aud_reasons.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "secrets/sec.h"
#include "secrets/sec_req.h"
#include "unit.h"

static char	calls[64];

static void
mark(char ch)
{
	size_t	n = strlen(calls);

	if (n + 1 < sizeof(calls)) {
		calls[n] = ch;
		calls[n + 1] = '\0';
	}
}

static enum xs_verdict a_head(struct xs_call *xc)
{ (void)xc; mark('a'); return XS_GO; }
static enum xs_verdict b_head(struct xs_call *xc)
{ mark('b'); xc->xc_hold = 500; return XS_HOLD; }
static enum xs_verdict c_head(struct xs_call *xc)
{ mark('c'); xc->xc_hold = 300; return XS_HOLD; }
static enum xs_verdict d_head(struct xs_call *xc)
{ mark('d'); return xs_deny(xc, AUD_R_DENIED, "no %s", "way"); }
static int	waits;
static enum xs_verdict w_ready(struct xs_call *xc)
{ (void)xc; mark('w'); return waits-- > 0 ? XS_WAIT : XS_GO; }
static enum xs_verdict a_ready(struct xs_call *xc)
{ (void)xc; mark('a'); return XS_GO; }
static enum xs_verdict z_ready(struct xs_call *xc)
{ (void)xc; mark('z'); return XS_GO; }
static enum xs_verdict b_body(struct xs_call *xc, const char *p, size_t n)
{ mark('b'); return n > 0 && p[0] == 'x' ?
    xs_deny(xc, AUD_R_SECRET_MISUSE, "x") : XS_GO; }
static enum xs_verdict c_body(struct xs_call *xc, const char *p, size_t n)
{ (void)xc; (void)p; (void)n; mark('c'); return XS_GO; }
static void a_done(struct xs_call *xc) { (void)xc; mark('1'); }
static void b_done(struct xs_call *xc) { (void)xc; mark('2'); }

static const struct xstage sa = { .xs_name = "a", .xs_req_head = a_head,
    .xs_req_ready = a_ready, .xs_done = a_done };
static const struct xstage sb = { .xs_name = "b", .xs_req_head = b_head,
    .xs_req_ready = w_ready, .xs_req_body = b_body, .xs_done = b_done };
static const struct xstage sc = { .xs_name = "c", .xs_req_head = c_head,
    .xs_req_ready = z_ready, .xs_req_body = c_body };
static const struct xstage sd = { .xs_name = "d", .xs_req_head = d_head };

static void
call_init(struct xs_call *xc, struct xchg *x)
{
	memset(xc, 0, sizeof(*xc));
	memset(x, 0, sizeof(*x));
	xc->xc_x = x;
	calls[0] = '\0';
}

START_TEST(test_walk_hold)
{
	const struct xstage *const tbl[] = { &sa, &sb, &sc, NULL };
	struct xs_call	xc;
	struct xchg	x;

	call_init(&xc, &x);
	ck_assert_int_eq(xs_run(tbl, XS_REQ_HEAD, &xc), XS_HOLD);
	ck_assert_str_eq(calls, "abc");		/* every stage saw the head */
	ck_assert_uint_eq(xc.xc_hold, 300);	/* the smallest bound */
}
END_TEST

START_TEST(test_walk_deny_stops)
{
	const struct xstage *const tbl[] = { &sa, &sd, &sb, NULL };
	struct xs_call	xc;
	struct xchg	x;

	call_init(&xc, &x);
	ck_assert_int_eq(xs_run(tbl, XS_REQ_HEAD, &xc), XS_DENY);
	ck_assert_str_eq(calls, "ad");
	ck_assert_int_eq(xc.xc_why, AUD_R_DENIED);
	ck_assert_str_eq(xc.xc_reason, "no way");
}
END_TEST

START_TEST(test_walk_wait_resumes)
{
	const struct xstage *const tbl[] = { &sa, &sb, &sc, NULL };
	struct xs_call	xc;
	struct xchg	x;

	call_init(&xc, &x);
	waits = 1;
	ck_assert_int_eq(xs_run(tbl, XS_REQ_READY, &xc), XS_WAIT);
	ck_assert_str_eq(calls, "aw");
	ck_assert_uint_eq(xc.xc_at, 1);
	/* resumed: the waiting stage again, then the rest; not the first */
	ck_assert_int_eq(xs_run(tbl, XS_REQ_READY, &xc), XS_GO);
	ck_assert_str_eq(calls, "awwz");
}
END_TEST

START_TEST(test_walk_body_done)
{
	const struct xstage *const tbl[] = { &sa, &sb, &sc, NULL };
	struct xs_call	xc;
	struct xchg	x;

	call_init(&xc, &x);
	ck_assert_int_eq(xs_run_req_body(tbl, &xc, "ok", 2), XS_GO);
	ck_assert_int_eq(xs_run_req_body(tbl, &xc, "xx", 2), XS_DENY);
	ck_assert_str_eq(calls, "bcb");
	ck_assert_int_eq(xc.xc_why, AUD_R_SECRET_MISUSE);
	calls[0] = '\0';
	xs_run_done(tbl, &xc);
	ck_assert_str_eq(calls, "12");
}
END_TEST

/* Filters: 'u' upper-cases what it takes, 'o' observes, 'x' refuses
 * after letting the first byte through, 'h' keeps everything back until
 * the last call. */
static enum xs_verdict
u_filt(struct xs_call *xc, struct evbuffer *in, struct evbuffer *out)
{
	char	ch;

	(void)xc;
	mark('u');
	while (evbuffer_remove(in, &ch, 1) == 1) {
		ch = (char)(ch >= 'a' && ch <= 'z' ? ch - 32 : ch);
		evbuffer_add(out, &ch, 1);
	}
	return XS_GO;
}
static enum xs_verdict
o_filt(struct xs_call *xc, struct evbuffer *in, struct evbuffer *out)
{ (void)xc; (void)in; (void)out; mark('o'); return XS_GO; }
static enum xs_verdict
x_filt(struct xs_call *xc, struct evbuffer *in, struct evbuffer *out)
{
	mark('x');
	evbuffer_remove_buffer(in, out, 1);
	evbuffer_drain(in, evbuffer_get_length(in));
	xc->xc_cut = AUD_R_BUDGET_CUT;
	return xs_deny(xc, AUD_R_BUDGET_EXCEEDED, "cap");
}
static struct evbuffer	*h_kept;
static enum xs_verdict
h_filt(struct xs_call *xc, struct evbuffer *in, struct evbuffer *out)
{
	mark('h');
	evbuffer_add_buffer(h_kept, in);
	if (xc->xc_eof)
		evbuffer_add_buffer(out, h_kept);
	return XS_GO;
}
static const struct xstage fu = { .xs_name = "u", .xs_resp_body = u_filt };
static const struct xstage fo = { .xs_name = "o", .xs_resp_body = o_filt,
    .xs_resp_head_out = o_filt };
static const struct xstage fx = { .xs_name = "x", .xs_resp_body = x_filt };
static const struct xstage fh = { .xs_name = "h", .xs_resp_body = h_filt };

/* Run <tbl>'s body filters over <text>; the result as a string. */
static enum xs_verdict
filter(const struct xstage *const *tbl, struct xs_call *xc, const char *text,
    char *got, size_t size)
{
	struct evbuffer	*a = evbuffer_new(), *b = evbuffer_new(), *res;
	enum xs_verdict	 v;
	size_t		 n;

	evbuffer_add(a, text, strlen(text));
	v = xs_run_filter(tbl, XS_F_RESP_BODY, xc, a, b, &res);
	ck_assert(res == a || res == b);
	ck_assert_uint_eq(evbuffer_get_length(res == a ? b : a), 0);
	n = evbuffer_remove(res, got, size - 1);
	got[n] = '\0';
	evbuffer_free(a);
	evbuffer_free(b);
	return v;
}

START_TEST(test_filter_chain)
{
	const struct xstage *const obs[] = { &fo, &fo, NULL };
	const struct xstage *const up[] = { &fo, &fu, &fo, NULL };
	const struct xstage *const cut[] = { &fx, &fu, NULL };
	const struct xstage *const hold[] = { &fh, &fu, NULL };
	struct xs_call	xc;
	struct xchg	x;
	char		got[64];

	call_init(&xc, &x);
	ck_assert_int_eq(filter(obs, &xc, "abc", got, sizeof(got)), XS_GO);
	ck_assert_str_eq(got, "abc");	/* observed: untouched */
	ck_assert_int_eq(filter(up, &xc, "abc", got, sizeof(got)), XS_GO);
	ck_assert_str_eq(got, "ABC");
	/* the first stage refuses after one byte: the later ones still
	   filter what it let through */
	calls[0] = '\0';
	ck_assert_int_eq(filter(cut, &xc, "abc", got, sizeof(got)), XS_DENY);
	ck_assert_str_eq(got, "A");
	ck_assert_str_eq(calls, "xu");
	ck_assert_int_eq(xc.xc_why, AUD_R_BUDGET_EXCEEDED);
	ck_assert_int_eq(xc.xc_cut, AUD_R_BUDGET_CUT);
	ck_assert_str_eq(xc.xc_reason, "cap");
	/* kept back until the last call */
	h_kept = evbuffer_new();
	ck_assert_int_eq(filter(hold, &xc, "abc", got, sizeof(got)), XS_GO);
	ck_assert_str_eq(got, "");
	xc.xc_eof = 1;
	ck_assert_int_eq(filter(hold, &xc, "de", got, sizeof(got)), XS_GO);
	ck_assert_str_eq(got, "ABCDE");
	evbuffer_free(h_kept);
}
END_TEST

static size_t r_room(struct xs_call *xc, int up)
{ (void)xc; (void)up; return 1; }
static unsigned	watch_says;
static unsigned w_watch(struct xs_call *xc) { (void)xc; return watch_says; }
static const struct xstage fr = { .xs_name = "r", .xs_room = r_room };
static const struct xstage fw = { .xs_name = "w", .xs_resp_body = o_filt,
    .xs_room = r_room, .xs_watch = w_watch };

/* A hook no stage has, or that every stage having it declines, is quiet;
 * a stage without xs_watch keeps all of its own. */
START_TEST(test_quiet)
{
	const struct xstage *const none[] = { &sd, NULL };
	const struct xstage *const plain[] = { &fo, &fr, NULL };
	const struct xstage *const watched[] = { &fw, NULL };
	const struct xstage *const mixed[] = { &fw, &fo, NULL };
	struct xs_call	xc;
	struct xchg	x;

	call_init(&xc, &x);
	ck_assert_uint_eq(xs_run_quiet(none, &xc), XS_W_ALL);
	ck_assert_uint_eq(xs_run_quiet(plain, &xc), XS_W_FLOW);
	watch_says = 0;
	ck_assert_uint_eq(xs_run_quiet(watched, &xc), XS_W_ALL);
	ck_assert_uint_eq(xs_run_quiet(mixed, &xc), XS_W_ROOM | XS_W_FLOW);
	watch_says = XS_W_ROOM | XS_W_FLOW;	/* FLOW: a hook it lacks */
	ck_assert_uint_eq(xs_run_quiet(watched, &xc),
	    XS_W_RESP_BODY | XS_W_FLOW);
	watch_says = XS_W_ALL;
	ck_assert_uint_eq(xs_run_quiet(watched, &xc), XS_W_FLOW);
}
END_TEST

/* The daemon's table: policy, dest, mcp, ask, secrets, budget, audit,
 * in that order. */
START_TEST(test_table_order)
{
	ck_assert_ptr_eq(xs_table[0], &pol_stage);
	ck_assert_ptr_eq(xs_table[1], &geo_stage);
	ck_assert_ptr_eq(xs_table[2], &mcp_stage);
	ck_assert_ptr_eq(xs_table[3], &ask_stage);
	ck_assert_ptr_eq(xs_table[4], &sec_stage);
	ck_assert_ptr_eq(xs_table[5], &bud_stage);
	ck_assert_ptr_eq(xs_table[6], &aud_stage);
	ck_assert_ptr_null(xs_table[7]);
}
END_TEST

START_TEST(test_reasons)
{
	const struct aud_reason_info	*a, *b;
	int				 i, j;

	for (i = 0; i < AUD_R_COUNT; i++) {
		a = aud_reason((enum aud_reason)i);
		ck_assert_ptr_nonnull(a->ri_name);
		ck_assert_ptr_nonnull(a->ri_text);
		/* an answer of ours has a code and an error status */
		ck_assert_int_eq(a->ri_code != NULL, a->ri_status != 0);
		if (a->ri_code != NULL)
			ck_assert_int_ge(a->ri_status, 400);
		for (j = i + 1; j < AUD_R_COUNT; j++) {
			b = aud_reason((enum aud_reason)j);
			ck_assert_str_ne(a->ri_name, b->ri_name);
			if (a->ri_code != NULL && b->ri_code != NULL)
				ck_assert_str_ne(a->ri_code, b->ri_code);
		}
	}
	ck_assert_str_eq(aud_reason_code(AUD_R_BUDGET_EXCEEDED),
	    "budget_exceeded");
	ck_assert_int_eq(aud_reason(AUD_R_RATE_LIMITED)->ri_status, 429);
	ck_assert_ptr_eq(aud_reason((enum aud_reason)9999),
	    aud_reason(AUD_R_NONE));
}
END_TEST

/* A fake exchange for the budget stage: one rule, caps of 2 requests. */
static struct cfg	 fcfg;
static struct cfg_rule	 frule;
static struct cfg_policy fpol;
static struct http_msg	 freq, fresp;

static void
fake_call(struct xs_call *xc, struct xchg *x, const char *sandbox)
{
	memset(xc, 0, sizeof(*xc));
	memset(x, 0, sizeof(*x));
	x->x_rule_p = &frule;
	x->x_method[0] = 'G';
	xc->xc_x = x;
	xc->xc_cfg = &fcfg;
	xc->xc_policy = &fpol;
	xc->xc_sandbox = sandbox;
	xc->xc_req = &freq;
	xc->xc_resp = &fresp;
}

static void
fake_setup(void)
{
	memset(&fcfg, 0, sizeof(fcfg));
	memset(&frule, 0, sizeof(frule));
	memset(&fpol, 0, sizeof(fpol));
	fcfg.c_limits.l_body_bytes = 4096;
	fpol.p_rules = &frule;
	fpol.p_nrules = 1;
	fpol.p_caps.cp_has_requests = 1;
	fpol.p_caps.cp_requests = 2;
	http_msg_init(&freq, HTTP_REQUEST, 65536);
	http_msg_init(&fresp, HTTP_RESPONSE, 65536);
}

static void
fake_teardown(void)
{
	http_msg_fini(&freq);
	http_msg_fini(&fresp);
}

START_TEST(test_budget_stage_admits_to_cap)
{
	struct xs_call	xc;
	struct xchg	x;
	int		i;

	for (i = 0; i < 2; i++) {
		fake_call(&xc, &x, "unit-stage-cap");
		ck_assert_ptr_nonnull(bud_stage.xs_req_ready);
		ck_assert_int_eq(bud_stage.xs_req_ready(&xc), XS_GO);
		ck_assert_int_eq(x.x_bud.b_admitted, 1);
	}
	fake_call(&xc, &x, "unit-stage-cap");
	ck_assert_int_eq(bud_stage.xs_req_ready(&xc), XS_DENY);
	ck_assert_int_eq(xc.xc_why, AUD_R_BUDGET_EXCEEDED);
	ck_assert_ptr_nonnull(strstr(xc.xc_reason, "requests cap 2"));
	ck_assert_int_eq(x.x_bud.b_admitted, 0);
}
END_TEST

START_TEST(test_budget_stage_holds_metered)
{
	struct xs_call	xc;
	struct xchg	x;

	fake_call(&xc, &x, "unit-stage-hold");
	ck_assert_int_eq(bud_stage.xs_req_head(&xc), XS_GO);
	frule.r_meter = CFG_METER_OPENAI;
	ck_assert_int_eq(bud_stage.xs_req_head(&xc), XS_HOLD);
	ck_assert_uint_eq(xc.xc_hold, 4096);
	frule.r_meter = CFG_METER_NONE;
}
END_TEST

START_TEST(test_secrets_stage_no_secret)
{
	struct xs_call	xc;
	struct xchg	x;

	/* no secret on the exchange: body and response pass untouched */
	fake_call(&xc, &x, "unit-stage-sec");
	ck_assert_int_eq(sec_stage.xs_req_body(&xc, "abc", 3), XS_GO);
	ck_assert_int_eq(sec_stage.xs_resp_head(&xc), XS_GO);
}
END_TEST

/* Which per-chunk hooks the planes' stages keep, by what the exchange
 * holds after its response head. */
START_TEST(test_stage_watch)
{
	struct xs_call	xc;
	struct xchg	x;

	fake_call(&xc, &x, "unit-stage-watch");
	ck_assert_uint_eq(bud_stage.xs_watch(&xc), 0);	/* not admitted */
	ck_assert_uint_eq(sec_stage.xs_watch(&xc), 0);	/* no secret */
	ck_assert_uint_eq(mcp_stage.xs_watch(&xc), 0);	/* no tools/list */
	xc.xc_upgrade = 1;	/* a WebSocket's frames are read */
	ck_assert_uint_eq(sec_stage.xs_watch(&xc), XS_W_RESP_BODY);
	xc.xc_upgrade = 0;
	/* admitted under a cap: every chunk is checked, batches charged */
	ck_assert_int_eq(bud_stage.xs_req_ready(&xc), XS_GO);
	ck_assert_int_eq(x.x_bud.b_admitted, 1);
	ck_assert_uint_eq(bud_stage.xs_watch(&xc), XS_W_RESP_BODY | XS_W_FLOW);
	ck_assert_uint_eq(xs_run_quiet(xs_table, &xc), XS_W_ROOM);
	/* no cap: only the batches */
	fpol.p_caps.cp_has_requests = 0;
	fake_call(&xc, &x, "unit-stage-watch");
	ck_assert_int_eq(bud_stage.xs_req_ready(&xc), XS_GO);
	ck_assert_int_eq(x.x_bud.b_admitted, 1);
	ck_assert_uint_eq(xs_run_quiet(xs_table, &xc),
	    XS_W_RESP_BODY | XS_W_ROOM);
}
END_TEST

Suite *
suite_stage(void)
{
	Suite	*s = suite_create("stage");
	TCase	*tc = tcase_create("walker");
	TCase	*tf = tcase_create("fake exchange");

	tcase_add_test(tc, test_walk_hold);
	tcase_add_test(tc, test_walk_deny_stops);
	tcase_add_test(tc, test_walk_wait_resumes);
	tcase_add_test(tc, test_walk_body_done);
	tcase_add_test(tc, test_filter_chain);
	tcase_add_test(tc, test_quiet);
	tcase_add_test(tc, test_table_order);
	tcase_add_test(tc, test_reasons);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(tf, fake_setup, fake_teardown);
	tcase_add_test(tf, test_budget_stage_admits_to_cap);
	tcase_add_test(tf, test_budget_stage_holds_metered);
	tcase_add_test(tf, test_secrets_stage_no_secret);
	tcase_add_test(tf, test_stage_watch);
	suite_add_tcase(s, tf);
	return s;
}
