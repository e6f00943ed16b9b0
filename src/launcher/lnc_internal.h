/*
 * Inside the launcher process: rtnetlink helpers, host setup and the netns
 * backend. Nothing here runs in the gateway.
 */
#ifndef AIRLOCK_LNC_INTERNAL_H
#define AIRLOCK_LNC_INTERNAL_H

#include <limits.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "launcher/launcher.h"
#include "launcher/lnc_proto.h"

/* cgroup v1 hierarchies used for limits (lnc_limits.c) */
#define LNC_CG1_PIDS	0
#define LNC_CG1_MEM	1
#define LNC_CG1_N	2

/* the init's fd of its overlay's upper layer (lnc_root.c, lnc_snap.c) */
#define LNC_UPPER_FD	4
#define LNC_SNAP_DEPTH	16	/* layers in a snapshot chain */
#define LNC_PINS_MAX	64	/* pins of snapshots by prewarmed pools */

/* comm of every sandbox init */
#define LNC_INIT_NAME	"airlock-init"

/*
 * rtnetlink, synchronous: each call sends one request with NLM_F_ACK and
 * reads its answer. 0, or -1 with errno set from the kernel's answer.
 * Addresses are IPv4 in network order.
 */
int	lnc_nl_open(void);	/* NETLINK_ROUTE, the caller's netns */
/* >0 ifindex, 0 when no such link, -1 on error. */
int	lnc_nl_link_index(int nl, const char *name);
int	lnc_nl_link_add(int nl, const char *name, const char *kind);
/* A veth pair <name> here and <peer> in the netns of <peer_nsfd>. */
int	lnc_nl_veth_add(int nl, const char *name, const char *peer,
	    int peer_nsfd);
int	lnc_nl_link_del(int nl, int ifindex);
int	lnc_nl_link_up(int nl, int ifindex);
int	lnc_nl_addr_add(int nl, int ifindex, in_addr_t, int plen);
int	lnc_nl_addr_del(int nl, int ifindex, in_addr_t, int plen);
/* RTM_NEWROUTE/RTM_DELROUTE in the main table. <type> RTN_UNICAST or
 * RTN_BLACKHOLE; <gw>, <src> 0 = none; <ifindex> 0 = none; onlink with
 * a gateway. */
int	lnc_nl_route(int nl, int add, in_addr_t dst, int plen, int type,
	    int ifindex, in_addr_t gw, in_addr_t src);
/* Delete every link whose name is <prefix> followed by digits only. */
int	lnc_nl_link_del_prefix(int nl, const char *prefix);
/* Write <val> to /proc/sys/<path>, or to the file <path>; 0 or -1. */
int	lnc_sysctl(const char *path, const char *val);
int	lnc_write_file(const char *path, const char *val);

/* One sandbox, as the launcher keeps it. */
struct lnc_sbx {
	TAILQ_ENTRY(lnc_sbx) s_entry;
	char		 s_id[LNC_ID_MAX];
	char		 s_ifname[16];
	uint32_t	 s_index;	/* address = base + 1 + index */
	in_addr_t	 s_addr;
	pid_t		 s_pid;		/* its init */
	int		 s_pidfd;
	int		 s_dead;	/* init already reaped */
	char		*s_cgroup;	/* cgroup v2 dir, or NULL */
	char		*s_cg1[LNC_CG1_N];	/* cgroup v1 dirs, or NULL */
	/* backend qemu: s_pid is qemu's */
	int		 s_vm;
	int		 s_qmp;		/* QMP, -1 until first needed */
	int		 s_paused;
	char		 s_dir[96];	/* its run directory */
	char		 s_from[LNC_ID_MAX];	/* its snapshot, or "" */
	int		 s_idfd;	/* qemu restored: its airlock.id port */
};
TAILQ_HEAD(lnc_sbxq, lnc_sbx);

/* The host end of a destroyed sandbox's veth, until the kernel's netns
 * cleanup has removed it (or we do, past the deadline). */
struct lnc_gone {
	TAILQ_ENTRY(lnc_gone) g_entry;
	char		 g_ifname[16];
	uint64_t	 g_deadline;	/* monotonic ms */
};
TAILQ_HEAD(lnc_goneq, lnc_gone);

/* The launcher process's state. */
struct lnc {
	struct launcher_opts l_o;	/* strings point into l_strs */
	char		*l_strs;
	int		 l_sock;
	int		 l_nl;		/* rtnetlink, host netns */
	in_addr_t	 l_base;	/* network, host order */
	in_addr_t	 l_gw;		/* gateway, network order */
	uint32_t	 l_nslots;	/* usable indexes 1..l_nslots */
	uint32_t	 l_next;	/* allocation cursor */
	uint8_t		*l_used;	/* index -> in use */
	int		 l_host_up;	/* SETUP_HOST done */
	int		 l_host_dirty;	/* SETUP_HOST tried: undo it */
	int		 l_cg2;		/* a cgroup v2 per sandbox */
	int		 l_cg_limits;	/* memory, pids controllers */
	char		*l_cgparent;	/* its parent dir, or NULL */
	char		*l_cg1[LNC_CG1_N];	/* no v2: v1 parents, or NULL */
	struct lnc_sbxq	 l_sbxs;
	size_t		 l_nsbx;
	struct lnc_goneq l_gone;
	int		 l_accel;	/* qemu: CFG_ACCEL_KVM or _TCG */
	unsigned long	 l_tsc_khz;	/* qemu: the host's TSC, 0 unknown */
	char		 l_rundir[64];	/* qemu: /run/airlock/<table> */
	char		 l_vmsnap[PATH_MAX];	/* qemu: the template's state, or "" */
	/* snapshots pinned by the daemon's prewarmed pools (LNC_SNAP_PIN) */
	char		 l_pins[LNC_PINS_MAX][LNC_ID_MAX];
	size_t		 l_npins;
};

int	lnc_host_setup(struct lnc *, char *why, size_t);
int	lnc_host_teardown(struct lnc *);
void	lnc_cgroup_detect(struct lnc *);
void	lnc_cgroup_remove(struct lnc *);

int	lnc_sbx_create(struct lnc *, const struct lnc_m_create *,
	    struct lnc_m_sandbox *, char *why, size_t);
int	lnc_sbx_destroy(struct lnc *, struct lnc_sbx *);
struct lnc_sbx *lnc_sbx_find(struct lnc *, const char *id);
/* Note an init that died on its own (waitpid in the main loop). */
void	lnc_sbx_reaped(struct lnc *, pid_t);
/* Forget links that are gone, delete those past their deadline (all of
 * them with <force>). Returns how many are still waited for. */
size_t	lnc_gone_check(struct lnc *, int force);

/* Shared by both backends (lnc_netns.c). */
/* A new record for <m> (not listed yet): host set up, id unused, an index,
 * its link name and address. 0, or an errno value with <why>. */
int	lnc_sbx_new(struct lnc *, const struct lnc_m_create *,
	    struct lnc_sbx **, char *why, size_t);
/* List a built sandbox and describe it in <out> (<t0>: when its build
 * began, util_now_us). */
void	lnc_sbx_add(struct lnc *, struct lnc_sbx *, struct lnc_m_sandbox *out,
	    uint64_t t0);
int	lnc_slot_alloc(struct lnc *, uint32_t *index);
int	lnc_slot_ifname(struct lnc *, uint32_t index, char *, size_t);
/* The host end of a sandbox's link (veth or tap): rp_filter, IPv6 off,
 * the gateway /32 on it, up, the route to <addr>/32. 0, or -1 with errno
 * and *what naming the step. */
int	lnc_link_host_setup(struct lnc *, const char *ifname, in_addr_t addr,
	    const char **what);
void	lnc_gone_add(struct lnc *, const char *ifname);
void	lnc_sbx_free(struct lnc *, struct lnc_sbx *);
/* Kill and reap s_pid (SIGKILL by pidfd). */
void	lnc_pid_kill(struct lnc_sbx *);
/* The system CA bundle and <pem> into <dst> (0644). */
int	lnc_bundle_write(const char *sysbundle, const char *pem,
	    size_t pemlen, const char *dst);

/* The qemu backend (lnc_qemu.c). lnc_vm_create returns 0 or an errno
 * value, with *confd the console to hand to the gateway. */
void	lnc_vm_host_setup(struct lnc *);
void	lnc_vm_probe_kvm(struct lnc *);
void	lnc_vm_host_teardown(struct lnc *);
int	lnc_vm_create(struct lnc *, const struct lnc_m_create *,
	    struct lnc_m_sandbox *, int *confd, char *why, size_t);
void	lnc_vm_kill(struct lnc *, struct lnc_sbx *);
int	lnc_vm_pause(struct lnc *, struct lnc_sbx *, int if_idle, char *why,
	    size_t);
int	lnc_vm_resume(struct lnc *, struct lnc_sbx *, char *why, size_t);
/* How a VM starts: booting, booting as a template, restored from one. */
#define LNC_VM_COLD	0
#define LNC_VM_TEMPLATE	1
#define LNC_VM_RESTORE	2
#define LNC_VM_TEMPLATE_ID "template"
/* Start one VM into <s> (s_dir set): its run dir, CA bundle and qemu
 * (the tap as fd 3, a state to restore as fd 4). The console, or -1. */
int	lnc_vm_start(struct lnc *, struct lnc_sbx *, const char *pem,
	    size_t pemlen, int tapfd, int statefd, int mode, int accel,
	    char *why, size_t);
void	lnc_vm_cleanup(struct lnc_sbx *);
int	lnc_tap_open(const char *name);
int	lnc_unix_connect_wait(const char *path, pid_t, uint32_t ms);
int	lnc_qmp_open(struct lnc_sbx *, char *why, size_t);
struct json_object;
int	lnc_qmp_exec(int fd, const char *cmd, int passfd,
	    struct json_object **ret, char *why, size_t);
/* VM snapshots (lnc_vmsnap.c): boot, save and keep the template
 * (launcher.qemu.snapshot; l_vmsnap stays "" when that fails); hand a
 * restored VM its identity through its airlock.id port. */
void	lnc_vm_template(struct lnc *);
int	lnc_vm_identity(struct lnc *, struct lnc_sbx *, const char *pem,
	    size_t pemlen, char *why, size_t);
/* Make the snapshot store (its vm/ among the rest); whether <extra> more
 * bytes fit launcher.snapshots.max_bytes once the oldest unused
 * snapshots are pruned (0) or not (-1). */
int	lnc_snap_fit(struct lnc *, uint64_t extra);
/* Prune every unreferenced snapshot needed, oldest first, to fit the
 * bound; the store's bytes after in <bytes>. 0 when it fits. */
int	lnc_snap_prune(struct lnc *, uint64_t *bytes);
/* lnc_snapmax.c: apply launcher.snapshots.max_bytes <max> (at host setup,
 * or reloaded) to the store as it is; 0, the outcome in <out> (logged when
 * the store stays over: new snapshots are refused then). */
int	lnc_snap_limit(struct lnc *, uint64_t max, char *out, size_t outsz);

/* Read a console until "AIRLOCK-READY <id>" (0), "AIRLOCK-FAIL", EOF or
 * <timeout_ms> (-1, the reason and the console's last line in <why>). */
int	lnc_vm_wait_ready(int fd, const char *id, uint32_t timeout_ms,
	    char *why, size_t);

/* The identity exchange guest/init speaks to a restored copy (lnc_vmsnap.c:
 * "rng" since 2). */
#define LNC_VM_ID_PROTO	2
/* lnc_vm_wait_ready for the template: its init must also have announced
 * "AIRLOCK-IDENTITY <LNC_VM_ID_PROTO>" (or later) before it was ready; an
 * older image is refused with a reason saying so. */
int	lnc_vm_wait_template(int fd, uint32_t timeout_ms, char *why, size_t);

/* What a new init needs to build its sandbox, prepared before clone. */
struct lnc_child {
	struct lnc	*c_l;
	int		 c_sync;	/* to the launcher */
	const char	*c_id;
	in_addr_t	 c_addr;
	const char	*c_pem;
	size_t		 c_pemlen;
	char		 c_masks[LNC_OPT_MASK_MAX + LNC_MASK_MAX][PATH_MAX];
	size_t		 c_nmasks;
	/* started from a snapshot: its layers, top first (host paths) */
	char		 c_lowers[LNC_SNAP_DEPTH][PATH_MAX];
	size_t		 c_nlowers;
};

/* In the new init: report <err> (0 = EIO) and why to the launcher, exit. */
void	lnc_child_fail(struct lnc_child *, int err, const char *, ...)
	    __attribute__((noreturn, format(printf, 3, 4)));
#define LNC_CHECK(c, expr, ...) do {					\
	if ((expr) == -1)						\
		lnc_child_fail((c), errno, __VA_ARGS__);		\
} while (0)
/* In the new init: build the private root and pivot into it. */
void	lnc_root_setup(struct lnc_child *);

/*
 * Limits without cgroup v2 (lnc_limits.c). _detect after the v2 check:
 * v1 pids and memory where mounted, else rlimits; logs which. _attach puts
 * a new init (<pid>) into its v1 cgroups (0, or -1 with errno and *what); _remove after the init is gone; _fini
 * at exit. launcher_enter_exec(): _open before entering the namespaces
 * (fds of the init's v1 cgroup.procs, -1 each when none, and the init's
 * rlimits), _join in the workload's process: join them; _rlimits: take
 * the init's lower rlimits.
 */
void	lnc_limits_detect(struct lnc *);
void	lnc_limits_fini(struct lnc *);
int	lnc_limits_attach(struct lnc *, struct lnc_sbx *, pid_t,
	    const char **what);
/* The fallback rlimits on a built init (before, its own setup could hit
 * RLIMIT_AS). 0, or -1 with errno and *what. */
int	lnc_limits_rlimits_set(struct lnc *, pid_t, const char **what);
void	lnc_limits_remove(struct lnc_sbx *);
#define LNC_RL_N	3	/* NPROC, AS, FSIZE */
struct lnc_join {
	int		j_fds[LNC_CG1_N];
	struct rlimit	j_rl[LNC_RL_N];
	int		j_have[LNC_RL_N];
};
void	lnc_limits_open(pid_t init_pid, pid_t launcher_pid, struct lnc_join *);
int	lnc_limits_join(const struct lnc_join *);
/* Just before execve: the init's rlimits that are lower than ours. */
int	lnc_limits_rlimits(const struct lnc_join *);

/* The escape canary (lnc_probe.c): 0 with the result in <res>, or an
 * errno value with the reason there. */
int	lnc_probe(struct lnc *, struct lnc_sbx *, char *res, size_t);

/* The workload's seccomp filter (lnc_seccomp.c): 0, or -1 with errno.
 * Call with NO_NEW_PRIVS set, just before execve. io_uring stays allowed
 * with <allow_io_uring> (launcher.io_uring). */
int	lnc_seccomp_apply(int allow_io_uring);

/* Snapshots (lnc_snap.c): one LNC_M_SNAP; 0 or an errno value, the
 * answer or the reason in <out>. _lowers: the lower layers of a sandbox
 * started from snapshot <name> (top first, host paths) into <dirs>. */
int	lnc_snap_op(struct lnc *, const struct lnc_m_snap *, char *out,
	    size_t);
int	lnc_snap_lowers(struct lnc *, const char *name,
	    char dirs[][PATH_MAX], size_t max, size_t *n, char *why, size_t);
/* lnc_freeze.c: stop every process of <s> (always succeeds, by SIGSTOP
 * at worst; .stopped says which) and let them go again. */
struct lnc_freeze {
	char	cg[128];	/* freezer cgroup, or "" (SIGSTOP) */
	int	stopped;
};
int	lnc_freeze(struct lnc_sbx *, struct lnc_freeze *);
void	lnc_thaw(struct lnc_sbx *, struct lnc_freeze *);

/* The launcher's main: never returns. */
void	lnc_main(int sock, const struct launcher_opts *)
	    __attribute__((noreturn));

/* Validation shared by both ends. */
int	lnc_id_valid(const char *id);
int	lnc_path_valid(const char *path);
int	lnc_pem_valid(const char *pem, size_t len);

#endif
