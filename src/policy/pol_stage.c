/*
 * The policy stage (pipe/stage.h), first in the table: its req_policy
 * hook judges the identified request head (or CONNECT) against the
 * sandbox's policy. The exchange gets the rule ("policy#N"), the ask flag
 * (action: ask, on_unmatched: ask), report mode's would_deny, and on a
 * refusal the rule that would allow it (rule_hint); pol_xchg_judge is
 * that judgment for the front ends that judge a tunnel themselves
 * (transparent, SOCKS5). The driver answers a
 * refusal: a CONNECT's inside TLS, a POL_BAD one closing (xc_close).
 */
#include "config.h"

#include <stddef.h>

#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "policy/pol.h"
#include "util/util.h"

enum pol_verdict
pol_xchg_eval(const struct cfg_policy *p, struct xchg *x,
    const struct pol_request *pr, struct pol_result *res)
{
	enum pol_verdict	v;
	size_t			n;

	v = p == NULL ? POL_DENY : pol_evaluate(p, pr, res);
	if (v != POL_DENY) {
		/* room kept for '#' and the digits */
		n = util_copy_str(x->x_rule, p->p_name, sizeof(x->x_rule) - 22);
		x->x_rule[n++] = '#';
		util_u64_dec((uint64_t)res->pr_rule, x->x_rule + n);
	}
	return v;
}

enum pol_verdict
pol_xchg_judge(const struct cfg_policy *p, struct xchg *x,
    const struct pol_request *pr, struct pol_result *res)
{
	enum pol_verdict	v;

	v = pol_xchg_eval(p, x, pr, res);
	/* report mode or an ask: forwarded, or held by the ask stage */
	if (v == POL_DENY && p != NULL && pol_unmatched(p, res,
	    x->x_would_deny, sizeof(x->x_would_deny), &x->x_ask))
		return POL_ALLOW;	/* report or ask: pr_rule is -1 */
	if (v == POL_ALLOW)
		x->x_ask = p->p_rules[res->pr_rule].r_ask;
	return v;
}

static enum xs_verdict
pol_req_policy(struct xs_call *xc)
{
	const struct cfg_policy	*p = xc->xc_policy;
	struct xchg		*x = xc->xc_x;
	struct pol_request	 pr;
	struct pol_result	 res;
	enum pol_verdict	 v;
	char			 override[24];
	int			 i;

	pr.pr_host = x->x_host;
	pr.pr_port = x->x_port;
	pr.pr_method = x->x_method;
	pr.pr_path = xc->xc_tunnel ? NULL : x->x_path;
	/* frameworks act on these instead of the method: judge that one */
	pr.pr_method_override = NULL;
	if (!xc->xc_tunnel && (i = http_msg_method_override(xc->xc_req,
	    override, sizeof(override))) != 0) {
		if (i == -1) {
			(void)xs_deny(xc, AUD_R_BAD_REQUEST, "method-override "
			    "headers that do not name one method");
			xc->xc_close = 1;
			return XS_DENY;
		}
		pr.pr_method_override = override;
	}
	v = pol_xchg_judge(p, x, &pr, &res);
	if (v == POL_BAD) {
		/* ambiguous, like a malformed target: the connection ends */
		(void)xs_deny(xc, AUD_R_BAD_REQUEST, "%s", res.pr_reason);
		xc->xc_close = 1;
		return XS_DENY;
	}
	if (v != POL_ALLOW) {
		if (p == NULL)
			return xs_deny(xc, AUD_R_DENIED, "the sandbox's policy "
			    "is not in the running config");
		(void)pol_rule_hint(&pr, x->x_hint, sizeof(x->x_hint));
		return xs_deny(xc, AUD_R_DENIED, "%s", res.pr_reason);
	}
	x->x_allowed = 1;
	xc->xc_intercept = res.pr_rule < 0 || p->p_rules[res.pr_rule].r_intercept;
	if (!xc->xc_tunnel)
		x->x_rule_p = res.pr_rule < 0 ? NULL : &p->p_rules[res.pr_rule];
	return XS_GO;
}

const struct xstage pol_stage = {
	.xs_name = "policy",
	.xs_req_policy = pol_req_policy,
};
