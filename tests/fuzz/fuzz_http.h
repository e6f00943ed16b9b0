/*
 * Shared driver for fuzz_http_request and fuzz_http_response: the bytes of
 * one connection through http_msg_feed() the way conn.c drives it (resume
 * after the head, reset after each message for keep-alive), delivered in
 * two pieces split at an offset taken from the input. Invariants that must
 * hold for any input abort, so libFuzzer reports them as crashes.
 *
 * Input: byte 0 picks the split point, byte 1 the flags (bit 0: response
 * to HEAD, bit 1: a small head limit), the rest is the stream.
 */
#ifndef AIRLOCK_FUZZ_HTTP_H
#define AIRLOCK_FUZZ_HTTP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_msg.h"

#define FUZZ_HTTP_MAX_MSGS	64

struct fuzz_body {
	uint64_t	fb_bytes;
	unsigned	fb_sum;
};

static void
fuzz_on_body(void *arg, const char *p, size_t len)
{
	struct fuzz_body	*fb = arg;
	size_t			 i;

	/* touch every byte so ASan sees a callback pointing out of bounds */
	for (i = 0; i < len; i++)
		fb->fb_sum += (unsigned char)p[i];
	fb->fb_bytes += len;
}

/* What conn.c looks at once a head is complete. */
static void
fuzz_head(const struct http_msg *m)
{
	static const char *const names[] = { "host", "content-length",
	    "transfer-encoding", "connection", "upgrade", "te", "keep-alive",
	    "proxy-authorization", "expect" };
	size_t	i;
	int	h;

	if (m->hm_url + (size_t)m->hm_url_len > m->hm_len ||
	    m->hm_nhdrs < 0 || m->hm_nhdrs > HTTP_MAX_HEADERS)
		abort();
	for (h = 0; h < m->hm_nhdrs; h++) {
		const struct http_header *hd = &m->hm_hdrs[h];

		if (hd->h_name + (size_t)hd->h_name_len > m->hm_len ||
		    hd->h_value + (size_t)hd->h_value_len > m->hm_len)
			abort();
		(void)http_msg_is_hop(m, http_msg_str(m, hd->h_name),
		    hd->h_name_len);
	}
	(void)http_msg_method(m);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		(void)http_msg_find(m, names[i], 0);
		(void)http_msg_count(m, names[i]);
	}
	(void)http_msg_connection_has(m, "close");
	(void)http_msg_connection_has(m, "upgrade");
	{
		char	method[24];

		if (http_msg_method_override(m, method, sizeof(method)) == 1 &&
		    strlen(method) >= sizeof(method))
			abort();
	}
}

static void
fuzz_http_run(int type, const uint8_t *data, size_t size)
{
	struct http_msg		 m;
	struct fuzz_body	 fb;
	const char		*in;
	size_t			 n, split, off, end, used, piece;
	enum http_feed		 f = HTTP_FEED_MORE;
	int			 msgs = 0, stop = 0, guard;

	if (size < 2)
		return;
	split = (size_t)data[0];
	in = (const char *)data + 2;
	n = size - 2;
	split = n == 0 ? 0 : split * n / 255;

	memset(&fb, 0, sizeof(fb));
	http_msg_init(&m, type, (data[1] & 2) ? 256 : 64 * 1024);
	m.hm_no_body = type == HTTP_RESPONSE && (data[1] & 1);
	m.hm_on_body = fuzz_on_body;
	m.hm_arg = &fb;

	for (piece = 0; piece < 2 && !stop; piece++) {
		off = piece == 0 ? 0 : split;
		end = piece == 0 ? split : n;
		for (guard = 0; off < end && !stop; guard++) {
			if (guard > 4 * FUZZ_HTTP_MAX_MSGS)
				abort();	/* no progress */
			f = http_msg_feed(&m, in + off, end - off, &used);
			if (used > end - off)
				abort();
			off += used;
			if (fb.fb_bytes != m.hm_body_bytes)
				abort();
			switch (f) {
			case HTTP_FEED_MORE:
				if (off != end)
					abort();
				break;
			case HTTP_FEED_HEAD:
				fuzz_head(&m);
				http_msg_resume(&m);
				break;
			case HTTP_FEED_DONE:
				if (m.hm_framing == HTTP_BODY_LENGTH &&
				    !m.hm_no_body &&
				    m.hm_body_bytes != m.hm_content_length)
					abort();
				if (++msgs >= FUZZ_HTTP_MAX_MSGS)
					stop = 1;
				http_msg_reset(&m);
				m.hm_on_body = fuzz_on_body;
				m.hm_arg = &fb;
				fb.fb_bytes = 0;
				break;
			case HTTP_FEED_UPGRADE:
				stop = 1;
				break;
			case HTTP_FEED_ERROR:
				if (m.hm_err_status < 400 ||
				    m.hm_err_status > 599 ||
				    memchr(m.hm_err_reason, '\0',
				    sizeof(m.hm_err_reason)) == NULL)
					abort();
				stop = 1;
				break;
			}
		}
	}
	if (!stop) {
		f = http_msg_finish(&m);
		if (f == HTTP_FEED_DONE && m.hm_framing == HTTP_BODY_LENGTH &&
		    !m.hm_no_body && m.hm_body_bytes != m.hm_content_length)
			abort();
	}
	http_msg_fini(&m);
}

#endif
