/*
 * An exchange's bytes against its sandbox's bytes caps: what moved is
 * charged in batches (a charge takes the sandbox's lock), every piece is
 * allowed only as far as the caps and the fleet's byte grants
 * (bud_grant.c) leave room, and the exchange is marked to be cut
 * (b_over) where they end. The budget stage (bud_stage.c) calls these
 * from its body, room and flow hooks.
 */
#include "config.h"

#include <stdint.h>

#include "budget/bud.h"
#include "budget/bud_internal.h"
#include "cfg/cfg.h"
#include "pipe/xchg.h"

/* Bytes a request may move between two charges while under a cap: with
 * k requests of a sandbox in flight, a cap is passed by at most k times
 * this (docs/configuration.md, caps). */
#define BUD_XCHG_BATCH	(64 * 1024)

int
bud_xchg_charge(struct xchg *x, const struct cfg_caps *caps)
{
	struct bud_room	 room;
	int		 rc;

	rc = bud_charge(x->x_bud.b_sb, caps, x->x_bytes_in -
	    x->x_bud.b_charged_in, x->x_bytes_out - x->x_bud.b_charged_out,
	    &room);
	x->x_bud.b_charged_in = x->x_bytes_in;
	x->x_bud.b_charged_out = x->x_bytes_out;
	x->x_bud.b_room_in = room.br_in;
	x->x_bud.b_room_out = room.br_out;
	x->x_flow_at = 0;	/* the rooms may be bounded now: bud_flow says */
	return rc;
}

size_t
bud_xchg_allow(struct xchg *x, const struct cfg_caps *caps, int up,
    size_t len)
{
	uint64_t	 room, pending;

	if (!x->x_bud.b_admitted || x->x_bud.b_sb == NULL)
		return len;
	if (x->x_bud.b_over)
		return 0;
	/* the fleet's grants first: nothing moves beyond them */
	if (x->x_bud.b_grant &&
	    (room = bud_grant_room(x, caps, up)) < len) {
		x->x_bud.b_over = up ? 2 : 1;
		x->x_flow_at = 0;
		return (size_t)room;
	}
	room = up ? x->x_bud.b_room_out : x->x_bud.b_room_in;
	if (room == UINT64_MAX)
		return len;
	pending = up ? x->x_bytes_out - x->x_bud.b_charged_out :
	    x->x_bytes_in - x->x_bud.b_charged_in;
	if (pending + len > room || pending + len > BUD_XCHG_BATCH) {
		/* others of the sandbox may have used the room meanwhile */
		(void)bud_xchg_charge(x, caps);
		room = up ? x->x_bud.b_room_out : x->x_bud.b_room_in;
		pending = 0;
	}
	if (pending + len <= room)
		return len;
	x->x_bud.b_over = up ? 2 : 1;
	x->x_flow_at = 0;
	return pending < room ? (size_t)(room - pending) : 0;
}

int
bud_xchg_batch_due(const struct xchg *x)
{
	return x->x_bud.b_over || x->x_bud.b_room_in != UINT64_MAX ||
	    x->x_bud.b_room_out != UINT64_MAX ||
	    (x->x_bytes_in - x->x_bud.b_charged_in) +
	    (x->x_bytes_out - x->x_bud.b_charged_out) >= BUD_XCHG_BATCH;
}

uint64_t
bud_xchg_next_due(const struct xchg *x)
{
	/* a bound (a bytes cap, a grant) or an overrun: as bytes move */
	if (x->x_bud.b_over || x->x_bud.b_grant ||
	    x->x_bud.b_room_in != UINT64_MAX ||
	    x->x_bud.b_room_out != UINT64_MAX)
		return 0;
	return x->x_bud.b_charged_in + x->x_bud.b_charged_out +
	    BUD_XCHG_BATCH;
}
