/* http_write: the heads a proxy writes, on plain buffers (no libevent). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http_msg.h"
#include "http/http_write.h"
#include "util/util.h"
#include "unit.h"

static void
parse(struct http_msg *m, int type, const char *raw)
{
	size_t	used;

	http_msg_init(m, type, 65536);
	ck_assert_int_eq(http_msg_feed(m, raw, strlen(raw), &used),
	    HTTP_FEED_HEAD);
}

/* the head written as a NUL-terminated string, compared whole */
static void
expect(const struct hw_buf *b, const char *want)
{
	ck_assert_msg(b->hb_len == strlen(want) &&
	    memcmp(b->hb_p, want, b->hb_len) == 0, "got [%.*s]\nwant [%s]",
	    (int)b->hb_len, b->hb_p, want);
}

static void
req_init(struct hw_req *q, const char *path, const char *query, char *host,
    size_t hostsz, const char *name, int port, int dflt)
{
	memset(q, 0, sizeof(*q));
	q->hq_method = "GET";
	q->hq_path = path;
	q->hq_query = query;
	q->hq_host = host;
	q->hq_hostlen = http_write_host(host, hostsz, name, port, dflt);
}

START_TEST(test_hw_host)
{
	char	b[64];

	ck_assert_int_eq((int)http_write_host(b, sizeof(b), "a.example", 443,
	    443), 9);
	ck_assert_str_eq(b, "a.example");
	http_write_host(b, sizeof(b), "a.example", 8443, 443);
	ck_assert_str_eq(b, "a.example:8443");
	http_write_host(b, sizeof(b), "::1", 80, 80);
	ck_assert_str_eq(b, "[::1]");
	http_write_host(b, sizeof(b), "::1", 8080, 80);
	ck_assert_str_eq(b, "[::1]:8080");
	/* truncated, still terminated */
	http_write_host(b, 6, "a.example", 80, 80);
	ck_assert_str_eq(b, "a.exa");
}
END_TEST

/* Hop-by-hop, Host, Proxy-*, Content-Length never go; framing is ours. */
START_TEST(test_hw_request_plain)
{
	static const char raw[] = "POST http://a.example:8080/x?y=1 HTTP/1.1\r\n"
	    "Host: a.example:8080\r\nConnection: keep-alive, X-Hop\r\n"
	    "X-Hop: 1\r\nProxy-Authorization: Basic Zm9v\r\n"
	    "Proxy-Foo: 2\r\nX-End:   spaced value  \r\nTE: trailers\r\n"
	    "Content-Length: 3\r\nExpect: 100-continue\r\n\r\n";
	struct http_msg	m;
	struct hw_buf	b = { 0 };
	struct hw_sink	s;
	struct hw_req	q;
	char		host[64];

	parse(&m, HTTP_REQUEST, raw);
	req_init(&q, "/x", "y=1", host, sizeof(host), "a.example", 8080, 80);
	q.hq_method = "POST";
	hw_buf_sink(&b, &s);
	ck_assert_int_eq(http_write_request_head(&m, &q, &s), 0);
	expect(&b, "POST /x?y=1 HTTP/1.1\r\nHost: a.example:8080\r\n"
	    "X-End: spaced value\r\nExpect: 100-continue\r\n"
	    "Content-Length: 3\r\n\r\n");
	hw_buf_fini(&b);
	/* held body: its own length, no Expect */
	q.hq_held = 1;
	q.hq_held_len = 12;
	q.hq_query = "";
	http_write_request_head(&m, &q, &s);
	expect(&b, "POST /x HTTP/1.1\r\nHost: a.example:8080\r\n"
	    "X-End: spaced value\r\nContent-Length: 12\r\n\r\n");
	hw_buf_fini(&b);
	http_msg_fini(&m);
}
END_TEST

START_TEST(test_hw_request_chunked_upgrade)
{
	static const char raw[] = "POST /u HTTP/1.1\r\nHost: h\r\n"
	    "Transfer-Encoding: chunked\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\n\r\n";
	struct http_msg	m;
	struct hw_buf	b = { 0 };
	struct hw_sink	s;
	struct hw_req	q;
	char		host[64];

	parse(&m, HTTP_REQUEST, raw);
	req_init(&q, "/u", NULL, host, sizeof(host), "h", 443, 443);
	q.hq_method = "POST";
	q.hq_upgrade = 1;
	hw_buf_sink(&b, &s);
	ck_assert_int_eq(http_write_request_head(&m, &q, &s), 1);
	expect(&b, "POST /u HTTP/1.1\r\nHost: h\r\n"
	    "Connection: Upgrade\r\nUpgrade: websocket\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n");
	hw_buf_fini(&b);
	http_msg_fini(&m);
}
END_TEST

/* A rewriter as the secrets stage uses one: drop, substitute, add. */
static int
rw_drop(void *arg, const char *name, size_t nlen)
{
	(void)arg;
	return util_strncaseeq(name, nlen, "x-replaced");
}

static void
rw_value(void *arg, const char *v, size_t vlen, const struct hw_sink *out)
{
	const char	*ph = arg, *at;
	size_t		 plen = strlen(ph);

	while ((at = memmem(v, vlen, ph, plen)) != NULL) {
		out->hs_add(out->hs_arg, v, (size_t)(at - v));
		out->hs_add(out->hs_arg, "SECRET", 6);
		vlen -= (size_t)(at - v) + plen;
		v = at + plen;
	}
	out->hs_add(out->hs_arg, v, vlen);
}

static void
rw_fields(void *arg, const struct hw_sink *out)
{
	(void)arg;
	out->hs_add(out->hs_arg, "X-Replaced: new\r\n", 17);
}

static void
rw_fields2(void *arg, const struct hw_sink *out)
{
	(void)arg;
	out->hs_add(out->hs_arg, "X-Second: 2\r\n", 13);
}

START_TEST(test_hw_request_rewrite)
{
	static const char raw[] = "GET /p HTTP/1.1\r\nHost: h\r\n"
	    "Authorization: Bearer PH_1 and PH_1\r\nX-Replaced: old\r\n"
	    "X-Keep: PH_1\r\n\r\n";
	struct hw_rewrite rw = { rw_drop, rw_value, rw_fields, (void *)"PH_1" };
	struct hw_rewrite rw2 = { NULL, NULL, rw_fields2, NULL };
	struct http_msg	m;
	struct hw_buf	b = { 0 };
	struct hw_sink	s;
	struct hw_req	q;
	char		host[64];

	parse(&m, HTTP_REQUEST, raw);
	req_init(&q, "/p", NULL, host, sizeof(host), "h", 80, 80);
	q.hq_rw[q.hq_nrw++] = &rw;
	q.hq_rw[q.hq_nrw++] = &rw2;
	hw_buf_sink(&b, &s);
	http_write_request_head(&m, &q, &s);
	expect(&b, "GET /p HTTP/1.1\r\nHost: h\r\n"
	    "Authorization: Bearer SECRET and SECRET\r\nX-Keep: SECRET\r\n"
	    "X-Replaced: new\r\nX-Second: 2\r\n\r\n");
	hw_buf_fini(&b);
	ck_assert_ptr_null(b.hb_p);
	http_msg_fini(&m);
}
END_TEST

START_TEST(test_hw_response)
{
	static const char raw[] = "HTTP/1.1 200 Fine Thanks\r\n"
	    "Content-Length: 5\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n"
	    "Set-Cookie: a=b\r\nKeep-Alive: 5\r\n\r\n";
	struct http_msg	m;
	struct hw_buf	b = { 0 };
	struct hw_sink	s;
	struct hw_resp	p;

	parse(&m, HTTP_RESPONSE, raw);
	hw_buf_sink(&b, &s);
	http_write_status_fields(&m, &s);
	memset(&p, 0, sizeof(p));
	p.hp_id = "req-1";
	p.hp_framing = m.hm_framing;
	p.hp_length = m.hm_content_length;
	ck_assert_int_eq(http_write_response_end(&p, &s), 0);
	expect(&b, "HTTP/1.1 200 Fine Thanks\r\nSet-Cookie: a=b\r\n"
	    "X-Airlock-Request-Id: req-1\r\nContent-Length: 5\r\n\r\n");
	hw_buf_fini(&b);

	/* re-framed chunked (redaction), closing */
	p.hp_framing = HTTP_BODY_CHUNKED;
	p.hp_close = 1;
	ck_assert_int_eq(http_write_response_end(&p, &s), HW_RECHUNK);
	expect(&b, "X-Airlock-Request-Id: req-1\r\n"
	    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
	hw_buf_fini(&b);

	/* HTTP/1.0 client: close-delimited */
	p.hp_close = 0;
	p.hp_http10 = 1;
	ck_assert_int_eq(http_write_response_end(&p, &s), HW_CLOSE_DELIM);
	expect(&b, "X-Airlock-Request-Id: req-1\r\nConnection: close\r\n\r\n");
	hw_buf_fini(&b);

	/* HTTP/1.0 client, known length: keep-alive said */
	p.hp_framing = HTTP_BODY_LENGTH;
	ck_assert_int_eq(http_write_response_end(&p, &s), 0);
	expect(&b, "X-Airlock-Request-Id: req-1\r\nContent-Length: 5\r\n"
	    "Connection: keep-alive\r\n\r\n");
	hw_buf_fini(&b);

	/* interim: nothing of ours */
	p.hp_id = NULL;
	ck_assert_int_eq(http_write_response_end(&p, &s), 0);
	expect(&b, "\r\n");
	hw_buf_fini(&b);
	http_msg_fini(&m);
}
END_TEST

START_TEST(test_hw_response_upgrade)
{
	static const char raw[] = "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	    "Sec-WebSocket-Accept: abc\r\n\r\n";
	struct http_msg	m;
	struct hw_buf	b = { 0 };
	struct hw_sink	s;
	struct hw_resp	p;
	size_t		used;

	http_msg_init(&m, HTTP_RESPONSE, 65536);
	ck_assert_int_eq(http_msg_feed(&m, raw, strlen(raw), &used),
	    HTTP_FEED_UPGRADE);
	hw_buf_sink(&b, &s);
	http_write_status_fields(&m, &s);
	memset(&p, 0, sizeof(p));
	p.hp_id = "r";
	p.hp_upgrade = 1;
	p.hp_close = 1;		/* the upgrade wins */
	http_write_response_end(&p, &s);
	expect(&b, "HTTP/1.1 101 Switching Protocols\r\n"
	    "Sec-WebSocket-Accept: abc\r\nX-Airlock-Request-Id: r\r\n"
	    "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
	hw_buf_fini(&b);
	http_msg_fini(&m);
}
END_TEST

/* A large head grows the buffer without losing a byte. */
START_TEST(test_hw_buf_grow)
{
	struct hw_buf	b = { 0 };
	struct hw_sink	s;
	char		chunk[100];
	int		i;

	memset(chunk, 'x', sizeof(chunk));
	hw_buf_sink(&b, &s);
	for (i = 0; i < 100; i++) {
		chunk[0] = (char)('0' + i % 10);
		s.hs_add(s.hs_arg, chunk, sizeof(chunk));
	}
	ck_assert_uint_eq(b.hb_len, 10000);
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(b.hb_p[i * 100], '0' + i % 10);
	hw_buf_fini(&b);
	ck_assert_uint_eq(b.hb_len, 0);
}
END_TEST

/*
 * The gathering sink hands bytes on in order whatever the pieces' sizes
 * (small, one that fills it, one larger than its storage), hands on
 * nothing before a flush while there is room, and wipes what it held.
 */
START_TEST(test_hw_gather)
{
	struct hw_buf	 b = { 0 };
	struct hw_gather g;
	struct hw_sink	 to, s;
	char		 big[3000], want[4096];
	size_t		 i, wlen = 0, small;

	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	memset(&g, 'z', sizeof(g));
	hw_buf_sink(&b, &to);
	hw_gather_sink(&g, &to, &s);
	for (i = 0; i < 10; i++) {
		s.hs_add(s.hs_arg, "head: ", 6);
		memcpy(want + wlen, "head: ", 6);
		wlen += 6;
	}
	ck_assert_uint_eq(b.hb_len, 0);		/* still gathered */
	small = sizeof(g.hg_buf) - g.hg_len - 1;
	s.hs_add(s.hs_arg, big, small);		/* fits, one byte to spare */
	memcpy(want + wlen, big, small);
	wlen += small;
	ck_assert_uint_eq(b.hb_len, 0);
	s.hs_add(s.hs_arg, "XY", 2);		/* does not fit: flushed */
	memcpy(want + wlen, "XY", 2);
	wlen += 2;
	ck_assert_uint_eq(b.hb_len, wlen - 2);
	s.hs_add(s.hs_arg, big, 2000);		/* larger than the storage */
	ck_assert_uint_eq(b.hb_len, wlen + 2000);
	ck_assert_uint_eq(g.hg_len, 0);
	hw_gather_flush(&g);			/* nothing left: a no-op */
	ck_assert_uint_eq(b.hb_len, wlen + 2000);
	ck_assert_mem_eq(b.hb_p, want, wlen);
	ck_assert_mem_eq(b.hb_p + wlen, big, 2000);
	s.hs_add(s.hs_arg, "secret", 6);
	hw_gather_flush(&g);
	ck_assert_uint_eq(b.hb_len, wlen + 2006);
	/* every byte it held was wiped (all but the last one was used) */
	for (i = 0; i < sizeof(g.hg_buf) - 1; i++)
		ck_assert_int_eq(g.hg_buf[i], 0);
	hw_buf_fini(&b);
}
END_TEST

Suite *
suite_http_write(void)
{
	Suite	*s = suite_create("http_write");
	TCase	*tc = tcase_create("write");

	tcase_add_test(tc, test_hw_host);
	tcase_add_test(tc, test_hw_request_plain);
	tcase_add_test(tc, test_hw_request_chunked_upgrade);
	tcase_add_test(tc, test_hw_request_rewrite);
	tcase_add_test(tc, test_hw_response);
	tcase_add_test(tc, test_hw_response_upgrade);
	tcase_add_test(tc, test_hw_buf_grow);
	tcase_add_test(tc, test_hw_gather);
	suite_add_tcase(s, tc);
	return s;
}
