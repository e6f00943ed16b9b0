/* The MCP tool policy: the judge of request bodies, the tools/list filter
 * (JSON and event stream, split at every byte). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <event2/buffer.h>

#include "cfg/cfg.h"
#include "policy/pol_mcp.h"
#include "unit.h"

static char *tools[] = { "get_*", "echo" };
static char *deny[] = { "get_secret" };
static const struct cfg_mcp pol = { tools, 2, deny, 1 };

static char *
str_of(struct evbuffer *b)
{
	size_t	n = evbuffer_get_length(b);
	char	*s = malloc(n + 1);

	evbuffer_remove(b, s, n);
	s[n] = '\0';
	return s;
}

START_TEST(test_allowed)
{
	ck_assert(mcp_tool_allowed(&pol, "echo"));
	ck_assert(mcp_tool_allowed(&pol, "get_weather"));
	ck_assert(!mcp_tool_allowed(&pol, "get_secret"));
	ck_assert(!mcp_tool_allowed(&pol, "delete_all"));
}
END_TEST

#define CALL(id, t) "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":" \
	"\"tools/call\",\"params\":{\"name\":\"" t "\",\"arguments\":{}}}"

static enum mcp_verdict
judge(const char *body, int sse, struct mcp_seen *seen, char **ans)
{
	struct evbuffer	*b = evbuffer_new();
	enum mcp_verdict v;

	v = mcp_judge(&pol, body, strlen(body), sse, "req1", seen, b);
	*ans = str_of(b);
	evbuffer_free(b);
	return v;
}

START_TEST(test_judge)
{
	struct mcp_seen	 s;
	char		*a;

	ck_assert_int_eq(judge(CALL("1", "echo"), 0, &s, &a), MCP_PASS);
	ck_assert_str_eq(s.ms_method, "tools/call");
	ck_assert_str_eq(s.ms_tool, "echo");
	ck_assert_str_eq(a, "");
	free(a);
	ck_assert_int_eq(judge(CALL("7", "get_secret"), 0, &s, &a),
	    MCP_REFUSE);
	ck_assert_str_eq(s.ms_tool, "get_secret");
	ck_assert_ptr_nonnull(strstr(a, "\"id\":7"));
	ck_assert_ptr_nonnull(strstr(a, "\"code\":-32001"));
	ck_assert_ptr_nonnull(strstr(a, "\"request_id\":\"req1\""));
	ck_assert_ptr_null(strstr(a, "get_secret"));	/* never echoed */
	ck_assert(a[0] == '{');
	free(a);
	/* the event stream the client asked for */
	ck_assert_int_eq(judge(CALL("\"x\"", "nope"), 1, &s, &a), MCP_REFUSE);
	ck_assert(strncmp(a, "event: message\ndata: {", 22) == 0);
	ck_assert_ptr_nonnull(strstr(a, "\"id\":\"x\""));
	ck_assert(strcmp(a + strlen(a) - 2, "\n\n") == 0);
	free(a);
	/* initialize, notifications, responses pass */
	ck_assert_int_eq(judge("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":"
	    "\"initialize\",\"params\":{}}", 0, &s, &a), MCP_PASS);
	ck_assert_str_eq(s.ms_method, "initialize");
	free(a);
	ck_assert_int_eq(judge("{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/initialized\"}", 0, &s, &a), MCP_PASS);
	free(a);
	ck_assert_int_eq(judge("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}",
	    0, &s, &a), MCP_PASS);
	free(a);
	ck_assert_int_eq(judge("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
	    "\"tools/list\"}", 0, &s, &a), MCP_PASS);
	ck_assert_int_eq(s.ms_list, 1);
	free(a);
	/* no name, not JSON, trailing bytes, an empty batch: not guessed */
	ck_assert_int_eq(judge("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
	    "\"tools/call\",\"params\":{}}", 0, &s, &a), MCP_REFUSE);
	free(a);
	ck_assert_int_eq(judge("{\"jsonrpc\":", 0, &s, &a), MCP_UNREADABLE);
	free(a);
	ck_assert_int_eq(judge(CALL("1", "echo") "x", 0, &s, &a),
	    MCP_UNREADABLE);
	free(a);
	ck_assert_int_eq(judge("[]", 0, &s, &a), MCP_UNREADABLE);
	free(a);
	ck_assert_int_eq(judge("", 0, &s, &a), MCP_UNREADABLE);
	free(a);
}
END_TEST

START_TEST(test_batch)
{
	struct mcp_seen	 s;
	char		*a;

	ck_assert_int_eq(judge("[" CALL("1", "echo") "," CALL("2",
	    "get_weather") "]", 0, &s, &a), MCP_PASS);
	ck_assert_str_eq(s.ms_method, "batch");
	ck_assert_str_eq(s.ms_tool, "echo");
	free(a);
	/* one refused: every request of it answered, none forwarded */
	ck_assert_int_eq(judge("[" CALL("1", "echo") "," CALL("2",
	    "delete_all") ",{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}"
	    "]", 0, &s, &a), MCP_REFUSE);
	ck_assert_int_eq(s.ms_denied, 1);
	ck_assert_str_eq(s.ms_tool, "delete_all");
	ck_assert(a[0] == '[');
	ck_assert_ptr_nonnull(strstr(a, "\"id\":1"));
	ck_assert_ptr_nonnull(strstr(a, "\"id\":2"));
	ck_assert_ptr_nonnull(strstr(a, "refused whole"));
	free(a);
}
END_TEST

#define LIST "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[" \
	"{\"name\":\"echo\",\"inputSchema\":{}},"		\
	"{\"name\":\"get_secret\"},{\"name\":\"delete_all\"},"	\
	"{\"name\":\"get_weather\",\"description\":\"a/b\"},{\"x\":1}]}}"

static void
check_list(const char *out, size_t want_tools)
{
	size_t		 n = 0;
	const char	*p;

	for (p = out; (p = strstr(p, "\"name\":")) != NULL; p++)
		n++;
	ck_assert_uint_eq(n, want_tools);
	ck_assert_ptr_nonnull(strstr(out, "\"echo\""));
	ck_assert_ptr_nonnull(strstr(out, "\"get_weather\""));
	ck_assert_ptr_null(strstr(out, "get_secret"));
	ck_assert_ptr_null(strstr(out, "delete_all"));
}

/* <body> through a filter in two pieces split at <at>. */
static char *
filt_split(const char *body, int sse, size_t at, int *rc)
{
	struct mcp_filt	*f = mcp_filt_new(&pol, sse, 4096);
	struct evbuffer	*out = evbuffer_new();
	size_t		 n = strlen(body);
	char		*s;

	*rc = mcp_filt_feed(f, body, at, out);
	if (*rc == 0)
		*rc = mcp_filt_feed(f, body + at, n - at, out);
	if (*rc == 0)
		*rc = mcp_filt_end(f, out);
	s = str_of(out);
	evbuffer_free(out);
	mcp_filt_free(f);
	return s;
}

START_TEST(test_filter_json_every_split)
{
	size_t	 at, n = strlen(LIST);
	char	*s;
	int	 rc;

	for (at = 0; at <= n; at++) {
		s = filt_split(LIST, 0, at, &rc);
		ck_assert_int_eq(rc, 0);
		check_list(s, 2);
		ck_assert_ptr_nonnull(strstr(s, "\"a/b\""));
		free(s);
	}
	/* nothing to leave out: the bytes as they came */
	s = filt_split(CALL("1", "echo"), 0, 5, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(s, CALL("1", "echo"));
	free(s);
	/* not JSON: nothing goes out */
	s = filt_split("{\"result\":", 0, 3, &rc);
	ck_assert_int_eq(rc, -1);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

#define SSE_BODY "event: message\r\nid: 9\r\ndata: " LIST "\r\n\r\n" \
	": ping\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":" \
	"\"notifications/progress\"}\n\n"

START_TEST(test_filter_sse_every_split)
{
	size_t	 at, n = strlen(SSE_BODY);
	char	*s;
	int	 rc;

	for (at = 0; at <= n; at++) {
		s = filt_split(SSE_BODY, 1, at, &rc);
		ck_assert_int_eq(rc, 0);
		check_list(s, 2);
		ck_assert(strncmp(s, "event: message\nid: 9\ndata: {", 28) == 0);
		ck_assert_ptr_nonnull(strstr(s, "}\n\n"));
		/* the events after it as they came */
		ck_assert_ptr_nonnull(strstr(s, ": ping\n\nevent: message\n"
		    "data: {\"jsonrpc\":\"2.0\",\"method\":"
		    "\"notifications/progress\"}\n\n"));
		free(s);
	}
	/* an event's data split over two data lines */
	s = filt_split("data: {\"result\":\ndata: {\"tools\":[{\"name\":"
	    "\"x\"}]}}\n\n", 1, 10, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(s, "data: {\"result\":{\"tools\":[]}}\n\n");
	free(s);
	/* a data line that is not JSON: cut */
	s = filt_split("data: nope\n\n", 1, 3, &rc);
	ck_assert_int_eq(rc, -1);
	free(s);
}
END_TEST

START_TEST(test_filter_bound)
{
	struct mcp_filt	*f = mcp_filt_new(&pol, 0, 16);
	struct evbuffer	*out = evbuffer_new();

	ck_assert_int_eq(mcp_filt_feed(f, LIST, strlen(LIST), out), -1);
	ck_assert_int_eq(mcp_filt_end(f, out), -1);
	ck_assert_uint_eq(evbuffer_get_length(out), 0);
	mcp_filt_free(f);
	f = mcp_filt_new(&pol, 1, 16);
	ck_assert_int_eq(mcp_filt_feed(f, "data: " LIST, strlen(LIST) + 6,
	    out), -1);
	ck_assert_uint_eq(evbuffer_get_length(out), 0);
	mcp_filt_free(f);
	evbuffer_free(out);
}
END_TEST

Suite *
suite_mcp(void)
{
	Suite	*s = suite_create("mcp");
	TCase	*tc = tcase_create("all");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_allowed);
	tcase_add_test(tc, test_judge);
	tcase_add_test(tc, test_batch);
	tcase_add_test(tc, test_filter_json_every_split);
	tcase_add_test(tc, test_filter_sse_every_split);
	tcase_add_test(tc, test_filter_bound);
	suite_add_tcase(s, tc);
	return s;
}
