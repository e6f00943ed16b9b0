/*
 * The placeholder tripwire: is a secret's placeholder in a request, in
 * whatever disguise an agent puts it? The request is towards a host the
 * secret is not bound to (misuse, refused) or bound to (substituted), so
 * the search is generous: any letter case, percent-decoded once and twice,
 * JSON "\u"/"\/" escapes undone, inside the base64 of Basic credentials,
 * and across two adjacent header fields (an upstream that concatenates
 * X-Key-1 and X-Key-2). Bodies stream: sec_trip_body_new() gives a
 * scanner for the forms a body may carry.
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "http/http_msg.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "util/util.h"

/* Case-insensitive memmem. */
static int
has_fold(const char *s, size_t len, const char *ph, size_t plen)
{
	size_t	i;

	if (plen == 0 || len < plen)
		return 0;
	for (i = 0; i + plen <= len; i++)
		if (strncasecmp(s + i, ph, plen) == 0)
			return 1;
	return 0;
}

/* Percent-decode <in> (any case) into <out> (room for len). */
static size_t
pct_decode(const char *in, size_t len, char *out)
{
	size_t	i, o = 0;
	int	hi, lo;

	for (i = 0; i < len; i++) {
		if (in[i] == '%' && i + 2 < len &&
		    (hi = OPENSSL_hexchar2int((unsigned char)in[i + 1])) >= 0 &&
		    (lo = OPENSSL_hexchar2int((unsigned char)in[i + 2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else
			out[o++] = in[i];
	}
	return o;
}

/* Undo JSON string escapes ("\u00XX" for ASCII, "\/", "\\" ...). */
static size_t
json_unescape(const char *in, size_t len, char *out)
{
	size_t	i, o = 0;
	int	a, b, c, d;

	for (i = 0; i < len; i++) {
		if (in[i] == '\\' && i + 5 < len && (in[i + 1] == 'u' ||
		    in[i + 1] == 'U') &&
		    (a = OPENSSL_hexchar2int((unsigned char)in[i + 2])) >= 0 &&
		    (b = OPENSSL_hexchar2int((unsigned char)in[i + 3])) >= 0 &&
		    (c = OPENSSL_hexchar2int((unsigned char)in[i + 4])) >= 0 &&
		    (d = OPENSSL_hexchar2int((unsigned char)in[i + 5])) >= 0 &&
		    a == 0 && b == 0) {
			out[o++] = (char)(c << 4 | d);
			i += 5;
		} else if (in[i] == '\\' && i + 1 < len &&
		    strchr("/\\\"", in[i + 1]) != NULL) {
			out[o++] = in[++i];
		} else
			out[o++] = in[i];
	}
	return o;
}

/*
 * Base64 (standard or url alphabet, padding optional) of the token after
 * "Basic " in <v>, decoded into a new buffer; NULL when it is not Basic.
 */
static char *
basic_decode(const char *v, size_t len, size_t *outlen)
{
	char	*tok, *out;
	size_t	 n, i;
	int	 dn;

	while (len > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		len--;
	}
	if (len < 7 || strncasecmp(v, "basic", 5) != 0 || (v[5] != ' ' &&
	    v[5] != '\t'))
		return NULL;
	v += 6;
	len -= 6;
	while (len > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		len--;
	}
	while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		len--;
	tok = xmalloc(len + 4);
	for (i = n = 0; i < len; i++)
		if (v[i] != '=')
			tok[n++] = v[i] == '-' ? '+' : v[i] == '_' ? '/' : v[i];
	while (n % 4 != 0)
		tok[n++] = '=';
	out = xmalloc(n / 4 * 3 + 1);
	dn = EVP_DecodeBlock((unsigned char *)out, (unsigned char *)tok,
	    (int)n);
	OPENSSL_cleanse(tok, len + 4);
	free(tok);
	if (dn < 0) {
		free(out);
		return NULL;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes */
	*outlen = (size_t)dn;
	return out;
}

/* <s> as sent, or decoded once or twice, or JSON-unescaped. */
static int
carries_decoded(const char *s, size_t len, const char *ph, size_t plen)
{
	char	*a, *b;
	size_t	 na, nb;
	int	 found;

	if (has_fold(s, len, ph, plen))
		return 1;
	if (memchr(s, '%', len) == NULL && memchr(s, '\\', len) == NULL)
		return 0;
	a = xmalloc(len + 1);
	b = xmalloc(len + 1);
	na = pct_decode(s, len, a);
	nb = pct_decode(a, na, b);
	found = has_fold(a, na, ph, plen) || has_fold(b, nb, ph, plen);
	if (!found) {
		na = json_unescape(s, len, a);
		nb = pct_decode(a, na, b);
		found = has_fold(a, na, ph, plen) || has_fold(b, nb, ph, plen);
	}
	free(a);
	free(b);
	return found;
}

static int
carries(const char *s, size_t len, const char *ph, size_t plen)
{
	char	*dec;
	size_t	 dlen;
	int	 found;

	if (carries_decoded(s, len, ph, plen))
		return 1;
	if ((dec = basic_decode(s, len, &dlen)) == NULL)
		return 0;
	found = carries_decoded(dec, dlen, ph, plen);
	OPENSSL_cleanse(dec, dlen);
	free(dec);
	return found;
}

/* Two adjacent header values as one string. */
static int
carries_pair(const struct http_msg *m, int i, const char *ph, size_t plen)
{
	const char	*v1 = m->hm_buf + m->hm_hdrs[i].h_value;
	const char	*v2 = m->hm_buf + m->hm_hdrs[i + 1].h_value;
	size_t		 n1 = m->hm_hdrs[i].h_value_len;
	size_t		 n2 = m->hm_hdrs[i + 1].h_value_len;
	char		*cat;
	int		 found;

	util_trim_ows(&v1, &n1);
	util_trim_ows(&v2, &n2);
	cat = xmalloc(n1 + n2 + 1);
	memcpy(cat, v1, n1);
	memcpy(cat + n1, v2, n2);
	found = carries_decoded(cat, n1 + n2, ph, plen);
	free(cat);
	return found;
}

int
sec_trip_sent(const struct http_msg *m, const char *path, const char *query,
    const char *ph)
{
	size_t	plen = strlen(ph);
	int	i;

	for (i = 0; i < m->hm_nhdrs; i++) {
		if (carries(m->hm_buf + m->hm_hdrs[i].h_value,
		    m->hm_hdrs[i].h_value_len, ph, plen) ||
		    carries(m->hm_buf + m->hm_hdrs[i].h_name,
		    m->hm_hdrs[i].h_name_len, ph, plen))
			return 1;
		if (i + 1 < m->hm_nhdrs && carries_pair(m, i, ph, plen))
			return 1;
	}
	if (path != NULL && carries(path, strlen(path), ph, plen))
		return 1;
	if (query != NULL && carries(query, strlen(query), ph, plen))
		return 1;
	return 0;
}

/*
 * The Authorization value with placeholders inside its Basic credentials
 * replaced through <subst>, as a new "Basic ..." header value; NULL when
 * there is no Basic credential or nothing to replace.
 */
char *
sec_trip_basic_subst(const struct http_msg *m, struct sec_scan *subst)
{
	const char	*v;
	char		*dec, *rep, *enc;
	size_t		 vlen, dlen, rlen, nrepl = 0;
	int		 i;

	if ((i = http_msg_find(m, "authorization", 0)) == -1)
		return NULL;
	v = m->hm_buf + m->hm_hdrs[i].h_value;
	vlen = m->hm_hdrs[i].h_value_len;
	if ((dec = basic_decode(v, vlen, &dlen)) == NULL)
		return NULL;
	rep = sec_scan_string(subst, dec, dlen, &rlen, &nrepl);
	OPENSSL_cleanse(dec, dlen);
	free(dec);
	if (nrepl == 0) {
		OPENSSL_cleanse(rep, rlen);
		free(rep);
		return NULL;
	}
	enc = xmalloc(6 + 4 * ((rlen + 2) / 3) + 1);
	memcpy(enc, "Basic ", 6);
	EVP_EncodeBlock((unsigned char *)enc + 6, (unsigned char *)rep,
	    (int)rlen);
	OPENSSL_cleanse(rep, rlen);
	free(rep);
	return enc;
}

/*
 * A detection-only scanner for request bodies towards hosts <ph> is not
 * bound to: the placeholder as is and in its encoded forms, to be fed a
 * lower-cased copy of the body (the forms are lower-cased too, so letter
 * case does not hide it; base64 forms are left out, a body is not Basic
 * credentials).
 */
void
sec_trip_body_add(struct sec_scan *sc, const char *ph)
{
	char	*low;
	size_t	 i, n = strlen(ph);

	low = xstrdup(ph);
	for (i = 0; i < n; i++)
		low[i] = (char)tolower((unsigned char)low[i]);
	sec_scan_add_text_forms(sc, low, n, "!", 1);
	free(low);
}
