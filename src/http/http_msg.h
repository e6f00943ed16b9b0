/*
 * HTTP/1.x message head model and llhttp glue. No I/O: bytes go in through
 * http_msg_feed(), body bytes come out through a callback.
 */
#ifndef AIRLOCK_HTTP_MSG_H
#define AIRLOCK_HTTP_MSG_H

#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#define HTTP_MAX_HEADERS	128
#define HTTP_MAX_URI		8192
#define HTTP_MAX_EMPTY_LINES	2	/* CRLFs tolerated before a request
					   line (RFC 9112 2.2: at least one) */
#define HTTP_MAX_CHUNK_LINE	4096	/* chunk size and extensions */

struct http_header {
	uint32_t	h_name;		/* offsets into hm_buf */
	uint32_t	h_name_len;
	uint32_t	h_value;
	uint32_t	h_value_len;
};

enum http_feed {
	HTTP_FEED_MORE = 0,	/* all bytes consumed, need more */
	HTTP_FEED_HEAD,		/* head complete; parser paused */
	HTTP_FEED_DONE,		/* message complete; parser paused */
	HTTP_FEED_UPGRADE,	/* CONNECT or Upgrade: rest is not HTTP */
	HTTP_FEED_ERROR,	/* see hm_status / hm_error */
};

/* Framing of a body as received. */
enum http_framing {
	HTTP_BODY_NONE = 0,
	HTTP_BODY_LENGTH,
	HTTP_BODY_CHUNKED,
	HTTP_BODY_EOF,		/* responses only: until the peer closes */
};

typedef void (*http_body_cb)(void *arg, const char *, size_t);

struct http_msg {
	llhttp_t	 hm_parser;
	int		 hm_type;	/* HTTP_REQUEST or HTTP_RESPONSE */

	char		*hm_buf;	/* url, status text, names, values */
	size_t		 hm_len;
	size_t		 hm_cap;
	size_t		 hm_max;	/* limits.header_bytes */
	size_t		 hm_head_bytes;	/* raw bytes of the head so far */

	uint32_t	 hm_url;
	uint32_t	 hm_url_len;
	uint32_t	 hm_reason;
	uint32_t	 hm_reason_len;
	struct http_header hm_hdrs[HTTP_MAX_HEADERS];
	int		 hm_nhdrs;
	int		 hm_last;	/* 0 none, 1 url, 2 field, 3 value,
					   4 reason */
	const char	*hm_feed_start;	/* buffer of the current feed */
	const char	*hm_feed_end;
	int		 hm_value_at_end; /* last value piece ended it */
	char		 hm_raw_prev;	/* last two raw head bytes */
	char		 hm_raw_prev2;
	unsigned	 hm_raw_lines;	/* LFs seen in the head */
	int		 hm_rl_state;	/* request line check, http_msg.c */
	unsigned	 hm_rl_empty;	/* empty lines before it */
	unsigned	 hm_rl_spaces;	/* SPs in it */
	char		 hm_rl_prev;	/* its previous byte, 0 at its start */
	uint64_t	 hm_chunk_gap;	/* framing bytes since chunk data */
	const char	*hm_chunk_mark;	/* end of the last data in this feed */
	int		 hm_trailers;	/* the trailer section has begun */
	int		 hm_trail_at;	/* hm_hdrs index of its first field */

	int		 hm_method;	/* llhttp_method_t */
	int		 hm_status;	/* response status */
	int		 hm_major;
	int		 hm_minor;
	int		 hm_keepalive;	/* llhttp_should_keep_alive */
	enum http_framing hm_framing;
	uint64_t	 hm_content_length;
	int		 hm_head_done;
	int		 hm_complete;
	int		 hm_no_body;	/* response to HEAD, set before feeding */

	/* on HTTP_FEED_ERROR: the status to answer with and why */
	int		 hm_err_status;	/* 400, 413, 414, 431, 501, 505, 502 */
	char		 hm_err_reason[128];

	uint64_t	 hm_body_bytes;	/* body bytes seen (decoded) */
	http_body_cb	 hm_on_body;
	void		*hm_arg;
};

/* <type> HTTP_REQUEST or HTTP_RESPONSE; <max> bounds the head. */
void	http_msg_init(struct http_msg *, int type, size_t max);
void	http_msg_fini(struct http_msg *);
/* Forget the previous message (keep-alive) and resume the parser. */
void	http_msg_reset(struct http_msg *);
/* Resume after HTTP_FEED_HEAD to parse the body. */
void	http_msg_resume(struct http_msg *);

/*
 * Feed bytes. *consumed gets how many were used; the rest belongs to a
 * later call (after resume/reset) or, for UPGRADE, to the tunnel.
 */
enum http_feed http_msg_feed(struct http_msg *, const char *, size_t,
	    size_t *consumed);
/*
 * Serve a request that asked to switch protocols (h2c) as the HTTP/1.1
 * message it also is (RFC 9110 section 7.8 lets a server ignore Upgrade):
 * its body is parsed and the connection goes on. Call at the head, before
 * http_msg_resume().
 */
void	http_msg_ignore_upgrade(struct http_msg *);
/* The peer closed: completes an EOF-delimited response. */
enum http_feed http_msg_finish(struct http_msg *);

/* Accessors; strings are not NUL-terminated. */
static inline const char *
http_msg_str(const struct http_msg *m, uint32_t off)
{
	return m->hm_buf + off;
}
const char *http_msg_method(const struct http_msg *);
/* First header named <name> (case-insensitive), or -1. */
int	http_msg_find(const struct http_msg *, const char *name, int from);
int	http_msg_count(const struct http_msg *, const char *name);
/* Leave field <i> out of the message (a stage that rewrote the body). */
void	http_msg_remove(struct http_msg *, int i);
/* The value of header <i> (from http_msg_find), OWS trimmed; borrowed. */
void	http_msg_value(const struct http_msg *, int i, const char **v,
	    size_t *len);
/* Is <name> hop-by-hop, or listed in the message's Connection header? */
int	http_msg_is_hop(const struct http_msg *, const char *name,
	    size_t len);
/* Does the Connection header (a token list) contain <token>? */
int	http_msg_connection_has(const struct http_msg *, const char *token);
/* Does a <field> header (a comma-separated list) contain <token>? */
int	http_msg_list_has(const struct http_msg *, const char *field,
	    const char *token);

/*
 * The method that X-HTTP-Method-Override, X-HTTP-Method or
 * X-Method-Override name (frameworks act on it instead of the request
 * line's), upper-cased into <out>. Returns 0 when there is none, 1 with
 * it in <out>, -1 when a value is not a method token, does not fit, or
 * the headers disagree.
 */
int	http_msg_method_override(const struct http_msg *, char *out,
	    size_t outsz);

/*
 * Is <name> a header some frameworks take as the request's path instead
 * of the request line's (X-Original-URL, X-Rewrite-URL, X-Original-URI)?
 */
int	http_is_path_override(const char *name, size_t len);

#endif
