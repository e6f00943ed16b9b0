/*
 * The "audit" keys.
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

/* audit */

static void
cfg_k_audit_file(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s;

	s = cfg_str(v);
	if (*s == '\0')
		cfg_err(cp, v, "\"file\" is empty (use \"-\" for stdout)");
	else if (strcmp(s, "-") == 0)
		c->c_audit_file = xstrdup(s);
	else
		c->c_audit_file = cfg_path_join(c->c_dir, s);
}

static const struct cfg_key cfg_audit_keys[] = {
	CFG_SCALAR("file", CFG_K_RESTART, cfg_k_audit_file, 0,
	    "a path or \"-\""),
	CFG_BOOL("hash_chain", CFG_K_RESTART,
	    offsetof(struct cfg, c_audit_hash_chain)),
	CFG_END,
};

const struct cfg_key aud_cfg_keys[] = {
	CFG_NEST("audit", 0, cfg_audit_keys, "audit", 0),
	CFG_END,
};
