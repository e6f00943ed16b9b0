/*
 * The ask stage (pipe/stage.h), first in the table: an exchange its
 * policy holds for an operator (action: ask, on_unmatched: ask) waits
 * here, before any stage reserves budget or the upstream is contacted,
 * unless a runtime rule approves it already. XS_WAIT until the registry
 * (pol_ask.c) makes the resume event active; then on, or refused.
 */
#include "config.h"

#include <stdio.h>

#include "cfg/cfg.h"
#include "metrics/metrics.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "policy/pol_ask.h"

/* Past the hold's own end: the registry's thread answers first. */
#define ASK_SLACK_MS	2000

static enum xs_verdict
ask_ready(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;
	struct ask_req	 q;
	struct event	*ev;
	const char	*pol = xc->xc_policy != NULL ? xc->xc_policy->p_name :
			    "";
	uint64_t	 left = 0;

	if (!x->x_ask)
		return XS_GO;
	if (x->x_ask_id == 0) {
		if (ask_rule_allows(xc->xc_sandbox, pol, x->x_host,
		    x->x_port, x->x_method, xc->xc_tunnel ? NULL : x->x_path)) {
			met_hold(MET_HOLD_RULE);
			x->x_ask = 0;
			return XS_GO;
		}
		/* a tunnel's head has no event to wait on */
		if (xc->xc_resume == NULL || (ev = xc->xc_resume(xc)) == NULL)
			return xs_deny(xc, AUD_R_APPROVAL_DENIED, "approval "
			    "required, and this request cannot be held");
		q.aq_request_id = x->x_id;
		q.aq_sandbox = xc->xc_sandbox;
		q.aq_policy = pol;
		q.aq_method = x->x_method;
		q.aq_host = x->x_host;
		q.aq_port = x->x_port;
		q.aq_path = xc->xc_tunnel ? NULL : x->x_path;
		x->x_ask_id = ask_hold(&q, ev, xc->xc_cfg->c_ask_timeout_ms,
		    xc->xc_cfg->c_ask_max_pending, xc->xc_cfg->c_ask_webhook);
		xc->xc_wait_ms = xc->xc_cfg->c_ask_timeout_ms + ASK_SLACK_MS;
		return XS_WAIT;
	}
	switch (ask_take(x->x_ask_id, &left)) {
	case ASK_WAITING:	/* woken early: wait on */
		xc->xc_wait_ms = left + ASK_SLACK_MS;
		return XS_WAIT;
	case ASK_APPROVED:
		x->x_ask = 0;
		x->x_ask_id = 0;
		return XS_GO;
	case ASK_DENIED:
		return xs_deny(xc, AUD_R_APPROVAL_DENIED,
		    "an operator denied the request");
	case ASK_REFUSED:
		return xs_deny(xc, AUD_R_APPROVAL_DENIED, "too many requests "
		    "of the sandbox held for approval: the oldest was refused");
	case ASK_TIMEOUT:
	case ASK_GONE:
		break;
	}
	return xs_deny(xc, AUD_R_APPROVAL_TIMEOUT, "no operator decided "
	    "within ask.timeout");
}

const struct xstage ask_stage = {
	.xs_name = "ask",
	.xs_req_ready = ask_ready,
};
