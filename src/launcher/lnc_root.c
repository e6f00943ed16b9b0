/*
 * A sandbox's private root, built by its init before anything runs in it
 * (lnc_netns.c), in its own mount namespace: nothing here propagates to
 * the host.
 *
 * Host tools (launcher.rootfs null): a tmpfs root, read-only (nosuid,
 * nodev) binds of /usr /bin /sbin /lib* (symlinks stay symlinks), the
 * host's /etc read-only under an overlay that adds our files. rootfs DIR:
 * DIR as the read-only lower layer of a disposable overlay. Both: a
 * minimal /dev (binds of null zero full random urandom tty, own devpts,
 * /dev/shm, mqueue), /proc of its PID namespace, fresh /tmp and home, and
 * the masked host paths (config, state_dir, secrets, sockets) empty.
 *
 * Generated files: resolv.conf naming the gateway, hostname, hosts, and
 * the CA bundle (system CAs + the sandbox's CA), also linked as the
 * system bundle for tools that read only that one.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "launcher/lnc_internal.h"

#define CHECK		LNC_CHECK
#define TMPFS_DEFAULT	(64ULL << 20)
#define SYS_BUNDLE	"etc/ssl/certs/ca-certificates.crt"

/* Generated files: path inside the sandbox (without the leading '/'). */
static const char *gen_files[] = {
	"etc/resolv.conf", "etc/hostname", "etc/hosts",
	"etc/airlock/ca-bundle.pem", SYS_BUNDLE, NULL,
};

static int
write_file(const char *path, const char *data, size_t len, mode_t mode)
{
	int	fd;
	ssize_t	w;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	    mode);
	if (fd == -1)
		return -1;
	while (len > 0) {
		w = write(fd, data, len);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return -1;
		}
		data += w;
		len -= w;
	}
	return close(fd);
}

/* mkdir -p, mode for the ones it creates. */
static int
mkdirs(const char *path, mode_t mode)
{
	char	buf[PATH_MAX], *p;

	if (strlen(path) >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(buf, path);
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, mode) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

/* The CA bundle: the system's, then the sandbox's CA. */
int
lnc_bundle_write(const char *sysbundle, const char *pem, size_t pemlen,
    const char *dst)
{
	struct stat	 sb;
	int		 in, out;
	off_t		 off = 0;
	ssize_t		 n;

	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out == -1)
		return -1;
	if ((in = open(sysbundle, O_RDONLY | O_CLOEXEC)) != -1) {
		if (fstat(in, &sb) == 0 && S_ISREG(sb.st_mode))
			while (off < sb.st_size) {
				n = sendfile(out, in, &off, sb.st_size - off);
				if (n <= 0)
					break;
			}
		close(in);
		if (off > 0 && write(out, "\n", 1) != 1)
			goto fail;
	}
	if (pemlen > 0 && write(out, pem, pemlen) != (ssize_t)pemlen)
		goto fail;
	if (pemlen > 0 && pem[pemlen - 1] != '\n' &&
	    write(out, "\n", 1) != 1)
		goto fail;
	return close(out);
 fail:
	close(out);
	return -1;
}

/*
 * Write the generated files under <base> ("/gen"): resolv.conf naming the
 * gateway, hostname, hosts, the CA bundle (also as the system bundle, for
 * tools that read only that one).
 */
static void
gen_write(struct lnc_child *c, const char *sysbundle)
{
	char		 buf[512], gw[INET_ADDRSTRLEN];
	struct in_addr	 a;
	int		 n;

	a.s_addr = c->c_l->l_gw;
	inet_ntop(AF_INET, &a, gw, sizeof(gw));
	CHECK(c, mkdirs("/gen/etc/airlock", 0755), "mkdir /gen");
	CHECK(c, mkdirs("/gen/etc/ssl/certs", 0755), "mkdir /gen");
	n = snprintf(buf, sizeof(buf), "nameserver %s\n", gw);
	CHECK(c, write_file("/gen/etc/resolv.conf", buf, n, 0644),
	    "resolv.conf");
	n = snprintf(buf, sizeof(buf), "%s\n", c->c_id);
	CHECK(c, write_file("/gen/etc/hostname", buf, n, 0644), "hostname");
	n = snprintf(buf, sizeof(buf), "127.0.0.1\tlocalhost %s\n"
	    "%s\tgateway\n", c->c_id, gw);
	CHECK(c, write_file("/gen/etc/hosts", buf, n, 0644), "hosts");
	CHECK(c, lnc_bundle_write(sysbundle, c->c_pem,
	    c->c_pemlen, "/gen/etc/airlock/ca-bundle.pem"),
	    "CA bundle");
	CHECK(c, link("/gen/etc/airlock/ca-bundle.pem", "/gen/" SYS_BUNDLE),
	    "CA bundle link");
}

/* Copy generated file /gen/<rel> to <dst>, making its directory. */
static int
gen_copy(const char *rel, const char *dst)
{
	char		 src[PATH_MAX], dir[PATH_MAX], *slash;
	struct stat	 sb;
	int		 in, out;
	off_t		 off = 0;

	snprintf(src, sizeof(src), "/gen/%s", rel);
	snprintf(dir, sizeof(dir), "%s", dst);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (mkdirs(dir, 0755) == -1)
			return -1;
	}
	if ((in = open(src, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(in, &sb) == -1 || (out = open(dst, O_WRONLY | O_CREAT |
	    O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644)) == -1) {
		close(in);
		return -1;
	}
	while (off < sb.st_size)
		if (sendfile(out, in, &off, sb.st_size - off) <= 0)
			break;
	close(in);
	close(out);
	return off == sb.st_size ? 0 : -1;
}

/* Read-only (and nosuid, nodev) bind of <src> on <dst>, recursively. */
static int
bind_ro(const char *src, const char *dst, int nodev)
{
	struct mount_attr	ma;

	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) == -1)
		return -1;
	memset(&ma, 0, sizeof(ma));
	ma.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
	    (nodev ? MOUNT_ATTR_NODEV : 0);
	if (mount_setattr(AT_FDCWD, dst, AT_RECURSIVE, &ma, sizeof(ma)) == 0)
		return 0;
	if (errno != ENOSYS)
		return -1;
	return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY |
	    MS_NOSUID | (nodev ? MS_NODEV : 0), NULL);
}

static int
tmpfs(const char *dst, const char *mode, uint64_t size, unsigned long fl,
    uid_t uid, gid_t gid)
{
	char	opt[128];

	snprintf(opt, sizeof(opt), "mode=%s,size=%llu,uid=%u,gid=%u", mode,
	    (unsigned long long)size, (unsigned)uid, (unsigned)gid);
	return mount("tmpfs", dst, "tmpfs", fl, opt);
}

/*
 * The sandbox's writable space, one budget (issue 24, point 2): the
 * scratch tmpfs (size launcher.limits.memory) holds the overlay's upper
 * layer and /rw/{tmp,shm,home}, bound on /tmp, /dev/shm and the home, so
 * filling one leaves that much less for the others.
 */
/* A masked path under the host's /etc: "/etc/x...", not /etc itself. */
static int
under_etc(const char *p)
{
	return strncmp(p, "/etc/", 5) == 0 && p[5] != '\0';
}

static int
bind_rw(const char *src, const char *dst, uint64_t attrs)
{
	struct mount_attr	ma;

	if (mount(src, dst, NULL, MS_BIND, NULL) == -1)
		return -1;
	memset(&ma, 0, sizeof(ma));
	ma.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | attrs;
	return mount_setattr(AT_FDCWD, dst, 0, &ma, sizeof(ma));
}

static void
rw_dirs(struct lnc_child *c)
{
	CHECK(c, mkdir("/rw", 0755), "mkdir /rw");
	CHECK(c, mkdir("/rw/tmp", 01777), "mkdir /rw/tmp");
	CHECK(c, chmod("/rw/tmp", 01777), "chmod /rw/tmp");
	CHECK(c, mkdir("/rw/shm", 01777), "mkdir /rw/shm");
	CHECK(c, chmod("/rw/shm", 01777), "chmod /rw/shm");
	CHECK(c, mkdir("/rw/home", 0700), "mkdir /rw/home");
	CHECK(c, chown("/rw/home", c->c_l->l_o.lo_uid, c->c_l->l_o.lo_gid),
	    "chown /rw/home");
}

/*
 * Hide host path <p> (absolute, symlinks resolved) inside /newroot: an
 * empty read-only tmpfs over a directory, an empty file over anything
 * else. A generated file under a hidden directory is put back.
 */
static void
mask_one(struct lnc_child *c, const char *p)
{
	struct lnc	*l = c->c_l;
	const char	*rel = p, *root = l->l_o.lo_rootfs;
	char		 dst[PATH_MAX], gdst[PATH_MAX];
	struct stat	 sb;
	size_t		 rlen, glen;
	int		 i, regen = 0;

	if (root == NULL && under_etc(p))
		return;		/* hidden by the /etc overlay already */
	if (root != NULL) {
		/* only the rootfs tree is visible: mask inside it */
		rlen = strlen(root);
		if (strncmp(p, root, rlen) != 0 || p[rlen] != '/')
			return;
		rel = p + rlen;
	}
	if (snprintf(dst, sizeof(dst), "/newroot%s", rel) >= (int)sizeof(dst))
		lnc_child_fail(c, ENAMETOOLONG, "mask %s", p);
	if (lstat(dst, &sb) == -1) {
		if (errno == ENOENT || errno == ENOTDIR)
			return;		/* not visible anyway */
		lnc_child_fail(c, errno, "mask %s", p);
	}
	if (S_ISLNK(sb.st_mode))
		return;		/* realpath()ed on the host: not ours */
	if (!S_ISDIR(sb.st_mode)) {
		CHECK(c, bind_ro("/empty", dst, 1), "mask %s", p);
		return;
	}
	glen = strlen(rel + 1);
	if (glen == 0)
		return;		/* the whole root: nothing would work */
	for (i = 0; gen_files[i] != NULL; i++)
		if (strncmp(gen_files[i], rel + 1, glen) == 0 &&
		    gen_files[i][glen] == '/')
			regen = 1;
	CHECK(c, tmpfs(dst, "0755", 1 << 20, MS_NOSUID | MS_NODEV |
	    MS_NOEXEC | (regen ? 0 : MS_RDONLY), 0, 0), "mask %s", p);
	if (!regen)
		return;
	for (i = 0; gen_files[i] != NULL; i++) {
		if (strncmp(gen_files[i], rel + 1, glen) != 0 ||
		    gen_files[i][glen] != '/')
			continue;
		if (snprintf(gdst, sizeof(gdst), "%s%s", dst,
		    gen_files[i] + glen) >= (int)sizeof(gdst))
			lnc_child_fail(c, ENAMETOOLONG, "mask %s", p);
		CHECK(c, gen_copy(gen_files[i], gdst), "mask %s: %s", p,
		    gen_files[i]);
	}
	CHECK(c, mount(NULL, dst, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID |
	    MS_NODEV | MS_NOEXEC, NULL), "mask %s", p);
}

/*
 * The directories of host path <dir> ("/etc/a/b") in the /etc overlay's
 * upper layer, each with the mode and owner of the host's: an upper
 * directory's attributes are what the sandbox sees.
 */
static int
upper_dirs_like_lower(const char *dir)
{
	char		 up[PATH_MAX], low[PATH_MAX];
	struct stat	 sb;
	const char	*p;

	for (p = dir + 5; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		snprintf(up, sizeof(up), "/gen%.*s", (int)(p - dir), dir);
		snprintf(low, sizeof(low), "/oldroot%.*s", (int)(p - dir),
		    dir);
		if (lstat(up, &sb) == -1) {
			if (lstat(low, &sb) == -1)
				sb.st_mode = 0755, sb.st_uid = 0,
				    sb.st_gid = 0;
			if (mkdir(up, 0700) == -1 || chown(up, sb.st_uid,
			    sb.st_gid) == -1 || chmod(up, sb.st_mode &
			    07777) == -1)
				return -1;
		}
		if (*p == '\0')
			return 0;
	}
}

/*
 * Masks under /etc, host tools: hidden by the /etc overlay itself, so no
 * mount names them in /proc/self/mountinfo (issue 24, point 3). A file or
 * a directory without generated files becomes a whiteout (absent inside);
 * a directory holding generated files (the config dir /etc/airlock, say)
 * becomes opaque: only ours are seen. Runs before the overlay is mounted
 * (its upper layer must not change under it).
 */
static void
etc_masks_whiteout(struct lnc_child *c)
{
	char		 up[PATH_MAX], dir[PATH_MAX], *slash;
	struct stat	 sb;
	size_t		 i;

	for (i = 0; i < c->c_nmasks; i++) {
		const char *p = c->c_masks[i];

		if (!under_etc(p))
			continue;
		if (snprintf(up, sizeof(up), "/gen%s", p) >= (int)sizeof(up))
			lnc_child_fail(c, ENAMETOOLONG, "mask %s", p);
		if (lstat(up, &sb) == 0 && S_ISDIR(sb.st_mode)) {
			/* has generated files: show only those */
			CHECK(c, setxattr(up, "trusted.overlay.opaque", "y", 1,
			    0), "mask %s: opaque", p);
			continue;
		}
		if (lstat(up, &sb) == 0)
			continue;	/* a generated file: ours wins */
		snprintf(dir, sizeof(dir), "%s", p);
		if ((slash = strrchr(dir, '/')) != NULL)
			*slash = '\0';
		CHECK(c, upper_dirs_like_lower(dir), "mask %s: mkdir", p);
		CHECK(c, mknod(up, S_IFCHR | 0, makedev(0, 0)),
		    "mask %s: whiteout", p);
	}
}

/* Host tools: read-only /usr /bin /sbin /lib* (symlinks stay symlinks). */
static void
fs_host_tools(struct lnc_child *c, uint64_t size)
{
	static const char *dirs[] = {
		"usr", "bin", "sbin", "lib", "lib64", "lib32", "libx32", NULL,
	};
	char		 src[64], dst[64], target[PATH_MAX];
	struct stat	 sb;
	ssize_t		 n;
	int		 i;

	CHECK(c, tmpfs("/newroot", "0755", size, MS_NOSUID | MS_NODEV, 0, 0),
	    "tmpfs /newroot");
	for (i = 0; dirs[i] != NULL; i++) {
		snprintf(src, sizeof(src), "/oldroot/%s", dirs[i]);
		snprintf(dst, sizeof(dst), "/newroot/%s", dirs[i]);
		if (lstat(src, &sb) == -1)
			continue;
		if (S_ISLNK(sb.st_mode)) {
			n = readlink(src, target, sizeof(target) - 1);
			CHECK(c, n, "readlink %s", src);
			target[n] = '\0';
			CHECK(c, symlink(target, dst), "symlink %s", dst);
		} else if (S_ISDIR(sb.st_mode)) {
			CHECK(c, mkdir(dst, 0755), "mkdir %s", dst);
			CHECK(c, bind_ro(src, dst, 1), "bind %s", src);
		}
	}
	/* /etc: the host's, under an overlay that adds our files and
	   hides the masked ones */
	etc_masks_whiteout(c);
	CHECK(c, mkdir("/newroot/etc", 0755), "mkdir /newroot/etc");
	CHECK(c, mkdir("/work/etc", 0700), "mkdir /work/etc");
	CHECK(c, mount("overlay", "/newroot/etc", "overlay",
	    MS_RDONLY | MS_NOSUID | MS_NODEV,
	    "lowerdir=/oldroot/etc,upperdir=/gen/etc,workdir=/work/etc"),
	    "overlay /etc");
}

/* rootfs DIR: the read-only lower layer of a disposable overlay. */
static void
fs_rootfs(struct lnc_child *c)
{
	char	opt[PATH_MAX + 64], dir[32];
	size_t	i, len;
	int	fd;

	/* through a bind on the scratch (detached later): the overlay's
	   options in mountinfo then name no host path */
	snprintf(opt, sizeof(opt), "/oldroot%s", c->c_l->l_o.lo_rootfs);
	CHECK(c, mkdir("/lower", 0755), "mkdir /lower");
	CHECK(c, mount(opt, "/lower", NULL, MS_BIND | MS_REC, NULL),
	    "bind %s", c->c_l->l_o.lo_rootfs);
	/* from a snapshot: its layers above the base, read-only */
	for (i = 0; i < c->c_nlowers; i++) {
		snprintf(dir, sizeof(dir), "/snap%zu", i);
		CHECK(c, mkdir(dir, 0755), "mkdir %s", dir);
		if (snprintf(opt, sizeof(opt), "/oldroot%s",
		    c->c_lowers[i]) >= (int)sizeof(opt))
			lnc_child_fail(c, ENAMETOOLONG, "snapshot layer");
		CHECK(c, bind_ro(opt, dir, 1), "bind snapshot layer %zu", i);
	}
	len = 0;
	len += (size_t)snprintf(opt + len, sizeof(opt) - len, "lowerdir=");
	for (i = 0; i < c->c_nlowers; i++)
		len += (size_t)snprintf(opt + len, sizeof(opt) - len,
		    "/snap%zu:", i);
	snprintf(opt + len, sizeof(opt) - len,
	    "/lower,upperdir=/gen,workdir=/work/root");
	/* the upper layer stays reachable for snapshots (lnc_snap.c) */
	CHECK(c, fd = open("/gen", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
	    "open the upper layer");
	if (fd != LNC_UPPER_FD) {
		CHECK(c, dup2(fd, LNC_UPPER_FD), "keep the upper layer");
		close(fd);
	}
	CHECK(c, mkdir("/work/root", 0700), "mkdir /work/root");
	CHECK(c, mount("overlay", "/newroot", "overlay", MS_NOSUID | MS_NODEV,
	    opt), "overlay %s", c->c_l->l_o.lo_rootfs);
}

static void
fs_dev(struct lnc_child *c)
{
	static const char *nodes[] = {
		"null", "zero", "full", "random", "urandom", "tty", NULL,
	};
	static const char *links[][2] = {
		{ "/proc/self/fd", "/newroot/dev/fd" },
		{ "/proc/self/fd/0", "/newroot/dev/stdin" },
		{ "/proc/self/fd/1", "/newroot/dev/stdout" },
		{ "/proc/self/fd/2", "/newroot/dev/stderr" },
		{ "pts/ptmx", "/newroot/dev/ptmx" },
		{ NULL, NULL },
	};
	char	src[64], dst[64];
	int	i, fd;

	CHECK(c, mkdirs("/newroot/dev", 0755), "mkdir /dev");
	/* the nodes are bind mounts: they keep devtmpfs's flags */
	CHECK(c, tmpfs("/newroot/dev", "0755", 1 << 20, MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, 0, 0), "tmpfs /dev");
	for (i = 0; nodes[i] != NULL; i++) {
		snprintf(src, sizeof(src), "/oldroot/dev/%s", nodes[i]);
		snprintf(dst, sizeof(dst), "/newroot/dev/%s", nodes[i]);
		fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		CHECK(c, fd, "create %s", dst);
		close(fd);
		CHECK(c, mount(src, dst, NULL, MS_BIND, NULL), "bind %s", src);
	}
	for (i = 0; links[i][0] != NULL; i++)
		CHECK(c, symlink(links[i][0], links[i][1]), "%s", links[i][1]);
	CHECK(c, mkdir("/newroot/dev/pts", 0755), "mkdir /dev/pts");
	CHECK(c, mount("devpts", "/newroot/dev/pts", "devpts",
	    MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"),
	    "devpts");
	CHECK(c, mkdir("/newroot/dev/shm", 0755), "mkdir /dev/shm");
	CHECK(c, bind_rw("/rw/shm", "/newroot/dev/shm", MOUNT_ATTR_NOEXEC),
	    "/dev/shm");
	CHECK(c, mkdir("/newroot/dev/mqueue", 0755), "mkdir /dev/mqueue");
	CHECK(c, mount("mqueue", "/newroot/dev/mqueue", "mqueue",
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "mqueue");
}

/*
 * The private root. Like bubblewrap: a scratch tmpfs becomes the root
 * first, the host's at /oldroot, so every source is reachable by a fixed
 * path while /newroot is built; then /newroot becomes the root and the
 * scratch (with the host below it) is detached.
 */
void
lnc_root_setup(struct lnc_child *c)
{
	struct lnc		*l = c->c_l;
	struct mount_attr	 ma;
	uint64_t		 size;
	char			 sysbundle[PATH_MAX];
	size_t			 i;
	int			 fd;

	size = l->l_o.lo_memory ? l->l_o.lo_memory : TMPFS_DEFAULT;
	/* nothing we mount may propagate back to the host */
	CHECK(c, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL),
	    "make / private");
	CHECK(c, tmpfs("/tmp", "0755", size, MS_NOSUID | MS_NODEV, 0, 0),
	    "scratch tmpfs");
	CHECK(c, chdir("/tmp"), "chdir scratch");
	CHECK(c, mkdir("oldroot", 0700), "mkdir oldroot");
	CHECK(c, mkdir("newroot", 0755), "mkdir newroot");
	CHECK(c, mkdir("work", 0700), "mkdir work");
	CHECK(c, mkdir("gen", 0755), "mkdir gen");
	CHECK(c, syscall(SYS_pivot_root, ".", "oldroot"), "pivot_root");
	CHECK(c, chdir("/"), "chdir /");
	rw_dirs(c);
	if ((fd = open("/empty", O_WRONLY | O_CREAT | O_CLOEXEC, 0)) == -1)
		lnc_child_fail(c, errno, "/empty");
	close(fd);

	snprintf(sysbundle, sizeof(sysbundle), "/oldroot%s/%s",
	    l->l_o.lo_rootfs ? l->l_o.lo_rootfs : "", SYS_BUNDLE);
	gen_write(c, sysbundle);
	if (l->l_o.lo_rootfs == NULL)
		fs_host_tools(c, size);
	else
		fs_rootfs(c);

	fs_dev(c);
	CHECK(c, mkdirs("/newroot/proc", 0755), "mkdir /proc");
	CHECK(c, mount("proc", "/newroot/proc", "proc",
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "mount /proc");
	CHECK(c, mkdirs("/newroot/tmp", 0755), "mkdir /tmp");
	CHECK(c, bind_rw("/rw/tmp", "/newroot/tmp", 0), "/tmp");
	CHECK(c, mkdirs("/newroot" LNC_HOME, 0755), "mkdir " LNC_HOME);
	CHECK(c, bind_rw("/rw/home", "/newroot" LNC_HOME, 0), LNC_HOME);
	if (l->l_o.lo_rootfs == NULL) {
		CHECK(c, mkdir("/newroot/run", 0755), "mkdir /run");
		CHECK(c, mkdir("/newroot/var", 0755), "mkdir /var");
		CHECK(c, symlink("../tmp", "/newroot/var/tmp"), "/var/tmp");
	}
	for (i = 0; i < c->c_nmasks; i++)
		mask_one(c, c->c_masks[i]);

	/* /newroot becomes / ; the scratch and the host under it go */
	CHECK(c, chdir("/newroot"), "chdir /newroot");
	CHECK(c, syscall(SYS_pivot_root, ".", "."), "pivot_root");
	CHECK(c, umount2(".", MNT_DETACH), "detach the old root");
	CHECK(c, chdir("/"), "chdir /");
	if (l->l_o.lo_rootfs == NULL) {
		memset(&ma, 0, sizeof(ma));
		ma.attr_set = MOUNT_ATTR_RDONLY;
		CHECK(c, mount_setattr(AT_FDCWD, "/", 0, &ma, sizeof(ma)),
		    "read-only /");
	}
}
