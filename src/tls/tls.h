/*
 * TLS plane: the ClientHello peek (pure parser, no I/O) and the OpenSSL
 * contexts for the client side (airlock as server, leaf from the sandbox's
 * CA) and the upstream side (airlock as client, verifying the real host).
 */
#ifndef AIRLOCK_TLS_H
#define AIRLOCK_TLS_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

struct cfg;

#define TLS_HELLO_MAX	(64 * 1024)	/* bytes we wait for, at most */

struct tls_hello {
	char	th_sni[256];	/* server_name host_name, as sent */
	int	th_has_sni;
	int	th_alpn_count;	/* protocols offered; 0 = no ALPN */
	int	th_alpn_h2;
	int	th_alpn_http11;
	int	th_alpn_http10;	/* curl -0 offers only this */
	int	th_tls13;	/* supported_versions lists TLS 1.3 */
};

enum tls_hello_rc {
	TLS_HELLO_OK = 0,
	TLS_HELLO_MORE,		/* need more bytes */
	TLS_HELLO_NOT_TLS,	/* first byte is not a handshake record */
	TLS_HELLO_BAD,		/* malformed ClientHello */
};

/*
 * Parse the ClientHello at the start of <buf> (possibly spanning several
 * records) without consuming anything.
 */
enum tls_hello_rc tls_hello_parse(const uint8_t *buf, size_t len,
	    struct tls_hello *);

/* Process-wide: session ticket keys shared by every server context. */
void	tls_global_init(void);

/*
 * Server context for intercepted clients: TLS 1.2+ (cfg min_version),
 * ALPN picks h2 when the SSL allows it (tls_server_ssl_set_alpn), else
 * http/1.1 (else http/1.0), and refuses a client that offers nothing it
 * may pick, session tickets with the shared keys. Certificates
 * are set per SSL. New reference, or NULL after logging.
 */
SSL_CTX	*tls_server_ctx_new(const struct cfg *);

/*
 * Client context for upstreams: verifies the chain against
 * upstream.ca_file (or the system store) and requires a hostname match
 * set per SSL by tls_client_ssl_new(). New reference or NULL.
 */
SSL_CTX	*tls_client_ctx_new(const struct cfg *);

/* An SSL for an upstream <host> (name or IP literal): SNI + host check. */
SSL	*tls_client_ssl_new(SSL_CTX *, const char *host);

/* tls.alpn: what intercepted clients are offered */
#define TLS_ALPN_H2	0x01
#define TLS_ALPN_HTTP11	0x02	/* and http/1.0 */
/* upstream.alpn: offer <set> (TLS_ALPN_*) to an origin on client <ssl>. */
void	tls_client_ssl_set_alpn(SSL *, int set);
/* The protocols (TLS_ALPN_*) ALPN may choose on <ssl>; unset: http/1.x. */
void	tls_server_ssl_set_alpn(SSL *, int);

/* Give each (sandbox, host) its own session context for resumption. */
void	tls_server_ssl_set_context(SSL *, const char *sandbox,
	    const char *host);

/* First queued OpenSSL error as text into <buf>; clears the queue. */
const char *tls_error_string(char *buf, size_t bufsz);

#endif
