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

#include <event2/buffer.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "cfg/cfg.h"
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
	size_t	 n, i, pad;
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
	pad = n >= 2 && tok[n - 2] == '=' ? 2 : n >= 1 && tok[n - 1] == '=' ?
	    1 : 0;
	out = xmalloc(n / 4 * 3 + 1);
	dn = EVP_DecodeBlock((unsigned char *)out, (unsigned char *)tok,
	    (int)n);
	OPENSSL_cleanse(tok, len + 4);
	free(tok);
	if (dn < 0 || (size_t)dn < pad) {
		free(out);
		return NULL;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes */
	*outlen = (size_t)dn - pad;
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
	int	i, where = 0;

	for (i = 0; i < m->hm_nhdrs && where == 0; i++) {
		if (carries(m->hm_buf + m->hm_hdrs[i].h_value,
		    m->hm_hdrs[i].h_value_len, ph, plen) ||
		    carries(m->hm_buf + m->hm_hdrs[i].h_name,
		    m->hm_hdrs[i].h_name_len, ph, plen))
			where |= CFG_PH_HEADER;
		else if (i + 1 < m->hm_nhdrs && carries_pair(m, i, ph, plen))
			where |= CFG_PH_HEADER;
	}
	if (path != NULL && carries(path, strlen(path), ph, plen))
		where |= CFG_PH_PATH;
	if (query != NULL && carries(query, strlen(query), ph, plen))
		where |= CFG_PH_QUERY;
	return where;
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

/* ---- bodies ------------------------------------------------------------ */

/*
 * A body is streamed, so it is decoded as it streams: JSON escapes
 * ("\u00XX", "\/"), then percent-escapes twice, then lower-cased, and the
 * result is scanned for the bare placeholders. Any mix of escaped and
 * plain characters decodes to the placeholder, which a list of encoded
 * forms could never cover. An escape cut by a chunk boundary waits, a few
 * bytes, for the next chunk.
 */
#define TRIP_CARRY	8

struct sec_trip {
	struct sec_scan	*t_scan;	/* lower-cased placeholders */
	char		 t_carry[3][TRIP_CARRY];
	size_t		 t_ncarry[3];
	int		 t_hit;
	struct evbuffer	*t_tail;	/* raw bytes kept back */
	size_t		 t_longest;	/* longest placeholder */
};

/*
 * The most raw bytes one placeholder byte can take: "\u00XX"-escaped
 * (6), each of the 5 bytes of a twice percent-encoded byte ("%25XX").
 */
#define TRIP_WIDEST	30

static int
is_hex(char c)
{
	return OPENSSL_hexchar2int((unsigned char)c) >= 0;
}

/* Bytes at the end of <p> that may begin an escape of <kind>. */
static size_t
escape_tail(int kind, const char *p, size_t n)
{
	size_t	k, i, max = kind == 0 ? 5 : 2;

	for (k = n < max ? n : max; k > 0; k--) {
		const char	*t = p + n - k;

		if (t[0] != (kind == 0 ? '\\' : '%'))
			continue;
		if (kind == 0 && k >= 2 && t[1] != 'u' && t[1] != 'U')
			continue;
		for (i = kind == 0 ? 2 : 1; i < k && is_hex(t[i]); i++)
			;
		if (i >= k)
			return k;
	}
	return 0;
}

/* One decoding step of <kind> (0 JSON, 1-2 percent) over carry + <in>. */
static size_t
trip_decode(struct sec_trip *tr, int kind, const char *in, size_t len,
    char *out)
{
	char	*buf = xmalloc(TRIP_CARRY + len);
	size_t	 n, keep, o;

	memcpy(buf, tr->t_carry[kind], tr->t_ncarry[kind]);
	memcpy(buf + tr->t_ncarry[kind], in, len);
	n = tr->t_ncarry[kind] + len;
	keep = escape_tail(kind, buf, n);
	o = kind == 0 ? json_unescape(buf, n - keep, out) :
	    pct_decode(buf, n - keep, out);
	memcpy(tr->t_carry[kind], buf + n - keep, keep);
	tr->t_ncarry[kind] = keep;
	free(buf);
	return o;
}

struct sec_trip *
sec_trip_new(void)
{
	struct sec_trip	*tr = xcalloc(1, sizeof(*tr));

	tr->t_scan = sec_scan_new();
	return tr;
}

void
sec_trip_add(struct sec_trip *tr, const char *ph)
{
	char	*low = xstrdup(ph);
	size_t	 i, n = strlen(ph);

	for (i = 0; i < n; i++)
		low[i] = (char)tolower((unsigned char)low[i]);
	sec_scan_add(tr->t_scan, low, n, "!", 1);
	free(low);
	if (n > tr->t_longest)
		tr->t_longest = n;
}

int
sec_trip_feed(struct sec_trip *tr, const char *p, size_t len,
    struct evbuffer *sink)
{
	char	*a, *b;
	size_t	 na, nb, i;

	if (tr->t_hit || len == 0)
		return tr->t_hit;
	a = xmalloc(len + TRIP_CARRY);
	b = xmalloc(len + TRIP_CARRY);
	na = trip_decode(tr, 0, p, len, a);
	nb = trip_decode(tr, 1, a, na, b);
	na = trip_decode(tr, 2, b, nb, a);
	for (i = 0; i < na; i++)
		a[i] = (char)tolower((unsigned char)a[i]);
	if (sec_scan_feed(tr->t_scan, a, na, sink) > 0)
		tr->t_hit = 1;
	evbuffer_drain(sink, evbuffer_get_length(sink));
	free(a);
	free(b);
	return tr->t_hit;
}

void
sec_trip_free(struct sec_trip *tr)
{
	if (tr == NULL)
		return;
	sec_scan_free(tr->t_scan);
	if (tr->t_tail != NULL)
		evbuffer_free(tr->t_tail);
	free(tr);
}

size_t
sec_trip_hold(struct sec_trip *tr, const char *p, size_t len, int eof,
    struct evbuffer *out)
{
	size_t	keep = TRIP_WIDEST * tr->t_longest, n, go;

	if (tr->t_tail == NULL)
		tr->t_tail = evbuffer_new();
	if (len > 0)
		evbuffer_add(tr->t_tail, p, len);
	n = evbuffer_get_length(tr->t_tail);
	go = eof ? n : n > keep ? n - keep : 0;
	if (go > 0)
		evbuffer_remove_buffer(tr->t_tail, out, go);
	return go;
}
