/*
 * origin: the mock HTTP/1.1 upstream behind airlock in integration tests
 * and benchmarks.
 *
 * One thread, one event_base, one bufferevent per connection. Bodies
 * stream both ways: request bodies are counted (and hashed for /upload)
 * as they arrive and then dropped; response bodies are handed to libevent
 * as 64 KiB references into a static pattern whenever the socket drains
 * below a watermark, so a 1 GiB transfer costs no more memory than a 1 KiB
 * one.
 *
 * The parser is deliberately strict (CRLF only, no obs-fold, no CL+TE, no
 * unknown transfer codings, exactly one Host): anything a lenient backend
 * might read two ways is refused with 400 and logged, so a test can see
 * what the proxy let through.
 *
 * Routes (any method; HEAD gets the head only; the request body is always
 * read to its end first, after "100 Continue" when asked for):
 *   /size/N        200, Content-Length N, 'a'..'z' repeating
 *   /chunked/N     the same body, chunked (chunks of at most 16 KiB)
 *   /close/N       the same body, no length, Connection: close
 *   /echo          body = the raw request head; X-Body-Bytes: body size
 *   /upload        {"bytes":N,"sum":S}, S = 64-bit FNV-1a of the body
 *   /status/CODE   that status (200..599), {"status":CODE}
 *   /json/N        a JSON object of exactly N bytes
 *   /delay/MS      "ok" after MS milliseconds
 *   /stall         Content-Length 100, 10 bytes, then silence
 *   /reset         Content-Length 1000000, 10 bytes, then RST
 *   /stats         {"connections":C,"requests":R} since start
 *   /ws            with Upgrade: websocket: 101, then echoes every byte
 *   /sse?n=N&ms=M  N events "data: {"i":K}" M ms apart, chunked
 *   anything else  404; a malformed request: 400 and close
 * Every response names X-Origin-Conn (connection number since start) and
 * X-Origin-Request (request number on that connection).
 *
 * With -C CERTFILE -K KEYFILE the port speaks HTTPS instead: TLS 1.2 or
 * 1.3 on every accepted connection (bufferevent_openssl), ALPN http/1.1
 * selected when offered (a client offering only other protocols gets no
 * ALPN answer), the same routes and the same strictness inside. A closing
 * connection sends close_notify first, except for /reset, which still
 * ends in a bare RST. Failed handshakes are reported on stderr.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/bufferevent_ssl.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define HEAD_MAX	(64 * 1024)	/* request head, and trailer section */
#define LINE_MAX_CHUNK	4096		/* chunk-size line with extensions */
#define GEN_PIECE	(64 * 1024)	/* one reference handed to libevent */
#define GEN_LOWAT	(64 * 1024)	/* refill when output drains to this */
#define GEN_HIWAT	(256 * 1024)	/* ... and fill up to this */
#define CHUNK_MAX	(16 * 1024)	/* /chunked and /sse chunk size bound */
#define ECHO_MAX	(1024 * 1024)	/* /ws: backlog that pauses reading */
#define IO_SINGLE	(256 * 1024)	/* per-syscall read/write size */

#define FNV_OFFSET	14695981039346656037ULL
#define FNV_PRIME	1099511628211ULL

enum oc_state {
	OS_HEAD = 0,		/* waiting for a complete request head */
	OS_BODY,		/* consuming the request body */
	OS_RESPOND,		/* response in progress; further input waits */
	OS_ECHO,		/* after 101: echo every byte back */
	OS_STALL,		/* /stall: silent until the peer leaves */
	OS_CLOSING,		/* flush the output, then close (or reset) */
};

enum body_kind {
	BK_NONE = 0,
	BK_LENGTH,
	BK_CHUNKED,
};

enum chunk_state {
	CS_SIZE = 0,		/* chunk-size [; ext] CRLF */
	CS_DATA,
	CS_DATA_CRLF,
	CS_TRAILER,		/* trailer fields up to the empty line */
};

enum route {
	R_NOTFOUND = 0,
	R_SIZE,
	R_CHUNKED,
	R_CLOSE,
	R_ECHO,
	R_UPLOAD,
	R_STATUS,
	R_JSON,
	R_DELAY,
	R_STALL,
	R_RESET,
	R_STATS,
	R_WS,
	R_SSE,
};

struct oconn {
	struct bufferevent	*oc_bev;
	struct event		*oc_timer;	/* /delay and /sse */
	uint64_t		 oc_id;
	uint64_t		 oc_nreq;	/* requests on this socket */
	enum oc_state		 oc_state;
	int			 oc_peer_eof;
	int			 oc_rst;	/* close with RST (/reset) */

	/* The request being read. */
	char			*oc_head;	/* raw bytes, NUL-terminated */
	size_t			 oc_headlen;
	struct evbuffer		*oc_trailer;	/* raw trailer lines */
	int			 oc_minor;	/* HTTP/1.<minor> */
	int			 oc_keepalive;
	int			 oc_is_head;	/* HEAD: no response body */
	int			 oc_expect;	/* Expect: 100-continue */
	int			 oc_upgrade_ws;
	char			 oc_wskey[64];
	enum route		 oc_route;
	uint64_t		 oc_arg;	/* N, CODE or MS of the route */
	uint64_t		 oc_sse_n;
	uint64_t		 oc_sse_ms;
	enum body_kind		 oc_bk;
	enum chunk_state	 oc_cs;
	uint64_t		 oc_left;	/* body or chunk bytes left */
	uint64_t		 oc_bodylen;
	uint64_t		 oc_sum;	/* FNV-1a of the body */

	/* The response body generator. */
	int			 oc_gen;	/* active */
	const char		*oc_gsrc;	/* pattern or xs */
	uint64_t		 oc_gleft;
	uint64_t		 oc_gpos;
	int			 oc_gchunked;
	const char		*oc_gsuffix;	/* written after the body */
	uint64_t		 oc_sse_i;
};

static struct event_base *base;
static SSL_CTX *sslctx;		/* -C/-K: HTTPS */
static int logfd = -1;
static uint64_t nconns;		/* accepted since start */
static uint64_t nrequests;	/* request heads seen since start */

/* GEN_PIECE bytes from any offset 0..25 stay inside these arrays. */
static char pattern[GEN_PIECE + 26];
static char xs[GEN_PIECE];

static void	oc_process(struct oconn *);
static void	oc_writecb(struct bufferevent *, void *);

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr,
	    "usage: origin -p PORT [-a ADDR] [-l LOGFILE] [-P PORTFILE]\n"
	    "              [-C CERTFILE -K KEYFILE]\n"
	    "routes: /size/N /chunked/N /close/N /echo /upload /status/CODE\n"
	    "        /json/N /delay/MS /stall /reset /stats /ws\n"
	    "        /sse?n=N&ms=M\n");
	exit(2);
}

static void __attribute__((format(printf, 1, 2), noreturn))
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "origin: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int
is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z'))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Case-insensitive match of <len> bytes at <p> against the string <s>. */
static int
span_eq(const char *p, size_t len, const char *s)
{
	return strlen(s) == len && strncasecmp(p, s, len) == 0;
}

/*
 * Does the comma-separated list at <p> contain <tok>? Used for Connection
 * and Upgrade, where a token may share the field with others.
 */
static int
list_has(const char *p, size_t len, const char *tok)
{
	const char *end = p + len, *s, *e;

	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
			p++;
		s = p;
		while (p < end && *p != ',')
			p++;
		e = p;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (span_eq(s, e - s, tok))
			return 1;
	}
	return 0;
}

/* Decimal digits only, no sign, no overflow. */
static int
parse_u64(const char *p, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0 || len > 19)
		return -1;
	for (i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*out = v;
	return 0;
}

/*
 * SHA-1 and base64, only for Sec-WebSocket-Accept, so that real WebSocket
 * clients accept the handshake.
 */
struct sha1 {
	uint32_t	h[5];
	uint64_t	len;
	unsigned char	buf[64];
	size_t		nbuf;
};

#define ROL(x, n)	(((x) << (n)) | ((x) >> (32 - (n))))

static void
sha1_block(struct sha1 *s, const unsigned char *p)
{
	uint32_t w[80], a, b, c, d, e, f, k, t;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		    (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (i = 16; i < 80; i++)
		w[i] = ROL(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];
	for (i = 0; i < 80; i++) {
		if (i < 20)
			f = (b & c) | (~b & d), k = 0x5a827999;
		else if (i < 40)
			f = b ^ c ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
		else
			f = b ^ c ^ d, k = 0xca62c1d6;
		t = ROL(a, 5) + f + e + k + w[i];
		e = d, d = c, c = ROL(b, 30), b = a, a = t;
	}
	s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e;
}

static void
sha1_update(struct sha1 *s, const void *data, size_t len)
{
	const unsigned char *p = data;

	s->len += len;
	while (len > 0) {
		size_t n = 64 - s->nbuf < len ? 64 - s->nbuf : len;

		memcpy(s->buf + s->nbuf, p, n);
		s->nbuf += n, p += n, len -= n;
		if (s->nbuf == 64) {
			sha1_block(s, s->buf);
			s->nbuf = 0;
		}
	}
}

static void
sha1_digest(const void *data, size_t len, unsigned char out[20])
{
	struct sha1 s = { { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476,
	    0xc3d2e1f0 }, 0, { 0 }, 0 };
	unsigned char pad[72];
	uint64_t bits;
	size_t npad;
	int i;

	sha1_update(&s, data, len);
	bits = s.len * 8;
	npad = (s.nbuf < 56 ? 56 : 120) - s.nbuf;
	memset(pad, 0, sizeof(pad));
	pad[0] = 0x80;
	for (i = 0; i < 8; i++)
		pad[npad + i] = (unsigned char)(bits >> (56 - 8 * i));
	sha1_update(&s, pad, npad + 8);
	for (i = 0; i < 20; i++)
		out[i] = (unsigned char)(s.h[i / 4] >> (24 - 8 * (i % 4)));
}

static void
base64(const unsigned char *in, size_t len, char *out)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;
	uint32_t v;

	for (i = 0; i + 2 < len; i += 3) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 |
		    in[i + 2];
		*out++ = tab[v >> 18], *out++ = tab[(v >> 12) & 63];
		*out++ = tab[(v >> 6) & 63], *out++ = tab[v & 63];
	}
	if (len - i == 1) {
		v = (uint32_t)in[i] << 16;
		*out++ = tab[v >> 18], *out++ = tab[(v >> 12) & 63];
		*out++ = '=', *out++ = '=';
	} else if (len - i == 2) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		*out++ = tab[v >> 18], *out++ = tab[(v >> 12) & 63];
		*out++ = tab[(v >> 6) & 63], *out++ = '=';
	}
	*out = '\0';
}

/*
 * Append one record to the log: the head exactly as received, the trailer
 * section if any, a note when the request was refused or cut short, the
 * body size (decoded, for chunked), and the separator. The record is
 * built in memory and written in one go, so a test that greps the file
 * does not see half of one.
 */
static void
log_request(struct oconn *oc, const char *note)
{
	struct evbuffer *lb;

	if (logfd == -1)
		return;
	if ((lb = evbuffer_new()) == NULL)
		return;
	if (oc->oc_head != NULL) {
		evbuffer_add(lb, oc->oc_head, oc->oc_headlen);
		/* A cut-off head gets a newline so "---" starts a line. */
		if (oc->oc_headlen > 0 &&
		    oc->oc_head[oc->oc_headlen - 1] != '\n')
			evbuffer_add(lb, "\n", 1);
	}
	if (oc->oc_trailer != NULL && evbuffer_get_length(oc->oc_trailer)) {
		evbuffer_add_printf(lb, "--- trailers\n");
		evbuffer_add_buffer(lb, oc->oc_trailer);
	}
	if (note != NULL)
		evbuffer_add_printf(lb, "--- error: %s\n", note);
	evbuffer_add_printf(lb, "--- body %" PRIu64 " bytes\n===\n",
	    oc->oc_bodylen);
	while (evbuffer_get_length(lb) > 0)
		if (evbuffer_write(lb, logfd) == -1 && errno != EINTR) {
			fprintf(stderr, "origin: log: %s\n", strerror(errno));
			break;
		}
	evbuffer_free(lb);
}

static void
oc_reset_request(struct oconn *oc)
{
	free(oc->oc_head);
	oc->oc_head = NULL;
	oc->oc_headlen = 0;
	if (oc->oc_trailer != NULL)
		evbuffer_drain(oc->oc_trailer,
		    evbuffer_get_length(oc->oc_trailer));
	oc->oc_minor = 1;
	oc->oc_keepalive = 0;
	oc->oc_is_head = 0;
	oc->oc_expect = 0;
	oc->oc_upgrade_ws = 0;
	oc->oc_wskey[0] = '\0';
	oc->oc_route = R_NOTFOUND;
	oc->oc_arg = 0;
	oc->oc_bk = BK_NONE;
	oc->oc_cs = CS_SIZE;
	oc->oc_left = 0;
	oc->oc_bodylen = 0;
	oc->oc_sum = FNV_OFFSET;
	oc->oc_gen = 0;
}

static void
oc_free(struct oconn *oc)
{
	SSL *ssl;

	if (oc->oc_rst) {
		/* SO_LINGER 0: close(2) sends RST instead of FIN. */
		struct linger lg = { 1, 0 };

		setsockopt(bufferevent_getfd(oc->oc_bev), SOL_SOCKET,
		    SO_LINGER, &lg, sizeof(lg));
	} else if ((ssl = bufferevent_openssl_get_ssl(oc->oc_bev)) != NULL &&
	    SSL_is_init_finished(ssl) &&
	    !(SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN)) {
		/*
		 * close_notify, so that a close-delimited body ends cleanly
		 * for strict clients. The output is empty by now, so the
		 * alert goes straight to the socket; if it does not fit,
		 * the peer sees a plain EOF, as without TLS.
		 */
		(void)SSL_shutdown(ssl);
		ERR_clear_error();
	}
	if (oc->oc_timer != NULL)
		event_free(oc->oc_timer);
	bufferevent_free(oc->oc_bev);
	free(oc->oc_head);
	if (oc->oc_trailer != NULL)
		evbuffer_free(oc->oc_trailer);
	free(oc);
}

/*
 * Close once the output has drained. The write callback does the close;
 * it is triggered (deferred) here in case the output is already empty, so
 * no caller ever sees the connection freed under it.
 */
static void
oc_set_closing(struct oconn *oc)
{
	oc->oc_state = OS_CLOSING;
	oc->oc_gen = 0;
	bufferevent_disable(oc->oc_bev, EV_READ);
	bufferevent_setwatermark(oc->oc_bev, EV_WRITE, 0, 0);
	bufferevent_trigger(oc->oc_bev, EV_WRITE,
	    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/*
 * The response is fully queued: either close, or go back to reading the
 * next request. Returns 1 when the caller should look at buffered input.
 */
static int
oc_response_done(struct oconn *oc)
{
	oc->oc_gen = 0;
	if (!oc->oc_keepalive || oc->oc_peer_eof) {
		oc_set_closing(oc);
		return 0;
	}
	oc_reset_request(oc);
	oc->oc_state = OS_HEAD;
	bufferevent_setwatermark(oc->oc_bev, EV_WRITE, 0, 0);
	bufferevent_enable(oc->oc_bev, EV_READ);
	return 1;
}

/* Response head; <clen> < 0 means no Content-Length. */
static void
resp_head(struct oconn *oc, int code, const char *reason, const char *ctype,
    int64_t clen, int chunked, const char *extra)
{
	struct evbuffer *out = bufferevent_get_output(oc->oc_bev);

	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n"
	    "Server: airlock-origin\r\n"
	    "X-Origin-Conn: %" PRIu64 "\r\n"
	    "X-Origin-Request: %" PRIu64 "\r\n",
	    code, reason, oc->oc_id, oc->oc_nreq);
	if (ctype != NULL)
		evbuffer_add_printf(out, "Content-Type: %s\r\n", ctype);
	if (clen >= 0)
		evbuffer_add_printf(out, "Content-Length: %" PRId64 "\r\n",
		    clen);
	if (chunked)
		evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n");
	if (!oc->oc_keepalive)
		evbuffer_add_printf(out, "Connection: close\r\n");
	if (extra != NULL)
		evbuffer_add(out, extra, strlen(extra));
	evbuffer_add(out, "\r\n", 2);
}

static const char *
reason_phrase(int code)
{
	switch (code) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Status";
	}
}

/* A complete response with a small body held in memory. */
static void
resp_simple(struct oconn *oc, int code, const char *ctype, const char *body,
    size_t len, const char *extra)
{
	struct evbuffer *out = bufferevent_get_output(oc->oc_bev);
	int nobody = code == 204 || code == 304;

	resp_head(oc, code, reason_phrase(code), nobody ? NULL : ctype,
	    code == 204 ? -1 : (int64_t)len, 0, extra);
	if (!oc->oc_is_head && !nobody)
		evbuffer_add(out, body, len);
}

/*
 * Refuse the request: log what arrived, answer 400 and close. Whatever
 * else is buffered is dropped, since its framing cannot be trusted.
 */
static void
oc_reject(struct oconn *oc, const char *why)
{
	char body[256];
	int n;

	log_request(oc, why);
	evbuffer_drain(bufferevent_get_input(oc->oc_bev),
	    evbuffer_get_length(bufferevent_get_input(oc->oc_bev)));
	oc->oc_keepalive = 0;
	oc->oc_is_head = 0;
	n = snprintf(body, sizeof(body),
	    "{\"error\":\"bad_request\",\"reason\":\"%s\"}\n", why);
	resp_simple(oc, 400, "application/json", body, (size_t)n, NULL);
	oc_set_closing(oc);
}

/*
 * Queue response body bytes until the output holds GEN_HIWAT. Returns 1
 * when the connection is ready for the next request.
 */
static int
gen_fill(struct oconn *oc)
{
	struct evbuffer *out = bufferevent_get_output(oc->oc_bev);
	uint64_t n;
	size_t off;

	while (oc->oc_gleft > 0 && evbuffer_get_length(out) < GEN_HIWAT) {
		n = oc->oc_gleft < GEN_PIECE ? oc->oc_gleft : GEN_PIECE;
		if (oc->oc_gchunked && n > CHUNK_MAX)
			n = CHUNK_MAX;
		off = oc->oc_gsrc == pattern ? oc->oc_gpos % 26 : 0;
		if (oc->oc_gchunked)
			evbuffer_add_printf(out, "%" PRIx64 "\r\n", n);
		/* Static bytes: a reference, not a copy. */
		evbuffer_add_reference(out, oc->oc_gsrc + off, n, NULL, NULL);
		if (oc->oc_gchunked)
			evbuffer_add(out, "\r\n", 2);
		oc->oc_gleft -= n;
		oc->oc_gpos += n;
	}
	if (oc->oc_gleft > 0)
		return 0;
	if (oc->oc_gchunked)
		evbuffer_add(out, "0\r\n\r\n", 5);
	if (oc->oc_gsuffix != NULL)
		evbuffer_add(out, oc->oc_gsuffix, strlen(oc->oc_gsuffix));
	return oc_response_done(oc);
}

static void
gen_start(struct oconn *oc, const char *src, uint64_t len, int chunked,
    const char *suffix)
{
	oc->oc_state = OS_RESPOND;
	if (oc->oc_is_head) {
		oc_response_done(oc);
		return;
	}
	oc->oc_gen = 1;
	oc->oc_gsrc = src;
	oc->oc_gleft = len;
	oc->oc_gpos = 0;
	oc->oc_gchunked = chunked;
	oc->oc_gsuffix = suffix;
	bufferevent_setwatermark(oc->oc_bev, EV_WRITE, GEN_LOWAT, 0);
	(void)gen_fill(oc);	/* the caller looks at oc_state */
}

static void
sse_cb(evutil_socket_t fd, short what, void *arg)
{
	struct oconn *oc = arg;
	struct evbuffer *out = bufferevent_get_output(oc->oc_bev);
	struct timeval tv;
	char ev[64];
	int n;

	n = snprintf(ev, sizeof(ev), "data: {\"i\":%" PRIu64 "}\n\n",
	    oc->oc_sse_i);
	evbuffer_add_printf(out, "%x\r\n%s\r\n", n, ev);
	if (++oc->oc_sse_i < oc->oc_sse_n) {
		tv.tv_sec = (time_t)(oc->oc_sse_ms / 1000);
		tv.tv_usec = (suseconds_t)(oc->oc_sse_ms % 1000) * 1000;
		evtimer_add(oc->oc_timer, &tv);
		return;
	}
	evbuffer_add(out, "0\r\n\r\n", 5);
	if (oc_response_done(oc))
		oc_process(oc);
}

static void
delay_cb(evutil_socket_t fd, short what, void *arg)
{
	struct oconn *oc = arg;

	resp_simple(oc, 200, "text/plain", "ok", 2, NULL);
	if (oc_response_done(oc))
		oc_process(oc);
}

static void
oc_arm_timer(struct oconn *oc, event_callback_fn cb, uint64_t ms)
{
	struct timeval tv;

	if (oc->oc_timer == NULL)
		oc->oc_timer = evtimer_new(base, cb, oc);
	else
		event_assign(oc->oc_timer, base, -1, 0, cb, oc);
	if (oc->oc_timer == NULL)
		die("evtimer_new failed");
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(oc->oc_timer, &tv);
}

/* 101 and raw echo from here on; the request itself carried no body. */
static void
start_ws(struct oconn *oc)
{
	char extra[160], acc[32];
	unsigned char dig[20];
	char *kc;

	extra[0] = '\0';
	if (oc->oc_wskey[0] != '\0') {
		static const char guid[] =
		    "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

		if (asprintf(&kc, "%s%s", oc->oc_wskey, guid) == -1)
			die("out of memory");
		sha1_digest(kc, strlen(kc), dig);
		free(kc);
		base64(dig, sizeof(dig), acc);
		snprintf(extra, sizeof(extra),
		    "Sec-WebSocket-Accept: %s\r\n", acc);
	}
	evbuffer_add_printf(bufferevent_get_output(oc->oc_bev),
	    "HTTP/1.1 101 Switching Protocols\r\n"
	    "Server: airlock-origin\r\n"
	    "Upgrade: websocket\r\n"
	    "Connection: Upgrade\r\n"
	    "%s\r\n", extra);
	oc->oc_state = OS_ECHO;
	bufferevent_enable(oc->oc_bev, EV_READ);
}

/*
 * The request is complete (head and body): produce the response. On
 * return the state says whether it is done (OS_HEAD), in progress or
 * closing.
 */
static void
start_response(struct oconn *oc)
{
	char body[256], extra[64];
	int n, code;

	oc->oc_state = OS_RESPOND;
	/* Further requests wait in the kernel until this one is answered. */
	bufferevent_disable(oc->oc_bev, EV_READ);

	switch (oc->oc_route) {
	case R_SIZE:
		resp_head(oc, 200, "OK", "application/octet-stream",
		    (int64_t)oc->oc_arg, 0, NULL);
		gen_start(oc, pattern, oc->oc_arg, 0, NULL);
		return;
	case R_CHUNKED:
		resp_head(oc, 200, "OK", "application/octet-stream", -1, 1,
		    NULL);
		gen_start(oc, pattern, oc->oc_arg, 1, NULL);
		return;
	case R_CLOSE:
		resp_head(oc, 200, "OK", "application/octet-stream", -1, 0,
		    NULL);
		gen_start(oc, pattern, oc->oc_arg, 0, NULL);
		return;
	case R_JSON:
		/* {"data":"xx..."} is 11 bytes plus the x's. */
		if (oc->oc_arg < 11) {
			static const char pad[] = "{}         ";

			if (oc->oc_arg == 0)
				resp_simple(oc, 200, "application/json", "",
				    0, NULL);
			else if (oc->oc_arg == 1)
				resp_simple(oc, 200, "application/json", "0",
				    1, NULL);
			else
				resp_simple(oc, 200, "application/json", pad,
				    (size_t)oc->oc_arg, NULL);
			break;
		}
		resp_head(oc, 200, "OK", "application/json",
		    (int64_t)oc->oc_arg, 0, NULL);
		if (!oc->oc_is_head)
			evbuffer_add(bufferevent_get_output(oc->oc_bev),
			    "{\"data\":\"", 9);
		gen_start(oc, xs, oc->oc_arg - 11, 0, "\"}");
		return;
	case R_ECHO:
		snprintf(extra, sizeof(extra), "X-Body-Bytes: %" PRIu64 "\r\n",
		    oc->oc_bodylen);
		resp_simple(oc, 200, "text/plain", oc->oc_head, oc->oc_headlen,
		    extra);
		break;
	case R_UPLOAD:
		n = snprintf(body, sizeof(body),
		    "{\"bytes\":%" PRIu64 ",\"sum\":%" PRIu64 "}\n",
		    oc->oc_bodylen, oc->oc_sum);
		resp_simple(oc, 200, "application/json", body, (size_t)n,
		    NULL);
		break;
	case R_STATUS:
		code = (int)oc->oc_arg;
		n = snprintf(body, sizeof(body), "{\"status\":%d}\n", code);
		resp_simple(oc, code, "application/json", body, (size_t)n,
		    NULL);
		break;
	case R_STATS:
		n = snprintf(body, sizeof(body),
		    "{\"connections\":%" PRIu64 ",\"requests\":%" PRIu64 "}\n",
		    nconns, nrequests);
		resp_simple(oc, 200, "application/json", body, (size_t)n,
		    NULL);
		break;
	case R_DELAY:
		oc_arm_timer(oc, delay_cb, oc->oc_arg);
		return;
	case R_STALL:
		resp_head(oc, 200, "OK", "application/octet-stream", 100, 0,
		    NULL);
		if (!oc->oc_is_head)
			evbuffer_add(bufferevent_get_output(oc->oc_bev),
			    pattern, 10);
		/* Keep reading only to notice the peer leaving. */
		oc->oc_state = OS_STALL;
		bufferevent_enable(oc->oc_bev, EV_READ);
		return;
	case R_RESET:
		oc->oc_keepalive = 0;
		resp_head(oc, 200, "OK", "application/octet-stream", 1000000,
		    0, NULL);
		evbuffer_add(bufferevent_get_output(oc->oc_bev), pattern, 10);
		oc->oc_rst = 1;
		oc_set_closing(oc);
		return;
	case R_SSE:
		resp_head(oc, 200, "OK", "text/event-stream", -1, 1,
		    "Cache-Control: no-cache\r\n");
		if (oc->oc_is_head || oc->oc_sse_n == 0) {
			if (!oc->oc_is_head)
				evbuffer_add(bufferevent_get_output(oc->oc_bev),
				    "0\r\n\r\n", 5);
			break;
		}
		oc->oc_sse_i = 0;
		oc_arm_timer(oc, sse_cb, 0);
		return;
	case R_WS:	/* handled once the head is in */
	case R_NOTFOUND:
		n = snprintf(body, sizeof(body), "{\"error\":\"not_found\"}\n");
		resp_simple(oc, 404, "application/json", body, (size_t)n,
		    NULL);
		break;
	}
	oc_response_done(oc);
}

/* Which route does <path> (no query) name, and with which argument? */
static void
route_request(struct oconn *oc, const char *path, size_t plen,
    const char *query, size_t qlen)
{
	static const struct {
		const char	*prefix;
		enum route	 route;
	} numbered[] = {
		{ "/size/", R_SIZE },
		{ "/chunked/", R_CHUNKED },
		{ "/close/", R_CLOSE },
		{ "/status/", R_STATUS },
		{ "/json/", R_JSON },
		{ "/delay/", R_DELAY },
	};
	size_t i, l;
	uint64_t v;

	oc->oc_route = R_NOTFOUND;
	for (i = 0; i < sizeof(numbered) / sizeof(numbered[0]); i++) {
		l = strlen(numbered[i].prefix);
		if (plen > l && strncmp(path, numbered[i].prefix, l) == 0) {
			if (parse_u64(path + l, plen - l, &v) == -1)
				return;
			if (numbered[i].route == R_STATUS &&
			    (v < 200 || v > 599))
				return;
			oc->oc_route = numbered[i].route;
			oc->oc_arg = v;
			if (oc->oc_route == R_CLOSE)
				oc->oc_keepalive = 0;
			return;
		}
	}
	if (span_eq(path, plen, "/echo"))
		oc->oc_route = R_ECHO;
	else if (span_eq(path, plen, "/upload"))
		oc->oc_route = R_UPLOAD;
	else if (span_eq(path, plen, "/stall"))
		oc->oc_route = R_STALL;
	else if (span_eq(path, plen, "/reset"))
		oc->oc_route = R_RESET;
	else if (span_eq(path, plen, "/stats"))
		oc->oc_route = R_STATS;
	else if (span_eq(path, plen, "/ws") && oc->oc_upgrade_ws)
		oc->oc_route = R_WS;
	else if (span_eq(path, plen, "/sse")) {
		const char *p = query, *end = query + qlen, *amp, *eq;

		oc->oc_route = R_SSE;
		oc->oc_sse_n = 3;
		oc->oc_sse_ms = 100;
		while (p < end) {
			if ((amp = memchr(p, '&', end - p)) == NULL)
				amp = end;
			if ((eq = memchr(p, '=', amp - p)) != NULL &&
			    parse_u64(eq + 1, amp - eq - 1, &v) == 0) {
				if (eq - p == 1 && *p == 'n')
					oc->oc_sse_n = v;
				else if (eq - p == 2 &&
				    strncmp(p, "ms", 2) == 0)
					oc->oc_sse_ms = v;
			}
			p = amp + 1;
		}
	}
}

/*
 * Parse one header field line <p, len> (no CRLF). Returns NULL or why the
 * request is refused.
 */
static const char *
parse_field(struct oconn *oc, const char *p, size_t len, int *nhost,
    int *have_cl, uint64_t *cl, int *have_te, int *te_chunked,
    int *conn_close, int *conn_ka)
{
	const char *name = p, *v, *ve, *s, *e, *te;
	size_t nlen, i;
	uint64_t n;
	int seen_chunked;

	if (*p == ' ' || *p == '\t')
		return "obs-fold line";
	for (nlen = 0; nlen < len && p[nlen] != ':'; nlen++)
		if (!is_tchar((unsigned char)p[nlen]))
			return "bad header name";
	if (nlen == 0 || nlen == len)
		return "bad header line";
	for (i = nlen + 1; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return "control character in header value";
	}
	v = p + nlen + 1;
	ve = p + len;
	while (v < ve && (*v == ' ' || *v == '\t'))
		v++;
	while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
		ve--;

	if (span_eq(name, nlen, "Host")) {
		(*nhost)++;
	} else if (span_eq(name, nlen, "Content-Length")) {
		if (parse_u64(v, ve - v, &n) == -1)
			return "bad Content-Length";
		if (*have_cl && n != *cl)
			return "conflicting Content-Length";
		*have_cl = 1;
		*cl = n;
	} else if (span_eq(name, nlen, "Transfer-Encoding")) {
		/*
		 * Codings may span several fields; chunked must be the last
		 * one and appear once. The only other coding we know is none
		 * at all, so anything else is refused rather than guessed.
		 */
		seen_chunked = *te_chunked;
		s = v;
		while (s <= ve) {
			if ((e = memchr(s, ',', ve - s)) == NULL)
				e = ve;
			while (s < e && (*s == ' ' || *s == '\t'))
				s++;
			te = e;
			while (te > s && (te[-1] == ' ' || te[-1] == '\t'))
				te--;
			if (te > s) {
				if (seen_chunked)
					return "coding after chunked";
				if (!span_eq(s, te - s, "chunked"))
					return "unsupported transfer-coding";
				seen_chunked = 1;
			}
			s = e + 1;
		}
		*have_te = 1;
		*te_chunked = seen_chunked;
	} else if (span_eq(name, nlen, "Connection")) {
		if (list_has(v, ve - v, "close"))
			*conn_close = 1;
		if (list_has(v, ve - v, "keep-alive"))
			*conn_ka = 1;
	} else if (span_eq(name, nlen, "Expect")) {
		if (span_eq(v, ve - v, "100-continue"))
			oc->oc_expect = 1;
	} else if (span_eq(name, nlen, "Upgrade")) {
		if (list_has(v, ve - v, "websocket"))
			oc->oc_upgrade_ws = 1;
	} else if (span_eq(name, nlen, "Sec-WebSocket-Key")) {
		if ((size_t)(ve - v) < sizeof(oc->oc_wskey)) {
			memcpy(oc->oc_wskey, v, ve - v);
			oc->oc_wskey[ve - v] = '\0';
		}
	}
	return NULL;
}

/*
 * Parse the head held in oc_head. Returns NULL or why it is refused.
 */
static const char *
parse_head(struct oconn *oc)
{
	const char *p = oc->oc_head, *end = p + oc->oc_headlen - 2;
	const char *le, *sp1, *sp2, *target, *path, *q, *why;
	size_t tlen, mlen;
	int nhost = 0, have_cl = 0, have_te = 0, te_chunked = 0;
	int conn_close = 0, conn_ka = 0;
	uint64_t cl = 0;

	/* request-line = method SP request-target SP HTTP-version */
	le = strstr(p, "\r\n");
	for (sp1 = p; sp1 < le && is_tchar((unsigned char)*sp1); sp1++)
		;
	mlen = sp1 - p;
	if (mlen == 0 || *sp1 != ' ')
		return "bad method";
	target = sp1 + 1;
	for (sp2 = target; sp2 < le && *sp2 > ' ' && *sp2 < 0x7f; sp2++)
		;
	tlen = sp2 - target;
	if (tlen == 0 || *sp2 != ' ')
		return "bad request-target";
	if (le - sp2 != 9 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    (sp2[8] != '0' && sp2[8] != '1'))
		return "bad HTTP version";
	oc->oc_minor = sp2[8] - '0';
	oc->oc_is_head = mlen == 4 && strncmp(p, "HEAD", 4) == 0;

	/* Header fields, each ending in CRLF; the head ends in CRLFCRLF. */
	for (p = le + 2; p < end; p = le + 2) {
		le = strstr(p, "\r\n");
		if ((why = parse_field(oc, p, le - p, &nhost, &have_cl, &cl,
		    &have_te, &te_chunked, &conn_close, &conn_ka)) != NULL)
			return why;
	}

	if (oc->oc_minor == 1 && nhost != 1)
		return nhost == 0 ? "missing Host" : "duplicate Host";
	if (nhost > 1)
		return "duplicate Host";
	if (have_te && have_cl)
		return "both Content-Length and Transfer-Encoding";
	if (have_te && oc->oc_minor == 0)
		return "Transfer-Encoding in HTTP/1.0";
	if (have_te && !te_chunked)
		return "unsupported transfer-coding";
	if (te_chunked)
		oc->oc_bk = BK_CHUNKED;
	else if (have_cl && cl > 0) {
		oc->oc_bk = BK_LENGTH;
		oc->oc_left = cl;
	}
	oc->oc_keepalive = oc->oc_minor == 1 ? !conn_close :
	    (conn_ka && !conn_close);

	/* origin-form, or absolute-form as a proxy might forward it */
	path = target;
	if (tlen >= 7 && strncasecmp(target, "http://", 7) == 0)
		path = target + 7;
	else if (tlen >= 8 && strncasecmp(target, "https://", 8) == 0)
		path = target + 8;
	if (path != target) {
		while (path < sp2 && *path != '/' && *path != '?')
			path++;
	} else if (*target != '/' && !(tlen == 1 && *target == '*'))
		return "bad request-target";
	for (q = path; q < sp2 && *q != '?'; q++)
		;
	if (q == path)	/* absolute-form with an empty path */
		route_request(oc, "/", 1, "", 0);
	else
		route_request(oc, path, q - path, q < sp2 ? q + 1 : q,
		    q < sp2 ? (size_t)(sp2 - q - 1) : 0);
	return NULL;
}

/*
 * Find a complete head at the front of the input. Returns 1 with oc_head
 * filled, 0 when more input is needed, -1 on a refused head (oc_head then
 * holds what arrived, for the log) with *why set.
 */
static int
read_head(struct oconn *oc, const char **why)
{
	struct evbuffer *in = bufferevent_get_input(oc->oc_bev);
	size_t avail, n, i, ls, end = 0;
	unsigned char *p;

	/* Empty lines before a request line are ignored (RFC 9112 2.2). */
	for (;;) {
		avail = evbuffer_get_length(in);
		if (avail < 2)
			break;
		p = evbuffer_pullup(in, 2);
		if (p[0] != '\r' || p[1] != '\n')
			break;
		evbuffer_drain(in, 2);
	}
	if ((avail = evbuffer_get_length(in)) == 0)
		return 0;
	n = avail < HEAD_MAX ? avail : HEAD_MAX;
	p = evbuffer_pullup(in, n);
	*why = NULL;
	for (i = 0, ls = 0; i < n; i++) {
		if (p[i] == '\0') {
			*why = "NUL in head";
			break;
		}
		if (p[i] != '\n')
			continue;
		if (i == 0 || p[i - 1] != '\r') {
			*why = "bare LF in head";
			break;
		}
		if (i - ls == 1) {
			end = i + 1;
			break;
		}
		ls = i + 1;
	}
	if (end == 0 && *why == NULL) {
		if (avail < HEAD_MAX)
			return 0;
		*why = "head too large";
	}
	if (*why != NULL)
		end = n;	/* log everything we looked at */
	if ((oc->oc_head = malloc(end + 1)) == NULL)
		die("out of memory");
	memcpy(oc->oc_head, p, end);
	oc->oc_head[end] = '\0';
	oc->oc_headlen = end;
	evbuffer_drain(in, end);
	nrequests++;
	oc->oc_nreq++;
	return *why == NULL ? 1 : -1;
}

/* Count (and, for /upload, hash) <n> body bytes off the input. */
static void
body_take(struct oconn *oc, struct evbuffer *in, size_t n)
{
	struct evbuffer_iovec v[16];
	const unsigned char *b;
	size_t k, bl, j;
	uint64_t h = oc->oc_sum;
	int nv, i;

	oc->oc_bodylen += n;
	if (oc->oc_route != R_UPLOAD) {
		evbuffer_drain(in, n);
		return;
	}
	while (n > 0) {
		nv = evbuffer_peek(in, n, NULL, v, 16);
		if (nv > 16)
			nv = 16;
		for (i = 0, k = 0; i < nv && k < n; i++) {
			b = v[i].iov_base;
			bl = v[i].iov_len < n - k ? v[i].iov_len : n - k;
			for (j = 0; j < bl; j++) {
				h ^= b[j];
				h *= FNV_PRIME;
			}
			k += bl;
		}
		evbuffer_drain(in, k);
		n -= k;
	}
	oc->oc_sum = h;
}

/*
 * Consume request body bytes. Returns 1 when the body is complete, 0 when
 * more input is needed, -1 on bad chunked framing (*why set).
 */
static int
read_body(struct oconn *oc, const char **why)
{
	struct evbuffer *in = bufferevent_get_input(oc->oc_bev);
	struct evbuffer_ptr ep;
	size_t eol, len, i;
	unsigned char *p;
	uint64_t sz;
	int nd;

	for (;;) {
		switch (oc->oc_bk) {
		case BK_NONE:
			return 1;
		case BK_LENGTH:
			len = evbuffer_get_length(in);
			if (len == 0)
				return oc->oc_left == 0;
			sz = len < oc->oc_left ? len : oc->oc_left;
			body_take(oc, in, (size_t)sz);
			oc->oc_left -= sz;
			return oc->oc_left == 0;
		case BK_CHUNKED:
			break;
		}
		switch (oc->oc_cs) {
		case CS_SIZE:
		case CS_TRAILER:
			ep = evbuffer_search_eol(in, NULL, &eol,
			    EVBUFFER_EOL_LF);
			if (ep.pos == -1) {
				if (evbuffer_get_length(in) > LINE_MAX_CHUNK) {
					*why = "chunk line too long";
					return -1;
				}
				return 0;
			}
			len = (size_t)ep.pos + 1;
			if ((oc->oc_cs == CS_SIZE && len > LINE_MAX_CHUNK) ||
			    len > HEAD_MAX) {
				*why = "chunk line too long";
				return -1;
			}
			p = evbuffer_pullup(in, len);
			if (len < 2 || p[len - 2] != '\r') {
				*why = "bare LF in chunked body";
				return -1;
			}
			for (i = 0; i < len - 2; i++)
				if (p[i] == '\r' || p[i] == '\0') {
					*why = "control char in chunk line";
					return -1;
				}
			if (oc->oc_cs == CS_TRAILER) {
				if (len == 2) {
					evbuffer_drain(in, 2);
					return 1;
				}
				if (oc->oc_trailer == NULL &&
				    (oc->oc_trailer = evbuffer_new()) == NULL)
					die("out of memory");
				if (evbuffer_get_length(oc->oc_trailer) + len >
				    HEAD_MAX) {
					*why = "trailers too large";
					return -1;
				}
				if (p[0] == ' ' || p[0] == '\t' ||
				    memchr(p, ':', len) == NULL) {
					*why = "bad trailer line";
					return -1;
				}
				evbuffer_remove_buffer(in, oc->oc_trailer, len);
				break;
			}
			/* chunk-size = 1*HEXDIG, then optional ;ext */
			for (i = 0, sz = 0, nd = 0; i < len - 2; i++, nd++) {
				int c = p[i], d;

				if (c >= '0' && c <= '9')
					d = c - '0';
				else if (c >= 'a' && c <= 'f')
					d = c - 'a' + 10;
				else if (c >= 'A' && c <= 'F')
					d = c - 'A' + 10;
				else
					break;
				if (nd == 16) {
					*why = "chunk size overflow";
					return -1;
				}
				sz = sz << 4 | (uint64_t)d;
			}
			if (nd == 0) {
				*why = "bad chunk size";
				return -1;
			}
			/* BWS before ';' is fine; nothing else may follow */
			while (i < len - 2 && (p[i] == ' ' || p[i] == '\t'))
				i++;
			if (i < len - 2 && p[i] != ';') {
				*why = "bad chunk size";
				return -1;
			}
			evbuffer_drain(in, len);
			if (sz == 0)
				oc->oc_cs = CS_TRAILER;
			else {
				oc->oc_cs = CS_DATA;
				oc->oc_left = sz;
			}
			break;
		case CS_DATA:
			len = evbuffer_get_length(in);
			if (len == 0)
				return 0;
			sz = len < oc->oc_left ? len : oc->oc_left;
			body_take(oc, in, (size_t)sz);
			oc->oc_left -= sz;
			if (oc->oc_left == 0)
				oc->oc_cs = CS_DATA_CRLF;
			break;
		case CS_DATA_CRLF:
			if (evbuffer_get_length(in) < 2)
				return 0;
			p = evbuffer_pullup(in, 2);
			if (p[0] != '\r' || p[1] != '\n') {
				*why = "chunk data not followed by CRLF";
				return -1;
			}
			evbuffer_drain(in, 2);
			oc->oc_cs = CS_SIZE;
			break;
		}
	}
}

/* Move as far as buffered input allows. */
static void
oc_process(struct oconn *oc)
{
	struct evbuffer *in = bufferevent_get_input(oc->oc_bev);
	struct evbuffer *out = bufferevent_get_output(oc->oc_bev);
	const char *why = NULL;
	int r;

	for (;;) {
		switch (oc->oc_state) {
		case OS_HEAD:
			if ((r = read_head(oc, &why)) == 0)
				return;
			if (r == -1 || (why = parse_head(oc)) != NULL) {
				oc_reject(oc, why);
				return;
			}
			if (oc->oc_route == R_WS) {
				if (oc->oc_bk != BK_NONE) {
					oc_reject(oc, "body on upgrade");
					return;
				}
				log_request(oc, NULL);
				start_ws(oc);
				break;
			}
			if (oc->oc_expect && oc->oc_minor == 1 &&
			    oc->oc_bk != BK_NONE)
				evbuffer_add_printf(out,
				    "HTTP/1.1 100 Continue\r\n\r\n");
			oc->oc_state = OS_BODY;
			break;
		case OS_BODY:
			if ((r = read_body(oc, &why)) == 0)
				return;
			if (r == -1) {
				oc_reject(oc, why);
				return;
			}
			log_request(oc, NULL);
			start_response(oc);
			if (oc->oc_state != OS_HEAD)
				return;
			break;
		case OS_ECHO:
			evbuffer_add_buffer(out, in);
			if (evbuffer_get_length(out) > ECHO_MAX) {
				/* the peer is not reading: wait for it */
				bufferevent_disable(oc->oc_bev, EV_READ);
				bufferevent_setwatermark(oc->oc_bev, EV_WRITE,
				    ECHO_MAX / 2, 0);
			}
			return;
		case OS_STALL:
		case OS_CLOSING:
			evbuffer_drain(in, evbuffer_get_length(in));
			return;
		case OS_RESPOND:
			return;
		}
	}
}

static void
oc_readcb(struct bufferevent *bev, void *arg)
{
	oc_process(arg);
}

static void
oc_writecb(struct bufferevent *bev, void *arg)
{
	struct oconn *oc = arg;

	switch (oc->oc_state) {
	case OS_CLOSING:
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			oc_free(oc);
		break;
	case OS_RESPOND:
		if (oc->oc_gen && gen_fill(oc))
			oc_process(oc);
		break;
	case OS_ECHO:
		bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
		if (oc->oc_peer_eof) {
			oc_set_closing(oc);
			break;
		}
		bufferevent_enable(bev, EV_READ);
		break;
	default:
		break;
	}
}

/* Why a TLS connection failed, on stderr: the handshake failures a test
 * provokes on purpose (an untrusting client) must be visible. */
static void
tls_report(struct oconn *oc)
{
	unsigned long e;
	char buf[256];
	int n = 0;

	while ((e = bufferevent_get_openssl_error(oc->oc_bev)) != 0) {
		/* libevent also queues bare SSL_get_error() values */
		if (ERR_GET_LIB(e) == 0)
			continue;
		ERR_error_string_n(e, buf, sizeof(buf));
		fprintf(stderr, "origin: conn %" PRIu64 ": tls: %s\n",
		    oc->oc_id, buf);
		n++;
	}
	if (n == 0 && oc->oc_nreq == 0 &&
	    !SSL_is_init_finished(bufferevent_openssl_get_ssl(oc->oc_bev)))
		fprintf(stderr, "origin: conn %" PRIu64 ": tls: handshake "
		    "failed: %s\n", oc->oc_id,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	ERR_clear_error();
}

static void
oc_eventcb(struct bufferevent *bev, short what, void *arg)
{
	struct oconn *oc = arg;
	struct evbuffer *in;
	size_t len;

	if (what & BEV_EVENT_ERROR) {
		if (oc->oc_state == OS_BODY)
			log_request(oc, "connection error mid-body");
		if (sslctx != NULL)
			tls_report(oc);
		oc_free(oc);
		return;
	}
	if (!(what & BEV_EVENT_EOF))
		return;
	/*
	 * The peer finished sending. A request still being read is cut
	 * short; a response in progress is still delivered (the peer may
	 * only have shut down its write side), then we close.
	 */
	oc->oc_peer_eof = 1;
	switch (oc->oc_state) {
	case OS_HEAD:
		/* Log a partial head: a test may want to see what got here. */
		in = bufferevent_get_input(bev);
		if ((len = evbuffer_get_length(in)) > 0) {
			if (len > HEAD_MAX)
				len = HEAD_MAX;
			if ((oc->oc_head = malloc(len + 1)) == NULL)
				die("out of memory");
			evbuffer_remove(in, oc->oc_head, len);
			oc->oc_headlen = len;
			log_request(oc, "incomplete head at EOF");
		}
		/* Answers to earlier requests may still be queued. */
		if (evbuffer_get_length(bufferevent_get_output(bev)) > 0)
			oc_set_closing(oc);
		else
			oc_free(oc);
		return;
	case OS_BODY:
		log_request(oc, "incomplete body at EOF");
		oc_free(oc);
		return;
	case OS_STALL:
		oc_free(oc);
		return;
	case OS_ECHO:
		oc_process(oc);
		oc_set_closing(oc);
		return;
	case OS_RESPOND:
	case OS_CLOSING:
		oc->oc_keepalive = 0;
		return;
	}
}

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct oconn *oc;
	SSL *ssl;
	int one = 1;

	/* Small responses must not wait for Nagle. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((oc = calloc(1, sizeof(*oc))) == NULL)
		die("out of memory");
	if (sslctx != NULL) {
		if ((ssl = SSL_new(sslctx)) == NULL)
			die("SSL_new failed");
		/* On failure the SSL is freed and the fd closed for us. */
		oc->oc_bev = bufferevent_openssl_socket_new(base, fd, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
		if (oc->oc_bev != NULL)
			/* A peer's EOF without close_notify is EOF, as in
			 * plain mode, not an error. */
			bufferevent_openssl_set_allow_dirty_shutdown(
			    oc->oc_bev, 1);
	} else
		oc->oc_bev = bufferevent_socket_new(base, fd,
		    BEV_OPT_CLOSE_ON_FREE);
	if (oc->oc_bev == NULL)
		die("bufferevent_socket_new failed");
	oc->oc_id = ++nconns;
	oc->oc_state = OS_HEAD;
	oc_reset_request(oc);
	bufferevent_set_max_single_read(oc->oc_bev, IO_SINGLE);
	bufferevent_set_max_single_write(oc->oc_bev, IO_SINGLE);
	bufferevent_setcb(oc->oc_bev, oc_readcb, oc_writecb, oc_eventcb, oc);
	bufferevent_enable(oc->oc_bev, EV_READ | EV_WRITE);
}

static void
accept_errcb(struct evconnlistener *l, void *arg)
{
	int e = EVUTIL_SOCKET_ERROR();

	/* EMFILE and friends: keep serving the connections we have. */
	fprintf(stderr, "origin: accept: %s\n",
	    evutil_socket_error_to_string(e));
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(base);
}

/* ALPN: http/1.1 when the client offers it; otherwise no ALPN at all. */
static int
alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *sel;

	if (SSL_select_next_proto(&sel, outlen, h11, sizeof(h11) - 1, in,
	    inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

static void
tls_die(const char *what, const char *path)
{
	unsigned long e = ERR_get_error();
	char buf[256];

	ERR_error_string_n(e, buf, sizeof(buf));
	die("%s %s: %s", what, path, e != 0 ? buf : "failed");
}

static SSL_CTX *
tls_setup(const char *certfile, const char *keyfile)
{
	SSL_CTX *ctx;

	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
		tls_die("SSL_CTX_new", "");
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION))
		tls_die("SSL_CTX_set_min_proto_version", "");
	/* The file may hold the leaf followed by intermediates. */
	if (SSL_CTX_use_certificate_chain_file(ctx, certfile) != 1)
		tls_die("certificate", certfile);
	if (SSL_CTX_use_PrivateKey_file(ctx, keyfile, SSL_FILETYPE_PEM) != 1)
		tls_die("private key", keyfile);
	if (SSL_CTX_check_private_key(ctx) != 1)
		tls_die("key does not match", certfile);
	/*
	 * libevent may retry a write with a moved buffer. Never
	 * SSL_MODE_ENABLE_PARTIAL_WRITE: libevent 2.1's SSL write loop
	 * moves on to the next chunk after a short write, which reorders
	 * the bytes on the wire.
	 */
	SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/*
	 * OpenSSL 3 calls an EOF without close_notify a protocol error,
	 * which libevent's dirty-shutdown allowance does not cover: make it
	 * a plain EOF, as the peer closing is in plain mode.
	 */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, NULL);
	return ctx;
}

static void
write_portfile(const char *path, int port)
{
	char *tmp;
	FILE *f;

	/* Write then rename, so a script polling for it never reads half. */
	if (asprintf(&tmp, "%s.tmp", path) == -1)
		die("out of memory");
	if ((f = fopen(tmp, "w")) == NULL)
		die("%s: %s", tmp, strerror(errno));
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0 || rename(tmp, path) == -1)
		die("%s: %s", path, strerror(errno));
	free(tmp);
}

int
main(int argc, char *argv[])
{
	const char *addr = "127.0.0.1", *port = NULL, *logfile = NULL;
	const char *portfile = NULL, *certfile = NULL, *keyfile = NULL;
	struct addrinfo hints, *res;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct evconnlistener *lev;
	struct event *sigint, *sigterm;
	int ch, error, bound;
	size_t i;

	while ((ch = getopt(argc, argv, "a:C:K:l:p:P:h")) != -1) {
		switch (ch) {
		case 'a':
			addr = optarg;
			break;
		case 'C':
			certfile = optarg;
			break;
		case 'K':
			keyfile = optarg;
			break;
		case 'l':
			logfile = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 'P':
			portfile = optarg;
			break;
		default:
			usage();
		}
	}
	if (port == NULL || optind != argc || (certfile == NULL) !=
	    (keyfile == NULL))
		usage();
	if (certfile != NULL)
		sslctx = tls_setup(certfile, keyfile);

	for (i = 0; i < sizeof(pattern); i++)
		pattern[i] = (char)('a' + i % 26);
	memset(xs, 'x', sizeof(xs));
	signal(SIGPIPE, SIG_IGN);

	if (logfile != NULL &&
	    (logfd = open(logfile, O_WRONLY | O_CREAT | O_APPEND, 0644)) == -1)
		die("%s: %s", logfile, strerror(errno));

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	if ((error = getaddrinfo(addr, port, &hints, &res)) != 0)
		die("%s port %s: %s", addr, port, gai_strerror(error));

	if ((base = event_base_new()) == NULL)
		die("event_base_new failed");
	lev = evconnlistener_new_bind(base, accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 1024, res->ai_addr,
	    (int)res->ai_addrlen);
	if (lev == NULL)
		die("listen on %s port %s: %s", addr, port, strerror(errno));
	freeaddrinfo(res);
	evconnlistener_set_error_cb(lev, accept_errcb);

	if (getsockname(evconnlistener_get_fd(lev), (struct sockaddr *)&ss,
	    &sslen) == -1)
		die("getsockname: %s", strerror(errno));
	bound = ntohs(ss.ss_family == AF_INET6 ?
	    ((struct sockaddr_in6 *)&ss)->sin6_port :
	    ((struct sockaddr_in *)&ss)->sin_port);
	if (portfile != NULL)
		write_portfile(portfile, bound);

	sigint = evsignal_new(base, SIGINT, signal_cb, NULL);
	sigterm = evsignal_new(base, SIGTERM, signal_cb, NULL);
	if (sigint == NULL || sigterm == NULL)
		die("evsignal_new failed");
	evsignal_add(sigint, NULL);
	evsignal_add(sigterm, NULL);

	event_base_dispatch(base);

	event_free(sigint);
	event_free(sigterm);
	evconnlistener_free(lev);
	if (sslctx != NULL)
		SSL_CTX_free(sslctx);
	if (logfd != -1)
		close(logfd);
	return 0;
}
