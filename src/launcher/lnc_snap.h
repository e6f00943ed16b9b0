/*
 * The snapshot store (lnc_snap_store.c), as the snapshot operations
 * (lnc_snap.c) use it: its directories, its refs, what no ref needs any
 * more, and the bound it is kept under. Internal to the launcher; the
 * store's layout is described in lnc_snap.c.
 */
#ifndef AIRLOCK_LNC_SNAP_H
#define AIRLOCK_LNC_SNAP_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/lnc_internal.h"

#define SNAP_DEFAULT_MAX (1ULL << 30)

/* refs/<name>: "layer parent bytes created sandbox", one line. */
struct snap_ref {
	char		name[LNC_ID_MAX];
	char		layer[65];
	char		parent[LNC_ID_MAX];	/* "" = on the base */
	uint64_t	bytes;
	int64_t		created;
	char		sandbox[LNC_ID_MAX];
};

/* <state_dir>/snapshots and its subdirectories, made when missing (0700,
 * root): its fd, or -1 with <why>. */
int	snap_store_open(struct lnc *, char *why, size_t whysz);
/* Directory <name> of <dfd>, never through a symlink: an fd, or -1. */
int	snap_subdir(int dfd, const char *name);
/* The mount id of <fd>: 0, or -1. */
int	snap_mnt_id(int fd, uint64_t *id);
/*
 * Remove <name> under <dfd> and everything below it, on the mount <mnt>
 * only: a symlink is removed, never followed; a directory on another
 * mount is left in place (-1, EXDEV). 0 when all of it went.
 */
int	snap_rm_tree_at(int dfd, const char *name, uint64_t mnt);
int	snap_ref_read(int sfd, const char *name, struct snap_ref *);
/* Written to tmp/, synced, renamed over refs/<name>. */
int	snap_ref_write(int sfd, const struct snap_ref *);
/* Every ref, oldest first; *n of them. Caller frees. */
struct snap_ref *snap_refs_all(int sfd, size_t *n);
/* A parent of another snapshot, or the source of a pool: kept. */
int	snap_ref_in_use(struct lnc *, const struct snap_ref *v, size_t n,
	    const char *name);
/* Remove layers no ref names and objects no layer links. */
void	snap_store_gc(int sfd);
/* launcher.snapshots.max_bytes, or its default. */
uint64_t snap_store_max(struct lnc *);
/* What the store's objects, layers and vm files take on disk. */
uint64_t snap_store_bytes(int sfd);
/*
 * Prune the oldest unreferenced snapshots (never <keep>) until the store
 * and <extra> more bytes fit its bound. 0 when they do; -1 when they do
 * not: unless <all>, nothing is pruned when they would not fit even with
 * every prunable one gone; with <all>, as many as can go are pruned.
 */
int	snap_store_fit(struct lnc *, int sfd, const char *keep,
	    uint64_t extra, int all);

#endif
