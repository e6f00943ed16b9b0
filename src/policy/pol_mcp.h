/*
 * The MCP tool policy of a rule (mcp: {tools, deny_tools}): the judge of
 * a JSON-RPC 2.0 request body of the streamable HTTP transport, and the
 * filter of a tools/list result on its way back (JSON body or event
 * stream). Pure: no I/O; the stage (pol_mcp_stage.c) drives them.
 */
#ifndef AIRLOCK_POL_MCP_H
#define AIRLOCK_POL_MCP_H

#include <stddef.h>

struct cfg_mcp;
struct evbuffer;

/* Is tool <name> allowed by <m>: in tools (or no tools), in no deny_tools. */
int	mcp_tool_allowed(const struct cfg_mcp *m, const char *name);

/* What the judge saw, for the audit and the response filter. */
struct mcp_seen {
	char	ms_method[64];	/* the message's method, "batch", or "" */
	char	ms_tool[129];	/* tools/call: the tool (the first refused
				   of a batch), or "" */
	int	ms_list;	/* a tools/list is among the requests */
	int	ms_denied;	/* tools/call elements refused */
};

enum mcp_verdict {
	MCP_PASS = 0,	/* forward the body as it is */
	MCP_REFUSE,	/* answer with <answer>, nothing goes upstream */
	MCP_UNREADABLE,	/* not a JSON-RPC message or batch */
};

/*
 * Judge the request body <body>. Every tools/call element is judged; when
 * one is refused the whole message is answered by the gateway: <answer>
 * gets one JSON-RPC error per request element (same id), as a JSON body
 * or, with <sse>, as one "message" event each (empty: only notifications,
 * answer 202). <request_id> goes in each error's data.
 */
enum mcp_verdict mcp_judge(const struct cfg_mcp *m, const char *body,
		    size_t len, int sse, const char *request_id,
		    struct mcp_seen *seen, struct evbuffer *answer);

/* A tools/list result filter for one response body. */
struct mcp_filt;
/* <sse>: an event stream, else one JSON body; <max>: bytes held at most
 * (the body, or one event). */
struct mcp_filt	*mcp_filt_new(const struct cfg_mcp *, int sse, size_t max);
void		 mcp_filt_free(struct mcp_filt *);
/*
 * Feed bytes of the body; what goes on to the client is added to <out>
 * (a JSON body at the end, events as each completes). -1: the body cannot
 * be filtered (over <max>, not JSON): nothing more may go out.
 */
int		 mcp_filt_feed(struct mcp_filt *, const char *, size_t,
		    struct evbuffer *out);
/* The body ended: what is held goes out (filtered); -1 as above. */
int		 mcp_filt_end(struct mcp_filt *, struct evbuffer *out);
/* Tools left out so far. */
size_t		 mcp_filt_dropped(const struct mcp_filt *);

#endif
