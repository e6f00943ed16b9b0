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

#endif
