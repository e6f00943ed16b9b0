/*
 * An exchange: one request and its response, apart from the connection
 * that carries it (h2o's h2o_req_t beside h2o_conn_t, HAProxy's stream
 * beside its mux). It holds what the planes judge and what the audit
 * record says: who, where, what, the rule, how it ended, the bytes; and
 * one slot of context per stage (secrets, budget). Nothing about the
 * HTTP/1 wire (framing, keep-alive, chunking, what was written) lives
 * here: that is the connection's (conn/conn.h, struct conn_req).
 *
 * A connection keeps a queue of its exchanges: one at a time for HTTP/1,
 * several once a protocol multiplexes them.
 */
#ifndef AIRLOCK_XCHG_H
#define AIRLOCK_XCHG_H

#include <stdint.h>
#include <sys/queue.h>

#include "audit/aud_reasons.h"

struct cfg_rule;
struct sec_body;
struct sec_req;
struct sec_trip;
struct sec_ws;
struct event;
struct meter;
struct bud_sb;
struct bud_rop;
struct bud_rres;
struct sse_filt;
struct mcp_filt;
struct evbuffer;
struct decoder;
struct arr_filt;

/* The secrets stage's slot. */
struct xchg_secrets {
	struct sec_req	*s_req;		/* secrets involved, or NULL */
	struct sec_trip	*s_trip;	/* placeholders the body must not
					   carry (conn_secrets.c), or NULL */
	struct sec_body	*s_body;	/* placeholders replaced in the
					   body (sec_body.c), or NULL */
	int		 s_body_want;	/* s_body is to be made once the
					   values are known: 1 streamed,
					   2 held whole */
	int		 s_body_late;	/* body bytes were held before
					   s_body was made */
	int		 s_signed;	/* SigV4 headers added */
	size_t		 s_wait;	/* 1 + the token broker secret whose
					   mint the request waits for */
	struct event	*s_wait_ev;	/* the event it is watched with */
	struct sec_ws	*s_ws[2];	/* frames after a 101 (sec_ws.c):
					   [0] to the client, [1] upstream */
	int		 s_ws_on;	/* 0 not yet, 1 parsed, 2 raw (no
					   placeholder to watch for), 3 closed
					   (1008): nothing more goes */
};

/* The budget stage's slot. */
struct xchg_budget {
	struct meter	*b_meter;	/* usage extraction, or NULL */
	uint64_t	 b_reserved;	/* µUSD reserved by bud_admit */
	int		 b_admitted;	/* counted by the budget */
	int		 b_retry_after;	/* for 429 */
	char		 b_model[128];	/* from the request body */
	struct bud_sb	*b_sb;		/* budget entry once admitted */
	uint64_t	 b_charged_in;	/* x_bytes_in already charged */
	uint64_t	 b_charged_out;
	uint64_t	 b_room_in;	/* left under the bytes caps at the last
					   charge; UINT64_MAX: no cap */
	uint64_t	 b_room_out;
	int		 b_over;	/* a bytes cap was reached: cut;
					   1 bytes_in, 2 bytes_out */
	int		 b_llm;		/* holds an llm_concurrency slot */
	int		 b_async;	/* priced by the rule's async_usd */
	int		 b_waiting;	/* admitted, its reservation not yet
					   durable (XS_WAIT) */
	uint64_t	 b_wait_seq;	/* the ledger line it waits for */
	struct bud_rop	*b_rop;		/* Redis admission in flight */
	struct bud_rres	*b_rres;	/* its Redis reservation (lease) */
	int		 b_free;	/* metered rule, a call that reports no
					   usage: not reserved, not metered */
	/* a metered event stream (budget/bud_stream.c) */
	struct sse_filt	*b_filt;	/* events to the client, or NULL */
	struct arr_filt	*b_afilt;	/* or Gemini's JSON array, or NULL */
	struct decoder	*b_dec;		/* a compressed one, decoded */
	int		 b_dec_bad;	/* it could not be: usage unknown */
	int		 b_strip;	/* leave the usage-only chunk out */
	int		 b_cut;		/* cut at the usd cap */
	uint64_t	 b_input_est;	/* the prompt as reserved */
	uint64_t	 b_max_out;	/* its output bound, all completions */
	int		 b_was_cut;
	uint64_t	 b_cut_cost;	/* what it had cost when cut */
	/* byte grants of the Redis store (budget/bud_grant.c) */
	int		 b_grant;	/* bytes caps held by grants: 1 in,
					   2 out */
	uint64_t	 b_gin;		/* granted so far (x_bytes_in may
					   reach it) */
	uint64_t	 b_gout;
	uint64_t	 b_gleft_in;	/* the window's room left beyond, at
					   the last answer */
	uint64_t	 b_gleft_out;
	int		 b_gask;	/* asked by b_gop: 1 in, 2 out */
	int		 b_gno;		/* no room left: 1 in, 2 out */
	int		 b_gunav;	/* a grant failed: store away */
	struct bud_rop	*b_gop;		/* the next grant, asked */
	struct event	*b_gev;		/* its answer makes this active */
};

/* The mcp stage's slot (policy/pol_mcp_stage.c). */
struct xchg_mcp {
	int		 m_on;		/* a POST of an mcp rule: judged */
	int		 m_list;	/* it asks tools/list: filter back */
	struct mcp_filt	*m_filt;	/* the response's filter, or NULL */
	char		 m_method[64];	/* for the audit: "" none */
	char		 m_tool[129];
};

struct xchg {
	TAILQ_ENTRY(xchg)	 x_entry;	/* in its connection's queue */
	int			 x_queued;
	int			 x_active;	/* begun, not audited yet */
	char			 x_id[32];
	uint64_t		 x_start_us;	/* monotonic */
	uint64_t		 x_start_wall;
	char			 x_method[24];
	int			 x_port;
	char			*x_path;	/* normalised, no query */
	char			*x_query;	/* raw, without '?', or NULL */
	const char		*x_proto;	/* http | https | tunnel */
	const char		*x_tls;		/* none | intercept | splice */
	const struct cfg_rule	*x_rule_p;	/* matching rule (the conn's
						   configuration's) */
	int			 x_allowed;
	int			 x_status;
	enum aud_reason		 x_why;		/* how it ended */
	uint64_t		 x_bytes_in;	/* to the client */
	uint64_t		 x_bytes_out;	/* to the upstream */
	char			 x_country[3];	/* its GeoIP country, or "" */
	uint32_t		 x_asn;		/* its AS number, 0 unknown */
	int			 x_resp_done;	/* the response reached its
						   end (set for done) */
	int			 x_ask;		/* held for an operator
						   (policy/pol_ask.c) */
	uint64_t		 x_ask_id;	/* its hold, 0 before */
	/* a stage's own answer to its refusal, in place of the gateway's
	   JSON (an MCP tool refused: JSON-RPC errors), or NULL */
	struct evbuffer		*x_answer;
	const char		*x_answer_type;	/* its Content-Type */
	int			 x_answer_status;
	unsigned		 x_quiet;	/* XS_W_* hooks no stage
						   needs (xs_run_quiet) */
	/* the flow walk waits until x_bytes_in + x_bytes_out reach it
	   (xs_run_flow's xc_flow_at); a stage whose state changes between
	   walks sets it to 0 */
	uint64_t		 x_flow_at;
	int			 x_req_reframe;	/* a stage changes the request
						   body's length (req_body):
						   it goes upstream chunked */
	struct xchg_secrets	 x_sec;
	struct xchg_budget	 x_bud;
	struct xchg_mcp		 x_mcp;
	/*
	 * The strings, last and from x_host on: xchg_clear empties each
	 * one (XCHG_TEXT_CLEAR) rather than zeroing 2 KiB per request,
	 * which was a measurable share of a keep-alive request's CPU. So
	 * nothing may read one past its NUL.
	 */
	char			 x_host[256];	/* normalised */
	char			 x_rule[128];	/* "policy#index" */
	char			 x_reason[512];	/* the audit's reason text */
	char			 x_upstream[64];/* "IP:PORT" connected to */
	char			 x_via[96];	/* parent proxy URL, or "" */
	char			 x_would_deny[256]; /* report mode: what
						   the allowlist refused */
	char			 x_hint[768];	/* the allowlist refused it:
						   the rule that would allow
						   it (pol_rule_hint) */
};

/* every string of the tail section "" (xchg_clear) */
#define XCHG_TEXT_CLEAR(x) do {						\
	(x)->x_host[0] = (x)->x_rule[0] = (x)->x_reason[0] = '\0';	\
	(x)->x_upstream[0] = (x)->x_via[0] = '\0';			\
	(x)->x_would_deny[0] = (x)->x_hint[0] = '\0';			\
} while (0)

TAILQ_HEAD(xchg_queue, xchg);

#endif
