/*
 * A client connection (explicit or transparent listener) and the
 * exchange it is serving (struct xchg, pipe/xchg.h). Per request: read
 * head (llhttp) -> target, identity, policy -> the stage table's hooks
 * (pipe/stages.c, driven by conn_pipe.c) -> resolve + guard -> upstream
 * (pooled or new) -> stream request body / response back -> done hooks
 * (settle, audit) -> next request (keep-alive) or close.
 * conn_close(c, reason) is the one way a connection ends.
 */
#ifndef AIRLOCK_CONN_H
#define AIRLOCK_CONN_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "audit/aud_reasons.h"
#include "dns/net_guard.h"
#include "http/http_msg.h"
#include "pipe/xchg.h"
#include "policy/pol.h"

struct worker;
struct conn;
struct cfg;
struct cfg_sandbox;
struct cfg_policy;
struct sbx;
struct dns_synth;
struct bufferevent;
struct sec_req;
struct tls_hello;
struct sec_trip;
struct meter;
struct cfg_rule;
struct conn_slot;
struct bud_sb;
struct up_parent;
struct up_dial;
struct event;
struct h2_srv;
struct h2_stream;

/* Bytes queued towards one side before we stop reading the other. */
#define CONN_HIWAT	(256 * 1024)

enum conn_state {
	CONN_HEAD = 0,		/* reading a request head */
	CONN_BODY_BUFFER,	/* holding a body to sign it (SigV4) */
	CONN_WAIT,		/* resolving or connecting upstream */
	CONN_FORWARD,		/* request and response streaming */
	CONN_TUNNEL,		/* CONNECT / upgrade: raw bytes both ways */
	CONN_TLS_PEEK,		/* CONNECT accepted: waiting for ClientHello */
	CONN_TLS_HANDSHAKE,	/* intercepting: handshake with the client */
	CONN_CLOSING,		/* flushing the last bytes to the client */
	CONN_LINGER,		/* written and half-closed: draining input */
	CONN_TRANS_PEEK,	/* transparent: waiting for the first bytes */
	CONN_SOCKS5,		/* listen.socks5: the handshake */
};

/* Where a SOCKS5 handshake is (conn_socks5.c). */
enum conn_s5_step {
	CONN_S5_GREET = 0,
	CONN_S5_AUTH,
	CONN_S5_REQUEST,
	CONN_S5_DONE,
};

/* An upstream connection, owned by a conn or parked in the worker pool. */
struct upstream {
	TAILQ_ENTRY(upstream)	 u_entry;
	struct worker		*u_worker;
	struct bufferevent	*u_bev;
	char			 u_key[300];	/* "host:port" */
	char			 u_addr[64];	/* "IP:PORT" connected to */
	char			 u_country[3];	/* GeoIP of u_addr, "" unknown */
	uint32_t		 u_asn;		/* 0 unknown */
	int			 u_reused;	/* came from the pool */
	char			 u_via[96];	/* parent proxy URL, "" direct */
	struct up_dial		*u_dial;	/* the parent's tunnel, opening */
	struct event		*u_he_ev;	/* happy eyeballs: give way to
						   the other family */
	struct h2_cs		*u_h2;		/* a stream of a pooled h2
						   connection (h2/h2_pool.c) */
};

/*
 * The HTTP/1 side of the current request: framing and what went on the
 * wire (the exchange itself, struct xchg, holds the facts); reset per
 * request.
 */
struct conn_req {
	int		 r_connect_replied; /* "200 Connection established" */
	int		 r_keepalive;	/* client wants to keep the conn */
	int		 r_connect;	/* CONNECT tunnel */
	int		 r_upgrade;	/* websocket upgrade requested */
	int		 r_req_done;
	int		 r_resp_done;
	int		 r_resp_started;/* head written to the client */
	int		 r_rechunk;	/* chunk the body for the client */
	int		 r_close_delim;	/* the client's body ends at the close */
	int		 r_up_chunked;	/* chunk the body for the upstream */
	int		 r_retried;
	int		 r_body_too_large;
	struct evbuffer	*r_body;	/* a body held whole, or NULL */
	size_t		 r_naddrs;
	size_t		 r_next_addr;
	size_t		 r_hold;	/* bound of a held body (XS_HOLD) */
	enum aud_reason	 r_pend_why;	/* a stage refused inside the parser:
					   answered once it returns */
	enum aud_reason	 r_pend_cut;	/* its xc_cut */
	int		 r_pend_whole;	/* its xc_cut_whole */
	int		 r_reframe;	/* a stage changes the body's length */
	size_t		 r_wait_at;	/* the stage that said XS_WAIT */
	void		(*r_wait_next)(struct conn *); /* then go on here */
	int		 r_ident_wait;	/* its login waits for the fleet's
					   registry (conn_pipe_ident_wait) */
	int		 r_room_wait;	/* bytes wait for a stage's room
					   (conn_pipe_room): 1 towards the
					   client, 2 towards the upstream */
	int		 r_room_eof;	/* the upstream ended meanwhile */
	int		 r_ident_waited;
	/* last: conn_req_clear zeroes what comes before r_addrs and empties
	   r_pend_reason; r_addrs count only up to r_naddrs */
	struct net_addr	 r_addrs[8];
	char		 r_pend_reason[512];
};

struct conn {
	TAILQ_ENTRY(conn)	 c_entry;
	struct worker		*c_worker;
	struct cfg		*c_cfg;		/* reference */
	struct bufferevent	*c_bev;
	struct evbuffer		*c_pend;	/* response bytes for the client,
						   gathered within one callback
						   (conn_client_flush) */
	char			 c_client[64];	/* "IP:PORT" */
	enum conn_state		 c_state;
	struct http_msg		 c_req;
	struct http_msg		 c_resp;
	struct upstream		*c_up;
	struct dns_req		*c_dns;
	struct event		*c_timer;
	uint64_t		 c_deadline_ms;	/* for the idle timer */
	uint64_t		 c_active_ms;	/* last byte either way */
	struct sbx		*c_sbx;		/* reference: who is asking */
	const struct cfg_policy	*c_policy;	/* its policy in c_cfg, or
						   NULL when c_cfg has none
						   by that name (denied) */
	int			 c_refs;	/* frames holding it (conn_ref) */
	int			 c_feed_asked;	/* the request loop is to run
						   when the outermost frame
						   unwinds */
	int			 c_tunnel_eof;	/* a tunnel side ended */
	int			 c_tunnel_dead;	/* sides that failed */
	struct evbuffer_cb_entry *c_tunnel_drain_cb; /* watching the upstream's
						   TLS socket drain */
	int			 c_client_eof;	/* client half-closed */
	int			 c_tls;		/* intercepted session is up */
	char			 c_tls_host[256]; /* TLS server name we serve */
	int			 c_tls_port;	/* CONNECT port */
	char			 c_tls_fronting[256]; /* CONNECT host when
						   the SNI differs */
	int			 c_tls_h2_only;	/* ALPN without HTTP/1.x */
	int			 c_tls_shut;	/* close_notify sent */
	int			 c_flushed;	/* all written, socket drained */
	struct event		*c_linger_ev;	/* lingering close reads */
	struct evbuffer_cb_entry *c_under_cb;	/* watching the TLS socket
						   drain before closing */
	int			 c_closing;
	int			 c_nreq;	/* requests served */
	int			 c_transparent;	/* from listen.transparent (or
						   listen.socks5: c_socks5) */
	int			 c_socks5;	/* from listen.socks5 */
	enum conn_s5_step	 c_s5_step;
	struct net_addr		 c_s5_src;	/* the client's address */
	int			 c_trans_named;	/* c_trans_host is a name (DNS
						   stub address or SNI) */
	int			 c_trans_raw;	/* relayed as raw TCP */
	struct net_addr		 c_orig_addr;	/* SO_ORIGINAL_DST */
	int			 c_trans_port;
	char			 c_trans_host[256]; /* what policy judges */
	int			 c_tunnel_http;	/* plain HTTP inside a CONNECT
						   tunnel: c_trans_host and
						   c_trans_port are its only
						   authority (conn_connect.c) */
	int			 c_deny_tls;	/* CONNECT denied by policy: the
						   403 goes inside TLS */
	struct conn_req		 c_r;
	struct xchg		*c_x;		/* the exchange under way (HTTP/1:
						   always c_x0, queued while
						   active) */
	struct xchg		 c_x0;
	struct xchg_queue	 c_xq;
	struct event		*c_resume_ev;	/* a stage that waited resumes
						   the exchange (conn_pipe.c) */
	struct conn_slot	*c_slot;	/* not identified yet: see
						   conn_slots.h */
	int			 c_listener;	/* explicit: index in
						   c_listen_proxy; -1 else */
	struct h2_srv		*c_h2;		/* the session, once ALPN chose
						   h2 (h2/h2_srv.c) */
	struct h2_stream	*c_h2s;		/* a stream's connection
						   (conn_stream.c): its
						   stream, while both live */
	int			 c_http2;	/* an HTTP/2 stream's */
};

/* Take ownership of an accepted socket. */
/* Transparent listener (conn_transparent.c). */
void	conn_transparent_begin(struct conn *, int fd, const struct sockaddr *);
void	conn_transparent_peek(struct conn *, int timed_out);
/* A transparent connection's ClientHello (from conn_tls_peek): the host
 * it names, judged; the rule's intercept (0/1), or -1 after refusing. */
int	conn_transparent_hello(struct conn *, const struct tls_hello *);

/* The one policy judgment of the front ends (conn_policy.c): the
 * verdict (report mode, on_unmatched: ask allow with pr_rule -1), the
 * matching rule named in the exchange, x_would_deny and x_ask set. */
enum pol_verdict conn_policy_eval(struct conn *, const struct pol_request *,
	    struct pol_result *);
void	req_begin_transparent(struct conn *);
/* conn_socks5.c: listen.socks5 */
void	conn_socks5_begin(struct conn *, const struct sockaddr *);
void	conn_socks5_read(struct conn *);
void	conn_socks5_timeout(struct conn *);
extern struct dns_synth *worker_dns_synth;	/* names of stub addresses */
/* <transparent>: 0 explicit, 1 transparent, CONN_ACCEPT_SOCKS5 */
#define CONN_ACCEPT_SOCKS5	2
void	conn_accept(struct worker *, int fd, const struct sockaddr *,
	    int socklen, int transparent);
/*
 * End the connection (idempotent; deferred inside callbacks): the one way
 * a connection ends. <why> is recorded for the exchange under way unless
 * an earlier reason was (an answer, a cut); it is audited and settled.
 */
void	conn_close(struct conn *, enum aud_reason why);
/* Shutdown grace over: end every connection of <w> (conn_close). */
void	conn_close_all(struct worker *, enum aud_reason why);
/* Worker draining: close if idle between requests. */
void	conn_drain(struct conn *);
/* Free without audit (worker teardown). */
void	conn_free(struct conn *);

/* conn_facts.c */
/*
 * Before a refusal is audited: fill in the method, host, port and path
 * the current request had shown so far (a refused path as sent).
 */
void	conn_req_early_facts(struct conn *);
/*
 * Is <name> a header left out towards the upstream: X-Original-URL and
 * its kind on a rule with paths or methods (they would name another path).
 */
int	conn_header_stripped(const struct conn *, const char *name,
	    size_t len);

/* conn_reply.c */
/*
 * Answer the current request from the gateway itself with SPEC's JSON
 * error body: status and code from <why>'s row of aud_reasons.h, <reason>
 * (borrowed; NULL: the row's text) the audit's and the body's reason;
 * <close> ends the connection after it is flushed.
 */
void	conn_reply_error(struct conn *, enum aud_reason why,
	    const char *reason, int close);
void	conn_audit(struct conn *);
/* Refuse before anything was relayed or answered: audit, hang up. */
void	conn_refuse(struct conn *, const char *reason);
/* End a response under way (its head went out) with <reason> audited. */
void	conn_cut(struct conn *, const char *reason);
/* A request or tunnel idle for limits.idle_timeout: say who went quiet. */
void	conn_idle_end(struct conn *);

/* conn_upstream.c */
void	upstream_pool_put(struct worker *, struct upstream *);
struct upstream *upstream_pool_take(struct worker *, const char *key);
void	upstream_free(struct upstream *);
void	upstream_pool_flush(struct worker *);
/* Connect to c->c_r.r_addrs[r_next_addr]; results come to conn. -1
 * (errno set) when no address could even be tried. */
int	conn_upstream_connect(struct conn *);
/* conn_parent.c: the parent proxy the exchange goes through, or NULL. */
const struct up_parent *conn_via(const struct conn *);
/* Like conn_upstream_connect, through <p>. */
int	conn_parent_connect(struct conn *, const struct up_parent *p);
/* conn_upstream.c: the parent's tunnel is open, go on as connected. */
int	conn_upstream_tunnel_open(struct conn *);
/* Answer after conn_upstream_connect() returned -1: 503 overloaded when
 * errno says we ran out of descriptors, else 502 with <reason>. */
void	conn_upstream_connect_failed(struct conn *, const char *reason);

/* conn.c internals shared with the other conn_*.c files */
void	conn_upstream_ready(struct conn *);
void	conn_upstream_failed(struct conn *, enum aud_reason why,
	    const char *reason);
/*
 * A frame around a callback that may close or feed <c> (conn.c says
 * more): conn_close() under one only marks <c>; the request loop, the
 * stages' flow hook and the free run when the outermost frame unwinds.
 */
void	conn_ref(struct conn *);
void	conn_unref(struct conn *);
/* After a gateway reply: next request (keep-alive) or close. */
void	conn_request_finished(struct conn *);
void	conn_touch(struct conn *);

/* Flush what is queued for the client (TLS: and close_notify), then end. */
void	conn_close_when_flushed(struct conn *);
void	conn_deny(struct conn *, enum aud_reason why, const char *reason);
void	conn_timer_arm(struct conn *, uint64_t ms);
void	conn_bev_enable(struct bufferevent *, short what);
void	conn_bev_bound(struct bufferevent *);
void	conn_resolve(struct conn *);
void	conn_upstream_key(struct conn *, char *, size_t);

/* conn_tls.c */
/* CONNECT allowed by policy: say 200, then peek at the ClientHello. */
void	conn_tls_connect_allowed(struct conn *, int intercept);
void	conn_tls_peek(struct conn *);
void	conn_tls_handshake_event(struct conn *, short what);
void	conn_set_client_callbacks(struct conn *);
void	conn_feed_request(struct conn *);

/* conn_pipe.c: the driver of the stage table (pipe/stage.h) */
struct aud_rec;
struct usage;
struct net_addr;
/* The policy of the request head or CONNECT: 0 go on (*intercept: a
 * CONNECT's TLS is intercepted), -1 after answering a refusal. */
int	conn_pipe_policy(struct conn *, int *intercept);
/* The addresses its host resolved to: 0 go on, -1 after answering. */
int	conn_pipe_dest(struct conn *, const struct net_addr *, size_t);
/* Request head allowed by policy: 0 go on, 1 hold the body (at most
 * *hold bytes) first, -1 after answering a refusal. */
int	conn_pipe_req_head(struct conn *, size_t *hold);
/*
 * Last word before going upstream (budget admission, requests and
 * tunnels alike): 0 go on, -1 after answering, 1 when a stage waits (the
 * worker serves others meanwhile): <next> is then called once it is done.
 */
int	conn_pipe_ready(struct conn *, void (*next)(struct conn *));
/* Before the connection is freed: no stage will resume it. */
void	conn_pipe_fini(struct conn *);
/* Fleet mode: wait (the resume event, bounded by limits.store_timeout)
 * for one lookup of login <id> in the shared registry, then
 * conn_ident_resume(). 0 waiting, -1 not (refuse now). */
int	conn_pipe_ident_wait(struct conn *, const char *id);
void	conn_ident_resume(struct conn *);
/* A request body chunk (inside the parser; <eof>: the end, an empty
 * chunk): 0, or -1 when a stage refused (its first *pass bytes still go
 * on); the answer waits for conn_pipe_pending(). A stage may change the
 * bytes: *p, *len are then what goes on (the worker's, until
 * conn_pipe_req_body_end()). */
int	conn_pipe_req_body(struct conn *, const char **, size_t *, int eof,
	    size_t *pass);
/* After the bytes conn_pipe_req_body() handed back went on. */
void	conn_pipe_req_body_end(struct conn *);
/* After the parser returned: 1 after answering a refusal kept by
 * conn_pipe_req_body(), else 0. */
int	conn_pipe_pending(struct conn *);
/* The response head: 0, or -1 after answering (or cutting). */
int	conn_pipe_resp_head(struct conn *);
/* The response head built in <head> as it goes to the client: through
 * the stages' filters, then added to <out>. */
void	conn_pipe_resp_head_out(struct conn *, struct evbuffer *head,
	    struct evbuffer *out);
/* A piece of response body (inside the parser; <eof>: its end, <len> may
 * be 0) through the stages' filters and out to the client: 0, or -1 when
 * a stage ended the exchange (answered by conn_pipe_pending()). */
int	conn_pipe_resp_body(struct conn *, const char *, size_t, int eof);
/* Tunnel bytes from <in> to <out> (<up>: towards the upstream) through
 * the stages, counted in <count>: 0, -1 after ending the exchange, or 1
 * when what is left in <in> waits for a stage's room (stop reading that
 * side: conn_room_resume goes on). */
int	conn_pipe_tunnel(struct conn *, int up, struct evbuffer *in,
	    struct evbuffer *out, uint64_t *count);
/*
 * How many bytes may be read on towards the client (<up> 0) or the
 * upstream now (SIZE_MAX: no bound); 0: stop reading that way, the
 * stage's answer resumes it (r_room_wait, conn_room_resume).
 */
size_t	conn_pipe_room(struct conn *, int up);
/* The resume event after conn_pipe_room said 0: read on. */
void	conn_room_resume(struct conn *);
/* End of an event callback: the stages see the bytes that moved (the
 * budget charges them); the exchange may end here. */
void	conn_pipe_flow(struct conn *);
/* The request head being written: 1 when a stage leaves field <name>
 * out. */
int	conn_pipe_req_drop(struct conn *, const char *name, size_t nlen);
/* The request head being written to <out>: the stages' extra fields. */
void	conn_pipe_req_fields(struct conn *, struct evbuffer *out);
/* Once per exchange, from conn_audit: every stage's done hook, the
 * audit stage last (writes <r>). */
void	conn_pipe_done(struct conn *, struct aud_rec *r, struct usage *u,
	    uint64_t dur_us);



/* conn_connect.c: what follows a CONNECT besides an allowed ClientHello */
/* How long a denied CONNECT waits for the ClientHello after its 200. */
#define CONN_DENY_PEEK_MS	3000
/* A CONNECT to an IP literal in a denied network: 0, or -1 after the
 * CONNECT-level 403. */
int	conn_connect_guard(struct conn *);
/* Policy denied the CONNECT (<reason> borrowed): answer 200 and the 403
 * inside TLS, or a CONNECT-level 403 when that cannot be done. */
void	conn_connect_denied(struct conn *, const char *reason);
/* The first bytes after the 200 are not TLS: plain HTTP, or a close. */
void	conn_connect_not_tls(struct conn *);
/* The TLS handshake of a denied CONNECT ended (conn_tls_handshake_event). */
void	conn_connect_deny_handshake(struct conn *, short what);
/* The peek or handshake timer of a denied CONNECT ran out. */
void	conn_connect_deny_timeout(struct conn *);
/* conn_transparent.c: does <p> start like an HTTP/1.x request line?
 * 1 yes, 0 no, -1 not decided yet (a few more bytes will tell). */
int	conn_looks_like_http(const unsigned char *p, size_t len);
/* conn_ident.c */
/*
 * Who the request head of <c> speaks for, before any stage: the explicit
 * proxy's Proxy-Authorization or listener default (sbx/sbx_ident.c), else
 * the connection's sandbox (CONNECT, transparent) if still its. 0, -1
 * after answering (407, 503 OVERLOADED, 403), or 1: the login's id is
 * looked up in the fleet's registry first (conn_ident_resume follows).
 */
int	conn_pipe_identity(struct conn *);
/* The default sandbox of the listener <c> came in on, or NULL. */
const char *conn_listener_default(const struct conn *);
/* At start: log a warning for each listener with a default sandbox while
   other sandboxes (with tokens) exist: a client sending credentials only
   after a 407 would run as the default one there. */
void	conn_ident_warn(const struct cfg *);

/* conn_secrets.c */
struct evbuffer;
/* A splice towards a secret's host (its responses could not be scanned):
 * 1 after refusing it (403, or the connection closed when transparent). */
int	conn_sec_splice_refused(struct conn *);

/* conn_stream.c: one HTTP/2 stream served as a connection of its own */
/*
 * A connection for a stream of <parent>'s intercepted session: it reads
 * the stream's request as HTTP/1.1 from <bev> (one end of a bufferevent
 * pair, owned from now on) and answers there, judged as a request of
 * <parent>'s session (sandbox, TLS server, CONNECT port). NULL (and <bev>
 * freed) when the sandbox or the gateway is at its connection limit.
 */
struct conn *conn_stream_new(struct conn *parent, struct bufferevent *bev,
	    struct h2_stream *);

/* conn_tunnel.c */
void	conn_tunnel_start(struct conn *);
/* <bev> (client or upstream) reported <what> (EOF or error). */
void	conn_tunnel_eof(struct conn *, struct bufferevent *, short what);
void	conn_tunnel_end(struct conn *, enum aud_reason, const char *reason);
void	conn_tunnel_check(struct conn *);
/* The timer of a tunnel that is ending. */
void	conn_tunnel_timer(struct conn *);
/* Before the upstream is freed. */
void	conn_tunnel_fini(struct conn *);

#endif
