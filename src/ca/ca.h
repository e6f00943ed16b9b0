/*
 * Certificate authorities, one per sandbox, and the leaf certificates
 * minted under them for intercepted TLS.
 *
 * A sandbox's CA lives in state_dir/ca/<sandbox-id>/ca.crt (0644) and
 * ca.key (0600): ECDSA P-256, basicConstraints CA:TRUE pathlen:0, keyUsage
 * keyCertSign+cRLSign, subject naming the sandbox, random serial. Each CA
 * also holds one ECDSA P-256 leaf key (in memory only) used for every leaf
 * it signs. Another sandbox's CA never validates this sandbox's leaves.
 */
#ifndef AIRLOCK_CA_H
#define AIRLOCK_CA_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

struct ca;
struct ca_cache;

/*
 * The CA of <sandbox_id>, loaded from state_dir/ca/<id>/ or created there
 * (directories 0700; refuses a ca.key readable by group or others). CAs are
 * kept in a process-wide registry: the same pointer comes back for the same
 * (state_dir, id) until ca_registry_drop() or ca_registry_free(). Returns a
 * borrowed pointer, or NULL after logging. Thread-safe.
 */
struct ca	*ca_get(const char *state_dir, const char *sandbox_id);

/*
 * Forget <sandbox_id>'s CA and delete its directory (revocation when a
 * sandbox is deleted). Leaves minted under it are purged from every cache
 * lazily (their keys carry the CA's generation tag). Returns 0 or -1.
 * Connections still holding the CA keep a valid pointer: CAs are freed only
 * by ca_registry_free() at exit.
 */
int		 ca_registry_drop(const char *state_dir, const char *sandbox_id);
void		 ca_registry_free(void);

/*
 * tls.fleet_ca_key: read the fleet master key (a 0600 file of at least 32
 * bytes) at start. From then on a sandbox CA that does not exist yet is
 * derived from it (ca_fleet.c), the same on every gateway with that key.
 * 0, or -1 (logged).
 */
int		 ca_fleet_set_key(const char *path);
int		 ca_fleet_on(void);
void		 ca_fleet_clear(void);

X509		*ca_cert(const struct ca *);		/* borrowed */
EVP_PKEY	*ca_leaf_key(const struct ca *);	/* borrowed */
const char	*ca_cert_path(const struct ca *);	/* ".../ca.crt" */
const char	*ca_sandbox_id(const struct ca *);
uint64_t	 ca_generation(const struct ca *);	/* random per load */
/* PEM text of the CA certificate (borrowed, NUL-terminated). */
const char	*ca_cert_pem(const struct ca *);

/*
 * Mint a leaf for <host>: a DNS name, or an IP literal (then an IP SAN).
 * SAN is exactly the host; subject CN = host; notBefore = now - 1h;
 * notAfter = now + validity (capped at 30 days); random 128-bit serial;
 * keyUsage digitalSignature, extendedKeyUsage serverAuth, basicConstraints
 * CA:FALSE, AKI from the CA; signed with the CA key (SHA-256); public key
 * is ca_leaf_key(). Returns a new reference (X509_free) or NULL after
 * logging.
 */
X509		*ca_mint_leaf(struct ca *, const char *host,
		    uint64_t validity_ms);

/*
 * Bounded LRU of minted leaves keyed by (CA generation, host), shared by
 * all workers: sharded (e.g. 16 shards, each its own mutex, hash table and
 * LRU list; capacity split across shards). A hit does no signing. Entries
 * whose notAfter is less than 1 hour away are re-minted.
 */
struct ca_cache	*ca_cache_new(size_t capacity);
void		 ca_cache_free(struct ca_cache *);
/*
 * The leaf for (<ca>, <host>): cached, or minted and inserted. Returns a
 * new reference (caller X509_free()s) or NULL. *minted (may be NULL) is 1
 * when this call signed a certificate.
 */
X509		*ca_cache_get(struct ca_cache *, struct ca *, const char *host,
		    uint64_t validity_ms, int *minted);
/* Counters for metrics and tests. */
void		 ca_cache_stats(struct ca_cache *, uint64_t *hits,
		    uint64_t *misses, size_t *entries);

#endif
