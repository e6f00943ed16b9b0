/*
 * launcher.snapshots.max_bytes lowered below what the store holds (issue
 * 22, point 5): at every start (host setup) and on a reload that changes
 * it, the store is measured against the bound as it is now. The oldest
 * snapshots nothing depends on (no pool, pin or child snapshot; the qemu
 * template is in use while launcher.qemu.snapshot is on) are pruned until
 * it fits; what is still over is logged as an error naming the key, and
 * new snapshots are refused (507, "does not fit") until snapshots are
 * deleted or the bound is raised.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include <sys/stat.h>

#include "launcher/lnc_internal.h"
#include "util/log.h"

int
lnc_snap_limit(struct lnc *l, uint64_t max, char *out, size_t outsz)
{
	struct stat	sb;
	uint64_t	bytes = 0;
	int		rc;

	l->l_o.lo_snap_max = max;
	/* no store yet (the gateway makes state_dir after host setup): none
	   to recheck, and none made here */
	if (l->l_o.lo_snapdir == NULL || lstat(l->l_o.lo_snapdir, &sb) == -1 ||
	    !S_ISDIR(sb.st_mode)) {
		snprintf(out, outsz, "no snapshot store");
		return 0;
	}
	rc = lnc_snap_prune(l, &bytes);
	if (rc == -1 && bytes == 0) {
		snprintf(out, outsz, "snapshot store %s cannot be opened",
		    l->l_o.lo_snapdir);
		log_warnx("launcher: %s", out);
		return 0;
	}
	if (rc == 0) {
		snprintf(out, outsz, "the snapshot store holds %" PRIu64
		    " bytes, within launcher.snapshots.max_bytes (%" PRIu64
		    ")", bytes, max);
		return 0;
	}
	snprintf(out, outsz, "the snapshot store holds %" PRIu64 " bytes, "
	    "over launcher.snapshots.max_bytes (%" PRIu64 ") with every "
	    "unreferenced snapshot pruned: the rest is in use (pools, child "
	    "snapshots, the qemu template); new snapshots are refused until "
	    "some are deleted or the bound is raised", bytes, max);
	log_warnx("launcher: %s", out);
	return 0;
}
