/*
 * Byte grants from the Redis store (bud_rscript.h, BUD_RS_GRANT): an
 * exchange under a bytes cap moves bytes only within what the fleet's
 * window granted it, chunk by chunk (bud_grant.c asks). A grant is an
 * operation like an admission (bud_redis.c): pipelined on the worker's
 * connection, its reply making the exchange's resume event active,
 * failed (BUD_UNAVAILABLE) when the connection is down or slower than
 * limits.store_timeout. Its lease is the reservation's (renewed with
 * it); its settlement is the reservation's (one script call).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "budget/bud.h"
#include "budget/bud_rconn.h"
#include "budget/bud_redis.h"
#include "cfg/cfg.h"

static int
grant_int(const redisReply *e, long long min, long long *v)
{
	if (e == NULL || e->type != REDIS_REPLY_INTEGER || e->integer < min)
		return -1;
	*v = e->integer;
	return 0;
}

int
bud_redis_grant_reply(const redisReply *r, size_t at, struct bud_grant *g)
{
	long long	v[4];
	size_t		i;

	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->element == NULL ||
	    r->elements != at + 4)
		return -1;
	for (i = 0; i < 4; i++)
		if (grant_int(r->element[at + i], i < 2 ? 0 : -1, &v[i]) == -1)
			return -1;
	g->bg_in = (uint64_t)v[0];
	g->bg_out = (uint64_t)v[1];
	g->bg_left_in = v[2] < 0 ? UINT64_MAX : (uint64_t)v[2];
	g->bg_left_out = v[3] < 0 ? UINT64_MAX : (uint64_t)v[3];
	return 0;
}

static void
grant_cb(redisAsyncContext *ac, void *reply, void *arg)
{
	struct bud_rop	*o = arg;
	struct brc	*c = ac->data;
	int		 v = BUD_OK;

	c->c_inflight--;
	if (bud_redis_grant_reply(reply, 0, &o->o_grant) == -1) {
		bud_rc_op_failed(o, c, reply, "byte grant");
		v = BUD_UNAVAILABLE;
	} else {
		o->o_has_grant = 1;
		/* the settlement releases what the server holds for it */
		if (o->o_gres != NULL)
			o->o_gres->r_gflags |= (o->o_grant.bg_in > 0 ? 1 : 0) |
			    (o->o_grant.bg_out > 0 ? 2 : 0);
	}
	bud_rc_op_finish(o, v);
}

struct bud_rop *
bud_redis_grant(struct event *ev, struct bud_rres *res,
    const struct cfg_caps *caps, uint64_t want_in, uint64_t want_out)
{
	struct brc	*c = bud_rc_get(event_get_base(ev));
	struct bud_rop	*o;
	const char	*argv[11];
	char		 a[6][24];

	if ((o = bud_rc_op_new(c, ev))->o_done)
		return o;
	o->o_gres = res;
	snprintf(a[0], sizeof(a[0]), "%" PRIu64, res->r_win_ms);
	bud_rc_cap_arg(a[1], sizeof(a[1]), caps->cp_has_bytes_in,
	    caps->cp_bytes_in);
	bud_rc_cap_arg(a[2], sizeof(a[2]), caps->cp_has_bytes_out,
	    caps->cp_bytes_out);
	snprintf(a[3], sizeof(a[3]), "%" PRIu64, want_in);
	snprintf(a[4], sizeof(a[4]), "%" PRIu64, want_out);
	snprintf(a[5], sizeof(a[5]), "%" PRIu64, bud_rc_lease_ms());
	argv[0] = "EVALSHA";
	argv[1] = bud_rc_sha(BRS_GRANT);
	argv[2] = "1";
	argv[3] = res->r_key;
	argv[4] = a[0];
	argv[5] = res->r_id;
	argv[6] = a[1];
	argv[7] = a[2];
	argv[8] = a[3];
	argv[9] = a[4];
	argv[10] = a[5];
	bud_rc_cmd(c, grant_cb, o, 11, argv);
	return o;
}

int
bud_rop_grant(const struct bud_rop *o, struct bud_grant *g)
{
	if (!o->o_done || o->o_v != BUD_OK || !o->o_has_grant)
		return -1;
	*g = o->o_grant;
	return 0;
}
