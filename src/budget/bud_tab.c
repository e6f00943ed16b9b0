/*
 * The budget's sandbox table (each entry with its own mutex), its clocks
 * and its windows: the state every store shares. The durable side is the
 * store's (bud.c: the file ledger; bud_redis.c: Redis).
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/bud.h"
#include "budget/bud_internal.h"
#include "cfg/cfg.h"
#include "util/log.h"
#include "util/util.h"

#define BUD_NBUCKETS0		256

/* The sandbox table. Entries live until bud_close(), so a pointer found
 * under the table lock stays valid after it is released. */
static struct {
	pthread_mutex_t	  mtx;
	struct bud_sb	**tab;
	size_t		  nbuckets;
	size_t		  count;
} sbt = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
};

static uint64_t		 (*bud_clock)(void);

/* Test hooks (tests/unit/test_bud.c); not for the daemon. */
void	bud_test_set_clock(uint64_t (*)(void));

/*
 * One clock for windows and rate while testing: the hook returns unix
 * milliseconds and stands for both the wall and the monotonic clock.
 */
void
bud_test_set_clock(uint64_t (*fn)(void))
{
	bud_clock = fn;
}

uint64_t
bud_wall_ms(void)
{
	return bud_clock != NULL ? bud_clock() : util_wall_ms();
}

uint64_t
bud_mono_ms(void)
{
	return bud_clock != NULL ? bud_clock() : util_now_ms();
}

/* ---- the sandbox table ---------------------------------------------- */

static size_t
bud_hash(const char *s)
{
	uint64_t	h = 1469598103934665603ULL;	/* FNV-1a */

	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

/* Call with sbt.mtx held. */
static void
bud_grow(void)
{
	struct bud_sb	**tab, *sb, *next;
	size_t		  i, n, b;

	n = sbt.nbuckets == 0 ? BUD_NBUCKETS0 : sbt.nbuckets * 2;
	tab = xcalloc(n, sizeof(*tab));
	for (i = 0; i < sbt.nbuckets; i++)
		for (sb = sbt.tab[i]; sb != NULL; sb = next) {
			next = sb->sb_next;
			b = bud_hash(sb->sb_id) & (n - 1);
			sb->sb_next = tab[b];
			tab[b] = sb;
		}
	free(sbt.tab);
	sbt.tab = tab;
	sbt.nbuckets = n;
}

/* The sandbox <id>, created (empty, lifetime) if <create>; else NULL. */
struct bud_sb *
bud_find(const char *id, int create)
{
	struct bud_sb	*sb = NULL;
	size_t		 b;

	pthread_mutex_lock(&sbt.mtx);
	if (sbt.nbuckets != 0) {
		b = bud_hash(id) & (sbt.nbuckets - 1);
		for (sb = sbt.tab[b]; sb != NULL; sb = sb->sb_next)
			if (strcmp(sb->sb_id, id) == 0)
				break;
	}
	if (sb == NULL && create) {
		if (sbt.count >= sbt.nbuckets)
			bud_grow();
		sb = xcalloc(1, sizeof(*sb));
		sb->sb_id = xstrdup(id);
		sb->sb_esc = bud_escape(id);
		if (pthread_mutex_init(&sb->sb_lock, NULL) != 0)
			fatalx("pthread_mutex_init");
		b = bud_hash(id) & (sbt.nbuckets - 1);
		sb->sb_next = sbt.tab[b];
		sbt.tab[b] = sb;
		sbt.count++;
	}
	pthread_mutex_unlock(&sbt.mtx);
	return sb;
}

void
bud_table_free(void)
{
	struct bud_sb	*sb, *next;
	size_t		 i;

	pthread_mutex_lock(&sbt.mtx);
	for (i = 0; i < sbt.nbuckets; i++)
		for (sb = sbt.tab[i]; sb != NULL; sb = next) {
			next = sb->sb_next;
			pthread_mutex_destroy(&sb->sb_lock);
			bud_use_clear(sb);
			free(sb->sb_id);
			free(sb->sb_esc);
			free(sb);
		}
	free(sbt.tab);
	sbt.tab = NULL;
	sbt.nbuckets = sbt.count = 0;
	pthread_mutex_unlock(&sbt.mtx);
}


void
bud_tab_lock(void)
{
	pthread_mutex_lock(&sbt.mtx);
}

void
bud_tab_unlock(void)
{
	pthread_mutex_unlock(&sbt.mtx);
}

void
bud_tab_each(void (*fn)(struct bud_sb *, void *), void *arg)
{
	struct bud_sb	*sb, *next;
	size_t		 i;

	for (i = 0; i < sbt.nbuckets; i++)
		for (sb = sbt.tab[i]; sb != NULL; sb = next) {
			next = sb->sb_next;
			fn(sb, arg);
		}
}

/* ---- windows -------------------------------------------------------- */

/*
 * Move <sb> to the window starting at <ws> (ms; 0 = lifetime). A later
 * window resets the counters; reservations carry over, as they belong to
 * requests still in flight. Switching to no window keeps the counters (no
 * fresh budget from a config change); an earlier start (the wall clock
 * went back) is ignored. replay_line() follows the same rule, so a
 * replayed ledger lands where the live state was. Pending deltas are
 * queued first under the window they were counted in.
 */
void
bud_roll(struct bud_sb *sb, uint64_t ws)
{
	if (ws == sb->sb_ws_ms || (ws < sb->sb_ws_ms && ws != 0))
		return;
	if (sb->sb_d_in != 0 || sb->sb_d_out != 0 || sb->sb_d_req != 0) {
		(void)bud_led_queue("B %s %" PRIu64 " %" PRIu64 " %" PRIu64
		    " %" PRIu64 "\n", sb->sb_esc, sb->sb_ws_ms, sb->sb_d_in,
		    sb->sb_d_out, sb->sb_d_req);
		sb->sb_d_in = sb->sb_d_out = sb->sb_d_req = 0;
	}
	if (ws > sb->sb_ws_ms) {
		sb->sb_c.bc_requests = 0;
		sb->sb_c.bc_bytes_in = 0;
		sb->sb_c.bc_bytes_out = 0;
		sb->sb_c.bc_spend = 0;
	}
	sb->sb_ws_ms = ws;
}

/* Fixed windows aligned to the unix epoch, i.e. to UTC. */
static uint64_t
bud_window_start(uint64_t now_ms, uint64_t win_ms)
{
	return win_ms == 0 ? 0 : now_ms / win_ms * win_ms;
}

/* Roll to the current window of the last caps seen, if any were. */
void
bud_roll_known(struct bud_sb *sb)
{
	if (sb->sb_win_known)
		bud_roll(sb, bud_window_start(bud_wall_ms(), sb->sb_win_ms));
}

/* Roll under <caps> (NULL: none, lifetime) and remember its window. */
void
bud_roll_caps(struct bud_sb *sb, const struct cfg_caps *caps)
{
	uint64_t	win = caps != NULL ? caps->cp_window_ms : 0;

	sb->sb_win_ms = win;
	sb->sb_win_known = 1;
	bud_roll(sb, bud_window_start(bud_wall_ms(), win));
}
