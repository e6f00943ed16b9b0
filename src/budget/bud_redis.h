/*
 * The Redis store's reply reading, apart for tests and the fuzz target
 * (tests/fuzz/fuzz_redis_reply.c). The store's operations are in bud.h.
 */
#ifndef AIRLOCK_BUD_REDIS_H
#define AIRLOCK_BUD_REDIS_H

#include <stddef.h>

#include <hiredis/hiredis.h>

/*
 * An admission script's reply (borrowed, may be NULL): BUD_OK,
 * BUD_EXCEEDED (<why> names the cap), BUD_RATE (*retry seconds), or -1
 * for an error or any shape our script does not return.
 */
int	bud_redis_admit_reply(const redisReply *, char *why, size_t whysz,
	    int *retry);
/*
 * A byte grant in <r> (borrowed, may be NULL) from element <at> on: four
 * integers, in and out granted (>= 0), in and out left (>= 0, or -1: no
 * cap, read as UINT64_MAX). 0 with *g, or -1 for any other shape.
 */
struct bud_grant;
int	bud_redis_grant_reply(const redisReply *, size_t at,
	    struct bud_grant *g);
/*
 * Bound what <r> builds from a server's answer: our scripts answer a few
 * elements, so a multi-bulk of more than BUD_REDIS_MAX_ELEMENTS (a hostile
 * or broken server's "*2000000000") is a reader error, not gigabytes of
 * calloc. Any thread.
 */
#define BUD_REDIS_MAX_ELEMENTS	64
void	bud_redis_reader_guard(redisReader *r);
/*
 * The same bound for a connection that reads listings (the fleet's
 * registry: SMEMBERS of every sandbox, SCAN pages): BUD_REDIS_MAX_LIST
 * elements, at most 8 MiB of pointers for a hostile count.
 */
#define BUD_REDIS_MAX_LIST	(1 << 20)
void	bud_redis_reader_guard_list(redisReader *r);

/* budget_store_auth's password (env:NAME | file:PATH), or NULL (logged);
 * the caller wipes and frees it. Also the fleet registry's (sbx_fleet.c). */
char	*bud_redis_secret(const char *src);

#endif
