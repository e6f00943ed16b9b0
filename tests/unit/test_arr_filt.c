/*
 * The budget's filter of Gemini's JSON-array streams (arr_filt.c), on the
 * recorded-shape fixtures of tests/data/llm/gemini, split at every byte:
 * the bytes pass unchanged, elements whole; a cut after any element ends
 * the array cleanly with Gemini's error object as its last element.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <json-c/json.h>

#include "budget/bud.h"
#include "unit.h"
#include "util/util.h"

static const char *const arrays[] = {
	"gemini/stream_generate_content_array.json",
	"gemini/stream_generate_content_array_cached.json",
};

struct sink {
	char	*buf;
	size_t	 len;
	size_t	 wholes;	/* whole elements seen */
	size_t	 cut_after;	/* leave out what follows this many */
	int	 cut;
};

static int
put(void *arg, const char *p, size_t n, int whole)
{
	struct sink	*s = arg;

	if (s->cut)
		return 0;
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	if (whole) {
		json_object	*o;

		/* each whole element is one JSON object */
		s->buf[s->len] = '\0';
		o = json_tokener_parse(s->buf + s->len - n);
		ck_assert_msg(o != NULL && json_object_is_type(o,
		    json_type_object), "element %zu not an object",
		    s->wholes);
		json_object_put(o);
		if (++s->wholes == s->cut_after)
			s->cut = 1;
	}
	return 1;
}

static char *
fixture(const char *name, size_t *len)
{
	const char	*top = getenv("top_srcdir");
	char		 path[1024];
	char		*body;

	snprintf(path, sizeof(path), "%s/tests/data/llm/%s",
	    top != NULL ? top : ".", name);
	body = unit_slurp(path, len);
	ck_assert_msg(body != NULL, "%s: cannot read", path);
	return body;
}

static size_t
elements(const char *body)
{
	json_object	*o = json_tokener_parse(body);
	size_t		 n;

	ck_assert_ptr_nonnull(o);
	ck_assert(json_object_is_type(o, json_type_array));
	n = json_object_array_length(o);
	json_object_put(o);
	return n;
}

static void
run(const char *body, size_t len, size_t at, size_t cut_after,
    struct sink *s, struct arr_filt **fp)
{
	struct arr_filt	*f = arr_filt_new(1 << 20);

	memset(s, 0, sizeof(*s));
	s->buf = xmalloc(len + 1024);
	s->cut_after = cut_after;
	arr_filt_feed(f, body, at, put, s);
	arr_filt_feed(f, body + at, len - at, put, s);
	if (!s->cut)
		arr_filt_flush(f, put, s);
	*fp = f;
}

/* Uncut: byte-exact, every element whole, at every split. */
START_TEST(test_arr_every_split)
{
	struct arr_filt	*f;
	struct sink	 s;
	size_t		 len, at, n;
	char		*body = fixture(arrays[_i], &len);

	n = elements(body);
	ck_assert_uint_ge(n, 2);
	for (at = 0; at <= len; at++) {
		run(body, len, at, 0, &s, &f);
		ck_assert_uint_eq(s.len, len);
		ck_assert_msg(memcmp(s.buf, body, len) == 0, "split %zu", at);
		ck_assert_uint_eq(s.wholes, n);
		ck_assert(!arr_filt_at_boundary(f));	/* closed */
		arr_filt_free(f);
		free(s.buf);
	}
	free(body);
}
END_TEST

/* Cut after each element, at every split: a valid array whose last
 * element is Gemini's error object. */
START_TEST(test_arr_cut_every_split)
{
	struct arr_filt	*f;
	struct sink	 s;
	json_object	*o, *last, *err, *v;
	size_t		 len, at, n, k;
	char		*body = fixture(arrays[_i], &len), tail[1024];

	n = elements(body);
	for (k = 1; k < n; k++)
		for (at = 0; at <= len; at++) {
			run(body, len, at, k, &s, &f);
			ck_assert(arr_filt_at_boundary(f));
			arr_cut_tail(f, "usd cap reached", "req-1", tail,
			    sizeof(tail));
			memcpy(s.buf + s.len, tail, strlen(tail) + 1);
			o = json_tokener_parse(s.buf);
			ck_assert_msg(o != NULL, "cut after %zu, split %zu: "
			    "not JSON: %s", k, at, s.buf);
			ck_assert_uint_eq(json_object_array_length(o), k + 1);
			last = json_object_array_get_idx(o, k);
			ck_assert(json_object_object_get_ex(last, "error",
			    &err));
			ck_assert(json_object_object_get_ex(err, "code", &v));
			ck_assert_int_eq(json_object_get_int(v), 402);
			ck_assert(json_object_object_get_ex(err, "status",
			    &v));
			ck_assert(json_object_object_get_ex(err, "message",
			    &v));
			json_object_put(o);
			arr_filt_free(f);
			free(s.buf);
		}
	free(body);
}
END_TEST

/* Before the first element, inside one over the bound, a plain object. */
START_TEST(test_arr_edges)
{
	struct arr_filt	*f = arr_filt_new(8);
	struct sink	 s;
	char		 tail[1024];
	const char	*big = "[{\"a\":\"0123456789\"},{\"b\":1}]";
	json_object	*o;

	memset(&s, 0, sizeof(s));
	s.buf = xmalloc(4096);
	arr_filt_feed(f, " [ ", 3, put, &s);
	ck_assert(arr_filt_at_boundary(f));
	arr_cut_tail(f, "r", "id", tail, sizeof(tail));
	memcpy(s.buf + s.len, tail, strlen(tail) + 1);
	o = json_tokener_parse(s.buf);
	ck_assert_ptr_nonnull(o);
	ck_assert_uint_eq(json_object_array_length(o), 1);
	json_object_put(o);
	arr_filt_free(f);
	/* an element over the bound goes on as it comes: no clean end
	   inside it, one after it */
	s.len = s.wholes = 0;
	f = arr_filt_new(8);
	arr_filt_feed(f, big, 10, put, &s);
	ck_assert(!arr_filt_at_boundary(f));
	arr_filt_feed(f, big + 10, strlen(big) - 10, put, &s);
	ck_assert_uint_eq(s.len, strlen(big));
	ck_assert_uint_eq(s.wholes, 1);
	arr_filt_free(f);
	/* not an array: passed, never a boundary */
	s.len = s.wholes = 0;
	f = arr_filt_new(8);
	arr_filt_feed(f, "{\"error\":{}}", 12, put, &s);
	ck_assert_uint_eq(s.len, 12);
	ck_assert(!arr_filt_at_boundary(f));
	arr_filt_free(f);
	free(s.buf);
}
END_TEST

Suite *
suite_arr_filt(void)
{
	Suite	*s = suite_create("arr_filt");
	TCase	*tc = tcase_create("all");
	int	 n = (int)(sizeof(arrays) / sizeof(arrays[0]));

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_arr_every_split, 0, n);
	tcase_add_loop_test(tc, test_arr_cut_every_split, 0, n);
	tcase_add_test(tc, test_arr_edges);
	suite_add_tcase(s, tc);
	return s;
}
