/*
 * Token brokers: secrets the gateway mints itself from a credential it
 * holds (an OAuth client secret or refresh token, a Google service-account
 * key, a GitHub App private key), cached until shortly before they expire
 * and renewed by the secrets store (sec_store.c), one request to the
 * token endpoint at a time.
 *   sec_cfg_broker.c  the "source: {KIND: {...}}" mappings
 *   sec_broker.c      one mint: the grant, the JWT (RS256), the answer
 *   sec_http.c        one blocking HTTPS POST through the destination
 *                     guard, for the store's broker threads only
 */
#ifndef AIRLOCK_SEC_BROKER_H
#define AIRLOCK_SEC_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include "cfg/cfg_walk.h"

struct cfg;
struct cfg_secret;
struct sec_val;

#define SEC_BROKER_MARGIN_MS	60000	/* renew_before default */

/* sec_cfg.c: a plain source as stored, or NULL after an error at <v>. */
char	*sec_cfg_plain_source(struct cfg_parse *, const yaml_node_t *v,
	    const char *s, const char *key);
/* sec_cfg_broker.c: "source" given as a mapping; the secret's checks. */
void	 sec_cfg_broker(struct cfg_parse *, yaml_node_t *map,
	    struct cfg_secret *);
void	 sec_cfg_broker_check(struct cfg_parse *, yaml_node_t *map,
	    const struct cfg_secret *);

/* What one mint brought back. */
struct sec_mint {
	struct sec_val	*sm_token;	/* new ref */
	uint64_t	 sm_expires;	/* wall clock, seconds */
	struct sec_val	*sm_cred;	/* a rotated refresh token, or NULL */
};

/*
 * Mint a token for broker secret <sc> with its credential <cred> (and
 * <cred2>, oauth2_refresh's client_secret, or NULL). Blocks
 * (at most SEC_HTTP_TIMEOUT_MS); <stopfd> readable aborts. 0, or -1 with
 * the reason in <why> (never a value).
 */
int	sec_broker_mint(const struct cfg *, const struct cfg_secret *sc,
	    const struct sec_val *cred, const struct sec_val *cred2,
	    int stopfd, struct sec_mint *out, char *why, size_t whysz);

/* sec_http.c */
#define SEC_HTTP_TIMEOUT_MS	10000
#define SEC_HTTP_MAX_BODY	(64 * 1024)

struct sec_http_resp {
	int		 hr_status;
	struct sec_val	*hr_body;	/* locked memory, NUL-terminated */
};

/*
 * POST <body> (locked by the caller) to <url> with the header lines
 * <fields> ("Name: value\r\n"..., may be NULL): the address checked
 * against the destination guard, TLS verified against upstream.ca_file
 * for https. 0 with the answer (any status), or -1 and <why>.
 */
int	sec_http_post(const struct cfg *, const char *url, const char *fields,
	    const char *body, size_t len, int stopfd,
	    struct sec_http_resp *out, char *why, size_t whysz);

#endif
