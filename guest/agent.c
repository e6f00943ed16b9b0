/*
 * airlock-guest: the agent inside a launcher.backend qemu guest.
 *
 * Runs as pid 1 (guest/init execs it) and serves the host over the
 * virtio-serial port named "airlock.ctl": one session at a time, one
 * command at a time, as the unprivileged workload user. Frames in both
 * directions are 1 byte type, u32 big-endian payload length (at most
 * 65536), payload; docs/guest-image.md has the message set.
 *
 * Built static with no dependency beyond libc, so the image needs no
 * loader for it. Single-threaded, one poll loop; signals arrive through
 * a signalfd.
 */
#define _GNU_SOURCE
#include <sys/ioctl.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/random.h>

#define FRAME_MAX	65536		/* payload bound, both directions */
#define HDR_LEN		5
#define READ_CHUNK	16384
#define OUTQ_MAX	(256 * 1024)	/* stop reading the workload above */
#define INQ_MAX		(1024 * 1024)	/* stop reading the port above */
#define DRAIN_MS	2000		/* output of escaped children, at most */
#define IDLE_POLL_MS	1000		/* no host: SIGIO wakes us, this backs up */
#define IDLE_POLL_NOSIGIO_MS 100	/* ... and without SIGIO, this polls */
#define PORT_WAIT_MS	10000		/* for the port's device to show up */
#define DEFAULT_PATH	"/usr/local/bin:/usr/bin:/bin"
#define WORK_DIR	"/home/sandbox"

enum {
	EXIT_CANNOT_RUN = 126,
	EXIT_NOT_FOUND = 127,
};

/* A byte queue with a start offset, so consuming from the front is cheap. */
struct buf {
	unsigned char	*b_data;
	size_t		 b_off;		/* first unconsumed byte */
	size_t		 b_len;		/* end of valid bytes */
	size_t		 b_cap;
};

static struct agent {
	int		 ag_port;	/* control port, O_NONBLOCK */
	int		 ag_sigfd;
	int		 ag_connected;
	int		 ag_broken;	/* protocol error: ignore input */
	int		 ag_sigio;	/* the port signals (dis)connects */
	struct buf	 ag_rx;		/* bytes from the host, unparsed */
	struct buf	 ag_tx;		/* frames to the host */
	uid_t		 ag_uid;
	gid_t		 ag_gid;
	/* the workload; w_pid 0 when none */
	pid_t		 w_pid;
	int		 w_exited;
	int		 w_status;	/* as sent in X */
	int		 w_in;		/* pipe ends, -1 when closed */
	int		 w_out;
	int		 w_err;
	int		 w_in_eof;	/* 'i' seen: close w_in once drained */
	struct buf	 w_inq;		/* stdin bytes not yet written */
	uint64_t	 w_deadline;	/* drain limit after exit, ms */
} ag;

static void
warnx(const char *fmt, ...)
{
	va_list	ap;

	fputs("airlock-guest: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Give up: as pid 1 we end the VM (qemu runs with -no-reboot). */
static void __attribute__((noreturn))
die(const char *why)
{
	printf("AIRLOCK-FAIL %s\n", why);
	fflush(stdout);
	sync();
	if (getpid() == 1)
		reboot(RB_AUTOBOOT);
	exit(1);
}

static uint64_t
now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
put_u32(unsigned char *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t
get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static size_t
buf_used(const struct buf *b)
{
	return b->b_len - b->b_off;
}

/* Room for <n> more bytes; compacts first. Out of memory is fatal. */
static void
buf_reserve(struct buf *b, size_t n)
{
	if (b->b_off > 0) {
		memmove(b->b_data, b->b_data + b->b_off, buf_used(b));
		b->b_len -= b->b_off;
		b->b_off = 0;
	}
	if (b->b_cap - b->b_len >= n)
		return;
	while (b->b_cap - b->b_len < n)
		b->b_cap = b->b_cap ? b->b_cap * 2 : READ_CHUNK;
	if ((b->b_data = realloc(b->b_data, b->b_cap)) == NULL)
		die("out of memory");
}

static void
buf_add(struct buf *b, const void *p, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->b_data + b->b_len, p, n);
	b->b_len += n;
}

static void
buf_drop(struct buf *b, size_t n)
{
	b->b_off += n;
	if (b->b_off == b->b_len)
		b->b_off = b->b_len = 0;
}

static void
buf_clear(struct buf *b)
{
	b->b_off = b->b_len = 0;
}

/* Queue one frame to the host; <len> is at most FRAME_MAX. */
static void
send_frame(int type, const void *p, size_t len)
{
	unsigned char	hdr[HDR_LEN];

	if (!ag.ag_connected)
		return;
	hdr[0] = type;
	put_u32(hdr + 1, len);
	buf_add(&ag.ag_tx, hdr, sizeof(hdr));
	if (len > 0)
		buf_add(&ag.ag_tx, p, len);
}

static void
send_exit(int status)
{
	unsigned char	p[4];

	put_u32(p, status);
	send_frame('X', p, sizeof(p));
}

/* F with a reason, then X: a command that never ran. */
static void
send_fail(int status, const char *fmt, ...)
{
	char	msg[512];
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	send_frame('F', msg, (size_t)n < sizeof(msg) ? (size_t)n :
	    sizeof(msg) - 1);
	send_exit(status);
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Forget the workload; SIGKILL its process group if it still runs. */
static void
workload_reset(int kill_it)
{
	if (ag.w_pid > 0 && kill_it) {
		kill(-ag.w_pid, SIGKILL);
		kill(ag.w_pid, SIGKILL);
	}
	/* a later SIGCHLD for it is reaped as an orphan */
	ag.w_pid = 0;
	ag.w_exited = 0;
	close_fd(&ag.w_in);
	close_fd(&ag.w_out);
	close_fd(&ag.w_err);
	ag.w_in_eof = 0;
	buf_clear(&ag.w_inq);
}

/*
 * The stream cannot be trusted any more: end the command, tell the host
 * why, and ignore what it sends until it disconnects.
 */
static void
protocol_error(const char *why)
{
	warnx("protocol error: %s", why);
	workload_reset(1);
	send_fail(EXIT_CANNOT_RUN, "protocol error: %s", why);
	ag.ag_broken = 1;
	buf_clear(&ag.ag_rx);
}

/* ---- the workload ------------------------------------------------- */

/* What the child tells the parent when it cannot exec. */
struct exec_err {
	int	ee_status;
	int	ee_errno;
	char	ee_what[64];
};

static void __attribute__((noreturn))
child_fail(int fd, int status, int err, const char *what)
{
	struct exec_err	ee;

	memset(&ee, 0, sizeof(ee));
	ee.ee_status = status;
	ee.ee_errno = err;
	snprintf(ee.ee_what, sizeof(ee.ee_what), "%s", what);
	(void)!write(fd, &ee, sizeof(ee));
	_exit(status);
}

/* execve <file> from the PATH of <envp> when it has no '/'. */
static void __attribute__((noreturn))
child_exec(int errfd, char **argv, char **envp)
{
	const char	*path = NULL, *p, *end;
	char		 full[PATH_MAX];
	int		 eacces = 0, i;
	size_t		 dl, fl;

	if (strchr(argv[0], '/') != NULL) {
		execve(argv[0], argv, envp);
		child_fail(errfd, errno == ENOENT || errno == ENOTDIR ?
		    EXIT_NOT_FOUND : EXIT_CANNOT_RUN, errno, "execve");
	}
	for (i = 0; envp[i] != NULL; i++)
		if (strncmp(envp[i], "PATH=", 5) == 0)
			path = envp[i] + 5;
	if (path == NULL)
		path = DEFAULT_PATH;
	fl = strlen(argv[0]);
	for (p = path;; p = end + 1) {
		if ((end = strchr(p, ':')) == NULL)
			end = p + strlen(p);
		dl = end - p;
		if (dl == 0) {		/* empty entry: the current dir */
			p = ".";
			dl = 1;
		}
		if (dl + 1 + fl + 1 <= sizeof(full)) {
			memcpy(full, p, dl);
			full[dl] = '/';
			memcpy(full + dl + 1, argv[0], fl + 1);
			execve(full, argv, envp);
			if (errno == EACCES)
				eacces = 1;
			else if (errno != ENOENT && errno != ENOTDIR)
				child_fail(errfd, EXIT_CANNOT_RUN, errno,
				    "execve");
		}
		if (*end == '\0')
			break;
	}
	if (eacces)
		child_fail(errfd, EXIT_CANNOT_RUN, EACCES, "execve");
	child_fail(errfd, EXIT_NOT_FOUND, ENOENT, "not found");
}

/*
 * In the child: its own session and process group, stdio = the pipes, no
 * other descriptor, the workload user, /home/sandbox. Never returns.
 */
static void __attribute__((noreturn))
child_start(int in, int out, int err, int errfd, char **argv, char **envp)
{
	sigset_t	all;
	int		sig;

	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);	/* SIGPIPE was ignored */
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (setsid() == -1)
		child_fail(errfd, EXIT_CANNOT_RUN, errno, "setsid");
	if (dup2(in, 0) == -1 || dup2(out, 1) == -1 || dup2(err, 2) == -1 ||
	    dup2(errfd, 3) == -1)
		child_fail(errfd, EXIT_CANNOT_RUN, errno, "dup2");
	errfd = 3;
	if (fcntl(errfd, F_SETFD, FD_CLOEXEC) == -1)
		child_fail(errfd, EXIT_CANNOT_RUN, errno, "fcntl");
	close_range(4, ~0U, 0);
	if (setgroups(0, NULL) == -1)
		child_fail(errfd, EXIT_CANNOT_RUN, errno, "setgroups");
	if (setgid(ag.ag_gid) == -1)
		child_fail(errfd, EXIT_CANNOT_RUN, errno, "setgid");
	if (setuid(ag.ag_uid) == -1)
		child_fail(errfd, EXIT_CANNOT_RUN, errno, "setuid");
	if (getuid() == 0 || geteuid() == 0)	/* belt and braces */
		child_fail(errfd, EXIT_CANNOT_RUN, EPERM, "still root");
	if (chdir(WORK_DIR) == -1)
		child_fail(errfd, EXIT_CANNOT_RUN, errno, "chdir " WORK_DIR);
	umask(022);
	child_exec(errfd, argv, envp);
}

static int
pipe_nb(int p[2])
{
	return pipe2(p, O_CLOEXEC | O_NONBLOCK);
}

static void
run_command(char **argv, char **envp)
{
	int		in[2] = { -1, -1 }, out[2] = { -1, -1 };
	int		err[2] = { -1, -1 }, ep[2] = { -1, -1 };
	struct exec_err	ee;
	ssize_t		n;
	pid_t		pid;
	int		st;

	if (pipe_nb(in) == -1 || pipe_nb(out) == -1 || pipe_nb(err) == -1 ||
	    pipe2(ep, O_CLOEXEC) == -1) {
		send_fail(EXIT_CANNOT_RUN, "pipe: %s", strerror(errno));
		goto fail;
	}
	if ((pid = fork()) == -1) {
		send_fail(EXIT_CANNOT_RUN, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		/* the child's ends must block like any stdio */
		fcntl(in[0], F_SETFL, 0);
		fcntl(out[1], F_SETFL, 0);
		fcntl(err[1], F_SETFL, 0);
		close(ep[0]);
		child_start(in[0], out[1], err[1], ep[1], argv, envp);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	close(ep[1]);
	/* EOF = exec happened; so setsid() is done before any K arrives */
	do
		n = read(ep[0], &ee, sizeof(ee));
	while (n == -1 && errno == EINTR);
	close(ep[0]);
	if (n > 0) {
		while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
			;
		if (n != sizeof(ee))
			send_fail(EXIT_CANNOT_RUN, "%s: cannot run", argv[0]);
		else if (ee.ee_status == EXIT_NOT_FOUND)
			send_fail(EXIT_NOT_FOUND, "%s: command not found",
			    argv[0]);
		else
			send_fail(ee.ee_status, "%s: %s: %s", argv[0],
			    ee.ee_what, strerror(ee.ee_errno));
		close(in[1]);
		close(out[0]);
		close(err[0]);
		return;
	}
	ag.w_pid = pid;
	ag.w_exited = 0;
	ag.w_in = in[1];
	ag.w_out = out[0];
	ag.w_err = err[0];
	ag.w_in_eof = 0;
	buf_clear(&ag.w_inq);
	return;
fail:
	close_fd(&in[0]);
	close_fd(&in[1]);
	close_fd(&out[0]);
	close_fd(&out[1]);
	close_fd(&err[0]);
	close_fd(&err[1]);
	close_fd(&ep[0]);
	close_fd(&ep[1]);
}

/*
 * R: u32 argc, u32 envc, then argc + envc NUL-terminated strings that
 * fill the payload exactly.
 */
static void
handle_run(unsigned char *p, size_t len)
{
	static char	*vec[FRAME_MAX + 2];	/* each string takes a byte */
	char		*s, *end;
	uint32_t	 argc, envc, i;

	if (ag.w_pid > 0) {
		protocol_error("R while a command runs");
		return;
	}
	if (len < 8) {
		send_fail(EXIT_CANNOT_RUN, "malformed R: short");
		return;
	}
	argc = get_u32(p);
	envc = get_u32(p + 4);
	if (argc == 0 || argc > len || envc > len ||
	    argc + envc > (uint32_t)(sizeof(vec) / sizeof(vec[0]) - 2)) {
		send_fail(EXIT_CANNOT_RUN, "malformed R: bad counts");
		return;
	}
	s = (char *)p + 8;
	end = (char *)p + len;
	for (i = 0; i < argc + envc; i++) {
		char *nul = memchr(s, '\0', end - s);

		if (nul == NULL) {
			send_fail(EXIT_CANNOT_RUN,
			    "malformed R: %u strings announced, %u found",
			    argc + envc, i);
			return;
		}
		vec[i + (i >= argc)] = s;	/* a NULL between the two */
		s = nul + 1;
	}
	if (s != end) {
		send_fail(EXIT_CANNOT_RUN, "malformed R: bytes after the "
		    "strings");
		return;
	}
	vec[argc] = NULL;
	vec[argc + envc + 1] = NULL;
	if (vec[0][0] == '\0') {
		send_fail(EXIT_NOT_FOUND, "empty command name");
		return;
	}
	run_command(vec, vec + argc + 1);
}

static void
handle_frame(int type, unsigned char *p, size_t len)
{
	int	running = ag.w_pid > 0 && !ag.w_exited;

	switch (type) {
	case 'R':
		handle_run(p, len);
		break;
	case 'I':
		/* after exit or 'i' the bytes have nowhere to go */
		if (running && ag.w_in >= 0 && !ag.w_in_eof)
			buf_add(&ag.w_inq, p, len);
		break;
	case 'i':
		if (len != 0) {
			protocol_error("i with a payload");
			break;
		}
		if (running) {
			ag.w_in_eof = 1;
			if (buf_used(&ag.w_inq) == 0)
				close_fd(&ag.w_in);
		}
		break;
	case 'K':
		if (len != 1 || p[0] == 0 || p[0] >= NSIG) {
			protocol_error("bad K");
			break;
		}
		if (running)
			kill(-ag.w_pid, p[0]);
		break;
	default:
		protocol_error("unknown frame type");
		break;
	}
}

/* Take whole frames out of ag_rx. */
static void
parse_rx(void)
{
	unsigned char	*p;
	uint32_t	 len;

	while (!ag.ag_broken && buf_used(&ag.ag_rx) >= HDR_LEN) {
		p = ag.ag_rx.b_data + ag.ag_rx.b_off;
		len = get_u32(p + 1);
		if (len > FRAME_MAX) {
			protocol_error("frame longer than 65536");
			return;
		}
		if (buf_used(&ag.ag_rx) < HDR_LEN + len)
			return;
		handle_frame(p[0], p + HDR_LEN, len);
		if (!ag.ag_broken)
			buf_drop(&ag.ag_rx, HDR_LEN + len);
	}
}

/* ---- the host connection ------------------------------------------ */

static void
host_gone(void)
{
	unsigned char	junk[READ_CHUNK];
	struct pollfd	pfd = { .fd = ag.ag_port, .events = POLLIN };

	workload_reset(1);
	ag.ag_connected = 0;
	ag.ag_broken = 0;
	buf_clear(&ag.ag_rx);
	buf_clear(&ag.ag_tx);
	/*
	 * What the old host sent and we did not read is not the next one's;
	 * but once a new host is there (no POLLHUP), what we read is its.
	 */
	while (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP) &&
	    read(ag.ag_port, junk, sizeof(junk)) > 0)
		;
}

/*
 * Whether a host is connected: the port polls POLLHUP while none is
 * (reads then return 0 at once, so it must not be polled for input).
 */
static void
host_check(void)
{
	struct pollfd	pfd = { .fd = ag.ag_port, .events = POLLIN };

	if (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP) == 0)
		ag.ag_connected = 1;
}

static void
port_read(void)
{
	ssize_t	n;

	buf_reserve(&ag.ag_rx, READ_CHUNK);
	n = read(ag.ag_port, ag.ag_rx.b_data + ag.ag_rx.b_len, READ_CHUNK);
	if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
		host_gone();
		return;
	}
	if (n < 0)
		return;
	if (ag.ag_broken) {
		buf_clear(&ag.ag_rx);
		return;
	}
	ag.ag_rx.b_len += n;
	parse_rx();
}

static void
port_write(void)
{
	ssize_t	n;

	n = write(ag.ag_port, ag.ag_tx.b_data + ag.ag_tx.b_off,
	    buf_used(&ag.ag_tx));
	if (n > 0)
		buf_drop(&ag.ag_tx, n);
	else if (n == -1 && errno != EAGAIN && errno != EINTR)
		host_gone();
}

/* ---- the loop ----------------------------------------------------- */

static void
reap(void)
{
	pid_t	pid;
	int	st;

	/* pid 1 reaps every orphan too */
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		if (pid != ag.w_pid || ag.w_exited)
			continue;
		ag.w_exited = 1;
		ag.w_status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) :
		    WEXITSTATUS(st);
		/* what it left running ends with it */
		kill(-pid, SIGKILL);
		ag.w_deadline = now_ms() + DRAIN_MS;
		close_fd(&ag.w_in);
		buf_clear(&ag.w_inq);
	}
}

static void
pipe_read(int *fd, int type)
{
	unsigned char	b[FRAME_MAX];	/* a full pipe in one frame */
	ssize_t		n;

	n = read(*fd, b, sizeof(b));
	if (n > 0)
		send_frame(type, b, n);
	else if (n == 0 || (errno != EAGAIN && errno != EINTR))
		close_fd(fd);
}

static void
stdin_write(void)
{
	ssize_t	n;

	n = write(ag.w_in, ag.w_inq.b_data + ag.w_inq.b_off,
	    buf_used(&ag.w_inq));
	if (n > 0)
		buf_drop(&ag.w_inq, n);
	else if (n == -1 && errno != EAGAIN && errno != EINTR) {
		close_fd(&ag.w_in);	/* EPIPE: it closed its stdin */
		buf_clear(&ag.w_inq);
	}
	if (ag.w_in >= 0 && ag.w_in_eof && buf_used(&ag.w_inq) == 0)
		close_fd(&ag.w_in);
}

/* After exit and EOF on both pipes (or the drain limit): X. */
static void
workload_finish(void)
{
	if (ag.w_pid == 0 || !ag.w_exited)
		return;
	if ((ag.w_out >= 0 || ag.w_err >= 0) && now_ms() < ag.w_deadline)
		return;
	send_exit(ag.w_status);
	workload_reset(0);
}

static void
serve(void)
{
	struct pollfd			 pfd[5];
	struct signalfd_siginfo		 si;
	struct pollfd			*pport, *pout, *perr, *pin;
	int				 n, timeout;

	for (;;) {
		if (!ag.ag_connected)
			host_check();
		n = 0;
		pfd[n++] = (struct pollfd){ .fd = ag.ag_sigfd, .events = POLLIN };
		pport = pout = perr = pin = NULL;
		if (ag.ag_connected) {
			pport = &pfd[n++];
			*pport = (struct pollfd){ .fd = ag.ag_port };
			if (buf_used(&ag.w_inq) < INQ_MAX)
				pport->events |= POLLIN;
			if (buf_used(&ag.ag_tx) > 0)
				pport->events |= POLLOUT;
		}
		if (buf_used(&ag.ag_tx) < OUTQ_MAX) {
			if (ag.w_out >= 0) {
				pout = &pfd[n++];
				*pout = (struct pollfd){ .fd = ag.w_out,
				    .events = POLLIN };
			}
			if (ag.w_err >= 0) {
				perr = &pfd[n++];
				*perr = (struct pollfd){ .fd = ag.w_err,
				    .events = POLLIN };
			}
		}
		if (ag.w_in >= 0 && buf_used(&ag.w_inq) > 0) {
			pin = &pfd[n++];
			*pin = (struct pollfd){ .fd = ag.w_in,
			    .events = POLLOUT };
		}
		timeout = -1;
		if (!ag.ag_connected)
			timeout = ag.ag_sigio ? IDLE_POLL_MS :
			    IDLE_POLL_NOSIGIO_MS;
		if (ag.w_pid > 0 && ag.w_exited) {
			uint64_t now = now_ms();

			timeout = now >= ag.w_deadline ? 0 :
			    (int)(ag.w_deadline - now);
		}
		if (poll(pfd, n, timeout) == -1) {
			if (errno == EINTR)
				continue;
			die("poll failed");
		}
		if (pfd[0].revents & POLLIN) {
			/* SIGIO: the host (dis)connected; SIGCHLD: reap */
			while (read(ag.ag_sigfd, &si, sizeof(si)) == sizeof(si))
				;
			reap();
		}
		if (pout != NULL && pout->revents)
			pipe_read(&ag.w_out, 'O');
		if (perr != NULL && perr->revents)
			pipe_read(&ag.w_err, 'E');
		if (pin != NULL && pin->revents && ag.w_in >= 0)
			stdin_write();
		if (pport != NULL && ag.ag_connected) {
			/* what is left from a gone host is dropped with it */
			if (pport->revents & (POLLHUP | POLLERR))
				host_gone();
			else if (pport->revents & POLLIN)
				port_read();
		}
		workload_finish();
		if (ag.ag_connected && buf_used(&ag.ag_tx) > 0)
			port_write();
	}
}

/* /dev/vportNpM of the virtio-serial port named <name>. */
static int
find_port(const char *name, char *dev, size_t devsz)
{
	DIR		*d;
	struct dirent	*de;
	char		 path[PATH_MAX], got[256];
	FILE		*f;
	int		 found = 0;

	if ((d = opendir("/sys/class/virtio-ports")) == NULL)
		return -1;
	while (!found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name",
		    de->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(got, sizeof(got), f) != NULL) {
			got[strcspn(got, "\n")] = '\0';
			if (strcmp(got, name) == 0) {
				snprintf(dev, devsz, "/dev/%s", de->d_name);
				found = 1;
			}
		}
		fclose(f);
	}
	closedir(d);
	return found ? 0 : -1;
}

static int
open_port(const char *name)
{
	char		dev[PATH_MAX];
	uint64_t	end = now_ms() + PORT_WAIT_MS;
	int		fd, fl;

	/* the driver and devtmpfs may still be creating it */
	for (;;) {
		if (find_port(name, dev, sizeof(dev)) == 0 &&
		    (fd = open(dev, O_RDWR | O_NONBLOCK | O_CLOEXEC)) != -1)
			break;
		if (now_ms() >= end)
			return -1;
		usleep(20000);
	}
	/* SIGIO on host connect and disconnect, so idle costs nothing */
	fl = fcntl(fd, F_GETFL);
	if (fcntl(fd, F_SETOWN, getpid()) == -1 ||
	    fcntl(fd, F_SETFL, fl | O_ASYNC) == -1)
		warnx("O_ASYNC on %s: %s (polling instead)", dev,
		    strerror(errno));
	else
		ag.ag_sigio = 1;
	return fd;
}

static void
usage(void)
{
	fprintf(stderr, "usage: airlock-guest [-p PORT_NAME] [-r ID] "
	    "[-u UID:GID] | -s\n");
	exit(2);
}

/*
 * -s: a VM restored from a template (launcher.qemu.snapshot) shares the
 * template's kernel RNG state. Credit the host's fresh bytes (hex on
 * stdin, never on the command line) to the input pool and reseed the
 * CRNG from it, so /dev/urandom and getrandom() differ from the other
 * copies from the next read on.
 */
static int
seed_rng(void)
{
	struct {
		struct rand_pool_info	i;
		unsigned char		b[256];
	}		 rp;
	char		 hex[2 * sizeof(rp.b) + 2];
	size_t		 len, n;
	unsigned int	 v;
	int		 fd, rc = 1;

	memset(&rp, 0, sizeof(rp));
	len = fread(hex, 1, sizeof(hex) - 1, stdin);
	hex[len] = '\0';
	len = strcspn(hex, "\r\n");
	if (len < 64 || len % 2 != 0 || len / 2 > sizeof(rp.b))
		goto out;	/* fewer than 32 bytes: not a seed */
	for (n = 0; n < len / 2; n++) {
		if (sscanf(hex + 2 * n, "%2x", &v) != 1)
			goto out;
		rp.b[n] = (unsigned char)v;
	}
	rp.i.entropy_count = (int)(n * 8);
	rp.i.buf_size = (int)n;
	if ((fd = open("/dev/urandom", O_RDWR | O_CLOEXEC)) == -1)
		goto out;
	if (ioctl(fd, RNDADDENTROPY, &rp.i) == 0 &&
	    ioctl(fd, RNDRESEEDCRNG) == 0)
		rc = 0;
	close(fd);
 out:
	explicit_bzero(&rp, sizeof(rp));
	explicit_bzero(hex, sizeof(hex));
	if (rc)
		fprintf(stderr, "airlock-guest: cannot seed the RNG\n");
	return rc;
}

int
main(int argc, char **argv)
{
	const char	*port_name = "airlock.ctl", *ready_id = NULL;
	unsigned long	 uid = 65534, gid = 65534;
	sigset_t	 mask;
	char		*e;
	int		 ch;

	while ((ch = getopt(argc, argv, "p:r:su:")) != -1) {
		switch (ch) {
		case 's':
			return seed_rng();
		case 'p':
			port_name = optarg;
			break;
		case 'r':
			ready_id = optarg;
			break;
		case 'u':
			errno = 0;
			uid = strtoul(optarg, &e, 10);
			if (errno || *e != ':')
				usage();
			gid = strtoul(e + 1, &e, 10);
			if (errno || *e != '\0')
				usage();
			break;
		default:
			usage();
		}
	}
	if (uid == 0 || gid == 0 || uid > UINT32_MAX - 1 ||
	    gid > UINT32_MAX - 1)
		die("the workload user must not be root");
	ag.ag_uid = uid;
	ag.ag_gid = gid;
	ag.w_in = ag.w_out = ag.w_err = -1;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGIO);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if ((ag.ag_sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC))
	    == -1)
		die("signalfd failed");
	if ((ag.ag_port = open_port(port_name)) == -1)
		die("no control port");
	if (ready_id != NULL) {
		printf("AIRLOCK-READY %s\n", ready_id);
		fflush(stdout);
	}
	serve();
	return 0;
}
