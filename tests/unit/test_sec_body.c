/*
 * Placeholders in request bodies (sec_body.c): a JSON, a form and a
 * multipart body, cut in two at every offset and fed a byte at a time,
 * come out exactly as the whole body replaced in one go: the value
 * JSON-escaped inside JSON, percent-encoded inside a form, as it is in a
 * multipart part; the content types map to those kinds.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "unit.h"

#define PH	"airlock:body:0123abcd"
#define PH2	"airlock-two-4567efgh"
/* quotes, a backslash, a slash, '&', '=', a space, a control byte */
#define VAL	"s\"k/\\v&a=l u\x01" "e"
#define VAL2	"plain-second-value"

static const struct {
	int		 kind;
	const char	*in;
	const char	*want;
} cases[] = {
	{ SEC_BODY_JSON,
	  "{\"token\":\"" PH "\",\"x\":\"pre-" PH2 "-post\",\"y\":\"airlock:body\"}",
	  "{\"token\":\"s\\\"k/\\\\v&a=l u\\u0001e\",\"x\":\"pre-" VAL2
	  "-post\",\"y\":\"airlock:body\"}" },
	{ SEC_BODY_JSON,	/* '/' is not in PH; "\/" forms not needed */
	  PH PH, "s\\\"k/\\\\v&a=l u\\u0001es\\\"k/\\\\v&a=l u\\u0001e" },
	{ SEC_BODY_FORM,
	  "token=" PH "&b=airlock%3Abody%3A0123abcd&c=airlock%3abody%3a0123abcd"
	  "&d=" PH2,
	  "token=s%22k%2F%5Cv%26a%3Dl%20u%01e&b=s%22k%2F%5Cv%26a%3Dl%20u%01e"
	  "&c=s%22k%2F%5Cv%26a%3Dl%20u%01e&d=" VAL2 },
	{ SEC_BODY_RAW,
	  "--xyz\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n"
	  PH "\r\n--xyz\r\nContent-Disposition: form-data; name=\"f\"; "
	  "filename=\"a.txt\"\r\n\r\nkey=" PH2 " airlock:body:0123abc\r\n"
	  "--xyz--\r\n",
	  "--xyz\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n"
	  VAL "\r\n--xyz\r\nContent-Disposition: form-data; name=\"f\"; "
	  "filename=\"a.txt\"\r\n\r\nkey=" VAL2 " airlock:body:0123abc\r\n"
	  "--xyz--\r\n" },
};

static struct sec_body *
mk(int kind)
{
	struct sec_body	*sb = sec_body_new(kind);

	ck_assert_int_eq(sec_body_add(sb, "one", PH, VAL, strlen(VAL)), 0);
	ck_assert_int_eq(sec_body_add(sb, "two", PH2, VAL2, strlen(VAL2)), 0);
	return sb;
}

/* Feed <in> cut at <cut> (then byte by byte from <bytewise>). */
static char *
run(int kind, const char *in, size_t cut, int bytewise, size_t *olen)
{
	struct sec_body	*sb = mk(kind);
	struct evbuffer	*out = evbuffer_new();
	size_t		 len = strlen(in), i;
	char		*s;

	if (bytewise)
		for (i = 0; i < len; i++)
			sec_body_feed(sb, in + i, 1, 0, out);
	else {
		sec_body_feed(sb, in, cut, 0, out);
		/* what went on so far never holds more back than needed */
		ck_assert_uint_ge(evbuffer_get_length(out) + 2 *
		    sec_body_lookbehind(sb) + 2 * strlen(VAL) * 6, cut);
		sec_body_feed(sb, in + cut, len - cut, 0, out);
	}
	sec_body_feed(sb, "", 0, 1, out);
	*olen = evbuffer_get_length(out);
	s = malloc(*olen + 1);
	evbuffer_remove(out, s, *olen);
	s[*olen] = '\0';
	evbuffer_free(out);
	sec_body_free(sb);
	return s;
}

START_TEST(test_body_every_split)
{
	const char	*in = cases[_i].in, *want = cases[_i].want;
	size_t		 len = strlen(in), cut, olen;
	char		*got;

	for (cut = 0; cut <= len; cut++) {
		got = run(cases[_i].kind, in, cut, 0, &olen);
		ck_assert_msg(olen == strlen(want) && memcmp(got, want,
		    olen) == 0, "case %d cut %zu: got %s", _i, cut, got);
		free(got);
	}
	got = run(cases[_i].kind, in, 0, 1, &olen);
	ck_assert_msg(olen == strlen(want) && memcmp(got, want, olen) == 0,
	    "case %d byte by byte: got %s", _i, got);
	free(got);
}
END_TEST

START_TEST(test_body_hits)
{
	struct sec_body	*sb = mk(SEC_BODY_RAW);
	struct evbuffer	*out = evbuffer_new();
	const char	*name;

	sec_body_feed(sb, "x " PH " y", strlen(PH) + 4, 1, out);
	ck_assert_uint_eq(sec_body_count(sb), 2);
	ck_assert_uint_eq(sec_body_hits(sb, 0, &name), 1);
	ck_assert_str_eq(name, "one");
	ck_assert_uint_eq(sec_body_hits(sb, 1, &name), 0);
	ck_assert_uint_eq(sec_body_lookbehind(sb), strlen(PH) - 1);
	evbuffer_free(out);
	sec_body_free(sb);
}
END_TEST

START_TEST(test_body_kind)
{
#define K(s)	sec_body_kind(s, strlen(s))
	ck_assert_int_eq(K("application/json"), SEC_BODY_JSON);
	ck_assert_int_eq(K(" Application/JSON ; charset=utf-8"),
	    SEC_BODY_JSON);
	ck_assert_int_eq(K("application/vnd.api+json"), SEC_BODY_JSON);
	ck_assert_int_eq(K("application/x-www-form-urlencoded"),
	    SEC_BODY_FORM);
	ck_assert_int_eq(K("multipart/form-data; boundary=x"), SEC_BODY_RAW);
	ck_assert_int_eq(K("text/plain"), SEC_BODY_RAW);
	ck_assert_int_eq(sec_body_kind(NULL, 0), SEC_BODY_RAW);
#undef K
}
END_TEST

/* The tripwire keeps back 30 bytes per placeholder byte, all at the end. */
START_TEST(test_trip_hold)
{
	struct sec_trip	*tr = sec_trip_new();
	struct evbuffer	*out = evbuffer_new();
	char		 buf[1000];
	size_t		 keep = 30 * strlen(PH);

	memset(buf, 'x', sizeof(buf));
	sec_trip_add(tr, PH);
	ck_assert_uint_eq(sec_trip_hold(tr, buf, 100, 0, out), 0);
	ck_assert_uint_eq(sec_trip_hold(tr, buf, sizeof(buf), 0, out),
	    100 + sizeof(buf) - keep);
	ck_assert_uint_eq(sec_trip_hold(tr, "", 0, 1, out), keep);
	ck_assert_uint_eq(evbuffer_get_length(out), 100 + sizeof(buf));
	evbuffer_free(out);
	sec_trip_free(tr);
}
END_TEST

Suite *
suite_sec_body(void)
{
	Suite	*s = suite_create("sec_body");
	TCase	*tc = tcase_create("body");

	tcase_add_loop_test(tc, test_body_every_split, 0,
	    (int)(sizeof(cases) / sizeof(cases[0])));
	tcase_add_test(tc, test_body_hits);
	tcase_add_test(tc, test_body_kind);
	tcase_add_test(tc, test_trip_hold);
	suite_add_tcase(s, tc);
	return s;
}
