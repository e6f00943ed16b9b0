/*
 * lnctest: the launcher and its netns backend, end to end (root).
 *
 *	lnctest [-p PREFIX] [-t TABLE] [-g GWIF] [-n NETWORK] [-c CYCLES]
 *	    [-j THREADS] [-L P50_LIMIT_MS] [-R]
 *
 * -R skips the launcher.rootfs run; -L 0 only reports the latency.
 *
 * Uses its own interface prefix, nft table, gateway interface and address
 * range, so it never meets a real gateway; installs the host guards before
 * the first sandbox; sends packets only over loopback and its own veths
 * (the "outside" destinations are redirected to its stand-in listeners
 * before routing). Prints TAP lines; exit 0 all passed, 1 a check failed,
 * 77 cannot run here (not root, no nft), 99 setup error.
 *
 * Host fixtures: a config directory under /etc (masked as a directory by
 * the launcher opts), a second directory with a secret file and a unix
 * socket (masked one by one through the create request) next to a public
 * file, a state directory under /tmp, an abstract unix socket, TCP
 * services on 0.0.0.0 and 127.0.0.1 and a UDP service on 0.0.0.0; and the
 * stand-ins for the transparent listener and DNS stub on the gateway
 * address, bound right after host setup (before any sandbox exists).
 */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netfilter_ipv4.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/launcher.h"
#include "launcher/lnc_internal.h"
#include "util/log.h"

#define PEM_MARK	"LNCTESTMARKERxyzzy"
#define SECRET_MARK	"lnctest-secret-value-0xdeadbeef"

static const char *o_prefix = "lt1-";
static const char *o_table = "airlock_lt1";
static const char *o_gwif = "lt1gw";
static const char *o_network = "10.231.0.0/16";
static const char *o_rootfs_prefix = "lt2-";
static int	   o_cycles = 200;
static int	   o_threads = 4;
static int	   o_rootfs = 1;
static double	   o_limit_ms = 10.0;	/* create p50; 0 = report */

static int	   ntest, nfail;
static char	   cgdir[128] = "";	/* cgroup2 parent, or "" */

static char	   fixdir[64] = "", fixdir2[64] = "", statedir[64] = "";
static char	   rootfsdir[64] = "";
static char	   gw_s[INET_ADDRSTRLEN];
static in_addr_t   net_base;		/* host order */
static uint16_t	   tport, dport, svc_port, lo_port, udp_port;
static char	   abstract_name[64];

static char *const envp[] = {
	"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" LNC_HOME,
	"LANG=C.UTF-8", "USER=nobody", NULL,
};

static void __attribute__((format(printf, 2, 3)))
ok(int cond, const char *fmt, ...)
{
	va_list	ap;

	ntest++;
	if (!cond)
		nfail++;
	printf("%sok %d - ", cond ? "" : "not ", ntest);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void __attribute__((format(printf, 1, 2), noreturn))
die(const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "lnctest: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(99);
}

static uint64_t
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- host fixtures: services and stand-ins -------------------------- */

struct events {
	pthread_mutex_t	 mtx;
	int		 tl_conns;
	char		 tl_last_orig[64];
	char		 tl_last_peer[64];
	char		 tl_peers[4096];	/* every peer */
	int		 dns_queries;
	char		 dns_peers[1024];
	int		 svc_conns, lo_conns, udp_pkts, unix_conns;
} ev = { .mtx = PTHREAD_MUTEX_INITIALIZER };

static int	tl_fd = -1, dns_fd = -1, svc_fd = -1, lo_fd = -1, udp_fd = -1;
static int	unix_fd = -1, abs_fd = -1;
static int	stop_pipe[2];

static int
tcp_listen(in_addr_t a, uint16_t port, uint16_t *got)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof(sin);
	int			fd, one = 1;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = a;
	sin.sin_port = htons(port);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(fd, 64) == -1) {
		close(fd);
		return -1;
	}
	getsockname(fd, (struct sockaddr *)&sin, &len);
	if (got != NULL)
		*got = ntohs(sin.sin_port);
	return fd;
}

static int
udp_bind(in_addr_t a, uint16_t port, uint16_t *got)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof(sin);
	int			fd;

	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		die("socket: %s", strerror(errno));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = a;
	sin.sin_port = htons(port);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
		close(fd);
		return -1;
	}
	getsockname(fd, (struct sockaddr *)&sin, &len);
	if (got != NULL)
		*got = ntohs(sin.sin_port);
	return fd;
}

static int
unix_listen(const char *path, int abstract)
{
	struct sockaddr_un	sun;
	socklen_t		len;
	int			fd;

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		die("socket: %s", strerror(errno));
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (abstract) {
		memcpy(sun.sun_path + 1, path, strlen(path));
		len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(path);
	} else {
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
		len = sizeof(sun);
	}
	if (bind(fd, (struct sockaddr *)&sun, len) == -1 ||
	    listen(fd, 8) == -1)
		die("unix socket %s: %s", path, strerror(errno));
	return fd;
}

static uint16_t
free_port(void)
{
	uint16_t	p;
	int		fd = tcp_listen(htonl(INADDR_LOOPBACK), 0, &p);
	int		u = udp_bind(htonl(INADDR_LOOPBACK), p, NULL);

	/* free for both TCP and UDP, for the DNS stand-in */
	close(fd);
	if (u == -1)
		return free_port();
	close(u);
	return p;
}

static void
fmt_sin(const struct sockaddr_in *sin, char *buf, size_t bufsz)
{
	char	a[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &sin->sin_addr, a, sizeof(a));
	snprintf(buf, bufsz, "%s:%u", a, ntohs(sin->sin_port));
}

static void *
events_thread(void *arg)
{
	struct pollfd		pfd[8];
	struct sockaddr_in	peer, orig;
	socklen_t		len;
	char			buf[512], ps[64], os[64];
	int			n, i, c;

	for (;;) {
		int	fds[] = { stop_pipe[0], tl_fd, dns_fd, svc_fd, lo_fd,
		    udp_fd, unix_fd, abs_fd };

		for (n = 0; n < 8; n++) {
			pfd[n].fd = fds[n];
			pfd[n].events = POLLIN;
			pfd[n].revents = 0;
		}
		if (poll(pfd, n, -1) == -1)
			continue;
		if (pfd[0].revents)
			return NULL;
		for (i = 1; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			pthread_mutex_lock(&ev.mtx);
			if (pfd[i].fd == tl_fd) {
				len = sizeof(peer);
				c = accept4(tl_fd, (struct sockaddr *)&peer,
				    &len, SOCK_CLOEXEC);
				if (c != -1) {
					len = sizeof(orig);
					memset(&orig, 0, sizeof(orig));
					(void)getsockopt(c, SOL_IP,
					    SO_ORIGINAL_DST, &orig, &len);
					fmt_sin(&peer, ps, sizeof(ps));
					fmt_sin(&orig, os, sizeof(os));
					ev.tl_conns++;
					snprintf(ev.tl_last_orig,
					    sizeof(ev.tl_last_orig), "%s", os);
					snprintf(ev.tl_last_peer,
					    sizeof(ev.tl_last_peer), "%s", ps);
					if (strlen(ev.tl_peers) + strlen(ps) +
					    2 < sizeof(ev.tl_peers)) {
						strcat(ev.tl_peers, ps);
						strcat(ev.tl_peers, " ");
					}
					snprintf(buf, sizeof(buf),
					    "TPROXY %s\n", os);
					(void)!write(c, buf, strlen(buf));
					close(c);
				}
			} else if (pfd[i].fd == dns_fd) {
				len = sizeof(peer);
				if (recvfrom(dns_fd, buf, sizeof(buf), 0,
				    (struct sockaddr *)&peer, &len) >= 0) {
					ev.dns_queries++;
					fmt_sin(&peer, ps, sizeof(ps));
					if (strlen(ev.dns_peers) + strlen(ps) +
					    2 < sizeof(ev.dns_peers)) {
						strcat(ev.dns_peers, ps);
						strcat(ev.dns_peers, " ");
					}
					(void)sendto(dns_fd, "DNS\n", 4, 0,
					    (struct sockaddr *)&peer, len);
				}
			} else if (pfd[i].fd == udp_fd) {
				if (recv(udp_fd, buf, sizeof(buf), 0) >= 0)
					ev.udp_pkts++;
			} else {
				c = accept4(pfd[i].fd, NULL, NULL,
				    SOCK_CLOEXEC);
				if (c != -1) {
					if (pfd[i].fd == svc_fd)
						ev.svc_conns++;
					else if (pfd[i].fd == lo_fd)
						ev.lo_conns++;
					else
						ev.unix_conns++;
					(void)!write(c, "HOSTSVC\n", 8);
					close(c);
				}
			}
			pthread_mutex_unlock(&ev.mtx);
		}
	}
}

static void
write_text(const char *path, const char *text, mode_t mode)
{
	int	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	if (fd == -1 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die("%s: %s", path, strerror(errno));
	close(fd);
}

static void
rm_rf(const char *dir)
{
	char	cmd[256];

	if (dir[0] != '/' || strlen(dir) < 8)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)!system(cmd);
}

static void
cleanup(void)
{
	if (fixdir[0])
		rm_rf(fixdir);
	if (fixdir2[0])
		rm_rf(fixdir2);
	if (statedir[0])
		rm_rf(statedir);
	if (rootfsdir[0])
		rm_rf(rootfsdir);
}

static void
on_signal(int sig)
{
	cleanup();
	_exit(99);
}

static void
fixtures(void)
{
	char	path[128];

	snprintf(fixdir, sizeof(fixdir), "/etc/airlock-lnctest.XXXXXX");
	snprintf(fixdir2, sizeof(fixdir2), "/etc/airlock-lnctest2.XXXXXX");
	snprintf(statedir, sizeof(statedir), "/tmp/airlock-lnctest-st.XXXXXX");
	if (mkdtemp(fixdir) == NULL || mkdtemp(fixdir2) == NULL ||
	    mkdtemp(statedir) == NULL)
		die("mkdtemp: %s", strerror(errno));
	chmod(fixdir2, 0755);
	snprintf(path, sizeof(path), "%s/airlock.yaml", fixdir);
	write_text(path, "# " SECRET_MARK "\n", 0644);
	snprintf(path, sizeof(path), "%s/secret.key", fixdir2);
	write_text(path, SECRET_MARK "\n", 0644);
	snprintf(path, sizeof(path), "%s/public.txt", fixdir2);
	write_text(path, "public\n", 0644);
	snprintf(path, sizeof(path), "%s/ledger", statedir);
	write_text(path, SECRET_MARK "\n", 0644);
	snprintf(path, sizeof(path), "%s/admin.sock", fixdir2);
	unix_fd = unix_listen(path, 0);
	chmod(path, 0666);
	snprintf(abstract_name, sizeof(abstract_name), "lnctest-%d",
	    (int)getpid());
	abs_fd = unix_listen(abstract_name, 1);

	svc_fd = tcp_listen(htonl(INADDR_ANY), 0, &svc_port);
	lo_fd = tcp_listen(htonl(INADDR_LOOPBACK), 0, &lo_port);
	udp_fd = udp_bind(htonl(INADDR_ANY), 0, &udp_port);
	if (svc_fd == -1 || lo_fd == -1 || udp_fd == -1)
		die("host services");
	tport = free_port();
	dport = free_port();
}

static pthread_t	evt;
static int		evt_up;

static void
events_stop(void)
{
	if (!evt_up)
		return;
	(void)!write(stop_pipe[1], "x", 1);
	pthread_join(evt, NULL);
	evt_up = 0;
}

/* ---- running things inside ---------------------------------------- */

/* Run argv in the sandbox as uid:gid; its stdout into <out>. */
static int
run_in(const struct lnc_sandbox *sb, uid_t uid, char *const argv[],
    char *out, size_t outsz)
{
	int	mfd, saved, rc;
	ssize_t	n;

	fflush(stdout);
	if ((mfd = memfd_create("lnctest-out", MFD_CLOEXEC)) == -1)
		die("memfd_create: %s", strerror(errno));
	saved = dup(1);
	dup2(mfd, 1);
	rc = launcher_enter_exec(sb->ls_init_pid, uid, uid, argv, envp);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	n = pread(mfd, out, outsz - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(mfd);
	return rc;
}

static int
sh_in(const struct lnc_sandbox *sb, const char *script, char *out,
    size_t outsz)
{
	char *const argv[] = { "/bin/sh", "-c", (char *)script, NULL };

	return run_in(sb, 65534, argv, out, outsz);
}

/* Value of "key=..." on its own line in <out> (first line), or "". */
static const char *
kv(const char *out, const char *key)
{
	static char	val[4][512];
	static int	slot;
	const char	*p = out, *e;
	size_t		 klen = strlen(key);
	char		*v = val[slot++ % 4];

	v[0] = '\0';
	while (p != NULL && *p != '\0') {
		e = strchr(p, '\n');
		if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
			size_t n = (e ? (size_t)(e - p) : strlen(p)) - klen - 1;

			if (n >= 512)
				n = 511;
			memcpy(v, p + klen + 1, n);
			v[n] = '\0';
			return v;
		}
		p = e ? e + 1 : NULL;
	}
	return v;
}

static const char probe_fs[] =
    "echo uid=$(id -u); echo gid=$(id -g); echo groups=$(id -G);"
    "echo host=$(cat /proc/sys/kernel/hostname);"
    "echo capeff=$(grep CapEff /proc/self/status | cut -f2);"
    "echo capprm=$(grep CapPrm /proc/self/status | cut -f2);"
    "echo capbnd=$(grep CapBnd /proc/self/status | cut -f2);"
    "echo capamb=$(grep CapAmb /proc/self/status | cut -f2);"
    "echo nnp=$(grep NoNewPrivs /proc/self/status | cut -f2);"
    "echo ifs=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' "
    "| sort | tr '\\n' ,);"
    "echo routes=$(tail -n +2 /proc/net/route | "
    "awk '{print $1\"/\"$2\"/\"$3\"/\"$8}' | tr '\\n' ' ');"
    "echo v6all=$(cat /proc/sys/net/ipv6/conf/all/disable_ipv6);"
    "echo v6eth=$(cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6);"
    "echo v6addrs=$(wc -l < /proc/net/if_inet6);"
    "echo resolv=$(cat /etc/resolv.conf);"
    "echo bundle_mark=$(grep -c " PEM_MARK " " LNC_CA_BUNDLE ");"
    "echo bundle_certs=$(grep -c 'BEGIN CERTIFICATE' " LNC_CA_BUNDLE ");"
    "echo sys_mark=$(grep -c " PEM_MARK " /etc/ssl/certs/ca-certificates.crt);"
    "echo root_entries=$(ls -A / | tr '\\n' ,);"
    "echo hostroot=$(ls -A /root 2>&1 | head -1);"
    "echo work=$(test -e /work && echo visible || echo absent);"
    "echo state=$(test -e \"$STATE\" && echo visible || echo absent);"
    "echo conf_ls=$(ls -A \"$FIX\" 2>&1 | tr '\\n' ,);"
    "echo conf_cat=$(cat \"$FIX/airlock.yaml\" 2>&1 | head -c 80);"
    "echo secret=$(cat \"$FIX2/secret.key\" 2>&1 | head -c 80);"
    "echo public=$(cat \"$FIX2/public.txt\" 2>&1);"
    "echo grep_secret=$(grep -rl " SECRET_MARK " /etc /tmp " LNC_HOME
    " 2>/dev/null | head -3 | tr '\\n' ,);"
    "echo pids=$(ls /proc | grep -c '^[0-9]');"
    "echo oldroot=$(cut -d' ' -f5 /proc/self/mountinfo | grep -c "
    "'^/oldroot\\|^/newroot');"
    "echo w_root=$(touch /x 2>/dev/null && echo yes || echo no);"
    "echo w_etc=$(touch /etc/x 2>/dev/null && echo yes || echo no);"
    "echo w_usr=$(touch /usr/x 2>/dev/null && echo yes || echo no);"
    "echo w_tmp=$(touch /tmp/x 2>/dev/null && echo yes || echo no);"
    "echo w_home=$(touch $HOME/x 2>/dev/null && echo yes || echo no);"
    "echo devs=$(ls /dev | tr '\\n' ,);"
    "echo suid=$(grep ' /usr ' /proc/self/mountinfo | grep -c nosuid);"
    "echo cwd=$(pwd);"
    "echo devuse=$(echo x > /dev/null && head -c 4 /dev/urandom | wc -c)"
    "$(touch /dev/shm/x && echo shm)"
    "$(python3 -c 'import os; os.openpty(); print(\"pty\")');"
    "echo cgroup=$(grep '^0::' /proc/self/cgroup);"
    "echo env=$(env | cut -d= -f1 | sort | tr '\\n' ,)";

static const char probe_net[] =
    "import socket, sys\n"
    "gw, svc, lo, udp, tp, fix2, absn = sys.argv[1], int(sys.argv[2]), "
    "int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], "
    "sys.argv[7]\n"
    "def tcp(host, port):\n"
    "    s = socket.socket(); s.settimeout(1.5)\n"
    "    try:\n"
    "        s.connect((host, port)); d = s.recv(100).decode().strip()\n"
    "        return 'got:' + d.replace(' ', '_')\n"
    "    except Exception as e: return 'err:' + type(e).__name__\n"
    "    finally: s.close()\n"
    "def uni(path):\n"
    "    s = socket.socket(socket.AF_UNIX); s.settimeout(1)\n"
    "    try: s.connect(path); return 'connected'\n"
    "    except Exception as e: return 'err:' + type(e).__name__\n"
    "def udpq(host, port):\n"
    "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
    "s.settimeout(0.5)\n"
    "    try:\n"
    "        s.sendto(b'q', (host, port)); d, a = s.recvfrom(100)\n"
    "        return 'got:' + d.decode().strip() + '@' + a[0] + ':' + "
    "str(a[1])\n"
    "    except Exception as e: return 'err:' + type(e).__name__\n"
    "print('lo=' + tcp('127.0.0.1', lo))\n"
    "print('gw_svc=' + tcp(gw, svc))\n"
    "print('gw_tp=' + tcp(gw, tp))\n"
    "print('out443=' + tcp('198.51.100.7', 443))\n"
    "print('out22=' + tcp('198.51.100.7', 22))\n"
    "print('dns=' + udpq('198.51.100.7', 53))\n"
    "print('udp_svc=' + udpq(gw, udp))\n"
    "print('udp_out=' + udpq('198.51.100.7', 9))\n"
    "print('unix=' + uni(fix2 + '/admin.sock'))\n"
    "print('abstract=' + uni('\\0' + absn))\n"
    "try:\n"
    "    s6 = socket.socket(socket.AF_INET6); s6.settimeout(0.5); "
    "s6.connect(('::1', lo)); print('v6=connected')\n"
    "except Exception as e: print('v6=err:' + type(e).__name__)\n";

static void
check_inside(const struct lnc_sandbox *sb)
{
	char		 out[16384], script[sizeof(probe_fs) + 512];
	char		 addr[32];
	char		 gwhex[16], exp[256], ports[5][8], path_buf[64];
	uint32_t	 gwn;
	int		 rc;

	snprintf(script, sizeof(script), "STATE=%s FIX=%s FIX2=%s; %s",
	    statedir, fixdir, fixdir2, probe_fs);
	rc = sh_in(sb, script, out, sizeof(out));
	ok(rc == 0, "filesystem probe ran (exit %d)", rc);
	if (getenv("LNCTEST_VERBOSE"))
		fprintf(stderr, "%s", out);
	ok(strcmp(kv(out, "uid"), "65534") == 0 &&
	    strcmp(kv(out, "gid"), "65534") == 0 &&
	    strcmp(kv(out, "groups"), "65534") == 0,
	    "runs as 65534:65534, no other group (%s %s %s)", kv(out, "uid"),
	    kv(out, "gid"), kv(out, "groups"));
	ok(strcmp(kv(out, "host"), sb->ls_id) == 0, "hostname is the id (%s)",
	    kv(out, "host"));
	ok(strcmp(kv(out, "capeff"), "0000000000000000") == 0 &&
	    strcmp(kv(out, "capprm"), "0000000000000000") == 0 &&
	    strcmp(kv(out, "capbnd"), "0000000000000000") == 0 &&
	    strcmp(kv(out, "capamb"), "0000000000000000") == 0,
	    "no capabilities (eff %s bnd %s)", kv(out, "capeff"),
	    kv(out, "capbnd"));
	ok(strcmp(kv(out, "nnp"), "1") == 0, "NoNewPrivs 1");
	ok(strcmp(kv(out, "ifs"), "eth0,lo,") == 0, "only eth0 and lo (%s)",
	    kv(out, "ifs"));
	memcpy(&gwn, sb->ls_gateway.na_bytes, 4);
	snprintf(gwhex, sizeof(gwhex), "%08X", gwn);
	snprintf(exp, sizeof(exp), "eth0/00000000/%s/00000000", gwhex);
	ok(strcmp(kv(out, "routes"), exp) == 0,
	    "one route: default via the gateway (%s)", kv(out, "routes"));
	ok(strcmp(kv(out, "v6all"), "1") == 0 &&
	    strcmp(kv(out, "v6eth"), "1") == 0 &&
	    strcmp(kv(out, "v6addrs"), "0") == 0, "IPv6 off");
	snprintf(exp, sizeof(exp), "nameserver %s", gw_s);
	ok(strcmp(kv(out, "resolv"), exp) == 0, "resolv.conf names the "
	    "gateway (%s)", kv(out, "resolv"));
	ok(strcmp(kv(out, "bundle_mark"), "1") == 0 &&
	    atoi(kv(out, "bundle_certs")) > 10 &&
	    strcmp(kv(out, "sys_mark"), "1") == 0,
	    "CA bundle: system CAs + the sandbox CA, also as the system "
	    "bundle (%s certs)", kv(out, "bundle_certs"));
	ok(strstr(kv(out, "root_entries"), "work") == NULL &&
	    strstr(kv(out, "root_entries"), "root,") == NULL &&
	    strcmp(kv(out, "work"), "absent") == 0 &&
	    strstr(kv(out, "hostroot"), "No such file") != NULL,
	    "/ is not the host's (%s)", kv(out, "root_entries"));
	ok(strcmp(kv(out, "state"), "absent") == 0, "state_dir unreachable");
	/* masked: empty, or (under /etc) absent */
	ok((strcmp(kv(out, "conf_ls"), "") == 0 ||
	    strstr(kv(out, "conf_ls"), "No such file") != NULL) &&
	    strstr(kv(out, "conf_cat"), SECRET_MARK) == NULL,
	    "config directory masked (ls: '%s')", kv(out, "conf_ls"));
	ok(strstr(kv(out, "secret"), SECRET_MARK) == NULL &&
	    (strcmp(kv(out, "secret"), "") == 0 ||
	    strstr(kv(out, "secret"), "No such file") != NULL ||
	    strstr(kv(out, "secret"), "Permission denied") != NULL) &&
	    strcmp(kv(out, "public"), "public") == 0,
	    "secret file masked, its neighbour visible ('%s' / '%s')",
	    kv(out, "secret"), kv(out, "public"));
	ok(strcmp(kv(out, "grep_secret"), "") == 0,
	    "no readable file under /etc /tmp home holds the secret");
	ok(atoi(kv(out, "pids")) <= 6, "own PID namespace (%s pids)",
	    kv(out, "pids"));
	ok(strcmp(kv(out, "oldroot"), "0") == 0, "host mounts detached");
	ok(strcmp(kv(out, "w_root"), "no") == 0 &&
	    strcmp(kv(out, "w_etc"), "no") == 0 &&
	    strcmp(kv(out, "w_usr"), "no") == 0 &&
	    strcmp(kv(out, "w_tmp"), "yes") == 0 &&
	    strcmp(kv(out, "w_home"), "yes") == 0,
	    "writable: /tmp and home only");
	ok(strcmp(kv(out, "devs"),
	    "fd,full,mqueue,null,ptmx,pts,random,shm,stderr,stdin,stdout,"
	    "tty,urandom,zero,") == 0, "minimal /dev (%s)", kv(out, "devs"));
	ok(strcmp(kv(out, "cwd"), "/") == 0, "cwd /");
	ok(strcmp(kv(out, "devuse"), "4shmpty") == 0, "/dev/null, urandom, "
	    "/dev/shm and ptys work (%s)", kv(out, "devuse"));
	if (cgdir[0]) {
		char	line[256], want[160];
		FILE	*f;

		snprintf(path_buf, sizeof(path_buf), "/proc/%d/cgroup",
		    (int)sb->ls_init_pid);
		line[0] = '\0';
		if ((f = fopen(path_buf, "r")) != NULL) {
			while (fgets(line, sizeof(line), f) != NULL)
				if (strncmp(line, "0::", 3) == 0)
					break;
			fclose(f);
		}
		snprintf(want, sizeof(want), "/%s\n", sb->ls_id);
		ok(strlen(line) > strlen(want) && strcmp(line + strlen(line) -
		    strlen(want), want) == 0, "the init is in its own cgroup "
		    "(%.*s)", (int)strcspn(line, "\n"), line);
		ok(strcmp(kv(out, "cgroup"), "0::/") == 0, "the command joined "
		    "it, behind a cgroup namespace (%s)", kv(out, "cgroup"));
	}
	ok(strcmp(kv(out, "suid"), "1") == 0, "/usr is nosuid");
	ok(strcmp(kv(out, "env"), "HOME,LANG,PATH,PWD,USER,") == 0,
	    "exactly the given environment (%s)", kv(out, "env"));

	/* network */
	snprintf(ports[0], sizeof(ports[0]), "%u", svc_port);
	snprintf(ports[1], sizeof(ports[1]), "%u", lo_port);
	snprintf(ports[2], sizeof(ports[2]), "%u", udp_port);
	snprintf(ports[3], sizeof(ports[3]), "%u", tport);
	{
		char *const argv[] = { "python3", "-c", (char *)probe_net,
		    gw_s, ports[0], ports[1], ports[2], ports[3], fixdir2,
		    abstract_name, NULL };

		pthread_mutex_lock(&ev.mtx);
		ev.svc_conns = ev.lo_conns = ev.udp_pkts = ev.unix_conns = 0;
		ev.tl_conns = 0;
		ev.dns_queries = 0;
		pthread_mutex_unlock(&ev.mtx);
		rc = run_in(sb, 65534, argv, out, sizeof(out));
	}
	ok(rc == 0, "network probe ran (exit %d)", rc);
	if (getenv("LNCTEST_VERBOSE"))
		fprintf(stderr, "%s", out);
	net_addr_format(&sb->ls_addr, addr, sizeof(addr));
	ok(strncmp(kv(out, "lo"), "err:", 4) == 0,
	    "127.0.0.1 is the sandbox's own loopback (%s)", kv(out, "lo"));
	snprintf(exp, sizeof(exp), "got:TPROXY_%s:%u", gw_s, svc_port);
	ok(strcmp(kv(out, "gw_svc"), exp) == 0,
	    "gateway:%u (a host service on 0.0.0.0) lands on the transparent "
	    "listener instead (%s)", svc_port, kv(out, "gw_svc"));
	snprintf(exp, sizeof(exp), "got:TPROXY_198.51.100.7:443");
	ok(strcmp(kv(out, "out443"), exp) == 0,
	    "TCP to the outside is redirected with SO_ORIGINAL_DST (%s)",
	    kv(out, "out443"));
	ok(strcmp(kv(out, "out22"), "got:TPROXY_198.51.100.7:22") == 0,
	    "any TCP port too (%s)", kv(out, "out22"));
	ok(strcmp(kv(out, "dns"), "got:DNS@198.51.100.7:53") == 0,
	    "DNS to any address reaches the stub (%s)", kv(out, "dns"));
	ok(strncmp(kv(out, "udp_svc"), "err:", 4) == 0 &&
	    strncmp(kv(out, "udp_out"), "err:", 4) == 0,
	    "other UDP goes nowhere (%s, %s)", kv(out, "udp_svc"),
	    kv(out, "udp_out"));
	ok(strncmp(kv(out, "unix"), "err:", 4) == 0 &&
	    strncmp(kv(out, "abstract"), "err:", 4) == 0,
	    "host unix sockets unreachable (file %s, abstract %s)",
	    kv(out, "unix"), kv(out, "abstract"));
	ok(strncmp(kv(out, "v6"), "err:", 4) == 0, "no IPv6 (%s)",
	    kv(out, "v6"));
	pthread_mutex_lock(&ev.mtx);
	ok(ev.svc_conns == 0 && ev.lo_conns == 0 && ev.udp_pkts == 0 &&
	    ev.unix_conns == 0, "host services saw nothing (tcp %d, lo %d, "
	    "udp %d, unix %d)", ev.svc_conns, ev.lo_conns, ev.udp_pkts,
	    ev.unix_conns);
	snprintf(exp, sizeof(exp), "%s:", addr);
	ok(ev.tl_conns == 4 && strncmp(ev.tl_last_peer, exp,
	    strlen(exp)) == 0, "the transparent listener saw 4 connections "
	    "from %s (%d, last %s)", addr, ev.tl_conns, ev.tl_last_peer);
	pthread_mutex_unlock(&ev.mtx);
}

/*
 * Spoofing: as root in the sandbox's netns only (a test hook, not the
 * workload's view), add other /32s to eth0 and try to reach the gateway
 * with them as source. The host must never accept; the real address must.
 */
static int
spoof_try(in_addr_t src, uint16_t port, int udp)
{
	struct sockaddr_in	sin;
	struct pollfd		pfd;
	int			fd, err;
	socklen_t		len = sizeof(err);
	char			b[8];

	fd = socket(AF_INET, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK,
	    0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = src;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		return -2;
	inet_pton(AF_INET, gw_s, &sin.sin_addr);
	sin.sin_port = htons(port);
	if (udp) {
		(void)sendto(fd, "q", 1, 0, (struct sockaddr *)&sin,
		    sizeof(sin));
		pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
		err = poll(&pfd, 1, 400) == 1 && recv(fd, b, sizeof(b), 0) > 0;
		close(fd);
		return err;
	}
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
		close(fd);
		return 1;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&pfd, 1, 400) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err) {
		close(fd);
		return 0;
	}
	close(fd);
	return 1;
}

/* The only child of <pid>, or -1. */
static pid_t
child_pid(pid_t pid)
{
	char	path[64], buf[64];
	FILE	*f;
	int	c = -1;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
	    (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(buf, sizeof(buf), f) != NULL)
		c = atoi(buf);
	fclose(f);
	return c > 0 ? c : -1;
}

/*
 * Signals reach the workload, which has a session of its own: SIGTERM
 * sent to the caller is forwarded, and SIGINT to the entering child (as a
 * terminal's Ctrl-C would be) too.
 */
static void
check_signals(const struct lnc_sandbox *sb)
{
	char *const	 argv[] = { "/bin/sh", "-c", "sleep 10", NULL };
	int		 sig, st, i;
	pid_t		 caller, a;
	uint64_t	 t0;

	for (i = 0; i < 2; i++) {
		sig = i == 0 ? SIGTERM : SIGINT;
		if ((caller = fork()) == 0)
			_exit(launcher_enter_exec(sb->ls_init_pid, 65534,
			    65534, argv, envp));
		a = -1;
		t0 = now_us();
		/* wait until the workload runs: the entering child has a
		 * child of its own */
		while (now_us() - t0 < 3000000) {
			if ((a = child_pid(caller)) > 0 && child_pid(a) > 0)
				break;
			usleep(5000);
		}
		usleep(50000);
		kill(i == 0 ? caller : a, sig);
		t0 = now_us();
		waitpid(caller, &st, 0);
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 128 + sig &&
		    now_us() - t0 < 2000000, "%s to the %s reaches the "
		    "workload (exit %d)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
		    i == 0 ? "caller" : "entering child",
		    WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
}

/*
 * With nothing on the transparent port, a connection from a sandbox to
 * the gateway's other ports or to the outside is refused; the host
 * services on 0.0.0.0 still see nothing (nothing waits in their queues).
 */
static void
check_listener_down(const struct lnc_sandbox *sb)
{
	static const char probe[] =
	    "import socket, sys\n"
	    "for h, p in ((sys.argv[1], int(sys.argv[2])), "
	    "('198.51.100.7', 443)):\n"
	    "    s = socket.socket(); s.settimeout(1.5)\n"
	    "    try: s.connect((h, p)); print('conn=connected')\n"
	    "    except Exception as e: print('conn=' + type(e).__name__)\n";
	char		 out[1024], port[8];
	struct pollfd	 pfd[2];
	int		 rc;

	events_stop();
	close(tl_fd);
	tl_fd = -1;
	snprintf(port, sizeof(port), "%u", svc_port);
	{
		char *const argv[] = { "python3", "-c", (char *)probe, gw_s,
		    port, NULL };

		rc = run_in(sb, 65534, argv, out, sizeof(out));
	}
	ok(rc == 0 && strstr(out, "connected") == NULL &&
	    strstr(out, "ConnectionRefusedError\nconn=ConnectionRefused") !=
	    NULL, "transparent listener down: gateway:%u and the outside are "
	    "refused", svc_port);
	pfd[0] = (struct pollfd){ .fd = svc_fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = udp_fd, .events = POLLIN };
	ok(poll(pfd, 2, 0) == 0, "and the host services saw nothing");
}

static void
check_spoof(const struct lnc_sandbox *s1, const struct lnc_sandbox *s2)
{
	in_addr_t	 real, other, unused;
	char		 path[64], other_s[32], peers[4096], dpeers[1024];
	int		 p[2], nsfd, st, res[5] = { -1, -1, -1, -1, -1 };
	pid_t		 pid;

	memcpy(&real, s1->ls_addr.na_bytes, 4);
	memcpy(&other, s2->ls_addr.na_bytes, 4);
	unused = htonl(net_base + 250);
	net_addr_format(&s2->ls_addr, other_s, sizeof(other_s));
	pthread_mutex_lock(&ev.mtx);
	ev.tl_peers[0] = '\0';
	ev.dns_peers[0] = '\0';
	pthread_mutex_unlock(&ev.mtx);

	if (pipe(p) == -1)
		die("pipe");
	if ((pid = fork()) == 0) {
		int	nl, eth;

		snprintf(path, sizeof(path), "/proc/%d/ns/net",
		    (int)s1->ls_init_pid);
		if ((nsfd = open(path, O_RDONLY)) == -1 ||
		    setns(nsfd, CLONE_NEWNET) == -1)
			_exit(2);
		if ((nl = lnc_nl_open()) == -1 ||
		    (eth = lnc_nl_link_index(nl, "eth0")) <= 0 ||
		    lnc_nl_addr_add(nl, eth, unused, 32) == -1 ||
		    lnc_nl_addr_add(nl, eth, other, 32) == -1)
			_exit(3);
		res[0] = spoof_try(real, tport, 0);
		res[1] = spoof_try(unused, tport, 0);
		res[2] = spoof_try(other, tport, 0);
		res[3] = spoof_try(unused, dport, 1);
		res[4] = spoof_try(other, dport, 1);
		(void)lnc_nl_addr_del(nl, eth, unused, 32);
		(void)lnc_nl_addr_del(nl, eth, other, 32);
		(void)!write(p[1], res, sizeof(res));
		_exit(0);
	}
	close(p[1]);
	waitpid(pid, &st, 0);
	if (read(p[0], res, sizeof(res)) != sizeof(res))
		res[0] = -1;
	close(p[0]);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "test hook: extra /32s added inside (status %d)", st);
	ok(res[0] == 1, "control: the sandbox's own address connects (%d)",
	    res[0]);
	ok(res[1] == 0, "spoofed source (an unused address) dropped (%d)",
	    res[1]);
	ok(res[2] == 0, "spoofed source (another sandbox's %s) dropped (%d)",
	    other_s, res[2]);
	ok(res[3] == 0 && res[4] == 0, "spoofed UDP to the DNS stub dropped "
	    "(%d %d)", res[3], res[4]);
	pthread_mutex_lock(&ev.mtx);
	snprintf(peers, sizeof(peers), "%s", ev.tl_peers);
	snprintf(dpeers, sizeof(dpeers), "%s", ev.dns_peers);
	pthread_mutex_unlock(&ev.mtx);
	snprintf(path, sizeof(path), "%s:", other_s);
	ok(strstr(peers, path) == NULL && strstr(peers, ".250:") == NULL &&
	    strstr(dpeers, path) == NULL && strstr(dpeers, ".250:") == NULL,
	    "the gateway never saw a spoofed source (tcp: %s; dns: %s)", peers,
	    dpeers);
}

/* ---- leak accounting ---------------------------------------------- */

struct census {
	int	links;		/* <prefix>* links */
	int	netns, mntns, pidns;	/* distinct, the launcher's tree */
	int	lnc_mounts;	/* lines in the launcher's mountinfo */
	int	host_mounts;
	int	children;	/* processes whose parent is the launcher */
	int	rules;
	int	cgroups;	/* -1 = no cgroup v2 */
	int	fds;		/* the launcher's open fds */
};

static int
count_lines(const char *path)
{
	FILE	*f = fopen(path, "re");
	int	 c, n = 0;

	if (f == NULL)
		return -1;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Entries of <path> (only directories with <dirs>). */
static int
count_dir(const char *path, int dirs)
{
	DIR		*d = opendir(path);
	struct dirent	*de;
	int		 n = 0;

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.' && (!dirs || de->d_type == DT_DIR))
			n++;
	closedir(d);
	return n;
}

/* The parent of <pid>, or -1. */
static pid_t
parent_of(pid_t pid)
{
	char	path[64], buf[512], *p;
	int	fd;
	ssize_t	len;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY)) == -1)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	return (pid_t)atoi(p + 4);	/* ") S PPID" */
}

/* Is <pid> <root> or below it? */
static int
descends_from(pid_t pid, pid_t root)
{
	int	depth;

	for (depth = 0; pid > 1 && depth < 64; depth++) {
		if (pid == root)
			return 1;
		pid = parent_of(pid);
	}
	return 0;
}

/*
 * Distinct namespaces of <type> held by the launcher <root> and the
 * processes below it (its sandboxes): other tests that make namespaces
 * at the same time (make -j check) do not count.
 */
static int
distinct_ns(const char *type, pid_t root)
{
	DIR		*d = opendir("/proc");
	struct dirent	*de;
	char		 path[300], link[64];
	static char	 seen[4096][64];
	int		 n = 0, i;
	ssize_t		 len;

	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if (!descends_from((pid_t)atoi(de->d_name), root))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/%s", de->d_name,
		    type);
		if ((len = readlink(path, link, sizeof(link) - 1)) <= 0)
			continue;
		link[len] = '\0';
		for (i = 0; i < n; i++)
			if (strcmp(seen[i], link) == 0)
				break;
		if (i == n && n < 4096)
			snprintf(seen[n++], sizeof(seen[0]), "%s", link);
	}
	closedir(d);
	return n;
}

static int
children_of(pid_t ppid)
{
	DIR		*d = opendir("/proc");
	struct dirent	*de;
	char		 path[300], buf[512], *p;
	int		 n = 0, fd;
	ssize_t		 len;

	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		if ((fd = open(path, O_RDONLY)) == -1)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		if ((p = strrchr(buf, ')')) == NULL)
			continue;
		/* ") S PPID" */
		if (atoi(p + 4) == (int)ppid)
			n++;
	}
	closedir(d);
	return n;
}

static int
count_links(const char *prefix)
{
	struct if_nameindex	*ifs = if_nameindex(), *i;
	int			 n = 0;

	for (i = ifs; i != NULL && i->if_index != 0; i++)
		if (strncmp(i->if_name, prefix, strlen(prefix)) == 0)
			n++;
	if (ifs != NULL)
		if_freenameindex(ifs);
	return n;
}

static int
count_rules(const char *table)
{
	char	cmd[160], line[512];
	FILE	*f;
	int	n = 0;

	snprintf(cmd, sizeof(cmd), "nft -a list table inet %s 2>/dev/null",
	    table);
	if ((f = popen(cmd, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "# handle") != NULL &&
		    strstr(line, "chain ") == NULL &&
		    strstr(line, "table ") == NULL)
			n++;
	if (pclose(f) != 0)
		return -1;
	return n;
}

static void
census_take(struct census *c, pid_t lpid)
{
	char	path[64];

	c->links = count_links(o_prefix);
	c->netns = distinct_ns("net", lpid);
	c->mntns = distinct_ns("mnt", lpid);
	c->pidns = distinct_ns("pid", lpid);
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)lpid);
	c->lnc_mounts = count_lines(path);
	c->host_mounts = count_lines("/proc/self/mountinfo");
	c->children = children_of(lpid);
	c->rules = count_rules(o_table);
	c->cgroups = cgdir[0] ? count_dir(cgdir, 1) : -1;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)lpid);
	c->fds = count_dir(path, 0);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double
pct(uint64_t *v, int n, int p)
{
	int	i = (n * p + 99) / 100 - 1;

	return v[i < 0 ? 0 : i] / 1000.0;
}

/* ---- the runs ------------------------------------------------------ */

static void
opts_for(struct launcher_opts *o, const char *prefix, const char *gwif)
{
	launcher_opts_init(o);
	if (net_cidr_parse(o_network, &o->lo_network) == -1)
		die("bad network %s", o_network);
	o->lo_prefix = prefix;
	o->lo_gwname = gwif;
	o->lo_table = o_table;
	o->lo_cgroup = cgdir[0] ? cgdir : "lnctest";
	o->lo_tport = tport;
	o->lo_dport = dport;
	o->lo_memory = 64ULL << 20;
	o->lo_pids = 128;
	o->lo_masks[0] = fixdir;
	o->lo_masks[1] = statedir;
	o->lo_title = "lnctest-launch";
}

static const char test_pem[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBszCCAVmgAwIBAgIU" PEM_MARK "AAAAAAAAAAAAAAAAAAAAAAAAAAAA\n"
    "-----END CERTIFICATE-----\n";

static void
req_for(struct lnc_create_req *r, const char *id)
{
	static char	m0[128], m1[128];

	memset(r, 0, sizeof(*r));
	r->cr_id = id;
	r->cr_ca_pem = test_pem;
	r->cr_ca_len = strlen(test_pem);
	snprintf(m0, sizeof(m0), "%s/secret.key", fixdir2);
	snprintf(m1, sizeof(m1), "%s/admin.sock", fixdir2);
	r->cr_masks[0] = m0;
	r->cr_masks[1] = m1;
}

struct thr {
	struct launcher	*t_lc;
	int		 t_n, t_i, t_fail;
};

static void *
churn(void *arg)
{
	struct thr		*t = arg;
	struct lnc_create_req	 r;
	struct lnc_sandbox	 sb;
	char			 id[32], why[160];
	int			 i;

	for (i = 0; i < t->t_n; i++) {
		snprintf(id, sizeof(id), "thr%d-%d", t->t_i, i);
		req_for(&r, id);
		if (launcher_create(t->t_lc, &r, &sb, why, sizeof(why)) == -1) {
			fprintf(stderr, "# %s: %s\n", id, why);
			t->t_fail++;
			continue;
		}
		if (launcher_destroy(t->t_lc, id) == -1)
			t->t_fail++;
	}
	return NULL;
}

static int __attribute__((format(printf, 1, 2)))
shell_ok(const char *fmt, ...)
{
	char	cmd[512];
	va_list	ap;
	int	st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return st == 0;
}

static int
host_clean(const char *prefix, const char *gwif)
{
	return count_links(prefix) == 0 && if_nametoindex(gwif) == 0 &&
	    !shell_ok("nft list table inet %s >/dev/null 2>&1", o_table) &&
	    !shell_ok("ip route show %s | grep -q .", o_network);
}

static void
main_run(void)
{
	struct launcher_opts	 o;
	struct launcher		*lc;
	struct lnc_create_req	 r;
	struct lnc_sandbox	 s1, s2, sb;
	struct census		 c0, c1;
	struct thr		 thr[16];
	pthread_t		 tid[16];
	uint64_t		*tc, *td, t0, t1;
	char			 why[256], id[32], a[32];
	struct in_addr		 gwa;
	int			 i, rc, fails = 0, nt;

	opts_for(&o, o_prefix, o_gwif);
	gwa.s_addr = htonl(net_base + 1);
	inet_ntop(AF_INET, &gwa, gw_s, sizeof(gw_s));

	/* before any thread: the launcher is a fork of this process */
	if ((lc = launcher_spawn(&o)) == NULL)
		die("launcher_spawn failed");
	ok(launcher_ping(lc) == 0, "launcher answers PING");
	rc = launcher_setup_host(lc, why, sizeof(why));
	ok(rc == 0, "host setup (%s)", rc ? why : "ok");
	if (rc != 0)
		return;
	rc = launcher_setup_host(lc, why, sizeof(why));
	ok(rc == 0, "host setup is idempotent (%s)", rc ? why : "ok");
	ok(shell_ok("nft list table inet %s >/dev/null", o_table),
	    "nft table %s installed", o_table);
	ok(shell_ok("ip route show type blackhole %s | grep -q .", o_network),
	    "blackhole route for %s", o_network);
	/* the gateway address is bindable before any sandbox exists */
	tl_fd = tcp_listen(gwa.s_addr, tport, NULL);
	dns_fd = udp_bind(gwa.s_addr, dport, NULL);
	ok(tl_fd != -1 && dns_fd != -1, "gateway address %s bindable before "
	    "any sandbox (%s)", gw_s, tl_fd != -1 ? "ok" : strerror(errno));
	if (tl_fd == -1 || dns_fd == -1)
		return;
	if (pipe(stop_pipe) == -1 ||
	    pthread_create(&evt, NULL, events_thread, NULL) != 0)
		die("events thread");
	evt_up = 1;

	/* a bad request changes nothing */
	memset(&r, 0, sizeof(r));
	r.cr_id = "bad/id";
	ok(launcher_create(lc, &r, &sb, why, sizeof(why)) == -1,
	    "bad id refused");
	ok(launcher_destroy(lc, "nosuch") == -1 && errno == ENOENT,
	    "unknown id on destroy: ENOENT");

	req_for(&r, "lnc-one");
	rc = launcher_create(lc, &r, &s1, why, sizeof(why));
	ok(rc == 0, "create lnc-one (%s)", rc ? why : "ok");
	if (rc != 0)
		goto out;
	net_addr_format(&s1.ls_addr, a, sizeof(a));
	printf("# lnc-one: %s %s init %d, %.2f ms in the launcher\n",
	    s1.ls_ifname, a, (int)s1.ls_init_pid, s1.ls_usec / 1000.0);
	ok(launcher_create(lc, &r, &sb, why, sizeof(why)) == -1 &&
	    errno == EEXIST, "duplicate id refused");
	ok(launcher_setup_host(lc, why, sizeof(why)) == 0 &&
	    if_nametoindex(s1.ls_ifname) != 0, "host setup again leaves "
	    "running sandboxes alone");
	req_for(&r, "lnc-two");
	rc = launcher_create(lc, &r, &s2, why, sizeof(why));
	ok(rc == 0, "create lnc-two (%s)", rc ? why : "ok");
	if (rc != 0)
		goto out;
	ok(memcmp(s1.ls_addr.na_bytes, s2.ls_addr.na_bytes, 4) != 0 &&
	    strcmp(s1.ls_ifname, s2.ls_ifname) != 0, "distinct addresses and "
	    "links");

	check_inside(&s1);
	check_spoof(&s1, &s2);
	check_listener_down(&s1);

	{
		char *const argv[] = { "/bin/sh", "-c", "exit 7", NULL };
		char *const argv2[] = { "/bin/sh", "-c", "kill -TERM $$",
		    NULL };
		char *const argv3[] = { "no-such-cmd", NULL };
		char	 out[256];

		ok(run_in(&s1, 65534, argv, out, sizeof(out)) == 7,
		    "exit status passes through");
		ok(run_in(&s1, 65534, argv2, out, sizeof(out)) == 128 + 15,
		    "death by signal: 128+N");
		ok(run_in(&s1, 65534, argv3, out, sizeof(out)) == 127,
		    "command not found: 127");
		ok(launcher_enter_exec(1, 65534, 65534, argv, envp) == -1,
		    "entering something that is not a sandbox init fails");
	}
	check_signals(&s1);

	ok(launcher_destroy(lc, "lnc-one") == 0 &&
	    launcher_destroy(lc, "lnc-two") == 0, "destroy both");
	t0 = now_us();
	while ((if_nametoindex(s1.ls_ifname) != 0 ||
	    if_nametoindex(s2.ls_ifname) != 0) && now_us() - t0 < 6000000)
		usleep(1000);
	ok(if_nametoindex(s1.ls_ifname) == 0 &&
	    if_nametoindex(s2.ls_ifname) == 0, "their links are gone (after "
	    "%.1f ms)", (now_us() - t0) / 1000.0);
	ok(kill(s1.ls_init_pid, 0) == -1 && kill(s2.ls_init_pid, 0) == -1,
	    "their inits are gone");

	/* two threads (or more) at once: the RPCs serialise */
	nt = o_threads > 16 ? 16 : o_threads;
	for (i = 0; i < nt; i++) {
		thr[i] = (struct thr){ .t_lc = lc, .t_n = 10, .t_i = i };
		pthread_create(&tid[i], NULL, churn, &thr[i]);
	}
	for (i = 0; i < nt; i++) {
		pthread_join(tid[i], NULL);
		fails += thr[i].t_fail;
	}
	ok(fails == 0, "%d threads x 10 create/destroy concurrently (%d "
	    "failed)", nt, fails);

	/* cycles: latency and leaks */
	t0 = now_us();
	while (count_links(o_prefix) > 0 && now_us() - t0 < 6000000)
		usleep(1000);
	census_take(&c0, launcher_pid(lc));
	tc = calloc(o_cycles, sizeof(*tc));
	td = calloc(o_cycles, sizeof(*td));
	fails = 0;
	for (i = 0; i < o_cycles; i++) {
		snprintf(id, sizeof(id), "cyc-%d", i);
		req_for(&r, id);
		t0 = now_us();
		if (launcher_create(lc, &r, &sb, why, sizeof(why)) == -1) {
			if (fails++ < 3)
				fprintf(stderr, "# %s: %s\n", id, why);
			continue;
		}
		t1 = now_us();
		if (launcher_destroy(lc, id) == -1)
			fails++;
		tc[i] = t1 - t0;
		td[i] = now_us() - t1;
	}
	/* the kernel removes the last links with their netns, in batches */
	t0 = now_us();
	while (count_links(o_prefix) > 0 && now_us() - t0 < 6000000)
		usleep(1000);
	printf("# last link gone %.1f ms after the last destroy\n",
	    (now_us() - t0) / 1000.0);
	census_take(&c1, launcher_pid(lc));
	ok(fails == 0, "%d create/destroy cycles (%d failed)", o_cycles,
	    fails);
	qsort(tc, o_cycles, sizeof(*tc), cmp_u64);
	qsort(td, o_cycles, sizeof(*td), cmp_u64);
	printf("# create (ready, through the RPC): p50 %.2f ms, p99 %.2f ms, "
	    "max %.2f ms\n", pct(tc, o_cycles, 50), pct(tc, o_cycles, 99),
	    tc[o_cycles - 1] / 1000.0);
	printf("# destroy: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
	    pct(td, o_cycles, 50), pct(td, o_cycles, 99),
	    td[o_cycles - 1] / 1000.0);
	if (o_limit_ms > 0)
		ok(pct(tc, o_cycles, 50) < o_limit_ms, "cold netns sandbox "
		    "ready p50 under %.0f ms (%.2f ms)", o_limit_ms,
		    pct(tc, o_cycles, 50));
	free(tc);
	free(td);
	ok(c1.links == 0 && c0.links == 0, "no link left (%d)", c1.links);
	ok(c1.netns == c0.netns && c1.mntns == c0.mntns &&
	    c1.pidns == c0.pidns, "no namespace left (net %d/%d, mnt %d/%d, "
	    "pid %d/%d)", c0.netns, c1.netns, c0.mntns, c1.mntns, c0.pidns,
	    c1.pidns);
	ok(c1.lnc_mounts == c0.lnc_mounts && c1.host_mounts == c0.host_mounts,
	    "no mount left (launcher %d/%d, host %d/%d)", c0.lnc_mounts,
	    c1.lnc_mounts, c0.host_mounts, c1.host_mounts);
	ok(c1.children == 0, "no process left (%d children)", c1.children);
	ok(c1.rules == c0.rules && c1.rules > 0, "no rule added or left "
	    "(%d/%d)", c0.rules, c1.rules);
	ok(c1.fds == c0.fds, "no fd left in the launcher (%d/%d)", c0.fds,
	    c1.fds);
	if (c1.cgroups == -1)
		printf("ok %d - # SKIP no cgroup2 hierarchy: no cgroups made\n",
		    ++ntest);
	else
		ok(c1.cgroups == 0, "no cgroup left (%d)", c1.cgroups);

 out:
	/* EOF: the launcher destroys what is left and removes the setup */
	req_for(&r, "left-behind");
	rc = launcher_create(lc, &r, &sb, why, sizeof(why));
	ok(rc == 0, "one more sandbox, left for launcher_close");
	launcher_close(lc);
	ok(host_clean(o_prefix, o_gwif), "launcher_close: table, route, "
	    "links and gateway interface removed");
	ok(rc != 0 || kill(sb.ls_init_pid, 0) == -1, "its init is gone");
	events_stop();
	if (tl_fd != -1)
		close(tl_fd);
	close(dns_fd);
	tl_fd = dns_fd = -1;
}

/* The gateway dies (SIGKILL): the launcher cleans up on EOF and exits. */
static void
gateway_death_run(void)
{
	struct launcher_opts	 o;
	int			 p[2], st;
	pid_t			 g, lpid;
	struct {
		pid_t	lpid, init;
		int	ok;
	} info = { 0, 0, 0 };

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (pipe(p) == -1)
		die("pipe");
	if ((g = fork()) == 0) {
		struct launcher		*lc;
		struct lnc_create_req	 r;
		struct lnc_sandbox	 sb;
		char			 why[160];

		close(p[0]);
		opts_for(&o, o_prefix, o_gwif);
		if ((lc = launcher_spawn(&o)) != NULL &&
		    launcher_setup_host(lc, why, sizeof(why)) == 0) {
			req_for(&r, "orphan");
			if (launcher_create(lc, &r, &sb, why,
			    sizeof(why)) == 0) {
				info.lpid = launcher_pid(lc);
				info.init = sb.ls_init_pid;
				info.ok = 1;
			}
		}
		(void)!write(p[1], &info, sizeof(info));
		raise(SIGKILL);
	}
	close(p[1]);
	if (read(p[0], &info, sizeof(info)) != sizeof(info))
		info.ok = 0;
	close(p[0]);
	waitpid(g, &st, 0);
	ok(info.ok, "a gateway with a sandbox, then SIGKILL");
	if (!info.ok)
		return;
	lpid = info.lpid;
	/* reparented to us (subreaper) */
	ok(waitpid(lpid, &st, 0) == lpid && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0, "the launcher exits on EOF (status %d)", st);
	ok(host_clean(o_prefix, o_gwif) && kill(info.init, 0) == -1,
	    "and leaves nothing behind");
}

/* launcher.rootfs DIR: a tiny tree (sh and its libraries) as the lower. */
static void
rootfs_run(void)
{
	struct launcher_opts	 o;
	struct launcher		*lc;
	struct lnc_create_req	 r;
	struct lnc_sandbox	 sb;
	char			 why[256], out[4096], cmd[512];
	int			 rc;

	snprintf(rootfsdir, sizeof(rootfsdir),
	    "/tmp/airlock-lnctest-rf.XXXXXX");
	if (mkdtemp(rootfsdir) == NULL)
		die("mkdtemp");
	chmod(rootfsdir, 0755);
	snprintf(cmd, sizeof(cmd),
	    "set -e; cd %s; mkdir -p bin etc/ssl/certs tmp;"
	    " cp /bin/dash bin/sh;"
	    " for l in $(ldd /bin/dash | grep -o '/[^ ]*'); do"
	    " mkdir -p .$(dirname $l); cp $l .$l; done;"
	    " echo rootfs-file > etc/marker", rootfsdir);
	if (!shell_ok("%s", cmd)) {
		printf("ok %d - # SKIP could not build a rootfs\n", ++ntest);
		return;
	}
	opts_for(&o, o_rootfs_prefix, o_gwif);
	o.lo_rootfs = rootfsdir;
	o.lo_masks[0] = NULL;
	if ((lc = launcher_spawn(&o)) == NULL)
		die("launcher_spawn");
	rc = launcher_setup_host(lc, why, sizeof(why));
	ok(rc == 0, "rootfs: host setup (%s)", rc ? why : "ok");
	req_for(&r, "rootfs-one");
	r.cr_masks[0] = NULL;
	rc = launcher_create(lc, &r, &sb, why, sizeof(why));
	ok(rc == 0, "rootfs: create (%s)", rc ? why : "ok");
	if (rc == 0) {
		rc = sh_in(&sb, "read a < /etc/marker; echo marker=$a;"
		    " read n < /etc/resolv.conf; echo resolv=$n;"
		    " while read l; do case $l in *" PEM_MARK "*) echo pem=1;;"
		    " esac; done < " LNC_CA_BUNDLE ";"
		    " echo x > /tmp/t && echo tmp=ok;"
		    " (echo x >/etc/marker) 2>/dev/null && echo etc=writable ||"
		    " echo etc=ro;"
		    " test -e /usr/bin/id && echo usr=host || echo usr=none",
		    out, sizeof(out));
		ok(rc == 0 && strcmp(kv(out, "marker"), "rootfs-file") == 0 &&
		    strcmp(kv(out, "usr"), "none") == 0,
		    "rootfs: the DIR is /, not the host (%s, %s)",
		    kv(out, "marker"), kv(out, "usr"));
		snprintf(cmd, sizeof(cmd), "nameserver %s", gw_s);
		ok(strcmp(kv(out, "resolv"), cmd) == 0 &&
		    strcmp(kv(out, "pem"), "1") == 0 &&
		    strcmp(kv(out, "tmp"), "ok") == 0,
		    "rootfs: resolv.conf, CA bundle, /tmp");
		ok(shell_ok("grep -q rootfs-file %s/etc/marker && "
		    "test ! -e %s/etc/resolv.conf", rootfsdir, rootfsdir),
		    "rootfs: the lower layer is untouched");
		ok(launcher_destroy(lc, "rootfs-one") == 0, "rootfs: destroy");
	}
	ok(launcher_teardown_host(lc, why, sizeof(why)) == 0,
	    "TEARDOWN_HOST");
	ok(host_clean(o_rootfs_prefix, o_gwif), "TEARDOWN_HOST removes it all");
	req_for(&r, "rootfs-two");
	r.cr_masks[0] = NULL;
	ok(launcher_setup_host(lc, why, sizeof(why)) == 0 &&
	    launcher_create(lc, &r, &sb, why, sizeof(why)) == 0 &&
	    launcher_destroy(lc, "rootfs-two") == 0,
	    "set up again after a teardown, sandboxes work");
	launcher_close(lc);
	ok(host_clean(o_rootfs_prefix, o_gwif), "closed cleanly");
}

/*
 * The launcher's side of the protocol, fed by hand: every malformed
 * datagram is answered EINVAL, nothing happens, and it keeps answering.
 */
static int
raw_call(int fd, const void *msg, size_t len, struct lnc_m_reply *r)
{
	struct pollfd	pfd = { .fd = fd, .events = POLLIN };

	if (send(fd, msg, len, 0) != (ssize_t)len ||
	    poll(&pfd, 1, 5000) != 1 ||
	    recv(fd, r, sizeof(*r), 0) != (ssize_t)sizeof(*r))
		return -1;
	return r->mr_hdr.lh_type == LNC_R_OK ? 0 : r->mr_errno;
}

static void
protocol_run(void)
{
	struct launcher_opts	 o;
	struct lnc_m_create	*m;
	struct lnc_m_reply	 r;
	struct lnc_hdr		 h;
	char			*big;
	int			 sv[2], st, e[12], i;
	pid_t			 pid;

	opts_for(&o, o_prefix, o_gwif);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		die("socketpair");
	if ((pid = fork()) == 0) {
		close(sv[0]);
		lnc_main(sv[1], &o);
	}
	close(sv[1]);
	m = calloc(1, sizeof(*m));
	big = calloc(1, LNC_MSG_MAX + 64);
	for (i = 0; i < 12; i++)
		e[i] = -2;
	memset(&h, 0, sizeof(h));
	e[0] = raw_call(sv[0], "abc", 3, &r);
	h.lh_type = 999;
	e[1] = raw_call(sv[0], &h, sizeof(h), &r);
	h.lh_type = LNC_M_PING;
	memcpy(big, &h, sizeof(h));
	e[2] = raw_call(sv[0], big, sizeof(h) + 1, &r);	/* PING + 1 */
	e[3] = raw_call(sv[0], big, LNC_MSG_MAX + 10, &r);	/* too long */
	m->mc_hdr.lh_type = LNC_M_CREATE;
	memset(m->mc_id, 'a', sizeof(m->mc_id));	/* no NUL */
	e[4] = raw_call(sv[0], m, sizeof(*m), &r);
	snprintf(m->mc_id, sizeof(m->mc_id), "../x");
	e[5] = raw_call(sv[0], m, sizeof(*m), &r);
	snprintf(m->mc_id, sizeof(m->mc_id), "ok-id");
	m->mc_ca_len = LNC_PEM_MAX;
	e[6] = raw_call(sv[0], m, sizeof(*m), &r);
	m->mc_ca_len = 20;
	memcpy(m->mc_ca_pem, "-----BEGIN \x01 badpem!", 20);
	e[7] = raw_call(sv[0], m, sizeof(*m), &r);
	m->mc_ca_len = 0;
	m->mc_nmasks = LNC_MASK_MAX + 1;
	e[8] = raw_call(sv[0], m, sizeof(*m), &r);
	m->mc_nmasks = 1;
	snprintf(m->mc_masks[0], LNC_PATH_MAX, "relative/path");
	e[9] = raw_call(sv[0], m, sizeof(*m), &r);
	snprintf(m->mc_masks[0], LNC_PATH_MAX, "/etc/../root");
	e[10] = raw_call(sv[0], m, sizeof(*m), &r);
	snprintf(m->mc_masks[0], LNC_PATH_MAX, "/etc/fine");
	e[11] = raw_call(sv[0], m, sizeof(*m), &r);	/* no SETUP_HOST */
	ok(e[0] == EINVAL && e[1] == EINVAL && e[2] == EINVAL &&
	    e[3] == EINVAL, "short, unknown, mis-sized and oversized "
	    "datagrams: EINVAL (%d %d %d %d)", e[0], e[1], e[2], e[3]);
	ok(e[4] == EINVAL && e[5] == EINVAL && e[6] == EINVAL &&
	    e[7] == EINVAL && e[8] == EINVAL && e[9] == EINVAL &&
	    e[10] == EINVAL, "CREATE with an unterminated or bad id, bad PEM, "
	    "too many or bad masks: EINVAL (%d %d %d %d %d %d %d)", e[4],
	    e[5], e[6], e[7], e[8], e[9], e[10]);
	ok(e[11] == EAGAIN, "CREATE before SETUP_HOST: EAGAIN (%d)", e[11]);
	h.lh_type = LNC_M_PING;
	h.lh_seq = 77;
	ok(raw_call(sv[0], &h, sizeof(h), &r) == 0 && r.mr_hdr.lh_seq == 77,
	    "still answering, with the request's seq");
	close(sv[0]);
	ok(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0, "exits on EOF");
	ok(count_links(o_prefix) == 0, "and made nothing");
	free(m);
	free(big);
}

/*
 * No cgroup at all (lo_cgroup an absolute path that is no cgroup v2, so
 * no v1 either): the fallback rlimits, on the init and copied into the
 * workload (issue 24, point 2).
 */
static void
rlimit_run(void)
{
	struct launcher_opts	 o;
	struct launcher		*lc;
	struct lnc_create_req	 r;
	struct lnc_sandbox	 sb;
	char			 why[256], out[512];

	opts_for(&o, o_rootfs_prefix, o_gwif);
	o.lo_rootfs = NULL;
	o.lo_cgroup = "/nonexistent-lnctest-cgroup/x";
	o.lo_pids = 77;
	o.lo_memory = 300ULL << 20;
	if ((lc = launcher_spawn(&o)) == NULL)
		die("launcher_spawn");
	if (launcher_setup_host(lc, why, sizeof(why)) == -1)
		die("setup: %s", why);
	req_for(&r, "rl-one");
	if (launcher_create(lc, &r, &sb, why, sizeof(why)) == -1) {
		ok(0, "rlimits: create (%s)", why);
		launcher_close(lc);
		return;
	}
	/* soft limits of file size, processes, address space, in the
	   order of /proc/self/limits */
	sh_in(&sb, "echo rl=$(grep -E '^Max (file size|processes|address "
	    "space)' /proc/self/limits | awk '{print $(NF-2)}' | tr '\\n' ,)",
	    out, sizeof(out));
	ok(strcmp(kv(out, "rl"), "314572800,77,314572800,") == 0,
	    "no cgroup: RLIMIT_FSIZE, NPROC, AS from launcher.limits (%s)",
	    kv(out, "rl"));
	ok(launcher_destroy(lc, "rl-one") == 0, "rlimits: destroy");
	launcher_close(lc);
}

/* A sandbox that cannot be built leaves nothing behind either. */
static void
failure_run(void)
{
	struct launcher_opts	 o;
	struct launcher		*lc;
	struct lnc_create_req	 r;
	struct lnc_sandbox	 sb;
	char			 why[256];
	pid_t			 lpid;
	uint64_t		 t0;
	int			 rc;

	opts_for(&o, o_rootfs_prefix, o_gwif);
	o.lo_rootfs = "/nonexistent-lnctest-rootfs";
	if ((lc = launcher_spawn(&o)) == NULL)
		die("launcher_spawn");
	lpid = launcher_pid(lc);
	if (launcher_setup_host(lc, why, sizeof(why)) == -1)
		die("setup: %s", why);
	req_for(&r, "doomed");
	rc = launcher_create(lc, &r, &sb, why, sizeof(why));
	ok(rc == -1 && strstr(why, "nonexistent-lnctest-rootfs") != NULL,
	    "a create that fails says why (%s)", rc ? why : "created?");
	t0 = now_us();
	while (count_links(o_rootfs_prefix) > 0 && now_us() - t0 < 6000000)
		usleep(1000);
	ok(count_links(o_rootfs_prefix) == 0 && children_of(lpid) == 0,
	    "and leaves no link or process");
	ok(launcher_ping(lc) == 0, "the launcher goes on");
	launcher_close(lc);
	ok(host_clean(o_rootfs_prefix, o_gwif), "closed cleanly");
}

int
main(int argc, char *argv[])
{
	struct net_cidr	nc;
	int		ch;

	while ((ch = getopt(argc, argv, "p:t:g:n:c:j:L:R")) != -1)
		switch (ch) {
		case 'p': o_prefix = optarg; break;
		case 't': o_table = optarg; break;
		case 'g': o_gwif = optarg; break;
		case 'n': o_network = optarg; break;
		case 'c': o_cycles = atoi(optarg); break;
		case 'j': o_threads = atoi(optarg); break;
		case 'L': o_limit_ms = atof(optarg); break;
		case 'R': o_rootfs = 0; break;
		default:
			fprintf(stderr, "usage: lnctest [-p prefix] [-t table] "
			    "[-g gwif] [-n network] [-c cycles] [-j threads] "
			    "[-L p50-limit-ms] [-R]\n");
			return 2;
		}
	if (o_cycles < 1)
		o_cycles = 1;
	if (geteuid() != 0) {
		printf("1..0 # SKIP not root\n");
		return 77;
	}
	if (!shell_ok("nft list tables >/dev/null 2>&1")) {
		printf("1..0 # SKIP nft does not work here\n");
		return 77;
	}
	if (net_cidr_parse(o_network, &nc) == -1 ||
	    nc.nc_addr.na_family != AF_INET)
		die("bad network");
	memcpy(&net_base, nc.nc_addr.na_bytes, 4);
	net_base = ntohl(net_base);
	log_init(0);
	{
		struct statfs	sf;

		if (statfs("/sys/fs/cgroup", &sf) == 0 &&
		    sf.f_type == CGROUP2_SUPER_MAGIC)
			snprintf(cgdir, sizeof(cgdir),
			    "/sys/fs/cgroup/lnctest");
		else if (statfs("/sys/fs/cgroup/unified", &sf) == 0 &&
		    sf.f_type == CGROUP2_SUPER_MAGIC)
			snprintf(cgdir, sizeof(cgdir),
			    "/sys/fs/cgroup/unified/lnctest");
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	atexit(cleanup);
	fixtures();

	protocol_run();
	main_run();
	gateway_death_run();
	failure_run();
	rlimit_run();
	if (o_rootfs)
		rootfs_run();
	printf("1..%d\n", ntest);
	return nfail ? 1 : 0;
}
