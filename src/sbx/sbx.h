/*
 * Sandbox registry: every sandbox the gateway knows, static (from the
 * config file) or created at run time through the admin API. Shared by the
 * workers and the admin server under one rwlock; a connection holds a
 * reference to the sandbox it authenticated as, so a deleted sandbox stays
 * valid memory until its last connection is gone, while sb_revoked tells
 * the workers to close those connections.
 *
 * Dynamic sandboxes persist in state_dir/sandboxes/<id>.json (0600) and
 * come back after a restart.
 */
#ifndef AIRLOCK_SBX_H
#define AIRLOCK_SBX_H

#include <stddef.h>
#include <stdint.h>

#include "dns/net_guard.h"

struct cfg;

struct sbx {
	char		*sb_id;
	char		*sb_policy;	/* policy name; resolved against the
					   config a connection runs under */
	char		*sb_token;	/* proxy token (secret: never log);
					   NULL for a sandbox of another
					   gateway (SBX_F_REMOTE) */
	size_t		 sb_token_len;
	unsigned char	 sb_token_sha[32]; /* SHA-256 of the token: what
					   sbx_auth compares */
	int		 sb_static;	/* defined in the config file */
	int64_t		 sb_created;	/* unix seconds */
	int		 sb_refs;	/* atomic */
	int		 sb_revoked;	/* atomic: deleted, close its conns */
	int		 sb_conns;	/* atomic: open proxy connections */
	int		 sb_flags;	/* SBX_F_*; changed under the lock */
	uint64_t	 sb_last_used_ms; /* atomic: last request (monotonic) */
	uint64_t	 sb_deny_tls_tat; /* atomic: rate bound of TLS
					   handshakes for denied CONNECTs
					   (GCRA, µs; conn_connect.c) */
	struct net_addr	*sb_addrs;	/* source addresses that identify it
					   (transparent listener, DNS stub):
					   the config's "addresses", or the one
					   the launcher gave it */
	size_t		 sb_naddrs;
	char		 sb_ctl[108];	/* qemu backend: its guest agent's
					   unix socket, for airlockctl run */
	int		 sb_init_pid;	/* netns backend: host pid of its
					   init, for airlockctl run */
	char		 sb_pool_from[64]; /* warm: the snapshot a prewarm
					   built it from ("": the pool's
					   own, launcher.pool.from) */
};

#define SBX_F_POOLED	0x01	/* warm in the launcher's pool, not handed
				   out yet; never persisted */
#define SBX_F_LAUNCHED	0x02	/* handed out by a claim: the scheduler may
				   evict it when idle */
#define SBX_F_NETNS	0x04	/* has namespaces or a VM from the
				   launcher: not persisted (they end with
				   the process) */
#define SBX_F_VM	0x08	/* ... a qemu microVM (sb_ctl) */
#define SBX_F_PAUSED	0x10	/* ... paused (QMP stop) */
#define SBX_F_REMOTE	0x20	/* created on another gateway of the fleet
				   (sbx_fleet.c): token known by its hash
				   only, not persisted here */

enum sbx_err {
	SBX_OK = 0,
	SBX_E_EXISTS,		/* id taken */
	SBX_E_BADID,		/* id syntax */
	SBX_E_POLICY,		/* no such policy */
	SBX_E_NOTFOUND,
	SBX_E_STATIC,		/* defined in the config file */
	SBX_E_IO,		/* state_dir could not be written */
	SBX_E_LAUNCH,		/* the launcher could not build it */
	SBX_E_FLEET,		/* the fleet registry (Redis) is away */
};

/* Load the sandboxes persisted under <state_dir>. Returns 0 or -1. */
int		 sbx_init(const char *state_dir);
/* After a (re)load: the static sandboxes become those of <cfg>. */
void		 sbx_sync_config(const struct cfg *);
/* A new reference, or NULL. */
struct sbx	*sbx_find(const char *id);
/* The sandbox whose id and token match (constant-time compare), or NULL. */
struct sbx	*sbx_auth(const char *id, const char *token, size_t tokenlen);
/*
 * Who an explicit-proxy request is (sbx_ident.c): <authz> the value of its
 * Proxy-Authorization (<len> bytes), or NULL without one, then the
 * listener's default sandbox <default_id> (NULL: none). A new reference,
 * or NULL with *why the 407's text and, when a login named an id, that id
 * in <login> (<loginsz> bytes; "" otherwise) for the fleet's lookup.
 */
struct sbx	*sbx_ident(const char *authz, size_t len,
		    const char *default_id, char *login, size_t loginsz,
		    const char **why);
/* The sandbox a source address belongs to (a new reference), or NULL. */
struct sbx	*sbx_find_addr(const struct net_addr *);
/* Give a dynamic sandbox its (single) source address. 0, or -1 when
 * another sandbox has it. */
int		 sbx_set_addr(struct sbx *, const struct net_addr *);
/* Forget its source addresses (a rollback gives it a new one). */
void		 sbx_clear_addrs(struct sbx *);
struct sbx	*sbx_ref(struct sbx *);
void		 sbx_unref(struct sbx *);	/* NULL ok */
/* Create a dynamic sandbox under policy <policy> of <cfg>; <id> NULL =
 * generated. Mints its CA and token; persisted unless SBX_F_POOLED.
 * *out gets a reference. */
enum sbx_err	 sbx_create(const struct cfg *, const char *policy,
		    const char *id, int flags, struct sbx **out);
/* Hand out a warm sandbox of <policy> prewarmed from snapshot <from>
 * (NULL: the pool's own): it stops being pooled, becomes
 * launched and is persisted. A reference, or NULL when none is warm. */
struct sbx	*sbx_claim_pooled(const char *policy, const char *from);
/* Add or clear <flags> of a sandbox (under the registry lock). */
void		 sbx_add_flags(struct sbx *, int flags);
void		 sbx_clear_flags(struct sbx *, int flags);
/* Forget every pooled sandbox (shutdown): registry entry and CA. */
void		 sbx_drop_pooled(void);
/* Revoke and forget <id>: its token stops working at once, its CA and
 * persisted state are removed, workers close its connections. */
enum sbx_err	 sbx_delete(const char *id);
/* All sandboxes, sorted by id, each a reference; free with
 * sbx_list_free. */
size_t		 sbx_list(struct sbx ***out);
void		 sbx_list_free(struct sbx **, size_t);
const char	*sbx_strerror(enum sbx_err);
/* Called (outside the lock) with the id of every SBX_F_NETNS sandbox
 * that is deleted or dropped, so that its namespaces go too. */
void		 sbx_set_destroy_hook(void (*)(const char *id));
void		 sbx_shutdown(void);
/* SHA-256 of a token. */
void		 sbx_token_hash(const char *, size_t, unsigned char[32]);
/* Both sandboxes' tokens are the same (constant time, on the hashes). */
int		 sbx_same_token(const struct sbx *, const struct sbx *);

/* ---- the fleet's shared registry (sbx_fleet.c) ---- */
/* Another gateway's sandbox, as the registry has it: added unless <id> is
 * known here already. <addr> "" or an IP literal. */
void		 sbx_put_remote(const char *id, const char *policy,
		    const unsigned char sha[32], int64_t created,
		    const char *addr);
/* Revoke and forget <id> because the fleet deleted it (not announced
 * again). SBX_OK, SBX_E_NOTFOUND or SBX_E_STATIC. */
enum sbx_err	 sbx_delete_quiet(const char *id);

#endif
