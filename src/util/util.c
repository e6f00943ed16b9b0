#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/un.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "util/log.h"
#include "util/util.h"

void *
xmalloc(size_t n)
{
	void	*p;

	if ((p = malloc(n == 0 ? 1 : n)) == NULL)
		fatal("malloc");
	return p;
}

void *
xcalloc(size_t n, size_t sz)
{
	void	*p;

	if ((p = calloc(n == 0 ? 1 : n, sz == 0 ? 1 : sz)) == NULL)
		fatal("calloc");
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	if ((p = realloc(p, n == 0 ? 1 : n)) == NULL)
		fatal("realloc");
	return p;
}

char *
xstrdup(const char *s)
{
	char	*p;

	if ((p = strdup(s)) == NULL)
		fatal("strdup");
	return p;
}

char *
xstrndup(const char *s, size_t n)
{
	char	*p;

	if ((p = strndup(s, n)) == NULL)
		fatal("strndup");
	return p;
}

uint64_t
util_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

size_t
util_copy_str(char *dst, const char *src, size_t dstsz)
{
	size_t	n = strnlen(src, dstsz - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
	return n;
}

size_t
util_u64_dec(uint64_t v, char *out)
{
	char	tmp[21];
	size_t	n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	out[n] = '\0';
	return n;
}

void
util_hex_fixed(uint64_t v, int ndigits, char *out)
{
	static const char	hex[] = "0123456789abcdef";

	while (ndigits-- > 0) {
		out[ndigits] = hex[v & 0xf];
		v >>= 4;
	}
}

uint64_t
util_now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t
util_wall_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
util_rfc3339_ms(uint64_t wall_ms, char *buf, size_t bufsz)
{
	time_t		t = (time_t)(wall_ms / 1000);
	struct tm	tm;
	char		tmp[32];
	unsigned	f[] = { 0, 0, 0, 0, 0, 0, (unsigned)(wall_ms % 1000) };
	static const char sep[] = "--T::.Z";
	size_t		i, n = 0;

	/* digits by hand: one audit record each, strftime and snprintf
	   showed in the per-request profile */
	gmtime_r(&t, &tm);
	f[0] = (unsigned)(tm.tm_year + 1900) % 10000;
	f[1] = (unsigned)tm.tm_mon + 1;
	f[2] = (unsigned)tm.tm_mday;
	f[3] = (unsigned)tm.tm_hour;
	f[4] = (unsigned)tm.tm_min;
	f[5] = (unsigned)tm.tm_sec;
	for (i = 0; i < 7; i++) {
		if (i == 0) {
			tmp[n++] = (char)('0' + f[i] / 1000);
			tmp[n++] = (char)('0' + f[i] / 100 % 10);
		} else if (i == 6)
			tmp[n++] = (char)('0' + f[i] / 100);
		tmp[n++] = (char)('0' + f[i] / 10 % 10);
		tmp[n++] = (char)('0' + f[i] % 10);
		tmp[n++] = sep[i];
	}
	tmp[n] = '\0';
	util_copy_str(buf, tmp, bufsz);
}

int
util_base64_decode(const char *in, size_t inlen, char *out, size_t outsz)
{
	unsigned char	*tmp;
	int		 n, pad = 0;

	if (inlen == 0 || inlen % 4 != 0 || inlen / 4 * 3 + 1 > outsz ||
	    inlen > 4096)
		return -1;
	tmp = xmalloc(inlen / 4 * 3 + 1);
	n = EVP_DecodeBlock(tmp, (const unsigned char *)in, (int)inlen);
	if (n < 0) {
		free(tmp);
		return -1;
	}
	/* EVP_DecodeBlock counts padding as zero bytes: take them off */
	if (in[inlen - 1] == '=')
		pad++;
	if (in[inlen - 2] == '=')
		pad++;
	n -= pad;
	memcpy(out, tmp, (size_t)n);
	out[n] = '\0';
	OPENSSL_cleanse(tmp, inlen / 4 * 3 + 1);
	free(tmp);
	return n;
}

void
util_random_hex(char *out, size_t len)
{
	unsigned char	b[64];

	if (len > sizeof(b))
		len = sizeof(b);
	if (RAND_bytes(b, (int)len) != 1)
		fatalx("RAND_bytes failed");
	util_hex_encode(b, len, out);
}

void
util_trim_ows(const char **s, size_t *len)
{
	while (*len > 0 && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*len)--;
	}
	while (*len > 0 && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t'))
		(*len)--;
}

int
util_secret_eq(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char	da[SHA256_DIGEST_LENGTH], db[SHA256_DIGEST_LENGTH];

	/* hash first so the comparison time does not depend on lengths */
	SHA256((const unsigned char *)a, alen, da);
	SHA256((const unsigned char *)b, blen, db);
	return CRYPTO_memcmp(da, db, sizeof(da)) == 0 && alen == blen;
}

/* SipHash-2-4 (Aumasson, Bernstein), as in the reference implementation. */
#define US_ROTL(x, b)	(uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define US_SIPROUND do {						\
	v0 += v1; v1 = US_ROTL(v1, 13); v1 ^= v0; v0 = US_ROTL(v0, 32);	\
	v2 += v3; v3 = US_ROTL(v3, 16); v3 ^= v2;			\
	v0 += v3; v3 = US_ROTL(v3, 21); v3 ^= v0;			\
	v2 += v1; v1 = US_ROTL(v1, 17); v1 ^= v2; v2 = US_ROTL(v2, 32);	\
} while (0)

uint64_t
util_siphash(uint64_t k0, uint64_t k1, const unsigned char *in, size_t len)
{
	uint64_t	v0 = k0 ^ 0x736f6d6570736575ULL;
	uint64_t	v1 = k1 ^ 0x646f72616e646f6dULL;
	uint64_t	v2 = k0 ^ 0x6c7967656e657261ULL;
	uint64_t	v3 = k1 ^ 0x7465646279746573ULL;
	uint64_t	b = (uint64_t)len << 56, m;
	size_t		i, j;

	for (i = 0; i + 8 <= len; i += 8) {
		for (m = 0, j = 0; j < 8; j++)
			m |= (uint64_t)in[i + j] << (8 * j);
		v3 ^= m;
		US_SIPROUND;
		US_SIPROUND;
		v0 ^= m;
	}
	for (j = 0; i + j < len; j++)
		b |= (uint64_t)in[i + j] << (8 * j);
	v3 ^= b;
	US_SIPROUND;
	US_SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	US_SIPROUND;
	US_SIPROUND;
	US_SIPROUND;
	US_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* Write (<out>) or read all <len> bytes; a short end is EIO. */
static int
fd_all(int fd, char *p, size_t len, int out)
{
	ssize_t	n;

	while (len > 0) {
		n = out ? write(fd, p, len) : read(fd, p, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
util_write_all(int fd, const void *buf, size_t len)
{
	return fd_all(fd, (char *)(uintptr_t)buf, len, 1);
}

int
util_read_all(int fd, void *buf, size_t len)
{
	return fd_all(fd, buf, len, 0);
}

int
util_unix_connect(const char *path)
{
	struct sockaddr_un	sun;
	int			fd, e;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int
util_file_private(const struct stat *st)
{
	return (st->st_mode & 077) == 0;
}

int
util_open_secret(const char *path, char *why, size_t whysz)
{
	struct stat	st;
	int		fd;

	/* O_NONBLOCK: a FIFO must not hang the load (refused below). */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) ==
	    -1 || fstat(fd, &st) == -1) {
		snprintf(why, whysz, "cannot read file \"%s\": %s", path,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whysz, "file \"%s\" is not a regular file", path);
		close(fd);
		return -1;
	}
	if (!util_file_private(&st)) {
		snprintf(why, whysz, "file \"%s\" is readable by group or "
		    "others (mode %04o): chmod 600 it", path,
		    (unsigned)(st.st_mode & 07777));
		close(fd);
		return -1;
	}
	return fd;
}

int
util_hex_val(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
util_unreserved(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

char *
util_pct_encode(const char *in, size_t len)
{
	static const char	 hex[] = "0123456789ABCDEF";
	char			*out = xmalloc(3 * len + 1), *p = out;
	unsigned char		 c;
	size_t			 i;

	for (i = 0; i < len; i++) {
		c = (unsigned char)in[i];
		if (util_unreserved(c))
			*p++ = (char)c;
		else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	return out;
}

void
util_hex_encode(const unsigned char *in, size_t len, char *out)
{
	static const char	hex[] = "0123456789abcdef";
	size_t			i;

	for (i = 0; i < len; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * len] = '\0';
}

int
util_is_lower_hex(const char *s, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}
