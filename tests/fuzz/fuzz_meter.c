/*
 * libFuzzer: the SSE/JSON usage meter and its decoder. Byte 0 picks the
 * dialect (bits 0-1: none, openai, anthropic, gemini), SSE on or off (bit
 * 2), a small JSON bound (bit 3) and, with the rest of the byte, where the
 * body is split into two feeds; byte 1 (bits 0-1) the Content-Encoding
 * the body is read in (identity, gzip, deflate, br). The decoder also runs
 * alone: its pieces never pass its buffer, its output never its ratio
 * bound. The same bytes also
 * go through the metered-request reader (req_scan): a planned
 * include_usage rewrite must lie inside the body; and the stream filters
 * (sse_filt, arr_filt, a small hold bound): every byte handed on once,
 * in order.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "budget/bud.h"
#include "budget/decode.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const char *const coding_names[] = { "identity", "gzip", "deflate",
	"br" };

static void
count_sink(void *arg, const char *p, size_t len)
{
	(void)p;
	if (len == 0 || len > DEC_BUF)
		abort();
	*(uint64_t *)arg += len;
}

struct pass {
	const char	*body;
	size_t		 at;
};

/* A filter's output must be the input, byte for byte. */
static int
pass_emit(void *arg, const char *p, size_t n, int whole)
{
	struct pass	*ps = arg;

	(void)whole;
	if (memcmp(ps->body + ps->at, p, n) != 0)
		abort();
	ps->at += n;
	return 1;
}

static void
fuzz_filters(const char *body, size_t n, size_t split)
{
	struct sse_filt	*sf = sse_filt_new(64);
	struct arr_filt	*af = arr_filt_new(64);
	struct pass	 ps = { body, 0 };
	char		 tail[1024];

	(void)sse_filt_feed(sf, body, split, pass_emit, &ps);
	(void)sse_filt_feed(sf, body + split, n - split, pass_emit, &ps);
	sse_filt_flush(sf, pass_emit, &ps);
	if (ps.at != n)
		abort();
	ps.at = 0;
	arr_filt_feed(af, body, split, pass_emit, &ps);
	arr_filt_feed(af, body + split, n - split, pass_emit, &ps);
	if (arr_filt_at_boundary(af)) {
		arr_cut_tail(af, "r", "id", tail, sizeof(tail));
		if (tail[0] == '\0')
			abort();
	}
	arr_filt_flush(af, pass_emit, &ps);
	if (ps.at != n)
		abort();
	sse_filt_free(sf);
	arr_filt_free(af);
}

/* The decoder alone, fed in two pieces. */
static void
fuzz_decoder(enum dec_coding coding, const char *body, size_t n,
    size_t split)
{
	struct decoder	*dec;
	uint64_t	 out = 0;

	if ((dec = dec_new(coding, 1 << 20)) == NULL)
		return;
	(void)dec_feed(dec, body, split, count_sink, &out);
	(void)dec_feed(dec, body + split, n - split, count_sink, &out);
	if (dec_finish(dec) == DEC_OK && out != dec_out_total(dec))
		abort();
	if (out > (uint64_t)n * DEC_RATIO_MAX + DEC_SLACK || out > 1 << 20)
		abort();
	dec_free(dec);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meter		*m;
	struct usage		 u;
	enum meter_dialect	 d;
	const char		*body, *cname;
	size_t			 n, split;

	if (size < 2)
		return 0;
	d = (enum meter_dialect)(data[0] & 3);
	cname = coding_names[data[1] & 3];
	body = (const char *)data + 2;
	n = size - 2;
	split = n * (data[0] >> 4) / 15;
	m = meter_new(d, (data[0] & 4) != 0, (data[0] & 8) ? 64 : 1 << 20);
	if (m == NULL)
		abort();
	if (meter_encoding(m, cname, strlen(cname)) != 0)
		abort();
	fuzz_decoder(dec_coding_parse(cname, strlen(cname)), body, n, split);
	fuzz_filters(body, n, split);
	meter_feed(m, body, split);
	meter_feed(m, body + split, n - split);
	memset(&u, 0, sizeof(u));
	meter_finish(m, &u);
	if (memchr(u.u_model, '\0', sizeof(u.u_model)) == NULL)
		abort();
	meter_free(m);

	{
		struct req_facts	rf;
		char			*copy = malloc(n ? n : 1);

		/* an exact-size copy: ASan sees any read past the body */
		if (copy == NULL)
			abort();
		memcpy(copy, body, n);
		if (req_scan(copy, n, (data[0] & 1) != 0, &rf) == 0) {
			if (rf.rf_rewrite && (rf.rf_cut_from > rf.rf_cut_to ||
			    rf.rf_cut_to >= n || rf.rf_cut_from == 0 ||
			    rf.rf_insert == NULL))
				abort();
			if (memchr(rf.rf_model, '\0', sizeof(rf.rf_model)) ==
			    NULL || rf.rf_choices == 0)
				abort();
		} else if (rf.rf_why[0] == '\0')
			abort();
		free(copy);
	}
	return 0;
}
