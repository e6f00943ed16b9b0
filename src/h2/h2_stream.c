/*
 * One HTTP/2 stream: its request head (already checked by nghttp2's
 * HTTP messaging rules: pseudo-headers, connection-specific fields, TE,
 * content-length against DATA) is written as an HTTP/1.1 request into a
 * bufferevent pair whose other end is the stream's own connection
 * (conn/conn_stream.c), which runs the pipeline and answers in HTTP/1.1;
 * that answer is parsed (llhttp, strict) and sent back as HEADERS and
 * DATA. Both directions are bounded: request DATA is credited to the
 * client's window only once the connection took it, and the connection
 * is not read while the stream holds H2_STREAM_BUF bytes the client's
 * window has not let out.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/worker.h"
#include "h2/h2.h"
#include "h2/h2_internal.h"
#include "policy/pol_ask.h"
#include "util/log.h"
#include "util/util.h"

static int	resp_field_dropped(const struct http_msg *, const char *,
		    size_t);
static int	resp_head(struct h2_stream *, int);
static void	stream_reset(struct h2_stream *, uint32_t);

static void
resp_body_cb(void *arg, const char *p, size_t len)
{
	struct h2_stream	*s = arg;

	if (s->s_grpc_only && len > 0) {
		/* not Trailers-Only after all */
		s->s_grpc_only = 0;
		if (resp_head(s, 1) == -1)
			stream_reset(s, NGHTTP2_INTERNAL_ERROR);
	}
	evbuffer_add(s->s_out, p, len);
	h2_body_resume(s->s_srv->h_sess, s->s_id, &s->s_deferred);
}

struct h2_stream *
h2_stream_new(struct h2_srv *h, int32_t id)
{
	struct h2_stream	*s = xcalloc(1, sizeof(*s));

	s->s_srv = h;
	s->s_id = id;
	s->s_pseudo = evbuffer_new();
	s->s_fields = evbuffer_new();
	s->s_out = evbuffer_new();
	http_msg_init(&s->s_resp, HTTP_RESPONSE,
	    h->h_conn->c_cfg->c_limits.l_header_bytes);
	s->s_resp.hm_on_body = resp_body_cb;
	s->s_resp.hm_arg = s;
	TAILQ_INSERT_TAIL(&h->h_streams, s, s_entry);
	h->h_nstreams++;
	return s;
}

void
h2_stream_conn_end(struct h2_stream *s, const char *why)
{
	struct conn	*c = s->s_conn;

	if (c == NULL)
		return;
	s->s_conn = NULL;
	c->c_h2s = NULL;
	/* held for an operator: said as for an HTTP/1 client (conn.c); the
	   hold goes with the connection (conn_pipe_fini) */
	if (why != NULL && c->c_state == CONN_WAIT && c->c_x->x_ask_id != 0)
		snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%s",
		    ASK_LEFT_HELD);
	else if (why != NULL && c->c_x->x_active &&
	    c->c_x->x_reason[0] == '\0')
		snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%s", why);
	conn_ref(c);
	conn_close(c, why != NULL ? AUD_R_CLIENT_CLOSED : AUD_R_DONE);
	conn_unref(c);
}

void
h2_stream_free(struct h2_stream *s, const char *why)
{
	struct h2_srv	*h = s->s_srv;

	h2_stream_conn_end(s, why != NULL ? why : "HTTP/2 stream closed");
	if (s->s_bev != NULL)
		bufferevent_free(s->s_bev);
	evbuffer_free(s->s_pseudo);
	evbuffer_free(s->s_fields);
	if (s->s_cookie != NULL)
		evbuffer_free(s->s_cookie);
	evbuffer_free(s->s_out);
	http_msg_fini(&s->s_resp);
	TAILQ_REMOVE(&h->h_streams, s, s_entry);
	h->h_nstreams--;
	free(s);
}

void
h2_stream_conn_gone(struct h2_stream *s)
{
	s->s_conn = NULL;
	s->s_gone = 1;
	h2_srv_kick(s->s_srv);	/* what it wrote last is read from there */
}

static int
name_is(const uint8_t *n, size_t len, const char *lit)
{
	return len == strlen(lit) && memcmp(n, lit, len) == 0;
}

int
h2_stream_header(struct h2_stream *s, const uint8_t *name, size_t nlen,
    const uint8_t *value, size_t vlen)
{
	size_t		 max = s->s_srv->h_conn->c_cfg->c_limits.l_header_bytes;
	int		 ps = -1;

	/* the size SETTINGS_MAX_HEADER_LIST_SIZE counts (RFC 9113 6.5.2) */
	s->s_hdr_bytes += nlen + vlen + 32;
	if (s->s_hdr_bytes > H2_HDR_FATAL * max)
		return NGHTTP2_ERR_CALLBACK_FAILURE;	/* HPACK bomb */
	if (s->s_hdr_bytes > max) {
		s->s_hdr_over = 1;	/* answered 431 by the connection */
		return 0;
	}
	if (name_is(name, nlen, ":method"))
		ps = H2_PS_METHOD;
	else if (name_is(name, nlen, ":path"))
		ps = H2_PS_PATH;
	else if (name_is(name, nlen, ":authority"))
		ps = H2_PS_AUTH;
	else if (name_is(name, nlen, ":scheme"))
		ps = H2_PS_SCHEME;
	else if (nlen > 0 && name[0] == ':')
		return 0;	/* :protocol: extended CONNECT is not enabled */
	if (ps >= 0) {
		/* each once: nghttp2 resets a stream that repeats one */
		if (s->s_ps_len[ps] > 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		s->s_ps_off[ps] = evbuffer_get_length(s->s_pseudo);
		s->s_ps_len[ps] = vlen;
		evbuffer_add(s->s_pseudo, value, vlen);
		return 0;
	}
	if (name_is(name, nlen, "cookie")) {
		/* one field for HTTP/1 (RFC 9113 8.2.3) */
		if (s->s_cookie == NULL)
			s->s_cookie = evbuffer_new();
		else if (evbuffer_get_length(s->s_cookie) > 0)
			evbuffer_add(s->s_cookie, "; ", 2);
		evbuffer_add(s->s_cookie, value, vlen);
		return 0;
	}
	/* hop-by-hop towards HTTP/1 (nghttp2 let only "te: trailers"
	   through); Expect is answered by no one here */
	if (name_is(name, nlen, "te") || name_is(name, nlen, "expect"))
		return 0;
	if (name_is(name, nlen, "content-length"))
		s->s_has_cl = 1;
	if (name_is(name, nlen, "content-type") && vlen >= 16 &&
	    memcmp(value, "application/grpc", 16) == 0)
		s->s_grpc = 1;
	if (name_is(name, nlen, "host"))
		s->s_has_host = 1;
	evbuffer_add(s->s_fields, name, nlen);
	evbuffer_add(s->s_fields, ": ", 2);
	evbuffer_add(s->s_fields, value, vlen);
	evbuffer_add(s->s_fields, "\r\n", 2);
	return 0;
}

static void
pair_read_cb(struct bufferevent *bev, void *arg)
{
	struct h2_stream	*s = arg;

	(void)bev;
	h2_srv_kick(s->s_srv);
}

static void
pair_write_cb(struct bufferevent *bev, void *arg)
{
	struct h2_stream	*s = arg;

	(void)bev;
	h2_stream_drained(s);
}

static void
stream_reset(struct h2_stream *s, uint32_t code)
{
	if (s->s_dead)
		return;
	s->s_dead = 1;
	(void)nghttp2_submit_rst_stream(s->s_srv->h_sess, NGHTTP2_FLAG_NONE,
	    s->s_id, code);
}

void
h2_stream_head_done(struct h2_stream *s, int end_stream)
{
	struct h2_srv		*h = s->s_srv;
	struct bufferevent	*pair[2];
	struct evbuffer		*out;
	const char		*ps, *method, *path, *auth, *scheme;
	size_t			 i, max, mlen, plen, alen, slen;
	int			 https;
	char			 pad[1024];

	if (s->s_head_sent)
		return;
	s->s_head_sent = 1;
	if (bufferevent_pair_new(h->h_conn->c_worker->w_base,
	    BEV_OPT_DEFER_CALLBACKS, pair) != 0) {
		stream_reset(s, NGHTTP2_INTERNAL_ERROR);
		return;
	}
	s->s_bev = pair[0];
	if ((s->s_conn = conn_stream_new(h->h_conn, pair[1], s)) == NULL) {
		/* the sandbox's or the gateway's connection limit */
		stream_reset(s, NGHTTP2_REFUSED_STREAM);
		return;
	}
	bufferevent_setcb(s->s_bev, pair_read_cb, pair_write_cb, NULL, s);
	bufferevent_enable(s->s_bev, EV_READ | EV_WRITE);
	out = bufferevent_get_output(s->s_bev);
	/* none kept when the head went past limits.header_bytes first */
	if ((ps = (const char *)evbuffer_pullup(s->s_pseudo, -1)) == NULL)
		ps = "";
	method = ps + s->s_ps_off[H2_PS_METHOD];
	mlen = s->s_ps_len[H2_PS_METHOD];
	path = ps + s->s_ps_off[H2_PS_PATH];
	plen = s->s_ps_len[H2_PS_PATH];
	auth = ps + s->s_ps_off[H2_PS_AUTH];
	alen = s->s_ps_len[H2_PS_AUTH];
	scheme = ps + s->s_ps_off[H2_PS_SCHEME];
	slen = s->s_ps_len[H2_PS_SCHEME];
	https = slen == 5 && memcmp(scheme, "https", 5) == 0;
	s->s_resp.hm_no_body = mlen == 4 && memcmp(method, "HEAD", 4) == 0;
	evbuffer_add(out, method, mlen);
	evbuffer_add(out, " ", 1);
	if (!https && alen > 0) {
		/* absolute-form: the connection refuses another scheme */
		evbuffer_add(out, scheme, slen);
		evbuffer_add(out, "://", 3);
		evbuffer_add(out, auth, alen);
	}
	evbuffer_add(out, path, plen);
	evbuffer_add(out, " HTTP/1.1\r\n", 11);
	if (alen > 0) {
		/* a host field besides :authority: two Host fields (400) */
		evbuffer_add(out, "Host: ", 6);
		evbuffer_add(out, auth, alen);
		evbuffer_add(out, "\r\n", 2);
	}
	evbuffer_add_buffer(out, s->s_fields);
	if (s->s_cookie != NULL && evbuffer_get_length(s->s_cookie) > 0) {
		evbuffer_add(out, "Cookie: ", 8);
		evbuffer_add_buffer(out, s->s_cookie);
		evbuffer_add(out, "\r\n", 2);
	}
	if (s->s_hdr_over) {
		/* the connection answers 431 and audits it: show it a head
		   past limits.header_bytes */
		max = h->h_conn->c_cfg->c_limits.l_header_bytes;
		memset(pad, 'x', sizeof(pad));
		evbuffer_add(out, "X-Airlock-H2-Header-List: ", 26);
		for (i = 0; i < max; i += sizeof(pad))
			evbuffer_add(out, pad, sizeof(pad));
		evbuffer_add(out, "\r\n", 2);
	}
	if (!end_stream && !s->s_has_cl) {
		evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
		s->s_chunked = 1;
	}
	evbuffer_add(out, "\r\n", 2);
	s->s_req_done = end_stream;
}

void
h2_stream_data(struct h2_stream *s, const uint8_t *p, size_t len)
{
	struct evbuffer	*out;
	char		 size[24];

	if (s->s_conn == NULL || s->s_bev == NULL) {
		(void)nghttp2_session_consume(s->s_srv->h_sess, s->s_id, len);
		return;
	}
	out = bufferevent_get_output(s->s_bev);
	if (s->s_chunked && len > 0) {
		snprintf(size, sizeof(size), "%zx\r\n", len);
		evbuffer_add(out, size, strlen(size));
	}
	evbuffer_add(out, p, len);
	if (s->s_chunked && len > 0)
		evbuffer_add(out, "\r\n", 2);
	/* credited once the connection took it (h2_stream_drained) */
	s->s_unacked += len;
}

void
h2_stream_req_end(struct h2_stream *s)
{
	if (s->s_req_done)
		return;
	s->s_req_done = 1;
	if (s->s_chunked && s->s_conn != NULL && s->s_bev != NULL)
		bufferevent_write(s->s_bev, "0\r\n\r\n", 5);
}

void
h2_stream_drained(struct h2_stream *s)
{
	if (s->s_unacked == 0)
		return;
	(void)nghttp2_session_consume(s->s_srv->h_sess, s->s_id,
	    s->s_unacked);
	s->s_unacked = 0;
	h2_srv_kick(s->s_srv);	/* the WINDOW_UPDATE */
}

/* The answer's trailer fields (an upstream h2 gRPC answer's grpc-status)
   as a trailing HEADERS: 0 when there were some. */
static int
resp_trailers(struct h2_stream *s)
{
	struct http_msg	*m = &s->s_resp;
	nghttp2_nv	 nv[HTTP_MAX_HEADERS];
	char		 lower[HTTP_MAX_HEADERS][64];
	size_t		 n = 0, i, nlen;
	int		 j;

	if (!m->hm_trailers || m->hm_trail_at >= m->hm_nhdrs)
		return -1;
	for (j = m->hm_trail_at; j < m->hm_nhdrs; j++) {
		const char	*name = http_msg_str(m, m->hm_hdrs[j].h_name);
		const char	*v;
		size_t		 vlen;

		nlen = m->hm_hdrs[j].h_name_len;
		if (nlen >= sizeof(lower[0]) ||
		    resp_field_dropped(m, name, nlen))
			continue;
		for (i = 0; i < nlen; i++)
			lower[n][i] = (char)tolower((unsigned char)name[i]);
		http_msg_value(m, j, &v, &vlen);
		nv[n].name = (uint8_t *)lower[n];
		nv[n].namelen = nlen;
		nv[n].value = (uint8_t *)v;
		nv[n].valuelen = vlen;
		nv[n++].flags = NGHTTP2_NV_FLAG_NONE;
	}
	if (n == 0)
		return -1;
	return nghttp2_submit_trailer(s->s_srv->h_sess, s->s_id, nv, n) == 0 ?
	    0 : -1;
}

ssize_t
h2_body_read(struct evbuffer *out, uint8_t *buf, size_t len, int done,
    struct bufferevent *bev, uint32_t *flags, int *deferred, int *resumed)
{
	int	n = evbuffer_remove(out, buf, len);

	*resumed = 0;
	if (n < 0)
		n = 0;
	if (evbuffer_get_length(out) == 0 && done) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		return n;
	}
	/* its producer was paused above H2_STREAM_BUF */
	if (evbuffer_get_length(out) < H2_STREAM_BUF / 2 && bev != NULL &&
	    !(bufferevent_get_enabled(bev) & EV_READ)) {
		bufferevent_enable(bev, EV_READ);
		*resumed = 1;
	}
	if (n > 0)
		return n;
	*deferred = 1;
	return NGHTTP2_ERR_DEFERRED;
}

void
h2_body_resume(nghttp2_session *sess, int32_t id, int *deferred)
{
	if (!*deferred)
		return;
	*deferred = 0;
	(void)nghttp2_session_resume_data(sess, id);
}

static ssize_t
data_read_cb(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2_stream	*s = src->ptr;
	ssize_t			 n;
	int			 resumed;

	(void)sess;
	(void)id;
	(void)arg;
	n = h2_body_read(s->s_out, buf, len, s->s_resp_done, s->s_bev, flags,
	    &s->s_deferred, &resumed);
	if (resumed)
		h2_srv_kick(s->s_srv);	/* what waits in its input */
	if ((*flags & NGHTTP2_DATA_FLAG_EOF) && resp_trailers(s) == 0)
		*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
	return n;
}

/* Names the HTTP/1 answer carries that HTTP/2 must not (RFC 9113 8.2.2). */
static int
resp_field_dropped(const struct http_msg *m, const char *name, size_t len)
{
	return http_msg_is_hop(m, name, len) ||
	    util_strncaseeq(name, len, "connection") ||
	    util_strncaseeq(name, len, "keep-alive") ||
	    util_strncaseeq(name, len, "proxy-connection") ||
	    util_strncaseeq(name, len, "transfer-encoding") ||
	    util_strncaseeq(name, len, H2_GATEWAY_FIELD) ||
	    util_strncaseeq(name, len, "upgrade");
}

#define RID_NAME	"x-airlock-request-id"
#define RID_LEN		(sizeof(RID_NAME) - 1)

/* The answer's head as HEADERS (<final>: with the data source). */
static int
resp_head(struct h2_stream *s, int final)
{
	struct http_msg		*m = &s->s_resp;
	nghttp2_nv		 nv[HTTP_MAX_HEADERS + 1];
	nghttp2_data_provider	 dp;
	char			 status[8], *lower;
	size_t			 n = 0, i, total = 0, at = 0;
	int			 j, rv;

	for (j = 0; j < m->hm_nhdrs; j++)
		total += m->hm_hdrs[j].h_name_len;
	lower = xcalloc(1, total + 1);
	snprintf(status, sizeof(status), "%03d", m->hm_status % 1000);
	nv[n].name = (uint8_t *)":status";
	nv[n].namelen = 7;
	nv[n].value = (uint8_t *)status;
	nv[n].valuelen = 3;
	nv[n++].flags = NGHTTP2_NV_FLAG_NONE;
	for (j = 0; j < m->hm_nhdrs; j++) {
		const char	*name = http_msg_str(m, m->hm_hdrs[j].h_name);
		size_t		 nlen = m->hm_hdrs[j].h_name_len;
		const char	*v;
		size_t		 vlen;

		if (resp_field_dropped(m, name, nlen))
			continue;
		for (i = 0; i < nlen; i++)
			lower[at + i] = (char)tolower((unsigned char)name[i]);
		http_msg_value(m, j, &v, &vlen);
		nv[n].name = (uint8_t *)lower + at;
		nv[n].namelen = nlen;
		nv[n].value = (uint8_t *)v;
		nv[n].valuelen = vlen;
		/* a value new with every answer: indexed, it would only push
		   reusable entries out of both HPACK tables, and cost an
		   insertion and an eviction on each side */
		nv[n++].flags = nlen == RID_LEN &&
		    memcmp(lower + at, RID_NAME, RID_LEN) == 0 ?
		    NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE;
		at += nlen;
	}
	if (final == 2)		/* gRPC Trailers-Only: END_STREAM here */
		rv = nghttp2_submit_response(s->s_srv->h_sess, s->s_id, nv, n,
		    NULL);
	else if (final) {
		dp.source.ptr = s;
		dp.read_callback = data_read_cb;
		rv = nghttp2_submit_response(s->s_srv->h_sess, s->s_id, nv, n,
		    &dp);
	} else
		rv = nghttp2_submit_headers(s->s_srv->h_sess,
		    NGHTTP2_FLAG_NONE, s->s_id, NULL, nv, n, NULL);
	free(lower);
	return rv == 0 ? 0 : -1;
}

/*
 * A gateway answer to a gRPC call, as gRPC clients understand it: HTTP
 * 200 with grpc-status 8 RESOURCE_EXHAUSTED (budget, rate, overload) or
 * 7 PERMISSION_DENIED (anything else refused), the JSON answer
 * percent-encoded in grpc-message (a Trailers-Only response).
 */
static void
grpc_deny(struct h2_stream *s)
{
	static const char	 hex[] = "0123456789ABCDEF";
	struct http_msg		*m = &s->s_resp;
	nghttp2_nv		 nv[4];
	size_t			 n, i, j = 0;
	const unsigned char	*b;
	char			*msg;
	const char		*code;

	n = evbuffer_get_length(s->s_out);
	if (n > 2048)
		n = 2048;
	b = evbuffer_pullup(s->s_out, (ssize_t)n);
	while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r'))
		n--;
	msg = xcalloc(1, n * 3 + 1);
	for (i = 0; i < n; i++) {
		if (b[i] >= 0x20 && b[i] <= 0x7e && b[i] != '%')
			msg[j++] = (char)b[i];
		else {
			msg[j++] = '%';
			msg[j++] = hex[b[i] >> 4];
			msg[j++] = hex[b[i] & 15];
		}
	}
	code = m->hm_status == 402 || m->hm_status == 429 ||
	    m->hm_status == 503 ? "8" : "7";
	nv[0] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)"200", 7, 3,
	    NGHTTP2_NV_FLAG_NONE };
	nv[1] = (nghttp2_nv){ (uint8_t *)"content-type",
	    (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE };
	nv[2] = (nghttp2_nv){ (uint8_t *)"grpc-status", (uint8_t *)code, 11, 1,
	    NGHTTP2_NV_FLAG_NONE };
	nv[3] = (nghttp2_nv){ (uint8_t *)"grpc-message", (uint8_t *)msg, 12, j,
	    NGHTTP2_NV_FLAG_NONE };
	(void)nghttp2_submit_response(s->s_srv->h_sess, s->s_id, nv, 4, NULL);
	free(msg);
	evbuffer_drain(s->s_out, evbuffer_get_length(s->s_out));
}

/* The head just parsed goes out: 0, or -1 after resetting the stream. */
static int
stream_head_out(struct h2_stream *s)
{
	struct http_msg	*m = &s->s_resp;

	s->s_head_out = 1;
	if (s->s_grpc && m->hm_status >= 200 &&
	    http_msg_find(m, H2_GATEWAY_FIELD, 0) != -1) {
		/* reshaped once its JSON body is in (grpc_deny) */
		s->s_grpc_deny = 1;
		s->s_resp_started = 1;
		return 0;
	}
	if (s->s_grpc && m->hm_status == 200 &&
	    http_msg_find(m, "grpc-status", 0) != -1) {
		/* an upstream's Trailers-Only answer (the connection may
		   have re-framed it chunked): one HEADERS with END_STREAM
		   once the empty body is seen (h2_stream_poll) */
		s->s_grpc_only = 1;
	} else if (m->hm_status >= 100 && m->hm_status < 200 &&
	    m->hm_status != 101)
		(void)resp_head(s, 0);	/* 1xx */
	else if (m->hm_status == 101 || resp_head(s, 1) == -1) {
		stream_reset(s, NGHTTP2_INTERNAL_ERROR);
		return -1;
	}
	s->s_resp_started = 1;
	return 0;
}

/* The connection is gone: nothing more will come. */
static void
stream_check_gone(struct h2_stream *s)
{
	if (!s->s_gone || s->s_resp_done || s->s_dead || (s->s_bev != NULL &&
	    evbuffer_get_length(bufferevent_get_input(s->s_bev)) > 0))
		return;
	/* it ended without (all of) an answer */
	stream_reset(s, NGHTTP2_INTERNAL_ERROR);
}

void
h2_stream_poll(struct h2_stream *s)
{
	struct http_msg		*m = &s->s_resp;
	struct evbuffer		*in;
	struct evbuffer_iovec	 v;
	enum http_feed		 f;
	size_t			 used;

	if (s->s_bev == NULL || s->s_dead)
		return;
	in = bufferevent_get_input(s->s_bev);
	while (!s->s_resp_done && !s->s_dead) {
		if (evbuffer_get_length(s->s_out) >= H2_STREAM_BUF) {
			/* the client's window holds it: the conn waits */
			bufferevent_disable(s->s_bev, EV_READ);
			break;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
			if (!(m->hm_head_done && !m->hm_complete &&
			    (m->hm_no_body || m->hm_status < 200 ||
			    m->hm_status == 204 || m->hm_status == 304 ||
			    m->hm_framing == HTTP_BODY_NONE ||
			    (m->hm_framing == HTTP_BODY_LENGTH &&
			    m->hm_content_length == 0))))
				break;
			v.iov_base = (void *)"";	/* an empty body */
			v.iov_len = 0;
		}
		f = http_msg_feed(m, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		switch (f) {
		case HTTP_FEED_MORE:
			if (used == 0 && v.iov_len == 0)
				goto out;
			break;
		case HTTP_FEED_HEAD:
			if (stream_head_out(s) == 0)
				http_msg_resume(m);
			break;
		case HTTP_FEED_DONE:
			/* a message without a body completes with its head */
			if (!s->s_head_out && stream_head_out(s) == -1)
				break;
			s->s_head_out = 0;
			if (m->hm_status < 200) {
				int	no_body = m->hm_no_body;

				http_msg_reset(m);	/* the final one follows */
				m->hm_no_body = no_body;
				break;
			}
			s->s_resp_done = 1;
			if (s->s_grpc_deny)
				grpc_deny(s);
			else if (s->s_grpc_only) {
				if (resp_head(s, 2) == -1)
					stream_reset(s,
					    NGHTTP2_INTERNAL_ERROR);
			} else
				h2_body_resume(s->s_srv->h_sess, s->s_id,
				    &s->s_deferred);
			/* its exchange is audited: the connection is done */
			if (s->s_req_done)
				h2_stream_conn_end(s, NULL);
			break;
		case HTTP_FEED_UPGRADE:
		case HTTP_FEED_ERROR:
			stream_reset(s, NGHTTP2_INTERNAL_ERROR);
			break;
		}
	}
out:
	stream_check_gone(s);
}
