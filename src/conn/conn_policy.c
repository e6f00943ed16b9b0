/*
 * The one policy evaluation of the front ends: a request head or a
 * CONNECT (conn_request.c), a transparent connection's name
 * (conn_transparent.c, after its ClientHello or its silence). The
 * exchange gets the rule that matched, "policy#N", for the audit.
 */
#include "config.h"

#include <stddef.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "policy/pol.h"
#include "util/util.h"

enum pol_verdict
conn_policy_eval(struct conn *c, const struct pol_request *pr,
    struct pol_result *res)
{
	enum pol_verdict	v;
	size_t			n;

	v = c->c_policy == NULL ? POL_DENY : pol_evaluate(c->c_policy, pr,
	    res);
	if (v != POL_DENY) {
		/* room kept for '#' and the digits */
		n = util_copy_str(c->c_x->x_rule, c->c_policy->p_name,
		    sizeof(c->c_x->x_rule) - 22);
		c->c_x->x_rule[n++] = '#';
		util_u64_dec((uint64_t)res->pr_rule, c->c_x->x_rule + n);
	}
	return v;
}
