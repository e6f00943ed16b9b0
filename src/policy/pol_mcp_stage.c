/*
 * The mcp stage (pipe/stage.h): a POST matched by a rule with mcp: is a
 * message of MCP's streamable HTTP transport. Its body is held whole
 * (limits.body_bytes) and judged (pol_mcp.c) before anything goes
 * upstream: a refused tools/call is answered here with JSON-RPC errors
 * in the transport the client asked for; a tools/list has its result
 * filtered on the way back, JSON body or event stream. Other methods
 * (GET's event stream, DELETE of a session) pass untouched.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "policy/pol_mcp.h"
#include "util/util.h"

static const struct cfg_mcp *
mcp_of(const struct xs_call *xc)
{
	const struct cfg_rule	*r = xc->xc_x->x_rule_p;

	return r != NULL ? r->r_mcp : NULL;
}

/* Does field <name> of <m> list <type> (a media range, parameters and
 * case aside)? */
static int
lists(const struct http_msg *m, const char *name, const char *type)
{
	const char	*v;
	size_t		 vlen, tl = strlen(type), i;
	int		 k;

	for (k = http_msg_find(m, name, 0); k != -1;
	    k = http_msg_find(m, name, k + 1)) {
		http_msg_value(m, k, &v, &vlen);
		for (i = 0; i + tl <= vlen; i++)
			if (strncasecmp(v + i, type, tl) == 0)
				return 1;
	}
	return 0;
}

static enum xs_verdict
mcp_req_head(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;

	if (mcp_of(xc) == NULL || xc->xc_tunnel || xc->xc_upgrade ||
	    strcmp(x->x_method, "POST") != 0)
		return XS_GO;
	x->x_mcp.m_on = 1;
	xc->xc_hold = (size_t)xc->xc_cfg->c_limits.l_body_bytes;
	return XS_HOLD;
}

static enum xs_verdict
mcp_req_ready(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;
	struct mcp_seen	 seen;
	struct evbuffer	*body = xc->xc_body != NULL ? *xc->xc_body : NULL;
	const char	*p = "";
	size_t		 n = 0;
	int		 sse;

	if (!x->x_mcp.m_on)
		return XS_GO;
	x->x_mcp.m_on = 0;	/* judged once (a later stage may wait) */
	if (body != NULL && (n = evbuffer_get_length(body)) > 0)
		p = (const char *)evbuffer_pullup(body, (ssize_t)n);
	/* JSON unless the client accepts only the event stream (the SDKs
	   accept both, and a server must answer either) */
	sse = lists(xc->xc_req, "accept", "text/event-stream") &&
	    !lists(xc->xc_req, "accept", "application/json") &&
	    !lists(xc->xc_req, "accept", "*/*");
	if (x->x_answer == NULL)
		x->x_answer = evbuffer_new();
	switch (mcp_judge(mcp_of(xc), p, n, sse, x->x_id, &seen,
	    x->x_answer)) {
	case MCP_PASS:
		evbuffer_free(x->x_answer);
		x->x_answer = NULL;
		break;
	case MCP_REFUSE:
		memcpy(x->x_mcp.m_method, seen.ms_method,
		    sizeof(x->x_mcp.m_method));
		memcpy(x->x_mcp.m_tool, seen.ms_tool, sizeof(x->x_mcp.m_tool));
		/* only notifications beside the refused: nothing to answer */
		x->x_answer_status = evbuffer_get_length(x->x_answer) > 0 ?
		    200 : 202;
		x->x_answer_type = sse ? "text/event-stream" :
		    "application/json";
		return xs_deny(xc, AUD_R_MCP_TOOL_DENIED, "mcp: %s of a "
		    "tool the rule does not allow%s", seen.ms_method,
		    seen.ms_denied > 1 || strcmp(seen.ms_method, "batch") ==
		    0 ? " (the batch was refused whole)" : "");
	case MCP_UNREADABLE:
		evbuffer_free(x->x_answer);
		x->x_answer = NULL;
		return xs_deny(xc, AUD_R_MCP_UNREADABLE, "mcp: the body is "
		    "not a JSON-RPC 2.0 message or batch");
	}
	memcpy(x->x_mcp.m_method, seen.ms_method, sizeof(x->x_mcp.m_method));
	memcpy(x->x_mcp.m_tool, seen.ms_tool, sizeof(x->x_mcp.m_tool));
	x->x_mcp.m_list = seen.ms_list;
	return XS_GO;
}

/* A filtered result is read whole: ask for it unencoded. */
static int
mcp_req_drop(struct xs_call *xc, const char *name, size_t nlen)
{
	return xc->xc_x->x_mcp.m_list &&
	    util_strncaseeq(name, nlen, "accept-encoding");
}

static enum xs_verdict
mcp_resp_head(struct xs_call *xc)
{
	struct xchg		*x = xc->xc_x;
	const struct http_msg	*m = xc->xc_resp;
	const char		*v;
	size_t			 vlen;
	int			 i, sse;

	if (!x->x_mcp.m_list || m->hm_status < 200 || m->hm_status > 299 ||
	    m->hm_status == 204 || m->hm_status == 202)
		return XS_GO;
	if ((i = http_msg_find(m, "content-encoding", 0)) != -1) {
		http_msg_value(m, i, &v, &vlen);
		if (!util_strncaseeq(v, vlen, "identity"))
			return xs_deny(xc, AUD_R_UPSTREAM_UNREACHABLE, "mcp: an "
			    "encoded tools/list result cannot be filtered");
	}
	sse = lists(m, "content-type", "text/event-stream");
	if (!sse && !lists(m, "content-type", "application/json"))
		return xs_deny(xc, AUD_R_UPSTREAM_UNREACHABLE, "mcp: a "
		    "tools/list result neither JSON nor an event stream");
	x->x_mcp.m_filt = mcp_filt_new(mcp_of(xc), sse,
	    (size_t)xc->xc_cfg->c_limits.l_body_bytes);
	xc->xc_reframe = 1;
	return XS_GO;
}

static enum xs_verdict
mcp_resp_body(struct xs_call *xc, struct evbuffer *in, struct evbuffer *out)
{
	struct mcp_filt	*f = xc->xc_x->x_mcp.m_filt;
	size_t		 n = evbuffer_get_length(in);
	int		 r = 0;

	if (f == NULL || xc->xc_tunnel)
		return XS_GO;
	if (n > 0)
		r = mcp_filt_feed(f, (const char *)evbuffer_pullup(in,
		    (ssize_t)n), n, out);
	evbuffer_drain(in, n);
	if (r == 0 && xc->xc_eof)
		r = mcp_filt_end(f, out);
	if (r == 0)
		return XS_GO;
	/* never the unfiltered list: what went out stays, the rest is cut */
	xc->xc_cut = AUD_R_MCP_UNFILTERABLE;
	return xs_deny(xc, AUD_R_UPSTREAM_UNREACHABLE, "mcp: a tools/list "
	    "result too large or not JSON to filter");
}

static void
mcp_done(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;

	if (x->x_mcp.m_method[0] == '\0')
		return;
	xc->xc_rec->ar_mcp_method = x->x_mcp.m_method;
	xc->xc_rec->ar_mcp_tool = x->x_mcp.m_tool[0] != '\0' ?
	    x->x_mcp.m_tool : NULL;
}

/* Only a tools/list result is filtered (mcp_resp_head). */
static unsigned
mcp_watch(struct xs_call *xc)
{
	return xc->xc_x->x_mcp.m_filt != NULL ? XS_W_RESP_BODY : 0;
}

const struct xstage mcp_stage = {
	.xs_name = "mcp",
	.xs_req_head = mcp_req_head,
	.xs_req_ready = mcp_req_ready,
	.xs_req_drop = mcp_req_drop,
	.xs_resp_head = mcp_resp_head,
	.xs_resp_body = mcp_resp_body,
	.xs_done = mcp_done,
	.xs_watch = mcp_watch,
};
