/*
 * The netns backend: one sandbox = the namespaces of a tiny init (pid 1
 * inside), a veth pair and one /32.
 *
 * The launcher (parent) and the new init (child) build it together, in
 * parallel, talking over a private socketpair (the private root is
 * lnc_root.c):
 *
 *	parent				child (new net/mnt/pid/uts/ipc)
 *	clone3 (pidfd, cgroup)		IPv6 off for the new netns
 *					"N" ->
 *	veth <prefix><n> + eth0 in ns	hostname, private root (mounts)
 *	host side: rp_filter, no IPv6,
 *	gateway /32, up, /32 route
 *	"L" ->
 *					lo up, eth0 addr + up, default route
 *					<- status (errno + text)
 *					drop capabilities, reap forever
 *
 * Teardown kills the init: the kernel kills the rest of its PID
 * namespace, and the mount and net namespaces go with the last process,
 * the veth with its netns. That cleanup runs in the kernel's workqueue, in
 * batches, within milliseconds here (deleting the link ourselves would
 * hold rtnl for 15-50 ms each); the link can outlive the sandbox by
 * seconds, so an index (address, link name) is reused only once rtnetlink
 * says its link is gone, and a link still there after LNC_GONE_MS is
 * deleted by us.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/capability.h>
#include <linux/prctl.h>
#include <linux/rtnetlink.h>
#include <linux/sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "launcher/lnc_internal.h"
#include "util/log.h"
#include "util/util.h"

#define SYNC_TIMEOUT_MS	10000
#define LNC_GONE_MS	5000	/* a dead sandbox's link, at most */

struct status {
	int32_t		 st_errno;
	char		 st_msg[128];
};

int
lnc_slot_ifname(struct lnc *l, uint32_t index, char *buf, size_t bufsz)
{
	int	n = snprintf(buf, bufsz, "%s%u", l->l_o.lo_prefix, index);

	return n < 0 || (size_t)n >= bufsz ? -1 : 0;
}

/*
 * Next free index whose link is gone: round robin from the last one, so a
 * freed address rests as long as possible, and never one whose veth still
 * exists (rtnetlink says so).
 */
static int
sbx_alloc_once(struct lnc *l, uint32_t *index)
{
	char		name[16];
	uint32_t	i, n;
	int		idx;

	for (n = 0; n < l->l_nslots; n++) {
		i = l->l_next % l->l_nslots + 1;
		l->l_next = i;
		if (l->l_used[i])
			continue;
		if (lnc_slot_ifname(l, i, name, sizeof(name)) == -1)
			return -1;
		if ((idx = lnc_nl_link_index(l->l_nl, name)) == -1)
			return -1;
		if (idx > 0)
			continue;	/* still there: not yet */
		l->l_used[i] = 1;
		*index = i;
		return 0;
	}
	errno = EADDRNOTAVAIL;
	return -1;
}

/* A full network may only be waiting for the kernel to remove links. */
int
lnc_slot_alloc(struct lnc *l, uint32_t *index)
{
	uint64_t	until = util_now_ms() + 2000;

	for (;;) {
		if (sbx_alloc_once(l, index) == 0)
			return 0;
		if (errno != EADDRNOTAVAIL)
			return -1;
		if (lnc_gone_check(l, 0) == 0 || util_now_ms() >= until) {
			errno = EADDRNOTAVAIL;
			return -1;
		}
		usleep(2000);
	}
}

/* ---- child side ---------------------------------------------------- */

void
lnc_child_fail(struct lnc_child *c, int err, const char *fmt, ...)
{
	struct status	st;
	va_list		ap;
	int		n;

	memset(&st, 0, sizeof(st));
	st.st_errno = err ? err : EIO;
	va_start(ap, fmt);
	n = vsnprintf(st.st_msg, sizeof(st.st_msg), fmt, ap);
	va_end(ap);
	if (err && n >= 0 && (size_t)n < sizeof(st.st_msg))
		snprintf(st.st_msg + n, sizeof(st.st_msg) - n, ": %s",
		    strerror(err));
	(void)!send(c->c_sync, &st, sizeof(st), MSG_NOSIGNAL);
	_exit(1);
}

static void
net_setup(struct lnc_child *c)
{
	struct lnc	*l = c->c_l;
	int		 nl, lo, eth;

	LNC_CHECK(c, nl = lnc_nl_open(), "netlink");
	LNC_CHECK(c, lo = lnc_nl_link_index(nl, "lo"), "lo");
	LNC_CHECK(c, eth = lnc_nl_link_index(nl, "eth0"), "eth0");
	if (lo == 0 || eth == 0)
		lnc_child_fail(c, ENODEV, "lo or eth0 missing");
	LNC_CHECK(c, lnc_nl_link_up(nl, lo), "lo up");
	LNC_CHECK(c, lnc_nl_addr_add(nl, eth, c->c_addr, 32), "eth0 address");
	LNC_CHECK(c, lnc_nl_link_up(nl, eth), "eth0 up");
	LNC_CHECK(c, lnc_nl_route(nl, 1, 0, 0, RTN_UNICAST, eth, l->l_gw, 0),
	    "default route");
	close(nl);
}

/* Pid 1 of the sandbox from now on: hold the namespaces, reap orphans. */
static void __attribute__((noreturn))
child_init_loop(void)
{
	struct __user_cap_header_struct	hdr;
	struct __user_cap_data_struct	data[2];
	sigset_t			all, chld;
	int				fd;

	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) != -1) {
		(void)dup2(fd, 0);
		(void)dup2(fd, 1);
		(void)dup2(fd, 2);
	}
	/* only the upper layer's fd stays (snapshots read it, lnc_snap.c) */
	close_range(3, 3, 0);
	close_range(LNC_UPPER_FD + 1, ~0U, 0);
	/* nothing privileged stays behind inside the sandbox */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	memset(&hdr, 0, sizeof(hdr));
	memset(data, 0, sizeof(data));
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	(void)syscall(SYS_capset, &hdr, data);

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		(void)sigwaitinfo(&chld, NULL);
	}
}

/*
 * The init is a fork of airlockd, not an exec: its /proc/1/cmdline and
 * environ would be the gateway's (binary, config path). Point both at a
 * page of ours: cmdline "airlock-init", environ empty (issue 24, point
 * 3). PR_SET_MM_MAP replaces the whole memory map description at once
 * and needs no capability (CAP_SYS_RESOURCE, which the per-field
 * PR_SET_MM_ARG_START wants, may be missing from the bounding set); the
 * other fields are our own, from /proc/self/stat. The page is anonymous:
 * /proc reads cmdline only from anonymous memory.
 */
static int
child_title_clear(void)
{
	static const char	 title[] = LNC_INIT_NAME;
	struct prctl_mm_map	 m;
	unsigned long long	 f[52];
	char			 buf[1024], *p, *tok, *save;
	char			*page;
	ssize_t			 n;
	int			 fd, i;

	if ((fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || (buf[n] = '\0', p = strrchr(buf, ')')) == NULL) {
		errno = EINVAL;
		return -1;
	}
	/* after "pid (comm)" the fields are numbered from 3 (proc(5)) */
	memset(f, 0, sizeof(f));
	for (i = 3, tok = strtok_r(p + 1, " ", &save); tok != NULL && i < 52;
	    i++, tok = strtok_r(NULL, " ", &save))
		f[i] = strtoull(tok, NULL, 10);
	if (i < 52) {
		errno = EINVAL;
		return -1;
	}
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return -1;
	memcpy(page, title, sizeof(title));
	memset(&m, 0, sizeof(m));
	m.start_code = f[26];
	m.end_code = f[27];
	m.start_stack = f[28];
	m.start_data = f[45];
	m.end_data = f[46];
	m.start_brk = f[47];
	m.brk = (uint64_t)syscall(SYS_brk, 0);
	m.arg_start = (uint64_t)(uintptr_t)page;
	m.arg_end = m.arg_start + sizeof(title);
	m.env_start = m.env_end = m.arg_end;
	m.exe_fd = (uint32_t)-1;
	return prctl(PR_SET_MM, PR_SET_MM_MAP, &m, sizeof(m), 0);
}

static void __attribute__((noreturn))
child_main(struct lnc_child *c)
{
	struct status	st;
	char		b;
	int		fd;
	ssize_t		n;

	(void)prctl(PR_SET_NAME, LNC_INIT_NAME, 0, 0, 0);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* only the sync socket; the gateway's stderr stays outside */
	if (dup2(c->c_sync, 3) == -1)
		_exit(1);
	c->c_sync = 3;
	close_range(4, ~0U, 0);
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) != -1) {
		(void)dup2(fd, 0);
		(void)dup2(fd, 1);
		(void)dup2(fd, 2);
		if (fd > 3)
			close(fd);
	}
	sigprocmask(SIG_SETMASK, &(sigset_t){ 0 }, NULL);

	/* before eth0 arrives: it takes the netns defaults when it moves */
	LNC_CHECK(c, lnc_sysctl("net/ipv6/conf/all/disable_ipv6", "1"),
	    "disable IPv6");
	LNC_CHECK(c, lnc_sysctl("net/ipv6/conf/default/disable_ipv6", "1"),
	    "disable IPv6");
	LNC_CHECK(c, lnc_sysctl("net/ipv6/conf/lo/disable_ipv6", "1"),
	    "disable IPv6");
	if (send(c->c_sync, "N", 1, MSG_NOSIGNAL) != 1)
		_exit(1);

	LNC_CHECK(c, child_title_clear(), "clear the command line");
	LNC_CHECK(c, sethostname(c->c_id, strlen(c->c_id)), "sethostname");
	lnc_root_setup(c);

	/* wait for the parent: eth0 is here, the host side is up */
	n = recv(c->c_sync, &b, 1, 0);
	if (n != 1 || b != 'L')
		_exit(1);
	LNC_CHECK(c, unshare(CLONE_NEWCGROUP), "cgroup namespace");
	net_setup(c);

	memset(&st, 0, sizeof(st));
	if (send(c->c_sync, &st, sizeof(st), MSG_NOSIGNAL) != sizeof(st))
		_exit(1);
	child_init_loop();
}

/* ---- parent side --------------------------------------------------- */

static int
sync_recv(int fd, void *buf, size_t len)
{
	struct pollfd	pfd = { .fd = fd, .events = POLLIN };
	ssize_t		n;
	int		r;

	do
		r = poll(&pfd, 1, SYNC_TIMEOUT_MS);
	while (r == -1 && errno == EINTR);
	if (r == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (r == -1)
		return -1;
	n = recv(fd, buf, len, 0);
	if (n == -1)
		return -1;
	return (int)n;
}

static pid_t
clone_init(int cgfd, int *pidfd)
{
	struct clone_args	ca;
	long			pid;

	memset(&ca, 0, sizeof(ca));
	ca.flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS |
	    CLONE_NEWIPC | CLONE_PIDFD;
	ca.pidfd = (uint64_t)(uintptr_t)pidfd;
	ca.exit_signal = SIGCHLD;
	if (cgfd != -1) {
		ca.flags |= CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)cgfd;
	}
	/* fork-like: no new stack, the child continues on a copy of ours */
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	return (pid_t)pid;
}

static int
cg_write(const char *dir, const char *file, uint64_t v)
{
	char	path[PATH_MAX + 32], val[32];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)v);
	return lnc_write_file(path, val);
}

/*
 * Wait for the kernel to remove the host end of a dead sandbox's veth: its
 * netns cleanup deletes links in batches, within milliseconds, while one
 * RTM_DELLINK of our own holds rtnl for 15-50 ms (RCU grace periods).
 */
void
lnc_gone_add(struct lnc *l, const char *ifname)
{
	struct lnc_gone	*g;

	g = xcalloc(1, sizeof(*g));
	snprintf(g->g_ifname, sizeof(g->g_ifname), "%s", ifname);
	g->g_deadline = util_now_ms() + LNC_GONE_MS;
	TAILQ_INSERT_TAIL(&l->l_gone, g, g_entry);
}

int
lnc_link_host_setup(struct lnc *l, const char *ifname, in_addr_t addr,
    const char **what)
{
	char	path[PATH_MAX];
	int	ifi;

#define STEP(w, expr) do {						\
	*what = (w);							\
	if ((expr) == -1)						\
		return -1;						\
} while (0)
	errno = 0;
	if ((ifi = lnc_nl_link_index(l->l_nl, ifname)) <= 0) {
		*what = "link index";
		errno = ifi == 0 ? ENODEV : errno;
		return -1;
	}
	snprintf(path, sizeof(path), "net/ipv4/conf/%s/rp_filter", ifname);
	STEP("rp_filter", lnc_sysctl(path, "1"));
	snprintf(path, sizeof(path), "net/ipv6/conf/%s/disable_ipv6", ifname);
	STEP("disable_ipv6", lnc_sysctl(path, "1"));
	STEP("gateway address", lnc_nl_addr_add(l->l_nl, ifi, l->l_gw, 32));
	STEP("link up", lnc_nl_link_up(l->l_nl, ifi));
	STEP("route", lnc_nl_route(l->l_nl, 1, addr, 32, RTN_UNICAST, ifi, 0,
	    l->l_gw));
#undef STEP
	return 0;
}

/* Masks of the opts and the request, symlinks resolved on the host. */
static void
masks_resolve(struct lnc *l, const struct lnc_m_create *m, struct lnc_child *c)
{
	const char	*p;
	size_t		 i;

	c->c_nmasks = 0;
	for (i = 0; i < LNC_OPT_MASK_MAX + LNC_MASK_MAX; i++) {
		if (i < LNC_OPT_MASK_MAX)
			p = l->l_o.lo_masks[i];
		else if (i - LNC_OPT_MASK_MAX < m->mc_nmasks)
			p = m->mc_masks[i - LNC_OPT_MASK_MAX];
		else
			p = NULL;
		if (p == NULL || *p == '\0')
			continue;
		if (realpath(p, c->c_masks[c->c_nmasks]) == NULL)
			snprintf(c->c_masks[c->c_nmasks], PATH_MAX, "%s", p);
		if (strcmp(c->c_masks[c->c_nmasks], "/") != 0)
			c->c_nmasks++;
	}
}

/* Kill and reap an init (or a VM's qemu). */
void
lnc_pid_kill(struct lnc_sbx *s)
{
	struct pollfd	pfd;
	int		r;

	if (s->s_dead || s->s_pid <= 0)
		return;
	if (s->s_pidfd != -1) {
		(void)syscall(SYS_pidfd_send_signal, s->s_pidfd, SIGKILL,
		    NULL, 0);
		/* exits once the kernel has killed its PID namespace */
		pfd.fd = s->s_pidfd;
		pfd.events = POLLIN;
		do
			r = poll(&pfd, 1, SYNC_TIMEOUT_MS);
		while (r == -1 && errno == EINTR);
		if (r == 0) {
			/* stuck in the kernel: the main loop reaps it later */
			log_warnx("launcher: sandbox %s: init %d still alive "
			    "after %d ms", s->s_id, (int)s->s_pid,
			    SYNC_TIMEOUT_MS);
			s->s_dead = 1;
			return;
		}
	} else
		(void)kill(s->s_pid, SIGKILL);
	while (waitpid(s->s_pid, NULL, 0) == -1 && errno == EINTR)
		;
	s->s_dead = 1;
}

static void
cg_remove(struct lnc_sbx *s)
{
	int	i;

	if (s->s_cgroup == NULL)
		return;
	/* empty once the init is reaped; allow a moment for the rest */
	for (i = 0; i < 100; i++) {
		if (rmdir(s->s_cgroup) == 0 || errno == ENOENT)
			break;
		if (errno != EBUSY) {
			log_warn("launcher: rmdir %s", s->s_cgroup);
			break;
		}
		usleep(1000);
	}
	free(s->s_cgroup);
	s->s_cgroup = NULL;
}

void
lnc_sbx_free(struct lnc *l, struct lnc_sbx *s)
{
	if (s->s_pidfd != -1)
		close(s->s_pidfd);
	l->l_used[s->s_index] = 0;
	free(s->s_cgroup);
	free(s->s_cg1[0]);
	free(s->s_cg1[1]);
	free(s);
}

int
lnc_sbx_new(struct lnc *l, const struct lnc_m_create *m, struct lnc_sbx **out,
    char *why, size_t whysz)
{
	struct lnc_sbx	*s;
	uint32_t	 index;
	int		 err;

	if (!l->l_host_up) {
		snprintf(why, whysz, "host not set up");
		return EAGAIN;
	}
	if (lnc_sbx_find(l, m->mc_id) != NULL) {
		snprintf(why, whysz, "sandbox %s exists", m->mc_id);
		return EEXIST;
	}
	if (lnc_slot_alloc(l, &index) == -1) {
		err = errno;
		snprintf(why, whysz, "no free address: %s", strerror(err));
		return err;
	}
	s = xcalloc(1, sizeof(*s));
	s->s_pidfd = -1;
	s->s_qmp = s->s_idfd = -1;
	s->s_index = index;
	snprintf(s->s_id, sizeof(s->s_id), "%s", m->mc_id);
	(void)lnc_slot_ifname(l, index, s->s_ifname, sizeof(s->s_ifname));
	s->s_addr = htonl(l->l_base + 1 + index);
	*out = s;
	return 0;
}

void
lnc_sbx_add(struct lnc *l, struct lnc_sbx *s, struct lnc_m_sandbox *out,
    uint64_t t0)
{
	TAILQ_INSERT_TAIL(&l->l_sbxs, s, s_entry);
	l->l_nsbx++;
	memset(out, 0, sizeof(*out));
	memcpy(out->ms_id, s->s_id, sizeof(out->ms_id));
	memcpy(out->ms_ifname, s->s_ifname, sizeof(out->ms_ifname));
	out->ms_addr = s->s_addr;
	out->ms_gateway = l->l_gw;
	out->ms_init_pid = (int32_t)s->s_pid;
	out->ms_usec = (uint32_t)(util_now_us() - t0);
}

int
lnc_sbx_create(struct lnc *l, const struct lnc_m_create *m,
    struct lnc_m_sandbox *out, char *why, size_t whysz)
{
	struct lnc_child	*c = NULL;
	struct lnc_sbx	*s = NULL;
	struct status	 st;
	uint64_t	 t0 = util_now_us();
	char		 path[PATH_MAX];
	const char	*what = "";
	int		 sv[2] = { -1, -1 }, cgfd = -1, nsfd = -1;
	int		 err = 0, veth = 0;
	pid_t		 pid = -1;
	ssize_t		 n;

	if ((err = lnc_sbx_new(l, m, &s, why, whysz)) != 0)
		return err;

	c = xcalloc(1, sizeof(*c));
	c->c_l = l;
	c->c_id = s->s_id;
	c->c_addr = s->s_addr;
	c->c_pem = m->mc_ca_pem;
	c->c_pemlen = m->mc_ca_len;
	masks_resolve(l, m, c);
	if (m->mc_from[0] != '\0') {
		if ((err = lnc_snap_lowers(l, m->mc_from, c->c_lowers,
		    LNC_SNAP_DEPTH, &c->c_nlowers, why, whysz)) != 0) {
			free(c);
			lnc_sbx_free(l, s);
			return err;
		}
		snprintf(s->s_from, sizeof(s->s_from), "%s", m->mc_from);
	}

#define FAIL(w) do { err = errno ? errno : EIO; what = (w); goto fail; } \
	while (0)
	errno = 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		FAIL("socketpair");
	if (l->l_cg2) {
		snprintf(path, sizeof(path), "%s/%s", l->l_cgparent, s->s_id);
		if (mkdir(path, 0755) == -1 && errno != EEXIST)
			FAIL("cgroup");
		s->s_cgroup = xstrdup(path);
		if (l->l_cg_limits && l->l_o.lo_memory &&
		    cg_write(path, "memory.max", l->l_o.lo_memory) == -1)
			FAIL("memory.max");
		if (l->l_cg_limits && l->l_o.lo_pids &&
		    cg_write(path, "pids.max", l->l_o.lo_pids) == -1)
			FAIL("pids.max");
		if ((cgfd = open(path, O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC)) == -1)
			FAIL("cgroup");
	}
	if ((pid = clone_init(cgfd, &s->s_pidfd)) == -1)
		FAIL("clone3");
	if (pid == 0) {
		close(sv[0]);
		c->c_sync = sv[1];
		child_main(c);
	}
	s->s_pid = pid;
	close(sv[1]);
	sv[1] = -1;
	/* no cgroup v2: v1 controllers or rlimits, before anything runs */
	if (lnc_limits_attach(l, s, pid, &what) == -1) {
		err = errno ? errno : EIO;
		goto fail;
	}
	if (cgfd != -1) {
		close(cgfd);
		cgfd = -1;
	}

	/* the child has turned IPv6 off in its netns */
	memset(&st, 0, sizeof(st));
	if ((n = sync_recv(sv[0], &st, sizeof(st))) != 1 ||
	    *(char *)&st != 'N')
		goto child_failed;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	if ((nsfd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		FAIL("netns");
	if (lnc_nl_veth_add(l->l_nl, s->s_ifname, "eth0", nsfd) == -1)
		FAIL("veth");
	veth = 1;
	close(nsfd);
	nsfd = -1;
	if (lnc_link_host_setup(l, s->s_ifname, s->s_addr, &what) == -1) {
		err = errno ? errno : EIO;
		goto fail;
	}
	/* if it already failed, its reason waits in our socket anyway */
	(void)send(sv[0], "L", 1, MSG_NOSIGNAL);
	memset(&st, 0, sizeof(st));
	if ((n = sync_recv(sv[0], &st, sizeof(st))) != sizeof(st) ||
	    st.st_errno != 0)
		goto child_failed;
	if (!l->l_cg2 && lnc_limits_rlimits_set(l, pid, &what) == -1) {
		err = errno ? errno : EIO;
		goto fail;
	}
	close(sv[0]);
	free(c);

	lnc_sbx_add(l, s, out, t0);
	return 0;

 child_failed:
	if (n == (ssize_t)sizeof(st) && st.st_errno != 0) {
		st.st_msg[sizeof(st.st_msg) - 1] = '\0';
		err = st.st_errno;
		snprintf(why, whysz, "sandbox %s: %s", s->s_id, st.st_msg);
	} else {
		err = n == -1 ? errno : EPIPE;
		snprintf(why, whysz, "sandbox %s: init: %s", s->s_id,
		    n == -1 ? strerror(err) : "exited");
	}
	goto cleanup;
 fail:
	/* the child's own failure, if it had one, explains ours better */
	if (sv[0] != -1 && pid > 0) {
		struct pollfd	pfd = { .fd = sv[0], .events = POLLIN };

		memset(&st, 0, sizeof(st));
		if (poll(&pfd, 1, 0) == 1 && (n = recv(sv[0], &st, sizeof(st),
		    MSG_DONTWAIT)) == (ssize_t)sizeof(st) && st.st_errno != 0)
			goto child_failed;
	}
	snprintf(why, whysz, "sandbox %s: %s: %s", s->s_id, what,
	    strerror(err));
 cleanup:
#undef FAIL
	if (nsfd != -1)
		close(nsfd);
	if (cgfd != -1)
		close(cgfd);
	if (sv[0] != -1)
		close(sv[0]);
	if (sv[1] != -1)
		close(sv[1]);
	lnc_pid_kill(s);
	if (veth)
		lnc_gone_add(l, s->s_ifname);
	cg_remove(s);
	lnc_limits_remove(s);
	lnc_sbx_free(l, s);
	free(c);
	return err ? err : EIO;
}

size_t
lnc_gone_check(struct lnc *l, int force)
{
	struct lnc_gone	*g, *next;
	uint64_t	 now = util_now_ms();
	size_t		 n = 0;
	int		 ifi;

	for (g = TAILQ_FIRST(&l->l_gone); g != NULL; g = next) {
		next = TAILQ_NEXT(g, g_entry);
		ifi = lnc_nl_link_index(l->l_nl, g->g_ifname);
		if (ifi > 0 && !force && now < g->g_deadline) {
			n++;
			continue;
		}
		if (ifi > 0) {
			/* something still holds its netns */
			log_warnx("launcher: %s outlived its sandbox; deleting "
			    "it", g->g_ifname);
			if (lnc_nl_link_del(l->l_nl, ifi) == -1 &&
			    errno != ENODEV)
				log_warn("launcher: deleting %s", g->g_ifname);
		}
		TAILQ_REMOVE(&l->l_gone, g, g_entry);
		free(g);
	}
	return n;
}

/*
 * Kill the init: the kernel kills the rest of its PID namespace, and the
 * net and mount namespaces go with the last process (its veth with the
 * netns). The index is free at once: sbx_alloc() skips it while the link
 * exists.
 */
int
lnc_sbx_destroy(struct lnc *l, struct lnc_sbx *s)
{
	if (s->s_vm)
		lnc_vm_kill(l, s);	/* the tap goes with qemu */
	else {
		lnc_pid_kill(s);
		cg_remove(s);
		lnc_limits_remove(s);
	}
	lnc_gone_add(l, s->s_ifname);
	TAILQ_REMOVE(&l->l_sbxs, s, s_entry);
	l->l_nsbx--;
	lnc_sbx_free(l, s);
	return 0;
}

struct lnc_sbx *
lnc_sbx_find(struct lnc *l, const char *id)
{
	struct lnc_sbx	*s;

	TAILQ_FOREACH(s, &l->l_sbxs, s_entry)
		if (strcmp(s->s_id, id) == 0)
			return s;
	return NULL;
}

void
lnc_sbx_reaped(struct lnc *l, pid_t pid)
{
	struct lnc_sbx	*s;

	TAILQ_FOREACH(s, &l->l_sbxs, s_entry)
		if (s->s_pid == pid) {
			log_warnx("launcher: sandbox %s: init %d died",
			    s->s_id, (int)pid);
			s->s_dead = 1;
		}
}
