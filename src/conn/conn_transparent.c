/*
 * Transparent listener: connections a sandbox made to anywhere, redirected
 * here by the host's nftables rules. The original destination comes from
 * SO_ORIGINAL_DST, the sandbox from the source address. The first bytes
 * decide the path:
 *
 *   TLS ClientHello  -> as after an allowed CONNECT (SNI check, intercept
 *                       or splice), with no "200 Connection established"
 *   HTTP request     -> the HTTP pipeline, policy on the Host name
 *   anything else    -> a raw TCP tunnel, only by a rule for that name (a
 *                       DNS stub address maps back to its name) or IP
 *                       literal and port, with no method or path limits
 *                       (mode: report relays it anyway, on_unmatched: ask
 *                       and action: ask hold it, as for a request)
 *
 * The name is what policy judges; the gateway resolves it and checks the
 * addresses itself, never connecting blindly to the original destination.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/worker.h"
#include "dns/dns_synth.h"
#include "policy/pol.h"
#include "sbx/sbx.h"
#include "tls/tls.h"
#include "util/log.h"
#include "util/util.h"

/* How long a client may stay silent before we treat it as raw TCP (a
 * protocol where the server speaks first). */
#define TRANS_PEEK_MS	1500

struct dns_synth	*worker_dns_synth;


void
conn_transparent_begin(struct conn *c, int fd, const struct sockaddr *sa)
{
	struct sockaddr_in	 dst, self;
	socklen_t		 dlen = sizeof(dst), slen = sizeof(self);
	struct net_addr		 src, na;
	char			 ip[INET6_ADDRSTRLEN], why[300];

	c->c_transparent = 1;
	req_begin_transparent(c);
	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &dst, &dlen) == -1 ||
	    dst.sin_family != AF_INET) {
		conn_refuse(c, "no original destination (not a redirected "
		    "connection)");
		return;
	}
	/* without a redirect the "original" destination is us */
	if (getsockname(fd, (struct sockaddr *)&self, &slen) == 0 &&
	    self.sin_family == AF_INET && self.sin_port == dst.sin_port &&
	    self.sin_addr.s_addr == dst.sin_addr.s_addr) {
		conn_refuse(c, "connection made to the transparent listener "
		    "itself, not redirected to it");
		return;
	}
	memset(&na, 0, sizeof(na));
	na.na_family = AF_INET;
	memcpy(na.na_bytes, &dst.sin_addr, 4);
	c->c_orig_addr = na;
	c->c_trans_port = ntohs(dst.sin_port);
	c->c_x->x_port = c->c_trans_port;
	net_addr_format(&na, ip, sizeof(ip));

	/* the source address is the identity (spoofing is stopped by the
	   host's rp_filter and blackhole route) */
	if (net_addr_from_sockaddr(sa, &src) == -1 ||
	    (c->c_sbx = sbx_find_addr(&src)) == NULL) {
		conn_refuse(c, "connection from an address of no sandbox");
		return;
	}
	__atomic_add_fetch(&c->c_sbx->sb_conns, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&c->c_sbx->sb_last_used_ms, util_now_ms(),
	    __ATOMIC_RELAXED);
	c->c_policy = cfg_policy_find(c->c_cfg, c->c_sbx->sb_policy);

	/* a DNS stub address stands for the name it was given for */
	if (worker_dns_synth != NULL &&
	    dns_synth_in_pool(worker_dns_synth, &na)) {
		if (dns_synth_lookup(worker_dns_synth, &na, c->c_trans_host,
		    sizeof(c->c_trans_host)) == -1) {
			snprintf(why, sizeof(why), "connection to %s, a DNS "
			    "stub address given to no name", ip);
			conn_refuse(c, why);
			return;
		}
		c->c_trans_named = 1;
	} else
		snprintf(c->c_trans_host, sizeof(c->c_trans_host), "%s", ip);
	snprintf(c->c_x->x_host, sizeof(c->c_x->x_host), "%s", c->c_trans_host);
	c->c_state = CONN_TRANS_PEEK;
	conn_timer_arm(c, TRANS_PEEK_MS);
}

/* Policy for (x_host, x_port) as a tunnel, report mode and asks as for a
 * request: 0 with *rule (-1: no rule, in report mode or held for an ask),
 * or -1 after refusing. */
static int
trans_policy(struct conn *c, int *rule)
{
	struct pol_request	pr;
	struct pol_result	res;

	if (!aud_available()) {
		conn_refuse(c, "the audit log cannot be written");
		return -1;
	}
	memset(&pr, 0, sizeof(pr));
	pr.pr_host = c->c_x->x_host;
	pr.pr_port = c->c_x->x_port;
	pr.pr_method = "CONNECT";
	pr.pr_path = NULL;
	if (conn_policy_eval(c, &pr, &res) != POL_ALLOW) {
		conn_refuse(c, c->c_policy == NULL ? "the sandbox's policy "
		    "is not in the running config" : res.pr_reason);
		return -1;
	}
	c->c_x->x_allowed = 1;
	*rule = res.pr_rule;
	return 0;
}

int
conn_transparent_hello(struct conn *c, const struct tls_hello *h)
{
	char	sni[256];
	int	rule;

	if (!c->c_trans_named) {
		/* an IP the sandbox did not get from us: the SNI names the
		   host, and we resolve it ourselves */
		if (!h->th_has_sni || pol_host_normalize(h->th_sni, sni,
		    sizeof(sni)) == -1) {
			conn_refuse(c, "TLS to an IP address without a valid "
			    "server name");
			return -1;
		}
		snprintf(c->c_trans_host, sizeof(c->c_trans_host), "%s", sni);
		snprintf(c->c_x->x_host, sizeof(c->c_x->x_host), "%s", sni);
		c->c_trans_named = 1;
	}
	if (trans_policy(c, &rule) == -1)
		return -1;
	/* no rule (report, ask): intercepted, each request judged inside */
	return rule < 0 || c->c_policy->p_rules[rule].r_intercept;
}

/* The raw tunnel admitted: what the client sent so far stays buffered
 * and goes out first. */
static void
trans_raw_go(struct conn *c)
{
	c->c_trans_raw = 1;
	c->c_r.r_connect_replied = 1;	/* nobody asked to CONNECT */
	c->c_x->x_status = -1;
	conn_resolve(c);
}

static void
trans_raw(struct conn *c)
{
	const struct cfg_rule	*r;
	struct pol_result	 res;
	int			 rule;

	if (trans_policy(c, &rule) == -1)
		return;
	r = rule < 0 ? NULL : &c->c_policy->p_rules[rule];
	if (r != NULL && (r->r_nmethods > 0 || r->r_npaths > 0)) {
		/* bytes that are neither TLS nor HTTP cannot be held to
		   methods or paths: a refusal of the allowlist, which report
		   mode relays and on_unmatched: ask holds */
		snprintf(res.pr_reason, sizeof(res.pr_reason), "not TLS or "
		    "HTTP, and the rule limits methods or paths");
		res.pr_verdict = POL_DENY;
		c->c_x->x_ask = 0;	/* the rule did not allow it */
		if (!pol_unmatched(c->c_policy, &res, c->c_x->x_would_deny,
		    sizeof(c->c_x->x_would_deny), &c->c_x->x_ask)) {
			c->c_x->x_allowed = 0;
			conn_refuse(c, res.pr_reason);
			return;
		}
		c->c_x->x_rule[0] = '\0';	/* no rule allowed it */
	}
	c->c_x->x_proto = "tunnel";
	c->c_x->x_tls = "none";
	/* admitted now, or once the ledger has it (trans_raw_go follows) */
	if (conn_pipe_ready(c, trans_raw_go) == 0)
		trans_raw_go(c);
}

/* Does <p> start like an HTTP/1.x request line ("TOKEN SP")? Also used
 * after a CONNECT (conn_connect.c). */
int
conn_looks_like_http(const unsigned char *p, size_t len)
{
	size_t	i;

	for (i = 0; i < len && i < 24; i++) {
		if (p[i] == ' ')
			return i > 0;
		if (!isupper(p[i]) && p[i] != '-')
			return 0;
	}
	return -1;	/* not decided yet */
}

void
conn_transparent_peek(struct conn *c, int timed_out)
{
	struct evbuffer		*in = bufferevent_get_input(c->c_bev);
	size_t			 len = evbuffer_get_length(in);
	const unsigned char	*p;
	int			 http;

	if (timed_out) {
		/* the server speaks first (or the client is slow): raw */
		trans_raw(c);
		return;
	}
	if (len == 0)
		return;
	p = evbuffer_pullup(in, (ssize_t)(len < 24 ? len : 24));
	if (p[0] == 0x16) {
		/* the dispatch of a CONNECT's hello (conn_tls.c), which
		   comes back here for the name and the policy */
		conn_tls_peek(c);
		return;
	}
	http = conn_looks_like_http(p, len < 24 ? len : 24);
	if (http == -1)
		return;		/* a few more bytes will tell */
	if (http == 1) {
		/* the HTTP pipeline audits each request itself */
		c->c_x->x_active = 0;
		c->c_state = CONN_HEAD;
		conn_timer_arm(c, c->c_cfg->c_limits.l_header_timeout_ms);
		conn_feed_request(c);
		return;
	}
	trans_raw(c);
}
