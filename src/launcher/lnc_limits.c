/*
 * Limits on hosts without cgroup v2 (issue 24, point 2). cgroup v2 is
 * lnc_host.c's; here: the cgroup v1 pids and memory controllers where
 * they are mounted (a directory <lo_cgroup>/<id> in each hierarchy),
 * else RLIMIT_NPROC, RLIMIT_AS and RLIMIT_FSIZE as a fallback. The
 * launcher puts the sandbox's init into its v1 cgroups, or (once it is
 * built) sets the fallback rlimits on the init; launcher_enter_exec()
 * makes the workload join the same cgroups and copies the init's rlimits
 * just before its execve (lnc_limits_join, lnc_limits_rlimits).
 * The log says once which mechanism each limit uses.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include "launcher/lnc_internal.h"
#include "util/log.h"
#include "util/util.h"

static const char *const cg1_names[LNC_CG1_N] = { "pids", "memory" };

/*
 * Where the v1 hierarchy with <ctl> is mounted (super options of a
 * "cgroup" line in mountinfo name it), into <mnt>; 0 or -1.
 */
static int
cg1_mount(const char *ctl, char *mnt, size_t mntsz)
{
	char	 line[PATH_MAX * 2], point[PATH_MAX], *dash, *opt, *tok;
	char	*save;
	FILE	*f;
	int	 found = 0;

	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
		return -1;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		if ((dash = strstr(line, " - cgroup ")) == NULL)
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1)
			continue;
		/* " - cgroup SOURCE OPTIONS" */
		opt = strrchr(dash, ' ');
		if (opt == NULL)
			continue;
		opt[strcspn(opt, "\n")] = '\0';
		for (tok = strtok_r(opt + 1, ",", &save); tok != NULL;
		    tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, ctl) == 0)
				found = 1;
	}
	fclose(f);
	if (!found)
		return -1;
	snprintf(mnt, mntsz, "%s", point);
	return 0;
}

void
lnc_limits_detect(struct lnc *l)
{
	char	mnt[PATH_MAX], path[PATH_MAX + 80];
	int	i;

	for (i = 0; i < LNC_CG1_N; i++) {
		if (l->l_cg2 || l->l_o.lo_cgroup[0] == '/' ||
		    cg1_mount(cg1_names[i], mnt, sizeof(mnt)) == -1)
			continue;
		snprintf(path, sizeof(path), "%s/%s", mnt, l->l_o.lo_cgroup);
		if (mkdir(path, 0755) == -1 && errno != EEXIST) {
			log_warn("launcher: mkdir %s", path);
			continue;
		}
		l->l_cg1[i] = xstrdup(path);
	}
	if (l->l_cg2) {
		log_info("launcher: limits: pids and memory by cgroup v2%s",
		    l->l_cg_limits ? "" : " (controllers missing: none)");
		return;
	}
	log_info("launcher: limits: pids by %s, memory by %s; one tmpfs "
	    "budget of launcher.limits.memory for /tmp, /dev/shm and home",
	    l->l_cg1[LNC_CG1_PIDS] ? "the cgroup v1 pids controller" :
	    "RLIMIT_NPROC (per user, not per sandbox)",
	    l->l_cg1[LNC_CG1_MEM] ? "the cgroup v1 memory controller" :
	    "RLIMIT_AS and RLIMIT_FSIZE (per process)");
}

void
lnc_limits_fini(struct lnc *l)
{
	int	i;

	for (i = 0; i < LNC_CG1_N; i++) {
		if (l->l_cg1[i] != NULL && rmdir(l->l_cg1[i]) == -1 &&
		    errno != ENOENT && errno != EBUSY)
			log_warn("launcher: rmdir %s", l->l_cg1[i]);
		free(l->l_cg1[i]);
		l->l_cg1[i] = NULL;
	}
}

static int
write_u64(const char *dir, const char *file, uint64_t v)
{
	char	path[PATH_MAX * 2], val[32];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)v);
	return lnc_write_file(path, val);
}

/* The init's fallback rlimits, once it is built (no effect on it then:
 * root, and it allocates nothing more); launcher_enter_exec() copies
 * them. */
int
lnc_limits_rlimits_set(struct lnc *l, pid_t pid, const char **what)
{
	struct rlimit	rl;

	if (l->l_cg1[LNC_CG1_PIDS] == NULL && l->l_o.lo_pids) {
		rl.rlim_cur = rl.rlim_max = l->l_o.lo_pids;
		*what = "RLIMIT_NPROC";
		if (prlimit(pid, RLIMIT_NPROC, &rl, NULL) == -1)
			return -1;
	}
	if (l->l_cg1[LNC_CG1_MEM] == NULL && l->l_o.lo_memory) {
		rl.rlim_cur = rl.rlim_max = l->l_o.lo_memory;
		*what = "RLIMIT_AS";
		if (prlimit(pid, RLIMIT_AS, &rl, NULL) == -1)
			return -1;
		*what = "RLIMIT_FSIZE";
		if (prlimit(pid, RLIMIT_FSIZE, &rl, NULL) == -1)
			return -1;
	}
	return 0;
}

int
lnc_limits_attach(struct lnc *l, struct lnc_sbx *s, pid_t pid,
    const char **what)
{
	char	path[PATH_MAX + 80];
	int	i;

	if (l->l_cg2)
		return 0;
	for (i = 0; i < LNC_CG1_N; i++) {
		if (l->l_cg1[i] == NULL)
			continue;
		snprintf(path, sizeof(path), "%s/%s", l->l_cg1[i], s->s_id);
		*what = cg1_names[i];
		if (mkdir(path, 0755) == -1 && errno != EEXIST)
			return -1;
		s->s_cg1[i] = xstrdup(path);
		if (i == LNC_CG1_PIDS && l->l_o.lo_pids &&
		    write_u64(path, "pids.max", l->l_o.lo_pids) == -1)
			return -1;
		if (i == LNC_CG1_MEM && l->l_o.lo_memory &&
		    write_u64(path, "memory.limit_in_bytes",
		    l->l_o.lo_memory) == -1)
			return -1;
		if (write_u64(path, "cgroup.procs", (uint64_t)pid) == -1)
			return -1;
	}
	return 0;
}

void
lnc_limits_remove(struct lnc_sbx *s)
{
	int	i, n;

	for (i = 0; i < LNC_CG1_N; i++) {
		if (s->s_cg1[i] == NULL)
			continue;
		/* empty once the init is reaped; allow a moment */
		for (n = 0; n < 100; n++) {
			if (rmdir(s->s_cg1[i]) == 0 || errno == ENOENT)
				break;
			if (errno != EBUSY) {
				log_warn("launcher: rmdir %s", s->s_cg1[i]);
				break;
			}
			usleep(1000);
		}
		free(s->s_cg1[i]);
		s->s_cg1[i] = NULL;
	}
}

/* ---- launcher_enter_exec() side --------------------------------------- */

/* The v1 cgroup path of <pid> for controller <ctl>, or "". */
static void
cg1_path(pid_t pid, const char *ctl, char *buf, size_t bufsz)
{
	char	 path[64], line[PATH_MAX], *c, *p, *tok, *save;
	FILE	*f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return;
	/* "ID:CONTROLLERS:PATH" */
	while (buf[0] == '\0' && fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if ((c = strchr(line, ':')) == NULL ||
		    (p = strchr(c + 1, ':')) == NULL)
			continue;
		*p++ = '\0';
		for (tok = strtok_r(c + 1, ",", &save); tok != NULL;
		    tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, ctl) == 0)
				snprintf(buf, bufsz, "%s", p);
	}
	fclose(f);
}

static const int	rl_res[LNC_RL_N] = { RLIMIT_NPROC, RLIMIT_AS, RLIMIT_FSIZE };

void
lnc_limits_open(pid_t init_pid, pid_t launcher_pid, struct lnc_join *j)
{
	char	mine[PATH_MAX], theirs[PATH_MAX], mnt[PATH_MAX];
	char	dst[PATH_MAX * 2 + 16];
	int	i;

	for (i = 0; i < LNC_CG1_N; i++) {
		j->j_fds[i] = -1;
		cg1_path(init_pid, cg1_names[i], mine, sizeof(mine));
		cg1_path(launcher_pid, cg1_names[i], theirs, sizeof(theirs));
		/* only a cgroup the launcher made for it */
		if (mine[0] == '\0' || strcmp(mine, theirs) == 0 ||
		    cg1_mount(cg1_names[i], mnt, sizeof(mnt)) == -1)
			continue;
		snprintf(dst, sizeof(dst), "%s%s/cgroup.procs", mnt,
		    strcmp(mine, "/") == 0 ? "" : mine);
		j->j_fds[i] = open(dst, O_WRONLY | O_CLOEXEC);
	}
	/* the init carries the fallback rlimits (read here: the init's
	   host pid means nothing inside its PID namespace) */
	for (i = 0; i < LNC_RL_N; i++)
		j->j_have[i] = prlimit(init_pid, rl_res[i], NULL,
		    &j->j_rl[i]) == 0;
}

int
lnc_limits_join(const struct lnc_join *j)
{
	int	i;

	for (i = 0; i < LNC_CG1_N; i++)
		if (j->j_fds[i] != -1 && write(j->j_fds[i], "0", 1) != 1)
			return -1;
	return 0;
}

int
lnc_limits_rlimits(const struct lnc_join *j)
{
	struct rlimit	own;
	int		i;

	/* take any of the init's rlimits lower than ours, never raise */
	for (i = 0; i < LNC_RL_N; i++) {
		if (!j->j_have[i] || getrlimit(rl_res[i], &own) == -1)
			continue;
		if (j->j_rl[i].rlim_max < own.rlim_max &&
		    setrlimit(rl_res[i], &j->j_rl[i]) == -1)
			return -1;
	}
	return 0;
}
