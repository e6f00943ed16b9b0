/*
 * The "tls" keys.
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

#include <openssl/ssl.h>

#include "cfg/cfg_walk.h"
#include "cfg/cfg_planes.h"
#include "tls/tls.h"

/* tls */

static void
cfg_k_min_version(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;

	s = cfg_str(v);
	if (strcmp(s, "1.2") == 0)
		cp->cp_cfg->c_tls_min_version = TLS1_2_VERSION;
	else if (strcmp(s, "1.3") == 0)
		cp->cp_cfg->c_tls_min_version = TLS1_3_VERSION;
	else
		cfg_err(cp, v, "\"min_version\" must be \"1.2\" or \"1.3\", "
		    "not \"%s\"", s);
}

/* fleet_ca_key: a path (read at start by the daemon, ca_fleet.c) */
static void
cfg_k_fleet_ca_key(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s = cfg_str(v);

	(void)k;
	(void)arg;
	if (*s == '\0') {
		cfg_err(cp, v, "\"fleet_ca_key\" is empty");
		return;
	}
	free(cp->cp_cfg->c_tls_fleet_ca_key);
	cp->cp_cfg->c_tls_fleet_ca_key = cfg_path_join(cp->cp_cfg->c_dir, s);
}

/* alpn: the protocols offered to intercepted clients, a non-empty list
   of "h2" and "http/1.1" (which also accepts http/1.0) */
static int
alpn_set(struct cfg_parse *cp, yaml_node_t *v)
{
	yaml_node_t	*item;
	const char	*s;
	size_t		 i;
	int		 set = 0;

	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "\"h2\" or \"http/1.1\"",
		    "a string")) == NULL)
			continue;
		if (strcmp(s, "h2") == 0)
			set |= TLS_ALPN_H2;
		else if (strcmp(s, "http/1.1") == 0)
			set |= TLS_ALPN_HTTP11;
		else
			cfg_err(cp, item, "\"alpn\" lists \"h2\" and "
			    "\"http/1.1\", not \"%s\"", s);
	}
	if (i == 0)
		cfg_err(cp, v, "\"alpn\" must list at least one protocol");
	return set;
}

static void
cfg_k_alpn(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	(void)k;
	(void)arg;
	cp->cp_cfg->c_tls_alpn = alpn_set(cp, v);
}

/* upstream.alpn: what origins are offered, the same list */
void
tls_cfg_k_upstream_alpn(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	(void)k;
	(void)arg;
	cp->cp_cfg->c_upstream_alpn = alpn_set(cp, v);
}

#define TLS(m)	offsetof(struct cfg, m)
static const struct cfg_key cfg_tls_keys[] = {
	CFG_SEQ("alpn", 0, cfg_k_alpn),
	CFG_COUNT("cert_cache", 0, TLS(c_tls_cert_cache), 1, 0),
	CFG_DURATION("leaf_validity", 0, TLS(c_tls_leaf_validity_ms), 1,
	    CFG_MAX_LEAF_VALIDITY_MS),
	CFG_SCALAR("min_version", 0, cfg_k_min_version, 0,
	    "\"1.2\" or \"1.3\""),
	CFG_SCALAR("fleet_ca_key", CFG_K_RESTART, cfg_k_fleet_ca_key, 0,
	    "a path"),
	CFG_END,
};
#undef TLS

const struct cfg_key tls_cfg_keys[] = {
	CFG_NEST("tls", 0, cfg_tls_keys, "tls", 0),
	CFG_END,
};
