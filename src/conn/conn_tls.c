/*
 * CONNECT handling after policy: peek the ClientHello, check its SNI
 * against the CONNECT target, then either splice the bytes to the real
 * host (intercept: false) or terminate TLS with a leaf from the sandbox's
 * CA and serve the decrypted requests like any other (same pipeline).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "ca/ca.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/worker.h"
#include "h2/h2.h"
#include "policy/pol.h"
#include "tls/tls.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"


/*
 * A TLS tunnel the policy allowed (a CONNECT, or a transparent
 * connection's hello): the 200 when one was asked for, then the hello is
 * awaited. -1: a splice refused (answered).
 */
static int
tls_allowed(struct conn *c, int intercept)
{
	struct evbuffer	*out = bufferevent_get_output(c->c_bev);

	if (!intercept && conn_sec_splice_refused(c))
		return -1;
	c->c_tls_port = c->c_x->x_port;
	c->c_x->x_tls = intercept ? "intercept" : "splice";
	c->c_x->x_proto = intercept ? "https" : "tunnel";
	c->c_x->x_status = 200;
	c->c_r.r_connect_replied = 1;
	/* a redirected connection was never asked to CONNECT */
	if (!c->c_transparent)
		evbuffer_add_printf(out,
		    "HTTP/1.1 200 Connection established\r\n\r\n");
	c->c_state = CONN_TLS_PEEK;
	conn_timer_arm(c, c->c_deny_tls ? CONN_DENY_PEEK_MS :
	    c->c_cfg->c_limits.l_header_timeout_ms);
	return 0;
}

void
conn_tls_connect_allowed(struct conn *c, int intercept)
{
	if (tls_allowed(c, intercept) == -1)
		return;
	/* the hello may have come with the CONNECT */
	if (evbuffer_get_length(bufferevent_get_input(c->c_bev)) > 0)
		conn_tls_peek(c);
}

/* What ALPN may choose: tls.alpn; a denied CONNECT's 403 is HTTP/1. */
static int
tls_alpn_set(const struct conn *c)
{
	return c->c_deny_tls ? TLS_ALPN_HTTP11 : c->c_cfg->c_tls_alpn;
}

/* Terminate TLS with a leaf for <host> minted under the sandbox's CA. */
static void
tls_intercept(struct conn *c, const char *host)
{
	struct worker		*w = c->c_worker;
	struct bufferevent	*tls;
	struct ca		*ca;
	X509			*leaf;
	SSL			*ssl;

	ca = ca_get(c->c_cfg->c_state_dir, c->c_sbx->sb_id);
	if (ca == NULL) {
		conn_refuse(c, "sandbox CA unavailable");
		return;
	}
	leaf = ca_cache_get(worker_cert_cache, ca, host,
	    c->c_cfg->c_tls_leaf_validity_ms, NULL);
	if (leaf == NULL || (ssl = SSL_new(w->w_tls_server)) == NULL) {
		X509_free(leaf);
		conn_refuse(c, "cannot mint a certificate");
		return;
	}
	if (SSL_use_certificate(ssl, leaf) != 1 ||
	    SSL_use_PrivateKey(ssl, ca_leaf_key(ca)) != 1) {
		X509_free(leaf);
		SSL_free(ssl);
		conn_refuse(c, "cannot use the minted certificate");
		return;
	}
	X509_free(leaf);
	tls_server_ssl_set_context(ssl, c->c_sbx->sb_id, host);
	tls_server_ssl_set_alpn(ssl, tls_alpn_set(c));
	snprintf(c->c_tls_host, sizeof(c->c_tls_host), "%s", host);

	/* the filter reads the ClientHello still waiting in c_bev */
	tls = bufferevent_openssl_filter_new(w->w_base, c->c_bev, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (tls == NULL) {
		conn_refuse(c, "cannot start TLS");
		return;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(tls, 1);
	c->c_bev = tls;
	c->c_state = CONN_TLS_HANDSHAKE;
	conn_set_client_callbacks(c);
	/* the hello is already buffered: no read event will announce it */
	bufferevent_trigger(bufferevent_get_underlying(tls), EV_READ, 0);
}

/*
 * The one ClientHello dispatch of both front ends: parse the hello once
 * (SNI, ALPN), and for a transparent connection, whose hello comes before
 * any policy, let it name the host and judge it (conn_transparent_hello);
 * then the SNI against the allowed host (domain fronting) and splice or
 * intercept.
 */
void
conn_tls_peek(struct conn *c)
{
	struct evbuffer		*in = bufferevent_get_input(c->c_bev);
	struct tls_hello	 h;
	size_t			 len = evbuffer_get_length(in);
	char			 sni[256], reason[600];
	const uint8_t		*buf;
	int			 splice, intercept;

	if (len > TLS_HELLO_MAX)
		len = TLS_HELLO_MAX;
	buf = evbuffer_pullup(in, (ssize_t)len);
	switch (tls_hello_parse(buf, len, &h)) {
	case TLS_HELLO_MORE:
		if (len >= TLS_HELLO_MAX)
			conn_refuse(c, "TLS ClientHello too large");
		return;
	case TLS_HELLO_NOT_TLS:
		conn_connect_not_tls(c);	/* plain HTTP, or a close */
		return;
	case TLS_HELLO_BAD:
		conn_refuse(c, "malformed TLS ClientHello");
		return;
	case TLS_HELLO_OK:
		break;
	}
	if (c->c_state == CONN_TRANS_PEEK &&
	    ((intercept = conn_transparent_hello(c, &h)) == -1 ||
	    tls_allowed(c, intercept) == -1))
		return;
	splice = strcmp(c->c_x->x_tls, "splice") == 0;
	if (h.th_has_sni &&
	    pol_host_normalize(h.th_sni, sni, sizeof(sni)) == -1) {
		conn_refuse(c, "TLS server name is not a valid host name");
		return;
	}
	if (splice) {
		if (!h.th_has_sni) {
			conn_refuse(c, "no TLS server name on a spliced "
			    "connection");
			return;
		}
		if (strcmp(sni, c->c_x->x_host) != 0) {
			snprintf(reason, sizeof(reason), "TLS server name %s "
			    "does not match CONNECT host %s (domain fronting)",
			    sni, c->c_x->x_host);
			conn_refuse(c, reason);
			return;
		}
		/* a spliced tunnel counts as one request; its admission may
		   wait for the ledger (conn_resolve follows then); the hello
		   stays buffered and goes out first */
		if (conn_pipe_ready(c, conn_resolve) == 0)
			conn_resolve(c);
		return;
	}
	/* ALPN with nothing we may pick is refused in the handshake; 2: h2
	   alone (not allowed here), 3: no HTTP/1.x nor h2 */
	c->c_tls_h2_only = 0;
	if (h.th_alpn_count > 0 && !((tls_alpn_set(c) & TLS_ALPN_H2) &&
	    h.th_alpn_h2) && !((tls_alpn_set(c) & TLS_ALPN_HTTP11) &&
	    (h.th_alpn_http11 || h.th_alpn_http10)))
		c->c_tls_h2_only = h.th_alpn_h2 && h.th_alpn_count == 1 ? 2 :
		    (tls_alpn_set(c) & TLS_ALPN_H2) ? 3 : 1;
	if (h.th_has_sni && strcmp(sni, c->c_x->x_host) != 0) {
		/* serve the name asked for, then refuse inside TLS */
		snprintf(c->c_tls_fronting, sizeof(c->c_tls_fronting), "%s",
		    c->c_x->x_host);
		tls_intercept(c, sni);
	} else
		tls_intercept(c, h.th_has_sni ? sni : c->c_x->x_host);
}

void
conn_tls_handshake_event(struct conn *c, short what)
{
	char		 err[256], reason[400];
	unsigned long	 e;

	if (c->c_deny_tls) {
		conn_connect_deny_handshake(c, what);
		return;
	}
	if (what & BEV_EVENT_CONNECTED) {
		/* inner requests are audited one by one, not the CONNECT */
		c->c_x->x_active = 0;
		c->c_tls = 1;
		c->c_nreq = 0;
		c->c_state = CONN_HEAD;
		http_msg_reset(&c->c_req);
		conn_timer_arm(c, c->c_cfg->c_limits.l_header_timeout_ms);
		__atomic_add_fetch(&worker_tls_handshakes, 1, __ATOMIC_RELAXED);
		if (h2_alpn_is_h2(bufferevent_openssl_get_ssl(c->c_bev))) {
			(void)h2_srv_start(c);	/* streams, each an exchange */
			return;
		}
		conn_feed_request(c);
		return;
	}
	if (c->c_tls_h2_only == 3)
		snprintf(err, sizeof(err), "client offers neither h2 nor "
		    "HTTP/1.x (ALPN)");
	else if (c->c_tls_h2_only)
		snprintf(err, sizeof(err), "client offers %s (ALPN); airlock "
		    "speaks HTTP/1.1 and HTTP/1.0 here (tls.alpn)",
		    c->c_tls_h2_only == 2 ? "only h2" : "no HTTP/1.x protocol");
	else if ((e = bufferevent_get_openssl_error(c->c_bev)) != 0)
		ERR_error_string_n(e, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "%s", (what & BEV_EVENT_EOF) ?
		    "client closed" : "connection error");
	snprintf(reason, sizeof(reason), "client TLS handshake failed: %s",
	    err);
	ERR_clear_error();
	/* policy allowed the CONNECT and it was answered 200: the record
	   says so, and that the client went away in the handshake */
	snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%s", reason);
	log_info("%s: sandbox %s, %s: %s", c->c_client, c->c_sbx->sb_id,
	    c->c_tls_host, reason);
	conn_audit(c);
	/* let the alert OpenSSL queued reach the client before we close */
	conn_close_when_flushed(c);
}
