/*
 * The fleet CA (tls.fleet_ca_key): every gateway of a fleet derives the
 * same CA key for a sandbox from one master key file, so a sandbox's
 * leaf certificates verify with the same CA certificate whichever gateway
 * it reaches, and no CA private key is ever stored in a shared place
 * (Redis holds none). The key is HKDF-SHA256(master, salt "airlock fleet
 * CA v1", info = the sandbox id) taken as a P-256 scalar; the CA
 * certificate's serial is derived the same way and its validity starts at
 * a fixed date, so each gateway builds the same certificate but for the
 * ECDSA signature bytes (random in OpenSSL 3.0): same subject, key, serial
 * and key identifiers, which is what verifying a leaf checks.
 */
#include "config.h"

#define OPENSSL_SUPPRESS_DEPRECATED

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/x509.h>

#include "ca/ca.h"
#include "ca/ca_internal.h"
#include "util/log.h"
#include "util/util.h"

#define FLEET_MIN	32	/* master key bytes, at least */
#define FLEET_MAX	4096

static unsigned char	*fleet_key;	/* OPENSSL_secure_malloc'ed */
static size_t		 fleet_len;

int
ca_fleet_on(void)
{
	return fleet_key != NULL;
}

int
ca_fleet_set_key(const char *path)
{
	struct stat	 st;
	unsigned char	 buf[FLEET_MAX];
	ssize_t		 n;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		log_warn("tls.fleet_ca_key: %s", path);
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    !util_file_private(&st)) {
		log_warnx("tls.fleet_ca_key: %s must be a regular file "
		    "readable by its owner only (0600)", path);
		close(fd);
		return -1;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < FLEET_MIN) {
		log_warnx("tls.fleet_ca_key: %s holds fewer than %d bytes "
		    "(make one with: openssl rand 32 > FILE)", path,
		    FLEET_MIN);
		OPENSSL_cleanse(buf, sizeof(buf));
		return -1;
	}
	ca_fleet_clear();
	if ((fleet_key = OPENSSL_secure_malloc((size_t)n)) == NULL)
		fatalx("OPENSSL_secure_malloc");
	memcpy(fleet_key, buf, (size_t)n);
	fleet_len = (size_t)n;
	OPENSSL_cleanse(buf, sizeof(buf));
	return 0;
}

void
ca_fleet_clear(void)
{
	if (fleet_key != NULL)
		OPENSSL_secure_clear_free(fleet_key, fleet_len);
	fleet_key = NULL;
	fleet_len = 0;
}

/* HKDF-SHA256(master, salt, "<what>:<id>") into out[len]. */
static int
fleet_hkdf(const char *what, const char *id, unsigned char *out, size_t len)
{
	static const char	 salt[] = "airlock fleet CA v1";
	EVP_KDF			*kdf;
	EVP_KDF_CTX		*kc;
	OSSL_PARAM		 p[5];
	char			 info[512];
	int			 n, rc;

	n = snprintf(info, sizeof(info), "%s:%s", what, id);
	if (n < 0 || (size_t)n >= sizeof(info))
		return -1;
	if ((kdf = EVP_KDF_fetch(NULL, "HKDF", NULL)) == NULL)
		return -1;
	kc = EVP_KDF_CTX_new(kdf);
	EVP_KDF_free(kdf);
	if (kc == NULL)
		return -1;
	p[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
	    (char *)"SHA256", 0);
	p[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
	    fleet_key, fleet_len);
	p[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT,
	    (void *)salt, sizeof(salt) - 1);
	p[3] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info,
	    (size_t)n);
	p[4] = OSSL_PARAM_construct_end();
	rc = EVP_KDF_derive(kc, out, len, p) == 1 ? 0 : -1;
	EVP_KDF_CTX_free(kc);
	return rc;
}

EVP_PKEY *
ca_fleet_key(const char *id)
{
	unsigned char	 d[32];
	char		 what[16];
	EC_KEY		*ec = NULL;
	EC_POINT	*pub = NULL;
	BIGNUM		*priv = NULL;
	const EC_GROUP	*g;
	EVP_PKEY	*k = NULL;
	int		 i;

	if ((ec = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1)) == NULL)
		goto fail;
	g = EC_KEY_get0_group(ec);
	/* a scalar in [1, n-1]; another round in the 2^-32 other cases */
	for (i = 0; i < 16; i++) {
		snprintf(what, sizeof(what), "key%d", i);
		if (fleet_hkdf(what, id, d, sizeof(d)) == -1 ||
		    (priv = BN_bin2bn(d, sizeof(d), priv)) == NULL)
			goto fail;
		if (!BN_is_zero(priv) &&
		    BN_cmp(priv, EC_GROUP_get0_order(g)) < 0)
			break;
	}
	if (i == 16 || (pub = EC_POINT_new(g)) == NULL ||
	    EC_POINT_mul(g, pub, priv, NULL, NULL, NULL) != 1 ||
	    EC_KEY_set_private_key(ec, priv) != 1 ||
	    EC_KEY_set_public_key(ec, pub) != 1 ||
	    (k = EVP_PKEY_new()) == NULL || EVP_PKEY_assign_EC_KEY(k, ec) != 1)
		goto fail;
	ec = NULL;	/* k owns it */
	OPENSSL_cleanse(d, sizeof(d));
	BN_clear_free(priv);
	EC_POINT_free(pub);
	return k;
 fail:
	log_tls("sandbox %s: deriving the fleet CA key", id);
	OPENSSL_cleanse(d, sizeof(d));
	BN_clear_free(priv);
	EC_POINT_free(pub);
	EC_KEY_free(ec);
	EVP_PKEY_free(k);
	return NULL;
}

int
ca_fleet_cert_fields(X509 *x, const char *id, long valid_days)
{
	unsigned char	 b[16];
	BIGNUM		*bn = NULL;
	int		 rc = -1;

	if (fleet_hkdf("serial", id, b, sizeof(b)) == -1)
		return -1;
	b[0] &= 0x7f;	/* positive */
	b[0] |= 0x01;	/* never zero */
	if ((bn = BN_bin2bn(b, sizeof(b), NULL)) == NULL ||
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL)
		goto out;
	/* 2025-01-01T00:00:00Z: the same on every gateway */
	if (ASN1_TIME_set(X509_getm_notBefore(x), (time_t)1735689600) ==
	    NULL || ASN1_TIME_adj(X509_getm_notAfter(x), (time_t)1735689600,
	    (int)valid_days, 0) == NULL)
		goto out;
	rc = 0;
 out:
	BN_free(bn);
	return rc;
}
