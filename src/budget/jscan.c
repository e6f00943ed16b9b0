/*
 * jscan: a streaming JSON field picker on yajl (see jscan.h).
 *
 * Each open container keeps the set of wanted paths its own path is a
 * prefix of (a bit mask); a key narrows the set for the value that
 * follows, an array element or an unwanted key empties it. Only a value
 * whose set holds a path of exactly its length is recorded.
 *
 * yajl decodes a string (into a buffer as long as the string) only when
 * the callback for it is set, and reads the callbacks through the pointer
 * it was given, at each token: the callbacks are switched on just where a
 * key or value can matter (jscan_arm), so a document of long escaped
 * strings costs nothing to skip.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "budget/jscan.h"
#include "util/log.h"
#include "util/util.h"

struct jscan_level {
	uint64_t	 l_mask;	/* paths under (or at) this container */
	uint64_t	 l_exact;	/* paths that are this container */
	unsigned	 l_level;	/* its level: root 0 */
	int		 l_map;
};

struct jscan_path {
	const char	*p_comp[JSCAN_MAXLEVEL];
	size_t		 p_clen[JSCAN_MAXLEVEL];
	unsigned	 p_n;		/* components; 0 = the root */
};

struct jscan {
	yajl_handle		 j_h;
	yajl_callbacks		 j_cb;	/* switched while parsing */
	yajl_alloc_funcs	 j_af;
	size_t			 j_n;
	struct jscan_path	 j_p[JSCAN_MAXFIELDS];
	uint64_t		 j_len[JSCAN_MAXLEVEL + 1]; /* by length */
	uint64_t		 j_desc[JSCAN_MAXFIELDS];  /* paths below i */
	struct jscan_val	 j_v[JSCAN_MAXFIELDS];
	struct jscan_level	 j_stack[JSCAN_DEPTH];
	unsigned		 j_depth;	/* open containers */
	uint64_t		 j_pending;	/* for the next value */
	unsigned		 j_plevel;
	uint64_t		 j_base;	/* bytes before this feed */
	size_t			 j_mem;
	size_t			 j_mem_max;
	int			 j_over;	/* memory budget passed */
	int			 j_deep;	/* nesting over the bound */
	int			 j_root_done;
	int			 j_strict;
	enum jscan_status	 j_st;
	const char		*j_why;
	/* text counting (jscan_count_text): string bytes under these keys */
	const char *const	*j_tkeys;
	size_t			 j_ntkeys;
	int			 j_tpend;	/* the next value is text */
	uint64_t		 j_tbytes;	/* kept across resets */
};

/* ---- yajl's memory, counted ---------------------------------------- */

/* Each block carries its size in front, for the count. */
#define JS_HDR	16

static void *
js_malloc(void *ctx, size_t sz)
{
	struct jscan	*js = ctx;
	unsigned char	*p;

	p = xmalloc(sz + JS_HDR);
	memcpy(p, &sz, sizeof(sz));
	js->j_mem += sz;
	if (js->j_mem > js->j_mem_max)
		js->j_over = 1;
	return p + JS_HDR;
}

static void
js_free(void *ctx, void *ptr)
{
	struct jscan	*js = ctx;
	unsigned char	*p;
	size_t		 sz;

	if (ptr == NULL)
		return;
	p = (unsigned char *)ptr - JS_HDR;
	memcpy(&sz, p, sizeof(sz));
	js->j_mem -= sz < js->j_mem ? sz : js->j_mem;
	free(p);
}

static void *
js_realloc(void *ctx, void *ptr, size_t sz)
{
	struct jscan	*js = ctx;
	unsigned char	*p;
	size_t		 old;

	if (ptr == NULL)
		return js_malloc(ctx, sz);
	p = (unsigned char *)ptr - JS_HDR;
	memcpy(&old, p, sizeof(old));
	p = xrealloc(p, sz + JS_HDR);
	memcpy(p, &sz, sizeof(sz));
	js->j_mem = js->j_mem - (old < js->j_mem ? old : js->j_mem) + sz;
	if (js->j_mem > js->j_mem_max)
		js->j_over = 1;
	return p + JS_HDR;
}

/* ---- recording ------------------------------------------------------ */

static uint64_t
js_off(struct jscan *js)
{
	return js->j_base + yajl_get_bytes_consumed(js->j_h);
}

static struct jscan_level *
js_top(struct jscan *js)
{
	return js->j_depth > 0 ? &js->j_stack[js->j_depth - 1] : NULL;
}

/* The paths that are the value about to be read. */
static uint64_t
js_exact(struct jscan *js)
{
	if (js->j_pending == 0 || js->j_plevel > JSCAN_MAXLEVEL)
		return 0;
	return js->j_pending & js->j_len[js->j_plevel];
}

/* Switch on the callbacks that decode only where they can matter. */
static void js_arm(struct jscan *);

/* A value (a scalar, a closed map or array) ended: 1 for yajl. */
static int
js_value_end(struct jscan *js)
{
	js->j_pending = 0;
	if (js->j_depth == 0)
		js->j_root_done = 1;
	js_arm(js);
	return 1;
}

static int
js_scalar(struct jscan *js, enum jscan_type t, const char *s, size_t len,
    int b)
{
	uint64_t		 e = js_exact(js);
	struct jscan_val	*v;
	size_t			 i, n;

	js->j_tpend = 0;
	if (js->j_over)
		return 0;
	for (i = 0; e != 0 && i < js->j_n; i++) {
		if (!(e & (1ULL << i)))
			continue;
		v = &js->j_v[i];
		v->jv_type = t;
		v->jv_count++;
		v->jv_bool = b;
		n = len < sizeof(v->jv_text) - 1 ? len : sizeof(v->jv_text) - 1;
		if (s != NULL)
			memcpy(v->jv_text, s, n);
		v->jv_text[s != NULL ? n : 0] = '\0';
		v->jv_len = s != NULL ? len : 0;
		v->jv_val_end = js_off(js);
	}
	return js_value_end(js);
}

static int
cb_null(void *ctx)
{
	return js_scalar(ctx, JV_NULL, NULL, 0, 0);
}

static int
cb_bool(void *ctx, int b)
{
	return js_scalar(ctx, JV_BOOL, NULL, 0, b);
}

static int
cb_number(void *ctx, const char *s, size_t len)
{
	return js_scalar(ctx, JV_NUMBER, s, len, 0);
}

static int
cb_string(void *ctx, const unsigned char *s, size_t len)
{
	struct jscan	*js = ctx;

	if (js->j_tpend)
		js->j_tbytes += len;
	js->j_tpend = 0;
	return js_scalar(ctx, JV_STRING, (const char *)s, len, 0);
}

static int
js_open(struct jscan *js, int map)
{
	uint64_t		 e = js_exact(js), d = 0;
	struct jscan_level	*l;
	size_t			 i;

	js->j_tpend = 0;
	if (js->j_over)
		return 0;
	if (js->j_depth >= JSCAN_DEPTH) {
		js->j_deep = 1;
		return 0;
	}
	for (i = 0; e != 0 && i < js->j_n; i++)
		if (e & (1ULL << i)) {
			d |= js->j_desc[i];
			js->j_v[i].jv_type = map ? JV_OBJECT : JV_ARRAY;
			js->j_v[i].jv_count++;
			js->j_v[i].jv_members = 0;
		}
	/* a repeated object replaces the earlier one: forget its members */
	for (i = 0; d != 0 && i < js->j_n; i++)
		if (d & (1ULL << i))
			memset(&js->j_v[i], 0, sizeof(js->j_v[i]));
	l = &js->j_stack[js->j_depth++];
	l->l_map = map;
	l->l_mask = js->j_depth - 1 < JSCAN_MAXLEVEL + 1 ? js->j_pending : 0;
	l->l_exact = e;
	l->l_level = js->j_plevel;
	js->j_pending = 0;
	js_arm(js);
	return 1;
}

/* The end of a map or an array. */
static int
cb_end(void *ctx)
{
	struct jscan		*js = ctx;
	struct jscan_level	*l = js_top(js);
	uint64_t		 off;
	size_t			 i;

	if (js->j_over || l == NULL)
		return 0;
	off = js_off(js);
	for (i = 0; l->l_exact != 0 && i < js->j_n; i++)
		if (l->l_exact & (1ULL << i))
			js->j_v[i].jv_val_end = off;
	js->j_depth--;
	return js_value_end(js);
}

static int
cb_start_map(void *ctx)
{
	return js_open(ctx, 1);
}

static int
cb_start_array(void *ctx)
{
	return js_open(ctx, 0);
}

static int
cb_map_key(void *ctx, const unsigned char *k, size_t len)
{
	struct jscan		*js = ctx;
	struct jscan_level	*l = js_top(js);
	const struct jscan_path	*p;
	uint64_t		 m, e;
	unsigned		 lv;
	size_t			 i;

	if (js->j_over || l == NULL)
		return 0;
	js->j_tpend = 0;
	for (i = 0; i < js->j_ntkeys; i++)
		if (strlen(js->j_tkeys[i]) == len &&
		    memcmp(js->j_tkeys[i], k, len) == 0)
			js->j_tpend = 1;
	lv = l->l_level;
	m = 0;
	for (i = 0; l->l_mask != 0 && i < js->j_n; i++) {
		p = &js->j_p[i];
		if (!(l->l_mask & (1ULL << i)) || p->p_n <= lv ||
		    p->p_clen[lv] != len || memcmp(p->p_comp[lv], k, len) != 0)
			continue;
		m |= 1ULL << i;
	}
	for (i = 0; l->l_exact != 0 && i < js->j_n; i++)
		if (l->l_exact & (1ULL << i))
			js->j_v[i].jv_members++;
	js->j_pending = m;
	js->j_plevel = lv + 1;
	e = js_exact(js);
	for (i = 0; e != 0 && i < js->j_n; i++)
		if (e & (1ULL << i))
			js->j_v[i].jv_key_end = js_off(js);
	js_arm(js);
	return 1;
}

static void
js_arm(struct jscan *js)
{
	struct jscan_level	*l = js_top(js);

	/* keys only in a map some path goes through, or that counts them */
	js->j_cb.yajl_map_key = l != NULL && l->l_map &&
	    (l->l_mask != 0 || l->l_exact != 0 || js->j_ntkeys != 0) ?
	    cb_map_key : NULL;
	js->j_cb.yajl_string = js_exact(js) != 0 || js->j_tpend ? cb_string :
	    NULL;
}

/* ---- interface ------------------------------------------------------ */

static void
js_compile(struct jscan *js, size_t i, const char *path)
{
	struct jscan_path	*p = &js->j_p[i];
	const char		*s = path, *dot;

	p->p_n = 0;
	while (*s != '\0' && p->p_n < JSCAN_MAXLEVEL) {
		dot = strchr(s, '.');
		p->p_comp[p->p_n] = s;
		p->p_clen[p->p_n] = dot != NULL ? (size_t)(dot - s) : strlen(s);
		p->p_n++;
		if (dot == NULL)
			break;
		s = dot + 1;
	}
	js->j_len[p->p_n] |= 1ULL << i;
}

/* Is path <b> below path <a>? */
static int
js_below(const struct jscan_path *a, const struct jscan_path *b)
{
	unsigned	k;

	if (b->p_n <= a->p_n)
		return 0;
	for (k = 0; k < a->p_n; k++)
		if (a->p_clen[k] != b->p_clen[k] ||
		    memcmp(a->p_comp[k], b->p_comp[k], a->p_clen[k]) != 0)
			return 0;
	return 1;
}

/* A fresh yajl handle and empty results. */
static void
js_start(struct jscan *js)
{
	memset(js->j_v, 0, sizeof(js->j_v));
	js->j_depth = 0;
	js->j_pending = (1ULL << js->j_n) - 1;
	js->j_plevel = 0;
	js->j_base = 0;
	js->j_over = js->j_deep = js->j_root_done = js->j_tpend = 0;
	js->j_why = NULL;
	js->j_cb.yajl_null = cb_null;
	js->j_cb.yajl_boolean = cb_bool;
	js->j_cb.yajl_number = cb_number;	/* raw text: no overflow */
	js->j_cb.yajl_start_map = cb_start_map;
	js->j_cb.yajl_end_map = cb_end;
	js->j_cb.yajl_start_array = cb_start_array;
	js->j_cb.yajl_end_array = cb_end;
	js_arm(js);
	js->j_af.malloc = js_malloc;
	js->j_af.realloc = js_realloc;
	js->j_af.free = js_free;
	js->j_af.ctx = js;
	js->j_h = yajl_alloc(&js->j_cb, &js->j_af, js);
	if (js->j_h == NULL)
		fatalx("yajl_alloc");
	if (!js->j_strict)
		yajl_config(js->j_h, yajl_dont_validate_strings, 1);
	js->j_st = JSCAN_MORE;
}

struct jscan *
jscan_new(const char *const *paths, size_t n, int strict, size_t mem_max)
{
	struct jscan	*js;
	size_t		 i, k;

	if (n > JSCAN_MAXFIELDS)
		n = JSCAN_MAXFIELDS;
	js = xcalloc(1, sizeof(*js));
	js->j_n = n;
	js->j_mem_max = mem_max;
	js->j_strict = strict;
	for (i = 0; i < n; i++)
		js_compile(js, i, paths[i]);
	for (i = 0; i < n; i++)
		for (k = 0; k < n; k++)
			if (js_below(&js->j_p[i], &js->j_p[k]))
				js->j_desc[i] |= 1ULL << k;
	js_start(js);
	return js;
}

void
jscan_count_text(struct jscan *js, const char *const *keys, size_t n)
{
	js->j_tkeys = keys;
	js->j_ntkeys = n;
	js_arm(js);
}

uint64_t
jscan_text_bytes(const struct jscan *js)
{
	return js->j_tbytes;
}

void
jscan_reset(struct jscan *js)
{
	yajl_free(js->j_h);
	js->j_h = NULL;
	js_start(js);
}

static enum jscan_status
js_status(struct jscan *js, yajl_status st)
{
	if (js->j_over) {
		js->j_why = "too big to parse within the memory bound";
		return JSCAN_TOO_BIG;
	}
	if (js->j_deep) {
		js->j_why = "nested deeper than 64 levels";
		return JSCAN_TOO_DEEP;
	}
	if (st != yajl_status_ok) {
		js->j_why = "not valid JSON";
		return JSCAN_SYNTAX;
	}
	return JSCAN_MORE;
}

enum jscan_status
jscan_feed(struct jscan *js, const char *p, size_t len)
{
	yajl_status	st;

	if (js->j_st != JSCAN_MORE || len == 0)
		return js->j_st;
	st = yajl_parse(js->j_h, (const unsigned char *)p, len);
	js->j_st = js_status(js, st);
	js->j_base += len;
	return js->j_st;
}

enum jscan_status
jscan_finish(struct jscan *js)
{
	yajl_status	st;

	if (js->j_st != JSCAN_MORE)
		return js->j_st;
	st = yajl_complete_parse(js->j_h);
	js->j_st = js_status(js, st);
	if (js->j_st == JSCAN_MORE) {
		if (js->j_root_done)
			js->j_st = JSCAN_OK;
		else {
			js->j_why = "not valid JSON";
			js->j_st = JSCAN_SYNTAX;
		}
	}
	return js->j_st;
}

int
jscan_root_done(const struct jscan *js)
{
	return js->j_root_done;
}

const struct jscan_val *
jscan_get(const struct jscan *js, size_t i)
{
	return &js->j_v[i];
}

const char *
jscan_why(const struct jscan *js)
{
	return js->j_why != NULL ? js->j_why : "not valid JSON";
}

void
jscan_free(struct jscan *js)
{
	if (js == NULL)
		return;
	yajl_free(js->j_h);
	free(js);
}

int
jscan_u64(const struct jscan_val *v, uint64_t *out)
{
	uint64_t	n = 0;
	size_t		i;

	if (v->jv_type != JV_NUMBER || v->jv_len == 0 ||
	    v->jv_len >= sizeof(v->jv_text))
		return -1;
	for (i = 0; i < v->jv_len; i++) {
		if (v->jv_text[i] < '0' || v->jv_text[i] > '9')
			return -1;
		n = n > (UINT64_MAX - 9) / 10 ? UINT64_MAX :
		    n * 10 + (uint64_t)(v->jv_text[i] - '0');
	}
	*out = n;
	return 0;
}
