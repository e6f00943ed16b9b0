/*
 * Secrets stage: binding is checked here, at the moment of attaching,
 * whatever the rule asked for (the config loader checked it too).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <ctype.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "http/http_write.h"
#include "policy/pol.h"
#include "secrets/sec.h"
#include "secrets/sec_req.h"
#include "util/util.h"

int
sec_bound(const struct cfg_secret *s, const char *host)
{
	size_t	i;

	for (i = 0; i < s->sc_nhosts; i++)
		if (pol_host_match(s->sc_hosts[i], host))
			return 1;
	return 0;
}

struct sec_req *
sec_req_get(struct sec_req **srp, const struct cfg *cfg)
{
	if (*srp == NULL) {
		*srp = xcalloc(1, sizeof(**srp));
		(*srp)->sr_add = evbuffer_new();
		(*srp)->sr_min_run = cfg->c_reflect_min_run;
	}
	return *srp;
}

/* Keep a reference to a value for the life of the request. */
struct sec_val *
sec_req_hold(struct sec_req *sr, const struct cfg *cfg, size_t idx)
{
	struct sec_val	*v;

	if (sr->sr_nvals == SEC_REQ_MAX)
		return NULL;
	if ((v = sec_store_get(cfg->c_store, idx)) == NULL)
		return NULL;
	sr->sr_vals[sr->sr_nvals++] = v;
	return v;
}

static void
req_drop(struct sec_req *sr, const char *name)
{
	size_t	i;

	for (i = 0; i < sr->sr_ndrop; i++)
		if (strcasecmp(sr->sr_drop[i], name) == 0)
			return;
	if (sr->sr_ndrop < sizeof(sr->sr_drop) / sizeof(sr->sr_drop[0]))
		sr->sr_drop[sr->sr_ndrop++] = name;
}

void
sec_req_mark(struct sec_req *sr, const char *name, int where)
{
	size_t	i;

	for (i = 0; i < sr->sr_nnames; i++)
		if (strcmp(sr->sr_names[i], name) == 0) {
			sr->sr_where[i] |= where;
			return;
		}
	if (sr->sr_nnames < SEC_REQ_MAX) {
		sr->sr_where[sr->sr_nnames] = where;
		sr->sr_names[sr->sr_nnames++] = name;
	}
}

/* Redact <pat> (and its runs) from responses as [airlock:redacted:NAME]. */
static void
req_reflect_runs(struct sec_req *sr, const char *name, const char *pat,
    size_t len)
{
	char	repl[128];
	int	n;

	if (len == 0)
		return;
	n = snprintf(repl, sizeof(repl), "[airlock:redacted:%s]", name);
	sec_scan_add_runs(sr->sr_reflect, pat, len, sr->sr_min_run, repl,
	    (size_t)n);
}

static char *
b64(const char *in, size_t len)
{
	char	*out = xmalloc(4 * ((len + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in,
	    (int)len);
	return out;
}

static void
wipe_free(char *p)
{
	if (p != NULL) {
		OPENSSL_cleanse(p, strlen(p));
		free(p);
	}
}

/* <s> with every hex digit of a %XX escape lower-cased (new string). */
static char *
pct_lower(const char *s)
{
	char	*out = xstrdup(s), *p;

	for (p = out; *p != '\0'; p++)
		if (*p == '%' && p[1] != '\0' && p[2] != '\0') {
			p[1] = (char)tolower((unsigned char)p[1]);
			p[2] = (char)tolower((unsigned char)p[2]);
			p += 2;
		}
	return out;
}

/* <query> without any "<param>=..." pair (new string, "" if none). */
static char *
sr_query_without(const char *query, const char *param)
{
	struct evbuffer	*b;
	const char	*p, *amp;
	size_t		 plen = strlen(param), len, n;
	char		*out;
	int		 first = 1;

	if (query == NULL)
		return xstrdup("");
	b = evbuffer_new();
	for (p = query; *p != '\0'; p = amp + 1) {
		amp = strchr(p, '&');
		if (amp == NULL)
			amp = p + strlen(p) - 1 + 1;
		len = (size_t)(amp - p);
		if (len > 0 && !(len >= plen && strncmp(p, param, plen) == 0 &&
		    (len == plen || p[plen] == '='))) {
			if (!first)
				evbuffer_add(b, "&", 1);
			evbuffer_add(b, p, len);
			first = 0;
		}
		if (*amp == '\0')
			break;
	}
	n = evbuffer_get_length(b);
	out = xmalloc(n + 1);
	evbuffer_remove(b, out, n);
	out[n] = '\0';
	evbuffer_free(b);
	return out;
}

/*
 * The secrets whose forms the response scanner holds, with the value each
 * request uses (one value per secret, the one it attached: a refresh in
 * between must not leave the attached one unscanned).
 */
struct refl_list {
	unsigned char	 *rl_done;	/* per secret index */
	size_t		 *rl_idx;
	struct sec_val	**rl_val;	/* refs */
	size_t		  rl_n;
};

static void
reflect_secret(struct refl_list *rl, size_t idx, struct sec_val *v)
{
	if (rl->rl_done[idx])
		return;
	rl->rl_done[idx] = 1;
	rl->rl_idx[rl->rl_n] = idx;
	rl->rl_val[rl->rl_n++] = sec_val_ref(v);
}

/*
 * A renewed token's predecessor is still valid until it expires: an
 * upstream that stored it may hand it back, so it is scanned for too.
 */
static void
reflect_prev(const struct cfg *cfg, struct refl_list *rl)
{
	struct sec_val	*v;
	size_t		 i, n = rl->rl_n;

	for (i = 0; i < n; i++) {
		if (cfg->c_secrets[rl->rl_idx[i]].sc_broker == NULL ||
		    (v = sec_store_prev(cfg->c_store, rl->rl_idx[i])) == NULL)
			continue;
		rl->rl_idx[rl->rl_n] = rl->rl_idx[i];
		rl->rl_val[rl->rl_n++] = v;
	}
}

static void
refl_fini(struct refl_list *rl)
{
	size_t	i;

	for (i = 0; i < rl->rl_n; i++)
		sec_val_unref(rl->rl_val[i]);
	free(rl->rl_done);
	free(rl->rl_idx);
	free(rl->rl_val);
	memset(rl, 0, sizeof(*rl));
}

/* Attach secret <idx> the way its `inject` says. */
static int
attach(struct sec_req *sr, const struct sec_facts *f, size_t idx,
    struct refl_list *rl)
{
	const struct cfg_secret	*s = &f->sf_cfg->c_secrets[idx];
	struct sec_val		*v;
	char			*enc, *tmp, *q;
	const char		*t;
	size_t			 n;

	if ((v = sec_req_hold(sr, f->sf_cfg, idx)) == NULL)
		return -1;
	sec_req_mark(sr, s->sc_name, s->sc_inject == CFG_INJECT_QUERY ?
	    CFG_PH_QUERY : s->sc_inject == CFG_INJECT_NONE ? 0 :
	    CFG_PH_HEADER);
	reflect_secret(rl, idx, v);
	switch (s->sc_inject) {
	case CFG_INJECT_NONE:
		break;
	case CFG_INJECT_HEADER:
		sr->sr_carries = 1;
		req_drop(sr, s->sc_header);
		evbuffer_add_printf(sr->sr_add, "%s: ", s->sc_header);
		for (t = s->sc_template; *t != '\0'; ) {
			if (strncmp(t, "${secret}", 9) == 0) {
				evbuffer_add(sr->sr_add, v->sv_data, v->sv_len);
				t += 9;
			} else
				evbuffer_add(sr->sr_add, t++, 1);
		}
		evbuffer_add(sr->sr_add, "\r\n", 2);
		break;
	case CFG_INJECT_BASIC:
		sr->sr_carries = 1;
		req_drop(sr, "authorization");
		if (s->sc_username != NULL) {
			n = strlen(s->sc_username) + 1 + v->sv_len;
			tmp = xmalloc(n + 1);
			snprintf(tmp, n + 1, "%s:%s", s->sc_username,
			    v->sv_data);
		} else {
			n = v->sv_len;
			tmp = xstrndup(v->sv_data, n);
		}
		enc = b64(tmp, n);
		evbuffer_add_printf(sr->sr_add, "Authorization: Basic %s\r\n",
		    enc);
		wipe_free(enc);
		OPENSSL_cleanse(tmp, n);
		free(tmp);
		break;
	case CFG_INJECT_QUERY:
		sr->sr_carries = 1;
		enc = util_pct_encode(v->sv_data, v->sv_len);
		q = sr_query_without(sr->sr_query != NULL ? sr->sr_query :
		    f->sf_query, s->sc_query);
		n = strlen(q) + strlen(s->sc_query) + strlen(enc) + 3;
		tmp = xmalloc(n);
		snprintf(tmp, n, "%s%s%s=%s", q, q[0] ? "&" : "", s->sc_query,
		    enc);
		wipe_free(q);
		wipe_free(sr->sr_query);
		sr->sr_query = tmp;
		wipe_free(enc);
		break;
	case CFG_INJECT_SIGV4:
		sr->sr_carries = 1;
		sr->sr_sigv4 = (int)idx + 1;
		sr->sr_sigv4_val = v;
		req_drop(sr, "authorization");
		req_drop(sr, "x-amz-date");
		req_drop(sr, "x-amz-content-sha256");
		req_drop(sr, "x-amz-security-token");
		/* S3 takes UNSIGNED-PAYLOAD; others sign the body's hash */
		sr->sr_need_body = strcmp(s->sc_service, "s3") != 0;
		break;
	}
	return 0;
}

/*
 * A value goes out only over TLS whose certificate was verified, unless
 * the secret allows plain HTTP: anyone on the path would read it.
 */
static int
plaintext_refused(const struct sec_facts *f, const struct cfg_secret *s,
    char *reason, size_t reasonsz)
{
	if (f->sf_tls || s->sc_allow_plaintext)
		return 0;
	snprintf(reason, reasonsz, "secret \"%s\" is sent only over verified "
	    "TLS and this request to %s is plain HTTP (use https://, or set "
	    "allow_plaintext: true on the secret)", s->sc_name, f->sf_host);
	return 1;
}

/* Placeholder -> value in headers and query, -> encoded value in paths. */
static void
subst_add(struct sec_req *sr, const char *ph, const struct sec_val *v)
{
	/* "%3A" and "%3a" forms become the encoded value */
	char	*ep = util_pct_encode(ph, strlen(ph));
	char	*el = pct_lower(ep);
	char	*ev = util_pct_encode(v->sv_data, v->sv_len);

	if (sr->sr_subst == NULL)
		sr->sr_subst = sec_scan_new();
	if (sr->sr_subst_path == NULL)
		sr->sr_subst_path = sec_scan_new();
	sec_scan_add(sr->sr_subst, ph, strlen(ph), v->sv_data, v->sv_len);
	/* in a path the value is data: a '/' or '?' in it must not split it */
	sec_scan_add(sr->sr_subst_path, ph, strlen(ph), ev, strlen(ev));
	if (strcmp(ep, ph) != 0) {
		sec_scan_add(sr->sr_subst, ep, strlen(ep), ev, strlen(ev));
		sec_scan_add(sr->sr_subst_path, ep, strlen(ep), ev,
		    strlen(ev));
		if (strcmp(el, ep) != 0) {
			sec_scan_add(sr->sr_subst, el, strlen(el), ev,
			    strlen(ev));
			sec_scan_add(sr->sr_subst_path, el, strlen(el), ev,
			    strlen(ev));
		}
	}
	free(ep);
	free(el);
	wipe_free(ev);
}

/* Placeholders in the target and in Basic credentials, once all known. */
static void
subst_apply(struct sec_req *sr, const struct sec_facts *f)
{
	char	*tmp, *basic;
	size_t	 n;

	if (f->sf_query != NULL && sr->sr_query == NULL) {
		tmp = sec_scan_string(sr->sr_subst, f->sf_query,
		    strlen(f->sf_query), &n, NULL);
		sr->sr_query = tmp;
	} else if (sr->sr_query != NULL) {
		tmp = sec_scan_string(sr->sr_subst, sr->sr_query,
		    strlen(sr->sr_query), &n, NULL);
		wipe_free(sr->sr_query);
		sr->sr_query = tmp;
	}
	if (f->sf_path != NULL)
		sr->sr_path = sec_scan_string(sr->sr_subst_path, f->sf_path,
		    strlen(f->sf_path), &n, NULL);
	/* Basic credentials carry it base64-encoded: decode, replace,
	   encode (unless an injected Authorization replaces them anyway) */
	if (!sec_req_drops(sr, "authorization", 13) &&
	    (basic = sec_trip_basic_subst(f->sf_msg, sr->sr_subst)) != NULL) {
		req_drop(sr, "authorization");
		evbuffer_add_printf(sr->sr_add, "Authorization: %s\r\n", basic);
		wipe_free(basic);
	}
}

/*
 * Stored reflection: a bound host may hand back what an earlier request
 * left with it, so its responses are scanned for every secret bound to it,
 * whichever rule matched and whatever this request carries.
 */
static void
reflect_bound(struct sec_req **srp, const struct sec_facts *f,
    struct refl_list *rl)
{
	const struct cfg	*cfg = f->sf_cfg;
	struct sec_val		*v;
	size_t			 i;

	for (i = 0; i < cfg->c_nsecrets; i++) {
		if (rl->rl_done[i] || !sec_bound(&cfg->c_secrets[i],
		    f->sf_host))
			continue;
		if ((v = sec_store_get(cfg->c_store, i)) == NULL)
			continue;	/* no value: nothing to leak */
		sec_req_get(srp, cfg);
		reflect_secret(rl, i, v);
		sec_val_unref(v);
	}
}

enum sec_verdict
sec_req_prepare(struct sec_facts *f, struct sec_req **out, char *reason,
    size_t reasonsz)
{
	const struct cfg	*cfg = f->sf_cfg;
	const struct cfg_secret	*s;
	struct sec_req		*sr = NULL;
	struct sec_val		*v;
	struct refl_list	 rl;
	char			 why[340];
	size_t			 i, n;
	int			 where;

	*out = NULL;
	f->sf_body = NULL;
	if (cfg->c_nsecrets == 0)
		return SEC_OK;
	rl.rl_done = xcalloc(cfg->c_nsecrets, 1);
	/* room for a broker secret's previous token too (reflect_prev) */
	rl.rl_idx = xcalloc(2 * cfg->c_nsecrets, sizeof(*rl.rl_idx));
	rl.rl_val = xcalloc(2 * cfg->c_nsecrets, sizeof(*rl.rl_val));
	rl.rl_n = 0;
	/* placeholders first: misuse stops everything */
	for (i = 0; i < cfg->c_nsecrets; i++) {
		s = &cfg->c_secrets[i];
		if (s->sc_placeholder == NULL || (where = sec_trip_sent(
		    f->sf_msg, f->sf_path, f->sf_query, s->sc_placeholder)) ==
		    0)
			continue;
		if (!sec_bound(s, f->sf_host)) {
			snprintf(reason, reasonsz, "placeholder of secret \"%s\" "
			    "sent towards %s, which it is not bound to",
			    s->sc_name, f->sf_host);
			goto misuse;
		}
		if ((where & ~s->sc_ph_in) != 0) {
			snprintf(reason, reasonsz, "placeholder of secret \"%s\" "
			    "sent in the request %s, where it is not replaced "
			    "(placeholder_in)", s->sc_name,
			    (where & ~s->sc_ph_in & CFG_PH_HEADER) ? "head" :
			    (where & ~s->sc_ph_in & CFG_PH_PATH) ? "path" :
			    "query");
			goto misuse;
		}
		if (plaintext_refused(f, s, reason, reasonsz))
			goto misuse;
		sec_req_get(&sr, cfg);
		if ((v = sec_req_hold(sr, cfg, i)) == NULL)
			goto noval;
		subst_add(sr, s->sc_placeholder, v);
		sr->sr_carries = 1;
		sec_req_mark(sr, s->sc_name, where);
		reflect_secret(&rl, i, v);
	}
	for (n = 0; f->sf_rule != NULL && n < f->sf_rule->r_nsecrets; n++) {
		i = f->sf_rule->r_secrets[n];
		s = &cfg->c_secrets[i];
		if (!sec_bound(s, f->sf_host))
			continue;	/* never sent outside its binding */
		if (s->sc_inject != CFG_INJECT_NONE &&
		    plaintext_refused(f, s, reason, reasonsz))
			goto misuse;
		sec_req_get(&sr, cfg);
		if (attach(sr, f, i, &rl) == -1)
			goto noval;
	}
	if (f->sf_body_kind >= 0 && (f->sf_body = sec_req_body_new(&sr, cfg,
	    f->sf_host, f->sf_tls, f->sf_body_kind)) != NULL)
		sr->sr_carries = 1;	/* a value may go out in the body */
	reflect_bound(&sr, f, &rl);
	reflect_prev(f->sf_cfg, &rl);
	if (sr == NULL) {
		refl_fini(&rl);
		return SEC_OK;
	}
	/* one scanner per host and values, built once (sec_reflect.c) */
	sr->sr_reflect = sec_reflect_scanner(cfg, rl.rl_idx, rl.rl_val,
	    rl.rl_n, sr->sr_min_run);
	refl_fini(&rl);
	if (sr->sr_subst != NULL)
		subst_apply(sr, f);
	if (sr->sr_carries) {
		/* a secret handed out in pieces is handed out */
		req_drop(sr, "range");
		req_drop(sr, "if-range");
	}
	/* responses must come back scannable */
	req_drop(sr, "accept-encoding");
	evbuffer_add_printf(sr->sr_add, "Accept-Encoding: identity\r\n");
	*out = sr;
	return SEC_OK;
misuse:
	refl_fini(&rl);
	sec_req_free(sr);
	return SEC_MISUSE;
noval:
	refl_fini(&rl);
	sec_req_free(sr);
	if (sec_store_pending(cfg->c_store, i)) {
		f->sf_wait_idx = i;
		return SEC_WAIT;
	}
	sec_store_why(cfg->c_store, i, why, sizeof(why));
	snprintf(reason, reasonsz, "secret \"%s\" has no value%s%s",
	    s->sc_name, why[0] != '\0' ? ": " : "", why);
	return SEC_ERROR;
}

int
sec_host_bound(const struct cfg *cfg, const char *host)
{
	size_t	i;

	for (i = 0; i < cfg->c_nsecrets; i++)
		if (sec_bound(&cfg->c_secrets[i], host))
			return 1;
	return 0;
}

struct sec_trip *
sec_trip_body_new(const struct cfg *cfg, const char *host, int tls)
{
	const struct cfg_secret	*s;
	struct sec_trip		*tr = NULL;
	size_t			 i;

	for (i = 0; i < cfg->c_nsecrets; i++) {
		s = &cfg->c_secrets[i];
		/* bound: replaced in the body (sec_stage's substitution),
		   or left as it is when placeholder_in was not given (as
		   before it existed); refused when placeholder_in leaves
		   bodies out, or the value may not go over plain HTTP */
		if (s->sc_placeholder == NULL || (sec_bound(s, host) &&
		    (sec_body_allowed(s, tls) || (!s->sc_ph_given &&
		    !(s->sc_ph_in & CFG_PH_BODY)))))
			continue;
		if (tr == NULL)
			tr = sec_trip_new();
		sec_trip_add(tr, s->sc_placeholder);
	}
	return tr;
}

void
sec_req_free(struct sec_req *sr)
{
	size_t	i, n;
	char	*p;

	if (sr == NULL)
		return;
	for (i = 0; i < sr->sr_nvals; i++)
		sec_val_unref(sr->sr_vals[i]);
	sec_scan_free(sr->sr_subst);
	sec_scan_free(sr->sr_subst_path);
	sec_scan_free(sr->sr_reflect);
	if (sr->sr_add != NULL) {
		/* injected header lines hold values: wipe them */
		while ((n = evbuffer_get_length(sr->sr_add)) > 0) {
			p = (char *)evbuffer_pullup(sr->sr_add, (ssize_t)n);
			OPENSSL_cleanse(p, n);
			evbuffer_drain(sr->sr_add, n);
		}
		evbuffer_free(sr->sr_add);
	}
	wipe_free(sr->sr_query);
	wipe_free(sr->sr_path);
	for (i = 0; i < sr->sr_nat; i++)
		free(sr->sr_at[i]);
	free(sr);
}

int
sec_req_drops(const struct sec_req *sr, const char *name, size_t len)
{
	size_t	i;

	if (sr == NULL)
		return 0;
	for (i = 0; i < sr->sr_ndrop; i++)
		if (util_strncaseeq(name, len, sr->sr_drop[i]))
			return 1;
	return 0;
}

int
sec_req_sign(struct sec_req *sr, const struct cfg *cfg, const char *method,
    const char *host_header, const char *path, const char *query,
    const struct http_msg *m, struct evbuffer *body)
{
	const struct cfg_secret	*s;
	struct sec_val		*v = NULL;
	struct sigv4_header	 hdrs[HTTP_MAX_HEADERS + 1];
	struct sigv4_req	 r;
	struct sigv4_out	 o;
	unsigned char		 d[SHA256_DIGEST_LENGTH];
	char			 hash[SHA256_DIGEST_LENGTH * 2 + 1], *val;
	char			*akid, *key, *tok;
	const char		*name;
	size_t			 i, nh = 0, nlen, blen;
	int			 rc;

	if (sr == NULL || sr->sr_sigv4 == 0)
		return 0;
	s = &cfg->c_secrets[sr->sr_sigv4 - 1];
	if ((v = sr->sr_sigv4_val) == NULL)
		return -1;
	/* "AKID:SECRET[:SESSION_TOKEN]" */
	val = xstrndup(v->sv_data, v->sv_len);
	akid = val;
	if ((key = strchr(akid, ':')) == NULL) {
		wipe_free(val);
		return -1;
	}
	*key++ = '\0';
	if ((tok = strchr(key, ':')) != NULL)
		*tok++ = '\0';

	if (!sr->sr_need_body)
		snprintf(hash, sizeof(hash), "UNSIGNED-PAYLOAD");
	else {
		blen = body ? evbuffer_get_length(body) : 0;
		SHA256(blen ? evbuffer_pullup(body, (ssize_t)blen) :
		    (const unsigned char *)"", blen, d);
		util_hex_encode(d, sizeof(d), hash);
	}
	hdrs[nh].name = "host";
	hdrs[nh].name_len = 4;
	hdrs[nh].value = host_header;
	hdrs[nh++].value_len = strlen(host_header);
	/* sign what identifies the call; leave hop-by-hop and UA alone */
	for (i = 0; i < (size_t)m->hm_nhdrs; i++) {
		name = m->hm_buf + m->hm_hdrs[i].h_name;
		nlen = m->hm_hdrs[i].h_name_len;
		if (sec_req_drops(sr, name, nlen) ||
		    !(util_strncaseeq(name, nlen, "content-type") ||
		    (nlen > 6 && strncasecmp(name, "x-amz-", 6) == 0)))
			continue;
		hdrs[nh].name = name;
		hdrs[nh].name_len = nlen;
		hdrs[nh].value = m->hm_buf + m->hm_hdrs[i].h_value;
		hdrs[nh++].value_len = m->hm_hdrs[i].h_value_len;
	}
	memset(&r, 0, sizeof(r));
	r.method = method;
	r.path = path;
	r.query = query;
	r.headers = hdrs;
	r.nheaders = nh;
	r.payload_hash = hash;
	r.region = s->sc_region;
	r.service = s->sc_service;
	r.access_key = akid;
	r.secret_key = key;
	r.session_token = tok;
	r.when = time(NULL);
	r.normalize_path = strcmp(s->sc_service, "s3") != 0;
	r.add_content_sha256 = 1;
	memset(&o, 0, sizeof(o));
	rc = sigv4_sign(&r, &o);
	if (rc == 0) {
		/* the signature, echoed back, is a credential for a while */
		const char	*sig = strstr(o.authorization, "Signature=");

		if (sig != NULL)
			req_reflect_runs(sr, s->sc_name, sig + 10,
			    strlen(sig + 10));
		evbuffer_add_printf(sr->sr_add, "Authorization: %s\r\n"
		    "X-Amz-Date: %s\r\nX-Amz-Content-Sha256: %s\r\n",
		    o.authorization, o.amz_date, hash);
		if (tok != NULL)
			evbuffer_add_printf(sr->sr_add,
			    "X-Amz-Security-Token: %s\r\n", tok);
	}
	sigv4_out_fini(&o);
	OPENSSL_cleanse(val, v->sv_len);
	free(val);
	return rc;
}

const char *
sec_req_path(const struct sec_req *sr, const char *dflt)
{
	return sr != NULL && sr->sr_path != NULL ? sr->sr_path : dflt;
}

const char *
sec_req_query(const struct sec_req *sr, const char *dflt)
{
	return sr != NULL && sr->sr_query != NULL ? sr->sr_query : dflt;
}

const char *
sec_req_sigv4_name(const struct sec_req *sr, const struct cfg *cfg)
{
	if (sr == NULL || sr->sr_sigv4 == 0)
		return NULL;
	return cfg->c_secrets[sr->sr_sigv4 - 1].sc_name;
}

static int
rw_drop(void *arg, const char *name, size_t nlen)
{
	return sec_req_drops(arg, name, nlen);
}

/* placeholders become the real value, bound hosts only */
static void
rw_value(void *arg, const char *v, size_t vlen, const struct hw_sink *out)
{
	const struct sec_req	*sr = arg;
	char			*subst;
	size_t			 slen;

	subst = sec_scan_string(sr->sr_subst, v, vlen, &slen, NULL);
	out->hs_add(out->hs_arg, subst, slen);
	OPENSSL_cleanse(subst, slen);
	free(subst);
}

static void
rw_fields(void *arg, const struct hw_sink *out)
{
	const struct sec_req	*sr = arg;
	size_t			 n = evbuffer_get_length(sr->sr_add);

	if (n > 0)
		out->hs_add(out->hs_arg, evbuffer_pullup(sr->sr_add, -1), n);
}

int
sec_req_rewriter(const struct sec_req *sr, struct hw_rewrite *rw)
{
	if (sr == NULL)
		return 0;
	memset(rw, 0, sizeof(*rw));
	rw->hr_drop = rw_drop;
	rw->hr_value = sr->sr_subst != NULL ? rw_value : NULL;
	rw->hr_fields = rw_fields;
	rw->hr_arg = (void *)(uintptr_t)sr;
	return 1;
}

struct sec_scan *
sec_req_reflector(const struct sec_req *sr)
{
	return sr != NULL ? sr->sr_reflect : NULL;
}

const char *const *
sec_req_names(const struct sec_req *sr, size_t *n)
{
	*n = sr != NULL ? sr->sr_nnames : 0;
	return sr != NULL ? sr->sr_names : NULL;
}
