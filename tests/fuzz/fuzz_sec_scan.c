/*
 * libFuzzer: the reflection guard's streaming replacer. The input brings
 * its own patterns: byte 0 holds the pattern count (low 2 bits, plus one)
 * and the split point (high 6 bits); then per pattern a length byte
 * (1..32) and the pattern. The rest is the stream. Fed in two pieces, the
 * output and the count must equal those of sec_scan_string() over the
 * whole input (the property the unit suite checks against a naive
 * reference), whatever the split (sec_scan_finish() counts what it
 * releases: tests/fuzz/crashes/sec_scan-count-misses-finish was the case
 * where it did not).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "secrets/sec.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct sec_scan *
mk_scan(const uint8_t *data, size_t size, size_t *off)
{
	struct sec_scan	*sc = sec_scan_new();
	size_t		 i, npat, len;
	char		 repl[16];
	int		 rn;

	npat = (data[0] & 3) + 1;
	*off = 1;
	for (i = 0; i < npat && *off < size; i++) {
		len = data[*off] % 32 + 1;
		(*off)++;
		if (len > size - *off)
			len = size - *off;
		if (len == 0)
			break;
		rn = snprintf(repl, sizeof(repl), "<%zu>", i);
		sec_scan_add(sc, (const char *)data + *off, len, repl,
		    (size_t)rn);
		*off += len;
	}
	return sc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sec_scan	*sc, *whole;
	struct evbuffer	*eb;
	const char	*in;
	char		*want;
	size_t		 off, n, split, nrepl, wlen, wrepl;

	if (size < 2)
		return 0;
	sc = mk_scan(data, size, &off);
	whole = mk_scan(data, size, &off);
	in = (const char *)data + off;
	n = size - off;
	split = n * (data[0] >> 2) / 63;

	eb = evbuffer_new();
	nrepl = sec_scan_feed(sc, in, split, eb);
	nrepl += sec_scan_feed(sc, in + split, n - split, eb);
	nrepl += sec_scan_finish(sc, eb);

	want = sec_scan_string(whole, in, n, &wlen, &wrepl);
	if (sec_scan_npatterns(sc) > 0 && (want == NULL || nrepl != wrepl ||
	    wlen != evbuffer_get_length(eb) ||
	    (wlen > 0 && memcmp(evbuffer_pullup(eb, -1), want, wlen) != 0)))
		abort();

	free(want);
	evbuffer_free(eb);
	sec_scan_free(sc);
	sec_scan_free(whole);
	return 0;
}
