/*
 * libFuzzer: WebSocket frames after a 101 (sec_ws.c). Byte 0: the
 * direction (bit 0: towards the upstream, with a substitution and a
 * tripwire; else towards the client through a reflection scanner) and
 * the split point (the other 7 bits); the rest is the frame stream. Fed
 * whole, in two pieces and a byte at a time, the verdict must be the
 * same, and so must the messages (masking keys differ: what goes out is
 * compared once unmasked, by parsing it again).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <wslay/wslay.h>

#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "secrets/sec_ws.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define PH	"airlock:fz:0123"
#define PH_OFF	"airlock:no:4567"

static struct sec_ws *
mk(int up, struct sec_scan *sc)
{
	struct sec_ws	*w = sec_ws_new(up);
	struct sec_body	*sb;
	struct sec_trip	*td, *tc;

	if (up) {
		sb = sec_body_new(SEC_BODY_RAW);
		sec_body_add(sb, "f", PH, "value\"-x", 8);
		td = sec_trip_new();
		tc = sec_trip_new();
		sec_trip_add(td, PH_OFF);
		sec_trip_add(tc, PH_OFF);
		sec_ws_set_subst(w, sb);
		sec_ws_set_trip(w, td, tc);
	} else
		sec_ws_set_reflect(w, sc);
	return w;
}

/* A reader of <out> (wslay's own parser): the data payloads and the
 * control payloads, each joined (frame boundaries and keys differ). */
struct rd {
	const uint8_t	*p;
	size_t		 n;
};

static ssize_t
rd_recv(uint8_t *buf, size_t len, int flags, void *arg)
{
	struct rd	*r = arg;
	size_t		 k = len < r->n ? len : r->n;

	(void)flags;
	memcpy(buf, r->p, k);
	r->p += k;
	r->n -= k;
	return (ssize_t)k;
}

static ssize_t
rd_send(const uint8_t *p, size_t n, int flags, void *arg)
{
	(void)p;
	(void)flags;
	(void)arg;
	return (ssize_t)n;
}

static int
rd_mask(uint8_t *p, size_t n, void *arg)
{
	(void)arg;
	memset(p, 0, n);
	return 0;
}

static void
payloads(struct evbuffer *out, int up, struct evbuffer *data,
    struct evbuffer *ctl)
{
	static const struct wslay_frame_callbacks cb = { rd_send, rd_recv,
	    rd_mask };
	wslay_frame_context_ptr	 ctx;
	struct wslay_frame_iocb	 io;
	struct rd		 r;
	ssize_t			 k;

	r.n = evbuffer_get_length(out);
	r.p = r.n > 0 ? evbuffer_pullup(out, -1) : (const uint8_t *)"";
	if (wslay_frame_context_init(&ctx, &cb, &r) != 0)
		abort();
	for (;;) {
		memset(&io, 0, sizeof(io));
		if ((k = wslay_frame_recv(ctx, &io)) == WSLAY_ERR_WANT_READ)
			break;
		/* we wrote something not RFC 6455, or masked wrongly */
		if (k < 0 || io.rsv != 0 || io.mask != up)
			abort();
		evbuffer_add(io.opcode & 8 ? ctl : data, io.data,
		    io.data_length);
	}
	if (r.n != 0)
		abort();
	wslay_frame_context_free(ctx);
}

static int
run(const uint8_t *data, size_t size, int how, struct sec_scan *sc,
    struct evbuffer *pd, struct evbuffer *pc)
{
	int		 up = data[0] & 1;
	struct sec_ws	*w = mk(up, sc);
	struct evbuffer	*out = evbuffer_new();
	const char	*in = (const char *)data + 1;
	size_t		 n = size - 1, split = n * (data[0] >> 1) / 127, i;
	int		 r = SEC_WS_OK;

	if (how == 0)
		r = sec_ws_feed(w, in, n, out);
	else if (how == 1) {
		r = sec_ws_feed(w, in, split, out);
		if (r == SEC_WS_OK)
			r = sec_ws_feed(w, in + split, n - split, out);
	} else
		for (i = 0; i < n && r == SEC_WS_OK; i++)
			r = sec_ws_feed(w, in + i, 1, out);
	payloads(out, up, pd, pc);
	evbuffer_free(out);
	sec_ws_free(w);
	return r;
}

static int
same(struct evbuffer *a, struct evbuffer *b)
{
	size_t	n = evbuffer_get_length(a);

	return n == evbuffer_get_length(b) && (n == 0 ||
	    memcmp(evbuffer_pullup(a, -1), evbuffer_pullup(b, -1), n) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sec_scan	*sc;
	struct evbuffer	*d[3], *c[3];
	int		 r[3], i;

	if (size < 2)
		return 0;
	for (i = 0; i < 3; i++) {
		/* a scanner has a stream state: one per run */
		sc = sec_scan_new();
		sec_scan_add(sc, "value\"-x", 8, "[R]", 3);
		d[i] = evbuffer_new();
		c[i] = evbuffer_new();
		r[i] = run(data, size, i, sc, d[i], c[i]);
		sec_scan_free(sc);
	}
	/* the verdict does not depend on how the bytes came, nor, when
	   they were all good, what went out (before an error, pieces
	   went as they were read) */
	if (r[0] != r[1] || r[0] != r[2])
		abort();
	if (r[0] == SEC_WS_OK && (!same(d[0], d[1]) || !same(d[0], d[2]) ||
	    !same(c[0], c[1]) || !same(c[0], c[2])))
		abort();
	for (i = 0; i < 3; i++) {
		evbuffer_free(d[i]);
		evbuffer_free(c[i]);
	}
	return 0;
}
