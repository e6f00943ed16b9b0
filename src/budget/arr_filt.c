/*
 * The budget's filter of a Gemini streamGenerateContent answer without
 * alt=sse: one JSON array of GenerateContentResponse objects, streamed
 * element by element. Like sse_filt.c for event streams: each element
 * passes whole (held until its closing brace, within a bound), the bytes
 * between elements as they come, so that a stream cut at the usd cap can
 * end between two elements with an error element and the closing bracket
 * (arr_cut_tail): the client's JSON parser ends cleanly. Pure: no I/O.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "budget/bud.h"
#include "cfg/cfg.h"
#include "util/util.h"

enum af_state {
	AF_START = 0,		/* before the opening bracket */
	AF_BETWEEN,		/* in the root array, between elements */
	AF_ELEM,		/* inside an element */
	AF_END,			/* after the closing bracket */
	AF_OFF,			/* not an array of objects: passed as is */
};

struct arr_filt {
	enum af_state	 a_state;
	char		*a_buf;		/* the element being held */
	size_t		 a_len;
	size_t		 a_cap;
	size_t		 a_max;
	unsigned	 a_depth;
	int		 a_str;		/* in a string */
	int		 a_esc;		/* after a backslash in it */
	int		 a_mid;		/* part of an element went out unheld */
	/* What the client got last, for a clean end: '[' ',' '}' (a whole
	   element), ']', 'm' (part of one), 0 (nothing); kept once emit
	   leaves bytes out (the cut). */
	char		 a_sent;
	int		 a_stopped;
};

struct arr_filt *
arr_filt_new(size_t max_elem)
{
	struct arr_filt	*f = xcalloc(1, sizeof(*f));

	f->a_max = max_elem;
	return f;
}

void
arr_filt_free(struct arr_filt *f)
{
	if (f == NULL)
		return;
	free(f->a_buf);
	free(f);
}

static void
hold(struct arr_filt *f, const char *p, size_t n)
{
	if (f->a_len + n > f->a_cap) {
		f->a_cap = f->a_len + n > f->a_cap * 2 ? f->a_len + n :
		    f->a_cap * 2;
		f->a_buf = xrealloc(f->a_buf, f->a_cap);
	}
	memcpy(f->a_buf + f->a_len, p, n);
	f->a_len += n;
}

/* Inside an element: the bytes up to its end (or all), and whether it
 * ended. */
static size_t
elem_scan(struct arr_filt *f, const char *p, size_t len, int *ended)
{
	size_t	i;
	char	ch;

	*ended = 0;
	for (i = 0; i < len; i++) {
		ch = p[i];
		if (f->a_str) {
			if (f->a_esc)
				f->a_esc = 0;
			else if (ch == '\\')
				f->a_esc = 1;
			else if (ch == '"')
				f->a_str = 0;
		} else if (ch == '"')
			f->a_str = 1;
		else if (ch == '{' || ch == '[')
			f->a_depth++;
		else if ((ch == '}' || ch == ']') && --f->a_depth == 0) {
			*ended = 1;
			return i + 1;
		}
	}
	return len;
}

static int
is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

/* Hand a piece on; <kind> is what it leaves the client at (0: the last
 * byte that is not space). */
static void
out(struct arr_filt *f, int (*emit)(void *, const char *, size_t, int),
    void *arg, const char *p, size_t n, int whole, char kind)
{
	size_t	i;

	if (emit(arg, p, n, whole) == 0 || f->a_stopped) {
		f->a_stopped = 1;
		return;
	}
	if (kind == 0)
		for (i = n; i > 0 && kind == 0; i--)
			if (!is_space(p[i - 1]))
				kind = p[i - 1];
	if (kind != 0)
		f->a_sent = kind;
}

void
arr_filt_feed(struct arr_filt *f, const char *p, size_t len,
    int (*emit)(void *, const char *, size_t, int), void *arg)
{
	size_t	i = 0, from, n;
	int	ended;

	while (i < len) {
		switch (f->a_state) {
		case AF_OFF:
		case AF_END:
			out(f, emit, arg, p + i, len - i, 0,
			    f->a_state == AF_OFF ? 'm' : 0);
			return;
		case AF_START:
		case AF_BETWEEN:
			/* separators pass as they come, up to an element */
			for (from = i; i < len && p[i] != '{'; i++) {
				if (is_space(p[i]))
					continue;
				if (f->a_state == AF_START && p[i] == '[')
					f->a_state = AF_BETWEEN;
				else if (f->a_state == AF_BETWEEN &&
				    p[i] == ',')
					;
				else if (f->a_state == AF_BETWEEN &&
				    p[i] == ']')
					f->a_state = AF_END;
				else
					f->a_state = AF_OFF;
				if (f->a_state == AF_END ||
				    f->a_state == AF_OFF) {
					i++;
					break;
				}
			}
			if (i > from)
				out(f, emit, arg, p + from, i - from, 0,
				    f->a_state == AF_OFF ? 'm' : 0);
			if (i < len && p[i] == '{' && f->a_state == AF_BETWEEN) {
				f->a_state = AF_ELEM;
				f->a_depth = 0;
				f->a_str = f->a_esc = 0;
				f->a_mid = 0;
			} else if (i < len && p[i] == '{')
				f->a_state = AF_OFF;	/* a plain object */
			break;
		case AF_ELEM:
			n = elem_scan(f, p + i, len - i, &ended);
			if (!f->a_mid && f->a_len + n > f->a_max) {
				/* too long to hold: it goes on as it comes */
				if (f->a_len > 0)
					out(f, emit, arg, f->a_buf, f->a_len,
					    0, 'm');
				f->a_len = 0;
				f->a_mid = 1;
			}
			if (f->a_mid)
				out(f, emit, arg, p + i, n, 0, 'm');
			else
				hold(f, p + i, n);
			i += n;
			if (!ended)
				break;
			if (!f->a_mid)
				out(f, emit, arg, f->a_buf, f->a_len, 1, '}');
			f->a_len = 0;
			f->a_mid = 0;
			f->a_state = AF_BETWEEN;
			break;
		}
	}
}

void
arr_filt_flush(struct arr_filt *f, int (*emit)(void *, const char *, size_t,
    int), void *arg)
{
	/* an element the body ended inside: not whole */
	if (f->a_len > 0)
		out(f, emit, arg, f->a_buf, f->a_len, 0, 'm');
	f->a_len = 0;
}

int
arr_filt_at_boundary(const struct arr_filt *f)
{
	/* the client is inside the root array, between elements */
	return f->a_sent == '[' || f->a_sent == ',' || f->a_sent == '}';
}

/*
 * The end of an array cut at the usd cap: Gemini's error object as one
 * more element (what Google's REST streams carry when a stream fails
 * after it began), then the closing bracket. Into <dst>, NUL-terminated.
 */
void
arr_cut_tail(const struct arr_filt *f, const char *reason,
    const char *request_id, char *dst, size_t dstsz)
{
	json_object	*o = bud_error_body(CFG_METER_GEMINI, 402,
			    "budget_exceeded", reason, request_id);

	if (o == NULL) {
		snprintf(dst, dstsz, "%s", "");
		return;
	}
	snprintf(dst, dstsz, "%s\n%s\n]", f->a_sent == '}' ? "," : "",
	    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}
