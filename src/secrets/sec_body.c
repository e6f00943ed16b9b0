/*
 * Placeholders in request bodies (placeholder_in: [..., body]): each
 * bound secret's placeholder is replaced as the body streams, by its
 * value encoded for where it lands: JSON-escaped inside application/json
 * (and +json), percent-encoded inside application/x-www-form-urlencoded,
 * as it is otherwise (multipart parts, text). One scanner per secret, so
 * that the audit can say which was attached; each keeps back at most its
 * longest pattern minus one byte (a placeholder split across chunks), and
 * lets it go at the end.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "secrets/sec.h"
#include "secrets/sec_req.h"
#include "util/util.h"

struct body_ent {
	struct sec_scan	*be_scan;
	const char	*be_name;	/* the cfg's */
	size_t		 be_hits;
};

struct sec_body {
	int		 sb_kind;
	size_t		 sb_n;
	struct body_ent	 sb_e[SEC_REQ_MAX];
	struct evbuffer	*sb_tmp[2];
	size_t		 sb_longest;
};

static void
wipe_free(char *p, size_t n)
{
	if (p == NULL)
		return;
	OPENSSL_cleanse(p, n);
	free(p);
}

int
sec_body_kind(const char *ct, size_t len)
{
	const char	*semi;

	if (ct == NULL)
		return SEC_BODY_RAW;
	if ((semi = memchr(ct, ';', len)) != NULL)
		len = (size_t)(semi - ct);
	util_trim_ows(&ct, &len);
	if (util_strncaseeq(ct, len, "application/x-www-form-urlencoded"))
		return SEC_BODY_FORM;
	if (util_strncaseeq(ct, len, "application/json") || (len >= 5 &&
	    strncasecmp(ct + len - 5, "+json", 5) == 0))
		return SEC_BODY_JSON;
	return SEC_BODY_RAW;
}

/* <v> as a JSON string's contents. */
static char *
json_escape(const char *v, size_t len, size_t *olen)
{
	static const char	 hex[] = "0123456789abcdef";
	char			*out = xmalloc(6 * len + 1), *p = out;
	unsigned char		 c;
	size_t			 i;

	for (i = 0; i < len; i++) {
		c = (unsigned char)v[i];
		if (c == '"' || c == '\\') {
			*p++ = '\\';
			*p++ = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			memcpy(p, "\\u00", 4);
			p[4] = hex[c >> 4];
			p[5] = hex[c & 15];
			p += 6;
		} else
			*p++ = (char)c;
	}
	*p = '\0';
	*olen = (size_t)(p - out);
	return out;
}

struct sec_body *
sec_body_new(int kind)
{
	struct sec_body	*sb = xcalloc(1, sizeof(*sb));

	sb->sb_kind = kind;
	sb->sb_tmp[0] = evbuffer_new();
	sb->sb_tmp[1] = evbuffer_new();
	return sb;
}

static void
add_pat(struct sec_body *sb, struct sec_scan *sc, const char *pat,
    const char *repl, size_t rlen)
{
	size_t	n = strlen(pat);

	sec_scan_add(sc, pat, n, repl, rlen);
	if (n > sb->sb_longest)
		sb->sb_longest = n;
}

int
sec_body_add(struct sec_body *sb, const char *name, const char *ph,
    const char *val, size_t vlen)
{
	struct sec_scan	*sc;
	char		*enc, *ep, *alt, *q;
	const char	*s;
	size_t		 elen;

	if (sb->sb_n == SEC_REQ_MAX)
		return -1;
	sc = sec_scan_new();
	switch (sb->sb_kind) {
	case SEC_BODY_JSON:
		enc = json_escape(val, vlen, &elen);
		add_pat(sb, sc, ph, enc, elen);
		if (strchr(ph, '/') != NULL) {
			/* "\/" is how some encoders write '/' */
			alt = xmalloc(2 * strlen(ph) + 1);
			for (s = ph, q = alt; *s != '\0'; s++) {
				if (*s == '/')
					*q++ = '\\';
				*q++ = *s;
			}
			*q = '\0';
			add_pat(sb, sc, alt, enc, elen);
			free(alt);
		}
		wipe_free(enc, elen);
		break;
	case SEC_BODY_FORM:
		enc = util_pct_encode(val, vlen);
		elen = strlen(enc);
		add_pat(sb, sc, ph, enc, elen);
		ep = util_pct_encode(ph, strlen(ph));
		if (strcmp(ep, ph) != 0) {
			/* a form encoder escapes ':', '@', '/'...: either case */
			add_pat(sb, sc, ep, enc, elen);
			for (q = ep; *q != '\0'; q++)
				if (*q >= 'A' && *q <= 'F' && q > ep &&
				    (q[-1] == '%' || (q > ep + 1 &&
				    q[-2] == '%')))
					*q = (char)(*q - 'A' + 'a');
			add_pat(sb, sc, ep, enc, elen);
		}
		free(ep);
		wipe_free(enc, elen);
		break;
	default:
		add_pat(sb, sc, ph, val, vlen);
		break;
	}
	sb->sb_e[sb->sb_n].be_scan = sc;
	sb->sb_e[sb->sb_n].be_name = name;
	sb->sb_n++;
	return 0;
}

size_t
sec_body_lookbehind(const struct sec_body *sb)
{
	return sb->sb_longest > 0 ? sb->sb_longest - 1 : 0;
}

/*
 * Through each secret's scanner in turn; the last one writes to <out>.
 * The intermediate buffers hold values: they are drained at once.
 */
void
sec_body_feed(struct sec_body *sb, const char *p, size_t len, int eof,
    struct evbuffer *out)
{
	struct evbuffer	*to, *from = NULL;
	size_t		 i, n, k;
	const char	*q;

	for (i = 0; i < sb->sb_n; i++) {
		to = i + 1 == sb->sb_n ? out : sb->sb_tmp[i & 1];
		if (from != NULL) {
			n = evbuffer_get_length(from);
			q = n > 0 ? (const char *)evbuffer_pullup(from,
			    (ssize_t)n) : NULL;
		} else {
			n = len;
			q = p;
		}
		k = n > 0 ? sec_scan_feed(sb->sb_e[i].be_scan, q, n, to) : 0;
		if (eof)
			k += sec_scan_finish(sb->sb_e[i].be_scan, to);
		sb->sb_e[i].be_hits += k;
		if (from != NULL) {
			if (n > 0)
				OPENSSL_cleanse((char *)q, n);
			evbuffer_drain(from, n);
		}
		from = to;
	}
}

size_t
sec_body_hits(const struct sec_body *sb, size_t i, const char **name)
{
	if (i >= sb->sb_n)
		return 0;
	*name = sb->sb_e[i].be_name;
	return sb->sb_e[i].be_hits;
}

size_t
sec_body_count(const struct sec_body *sb)
{
	return sb != NULL ? sb->sb_n : 0;
}

void
sec_body_free(struct sec_body *sb)
{
	size_t	i;

	if (sb == NULL)
		return;
	for (i = 0; i < sb->sb_n; i++)
		sec_scan_free(sb->sb_e[i].be_scan);
	evbuffer_free(sb->sb_tmp[0]);
	evbuffer_free(sb->sb_tmp[1]);
	free(sb);
}

int
sec_body_allowed(const struct cfg_secret *s, int tls)
{
	return sec_ph_allowed(s, tls, CFG_PH_BODY);
}

int
sec_ph_allowed(const struct cfg_secret *s, int tls, int where)
{
	return s->sc_placeholder != NULL && (s->sc_ph_in & where) &&
	    (tls || s->sc_allow_plaintext);
}

int
sec_body_wanted(const struct cfg *cfg, const char *host, int tls)
{
	size_t	i;

	for (i = 0; i < cfg->c_nsecrets; i++)
		if (sec_body_allowed(&cfg->c_secrets[i], tls) &&
		    sec_bound(&cfg->c_secrets[i], host))
			return 1;
	return 0;
}

struct sec_body *
sec_req_body_new(struct sec_req **srp, const struct cfg *cfg,
    const char *host, int tls, int kind)
{
	return sec_subst_new(srp, cfg, host, tls, CFG_PH_BODY, kind);
}

struct sec_body *
sec_subst_new(struct sec_req **srp, const struct cfg *cfg, const char *host,
    int tls, int where, int kind)
{
	const struct cfg_secret	*s;
	struct sec_body		*sb = NULL;
	struct sec_val		*v;
	size_t			 i;

	for (i = 0; i < cfg->c_nsecrets; i++) {
		s = &cfg->c_secrets[i];
		if (!sec_ph_allowed(s, tls, where) || !sec_bound(s, host))
			continue;
		if ((v = sec_req_hold(sec_req_get(srp, cfg), cfg, i)) == NULL)
			continue;
		if (sb == NULL)
			sb = sec_body_new(kind);
		if (sec_body_add(sb, s->sc_name, s->sc_placeholder,
		    v->sv_data, v->sv_len) == -1)
			break;
	}
	return sb;
}

const char *const *
sec_req_names_at(struct sec_req *sr, size_t *n)
{
	static const struct { int bit; const char *n; } where[] = {
		{ CFG_PH_HEADER, "header" }, { CFG_PH_QUERY, "query" },
		{ CFG_PH_PATH, "path" }, { CFG_PH_BODY, "body" },
		{ CFG_PH_WS, "ws" },
	};
	size_t	i, j, len;
	char	*p;

	*n = 0;
	if (sr == NULL)
		return NULL;
	for (i = 0; i < sr->sr_nat; i++)
		free(sr->sr_at[i]);
	sr->sr_nat = 0;
	for (i = 0; i < sr->sr_nnames; i++)
		for (j = 0; j < sizeof(where) / sizeof(where[0]); j++) {
			if (!(sr->sr_where[i] & where[j].bit))
				continue;
			len = strlen(sr->sr_names[i]) + strlen(where[j].n) + 2;
			p = xmalloc(len);
			snprintf(p, len, "%s@%s", sr->sr_names[i], where[j].n);
			sr->sr_at[sr->sr_nat++] = p;
		}
	*n = sr->sr_nat;
	return (const char *const *)sr->sr_at;
}
