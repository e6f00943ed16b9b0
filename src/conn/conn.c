/*
 * The explicit-proxy connection: one client, one request at a time,
 * streaming both ways with backpressure from bufferevent watermarks.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
#include "policy/pol_mcp.h"
#include "h2/h2.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

static void	client_read_cb(struct bufferevent *, void *);
static void	client_event_cb(struct bufferevent *, short, void *);
static void	upstream_read_cb(struct bufferevent *, void *);
static void	upstream_write_cb(struct bufferevent *, void *);
static void	upstream_read_more(struct bufferevent *);
static void	upstream_event_cb(struct bufferevent *, short, void *);
static void	conn_feed_request_loop(struct conn *);

void
conn_enter(struct conn *c)
{
	c->c_depth++;
}

void
conn_leave(struct conn *c)
{
	if (c->c_depth == 1 && !c->c_closing)
		conn_pipe_flow(c);	/* the stages see what moved */
	if (--c->c_depth == 0 && c->c_closing)
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
	meter_free(x->x_bud.b_meter);
	sse_filt_free(x->x_bud.b_filt);
	mcp_filt_free(x->x_mcp.m_filt);
	if (x->x_answer != NULL)
		evbuffer_free(x->x_answer);
	free(x->x_path);
	free(x->x_query);
	if (x->x_queued)
		TAILQ_REMOVE(&c->c_xq, x, x_entry);
	memset(x, 0, sizeof(*x));
}

void
conn_req_clear(struct conn *c)
{
	xchg_clear(c, c->c_x);
	if (c->c_r.r_body != NULL)
		evbuffer_free(c->c_r.r_body);
	memset(&c->c_r, 0, sizeof(c->c_r));
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
 * After its head, a message without body bytes still needs one (empty)
 * feed for llhttp to complete it.
 */
int
conn_msg_empty_body_left(const struct http_msg *m)
{
	return m->hm_head_done && !m->hm_complete &&
	    (m->hm_framing == HTTP_BODY_NONE ||
	    (m->hm_framing == HTTP_BODY_LENGTH && m->hm_content_length == 0));
}

/* The socket bufferevent under <bev> (a TLS filter), or <bev> itself. */
static struct bufferevent *
bev_socket(struct bufferevent *bev)
{
	struct bufferevent	*under = bufferevent_get_underlying(bev);

	return under != NULL ? under : bev;
}

/*
 * Send what was just queued on <sock> now, when its output held nothing
 * before (<was>), instead of arming EV_WRITE for the next loop turn and
 * disarming it once written: two epoll_ctl saved per request and per
 * response. What the socket does not take goes out the usual way; with a
 * backlog (which backpressure resumes from the write callback) nothing
 * changes.
 */
static void
bev_send_now(struct bufferevent *sock, size_t was)
{
	struct evbuffer	*out = bufferevent_get_output(sock);
	evutil_socket_t	 fd = bufferevent_getfd(sock);

	if (was != 0 || fd < 0 || evbuffer_get_length(out) == 0)
		return;
	/* a socket bufferevent keeps its output's start frozen but while
	   it writes itself, as here */
	evbuffer_unfreeze(out, 1);
	(void)evbuffer_write(out, fd);
	evbuffer_freeze(out, 1);
	if (evbuffer_get_length(out) == 0)
		event_del(&sock->ev_write);	/* armed for nothing now */
}

static void
evb_add(void *arg, const void *p, size_t n)
{
	evbuffer_add(arg, p, n);
}

void
conn_evb_sink(struct evbuffer *b, struct hw_sink *s)
{
	s->hs_add = evb_add;
	s->hs_arg = b;
}

/*
 * Move what the response path gathered for the client into its
 * bufferevent, as one contiguous chain: a TLS bufferevent makes one
 * SSL_write (one record) of each chain it is handed, and each record costs
 * an encryption and, often, a send of its own. Called before control
 * returns to the event loop and before anything else writes to the client,
 * so nothing is ever held back from a stream.
 */
void
conn_client_flush(struct conn *c)
{
	struct bufferevent	*sock;
	size_t			 n = evbuffer_get_length(c->c_pend), was;

	if (n == 0)
		return;
	if (c->c_closing) {
		evbuffer_drain(c->c_pend, n);
		return;
	}
	sock = bev_socket(c->c_bev);
	was = evbuffer_get_length(bufferevent_get_output(sock));
	evbuffer_pullup(c->c_pend, (ssize_t)n);
	bufferevent_write_buffer(c->c_bev, c->c_pend);
	bev_send_now(sock, was);
}

/* A TLS record holds 16 KiB: gathering more saves nothing. */
#define CONN_PEND_MAX	(16 * 1024)

/*
 * Write one piece of body to <to>, chunk-framed when <chunked>. Built in
 * one buffer and moved in one go, so a TLS bufferevent makes one record
 * of it, not three; towards the client it joins the head (or the pieces)
 * gathered in the same callback.
 */
void
conn_body_out(struct conn *c, struct bufferevent *to, const char *p, size_t len,
    int chunked, uint64_t *count)
{
	struct evbuffer	*tmp = to == c->c_bev ? c->c_pend :
			    c->c_worker->w_scratch;
	size_t		 before = evbuffer_get_length(tmp);

	if (len == 0)
		return;
	if (chunked)
		evbuffer_add_printf(tmp, "%zx\r\n", len);
	evbuffer_add(tmp, p, len);
	if (chunked)
		evbuffer_add(tmp, "\r\n", 2);
	*count += evbuffer_get_length(tmp) - before;
	if (tmp == c->c_pend) {
		if (evbuffer_get_length(tmp) >= CONN_PEND_MAX)
			conn_client_flush(c);
	} else
		bufferevent_write_buffer(to, tmp);
}

/* Body bytes as the stages let them through: held, or upstream. */
static void
request_body_emit(struct conn *c, const char *p, size_t len)
{
	if (c->c_state == CONN_BODY_BUFFER) {
		/* held whole (SigV4 hash, usage options), within body_bytes */
		if (c->c_r.r_body == NULL)
			c->c_r.r_body = evbuffer_new();
		if (evbuffer_get_length(c->c_r.r_body) + len >
		    c->c_r.r_hold) {
			c->c_r.r_body_too_large = 1;
			return;
		}
		evbuffer_add(c->c_r.r_body, p, len);
		return;
	}
	if (c->c_up == NULL || len == 0)
		return;
	conn_body_out(c, c->c_up->u_bev, p, len, c->c_r.r_up_chunked,
	    &c->c_x->x_bytes_out);
}

static void
request_body(struct conn *c, const char *p, size_t len, int eof)
{
	size_t	pass;

	if (conn_pipe_req_body(c, &p, &len, eof, &pass) == -1) {
		/* refused once the parser returns; what a stage let through
		   still goes (up to a cap) */
		if (pass > 0 && c->c_up != NULL &&
		    c->c_state == CONN_FORWARD)
			conn_body_out(c, c->c_up->u_bev, p, pass,
			    c->c_r.r_up_chunked, &c->c_x->x_bytes_out);
	} else
		request_body_emit(c, p, len);
	conn_pipe_req_body_end(c);
}

void
conn_request_body_cb(void *arg, const char *p, size_t len)
{
	request_body(arg, p, len, 0);
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

/* The connection's own rewriting of the head going upstream: the path
 * overrides a rule strips, what the stages drop (req_drop) and add
 * (req_fields). Its sink is the evbuffer being built. */
struct head_rw {
	struct conn	*hr_c;
	struct evbuffer	*hr_out;
};

static int
head_rw_drop(void *arg, const char *name, size_t nlen)
{
	struct head_rw	*h = arg;

	return conn_header_stripped(h->hr_c, name, nlen) ||
	    conn_pipe_req_drop(h->hr_c, name, nlen);
}

static void
head_rw_fields(void *arg, const struct hw_sink *out)
{
	struct head_rw	*h = arg;

	(void)out;		/* the same evbuffer */
	conn_pipe_req_fields(h->hr_c, h->hr_out);
}

/* Serialize the request head for the upstream (http/http_write.c). */
static void
write_request_head(struct conn *c)
{
	struct http_msg	*m = &c->c_req;
	struct sec_req	*sr = c->c_x->x_sec.s_req;
	/* built aside: a TLS bufferevent drains its output as we add */
	struct evbuffer	*out = c->c_worker->w_scratch;
	const char	*query, *signer;
	struct bufferevent *sock;
	struct hw_rewrite sec_rw, conn_rw = { head_rw_drop, NULL,
			    head_rw_fields, NULL };
	struct head_rw	 h = { c, out };
	struct hw_sink	 sink;
	struct hw_req	 q;
	char		 host[300];
	size_t		 was;

	memset(&q, 0, sizeof(q));
	q.hq_method = c->c_x->x_method;
	q.hq_path = sec_req_path(sr, c->c_x->x_path);
	q.hq_query = query = sec_req_query(sr, c->c_x->x_query);
	q.hq_host = host;
	q.hq_hostlen = http_write_host(host, sizeof(host), c->c_x->x_host,
	    c->c_x->x_port, c->c_tls ? 443 : 80);
	if ((signer = sec_req_sigv4_name(sr, c->c_cfg)) != NULL &&
	    !c->c_x->x_sec.s_signed) {
		if (sec_req_sign(sr, c->c_cfg, c->c_x->x_method, host,
		    q.hq_path, query != NULL && query[0] != '\0' ? query :
		    NULL, m, c->c_r.r_body) == -1)
			log_warnx("SigV4 signing failed (secret %s)", signer);
		c->c_x->x_sec.s_signed = 1;
	}
	if (sec_req_rewriter(sr, &sec_rw))
		q.hq_rw[q.hq_nrw++] = &sec_rw;
	conn_rw.hr_arg = &h;
	q.hq_rw[q.hq_nrw++] = &conn_rw;
	q.hq_upgrade = c->c_r.r_upgrade;
	if (c->c_r.r_body != NULL) {
		q.hq_held = 1;
		q.hq_held_len = evbuffer_get_length(c->c_r.r_body);
	} else
		q.hq_chunked = c->c_x->x_req_reframe;
	conn_evb_sink(out, &sink);
	c->c_r.r_up_chunked = http_write_request_head(m, &q, &sink);
	if (c->c_r.r_body != NULL)
		evbuffer_add_buffer(out, c->c_r.r_body);	/* moved */
	c->c_x->x_bytes_out += evbuffer_get_length(out);
	sock = bev_socket(c->c_up->u_bev);
	was = evbuffer_get_length(bufferevent_get_output(sock));
	bufferevent_write_buffer(c->c_up->u_bev, out);
	bev_send_now(sock, was);
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
	write_request_head(c);
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

/* Feed buffered client bytes to the request parser. */
void
conn_feed_request(struct conn *c)
{
	/* nested calls (a reply inside the loop) leave the work to us */
	if (c->c_in_feed)
		return;
	c->c_in_feed = 1;
	conn_feed_request_loop(c);
	c->c_in_feed = 0;
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
	size_t			 used;

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
			/* what a stage kept back of the body goes now */
			if (c->c_x != NULL && c->c_x->x_active)
				request_body(c, "", 0, 1);
			c->c_r.r_req_done = 1;
			if (!c->c_r.r_resp_started)
				conn_timer_arm(c,
				    c->c_cfg->c_limits.l_upstream_timeout_ms);
			if (c->c_r.r_up_chunked && c->c_up != NULL) {
				bufferevent_write(c->c_up->u_bev,
				    "0\r\n\r\n", 5);
				c->c_x->x_bytes_out += 5;
			}
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

	conn_enter(c);
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
	conn_leave(c);
}

void
conn_client_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;

	conn_enter(c);
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
	conn_leave(c);
}

static void
client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn	*c = arg;

	conn_enter(c);
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
		snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason),
		    "client left while held for approval");
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
	conn_leave(c);
}

static void
upstream_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;

	conn_enter(c);
	conn_touch(c);
	if (c->c_state == CONN_TUNNEL)
		conn_tunnel_start(c);
	else {
		conn_feed_response(c);
		if (!c->c_closing && c->c_up != NULL && c->c_state ==
		    CONN_FORWARD)
			upstream_read_more(c->c_up->u_bev);
	}
	conn_leave(c);
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

	conn_enter(c);
	conn_touch(c);
	if (c->c_state == CONN_TUNNEL) {
		conn_tunnel_start(c);
		conn_tunnel_check(c);
	} else if (c->c_state == CONN_FORWARD && !c->c_r.r_req_done) {
		conn_bev_enable(c->c_bev, EV_READ);
		conn_feed_request(c);
	}
	conn_leave(c);
}

static void
upstream_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn	*c = arg;
	struct upstream	*u = c->c_up;

	conn_enter(c);
	if (what & BEV_EVENT_CONNECTED) {
		/* handled by conn_upstream.c's own callback */
		goto out;
	}
	if (c->c_state == CONN_TUNNEL) {
		conn_tunnel_eof(c, bev, what);
		goto out;
	}
	if (what & BEV_EVENT_EOF) {
		/* flush what is buffered, then see if it ends the body */
		conn_feed_response(c);
		if (c->c_closing || c->c_r.r_resp_done || c->c_up != u)
			goto out;
		if (c->c_resp.hm_head_done &&
		    c->c_resp.hm_framing == HTTP_BODY_EOF &&
		    http_msg_finish(&c->c_resp) == HTTP_FEED_DONE) {
			if (conn_response_body_end(c) == -1) {
				(void)conn_pipe_pending(c);
				goto out;
			}
			c->c_r.r_resp_done = 1;
			c->c_resp.hm_keepalive = 0;
			conn_client_flush(c);
			conn_request_finished(c);
			goto out;
		}
		/* a pooled connection that was closed under us: retry once */
		if (u->u_reused && !c->c_r.r_resp_started &&
		    c->c_resp.hm_len == 0 && c->c_req.hm_framing ==
		    HTTP_BODY_NONE && c->c_r.r_req_done && !c->c_r.r_retried) {
			c->c_r.r_retried = 1;
			upstream_free(u);
			c->c_up = NULL;
			c->c_r.r_req_done = 0;
			conn_resolve(c);
			goto out;
		}
	}
	conn_upstream_failed(c, AUD_R_UPSTREAM_UNREACHABLE,
	    c->c_r.r_resp_started ? "upstream closed mid-response" :
	    "upstream closed the connection before answering");
out:
	conn_leave(c);
}

void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn	*c = arg;
	uint64_t	 now = util_now_ms(), idle;

	conn_enter(c);
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
	conn_leave(c);
}
