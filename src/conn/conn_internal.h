/*
 * Between the files that were one conn.c (conn.c: accept, the request
 * loop, the callbacks; conn_body.c: what goes out, the request body's
 * pump and framing; conn_request.c: the request head to the upstream;
 * conn_response.c: the response; conn_close.c: the end). Not for the
 * other planes.
 */
#ifndef AIRLOCK_CONN_INTERNAL_H
#define AIRLOCK_CONN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

struct bufferevent;
struct conn;
struct evbuffer;
struct evbuffer_cb_info;
struct http_msg;
struct hw_sink;

/* conn.c */
void	conn_timer_cb(int fd, short what, void *arg);
/* The exchange and request state of <c> freed and zeroed. */
void	conn_req_clear(struct conn *);
void	conn_client_write_cb(struct bufferevent *, void *);

/* conn_body.c */
/* The request head written for the upstream, the held body after it. */
void	conn_request_head_write(struct conn *);
/* A piece of request body from the parser, through the stages. */
void	conn_request_body_cb(void *arg, const char *p, size_t len);
/* The parser saw its end: what stages kept back, the last chunk. */
void	conn_request_body_end(struct conn *);
/* After its head, does a message still need a body feed of its own? */
int	conn_msg_empty_body_left(const struct http_msg *);
/* <len> body bytes towards <to>, chunked when asked; counted in *count. */
void	conn_body_out(struct conn *, struct bufferevent *to, const char *p,
	    size_t len, int chunked, uint64_t *count);
/* Send what one callback gathered for the client (c_pend). */
void	conn_client_flush(struct conn *);
/* A sink for http/http_write.h that appends to <b>. */
void	conn_evb_sink(struct evbuffer *b, struct hw_sink *);

/* conn_request.c */
/* The request head is parsed: identity, target, policy, stages. */
void	conn_on_request_head(struct conn *);
/* Budget admission (the ready hooks), then upstream. */
void	conn_proceed(struct conn *);
/* A pooled upstream for the request, else resolve and connect. */
void	conn_find_upstream(struct conn *);
/* The body is held: the request is whole, go upstream. */
void	conn_body_buffered(struct conn *);

/* conn_response.c */
void	conn_response_body_cb(void *arg, const char *p, size_t len);
int	conn_response_body_end(struct conn *);
void	conn_feed_response(struct conn *);
void	conn_feed_response_loop(struct conn *);

/* conn_close.c */
void	conn_linger(struct conn *);
void	conn_under_drained(struct evbuffer *,
	    const struct evbuffer_cb_info *, void *);
void	conn_tls_finish(struct conn *);

#endif
