/*
 * The registry of approval holds and runtime rules (pol_ask.h). Small
 * lists under one mutex: holds are bounded per sandbox, rules are what
 * operators approved by hand.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netdb.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>
#include <openssl/rand.h>

#include "metrics/metrics.h"
#include "policy/pol_ask.h"
#include "util/log.h"
#include "util/util.h"

struct ask_hold {
	TAILQ_ENTRY(ask_hold)	 h_entry;
	uint64_t		 h_id;
	char			 h_request_id[32];
	char			 h_sandbox[72];
	char			 h_policy[72];
	char			 h_method[24];
	char			 h_host[256];
	int			 h_port;
	char			*h_path;
	uint64_t		 h_created_ms;	/* wall */
	uint64_t		 h_deadline;	/* monotonic ms */
	enum ask_state		 h_state;
	struct event		*h_ev;		/* NULL once made active */
	struct event		*h_wev;		/* the connection's, kept */
};
TAILQ_HEAD(ask_holds, ask_hold);

struct ask_rule {
	char		 r_id[20];
	enum ask_scope	 r_scope;	/* SANDBOX or POLICY */
	char		 r_subject[72];	/* the sandbox id or policy name */
	char		 r_host[256];
	int		 r_port;
	int		 r_request;	/* kept to r_method and r_path */
	char		 r_method[24];
	char		 r_path[ASK_RULE_PATH]; /* exact; "" a tunnel's */
	uint64_t	 r_created_ms;	/* wall */
	uint64_t	 r_expires_ms;	/* wall; 0 = no end */
};

/* A webhook body waiting for the thread. */
struct ask_post {
	STAILQ_ENTRY(ask_post)	 p_entry;
	char			*p_url;
	char			*p_body;
};
STAILQ_HEAD(ask_posts, ask_post);

static struct {
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cv;
	pthread_t		 thr;
	int			 running, stop;
	struct ask_holds	 holds;
	uint64_t		 seq;
	struct ask_rule		*rules;
	size_t			 nrules;
	char			*file;		/* approvals.json */
	struct ask_posts	 posts;
} ask = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.holds = TAILQ_HEAD_INITIALIZER(ask.holds),
	.posts = STAILQ_HEAD_INITIALIZER(ask.posts),
};

static const char *const ask_scope_names[] = { "once", "sandbox", "policy" };

static json_object	*ask_rules_json_locked(void);

static uint64_t
ask_wall_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* End hold <h> (mutex held): its connection resumes and reads the state. */
static void
ask_end(struct ask_hold *h, enum ask_state st)
{
	h->h_state = st;
	if (h->h_ev != NULL) {
		event_active(h->h_ev, EV_TIMEOUT, 1);
		h->h_ev = NULL;
	}
}

static void
ask_hold_free(struct ask_hold *h)
{
	free(h->h_path);
	free(h);
}

/* Write the rules out (mutex held): a new file renamed over the old. */
static void
ask_save(void)
{
	json_object	*o;
	char		*tmp;
	FILE		*f;
	int		 ok;

	if (ask.file == NULL)
		return;
	o = ask_rules_json_locked();
	tmp = xmalloc(strlen(ask.file) + 5);
	sprintf(tmp, "%s.tmp", ask.file);
	if ((f = fopen(tmp, "w")) == NULL) {
		log_warn("approvals: %s", tmp);
		goto out;
	}
	ok = fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY),
	    f) >= 0 && fputc('\n', f) != EOF && fflush(f) == 0 &&
	    fsync(fileno(f)) == 0;
	if (fclose(f) != 0 || !ok || rename(tmp, ask.file) == -1) {
		log_warn("approvals: cannot write %s", ask.file);
		(void)unlink(tmp);
	}
out:
	free(tmp);
	json_object_put(o);
}

static json_object *
ask_rule_json(const struct ask_rule *r)
{
	json_object	*o = json_object_new_object();

	json_object_object_add(o, "id", json_object_new_string(r->r_id));
	json_object_object_add(o, "scope",
	    json_object_new_string(ask_scope_names[r->r_scope]));
	json_object_object_add(o, r->r_scope == ASK_SANDBOX ? "sandbox" :
	    "policy", json_object_new_string(r->r_subject));
	json_object_object_add(o, "host", json_object_new_string(r->r_host));
	json_object_object_add(o, "port", json_object_new_int(r->r_port));
	json_object_object_add(o, "match", json_object_new_string(
	    r->r_request ? "request" : "host"));
	if (r->r_request) {
		json_object_object_add(o, "method",
		    json_object_new_string(r->r_method));
		json_object_object_add(o, "path",
		    json_object_new_string(r->r_path));
	}
	json_object_object_add(o, "created_ms",
	    json_object_new_int64((int64_t)r->r_created_ms));
	json_object_object_add(o, "expires_ms", r->r_expires_ms == 0 ? NULL :
	    json_object_new_int64((int64_t)r->r_expires_ms));
	return o;
}

/* Drop the rules whose time is over (mutex held); 1 when one went. */
static int
ask_rules_expire(uint64_t now)
{
	size_t	i, j;

	for (i = j = 0; i < ask.nrules; i++)
		if (ask.rules[i].r_expires_ms == 0 ||
		    ask.rules[i].r_expires_ms > now)
			ask.rules[j++] = ask.rules[i];
	if (j == ask.nrules)
		return 0;
	ask.nrules = j;
	return 1;
}

static json_object *
ask_rules_json_locked(void)
{
	json_object	*o = json_object_new_object(), *a;
	size_t		 i;

	a = json_object_new_array();
	for (i = 0; i < ask.nrules; i++)
		json_object_array_add(a, ask_rule_json(&ask.rules[i]));
	json_object_object_add(o, "rules", a);
	return o;
}

json_object *
ask_rules_json(void)
{
	json_object	*o;

	pthread_mutex_lock(&ask.mtx);
	if (ask_rules_expire(ask_wall_ms()))
		ask_save();
	o = ask_rules_json_locked();
	pthread_mutex_unlock(&ask.mtx);
	return o;
}

static int
ask_rule_covers(const struct ask_rule *r, const char *sandbox,
    const char *policy, const char *host, int port, const char *method,
    const char *path, uint64_t now)
{
	const char	*subject = r->r_scope == ASK_SANDBOX ? sandbox : policy;

	if (r->r_request && (strcmp(r->r_method, method) != 0 ||
	    strcmp(r->r_path, path != NULL ? path : "") != 0))
		return 0;
	return (r->r_expires_ms == 0 || r->r_expires_ms > now) &&
	    subject != NULL && strcmp(r->r_subject, subject) == 0 &&
	    r->r_port == port && strcmp(r->r_host, host) == 0;
}

int
ask_rule_allows(const char *sandbox, const char *policy, const char *host,
    int port, const char *method, const char *path)
{
	uint64_t	now;
	size_t		i;
	int		yes = 0;

	pthread_mutex_lock(&ask.mtx);
	if (ask.nrules > 0) {
		now = ask_wall_ms();
		for (i = 0; i < ask.nrules && !yes; i++)
			yes = ask_rule_covers(&ask.rules[i], sandbox, policy,
			    host, port, method, path, now);
	}
	pthread_mutex_unlock(&ask.mtx);
	return yes;
}

int
ask_rule_revoke(const char *id)
{
	size_t	i;
	int	rc = -1;

	pthread_mutex_lock(&ask.mtx);
	for (i = 0; i < ask.nrules; i++)
		if (strcmp(ask.rules[i].r_id, id) == 0) {
			memmove(&ask.rules[i], &ask.rules[i + 1],
			    (ask.nrules - i - 1) * sizeof(ask.rules[0]));
			ask.nrules--;
			ask_save();
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&ask.mtx);
	return rc;
}

/* Hold <h> as JSON: what the webhook and GET /v1/pending show (the
 * list adds the policy and the times). */
static json_object *
ask_hold_json(const struct ask_hold *h, int full, uint64_t now)
{
	json_object	*o = json_object_new_object();
	char		 id[24];

	snprintf(id, sizeof(id), "%" PRIu64, h->h_id);
	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "request_id",
	    json_object_new_string(h->h_request_id));
	json_object_object_add(o, "sandbox",
	    json_object_new_string(h->h_sandbox));
	if (full)
		json_object_object_add(o, "policy",
		    json_object_new_string(h->h_policy));
	json_object_object_add(o, "method", json_object_new_string(h->h_method));
	json_object_object_add(o, "host", json_object_new_string(h->h_host));
	json_object_object_add(o, "port", json_object_new_int(h->h_port));
	json_object_object_add(o, "path", h->h_path == NULL ? NULL :
	    json_object_new_string(h->h_path));
	if (!full)
		return o;
	json_object_object_add(o, "held_since_ms",
	    json_object_new_int64((int64_t)h->h_created_ms));
	json_object_object_add(o, "expires_in_ms", json_object_new_int64(
	    h->h_deadline > now ? (int64_t)(h->h_deadline - now) : 0));
	return o;
}

/* The webhook's body for hold <h>. */
static char *
ask_post_body(const struct ask_hold *h)
{
	json_object	*o = ask_hold_json(h, 0, 0);
	char		*s;

	s = xstrdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return s;
}

uint64_t
ask_hold(const struct ask_req *q, struct event *ev, uint64_t timeout_ms,
    size_t max_per_sandbox, const char *webhook)
{
	struct ask_hold	*h, *o, *oldest = NULL;
	struct ask_post	*p;
	size_t		 n = 0;
	uint64_t	 id;

	h = xcalloc(1, sizeof(*h));
	util_copy_str(h->h_request_id, q->aq_request_id,
	    sizeof(h->h_request_id));
	util_copy_str(h->h_sandbox, q->aq_sandbox != NULL ? q->aq_sandbox : "",
	    sizeof(h->h_sandbox));
	util_copy_str(h->h_policy, q->aq_policy, sizeof(h->h_policy));
	util_copy_str(h->h_method, q->aq_method, sizeof(h->h_method));
	util_copy_str(h->h_host, q->aq_host, sizeof(h->h_host));
	h->h_port = q->aq_port;
	h->h_path = q->aq_path != NULL ? xstrdup(q->aq_path) : NULL;
	h->h_created_ms = ask_wall_ms();
	h->h_deadline = util_now_ms() + timeout_ms;
	h->h_ev = h->h_wev = ev;
	pthread_mutex_lock(&ask.mtx);
	/* a sandbox cannot flood the list: its oldest hold gives way */
	TAILQ_FOREACH(o, &ask.holds, h_entry)
		if (o->h_state == ASK_WAITING &&
		    strcmp(o->h_sandbox, h->h_sandbox) == 0 && n++ == 0)
			oldest = o;
	if (oldest != NULL && n >= max_per_sandbox) {
		ask_end(oldest, ASK_REFUSED);
		met_hold(MET_HOLD_DENIED);
	}
	h->h_id = id = ++ask.seq;
	TAILQ_INSERT_TAIL(&ask.holds, h, h_entry);
	if (webhook != NULL) {
		p = xcalloc(1, sizeof(*p));
		p->p_url = xstrdup(webhook);
		p->p_body = ask_post_body(h);
		STAILQ_INSERT_TAIL(&ask.posts, p, p_entry);
	}
	pthread_cond_signal(&ask.cv);
	pthread_mutex_unlock(&ask.mtx);
	met_hold(MET_HOLD_HELD);
	return id;
}

enum ask_state
ask_take(uint64_t id, uint64_t *left_ms)
{
	struct ask_hold	*h;
	enum ask_state	 st = ASK_GONE;
	uint64_t	 now = util_now_ms();

	pthread_mutex_lock(&ask.mtx);
	TAILQ_FOREACH(h, &ask.holds, h_entry)
		if (h->h_id == id)
			break;
	if (h != NULL) {
		st = h->h_state;
		if (st == ASK_WAITING && now >= h->h_deadline)
			st = ASK_TIMEOUT;
		if (st != ASK_WAITING) {
			TAILQ_REMOVE(&ask.holds, h, h_entry);
			ask_hold_free(h);
		} else if (left_ms != NULL)
			*left_ms = h->h_deadline - now;
	}
	pthread_mutex_unlock(&ask.mtx);
	return st;
}

void
ask_unwatch(struct event *ev)
{
	struct ask_hold	*h, *next;

	if (ev == NULL)
		return;
	pthread_mutex_lock(&ask.mtx);
	for (h = TAILQ_FIRST(&ask.holds); h != NULL; h = next) {
		next = TAILQ_NEXT(h, h_entry);
		/* an ended hold's event was made active already: still
		   the connection's, so forgotten with it */
		if (h->h_ev != ev && h->h_wev != ev)
			continue;
		TAILQ_REMOVE(&ask.holds, h, h_entry);
		ask_hold_free(h);
	}
	pthread_mutex_unlock(&ask.mtx);
}

json_object *
ask_pending_json(void)
{
	json_object	*o = json_object_new_object(), *a;
	struct ask_hold	*h;
	uint64_t	 now = util_now_ms();

	a = json_object_new_array();
	pthread_mutex_lock(&ask.mtx);
	TAILQ_FOREACH(h, &ask.holds, h_entry)
		if (h->h_state == ASK_WAITING)
			json_object_array_add(a, ask_hold_json(h, 1, now));
	pthread_mutex_unlock(&ask.mtx);
	json_object_object_add(o, "pending", a);
	return o;
}

/* A fresh rule id: "r" and 12 hex digits. */
static void
ask_rule_id(char *out, size_t outsz)
{
	unsigned char	b[6];

	if (RAND_bytes(b, sizeof(b)) != 1)
		fatalx("RAND_bytes");
	snprintf(out, outsz, "r%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
	    b[3], b[4], b[5]);
}

int
ask_decide(uint64_t id, int approve, enum ask_scope scope, int request,
    uint64_t ttl_ms, char *rule_id, size_t rule_idsz)
{
	struct ask_hold	*h, *o;
	struct ask_rule	*r;
	uint64_t	 now = ask_wall_ms();

	if (rule_id != NULL && rule_idsz > 0)
		rule_id[0] = '\0';
	pthread_mutex_lock(&ask.mtx);
	TAILQ_FOREACH(h, &ask.holds, h_entry)
		if (h->h_id == id && h->h_state == ASK_WAITING)
			break;
	if (h == NULL) {
		pthread_mutex_unlock(&ask.mtx);
		return -1;
	}
	if (!approve) {
		ask_end(h, ASK_DENIED);
		pthread_mutex_unlock(&ask.mtx);
		met_hold(MET_HOLD_DENIED);
		return 0;
	}
	ask_end(h, ASK_APPROVED);
	met_hold(MET_HOLD_APPROVED);
	if (scope != ASK_ONCE) {
		ask.rules = xrealloc(ask.rules, (ask.nrules + 1) *
		    sizeof(*ask.rules));
		r = &ask.rules[ask.nrules++];
		memset(r, 0, sizeof(*r));
		ask_rule_id(r->r_id, sizeof(r->r_id));
		r->r_scope = scope;
		util_copy_str(r->r_subject, scope == ASK_SANDBOX ?
		    h->h_sandbox : h->h_policy, sizeof(r->r_subject));
		util_copy_str(r->r_host, h->h_host, sizeof(r->r_host));
		r->r_port = h->h_port;
		if ((r->r_request = request) != 0) {
			util_copy_str(r->r_method, h->h_method,
			    sizeof(r->r_method));
			/* a path too long to keep: the rule matches none
			   (a cut one would match another path) */
			if (util_copy_str(r->r_path, h->h_path != NULL ?
			    h->h_path : "", sizeof(r->r_path)) >=
			    sizeof(r->r_path))
				r->r_method[0] = '\0';
		}
		r->r_created_ms = now;
		r->r_expires_ms = ttl_ms > 0 ? now + ttl_ms : 0;
		if (rule_id != NULL)
			util_copy_str(rule_id, r->r_id, rule_idsz);
		/* what the new rule covers waits no longer */
		TAILQ_FOREACH(o, &ask.holds, h_entry)
			if (o->h_state == ASK_WAITING && ask_rule_covers(r,
			    o->h_sandbox, o->h_policy, o->h_host, o->h_port,
			    o->h_method, o->h_path, now)) {
				ask_end(o, ASK_APPROVED);
				met_hold(MET_HOLD_APPROVED);
			}
		ask_save();
	}
	pthread_mutex_unlock(&ask.mtx);
	return 0;
}

/* POST <body> to <url> (http://IP:PORT/PATH), within a few seconds;
 * the answer is read and dropped. */
static void
ask_post(const char *url, const char *body)
{
	struct addrinfo	 hints, *ai = NULL;
	struct timeval	 tv = { 2, 0 };
	char		 host[80], port[8], buf[512];
	const char	*hp = url + 7, *path, *colon;
	size_t		 hl;
	int		 fd = -1;
	FILE		*f = NULL;

	path = strchr(hp, '/');
	hl = path != NULL ? (size_t)(path - hp) : strlen(hp);
	if (path == NULL)
		path = "/";
	if (hl >= sizeof(host))
		return;
	memcpy(host, hp, hl);
	host[hl] = '\0';
	/* [v6]:port or v4:port, checked by the config already */
	colon = strrchr(host, ':');
	if (colon != NULL && (host[0] != '[' || colon > strchr(host, ']'))) {
		snprintf(port, sizeof(port), "%s", colon + 1);
		host[colon - host] = '\0';
	} else
		snprintf(port, sizeof(port), "80");
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strcspn(host, "]")] = '\0';
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return;
	if ((fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		goto out;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 ||
	    (f = fdopen(fd, "r+")) == NULL) {
		log_info("ask.webhook %s: %s", url, strerror(errno));
		goto out;
	}
	fd = -1;
	fprintf(f, "POST %s HTTP/1.1\r\nHost: %.*s\r\n"
	    "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s", path, (int)hl, hp, strlen(body),
	    body);
	if (fflush(f) != 0)
		log_info("ask.webhook %s: %s", url, strerror(errno));
	else
		while (fread(buf, 1, sizeof(buf), f) > 0)
			;
out:
	if (f != NULL)
		fclose(f);
	if (fd != -1)
		close(fd);
	freeaddrinfo(ai);
}

/* Times holds out, expires rules, posts the webhook. */
static void *
ask_thread(void *arg)
{
	struct ask_hold	*h;
	struct ask_post	*p;
	struct timespec	 ts;
	uint64_t	 now, next, wall;

	(void)arg;
	pthread_mutex_lock(&ask.mtx);
	while (!ask.stop) {
		if ((p = STAILQ_FIRST(&ask.posts)) != NULL) {
			STAILQ_REMOVE_HEAD(&ask.posts, p_entry);
			pthread_mutex_unlock(&ask.mtx);
			ask_post(p->p_url, p->p_body);
			free(p->p_url);
			free(p->p_body);
			free(p);
			pthread_mutex_lock(&ask.mtx);
			continue;
		}
		now = util_now_ms();
		next = now + 1000;
		TAILQ_FOREACH(h, &ask.holds, h_entry) {
			if (h->h_state != ASK_WAITING)
				continue;
			if (h->h_deadline <= now) {
				ask_end(h, ASK_TIMEOUT);
				met_hold(MET_HOLD_TIMEOUT);
			} else if (h->h_deadline < next)
				next = h->h_deadline;
		}
		if (ask_rules_expire(ask_wall_ms()))
			ask_save();
		/* the condition variable waits on CLOCK_REALTIME */
		wall = ask_wall_ms() + (next - now);
		ts.tv_sec = (time_t)(wall / 1000);
		ts.tv_nsec = (long)(wall % 1000) * 1000000;
		(void)pthread_cond_timedwait(&ask.cv, &ask.mtx, &ts);
	}
	pthread_mutex_unlock(&ask.mtx);
	return NULL;
}

/* The rules of approvals.json; a rule that does not read is skipped. */
static int
ask_load(const char *path)
{
	json_object	*o, *a, *e, *v;
	struct ask_rule	 r;
	const char	*s;
	size_t		 i, n;

	if (access(path, F_OK) == -1 && errno == ENOENT)
		return 0;
	if ((o = json_object_from_file(path)) == NULL) {
		log_warnx("approvals: %s cannot be read: %s", path,
		    json_util_get_last_err());
		return -1;
	}
	if (!json_object_object_get_ex(o, "rules", &a) ||
	    !json_object_is_type(a, json_type_array)) {
		json_object_put(o);
		log_warnx("approvals: %s: no \"rules\" list", path);
		return -1;
	}
	n = json_object_array_length(a);
	for (i = 0; i < n; i++) {
		e = json_object_array_get_idx(a, i);
		memset(&r, 0, sizeof(r));
#define STR(k, dst) (json_object_object_get_ex(e, k, &v) && \
	    (s = json_object_get_string(v)) != NULL && \
	    util_copy_str(dst, s, sizeof(dst)) < sizeof(dst))
		if (!STR("id", r.r_id) || !json_object_object_get_ex(e,
		    "scope", &v))
			continue;
		s = json_object_get_string(v);
		r.r_scope = strcmp(s, "sandbox") == 0 ? ASK_SANDBOX :
		    strcmp(s, "policy") == 0 ? ASK_POLICY : ASK_ONCE;
		if (r.r_scope == ASK_ONCE || !STR(r.r_scope == ASK_SANDBOX ?
		    "sandbox" : "policy", r.r_subject) ||
		    !STR("host", r.r_host) ||
		    !json_object_object_get_ex(e, "port", &v))
			continue;
		r.r_port = json_object_get_int(v);
		if (json_object_object_get_ex(e, "match", &v) &&
		    strcmp(json_object_get_string(v), "request") == 0) {
			r.r_request = 1;
			if (!STR("method", r.r_method) ||
			    !STR("path", r.r_path))
				continue;
		}
#undef STR
		if (json_object_object_get_ex(e, "created_ms", &v))
			r.r_created_ms = (uint64_t)json_object_get_int64(v);
		if (json_object_object_get_ex(e, "expires_ms", &v) &&
		    v != NULL)
			r.r_expires_ms = (uint64_t)json_object_get_int64(v);
		ask.rules = xrealloc(ask.rules, (ask.nrules + 1) *
		    sizeof(*ask.rules));
		ask.rules[ask.nrules++] = r;
	}
	json_object_put(o);
	return 0;
}

int
ask_open(const char *state_dir)
{
	int	rc;

	pthread_mutex_lock(&ask.mtx);
	free(ask.file);
	ask.file = xmalloc(strlen(state_dir) + sizeof("/approvals.json"));
	sprintf(ask.file, "%s/approvals.json", state_dir);
	rc = ask_load(ask.file);
	if (rc == 0 && ask.nrules > 0)
		log_info("approvals: %zu runtime rule%s from %s", ask.nrules,
		    ask.nrules == 1 ? "" : "s", ask.file);
	pthread_mutex_unlock(&ask.mtx);
	if (rc == 0 && !ask.running) {
		ask.stop = 0;
		if (pthread_create(&ask.thr, NULL, ask_thread, NULL) != 0)
			return -1;
		ask.running = 1;
	}
	return rc;
}

void
ask_close(void)
{
	struct ask_hold	*h;
	struct ask_post	*p;

	if (ask.running) {
		pthread_mutex_lock(&ask.mtx);
		ask.stop = 1;
		pthread_cond_signal(&ask.cv);
		pthread_mutex_unlock(&ask.mtx);
		pthread_join(ask.thr, NULL);
		ask.running = 0;
	}
	while ((h = TAILQ_FIRST(&ask.holds)) != NULL) {
		TAILQ_REMOVE(&ask.holds, h, h_entry);
		ask_hold_free(h);
	}
	while ((p = STAILQ_FIRST(&ask.posts)) != NULL) {
		STAILQ_REMOVE_HEAD(&ask.posts, p_entry);
		free(p->p_url);
		free(p->p_body);
		free(p);
	}
	free(ask.rules);
	ask.rules = NULL;
	ask.nrules = 0;
	free(ask.file);
	ask.file = NULL;
}
