/*
 * The snapshot store (lnc_snap.h; its layout in lnc_snap.c): opening it,
 * its refs, removing what no ref needs, the bytes it takes and the
 * pruning that keeps it under launcher.snapshots.max_bytes. Every step is
 * relative to a directory fd opened O_NOFOLLOW, and removal stays on the
 * store's mount.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "launcher/lnc_internal.h"
#include "launcher/lnc_snap.h"
#include "util/log.h"

int
snap_store_open(struct lnc *l, char *why, size_t whysz)
{
	static const char *subs[] = { "objects", "layers", "refs", "tmp",
	    "vm", NULL };
	int	fd, i;

	if (l->l_o.lo_snapdir == NULL) {
		snprintf(why, whysz, "snapshots need state_dir");
		errno = ENOTSUP;
		return -1;
	}
	if (mkdir(l->l_o.lo_snapdir, 0700) == -1 && errno != EEXIST)
		goto fail;
	fd = open(l->l_o.lo_snapdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (fd == -1)
		goto fail;
	if (fchown(fd, 0, 0) == -1 || fchmod(fd, 0700) == -1) {
		close(fd);
		goto fail;
	}
	for (i = 0; subs[i] != NULL; i++)
		if (mkdirat(fd, subs[i], 0700) == -1 && errno != EEXIST) {
			close(fd);
			goto fail;
		}
	return fd;
 fail:
	snprintf(why, whysz, "snapshot store %s: %s", l->l_o.lo_snapdir,
	    strerror(errno));
	return -1;
}

int
snap_subdir(int dfd, const char *name)
{
	return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
}

int
snap_mnt_id(int fd, uint64_t *id)
{
	struct statx	stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID,
	    &stx) == -1)
		return -1;
	*id = stx.stx_mnt_id;
	return 0;
}

/*
 * Remove <name> under <dfd> and everything below it, on the mount <mnt>
 * only: a symlink is removed, never followed; a directory on another
 * mount is left in place (-1, EXDEV). 0 when all of it went.
 */
int
snap_rm_tree_at(int dfd, const char *name, uint64_t mnt)
{
	struct dirent	*de;
	struct stat	 sb;
	uint64_t	 m;
	DIR		*d;
	int		 fd, rc = 0, saved = 0;

	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(sb.st_mode))
		return unlinkat(dfd, name, 0);
	if ((fd = snap_subdir(dfd, name)) == -1)
		return -1;
	if (snap_mnt_id(fd, &m) == -1 || m != mnt) {
		log_warnx("launcher: snapshot store: %s is a mount point, "
		    "left in place", name);
		close(fd);
		errno = EXDEV;
		return -1;
	}
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (snap_rm_tree_at(dirfd(d), de->d_name, mnt) == -1) {
			rc = -1;
			saved = errno;
		}
	}
	closedir(d);
	if (rc == -1) {
		errno = saved;
		return -1;
	}
	return unlinkat(dfd, name, AT_REMOVEDIR);
}

int
snap_ref_read(int sfd, const char *name, struct snap_ref *r)
{
	char	buf[512], path[LNC_ID_MAX + 8];
	ssize_t	n;
	int	fd;

	snprintf(path, sizeof(path), "refs/%s", name);
	if ((fd = openat(sfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		goto bad;
	buf[n] = '\0';
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	if (sscanf(buf, "%64s %63s %" SCNu64 " %" SCNd64 " %63s", r->layer,
	    r->parent, &r->bytes, &r->created, r->sandbox) != 5)
		goto bad;
	if (strcmp(r->parent, "-") == 0)
		r->parent[0] = '\0';
	return 0;
 bad:
	errno = EINVAL;
	return -1;
}

int
snap_ref_write(int sfd, const struct snap_ref *r)
{
	char	buf[512], tmp[LNC_ID_MAX + 16], path[LNC_ID_MAX + 8];
	int	fd, n;

	n = snprintf(buf, sizeof(buf), "%s %s %" PRIu64 " %" PRId64 " %s\n",
	    r->layer, r->parent[0] ? r->parent : "-", r->bytes, r->created,
	    r->sandbox);
	snprintf(tmp, sizeof(tmp), "tmp/ref.%s", r->name);
	snprintf(path, sizeof(path), "refs/%s", r->name);
	fd = openat(sfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (fd == -1)
		return -1;
	if (write(fd, buf, n) != n || fsync(fd) == -1) {
		close(fd);
		unlinkat(sfd, tmp, 0);
		return -1;
	}
	close(fd);
	return renameat(sfd, tmp, sfd, path);
}

/* Every ref, oldest first; *n of them. Caller frees. */
static int
ref_cmp(const void *a, const void *b)
{
	const struct snap_ref *x = a, *y = b;

	if (x->created != y->created)
		return x->created < y->created ? -1 : 1;
	return strcmp(x->name, y->name);
}

struct snap_ref *
snap_refs_all(int sfd, size_t *n)
{
	struct snap_ref	*v = NULL, *nv;
	struct dirent	*de;
	size_t		 cap = 0;
	DIR		*d;
	int		 fd;

	*n = 0;
	if ((fd = snap_subdir(sfd, "refs")) == -1 ||
	    (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		return NULL;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			if ((nv = realloc(v, cap * sizeof(*v))) == NULL)
				break;
			v = nv;
		}
		if (snap_ref_read(sfd, de->d_name, &v[*n]) == 0)
			(*n)++;
	}
	closedir(d);
	if (v != NULL)
		qsort(v, *n, sizeof(*v), ref_cmp);
	return v;
}

/* A parent of another snapshot, or the source of a pool: kept. */
int
snap_ref_in_use(struct lnc *l, const struct snap_ref *v, size_t n,
    const char *name)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i].parent, name) == 0)
			return 1;
	for (i = 0; i < l->l_npins; i++)
		if (strcmp(l->l_pins[i], name) == 0)
			return 1;
	return l->l_o.lo_pool_from != NULL &&
	    strcmp(l->l_o.lo_pool_from, name) == 0;
}

/* Remove layers no ref names and objects no layer links. */
void
snap_store_gc(int sfd)
{
	struct snap_ref	*v;
	struct dirent	*de;
	struct stat	 sb;
	uint64_t	 mnt;
	size_t		 n, i;
	DIR		*d;
	int		 fd, used;

	if (snap_mnt_id(sfd, &mnt) == -1)
		return;
	v = snap_refs_all(sfd, &n);
	if ((fd = snap_subdir(sfd, "layers")) != -1 &&
	    (d = fdopendir(fd)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			for (used = 0, i = 0; i < n && !used; i++)
				used = strcmp(v[i].layer, de->d_name) == 0;
			if (!used)
				(void)snap_rm_tree_at(dirfd(d), de->d_name,
				    mnt);
		}
		closedir(d);
	}
	free(v);
	if ((fd = snap_subdir(sfd, "objects")) != -1 &&
	    (d = fdopendir(fd)) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (de->d_name[0] != '.' &&
			    fstatat(dirfd(d), de->d_name, &sb,
			    AT_SYMLINK_NOFOLLOW) == 0 && sb.st_nlink == 1)
				(void)unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
}

/* Bytes the store takes: objects once each, plus layer metadata. */
static uint64_t
du_at(int dfd, int objects)
{
	struct dirent	*de;
	struct stat	 sb;
	uint64_t	 sum = 0;
	DIR		*d;
	int		 fd;

	if ((fd = dup(dfd)) == -1 || (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    fstatat(dirfd(d), de->d_name, &sb,
		    AT_SYMLINK_NOFOLLOW) == -1)
			continue;
		if (S_ISREG(sb.st_mode) && !objects)
			continue;	/* a link to an object */
		sum += (uint64_t)sb.st_blocks * 512;
		if (S_ISDIR(sb.st_mode) && (fd = snap_subdir(dirfd(d),
		    de->d_name)) != -1) {
			sum += du_at(fd, objects);
			close(fd);
		}
	}
	closedir(d);
	return sum;
}

uint64_t
snap_store_bytes(int sfd)
{
	uint64_t	sum = 0;
	int		fd;

	if ((fd = snap_subdir(sfd, "objects")) != -1) {
		sum += du_at(fd, 1);
		close(fd);
	}
	if ((fd = snap_subdir(sfd, "layers")) != -1) {
		sum += du_at(fd, 0);
		close(fd);
	}
	if ((fd = snap_subdir(sfd, "vm")) != -1) {
		sum += du_at(fd, 1);
		close(fd);
	}
	return sum;
}

uint64_t
snap_store_max(struct lnc *l)
{
	return l->l_o.lo_snap_max ? l->l_o.lo_snap_max : SNAP_DEFAULT_MAX;
}

/* Prune the oldest unreferenced snapshots (never <keep>) until the store
 * fits its bound. 0 when it does. Unless <all>, none is pruned when even
 * all of them would not be enough (a new snapshot is refused instead). */
int
snap_store_fit(struct lnc *l, int sfd, const char *keep, uint64_t extra,
    int all)
{
	struct snap_ref	*v;
	char		 path[LNC_ID_MAX + 8];
	uint64_t	 total, prunable = 0;
	size_t		 n, i;
	int		 pruned;

	snap_store_gc(sfd);
	if ((total = snap_store_bytes(sfd) + extra) <= snap_store_max(l))
		return 0;
	/* would it fit with every prunable one gone? If not, prune none
	   (each ref's bytes: what it added; shared objects make this an
	   estimate) */
	v = snap_refs_all(sfd, &n);
	for (i = 0; i < n; i++)
		if (strcmp(v[i].name, keep) != 0 &&
		    !snap_ref_in_use(l, v, n, v[i].name))
			prunable += v[i].bytes;
	free(v);
	if (!all && total - (prunable < total ? prunable : total) >
	    snap_store_max(l))
		return -1;
	for (;;) {
		snap_store_gc(sfd);
		if (snap_store_bytes(sfd) + extra <= snap_store_max(l))
			return 0;
		v = snap_refs_all(sfd, &n);
		for (pruned = 0, i = 0; i < n && !pruned; i++) {
			if (strcmp(v[i].name, keep) == 0 ||
			    snap_ref_in_use(l, v, n, v[i].name))
				continue;
			snprintf(path, sizeof(path), "refs/%s", v[i].name);
			if (unlinkat(sfd, path, 0) == 0) {
				log_info("launcher: snapshot %s pruned "
				    "(launcher.snapshots.max_bytes)",
				    v[i].name);
				pruned = 1;
			}
		}
		free(v);
		if (!pruned)
			return -1;
	}
}
