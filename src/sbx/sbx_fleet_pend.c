/*
 * The fleet's deletions not yet in Redis, kept on disk: one empty file
 * <state_dir>/fleet-retract/<id> from the deletion until Redis has it.
 * A gateway that stops with some queued (Redis away or silent) sends
 * them at its next start; else Redis would still list the sandbox, and
 * the resynchronisation would bring it back here, token and all.
 */
#include "config.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cfg/cfg.h"
#include "cfg/cfg_internal.h"
#include "sbx/sbx_fleet.h"
#include "util/log.h"
#include "util/util.h"

static char	*sfp_dir;

static int
sfp_path(char *buf, size_t sz, const char *id)
{
	return sfp_dir != NULL && cfg_name_ok(id) &&
	    (size_t)snprintf(buf, sz, "%s/%s", sfp_dir, id) < sz ? 0 : -1;
}

void
sbx_fleet_pend_mark(const char *id)
{
	char	path[1024];
	int	fd;

	if (sfp_path(path, sizeof(path), id) == -1)
		return;
	if (mkdir(sfp_dir, 0700) == -1 && errno != EEXIST) {
		log_warn("fleet registry: mkdir %s", sfp_dir);
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd == -1)
		log_warn("sandbox %s: its deletion not kept for a restart: %s",
		    id, path);
	else
		close(fd);
}

void
sbx_fleet_pend_clear(const char *id)
{
	char	path[1024];

	if (sfp_path(path, sizeof(path), id) == 0 && unlink(path) == -1 &&
	    errno != ENOENT)
		log_warn("fleet registry: unlink %s", path);
}

void
sbx_fleet_pend_load(const char *state_dir, void (*fn)(const char *id))
{
	DIR		*d;
	struct dirent	*de;

	free(sfp_dir);
	if (asprintf(&sfp_dir, "%s/fleet-retract", state_dir) == -1)
		fatal("asprintf");
	if ((d = opendir(sfp_dir)) == NULL) {
		if (errno != ENOENT)
			log_warn("fleet registry: %s", sfp_dir);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (cfg_name_ok(de->d_name))
			fn(de->d_name);
	closedir(d);
}

void
sbx_fleet_pend_free(void)
{
	free(sfp_dir);
	sfp_dir = NULL;
}
