/*
 * Usage metering: extract the token usage a provider reports from a
 * response body fed in arbitrary pieces. Pure: no I/O, no globals.
 *
 * JSON bodies go through json-c's incremental tokener; SSE bodies are cut
 * into events by a small byte-level state machine (so a split at any byte,
 * CR/LF included, is harmless) and each event's data is parsed on its own.
 * Every buffer is bounded; anything unexpected just yields no usage.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "budget/bud.h"
#include "util/util.h"

#define METER_JSON_DEFAULT	(16 * 1024 * 1024)
/* Floor of the SSE event bound. */
#define METER_EVENT_MIN		(1024 * 1024)
/* json-c nesting limit. */
#define METER_DEPTH		64
/* The only field name we want is "data" (a BOM may lead the first). */
#define METER_NAME_MAX		16

enum sse_state {
	SSE_NAME = 0,		/* reading a field name */
	SSE_DATA,		/* reading a "data" value */
	SSE_SKIP,		/* rest of a line we ignore */
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
	json_tokener	*m_tok;		/* body, or each SSE event */

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
	char		*m_ev;		/* joined data lines */
	size_t		 m_ev_len;
	size_t		 m_ev_cap;
	size_t		 m_ev_max;
	size_t		 m_ev_lines;
	int		 m_ev_over;	/* too big: skip this event */

	/* What was seen so far. */
	char		 m_model[sizeof(((struct usage *)0)->u_model)];
	int		 m_found;
	struct tok_field m_in;		/* prompt / input tokens */
	struct tok_field m_out;
	struct tok_field m_cached;	/* cache reads */
	struct tok_field m_cwrite;	/* cache creation */
};

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/*
 * A token count: a non-negative JSON integer. Anything else (null, a
 * string, a float, a negative number) counts as absent.
 */
static int
get_count(json_object *parent, const char *key, uint64_t *out)
{
	json_object	*o;
	int64_t		 v;

	if (parent == NULL || !json_object_is_type(parent, json_type_object) ||
	    !json_object_object_get_ex(parent, key, &o) ||
	    !json_object_is_type(o, json_type_int))
		return 0;
	v = json_object_get_int64(o);
	if (v < 0)
		return 0;
	/* json-c keeps values above INT64_MAX as uint64; get them whole. */
	*out = v == INT64_MAX ? json_object_get_uint64(o) : (uint64_t)v;
	return 1;
}

static void
take_count(struct tok_field *f, json_object *parent, const char *key)
{
	uint64_t	v;

	if (get_count(parent, key, &v)) {
		f->tf_set = 1;
		f->tf_val = v;
	}
}

static json_object *
get_obj(json_object *parent, const char *key)
{
	json_object	*o;

	if (parent == NULL || !json_object_is_type(parent, json_type_object) ||
	    !json_object_object_get_ex(parent, key, &o) ||
	    !json_object_is_type(o, json_type_object))
		return NULL;
	return o;
}

static const char *
get_str(json_object *parent, const char *key)
{
	json_object	*o;

	if (parent == NULL || !json_object_is_type(parent, json_type_object) ||
	    !json_object_object_get_ex(parent, key, &o) ||
	    !json_object_is_type(o, json_type_string))
		return NULL;
	return json_object_get_string(o);
}

/*
 * Keep the model name, made safe for logs and the audit: control bytes
 * become '?', and a truncation never ends inside a UTF-8 sequence.
 */
static void
take_model(struct meter *m, json_object *parent)
{
	const char	*s;
	size_t		 i, n;

	if ((s = get_str(parent, "model")) == NULL || *s == '\0')
		return;
	n = strlen(s);
	if (n >= sizeof(m->m_model)) {
		n = sizeof(m->m_model) - 1;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	for (i = 0; i < n; i++) {
		unsigned char	ch = (unsigned char)s[i];

		m->m_model[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	m->m_model[n] = '\0';
}

/*
 * OpenAI "usage": chat/completions/embeddings (prompt_tokens,
 * completion_tokens, prompt_tokens_details) or the Responses API
 * (input_tokens, output_tokens, input_tokens_details). A later report
 * replaces an earlier one: streams that repeat usage send totals.
 */
static void
openai_usage(struct meter *m, json_object *u)
{
	struct tok_field	in = { 0, 0 }, out = { 0, 0 };
	struct tok_field	cached = { 0, 0 }, cwrite = { 0, 0 };
	json_object		*d;

	if (u == NULL)
		return;
	take_count(&in, u, "prompt_tokens");
	if (!in.tf_set)
		take_count(&in, u, "input_tokens");
	take_count(&out, u, "completion_tokens");
	if (!out.tf_set)
		take_count(&out, u, "output_tokens");
	if ((d = get_obj(u, "prompt_tokens_details")) == NULL)
		d = get_obj(u, "input_tokens_details");
	take_count(&cached, d, "cached_tokens");
	take_count(&cwrite, d, "cache_write_tokens");
	if (!in.tf_set && !out.tf_set)
		return;
	m->m_found = 1;
	m->m_in = in;
	m->m_out = out;
	m->m_cached = cached;
	m->m_cwrite = cwrite;
}

/* One OpenAI object: a whole JSON body or one SSE event. */
static void
openai_object(struct meter *m, json_object *root)
{
	json_object	*r;

	/* Responses API stream events wrap the response object. */
	if ((r = get_obj(root, "response")) != NULL) {
		take_model(m, r);
		openai_usage(m, get_obj(r, "usage"));
		return;
	}
	take_model(m, root);
	openai_usage(m, get_obj(root, "usage"));
}

/*
 * Anthropic "usage": each field present (and non-null) replaces what an
 * earlier event said; output_tokens is cumulative, so the last one wins.
 */
static void
anthropic_usage(struct meter *m, json_object *u)
{
	if (u == NULL)
		return;
	take_count(&m->m_in, u, "input_tokens");
	take_count(&m->m_out, u, "output_tokens");
	take_count(&m->m_cached, u, "cache_read_input_tokens");
	take_count(&m->m_cwrite, u, "cache_creation_input_tokens");
	m->m_found = m->m_in.tf_set || m->m_out.tf_set ||
	    m->m_cached.tf_set || m->m_cwrite.tf_set;
}

static void
anthropic_object(struct meter *m, json_object *root)
{
	const char	*type;
	json_object	*msg;

	type = get_str(root, "type");
	if (type != NULL && strcmp(type, "message_start") == 0) {
		msg = get_obj(root, "message");
		take_model(m, msg);
		anthropic_usage(m, get_obj(msg, "usage"));
	} else if (type != NULL && strcmp(type, "message_delta") == 0)
		anthropic_usage(m, get_obj(root, "usage"));
	else if (type == NULL || strcmp(type, "message") == 0) {
		/* A whole Messages response (errors have type "error"). */
		take_model(m, root);
		anthropic_usage(m, get_obj(root, "usage"));
	}
}

static void
handle_object(struct meter *m, json_object *root)
{
	if (root == NULL || !json_object_is_type(root, json_type_object))
		return;
	switch (m->m_dialect) {
	case METER_OPENAI:
		openai_object(m, root);
		break;
	case METER_ANTHROPIC:
		anthropic_object(m, root);
		break;
	default:
		break;
	}
}

/* ---- JSON bodies ---------------------------------------------------- */

static void
json_feed(struct meter *m, const char *p, size_t len)
{
	json_object		*root;
	enum json_tokener_error	 err;
	size_t			 n, room;

	if (m->m_json_done)
		return;
	room = m->m_json_max - m->m_json_len;
	while (len > 0) {
		if (room == 0) {
			/* Over the bound before the document ended. */
			m->m_dead = 1;
			return;
		}
		/* json_tokener_parse_ex takes an int length. */
		n = len > 65536 ? 65536 : len;
		if (n > room)
			n = room;
		root = json_tokener_parse_ex(m->m_tok, p, (int)n);
		err = json_tokener_get_error(m->m_tok);
		if (root != NULL) {
			handle_object(m, root);
			json_object_put(root);
			m->m_json_done = 1;
			return;
		}
		if (err != json_tokener_continue) {
			m->m_dead = 1;
			return;
		}
		m->m_json_len += n;
		room -= n;
		p += n;
		len -= n;
	}
}

/* ---- SSE ------------------------------------------------------------ */

static void
sse_dispatch(struct meter *m)
{
	json_object	*root;

	if (m->m_ev_lines > 0 && !m->m_ev_over &&
	    !(m->m_ev_len == 6 && memcmp(m->m_ev, "[DONE]", 6) == 0) &&
	    m->m_ev_len <= INT32_MAX) {
		json_tokener_reset(m->m_tok);
		root = json_tokener_parse_ex(m->m_tok, m->m_ev,
		    (int)m->m_ev_len);
		if (root != NULL) {
			handle_object(m, root);
			json_object_put(root);
		}
	}
	m->m_ev_len = 0;
	m->m_ev_lines = 0;
	m->m_ev_over = 0;
}

static void
ev_append(struct meter *m, const char *p, size_t len)
{
	size_t	ncap;

	if (m->m_ev_over || len == 0)
		return;
	if (len > m->m_ev_max - m->m_ev_len) {
		m->m_ev_over = 1;
		return;
	}
	if (m->m_ev_len + len > m->m_ev_cap) {
		ncap = m->m_ev_cap == 0 ? 4096 : m->m_ev_cap;
		while (ncap < m->m_ev_len + len)
			ncap *= 2;
		if (ncap > m->m_ev_max)
			ncap = m->m_ev_max;
		m->m_ev = xrealloc(m->m_ev, ncap);
		m->m_ev_cap = ncap;
	}
	memcpy(m->m_ev + m->m_ev_len, p, len);
	m->m_ev_len += len;
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
	if (dialect == METER_NONE ||
	    (m->m_tok = json_tokener_new_ex(METER_DEPTH)) == NULL)
		m->m_dead = 1;
	return m;
}

void
meter_feed(struct meter *m, const char *p, size_t len)
{
	if (m == NULL || p == NULL || len == 0 || m->m_dead || m->m_finished)
		return;
	if (m->m_sse)
		sse_feed(m, p, len);
	else
		json_feed(m, p, len);
}

void
meter_finish(struct meter *m, struct usage *out)
{
	uint64_t	in, cached, cwrite;

	memset(out, 0, sizeof(*out));
	if (m == NULL)
		return;
	if (!m->m_finished && !m->m_dead && m->m_sse) {
		/* Be lenient with a body that ends without a blank line. */
		if (m->m_state != SSE_NAME || m->m_name_len > 0 ||
		    m->m_name_over)
			sse_eol(m);
		sse_dispatch(m);
	}
	m->m_finished = 1;
	if (!m->m_found)
		return;

	snprintf(out->u_model, sizeof(out->u_model), "%s", m->m_model);
	out->u_found = 1;
	out->u_output = m->m_out.tf_val;
	cached = m->m_cached.tf_val;
	cwrite = m->m_cwrite.tf_val;
	if (m->m_dialect == METER_ANTHROPIC) {
		/* input_tokens excludes both cache kinds: add them. */
		in = sat_add(sat_add(m->m_in.tf_val, cwrite), cached);
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
	if (m->m_tok != NULL)
		json_tokener_free(m->m_tok);
	free(m->m_ev);
	free(m);
}
