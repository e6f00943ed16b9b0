/*
 * Budget while a request flows: bytes charged in batches as they move
 * (one lock per batch, never per byte), with the room left under the
 * bytes caps handed back so the caller can stop at the cap; and the
 * number of metered LLM requests a sandbox has in flight
 * (caps.llm_concurrency).
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>

#include "budget/bud.h"
#include "budget/bud_internal.h"
#include "cfg/cfg.h"

static uint64_t
add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* What may still pass under <cap> after <used>; UINT64_MAX: no cap. */
static uint64_t
room_of(int has, uint64_t cap, uint64_t used)
{
	if (!has)
		return UINT64_MAX;
	return used >= cap ? 0 : cap - used;
}

struct bud_sb *
bud_handle(const char *sandbox)
{
	if (sandbox == NULL || sandbox[0] == '\0')
		return NULL;
	return bud_find(sandbox, 1);
}

int
bud_charge(struct bud_sb *sb, const struct cfg_caps *caps, uint64_t in,
    uint64_t out, struct bud_room *room)
{
	struct bud_counters	*c;
	int			 over;

	room->br_in = room->br_out = UINT64_MAX;
	if (sb == NULL)
		return 0;
	c = &sb->sb_c;
	pthread_mutex_lock(&sb->sb_lock);
	bud_roll_known(sb);
	c->bc_bytes_in = add_sat(c->bc_bytes_in, in);
	c->bc_bytes_out = add_sat(c->bc_bytes_out, out);
	sb->sb_d_in = add_sat(sb->sb_d_in, in);
	sb->sb_d_out = add_sat(sb->sb_d_out, out);
	if (caps != NULL) {
		room->br_in = room_of(caps->cp_has_bytes_in, caps->cp_bytes_in,
		    c->bc_bytes_in);
		room->br_out = room_of(caps->cp_has_bytes_out,
		    caps->cp_bytes_out, c->bc_bytes_out);
	}
	over = caps != NULL &&
	    ((caps->cp_has_bytes_in && c->bc_bytes_in > caps->cp_bytes_in) ||
	    (caps->cp_has_bytes_out && c->bc_bytes_out > caps->cp_bytes_out));
	pthread_mutex_unlock(&sb->sb_lock);
	return over ? -1 : 0;
}

int
bud_llm_enter(struct bud_sb *sb, uint64_t limit)
{
	int	rc = 0;

	if (sb == NULL || limit == 0)
		return 0;
	pthread_mutex_lock(&sb->sb_lock);
	if (sb->sb_llm >= limit)
		rc = -1;
	else
		sb->sb_llm++;
	pthread_mutex_unlock(&sb->sb_lock);
	return rc;
}

void
bud_llm_leave(struct bud_sb *sb)
{
	if (sb == NULL)
		return;
	pthread_mutex_lock(&sb->sb_lock);
	if (sb->sb_llm > 0)
		sb->sb_llm--;
	pthread_mutex_unlock(&sb->sb_lock);
}

uint64_t
bud_llm_inflight(const char *sandbox)
{
	struct bud_sb	*sb;
	uint64_t	 n;

	if (sandbox == NULL || (sb = bud_find(sandbox, 0)) == NULL)
		return 0;
	pthread_mutex_lock(&sb->sb_lock);
	n = sb->sb_llm;
	pthread_mutex_unlock(&sb->sb_lock);
	return n;
}
