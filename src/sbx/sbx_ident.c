/*
 * Who an explicit-proxy request speaks for: the decision, apart from the
 * connection that asks (conn/conn_ident.c applies it). Proxy-Authorization
 * Basic ID:TOKEN, the token compared in constant time (sbx_auth); without
 * the field, the listener's default sandbox; a revoked sandbox is no one.
 */
#include "config.h"

#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "sbx/sbx.h"
#include "util/util.h"

struct sbx *
sbx_ident(const char *authz, size_t len, const char *default_id,
    char *login, size_t loginsz, const char **why)
{
	struct sbx	*s = NULL;
	const char	*colon;
	char		 creds[512];
	int		 n = -1;

	if (loginsz > 0)
		login[0] = '\0';

	if (authz == NULL) {
		if (default_id != NULL)
			s = sbx_find(default_id);
		if (s == NULL) {
			*why = "proxy credentials required";
			return NULL;
		}
	} else {
		if (len > 6 && strncasecmp(authz, "basic ", 6) == 0) {
			authz += 6;
			len -= 6;
			util_trim_ows(&authz, &len);
			n = util_base64_decode(authz, len, creds,
			    sizeof(creds));
		}
		if (n > 0 && (colon = memchr(creds, ':', (size_t)n)) != NULL) {
			*(char *)colon = '\0';
			s = sbx_auth(creds, colon + 1,
			    (size_t)(n - (colon + 1 - creds)));
			if (s == NULL && loginsz > 0)
				util_copy_str(login, creds, loginsz);
		}
		if (n > 0)
			OPENSSL_cleanse(creds, (size_t)n);
	}
	if (s != NULL && __atomic_load_n(&s->sb_revoked, __ATOMIC_ACQUIRE)) {
		sbx_unref(s);
		s = NULL;
	}
	if (s == NULL)
		*why = "proxy credentials not valid";
	return s;
}
