/* tls_hello_parse against ClientHellos produced by OpenSSL itself. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "tls/tls.h"
#include "unit.h"

/* The first flight of an OpenSSL client; returns its length. */
static size_t
client_hello(const char *sni, const char *alpn, size_t alpnlen, int max12,
    uint8_t *out, size_t outsz)
{
	SSL_CTX	*ctx = SSL_CTX_new(TLS_client_method());
	SSL	*ssl = SSL_new(ctx);
	BIO	*rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
	int	 n;

	if (max12)
		SSL_set_max_proto_version(ssl, TLS1_2_VERSION);
	if (sni != NULL)
		SSL_set_tlsext_host_name(ssl, sni);
	if (alpn != NULL)
		SSL_set_alpn_protos(ssl, (const unsigned char *)alpn,
		    (unsigned)alpnlen);
	SSL_set_bio(ssl, rbio, wbio);
	SSL_set_connect_state(ssl);
	ck_assert_int_le(SSL_do_handshake(ssl), 0);	/* wants to read */
	n = BIO_read(wbio, out, (int)outsz);
	ck_assert_int_gt(n, 0);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

START_TEST(test_tls_hello_sni_alpn)
{
	uint8_t			buf[8192];
	size_t			len;
	struct tls_hello	h;

	len = client_hello("api.example.test", "\x02h2\x08http/1.1", 12, 0,
	    buf, sizeof(buf));
	ck_assert_int_eq(tls_hello_parse(buf, len, &h), TLS_HELLO_OK);
	ck_assert(h.th_has_sni);
	ck_assert_str_eq(h.th_sni, "api.example.test");
	ck_assert_int_eq(h.th_alpn_count, 2);
	ck_assert(h.th_alpn_h2);
	ck_assert(h.th_alpn_http11);
	ck_assert(h.th_tls13);
}
END_TEST

START_TEST(test_tls_hello_no_sni_h2_only)
{
	uint8_t			buf[8192];
	size_t			len;
	struct tls_hello	h;

	len = client_hello(NULL, "\x02h2", 3, 1, buf, sizeof(buf));
	ck_assert_int_eq(tls_hello_parse(buf, len, &h), TLS_HELLO_OK);
	ck_assert(!h.th_has_sni);
	ck_assert_int_eq(h.th_alpn_count, 1);
	ck_assert(h.th_alpn_h2);
	ck_assert(!h.th_alpn_http11);
	ck_assert(!h.th_tls13);
}
END_TEST

/* curl -0 offers http/1.0 alone (issue 15.7) */
START_TEST(test_tls_hello_http10)
{
	uint8_t			buf[8192];
	size_t			len;
	struct tls_hello	h;

	len = client_hello("api.example.test", "\x08http/1.0", 9, 0, buf,
	    sizeof(buf));
	ck_assert_int_eq(tls_hello_parse(buf, len, &h), TLS_HELLO_OK);
	ck_assert_int_eq(h.th_alpn_count, 1);
	ck_assert(h.th_alpn_http10);
	ck_assert(!h.th_alpn_http11);
	ck_assert(!h.th_alpn_h2);
}
END_TEST

/* Every prefix is "more", never a verdict, never a crash. */
START_TEST(test_tls_hello_prefixes)
{
	uint8_t			buf[8192];
	size_t			len, i;
	struct tls_hello	h;

	len = client_hello("split.test", NULL, 0, 0, buf, sizeof(buf));
	for (i = 0; i < len; i++)
		ck_assert_int_eq(tls_hello_parse(buf, i, &h), TLS_HELLO_MORE);
	ck_assert_int_eq(tls_hello_parse(buf, len, &h), TLS_HELLO_OK);
	ck_assert_str_eq(h.th_sni, "split.test");
}
END_TEST

/* The same hello cut into two records is still read. */
START_TEST(test_tls_hello_two_records)
{
	uint8_t			buf[8192], two[8300];
	size_t			len, body, first;
	struct tls_hello	h;

	len = client_hello("records.test", NULL, 0, 0, buf, sizeof(buf));
	body = len - 5;
	first = body / 2;
	memcpy(two, buf, 5);
	two[3] = (uint8_t)(first >> 8);
	two[4] = (uint8_t)first;
	memcpy(two + 5, buf + 5, first);
	memcpy(two + 5 + first, buf, 5);
	two[5 + first + 3] = (uint8_t)((body - first) >> 8);
	two[5 + first + 4] = (uint8_t)(body - first);
	memcpy(two + 10 + first, buf + 5 + first, body - first);
	ck_assert_int_eq(tls_hello_parse(two, len + 5, &h), TLS_HELLO_OK);
	ck_assert_str_eq(h.th_sni, "records.test");
}
END_TEST

START_TEST(test_tls_hello_garbage)
{
	static const char	 http[] = "GET / HTTP/1.1\r\n\r\n";
	uint8_t			 buf[8192], mut[8192];
	size_t			 len, i;
	struct tls_hello	 h;
	enum tls_hello_rc	 rc;

	ck_assert_int_eq(tls_hello_parse((const uint8_t *)http,
	    sizeof(http) - 1, &h), TLS_HELLO_NOT_TLS);
	len = client_hello("fuzz.test", "\x08http/1.1", 9, 0, buf,
	    sizeof(buf));
	/* flip each byte of the hello: any answer but a crash is fine,
	 * and an OK must still carry a sane SNI */
	for (i = 0; i < len; i++) {
		memcpy(mut, buf, len);
		mut[i] ^= 0xff;
		rc = tls_hello_parse(mut, len, &h);
		if (rc == TLS_HELLO_OK && h.th_has_sni)
			ck_assert_uint_lt(strlen(h.th_sni), sizeof(h.th_sni));
	}
	/* a handshake record that is not a ClientHello */
	memcpy(mut, buf, len);
	mut[5] = 2;
	ck_assert_int_eq(tls_hello_parse(mut, len, &h), TLS_HELLO_BAD);
}
END_TEST

Suite *
suite_tls(void)
{
	Suite	*s = suite_create("tls");
	TCase	*tc = tcase_create("hello");

	tcase_add_test(tc, test_tls_hello_sni_alpn);
	tcase_add_test(tc, test_tls_hello_no_sni_h2_only);
	tcase_add_test(tc, test_tls_hello_http10);
	tcase_add_test(tc, test_tls_hello_prefixes);
	tcase_add_test(tc, test_tls_hello_two_records);
	tcase_add_test(tc, test_tls_hello_garbage);
	suite_add_tcase(s, tc);
	return s;
}
