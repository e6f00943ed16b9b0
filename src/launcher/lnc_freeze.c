/*
 * Freezing a netns sandbox for a snapshot (lnc_snap.c, issue 22): every
 * process of its PID namespace into a cgroup v1 freezer cgroup of its own
 * (/sys/fs/cgroup/freezer/airlock-snap-<init pid>) set FROZEN; where there
 * is no v1 freezer, or it fails, SIGSTOP to each of them (SIGCONT after:
 * a process the workload had stopped itself is continued too). Thawing
 * moves them back to the root freezer cgroup and removes theirs.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "launcher/lnc_internal.h"
#include "util/log.h"

#define FREEZER		"/sys/fs/cgroup/freezer"


/* Every pid in the PID namespace of <init> into <fn>; how many. */
static int
pidns_each(pid_t init, int (*fn)(pid_t, void *), void *arg)
{
	struct dirent	*de;
	struct stat	 ns, sb;
	char		 path[64];
	DIR		*d;
	pid_t		 p;
	int		 n = 0;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)init);
	if (stat(path, &ns) == -1 || (d = opendir("/proc")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if ((p = (pid_t)atoi(de->d_name)) <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)p);
		if (stat(path, &sb) == 0 && sb.st_ino == ns.st_ino &&
		    sb.st_dev == ns.st_dev)
			n += fn(p, arg);
	}
	closedir(d);
	return n;
}

static int
pid_into(pid_t p, void *arg)
{
	char	buf[32];
	int	fd = *(int *)arg, len;

	len = snprintf(buf, sizeof(buf), "%d\n", (int)p);
	return write(fd, buf, len) == len;
}

static int
pid_signal(pid_t p, void *arg)
{
	return kill(p, *(int *)arg) == 0;
}


static int
freezer_state(const char *cg, const char *want)
{
	char	path[160], buf[32];
	ssize_t	n;
	int	fd, i;

	snprintf(path, sizeof(path), "%s/freezer.state", cg);
	for (i = 0; i < 500; i++) {
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			return -1;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0 && strncmp(buf, want, strlen(want)) == 0)
			return 0;
		usleep(10000);
	}
	errno = ETIMEDOUT;
	return -1;
}

int
lnc_freeze(struct lnc_sbx *s, struct lnc_freeze *f)
{
	char	path[160];
	int	fd, sig = SIGSTOP, i;

	memset(f, 0, sizeof(*f));
	snprintf(f->cg, sizeof(f->cg), FREEZER "/airlock-snap-%d",
	    (int)s->s_pid);
	if (access(FREEZER "/cgroup.procs", F_OK) == 0 &&
	    (mkdir(f->cg, 0700) == 0 || errno == EEXIST)) {
		snprintf(path, sizeof(path), "%s/cgroup.procs", f->cg);
		if ((fd = open(path, O_WRONLY | O_CLOEXEC)) != -1) {
			/* twice: a process forked meanwhile joins too */
			for (i = 0; i < 2; i++)
				(void)pidns_each(s->s_pid, pid_into, &fd);
			close(fd);
			snprintf(path, sizeof(path), "%s/freezer.state",
			    f->cg);
			if (lnc_write_file(path, "FROZEN") == 0 &&
			    freezer_state(f->cg, "FROZEN") == 0)
				return 0;
		}
		log_warnx("launcher: freezer %s: %s; SIGSTOP instead", f->cg,
		    strerror(errno));
		lnc_thaw(s, f);	/* out of the half-frozen cgroup first */
	}
	f->cg[0] = '\0';
	for (i = 0; i < 3; i++)
		(void)pidns_each(s->s_pid, pid_signal, &sig);
	f->stopped = 1;
	return 0;
}

void
lnc_thaw(struct lnc_sbx *s, struct lnc_freeze *f)
{
	char	path[160];
	int	sig = SIGCONT, fd;

	if (f->stopped) {
		(void)pidns_each(s->s_pid, pid_signal, &sig);
		return;
	}
	snprintf(path, sizeof(path), "%s/freezer.state", f->cg);
	(void)lnc_write_file(path, "THAWED");
	/* back to the root freezer cgroup, then the empty one goes */
	if ((fd = open(FREEZER "/cgroup.procs", O_WRONLY | O_CLOEXEC)) != -1) {
		(void)pidns_each(s->s_pid, pid_into, &fd);
		close(fd);
	}
	(void)rmdir(f->cg);
}
