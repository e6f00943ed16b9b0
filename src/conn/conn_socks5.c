/*
 * listen.socks5: RFC 1928 with username/password (RFC 1929) = sandbox id
 * and token, or no authentication for a source address that is a
 * sandbox's (gateway mode). CONNECT only: BIND and UDP ASSOCIATE get
 * reply 7 (command not supported). The name is resolved by the gateway
 * (remote DNS), an address literal checked by the destination guard at
 * once, and the host and port by policy before the success reply (reply
 * 2, "not allowed by ruleset", otherwise).
 *
 * After the reply the connection is what a transparent one is once its
 * destination is known (conn_transparent.c): a ClientHello goes through
 * the SNI check and interception or splicing, an HTTP request through the
 * HTTP pipeline with this host and port as its only authority, anything
 * else is a raw TCP tunnel for a rule without methods or paths. So SOCKS5
 * never bypasses an HTTP rule.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <openssl/crypto.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "dns/net_guard.h"
#include "dns/net_self.h"
#include "policy/pol.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

#define S5_PEEK_MS	1500	/* as TRANS_PEEK_MS: the server may speak
				   first (ssh does not wait, mysql does) */

enum {
	S5_REP_OK = 0,
	S5_REP_FAIL = 1,
	S5_REP_RULESET = 2,
	S5_REP_CMD = 7,
	S5_REP_ATYP = 8,
};

static void
s5_write(struct conn *c, const void *p, size_t len)
{
	evbuffer_add(bufferevent_get_output(c->c_bev), p, len);
}

static void
s5_reply(struct conn *c, int rep)
{
	/* BND.ADDR 0.0.0.0:0: clients of CONNECT do not use it */
	unsigned char	r[10] = { 5, 0, 0, 1, 0, 0, 0, 0, 0, 0 };

	r[1] = (unsigned char)rep;
	s5_write(c, r, sizeof(r));
}

/* End the handshake with <why> (audited, reason <reason>) once the last
   answer is written. */
static void
s5_end(struct conn *c, enum aud_reason why, const char *reason)
{
	c->c_x->x_allowed = 0;
	c->c_x->x_why = why;
	snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%.500s", reason);
	log_info("%s: socks5: %s", c->c_client, reason);
	conn_audit(c);
	conn_close_when_flushed(c);
}

/* The sandbox <s> (a reference) is the client. 0, or -1 after ending. */
static int
s5_identified(struct conn *c, struct sbx *s)
{
	if (__atomic_load_n(&s->sb_revoked, __ATOMIC_ACQUIRE)) {
		sbx_unref(s);
		return -1;
	}
	c->c_sbx = s;
	__atomic_store_n(&s->sb_last_used_ms, util_now_ms(), __ATOMIC_RELAXED);
	c->c_policy = cfg_policy_find(c->c_cfg, s->sb_policy);
	if ((size_t)__atomic_add_fetch(&s->sb_conns, 1, __ATOMIC_RELAXED) >
	    c->c_cfg->c_limits.l_max_connections_per_sandbox) {
		s5_reply(c, S5_REP_FAIL);
		s5_end(c, AUD_R_OVERLOADED, "sandbox connection limit reached");
		return -1;
	}
	return 0;
}

void
conn_socks5_begin(struct conn *c, const struct sockaddr *sa)
{
	req_begin_transparent(c);
	c->c_transparent = 1;	/* no CONNECT reply, no 407: as redirected */
	c->c_socks5 = 1;
	c->c_s5_step = CONN_S5_GREET;
	c->c_state = CONN_SOCKS5;
	if (net_addr_from_sockaddr(sa, &c->c_s5_src) == -1)
		c->c_s5_src.na_family = 0;
	conn_timer_arm(c, c->c_cfg->c_limits.l_header_timeout_ms);
}

static int
s5_greet(struct conn *c, const unsigned char *p, size_t len)
{
	static const unsigned char up[] = { 5, 2 }, none[] = { 5, 0 },
	    nomethod[] = { 5, 0xff };
	struct sbx	*s;
	size_t		 i, n;
	int		 has_up = 0, has_none = 0;

	if (len < 2)
		return 0;
	if (p[0] != 5) {
		s5_end(c, AUD_R_REFUSED, "not a SOCKS5 greeting");
		return -1;
	}
	n = p[1];
	if (len < 2 + n)
		return 0;
	for (i = 0; i < n; i++) {
		has_up |= p[2 + i] == 2;
		has_none |= p[2 + i] == 0;
	}
	evbuffer_drain(bufferevent_get_input(c->c_bev), 2 + n);
	if (has_up) {
		s5_write(c, up, sizeof(up));
		c->c_s5_step = CONN_S5_AUTH;
		return 1;
	}
	/* gateway mode: the source address is the identity */
	if (has_none && c->c_s5_src.na_family != 0 &&
	    (s = sbx_find_addr(&c->c_s5_src)) != NULL) {
		s5_write(c, none, sizeof(none));
		if (s5_identified(c, s) == -1) {
			if (!c->c_closing)
				s5_end(c, AUD_R_PROXY_AUTH_REQUIRED,
				    "sandbox revoked");
			return -1;
		}
		c->c_s5_step = CONN_S5_REQUEST;
		return 1;
	}
	s5_write(c, nomethod, sizeof(nomethod));
	s5_end(c, AUD_R_PROXY_AUTH_REQUIRED, "SOCKS5 client offers no "
	    "username/password (RFC 1929: sandbox id and token)");
	return -1;
}

static int
s5_auth(struct conn *c, const unsigned char *p, size_t len)
{
	static const unsigned char okay[] = { 1, 0 }, bad[] = { 1, 1 };
	struct sbx	*s = NULL;
	char		 id[256];
	size_t		 ul, pl;

	if (len < 2)
		return 0;
	ul = p[1];
	if (len < 2 + ul + 1)
		return 0;
	pl = p[2 + ul];
	if (len < 3 + ul + pl)
		return 0;
	if (c->c_r.r_ident_wait)
		return 0;	/* the fleet's lookup first: bytes kept */
	if (p[0] == 1 && ul > 0) {
		memcpy(id, p + 2, ul);
		id[ul] = '\0';
		s = sbx_auth(id, (const char *)p + 3 + ul, pl);
		/* fleet mode, an id unknown here: one lookup in Redis, then
		   these same bytes again (conn_ident_resume) */
		if (s == NULL && !c->c_r.r_ident_waited &&
		    conn_pipe_ident_wait(c, id) == 0)
			return 0;
	}
	/* the token is not kept anywhere */
	OPENSSL_cleanse(evbuffer_pullup(bufferevent_get_input(c->c_bev),
	    (ssize_t)(3 + ul + pl)), 3 + ul + pl);
	evbuffer_drain(bufferevent_get_input(c->c_bev), 3 + ul + pl);
	if (s == NULL || s5_identified(c, s) == -1) {
		if (c->c_closing)
			return -1;
		s5_write(c, bad, sizeof(bad));
		s5_end(c, AUD_R_PROXY_AUTH_REQUIRED,
		    "SOCKS5 credentials not valid");
		return -1;
	}
	s5_write(c, okay, sizeof(okay));
	c->c_s5_step = CONN_S5_REQUEST;
	return 1;
}

/* Guard and policy for the destination; 0, or -1 after answering. */
static int
s5_judge(struct conn *c)
{
	struct pol_request	 pr;
	struct pol_result	 res;
	struct net_addr		 a;
	char			 net[64], reason[400];

	if (!aud_available()) {
		s5_reply(c, S5_REP_FAIL);
		s5_end(c, AUD_R_REFUSED, "the audit log cannot be written");
		return -1;
	}
	if (net_host_literal(c->c_x->x_host, &a) == 1) {
		if (!net_guard_check(c->c_cfg->c_guard, &a, net, sizeof(net))) {
			snprintf(reason, sizeof(reason), "destination %s is "
			    "in denied network %s", c->c_x->x_host, net);
			s5_reply(c, S5_REP_RULESET);
			s5_end(c, AUD_R_DENIED, reason);
			return -1;
		}
		if (net_self_check(c->c_cfg->c_self, &a, c->c_x->x_port,
		    reason, sizeof(reason))) {
			s5_reply(c, S5_REP_RULESET);
			s5_end(c, AUD_R_DENIED, reason);
			return -1;
		}
	}
	memset(&pr, 0, sizeof(pr));
	pr.pr_host = c->c_x->x_host;
	pr.pr_port = c->c_x->x_port;
	pr.pr_method = "CONNECT";
	/* report mode and asks as on the transparent listener */
	if (c->c_policy == NULL ||
	    conn_policy_eval(c, &pr, &res) != POL_ALLOW) {
		s5_reply(c, S5_REP_RULESET);
		s5_end(c, AUD_R_DENIED, c->c_policy == NULL ? "the sandbox's "
		    "policy is not in the running config" : res.pr_reason);
		return -1;
	}
	return 0;
}

static int
s5_request(struct conn *c, const unsigned char *p, size_t len)
{
	static const char *cmds[] = { "", "CONNECT", "BIND", "UDP ASSOCIATE" };
	struct net_addr	 a;
	char		 host[256], norm[256], why[128];
	size_t		 need, hl;
	int		 port = -1;

	if (len < 5)
		return 0;
	if (p[0] != 5) {
		s5_end(c, AUD_R_REFUSED, "not a SOCKS5 request");
		return -1;
	}
	switch (p[3]) {
	case 1: need = 4 + 4 + 2; break;
	case 4: need = 4 + 16 + 2; break;
	case 3: need = 4 + 1 + (size_t)p[4] + 2; break;
	default:
		s5_reply(c, S5_REP_ATYP);
		s5_end(c, AUD_R_REFUSED, "SOCKS5 address type not supported");
		return -1;
	}
	if (len < need)
		return 0;
	if (p[1] != 1) {
		snprintf(why, sizeof(why), "SOCKS5 command %s not supported "
		    "(CONNECT only)", p[1] <= 3 ? cmds[p[1]] : "unknown");
		s5_reply(c, S5_REP_CMD);
		s5_end(c, AUD_R_REFUSED, why);
		return -1;
	}
	memset(&a, 0, sizeof(a));
	if (p[3] == 3) {
		hl = p[4];
		memcpy(host, p + 5, hl);
		host[hl] = '\0';
		if (hl == 0 || memchr(p + 5, '\0', hl) != NULL)
			port = 0;	/* refused below */
	} else {
		a.na_family = p[3] == 1 ? AF_INET : AF_INET6;
		memcpy(a.na_bytes, p + 4, p[3] == 1 ? 4 : 16);
		net_addr_format(&a, host, sizeof(host));
	}
	port = port == -1 ? ((p[need - 2] << 8) | p[need - 1]) : 0;
	evbuffer_drain(bufferevent_get_input(c->c_bev), need);
	if (port == 0 || pol_host_normalize(host, norm,
	    sizeof(norm)) == -1) {
		s5_reply(c, S5_REP_FAIL);
		s5_end(c, AUD_R_BAD_REQUEST, "SOCKS5 request for a bad host "
		    "name or port 0");
		return -1;
	}
	util_copy_str(c->c_x->x_host, norm, sizeof(c->c_x->x_host));
	c->c_x->x_port = port;
	util_copy_str(c->c_trans_host, norm, sizeof(c->c_trans_host));
	c->c_trans_port = port;
	/* a name is the only authority; for an address the SNI names the
	   host, as on the transparent listener */
	c->c_trans_named = net_host_literal(norm, &a) != 1;
	if (s5_judge(c) == -1)
		return -1;
	s5_reply(c, S5_REP_OK);
	c->c_s5_step = CONN_S5_DONE;
	c->c_state = CONN_TRANS_PEEK;
	conn_timer_arm(c, S5_PEEK_MS);
	return 1;
}

void
conn_socks5_read(struct conn *c)
{
	struct evbuffer		*in = bufferevent_get_input(c->c_bev);
	const unsigned char	*p;
	size_t			 len;
	int			 r;

	do {
		len = evbuffer_get_length(in);
		if (len > 600)
			len = 600;	/* the longest message: 3 + 255 + 255 */
		if (len == 0)
			return;
		p = evbuffer_pullup(in, (ssize_t)len);
		switch (c->c_s5_step) {
		case CONN_S5_GREET:
			r = s5_greet(c, p, len);
			break;
		case CONN_S5_AUTH:
			r = s5_auth(c, p, len);
			break;
		case CONN_S5_REQUEST:
			r = s5_request(c, p, len);
			break;
		default:
			return;
		}
	} while (r == 1 && c->c_state == CONN_SOCKS5);
	/* bytes sent right after the request: the peek looks at them */
	if (r == 1 && c->c_state == CONN_TRANS_PEEK &&
	    evbuffer_get_length(in) > 0)
		conn_transparent_peek(c, 0);
}

void
conn_socks5_timeout(struct conn *c)
{
	s5_end(c, AUD_R_REFUSED, "SOCKS5 handshake not completed in time");
}
