/*
 * airlockctl run with launcher.backend qemu: the command runs inside the
 * VM, started by its guest agent, which we reach over the VM's agent
 * socket (a virtio-serial port; root only). The agent's framing, both
 * ways: one type byte, a big-endian u32 length (at most 64 KiB), the
 * payload (docs/guest-image.md):
 *
 *	us -> agent	R argc, envc (u32 each), then argv and envp as
 *			  NUL-terminated strings
 *			I stdin bytes		i stdin closed
 *			K a signal number (1 byte), for the workload's group
 *	agent -> us	O stdout bytes		E stderr bytes
 *			F why it could not start (text)
 *			X exit status (u32): code, 128+N for signal N
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "ctl/ctl.h"
#include "util/util.h"

#define FRAME_MAX	65536

static void
put_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t
get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static int
frame_send(int fd, char type, const void *data, size_t len)
{
	unsigned char	hdr[5];

	hdr[0] = (unsigned char)type;
	put_u32(hdr + 1, (uint32_t)len);
	if (util_write_all(fd, hdr, sizeof(hdr)) == -1)
		return -1;
	return len > 0 ? util_write_all(fd, data, len) : 0;
}

/* The R frame: counts, then argv and envp strings. -1 when too big. */
static int
send_run(int fd, char *const argv[], char *const envp[])
{
	unsigned char	*buf;
	size_t		 len = 8, n, argc = 0, envc = 0, i;
	int		 rc;

	for (; argv[argc] != NULL; argc++)
		len += strlen(argv[argc]) + 1;
	for (; envp[envc] != NULL; envc++)
		len += strlen(envp[envc]) + 1;
	if (len > FRAME_MAX) {
		ctl_err("the command and its environment exceed %d bytes",
		    FRAME_MAX);
		return -1;
	}
	buf = xmalloc(len);
	put_u32(buf, (uint32_t)argc);
	put_u32(buf + 4, (uint32_t)envc);
	n = 8;
	for (i = 0; i < argc; i++) {
		memcpy(buf + n, argv[i], strlen(argv[i]) + 1);
		n += strlen(argv[i]) + 1;
	}
	for (i = 0; i < envc; i++) {
		memcpy(buf + n, envp[i], strlen(envp[i]) + 1);
		n += strlen(envp[i]) + 1;
	}
	rc = frame_send(fd, 'R', buf, len);
	free(buf);
	return rc;
}

/*
 * One frame from the agent: stdout/stderr copied out, F printed; 1 with
 * *status on X, 0 to go on, -1 when the agent is gone or speaks nonsense.
 */
static int
frame_recv(int fd, unsigned char *buf, int *status)
{
	unsigned char	hdr[5];
	uint32_t	len;

	if (util_read_all(fd, hdr, sizeof(hdr)) == -1)
		return -1;
	if ((len = get_u32(hdr + 1)) > FRAME_MAX ||
	    (len > 0 && util_read_all(fd, buf, len) == -1))
		return -1;
	switch (hdr[0]) {
	case 'O':
		(void)util_write_all(STDOUT_FILENO, buf, len);
		return 0;
	case 'E':
		(void)util_write_all(STDERR_FILENO, buf, len);
		return 0;
	case 'F':
		ctl_err("in the VM: %.*s", (int)len, (const char *)buf);
		return 0;
	case 'X':
		if (len != 4)
			return -1;
		*status = (int)get_u32(buf);
		return 1;
	default:
		return -1;
	}
}

int
ctl_vm_exec(const char *sock, char *const argv[], char *const envp[])
{
	struct pollfd	 pfd[3];
	unsigned char	*buf;
	sigset_t	 sigs, old;
	ssize_t		 n;
	int		 fd, sfd, status = -1, in_open = 1;
	unsigned char	 sig;

	if ((fd = util_unix_connect(sock)) == -1) {
		ctl_err("the VM's agent at %s: %s", sock, strerror(errno));
		return CTL_FAIL;
	}
	if (send_run(fd, argv, envp) == -1) {
		close(fd);
		return CTL_FAIL;
	}
	/* a terminal's Ctrl-C and the like go to the workload */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	sigprocmask(SIG_BLOCK, &sigs, &old);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	buf = xmalloc(FRAME_MAX);
	for (;;) {
		pfd[0].fd = fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = in_open ? STDIN_FILENO : -1;
		pfd[1].events = POLLIN;
		pfd[2].fd = sfd;
		pfd[2].events = POLLIN;
		if (poll(pfd, 3, -1) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[2].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				sig = (unsigned char)si.ssi_signo;
				if (frame_send(fd, 'K', &sig, 1) == -1)
					break;
			}
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(STDIN_FILENO, buf, FRAME_MAX);
			if (n > 0) {
				if (frame_send(fd, 'I', buf, (size_t)n) == -1)
					break;
			} else if (n == 0 || errno != EINTR) {
				in_open = 0;
				if (frame_send(fd, 'i', NULL, 0) == -1)
					break;
			}
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (frame_recv(fd, buf, &status) != 0)
				break;
		}
	}
	free(buf);
	if (sfd != -1)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(fd);
	if (status < 0) {
		ctl_err("the VM's agent went away before the command ended");
		return CTL_FAIL;
	}
	return status;
}
