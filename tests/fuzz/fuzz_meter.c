/*
 * libFuzzer: the SSE/JSON usage meter. Byte 0 picks the dialect (bits 0-1),
 * SSE on or off (bit 2), a small JSON bound (bit 3) and, with the rest of
 * the byte, where the body is split into two feeds. The same bytes also
 * go through the metered-request reader (req_scan): a planned
 * include_usage rewrite must lie inside the body.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "budget/bud.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meter		*m;
	struct usage		 u;
	enum meter_dialect	 d;
	const char		*body;
	size_t			 n, split;

	if (size < 1)
		return 0;
	d = (enum meter_dialect)(data[0] & 3);
	if (d > METER_ANTHROPIC)
		d = METER_OPENAI;
	body = (const char *)data + 1;
	n = size - 1;
	split = n * (data[0] >> 4) / 15;
	m = meter_new(d, (data[0] & 4) != 0, (data[0] & 8) ? 64 : 1 << 20);
	if (m == NULL)
		abort();
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
