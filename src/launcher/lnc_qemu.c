/*
 * The qemu backend: one sandbox = one qemu microVM (-M microvm) booting the
 * project's guest image (docs/guest-image.md), with the same network
 * contract as a netns sandbox: a tap <prefix><n> carrying one /32 whose
 * host end holds the gateway address, so the nftables table, rp_filter,
 * the blackhole route, the transparent listener and the DNS stub serve it
 * unchanged.
 *
 *	launcher				gateway (launcher_create)
 *	tap <prefix><n> (TUNSETIFF), host end
 *	run dir: ca.pem, sockets, qemu.log
 *	fork + exec qemu (tap as fd 3, -runas)
 *	connect console.sock	--- OK + console fd --->
 *						wait "AIRLOCK-READY <id>" (boot
 *						timeout: destroy, report)
 *
 * The launcher never waits for a guest to boot: that would hold every
 * other request (a claim) behind seconds of TCG. The tap is not
 * persistent: it disappears when qemu, its only holder, exits.
 *
 * Pause and resume are QMP "stop" and "cont", over a QMP connection made
 * on first use and kept.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "cfg/cfg.h"
#include "launcher/lnc_internal.h"
#include "util/log.h"
#include "util/util.h"

#define QEMU_START_MS	5000	/* qemu's sockets exist within this */
#define QMP_TIMEOUT_MS	5000
#define PROBE_BOOT_MS	20000	/* accel auto: a KVM boot within this */
#define SYS_BUNDLE	"/etc/ssl/certs/ca-certificates.crt"
#define READY_MARK	"AIRLOCK-READY "
#define FAIL_MARK	"AIRLOCK-FAIL"
#define IDPROTO_MARK	"AIRLOCK-IDENTITY "

static const char *qemu_paths[] = {
	"/usr/bin/qemu-system-x86_64", "/usr/local/bin/qemu-system-x86_64",
	NULL,
};

static const char *
qemu_bin(const struct lnc *l)
{
	size_t	i;

	if (l->l_o.lo_qemu_bin != NULL)
		return l->l_o.lo_qemu_bin;
	for (i = 0; qemu_paths[i] != NULL; i++)
		if (access(qemu_paths[i], X_OK) == 0)
			return qemu_paths[i];
	return qemu_paths[0];
}

/* The host's TSC in kHz, for tsc_early_khz= (without it, 1 boot in 5
 * hangs under TCG calibrating the TSC); 0 when unknown. */
static unsigned long
tsc_khz(void)
{
	FILE		*f;
	char		 line[256];
	double		 mhz = 0;

	if ((f = fopen("/proc/cpuinfo", "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "cpu MHz", 7) == 0 &&
		    sscanf(strchr(line, ':') + 1, "%lf", &mhz) == 1)
			break;
	fclose(f);
	return (unsigned long)(mhz * 1000.0);
}

/* A tap named <name>, as a file descriptor: it lives while fds do. */
int
lnc_tap_open(const char *name)
{
	struct ifreq	ifr;
	int		fd;

	if ((fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) == -1)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* qemu creates its sockets a few ms after exec: connect once it has. */
int
lnc_unix_connect_wait(const char *path, pid_t pid, uint32_t ms)
{
	uint64_t	until = util_now_ms() + ms;
	int		fd;

	for (;;) {
		if ((fd = util_unix_connect(path)) != -1)
			return fd;
		if (errno != ENOENT && errno != ECONNREFUSED)
			return -1;
		if (util_now_ms() >= until ||
		    waitpid(pid, NULL, WNOHANG) == pid) {
			errno = ETIMEDOUT;
			return -1;
		}
		usleep(2000);
	}
}

/* Remove a run directory and the files qemu and we made in it. */
static void
rundir_remove(const char *dir)
{
	static const char *files[] = {
		"ca.pem", "console.sock", "ctl.sock", "id.sock", "qmp.sock",
		"qemu.log",
		NULL,
	};
	char	path[PATH_MAX];
	size_t	i;

	if (dir[0] == '\0')
		return;
	for (i = 0; files[i] != NULL; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		(void)unlink(path);
	}
	if (rmdir(dir) == -1 && errno != ENOENT)
		log_warn("launcher: rmdir %s", dir);
}

void
lnc_vm_host_setup(struct lnc *l)
{
	DIR		*d;
	struct dirent	*de;
	char		 path[PATH_MAX];

	snprintf(l->l_rundir, sizeof(l->l_rundir), "/run/airlock/%s",
	    l->l_o.lo_table);
	l->l_tsc_khz = tsc_khz();
	(void)mkdir("/run/airlock", 0711);
	if (mkdir(l->l_rundir, 0700) == -1 && errno != EEXIST)
		log_warn("launcher: mkdir %s", l->l_rundir);
	/* what a launcher that died left behind (its VMs died with it) */
	if (l->l_nsbx == 0 && (d = opendir(l->l_rundir)) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (strncmp(de->d_name, "vm", 2) == 0) {
				snprintf(path, sizeof(path), "%s/%s",
				    l->l_rundir, de->d_name);
				rundir_remove(path);
			}
		closedir(d);
	}
	/* decided once: a second setup (idempotent) keeps the choice */
	if (l->l_accel == CFG_ACCEL_AUTO)
		l->l_accel = l->l_o.lo_qemu_accel;
	if (l->l_accel == CFG_ACCEL_AUTO) {
		/* a probe below decides; until then TCG works everywhere */
		l->l_accel = CFG_ACCEL_TCG;
		lnc_vm_probe_kvm(l);
	}
	if (l->l_o.lo_qemu_snap && l->l_vmsnap[0] == '\0')
		lnc_vm_template(l);
}

void
lnc_vm_host_teardown(struct lnc *l)
{
	if (l->l_rundir[0] != '\0' && rmdir(l->l_rundir) == -1 &&
	    errno != ENOENT)
		log_warn("launcher: rmdir %s", l->l_rundir);
}

/* The argv of one VM; strings in <buf>. */
struct vm_argv {
	char	*v[64];
	size_t	 n;
	char	 buf[4096];
	size_t	 used;
};

static void
av_add(struct vm_argv *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
av_add(struct vm_argv *a, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	if (a->n + 1 >= sizeof(a->v) / sizeof(a->v[0]))
		return;
	va_start(ap, fmt);
	n = vsnprintf(a->buf + a->used, sizeof(a->buf) - a->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(a->buf) - a->used)
		return;
	a->v[a->n++] = a->buf + a->used;
	a->v[a->n] = NULL;
	a->used += (size_t)n + 1;
}

/*
 * The command line. Networking is the tap only (fd 3): never user-mode
 * networking, which would be a way out around the gateway.
 */
static void
vm_argv(struct lnc *l, struct vm_argv *a, const char *dir, const char *id,
    in_addr_t addr, uint32_t index, int accel, int with_tap, int mode)
{
	char		ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN];
	char		tsc[40], net[96];
	unsigned long	khz = l->l_tsc_khz;

	memset(a, 0, sizeof(*a));
	inet_ntop(AF_INET, &addr, ip, sizeof(ip));
	inet_ntop(AF_INET, &l->l_gw, gw, sizeof(gw));
	av_add(a, "%s", qemu_bin(l));
	av_add(a, "-M");
	/* ACPI finds the virtio-mmio devices and fw_cfg; the RTC gives the
	   guest the date (certificate checks); no PIT, PIC or option ROMs */
	av_add(a, "microvm,acpi=on,x-option-roms=off,pit=off,pic=off,rtc=on");
	av_add(a, "-accel");
	av_add(a, "%s", accel == CFG_ACCEL_KVM ? "kvm" : "tcg");
	av_add(a, "-cpu");
	av_add(a, "%s", accel == CFG_ACCEL_KVM ? "host" : "max");
	av_add(a, "-m");
	av_add(a, "%uM", l->l_o.lo_qemu_mem_mb);
	av_add(a, "-smp");
	av_add(a, "%u", l->l_o.lo_qemu_vcpus);
	av_add(a, "-nodefaults");
	av_add(a, "-no-user-config");
	av_add(a, "-nographic");
	av_add(a, "-no-reboot");
	av_add(a, "-kernel");
	av_add(a, "%s", l->l_o.lo_qemu_kernel);
	av_add(a, "-initrd");
	av_add(a, "%s", l->l_o.lo_qemu_initrd);
	av_add(a, "-append");
	tsc[0] = net[0] = '\0';
	if (khz)
		snprintf(tsc, sizeof(tsc), " tsc_early_khz=%lu", khz);
	/* a template and its restored copies share one command line:
	   the identity comes later, through the airlock.id port */
	if (mode != LNC_VM_COLD)
		snprintf(net, sizeof(net), " airlock.template=1");
	else if (with_tap)
		snprintf(net, sizeof(net), " airlock.addr=%s airlock.gw=%s "
		    "airlock.dns=%s", ip, gw, gw);
	av_add(a, "console=ttyS0 quiet panic=-1 ipv6.disable=1%s "
	    "airlock.id=%s airlock.user=%u:%u%s", tsc,
	    mode != LNC_VM_COLD ? LNC_VM_TEMPLATE_ID : id,
	    (unsigned)l->l_o.lo_uid, (unsigned)l->l_o.lo_gid, net);
	av_add(a, "-chardev");
	av_add(a, "socket,id=con,path=%s/console.sock,server=on,wait=off",
	    dir);
	av_add(a, "-serial");
	av_add(a, "chardev:con");
	av_add(a, "-device");
	av_add(a, "virtio-serial-device");
	av_add(a, "-chardev");
	av_add(a, "socket,id=ctl,path=%s/ctl.sock,server=on,wait=off", dir);
	av_add(a, "-device");
	av_add(a, "virtserialport,chardev=ctl,name=airlock.ctl");
	av_add(a, "-chardev");
	av_add(a, "socket,id=idc,path=%s/id.sock,server=on,wait=off", dir);
	av_add(a, "-device");
	av_add(a, "virtserialport,chardev=idc,name=airlock.id");
	if (with_tap) {
		av_add(a, "-netdev");
		av_add(a, "tap,id=n0,fd=3,vhost=off");
		av_add(a, "-device");
		av_add(a, "virtio-net-device,netdev=n0,mac=52:54:00:%02x:%02x:"
		    "%02x", (index >> 16) & 0xff, (index >> 8) & 0xff,
		    index & 0xff);
	}
	av_add(a, "-fw_cfg");
	av_add(a, "name=opt/airlock/ca.pem,file=%s/ca.pem", dir);
	av_add(a, "-qmp");
	av_add(a, "unix:%s/qmp.sock,server=on,wait=off", dir);
	if (mode != LNC_VM_COLD) {
		/* without the source's run state in the stream, a restore
		   runs as soon as it is loaded: no QMP "cont" to wait for */
		av_add(a, "-global");
		av_add(a, "migration.store-global-state=off");
	}
	if (mode == LNC_VM_RESTORE) {
		av_add(a, "-incoming");
		av_add(a, "fd:4");
	}
	/* a seccomp filter (not elevateprivileges=deny: it would kill
	   -runas's setuid, which comes after the filter) */
	av_add(a, "-sandbox");
	av_add(a, "on,obsolete=deny,spawn=deny,resourcecontrol=deny");
	/* qemu opens what it needs (sockets, /dev/kvm) as root, then
	   drops to the workload's user before the guest runs */
	av_add(a, "-runas");
	av_add(a, "%u:%u", (unsigned)l->l_o.lo_uid, (unsigned)l->l_o.lo_gid);
}

/* Fork and exec qemu: the tap as fd 3, a state to restore as fd 4,
 * stderr to <dir>/qemu.log. */
static pid_t
vm_spawn(struct vm_argv *a, const char *dir, int tapfd, int statefd,
    int *pidfd)
{
	char	path[PATH_MAX];
	pid_t	pid, parent = getpid();
	int	logfd, nullfd, sig;

	snprintf(path, sizeof(path), "%s/qemu.log", dir);
	if ((logfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
	    0600)) == -1)
		return -1;
	if ((pid = fork()) == -1) {
		close(logfd);
		return -1;
	}
	if (pid == 0) {
		/* the VM dies with the launcher */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != parent)
			_exit(1);
		nullfd = open("/dev/null", O_RDWR);
		/* out of the way of 0-4 first */
		if (tapfd != -1 && (tapfd = fcntl(tapfd, F_DUPFD, 10)) == -1)
			_exit(126);
		if (statefd != -1 &&
		    (statefd = fcntl(statefd, F_DUPFD, 10)) == -1)
			_exit(126);
		if (nullfd == -1 || dup2(nullfd, 0) == -1 ||
		    dup2(nullfd, 1) == -1 || dup2(logfd, 2) == -1 ||
		    (tapfd != -1 && dup2(tapfd, 3) == -1) ||
		    (statefd != -1 && dup2(statefd, 4) == -1))
			_exit(126);
		close_range(statefd != -1 ? 5 : tapfd != -1 ? 4 : 3, ~0U, 0);
		(void)setsid();
		/* the launcher ignores terminal signals; qemu must not */
		for (sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		sigprocmask(SIG_SETMASK, &(sigset_t){ 0 }, NULL);
		execv(a->v[0], a->v);
		dprintf(2, "exec %s: %s\n", a->v[0], strerror(errno));
		_exit(127);
	}
	close(logfd);
	*pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	return pid;
}

/* The end of qemu.log, for an error message. */
static void
log_tail(const char *dir, char *buf, size_t bufsz)
{
	char	path[PATH_MAX], *nl;
	ssize_t	n;
	off_t	size;
	int	fd;

	buf[0] = '\0';
	if (dir[0] == '\0')
		return;
	snprintf(path, sizeof(path), "%s/qemu.log", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size > (off_t)bufsz - 1)
		(void)lseek(fd, size - (off_t)bufsz + 1, SEEK_SET);
	else
		(void)lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, bufsz - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	while ((nl = strrchr(buf, '\n')) != NULL && nl[1] == '\0')
		*nl = '\0';
	if ((nl = strrchr(buf, '\n')) != NULL)
		memmove(buf, nl + 1, strlen(nl + 1) + 1);
}

/*
 * Start one VM into <s> (s_dir, s_pid, s_pidfd set): the run dir, the CA
 * bundle, qemu. With <tapfd> -1 the VM has no network (the KVM probe).
 * Returns the console connection, or -1 with <why>.
 */
int
lnc_vm_start(struct lnc *l, struct lnc_sbx *s, const char *pem,
    size_t pemlen, int tapfd, int statefd, int mode, int accel, char *why,
    size_t whysz)
{
	struct vm_argv	*a;
	char		 path[PATH_MAX], tail[120];
	int		 fd;

	if (mkdir(s->s_dir, 0700) == -1) {
		snprintf(why, whysz, "mkdir %s: %s", s->s_dir, strerror(errno));
		s->s_dir[0] = '\0';	/* not ours to remove */
		return -1;
	}
	snprintf(path, sizeof(path), "%s/ca.pem", s->s_dir);
	/* a template's copies get their CA through the airlock.id port */
	if (lnc_bundle_write(SYS_BUNDLE, pem, mode == LNC_VM_COLD ? pemlen :
	    0, path) == -1) {
		snprintf(why, whysz, "CA bundle: %s", strerror(errno));
		return -1;
	}
	a = xmalloc(sizeof(*a));
	vm_argv(l, a, s->s_dir, s->s_id, s->s_addr, s->s_index, accel,
	    tapfd != -1, mode);
	s->s_pid = vm_spawn(a, s->s_dir, tapfd, statefd, &s->s_pidfd);
	free(a);
	if (s->s_pid == -1) {
		snprintf(why, whysz, "qemu: %s", strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/console.sock", s->s_dir);
	if ((fd = lnc_unix_connect_wait(path, s->s_pid, QEMU_START_MS)) == -1) {
		log_tail(s->s_dir, tail, sizeof(tail));
		snprintf(why, whysz, "qemu did not start: %s", tail[0] ?
		    tail : strerror(errno));
		return -1;
	}
	return fd;
}

void
lnc_vm_cleanup(struct lnc_sbx *s)
{
	char	tail[160];

	lnc_pid_kill(s);
	/* qemu says nothing on stderr unless something went wrong */
	log_tail(s->s_dir, tail, sizeof(tail));
	if (tail[0] != '\0')
		log_warnx("launcher: sandbox %s: qemu: %s", s->s_id, tail);
	if (s->s_qmp != -1)
		close(s->s_qmp);
	s->s_qmp = -1;
	if (s->s_idfd != -1)
		close(s->s_idfd);
	s->s_idfd = -1;
	rundir_remove(s->s_dir);
}

/*
 * accel auto: KVM only where the CPU offers hardware virtualisation and a
 * guest actually boots with it (a paravirtual /dev/kvm may fail it).
 */
void
lnc_vm_probe_kvm(struct lnc *l)
{
	struct lnc_sbx	 s;
	FILE		*f;
	char		 line[4096], why[200];
	int		 hw = 0, fd;
	uint64_t	 t0;

	if (access("/dev/kvm", R_OK | W_OK) == -1) {
		log_info("launcher: qemu accel auto: no /dev/kvm: TCG");
		return;
	}
	if ((f = fopen("/proc/cpuinfo", "re")) != NULL) {
		while (!hw && fgets(line, sizeof(line), f) != NULL)
			if (strncmp(line, "flags", 5) == 0)
				hw = strstr(line, " vmx") != NULL ||
				    strstr(line, " svm") != NULL;
		fclose(f);
	}
	if (!hw) {
		log_info("launcher: qemu accel auto: the CPU shows no vmx/svm "
		    "(/dev/kvm is paravirtual or nested off): TCG");
		return;
	}
	memset(&s, 0, sizeof(s));
	s.s_pidfd = s.s_qmp = s.s_idfd = -1;
	snprintf(s.s_id, sizeof(s.s_id), "kvm-probe");
	snprintf(s.s_dir, sizeof(s.s_dir), "%s/vm-probe", l->l_rundir);
	t0 = util_now_ms();
	if ((fd = lnc_vm_start(l, &s, NULL, 0, -1, -1, LNC_VM_COLD,
	    CFG_ACCEL_KVM, why, sizeof(why))) != -1) {
		if (lnc_vm_wait_ready(fd, s.s_id, PROBE_BOOT_MS, why,
		    sizeof(why)) == 0) {
			l->l_accel = CFG_ACCEL_KVM;
			snprintf(why, sizeof(why), "booted in %llu ms",
			    (unsigned long long)(util_now_ms() - t0));
		}
		close(fd);
	}
	lnc_vm_cleanup(&s);
	if (s.s_pidfd != -1)
		close(s.s_pidfd);
	log_info("launcher: qemu accel auto: KVM probe %s: %s",
	    l->l_accel == CFG_ACCEL_KVM ? "passed" : "failed", why);
	if (l->l_accel != CFG_ACCEL_KVM)
		log_info("launcher: qemu accel auto: TCG");
}

int
lnc_vm_create(struct lnc *l, const struct lnc_m_create *m,
    struct lnc_m_sandbox *out, int *confd, char *why, size_t whysz)
{
	struct lnc_sbx	*s;
	uint64_t	 t0 = util_now_us();
	const char	*what = "";
	int		 tapfd = -1, statefd = -1, fd, err;

	*confd = -1;
	if ((err = lnc_sbx_new(l, m, &s, why, whysz)) != 0)
		return err;
	s->s_vm = 1;
	snprintf(s->s_dir, sizeof(s->s_dir), "%s/vm%u", l->l_rundir,
	    s->s_index);

	if ((tapfd = lnc_tap_open(s->s_ifname)) == -1) {
		err = errno;
		snprintf(why, whysz, "sandbox %s: tap %s: %s", s->s_id,
		    s->s_ifname, strerror(err));
		s->s_dir[0] = '\0';
		goto fail;
	}
	if (lnc_link_host_setup(l, s->s_ifname, s->s_addr, &what) == -1) {
		err = errno ? errno : EIO;
		snprintf(why, whysz, "sandbox %s: %s: %s", s->s_id, what,
		    strerror(err));
		s->s_dir[0] = '\0';
		goto fail;
	}
	if (l->l_vmsnap[0] != '\0' &&
	    (statefd = open(l->l_vmsnap, O_RDONLY | O_CLOEXEC)) == -1)
		log_warn("launcher: %s (booting instead)", l->l_vmsnap);
	fd = lnc_vm_start(l, s, m->mc_ca_pem, m->mc_ca_len, tapfd, statefd,
	    statefd != -1 ? LNC_VM_RESTORE : LNC_VM_COLD, l->l_accel, why,
	    whysz);
	/* qemu holds the tap now; ours would keep it alive after qemu */
	close(tapfd);
	tapfd = -1;
	if (statefd != -1)
		close(statefd);
	if (fd == -1) {
		err = EIO;
		goto fail;
	}
	if (statefd != -1 && lnc_vm_identity(l, s, m->mc_ca_pem,
	    m->mc_ca_len, why, whysz) == -1) {
		close(fd);
		err = EIO;
		goto fail;
	}
	lnc_sbx_add(l, s, out, t0);
	out->ms_vm = 1;
	snprintf(out->ms_ctl, sizeof(out->ms_ctl), "%s/ctl.sock", s->s_dir);
	*confd = fd;
	return 0;
 fail:
	if (tapfd != -1)
		close(tapfd);
	lnc_vm_cleanup(s);
	lnc_gone_add(l, s->s_ifname);
	lnc_sbx_free(l, s);
	return err;
}

void
lnc_vm_kill(struct lnc *l, struct lnc_sbx *s)
{
	(void)l;
	lnc_vm_cleanup(s);
}

/* ---- QMP ------------------------------------------------------------ */

/*
 * Read lines until one is a reply ("return" or "error"); events are
 * skipped. 0 with *ret (caller puts), or -1.
 */
static int
qmp_reply(int fd, json_object **ret, char *why, size_t whysz)
{
	char		 buf[8192];
	size_t		 len = 0;
	uint64_t	 until = util_now_ms() + QMP_TIMEOUT_MS;
	struct pollfd	 pfd = { .fd = fd, .events = POLLIN };
	json_object	*o, *v;
	char		*nl;
	ssize_t		 n;
	int		 r;

	for (;;) {
		while ((nl = memchr(buf, '\n', len)) != NULL) {
			*nl = '\0';
			o = json_tokener_parse(buf);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len);
			if (o == NULL)
				continue;
			if (json_object_object_get_ex(o, "return", &v)) {
				*ret = o;
				return 0;
			}
			if (json_object_object_get_ex(o, "error", &v)) {
				snprintf(why, whysz, "qmp: %s",
				    json_object_to_json_string(v));
				json_object_put(o);
				return -1;
			}
			json_object_put(o);	/* an event, the greeting */
		}
		if (len == sizeof(buf) - 1)
			len = 0;	/* an overlong line: not ours */
		r = poll(&pfd, 1, (int)(until > util_now_ms() ?
		    until - util_now_ms() : 0));
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(why, whysz, "qmp: no answer");
			return -1;
		}
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0) {
			snprintf(why, whysz, "qmp: connection closed");
			return -1;
		}
		len += (size_t)n;
	}
}

/* <cmd> is a command's name, or a whole command ("{...}") sent with
 * <passfd> attached when it is not -1 (getfd). */
int
lnc_qmp_exec(int fd, const char *cmd, int passfd, json_object **ret,
    char *why, size_t whysz)
{
	char		 line[512], cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec	 iov;
	struct msghdr	 mh;
	struct cmsghdr	*cm;
	json_object	*o = NULL;
	int		 n;

	if (cmd[0] == '{')
		n = snprintf(line, sizeof(line), "%s\n", cmd);
	else
		n = snprintf(line, sizeof(line), "{\"execute\":\"%s\"}\n",
		    cmd);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		snprintf(why, whysz, "qmp: command too long");
		return -1;
	}
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = line;
	iov.iov_len = (size_t)n;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (passfd != -1) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &passfd, sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != n) {
		snprintf(why, whysz, "qmp: %s", strerror(errno));
		return -1;
	}
	if (qmp_reply(fd, &o, why, whysz) == -1)
		return -1;
	if (ret != NULL)
		*ret = o;
	else
		json_object_put(o);
	return 0;
}

int
lnc_qmp_open(struct lnc_sbx *s, char *why, size_t whysz)
{
	char	path[PATH_MAX];

	if (s->s_qmp != -1)
		return 0;
	snprintf(path, sizeof(path), "%s/qmp.sock", s->s_dir);
	if ((s->s_qmp = util_unix_connect(path)) == -1) {
		snprintf(why, whysz, "qmp: %s", strerror(errno));
		return -1;
	}
	/* the greeting has no "return": capabilities answers first */
	if (lnc_qmp_exec(s->s_qmp, "qmp_capabilities", -1, NULL, why,
	    whysz) == -1) {
		close(s->s_qmp);
		s->s_qmp = -1;
		return -1;
	}
	return 0;
}

/* Is a client attached to the guest agent's socket? -1 when unknown. */
static int
vm_attached(struct lnc_sbx *s, char *why, size_t whysz)
{
	json_object	*o, *arr, *e, *v;
	size_t		 i;
	int		 attached = -1;
	const char	*label, *file;

	if (lnc_qmp_exec(s->s_qmp, "query-chardev", -1, &o, why, whysz) == -1)
		return -1;
	if (json_object_object_get_ex(o, "return", &arr))
		for (i = 0; i < json_object_array_length(arr); i++) {
			e = json_object_array_get_idx(arr, i);
			if (!json_object_object_get_ex(e, "label", &v) ||
			    (label = json_object_get_string(v)) == NULL ||
			    strcmp(label, "ctl") != 0 ||
			    !json_object_object_get_ex(e, "filename", &v) ||
			    (file = json_object_get_string(v)) == NULL)
				continue;
			attached = strncmp(file, "disconnected:", 13) != 0;
		}
	json_object_put(o);
	return attached;
}

int
lnc_vm_pause(struct lnc *l, struct lnc_sbx *s, int if_idle, char *why,
    size_t whysz)
{
	(void)l;
	if (s->s_paused)
		return 0;
	if (lnc_qmp_open(s, why, whysz) == -1)
		return EIO;
	if (if_idle && vm_attached(s, why, whysz) != 0) {
		snprintf(why, whysz, "someone is attached to its agent");
		return EBUSY;
	}
	if (lnc_qmp_exec(s->s_qmp, "stop", -1, NULL, why, whysz) == -1)
		return EIO;
	s->s_paused = 1;
	return 0;
}

int
lnc_vm_resume(struct lnc *l, struct lnc_sbx *s, char *why, size_t whysz)
{
	(void)l;
	if (!s->s_paused)
		return 0;
	if (lnc_qmp_open(s, why, whysz) == -1 ||
	    lnc_qmp_exec(s->s_qmp, "cont", -1, NULL, why, whysz) == -1)
		return EIO;
	s->s_paused = 0;
	return 0;
}

/* ---- readiness (both sides) ----------------------------------------- */

/* A console line for a log message: printable ASCII only. */
static void
printable(char *dst, size_t dstsz, const char *src)
{
	size_t	i;

	for (i = 0; i + 1 < dstsz && src[i] != '\0'; i++)
		dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
	dst[i] = '\0';
}

/* <proto>: -1, or the identity version the template's init announced
 * (0: none), set as the lines go by */
static int
wait_ready(int fd, const char *id, uint32_t timeout_ms, int *proto,
    char *why, size_t whysz)
{
	char		 buf[4096], last[100] = "", *line, *nl;
	size_t		 len = 0, idlen = strlen(id);
	uint64_t	 until = util_now_ms() + timeout_ms;
	struct pollfd	 pfd = { .fd = fd, .events = POLLIN };
	ssize_t		 n;
	int		 r;

	for (;;) {
		r = poll(&pfd, 1, (int)(until > util_now_ms() ?
		    until - util_now_ms() : 0));
		if (r == -1 && errno == EINTR)
			continue;
		if (r == 0) {
			snprintf(why, whysz, "not ready after %u ms (console: "
			    "\"%s\")", timeout_ms, last);
			return -1;
		}
		if (r == -1 || (n = read(fd, buf + len, sizeof(buf) - 1 -
		    len)) <= 0) {
			snprintf(why, whysz, "qemu exited before the guest "
			    "was ready (console: \"%s\")", last);
			return -1;
		}
		len += (size_t)n;
		buf[len] = '\0';
		line = buf;
		while ((nl = strchr(line, '\n')) != NULL) {
			*nl = '\0';
			if (nl > line && nl[-1] == '\r')
				nl[-1] = '\0';
			if (strncmp(line, READY_MARK, strlen(READY_MARK)) == 0 &&
			    strncmp(line + strlen(READY_MARK), id, idlen) == 0 &&
			    line[strlen(READY_MARK) + idlen] == '\0')
				return 0;
			if (proto != NULL && strncmp(line, IDPROTO_MARK,
			    strlen(IDPROTO_MARK)) == 0)
				*proto = atoi(line + strlen(IDPROTO_MARK));
			if (strncmp(line, FAIL_MARK, strlen(FAIL_MARK)) == 0) {
				snprintf(why, whysz, "guest: %.100s", line);
				return -1;
			}
			if (*line != '\0')
				printable(last, sizeof(last), line);
			line = nl + 1;
		}
		len = strlen(line);
		memmove(buf, line, len);
		if (len == sizeof(buf) - 1)
			len = 0;	/* no newline in 4 KiB: drop it */
	}
}

int
lnc_vm_wait_ready(int fd, const char *id, uint32_t timeout_ms, char *why,
    size_t whysz)
{
	return wait_ready(fd, id, timeout_ms, NULL, why, whysz);
}

int
lnc_vm_wait_template(int fd, uint32_t timeout_ms, char *why, size_t whysz)
{
	int	proto = 0;

	if (wait_ready(fd, LNC_VM_TEMPLATE_ID, timeout_ms, &proto, why,
	    whysz) == -1)
		return -1;
	if (proto < LNC_VM_ID_PROTO) {
		/* its copies would keep the template's identity or RNG */
		snprintf(why, whysz, "the guest image is too old for "
		    "launcher.qemu.snapshot (its init announced identity "
		    "protocol %d, %d needed: rebuild it, make guest-image)",
		    proto, LNC_VM_ID_PROTO);
		return -1;
	}
	return 0;
}
