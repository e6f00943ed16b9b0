/*
 * The server side of HTTP/2 on an intercepted TLS session: one nghttp2
 * session over the connection's TLS bufferevent, its streams in
 * h2_stream.c. What a hostile peer can make us hold is bounded here:
 * frames are read only while the TLS output holds less than CONN_HIWAT
 * (nghttp2's queued SETTINGS and PING acknowledgements cannot pile up
 * behind a peer that does not read), request bodies by the windows we
 * give (credited only once the stream's connection took the bytes), the
 * header list by limits.header_bytes, streams by limits.h2_max_streams,
 * resets, SETTINGS entries and CONTINUATION frames by nghttp2's options
 * (CVE-2023-44487, CVE-2024-28182), and WINDOW_UPDATE frames by what we
 * sent (GOAWAY ENHANCE_YOUR_CALM past that).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_internal.h"
#include "conn/worker.h"
#include "h2/h2.h"
#include "h2/h2_internal.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

#define H2_RESET_BURST	100	/* RST_STREAM frames, then 33 a second */
#define H2_RESET_RATE	33
#define H2_MAX_SETTINGS	32	/* entries in one SETTINGS frame */
#define H2_MAX_ACKS	1000	/* SETTINGS/PING ACKs queued, at most */
/* WINDOW_UPDATE frames a client may send: this many, plus a few per
   stream it opened and per DATA frame we sent (as Envoy counts them);
   past that it is a flood (it costs us work, it asks for nothing) */
#define H2_WU_FREE	1000
#define H2_WU_PER_STREAM 2
#define H2_WU_PER_DATA	10

static void	srv_send(struct h2_srv *);
static void	srv_end(struct h2_srv *, const char *why);
static int	srv_stop(struct h2_srv *, const char *why);

int
h2_alpn_is_h2(SSL *ssl)
{
	const unsigned char	*p;
	unsigned int		 n;

	if (ssl == NULL)
		return 0;
	SSL_get0_alpn_selected(ssl, &p, &n);
	return n == 2 && memcmp(p, "h2", 2) == 0;
}

void
h2_srv_kick(struct h2_srv *h)
{
	if (!h->h_ending)
		event_active(h->h_kick, EV_TIMEOUT, 0);
}

/* nghttp2 callbacks: a request's frames */

static int
on_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2_srv		*h = arg;
	const struct cfg_limits	*l = &h->h_conn->c_cfg->c_limits;

	if (f->hd.type != NGHTTP2_HEADERS ||
	    f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	h->h_nopened++;
	if (h->h_nstreams >= l->l_h2_max_streams) {
		/* past SETTINGS_MAX_CONCURRENT_STREAMS before it was acked */
		(void)nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE,
		    f->hd.stream_id, NGHTTP2_REFUSED_STREAM);
		return 0;
	}
	(void)nghttp2_session_set_stream_user_data(sess, f->hd.stream_id,
	    h2_stream_new(h, f->hd.stream_id));
	return 0;
}

static int
on_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *name,
    size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *arg)
{
	struct h2_stream	*s;

	(void)flags;
	(void)arg;
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s == NULL || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	if (f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;	/* trailers: not relayed to HTTP/1 */
	return h2_stream_header(s, name, nlen, value, vlen);
}

static int
on_frame_recv(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2_srv		*h = arg;
	struct h2_stream	*s;

	h->h_active_ms = util_now_ms();
	if (f->hd.type == NGHTTP2_WINDOW_UPDATE && ++h->h_nwu == H2_WU_FREE +
	    H2_WU_PER_STREAM * h->h_nopened + H2_WU_PER_DATA * h->h_ndata + 1) {
		/* nghttp2 ignores the rest of the input from now on */
		log_info("HTTP/2 client %s: WINDOW_UPDATE flood",
		    h->h_conn->c_client);
		(void)nghttp2_session_terminate_session(sess,
		    NGHTTP2_ENHANCE_YOUR_CALM);
		return 0;
	}
	if (f->hd.stream_id == 0)
		return 0;
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s == NULL)
		return 0;
	switch (f->hd.type) {
	case NGHTTP2_HEADERS:
		if (f->headers.cat == NGHTTP2_HCAT_REQUEST)
			h2_stream_head_done(s,
			    (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0);
		else if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
			h2_stream_req_end(s);	/* after trailers */
		break;
	case NGHTTP2_DATA:
		if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
			h2_stream_req_end(s);
		break;
	case NGHTTP2_RST_STREAM:
		s->s_client_rst = 1;
		break;
	}
	return 0;
}

static int
on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t id,
    const uint8_t *p, size_t len, void *arg)
{
	struct h2_stream	*s;

	(void)flags;
	(void)arg;
	s = nghttp2_session_get_stream_user_data(sess, id);
	if (s == NULL) {
		/* nobody will read it: credit the window now */
		(void)nghttp2_session_consume(sess, id, len);
		return 0;
	}
	h2_stream_data(s, p, len);
	return 0;
}

static int
on_stream_close(nghttp2_session *sess, int32_t id, uint32_t code, void *arg)
{
	struct h2_stream	*s;

	(void)arg;
	s = nghttp2_session_get_stream_user_data(sess, id);
	if (s == NULL)
		return 0;
	(void)nghttp2_session_set_stream_user_data(sess, id, NULL);
	if (s->s_unacked > 0)
		(void)nghttp2_session_consume_connection(sess, s->s_unacked);
	s->s_unacked = 0;
	h2_stream_free(s, s->s_client_rst ? "client reset the stream "
	    "(HTTP/2 RST_STREAM)" : code != NGHTTP2_NO_ERROR ?
	    "HTTP/2 stream reset" : NULL);
	return 0;
}

/* Our answer ended before the request did: the client may stop (RFC 9113
 * 8.1, a NO_ERROR reset). */
static int
on_frame_send(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2_stream	*s;

	if (f->hd.type == NGHTTP2_DATA)
		((struct h2_srv *)arg)->h_ndata++;
	if ((f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS) ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s != NULL && !s->s_req_done)
		(void)nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE,
		    f->hd.stream_id, NGHTTP2_NO_ERROR);
	return 0;
}

/* I/O */

/* Feed what the client sent to nghttp2, while its answers can be sent. */
static void
srv_recv(struct h2_srv *h)
{
	struct bufferevent	*bev = h->h_conn->c_bev;
	struct evbuffer		*in = bufferevent_get_input(bev);
	struct evbuffer_iovec	 v;
	ssize_t			 n;

	while (!h->h_ending && evbuffer_get_length(in) > 0) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) >=
		    CONN_HIWAT) {
			/* the client does not read: stop reading it */
			bufferevent_disable(bev, EV_READ);
			h->h_rd_off = 1;
			break;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		h->h_in_recv = 1;
		n = nghttp2_session_mem_recv(h->h_sess, v.iov_base,
		    v.iov_len);
		h->h_in_recv = 0;
		if (n < 0) {
			log_info("%s: sandbox %s, %s: HTTP/2: %s",
			    h->h_conn->c_client, h->h_conn->c_sbx->sb_id,
			    h->h_conn->c_tls_host, nghttp2_strerror((int)n));
			srv_send(h);	/* the GOAWAY nghttp2 queued */
			srv_end(h, "HTTP/2 protocol error from the client");
			return;
		}
		evbuffer_drain(in, (size_t)n);
	}
	srv_send(h);
}

/*
 * The frames nghttp2 has ready, gathered in the session's c_pend and
 * handed to the TLS bufferevent in one go (conn_client_flush): one
 * SSL_write, one record, for all the frames of a loop turn (a 1 KiB
 * answer is a HEADERS and a DATA frame; with many streams, several
 * answers) instead of one per frame.
 */
static void
srv_send(struct h2_srv *h)
{
	struct conn		*c = h->h_conn;
	struct bufferevent	*bev = c->c_bev;
	const uint8_t		*p;
	ssize_t			 n;

	if (h->h_in_recv || h->h_ending)
		return;
	while (evbuffer_get_length(bufferevent_get_output(bev)) +
	    evbuffer_get_length(c->c_pend) < CONN_HIWAT) {
		n = nghttp2_session_mem_send(h->h_sess, &p);
		if (n < 0) {
			conn_client_flush(c);
			srv_end(h, "HTTP/2 session failed");
			return;
		}
		if (n == 0)
			break;
		evbuffer_add(c->c_pend, p, (size_t)n);
	}
	conn_client_flush(c);
	if (!nghttp2_session_want_read(h->h_sess) &&
	    !nghttp2_session_want_write(h->h_sess))
		srv_end(h, NULL);
}

static void
srv_read_cb(struct bufferevent *bev, void *arg)
{
	struct h2_srv	*h = arg;
	struct conn	*c = h->h_conn;

	(void)bev;
	conn_ref(c);
	conn_touch(c);
	h->h_active_ms = util_now_ms();
	srv_recv(h);
	conn_unref(c);
}

static void
srv_write_cb(struct bufferevent *bev, void *arg)
{
	struct h2_srv	*h = arg;
	struct conn	*c = h->h_conn;

	(void)bev;
	conn_ref(c);
	if (h->h_rd_off && !h->h_ending) {
		h->h_rd_off = 0;
		conn_bev_enable(c->c_bev, EV_READ);
		srv_recv(h);		/* what waited in the input */
	} else
		srv_send(h);
	conn_unref(c);
}

static void
srv_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct h2_srv	*h = arg;
	struct conn	*c = h->h_conn;

	(void)bev;
	(void)what;
	conn_ref(c);
	srv_stop(h, "client closed the connection");
	conn_close(c, AUD_R_CLIENT_CLOSED);
	conn_unref(c);
}

static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2_srv		*h = arg;
	struct h2_stream	*s, *next;
	struct conn		*c = h->h_conn;

	(void)fd;
	(void)what;
	conn_ref(c);
	for (s = TAILQ_FIRST(&h->h_streams); s != NULL && !h->h_ending;
	    s = next) {
		next = TAILQ_NEXT(s, s_entry);
		h2_stream_poll(s);
	}
	srv_send(h);
	conn_unref(c);
}

/* No stream for limits.idle_timeout: GOAWAY, then the end. */
static void
idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2_srv		*h = arg;
	struct conn		*c = h->h_conn;
	uint64_t		 idle = c->c_cfg->c_limits.l_idle_timeout_ms;
	uint64_t		 now = util_now_ms();
	struct timeval		 tv;

	(void)fd;
	(void)what;
	if (h->h_ending)
		return;
	conn_ref(c);
	if ((h->h_nstreams == 0 && now - h->h_active_ms >= idle) ||
	    c->c_worker->w_stopping) {
		(void)nghttp2_session_terminate_session(h->h_sess,
		    NGHTTP2_NO_ERROR);
		srv_send(h);
	}
	if (!h->h_ending) {
		tv.tv_sec = (time_t)(idle / 1000);
		tv.tv_usec = (suseconds_t)(idle % 1000) * 1000;
		if (c->c_worker->w_stopping)
			tv.tv_sec = 1, tv.tv_usec = 0;
		evtimer_add(h->h_idle, &tv);
	}
	conn_unref(c);
}

/* Every stream's connection ends (<why> for those under way). */
static void
srv_end_streams(struct h2_srv *h, const char *why)
{
	struct h2_stream	*s;

	TAILQ_FOREACH(s, &h->h_streams, s_entry)
		h2_stream_conn_end(s, why);
}

/*
 * The session is over (GOAWAY exchanged, an error, the client gone):
 * the streams' connections end, the connection gets its own callbacks
 * back and closes once what is queued is written.
 */
static int
srv_stop(struct h2_srv *h, const char *why)
{
	if (h->h_ending)
		return -1;
	h->h_ending = 1;
	evtimer_del(h->h_idle);
	event_del(h->h_kick);
	srv_end_streams(h, why != NULL ? why : "HTTP/2 connection ended");
	return 0;
}

static void
srv_end(struct h2_srv *h, const char *why)
{
	struct conn	*c = h->h_conn;

	if (srv_stop(h, why) == -1 || c->c_closing)
		return;
	conn_set_client_callbacks(c);
	conn_close_when_flushed(c);
}

int
h2_srv_start(struct conn *c)
{
	const struct cfg_limits	*l = &c->c_cfg->c_limits;
	struct h2_srv		*h;
	nghttp2_session_callbacks *cb;
	nghttp2_option		*opt;
	nghttp2_settings_entry	 iv[4];
	struct timeval		 tv;
	int			 rv;

	h = xcalloc(1, sizeof(*h));
	TAILQ_INIT(&h->h_streams);
	h->h_conn = c;
	h->h_active_ms = util_now_ms();
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
	nghttp2_session_callbacks_set_on_frame_send_callback(cb,
	    on_frame_send);
	if (nghttp2_option_new(&opt) != 0)
		fatalx("nghttp2_option_new");
	/* windows are credited when a stream's connection took the bytes */
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_settings(opt, H2_MAX_SETTINGS);
	nghttp2_option_set_max_outbound_ack(opt, H2_MAX_ACKS);
	nghttp2_option_set_stream_reset_rate_limit(opt, H2_RESET_BURST,
	    H2_RESET_RATE);
	nghttp2_option_set_max_continuations(opt, 8);
	rv = nghttp2_session_server_new2(&h->h_sess, cb, h, opt);
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	if (rv != 0)
		fatalx("nghttp2_session_server_new2: %s", nghttp2_strerror(rv));
	iv[0].settings_id = NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS;
	iv[0].value = (uint32_t)l->l_h2_max_streams;
	iv[1].settings_id = NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE;
	iv[1].value = H2_STREAM_WINDOW;
	iv[2].settings_id = NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE;
	iv[2].value = l->l_header_bytes > UINT32_MAX ? UINT32_MAX :
	    (uint32_t)l->l_header_bytes;
	iv[3].settings_id = NGHTTP2_SETTINGS_ENABLE_PUSH;
	iv[3].value = 0;
	(void)nghttp2_submit_settings(h->h_sess, NGHTTP2_FLAG_NONE, iv, 4);
	(void)nghttp2_session_set_local_window_size(h->h_sess,
	    NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW);
	h->h_kick = event_new(c->c_worker->w_base, -1, 0, kick_cb, h);
	h->h_idle = evtimer_new(c->c_worker->w_base, idle_cb, h);
	c->c_h2 = h;
	/* the session's timers from now on; no exchange on the connection
	   itself (each stream has its own) */
	evtimer_del(c->c_timer);
	c->c_state = CONN_FORWARD;
	bufferevent_setcb(c->c_bev, srv_read_cb, srv_write_cb, srv_event_cb,
	    h);
	conn_bev_enable(c->c_bev, EV_READ | EV_WRITE);
	tv.tv_sec = (time_t)(l->l_header_timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(l->l_header_timeout_ms % 1000) * 1000;
	evtimer_add(h->h_idle, &tv);
	srv_recv(h);	/* the preface may have come with the handshake */
	return 0;
}

void
h2_srv_drain(struct h2_srv *h)
{
	struct conn	*c = h->h_conn;

	if (h->h_ending)
		return;
	conn_ref(c);
	(void)nghttp2_submit_goaway(h->h_sess, NGHTTP2_FLAG_NONE,
	    nghttp2_session_get_last_proc_stream_id(h->h_sess),
	    NGHTTP2_NO_ERROR, NULL, 0);
	srv_send(h);
	conn_unref(c);
}

void
h2_srv_free(struct h2_srv *h)
{
	struct h2_stream	*s;

	h->h_ending = 1;
	srv_end_streams(h, "HTTP/2 connection ended");
	h->h_conn->c_h2 = NULL;
	nghttp2_session_del(h->h_sess);		/* no callbacks */
	while ((s = TAILQ_FIRST(&h->h_streams)) != NULL)
		h2_stream_free(s, NULL);
	event_free(h->h_kick);
	event_free(h->h_idle);
	free(h);
}
