/*
 * Byte grants while an exchange flows (the Redis store under a bytes
 * cap): the exchange moves bytes only within what the fleet's window
 * granted it (bud_rgrant.c, BUD_RS_GRANT). Admission brings the first
 * chunk; when what is left of it falls under half a chunk the next is
 * asked, ahead of need, without waiting; should the bytes reach the end
 * of the grant before it comes, the stage's room hook says 0 and the
 * driver stops reading that way until the answer makes the exchange's
 * resume event active. A window with no room left, or a store that
 * cannot be reached, ends the exchange once what it holds is used
 * (bud_xchg_allow): cut at the cap as one gateway cuts, or cut
 * budget_unavailable (fail closed).
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "budget/bud.h"
#include "budget/bud_internal.h"
#include "cfg/cfg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"

/* The next grant is asked when less than half of one is left (half a
 * chunk of reads stays ahead of the Redis round trip). */
#define BUD_GRANT_LOW	(BUD_GRANT_CHUNK / 2)

static void
grant_apply(struct xchg *x, const struct bud_grant *g, int asked)
{
	struct xchg_budget	*b = &x->x_bud;

	b->b_gin += g->bg_in;
	b->b_gout += g->bg_out;
	b->b_gleft_in = g->bg_left_in;
	b->b_gleft_out = g->bg_left_out;
	/* asked and given nothing: the window is spent that way */
	if ((asked & 1) && g->bg_in == 0)
		b->b_gno |= 1;
	if ((asked & 2) && g->bg_out == 0)
		b->b_gno |= 2;
}

void
bud_grant_begin(struct xchg *x, const struct cfg_caps *caps,
    const struct bud_grant *g, struct event *ev)
{
	struct xchg_budget	*b = &x->x_bud;

	b->b_grant = (caps->cp_has_bytes_in ? 1 : 0) |
	    (caps->cp_has_bytes_out ? 2 : 0);
	x->x_flow_at = 0;
	b->b_gin = b->b_gout = 0;
	b->b_gleft_in = b->b_gleft_out = UINT64_MAX;
	b->b_gno = b->b_gunav = 0;
	b->b_gev = ev;
	if (b->b_grant == 0)
		return;
	if (g != NULL)
		grant_apply(x, g, b->b_grant);
	/* else nothing granted yet: the first room asks */
}

/* A grant asked has its answer: take it. */
static void
grant_poll(struct xchg *x)
{
	struct xchg_budget	*b = &x->x_bud;
	struct bud_grant	 g;
	struct bud_rres		*none = NULL;
	char			 why[96];
	int			 has, retry = 0;

	if (b->b_gop == NULL || !bud_rop_done(b->b_gop))
		return;
	has = bud_rop_grant(b->b_gop, &g) == 0;
	if (bud_rop_take(b->b_gop, why, sizeof(why), &retry, &none) ==
	    BUD_OK && has)
		grant_apply(x, &g, b->b_gask);
	else
		b->b_gunav = 1;
	b->b_gop = NULL;
	b->b_gask = 0;
}

static uint64_t
left_of(uint64_t granted, uint64_t used)
{
	return granted > used ? granted - used : 0;
}

/* Ask for the next chunk of each direction running low. */
static void
grant_ask(struct xchg *x, const struct cfg_caps *caps)
{
	struct xchg_budget	*b = &x->x_bud;
	uint64_t		 in = 0, out = 0;

	if (b->b_gop != NULL || b->b_gunav || b->b_gev == NULL ||
	    b->b_rres == NULL)
		return;
	if ((b->b_grant & 1) && !(b->b_gno & 1) &&
	    left_of(b->b_gin, x->x_bytes_in) < BUD_GRANT_LOW)
		in = BUD_GRANT_CHUNK;
	if ((b->b_grant & 2) && !(b->b_gno & 2) &&
	    left_of(b->b_gout, x->x_bytes_out) < BUD_GRANT_LOW)
		out = BUD_GRANT_CHUNK;
	if (in == 0 && out == 0)
		return;
	b->b_gask = (in != 0 ? 1 : 0) | (out != 0 ? 2 : 0);
	b->b_gop = bud_redis_grant(b->b_gev, b->b_rres, caps, in, out);
	grant_poll(x);		/* no connection: answered already */
}

uint64_t
bud_grant_room(struct xchg *x, const struct cfg_caps *caps, int up)
{
	struct xchg_budget	*b = &x->x_bud;

	if (!(b->b_grant & (up ? 2 : 1)) || caps == NULL)
		return UINT64_MAX;
	grant_poll(x);
	grant_ask(x, caps);
	return up ? left_of(b->b_gout, x->x_bytes_out) :
	    left_of(b->b_gin, x->x_bytes_in);
}

int
bud_grant_final(const struct xchg *x, int up)
{
	return x->x_bud.b_gunav || (x->x_bud.b_gno & (up ? 2 : 1));
}

uint64_t
bud_grant_fleet_room(struct xchg *x, const struct cfg_caps *caps, int up)
{
	uint64_t	room = bud_grant_room(x, caps, up), left;

	if (room == UINT64_MAX)
		return room;
	left = up ? x->x_bud.b_gleft_out : x->x_bud.b_gleft_in;
	return left == UINT64_MAX || room + left < room ? UINT64_MAX :
	    room + left;
}

void
bud_grant_end(struct xchg *x)
{
	/* its answer, when it comes, is dropped; the settlement (on the
	   same connection, so after it) releases what it granted */
	bud_rop_abandon(x->x_bud.b_gop);
	x->x_bud.b_gop = NULL;
	x->x_bud.b_grant = 0;
	x->x_bud.b_gev = NULL;
}

/*
 * Under the fleet's grants a body piece goes out with its chunk framing
 * (and the last chunk after it), counted after it passed: room is kept
 * for them, so an HTTP exchange ends within its grant.
 */
#define BUD_FRAME_SLACK	24

size_t
bud_grant_allow(struct xs_call *xc, int up, size_t len)
{
	struct xchg	*x = xc->xc_x;
	size_t		 slack, ok;

	slack = x->x_bud.b_grant && !xc->xc_tunnel ? BUD_FRAME_SLACK : 0;
	ok = bud_xchg_allow(x, bud_caps_of(xc->xc_policy), up, len + slack);
	if (ok == len + slack)
		return len;
	return ok > slack ? ok - slack : 0;	/* b_over is set */
}

/*
 * Bytes read on may become more bytes written (heads, chunk framing,
 * the gateway's fields) than the grant's count sees read: an HTTP
 * exchange waits for its next grant this far from the end of the last.
 */
#define BUD_GRANT_MARGIN	BUD_GRANT_MIN

/*
 * How many bytes may be read on towards the client (or the upstream,
 * <up>): what the fleet's grants leave; 0 to wait for the next one, asked
 * already (its answer resumes the driver). Once no more can come, no
 * bound: bud_xchg_allow cuts at the grant's end.
 */
size_t
bud_grant_room_hook(struct xs_call *xc, int up)
{
	struct xchg	*x = xc->xc_x;
	uint64_t	 room, margin = xc->xc_tunnel ? 0 : BUD_GRANT_MARGIN;

	if (!x->x_bud.b_admitted || !x->x_bud.b_grant || x->x_bud.b_over)
		return SIZE_MAX;
	room = bud_grant_room(x, bud_caps_of(xc->xc_policy), up);
	if (room == UINT64_MAX)
		return SIZE_MAX;
	if (room > margin)
		return room - margin > SIZE_MAX ? SIZE_MAX :
		    (size_t)(room - margin);
	return bud_grant_final(x, up) ? SIZE_MAX : 0;
}

