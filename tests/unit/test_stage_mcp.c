/*
 * The MCP stage (policy/pol_mcp_stage.c) driven by a fake exchange (no
 * connection, no event loop): an mcp rule's POST held, its body judged at
 * req_ready (a tool the rule allows goes on, another is refused with
 * JSON-RPC errors as the stage's own answer, an unreadable body 400), a
 * tools/list result filtered as it streams, the audit fields at done.
 */
#include "config.h"

#include <string.h>

#include <event2/buffer.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "policy/pol_mcp.h"
#include "unit.h"

static char		*tools[] = { "read_*" };
static struct cfg_mcp	 mcp = { .m_tools = tools, .m_ntools = 1 };
static struct cfg_rule	 rule = { .r_host = "mcp.example", .r_mcp = &mcp };

struct fake {
	struct xs_call	 xc;
	struct xchg	 x;
	struct cfg	 cfg;
	struct http_msg	 req, resp;
	struct evbuffer	*body;
};

static void
fake_new(struct fake *f, const char *method, const char *accept)
{
	char	raw[512];
	size_t	used;

	memset(f, 0, sizeof(*f));
	f->cfg.c_limits.l_body_bytes = 65536;
	snprintf(raw, sizeof(raw), "%s /mcp HTTP/1.1\r\nHost: mcp.example\r\n"
	    "Accept: %s\r\nContent-Length: 0\r\n\r\n", method, accept);
	http_msg_init(&f->req, HTTP_REQUEST, 65536);
	ck_assert_int_eq(http_msg_feed(&f->req, raw, strlen(raw), &used),
	    HTTP_FEED_HEAD);
	http_msg_init(&f->resp, HTTP_RESPONSE, 65536);
	snprintf(f->x.x_method, sizeof(f->x.x_method), "%s", method);
	snprintf(f->x.x_id, sizeof(f->x.x_id), "x1");
	f->x.x_rule_p = &rule;
	f->body = evbuffer_new();
	f->xc.xc_x = &f->x;
	f->xc.xc_cfg = &f->cfg;
	f->xc.xc_req = &f->req;
	f->xc.xc_resp = &f->resp;
	f->xc.xc_body = &f->body;
}

static void
fake_free(struct fake *f)
{
	http_msg_fini(&f->req);
	http_msg_fini(&f->resp);
	evbuffer_free(f->body);
	if (f->x.x_answer != NULL)
		evbuffer_free(f->x.x_answer);
	mcp_filt_free(f->x.x_mcp.m_filt);
}

/* Head then ready with <body> held. */
static enum xs_verdict
ready(struct fake *f, const char *body)
{
	ck_assert_int_eq(mcp_stage.xs_req_head(&f->xc), XS_HOLD);
	ck_assert_uint_eq(f->xc.xc_hold, 65536);
	evbuffer_add(f->body, body, strlen(body));
	return mcp_stage.xs_req_ready(&f->xc);
}

START_TEST(test_mcp_stage_not_held)
{
	struct fake	f;

	fake_new(&f, "GET", "text/event-stream");
	ck_assert_int_eq(mcp_stage.xs_req_head(&f.xc), XS_GO);
	ck_assert_int_eq(mcp_stage.xs_req_ready(&f.xc), XS_GO);
	fake_free(&f);
	fake_new(&f, "POST", "application/json");
	f.x.x_rule_p = NULL;		/* not an mcp rule */
	ck_assert_int_eq(mcp_stage.xs_req_head(&f.xc), XS_GO);
	fake_free(&f);
}
END_TEST

START_TEST(test_mcp_stage_call_allowed)
{
	struct fake	 f;
	struct aud_rec	 r;

	fake_new(&f, "POST", "application/json, text/event-stream");
	ck_assert_int_eq(ready(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	    "\"tools/call\",\"params\":{\"name\":\"read_file\"}}"), XS_GO);
	ck_assert_ptr_null(f.x.x_answer);
	memset(&r, 0, sizeof(r));
	f.xc.xc_rec = &r;
	mcp_stage.xs_done(&f.xc);
	ck_assert_str_eq(r.ar_mcp_method, "tools/call");
	ck_assert_str_eq(r.ar_mcp_tool, "read_file");
	fake_free(&f);
}
END_TEST

START_TEST(test_mcp_stage_call_refused)
{
	struct fake	 f;
	char		 ans[512];
	size_t		 n;

	fake_new(&f, "POST", "application/json");
	ck_assert_int_eq(ready(&f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":"
	    "\"tools/call\",\"params\":{\"name\":\"delete_file\"}}"),
	    XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_MCP_TOOL_DENIED);
	ck_assert_str_eq(f.xc.xc_reason, "mcp: tools/call of a tool the rule "
	    "does not allow");
	/* the stage's own answer: a JSON-RPC error for id 7 */
	ck_assert_ptr_nonnull(f.x.x_answer);
	ck_assert_int_eq(f.x.x_answer_status, 200);
	ck_assert_str_eq(f.x.x_answer_type, "application/json");
	n = evbuffer_copyout(f.x.x_answer, ans, sizeof(ans) - 1);
	ans[n] = '\0';
	ck_assert_msg(strstr(ans, "\"id\":7") != NULL &&
	    strstr(ans, "\"error\"") != NULL, "answer: %s", ans);
	ck_assert_str_eq(f.x.x_mcp.m_tool, "delete_file");
	fake_free(&f);
}
END_TEST

START_TEST(test_mcp_stage_unreadable)
{
	struct fake	f;

	fake_new(&f, "POST", "application/json");
	ck_assert_int_eq(ready(&f, "not json"), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_MCP_UNREADABLE);
	ck_assert_int_eq(aud_reason(f.xc.xc_why)->ri_status, 400);
	ck_assert_ptr_null(f.x.x_answer);
	fake_free(&f);
}
END_TEST

/* tools/list: asked unencoded, the result filtered to allowed tools. */
START_TEST(test_mcp_stage_list_filtered)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: "
	    "application/json\r\nContent-Length: 10\r\n\r\n";
	static const char res[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":"
	    "{\"tools\":[{\"name\":\"read_file\"},{\"name\":\"rm_rf\"}]}}";
	struct evbuffer	*in = evbuffer_new(), *out = evbuffer_new();
	struct fake	 f;
	char		 got[512];
	size_t		 used, n;

	fake_new(&f, "POST", "application/json");
	ck_assert_int_eq(ready(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
	    "\"tools/list\"}"), XS_GO);
	ck_assert_int_eq(mcp_stage.xs_req_drop(&f.xc, "Accept-Encoding", 15),
	    1);
	ck_assert_int_eq(mcp_stage.xs_req_drop(&f.xc, "Accept", 6), 0);
	ck_assert_int_eq(http_msg_feed(&f.resp, head, strlen(head), &used),
	    HTTP_FEED_HEAD);
	ck_assert_int_eq(mcp_stage.xs_resp_head(&f.xc), XS_GO);
	ck_assert_int_eq(f.xc.xc_reframe, 1);
	evbuffer_add(in, res, strlen(res));
	f.xc.xc_eof = 1;
	ck_assert_int_eq(mcp_stage.xs_resp_body(&f.xc, in, out), XS_GO);
	n = evbuffer_copyout(out, got, sizeof(got) - 1);
	got[n] = '\0';
	ck_assert_msg(strstr(got, "read_file") != NULL &&
	    strstr(got, "rm_rf") == NULL, "filtered: %s", got);
	evbuffer_free(in);
	evbuffer_free(out);
	fake_free(&f);
}
END_TEST

START_TEST(test_mcp_stage_list_encoded)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: "
	    "application/json\r\nContent-Encoding: gzip\r\n"
	    "Content-Length: 10\r\n\r\n";
	struct fake	f;
	size_t		used;

	fake_new(&f, "POST", "application/json");
	ck_assert_int_eq(ready(&f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
	    "\"tools/list\"}"), XS_GO);
	ck_assert_int_eq(http_msg_feed(&f.resp, head, strlen(head), &used),
	    HTTP_FEED_HEAD);
	ck_assert_int_eq(mcp_stage.xs_resp_head(&f.xc), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_UPSTREAM_UNREACHABLE);
	ck_assert_str_eq(f.xc.xc_reason, "mcp: an encoded tools/list result "
	    "cannot be filtered");
	fake_free(&f);
}
END_TEST

Suite *
suite_stage_mcp(void)
{
	Suite	*s = suite_create("stage_mcp");
	TCase	*tc = tcase_create("fake exchange");

	tcase_add_test(tc, test_mcp_stage_not_held);
	tcase_add_test(tc, test_mcp_stage_call_allowed);
	tcase_add_test(tc, test_mcp_stage_call_refused);
	tcase_add_test(tc, test_mcp_stage_unreadable);
	tcase_add_test(tc, test_mcp_stage_list_filtered);
	tcase_add_test(tc, test_mcp_stage_list_encoded);
	suite_add_tcase(s, tc);
	return s;
}
