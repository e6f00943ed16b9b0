/*
 * Private to src/ca/: what ca_store.c (CA files, registry) and ca_mint.c
 * (certificate building) share and nothing outside this directory needs.
 * The CA's signing key never leaves these files.
 */
#ifndef AIRLOCK_CA_INTERNAL_H
#define AIRLOCK_CA_INTERNAL_H

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "ca/ca.h"

#define CA_BACKDATE_S	3600		/* notBefore = now - 1h: clock skew */

/* The CA's private key (borrowed). Never logged, never written but once. */
EVP_PKEY	*ca_sign_key(const struct ca *);

/*
 * The public half of ca_leaf_key() in the form X509_set_pubkey() encodes
 * fastest (borrowed); see ca_fast_pub() in ca_store.c.
 */
EVP_PKEY	*ca_leaf_pub(const struct ca *);

/* A random positive 128-bit serial into <x>. Returns 0 or -1. */
int		 ca_x509_serial(X509 *x);

/*
 * Add the extension <nid> = <value> (openssl.cnf syntax) to <subject>,
 * with <issuer> as the issuer for AKI. Both borrowed. Returns 0 or -1.
 */
int		 ca_x509_ext(X509 *issuer, X509 *subject, int nid,
		    const char *value);

/* ---- the fleet CA (ca_fleet.c) ---- */

/* The CA key of sandbox <id> derived from the fleet master key: new
 * reference, or NULL (logged). */
EVP_PKEY	*ca_fleet_key(const char *id);
/* The serial and validity of <id>'s fleet CA certificate. 0 or -1. */
int		 ca_fleet_cert_fields(X509 *x, const char *id, long valid_days);

#endif
