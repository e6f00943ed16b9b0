/*
 * The fleet's shared sandbox registry: see sbx_fleet.h for the keys.
 *
 * The thread: connect both connections (command, subscriber), send what
 * is queued, SUBSCRIBE, resynchronise (SMEMBERS, then HGETALL of what is
 * unknown here, and forget the fleet's sandboxes that are gone), then
 * poll the subscriber and a wake-up pipe. A lost connection drops both
 * and starts over after a backoff; the queue is kept.
 *
 * Redis away: the sandboxes known here keep working (tokens checked
 * against the local copy), a deletion here revokes at once and is
 * announced when Redis is back, creation is refused (SBX_E_FLEET), and a
 * sandbox this gateway never heard of is refused (nothing to check it
 * against).
 */
#include "config.h"

#include <sys/queue.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>

#include "budget/bud_redis.h"
#include "budget/bud_tls.h"
#include "cfg/cfg.h"
#include "cfg/cfg_internal.h"
#include "sbx/sbx.h"
#include "sbx/sbx_fleet.h"
#include "util/log.h"
#include "util/util.h"

#define SF_CHANNEL	"airlock:sbx"
#define SF_SET		"airlock:sbxs"
#define SF_GONE_TTL	"604800"	/* tombstones: a week */
#define SF_QMAX		4096		/* queued changes while away */
#define SF_MISS_MAX	64		/* pending read-throughs */
#define SF_RESYNC_MS	10000		/* the safety net under pub/sub */
#define SF_BACKOFF_MAX	5000

struct sf_op {
	TAILQ_ENTRY(sf_op)	 o_entry;
	char			 o_kind;	/* '+', '-', '?', 'Z' */
	char			*o_id;
	char			*o_policy;
	char			 o_tok[65];
	int64_t			 o_created;
	char			 o_addr[64];
	int			 o_started;	/* being sent or looked up */
	int			 o_tried;	/* sent once: Redis may have
						   it, even if it timed out */
	uint64_t		 o_seq;		/* '+', '-', 'Z': order */
};
TAILQ_HEAD(sf_q, sf_op);

/* A login waiting for a lookup (sbx_fleet_watch): woken once it ends;
 * an admin answer waiting for a change (sbx_fleet_ack_watch): w_op NULL,
 * woken once every change up to w_seq is in Redis. */
struct sf_watch {
	struct sf_watch		*w_next;
	const struct sf_op	*w_op;		/* compared, never followed */
	uint64_t		 w_seq;
	struct event		*w_ev;
};

/* The last change this thread queued (sbx_fleet_last_seq), 0: none. */
static __thread uint64_t	 sf_tl_seq;

static struct {
	int		 on;
	int		 ready;		/* atomic */
	int		 stop;		/* atomic */
	char		*host, *unix_path, *pass;
	int		 port, db;
	struct timeval	 tv;
	pthread_t	 thr;
	int		 wake[2];
	pthread_mutex_t	 mtx;
	struct sf_q	 q;		/* under mtx */
	struct sf_watch	*watch;		/* under mtx */
	struct sf_watch	*acks;		/* under mtx */
	uint64_t	 seq_pushed;	/* under mtx */
	uint64_t	 seq_sent;	/* under mtx: in Redis up to this */
	size_t		 nq, nmiss;
	redisContext	*cmd, *sub;
} sf = { .mtx = PTHREAD_MUTEX_INITIALIZER, .wake = { -1, -1 } };

static void	(*sf_revoke)(void);

void
sbx_fleet_set_revoke_hook(void (*fn)(void))
{
	sf_revoke = fn;
}

/* Forget <id> for the fleet and close its connections here. */
static int
sf_forget(const char *id)
{
	if (sbx_delete_quiet(id) != SBX_OK)
		return 0;
	if (sf_revoke != NULL)
		sf_revoke();
	return 1;
}

int
sbx_fleet_on(void)
{
	return sf.on;
}

int
sbx_fleet_ready(void)
{
	return !sf.on || __atomic_load_n(&sf.ready, __ATOMIC_ACQUIRE);
}

static void
sf_wake(void)
{
	char	c = 0;

	if (write(sf.wake[1], &c, 1) == -1 && errno != EAGAIN)
		log_warn("fleet registry: wake");
}

static void
sf_push(struct sf_op *o)
{
	pthread_mutex_lock(&sf.mtx);
	/* a deletion is kept on disk until in Redis (even one the full
	   queue drops: sent at the next start); a creation supersedes
	   one of the same id */
	if (o->o_kind == '-')
		sbx_fleet_pend_mark(o->o_id);
	else if (o->o_kind == '+')
		sbx_fleet_pend_clear(o->o_id);
	if (o->o_kind == '?' ? sf.nmiss >= SF_MISS_MAX : sf.nq >= SF_QMAX) {
		pthread_mutex_unlock(&sf.mtx);
		if (o->o_kind != '?')
			log_warnx("fleet registry: queue full; sandbox %s is "
			    "not announced", o->o_id);
		free(o->o_id);
		free(o->o_policy);
		free(o);
		return;
	}
	TAILQ_INSERT_TAIL(&sf.q, o, o_entry);
	if (o->o_kind == '?')
		sf.nmiss++;
	else {
		sf.nq++;
		o->o_seq = sf_tl_seq = ++sf.seq_pushed;
	}
	pthread_mutex_unlock(&sf.mtx);
	sf_wake();
}

/* Wake the admin answers waiting for changes now in Redis (every one
 * when <all>); under mtx. */
static void
sf_wake_acks(int all)
{
	struct sf_watch	**wp = &sf.acks, *w;

	while ((w = *wp) != NULL) {
		if (!all && w->w_seq > sf.seq_sent) {
			wp = &w->w_next;
			continue;
		}
		*wp = w->w_next;
		event_active(w->w_ev, EV_TIMEOUT, 1);
		free(w);
	}
}

uint64_t
sbx_fleet_last_seq(void)
{
	return sf_tl_seq;
}

int
sbx_fleet_acked(uint64_t seq)
{
	int	rv;

	if (!sf.on)
		return 1;
	pthread_mutex_lock(&sf.mtx);
	rv = seq != 0 && sf.seq_sent >= seq;
	pthread_mutex_unlock(&sf.mtx);
	return rv;
}

int
sbx_fleet_ack_watch(uint64_t seq, struct event *ev)
{
	struct sf_watch	*w;

	if (!sf.on || seq == 0)
		return -1;
	pthread_mutex_lock(&sf.mtx);
	if (sf.seq_sent >= seq) {
		pthread_mutex_unlock(&sf.mtx);
		return 1;
	}
	w = xcalloc(1, sizeof(*w));
	w->w_seq = seq;
	w->w_ev = ev;
	w->w_next = sf.acks;
	sf.acks = w;
	pthread_mutex_unlock(&sf.mtx);
	return 0;
}

int
sbx_fleet_cancel(uint64_t seq)
{
	struct sf_op	*o;

	if (!sf.on || seq == 0)
		return 0;
	pthread_mutex_lock(&sf.mtx);
	TAILQ_FOREACH(o, &sf.q, o_entry)
		if (o->o_kind != '?' && o->o_seq == seq && !o->o_tried)
			break;
	if (o != NULL) {
		TAILQ_REMOVE(&sf.q, o, o_entry);
		sf.nq--;
	}
	pthread_mutex_unlock(&sf.mtx);
	if (o == NULL)
		return 0;
	free(o->o_id);
	free(o->o_policy);
	free(o);
	return 1;
}

/* Wake the logins waiting for <o> (every one when NULL); under mtx. */
static void
sf_wake_watchers(const struct sf_op *o)
{
	struct sf_watch	**wp = &sf.watch, *w;

	while ((w = *wp) != NULL) {
		if (o != NULL && w->w_op != o) {
			wp = &w->w_next;
			continue;
		}
		*wp = w->w_next;
		event_active(w->w_ev, EV_TIMEOUT, 1);
		free(w);
	}
}

int
sbx_fleet_watch(const char *id, struct event *ev)
{
	struct sf_op	*o;
	struct sf_watch	*w;

	if (!sf.on || !cfg_name_ok(id) ||
	    !__atomic_load_n(&sf.ready, __ATOMIC_ACQUIRE))
		return -1;
	pthread_mutex_lock(&sf.mtx);
	/* a lookup of <id> not begun yet answers this login too */
	TAILQ_FOREACH(o, &sf.q, o_entry)
		if (o->o_kind == '?' && !o->o_started &&
		    strcmp(o->o_id, id) == 0)
			break;
	if (o == NULL) {
		if (sf.nmiss >= SF_MISS_MAX) {
			pthread_mutex_unlock(&sf.mtx);
			return -1;
		}
		o = xcalloc(1, sizeof(*o));
		o->o_kind = '?';
		o->o_id = xstrdup(id);
		TAILQ_INSERT_TAIL(&sf.q, o, o_entry);
		sf.nmiss++;
	}
	w = xcalloc(1, sizeof(*w));
	w->w_op = o;
	w->w_ev = ev;
	w->w_next = sf.watch;
	sf.watch = w;
	pthread_mutex_unlock(&sf.mtx);
	sf_wake();
	return 0;
}

void
sbx_fleet_unwatch(struct event *ev)
{
	struct sf_watch	**wp = &sf.watch, *w;

	if (!sf.on)
		return;
	pthread_mutex_lock(&sf.mtx);
	while ((w = *wp) != NULL) {
		if (w->w_ev == ev) {
			*wp = w->w_next;
			free(w);
		} else
			wp = &w->w_next;
	}
	for (wp = &sf.acks; (w = *wp) != NULL; ) {
		if (w->w_ev == ev) {
			*wp = w->w_next;
			free(w);
		} else
			wp = &w->w_next;
	}
	pthread_mutex_unlock(&sf.mtx);
}

void
sbx_fleet_announce(const char *id, const char *policy,
    const unsigned char sha[32], int64_t created, const char *addr)
{
	struct sf_op	*o;

	sf_tl_seq = 0;
	if (!sf.on)
		return;
	o = xcalloc(1, sizeof(*o));
	o->o_kind = '+';
	o->o_id = xstrdup(id);
	o->o_policy = xstrdup(policy);
	util_hex_encode(sha, 32, o->o_tok);
	o->o_created = created;
	snprintf(o->o_addr, sizeof(o->o_addr), "%s", addr);
	sf_push(o);
}

void
sbx_fleet_retract(const char *id)
{
	struct sf_op	*o;

	sf_tl_seq = 0;
	if (!sf.on)
		return;
	o = xcalloc(1, sizeof(*o));
	o->o_kind = '-';
	o->o_id = xstrdup(id);
	sf_push(o);
}

void
sbx_fleet_reset(const char *id)
{
	struct sf_op	*o;

	sf_tl_seq = 0;
	if (!sf.on || !cfg_name_ok(id))
		return;
	o = xcalloc(1, sizeof(*o));
	o->o_kind = 'Z';
	o->o_id = xstrdup(id);
	sf_push(o);
}

static redisReply	*sf_cmd(int, const char **);
static int		 sf_cmd_ok(int, const char **);

/* The shared counters of <id>'s windows go (airlock:{ID}:w:*, see
 * bud_rscript.h; ids need no escaping); its live reservations stay, as
 * with the file store. */
static int
sf_reset(const char *id)
{
	const char	*argv[6];
	char		 pat[128], cur[32] = "0";
	redisReply	*r;
	size_t		 i;

	snprintf(pat, sizeof(pat), "airlock:{%s}:w:*", id);
	do {
		argv[0] = "SCAN"; argv[1] = cur;
		argv[2] = "MATCH"; argv[3] = pat;
		argv[4] = "COUNT"; argv[5] = "1000";
		if ((r = sf_cmd(6, argv)) == NULL)
			return -1;
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(r);
			return 0;
		}
		snprintf(cur, sizeof(cur), "%s", r->element[0]->str);
		for (i = 0; i < r->element[1]->elements; i++) {
			if (r->element[1]->element[i]->type !=
			    REDIS_REPLY_STRING)
				continue;
			argv[0] = "DEL";
			argv[1] = r->element[1]->element[i]->str;
			if (sf_cmd_ok(2, argv) == -1) {
				freeReplyObject(r);
				return -1;
			}
		}
		freeReplyObject(r);
	} while (strcmp(cur, "0") != 0);
	log_info("sandbox %s: shared usage reset", id);
	return 0;
}

void
sbx_fleet_miss(const char *id)
{
	struct sf_op	*o;

	if (!sf.on || !cfg_name_ok(id) ||
	    !__atomic_load_n(&sf.ready, __ATOMIC_ACQUIRE))
		return;
	o = xcalloc(1, sizeof(*o));
	o->o_kind = '?';
	o->o_id = xstrdup(id);
	sf_push(o);
}

/* ---- the thread ---------------------------------------------------- */

static void
sf_drop(void)
{
	if (sf.cmd != NULL)
		redisFree(sf.cmd);
	if (sf.sub != NULL)
		redisFree(sf.sub);
	sf.cmd = sf.sub = NULL;
	__atomic_store_n(&sf.ready, 0, __ATOMIC_RELEASE);
	/* Redis away: the waiting logins are answered now (refused) */
	pthread_mutex_lock(&sf.mtx);
	sf_wake_watchers(NULL);
	pthread_mutex_unlock(&sf.mtx);
}

/* A command on the command connection: its reply, or NULL (then the
 * connections are dropped). */
static redisReply *
sf_cmd(int argc, const char **argv)
{
	redisReply	*r;

	r = redisCommandArgv(sf.cmd, argc, argv, NULL);
	if (r == NULL) {
		log_warnx("fleet registry: redis: %s", sf.cmd->errstr);
		sf_drop();
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		log_warnx("fleet registry: redis: %s", r->str);
		freeReplyObject(r);
		sf_drop();
		return NULL;
	}
	return r;
}

static int
sf_cmd_ok(int argc, const char **argv)
{
	redisReply	*r;

	if ((r = sf_cmd(argc, argv)) == NULL)
		return -1;
	freeReplyObject(r);
	return 0;
}

static redisContext *
sf_connect1(void)
{
	redisContext	*c;
	redisReply	*r;
	char		 db[12];

	c = sf.unix_path != NULL ?
	    redisConnectUnixWithTimeout(sf.unix_path, sf.tv) :
	    redisConnectWithTimeout(sf.host, sf.port, sf.tv);
	if (c == NULL || c->err) {
		if (c != NULL)
			redisFree(c);
		return NULL;
	}
	/* SMEMBERS answers every sandbox of the fleet: more than the
	   budget scripts' few elements */
	bud_redis_reader_guard_list(c->reader);
	redisSetTimeout(c, sf.tv);
	if (sf.pass != NULL) {
		r = redisCommand(c, "AUTH %s", sf.pass);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			log_warnx("fleet registry: redis AUTH refused");
			if (r != NULL)
				freeReplyObject(r);
			redisFree(c);
			return NULL;
		}
		freeReplyObject(r);
	}
	if (sf.db != 0) {
		snprintf(db, sizeof(db), "%d", sf.db);
		r = redisCommand(c, "SELECT %s", db);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			if (r != NULL)
				freeReplyObject(r);
			redisFree(c);
			return NULL;
		}
		freeReplyObject(r);
	}
	return c;
}

static void
sf_key(char *buf, size_t sz, const char *what, const char *id)
{
	snprintf(buf, sz, "airlock:%s:%s", what, id);
}

/* Send one queued change. 0, or -1 (connection dropped). */
static int
sf_send(const struct sf_op *o)
{
	const char	*argv[12];
	char		 key[128], gone[128], cr[24], msg[80];

	sf_key(key, sizeof(key), "sbx", o->o_id);
	sf_key(gone, sizeof(gone), "sbx-gone", o->o_id);
	snprintf(msg, sizeof(msg), "%c%s", o->o_kind, o->o_id);
	if (o->o_kind == '+') {
		snprintf(cr, sizeof(cr), "%" PRId64, o->o_created);
		argv[0] = "HSET"; argv[1] = key;
		argv[2] = "policy"; argv[3] = o->o_policy;
		argv[4] = "tok"; argv[5] = o->o_tok;
		argv[6] = "created"; argv[7] = cr;
		argv[8] = "addr"; argv[9] = o->o_addr;
		if (sf_cmd_ok(10, argv) == -1)
			return -1;
		argv[0] = "DEL"; argv[1] = gone;
		if (sf_cmd_ok(2, argv) == -1)
			return -1;
		argv[0] = "SADD";
	} else {
		argv[0] = "DEL"; argv[1] = key;
		if (sf_cmd_ok(2, argv) == -1)
			return -1;
		argv[0] = "SET"; argv[1] = gone; argv[2] = "1";
		argv[3] = "EX"; argv[4] = SF_GONE_TTL;
		if (sf_cmd_ok(5, argv) == -1)
			return -1;
		argv[0] = "SREM";
	}
	argv[1] = SF_SET;
	argv[2] = o->o_id;
	if (sf_cmd_ok(3, argv) == -1)
		return -1;
	argv[0] = "PUBLISH"; argv[1] = SF_CHANNEL; argv[2] = msg;
	return sf_cmd_ok(3, argv);
}

/* Read <id>'s record and make it known here. 0 (also: no such record),
 * or -1 (connection dropped). */
static int
sf_fetch(const char *id)
{
	const char	*argv[2];
	char		 key[128];
	const char	*policy = NULL, *tok = NULL, *addr = "";
	unsigned char	 sha[32];
	int64_t		 created = 0;
	redisReply	*r;
	size_t		 i;
	int		 hi, lo;

	if (!cfg_name_ok(id))
		return 0;
	sf_key(key, sizeof(key), "sbx", id);
	argv[0] = "HGETALL";
	argv[1] = key;
	if ((r = sf_cmd(2, argv)) == NULL)
		return -1;
	if (r->type != REDIS_REPLY_ARRAY)
		goto out;
	for (i = 0; i + 1 < r->elements; i += 2) {
		const redisReply *k = r->element[i], *v = r->element[i + 1];

		if (k->type != REDIS_REPLY_STRING ||
		    v->type != REDIS_REPLY_STRING)
			continue;
		if (strcmp(k->str, "policy") == 0)
			policy = v->str;
		else if (strcmp(k->str, "tok") == 0)
			tok = v->str;
		else if (strcmp(k->str, "created") == 0)
			created = strtoll(v->str, NULL, 10);
		else if (strcmp(k->str, "addr") == 0 && v->len < 64)
			addr = v->str;
	}
	if (policy == NULL || tok == NULL || strlen(tok) != 64)
		goto out;
	for (i = 0; i < 32; i++) {
		if ((hi = util_hex_val(tok[2 * i])) < 0 ||
		    (lo = util_hex_val(tok[2 * i + 1])) < 0)
			goto out;
		sha[i] = (unsigned char)(hi << 4 | lo);
	}
	sbx_put_remote(id, policy, sha, created, addr);
out:
	freeReplyObject(r);
	return 0;
}

/* Is <id> in the SMEMBERS reply <r>? */
static int
sf_member(const redisReply *r, const char *id)
{
	size_t	i;

	for (i = 0; i < r->elements; i++)
		if (r->element[i]->type == REDIS_REPLY_STRING &&
		    strcmp(r->element[i]->str, id) == 0)
			return 1;
	return 0;
}

/*
 * The whole registry against ours: what we do not know is fetched; a
 * fleet sandbox no longer there is forgotten; one of ours that Redis
 * never had is announced, unless a tombstone says the fleet deleted it
 * while this gateway was away (then it goes: deletion wins).
 */
static int
sf_resync(void)
{
	const char	*argv[2] = { "SMEMBERS", SF_SET };
	struct sbx	**v;
	redisReply	*r, *g;
	char		 gone[128];
	size_t		 i, n;
	int		 rv = 0;

	if ((r = sf_cmd(2, argv)) == NULL)
		return -1;
	if (r->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return 0;
	}
	for (i = 0; i < r->elements && rv == 0; i++) {
		struct sbx	*s;

		if (r->element[i]->type != REDIS_REPLY_STRING)
			continue;
		if ((s = sbx_find(r->element[i]->str)) != NULL) {
			sbx_unref(s);
			continue;
		}
		rv = sf_fetch(r->element[i]->str);
	}
	n = sbx_list(&v);
	for (i = 0; i < n && rv == 0; i++) {
		if (v[i]->sb_static || (v[i]->sb_flags & SBX_F_POOLED) ||
		    sf_member(r, v[i]->sb_id))
			continue;
		if (v[i]->sb_flags & SBX_F_REMOTE) {
			sf_forget(v[i]->sb_id);
			continue;
		}
		sf_key(gone, sizeof(gone), "sbx-gone", v[i]->sb_id);
		argv[0] = "EXISTS";
		argv[1] = gone;
		if ((g = sf_cmd(2, argv)) == NULL) {
			rv = -1;
			break;
		}
		if (g->type == REDIS_REPLY_INTEGER && g->integer == 1) {
			log_info("sandbox %s: deleted by the fleet while this "
			    "gateway was away", v[i]->sb_id);
			sf_forget(v[i]->sb_id);
		} else
			sbx_fleet_announce(v[i]->sb_id, v[i]->sb_policy,
			    v[i]->sb_token_sha, v[i]->sb_created, "");
		freeReplyObject(g);
	}
	sbx_list_free(v, n);
	freeReplyObject(r);
	return rv;
}

static int
sf_connect(void)
{
	redisReply	*r;

	if ((sf.cmd = sf_connect1()) == NULL ||
	    (sf.sub = sf_connect1()) == NULL) {
		sf_drop();
		return -1;
	}
	r = redisCommand(sf.sub, "SUBSCRIBE %s", SF_CHANNEL);
	if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
		if (r != NULL)
			freeReplyObject(r);
		sf_drop();
		return -1;
	}
	freeReplyObject(r);
	return 0;
}

/* A change <kind> of <id> is queued; under mtx. */
static int
sf_queued(char kind, const char *id)
{
	struct sf_op	*o;

	TAILQ_FOREACH(o, &sf.q, o_entry)
		if (o->o_kind == kind && strcmp(o->o_id, id) == 0)
			return 1;
	return 0;
}

/* Send the queue, oldest first; an op leaves it once sent. */
static int
sf_flush(void)
{
	struct sf_op	*o;
	int		 rv = 0;

	for (;;) {
		pthread_mutex_lock(&sf.mtx);
		if ((o = TAILQ_FIRST(&sf.q)) != NULL)
			o->o_started = o->o_tried = 1;
		pthread_mutex_unlock(&sf.mtx);
		if (o == NULL)
			return 0;
		if (o->o_kind == '?') {
			struct sbx *s = sbx_find(o->o_id);

			if (s == NULL)
				rv = sf_fetch(o->o_id);
			sbx_unref(s);
		} else if (o->o_kind == 'Z')
			rv = sf_reset(o->o_id);
		else
			rv = sf_send(o);
		pthread_mutex_lock(&sf.mtx);
		if (rv == -1) {
			o->o_started = 0;	/* sent again once back */
			pthread_mutex_unlock(&sf.mtx);
			return -1;
		}
		TAILQ_REMOVE(&sf.q, o, o_entry);
		if (o->o_kind == '?') {
			sf.nmiss--;
			sf_wake_watchers(o);	/* known now, or not at all */
		} else {
			sf.nq--;
			sf.seq_sent = o->o_seq;	/* in order: all before too */
			sf_wake_acks(0);
			if (o->o_kind == '-' && !sf_queued('-', o->o_id))
				sbx_fleet_pend_clear(o->o_id);
		}
		pthread_mutex_unlock(&sf.mtx);
		free(o->o_id);
		free(o->o_policy);
		free(o);
	}
}

/* One published message: ["message", channel, "+id" | "-id"]. */
static int
sf_message(const redisReply *r)
{
	const char	*m;
	struct sbx	*s;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    strcmp(r->element[0]->str, "message") != 0 ||
	    r->element[2]->type != REDIS_REPLY_STRING ||
	    r->element[2]->len < 2)
		return 0;
	m = r->element[2]->str;
	if (m[0] == '-') {
		if (sf_forget(m + 1))
			log_info("sandbox %s: deleted by another gateway",
			    m + 1);
		return 0;
	}
	if (m[0] != '+')
		return 0;
	if ((s = sbx_find(m + 1)) != NULL) {
		sbx_unref(s);
		return 0;
	}
	return sf_fetch(m + 1);
}

static void *
sf_main(void *arg)
{
	struct pollfd	 pf[2];
	redisReply	*r;
	uint64_t	 backoff = 0, resync_at = 0;
	char		 buf[64];
	int		 n;

	(void)arg;
	while (!__atomic_load_n(&sf.stop, __ATOMIC_ACQUIRE)) {
		if (sf.sub == NULL) {
			if (sf_connect() == -1 || sf_flush() == -1 ||
			    sf_resync() == -1) {
				sf_drop();
				backoff = backoff == 0 ? 100 :
				    backoff * 2 > SF_BACKOFF_MAX ?
				    SF_BACKOFF_MAX : backoff * 2;
				pf[0].fd = sf.wake[0];
				pf[0].events = POLLIN;
				(void)poll(pf, 1, (int)backoff);
				while (read(sf.wake[0], buf, sizeof(buf)) > 0)
					;
				continue;
			}
			if (backoff != 0 || resync_at == 0)
				log_info("fleet registry: connected");
			backoff = 0;
			resync_at = util_now_ms() + SF_RESYNC_MS;
			__atomic_store_n(&sf.ready, 1, __ATOMIC_RELEASE);
		}
		pf[0].fd = sf.wake[0];
		pf[0].events = POLLIN;
		pf[1].fd = sf.sub->fd;
		pf[1].events = POLLIN;
		n = poll(pf, 2, 1000);
		if (n == -1 && errno != EINTR) {
			log_warn("fleet registry: poll");
			sf_drop();
			continue;
		}
		if (pf[0].revents & POLLIN)
			while (read(sf.wake[0], buf, sizeof(buf)) > 0)
				;
		if (sf_flush() == -1)
			continue;
		if (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (redisBufferRead(sf.sub) != REDIS_OK) {
				log_warnx("fleet registry: subscription lost");
				sf_drop();
				continue;
			}
			while (sf.sub != NULL && redisGetReplyFromReader(
			    sf.sub, (void **)&r) == REDIS_OK && r != NULL) {
				n = sf_message(r);
				freeReplyObject(r);
				if (n == -1)
					break;
			}
			if (sf.sub != NULL && sf.sub->err) {
				sf_drop();
				continue;
			}
		}
		if (sf.sub != NULL && util_now_ms() >= resync_at) {
			if (sf_resync() == -1)
				continue;
			resync_at = util_now_ms() + SF_RESYNC_MS;
		}
	}
	sf_drop();
	return NULL;
}

/* At start: a deletion kept from before the last stop is sent again,
 * unless the sandbox was made again here since (then announced). */
static void
sf_pend_requeue(const char *id)
{
	struct sbx	*s;

	if ((s = sbx_find(id)) != NULL) {
		sbx_unref(s);
		sbx_fleet_pend_clear(id);
		return;
	}
	log_info("sandbox %s: its deletion is sent to the fleet again (not "
	    "in Redis at the last stop)", id);
	sbx_fleet_retract(id);
}

int
sbx_fleet_start(const struct cfg *cfg)
{
	uint64_t	ms;

	if (!cfg->c_bs_redis || sf.on)
		return 0;
	TAILQ_INIT(&sf.q);
	sf.host = cfg->c_bs_host != NULL ? xstrdup(cfg->c_bs_host) : NULL;
	sf.port = cfg->c_bs_port;
	sf.unix_path = bud_tls_path() != NULL ? xstrdup(bud_tls_path()) :
	    cfg->c_bs_unix != NULL ? xstrdup(cfg->c_bs_unix) : NULL;
	sf.db = cfg->c_bs_db;
	if (cfg->c_bs_auth != NULL &&
	    (sf.pass = bud_redis_secret(cfg->c_bs_auth)) == NULL)
		return -1;
	ms = cfg->c_limits.l_store_timeout_ms;
	sf.tv.tv_sec = (time_t)(ms / 1000);
	sf.tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	if (pipe2(sf.wake, O_CLOEXEC | O_NONBLOCK) == -1) {
		log_warn("fleet registry: pipe");
		return -1;
	}
	sf.on = 1;
	sbx_fleet_pend_load(cfg->c_state_dir, sf_pend_requeue);
	if ((errno = pthread_create(&sf.thr, NULL, sf_main, NULL)) != 0) {
		log_warn("fleet registry: thread");
		sf.on = 0;
		return -1;
	}
	return 0;
}

void
sbx_fleet_stop(void)
{
	struct sf_op	*o;

	if (!sf.on)
		return;
	__atomic_store_n(&sf.stop, 1, __ATOMIC_RELEASE);
	sf_wake();
	pthread_join(sf.thr, NULL);
	pthread_mutex_lock(&sf.mtx);
	sf_wake_watchers(NULL);
	sf_wake_acks(1);
	pthread_mutex_unlock(&sf.mtx);
	while ((o = TAILQ_FIRST(&sf.q)) != NULL) {
		TAILQ_REMOVE(&sf.q, o, o_entry);
		free(o->o_id);
		free(o->o_policy);
		free(o);
	}
	close(sf.wake[0]);
	close(sf.wake[1]);
	free(sf.host);
	free(sf.unix_path);
	if (sf.pass != NULL) {
		OPENSSL_cleanse(sf.pass, strlen(sf.pass));
		free(sf.pass);
	}
	sf.host = sf.unix_path = sf.pass = NULL;
	sbx_fleet_pend_free();
	sf.on = 0;
	sf.stop = 0;
}
