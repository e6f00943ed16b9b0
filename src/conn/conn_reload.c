/*
 * Reloads reach open connections. A connection holds a reference to a
 * config (c_cfg), but it is only the config of the request under way:
 *
 *  - at every request head, conn_cfg_refresh() moves the connection to
 *    the worker's current config, so that policy, caps and secret values
 *    (the store belongs to the config) are those of the moment the head
 *    arrived; a request in flight keeps the reference it started with,
 *    since nothing swaps it before the next head.
 *  - a sandbox identified once for the whole connection (intercepted TLS
 *    session, transparent listener) is looked up again at every request:
 *    one deleted, removed from the file or given another token or
 *    address no longer speaks through it.
 *  - tunnels and WebSockets have no next request: limits.reload_grace
 *    after a reload, each worker judges its open ones under the current
 *    config and closes those no rule allows any more, audited with a
 *    reason starting "reload_revoked".
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <event2/util.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_reload.h"
#include "conn/worker.h"
#include "dns/net_guard.h"
#include "policy/pol.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

/* "IP:PORT" or "[IP]:PORT" -> address; 0 or -1. */
static int
addr_of(const char *ipport, struct net_addr *na)
{
	struct sockaddr_storage	ss;
	int			len = sizeof(ss);

	if (ipport[0] == '\0' || evutil_parse_sockaddr_port(ipport,
	    (struct sockaddr *)&ss, &len) != 0)
		return -1;
	return net_addr_from_sockaddr((struct sockaddr *)&ss, na);
}

/*
 * The registry's current entry for the sandbox <c> speaks for (a new
 * reference), or NULL with <why> filled in. A static sandbox that a
 * reload changed is a new entry: it still stands for this connection
 * when what identified the connection (the token, or on the transparent
 * listener the source address) still identifies it.
 */
static struct sbx *
current_sandbox(struct conn *c, char *why, size_t whysz)
{
	struct sbx	*old = c->c_sbx, *s;
	struct net_addr	 src;

	if (old == NULL) {
		snprintf(why, whysz, "no sandbox");
		return NULL;
	}
	if (__atomic_load_n(&old->sb_revoked, __ATOMIC_ACQUIRE)) {
		snprintf(why, whysz, "sandbox %s was deleted", old->sb_id);
		return NULL;
	}
	if ((s = sbx_find(old->sb_id)) == NULL) {
		snprintf(why, whysz, "sandbox %s is no longer configured",
		    old->sb_id);
		return NULL;
	}
	if (s == old)
		return s;
	if (c->c_transparent) {
		struct sbx	*owner = NULL;

		if (addr_of(c->c_client, &src) == 0)
			owner = sbx_find_addr(&src);
		sbx_unref(owner);
		if (owner == s)
			return s;
		snprintf(why, whysz, "the source address no longer belongs to "
		    "sandbox %s", old->sb_id);
	} else {
		if (sbx_same_token(s, old))
			return s;
		snprintf(why, whysz, "the token of sandbox %s changed; "
		    "connect again with the new credentials", old->sb_id);
	}
	sbx_unref(s);
	return NULL;
}

/* The connection now speaks for <s> (takes the reference). */
static void
sandbox_take(struct conn *c, struct sbx *s)
{
	if (s == c->c_sbx) {
		sbx_unref(s);
		return;
	}
	__atomic_sub_fetch(&c->c_sbx->sb_conns, 1, __ATOMIC_RELAXED);
	sbx_unref(c->c_sbx);
	__atomic_add_fetch(&s->sb_conns, 1, __ATOMIC_RELAXED);
	c->c_sbx = s;
}

void
conn_cfg_refresh(struct conn *c)
{
	struct cfg	*cur = c->c_worker->w_cfg;

	if (c->c_cfg == cur)
		return;
	cfg_unref(c->c_cfg);
	c->c_cfg = cfg_ref(cur);
	/* c_policy pointed into the old config, which may be gone now */
	c->c_policy = c->c_sbx != NULL ?
	    cfg_policy_find(c->c_cfg, c->c_sbx->sb_policy) : NULL;
}

int
conn_sandbox_refresh(struct conn *c)
{
	struct sbx	*s;
	char		 why[300];

	if ((s = current_sandbox(c, why, sizeof(why))) == NULL) {
		c->c_x->x_allowed = 0;
		c->c_policy = NULL;
		conn_deny(c, AUD_R_DENIED, why);
		return -1;
	}
	sandbox_take(c, s);
	c->c_policy = cfg_policy_find(c->c_cfg, c->c_sbx->sb_policy);
	return 0;
}

/*
 * Is <c> a tunnel or WebSocket, or on its way to becoming one (a splice
 * connecting, an upgrade waiting for its 101), opened under an older
 * config than its worker's? One opened under the current config was
 * judged by it.
 */
static int
is_stream(const struct conn *c)
{
	if (!c->c_x->x_active || c->c_closing ||
	    c->c_cfg == c->c_worker->w_cfg)
		return 0;
	if (c->c_state == CONN_TUNNEL)
		return 1;
	if (c->c_r.r_upgrade)
		return c->c_state == CONN_WAIT || c->c_state == CONN_FORWARD;
	return c->c_r.r_connect && !c->c_tls && (c->c_state == CONN_WAIT ||
	    c->c_state == CONN_TLS_PEEK) && c->c_x->x_tls != NULL &&
	    (strcmp(c->c_x->x_tls, "splice") == 0 || c->c_trans_raw);
}

/*
 * Would <cfg> still let the tunnel or WebSocket <c> through? 1, or 0
 * with <why>. The same judgement as when it was opened: the sandbox, its
 * policy's rule for the host, port, method and path (CONNECT for
 * tunnels), what kind of rule it is, and the network of the upstream.
 */
static int
stream_allowed(struct conn *c, const struct cfg *cfg, char *why,
    size_t whysz)
{
	const struct cfg_policy	*p;
	const struct cfg_rule	*r;
	struct pol_request	 pr;
	struct pol_result	 res;
	struct net_addr		 up;
	struct sbx		*s;
	char			 net[64];

	if ((s = current_sandbox(c, why, whysz)) == NULL)
		return 0;
	p = cfg_policy_find(cfg, s->sb_policy);
	if (p == NULL) {
		snprintf(why, whysz, "policy \"%s\" of sandbox %s is no "
		    "longer configured", s->sb_policy, s->sb_id);
		sbx_unref(s);
		return 0;
	}
	sbx_unref(s);
	memset(&pr, 0, sizeof(pr));
	pr.pr_host = c->c_x->x_host;
	pr.pr_port = c->c_x->x_port;
	pr.pr_method = c->c_r.r_connect ? "CONNECT" : c->c_x->x_method;
	pr.pr_path = c->c_r.r_connect ? NULL : c->c_x->x_path;
	if (pol_evaluate(p, &pr, &res) != POL_ALLOW) {
		/* report mode forwards what the rules deny, streams too */
		if (!p->p_report || p->p_unmatched_ask || c->c_trans_raw) {
			snprintf(why, whysz, "%s", res.pr_reason);
			return 0;
		}
		goto guard;
	}
	r = &p->p_rules[res.pr_rule];
	if (c->c_r.r_connect && !c->c_tls && c->c_x->x_tls != NULL &&
	    strcmp(c->c_x->x_tls, "splice") == 0 && r->r_intercept) {
		snprintf(why, whysz, "rule %s#%d now intercepts %s: the "
		    "spliced tunnel ends", p->p_name, res.pr_rule,
		    c->c_x->x_host);
		return 0;
	}
	if (c->c_trans_raw && (r->r_nmethods > 0 || r->r_npaths > 0)) {
		snprintf(why, whysz, "rule %s#%d now limits methods or paths, "
		    "which a raw TCP tunnel cannot be held to", p->p_name,
		    res.pr_rule);
		return 0;
	}
guard:
	if (addr_of(c->c_x->x_upstream, &up) == 0 &&
	    !net_guard_check(cfg->c_guard, &up, net, sizeof(net))) {
		snprintf(why, whysz, "upstream %s is in denied network %s",
		    c->c_x->x_upstream, net);
		return 0;
	}
	return 1;
}

/* reload_grace is over: close what the current config no longer allows. */
static void
sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker	*w = arg;
	struct conn	*c, *next;
	char		 why[400];
	size_t		 n = 0;

	for (c = TAILQ_FIRST(&w->w_conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, c_entry);
		if (!is_stream(c) || stream_allowed(c, w->w_cfg, why,
		    sizeof(why)))
			continue;
		snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason),
		    "reload_revoked: %s", why);
		log_info("%s: %s: closed after a reload: %s", c->c_client,
		    c->c_x->x_host, why);
		conn_ref(c);
		conn_close(c, AUD_R_REVOKED);
		conn_unref(c);
		n++;
	}
	if (n > 0)
		log_info("worker %d: %zu tunnels closed after a reload",
		    w->w_id, n);
}

void
conn_reload_sweep_arm(struct worker *w)
{
	uint64_t	ms = w->w_cfg->c_limits.l_reload_grace_ms;
	struct timeval	tv;

	if (w->w_sweep_ev == NULL &&
	    (w->w_sweep_ev = evtimer_new(w->w_base, sweep_cb, w)) == NULL) {
		log_warnx("worker %d: cannot arm the reload sweep", w->w_id);
		return;
	}
	/* a sweep already due judges every reload before it, in time */
	if (evtimer_pending(w->w_sweep_ev, NULL))
		return;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(w->w_sweep_ev, &tv);
}

void
conn_reload_sweep_free(struct worker *w)
{
	if (w->w_sweep_ev != NULL)
		event_free(w->w_sweep_ev);
	w->w_sweep_ev = NULL;
}
