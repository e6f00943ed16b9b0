/*
 * Bounded streaming decoding of gzip, deflate and br for the meter
 * (decode.h). zlib and libbrotli do the decoding; this file only feeds
 * them in pieces, bounds what they may produce and allocate, and tells
 * a whole stream from a truncated or corrupt one.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <brotli/decode.h>
#include <zlib.h>

#include "budget/decode.h"
#include "util/util.h"

struct decoder {
	enum dec_coding		 d_coding;
	enum dec_status		 d_status;	/* sticky once not DEC_OK */
	int			 d_ended;	/* the stream's end was read */
	int			 d_started;	/* library state set up */
	uint64_t		 d_in;		/* encoded bytes taken */
	uint64_t		 d_out;		/* decoded bytes given */
	uint64_t		 d_max_out;	/* 0: no bound but the ratio */
	size_t			 d_mem;		/* library allocations */
	/* deflate: zlib-wrapped or raw is told by the first two bytes */
	unsigned char		 d_head[2];
	size_t			 d_head_len;
	z_stream		 d_z;
	BrotliDecoderState	*d_br;
	char			 d_buf[DEC_BUF];
};

/* Every allocation of a library carries its size in front of it. */
struct dec_block {
	size_t	db_size;
	size_t	db_pad;		/* keeps the payload 16-byte aligned */
};

static void *
mem_alloc(struct decoder *d, size_t size)
{
	struct dec_block	*b;

	if (size > DEC_MEM_MAX || d->d_mem + size > DEC_MEM_MAX)
		return NULL;
	if ((b = malloc(sizeof(*b) + size)) == NULL)
		return NULL;
	b->db_size = size;
	d->d_mem += size;
	return b + 1;
}

static void
mem_free(struct decoder *d, void *p)
{
	struct dec_block	*b;

	if (p == NULL)
		return;
	b = (struct dec_block *)p - 1;
	d->d_mem -= b->db_size;
	free(b);
}

static voidpf
z_alloc(voidpf opaque, uInt items, uInt size)
{
	if (size != 0 && items > SIZE_MAX / size)
		return NULL;
	return mem_alloc(opaque, (size_t)items * size);
}

static void
z_free(voidpf opaque, voidpf p)
{
	mem_free(opaque, p);
}

static void *
br_alloc(void *opaque, size_t size)
{
	return mem_alloc(opaque, size);
}

static void
br_free(void *opaque, void *p)
{
	mem_free(opaque, p);
}

/* ---- codings -------------------------------------------------------- */

enum dec_coding
dec_coding_parse(const char *v, size_t len)
{
	util_trim_ows(&v, &len);
	if (len == 0 || util_strncaseeq(v, len, "identity"))
		return DEC_IDENTITY;
	if (util_strncaseeq(v, len, "gzip") || util_strncaseeq(v, len,
	    "x-gzip"))
		return DEC_GZIP;
	if (util_strncaseeq(v, len, "deflate"))
		return DEC_DEFLATE;
	if (util_strncaseeq(v, len, "br"))
		return DEC_BR;
	return DEC_UNKNOWN;
}

int
dec_coding_known(const char *v, size_t len)
{
	return dec_coding_parse(v, len) != DEC_UNKNOWN;
}

static int
q_is_zero(const char *q, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++)
		if (q[i] != '0' && q[i] != '.')
			return 0;
	return 1;
}

/* One element of an Accept-Encoding list: "coding *( OWS ; param )". */
static int
accept_elem_readable(const char *v, size_t len)
{
	const char	*semi = memchr(v, ';', len), *q;
	size_t		 clen = semi != NULL ? (size_t)(semi - v) : len, qlen;

	util_trim_ows(&v, &clen);
	if (clen == 0)
		return 1;
	if (semi != NULL) {
		/* "q=0": not acceptable, whatever it names */
		q = semi + 1;
		qlen = len - (size_t)(q - v);
		util_trim_ows(&q, &qlen);
		if (qlen >= 3 && (q[0] == 'q' || q[0] == 'Q') && q[1] == '=' &&
		    q_is_zero(q + 2, qlen - 2))
			return 1;
	}
	return dec_coding_parse(v, clen) != DEC_UNKNOWN;
}

int
dec_accept_readable(const char *v, size_t len)
{
	const char	*comma;
	size_t		 n;

	while (len > 0) {
		comma = memchr(v, ',', len);
		n = comma != NULL ? (size_t)(comma - v) : len;
		if (!accept_elem_readable(v, n))
			return 0;
		if (comma == NULL)
			break;
		v += n + 1;
		len -= n + 1;
	}
	return 1;
}

const char *
dec_status_str(enum dec_status st)
{
	switch (st) {
	case DEC_OK:
		return "ok";
	case DEC_CORRUPT:
		return "corrupt encoded body";
	case DEC_BOMB:
		return "decompression ratio bound passed";
	case DEC_TOO_BIG:
		return "decoded body over its bound";
	case DEC_NOMEM:
		return "decoder memory bound passed";
	case DEC_TRUNCATED:
		return "encoded body truncated";
	}
	return "?";
}

/* ---- bounds --------------------------------------------------------- */

/* Give <n> decoded bytes to the sink, unless a bound is passed. */
static enum dec_status
emit(struct decoder *d, size_t n, dec_sink sink, void *arg)
{
	uint64_t	allowed;

	if (n == 0)
		return DEC_OK;
	d->d_out += n;
	if (d->d_max_out != 0 && d->d_out > d->d_max_out)
		return DEC_TOO_BIG;
	allowed = d->d_in > (UINT64_MAX - DEC_SLACK) / DEC_RATIO_MAX ?
	    UINT64_MAX : d->d_in * DEC_RATIO_MAX + DEC_SLACK;
	if (d->d_out > allowed)
		return DEC_BOMB;
	sink(arg, d->d_buf, n);
	return DEC_OK;
}

/* ---- zlib (gzip, deflate) ------------------------------------------- */

static enum dec_status
z_start(struct decoder *d, int window_bits)
{
	d->d_z.zalloc = z_alloc;
	d->d_z.zfree = z_free;
	d->d_z.opaque = d;
	if (inflateInit2(&d->d_z, window_bits) != Z_OK)
		return DEC_NOMEM;
	d->d_started = 1;
	return DEC_OK;
}

/* Inflate <len> bytes; a gzip body may hold several members. */
static enum dec_status
z_feed(struct decoder *d, const unsigned char *p, size_t len, dec_sink sink,
    void *arg)
{
	enum dec_status	st;
	uInt		take;
	int		rc;

	while (len > 0) {
		if (d->d_ended) {
			if (d->d_coding != DEC_GZIP)
				return DEC_CORRUPT;	/* after the end */
			if (inflateReset(&d->d_z) != Z_OK)
				return DEC_CORRUPT;
			d->d_ended = 0;
		}
		take = len > 65536 ? 65536 : (uInt)len;
		d->d_z.next_in = (unsigned char *)(uintptr_t)p;
		d->d_z.avail_in = take;
		do {
			d->d_z.next_out = (unsigned char *)d->d_buf;
			d->d_z.avail_out = sizeof(d->d_buf);
			rc = inflate(&d->d_z, Z_NO_FLUSH);
			if (rc == Z_MEM_ERROR)
				return DEC_NOMEM;
			if (rc != Z_OK && rc != Z_STREAM_END &&
			    rc != Z_BUF_ERROR)
				return DEC_CORRUPT;
			st = emit(d, sizeof(d->d_buf) - d->d_z.avail_out, sink,
			    arg);
			if (st != DEC_OK)
				return st;
			if (rc == Z_STREAM_END) {
				d->d_ended = 1;
				break;
			}
			if (rc == Z_BUF_ERROR && d->d_z.avail_in != 0)
				return DEC_CORRUPT;	/* no progress */
		} while (d->d_z.avail_in > 0 || d->d_z.avail_out == 0);
		take -= d->d_z.avail_in;
		d->d_in += take;
		p += take;
		len -= take;
	}
	return DEC_OK;
}

/*
 * "deflate" is meant as zlib-wrapped (RFC 9110 section 8.4.1.2), but
 * servers have sent raw deflate: a zlib header is a CMF byte of method 8
 * whose pair with FLG is a multiple of 31.
 */
static enum dec_status
deflate_feed(struct decoder *d, const unsigned char *p, size_t len,
    dec_sink sink, void *arg)
{
	enum dec_status	st;
	unsigned char	head[2];
	int		zlib_wrapped;

	if (d->d_started)
		return z_feed(d, p, len, sink, arg);
	while (d->d_head_len < 2 && len > 0) {
		d->d_head[d->d_head_len++] = *p++;
		len--;
	}
	if (d->d_head_len < 2)
		return DEC_OK;
	zlib_wrapped = (d->d_head[0] & 0x0f) == 8 &&
	    (d->d_head[0] * 256 + d->d_head[1]) % 31 == 0;
	if ((st = z_start(d, zlib_wrapped ? 15 : -15)) != DEC_OK)
		return st;
	memcpy(head, d->d_head, 2);
	if ((st = z_feed(d, head, 2, sink, arg)) != DEC_OK)
		return st;
	return z_feed(d, p, len, sink, arg);
}

/* ---- brotli --------------------------------------------------------- */

static enum dec_status
br_feed(struct decoder *d, const unsigned char *p, size_t len, dec_sink sink,
    void *arg)
{
	BrotliDecoderResult	 rc;
	enum dec_status		 st;
	const uint8_t		*next_in = p;
	size_t			 avail_in = len, avail_out, before;
	uint8_t			*next_out;

	if (d->d_ended)
		return len > 0 ? DEC_CORRUPT : DEC_OK;
	for (;;) {
		next_out = (uint8_t *)d->d_buf;
		avail_out = sizeof(d->d_buf);
		before = avail_in;
		rc = BrotliDecoderDecompressStream(d->d_br, &avail_in,
		    &next_in, &avail_out, &next_out, NULL);
		d->d_in += before - avail_in;
		if (rc == BROTLI_DECODER_RESULT_ERROR)
			return BrotliDecoderGetErrorCode(d->d_br) <=
			    BROTLI_DECODER_ERROR_ALLOC_CONTEXT_MODES &&
			    BrotliDecoderGetErrorCode(d->d_br) >=
			    BROTLI_DECODER_ERROR_ALLOC_BLOCK_TYPE_TREES ?
			    DEC_NOMEM : DEC_CORRUPT;
		st = emit(d, sizeof(d->d_buf) - avail_out, sink, arg);
		if (st != DEC_OK)
			return st;
		if (rc == BROTLI_DECODER_RESULT_SUCCESS) {
			d->d_ended = 1;
			return avail_in > 0 ? DEC_CORRUPT : DEC_OK;
		}
		if (rc == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT)
			return DEC_OK;
		/* NEEDS_MORE_OUTPUT: go round with an empty buffer */
	}
}

/* ---- interface ------------------------------------------------------ */

struct decoder *
dec_new(enum dec_coding coding, uint64_t max_out)
{
	struct decoder	*d;

	if (coding != DEC_GZIP && coding != DEC_DEFLATE && coding != DEC_BR)
		return NULL;
	d = xcalloc(1, sizeof(*d));
	d->d_coding = coding;
	d->d_max_out = max_out;
	if (coding == DEC_GZIP)
		d->d_status = z_start(d, 16 + 15);
	else if (coding == DEC_BR) {
		d->d_br = BrotliDecoderCreateInstance(br_alloc, br_free, d);
		d->d_status = d->d_br != NULL ? DEC_OK : DEC_NOMEM;
	}
	return d;
}

enum dec_status
dec_feed(struct decoder *d, const char *p, size_t len, dec_sink sink,
    void *arg)
{
	const unsigned char	*u = (const unsigned char *)p;

	if (d->d_status != DEC_OK || len == 0)
		return d->d_status;
	switch (d->d_coding) {
	case DEC_GZIP:
		d->d_status = z_feed(d, u, len, sink, arg);
		break;
	case DEC_DEFLATE:
		d->d_status = deflate_feed(d, u, len, sink, arg);
		break;
	case DEC_BR:
		d->d_status = br_feed(d, u, len, sink, arg);
		break;
	default:
		d->d_status = DEC_CORRUPT;
		break;
	}
	return d->d_status;
}

enum dec_status
dec_finish(struct decoder *d)
{
	if (d->d_status == DEC_OK && !d->d_ended)
		d->d_status = DEC_TRUNCATED;
	return d->d_status;
}

uint64_t
dec_out_total(const struct decoder *d)
{
	return d->d_out;
}

void
dec_free(struct decoder *d)
{
	if (d == NULL)
		return;
	if (d->d_started)
		inflateEnd(&d->d_z);
	if (d->d_br != NULL)
		BrotliDecoderDestroyInstance(d->d_br);
	free(d);
}
