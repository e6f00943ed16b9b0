/*
 * Secrets store: the values of cfg->c_secrets, read from their sources
 * (env:, file:, exec:, literal:) when a configuration is loaded, kept in
 * locked, non-dumped pages of their own and wiped when the last reference
 * goes. exec: sources with "refresh" are re-run by one background thread
 * per store; a failed refresh keeps the last good value.
 *
 * Nothing here ever prints, logs or returns a value in a message: reasons
 * are built from fixed text, paths, exit statuses and errno only, and a
 * command's stdout and stderr never reach a log.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/crypto.h>

#include "cfg/cfg.h"
#include "secrets/sec.h"
#include "metrics/metrics.h"
#include "secrets/sec_broker.h"
#include "secrets/sec_inject.h"
#include "util/exec.h"
#include "util/log.h"
#include "util/util.h"

#define SEC_MAX_VALUE	(64 * 1024)	/* bytes of one value */
#define SEC_EXEC_TIMEOUT_MS 10000	/* an exec: command, start to exit */
#define SEC_FAIL_LOG_MS	60000		/* repeat a refresh failure this often */

extern char	**environ;

/* Test hooks (tests/unit/test_sec_store.c); not for the daemon. */
void	sec_store_test_timeout(uint64_t);
void	sec_store_test_wipe_hook(void (*)(const void *, size_t));

static uint64_t	  sec_exec_timeout_ms = SEC_EXEC_TIMEOUT_MS;
static void	(*sec_wipe_hook)(const void *, size_t);
static int	  sec_mlock_warned;

struct sec_entry {
	char		*se_name;
	char		*se_cmd;	/* exec: with refresh, else NULL */
	uint64_t	 se_refresh_ms;
	uint64_t	 se_due_ms;	/* monotonic; refresh thread only */
	uint64_t	 se_failed_ms;	/* last failure logged, 0 = healthy */
	struct sec_val	*se_val;	/* under ss_mtx */
	uint64_t	 se_gen;	/* under ss_mtx */
	/* token brokers (sec_broker.h): the secret's config, else NULL */
	const struct cfg_secret *se_sc;
	struct sec_val	*se_cred;	/* its credential; broker thread */
	struct sec_val	*se_cred2;	/* oauth2_refresh client_secret */
	uint64_t	 se_exp;	/* se_val's expiry, wall s; ss_mtx */
	struct sec_val	*se_prev;	/* the token before, still valid: an
					   upstream may hand it back */
	uint64_t	 se_prev_exp;
	int		 se_minting;	/* a mint is under way; ss_mtx */
	int		 se_tried;	/* a mint has ended; ss_mtx */
	char		 se_why[300];	/* the last failure; ss_mtx */
	pthread_t	 se_thread;
	int		 se_running;
	struct sec_store *se_ss;
};

/* An event made active when a mint ends (sec_store_watch). */
struct sec_watch {
	struct event		*w_ev;
	struct sec_watch	*w_next;
};

struct sec_store {
	pthread_mutex_t	 ss_mtx;
	struct sec_entry *ss_v;
	size_t		 ss_n;
	pthread_t	 ss_thread;
	int		 ss_running;
	int		 ss_stop;	/* atomic */
	/*
	 * Written to on free: wakes the refresh thread from its sleep and
	 * from a running command alike (both wait in poll()).
	 */
	int		 ss_wake[2];
	const struct cfg *ss_cfg;
	pthread_cond_t	 ss_cond;	/* a mint ended */
	struct sec_watch *ss_watch;	/* under ss_mtx */
};

static int	sec_no_mint;	/* airlockd -t: no token endpoint */

void
sec_store_no_mint(void)
{
	sec_no_mint = 1;
}

void
sec_store_test_timeout(uint64_t ms)
{
	sec_exec_timeout_ms = ms != 0 ? ms : SEC_EXEC_TIMEOUT_MS;
}

void
sec_store_test_wipe_hook(void (*fn)(const void *, size_t))
{
	sec_wipe_hook = fn;
}

/* values */

static void
sec_mlock_warn(int err)
{
	/* Once per process: every value would say the same. */
	if (__atomic_exchange_n(&sec_mlock_warned, 1, __ATOMIC_RELAXED))
		return;
	log_warnx("secrets: cannot lock secret memory (mlock: %s); values "
	    "may be swapped to disk. Raise the memlock limit (ulimit -l) or "
	    "grant CAP_IPC_LOCK", strerror(err));
}

/*
 * An empty value with room for <cap> bytes and a NUL, in pages of its own:
 * locked (so never swapped), left out of core dumps, and zero in a forked
 * child.
 */
struct sec_val *
sec_val_new(size_t cap)
{
	struct sec_val	*v;
	size_t		 len, pg;
	long		 l;
	void		*p;

	l = sysconf(_SC_PAGESIZE);
	pg = l > 0 ? (size_t)l : 4096;
	len = (sizeof(*v) + cap + 1 + pg - 1) / pg * pg;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	(void)madvise(p, len, MADV_DONTDUMP);
#ifdef MADV_WIPEONFORK
	(void)madvise(p, len, MADV_WIPEONFORK);
#endif
	if (mlock(p, len) == -1)
		sec_mlock_warn(errno);
	v = p;
	v->sv_refs = 1;
	v->sv_len = 0;
	v->sv_maplen = len;
	return v;
}

struct sec_val *
sec_val_ref(struct sec_val *v)
{
	__atomic_add_fetch(&v->sv_refs, 1, __ATOMIC_RELAXED);
	return v;
}

void
sec_val_unref(struct sec_val *v)
{
	size_t	len;

	if (v == NULL)
		return;
	if (__atomic_sub_fetch(&v->sv_refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	len = v->sv_maplen;
	OPENSSL_cleanse(v, len);
	if (sec_wipe_hook != NULL)
		sec_wipe_hook(v, len);
	(void)munlock(v, len);
	munmap(v, len);
}

/* sec_val_new(<cap>), or NULL with the reason in <why>. */
static struct sec_val *
sec_val_get(size_t cap, char *why, size_t whysz)
{
	struct sec_val	*v;

	if ((v = sec_val_new(cap)) == NULL)
		snprintf(why, whysz, "out of memory: %s", strerror(errno));
	return v;
}

/*
 * Check the bytes read into scratch value <v> (trimming trailing newlines
 * when <trim>) and return them in a value of fitting size; <v> is wiped.
 * NULL with the reason in <why> when the value is not usable.
 */
static struct sec_val *
sec_val_finish(struct sec_val *v, int trim, int ml, char *why, size_t whysz)
{
	struct sec_val	*out;
	size_t		 len, i;

	len = v->sv_len;
	while (trim && len > 0 && (v->sv_data[len - 1] == '\n' ||
	    v->sv_data[len - 1] == '\r'))
		len--;
	if (len == 0) {
		snprintf(why, whysz, "the value is empty");
		sec_val_unref(v);
		return NULL;
	}
	/* A CR or LF would let the value add headers where injected (a
	 * broker's credential, a PEM key, never goes into a header). */
	for (i = 0; i < len; i++) {
		if (ml && (v->sv_data[i] == '\n' || v->sv_data[i] == '\r' ||
		    v->sv_data[i] == '\t'))
			continue;
		if ((unsigned char)v->sv_data[i] < 0x20 ||
		    v->sv_data[i] == 0x7f) {
			snprintf(why, whysz, "the value contains control "
			    "characters");
			sec_val_unref(v);
			return NULL;
		}
	}
	if ((out = sec_val_get(len, why, whysz)) == NULL) {
		sec_val_unref(v);
		return NULL;
	}
	memcpy(out->sv_data, v->sv_data, len);
	out->sv_data[len] = '\0';
	out->sv_len = len;
	sec_val_unref(v);
	return out;
}

/* sources */

static struct sec_val *
sec_read_literal(const char *s, int ml, char *why, size_t whysz)
{
	struct sec_val	*v;
	size_t		 len;

	len = strlen(s);
	if ((v = sec_val_get(len, why, whysz)) == NULL)
		return NULL;
	memcpy(v->sv_data, s, len);
	v->sv_len = len;
	return sec_val_finish(v, 0, ml, why, whysz);
}

static struct sec_val *
sec_read_env(const char *name, int ml, char *why, size_t whysz)
{
	const char	*s;

	if ((s = getenv(name)) == NULL) {
		snprintf(why, whysz, "environment variable \"%s\" is not set",
		    name);
		return NULL;
	}
	return sec_read_literal(s, ml, why, whysz);
}

/* Read straight into locked memory: no copy of the bytes elsewhere. */
static struct sec_val *
sec_read_file(const char *path, int ml, char *why, size_t whysz)
{
	struct sec_val	*v;
	ssize_t		 r;
	int		 fd;

	if ((fd = util_open_secret(path, why, whysz)) == -1)
		return NULL;
	if ((v = sec_val_get(SEC_MAX_VALUE + 1, why, whysz)) == NULL) {
		close(fd);
		return NULL;
	}
	while (v->sv_len < SEC_MAX_VALUE + 1) {
		r = read(fd, v->sv_data + v->sv_len,
		    SEC_MAX_VALUE + 1 - v->sv_len);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			snprintf(why, whysz, "cannot read file \"%s\": %s",
			    path, strerror(errno));
			close(fd);
			sec_val_unref(v);
			return NULL;
		}
		if (r == 0)
			break;
		v->sv_len += (size_t)r;
	}
	close(fd);
	if (v->sv_len > SEC_MAX_VALUE) {
		snprintf(why, whysz, "file \"%s\" is larger than %d bytes",
		    path, SEC_MAX_VALUE);
		sec_val_unref(v);
		return NULL;
	}
	return sec_val_finish(v, 1, ml, why, whysz);
}

/*
 * An exec: source: the command's stdout read straight into a locked value
 * (util_exec: its own process group, stdin and stderr on /dev/null, exit
 * 0 within the timeout). <stopfd> (or -1) becoming readable aborts it.
 */
static struct sec_val *
sec_exec(const char *cmd, int stopfd, int *stopped, int ml, char *why,
    size_t whysz)
{
	struct sec_val	*v;
	char		 err[200];

	*stopped = 0;
	if ((v = sec_val_get(SEC_MAX_VALUE + 1, why, whysz)) == NULL)
		return NULL;
	if (util_exec(cmd, v->sv_data, SEC_MAX_VALUE + 1, &v->sv_len,
	    sec_exec_timeout_ms, stopfd, stopped, err, sizeof(err)) == -1) {
		snprintf(why, whysz, "command %s", err);
		sec_val_unref(v);
		return NULL;
	}
	return sec_val_finish(v, 1, ml, why, whysz);
}

/* The value of source <src> ("kind:rest"), or NULL and the reason. */
static struct sec_val *
sec_load(const char *src, int stopfd, int *stopped, int ml, char *why,
    size_t whysz)
{
	*stopped = 0;
	if (src == NULL) {
		snprintf(why, whysz, "no source");
		return NULL;
	}
	if (strncmp(src, "env:", 4) == 0)
		return sec_read_env(src + 4, ml, why, whysz);
	if (strncmp(src, "file:", 5) == 0)
		return sec_read_file(src + 5, ml, why, whysz);
	if (strncmp(src, "exec:", 5) == 0)
		return sec_exec(src + 5, stopfd, stopped, ml, why, whysz);
	if (strncmp(src, "literal:", 8) == 0)
		return sec_read_literal(src + 8, ml, why, whysz);
	/* The config refuses these; never echo what it was. */
	snprintf(why, whysz, "unknown kind of source");
	return NULL;
}

/* refresh */

static void
sec_refresh_one(struct sec_store *ss, struct sec_entry *e)
{
	struct sec_val	*v, *old;
	char		 why[512];
	uint64_t	 now;
	int		 stopped;

	v = sec_exec(e->se_cmd, ss->ss_wake[0], &stopped, 0, why,
	    sizeof(why));
	now = util_now_ms();
	e->se_due_ms = now + e->se_refresh_ms;
	if (v == NULL) {
		/* Short intervals must not flood the log while it lasts. */
		if (!stopped && (e->se_failed_ms == 0 ||
		    now - e->se_failed_ms >= SEC_FAIL_LOG_MS)) {
			log_warnx("secret \"%s\": refresh failed: %s; the "
			    "last good value stays", e->se_name, why);
			e->se_failed_ms = now;
		}
		return;
	}
	if (e->se_failed_ms != 0) {
		log_info("secret \"%s\": refresh works again", e->se_name);
		e->se_failed_ms = 0;
	}
	pthread_mutex_lock(&ss->ss_mtx);
	old = e->se_val;
	e->se_val = v;
	e->se_gen++;
	pthread_mutex_unlock(&ss->ss_mtx);
	/* Requests still holding the old value keep it until they end. */
	sec_val_unref(old);
	log_debug("secret \"%s\": refreshed", e->se_name);
}

/* Sleeps until the earliest due refresh, runs those due, until stopped. */
static void *
sec_refresh_main(void *arg)
{
	struct sec_store	*ss = arg;
	struct sec_entry	*e;
	struct pollfd		 pfd;
	uint64_t		 now, next;
	size_t			 i;
	int			 ms;

	while (!__atomic_load_n(&ss->ss_stop, __ATOMIC_ACQUIRE)) {
		now = util_now_ms();
		next = UINT64_MAX;
		for (i = 0; i < ss->ss_n; i++) {
			e = &ss->ss_v[i];
			if (e->se_cmd == NULL)
				continue;
			if (e->se_due_ms <= now) {
				sec_refresh_one(ss, e);
				if (__atomic_load_n(&ss->ss_stop,
				    __ATOMIC_ACQUIRE))
					return NULL;
				now = util_now_ms();
			}
			if (e->se_due_ms < next)
				next = e->se_due_ms;
		}
		if (next <= now)
			continue;
		ms = next - now > INT_MAX ? INT_MAX : (int)(next - now);
		pfd.fd = ss->ss_wake[0];
		pfd.events = POLLIN;
		(void)poll(&pfd, 1, ms);
	}
	return NULL;
}

/*
 * A thread of the store, started with every signal blocked (they belong
 * to the main thread); the wake pipe is made first. 0 or an errno.
 */
static int
sec_thread_start(struct sec_store *ss, pthread_t *t, void *(*fn)(void *),
    void *arg, int *running)
{
	sigset_t	all, old;
	int		err;

	if (ss->ss_wake[0] == -1 && pipe2(ss->ss_wake, O_CLOEXEC |
	    O_NONBLOCK) == -1)
		return errno;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err == 0)
		*running = 1;
	return err;
}

/* token brokers */

/* Every waiter of a mint, now: made active, then forgotten. */
static void
sec_mint_ended(struct sec_store *ss)
{
	struct sec_watch	*w;

	while ((w = ss->ss_watch) != NULL) {
		ss->ss_watch = w->w_next;
		event_active(w->w_ev, EV_TIMEOUT, 0);
		free(w);
	}
	pthread_cond_broadcast(&ss->ss_cond);
}

/* One mint of <e>; returns when to try next (monotonic ms). */
static uint64_t
sec_mint_one(struct sec_store *ss, struct sec_entry *e, uint64_t *backoff)
{
	const struct cfg_broker	*b = e->se_sc->sc_broker;
	struct sec_mint		 m;
	struct sec_val		*old = NULL;
	char			 why[300];
	uint64_t		 now, life, margin;
	time_t			 wall;
	int			 rc;

	pthread_mutex_lock(&ss->ss_mtx);
	e->se_minting = 1;
	pthread_mutex_unlock(&ss->ss_mtx);
	rc = sec_broker_mint(ss->ss_cfg, e->se_sc, e->se_cred, e->se_cred2,
	    ss->ss_wake[0], &m, why, sizeof(why));
	wall = time(NULL);
	now = util_now_ms();
	pthread_mutex_lock(&ss->ss_mtx);
	e->se_minting = 0;
	e->se_tried = 1;
	if (rc == 0) {
		old = e->se_prev;
		e->se_prev = e->se_val;
		e->se_prev_exp = e->se_exp;
		e->se_val = m.sm_token;
		e->se_exp = m.sm_expires;
		e->se_gen++;
		e->se_why[0] = '\0';
	} else
		snprintf(e->se_why, sizeof(e->se_why), "%s", why);
	sec_mint_ended(ss);
	pthread_mutex_unlock(&ss->ss_mtx);
	met_secret_mint(rc == 0);
	sec_val_unref(old);
	if (rc == -1) {
		if (!__atomic_load_n(&ss->ss_stop, __ATOMIC_ACQUIRE) &&
		    (e->se_failed_ms == 0 || now - e->se_failed_ms >=
		    SEC_FAIL_LOG_MS)) {
			log_warnx("secret \"%s\": minting a token failed: %s; "
			    "the last good token (if any) stays until it "
			    "expires", e->se_name, why);
			e->se_failed_ms = now;
		}
		*backoff = *backoff == 0 ? 1000 : *backoff * 2;
		if (*backoff > 30000)
			*backoff = 30000;
		return now + *backoff;
	}
	if (m.sm_cred != NULL) {
		/* a rotated refresh token replaces the one we hold */
		sec_val_unref(e->se_cred);
		e->se_cred = m.sm_cred;
	}
	if (e->se_failed_ms != 0)
		log_info("secret \"%s\": minting works again", e->se_name);
	e->se_failed_ms = 0;
	*backoff = 0;
	life = (m.sm_expires - (uint64_t)wall) * 1000;
	/* renew before it expires, but not in the first half of its life */
	margin = b->b_margin_ms < life / 2 ? b->b_margin_ms : life / 2;
	log_info("secret \"%s\": token minted, valid %llu s, renewed in "
	    "%llu s", e->se_name, (unsigned long long)(life / 1000),
	    (unsigned long long)((life - margin) / 1000));
	return now + life - margin;
}

/* One per broker secret: mints at start, renews before expiry. */
static void *
sec_mint_main(void *arg)
{
	struct sec_entry	*e = arg;
	struct sec_store	*ss = e->se_ss;
	struct pollfd		 pfd;
	uint64_t		 due = 0, now, backoff = 0;

	while (!__atomic_load_n(&ss->ss_stop, __ATOMIC_ACQUIRE)) {
		now = util_now_ms();
		if (due <= now) {
			due = sec_mint_one(ss, e, &backoff);
			continue;
		}
		pfd.fd = ss->ss_wake[0];
		pfd.events = POLLIN;
		(void)poll(&pfd, 1, due - now > INT_MAX ? INT_MAX :
		    (int)(due - now));
	}
	return NULL;
}

/* A broker secret's credentials, read like any value (PEM keys span
 * lines). */
static int
sec_broker_load(struct sec_entry *e, const struct cfg_secret *sc, char *why,
    size_t whysz)
{
	int	stopped;

	e->se_sc = sc;
	if ((e->se_cred = sec_load(sc->sc_broker->b_cred, -1, &stopped, 1,
	    why, whysz)) == NULL)
		return -1;
	if (sc->sc_broker->b_cred2 != NULL && (e->se_cred2 = sec_load(
	    sc->sc_broker->b_cred2, -1, &stopped, 1, why, whysz)) == NULL)
		return -1;
	return 0;
}

/* No usable token and a mint under way or still to come? ss_mtx held. */
static int
sec_pending_locked(const struct sec_store *ss, size_t idx)
{
	const struct sec_entry	*e = &ss->ss_v[idx];

	if (e->se_sc == NULL || sec_no_mint)
		return 0;
	if (e->se_val != NULL && (uint64_t)time(NULL) < e->se_exp)
		return 0;
	return e->se_minting || !e->se_tried;
}

int
sec_store_pending(struct sec_store *ss, size_t idx)
{
	int	p;

	if (ss == NULL || idx >= ss->ss_n)
		return 0;
	pthread_mutex_lock(&ss->ss_mtx);
	p = sec_pending_locked(ss, idx);
	pthread_mutex_unlock(&ss->ss_mtx);
	return p;
}

int
sec_store_watch(struct sec_store *ss, size_t idx, struct event *ev)
{
	struct sec_watch	*w;

	if (ss == NULL || idx >= ss->ss_n)
		return 1;
	pthread_mutex_lock(&ss->ss_mtx);
	if (!sec_pending_locked(ss, idx)) {
		pthread_mutex_unlock(&ss->ss_mtx);
		return 1;
	}
	w = xcalloc(1, sizeof(*w));
	w->w_ev = ev;
	w->w_next = ss->ss_watch;
	ss->ss_watch = w;
	pthread_mutex_unlock(&ss->ss_mtx);
	return 0;
}

void
sec_store_unwatch(struct sec_store *ss, struct event *ev)
{
	struct sec_watch	**wp, *w;

	if (ss == NULL)
		return;
	pthread_mutex_lock(&ss->ss_mtx);
	for (wp = &ss->ss_watch; (w = *wp) != NULL;) {
		if (w->w_ev != ev) {
			wp = &w->w_next;
			continue;
		}
		*wp = w->w_next;
		free(w);
	}
	pthread_mutex_unlock(&ss->ss_mtx);
}

void
sec_store_wait(struct sec_store *ss, size_t idx, uint64_t ms)
{
	struct timespec	ts;

	if (ss == NULL || idx >= ss->ss_n)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&ss->ss_mtx);
	while (sec_pending_locked(ss, idx) &&
	    pthread_cond_timedwait(&ss->ss_cond, &ss->ss_mtx, &ts) == 0)
		;
	pthread_mutex_unlock(&ss->ss_mtx);
}

struct sec_val *
sec_store_prev(struct sec_store *ss, size_t idx)
{
	struct sec_val	*v = NULL;

	if (ss == NULL || idx >= ss->ss_n)
		return NULL;
	pthread_mutex_lock(&ss->ss_mtx);
	if (ss->ss_v[idx].se_prev != NULL &&
	    (uint64_t)time(NULL) < ss->ss_v[idx].se_prev_exp)
		v = sec_val_ref(ss->ss_v[idx].se_prev);
	pthread_mutex_unlock(&ss->ss_mtx);
	return v;
}

void
sec_store_why(struct sec_store *ss, size_t idx, char *buf, size_t bufsz)
{
	const struct sec_entry	*e;

	buf[0] = '\0';
	if (ss == NULL || idx >= ss->ss_n)
		return;
	e = &ss->ss_v[idx];
	pthread_mutex_lock(&ss->ss_mtx);
	if (e->se_sc == NULL)
		;
	else if (e->se_why[0] != '\0')
		snprintf(buf, bufsz, "%s%s", e->se_val != NULL ?
		    "its token expired and renewing it failed: " : "no token "
		    "could be minted: ", e->se_why);
	else if (sec_no_mint || !e->se_tried)
		snprintf(buf, bufsz, "no token minted yet");
	pthread_mutex_unlock(&ss->ss_mtx);
}

/* store */

/* One line, with any control character of a path made harmless. */
static void
sec_report(FILE *errs, const struct cfg *cfg, const struct cfg_secret *sc,
    const char *why)
{
	char	line[1024], *p;

	if (errs == NULL)
		return;
	snprintf(line, sizeof(line), "%s:%d:%d: secret \"%s\": %s",
	    cfg->c_file != NULL ? cfg->c_file : "?", sc->sc_line, sc->sc_col,
	    sc->sc_name != NULL ? sc->sc_name : "?", why);
	for (p = line; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	fprintf(errs, "%s\n", line);
}

struct sec_store *
sec_store_new(const struct cfg *cfg, FILE *errs)
{
	const struct cfg_secret	*sc;
	struct sec_store	*ss;
	struct sec_entry	*e;
	char			 why[512];
	size_t			 i;
	int			 nerr = 0, refresh = 0, stopped, err;

	ss = xcalloc(1, sizeof(*ss));
	pthread_mutex_init(&ss->ss_mtx, NULL);
	pthread_cond_init(&ss->ss_cond, NULL);
	ss->ss_cfg = cfg;
	ss->ss_wake[0] = ss->ss_wake[1] = -1;
	ss->ss_n = cfg->c_nsecrets;
	ss->ss_v = xcalloc(ss->ss_n, sizeof(*ss->ss_v));
	for (i = 0; i < ss->ss_n; i++) {
		sc = &cfg->c_secrets[i];
		e = &ss->ss_v[i];
		e->se_name = xstrdup(sc->sc_name != NULL ? sc->sc_name : "?");
		if (sc->sc_broker != NULL) {
			if (sec_broker_load(e, sc, why, sizeof(why)) == -1) {
				sec_report(errs, cfg, sc, why);
				nerr++;
			}
			continue;
		}
		if ((e->se_val = sec_load(sc->sc_source, -1, &stopped, 0, why,
		    sizeof(why))) == NULL) {
			sec_report(errs, cfg, sc, why);
			nerr++;
			continue;
		}
		e->se_gen = 1;
		if (sc->sc_refresh_ms > 0 && sc->sc_source != NULL &&
		    strncmp(sc->sc_source, "exec:", 5) == 0) {
			e->se_cmd = xstrdup(sc->sc_source + 5);
			e->se_refresh_ms = sc->sc_refresh_ms;
			e->se_due_ms = util_now_ms() + sc->sc_refresh_ms;
			refresh = 1;
		}
	}
	if (nerr == 0 && refresh && (err = sec_thread_start(ss, &ss->ss_thread,
	    sec_refresh_main, ss, &ss->ss_running)) != 0) {
		if (errs != NULL)
			fprintf(errs, "%s: secrets: cannot start the refresh "
			    "thread: %s\n", cfg->c_file != NULL ?
			    cfg->c_file : "?", strerror(err));
		nerr++;
	}
	for (i = 0; nerr == 0 && !sec_no_mint && i < ss->ss_n; i++) {
		if (ss->ss_v[i].se_sc == NULL)
			continue;
		ss->ss_v[i].se_ss = ss;
		if ((err = sec_thread_start(ss, &ss->ss_v[i].se_thread,
		    sec_mint_main, &ss->ss_v[i], &ss->ss_v[i].se_running)) == 0)
			continue;
		if (errs != NULL)
			fprintf(errs, "%s: secrets: cannot start a token "
			    "thread: %s\n", cfg->c_file != NULL ?
			    cfg->c_file : "?", strerror(err));
		nerr++;
	}
	if (nerr != 0) {
		sec_store_free(ss);
		return NULL;
	}
	return ss;
}

void
sec_store_free(struct sec_store *ss)
{
	struct sec_entry	*e;
	size_t			 i;
	ssize_t			 r;

	if (ss == NULL)
		return;
	/* built scanners hold values of this store: drop them */
	sec_reflect_flush();
	__atomic_store_n(&ss->ss_stop, 1, __ATOMIC_RELEASE);
	if (ss->ss_wake[1] != -1) {
		do
			r = write(ss->ss_wake[1], "x", 1);
		while (r == -1 && errno == EINTR);
	}
	if (ss->ss_running)
		pthread_join(ss->ss_thread, NULL);
	for (i = 0; i < ss->ss_n; i++)
		if (ss->ss_v[i].se_running)
			pthread_join(ss->ss_v[i].se_thread, NULL);
	for (i = 0; i < 2; i++)
		if (ss->ss_wake[i] != -1)
			close(ss->ss_wake[i]);
	for (i = 0; i < ss->ss_n; i++) {
		e = &ss->ss_v[i];
		sec_val_unref(e->se_val);
		sec_val_unref(e->se_cred);
		sec_val_unref(e->se_cred2);
		sec_val_unref(e->se_prev);
		/* A command line may carry a credential of its own. */
		if (e->se_cmd != NULL)
			OPENSSL_cleanse(e->se_cmd, strlen(e->se_cmd));
		free(e->se_cmd);
		free(e->se_name);
	}
	free(ss->ss_v);
	while (ss->ss_watch != NULL) {
		struct sec_watch *w = ss->ss_watch;

		ss->ss_watch = w->w_next;
		free(w);
	}
	pthread_cond_destroy(&ss->ss_cond);
	pthread_mutex_destroy(&ss->ss_mtx);
	free(ss);
}

struct sec_val *
sec_store_get(struct sec_store *ss, size_t idx)
{
	struct sec_val	*v = NULL;

	if (ss == NULL || idx >= ss->ss_n)
		return NULL;
	pthread_mutex_lock(&ss->ss_mtx);
	if (ss->ss_v[idx].se_val != NULL && (ss->ss_v[idx].se_sc == NULL ||
	    (uint64_t)time(NULL) < ss->ss_v[idx].se_exp))
		v = sec_val_ref(ss->ss_v[idx].se_val);
	pthread_mutex_unlock(&ss->ss_mtx);
	return v;
}

uint64_t
sec_store_generation(struct sec_store *ss, size_t idx)
{
	uint64_t	gen;

	if (ss == NULL || idx >= ss->ss_n)
		return 0;
	pthread_mutex_lock(&ss->ss_mtx);
	gen = ss->ss_v[idx].se_gen;
	pthread_mutex_unlock(&ss->ss_mtx);
	return gen;
}

/* process */

void
sec_harden_process(void)
{
	struct rlimit	rl = { 0, 0 };

	/* No core files, no ptrace or /proc/PID/mem by same-uid peers. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		log_warn("prctl(PR_SET_DUMPABLE, 0)");
	if (setrlimit(RLIMIT_CORE, &rl) == -1)
		log_warn("setrlimit(RLIMIT_CORE, 0)");
}
