/*
 * The Redis store (budget_store: redis://HOST:PORT/DB or unix:PATH):
 * admission, settlement and lease renewal are server-side scripts
 * (bud_rscript.h), so every gateway sharing the Redis sees one budget;
 * the byte grants that hold the bytes caps in flight are bud_rgrant.c's,
 * on the same connection.
 *
 * One hiredis connection per worker thread, on that worker's event_base
 * (the libevent adapter), made on first use: the stage hands us the
 * exchange's resume event and its base is the worker's. Commands are
 * pipelined on it (hiredis queues them; replies come back in order). A
 * worker never waits: admission returns at once and the reply makes the
 * exchange's resume event active (the XS_WAIT verdict).
 *
 * Failure: no connection, a connection error, or an answer later than
 * limits.store_timeout (the oldest command waiting past it drops the
 * connection, failing every command on it) answers the exchange
 * BUD_UNAVAILABLE (503 budget_unavailable). Reconnection is retried with
 * backoff (100 ms doubling to 5 s); a settlement that could not be sent
 * is kept (bounded) and sent once connected again, so spent money is not
 * forgotten while Redis is away. A reservation's lease is renewed every
 * third of its length while its request runs; a dead gateway's leases
 * end and the next admission of that sandbox releases them.
 */
#include "config.h"

#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "budget/bud.h"
#include "budget/bud_internal.h"
#include "budget/bud_redis.h"
#include "budget/bud_rconn.h"
#include "budget/bud_rscript.h"
#include "budget/bud_tls.h"
#include "cfg/cfg.h"
#include "util/log.h"
#include "util/util.h"

#define BRC_BACKOFF0_MS		100
#define BRC_BACKOFF_MAX_MS	5000
#define BRC_TICK_MS		50
#define BRC_SETTLE_MAX		10000	/* settlements kept while down */

static const char *const brs_text[BRS_N] = {
	BUD_RS_ADMIT, BUD_RS_SETTLE, BUD_RS_RENEW, BUD_RS_GRANT,
};

/* Set once by bud_redis_open(), read-only afterwards. */
static struct {
	int		 on;
	char		*host;
	int		 port;
	char		*unix_path;
	int		 db;
	char		*pass;		/* AUTH, or NULL; wiped at close */
	uint64_t	 timeout_ms;
	uint64_t	 lease_ms;
	char		 sha[BRS_N][41];
	char		 gw[17];	/* reservation ids: gateway part */
} brs;

static uint64_t	 brs_seq;	/* reservation ids: counter (atomic) */

static __thread struct brc	*tl_brc;

/* Every connection, for bud_redis_close(). */
static pthread_mutex_t	 brc_mtx = PTHREAD_MUTEX_INITIALIZER;

static void	brc_connect(struct brc *);

int
bud_redis_on(void)
{
	return brs.on;
}

/* ---- replies (pure; tests/fuzz) ------------------------------------- */

/*
 * Read an admission script's reply: {0, "ok", ws} | {0, "ok", ws, GRANT}
 * (bud_redis_grant_reply reads it) | {1, CAP, ws} |
 * {2, retry_s, ws} | {3, "llm_concurrency", ws}. BUD_OK, BUD_EXCEEDED
 * (why names the cap), BUD_RATE (*retry set; also every llm_concurrency
 * slot taken), or -1 for anything else (an error, a NULL reply, a shape
 * no script of ours returns).
 */
static redisReplyObjectFunctions	brs_fn_default, brs_fn_guarded,
					brs_fn_list;
static pthread_once_t			brs_fn_once = PTHREAD_ONCE_INIT;

static void *
guard_array(const redisReadTask *t, int n)
{
	if (n > BUD_REDIS_MAX_ELEMENTS)
		return NULL;	/* the reader's error: out of memory */
	return brs_fn_default.createArray(t, n);
}

static void *
guard_list(const redisReadTask *t, int n)
{
	if (n > BUD_REDIS_MAX_LIST)
		return NULL;
	return brs_fn_default.createArray(t, n);
}

static void
guard_init(void)
{
	redisReader	*r;

	/* hiredis's own functions are static: take them from a reader */
	if ((r = redisReaderCreate()) == NULL)
		abort();
	brs_fn_default = *r->fn;
	redisReaderFree(r);
	brs_fn_guarded = brs_fn_list = brs_fn_default;
	brs_fn_guarded.createArray = guard_array;
	brs_fn_list.createArray = guard_list;
}

void
bud_redis_reader_guard(redisReader *r)
{
	pthread_once(&brs_fn_once, guard_init);
	if (r != NULL && r->fn != NULL)
		r->fn = &brs_fn_guarded;
}

void
bud_redis_reader_guard_list(redisReader *r)
{
	pthread_once(&brs_fn_once, guard_init);
	if (r != NULL && r->fn != NULL)
		r->fn = &brs_fn_list;
}

int
bud_redis_admit_reply(const redisReply *r, char *why, size_t whysz,
    int *retry)
{
	const redisReply	*e;
	long long		 code;

	if (r == NULL || r->type != REDIS_REPLY_ARRAY || (r->elements != 3 &&
	    r->elements != 7) || r->element == NULL)
		return -1;
	e = r->element[0];
	if (e == NULL || e->type != REDIS_REPLY_INTEGER)
		return -1;
	code = e->integer;
	if (r->elements == 7 && code != 0)
		return -1;	/* only an admission carries a grant */
	e = r->element[1];
	if (e == NULL)
		return -1;
	switch (code) {
	case 0:
		return BUD_OK;
	case 1:
		if (e->type != REDIS_REPLY_STRING || e->str == NULL ||
		    e->len > 32)
			return -1;
		snprintf(why, whysz, "%.*s cap reached (shared)", (int)e->len,
		    e->str);
		return BUD_EXCEEDED;
	case 2:
		if (e->type != REDIS_REPLY_INTEGER || e->integer < 1)
			return -1;
		*retry = e->integer > 3600 ? 3600 : (int)e->integer;
		snprintf(why, whysz, "rate cap (shared)");
		return BUD_RATE;
	case 3:
		if (e->type != REDIS_REPLY_STRING || e->str == NULL ||
		    e->len != 15 || memcmp(e->str, "llm_concurrency", 15) != 0)
			return -1;
		*retry = 1;
		snprintf(why, whysz, "llm_concurrency cap reached (shared): "
		    "that many metered requests are in flight");
		return BUD_RATE;
	}
	return -1;
}

/* ---- the connection ------------------------------------------------- */

void
bud_rc_op_finish(struct bud_rop *o, int v)
{
	struct brc	*c = o->o_brc;

	TAILQ_REMOVE(&c->c_ops, o, o_entry);
	o->o_done = 1;
	o->o_v = v;
	if (o->o_ev != NULL) {
		event_active(o->o_ev, EV_TIMEOUT, 1);
		return;
	}
	/* abandoned: the exchange is gone; give a reservation back */
	if (v == BUD_OK && o->o_res != NULL)
		bud_redis_settle(o->o_res, 0, 0, 0);
	o->o_res = NULL;
	free(o);
}

static void
admit_cb(redisAsyncContext *ac, void *reply, void *arg)
{
	struct bud_rop	*o = arg;
	struct brc	*c = ac->data;
	int		 v;

	c->c_inflight--;
	v = bud_redis_admit_reply(reply, o->o_why, sizeof(o->o_why),
	    &o->o_retry);
	if (v == BUD_OK && ((redisReply *)reply)->elements == 7) {
		/* with the first byte grant */
		if (bud_redis_grant_reply(reply, 3, &o->o_grant) == -1)
			v = -1;
		else
			o->o_has_grant = 1;
	}
	if (v == -1) {
		bud_rc_op_failed(o, c, reply, "admission");
		v = BUD_UNAVAILABLE;
	}
	if (v == BUD_OK && o->o_has_grant && o->o_res != NULL)
		o->o_res->r_gflags = (o->o_grant.bg_in > 0 ? 1 : 0) |
		    (o->o_grant.bg_out > 0 ? 2 : 0);
	if (v != BUD_OK && o->o_res != NULL) {
		free(o->o_res->r_key);
		free(o->o_res);
		o->o_res = NULL;
	}
	bud_rc_op_finish(o, v);
}

void
bud_rc_op_failed(struct bud_rop *o, struct brc *c, const redisReply *r,
    const char *what)
{
	if (r != NULL && r->type == REDIS_REPLY_ERROR) {
		log_warnx("bud: redis %s: %.200s", what, r->str);
		c->c_drop = 1;	/* NOSCRIPT after a flush: reload */
	}
	snprintf(o->o_why, sizeof(o->o_why), c->c_late ?
	    "budget store did not answer within store_timeout" :
	    "budget store unavailable");
}

/* Replies nobody waits for (settle, renew, setup): errors logged. */
static void
quiet_cb(redisAsyncContext *ac, void *reply, void *arg)
{
	struct brc	*c = ac->data;
	redisReply	*r = reply;

	c->c_inflight--;
	if (r != NULL && r->type == REDIS_REPLY_ERROR) {
		/* an AUTH error says nothing secret; the password is not
		   in it */
		log_warnx("bud: redis %s: %.200s", arg != NULL ?
		    (const char *)arg : "command", r->str);
		c->c_drop = 1;
	}
}

void
bud_rc_cmd(struct brc *c, redisCallbackFn *fn, void *arg, int argc,
    const char **argv)
{
	c->c_inflight++;
	if (redisAsyncCommandArgv(c->c_ac, fn, arg, argc, argv, NULL) !=
	    REDIS_OK)
		fn(c->c_ac, NULL, arg);	/* counts it down */
}

static void
brc_send_settle(struct brc *c, const char *key, const char *id,
    uint64_t win, uint64_t cost, uint64_t in, uint64_t out, int gflags)
{
	char		 a[5][24];
	const char	*argv[10];

	snprintf(a[0], sizeof(a[0]), "%" PRIu64, win);
	snprintf(a[1], sizeof(a[1]), "%" PRIu64, cost);
	snprintf(a[2], sizeof(a[2]), "%" PRIu64, in);
	snprintf(a[3], sizeof(a[3]), "%" PRIu64, out);
	argv[0] = "EVALSHA";
	argv[1] = brs.sha[BRS_SETTLE];
	argv[2] = "1";
	argv[3] = key;
	argv[4] = a[0];
	argv[5] = id;
	argv[6] = a[1];
	argv[7] = a[2];
	argv[8] = a[3];
	snprintf(a[4], sizeof(a[4]), "%d", gflags);
	argv[9] = a[4];
	bud_rc_cmd(c, quiet_cb, "settle", 10, argv);
}

static void
connect_cb(const redisAsyncContext *ac, int status)
{
	struct brc		*c = ac->data;
	struct brc_settle	*s;

	if (status != REDIS_OK) {
		/* hiredis frees the context after this callback */
		log_warnx("bud: redis: cannot connect: %s", ac->errstr);
		c->c_ac = NULL;
		c->c_up = 0;
		return;
	}
	c->c_up = 1;
	c->c_backoff = 0;
	log_info("bud: redis store connected");
	/* what could not be sent while Redis was away */
	while ((s = TAILQ_FIRST(&c->c_settles)) != NULL) {
		TAILQ_REMOVE(&c->c_settles, s, s_entry);
		c->c_nsettles--;
		brc_send_settle(c, s->s_key, s->s_id, s->s_win_ms, s->s_cost,
		    s->s_in, s->s_out, s->s_gflags);
		free(s->s_key);
		free(s);
	}
}

static void
disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct brc	*c = ac->data;

	if (status != REDIS_OK)
		log_warnx("bud: redis store lost: %s", ac->errstr);
	c->c_ac = NULL;
	c->c_up = 0;
	c->c_inflight = 0;
}

static void
brc_schedule_retry(struct brc *c)
{
	c->c_backoff = c->c_backoff == 0 ? BRC_BACKOFF0_MS :
	    c->c_backoff * 2 > BRC_BACKOFF_MAX_MS ? BRC_BACKOFF_MAX_MS :
	    c->c_backoff * 2;
	c->c_retry_at = util_now_ms() + c->c_backoff;
}

static void
brc_connect(struct brc *c)
{
	const char	*argv[3];
	char		 db[8];
	int		 i;

	c->c_ac = brs.unix_path != NULL ?
	    redisAsyncConnectUnix(brs.unix_path) :
	    redisAsyncConnect(brs.host, brs.port);
	if (c->c_ac == NULL || c->c_ac->err) {
		log_warnx("bud: redis: %s", c->c_ac != NULL ?
		    c->c_ac->errstr : "out of memory");
		if (c->c_ac != NULL)
			redisAsyncFree(c->c_ac);
		c->c_ac = NULL;
		brc_schedule_retry(c);
		return;
	}
	bud_redis_reader_guard(c->c_ac->c.reader);
	c->c_ac->data = c;
	c->c_inflight = 0;
	c->c_drop = 0;
	redisLibeventAttach(c->c_ac, c->c_base);
	redisAsyncSetConnectCallback(c->c_ac, connect_cb);
	redisAsyncSetDisconnectCallback(c->c_ac, disconnect_cb);
	brc_schedule_retry(c);	/* the next try, should this one fail */
	/* queued now, sent once connected, before any script call */
	if (brs.pass != NULL) {
		argv[0] = "AUTH";
		argv[1] = brs.pass;
		bud_rc_cmd(c, quiet_cb, "AUTH", 2, argv);
	}
	if (brs.db != 0) {
		snprintf(db, sizeof(db), "%d", brs.db);
		argv[0] = "SELECT";
		argv[1] = db;
		bud_rc_cmd(c, quiet_cb, "SELECT", 2, argv);
	}
	for (i = 0; i < BRS_N; i++) {
		argv[0] = "SCRIPT";
		argv[1] = "LOAD";
		argv[2] = brs_text[i];
		bud_rc_cmd(c, quiet_cb, "SCRIPT LOAD", 3, argv);
	}
}

/* Fail every admission still waiting (the connection is gone). */
static void
brc_fail_ops(struct brc *c)
{
	struct bud_rop	*o;

	while ((o = TAILQ_FIRST(&c->c_ops)) != NULL) {
		snprintf(o->o_why, sizeof(o->o_why), "budget store did not "
		    "answer in time");
		if (o->o_res != NULL) {
			free(o->o_res->r_key);
			free(o->o_res);
			o->o_res = NULL;
		}
		bud_rc_op_finish(o, BUD_UNAVAILABLE);
	}
}

static void
brc_renew(struct brc *c)
{
	struct bud_rres	*r;
	const char	*argv[7];
	char		 win[24], lease[24];

	snprintf(lease, sizeof(lease), "%" PRIu64, brs.lease_ms);
	TAILQ_FOREACH(r, &c->c_res, r_entry) {
		snprintf(win, sizeof(win), "%" PRIu64, r->r_win_ms);
		argv[0] = "EVALSHA";
		argv[1] = brs.sha[BRS_RENEW];
		argv[2] = "1";
		argv[3] = r->r_key;
		argv[4] = win;
		argv[5] = r->r_id;
		argv[6] = lease;
		bud_rc_cmd(c, quiet_cb, "renew", 7, argv);
	}
}

/*
 * Every BRC_TICK_MS: an admission past its deadline (Redis slow or gone)
 * drops the connection, which fails every command on it; reconnect when
 * due; renew the leases.
 */
static void
brc_tick(evutil_socket_t fd, short what, void *arg)
{
	struct brc	*c = arg;
	struct bud_rop	*o = TAILQ_FIRST(&c->c_ops);
	uint64_t	 now = util_now_ms();
	struct timeval	 tv = { 0, BRC_TICK_MS * 1000 };

	(void)fd;
	(void)what;
	if (c->c_ac != NULL && (c->c_drop || (o != NULL &&
	    now >= o->o_deadline))) {
		if (!c->c_drop)
			log_warnx("bud: redis store: no answer in %" PRIu64
			    " ms; reconnecting", brs.timeout_ms);
		c->c_late = !c->c_drop;
		redisAsyncFree(c->c_ac);	/* NULL replies to all */
		c->c_late = 0;
		c->c_ac = NULL;
		c->c_up = 0;
		c->c_inflight = 0;
		brc_schedule_retry(c);
	}
	if (c->c_ac == NULL)
		brc_fail_ops(c);
	if (c->c_ac == NULL && now >= c->c_retry_at)
		brc_connect(c);
	if (c->c_up && now >= c->c_renew_at) {
		brc_renew(c);
		c->c_renew_at = now + brs.lease_ms / 3;
	}
	evtimer_add(c->c_tick, &tv);
}

struct brc *
bud_rc_get(struct event_base *base)
{
	struct brc	*c = tl_brc;
	struct timeval	 tv = { 0, BRC_TICK_MS * 1000 };

	if (c != NULL)
		return c;
	c = xcalloc(1, sizeof(*c));
	c->c_base = base;
	TAILQ_INIT(&c->c_ops);
	TAILQ_INIT(&c->c_res);
	TAILQ_INIT(&c->c_settles);
	if ((c->c_tick = evtimer_new(base, brc_tick, c)) == NULL)
		fatalx("evtimer_new");
	evtimer_add(c->c_tick, &tv);
	tl_brc = c;
	brc_connect(c);
	return c;
}

/* ---- the store's operations ----------------------------------------- */

/* airlock:{S}: S the sandbox id with all but [A-Za-z0-9._-] as %XX. */
static char *
brs_key(const char *sandbox)
{
	static const char	 hex[] = "0123456789abcdef";
	size_t			 n = strlen(sandbox), i, j = 0;
	char			*k = xmalloc(n * 3 + 12);
	unsigned char		 ch;

	memcpy(k, "airlock:{", 9);
	j = 9;
	for (i = 0; i < n; i++) {
		ch = (unsigned char)sandbox[i];
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
		    ch == '-')
			k[j++] = (char)ch;
		else {
			k[j++] = '%';
			k[j++] = hex[ch >> 4];
			k[j++] = hex[ch & 15];
		}
	}
	k[j++] = '}';
	k[j] = '\0';
	return k;
}

void
bud_rc_cap_arg(char *dst, size_t dstsz, int has, uint64_t v)
{
	if (has)
		snprintf(dst, dstsz, "%" PRIu64, v);
	else
		snprintf(dst, dstsz, "-1");
}

struct bud_rop *
bud_rc_op_new(struct brc *c, struct event *ev)
{
	struct bud_rop	*o = xcalloc(1, sizeof(*o));

	o->o_brc = c;
	if (c->c_ac == NULL) {
		/* answered now, nothing to wait for */
		snprintf(o->o_why, sizeof(o->o_why), "budget store "
		    "unavailable");
		o->o_done = 1;
		o->o_v = BUD_UNAVAILABLE;
		return o;
	}
	o->o_ev = ev;
	TAILQ_INSERT_TAIL(&c->c_ops, o, o_entry);
	o->o_deadline = util_now_ms() + brs.timeout_ms;
	return o;
}

const char *
bud_rc_sha(int script)
{
	return brs.sha[script];
}

uint64_t
bud_rc_lease_ms(void)
{
	return brs.lease_ms;
}

struct bud_rop *
bud_redis_admit(struct event *ev, const char *sandbox,
    const struct cfg_caps *caps, uint64_t reserve, uint64_t llm,
    uint64_t want_in, uint64_t want_out)
{
	struct brc	*c = bud_rc_get(event_get_base(ev));
	struct bud_rop	*o;
	struct bud_rres	*r;
	const char	*argv[18];
	char		 a[13][24];

	if ((o = bud_rc_op_new(c, ev))->o_done)
		return o;
	r = xcalloc(1, sizeof(*r));
	r->r_key = brs_key(sandbox);
	r->r_win_ms = caps != NULL ? caps->cp_window_ms : 0;
	snprintf(r->r_id, sizeof(r->r_id), "%s-%" PRIu64, brs.gw,
	    __atomic_add_fetch(&brs_seq, 1, __ATOMIC_RELAXED));
	o->o_res = r;
	snprintf(a[0], sizeof(a[0]), "%" PRIu64, r->r_win_ms);
	bud_rc_cap_arg(a[1], sizeof(a[1]), caps && caps->cp_has_requests,
	    caps ? caps->cp_requests : 0);
	bud_rc_cap_arg(a[2], sizeof(a[2]), caps && caps->cp_has_bytes_in,
	    caps ? caps->cp_bytes_in : 0);
	bud_rc_cap_arg(a[3], sizeof(a[3]), caps && caps->cp_has_bytes_out,
	    caps ? caps->cp_bytes_out : 0);
	bud_rc_cap_arg(a[4], sizeof(a[4]), caps && caps->cp_has_usd,
	    caps ? caps->cp_usd : 0);
	bud_rc_cap_arg(a[5], sizeof(a[5]), caps && caps->cp_has_rate,
	    caps ? caps->cp_rate_n : 0);
	snprintf(a[6], sizeof(a[6]), "%" PRIu64, caps ? caps->cp_rate_ms : 0);
	snprintf(a[7], sizeof(a[7]), "%" PRIu64, reserve);
	snprintf(a[8], sizeof(a[8]), "%" PRIu64, brs.lease_ms);
	bud_rc_cap_arg(a[9], sizeof(a[9]), llm != 0, llm);
	argv[0] = "EVALSHA";
	argv[1] = brs.sha[BRS_ADMIT];
	argv[2] = "1";
	argv[3] = r->r_key;
	argv[4] = a[0];
	argv[5] = a[1];
	argv[6] = a[2];
	argv[7] = a[3];
	argv[8] = a[4];
	argv[9] = a[5];
	argv[10] = a[6];
	argv[11] = a[7];
	argv[12] = r->r_id;
	argv[13] = a[8];
	argv[14] = a[9];
	snprintf(a[10], sizeof(a[10]), "%" PRIu64, want_in);
	snprintf(a[11], sizeof(a[11]), "%" PRIu64, want_out);
	argv[15] = a[10];
	argv[16] = a[11];
	snprintf(a[12], sizeof(a[12]), "%d", want_in != 0 || want_out != 0 ?
	    BUD_GRANT_MIN : 0);
	argv[17] = a[12];
	bud_rc_cmd(c, admit_cb, o, 18, argv);
	return o;
}

int
bud_rop_done(const struct bud_rop *o)
{
	return o->o_done;
}

enum bud_verdict
bud_rop_take(struct bud_rop *o, char *why, size_t whysz, int *retry,
    struct bud_rres **res)
{
	enum bud_verdict	v = o->o_v;
	struct brc		*c = o->o_brc;

	snprintf(why, whysz, "%s", o->o_why);
	*retry = o->o_retry;
	*res = NULL;
	if (v == BUD_OK && o->o_res != NULL) {
		*res = o->o_res;
		TAILQ_INSERT_TAIL(&c->c_res, o->o_res, r_entry);
		o->o_res->r_linked = 1;
	}
	free(o);
	return v;
}

void
bud_rop_abandon(struct bud_rop *o)
{
	if (o == NULL)
		return;
	if (o->o_done) {
		/* answered, its event not run yet */
		struct bud_rres	*r = NULL;
		char		 why[96];
		int		 retry;

		if (bud_rop_take(o, why, sizeof(why), &retry, &r) ==
		    BUD_OK && r != NULL)
			bud_redis_settle(r, 0, 0, 0);
		return;
	}
	o->o_ev = NULL;
	o->o_gres = NULL;
}

void
bud_rop_unwatch(struct event *ev)
{
	struct brc	*c = tl_brc;
	struct bud_rop	*o;

	if (c == NULL)
		return;
	TAILQ_FOREACH(o, &c->c_ops, o_entry)
		if (o->o_ev == ev)
			o->o_ev = NULL;
}

void
bud_redis_settle(struct bud_rres *r, uint64_t cost, uint64_t in,
    uint64_t out)
{
	struct brc		*c = tl_brc;
	struct brc_settle	*s;

	if (r == NULL)
		return;
	if (c != NULL && r->r_linked)
		TAILQ_REMOVE(&c->c_res, r, r_entry);
	if (c != NULL && c->c_up && c->c_ac != NULL)
		brc_send_settle(c, r->r_key, r->r_id, r->r_win_ms, cost, in,
		    out, r->r_gflags);
	else if (c != NULL && (cost != 0 || in != 0 || out != 0) &&
	    c->c_nsettles < BRC_SETTLE_MAX) {
		/* a release alone needs no keeping: the lease ends */
		s = xcalloc(1, sizeof(*s));
		s->s_key = r->r_key;
		r->r_key = NULL;
		memcpy(s->s_id, r->r_id, sizeof(s->s_id));
		s->s_win_ms = r->r_win_ms;
		s->s_cost = cost;
		s->s_in = in;
		s->s_out = out;
		s->s_gflags = r->r_gflags;
		TAILQ_INSERT_TAIL(&c->c_settles, s, s_entry);
		c->c_nsettles++;
	} else if (cost != 0)
		log_warnx("bud: redis store away: a settlement of %" PRIu64
		    " uUSD is lost (its reservation's lease ends)", cost);
	free(r->r_key);
	free(r);
}

/* ---- the admin API's view ------------------------------------------- */

/* One command on <c>: its reply, or NULL (an error reply is freed). */
static redisReply *
brs_sync(redisContext *c, int argc, const char **argv)
{
	redisReply	*r = redisCommandArgv(c, argc, argv, NULL);

	if (r != NULL && r->type == REDIS_REPLY_ERROR) {
		freeReplyObject(r);
		r = NULL;
	}
	return r;
}

static uint64_t
brs_u64(const redisReply *r)
{
	long long	v;

	if (r == NULL || r->type != REDIS_REPLY_STRING || r->str == NULL)
		return 0;
	v = strtoll(r->str, NULL, 10);
	return v > 0 ? (uint64_t)v : 0;
}

int
bud_redis_get(const char *sandbox, const struct cfg_caps *caps,
    struct bud_counters *bc)
{
	struct timeval	 tv;
	redisContext	*c;
	redisReply	*r;
	const char	*argv[6];
	char		*key, wkey[300], rkey[300], db[8];
	uint64_t	 now, win = caps != NULL ? caps->cp_window_ms : 0, ws = 0;
	int		 rv = -1;

	memset(bc, 0, sizeof(*bc));
	tv.tv_sec = (time_t)(brs.timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(brs.timeout_ms % 1000) * 1000;
	c = brs.unix_path != NULL ?
	    redisConnectUnixWithTimeout(brs.unix_path, tv) :
	    redisConnectWithTimeout(brs.host, brs.port, tv);
	if (c == NULL || c->err) {
		if (c != NULL)
			redisFree(c);
		return -1;
	}
	bud_redis_reader_guard(c->reader);
	redisSetTimeout(c, tv);
	key = brs_key(sandbox);
	if (brs.pass != NULL) {
		argv[0] = "AUTH";
		argv[1] = brs.pass;
		if ((r = brs_sync(c, 2, argv)) == NULL)
			goto out;
		freeReplyObject(r);
	}
	if (brs.db != 0) {
		snprintf(db, sizeof(db), "%d", brs.db);
		argv[0] = "SELECT";
		argv[1] = db;
		if ((r = brs_sync(c, 2, argv)) == NULL)
			goto out;
		freeReplyObject(r);
	}
	/* the window is the server's, as the scripts' */
	argv[0] = "TIME";
	if ((r = brs_sync(c, 1, argv)) == NULL)
		goto out;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
		freeReplyObject(r);
		goto out;
	}
	now = brs_u64(r->element[0]) * 1000 + brs_u64(r->element[1]) / 1000;
	freeReplyObject(r);
	if (win > 0)
		ws = now - now % win;
	snprintf(wkey, sizeof(wkey), "%s:w:%" PRIu64, key, ws);
	snprintf(rkey, sizeof(rkey), "%s:rt", key);
	argv[0] = "HMGET"; argv[1] = wkey; argv[2] = "req"; argv[3] = "in";
	argv[4] = "out"; argv[5] = "spend";
	if ((r = brs_sync(c, 6, argv)) == NULL)
		goto out;
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 4) {
		bc->bc_requests = brs_u64(r->element[0]);
		bc->bc_bytes_in = brs_u64(r->element[1]);
		bc->bc_bytes_out = brs_u64(r->element[2]);
		bc->bc_spend = brs_u64(r->element[3]);
	}
	freeReplyObject(r);
	argv[0] = "GET"; argv[1] = rkey;
	if ((r = brs_sync(c, 2, argv)) == NULL)
		goto out;
	bc->bc_reserved = brs_u64(r);
	freeReplyObject(r);
	bc->bc_window_start = ws / 1000;
	rv = 0;
out:
	free(key);
	redisFree(c);
	return rv;
}

/* ---- start and stop ------------------------------------------------- */

/* The password from env:NAME or file:PATH (first line). */
char *
bud_redis_secret(const char *src)
{
	char	 buf[1024];
	FILE	*fp;
	size_t	 n;
	char	*v;

	if (strncmp(src, "env:", 4) == 0) {
		if ((v = getenv(src + 4)) == NULL || *v == '\0') {
			log_warnx("bud: budget_store_auth: %s is not set",
			    src + 4);
			return NULL;
		}
		return xstrdup(v);
	}
	if ((fp = fopen(src + 5, "re")) == NULL) {
		log_warn("bud: budget_store_auth: %s", src + 5);
		return NULL;
	}
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	v = buf[0] != '\0' ? xstrdup(buf) : NULL;
	OPENSSL_cleanse(buf, sizeof(buf));
	if (v == NULL)
		log_warnx("bud: budget_store_auth: %s is empty", src + 5);
	return v;
}

static void
sha1_hex(const char *s, char out[41])
{
	unsigned char	md[20];
	unsigned int	len = 0;

	if (EVP_Digest(s, strlen(s), md, &len, EVP_sha1(), NULL) != 1 ||
	    len != 20)
		fatalx("bud: SHA-1");
	util_hex_encode(md, sizeof(md), out);
}

int
bud_redis_open(const struct cfg *cfg)
{
	int	i;

	if (!cfg->c_bs_redis)
		return 0;
	brs.host = cfg->c_bs_host != NULL ? xstrdup(cfg->c_bs_host) : NULL;
	brs.port = cfg->c_bs_port;
	brs.unix_path = cfg->c_bs_unix != NULL ? xstrdup(cfg->c_bs_unix) :
	    NULL;
	/* rediss://: hiredis speaks plain Redis to the TLS relay */
	if (cfg->c_bs_tls) {
		if (bud_tls_start(cfg) == -1)
			return -1;
		brs.unix_path = xstrdup(bud_tls_path());
	}
	brs.db = cfg->c_bs_db;
	brs.timeout_ms = cfg->c_limits.l_store_timeout_ms;
	brs.lease_ms = cfg->c_limits.l_store_lease_ms;
	if (cfg->c_bs_auth != NULL &&
	    (brs.pass = bud_redis_secret(cfg->c_bs_auth)) == NULL)
		return -1;
	for (i = 0; i < BRS_N; i++)
		sha1_hex(brs_text[i], brs.sha[i]);
	util_random_hex(brs.gw, 8);
	brs.on = 1;
	log_info("bud: budget store %s (store_timeout %" PRIu64 " ms, lease "
	    "%" PRIu64 " ms)", cfg->c_budget_store, brs.timeout_ms,
	    brs.lease_ms);
	return 0;
}

/*
 * A worker is ending (its loop stopped, its connections freed): send what
 * it still has to say, for at most store_timeout, then drop its
 * connection. Runs on the worker's thread.
 */
void
bud_redis_worker_fini(void)
{
	struct brc		*c = tl_brc;
	struct brc_settle	*s;
	uint64_t		 until;

	if (c == NULL)
		return;
	until = util_now_ms() + brs.timeout_ms;
	evtimer_del(c->c_tick);
	while (c->c_ac != NULL && c->c_inflight > 0 && util_now_ms() < until) {
		event_base_loop(c->c_base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	if (c->c_ac != NULL)
		redisAsyncFree(c->c_ac);
	c->c_ac = NULL;
	brc_fail_ops(c);
	while ((s = TAILQ_FIRST(&c->c_settles)) != NULL) {
		TAILQ_REMOVE(&c->c_settles, s, s_entry);
		free(s->s_key);
		free(s);
	}
	event_free(c->c_tick);
	pthread_mutex_lock(&brc_mtx);
	free(c);
	tl_brc = NULL;
	pthread_mutex_unlock(&brc_mtx);
}

void
bud_redis_close(void)
{
	bud_tls_stop();
	free(brs.host);
	free(brs.unix_path);
	if (brs.pass != NULL) {
		OPENSSL_cleanse(brs.pass, strlen(brs.pass));
		free(brs.pass);
	}
	memset(&brs, 0, sizeof(brs));
}
