/*
 * The budget's side of the byte pumps: bytes charged as they flow, and a
 * request or tunnel cut at a bytes cap (the stage's hooks, admission,
 * metering and settling, are in budget/bud_stage.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "policy/pol.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

/* The caps that apply to <c>'s requests, or NULL. */
static const struct cfg_caps *
caps_of(const struct conn *c)
{
	return bud_caps_of(c->c_policy);
}

size_t
conn_budget_allow(struct conn *c, int up, size_t len)
{
	return bud_xchg_allow(c->c_x, caps_of(c), up, len);
}

void
conn_budget_flow(struct conn *c)
{
	struct xchg	*x = c->c_x;

	if (!x->x_bud.b_admitted || x->x_bud.b_sb == NULL || c->c_closing)
		return;
	if (!bud_xchg_batch_due(x))
		return;	/* no bytes cap: 64 KiB batches, the rest at end */
	/*
	 * Bodies and tunnel bytes were checked before they moved
	 * (conn_budget_allow); what passes a cap here is a head, or another
	 * request of the sandbox: a tunnel is cut (more would follow), a
	 * request goes on (its next body byte is refused; the sandbox's next
	 * request is refused at admission).
	 */
	if (bud_xchg_charge(x, caps_of(c)) == -1 && !x->x_bud.b_over &&
	    c->c_state == CONN_TUNNEL)
		x->x_bud.b_over = x->x_bud.b_room_out == 0 ? 2 : 1;
	if (x->x_bud.b_over)
		conn_budget_cut(c);
}

void
conn_budget_cut(struct conn *c)
{
	const struct cfg_caps	*caps = caps_of(c);
	char			 why[200];

	if (c->c_x->x_bud.b_over == 0)
		c->c_x->x_bud.b_over = c->c_x->x_bud.b_room_out == 0 ? 2 : 1;
	if (caps != NULL && caps->cp_has_bytes_out &&
	    c->c_x->x_bud.b_over == 2)
		snprintf(why, sizeof(why), "bytes_out cap %llu reached "
		    "mid-request", (unsigned long long)caps->cp_bytes_out);
	else if (caps != NULL && caps->cp_has_bytes_in)
		snprintf(why, sizeof(why), "bytes_in cap %llu reached "
		    "mid-response", (unsigned long long)caps->cp_bytes_in);
	else
		snprintf(why, sizeof(why), "bytes cap reached");
	if (!c->c_r.r_resp_started && !c->c_r.r_connect_replied) {
		conn_reply_error(c, AUD_R_BUDGET_EXCEEDED, why, 1);
		return;
	}
	log_info("%s: sandbox %s: %s: cut", c->c_client,
	    c->c_sbx != NULL ? c->c_sbx->sb_id : "-", why);
	conn_cut(c, "budget_cut");
}
