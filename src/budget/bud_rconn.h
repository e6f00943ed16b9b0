/*
 * The Redis store's connection and operations, shared by bud_redis.c
 * (admission, settlement, leases) and bud_rgrant.c (byte grants). Not
 * for use outside src/budget/.
 */
#ifndef AIRLOCK_BUD_RCONN_H
#define AIRLOCK_BUD_RCONN_H

#include <sys/queue.h>

#include <stdint.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "budget/bud.h"

/* The scripts (bud_rscript.h), by their SHA-1 (bud_rc_sha). */
enum { BRS_ADMIT = 0, BRS_SETTLE, BRS_RENEW, BRS_GRANT, BRS_N };

/* An operation waiting for its reply: an admission, or a byte grant. */
struct bud_rop {
	TAILQ_ENTRY(bud_rop)	 o_entry;	/* brc_ops: oldest first */
	struct brc		*o_brc;
	struct event		*o_ev;		/* resume; NULL: abandoned */
	uint64_t		 o_deadline;	/* monotonic ms */
	int			 o_done;
	enum bud_verdict	 o_v;
	int			 o_retry;
	char			 o_why[96];
	struct bud_rres		*o_res;		/* the reservation made */
	struct bud_rres		*o_gres;	/* a grant's (borrowed; NULL
						   once abandoned) */
	int			 o_has_grant;	/* o_grant says what came */
	struct bud_grant	 o_grant;
};

/* A live reservation: renewed until settled. */
struct bud_rres {
	TAILQ_ENTRY(bud_rres)	 r_entry;
	char			*r_key;		/* airlock:{S} */
	char			 r_id[48];
	uint64_t		 r_win_ms;
	int			 r_linked;
	int			 r_gflags;	/* bytes granted: 1 in, 2 out */
};

/* A settlement waiting for a connection. */
struct brc_settle {
	TAILQ_ENTRY(brc_settle)	 s_entry;
	char			*s_key;
	char			 s_id[48];
	uint64_t		 s_win_ms, s_cost, s_in, s_out;
	int			 s_gflags;
};

TAILQ_HEAD(bud_rop_q, bud_rop);
TAILQ_HEAD(bud_rres_q, bud_rres);
TAILQ_HEAD(brc_settle_q, brc_settle);

/* A worker's connection. */
struct brc {
	struct event_base	*c_base;
	redisAsyncContext	*c_ac;		/* NULL: down */
	int			 c_up;		/* connected */
	int			 c_drop;	/* free c_ac from the tick */
	int			 c_late;	/* dropping it: too slow */
	uint64_t		 c_backoff;
	uint64_t		 c_retry_at;	/* monotonic ms */
	struct event		*c_tick;
	uint64_t		 c_renew_at;
	struct bud_rop_q	 c_ops;
	struct bud_rres_q	 c_res;
	struct brc_settle_q	 c_settles;
	size_t			 c_nsettles;
	size_t			 c_inflight;	/* commands without a reply */
};

/* This worker's connection, made on first use on <base>. */
struct brc	*bud_rc_get(struct event_base *base);
/* Queue a command; its callback runs once (NULL reply on failure). */
void		 bud_rc_cmd(struct brc *, redisCallbackFn *fn, void *arg,
		    int argc, const char **argv);
/* A new operation on <c> resuming <ev>, waiting for its reply (deadline
 * store_timeout), or answered BUD_UNAVAILABLE at once when <c> is down
 * (o_done set: nothing to send). */
struct bud_rop	*bud_rc_op_new(struct brc *c, struct event *ev);
/* The answer came (or cannot): <ev> made active, or an abandoned one
 * freed. */
void		 bud_rc_op_finish(struct bud_rop *, int v);
/* An operation's reply was no answer of ours: BUD_UNAVAILABLE's text
 * (and the connection dropped after a script error). */
void		 bud_rc_op_failed(struct bud_rop *, struct brc *,
		    const redisReply *r, const char *what);
const char	*bud_rc_sha(int script);
uint64_t	 bud_rc_lease_ms(void);
/* "-1" without a cap, else <v>. */
void		 bud_rc_cap_arg(char *dst, size_t dstsz, int has, uint64_t v);

#endif
