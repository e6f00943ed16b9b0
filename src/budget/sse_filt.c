/*
 * The budget's filter of a metered event stream as it goes to the client:
 * events pass whole (a partial one is held until its blank line, within
 * a bound), so that one can be left out (the usage-only chunk airlock's
 * include_usage made the provider send) and a stream can end at an event
 * boundary with an error event of the provider's shape (a cut at the usd
 * cap). Pure: no I/O.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "budget/bud.h"
#include "budget/jscan.h"
#include "cfg/cfg.h"
#include "util/util.h"

struct sse_filt {
	char		*f_buf;		/* the event being held */
	size_t		 f_len;
	size_t		 f_cap;
	size_t		 f_max;
	int		 f_line_start;	/* just after a line end */
	int		 f_cr;		/* the last byte was CR */
	int		 f_mid;		/* part of an event went out unheld */
};

struct sse_filt *
sse_filt_new(size_t max_event)
{
	struct sse_filt	*f = xcalloc(1, sizeof(*f));

	f->f_max = max_event;
	f->f_line_start = 1;
	return f;
}

void
sse_filt_free(struct sse_filt *f)
{
	if (f == NULL)
		return;
	free(f->f_buf);
	free(f);
}

static void
hold(struct sse_filt *f, const char *p, size_t n)
{
	if (f->f_len + n > f->f_cap) {
		f->f_cap = f->f_len + n > f->f_cap * 2 ? f->f_len + n :
		    f->f_cap * 2;
		f->f_buf = xrealloc(f->f_buf, f->f_cap);
	}
	memcpy(f->f_buf + f->f_len, p, n);
	f->f_len += n;
}

size_t
sse_filt_feed(struct sse_filt *f, const char *p, size_t len,
    int (*emit)(void *, const char *, size_t, int), void *arg)
{
	size_t	i, from = 0, dropped = 0;
	int	end;

	for (i = 0; i < len; i++) {
		char	c = p[i];

		end = 0;
		if (c == '\n' && f->f_cr) {
			f->f_cr = 0;
			continue;	/* CRLF: one line end, counted at CR */
		}
		f->f_cr = c == '\r';
		if (c == '\r' || c == '\n') {
			end = f->f_line_start;
			f->f_line_start = 1;
		} else
			f->f_line_start = 0;
		if (!end)
			continue;
		/* an event ends with this byte */
		hold(f, p + from, i + 1 - from);
		from = i + 1;
		if (emit(arg, f->f_buf, f->f_len, !f->f_mid) == 0)
			dropped += f->f_len;
		f->f_len = 0;
		f->f_mid = 0;
	}
	if (from < len) {
		if (f->f_len + (len - from) > f->f_max) {
			/* too long to hold: it goes on as it comes */
			if (f->f_len > 0)
				(void)emit(arg, f->f_buf, f->f_len, 0);
			(void)emit(arg, p + from, len - from, 0);
			f->f_len = 0;
			f->f_mid = 1;
		} else
			hold(f, p + from, len - from);
	}
	return dropped;
}

void
sse_filt_flush(struct sse_filt *f, int (*emit)(void *, const char *, size_t,
    int), void *arg)
{
	if (f->f_len > 0)
		(void)emit(arg, f->f_buf, f->f_len, !f->f_mid);
	f->f_len = 0;
}

int
sse_filt_at_boundary(const struct sse_filt *f)
{
	return !f->f_mid;
}

/*
 * Is <ev> the usage-only chunk of an OpenAI stream: one data line of a
 * JSON object whose "choices" is an empty array and that has "usage"?
 */
int
sse_usage_only(const char *ev, size_t len)
{
	static const char *const paths[] = { "", "choices", "usage" };
	struct jscan		*js;
	const struct jscan_val	*c;
	const char		*d, *end = ev + len;
	size_t			 i;
	int			 ok = 0;

	/* the LF of a CRLF that ended the event before may lead */
	while (len > 0 && (*ev == '\n' || *ev == '\r')) {
		ev++;
		len--;
	}
	/* the data line: "data:" [" "] JSON; a stream event has one */
	if (len < 6 || strncmp(ev, "data:", 5) != 0)
		return 0;
	d = ev + 5;
	if (d < end && *d == ' ')
		d++;
	js = jscan_new(paths, 3, 0, 64 * 1024);
	if (jscan_feed(js, d, (size_t)(end - d)) == JSCAN_MORE &&
	    jscan_finish(js) == JSCAN_OK &&
	    jscan_get(js, 0)->jv_type == JV_OBJECT &&
	    jscan_get(js, 2)->jv_type == JV_OBJECT &&
	    (c = jscan_get(js, 1))->jv_type == JV_ARRAY) {
		/* the array's bytes after its key: ':' '[' ']', spaces */
		ok = 1;
		for (i = c->jv_key_end; i < c->jv_val_end; i++) {
			char	ch = d[i];

			if (ch != ':' && ch != '[' && ch != ']' && ch != ' ' &&
			    ch != '\t')
				ok = 0;
		}
	}
	jscan_free(js);
	return ok;
}

/*
 * The event that ends a stream cut at the usd cap, as the provider would
 * send an error mid-stream (the SDKs raise it): OpenAI a data chunk with
 * an error object, then [DONE]; Anthropic an "error" event; Gemini a data
 * chunk with its error object. Into <dst>, NUL-terminated.
 */
void
sse_cut_event(int meter, const char *reason, const char *request_id,
    char *dst, size_t dstsz)
{
	json_object	*o = bud_error_body(meter, 402, "budget_exceeded",
			    reason, request_id);
	const char	*s;

	if (o == NULL) {
		snprintf(dst, dstsz, "%s", "");
		return;
	}
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	if (meter == CFG_METER_ANTHROPIC)
		snprintf(dst, dstsz, "event: error\ndata: %s\n\n", s);
	else if (meter == CFG_METER_OPENAI)
		snprintf(dst, dstsz, "data: %s\n\ndata: [DONE]\n\n", s);
	else
		snprintf(dst, dstsz, "data: %s\n\n", s);
	json_object_put(o);
}
