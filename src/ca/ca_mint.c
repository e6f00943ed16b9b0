/*
 * Leaf certificates for intercepted TLS, signed by a sandbox's CA, and the
 * X.509 helpers the CA builder shares (src/ca/ca_internal.h).
 *
 * Everything here may run on several workers at once for the same CA: the
 * CA's certificate and keys are only read (OpenSSL 3 makes a fresh signing
 * context per X509_sign()), and each leaf is private to its caller until
 * returned.
 */
#include "config.h"

#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "ca/ca_internal.h"
#include "util/log.h"

#define CA_SERIAL_BYTES	16		/* 128 bits, CA/B Forum wants >= 64 */
#define CA_LEAF_MAX_S	(30 * 24 * 3600)	/* SPEC: leaf_validity <= 30d */
#define CA_CN_MAX	64		/* RFC 5280 ub-common-name */
#define CA_HOST_MAX	253		/* longest DNS name */

int
ca_x509_serial(X509 *x)
{
	unsigned char	 b[CA_SERIAL_BYTES];
	BIGNUM		*bn;
	int		 rv = -1;

	do {
		if (RAND_bytes(b, sizeof(b)) != 1)
			return -1;
		/* DER INTEGERs are signed: a clear top bit keeps it positive */
		b[0] &= 0x7f;
		if ((bn = BN_bin2bn(b, sizeof(b), NULL)) == NULL)
			return -1;
		if (BN_is_zero(bn)) {	/* 2^-127, but 0 is not a serial */
			BN_free(bn);
			bn = NULL;
		}
	} while (bn == NULL);
	if (BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL)
		rv = 0;
	BN_free(bn);
	return rv;
}

int
ca_x509_ext(X509 *issuer, X509 *subject, int nid, const char *value)
{
	X509V3_CTX	 ctx;
	X509_EXTENSION	*ext;
	int		 rv;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, subject, NULL, NULL, 0);
	if ((ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value)) == NULL)
		return -1;
	rv = X509_add_ext(subject, ext, -1);
	X509_EXTENSION_free(ext);
	return rv == 1 ? 0 : -1;
}

/*
 * What may be named in a leaf: an IPv4 or IPv6 literal (returns AF_INET or
 * AF_INET6, the address in <ip>), or a DNS name of letters, digits, '-',
 * '_' and '.' (returns 0). Anything else is -1: the name comes from the
 * sandbox's SNI or request line, and a wildcard, a space or a control byte
 * has no place in a certificate we sign. inet_pton(), not
 * a2i_IPADDRESS(), because the latter also takes "1.2.3.4 " and
 * "01.2.3.4", which are not how a client names an address.
 */
static int
ca_host_kind(const char *host, unsigned char ip[16])
{
	const char	*p;
	size_t		 len;

	len = strlen(host);
	if (len == 0 || len > CA_HOST_MAX || host[0] == '.')
		return -1;
	if (inet_pton(AF_INET, host, ip) == 1)
		return AF_INET;
	if (inet_pton(AF_INET6, host, ip) == 1)
		return AF_INET6;
	/* "1.2.3" or "300.1.1.1" is neither an address nor a host name */
	if (strspn(host, "0123456789.") == len)
		return -1;
	for (p = host; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		    *p == '.'))
			return -1;
	return 0;
}

/*
 * subjectAltName: exactly <host>, as a DNS name or (<iplen> > 0) as the
 * address in <ip>. Built as a GENERAL_NAME, not through the openssl.cnf
 * string syntax, so nothing in <host> is ever parsed as syntax.
 */
static int
ca_add_san(X509 *x, const char *host, const unsigned char *ip, int iplen)
{
	GENERAL_NAMES		*gens;
	GENERAL_NAME		*gen;
	ASN1_STRING		*v;
	int			 rv;

	if ((gen = GENERAL_NAME_new()) == NULL)
		return -1;
	v = iplen > 0 ? ASN1_OCTET_STRING_new() : ASN1_IA5STRING_new();
	if (v == NULL || (iplen > 0 ? ASN1_OCTET_STRING_set(v, ip, iplen) :
	    ASN1_STRING_set(v, host, -1)) != 1) {
		ASN1_STRING_free(v);
		GENERAL_NAME_free(gen);
		return -1;
	}
	GENERAL_NAME_set0_value(gen, iplen > 0 ? GEN_IPADD : GEN_DNS, v);
	if ((gens = sk_GENERAL_NAME_new_null()) == NULL ||
	    sk_GENERAL_NAME_push(gens, gen) <= 0) {
		GENERAL_NAME_free(gen);
		sk_GENERAL_NAME_free(gens);
		return -1;
	}
	rv = X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0,
	    X509V3_ADD_DEFAULT) == 1 ? 0 : -1;
	sk_GENERAL_NAME_pop_free(gens, GENERAL_NAME_free);
	return rv;
}

X509 *
ca_mint_leaf(struct ca *ca, const char *host, uint64_t validity_ms)
{
	X509		*x = NULL, *cacert;
	X509_NAME	*name = NULL;
	unsigned char	 ip[16];
	char		 cn[CA_CN_MAX + 1];
	long		 secs;
	int		 af, iplen;

	if (ca == NULL || host == NULL || (af = ca_host_kind(host, ip)) == -1) {
		/* not echoed: it may hold control characters */
		log_warnx("not minting a certificate for an invalid host name");
		return NULL;
	}
	iplen = af == AF_INET ? 4 : af == AF_INET6 ? 16 : 0;
	cacert = ca_cert(ca);
	if (validity_ms / 1000 > CA_LEAF_MAX_S)
		secs = CA_LEAF_MAX_S;
	else
		secs = (long)(validity_ms / 1000);

	if ((x = X509_new()) == NULL)
		goto fail;
	if (X509_set_version(x, 2) != 1 || ca_x509_serial(x) == -1)
		goto fail;
	/* CN is capped at 64 characters; the SAN, which clients use, is not */
	snprintf(cn, sizeof(cn), "%s", host);
	if ((name = X509_NAME_new()) == NULL ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0) != 1 ||
	    X509_set_subject_name(x, name) != 1 ||
	    X509_set_issuer_name(x, X509_get_subject_name(cacert)) != 1)
		goto fail;
	if (X509_gmtime_adj(X509_getm_notBefore(x), -CA_BACKDATE_S) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(x), secs) == NULL)
		goto fail;
	if (X509_set_pubkey(x, ca_leaf_pub(ca)) != 1)
		goto fail;
	if (ca_add_san(x, host, ip, iplen) == -1 ||
	    ca_x509_ext(cacert, x, NID_basic_constraints,
	    "critical,CA:FALSE") == -1 ||
	    ca_x509_ext(cacert, x, NID_key_usage,
	    "critical,digitalSignature") == -1 ||
	    ca_x509_ext(cacert, x, NID_ext_key_usage, "serverAuth") == -1 ||
	    ca_x509_ext(cacert, x, NID_authority_key_identifier,
	    "keyid") == -1)
		goto fail;
	if (X509_sign(x, ca_sign_key(ca), EVP_sha256()) <= 0)
		goto fail;
	X509_NAME_free(name);
	return x;
 fail:
	log_tls("sandbox %s: minting a leaf for %s", ca_sandbox_id(ca), host);
	X509_NAME_free(name);
	X509_free(x);
	return NULL;
}
