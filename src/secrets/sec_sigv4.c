/*
 * AWS Signature Version 4, header form. Pure: no I/O, no clock (the caller
 * gives the time). Checked against AWS's published test suites (see
 * tests/unit/test_sec_sigv4.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "secrets/sec.h"
#include "util/util.h"

#define SIGV4_ALGO	"AWS4-HMAC-SHA256"

/*
 * Growable string. The canonical request can carry the session token, so
 * growing wipes the old block instead of leaving it to realloc.
 */
struct sbuf {
	char	*b;
	size_t	 len;
	size_t	 cap;
};

/* One canonical header line, before duplicates are merged. */
struct chdr {
	char	*name;		/* lowercase */
	char	*value;		/* trimmed, space-folded */
	size_t	 order;		/* input position: keeps duplicates in order */
};

/* One canonical query parameter. */
struct cparam {
	char	*name;		/* encoded */
	char	*value;		/* encoded */
};

static void
sb_grow(struct sbuf *sb, size_t need)
{
	char	*nb;
	size_t	 ncap;

	if (sb->len + need + 1 <= sb->cap)
		return;
	ncap = sb->cap ? sb->cap : 256;
	while (ncap < sb->len + need + 1)
		ncap *= 2;
	nb = xmalloc(ncap);
	if (sb->b != NULL) {
		memcpy(nb, sb->b, sb->len);
		OPENSSL_cleanse(sb->b, sb->cap);
		free(sb->b);
	}
	sb->b = nb;
	sb->cap = ncap;
}

static void
sb_add(struct sbuf *sb, const char *s, size_t n)
{
	sb_grow(sb, n);
	memcpy(sb->b + sb->len, s, n);
	sb->len += n;
	sb->b[sb->len] = '\0';
}

static void
sb_adds(struct sbuf *sb, const char *s)
{
	sb_add(sb, s, strlen(s));
}

static void
sb_addc(struct sbuf *sb, char c)
{
	sb_add(sb, &c, 1);
}

static void
sb_wipe(struct sbuf *sb)
{
	if (sb->b != NULL) {
		OPENSSL_cleanse(sb->b, sb->cap);
		free(sb->b);
	}
	memset(sb, 0, sizeof(*sb));
}

/* Hand the string over (NUL-terminated, never NULL). */
static char *
sb_take(struct sbuf *sb)
{
	char	*s;

	if (sb->b == NULL)
		sb_grow(sb, 0);
	sb->b[sb->len] = '\0';
	s = sb->b;
	memset(sb, 0, sizeof(*sb));
	return s;
}

static void
str_wipe_free(char *s)
{
	if (s == NULL)
		return;
	OPENSSL_cleanse(s, strlen(s));
	free(s);
}

/* AWS's UriEncode(): RFC 3986 unreserved kept, the rest %XX uppercase. */
static void
uri_encode(struct sbuf *sb, const char *s, size_t n, int keep_slash)
{
	static const char	 hex[] = "0123456789ABCDEF";
	unsigned char		 c;
	char			 e[3];
	size_t			 i;

	for (i = 0; i < n; i++) {
		c = (unsigned char)s[i];
		if (util_unreserved(c) || (keep_slash && c == '/'))
			sb_addc(sb, (char)c);
		else {
			e[0] = '%';
			e[1] = hex[c >> 4];
			e[2] = hex[c & 15];
			sb_add(sb, e, 3);
		}
	}
}

/*
 * Percent-decode (ptr,len) into <sb>. A '%' not followed by two hex digits
 * stays literal; '+' stays '+' (RFC 3986, not form encoding).
 */
static void
uri_decode(struct sbuf *sb, const char *s, size_t n)
{
	size_t	i;
	int	hi, lo;

	for (i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n &&
		    (hi = util_hex_val((unsigned char)s[i + 1])) >= 0 &&
		    (lo = util_hex_val((unsigned char)s[i + 2])) >= 0) {
			sb_addc(sb, (char)(hi << 4 | lo));
			i += 2;
		} else
			sb_addc(sb, s[i]);
	}
}

/* Decode then encode: one canonical spelling whatever the client chose. */
static void
uri_reencode(struct sbuf *sb, const char *s, size_t n)
{
	struct sbuf	tmp = { NULL, 0, 0 };

	uri_decode(&tmp, s, n);
	uri_encode(sb, tmp.b ? tmp.b : "", tmp.len, 0);
	sb_wipe(&tmp);
}

/*
 * Canonical URI.
 * normalize (every service but S3): RFC 3986 dot segments removed, empty
 * segments dropped (AWS's suite collapses "//"), then each segment of the
 * wire path encoded once more: AWS's "encode twice", since the wire form
 * is already encoded once.
 * !normalize (S3): segments kept as they are, each decoded and re-encoded
 * once, so the canonical form is the single encoding of the object key.
 */
static void
canon_path(struct sbuf *sb, const char *path, int normalize)
{
	const char	**seg = NULL;
	size_t		 *seglen = NULL, nseg = 0, n, i, len;
	const char	 *p, *end, *slash;
	int		  trailing = 0;

	if (path == NULL || *path == '\0') {
		sb_addc(sb, '/');
		return;
	}
	len = strlen(path);
	end = path + len;
	if (!normalize) {
		for (p = path; p < end; p = slash + 1) {
			if ((slash = memchr(p, '/', (size_t)(end - p))) == NULL)
				slash = end;
			uri_reencode(sb, p, (size_t)(slash - p));
			if (slash < end)
				sb_addc(sb, '/');
		}
		return;
	}
	/* a segment per byte at most: sized once */
	seg = xcalloc(len + 1, sizeof(*seg));
	seglen = xcalloc(len + 1, sizeof(*seglen));
	for (p = path; p <= end; p = slash + 1) {
		if ((slash = memchr(p, '/', (size_t)(end - p))) == NULL)
			slash = end;
		n = (size_t)(slash - p);
		trailing = 0;
		if (n == 0 || (n == 1 && p[0] == '.')) {
			/* "a/" and "a/." both end in a directory */
			trailing = 1;
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (nseg > 0)
				nseg--;
			trailing = 1;
		} else {
			seg[nseg] = p;
			seglen[nseg++] = n;
		}
		if (slash == end)
			break;
	}
	sb_addc(sb, '/');
	for (i = 0; i < nseg; i++) {
		uri_encode(sb, seg[i], seglen[i], 0);
		if (i + 1 < nseg || trailing)
			sb_addc(sb, '/');
	}
	free(seg);
	free(seglen);
}

static int
param_cmp(const void *a, const void *b)
{
	const struct cparam	*pa = a, *pb = b;
	int			 c;

	if ((c = strcmp(pa->name, pb->name)) != 0)
		return c;
	return strcmp(pa->value, pb->value);
}

/*
 * Canonical query: split on '&' (empty pieces dropped), each name and value
 * decoded and re-encoded, a missing value is "", sorted by encoded name then
 * value, joined as name=value with '&'.
 */
static void
canon_query(struct sbuf *sb, const char *q)
{
	struct cparam	*ps = NULL;
	struct sbuf	 t;
	const char	*p, *end, *amp, *eq;
	size_t		 np = 0, cap = 0, i;

	if (q == NULL || *q == '\0')
		return;
	end = q + strlen(q);
	for (p = q; p <= end; p = amp + 1) {
		if ((amp = memchr(p, '&', (size_t)(end - p))) == NULL)
			amp = end;
		if (amp > p) {
			if (np == cap) {
				cap = cap ? cap * 2 : 8;
				ps = xrealloc(ps, cap * sizeof(*ps));
			}
			if ((eq = memchr(p, '=', (size_t)(amp - p))) == NULL)
				eq = amp;
			memset(&t, 0, sizeof(t));
			uri_reencode(&t, p, (size_t)(eq - p));
			ps[np].name = sb_take(&t);
			uri_reencode(&t, eq < amp ? eq + 1 : amp,
			    eq < amp ? (size_t)(amp - eq - 1) : 0);
			ps[np++].value = sb_take(&t);
		}
		if (amp == end)
			break;
	}
	qsort(ps, np, sizeof(*ps), param_cmp);
	for (i = 0; i < np; i++) {
		if (i > 0)
			sb_addc(sb, '&');
		sb_adds(sb, ps[i].name);
		sb_addc(sb, '=');
		sb_adds(sb, ps[i].value);
		/* query parameters can carry credentials (presigned URLs) */
		str_wipe_free(ps[i].name);
		str_wipe_free(ps[i].value);
	}
	free(ps);
}

static int
chdr_cmp(const void *a, const void *b)
{
	const struct chdr	*ha = a, *hb = b;
	int			 c;

	if ((c = strcmp(ha->name, hb->name)) != 0)
		return c;
	/* stable: same-name values keep their order */
	return ha->order < hb->order ? -1 : ha->order > hb->order;
}

static int
is_ows(char c)
{
	/* CR and LF too: an obs-folded value signs as one line */
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Trimmed, runs of whitespace folded to one space (AWS's Trimall). */
static char *
canon_value(const char *v, size_t n)
{
	char	*out, *o;
	size_t	 i;
	int	 space = 0;

	out = o = xmalloc(n + 1);
	for (i = 0; i < n; i++) {
		if (is_ows(v[i])) {
			space = 1;
			continue;
		}
		if (space && o > out)
			*o++ = ' ';
		space = 0;
		*o++ = v[i];
	}
	*o = '\0';
	return out;
}

/* A token (RFC 9110): what may go into the canonical name list. */
static int
valid_name(const char *s, size_t n)
{
	size_t		i;
	unsigned char	c;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}",
		    c) != NULL)
			return 0;
	}
	return 1;
}

static void
chdr_add(struct chdr **hs, size_t *nh, size_t *cap, const char *name,
    size_t nlen, const char *value, size_t vlen)
{
	size_t	i;

	if (*nh == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		*hs = xrealloc(*hs, *cap * sizeof(**hs));
	}
	(*hs)[*nh].name = xstrndup(name, nlen);
	for (i = 0; i < nlen; i++)
		if ((*hs)[*nh].name[i] >= 'A' && (*hs)[*nh].name[i] <= 'Z')
			(*hs)[*nh].name[i] += 'a' - 'A';
	(*hs)[*nh].value = canon_value(value, vlen);
	(*hs)[*nh].order = *nh;
	(*nh)++;
}

static int
hmac_sha256(const unsigned char *key, size_t klen, const char *msg,
    size_t mlen, unsigned char out[SHA256_DIGEST_LENGTH])
{
	unsigned int	olen = SHA256_DIGEST_LENGTH;

	if (HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
	    mlen, out, &olen) == NULL || olen != SHA256_DIGEST_LENGTH)
		return -1;
	return 0;
}

/*
 * Signature = hex(HMAC(kSigning, sts)), kSigning the HMAC chain over
 * "AWS4"+secret, date, region, service, "aws4_request". Every key of the
 * chain is wiped before returning.
 */
static int
sign_sts(const struct sigv4_req *r, const char *date, const char *sts,
    char sig[2 * SHA256_DIGEST_LENGTH + 1])
{
	unsigned char	 k[SHA256_DIGEST_LENGTH], k2[SHA256_DIGEST_LENGTH];
	unsigned char	 mac[SHA256_DIGEST_LENGTH];
	unsigned char	*ksecret;
	size_t		 slen;
	int		 rc = -1;

	slen = strlen(r->secret_key);
	ksecret = xmalloc(slen + 4);
	memcpy(ksecret, "AWS4", 4);
	memcpy(ksecret + 4, r->secret_key, slen);
	if (hmac_sha256(ksecret, slen + 4, date, strlen(date), k) == -1 ||
	    hmac_sha256(k, sizeof(k), r->region, strlen(r->region), k2) == -1 ||
	    hmac_sha256(k2, sizeof(k2), r->service, strlen(r->service),
	    k) == -1 ||
	    hmac_sha256(k, sizeof(k), "aws4_request", 12, k2) == -1 ||
	    hmac_sha256(k2, sizeof(k2), sts, strlen(sts), mac) == -1)
		goto out;
	util_hex_encode(mac, sizeof(mac), sig);
	rc = 0;
out:
	OPENSSL_cleanse(ksecret, slen + 4);
	free(ksecret);
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(k2, sizeof(k2));
	OPENSSL_cleanse(mac, sizeof(mac));
	return rc;
}

int
sigv4_sign(const struct sigv4_req *r, struct sigv4_out *o)
{
	struct chdr	*hs = NULL;
	struct sbuf	 creq = { NULL, 0, 0 }, sh = { NULL, 0, 0 };
	struct sbuf	 sts = { NULL, 0, 0 };
	struct tm	 tm;
	unsigned char	 d[SHA256_DIGEST_LENGTH];
	char		 date[9], hash[2 * SHA256_DIGEST_LENGTH + 1];
	char		 sig[2 * SHA256_DIGEST_LENGTH + 1], scope[512];
	const char	*name;
	size_t		 nh = 0, cap = 0, i, nlen;
	int		 n, rc = -1;

	memset(o, 0, sizeof(*o));
	if (r->method == NULL || r->payload_hash == NULL ||
	    r->region == NULL || r->service == NULL || r->access_key == NULL ||
	    r->secret_key == NULL || (r->nheaders > 0 && r->headers == NULL))
		return -1;
	if (gmtime_r(&r->when, &tm) == NULL ||
	    strftime(o->amz_date, sizeof(o->amz_date), "%Y%m%dT%H%M%SZ",
	    &tm) != 16)
		return -1;
	memcpy(date, o->amz_date, 8);
	date[8] = '\0';
	n = snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date,
	    r->region, r->service);
	if (n < 0 || (size_t)n >= sizeof(scope))
		return -1;

	/*
	 * Headers. What the signer adds itself replaces whatever the caller
	 * passed under that name, so no name is signed twice; Authorization
	 * is never signed.
	 */
	for (i = 0; i < r->nheaders; i++) {
		name = r->headers[i].name;
		nlen = r->headers[i].name_len;
		/* a NUL would cut the value short in the canonical form */
		if (name == NULL || !valid_name(name, nlen) ||
		    (r->headers[i].value == NULL &&
		    r->headers[i].value_len > 0) ||
		    (r->headers[i].value_len > 0 &&
		    memchr(r->headers[i].value, '\0',
		    r->headers[i].value_len) != NULL))
			goto out;
		if (util_strncaseeq(name, nlen, "authorization") ||
		    util_strncaseeq(name, nlen, "x-amz-date") ||
		    (r->session_token != NULL &&
		    util_strncaseeq(name, nlen, "x-amz-security-token")) ||
		    (r->add_content_sha256 &&
		    util_strncaseeq(name, nlen, "x-amz-content-sha256")))
			continue;
		chdr_add(&hs, &nh, &cap, name, nlen,
		    r->headers[i].value ? r->headers[i].value : "",
		    r->headers[i].value_len);
	}
	chdr_add(&hs, &nh, &cap, "x-amz-date", 10, o->amz_date, 16);
	if (r->session_token != NULL)
		chdr_add(&hs, &nh, &cap, "x-amz-security-token", 20,
		    r->session_token, strlen(r->session_token));
	if (r->add_content_sha256)
		chdr_add(&hs, &nh, &cap, "x-amz-content-sha256", 20,
		    r->payload_hash, strlen(r->payload_hash));
	qsort(hs, nh, sizeof(*hs), chdr_cmp);

	/* canonical request */
	sb_adds(&creq, r->method);
	sb_addc(&creq, '\n');
	canon_path(&creq, r->path, r->normalize_path);
	sb_addc(&creq, '\n');
	canon_query(&creq, r->query);
	sb_addc(&creq, '\n');
	for (i = 0; i < nh; i++) {
		if (i > 0 && strcmp(hs[i].name, hs[i - 1].name) == 0) {
			/* a repeated header: its values joined with ',' */
			sb_addc(&creq, ',');
			sb_adds(&creq, hs[i].value);
			continue;
		}
		if (i > 0)
			sb_addc(&creq, '\n');
		sb_adds(&creq, hs[i].name);
		sb_addc(&creq, ':');
		sb_adds(&creq, hs[i].value);
		if (sh.len > 0)
			sb_addc(&sh, ';');
		sb_adds(&sh, hs[i].name);
	}
	sb_adds(&creq, "\n\n");
	sb_add(&creq, sh.b, sh.len);
	sb_addc(&creq, '\n');
	sb_adds(&creq, r->payload_hash);

	/* string to sign */
	if (EVP_Digest(creq.b, creq.len, d, NULL, EVP_sha256(), NULL) != 1)
		goto out;
	util_hex_encode(d, sizeof(d), hash);
	sb_adds(&sts, SIGV4_ALGO "\n");
	sb_adds(&sts, o->amz_date);
	sb_addc(&sts, '\n');
	sb_adds(&sts, scope);
	sb_addc(&sts, '\n');
	sb_adds(&sts, hash);

	if (sign_sts(r, date, sts.b, sig) == -1)
		goto out;
	n = snprintf(o->authorization, sizeof(o->authorization),
	    SIGV4_ALGO " Credential=%s/%s, SignedHeaders=%s, Signature=%s",
	    r->access_key, scope, sh.b, sig);
	if (n < 0 || (size_t)n >= sizeof(o->authorization))
		goto out;
	o->canonical_request = sb_take(&creq);
	o->string_to_sign = sb_take(&sts);
	rc = 0;
out:
	for (i = 0; i < nh; i++) {
		str_wipe_free(hs[i].name);
		str_wipe_free(hs[i].value);
	}
	free(hs);
	sb_wipe(&creq);
	sb_wipe(&sts);
	sb_wipe(&sh);
	OPENSSL_cleanse(sig, sizeof(sig));
	if (rc == -1) {
		OPENSSL_cleanse(o->authorization, sizeof(o->authorization));
		o->authorization[0] = '\0';
	}
	return rc;
}

void
sigv4_out_fini(struct sigv4_out *o)
{
	if (o == NULL)
		return;
	/* the canonical request holds the session token */
	str_wipe_free(o->canonical_request);
	str_wipe_free(o->string_to_sign);
	o->canonical_request = NULL;
	o->string_to_sign = NULL;
}
