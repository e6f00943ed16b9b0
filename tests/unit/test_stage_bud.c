/*
 * The budget stage driven by a fake exchange (no connection, no event
 * loop): bytes charged as they flow through its req_body and resp_body,
 * what passes a bytes cap held back and the exchange ended (budget_cut
 * once the answer began), a body observed untouched when nothing caps it.
 */
#include "config.h"

#include <string.h>

#include <event2/buffer.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "unit.h"

static struct cfg	 bcfg;
static struct cfg_rule	 brule;
static struct cfg_policy bpol;
static struct http_msg	 breq, bresp;

static void
bud_setup(void)
{
	memset(&bcfg, 0, sizeof(bcfg));
	memset(&brule, 0, sizeof(brule));
	memset(&bpol, 0, sizeof(bpol));
	bcfg.c_limits.l_body_bytes = 4096;
	bpol.p_rules = &brule;
	bpol.p_nrules = 1;
	http_msg_init(&breq, HTTP_REQUEST, 65536);
	http_msg_init(&bresp, HTTP_RESPONSE, 65536);
}

static void
bud_teardown(void)
{
	http_msg_fini(&breq);
	http_msg_fini(&bresp);
}

/* An exchange of <sandbox>, admitted under the policy's caps. */
static void
admitted(struct xs_call *xc, struct xchg *x, const char *sandbox)
{
	memset(xc, 0, sizeof(*xc));
	memset(x, 0, sizeof(*x));
	x->x_rule_p = &brule;
	xc->xc_x = x;
	xc->xc_cfg = &bcfg;
	xc->xc_policy = &bpol;
	xc->xc_sandbox = sandbox;
	xc->xc_req = &breq;
	xc->xc_resp = &bresp;
	ck_assert_int_eq(bud_stage.xs_req_ready(xc), XS_GO);
	ck_assert_int_eq(x->x_bud.b_admitted, 1);
}

static void
fill(struct evbuffer *b, size_t n)
{
	char	buf[256];

	memset(buf, 'a', sizeof(buf));
	while (n > 0) {
		size_t	k = n < sizeof(buf) ? n : sizeof(buf);

		evbuffer_add(b, buf, k);
		n -= k;
	}
}

START_TEST(test_bud_resp_body_cut_at_bytes_in)
{
	struct xs_call	 xc;
	struct xchg	 x;
	struct evbuffer	*in = evbuffer_new(), *out = evbuffer_new();

	bpol.p_caps.cp_has_bytes_in = 1;
	bpol.p_caps.cp_bytes_in = 100;
	admitted(&xc, &x, "unit-bud-in");
	/* 60 bytes fit: observed, charged when they went out */
	fill(in, 60);
	ck_assert_int_eq(bud_stage.xs_resp_body(&xc, in, out), XS_GO);
	ck_assert_uint_eq(evbuffer_get_length(in), 60);
	ck_assert_uint_eq(evbuffer_get_length(out), 0);
	evbuffer_drain(in, 60);
	x.x_bytes_in += 60;
	/* 90 more: the 40 left under the cap go on, the rest does not */
	fill(in, 90);
	ck_assert_int_eq(bud_stage.xs_resp_body(&xc, in, out), XS_DENY);
	ck_assert_uint_eq(evbuffer_get_length(out), 40);
	ck_assert_uint_eq(evbuffer_get_length(in), 0);
	ck_assert_int_eq(xc.xc_why, AUD_R_BUDGET_EXCEEDED);
	ck_assert_int_eq(xc.xc_cut, AUD_R_BUDGET_CUT);
	ck_assert_str_eq(xc.xc_reason, "bytes_in cap 100 reached "
	    "mid-response");
	/* settled: the sandbox's bytes are what went out */
	x.x_bytes_in += 40;
	xc.xc_rec = &(struct aud_rec){ 0 };
	xc.xc_usage = &(struct usage){ 0 };
	bud_stage.xs_done(&xc);
	ck_assert_uint_eq(x.x_bud.b_charged_in, 100);
	evbuffer_free(in);
	evbuffer_free(out);
}
END_TEST

START_TEST(test_bud_req_body_pass_to_bytes_out)
{
	struct xs_call	xc;
	struct xchg	x;
	char		buf[80];

	memset(buf, 'b', sizeof(buf));
	bpol.p_caps.cp_has_bytes_out = 1;
	bpol.p_caps.cp_bytes_out = 50;
	admitted(&xc, &x, "unit-bud-out");
	ck_assert_int_eq(bud_stage.xs_req_body(&xc, buf, 30), XS_GO);
	x.x_bytes_out += 30;
	/* 80 more: 20 still go (up to the cap), then the request ends */
	ck_assert_int_eq(bud_stage.xs_req_body(&xc, buf, 80), XS_DENY);
	ck_assert_uint_eq(xc.xc_pass, 20);
	ck_assert_int_eq(xc.xc_cut, AUD_R_BUDGET_CUT);
	ck_assert_str_eq(xc.xc_reason, "bytes_out cap 50 reached mid-request");
}
END_TEST

START_TEST(test_bud_flow_batches)
{
	struct xs_call	xc;
	struct xchg	x;

	bpol.p_caps.cp_has_requests = 1;
	bpol.p_caps.cp_requests = 100;
	admitted(&xc, &x, "unit-bud-flow");
	/* no bytes cap: charged every 64 KiB, not before */
	x.x_bytes_in = 1000;
	ck_assert_int_eq(bud_stage.xs_flow(&xc), XS_GO);
	ck_assert_uint_eq(x.x_bud.b_charged_in, 0);
	x.x_bytes_in = 70 * 1024;
	ck_assert_int_eq(bud_stage.xs_flow(&xc), XS_GO);
	ck_assert_uint_eq(x.x_bud.b_charged_in, 70 * 1024);
}
END_TEST

static enum xs_verdict
flow_at_5000(struct xs_call *xc)
{
	xc->xc_flow_at = 5000;
	return XS_GO;
}

static enum xs_verdict
flow_every_time(struct xs_call *xc)
{
	(void)xc;
	return XS_GO;
}

/* The flow walk says when it is next needed: the least any hook asked
   for; nothing bounds the bytes, so the budget asks for the next batch;
   a bytes cap or an overrun, every time. */
START_TEST(test_bud_flow_at)
{
	static const struct xstage	at5000 = { .xs_name = "t5000",
					    .xs_flow = flow_at_5000 };
	static const struct xstage	every = { .xs_name = "tevery",
					    .xs_flow = flow_every_time };
	const struct xstage *const	bud_only[] = { &bud_stage, NULL };
	const struct xstage *const	both[] = { &bud_stage, &at5000, NULL };
	const struct xstage *const	three[] = { &bud_stage, &at5000,
					    &every, NULL };
	struct xs_call			xc;
	struct xchg			x;

	bpol.p_caps.cp_has_requests = 1;
	bpol.p_caps.cp_requests = 100;
	admitted(&xc, &x, "unit-bud-flow-at");
	x.x_bytes_in = 1000;
	ck_assert_int_eq(xs_run_flow(bud_only, &xc), XS_GO);
	ck_assert_uint_eq(xc.xc_flow_at, 64 * 1024);
	ck_assert_int_eq(xs_run_flow(both, &xc), XS_GO);
	ck_assert_uint_eq(xc.xc_flow_at, 5000);
	ck_assert_int_eq(xs_run_flow(three, &xc), XS_GO);
	ck_assert_uint_eq(xc.xc_flow_at, 0);
	/* charged at the batch: the next one from there */
	x.x_bytes_in = 70 * 1024;
	x.x_bytes_out = 100;
	ck_assert_int_eq(xs_run_flow(bud_only, &xc), XS_GO);
	ck_assert_uint_eq(x.x_bud.b_charged_in, 70 * 1024);
	ck_assert_uint_eq(xc.xc_flow_at, 70 * 1024 + 100 + 64 * 1024);

	/* a bytes cap: looked at as bytes move */
	bpol.p_caps.cp_has_bytes_in = 1;
	bpol.p_caps.cp_bytes_in = 1 << 20;
	admitted(&xc, &x, "unit-bud-flow-at-cap");
	x.x_bytes_in = 1000;
	ck_assert_int_eq(xs_run_flow(bud_only, &xc), XS_GO);
	ck_assert_uint_eq(xc.xc_flow_at, 0);
	/* an overrun found on the body path: the next walk at once */
	x.x_flow_at = 1 << 30;
	ck_assert_uint_eq(bud_xchg_allow(&x, &bpol.p_caps, 0, 2 << 20),
	    (1 << 20) - 1000);
	ck_assert_int_ne(x.x_bud.b_over, 0);
	ck_assert_uint_eq(x.x_flow_at, 0);
	ck_assert_int_eq(xs_run_flow(bud_only, &xc), XS_DENY);
}
END_TEST

START_TEST(test_bud_body_uncapped_observed)
{
	struct xs_call	 xc;
	struct xchg	 x;
	struct evbuffer	*in = evbuffer_new(), *out = evbuffer_new();

	/* not admitted (no sandbox): nothing charged, nothing held */
	memset(&xc, 0, sizeof(xc));
	memset(&x, 0, sizeof(x));
	xc.xc_x = &x;
	fill(in, 5000);
	ck_assert_int_eq(bud_stage.xs_resp_body(&xc, in, out), XS_GO);
	ck_assert_uint_eq(evbuffer_get_length(in), 5000);
	ck_assert_uint_eq(evbuffer_get_length(out), 0);
	ck_assert_int_eq(bud_stage.xs_req_body(&xc, "x", 1), XS_GO);
	evbuffer_free(in);
	evbuffer_free(out);
}
END_TEST

Suite *
suite_stage_bud(void)
{
	Suite	*s = suite_create("stage_budget");
	TCase	*tc = tcase_create("fake exchange");

	tcase_add_checked_fixture(tc, bud_setup, bud_teardown);
	tcase_add_test(tc, test_bud_resp_body_cut_at_bytes_in);
	tcase_add_test(tc, test_bud_req_body_pass_to_bytes_out);
	tcase_add_test(tc, test_bud_flow_batches);
	tcase_add_test(tc, test_bud_flow_at);
	tcase_add_test(tc, test_bud_body_uncapped_observed);
	suite_add_tcase(s, tc);
	return s;
}
