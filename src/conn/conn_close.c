/*
 * How a connection ends: conn_close() (the one way), lingering close,
 * close_notify, and the free.
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
#include "h2/h2.h"
#include "http/http_target.h"
#include "budget/bud.h"
#include "policy/pol.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

void
conn_free(struct conn *c)
{
	struct worker	*w = c->c_worker;

	if (c->c_h2 != NULL)
		h2_srv_free(c->c_h2);		/* its streams end first */
	if (c->c_h2s != NULL)
		h2_stream_conn_gone(c->c_h2s);
	h2_pool_forget(c);
	if (c->c_sbx != NULL) {
		__atomic_sub_fetch(&c->c_sbx->sb_conns, 1, __ATOMIC_RELAXED);
		sbx_unref(c->c_sbx);
	}
	conn_slot_release(c);
	conn_pipe_fini(c);
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
	conn_req_clear(c);
	TAILQ_REMOVE(&w->w_conns, c, c_entry);
	w->w_nconns--;
	cfg_unref(c->c_cfg);
	free(c);
	worker_conn_gone();
	if (w->w_stopping && w->w_nconns == 0)
		event_base_loopexit(w->w_base, NULL);
}

void
conn_close(struct conn *c, enum aud_reason why)
{
	if (c->c_closing)
		return;
	c->c_closing = 1;
	if (c->c_x->x_why == AUD_R_NONE)
		c->c_x->x_why = why;
	if (aud_reason(why)->ri_decision == AUD_D_DENY)
		c->c_x->x_allowed = 0;
	if (c->c_x->x_active)
		conn_audit(c);
	if (c->c_refs == 0)
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
		conn_ref(c);
		conn_close(c, AUD_R_DONE);	/* the client is done too */
		conn_unref(c);
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
void
conn_linger(struct conn *c)
{
	struct bufferevent	*raw = bufferevent_get_underlying(c->c_bev);
	evutil_socket_t		 fd;

	if (raw == NULL)
		raw = c->c_bev;
	fd = bufferevent_getfd(raw);
	if (fd < 0 || c->c_worker->w_stopping) {
		conn_close(c, AUD_R_DONE);
		return;
	}
	bufferevent_disable(raw, EV_READ | EV_WRITE);
	bufferevent_disable(c->c_bev, EV_READ | EV_WRITE);
	(void)shutdown(fd, SHUT_WR);
	c->c_state = CONN_LINGER;
	c->c_linger_ev = event_new(c->c_worker->w_base, fd,
	    EV_READ | EV_PERSIST, linger_cb, c);
	if (c->c_linger_ev == NULL || event_add(c->c_linger_ev, NULL) == -1) {
		conn_close(c, AUD_R_DONE);
		return;
	}
	conn_timer_arm(c, 2000);
}

/* The TLS socket under an intercepted session's filter drained. */
void
conn_under_drained(struct evbuffer *buf, const struct evbuffer_cb_info *info,
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
void
conn_tls_finish(struct conn *c)
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
		conn_close(c, AUD_R_DONE);
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
		c->c_under_cb = evbuffer_add_cb(out, conn_under_drained, c);
	conn_timer_arm(c, 5000);	/* a peer that never reads */
}

void
conn_close_when_flushed(struct conn *c)
{
	conn_client_flush(c);
	c->c_state = CONN_CLOSING;
	bufferevent_disable(c->c_bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->c_bev)) == 0)
		conn_tls_finish(c);
	else {
		/* conn_client_write_cb comes back once the output drained */
		bufferevent_setwatermark(c->c_bev, EV_WRITE, 0, 0);
		conn_timer_arm(c, 5000);
	}
}

void
conn_drain(struct conn *c)
{
	if (c->c_h2 != NULL) {
		h2_srv_drain(c->c_h2);	/* GOAWAY: no new streams */
		return;
	}
	/* under a frame (a reload from inside a callback) the free waits
	   for it (conn_unref) */
	if ((c->c_state == CONN_HEAD && !c->c_x->x_active &&
	    c->c_req.hm_len == 0) || c->c_state == CONN_LINGER)
		conn_close(c, AUD_R_DONE);
}
