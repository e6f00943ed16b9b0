/*
 * Checking a hash-chained audit file (airlockctl audit verify). The writer
 * (aud.c) ends every line with ,"prev":"P","hash":"H"} where H is the
 * SHA-256 of the line's bytes without its ,"hash":"H" member and P is the
 * hash of the line before (64 zeros for the first record ever). So a line
 * whose bytes changed no longer matches its own hash, and a line removed,
 * inserted or moved breaks the link of the line that follows it.
 *
 * What a chain cannot tell by itself: whole lines cut off at the end of the
 * file (compare av_last_hash or the record count with a copy kept
 * elsewhere), and a line rewritten together with every hash after it
 * (the hashes carry no key).
 *
 * Decisions: the line terminator of the last line may be missing when that
 * line is otherwise intact (nothing it says was changed); a last line that
 * is cut short is reported as truncated. Blank lines at the very end are
 * ignored; a blank line followed by records is an error (the writer never
 * writes one).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <openssl/evp.h>

#include "audit/aud.h"
#include "util/util.h"

#define HEXLEN	64

/* ,"hash":"H"} and "prev":"P" as the writer puts them */
#define HASH_TAIL_LEN	(9 + HEXLEN + 2)
#define PREV_MEMBER_LEN	(8 + HEXLEN + 1)

static void
why(struct aud_verify *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
why(struct aud_verify *v, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(v->av_why, sizeof(v->av_why), fmt, ap);
	va_end(ap);
}

/*
 * The string member <key> of <o> when it is 64 lowercase hex digits, else
 * NULL with the reason in <v>.
 */
static const char *
hex_member(json_object *o, const char *key, struct aud_verify *v)
{
	json_object	*m;
	const char	*s;

	if (!json_object_object_get_ex(o, key, &m)) {
		if (strcmp(key, "hash") == 0)
			why(v, "no hash (not written with hash_chain, or the "
			    "member was removed)");
		else
			why(v, "no %s (line altered)", key);
		return NULL;
	}
	if (!json_object_is_type(m, json_type_string)) {
		why(v, "%s is not a string (line altered)", key);
		return NULL;
	}
	s = json_object_get_string(m);
	if (json_object_get_string_len(m) != HEXLEN ||
	    !util_is_lower_hex(s, HEXLEN)) {
		why(v, "%s is not 64 lowercase hex digits (line altered)", key);
		return NULL;
	}
	return s;
}

/* Parse <line> (<len> bytes, no newline) as exactly one JSON value. */
static json_object *
parse_line(const char *line, size_t len, int cut, struct aud_verify *v)
{
	enum json_tokener_error	 e;
	json_tokener		*tok;
	json_object		*o;
	size_t			 end;

	if (len > INT_MAX) {
		why(v, "line too long");
		return NULL;
	}
	if (memchr(line, '\0', len) != NULL) {
		why(v, "not JSON: contains a NUL byte (line altered)");
		return NULL;
	}
	if ((tok = json_tokener_new()) == NULL) {
		why(v, "out of memory");
		return NULL;
	}
	o = json_tokener_parse_ex(tok, line, (int)len);
	if (o == NULL) {
		if (cut)
			why(v, "truncated: the last line is cut short (no "
			    "newline at the end of the file)");
		else if ((e = json_tokener_get_error(tok)) ==
		    json_tokener_continue || e == json_tokener_success)
			why(v, "not JSON (it ends before the object does)");
		else
			why(v, "not JSON (%s)", json_tokener_error_desc(e));
		json_tokener_free(tok);
		return NULL;
	}
#if JSON_C_VERSION_NUM >= ((0 << 16) | (15 << 8))
	end = json_tokener_get_parse_end(tok);
#else
	end = (size_t)tok->char_offset;
#endif
	json_tokener_free(tok);
	if (end != len) {
		why(v, "not JSON: bytes after the object (line altered)");
		json_object_put(o);
		return NULL;
	}
	if (!json_object_is_type(o, json_type_object)) {
		why(v, "not a JSON object (line altered)");
		json_object_put(o);
		return NULL;
	}
	return o;
}

/*
 * Check line <lineno> (<len> bytes without its newline; <cut>: no newline
 * followed it) against <expect>, the hash the chain expects as its prev.
 * Returns 0, copying its hash to <expect>, or 1 with the reason in <v>.
 */
static int
verify_line(const char *line, size_t len, int cut, int first,
    uint64_t prevline, char *expect, int given_prev, struct aud_verify *v)
{
	unsigned char	 md[EVP_MAX_MD_SIZE];
	unsigned int	 mdlen = 0;
	char		 hex[HEXLEN + 1];
	const char	*prev, *hash, *tail, *pm;
	json_object	*o;
	EVP_MD_CTX	*ctx;
	int		 ok;

	if ((o = parse_line(line, len, cut, v)) == NULL)
		return 1;
	if ((hash = hex_member(o, "hash", v)) == NULL ||
	    (prev = hex_member(o, "prev", v)) == NULL) {
		json_object_put(o);
		return 1;
	}
	if (first)
		memcpy(v->av_first_prev, prev, HEXLEN + 1);
	/* byte-exact: the line ends with "prev":"P","hash":"H"} */
	tail = line + len - HASH_TAIL_LEN;
	pm = tail - PREV_MEMBER_LEN;
	if (len < HASH_TAIL_LEN + PREV_MEMBER_LEN + 1 ||
	    memcmp(tail, ",\"hash\":\"", 9) != 0 ||
	    memcmp(tail + 9, hash, HEXLEN) != 0 ||
	    memcmp(tail + 9 + HEXLEN, "\"}", 2) != 0 ||
	    memcmp(pm, "\"prev\":\"", 8) != 0 ||
	    memcmp(pm + 8, prev, HEXLEN) != 0 || pm[8 + HEXLEN] != '"') {
		why(v, "prev and hash are not the last members as airlock "
		    "writes them (line altered)");
		json_object_put(o);
		return 1;
	}
	/* SHA-256 of the line without ,"hash":"H": its bytes up to there
	 * and the closing brace */
	ok = (ctx = EVP_MD_CTX_new()) != NULL &&
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	    EVP_DigestUpdate(ctx, line, (size_t)(tail - line)) == 1 &&
	    EVP_DigestUpdate(ctx, "}", 1) == 1 &&
	    EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen * 2 == HEXLEN;
	EVP_MD_CTX_free(ctx);
	if (!ok) {
		why(v, "cannot compute SHA-256");
		json_object_put(o);
		return 1;
	}
	util_hex_encode(md, mdlen, hex);
	if (memcmp(hex, hash, HEXLEN) != 0) {
		why(v, "hash does not match its content (line altered)");
		json_object_put(o);
		return 1;
	}
	if (memcmp(prev, expect, HEXLEN) != 0) {
		if (!first)
			why(v, "prev does not match line %llu's hash (a line "
			    "was removed, inserted or reordered here)",
			    (unsigned long long)prevline);
		else if (given_prev)
			why(v, "prev does not match the given previous hash "
			    "%.16s... (this file does not continue that "
			    "chain, or its first lines were removed)", expect);
		else
			why(v, "prev is not 64 zeros: the chain starts in an "
			    "earlier file (rotation: check this one after it, "
			    "or from its last hash) or the first lines were "
			    "removed");
		json_object_put(o);
		return 1;
	}
	memcpy(expect, hash, HEXLEN + 1);
	memcpy(v->av_last_hash, hash, HEXLEN + 1);
	json_object_put(o);
	return 0;
}

/*
 * See aud.h. <in> is borrowed and read to its end (or the first bad line).
 * av_lines counts the records checked: on success every non-blank line, on
 * failure the lines up to the bad one. <prev_hex> may be upper or lower
 * case.
 */
int
aud_verify_file(FILE *in, const char *prev_hex, struct aud_verify *v)
{
	char		 expect[HEXLEN + 1];
	char		*line = NULL;
	size_t		 cap = 0, len;
	ssize_t		 n;
	uint64_t	 lineno = 0, blank = 0;
	int		 i, rc = 0;

	memset(v, 0, sizeof(*v));
	memset(expect, '0', HEXLEN);
	expect[HEXLEN] = '\0';
	if (prev_hex != NULL)
		for (i = 0; i < HEXLEN && prev_hex[i] != '\0'; i++)
			expect[i] = (char)tolower((unsigned char)prev_hex[i]);
	errno = 0;
	while ((n = getline(&line, &cap, in)) != -1) {
		lineno++;
		len = (size_t)n;
		if (len > 0 && line[len - 1] == '\n')
			len--;
		if (len == 0) {
			/* fine at the end of the file only */
			if (blank == 0)
				blank = lineno;
			continue;
		}
		v->av_lines = lineno;
		if (blank != 0) {
			v->av_lines = v->av_bad_line = blank;
			why(v, "empty line (airlock never writes one)");
			rc = 1;
			break;
		}
		if (verify_line(line, len, len == (size_t)n, lineno == 1,
		    lineno - 1, expect, prev_hex != NULL, v) != 0) {
			v->av_bad_line = lineno;
			rc = 1;
			break;
		}
	}
	if (rc == 0 && ferror(in)) {
		why(v, "read error: %s", strerror(errno != 0 ? errno : EIO));
		rc = -1;
	}
	free(line);
	return rc;
}

/* ---- one chain per gateway (a fleet's merged files) ----------------- */

static struct aud_chain *
chain_of(struct aud_chains *cs, const char *gw)
{
	struct aud_chain	*c;
	size_t			 i;

	for (i = 0; i < cs->ac_n; i++)
		if (strcmp(cs->ac_v[i].ac_gateway, gw) == 0)
			return &cs->ac_v[i];
	if (cs->ac_n == AUD_CHAINS_MAX)
		return NULL;
	c = &cs->ac_v[cs->ac_n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->ac_gateway, sizeof(c->ac_gateway), "%s", gw);
	memset(c->ac_expect, '0', HEXLEN);
	return c;
}

/*
 * See aud.h. Each record goes to the chain of its "gateway" member ("" when
 * it has none) and is checked against that chain's last hash; a broken
 * chain keeps its first break and is not checked further. A line that is
 * not JSON cannot be told apart: it breaks the chain "?".
 */
int
aud_verify_chains(FILE *in, const char *file, struct aud_chains *cs)
{
	struct aud_verify	 v;
	struct aud_chain	*c;
	json_object		*o, *g;
	char			*line = NULL, gw[64];
	size_t			 cap = 0, len;
	ssize_t			 n;
	uint64_t		 lineno = 0;
	int			 rc = 0;

	errno = 0;
	while ((n = getline(&line, &cap, in)) != -1) {
		lineno++;
		len = (size_t)n;
		if (len > 0 && line[len - 1] == '\n')
			len--;
		if (len == 0)
			continue;
		memset(&v, 0, sizeof(v));
		snprintf(gw, sizeof(gw), "?");
		if ((o = parse_line(line, len, len == (size_t)n, &v)) != NULL) {
			if (!json_object_object_get_ex(o, "gateway", &g))
				gw[0] = '\0';
			else if (json_object_is_type(g, json_type_string))
				snprintf(gw, sizeof(gw), "%s",
				    json_object_get_string(g));
			json_object_put(o);
		}
		if ((c = chain_of(cs, gw)) == NULL) {
			rc = 1;		/* more gateways than we track */
			break;
		}
		if (c->ac_bad_line != 0)
			continue;
		if (verify_line(line, len, len == (size_t)n,
		    c->ac_records == 0, c->ac_last_line, c->ac_expect, 0,
		    &v) != 0) {
			c->ac_bad_line = lineno;
			snprintf(c->ac_file, sizeof(c->ac_file), "%s", file);
			memcpy(c->ac_why, v.av_why, sizeof(c->ac_why));
			continue;
		}
		if (c->ac_records == 0)
			memcpy(c->ac_first_prev, v.av_first_prev, HEXLEN + 1);
		memcpy(c->ac_last_hash, v.av_last_hash, HEXLEN + 1);
		c->ac_records++;
		c->ac_last_line = lineno;
	}
	if (ferror(in))
		rc = -1;
	free(line);
	return rc;
}
