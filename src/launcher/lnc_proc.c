/*
 * The launcher process: root, single-threaded, one socket to the gateway.
 * It reads one datagram at a time, checks it strictly (lnc_proto.h), acts
 * and answers. EOF means the gateway is gone: destroy everything, remove
 * the host setup, exit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "launcher/lnc_internal.h"
#include "util/log.h"
#include "util/util.h"

static void
reply_fd(struct lnc *l, const struct lnc_hdr *req, int err, const char *msg,
    const struct lnc_m_sandbox *sb, int fd)
{
	struct lnc_m_reply	r;
	struct iovec		iov = { &r, sizeof(r) };
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	}			cm;
	struct msghdr		mh;

	memset(&r, 0, sizeof(r));
	r.mr_hdr.lh_type = err ? LNC_R_ERR : LNC_R_OK;
	r.mr_hdr.lh_seq = req != NULL ? req->lh_seq : 0;
	r.mr_errno = err;
	snprintf(r.mr_msg, sizeof(r.mr_msg), "%s", msg != NULL ? msg : "");
	if (sb != NULL)
		r.mr_sb = *sb;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fd != -1) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		CMSG_FIRSTHDR(&mh)->cmsg_level = SOL_SOCKET;
		CMSG_FIRSTHDR(&mh)->cmsg_type = SCM_RIGHTS;
		CMSG_FIRSTHDR(&mh)->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(CMSG_FIRSTHDR(&mh)), &fd, sizeof(int));
	}
	if (sendmsg(l->l_sock, &mh, MSG_NOSIGNAL) != sizeof(r))
		log_warn("launcher: reply");
}

static void
reply(struct lnc *l, const struct lnc_hdr *req, int err, const char *msg,
    const struct lnc_m_sandbox *sb)
{
	reply_fd(l, req, err, msg, sb, -1);
}

static int
create_valid(const struct lnc_m_create *m, char *why, size_t whysz)
{
	uint32_t	i;

	if (memchr(m->mc_id, '\0', sizeof(m->mc_id)) == NULL ||
	    !lnc_id_valid(m->mc_id)) {
		snprintf(why, whysz, "bad sandbox id");
		return -1;
	}
	if (m->mc_ca_len >= LNC_PEM_MAX ||
	    !lnc_pem_valid(m->mc_ca_pem, m->mc_ca_len)) {
		snprintf(why, whysz, "bad CA certificate");
		return -1;
	}
	if (m->mc_nmasks > LNC_MASK_MAX) {
		snprintf(why, whysz, "too many masks");
		return -1;
	}
	for (i = 0; i < m->mc_nmasks; i++)
		if (memchr(m->mc_masks[i], '\0', LNC_PATH_MAX) == NULL ||
		    !lnc_path_valid(m->mc_masks[i])) {
			snprintf(why, whysz, "bad mask path %u", i);
			return -1;
		}
	return 0;
}

/* The sandbox a message names in <id> (<idsz> bytes, NUL within), or
 * NULL once the request is answered (a bad id, no such sandbox). */
static struct lnc_sbx *
sbx_named(struct lnc *l, const struct lnc_hdr *h, const char *id,
    size_t idsz)
{
	struct lnc_sbx	*s;

	if (memchr(id, '\0', idsz) == NULL || !lnc_id_valid(id)) {
		reply(l, h, EINVAL, "bad sandbox id", NULL);
		return NULL;
	}
	if ((s = lnc_sbx_find(l, id)) == NULL)
		reply(l, h, ENOENT, "no such sandbox", NULL);
	return s;
}

static void
dispatch(struct lnc *l, const void *buf, size_t len)
{
	const struct lnc_hdr	*h = buf;
	struct lnc_m_sandbox	 sb;
	struct lnc_sbx		*s;
	char			 why[160] = "";
	int			 err;

	if (len < sizeof(*h)) {
		reply(l, NULL, EINVAL, "short message", NULL);
		return;
	}
	switch (h->lh_type) {
	case LNC_M_PING:
		if (len != sizeof(*h))
			break;
		reply(l, h, 0, "pong", NULL);
		return;
	case LNC_M_SETUP_HOST:
		if (len != sizeof(*h))
			break;
		if (lnc_host_setup(l, why, sizeof(why)) == -1) {
			log_warnx("launcher: host setup: %s", why);
			reply(l, h, EIO, why, NULL);
		} else
			reply(l, h, 0, NULL, NULL);
		return;
	case LNC_M_TEARDOWN_HOST:
		if (len != sizeof(*h))
			break;
		if (lnc_host_teardown(l) == -1)
			reply(l, h, EIO, "teardown incomplete (logged)", NULL);
		else
			reply(l, h, 0, NULL, NULL);
		return;
	case LNC_M_CREATE: {
		const struct lnc_m_create *m = buf;

		if (len != sizeof(*m))
			break;
		if (create_valid(m, why, sizeof(why)) == -1) {
			reply(l, h, EINVAL, why, NULL);
			return;
		}
		if (l->l_o.lo_vm) {
			int confd = -1;

			err = lnc_vm_create(l, m, &sb, &confd, why,
			    sizeof(why));
			if (!err) {
				reply_fd(l, h, 0, NULL, &sb, confd);
				close(confd);
				return;
			}
		} else
			err = lnc_sbx_create(l, m, &sb, why, sizeof(why));
		if (err) {
			log_warnx("launcher: %s", why);
			reply(l, h, err, why, NULL);
		} else
			reply(l, h, 0, NULL, &sb);
		return;
	}
	case LNC_M_PAUSE:
	case LNC_M_RESUME: {
		const struct lnc_m_vmop *m = buf;

		if (len != sizeof(*m))
			break;
		if ((s = sbx_named(l, h, m->mv_id, sizeof(m->mv_id))) == NULL)
			return;
		if (!s->s_vm) {
			reply(l, h, ENOTSUP, "not a VM", NULL);
			return;
		}
		err = h->lh_type == LNC_M_PAUSE ?
		    lnc_vm_pause(l, s, m->mv_if_idle != 0, why, sizeof(why)) :
		    lnc_vm_resume(l, s, why, sizeof(why));
		if (err && err != EBUSY)
			log_warnx("launcher: sandbox %s: %s", s->s_id, why);
		reply(l, h, err, err ? why : NULL, NULL);
		return;
	}
	case LNC_M_PROBE: {
		const struct lnc_m_vmop *m = buf;
		char	res[160];

		if (len != sizeof(*m))
			break;
		if ((s = sbx_named(l, h, m->mv_id, sizeof(m->mv_id))) == NULL)
			return;
		err = lnc_probe(l, s, res, sizeof(res));
		reply(l, h, err, res, NULL);
		return;
	}
	case LNC_M_SNAP: {
		const struct lnc_m_snap *m = buf;
		char	out[sizeof(((struct lnc_m_reply *)0)->mr_msg)];

		if (len != sizeof(*m))
			break;
		if (memchr(m->ms_id, '\0', sizeof(m->ms_id)) == NULL ||
		    memchr(m->ms_name, '\0', sizeof(m->ms_name)) == NULL ||
		    (m->ms_id[0] != '\0' && !lnc_id_valid(m->ms_id)) ||
		    (m->ms_op != LNC_SNAP_LIST && m->ms_op != LNC_SNAP_LIMIT &&
		    !lnc_id_valid(m->ms_name))) {
			reply(l, h, EINVAL, "bad sandbox or snapshot name",
			    NULL);
			return;
		}
		err = lnc_snap_op(l, m, out, sizeof(out));
		if (err && err != ENOENT && err != EEXIST && err != EBUSY)
			log_warnx("launcher: snapshot: %s", out);
		reply(l, h, err, out, NULL);
		return;
	}
	case LNC_M_DESTROY: {
		const struct lnc_m_destroy *m = buf;

		if (len != sizeof(*m))
			break;
		if ((s = sbx_named(l, h, m->md_id, sizeof(m->md_id))) == NULL)
			return;
		if (lnc_sbx_destroy(l, s) == -1)
			reply(l, h, EIO, "destroy incomplete (logged)", NULL);
		else
			reply(l, h, 0, NULL, NULL);
		return;
	}
	default:
		break;
	}
	reply(l, h, EINVAL, "unknown message type or size", NULL);
}

static void
reap(struct lnc *l)
{
	pid_t	pid;

	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
		lnc_sbx_reaped(l, pid);
}

/*
 * A private copy of the opts: the caller's strings may be freed later
 * (a config reload in the gateway); ours live in one allocation.
 */
static void
opts_copy(struct lnc *l, const struct launcher_opts *o)
{
	const char	**fields[11 + LNC_OPT_MASK_MAX];
	size_t		  n = 0, i, len = 0;
	char		 *p;

	l->l_o = *o;
	l->l_o.lo_title = NULL;
	for (i = 0; i < LNC_OPT_MASK_MAX; i++)
		if (l->l_o.lo_masks[i] == NULL)
			break;
	for (; i < LNC_OPT_MASK_MAX; i++)
		l->l_o.lo_masks[i] = NULL;	/* NULL-terminated */
	fields[n++] = &l->l_o.lo_prefix;
	fields[n++] = &l->l_o.lo_gwname;
	fields[n++] = &l->l_o.lo_table;
	fields[n++] = &l->l_o.lo_cgroup;
	fields[n++] = &l->l_o.lo_nft;
	fields[n++] = &l->l_o.lo_rootfs;
	fields[n++] = &l->l_o.lo_qemu_bin;
	fields[n++] = &l->l_o.lo_qemu_kernel;
	fields[n++] = &l->l_o.lo_qemu_initrd;
	fields[n++] = &l->l_o.lo_snapdir;
	fields[n++] = &l->l_o.lo_pool_from;
	for (i = 0; i < LNC_OPT_MASK_MAX; i++)
		fields[n++] = &l->l_o.lo_masks[i];
	for (i = 0; i < n; i++)
		if (*fields[i] != NULL)
			len += strlen(*fields[i]) + 1;
	p = l->l_strs = xmalloc(len + 1);
	for (i = 0; i < n; i++)
		if (*fields[i] != NULL) {
			strcpy(p, *fields[i]);
			*fields[i] = p;
			p += strlen(p) + 1;
		}
}

static void __attribute__((noreturn))
lnc_exit(struct lnc *l)
{
	if (lnc_host_teardown(l) == -1)
		log_warnx("launcher: teardown incomplete");
	lnc_cgroup_remove(l);
	/* _exit: no atexit handlers or leak checks of the gateway's copy */
	_exit(0);
}

void
lnc_main(int sock, const struct launcher_opts *o)
{
	static char	 buf[LNC_MSG_MAX + 1];
	struct lnc	 l;
	struct pollfd	 pfd;
	sigset_t	 none;
	ssize_t		 n;
	int		 fd, sig, timeout;
	uint32_t	 nslots;
	static const int ignored[] = {
		SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE,
		SIGTSTP, SIGTTIN, SIGTTOU, 0,
	};

	/*
	 * Building namespaces is background work next to the gateway's
	 * requests (and a warm claim must not wait behind a refill on a
	 * small machine): a lower CPU priority.
	 */
	(void)setpriority(PRIO_PROCESS, 0, 10);
	/*
	 * Only stderr and our socket stay open: the gateway's listeners,
	 * files and event loop are not ours.
	 */
	if (sock != 3) {
		if (dup2(sock, 3) == -1)
			_exit(1);
		sock = 3;
	}
	(void)fcntl(sock, F_SETFD, FD_CLOEXEC);
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) != -1) {
		(void)dup2(fd, 0);
		(void)dup2(fd, 1);
		if (fd > 3)
			close(fd);
	}
	close_range(4, ~0U, 0);
	(void)prctl(PR_SET_NAME, o->lo_title ? o->lo_title : "airlock-launch",
	    0, 0, 0);
	/* the gateway decides when we stop: EOF, never a terminal signal */
	for (sig = 0; ignored[sig] != 0; sig++)
		signal(ignored[sig], SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	umask(022);
	if (chdir("/") == -1)
		_exit(1);

	memset(&l, 0, sizeof(l));
	TAILQ_INIT(&l.l_sbxs);
	TAILQ_INIT(&l.l_gone);
	opts_copy(&l, o);
	l.l_sock = sock;
	memcpy(&l.l_base, o->lo_network.nc_addr.na_bytes, 4);
	l.l_base = ntohl(l.l_base);
	l.l_gw = htonl(l.l_base + 1);
	/* indexes 1..n: base+2 .. the last address before broadcast */
	nslots = (uint32_t)((1ULL << (32 - o->lo_network.nc_prefix)) - 3);
	l.l_nslots = nslots;
	l.l_used = xcalloc(nslots + 1, 1);
	if ((l.l_nl = lnc_nl_open()) == -1) {
		log_warn("launcher: rtnetlink");
		_exit(1);
	}
	lnc_cgroup_detect(&l);

	pfd.fd = sock;
	pfd.events = POLLIN;
	for (;;) {
		reap(&l);
		timeout = lnc_gone_check(&l, 0) > 0 ? 250 : 1000;
		if (poll(&pfd, 1, timeout) == -1) {
			if (errno == EINTR)
				continue;
			log_warn("launcher: poll");
			lnc_exit(&l);
		}
		if (pfd.revents == 0)
			continue;
		n = recv(sock, buf, sizeof(buf), MSG_TRUNC);
		if (n == -1) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			log_warn("launcher: recv");
			lnc_exit(&l);
		}
		if (n == 0)
			lnc_exit(&l);	/* the gateway is gone */
		if ((size_t)n > LNC_MSG_MAX) {
			reply(&l, NULL, EINVAL, "message too long", NULL);
			continue;
		}
		dispatch(&l, buf, (size_t)n);
	}
}
