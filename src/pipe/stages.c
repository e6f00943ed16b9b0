/*
 * The pipeline, as a list: an exchange meets these stages in this order,
 * at each hook of pipe/stage.h. The identity of the sandbox (Proxy-
 * Authorization, the listener's default, the transparent source) is the
 * connection's, settled by the driver before the first hook.
 */
#include "config.h"

#include <stddef.h>

#include "pipe/stage.h"

const struct xstage *const xs_table[] = {
	&pol_stage,		/* the policy: rule, ask, report, rule_hint */
	&geo_stage,		/* the destination guard, the countries */
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
