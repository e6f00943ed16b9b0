/*
 * The audit stage (pipe/stage.h), last in the table: the record the
 * driver and the stages before filled is written, and the exchange
 * counted in the metrics by its decision and reason.
 */
#include "config.h"

#include "audit/aud.h"
#include "metrics/metrics.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"

static void
aud_done(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;

	aud_submit(xc->xc_rec);
	if (x->x_would_deny[0] != '\0')
		met_would_deny();
	met_request(x->x_allowed, x->x_why, xc->xc_dur_us, x->x_bytes_in,
	    x->x_bytes_out);
}

const struct xstage aud_stage = {
	.xs_name = "audit",
	.xs_done = aud_done,
};
