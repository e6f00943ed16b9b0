/*
 * decode: the meter's bounded decoder of gzip, deflate and br, alone
 * (round trips at every split, truncation, bytes after the end, bombs,
 * the size and memory bounds, Accept-Encoding) and under the meter: every
 * recorded fixture, served compressed and split at every byte, meters
 * exactly what it does uncompressed.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <brotli/encode.h>
#include <zlib.h>

#include "budget/bud.h"
#include "budget/decode.h"
#include "unit.h"

struct sinkbuf {
	char	*sb_buf;
	size_t	 sb_len;
	size_t	 sb_cap;
	int	 sb_discard;	/* count only */
};

static void
sink(void *arg, const char *p, size_t len)
{
	struct sinkbuf	*b = arg;

	ck_assert_uint_le(len, DEC_BUF);
	if (!b->sb_discard) {
		if (b->sb_len + len > b->sb_cap) {
			b->sb_cap = (b->sb_len + len) * 2;
			b->sb_buf = realloc(b->sb_buf, b->sb_cap);
			ck_assert_ptr_nonnull(b->sb_buf);
		}
		memcpy(b->sb_buf + b->sb_len, p, len);
	}
	b->sb_len += len;
}

/* ---- encoders (zlib, libbrotlienc) ---------------------------------- */

/* <bits>: 16+15 gzip, 15 zlib-wrapped deflate, -15 raw deflate. */
static char *
z_encode(const char *in, size_t len, int bits, size_t *outlen)
{
	z_stream	z;
	char		*out;
	size_t		 cap = compressBound((uLong)len) + 64;

	memset(&z, 0, sizeof(z));
	ck_assert_int_eq(deflateInit2(&z, 9, Z_DEFLATED, bits, 9,
	    Z_DEFAULT_STRATEGY), Z_OK);
	out = malloc(cap);
	ck_assert_ptr_nonnull(out);
	z.next_in = (unsigned char *)(uintptr_t)in;
	z.avail_in = (uInt)len;
	z.next_out = (unsigned char *)out;
	z.avail_out = (uInt)cap;
	ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	*outlen = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

static char *
br_encode(const char *in, size_t len, int quality, int lgwin,
    size_t *outlen)
{
	size_t	 cap = BrotliEncoderMaxCompressedSize(len) + 64;
	char	*out = malloc(cap);

	ck_assert_ptr_nonnull(out);
	*outlen = cap;
	ck_assert(BrotliEncoderCompress(quality, lgwin, BROTLI_MODE_TEXT, len,
	    (const uint8_t *)in, outlen, (uint8_t *)out));
	return out;
}

static const enum dec_coding	codings[] = { DEC_GZIP, DEC_DEFLATE, DEC_BR };
static const char *const	coding_names[] = { "gzip", "deflate", "br" };

static char *
encode(enum dec_coding c, const char *in, size_t len, size_t *outlen)
{
	switch (c) {
	case DEC_GZIP:
		return z_encode(in, len, 16 + 15, outlen);
	case DEC_DEFLATE:
		return z_encode(in, len, 15, outlen);
	default:
		return br_encode(in, len, 5, 22, outlen);
	}
}

/* Decode <enc> in two feeds split at <at>. */
static enum dec_status
decode_split(enum dec_coding c, const char *enc, size_t len, size_t at,
    uint64_t max_out, struct sinkbuf *out)
{
	struct decoder	*d = dec_new(c, max_out);
	enum dec_status	 st;

	ck_assert_ptr_nonnull(d);
	out->sb_len = 0;
	st = dec_feed(d, enc, at, sink, out);
	if (st == DEC_OK)
		st = dec_feed(d, enc + at, len - at, sink, out);
	if (st == DEC_OK)
		st = dec_finish(d);
	dec_free(d);
	return st;
}

static char *
sample_text(size_t len)
{
	char		*b = malloc(len + 1);
	uint64_t	 x = 88172645463325252ULL;
	size_t		 i;

	ck_assert_ptr_nonnull(b);
	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = "data: {\"usage\":12345}\n abcdefgh"[x % 32];
	}
	b[len] = '\0';
	return b;
}

/* ---- the decoder alone ---------------------------------------------- */

START_TEST(test_roundtrip_every_split)
{
	struct sinkbuf	 out = { NULL, 0, 0, 0 };
	char		*text = sample_text(3000), *enc;
	size_t		 elen, at;

	enc = encode(codings[_i], text, 3000, &elen);
	for (at = 0; at <= elen; at++) {
		ck_assert_msg(decode_split(codings[_i], enc, elen, at, 0,
		    &out) == DEC_OK, "%s split at %zu", coding_names[_i], at);
		ck_assert_uint_eq(out.sb_len, 3000);
		ck_assert(memcmp(out.sb_buf, text, 3000) == 0);
	}
	free(enc);
	free(text);
	free(out.sb_buf);
}
END_TEST

/* Raw deflate (no zlib header), as some servers send for "deflate". */
START_TEST(test_raw_deflate)
{
	struct sinkbuf	 out = { NULL, 0, 0, 0 };
	char		*text = sample_text(5000), *enc;
	size_t		 elen, at;

	enc = z_encode(text, 5000, -15, &elen);
	for (at = 0; at <= elen; at++) {
		ck_assert_int_eq(decode_split(DEC_DEFLATE, enc, elen, at, 0,
		    &out), DEC_OK);
		ck_assert_uint_eq(out.sb_len, 5000);
		ck_assert(memcmp(out.sb_buf, text, 5000) == 0);
	}
	free(enc);
	free(text);
	free(out.sb_buf);
}
END_TEST

/* Every prefix of a stream is truncated, never whole. */
START_TEST(test_truncated)
{
	struct sinkbuf	 out = { NULL, 0, 0, 1 };
	char		*text = sample_text(2000), *enc;
	size_t		 elen, cut;
	enum dec_status	 st;

	enc = encode(codings[_i], text, 2000, &elen);
	for (cut = 0; cut < elen; cut++) {
		st = decode_split(codings[_i], enc, cut, cut / 2, 0, &out);
		ck_assert_msg(st == DEC_TRUNCATED, "%s cut at %zu of %zu: %s",
		    coding_names[_i], cut, elen, dec_status_str(st));
		ck_assert_uint_le(out.sb_len, 2000);
	}
	free(enc);
	free(text);
}
END_TEST

/* Bytes after the end: corrupt for deflate and br; gzip members chain. */
START_TEST(test_after_end)
{
	struct sinkbuf	 out = { NULL, 0, 0, 0 };
	char		*text = sample_text(700), *enc, *two;
	size_t		 elen;

	enc = encode(codings[_i], text, 700, &elen);
	two = malloc(2 * elen);
	ck_assert_ptr_nonnull(two);
	memcpy(two, enc, elen);
	memcpy(two + elen, enc, elen);
	if (codings[_i] == DEC_GZIP) {
		ck_assert_int_eq(decode_split(DEC_GZIP, two, 2 * elen, elen + 3,
		    0, &out), DEC_OK);
		ck_assert_uint_eq(out.sb_len, 1400);
	} else
		ck_assert_int_eq(decode_split(codings[_i], two, 2 * elen,
		    elen / 2, 0, &out), DEC_CORRUPT);
	ck_assert_int_ne(decode_split(codings[_i], two, elen + 1, elen, 0,
	    &out), DEC_OK);
	free(two);
	free(enc);
	free(text);
	free(out.sb_buf);
}
END_TEST

/* 64 MiB of one byte compresses to almost nothing: stopped at the ratio,
 * having decoded no more than the bound allows. */
START_TEST(test_bomb)
{
	const size_t	 big = 64u << 20;
	struct sinkbuf	 out = { NULL, 0, 0, 1 };
	struct decoder	*d;
	char		*zeros = calloc(1, big), *enc;
	size_t		 elen, off, n;
	enum dec_status	 st = DEC_OK;

	ck_assert_ptr_nonnull(zeros);
	enc = encode(codings[_i], zeros, big, &elen);
	free(zeros);
	ck_assert_uint_lt(elen * DEC_RATIO_MAX, big);
	d = dec_new(codings[_i], 0);
	for (off = 0; off < elen && st == DEC_OK; off += n) {
		n = elen - off < 1000 ? elen - off : 1000;
		st = dec_feed(d, enc + off, n, sink, &out);
	}
	ck_assert_msg(st == DEC_BOMB, "%s: %s", coding_names[_i],
	    dec_status_str(st));
	ck_assert_uint_le(out.sb_len, (uint64_t)elen * DEC_RATIO_MAX +
	    DEC_SLACK);
	ck_assert_int_eq(dec_feed(d, enc, 1, sink, &out), DEC_BOMB);
	ck_assert_int_eq(dec_finish(d), DEC_BOMB);
	dec_free(d);
	free(enc);
}
END_TEST

/* A bound on the decoded size (limits.body_bytes for a JSON body). */
START_TEST(test_max_out)
{
	struct sinkbuf	 out = { NULL, 0, 0, 1 };
	char		*text = sample_text(100000), *enc;
	size_t		 elen;

	enc = encode(codings[_i], text, 100000, &elen);
	ck_assert_int_eq(decode_split(codings[_i], enc, elen, elen / 3, 99999,
	    &out), DEC_TOO_BIG);
	ck_assert_uint_le(out.sb_len, 99999);
	ck_assert_int_eq(decode_split(codings[_i], enc, elen, elen / 3,
	    100000, &out), DEC_OK);
	free(enc);
	free(text);
}
END_TEST

/* A brotli window of 16 MiB over incompressible data wants more memory
 * than the decoder may take. */
START_TEST(test_br_memory_bound)
{
	const size_t	 len = 12u << 20;
	struct sinkbuf	 out = { NULL, 0, 0, 1 };
	char		*noise = malloc(len), *enc;
	uint64_t	 x = 0x9e3779b97f4a7c15ULL;
	size_t		 i, elen;

	ck_assert_ptr_nonnull(noise);
	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		noise[i] = (char)(x >> 24);
	}
	enc = br_encode(noise, len, 0, 24, &elen);
	free(noise);
	ck_assert_int_eq(decode_split(DEC_BR, enc, elen, elen / 2, 0, &out),
	    DEC_NOMEM);
	free(enc);
}
END_TEST

/* Garbage and flipped bytes: never a crash, never a whole stream. */
START_TEST(test_corrupt)
{
	struct sinkbuf	 out = { NULL, 0, 0, 1 };
	char		*text = sample_text(4000), *enc;
	size_t		 elen, i;
	enum dec_status	 st;

	enc = encode(codings[_i], text, 4000, &elen);
	for (i = 0; i < elen; i += 1 + elen / 97) {
		enc[i] ^= 0x5a;
		st = decode_split(codings[_i], enc, elen, i / 2, 0, &out);
		/* a flip in a gzip name or brotli padding may go unseen, a
		   flip in the data changes the CRC: no crash either way */
		ck_assert(st != DEC_BOMB && st != DEC_NOMEM);
		enc[i] ^= 0x5a;
	}
	st = decode_split(codings[_i], "<html>502</html>", 16, 5, 0, &out);
	ck_assert_int_ne(st, DEC_OK);
	free(enc);
	free(text);
}
END_TEST

START_TEST(test_codings)
{
	ck_assert_int_eq(dec_coding_parse(" GZip ", 6), DEC_GZIP);
	ck_assert_int_eq(dec_coding_parse("x-gzip", 6), DEC_GZIP);
	ck_assert_int_eq(dec_coding_parse("deflate", 7), DEC_DEFLATE);
	ck_assert_int_eq(dec_coding_parse("br", 2), DEC_BR);
	ck_assert_int_eq(dec_coding_parse("", 0), DEC_IDENTITY);
	ck_assert_int_eq(dec_coding_parse("identity", 8), DEC_IDENTITY);
	ck_assert_int_eq(dec_coding_parse("zstd", 4), DEC_UNKNOWN);
	ck_assert_int_eq(dec_coding_parse("gzip, br", 8), DEC_UNKNOWN);
	ck_assert_ptr_null(dec_new(DEC_IDENTITY, 0));
	ck_assert_ptr_null(dec_new(DEC_UNKNOWN, 0));
#define ACC(s) dec_accept_readable(s, strlen(s))
	ck_assert(ACC("gzip, deflate, br"));
	ck_assert(ACC("gzip;q=1.0, identity; q=0.5"));
	ck_assert(ACC("br,gzip"));
	ck_assert(ACC(""));
	ck_assert(ACC("zstd;q=0, gzip"));
	ck_assert(!ACC("gzip, deflate, br, zstd"));
	ck_assert(!ACC("*"));
	ck_assert(!ACC("compress"));
	ck_assert(!ACC("gzip, zstd;q=0.1"));
#undef ACC
}
END_TEST

/* ---- under the meter ------------------------------------------------ */

/* Bodies that always run, ../shared or not. */
static const struct {
	const char		*name;
	enum meter_dialect	 dialect;
	int			 sse;
	const char		*body;
	uint64_t		 input, cached, output;
} embedded[] = {
	{ "openai json", METER_OPENAI, 0,
	    "{\"id\":\"chatcmpl-1\",\"model\":\"gpt-4o-mini\",\"choices\":[{"
	    "\"message\":{\"role\":\"assistant\",\"content\":\"Hi!\"}}],"
	    "\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":9,"
	    "\"prompt_tokens_details\":{\"cached_tokens\":64}}}", 120, 64, 9 },
	{ "openai-compatible stream (vLLM)", METER_OPENAI, 1,
	    "data: {\"id\":\"cmpl-a\",\"object\":\"chat.completion.chunk\","
	    "\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{"
	    "\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"
	    "data: {\"id\":\"cmpl-a\",\"model\":\"meta-llama/Llama-3.1-8B-"
	    "Instruct\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
	    "\"lo\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\""
	    ":31,\"total_tokens\":33,\"completion_tokens\":2}}\n\n"
	    "data: [DONE]\n\n", 31, 0, 2 },
	{ "anthropic stream", METER_ANTHROPIC, 1,
	    "event: message_start\ndata: {\"type\":\"message_start\","
	    "\"message\":{\"model\":\"claude-sonnet-4\",\"usage\":{"
	    "\"input_tokens\":25,\"cache_read_input_tokens\":100,"
	    "\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":"
	    "\"message_delta\",\"usage\":{\"output_tokens\":15}}\n\n",
	    125, 100, 15 },
	{ "gemini array", METER_GEMINI, 0,
	    "[{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"]}\\\"\"}]}}"
	    "],\"usageMetadata\":{\"promptTokenCount\":7,\"totalTokenCount\":7}"
	    ",\"modelVersion\":\"gemini-2.0-flash\"}\r\n,\r\n{\"candidates\":[],"
	    "\"usageMetadata\":{\"promptTokenCount\":7,\"candidatesTokenCount\""
	    ":3,\"thoughtsTokenCount\":5,\"totalTokenCount\":15},"
	    "\"modelVersion\":\"gemini-2.0-flash\"}]", 7, 0, 8 },
};

static void
run_encoded(enum meter_dialect dialect, int sse, enum dec_coding c,
    const char *enc, size_t elen, size_t at, struct usage *u)
{
	struct meter	*m = meter_new(dialect, sse, 1 << 20);
	const char	*name = coding_names[c - DEC_GZIP];

	ck_assert_int_eq(meter_encoding(m, name, strlen(name)), 0);
	meter_feed(m, enc, at);
	meter_feed(m, enc + at, elen - at);
	meter_finish(m, u);
	meter_free(m);
}

static void
check_compressed(const char *what, enum meter_dialect dialect, int sse,
    const char *body, size_t len, const struct usage *want)
{
	struct usage	 u;
	char		*enc;
	size_t		 elen, at, i;

	for (i = 0; i < sizeof(codings) / sizeof(codings[0]); i++) {
		enc = encode(codings[i], body, len, &elen);
		for (at = 0; at <= elen; at++) {
			run_encoded(dialect, sse, codings[i], enc, elen, at, &u);
			ck_assert_msg(u.u_found == want->u_found &&
			    u.u_input == want->u_input &&
			    u.u_cached == want->u_cached &&
			    u.u_cache_write == want->u_cache_write &&
			    u.u_output == want->u_output,
			    "%s, %s, split at %zu: found %d in %llu cached %llu "
			    "out %llu", what, coding_names[i], at, u.u_found,
			    (unsigned long long)u.u_input,
			    (unsigned long long)u.u_cached,
			    (unsigned long long)u.u_output);
		}
		/* cut short: nothing reported for sure */
		run_encoded(dialect, sse, codings[i], enc, elen - 1,
		    (elen - 1) / 2, &u);
		ck_assert_msg(u.u_found == 0, "%s, %s: truncated yet found",
		    what, coding_names[i]);
		free(enc);
	}
}

START_TEST(test_meter_embedded)
{
	struct usage	want;

	memset(&want, 0, sizeof(want));
	want.u_found = 1;
	want.u_input = embedded[_i].input;
	want.u_cached = embedded[_i].cached;
	want.u_output = embedded[_i].output;
	check_compressed(embedded[_i].name, embedded[_i].dialect,
	    embedded[_i].sse, embedded[_i].body, strlen(embedded[_i].body),
	    &want);
}
END_TEST

START_TEST(test_meter_fixture)
{
	const struct unit_llm_fixture	*f;
	size_t				 n, len;
	char				*body;

	f = &unit_llm_fixtures(&n)[_i];
	body = unit_slurp(f->path, &len);
	ck_assert_msg(body != NULL, "%s: cannot read", f->path);
	check_compressed(f->name, f->dialect, f->sse, body, len, &f->want);
	free(body);
}
END_TEST

/* A coding the meter does not read: no usage, whatever the body. */
START_TEST(test_meter_unknown_coding)
{
	struct meter	*m = meter_new(METER_OPENAI, 0, 1 << 20);
	struct usage	 u;

	ck_assert_int_eq(meter_encoding(m, "zstd", 4), -1);
	meter_feed(m, embedded[0].body, strlen(embedded[0].body));
	meter_finish(m, &u);
	ck_assert_int_eq(u.u_found, 0);
	meter_free(m);
	m = meter_new(METER_OPENAI, 0, 1 << 20);
	ck_assert_int_eq(meter_encoding(m, " identity", 9), 0);
	meter_feed(m, embedded[0].body, strlen(embedded[0].body));
	meter_finish(m, &u);
	ck_assert_int_eq(u.u_found, 1);
	meter_free(m);
}
END_TEST

/* A bomb behind a metered response: the meter gives up, bounded. */
START_TEST(test_meter_bomb)
{
	const size_t	 big = 32u << 20;
	struct meter	*m;
	struct usage	 u;
	char		*body = malloc(big), *enc;
	size_t		 elen, off, n;

	ck_assert_ptr_nonnull(body);
	/* blank lines, then the usage event: found if read to the end */
	memset(body, '\n', big);
	memcpy(body + big - 90, "data: {\"model\":\"gpt-4o\",\"usage\":{"
	    "\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n", 76);
	enc = z_encode(body, big, 16 + 15, &elen);
	free(body);
	m = meter_new(METER_OPENAI, 1, 0);
	ck_assert_int_eq(meter_encoding(m, "gzip", 4), 0);
	for (off = 0; off < elen; off += n) {
		n = elen - off < 4096 ? elen - off : 4096;
		meter_feed(m, enc + off, n);
	}
	meter_finish(m, &u);
	ck_assert_int_eq(u.u_found, 0);
	meter_free(m);
	free(enc);
}
END_TEST

Suite *
suite_decode(void)
{
	Suite	*s = suite_create("decode");
	TCase	*tc = tcase_create("decoder");
	size_t	 n;

	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_roundtrip_every_split, 0, 3);
	tcase_add_test(tc, test_raw_deflate);
	tcase_add_loop_test(tc, test_truncated, 0, 3);
	tcase_add_loop_test(tc, test_after_end, 0, 3);
	tcase_add_loop_test(tc, test_bomb, 0, 3);
	tcase_add_loop_test(tc, test_max_out, 0, 3);
	tcase_add_test(tc, test_br_memory_bound);
	tcase_add_loop_test(tc, test_corrupt, 0, 3);
	tcase_add_test(tc, test_codings);
	suite_add_tcase(s, tc);
	tc = tcase_create("metered");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_meter_embedded, 0,
	    (int)(sizeof(embedded) / sizeof(embedded[0])));
	tcase_add_test(tc, test_meter_unknown_coding);
	tcase_add_test(tc, test_meter_bomb);
	(void)unit_llm_fixtures(&n);
	tcase_add_loop_test(tc, test_meter_fixture, 0, (int)n);
	suite_add_tcase(s, tc);
	return s;
}
