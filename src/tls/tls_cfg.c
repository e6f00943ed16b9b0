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

#define TLS(m)	offsetof(struct cfg, m)
static const struct cfg_key cfg_tls_keys[] = {
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
