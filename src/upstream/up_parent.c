/*
 * A parent proxy from its URL. The name is resolved when the
 * configuration is loaded (or reloaded), not per request: the parent is
 * the operator's, not the sandbox's, and the destination guard does not
 * apply to it.
 */
#include "config.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "dns/net_guard.h"
#include "upstream/upstream.h"
#include "util/util.h"

static int
parent_resolve(struct up_parent *p, const char **why)
{
	struct addrinfo	 hints, *res, *ai;
	char		 port[8];
	int		 rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%d", p->p_port);
	if ((rc = getaddrinfo(p->p_host, port, &hints, &res)) != 0) {
		*why = "its host name does not resolve";
		return -1;
	}
	for (ai = res; ai != NULL && p->p_naddrs < UP_PARENT_MAXADDRS;
	    ai = ai->ai_next) {
		if (ai->ai_addrlen > sizeof(p->p_addrs[0]))
			continue;
		memcpy(&p->p_addrs[p->p_naddrs], ai->ai_addr, ai->ai_addrlen);
		p->p_lens[p->p_naddrs++] = ai->ai_addrlen;
	}
	freeaddrinfo(res);
	if (p->p_naddrs == 0) {
		*why = "its host name has no address";
		return -1;
	}
	return 0;
}

struct up_parent *
up_parent_new(const char *url, const char **why)
{
	struct up_parent	*p;
	struct net_addr		 a;
	const char		*s, *hp, *end, *colon;
	char			 host[256], out[320];
	size_t			 hl;
	long			 port;
	char			*ep;
	enum up_kind		 kind;

	if (strncmp(url, "http://", 7) == 0) {
		kind = UP_HTTP;
		s = url + 7;
	} else if (strncmp(url, "socks5://", 9) == 0) {
		kind = UP_SOCKS5;
		s = url + 9;
	} else if (strncmp(url, "socks5h://", 10) == 0) {
		kind = UP_SOCKS5;
		s = url + 10;
	} else {
		*why = "expected http://HOST:PORT or socks5://HOST:PORT";
		return NULL;
	}
	end = s + strcspn(s, "/?#");
	if (memchr(s, '@', (size_t)(end - s)) != NULL) {
		*why = "credentials do not go in the URL: put \"user:pass\" "
		    "in a source (proxy_auth: env:NAME or file:PATH)";
		return NULL;
	}
	if (*end != '\0' && strcmp(end, "/") != 0) {
		*why = "a parent proxy URL has no path, query or fragment";
		return NULL;
	}
	if (*s == '[') {
		if ((hp = memchr(s, ']', (size_t)(end - s))) == NULL) {
			*why = "missing \"]\"";
			return NULL;
		}
		hl = (size_t)(hp - s - 1);
		if (hl == 0 || hl >= sizeof(host)) {
			*why = "bad IPv6 address";
			return NULL;
		}
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		if (net_host_literal(host, &a) != 1 ||
		    a.na_family != AF_INET6) {
			*why = "brackets are for IPv6 addresses";
			return NULL;
		}
		colon = hp + 1;
		if (colon >= end || *colon != ':') {
			*why = "missing \":PORT\"";
			return NULL;
		}
	} else {
		colon = memchr(s, ':', (size_t)(end - s));
		if (colon != NULL && memchr(colon + 1, ':',
		    (size_t)(end - colon - 1)) != NULL) {
			*why = "IPv6 addresses need brackets, e.g. "
			    "http://[::1]:3128";
			return NULL;
		}
		if (colon == NULL) {
			*why = "missing \":PORT\"";
			return NULL;
		}
		hl = (size_t)(colon - s);
		if (hl == 0 || hl >= sizeof(host)) {
			*why = "missing or too long host";
			return NULL;
		}
		memcpy(host, s, hl);
		host[hl] = '\0';
	}
	port = strtol(colon + 1, &ep, 10);
	if (ep == colon + 1 || ep != end || port < 1 || port > 65535) {
		*why = "port must be a number from 1 to 65535";
		return NULL;
	}
	p = xcalloc(1, sizeof(*p));
	p->p_kind = kind;
	p->p_host = xstrdup(host);
	p->p_port = (int)port;
	if (parent_resolve(p, why) == -1) {
		up_parent_free(p);
		return NULL;
	}
	snprintf(out, sizeof(out), strchr(host, ':') != NULL ? "%s://[%s]:%d" :
	    "%s://%s:%d", kind == UP_HTTP ? "http" : "socks5", host,
	    p->p_port);
	p->p_url = xstrdup(out);
	return p;
}

void
up_parent_set_auth(struct up_parent *p, char *auth, size_t len)
{
	if (p->p_auth != NULL) {
		OPENSSL_cleanse(p->p_auth, p->p_auth_len);
		free(p->p_auth);
	}
	p->p_auth = auth;
	p->p_auth_len = len;
}

void
up_parent_free(struct up_parent *p)
{
	if (p == NULL)
		return;
	up_parent_set_auth(p, NULL, 0);
	free(p->p_url);
	free(p->p_host);
	free(p);
}
