/*
 * The "launcher" keys: backend, pool, networks, users, limits, qemu.
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

#include <sys/socket.h>

#include "cfg/cfg_walk.h"
#include "dns/net_guard.h"
#include "util/util.h"
#include "cfg/cfg_planes.h"
#include "launcher/lnc_internal.h"

/* launcher */

static void
cfg_k_launcher_backend(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;

	s = cfg_str(v);
	if (strcmp(s, "none") == 0)
		cp->cp_cfg->c_launcher_backend = CFG_BACKEND_NONE;
	else if (strcmp(s, "netns") == 0) {
		cp->cp_cfg->c_launcher_backend = CFG_BACKEND_NETNS;
		cp->cp_backend_node = v;
	} else if (strcmp(s, "qemu") == 0) {
		cp->cp_cfg->c_launcher_backend = CFG_BACKEND_QEMU;
		cp->cp_backend_node = v;
	} else
		cfg_err(cp, v, "\"backend\" must be netns, qemu or none, not "
		    "\"%s\"", s);
}

#define LCH(m)	offsetof(struct cfg, m)
/* pool.from: the snapshot every warm and cold sandbox starts from. */
static void
cfg_k_pool_from(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s = cfg_str(v);

	if (!lnc_id_valid(s)) {
		cfg_err(cp, v, "\"from\" must be a snapshot name "
		    "([A-Za-z0-9._-], 1-63, not starting with '.')");
		return;
	}
	free(cp->cp_cfg->c_pool_from);
	cp->cp_cfg->c_pool_from = xstrdup(s);
}

static const struct cfg_key cfg_pool_keys[] = {
	CFG_SCALAR("from", CFG_K_RESTART, cfg_k_pool_from, 0,
	    "a snapshot name"),
	CFG_COUNT("warm", 0, LCH(c_pool_warm), 0, 0),
	CFG_COUNT("max", 0, LCH(c_pool_max), 1, 0),
	CFG_DURATION("idle_timeout", 0, LCH(c_pool_idle_ms), 1, 0),
	CFG_END,
};
#undef LCH

/* launcher.network, launcher.dns_pool: an IPv4 CIDR, /8 to /30. */
static void
cfg_k_launcher_cidr(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct net_cidr	 nc;
	const char	*s;
	s = cfg_str(v);
	if (net_cidr_parse(s, &nc) == -1 || nc.nc_addr.na_family != AF_INET ||
	    strchr(s, '/') == NULL) {
		cfg_err(cp, v, "bad %s \"%s\": an IPv4 network such as "
		    "\"10.88.0.0/16\" (host bits zero)", k->k_name, s);
		return;
	}
	if (nc.nc_prefix < 8 || nc.nc_prefix > 30) {
		cfg_err(cp, v, "%s \"%s\": the prefix must be /8 to /30",
		    k->k_name, s);
		return;
	}
	memcpy((char *)cp->cp_cfg + k->k_off, &nc, sizeof(nc));
}

static void
cfg_k_launcher_rootfs(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;
	s = cfg_str(v);
	if (*s == '\0') {
		cfg_err(cp, v, "\"rootfs\" is empty (null = the host's tools)");
		return;
	}
	cp->cp_cfg->c_launcher_rootfs = cfg_path_join(cp->cp_cfg->c_dir, s);
}

/* launcher.interface_prefix: host veth names are <prefix><n>. */
static void
cfg_k_launcher_ifprefix(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s, *p;

	s = cfg_str(v);
	for (p = s; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-'))
			break;
	if (*s == '\0' || *p != '\0' || strlen(s) > 8) {
		cfg_err(cp, v, "\"interface_prefix\" must be 1 to 8 of a-z, "
		    "0-9 and \"-\", not \"%s\"", s);
		return;
	}
	free(cp->cp_cfg->c_launcher_ifprefix);
	cp->cp_cfg->c_launcher_ifprefix = xstrdup(s);
}

/* "UID:GID", numeric. */
static void
cfg_k_launcher_user(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s, *colon;
	char		 uid[16];
	uint64_t	 u, g;
	if ((s = cfg_scalar(cp, v, "\"user\"", "\"UID:GID\"")) == NULL)
		return;
	colon = strchr(s, ':');
	if (colon == NULL || (size_t)(colon - s) >= sizeof(uid)) {
		cfg_err(cp, v, "\"user\" must be \"UID:GID\" (numbers), not "
		    "\"%s\"", s);
		return;
	}
	memcpy(uid, s, (size_t)(colon - s));
	uid[colon - s] = '\0';
	if (cfg_parse_uint(uid, 0xfffffffeU, &u) == -1 ||
	    cfg_parse_uint(colon + 1, 0xfffffffeU, &g) == -1) {
		cfg_err(cp, v, "\"user\" must be \"UID:GID\" (numbers), not "
		    "\"%s\"", s);
		return;
	}
	if (u == 0 || g == 0) {
		cfg_err(cp, v, "\"%s\" must not be root (uid and gid 0)",
		    k->k_name);
		return;
	}
	if (strcmp(k->k_name, "gateway_user") == 0) {
		cp->cp_cfg->c_gateway_uid = (uint32_t)u;
		cp->cp_cfg->c_gateway_gid = (uint32_t)g;
	} else {
		cp->cp_cfg->c_launcher_uid = (uint32_t)u;
		cp->cp_cfg->c_launcher_gid = (uint32_t)g;
	}
}

#define LCH(m)	offsetof(struct cfg, m)
static const struct cfg_key cfg_llimits_keys[] = {
	CFG_SIZE64("memory", 0, LCH(c_launcher_memory), 1024 * 1024, 0),
	CFG_COUNT64("pids", 0, LCH(c_launcher_pids), 1, 0),
	CFG_END,
};

/* launcher.dns: per-sandbox name bounds (issue 24, points 5 and 6) */
static const struct cfg_key cfg_ldns_keys[] = {
	CFG_COUNT64("max_names", 0, LCH(c_launcher_dns_max_names), 1, 0),
	CFG_COUNT64("new_names_per_minute", 0, LCH(c_launcher_dns_per_min),
	    1, 0),
	CFG_END,
};

/* launcher.qemu: kernel, initrd (files), binary (a program) */
static void
cfg_k_qemu_path(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;
	char		**dst, *path;
	int		 mode = strcmp(k->k_name, "binary") == 0 ? X_OK : R_OK;

	s = cfg_str(v);
	if (*s == '\0') {
		cfg_err(cp, v, "\"%s\" is empty", k->k_name);
		return;
	}
	path = cfg_path_join(cp->cp_cfg->c_dir, s);
	if (access(path, mode) == -1)
		cfg_err(cp, v, "qemu %s \"%s\": %s", k->k_name, path,
		    strerror(errno));
	dst = (char **)((char *)cp->cp_cfg + k->k_off);
	free(*dst);
	*dst = path;
}

static void
cfg_k_qemu_accel(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;

	s = cfg_str(v);
	if (strcmp(s, "auto") == 0)
		cp->cp_cfg->c_qemu_accel = CFG_ACCEL_AUTO;
	else if (strcmp(s, "kvm") == 0)
		cp->cp_cfg->c_qemu_accel = CFG_ACCEL_KVM;
	else if (strcmp(s, "tcg") == 0)
		cp->cp_cfg->c_qemu_accel = CFG_ACCEL_TCG;
	else
		cfg_err(cp, v, "\"accel\" must be auto, kvm or tcg, not "
		    "\"%s\"", s);
}

static const struct cfg_key cfg_qemu_keys[] = {
	CFG_SCALAR("kernel", 0, cfg_k_qemu_path, LCH(c_qemu_kernel), "a file"),
	CFG_SCALAR("initrd", 0, cfg_k_qemu_path, LCH(c_qemu_initrd), "a file"),
	CFG_SCALAR("binary", 0, cfg_k_qemu_path, LCH(c_qemu_binary), "a file"),
	CFG_SIZE64("memory", 0, LCH(c_qemu_memory), 64ULL << 20, 64ULL << 30),
	CFG_COUNT64("vcpus", 0, LCH(c_qemu_vcpus), 1, 64),
	CFG_SCALAR("accel", 0, cfg_k_qemu_accel, 0, "auto, kvm or tcg"),
	CFG_DURATION("boot_timeout", 0, LCH(c_qemu_boot_ms), 1000, 600000),
	CFG_SIZE64("min_free", 0, LCH(c_qemu_min_free), 0, 0),
	CFG_BOOL("snapshot", 0, LCH(c_qemu_snapshot)),
	CFG_END,
};

static void
cfg_k_launcher_qemu(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	cp->cp_qemu_node = v;
	cfg_walk_map(cp, v, "launcher qemu", cfg_qemu_keys, cp->cp_cfg);
}

static const struct cfg_key cfg_lsnap_keys[] = {
	CFG_SIZE64("max_bytes", 0, LCH(c_launcher_snap_max), 1 << 20, 0),
	CFG_END,
};

static const struct cfg_key cfg_launcher_keys[] = {
	CFG_SCALAR("backend", CFG_K_RESTART, cfg_k_launcher_backend, 0,
	    "netns, qemu or none"),
	CFG_NEST("pool", 0, cfg_pool_keys, "pool", 0),
	CFG_SCALAR("network", CFG_K_RESTART, cfg_k_launcher_cidr,
	    LCH(c_launcher_network), "an IPv4 CIDR such as \"10.88.0.0/16\""),
	CFG_SCALAR("dns_pool", CFG_K_RESTART, cfg_k_launcher_cidr,
	    LCH(c_dns_pool), "an IPv4 CIDR such as \"10.88.0.0/16\""),
	CFG_SCALAR("rootfs", CFG_K_RESTART, cfg_k_launcher_rootfs, 0,
	    "a directory or null"),
	CFG_SCALAR("interface_prefix", CFG_K_RESTART, cfg_k_launcher_ifprefix,
	    0, "a short name such as \"sbx-\""),
	CFG_ANY("gateway_user", CFG_K_RESTART, cfg_k_launcher_user, 0),
	CFG_ANY("user", CFG_K_RESTART, cfg_k_launcher_user, 0),
	CFG_NEST("limits", CFG_K_RESTART, cfg_llimits_keys,
	    "launcher limits", 0),
	CFG_NEST("dns", 0, cfg_ldns_keys, "launcher dns", 0),
	CFG_DURATION("canary", 0, LCH(c_launcher_canary_ms), 1000, 0),
	CFG_BOOL("io_uring", 0, LCH(c_launcher_io_uring)),
	CFG_MAP("qemu", CFG_K_RESTART, cfg_k_launcher_qemu),
	CFG_NEST("snapshots", CFG_K_RESTART, cfg_lsnap_keys,
	    "launcher snapshots", 0),
	CFG_END,
};
#undef LCH

static void
cfg_k_launcher(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	cp->cp_cfg->c_launcher_set = 1;
	cfg_walk_map(cp, v, "launcher", cfg_launcher_keys, cp->cp_cfg);
}

const struct cfg_key lnc_cfg_keys[] = {
	CFG_MAP("launcher", 0, cfg_k_launcher),
	CFG_END,
};
