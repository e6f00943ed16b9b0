/*
 * The reflection guard as a property: for random secrets full of reserved
 * characters, every encoding an upstream may send back (computed here,
 * independently of sec_encode.c), split at every offset across feeds and
 * across two header fields, never reaches the output, neither whole nor
 * as a run of reflect_min_run bytes. A seeded PRNG: the same cases every
 * run, the seed in each failure.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "secrets/sec.h"
#include "unit.h"

#define MIN_RUN		12
#define REPL		"[airlock:redacted:s]"
#define MAXF		32

static uint64_t
rnd(uint64_t *st)
{
	*st ^= *st >> 12;
	*st ^= *st << 25;
	*st ^= *st >> 27;
	return *st * 0x2545F4914F6CDD1DULL;
}

struct enc {
	char	*s;
	size_t	 len;
};

struct encs {
	struct enc	e[MAXF];
	int		n;
};

static void
enc_add(struct encs *es, const char *s, size_t len)
{
	ck_assert_int_lt(es->n, MAXF);
	es->e[es->n].s = malloc(len + 1);
	memcpy(es->e[es->n].s, s, len);
	es->e[es->n].s[len] = '\0';
	es->e[es->n].len = len;
	es->n++;
}

static void
encs_free(struct encs *es)
{
	int	i;

	for (i = 0; i < es->n; i++)
		free(es->e[i].s);
	es->n = 0;
}

static int
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

/* RFC 3986 percent-encoding; lower hex; '+' for space. */
static size_t
pct(const char *in, size_t len, char *out, int lower, int plus)
{
	const char	*hx = lower ? "0123456789abcdef" : "0123456789ABCDEF";
	size_t		 i, o = 0;

	for (i = 0; i < len; i++) {
		unsigned char	c = (unsigned char)in[i];

		if (unreserved(c))
			out[o++] = (char)c;
		else if (c == ' ' && plus)
			out[o++] = '+';
		else {
			out[o++] = '%';
			out[o++] = hx[c >> 4];
			out[o++] = hx[c & 15];
		}
	}
	return o;
}

/* JSON: PHP style (with "\/"), or "\u00XX" for every non-alphanumeric. */
static size_t
json(const char *in, size_t len, char *out, int uall, int lower)
{
	const char	*hx = lower ? "0123456789abcdef" : "0123456789ABCDEF";
	size_t		 i, o = 0;

	for (i = 0; i < len; i++) {
		unsigned char	c = (unsigned char)in[i];
		int		alnum = (c >= 'A' && c <= 'Z') ||
				    (c >= 'a' && c <= 'z') ||
				    (c >= '0' && c <= '9');

		if (alnum || (!uall && c >= 0x20 && c != '"' && c != '\\' &&
		    c != '/'))
			out[o++] = (char)c;
		else if (!uall && (c == '"' || c == '\\' || c == '/')) {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else {
			o += (size_t)sprintf(out + o, "\\u00%c%c", hx[c >> 4],
			    hx[c & 15]);
		}
	}
	return o;
}

static size_t
b64(const unsigned char *in, size_t len, char *out, int url)
{
	static const char	 std[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char	 web[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char		*a = url ? web : std;
	size_t			 i, o = 0;
	uint32_t		 v;

	for (i = 0; i + 2 < len; i += 3) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		out[o++] = a[v >> 6 & 63];
		out[o++] = a[v & 63];
	}
	if (len - i == 1) {
		v = (uint32_t)in[i] << 16;
		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		if (!url) {
			out[o++] = '=';
			out[o++] = '=';
		}
	} else if (len - i == 2) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		out[o++] = a[v >> 6 & 63];
		if (!url)
			out[o++] = '=';
	}
	return o;
}

/*
 * The forms checked, each as an upstream would send it (and, for base64,
 * the part fixed by the secret inside a longer encoded text).
 */
static void
forms_of(const char *sec, size_t len, uint64_t *st, struct encs *es)
{
	char		 a[4096], b[4096];
	unsigned char	 wrap[600];
	size_t		 na, nb, pre, post, k;
	int		 lower, url;

	enc_add(es, sec, len);
	for (lower = 0; lower < 2; lower++) {
		na = pct(sec, len, a, lower, 0);
		enc_add(es, a, na);
		/* twice: a login redirect's next= */
		nb = pct(a, na, b, lower, 0);
		enc_add(es, b, nb);
		na = pct(sec, len, a, lower, 1);
		enc_add(es, a, na);
		na = json(sec, len, a, 1, lower);
		enc_add(es, a, na);
	}
	na = json(sec, len, a, 0, 0);
	enc_add(es, a, na);
	for (url = 0; url < 2; url++) {
		na = b64((const unsigned char *)sec, len, a, url);
		enc_add(es, a, na);
		/* "user:secret" (its first 8 characters are "alice:"'s),
		   and the secret at a random offset inside random bytes:
		   only what the secret fixes (4 chars off each end) must
		   go */
		memcpy(wrap, "alice:", 6);
		memcpy(wrap + 6, sec, len);
		na = b64(wrap, 6 + len, a, url);
		enc_add(es, a + 8, na - 8);
		pre = rnd(st) % 5;
		post = rnd(st) % 5;
		for (k = 0; k < pre; k++)
			wrap[k] = (unsigned char)rnd(st);
		memcpy(wrap + pre, sec, len);
		for (k = 0; k < post; k++)
			wrap[pre + len + k] = (unsigned char)rnd(st);
		na = b64(wrap, pre + len + post, a, url);
		/* character j carries bits 6j..6j+5: those within the
		   secret's bits are fixed by it */
		k = (pre * 8 + 5) / 6;
		na = (pre + len) * 8 / 6;
		if (na > k + MIN_RUN)
			enc_add(es, a + k, na - k);
	}
}

/*
 * The first run of MIN_RUN bytes of any form found in <out>, or -1. Each
 * marker counts as one byte that is in no secret: a marker's "]" before
 * the secret's next bytes is not a byte of the secret.
 */
static int
leaked(const struct encs *es, const char *out, size_t olen, size_t *at)
{
	char		*o = malloc(olen + 1);
	const char	*p;
	size_t		 k, n = 0, i = 0, rl = sizeof(REPL) - 1;
	int		 f, found = -1;

	while (i < olen) {
		if (olen - i >= rl && memcmp(out + i, REPL, rl) == 0) {
			o[n++] = '\001';
			i += rl;
		} else
			o[n++] = out[i++];
	}
	for (f = 0; f < es->n && found == -1; f++)
		for (k = 0; k + MIN_RUN <= es->e[f].len; k++) {
			p = memmem(o, n, es->e[f].s + k, MIN_RUN);
			if (p != NULL) {
				*at = k;
				found = f;
				break;
			}
		}
	free(o);
	return found;
}

static char *
drain(struct evbuffer *eb, size_t *len)
{
	char	*s;

	*len = evbuffer_get_length(eb);
	s = malloc(*len + 1);
	evbuffer_remove(eb, s, *len);
	s[*len] = '\0';
	return s;
}

static const char	reserved[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ ";

static void
random_secret(uint64_t *st, char *sec, size_t *len)
{
	size_t	i, n = 16 + rnd(st) % 33;

	for (i = 0; i < n; i++)
		sec[i] = reserved[rnd(st) % (sizeof(reserved) - 1)];
	sec[n] = '\0';
	*len = n;
}

/* Every form in a body, fed in two pieces split at every offset. */
START_TEST(test_property_body_splits)
{
	uint64_t	 st = 0xa1e7c0de5eed0001ULL + (uint64_t)_i;
	char		 sec[64], body[8192], *out;
	struct encs	 es = { .n = 0 };
	struct evbuffer	*eb = evbuffer_new();
	struct sec_scan	*sc;
	size_t		 slen, blen = 0, olen, cut, at;
	int		 i, bad;

	random_secret(&st, sec, &slen);
	forms_of(sec, slen, &st, &es);
	for (i = 0; i < es.n; i++) {
		blen += (size_t)snprintf(body + blen, sizeof(body) - blen,
		    "<%d>", i);
		memcpy(body + blen, es.e[i].s, es.e[i].len);
		blen += es.e[i].len;
	}
	for (cut = 0; cut <= blen; cut++) {
		sc = sec_scan_new();
		sec_scan_add_forms(sc, sec, slen, MIN_RUN, REPL,
		    sizeof(REPL) - 1);
		sec_scan_feed(sc, body, cut, eb);
		sec_scan_feed(sc, body + cut, blen - cut, eb);
		sec_scan_finish(sc, eb);
		out = drain(eb, &olen);
		bad = leaked(&es, out, olen, &at);
		ck_assert_msg(bad == -1, "case %d cut %zu: form %d (\"%s\") "
		    "run at %zu reached the output: %s", _i, cut, bad,
		    bad >= 0 ? es.e[bad].s : "", at, out);
		ck_assert_ptr_nonnull(strstr(out, REPL));
		free(out);
		sec_scan_free(sc);
	}
	encs_free(&es);
	evbuffer_free(eb);
}
END_TEST

/*
 * One form cut across two header fields of a response head (scanned as
 * one block, as the gateway does), and a piece of MIN_RUN bytes or more
 * of it alone in a field (a Range answer): nothing of MIN_RUN bytes left.
 */
START_TEST(test_property_header_splits)
{
	uint64_t	 st = 0xbeefcafe00000000ULL + (uint64_t)_i;
	char		 sec[64], head[8192], *out;
	struct encs	 es = { .n = 0 };
	struct sec_scan	*sc;
	size_t		 slen, hlen, olen, k, at, off, plen;
	int		 f, bad;

	random_secret(&st, sec, &slen);
	forms_of(sec, slen, &st, &es);
	sc = sec_scan_new();
	sec_scan_add_forms(sc, sec, slen, MIN_RUN, REPL, sizeof(REPL) - 1);
	for (f = 0; f < es.n; f++) {
		for (k = 0; k <= es.e[f].len; k++) {
			hlen = (size_t)snprintf(head, sizeof(head),
			    "HTTP/1.1 200 OK\r\nX-A: %.*s\r\nX-B: %s\r\n\r\n",
			    (int)k, es.e[f].s, es.e[f].s + k);
			out = sec_scan_string(sc, head, hlen, &olen, NULL);
			bad = leaked(&es, out, olen, &at);
			ck_assert_msg(bad == -1, "case %d form %d split %zu: "
			    "form %d run at %zu (\"%.12s\") in %s", _i, f, k,
			    bad, at, bad >= 0 ? es.e[bad].s + at : "", out);
			free(out);
		}
		/* a piece: what a Range answer hands out */
		if (es.e[f].len < MIN_RUN)
			continue;
		off = rnd(&st) % (es.e[f].len - MIN_RUN + 1);
		plen = MIN_RUN + rnd(&st) % (es.e[f].len - off - MIN_RUN + 1);
		out = sec_scan_string(sc, es.e[f].s + off, plen, &olen, NULL);
		ck_assert_msg(leaked(&es, out, olen, &at) == -1,
		    "case %d form %d: piece %zu+%zu kept a run", _i, f, off,
		    plen);
		free(out);
	}
	sec_scan_free(sc);
	encs_free(&es);
}
END_TEST

/* Text that shares no run with the secret goes through unchanged. */
START_TEST(test_property_clean_text)
{
	uint64_t	 st = 0x0c1ea4e4700000ULL + (uint64_t)_i;
	char		 sec[64], text[4096], *out;
	struct sec_scan	*sc;
	struct encs	 es = { .n = 0 };
	size_t		 slen, olen, i, at;

	random_secret(&st, sec, &slen);
	forms_of(sec, slen, &st, &es);
	for (i = 0; i < sizeof(text); i++)
		text[i] = reserved[rnd(&st) % (sizeof(reserved) - 1)];
	if (leaked(&es, text, sizeof(text), &at) != -1)
		return;		/* a run by chance: not this property */
	sc = sec_scan_new();
	sec_scan_add_forms(sc, sec, slen, MIN_RUN, REPL, sizeof(REPL) - 1);
	out = sec_scan_string(sc, text, sizeof(text), &olen, NULL);
	ck_assert_uint_eq(olen, sizeof(text));
	ck_assert(memcmp(out, text, olen) == 0);
	free(out);
	sec_scan_free(sc);
	encs_free(&es);
}
END_TEST

Suite *
suite_sec_encode(void)
{
	Suite	*s = suite_create("sec_encode");
	TCase	*tc = tcase_create("property");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_property_body_splits, 0, 40);
	tcase_add_loop_test(tc, test_property_header_splits, 0, 40);
	tcase_add_loop_test(tc, test_property_clean_text, 0, 100);
	suite_add_tcase(s, tc);
	return s;
}
