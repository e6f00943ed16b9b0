/*
 * Messages between the gateway and the launcher, over a
 * socketpair(AF_UNIX, SOCK_SEQPACKET): one datagram per message, each a
 * fixed-size struct, so a message is valid only with exactly the size of
 * its type. Both ends run the same binary, so host byte order and layout.
 * One request is outstanding at a time; the reply echoes its sequence
 * number.
 *
 *   gateway -> launcher (struct lnc_hdr first)
 *	PING		no body		-> OK
 *	SETUP_HOST	no body		-> OK | ERR
 *		the settings come from launcher_spawn()'s opts, copied at fork
 *	CREATE		lnc_m_create	-> OK + lnc_m_sandbox | ERR
 *	DESTROY		lnc_m_destroy	-> OK | ERR (ENOENT)
 *	TEARDOWN_HOST	no body		-> OK | ERR
 *	PAUSE		lnc_m_vmop	-> OK | ERR (ENOENT, ENOTSUP, EBUSY)
 *	RESUME		lnc_m_vmop	-> OK | ERR (ENOENT, ENOTSUP)
 *	(each LNC_M_<name>)
 *
 *   launcher -> gateway: always one struct lnc_m_reply (type LNC_R_OK or
 *	LNC_R_ERR, the request's seq, an errno value and a short text).
 *	The OK to a CREATE of a VM carries one file descriptor (SCM_RIGHTS):
 *	the VM's serial console, on which the gateway waits for readiness
 *	(launcher_create), so that a booting VM never blocks the launcher.
 *
 * The launcher checks, before acting: the size for the type, the NUL
 * within each string field, the id charset [A-Za-z0-9._-] (1-63, not
 * starting with '.'), the PEM (printable ASCII and newlines, below
 * LNC_PEM_MAX, starting with "-----BEGIN "), the mask count and each mask
 * (absolute, no "..", no control characters). Anything else: LNC_R_ERR
 * EINVAL and nothing done. A datagram of an unknown type or size, or a
 * truncated one, is answered the same way.
 */
#ifndef AIRLOCK_LNC_PROTO_H
#define AIRLOCK_LNC_PROTO_H

#include <stdint.h>

#include "launcher/launcher.h"

enum lnc_type {
	LNC_M_PING = 1,
	LNC_M_SETUP_HOST,
	LNC_M_CREATE,
	LNC_M_DESTROY,
	LNC_M_TEARDOWN_HOST,
	LNC_M_PAUSE,
	LNC_M_RESUME,
	LNC_M_PROBE,		/* struct lnc_m_vmop; mv_if_idle unused */
	LNC_M_SNAP,		/* struct lnc_m_snap (lnc_snap.c) */
	LNC_R_OK = 100,
	LNC_R_ERR,
};

struct lnc_hdr {
	uint32_t	lh_type;	/* enum lnc_type */
	uint32_t	lh_seq;
};

struct lnc_m_create {
	struct lnc_hdr	mc_hdr;
	char		mc_id[LNC_ID_MAX];
	char		mc_from[LNC_ID_MAX];	/* a snapshot, or "" */
	uint32_t	mc_ca_len;
	uint32_t	mc_nmasks;
	char		mc_masks[LNC_MASK_MAX][LNC_PATH_MAX];
	char		mc_ca_pem[LNC_PEM_MAX];
};

struct lnc_m_destroy {
	struct lnc_hdr	md_hdr;
	char		md_id[LNC_ID_MAX];
};

struct lnc_m_vmop {
	struct lnc_hdr	mv_hdr;
	char		mv_id[LNC_ID_MAX];
	uint32_t	mv_if_idle;	/* PAUSE: not while attached */
};

/* LNC_M_SNAP: CREATE (id, name), SHOW/DELETE (name), LIST (index: the
 * ms_index-th snapshot, oldest first; ENOENT past the end). The OK's
 * mr_msg: "name layer parent bytes created sandbox" ("-": no parent).
 * PIN/UNPIN (name): a warm pool prewarmed from it keeps it from delete
 * and pruning until unpinned (counted: one per pin). LIMIT (bytes): a
 * reloaded launcher.snapshots.max_bytes, applied at once (lnc_snapmax.c);
 * mr_msg says whether the store fits it. */
enum lnc_snap_op {
	LNC_SNAP_CREATE = 1,
	LNC_SNAP_LIST,
	LNC_SNAP_SHOW,
	LNC_SNAP_DELETE,
	LNC_SNAP_PIN,
	LNC_SNAP_UNPIN,
	LNC_SNAP_LIMIT,
};

struct lnc_m_snap {
	struct lnc_hdr	ms_hdr;
	uint32_t	ms_op;
	uint32_t	ms_index;
	char		ms_id[LNC_ID_MAX];
	char		ms_name[LNC_ID_MAX];
	uint64_t	ms_bytes;	/* LIMIT */
};

struct lnc_m_sandbox {
	char		ms_id[LNC_ID_MAX];
	char		ms_ifname[16];
	uint32_t	ms_addr;	/* network order */
	uint32_t	ms_gateway;	/* network order */
	int32_t		ms_init_pid;
	uint32_t	ms_usec;
	char		ms_ctl[108];	/* a VM's guest agent socket */
	uint32_t	ms_vm;		/* 1: a VM, its console fd attached */
};

struct lnc_m_reply {
	struct lnc_hdr	mr_hdr;
	int32_t		mr_errno;	/* 0 with LNC_R_OK */
	char		mr_msg[320];	/* NUL-terminated reason */
	struct lnc_m_sandbox mr_sb;	/* LNC_M_CREATE only */
};

/* The largest datagram either side accepts. */
#define LNC_MSG_MAX	sizeof(struct lnc_m_create)

#endif
