/*
 * The one policy judgment of the front ends (pol_xchg_judge): a request
 * head or a CONNECT through the policy stage (policy/pol_stage.c), a
 * transparent or SOCKS5 connection's name here (conn_transparent.c after
 * its ClientHello or its silence, conn_socks5.c), with report mode and
 * asks as for a request.
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
	return pol_xchg_judge(c->c_policy, c->c_x, pr, res);
}
