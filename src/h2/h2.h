/*
 * The HTTP/2 plane: an intercepted TLS session for which ALPN chose h2 is
 * served by an nghttp2 server session (h2_srv.c) whose streams are each
 * one exchange: a stream's request is handed, as HTTP/1.1, to a
 * connection of its own (conn/conn_stream.c) that runs the whole
 * pipeline, and its answer comes back on the stream (h2_stream.c). The
 * protocol's limits (streams, windows, header list, resets, SETTINGS and
 * PING floods, CONTINUATION) are nghttp2's options and ours, set here.
 */
#ifndef AIRLOCK_H2_H
#define AIRLOCK_H2_H

#include <openssl/ssl.h>

/* Marks the gateway's own answers on a stream's connection; never sent. */
#define H2_GATEWAY_FIELD	"X-Airlock-Gateway-Answer"

struct conn;
struct h2_srv;
struct h2_stream;

/* Did the handshake on <ssl> choose h2? */
int	h2_alpn_is_h2(SSL *);
/*
 * Serve the intercepted session of <c> (its TLS handshake done, ALPN h2)
 * as HTTP/2: the session takes c->c_bev's callbacks and ends the
 * connection (conn_close) when it ends. 0, or -1 after closing it.
 */
int	h2_srv_start(struct conn *);
/* The worker drains: GOAWAY, the streams under way go on, then the end. */
void	h2_srv_drain(struct h2_srv *);
/* From conn_free: end the streams still open, free the session. */
void	h2_srv_free(struct h2_srv *);
/* From conn_free of a stream's connection: it is gone. */
void	h2_stream_conn_gone(struct h2_stream *);

/*
 * Upstream h2 (h2_cli.c, h2_pool.c): a request's upstream may be one
 * stream of a pooled HTTP/2 connection, seen by the connection as an
 * HTTP/1.1 upstream on one end of a bufferevent pair (u_h2 set).
 */
struct h2_cs;
struct upstream;
struct worker;
/* A stream on a pooled h2 connection to <key> with room, or NULL. */
struct upstream *h2_pool_take(struct worker *, const char *key);
/*
 * No stream with room nor pooled upstream for <key>: 1 when <c> now waits
 * for a TLS connection to <key> under way (conn_find_upstream runs again
 * once the origin's SETTINGS came, or it is HTTP/1.1 or failed); else 0,
 * and <c>'s own connection may be the one the next requests wait for.
 */
int	h2_pool_wait(struct conn *c, const char *key);
/* <c> is freed or its upstream failed: it neither waits nor is waited for. */
void	h2_pool_forget(struct conn *c);
/* c->c_up just connected: when ALPN chose h2, its TLS bufferevent
   becomes a pooled h2 connection and c_up one stream of it. 0 or -1. */
int	h2_pool_adopt(struct conn *);
/* The worker stops or drains: GOAWAY; free with no streams. */
void	h2_pool_flush(struct worker *);
/* From upstream_free: the connection is done with its stream. */
void	h2_cli_stream_gone(struct h2_cs *);

#endif
