/*
 * The escape canary (issue 24, point 7): a fixed set of containment
 * checks run inside a netns sandbox, as its workload would run them. A
 * child of the launcher enters the sandbox's net and mount namespaces,
 * drops to the workload user under the workload's seccomp filter and
 * tries what must fail; network attempts are judged by the canaries the
 * launcher listens on in the host's namespace (the gateway address and
 * the host's loopback, on ports outside the transparent and DNS ones) and
 * in another sandbox's (on its address): anything arriving there escaped.
 *
 * The answer is one letter per check (launcher_probe_checks[]): 'P' pass,
 * 'F' fail, 'S' skipped, then a space and the failures' details.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "launcher/lnc_internal.h"
#include "util/log.h"

#define PROBE_TIMEOUT_MS	10000
#define PROBE_NET_MS		1000	/* per network attempt */

const char *const launcher_probe_checks[LNC_PROBE_N + 1] = {
	"tcp_gateway_canary", "udp_gateway_canary", "tcp_host_loopback",
	"unshare", "raw_socket", "host_paths", "tcp_other_sandbox",
	"udp_other_sandbox", NULL,
};

struct canary {
	int		 k_tcp_gw, k_udp_gw, k_tcp_lo;
	uint16_t	 k_port_tcp_gw, k_port_udp_gw, k_port_tcp_lo;
	/* in another sandbox's netns, on its address; -1 when none */
	int		 k_tcp_other, k_udp_other;
	uint16_t	 k_port_tcp_other, k_port_udp_other;
	in_addr_t	 k_other;
};

static int
canary_sock(int type, in_addr_t addr, uint16_t *port)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof(sin);
	int			fd, one = 1;

	if ((fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = addr;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    (type == SOCK_STREAM && listen(fd, 4) == -1) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) == -1) {
		close(fd);
		return -1;
	}
	*port = ntohs(sin.sin_port);
	return fd;
}

/* Did anything reach <fd> (a connection or a datagram)? */
static int
canary_hit(int fd, int stream)
{
	char	buf[64];
	int	c;

	if (stream) {
		if ((c = accept(fd, NULL, NULL)) == -1)
			return 0;
		close(c);
		return 1;
	}
	return recv(fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0;
}

/* ---- inside the sandbox (the probe's child) ------------------------ */

/* A TCP connect or a UDP datagram (a DNS query) towards addr:port. */
static void
try_send(int type, in_addr_t addr, uint16_t port)
{
	static const unsigned char dnsq[] = {
		0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
		6, 'c', 'a', 'n', 'a', 'r', 'y', 4, 't', 'e', 's', 't', 0,
		0, 1, 0, 1,
	};
	struct sockaddr_in	sin;
	struct pollfd		pfd;
	int			fd;

	if ((fd = socket(AF_INET, type | SOCK_NONBLOCK, 0)) == -1)
		return;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = addr;
	sin.sin_port = htons(port);
	if (type == SOCK_DGRAM) {
		(void)sendto(fd, dnsq, sizeof(dnsq), 0,
		    (struct sockaddr *)&sin, sizeof(sin));
	} else if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 &&
	    errno == EINPROGRESS) {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		(void)poll(&pfd, 1, PROBE_NET_MS);
	}
	close(fd);
}

/* A masked path must be absent, unreadable, or empty. */
static int
path_hidden(const char *p, char *why, size_t whysz)
{
	struct stat	 sb;
	struct dirent	*de;
	DIR		*d;
	char		 b;
	int		 fd, n = 0;

	if (lstat(p, &sb) == -1)
		return 1;
	if (S_ISDIR(sb.st_mode)) {
		if ((d = opendir(p)) == NULL)
			return 1;
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 &&
			    strcmp(de->d_name, "..") != 0)
				n++;
		closedir(d);
		if (n > 0)
			snprintf(why, whysz, "%.100s lists %d entries", p, n);
		return n == 0;
	}
	if (S_ISSOCK(sb.st_mode)) {
		snprintf(why, whysz, "%.120s is a socket", p);
		return 0;
	}
	if ((fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1)
		return 1;
	n = (int)read(fd, &b, 1);
	close(fd);
	if (n > 0)
		snprintf(why, whysz, "%.120s is readable", p);
	return n <= 0;
}

static int
drop_to_workload(struct lnc *l)
{
	struct __user_cap_header_struct	hdr;
	struct __user_cap_data_struct	data[2];

	if (setgroups(0, NULL) == -1 ||
	    setresgid(l->l_o.lo_gid, l->l_o.lo_gid, l->l_o.lo_gid) == -1 ||
	    setresuid(l->l_o.lo_uid, l->l_o.lo_uid, l->l_o.lo_uid) == -1)
		return -1;
	memset(&hdr, 0, sizeof(hdr));
	memset(data, 0, sizeof(data));
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	if (syscall(SYS_capset, &hdr, data) == -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		return -1;
	return lnc_seccomp_apply(0);
}

static void __attribute__((noreturn))
probe_child(struct lnc *l, struct lnc_sbx *s, const struct canary *k,
    const char masks[][PATH_MAX], size_t nmasks, int out)
{
	static const char *ns[] = { "net", "ipc", "uts", "mnt" };
	char	path[64], res[LNC_PROBE_N + 1], why[160] = "";
	size_t	i;
	int	fd;

	/* nothing of the launcher's crosses: only the answer pipe */
	if (dup2(out, 3) == -1)
		_exit(2);
	out = 3;
	close_range(4, ~0U, 0);
	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)s->s_pid,
		    ns[i]);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
		    setns(fd, 0) == -1)
			_exit(2);
		close(fd);
	}
	if (chdir("/") == -1 || drop_to_workload(l) == -1)
		_exit(3);
	memset(res, 'P', LNC_PROBE_N);
	res[LNC_PROBE_N] = '\0';
	/* judged by the launcher's canaries */
	try_send(SOCK_STREAM, l->l_gw, k->k_port_tcp_gw);
	try_send(SOCK_DGRAM, l->l_gw, k->k_port_udp_gw);
	try_send(SOCK_STREAM, htonl(INADDR_LOOPBACK), k->k_port_tcp_lo);
	if (k->k_tcp_other != -1) {
		try_send(SOCK_STREAM, k->k_other, k->k_port_tcp_other);
		try_send(SOCK_DGRAM, k->k_other, k->k_port_udp_other);
	} else
		res[LNC_PROBE_TCP_OTHER] = res[LNC_PROBE_UDP_OTHER] = 'S';
	if (unshare(CLONE_NEWUSER) == 0)
		res[LNC_PROBE_UNSHARE] = 'F';
	if ((fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)) != -1 ||
	    (fd = socket(AF_PACKET, SOCK_RAW, 0)) != -1) {
		res[LNC_PROBE_RAW] = 'F';
		close(fd);
	}
	for (i = 0; i < nmasks; i++)
		if (!path_hidden(masks[i], why, sizeof(why)))
			res[LNC_PROBE_PATHS] = 'F';
	if (write(out, res, LNC_PROBE_N) != LNC_PROBE_N ||
	    write(out, why, strlen(why)) < 0)
		_exit(4);
	_exit(0);
}

/* ---- the launcher -------------------------------------------------- */

/*
 * Canaries in another live netns sandbox than <s>: a socket belongs to
 * the netns it was made in, so we step into that sandbox's netns, make
 * them on its address, and step back. Leaves both -1 when there is none
 * or a step fails (the checks are then skipped).
 */
static void
canary_other(struct lnc *l, struct lnc_sbx *s, struct canary *k)
{
	struct lnc_sbx	*o;
	char		 path[64];
	int		 self, theirs;

	k->k_tcp_other = k->k_udp_other = -1;
	TAILQ_FOREACH(o, &l->l_sbxs, s_entry)
		if (o != s && !o->s_vm && !o->s_dead && o->s_pid > 0)
			break;
	if (o == NULL)
		return;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)o->s_pid);
	if ((self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) == -1)
		return;
	if ((theirs = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		close(self);
		return;
	}
	if (setns(theirs, CLONE_NEWNET) == 0) {
		k->k_other = o->s_addr;
		k->k_tcp_other = canary_sock(SOCK_STREAM, o->s_addr,
		    &k->k_port_tcp_other);
		k->k_udp_other = canary_sock(SOCK_DGRAM, o->s_addr,
		    &k->k_port_udp_other);
		/* the launcher must never stay in a sandbox's netns */
		if (setns(self, CLONE_NEWNET) == -1) {
			log_warn("launcher: back to the host's netns");
			_exit(1);	/* the gateway sees EOF */
		}
	}
	close(theirs);
	close(self);
	if (k->k_tcp_other == -1 || k->k_udp_other == -1) {
		if (k->k_tcp_other != -1)
			close(k->k_tcp_other);
		if (k->k_udp_other != -1)
			close(k->k_udp_other);
		k->k_tcp_other = k->k_udp_other = -1;
	}
}

static void
canary_close(struct canary *k)
{
	if (k->k_tcp_gw != -1)
		close(k->k_tcp_gw);
	if (k->k_udp_gw != -1)
		close(k->k_udp_gw);
	if (k->k_tcp_lo != -1)
		close(k->k_tcp_lo);
	if (k->k_tcp_other != -1)
		close(k->k_tcp_other);
	if (k->k_udp_other != -1)
		close(k->k_udp_other);
}

int
lnc_probe(struct lnc *l, struct lnc_sbx *s, char *res, size_t ressz)
{
	static char	 masks[LNC_OPT_MASK_MAX][PATH_MAX];
	struct canary	 k;
	struct pollfd	 pfd;
	char		 buf[LNC_PROBE_N + 160];
	size_t		 nmasks = 0, i;
	ssize_t		 n = 0, r;
	int		 p[2], st;
	pid_t		 pid;

	if (s->s_vm || s->s_dead) {
		snprintf(res, ressz, "%s", s->s_vm ? "not a netns sandbox" :
		    "its init is gone");
		return s->s_vm ? ENOTSUP : ESRCH;
	}
	for (i = 0; i < LNC_OPT_MASK_MAX && l->l_o.lo_masks[i] != NULL; i++)
		if (realpath(l->l_o.lo_masks[i], masks[nmasks]) != NULL ||
		    snprintf(masks[nmasks], PATH_MAX, "%s",
		    l->l_o.lo_masks[i]) > 0)
			nmasks++;
	memset(&k, 0, sizeof(k));
	canary_other(l, s, &k);
	k.k_tcp_gw = canary_sock(SOCK_STREAM, l->l_gw, &k.k_port_tcp_gw);
	k.k_udp_gw = canary_sock(SOCK_DGRAM, l->l_gw, &k.k_port_udp_gw);
	k.k_tcp_lo = canary_sock(SOCK_STREAM, htonl(INADDR_LOOPBACK),
	    &k.k_port_tcp_lo);
	if (k.k_tcp_gw == -1 || k.k_udp_gw == -1 || k.k_tcp_lo == -1 ||
	    pipe2(p, O_CLOEXEC) == -1) {
		snprintf(res, ressz, "canary sockets: %s", strerror(errno));
		canary_close(&k);
		return EIO;
	}
	if ((pid = fork()) == -1) {
		snprintf(res, ressz, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		canary_close(&k);
		return EIO;
	}
	if (pid == 0) {
		close(p[0]);
		probe_child(l, s, &k, (const char (*)[PATH_MAX])masks, nmasks,
		    p[1]);
	}
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	while (n < (ssize_t)sizeof(buf) - 1 &&
	    poll(&pfd, 1, PROBE_TIMEOUT_MS) == 1 &&
	    (r = read(p[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += r;
	close(p[0]);
	(void)kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	buf[n] = '\0';
	if (n < LNC_PROBE_N) {
		snprintf(res, ressz, "the probe did not report (status %d)",
		    st);
		canary_close(&k);
		return EIO;
	}
	if (canary_hit(k.k_tcp_gw, 1))
		buf[LNC_PROBE_TCP_GW] = 'F';
	if (canary_hit(k.k_udp_gw, 0))
		buf[LNC_PROBE_UDP_GW] = 'F';
	if (canary_hit(k.k_tcp_lo, 1))
		buf[LNC_PROBE_TCP_LO] = 'F';
	if (k.k_tcp_other != -1 && canary_hit(k.k_tcp_other, 1))
		buf[LNC_PROBE_TCP_OTHER] = 'F';
	if (k.k_udp_other != -1 && canary_hit(k.k_udp_other, 0))
		buf[LNC_PROBE_UDP_OTHER] = 'F';
	canary_close(&k);
	snprintf(res, ressz, "%.*s %s", LNC_PROBE_N, buf, buf + LNC_PROBE_N);
	return 0;
}
