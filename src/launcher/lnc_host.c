/*
 * Host setup, once per launcher and idempotent: one static nftables table
 * serves every sandbox (per-sandbox setup needs no firewall change), a
 * blackhole route for the sandbox network, and the gateway address on an
 * interface of its own so the gateway can bind it before any sandbox
 * exists. The table is applied with nft(8): that is not the hot path.
 *
 * Why each piece:
 * - prerouting nat: all TCP from <prefix>* goes to the transparent
 *   listener and DNS to the stub; "redirect" keeps the original
 *   destination for SO_ORIGINAL_DST.
 * - raw prerouting "fib saddr . iif": strict reverse-path check in the
 *   ruleset, so a sandbox cannot speak with another /32 even if the host's
 *   net.ipv4.conf.all.rp_filter is loose (the per-link rp_filter=1 is the
 *   other half). Addresses of the network nobody holds hit the blackhole
 *   route, so they fail the check too.
 * - input: from a sandbox only the two ports on the gateway address;
 *   without this, host services on 0.0.0.0 are reachable from a sandbox
 *   even with forwarding off. And the sandbox network's addresses (the
 *   gateway's) only from sandboxes and the host itself: a neighbour on
 *   the uplink routing 10.88/16 via us must not reach the listeners.
 * - forward: dropped both ways; a sandbox reaches nothing but the gateway.
 * - output guard: packets for the sandbox network leave only by a sandbox
 *   link (or lo for the gateway address), never by the uplink.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/magic.h>
#include <linux/rtnetlink.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>

#include "launcher/lnc_internal.h"
#include "util/log.h"
#include "util/util.h"

#define RULES_MAX	4096

static const char *nft_paths[] = {
	"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft", "/bin/nft", NULL,
};

/* Run "nft -f -" with <rules> on its stdin. 0 or -1 (logged). */
static int
nft_apply(struct lnc *l, const char *rules)
{
	const char	*nft = l->l_o.lo_nft;
	int		 p[2], st, i, devnull;
	pid_t		 pid;
	size_t		 off = 0, len = strlen(rules);
	ssize_t		 n;

	for (i = 0; nft == NULL && nft_paths[i] != NULL; i++)
		if (access(nft_paths[i], X_OK) == 0)
			nft = nft_paths[i];
	if (nft == NULL) {
		log_warnx("launcher: nft not found (install nftables)");
		return -1;
	}
	if (pipe2(p, O_CLOEXEC) == -1) {
		log_warn("launcher: pipe");
		return -1;
	}
	if ((pid = fork()) == -1) {
		log_warn("launcher: fork");
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		devnull = open("/dev/null", O_WRONLY);
		if (dup2(p[0], 0) == -1 || devnull == -1 ||
		    dup2(devnull, 1) == -1)
			_exit(127);
		execl(nft, "nft", "-f", "-", (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	while (off < len) {
		n = write(p[1], rules + off, len - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += n;
	}
	close(p[1]);
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR) {
			log_warn("launcher: waitpid nft");
			return -1;
		}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		log_warnx("launcher: %s -f - failed (status %d)", nft, st);
		return -1;
	}
	return 0;
}

/* The table, as nft(8) text; "table; delete table; table {}" replaces
 * whatever was there in one transaction. */
static int
rules_build(struct lnc *l, char *buf, size_t bufsz)
{
	const char	*t = l->l_o.lo_table, *p = l->l_o.lo_prefix;
	char		 gw[INET_ADDRSTRLEN], net[INET_ADDRSTRLEN];
	struct in_addr	 a;
	size_t		 off = 0;
	int		 n;

#define R(...) do {							\
	n = snprintf(buf + off, bufsz - off, __VA_ARGS__);		\
	if (n < 0 || (size_t)n >= bufsz - off)				\
		return -1;						\
	off += n;							\
} while (0)

	a.s_addr = l->l_gw;
	inet_ntop(AF_INET, &a, gw, sizeof(gw));
	a.s_addr = htonl(l->l_base);
	inet_ntop(AF_INET, &a, net, sizeof(net));

	R("table inet %s\ndelete table inet %s\n", t, t);
	R("table inet %s {\n", t);
	R("  chain rpf {\n"
	  "    type filter hook prerouting priority raw; policy accept;\n"
	  "    iifname \"%s*\" fib saddr . iif oif missing drop\n"
	  "    iifname \"%s*\" meta nfproto != ipv4 drop\n"
	  "  }\n", p, p);
	R("  chain nat {\n"
	  "    type nat hook prerouting priority dstnat; policy accept;\n");
	if (l->l_o.lo_dport != 0)
		R("    iifname \"%s*\" meta l4proto { tcp, udp } th dport 53 "
		  "redirect to :%u\n", p, l->l_o.lo_dport);
	if (l->l_o.lo_tport != 0)
		R("    iifname \"%s*\" meta l4proto tcp redirect to :%u\n",
		    p, l->l_o.lo_tport);
	R("  }\n");
	R("  chain input {\n"
	  "    type filter hook input priority filter; policy accept;\n"
	  "    iifname \"%s*\" jump from_sandbox\n"
	  "    ip daddr %s/%d iifname != \"lo\" drop\n"
	  "  }\n", p, net, l->l_o.lo_network.nc_prefix);
	R("  chain from_sandbox {\n"
	  "    ct state established,related accept\n");
	if (l->l_o.lo_tport != 0)
		R("    ip daddr %s tcp dport %u accept\n", gw, l->l_o.lo_tport);
	if (l->l_o.lo_dport != 0)
		R("    ip daddr %s meta l4proto { tcp, udp } th dport %u "
		  "accept\n", gw, l->l_o.lo_dport);
	R("    drop\n  }\n");
	R("  chain forward {\n"
	  "    type filter hook forward priority filter; policy accept;\n"
	  "    iifname \"%s*\" drop\n"
	  "    oifname \"%s*\" drop\n"
	  "  }\n", p, p);
	R("  chain output {\n"
	  "    type filter hook output priority filter; policy accept;\n"
	  "    ip daddr %s/%d oifname != \"lo\" oifname != \"%s*\" drop\n"
	  "  }\n", net, l->l_o.lo_network.nc_prefix, p);
	R("}\n");
#undef R
	return 0;
}

/* The interface holding the gateway address. A dummy where the kernel
 * has one; else an empty bridge, which holds an address just as well. */
static int
gw_link(struct lnc *l, char *why, size_t whysz)
{
	const char	*name = l->l_o.lo_gwname;
	char		 path[128];
	int		 idx;

	if ((idx = lnc_nl_link_index(l->l_nl, name)) == -1)
		goto fail;
	if (idx == 0) {
		if (lnc_nl_link_add(l->l_nl, name, "dummy") == -1 &&
		    (errno != EOPNOTSUPP ||
		    lnc_nl_link_add(l->l_nl, name, "bridge") == -1))
			goto fail;
		if ((idx = lnc_nl_link_index(l->l_nl, name)) <= 0)
			goto fail;
	}
	snprintf(path, sizeof(path), "net/ipv6/conf/%s/disable_ipv6", name);
	(void)lnc_sysctl(path, "1");
	if (lnc_nl_addr_add(l->l_nl, idx, l->l_gw, 32) == -1 ||
	    lnc_nl_link_up(l->l_nl, idx) == -1)
		goto fail;
	return 0;
 fail:
	snprintf(why, whysz, "gateway interface %s: %s", name,
	    strerror(errno));
	return -1;
}

int
lnc_host_setup(struct lnc *l, char *why, size_t whysz)
{
	char	 msg[512];
	char	*rules;
	int	 rc;

	/* links of a launcher that died without cleaning up (not ours:
	 * setup again with sandboxes running must not touch them) */
	if (l->l_nsbx == 0 && TAILQ_EMPTY(&l->l_gone) &&
	    lnc_nl_link_del_prefix(l->l_nl, l->l_o.lo_prefix) == -1)
		log_warn("launcher: removing stale %s* links",
		    l->l_o.lo_prefix);
	l->l_host_dirty = 1;
	/* the guards first: no sandbox link may exist without them */
	rules = xmalloc(RULES_MAX);
	if (rules_build(l, rules, RULES_MAX) == -1) {
		free(rules);
		snprintf(why, whysz, "ruleset too long");
		return -1;
	}
	rc = nft_apply(l, rules);
	free(rules);
	if (rc == -1) {
		snprintf(why, whysz, "nftables table %s could not be "
		    "installed", l->l_o.lo_table);
		return -1;
	}
	if (lnc_nl_route(l->l_nl, 1, htonl(l->l_base),
	    l->l_o.lo_network.nc_prefix, RTN_BLACKHOLE, 0, 0, 0) == -1) {
		snprintf(why, whysz, "blackhole route: %s", strerror(errno));
		return -1;
	}
	if (gw_link(l, why, whysz) == -1)
		return -1;
	/* a max_bytes lowered since the store was filled applies now */
	(void)lnc_snap_limit(l, l->l_o.lo_snap_max, msg, sizeof(msg));
	if (l->l_o.lo_vm)
		lnc_vm_host_setup(l);
	l->l_host_up = 1;
	return 0;
}

int
lnc_host_teardown(struct lnc *l)
{
	struct lnc_sbx	*s;
	char		 rules[256];
	uint64_t	 until;
	int		 idx, rc = 0;

	while ((s = TAILQ_FIRST(&l->l_sbxs)) != NULL)
		if (lnc_sbx_destroy(l, s) == -1)
			rc = -1;
	/* let the kernel remove their links in one batch, then ours */
	until = util_now_ms() + 3000;
	while (lnc_gone_check(l, 0) > 0 && util_now_ms() < until)
		usleep(2000);
	(void)lnc_gone_check(l, 1);
	if (l->l_o.lo_vm)
		lnc_vm_host_teardown(l);
	if (!l->l_host_dirty)
		return rc;	/* never set up: nothing of ours out there */
	if (lnc_nl_link_del_prefix(l->l_nl, l->l_o.lo_prefix) == -1)
		rc = -1;
	if ((idx = lnc_nl_link_index(l->l_nl, l->l_o.lo_gwname)) > 0 &&
	    lnc_nl_link_del(l->l_nl, idx) == -1) {
		log_warn("launcher: deleting %s", l->l_o.lo_gwname);
		rc = -1;
	}
	if (lnc_nl_route(l->l_nl, 0, htonl(l->l_base),
	    l->l_o.lo_network.nc_prefix, RTN_BLACKHOLE, 0, 0, 0) == -1 &&
	    errno != ESRCH) {
		log_warn("launcher: deleting the blackhole route");
		rc = -1;
	}
	snprintf(rules, sizeof(rules), "table inet %s\ndelete table inet %s\n",
	    l->l_o.lo_table, l->l_o.lo_table);
	if (nft_apply(l, rules) == -1)
		rc = -1;
	l->l_host_up = l->l_host_dirty = 0;
	return rc;
}

/* Does "cgroup.controllers"-like file <path> list <name>? */
static int
cg_has(const char *path, const char *name)
{
	char	buf[512], *tok, *save;
	FILE	*f;
	int	found = 0;

	if ((f = fopen(path, "re")) == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) != NULL)
		for (tok = strtok_r(buf, " \n", &save); tok != NULL;
		    tok = strtok_r(NULL, " \n", &save))
			if (strcmp(tok, name) == 0)
				found = 1;
	fclose(f);
	return found;
}

static void
cg_enable(const char *dir)
{
	char	path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
	if (lnc_write_file(path, "+memory +pids") == -1) {
		/* one at a time: one of them may be missing */
		(void)lnc_write_file(path, "+memory");
		(void)lnc_write_file(path, "+pids");
	}
}

/*
 * Sandboxes get a cgroup v2 each, under lo_cgroup: a name below
 * /sys/fs/cgroup when that is a cgroup2 mount, or the absolute path of a
 * directory in a cgroup2 hierarchy (a subtree systemd delegated to us).
 * memory.max and pids.max apply where those controllers are available.
 * Elsewhere say so once and go on without.
 */
void
lnc_cgroup_detect(struct lnc *l)
{
	const char	*cg = l->l_o.lo_cgroup;
	struct statfs	 sf;
	char		 path[PATH_MAX], parent[PATH_MAX], *slash;
	char		 ctl[PATH_MAX + 32];
	int		 absolute = cg[0] == '/';

	l->l_cg2 = l->l_cg_limits = 0;
	if (absolute) {
		snprintf(path, sizeof(path), "%s", cg);
		snprintf(parent, sizeof(parent), "%s", cg);
		if ((slash = strrchr(parent, '/')) != NULL && slash != parent)
			*slash = '\0';
	} else {
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", cg);
		snprintf(parent, sizeof(parent), "/sys/fs/cgroup");
	}
	if (statfs(parent, &sf) == -1 || sf.f_type != CGROUP2_SUPER_MAGIC) {
		log_info("launcher: %s is not cgroup v2", parent);
		lnc_limits_detect(l);	/* v1 controllers or rlimits */
		return;
	}
	if (mkdir(path, 0755) == -1 && errno != EEXIST) {
		log_warn("launcher: mkdir %s; sandboxes run without a cgroup",
		    path);
		return;
	}
	if (!absolute)
		cg_enable(parent);
	cg_enable(path);
	snprintf(ctl, sizeof(ctl), "%s/cgroup.subtree_control", path);
	l->l_cg_limits = cg_has(ctl, "memory") && cg_has(ctl, "pids");
	if (!l->l_cg_limits)
		log_info("launcher: no memory and pids controllers in %s; "
		    "sandboxes get a cgroup without limits", path);
	l->l_cgparent = xstrdup(path);
	l->l_cg2 = 1;
	lnc_limits_detect(l);	/* logs the mechanism */
}

/* At exit: the parent cgroup made by lnc_cgroup_detect(). */
void
lnc_cgroup_remove(struct lnc *l)
{
	if (l->l_cgparent != NULL && rmdir(l->l_cgparent) == -1 &&
	    errno != ENOENT && errno != EBUSY)
		log_warn("launcher: rmdir %s", l->l_cgparent);
	lnc_limits_fini(l);
}
