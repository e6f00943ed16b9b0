/*
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
#include "sbx/sbx.h"
#include "util/log.h"

const char *
conn_listener_default(const struct conn *c)
{
	return cfg_listen_default_sandbox(c->c_cfg, c->c_listener);
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
