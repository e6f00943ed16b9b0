/*
 * Snapshots of a netns sandbox's writable state (issue 22, points 1, 5).
 *
 * A sandbox with launcher.rootfs DIR has an overlay whose upper layer
 * lives on its scratch tmpfs, reachable only through a directory fd its
 * init keeps (LNC_UPPER_FD, lnc_root.c). A snapshot freezes the sandbox
 * (lnc_freeze.c: cgroup v1 freezer, else SIGSTOP of its PID namespace),
 * copies that upper layer into the store and thaws it.
 *
 * The store, <state_dir>/snapshots (0700, root):
 *   objects/<sha256>.<mode>.<uid>.<gid>  a regular file's content, owner
 *	and mode; every layer's copy of it is a hard link (deduplicated)
 *   layers/<id>/  a tree in overlayfs lower-layer form: directories (with
 *	their xattrs, trusted.overlay.opaque among them), symlinks, device
 *	nodes (whiteouts are 0:0 character devices), links to objects. <id>
 *	is the sha256 of the tree's manifest and the parent's id: content-
 *	addressed, two equal snapshots share one layer.
 *   refs/<name>  "layer parent bytes created sandbox", one line
 *   vm/vm-<key>.state  the qemu template's saved state (lnc_vmsnap.c)
 * The sandbox's generated files (resolv.conf, hostname, hosts, CA bundle)
 * are never copied: a restored sandbox gets its own.
 *
 * The store itself (its refs, collection, size and pruning) is
 * lnc_snap_store.c, behind lnc_snap.h; capture and the operations are here.
 *
 * Removal never follows a symlink or crosses a mount: every step is
 * openat/unlinkat relative to a directory fd opened O_NOFOLLOW, and a
 * directory on another mount than the store is refused (left in place).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/xattr.h>

#include <openssl/evp.h>

#include "launcher/lnc_internal.h"
#include "launcher/lnc_snap.h"
#include "util/log.h"
#include "util/util.h"

/* Generated per sandbox (lnc_root.c gen_files): never in a snapshot. */
static const char *snap_skip[] = {
	"etc/resolv.conf", "etc/hostname", "etc/hosts",
	"etc/airlock/ca-bundle.pem", "etc/ssl/certs/ca-certificates.crt",
	NULL,
};

struct snap_copy {
	int		 objfd;		/* objects/ */
	EVP_MD_CTX	*tree;		/* the manifest's hash */
	uint64_t	 bytes;		/* regular files' sizes */
	int		 err;		/* the first failure's errno */
	char		*why;
	size_t		 whysz;
};

/* ---- capture -------------------------------------------------------- */

static void
tree_line(struct snap_copy *sc, const char *rel, const struct stat *sb,
    const char *extra)
{
	char	buf[PATH_MAX + 256];
	int	n;

	n = snprintf(buf, sizeof(buf), "%o %u %u %ju %s %s\n",
	    (unsigned)sb->st_mode, (unsigned)sb->st_uid, (unsigned)sb->st_gid,
	    (uintmax_t)sb->st_rdev, rel, extra);
	EVP_DigestUpdate(sc->tree, buf, n > 0 ? (size_t)n : 0);
}

/* A regular file: its content into objects/ (once), linked as <name>. */
static int
copy_file(struct snap_copy *sc, int sfd, const char *name, int dfd,
    const struct stat *sb, const char *rel)
{
	unsigned char	 md[EVP_MAX_MD_SIZE], buf[65536];
	char		 tmp[64], obj[192], h[2 * EVP_MAX_MD_SIZE + 1];
	EVP_MD_CTX	*ctx;
	unsigned	 mdlen;
	ssize_t		 n;
	int		 in, out, rc = -1, saved;

	if ((in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	snprintf(tmp, sizeof(tmp), "obj.%d.tmp", (int)getpid());
	out = openat(sc->objfd, tmp, O_WRONLY | O_CREAT | O_TRUNC |
	    O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out == -1 || (ctx = EVP_MD_CTX_new()) == NULL) {
		if (out != -1)
			close(out);
		close(in);
		return -1;
	}
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		EVP_DigestUpdate(ctx, buf, n);
		if (util_write_all(out, buf, (size_t)n) == -1)
			goto done;
	}
	if (n == -1)
		goto done;
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	util_hex_encode(md, mdlen, h);
	snprintf(obj, sizeof(obj), "%s.%o.%u.%u", h,
	    (unsigned)(sb->st_mode & 07777), (unsigned)sb->st_uid,
	    (unsigned)sb->st_gid);
	if (fchown(out, sb->st_uid, sb->st_gid) == -1 ||
	    fchmod(out, sb->st_mode & 07777) == -1 || fsync(out) == -1)
		goto done;
	if (faccessat(sc->objfd, obj, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		(void)unlinkat(sc->objfd, tmp, 0);	/* deduplicated */
	else if (renameat(sc->objfd, tmp, sc->objfd, obj) == -1)
		goto done;
	else
		sc->bytes += (uint64_t)sb->st_size;
	if (linkat(sc->objfd, obj, dfd, name, 0) == -1)
		goto done;
	tree_line(sc, rel, sb, h);
	rc = 0;
 done:
	saved = errno;
	if (rc == -1)
		(void)unlinkat(sc->objfd, tmp, 0);
	EVP_MD_CTX_free(ctx);
	close(out);
	close(in);
	errno = saved;
	return rc;
}

/* Every xattr of directory <sfd> onto <dfd> (opaque markers among them). */
static int
copy_xattrs(int sfd, int dfd, struct snap_copy *sc, const char *rel)
{
	char	 names[4096], val[4096], *k;
	ssize_t	 n, vn;
	struct stat sb = { 0 };

	if ((n = flistxattr(sfd, names, sizeof(names))) <= 0)
		return n == -1 && errno != ENOTSUP ? -1 : 0;
	for (k = names; k < names + n; k += strlen(k) + 1) {
		if ((vn = fgetxattr(sfd, k, val, sizeof(val))) == -1)
			return -1;
		if (fsetxattr(dfd, k, val, vn, 0) == -1)
			return -1;
		tree_line(sc, rel, &sb, k);
	}
	return 0;
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
skipped(const char *rel)
{
	int	i;

	for (i = 0; snap_skip[i] != NULL; i++)
		if (strcmp(snap_skip[i], rel) == 0)
			return 1;
	return 0;
}

static int copy_dir(struct snap_copy *, int sfd, int dfd, const char *rel);

static int
copy_entry(struct snap_copy *sc, int sfd, int dfd, const char *name,
    const char *rel)
{
	char		 target[PATH_MAX];
	struct stat	 sb;
	ssize_t		 n;
	int		 s2, d2, rc;

	if (fstatat(sfd, name, &sb, AT_SYMLINK_NOFOLLOW) == -1)
		return -1;
	if (S_ISREG(sb.st_mode))
		return skipped(rel) ? 0 : copy_file(sc, sfd, name, dfd, &sb,
		    rel);
	if (S_ISLNK(sb.st_mode)) {
		if ((n = readlinkat(sfd, name, target, sizeof(target) - 1)) ==
		    -1)
			return -1;
		target[n] = '\0';
		tree_line(sc, rel, &sb, target);
		if (symlinkat(target, dfd, name) == -1)
			return -1;
		return fchownat(dfd, name, sb.st_uid, sb.st_gid,
		    AT_SYMLINK_NOFOLLOW);
	}
	if (!S_ISDIR(sb.st_mode)) {
		/* whiteouts (0:0), other nodes, fifos, sockets */
		tree_line(sc, rel, &sb, "");
		if (mknodat(dfd, name, sb.st_mode, sb.st_rdev) == -1)
			return -1;
		return fchownat(dfd, name, sb.st_uid, sb.st_gid,
		    AT_SYMLINK_NOFOLLOW);
	}
	tree_line(sc, rel, &sb, "");
	if (mkdirat(dfd, name, 0700) == -1)
		return -1;
	if ((s2 = snap_subdir(sfd, name)) == -1)
		return -1;
	if ((d2 = snap_subdir(dfd, name)) == -1) {
		close(s2);
		return -1;
	}
	rc = copy_dir(sc, s2, d2, rel);
	if (rc == 0 && (copy_xattrs(s2, d2, sc, rel) == -1 ||
	    fchown(d2, sb.st_uid, sb.st_gid) == -1 ||
	    fchmod(d2, sb.st_mode & 07777) == -1))
		rc = -1;
	close(s2);
	close(d2);
	return rc;
}

/* The entries of <sfd> into <dfd>, in name order (the manifest's). */
static int
copy_dir(struct snap_copy *sc, int sfd, int dfd, const char *rel)
{
	struct dirent	*de;
	char		**names = NULL, **nn, sub[PATH_MAX];
	size_t		  n = 0, cap = 0, i;
	DIR		 *d;
	int		  fd, rc = 0;

	if ((fd = dup(sfd)) == -1 || (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		return -1;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			if ((nn = realloc(names, cap * sizeof(*nn))) == NULL) {
				rc = -1;
				break;
			}
			names = nn;
		}
		if ((names[n] = strdup(de->d_name)) == NULL) {
			rc = -1;
			break;
		}
		n++;
	}
	closedir(d);
	if (names != NULL)
		qsort(names, n, sizeof(*names), name_cmp);
	for (i = 0; i < n; i++) {
		if (rc == 0) {
			snprintf(sub, sizeof(sub), "%s%s%s", rel,
			    *rel ? "/" : "", names[i]);
			if (copy_entry(sc, sfd, dfd, names[i], sub) == -1) {
				if (sc->err == 0) {
					sc->err = errno ? errno : EIO;
					snprintf(sc->why, sc->whysz,
					    "copy %s: %s", sub,
					    strerror(sc->err));
				}
				rc = -1;
			}
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

/* ---- operations ----------------------------------------------------- */

static int __attribute__((format(printf, 4, 5)))
snap_err(char *why, size_t whysz, int err, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return err;
}

/*
 * Copy the frozen upper layer <ufd> into a new layer; its id (the tree's
 * hash) in <id>. 0 or an errno value.
 */
static int
capture(struct lnc *l, int sfd, int ufd, const char *parent_layer,
    char *id, uint64_t *bytes, char *why, size_t whysz)
{
	struct snap_copy sc;
	unsigned char	 md[EVP_MAX_MD_SIZE];
	unsigned	 mdlen;
	char		 tmp[64], dst[128];
	uint64_t	 mnt = 0;
	int		 tfd, dfd, rc, err;

	(void)l;
	memset(&sc, 0, sizeof(sc));
	sc.why = why;
	sc.whysz = whysz;
	if ((sc.objfd = snap_subdir(sfd, "objects")) == -1 ||
	    (tfd = snap_subdir(sfd, "tmp")) == -1)
		return snap_err(why, whysz, errno, "store: %s",
		    strerror(errno));
	snprintf(tmp, sizeof(tmp), "layer.%d", (int)getpid());
	(void)snap_mnt_id(sfd, &mnt);
	(void)snap_rm_tree_at(tfd, tmp, mnt);
	if (mkdirat(tfd, tmp, 0700) == -1 ||
	    (dfd = snap_subdir(tfd, tmp)) == -1) {
		err = errno;
		close(tfd);
		close(sc.objfd);
		return snap_err(why, whysz, err, "store: %s", strerror(err));
	}
	sc.tree = EVP_MD_CTX_new();
	EVP_DigestInit_ex(sc.tree, EVP_sha256(), NULL);
	EVP_DigestUpdate(sc.tree, parent_layer, strlen(parent_layer));
	rc = copy_dir(&sc, ufd, dfd, "");
	err = sc.err ? sc.err : errno;
	EVP_DigestFinal_ex(sc.tree, md, &mdlen);
	EVP_MD_CTX_free(sc.tree);
	close(dfd);
	close(sc.objfd);
	if (rc == -1) {
		(void)snap_rm_tree_at(tfd, tmp, mnt);
		close(tfd);
		return err ? err : EIO;
	}
	util_hex_encode(md, mdlen, id);
	snprintf(dst, sizeof(dst), "layers/%s", id);
	if (faccessat(sfd, dst, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		(void)snap_rm_tree_at(tfd, tmp, mnt);	/* the same tree */
	else if (renameat(tfd, tmp, sfd, dst) == -1) {
		err = errno;
		(void)snap_rm_tree_at(tfd, tmp, mnt);
		close(tfd);
		return snap_err(why, whysz, err, "store: %s", strerror(err));
	}
	close(tfd);
	*bytes = sc.bytes;
	return 0;
}

static int
upper_open(struct lnc_sbx *s)
{
	char	path[64];

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)s->s_pid,
	    LNC_UPPER_FD);
	return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int
snap_create(struct lnc *l, int sfd, const struct lnc_m_snap *m,
    char *out, size_t outsz)
{
	struct lnc_freeze	 f;
	struct snap_ref		 r, p;
	struct lnc_sbx		*s;
	int			 ufd, err;

	if ((s = lnc_sbx_find(l, m->ms_id)) == NULL)
		return snap_err(out, outsz, ENOENT, "no sandbox %s",
		    m->ms_id);
	if (s->s_vm || l->l_o.lo_rootfs == NULL)
		return snap_err(out, outsz, ENOTSUP, "%s",
		    "snapshots need backend netns with launcher.rootfs");
	if (snap_ref_read(sfd, m->ms_name, &r) == 0)
		return snap_err(out, outsz, EEXIST, "snapshot %s exists",
		    m->ms_name);
	memset(&r, 0, sizeof(r));
	memset(&p, 0, sizeof(p));
	snprintf(r.name, sizeof(r.name), "%s", m->ms_name);
	snprintf(r.sandbox, sizeof(r.sandbox), "%s", s->s_id);
	snprintf(r.parent, sizeof(r.parent), "%s", s->s_from);
	if (r.parent[0] != '\0' && snap_ref_read(sfd, r.parent, &p) == -1)
		return snap_err(out, outsz, ENOENT, "parent %s is gone",
		    r.parent);
	if ((ufd = upper_open(s)) == -1)
		return snap_err(out, outsz, errno, "upper layer: %s",
		    strerror(errno));
	lnc_freeze(s, &f);
	log_info("launcher: snapshot %s of %s: frozen by %s", r.name, s->s_id,
	    f.stopped ? "SIGSTOP" : "the cgroup freezer");
	err = capture(l, sfd, ufd, p.layer, r.layer, &r.bytes, out, outsz);
	lnc_thaw(s, &f);
	close(ufd);
	if (err) {
		snap_store_gc(sfd);
		return err;
	}
	r.created = (int64_t)time(NULL);
	if (snap_ref_write(sfd, &r) == -1) {
		err = errno;
		snap_store_gc(sfd);
		return snap_err(out, outsz, err, "store: %s", strerror(err));
	}
	if (snap_store_fit(l, sfd, r.name, 0, 0) == -1) {
		char path[LNC_ID_MAX + 8];

		snprintf(path, sizeof(path), "refs/%s", r.name);
		(void)unlinkat(sfd, path, 0);
		snap_store_gc(sfd);
		snprintf(out, outsz, "snapshot %s does not fit in "
		    "launcher.snapshots.max_bytes (%" PRIu64 " bytes; the "
		    "others are in use)", r.name, snap_store_max(l));
		return ENOSPC;
	}
	snprintf(out, outsz, "%s %s %s %" PRIu64 " %" PRId64 " %s", r.name,
	    r.layer, r.parent[0] ? r.parent : "-", r.bytes, r.created,
	    r.sandbox);
	return 0;
}

/* A pin per prewarmed pool built from <name>: kept while pinned. */
static int
snap_pin(struct lnc *l, int sfd, int pin, const char *name, char *out,
    size_t outsz)
{
	struct snap_ref	r;
	size_t		i;

	if (!pin) {
		for (i = 0; i < l->l_npins; i++)
			if (strcmp(l->l_pins[i], name) == 0) {
				memmove(l->l_pins[i], l->l_pins[--l->l_npins],
				    sizeof(l->l_pins[i]));
				return 0;
			}
		return snap_err(out, outsz, ENOENT, "snapshot %s is not "
		    "pinned", name);
	}
	if (snap_ref_read(sfd, name, &r) == -1)
		return snap_err(out, outsz, ENOENT, "no snapshot %s", name);
	if (l->l_npins == LNC_PINS_MAX)
		return snap_err(out, outsz, ENOSPC, "more than %d pools "
		    "prewarmed from snapshots", LNC_PINS_MAX);
	snprintf(l->l_pins[l->l_npins++], sizeof(l->l_pins[0]), "%s", name);
	return 0;
}

static int
snap_delete(struct lnc *l, int sfd, const char *name, char *out,
    size_t outsz)
{
	struct snap_ref	*v, r;
	char		 path[LNC_ID_MAX + 8], lpath[80];
	uint64_t	 mnt;
	size_t		 n;
	int		 used, fd, rc = 0;

	if (snap_ref_read(sfd, name, &r) == -1)
		return snap_err(out, outsz, ENOENT, "no snapshot %s", name);
	v = snap_refs_all(sfd, &n);
	used = snap_ref_in_use(l, v, n, name);
	free(v);
	if (used)
		return snap_err(out, outsz, EBUSY, "snapshot %s is in use "
		    "(a parent of another snapshot or a pool's source)", name);
	snprintf(path, sizeof(path), "refs/%s", name);
	if (unlinkat(sfd, path, 0) == -1)
		return snap_err(out, outsz, errno, "store: %s",
		    strerror(errno));
	/* its layer, unless another ref shares it */
	v = snap_refs_all(sfd, &n);
	for (used = 0; n > 0 && !used; n--)
		used = strcmp(v[n - 1].layer, r.layer) == 0;
	free(v);
	if (!used && snap_mnt_id(sfd, &mnt) == 0 &&
	    (fd = snap_subdir(sfd, "layers")) != -1) {
		snprintf(lpath, sizeof(lpath), "%s", r.layer);
		if (snap_rm_tree_at(fd, lpath, mnt) == -1) {
			rc = errno;
			snprintf(out, outsz, "snapshot %s deleted; part of its "
			    "layer left in place: %s", name, strerror(rc));
		}
		close(fd);
	}
	snap_store_gc(sfd);
	return rc;
}

/* LNC_M_SNAP: one operation; the answer (a line, or why) in <out>. */
int
lnc_snap_op(struct lnc *l, const struct lnc_m_snap *m, char *out,
    size_t outsz)
{
	struct snap_ref	*v, r;
	size_t		 n;
	int		 sfd, err = 0;

	out[0] = '\0';
	if ((sfd = snap_store_open(l, out, outsz)) == -1)
		return errno ? errno : EIO;
	switch (m->ms_op) {
	case LNC_SNAP_CREATE:
		err = snap_create(l, sfd, m, out, outsz);
		break;
	case LNC_SNAP_DELETE:
		err = snap_delete(l, sfd, m->ms_name, out, outsz);
		break;
	case LNC_SNAP_LIMIT:
		err = lnc_snap_limit(l, m->ms_bytes, out, outsz);
		break;
	case LNC_SNAP_PIN:
	case LNC_SNAP_UNPIN:
		err = snap_pin(l, sfd, m->ms_op == LNC_SNAP_PIN, m->ms_name,
		    out, outsz);
		break;
	case LNC_SNAP_SHOW:
	case LNC_SNAP_LIST:
		if (m->ms_op == LNC_SNAP_SHOW) {
			if (snap_ref_read(sfd, m->ms_name, &r) == -1) {
				err = snap_err(out, outsz, ENOENT,
				    "no snapshot %s", m->ms_name);
				break;
			}
		} else {
			v = snap_refs_all(sfd, &n);
			if (m->ms_index >= n) {
				free(v);
				err = ENOENT;	/* the end of the list */
				break;
			}
			r = v[m->ms_index];
			free(v);
		}
		snprintf(out, outsz, "%s %s %s %" PRIu64 " %" PRId64 " %s",
		    r.name, r.layer, r.parent[0] ? r.parent : "-", r.bytes,
		    r.created, r.sandbox);
		break;
	default:
		err = snap_err(out, outsz, EINVAL, "%s", "bad snapshot op");
	}
	close(sfd);
	return err;
}

int
lnc_snap_lowers(struct lnc *l, const char *name, char dirs[][PATH_MAX],
    size_t max, size_t *n, char *why, size_t whysz)
{
	struct snap_ref	r;
	char		cur[LNC_ID_MAX];
	int		sfd;

	*n = 0;
	if (l->l_o.lo_rootfs == NULL || l->l_o.lo_vm)
		return snap_err(why, whysz, ENOTSUP, "%s", "sandboxes from a "
		    "snapshot need backend netns with launcher.rootfs");
	if (!lnc_id_valid(name))
		return snap_err(why, whysz, EINVAL, "%s", "bad snapshot name");
	if ((sfd = snap_store_open(l, why, whysz)) == -1)
		return errno ? errno : EIO;
	snprintf(cur, sizeof(cur), "%s", name);
	while (cur[0] != '\0') {
		if (snap_ref_read(sfd, cur, &r) == -1) {
			close(sfd);
			return snap_err(why, whysz, ENOENT, "no snapshot %s",
			    cur);
		}
		if (*n == max) {
			close(sfd);
			return snap_err(why, whysz, ELOOP, "snapshot %s: "
			    "chain too long", name);
		}
		snprintf(dirs[(*n)++], PATH_MAX, "%s/layers/%s",
		    l->l_o.lo_snapdir, r.layer);
		snprintf(cur, sizeof(cur), "%s", r.parent);
	}
	close(sfd);
	return 0;
}

/* The qemu template (lnc_vmsnap.c) lives in vm/, counted with the rest. */
int
lnc_snap_fit(struct lnc *l, uint64_t extra)
{
	char	why[160];
	int	sfd, rc;

	if ((sfd = snap_store_open(l, why, sizeof(why))) == -1)
		return -1;
	rc = snap_store_fit(l, sfd, "", extra, 0);
	close(sfd);
	return rc;
}

int
lnc_snap_prune(struct lnc *l, uint64_t *bytes)
{
	char	why[160];
	int	sfd, rc;

	if ((sfd = snap_store_open(l, why, sizeof(why))) == -1)
		return -1;
	rc = snap_store_fit(l, sfd, "", 0, 1);
	snap_store_gc(sfd);
	*bytes = snap_store_bytes(sfd);
	close(sfd);
	return rc;
}
