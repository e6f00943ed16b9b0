/*
 * launcher_enter_exec(): run a command inside a sandbox, for airlockctl
 * run (root, not the launcher). Two children: the first enters the
 * namespaces, which leaves the caller untouched; entering a PID namespace
 * only applies to children, so the second is the one that drops every
 * privilege and execs.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "launcher/lnc_internal.h"
#include "util/log.h"

/*
 * A workload that stopped itself (SIGSTOP, a ptrace stop) never acts on
 * SIGTERM: a second SIGTERM or SIGHUP, or the first one's grace period
 * running out, kills every process of the sandbox with SIGKILL.
 */
#define LNC_STOP_GRACE_S	10
#define SIG_KILL_ALL		SIGUSR1	/* outer -> entering child */

static volatile sig_atomic_t	fwd_pid;	/* < 0: a process group */
static volatile sig_atomic_t	fwd_terms;	/* SIGTERM/SIGHUP so far */
static volatile sig_atomic_t	kill_all;	/* SIG_KILL_ALL received */

static void
fwd_signal(int sig)
{
	if (fwd_pid != 0)
		(void)kill((pid_t)fwd_pid, sig);
}

/* The outer process: the first TERM/HUP is passed on, the next one (or
 * the alarm) asks the entering child to kill the whole sandbox. */
static void
fwd_term(int sig)
{
	if (fwd_pid == 0)
		return;
	if (sig != SIGALRM && fwd_terms++ == 0) {
		(void)kill((pid_t)fwd_pid, sig);
		alarm(LNC_STOP_GRACE_S);
	} else
		(void)kill((pid_t)fwd_pid, SIG_KILL_ALL);
}

static void
on_kill_all(int sig)
{
	(void)sig;
	kill_all = 1;
}

/* Exit status as a shell reports it. */
static int
status_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

/*
 * In the entering child (its children are in the sandbox's PID
 * namespace): a child of ours there sends SIGKILL to -1, which inside a
 * PID namespace is every process of it but its init and the sender.
 */
static void
sandbox_kill_all(void)
{
	pid_t	pid;

	if ((pid = fork()) == 0) {
		(void)kill(-1, SIGKILL);
		_exit(0);
	}
	if (pid > 0)
		while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
			;
}

/*
 * Wait for <pid>. The outer process (!session) forwards SIGTERM and SIGHUP
 * to it and escalates (fwd_term), ignores SIGINT and SIGQUIT as system(3)
 * does (the terminal sends them to our whole foreground group anyway).
 * The entering child (<session>) forwards TERM, HUP, INT and QUIT to the
 * workload's process group, as a terminal would, and on SIG_KILL_ALL
 * kills the sandbox's processes.
 */
static int
wait_forwarding(pid_t pid, int session)
{
	struct sigaction	ign, fwd, term, ka, o_int, o_quit, o_term;
	struct sigaction	o_hup, o_alrm, o_ka;
	sigset_t		ka_set;
	int			st;
	pid_t			r;

	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	memset(&fwd, 0, sizeof(fwd));
	fwd.sa_handler = fwd_signal;
	sigemptyset(&fwd.sa_mask);
	term = fwd;
	term.sa_handler = session ? fwd_signal : fwd_term;
	ka = fwd;
	ka.sa_handler = on_kill_all;
	fwd_pid = session ? -pid : pid;
	fwd_terms = 0;
	sigaction(SIGINT, session ? &fwd : &ign, &o_int);
	sigaction(SIGQUIT, session ? &fwd : &ign, &o_quit);
	sigaction(SIGTERM, &term, &o_term);
	sigaction(SIGHUP, &term, &o_hup);
	sigaction(SIGALRM, &term, &o_alrm);
	sigaction(SIG_KILL_ALL, session ? &ka : &ign, &o_ka);
	/* blocked by launcher_enter_exec() until the handler is set */
	sigemptyset(&ka_set);
	sigaddset(&ka_set, SIG_KILL_ALL);
	sigprocmask(SIG_UNBLOCK, &ka_set, NULL);
	for (;;) {
		if ((r = waitpid(pid, &st, 0)) != -1 || errno != EINTR)
			break;
		if (session && kill_all) {
			kill_all = 0;
			sandbox_kill_all();
		}
	}
	alarm(0);
	sigaction(SIGINT, &o_int, NULL);
	sigaction(SIGQUIT, &o_quit, NULL);
	sigaction(SIGTERM, &o_term, NULL);
	sigaction(SIGHUP, &o_hup, NULL);
	sigaction(SIGALRM, &o_alrm, NULL);
	sigaction(SIG_KILL_ALL, &o_ka, NULL);
	fwd_pid = 0;
	return r == -1 ? -1 : st;
}

static const char *
env_get(char *const envp[], const char *name)
{
	size_t	len = strlen(name);

	for (; envp != NULL && *envp != NULL; envp++)
		if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
			return *envp + len + 1;
	return NULL;
}

/* execve argv[0], searched in envp's PATH. Returns only on failure. */
static int
exec_path(char *const argv[], char *const envp[])
{
	const char	*path, *p, *e;
	char		 buf[PATH_MAX];
	int		 err = ENOENT;

	if (strchr(argv[0], '/') != NULL) {
		execve(argv[0], argv, envp);
		return errno;
	}
	if ((path = env_get(envp, "PATH")) == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; ; p = e + 1) {
		e = strchrnul(p, ':');
		if (snprintf(buf, sizeof(buf), "%.*s/%s", (int)(e - p),
		    e == p ? "." : p, argv[0]) < (int)sizeof(buf)) {
			execve(buf, argv, envp);
			/* keep the most telling error, like execvp(3) */
			if (errno == EACCES)
				err = EACCES;
			else if (errno != ENOENT && errno != ENOTDIR &&
			    err != EACCES)
				err = errno;
		}
		if (*e == '\0')
			break;
	}
	return err;
}

/* The workload process: drop everything, exec. Never returns. */
static void __attribute__((noreturn))
run_workload(uid_t uid, gid_t gid, char *const argv[], char *const envp[],
    int flags, const struct lnc_join *join)
{
	struct __user_cap_header_struct	hdr;
	struct __user_cap_data_struct	data[2];
	sigset_t			none;
	int				cap, err;

	/* a session of its own: no TIOCSTI into the caller's terminal */
	(void)setsid();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (cap = 1; cap < NSIG; cap++)
		if (cap != SIGKILL && cap != SIGSTOP)
			signal(cap, SIG_DFL);
	if (chdir("/") == -1)
		_exit(126);
	/* the bounding set needs CAP_SETPCAP, so before setuid */
	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == -1 &&
		    errno != EINVAL)
			goto fail;
	if (setgroups(0, NULL) == -1 || setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1)
		goto fail;
	if (uid != 0 && (setuid(0) != -1 || seteuid(0) != -1))
		goto fail;	/* must be impossible now */
	memset(&hdr, 0, sizeof(hdr));
	memset(data, 0, sizeof(data));
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	if (syscall(SYS_capset, &hdr, data) == -1)
		goto fail;
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		goto fail;
	/* no new namespaces, mounts, keyrings, bpf ... (lnc_seccomp.c) */
	if (lnc_seccomp_apply((flags & LNC_EXEC_IO_URING) != 0) == -1) {
		fprintf(stderr, "airlock: seccomp filter: %s\n",
		    strerror(errno));
		_exit(126);
	}
	/* the fallback rlimits last: nothing of ours allocates after them */
	if (lnc_limits_rlimits(join) == -1)
		goto fail;
	/* only 0, 1 and 2 cross into the sandbox */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	err = exec_path(argv, envp);
	fprintf(stderr, "airlock: %s: %s\n", argv[0], strerror(err));
	_exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
 fail:
	fprintf(stderr, "airlock: dropping privileges: %s\n",
	    strerror(errno));
	_exit(126);
}

/* The "0::/path" (cgroup v2) line of /proc/<pid>/cgroup, or "". */
static void
cg_path(pid_t pid, char *buf, size_t bufsz)
{
	char	path[64], line[PATH_MAX];
	FILE	*f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "0::/", 4) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(buf, bufsz, "%s", line + 3);
			break;
		}
	fclose(f);
}

/* The parent of <pid> (the launcher, for an init), or -1. */
static pid_t
init_parent(pid_t pid)
{
	char	path[64], buf[512], *p;
	int	fd, n, ppid;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL || sscanf(p, ") %*c %d",
	    &ppid) != 1)
		return -1;
	return (pid_t)ppid;
}

/*
 * An open fd on the cgroup.procs of the init's cgroup v2, when the
 * launcher gave it one of its own (it differs from the launcher's), so the
 * command joins it and its limits; else -1. Opened before we enter the
 * mount namespace: the cgroup filesystem is not visible inside.
 */
static int
cg_procs_fd(pid_t init_pid)
{
	char	 mine[PATH_MAX], parents[PATH_MAX];
	char	 line[PATH_MAX], dst[PATH_MAX * 2];
	char	 mnt[PATH_MAX], root[PATH_MAX], *dash;
	FILE	*f;
	pid_t	 ppid;
	int	 found = 0;
	size_t	 rlen;

	cg_path(init_pid, mine, sizeof(mine));
	if (mine[0] == '\0')
		return -1;
	if ((ppid = init_parent(init_pid)) == -1)
		return -1;
	cg_path(ppid, parents, sizeof(parents));
	if (strcmp(mine, parents) == 0)
		return -1;		/* not placed by the launcher */
	/* where is the cgroup2 hierarchy mounted? */
	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
		return -1;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		if ((dash = strstr(line, " - cgroup2 ")) == NULL)
			continue;
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) == 2)
			found = 1;
	}
	fclose(f);
	if (!found)
		return -1;
	rlen = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (strncmp(mine, root, rlen) != 0)
		return -1;
	snprintf(dst, sizeof(dst), "%s%s/cgroup.procs", mnt, mine + rlen);
	return open(dst, O_WRONLY | O_CLOEXEC);
}

static void __attribute__((noreturn))
enter_fail(int errfd)
{
	(void)!write(errfd, "E", 1);
	_exit(1);
}

static void __attribute__((noreturn))
enter_child(int errfd, pid_t init_pid, uid_t uid, gid_t gid,
    char *const argv[], char *const envp[], int flags)
{
	static const struct {
		const char	*name;
		int		 type;
	} ns[] = {
		{ "cgroup", CLONE_NEWCGROUP }, { "ipc", CLONE_NEWIPC },
		{ "uts", CLONE_NEWUTS }, { "net", CLONE_NEWNET },
		{ "pid", CLONE_NEWPID }, { "mnt", CLONE_NEWNS },
	};
	char	path[64], comm[32];
	struct lnc_join	join;
	int	fds[6], i, fd, st, cgfd;
	size_t	n;
	pid_t	pid;

	/* is it still one of ours? (pids get reused) */
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)init_pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    (n = read(fd, comm, sizeof(comm) - 1)) <= 0) {
		fprintf(stderr, "airlock: sandbox init %d: %s\n",
		    (int)init_pid, strerror(errno));
		enter_fail(errfd);
	}
	close(fd);
	comm[n] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
	if (strcmp(comm, LNC_INIT_NAME) != 0) {
		fprintf(stderr, "airlock: pid %d is not a sandbox init\n",
		    (int)init_pid);
		enter_fail(errfd);
	}
	/* open them all first: after entering mnt, /proc is the sandbox's */
	for (i = 0; i < 6; i++) {
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)init_pid,
		    ns[i].name);
		if ((fds[i] = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
			fprintf(stderr, "airlock: %s: %s\n", path,
			    strerror(errno));
			enter_fail(errfd);
		}
	}
	cgfd = cg_procs_fd(init_pid);
	lnc_limits_open(init_pid, init_parent(init_pid), &join);
	/* the cgroup namespace last, by the workload, after joining */
	for (i = 1; i < 6; i++) {
		if (setns(fds[i], ns[i].type) == -1) {
			fprintf(stderr, "airlock: entering the sandbox's %s "
			    "namespace: %s\n", ns[i].name, strerror(errno));
			enter_fail(errfd);
		}
		close(fds[i]);
	}
	if ((pid = fork()) == -1) {
		fprintf(stderr, "airlock: fork: %s\n", strerror(errno));
		enter_fail(errfd);
	}
	if (pid == 0) {
		if (cgfd != -1 && write(cgfd, "0", 1) != 1) {
			fprintf(stderr, "airlock: joining the sandbox's "
			    "cgroup: %s\n", strerror(errno));
			_exit(126);
		}
		if (lnc_limits_join(&join) == -1) {
			fprintf(stderr, "airlock: joining the sandbox's "
			    "limits: %s\n", strerror(errno));
			_exit(126);
		}
		if (setns(fds[0], CLONE_NEWCGROUP) == -1) {
			fprintf(stderr, "airlock: entering the sandbox's "
			    "cgroup namespace: %s\n", strerror(errno));
			_exit(126);
		}
		run_workload(uid, gid, argv, envp, flags, &join);
	}
	/* we are root inside the sandbox's mount namespace: hold nothing */
	close_range(3, ~0U, 0);
	/* the workload has a session of its own: the terminal's signals
	 * reach us, not it */
	st = wait_forwarding(pid, 1);
	_exit(st == -1 ? 1 : status_code(st));
}

int
launcher_enter_exec(pid_t init_pid, uid_t uid, gid_t gid,
    char *const argv[], char *const envp[])
{
	return launcher_enter_exec_flags(init_pid, uid, gid, argv, envp, 0);
}

int
launcher_enter_exec_flags(pid_t init_pid, uid_t uid, gid_t gid,
    char *const argv[], char *const envp[], int flags)
{
	sigset_t ka_set, o_mask;
	pid_t	 pid;
	int	 st, ep[2];
	char	 b;

	if (argv == NULL || argv[0] == NULL || init_pid <= 1) {
		log_warnx("launcher_enter_exec: nothing to run");
		return -1;
	}
	/* the first child says "E" here when it could not enter */
	if (pipe2(ep, O_CLOEXEC | O_NONBLOCK) == -1) {
		log_warn("launcher_enter_exec: pipe");
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	/* the child unblocks it once its handler is in place */
	sigemptyset(&ka_set);
	sigaddset(&ka_set, SIG_KILL_ALL);
	sigprocmask(SIG_BLOCK, &ka_set, &o_mask);
	if ((pid = fork()) == -1) {
		log_warn("launcher_enter_exec: fork");
		sigprocmask(SIG_SETMASK, &o_mask, NULL);
		close(ep[0]);
		close(ep[1]);
		return -1;
	}
	if (pid == 0) {
		close(ep[0]);
		enter_child(ep[1], init_pid, uid, gid, argv, envp, flags);
	}
	close(ep[1]);
	st = wait_forwarding(pid, 0);
	sigprocmask(SIG_SETMASK, &o_mask, NULL);
	if (st == -1)
		log_warn("launcher_enter_exec: waitpid");
	if (read(ep[0], &b, 1) == 1)
		st = -1;
	close(ep[0]);
	return st == -1 ? -1 : status_code(st);
}
