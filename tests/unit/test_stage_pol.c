/*
 * The policy stage driven by a fake exchange (no connection, no event
 * loop): a request head parsed by http_msg, a policy built in place, the
 * stage's req_policy hook through the walker. What the exchange gets
 * (rule, ask, would_deny, rule_hint) and what the driver is told
 * (verdict, reason, xc_close, xc_intercept).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "policy/pol.h"
#include "unit.h"

static int	ports_443[] = { 443 };
static char	*m_get[] = { "GET" };
static char	*p_v1[] = { "/v1/*" };

static struct cfg_rule	rules[] = {
	{ .r_host = "api.example.com", .r_ports = ports_443, .r_nports = 1,
	  .r_methods = m_get, .r_nmethods = 1, .r_paths = p_v1,
	  .r_npaths = 1, .r_intercept = 1 },
	{ .r_host = "ask.example.com", .r_ports = ports_443, .r_nports = 1,
	  .r_ask = 1, .r_intercept = 1 },
	{ .r_host = "splice.example.com", .r_ports = ports_443,
	  .r_nports = 1, .r_intercept = 0 },
};

struct fake {
	struct xs_call	xc;
	struct xchg	x;
	struct http_msg	m;
	struct cfg_policy pol;
};

/* An exchange of <raw> (a request head) to host:443 under the policy. */
static void
fake_new(struct fake *f, const char *raw, const char *host,
    const char *path, int tunnel)
{
	size_t	used;

	memset(f, 0, sizeof(*f));
	f->pol.p_name = "p";
	f->pol.p_rules = rules;
	f->pol.p_nrules = sizeof(rules) / sizeof(rules[0]);
	http_msg_init(&f->m, HTTP_REQUEST, 65536);
	ck_assert_int_eq(http_msg_feed(&f->m, raw, strlen(raw), &used),
	    HTTP_FEED_HEAD);
	snprintf(f->x.x_host, sizeof(f->x.x_host), "%s", host);
	f->x.x_port = 443;
	snprintf(f->x.x_method, sizeof(f->x.x_method), "%s",
	    http_msg_method(&f->m));
	f->x.x_path = (char *)path;
	f->xc.xc_x = &f->x;
	f->xc.xc_policy = &f->pol;
	f->xc.xc_req = &f->m;
	f->xc.xc_tunnel = tunnel;
}

static enum xs_verdict
run(struct fake *f)
{
	f->xc.xc_at = 0;
	/* the whole table: only the policy stage has this hook */
	return xs_run(xs_table, XS_REQ_POLICY, &f->xc);
}

START_TEST(test_pol_stage_allow)
{
	struct fake	f;

	fake_new(&f, "GET /v1/models HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
	    "api.example.com", "/v1/models", 0);
	ck_assert_int_eq(run(&f), XS_GO);
	ck_assert_str_eq(f.x.x_rule, "p#0");
	ck_assert_int_eq(f.x.x_allowed, 1);
	ck_assert_ptr_eq(f.x.x_rule_p, &rules[0]);
	ck_assert_int_eq(f.x.x_ask, 0);
	ck_assert_str_eq(f.x.x_hint, "");
	http_msg_fini(&f.m);
}
END_TEST

START_TEST(test_pol_stage_deny_hint)
{
	struct fake	f;

	fake_new(&f, "GET /v2/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
	    "api.example.com", "/v2/x", 0);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_DENIED);
	ck_assert_int_eq(f.xc.xc_close, 0);
	ck_assert_int_eq(f.x.x_allowed, 0);
	ck_assert_ptr_null(f.x.x_rule_p);
	ck_assert_str_ne(f.xc.xc_reason, "");
	/* the rule that would allow it, for the audit */
	ck_assert_ptr_nonnull(strstr(f.x.x_hint, "api.example.com"));
	http_msg_fini(&f.m);
}
END_TEST

START_TEST(test_pol_stage_override)
{
	struct fake	f;

	/* judged as the method the framework will act on: DELETE */
	fake_new(&f, "GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n"
	    "X-HTTP-Method-Override: delete\r\n\r\n", "api.example.com",
	    "/v1/a", 0);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_DENIED);
	http_msg_fini(&f.m);
	/* two methods: a bad request, and the connection ends */
	fake_new(&f, "GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n"
	    "X-HTTP-Method-Override: GET\r\nX-HTTP-Method: DELETE\r\n\r\n",
	    "api.example.com", "/v1/a", 0);
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_BAD_REQUEST);
	ck_assert_int_eq(f.xc.xc_close, 1);
	http_msg_fini(&f.m);
}
END_TEST

START_TEST(test_pol_stage_report_ask)
{
	struct fake	f;

	/* mode: report: forwarded, audited would_deny */
	fake_new(&f, "GET /v2/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
	    "api.example.com", "/v2/x", 0);
	f.pol.p_report = 1;
	ck_assert_int_eq(run(&f), XS_GO);
	ck_assert_str_ne(f.x.x_would_deny, "");
	ck_assert_ptr_null(f.x.x_rule_p);
	ck_assert_int_eq(f.x.x_ask, 0);
	http_msg_fini(&f.m);
	/* on_unmatched: ask: on to the ask stage, held */
	fake_new(&f, "GET /v2/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
	    "api.example.com", "/v2/x", 0);
	f.pol.p_unmatched_ask = 1;
	ck_assert_int_eq(run(&f), XS_GO);
	ck_assert_int_eq(f.x.x_ask, 1);
	http_msg_fini(&f.m);
	/* action: ask on the rule that matched */
	fake_new(&f, "GET / HTTP/1.1\r\nHost: ask.example.com\r\n\r\n",
	    "ask.example.com", "/", 0);
	ck_assert_int_eq(run(&f), XS_GO);
	ck_assert_int_eq(f.x.x_ask, 1);
	ck_assert_str_eq(f.x.x_rule, "p#1");
	http_msg_fini(&f.m);
}
END_TEST

START_TEST(test_pol_stage_connect)
{
	struct fake	f;

	fake_new(&f, "CONNECT splice.example.com:443 HTTP/1.1\r\n"
	    "Host: splice.example.com:443\r\n\r\n", "splice.example.com",
	    NULL, 1);
	ck_assert_int_eq(run(&f), XS_GO);
	ck_assert_int_eq(f.xc.xc_intercept, 0);
	ck_assert_int_eq(f.x.x_allowed, 1);
	ck_assert_ptr_null(f.x.x_rule_p);	/* a tunnel has none */
	http_msg_fini(&f.m);
	fake_new(&f, "CONNECT ask.example.com:443 HTTP/1.1\r\n"
	    "Host: ask.example.com:443\r\n\r\n", "ask.example.com", NULL, 1);
	ck_assert_int_eq(run(&f), XS_GO);
	ck_assert_int_eq(f.xc.xc_intercept, 1);
	http_msg_fini(&f.m);
}
END_TEST

START_TEST(test_pol_stage_no_policy)
{
	struct fake	f;

	fake_new(&f, "GET /v1/a HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
	    "api.example.com", "/v1/a", 0);
	f.xc.xc_policy = NULL;
	ck_assert_int_eq(run(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_DENIED);
	ck_assert_str_eq(f.xc.xc_reason, "the sandbox's policy is not in "
	    "the running config");
	ck_assert_str_eq(f.x.x_hint, "");
	http_msg_fini(&f.m);
}
END_TEST

Suite *
suite_stage_pol(void)
{
	Suite	*s = suite_create("stage_policy");
	TCase	*tc = tcase_create("fake exchange");

	tcase_add_test(tc, test_pol_stage_allow);
	tcase_add_test(tc, test_pol_stage_deny_hint);
	tcase_add_test(tc, test_pol_stage_override);
	tcase_add_test(tc, test_pol_stage_report_ask);
	tcase_add_test(tc, test_pol_stage_connect);
	tcase_add_test(tc, test_pol_stage_no_policy);
	suite_add_tcase(s, tc);
	return s;
}
