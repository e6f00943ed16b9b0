/*
 * The driver's identity step: which sandbox a request speaks for, settled
 * before the first hook of the stage table (conn_pipe_identity).
 *
 * It is the driver's and not a row of the table because identity is a
 * property of the connection, not of one exchange: the sandbox that sent
 * a CONNECT is the one of every request inside its TLS and of every h2
 * stream on it; on the transparent listener the source address names it
 * at accept, before any request exists (a refusal there is a closed
 * connection, not an answer); and the connection counts against its
 * sandbox (limits.max_connections_per_sandbox, the per-listener slot)
 * from the first request on. So the decision lives in its plane,
 * sbx/sbx_ident.c (Proxy-Authorization, the default sandbox, the token
 * compare), and the driver applies it to the connection here. A refusal
 * is the reason table's PROXY_AUTH_REQUIRED (407) or OVERLOADED, as the
 * stages' are. Every stage then reads the sandbox from xc_sandbox /
 * xc_policy.
 *
 * Which sandbox an explicit-proxy client is when it sends no
 * Proxy-Authorization: its listener's default sandbox (listen.proxy item
 * {address, default_sandbox}, else listen.default_sandbox), or none (407).
 * Clients such as git (anyauth), curl --proxy-anyauth, Java and .NET send
 * credentials only after a 407: on a listener with a default sandbox they
 * never get one, and silently run as the default sandbox. So credentialed
 * sandboxes belong on a listener without a default, and the gateway says
 * so at start when the two share a listener.
 */
#include "config.h"

#include <string.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_reload.h"
#include "conn/conn_slots.h"
#include "http/http_msg.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

const char *
conn_listener_default(const struct conn *c)
{
	return cfg_listen_default_sandbox(c->c_cfg, c->c_listener);
}

/* The connection speaks for <s> (a new reference) from now on. */
static int
ident_take(struct conn *c, struct sbx *s)
{
	uint64_t	now;

	conn_slot_release(c);	/* counts against its sandbox from now on */
	/* resolved per request: a reload may have changed the policy */
	c->c_policy = cfg_policy_find(c->c_cfg, s->sb_policy);
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
	    c->c_cfg->c_limits.l_max_connections_per_sandbox) {
		conn_deny(c, AUD_R_OVERLOADED,
		    "sandbox connection limit reached");
		return -1;
	}
	return 0;
}

int
conn_pipe_identity(struct conn *c)
{
	struct sbx	*s;
	const char	*v = NULL, *why = NULL;
	char		 login[256];
	size_t		 vlen = 0;
	int		 i;

	/* inside TLS the sandbox is the one that sent the CONNECT; on the
	   transparent listener the one of the source address: still it? */
	if (c->c_tls || c->c_transparent || c->c_tunnel_http)
		return conn_sandbox_refresh(c);
	if ((i = http_msg_find(&c->c_req, "proxy-authorization", 0)) != -1)
		http_msg_value(&c->c_req, i, &v, &vlen);
	if ((s = sbx_ident(v, vlen, conn_listener_default(c), login,
	    sizeof(login), &why)) == NULL) {
		/* fleet mode, an id unknown here: one lookup in Redis,
		   then this login again (conn_ident_resume) */
		if (login[0] != '\0' && !c->c_r.r_ident_waited &&
		    conn_pipe_ident_wait(c, login) == 0)
			return 1;
		conn_deny(c, AUD_R_PROXY_AUTH_REQUIRED, why);
		return -1;
	}
	return ident_take(c, s);
}

/* Sandboxes other than <id> (each has a token: given or generated). */
static size_t
others_than(const char *id)
{
	struct sbx	**v;
	size_t		  n, i, others = 0;

	n = sbx_list(&v);
	for (i = 0; i < n; i++)
		if (strcmp(v[i]->sb_id, id) != 0)
			others++;
	sbx_list_free(v, n);
	return others;
}

void
conn_ident_warn(const struct cfg *cfg)
{
	const char	*def;
	size_t		 i, others;

	for (i = 0; i < cfg->c_nlisten_proxy; i++) {
		if ((def = cfg_listen_default_sandbox(cfg, (int)i)) == NULL)
			continue;
		if ((others = others_than(def)) == 0)
			continue;
		log_warnx("listener %s: clients without credentials run as "
		    "default sandbox \"%s\", and %zu other sandbox%s with "
		    "tokens exist: a client that sends credentials only after "
		    "a 407 (git, curl --proxy-anyauth, Java, .NET) runs as "
		    "\"%s\" there; give credentialed clients a listener "
		    "without default_sandbox (listen.proxy: [{address: ..., "
		    "default_sandbox: null}])", cfg->c_listen_proxy[i], def,
		    others, others == 1 ? "" : "es", def);
	}
}
