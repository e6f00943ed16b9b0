/* Between the files of the HTTP/2 plane; not for the others. */
#ifndef AIRLOCK_H2_INTERNAL_H
#define AIRLOCK_H2_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <nghttp2/nghttp2.h>

#include "http/http_msg.h"

struct bufferevent;
struct conn;
struct event;
struct evbuffer;

#define H2_STREAM_WINDOW (128 * 1024)	/* our initial window per stream */
#define H2_CONN_WINDOW	(1024 * 1024)	/* and for the whole connection */
#define H2_STREAM_BUF	(64 * 1024)	/* response bytes held per stream
					   before its connection is not read */
#define H2_HDR_FATAL	4		/* a header list past this many times
					   limits.header_bytes ends the
					   connection (HPACK bomb) */

/* the request pseudo-headers a stream keeps (nghttp2 refuses repeats) */
enum { H2_PS_METHOD, H2_PS_PATH, H2_PS_AUTH, H2_PS_SCHEME, H2_PS_N };

struct h2_stream {
	TAILQ_ENTRY(h2_stream)	 s_entry;
	struct h2_srv		*s_srv;
	int32_t			 s_id;
	struct conn		*s_conn;	/* its connection, or NULL */
	struct bufferevent	*s_bev;		/* our end of their pair */
	struct evbuffer		*s_pseudo;	/* pseudo-header values, */
	size_t			 s_ps_off[H2_PS_N]; /* where each starts */
	size_t			 s_ps_len[H2_PS_N]; /* 0: absent */
	struct evbuffer		*s_fields;	/* the others, HTTP/1 lines */
	struct evbuffer		*s_cookie;	/* crumbs joined with "; ", or
						   NULL (none yet) */
	size_t			 s_hdr_bytes;	/* as SETTINGS counts them */
	int			 s_hdr_over;	/* past limits.header_bytes */
	int			 s_has_cl;
	int			 s_has_host;
	int			 s_chunked;	/* body chunked to the conn */
	int			 s_head_sent;
	int			 s_req_done;	/* END_STREAM received */
	int			 s_client_rst;	/* RST_STREAM received */
	size_t			 s_unacked;	/* DATA written, not consumed */
	struct http_msg		 s_resp;	/* what the conn answers */
	int			 s_resp_started;
	int			 s_head_out;	/* this message's head went */
	int			 s_grpc;	/* content-type application/grpc */
	int			 s_grpc_deny;	/* a gateway answer to reshape */
	int			 s_grpc_only;	/* Trailers-Only: HEADERS ended
						   the stream */
	int			 s_resp_done;
	int			 s_deferred;	/* the data source waits */
	int			 s_gone;	/* the conn went away */
	int			 s_dead;	/* reset by us */
	struct evbuffer		*s_out;		/* body for DATA frames */
};

TAILQ_HEAD(h2_streams, h2_stream);

struct h2_srv {
	struct conn		*h_conn;
	nghttp2_session		*h_sess;
	struct h2_streams	 h_streams;
	size_t			 h_nstreams;
	uint64_t		 h_nopened;	/* streams ever opened */
	uint64_t		 h_ndata;	/* DATA frames we sent */
	uint64_t		 h_nwu;		/* WINDOW_UPDATEs received */
	struct event		*h_kick;	/* streams to look at, then send */
	struct event		*h_idle;
	uint64_t		 h_active_ms;
	int			 h_in_recv;
	int			 h_ending;
	int			 h_rd_off;	/* reading stopped: output full */
};

/* h2_srv.c */
/* Look at the streams and send, from the loop (not inside nghttp2). */
void	h2_srv_kick(struct h2_srv *);

/* h2_stream.c */
/*
 * A DATA frame's bytes (at most <len>) from <out>, a body fed by <bev>
 * (its reading paused above H2_STREAM_BUF, resumed below half of it:
 * then *resumed, the caller kicks its session). NGHTTP2_DATA_FLAG_EOF in
 * *flags once <out> is empty and the body <done>; NGHTTP2_ERR_DEFERRED
 * when there is nothing yet, with *deferred set (h2_body_resume). Both
 * planes' data read callbacks.
 */
ssize_t	h2_body_read(struct evbuffer *out, uint8_t *buf, size_t len,
	    int done, struct bufferevent *bev, uint32_t *flags, int *deferred,
	    int *resumed);
/* More of stream <id>'s body is there: its data source, *deferred, is
 * asked again (and *deferred cleared). */
void	h2_body_resume(nghttp2_session *, int32_t id, int *deferred);
struct h2_stream *h2_stream_new(struct h2_srv *, int32_t id);
/* Its connection ends now, <why> recorded when its exchange is open
 * (NULL: it ended well); a stream held for approval says it left. */
void	h2_stream_conn_end(struct h2_stream *, const char *why);
/* The stream closed (or the session ends): its conn ends, it is freed. */
void	h2_stream_free(struct h2_stream *, const char *why);
/* A request header: 0, or an nghttp2 error for the callback. */
int	h2_stream_header(struct h2_stream *, const uint8_t *name, size_t nlen,
	    const uint8_t *value, size_t vlen);
/* The request head is complete: hand it to a connection. */
void	h2_stream_head_done(struct h2_stream *, int end_stream);
void	h2_stream_data(struct h2_stream *, const uint8_t *, size_t);
/* END_STREAM from the client. */
void	h2_stream_req_end(struct h2_stream *);
/* Read what its connection answered into the stream. */
void	h2_stream_poll(struct h2_stream *);
/* Its connection's end of the pair drained: credit the window. */
void	h2_stream_drained(struct h2_stream *);

/* The client side towards an h2 origin (h2_cli.c, h2_pool.c). */
#define H2_CLI_MAX_STREAMS 100		/* ours per upstream connection,
					   below the origin's own limit */
struct h2_cli;
struct upstream;
struct worker;

struct h2_cs {				/* one request's stream */
	TAILQ_ENTRY(h2_cs)	 cs_entry;
	struct h2_cli		*cs_cli;
	struct upstream		*cs_up;		/* the conn's, or NULL */
	int32_t			 cs_id;		/* 0 until submitted */
	struct bufferevent	*cs_bev;	/* our end of the pair */
	struct http_msg		 cs_req;	/* what the conn writes */
	struct evbuffer		*cs_out;	/* request body for DATA */
	size_t			 cs_unacked;	/* answer DATA not taken */
	int			 cs_status;
	int			 cs_has_cl;
	int			 cs_chunked;	/* answer chunked to the conn */
	int			 cs_head_done;	/* final answer head went */
	int			 cs_resp_done;
	int			 cs_req_done;
	int			 cs_deferred;
	int			 cs_closed;	/* the stream closed */
};

struct h2_cli {				/* one upstream h2 connection */
	TAILQ_ENTRY(h2_cli)	 hc_entry;
	struct worker		*hc_worker;
	struct bufferevent	*hc_bev;	/* TLS */
	nghttp2_session		*hc_sess;
	TAILQ_HEAD(, h2_cs)	 hc_streams;
	size_t			 hc_nstreams;
	uint64_t		 hc_nopened;
	struct event		*hc_kick;
	struct event		*hc_idle;
	char			 hc_key[300];
	char			 hc_addr[64];
	char			 hc_country[3];
	uint32_t		 hc_asn;
	char			 hc_via[96];
	int			 hc_goaway;	/* no new streams */
	int			 hc_settled;	/* the origin's SETTINGS came */
	int			 hc_dead;	/* the connection is over */
	int			 hc_freeing;
	int			 hc_in_recv;
	int			 hc_rd_off;
};

/* h2_cli.c */
struct h2_cli	*h2_cli_new(struct worker *, struct bufferevent *tls);
void	h2_cli_free(struct h2_cli *);
void	h2_cli_kick(struct h2_cli *);
void	h2_cli_goaway(struct h2_cli *);
int	h2_cli_has_room(struct h2_cli *);
/* <h>'s SETTINGS came, or it ended: who waits for it looks again. */
void	h2_pool_ready(struct h2_cli *);
struct h2_cs *h2_cs_new(struct h2_cli *, struct bufferevent **up);
void	h2_cs_free(struct h2_cs *);
/* h2_pool.c: the session has no stream left, or is over */
void	h2_pool_idle(struct h2_cli *);

#endif
