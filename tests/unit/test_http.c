/* http_msg: llhttp glue, strict framing, header model. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_msg.h"
#include "unit.h"

struct http_case {
	const char	*name;
	const char	*raw;
	int		 status;	/* expected hm_err_status, 0 = accepted */
};

static const struct http_case reject_cases[] = {
	{ "cl+te", "POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400 },
	{ "te+cl", "POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400 },
	{ "dup cl same", "POST http://a/ HTTP/1.1\r\nContent-Length: 1\r\n"
	    "Content-Length: 1\r\n\r\nx", 400 },
	{ "dup cl diff", "POST http://a/ HTTP/1.1\r\nContent-Length: 1\r\n"
	    "Content-Length: 2\r\n\r\nxx", 400 },
	{ "cl list", "POST http://a/ HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nx",
	    400 },
	{ "cl negative", "POST http://a/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
	    400 },
	{ "cl plus", "POST http://a/ HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
	    400 },
	{ "bad chunk size", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: "
	    "chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400 },
	{ "chunk size overflow", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding:"
	    " chunked\r\n\r\nfffffffffffffffff\r\n", 400 },
	{ "obs-fold", "GET http://a/ HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n", 400 },
	{ "bare lf", "GET http://a/ HTTP/1.1\nHost: a\n\n", 400 },
	{ "bare cr", "GET http://a/ HTTP/1.1\rHost: a\r\n\r\n", 400 },
	{ "nul in value", "GET http://a/ HTTP/1.1\r\nX-A: b\0c\r\n\r\n", 400 },
	{ "cr in value", "GET http://a/ HTTP/1.1\r\nX-A: b\rc\r\n\r\n", 400 },
	{ "space before colon", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding "
	    ": chunked\r\n\r\n0\r\n\r\n", 400 },
	{ "te chunked,identity", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding:"
	    " chunked, identity\r\n\r\n0\r\n\r\n", 400 },
	{ "te gzip,chunked", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: "
	    "gzip, chunked\r\n\r\n0\r\n\r\n", 501 },
	{ "te twice", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400 },
	{ "te xchunked", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: "
	    "xchunked\r\n\r\n0\r\n\r\n", 501 },
	{ "two hosts", "GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	    400 },
	{ "http/2.0", "GET http://a/ HTTP/2.0\r\nHost: a\r\n\r\n", 505 },
	{ "http/1.2", "GET http://a/ HTTP/1.2\r\nHost: a\r\n\r\n", 505 },
	{ "h2c preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505 },
	{ "bad method", "G@T http://a/ HTTP/1.1\r\n\r\n", 501 },
	{ "space in name", "GET http://a/ HTTP/1.1\r\nX A: b\r\n\r\n", 400 },
	{ "empty name", "GET http://a/ HTTP/1.1\r\n: b\r\n\r\n", 400 },
	{ "obs-fold empty value", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding:"
	    "\r\n chunked\r\n\r\n0\r\n\r\n", 400 },
	{ "bare cr in value", "GET http://a/ HTTP/1.1\r\nX-A: b\rc\r\n\r\n",
	    400 },
	{ "bare lf mid-head", "GET http://a/ HTTP/1.1\r\nX-A: b\nX-B: c\r\n"
	    "\r\n", 400 },
	{ "obs-fold tab", "GET http://a/ HTTP/1.1\r\nX-A: b\r\n\tc\r\n\r\n",
	    400 },
	{ "bare lf ends head", "POST http://a/ HTTP/1.1\r\nHost: a\r\n\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400 },
	{ "te trailing tab", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: "
	    "chunked\t\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400 },
	{ "te in http/1.0", "POST http://a/ HTTP/1.0\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n0\r\n\r\n", 400 },
	{ "te look-alike", "POST http://a/ HTTP/1.1\r\nTransfer_Encoding: "
	    "chunked\r\n\r\n", 400 },
	{ "cl look-alike", "POST http://a/ HTTP/1.1\r\ncontent_length: 5"
	    "\r\n\r\nhello", 400 },
	/* strict framing (issue 15.6): request line, Host, Connection, CONNECT */
	{ "two spaces after method", "GET  http://a/ HTTP/1.1\r\nHost: a\r\n"
	    "\r\n", 400 },
	{ "two spaces before version", "GET http://a/  HTTP/1.1\r\nHost: a"
	    "\r\n\r\n", 400 },
	{ "space before CRLF", "GET http://a/ HTTP/1.1 \r\nHost: a\r\n\r\n",
	    400 },
	{ "space before method", " GET http://a/ HTTP/1.1\r\nHost: a\r\n"
	    "\r\n", 400 },
	{ "tab after method", "GET\thttp://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
	    400 },
	{ "tab before version", "GET http://a/\tHTTP/1.1\r\nHost: a\r\n\r\n",
	    400 },
	{ "vtab in line", "GET http://a/\v HTTP/1.1\r\nHost: a\r\n\r\n",
	    400 },
	{ "http/0.9 line", "GET http://a/\r\n\r\n", 400 },
	{ "three empty lines first", "\r\n\r\n\r\nGET http://a/ HTTP/1.1"
	    "\r\nHost: a\r\n\r\n", 400 },
	{ "many empty lines first", "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n",
	    400 },
	{ "two empty lines first", "\r\n\r\nGET http://a/ HTTP/1.1\r\n"
	    "Host: a\r\n\r\n", 0 },
	{ "empty line then space", "\r\n GET http://a/ HTTP/1.1\r\n"
	    "Host: a\r\n\r\n", 400 },
	{ "userinfo in host", "GET http://a/ HTTP/1.1\r\nHost: u:p@a\r\n"
	    "\r\n", 400 },
	{ "userinfo in host, origin-form", "GET / HTTP/1.1\r\nHost: evil@a"
	    "\r\n\r\n", 400 },
	{ "connection names content-length", "POST http://a/ HTTP/1.1\r\n"
	    "Host: a\r\nConnection: Content-Length\r\nContent-Length: 5\r\n"
	    "\r\nhello", 400 },
	{ "connection names transfer-encoding", "POST http://a/ HTTP/1.1\r\n"
	    "Host: a\r\nConnection: keep-alive, transfer-encoding\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400 },
	{ "connection names host", "GET http://a/ HTTP/1.1\r\nHost: a\r\n"
	    "Connection: close\r\nConnection: HOST\r\n\r\n", 400 },
	{ "connection names content-type", "GET http://a/ HTTP/1.1\r\n"
	    "Connection: content-type\r\n\r\n", 400 },
	{ "connection names sec-websocket-key", "GET http://a/ HTTP/1.1\r\n"
	    "Connection: Upgrade, Sec-WebSocket-Key\r\nUpgrade: websocket\r\n"
	    "\r\n", 400 },
	{ "connection upgrade is fine", "GET http://a/ HTTP/1.1\r\nHost: a\r\n"
	    "Connection: keep-alive, Upgrade, X-Foo\r\nUpgrade: websocket\r\n"
	    "X-Foo: 1\r\n\r\n", 0 },
	{ "connect with content-length", "CONNECT a:443 HTTP/1.1\r\nHost: "
	    "a:443\r\nContent-Length: 5\r\n\r\nhello", 400 },
	{ "connect with content-length 0", "CONNECT a:443 HTTP/1.1\r\nHost: "
	    "a:443\r\nContent-Length: 0\r\n\r\n", 400 },
	{ "connect with transfer-encoding", "CONNECT a:443 HTTP/1.1\r\nHost: "
	    "a:443\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400 },
	{ "connect plain", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
	    0 },
	{ "good get", "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 0 },
	{ "good chunked", "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: "
	    "Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0 },
	{ "good 1.0", "GET http://a/ HTTP/1.0\r\n\r\n", 0 },
};

/* Feed everything, resuming at pauses; returns the error status or 0. */
static int
feed_all(struct http_msg *m, const char *raw, size_t len, int bytewise)
{
	size_t		off = 0, used, step;
	enum http_feed	f;

	while (off < len) {
		step = bytewise ? 1 : len - off;
		f = http_msg_feed(m, raw + off, step, &used);
		off += used;
		if (f == HTTP_FEED_ERROR)
			return m->hm_err_status;
		if (f == HTTP_FEED_HEAD)
			http_msg_resume(m);
		else if (f == HTTP_FEED_DONE)
			return 0;
		else if (f == HTTP_FEED_UPGRADE)
			return 0;
	}
	return 0;
}

START_TEST(test_http_rejects)
{
	const struct http_case	*hc = &reject_cases[_i];
	struct http_msg		 m;
	size_t			 len = strlen(hc->raw);
	int			 st;

	/* NUL case: length up to the terminating CRLFCRLF */
	if (strcmp(hc->name, "nul in value") == 0)
		len = sizeof("GET http://a/ HTTP/1.1\r\nX-A: b\0c\r\n\r\n") - 1;
	http_msg_init(&m, HTTP_REQUEST, 65536);
	st = feed_all(&m, hc->raw, len, 0);
	ck_assert_msg(st == hc->status, "%s: got %d want %d (%s)", hc->name,
	    st, hc->status, m.hm_err_reason);
	http_msg_fini(&m);
	/* byte-at-a-time feeding must agree */
	http_msg_init(&m, HTTP_REQUEST, 65536);
	st = feed_all(&m, hc->raw, len, 1);
	ck_assert_msg(st == hc->status, "%s bytewise: got %d want %d",
	    hc->name, st, hc->status);
	http_msg_fini(&m);
}
END_TEST

/* the head's line checks carry over between feeds: every split agrees */
START_TEST(test_http_rejects_split)
{
	const struct http_case	*hc = &reject_cases[_i];
	struct http_msg		 m;
	size_t			 len = strlen(hc->raw), cut, used;
	enum http_feed		 f;
	int			 st;

	if (strcmp(hc->name, "nul in value") == 0)
		len = sizeof("GET http://a/ HTTP/1.1\r\nX-A: b\0c\r\n\r\n") - 1;
	for (cut = 1; cut < len; cut++) {
		http_msg_init(&m, HTTP_REQUEST, 65536);
		f = http_msg_feed(&m, hc->raw, cut, &used);
		if (f == HTTP_FEED_ERROR)
			st = m.hm_err_status;
		else {
			if (f == HTTP_FEED_HEAD)
				http_msg_resume(&m);
			st = f == HTTP_FEED_DONE || f == HTTP_FEED_UPGRADE ? 0 :
			    feed_all(&m, hc->raw + used, len - used, 0);
		}
		ck_assert_msg(st == hc->status, "%s cut at %zu: got %d want %d",
		    hc->name, cut, st, hc->status);
		http_msg_fini(&m);
	}
}
END_TEST

static char	 body_seen[256];
static size_t	 body_len;

static void
collect(void *arg, const char *p, size_t len)
{
	if (body_len + len < sizeof(body_seen)) {
		memcpy(body_seen + body_len, p, len);
		body_len += len;
	}
}

START_TEST(test_http_chunked_body)
{
	static const char raw[] = "POST http://a/x HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;ext=1\r\n!\r\n"
	    "0\r\nTrailer: x\r\n\r\nGET http://next/ HTTP/1.1\r\n\r\n";
	struct http_msg	m;
	size_t		used;
	enum http_feed	f;

	body_len = 0;
	http_msg_init(&m, HTTP_REQUEST, 65536);
	m.hm_on_body = collect;
	f = http_msg_feed(&m, raw, sizeof(raw) - 1, &used);
	ck_assert_int_eq(f, HTTP_FEED_HEAD);
	ck_assert_int_eq(m.hm_framing, HTTP_BODY_CHUNKED);
	ck_assert_str_eq(http_msg_method(&m), "POST");
	http_msg_resume(&m);
	{
		size_t used2;

		f = http_msg_feed(&m, raw + used, sizeof(raw) - 1 - used,
		    &used2);
		used += used2;
	}
	ck_assert_int_eq(f, HTTP_FEED_DONE);
	ck_assert_int_eq(body_len, 6);
	ck_assert(memcmp(body_seen, "hello!", 6) == 0);
	/* the pipelined request is left for later */
	ck_assert(strncmp(raw + used, "GET http://next/", 16) == 0);
	http_msg_reset(&m);
	f = http_msg_feed(&m, raw + used, sizeof(raw) - 1 - used, &used);
	ck_assert_int_eq(f, HTTP_FEED_HEAD);
	ck_assert_int_eq(m.hm_framing, HTTP_BODY_NONE);
	http_msg_fini(&m);
}
END_TEST

START_TEST(test_http_header_limit)
{
	struct http_msg	 m;
	char		*raw;
	size_t		 used, n = 9000;
	enum http_feed	 f;

	raw = malloc(n + 64);
	strcpy(raw, "GET http://a/ HTTP/1.1\r\nX-Big: ");
	memset(raw + strlen(raw), 'a', n);
	raw[31 + n] = '\0';
	http_msg_init(&m, HTTP_REQUEST, 4096);
	f = http_msg_feed(&m, raw, strlen(raw), &used);
	ck_assert_int_eq(f, HTTP_FEED_ERROR);
	ck_assert_int_eq(m.hm_err_status, 431);
	http_msg_fini(&m);
	free(raw);
}
END_TEST

START_TEST(test_http_uri_limit)
{
	struct http_msg	 m;
	char		*raw;
	size_t		 used, n = HTTP_MAX_URI + 10;
	enum http_feed	 f;

	raw = malloc(n + 64);
	strcpy(raw, "GET http://a/");
	memset(raw + 13, 'a', n);
	strcpy(raw + 13 + n, " HTTP/1.1\r\n\r\n");
	http_msg_init(&m, HTTP_REQUEST, 65536);
	f = http_msg_feed(&m, raw, strlen(raw), &used);
	ck_assert_int_eq(f, HTTP_FEED_ERROR);
	ck_assert_int_eq(m.hm_err_status, 414);
	http_msg_fini(&m);
	free(raw);
}
END_TEST

START_TEST(test_http_hop_by_hop)
{
	static const char raw[] = "GET http://a/ HTTP/1.1\r\nHost: a\r\n"
	    "Connection: keep-alive, X-Secret-Hop\r\nX-Secret-Hop: 1\r\n"
	    "X-End: 2\r\nKeep-Alive: 5\r\nTE: trailers\r\n\r\n";
	struct http_msg	m;
	const char	*v;
	size_t		used, vlen;

	http_msg_init(&m, HTTP_REQUEST, 65536);
	ck_assert_int_eq(http_msg_feed(&m, raw, sizeof(raw) - 1, &used),
	    HTTP_FEED_HEAD);
	ck_assert(http_msg_is_hop(&m, "X-Secret-Hop", 12));
	ck_assert(http_msg_is_hop(&m, "keep-alive", 10));
	ck_assert(http_msg_is_hop(&m, "TE", 2));
	ck_assert(http_msg_is_hop(&m, "Proxy-Authorization", 19));
	ck_assert(http_msg_is_hop(&m, "Transfer-Encoding", 17));
	ck_assert(!http_msg_is_hop(&m, "X-End", 5));
	ck_assert(!http_msg_is_hop(&m, "Host", 4));
	ck_assert(http_msg_connection_has(&m, "x-secret-hop"));
	ck_assert_int_eq(http_msg_find(&m, "x-end", 0), 3);
	ck_assert_int_eq(http_msg_count(&m, "host"), 1);
	http_msg_value(&m, http_msg_find(&m, "connection", 0), &v, &vlen);
	ck_assert_int_eq((int)vlen, 24);
	ck_assert(memcmp(v, "keep-alive, X-Secret-Hop", vlen) == 0);
	http_msg_fini(&m);
}
END_TEST

/* Upgrade: h2c ignored: a body, then the next request, as HTTP/1.1. */
START_TEST(test_http_ignore_upgrade)
{
	static const char raw[] = "POST http://a/x HTTP/1.1\r\nHost: a\r\n"
	    "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
	    "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Length: 5\r\n"
	    "\r\nhelloGET http://next/ HTTP/1.1\r\n\r\n";
	struct http_msg	m;
	size_t		used, used2;
	enum http_feed	f;
	int		ignore;

	for (ignore = 0; ignore <= 1; ignore++) {
		body_len = 0;
		http_msg_init(&m, HTTP_REQUEST, 65536);
		m.hm_on_body = collect;
		f = http_msg_feed(&m, raw, sizeof(raw) - 1, &used);
		ck_assert_int_eq(f, HTTP_FEED_HEAD);
		ck_assert(http_msg_is_hop(&m, "HTTP2-Settings", 14));
		if (ignore)
			http_msg_ignore_upgrade(&m);
		http_msg_resume(&m);
		f = http_msg_feed(&m, raw + used, sizeof(raw) - 1 - used,
		    &used2);
		used += used2;
		ck_assert_int_eq(body_len, 5);
		if (!ignore) {
			/* llhttp alone would stop here: "another protocol" */
			ck_assert_int_eq(f, HTTP_FEED_UPGRADE);
			http_msg_fini(&m);
			continue;
		}
		ck_assert_int_eq(f, HTTP_FEED_DONE);
		ck_assert(strncmp(raw + used, "GET http://next/", 16) == 0);
		http_msg_reset(&m);
		f = http_msg_feed(&m, raw + used, sizeof(raw) - 1 - used,
		    &used2);
		ck_assert_int_eq(f, HTTP_FEED_HEAD);
		ck_assert_str_eq(http_msg_method(&m), "GET");
		http_msg_fini(&m);
	}
}
END_TEST

START_TEST(test_http_response_framing)
{
	static const char chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
	static const char eof[] = "HTTP/1.1 200 OK\r\n\r\nuntil close";
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n"
	    "\r\n";
	struct http_msg	m;
	size_t		used, u2;

	body_len = 0;
	http_msg_init(&m, HTTP_RESPONSE, 65536);
	m.hm_on_body = collect;
	ck_assert_int_eq(http_msg_feed(&m, chunked, sizeof(chunked) - 1,
	    &used), HTTP_FEED_HEAD);
	ck_assert_int_eq(m.hm_framing, HTTP_BODY_CHUNKED);
	http_msg_resume(&m);
	ck_assert_int_eq(http_msg_feed(&m, chunked + used, sizeof(chunked) - 1 -
	    used, &u2), HTTP_FEED_DONE);
	ck_assert_int_eq(body_len, 3);

	http_msg_reset(&m);
	ck_assert_int_eq(http_msg_feed(&m, eof, sizeof(eof) - 1, &used),
	    HTTP_FEED_HEAD);
	ck_assert_int_eq(m.hm_framing, HTTP_BODY_EOF);
	http_msg_resume(&m);
	ck_assert_int_eq(http_msg_feed(&m, eof + used, sizeof(eof) - 1 - used,
	    &u2), HTTP_FEED_MORE);
	ck_assert_int_eq(http_msg_finish(&m), HTTP_FEED_DONE);

	/* a response to HEAD has no body whatever Content-Length says */
	http_msg_reset(&m);
	m.hm_no_body = 1;
	ck_assert_int_eq(http_msg_feed(&m, head, sizeof(head) - 1, &used),
	    HTTP_FEED_DONE);
	ck_assert_int_eq(m.hm_status, 200);
	http_msg_fini(&m);
}
END_TEST

/* Chunk lines: size and extensions bounded by HTTP_MAX_CHUNK_LINE. */
static const struct {
	const char	*name;
	size_t		 ext;		/* bytes of ";" + 'x' run */
	size_t		 zeros;		/* leading zeros of the size */
	int		 last;		/* on the last chunk's line */
	int		 status;
} chunkline_cases[] = {
	{ "ext 4000",		4000,	0,	0, 0 },
	{ "ext 4100",		4100,	0,	0, 400 },
	{ "ext 64k",		65536,	0,	0, 400 },
	{ "zeros 4000",		0,	4000,	0, 0 },
	{ "zeros 5000",		0,	5000,	0, 400 },
	{ "last ext 4000",	4000,	0,	1, 0 },
	{ "last ext 5000",	5000,	0,	1, 400 },
	{ "last zeros 9000",	0,	9000,	1, 400 },
	/* 2: the last chunk's line ends the message, no trailers */
	{ "last ext 4000, end",	4000,	0,	2, 0 },
	{ "last ext 5000, end",	5000,	0,	2, 400 },
	{ "last zeros 5000, end", 0,	5000,	2, 400 },
};

START_TEST(test_http_chunk_line)
{
	const char	*head = "POST http://a/ HTTP/1.1\r\nHost: a\r\n"
			    "Transfer-Encoding: chunked\r\n\r\n"
			    "5\r\nhello\r\n";
	struct http_msg	 m;
	size_t		 n = 0, sz = 128 * 1024;
	char		*raw = malloc(sz);
	int		 st, bytewise;

	ck_assert_ptr_nonnull(raw);
	n += (size_t)snprintf(raw, sz, "%s", head);
	memset(raw + n, '0', chunkline_cases[_i].zeros);
	n += chunkline_cases[_i].zeros;
	raw[n++] = chunkline_cases[_i].last ? '0' : '3';
	if (chunkline_cases[_i].ext > 0) {
		raw[n++] = ';';
		memset(raw + n, 'x', chunkline_cases[_i].ext - 1);
		n += chunkline_cases[_i].ext - 1;
	}
	/* a big trailer is the arena's business, not the chunk line's */
	if (chunkline_cases[_i].last == 2)
		n += (size_t)snprintf(raw + n, sz - n, "\r\n\r\n");
	else
		n += (size_t)snprintf(raw + n, sz - n, chunkline_cases[_i].last ?
		    "\r\nX-Trailer: %0*d\r\n\r\n" : "\r\nabc\r\n0\r\n"
		    "X-Trailer: %0*d\r\n\r\n", 6000, 7);
	for (bytewise = 0; bytewise < 2; bytewise++) {
		http_msg_init(&m, HTTP_REQUEST, 65536);
		st = feed_all(&m, raw, n, bytewise);
		ck_assert_msg(st == chunkline_cases[_i].status,
		    "%s (bytewise %d): got %d want %d (%s)",
		    chunkline_cases[_i].name, bytewise, st,
		    chunkline_cases[_i].status, m.hm_err_reason);
		if (st == 0)
			ck_assert(m.hm_complete);
		http_msg_fini(&m);
	}
	free(raw);
}
END_TEST

/* The same bound holds for a response from the upstream (502 there). */
START_TEST(test_http_chunk_line_response)
{
	struct http_msg	 m;
	char		 raw[8192];
	size_t		 n, used, u2;

	n = (size_t)snprintf(raw, sizeof(raw), "HTTP/1.1 200 OK\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n3;");
	memset(raw + n, 'e', 5000);
	n += 5000;
	n += (size_t)snprintf(raw + n, sizeof(raw) - n, "\r\nabc\r\n0\r\n"
	    "\r\n");
	http_msg_init(&m, HTTP_RESPONSE, 65536);
	ck_assert_int_eq(http_msg_feed(&m, raw, n, &used), HTTP_FEED_HEAD);
	http_msg_resume(&m);
	ck_assert_int_eq(http_msg_feed(&m, raw + used, n - used, &u2),
	    HTTP_FEED_ERROR);
	ck_assert_int_eq(m.hm_err_status, 502);
	http_msg_fini(&m);
}
END_TEST

/* Empty lines count per message: keep-alive resets them. */
START_TEST(test_http_empty_lines_per_message)
{
	static const char raw[] = "GET http://a/1 HTTP/1.1\r\nHost: a\r\n"
	    "\r\n\r\n\r\nGET http://a/2 HTTP/1.1\r\nHost: a\r\n\r\n";
	struct http_msg	m;
	size_t		used, off = 0;
	enum http_feed	f;

	http_msg_init(&m, HTTP_REQUEST, 65536);
	f = http_msg_feed(&m, raw, sizeof(raw) - 1, &used);
	ck_assert_int_eq(f, HTTP_FEED_HEAD);
	off += used;
	http_msg_resume(&m);
	f = http_msg_feed(&m, raw + off, sizeof(raw) - 1 - off, &used);
	ck_assert_int_eq(f, HTTP_FEED_DONE);
	off += used;
	http_msg_reset(&m);
	f = http_msg_feed(&m, raw + off, sizeof(raw) - 1 - off, &used);
	ck_assert_int_eq(f, HTTP_FEED_HEAD);
	ck_assert(strncmp(http_msg_str(&m, m.hm_url), "http://a/2",
	    m.hm_url_len) == 0);
	http_msg_fini(&m);
}
END_TEST

/* Method-override headers: one method, upper-cased, or refused. */
static const struct {
	const char	*hdrs;
	int		 rc;
	const char	*method;
} override_cases[] = {
	{ "",						0, "" },
	{ "X-HTTP-Method-Override: DELETE\r\n",	1, "DELETE" },
	{ "X-HTTP-Method: patch\r\n",			1, "PATCH" },
	{ "x-method-override: Put\r\n",		1, "PUT" },
	{ "X-HTTP-Method-Override: DELETE\r\n"
	    "X-Method-Override: delete\r\n",		1, "DELETE" },
	{ "X-HTTP-Method-Override: DELETE\r\n"
	    "X-HTTP-Method: GET\r\n",			-1, "" },
	{ "X-HTTP-Method-Override: GET\r\n"
	    "X-HTTP-Method-Override: DELETE\r\n",	-1, "" },
	{ "X-HTTP-Method-Override: DELETE, GET\r\n",	-1, "" },
	{ "X-HTTP-Method-Override: \r\n",		-1, "" },
	{ "X-HTTP-Method-Override: DE(LETE\r\n",	-1, "" },
	{ "X-HTTP-Method-Override: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n",
							-1, "" },
	{ "X-Other-Override: DELETE\r\n",		0, "" },
};

START_TEST(test_http_method_override)
{
	struct http_msg	m;
	char		raw[512], out[24];
	size_t		used;
	int		rc;

	snprintf(raw, sizeof(raw), "POST http://a/ HTTP/1.1\r\nHost: a\r\n"
	    "%s\r\n", override_cases[_i].hdrs);
	http_msg_init(&m, HTTP_REQUEST, 65536);
	ck_assert_int_eq(http_msg_feed(&m, raw, strlen(raw), &used),
	    HTTP_FEED_HEAD);
	out[0] = '\0';
	rc = http_msg_method_override(&m, out, sizeof(out));
	ck_assert_int_eq(rc, override_cases[_i].rc);
	if (rc == 1)
		ck_assert_str_eq(out, override_cases[_i].method);
	http_msg_fini(&m);
}
END_TEST

START_TEST(test_http_path_override_names)
{
	ck_assert(http_is_path_override("X-Original-URL", 14));
	ck_assert(http_is_path_override("x-rewrite-url", 13));
	ck_assert(http_is_path_override("X-ORIGINAL-URI", 14));
	ck_assert(!http_is_path_override("X-Original", 10));
	ck_assert(!http_is_path_override("X-Forwarded-For", 15));
}
END_TEST

Suite *
suite_http(void)
{
	Suite	*s = suite_create("http");
	TCase	*tc = tcase_create("msg");

	tcase_add_loop_test(tc, test_http_rejects, 0,
	    sizeof(reject_cases) / sizeof(reject_cases[0]));
	tcase_add_loop_test(tc, test_http_rejects_split, 0,
	    sizeof(reject_cases) / sizeof(reject_cases[0]));
	tcase_add_test(tc, test_http_chunked_body);
	tcase_add_test(tc, test_http_header_limit);
	tcase_add_test(tc, test_http_uri_limit);
	tcase_add_test(tc, test_http_hop_by_hop);
	tcase_add_test(tc, test_http_ignore_upgrade);
	tcase_add_test(tc, test_http_response_framing);
	tcase_add_loop_test(tc, test_http_chunk_line, 0,
	    sizeof(chunkline_cases) / sizeof(chunkline_cases[0]));
	tcase_add_test(tc, test_http_chunk_line_response);
	tcase_add_test(tc, test_http_empty_lines_per_message);
	tcase_add_loop_test(tc, test_http_method_override, 0,
	    sizeof(override_cases) / sizeof(override_cases[0]));
	tcase_add_test(tc, test_http_path_override_names);
	suite_add_tcase(s, tc);
	return s;
}
