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
#include "conn/conn_reload.h"
#include "conn/worker.h"
#include "dns/dns.h"
#include "conn/conn_slots.h"
#include "dns/net_self.h"
#include "geo/geo.h"
#include "http/http_target.h"
#include "budget/bud.h"
#include "policy/pol.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

static void	client_read_cb(struct bufferevent *, void *);
static void	client_write_cb(struct bufferevent *, void *);
static void	client_event_cb(struct bufferevent *, short, void *);
static void	upstream_read_cb(struct bufferevent *, void *);
static void	upstream_write_cb(struct bufferevent *, void *);
static void	upstream_read_more(struct bufferevent *);
static void	upstream_event_cb(struct bufferevent *, short, void *);
static void	conn_timer_cb(evutil_socket_t, short, void *);
static void	conn_feed_response(struct conn *);
static void	conn_feed_response_loop(struct conn *);
static void	conn_feed_request_loop(struct conn *);
static int	request_secrets(struct conn *, const struct cfg_rule *);
static void	conn_find_upstream(struct conn *);
static void	conn_body_buffered(struct conn *);
static void	conn_proceed(struct conn *);

void
conn_enter(struct conn *c)
{
	c->c_depth++;
}

void
conn_leave(struct conn *c)
{
	if (c->c_depth == 1 && !c->c_closing)
		conn_budget_flow(c);	/* charge this callback's bytes */
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

static void
req_clear(struct conn *c)
{
	sec_req_free(c->c_r.r_sec);
	sec_trip_free(c->c_r.r_trip);
	if (c->c_r.r_body != NULL)
		evbuffer_free(c->c_r.r_body);
	meter_free(c->c_r.r_meter);
	free(c->c_r.r_path);
	free(c->c_r.r_query);
	memset(&c->c_r, 0, sizeof(c->c_r));
}

static void
req_begin(struct conn *c)
{
	req_clear(c);
	c->c_r.r_active = 1;
	c->c_r.r_start_us = util_now_us();
	c->c_r.r_start_wall = util_wall_ms();
	c->c_r.r_status = -1;
	c->c_r.r_port = -1;
	c->c_r.r_proto = c->c_tls ? "https" : "http";
	c->c_r.r_tls = c->c_tls ? "intercept" : "none";
	worker_request_id(c->c_worker, c->c_r.r_id, sizeof(c->c_r.r_id));
}

/*
 * After its head, a message without body bytes still needs one (empty)
 * feed for llhttp to complete it.
 */
static int
msg_empty_body_left(const struct http_msg *m)
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

/*
 * Move what the response path gathered for the client into its
 * bufferevent, as one contiguous chain: a TLS bufferevent makes one
 * SSL_write (one record) of each chain it is handed, and each record costs
 * an encryption and, often, a send of its own. Called before control
 * returns to the event loop and before anything else writes to the client,
 * so nothing is ever held back from a stream.
 */
static void
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
static void
body_out(struct conn *c, struct bufferevent *to, const char *p, size_t len,
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

static void
request_body_cb(void *arg, const char *p, size_t len)
{
	struct conn	*c = arg;

	if (c->c_r.r_trip != NULL) {
		conn_sec_trip_body(c, p, len);
		if (c->c_r.r_trip_hit)
			return;		/* refused once the parser returns */
	}
	if (c->c_state == CONN_BODY_BUFFER) {
		/* held whole (SigV4 hash, usage options), within body_bytes */
		if (c->c_r.r_body == NULL)
			c->c_r.r_body = evbuffer_new();
		if (evbuffer_get_length(c->c_r.r_body) + len >
		    c->c_cfg->c_limits.l_body_bytes) {
			c->c_r.r_body_too_large = 1;
			return;
		}
		evbuffer_add(c->c_r.r_body, p, len);
		return;
	}
	if (c->c_up == NULL)
		return;
	/* past a bytes cap: the feed loop cuts the request */
	len = conn_budget_allow(c, 1, len);
	body_out(c, c->c_up->u_bev, p, len, c->c_r.r_up_chunked,
	    &c->c_r.r_bytes_out);
}

static void
response_body_cb(void *arg, const char *p, size_t len)
{
	struct conn	*c = arg;
	struct evbuffer	*scanned = c->c_worker->w_scratch2;
	size_t		 n;

	/* past a bytes cap: the feed loop cuts the response */
	len = conn_budget_allow(c, 0, len);
	conn_budget_body(c, p, len);
	if (c->c_r.r_sec != NULL && c->c_r.r_sec->sr_reflect != NULL) {
		/* a secret went out: it must not come back */
		sec_scan_feed(c->c_r.r_sec->sr_reflect, p, len, scanned);
		n = evbuffer_get_length(scanned);
		body_out(c, c->c_bev, (const char *)evbuffer_pullup(scanned,
		    (ssize_t)n), n, c->c_r.r_rechunk, &c->c_r.r_bytes_in);
		evbuffer_drain(scanned, n);
		return;
	}
	body_out(c, c->c_bev, p, len, c->c_r.r_rechunk, &c->c_r.r_bytes_in);
}

/* End of a response body: what the scanner held, then the last chunk. */
static void
response_body_end(struct conn *c)
{
	struct evbuffer	*scanned = c->c_worker->w_scratch2;
	size_t		 n;

	if (c->c_r.r_sec != NULL && c->c_r.r_sec->sr_reflect != NULL) {
		sec_scan_finish(c->c_r.r_sec->sr_reflect, scanned);
		n = evbuffer_get_length(scanned);
		body_out(c, c->c_bev, (const char *)evbuffer_pullup(scanned,
		    (ssize_t)n), n, c->c_r.r_rechunk, &c->c_r.r_bytes_in);
		evbuffer_drain(scanned, n);
	}
	if (c->c_r.r_rechunk) {
		evbuffer_add(c->c_pend, "0\r\n\r\n", 5);
		c->c_r.r_bytes_in += 5;
	}
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
	bufferevent_setcb(c->c_bev, client_read_cb, client_write_cb,
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
	c->c_req.hm_on_body = request_body_cb;
	c->c_req.hm_arg = c;
	c->c_resp.hm_on_body = response_body_cb;
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
			snprintf(c->c_r.r_reason, sizeof(c->c_r.r_reason),
			    "%s", why);
			c->c_r.r_code = "overloaded";
			conn_close(c);
		} else
			conn_reply_error(c, 503, "overloaded", why, 1);
		return;
	}
	if (transparent)
		conn_transparent_begin(c, fd, sa);
}

/* A transparent connection is audited as one tunnel until its first
 * bytes show otherwise. */
void
req_begin_transparent(struct conn *c)
{
	req_begin(c);
	c->c_r.r_proto = "tunnel";
	c->c_r.r_connect = 1;
}

void
conn_free(struct conn *c)
{
	struct worker	*w = c->c_worker;

	if (c->c_sbx != NULL) {
		__atomic_sub_fetch(&c->c_sbx->sb_conns, 1, __ATOMIC_RELAXED);
		sbx_unref(c->c_sbx);
	}
	conn_slot_release(c);
	if (c->c_dns != NULL)
		dns_cancel(c->c_dns);
	conn_tunnel_fini(c);
	if (c->c_up != NULL)
		upstream_free(c->c_up);
	if (c->c_timer != NULL)
		event_free(c->c_timer);
	if (c->c_linger_ev != NULL)
		event_free(c->c_linger_ev);
	if (c->c_under_cb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_output(
		    bufferevent_get_underlying(c->c_bev)), c->c_under_cb);
	if (c->c_bev != NULL)
		bufferevent_free(c->c_bev);
	evbuffer_free(c->c_pend);
	http_msg_fini(&c->c_req);
	http_msg_fini(&c->c_resp);
	req_clear(c);
	TAILQ_REMOVE(&w->w_conns, c, c_entry);
	w->w_nconns--;
	cfg_unref(c->c_cfg);
	free(c);
	worker_conn_gone();
	if (w->w_stopping && w->w_nconns == 0)
		event_base_loopexit(w->w_base, NULL);
}

void
conn_close(struct conn *c)
{
	if (c->c_closing)
		return;
	c->c_closing = 1;
	if (c->c_r.r_active)
		conn_audit(c);
	if (c->c_depth == 0)
		conn_free(c);
	else {
		/* stop callbacks until our caller unwinds */
		bufferevent_disable(c->c_bev, EV_READ | EV_WRITE);
		if (c->c_up != NULL)
			bufferevent_disable(c->c_up->u_bev, EV_READ | EV_WRITE);
		evtimer_del(c->c_timer);
	}
}

/* Lingering close: read and forget whatever the client still sends. */
static void
linger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn	*c = arg;
	char		 buf[16384];
	ssize_t		 n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		conn_enter(c);
		conn_close(c);	/* the client is done too */
		conn_leave(c);
	}
}

/*
 * Everything is written. Closing a socket with unread input makes the
 * kernel send RST, which can destroy the answer before the client read
 * it (a 413 to a client still uploading): half-close, drain what keeps
 * coming for a moment, then close (Apache's and nginx's lingering close).
 * A raw event reads the socket: a TLS filter may hold its bufferevent's
 * reads suspended.
 */
static void
conn_linger(struct conn *c)
{
	struct bufferevent	*raw = bufferevent_get_underlying(c->c_bev);
	evutil_socket_t		 fd;

	if (raw == NULL)
		raw = c->c_bev;
	fd = bufferevent_getfd(raw);
	if (fd < 0 || c->c_worker->w_stopping) {
		conn_close(c);
		return;
	}
	bufferevent_disable(raw, EV_READ | EV_WRITE);
	bufferevent_disable(c->c_bev, EV_READ | EV_WRITE);
	(void)shutdown(fd, SHUT_WR);
	c->c_state = CONN_LINGER;
	c->c_linger_ev = event_new(c->c_worker->w_base, fd,
	    EV_READ | EV_PERSIST, linger_cb, c);
	if (c->c_linger_ev == NULL || event_add(c->c_linger_ev, NULL) == -1) {
		conn_close(c);
		return;
	}
	conn_timer_arm(c, 2000);
}

/* The TLS socket under an intercepted session's filter drained. */
static void
under_drained(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct conn	*c = arg;

	/* we are inside libevent's write path: go on from the timer */
	if (evbuffer_get_length(buf) == 0 && c->c_state == CONN_CLOSING) {
		c->c_flushed = 1;
		conn_timer_arm(c, 0);
	}
}

/*
 * The plaintext is all in the TLS filter: send close_notify (unless the
 * handshake failed: then only the alert already queued goes out), and
 * close once the socket below has written everything.
 */
static void
tls_finish(struct conn *c)
{
	struct bufferevent	*under = bufferevent_get_underlying(c->c_bev);
	struct evbuffer		*out;
	SSL			*ssl;

	if (under == NULL) {
		conn_linger(c);
		return;
	}
	out = bufferevent_get_output(under);
	ssl = bufferevent_openssl_get_ssl(c->c_bev);
	if (ssl == NULL || !SSL_is_init_finished(ssl)) {
		/*
		 * A failed handshake: libevent has stopped this socket, so
		 * write the alert OpenSSL queued (a few bytes) ourselves.
		 */
		evbuffer_unfreeze(out, 1);	/* libevent froze it on error */
		(void)evbuffer_write(out, bufferevent_getfd(under));
		conn_close(c);
		return;
	}
	if (!c->c_tls_shut) {
		c->c_tls_shut = 1;
		(void)SSL_shutdown(ssl);
		ERR_clear_error();
	}
	if (evbuffer_get_length(out) == 0) {
		conn_linger(c);
		return;
	}
	if (c->c_under_cb == NULL)
		c->c_under_cb = evbuffer_add_cb(out, under_drained, c);
	conn_timer_arm(c, 5000);	/* a peer that never reads */
}

void
conn_close_when_flushed(struct conn *c)
{
	conn_client_flush(c);
	c->c_state = CONN_CLOSING;
	bufferevent_disable(c->c_bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->c_bev)) == 0)
		tls_finish(c);
	else {
		/* client_write_cb comes back here once the output drained */
		bufferevent_setwatermark(c->c_bev, EV_WRITE, 0, 0);
		conn_timer_arm(c, 5000);
	}
}

void
conn_drain(struct conn *c)
{
	if ((c->c_state == CONN_HEAD && !c->c_r.r_active &&
	    c->c_req.hm_len == 0 && c->c_depth == 0) ||
	    (c->c_state == CONN_LINGER && c->c_depth == 0))
		conn_close(c);
}

/* Answer the current request from the gateway; see conn_reply.c. */
void
conn_deny(struct conn *c, int status, const char *code, const char *reason)
{
	/* a body we will not read makes the connection unusable */
	int close = !c->c_r.r_req_done && c->c_r.r_body == NULL &&
	    c->c_req.hm_framing != HTTP_BODY_NONE &&
	    !(c->c_req.hm_framing == HTTP_BODY_LENGTH &&
	    c->c_req.hm_content_length == 0);

	/* inside a tunnel the framing of what follows is in doubt */
	if (status == 400 && (c->c_tls || c->c_tunnel_http))
		close = 1;
	conn_reply_error(c, status, code, reason, close || !c->c_r.r_keepalive);
}

/*
 * Who is asking: Proxy-Authorization Basic ID:TOKEN, else the listener's
 * default sandbox. Returns 0, or -1 after answering 407.
 */
static int
identify(struct conn *c)
{
	const struct cfg	*cfg = c->c_cfg;
	struct sbx		*s = NULL;
	const char		*v, *colon;
	char			 creds[512];
	uint64_t		 now;
	size_t			 vlen;
	int			 i, n;

	i = http_msg_find(&c->c_req, "proxy-authorization", 0);
	if (i == -1) {
		if (conn_listener_default(c) != NULL)
			s = sbx_find(conn_listener_default(c));
		if (s == NULL) {
			conn_deny(c, 407, "proxy_auth_required",
			    "proxy credentials required");
			return -1;
		}
	} else {
		v = http_msg_str(&c->c_req, c->c_req.hm_hdrs[i].h_value);
		vlen = c->c_req.hm_hdrs[i].h_value_len;
		util_trim_ows(&v, &vlen);
		if (vlen > 6 && strncasecmp(v, "basic ", 6) == 0) {
			v += 6;
			vlen -= 6;
			util_trim_ows(&v, &vlen);
			n = util_base64_decode(v, vlen, creds, sizeof(creds));
		} else
			n = -1;
		if (n > 0 && (colon = memchr(creds, ':', (size_t)n)) != NULL) {
			*(char *)colon = '\0';
			s = sbx_auth(creds, colon + 1,
			    (size_t)(n - (colon + 1 - creds)));
		}
		if (n > 0)
			OPENSSL_cleanse(creds, (size_t)n);
	}
	if (s != NULL && __atomic_load_n(&s->sb_revoked, __ATOMIC_ACQUIRE)) {
		sbx_unref(s);
		s = NULL;
	}
	if (s == NULL) {
		conn_deny(c, 407, "proxy_auth_required",
		    "proxy credentials not valid");
		return -1;
	}
	conn_slot_release(c);	/* counts against its sandbox from now on */
	/* resolved per request: a reload may have changed the policy */
	c->c_policy = cfg_policy_find(cfg, s->sb_policy);
	/* for the scheduler's idle eviction; written at most once a second
	   so that busy sandboxes do not bounce a cache line between workers */
	now = util_now_ms();
	if (now - __atomic_load_n(&s->sb_last_used_ms, __ATOMIC_RELAXED) >
	    1000)
		__atomic_store_n(&s->sb_last_used_ms, now, __ATOMIC_RELAXED);
	if (c->c_sbx == s) {
		sbx_unref(s);
		return 0;
	}
	if (c->c_sbx != NULL) {
		__atomic_sub_fetch(&c->c_sbx->sb_conns, 1, __ATOMIC_RELAXED);
		sbx_unref(c->c_sbx);
	}
	c->c_sbx = s;
	if ((size_t)__atomic_add_fetch(&s->sb_conns, 1, __ATOMIC_RELAXED) >
	    cfg->c_limits.l_max_connections_per_sandbox) {
		conn_deny(c, 503, "overloaded",
		    "sandbox connection limit reached");
		return -1;
	}
	return 0;
}

static void
dns_done(const char *err, const struct net_addr *addrs, size_t naddrs,
    void *arg)
{
	struct conn	*c = arg;
	const struct cfg_policy *p = c->c_policy;
	char		 why[64], ip[INET6_ADDRSTRLEN], reason[512], cc[3];
	const char	*list;
	uint32_t	 asn;
	size_t		 i;

	c->c_dns = NULL;
	conn_enter(c);
	if (err != NULL) {
		snprintf(reason, sizeof(reason), "%s: %s", c->c_r.r_host, err);
		conn_upstream_failed(c, 502, "upstream_unreachable", reason);
		goto out;
	}
	/* every address is checked: one bad answer spoils the name */
	for (i = 0; i < naddrs; i++) {
		if (!net_guard_check(c->c_cfg->c_guard, &addrs[i], why,
		    sizeof(why))) {
			net_addr_format(&addrs[i], ip, sizeof(ip));
			snprintf(reason, sizeof(reason),
			    "destination %s resolves to %s in denied network %s",
			    c->c_r.r_host, ip, why);
			c->c_r.r_allowed = 0;
			conn_deny(c, 403, "denied", reason);
			goto out;
		}
		/* allow_networks cannot open the gateway to itself */
		if (net_self_check(c->c_cfg->c_self, &addrs[i], c->c_r.r_port,
		    reason, sizeof(reason))) {
			c->c_r.r_allowed = 0;
			conn_deny(c, 403, "denied", reason);
			goto out;
		}
	}
	/* the policy's countries, likewise for every address */
	for (i = 0; p != NULL && (p->p_ngeo_deny > 0 ||
	    p->p_ngeo_allow > 0) && i < naddrs; i++) {
		(void)geo_lookup_addr(c->c_cfg->c_geo, &addrs[i], cc, &asn);
		if (geo_policy_allows(p, cc, &list))
			continue;
		net_addr_format(&addrs[i], ip, sizeof(ip));
		snprintf(reason, sizeof(reason), "destination %s resolves to "
		    "%s in %s%s, denied by policy \"%s\" (%s)", c->c_r.r_host,
		    ip, cc[0] != '\0' ? "country " : "no known country", cc,
		    p->p_name, list);
		c->c_r.r_allowed = 0;
		conn_deny(c, 403, "denied", reason);
		goto out;
	}
	if (naddrs > sizeof(c->c_r.r_addrs) / sizeof(c->c_r.r_addrs[0]))
		naddrs = sizeof(c->c_r.r_addrs) / sizeof(c->c_r.r_addrs[0]);
	memcpy(c->c_r.r_addrs, addrs, naddrs * sizeof(addrs[0]));
	c->c_r.r_naddrs = naddrs;
	c->c_r.r_next_addr = 0;
	conn_timer_arm(c, c->c_cfg->c_limits.l_connect_timeout_ms);
	if (conn_upstream_connect(c) == -1)
		conn_upstream_connect_failed(c, "cannot connect");
out:
	conn_leave(c);
}

void
conn_upstream_key(struct conn *c, char *key, size_t keysz)
{
	char	port[21];
	size_t	n;

	/* per request (the pool lookup): no snprintf */
	n = util_copy_str(key, c->c_tls ? "https://" : "http://", keysz);
	n += util_copy_str(key + n, c->c_r.r_host, keysz - n);
	port[0] = ':';
	util_u64_dec((uint64_t)c->c_r.r_port, port + 1);
	util_copy_str(key + n, port, keysz - n);
}

/*
 * Plain HTTP on the transparent listener: origin-form; the Host header
 * names the host, and must name the one the connection went to when that
 * is known (a DNS stub address). The port is the original destination's.
 */
static int
transparent_target(struct conn *c, const struct http_target *t)
{
	struct http_msg		*m = &c->c_req;
	struct http_target	 h;
	const char		*v, *why = NULL;
	char			 reason[600];
	size_t			 vlen;
	int			 i;

	c->c_r.r_port = c->c_trans_port;
	/* what a refusal's audit record knows already */
	if (c->c_trans_named)
		util_copy_str(c->c_r.r_host, c->c_trans_host,
		    sizeof(c->c_r.r_host));
	if ((i = http_msg_find(m, "host", 0)) == -1) {
		conn_deny(c, 400, "bad_request", "Host header missing");
		return -1;
	}
	v = http_msg_str(m, m->hm_hdrs[i].h_value);
	vlen = m->hm_hdrs[i].h_value_len;
	util_trim_ows(&v, &vlen);
	if (http_authority_parse(v, vlen, c->c_trans_port, 0, &h, &why) ==
	    -1) {
		conn_deny(c, 400, "bad_request", why);
		return -1;
	}
	if ((c->c_trans_named && strcmp(h.t_host, c->c_trans_host) != 0) ||
	    h.t_port != c->c_trans_port || (t->t_host[0] != '\0' &&
	    (strcmp(t->t_host, h.t_host) != 0 ||
	    t->t_port != c->c_trans_port))) {
		/* header values are never echoed (error pages, audit) */
		snprintf(reason, sizeof(reason), "Host header does not name "
		    "the destination %s:%d", c->c_trans_host, c->c_trans_port);
		conn_deny(c, 403, "denied", reason);
		return -1;
	}
	snprintf(c->c_r.r_host, sizeof(c->c_r.r_host), "%s", h.t_host);
	return 0;
}

/*
 * The target of a request: absolute-form on the plain listener,
 * authority-form for CONNECT, origin-form (or https:// absolute-form)
 * inside an intercepted TLS session, whose Host must name the TLS server
 * name. Returns 0, or -1 after answering.
 */
static int
request_target(struct conn *c)
{
	struct http_msg		*m = &c->c_req;
	struct http_target	 t, h;
	const char		*why = NULL, *url = http_msg_str(m, m->hm_url);
	const char		*v;
	char			 reason[600];
	size_t			 vlen;
	int			 i;

	if (c->c_r.r_connect) {
		if (c->c_tls || c->c_tunnel_http) {
			conn_reply_error(c, 400, "bad_request",
			    "CONNECT inside a tunnel", 1);
			return -1;
		}
		if (http_authority_parse(url, m->hm_url_len, 0, 1, &t,
		    &why) == -1) {
			conn_reply_error(c, 400, "bad_request", why, 1);
			return -1;
		}
		snprintf(c->c_r.r_host, sizeof(c->c_r.r_host), "%s", t.t_host);
		c->c_r.r_port = t.t_port;
		return 0;
	}
	if (http_target_parse(url, m->hm_url_len, c->c_tls, c->c_tls ||
	    c->c_transparent || c->c_tunnel_http, &t, &why) == -1) {
		http_target_fini(&t);	/* conn_reply_error() reads it again */
		conn_reply_error(c, 400, "bad_request", why, 1);
		return -1;
	}
	c->c_r.r_path = t.t_path;
	c->c_r.r_query = t.t_query;
	if (!c->c_tls && (c->c_transparent || c->c_tunnel_http))
		return transparent_target(c, &t);
	if (!c->c_tls) {
		util_copy_str(c->c_r.r_host, t.t_host, sizeof(c->c_r.r_host));
		c->c_r.r_port = t.t_port;
		return 0;
	}

	/* intercepted: the session decides host and port */
	util_copy_str(c->c_r.r_host, c->c_tls_host, sizeof(c->c_r.r_host));
	c->c_r.r_port = c->c_tls_port;
	if (c->c_tls_fronting[0] != '\0') {
		snprintf(reason, sizeof(reason), "TLS server name %s does not "
		    "match CONNECT host %s (domain fronting)", c->c_tls_host,
		    c->c_tls_fronting);
		conn_deny(c, 403, "denied", reason);
		return -1;
	}
	if (t.t_host[0] != '\0' && (strcmp(t.t_host, c->c_tls_host) != 0 ||
	    t.t_port != c->c_tls_port || !t.t_https)) {
		conn_deny(c, 403, "denied",
		    "request target does not name the TLS server");
		return -1;
	}
	if ((i = http_msg_find(m, "host", 0)) == -1) {
		conn_deny(c, 400, "bad_request", "Host header missing");
		return -1;
	}
	v = http_msg_str(m, m->hm_hdrs[i].h_value);
	vlen = m->hm_hdrs[i].h_value_len;
	util_trim_ows(&v, &vlen);
	if (http_authority_parse(v, vlen, c->c_tls_port, 0, &h, &why) == -1 ||
	    strcmp(h.t_host, c->c_tls_host) != 0 ||
	    h.t_port != c->c_tls_port) {
		snprintf(reason, sizeof(reason), "Host header does not name "
		    "the TLS server %s", c->c_tls_host);
		conn_deny(c, 403, "denied", reason);
		return -1;
	}
	return 0;
}

/* The request head is in: decide, then find an upstream. */
static void
on_request_head(struct conn *c)
{
	struct http_msg		*m = &c->c_req;
	struct pol_request	 pr;
	struct pol_result	 res;
	enum pol_verdict	 verdict;
	char			 override[24];
	size_t			 n;
	int			 i;

	conn_cfg_refresh(c);	/* judged under the config of now */
	util_copy_str(c->c_r.r_method, http_msg_method(m),
	    sizeof(c->c_r.r_method));
	c->c_r.r_keepalive = m->hm_keepalive && !c->c_worker->w_stopping;
	c->c_r.r_connect = m->hm_method == HTTP_CONNECT;
	if (c->c_r.r_connect) {
		c->c_r.r_proto = "tunnel";
		c->c_r.r_tls = NULL;
		c->c_r.r_keepalive = 0;
	}
	if (request_target(c) == -1)
		return;
	if (m->hm_method == HTTP_TRACE) {
		conn_deny(c, 501, "not_implemented", "method is not relayed");
		return;
	}
	/* inside TLS the sandbox is the one that sent the CONNECT; on the
	   transparent listener the one of the source address */
	if (!c->c_tls && !c->c_transparent && !c->c_tunnel_http &&
	    identify(c) == -1)
		return;
	if ((c->c_tls || c->c_transparent || c->c_tunnel_http) &&
	    conn_sandbox_refresh(c) == -1)
		return;
	/* fail closed: no request goes out that the audit cannot record */
	if (!aud_available()) {
		conn_deny(c, 503, "audit_unavailable", "the audit log cannot "
		    "be written; requests are refused until it can");
		return;
	}
	if (c->c_r.r_connect && conn_connect_guard(c) == -1)
		return;

	pr.pr_host = c->c_r.r_host;
	pr.pr_port = c->c_r.r_port;
	pr.pr_method = c->c_r.r_method;
	pr.pr_path = c->c_r.r_connect ? NULL : c->c_r.r_path;
	/* frameworks act on these instead of the method: judge that one */
	pr.pr_method_override = NULL;
	if (!c->c_r.r_connect && (i = http_msg_method_override(m, override,
	    sizeof(override))) != 0) {
		if (i == -1) {
			conn_reply_error(c, 400, "bad_request", "method-"
			    "override headers that do not name one method", 1);
			return;
		}
		pr.pr_method_override = override;
	}
	verdict = c->c_policy == NULL ? POL_DENY :
	    pol_evaluate(c->c_policy, &pr, &res);
	if (verdict != POL_DENY) {
		/* "policy#N"; room kept for '#' and the digits */
		n = util_copy_str(c->c_r.r_rule, c->c_policy->p_name,
		    sizeof(c->c_r.r_rule) - 22);
		c->c_r.r_rule[n++] = '#';
		util_u64_dec((uint64_t)res.pr_rule, c->c_r.r_rule + n);
	}
	if (verdict == POL_BAD) {
		/* ambiguous, like a malformed target: the connection ends */
		conn_reply_error(c, 400, "bad_request", res.pr_reason, 1);
		return;
	}
	if (verdict != POL_ALLOW) {
		const char *why = c->c_policy == NULL ? "the sandbox's policy "
		    "is not in the running config" : res.pr_reason;

		if (c->c_r.r_connect)
			conn_connect_denied(c, why);	/* 403 inside TLS */
		else
			conn_deny(c, 403, "denied", why);
		return;
	}
	c->c_r.r_allowed = 1;

	if (c->c_r.r_connect) {
		/* TLS follows: peek its ClientHello before going anywhere */
		conn_tls_connect_allowed(c,
		    c->c_policy->p_rules[res.pr_rule].r_intercept);
		return;
	}

	if ((i = http_msg_find(m, "upgrade", 0)) != -1 &&
	    http_msg_connection_has(m, "upgrade")) {
		const char	*v = http_msg_str(m, m->hm_hdrs[i].h_value);
		size_t		 vlen = m->hm_hdrs[i].h_value_len;

		util_trim_ows(&v, &vlen);
		/* only WebSocket; other upgrades (h2c) are ignored and the
		   request served as HTTP/1.1 (RFC 9110 section 7.8) */
		if (util_strncaseeq(v, vlen, "websocket"))
			c->c_r.r_upgrade = 1;
		else
			http_msg_ignore_upgrade(m);
	}

	c->c_r.r_rule_p = &c->c_policy->p_rules[res.pr_rule];
	if (request_secrets(c, c->c_r.r_rule_p) == -1)
		return;
	if (c->c_r.r_upgrade && c->c_r.r_sec != NULL) {
		/* frames after a 101 cannot be scanned for the secret */
		conn_deny(c, 403, "denied", "WebSocket upgrade towards a "
		    "secret's host is not relayed (its frames could not be "
		    "scanned for the secret)");
		return;
	}
	if (((c->c_r.r_sec != NULL && c->c_r.r_sec->sr_need_body) ||
	    c->c_r.r_rule_p->r_meter != CFG_METER_NONE) &&
	    !msg_empty_body_left(m)) {
		/* SigV4 signs the body, metering reads (and may rewrite) it:
		 * hold it whole before going out */
		if (m->hm_framing == HTTP_BODY_LENGTH &&
		    m->hm_content_length > c->c_cfg->c_limits.l_body_bytes) {
			c->c_r.r_allowed = 0;
			conn_reply_error(c, 413, "body_too_large", "request "
			    "body over limits.body_bytes (needed whole)", 1);
			return;
		}
		if (http_msg_find(m, "expect", 0) != -1 && m->hm_minor >= 1) {
			/* we are the one reading the body now */
			bufferevent_write(c->c_bev,
			    "HTTP/1.1 100 Continue\r\n\r\n", 25);
		}
		c->c_state = CONN_BODY_BUFFER;
		/* a declared length is held in one piece: parsed in place */
		c->c_r.r_body = evbuffer_new();
		if (m->hm_framing == HTTP_BODY_LENGTH)
			evbuffer_expand(c->c_r.r_body, m->hm_content_length);
		conn_timer_arm(c, c->c_cfg->c_limits.l_idle_timeout_ms);
		http_msg_resume(m);
		return;
	}
	conn_proceed(c);
}

/* Budget admission, then upstream. */
static void
conn_proceed(struct conn *c)
{
	if (conn_budget_admit(c) == -1)
		return;
	conn_find_upstream(c);
}

/* Secrets stage: placeholders, injection. 0, or -1 after answering. */
static int
request_secrets(struct conn *c, const struct cfg_rule *rule)
{
	struct sec_facts	 f;
	char			 reason[300];

	f.sf_cfg = c->c_cfg;
	f.sf_rule = rule;
	f.sf_msg = &c->c_req;
	f.sf_host = c->c_r.r_host;
	f.sf_path = c->c_r.r_path;
	f.sf_query = c->c_r.r_query;
	f.sf_tls = c->c_tls;	/* the upstream handshake verifies */
	switch (sec_req_prepare(&f, &c->c_r.r_sec, reason, sizeof(reason))) {
	case SEC_OK:
		conn_sec_trip_setup(c);
		return 0;
	case SEC_MISUSE:
		c->c_r.r_allowed = 0;
		conn_deny(c, 403, "secret_misuse", reason);
		return -1;
	case SEC_ERROR:
		conn_deny(c, 503, "secret_unavailable", reason);
		return -1;
	}
	return -1;
}

/* A pooled upstream for the request, else resolve and connect. */
static void
conn_find_upstream(struct conn *c)
{
	char	key[300];

	c->c_state = CONN_WAIT;
	if (!c->c_r.r_upgrade) {
		conn_upstream_key(c, key, sizeof(key));
		if ((c->c_up = upstream_pool_take(c->c_worker, key)) != NULL) {
			const char *list;

			/* pooled under another sandbox's policy: the geo
			 * rules of this one decide (dns_done() says why) */
			if (geo_policy_allows(c->c_policy, c->c_up->u_country,
			    &list)) {
				memcpy(c->c_r.r_country, c->c_up->u_country,
				    sizeof(c->c_r.r_country));
				c->c_r.r_asn = c->c_up->u_asn;
				conn_upstream_ready(c);
				return;
			}
			upstream_pool_put(c->c_worker, c->c_up);
			c->c_up = NULL;
		}
	}
	conn_resolve(c);
}

/* The body is held (SigV4): the request is whole, go upstream. */
static void
conn_body_buffered(struct conn *c)
{
	conn_proceed(c);
}

/* Resolve the request's host; dns_done() carries on. */
void
conn_resolve(struct conn *c)
{
	c->c_state = CONN_WAIT;
	conn_timer_arm(c, c->c_cfg->c_limits.l_connect_timeout_ms);
	c->c_dns = dns_resolve(c->c_worker->w_base, c->c_worker->w_dns,
	    c->c_cfg, c->c_r.r_host, dns_done, c);
}

/* Serialize the request head for the upstream. */
static void
write_request_head(struct conn *c)
{
	struct http_msg	*m = &c->c_req;
	struct sec_req	*sr = c->c_r.r_sec;
	/* built aside: a TLS bufferevent drains its output as we add */
	struct evbuffer	*out = c->c_worker->w_scratch;
	const char	*name, *v, *path, *query;
	struct bufferevent *sock;
	char		 host[300], num[21], *subst;
	size_t		 nlen, vlen, slen, hlen, was;
	int		 i, v6 = strchr(c->c_r.r_host, ':') != NULL;

	path = sr != NULL && sr->sr_path != NULL ? sr->sr_path : c->c_r.r_path;
	query = sr != NULL && sr->sr_query != NULL ? sr->sr_query :
	    c->c_r.r_query;
	/* [v6]:port, the port only when not the scheme's (no snprintf:
	   every request comes here) */
	hlen = util_copy_str(host, v6 ? "[" : "", sizeof(host));
	hlen += util_copy_str(host + hlen, c->c_r.r_host, sizeof(host) - hlen);
	hlen += util_copy_str(host + hlen, v6 ? "]" : "", sizeof(host) - hlen);
	if (c->c_r.r_port != (c->c_tls ? 443 : 80)) {
		num[0] = ':';
		util_u64_dec((uint64_t)c->c_r.r_port, num + 1);
		hlen += util_copy_str(host + hlen, num, sizeof(host) - hlen);
	}
	if (sr != NULL && sr->sr_sigv4 != 0 && !c->c_r.r_signed) {
		if (sec_req_sign(sr, c->c_cfg, c->c_r.r_method, host, path,
		    query != NULL && query[0] != '\0' ? query : NULL, m,
		    c->c_r.r_body) == -1)
			log_warnx("SigV4 signing failed (secret %s)",
			    c->c_cfg->c_secrets[sr->sr_sigv4 - 1].sc_name);
		c->c_r.r_signed = 1;
	}
	evbuffer_add(out, c->c_r.r_method, strlen(c->c_r.r_method));
	evbuffer_add(out, " ", 1);
	evbuffer_add(out, path, strlen(path));
	if (query != NULL && query[0] != '\0') {
		evbuffer_add(out, "?", 1);
		evbuffer_add(out, query, strlen(query));
	}
	evbuffer_add(out, " HTTP/1.1\r\nHost: ", 17);
	evbuffer_add(out, host, hlen);
	evbuffer_add(out, "\r\n", 2);
	for (i = 0; i < m->hm_nhdrs; i++) {
		name = http_msg_str(m, m->hm_hdrs[i].h_name);
		nlen = m->hm_hdrs[i].h_name_len;
		if (http_msg_is_hop(m, name, nlen) ||
		    util_strncaseeq(name, nlen, "host") ||
		    util_strncaseeq(name, nlen, "content-length") ||
		    (nlen > 6 && strncasecmp(name, "proxy-", 6) == 0) ||
		    sec_req_drops(sr, name, nlen) ||
		    conn_header_stripped(c, name, nlen) ||
		    conn_budget_header_dropped(c, name, nlen) ||
		    (c->c_r.r_body != NULL &&
		    util_strncaseeq(name, nlen, "expect")))
			continue;
		v = http_msg_str(m, m->hm_hdrs[i].h_value);
		vlen = m->hm_hdrs[i].h_value_len;
		util_trim_ows(&v, &vlen);
		evbuffer_add(out, name, nlen);
		evbuffer_add(out, ": ", 2);
		if (sr != NULL && sr->sr_subst != NULL) {
			/* placeholders become the real value, bound hosts only */
			subst = sec_scan_string(sr->sr_subst, v, vlen, &slen,
			    NULL);
			evbuffer_add(out, subst, slen);
			OPENSSL_cleanse(subst, slen);
			free(subst);
		} else
			evbuffer_add(out, v, vlen);
		evbuffer_add(out, "\r\n", 2);
	}
	if (sr != NULL)
		evbuffer_add(out, evbuffer_pullup(sr->sr_add, -1),
		    evbuffer_get_length(sr->sr_add));
	conn_budget_headers_add(c, out);
	if (c->c_r.r_upgrade)
		evbuffer_add_printf(out,
		    "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	c->c_r.r_up_chunked = 0;
	if (c->c_r.r_body != NULL) {
		evbuffer_add_printf(out, "Content-Length: %zu\r\n\r\n",
		    evbuffer_get_length(c->c_r.r_body));
		evbuffer_add_buffer(out, c->c_r.r_body);	/* moved */
	} else {
		if (m->hm_framing == HTTP_BODY_CHUNKED) {
			evbuffer_add_printf(out,
			    "Transfer-Encoding: chunked\r\n");
			c->c_r.r_up_chunked = 1;
		} else if (m->hm_framing == HTTP_BODY_LENGTH) {
			evbuffer_add(out, "Content-Length: ", 16);
			evbuffer_add(out, num, util_u64_dec(
			    m->hm_content_length, num));
			evbuffer_add(out, "\r\n", 2);
		}
		evbuffer_add(out, "\r\n", 2);
	}
	c->c_r.r_bytes_out += evbuffer_get_length(out);
	sock = bev_socket(c->c_up->u_bev);
	was = evbuffer_get_length(bufferevent_get_output(sock));
	bufferevent_write_buffer(c->c_up->u_bev, out);
	bev_send_now(sock, was);
}

void
conn_upstream_ready(struct conn *c)
{
	struct upstream	*u = c->c_up;

	util_copy_str(c->c_r.r_upstream, u->u_addr, sizeof(c->c_r.r_upstream));
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
conn_upstream_failed(struct conn *c, int status, const char *code,
    const char *reason)
{
	if (c->c_up != NULL) {
		upstream_free(c->c_up);
		c->c_up = NULL;
	}
	if (c->c_r.r_resp_started) {
		/* too late for an answer: cut the client off */
		conn_cut(c, reason);
		return;
	}
	conn_deny(c, status, code, reason);
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
		snprintf(c->c_r.r_reason, sizeof(c->c_r.r_reason),
		    "client closed mid-request");
		conn_close(c);
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
	    msg_empty_body_left(&c->c_req)))) {
		if (c->c_up != NULL && evbuffer_get_length(
		    bufferevent_get_output(c->c_up->u_bev)) >= CONN_HIWAT) {
			/* upstream_write_cb resumes us */
			bufferevent_disable(c->c_bev, EV_READ);
			return;
		}
		if (c->c_state == CONN_HEAD && !c->c_r.r_active) {
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
		if (c->c_r.r_budget_over) {
			conn_budget_cut(c);
			return;
		}
		if (c->c_r.r_trip_hit && conn_sec_trip_check(c) == -1)
			return;
		if (c->c_r.r_body_too_large) {
			c->c_r.r_allowed = 0;
			conn_reply_error(c, 413, "body_too_large", "request body "
			    "over limits.body_bytes (needed whole for signing)",
			    1);
			return;
		}
		switch (f) {
		case HTTP_FEED_MORE:
			break;
		case HTTP_FEED_HEAD:
			on_request_head(c);
			break;
		case HTTP_FEED_DONE:
			c->c_r.r_req_done = 1;
			if (!c->c_r.r_resp_started)
				conn_timer_arm(c,
				    c->c_cfg->c_limits.l_upstream_timeout_ms);
			if (c->c_r.r_up_chunked && c->c_up != NULL) {
				bufferevent_write(c->c_up->u_bev,
				    "0\r\n\r\n", 5);
				c->c_r.r_bytes_out += 5;
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
			if (!c->c_r.r_active)
				req_begin(c);
			conn_reply_error(c, c->c_req.hm_err_status,
			    c->c_req.hm_err_status == 431 ? "headers_too_large" :
			    c->c_req.hm_err_status == 414 ? "uri_too_long" :
			    c->c_req.hm_err_status == 501 ? "not_implemented" :
			    c->c_req.hm_err_status == 505 ?
			    "version_not_supported" : "bad_request",
			    c->c_req.hm_err_reason, 1);
			return;
		}
	}
}

/* Response head from upstream -> client. */
static void
write_response_head(struct conn *c, int interim)
{
	struct http_msg	*m = &c->c_resp;
	struct evbuffer	*out = c->c_pend;	/* the body may join it */
	struct evbuffer	*up;
	const char	*name, *v;
	char		 num[21];
	size_t		 nlen, vlen, before = evbuffer_get_length(out);
	int		 i, http10 = c->c_req.hm_minor == 0;
	int		 upgrade = m->hm_status == 101;
	struct sec_scan	*reflect = c->c_r.r_sec != NULL ?
			    c->c_r.r_sec->sr_reflect : NULL;
	enum http_framing framing = m->hm_framing;

	/* redaction changes the length: the body is re-framed */
	if (reflect != NULL && framing == HTTP_BODY_LENGTH)
		framing = HTTP_BODY_CHUNKED;

	/* the upstream's part is redacted as one block: the reason phrase,
	   names and values could each echo a secret */
	up = reflect != NULL ? evbuffer_new() : out;
	evbuffer_add(up, "HTTP/1.1 ", 9);
	evbuffer_add(up, num, util_u64_dec((uint64_t)m->hm_status, num));
	evbuffer_add(up, " ", 1);
	evbuffer_add(up, http_msg_str(m, m->hm_reason), m->hm_reason_len);
	evbuffer_add(up, "\r\n", 2);
	for (i = 0; i < m->hm_nhdrs; i++) {
		name = http_msg_str(m, m->hm_hdrs[i].h_name);
		nlen = m->hm_hdrs[i].h_name_len;
		if (http_msg_is_hop(m, name, nlen) ||
		    (util_strncaseeq(name, nlen, "content-length") &&
		    m->hm_framing != HTTP_BODY_NONE))
			continue;
		v = http_msg_str(m, m->hm_hdrs[i].h_value);
		vlen = m->hm_hdrs[i].h_value_len;
		util_trim_ows(&v, &vlen);
		evbuffer_add(up, name, nlen);
		evbuffer_add(up, ": ", 2);
		evbuffer_add(up, v, vlen);
		evbuffer_add(up, "\r\n", 2);
	}
	if (up != out) {
		conn_sec_head_out(c, up, out);
		evbuffer_free(up);
	}
	if (!interim) {
		evbuffer_add(out, "X-Airlock-Request-Id: ", 22);
		evbuffer_add(out, c->c_r.r_id, strlen(c->c_r.r_id));
		evbuffer_add(out, "\r\n", 2);
		switch (framing) {
		case HTTP_BODY_LENGTH:
			evbuffer_add(out, "Content-Length: ", 16);
			evbuffer_add(out, num, util_u64_dec(
			    m->hm_content_length, num));
			evbuffer_add(out, "\r\n", 2);
			break;
		case HTTP_BODY_CHUNKED:
		case HTTP_BODY_EOF:
			if (http10) {
				c->c_r.r_keepalive = 0;
				c->c_r.r_close_delim = 1;
			} else {
				c->c_r.r_rechunk = 1;
				evbuffer_add_printf(out,
				    "Transfer-Encoding: chunked\r\n");
			}
			break;
		case HTTP_BODY_NONE:
			break;
		}
		if (upgrade)
			evbuffer_add_printf(out,
			    "Connection: Upgrade\r\nUpgrade: websocket\r\n");
		else if (!c->c_r.r_keepalive || c->c_worker->w_stopping)
			evbuffer_add_printf(out, "Connection: close\r\n");
		else if (http10)
			evbuffer_add_printf(out, "Connection: keep-alive\r\n");
	}
	evbuffer_add(out, "\r\n", 2);
	c->c_r.r_bytes_in += evbuffer_get_length(out) - before;
}

static void
conn_feed_response(struct conn *c)
{
	conn_feed_response_loop(c);
	conn_client_flush(c);
}

static void
conn_feed_response_loop(struct conn *c)
{
	struct evbuffer		*in;
	struct evbuffer_iovec	 v;
	enum http_feed		 f;
	size_t			 used;
	const char		*why, *code;

	if (c->c_up == NULL)
		return;
	in = bufferevent_get_input(c->c_up->u_bev);
	while (!c->c_closing && c->c_up != NULL && !c->c_r.r_resp_done &&
	    (evbuffer_get_length(in) > 0 || msg_empty_body_left(&c->c_resp))) {
		if (evbuffer_get_length(bufferevent_get_output(c->c_bev)) >=
		    CONN_HIWAT) {
			/* client_write_cb resumes us */
			bufferevent_disable(c->c_up->u_bev, EV_READ);
			return;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
			v.iov_base = (void *)"";
			v.iov_len = 0;
		}
		f = http_msg_feed(&c->c_resp, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		if (c->c_r.r_budget_over) {
			conn_budget_cut(c);
			return;
		}
		switch (f) {
		case HTTP_FEED_MORE:
			break;
		case HTTP_FEED_HEAD:
			c->c_r.r_status = c->c_resp.hm_status;
			why = conn_sec_response_refused(c, &code);
			if (why != NULL) {
				conn_upstream_failed(c, 502, code, why);
				return;
			}
			if (conn_budget_response_head(c) == -1)
				return;
			write_response_head(c, 0);
			c->c_r.r_resp_started = 1;
			/* from here on only idleness is a timeout */
			conn_timer_arm(c, c->c_cfg->c_limits.l_idle_timeout_ms);
			http_msg_resume(&c->c_resp);
			break;
		case HTTP_FEED_DONE:
			if (c->c_resp.hm_status >= 100 &&
			    c->c_resp.hm_status < 200) {
				/* interim (100 Continue): pass, keep waiting */
				if (c->c_req.hm_minor >= 1)
					write_response_head(c, 1);
				http_msg_reset(&c->c_resp);
				c->c_resp.hm_no_body =
				    c->c_req.hm_method == HTTP_HEAD;
				break;
			}
			if (!c->c_r.r_resp_started) {
				c->c_r.r_status = c->c_resp.hm_status;
				write_response_head(c, 0);
				c->c_r.r_resp_started = 1;
			}
			response_body_end(c);
			c->c_r.r_resp_done = 1;
			conn_client_flush(c);
			conn_request_finished(c);
			return;
		case HTTP_FEED_UPGRADE:
			if (!c->c_r.r_upgrade) {
				/* nothing asked for it: no tunnel, no 101 */
				conn_upstream_failed(c, 502,
				    "upstream_unreachable", "upstream switched "
				    "protocols (101) for a request that asked "
				    "for no upgrade");
				return;
			}
			c->c_r.r_status = c->c_resp.hm_status;
			write_response_head(c, 0);
			conn_client_flush(c);
			c->c_r.r_resp_started = 1;
			if (c->c_resp.hm_status == 101 && c->c_r.r_upgrade) {
				conn_tunnel_start(c);
				return;
			}
			conn_upstream_failed(c, 502, "upstream_unreachable",
			    "unexpected protocol switch");
			return;
		case HTTP_FEED_ERROR:
			conn_upstream_failed(c, 502, "upstream_unreachable",
			    c->c_resp.hm_err_reason);
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
	req_clear(c);
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
	else if (c->c_state != CONN_TLS_HANDSHAKE)
		conn_feed_request(c);
	conn_leave(c);
}

static void
client_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;

	conn_enter(c);
	conn_touch(c);
	if (c->c_state == CONN_CLOSING) {
		if (evbuffer_get_length(bufferevent_get_output(c->c_bev)) == 0)
			tls_finish(c);
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
	if (c->c_r.r_active && c->c_r.r_reason[0] == '\0')
		snprintf(c->c_r.r_reason, sizeof(c->c_r.r_reason),
		    "client closed the connection");
	if (c->c_state == CONN_TUNNEL)
		conn_tunnel_eof(c, bev, what);	/* flush what the client sent */
	else if ((what & BEV_EVENT_EOF) && c->c_r.r_active &&
	    (c->c_state == CONN_WAIT || c->c_state == CONN_FORWARD) &&
	    !c->c_closing) {
		/* half-close: the request may be whole; answer, then close */
		c->c_client_eof = 1;
		c->c_r.r_keepalive = 0;
		c->c_r.r_reason[0] = '\0';
		if (c->c_state == CONN_FORWARD && !c->c_r.r_req_done)
			conn_feed_request(c);
	} else
		conn_close(c);
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
			response_body_end(c);
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
	conn_upstream_failed(c, 502, "upstream_unreachable",
	    c->c_r.r_resp_started ? "upstream closed mid-response" :
	    "upstream closed the connection before answering");
out:
	conn_leave(c);
}

static void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn	*c = arg;
	uint64_t	 now = util_now_ms(), idle;

	conn_enter(c);
	switch (c->c_state) {
	case CONN_HEAD:
		if (!c->c_r.r_active) {
			conn_close(c);	/* idle keep-alive connection */
			break;
		}
		conn_reply_error(c, 408, "request_timeout",
		    "request head not received in time", 1);
		break;
	case CONN_WAIT:
		conn_upstream_failed(c, 504, "upstream_timeout",
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
			conn_upstream_failed(c, 504, "upstream_timeout",
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
		snprintf(c->c_r.r_reason, sizeof(c->c_r.r_reason),
		    "TLS handshake not completed in time");
		log_info("%s: TLS handshake timed out", c->c_client);
		conn_close(c);
		break;
	case CONN_TRANS_PEEK:
		conn_transparent_peek(c, 1);
		break;
	case CONN_CLOSING:
		/* drained (under_drained), or the 5 s grace is over */
		if (c->c_flushed)
			conn_linger(c);
		else
			conn_close(c);
		break;
	case CONN_LINGER:
		conn_close(c);
		break;
	}
	conn_leave(c);
}
