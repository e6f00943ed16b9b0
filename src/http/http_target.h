/*
 * Request targets (RFC 9112 section 3.2): absolute-form for the explicit
 * proxy, authority-form for CONNECT, origin-form inside intercepted TLS,
 * and Host header values. Pure; hosts come out normalised by
 * pol_host_normalize() and paths by pol_path_normalize().
 */
#ifndef AIRLOCK_HTTP_TARGET_H
#define AIRLOCK_HTTP_TARGET_H

#include <stddef.h>

struct http_target {
	char	 t_host[256];	/* normalised; IPv6 without brackets */
	int	 t_port;	/* explicit or the scheme's default */
	int	 t_has_port;
	int	 t_https;	/* absolute-form with https:// */
	char	*t_path;	/* normalised path, no query (heap) */
	char	*t_query;	/* after '?', raw (heap), or NULL */
	char	*t_path_raw;	/* a refused path as sent, for the audit
				   (heap), or NULL */
};

/*
 * "host[:port]" (IPv6 in brackets). <need_port>: CONNECT requires one.
 * Returns 0, or -1 with *why set to a static message.
 */
int	http_authority_parse(const char *s, size_t len, int default_port,
	    int need_port, struct http_target *, const char **why);

/*
 * Absolute-form ("http://h[:p]/path?q", also https:// when <allow_https>)
 * or, when <allow_origin>, origin-form ("/path?q", host left empty).
 * Userinfo and fragments are refused; so are paths pol_path_normalize()
 * refuses. On success the caller owns t_path/t_query
 * (http_target_fini()). On failure, what could be read is left for the
 * audit: t_host/t_port when the authority parsed (after any userinfo),
 * t_path_raw when the path was refused; http_target_fini() frees it.
 */
int	http_target_parse(const char *url, size_t len, int allow_https,
	    int allow_origin, struct http_target *, const char **why);
void	http_target_fini(struct http_target *);

#endif
