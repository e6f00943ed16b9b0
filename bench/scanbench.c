/*
 * scanbench: throughput of the reflection guard (sec_scan). `scanbench
 * [MiB]` streams MiB (default 256) through a scanner holding two 40-byte
 * patterns, in 16 KiB feeds as a response body would arrive, and prints
 * MB/s for three bodies:
 *   text       random base64-alphabet text (each pattern's first byte
 *              every 32 bytes or so: a realistic worst case for the skip)
 *   matches    the same with a pattern planted every 64 KiB
 *   near-miss  pattern prefixes of 39 bytes back to back (adversarial)
 * `scanbench MiB forms` registers the patterns as the gateway does for a
 * secret (sec_scan_add_forms: every encoded form and its runs of 12
 * bytes) and also prints how long building the automaton takes.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "secrets/sec.h"

#define BENCH_ID	"scanbench"
#define PATLEN		40
#define FEED		16384
#define BLOCK		(1 << 20)	/* body repeated from one 1 MiB block */
#define MIN_RUN		12

static int	forms_mode;

static const char	b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static uint64_t
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static uint64_t
rnd(uint64_t *st)
{
	*st ^= *st >> 12;
	*st ^= *st << 25;
	*st ^= *st >> 27;
	return *st * 0x2545F4914F6CDD1DULL;
}

static void
run(const char *what, const char *block, const char pats[2][PATLEN],
    size_t mib)
{
	struct sec_scan	*sc;
	struct evbuffer	*out;
	uint64_t	 t0, ns;
	size_t		 total = mib << 20, done = 0, off, nrepl = 0, n;

	sc = sec_scan_new();
	t0 = now_ns();
	if (forms_mode) {
		char	*s;

		sec_scan_add_forms(sc, pats[0], PATLEN, MIN_RUN,
		    "[airlock:redacted:a]", 20);
		sec_scan_add_forms(sc, pats[1], PATLEN, MIN_RUN,
		    "[airlock:redacted:b]", 20);
		/* builds the automaton */
		s = sec_scan_string(sc, "", 0, NULL, NULL);
		free(s);
		printf("%-10s build %.3f ms, %zu patterns\n", what,
		    (double)(now_ns() - t0) / 1e6, sec_scan_npatterns(sc));
	} else {
		sec_scan_add(sc, pats[0], PATLEN, "[airlock:redacted:a]", 20);
		sec_scan_add(sc, pats[1], PATLEN, "[airlock:redacted:b]", 20);
	}
	out = evbuffer_new();
	t0 = now_ns();
	while (done < total) {
		for (off = 0; off < BLOCK && done < total; off += n) {
			n = FEED;
			nrepl += sec_scan_feed(sc, block + off, n, out);
			done += n;
			evbuffer_drain(out, evbuffer_get_length(out));
		}
	}
	sec_scan_finish(sc, out);
	ns = now_ns() - t0;
	printf("%-10s %8.1f MB/s  (%zu MiB, %zu replacements)\n", what,
	    (double)total / 1e6 / ((double)ns / 1e9), mib, nrepl);
	evbuffer_free(out);
	sec_scan_free(sc);
}

int
main(int argc, char *argv[])
{
	char		 pats[2][PATLEN], *block;
	uint64_t	 st = 0x5eed;
	size_t		 mib = 256, i, j;

	if ((argc > 1 && (mib = strtoul(argv[1], NULL, 10)) == 0) ||
	    (argc > 2 && strcmp(argv[2], "forms") != 0)) {
		fprintf(stderr, "usage: %s [MiB [forms]]\n", BENCH_ID);
		return 1;
	}
	forms_mode = argc > 2;
	if ((block = malloc(BLOCK)) == NULL)
		return 1;
	for (i = 0; i < 2; i++)
		for (j = 0; j < PATLEN; j++)
			pats[i][j] = b64[rnd(&st) % 64];

	for (i = 0; i < BLOCK; i++)
		block[i] = b64[rnd(&st) % 64];
	run("text", block, pats, mib);

	for (i = 1000; i + PATLEN < BLOCK; i += 65536)
		memcpy(block + i, pats[(i >> 16) & 1], PATLEN);
	run("matches", block, pats, mib);

	for (i = 0; i + PATLEN - 1 <= BLOCK; i += PATLEN - 1)
		memcpy(block + i, pats[0], PATLEN - 1);
	run("near-miss", block, pats, mib);
	free(block);
	return 0;
}
