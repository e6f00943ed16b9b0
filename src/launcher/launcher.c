/*
 * The gateway's side of the launcher: fork it, then blocking RPCs over the
 * socketpair, one at a time under a mutex (the scheduler's preparing
 * thread and the main thread both call). Also the checks both sides share.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "cfg/cfg.h"
#include "launcher/lnc_internal.h"
#include "util/log.h"
#include "util/util.h"

#define RPC_TIMEOUT_MS	60000	/* a create takes ms: this is hung */

struct launcher {
	int		 lc_fd;
	pid_t		 lc_pid;
	uint32_t	 lc_seq;
	int		 lc_dead;
	uint32_t	 lc_boot_ms;	/* VMs: ready within this */
	pthread_mutex_t	 lc_mtx;
};

int
lnc_id_valid(const char *id)
{
	size_t	i;

	if (id[0] == '\0' || id[0] == '.' || strlen(id) >= LNC_ID_MAX)
		return 0;
	for (i = 0; id[i] != '\0'; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') ||
		    (id[i] >= 'A' && id[i] <= 'Z') ||
		    (id[i] >= '0' && id[i] <= '9') ||
		    id[i] == '.' || id[i] == '_' || id[i] == '-'))
			return 0;
	return 1;
}

int
lnc_path_valid(const char *p)
{
	const char	*s;
	size_t		 len = strlen(p);

	if (p[0] != '/' || len >= LNC_PATH_MAX)
		return 0;
	for (s = p; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	/* no ".." component */
	for (s = p; (s = strstr(s, "..")) != NULL; s += 2)
		if (s[-1] == '/' && (s[2] == '/' || s[2] == '\0'))
			return 0;
	return 1;
}

int
lnc_pem_valid(const char *pem, size_t len)
{
	size_t	i;

	if (len == 0)
		return 1;
	if (len >= LNC_PEM_MAX || len < 11 || memcmp(pem, "-----BEGIN ", 11))
		return 0;
	for (i = 0; i < len; i++)
		if (!(pem[i] == '\n' || pem[i] == '\r' ||
		    (pem[i] >= 0x20 && pem[i] < 0x7f)))
			return 0;
	return 1;
}

/* Interface-name and nft-identifier safe: they go into nft(8) text. */
static int
name_valid(const char *s, size_t max, const char *extra)
{
	size_t	i;

	if (s == NULL || s[0] == '\0' || strlen(s) > max)
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		    strchr(extra, s[i]) != NULL))
			return 0;
	return 1;
}

void
launcher_opts_init(struct launcher_opts *o)
{
	memset(o, 0, sizeof(*o));
	(void)net_cidr_parse("10.88.0.0/16", &o->lo_network);
	o->lo_prefix = "sbx-";
	o->lo_gwname = "airlock-gw";
	o->lo_table = "airlock";
	o->lo_cgroup = "airlock";
	o->lo_uid = 65534;
	o->lo_gid = 65534;
	o->lo_memory = 512ULL << 20;
	o->lo_pids = 256;
	o->lo_qemu_mem_mb = 256;
	o->lo_qemu_vcpus = 1;
	o->lo_qemu_boot_ms = 60000;
}

static int
port_of(const char *hostport, uint16_t *port)
{
	const char	*c;
	char		*end;
	unsigned long	 v;

	if (hostport == NULL) {
		*port = 0;
		return 0;
	}
	if ((c = strrchr(hostport, ':')) == NULL)
		return -1;
	errno = 0;
	v = strtoul(c + 1, &end, 10);
	if (errno || *end != '\0' || v == 0 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

static int
mask_add(struct launcher_opts *o, size_t *n, const char *path)
{
	if (path == NULL || path[0] != '/')
		return 0;
	if (*n == LNC_OPT_MASK_MAX) {
		log_warnx("launcher: more than %d paths to hide from "
		    "sandboxes", LNC_OPT_MASK_MAX);
		return -1;
	}
	o->lo_masks[(*n)++] = path;
	return 0;
}

/* A token broker's credential files (key_file, file: sources). */
static int
mask_broker(struct launcher_opts *o, size_t *n, const struct cfg_broker *b)
{
	int	rc = 0;

	if (b->b_cred != NULL && strncmp(b->b_cred, "file:", 5) == 0)
		rc |= mask_add(o, n, b->b_cred + 5);
	if (b->b_cred2 != NULL && strncmp(b->b_cred2, "file:", 5) == 0)
		rc |= mask_add(o, n, b->b_cred2 + 5);
	return rc;
}

int
launcher_opts_from_cfg(struct launcher_opts *o, const struct cfg *cfg)
{
	size_t	n = 0, i;
	int	rc = 0;

	launcher_opts_init(o);
	o->lo_network = cfg->c_launcher_network;
	if (port_of(cfg->c_listen_transparent, &o->lo_tport) == -1 ||
	    port_of(cfg->c_listen_dns, &o->lo_dport) == -1) {
		log_warnx("launcher: bad listen.transparent or listen.dns");
		return -1;
	}
	o->lo_rootfs = cfg->c_launcher_rootfs;
	if (cfg->c_launcher_ifprefix != NULL &&
	    strcmp(cfg->c_launcher_ifprefix, "sbx-") != 0) {
		/* a second gateway on the host (tests): its own names */
		snprintf(o->lo_own_prefix, sizeof(o->lo_own_prefix), "%s",
		    cfg->c_launcher_ifprefix);
		snprintf(o->lo_own_table, sizeof(o->lo_own_table),
		    "airlock_%.*s", (int)strcspn(cfg->c_launcher_ifprefix,
		    "-"), cfg->c_launcher_ifprefix);
		snprintf(o->lo_own_gw, sizeof(o->lo_own_gw), "gw-%.*s",
		    (int)strcspn(cfg->c_launcher_ifprefix, "-"),
		    cfg->c_launcher_ifprefix);
		o->lo_prefix = o->lo_own_prefix;
		o->lo_table = o->lo_own_table;
		o->lo_gwname = o->lo_own_gw;
		o->lo_cgroup = o->lo_own_table;
	}
	if (cfg->c_state_dir != NULL && snprintf(o->lo_own_snapdir,
	    sizeof(o->lo_own_snapdir), "%s/snapshots", cfg->c_state_dir) <
	    (int)sizeof(o->lo_own_snapdir))
		o->lo_snapdir = o->lo_own_snapdir;
	o->lo_snap_max = cfg->c_launcher_snap_max;
	o->lo_pool_from = cfg->c_pool_from;
	o->lo_uid = cfg->c_launcher_uid;
	o->lo_gid = cfg->c_launcher_gid;
	o->lo_memory = cfg->c_launcher_memory;
	o->lo_pids = cfg->c_launcher_pids;
	if (cfg->c_launcher_backend == CFG_BACKEND_QEMU) {
		o->lo_vm = 1;
		o->lo_qemu_bin = cfg->c_qemu_binary;
		o->lo_qemu_kernel = cfg->c_qemu_kernel;
		o->lo_qemu_initrd = cfg->c_qemu_initrd;
		o->lo_qemu_mem_mb = (uint32_t)(cfg->c_qemu_memory >> 20);
		o->lo_qemu_vcpus = (uint32_t)cfg->c_qemu_vcpus;
		o->lo_qemu_accel = cfg->c_qemu_accel;
		o->lo_qemu_boot_ms = (uint32_t)cfg->c_qemu_boot_ms;
		o->lo_qemu_snap = cfg->c_qemu_snapshot;
	}
	rc |= mask_add(o, &n, cfg->c_dir);
	rc |= mask_add(o, &n, cfg->c_state_dir);
	if (cfg->c_listen_admin != NULL &&
	    strncmp(cfg->c_listen_admin, "unix:", 5) == 0)
		rc |= mask_add(o, &n, cfg->c_listen_admin + 5);
	rc |= mask_add(o, &n, cfg->c_admin_token_file);
	for (i = 0; i < cfg->c_nsecrets; i++)
		if (strncmp(cfg->c_secrets[i].sc_source, "file:", 5) == 0)
			rc |= mask_add(o, &n, cfg->c_secrets[i].sc_source + 5);
		else if (cfg->c_secrets[i].sc_broker != NULL)
			rc |= mask_broker(o, &n, cfg->c_secrets[i].sc_broker);
	return rc ? -1 : 0;
}

static int
opts_valid(const struct launcher_opts *o)
{
	const struct net_cidr	*nc = &o->lo_network;
	size_t			 i;

	if (nc->nc_addr.na_family != AF_INET || nc->nc_prefix < 8 ||
	    nc->nc_prefix > 29) {
		log_warnx("launcher: the network must be IPv4, /8 to /29");
		return -1;
	}
	/* <prefix><n> must fit IFNAMSIZ with the largest n */
	if (!name_valid(o->lo_prefix, 15 - (32 - nc->nc_prefix + 2) / 3,
	    "-")) {
		log_warnx("launcher: bad interface prefix");
		return -1;
	}
	if (!name_valid(o->lo_gwname, 15, "-") ||
	    strncmp(o->lo_gwname, o->lo_prefix, strlen(o->lo_prefix)) == 0) {
		log_warnx("launcher: bad gateway interface name (it must not "
		    "start with the prefix %s)", o->lo_prefix);
		return -1;
	}
	if (!name_valid(o->lo_table, 64, "") ||
	    !(name_valid(o->lo_cgroup, 64, "-.") ||
	    (lnc_path_valid(o->lo_cgroup) && strlen(o->lo_cgroup) < 512))) {
		log_warnx("launcher: bad nft table or cgroup name");
		return -1;
	}
	if (o->lo_rootfs != NULL && (!lnc_path_valid(o->lo_rootfs) ||
	    strpbrk(o->lo_rootfs, ",:\\") != NULL ||
	    strcmp(o->lo_rootfs, "/") == 0)) {
		log_warnx("launcher: bad rootfs %s", o->lo_rootfs);
		return -1;
	}
	if (o->lo_vm && (o->lo_qemu_kernel == NULL ||
	    o->lo_qemu_initrd == NULL || !lnc_path_valid(o->lo_qemu_kernel) ||
	    !lnc_path_valid(o->lo_qemu_initrd) || strchr(o->lo_qemu_kernel,
	    ',') != NULL || strchr(o->lo_qemu_initrd, ',') != NULL ||
	    (o->lo_qemu_bin != NULL && !lnc_path_valid(o->lo_qemu_bin)))) {
		/* they go into qemu's comma-separated options */
		log_warnx("launcher: qemu kernel, initrd and binary must be "
		    "absolute paths without commas");
		return -1;
	}
	for (i = 0; i < LNC_OPT_MASK_MAX && o->lo_masks[i] != NULL; i++)
		if (!lnc_path_valid(o->lo_masks[i])) {
			log_warnx("launcher: bad mask %s", o->lo_masks[i]);
			return -1;
		}
	return 0;
}

struct launcher *
launcher_spawn(const struct launcher_opts *o)
{
	struct launcher	*lc;
	int		 sv[2];
	pid_t		 pid;

	if (opts_valid(o) == -1)
		return NULL;
	if (geteuid() != 0) {
		log_warnx("launcher: must be started as root");
		return NULL;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		log_warn("launcher: socketpair");
		return NULL;
	}
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) == -1) {
		log_warn("launcher: fork");
		close(sv[0]);
		close(sv[1]);
		return NULL;
	}
	if (pid == 0) {
		close(sv[0]);
		lnc_main(sv[1], o);
	}
	close(sv[1]);
	lc = xcalloc(1, sizeof(*lc));
	lc->lc_fd = sv[0];
	lc->lc_pid = pid;
	lc->lc_boot_ms = o->lo_qemu_boot_ms;
	pthread_mutex_init(&lc->lc_mtx, NULL);
	return lc;
}

pid_t
launcher_pid(const struct launcher *lc)
{
	return lc->lc_pid;
}

/* One datagram, and the file descriptor it carries (else -1). */
static ssize_t
recv_fd(int sock, struct lnc_m_reply *r, int *fd)
{
	struct iovec	 iov = { r, sizeof(*r) };
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	}		 cm;
	struct msghdr	 mh;
	struct cmsghdr	*c;
	ssize_t		 n;

	*fd = -1;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	n = recvmsg(sock, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
	for (c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c != NULL;
	    c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	return n;
}

/*
 * One request, one reply. Returns 0 with <r> filled (its type may be
 * LNC_R_ERR) and *fd the descriptor it carried (or -1; NULL: closed), or
 * -1 when the launcher is gone or did not answer.
 */
static int
rpc_fd(struct launcher *lc, struct lnc_hdr *req, size_t len,
    struct lnc_m_reply *r, int *outfd)
{
	struct pollfd	pfd;
	ssize_t		n;
	int		rc = -1, p, fd = -1;

	pthread_mutex_lock(&lc->lc_mtx);
	if (lc->lc_dead) {
		errno = EPIPE;
		goto out;
	}
	req->lh_seq = ++lc->lc_seq;
	if (send(lc->lc_fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) {
		lc->lc_dead = 1;
		goto out;
	}
	for (;;) {
		pfd.fd = lc->lc_fd;
		pfd.events = POLLIN;
		p = poll(&pfd, 1, RPC_TIMEOUT_MS);
		if (p == -1 && errno == EINTR)
			continue;
		if (p <= 0) {
			if (p == 0)
				errno = ETIMEDOUT;
			goto out;	/* a late answer is skipped by seq */
		}
		n = recv_fd(lc->lc_fd, r, &fd);
		if (fd != -1 && (n != sizeof(*r) ||
		    r->mr_hdr.lh_seq != req->lh_seq || outfd == NULL)) {
			close(fd);	/* not for this call */
			fd = -1;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			lc->lc_dead = 1;
			errno = n == 0 ? EPIPE : errno;
			goto out;
		}
		if (n != sizeof(*r) || (r->mr_hdr.lh_type != LNC_R_OK &&
		    r->mr_hdr.lh_type != LNC_R_ERR)) {
			errno = EPROTO;
			goto out;
		}
		if (r->mr_hdr.lh_seq == req->lh_seq)
			break;
		if (r->mr_hdr.lh_seq == 0) {
			/* the launcher could not read our request at all */
			errno = EPROTO;
			goto out;
		}
	}
	r->mr_msg[sizeof(r->mr_msg) - 1] = '\0';
	if (outfd != NULL)
		*outfd = fd;
	rc = 0;
 out:
	pthread_mutex_unlock(&lc->lc_mtx);
	return rc;
}

static int
rpc(struct launcher *lc, struct lnc_hdr *req, size_t len,
    struct lnc_m_reply *r)
{
	return rpc_fd(lc, req, len, r, NULL);
}

/* A simple request; 0, or -1 with the reason in <why>. */
static int
rpc_simple(struct launcher *lc, enum lnc_type type, char *why, size_t whysz)
{
	struct lnc_hdr		h;
	struct lnc_m_reply	r;

	memset(&h, 0, sizeof(h));
	h.lh_type = type;
	if (rpc(lc, &h, sizeof(h), &r) == -1) {
		if (why != NULL)
			snprintf(why, whysz, "launcher: %s", strerror(errno));
		return -1;
	}
	if (r.mr_hdr.lh_type != LNC_R_OK) {
		if (why != NULL)
			snprintf(why, whysz, "%s", r.mr_msg);
		errno = r.mr_errno;
		return -1;
	}
	return 0;
}

int
launcher_setup_host(struct launcher *lc, char *why, size_t whysz)
{
	return rpc_simple(lc, LNC_M_SETUP_HOST, why, whysz);
}

int
launcher_teardown_host(struct launcher *lc, char *why, size_t whysz)
{
	return rpc_simple(lc, LNC_M_TEARDOWN_HOST, why, whysz);
}

int
launcher_ping(struct launcher *lc)
{
	return rpc_simple(lc, LNC_M_PING, NULL, 0);
}

int
launcher_create(struct launcher *lc, const struct lnc_create_req *req,
    struct lnc_sandbox *out, char *why, size_t whysz)
{
	struct lnc_m_create	*m;
	struct lnc_m_reply	 r;
	uint64_t		 t0 = util_now_us();
	size_t			 i;
	int			 rc = -1, confd = -1;

	if (req->cr_id == NULL || !lnc_id_valid(req->cr_id) ||
	    req->cr_ca_len >= LNC_PEM_MAX ||
	    (req->cr_ca_len > 0 && req->cr_ca_pem == NULL)) {
		snprintf(why, whysz, "bad sandbox id or CA certificate");
		errno = EINVAL;
		return -1;
	}
	m = xcalloc(1, sizeof(*m));
	m->mc_hdr.lh_type = LNC_M_CREATE;
	snprintf(m->mc_id, sizeof(m->mc_id), "%s", req->cr_id);
	if (req->cr_from != NULL) {
		if (!lnc_id_valid(req->cr_from)) {
			free(m);
			snprintf(why, whysz, "bad snapshot name");
			errno = EINVAL;
			return -1;
		}
		snprintf(m->mc_from, sizeof(m->mc_from), "%s", req->cr_from);
	}
	m->mc_ca_len = (uint32_t)req->cr_ca_len;
	if (req->cr_ca_len > 0)
		memcpy(m->mc_ca_pem, req->cr_ca_pem, req->cr_ca_len);
	for (i = 0; i < LNC_MASK_MAX && req->cr_masks[i] != NULL; i++) {
		if (strlen(req->cr_masks[i]) >= LNC_PATH_MAX) {
			snprintf(why, whysz, "mask path too long");
			errno = ENAMETOOLONG;
			goto out;
		}
		snprintf(m->mc_masks[i], LNC_PATH_MAX, "%s", req->cr_masks[i]);
	}
	m->mc_nmasks = (uint32_t)i;
	if (rpc_fd(lc, &m->mc_hdr, sizeof(*m), &r, &confd) == -1) {
		snprintf(why, whysz, "launcher: %s", strerror(errno));
		goto out;
	}
	if (r.mr_hdr.lh_type != LNC_R_OK) {
		snprintf(why, whysz, "%s", r.mr_msg);
		errno = r.mr_errno;
		goto out;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out->ls_id, r.mr_sb.ms_id, sizeof(out->ls_id));
	out->ls_id[sizeof(out->ls_id) - 1] = '\0';
	memcpy(out->ls_ifname, r.mr_sb.ms_ifname, sizeof(out->ls_ifname));
	out->ls_ifname[sizeof(out->ls_ifname) - 1] = '\0';
	out->ls_addr.na_family = AF_INET;
	memcpy(out->ls_addr.na_bytes, &r.mr_sb.ms_addr, 4);
	out->ls_gateway.na_family = AF_INET;
	memcpy(out->ls_gateway.na_bytes, &r.mr_sb.ms_gateway, 4);
	out->ls_init_pid = r.mr_sb.ms_init_pid;
	out->ls_usec = r.mr_sb.ms_usec;
	if (r.mr_sb.ms_vm) {
		/* the VM boots; we wait here, the launcher serves others */
		memcpy(out->ls_ctl, r.mr_sb.ms_ctl, sizeof(out->ls_ctl));
		out->ls_ctl[sizeof(out->ls_ctl) - 1] = '\0';
		if (confd == -1 || lnc_vm_wait_ready(confd, out->ls_id,
		    lc->lc_boot_ms, why, whysz) == -1) {
			if (confd == -1)
				snprintf(why, whysz, "no console from the "
				    "launcher");
			(void)launcher_destroy(lc, out->ls_id);
			errno = ETIMEDOUT;
			goto out;
		}
		out->ls_usec = (uint32_t)(util_now_us() - t0);
	}
	rc = 0;
 out:
	if (confd != -1)
		close(confd);
	free(m);
	return rc;
}

int
launcher_destroy(struct launcher *lc, const char *id)
{
	struct lnc_m_destroy	m;
	struct lnc_m_reply	r;

	if (id == NULL || !lnc_id_valid(id)) {
		errno = EINVAL;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.md_hdr.lh_type = LNC_M_DESTROY;
	snprintf(m.md_id, sizeof(m.md_id), "%s", id);
	if (rpc(lc, &m.md_hdr, sizeof(m), &r) == -1)
		return -1;
	if (r.mr_hdr.lh_type != LNC_R_OK) {
		errno = r.mr_errno;
		return -1;
	}
	return 0;
}

static int
vm_op(struct launcher *lc, enum lnc_type type, const char *id, int if_idle,
    char *why, size_t whysz)
{
	struct lnc_m_vmop	m;
	struct lnc_m_reply	r;

	if (id == NULL || !lnc_id_valid(id)) {
		snprintf(why, whysz, "bad sandbox id");
		errno = EINVAL;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.mv_hdr.lh_type = type;
	m.mv_if_idle = if_idle != 0;
	snprintf(m.mv_id, sizeof(m.mv_id), "%s", id);
	if (rpc(lc, &m.mv_hdr, sizeof(m), &r) == -1) {
		snprintf(why, whysz, "launcher: %s", strerror(errno));
		return -1;
	}
	if (r.mr_hdr.lh_type != LNC_R_OK) {
		snprintf(why, whysz, "%s", r.mr_msg);
		errno = r.mr_errno;
		return -1;
	}
	return 0;
}

int
launcher_pause(struct launcher *lc, const char *id, int if_idle, char *why,
    size_t whysz)
{
	return vm_op(lc, LNC_M_PAUSE, id, if_idle, why, whysz);
}

int
launcher_resume(struct launcher *lc, const char *id, char *why,
    size_t whysz)
{
	return vm_op(lc, LNC_M_RESUME, id, 0, why, whysz);
}

int
launcher_probe(struct launcher *lc, const char *id, char *res, size_t ressz)
{
	struct lnc_m_vmop	m;
	struct lnc_m_reply	r;

	if (id == NULL || !lnc_id_valid(id)) {
		snprintf(res, ressz, "bad sandbox id");
		errno = EINVAL;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.mv_hdr.lh_type = LNC_M_PROBE;
	snprintf(m.mv_id, sizeof(m.mv_id), "%s", id);
	if (rpc(lc, &m.mv_hdr, sizeof(m), &r) == -1) {
		snprintf(res, ressz, "launcher: %s", strerror(errno));
		return -1;
	}
	snprintf(res, ressz, "%s", r.mr_msg);
	if (r.mr_hdr.lh_type != LNC_R_OK) {
		errno = r.mr_errno;
		return -1;
	}
	return 0;
}

static int
snap_rpc(struct launcher *lc, struct lnc_m_snap *m, char *out, size_t outsz)
{
	struct lnc_m_reply	r;

	if (rpc(lc, &m->ms_hdr, sizeof(*m), &r) == -1) {
		snprintf(out, outsz, "launcher: %s", strerror(errno));
		return -1;
	}
	snprintf(out, outsz, "%s", r.mr_msg);
	if (r.mr_hdr.lh_type != LNC_R_OK) {
		errno = r.mr_errno;
		return -1;
	}
	return 0;
}

int
launcher_snap(struct launcher *lc, int op, const char *id, const char *name,
    unsigned index, char *out, size_t outsz)
{
	struct lnc_m_snap	m;

	memset(&m, 0, sizeof(m));
	m.ms_hdr.lh_type = LNC_M_SNAP;
	m.ms_op = (uint32_t)op;
	m.ms_index = index;
	if ((id != NULL && snprintf(m.ms_id, sizeof(m.ms_id), "%s", id) >=
	    (int)sizeof(m.ms_id)) || (name != NULL && snprintf(m.ms_name,
	    sizeof(m.ms_name), "%s", name) >= (int)sizeof(m.ms_name))) {
		snprintf(out, outsz, "bad sandbox or snapshot name");
		errno = EINVAL;
		return -1;
	}
	return snap_rpc(lc, &m, out, outsz);
}

int
launcher_snap_limit(struct launcher *lc, uint64_t max, char *out,
    size_t outsz)
{
	struct lnc_m_snap	m;

	memset(&m, 0, sizeof(m));
	m.ms_hdr.lh_type = LNC_M_SNAP;
	m.ms_op = LNC_SNAP_LIMIT;
	m.ms_bytes = max;
	return snap_rpc(lc, &m, out, outsz);
}

void
launcher_close(struct launcher *lc)
{
	if (lc == NULL)
		return;
	/* EOF tells the launcher to clean up and exit */
	close(lc->lc_fd);
	while (waitpid(lc->lc_pid, NULL, 0) == -1 && errno == EINTR)
		;
	pthread_mutex_destroy(&lc->lc_mtx);
	free(lc);
}
