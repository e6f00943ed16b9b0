/*
 * The client side of HTTP/2 towards an origin that chose h2 in ALPN: one
 * nghttp2 client session per TLS connection (pooled per worker by
 * h2_pool.c), each request one stream. The exchange's connection still
 * speaks HTTP/1.1 to "its upstream": that upstream's bufferevent is one
 * end of a pair whose other end is the stream here, so the request head
 * and body it writes (after every stage: secrets, budget, metering) are
 * parsed (llhttp) into HEADERS and DATA, and the answer comes back as an
 * HTTP/1.1 response, chunked with its trailers (grpc-status), through
 * the same response hooks as any other. Both directions are bounded: the
 * answer's DATA is credited to the origin's window only once the
 * connection took it from the pair, and the connection's request body is
 * not read while H2_STREAM_BUF bytes wait for the origin's window.
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
#include "http/http_write.h"
#include "h2/h2.h"
#include "h2/h2_internal.h"
#include "util/log.h"
#include "util/util.h"

static void	cli_send(struct h2_cli *);

void
h2_cli_kick(struct h2_cli *h)
{
	if (!h->hc_dead)
		event_active(h->hc_kick, EV_TIMEOUT, 0);
}

static struct h2_cs *
cs_of(struct h2_cli *h, int32_t id)
{
	return nghttp2_session_get_stream_user_data(h->hc_sess, id);
}

/* The pair's end goes: the connection reads EOF after what it holds. */
static void
cs_detach(struct h2_cs *s)
{
	if (s->cs_bev == NULL)
		return;
	bufferevent_flush(s->cs_bev, EV_WRITE, BEV_FINISHED);
	bufferevent_free(s->cs_bev);
	s->cs_bev = NULL;
}

void
h2_cs_free(struct h2_cs *s)
{
	struct h2_cli	*h = s->cs_cli;

	if (s->cs_up != NULL)
		s->cs_up->u_h2 = NULL;
	if (s->cs_id > 0 && !s->cs_closed)
		(void)nghttp2_session_set_stream_user_data(h->hc_sess,
		    s->cs_id, NULL);
	cs_detach(s);
	http_msg_fini(&s->cs_req);
	evbuffer_free(s->cs_out);
	TAILQ_REMOVE(&h->hc_streams, s, cs_entry);
	h->hc_nstreams--;
	free(s);
	h2_pool_idle(h);
}

/* The stream's connection freed its upstream: cancel what is open. */
void
h2_cli_stream_gone(struct h2_cs *s)
{
	struct h2_cli	*h = s->cs_cli;

	s->cs_up = NULL;
	if (s->cs_id > 0 && !s->cs_closed && !h->hc_dead) {
		/* what it held is dropped: the connection's window back */
		if (s->cs_unacked > 0)
			(void)nghttp2_session_consume(h->hc_sess, s->cs_id,
			    s->cs_unacked);
		s->cs_unacked = 0;
		(void)nghttp2_submit_rst_stream(h->hc_sess, NGHTTP2_FLAG_NONE,
		    s->cs_id, NGHTTP2_CANCEL);
		h2_cli_kick(h);
	}
	h2_cs_free(s);
}

static ssize_t
req_data_cb(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2_cs	*s = src->ptr;
	ssize_t		 n;
	int		 resumed;

	(void)sess;
	(void)id;
	(void)arg;
	n = h2_body_read(s->cs_out, buf, len, s->cs_req_done, s->cs_bev,
	    flags, &s->cs_deferred, &resumed);
	if (resumed)
		h2_cli_kick(s->cs_cli);
	return n;
}

static void
req_body_cb(void *arg, const char *p, size_t len)
{
	struct h2_cs	*s = arg;

	evbuffer_add(s->cs_out, p, len);
	if (s->cs_id > 0)
		h2_body_resume(s->cs_cli->hc_sess, s->cs_id, &s->cs_deferred);
}

/* Names an HTTP/1.1 request carries that HTTP/2 must not. */
static int
req_field_dropped(const struct http_msg *m, const char *name, size_t len)
{
	return http_msg_is_hop(m, name, len) ||
	    util_strncaseeq(name, len, "host") ||
	    util_strncaseeq(name, len, "connection") ||
	    util_strncaseeq(name, len, "keep-alive") ||
	    util_strncaseeq(name, len, "proxy-connection") ||
	    util_strncaseeq(name, len, "transfer-encoding") ||
	    util_strncaseeq(name, len, "upgrade") ||
	    util_strncaseeq(name, len, "te");
}

static void
nv_set(nghttp2_nv *nv, const char *n, size_t nl, const char *v, size_t vl)
{
	nv->name = (uint8_t *)n;
	nv->namelen = nl;
	nv->value = (uint8_t *)v;
	nv->valuelen = vl;
	nv->flags = NGHTTP2_NV_FLAG_NONE;
}

/* The connection's request head as HEADERS: 0, or -1. */
static int
req_head(struct h2_cs *s)
{
	struct http_msg	*m = &s->cs_req;
	nghttp2_nv	 nv[HTTP_MAX_HEADERS + 5];
	nghttp2_data_provider dp;
	const char	*meth = http_msg_method(m), *auth = "", *v;
	size_t		 n = 0, i, total = 0, at = 0, alen = 0, vlen;
	char		*lower;
	int		 j, grpc = 0;
	int32_t		 id;

	if ((j = http_msg_find(m, "host", 0)) != -1)
		http_msg_value(m, j, &auth, &alen);
	for (j = 0; j < m->hm_nhdrs; j++)
		total += m->hm_hdrs[j].h_name_len;
	lower = xcalloc(1, total + 1);
	nv_set(&nv[n++], ":method", 7, meth, strlen(meth));
	nv_set(&nv[n++], ":scheme", 7, "https", 5);
	nv_set(&nv[n++], ":authority", 10, auth, alen);
	nv_set(&nv[n++], ":path", 5, http_msg_str(m, m->hm_url),
	    m->hm_url_len);
	for (j = 0; j < m->hm_nhdrs; j++) {
		const char	*name = http_msg_str(m, m->hm_hdrs[j].h_name);
		size_t		 nlen = m->hm_hdrs[j].h_name_len;

		if (req_field_dropped(m, name, nlen))
			continue;
		for (i = 0; i < nlen; i++)
			lower[at + i] = (char)tolower((unsigned char)name[i]);
		http_msg_value(m, j, &v, &vlen);
		if (util_strncaseeq(name, nlen, "content-type") &&
		    vlen >= 16 && memcmp(v, "application/grpc", 16) == 0)
			grpc = 1;
		nv_set(&nv[n++], lower + at, nlen, v, vlen);
		at += nlen;
	}
	/* HTTP/1 drops TE as hop-by-hop; gRPC servers require it */
	if (grpc)
		nv_set(&nv[n++], "te", 2, "trailers", 8);
	dp.source.ptr = s;
	dp.read_callback = req_data_cb;
	id = nghttp2_submit_request(s->cs_cli->hc_sess, NULL, nv, n,
	    m->hm_framing == HTTP_BODY_NONE ? NULL : &dp, s);
	free(lower);
	if (id < 0)
		return -1;
	s->cs_id = id;
	if (m->hm_framing == HTTP_BODY_NONE)
		s->cs_req_done = 1;
	return 0;
}

/* What the stream's connection wrote: the request, parsed. */
static void
cs_poll(struct h2_cs *s)
{
	struct http_msg		*m = &s->cs_req;
	struct evbuffer		*in;
	struct evbuffer_iovec	 v;
	enum http_feed		 f;
	size_t			 used;

	if (s->cs_bev == NULL || s->cs_req_done || s->cs_closed)
		return;
	in = bufferevent_get_input(s->cs_bev);
	while (!s->cs_req_done) {
		if (evbuffer_get_length(s->cs_out) >= H2_STREAM_BUF) {
			/* the origin's window holds it: the conn waits */
			bufferevent_disable(s->cs_bev, EV_READ);
			return;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
			if (!(m->hm_head_done && !m->hm_complete &&
			    m->hm_framing == HTTP_BODY_LENGTH &&
			    m->hm_content_length == 0))
				return;
			v.iov_base = (void *)"";
			v.iov_len = 0;
		}
		f = http_msg_feed(m, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		switch (f) {
		case HTTP_FEED_MORE:
			if (used == 0 && v.iov_len == 0)
				return;
			break;
		case HTTP_FEED_HEAD:
			if (req_head(s) == -1)
				goto fail;
			http_msg_resume(m);
			break;
		case HTTP_FEED_DONE:
			if (s->cs_id <= 0 && req_head(s) == -1)
				goto fail;
			s->cs_req_done = 1;
			h2_body_resume(s->cs_cli->hc_sess, s->cs_id,
			    &s->cs_deferred);
			break;
		case HTTP_FEED_UPGRADE:
		case HTTP_FEED_ERROR:
			goto fail;
		}
	}
	return;
fail:
	/* nothing answers: the connection reads EOF (upstream closed) */
	if (s->cs_id > 0)
		(void)nghttp2_submit_rst_stream(s->cs_cli->hc_sess,
		    NGHTTP2_FLAG_NONE, s->cs_id, NGHTTP2_INTERNAL_ERROR);
	s->cs_closed = 1;
	cs_detach(s);
}

/* The answer's DATA left the pair: credit the origin's window. */
static void
cs_credit(struct h2_cs *s)
{
	struct h2_cli	*h = s->cs_cli;

	if (s->cs_unacked == 0 || s->cs_closed || h->hc_dead)
		return;
	(void)nghttp2_session_consume(h->hc_sess, s->cs_id, s->cs_unacked);
	s->cs_unacked = 0;
	h2_cli_kick(h);	/* the WINDOW_UPDATE */
}

static void
pair_read_cb(struct bufferevent *bev, void *arg)
{
	struct h2_cs	*s = arg;

	(void)bev;
	cs_poll(s);
	h2_cli_kick(s->cs_cli);
}

static void
pair_write_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	cs_credit(arg);
}

static void
pair_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	(void)arg;	/* its end goes with upstream_free (stream_gone) */
}

/* A new stream on <h> for a connection; its end of the pair in *up. */
struct h2_cs *
h2_cs_new(struct h2_cli *h, struct bufferevent **up)
{
	struct bufferevent	*pair[2];
	struct h2_cs		*s;

	if (bufferevent_pair_new(h->hc_worker->w_base,
	    BEV_OPT_DEFER_CALLBACKS, pair) != 0)
		return NULL;
	s = xcalloc(1, sizeof(*s));
	s->cs_cli = h;
	s->cs_bev = pair[0];
	s->cs_out = evbuffer_new();
	http_msg_init(&s->cs_req, HTTP_REQUEST,
	    h->hc_worker->w_cfg->c_limits.l_header_bytes);
	s->cs_req.hm_on_body = req_body_cb;
	s->cs_req.hm_arg = s;
	bufferevent_setcb(s->cs_bev, pair_read_cb, pair_write_cb,
	    pair_event_cb, s);
	bufferevent_enable(s->cs_bev, EV_READ | EV_WRITE);
	TAILQ_INSERT_TAIL(&h->hc_streams, s, cs_entry);
	h->hc_nstreams++;
	h->hc_nopened++;
	*up = pair[1];
	return s;
}

static int
on_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *name,
    size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *arg)
{
	struct h2_cs	*s = cs_of(arg, f->hd.stream_id);
	struct evbuffer	*out;

	(void)sess;
	(void)flags;
	if (s == NULL || s->cs_bev == NULL || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	out = bufferevent_get_output(s->cs_bev);
	if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
		/* HTTP/2 has no reason phrase; an HTTP/1.1 client may
		   want one (http_reason_phrase) */
		s->cs_status = atoi((const char *)value);
		evbuffer_add_printf(out, "HTTP/1.1 %.*s %s\r\n", (int)vlen,
		    (const char *)value, http_reason_phrase(s->cs_status));
		return 0;
	}
	if (nlen > 0 && name[0] == ':')
		return 0;
	if (s->cs_head_done && !s->cs_chunked)
		return 0;	/* trailers of a sized body: not relayed */
	if (!s->cs_head_done && nlen == 14 &&
	    memcmp(name, "content-length", 14) == 0)
		s->cs_has_cl = 1;
	evbuffer_add(out, name, nlen);
	evbuffer_add(out, ": ", 2);
	evbuffer_add(out, value, vlen);
	evbuffer_add(out, "\r\n", 2);
	return 0;
}

static int
on_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2_cs	*s = cs_of(arg, f->hd.stream_id);

	(void)sess;
	if (s != NULL && s->cs_head_done && s->cs_chunked && s->cs_bev != NULL)
		bufferevent_write(s->cs_bev, "0\r\n", 3);	/* trailers */
	return 0;
}

static int
on_frame_recv(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2_cli	*h = arg;
	struct h2_cs	*s;
	int		 end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

	(void)sess;
	if (f->hd.type == NGHTTP2_GOAWAY) {
		/* no new streams; those above last_stream_id are closed
		   (on_stream_close) without an answer: their connections
		   retry on a new connection or answer 502 */
		h->hc_goaway = 1;
		return 0;
	}
	if (f->hd.type == NGHTTP2_SETTINGS &&
	    !(f->hd.flags & NGHTTP2_FLAG_ACK)) {
		h->hc_settled = 1;
		h2_pool_ready(h);	/* its room is known now */
		return 0;
	}
	if ((s = cs_of(h, f->hd.stream_id)) == NULL || s->cs_bev == NULL)
		return 0;
	/* after a 1xx nghttp2 files the final head under HCAT_HEADERS */
	if (f->hd.type == NGHTTP2_HEADERS && !s->cs_head_done) {
		if (s->cs_status >= 100 && s->cs_status < 200) {
			bufferevent_write(s->cs_bev, "\r\n", 2); /* interim */
			return 0;
		}
		s->cs_head_done = 1;
		s->cs_chunked = !s->cs_has_cl && !end && s->cs_status != 204 &&
		    s->cs_status != 304 && s->cs_req.hm_method != HTTP_HEAD;
		if (s->cs_chunked)
			bufferevent_write(s->cs_bev,
			    "Transfer-Encoding: chunked\r\n", 28);
		else if (!s->cs_has_cl && s->cs_status != 204 &&
		    s->cs_status != 304 && s->cs_req.hm_method != HTTP_HEAD)
			bufferevent_write(s->cs_bev, "Content-Length: 0\r\n",
			    19);
		bufferevent_write(s->cs_bev, "\r\n", 2);
	} else if (f->hd.type == NGHTTP2_HEADERS && s->cs_head_done) {
		if (s->cs_chunked)
			bufferevent_write(s->cs_bev, "\r\n", 2);
		s->cs_resp_done = 1;
		return 0;
	}
	if (end && s->cs_head_done && !s->cs_resp_done) {
		if (s->cs_chunked)
			bufferevent_write(s->cs_bev, "0\r\n\r\n", 5);
		s->cs_resp_done = 1;
	}
	return 0;
}

static int
on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t id,
    const uint8_t *p, size_t len, void *arg)
{
	struct h2_cs	*s = cs_of(arg, id);
	char		 size[24];

	(void)flags;
	if (s == NULL || s->cs_bev == NULL || !s->cs_head_done) {
		(void)nghttp2_session_consume(sess, id, len);
		return 0;
	}
	if (s->cs_chunked) {
		snprintf(size, sizeof(size), "%zx\r\n", len);
		bufferevent_write(s->cs_bev, size, strlen(size));
	}
	bufferevent_write(s->cs_bev, p, len);
	if (s->cs_chunked)
		bufferevent_write(s->cs_bev, "\r\n", 2);
	/* credited once the connection took it (pair_write_cb) */
	s->cs_unacked += len;
	return 0;
}

static int
on_stream_close(nghttp2_session *sess, int32_t id, uint32_t code, void *arg)
{
	struct h2_cs	*s = cs_of(arg, id);

	if (s == NULL)
		return 0;
	s->cs_closed = 1;
	/* what it got is the connection's now (cs_detach hands it over):
	   the connection's window must not shrink by it for good */
	if (s->cs_unacked > 0)
		(void)nghttp2_session_consume_connection(sess, s->cs_unacked);
	s->cs_unacked = 0;
	if (!s->cs_resp_done && code != NGHTTP2_NO_ERROR)
		log_info("HTTP/2 upstream %s: stream %d reset (%s)",
		    s->cs_cli->hc_addr, id, nghttp2_http2_strerror(code));
	/* an incomplete answer: the connection sees the upstream close */
	cs_detach(s);
	return 0;
}

/* The session is over: its streams' connections see the upstream close. */
static void
cli_end(struct h2_cli *h, const char *why)
{
	struct h2_cs	*s;

	if (h->hc_dead)
		return;
	if (why != NULL)
		log_info("HTTP/2 upstream %s: %s", h->hc_addr, why);
	h->hc_dead = 1;
	h2_pool_ready(h);
	TAILQ_FOREACH(s, &h->hc_streams, cs_entry) {
		s->cs_closed = 1;
		cs_detach(s);
	}
	h2_pool_idle(h);
}

static void
cli_recv(struct h2_cli *h)
{
	struct evbuffer		*in = bufferevent_get_input(h->hc_bev);
	struct evbuffer_iovec	 v;
	ssize_t			 n;

	while (!h->hc_dead && evbuffer_get_length(in) > 0) {
		if (evbuffer_get_length(bufferevent_get_output(h->hc_bev)) >=
		    CONN_HIWAT) {
			bufferevent_disable(h->hc_bev, EV_READ);
			h->hc_rd_off = 1;
			break;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		h->hc_in_recv = 1;
		n = nghttp2_session_mem_recv(h->hc_sess, v.iov_base,
		    v.iov_len);
		h->hc_in_recv = 0;
		if (n < 0) {
			cli_send(h);
			cli_end(h, nghttp2_strerror((int)n));
			return;
		}
		evbuffer_drain(in, (size_t)n);
	}
	cli_send(h);
}

static void
cli_send(struct h2_cli *h)
{
	const uint8_t	*p;
	ssize_t		 n;

	if (h->hc_in_recv || h->hc_dead)
		return;
	while (evbuffer_get_length(bufferevent_get_output(h->hc_bev)) <
	    CONN_HIWAT) {
		n = nghttp2_session_mem_send(h->hc_sess, &p);
		if (n < 0) {
			cli_end(h, nghttp2_strerror((int)n));
			return;
		}
		if (n == 0)
			break;
		bufferevent_write(h->hc_bev, p, (size_t)n);
	}
	if (!nghttp2_session_want_read(h->hc_sess) &&
	    !nghttp2_session_want_write(h->hc_sess))
		cli_end(h, NULL);
}

static void
cli_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	cli_recv(arg);
}

static void
cli_write_cb(struct bufferevent *bev, void *arg)
{
	struct h2_cli	*h = arg;

	(void)bev;
	if (h->hc_rd_off && !h->hc_dead) {
		h->hc_rd_off = 0;
		bufferevent_enable(h->hc_bev, EV_READ);
		cli_recv(h);
	} else
		cli_send(h);
}

static void
cli_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	cli_end(arg, "connection closed");
}

static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2_cli	*h = arg;
	struct h2_cs	*s, *next;

	(void)fd;
	(void)what;
	for (s = TAILQ_FIRST(&h->hc_streams); s != NULL; s = next) {
		next = TAILQ_NEXT(s, cs_entry);
		cs_poll(s);
	}
	if (h->hc_rd_off) {
		h->hc_rd_off = 0;
		bufferevent_enable(h->hc_bev, EV_READ);
		cli_recv(h);
	} else
		cli_send(h);
}

/* Room for one more stream: SETTINGS_MAX_CONCURRENT_STREAMS respected. */
int
h2_cli_has_room(struct h2_cli *h)
{
	uint32_t	max;

	/* before the origin's SETTINGS its limit is not known: streams
	   past it would be refused (and retried on new connections) */
	if (h->hc_dead || h->hc_goaway || !h->hc_settled ||
	    !nghttp2_session_check_request_allowed(h->hc_sess))
		return 0;
	max = nghttp2_session_get_remote_settings(h->hc_sess,
	    NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
	if (max > H2_CLI_MAX_STREAMS)
		max = H2_CLI_MAX_STREAMS;
	return h->hc_nstreams < max;
}

struct h2_cli *
h2_cli_new(struct worker *w, struct bufferevent *bev)
{
	struct h2_cli		*h = xcalloc(1, sizeof(*h));
	nghttp2_session_callbacks *cb;
	nghttp2_option		*opt;
	nghttp2_settings_entry	 iv[3];
	size_t			 hb = w->w_cfg->c_limits.l_header_bytes;
	int			 rv;

	TAILQ_INIT(&h->hc_streams);
	h->hc_worker = w;
	h->hc_bev = bev;
	if (nghttp2_session_callbacks_new(&cb) != 0)
		fatalx("nghttp2_session_callbacks_new");
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
	    on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb,
	    on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
	    on_stream_close);
	if (nghttp2_option_new(&opt) != 0)
		fatalx("nghttp2_option_new");
	/* windows are credited when a stream's connection took the bytes */
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_settings(opt, 32);
	nghttp2_option_set_max_outbound_ack(opt, 1000);
	nghttp2_option_set_max_continuations(opt, 8);
	rv = nghttp2_session_client_new2(&h->hc_sess, cb, h, opt);
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	if (rv != 0)
		fatalx("nghttp2_session_client_new2: %s", nghttp2_strerror(rv));
	iv[0].settings_id = NGHTTP2_SETTINGS_ENABLE_PUSH;
	iv[0].value = 0;
	iv[1].settings_id = NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE;
	iv[1].value = H2_STREAM_WINDOW;
	iv[2].settings_id = NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE;
	iv[2].value = hb > UINT32_MAX ? UINT32_MAX : (uint32_t)hb;
	(void)nghttp2_submit_settings(h->hc_sess, NGHTTP2_FLAG_NONE, iv, 3);
	(void)nghttp2_session_set_local_window_size(h->hc_sess,
	    NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW);
	h->hc_kick = event_new(w->w_base, -1, 0, kick_cb, h);
	bufferevent_setcb(bev, cli_read_cb, cli_write_cb, cli_event_cb, h);
	bufferevent_set_timeouts(bev, NULL, NULL);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	return h;
}

void
h2_cli_goaway(struct h2_cli *h)
{
	if (h->hc_dead)
		return;
	h->hc_goaway = 1;	/* no new streams; those open go on */
	if (h->hc_nstreams > 0)
		return;
	(void)nghttp2_session_terminate_session(h->hc_sess, NGHTTP2_NO_ERROR);
	cli_send(h);
}

void
h2_cli_free(struct h2_cli *h)
{
	struct h2_cs	*s;

	h->hc_dead = 1;
	while ((s = TAILQ_FIRST(&h->hc_streams)) != NULL) {
		if (s->cs_up != NULL)
			s->cs_up->u_h2 = NULL;
		s->cs_up = NULL;
		s->cs_closed = 1;
		h2_cs_free(s);
	}
	nghttp2_session_del(h->hc_sess);
	event_free(h->hc_kick);
	if (h->hc_idle != NULL)
		event_free(h->hc_idle);
	bufferevent_free(h->hc_bev);
	free(h);
}
