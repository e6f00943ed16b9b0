/*
 * The "geoip" keys.
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
#include "geo/geo.h"
#include "util/util.h"
#include "cfg/cfg_planes.h"

/* geoip: {database: PATH}; null = off. The file is opened by the daemon. */
static void
cfg_k_geoip_database(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s;
	char		 why[256];

	s = cfg_str(v);
	if (*s == '\0') {
		cfg_err(cp, v, "\"database\" is empty (use null to turn "
		    "GeoIP off)");
		return;
	}
	c->c_geoip_database = cfg_path_join(c->c_dir, s);
	/* opened now, so that a bad file is reported at its key */
	if (access(c->c_geoip_database, R_OK) == -1)
		cfg_err(cp, v, "geoip database \"%s\": %s",
		    c->c_geoip_database, strerror(errno));
	else if ((c->c_geo = geo_open(c->c_geoip_database, why,
	    sizeof(why))) == NULL)
		cfg_err(cp, v, "geoip database \"%s\": %s",
		    c->c_geoip_database, why);
}

static const struct cfg_key cfg_geoip_keys[] = {
	CFG_SCALAR("database", 0, cfg_k_geoip_database, 0,
	    "a path to a .mmdb file"),
	CFG_END,
};

const struct cfg_key geo_cfg_keys[] = {
	CFG_NEST("geoip", 0, cfg_geoip_keys, "geoip", 0),
	CFG_END,
};
