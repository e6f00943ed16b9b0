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
#include <unistd.h>

#include <openssl/crypto.h>

#include "cfg/cfg.h"
#include "secrets/sec.h"
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
};

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
static struct sec_val *
sec_val_alloc(size_t cap)
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

/*
 * Check the bytes read into scratch value <v> (trimming trailing newlines
 * when <trim>) and return them in a value of fitting size; <v> is wiped.
 * NULL with the reason in <why> when the value is not usable.
 */
static struct sec_val *
sec_val_finish(struct sec_val *v, int trim, char *why, size_t whysz)
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
	/* A CR or LF would let the value add headers where injected. */
	for (i = 0; i < len; i++) {
		if ((unsigned char)v->sv_data[i] < 0x20 ||
		    v->sv_data[i] == 0x7f) {
			snprintf(why, whysz, "the value contains control "
			    "characters");
			sec_val_unref(v);
			return NULL;
		}
	}
	if ((out = sec_val_alloc(len)) == NULL) {
		snprintf(why, whysz, "out of memory: %s", strerror(errno));
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
sec_read_env(const char *name, char *why, size_t whysz)
{
	struct sec_val	*v;
	const char	*s;
	size_t		 len;

	if ((s = getenv(name)) == NULL) {
		snprintf(why, whysz, "environment variable \"%s\" is not set",
		    name);
		return NULL;
	}
	len = strlen(s);
	if ((v = sec_val_alloc(len)) == NULL) {
		snprintf(why, whysz, "out of memory: %s", strerror(errno));
		return NULL;
	}
	memcpy(v->sv_data, s, len);
	v->sv_len = len;
	return sec_val_finish(v, 0, why, whysz);
}

static struct sec_val *
sec_read_literal(const char *s, char *why, size_t whysz)
{
	struct sec_val	*v;
	size_t		 len;

	len = strlen(s);
	if ((v = sec_val_alloc(len)) == NULL) {
		snprintf(why, whysz, "out of memory: %s", strerror(errno));
		return NULL;
	}
	memcpy(v->sv_data, s, len);
	v->sv_len = len;
	return sec_val_finish(v, 0, why, whysz);
}

/* Read straight into locked memory: no copy of the bytes elsewhere. */
static struct sec_val *
sec_read_file(const char *path, char *why, size_t whysz)
{
	struct sec_val	*v;
	ssize_t		 r;
	int		 fd;

	if ((fd = util_open_secret(path, why, whysz)) == -1)
		return NULL;
	if ((v = sec_val_alloc(SEC_MAX_VALUE + 1)) == NULL) {
		snprintf(why, whysz, "out of memory: %s", strerror(errno));
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
	return sec_val_finish(v, 1, why, whysz);
}

/*
 * An exec: source: the command's stdout read straight into a locked value
 * (util_exec: its own process group, stdin and stderr on /dev/null, exit
 * 0 within the timeout). <stopfd> (or -1) becoming readable aborts it.
 */
static struct sec_val *
sec_exec(const char *cmd, int stopfd, int *stopped, char *why, size_t whysz)
{
	struct sec_val	*v;
	char		 err[200];

	*stopped = 0;
	if ((v = sec_val_alloc(SEC_MAX_VALUE + 1)) == NULL) {
		snprintf(why, whysz, "out of memory: %s", strerror(errno));
		return NULL;
	}
	if (util_exec(cmd, v->sv_data, SEC_MAX_VALUE + 1, &v->sv_len,
	    sec_exec_timeout_ms, stopfd, stopped, err, sizeof(err)) == -1) {
		snprintf(why, whysz, "command %s", err);
		sec_val_unref(v);
		return NULL;
	}
	return sec_val_finish(v, 1, why, whysz);
}

/* The value of source <src> ("kind:rest"), or NULL and the reason. */
static struct sec_val *
sec_load(const char *src, int stopfd, int *stopped, char *why, size_t whysz)
{
	*stopped = 0;
	if (src == NULL) {
		snprintf(why, whysz, "no source");
		return NULL;
	}
	if (strncmp(src, "env:", 4) == 0)
		return sec_read_env(src + 4, why, whysz);
	if (strncmp(src, "file:", 5) == 0)
		return sec_read_file(src + 5, why, whysz);
	if (strncmp(src, "exec:", 5) == 0)
		return sec_exec(src + 5, stopfd, stopped, why, whysz);
	if (strncmp(src, "literal:", 8) == 0)
		return sec_read_literal(src + 8, why, whysz);
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

	v = sec_exec(e->se_cmd, ss->ss_wake[0], &stopped, why, sizeof(why));
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

/* Started with every signal blocked: they belong to the main thread. */
static int
sec_refresh_start(struct sec_store *ss)
{
	sigset_t	all, old;
	int		err;

	if (pipe2(ss->ss_wake, O_CLOEXEC | O_NONBLOCK) == -1)
		return errno;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&ss->ss_thread, NULL, sec_refresh_main, ss);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err == 0)
		ss->ss_running = 1;
	return err;
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
	ss->ss_wake[0] = ss->ss_wake[1] = -1;
	ss->ss_n = cfg->c_nsecrets;
	ss->ss_v = xcalloc(ss->ss_n, sizeof(*ss->ss_v));
	for (i = 0; i < ss->ss_n; i++) {
		sc = &cfg->c_secrets[i];
		e = &ss->ss_v[i];
		e->se_name = xstrdup(sc->sc_name != NULL ? sc->sc_name : "?");
		if ((e->se_val = sec_load(sc->sc_source, -1, &stopped, why,
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
	if (nerr == 0 && refresh && (err = sec_refresh_start(ss)) != 0) {
		if (errs != NULL)
			fprintf(errs, "%s: secrets: cannot start the refresh "
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
	if (ss->ss_running) {
		__atomic_store_n(&ss->ss_stop, 1, __ATOMIC_RELEASE);
		do
			r = write(ss->ss_wake[1], "x", 1);
		while (r == -1 && errno == EINTR);
		pthread_join(ss->ss_thread, NULL);
	}
	for (i = 0; i < 2; i++)
		if (ss->ss_wake[i] != -1)
			close(ss->ss_wake[i]);
	for (i = 0; i < ss->ss_n; i++) {
		e = &ss->ss_v[i];
		sec_val_unref(e->se_val);
		/* A command line may carry a credential of its own. */
		if (e->se_cmd != NULL)
			OPENSSL_cleanse(e->se_cmd, strlen(e->se_cmd));
		free(e->se_cmd);
		free(e->se_name);
	}
	free(ss->ss_v);
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
	if (ss->ss_v[idx].se_val != NULL)
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
