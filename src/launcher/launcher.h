/*
 * The privileged launcher (DESIGN, "Process model"): the only part of
 * airlock that stays root. airlockd forks it with launcher_spawn() while
 * still root, before it loads secrets or starts threads; from then on the
 * gateway only asks, over a socketpair and a small fixed message set
 * (lnc_proto.h), and the launcher alone creates namespaces, veth links,
 * routes, mounts, cgroups and the nftables table.
 *
 * Backend netns: a sandbox is a set of namespaces (net, mount, PID, UTS,
 * IPC, cgroup) held by a tiny init (pid 1 inside), a veth pair
 * <prefix><n> / eth0 and one /32 from the sandbox network, whose first
 * host address is the gateway. Inside: lo and eth0, the single route
 * "default via <gateway> onlink", IPv6 off, a private root (host tools
 * read-only or launcher.rootfs under an overlay, fresh /tmp, home, /dev,
 * /proc; the masked paths empty), /etc/resolv.conf naming the gateway,
 * the CA bundle, hostname = id.
 *
 * The gateway-side calls are blocking RPCs serialised by a mutex, so the
 * scheduler's preparing thread and the main thread may both call them.
 * If the gateway goes away (EOF on the socketpair), the launcher destroys
 * every sandbox, removes the host setup and exits.
 *
 *	struct launcher_opts	 o;
 *	struct lnc_create_req	 r = { .cr_id = id, .cr_ca_pem = pem,
 *				       .cr_ca_len = pemlen };
 *	struct lnc_sandbox	 sb;
 *	char			 why[160];
 *
 *	launcher_opts_from_cfg(&o, cfg);	// root, before secrets
 *	lc = launcher_spawn(&o);
 *	launcher_setup_host(lc, why, sizeof(why));
 *	// bind the listeners on the gateway address, drop root
 *	launcher_create(lc, &r, &sb, why, sizeof(why));
 *	// sb.ls_addr identifies it; airlockctl run (root):
 *	launcher_enter_exec(sb.ls_init_pid, uid, gid, argv, envp);
 *	launcher_destroy(lc, id);
 *	launcher_close(lc);			// at exit: all torn down
 */
#ifndef AIRLOCK_LAUNCHER_H
#define AIRLOCK_LAUNCHER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dns/net_guard.h"

struct cfg;

/*
 * Inside every sandbox: the CA bundle (the system's CAs and the sandbox's
 * CA; the same file also replaces /etc/ssl/certs/ca-certificates.crt, for
 * tools that read only that) and the workload's home (a tmpfs it owns).
 */
#define LNC_CA_BUNDLE	"/etc/airlock/ca-bundle.pem"
#define LNC_HOME	"/home/sandbox"

#define LNC_ID_MAX	64	/* sandbox id: [A-Za-z0-9._-]{1,63} */
#define LNC_MASK_MAX	8	/* masks per request */
#define LNC_OPT_MASK_MAX 32	/* masks in the opts */
#define LNC_PATH_MAX	1024	/* one mask path, NUL included */
#define LNC_PEM_MAX	16384	/* the sandbox's CA certificate */

struct launcher_opts {
	/* IPv4, /8 to /29; the gateway is its first host address */
	struct net_cidr	 lo_network;
	/* ports on the gateway address: transparent listener and DNS stub
	   (0 = that traffic is dropped) */
	uint16_t	 lo_tport;
	uint16_t	 lo_dport;
	/* host veth names <prefix><n>; default "sbx-" */
	const char	*lo_prefix;
	/* the interface holding the gateway address; must not start with
	   lo_prefix; default "airlock-gw" */
	const char	*lo_gwname;
	/* nftables table (family inet); default "airlock" */
	const char	*lo_table;
	/* parent of the sandboxes' cgroups: a name under /sys/fs/cgroup
	   (when that is cgroup v2), or the absolute path of a directory in
	   a cgroup2 hierarchy (a delegated subtree); default "airlock" */
	const char	*lo_cgroup;
	/* nft binary; NULL = /usr/sbin/nft and the usual places */
	const char	*lo_nft;
	/* NULL = host tools; or an absolute DIR, the read-only lower layer
	   of a disposable overlay */
	const char	*lo_rootfs;
	/* the workload user (owner of LNC_HOME) */
	uid_t		 lo_uid;
	gid_t		 lo_gid;
	/* cgroup v2 memory.max (bytes; also the size of each writable
	   tmpfs) and pids.max; 0 = none (tmpfs 64MiB) */
	uint64_t	 lo_memory;
	uint64_t	 lo_pids;
	/* host paths hidden in every sandbox (config dir, state_dir, secret
	   files); NULL-terminated unless full */
	const char	*lo_masks[LNC_OPT_MASK_MAX];
	/* launcher.backend qemu: sandboxes are qemu microVMs (tap
	   <prefix><n>, the same addresses and host rules) */
	int		 lo_vm;
	const char	*lo_qemu_bin;	/* NULL = qemu-system-x86_64 */
	const char	*lo_qemu_kernel;
	const char	*lo_qemu_initrd;
	uint32_t	 lo_qemu_mem_mb;
	uint32_t	 lo_qemu_vcpus;
	int		 lo_qemu_accel;	/* CFG_ACCEL_* */
	uint32_t	 lo_qemu_boot_ms;	/* ready within, or killed */
	int		 lo_qemu_snap;	/* restore VMs from a template */
	/* <state_dir>/snapshots, or NULL; its bound in bytes (0 = 1 GiB);
	   the snapshot a pool is built from (never pruned), or NULL */
	const char	*lo_snapdir;
	uint64_t	 lo_snap_max;
	const char	*lo_pool_from;
	/* process name; default "airlock-launch" */
	const char	*lo_title;
	/* storage for names launcher_opts_from_cfg() derives */
	char		 lo_own_prefix[16];
	char		 lo_own_table[32];
	char		 lo_own_gw[16];
	char		 lo_own_snapdir[LNC_PATH_MAX];
};

/* What the caller names for one sandbox. Borrowed for the call only. */
struct lnc_create_req {
	const char	*cr_id;
	/* its CA certificate, PEM (below LNC_PEM_MAX), or NULL */
	const char	*cr_ca_pem;
	size_t		 cr_ca_len;
	/* a snapshot to start from (its layers under a fresh upper), or
	   NULL */
	const char	*cr_from;
	/* more host paths to hide: secret files, the config file, the admin
	   socket; absolute; NULL-terminated unless full */
	const char	*cr_masks[LNC_MASK_MAX];
};

/* What the launcher made. */
struct lnc_sandbox {
	char		 ls_id[LNC_ID_MAX];
	char		 ls_ifname[16];	/* host side of the veth */
	struct net_addr	 ls_addr;	/* its source address */
	struct net_addr	 ls_gateway;
	pid_t		 ls_init_pid;	/* host pid of its init, for
					   launcher_enter_exec(); qemu's pid
					   for a VM */
	char		 ls_ctl[108];	/* a VM: the unix socket of its
					   guest agent (root only); else "" */
	uint32_t	 ls_usec;	/* time the launcher spent */
};

struct launcher;

/* Defaults for every field (network 10.88.0.0/16, ports 0, uid 65534). */
void		 launcher_opts_init(struct launcher_opts *);
/*
 * Fill <o> from the config: network, the ports of listen.transparent and
 * listen.dns, rootfs, user, limits, and masks for the config directory,
 * state_dir, the admin socket and token file and every file: secret
 * source (what an exec: source reads is not known here: name it in the
 * create request). Strings are borrowed from <cfg>, which must outlive
 * launcher_spawn(). Returns 0, or -1 after logging (bad "IP:PORT", more
 * paths than LNC_OPT_MASK_MAX).
 */
int		 launcher_opts_from_cfg(struct launcher_opts *,
		    const struct cfg *);

/*
 * Fork the launcher. Call as root, single-threaded, before secrets are
 * loaded: the child keeps a copy of this process's memory (and so does
 * every sandbox init, root-owned and not dumpable). The child keeps only
 * stderr and its end of the socketpair (stdin, stdout on /dev/null),
 * ignores terminal signals and SIGTERM: it stops when the gateway's end
 * closes. <o> is copied. Returns the handle, or NULL after logging.
 */
struct launcher	*launcher_spawn(const struct launcher_opts *);

/*
 * Install the host side, idempotent: the nftables table, the blackhole
 * route for the network, the gateway address on lo_gwname (bindable from
 * then on). Sandboxes need it; running ones are left alone. Returns 0, or
 * -1 with the launcher's reason in <why> (may be NULL).
 */
int		 launcher_setup_host(struct launcher *, char *why, size_t);
/* Undo launcher_setup_host() after destroying every sandbox. */
int		 launcher_teardown_host(struct launcher *, char *why,
		    size_t);
/* Is the launcher alive and answering? 0 or -1. */
int		 launcher_ping(struct launcher *);
/* Build a sandbox. 0 with <out> filled, or -1 with <why>. */
int		 launcher_create(struct launcher *,
		    const struct lnc_create_req *, struct lnc_sandbox *out,
		    char *why, size_t);
/*
 * Pause or resume a VM (QMP stop / cont): a paused VM keeps its memory
 * and state and uses no CPU. With <if_idle>, a pause is refused (EBUSY)
 * while someone is attached to its guest agent. 0, or -1 with errno
 * (ENOENT unknown id, ENOTSUP not a VM) and the reason in <why>.
 */
int		 launcher_pause(struct launcher *, const char *id,
		    int if_idle, char *why, size_t);
int		 launcher_resume(struct launcher *, const char *id,
		    char *why, size_t);

/*
 * The escape canary (issue 24, point 7): run the fixed containment checks
 * inside netns sandbox <id> (lnc_probe.c). <res> gets one letter per
 * check of launcher_probe_checks[] ('P' pass, 'F' fail, 'S' skipped: no
 * other netns sandbox to put a canary in), a space and the
 * failures' details. 0, or -1 with errno (ENOENT unknown id, ENOTSUP a
 * VM) and the reason in <res>. Blocks the launcher for up to a few
 * seconds.
 */
#define LNC_PROBE_TCP_GW	0	/* TCP to a canary on the gateway */
#define LNC_PROBE_UDP_GW	1	/* UDP (a DNS query) to it */
#define LNC_PROBE_TCP_LO	2	/* TCP to a canary on host loopback */
#define LNC_PROBE_UNSHARE	3	/* unshare(CLONE_NEWUSER) */
#define LNC_PROBE_RAW		4	/* raw IP and AF_PACKET sockets */
#define LNC_PROBE_PATHS		5	/* config, state, secrets, sockets */
#define LNC_PROBE_TCP_OTHER	6	/* TCP to a canary in another sandbox */
#define LNC_PROBE_UDP_OTHER	7	/* UDP to it */
#define LNC_PROBE_N		8
extern const char *const launcher_probe_checks[LNC_PROBE_N + 1];
int		 launcher_probe(struct launcher *, const char *id, char *res,
		    size_t);
/* A snapshot operation (enum lnc_snap_op, lnc_proto.h): 0 with the
 * snapshot's line in <out>, or -1 with errno and the reason there. */
int		 launcher_snap(struct launcher *, int op, const char *id,
		    const char *name, unsigned index, char *out, size_t);
/* A reloaded launcher.snapshots.max_bytes: the launcher prunes to it now
 * and says in <out> whether the store fits (it logs when it does not). */
int		 launcher_snap_limit(struct launcher *, uint64_t max, char *out,
		    size_t);

/*
 * Kill it: its processes, mounts and cgroup are gone when this returns,
 * its veth goes with its netns moments later (the kernel's batched
 * cleanup; the launcher deletes it past 5 s), and its address is given
 * out again only once that link is gone. 0, or -1 (ENOENT: unknown id).
 */
int		 launcher_destroy(struct launcher *, const char *id);
/*
 * Close the socketpair and wait for the launcher to exit: it destroys
 * every sandbox and tears the host setup down first. No other call may
 * be running. NULL ok.
 */
void		 launcher_close(struct launcher *);
/* The launcher's pid (tests, logs). */
pid_t		 launcher_pid(const struct launcher *);

/*
 * Run argv inside the sandbox whose init is <init_pid>, for airlockctl
 * run: enter its namespaces (and cgroup), then as <uid>:<gid> with no
 * supplementary groups, no capabilities (bounding set included),
 * NO_NEW_PRIVS and in a session of its own (no TIOCSTI into the caller's
 * terminal), execve argv[0] (searched in envp's PATH when it has no '/')
 * with exactly <envp>, cwd "/", fds 0-2 inherited and no other. Must be
 * root. The caller's own namespaces are untouched (the work happens in a
 * child). While it runs, the caller ignores SIGINT and SIGQUIT (a
 * terminal's Ctrl-C reaches the entering child, which forwards it to the
 * workload's process group) and forwards SIGTERM and SIGHUP. Returns the
 * exit status, 128+N for signal N, 127 when argv[0] was not found, 126
 * when it could not run, -1 when the sandbox could not be entered
 * (logged).
 */
int		 launcher_enter_exec(pid_t init_pid, uid_t, gid_t,
		    char *const argv[], char *const envp[]);
/* The same with <flags>: LNC_EXEC_IO_URING keeps io_uring out of the
 * workload's seccomp filter (launcher.io_uring). The filter, a second
 * SIGTERM and the grace period: see docs/threat-model.md. */
#define LNC_EXEC_IO_URING	0x1
int		 launcher_enter_exec_flags(pid_t init_pid, uid_t, gid_t,
		    char *const argv[], char *const envp[], int flags);

#endif
