/*
 * libFuzzer: placeholders in request bodies (sec_body.c). Byte 0: the
 * kind (low 2 bits, JSON / form / raw) and the split point (high 6 bits);
 * byte 1: the placeholder's length (8..39), then the placeholder, then
 * byte: the value's length (0..63) and the value; the rest is the body.
 * Fed in two pieces and then a byte at a time, the output must be the
 * same as fed whole.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "secrets/sec.h"
#include "secrets/sec_inject.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct sec_body *
mk(const uint8_t *data, size_t size, size_t *off)
{
	struct sec_body	*sb = sec_body_new(data[0] & 3 ? (data[0] & 3) - 1 :
			    SEC_BODY_RAW);
	char		 ph[40];
	size_t		 pl, vl;

	pl = data[1] % 32 + 8;
	if (size < 2 + pl + 1)
		return sb;
	memcpy(ph, data + 2, pl);
	ph[pl] = '\0';
	if (strlen(ph) < 8)	/* a NUL inside: not a placeholder */
		return sb;
	*off = 2 + pl;
	vl = data[*off] % 64;
	(*off)++;
	if (vl > size - *off)
		vl = size - *off;
	sec_body_add(sb, "f", ph, (const char *)data + *off, vl);
	*off += vl;
	return sb;
}

static struct evbuffer *
run(const uint8_t *data, size_t size, int how)
{
	struct sec_body	*sb;
	struct evbuffer	*out = evbuffer_new();
	const char	*in;
	size_t		 off = size, n, split, i;

	sb = mk(data, size, &off);
	in = (const char *)data + off;
	n = size - off;
	split = n * (data[0] >> 2) / 63;
	if (how == 0)
		sec_body_feed(sb, in, n, 0, out);
	else if (how == 1) {
		sec_body_feed(sb, in, split, 0, out);
		sec_body_feed(sb, in + split, n - split, 0, out);
	} else
		for (i = 0; i < n; i++)
			sec_body_feed(sb, in + i, 1, 0, out);
	sec_body_feed(sb, "", 0, 1, out);
	sec_body_free(sb);
	return out;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct evbuffer	*a, *b, *c;
	size_t		 n;

	if (size < 3)
		return 0;
	a = run(data, size, 0);
	b = run(data, size, 1);
	c = run(data, size, 2);
	n = evbuffer_get_length(a);
	if (n != evbuffer_get_length(b) || n != evbuffer_get_length(c) ||
	    (n > 0 && (memcmp(evbuffer_pullup(a, -1), evbuffer_pullup(b, -1),
	    n) != 0 || memcmp(evbuffer_pullup(a, -1),
	    evbuffer_pullup(c, -1), n) != 0)))
		abort();
	evbuffer_free(a);
	evbuffer_free(b);
	evbuffer_free(c);
	return 0;
}
