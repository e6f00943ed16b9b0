#include "config.h"

#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/exec.h"
#include "util/util.h"

#define EXEC_WAIT_STEP_MS	10	/* polling a child after its EOF */

extern char **environ;

/* Milliseconds left until <end> (monotonic), 0 when past. */
static int
ms_left(uint64_t end)
{
	uint64_t	now = util_now_ms();

	if (now >= end)
		return 0;
	return end - now > INT_MAX ? INT_MAX : (int)(end - now);
}

static void
kill_group(pid_t pid)
{
	/* the command's own group: "sh -c" may have started others */
	(void)kill(-pid, SIGKILL);
	(void)kill(pid, SIGKILL);
}

static int
spawn_sh(const char *cmd, int out, pid_t *pid, char *why, size_t whysz)
{
	posix_spawn_file_actions_t	 fa;
	posix_spawnattr_t		 sa;
	sigset_t			 mask;
	char				*argv[4];
	int				 err;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out, 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	/* the daemon ignores SIGPIPE and blocks signals: not the child */
	posix_spawnattr_init(&sa);
	sigemptyset(&mask);
	posix_spawnattr_setsigmask(&sa, &mask);
	sigaddset(&mask, SIGPIPE);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGUSR2);
	posix_spawnattr_setsigdefault(&sa, &mask);
	posix_spawnattr_setpgroup(&sa, 0);
	posix_spawnattr_setflags(&sa, POSIX_SPAWN_SETSIGMASK |
	    POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
	argv[0] = (char *)"sh";
	argv[1] = (char *)"-c";
	argv[2] = (char *)cmd;
	argv[3] = NULL;
	err = posix_spawn(pid, "/bin/sh", &fa, &sa, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&sa);
	if (err != 0) {
		snprintf(why, whysz, "cannot run /bin/sh: %s", strerror(err));
		return -1;
	}
	return 0;
}

int
util_exec(const char *cmd, char *buf, size_t bufsz, size_t *len,
    uint64_t timeout_ms, int stopfd, int *stopped, char *why, size_t whysz)
{
	struct pollfd	 pfd[2];
	uint64_t	 end;
	pid_t		 pid, w = -1;
	ssize_t		 r;
	int		 p[2], i, fd, status = 0, rc;
	int		 over = 0, eof = 0, perr = 0, stop = 0;

	*len = 0;
	if (pipe2(p, O_CLOEXEC) == -1) {
		snprintf(why, whysz, "pipe: %s", strerror(errno));
		return -1;
	}
	/* with stdin or stdout closed the pipe could land on 0 or 1 */
	for (i = 0; i < 2; i++) {
		if (p[i] > 2)
			continue;
		if ((fd = fcntl(p[i], F_DUPFD_CLOEXEC, 3)) == -1) {
			snprintf(why, whysz, "fcntl: %s", strerror(errno));
			close(p[0]);
			close(p[1]);
			return -1;
		}
		close(p[i]);
		p[i] = fd;
	}
	rc = spawn_sh(cmd, p[1], &pid, why, whysz);
	close(p[1]);
	if (rc == -1) {
		close(p[0]);
		return -1;
	}

	end = util_now_ms() + timeout_ms;
	pfd[0].fd = p[0];
	pfd[0].events = POLLIN;
	pfd[1].fd = stopfd;
	pfd[1].events = POLLIN;
	/* stdout until EOF, then the exit: both within the timeout */
	for (;;) {
		if (eof) {
			if ((w = waitpid(pid, &status, WNOHANG)) == pid ||
			    (w == -1 && errno != EINTR))
				break;
			pfd[0].fd = -1;
		}
		if ((i = ms_left(end)) == 0) {
			over = 2;
			break;
		}
		if (eof && i > EXEC_WAIT_STEP_MS)
			i = EXEC_WAIT_STEP_MS;
		if ((rc = poll(pfd, 2, i)) == -1 && errno == EINTR)
			continue;
		if (rc == -1) {
			perr = errno;
			over = 3;
			break;
		}
		if (stopfd != -1 && pfd[1].revents != 0) {
			stop = 1;
			over = 3;
			break;
		}
		if (eof || pfd[0].revents == 0)
			continue;
		r = read(p[0], buf + *len, bufsz - *len);
		if (r == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			eof = 1;
			continue;
		}
		*len += (size_t)r;
		if (*len == bufsz) {
			over = 1;
			break;
		}
	}
	close(p[0]);
	if (stopped != NULL)
		*stopped = stop;
	if (over) {
		kill_group(pid);
		while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
			;
		if (over == 1)
			snprintf(why, whysz, "printed more than %zu bytes",
			    bufsz - 1);
		else if (over == 2 && timeout_ms % 1000 == 0)
			snprintf(why, whysz, "timed out after %llus",
			    (unsigned long long)timeout_ms / 1000);
		else if (over == 2)
			snprintf(why, whysz, "timed out after %llums",
			    (unsigned long long)timeout_ms);
		else if (perr != 0)
			snprintf(why, whysz, "poll: %s", strerror(perr));
		else
			snprintf(why, whysz, "stopped");
		return -1;
	}
	/* SIGCHLD ignored or the child reaped elsewhere: no status */
	if (w == pid && WIFSIGNALED(status)) {
		snprintf(why, whysz, "killed by signal %d", WTERMSIG(status));
		return -1;
	}
	if (w == pid && WEXITSTATUS(status) != 0) {
		snprintf(why, whysz, "exited with status %d",
		    WEXITSTATUS(status));
		return -1;
	}
	return 0;
}
