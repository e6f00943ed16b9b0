/*
 * VM snapshots (issue 22, point 4; launcher.qemu.snapshot).
 *
 * At host setup the launcher boots one template VM: the same command line
 * as every VM, but with no identity (airlock.id=template, no address, a CA
 * bundle of the system's roots only, a tap nobody routes to). Once its
 * agent is ready it is stopped and its memory and device state saved
 * through QMP (getfd + migrate fd:) into the snapshot store,
 *	<state_dir>/snapshots/vm/vm-<key>.state	(0600, dir 0700, root)
 * counted in launcher.snapshots.max_bytes. <key> hashes what the state
 * depends on (qemu, kernel, initrd, memory, vcpus, accelerator, TSC): a
 * change makes a new template, the old one is removed.
 *
 * Every VM is then started from that file (qemu -incoming fd:4, running
 * as soon as it is loaded) with its own tap, and gets its identity after
 * the restore: the launcher writes it to the VM's airlock.id port, where
 * the guest's init waits (guest/init: "id", "addr", "gw", "dns", "mac",
 * "time", "rng", "ca" lines, "end"). The guest first credits the 64 fresh
 * bytes of "rng" to its kernel RNG and reseeds it (every copy starts with
 * the template's RNG state), then sets its hostname, clock, MAC, /32 and
 * routes, adds its own CA to the bundle, and prints "AIRLOCK-READY <id>",
 * as a booted guest does. The template never held a sandbox's address or
 * CA, so the file holds none.
 *
 * An image whose init predates this exchange would be restored with the
 * template's identity or RNG: a template is saved only when its init said
 * "AIRLOCK-IDENTITY <LNC_VM_ID_PROTO>" before it was ready; the version
 * is part of <key>, so a state file saved from an older image is not
 * reused.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "launcher/lnc_internal.h"
#include "util/log.h"
#include "util/util.h"

#define SAVE_MS		120000	/* the whole migration within */
#define ID_PORT_MS	5000
#define ID_RNG_BYTES	64	/* the "rng" line of the identity */

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char	*c = p;

	while (n--)
		h = (h ^ *c++) * 0x100000001b3ULL;
	return h;
}

static uint64_t
fnv_file(uint64_t h, const char *path)
{
	struct stat	sb;
	char		buf[PATH_MAX + 64];
	int		n;

	memset(&sb, 0, sizeof(sb));
	(void)stat(path != NULL ? path : "", &sb);
	n = snprintf(buf, sizeof(buf), "%s %jd %jd.%ld|", path ? path : "-",
	    (intmax_t)sb.st_size, (intmax_t)sb.st_mtim.tv_sec,
	    sb.st_mtim.tv_nsec);
	return fnv(h, buf, (size_t)n);
}

/* What a saved state is only good for. */
static uint64_t
template_key(struct lnc *l)
{
	char		buf[128];
	uint64_t	h = 0xcbf29ce484222325ULL;
	int		n;

	h = fnv_file(h, l->l_o.lo_qemu_bin);
	h = fnv_file(h, "/usr/bin/qemu-system-x86_64");
	h = fnv_file(h, l->l_o.lo_qemu_kernel);
	h = fnv_file(h, l->l_o.lo_qemu_initrd);
	n = snprintf(buf, sizeof(buf), "%u %u %d %lu %u:%u id%d",
	    l->l_o.lo_qemu_mem_mb, l->l_o.lo_qemu_vcpus, l->l_accel,
	    l->l_tsc_khz, (unsigned)l->l_o.lo_uid, (unsigned)l->l_o.lo_gid,
	    LNC_VM_ID_PROTO);
	return fnv(h, buf, (size_t)n);
}

/* Templates made for another key: no VM can use them any more. */
static void
stale_remove(const char *dir, const char *keep)
{
	struct dirent	*de;
	DIR		*d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "vm-", 3) == 0 &&
		    strcmp(de->d_name, keep) != 0 &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0)
			log_info("launcher: qemu template %s removed (another "
			    "kernel, initrd or machine)", de->d_name);
	closedir(d);
}

/* Stop the template and migrate it into <fd>; 0 or -1 with why. */
static int
template_save(struct lnc_sbx *s, int fd, char *why, size_t whysz)
{
	json_object	*o, *r, *v;
	const char	*st = "";
	uint64_t	 until = util_now_ms() + SAVE_MS;

	if (lnc_qmp_open(s, why, whysz) == -1 ||
	    lnc_qmp_exec(s->s_qmp, "stop", -1, NULL, why, whysz) == -1 ||
	    lnc_qmp_exec(s->s_qmp, "{\"execute\":\"getfd\",\"arguments\":"
	    "{\"fdname\":\"snap\"}}", fd, NULL, why, whysz) == -1 ||
	    lnc_qmp_exec(s->s_qmp, "{\"execute\":\"migrate\",\"arguments\":"
	    "{\"uri\":\"fd:snap\"}}", -1, NULL, why, whysz) == -1)
		return -1;
	for (;;) {
		if (lnc_qmp_exec(s->s_qmp, "query-migrate", -1, &o, why,
		    whysz) == -1)
			return -1;
		st = "";
		if (json_object_object_get_ex(o, "return", &r) &&
		    json_object_object_get_ex(r, "status", &v))
			st = json_object_get_string(v);
		if (strcmp(st, "completed") == 0) {
			json_object_put(o);
			return 0;
		}
		if (strcmp(st, "failed") == 0 || strcmp(st, "cancelled") == 0 ||
		    util_now_ms() >= until) {
			snprintf(why, whysz, "migrate: %s%s", st[0] ? st :
			    "no status", util_now_ms() >= until ?
			    " (timed out)" : "");
			json_object_put(o);
			return -1;
		}
		json_object_put(o);
		usleep(50000);
	}
}

void
lnc_vm_template(struct lnc *l)
{
	struct lnc_sbx	 s;
	struct stat	 sb;
	char		 dir[PATH_MAX], name[64], path[PATH_MAX], tmp[PATH_MAX];
	char		 ifname[16], why[256];
	uint64_t	 t0, t1, t2;
	int		 tapfd, con = -1, fd = -1;

	if (l->l_o.lo_snapdir == NULL) {
		log_warnx("launcher: launcher.qemu.snapshot needs state_dir: "
		    "VMs boot");
		return;
	}
	/* state_dir itself may not exist yet: the gateway makes it (0700)
	   after the launcher's host setup */
	snprintf(dir, sizeof(dir), "%s", l->l_o.lo_snapdir);
	if (strrchr(dir, '/') != NULL && strrchr(dir, '/') != dir) {
		*strrchr(dir, '/') = '\0';
		if (mkdir(dir, 0700) == -1 && errno != EEXIST)
			log_warn("launcher: mkdir %s", dir);
	}
	(void)lnc_snap_fit(l, 0);	/* makes the store and its vm/ */
	snprintf(name, sizeof(name), "vm-%016" PRIx64 ".state",
	    template_key(l));
	snprintf(dir, sizeof(dir), "%s/vm", l->l_o.lo_snapdir);
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >=
	    (int)sizeof(path) || snprintf(tmp, sizeof(tmp), "%s/tmp/%s",
	    l->l_o.lo_snapdir, name) >= (int)sizeof(tmp)) {
		log_warnx("launcher: qemu template: state_dir too long");
		return;
	}
	stale_remove(dir, name);
	if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
		snprintf(l->l_vmsnap, sizeof(l->l_vmsnap), "%s", path);
		log_info("launcher: qemu: VMs are restored from %s", path);
		return;
	}

	memset(&s, 0, sizeof(s));
	s.s_pidfd = s.s_qmp = s.s_idfd = -1;
	snprintf(s.s_id, sizeof(s.s_id), LNC_VM_TEMPLATE_ID);
	snprintf(s.s_dir, sizeof(s.s_dir), "%s/vm-template", l->l_rundir);
	/* a tap of its own, never addressed nor routed: the template's
	   network device must exist for its copies to have one */
	snprintf(ifname, sizeof(ifname), "%.12stpl", l->l_o.lo_prefix);
	t0 = util_now_ms();
	if ((tapfd = lnc_tap_open(ifname)) == -1) {
		snprintf(why, sizeof(why), "tap %s: %s", ifname,
		    strerror(errno));
		s.s_dir[0] = '\0';
		goto fail;
	}
	con = lnc_vm_start(l, &s, NULL, 0, tapfd, -1, LNC_VM_TEMPLATE,
	    l->l_accel, why, sizeof(why));
	close(tapfd);
	if (con == -1 || lnc_vm_wait_template(con, l->l_o.lo_qemu_boot_ms,
	    why, sizeof(why)) == -1)
		goto fail;
	t1 = util_now_ms();
	(void)unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) == -1) {
		snprintf(why, sizeof(why), "state file: %s", strerror(errno));
		goto fail;
	}
	if (template_save(&s, fd, why, sizeof(why)) == -1)
		goto fail;
	if (fsync(fd) == -1 || fstat(fd, &sb) == -1) {
		snprintf(why, sizeof(why), "state file: %s", strerror(errno));
		goto fail;
	}
	t2 = util_now_ms();
	close(fd);
	fd = -1;
	close(con);
	con = -1;
	lnc_vm_cleanup(&s);
	close(s.s_pidfd);
	if (lnc_snap_fit(l, (uint64_t)sb.st_blocks * 512) == -1) {
		(void)unlink(tmp);
		log_warnx("launcher: qemu template: its %jd bytes do not fit "
		    "launcher.snapshots.max_bytes: VMs boot",
		    (intmax_t)sb.st_size);
		return;
	}
	if (rename(tmp, path) == -1) {
		snprintf(why, sizeof(why), "rename: %s", strerror(errno));
		(void)unlink(tmp);
		log_warnx("launcher: qemu template: %s: VMs boot", why);
		return;
	}
	snprintf(l->l_vmsnap, sizeof(l->l_vmsnap), "%s", path);
	log_info("launcher: qemu template booted in %" PRIu64 " ms, saved in "
	    "%" PRIu64 " ms (%jd bytes): VMs are restored from %s", t1 - t0,
	    t2 - t1, (intmax_t)sb.st_size, path);
	return;
 fail:
	if (fd != -1) {
		close(fd);
		(void)unlink(tmp);
	}
	if (con != -1)
		close(con);
	lnc_vm_cleanup(&s);
	if (s.s_pidfd != -1)
		close(s.s_pidfd);
	log_warnx("launcher: qemu template: %s: VMs boot", why);
}

int
lnc_vm_identity(struct lnc *l, struct lnc_sbx *s, const char *pem,
    size_t pemlen, char *why, size_t whysz)
{
	char		 ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], path[PATH_MAX];
	char		*buf;
	const char	*p, *nl, *end = pem + pemlen;
	unsigned char	 rnd[ID_RNG_BYTES];
	size_t		 cap = pemlen * 2 + 768, len, i;
	ssize_t		 n;
	int		 fd;

	/* the restored copy's own RNG seed (never logged) */
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		snprintf(why, whysz, "sandbox %s: getrandom: %s", s->s_id,
		    strerror(errno));
		return -1;
	}

	inet_ntop(AF_INET, &s->s_addr, ip, sizeof(ip));
	inet_ntop(AF_INET, &l->l_gw, gw, sizeof(gw));
	buf = xmalloc(cap);
	len = (size_t)snprintf(buf, cap, "id %s\naddr %s\ngw %s\ndns %s\n"
	    "mac 52:54:00:%02x:%02x:%02x\ntime %lld\n", s->s_id, ip, gw, gw,
	    (s->s_index >> 16) & 0xff, (s->s_index >> 8) & 0xff,
	    s->s_index & 0xff, (long long)time(NULL));
	len += (size_t)snprintf(buf + len, cap - len, "rng ");
	for (i = 0; i < sizeof(rnd); i++)
		len += (size_t)snprintf(buf + len, cap - len, "%02x", rnd[i]);
	len += (size_t)snprintf(buf + len, cap - len, "\n");
	explicit_bzero(rnd, sizeof(rnd));
	for (p = pem; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		if (nl > p)
			len += (size_t)snprintf(buf + len, cap - len,
			    "ca %.*s\n", (int)(nl - p), p);
	}
	len += (size_t)snprintf(buf + len, cap - len, "end\n");
	snprintf(path, sizeof(path), "%s/id.sock", s->s_dir);
	if ((fd = lnc_unix_connect_wait(path, s->s_pid, ID_PORT_MS)) == -1) {
		snprintf(why, whysz, "sandbox %s: airlock.id port: %s",
		    s->s_id, strerror(errno));
		explicit_bzero(buf, len);
		free(buf);
		return -1;
	}
	/* a few KiB into an empty socket: no wait for the guest. The fd
	   stays open for the VM's life: qemu drops what a closed peer
	   sent before the guest read it */
	n = write(fd, buf, len);
	explicit_bzero(buf, len);
	free(buf);
	if (n != (ssize_t)len) {
		snprintf(why, whysz, "sandbox %s: airlock.id port: %s",
		    s->s_id, n == -1 ? strerror(errno) : "short write");
		close(fd);
		return -1;
	}
	s->s_idfd = fd;
	return 0;
}
