/*
 * Per-sandbox CAs: the process-wide registry, and the files under
 * state_dir/ca/<id>/ they are loaded from or created in.
 *
 * ca.crt is the commit point. Creation writes ca.key and ca.crt under
 * temporary names, syncs them, then renames the key first and the
 * certificate last, so a directory with a ca.crt always holds its key, and
 * a ca.key without a ca.crt is the leftover of an interrupted creation and
 * is simply replaced. Deletion removes ca.crt first for the same reason.
 *
 * CAs are never freed while the process runs (ca_registry_free() at exit
 * aside): a connection may hold a dropped CA until it ends, so a dropped
 * CA moves to a second list instead.
 */
#include "config.h"

/* for ca_fast_pub(): see there */
#define OPENSSL_SUPPRESS_DEPRECATED

#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "ca/ca_internal.h"
#include "util/log.h"
#include "util/util.h"

#define CA_DIR_MODE	0700
#define CA_KEY_MODE	0600
#define CA_CRT_MODE	0644
#define CA_VALID_DAYS	3652		/* ten years */
#define CA_FILE_MAX	(64 * 1024)	/* a PEM key or cert is ~1 KiB */
#define CA_ID_MAX	255		/* NAME_MAX: it is a directory name */
#define CA_CN_MAX	64		/* RFC 5280 ub-common-name */

#define CA_KEY_FILE	"ca.key"
#define CA_CRT_FILE	"ca.crt"
#define CA_TMP_SUFFIX	".tmp"

struct ca {
	char		*ca_state_dir;	/* registry key, with ca_id */
	char		*ca_id;
	char		*ca_dir;	/* state_dir/ca/<id> */
	char		*ca_crt_path;
	char		*ca_pem;
	X509		*ca_cert;
	EVP_PKEY	*ca_key;
	EVP_PKEY	*ca_leaf_key;	/* memory only, new per load */
	EVP_PKEY	*ca_leaf_pub;	/* its public half, see ca_fast_pub() */
	uint64_t	 ca_gen;
	TAILQ_ENTRY(ca)	 ca_entry;
};

TAILQ_HEAD(ca_list, ca);

/* ca_get() runs on every worker thread: one lock covers both lists. */
static pthread_mutex_t	ca_reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* CAs being loaded or created outside the lock, by sandbox id */
static pthread_cond_t	ca_reg_cv = PTHREAD_COND_INITIALIZER;
#define CA_BUSY_MAX	64
static char		*ca_busy[CA_BUSY_MAX];
static struct ca_list	ca_live = TAILQ_HEAD_INITIALIZER(ca_live);
static struct ca_list	ca_gone = TAILQ_HEAD_INITIALIZER(ca_gone);

static char *
ca_join(const char *a, const char *b)
{
	char	*p;
	size_t	 n;

	n = strlen(a) + 1 + strlen(b) + 1;
	p = xmalloc(n);
	snprintf(p, n, "%s/%s", a, b);
	return p;
}

/*
 * The id becomes a directory name and part of the subject: no path
 * separators, nothing hidden or "..", no control characters.
 */
static int
ca_id_ok(const char *id)
{
	const unsigned char	*p;

	if (id == NULL || id[0] == '\0' || id[0] == '.' ||
	    strlen(id) > CA_ID_MAX)
		return 0;
	for (p = (const unsigned char *)id; *p != '\0'; p++)
		if (*p == '/' || *p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

static int
ca_mkdir(const char *path)
{
	struct stat	st;

	if (mkdir(path, CA_DIR_MODE) == 0)
		return 0;
	if (errno != EEXIST) {
		log_warn("mkdir %s", path);
		return -1;
	}
	if (stat(path, &st) == -1) {
		log_warn("stat %s", path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		log_warnx("%s: not a directory", path);
		return -1;
	}
	return 0;
}

/*
 * Read a whole PEM file into a NUL-terminated buffer the caller frees
 * (cleansed first when it held a key). With <secret>, a file readable by
 * group or others is refused: the key may already have leaked, and silently
 * tightening it would hide that from the operator.
 */
static char *
ca_read_file(const char *path, int secret, size_t *lenp)
{
	struct stat	 st;
	char		*buf;
	size_t		 len = 0;
	ssize_t		 n;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		log_warn("open %s", path);
		return NULL;
	}
	if (fstat(fd, &st) == -1) {
		log_warn("fstat %s", path);
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > CA_FILE_MAX) {
		log_warnx("%s: not a regular file of at most %d bytes", path,
		    CA_FILE_MAX);
		close(fd);
		return NULL;
	}
	if (secret && !util_file_private(&st)) {
		log_warnx("%s: readable by group or others (mode %04o), "
		    "refused; chmod 600 it or delete the sandbox's CA", path,
		    (unsigned)(st.st_mode & 07777));
		close(fd);
		return NULL;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (len < (size_t)st.st_size) {
		n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (len != (size_t)st.st_size) {
		log_warnx("%s: short read", path);
		OPENSSL_cleanse(buf, (size_t)st.st_size + 1);
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	*lenp = len;
	return buf;
}

/*
 * Write <data> to <dir>/<name>.tmp with <mode> and sync it; the caller
 * renames it into place. O_EXCL so the key file never exists, even for an
 * instant, with wider permissions than asked (a stale .tmp from a crash is
 * removed first; the directory is ours and 0700).
 */
static int
ca_write_tmp(const char *dir, const char *name, const void *data, size_t len,
    mode_t mode)
{
	char		*path, *tmp;
	const char	*p = data;
	ssize_t		 n;
	int		 fd, rv = -1;

	path = ca_join(dir, name);
	tmp = xmalloc(strlen(path) + sizeof(CA_TMP_SUFFIX));
	snprintf(tmp, strlen(path) + sizeof(CA_TMP_SUFFIX), "%s%s", path,
	    CA_TMP_SUFFIX);
	if (unlink(tmp) == -1 && errno != ENOENT) {
		log_warn("unlink %s", tmp);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	    mode);
	if (fd == -1) {
		log_warn("open %s", tmp);
		goto out;
	}
	/* the umask may have narrowed ca.crt, which clients must read */
	if (fchmod(fd, mode) == -1) {
		log_warn("fchmod %s", tmp);
		goto fail;
	}
	while (len > 0) {
		n = write(fd, p, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			log_warn("write %s", tmp);
			goto fail;
		}
		p += n;
		len -= (size_t)n;
	}
	if (fsync(fd) == -1) {
		log_warn("fsync %s", tmp);
		goto fail;
	}
	rv = 0;
 fail:
	close(fd);
	if (rv == -1)
		unlink(tmp);
 out:
	free(tmp);
	free(path);
	return rv;
}

static int
ca_commit(const char *dir, const char *name)
{
	char	*path, *tmp;
	int	 rv = 0;

	path = ca_join(dir, name);
	tmp = xmalloc(strlen(path) + sizeof(CA_TMP_SUFFIX));
	snprintf(tmp, strlen(path) + sizeof(CA_TMP_SUFFIX), "%s%s", path,
	    CA_TMP_SUFFIX);
	if (rename(tmp, path) == -1) {
		log_warn("rename %s", tmp);
		unlink(tmp);
		rv = -1;
	}
	free(tmp);
	free(path);
	return rv;
}

/* Make a rename durable: sync the directory that holds it. */
static void
ca_sync_dir(const char *dir)
{
	int	fd;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return;
	if (fsync(fd) == -1)
		log_warn("fsync %s", dir);
	close(fd);
}

static EVP_PKEY *
ca_keygen(void)
{
	EVP_PKEY	*k;

	if ((k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) == NULL)
		log_tls("P-256 key generation");
	return k;
}

/*
 * The public half of the leaf key, for X509_set_pubkey(). OpenSSL 3.0
 * encodes a provider key through its generic encoder framework, about
 * 200 us a time and four fifths of a mint; a legacy EC_KEY holding the same
 * point takes the old direct encoder (about 5 us). That needs deprecated
 * API, hence OPENSSL_SUPPRESS_DEPRECATED above and the fallback: without
 * it minting is only slower. New reference, or NULL after logging.
 */
static EVP_PKEY *
ca_fast_pub(EVP_PKEY *k)
{
#ifndef OPENSSL_NO_DEPRECATED_3_0
	unsigned char		 pt[1 + 2 * 66];	/* fits up to P-521 */
	const unsigned char	*p = pt;
	size_t			 len;
	EC_KEY			*ec;
	EVP_PKEY		*pub;

	if (EVP_PKEY_get_octet_string_param(k,
	    OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, pt, sizeof(pt), &len) != 1 ||
	    (ec = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1)) == NULL) {
		ERR_clear_error();
		goto plain;
	}
	if (o2i_ECPublicKey(&ec, &p, (long)len) == NULL ||
	    (pub = EVP_PKEY_new()) == NULL) {
		EC_KEY_free(ec);
		ERR_clear_error();
		goto plain;
	}
	if (EVP_PKEY_assign_EC_KEY(pub, ec) != 1) {
		EC_KEY_free(ec);
		EVP_PKEY_free(pub);
		ERR_clear_error();
		goto plain;
	}
	return pub;
 plain:
#endif
	if (EVP_PKEY_up_ref(k) != 1) {
		log_tls("EVP_PKEY_up_ref");
		return NULL;
	}
	return k;
}

/*
 * The subject names the sandbox. CN is capped at 64 characters, so a long
 * id moves to a CN of its own with the "airlock sandbox CA" label in OU.
 */
static X509_NAME *
ca_subject(const char *id)
{
	X509_NAME	*n;
	char		 cn[CA_CN_MAX + 1];
	const char	*ou = NULL;
	int		 len;

	len = snprintf(cn, sizeof(cn), "airlock sandbox %s CA", id);
	if (len < 0 || (size_t)len >= sizeof(cn)) {
		snprintf(cn, sizeof(cn), "%s", id);
		ou = "airlock sandbox CA";
	}
	if ((n = X509_NAME_new()) == NULL)
		return NULL;
	if (X509_NAME_add_entry_by_txt(n, "O", MBSTRING_UTF8,
	    (const unsigned char *)"airlock", -1, -1, 0) != 1 ||
	    (ou != NULL && X509_NAME_add_entry_by_txt(n, "OU", MBSTRING_UTF8,
	    (const unsigned char *)ou, -1, -1, 0) != 1) ||
	    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8,
	    (const unsigned char *)cn, -1, -1, 0) != 1) {
		X509_NAME_free(n);
		return NULL;
	}
	return n;
}

/* A new self-signed CA certificate for <key>. New reference or NULL. */
static X509 *
ca_make_cert(const char *id, EVP_PKEY *key)
{
	X509		*x;
	X509_NAME	*name = NULL;

	if ((x = X509_new()) == NULL)
		goto fail;
	if (X509_set_version(x, 2) != 1)
		goto fail;
	if ((name = ca_subject(id)) == NULL ||
	    X509_set_subject_name(x, name) != 1 ||
	    X509_set_issuer_name(x, name) != 1)
		goto fail;
	if (ca_fleet_on()) {
		/* the same serial and dates on every gateway */
		if (ca_fleet_cert_fields(x, id, CA_VALID_DAYS) == -1)
			goto fail;
	} else if (ca_x509_serial(x) == -1 ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -CA_BACKDATE_S) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), CA_VALID_DAYS, 0,
	    NULL) == NULL)
		goto fail;
	if (X509_set_pubkey(x, key) != 1)
		goto fail;
	/* SKI before AKI: AKI copies the issuer's (here our own) SKI */
	if (ca_x509_ext(x, x, NID_basic_constraints,
	    "critical,CA:TRUE,pathlen:0") == -1 ||
	    ca_x509_ext(x, x, NID_key_usage,
	    "critical,keyCertSign,cRLSign") == -1 ||
	    ca_x509_ext(x, x, NID_subject_key_identifier, "hash") == -1 ||
	    ca_x509_ext(x, x, NID_authority_key_identifier,
	    "keyid:always") == -1)
		goto fail;
	if (X509_sign(x, key, EVP_sha256()) <= 0)
		goto fail;
	X509_NAME_free(name);
	return x;
 fail:
	log_tls("sandbox %s: building the CA certificate", id);
	X509_NAME_free(name);
	X509_free(x);
	return NULL;
}

/* Create a new CA in ca->ca_dir, replacing any half-written one. */
static int
ca_create(struct ca *ca)
{
	BIO	*kb = NULL, *cb = NULL;
	char	*kdata, *cdata;
	long	 klen, clen;
	int	 rv = -1;

	ca->ca_key = ca_fleet_on() ? ca_fleet_key(ca->ca_id) : ca_keygen();
	if (ca->ca_key == NULL)
		return -1;
	if ((ca->ca_cert = ca_make_cert(ca->ca_id, ca->ca_key)) == NULL)
		return -1;
	/* secmem: the PEM of the key is wiped when the BIO is freed */
	if ((kb = BIO_new(BIO_s_secmem())) == NULL ||
	    (cb = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_PrivateKey(kb, ca->ca_key, NULL, NULL, 0, NULL,
	    NULL) != 1 ||
	    PEM_write_bio_X509(cb, ca->ca_cert) != 1) {
		log_tls("sandbox %s: encoding the CA", ca->ca_id);
		goto out;
	}
	klen = BIO_get_mem_data(kb, &kdata);
	clen = BIO_get_mem_data(cb, &cdata);
	if (klen <= 0 || clen <= 0)
		goto out;
	if (ca_write_tmp(ca->ca_dir, CA_KEY_FILE, kdata, (size_t)klen,
	    CA_KEY_MODE) == -1 ||
	    ca_write_tmp(ca->ca_dir, CA_CRT_FILE, cdata, (size_t)clen,
	    CA_CRT_MODE) == -1)
		goto out;
	if (ca_commit(ca->ca_dir, CA_KEY_FILE) == -1 ||
	    ca_commit(ca->ca_dir, CA_CRT_FILE) == -1)
		goto out;
	ca_sync_dir(ca->ca_dir);
	log_info("sandbox %s: created CA %s", ca->ca_id, ca->ca_crt_path);
	rv = 0;
 out:
	BIO_free(kb);
	BIO_free(cb);
	return rv;
}

/*
 * Passphrase callback for PEM_read_bio_PrivateKey(): there is none. Without
 * it OpenSSL would prompt on the terminal for an encrypted key, and a
 * daemon's worker would hang there.
 */
static int
ca_no_passphrase(char *buf, int size, int rwflag, void *arg)
{
	return -1;
}

static int
ca_load(struct ca *ca)
{
	BIO	*b;
	char	*kpath, *buf;
	size_t	 len;

	kpath = ca_join(ca->ca_dir, CA_KEY_FILE);
	buf = ca_read_file(kpath, 1, &len);
	if (buf == NULL) {
		free(kpath);
		return -1;
	}
	if ((b = BIO_new_mem_buf(buf, (int)len)) != NULL) {
		ca->ca_key = PEM_read_bio_PrivateKey(b, NULL,
		    ca_no_passphrase, NULL);
		BIO_free(b);
	}
	OPENSSL_cleanse(buf, len);
	free(buf);
	if (ca->ca_key == NULL) {
		log_tls("%s: not an unencrypted PEM private key", kpath);
		free(kpath);
		return -1;
	}
	free(kpath);

	if ((buf = ca_read_file(ca->ca_crt_path, 0, &len)) == NULL)
		return -1;
	if ((b = BIO_new_mem_buf(buf, (int)len)) != NULL) {
		ca->ca_cert = PEM_read_bio_X509(b, NULL, NULL, NULL);
		BIO_free(b);
	}
	free(buf);
	if (ca->ca_cert == NULL) {
		log_tls("%s: not a PEM certificate", ca->ca_crt_path);
		return -1;
	}
	if (X509_check_private_key(ca->ca_cert, ca->ca_key) != 1) {
		log_tls("%s: does not match its ca.key", ca->ca_crt_path);
		return -1;
	}
	if (X509_check_ca(ca->ca_cert) != 1) {
		log_warnx("%s: not a CA certificate", ca->ca_crt_path);
		return -1;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(ca->ca_cert)) <= 0)
		log_warnx("%s: has expired; delete the sandbox's CA to make "
		    "a new one", ca->ca_crt_path);
	return 0;
}

static void
ca_free(struct ca *ca)
{
	if (ca == NULL)
		return;
	X509_free(ca->ca_cert);
	EVP_PKEY_free(ca->ca_key);
	EVP_PKEY_free(ca->ca_leaf_key);
	EVP_PKEY_free(ca->ca_leaf_pub);
	free(ca->ca_pem);
	free(ca->ca_crt_path);
	free(ca->ca_dir);
	free(ca->ca_id);
	free(ca->ca_state_dir);
	free(ca);
}

/*
 * Generation tags key the leaf caches: unique among the CAs this process
 * holds, so a dropped CA's leaves can never be served for its successor.
 * Called with ca_reg_lock held.
 */
static uint64_t
ca_new_generation(void)
{
	struct ca	*c;
	uint64_t	 g;
	int		 used;

	for (;;) {
		if (RAND_bytes((unsigned char *)&g, sizeof(g)) != 1)
			fatalx("RAND_bytes failed");
		if (g == 0)
			continue;
		used = 0;
		TAILQ_FOREACH(c, &ca_live, ca_entry)
			used |= c->ca_gen == g;
		TAILQ_FOREACH(c, &ca_gone, ca_entry)
			used |= c->ca_gen == g;
		if (!used)
			return g;
	}
}

/* Is <id> being loaded or created? Called with ca_reg_lock held. */
static int
ca_busy_find(const char *id)
{
	int	i;

	for (i = 0; i < CA_BUSY_MAX; i++)
		if (ca_busy[i] != NULL && strcmp(ca_busy[i], id) == 0)
			return i;
	return -1;
}

static int
ca_busy_add(const char *id)
{
	int	i;

	for (i = 0; i < CA_BUSY_MAX; i++)
		if (ca_busy[i] == NULL) {
			ca_busy[i] = xstrdup(id);
			return i;
		}
	return -1;
}

/* Load or create, without ca_reg_lock (ca_get keeps others off the id).
 * New CA (generation not set yet) or NULL. */
static struct ca *
ca_open(const char *state_dir, const char *id)
{
	struct ca	*ca;
	struct stat	 st;
	char		*cadir;
	BIO		*b;
	char		*pem;
	long		 len;

	ca = xcalloc(1, sizeof(*ca));
	ca->ca_state_dir = xstrdup(state_dir);
	ca->ca_id = xstrdup(id);
	cadir = ca_join(state_dir, "ca");
	ca->ca_dir = ca_join(cadir, id);
	ca->ca_crt_path = ca_join(ca->ca_dir, CA_CRT_FILE);
	if (ca_mkdir(state_dir) == -1 || ca_mkdir(cadir) == -1 ||
	    ca_mkdir(ca->ca_dir) == -1) {
		free(cadir);
		goto fail;
	}
	free(cadir);

	if (stat(ca->ca_crt_path, &st) == 0) {
		if (ca_load(ca) == -1)
			goto fail;
	} else if (errno == ENOENT) {
		if (ca_create(ca) == -1)
			goto fail;
	} else {
		log_warn("stat %s", ca->ca_crt_path);
		goto fail;
	}

	if ((ca->ca_leaf_key = ca_keygen()) == NULL ||
	    (ca->ca_leaf_pub = ca_fast_pub(ca->ca_leaf_key)) == NULL)
		goto fail;
	if ((b = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_X509(b, ca->ca_cert) != 1 ||
	    (len = BIO_get_mem_data(b, &pem)) <= 0) {
		log_tls("sandbox %s: encoding the CA certificate", id);
		BIO_free(b);
		goto fail;
	}
	ca->ca_pem = xstrndup(pem, (size_t)len);
	BIO_free(b);
	/*
	 * OpenSSL decodes a certificate's extensions on first use; do it here,
	 * on one thread, rather than in the first concurrent mints.
	 */
	X509_check_purpose(ca->ca_cert, -1, 0);
	return ca;
 fail:
	log_warnx("sandbox %s: no CA", id);
	ca_free(ca);
	return NULL;
}

static struct ca *
ca_find(const char *state_dir, const char *id)
{
	struct ca	*ca;

	TAILQ_FOREACH(ca, &ca_live, ca_entry)
		if (strcmp(ca->ca_id, id) == 0 &&
		    strcmp(ca->ca_state_dir, state_dir) == 0)
			return ca;
	return NULL;
}

struct ca *
ca_get(const char *state_dir, const char *sandbox_id)
{
	struct ca	*ca;
	int		 slot;

	if (state_dir == NULL || !ca_id_ok(sandbox_id)) {
		/* not echoed: it may hold the control characters refused */
		log_warnx("refusing CA for a sandbox id that is empty, "
		    "hidden, or holds '/' or control characters");
		return NULL;
	}
	/*
	 * Loading or creating a CA (keys, files, fsync) takes milliseconds:
	 * it runs outside the registry lock so that interceptions of other
	 * sandboxes never wait behind it; a second caller for the same id
	 * waits for the first instead of writing the same directory.
	 */
	pthread_mutex_lock(&ca_reg_lock);
	for (;;) {
		if ((ca = ca_find(state_dir, sandbox_id)) != NULL ||
		    ca_busy_find(sandbox_id) == -1)
			break;
		pthread_cond_wait(&ca_reg_cv, &ca_reg_lock);
	}
	if (ca != NULL) {
		pthread_mutex_unlock(&ca_reg_lock);
		return ca;
	}
	while ((slot = ca_busy_add(sandbox_id)) == -1)
		pthread_cond_wait(&ca_reg_cv, &ca_reg_lock);
	pthread_mutex_unlock(&ca_reg_lock);

	ca = ca_open(state_dir, sandbox_id);

	pthread_mutex_lock(&ca_reg_lock);
	if (ca != NULL) {
		ca->ca_gen = ca_new_generation();
		TAILQ_INSERT_TAIL(&ca_live, ca, ca_entry);
	}
	free(ca_busy[slot]);
	ca_busy[slot] = NULL;
	pthread_cond_broadcast(&ca_reg_cv);
	pthread_mutex_unlock(&ca_reg_lock);
	return ca;
}

/*
 * Remove the files of state_dir/ca/<id> and the directory. The certificate
 * goes first, so a crash half-way leaves nothing that would load. Returns
 * 1 when there was no directory, 0 when it is gone now, or -1.
 */
static int
ca_remove_dir(const char *dir)
{
	DIR		*d;
	struct dirent	*de;
	int		 dfd, rv = 0;

	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return 1;
		log_warn("open %s", dir);
		return -1;
	}
	if (unlinkat(dfd, CA_CRT_FILE, 0) == -1 && errno != ENOENT) {
		log_warn("unlink %s/%s", dir, CA_CRT_FILE);
		close(dfd);
		return -1;
	}
	if ((d = fdopendir(dfd)) == NULL) {
		log_warn("fdopendir %s", dir);
		close(dfd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == -1) {
			log_warn("unlink %s/%s", dir, de->d_name);
			rv = -1;
		}
	}
	closedir(d);
	if (rv == 0 && rmdir(dir) == -1) {
		log_warn("rmdir %s", dir);
		rv = -1;
	}
	return rv;
}

int
ca_registry_drop(const char *state_dir, const char *sandbox_id)
{
	struct ca	*ca;
	char		*cadir, *dir;
	int		 rv;

	if (state_dir == NULL || !ca_id_ok(sandbox_id)) {
		log_warnx("refusing to delete the CA of an invalid sandbox "
		    "id");
		return -1;
	}
	cadir = ca_join(state_dir, "ca");
	dir = ca_join(cadir, sandbox_id);
	/* under the lock: a concurrent ca_get() must not load it half-gone,
	   nor be creating it right now */
	pthread_mutex_lock(&ca_reg_lock);
	while (ca_busy_find(sandbox_id) != -1)
		pthread_cond_wait(&ca_reg_cv, &ca_reg_lock);
	if ((ca = ca_find(state_dir, sandbox_id)) != NULL) {
		TAILQ_REMOVE(&ca_live, ca, ca_entry);
		TAILQ_INSERT_TAIL(&ca_gone, ca, ca_entry);
	}
	rv = ca_remove_dir(dir);
	pthread_mutex_unlock(&ca_reg_lock);
	if (rv == 0)
		log_info("sandbox %s: CA deleted", sandbox_id);
	free(dir);
	free(cadir);
	return rv == -1 ? -1 : 0;
}

void
ca_registry_free(void)
{
	struct ca	*ca;

	pthread_mutex_lock(&ca_reg_lock);
	while ((ca = TAILQ_FIRST(&ca_live)) != NULL) {
		TAILQ_REMOVE(&ca_live, ca, ca_entry);
		ca_free(ca);
	}
	while ((ca = TAILQ_FIRST(&ca_gone)) != NULL) {
		TAILQ_REMOVE(&ca_gone, ca, ca_entry);
		ca_free(ca);
	}
	pthread_mutex_unlock(&ca_reg_lock);
}

X509 *
ca_cert(const struct ca *ca)
{
	return ca->ca_cert;
}

EVP_PKEY *
ca_leaf_key(const struct ca *ca)
{
	return ca->ca_leaf_key;
}

EVP_PKEY *
ca_leaf_pub(const struct ca *ca)
{
	return ca->ca_leaf_pub;
}

EVP_PKEY *
ca_sign_key(const struct ca *ca)
{
	return ca->ca_key;
}

const char *
ca_cert_path(const struct ca *ca)
{
	return ca->ca_crt_path;
}

const char *
ca_sandbox_id(const struct ca *ca)
{
	return ca->ca_id;
}

uint64_t
ca_generation(const struct ca *ca)
{
	return ca->ca_gen;
}

const char *
ca_cert_pem(const struct ca *ca)
{
	return ca->ca_pem;
}
