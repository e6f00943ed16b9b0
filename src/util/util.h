/* Small helpers shared by every plane. */
#ifndef AIRLOCK_UTIL_H
#define AIRLOCK_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xrealloc(void *, size_t);
char	*xstrdup(const char *);
char	*xstrndup(const char *, size_t);

/* Monotonic and wall clocks in milliseconds. */
uint64_t util_now_ms(void);
uint64_t util_now_us(void);	/* monotonic, microseconds */
uint64_t util_wall_ms(void);

/* RFC 3339 UTC with milliseconds: "2026-11-29T09:20:35.123Z". */
void	util_rfc3339_ms(uint64_t wall_ms, char *buf, size_t bufsz);

/*
 * Decode standard base64 (with padding) into <out> (at most <outsz>-1
 * bytes, NUL-terminated). Returns the decoded length or -1.
 */
int	util_base64_decode(const char *in, size_t inlen, char *out,
	    size_t outsz);

/* <src> into <dst> of <dstsz> (> 0) bytes, cut to fit, NUL-terminated;
 * returns the length written. snprintf("%s") without the format. */
size_t	util_copy_str(char *dst, const char *src, size_t dstsz);

/* Decimal digits of <v> into <out> (at least 21 bytes, NUL-terminated);
 * returns their count. For hot paths, where snprintf costs too much. */
size_t	util_u64_dec(uint64_t v, char *out);
/* The low <ndigits> hex digits of <v>, zero-padded, into <out> (no NUL). */
void	util_hex_fixed(uint64_t v, int ndigits, char *out);

/* SipHash-2-4 of <in> under the key (k0, k1): hash tables keyed by
 * what a client sends, so collisions cannot be chosen. */
uint64_t util_siphash(uint64_t k0, uint64_t k1, const unsigned char *in,
	    size_t len);

/* Lowercase hex of <len> random bytes into <out> (2*len+1). */
void	util_random_hex(char *out, size_t len);

/* ASCII case-insensitive compare of a (ptr,len) with a C string. */
/* Inline: with a literal <lit> its length folds to a constant, and the
 * header scans (http_msg_find, the hop-by-hop test) run it per field. */
static inline int
util_strncaseeq(const char *s, size_t len, const char *lit)
{
	return strlen(lit) == len && strncasecmp(s, lit, len) == 0;
}

/* Trim spaces and tabs at both ends of (ptr,len) in place. */
void	util_trim_ows(const char **s, size_t *len);

/* Write or read exactly <len> bytes (EINTR retried). 0, or -1 with errno
 * (EIO when the peer ended early). */
int	util_write_all(int fd, const void *buf, size_t len);
int	util_read_all(int fd, void *buf, size_t len);

/* A blocking connection to the unix socket <path>; -1 with errno. */
int	util_unix_connect(const char *path);

/*
 * A secret file's secrecy (relayd check_file_secrecy()): is the mode of
 * <st> closed to group and others?
 */
struct stat;
int	util_file_private(const struct stat *st);
/*
 * Open <path> read-only as a secret file: a regular file that neither
 * group nor others can read (a FIFO does not hang the caller). The fd,
 * or -1 with the reason, naming <path>, in <why>.
 */
int	util_open_secret(const char *path, char *why, size_t whysz);
/* <len> bytes as lower-case hex, NUL-terminated (2 * len + 1 bytes). */
void	util_hex_encode(const unsigned char *in, size_t len, char *out);
/* The value of hex digit <c> (either case), or -1. */
int	util_hex_val(int c);
/* RFC 3986 unreserved: ALPHA DIGIT - . _ ~ */
int	util_unreserved(int c);
/* <len> bytes percent-encoded but the unreserved ones (%XX upper case),
 * NUL-terminated; caller frees. */
char	*util_pct_encode(const char *in, size_t len);
/* Are the <len> bytes of <s> all lower-case hex digits? */
int	util_is_lower_hex(const char *s, size_t len);

/* Constant-time equality of two secrets of any length. */
int	util_secret_eq(const char *a, size_t alen, const char *b, size_t blen);

#endif
