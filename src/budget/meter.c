/*
 * Usage metering: extract the token usage a provider reports from a
 * response body fed in arbitrary pieces. Pure: no I/O, no globals.
 *
 * JSON bodies stream through jscan (yajl, no tree: only the usage keys
 * are kept); SSE bodies are cut into events by a small byte-level state
 * machine (so a split at any byte, CR/LF included, is harmless) and each
 * event's data streams through jscan on its own, nothing held. Every
 * buffer is bounded; anything unexpected just yields no usage.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/bud.h"
#include "budget/decode.h"
#include "budget/jscan.h"
#include "util/util.h"

#define METER_JSON_DEFAULT	(16 * 1024 * 1024)
/* Floor of the SSE event bound. */
#define METER_EVENT_MIN		(1024 * 1024)
/*
 * What the parser may allocate for one document or event: a token split
 * across feeds is held whole, so one string of up to about 256 KiB is
 * read; a longer one gives the document up (no usage: the reservation is
 * charged). Peak: about twice this while a buffer doubles.
 */
#define METER_MEM		(512 * 1024)
/* The only field name we want is "data" (a BOM may lead the first). */
#define METER_NAME_MAX		16

enum sse_state {
	SSE_NAME = 0,		/* reading a field name */
	SSE_DATA,		/* reading a "data" value */
	SSE_SKIP,		/* rest of a line we ignore */
};

/* A JSON array of objects (Gemini's streamGenerateContent without
 * alt=sse): where the splitter is. */
enum arr_state {
	ARR_START = 0,		/* before the first byte that is not space */
	ARR_BETWEEN,		/* inside the root array, between elements */
	ARR_ELEM,		/* inside an element */
	ARR_OFF,		/* not an array: a plain JSON body */
	ARR_END,		/* after the closing bracket */
};

/* One token count as reported: absent, or a value. */
struct tok_field {
	int		tf_set;
	uint64_t	tf_val;
};

struct meter {
	enum meter_dialect m_dialect;
	int		 m_sse;
	int		 m_dead;	/* gave up: no usage */
	int		 m_finished;
	struct jscan	*m_js;		/* body, or each SSE event */

	/* JSON body */
	size_t		 m_json_max;
	size_t		 m_json_len;
	int		 m_json_done;	/* root seen: rest ignored */

	/* SSE */
	enum sse_state	 m_state;
	int		 m_cr;		/* last line ended with CR */
	int		 m_first_line;	/* a BOM may lead it */
	int		 m_skip_space;	/* just after "data:" */
	char		 m_name[METER_NAME_MAX];
	size_t		 m_name_len;
	int		 m_name_over;
	size_t		 m_ev_len;	/* data bytes of this event */
	size_t		 m_ev_max;
	size_t		 m_ev_lines;
	int		 m_ev_over;	/* too big: skip this event */

	/* Content coding: decoded for our reading only. */
	struct decoder	*m_dec;
	int		 m_dec_bad;	/* undecodable: report nothing */

	/* Gemini's JSON array of responses, split into elements. */
	enum arr_state	 m_arr;
	unsigned	 m_arr_depth;	/* nesting inside the element */
	int		 m_arr_str;	/* in a string */
	int		 m_arr_esc;	/* after a backslash in a string */

	/* What was seen so far. */
	char		 m_model[sizeof(((struct usage *)0)->u_model)];
	int		 m_found;
	struct tok_field m_in;		/* prompt / input tokens */
	struct tok_field m_out;
	struct tok_field m_cached;	/* cache reads */
	struct tok_field m_cwrite;	/* cache creation */
	struct tok_field m_thoughts;	/* Gemini: billed as output */
	struct tok_field m_tool_in;	/* Gemini: tool-use prompt tokens */
	/* Is the last report the whole bill? (meter_finish) */
	uint64_t	 m_text_at;	/* text bytes when it was taken */
	int		 m_a_start;	/* Anthropic: message_start's only */
	int		 m_took;	/* this document reported usage */
};

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- what we look for ----------------------------------------------- */

/* OpenAI: one group at the root, one under "response" (Responses API
 * stream events wrap the response object). */
enum {
	O_MODEL = 0,
	O_USAGE,
	O_PT,		/* prompt_tokens */
	O_CT,		/* completion_tokens */
	O_IT,		/* input_tokens */
	O_OT,		/* output_tokens */
	O_PTD,		/* prompt_tokens_details */
	O_PTD_C,
	O_PTD_W,
	O_ITD,		/* input_tokens_details */
	O_ITD_C,
	O_ITD_W,
	O_GROUP,	/* fields per group */
	O_RESPONSE = 2 * O_GROUP,
	O_LL_EVAL,	/* tokens_evaluated: the whole prompt */
	O_LL_PRED,	/* tokens_predicted */
	O_LL_TIMINGS,
	O_LL_PN,	/* timings.prompt_n: prompt tokens not cached */
	O_LL_DN,	/* timings.predicted_n */
	O_LL_CN,	/* timings.cache_n: prompt tokens from the cache */
	O_COUNT,
};

static const char *const openai_paths[O_COUNT] = {
	"model", "usage", "usage.prompt_tokens", "usage.completion_tokens",
	"usage.input_tokens", "usage.output_tokens",
	"usage.prompt_tokens_details",
	"usage.prompt_tokens_details.cached_tokens",
	"usage.prompt_tokens_details.cache_write_tokens",
	"usage.input_tokens_details",
	"usage.input_tokens_details.cached_tokens",
	"usage.input_tokens_details.cache_write_tokens",
	"response.model", "response.usage", "response.usage.prompt_tokens",
	"response.usage.completion_tokens", "response.usage.input_tokens",
	"response.usage.output_tokens",
	"response.usage.prompt_tokens_details",
	"response.usage.prompt_tokens_details.cached_tokens",
	"response.usage.prompt_tokens_details.cache_write_tokens",
	"response.usage.input_tokens_details",
	"response.usage.input_tokens_details.cached_tokens",
	"response.usage.input_tokens_details.cache_write_tokens",
	"response",
	/* llama.cpp's own /completion (no "usage"): its counts */
	"tokens_evaluated", "tokens_predicted", "timings", "timings.prompt_n",
	"timings.predicted_n", "timings.cache_n",
};

/* Anthropic: the root (messages, message_delta) and "message"
 * (message_start). */
enum {
	A_MODEL = 0,
	A_USAGE,
	A_IN,		/* input_tokens */
	A_OUT,		/* output_tokens */
	A_CREAD,	/* cache_read_input_tokens */
	A_CWRITE,	/* cache_creation_input_tokens */
	A_GROUP,
	A_TYPE = 2 * A_GROUP,
	A_MESSAGE,
	A_COUNT,
};

static const char *const anthropic_paths[A_COUNT] = {
	"model", "usage", "usage.input_tokens", "usage.output_tokens",
	"usage.cache_read_input_tokens", "usage.cache_creation_input_tokens",
	"message.model", "message.usage", "message.usage.input_tokens",
	"message.usage.output_tokens",
	"message.usage.cache_read_input_tokens",
	"message.usage.cache_creation_input_tokens",
	"type", "message",
};

/* Gemini: GenerateContentResponse, whole or one of a stream's chunks
 * (each carries the usage so far; the last one the totals). */
enum {
	G_MODEL = 0,	/* modelVersion */
	G_USAGE,
	G_PROMPT,
	G_CANDIDATES,
	G_CACHED,
	G_THOUGHTS,
	G_TOOL,
	G_COUNT,
};

static const char *const gemini_paths[G_COUNT] = {
	"modelVersion", "usageMetadata", "usageMetadata.promptTokenCount",
	"usageMetadata.candidatesTokenCount",
	"usageMetadata.cachedContentTokenCount",
	"usageMetadata.thoughtsTokenCount",
	"usageMetadata.toolUsePromptTokenCount",
};

/*
 * A token count: a non-negative JSON integer. Anything else (null, a
 * string, a float, a negative number) counts as absent.
 */
static void
take_count(struct tok_field *f, const struct jscan *js, size_t i)
{
	uint64_t	v;

	if (jscan_u64(jscan_get(js, i), &v) == 0) {
		f->tf_set = 1;
		f->tf_val = v;
	}
}

static int
is_obj(const struct jscan *js, size_t i)
{
	return jscan_get(js, i)->jv_type == JV_OBJECT;
}

/* Keep the model name, made safe for logs and the audit. */
static void
take_model(struct meter *m, const struct jscan *js, size_t i)
{
	const struct jscan_val	*v = jscan_get(js, i);

	if (v->jv_type != JV_STRING || v->jv_len == 0)
		return;
	bud_model_copy(m->m_model, sizeof(m->m_model), v->jv_text,
	    v->jv_len < JSCAN_TEXT - 1 ? v->jv_len : JSCAN_TEXT - 1);
}

/*
 * OpenAI "usage": chat/completions/embeddings (prompt_tokens,
 * completion_tokens, prompt_tokens_details) or the Responses API
 * (input_tokens, output_tokens, input_tokens_details). A later report
 * replaces an earlier one: streams that repeat usage send totals.
 */
static void
openai_usage(struct meter *m, const struct jscan *js, size_t g)
{
	struct tok_field	in = { 0, 0 }, out = { 0, 0 };
	struct tok_field	cached = { 0, 0 }, cwrite = { 0, 0 };

	if (!is_obj(js, g + O_USAGE))
		return;
	take_count(&in, js, g + O_PT);
	if (!in.tf_set)
		take_count(&in, js, g + O_IT);
	take_count(&out, js, g + O_CT);
	if (!out.tf_set)
		take_count(&out, js, g + O_OT);
	if (is_obj(js, g + O_PTD)) {
		take_count(&cached, js, g + O_PTD_C);
		take_count(&cwrite, js, g + O_PTD_W);
	} else if (is_obj(js, g + O_ITD)) {
		take_count(&cached, js, g + O_ITD_C);
		take_count(&cwrite, js, g + O_ITD_W);
	}
	if (!in.tf_set && !out.tf_set)
		return;
	m->m_found = m->m_took = 1;
	m->m_in = in;
	m->m_out = out;
	m->m_cached = cached;
	m->m_cwrite = cwrite;
}

/*
 * llama.cpp's native /completion reports no "usage" but its own counts
 * of what it evaluated and predicted (the final stream event, or the
 * body): tokens_evaluated / tokens_predicted, else timings (prompt_n
 * excludes the cache_n tokens it reused). Those are what it billed.
 */
static void
llama_counts(struct meter *m, const struct jscan *js)
{
	struct tok_field	in = { 0, 0 }, out = { 0, 0 };
	struct tok_field	cached = { 0, 0 };

	take_count(&in, js, O_LL_EVAL);
	take_count(&out, js, O_LL_PRED);
	if (!in.tf_set && !out.tf_set && is_obj(js, O_LL_TIMINGS)) {
		take_count(&in, js, O_LL_PN);
		take_count(&out, js, O_LL_DN);
		take_count(&cached, js, O_LL_CN);
		in.tf_val = sat_add(in.tf_val, cached.tf_val);
	}
	if (!in.tf_set || !out.tf_set)
		return;		/* half a bill is not the bill */
	m->m_found = m->m_took = 1;
	m->m_in = in;
	m->m_out = out;
	m->m_cached = cached;
	m->m_cwrite.tf_set = 0;
	m->m_cwrite.tf_val = 0;
}

/* One OpenAI object: a whole JSON body or one SSE event. */
static void
openai_object(struct meter *m, const struct jscan *js)
{
	size_t	g = is_obj(js, O_RESPONSE) ? O_GROUP : 0;

	take_model(m, js, g + O_MODEL);
	if (is_obj(js, g + O_USAGE))
		openai_usage(m, js, g);
	else if (g == 0)
		llama_counts(m, js);
}

/*
 * Anthropic "usage": each field present (and non-null) replaces what an
 * earlier event said; output_tokens is cumulative, so the last one wins.
 */
static void
anthropic_usage(struct meter *m, const struct jscan *js, size_t g)
{
	if (!is_obj(js, g + A_USAGE))
		return;
	take_count(&m->m_in, js, g + A_IN);
	take_count(&m->m_out, js, g + A_OUT);
	take_count(&m->m_cached, js, g + A_CREAD);
	take_count(&m->m_cwrite, js, g + A_CWRITE);
	m->m_found = m->m_in.tf_set || m->m_out.tf_set ||
	    m->m_cached.tf_set || m->m_cwrite.tf_set;
	m->m_took = m->m_found;
}

/*
 * Gemini usageMetadata: promptTokenCount includes the cached tokens;
 * thoughts are billed as output, tool-use prompt tokens as input. Each
 * chunk reports the totals so far: the last report wins, field by field
 * replaced together.
 */
static void
gemini_object(struct meter *m, const struct jscan *js)
{
	struct tok_field	in = { 0, 0 }, out = { 0, 0 };
	struct tok_field	cached = { 0, 0 }, thoughts = { 0, 0 };
	struct tok_field	tool = { 0, 0 };

	take_model(m, js, G_MODEL);
	if (!is_obj(js, G_USAGE))
		return;
	take_count(&in, js, G_PROMPT);
	take_count(&out, js, G_CANDIDATES);
	take_count(&cached, js, G_CACHED);
	take_count(&thoughts, js, G_THOUGHTS);
	take_count(&tool, js, G_TOOL);
	if (!in.tf_set && !out.tf_set && !thoughts.tf_set)
		return;
	m->m_found = m->m_took = 1;
	m->m_in = in;
	m->m_out = out;
	m->m_cached = cached;
	m->m_thoughts = thoughts;
	m->m_tool_in = tool;
}

static int
type_is(const struct jscan_val *t, const char *s)
{
	return t->jv_type == JV_STRING && t->jv_len == strlen(s) &&
	    memcmp(t->jv_text, s, t->jv_len) == 0;
}

static void
anthropic_object(struct meter *m, const struct jscan *js)
{
	const struct jscan_val	*t = jscan_get(js, A_TYPE);

	if (type_is(t, "message_start")) {
		if (!is_obj(js, A_MESSAGE))
			return;
		take_model(m, js, A_GROUP + A_MODEL);
		anthropic_usage(m, js, A_GROUP);
		/* its output_tokens is a placeholder: message_delta's is the
		   count */
		m->m_a_start = m->m_found;
	} else if (type_is(t, "message_delta")) {
		anthropic_usage(m, js, 0);
		if (m->m_found && is_obj(js, A_USAGE))
			m->m_a_start = 0;
	}
	else if (t->jv_type != JV_STRING || type_is(t, "message")) {
		/* A whole Messages response (errors have type "error"). */
		take_model(m, js, A_MODEL);
		anthropic_usage(m, js, 0);
	}
}

static void handle_report(struct meter *);

/*
 * A whole document was read into m_js: take what it reports. Text
 * streamed up to a report is in its counts; text after the last one is
 * not (meter_finish).
 */
static void
handle_object(struct meter *m)
{
	m->m_took = 0;
	handle_report(m);
	if (m->m_took)
		m->m_text_at = jscan_text_bytes(m->m_js);
}

static void
handle_report(struct meter *m)
{
	switch (m->m_dialect) {
	case METER_OPENAI:
		openai_object(m, m->m_js);
		break;
	case METER_ANTHROPIC:
		anthropic_object(m, m->m_js);
		break;
	case METER_GEMINI:
		gemini_object(m, m->m_js);
		break;
	default:
		break;
	}
}

/* ---- JSON bodies ---------------------------------------------------- */

static void
json_feed(struct meter *m, const char *p, size_t len)
{
	enum jscan_status	st;
	size_t			n, room;

	if (m->m_json_done)
		return;
	room = m->m_json_max - m->m_json_len;
	while (len > 0) {
		if (room == 0) {
			/* Over the bound before the document ended. */
			m->m_dead = 1;
			return;
		}
		n = len > 65536 ? 65536 : len;
		if (n > room)
			n = room;
		st = jscan_feed(m->m_js, p, n);
		if (jscan_root_done(m->m_js)) {
			/* what follows the document does not matter */
			handle_object(m);
			m->m_json_done = 1;
			return;
		}
		if (st != JSCAN_MORE) {
			m->m_dead = 1;
			return;
		}
		m->m_json_len += n;
		room -= n;
		p += n;
		len -= n;
	}
}

/*
 * Gemini answers streamGenerateContent (without alt=sse) with one JSON
 * array of response objects, usage in each. jscan does not descend into
 * arrays: the elements are cut apart here, by brackets outside strings,
 * and each one is read by jscan on its own, like an SSE event (same
 * bound); yajl still checks each element's syntax.
 */
static void
arr_elem_end(struct meter *m)
{
	if (!m->m_ev_over &&
	    (jscan_finish(m->m_js) == JSCAN_OK || jscan_root_done(m->m_js)))
		handle_object(m);
	jscan_reset(m->m_js);
	m->m_ev_len = 0;
	m->m_ev_over = 0;
	m->m_arr = ARR_BETWEEN;
}

static void ev_append(struct meter *, const char *, size_t);

/* Inside an element: find where it ends. */
static size_t
arr_scan_elem(struct meter *m, const char *p, size_t len)
{
	size_t	i;
	char	ch;

	for (i = 0; i < len; i++) {
		ch = p[i];
		if (m->m_arr_str) {
			if (m->m_arr_esc)
				m->m_arr_esc = 0;
			else if (ch == '\\')
				m->m_arr_esc = 1;
			else if (ch == '"')
				m->m_arr_str = 0;
		} else if (ch == '"')
			m->m_arr_str = 1;
		else if (ch == '{' || ch == '[')
			m->m_arr_depth++;
		else if ((ch == '}' || ch == ']') && --m->m_arr_depth == 0) {
			ev_append(m, p, i + 1);
			arr_elem_end(m);
			return i + 1;
		}
	}
	ev_append(m, p, len);
	return len;
}

static void
arr_feed(struct meter *m, const char *p, size_t len)
{
	size_t	i = 0;
	char	ch;

	while (i < len && !m->m_dead) {
		ch = p[i];
		switch (m->m_arr) {
		case ARR_START:
		case ARR_BETWEEN:
		case ARR_END:
			if (ch == ' ' || ch == '\t' || ch == '\r' ||
			    ch == '\n') {
				i++;
				break;
			}
			if (m->m_arr == ARR_START && ch == '[') {
				m->m_arr = ARR_BETWEEN;
				i++;
			} else if (m->m_arr == ARR_BETWEEN && ch == ',')
				i++;
			else if (m->m_arr == ARR_BETWEEN && ch == ']') {
				m->m_arr = ARR_END;
				i++;
			} else if (m->m_arr == ARR_BETWEEN && ch == '{') {
				m->m_arr = ARR_ELEM;
				m->m_arr_depth = 0;
				m->m_arr_str = m->m_arr_esc = 0;
			} else
				m->m_dead = 1;	/* not an array of objects */
			break;
		case ARR_ELEM:
			i += arr_scan_elem(m, p + i, len - i);
			break;
		case ARR_OFF:
			return;
		}
	}
}

/* Gemini: a body that starts with '[' is an array of responses. */
static void
body_feed(struct meter *m, const char *p, size_t len)
{
	size_t	i;

	if (m->m_dialect == METER_GEMINI && m->m_arr == ARR_START) {
		for (i = 0; i < len && (p[i] == ' ' || p[i] == '\t' ||
		    p[i] == '\r' || p[i] == '\n'); i++)
			;
		if (i < len)
			m->m_arr = p[i] == '[' ? ARR_START : ARR_OFF;
		if (i == len || p[i] == '[') {
			m->m_json_len += len;
			if (m->m_json_len > m->m_json_max)
				m->m_dead = 1;
			else
				arr_feed(m, p, len);
			return;
		}
	}
	if (m->m_arr != ARR_OFF && m->m_arr != ARR_START) {
		/* the whole array is bounded like a JSON body */
		m->m_json_len += len;
		if (m->m_json_len > m->m_json_max)
			m->m_dead = 1;
		else
			arr_feed(m, p, len);
		return;
	}
	json_feed(m, p, len);
}

/* ---- SSE ------------------------------------------------------------ */

static void
sse_dispatch(struct meter *m)
{
	if (m->m_ev_lines > 0 && !m->m_ev_over &&
	    (jscan_finish(m->m_js) == JSCAN_OK || jscan_root_done(m->m_js)))
		handle_object(m);	/* "[DONE]" and the like: not JSON */
	jscan_reset(m->m_js);
	m->m_ev_len = 0;
	m->m_ev_lines = 0;
	m->m_ev_over = 0;
}

/* Event data goes straight to the parser; nothing is held. */
static void
ev_append(struct meter *m, const char *p, size_t len)
{
	if (m->m_ev_over || len == 0)
		return;
	if (len > m->m_ev_max - m->m_ev_len) {
		m->m_ev_over = 1;
		return;
	}
	m->m_ev_len += len;
	if (jscan_feed(m->m_js, p, len) != JSCAN_MORE &&
	    !jscan_root_done(m->m_js))
		m->m_ev_over = 1;	/* skip the rest of this event */
}

/* The field name ended (at ':' or at the end of the line). */
static int
sse_is_data(struct meter *m)
{
	const char	*n = m->m_name;
	size_t		 len = m->m_name_len;

	if (m->m_name_over)
		return 0;
	if (m->m_first_line && len >= 3 && memcmp(n, "\xef\xbb\xbf", 3) == 0) {
		n += 3;
		len -= 3;
	}
	return len == 4 && memcmp(n, "data", 4) == 0;
}

static void
sse_data_line(struct meter *m)
{
	if (m->m_ev_lines++ > 0)
		ev_append(m, "\n", 1);
}

/* The current line ended. */
static void
sse_eol(struct meter *m)
{
	if (m->m_state == SSE_NAME) {
		if (m->m_name_len == 0 && !m->m_name_over)
			sse_dispatch(m);
		else if (sse_is_data(m))
			sse_data_line(m);	/* "data" alone: empty line */
	}
	m->m_state = SSE_NAME;
	m->m_name_len = 0;
	m->m_name_over = 0;
	m->m_skip_space = 0;
	m->m_first_line = 0;
}

static void
sse_feed(struct meter *m, const char *p, size_t len)
{
	size_t	i, n;
	char	ch;

	i = 0;
	while (i < len) {
		ch = p[i];
		if (m->m_cr) {
			/* CRLF is one line end, even split across feeds. */
			m->m_cr = 0;
			if (ch == '\n') {
				i++;
				continue;
			}
		}
		if (ch == '\r' || ch == '\n') {
			m->m_cr = ch == '\r';
			sse_eol(m);
			i++;
			continue;
		}
		switch (m->m_state) {
		case SSE_NAME:
			i++;
			if (ch == ':') {
				m->m_state = sse_is_data(m) ? SSE_DATA :
				    SSE_SKIP;
				if (m->m_state == SSE_DATA) {
					sse_data_line(m);
					m->m_skip_space = 1;
				}
			} else if (m->m_name_len < sizeof(m->m_name))
				m->m_name[m->m_name_len++] = ch;
			else
				m->m_name_over = 1;
			break;
		case SSE_DATA:
			if (m->m_skip_space) {
				/* One space after the colon is not data. */
				m->m_skip_space = 0;
				if (ch == ' ') {
					i++;
					continue;
				}
			}
			for (n = i; n < len && p[n] != '\r' && p[n] != '\n';
			    n++)
				;
			ev_append(m, p + i, n - i);
			i = n;
			break;
		case SSE_SKIP:
			for (n = i; n < len && p[n] != '\r' && p[n] != '\n';
			    n++)
				;
			i = n;
			break;
		}
	}
}

/* ---- interface ------------------------------------------------------ */

struct meter *
meter_new(enum meter_dialect dialect, int sse, size_t max_json)
{
	struct meter	*m;

	m = xcalloc(1, sizeof(*m));
	m->m_dialect = dialect;
	m->m_sse = sse;
	m->m_json_max = max_json != 0 ? max_json : METER_JSON_DEFAULT;
	/*
	 * An SSE event can hold a whole response (the Responses API's
	 * response.completed does): allow the JSON bound, at least 1 MiB.
	 */
	m->m_ev_max = m->m_json_max > METER_EVENT_MIN ? m->m_json_max :
	    METER_EVENT_MIN;
	m->m_first_line = 1;
	/* One tokener serves the body or, reset, each SSE event. */
	switch (dialect) {
	case METER_OPENAI:
		m->m_js = jscan_new(openai_paths, O_COUNT, 0, METER_MEM);
		break;
	case METER_ANTHROPIC:
		m->m_js = jscan_new(anthropic_paths, A_COUNT, 0, METER_MEM);
		break;
	case METER_GEMINI:
		m->m_js = jscan_new(gemini_paths, G_COUNT, 0, METER_MEM);
		break;
	default:
		m->m_dead = 1;
		break;
	}
	/* streamed text tells a stale report (meter_finish) */
	if (sse || dialect == METER_GEMINI)
		meter_count_text(m);
	return m;
}

/* Decoded (or identity) body bytes. */
static void
meter_take(void *arg, const char *p, size_t len)
{
	struct meter	*m = arg;

	if (m->m_dead)
		return;
	if (m->m_sse)
		sse_feed(m, p, len);
	else
		body_feed(m, p, len);
}

int
meter_encoding(struct meter *m, const char *v, size_t len)
{
	enum dec_coding	coding = dec_coding_parse(v, len);

	if (m == NULL || m->m_dec != NULL)
		return -1;
	if (coding == DEC_IDENTITY)
		return 0;
	if (coding == DEC_UNKNOWN) {
		m->m_dec_bad = m->m_dead = 1;
		return -1;
	}
	/* a JSON body is bounded when decoded; an SSE stream by the ratio
	   (and each of its events by the event bound) */
	m->m_dec = dec_new(coding, m->m_sse ? 0 : m->m_json_max);
	return 0;
}

void
meter_feed(struct meter *m, const char *p, size_t len)
{
	if (m == NULL || p == NULL || len == 0 || m->m_dead || m->m_finished)
		return;
	if (m->m_dec == NULL) {
		meter_take(m, p, len);
		return;
	}
	if (dec_feed(m->m_dec, p, len, meter_take, m) != DEC_OK)
		m->m_dec_bad = m->m_dead = 1;
}

/* Keys whose string values are streamed text (chat deltas, Anthropic
 * text and tool-input deltas, Gemini parts, Responses API deltas). */
static const char *const text_keys[] = {
	"content", "text", "delta", "arguments", "partial_json", "refusal",
	"reasoning_content", "thinking",
};

void
meter_count_text(struct meter *m)
{
	if (m != NULL && m->m_js != NULL)
		jscan_count_text(m->m_js, text_keys,
		    sizeof(text_keys) / sizeof(text_keys[0]));
}

static void usage_of(const struct meter *, struct usage *);

int
meter_peek(const struct meter *m, struct usage *out, uint64_t *text)
{
	memset(out, 0, sizeof(*out));
	*text = 0;
	if (m == NULL || m->m_dec_bad)
		return -1;
	if (m->m_js != NULL)
		*text = jscan_text_bytes(m->m_js);
	if (m->m_found)
		usage_of(m, out);
	return 0;
}

void
meter_finish(struct meter *m, struct usage *out)
{
	memset(out, 0, sizeof(*out));
	if (m == NULL)
		return;
	/* a truncated or corrupt encoded body says nothing for sure */
	if (!m->m_finished && m->m_dec != NULL && dec_finish(m->m_dec) !=
	    DEC_OK)
		m->m_dec_bad = 1;
	if (m->m_dec_bad)
		m->m_found = 0;
	if (!m->m_finished && !m->m_dead && m->m_sse) {
		/* Be lenient with a body that ends without a blank line. */
		if (m->m_state != SSE_NAME || m->m_name_len > 0 ||
		    m->m_name_over)
			sse_eol(m);
		sse_dispatch(m);
	}
	m->m_finished = 1;
	if (!m->m_found || m->m_dec_bad)
		return;
	/*
	 * Knowable only when the last report is the whole bill: not when
	 * text streamed after it (a server that reports usage on some
	 * chunks, the last one missing), nor an Anthropic stream that never
	 * sent message_delta's output count.
	 */
	if (m->m_a_start || (m->m_js != NULL &&
	    jscan_text_bytes(m->m_js) > m->m_text_at)) {
		out->u_partial = 1;
		return;
	}
	usage_of(m, out);
}

static void
usage_of(const struct meter *m, struct usage *out)
{
	uint64_t	in, cached, cwrite;

	snprintf(out->u_model, sizeof(out->u_model), "%s", m->m_model);
	out->u_found = 1;
	out->u_output = m->m_out.tf_val;
	cached = m->m_cached.tf_val;
	cwrite = m->m_cwrite.tf_val;
	if (m->m_dialect == METER_ANTHROPIC) {
		/* input_tokens excludes both cache kinds: add them. */
		in = sat_add(sat_add(m->m_in.tf_val, cwrite), cached);
	} else if (m->m_dialect == METER_GEMINI) {
		/* the prompt count includes the cached tokens */
		in = sat_add(m->m_in.tf_val, m->m_tool_in.tf_val);
		out->u_output = sat_add(out->u_output, m->m_thoughts.tf_val);
		cwrite = 0;
		if (cached > in)
			cached = in;
	} else {
		/* prompt/input tokens already include the cached ones. */
		in = m->m_in.tf_val;
		if (cached > in)
			cached = in;
		if (cwrite > in - cached)
			cwrite = in - cached;
	}
	out->u_input = in;
	out->u_cached = cached;
	out->u_cache_write = cwrite;
}

void
meter_free(struct meter *m)
{
	if (m == NULL)
		return;
	jscan_free(m->m_js);
	dec_free(m->m_dec);
	free(m);
}
