/*
 * Parent proxies (upstream.proxy, a rule's "via"): what the configuration
 * says (up_cfg.c) and the dialer that asks a parent for a tunnel to one
 * destination (up_dial.c: HTTP CONNECT or SOCKS5) over a socket
 * bufferevent the caller has started connecting to the parent.
 */
#ifndef AIRLOCK_UPSTREAM_H
#define AIRLOCK_UPSTREAM_H

#include <stddef.h>
#include <sys/socket.h>

#define UP_PARENT_MAXADDRS	4	/* parent addresses kept from a name */

enum up_kind {
	UP_HTTP = 1,		/* http://: CONNECT host:port */
	UP_SOCKS5,		/* socks5://: RFC 1928 CONNECT */
};

struct up_parent {
	enum up_kind		 p_kind;
	char			*p_url;		/* "http://host:port", no
						   credentials: the audit's
						   "via" and the pool key */
	char			*p_host;	/* as configured */
	int			 p_port;
	struct sockaddr_storage	 p_addrs[UP_PARENT_MAXADDRS];
	socklen_t		 p_lens[UP_PARENT_MAXADDRS];
	size_t			 p_naddrs;
	char			*p_auth;	/* "user:pass" or NULL; wiped */
	size_t			 p_auth_len;
};

/*
 * "http://HOST:PORT" or "socks5://HOST:PORT" (HOST a name, resolved now,
 * or an IP literal, IPv6 bracketed). Credentials in the URL are refused
 * (they would be in the configuration and in messages). Returns NULL and
 * sets *why on failure.
 */
struct up_parent *up_parent_new(const char *url, const char **why);
void	up_parent_free(struct up_parent *);
/* Attach "user:pass" (owned by the parent from now on). */
void	up_parent_set_auth(struct up_parent *, char *auth, size_t len);

struct bufferevent;
struct up_dial;
/* ok 1: the tunnel is open, the bufferevent's callbacks are the caller's
   again; ok 0: <reason> says what the parent said or did. */
typedef void	up_dial_cb(void *arg, int ok, const char *reason);

/*
 * Over <bev> (a socket bufferevent connecting to <p>), open a tunnel to
 * <target> (a name, or an IP literal, IPv6 without brackets) port <port>.
 * Bytes the parent sent past its answer stay in <bev>'s input.
 */
struct up_dial *up_dial_new(struct bufferevent *bev,
	    const struct up_parent *p, const char *target, int port,
	    up_dial_cb *cb, void *arg);
void	up_dial_free(struct up_dial *);

#endif
