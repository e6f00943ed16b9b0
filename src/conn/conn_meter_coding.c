/*
 * Content codings of metered requests (issue 17.1): the meter reads a
 * compressed response through a decoder of its own (src/budget/decode.c),
 * and an Accept-Encoding naming a coding it cannot read is replaced with
 * identity. Kept apart from conn_budget.c: two hooks in conn.c's request
 * writer, one call from conn_budget_response_head().
 */
#include "config.h"

#include <event2/buffer.h>

#include "budget/bud.h"
#include "budget/decode.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "util/util.h"

/*
 * The meter reads a compressed response through a decoder of its own;
 * several Content-Encoding fields (layered codings) it does not read.
 */
void
conn_budget_coding(struct conn *c)
{
	struct http_msg	*m = &c->c_resp;
	int		 i;

	if ((i = http_msg_find(m, "content-encoding", 0)) == -1)
		return;
	if (http_msg_find(m, "content-encoding", i + 1) != -1) {
		(void)meter_encoding(c->c_r.r_meter, "layered", 7);
		return;
	}
	(void)meter_encoding(c->c_r.r_meter, http_msg_str(m,
	    m->hm_hdrs[i].h_value), m->hm_hdrs[i].h_value_len);
}

/*
 * Accept-Encoding of a metered request towards no secret's host (those
 * are forced to identity already, sec_inject.c): passed on when every
 * coding it names is one the meter decodes, else replaced with identity.
 */
static int
accept_encoding_unreadable(const struct conn *c)
{
	const struct http_msg	*m = &c->c_req;
	const struct cfg_rule	*rule = c->c_r.r_rule_p;
	int			 i;

	if (rule == NULL || rule->r_meter == CFG_METER_NONE ||
	    c->c_r.r_sec != NULL)
		return 0;
	for (i = 0; (i = http_msg_find(m, "accept-encoding", i)) != -1; i++)
		if (!dec_accept_readable(http_msg_str(m,
		    m->hm_hdrs[i].h_value), m->hm_hdrs[i].h_value_len))
			return 1;
	return 0;
}

int
conn_budget_header_dropped(const struct conn *c, const char *name,
    size_t nlen)
{
	return util_strncaseeq(name, nlen, "accept-encoding") &&
	    accept_encoding_unreadable(c);
}

void
conn_budget_headers_add(const struct conn *c, struct evbuffer *out)
{
	if (accept_encoding_unreadable(c))
		evbuffer_add(out, "Accept-Encoding: identity\r\n", 28);
}
