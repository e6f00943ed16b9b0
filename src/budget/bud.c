/*
 * The file store: per-sandbox counters, caps and money reservations made
 * durable in a ledger (the sandbox table and its windows are in
 * bud_tab.c, admission and the other cap operations in bud_caps.c, bytes
 * in flight and LLM concurrency in bud_flow.c, the Redis store in
 * bud_redis.c).
 *
 * State: a hash table of sandboxes, each with its own mutex. Admission
 * (roll the window, check every cap, take a rate token, count, reserve)
 * runs under that one lock, so parallel requests of a sandbox can never
 * reserve past its cap together.
 *
 * Ledger (budget_store: file): state_dir/budget/ledger, append-only text,
 * one event a line; <sb> is the sandbox id with bytes <= ' ', >= 0x7f and
 * '%' written as %XX; <ws> is the window start in unix milliseconds
 * (0 = lifetime):
 *
 *	R <sb> <ws> <reserve>			reservation (admit)
 *	S <sb> <ws> <reserved> <cost>		settle
 *	B <sb> <ws> <in> <out> <requests>	counter deltas (>= 1/s)
 *	Z <sb>					usage reset
 *	U <sb> <day> <model> <requests> <cost> <in> <cached> <cwrite> <out>
 *						spend by model and UTC day
 *						(added up; usage_tab.c)
 *	C <sb> <ws> <requests> <in> <out> <spend> <reserved>
 *						snapshot (compaction)
 *
 * A single writer thread appends: it takes every line queued so far,
 * writes them, calls fdatasync once and wakes the whole batch (group
 * commit). bud_admit() returns only once its R line is in such a batch.
 * S, B and Z lines are not waited for: a crash loses at most about a
 * second of byte and request counts (B) or a reset (Z), and a lost S
 * leaves its R to count in full, so recorded spend never falls below what
 * was forwarded. A failed write or sync makes the ledger unusable until
 * restart (what reached the disk is unknowable after a failed fsync):
 * requests that need a reservation are refused from then on.
 *
 * Replay (bud_open) applies the lines in order with the same window rule
 * as the live code; reservations left open are the requests that were in
 * flight at the crash and become spend at their reserved amount. Then the
 * ledger is compacted: one C line per sandbox into a temporary file,
 * fsync, rename, fsync of the directory. At run time the writer compacts
 * the same way when the file passes 64 MiB (and twice its last snapshot),
 * so the file stays bounded.
 *
 * Without bud_open() (tests, or before start-up) the counters and caps
 * work in memory only.
 */
#include "config.h"

#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "budget/bud.h"
#include "budget/bud_internal.h"
#include "cfg/cfg.h"
#include "util/log.h"
#include "util/util.h"


#define BUD_DIR_MODE		0700
#define BUD_FILE_MODE		0600
#define BUD_FLUSH_MS		1000	/* deltas reach the ledger */
#define BUD_COMPACT_SIZE	(64ULL << 20)



/*
 * The ledger and its writer. Lock order: the table (bud_tab.c), then a sandbox's
 * sb_lock, then led.mtx.
 */
static struct {
	pthread_mutex_t	 mtx;
	pthread_cond_t	 cond;		/* writer: lines, stop */
	pthread_cond_t	 done;		/* waiters: committed */
	pthread_t	 thread;
	int		 open;
	int		 stopping;
	int		 broken;	/* a write or sync failed: sticky */
	char		*buf;		/* queued lines */
	size_t		 len;
	size_t		 cap;
	uint64_t	 queued;	/* sequence number of the last line */
	uint64_t	 committed;	/* last one known durable */
	int		 fd;
	int		 lockfd;
	char		*dir;		/* state_dir/budget */
	char		*path;		/* .../ledger */
	char		*tmp;		/* .../ledger.tmp */
	uint64_t	 size;		/* bytes in the file */
	uint64_t	 snap_size;	/* bytes of the last snapshot */
	struct bud_watch *watch;	/* events to make active on commit */
	uint64_t	 fsync_delay_ms; /* test only (env
					   AIRLOCK_TEST_FSYNC_DELAY_MS) */
} led = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
	.lockfd = -1,
};

/* A worker's event waiting for a line to be durable (bud_led_watch). */
struct bud_watch {
	struct bud_watch	*w_next;
	uint64_t		 w_seq;
	struct event		*w_ev;
};

static uint64_t		 bud_compact_size = BUD_COMPACT_SIZE;

/* Test hook (tests/unit/test_bud.c); not for the daemon. */
void	bud_test_set_compact_size(uint64_t);

void
bud_test_set_compact_size(uint64_t bytes)
{
	bud_compact_size = bytes != 0 ? bytes : BUD_COMPACT_SIZE;
}

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* ---- ledger queue --------------------------------------------------- */

/*
 * Queue one line (printf format, ending in "\n"); returns its sequence
 * number for bud_led_wait(), 0 when there is no ledger. Called with the
 * sandbox's lock held, so a sandbox's lines are queued in the order its
 * state changed.
 */
uint64_t
bud_led_queue(const char *fmt, ...)
{
	va_list		ap;
	uint64_t	seq;
	int		n;

	pthread_mutex_lock(&led.mtx);
	if (!led.open) {
		pthread_mutex_unlock(&led.mtx);
		return 0;
	}
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatalx("bud: ledger line format");
	if (led.len + (size_t)n + 1 > led.cap) {
		led.cap = (led.len + (size_t)n + 1) * 2;
		led.buf = xrealloc(led.buf, led.cap);
	}
	va_start(ap, fmt);
	vsnprintf(led.buf + led.len, led.cap - led.len, fmt, ap);
	va_end(ap);
	led.len += (size_t)n;
	seq = ++led.queued;
	pthread_cond_signal(&led.cond);
	pthread_mutex_unlock(&led.mtx);
	return seq;
}

/* Wait until line <seq> is durable. 0, or -1 if the ledger failed. */
int
bud_led_wait(uint64_t seq)
{
	int	rc;

	if (seq == 0)
		return 0;
	pthread_mutex_lock(&led.mtx);
	while (led.committed < seq && !led.broken)
		pthread_cond_wait(&led.done, &led.mtx);
	rc = led.committed >= seq ? 0 : -1;
	pthread_mutex_unlock(&led.mtx);
	return rc;
}

static int
fsync_dir(const char *dir)
{
	int	fd, rc;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/*
 * Replace the ledger with <snap> (C lines): temporary file, fsync,
 * rename, fsync of the directory; the new file becomes led.fd. Only the
 * writer thread (or bud_open before it starts) calls this.
 */
static int
led_install(const char *snap, size_t len)
{
	int	fd;

	(void)unlink(led.tmp);
	fd = open(led.tmp, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC |
	    O_NOFOLLOW, BUD_FILE_MODE);
	if (fd == -1) {
		log_warn("bud: %s", led.tmp);
		return -1;
	}
	if (util_write_all(fd, snap, len) == -1 || fsync(fd) == -1) {
		log_warn("bud: write %s", led.tmp);
		goto fail;
	}
	if (rename(led.tmp, led.path) == -1) {
		log_warn("bud: rename %s", led.tmp);
		goto fail;
	}
	/* From here the snapshot is the ledger, whatever else fails. */
	if (fsync_dir(led.dir) == -1)
		log_warn("bud: fsync %s", led.dir);
	if (led.fd != -1)
		close(led.fd);
	led.fd = fd;
	led.size = led.snap_size = len;
	return 0;
 fail:
	close(fd);
	(void)unlink(led.tmp);
	return -1;
}

static void
flush_one(struct bud_sb *sb, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&sb->sb_lock);
	if (sb->sb_d_in != 0 || sb->sb_d_out != 0 || sb->sb_d_req != 0) {
		(void)bud_led_queue("B %s %" PRIu64 " %" PRIu64 " %" PRIu64
		    " %" PRIu64 "\n", sb->sb_esc, sb->sb_ws_ms, sb->sb_d_in,
		    sb->sb_d_out, sb->sb_d_req);
		sb->sb_d_in = sb->sb_d_out = sb->sb_d_req = 0;
	}
	pthread_mutex_unlock(&sb->sb_lock);
}

/* Queue the pending counter deltas of every sandbox (writer, 1/s). */
static void
bud_flush_deltas(void)
{
	bud_tab_lock();
	bud_tab_each(flush_one, NULL);
	bud_tab_unlock();
}

struct strbuf {
	char	*s_buf;
	size_t	 s_len;
	size_t	 s_cap;
};

static void
strbuf_printf(struct strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
strbuf_printf(struct strbuf *s, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatalx("bud: snapshot format");
	if (s->s_len + (size_t)n + 1 > s->s_cap) {
		s->s_cap = (s->s_len + (size_t)n + 1) * 2;
		s->s_buf = xrealloc(s->s_buf, s->s_cap);
	}
	va_start(ap, fmt);
	vsnprintf(s->s_buf + s->s_len, s->s_cap - s->s_len, fmt, ap);
	va_end(ap);
	s->s_len += (size_t)n;
}

static void
snap_emit(void *arg, const char *line)
{
	strbuf_printf(arg, "%s", line);
}

/* One C line per sandbox that has anything to remember, and its U lines.
 * Call with the sandbox locked (or no other thread running). Zeroes the
 * deltas: the snapshot holds them. */
static void
bud_snap_one(struct strbuf *s, struct bud_sb *sb)
{
	const struct bud_counters	*c = &sb->sb_c;

	sb->sb_d_in = sb->sb_d_out = sb->sb_d_req = 0;
	bud_use_lines(sb, snap_emit, s);
	/* All zero: replaying nothing gives the same (even the window start
	 * does not matter, the next request rolls to its own). */
	if (c->bc_requests == 0 && c->bc_bytes_in == 0 &&
	    c->bc_bytes_out == 0 && c->bc_spend == 0 && c->bc_reserved == 0)
		return;
	strbuf_printf(s, "C %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
	    " %" PRIu64 " %" PRIu64 "\n", sb->sb_esc, sb->sb_ws_ms,
	    c->bc_requests, c->bc_bytes_in, c->bc_bytes_out, c->bc_spend,
	    c->bc_reserved);
}

/* ---- the writer ----------------------------------------------------- */

static uint64_t
mono_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Append <len> bytes and make them durable. Writer only. */
static int
led_append(const char *p, size_t len)
{
	if (util_write_all(led.fd, p, len) == -1) {
		log_warn("bud: write %s", led.path);
		return -1;
	}
	led.size += len;
	if (led.fsync_delay_ms > 0) {
		/* test only: a slow disk (tests/integration/481-*) */
		struct timespec	ts = { (time_t)(led.fsync_delay_ms / 1000),
		    (long)(led.fsync_delay_ms % 1000) * 1000000 };

		while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
			;
	}
	if (fdatasync(led.fd) == -1) {
		log_warn("bud: fdatasync %s", led.path);
		return -1;
	}
	return 0;
}

/* A batch up to <seq> is durable (rc 0) or failed: wake its waiters. Call
 * with led.mtx held. */
static void
led_commit(int rc, uint64_t seq)
{
	struct bud_watch	**wp, *w;

	if (rc == 0)
		led.committed = seq;
	else if (!led.broken) {
		led.broken = 1;
		log_warnx("bud: ledger failed; refusing metered requests "
		    "until restart");
	}
	pthread_cond_broadcast(&led.done);
	/* workers waiting without blocking: their events (thread-safe) */
	for (wp = &led.watch; (w = *wp) != NULL;) {
		if (led.committed < w->w_seq && !led.broken) {
			wp = &w->w_next;
			continue;
		}
		event_active(w->w_ev, EV_TIMEOUT, 1);
		*wp = w->w_next;
		free(w);
	}
}

int
bud_led_state(uint64_t seq)
{
	int	rc;

	if (seq == 0)
		return 1;
	pthread_mutex_lock(&led.mtx);
	rc = led.committed >= seq ? 1 : led.broken ? -1 : 0;
	pthread_mutex_unlock(&led.mtx);
	return rc;
}

int
bud_led_watch(uint64_t seq, struct event *ev)
{
	struct bud_watch	*w;

	pthread_mutex_lock(&led.mtx);
	if (seq == 0 || led.committed >= seq || led.broken) {
		pthread_mutex_unlock(&led.mtx);
		return 1;
	}
	w = xcalloc(1, sizeof(*w));
	w->w_seq = seq;
	w->w_ev = ev;
	w->w_next = led.watch;
	led.watch = w;
	pthread_mutex_unlock(&led.mtx);
	return 0;
}

void
bud_led_unwatch(struct event *ev)
{
	struct bud_watch	**wp, *w;

	bud_rop_unwatch(ev);	/* the Redis store's waits too */
	pthread_mutex_lock(&led.mtx);
	for (wp = &led.watch; (w = *wp) != NULL;) {
		if (w->w_ev != ev) {
			wp = &w->w_next;
			continue;
		}
		*wp = w->w_next;
		free(w);
	}
	pthread_mutex_unlock(&led.mtx);
}

static void
lock_one(struct bud_sb *sb, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&sb->sb_lock);
}

static void
snap_unlock_one(struct bud_sb *sb, void *arg)
{
	bud_snap_one(arg, sb);
	pthread_mutex_unlock(&sb->sb_lock);
}

/*
 * Compact at run time. With the table and every sandbox locked no state
 * can change, so the lines queued so far and the snapshot describe the
 * same moment: the lines go to the old file (their waiters need them
 * durable now), the snapshot replaces it, and whatever is queued after
 * the locks drop is appended to the new file.
 */
static void
led_compact(void)
{
	struct strbuf	 snap = { NULL, 0, 0 };
	char		*pend;
	size_t		 plen;
	uint64_t	 seq;
	int		 rc;

	bud_tab_lock();
	bud_tab_each(lock_one, NULL);
	pthread_mutex_lock(&led.mtx);
	pend = led.buf;
	plen = led.len;
	seq = led.queued;
	led.buf = NULL;
	led.len = led.cap = 0;
	pthread_mutex_unlock(&led.mtx);
	bud_tab_each(snap_unlock_one, &snap);
	bud_tab_unlock();

	rc = plen == 0 ? 0 : led_append(pend, plen);
	free(pend);
	pthread_mutex_lock(&led.mtx);
	led_commit(rc, seq);
	pthread_mutex_unlock(&led.mtx);

	if (rc == 0 && led_install(snap.s_buf != NULL ? snap.s_buf : "",
	    snap.s_len) == 0)
		log_info("bud: ledger compacted to %zu bytes", snap.s_len);
	else
		led.snap_size = led.size;	/* retry at twice this size */
	free(snap.s_buf);
}

static void *
led_main(void *arg)
{
	struct timespec	 ts;
	char		*wbuf = NULL, *t;
	size_t		 wlen, wcap = 0, tc;
	uint64_t	 seq, next_flush, now;
	int		 rc, stop;

	next_flush = mono_ms() + BUD_FLUSH_MS;
	pthread_mutex_lock(&led.mtx);
	for (;;) {
		while (led.len == 0 && !led.stopping &&
		    (now = mono_ms()) < next_flush) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)((next_flush - now) / 1000);
			ts.tv_nsec += (long)((next_flush - now) % 1000) *
			    1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&led.cond, &led.mtx, &ts);
		}
		stop = led.stopping;
		if (stop || mono_ms() >= next_flush) {
			pthread_mutex_unlock(&led.mtx);
			bud_flush_deltas();
			pthread_mutex_lock(&led.mtx);
			next_flush = mono_ms() + BUD_FLUSH_MS;
		}
		if (led.len == 0) {
			if (stop)
				break;
			continue;
		}
		/* Swap buffers: callers keep queueing while we sync. */
		t = led.buf;
		led.buf = wbuf;
		wbuf = t;
		tc = led.cap;
		led.cap = wcap;
		wcap = tc;
		wlen = led.len;
		led.len = 0;
		seq = led.queued;
		if (led.broken) {
			/* Nothing more is durable; waiters already failed. */
			continue;
		}
		pthread_mutex_unlock(&led.mtx);

		rc = led_append(wbuf, wlen);

		pthread_mutex_lock(&led.mtx);
		led_commit(rc, seq);
		if (rc == 0 && led.size >= bud_compact_size &&
		    led.size >= 2 * led.snap_size) {
			pthread_mutex_unlock(&led.mtx);
			led_compact();
			pthread_mutex_lock(&led.mtx);
		}
	}
	pthread_mutex_unlock(&led.mtx);
	free(wbuf);
	return NULL;
}

/* ---- replay --------------------------------------------------------- */

/* Parse <n> unsigned decimal fields; strtoull alone would take "-1". */
static int
parse_u64s(char **f, int n, uint64_t *v)
{
	char	*end;
	int	 i;

	for (i = 0; i < n; i++) {
		if (f[i][0] < '0' || f[i][0] > '9')
			return -1;
		errno = 0;
		v[i] = strtoull(f[i], &end, 10);
		if (errno != 0 || *end != '\0')
			return -1;
	}
	return 0;
}

/* Apply one complete ledger line (no newline); -1 if malformed. */
static int
replay_line(char *line)
{
	struct bud_sb	*sb;
	char		*f[10], *p, *save = NULL;
	uint64_t	 v[6];
	int		 n = 0, want;

	for (p = strtok_r(line, " ", &save); p != NULL;
	    p = strtok_r(NULL, " ", &save)) {
		if (n == 10)
			return -1;
		f[n++] = p;
	}
	if (n < 2 || f[0][1] != '\0')
		return -1;
	if (f[0][0] == 'U')
		return bud_use_replay(f, n);
	switch (f[0][0]) {
	case 'R':
		want = 4;
		break;
	case 'S':
		want = 5;
		break;
	case 'B':
		want = 6;
		break;
	case 'Z':
		want = 2;
		break;
	case 'C':
		want = 8;
		break;
	default:
		return -1;
	}
	if (n != want || parse_u64s(f + 2, n - 2, v) == -1 ||
	    bud_unescape(f[1]) == -1)
		return -1;
	sb = bud_find(f[1], 1);
	switch (f[0][0]) {
	case 'R':
		bud_roll(sb, v[0]);
		sb->sb_c.bc_reserved = sat_add(sb->sb_c.bc_reserved, v[1]);
		break;
	case 'S':
		bud_roll(sb, v[0]);
		sb->sb_c.bc_reserved -= v[1] < sb->sb_c.bc_reserved ? v[1] :
		    sb->sb_c.bc_reserved;
		sb->sb_c.bc_spend = sat_add(sb->sb_c.bc_spend, v[2]);
		break;
	case 'B':
		bud_roll(sb, v[0]);
		sb->sb_c.bc_bytes_in = sat_add(sb->sb_c.bc_bytes_in, v[1]);
		sb->sb_c.bc_bytes_out = sat_add(sb->sb_c.bc_bytes_out, v[2]);
		sb->sb_c.bc_requests = sat_add(sb->sb_c.bc_requests, v[3]);
		break;
	case 'Z':
		sb->sb_c.bc_requests = sb->sb_c.bc_bytes_in = 0;
		sb->sb_c.bc_bytes_out = sb->sb_c.bc_spend = 0;
		bud_use_clear(sb);
		break;
	case 'C':
		sb->sb_ws_ms = v[0];
		sb->sb_c.bc_requests = v[1];
		sb->sb_c.bc_bytes_in = v[2];
		sb->sb_c.bc_bytes_out = v[3];
		sb->sb_c.bc_spend = v[4];
		sb->sb_c.bc_reserved = v[5];
		break;
	}
	return 0;
}

/*
 * Replay <path> into the table. Only lines ending in a newline count: a
 * torn tail was never acknowledged (bud_admit() had not returned), and a
 * torn S could otherwise read as a smaller cost.
 */
static int
replay(const char *path)
{
	FILE	*fp;
	char	*line = NULL;
	size_t	 lcap = 0;
	ssize_t	 n;
	uint64_t lines = 0, bad = 0;
	int	 fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd == -1) {
		if (errno == ENOENT)
			return 0;
		log_warn("bud: %s", path);
		return -1;
	}
	if ((fp = fdopen(fd, "r")) == NULL) {
		log_warn("bud: fdopen");
		close(fd);
		return -1;
	}
	while ((n = getline(&line, &lcap, fp)) != -1) {
		if (n == 0 || line[n - 1] != '\n' ||
		    strlen(line) != (size_t)n) {
			bad++;
			continue;
		}
		line[n - 1] = '\0';
		lines++;
		if (replay_line(line) == -1)
			bad++;
	}
	if (ferror(fp)) {
		log_warn("bud: read %s", path);
		free(line);
		fclose(fp);
		return -1;
	}
	free(line);
	fclose(fp);
	if (bad != 0)
		log_warnx("bud: %s: skipped %" PRIu64 " malformed or torn "
		    "line(s)", path, bad);
	log_debug("bud: replayed %" PRIu64 " ledger lines", lines);
	return 0;
}

/* An open reservation at start-up becomes spend (see bud_open). */
static void
open_spend_one(struct bud_sb *sb, void *arg)
{
	sb->sb_c.bc_spend = sat_add(sb->sb_c.bc_spend, sb->sb_c.bc_reserved);
	sb->sb_c.bc_reserved = 0;
	bud_snap_one(arg, sb);
}

/* ---- open / close --------------------------------------------------- */

static int
bud_mkdir(const char *path)
{
	if (mkdir(path, BUD_DIR_MODE) == 0 || errno == EEXIST)
		return 0;
	log_warn("bud: mkdir %s", path);
	return -1;
}

static void
led_paths_free(void)
{
	free(led.dir);
	free(led.path);
	free(led.tmp);
	led.dir = led.path = led.tmp = NULL;
}

int
bud_open(const char *state_dir)
{
	struct strbuf	 snap = { NULL, 0, 0 };
	pthread_condattr_t ca;
	char		*lock = NULL;
	const char	*s;

	if (led.open || led.fd != -1) {
		log_warnx("bud: ledger already open");
		return -1;
	}
	if (asprintf(&led.dir, "%s/budget", state_dir) == -1 ||
	    asprintf(&led.path, "%s/ledger", led.dir) == -1 ||
	    asprintf(&led.tmp, "%s/ledger.tmp", led.dir) == -1 ||
	    asprintf(&lock, "%s/lock", led.dir) == -1)
		fatal("asprintf");
	if (bud_mkdir(state_dir) == -1 || bud_mkdir(led.dir) == -1)
		goto fail;
	/* Our directory alone: the ledger tells what sandboxes spend. */
	if (chmod(led.dir, BUD_DIR_MODE) == -1)
		log_warn("bud: chmod %s", led.dir);
	/* The directory entry itself must survive a power loss too. */
	if (fsync_dir(state_dir) == -1)
		log_warn("bud: fsync %s", state_dir);

	/* Two gateways appending to one ledger would count twice. */
	led.lockfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    BUD_FILE_MODE);
	if (led.lockfd == -1) {
		log_warn("bud: %s", lock);
		goto fail;
	}
	if (flock(led.lockfd, LOCK_EX | LOCK_NB) == -1) {
		log_warn("bud: %s is in use by another process", led.dir);
		goto fail;
	}

	if (replay(led.path) == -1)
		goto fail;

	/*
	 * Reservations still open were in flight at the crash: their
	 * requests may have been forwarded and consumed, so they become
	 * spend at the reserved (worst case) amount.
	 */
	bud_tab_each(open_spend_one, &snap);
	if (led_install(snap.s_buf != NULL ? snap.s_buf : "", snap.s_len) ==
	    -1)
		goto fail;
	free(snap.s_buf);
	snap.s_buf = NULL;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&led.cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&led.done, NULL);
	led.stopping = led.broken = 0;
	led.queued = led.committed = 0;
	led.open = 1;
	if ((s = getenv("AIRLOCK_TEST_FSYNC_DELAY_MS")) != NULL)
		led.fsync_delay_ms = strtoull(s, NULL, 10);	/* test only */
	if (pthread_create(&led.thread, NULL, led_main, NULL) != 0)
		fatalx("bud: pthread_create");
	free(lock);
	return 0;
 fail:
	free(snap.s_buf);
	free(lock);
	if (led.lockfd != -1)
		close(led.lockfd);
	led.lockfd = -1;
	if (led.fd != -1)
		close(led.fd);
	led.fd = -1;
	led_paths_free();
	bud_table_free();
	return -1;
}

/* Flush, stop the writer, forget every sandbox. Call once no other thread
 * uses the budget any more. */
void
bud_close(void)
{
	if (led.open) {
		pthread_mutex_lock(&led.mtx);
		led.stopping = 1;
		pthread_cond_signal(&led.cond);
		pthread_mutex_unlock(&led.mtx);
		pthread_join(led.thread, NULL);
		pthread_mutex_lock(&led.mtx);
		led.open = 0;
		free(led.buf);
		led.buf = NULL;
		led.len = led.cap = 0;
		pthread_mutex_unlock(&led.mtx);
		pthread_cond_destroy(&led.cond);
		pthread_cond_destroy(&led.done);
	}
	if (led.fd != -1)
		close(led.fd);
	if (led.lockfd != -1)
		close(led.lockfd);
	led.fd = led.lockfd = -1;
	led_paths_free();
	bud_table_free();
}
