/*
 * The MCP tool policy (pol_mcp.h): JSON-RPC bodies read with json-c, the
 * event stream split into events by the budget plane's sse_filt. A body
 * that cannot be read is never guessed at: the request is refused, the
 * response cut (fail closed).
 */
#include "config.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <json-c/json.h>

#include "budget/bud.h"
#include "cfg/cfg.h"
#include "policy/pol_mcp.h"
#include "util/util.h"

#define MCP_DEPTH	64		/* JSON nesting read at most */
#define MCP_ERR_CODE	(-32001)	/* implementation-defined server
					   error (JSON-RPC 2.0 section 5.1) */

int
mcp_tool_allowed(const struct cfg_mcp *m, const char *name)
{
	size_t	i;

	for (i = 0; i < m->m_ndeny; i++)
		if (fnmatch(m->m_deny[i], name, 0) == 0)
			return 0;
	if (m->m_ntools == 0)
		return 1;
	for (i = 0; i < m->m_ntools; i++)
		if (fnmatch(m->m_tools[i], name, 0) == 0)
			return 1;
	return 0;
}

/* One JSON text, the whole of <p>, or NULL. */
static json_object *
mcp_parse(const char *p, size_t len)
{
	struct json_tokener	*tok;
	json_object		*o;
	size_t			 end;

	if (len == 0 || len > INT32_MAX ||
	    (tok = json_tokener_new_ex(MCP_DEPTH)) == NULL)
		return NULL;
	o = json_tokener_parse_ex(tok, p, (int)len);
	if (o == NULL && json_tokener_get_error(tok) == json_tokener_continue)
		o = json_tokener_parse_ex(tok, "", 1);	/* a bare number */
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (o == NULL)
		return NULL;
	for (; end < len; end++)
		if (strchr(" \t\r\n", p[end]) == NULL || p[end] == '\0') {
			json_object_put(o);
			return NULL;
		}
	return o;
}

static const char *
mcp_str(json_object *o, const char *key)
{
	json_object	*v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* One message of a request body: 1 refused, 0 passes, -1 unreadable. */
static int
judge_one(const struct cfg_mcp *m, json_object *o, int batch,
    struct mcp_seen *seen)
{
	json_object	*params;
	const char	*method, *name = NULL;

	if (!json_object_is_type(o, json_type_object))
		return -1;
	if ((method = mcp_str(o, "method")) == NULL)
		return json_object_object_get_ex(o, "id", NULL) ? 0 : -1;
	if (!batch)
		snprintf(seen->ms_method, sizeof(seen->ms_method), "%s",
		    method);
	if (strcmp(method, "tools/list") == 0)
		seen->ms_list = 1;
	if (strcmp(method, "tools/call") != 0)
		return 0;
	if (json_object_object_get_ex(o, "params", &params) &&
	    json_object_is_type(params, json_type_object))
		name = mcp_str(params, "name");
	if (name != NULL && seen->ms_tool[0] == '\0')
		snprintf(seen->ms_tool, sizeof(seen->ms_tool), "%s", name);
	/* a call without a tool name is not guessed at */
	if (name != NULL && strlen(name) <= 128 && mcp_tool_allowed(m, name))
		return 0;
	if (seen->ms_denied++ == 0)
		snprintf(seen->ms_tool, sizeof(seen->ms_tool), "%s",
		    name != NULL ? name : "");
	return 1;
}

/* The error answering request <o> (it has an id), or NULL. */
static json_object *
mcp_error(json_object *o, int refused, const char *request_id)
{
	json_object	*id, *e, *err, *data;

	if (!json_object_object_get_ex(o, "id", &id) ||
	    mcp_str(o, "method") == NULL)
		return NULL;
	e = json_object_new_object();
	json_object_object_add(e, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(e, "id", json_object_get(id));
	err = json_object_new_object();
	json_object_object_add(err, "code", json_object_new_int(MCP_ERR_CODE));
	/* no value of the request is echoed, the tool's name neither */
	json_object_object_add(err, "message", json_object_new_string(refused ?
	    "airlock mcp_tool_denied: this tool is not allowed by the "
	    "gateway's policy" :
	    "airlock mcp_tool_denied: the batch carries a tool call the "
	    "gateway's policy does not allow, and was refused whole; send "
	    "this request alone"));
	data = json_object_new_object();
	json_object_object_add(data, "reason",
	    json_object_new_string("mcp_tool_denied"));
	json_object_object_add(data, "request_id",
	    json_object_new_string(request_id));
	json_object_object_add(err, "data", data);
	json_object_object_add(e, "error", err);
	return e;
}

static void
mcp_emit(struct evbuffer *out, json_object *o, int sse)
{
	const char	*s = json_object_to_json_string_ext(o,
			    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

	if (sse)
		evbuffer_add_printf(out, "event: message\ndata: %s\n\n", s);
	else
		evbuffer_add(out, s, strlen(s));
}

enum mcp_verdict
mcp_judge(const struct cfg_mcp *m, const char *body, size_t len, int sse,
    const char *request_id, struct mcp_seen *seen, struct evbuffer *answer)
{
	json_object	*o, *el, *e, *arr;
	size_t		 i, n;
	int		 batch, r, *refused;
	enum mcp_verdict v = MCP_PASS;

	memset(seen, 0, sizeof(*seen));
	if ((o = mcp_parse(body, len)) == NULL)
		return MCP_UNREADABLE;
	batch = json_object_is_type(o, json_type_array);
	n = batch ? json_object_array_length(o) : 1;
	if (batch) {
		snprintf(seen->ms_method, sizeof(seen->ms_method), "batch");
		if (n == 0) {
			json_object_put(o);
			return MCP_UNREADABLE;
		}
	}
	refused = xcalloc(n, sizeof(int));
	for (i = 0; i < n; i++) {
		el = batch ? json_object_array_get_idx(o, i) : o;
		if ((r = judge_one(m, el, batch, seen)) == -1) {
			v = MCP_UNREADABLE;
			goto out;
		}
		refused[i] = r;
	}
	if (seen->ms_denied == 0)
		goto out;
	/* a batch with a refused call is refused whole: see
	 * docs/configuration.md (mcp) for why */
	v = MCP_REFUSE;
	arr = batch && !sse ? json_object_new_array() : NULL;
	for (i = 0; i < n; i++) {
		el = batch ? json_object_array_get_idx(o, i) : o;
		if ((e = mcp_error(el, refused[i], request_id)) == NULL)
			continue;
		if (arr != NULL)
			json_object_array_add(arr, e);
		else {
			mcp_emit(answer, e, sse);
			json_object_put(e);
		}
	}
	if (arr != NULL) {
		if (json_object_array_length(arr) > 0)
			mcp_emit(answer, arr, 0);
		json_object_put(arr);
	}
out:
	free(refused);
	json_object_put(o);
	return v;
}

/* ---- tools/list results on the way back ---------------------------- */

struct mcp_filt {
	const struct cfg_mcp	*f_m;
	int			 f_sse;
	size_t			 f_max;
	struct evbuffer		*f_held;	/* the JSON body */
	struct sse_filt		*f_events;	/* the event stream */
	struct evbuffer		*f_out;		/* during a feed */
	int			 f_failed;
	size_t			 f_dropped;
};

struct mcp_filt *
mcp_filt_new(const struct cfg_mcp *m, int sse, size_t max)
{
	struct mcp_filt	*f = xcalloc(1, sizeof(*f));

	f->f_m = m;
	f->f_sse = sse;
	f->f_max = max;
	if (sse)
		f->f_events = sse_filt_new(max);
	else
		f->f_held = evbuffer_new();
	return f;
}

void
mcp_filt_free(struct mcp_filt *f)
{
	if (f == NULL)
		return;
	if (f->f_held != NULL)
		evbuffer_free(f->f_held);
	sse_filt_free(f->f_events);
	free(f);
}

size_t
mcp_filt_dropped(const struct mcp_filt *f)
{
	return f->f_dropped;
}

/* Leave the disallowed tools out of a response (or batch of them): 1
 * when anything changed. */
static int
filter_msg(struct mcp_filt *f, json_object *o)
{
	json_object	*res, *tools, *t;
	const char	*name;
	size_t		 i, n;
	int		 changed = 0;

	if (json_object_is_type(o, json_type_array)) {
		n = json_object_array_length(o);
		for (i = 0; i < n; i++)
			changed |= filter_msg(f, json_object_array_get_idx(o,
			    i));
		return changed;
	}
	if (!json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, "result", &res) ||
	    !json_object_is_type(res, json_type_object) ||
	    !json_object_object_get_ex(res, "tools", &tools) ||
	    !json_object_is_type(tools, json_type_array))
		return 0;
	for (i = json_object_array_length(tools); i-- > 0;) {
		t = json_object_array_get_idx(tools, i);
		name = json_object_is_type(t, json_type_object) ?
		    mcp_str(t, "name") : NULL;
		if (name != NULL && strlen(name) <= 128 &&
		    mcp_tool_allowed(f->f_m, name))
			continue;
		json_object_array_del_idx(tools, i, 1);
		f->f_dropped++;
		changed = 1;
	}
	return changed;
}

/*
 * The line of event p[0..n) at *at, ended by CR, LF or CRLF (the last by
 * the event's end): 1, and *at moves past it; 0 after the last.
 */
static int
event_line(const char *p, size_t n, size_t *at, const char **line,
    size_t *llen)
{
	size_t	i = *at;

	if (i > n)
		return 0;
	while (i < n && p[i] != '\r' && p[i] != '\n')
		i++;
	*line = p + *at;
	*llen = i - *at;
	if (i < n && p[i] == '\r' && i + 1 < n && p[i + 1] == '\n')
		i++;
	*at = i + 1;
	return 1;
}

/* One whole event: as it came, or rebuilt with its data filtered. */
static void
filt_event(struct mcp_filt *f, const char *p, size_t n)
{
	struct evbuffer	*data = evbuffer_new(), *out = f->f_out;
	json_object	*o = NULL;
	const char	*line;
	size_t		 at, llen;
	int		 ndata = 0, pass = 1;

	for (at = 0; event_line(p, n, &at, &line, &llen);) {
		if (llen < 5 || strncmp(line, "data:", 5) != 0)
			continue;
		line += 5;
		llen -= 5;
		if (llen > 0 && line[0] == ' ') {
			line++;
			llen--;
		}
		if (ndata++ > 0)
			evbuffer_add(data, "\n", 1);
		evbuffer_add(data, line, llen);
	}
	if (ndata > 0) {
		llen = evbuffer_get_length(data);
		if ((o = mcp_parse((const char *)evbuffer_pullup(data,
		    (ssize_t)llen), llen)) == NULL) {
			f->f_failed = 1;	/* not guessed at */
			goto done;
		}
		pass = !filter_msg(f, o);
	}
	if (pass) {
		evbuffer_add(out, p, n);
		goto done;
	}
	/* its other fields (event, id, retry) kept, one data line */
	for (at = 0; event_line(p, n, &at, &line, &llen);) {
		if (llen == 0 || (llen >= 5 && strncmp(line, "data:", 5) == 0))
			continue;
		evbuffer_add(out, line, llen);
		evbuffer_add(out, "\n", 1);
	}
	evbuffer_add_printf(out, "data: %s\n\n", json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
done:
	json_object_put(o);
	evbuffer_free(data);
}

static int
filt_emit(void *arg, const char *p, size_t n, int whole)
{
	struct mcp_filt	*f = arg;

	if (!whole)
		f->f_failed = 1;	/* an event too long to hold */
	if (!f->f_failed)
		filt_event(f, p, n);
	return 0;
}

int
mcp_filt_feed(struct mcp_filt *f, const char *p, size_t len,
    struct evbuffer *out)
{
	if (f->f_failed)
		return -1;
	if (f->f_sse) {
		f->f_out = out;
		(void)sse_filt_feed(f->f_events, p, len, filt_emit, f);
		f->f_out = NULL;
	} else if (evbuffer_get_length(f->f_held) + len > f->f_max)
		f->f_failed = 1;
	else
		evbuffer_add(f->f_held, p, len);
	return f->f_failed ? -1 : 0;
}

int
mcp_filt_end(struct mcp_filt *f, struct evbuffer *out)
{
	json_object	*o;
	size_t		 n;

	if (f->f_failed)
		return -1;
	if (f->f_sse) {
		f->f_out = out;
		sse_filt_flush(f->f_events, filt_emit, f);
		f->f_out = NULL;
		return f->f_failed ? -1 : 0;
	}
	if ((n = evbuffer_get_length(f->f_held)) == 0)
		return 0;
	if ((o = mcp_parse((const char *)evbuffer_pullup(f->f_held,
	    (ssize_t)n), n)) == NULL) {
		f->f_failed = 1;
		return -1;
	}
	if (filter_msg(f, o)) {
		mcp_emit(out, o, 0);
		evbuffer_drain(f->f_held, n);
	} else
		evbuffer_add_buffer(out, f->f_held);
	json_object_put(o);
	return 0;
}
