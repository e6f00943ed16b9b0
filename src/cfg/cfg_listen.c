/*
 * listen.proxy items given as a mapping, {address, default_sandbox}, and
 * each explicit listener's default sandbox: a plain address takes
 * listen.default_sandbox, a mapping its own (null: none), so one listener
 * can serve credential-less local clients while another always answers
 * 407 (git and curl --proxy-anyauth send credentials only after one).
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg_internal.h"
#include "util/util.h"

struct cfg_listen_item {
	char			*li_addr;	/* canonical, or NULL */
	char			*li_default;	/* sandbox id, or NULL */
};

static void
cfg_k_listen_address(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_listen_item	*li = arg;
	const char		*s, *why;

	s = cfg_str(v);
	if ((why = cfg_parse_hostport(s, 0, &li->li_addr)) != NULL)
		cfg_err(cp, v, "bad listen address \"%s\": %s", s, why);
}

static void
cfg_k_listen_default(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_listen_item	*li = arg;
	const char		*s;

	s = cfg_str(v);
	li->li_default = xstrdup(s);
}

static const struct cfg_key cfg_listen_item_keys[] = {
	CFG_SCALAR("address", CFG_K_REQUIRED, cfg_k_listen_address, 0,
	    "\"IP:PORT\""),
	CFG_SCALAR("default_sandbox", 0, cfg_k_listen_default, 0,
	    "a sandbox id"),
	CFG_END,
};

/* Per-listener arrays for <n> listeners (idempotent). */
static void
cfg_listen_alloc(struct cfg_parse *cp, size_t n)
{
	struct cfg	*c = cp->cp_cfg;

	if (c->c_listen_default != NULL)
		return;
	c->c_listen_default = xcalloc(n, sizeof(char *));
	c->c_listen_own = xcalloc(n, sizeof(int));
	cp->cp_listen_nodes = xcalloc(n, sizeof(*cp->cp_listen_nodes));
}

char *
cfg_listen_item_map(struct cfg_parse *cp, yaml_node_t *map, size_t n,
    size_t i)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_listen_item	 li = { NULL, NULL };
	yaml_node_t		*dv = NULL;

	cfg_listen_alloc(cp, n);
	cfg_walk_map(cp, map, "a \"proxy\" listener", cfg_listen_item_keys,
	    &li);
	if (li.li_addr == NULL) {
		free(li.li_default);
		return NULL;
	}
	/* present, even as null, it is this listener's own setting */
	if (cfg_map_key(cp, map, "default_sandbox", &dv) != NULL) {
		c->c_listen_own[i] = 1;
		c->c_listen_default[i] = li.li_default;
		cp->cp_listen_nodes[i] = dv;
	} else
		free(li.li_default);
	return li.li_addr;
}

void
cfg_listen_finish(struct cfg_parse *cp)
{
	struct cfg	*c = cp->cp_cfg;
	size_t		 i;

	cfg_listen_alloc(cp, c->c_nlisten_proxy);
	for (i = 0; i < c->c_nlisten_proxy; i++) {
		if (!c->c_listen_own[i]) {
			if (c->c_default_sandbox != NULL)
				c->c_listen_default[i] =
				    xstrdup(c->c_default_sandbox);
			continue;
		}
		if (c->c_listen_default[i] != NULL &&
		    cfg_sandbox_find(c, c->c_listen_default[i]) == NULL)
			cfg_err(cp, cp->cp_listen_nodes[i], "default_sandbox "
			    "\"%s\" of listener %s is not a defined sandbox",
			    c->c_listen_default[i], c->c_listen_proxy[i]);
	}
	free(cp->cp_listen_nodes);
	cp->cp_listen_nodes = NULL;
}

const char *
cfg_listen_default_sandbox(const struct cfg *c, int listener)
{
	if (listener < 0 || (size_t)listener >= c->c_nlisten_proxy ||
	    c->c_listen_default == NULL)
		return NULL;
	return c->c_listen_default[listener];
}

void
cfg_listen_free(struct cfg *c)
{
	size_t	i;

	if (c->c_listen_default != NULL)
		for (i = 0; i < c->c_nlisten_proxy; i++)
			free(c->c_listen_default[i]);
	free(c->c_listen_default);
	c->c_listen_default = NULL;
	free(c->c_listen_own);
	c->c_listen_own = NULL;
}
