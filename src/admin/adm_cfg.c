/*
 * The "admin" keys.
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

/* admin: {token: SOURCE}; a file: source that does not exist yet is
 * created by the daemon (0600). */
static void
cfg_k_admin_token(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*src;
	char		*path;

	src = cfg_str(v);
	if (strncmp(src, "file:", 5) == 0 && src[5] != '\0') {
		path = cfg_path_join(c->c_dir, src + 5);
		if (access(path, F_OK) == -1 && errno == ENOENT) {
			c->c_admin_token_file = path;
			return;
		}
		c->c_admin_token_file = path;
	}
	cfg_source_read(cp, v, "admin.token", src, &c->c_admin_token,
	    &c->c_admin_token_len);
}

static const struct cfg_key cfg_admin_keys[] = {
	CFG_SCALAR("token", 0, cfg_k_admin_token, 0,
	    "a source such as file:PATH"),
	CFG_END,
};

const struct cfg_key adm_cfg_keys[] = {
	CFG_NEST("admin", 0, cfg_admin_keys, "admin", 0),
	CFG_END,
};
