/*
 * The Redis store's reply reading (src/budget/bud_redis.c): replies as
 * hiredis's own reader makes them from RESP bytes, each read as an
 * admission script's answer. And the fleet CA (src/ca/ca_fleet.c): the
 * same master key gives the same CA key for a sandbox, another key or
 * sandbox another.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <hiredis/hiredis.h>
#include <openssl/evp.h>

#include "budget/bud.h"
#include "budget/bud_redis.h"
#include "ca/ca.h"
#include "ca/ca_internal.h"
#include "unit.h"

static const struct {
	const char	*resp;
	int		 want;
	const char	*why;
	int		 retry;
} replies[] = {
	{ "*3\r\n:0\r\n$2\r\nok\r\n:0\r\n", BUD_OK, "", 0 },
	{ "*3\r\n:1\r\n$3\r\nusd\r\n:1700000000000\r\n", BUD_EXCEEDED,
	    "usd cap reached (shared)", 0 },
	{ "*3\r\n:2\r\n:3\r\n:0\r\n", BUD_RATE, "rate cap (shared)", 3 },
	{ "*3\r\n:2\r\n:999999\r\n:0\r\n", BUD_RATE, "rate cap (shared)",
	    3600 },
	{ "*3\r\n:2\r\n:0\r\n:0\r\n", -1, NULL, 0 },
	{ "*3\r\n:3\r\n$15\r\nllm_concurrency\r\n:0\r\n", BUD_RATE,
	    "llm_concurrency cap reached (shared): that many metered "
	    "requests are in flight", 1 },
	{ "*3\r\n:3\r\n$3\r\nllm\r\n:0\r\n", -1, NULL, 0 },
	{ "*3\r\n:3\r\n:15\r\n:0\r\n", -1, NULL, 0 },
	{ "*7\r\n:0\r\n$2\r\nok\r\n:0\r\n:65536\r\n:0\r\n:100\r\n"
	    ":-1\r\n", BUD_OK, "", 0 },
	{ "*7\r\n:1\r\n$3\r\nusd\r\n:0\r\n:1\r\n:0\r\n:0\r\n:0\r\n",
	    -1, NULL, 0 },
	{ "-NOSCRIPT No matching script\r\n", -1, NULL, 0 },
	{ ":0\r\n", -1, NULL, 0 },
	{ "*2\r\n:0\r\n$2\r\nok\r\n", -1, NULL, 0 },
	{ "*3\r\n$1\r\n0\r\n$2\r\nok\r\n:0\r\n", -1, NULL, 0 },
	{ "*3\r\n:7\r\n$2\r\nok\r\n:0\r\n", -1, NULL, 0 },
	{ "*3\r\n:1\r\n:5\r\n:0\r\n", -1, NULL, 0 },
	{ "*3\r\n:1\r\n$-1\r\n:0\r\n", -1, NULL, 0 },
	{ "*3\r\n:1\r\n$40\r\n0123456789012345678901234567890123456789"
	    "\r\n:0\r\n", -1, NULL, 0 },
};

START_TEST(test_admit_reply)
{
	redisReader	*rd = redisReaderCreate();
	void		*r = NULL;
	char		 why[96] = "";
	int		 retry = 0, v;

	ck_assert_ptr_nonnull(rd);
	ck_assert_int_eq(redisReaderFeed(rd, replies[_i].resp,
	    strlen(replies[_i].resp)), REDIS_OK);
	ck_assert_int_eq(redisReaderGetReply(rd, &r), REDIS_OK);
	ck_assert_ptr_nonnull(r);
	v = bud_redis_admit_reply(r, why, sizeof(why), &retry);
	ck_assert_int_eq(v, replies[_i].want);
	if (replies[_i].why != NULL)
		ck_assert_str_eq(why, replies[_i].why);
	if (v == BUD_RATE)
		ck_assert_int_eq(retry, replies[_i].retry);
	freeReplyObject(r);
	redisReaderFree(rd);
	ck_assert_int_eq(bud_redis_admit_reply(NULL, why, sizeof(why),
	    &retry), -1);
}
END_TEST

/* Byte grants: {in, out, left_in, left_out}, -1 left = no cap. */
static const struct {
	const char	*resp;
	size_t		 at;
	int		 want;
	uint64_t	 g[4];
} grants[] = {
	{ "*4\r\n:65536\r\n:0\r\n:1000\r\n:-1\r\n", 0, 0,
	    { 65536, 0, 1000, UINT64_MAX } },
	{ "*4\r\n:0\r\n:0\r\n:0\r\n:0\r\n", 0, 0, { 0, 0, 0, 0 } },
	{ "*7\r\n:0\r\n$2\r\nok\r\n:0\r\n:5\r\n:6\r\n:7\r\n:8\r\n", 3,
	    0, { 5, 6, 7, 8 } },
	{ "*4\r\n:-1\r\n:0\r\n:0\r\n:0\r\n", 0, -1, { 0 } },
	{ "*4\r\n:1\r\n:0\r\n:-2\r\n:0\r\n", 0, -1, { 0 } },
	{ "*3\r\n:1\r\n:0\r\n:0\r\n", 0, -1, { 0 } },
	{ "*4\r\n:1\r\n$1\r\n0\r\n:0\r\n:0\r\n", 0, -1, { 0 } },
	{ "*3\r\n:0\r\n$2\r\nok\r\n:0\r\n", 3, -1, { 0 } },
	{ "-ERR x\r\n", 0, -1, { 0 } },
};

START_TEST(test_grant_reply)
{
	redisReader		*rd = redisReaderCreate();
	void			*r = NULL;
	struct bud_grant	 g;

	ck_assert_ptr_nonnull(rd);
	ck_assert_int_eq(redisReaderFeed(rd, grants[_i].resp,
	    strlen(grants[_i].resp)), REDIS_OK);
	ck_assert_int_eq(redisReaderGetReply(rd, &r), REDIS_OK);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(bud_redis_grant_reply(r, grants[_i].at, &g),
	    grants[_i].want);
	if (grants[_i].want == 0) {
		ck_assert_uint_eq(g.bg_in, grants[_i].g[0]);
		ck_assert_uint_eq(g.bg_out, grants[_i].g[1]);
		ck_assert_uint_eq(g.bg_left_in, grants[_i].g[2]);
		ck_assert_uint_eq(g.bg_left_out, grants[_i].g[3]);
	}
	freeReplyObject(r);
	redisReaderFree(rd);
	ck_assert_int_eq(bud_redis_grant_reply(NULL, 0, &g), -1);
}
END_TEST

static char *
key_file(const char *fill)
{
	char	*path = strdup("/tmp/airlock-fleetkey-XXXXXX");
	int	 fd = mkstemp(path);

	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(write(fd, fill, strlen(fill)), (ssize_t)strlen(fill));
	close(fd);
	return path;
}

/* a multi-bulk over the bound is the reader's error, whatever it claims */
START_TEST(test_reader_guard)
{
	redisReader	*rd = redisReaderCreate();
	void		*reply = NULL;
	char		 big[32];

	ck_assert_ptr_nonnull(rd);
	bud_redis_reader_guard(rd);
	snprintf(big, sizeof(big), "*%d\r\n", BUD_REDIS_MAX_ELEMENTS + 1);
	ck_assert_int_eq(redisReaderFeed(rd, "*2000000000\r\n", 13), REDIS_OK);
	ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_ERR);
	ck_assert_ptr_null(reply);
	redisReaderFree(rd);
	rd = redisReaderCreate();
	bud_redis_reader_guard(rd);
	ck_assert_int_eq(redisReaderFeed(rd, big, strlen(big)), REDIS_OK);
	ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_ERR);
	redisReaderFree(rd);
	/* at the bound: an ordinary array */
	rd = redisReaderCreate();
	bud_redis_reader_guard(rd);
	ck_assert_int_eq(redisReaderFeed(rd, "*2\r\n:1\r\n:2\r\n", 12),
	    REDIS_OK);
	ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
	ck_assert_ptr_nonnull(reply);
	ck_assert_int_eq(((redisReply *)reply)->elements, 2);
	freeReplyObject(reply);
	redisReaderFree(rd);
}

/* the fleet registry's bound: a listing of a fleet's sandboxes (over the
   scripts' bound) is read; a hostile count still is the reader's error */
START_TEST(test_reader_guard_list)
{
	redisReader	*rd;
	void		*reply = NULL;
	char		 big[32], item[16];
	int		 i, n = BUD_REDIS_MAX_ELEMENTS * 4;

	rd = redisReaderCreate();
	ck_assert_ptr_nonnull(rd);
	bud_redis_reader_guard_list(rd);
	snprintf(big, sizeof(big), "*%d\r\n", n);
	ck_assert_int_eq(redisReaderFeed(rd, big, strlen(big)), REDIS_OK);
	for (i = 0; i < n; i++) {
		snprintf(item, sizeof(item), "$2\r\n%02d\r\n", i % 100);
		ck_assert_int_eq(redisReaderFeed(rd, item, strlen(item)),
		    REDIS_OK);
	}
	ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
	ck_assert_ptr_nonnull(reply);
	ck_assert_int_eq(((redisReply *)reply)->elements, n);
	freeReplyObject(reply);
	redisReaderFree(rd);
	rd = redisReaderCreate();
	bud_redis_reader_guard_list(rd);
	snprintf(big, sizeof(big), "*%d\r\n", BUD_REDIS_MAX_LIST + 1);
	ck_assert_int_eq(redisReaderFeed(rd, big, strlen(big)), REDIS_OK);
	ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_ERR);
	ck_assert_ptr_null(reply);
	redisReaderFree(rd);
	rd = redisReaderCreate();
	bud_redis_reader_guard_list(rd);
	ck_assert_int_eq(redisReaderFeed(rd, "*2000000000\r\n", 13), REDIS_OK);
	ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_ERR);
	redisReaderFree(rd);
}
END_TEST

START_TEST(test_fleet_key)
{
	char		*a = key_file("0123456789abcdef0123456789abcdef");
	char		*b = key_file("fedcba9876543210fedcba9876543210");
	char		*s = key_file("too short");
	EVP_PKEY	*k1, *k2, *k3, *k4;

	ck_assert_int_eq(ca_fleet_set_key(s), -1);
	ck_assert_int_eq(ca_fleet_on(), 0);
	ck_assert_int_eq(ca_fleet_set_key(a), 0);
	ck_assert_int_eq(ca_fleet_on(), 1);
	k1 = ca_fleet_key("sb-1");
	k2 = ca_fleet_key("sb-1");
	k3 = ca_fleet_key("sb-2");
	ck_assert_int_eq(ca_fleet_set_key(b), 0);
	k4 = ca_fleet_key("sb-1");
	ck_assert_ptr_nonnull(k1);
	ck_assert_int_eq(EVP_PKEY_eq(k1, k2), 1);
	ck_assert_int_ne(EVP_PKEY_eq(k1, k3), 1);
	ck_assert_int_ne(EVP_PKEY_eq(k1, k4), 1);
	EVP_PKEY_free(k1);
	EVP_PKEY_free(k2);
	EVP_PKEY_free(k3);
	EVP_PKEY_free(k4);
	ca_fleet_clear();
	ck_assert_int_eq(ca_fleet_on(), 0);
	unlink(a);
	unlink(b);
	unlink(s);
	free(a);
	free(b);
	free(s);
}
END_TEST

Suite *
suite_bud_redis(void)
{
	Suite	*s = suite_create("bud_redis");
	TCase	*tc = tcase_create("reply");

	tcase_add_loop_test(tc, test_admit_reply, 0,
	    (int)(sizeof(replies) / sizeof(replies[0])));
	tcase_add_loop_test(tc, test_grant_reply, 0,
	    (int)(sizeof(grants) / sizeof(grants[0])));
	tcase_add_test(tc, test_reader_guard);
	tcase_add_test(tc, test_reader_guard_list);
	suite_add_tcase(s, tc);
	tc = tcase_create("fleet_ca");
	tcase_add_test(tc, test_fleet_key);
	suite_add_tcase(s, tc);
	return s;
}
