/*
 * What follows a CONNECT on the explicit listener, besides an allowed
 * ClientHello (conn_tls.c):
 *
 *   denied by policy  -> "200", then the JSON 403 inside a TLS session
 *                        under the sandbox's CA, so the agent reads the
 *                        reason (SPEC: "For HTTPS, the answer is sent
 *                        inside the intercepted TLS session"). A CONNECT-
 *                        level 403 instead for an IP literal in a denied
 *                        network, a host that cannot be a certificate
 *                        subject, and past the per-sandbox rate bound of
 *                        such handshakes; a client that sends nothing
 *                        after the 200 gets the same 403 in plain HTTP.
 *   plain HTTP        -> the HTTP pipeline, with the CONNECT target as the
 *                        only authority (python websocket-client tunnels
 *                        ws:// so, https-proxy-agent http://, curl -p),
 *                        exactly as on the transparent listener: each
 *                        request judged as proto http for that host:port.
 *   anything else     -> closed, audited as such.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/worker.h"
#include "dns/net_guard.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

/*
 * Handshakes spent on denied CONNECTs, per sandbox: a generic cell rate
 * (token bucket) of CONN_DENY_TLS_RATE a second with bursts of
 * CONN_DENY_TLS_BURST. Each costs an ECDHE and a signature, and a leaf
 * minted (then cached) for a name never seen; past the bound a denial is
 * the CONNECT-level 403 again.
 */
#define CONN_DENY_TLS_RATE	10
#define CONN_DENY_TLS_BURST	20

/* Bytes that decide between an HTTP request line and anything else. */
#define CONN_SNIFF_BYTES	24

static int
deny_tls_admit(struct sbx *s)
{
	const uint64_t	 step = 1000000 / CONN_DENY_TLS_RATE;
	const uint64_t	 span = step * CONN_DENY_TLS_BURST;
	uint64_t	 now = util_now_us(), tat, from;

	tat = __atomic_load_n(&s->sb_deny_tls_tat, __ATOMIC_RELAXED);
	do {
		from = tat > now ? tat : now;
		if (from + step - now > span)
			return 0;
	} while (!__atomic_compare_exchange_n(&s->sb_deny_tls_tat, &tat,
	    from + step, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return 1;
}

/*
 * Can <host> (normalised) be the subject of a leaf a client accepts? An
 * IP literal, or a DNS name of letter-digit-hyphen labels that neither
 * start nor end with a hyphen (RFC 5280's preferred name syntax: no '_').
 */
static int
cert_name_ok(const char *host)
{
	struct net_addr	 a;
	size_t		 lab = 0;
	const char	*p;

	if (net_host_literal(host, &a) == 1)
		return 1;
	for (p = host; *p != '\0'; p++) {
		if (*p == '.') {
			if (lab == 0 || p[-1] == '-')
				return 0;
			lab = 0;
			continue;
		}
		if (*p == '-' && lab == 0)
			return 0;
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-'))
			return 0;
		lab++;
	}
	return lab > 0 && p[-1] != '-';
}

int
conn_connect_guard(struct conn *c)
{
	struct net_addr	 a;
	char		 net[64], reason[400];

	if (net_host_literal(c->c_x->x_host, &a) != 1 ||
	    net_guard_check(c->c_cfg->c_guard, &a, net, sizeof(net)))
		return 0;
	/* no handshake, no policy: nothing there may be reached */
	snprintf(reason, sizeof(reason), "destination %s is in denied "
	    "network %s", c->c_x->x_host, net);
	c->c_x->x_allowed = 0;
	conn_deny(c, AUD_R_DENIED, reason);
	return -1;
}

void
conn_connect_denied(struct conn *c, const char *reason)
{
	char	why[sizeof(c->c_x->x_reason)];

	c->c_x->x_allowed = 0;
	/* a redirected connection that says CONNECT was promised nothing */
	if (c->c_transparent || !cert_name_ok(c->c_x->x_host)) {
		conn_deny(c, AUD_R_DENIED, reason);
		return;
	}
	if (!deny_tls_admit(c->c_sbx)) {
		snprintf(why, sizeof(why), "%.300s (answered on the CONNECT: "
		    "over %d denied TLS sessions a second)", reason,
		    CONN_DENY_TLS_RATE);
		log_info("%s: sandbox %s: denied-CONNECT handshakes over "
		    "their bound", c->c_client, c->c_sbx->sb_id);
		conn_deny(c, AUD_R_DENIED, why);
		return;
	}
	snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%s", reason);
	c->c_x->x_why = AUD_R_DENIED;
	c->c_deny_tls = 1;
	/* 200, peek, leaf for the name asked for, handshake: as if allowed,
	   until conn_connect_deny_handshake() answers */
	conn_tls_connect_allowed(c, 1);
}

/*
 * The bytes after the 200 are an HTTP request: serve them through the
 * pipeline, the CONNECT's host and port the only authority a request may
 * name (transparent_target() in conn.c, as for the transparent listener).
 */
static void
tunnel_http_begin(struct conn *c)
{
	/* a denied CONNECT's requests are judged, and denied, one by one */
	c->c_deny_tls = 0;
	c->c_tunnel_http = 1;
	c->c_trans_named = 1;
	c->c_trans_port = c->c_x->x_port;
	util_copy_str(c->c_trans_host, c->c_x->x_host, sizeof(c->c_trans_host));
	/* the CONNECT is not audited: the requests in it are */
	c->c_x->x_active = 0;
	c->c_nreq = 0;
	http_msg_reset(&c->c_req);
	c->c_state = CONN_HEAD;
	conn_timer_arm(c, c->c_cfg->c_limits.l_header_timeout_ms);
	conn_feed_request(c);
}

void
conn_connect_not_tls(struct conn *c)
{
	struct evbuffer		*in = bufferevent_get_input(c->c_bev);
	size_t			 len = evbuffer_get_length(in);
	const unsigned char	*p;
	char			 why[sizeof(c->c_x->x_reason)];
	int			 http;

	if (c->c_transparent) {
		/* its own peek saw a handshake record: not this */
		conn_refuse(c, "malformed TLS ClientHello");
		return;
	}
	if (len > CONN_SNIFF_BYTES)
		len = CONN_SNIFF_BYTES;
	p = evbuffer_pullup(in, (ssize_t)len);
	http = conn_looks_like_http(p, len);
	if (http == -1 && len < CONN_SNIFF_BYTES)
		return;		/* a few more bytes will tell */
	if (http == 1) {
		tunnel_http_begin(c);
		return;
	}
	if (c->c_deny_tls)
		snprintf(why, sizeof(why), "%.300s; the tunnel carried neither "
		    "TLS nor HTTP", c->c_x->x_reason);
	else
		snprintf(why, sizeof(why), "the tunnel carried neither TLS nor "
		    "HTTP");
	conn_refuse(c, why);
}

void
conn_connect_deny_handshake(struct conn *c, short what)
{
	char		 denial[sizeof(c->c_x->x_reason)], err[256];
	unsigned long	 e;

	/* conn_reply_error() rewrites r_reason from its argument */
	snprintf(denial, sizeof(denial), "%s", c->c_x->x_reason);
	if (what & BEV_EVENT_CONNECTED) {
		c->c_tls = 1;
		__atomic_add_fetch(&worker_tls_handshakes, 1, __ATOMIC_RELAXED);
		/* answered at once, whatever request comes: then close */
		conn_reply_error(c, AUD_R_DENIED, denial, 1);
		return;
	}
	if (c->c_tls_h2_only)
		snprintf(err, sizeof(err), "client offers only h2 (ALPN)");
	else if ((e = bufferevent_get_openssl_error(c->c_bev)) != 0)
		ERR_error_string_n(e, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "%s", (what & BEV_EVENT_EOF) ?
		    "client closed" : "connection error");
	ERR_clear_error();
	snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%.250s; client "
	    "TLS handshake failed: %.200s", denial, err);
	log_info("%s: sandbox %s, %s: %s", c->c_client, c->c_sbx->sb_id,
	    c->c_tls_host, c->c_x->x_reason);
	conn_audit(c);
	/* let the alert OpenSSL queued reach the client before we close */
	conn_close_when_flushed(c);
}

void
conn_connect_deny_timeout(struct conn *c)
{
	char	denial[sizeof(c->c_x->x_reason)];

	snprintf(denial, sizeof(denial), "%s", c->c_x->x_reason);
	if (c->c_state == CONN_TLS_PEEK &&
	    evbuffer_get_length(bufferevent_get_input(c->c_bev)) == 0) {
		/* nothing after our 200: no TLS is coming, so the 403 the
		   CONNECT would have had goes out as the tunnel's first
		   bytes */
		c->c_deny_tls = 0;
		c->c_r.r_connect_replied = 0;
		c->c_x->x_proto = "tunnel";
		c->c_x->x_tls = NULL;
		conn_reply_error(c, AUD_R_DENIED, denial, 1);
		return;
	}
	snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%.400s; TLS "
	    "handshake not completed in time", denial);
	log_info("%s: TLS handshake timed out (denied CONNECT)", c->c_client);
	conn_close(c, AUD_R_TLS_FAILED);
}
