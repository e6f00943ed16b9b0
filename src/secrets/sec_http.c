/*
 * One blocking HTTP/1.1 POST for the token brokers (sec_broker.h), run by
 * the secrets store's broker threads, never by a worker. The destination
 * is judged by the gateway's own guard (deny_networks/allow_networks) like
 * any upstream, upstream.hosts overrides apply, https is verified against
 * upstream.ca_file. The answer's body lands in locked memory; the request
 * body is the caller's (locked too). Nothing here logs a body.
 */
#include "config.h"

#include <sys/socket.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <llhttp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "cfg/cfg.h"
#include "dns/net_guard.h"
#include "secrets/sec.h"
#include "secrets/sec_broker.h"
#include "tls/tls.h"
#include "util/util.h"

struct hconn {
	int		 h_fd;
	SSL		*h_ssl;
	uint64_t	 h_deadline;	/* monotonic ms */
	int		 h_stopfd;
};

/* Split <url> into host, port and path+query (host[], path[]). */
static int
url_split(const char *url, int *tls, char *host, size_t hostsz, int *port,
    char *path, size_t pathsz)
{
	const char	*h, *e, *c;
	size_t		 n;
	long		 p;

	*tls = strncmp(url, "https://", 8) == 0;
	h = url + (*tls ? 8 : 7);
	e = h + strcspn(h, "/?#");
	*port = *tls ? 443 : 80;
	if (*h == '[') {
		if ((c = memchr(h, ']', (size_t)(e - h))) == NULL)
			return -1;
		n = (size_t)(c - h - 1);
		if (n == 0 || n >= hostsz)
			return -1;
		memcpy(host, h + 1, n);
		c++;
	} else {
		c = memchr(h, ':', (size_t)(e - h));
		n = (size_t)((c != NULL ? c : e) - h);
		if (n == 0 || n >= hostsz)
			return -1;
		memcpy(host, h, n);
		if (c == NULL)
			c = e;
	}
	host[n] = '\0';
	if (c < e && *c == ':') {
		p = strtol(c + 1, NULL, 10);
		if (p <= 0 || p > 65535)
			return -1;
		*port = (int)p;
	}
	snprintf(path, pathsz, "%s", *e == '/' ? e : "/");
	if (*e == '?')
		snprintf(path, pathsz, "/%s", e);
	if ((n = strcspn(path, "#")) < strlen(path))
		path[n] = '\0';
	return 0;
}

/* Wait for <ev> on the socket until the deadline; -1 on timeout/stop. */
static int
io_wait(struct hconn *hc, short ev, char *why, size_t whysz)
{
	struct pollfd	pfd[2];
	uint64_t	now;
	int		r, ms;

	for (;;) {
		now = util_now_ms();
		if (now >= hc->h_deadline) {
			snprintf(why, whysz, "timed out");
			return -1;
		}
		ms = (int)(hc->h_deadline - now);
		pfd[0].fd = hc->h_fd;
		pfd[0].events = ev;
		pfd[1].fd = hc->h_stopfd;
		pfd[1].events = POLLIN;
		r = poll(pfd, hc->h_stopfd != -1 ? 2 : 1, ms);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			snprintf(why, whysz, "poll: %s", strerror(errno));
			return -1;
		}
		if (hc->h_stopfd != -1 && (pfd[1].revents & POLLIN)) {
			snprintf(why, whysz, "stopped");
			return -1;
		}
		if (pfd[0].revents != 0)
			return 0;
	}
}

/* The addresses of <host>: upstream.hosts first, else the resolver. */
static int
resolve(const struct cfg *cfg, const char *host, int port,
    struct sockaddr_storage *ss, socklen_t *sslen, size_t max, size_t *n,
    char *why, size_t whysz)
{
	struct addrinfo	 hints, *res, *ai;
	const char	*name = host;
	char		 ps[8];
	size_t		 i;
	int		 err;

	for (i = 0; i < cfg->c_nupstream_hosts; i++)
		if (strcasecmp(cfg->c_upstream_hosts[i].h_name, host) == 0)
			name = cfg->c_upstream_hosts[i].h_ip;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = name != host ? AI_NUMERICHOST : 0;
	snprintf(ps, sizeof(ps), "%d", port);
	if ((err = getaddrinfo(name, ps, &hints, &res)) != 0) {
		snprintf(why, whysz, "cannot resolve %s: %s", host,
		    gai_strerror(err));
		return -1;
	}
	*n = 0;
	for (ai = res; ai != NULL && *n < max; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		memcpy(&ss[*n], ai->ai_addr, ai->ai_addrlen);
		sslen[(*n)++] = ai->ai_addrlen;
	}
	freeaddrinfo(res);
	if (*n == 0) {
		snprintf(why, whysz, "%s has no address", host);
		return -1;
	}
	return 0;
}

/* Connect to the first address the guard allows and that answers. */
static int
hconn_open(struct hconn *hc, const struct cfg *cfg, const char *host,
    int port, char *why, size_t whysz)
{
	struct sockaddr_storage	 ss[8];
	socklen_t		 sslen[8];
	struct net_addr		 a;
	char			 net[64], as[64];
	size_t			 n, i, allowed = 0;
	socklen_t		 el;
	int			 fd, e;

	if (resolve(cfg, host, port, ss, sslen, 8, &n, why, whysz) == -1)
		return -1;
	snprintf(why, whysz, "no address");
	for (i = 0; i < n; i++) {
		if (net_addr_from_sockaddr((struct sockaddr *)&ss[i], &a) ==
		    -1)
			continue;
		if (!net_guard_check(cfg->c_guard, &a, net, sizeof(net))) {
			net_addr_format(&a, as, sizeof(as));
			snprintf(why, whysz, "%s (%s) is in denied network %s",
			    host, as, net);
			continue;
		}
		allowed++;
		fd = socket(ss[i].ss_family, SOCK_STREAM | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, 0);
		if (fd == -1) {
			snprintf(why, whysz, "socket: %s", strerror(errno));
			continue;
		}
		hc->h_fd = fd;
		if (connect(fd, (struct sockaddr *)&ss[i], sslen[i]) == 0)
			return 0;
		if (errno == EINPROGRESS && io_wait(hc, POLLOUT, why,
		    whysz) == 0) {
			el = sizeof(e);
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 &&
			    e == 0)
				return 0;
			snprintf(why, whysz, "connect to %s port %d: %s", host,
			    port, strerror(e));
		} else if (errno != EINPROGRESS)
			snprintf(why, whysz, "connect to %s port %d: %s", host,
			    port, strerror(errno));
		close(fd);
		hc->h_fd = -1;
	}
	return -1;
}

/* One SSL call until it no longer wants I/O. */
static int
tls_step(struct hconn *hc, int r, char *why, size_t whysz, const char *what)
{
	unsigned long	e;
	int		err;

	err = SSL_get_error(hc->h_ssl, r);
	if (err == SSL_ERROR_WANT_READ)
		return io_wait(hc, POLLIN, why, whysz) == 0 ? 1 : -1;
	if (err == SSL_ERROR_WANT_WRITE)
		return io_wait(hc, POLLOUT, why, whysz) == 0 ? 1 : -1;
	if (err == SSL_ERROR_ZERO_RETURN)
		return 0;
	e = ERR_peek_last_error();
	if (SSL_get_verify_result(hc->h_ssl) != X509_V_OK)
		snprintf(why, whysz, "TLS %s: certificate not verified: %s",
		    what, X509_verify_cert_error_string(
		    SSL_get_verify_result(hc->h_ssl)));
	else
		snprintf(why, whysz, "TLS %s: %s", what, e != 0 ?
		    ERR_reason_error_string(e) : "connection closed");
	ERR_clear_error();
	return -1;
}

static int
hconn_write(struct hconn *hc, const char *p, size_t len, char *why,
    size_t whysz)
{
	ssize_t	w;
	int	r, st;

	while (len > 0) {
		if (hc->h_ssl != NULL) {
			r = SSL_write(hc->h_ssl, p, (int)(len > 16384 ? 16384 :
			    len));
			if (r > 0) {
				p += r;
				len -= (size_t)r;
				continue;
			}
			if ((st = tls_step(hc, r, why, whysz, "write")) != 1)
				return -1;
			continue;
		}
		w = write(hc->h_fd, p, len);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		if (w == -1 && (errno == EAGAIN || errno == EINTR)) {
			if (io_wait(hc, POLLOUT, why, whysz) == -1)
				return -1;
			continue;
		}
		snprintf(why, whysz, "write: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Read some bytes: >0, 0 at the end, -1 on error. */
static ssize_t
hconn_read(struct hconn *hc, char *p, size_t len, char *why, size_t whysz)
{
	ssize_t	r;
	int	st;

	for (;;) {
		if (hc->h_ssl != NULL) {
			r = SSL_read(hc->h_ssl, p, (int)len);
			if (r > 0)
				return r;
			if ((st = tls_step(hc, (int)r, why, whysz, "read")) != 1)
				return st;
			continue;
		}
		r = read(hc->h_fd, p, len);
		if (r >= 0)
			return r;
		if (errno == EAGAIN || errno == EINTR) {
			if (io_wait(hc, POLLIN, why, whysz) == -1)
				return -1;
			continue;
		}
		snprintf(why, whysz, "read: %s", strerror(errno));
		return -1;
	}
}

/* The answer as llhttp parses it. */
struct hresp {
	struct sec_val	*r_body;
	int		 r_done;
	int		 r_toobig;
};

static int
on_body(llhttp_t *p, const char *at, size_t len)
{
	struct hresp	*r = p->data;

	if (r->r_body->sv_len + len > SEC_HTTP_MAX_BODY) {
		r->r_toobig = 1;
		return HPE_USER;
	}
	memcpy(r->r_body->sv_data + r->r_body->sv_len, at, len);
	r->r_body->sv_len += len;
	r->r_body->sv_data[r->r_body->sv_len] = '\0';
	return 0;
}

static int
on_complete(llhttp_t *p)
{
	((struct hresp *)p->data)->r_done = 1;
	return HPE_PAUSED;
}

static int
read_answer(struct hconn *hc, struct sec_http_resp *out, char *why,
    size_t whysz)
{
	llhttp_settings_t	 set;
	llhttp_t		 p;
	struct hresp		 r;
	char			 buf[4096];
	ssize_t			 n;
	enum llhttp_errno	 err;

	memset(&r, 0, sizeof(r));
	if ((r.r_body = sec_val_new(SEC_HTTP_MAX_BODY)) == NULL) {
		snprintf(why, whysz, "out of memory");
		return -1;
	}
	llhttp_settings_init(&set);
	set.on_body = on_body;
	set.on_message_complete = on_complete;
	llhttp_init(&p, HTTP_RESPONSE, &set);
	p.data = &r;
	while (!r.r_done) {
		n = hconn_read(hc, buf, sizeof(buf), why, whysz);
		if (n < 0)
			goto fail;
		err = n == 0 ? llhttp_finish(&p) : llhttp_execute(&p, buf,
		    (size_t)n);
		OPENSSL_cleanse(buf, (size_t)n);
		if (r.r_done || err == HPE_PAUSED)
			break;
		if (err != HPE_OK) {
			if (r.r_toobig)
				snprintf(why, whysz, "the answer's body is "
				    "over %d bytes", SEC_HTTP_MAX_BODY);
			else
				snprintf(why, whysz, "bad HTTP answer: %s",
				    llhttp_errno_name(err));
			goto fail;
		}
		if (n == 0) {
			snprintf(why, whysz, "the connection closed before "
			    "the answer ended");
			goto fail;
		}
	}
	out->hr_status = p.status_code;
	out->hr_body = r.r_body;
	return 0;
fail:
	sec_val_unref(r.r_body);
	return -1;
}

int
sec_http_post(const struct cfg *cfg, const char *url, const char *fields,
    const char *body, size_t len, int stopfd, struct sec_http_resp *out,
    char *why, size_t whysz)
{
	struct hconn	 hc;
	SSL_CTX		*ctx = NULL;
	char		 host[256], path[1024], head[2048], w[768];
	int		 tls, port, r, st, rc = -1;

	memset(out, 0, sizeof(*out));
	if (url_split(url, &tls, host, sizeof(host), &port, path,
	    sizeof(path)) == -1) {
		snprintf(why, whysz, "bad token endpoint URL");
		return -1;
	}
	hc.h_fd = -1;
	hc.h_ssl = NULL;
	hc.h_stopfd = stopfd;
	hc.h_deadline = util_now_ms() + SEC_HTTP_TIMEOUT_MS;
	if (hconn_open(&hc, cfg, host, port, w, sizeof(w)) == -1)
		goto out;
	if (tls) {
		if ((ctx = tls_client_ctx_new(cfg)) == NULL ||
		    (hc.h_ssl = tls_client_ssl_new(ctx, host)) == NULL) {
			snprintf(w, sizeof(w), "TLS setup failed");
			goto out;
		}
		SSL_set_fd(hc.h_ssl, hc.h_fd);
		while ((r = SSL_connect(hc.h_ssl)) != 1)
			if ((st = tls_step(&hc, r, w, sizeof(w),
			    "handshake")) != 1) {
				if (st == 0)
					snprintf(w, sizeof(w), "TLS handshake: "
					    "connection closed");
				goto out;
			}
	}
	if (port == (tls ? 443 : 80))
		snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: %s\r\n",
		    path, host);
	else
		snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: %s:%d"
		    "\r\n", path, host, port);
	snprintf(head + strlen(head), sizeof(head) - strlen(head),
	    "User-Agent: airlock\r\nConnection: close\r\n"
	    "Accept-Encoding: identity\r\nContent-Length: %zu\r\n", len);
	if (hconn_write(&hc, head, strlen(head), w, sizeof(w)) == -1 ||
	    (fields != NULL && hconn_write(&hc, fields, strlen(fields), w,
	    sizeof(w)) == -1) || hconn_write(&hc, "\r\n", 2, w,
	    sizeof(w)) == -1 || hconn_write(&hc, body, len, w,
	    sizeof(w)) == -1)
		goto out;
	if (read_answer(&hc, out, w, sizeof(w)) == -1)
		goto out;
	rc = 0;
out:
	if (rc == -1)
		snprintf(why, whysz, "%s%s", strncmp(w, "connect", 7) == 0 ||
		    strstr(w, host) != NULL ? "" : "token endpoint: ", w);
	if (hc.h_ssl != NULL) {
		if (rc == 0)
			(void)SSL_shutdown(hc.h_ssl);
		SSL_free(hc.h_ssl);
	}
	SSL_CTX_free(ctx);
	if (hc.h_fd != -1)
		close(hc.h_fd);
	return rc;
}
