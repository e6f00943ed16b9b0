/*
 * The explicit-proxy connection: one client, one request at a time,
 * streaming both ways with backpressure from bufferevent watermarks.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <openssl/crypto.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_internal.h"
#include "conn/conn_reload.h"
#include "conn/worker.h"
#include "dns/dns.h"
#include "conn/conn_slots.h"
#include "dns/net_self.h"
#include "geo/geo.h"
#include "http/http_target.h"
#include "http/http_write.h"
#include "budget/bud.h"
#include "policy/pol.h"
#include "policy/pol_ask.h"
#include "policy/pol_mcp.h"
#include "h2/h2.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "secrets/sec_ws.h"
#include "sbx/sbx.h"
#include "sbx/sbx_fleet.h"
#include "util/log.h"
#include "util/util.h"

static void	client_read_cb(struct bufferevent *, void *);
static void	client_event_cb(struct bufferevent *, short, void *);
static void	upstream_read_cb(struct bufferevent *, void *);
static void	upstream_write_cb(struct bufferevent *, void *);
static void	upstream_read_more(struct bufferevent *);
static void	upstream_event_cb(struct bufferevent *, short, void *);
static int	upstream_eof(struct conn *);
static void	upstream_closed(struct conn *);
static void	conn_feed_request_loop(struct conn *);
static void	feed_request(struct conn *);

/*
 * A connection's frames (nginx's r->count with its posted requests, h2o's
 * deferred work): every callback that may close or feed <c> holds a
 * reference for its duration (conn_ref ... conn_unref). Under one,
 * conn_close() only marks the connection and conn_feed_request() only
 * asks; what was asked runs once, in order, when the outermost frame
 * unwinds: the request loop (again while something inside it asked, e.g.
 * a reply finished or a pooled upstream was ready), the stages' flow
 * hook, then the free. So nothing ever runs re-entered: not the request
 * loop under itself or under llhttp's callbacks, not a free under a
 * caller that still holds <c>.
 */
void
conn_ref(struct conn *c)
{
	c->c_refs++;
}

void
conn_unref(struct conn *c)
{
	if (c->c_refs == 1) {
		while (c->c_feed_asked && !c->c_closing) {
			c->c_feed_asked = 0;
			feed_request(c);
		}
		if (!c->c_closing)
			conn_pipe_flow(c);	/* the stages see what moved */
	}
	if (--c->c_refs == 0 && c->c_closing)
		conn_free(c);
}

void
conn_touch(struct conn *c)
{
	c->c_active_ms = util_now_ms();
}

void
conn_timer_arm(struct conn *c, uint64_t ms)
{
	struct timeval	tv;

	c->c_deadline_ms = util_now_ms() + ms;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(c->c_timer, &tv);
}

/* In HEAD state: idle wait for a first byte, else the head deadline. */
static void
timer_head(struct conn *c)
{
	const struct cfg_limits	*l = &c->c_cfg->c_limits;

	conn_timer_arm(c, conn_slot_bound_ms(c, c->c_nreq == 0 ?
	    l->l_header_timeout_ms : l->l_idle_timeout_ms));
}

/* The exchange is over (audited or never begun): free what it held. */
static void
xchg_clear(struct conn *c, struct xchg *x)
{
	sec_req_free(x->x_sec.s_req);
	sec_trip_free(x->x_sec.s_trip);
	sec_body_free(x->x_sec.s_body);
	sec_ws_free(x->x_sec.s_ws[0]);
	sec_ws_free(x->x_sec.s_ws[1]);
	meter_free(x->x_bud.b_meter);
	sse_filt_free(x->x_bud.b_filt);
	mcp_filt_free(x->x_mcp.m_filt);
	if (x->x_answer != NULL)
		evbuffer_free(x->x_answer);
	free(x->x_path);
	free(x->x_query);
	if (x->x_queued)
		TAILQ_REMOVE(&c->c_xq, x, x_entry);
	memset(x, 0, offsetof(struct xchg, x_host));
	XCHG_TEXT_CLEAR(x);
}

void
conn_req_clear(struct conn *c)
{
	xchg_clear(c, c->c_x);
	if (c->c_r.r_body != NULL)
		evbuffer_free(c->c_r.r_body);
	memset(&c->c_r, 0, offsetof(struct conn_req, r_addrs));
	c->c_r.r_pend_reason[0] = '\0';
}

static void
req_begin(struct conn *c)
{
	conn_req_clear(c);
	TAILQ_INSERT_TAIL(&c->c_xq, c->c_x, x_entry);
	c->c_x->x_queued = 1;
	c->c_x->x_active = 1;
	c->c_x->x_start_us = util_now_us();
	c->c_x->x_start_wall = util_wall_ms();
	c->c_x->x_status = -1;
	c->c_x->x_port = -1;
	c->c_x->x_proto = c->c_tls ? "https" : "http";
	c->c_x->x_tls = c->c_tls ? "intercept" : "none";
	worker_request_id(c->c_worker, c->c_x->x_id, sizeof(c->c_x->x_id));
}


/*
 * Enable only what is not enabled yet: enabling a TLS filter also runs its
 * read and write paths (an SSL_read attempt, the OpenSSL error queue
 * cleared), which is wasted when nothing had stopped it.
 */
void
conn_bev_enable(struct bufferevent *bev, short what)
{
	short	missing = what & ~bufferevent_get_enabled(bev);

	if (missing != 0)
		bufferevent_enable(bev, missing);
}

/*
 * Bound what one side buffers (CONN_HIWAT). A socket reads at most that
 * per callback. A TLS filter gets no read high-watermark: libevent 2.1
 * re-enables reading at every change to the input of a bufferevent with
 * one, and for a filter that is an SSL_read attempt each time (several
 * per record); it decrypts what its socket read (16 KiB at most), and
 * backpressure's bufferevent_disable() stops it. A filter moves its
 * output into its socket's at once, so that socket gets the write
 * high-watermark: the filter then keeps the excess in its own output,
 * which is what backpressure measures (else a slow reader would make us
 * hold a whole download).
 */
void
conn_bev_bound(struct bufferevent *bev)
{
	struct bufferevent	*under = bufferevent_get_underlying(bev);

	if (under == NULL)
		bufferevent_setwatermark(bev, EV_READ, 0, CONN_HIWAT);
	else
		bufferevent_setwatermark(under, EV_WRITE, 0, CONN_HIWAT);
}

void
conn_set_client_callbacks(struct conn *c)
{
	bufferevent_setcb(c->c_bev, client_read_cb, conn_client_write_cb,
	    client_event_cb, c);
	conn_bev_bound(c->c_bev);
	conn_bev_enable(c->c_bev, EV_READ | EV_WRITE);
}

void
conn_accept(struct worker *w, int fd, const struct sockaddr *sa, int socklen,
    int transparent)
{
	struct conn	*c;
	struct net_addr	 na;
	const char	*why;
	char		 ip[INET6_ADDRSTRLEN];
	int		 one = 1, port = 0;

	c = xcalloc(1, sizeof(*c));
	c->c_x = &c->c_x0;
	TAILQ_INIT(&c->c_xq);
	c->c_worker = w;
	c->c_cfg = cfg_ref(w->w_cfg);
	c->c_listener = transparent ? -1 : w->w_accept_listener;
	if (net_addr_from_sockaddr(sa, &na) == 0) {
		net_addr_format(&na, ip, sizeof(ip));
		port = sa->sa_family == AF_INET ?
		    ntohs(((const struct sockaddr_in *)sa)->sin_port) :
		    ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
		snprintf(c->c_client, sizeof(c->c_client),
		    na.na_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip, port);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->c_bev = bufferevent_socket_new(w->w_base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->c_pend = evbuffer_new();
	if (c->c_bev == NULL || c->c_pend == NULL) {
		if (c->c_bev != NULL)
			bufferevent_free(c->c_bev);
		else
			close(fd);
		if (c->c_pend != NULL)
			evbuffer_free(c->c_pend);
		cfg_unref(c->c_cfg);
		free(c);
		worker_conn_gone();
		return;
	}
	http_msg_init(&c->c_req, HTTP_REQUEST, c->c_cfg->c_limits.l_header_bytes);
	http_msg_init(&c->c_resp, HTTP_RESPONSE, c->c_cfg->c_limits.l_header_bytes);
	c->c_req.hm_on_body = conn_request_body_cb;
	c->c_req.hm_arg = c;
	c->c_resp.hm_on_body = conn_response_body_cb;
	c->c_resp.hm_arg = c;
	c->c_timer = evtimer_new(w->w_base, conn_timer_cb, c);
	TAILQ_INSERT_TAIL(&w->w_conns, c, c_entry);
	w->w_nconns++;
	conn_touch(c);

	conn_set_client_callbacks(c);
	why = w->w_overload;
	if (why == NULL &&
	    worker_conn_count() > c->c_cfg->c_limits.l_max_connections)
		why = "gateway connection limit reached";
	if (why == NULL && !transparent)
		why = conn_slot_take(c, sa);	/* until it identifies */
	timer_head(c);

	if (why != NULL) {
		req_begin(c);
		if (transparent) {
			snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason),
			    "%s", why);
			c->c_x->x_why = AUD_R_OVERLOADED;
			conn_close(c, AUD_R_OVERLOADED);
		} else
			conn_reply_error(c, AUD_R_OVERLOADED, why, 1);
		return;
	}
	if (transparent == CONN_ACCEPT_SOCKS5)
		conn_socks5_begin(c, sa);
	else if (transparent)
		conn_transparent_begin(c, fd, sa);
}

/* A transparent connection is audited as one tunnel until its first
 * bytes show otherwise. */
void
req_begin_transparent(struct conn *c)
{
	req_begin(c);
	c->c_x->x_proto = "tunnel";
	c->c_r.r_connect = 1;
}

/* Answer the current request from the gateway; see conn_reply.c. */
void
conn_deny(struct conn *c, enum aud_reason why, const char *reason)
{
	/* a body we will not read makes the connection unusable */
	int close = !c->c_r.r_req_done && c->c_r.r_body == NULL &&
	    c->c_req.hm_framing != HTTP_BODY_NONE &&
	    !(c->c_req.hm_framing == HTTP_BODY_LENGTH &&
	    c->c_req.hm_content_length == 0);

	/* inside a tunnel the framing of what follows is in doubt */
	if (aud_reason(why)->ri_status == 400 &&
	    (c->c_tls || c->c_tunnel_http))
		close = 1;
	conn_reply_error(c, why, reason, close || !c->c_r.r_keepalive);
}

void
conn_upstream_ready(struct conn *c)
{
	struct upstream	*u = c->c_up;

	util_copy_str(c->c_x->x_upstream, u->u_addr,
	    sizeof(c->c_x->x_upstream));
	util_copy_str(c->c_x->x_via, u->u_via, sizeof(c->c_x->x_via));
	bufferevent_setcb(u->u_bev, upstream_read_cb, upstream_write_cb,
	    upstream_event_cb, c);
	conn_bev_bound(u->u_bev);
	bufferevent_set_timeouts(u->u_bev, NULL, NULL);
	conn_bev_enable(u->u_bev, EV_READ | EV_WRITE);
	conn_touch(c);
	if (c->c_r.r_connect) {
		conn_tunnel_start(c);
		return;
	}
	c->c_state = CONN_FORWARD;
	http_msg_reset(&c->c_resp);
	c->c_resp.hm_no_body = c->c_req.hm_method == HTTP_HEAD;
	conn_request_head_write(c);
	/* upstream_timeout runs once the request is sent; before, idleness */
	conn_timer_arm(c, c->c_r.r_req_done ?
	    c->c_cfg->c_limits.l_upstream_timeout_ms :
	    c->c_cfg->c_limits.l_idle_timeout_ms);
	http_msg_resume(&c->c_req);
	conn_feed_request(c);
}

void
conn_upstream_failed(struct conn *c, enum aud_reason why,
    const char *reason)
{
	h2_pool_forget(c);
	if (c->c_up != NULL) {
		upstream_free(c->c_up);
		c->c_up = NULL;
	}
	if (c->c_r.r_resp_started) {
		/* too late for an answer: cut the client off */
		conn_cut(c, reason);
		return;
	}
	conn_deny(c, why, reason);
}

/* Feed buffered client bytes to the request parser: when the outermost
 * frame unwinds (conn_unref), or now, under a frame, outside any. */
void
conn_feed_request(struct conn *c)
{
	c->c_feed_asked = 1;
	if (c->c_refs > 0)
		return;
	conn_ref(c);
	conn_unref(c);
}

static void
feed_request(struct conn *c)
{
	conn_feed_request_loop(c);
	if (c->c_client_eof && !c->c_closing && c->c_state == CONN_FORWARD &&
	    !c->c_r.r_req_done && evbuffer_get_length(
	    bufferevent_get_input(c->c_bev)) == 0) {
		/* the client half-closed before its body was complete */
		snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason),
		    "client closed mid-request");
		conn_close(c, AUD_R_CLIENT_CLOSED);
	}
}

static void
conn_feed_request_loop(struct conn *c)
{
	struct evbuffer		*in = bufferevent_get_input(c->c_bev);
	struct evbuffer_iovec	 v;
	enum http_feed		 f;
	size_t			 used, room;

	while (!c->c_closing && (c->c_state == CONN_HEAD ||
	    c->c_state == CONN_BODY_BUFFER ||
	    (c->c_state == CONN_FORWARD && !c->c_r.r_req_done)) &&
	    (evbuffer_get_length(in) > 0 || (c->c_state != CONN_HEAD &&
	    conn_msg_empty_body_left(&c->c_req)))) {
		if (c->c_up != NULL && evbuffer_get_length(
		    bufferevent_get_output(c->c_up->u_bev)) >= CONN_HIWAT) {
			/* upstream_write_cb resumes us */
			bufferevent_disable(c->c_bev, EV_READ);
			return;
		}
		if (c->c_state == CONN_HEAD && !c->c_x->x_active) {
			req_begin(c);
			/* the head deadline runs from its first byte */
			conn_timer_arm(c, conn_slot_bound_ms(c,
			    c->c_cfg->c_limits.l_header_timeout_ms));
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
			v.iov_base = (void *)"";
			v.iov_len = 0;
		} else if (c->c_state == CONN_FORWARD &&
		    (room = conn_pipe_room(c, 1)) < v.iov_len) {
			if (room == 0) {
				/* the budget's next byte grant resumes us */
				bufferevent_disable(c->c_bev, EV_READ);
				return;
			}
			v.iov_len = room;
		}
		f = http_msg_feed(&c->c_req, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		if (conn_pipe_pending(c))
			return;
		if (c->c_r.r_body_too_large) {
			c->c_x->x_allowed = 0;
			conn_reply_error(c, AUD_R_BODY_TOO_LARGE, "request "
			    "body over limits.body_bytes (needed whole for "
			    "signing)", 1);
			return;
		}
		switch (f) {
		case HTTP_FEED_MORE:
			break;
		case HTTP_FEED_HEAD:
			conn_on_request_head(c);
			break;
		case HTTP_FEED_DONE:
			conn_request_body_end(c);
			if (!c->c_r.r_resp_started)
				conn_timer_arm(c,
				    c->c_cfg->c_limits.l_upstream_timeout_ms);
			if (c->c_state == CONN_BODY_BUFFER) {
				conn_body_buffered(c);
				break;
			}
			if (c->c_r.r_resp_done)
				conn_request_finished(c);
			break;
		case HTTP_FEED_UPGRADE:
			/* websocket request sent; the 101 decides */
			c->c_r.r_req_done = 1;
			c->c_r.r_keepalive = 0;
			return;
		case HTTP_FEED_ERROR:
			if (!c->c_x->x_active)
				req_begin(c);
			conn_reply_error(c,
			    c->c_req.hm_err_status == 431 ?
			    AUD_R_HEADERS_TOO_LARGE :
			    c->c_req.hm_err_status == 414 ? AUD_R_URI_TOO_LONG :
			    c->c_req.hm_err_status == 501 ?
			    AUD_R_NOT_IMPLEMENTED :
			    c->c_req.hm_err_status == 505 ?
			    AUD_R_VERSION_NOT_SUPPORTED : AUD_R_BAD_REQUEST,
			    c->c_req.hm_err_reason, 1);
			return;
		}
	}
}

/* Both directions of the request are done (or the response is). */
void
conn_request_finished(struct conn *c)
{
	struct upstream	*u = c->c_up;
	int		 reuse_up, reuse_client;

	if (!c->c_r.r_resp_done)
		return;
	reuse_up = u != NULL && c->c_r.r_req_done &&
	    c->c_resp.hm_keepalive && c->c_resp.hm_framing != HTTP_BODY_EOF &&
	    evbuffer_get_length(bufferevent_get_input(u->u_bev)) == 0;
	reuse_client = c->c_r.r_keepalive && c->c_r.r_req_done &&
	    !c->c_worker->w_stopping;
	conn_audit(c);
	c->c_nreq++;
	c->c_up = NULL;
	if (u != NULL) {
		if (reuse_up)
			upstream_pool_put(c->c_worker, u);
		else
			upstream_free(u);
	}
	if (!reuse_client) {
		conn_close_when_flushed(c);
		return;
	}
	conn_req_clear(c);
	http_msg_reset(&c->c_req);
	c->c_state = CONN_HEAD;
	conn_bev_enable(c->c_bev, EV_READ);
	timer_head(c);
	/* a pipelined request may already be waiting */
	conn_feed_request(c);
}

static void
client_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;

	conn_ref(c);
	conn_touch(c);
	if (c->c_state == CONN_TUNNEL)
		conn_tunnel_start(c);	/* pumps */
	else if (c->c_state == CONN_TLS_PEEK)
		conn_tls_peek(c);
	else if (c->c_state == CONN_TRANS_PEEK)
		conn_transparent_peek(c, 0);
	else if (c->c_state == CONN_SOCKS5)
		conn_socks5_read(c);
	else if (c->c_state != CONN_TLS_HANDSHAKE)
		conn_feed_request(c);
	conn_unref(c);
}

void
conn_client_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;

	conn_ref(c);
	conn_touch(c);
	if (c->c_state == CONN_CLOSING) {
		if (evbuffer_get_length(bufferevent_get_output(c->c_bev)) == 0)
			conn_tls_finish(c);
	} else if (c->c_state == CONN_TUNNEL) {
		conn_tunnel_start(c);
		conn_tunnel_check(c);
	} else if (c->c_up != NULL) {
		conn_bev_enable(c->c_up->u_bev, EV_READ);
		conn_feed_response(c);
	}
	conn_unref(c);
}

static void
client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn	*c = arg;

	conn_ref(c);
	if (c->c_state == CONN_TLS_HANDSHAKE) {
		conn_tls_handshake_event(c, what);
		goto out;
	}
	if (c->c_x->x_active && c->c_x->x_reason[0] == '\0')
		snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason),
		    "client closed the connection");
	if (c->c_state == CONN_TUNNEL)
		conn_tunnel_eof(c, bev, what);	/* flush what the client sent */
	else if (c->c_state == CONN_WAIT && c->c_x->x_ask_id != 0) {
		/* held for an operator: the hold goes now (conn_free forgets
		   it), not when it is decided or times out */
		snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%s",
		    ASK_LEFT_HELD);
		conn_close(c, AUD_R_CLIENT_CLOSED);
	} else if ((what & BEV_EVENT_EOF) && c->c_x->x_active &&
	    (c->c_state == CONN_WAIT || c->c_state == CONN_FORWARD) &&
	    !c->c_closing) {
		/* half-close: the request may be whole; answer, then close */
		c->c_client_eof = 1;
		c->c_r.r_keepalive = 0;
		c->c_x->x_reason[0] = '\0';
		if (c->c_state == CONN_FORWARD && !c->c_r.r_req_done)
			conn_feed_request(c);
	} else
		conn_close(c, AUD_R_CLIENT_CLOSED);
out:
	conn_unref(c);
}

static void
upstream_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;

	conn_ref(c);
	conn_touch(c);
	if (c->c_state == CONN_TUNNEL)
		conn_tunnel_start(c);
	else {
		conn_feed_response(c);
		if (!c->c_closing && c->c_up != NULL && c->c_state ==
		    CONN_FORWARD)
			upstream_read_more(c->c_up->u_bev);
	}
	conn_unref(c);
}

/*
 * The socket under an upstream TLS filter reads 4 KiB per readable event
 * (libevent 2.1's limit, with an ioctl and a loop turn each): a body of
 * 16 KiB records costs four rounds per record. After the filter handed
 * us what it had, read what else the socket holds (up to 64 KiB) into the
 * socket's input and let the filter decrypt it right after this callback.
 * Not while backpressure holds reading off; EOF and errors are left for
 * libevent's next read to find.
 */
static void
upstream_read_more(struct bufferevent *tls)
{
	struct bufferevent	*sock = bufferevent_get_underlying(tls);
	struct evbuffer		*in;
	struct evbuffer_iovec	 v[2];
	evutil_socket_t		 fd;
	ssize_t			 n;
	int			 nv;
	size_t			 i, left;

	if (sock == NULL || !(bufferevent_get_enabled(tls) & EV_READ) ||
	    (fd = bufferevent_getfd(sock)) < 0)
		return;
	in = bufferevent_get_input(sock);
	if (evbuffer_get_length(in) > 0 ||
	    evbuffer_get_length(bufferevent_get_input(tls)) > 0)
		return;
	/* a socket bufferevent keeps its input's end frozen but while it
	   reads itself, as here */
	evbuffer_unfreeze(in, 0);
	if ((nv = evbuffer_reserve_space(in, 65536, v, 2)) < 1) {
		evbuffer_freeze(in, 0);
		return;
	}
	n = readv(fd, (struct iovec *)v, nv);
	if (n <= 0) {
		/* nothing more now, EOF or error: libevent's next read */
		evbuffer_freeze(in, 0);
		return;
	}
	for (i = 0, left = (size_t)n; left > 0; i++) {
		if (v[i].iov_len > left)
			v[i].iov_len = left;
		left -= v[i].iov_len;
	}
	evbuffer_commit_space(in, v, (int)i);
	evbuffer_freeze(in, 0);
	bufferevent_trigger(sock, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
}

static void
upstream_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;

	conn_ref(c);
	conn_touch(c);
	if (c->c_state == CONN_TUNNEL) {
		conn_tunnel_start(c);
		conn_tunnel_check(c);
	} else if (c->c_state == CONN_FORWARD && !c->c_r.r_req_done) {
		conn_bev_enable(c->c_bev, EV_READ);
		conn_feed_request(c);
	}
	conn_unref(c);
}

static void
upstream_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn	*c = arg;

	conn_ref(c);
	if (what & BEV_EVENT_CONNECTED) {
		/* handled by conn_upstream.c's own callback */
		goto out;
	}
	if (c->c_state == CONN_TUNNEL) {
		conn_tunnel_eof(c, bev, what);
		goto out;
	}
	if ((what & BEV_EVENT_EOF) && upstream_eof(c) == 0)
		goto out;
	upstream_closed(c);
out:
	conn_unref(c);
}

static void
upstream_closed(struct conn *c)
{
	conn_upstream_failed(c, AUD_R_UPSTREAM_UNREACHABLE,
	    c->c_r.r_resp_started ? "upstream closed mid-response" :
	    "upstream closed the connection before answering");
}

/*
 * The upstream ended (not a tunnel): what it sent goes on first (once a
 * stage's room lets it: then again from conn_room_resume), then the end
 * ends a body read to the close, or a pooled connection is tried once
 * more. 0 when done, -1 when it failed the request (upstream_closed).
 */
static int
upstream_eof(struct conn *c)
{
	struct upstream	*u = c->c_up;

	/* flush what is buffered, then see if it ends the body */
	conn_feed_response(c);
	if (c->c_closing || c->c_r.r_resp_done || c->c_up != u)
		return 0;
	if (c->c_r.r_room_wait & 1) {
		c->c_r.r_room_eof = 1;	/* after the bytes that wait */
		return 0;
	}
	if (c->c_resp.hm_head_done && c->c_resp.hm_framing == HTTP_BODY_EOF &&
	    http_msg_finish(&c->c_resp) == HTTP_FEED_DONE) {
		if (conn_response_body_end(c) == -1) {
			(void)conn_pipe_pending(c);
			return 0;
		}
		c->c_r.r_resp_done = 1;
		c->c_resp.hm_keepalive = 0;
		conn_client_flush(c);
		conn_request_finished(c);
		return 0;
	}
	/* a pooled connection that was closed under us: retry once */
	if (u->u_reused && !c->c_r.r_resp_started && c->c_resp.hm_len == 0 &&
	    c->c_req.hm_framing == HTTP_BODY_NONE && c->c_r.r_req_done &&
	    !c->c_r.r_retried) {
		c->c_r.r_retried = 1;
		upstream_free(u);
		c->c_up = NULL;
		c->c_r.r_req_done = 0;
		conn_resolve(c);
		return 0;
	}
	return -1;
}

void
conn_room_resume(struct conn *c)
{
	int	w = c->c_r.r_room_wait;

	c->c_r.r_room_wait = 0;
	if (c->c_state == CONN_TUNNEL) {
		conn_tunnel_start(c);	/* pumps, reads again */
		conn_tunnel_check(c);
		return;
	}
	if ((w & 2) && c->c_state == CONN_FORWARD && !c->c_r.r_req_done) {
		conn_bev_enable(c->c_bev, EV_READ);
		conn_feed_request(c);
	}
	if (!(w & 1) || c->c_closing || c->c_up == NULL)
		return;
	if (c->c_r.r_room_eof) {
		c->c_r.r_room_eof = 0;
		if (upstream_eof(c) == -1)
			upstream_closed(c);
		return;
	}
	conn_bev_enable(c->c_up->u_bev, EV_READ);
	conn_feed_response(c);
}

void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn	*c = arg;
	uint64_t	 now = util_now_ms(), idle;

	conn_ref(c);
	switch (c->c_state) {
	case CONN_HEAD:
		if (!c->c_x->x_active) {
			/* an idle keep-alive connection */
			conn_close(c, AUD_R_IDLE_TIMEOUT);
			break;
		}
		conn_reply_error(c, AUD_R_REQUEST_TIMEOUT,
		    "request head not received in time", 1);
		break;
	case CONN_WAIT:
		if (c->c_r.r_ident_wait) {	/* the registry was slow */
			sbx_fleet_unwatch(c->c_resume_ev);
			c->c_r.r_ident_wait = 0;
			conn_ident_resume(c);
			break;
		}
		conn_upstream_failed(c, AUD_R_UPSTREAM_TIMEOUT,
		    "connecting to the upstream timed out");
		break;
	case CONN_BODY_BUFFER:
	case CONN_FORWARD:
	case CONN_TUNNEL:
		if (c->c_state == CONN_TUNNEL && c->c_tunnel_eof) {
			conn_tunnel_timer(c);	/* ending: grace, drained */
			break;
		}
		if (c->c_state == CONN_FORWARD && !c->c_r.r_resp_started &&
		    c->c_r.r_req_done) {
			conn_upstream_failed(c, AUD_R_UPSTREAM_TIMEOUT,
			    "upstream did not answer in time");
			break;
		}
		idle = c->c_cfg->c_limits.l_idle_timeout_ms;
		if (now - c->c_active_ms < idle) {
			conn_timer_arm(c, idle - (now - c->c_active_ms));
			break;
		}
		conn_idle_end(c);
		break;
	case CONN_TLS_PEEK:
	case CONN_TLS_HANDSHAKE:
		if (c->c_deny_tls) {
			conn_connect_deny_timeout(c);
			break;
		}
		snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason),
		    "TLS handshake not completed in time");
		log_info("%s: TLS handshake timed out", c->c_client);
		conn_close(c, AUD_R_TLS_FAILED);
		break;
	case CONN_TRANS_PEEK:
		conn_transparent_peek(c, 1);
		break;
	case CONN_SOCKS5:
		conn_socks5_timeout(c);
		break;
	case CONN_CLOSING:
		/* drained (conn_under_drained), or the 5 s grace is over */
		if (c->c_flushed)
			conn_linger(c);
		else
			conn_close(c, AUD_R_DONE);
		break;
	case CONN_LINGER:
		conn_close(c, AUD_R_DONE);
		break;
	}
	conn_unref(c);
}
