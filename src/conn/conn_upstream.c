/*
 * Upstream connections: connect to a checked address (never a fresh
 * lookup), and a per-worker pool of idle keep-alive connections keyed by
 * "host:port".
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/worker.h"
#include "geo/geo.h"
#include "h2/h2.h"
#include "tls/tls.h"
#include "upstream/upstream.h"
#include "util/log.h"
#include "util/util.h"

#define POOL_MAX	256	/* idle upstream connections per worker */
/* An attempt not connected in this time gives way to the next address
   when that is of the other family (RFC 8305's connection attempt delay;
   here one attempt at a time, the last with the rest of connect_timeout). */
#define HE_DELAY_MS	250

void
upstream_free(struct upstream *u)
{
	if (u == NULL)
		return;
	if (u->u_h2 != NULL)
		h2_cli_stream_gone(u->u_h2);
	up_dial_free(u->u_dial);
	if (u->u_he_ev != NULL)
		event_free(u->u_he_ev);
	if (u->u_bev != NULL)
		bufferevent_free(u->u_bev);
	free(u);
}

static void
pool_remove(struct upstream *u)
{
	TAILQ_REMOVE(&u->u_worker->w_idle, u, u_entry);
	u->u_worker->w_nidle--;
}

/* Data from an idle upstream retires it (events: pool_event_cb). */
static void
pool_read_cb(struct bufferevent *bev, void *arg)
{
	struct upstream	*u = arg;

	/* a TLS filter may call us with nothing read (a record that only
	   carried a session ticket, or its own re-enabled read) */
	if (evbuffer_get_length(bufferevent_get_input(bev)) == 0)
		return;
	pool_remove(u);
	upstream_free(u);
}

/* EOF, an error or idle_timeout: it goes, whatever it holds */
static void
pool_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct upstream	*u = arg;

	pool_remove(u);
	upstream_free(u);
}

void
upstream_pool_put(struct worker *w, struct upstream *u)
{
	struct timeval	tv;
	uint64_t	ms = w->w_cfg->c_limits.l_idle_timeout_ms;

	/* a stream carries one request: it ends (h2_cli_stream_gone) */
	if (w->w_stopping || w->w_nidle >= POOL_MAX || u->u_h2 != NULL) {
		upstream_free(u);
		return;
	}
	u->u_worker = w;
	bufferevent_setcb(u->u_bev, pool_read_cb, NULL, pool_event_cb, u);
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	bufferevent_set_timeouts(u->u_bev, &tv, NULL);
	TAILQ_INSERT_HEAD(&w->w_idle, u, u_entry);
	w->w_nidle++;
	/* last: enabling a TLS filter reads at once, and a close_notify
	   already there retires <u> (pool_event_cb) before this returns */
	conn_bev_enable(u->u_bev, EV_READ);
}

struct upstream *
upstream_pool_take(struct worker *w, const char *key)
{
	struct upstream	*u;

	TAILQ_FOREACH(u, &w->w_idle, u_entry) {
		if (strcmp(u->u_key, key) != 0)
			continue;
		pool_remove(u);
		/* reading stays on: the taker sets its callbacks at once;
		   and the pool's idle timeout is cleared while it is (on a
		   disabled bufferevent libevent would keep the armed one, and
		   it would cut the request this connection now serves) */
		bufferevent_set_timeouts(u->u_bev, NULL, NULL);
		u->u_reused = 1;
		return u;
	}
	return NULL;
}

void
upstream_pool_flush(struct worker *w)
{
	struct upstream	*u;

	while ((u = TAILQ_FIRST(&w->w_idle)) != NULL) {
		pool_remove(u);
		upstream_free(u);
	}
}

/*
 * Did the TLS handshake (not the TCP connect) fail? Then say why: the
 * certificate verification error when there is one. A socket error under
 * TLS (refused, reset: libevent reports it as a bare SSL_ERROR_SYSCALL,
 * no library) is the connect's: upstream_unreachable.
 */
static int
upstream_tls_failed(struct conn *c, struct bufferevent *bev, char *reason,
    size_t reasonsz)
{
	SSL		*ssl = bufferevent_openssl_get_ssl(bev);
	unsigned long	 e = bufferevent_get_openssl_error(bev);
	long		 vr;
	char		 err[256];

	if (ssl == NULL)
		return 0;
	vr = SSL_get_verify_result(ssl);
	if (vr != X509_V_OK) {
		snprintf(reason, reasonsz, "upstream %s certificate not valid "
		    "for %s: %s", c->c_up->u_addr, c->c_x->x_host,
		    X509_verify_cert_error_string(vr));
	} else if (e != 0 && ERR_GET_LIB(e) != 0) {
		ERR_error_string_n(e, err, sizeof(err));
		snprintf(reason, reasonsz, "TLS with upstream %s failed: %s",
		    c->c_up->u_addr, err);
	} else
		return 0;
	ERR_clear_error();
	return 1;
}

static void
connect_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn	*c = arg;
	char		 reason[512];
	int		 err = EVUTIL_SOCKET_ERROR(), via;

	conn_ref(c);
	if (c->c_up->u_he_ev != NULL) {
		event_free(c->c_up->u_he_ev);
		c->c_up->u_he_ev = NULL;
	}
	if (what & BEV_EVENT_CONNECTED) {
		/* the address actually used is the one audited */
		memcpy(c->c_x->x_country, c->c_up->u_country,
		    sizeof(c->c_x->x_country));
		c->c_x->x_asn = c->c_up->u_asn;
		/* ALPN chose h2: c_up becomes a stream of a pooled session */
		if (c->c_tls && h2_pool_adopt(c) == -1) {
			conn_upstream_failed(c, AUD_R_UPSTREAM_UNREACHABLE,
			    "no HTTP/2 stream for the upstream");
			goto out;
		}
		conn_upstream_ready(c);
		goto out;
	}
	if (c->c_tls && upstream_tls_failed(c, bev, reason, sizeof(reason))) {
		conn_upstream_failed(c, AUD_R_UPSTREAM_TLS_FAILED, reason);
		goto out;
	}
	snprintf(reason, sizeof(reason), "connect to %s%s%s: %s",
	    c->c_up->u_addr, c->c_up->u_via[0] ? " via " : "",
	    c->c_up->u_via, err ? strerror(err) : "failed");
	via = c->c_up->u_via[0] != '\0';
	upstream_free(c->c_up);
	c->c_up = NULL;
	errno = 0;
	if (!via && c->c_r.r_next_addr < c->c_r.r_naddrs &&
	    conn_upstream_connect(c) == 0)
		goto out;
	conn_upstream_connect_failed(c, reason);
out:
	conn_unref(c);
}

/*
 * <sock> is connected, or connecting, to the destination (or a parent's
 * tunnel to it is open): TLS over it when the request is HTTPS, then
 * connect_event_cb. On -1 <sock> is freed, c_up->u_bev is NULL.
 */
static int
upstream_attach(struct conn *c, struct bufferevent *sock)
{
	struct upstream	*u = c->c_up;

	if (c->c_tls) {
		SSL *ssl = tls_client_ssl_new(c->c_worker->w_tls_client,
		    c->c_x->x_host);

		/* upstream.alpn; an Upgrade (websocket) needs HTTP/1.1 */
		if (ssl != NULL)
			tls_client_ssl_set_alpn(ssl, c->c_r.r_upgrade ?
			    TLS_ALPN_HTTP11 : c->c_cfg->c_upstream_alpn);
		/* on failure libevent frees <ssl>, not <sock> */
		u->u_bev = ssl == NULL ? NULL :
		    bufferevent_openssl_filter_new(c->c_worker->w_base,
		    sock, ssl, BUFFEREVENT_SSL_CONNECTING,
		    BEV_OPT_CLOSE_ON_FREE);
		if (u->u_bev != NULL)
			bufferevent_openssl_set_allow_dirty_shutdown(
			    u->u_bev, 1);
		else
			bufferevent_free(sock);
	} else
		u->u_bev = sock;
	if (u->u_bev == NULL)
		return -1;
	bufferevent_setcb(u->u_bev, NULL, NULL, connect_event_cb, c);
	/* a filter's handshake waits for reading to be enabled */
	bufferevent_enable(u->u_bev, EV_READ | EV_WRITE);
	return 0;
}

/* A parent's tunnel is open over c_up->u_bev: as if just connected. */
int
conn_upstream_tunnel_open(struct conn *c)
{
	struct bufferevent	*sock = c->c_up->u_bev;

	c->c_up->u_bev = NULL;
	if (upstream_attach(c, sock) == -1)
		return -1;
	if (!c->c_tls)
		connect_event_cb(sock, BEV_EVENT_CONNECTED, c);
	return 0;
}

void
conn_upstream_connect_failed(struct conn *c, const char *reason)
{
	if (errno == EMFILE || errno == ENFILE)
		conn_upstream_failed(c, AUD_R_OVERLOADED, "file descriptor "
		    "limit reached: no socket for the upstream connection");
	else
		conn_upstream_failed(c, AUD_R_UPSTREAM_UNREACHABLE, reason);
}

/* The attempt is slow: unless its TCP connection is up (TLS may be
   under way), the next address, of the other family, is tried instead. */
static void
he_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn		*c = arg;
	struct bufferevent	*sock;
	struct sockaddr_storage	 ss;
	socklen_t		 len = sizeof(ss);

	conn_ref(c);
	event_free(c->c_up->u_he_ev);
	c->c_up->u_he_ev = NULL;
	sock = bufferevent_get_underlying(c->c_up->u_bev);
	if (sock == NULL)
		sock = c->c_up->u_bev;
	if (getpeername(bufferevent_getfd(sock), (struct sockaddr *)&ss,
	    &len) == 0)
		goto out;
	log_info("%s: %s not connected in %d ms: trying the next address",
	    c->c_client, c->c_up->u_addr, HE_DELAY_MS);
	upstream_free(c->c_up);
	c->c_up = NULL;
	errno = 0;
	if (conn_upstream_connect(c) == -1)
		conn_upstream_connect_failed(c, "cannot connect");
out:
	conn_unref(c);
}

/* Arm he_cb when an address of another family than <a> is still left. */
static void
he_arm(struct conn *c, const struct net_addr *a)
{
	struct timeval	 tv = { 0, HE_DELAY_MS * 1000 };
	size_t		 i;

	for (i = c->c_r.r_next_addr; i < c->c_r.r_naddrs; i++)
		if (c->c_r.r_addrs[i].na_family != a->na_family)
			break;
	if (i >= c->c_r.r_naddrs)
		return;
	/* interleaved (dns_done): the next address is of the other family */
	c->c_up->u_he_ev = evtimer_new(c->c_worker->w_base, he_cb, c);
	if (c->c_up->u_he_ev != NULL)
		evtimer_add(c->c_up->u_he_ev, &tv);
}

int
conn_upstream_connect(struct conn *c)
{
	struct sockaddr_storage	 ss;
	struct sockaddr_in	*sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)&ss;
	struct upstream		*u;
	const struct net_addr	*a;
	struct bufferevent	*sock;
	char			 ip[INET6_ADDRSTRLEN];
	socklen_t		 len;
	int			 one = 1, err = 0;

	if (conn_via(c) != NULL)
		return conn_parent_connect(c, conn_via(c));
	while (c->c_r.r_next_addr < c->c_r.r_naddrs) {
		a = &c->c_r.r_addrs[c->c_r.r_next_addr++];
		memset(&ss, 0, sizeof(ss));
		if (a->na_family == AF_INET) {
			sin->sin_family = AF_INET;
			sin->sin_port = htons((uint16_t)c->c_x->x_port);
			memcpy(&sin->sin_addr, a->na_bytes, 4);
			len = sizeof(*sin);
		} else {
			sin6->sin6_family = AF_INET6;
			sin6->sin6_port = htons((uint16_t)c->c_x->x_port);
			memcpy(&sin6->sin6_addr, a->na_bytes, 16);
			len = sizeof(*sin6);
		}
		u = xcalloc(1, sizeof(*u));
		u->u_worker = c->c_worker;
		conn_upstream_key(c, u->u_key, sizeof(u->u_key));
		net_addr_format(a, ip, sizeof(ip));
		snprintf(u->u_addr, sizeof(u->u_addr),
		    a->na_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip,
		    c->c_x->x_port);
		/* kept with the connection: a pooled reuse is audited too */
		(void)geo_lookup_addr(c->c_cfg->c_geo, a, u->u_country,
		    &u->u_asn);
		/*
		 * TLS runs as a filter over a socket bufferevent: that one
		 * reads all the socket holds in one readv, and the filter
		 * then decrypts every whole record in it before our read
		 * callback runs, so a response sent as several records is
		 * handled (and goes to the client) in one piece. Over the
		 * socket itself, bufferevent_openssl decrypts one record per
		 * readable event with two read()s each.
		 */
		sock = bufferevent_socket_new(c->c_worker->w_base, -1,
		    BEV_OPT_CLOSE_ON_FREE);
		if (sock == NULL) {
			free(u);
			return -1;
		}
		if (bufferevent_socket_connect(sock, (struct sockaddr *)&ss,
		    (int)len) == -1) {
			err = errno;
			bufferevent_free(sock);
			free(u);
			if (err == EMFILE || err == ENFILE)
				break;		/* no other address does better */
			continue;
		}
		(void)setsockopt(bufferevent_getfd(sock), IPPROTO_TCP,
		    TCP_NODELAY, &one, sizeof(one));
		c->c_up = u;
		if (upstream_attach(c, sock) == -1) {
			c->c_up = NULL;
			free(u);
			return -1;
		}
		he_arm(c, a);
		return 0;
	}
	errno = err;
	return -1;
}
