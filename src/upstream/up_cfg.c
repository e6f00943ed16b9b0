/*
 * upstream.proxy, upstream.proxy_auth and a rule's "via". The
 * credentials come from a source (never the URL) and are given to the
 * gateway-wide parent once the walk is over (YAML order does not matter);
 * a rule's own parent has none.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "cfg/cfg_walk.h"
#include "cfg/cfg_planes.h"
#include "upstream/upstream.h"
#include "util/util.h"

static struct up_parent *
parent_of(struct cfg_parse *cp, yaml_node_t *v, const char *key)
{
	struct up_parent	*p;
	const char		*s = cfg_str(v), *why = NULL;

	if ((p = up_parent_new(s, &why)) == NULL)
		cfg_err(cp, v, "bad \"%s\" \"%s\": %s", key,
		    strchr(s, '@') != NULL ? "(not shown)" : s, why);
	return p;
}

void
up_cfg_k_proxy(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg	*c = cp->cp_cfg;

	if (strcmp(cfg_str(v), "direct") == 0)
		return;
	c->c_upstream_proxy = parent_of(cp, v, "proxy");
}

void
up_cfg_k_proxy_auth(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	char		*auth;
	size_t		 len;

	cp->cp_proxy_auth_node = v;
	if (cfg_source_read(cp, v, "upstream.proxy_auth", cfg_str(v), &auth,
	    &len) == -1)
		return;
	if (memchr(auth, ':', len) == NULL) {
		cfg_err(cp, v, "\"upstream.proxy_auth\" must resolve to "
		    "\"user:password\"");
		OPENSSL_cleanse(auth, len);
		free(auth);
		return;
	}
	c->c_upstream_proxy_auth = auth;
	c->c_upstream_proxy_auth_len = len;
}

void
up_cfg_k_via(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg_rule	*r = arg;

	if (strcmp(cfg_str(v), "direct") == 0) {
		r->r_via_direct = 1;
		return;
	}
	r->r_via = parent_of(cp, v, "via");
}

void
up_cfg_attach_auth(struct cfg_parse *cp)
{
	struct cfg	*c = cp->cp_cfg;

	if (c->c_upstream_proxy_auth == NULL)
		return;
	if (c->c_upstream_proxy == NULL) {
		if (cp->cp_proxy_auth_node != NULL)
			cfg_err(cp, cp->cp_proxy_auth_node, "\"proxy_auth\" "
			    "without \"upstream.proxy\"");
		return;
	}
	up_parent_set_auth(c->c_upstream_proxy, c->c_upstream_proxy_auth,
	    c->c_upstream_proxy_auth_len);
	c->c_upstream_proxy_auth = NULL;
	c->c_upstream_proxy_auth_len = 0;
}
