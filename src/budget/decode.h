/*
 * decode: a bounded streaming decoder of HTTP content codings (gzip,
 * deflate, br) for the meter's own reading of a response. The client's
 * bytes are never touched: this only produces a decoded copy, piece by
 * piece, into a fixed buffer handed to a sink.
 *
 * Bounds (a response comes from outside): decoded bytes may exceed
 * DEC_RATIO_MAX times the encoded bytes read so far only by DEC_SLACK
 * (decompression bombs); <max_out> bytes in all when non-zero; memory
 * is a fixed output buffer plus the library state, whose allocations are
 * counted against DEC_MEM_MAX (zlib: about 45 KiB; brotli: its window,
 * which encoders keep at 4 MiB by default). Any bound passed, corrupt
 * input or input after the end stops decoding for good.
 */
#ifndef AIRLOCK_DECODE_H
#define AIRLOCK_DECODE_H

#include <stddef.h>
#include <stdint.h>

#define DEC_RATIO_MAX	256		/* decoded : encoded */
#define DEC_SLACK	(256 * 1024)	/* decoded bytes before the ratio */
#define DEC_MEM_MAX	(4 * 1024 * 1024 + 512 * 1024)
#define DEC_BUF		16384		/* decoded bytes per sink call */

enum dec_coding {
	DEC_IDENTITY = 0,
	DEC_GZIP,		/* also x-gzip */
	DEC_DEFLATE,		/* zlib-wrapped, or raw as some servers send */
	DEC_BR,
	DEC_UNKNOWN,
};

enum dec_status {
	DEC_OK = 0,		/* so far so good (or the stream ended) */
	DEC_CORRUPT,		/* not a valid stream, or bytes after it */
	DEC_BOMB,		/* the ratio bound was passed */
	DEC_TOO_BIG,		/* more than max_out decoded */
	DEC_NOMEM,		/* the library wanted more than DEC_MEM_MAX */
	DEC_TRUNCATED,		/* dec_finish: the stream did not end */
};

/*
 * The coding a Content-Encoding value names (<len> bytes, OWS around
 * allowed, case-insensitive). A list of codings ("gzip, br") and
 * anything unknown give DEC_UNKNOWN; empty or "identity" DEC_IDENTITY.
 */
enum dec_coding	 dec_coding_parse(const char *v, size_t len);
/* 1 when the meter can read <coding>. */
int		 dec_coding_known(const char *v, size_t len);

/*
 * 1 when every coding an Accept-Encoding value accepts (q=0 ones do not
 * count) is one the meter reads: gzip, x-gzip, deflate, br, identity.
 * "*" and any other coding (zstd, compress...) give 0.
 */
int		 dec_accept_readable(const char *v, size_t len);

typedef void	 (*dec_sink)(void *arg, const char *p, size_t len);

struct decoder;

/* A decoder of <coding> (not DEC_IDENTITY / DEC_UNKNOWN: NULL). */
struct decoder	*dec_new(enum dec_coding, uint64_t max_out);
/* Decode <len> more encoded bytes, giving the output to <sink>. Once a
 * status other than DEC_OK was returned, the same one is returned again
 * and nothing more is decoded. */
enum dec_status	 dec_feed(struct decoder *, const char *, size_t,
		    dec_sink sink, void *arg);
/* End of the encoded input: DEC_OK when the stream ended whole. */
enum dec_status	 dec_finish(struct decoder *);
uint64_t	 dec_out_total(const struct decoder *);
const char	*dec_status_str(enum dec_status);
void		 dec_free(struct decoder *);

#endif
