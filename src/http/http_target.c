#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http_target.h"
#include "policy/pol.h"
#include "util/util.h"

int
http_authority_parse(const char *s, size_t len, int default_port,
    int need_port, struct http_target *t, const char **why)
{
	const char	*end = s + len, *hend;
	char		 host[256], pbuf[8];
	size_t		 hlen, plen, i;
	long		 port = default_port;

	if (len > 0 && *s == '[') {
		if ((hend = memchr(s, ']', len)) == NULL) {
			*why = "bad IPv6 literal";
			return -1;
		}
		hend++;
	} else {
		hend = s;
		while (hend < end && *hend != ':')
			hend++;
	}
	hlen = (size_t)(hend - s);
	if (hlen == 0 || hlen >= sizeof(host)) {
		*why = "bad host";
		return -1;
	}
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	t->t_has_port = 0;
	if (hend < end) {
		plen = (size_t)(end - hend - 1);
		if (*hend != ':' || plen == 0 || plen > 5) {
			*why = "bad port";
			return -1;
		}
		for (i = 0; i < plen; i++)
			if (hend[1 + i] < '0' || hend[1 + i] > '9') {
				*why = "bad port";
				return -1;
			}
		memcpy(pbuf, hend + 1, plen);
		pbuf[plen] = '\0';
		port = strtol(pbuf, NULL, 10);
		if (port < 1 || port > 65535) {
			*why = "bad port";
			return -1;
		}
		t->t_has_port = 1;
	} else if (need_port) {
		*why = "target needs host:port";
		return -1;
	}
	if (pol_host_normalize(host, t->t_host, sizeof(t->t_host)) == -1) {
		*why = "bad host";
		return -1;
	}
	t->t_port = (int)port;
	return 0;
}

/* The path and query of a target starting at <p> ('/', '?' or end). */
static int
parse_path_query(const char *p, const char *end, struct http_target *t,
    const char **why)
{
	const char	*q = memchr(p, '?', (size_t)(end - p));
	size_t		 sz = (size_t)(end - p) + 2;

	t->t_path = xmalloc(sz);
	if (p == end || *p == '?')
		strcpy(t->t_path, "/");		/* "http://h?q": path "/" */
	else if (pol_path_normalize(p, (size_t)((q ? q : end) - p), t->t_path,
	    sz) == -1) {
		free(t->t_path);
		t->t_path = NULL;
		t->t_path_raw = xstrndup(p, (size_t)((q ? q : end) - p));
		*why = "path is not acceptable (encoded backslash or NUL, "
		    "dot segment with parameters, climbs above /, or reads "
		    "two ways around an encoded slash)";
		return -1;
	}
	t->t_query = q != NULL ? xstrndup(q + 1, (size_t)(end - q - 1)) : NULL;
	return 0;
}

int
http_target_parse(const char *url, size_t len, int allow_https,
    int allow_origin, struct http_target *t, const char **why)
{
	const char	*p = url, *end = url + len, *auth, *at;

	memset(t, 0, sizeof(*t));
	if (memchr(url, '#', len) != NULL) {
		*why = "fragment in request target";
		return -1;
	}
	if (allow_origin && len > 0 && *url == '/')
		return parse_path_query(url, end, t, why);
	if (len > 7 && strncasecmp(p, "http://", 7) == 0)
		p += 7;
	else if (len > 8 && strncasecmp(p, "https://", 8) == 0) {
		if (!allow_https) {
			*why = "https:// targets need CONNECT";
			return -1;
		}
		p += 8;
		t->t_https = 1;
	} else {
		*why = allow_origin ? "bad request target" :
		    "request target is not an absolute http:// URI";
		return -1;
	}
	auth = p;
	while (p < end && *p != '/' && *p != '?')
		p++;
	if ((at = memrchr(auth, '@', (size_t)(p - auth))) != NULL) {
		/* the host it names, for the audit only */
		(void)http_authority_parse(at + 1, (size_t)(p - at - 1),
		    t->t_https ? 443 : 80, 0, t, why);
		*why = "userinfo in request target";
		return -1;
	}
	if (http_authority_parse(auth, (size_t)(p - auth),
	    t->t_https ? 443 : 80, 0, t, why) == -1)
		return -1;
	return parse_path_query(p, end, t, why);
}

void
http_target_fini(struct http_target *t)
{
	free(t->t_path);
	free(t->t_query);
	free(t->t_path_raw);
	t->t_path = t->t_query = t->t_path_raw = NULL;
}
