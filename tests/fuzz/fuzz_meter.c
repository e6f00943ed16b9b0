/*
 * libFuzzer: the SSE/JSON usage meter. Byte 0 picks the dialect (bits 0-1),
 * SSE on or off (bit 2), a small JSON bound (bit 3) and, with the rest of
 * the byte, where the body is split into two feeds.
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
	return 0;
}
