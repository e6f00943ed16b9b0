/*
 * HTTP/1 serialisation: the request head a proxy writes upstream and the
 * response head it writes to its client, from a parsed struct http_msg.
 * Pure (no libevent, no sockets): bytes go to a sink, and the fields of
 * a request head pass through rewrite callbacks (the secrets stage
 * substitutes placeholders and adds its fields through one). Framing is
 * never forwarded as received: the writer states its own.
 */
#ifndef AIRLOCK_HTTP_WRITE_H
#define AIRLOCK_HTTP_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "http/http_msg.h"

/* Where the bytes go: <add> appends <n> bytes. */
struct hw_sink {
	void	(*hs_add)(void *arg, const void *p, size_t n);
	void	*hs_arg;
};

/* A plain growable buffer and its sink (tests, small heads). */
struct hw_buf {
	char	*hb_p;
	size_t	 hb_len;
	size_t	 hb_cap;
};
void	hw_buf_sink(struct hw_buf *, struct hw_sink *);
void	hw_buf_fini(struct hw_buf *);	/* wipes and frees */

/*
 * A sink that gathers a head's small pieces (some 40 a request) in its
 * own storage and hands them on to another sink in blocks: one append
 * of the whole head where each piece would cost an evbuffer_add. What
 * it held is wiped when handed on (a head may carry a secret).
 * hw_gather_flush before anything writes to the destination directly.
 */
struct hw_gather {
	struct hw_sink	 hg_to;
	size_t		 hg_len;
	char		 hg_buf[1024];
};
void	hw_gather_sink(struct hw_gather *, const struct hw_sink *to,
	    struct hw_sink *);
void	hw_gather_flush(struct hw_gather *);

/*
 * What one rewriter does to a request head's fields on their way out;
 * any member may be NULL.
 *	hr_drop		1: field <name> is not written
 *	hr_value	write field value <v> (OWS trimmed) through <out>,
 *			rewritten; the first rewriter that has one writes
 *	hr_fields	write whole "Name: value\r\n" lines through <out>,
 *			after the client's fields, in rewriter order
 */
struct hw_rewrite {
	int	(*hr_drop)(void *arg, const char *name, size_t nlen);
	void	(*hr_value)(void *arg, const char *v, size_t vlen,
		    const struct hw_sink *out);
	void	(*hr_fields)(void *arg, const struct hw_sink *out);
	void	*hr_arg;
};

#define HW_REWRITE_MAX	4

/* The request head going upstream. */
struct hw_req {
	const char	*hq_method;
	const char	*hq_path;	/* origin form, normalised */
	const char	*hq_query;	/* without '?'; NULL or "": none */
	const char	*hq_host;	/* the Host value (http_write_host) */
	size_t		 hq_hostlen;
	int		 hq_upgrade;	/* a WebSocket upgrade goes on */
	int		 hq_held;	/* the body was read whole: it goes
					   with a Content-Length of
					   hq_held_len, and no Expect */
	size_t		 hq_held_len;
	int		 hq_chunked;	/* a body of another length than
					   declared (a stage changes it):
					   it goes chunked */
	const struct hw_rewrite	*hq_rw[HW_REWRITE_MAX];
	size_t		 hq_nrw;
};

/*
 * The Host value for <host> (an IPv6 literal gets brackets) and <port>,
 * the port only when it is not <default_port>. Writes at most <sz> bytes
 * with a NUL; returns the length.
 */
size_t	http_write_host(char *buf, size_t sz, const char *host, int port,
	    int default_port);

/*
 * Write the request head of <m> as hq says: request line, Host, the
 * client's end-to-end fields (no hop-by-hop, Host, Content-Length,
 * Proxy-*, nor what a rewriter drops), the rewriters' fields, the
 * upgrade, the framing and the empty line. Returns 1 when the body goes
 * upstream chunked (the caller re-chunks it), else 0.
 */
int	http_write_request_head(const struct http_msg *m,
	    const struct hw_req *, const struct hw_sink *);

/*
 * The upstream's part of a response head: status line and its
 * end-to-end fields (no hop-by-hop; no Content-Length when the body is
 * re-framed). Kept apart so that the secrets stage can redact it as one
 * block before it joins http_write_response_end's part.
 */
/* The trailer fields of a chunked <m> (gRPC's grpc-status), end-to-end
   ones only, each "name: value\r\n". */
void	http_write_trailers(const struct http_msg *m,
	    const struct hw_sink *out);
void	http_write_status_fields(const struct http_msg *m,
	    const struct hw_sink *);

/* The gateway's part of a response head. */
struct hw_resp {
	const char	*hp_id;		/* X-Airlock-Request-Id; NULL: an
					   interim head (only the empty
					   line is written) */
	enum http_framing hp_framing;	/* how the body comes */
	uint64_t	 hp_length;	/* HTTP_BODY_LENGTH: its length */
	int		 hp_http10;	/* the client speaks HTTP/1.0 */
	int		 hp_upgrade;	/* a 101 to a WebSocket upgrade */
	int		 hp_close;	/* the connection closes after it */
};

#define HW_RECHUNK	0x1	/* the body goes to the client chunked */
#define HW_CLOSE_DELIM	0x2	/* close-delimited (HTTP/1.0): then the
				   connection closes */

/* The gateway's fields, the framing, Connection and the empty line;
 * returns HW_* flags for the body. */
int	http_write_response_end(const struct hw_resp *,
	    const struct hw_sink *);

/* RFC 9110's reason phrase for <status>, else one for its class: never
 * empty, for the status lines the gateway writes itself (its answers, an
 * HTTP/2 answer relayed to an HTTP/1.1 client: some parsers, nghttp2's
 * h2load among them, refuse "HTTP/1.1 200 " without one). */
const char *http_reason_phrase(int status);

#endif
