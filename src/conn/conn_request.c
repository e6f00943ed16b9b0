/*
 * A request head, from the parser to the upstream: target, identity,
 * the stage table's policy, head and ready hooks, then a pooled upstream
 * or resolution (then the table's dest hook in dns_done).
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
#include "upstream/upstream.h"
#include "util/util.h"

static void	request_head_go(struct conn *);

static void
dns_done(const char *err, const struct net_addr *addrs, size_t naddrs,
    void *arg)
{
	struct conn	*c = arg;
	const struct cfg_policy *p = c->c_policy;
	char		 reason[512];

	c->c_dns = NULL;
	conn_ref(c);
	if (err != NULL && conn_via(c) != NULL && (p == NULL ||
	    (p->p_ngeo_deny == 0 && p->p_ngeo_allow == 0))) {
		/* the parent may know names we cannot resolve: it gets the
		   name, checked by policy (no address to check here) */
		naddrs = 0;
		err = NULL;
	}
	if (err != NULL) {
		snprintf(reason, sizeof(reason), "%s: %s", c->c_x->x_host, err);
		conn_upstream_failed(c, AUD_R_UPSTREAM_UNREACHABLE, reason);
		goto out;
	}
	/* the dest stage (geo/geo_stage.c): guard and countries */
	if (conn_pipe_dest(c, addrs, naddrs) == -1)
		goto out;
	if (naddrs > sizeof(c->c_r.r_addrs) / sizeof(c->c_r.r_addrs[0]))
		naddrs = sizeof(c->c_r.r_addrs) / sizeof(c->c_r.r_addrs[0]);
	memcpy(c->c_r.r_addrs, addrs, naddrs * sizeof(addrs[0]));
	net_addrs_interleave(c->c_r.r_addrs, naddrs);
	c->c_r.r_naddrs = naddrs;
	c->c_r.r_next_addr = 0;
	conn_timer_arm(c, c->c_cfg->c_limits.l_connect_timeout_ms);
	if (conn_upstream_connect(c) == -1)
		conn_upstream_connect_failed(c, "cannot connect");
out:
	conn_unref(c);
}

void
conn_upstream_key(struct conn *c, char *key, size_t keysz)
{
	char	port[21];
	size_t	n;

	/* per request (the pool lookup): no snprintf */
	n = util_copy_str(key, c->c_tls ? "https://" : "http://", keysz);
	n += util_copy_str(key + n, c->c_x->x_host, keysz - n);
	port[0] = ':';
	util_u64_dec((uint64_t)c->c_x->x_port, port + 1);
	n += util_copy_str(key + n, port, keysz - n);
	/* through a parent or not: not the same connection */
	if (conn_via(c) != NULL && n < keysz) {
		n += util_copy_str(key + n, " via ", keysz - n);
		if (n < keysz)
			util_copy_str(key + n, conn_via(c)->p_url, keysz - n);
	}
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

	c->c_x->x_port = c->c_trans_port;
	/* what a refusal's audit record knows already */
	if (c->c_trans_named)
		util_copy_str(c->c_x->x_host, c->c_trans_host,
		    sizeof(c->c_x->x_host));
	if ((i = http_msg_find(m, "host", 0)) == -1) {
		conn_deny(c, AUD_R_BAD_REQUEST, "Host header missing");
		return -1;
	}
	http_msg_value(m, i, &v, &vlen);
	if (http_authority_parse(v, vlen, c->c_trans_port, 0, &h, &why) ==
	    -1) {
		conn_deny(c, AUD_R_BAD_REQUEST, why);
		return -1;
	}
	if ((c->c_trans_named && strcmp(h.t_host, c->c_trans_host) != 0) ||
	    h.t_port != c->c_trans_port || (t->t_host[0] != '\0' &&
	    (strcmp(t->t_host, h.t_host) != 0 ||
	    t->t_port != c->c_trans_port))) {
		/* header values are never echoed (error pages, audit) */
		snprintf(reason, sizeof(reason), "Host header does not name "
		    "the destination %s:%d", c->c_trans_host, c->c_trans_port);
		conn_deny(c, AUD_R_DENIED, reason);
		return -1;
	}
	snprintf(c->c_x->x_host, sizeof(c->c_x->x_host), "%s", h.t_host);
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
			conn_reply_error(c, AUD_R_BAD_REQUEST,
			    "CONNECT inside a tunnel", 1);
			return -1;
		}
		if (http_authority_parse(url, m->hm_url_len, 0, 1, &t,
		    &why) == -1) {
			conn_reply_error(c, AUD_R_BAD_REQUEST, why, 1);
			return -1;
		}
		snprintf(c->c_x->x_host, sizeof(c->c_x->x_host), "%s",
		    t.t_host);
		c->c_x->x_port = t.t_port;
		return 0;
	}
	if (http_target_parse(url, m->hm_url_len, c->c_tls, c->c_tls ||
	    c->c_transparent || c->c_tunnel_http, &t, &why) == -1) {
		http_target_fini(&t);	/* conn_reply_error() reads it again */
		conn_reply_error(c, AUD_R_BAD_REQUEST, why, 1);
		return -1;
	}
	c->c_x->x_path = t.t_path;
	c->c_x->x_query = t.t_query;
	if (!c->c_tls && (c->c_transparent || c->c_tunnel_http))
		return transparent_target(c, &t);
	if (!c->c_tls) {
		util_copy_str(c->c_x->x_host, t.t_host, sizeof(c->c_x->x_host));
		c->c_x->x_port = t.t_port;
		return 0;
	}

	/* intercepted: the session decides host and port */
	util_copy_str(c->c_x->x_host, c->c_tls_host, sizeof(c->c_x->x_host));
	c->c_x->x_port = c->c_tls_port;
	if (c->c_tls_fronting[0] != '\0') {
		snprintf(reason, sizeof(reason), "TLS server name %s does not "
		    "match CONNECT host %s (domain fronting)", c->c_tls_host,
		    c->c_tls_fronting);
		conn_deny(c, AUD_R_DENIED, reason);
		return -1;
	}
	if (t.t_host[0] != '\0' && (strcmp(t.t_host, c->c_tls_host) != 0 ||
	    t.t_port != c->c_tls_port || !t.t_https)) {
		conn_deny(c, AUD_R_DENIED,
		    "request target does not name the TLS server");
		return -1;
	}
	if ((i = http_msg_find(m, "host", 0)) == -1) {
		conn_deny(c, AUD_R_BAD_REQUEST, "Host header missing");
		return -1;
	}
	http_msg_value(m, i, &v, &vlen);
	if (http_authority_parse(v, vlen, c->c_tls_port, 0, &h, &why) == -1 ||
	    strcmp(h.t_host, c->c_tls_host) != 0 ||
	    h.t_port != c->c_tls_port) {
		snprintf(reason, sizeof(reason), "Host header does not name "
		    "the TLS server %s", c->c_tls_host);
		conn_deny(c, AUD_R_DENIED, reason);
		return -1;
	}
	return 0;
}

/* The request head is in: decide, then find an upstream. */
void
conn_on_request_head(struct conn *c)
{
	struct http_msg		*m = &c->c_req;

	conn_cfg_refresh(c);	/* judged under the config of now */
	util_copy_str(c->c_x->x_method, http_msg_method(m),
	    sizeof(c->c_x->x_method));
	c->c_r.r_keepalive = m->hm_keepalive && !c->c_worker->w_stopping;
	c->c_r.r_connect = m->hm_method == HTTP_CONNECT;
	if (c->c_r.r_connect) {
		c->c_x->x_proto = "tunnel";
		c->c_x->x_tls = NULL;
		c->c_r.r_keepalive = 0;
	}
	if (request_target(c) == -1)
		return;
	if (m->hm_method == HTTP_TRACE) {
		conn_deny(c, AUD_R_NOT_IMPLEMENTED, "method is not relayed");
		return;
	}
	/* who is asking, before any stage (conn/conn_ident.c says why
	   the driver settles it and not a row of the table); 1: the
	   fleet's registry is asked first (conn_ident_resume) */
	if (conn_pipe_identity(c) != 0)
		return;
	request_head_go(c);
}

/* The fleet's lookup of a login's id ended (or timed out): again. */
void
conn_ident_resume(struct conn *c)
{
	c->c_r.r_ident_waited = 1;
	if (c->c_s5_step == CONN_S5_AUTH) {
		/* a SOCKS5 login: its kept bytes again */
		c->c_state = CONN_SOCKS5;
		conn_timer_arm(c, c->c_cfg->c_limits.l_connect_timeout_ms);
		conn_socks5_read(c);
		return;
	}
	c->c_state = CONN_HEAD;		/* where the head left it */
	conn_timer_arm(c, c->c_cfg->c_limits.l_connect_timeout_ms);
	if (conn_pipe_identity(c) != 0)
		return;
	request_head_go(c);
	/* a body held whole may be buffered already */
	if (!c->c_closing && c->c_state == CONN_BODY_BUFFER)
		conn_feed_request(c);
}

/* The sandbox is known: judge the request. */
static void
request_head_go(struct conn *c)
{
	struct http_msg		*m = &c->c_req;
	int			 i, intercept;

	/* fail closed: no request goes out that the audit cannot record */
	if (!aud_available()) {
		conn_deny(c, AUD_R_AUDIT_UNAVAILABLE, "the audit log cannot "
		    "be written; requests are refused until it can");
		return;
	}
	if (c->c_r.r_connect && conn_connect_guard(c) == -1)
		return;

	/* the policy stage (policy/pol_stage.c) */
	if (conn_pipe_policy(c, &intercept) == -1)
		return;
	if (c->c_r.r_connect) {
		/* TLS follows: peek its ClientHello before going anywhere */
		conn_tls_connect_allowed(c, intercept);
		return;
	}

	if ((i = http_msg_find(m, "upgrade", 0)) != -1 &&
	    http_msg_connection_has(m, "upgrade")) {
		const char	*v;
		size_t		 vlen;

		http_msg_value(m, i, &v, &vlen);
		/* only WebSocket; other upgrades (h2c) are ignored and the
		   request served as HTTP/1.1 (RFC 9110 section 7.8) */
		if (util_strncaseeq(v, vlen, "websocket"))
			c->c_r.r_upgrade = 1;
		else
			http_msg_ignore_upgrade(m);
	}

	if ((i = conn_pipe_req_head(c, &c->c_r.r_hold)) == -1)
		return;
	if (i == 1 && !conn_msg_empty_body_left(m)) {
		/* SigV4 signs the body, metering reads (and may rewrite) it:
		 * hold it whole before going out */
		if (m->hm_framing == HTTP_BODY_LENGTH &&
		    m->hm_content_length > c->c_r.r_hold) {
			c->c_x->x_allowed = 0;
			conn_reply_error(c, AUD_R_BODY_TOO_LARGE, "request "
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
void
conn_proceed(struct conn *c)
{
	if (conn_pipe_ready(c, conn_find_upstream) != 0)
		return;
	conn_find_upstream(c);
}

/* A pooled upstream for the request, else resolve and connect. */
void
conn_find_upstream(struct conn *c)
{
	char	key[300];

	c->c_state = CONN_WAIT;
	if (!c->c_r.r_upgrade) {
		conn_upstream_key(c, key, sizeof(key));
		c->c_up = h2_pool_take(c->c_worker, key);
		if (c->c_up == NULL)
			c->c_up = upstream_pool_take(c->c_worker, key);
		if (c->c_up != NULL) {
			const char *list;

			/* pooled under another sandbox's policy: the geo
			 * rules of this one decide (dns_done() says why) */
			if (geo_policy_allows(c->c_policy, c->c_up->u_country,
			    &list)) {
				memcpy(c->c_x->x_country, c->c_up->u_country,
				    sizeof(c->c_x->x_country));
				c->c_x->x_asn = c->c_up->u_asn;
				conn_upstream_ready(c);
				return;
			}
			upstream_pool_put(c->c_worker, c->c_up);
			c->c_up = NULL;
		} else if (h2_pool_wait(c, key))
			return;		/* an h2 connection is on its way */
	}
	conn_resolve(c);
}

/* The body is held (SigV4): the request is whole, go upstream. */
void
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
	    c->c_cfg, c->c_x->x_host, dns_done, c);
}
