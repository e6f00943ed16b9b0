/*
 * The request pipeline as a table: each stage is a set of hooks on one
 * exchange (nginx's phase handlers, HAProxy's struct flt_ops), walked in
 * order by the driver (conn/conn_pipe.c), which alone answers the client
 * and ends the exchange. A hook sees the exchange and what the connection
 * lends it for the call (struct xs_call), never the connection itself,
 * and returns a verdict:
 *
 *	XS_GO	go on to the next stage
 *	XS_DENY	refuse: xc_why and xc_reason say why (the driver answers)
 *	XS_HOLD	request head only: hold the whole body, at most xc_hold
 *		bytes, before the exchange goes on (SigV4 signs it, the
 *		meter reads it)
 *	XS_WAIT	req_ready only: the stage finishes later and resumes the
 *		exchange through an event (xc_resume); the walk then
 *		starts again at that stage (the budget's durable
 *		reservation, an approval hold); xc_wait_ms bounds the wait
 *
 * Hooks, in the order an exchange meets them (NULL: not interested):
 *	req_policy	the request head (or CONNECT) is parsed and its
 *			sandbox known: may it go? (the policy; xc_close on
 *			a refusal that ends the connection, xc_intercept
 *			for a CONNECT that is allowed)
 *	req_head	the request head is parsed and policy allowed it
 *	req_ready	head (and held body) complete: last word before the
 *			request goes upstream (budget admission)
 *	req_drop	the request head goes upstream: 1 to leave out
 *			its field <name> (the stage may put its own in
 *			through req_fields)
 *	dest		the host resolved to xc_addrs: may it go there?
 *			(the destination guard, the policy's countries)
 *	req_fields	the request head goes upstream: add fields to it
 *			through xc_add_field (the driver writes them)
 *	req_body	a chunk of a streamed request body (observe, or
 *			refuse: the chunk's first xc_pass bytes still go
 *			on, then the exchange ends as a filter's does), or
 *			change it: what goes on instead is written to
 *			xc_body_out and xc_rewrote set (the later stages
 *			see that); a stage that keeps bytes back releases
 *			them on the last call, xc_eof with an empty chunk
 *			(a stage that changes the body's length sets
 *			x_req_reframe on the head: it goes chunked)
 *	resp_head	the upstream's response head; a stage that will
 *			change the body's length sets xc_reframe
 *	resp_head_out	the response head as it goes to the client, one
 *			piece (status line and fields): a filter (below)
 *	resp_body	the response body: a filter (below)
 *	room		before bytes are read on to move towards the
 *			client (up 0: a response body, tunnel bytes) or the
 *			upstream (up 1): how many may move now; SIZE_MAX
 *			for no bound, 0 to wait: the driver stops reading
 *			that way until the stage makes the event xc_resume
 *			gave it active (the budget's byte grants)
 *	flow		bytes moved (x_bytes_in / x_bytes_out grew): once
 *			per event, outside any parser (charging). A hook
 *			that has nothing to do until more bytes moved says
 *			so in xc_flow_at (the exchange's byte count it next
 *			needs); the driver skips the flow walk until every
 *			flow hook's count is reached (xchg.x_flow_at)
 *	done		once, before the audit record is written; fills it
 *
 * In a tunnel (a CONNECT splice, a transparent splice, a WebSocket after
 * its 101; xc_tunnel) the bytes towards the upstream go through req_body
 * and those towards the client through resp_body.
 *
 * A filter (resp_head_out, resp_body) streams: it is handed <in>, what
 * the stages before it let through, and an empty <out>. It either leaves
 * <in> alone and writes nothing (it observed: the bytes go on as they
 * are), or takes from <in> and writes what goes on to <out>; what it
 * leaves in <in> then goes on after <out>. It may keep back a bounded
 * tail of its own (a scanner's partial match) and must release it on
 * the last call, xc_eof, whose <in> may be empty. XS_DENY ends the
 * exchange: what reached <out> still passes the later stages and goes to
 * the client, then the driver answers (nothing went back yet) or cuts
 * the stream, audited with xc_cut's text when the stage set it.
 */
#ifndef AIRLOCK_STAGE_H
#define AIRLOCK_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "audit/aud_reasons.h"

struct aud_rec;
struct cfg;
struct cfg_policy;
struct event;
struct evbuffer;
struct http_msg;
struct net_addr;
struct usage;
struct xchg;

enum xs_verdict {
	XS_GO = 0,
	XS_DENY,
	XS_HOLD,
	XS_WAIT,
};

/* What one hook call sees; the driver fills it from the connection. */
struct xs_call {
	struct xchg		*xc_x;
	const struct cfg	*xc_cfg;	/* the exchange's config */
	const struct cfg_policy	*xc_policy;	/* the sandbox's, or NULL */
	const char		*xc_sandbox;	/* its id, or NULL */
	struct http_msg		*xc_req;	/* the request head */
	struct http_msg		*xc_resp;	/* the response head */
	struct evbuffer		**xc_body;	/* the held body (a stage may
						   replace it), or NULL */
	struct evbuffer		*xc_scratch;	/* a worker buffer to borrow */
	int			 xc_tls;	/* upstream over verified TLS */
	int			 xc_upgrade;	/* a WebSocket upgrade asked */
	int			 xc_tunnel;	/* a CONNECT or transparent
						   tunnel, or the bytes after
						   a 101: not a request */
	int			 xc_eof;	/* resp_body, req_body: the
						   last call */
	struct evbuffer		*xc_body_out;	/* req_body: room for what
						   goes on instead */
	struct evbuffer		*xc_body_spare;	/* req_body: the driver's
						   second buffer (both NULL:
						   the bytes cannot change) */
	int			 xc_rewrote;	/* req_body: it did */
	struct evbuffer		*xc_back;	/* req_body in a tunnel: bytes
						   for the client (a close
						   frame), or NULL */
	const struct net_addr	*xc_addrs;	/* dest: the addresses */
	size_t			 xc_naddrs;
	struct aud_rec		*xc_rec;	/* done: the record to fill */
	struct usage		*xc_usage;	/* done: room for the usage */
	uint64_t		 xc_dur_us;	/* done: the exchange's time */
	/* flow: x_bytes_in + x_bytes_out below which the hook has nothing
	   to do; 0 on entry (call it every time), which a hook may raise */
	uint64_t		 xc_flow_at;
	/* req_ready: the event to make active to resume a stage that says
	   XS_WAIT (made on first use); NULL only without an event loop (a
	   unit test's fake exchange: the stage blocks instead) */
	struct event		*(*xc_resume)(struct xs_call *);
	void			*xc_driver;	/* the driver's */
	size_t			 xc_at;		/* where the walk starts (and,
						   after XS_WAIT, stopped) */
	/* req_fields: add "name: value" to the head going upstream (a name
	   or value with CR, LF or NUL is dropped) */
	void			(*xc_add_field)(struct xs_call *,
				    const char *name, const char *value);
	void			*xc_fields;	/* the driver's */
	/* out */
	enum aud_reason		 xc_why;	/* XS_DENY */
	int			 xc_close;	/* XS_DENY: close after it */
	int			 xc_intercept;	/* req_policy of a CONNECT:
						   its TLS is intercepted */
	size_t			 xc_hold;	/* XS_HOLD: the bound */
	uint64_t		 xc_wait_ms;	/* XS_WAIT: the bound, 0 = the
						   connect timeout */
	size_t			 xc_pass;	/* XS_DENY of req_body: bytes
						   of the chunk that go on */
	enum aud_reason		 xc_cut;	/* XS_DENY once the answer
						   began: the audit's reason
						   is this row's text (else
						   xc_reason) */
	int			 xc_reframe;	/* resp_head: the body's
						   length will change */
	int			 xc_cut_whole;	/* with xc_cut, of resp_body:
						   what reached <out> is a
						   whole body (the stage ended
						   it): its end goes out, then
						   the connections close */
	char			 xc_reason[512];
};

struct xstage {
	const char	*xs_name;
	enum xs_verdict	(*xs_req_policy)(struct xs_call *);
	enum xs_verdict	(*xs_req_head)(struct xs_call *);
	enum xs_verdict	(*xs_req_ready)(struct xs_call *);
	int		(*xs_req_drop)(struct xs_call *, const char *name,
			    size_t nlen);
	void		(*xs_req_fields)(struct xs_call *);
	enum xs_verdict	(*xs_req_body)(struct xs_call *, const char *,
			    size_t);
	enum xs_verdict	(*xs_dest)(struct xs_call *);
	enum xs_verdict	(*xs_resp_head)(struct xs_call *);
	enum xs_verdict	(*xs_resp_head_out)(struct xs_call *,
			    struct evbuffer *in, struct evbuffer *out);
	enum xs_verdict	(*xs_resp_body)(struct xs_call *,
			    struct evbuffer *in, struct evbuffer *out);
	size_t		(*xs_room)(struct xs_call *, int up);
	enum xs_verdict	(*xs_flow)(struct xs_call *);
	void		(*xs_done)(struct xs_call *);
	/* after the response head: which of its per-chunk hooks (XS_W_*)
	   this exchange still needs; NULL: all it has */
	unsigned	(*xs_watch)(struct xs_call *);
};

/* The per-chunk hooks, as bits (xs_watch, xchg.x_quiet). */
#define XS_W_RESP_BODY	0x1u
#define XS_W_ROOM	0x2u
#define XS_W_FLOW	0x4u
#define XS_W_ALL	(XS_W_RESP_BODY | XS_W_ROOM | XS_W_FLOW)

/* The stages, each in its plane (src/pipe/stages.c lists them). */
extern const struct xstage pol_stage;	/* policy/pol_stage.c */
extern const struct xstage geo_stage;	/* geo/geo_stage.c */
extern const struct xstage mcp_stage;	/* policy/pol_mcp_stage.c */
extern const struct xstage ask_stage;	/* policy/pol_ask_stage.c */
extern const struct xstage sec_stage;	/* secrets/sec_stage.c */
extern const struct xstage bud_stage;	/* budget/bud_stage.c */
extern const struct xstage aud_stage;	/* audit/aud_stage.c */
#ifdef AIRLOCK_TEST_STAGE
extern const struct xstage test_stage;	/* tests/harness/stage_stamp.c */
#endif

/* The table, in order, NULL-terminated. */
extern const struct xstage *const xs_table[];

enum xs_hook {
	XS_REQ_POLICY = 0,
	XS_REQ_HEAD,
	XS_DEST,
	XS_REQ_READY,
	XS_RESP_HEAD,
};

enum xs_filter {
	XS_F_RESP_HEAD_OUT = 0,
	XS_F_RESP_BODY,
};

/*
 * Walk <hook> of every stage in order until one does not say XS_GO;
 * XS_HOLD is remembered (the smallest bound wins) and the walk goes on,
 * so every stage sees the head. Returns XS_GO, XS_HOLD, or the first
 * XS_DENY / XS_WAIT (xc_why, xc_reason set by that stage). The walk
 * starts at stage xc_at; after XS_WAIT xc_at is the stage that waits,
 * called again (same hook) when the exchange resumes.
 */
enum xs_verdict	xs_run(const struct xstage *const *tbl, enum xs_hook hook,
		    struct xs_call *);
/*
 * A request body chunk through every stage: XS_GO or the first refusal.
 * With xc_body_out and xc_body_spare given (empty), stages may change it:
 * xc_rewrote is then set and xc_body_out holds what goes on (xc_pass of a
 * refusal counts in those bytes).
 */
enum xs_verdict	xs_run_req_body(const struct xstage *const *tbl,
		    struct xs_call *, const char *, size_t);
/*
 * Bytes through filter <f> of every stage (see above): <in> holds them,
 * <spare> is empty; on return *<res> is the one of the two that holds
 * what goes on, the other is empty. XS_GO, or the first XS_DENY (every
 * later stage still filtered what went on).
 */
enum xs_verdict	xs_run_filter(const struct xstage *const *tbl,
		    enum xs_filter f, struct xs_call *, struct evbuffer *in,
		    struct evbuffer *spare, struct evbuffer **res);
void		xs_run_done(const struct xstage *const *tbl, struct xs_call *);
/* Bytes moved: every flow hook, until one refuses (XS_DENY). Called as
 * often as bytes move, so it walks the flow hooks alone. After XS_GO,
 * xc_flow_at is the least byte count any of them asked for (0: call
 * again at once). */
enum xs_verdict	xs_run_flow(const struct xstage *const *tbl, struct xs_call *);
/* The least room hook of any stage says (SIZE_MAX: none bounds it). */
size_t		xs_run_room(const struct xstage *const *tbl, struct xs_call *,
		    int up);
void		xs_run_req_fields(const struct xstage *const *tbl,
		    struct xs_call *);
/*
 * The per-chunk hooks (XS_W_*) that no stage needs for the rest of the
 * exchange, asked once its response head went through: the driver skips
 * their walks (HAProxy's filters register for data the same way).
 */
unsigned	xs_run_quiet(const struct xstage *const *tbl, struct xs_call *);
/* Does any stage leave field <name> of the request head out? */
int		xs_run_req_drop(const struct xstage *const *tbl,
		    struct xs_call *, const char *name, size_t nlen);
/* A refusal, for a hook: sets xc_why and the reason text; XS_DENY. */
enum xs_verdict	xs_deny(struct xs_call *, enum aud_reason why,
		    const char *fmt, ...)
		    __attribute__((format(printf, 3, 4)));

#endif
