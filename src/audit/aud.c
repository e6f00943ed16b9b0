#include "config.h"

#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "util/log.h"
#include "util/util.h"

/*
 * Writer side. Workers queue a record's JSON text (aud_submit); the writer
 * thread chains each line (prev, hash), appends it to obuf and writes obuf.
 *
 * Fail closed: when a write or an open fails (disk full, I/O error, file
 * removed with its directory), the audit turns unavailable, workers refuse
 * new requests (aud_available() == 0, 503 audit_unavailable), obuf keeps
 * every line not written yet, in order, and the writer retries every
 * AUD_RETRY_MS until a write works again; nothing is dropped unless more
 * than AUD_HOLD_MAX waits, and then loudly. A failed write never leaves a
 * cut line in the file: it is truncated back to its last whole line, so
 * the chain stays valid and the retry writes whole lines after it.
 */
#define AUD_BATCH	256	/* wake the writer at this many lines */
#define AUD_FLUSH_MS	10	/* a line waits at most this long */
#define AUD_CHECK_MS	250	/* look for a removed file */
#define AUD_RETRY_MS	500	/* retry while unavailable */
#define AUD_OBUF_FLUSH	65536	/* write once this much waits */
#define AUD_HOLD_MAX	(64 * 1024 * 1024) /* held while unavailable */
#define AUD_HEX		(SHA256_DIGEST_LENGTH * 2)

struct aud_line {
	STAILQ_ENTRY(aud_line)	 al_entry;
	char			*al_text;	/* "{...}", no newline */
};

static struct {
	/* shared with the workers, under mtx */
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cond;
	STAILQ_HEAD(, aud_line)	 queue;		/* to chain */
	size_t			 queued;	/* lines in queue */
	int			 stopping;
	int			 reopen;
	/* atomics, read without the lock */
	int			 unavail;	/* 1 while writes fail */
	uint64_t		 errors;	/* records lost */
	/* set by aud_start: a fleet's records name their gateway */
	char			 gateway[65];
	/* the writer thread's own (set up by aud_start before it runs) */
	pthread_t		 thread;
	int			 running;
	char			*path;		/* NULL: stdout */
	int			 fd;		/* -1: open first */
	dev_t			 dev;		/* which file fd is */
	ino_t			 ino;
	off_t			 cut_to;	/* -1, or cut to this */
	int			 chain;
	int			 prev_known;	/* prev from the file */
	char			 prev[AUD_HEX + 1];
	char			*obuf;		/* not written yet */
	size_t			 olen;
	size_t			 ocap;
	uint64_t		 nheld;		/* lines in obuf */
	uint64_t		 lost;		/* dropped, unnoted */
	uint64_t		 down_at;	/* ms: became unavailable */
	uint64_t		 down_written;	/* lines written since */
	uint64_t		 check_at;	/* ms: next st_nlink look */
	uint64_t		 retry_at;	/* ms: next retry */
} aud = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.fd = -1,
	.cut_to = -1,
};

static size_t	aud_hold_max = AUD_HOLD_MAX;

/* Test hook (tests/unit/test_aud_verify.c); not for the daemon. */
void	aud_test_set_hold_max(size_t);

void
aud_test_set_hold_max(size_t bytes)
{
	aud_hold_max = bytes != 0 ? bytes : AUD_HOLD_MAX;
}

static const char *
aud_name(void)
{
	return aud.path != NULL ? aud.path : "stdout";
}

/*
 * Look at the end of the file just opened as <wfd> (<size> bytes). When a
 * crash left a cut last line, start a new line so that the next record is
 * not glued to it (the cut line stays: verification reports it). On the
 * first open, continue the chain from the last whole line's "hash"; a
 * reopen (rotation, a removed file) continues from the hash in memory.
 * Returns 0, or -1 with errno set when the newline cannot be written.
 */
static int
aud_open_tail(int wfd, off_t size)
{
	const size_t	 tail = 8 + AUD_HEX + 3; /* "hash":"HEX"}\n */
	char		*buf, *end;
	off_t		 start;
	ssize_t		 n;
	size_t		 len;
	int		 rfd;

	if (size <= 0 || (rfd = open(aud.path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	/* a record is far shorter; the hash sits at the end of its line */
	len = size > 65536 ? 65536 : (size_t)size;
	start = size - (off_t)len;
	buf = xmalloc(len);
	n = pread(rfd, buf, len, start);
	close(rfd);
	if (n <= 0) {
		free(buf);
		return 0;
	}
	len = (size_t)n;
	if (buf[len - 1] != '\n') {
		if (util_write_all(wfd, "\n", 1) == -1) {
			free(buf);
			return -1;
		}
		log_warnx("audit: %s ended in a cut line (a crash?); it stays "
		    "as it is and the next record starts on a new line",
		    aud.path);
		while (len > 0 && buf[len - 1] != '\n')
			len--;
	}
	if (aud.chain && !aud.prev_known && len > 0) {
		end = buf + len - tail;
		if (len >= tail && memcmp(end, "\"hash\":\"", 8) == 0 &&
		    util_is_lower_hex(end + 8, AUD_HEX) &&
		    memcmp(end + 8 + AUD_HEX, "\"}\n", 3) == 0)
			memcpy(aud.prev, end + 8, AUD_HEX);
		else
			log_warnx("audit: the last line of %s has no hash; "
			    "the chain starts again from 64 zeros", aud.path);
	}
	free(buf);
	return 0;
}

/* (Re)open the audit file. Returns 0, or -1 with errno set (not logged). */
static int
aud_open_file(void)
{
	struct stat	st;
	int		fd, err;

	if (aud.path == NULL) {
		aud.fd = STDOUT_FILENO;
		return 0;
	}
	fd = open(aud.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd == -1)
		return -1;
	if (fstat(fd, &st) == -1 ||
	    (S_ISREG(st.st_mode) && aud_open_tail(fd, st.st_size) == -1)) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	if (st.st_dev != aud.dev || st.st_ino != aud.ino)
		aud.cut_to = -1;	/* a pending cut was in another file */
	aud.dev = st.st_dev;
	aud.ino = st.st_ino;
	aud.prev_known = 1;
	aud.fd = fd;
	return 0;
}

static void
aud_close_file(void)
{
	if (aud.fd != -1 && aud.fd != STDOUT_FILENO)
		close(aud.fd);
	aud.fd = -1;
}

static int
aud_is_down(void)
{
	return __atomic_load_n(&aud.unavail, __ATOMIC_RELAXED);
}

/* <what> failed: hold every line, refuse requests, retry later. */
static void
aud_fail(const char *what, int err)
{
	uint64_t	now = util_now_ms();

	aud.retry_at = now + AUD_RETRY_MS;
	if (aud_is_down())
		return;
	aud.down_at = now;
	aud.down_written = 0;
	__atomic_store_n(&aud.unavail, 1, __ATOMIC_RELEASE);
	log_warnx("audit: cannot %s %s: %s; new requests are refused "
	    "(503 audit_unavailable) and records are held in memory until "
	    "it works again (retrying every %d ms)", what, aud_name(),
	    strerror(err), AUD_RETRY_MS);
}

/* Drop the first <n> bytes of obuf: they are in the file. */
static void
aud_consume(size_t n)
{
	uint64_t	 lines = 0;
	const char	*p = aud.obuf, *end = aud.obuf + n;

	/* a record is one line of some 500 bytes: memchr, not a byte loop */
	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		lines++;
		p++;
	}
	aud.nheld -= lines;
	aud.down_written += lines;
	memmove(aud.obuf, aud.obuf + n, aud.olen - n);
	aud.olen -= n;
}

/* Cut the file back to <to> bytes; never makes it longer. */
static int
aud_cut(off_t to)
{
	struct stat	st;

	if (fstat(aud.fd, &st) == -1)
		return -1;
	return st.st_size > to ? ftruncate(aud.fd, to) : 0;
}

/* Wait up to a second until the descriptor takes more; 1 if it does. */
static int
aud_pollout(void)
{
	struct pollfd	pfd = { .fd = aud.fd, .events = POLLOUT };

	return poll(&pfd, 1, 1000) > 0;
}

/*
 * Write obuf out (with an empty obuf: only check that the file is still
 * there). A removed file is created again at its path, which fails while
 * its directory is gone. Whole lines that reached the file leave obuf; a
 * cut last line is truncated away (regular files) and sent again with the
 * rest at the next try. Returns 0 when all is written, or -1 after marking
 * the audit unavailable.
 */
static int
aud_write_held(void)
{
	struct stat	 st;
	size_t		 done = 0, keep;
	ssize_t		 n;
	int		 cut = 0, err = 0;

	if (aud.fd == -1 && aud_open_file() == -1) {
		aud_fail("open", errno);
		return -1;
	}
	if (aud.path != NULL) {
		aud.check_at = util_now_ms() + AUD_CHECK_MS;
		if (fstat(aud.fd, &st) == -1) {
			err = errno;
			aud_close_file();
			aud_fail("stat", err);
			return -1;
		}
		if (st.st_nlink == 0) {
			aud_close_file();
			if (aud_open_file() == -1 || fstat(aud.fd, &st) == -1) {
				err = errno;
				aud_close_file();
				aud_fail("recreate", err);
				return -1;
			}
			log_warnx("audit: %s was removed; records go to a new "
			    "file at that path", aud.path);
		}
		/* only a regular file of our own can be cut back */
		cut = S_ISREG(st.st_mode);
		if (cut && aud.cut_to != -1) {
			if (aud_cut(aud.cut_to) == -1 ||
			    fstat(aud.fd, &st) == -1) {
				aud_fail("truncate", errno);
				return -1;
			}
			aud.cut_to = -1;
		}
	}
	if (aud.olen == 0)
		return 0;
	while (done < aud.olen) {
		n = write(aud.fd, aud.obuf + done, aud.olen - done);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		err = n == 0 ? EIO : errno;
		if (err == EINTR)
			continue;
		/* a non-blocking pipe (stdout): give its reader a moment */
		if ((err == EAGAIN || err == EWOULDBLOCK) && aud_pollout())
			continue;
		break;
	}
	keep = done;
	if (done < aud.olen && cut) {
		/* whole lines stay; a cut one goes, to be written again */
		while (keep > 0 && aud.obuf[keep - 1] != '\n')
			keep--;
		if (keep < done && aud_cut(st.st_size + (off_t)keep) == -1) {
			log_warn("audit: cannot cut %s back to its last whole "
			    "line; trying again before the next write",
			    aud.path);
			aud.cut_to = st.st_size + (off_t)keep;
		}
	}
	aud_consume(keep);
	if (aud.olen == 0)
		return 0;
	/* the same file is retried when full; anything else opens it again */
	if (err != ENOSPC && err != EDQUOT && err != EFBIG)
		aud_close_file();
	aud_fail("write", err);
	return -1;
}

/*
 * Chain <text> and append it to obuf: with hash_chain the hash covers
 * {...,"prev":"P"}, then ,"hash":"H" goes in before the closing brace.
 */
static void
aud_append(const char *text)
{
	unsigned char	 digest[SHA256_DIGEST_LENGTH];
	char		 hash[AUD_HEX + 1], *p;
	size_t		 len = strlen(text), need;
	int		 n;

	need = len + 2 * AUD_HEX + 32;
	if (aud.olen + need > aud.ocap) {
		aud.ocap = aud.olen + need + AUD_OBUF_FLUSH;
		aud.obuf = xrealloc(aud.obuf, aud.ocap);
	}
	p = aud.obuf + aud.olen;
	if (aud.chain && len >= 2 && text[len - 1] == '}') {
		memcpy(p, text, len - 1);
		n = (int)len - 1;
		n += snprintf(p + n, aud.ocap - aud.olen - (size_t)n,
		    "%s\"prev\":\"%s\"}", len > 2 ? "," : "", aud.prev);
		SHA256((unsigned char *)p, (size_t)n, digest);
		util_hex_encode(digest, sizeof(digest), hash);
		n--;
		n += snprintf(p + n, aud.ocap - aud.olen - (size_t)n,
		    ",\"hash\":\"%s\"}\n", hash);
		memcpy(aud.prev, hash, sizeof(hash));
	} else {
		memcpy(p, text, len);
		p[len] = '\n';
		n = (int)len + 1;
	}
	aud.olen += (size_t)n;
	aud.nheld++;
}

/* Records were dropped (past AUD_HOLD_MAX): say so in the file itself. */
static void
aud_note_lost(void)
{
	char	ts[40], text[160];

	util_rfc3339_ms(util_wall_ms(), ts, sizeof(ts));
	snprintf(text, sizeof(text), "{\"ts\":\"%s\",\"event\":"
	    "\"audit_records_lost\",\"count\":%" PRIu64 "}", ts, aud.lost);
	aud_append(text);
	log_warnx("audit: %" PRIu64 " records were lost while %s could not "
	    "be written; an audit_records_lost line marks the gap",
	    aud.lost, aud_name());
	aud.lost = 0;
}

static void
aud_chain_line(const char *text)
{
	if (aud.olen + strlen(text) + 2 * AUD_HEX + 32 + 160 > aud_hold_max) {
		/* never silently: counted, logged and noted in the file */
		__atomic_add_fetch(&aud.errors, 1, __ATOMIC_RELAXED);
		if (aud.lost++ == 0)
			log_warnx("audit: more than %zu KiB of records "
			    "wait for %s; records are being LOST until it "
			    "can be written", aud_hold_max / 1024, aud_name());
		return;
	}
	if (aud.lost > 0)
		aud_note_lost();
	aud_append(text);
	if (aud.olen >= AUD_OBUF_FLUSH && !aud_is_down())
		aud_write_held();
}

/*
 * After a batch or a timeout: write what is buffered, retry when
 * unavailable and the retry is due (or <final>), or check the file.
 */
static void
aud_service(int final)
{
	uint64_t	now = util_now_ms();

	if (aud_is_down()) {
		if (!final && now < aud.retry_at)
			return;
		if (aud_write_held() == -1)
			return;
		__atomic_store_n(&aud.unavail, 0, __ATOMIC_RELEASE);
		log_warnx("audit: writing again to %s after %" PRIu64 " ms; "
		    "the %" PRIu64 " records held meanwhile are written",
		    aud_name(), now - aud.down_at, aud.down_written);
		if (aud.ocap > 16 * AUD_OBUF_FLUSH) {
			/* give back what the outage took */
			free(aud.obuf);
			aud.obuf = NULL;
			aud.ocap = 0;
		}
		if (aud.lost > 0) {
			aud_note_lost();
			aud_write_held();
		}
		return;
	}
	if (aud.olen > 0 || (aud.path != NULL && now >= aud.check_at))
		aud_write_held();
}

/* SIGUSR1 (log rotation): the chain continues from the hash in memory. */
static void
aud_reopen_file(void)
{
	aud_close_file();
	if (aud_open_file() == -1) {
		aud_fail("reopen", errno);
		return;
	}
	log_info("audit: reopened %s", aud_name());
	aud.retry_at = 0;		/* held lines: try them now */
}

/* Wait on the condition for at most <ms>, or until signalled (-1). */
static void
aud_wait(int64_t ms)
{
	struct timespec	ts;

	if (ms < 0) {
		pthread_cond_wait(&aud.cond, &aud.mtx);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&aud.cond, &aud.mtx, &ts);
}

/* How long an idle writer sleeps: until the next retry or file check. */
static int64_t
aud_idle_ms(void)
{
	uint64_t	now = util_now_ms(), at;

	if (aud_is_down())
		at = aud.retry_at;
	else if (aud.path != NULL)
		at = aud.check_at;
	else
		return -1;
	return at > now ? (int64_t)(at - now) : 0;
}

/*
 * The writer wakes when AUD_BATCH lines wait, on stop/reopen, for a retry
 * or a file check, or AUD_FLUSH_MS after a first line: one wakeup and a
 * few write(2)s per batch instead of a context switch per request.
 */
static void *
aud_writer(void *arg)
{
	STAILQ_HEAD(, aud_line)	 batch;
	struct aud_line		*al, *next;
	int64_t			 ms;
	int			 stop, reopen;

	pthread_mutex_lock(&aud.mtx);
	for (;;) {
		if (STAILQ_EMPTY(&aud.queue) && !aud.stopping &&
		    !aud.reopen && (ms = aud_idle_ms()) != 0)
			aud_wait(ms);
		if (!STAILQ_EMPTY(&aud.queue) && !aud.stopping &&
		    !aud.reopen && aud.queued < AUD_BATCH)
			aud_wait(AUD_FLUSH_MS);	/* let a batch gather */
		STAILQ_INIT(&batch);
		STAILQ_CONCAT(&batch, &aud.queue);
		aud.queued = 0;
		stop = aud.stopping;
		reopen = aud.reopen;
		aud.reopen = 0;
		pthread_mutex_unlock(&aud.mtx);

		if (reopen)
			aud_reopen_file();
		for (al = STAILQ_FIRST(&batch); al != NULL; al = next) {
			next = STAILQ_NEXT(al, al_entry);
			aud_chain_line(al->al_text);
			free(al->al_text);
			free(al);
		}
		aud_service(stop);

		pthread_mutex_lock(&aud.mtx);
		if (stop && STAILQ_EMPTY(&aud.queue))
			break;
	}
	pthread_mutex_unlock(&aud.mtx);
	return NULL;
}

int
aud_start(const struct cfg *cfg)
{
	sigset_t	all, old;
	int		rc;

	STAILQ_INIT(&aud.queue);
	aud.queued = 0;
	aud.stopping = aud.reopen = 0;
	aud.unavail = 0;
	aud.errors = aud.lost = 0;
	aud.chain = cfg->c_audit_hash_chain;
	aud.gateway[0] = '\0';
	if (cfg->c_gateway != NULL)
		snprintf(aud.gateway, sizeof(aud.gateway), "%s",
		    cfg->c_gateway);
	else if (cfg->c_bs_redis && gethostname(aud.gateway,
	    sizeof(aud.gateway) - 1) == -1)
		snprintf(aud.gateway, sizeof(aud.gateway), "unknown");
	aud.gateway[sizeof(aud.gateway) - 1] = '\0';
	aud.prev_known = 0;
	memset(aud.prev, '0', AUD_HEX);
	aud.prev[AUD_HEX] = '\0';
	aud.olen = 0;
	aud.nheld = 0;
	aud.cut_to = -1;
	aud.dev = 0;
	aud.ino = 0;
	aud.path = strcmp(cfg->c_audit_file, "-") == 0 ? NULL :
	    xstrdup(cfg->c_audit_file);
	if (aud_open_file() == -1) {
		log_warn("audit: open %s", aud_name());
		free(aud.path);
		aud.path = NULL;
		return -1;
	}
	aud.check_at = util_now_ms() + AUD_CHECK_MS;
	/* signals belong to the main thread; a blocked SIGXFSZ also turns
	 * a file size limit into EFBIG instead of killing the process */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&aud.thread, NULL, aud_writer, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_warnx("audit: cannot start writer");
		aud_close_file();
		free(aud.path);
		aud.path = NULL;
		return -1;
	}
	aud.running = 1;
	return 0;
}

void
aud_submit(const struct aud_rec *rec)
{
	struct aud_line	*al;

	al = xmalloc(sizeof(*al));
	al->al_text = aud_rec_json(rec);
	pthread_mutex_lock(&aud.mtx);
	STAILQ_INSERT_TAIL(&aud.queue, al, al_entry);
	/* wake an idle writer, or a gathering one when the batch is full */
	if (++aud.queued == 1 || aud.queued == AUD_BATCH)
		pthread_cond_signal(&aud.cond);
	pthread_mutex_unlock(&aud.mtx);
}

void
aud_reopen(void)
{
	pthread_mutex_lock(&aud.mtx);
	aud.reopen = 1;
	pthread_cond_signal(&aud.cond);
	pthread_mutex_unlock(&aud.mtx);
}

void
aud_stop(void)
{
	if (!aud.running)
		return;
	pthread_mutex_lock(&aud.mtx);
	aud.stopping = 1;
	pthread_cond_signal(&aud.cond);
	pthread_mutex_unlock(&aud.mtx);
	pthread_join(aud.thread, NULL);
	aud.running = 0;
	if (aud.lost > 0)
		log_warnx("audit: %" PRIu64 " records were dropped (more than "
		    "%zu KiB waited) and are lost", aud.lost,
		    aud_hold_max / 1024);
	if (aud.nheld > 0) {
		/* the last try at stop failed too */
		__atomic_add_fetch(&aud.errors, aud.nheld, __ATOMIC_RELAXED);
		log_warnx("audit: stopping with %" PRIu64 " records that could "
		    "not be written to %s: they are lost", aud.nheld,
		    aud_name());
	}
	aud_close_file();
	free(aud.path);
	aud.path = NULL;
	free(aud.obuf);
	aud.obuf = NULL;
	aud.olen = aud.ocap = 0;
	aud.nheld = 0;
}

uint64_t
aud_write_errors(void)
{
	return __atomic_load_n(&aud.errors, __ATOMIC_RELAXED);
}

/*
 * The record's JSON, written directly: one allocation per record instead of
 * a json-c object per field (this runs on the workers for every request).
 * Strings are escaped as JSON requires; bytes that are not UTF-8 become
 * U+FFFD, so a line is always valid JSON whatever a client sent.
 */
struct jbuf {
	char	*jb_p;
	size_t	 jb_len;
	size_t	 jb_cap;
	int	 jb_first;	/* no member written yet in this object */
};

static void
jb_grow(struct jbuf *b, size_t more)
{
	if (b->jb_len + more + 1 <= b->jb_cap)
		return;
	while (b->jb_len + more + 1 > b->jb_cap)
		b->jb_cap *= 2;
	b->jb_p = xrealloc(b->jb_p, b->jb_cap);
}

/* the terminating NUL is written once, by aud_rec_json (jb_grow keeps
   room for it) */
static inline void
jb_raw(struct jbuf *b, const char *s, size_t n)
{
	jb_grow(b, n);
	memcpy(b->jb_p + b->jb_len, s, n);
	b->jb_len += n;
}

/* Length of the valid UTF-8 sequence at <s> (at most <n>), or 0. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
	size_t		len, i;
	uint32_t	cp;

	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	len = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	if (n < len)
		return 0;
	cp = s[0] & (0xff >> (len + 1));
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* overlong, surrogates, beyond U+10FFFF */
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

static void
jb_string(struct jbuf *b, const char *v)
{
	const unsigned char	*s = (const unsigned char *)v;
	size_t			 n = strlen(v), i, run, u;
	char			 esc[8];

	jb_grow(b, n + 2);
	b->jb_p[b->jb_len++] = '"';
	for (i = 0; i < n; ) {
		/* copy the longest run that needs no escaping in one go */
		for (run = i; run < n && s[run] >= 0x20 && s[run] < 0x80 &&
		    s[run] != '"' && s[run] != '\\'; run++)
			;
		if (run > i) {
			jb_raw(b, v + i, run - i);
			i = run;
			continue;
		}
		if (s[i] >= 0x80) {
			if ((u = utf8_len(s + i, n - i)) > 0) {
				jb_raw(b, v + i, u);
				i += u;
			} else {
				jb_raw(b, "\\ufffd", 6);
				i++;
			}
			continue;
		}
		switch (s[i]) {
		case '"':  jb_raw(b, "\\\"", 2); break;
		case '\\': jb_raw(b, "\\\\", 2); break;
		case '\n': jb_raw(b, "\\n", 2); break;
		case '\r': jb_raw(b, "\\r", 2); break;
		case '\t': jb_raw(b, "\\t", 2); break;
		default:
			snprintf(esc, sizeof(esc), "\\u%04x", s[i]);
			jb_raw(b, esc, 6);
		}
		i++;
	}
	jb_grow(b, 1);
	b->jb_p[b->jb_len++] = '"';
}

/* ,"KEY": in one step: a record has some 20 members */
static void
jb_key(struct jbuf *b, const char *k)
{
	size_t	klen = strlen(k);
	char	*p;

	jb_grow(b, klen + 4);
	p = b->jb_p + b->jb_len;
	if (!b->jb_first)
		*p++ = ',';
	b->jb_first = 0;
	*p++ = '"';
	memcpy(p, k, klen);
	p += klen;
	*p++ = '"';
	*p++ = ':';
	b->jb_len = (size_t)(p - b->jb_p);
}

static void
add_str(struct jbuf *b, const char *k, const char *v)
{
	if (v == NULL)
		return;
	jb_key(b, k);
	jb_string(b, v);
}

static void
add_int(struct jbuf *b, const char *k, int64_t v)
{
	char	num[24];

	if (v < 0)
		return;
	jb_key(b, k);
	jb_raw(b, num, util_u64_dec((uint64_t)v, num));
}

char *
aud_rec_json(const struct aud_rec *r)
{
	struct jbuf	 b;
	char		 ts[40], num[48];
	size_t		 i;
	int		 n;

	b.jb_cap = 512;
	b.jb_p = xmalloc(b.jb_cap);
	b.jb_len = 0;
	b.jb_first = 1;
	jb_raw(&b, "{", 1);
	util_rfc3339_ms(r->ar_start_wall_ms, ts, sizeof(ts));
	add_str(&b, "ts", ts);
	add_str(&b, "id", r->ar_id);
	if (aud.gateway[0] != '\0')
		add_str(&b, "gateway", aud.gateway);
	add_str(&b, "sandbox", r->ar_sandbox);
	add_str(&b, "client", r->ar_client);
	add_str(&b, "mode", r->ar_mode);
	add_str(&b, "proto", r->ar_proto);
	add_str(&b, "method", r->ar_method);
	add_str(&b, "host", r->ar_host);
	add_int(&b, "port", r->ar_port);
	add_str(&b, "path", r->ar_path);
	add_int(&b, "status", r->ar_status);
	add_str(&b, "decision", r->ar_decision);
	add_str(&b, "reason", r->ar_reason);
	add_str(&b, "rule", r->ar_rule);
	add_str(&b, "would_deny", r->ar_would_deny);
	if (r->ar_nsecrets > 0) {
		jb_key(&b, "secrets");
		jb_raw(&b, "[", 1);
		for (i = 0; i < r->ar_nsecrets; i++) {
			if (i > 0)
				jb_raw(&b, ",", 1);
			jb_string(&b, r->ar_secrets[i]);
		}
		jb_raw(&b, "]", 1);
	}
	if (r->ar_nsecrets_at > 0) {
		jb_key(&b, "secrets_at");
		jb_raw(&b, "[", 1);
		for (i = 0; i < r->ar_nsecrets_at; i++) {
			if (i > 0)
				jb_raw(&b, ",", 1);
			jb_string(&b, r->ar_secrets_at[i]);
		}
		jb_raw(&b, "]", 1);
	}
	add_int(&b, "bytes_in", r->ar_bytes_in);
	add_int(&b, "bytes_out", r->ar_bytes_out);
	add_int(&b, "duration_ms", r->ar_duration_ms);
	add_str(&b, "upstream", r->ar_upstream);
	add_str(&b, "via", r->ar_via);
	add_str(&b, "country", r->ar_country);
	if (r->ar_asn != 0)
		add_int(&b, "asn", (int64_t)r->ar_asn);
	add_str(&b, "tls", r->ar_tls);
	add_str(&b, "http", r->ar_http);
	add_str(&b, "dns_type", r->ar_dns_type);
	add_str(&b, "dns_rcode", r->ar_dns_rcode);
	add_str(&b, "dns_answer", r->ar_dns_answer);
	if (r->ar_mcp_method != NULL) {
		jb_key(&b, "mcp");
		jb_raw(&b, "{", 1);
		b.jb_first = 1;
		add_str(&b, "method", r->ar_mcp_method);
		add_str(&b, "tool", r->ar_mcp_tool);
		jb_raw(&b, "}", 1);
		b.jb_first = 0;
	}
	if (r->ar_usage != NULL) {
		jb_key(&b, "usage");
		jb_raw(&b, "{", 1);
		b.jb_first = 1;
		add_str(&b, "model", r->ar_usage->u_model[0] ?
		    r->ar_usage->u_model : NULL);
		add_int(&b, "input_tokens", (int64_t)r->ar_usage->u_input);
		add_int(&b, "cached_tokens", (int64_t)r->ar_usage->u_cached);
		add_int(&b, "cache_write_tokens",
		    (int64_t)r->ar_usage->u_cache_write);
		add_int(&b, "output_tokens", (int64_t)r->ar_usage->u_output);
		jb_raw(&b, "}", 1);
		b.jb_first = 0;
	}
	if (r->ar_cost_micro >= 0) {
		/* a JSON number derived from the integer, never a float sum */
		jb_key(&b, "cost_usd");
		n = snprintf(num, sizeof(num), "%lld.%06lld",
		    (long long)(r->ar_cost_micro / 1000000),
		    (long long)(r->ar_cost_micro % 1000000));
		jb_raw(&b, num, (size_t)n);
		add_int(&b, "cost_microusd", r->ar_cost_micro);
		if (r->ar_unpriced) {
			jb_key(&b, "unpriced");
			jb_raw(&b, "true", 4);
		}
		if (r->ar_unmetered) {
			jb_key(&b, "unmetered");
			jb_raw(&b, "true", 4);
		}
		if (r->ar_usage_partial) {
			jb_key(&b, "usage_partial");
			jb_raw(&b, "true", 4);
		}
	}
	jb_raw(&b, "}", 1);
	b.jb_p[b.jb_len] = '\0';
	return b.jb_p;
}

/* Lock-free: workers ask this for every request. */
int
aud_available(void)
{
	return !__atomic_load_n(&aud.unavail, __ATOMIC_ACQUIRE);
}
