/*
 * loadgen: HTTP/1.1 GET load generator for airlock's benchmarks.
 *
 * Each thread runs its own event_base with its share of the connections;
 * each connection keeps exactly one request in flight. Responses are
 * parsed just enough to find where they end (status line, Content-Length,
 * chunked, or close-delimited); body bytes are counted and drained from
 * the input evbuffer, never copied. Latencies are kept as microseconds,
 * up to LAT_MAX samples, and sorted once at the end for percentiles.
 *
 * https:// URLs speak TLS (OpenSSL through bufferevent_openssl): straight
 * to the host, or with -x through a CONNECT tunnel that each connection
 * opens first, then a TLS handshake inside it (SNI and certificate check
 * for the URL's host). A request is written once its connection's
 * handshake is done; its latency still counts from the moment it was due,
 * so with -K it includes TCP connect, CONNECT and the handshake.
 *
 * --sse also times the first "data:" of each response body, from the
 * moment the request was written (after any handshake), for the
 * time-to-first-event of a Server-Sent Events stream.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <getopt.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define LAT_MAX		10000000	/* latency samples kept, all threads */
#define HEAD_MAX	(64 * 1024)
#define IO_SINGLE	(256 * 1024)	/* per-syscall read size */
#define RETRY_MS	10		/* pause after a socket error */
#define TTFE_MAX	1000000		/* --sse samples kept, all threads */

enum lc_state {
	LC_CONNECT = 0,		/* waiting for the proxy's CONNECT answer */
	LC_HEAD,		/* waiting for the response head */
	LC_BODY_LEN,		/* Content-Length body */
	LC_CHUNK_SIZE,
	LC_CHUNK_DATA,
	LC_CHUNK_CRLF,
	LC_TRAILER,
	LC_BODY_EOF,		/* body ends when the server closes */
};

struct lg_thread;

struct lg_conn {
	struct lg_thread	*c_t;
	struct bufferevent	*c_bev;
	enum lc_state		 c_state;
	uint64_t		 c_left;	/* body or chunk bytes left */
	uint64_t		 c_body;	/* body bytes so far */
	uint64_t		 c_t0;		/* request start, ns */
	uint64_t		 c_tsent;	/* request written, ns */
	int			 c_ready;	/* connected (and TLS done) */
	int			 c_pending;	/* request waits for c_ready */
	int			 c_ownfd;	/* CONNECT phase: close fd */
	int			 c_match;	/* --sse: "data:" bytes matched */
	int			 c_ttfe_done;	/* --sse: first event seen */
	SSL_SESSION		*c_sess;	/* --resume: last session */
	int			 c_status;
	int			 c_close;	/* server closes after it */
	int			 c_nreq;	/* responses on this socket */
	int			 c_got;		/* response bytes seen */
	int			 c_done;	/* out of work (-n) */
};

struct lg_thread {
	pthread_t		 t_tid;
	struct event_base	*t_base;
	struct lg_conn		*t_conns;
	int			 t_nconns;
	int			 t_active;	/* connections not done */
	uint64_t		 t_quota;	/* requests it may start */
	uint64_t		 t_started;

	uint64_t		 t_ok;		/* complete responses */
	uint64_t		 t_non2xx;
	uint64_t		 t_sockerr;
	uint64_t		 t_bytes;	/* body bytes */
	uint64_t		 t_connects;
	uint64_t		 t_reconnects;	/* stale keep-alive, resent */
	uint64_t		 t_handshakes;	/* TLS handshakes completed */
	uint64_t		 t_resumed;	/* ... of which resumed */
	uint64_t		 t_tlserr;	/* TLS handshakes failed */
	uint64_t		 t_connfail;	/* CONNECT refused by the proxy */
	int			 t_said;	/* first failure reported */
	uint32_t		*t_ttfe;	/* --sse, microseconds */
	size_t			 t_nttfe;
	size_t			 t_capttfe;
	uint32_t		*t_lat;
	size_t			 t_nlat;
	size_t			 t_caplat;
	size_t			 t_maxlat;
	uint64_t		 t_end;		/* ns when the loop stopped */
};

/* Read-only once the threads run. */
static struct sockaddr_storage dst;
static socklen_t dstlen;
static char *request;
static size_t requestlen;
static int keepalive = 1;
static double duration;		/* -d seconds, 0 with -n */
static struct timeval rtimeout = { 30, 0 };
static pthread_barrier_t barrier;
static uint64_t t_start;
static volatile int stopping;	/* set by main on SIGINT/SIGTERM */
static volatile int nrunning;	/* threads still in their loop */
static SSL_CTX *sslctx;		/* https:// URLs */
static char tls_host[256];	/* SNI and certificate name */
static int tls_host_ip;		/* ... an IP literal: no SNI */
static int tls_verify = 1;
static int tls_resume;		/* --resume */
static int via_proxy;		/* -x with https: CONNECT first */
static char *connect_req;	/* CONNECT request, with -x and https */
static const char *tls_cafile;	/* --cafile */
static size_t connect_reqlen;
static int sse_mode;		/* --sse */

static void	lc_start(struct lg_conn *);
static void	lc_readcb(struct bufferevent *, void *);
static void	lc_eventcb(struct bufferevent *, short, void *);

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr,
	    "usage: loadgen -u URL [-x PROXY_HOST:PORT] [-A ID:TOKEN]\n"
	    "           [-c CONNS] [-d SECONDS | -n REQUESTS] [-k | -K]\n"
	    "           [-t THREADS] [-T TIMEOUT_S] [-o json]\n"
	    "           [--cafile FILE | --insecure] [--resume]\n"
	    "           [--connect-to HOST:PORT] [--sse]\n");
	exit(2);
}

static void __attribute__((format(printf, 1, 2), noreturn))
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "loadgen: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void
base64(const char *in, size_t len, char *out)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = (const unsigned char *)in;
	size_t i;
	uint32_t v;

	for (i = 0; i + 2 < len; i += 3) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*out++ = tab[v >> 18], *out++ = tab[(v >> 12) & 63];
		*out++ = tab[(v >> 6) & 63], *out++ = tab[v & 63];
	}
	if (len - i == 1) {
		v = (uint32_t)p[i] << 16;
		*out++ = tab[v >> 18], *out++ = tab[(v >> 12) & 63];
		*out++ = '=', *out++ = '=';
	} else if (len - i == 2) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		*out++ = tab[v >> 18], *out++ = tab[(v >> 12) & 63];
		*out++ = tab[(v >> 6) & 63], *out++ = '=';
	}
	*out = '\0';
}

/*
 * Split "host:port" or "[v6]:port" (port optional when <defport> is given)
 * and resolve it into dst.
 */
static void
resolve(const char *hostport, const char *defport)
{
	struct addrinfo hints, *res;
	char host[256];
	const char *port, *h = hostport, *e;
	size_t hl;
	int error;

	if (*h == '[') {
		if ((e = strchr(h, ']')) == NULL)
			die("bad address: %s", hostport);
		h++;
		hl = e - h;
		port = e[1] == ':' ? e + 2 : NULL;
	} else {
		e = strrchr(h, ':');
		hl = e != NULL ? (size_t)(e - h) : strlen(h);
		port = e != NULL ? e + 1 : NULL;
	}
	if (port == NULL || *port == '\0')
		port = defport;
	if (port == NULL || hl == 0 || hl >= sizeof(host))
		die("bad address: %s", hostport);
	memcpy(host, h, hl);
	host[hl] = '\0';

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if ((error = getaddrinfo(host, port, &hints, &res)) != 0)
		die("%s: %s", hostport, gai_strerror(error));
	memcpy(&dst, res->ai_addr, res->ai_addrlen);
	dstlen = res->ai_addrlen;
	freeaddrinfo(res);
}

/* --resume: keep the newest session of each connection. */
static int
new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
	struct lg_conn *c = SSL_get_app_data(ssl);

	if (c == NULL)
		return 0;
	if (c->c_sess != NULL)
		SSL_SESSION_free(c->c_sess);
	c->c_sess = sess;
	return 1;	/* the reference is ours now */
}

static void
tls_setup(void)
{
	if ((sslctx = SSL_CTX_new(TLS_client_method())) == NULL)
		die("SSL_CTX_new failed");
	SSL_CTX_set_min_proto_version(sslctx, TLS1_2_VERSION);
	if (tls_verify) {
		SSL_CTX_set_verify(sslctx, SSL_VERIFY_PEER, NULL);
		if (tls_cafile != NULL) {
			if (SSL_CTX_load_verify_locations(sslctx, tls_cafile,
			    NULL) != 1)
				die("--cafile %s: %s", tls_cafile,
				    ERR_reason_error_string(ERR_get_error()));
		} else if (SSL_CTX_set_default_verify_paths(sslctx) != 1)
			die("no default trust store");
	}
	/* What curl offers; the server picks http/1.1 or nothing. */
	SSL_CTX_set_alpn_protos(sslctx,
	    (const unsigned char *)"\x08http/1.1", 9);
	/* A close-delimited body may end without close_notify. */
	SSL_CTX_set_options(sslctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	/*
	 * libevent may retry a write with a moved buffer. Never
	 * SSL_MODE_ENABLE_PARTIAL_WRITE: libevent 2.1's SSL write loop
	 * moves on to the next chunk after a short write, which reorders
	 * the bytes on the wire.
	 */
	SSL_CTX_set_mode(sslctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (tls_resume) {
		SSL_CTX_set_session_cache_mode(sslctx, SSL_SESS_CACHE_CLIENT |
		    SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(sslctx, new_session_cb);
	} else
		SSL_CTX_set_session_cache_mode(sslctx, SSL_SESS_CACHE_OFF);
}

/* A fresh SSL for <c>: SNI, name check, and the session to resume. */
static SSL *
lc_ssl(struct lg_conn *c)
{
	SSL *ssl;

	if ((ssl = SSL_new(sslctx)) == NULL)
		die("SSL_new failed");
	SSL_set_app_data(ssl, c);
	/* RFC 6066: no SNI for an address. */
	if (!tls_host_ip && !SSL_set_tlsext_host_name(ssl, tls_host))
		die("SNI %s refused", tls_host);
	if (tls_verify) {
		if (tls_host_ip ? !X509_VERIFY_PARAM_set1_ip_asc(
		    SSL_get0_param(ssl), tls_host) :
		    !SSL_set1_host(ssl, tls_host))
			die("cannot check certificates for %s", tls_host);
	}
	if (tls_resume && c->c_sess != NULL)
		SSL_set_session(ssl, c->c_sess);
	return ssl;
}

/*
 * Build the one request every connection sends (and, for https through a
 * proxy, the CONNECT that opens each tunnel), and resolve where to
 * connect: the proxy, --connect-to, or the URL's host.
 */
static void
build_request(const char *url, const char *proxy, const char *auth,
    const char *connect_to)
{
	const char *authority, *path, *slash, *h, *e;
	char hostport[300], *cred = NULL;
	size_t alen, hl;
	int n, https, absolute, has_port;
	unsigned char abuf[16];

	if (strncmp(url, "http://", 7) == 0) {
		https = 0;
		authority = url + 7;
	} else if (strncmp(url, "https://", 8) == 0) {
		https = 1;
		authority = url + 8;
	} else
		die("only http:// and https:// URLs: %s", url);
	slash = strchr(authority, '/');
	alen = slash != NULL ? (size_t)(slash - authority) : strlen(authority);
	path = slash != NULL ? slash : "/";
	if (alen == 0 || alen >= sizeof(hostport))
		die("bad URL: %s", url);
	memcpy(hostport, authority, alen);
	hostport[alen] = '\0';

	/* The bare host: SNI and the name the certificate must carry. */
	h = hostport;
	if (*h == '[') {
		if ((e = strchr(h, ']')) == NULL)
			die("bad URL: %s", url);
		h++;
	} else if ((e = strrchr(h, ':')) == NULL)
		e = h + strlen(h);
	hl = (size_t)(e - h);
	if (hl == 0 || hl >= sizeof(tls_host))
		die("bad URL: %s", url);
	memcpy(tls_host, h, hl);
	tls_host[hl] = '\0';
	tls_host_ip = inet_pton(AF_INET, tls_host, abuf) == 1 ||
	    inet_pton(AF_INET6, tls_host, abuf) == 1;

	if (auth != NULL) {
		if (strchr(auth, ':') == NULL)
			die("-A wants ID:TOKEN");
		if ((cred = malloc(strlen(auth) / 3 * 4 + 8)) == NULL)
			die("out of memory");
		base64(auth, strlen(auth), cred);
	}
	/*
	 * Plain HTTP through a proxy: absolute-form target, as curl does.
	 * HTTPS through a proxy: a CONNECT per connection, carrying the
	 * credentials, with origin-form requests inside the tunnel.
	 */
	absolute = proxy != NULL && !https;
	via_proxy = proxy != NULL && https;
	has_port = *e == ':' || (e[0] == ']' && e[1] == ':');
	n = asprintf(&request,
	    "GET %s%.*s%s HTTP/1.1\r\n"
	    "Host: %s\r\n"
	    "User-Agent: airlock-loadgen\r\n"
	    "Accept: */*\r\n"
	    "%s%s%s"
	    "%s"
	    "\r\n",
	    absolute ? "http://" : "",
	    absolute ? (int)alen : 0, authority,
	    path, hostport,
	    cred != NULL && absolute ? "Proxy-Authorization: Basic " : "",
	    cred != NULL && absolute ? cred : "",
	    cred != NULL && absolute ? "\r\n" : "",
	    keepalive ? "" : "Connection: close\r\n");
	if (n == -1)
		die("out of memory");
	requestlen = (size_t)n;
	if (via_proxy) {
		/* The CONNECT target always names the port. */
		n = asprintf(&connect_req,
		    "CONNECT %s%s HTTP/1.1\r\n"
		    "Host: %s%s\r\n"
		    "User-Agent: airlock-loadgen\r\n"
		    "%s%s%s"
		    "\r\n",
		    hostport, has_port ? "" : ":443",
		    hostport, has_port ? "" : ":443",
		    cred != NULL ? "Proxy-Authorization: Basic " : "",
		    cred != NULL ? cred : "", cred != NULL ? "\r\n" : "");
		if (n == -1)
			die("out of memory");
		connect_reqlen = (size_t)n;
	}
	free(cred);
	if (proxy != NULL)
		resolve(proxy, NULL);
	else
		resolve(connect_to != NULL ? connect_to : hostport,
		    https ? "443" : "80");
	if (https)
		tls_setup();
}

static void
lc_drop(struct lg_conn *c)
{
	evutil_socket_t fd;
	SSL *ssl;

	if (c->c_bev != NULL) {
		/* The SSL goes with the bufferevent; it must not call us. */
		if ((ssl = bufferevent_openssl_get_ssl(c->c_bev)) != NULL)
			SSL_set_app_data(ssl, NULL);
		fd = bufferevent_getfd(c->c_bev);
		bufferevent_free(c->c_bev);
		if (c->c_ownfd && fd != -1)
			evutil_closesocket(fd);
		c->c_bev = NULL;
	}
	c->c_ownfd = 0;
	c->c_ready = 0;
	c->c_pending = 0;
	c->c_nreq = 0;
}

/*
 * Close a healthy TLS connection as clients do, with close_notify. Besides
 * politeness, OpenSSL marks the session of a connection freed without it
 * as not resumable, which would defeat --resume.
 */
static void
lc_shutdown(struct lg_conn *c)
{
	SSL *ssl;

	if (c->c_bev == NULL || !c->c_ready ||
	    (ssl = bufferevent_openssl_get_ssl(c->c_bev)) == NULL)
		return;
	(void)SSL_shutdown(ssl);
	ERR_clear_error();
}

static void
lc_finish(struct lg_conn *c)
{
	struct lg_thread *t = c->c_t;

	lc_shutdown(c);
	lc_drop(c);
	c->c_done = 1;
	if (--t->t_active == 0)
		event_base_loopbreak(t->t_base);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	lc_start(arg);
}

static void
lc_setup_bev(struct lg_conn *c)
{
	bufferevent_setcb(c->c_bev, lc_readcb, NULL, lc_eventcb, c);
	bufferevent_set_max_single_read(c->c_bev, IO_SINGLE);
	bufferevent_set_timeouts(c->c_bev, &rtimeout, NULL);
	bufferevent_enable(c->c_bev, EV_READ | EV_WRITE);
}

/*
 * Open a connection: plain, TLS straight to the host, or (https with -x)
 * a plain one to the proxy that carries a CONNECT first. Returns -1 when
 * the connect failed at once (already counted as an error).
 */
static int
lc_open(struct lg_conn *c)
{
	struct lg_thread *t = c->c_t;
	int one = 1;

	c->c_ready = 0;
	c->c_ownfd = 0;
	c->c_state = LC_HEAD;
	if (via_proxy) {
		/* The fd outlives this bufferevent when the tunnel is up. */
		c->c_bev = bufferevent_socket_new(t->t_base, -1, 0);
		c->c_ownfd = 1;
		c->c_state = LC_CONNECT;
	} else if (sslctx != NULL) {
		c->c_bev = bufferevent_openssl_socket_new(t->t_base, -1,
		    lc_ssl(c), BUFFEREVENT_SSL_CONNECTING,
		    BEV_OPT_CLOSE_ON_FREE);
	} else {
		c->c_bev = bufferevent_socket_new(t->t_base, -1,
		    BEV_OPT_CLOSE_ON_FREE);
		c->c_ready = 1;	/* libevent holds the request till then */
	}
	if (c->c_bev == NULL)
		die("bufferevent_socket_new failed");
	if (sslctx != NULL && !via_proxy)
		bufferevent_openssl_set_allow_dirty_shutdown(c->c_bev, 1);
	lc_setup_bev(c);
	t->t_connects++;
	if (bufferevent_socket_connect(c->c_bev, (struct sockaddr *)&dst,
	    (int)dstlen) == -1) {
		/* reported like any other socket error */
		lc_eventcb(c->c_bev, BEV_EVENT_ERROR, c);
		return -1;
	}
	setsockopt(bufferevent_getfd(c->c_bev), IPPROTO_TCP, TCP_NODELAY,
	    &one, sizeof(one));
	if (via_proxy)
		evbuffer_add_reference(bufferevent_get_output(c->c_bev),
		    connect_req, connect_reqlen, NULL, NULL);
	return 0;
}

/* Write the request now: the connection is ready for it. */
static void
lc_write(struct lg_conn *c)
{
	c->c_pending = 0;
	c->c_tsent = now_ns();
	/* The request is static: a reference, not a copy. */
	evbuffer_add_reference(bufferevent_get_output(c->c_bev), request,
	    requestlen, NULL, NULL);
}

/* Open a connection if there is none, then send the request. */
static void
lc_send(struct lg_conn *c)
{
	if (c->c_bev == NULL && lc_open(c) == -1)
		return;
	if (!c->c_ownfd)	/* else the tunnel is still being opened */
		c->c_state = LC_HEAD;
	c->c_body = 0;
	c->c_got = 0;
	c->c_status = 0;
	c->c_close = 0;
	c->c_match = 0;
	c->c_ttfe_done = 0;
	if (c->c_ready)
		lc_write(c);
	else
		c->c_pending = 1;
}

/* A failure worth one line on stderr per thread: the first. */
static void __attribute__((format(printf, 2, 3)))
lc_say(struct lg_thread *t, const char *fmt, ...)
{
	va_list ap;

	if (t->t_said)
		return;
	t->t_said = 1;
	fprintf(stderr, "loadgen: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * The proxy answered the CONNECT: on 200, start TLS on the same socket.
 * Returns 0 when done or waiting, -1 on a refusal or bad answer.
 */
static int
lc_tunnel(struct lg_conn *c, struct evbuffer *in)
{
	struct lg_thread *t = c->c_t;
	struct evbuffer_ptr ep;
	evutil_socket_t fd;
	const char *p;
	size_t hlen, l;

	ep = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (ep.pos == -1) {
		if (evbuffer_get_length(in) > HEAD_MAX)
			goto bad;
		return 0;
	}
	hlen = (size_t)ep.pos + 4;
	p = (const char *)evbuffer_pullup(in, hlen);
	if (hlen < 12 || strncmp(p, "HTTP/1.", 7) != 0 ||
	    strncmp(p + 8, " 200", 4) != 0)
		goto bad;
	/* Nothing may follow: the server speaks after our ClientHello. */
	if (evbuffer_get_length(in) != hlen)
		goto bad;
	fd = bufferevent_getfd(c->c_bev);
	bufferevent_free(c->c_bev);	/* no BEV_OPT_CLOSE_ON_FREE */
	c->c_ownfd = 0;
	c->c_bev = bufferevent_openssl_socket_new(t->t_base, fd, lc_ssl(c),
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (c->c_bev == NULL)
		die("bufferevent_openssl_socket_new failed");
	bufferevent_openssl_set_allow_dirty_shutdown(c->c_bev, 1);
	lc_setup_bev(c);
	c->c_state = LC_HEAD;
	return 0;
bad:
	t->t_connfail++;
	p = (const char *)evbuffer_pullup(in, -1);
	for (l = 0; l < evbuffer_get_length(in) && l < 120 && p[l] != '\r' &&
	    p[l] != '\n'; l++)
		;
	lc_say(t, "CONNECT refused: %.*s", (int)l, p);
	return -1;
}

/* Start the next request, unless this thread's share is used up. */
static void
lc_start(struct lg_conn *c)
{
	struct lg_thread *t = c->c_t;

	if (t->t_started >= t->t_quota) {
		lc_finish(c);
		return;
	}
	t->t_started++;
	/* With -K the new connection's handshake is part of the latency. */
	c->c_t0 = now_ns();
	lc_send(c);
}

static void
lc_record(struct lg_conn *c)
{
	struct lg_thread *t = c->c_t;
	uint64_t us = (now_ns() - c->c_t0) / 1000;
	uint32_t *nlat;
	size_t ncap;

	t->t_ok++;
	t->t_bytes += c->c_body;
	if (c->c_status < 200 || c->c_status > 299)
		t->t_non2xx++;
	if (t->t_nlat == t->t_caplat && t->t_caplat < t->t_maxlat) {
		ncap = t->t_caplat == 0 ? 65536 : t->t_caplat * 2;
		if (ncap > t->t_maxlat)
			ncap = t->t_maxlat;
		if ((nlat = realloc(t->t_lat, ncap * sizeof(*nlat))) == NULL)
			die("out of memory");
		t->t_lat = nlat;
		t->t_caplat = ncap;
	}
	if (t->t_nlat < t->t_caplat)
		t->t_lat[t->t_nlat++] = us > UINT32_MAX ? UINT32_MAX :
		    (uint32_t)us;
}

/* The response is complete: count it and go on. */
static void
lc_complete(struct lg_conn *c)
{
	lc_record(c);
	c->c_nreq++;
	if (!keepalive || c->c_close) {
		lc_shutdown(c);
		lc_drop(c);
	}
	lc_start(c);
}

/* A socket error or a broken response: count it, reconnect shortly. */
static void
lc_error(struct lg_conn *c)
{
	struct lg_thread *t = c->c_t;
	struct timeval tv = { 0, RETRY_MS * 1000 };

	t->t_sockerr++;
	lc_drop(c);
	if (event_base_once(t->t_base, -1, EV_TIMEOUT, retry_cb, c, &tv) == -1)
		die("event_base_once failed");
}

/* --sse: the first "data:" of this response arrived just now. */
static void
lc_ttfe(struct lg_conn *c)
{
	struct lg_thread *t = c->c_t;
	uint64_t us = (now_ns() - c->c_tsent) / 1000;
	uint32_t *n;
	size_t cap;

	c->c_ttfe_done = 1;
	if (t->t_nttfe == t->t_capttfe) {
		if (t->t_capttfe >= TTFE_MAX)
			return;
		cap = t->t_capttfe == 0 ? 1024 : t->t_capttfe * 2;
		if ((n = realloc(t->t_ttfe, cap * sizeof(*n))) == NULL)
			die("out of memory");
		t->t_ttfe = n;
		t->t_capttfe = cap;
	}
	t->t_ttfe[t->t_nttfe++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/*
 * --sse: look for "data:" in the next <n> body bytes, before they are
 * drained. A match may span reads: c_match carries the bytes matched.
 * ('d' occurs once in "data:", so a mismatch restarts at 0 or 1.)
 */
static void
lc_scan(struct lg_conn *c, struct evbuffer *in, size_t n)
{
	static const char pat[] = "data:";
	struct evbuffer_iovec v[8];
	const char *b;
	size_t i, k = 0, bl;
	int nv, j;

	if (!sse_mode || c->c_ttfe_done || n == 0)
		return;
	nv = evbuffer_peek(in, (ev_ssize_t)n, NULL, v, 8);
	if (nv > 8)
		nv = 8;	/* the rest is looked at on the next call */
	for (j = 0; j < nv && k < n; j++) {
		b = v[j].iov_base;
		bl = v[j].iov_len < n - k ? v[j].iov_len : n - k;
		for (i = 0; i < bl; i++) {
			if (b[i] == pat[c->c_match])
				c->c_match++;
			else
				c->c_match = b[i] == 'd';
			if (c->c_match == 5) {
				lc_ttfe(c);
				return;
			}
		}
		k += bl;
	}
}

static int
hdr_is(const char *p, size_t len, const char *name)
{
	size_t n = strlen(name);

	return len > n && p[n] == ':' && strncasecmp(p, name, n) == 0;
}

/* Does the value contain <tok> (case-insensitive)? */
static int
val_has(const char *v, size_t len, const char *tok)
{
	size_t n = strlen(tok), i;

	for (i = 0; i + n <= len; i++)
		if (strncasecmp(v + i, tok, n) == 0)
			return 1;
	return 0;
}

/*
 * Parse the response head at the front of <in>. Returns 1 when parsed
 * (state set for the body), 0 for more input, -1 when malformed.
 */
static int
lc_head(struct lg_conn *c, struct evbuffer *in)
{
	struct evbuffer_ptr ep;
	const char *p, *le, *end, *v;
	size_t hlen, vlen;
	int minor, have_cl = 0, chunked = 0, conn_close = 0, conn_ka = 0;
	uint64_t cl = 0;

	ep = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (ep.pos == -1)
		return evbuffer_get_length(in) > HEAD_MAX ? -1 : 0;
	hlen = (size_t)ep.pos + 4;
	p = (const char *)evbuffer_pullup(in, hlen);
	end = p + hlen;

	/* HTTP/1.x SP 3DIGIT */
	if (hlen < 14 || strncmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ')
		return -1;
	minor = p[7] - '0';
	if (p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' ||
	    p[11] < '0' || p[11] > '9')
		return -1;
	c->c_status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');

	le = memchr(p, '\n', hlen);
	for (p = le + 1; p < end - 2; p = le + 1) {
		le = memchr(p, '\n', end - p);
		vlen = le - p;
		if (vlen > 0 && p[vlen - 1] == '\r')
			vlen--;
		if (hdr_is(p, vlen, "Content-Length")) {
			v = p + 15;
			cl = strtoull(v, NULL, 10);
			have_cl = 1;
		} else if (hdr_is(p, vlen, "Transfer-Encoding")) {
			chunked = val_has(p, vlen, "chunked");
		} else if (hdr_is(p, vlen, "Connection")) {
			conn_close |= val_has(p + 11, vlen - 11, "close");
			conn_ka |= val_has(p + 11, vlen - 11, "keep-alive");
		}
	}
	evbuffer_drain(in, hlen);

	if (c->c_status >= 100 && c->c_status < 200) {
		/* 100 Continue and friends: the real head follows */
		c->c_status = 0;
		return 1;
	}
	c->c_close = conn_close || (minor == 0 && !conn_ka);
	if (c->c_status == 204 || c->c_status == 304) {
		c->c_left = 0;
		c->c_state = LC_BODY_LEN;
	} else if (chunked)
		c->c_state = LC_CHUNK_SIZE;
	else if (have_cl) {
		c->c_left = cl;
		c->c_state = LC_BODY_LEN;
	} else {
		c->c_state = LC_BODY_EOF;
		c->c_close = 1;
	}
	return 1;
}

/*
 * Consume what the input holds. Returns 1 when a response completed, 0
 * when more input is needed, -1 on a malformed response.
 */
static int
lc_parse(struct lg_conn *c, struct evbuffer *in)
{
	struct evbuffer_ptr ep;
	size_t len, eol, n;
	const char *p;
	char *e;
	int r;

	for (;;) {
		len = evbuffer_get_length(in);
		switch (c->c_state) {
		case LC_CONNECT:	/* handled by lc_readcb */
			return 0;
		case LC_HEAD:
			if ((r = lc_head(c, in)) != 1)
				return r;
			break;
		case LC_BODY_LEN:
			n = len < c->c_left ? len : (size_t)c->c_left;
			lc_scan(c, in, n);
			evbuffer_drain(in, n);
			c->c_body += n;
			c->c_left -= n;
			return c->c_left == 0 ? 1 : 0;
		case LC_BODY_EOF:
			lc_scan(c, in, len);
			evbuffer_drain(in, len);
			c->c_body += len;
			return 0;
		case LC_CHUNK_SIZE:
		case LC_TRAILER:
			ep = evbuffer_search_eol(in, NULL, &eol,
			    EVBUFFER_EOL_CRLF);
			if (ep.pos == -1)
				return len > HEAD_MAX ? -1 : 0;
			p = (const char *)evbuffer_pullup(in,
			    (size_t)ep.pos + eol);
			if (c->c_state == LC_TRAILER) {
				evbuffer_drain(in, (size_t)ep.pos + eol);
				if (ep.pos == 0)
					return 1;
				break;
			}
			errno = 0;
			c->c_left = strtoull(p, &e, 16);
			if (e == p || errno != 0)
				return -1;
			evbuffer_drain(in, (size_t)ep.pos + eol);
			c->c_state = c->c_left == 0 ? LC_TRAILER :
			    LC_CHUNK_DATA;
			break;
		case LC_CHUNK_DATA:
			if (len == 0)
				return 0;
			n = len < c->c_left ? len : (size_t)c->c_left;
			lc_scan(c, in, n);
			evbuffer_drain(in, n);
			c->c_body += n;
			c->c_left -= n;
			if (c->c_left > 0)
				return 0;
			c->c_state = LC_CHUNK_CRLF;
			break;
		case LC_CHUNK_CRLF:
			if (len < 2)
				return 0;
			p = (const char *)evbuffer_pullup(in, 2);
			if (p[0] != '\r' || p[1] != '\n')
				return -1;
			evbuffer_drain(in, 2);
			c->c_state = LC_CHUNK_SIZE;
			break;
		}
	}
}

static void
lc_readcb(struct bufferevent *bev, void *arg)
{
	struct lg_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (c->c_state == LC_CONNECT) {
		/* On success <bev> is gone: a TLS one took its socket. */
		if (lc_tunnel(c, in) == -1)
			lc_error(c);
		return;
	}
	c->c_got = 1;
	switch (lc_parse(c, in)) {
	case 1:
		/* Anything after a complete response is unexpected. */
		if (evbuffer_get_length(in) > 0)
			c->c_close = 1;
		lc_complete(c);
		break;
	case -1:
		lc_say(c->c_t, "malformed response");
		lc_error(c);
		break;
	}
}

static void
lc_eventcb(struct bufferevent *bev, short what, void *arg)
{
	struct lg_conn *c = arg;

	struct lg_thread *t = c->c_t;
	unsigned long e;
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	long vr;

	if (what & BEV_EVENT_CONNECTED) {
		/* TCP is up (plain), or the TLS handshake is done. */
		if (ssl != NULL && !c->c_ready) {
			t->t_handshakes++;
			if (SSL_session_reused(ssl))
				t->t_resumed++;
			c->c_ready = 1;
			if (c->c_pending)
				lc_write(c);
		}
		return;
	}
	if (ssl != NULL && !c->c_ready && (what & (BEV_EVENT_ERROR |
	    BEV_EVENT_EOF))) {
		/* The handshake failed: say why, once. */
		t->t_tlserr++;
		vr = SSL_get_verify_result(ssl);
		while ((e = bufferevent_get_openssl_error(bev)) != 0)
			if (ERR_GET_LIB(e) != 0)
				break;
		if (vr != X509_V_OK)
			lc_say(t, "TLS handshake: certificate: %s",
			    X509_verify_cert_error_string(vr));
		else
			lc_say(t, "TLS handshake failed: %s",
			    e != 0 ? ERR_reason_error_string(e) :
			    (what & BEV_EVENT_EOF) ? "closed by peer" :
			    evutil_socket_error_to_string(
			    EVUTIL_SOCKET_ERROR()));
		ERR_clear_error();
		lc_error(c);
		return;
	}
	if ((what & BEV_EVENT_EOF) && c->c_state == LC_BODY_EOF) {
		lc_drop(c);
		lc_complete(c);
		return;
	}
	/*
	 * A kept-alive socket the server closed before answering: resend
	 * on a new one, as a browser would, instead of calling it an error.
	 */
	if ((what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) && !c->c_got &&
	    c->c_nreq > 0) {
		c->c_t->t_reconnects++;
		lc_drop(c);
		lc_send(c);
		return;
	}
	lc_say(t, "connection %s %s",
	    (what & BEV_EVENT_TIMEOUT) ? "timed out" :
	    (what & BEV_EVENT_EOF) ? "closed by the server" :
	    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()),
	    c->c_state == LC_CONNECT ? "before the CONNECT answer" :
	    c->c_got ? "in the middle of a response" :
	    "before any byte of the response");
	lc_error(c);
}

static void
stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lg_thread *t = arg;

	event_base_loopbreak(t->t_base);
}

/* Bases are not locked, so threads poll for a stop from main. */
static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lg_thread *t = arg;

	if (__atomic_load_n(&stopping, __ATOMIC_RELAXED))
		event_base_loopbreak(t->t_base);
}

static void *
thread_main(void *arg)
{
	struct lg_thread *t = arg;
	struct event *stop = NULL, *tick;
	struct timeval tv, tick_tv = { 0, 50000 };
	int i;

	pthread_barrier_wait(&barrier);
	tick = event_new(t->t_base, -1, EV_PERSIST, tick_cb, t);
	if (tick == NULL)
		die("event_new failed");
	event_add(tick, &tick_tv);
	if (duration > 0) {
		tv.tv_sec = (time_t)duration;
		tv.tv_usec = (suseconds_t)((duration - (double)tv.tv_sec) *
		    1e6);
		if ((stop = evtimer_new(t->t_base, stop_cb, t)) == NULL)
			die("evtimer_new failed");
		evtimer_add(stop, &tv);
	}
	t->t_active = t->t_nconns;
	for (i = 0; i < t->t_nconns; i++)
		lc_start(&t->t_conns[i]);
	if (t->t_active > 0)
		event_base_dispatch(t->t_base);
	t->t_end = now_ns();

	/* Requests still in flight at the deadline are not counted. */
	for (i = 0; i < t->t_nconns; i++)
		lc_drop(&t->t_conns[i]);
	if (stop != NULL)
		event_free(stop);
	event_free(tick);
	__atomic_sub_fetch(&nrunning, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted <lat>, in milliseconds. */
static double
pct(const uint32_t *lat, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)ceil(p / 100.0 * (double)n);
	if (i > 0)
		i--;
	if (i >= n)
		i = n - 1;
	return lat[i] / 1000.0;
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "cafile", required_argument, NULL, 'C' },
		{ "insecure", no_argument, NULL, 'I' },
		{ "resume", no_argument, NULL, 'R' },
		{ "connect-to", required_argument, NULL, 'D' },
		{ "sse", no_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 }
	};
	const char *url = NULL, *proxy = NULL, *auth = NULL, *output = NULL;
	const char *connect_to = NULL;
	struct lg_thread *threads, *t;
	uint64_t nreq = 0, ok = 0, non2xx = 0, sockerr = 0, bytes = 0;
	uint64_t connects = 0, reconnects = 0, t_last = 0;
	uint64_t handshakes = 0, resumed = 0, tlserr = 0, connfail = 0;
	uint32_t *lat, *ttfe;
	size_t nlat = 0, nttfe = 0;
	double secs, rps, mbps;
	int ch, nconns = 1, nthreads = 1, i, j;
	struct timespec poll_ts = { 0, 100000000 };
	sigset_t sigs;
	char *e;

	while ((ch = getopt_long(argc, argv, "A:c:d:hkKn:o:t:T:u:x:", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'C':
			tls_cafile = optarg;
			break;
		case 'D':
			connect_to = optarg;
			break;
		case 'I':
			tls_verify = 0;
			break;
		case 'R':
			tls_resume = 1;
			break;
		case 'S':
			sse_mode = 1;
			break;
		case 'A':
			auth = optarg;
			break;
		case 'c':
			nconns = (int)strtol(optarg, &e, 10);
			if (*e != '\0' || nconns < 1 || nconns > 100000)
				die("bad -c: %s", optarg);
			break;
		case 'd':
			duration = strtod(optarg, &e);
			if (*e != '\0' || duration <= 0)
				die("bad -d: %s", optarg);
			break;
		case 'k':
			keepalive = 1;
			break;
		case 'K':
			keepalive = 0;
			break;
		case 'n':
			nreq = strtoull(optarg, &e, 10);
			if (*e != '\0' || nreq == 0)
				die("bad -n: %s", optarg);
			break;
		case 'o':
			if (strcmp(optarg, "json") != 0)
				usage();
			output = optarg;
			break;
		case 't':
			nthreads = (int)strtol(optarg, &e, 10);
			if (*e != '\0' || nthreads < 1 || nthreads > 256)
				die("bad -t: %s", optarg);
			break;
		case 'T':
			rtimeout.tv_sec = strtol(optarg, &e, 10);
			if (*e != '\0' || rtimeout.tv_sec < 1)
				die("bad -T: %s", optarg);
			break;
		case 'u':
			url = optarg;
			break;
		case 'x':
			proxy = optarg;
			break;
		default:
			usage();
		}
	}
	if (url == NULL || optind != argc || (duration > 0 && nreq > 0))
		usage();
	if (duration == 0 && nreq == 0)
		duration = 10;
	if (nthreads > nconns)
		nthreads = nconns;
	build_request(url, proxy, auth, connect_to);
	signal(SIGPIPE, SIG_IGN);

	if ((threads = calloc(nthreads, sizeof(*threads))) == NULL)
		die("out of memory");
	for (i = 0; i < nthreads; i++) {
		t = &threads[i];
		if ((t->t_base = event_base_new()) == NULL)
			die("event_base_new failed");
		/* Connections and the -n share spread evenly. */
		t->t_nconns = nconns / nthreads + (i < nconns % nthreads);
		if ((t->t_conns = calloc(t->t_nconns, sizeof(*t->t_conns))) ==
		    NULL)
			die("out of memory");
		for (j = 0; j < t->t_nconns; j++)
			t->t_conns[j].c_t = t;
		t->t_quota = nreq == 0 ? UINT64_MAX :
		    nreq / nthreads + (i < (int)(nreq % nthreads));
		t->t_maxlat = LAT_MAX / nthreads;
	}
	if (pthread_barrier_init(&barrier, NULL, nthreads + 1) != 0)
		die("pthread_barrier_init failed");
	/*
	 * SIGINT/SIGTERM end the run early but still report: the workers
	 * inherit the blocked mask and main collects the signal.
	 */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	nrunning = nthreads;
	for (i = 0; i < nthreads; i++)
		if (pthread_create(&threads[i].t_tid, NULL, thread_main,
		    &threads[i]) != 0)
			die("pthread_create failed");
	t_start = now_ns();
	pthread_barrier_wait(&barrier);
	while (__atomic_load_n(&nrunning, __ATOMIC_ACQUIRE) > 0)
		if (sigtimedwait(&sigs, NULL, &poll_ts) > 0)
			__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nthreads; i++) {
		t = &threads[i];
		pthread_join(t->t_tid, NULL);
		ok += t->t_ok;
		non2xx += t->t_non2xx;
		sockerr += t->t_sockerr;
		bytes += t->t_bytes;
		connects += t->t_connects;
		reconnects += t->t_reconnects;
		handshakes += t->t_handshakes;
		resumed += t->t_resumed;
		tlserr += t->t_tlserr;
		connfail += t->t_connfail;
		nlat += t->t_nlat;
		nttfe += t->t_nttfe;
		if (t->t_end > t_last)
			t_last = t->t_end;
	}

	if ((lat = malloc((nlat + 1) * sizeof(*lat))) == NULL ||
	    (ttfe = malloc((nttfe + 1) * sizeof(*ttfe))) == NULL)
		die("out of memory");
	for (i = 0, nlat = 0, nttfe = 0; i < nthreads; i++) {
		t = &threads[i];
		if (t->t_nlat > 0)
			memcpy(lat + nlat, t->t_lat, t->t_nlat * sizeof(*lat));
		nlat += t->t_nlat;
		if (t->t_nttfe > 0)
			memcpy(ttfe + nttfe, t->t_ttfe,
			    t->t_nttfe * sizeof(*ttfe));
		nttfe += t->t_nttfe;
		free(t->t_lat);
		free(t->t_ttfe);
		for (j = 0; j < t->t_nconns; j++)
			if (t->t_conns[j].c_sess != NULL)
				SSL_SESSION_free(t->t_conns[j].c_sess);
		free(t->t_conns);
		event_base_free(t->t_base);
	}
	qsort(lat, nlat, sizeof(*lat), cmp_u32);
	qsort(ttfe, nttfe, sizeof(*ttfe), cmp_u32);

	secs = (double)(t_last - t_start) / 1e9;
	if (secs <= 0)
		secs = 1e-9;
	rps = (double)ok / secs;
	mbps = (double)bytes / 1e6 / secs;
	fprintf(output != NULL ? stderr : stdout,
	    "%" PRIu64 " requests in %.2f s, %.1f req/s, "
	    "%" PRIu64 " errors (%" PRIu64 " non-2xx, %" PRIu64 " socket), "
	    "%.1f MB body, %.2f MB/s, latency ms p50 %.3f p90 %.3f "
	    "p99 %.3f max %.3f, %" PRIu64 " connects\n",
	    ok, secs, rps, non2xx + sockerr, non2xx, sockerr,
	    (double)bytes / 1e6, mbps, pct(lat, nlat, 50), pct(lat, nlat, 90),
	    pct(lat, nlat, 99), nlat > 0 ? lat[nlat - 1] / 1000.0 : 0.0,
	    connects);
	if (sslctx != NULL)
		fprintf(output != NULL ? stderr : stdout,
		    "TLS: %" PRIu64 " handshakes (%" PRIu64 " resumed), "
		    "%" PRIu64 " failed; %" PRIu64 " CONNECTs refused\n",
		    handshakes, resumed, tlserr, connfail);
	if (sse_mode)
		fprintf(output != NULL ? stderr : stdout,
		    "first event ms: min %.3f p50 %.3f p90 %.3f max %.3f "
		    "(%zu responses)\n", nttfe > 0 ? ttfe[0] / 1000.0 : 0.0,
		    pct(ttfe, nttfe, 50), pct(ttfe, nttfe, 90),
		    nttfe > 0 ? ttfe[nttfe - 1] / 1000.0 : 0.0, nttfe);
	if (output != NULL)
		printf("{\"url\":\"%s\",\"proxy\":\"%s\",\"conns\":%d,"
		    "\"threads\":%d,\"keepalive\":%s,\"seconds\":%.3f,"
		    "\"requests\":%" PRIu64 ",\"rps\":%.1f,"
		    "\"errors\":%" PRIu64 ",\"non2xx\":%" PRIu64 ","
		    "\"sock_errors\":%" PRIu64 ",\"bytes\":%" PRIu64 ","
		    "\"mbps\":%.2f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,"
		    "\"p99_ms\":%.3f,\"max_ms\":%.3f,"
		    "\"connects\":%" PRIu64 ",\"reconnects\":%" PRIu64 ","
		    "\"tls\":%s,\"handshakes\":%" PRIu64 ","
		    "\"resumed\":%" PRIu64 ",\"tls_errors\":%" PRIu64 ","
		    "\"connect_refused\":%" PRIu64 ",\"ttfe_n\":%zu,"
		    "\"ttfe_min_ms\":%.3f,\"ttfe_p50_ms\":%.3f,"
		    "\"ttfe_p90_ms\":%.3f,\"ttfe_max_ms\":%.3f}\n",
		    url, proxy != NULL ? proxy : "", nconns, nthreads,
		    keepalive ? "true" : "false", secs, ok, rps,
		    non2xx + sockerr, non2xx, sockerr, bytes, mbps,
		    pct(lat, nlat, 50), pct(lat, nlat, 90), pct(lat, nlat, 99),
		    nlat > 0 ? lat[nlat - 1] / 1000.0 : 0.0,
		    connects, reconnects, sslctx != NULL ? "true" : "false",
		    handshakes, resumed, tlserr, connfail, nttfe,
		    nttfe > 0 ? ttfe[0] / 1000.0 : 0.0, pct(ttfe, nttfe, 50),
		    pct(ttfe, nttfe, 90),
		    nttfe > 0 ? ttfe[nttfe - 1] / 1000.0 : 0.0);
	free(lat);
	free(ttfe);
	free(connect_req);
	if (sslctx != NULL)
		SSL_CTX_free(sslctx);
	free(threads);
	free(request);
	return sockerr > 0 && ok == 0 ? 1 : 0;
}
