/*
 * ClientHello peek: enough of RFC 8446 section 4.1.2 to read server_name,
 * ALPN and supported_versions before any byte is consumed, so the policy
 * can judge the SNI and the handshake can still start from the same bytes.
 */
#include "config.h"

#include <string.h>

#include "tls/tls.h"

struct rd {
	const uint8_t	*p;
	size_t		 left;
};

static int
rd_u8(struct rd *r, unsigned *v)
{
	if (r->left < 1)
		return -1;
	*v = r->p[0];
	r->p++;
	r->left--;
	return 0;
}

static int
rd_u16(struct rd *r, unsigned *v)
{
	if (r->left < 2)
		return -1;
	*v = (unsigned)r->p[0] << 8 | r->p[1];
	r->p += 2;
	r->left -= 2;
	return 0;
}

static int
rd_skip(struct rd *r, size_t n)
{
	if (r->left < n)
		return -1;
	r->p += n;
	r->left -= n;
	return 0;
}

/* A sub-reader over the next <n> bytes. */
static int
rd_sub(struct rd *r, size_t n, struct rd *sub)
{
	if (r->left < n)
		return -1;
	sub->p = r->p;
	sub->left = n;
	r->p += n;
	r->left -= n;
	return 0;
}

static int
parse_sni(struct rd *ext, struct tls_hello *h)
{
	struct rd	list, name;
	unsigned	len, type, nlen;

	if (rd_u16(ext, &len) == -1 || rd_sub(ext, len, &list) == -1)
		return -1;
	while (list.left > 0) {
		if (rd_u8(&list, &type) == -1 || rd_u16(&list, &nlen) == -1 ||
		    rd_sub(&list, nlen, &name) == -1)
			return -1;
		if (type != 0)
			continue;
		if (h->th_has_sni || nlen == 0 || nlen >= sizeof(h->th_sni))
			return -1;	/* one host_name, sane length */
		memcpy(h->th_sni, name.p, nlen);
		h->th_sni[nlen] = '\0';
		if (strlen(h->th_sni) != nlen)
			return -1;	/* embedded NUL */
		h->th_has_sni = 1;
	}
	return 0;
}

static int
parse_alpn(struct rd *ext, struct tls_hello *h)
{
	struct rd	list, proto;
	unsigned	len, plen;

	if (rd_u16(ext, &len) == -1 || rd_sub(ext, len, &list) == -1)
		return -1;
	while (list.left > 0) {
		if (rd_u8(&list, &plen) == -1 || plen == 0 ||
		    rd_sub(&list, plen, &proto) == -1)
			return -1;
		h->th_alpn_count++;
		if (plen == 2 && memcmp(proto.p, "h2", 2) == 0)
			h->th_alpn_h2 = 1;
		else if (plen == 8 && memcmp(proto.p, "http/1.1", 8) == 0)
			h->th_alpn_http11 = 1;
		else if (plen == 8 && memcmp(proto.p, "http/1.0", 8) == 0)
			h->th_alpn_http10 = 1;
	}
	return 0;
}

static int
parse_versions(struct rd *ext, struct tls_hello *h)
{
	struct rd	list;
	unsigned	len, v;

	if (rd_u8(ext, &len) == -1 || rd_sub(ext, len, &list) == -1)
		return -1;
	while (list.left >= 2) {
		rd_u16(&list, &v);
		if (v == 0x0304)
			h->th_tls13 = 1;
	}
	return 0;
}

static enum tls_hello_rc
parse_body(const uint8_t *body, size_t len, struct tls_hello *h)
{
	struct rd	r = { body, len }, exts, ext;
	unsigned	v, n, type, elen;

	if (rd_u16(&r, &v) == -1 || rd_skip(&r, 32) == -1 ||	/* random */
	    rd_u8(&r, &n) == -1 || n > 32 || rd_skip(&r, n) == -1 ||
	    rd_u16(&r, &n) == -1 || n < 2 || n % 2 != 0 ||
	    rd_skip(&r, n) == -1 ||
	    rd_u8(&r, &n) == -1 || n < 1 || rd_skip(&r, n) == -1)
		return TLS_HELLO_BAD;
	if (v < 0x0301 || v > 0x0303)
		return TLS_HELLO_BAD;
	if (r.left == 0)
		return TLS_HELLO_OK;	/* no extensions at all */
	if (rd_u16(&r, &n) == -1 || rd_sub(&r, n, &exts) == -1 || r.left != 0)
		return TLS_HELLO_BAD;
	while (exts.left > 0) {
		if (rd_u16(&exts, &type) == -1 || rd_u16(&exts, &elen) == -1 ||
		    rd_sub(&exts, elen, &ext) == -1)
			return TLS_HELLO_BAD;
		switch (type) {
		case 0:		/* server_name */
			if (parse_sni(&ext, h) == -1)
				return TLS_HELLO_BAD;
			break;
		case 16:	/* application_layer_protocol_negotiation */
			if (parse_alpn(&ext, h) == -1)
				return TLS_HELLO_BAD;
			break;
		case 43:	/* supported_versions */
			if (parse_versions(&ext, h) == -1)
				return TLS_HELLO_BAD;
			break;
		}
	}
	return TLS_HELLO_OK;
}

enum tls_hello_rc
tls_hello_parse(const uint8_t *buf, size_t len, struct tls_hello *h)
{
	uint8_t		hs[TLS_HELLO_MAX];
	size_t		off = 0, hslen = 0, need = 0, rlen;

	memset(h, 0, sizeof(*h));
	if (len == 0)
		return TLS_HELLO_MORE;
	if (buf[0] != 0x16)
		return TLS_HELLO_NOT_TLS;
	/* gather the handshake message from as many records as it spans */
	for (;;) {
		if (len - off < 5)
			return TLS_HELLO_MORE;
		if (buf[off] != 0x16 || buf[off + 1] != 0x03)
			return off == 0 ? TLS_HELLO_NOT_TLS : TLS_HELLO_BAD;
		rlen = (size_t)buf[off + 3] << 8 | buf[off + 4];
		if (rlen == 0 || rlen > 16384)
			return TLS_HELLO_BAD;
		if (len - off - 5 < rlen)
			return TLS_HELLO_MORE;
		if (hslen + rlen > sizeof(hs))
			return TLS_HELLO_BAD;
		memcpy(hs + hslen, buf + off + 5, rlen);
		hslen += rlen;
		off += 5 + rlen;
		if (need == 0 && hslen >= 4) {
			if (hs[0] != 1)		/* client_hello */
				return TLS_HELLO_BAD;
			need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 |
			    hs[3]);
			if (need > sizeof(hs))
				return TLS_HELLO_BAD;
		}
		if (need != 0 && hslen >= need)
			break;
	}
	return parse_body(hs + 4, need - 4, h);
}
