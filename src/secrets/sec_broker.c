/*
 * One mint of a token broker secret (sec_broker.h): the grant request
 * built in locked memory, the RS256 JWT for Google service accounts and
 * GitHub Apps, the answer's token and lifetime read with yajl's callback
 * parser straight into locked memory. Reasons name the endpoint, the
 * HTTP status and the OAuth "error" code, never a value.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <yajl/yajl_parse.h>

#include "cfg/cfg.h"
#include "secrets/sec.h"
#include "secrets/sec_broker.h"
#include "util/util.h"

#define BK_GITHUB_API	"https://api.github.com"
#define BK_GOOGLE_TOKEN	"https://oauth2.googleapis.com/token"
#define BK_DEFAULT_LIFE	3600	/* seconds, when the answer gives none */
#define BK_JWT_LIFE	600	/* GitHub's maximum for an app JWT */

/* ---- locked strings -------------------------------------------------- */

/* A growable string in locked memory (sec_val pages). */
struct lstr {
	struct sec_val	*l_v;
	size_t		 l_cap;
	int		 l_oom;
};

static void
lstr_add(struct lstr *l, const char *p, size_t n)
{
	struct sec_val	*nv;
	size_t		 cap;

	if (l->l_oom)
		return;
	if (l->l_v == NULL || l->l_v->sv_len + n > l->l_cap) {
		cap = (l->l_cap == 0 ? 1024 : l->l_cap * 2);
		while (cap < (l->l_v != NULL ? l->l_v->sv_len : 0) + n)
			cap *= 2;
		if ((nv = sec_val_new(cap)) == NULL) {
			l->l_oom = 1;
			return;
		}
		if (l->l_v != NULL) {
			memcpy(nv->sv_data, l->l_v->sv_data, l->l_v->sv_len);
			nv->sv_len = l->l_v->sv_len;
			sec_val_unref(l->l_v);
		}
		l->l_v = nv;
		l->l_cap = cap;
	}
	memcpy(l->l_v->sv_data + l->l_v->sv_len, p, n);
	l->l_v->sv_len += n;
	l->l_v->sv_data[l->l_v->sv_len] = '\0';
}

static void
lstr_cat(struct lstr *l, const char *s)
{
	lstr_add(l, s, strlen(s));
}

/* application/x-www-form-urlencoded, RFC 3986 unreserved kept. */
static void
lstr_form(struct lstr *l, const char *p, size_t n)
{
	static const char	hex[] = "0123456789ABCDEF";
	char			e[3];
	size_t			i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~') {
			lstr_add(l, p + i, 1);
			continue;
		}
		e[0] = '%';
		e[1] = hex[c >> 4];
		e[2] = hex[c & 15];
		lstr_add(l, e, 3);
	}
}

static void
lstr_param(struct lstr *l, const char *name, const char *v, size_t n)
{
	if (l->l_v != NULL && l->l_v->sv_len > 0)
		lstr_cat(l, "&");
	lstr_cat(l, name);
	lstr_cat(l, "=");
	lstr_form(l, v, n);
}

/* base64url without padding. */
static void
lstr_b64url(struct lstr *l, const unsigned char *p, size_t n)
{
	unsigned char	buf[4 * 96 + 1];
	size_t		i, chunk, k;
	int		m;

	for (i = 0; i < n; i += chunk) {
		chunk = n - i > 288 ? 288 : n - i;	/* multiple of 3 */
		m = EVP_EncodeBlock(buf, p + i, (int)chunk);
		for (k = 0; k < (size_t)m; k++) {
			if (buf[k] == '+')
				buf[k] = '-';
			else if (buf[k] == '/')
				buf[k] = '_';
		}
		while (m > 0 && buf[m - 1] == '=')
			m--;
		lstr_add(l, (char *)buf, (size_t)m);
		OPENSSL_cleanse(buf, sizeof(buf));
	}
}

/* ---- JSON fields ----------------------------------------------------- */

/* A top-level field of a JSON object, copied into locked memory. */
struct jfield {
	const char	*jf_name;
	struct sec_val	*jf_str;	/* a string value, or NULL */
	long long	 jf_num;	/* a number value */
	int		 jf_isnum;
};

struct jctx {
	struct jfield	*jc_f;
	size_t		 jc_n;
	int		 jc_depth;
	struct jfield	*jc_cur;	/* the key just seen, top level */
	int		 jc_oom;
};

static int
j_key(void *arg, const unsigned char *k, size_t len)
{
	struct jctx	*jc = arg;
	size_t		 i;

	jc->jc_cur = NULL;
	if (jc->jc_depth != 1)
		return 1;
	for (i = 0; i < jc->jc_n; i++)
		if (strlen(jc->jc_f[i].jf_name) == len &&
		    memcmp(jc->jc_f[i].jf_name, k, len) == 0)
			jc->jc_cur = &jc->jc_f[i];
	return 1;
}

static int
j_string(void *arg, const unsigned char *s, size_t len)
{
	struct jctx	*jc = arg;
	struct jfield	*f = jc->jc_cur;

	jc->jc_cur = NULL;
	if (f == NULL || jc->jc_depth != 1 || len > 64 * 1024)
		return 1;
	sec_val_unref(f->jf_str);
	if ((f->jf_str = sec_val_new(len)) == NULL) {
		jc->jc_oom = 1;
		return 0;
	}
	memcpy(f->jf_str->sv_data, s, len);
	f->jf_str->sv_data[len] = '\0';
	f->jf_str->sv_len = len;
	return 1;
}

static int
j_number(void *arg, const char *s, size_t len)
{
	struct jctx	*jc = arg;
	char		 buf[32];

	if (jc->jc_cur != NULL && jc->jc_depth == 1 && len < sizeof(buf)) {
		memcpy(buf, s, len);
		buf[len] = '\0';
		jc->jc_cur->jf_num = strtoll(buf, NULL, 10);
		jc->jc_cur->jf_isnum = 1;
	}
	jc->jc_cur = NULL;
	return 1;
}

static int
j_other(void *arg)
{
	((struct jctx *)arg)->jc_cur = NULL;
	return 1;
}

static int
j_bool(void *arg, int b)
{
	(void)b;
	return j_other(arg);
}

static int
j_open(void *arg)
{
	struct jctx	*jc = arg;

	jc->jc_cur = NULL;
	jc->jc_depth++;
	return jc->jc_depth < 64;
}

static int
j_close(void *arg)
{
	((struct jctx *)arg)->jc_depth--;
	return 1;
}

static const yajl_callbacks j_cb = {
	j_other, j_bool, NULL, NULL, j_number, j_string,
	j_open, j_key, j_close, j_open, j_close,
};

static void
jfields_fini(struct jfield *f, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		sec_val_unref(f[i].jf_str);
		f[i].jf_str = NULL;
	}
}

/* Fill <f> from the JSON object <doc>; -1 if it is not one. */
static int
jfields(const char *doc, size_t len, struct jfield *f, size_t n)
{
	struct jctx	 jc;
	yajl_handle	 h;
	int		 ok;

	memset(&jc, 0, sizeof(jc));
	jc.jc_f = f;
	jc.jc_n = n;
	if ((h = yajl_alloc(&j_cb, NULL, &jc)) == NULL)
		return -1;
	ok = yajl_parse(h, (const unsigned char *)doc, len) == yajl_status_ok &&
	    yajl_complete_parse(h) == yajl_status_ok && !jc.jc_oom;
	yajl_free(h);
	if (!ok)
		jfields_fini(f, n);
	return ok ? 0 : -1;
}

/* ---- JWT ------------------------------------------------------------- */

/* JSON-escaped into <l> (claims are config text: no secret). */
static void
lstr_json(struct lstr *l, const char *s)
{
	char	e[8];

	lstr_cat(l, "\"");
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) {
			snprintf(e, sizeof(e), "\\u%04x", (unsigned char)*s);
			lstr_cat(l, e);
		} else
			lstr_add(l, s, 1);
	}
	lstr_cat(l, "\"");
}

/* <claims> signed RS256 with PEM key <key>: a new locked JWT or NULL. */
static struct sec_val *
jwt_rs256(const char *claims, const char *key, size_t keylen, char *why,
    size_t whysz)
{
	static const char	 hdr[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	struct lstr		 l = { NULL, 0, 0 };
	EVP_PKEY		*pk = NULL;
	EVP_MD_CTX		*md = NULL;
	BIO			*bio;
	unsigned char		 sig[1024];
	size_t			 siglen = sizeof(sig);

	if ((bio = BIO_new_mem_buf(key, (int)keylen)) == NULL)
		goto oom;
	pk = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	BIO_free(bio);
	if (pk == NULL || !EVP_PKEY_is_a(pk, "RSA")) {
		snprintf(why, whysz, "the private key is not a PEM RSA key");
		goto fail;
	}
	lstr_b64url(&l, (const unsigned char *)hdr, sizeof(hdr) - 1);
	lstr_cat(&l, ".");
	lstr_b64url(&l, (const unsigned char *)claims, strlen(claims));
	if (l.l_oom || (md = EVP_MD_CTX_new()) == NULL)
		goto oom;
	if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pk) != 1 ||
	    EVP_DigestSign(md, sig, &siglen, (unsigned char *)l.l_v->sv_data,
	    l.l_v->sv_len) != 1) {
		snprintf(why, whysz, "signing the JWT failed");
		goto fail;
	}
	lstr_cat(&l, ".");
	lstr_b64url(&l, sig, siglen);
	if (l.l_oom)
		goto oom;
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(pk);
	return l.l_v;
oom:
	snprintf(why, whysz, "out of memory");
fail:
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(pk);
	sec_val_unref(l.l_v);
	return NULL;
}

/* ---- the grants ------------------------------------------------------ */

/* Reads the answer: token, lifetime, a rotated refresh token. */
static int
read_token(const struct sec_http_resp *hr, int github, const char *url,
    struct sec_mint *out, char *why, size_t whysz)
{
	struct jfield	 f[] = {
		{ "access_token", NULL, 0, 0 }, { "token", NULL, 0, 0 },
		{ "expires_in", NULL, 0, 0 }, { "expires_at", NULL, 0, 0 },
		{ "refresh_token", NULL, 0, 0 }, { "error", NULL, 0, 0 },
	};
	const size_t	 nf = sizeof(f) / sizeof(f[0]);
	struct sec_val	*tok;
	struct tm	 tm;
	const char	*e;
	char		 code[64];
	size_t		 i;
	time_t		 now = time(NULL), exp;

	if (jfields(hr->hr_body->sv_data, hr->hr_body->sv_len, f, nf) == -1) {
		snprintf(why, whysz, "%s answered HTTP %d without a JSON "
		    "object", url, hr->hr_status);
		return -1;
	}
	if (hr->hr_status < 200 || hr->hr_status > 299) {
		code[0] = '\0';
		/* the OAuth error code only (RFC 6749 5.2): a short word */
		if ((e = f[5].jf_str != NULL ? f[5].jf_str->sv_data : NULL) !=
		    NULL && strlen(e) < 48 && strspn(e, "abcdefghijklmnopqrs"
		    "tuvwxyz_") == strlen(e))
			snprintf(code, sizeof(code), " (%s)", e);
		snprintf(why, whysz, "%s answered HTTP %d%s", url,
		    hr->hr_status, code);
		jfields_fini(f, nf);
		return -1;
	}
	tok = github ? f[1].jf_str : f[0].jf_str;
	if (tok == NULL || tok->sv_len == 0 || tok->sv_len > 16384) {
		snprintf(why, whysz, "%s answered without %s", url, github ?
		    "a token" : "an access_token");
		jfields_fini(f, nf);
		return -1;
	}
	for (i = 0; i < tok->sv_len; i++)
		if ((unsigned char)tok->sv_data[i] <= 0x20 ||
		    (unsigned char)tok->sv_data[i] >= 0x7f) {
			snprintf(why, whysz, "%s answered a token with "
			    "spaces or control characters", url);
			jfields_fini(f, nf);
			return -1;
		}
	exp = now + BK_DEFAULT_LIFE;
	if (f[2].jf_isnum && f[2].jf_num > 0 && f[2].jf_num < 366LL * 86400)
		exp = now + (time_t)f[2].jf_num;
	else if (f[3].jf_str != NULL) {
		memset(&tm, 0, sizeof(tm));
		e = strptime(f[3].jf_str->sv_data, "%Y-%m-%dT%H:%M:%S", &tm);
		if (e != NULL && (exp = timegm(&tm)) == (time_t)-1)
			exp = now + BK_DEFAULT_LIFE;
	}
	if (exp <= now) {
		snprintf(why, whysz, "%s answered a token that has expired",
		    url);
		jfields_fini(f, nf);
		return -1;
	}
	out->sm_token = sec_val_ref(tok);
	out->sm_expires = (uint64_t)exp;
	if (f[4].jf_str != NULL && f[4].jf_str->sv_len > 0)
		out->sm_cred = sec_val_ref(f[4].jf_str);
	jfields_fini(f, nf);
	return 0;
}

static int
post(const struct cfg *cfg, const char *url, const char *fields,
    const struct lstr *body, int github, int stopfd, struct sec_mint *out,
    char *why, size_t whysz)
{
	struct sec_http_resp	hr;
	int			rc;

	if (body->l_oom) {
		snprintf(why, whysz, "out of memory");
		return -1;
	}
	if (sec_http_post(cfg, url, fields, body->l_v != NULL ?
	    body->l_v->sv_data : "", body->l_v != NULL ? body->l_v->sv_len :
	    0, stopfd, &hr, why, whysz) == -1)
		return -1;
	rc = read_token(&hr, github, url, out, why, whysz);
	sec_val_unref(hr.hr_body);
	return rc;
}

static int
mint_oauth2(const struct cfg *cfg, const struct cfg_broker *b,
    const struct sec_val *cred, const struct sec_val *cred2, int stopfd,
    struct sec_mint *out, char *why, size_t whysz)
{
	struct lstr	l = { NULL, 0, 0 };
	int		rc;

	if (b->b_kind == CFG_BROKER_CLIENT_CREDENTIALS) {
		lstr_param(&l, "grant_type", "client_credentials", 18);
		lstr_param(&l, "client_id", b->b_client_id,
		    strlen(b->b_client_id));
		lstr_param(&l, "client_secret", cred->sv_data, cred->sv_len);
	} else {
		lstr_param(&l, "grant_type", "refresh_token", 13);
		lstr_param(&l, "refresh_token", cred->sv_data, cred->sv_len);
		lstr_param(&l, "client_id", b->b_client_id,
		    strlen(b->b_client_id));
		if (cred2 != NULL)
			lstr_param(&l, "client_secret", cred2->sv_data,
			    cred2->sv_len);
	}
	if (b->b_scope != NULL)
		lstr_param(&l, "scope", b->b_scope, strlen(b->b_scope));
	rc = post(cfg, b->b_token_url, "Content-Type: application/"
	    "x-www-form-urlencoded\r\nAccept: application/json\r\n", &l, 0,
	    stopfd, out, why, whysz);
	sec_val_unref(l.l_v);
	return rc;
}

static int
mint_google(const struct cfg *cfg, const struct cfg_broker *b,
    const struct sec_val *keyfile, int stopfd, struct sec_mint *out,
    char *why, size_t whysz)
{
	struct jfield	 f[] = {
		{ "client_email", NULL, 0, 0 }, { "private_key", NULL, 0, 0 },
		{ "token_uri", NULL, 0, 0 },
	};
	struct lstr	 c = { NULL, 0, 0 }, l = { NULL, 0, 0 };
	struct sec_val	*jwt = NULL;
	const char	*url;
	char		 num[64];
	time_t		 now = time(NULL);
	int		 rc = -1;

	if (jfields(keyfile->sv_data, keyfile->sv_len, f, 3) == -1 ||
	    f[0].jf_str == NULL || f[1].jf_str == NULL) {
		snprintf(why, whysz, "key_file is not a service-account JSON "
		    "key (client_email, private_key)");
		goto out;
	}
	url = b->b_token_url;
	if (url == NULL)
		url = f[2].jf_str != NULL && strncmp(f[2].jf_str->sv_data,
		    "https://", 8) == 0 ? f[2].jf_str->sv_data :
		    BK_GOOGLE_TOKEN;
	lstr_cat(&c, "{\"iss\":");
	lstr_json(&c, f[0].jf_str->sv_data);
	lstr_cat(&c, ",\"scope\":");
	lstr_json(&c, b->b_scope != NULL ? b->b_scope : "");
	lstr_cat(&c, ",\"aud\":");
	lstr_json(&c, url);
	snprintf(num, sizeof(num), ",\"iat\":%lld,\"exp\":%lld}",
	    (long long)now, (long long)now + 3600);
	lstr_cat(&c, num);
	if (c.l_oom) {
		snprintf(why, whysz, "out of memory");
		goto out;
	}
	if ((jwt = jwt_rs256(c.l_v->sv_data, f[1].jf_str->sv_data,
	    f[1].jf_str->sv_len, why, whysz)) == NULL)
		goto out;
	lstr_param(&l, "grant_type", "urn:ietf:params:oauth:grant-type:"
	    "jwt-bearer", 43);
	lstr_param(&l, "assertion", jwt->sv_data, jwt->sv_len);
	rc = post(cfg, url, "Content-Type: application/x-www-form-urlencoded"
	    "\r\nAccept: application/json\r\n", &l, 0, stopfd, out, why, whysz);
out:
	jfields_fini(f, 3);
	sec_val_unref(c.l_v);
	sec_val_unref(l.l_v);
	sec_val_unref(jwt);
	return rc;
}

static int
mint_github(const struct cfg *cfg, const struct cfg_broker *b,
    const struct sec_val *key, int stopfd, struct sec_mint *out,
    char *why, size_t whysz)
{
	struct lstr	 h = { NULL, 0, 0 }, body = { NULL, 0, 0 };
	struct sec_val	*jwt;
	char		 claims[160], url[1200];
	const char	*api = b->b_token_url != NULL ? b->b_token_url :
			    BK_GITHUB_API;
	size_t		 alen = strlen(api);
	time_t		 now = time(NULL);
	int		 rc;

	/* iat 60 s back for clock drift (GitHub's advice) */
	snprintf(claims, sizeof(claims), "{\"iat\":%lld,\"exp\":%lld,"
	    "\"iss\":\"%s\"}", (long long)now - 60, (long long)now - 60 +
	    BK_JWT_LIFE - 10, b->b_app_id);
	if ((jwt = jwt_rs256(claims, key->sv_data, key->sv_len, why,
	    whysz)) == NULL)
		return -1;
	while (alen > 0 && api[alen - 1] == '/')
		alen--;
	snprintf(url, sizeof(url), "%.*s/app/installations/%s/access_tokens",
	    (int)alen, api, b->b_installation_id);
	lstr_cat(&h, "Authorization: Bearer ");
	lstr_add(&h, jwt->sv_data, jwt->sv_len);
	lstr_cat(&h, "\r\nAccept: application/vnd.github+json\r\n"
	    "X-GitHub-Api-Version: 2022-11-28\r\n");
	sec_val_unref(jwt);
	if (h.l_oom) {
		snprintf(why, whysz, "out of memory");
		sec_val_unref(h.l_v);
		return -1;
	}
	rc = post(cfg, url, h.l_v->sv_data, &body, 1, stopfd, out, why, whysz);
	sec_val_unref(h.l_v);
	return rc;
}

int
sec_broker_mint(const struct cfg *cfg, const struct cfg_secret *sc,
    const struct sec_val *cred, const struct sec_val *cred2, int stopfd,
    struct sec_mint *out, char *why, size_t whysz)
{
	memset(out, 0, sizeof(*out));
	switch (sc->sc_broker->b_kind) {
	case CFG_BROKER_CLIENT_CREDENTIALS:
		return mint_oauth2(cfg, sc->sc_broker, cred, NULL, stopfd, out,
		    why, whysz);
	case CFG_BROKER_REFRESH:
		return mint_oauth2(cfg, sc->sc_broker, cred, cred2, stopfd,
		    out, why, whysz);
	case CFG_BROKER_GOOGLE:
		return mint_google(cfg, sc->sc_broker, cred, stopfd, out, why,
		    whysz);
	case CFG_BROKER_GITHUB:
		return mint_github(cfg, sc->sc_broker, cred, stopfd, out, why,
		    whysz);
	}
	snprintf(why, whysz, "unknown token broker");
	return -1;
}
