/* OpenSSL contexts for both sides of an intercepted connection. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "cfg/cfg.h"
#include "dns/net_guard.h"
#include "tls/tls.h"
#include "util/log.h"

/* 80 bytes: name, HMAC secret, AES key (OpenSSL's ticket key layout) */
static unsigned char	ticket_keys[80];
static int		alpn_idx = -1;	/* SSL ex_data: TLS_ALPN_* */

void
tls_global_init(void)
{
	if (RAND_bytes(ticket_keys, sizeof(ticket_keys)) != 1)
		fatalx("RAND_bytes failed");
	alpn_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

void
tls_server_ssl_set_alpn(SSL *ssl, int set)
{
	if (alpn_idx >= 0)
		(void)SSL_set_ex_data(ssl, alpn_idx, (void *)(intptr_t)set);
}

const char *
tls_error_string(char *buf, size_t bufsz)
{
	unsigned long	e = ERR_get_error();

	if (e == 0)
		snprintf(buf, bufsz, "connection closed during handshake");
	else
		ERR_error_string_n(e, buf, bufsz);
	ERR_clear_error();
	return buf;
}

/*
 * TLS 1.3 suites: OpenSSL's default set, AES-128-GCM first. Both sides of
 * every intercepted request encrypt and decrypt each record, and
 * AES-128-GCM (the suite every TLS 1.3 peer implements) costs measurably
 * less per record than AES-256-GCM (4 % of airlockd's instructions per
 * keep-alive request). We choose towards clients (server preference); an
 * upstream picks from this order.
 */
static void
tls_prefer_aes128(SSL_CTX *ctx)
{
	if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:"
	    "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") != 1)
		log_tls("TLS 1.3 cipher suites");
}

/*
 * airlock speaks h2 (when the SSL allows it: tls.alpn), HTTP/1.1 and
 * HTTP/1.0 to clients, in that order of preference whatever the client's
 * order: h2 when offered, else http/1.1, else http/1.0 (curl -0). A
 * client that offers ALPN with none of those it may pick is refused with
 * no_application_protocol; one that offers no ALPN never comes here (and
 * speaks HTTP/1.x).
 */
static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	const unsigned char	*http10 = NULL, *http11 = NULL, *h2 = NULL;
	unsigned int		 i = 0;
	int			 set = TLS_ALPN_HTTP11;

	(void)arg;
	if (alpn_idx >= 0 && SSL_get_ex_data(ssl, alpn_idx) != NULL)
		set = (int)(intptr_t)SSL_get_ex_data(ssl, alpn_idx);
	while (i < inlen) {
		unsigned int	n = in[i];

		if (i + 1 + n > inlen)
			break;
		if (n == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0)
			http11 = in + i + 1;
		if (n == 8 && memcmp(in + i + 1, "http/1.0", 8) == 0)
			http10 = in + i + 1;
		if (n == 2 && memcmp(in + i + 1, "h2", 2) == 0)
			h2 = in + i + 1;
		i += 1 + n;
	}
	if (h2 != NULL && (set & TLS_ALPN_H2)) {
		*out = h2;
		*outlen = 2;
		return SSL_TLSEXT_ERR_OK;
	}
	if (!(set & TLS_ALPN_HTTP11))
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	if (http11 != NULL || http10 != NULL) {
		*out = http11 != NULL ? http11 : http10;
		*outlen = 8;
		return SSL_TLSEXT_ERR_OK;
	}
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

SSL_CTX *
tls_server_ctx_new(const struct cfg *cfg)
{
	SSL_CTX	*ctx;

	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		log_tls("SSL_CTX_new");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, cfg->c_tls_min_version);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION |
	    SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	tls_prefer_aes128(ctx);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	/* stateless tickets, same keys in every worker: any may resume */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (SSL_CTX_set_tlsext_ticket_keys(ctx, ticket_keys,
	    sizeof(ticket_keys)) != 1)
		log_tls("ticket keys");
	SSL_CTX_set_num_tickets(ctx, 1);
	return ctx;
}

SSL_CTX *
tls_client_ctx_new(const struct cfg *cfg)
{
	SSL_CTX		*ctx;
	static const unsigned char alpn[] = "\x08http/1.1";

	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
		log_tls("SSL_CTX_new");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, cfg->c_tls_min_version);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION |
	    SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	tls_prefer_aes128(ctx);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (strcmp(cfg->c_upstream_ca_file, "system") == 0) {
		if (SSL_CTX_set_default_verify_paths(ctx) != 1)
			log_tls("system trust store");
	} else if (SSL_CTX_load_verify_locations(ctx, cfg->c_upstream_ca_file,
	    NULL) != 1) {
		log_tls("upstream.ca_file %s", cfg->c_upstream_ca_file);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1);
	return ctx;
}

SSL *
tls_client_ssl_new(SSL_CTX *ctx, const char *host)
{
	SSL		*ssl;
	X509_VERIFY_PARAM *param;
	struct net_addr	 a;

	if ((ssl = SSL_new(ctx)) == NULL)
		return NULL;
	param = SSL_get0_param(ssl);
	X509_VERIFY_PARAM_set_hostflags(param,
	    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (net_host_literal(host, &a) == 1) {
		/* no SNI for addresses (RFC 6066); check the IP SAN */
		X509_VERIFY_PARAM_set1_ip_asc(param, host);
	} else {
		SSL_set_tlsext_host_name(ssl, host);
		X509_VERIFY_PARAM_set1_host(param, host, 0);
	}
	return ssl;
}

void
tls_client_ssl_set_alpn(SSL *ssl, int set)
{
	unsigned char	p[16];
	unsigned int	n = 0;

	if (set & TLS_ALPN_H2) {
		memcpy(p + n, "\x02h2", 3);
		n += 3;
	}
	if (set & TLS_ALPN_HTTP11) {
		memcpy(p + n, "\x08http/1.1", 9);
		n += 9;
	}
	if (n > 0)
		(void)SSL_set_alpn_protos(ssl, p, n);
}

void
tls_server_ssl_set_context(SSL *ssl, const char *sandbox, const char *host)
{
	unsigned char	d[SHA256_DIGEST_LENGTH];
	char		buf[600];
	int		n;

	/* a ticket from another sandbox or host never resumes here */
	n = snprintf(buf, sizeof(buf), "%s%c%s", sandbox, 0, host);
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = (int)sizeof(buf) - 1;
	SHA256((unsigned char *)buf, (size_t)n, d);
	SSL_set_session_id_context(ssl, d, SSL_MAX_SID_CTX_LENGTH);
}
