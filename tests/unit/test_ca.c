/*
 * Check suite for src/ca: CA files and registry, leaf minting, the leaf
 * cache. Every test gets a fresh state_dir (mkdtemp) and a fresh registry.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "unit.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))
#define DAY_MS		(24ULL * 3600 * 1000)
#define SLACK_S		120	/* seconds a slow (sanitized) run may take */

static char	state_dir[1024];	/* small enough that path_of() fits */

static void
ca_setup(void)
{
	const char	*tmp;

	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
		tmp = "/tmp";
	snprintf(state_dir, sizeof(state_dir), "%s/airlock-ca-XXXXXX", tmp);
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void
ca_teardown(void)
{
	ca_registry_free();
	nftw(state_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static char *
path_of(const char *id, const char *file)
{
	static char	p[PATH_MAX];

	if (file == NULL)
		snprintf(p, sizeof(p), "%s/ca/%s", state_dir, id);
	else
		snprintf(p, sizeof(p), "%s/ca/%s/%s", state_dir, id, file);
	return p;
}

static mode_t
mode_of(const char *path)
{
	struct stat	st;

	ck_assert_msg(stat(path, &st) == 0, "stat %s: %s", path,
	    strerror(errno));
	return st.st_mode & 07777;
}

static char *
slurp(const char *path)
{
	FILE	*f;
	char	*buf;
	size_t	 n;

	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	buf = calloc(1, 65536);
	n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* seconds from now to <t> (negative: in the past) */
static long
secs_from_now(const ASN1_TIME *t)
{
	int	days, secs;

	ck_assert_int_eq(ASN1_TIME_diff(&days, &secs, NULL, t), 1);
	return (long)days * 86400 + secs;
}

/* X509_V_OK when <leaf> chains to <root> for a TLS server named <host>. */
static int
verify_leaf(X509 *leaf, X509 *root, const char *host, int is_ip)
{
	X509_STORE		*st;
	X509_STORE_CTX		*ctx;
	X509_VERIFY_PARAM	*vp;
	int			 err;

	ck_assert_ptr_nonnull(st = X509_STORE_new());
	ck_assert_ptr_nonnull(ctx = X509_STORE_CTX_new());
	ck_assert_int_eq(X509_STORE_add_cert(st, root), 1);
	ck_assert_int_eq(X509_STORE_CTX_init(ctx, st, leaf, NULL), 1);
	ck_assert_int_eq(X509_STORE_CTX_set_purpose(ctx,
	    X509_PURPOSE_SSL_SERVER), 1);
	vp = X509_STORE_CTX_get0_param(ctx);
	if (is_ip)
		ck_assert_int_eq(X509_VERIFY_PARAM_set1_ip_asc(vp, host), 1);
	else
		ck_assert_int_eq(X509_VERIFY_PARAM_set1_host(vp, host, 0), 1);
	err = X509_verify_cert(ctx) == 1 ? X509_V_OK :
	    X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return err;
}

static int
ext_critical(X509 *x, int nid)
{
	int	loc;

	ck_assert_int_ge(loc = X509_get_ext_by_NID(x, nid, -1), 0);
	return X509_EXTENSION_get_critical(X509_get_ext(x, loc));
}

/* The serial is positive, nonzero and fits 127 bits. */
static void
check_serial(X509 *x)
{
	BIGNUM	*bn;

	ck_assert_ptr_nonnull(bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x),
	    NULL));
	ck_assert(!BN_is_negative(bn));
	ck_assert(!BN_is_zero(bn));
	ck_assert_int_le(BN_num_bits(bn), 127);
	ck_assert_int_ge(BN_num_bits(bn), 64);	/* 2^-63 flake: fine */
	BN_free(bn);
}

/* CA files and registry */

START_TEST(test_ca_create_files)
{
	struct ca	*ca;
	char		*s;

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "sbx1"));
	ck_assert_ptr_eq(ca_get(state_dir, "sbx1"), ca);
	ck_assert_int_eq(mode_of(path_of("", NULL)), 0700);
	ck_assert_int_eq(mode_of(path_of("sbx1", NULL)), 0700);
	ck_assert_int_eq(mode_of(path_of("sbx1", "ca.key")), 0600);
	ck_assert_int_eq(mode_of(path_of("sbx1", "ca.crt")), 0644);
	ck_assert_str_eq(ca_cert_path(ca), path_of("sbx1", "ca.crt"));
	ck_assert_str_eq(ca_sandbox_id(ca), "sbx1");
	ck_assert_uint_ne(ca_generation(ca), 0);
	/* nothing half-written left behind */
	ck_assert_int_eq(access(path_of("sbx1", "ca.key.tmp"), F_OK), -1);
	ck_assert_int_eq(access(path_of("sbx1", "ca.crt.tmp"), F_OK), -1);

	s = slurp(path_of("sbx1", "ca.key"));
	ck_assert_msg(strncmp(s, "-----BEGIN PRIVATE KEY-----", 27) == 0,
	    "ca.key is not unencrypted PKCS#8");
	free(s);
	s = slurp(path_of("sbx1", "ca.crt"));
	ck_assert_str_eq(ca_cert_pem(ca), s);
	ck_assert(strncmp(s, "-----BEGIN CERTIFICATE-----", 27) == 0);
	free(s);
}
END_TEST

START_TEST(test_ca_extensions)
{
	struct ca	*ca;
	X509		*x;
	EVP_PKEY	*pk;
	char		 subj[512];

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "build-42"));
	x = ca_cert(ca);
	ck_assert_int_eq(X509_get_version(x), 2);
	ck_assert_int_eq(X509_check_ca(x), 1);
	ck_assert_int_eq(X509_get_pathlen(x), 0);
	ck_assert_int_eq(ext_critical(x, NID_basic_constraints), 1);
	ck_assert_uint_eq(X509_get_key_usage(x),
	    KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	ck_assert_int_eq(ext_critical(x, NID_key_usage), 1);
	ck_assert_ptr_nonnull(X509_get0_subject_key_id(x));
	X509_NAME_oneline(X509_get_subject_name(x), subj, sizeof(subj));
	ck_assert_msg(strstr(subj, "build-42") != NULL, "subject %s", subj);
	ck_assert_msg(strstr(subj, "O=airlock") != NULL, "subject %s", subj);
	ck_assert_int_eq(X509_NAME_cmp(X509_get_subject_name(x),
	    X509_get_issuer_name(x)), 0);
	check_serial(x);
	ck_assert_int_eq(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);

	pk = X509_get0_pubkey(x);
	ck_assert_int_eq(EVP_PKEY_get_base_id(pk), EVP_PKEY_EC);
	ck_assert_int_eq(EVP_PKEY_get_bits(pk), 256);
	ck_assert_int_eq(X509_verify(x, pk), 1);
	/* the leaf key is another P-256 key */
	ck_assert_ptr_nonnull(ca_leaf_key(ca));
	ck_assert_int_eq(EVP_PKEY_get_bits(ca_leaf_key(ca)), 256);
	ck_assert_int_ne(EVP_PKEY_eq(pk, ca_leaf_key(ca)), 1);

	ck_assert_int_ge(secs_from_now(X509_get0_notBefore(x)),
	    -3600 - SLACK_S);
	ck_assert_int_le(secs_from_now(X509_get0_notBefore(x)), -3600 + 5);
	ck_assert_int_ge(secs_from_now(X509_get0_notAfter(x)),
	    3650L * 86400);
}
END_TEST

START_TEST(test_ca_long_id)
{
	const char	*id = "a123456789b123456789c123456789d123456789"
			    "e123456789f12345";	/* 56: CN would be 75 */
	struct ca	*ca;
	char		 subj[512];

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, id));
	X509_NAME_oneline(X509_get_subject_name(ca_cert(ca)), subj,
	    sizeof(subj));
	ck_assert_msg(strstr(subj, id) != NULL, "subject %s", subj);
}
END_TEST

static unsigned char *
pubkey_der(EVP_PKEY *k, int *len)
{
	unsigned char	*der = NULL;

	ck_assert_int_gt(*len = i2d_PUBKEY(k, &der), 0);
	return der;
}

START_TEST(test_ca_reload)
{
	struct ca	*ca;
	ASN1_INTEGER	*serial;
	X509		*leaf;
	char		*pem;
	unsigned char	*lk1, *lk2;
	int		 l1, l2;

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "keep"));
	serial = ASN1_INTEGER_dup(X509_get0_serialNumber(ca_cert(ca)));
	pem = strdup(ca_cert_pem(ca));
	lk1 = pubkey_der(ca_leaf_key(ca), &l1);
	ck_assert_ptr_nonnull(leaf = ca_mint_leaf(ca, "reload.test",
	    7 * DAY_MS));
	ca_registry_free();

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "keep"));
	ck_assert_int_eq(ASN1_INTEGER_cmp(serial,
	    X509_get0_serialNumber(ca_cert(ca))), 0);
	ck_assert_str_eq(ca_cert_pem(ca), pem);
	ck_assert_int_eq(X509_check_private_key(ca_cert(ca),
	    ca_leaf_key(ca)), 0);
	/* the leaf key is memory only: a new one per load */
	lk2 = pubkey_der(ca_leaf_key(ca), &l2);
	ck_assert(l1 != l2 || memcmp(lk1, lk2, (size_t)l1) != 0);
	/* and what was minted before still chains to the reloaded CA */
	ck_assert_int_eq(verify_leaf(leaf, ca_cert(ca), "reload.test", 0),
	    X509_V_OK);

	X509_free(leaf);
	OPENSSL_free(lk1);
	OPENSSL_free(lk2);
	ASN1_INTEGER_free(serial);
	free(pem);
}
END_TEST

START_TEST(test_ca_key_mode_refused)
{
	const char	*key;

	ck_assert_ptr_nonnull(ca_get(state_dir, "loose"));
	ca_registry_free();
	key = strdup(path_of("loose", "ca.key"));

	ck_assert_int_eq(chmod(key, 0640), 0);
	ck_assert_ptr_null(ca_get(state_dir, "loose"));
	ck_assert_int_eq(chmod(key, 0604), 0);
	ck_assert_ptr_null(ca_get(state_dir, "loose"));
	/* refused, not replaced: the files are as they were */
	ck_assert_int_eq(mode_of(key), 0604);
	ck_assert_int_eq(chmod(key, 0600), 0);
	ck_assert_ptr_nonnull(ca_get(state_dir, "loose"));
	free((void *)key);
}
END_TEST

START_TEST(test_ca_key_mismatch_refused)
{
	char	*key;
	int	 fd;

	ck_assert_ptr_nonnull(ca_get(state_dir, "a"));
	ck_assert_ptr_nonnull(ca_get(state_dir, "b"));
	ca_registry_free();
	/* a's ca.crt with b's key, still 0600 */
	key = slurp(path_of("b", "ca.key"));
	fd = open(path_of("a", "ca.key"), O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, key, strlen(key)), (ssize_t)strlen(key));
	close(fd);
	ck_assert_int_eq(mode_of(path_of("a", "ca.key")), 0600);
	ck_assert_ptr_null(ca_get(state_dir, "a"));
	ck_assert_ptr_nonnull(ca_get(state_dir, "b"));
	free(key);
}
END_TEST

/* An encrypted key is refused, without asking for a passphrase. */
START_TEST(test_ca_encrypted_key_refused)
{
	EVP_PKEY	*k;
	FILE		*f;

	ck_assert_ptr_nonnull(ca_get(state_dir, "enc"));
	ca_registry_free();
	ck_assert_ptr_nonnull(f = fopen(path_of("enc", "ca.key"), "r"));
	ck_assert_ptr_nonnull(k = PEM_read_PrivateKey(f, NULL, NULL, NULL));
	fclose(f);
	ck_assert_ptr_nonnull(f = fopen(path_of("enc", "ca.key"), "w"));
	ck_assert_int_eq(PEM_write_PrivateKey(f, k, EVP_aes_128_cbc(),
	    (unsigned char *)"secret", 6, NULL, NULL), 1);
	fclose(f);
	EVP_PKEY_free(k);
	ck_assert_int_eq(mode_of(path_of("enc", "ca.key")), 0600);
	ck_assert_ptr_null(ca_get(state_dir, "enc"));
}
END_TEST

/* A crash between the two renames leaves ca.key alone: start over. */
START_TEST(test_ca_half_written)
{
	struct ca	*ca;
	ASN1_INTEGER	*serial;
	int		 fd;

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "half"));
	serial = ASN1_INTEGER_dup(X509_get0_serialNumber(ca_cert(ca)));
	ca_registry_free();
	ck_assert_int_eq(unlink(path_of("half", "ca.crt")), 0);
	/* and a stale, too open temp file from the crash */
	fd = open(path_of("half", "ca.key.tmp"), O_WRONLY | O_CREAT, 0666);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "junk", 4), 4);
	close(fd);

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "half"));
	ck_assert_int_ne(ASN1_INTEGER_cmp(serial,
	    X509_get0_serialNumber(ca_cert(ca))), 0);
	ck_assert_int_eq(mode_of(path_of("half", "ca.key")), 0600);
	ck_assert_int_eq(access(path_of("half", "ca.key.tmp"), F_OK), -1);
	ASN1_INTEGER_free(serial);

	/* a certificate without its key is not recreated behind one's back */
	ca_registry_free();
	ck_assert_int_eq(unlink(path_of("half", "ca.key")), 0);
	ck_assert_ptr_null(ca_get(state_dir, "half"));
	ck_assert_int_eq(access(path_of("half", "ca.crt"), F_OK), 0);
}
END_TEST

static const char *const bad_ids[] = {
	"", ".", "..", ".hidden", "a/b", "/abs", "x/../y", "new\nline", "tab\t",
};

START_TEST(test_ca_bad_id)
{
	ck_assert_ptr_null(ca_get(state_dir, bad_ids[_i]));
	ck_assert_int_eq(ca_registry_drop(state_dir, bad_ids[_i]), -1);
	ck_assert_ptr_null(ca_get(state_dir, NULL));
	/* nothing created for it */
	ck_assert_int_eq(access(path_of("", NULL), F_OK), -1);
}
END_TEST

START_TEST(test_ca_drop)
{
	struct ca	*old, *ca;
	struct ca_cache	*cc;
	X509		*l1, *l2;
	ASN1_INTEGER	*serial;
	uint64_t	 gen;
	int		 minted;

	ck_assert_ptr_nonnull(cc = ca_cache_new(100));
	ck_assert_ptr_nonnull(old = ca_get(state_dir, "gone"));
	ck_assert_ptr_nonnull(ca_get(state_dir, "stays"));
	gen = ca_generation(old);
	serial = ASN1_INTEGER_dup(X509_get0_serialNumber(ca_cert(old)));
	ck_assert_ptr_nonnull(l1 = ca_cache_get(cc, old, "x.test", DAY_MS,
	    &minted));
	ck_assert_int_eq(minted, 1);

	ck_assert_int_eq(ca_registry_drop(state_dir, "gone"), 0);
	ck_assert_int_eq(access(path_of("gone", NULL), F_OK), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(access(path_of("stays", "ca.crt"), F_OK), 0);
	/* holders of the old CA still have a valid one (ASan watches) */
	ck_assert_str_eq(ca_sandbox_id(old), "gone");
	ck_assert_int_eq(X509_check_ca(ca_cert(old)), 1);

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "gone"));
	ck_assert_ptr_ne(ca, old);
	ck_assert_uint_ne(ca_generation(ca), gen);
	ck_assert_int_ne(ASN1_INTEGER_cmp(serial,
	    X509_get0_serialNumber(ca_cert(ca))), 0);
	ck_assert_ptr_nonnull(l2 = ca_cache_get(cc, ca, "x.test", DAY_MS,
	    &minted));
	ck_assert_int_eq(minted, 1);
	ck_assert_ptr_ne(l1, l2);
	ck_assert_int_ne(verify_leaf(l1, ca_cert(ca), "x.test", 0), X509_V_OK);
	ck_assert_int_eq(verify_leaf(l2, ca_cert(ca), "x.test", 0), X509_V_OK);

	/* dropping what is not there is not an error */
	ck_assert_int_eq(ca_registry_drop(state_dir, "never"), 0);
	ck_assert_int_eq(ca_registry_drop(state_dir, "gone"), 0);
	ck_assert_int_eq(ca_registry_drop(state_dir, "gone"), 0);

	X509_free(l1);
	X509_free(l2);
	ASN1_INTEGER_free(serial);
	ca_cache_free(cc);
}
END_TEST

/* Leaves */

START_TEST(test_leaf_dns)
{
	struct ca		*ca, *other;
	X509			*x;
	GENERAL_NAMES		*gens;
	GENERAL_NAME		*gen;
	char			 cn[256];

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "one"));
	ck_assert_ptr_nonnull(other = ca_get(state_dir, "two"));
	ck_assert_ptr_nonnull(x = ca_mint_leaf(ca, "api.example.com",
	    7 * DAY_MS));

	ck_assert_int_eq(X509_get_version(x), 2);
	ck_assert_int_eq(verify_leaf(x, ca_cert(ca), "api.example.com", 0),
	    X509_V_OK);
	ck_assert_int_eq(verify_leaf(x, ca_cert(ca), "www.example.com", 0),
	    X509_V_ERR_HOSTNAME_MISMATCH);
	ck_assert_int_ne(verify_leaf(x, ca_cert(other), "api.example.com", 0),
	    X509_V_OK);
	ck_assert_int_eq(X509_check_host(x, "api.example.com", 0, 0, NULL), 1);
	ck_assert_int_eq(X509_check_host(x, "example.com", 0, 0, NULL), 0);

	/* SAN is exactly the host, as a DNS name */
	ck_assert_ptr_nonnull(gens = X509_get_ext_d2i(x, NID_subject_alt_name,
	    NULL, NULL));
	ck_assert_int_eq(sk_GENERAL_NAME_num(gens), 1);
	gen = sk_GENERAL_NAME_value(gens, 0);
	ck_assert_int_eq(gen->type, GEN_DNS);
	ck_assert_str_eq((const char *)ASN1_STRING_get0_data(gen->d.dNSName),
	    "api.example.com");
	GENERAL_NAMES_free(gens);

	ck_assert_int_eq(X509_NAME_get_text_by_NID(X509_get_subject_name(x),
	    NID_commonName, cn, sizeof(cn)), 15);
	ck_assert_str_eq(cn, "api.example.com");
	ck_assert_int_eq(X509_NAME_cmp(X509_get_issuer_name(x),
	    X509_get_subject_name(ca_cert(ca))), 0);

	ck_assert_int_eq(X509_check_ca(x), 0);
	ck_assert(X509_get_extension_flags(x) & EXFLAG_BCONS);
	ck_assert_int_eq(ext_critical(x, NID_basic_constraints), 1);
	ck_assert_uint_eq(X509_get_key_usage(x), KU_DIGITAL_SIGNATURE);
	ck_assert_int_eq(ext_critical(x, NID_key_usage), 1);
	ck_assert_uint_eq(X509_get_extended_key_usage(x), XKU_SSL_SERVER);
	ck_assert_ptr_nonnull(X509_get0_authority_key_id(x));
	ck_assert_int_eq(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x),
	    X509_get0_subject_key_id(ca_cert(ca))), 0);
	ck_assert_int_eq(EVP_PKEY_eq(X509_get0_pubkey(x), ca_leaf_key(ca)), 1);
	ck_assert_int_eq(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
	check_serial(x);
	X509_free(x);
}
END_TEST

START_TEST(test_leaf_validity)
{
	struct ca	*ca;
	X509		*x;
	long		 s;

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "v"));
	ck_assert_ptr_nonnull(x = ca_mint_leaf(ca, "v.test", 7 * DAY_MS));
	s = secs_from_now(X509_get0_notBefore(x));
	ck_assert_int_ge(s, -3600 - SLACK_S);
	ck_assert_int_le(s, -3600 + 5);
	s = secs_from_now(X509_get0_notAfter(x));
	ck_assert_int_ge(s, 7L * 86400 - SLACK_S);
	ck_assert_int_le(s, 7L * 86400 + 5);
	X509_free(x);

	/* 90 days asked, 30 given */
	ck_assert_ptr_nonnull(x = ca_mint_leaf(ca, "v.test", 90 * DAY_MS));
	s = secs_from_now(X509_get0_notAfter(x));
	ck_assert_int_ge(s, 30L * 86400 - SLACK_S);
	ck_assert_int_le(s, 30L * 86400 + 5);
	X509_free(x);
}
END_TEST

static const struct {
	const char	*host;
	int		 len;		/* bytes of the IP SAN */
	const char	*alias;		/* another spelling of the address */
} ip_cases[] = {
	{ "10.1.2.3",		4,	"10.1.2.3" },
	{ "::1",		16,	"0:0:0:0:0:0:0:1" },
	{ "2001:db8::7",	16,	"2001:DB8:0::7" },
};

START_TEST(test_leaf_ip)
{
	struct ca	*ca;
	X509		*x;
	GENERAL_NAMES	*gens;
	GENERAL_NAME	*gen;
	const char	*host = ip_cases[_i].host;

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "ip"));
	ck_assert_ptr_nonnull(x = ca_mint_leaf(ca, host, DAY_MS));
	ck_assert_ptr_nonnull(gens = X509_get_ext_d2i(x, NID_subject_alt_name,
	    NULL, NULL));
	ck_assert_int_eq(sk_GENERAL_NAME_num(gens), 1);
	gen = sk_GENERAL_NAME_value(gens, 0);
	ck_assert_int_eq(gen->type, GEN_IPADD);
	ck_assert_int_eq(ASN1_STRING_length(gen->d.iPAddress),
	    ip_cases[_i].len);
	GENERAL_NAMES_free(gens);
	ck_assert_int_eq(X509_check_ip_asc(x, host, 0), 1);
	ck_assert_int_eq(X509_check_ip_asc(x, ip_cases[_i].alias, 0), 1);
	ck_assert_int_eq(X509_check_ip_asc(x, "10.9.9.9", 0), 0);
	ck_assert_int_eq(verify_leaf(x, ca_cert(ca), host, 1), X509_V_OK);
	X509_free(x);
}
END_TEST

START_TEST(test_leaf_long_host)
{
	struct ca	*ca;
	X509		*x;
	char		 host[200], cn[256];

	/* 60 + 1 + 60 + 1 + 60 + 5 = 187 characters */
	memset(host, 'a', 60);
	host[60] = '.';
	memset(host + 61, 'b', 60);
	host[121] = '.';
	memset(host + 122, 'c', 60);
	strcpy(host + 182, ".test");
	ck_assert_int_eq(strlen(host), 187);

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "long"));
	ck_assert_ptr_nonnull(x = ca_mint_leaf(ca, host, DAY_MS));
	ck_assert_int_eq(X509_NAME_get_text_by_NID(X509_get_subject_name(x),
	    NID_commonName, cn, sizeof(cn)), 64);
	ck_assert(strncmp(cn, host, 64) == 0);
	ck_assert_int_eq(X509_check_host(x, host, 0, 0, NULL), 1);
	ck_assert_int_eq(verify_leaf(x, ca_cert(ca), host, 0), X509_V_OK);
	X509_free(x);
}
END_TEST

static const char *const bad_hosts[] = {
	"", ".", ".example.com", "a b.test", "new\nline.test", "*.example.com",
	"ex/ample.test", "1.2.3", "300.1.1.1", "01.2.3.4", "1.2.3.4 ",
	"fe80::1%eth0", "[::1]",
	"a,DNS:evil.test", "caf\xc3\xa9.test",
};

START_TEST(test_leaf_bad_host)
{
	struct ca	*ca;

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "bad"));
	ck_assert_ptr_null(ca_mint_leaf(ca, bad_hosts[_i], DAY_MS));
}
END_TEST

START_TEST(test_leaf_too_long_host)
{
	struct ca	*ca;
	char		 host[300];

	memset(host, 'a', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "bad"));
	ck_assert_ptr_null(ca_mint_leaf(ca, host, DAY_MS));
	ck_assert_ptr_null(ca_mint_leaf(ca, NULL, DAY_MS));
}
END_TEST

START_TEST(test_leaf_serials_differ)
{
	struct ca	*ca;
	X509		*a, *b;

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "ser"));
	ck_assert_ptr_nonnull(a = ca_mint_leaf(ca, "s.test", DAY_MS));
	ck_assert_ptr_nonnull(b = ca_mint_leaf(ca, "s.test", DAY_MS));
	ck_assert_int_ne(ASN1_INTEGER_cmp(X509_get0_serialNumber(a),
	    X509_get0_serialNumber(b)), 0);
	ck_assert_int_ne(ASN1_INTEGER_cmp(X509_get0_serialNumber(a),
	    X509_get0_serialNumber(ca_cert(ca))), 0);
	check_serial(a);
	check_serial(b);
	X509_free(a);
	X509_free(b);
}
END_TEST

/*
 * End to end, as src/conn uses it: a TLS 1.3 server with the cached leaf
 * and ca_leaf_key(), a client trusting only the sandbox's CA and checking
 * the name, over an in-memory BIO pair.
 */
static int
tls_pump(SSL *cli, SSL *srv)
{
	int	i, rc, rs, done_c = 0, done_s = 0;

	for (i = 0; i < 100 && !(done_c && done_s); i++) {
		if (!done_c) {
			rc = SSL_do_handshake(cli);
			if (rc == 1)
				done_c = 1;
			else if (SSL_get_error(cli, rc) != SSL_ERROR_WANT_READ)
				return -1;
		}
		if (!done_s) {
			rs = SSL_do_handshake(srv);
			if (rs == 1)
				done_s = 1;
			else if (SSL_get_error(srv, rs) != SSL_ERROR_WANT_READ)
				return -1;
		}
	}
	return done_c && done_s ? 0 : -1;
}

static long
tls_handshake(struct ca *srv_ca, struct ca *trusted, const char *host)
{
	struct ca_cache	*cc;
	SSL_CTX		*sctx, *cctx;
	SSL		*srv, *cli;
	BIO		*bs, *bc;
	X509		*leaf;
	long		 res;
	int		 ok;

	ck_assert_ptr_nonnull(cc = ca_cache_new(10));
	ck_assert_ptr_nonnull(sctx = SSL_CTX_new(TLS_server_method()));
	ck_assert_ptr_nonnull(cctx = SSL_CTX_new(TLS_client_method()));
	ck_assert_int_eq(X509_STORE_add_cert(SSL_CTX_get_cert_store(cctx),
	    ca_cert(trusted)), 1);
	SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
	ck_assert_ptr_nonnull(srv = SSL_new(sctx));
	ck_assert_ptr_nonnull(cli = SSL_new(cctx));
	ck_assert_ptr_nonnull(leaf = ca_cache_get(cc, srv_ca, host, DAY_MS,
	    NULL));
	ck_assert_int_eq(SSL_use_certificate(srv, leaf), 1);
	ck_assert_int_eq(SSL_use_PrivateKey(srv, ca_leaf_key(srv_ca)), 1);
	X509_free(leaf);
	ck_assert_int_eq(SSL_set_tlsext_host_name(cli, host), 1);
	ck_assert_int_eq(SSL_set1_host(cli, host), 1);
	ck_assert_int_eq(BIO_new_bio_pair(&bs, 0, &bc, 0), 1);
	SSL_set_bio(srv, bs, bs);
	SSL_set_bio(cli, bc, bc);
	SSL_set_accept_state(srv);
	SSL_set_connect_state(cli);
	ok = tls_pump(cli, srv) == 0;
	res = SSL_get_verify_result(cli);
	if (!ok && res == X509_V_OK)
		res = -1;		/* failed, but not in verification */
	SSL_free(cli);
	SSL_free(srv);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	ca_cache_free(cc);
	ERR_clear_error();
	return res;
}

START_TEST(test_leaf_tls_handshake)
{
	struct ca	*ca, *other;

	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "tls"));
	ck_assert_ptr_nonnull(other = ca_get(state_dir, "tls2"));
	ck_assert_int_eq(tls_handshake(ca, ca, "api.example.com"), X509_V_OK);
	ck_assert_int_eq(tls_handshake(ca, other, "api.example.com"),
	    X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
}
END_TEST

/* Cache */

START_TEST(test_cache_hit)
{
	struct ca_cache	*cc;
	struct ca	*ca;
	X509		*a, *b;
	uint64_t	 hits, misses;
	size_t		 n;
	int		 minted = -1;

	ck_assert_ptr_nonnull(cc = ca_cache_new(100));
	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "c"));
	ck_assert_ptr_nonnull(a = ca_cache_get(cc, ca, "h.test", DAY_MS,
	    &minted));
	ck_assert_int_eq(minted, 1);
	ck_assert_ptr_nonnull(b = ca_cache_get(cc, ca, "h.test", DAY_MS,
	    &minted));
	ck_assert_int_eq(minted, 0);
	ck_assert_ptr_eq(a, b);
	/* a different host is a different entry */
	X509_free(b);
	ck_assert_ptr_nonnull(b = ca_cache_get(cc, ca, "H.test", DAY_MS,
	    NULL));
	ck_assert_ptr_ne(a, b);
	ca_cache_stats(cc, &hits, &misses, &n);
	ck_assert_uint_eq(hits, 1);
	ck_assert_uint_eq(misses, 2);
	ck_assert_uint_eq(n, 2);

	/* the caller's reference outlives the cache */
	ca_cache_free(cc);
	ck_assert_int_eq(verify_leaf(a, ca_cert(ca), "h.test", 0), X509_V_OK);
	X509_free(a);
	X509_free(b);
}
END_TEST

static int
cache_minted(struct ca_cache *cc, struct ca *ca, const char *host)
{
	X509	*x;
	int	 minted;

	ck_assert_ptr_nonnull(x = ca_cache_get(cc, ca, host, DAY_MS, &minted));
	ck_assert_int_eq(X509_check_host(x, host, 0, 0, NULL), 1);
	X509_free(x);
	return minted;
}

/* Capacity under 64 is a single shard: the LRU order is exact. */
START_TEST(test_cache_lru)
{
	struct ca_cache	*cc;
	struct ca	*ca;
	size_t		 n;

	ck_assert_ptr_nonnull(cc = ca_cache_new(4));
	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "lru"));
	ck_assert_int_eq(cache_minted(cc, ca, "a.test"), 1);
	ck_assert_int_eq(cache_minted(cc, ca, "b.test"), 1);
	ck_assert_int_eq(cache_minted(cc, ca, "c.test"), 1);
	ck_assert_int_eq(cache_minted(cc, ca, "d.test"), 1);
	ck_assert_int_eq(cache_minted(cc, ca, "a.test"), 0);	/* a d c b */
	ck_assert_int_eq(cache_minted(cc, ca, "e.test"), 1);	/* e a d c */
	ca_cache_stats(cc, NULL, NULL, &n);
	ck_assert_uint_eq(n, 4);
	ck_assert_int_eq(cache_minted(cc, ca, "a.test"), 0);	/* a e d c */
	ck_assert_int_eq(cache_minted(cc, ca, "c.test"), 0);	/* c a e d */
	ck_assert_int_eq(cache_minted(cc, ca, "b.test"), 1);	/* b c a e */
	ck_assert_int_eq(cache_minted(cc, ca, "e.test"), 0);	/* e b c a */
	ck_assert_int_eq(cache_minted(cc, ca, "d.test"), 1);	/* d e b c */
	ck_assert_int_eq(cache_minted(cc, ca, "a.test"), 1);	/* a d e b */
	ca_cache_stats(cc, NULL, NULL, &n);
	ck_assert_uint_eq(n, 4);
	ca_cache_free(cc);
}
END_TEST

START_TEST(test_cache_capacity)
{
	struct ca_cache	*cc;
	struct ca	*ca;
	char		 host[64];
	uint64_t	 hits, misses;
	size_t		 n;
	int		 i;

	/* 1000 / 64: 15 shards of 66 or 67 */
	ck_assert_ptr_nonnull(cc = ca_cache_new(1000));
	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "cap"));
	for (i = 0; i < 1300; i++) {
		snprintf(host, sizeof(host), "h%d.test", i);
		ck_assert_int_eq(cache_minted(cc, ca, host), 1);
	}
	ca_cache_stats(cc, &hits, &misses, &n);
	ck_assert_uint_eq(hits, 0);
	ck_assert_uint_eq(misses, 1300);
	ck_assert_uint_le(n, 1000);
	ck_assert_uint_gt(n, 900);
	/* the most recent of each shard are still there */
	ck_assert_int_eq(cache_minted(cc, ca, "h1299.test"), 0);
	ca_cache_free(cc);
}
END_TEST

START_TEST(test_cache_disabled)
{
	struct ca_cache	*cc;
	struct ca	*ca;
	size_t		 n;

	ck_assert_ptr_nonnull(cc = ca_cache_new(0));
	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "off"));
	ck_assert_int_eq(cache_minted(cc, ca, "a.test"), 1);
	ck_assert_int_eq(cache_minted(cc, ca, "a.test"), 1);
	ca_cache_stats(cc, NULL, NULL, &n);
	ck_assert_uint_eq(n, 0);
	ca_cache_free(cc);
	ca_cache_free(NULL);
}
END_TEST

START_TEST(test_cache_per_ca)
{
	struct ca_cache	*cc;
	struct ca	*a, *b;
	X509		*xa, *xb;
	int		 minted;

	ck_assert_ptr_nonnull(cc = ca_cache_new(100));
	ck_assert_ptr_nonnull(a = ca_get(state_dir, "pa"));
	ck_assert_ptr_nonnull(b = ca_get(state_dir, "pb"));
	ck_assert_ptr_nonnull(xa = ca_cache_get(cc, a, "same.test", DAY_MS,
	    &minted));
	ck_assert_int_eq(minted, 1);
	ck_assert_ptr_nonnull(xb = ca_cache_get(cc, b, "same.test", DAY_MS,
	    &minted));
	ck_assert_int_eq(minted, 1);
	ck_assert_ptr_ne(xa, xb);
	ck_assert_int_eq(verify_leaf(xa, ca_cert(a), "same.test", 0),
	    X509_V_OK);
	ck_assert_int_eq(verify_leaf(xb, ca_cert(b), "same.test", 0),
	    X509_V_OK);
	ck_assert_int_ne(verify_leaf(xa, ca_cert(b), "same.test", 0),
	    X509_V_OK);
	ck_assert_int_ne(verify_leaf(xb, ca_cert(a), "same.test", 0),
	    X509_V_OK);
	X509_free(xa);
	X509_free(xb);
	ca_cache_free(cc);
}
END_TEST

/* A leaf with less than an hour left is not served again. */
START_TEST(test_cache_remint_near_expiry)
{
	struct ca_cache	*cc;
	struct ca	*ca;
	X509		*x;
	uint64_t	 hits, misses;
	size_t		 n;

	ck_assert_ptr_nonnull(cc = ca_cache_new(10));
	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "exp"));
	ck_assert_int_eq(cache_minted(cc, ca, "a.test"), 1);
	ck_assert_int_eq(cache_minted(cc, ca, "a.test"), 0);
	ca_cache_free(cc);

	ck_assert_ptr_nonnull(cc = ca_cache_new(10));
	ck_assert_ptr_nonnull(x = ca_cache_get(cc, ca, "b.test",
	    30 * 60 * 1000, NULL));
	X509_free(x);
	ck_assert_int_eq(cache_minted(cc, ca, "b.test"), 1);
	ca_cache_stats(cc, &hits, &misses, &n);
	ck_assert_uint_eq(hits, 0);
	ck_assert_uint_eq(misses, 2);
	ck_assert_uint_eq(n, 1);
	ca_cache_free(cc);
}
END_TEST

START_TEST(test_cache_bad_host)
{
	struct ca_cache	*cc;
	struct ca	*ca;
	int		 minted = -1;

	ck_assert_ptr_nonnull(cc = ca_cache_new(10));
	ck_assert_ptr_nonnull(ca = ca_get(state_dir, "bh"));
	ck_assert_ptr_null(ca_cache_get(cc, ca, "*.test", DAY_MS, &minted));
	ck_assert_int_eq(minted, 0);
	ck_assert_ptr_null(ca_cache_get(cc, NULL, "a.test", DAY_MS, &minted));
	ca_cache_free(cc);
}
END_TEST

/* Several workers at once: registry and cache under ASan/TSan. */
#define CONC_THREADS	4
#define CONC_ITERS	600
#define CONC_HOSTS	60
#define CONC_CAS	3

struct conc_arg {
	struct ca_cache	*cc;
	int		 t;
	int		 bad;
};

static void *
conc_worker(void *v)
{
	struct conc_arg	*a = v;
	struct ca	*ca;
	X509		*x;
	char		 id[32], host[64];
	unsigned int	 seed = (unsigned int)a->t * 7919 + 1;
	int		 i;

	for (i = 0; i < CONC_ITERS; i++) {
		if (i % 100 == 0) {	/* new CAs while others mint */
			snprintf(id, sizeof(id), "t%d-%d", a->t, i);
			if (ca_get(state_dir, id) == NULL)
				a->bad++;
		}
		snprintf(id, sizeof(id), "s%d", rand_r(&seed) % CONC_CAS);
		snprintf(host, sizeof(host), "h%d.test",
		    rand_r(&seed) % CONC_HOSTS);
		if ((ca = ca_get(state_dir, id)) == NULL) {
			a->bad++;
			continue;
		}
		x = ca_cache_get(a->cc, ca, host, DAY_MS, NULL);
		/* and what the TLS side will do with it: match the key */
		if (x == NULL || X509_check_host(x, host, 0, 0, NULL) != 1 ||
		    X509_NAME_cmp(X509_get_issuer_name(x),
		    X509_get_subject_name(ca_cert(ca))) != 0 ||
		    X509_check_private_key(x, ca_leaf_key(ca)) != 1)
			a->bad++;
		X509_free(x);
	}
	return NULL;
}

START_TEST(test_concurrency)
{
	pthread_t	 th[CONC_THREADS];
	struct conc_arg	 args[CONC_THREADS];
	struct ca_cache	*cc;
	uint64_t	 hits, misses;
	size_t		 n;
	int		 i;

	/* 128: two shards of 64 for 180 keys, so eviction runs too */
	ck_assert_ptr_nonnull(cc = ca_cache_new(128));
	for (i = 0; i < CONC_THREADS; i++) {
		args[i].cc = cc;
		args[i].t = i;
		args[i].bad = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, conc_worker,
		    &args[i]), 0);
	}
	for (i = 0; i < CONC_THREADS; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_int_eq(args[i].bad, 0);
	}
	ca_cache_stats(cc, &hits, &misses, &n);
	ck_assert_uint_eq(hits + misses, CONC_THREADS * CONC_ITERS);
	ck_assert_uint_gt(hits, 0);
	ck_assert_uint_le(n, 128);
	ca_cache_free(cc);
}
END_TEST

Suite *
suite_ca(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("ca");

	tc = tcase_create("store");
	tcase_add_checked_fixture(tc, ca_setup, ca_teardown);
	tcase_add_test(tc, test_ca_create_files);
	tcase_add_test(tc, test_ca_extensions);
	tcase_add_test(tc, test_ca_long_id);
	tcase_add_test(tc, test_ca_reload);
	tcase_add_test(tc, test_ca_key_mode_refused);
	tcase_add_test(tc, test_ca_key_mismatch_refused);
	tcase_add_test(tc, test_ca_encrypted_key_refused);
	tcase_add_test(tc, test_ca_half_written);
	tcase_add_loop_test(tc, test_ca_bad_id, 0, NELEM(bad_ids));
	tcase_add_test(tc, test_ca_drop);
	suite_add_tcase(s, tc);

	tc = tcase_create("mint");
	tcase_add_checked_fixture(tc, ca_setup, ca_teardown);
	tcase_add_test(tc, test_leaf_dns);
	tcase_add_test(tc, test_leaf_validity);
	tcase_add_loop_test(tc, test_leaf_ip, 0, NELEM(ip_cases));
	tcase_add_test(tc, test_leaf_long_host);
	tcase_add_loop_test(tc, test_leaf_bad_host, 0, NELEM(bad_hosts));
	tcase_add_test(tc, test_leaf_too_long_host);
	tcase_add_test(tc, test_leaf_serials_differ);
	tcase_add_test(tc, test_leaf_tls_handshake);
	suite_add_tcase(s, tc);

	tc = tcase_create("cache");
	tcase_add_checked_fixture(tc, ca_setup, ca_teardown);
	/* minting 1300 leaves under ASan takes a while */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_cache_hit);
	tcase_add_test(tc, test_cache_lru);
	tcase_add_test(tc, test_cache_capacity);
	tcase_add_test(tc, test_cache_disabled);
	tcase_add_test(tc, test_cache_per_ca);
	tcase_add_test(tc, test_cache_remint_near_expiry);
	tcase_add_test(tc, test_cache_bad_host);
	tcase_add_test(tc, test_concurrency);
	suite_add_tcase(s, tc);

	return s;
}
