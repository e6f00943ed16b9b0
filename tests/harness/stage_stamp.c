/*
 * A stage that exists only in the test build's airlockd-stage (one file
 * plus one row in src/pipe/stages.c under AIRLOCK_TEST_STAGE): it stamps
 * every request going upstream with X-Airlock-Test-Stage naming the
 * exchange's id and rule, and counts the exchanges it saw end in another
 * field of the next one. tests/integration/482-test-stage.sh shows it.
 */
#include "config.h"

#include <stdio.h>

#include "pipe/stage.h"
#include "pipe/xchg.h"

static unsigned long	stamp_done;	/* one worker in the test */

static void
stamp_fields(struct xs_call *xc)
{
	char	v[200], n[32];

	snprintf(v, sizeof(v), "%s %s", xc->xc_x->x_id, xc->xc_x->x_rule);
	xc->xc_add_field(xc, "X-Airlock-Test-Stage", v);
	snprintf(n, sizeof(n), "%lu", __atomic_load_n(&stamp_done,
	    __ATOMIC_RELAXED));
	xc->xc_add_field(xc, "X-Airlock-Test-Stage-Done", n);
	/* refused by the driver: a field must not smuggle a line */
	xc->xc_add_field(xc, "X-Airlock-Test-Bad", "a\r\nX-Injected: 1");
}

static void
stamp_done_hook(struct xs_call *xc)
{
	(void)xc;
	__atomic_add_fetch(&stamp_done, 1, __ATOMIC_RELAXED);
}

const struct xstage test_stage = {
	.xs_name = "test-stamp",
	.xs_req_fields = stamp_fields,
	.xs_done = stamp_done_hook,
};
