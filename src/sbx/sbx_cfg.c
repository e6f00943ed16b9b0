/*
 * The "sandboxes" keys.
 * Checked by the walker in src/cfg/ (cfg_walk.h); listed in cfg_planes.h.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cfg/cfg_walk.h"
#include "util/util.h"
#include "cfg/cfg_planes.h"

/* sandboxes */

struct cfg_sctx {
	struct cfg_sandbox	*sc_sbx;
	const yaml_node_t	*sc_id;
	const yaml_node_t	**sc_policy;
	struct cfg_namev	*sc_addrs;
};

static void
cfg_k_sbx_id(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg_sctx	*sc = arg;

	sc->sc_sbx->s_id = cfg_name_dup(cp, v, "sandbox id");
	sc->sc_id = v;
}

static void
cfg_k_sbx_policy(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_sctx	*sc = arg;
	const char	*s;

	s = cfg_str(v);
	sc->sc_sbx->s_policy_name = xstrdup(s);
	*sc->sc_policy = v;
}

static void
cfg_k_sbx_token(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_sandbox	*s = ((struct cfg_sctx *)arg)->sc_sbx;
	const char		*src;

	s->s_token_generated = 0;
	src = cfg_str(v);
	cfg_source_read(cp, v, "token", src, &s->s_token, &s->s_token_len);
}

static void
cfg_k_sbx_addresses(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_sctx		*sc = arg;
	struct cfg_sandbox	*s = sc->sc_sbx;
	yaml_node_t		*item;
	const char		*a;
	char			*ip;
	size_t			 i;

	s->s_addresses = xcalloc(cfg_seq_len(v), sizeof(char *));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((a = cfg_scalar(cp, item, "an address", "an IP address")) ==
		    NULL)
			continue;
		if ((ip = cfg_ip_canon(a)) == NULL) {
			cfg_err(cp, item, "bad address \"%s\": not an IP "
			    "address", a);
			continue;
		}
		s->s_addresses[s->s_naddresses++] = ip;
		cfg_namev_add(sc->sc_addrs, ip, item);
	}
}

static const struct cfg_key cfg_sandbox_keys[] = {
	CFG_SCALAR("id", CFG_K_REQUIRED, cfg_k_sbx_id, 0, "a string"),
	CFG_SCALAR("policy", CFG_K_REQUIRED, cfg_k_sbx_policy, 0,
	    "a policy name"),
	CFG_SCALAR("token", 0, cfg_k_sbx_token, 0, "a source such as env:NAME"),
	CFG_SEQ("addresses", 0, cfg_k_sbx_addresses),
	CFG_END,
};

static void
cfg_k_sandboxes(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_sctx		 sc;
	struct cfg_namev	 addrs = { NULL, 0, 0 };
	struct cfg_name		*ids;
	yaml_node_t		*item;
	size_t			 i, n, nids = 0;

	n = cfg_seq_len(v);
	c->c_sandboxes = xcalloc(n, sizeof(*c->c_sandboxes));
	cp->cp_sbx_policy = xcalloc(n, sizeof(*cp->cp_sbx_policy));
	ids = xcalloc(n, sizeof(*ids));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		sc.sc_sbx = &c->c_sandboxes[c->c_nsandboxes];
		sc.sc_id = NULL;
		sc.sc_policy = &cp->cp_sbx_policy[c->c_nsandboxes];
		sc.sc_addrs = &addrs;
		c->c_nsandboxes++;
		/* No token key: the daemon makes one up. */
		sc.sc_sbx->s_token_generated = 1;
		if (cfg_want_map(cp, item, "a sandbox") == -1)
			continue;
		cfg_walk_map(cp, item, "sandbox", cfg_sandbox_keys, &sc);
		if (sc.sc_sbx->s_id != NULL) {
			ids[nids].n_name = sc.sc_sbx->s_id;
			ids[nids++].n_node = sc.sc_id;
		}
	}
	cfg_check_dups(cp, ids, nids, "sandbox id");
	cfg_check_dups(cp, addrs.nv_v, addrs.nv_n, "sandbox address");
	free(ids);
	free(addrs.nv_v);
}

const struct cfg_key sbx_cfg_keys[] = {
	CFG_SEQ("sandboxes", 0, cfg_k_sandboxes),
	CFG_END,
};
