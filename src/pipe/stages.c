/*
 * The pipeline, as a list. Identity, policy and geo still run in conn/
 * before the first hook (conn_request.c: conn_on_request_head,
 * dns_done); from there an exchange meets these stages in this order, at
 * each hook of pipe/stage.h.
 */
#include "config.h"

#include <stddef.h>

#include "pipe/stage.h"

const struct xstage *const xs_table[] = {
	&mcp_stage,		/* MCP tool policy: a refused call is
				   answered before an operator is asked */
	&ask_stage,		/* approval holds: before anything is
				   reserved or contacted */
	&sec_stage,		/* placeholders, injection, tripwire, what a
				   secret's host may answer */
	&bud_stage,		/* metered body, admission, bytes, meter,
				   settle */
#ifdef AIRLOCK_TEST_STAGE
	&test_stage,		/* the test build's airlockd-stage only */
#endif
	&aud_stage,		/* the record, the metrics */
	NULL,
};
