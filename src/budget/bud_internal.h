/*
 * The budget's per-sandbox state, shared by bud.c (counters, caps,
 * ledger) and bud_flow.c (bytes charged in flight, LLM concurrency).
 * Not for use outside src/budget/.
 */
#ifndef AIRLOCK_BUD_INTERNAL_H
#define AIRLOCK_BUD_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "budget/bud.h"

struct cfg_caps;

struct bud_sb {
	struct bud_sb		*sb_next;	/* hash chain */
	char			*sb_id;
	char			*sb_esc;	/* as in the ledger */
	pthread_mutex_t		 sb_lock;
	struct bud_counters	 sb_c;	/* its window in sb_ws_ms */
	uint64_t		 sb_ws_ms;	/* window start, 0: none */
	uint64_t		 sb_win_ms;	/* window length last seen */
	int			 sb_win_known;	/* sb_win_ms is set */
	/* Rate bucket; one token is sb_rate_ms units, n units/ms refill. */
	uint32_t		 sb_rate_n;
	uint64_t		 sb_rate_ms;
	uint64_t		 sb_tok;
	uint64_t		 sb_tok_ms;	/* last refill, monotonic */
	/* Counted but not yet in the ledger. */
	uint64_t		 sb_d_in;
	uint64_t		 sb_d_out;
	uint64_t		 sb_d_req;
	/* Metered requests in flight (caps.llm_concurrency). */
	uint64_t		 sb_llm;
	/* Spend by model and day (usage_tab.c), NULL while empty. */
	struct bud_use		*sb_use;
};

/* The sandbox <id>, created (empty, lifetime) if <create>; else NULL.
 * Entries live until bud_close(). */
struct bud_sb	*bud_find(const char *id, int create);
/* The table's lock; bud_tab_each() walks every entry with it held. */
void		 bud_tab_lock(void);
void		 bud_tab_unlock(void);
void		 bud_tab_each(void (*fn)(struct bud_sb *, void *), void *);
/* Forget every sandbox (bud_close). */
void		 bud_table_free(void);
/* Move to the window starting at <ws> (ms, 0 = lifetime); sb_lock held
 * (or replay, alone). */
void		 bud_roll(struct bud_sb *, uint64_t ws);
/* Roll to the current window of the last caps seen; sb_lock held. */
void		 bud_roll_known(struct bud_sb *);
/* Roll under <caps> (NULL: lifetime) and remember its window; locked. */
void		 bud_roll_caps(struct bud_sb *, const struct cfg_caps *);
/* Milliseconds for the rate bucket (a test clock when set). */
uint64_t	 bud_mono_ms(void);
/*
 * Queue one ledger line (printf format, ending in "\n"), with the
 * sandbox's lock held so its lines keep their order; its sequence number
 * for bud_led_wait(), 0 without a ledger.
 */
uint64_t	 bud_led_queue(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
/* Milliseconds since the epoch (a test clock when set). */
uint64_t	 bud_wall_ms(void);
/* A sandbox id or model name as a ledger field (%XX), malloc'ed; and
 * back, in place (-1 if malformed). */
char		*bud_escape(const char *);
int		 bud_unescape(char *);

/* ---- the breakdown by model and day (usage_tab.c); sb_lock held ---- */

/* Add <d> to its (day, model) row. */
void		 bud_use_add(struct bud_sb *, const struct bud_use_row *);
void		 bud_use_clear(struct bud_sb *);
/* Replay one U ledger line split into its <n> fields (f[0] is "U"): 0, or
 * -1 if malformed. No lock needed: replay runs alone. */
int		 bud_use_replay(char **f, int n);
/* The U ledger lines of every row (compaction), or of one delta. */
void		 bud_use_lines(const struct bud_sb *,
		    void (*emit)(void *, const char *line), void *);
void		 bud_use_line(const struct bud_sb *, const struct bud_use_row *,
		    void (*emit)(void *, const char *line), void *);

/* Wait until line <seq> is durable: 0, or -1 if the ledger failed. */
int		 bud_led_wait(uint64_t seq);

/* ---- byte grants of the Redis store (bud_grant.c) ----------------- */

/* A byte grant's size (the first comes with the admission). */
#define BUD_GRANT_CHUNK	(64 * 1024)

struct event;
/* Admitted with <g> (NULL: none came) under <caps>, answers making <ev>
 * active: the bytes caps of <caps> are held by grants from here on. */
void	 bud_grant_begin(struct xchg *, const struct cfg_caps *caps,
	    const struct bud_grant *g, struct event *ev);
/* Bytes direction <up> may still move within its grants (the next
 * chunk asked when low); UINT64_MAX when no grant holds that way. */
uint64_t bud_grant_room(struct xchg *, const struct cfg_caps *, int up);
/* No more comes that way: the window is spent, or the store away. */
int	 bud_grant_final(const struct xchg *, int up);
/* bud_grant_room plus what the window had left at the last answer. */
uint64_t bud_grant_fleet_room(struct xchg *, const struct cfg_caps *,
	    int up);
/* The exchange ends: a grant still asked is abandoned. */
void	 bud_grant_end(struct xchg *);
struct xs_call;
/* bud_xchg_allow for a body piece or tunnel bytes of <xc>, keeping room
 * for an HTTP body's framing while grants hold. */
size_t	 bud_grant_allow(struct xs_call *, int up, size_t len);
/* The stage's room hook (pipe/stage.h): what the grants let be read on;
 * 0 while the next is on its way. */
size_t	 bud_grant_room_hook(struct xs_call *, int up);

/* ---- metered event streams (bud_stream.c) ------------------------- */

struct xs_call;
struct xchg;
struct evbuffer;
struct req_facts;
/* At admission: strip the usage-only chunk, cut at the cap? <input> and
 * <out> are the prompt and output bound reserved. */
void	bud_stream_plan(struct xs_call *, const struct req_facts *,
	    int stream, uint64_t input, uint64_t out);
/* The request must ask for identity (the filter reads what is sent). */
int	bud_stream_identity(const struct xchg *);
/* The response head: filter an event stream (xc_reframe); 1 when it is
 * compressed and decoded here (the meter then reads identity). */
int	bud_stream_head(struct xs_call *, int sse);
/* The body through the filter: XS_GO, or XS_DENY at the usd cap. */
enum xs_verdict bud_stream_body(struct xs_call *, struct evbuffer *in,
	    struct evbuffer *out);
/* 1 while the body goes through a filter (bud_stream_body). */
int	bud_stream_filtered(const struct xchg *);
/* The filters and decoder, freed (done). */
void	bud_stream_free(struct xchg *);
/* 1 with *cost when the stream was cut at the cap. */
int	bud_stream_cost(const struct xchg *, uint64_t *cost);

#endif
