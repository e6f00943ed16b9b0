/*
 * Cost plane: usage metering (meter.c, pure), pricing (price.c, pure),
 * and per-sandbox counters, caps, reservations and the durable ledger
 * (bud.c). Money is integer micro-dollars (µUSD) end to end.
 */
#ifndef AIRLOCK_BUD_H
#define AIRLOCK_BUD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cfg;
struct cfg_caps;

/* ---- metering (meter.c) -------------------------------------------- */

enum meter_dialect {
	METER_NONE = 0,
	METER_OPENAI,
	METER_ANTHROPIC,
	METER_GEMINI,
};

struct usage {
	char		u_model[128];	/* "" when not reported */
	uint64_t	u_input;	/* every prompt token: cached and
					   cache-written included */
	uint64_t	u_cached;	/* cache reads */
	uint64_t	u_cache_write;	/* cache creation (Anthropic) */
	uint64_t	u_output;	/* reasoning included */
	int		u_found;	/* usage was reported */
	int		u_partial;	/* some was, not the whole bill
					   (meter_finish): u_found 0 */
};

struct meter;

/*
 * An incremental usage extractor for one response body. <sse> when the
 * response is text/event-stream, else a JSON body (read as it streams by
 * a yajl scanner that builds no tree, bounded by <max_json> bytes, 64
 * levels and a fixed memory budget; beyond them metering gives up and
 * u_found stays 0). Feed any split of the body.
 * OpenAI: chat completions, completions, embeddings ("usage": prompt/
 * completion tokens, prompt_tokens_details.cached_tokens), Responses API
 * (input/output tokens, input_tokens_details.cached_tokens; in SSE the
 * "response.completed" event's response.usage); streams: the final chunk
 * with "usage". Anthropic: messages ("usage": input_tokens, output_tokens,
 * cache_creation_input_tokens, cache_read_input_tokens; input counted as
 * input + cache creation + cache read), streams: message_start's
 * message.usage plus message_delta's usage (output_tokens is cumulative:
 * take the last). Gemini: generateContent and streamGenerateContent
 * (a JSON array of responses, or SSE with alt=sse), "usageMetadata":
 * promptTokenCount (cached included) + toolUsePromptTokenCount as input,
 * cachedContentTokenCount as cached, candidatesTokenCount +
 * thoughtsTokenCount as output; every chunk carries the totals so far.
 * llama.cpp's own /completion (openai): tokens_evaluated and
 * tokens_predicted, else timings. A report is the bill only when no
 * streamed text came after it (and, Anthropic, message_delta's count
 * came): otherwise meter_finish() says u_found 0, u_partial 1.
 * A body of another Content-Encoding than identity is decoded first (see
 * meter_encoding()).
 */
struct meter	*meter_new(enum meter_dialect, int sse, size_t max_json);
/*
 * The response's Content-Encoding value (call before the first feed, at
 * most once): gzip, deflate and br are decoded for the meter's reading
 * only (src/budget/decode.h: ratio, size and memory bounds); 0. Anything
 * else: -1, and the meter reports no usage.
 */
int		 meter_encoding(struct meter *, const char *v, size_t len);
void		 meter_feed(struct meter *, const char *, size_t);
/* End of body; fills <out>. */
void		 meter_finish(struct meter *, struct usage *out);
void		 meter_free(struct meter *);
/* Also count streamed text (before the first feed): meter_peek(). */
void		 meter_count_text(struct meter *);
/*
 * So far: the usage reported (u_found 0 when none yet) and the bytes of
 * streamed text (each token is at least one: a bound on the output
 * tokens sent); -1 when the body cannot be read.
 */
int		 meter_peek(const struct meter *, struct usage *,
		    uint64_t *text);

/* ---- metered requests (req_scan.c) --------------------------------- */

/* What a metered request body says about its cost. */
struct req_facts {
	char		 rf_model[128];	/* "" when not given */
	uint64_t	 rf_max_out;	/* largest of max_tokens,
					   max_completion_tokens,
					   max_output_tokens,
					   generationConfig.maxOutputTokens;
					   0 = none */
	uint64_t	 rf_choices;	/* max(n, best_of, candidateCount,
					   1) */
	int		 rf_stream;
	int		 rf_background;	/* "background" not false, null */
	/* An OpenAI stream without include_usage: replace the bytes
	   [rf_cut_from, rf_cut_to) with rf_insert (static). */
	int		 rf_rewrite;
	uint64_t	 rf_cut_from;
	uint64_t	 rf_cut_to;
	const char	*rf_insert;
	/* Where the output bounds given are ([rs_from, rs_to): from just
	   after the key to the value's end), and where one could go, so that
	   clamping can lower them (req_edit.c). */
	struct req_span {
		uint64_t	 rs_from;
		uint64_t	 rs_to;
	}		 rf_bound[5];
	int		 rf_nbound;
	uint64_t	 rf_root_brace;	/* the root's closing brace */
	uint64_t	 rf_root_members;
	int		 rf_gc;		/* generation(_c|C)onfig: 0 absent,
					   1 an object, -1 something else */
	int		 rf_gc_snake;	/* spelt generation_config */
	uint64_t	 rf_gc_brace;
	uint64_t	 rf_gc_members;
	char		 rf_why[160];	/* why it was refused */
};

/* ---- rewriting a metered request (req_edit.c) ----------------------- */

/* Byte edits of a held body: [re_from, re_to) becomes re_text. */
#define REQ_EDITS	8
struct req_edits {
	struct req_edit {
		uint64_t	 re_from;
		uint64_t	 re_to;
		char		 re_text[64];
	}		 re[REQ_EDITS];
	size_t		 re_n;
};

/* Which API a metered path calls: the output bound's name depends on it. */
enum req_api {
	REQ_API_OTHER = 0,	/* not clamped */
	REQ_API_CHAT,		/* max_completion_tokens */
	REQ_API_COMPLETIONS,	/* max_tokens */
	REQ_API_RESPONSES,	/* max_output_tokens */
	REQ_API_MESSAGES,	/* max_tokens (Anthropic) */
	REQ_API_GEMINI,		/* generationConfig.maxOutputTokens */
};

enum req_api	 req_api_of(const char *path);
/* The include_usage edit of <rf>, if any, into <ed>. */
void		 req_edits_usage(const struct req_facts *, struct req_edits *);
/*
 * Edits that make <rf>'s output bound <k> tokens: every bound given
 * rewritten, or the API's own inserted when none is. 0, or -1 when it
 * cannot be done (another API, a generationConfig that is no object).
 */
int		 req_edits_clamp(const struct req_facts *, enum req_api,
		    uint64_t k, struct req_edits *);
/* Sort <ed> by offset; -1 when two overlap. */
int		 req_edits_sort(struct req_edits *);

/*
 * Read <body> (borrowed, <len> bytes, one contiguous piece) with a
 * streaming parser under a fixed memory bound. 0, or -1 with rf_why when
 * it is not one JSON object that can be read unambiguously (syntax,
 * nesting over 64, a key that matters given twice, n/best_of not a whole
 * number): the caller answers 400.
 */
int	 req_scan(const char *body, size_t len, int openai,
	    struct req_facts *);
/* Gemini names the model in the path (".../models/NAME:generateContent"):
 * NAME into <dst>, "" when there is none. */
void	 req_path_model(const char *path, char *dst, size_t dstsz);
/* 1 when <method> <path> starts asynchronous work (batches, fine-tuning,
 * assistants runs) whose cost no response reports. */
int	 req_async_path(const char *method, const char *path);
/* 1 when <method> <path> generates nothing and reports no usage (GET,
 * HEAD, DELETE, OPTIONS; POST to count_tokens, countTokens,
 * input_tokens, files, uploads, cancel): it is not reserved or metered. */
int	 req_free_path(const char *method, const char *path);
/* Copy a model name for logs and the audit: control bytes become '?',
 * a cut never ends inside a UTF-8 sequence. */
void	 bud_model_copy(char *dst, size_t dstsz, const char *s, size_t len);

/* ---- refusals (bud_errbody.c) ------------------------------------- */

struct json_object;
/*
 * The body of a gateway answer (<status>, SPEC <code>, <reason>) on a rule
 * metered as <meter> (enum cfg_meter), in that provider's error shape
 * (OpenAI {"error": {message, type, code}}, Anthropic {"type": "error",
 * "error": {type, message}}, Gemini {"error": {code, message, status}}),
 * with SPEC's "reason" and "request_id" beside it; NULL for an unmetered
 * rule (SPEC's shape). json_object_put() it.
 */
struct json_object *bud_error_body(int meter, int status, const char *code,
	    const char *reason, const char *request_id);

/* ---- the event stream to the client (sse_filt.c) ------------------- */

struct sse_filt;
/* A filter holding at most <max_event> bytes of an unfinished event. */
struct sse_filt	*sse_filt_new(size_t max_event);
void		 sse_filt_free(struct sse_filt *);
/*
 * Feed <len> bytes: every byte goes to emit(arg, p, n, whole) once, in
 * order: each completed event whole (whole = 1; emit says 1 to send it,
 * 0 to leave it out), the unfinished tail held (past the bound it goes
 * on as it comes, whole = 0: sent whatever emit says). Returns the bytes
 * left out.
 */
size_t		 sse_filt_feed(struct sse_filt *, const char *, size_t,
		    int (*emit)(void *, const char *, size_t, int),
		    void *arg);
/* The end of the body: what is held is emitted. */
void		 sse_filt_flush(struct sse_filt *,
		    int (*emit)(void *, const char *, size_t, int),
		    void *arg);
/* 0 when part of an event went out without its end (no event fits in). */
int		 sse_filt_at_boundary(const struct sse_filt *);
/* An OpenAI stream's usage-only chunk ("choices": [], "usage": {...}). */
int		 sse_usage_only(const char *ev, size_t len);
/* The error event that ends a stream cut at the usd cap, in <meter>'s
 * (enum cfg_meter) shape; "" for an unmetered rule. */
void		 sse_cut_event(int meter, const char *reason,
		    const char *request_id, char *dst, size_t dstsz);

/* ---- a Gemini JSON-array stream to the client (arr_filt.c) --------- */

struct arr_filt;
/* A filter holding at most <max_elem> bytes of an unfinished element. */
struct arr_filt	*arr_filt_new(size_t max_elem);
void		 arr_filt_free(struct arr_filt *);
/*
 * Feed <len> bytes: every byte goes to emit(arg, p, n, whole) once, in
 * order: each element of the root array whole (whole = 1), the bytes
 * around elements as they come (whole = 0), an element over the bound
 * as it comes (whole = 0). A body that is not an array of objects passes
 * as it comes.
 */
void		 arr_filt_feed(struct arr_filt *, const char *, size_t,
		    int (*emit)(void *, const char *, size_t, int),
		    void *arg);
void		 arr_filt_flush(struct arr_filt *,
		    int (*emit)(void *, const char *, size_t, int),
		    void *arg);
/* 1 between two elements of the root array (a cut can end it there). */
int		 arr_filt_at_boundary(const struct arr_filt *);
/* What ends an array cut at the usd cap: [","] Gemini's error object as
 * an element, "]". */
void		 arr_cut_tail(const struct arr_filt *, const char *reason,
		    const char *request_id, char *dst, size_t dstsz);

/* ---- pricing (price.c) ---------------------------------------------- */

/*
 * Cost of <u> under cfg->c_pricing (first glob match on the model, prices
 * in µUSD per million tokens): uncached input at `input`, cached at
 * `cached_input`, cache writes at `cache_write`, output at `output`;
 * rounded up to the next µUSD. No match (or no model): the highest price
 * of each kind in the table, and *unpriced = 1.
 */
uint64_t	 price_usage(const struct cfg *, const struct usage *,
		    int *unpriced);
/* Worst case of a request: <input_est> input + <max_output> output at the
 * model's prices (or the highest). */
uint64_t	 price_worst(const struct cfg *, const char *model,
		    uint64_t input_est, uint64_t max_output);

/*
 * The most output tokens <model> can produce: its pricing entry's
 * max_output, else limits.default_max_tokens; for a model no entry
 * matches, the largest of these over the table.
 */
uint64_t	 price_max_output(const struct cfg *, const char *model);

/* ---- counters, caps, ledger (bud.c) -------------------------------- */

struct bud_counters {
	uint64_t	bc_window_start;	/* unix seconds; 0 = lifetime */
	uint64_t	bc_requests;
	uint64_t	bc_bytes_in;
	uint64_t	bc_bytes_out;
	uint64_t	bc_spend;		/* settled µUSD */
	uint64_t	bc_reserved;		/* outstanding µUSD */
};

enum bud_verdict {
	BUD_OK = 0,
	BUD_EXCEEDED,		/* 402 budget_exceeded */
	BUD_RATE,		/* 429 rate_limited */
	BUD_UNAVAILABLE,	/* 503 budget_unavailable (Redis store) */
};

/*
 * Open the ledger under <state_dir> (budget/ledger), replay and compact
 * it, start the group-commit thread. Returns 0 or -1 (logged). One per
 * process; thread-safe afterwards.
 */
int	bud_open(const char *state_dir);
void	bud_close(void);

/*
 * Before forwarding a request of <sandbox> under <caps> (may be NULL: no
 * caps): roll the window (fixed, UTC-aligned), check requests, bytes and
 * money (spend + reserved + <reserve> must stay <= usd cap) and the rate
 * bucket; on BUD_OK count the request and reserve <reserve> µUSD durably
 * (returns once the reservation is fdatasync'ed, group-committed).
 * On refusal <why> names the cap ("usd cap 5.000000 reached", "rate cap
 * 50/s") and *retry_after_s is set for BUD_RATE.
 */
enum bud_verdict bud_admit(const char *sandbox, const struct cfg_caps *caps,
	    uint64_t reserve, char *why, size_t whysz, int *retry_after_s);
/*
 * bud_admit() without the wait: BUD_OK with *seq the ledger line its
 * reservation must see durable before the request goes out (0: none);
 * bud_led_state() / bud_led_watch() tell when. A line that failed is
 * undone with bud_admit_undo() (the request is then refused).
 */
enum bud_verdict bud_admit_begin(const char *sandbox,
	    const struct cfg_caps *caps, uint64_t reserve, char *why,
	    size_t whysz, int *retry_after_s, uint64_t *seq);
void	bud_admit_undo(const char *sandbox, uint64_t reserve, char *why,
	    size_t whysz);
struct event;
/* Ledger line <seq>: 1 durable (or no ledger), 0 not yet, -1 failed. */
int	bud_led_state(uint64_t seq);
/*
 * Make <ev> active (from the ledger's thread; libevent is thread-safe
 * here) once line <seq> is durable or the ledger failed: 0, or 1 when
 * that is already so (nothing watched). bud_led_unwatch() before
 * freeing <ev>.
 */
int	bud_led_watch(uint64_t seq, struct event *ev);
void	bud_led_unwatch(struct event *ev);
/* Bytes are counted as they flow (flushed to the ledger at least 1/s). */
void	bud_add_bytes(const char *sandbox, uint64_t in, uint64_t out);
/* Settle a reservation to the metered cost. */
void	bud_settle(const char *sandbox, uint64_t reserved, uint64_t cost);
/*
 * Settle as bud_settle() and add the request to the sandbox's breakdown
 * by model and UTC day (usage_tab.c): <u> what the meter found (NULL or
 * not found: only the request and its cost count), <model> the model to
 * file it under ("" = "unknown"). Also counted in /metrics.
 */
void	bud_settle_usage(const char *sandbox, uint64_t reserved,
	    uint64_t cost, const struct usage *u, const char *model);

/* One row of the breakdown: a model, a UTC day, or both. */
struct bud_use_row {
	uint64_t	ur_day;		/* days since 1970-01-01 UTC */
	char		ur_model[128];
	uint64_t	ur_requests;
	uint64_t	ur_cost;	/* µUSD */
	uint64_t	ur_input;	/* every prompt token */
	uint64_t	ur_cached;
	uint64_t	ur_cache_write;
	uint64_t	ur_output;
};

enum bud_by {
	BUD_BY_MODEL = 0,
	BUD_BY_DAY,
};

/* The breakdown of <sandbox>, summed by model (sorted by name) or by day
 * (oldest first), into a malloc'ed array (free()). 0, or -1 if the
 * sandbox is unknown. */
int	bud_usage_by(const char *sandbox, enum bud_by, struct bud_use_row **,
	    size_t *n);
/* Current counters (admin API, tests); 0 or -1 if unknown sandbox. */
int	bud_get(const char *sandbox, const struct cfg_caps *caps,
	    struct bud_counters *out);
void	bud_reset(const char *sandbox);

/* ---- the Redis store (bud_redis.c) --------------------------------- */

/*
 * budget_store: redis://... or unix:...: read the password source and
 * get ready (connections are made by each worker on first use). 0, or
 * -1 (logged). Nothing to do for the file store.
 */
int	bud_redis_open(const struct cfg *);
void	bud_redis_close(void);
/* The Redis store is in use. */
int	bud_redis_on(void);
/* On a worker's thread once its loop is over (conn/worker.c). */
void	bud_redis_worker_fini(void);
/*
 * The shared counters of <sandbox>'s current window (caps' window, the
 * server's clock) as Redis has them, for the admin API: one blocking
 * connection bounded by limits.store_timeout (the main thread's, never a
 * worker's). 0, or -1 (Redis away: *bc zeroed). bc_reserved counts live
 * reservations and any whose lease ended since the sandbox's last
 * admission.
 */
struct bud_counters;
int	bud_redis_get(const char *sandbox, const struct cfg_caps *caps,
	    struct bud_counters *bc);

struct bud_rop;		/* an admission or grant waiting for Redis */
struct bud_rres;	/* a reservation held in Redis (its lease) */
struct event;

/* Bytes an answer granted the exchange, and the window's room left
 * after it (UINT64_MAX: no cap that way). */
struct bud_grant {
	uint64_t	bg_in;
	uint64_t	bg_out;
	uint64_t	bg_left_in;
	uint64_t	bg_left_out;
};

/*
 * Admit a request of <sandbox> under <caps> reserving <reserve> µUSD, in
 * Redis, on the connection of the thread running <ev>'s base: a new
 * operation whose answer makes <ev> active (or is there already, see
 * bud_rop_done: no connection). <llm>: a metered request under an
 * llm_concurrency cap of that many (0 = none), which takes one of the
 * sandbox's shared slots (leased like the reservation). <want_in> /
 * <want_out>: bytes asked as the exchange's first grant (0 = none; see
 * bud_rop_grant); a bytes cap then admits it while BUD_GRANT_MIN of it
 * is neither settled nor granted (room for a head). Never blocks.
 */
#define BUD_GRANT_MIN	1024
struct bud_rop	*bud_redis_admit(struct event *ev, const char *sandbox,
		    const struct cfg_caps *caps, uint64_t reserve,
		    uint64_t llm, uint64_t want_in, uint64_t want_out);
/*
 * Ask for the next byte grant of the exchange holding <res> (borrowed;
 * abandon the operation before settling it): a new operation as
 * bud_redis_admit's, answered BUD_OK (what came: bud_rop_grant, 0 bytes
 * when the window has no room) or BUD_UNAVAILABLE. Take it with
 * bud_rop_take (no reservation comes with it).
 */
struct bud_rop	*bud_redis_grant(struct event *ev, struct bud_rres *res,
		    const struct cfg_caps *caps, uint64_t want_in,
		    uint64_t want_out);
/* The grant a done operation carries: 0 with *g, or -1 (none). */
int		 bud_rop_grant(const struct bud_rop *, struct bud_grant *g);
int		 bud_rop_done(const struct bud_rop *);
/* The answer of a done operation, which it frees; on BUD_OK *res is the
 * reservation to settle (bud_redis_settle). */
enum bud_verdict bud_rop_take(struct bud_rop *, char *why, size_t whysz,
		    int *retry, struct bud_rres **res);
/* The exchange is gone: its answer, when it comes, releases what it got. */
void		 bud_rop_abandon(struct bud_rop *);
/* <ev> is about to be freed: no operation makes it active any more. */
void		 bud_rop_unwatch(struct event *ev);
/* Settle (takes <res>): cost, bytes in and out added to the shared
 * window, the reservation released. Kept for later while Redis is
 * away. */
void		 bud_redis_settle(struct bud_rres *res, uint64_t cost,
		    uint64_t in, uint64_t out);

/* ---- in flight (bud_flow.c) ---------------------------------------- */

struct bud_sb;

/* Room left under the bytes caps; UINT64_MAX where there is none. */
struct bud_room {
	uint64_t	br_in;
	uint64_t	br_out;
};

struct xchg;
struct cfg_policy;
/* budget/bud_stage.c: the caps of <p>'s requests, or NULL (none set). */
const struct cfg_caps *bud_caps_of(const struct cfg_policy *p);
/* Charge what the exchange moved since its last charge; -1 if a bytes
 * cap is passed. */
int	 bud_xchg_charge(struct xchg *, const struct cfg_caps *);
/* How many of <len> more bytes towards the upstream (<up>) or the client
 * the bytes caps allow; fewer marks the exchange to be cut (b_over). */
size_t	 bud_xchg_allow(struct xchg *, const struct cfg_caps *, int up,
	    size_t len);
/* Is a charge due at the end of a callback (a cap, or a batch moved)? */
int	 bud_xchg_batch_due(const struct xchg *);
/* The exchange's byte count (x_bytes_in + x_bytes_out) at which a charge
 * is next due, or 0 while something bounds its bytes (a cap, a grant, an
 * overrun): then at every move. */
uint64_t bud_xchg_next_due(const struct xchg *);

/* A sandbox's budget entry, created if needed; valid until bud_close(). */
struct bud_sb	*bud_handle(const char *sandbox);
/*
 * Count <in>/<out> more bytes (one lock) and say what room is left under
 * <caps> (may be NULL). -1 when a bytes cap is now passed.
 */
int	 bud_charge(struct bud_sb *, const struct cfg_caps *, uint64_t in,
	    uint64_t out, struct bud_room *);
/* Take one of <limit> metered-request slots (0 = no limit); -1 if all are
 * taken. bud_llm_leave() gives it back. */
int	 bud_llm_enter(struct bud_sb *, uint64_t limit);
void	 bud_llm_leave(struct bud_sb *);
uint64_t bud_llm_inflight(const char *sandbox);

#endif
