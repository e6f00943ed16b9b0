/*
 * WebSocket frames after a 101 (sec_ws.c): a stream of masked frames (a
 * text message in three fragments with a ping between two of them and the
 * placeholder cut by a fragment boundary, a binary message, a message with
 * a 16-bit and one with a 64-bit length) cut in two at every offset and
 * fed a byte at a time comes out as the same messages with the value in
 * place of the placeholder, every frame masked again; a placeholder that
 * may not go there stops the stream before any of it leaves; frames that
 * break RFC 6455 are refused; towards the client the reflection guard
 * redacts data messages and close reasons.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "secrets/sec_ws.h"
#include "unit.h"

#define PH	"airlock:ws:0123abcd"
#define PH_OFF	"airlock:other:99ffee"	/* a placeholder not allowed here */
#define VAL	"real-ws-value-\"x\"-42"

/* One frame: header (with <key> when masked), payload masked. */
static void
frame(struct evbuffer *b, int fin, int op, int masked, const char *p,
    size_t n)
{
	static const unsigned char key[4] = { 0x37, 0xfa, 0x21, 0x3d };
	unsigned char	h[14], *m;
	size_t		hl = 2, i;

	h[0] = (unsigned char)((fin ? 0x80 : 0) | op);
	h[1] = masked ? 0x80 : 0;
	if (n < 126)
		h[1] |= (unsigned char)n;
	else if (n < 65536) {
		h[1] |= 126;
		h[2] = (unsigned char)(n >> 8);
		h[3] = (unsigned char)n;
		hl = 4;
	} else {
		h[1] |= 127;
		for (i = 0; i < 8; i++)
			h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
		hl = 10;
	}
	if (masked) {
		memcpy(h + hl, key, 4);
		hl += 4;
	}
	evbuffer_add(b, h, hl);
	m = malloc(n + 1);
	for (i = 0; i < n; i++)
		m[i] = (unsigned char)p[i] ^ (masked ? key[i % 4] : 0);
	evbuffer_add(b, m, n);
	free(m);
}

/*
 * Decode <b> (frames as we wrote them) into a transcript: "T:<text>|",
 * "B:<bytes>|", "P:<ping>|", "C:<code>:<reason>|", messages joined from
 * their fragments; control frames where they came. -1 if any frame is
 * malformed or not masked as <masked> says.
 */
static int
decode(struct evbuffer *b, int masked, struct evbuffer *tr)
{
	size_t		 n = evbuffer_get_length(b), off = 0, hl, i;
	unsigned char	*p = evbuffer_pullup(b, -1), *pl;
	uint64_t	 len;
	struct evbuffer	*msg = evbuffer_new();
	int		 op, mop = 0, fin;

	while (off < n) {
		if (n - off < 2)
			return -1;
		fin = p[off] >> 7;
		op = p[off] & 15;
		if ((p[off] & 0x70) || (p[off + 1] >> 7) != masked)
			return -1;
		len = p[off + 1] & 127;
		hl = 2;
		if (len == 126) {
			len = (uint64_t)p[off + 2] << 8 | p[off + 3];
			hl = 4;
		} else if (len == 127) {
			for (len = 0, i = 0; i < 8; i++)
				len = len << 8 | p[off + 2 + i];
			hl = 10;
		}
		if (masked)
			hl += 4;
		if (n - off < hl + len)
			return -1;
		pl = p + off + hl;
		if (masked)
			for (i = 0; i < len; i++)
				pl[i] ^= p[off + hl - 4 + i % 4];
		if (op >= 8) {
			if (!fin || len > 125)
				return -1;
			if (op == 8)
				evbuffer_add_printf(tr, "C:%d:%.*s|", len >= 2 ?
				    pl[0] << 8 | pl[1] : 0, len >= 2 ?
				    (int)len - 2 : 0, (char *)pl + 2);
			else
				evbuffer_add_printf(tr, "%c:%.*s|", op == 9 ?
				    'P' : 'Q', (int)len, (char *)pl);
		} else {
			if ((op == 0) != (mop != 0))
				return -1;
			if (op != 0)
				mop = op;
			evbuffer_add(msg, pl, len);
			if (fin) {
				evbuffer_add_printf(tr, "%c:", mop == 1 ? 'T' :
				    'B');
				evbuffer_add_buffer(tr, msg);
				evbuffer_add(tr, "|", 1);
				mop = 0;
			}
		}
		off += hl + len;
	}
	evbuffer_free(msg);
	return mop == 0 ? 0 : -1;
}

static struct sec_ws *
mk_up(int with_trip)
{
	struct sec_ws	*w = sec_ws_new(1);
	struct sec_body	*sb = sec_body_new(SEC_BODY_RAW);
	struct sec_trip	*td = NULL, *tc = NULL;

	ck_assert_int_eq(sec_body_add(sb, "k", PH, VAL, strlen(VAL)), 0);
	sec_ws_set_subst(w, sb);
	if (with_trip) {
		td = sec_trip_new();
		tc = sec_trip_new();
		sec_trip_add(td, PH_OFF);
		sec_trip_add(tc, PH_OFF);
	}
	sec_ws_set_trip(w, td, tc);
	return w;
}

static char	 big[300];

/* The client's stream and the transcript the server must see. */
static void
stream(struct evbuffer *in, struct evbuffer *want)
{
	const char	*m1 = "hello " PH " world";

	memset(big, 'b', sizeof(big));
	memcpy(big + 100, PH, strlen(PH));
	frame(in, 0, 1, 1, m1, 9);			/* "hello air" */
	frame(in, 1, 9, 1, "ping!", 5);
	frame(in, 0, 0, 1, m1 + 9, 5);
	frame(in, 1, 0, 1, m1 + 14, strlen(m1) - 14);
	frame(in, 1, 2, 1, "bin " PH, 4 + strlen(PH));	/* binary: as is */
	frame(in, 1, 1, 1, big, sizeof(big));		/* 16-bit length */
	frame(in, 1, 1, 1, "", 0);
	frame(in, 1, 8, 1, "\x03\xe8" "bye", 5);
	evbuffer_add_printf(want, "P:ping!|T:hello " VAL " world|B:bin " PH
	    "|T:%.100s" VAL "%.*s|T:|C:1000:bye|", big,
	    (int)(sizeof(big) - 100 - strlen(PH)), big + 100 + strlen(PH));
}

static void
check_out(struct evbuffer *out, struct evbuffer *want)
{
	struct evbuffer	*tr = evbuffer_new();
	size_t		 n;

	ck_assert_int_eq(decode(out, 1, tr), 0);
	n = evbuffer_get_length(want);
	ck_assert_msg(evbuffer_get_length(tr) == n && memcmp(evbuffer_pullup(tr,
	    -1), evbuffer_pullup(want, -1), n) == 0, "got %.*s\nwant %.*s",
	    (int)evbuffer_get_length(tr), (char *)evbuffer_pullup(tr, -1),
	    (int)n, (char *)evbuffer_pullup(want, -1));
	ck_assert(memcmp(evbuffer_pullup(tr, -1), evbuffer_pullup(want, -1),
	    n) == 0);
	evbuffer_free(tr);
}

START_TEST(test_ws_every_split)
{
	struct evbuffer	*in = evbuffer_new(), *want = evbuffer_new();
	struct evbuffer	*out;
	struct sec_ws	*w;
	const char	*p;
	size_t		 n, cut, i;

	stream(in, want);
	n = evbuffer_get_length(in);
	p = (const char *)evbuffer_pullup(in, -1);
	for (cut = 0; cut <= n; cut++) {
		w = mk_up(1);
		out = evbuffer_new();
		ck_assert_int_eq(sec_ws_feed(w, p, cut, out), SEC_WS_OK);
		ck_assert_int_eq(sec_ws_feed(w, p + cut, n - cut, out),
		    SEC_WS_OK);
		check_out(out, want);
		evbuffer_free(out);
		sec_ws_free(w);
	}
	w = mk_up(0);
	out = evbuffer_new();
	for (i = 0; i < n; i++)
		ck_assert_int_eq(sec_ws_feed(w, p + i, 1, out), SEC_WS_OK);
	check_out(out, want);
	sec_ws_free(w);
	evbuffer_free(out);
	evbuffer_free(in);
	evbuffer_free(want);
}
END_TEST

/* A 64-bit length, a placeholder across its pieces: never held whole. */
START_TEST(test_ws_long)
{
	struct evbuffer	*in = evbuffer_new(), *want = evbuffer_new();
	struct evbuffer	*out = evbuffer_new();
	struct sec_ws	*w = mk_up(1);
	size_t		 n = 70000, off = 4090, i, step;
	char		*m = malloc(n);
	const char	*p;

	memset(m, 'x', n);
	memcpy(m + off, PH, strlen(PH));	/* across wslay's 4 KiB */
	frame(in, 1, 1, 1, m, n);
	evbuffer_add(want, "T:", 2);
	evbuffer_add(want, m, off);
	evbuffer_add(want, VAL, strlen(VAL));
	evbuffer_add(want, m + off + strlen(PH), n - off - strlen(PH));
	evbuffer_add(want, "|", 1);
	p = (const char *)evbuffer_pullup(in, -1);
	for (i = 0; i < evbuffer_get_length(in); i += step) {
		step = 997;
		if (step > evbuffer_get_length(in) - i)
			step = evbuffer_get_length(in) - i;
		ck_assert_int_eq(sec_ws_feed(w, p + i, step, out), SEC_WS_OK);
		/* bounded: what went is a piece behind what came */
		ck_assert(evbuffer_get_length(out) + 5000 >= i + step ||
		    i + step < 5000);
	}
	check_out(out, want);
	free(m);
	sec_ws_free(w);
	evbuffer_free(in);
	evbuffer_free(want);
	evbuffer_free(out);
}
END_TEST

/* A placeholder that may not go there: stopped at every cut, nothing of
 * it left; in a control frame too. */
START_TEST(test_ws_misuse)
{
	struct evbuffer	*in, *out, *tr;
	struct sec_ws	*w;
	const char	*p;
	size_t		 n, cut;
	int		 ctl;
	enum sec_ws_res	 r1, r2;

	for (ctl = 0; ctl < 2; ctl++) {
		in = evbuffer_new();
		frame(in, 1, 1, 1, "fine", 4);
		if (ctl)
			frame(in, 1, 9, 1, PH_OFF, strlen(PH_OFF));
		else {
			frame(in, 0, 1, 1, "x-" PH_OFF, 9);
			frame(in, 1, 0, 1, PH_OFF + 7, strlen(PH_OFF) - 7);
		}
		n = evbuffer_get_length(in);
		p = (const char *)evbuffer_pullup(in, -1);
		for (cut = 0; cut <= n; cut++) {
			w = mk_up(1);
			out = evbuffer_new();
			r1 = sec_ws_feed(w, p, cut, out);
			r2 = r1 == SEC_WS_OK ? sec_ws_feed(w, p + cut, n - cut,
			    out) : r1;
			ck_assert_int_eq(r2, SEC_WS_MISUSE);
			/* what went is whole frames without the placeholder */
			tr = evbuffer_new();
			(void)decode(out, 1, tr);
			ck_assert(evbuffer_search(tr, PH_OFF, strlen(PH_OFF),
			    NULL).pos == -1);
			ck_assert(evbuffer_search(tr, "airlock:other", 13,
			    NULL).pos == -1);
			evbuffer_free(tr);
			ck_assert_int_eq(sec_ws_feed(w, "", 0, out),
			    SEC_WS_BAD);	/* nothing more */
			evbuffer_free(out);
			sec_ws_free(w);
		}
		evbuffer_free(in);
	}
}
END_TEST

START_TEST(test_ws_bad)
{
	static const char	*what[] = {
		"unmasked", "rsv1", "cont first", "text in text",
		"ping 126", "fragmented ping", "opcode 3", "short 64-bit",
	};
	struct evbuffer		*in = evbuffer_new(), *out = evbuffer_new();
	struct sec_ws		*w = mk_up(0);
	char			 pad[130];
	int			 i = _i;

	memset(pad, 'p', sizeof(pad));
	switch (i) {
	case 0: frame(in, 1, 1, 0, "a", 1); break;
	case 1: frame(in, 1, 1, 1, "a", 1);
		*evbuffer_pullup(in, 1) |= 0x40; break;
	case 2: frame(in, 1, 0, 1, "a", 1); break;
	case 3: frame(in, 0, 1, 1, "a", 1); frame(in, 1, 1, 1, "b", 1); break;
	case 4: frame(in, 1, 9, 1, pad, 126); break;
	case 5: frame(in, 0, 9, 1, "a", 1); break;
	case 6: frame(in, 1, 3, 1, "a", 1); break;
	case 7: evbuffer_add(in, "\x81\xff\0\0\0\0\0\0\0\x05" "abcd" "ab", 16);
		break;
	}
	ck_assert_msg(sec_ws_feed(w, (const char *)evbuffer_pullup(in, -1),
	    evbuffer_get_length(in), out) == SEC_WS_BAD, "%s", what[i]);
	sec_ws_free(w);
	evbuffer_free(in);
	evbuffer_free(out);
}
END_TEST

/* Towards the client: a value echoed across fragments and in a close
 * reason is redacted; the close code stays. */
START_TEST(test_ws_reflect)
{
	struct evbuffer	*in = evbuffer_new(), *want = evbuffer_new();
	struct evbuffer	*out, *tr;
	struct sec_scan	*sc = sec_scan_new();
	struct sec_ws	*w;
	const char	*p, *m = "echo: " VAL " done";
	size_t		 n, cut;

	sec_scan_add(sc, VAL, strlen(VAL), "[R]", 3);
	frame(in, 0, 1, 0, m, 10);
	frame(in, 1, 10, 0, "pong " VAL, 5 + strlen(VAL));
	frame(in, 1, 0, 0, m + 10, strlen(m) - 10);
	frame(in, 1, 8, 0, "\x0f\xa0" "bad " VAL, 6 + strlen(VAL));
	evbuffer_add_printf(want, "Q:pong [R]|T:echo: [R] done|C:4000:bad [R]|");
	n = evbuffer_get_length(in);
	p = (const char *)evbuffer_pullup(in, -1);
	for (cut = 0; cut <= n; cut++) {
		w = sec_ws_new(0);
		sec_ws_set_reflect(w, sc);
		out = evbuffer_new();
		ck_assert_int_eq(sec_ws_feed(w, p, cut, out), SEC_WS_OK);
		ck_assert_int_eq(sec_ws_feed(w, p + cut, n - cut, out),
		    SEC_WS_OK);
		tr = evbuffer_new();
		ck_assert_int_eq(decode(out, 0, tr), 0);
		ck_assert_uint_eq(evbuffer_get_length(tr),
		    evbuffer_get_length(want));
		ck_assert(memcmp(evbuffer_pullup(tr, -1), evbuffer_pullup(want,
		    -1), evbuffer_get_length(want)) == 0);
		evbuffer_free(tr);
		evbuffer_free(out);
		sec_ws_free(w);
	}
	sec_scan_free(sc);
	evbuffer_free(in);
	evbuffer_free(want);
}
END_TEST

START_TEST(test_ws_close_frame)
{
	struct evbuffer	*out = evbuffer_new(), *tr = evbuffer_new();

	sec_ws_close_frame(1, 1008, "airlock: secret_misuse", out);
	ck_assert_int_eq(decode(out, 1, tr), 0);
	ck_assert(evbuffer_search(tr, "C:1008:airlock: secret_misuse|", 30,
	    NULL).pos == 0);
	evbuffer_free(out);
	evbuffer_free(tr);
}
END_TEST

Suite *
suite_sec_ws(void)
{
	Suite	*s = suite_create("sec_ws");
	TCase	*tc = tcase_create("frames");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_ws_every_split);
	tcase_add_test(tc, test_ws_long);
	tcase_add_test(tc, test_ws_misuse);
	tcase_add_loop_test(tc, test_ws_bad, 0, 8);
	tcase_add_test(tc, test_ws_reflect);
	tcase_add_test(tc, test_ws_close_frame);
	suite_add_tcase(s, tc);
	return s;
}
