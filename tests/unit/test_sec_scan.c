/*
 * sec_scan: the streaming replacer behind the reflection guard. Whatever
 * the chunking, the output must equal that of a naive leftmost-longest
 * replacer over the whole input, and only possible match prefixes may be
 * held back.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "secrets/sec.h"
#include "unit.h"

#define MAX_PATS	8

struct scan_case {
	const char	*name;
	const char	*pats[MAX_PATS];	/* NULL-terminated */
	const char	*in;
	const char	*want;			/* pattern i -> "<i>" */
	size_t		 nrepl;
};

static const struct scan_case scan_cases[] = {
	{ "none", { "secret", NULL }, "nothing to see here",
	    "nothing to see here", 0 },
	{ "empty input", { "secret", NULL }, "", "", 0 },
	{ "one", { "secret", NULL }, "my secret is out", "my <0> is out", 1 },
	{ "at both ends", { "secret", NULL }, "secret secret", "<0> <0>", 2 },
	{ "back to back", { "ab", NULL }, "ababab", "<0><0><0>", 3 },
	{ "prefix only at end", { "secret", NULL }, "a secre", "a secre", 0 },
	{ "restart inside", { "aab", NULL }, "aaab aaaab", "a<0> aa<0>", 2 },
	{ "self overlap", { "abab", NULL }, "abababab", "<0><0>", 2 },
	{ "overlap leftmost", { "abc", "bcd", NULL }, "abcd", "<0>d", 1 },
	{ "overlap leftmost 2", { "bcd", "abc", NULL }, "xabcdx", "x<1>dx",
	    1 },
	{ "prefix longest", { "ab", "abcd", NULL }, "abcx abcd ab",
	    "<0>cx <1> <0>", 3 },
	{ "longest pending fails", { "abcde", "cd", NULL }, "abcdf",
	    "ab<1>f", 1 },
	{ "inner shorter", { "abcd", "bc", NULL }, "abcx abcd",
	    "a<1>x <0>", 2 },
	{ "suffix pattern", { "bcd", "d", NULL }, "abcd d", "a<0> <1>", 2 },
	{ "nested three", { "a", "aa", "aaa", NULL }, "aaaaaaa",
	    "<2><2><0>", 3 },
	{ "duplicate pattern", { "xy", "xy", NULL }, "axyb", "a<0>b", 1 },
	{ "single byte", { "x", NULL }, "xaxbx", "<0>a<0>b<0>", 3 },
	{ "long pending short done", { "abcdefgh", "cde", NULL },
	    "abcdefgX abcdefgh", "ab<1>fgX <0>", 2 },
	{ "base64ish", { "QWxhZGRpbjpvcGVuIHNlc2FtZQ==", "open sesame",
	    NULL }, "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ== and open sesame!",
	    "Basic <0> and <1>!", 2 },
	{ "many", { "one", "two", "three", "thr", "ee", NULL },
	    "one two three thr ee eee", "<0> <1> <2> <3> <4> <4>e", 6 },
};

static struct sec_scan *
mk_scan(const char *const *pats)
{
	struct sec_scan	*sc;
	char		 repl[16];
	int		 i, n;

	sc = sec_scan_new();
	for (i = 0; pats[i] != NULL; i++) {
		n = snprintf(repl, sizeof(repl), "<%d>", i);
		sec_scan_add(sc, pats[i], strlen(pats[i]), repl, (size_t)n);
	}
	ck_assert_uint_eq(sec_scan_npatterns(sc), (size_t)i);
	return sc;
}

/* Drain <eb> into a NUL-terminated heap string. */
static char *
take(struct evbuffer *eb, size_t *lenp)
{
	size_t	 n = evbuffer_get_length(eb);
	char	*s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	evbuffer_remove(eb, s, n);
	s[n] = '\0';
	if (lenp != NULL)
		*lenp = n;
	return s;
}

/*
 * Feed <in> cut at the <ncuts> positions in <cuts> (ascending); returns
 * the output and, in *nrepl, what the feeds reported.
 */
static char *
run_cuts(struct sec_scan *sc, const char *in, size_t len, const size_t *cuts,
    int ncuts, size_t *outlen, size_t *nrepl)
{
	struct evbuffer	*eb = evbuffer_new();
	size_t		 prev = 0, n = 0;
	int		 i;
	char		*s;

	for (i = 0; i <= ncuts; i++) {
		size_t	end = i < ncuts ? cuts[i] : len;

		n += sec_scan_feed(sc, in + prev, end - prev, eb);
		prev = end;
	}
	sec_scan_finish(sc, eb);
	s = take(eb, outlen);
	evbuffer_free(eb);
	if (nrepl != NULL)
		*nrepl = n;
	return s;
}

START_TEST(test_table_whole)
{
	const struct scan_case	*c = &scan_cases[_i];
	struct sec_scan		*sc = mk_scan(c->pats);
	char			*got;
	size_t			 n, sl, sn;

	got = run_cuts(sc, c->in, strlen(c->in), NULL, 0, NULL, &n);
	ck_assert_msg(strcmp(got, c->want) == 0, "%s: got \"%s\" want \"%s\"",
	    c->name, got, c->want);
	free(got);
	/* one-shot form, independent of the stream state */
	got = sec_scan_string(sc, c->in, strlen(c->in), &sl, &sn);
	ck_assert_str_eq(got, c->want);
	ck_assert_uint_eq(sl, strlen(c->want));
	ck_assert_uint_eq(sn, c->nrepl);
	free(got);
	sec_scan_free(sc);
}
END_TEST

/* Two and three pieces at every position, and byte by byte. */
START_TEST(test_table_splits)
{
	const struct scan_case	*c = &scan_cases[_i];
	struct sec_scan		*sc = mk_scan(c->pats);
	size_t			 len = strlen(c->in), cuts[4096], i, j;
	char			*got;

	for (i = 0; i <= len; i++) {
		cuts[0] = i;
		got = run_cuts(sc, c->in, len, cuts, 1, NULL, NULL);
		ck_assert_msg(strcmp(got, c->want) == 0, "%s cut %zu: \"%s\"",
		    c->name, i, got);
		free(got);
		for (j = i; j <= len; j++) {
			cuts[0] = i;
			cuts[1] = j;
			got = run_cuts(sc, c->in, len, cuts, 2, NULL, NULL);
			ck_assert_msg(strcmp(got, c->want) == 0,
			    "%s cuts %zu,%zu: \"%s\"", c->name, i, j, got);
			free(got);
		}
	}
	ck_assert_uint_lt(len, 4096);
	for (i = 0; i < len; i++)
		cuts[i] = i + 1;
	got = run_cuts(sc, c->in, len, cuts, (int)len, NULL, NULL);
	ck_assert_msg(strcmp(got, c->want) == 0, "%s bytewise: \"%s\"",
	    c->name, got);
	free(got);
	sec_scan_free(sc);
}
END_TEST

/* Longest suffix of in[0..len) that is a proper prefix of a pattern. */
static size_t
naive_hold(const char *const *pats, const char *in, size_t len)
{
	size_t	best = 0, k, pl;
	int	i;

	for (i = 0; pats[i] != NULL; i++) {
		pl = strlen(pats[i]);
		for (k = pl - 1; k > best; k--)
			if (k <= len && memcmp(in + len - k, pats[i], k) == 0) {
				best = k;
				break;
			}
	}
	return best;
}

/*
 * Without matches, what is released after each feed is everything but
 * the longest tail that could begin a match: never more is held.
 */
START_TEST(test_hold_exact)
{
	static const char *const	pats[] = { "password123", "word!",
	    "xyzzy", "passe", NULL };
	/* prefixes of the patterns everywhere, no whole one */
	static const char		in[] = "a passw p passwor pas wor xyz"
	    "zxyzz xyzz passwo ab pass";
	struct sec_scan			*sc = mk_scan(pats);
	struct evbuffer			*eb = evbuffer_new();
	size_t				 i, len = sizeof(in) - 1, hold;
	char				*got;

	for (i = 0; i < len; i++) {
		ck_assert_uint_eq(sec_scan_feed(sc, in + i, 1, eb), 0);
		hold = naive_hold(pats, in, i + 1);
		ck_assert_msg(evbuffer_get_length(eb) == i + 1 - hold,
		    "after %zu bytes: released %zu, want %zu", i + 1,
		    evbuffer_get_length(eb), i + 1 - hold);
		ck_assert_uint_le(hold, 10);
	}
	/* finish flushes the held "pass" as it is */
	ck_assert_uint_eq(evbuffer_get_length(eb), len - 4);
	sec_scan_finish(sc, eb);
	got = take(eb, NULL);
	ck_assert_str_eq(got, in);
	free(got);
	sec_scan_free(sc);
	evbuffer_free(eb);

	/* a stream whose end is no prefix: nothing held */
	sc = mk_scan(pats);
	eb = evbuffer_new();
	sec_scan_feed(sc, "hello world", 11, eb);
	ck_assert_uint_eq(evbuffer_get_length(eb), 11);
	sec_scan_feed(sc, " xyz", 4, eb);
	ck_assert_uint_eq(evbuffer_get_length(eb), 12);
	ck_assert_uint_eq(sec_scan_feed(sc, "zy", 2, eb), 1);
	ck_assert_uint_eq(evbuffer_get_length(eb), 15);	/* " <2>" */
	sec_scan_finish(sc, eb);
	ck_assert_uint_eq(evbuffer_get_length(eb), 15);
	sec_scan_free(sc);
	evbuffer_free(eb);
}
END_TEST

/* The longest held tail is the longest pattern minus one. */
START_TEST(test_hold_bound)
{
	static const char *const	pats[] = { "0123456789", "345", NULL };
	struct sec_scan			*sc = mk_scan(pats);
	struct evbuffer			*eb = evbuffer_new();
	char				*got;

	sec_scan_feed(sc, "xx012345678", 11, eb);
	/* "012345678" could still be "0123456789" */
	ck_assert_uint_eq(evbuffer_get_length(eb), 2);
	sec_scan_feed(sc, "X", 1, eb);
	sec_scan_finish(sc, eb);
	got = take(eb, NULL);
	ck_assert_str_eq(got, "xx012<1>678X");
	free(got);
	sec_scan_feed(sc, "0123456789", 10, eb);
	ck_assert_uint_eq(evbuffer_get_length(eb), 3);
	sec_scan_finish(sc, eb);
	ck_assert_uint_eq(evbuffer_get_length(eb), 3);
	sec_scan_free(sc);
	evbuffer_free(eb);
}
END_TEST

/*
 * After a replacement, a partial match that began inside it holds
 * nothing back: "bcde" of "bcdefg" is alive but overlaps "<0>".
 */
START_TEST(test_hold_after_replace)
{
	static const char *const	pats[] = { "abc", "bcdefg", "dex",
	    NULL };
	struct sec_scan			*sc = mk_scan(pats);
	struct evbuffer			*eb = evbuffer_new();
	char				*got;

	ck_assert_uint_eq(sec_scan_feed(sc, "xabcde", 6, eb), 1);
	/* "de" may still be "dex": held */
	got = take(eb, NULL);
	ck_assert_str_eq(got, "x<0>");
	free(got);
	sec_scan_feed(sc, "fg", 2, eb);
	got = take(eb, NULL);
	ck_assert_str_eq(got, "defg");
	free(got);
	sec_scan_feed(sc, "abcdefg", 7, eb);
	got = take(eb, NULL);
	ck_assert_str_eq(got, "<0>defg");
	free(got);
	sec_scan_finish(sc, eb);
	ck_assert_uint_eq(evbuffer_get_length(eb), 0);
	sec_scan_free(sc);
	evbuffer_free(eb);
}
END_TEST

/* No patterns: pass-through; binary bytes and NULs are ordinary bytes. */
START_TEST(test_binary)
{
	static const char	pat[] = { '\0', (char)0xff, 'k', '\0' };
	static const char	in[] = { 'a', '\0', (char)0xff, 'k', '\0', '\0',
	    (char)0xff, '\0', (char)0xff, 'k', '\0' };
	struct sec_scan		*sc = sec_scan_new();
	struct evbuffer		*eb = evbuffer_new();
	char			*got, *s;
	size_t			 n, nr;

	ck_assert_uint_eq(sec_scan_npatterns(sc), 0);
	ck_assert_uint_eq(sec_scan_feed(sc, in, sizeof(in), eb), 0);
	sec_scan_finish(sc, eb);
	got = take(eb, &n);
	ck_assert_uint_eq(n, sizeof(in));
	ck_assert(memcmp(got, in, n) == 0);
	free(got);
	s = sec_scan_string(sc, in, sizeof(in), &n, &nr);
	ck_assert_uint_eq(n, sizeof(in));
	ck_assert_uint_eq(nr, 0);
	free(s);
	/* empty patterns are ignored */
	sec_scan_add(sc, "", 0, "x", 1);
	ck_assert_uint_eq(sec_scan_npatterns(sc), 0);

	sec_scan_add(sc, pat, sizeof(pat), "", 0);
	s = sec_scan_string(sc, in, sizeof(in), &n, &nr);
	ck_assert_uint_eq(nr, 2);
	ck_assert_uint_eq(n, 3);
	ck_assert(memcmp(s, "a\0\xff", 3) == 0);
	free(s);
	s = sec_scan_string(sc, "", 0, NULL, NULL);
	ck_assert_str_eq(s, "");
	free(s);
	sec_scan_free(sc);
	evbuffer_free(eb);
	sec_scan_free(NULL);
}
END_TEST

/* A pattern added mid-stream also applies to the bytes being held. */
START_TEST(test_add_midstream)
{
	static const char *const	pats[] = { "abcdef", NULL };
	struct sec_scan			*sc = mk_scan(pats);
	struct evbuffer			*eb = evbuffer_new();
	char				*got, *s;

	sec_scan_feed(sc, "xx abc", 6, eb);
	sec_scan_add(sc, "bcX", 3, "<1>", 3);
	/* a one-shot string in between leaves the stream alone */
	s = sec_scan_string(sc, "abcdef", 6, NULL, NULL);
	ck_assert_str_eq(s, "<0>");
	free(s);
	sec_scan_feed(sc, "X abcdef", 8, eb);
	sec_scan_finish(sc, eb);
	got = take(eb, NULL);
	ck_assert_str_eq(got, "xx a<1> <0>");
	free(got);
	sec_scan_free(sc);
	evbuffer_free(eb);
}
END_TEST

/* ---- fuzz against a naive replacer ----------------------------------- */

struct pat {
	char	s[64];
	size_t	len;
	char	r[16];
	size_t	rlen;
};

/* At each position the longest pattern there, else the byte. */
static char *
naive(const struct pat *p, int np, const char *in, size_t len,
    size_t *outlen, size_t *nrepl)
{
	char	*out = malloc(len * 16 + 1);
	size_t	 i = 0, o = 0, best;
	int	 k, bk;

	ck_assert_ptr_nonnull(out);
	*nrepl = 0;
	while (i < len) {
		best = 0;
		bk = -1;
		for (k = 0; k < np; k++)
			if (p[k].len > best && p[k].len <= len - i &&
			    memcmp(in + i, p[k].s, p[k].len) == 0) {
				best = p[k].len;
				bk = k;
			}
		if (bk < 0) {
			out[o++] = in[i++];
			continue;
		}
		memcpy(out + o, p[bk].r, p[bk].rlen);
		o += p[bk].rlen;
		i += best;
		(*nrepl)++;
	}
	out[o] = '\0';
	*outlen = o;
	return out;
}

static uint64_t
rnd(uint64_t *st)
{
	/* xorshift64*: fixed seed, the same cases every run */
	*st ^= *st >> 12;
	*st ^= *st << 25;
	*st ^= *st >> 27;
	return *st * 0x2545F4914F6CDD1DULL;
}

static void
fuzz_n(uint64_t seed, int rounds, const char *alpha, size_t minpat,
    size_t maxpat, size_t maxin, int maxnp)
{
	struct pat	 p[64];
	struct sec_scan	*sc;
	char		 in[2048], *want, *got;
	size_t		 asz = strlen(alpha), len, wl, gl, wn, gn, cuts[64];
	size_t		 i;
	int		 np, k, j, ncuts, dup;
	uint64_t	 st = seed;

	for (k = 0; k < rounds; k++) {
		np = 1 + (int)(rnd(&st) % (uint64_t)maxnp);
		for (j = 0; j < np; j++) {
			/* distinct pattern strings: duplicates are a case */
			do {
				p[j].len = minpat + rnd(&st) %
				    (maxpat - minpat + 1);
				for (i = 0; i < p[j].len; i++)
					p[j].s[i] = alpha[rnd(&st) % asz];
				dup = 0;
				for (i = 0; i < (size_t)j; i++)
					if (p[i].len == p[j].len &&
					    memcmp(p[i].s, p[j].s,
					    p[j].len) == 0)
						dup = 1;
			} while (dup);
			p[j].rlen = (size_t)snprintf(p[j].r, sizeof(p[j].r),
			    "<%d>", j);
		}
		len = rnd(&st) % maxin;
		for (i = 0; i < len; i++) {
			/* plant pattern copies now and then */
			if (rnd(&st) % 8 == 0) {
				j = (int)(rnd(&st) % (uint64_t)np);
				if (i + p[j].len <= len) {
					memcpy(in + i, p[j].s, p[j].len);
					i += p[j].len - 1;
					continue;
				}
			}
			in[i] = alpha[rnd(&st) % asz];
		}
		want = naive(p, np, in, len, &wl, &wn);

		sc = sec_scan_new();
		for (j = 0; j < np; j++)
			sec_scan_add(sc, p[j].s, p[j].len, p[j].r, p[j].rlen);
		ncuts = len ? (int)(rnd(&st) % 8) : 0;
		for (j = 0; j < ncuts; j++)
			cuts[j] = rnd(&st) % (len + 1);
		/* ascending cut positions */
		for (j = 1; j < ncuts; j++) {
			size_t	v = cuts[j];
			int	m = j - 1;

			while (m >= 0 && cuts[m] > v) {
				cuts[m + 1] = cuts[m];
				m--;
			}
			cuts[m + 1] = v;
		}
		got = run_cuts(sc, in, len, cuts, ncuts, &gl, &gn);
		ck_assert_msg(gl == wl && memcmp(got, want, wl) == 0,
		    "seed %llu round %d: \"%.*s\" -> \"%s\", want \"%s\"",
		    (unsigned long long)seed, k, (int)len, in, got, want);
		/* finish may replace too (held tail), and does not report it */
		ck_assert_uint_le(gn, wn);
		free(got);
		got = sec_scan_string(sc, in, len, &gl, &gn);
		ck_assert(gl == wl && memcmp(got, want, wl) == 0);
		ck_assert_uint_eq(gn, wn);
		free(got);
		free(want);
		sec_scan_free(sc);
	}
}

static void
fuzz(uint64_t seed, int rounds, const char *alpha, size_t maxpat,
    size_t maxin)
{
	fuzz_n(seed, rounds, alpha, 1, maxpat, maxin, 4);
}

/*
 * How many bytes of in[0..n) a streaming replacer can release: run the
 * greedy loop and stop at the first position where the rest could still
 * grow into a (longer) match.
 */
static size_t
naive_released(const struct pat *p, int np, const char *in, size_t n)
{
	size_t	i = 0, best;
	int	k;

	while (i < n) {
		for (k = 0; k < np; k++)
			if (p[k].len > n - i &&
			    memcmp(in + i, p[k].s, n - i) == 0)
				return i;
		best = 0;
		for (k = 0; k < np; k++)
			if (p[k].len > best && p[k].len <= n - i &&
			    memcmp(in + i, p[k].s, p[k].len) == 0)
				best = p[k].len;
		i += best ? best : 1;
	}
	return n;
}

/*
 * Replacements as long as their patterns (upper case) make the output
 * length count released input: after every feed exactly what can be
 * decided has been released, not a byte more or less.
 */
static void
fuzz_hold_n(uint64_t seed, int rounds, const char *alpha, size_t minpat,
    size_t maxpat, size_t maxin, int maxnp)
{
	struct pat	 p[64];
	struct sec_scan	*sc;
	struct evbuffer	*eb;
	char		 in[512], up[64];
	size_t		 asz = strlen(alpha), len, off, step, i, want;
	int		 np, k, j;
	uint64_t	 st = seed;

	for (k = 0; k < rounds; k++) {
		np = 1 + (int)(rnd(&st) % (uint64_t)maxnp);
		sc = sec_scan_new();
		for (j = 0; j < np; j++) {
			p[j].len = minpat + rnd(&st) % (maxpat - minpat + 1);
			for (i = 0; i < p[j].len; i++) {
				p[j].s[i] = alpha[rnd(&st) % asz];
				up[i] = (char)(p[j].s[i] - 'a' + 'A');
			}
			sec_scan_add(sc, p[j].s, p[j].len, up, p[j].len);
		}
		len = rnd(&st) % maxin;
		for (i = 0; i < len; i++)
			in[i] = alpha[rnd(&st) % asz];
		eb = evbuffer_new();
		for (off = 0; off < len; off += step) {
			step = 1 + rnd(&st) % 5;
			if (step > len - off)
				step = len - off;
			sec_scan_feed(sc, in + off, step, eb);
			want = naive_released(p, np, in, off + step);
			ck_assert_msg(evbuffer_get_length(eb) == want,
			    "seed %llu round %d: after %zu of \"%.*s\" "
			    "released %zu, want %zu", (unsigned long long)seed,
			    k, off + step, (int)len, in,
			    evbuffer_get_length(eb), want);
		}
		sec_scan_finish(sc, eb);
		ck_assert_uint_eq(evbuffer_get_length(eb), len);
		evbuffer_free(eb);
		sec_scan_free(sc);
	}
}

static void
fuzz_hold(uint64_t seed, int rounds, const char *alpha, size_t maxpat,
    size_t maxin)
{
	fuzz_hold_n(seed, rounds, alpha, 1, maxpat, maxin, 4);
}

START_TEST(test_fuzz_hold)
{
	fuzz_hold(0x0123456789abcdefULL, 20000, "ab", 6, 60);
	fuzz_hold(0xfedcba9876543210ULL, 20000, "abc", 5, 100);
}
END_TEST

START_TEST(test_fuzz_small_alphabet)
{
	/* small alphabet: overlaps, shared prefixes, self-similar patterns */
	fuzz(0x9e3779b97f4a7c15ULL, 30000, "ab", 6, 120);
	fuzz(0x1234567887654321ULL, 30000, "abc", 8, 200);
}
END_TEST

START_TEST(test_fuzz_wide)
{
	fuzz(0xdeadbeefcafef00dULL, 5000, "abcdefghijklmnopqrstuvwxyz0123456789"
	    "+/=-_.", 60, 2000);
}
END_TEST

/*
 * Many patterns of 3 bytes or more starting with many different bytes:
 * the scanner's trigram jump and child tables (the encoded forms' runs
 * look like this) against the naive replacer.
 */
START_TEST(test_fuzz_many)
{
	fuzz_n(0x5151aa55c3c3e7e7ULL, 3000, "abcdefghijklmnopqrstuvwxyz0123",
	    3, 8, 600, 60);
	fuzz_n(0x0badc0ffee0ddf00ULL, 3000, "abcdefghijklmnopqrstuvwxyz",
	    3, 4, 400, 60);
	/* and after every feed exactly what can be decided is released */
	fuzz_hold_n(0x7777aaaa3333ccccULL, 3000, "abcdefghijklmnopqrstuvwxyz",
	    3, 6, 300, 60);
}
END_TEST

/*
 * Shared scanners (sec_scan_share): each has a stream state of its own
 * over the one automaton, threads scan at once, and a pattern added to one
 * copies first: the others do not see it.
 */
static struct sec_scan	*share_tmpl;

static void *
share_worker(void *arg)
{
	static const char	 in[] = "xx secret yy secret zz sec";
	struct sec_scan		*sc;
	struct evbuffer		*eb;
	size_t			 i, k, n;
	char			*got;
	int			*ok = arg;

	*ok = 1;
	for (i = 0; i < 300; i++) {
		sc = sec_scan_share(share_tmpl);
		eb = evbuffer_new();
		for (k = 0; k < sizeof(in) - 1; k++)
			sec_scan_feed(sc, in + k, 1, eb);
		sec_scan_finish(sc, eb);
		got = take(eb, &n);
		if (strcmp(got, "xx <0> yy <0> zz sec") != 0)
			*ok = 0;
		free(got);
		evbuffer_free(eb);
		sec_scan_free(sc);
	}
	return NULL;
}

START_TEST(test_share)
{
	struct sec_scan	*a, *b;
	pthread_t	 th[4];
	int		 ok[4], i;
	char		*s;
	size_t		 n;

	share_tmpl = sec_scan_new();
	sec_scan_add(share_tmpl, "secret", 6, "<0>", 3);
	a = sec_scan_share(share_tmpl);
	b = sec_scan_share(share_tmpl);
	sec_scan_add(a, "yy", 2, "<1>", 3);
	s = sec_scan_string(a, "a secret yy", 11, &n, NULL);
	ck_assert_str_eq(s, "a <0> <1>");
	free(s);
	s = sec_scan_string(b, "a secret yy", 11, &n, NULL);
	ck_assert_str_eq(s, "a <0> yy");
	free(s);
	s = sec_scan_string(share_tmpl, "a secret yy", 11, &n, NULL);
	ck_assert_str_eq(s, "a <0> yy");
	free(s);
	sec_scan_free(a);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, share_worker,
		    &ok[i]), 0);
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(ok[i], "thread %d scanned wrong", i);
	}
	/* the template may go first: the shares keep the automaton */
	sec_scan_free(share_tmpl);
	s = sec_scan_string(b, "secret", 6, &n, NULL);
	ck_assert_str_eq(s, "<0>");
	free(s);
	sec_scan_free(b);
}
END_TEST

/* A larger stream in odd-sized chunks, patterns of a few KiB. */
START_TEST(test_long_patterns)
{
	struct sec_scan	*sc;
	struct evbuffer	*eb = evbuffer_new();
	char		*pa, *pb, *in, *want, *got, *wp;
	size_t		 pal = 3000, pbl = 4096, len = 1 << 20, off, step;
	size_t		 i, nr = 0, wl;
	uint64_t	 st = 42;

	pa = malloc(pal);
	pb = malloc(pbl);
	in = malloc(len);
	want = malloc(len);
	ck_assert(pa && pb && in && want);
	for (i = 0; i < pal; i++)
		pa[i] = "ABCD"[rnd(&st) % 4];
	/* pb starts with most of pa: long partial matches that fail */
	memcpy(pb, pa, pal - 1);
	for (i = pal - 1; i < pbl; i++)
		pb[i] = "ABCD"[rnd(&st) % 4];
	for (i = 0; i < len; i++)
		in[i] = "ABCDE"[rnd(&st) % 5];
	for (off = 1000; off + pbl < len; off += 50000) {
		memcpy(in + off, (off / 50000) % 2 ? pa : pb,
		    (off / 50000) % 2 ? pal : pbl);
		/* and a near miss */
		memcpy(in + off + 20000, pb, pbl - 1);
	}
	sc = sec_scan_new();
	sec_scan_add(sc, pa, pal, "[A]", 3);
	sec_scan_add(sc, pb, pbl, "[B]", 3);
	/* the reference, straight from memcmp */
	for (i = 0, wp = want; i < len;) {
		if (i + pbl <= len && memcmp(in + i, pb, pbl) == 0) {
			memcpy(wp, "[B]", 3);
			wp += 3;
			i += pbl;
		} else if (i + pal <= len && memcmp(in + i, pa, pal) == 0) {
			memcpy(wp, "[A]", 3);
			wp += 3;
			i += pal;
		} else
			*wp++ = in[i++];
	}
	wl = (size_t)(wp - want);
	for (off = 0; off < len; off += step) {
		/* big feeds, and runs of small ones behind a long held tail */
		step = rnd(&st) % 4 ? 1 + rnd(&st) % 9000 : 1 + rnd(&st) % 16;
		if (step > len - off)
			step = len - off;
		nr += sec_scan_feed(sc, in + off, step, eb);
		/* never more than the longest pattern - 1 held */
		ck_assert_uint_ge(evbuffer_get_length(eb) + nr * pbl + pbl - 1,
		    off + step);
	}
	sec_scan_finish(sc, eb);
	got = take(eb, &i);
	ck_assert_uint_eq(i, wl);
	ck_assert(memcmp(got, want, wl) == 0);
	ck_assert_uint_gt(nr, 10);
	free(got);
	free(pa);
	free(pb);
	free(in);
	free(want);
	sec_scan_free(sc);
	evbuffer_free(eb);
}
END_TEST

Suite *
suite_sec_scan(void)
{
	Suite	*s;
	TCase	*tc;
	int	 n = (int)(sizeof(scan_cases) / sizeof(scan_cases[0]));

	s = suite_create("sec_scan");
	tc = tcase_create("table");
	tcase_add_loop_test(tc, test_table_whole, 0, n);
	tcase_add_loop_test(tc, test_table_splits, 0, n);
	tcase_add_test(tc, test_hold_exact);
	tcase_add_test(tc, test_hold_bound);
	tcase_add_test(tc, test_hold_after_replace);
	tcase_add_test(tc, test_binary);
	tcase_add_test(tc, test_add_midstream);
	suite_add_tcase(s, tc);
	tc = tcase_create("fuzz");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fuzz_small_alphabet);
	tcase_add_test(tc, test_fuzz_wide);
	tcase_add_test(tc, test_fuzz_many);
	tcase_add_test(tc, test_share);
	tcase_add_test(tc, test_fuzz_hold);
	tcase_add_test(tc, test_long_patterns);
	suite_add_tcase(s, tc);
	return s;
}
