/* The budget's event-stream filter, streamed-text counting, clamp edits. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "budget/bud.h"
#include "cfg/cfg.h"
#include "unit.h"

struct sink {
	char	buf[4096];
	size_t	len;
};

static int
put(void *arg, const char *p, size_t n, int whole)
{
	struct sink	*s = arg;

	(void)whole;
	ck_assert_uint_le(s->len + n, sizeof(s->buf));
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	return 1;
}

static int
keep(void *arg, const char *ev, size_t n, int whole)
{
	if (whole && sse_usage_only(ev, n))
		return 0;
	return put(arg, ev, n, whole);
}

#define EV1 "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":" \
	    "{\"content\":\"Hello there\"}}]}"
#define EVU "data: {\"id\":\"c\",\"choices\":[],\"usage\":" \
	    "{\"prompt_tokens\":3,\"completion_tokens\":2}}"

/* The usage-only chunk is left out, the rest byte for byte, whatever the
 * split and line ends. */
START_TEST(test_strip_every_split)
{
	const char	*eol[] = { "\n", "\r\n", "\r" };
	char		 in[1024], want[1024];
	size_t		 n, i, e;

	for (e = 0; e < 3; e++) {
		snprintf(in, sizeof(in), ": keep-alive%s%s" EV1 "%s%s" EVU
		    "%s%sdata: [DONE]%s%s", eol[e], eol[e], eol[e], eol[e],
		    eol[e], eol[e], eol[e], eol[e]);
		snprintf(want, sizeof(want), ": keep-alive%s%s" EV1 "%s%s"
		    "data: [DONE]%s%s", eol[e], eol[e], eol[e], eol[e], eol[e],
		    eol[e]);
		n = strlen(in);
		for (i = 0; i <= n; i++) {
			struct sse_filt	*f = sse_filt_new(1 << 20);
			struct sink	 s = { .len = 0 };

			(void)sse_filt_feed(f, in, i, keep, &s);
			(void)sse_filt_feed(f, in + i, n - i, keep, &s);
			sse_filt_flush(f, keep, &s);
			ck_assert_msg(s.len == strlen(want) &&
			    memcmp(s.buf, want, s.len) == 0,
			    "eol %zu split %zu: %.*s", e, i, (int)s.len, s.buf);
			ck_assert(sse_filt_at_boundary(f));
			sse_filt_free(f);
		}
	}
}
END_TEST

START_TEST(test_usage_only)
{
	ck_assert(sse_usage_only(EVU "\n\n", strlen(EVU) + 2));
	ck_assert(!sse_usage_only(EV1 "\n\n", strlen(EV1) + 2));
	ck_assert(!sse_usage_only("data: [DONE]\n\n", 14));
	ck_assert(!sse_usage_only("data: {\"choices\":[],\"x\":1}\n\n", 29));
	ck_assert(!sse_usage_only("data: {\"choices\":[1],\"usage\":{}}\n\n",
	    35));
}
END_TEST

/* A partial event is held; a bound passed lets it through (no boundary). */
START_TEST(test_hold_bound)
{
	struct sse_filt	*f = sse_filt_new(16);
	struct sink	 s = { .len = 0 };

	(void)sse_filt_feed(f, "data: abc", 9, put, &s);
	ck_assert_uint_eq(s.len, 0);
	ck_assert(sse_filt_at_boundary(f));
	(void)sse_filt_feed(f, "defghijklmnop", 13, put, &s);
	ck_assert_uint_eq(s.len, 22);
	ck_assert(!sse_filt_at_boundary(f));
	(void)sse_filt_feed(f, "\n\n", 2, put, &s);
	ck_assert(sse_filt_at_boundary(f));
	ck_assert_uint_eq(s.len, 24);
	sse_filt_free(f);
}
END_TEST

START_TEST(test_cut_event)
{
	char	ev[1024];

	sse_cut_event(CFG_METER_OPENAI, "usd cap", "rid", ev, sizeof(ev));
	ck_assert(strncmp(ev, "data: {\"error\":{", 16) == 0);
	ck_assert(strstr(ev, "\n\ndata: [DONE]\n\n") != NULL);
	sse_cut_event(CFG_METER_ANTHROPIC, "usd cap", "rid", ev, sizeof(ev));
	ck_assert(strncmp(ev, "event: error\ndata: {\"type\":\"error\"", 34)
	    == 0);
	ck_assert(strstr(ev, "\"budget_exceeded\"") != NULL);
	sse_cut_event(CFG_METER_NONE, "usd cap", "rid", ev, sizeof(ev));
	ck_assert_str_eq(ev, "");
}
END_TEST

/* Streamed text is counted whatever the split: bytes >= tokens. */
START_TEST(test_meter_text)
{
	const char	*oa = EV1 "\n\n" EV1 "\n\n";
	const char	*an = "event: content_block_delta\ndata: {\"type\":"
			    "\"content_block_delta\",\"index\":0,\"delta\":"
			    "{\"type\":\"text_delta\",\"text\":\"Hi you\"}}\n\n";
	struct usage	 u;
	uint64_t	 text;
	size_t		 i, n = strlen(oa);

	for (i = 0; i <= n; i++) {
		struct meter	*m = meter_new(METER_OPENAI, 1, 0);

		meter_count_text(m);
		meter_feed(m, oa, i);
		meter_feed(m, oa + i, n - i);
		ck_assert_int_eq(meter_peek(m, &u, &text), 0);
		ck_assert_uint_eq(text, 22);
		ck_assert_int_eq(u.u_found, 0);
		meter_free(m);
	}
	{
		struct meter	*m = meter_new(METER_ANTHROPIC, 1, 0);

		meter_count_text(m);
		meter_feed(m, an, strlen(an));
		ck_assert_int_eq(meter_peek(m, &u, &text), 0);
		ck_assert_uint_eq(text, 6);
		meter_free(m);
	}
	{
		struct meter	*m = meter_new(METER_OPENAI, 1, 0);
		const char	*js = "{\"choices\":[{\"message\":{\"content\""
		    ":\"hello\"}}]}";

		/* a stream counts unasked (a stale report, meter_finish) */
		meter_feed(m, oa, n);
		ck_assert_int_eq(meter_peek(m, &u, &text), 0);
		ck_assert_uint_eq(text, 22);
		meter_free(m);
		/* a whole OpenAI body is one report: not counted */
		m = meter_new(METER_OPENAI, 0, 0);
		meter_feed(m, js, strlen(js));
		ck_assert_int_eq(meter_peek(m, &u, &text), 0);
		ck_assert_uint_eq(text, 0);
		meter_free(m);
	}
}
END_TEST

static void
apply(const char *body, struct req_edits *ed, char *out, size_t outsz)
{
	size_t	i, at = 0, o = 0;

	ck_assert_int_eq(req_edits_sort(ed), 0);
	for (i = 0; i < ed->re_n; i++) {
		memcpy(out + o, body + at, ed->re[i].re_from - at);
		o += ed->re[i].re_from - at;
		memcpy(out + o, ed->re[i].re_text, strlen(ed->re[i].re_text));
		o += strlen(ed->re[i].re_text);
		at = ed->re[i].re_to;
	}
	ck_assert_uint_lt(o + strlen(body + at), outsz);
	strcpy(out + o, body + at);
}

START_TEST(test_clamp_edits)
{
	static const struct {
		const char	*body;
		enum req_api	 api;
		int		 openai;
		const char	*want;
	} c[] = {
		{ "{\"model\":\"m\",\"max_tokens\":9000}", REQ_API_CHAT, 1,
		    "{\"model\":\"m\",\"max_tokens\":42}" },
		{ "{\"max_tokens\" : null, \"max_completion_tokens\":5}",
		    REQ_API_CHAT, 1,
		    "{\"max_tokens\":42, \"max_completion_tokens\":42}" },
		{ "{\"model\":\"m\",\"stream\":true}", REQ_API_CHAT, 1,
		    "{\"model\":\"m\",\"stream\":true,\"stream_options\":"
		    "{\"include_usage\":true},\"max_completion_tokens\":42}" },
		{ "{\"input\":\"x\"}", REQ_API_RESPONSES, 0,
		    "{\"input\":\"x\",\"max_output_tokens\":42}" },
		{ "{}", REQ_API_COMPLETIONS, 0, "{\"max_tokens\":42}" },
		{ "{\"contents\":[],\"generationConfig\":{}}", REQ_API_GEMINI,
		    0, "{\"contents\":[],\"generationConfig\":"
		    "{\"maxOutputTokens\":42}}" },
		{ "{\"generation_config\":{\"temperature\":1}}",
		    REQ_API_GEMINI, 0, "{\"generation_config\":{\"temperature\""
		    ":1,\"max_output_tokens\":42}}" },
		{ "{\"contents\":[]}", REQ_API_GEMINI, 0, "{\"contents\":[],"
		    "\"generationConfig\":{\"maxOutputTokens\":42}}" },
	};
	struct req_facts	 rf;
	struct req_edits	 ed;
	char			 out[512];
	size_t			 i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ck_assert_int_eq(req_scan(c[i].body, strlen(c[i].body),
		    c[i].openai, &rf), 0);
		memset(&ed, 0, sizeof(ed));
		req_edits_usage(&rf, &ed);
		ck_assert_int_eq(req_edits_clamp(&rf, c[i].api, 42, &ed), 0);
		apply(c[i].body, &ed, out, sizeof(out));
		ck_assert_msg(strcmp(out, c[i].want) == 0, "case %zu: %s", i,
		    out);
	}
	ck_assert_int_eq(req_scan("{\"generationConfig\":1}", 22, 0, &rf), 0);
	memset(&ed, 0, sizeof(ed));
	ck_assert_int_eq(req_edits_clamp(&rf, REQ_API_GEMINI, 42, &ed), -1);
	ck_assert_int_eq(req_edits_clamp(&rf, REQ_API_OTHER, 42, &ed), -1);
	ck_assert_int_eq(req_api_of("/v1/chat/completions"), REQ_API_CHAT);
	ck_assert_int_eq(req_api_of("/v1/completions"), REQ_API_COMPLETIONS);
	ck_assert_int_eq(req_api_of("/v1/embeddings"), REQ_API_OTHER);
	ck_assert_int_eq(req_free_path("GET", "/v1/chat/completions"), 1);
	ck_assert_int_eq(req_free_path("POST", "/v1/messages/count_tokens"),
	    1);
	ck_assert_int_eq(req_free_path("POST", "/v1/messages"), 0);
}
END_TEST

Suite *
suite_sse_filt(void)
{
	Suite	*s = suite_create("sse_filt");
	TCase	*tc = tcase_create("all");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_strip_every_split);
	tcase_add_test(tc, test_usage_only);
	tcase_add_test(tc, test_hold_bound);
	tcase_add_test(tc, test_cut_event);
	tcase_add_test(tc, test_meter_text);
	tcase_add_test(tc, test_clamp_edits);
	suite_add_tcase(s, tc);
	return s;
}
