/*
 * libFuzzer: what a hostile or broken Redis can answer the Redis store
 * (budget_store: redis://). The bytes go through hiredis's own reply
 * reader, as on the gateway's connection, split in two feeds at byte 0's
 * value; every reply it yields is read as an admission script's answer
 * (bud_redis_admit_reply). A verdict must be one of ours and its text
 * bounded.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "budget/bud.h"
#include "budget/bud_redis.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	redisReader	*rd;
	void		*reply;
	char		 why[96];
	struct bud_grant	 g;
	size_t		 split;
	int		 v, retry, n = 0;

	if (size < 1)
		return 0;
	split = data[0] % size;
	data++;
	size--;
	if ((rd = redisReaderCreate()) == NULL)
		return 0;
	bud_redis_reader_guard(rd);	/* as on the gateway's connection */
	if (redisReaderFeed(rd, (const char *)data, split > size ? size :
	    split) != REDIS_OK)
		goto out;
	if (split < size && redisReaderFeed(rd, (const char *)data + split,
	    size - split) != REDIS_OK)
		goto out;
	while (n++ < 64 && redisReaderGetReply(rd, &reply) == REDIS_OK &&
	    reply != NULL) {
		why[0] = '\0';
		retry = 0;
		v = bud_redis_admit_reply(reply, why, sizeof(why), &retry);
		if (v != -1 && v != BUD_OK && v != BUD_EXCEEDED &&
		    v != BUD_RATE)
			abort();
		if (v == BUD_RATE && (retry < 1 || retry > 3600))
			abort();
		if (strlen(why) >= sizeof(why))
			abort();
		/* a byte grant: alone, or after an admission's three */
		if (bud_redis_grant_reply(reply, 0, &g) == 0 &&
		    (g.bg_in > INT64_MAX || g.bg_out > INT64_MAX))
			abort();
		(void)bud_redis_grant_reply(reply, 3, &g);
		freeReplyObject(reply);
	}
	/* the NULL reply a dropped connection gives */
	if (bud_redis_admit_reply(NULL, why, sizeof(why), &retry) != -1)
		abort();
 out:
	redisReaderFree(rd);
	return 0;
}
