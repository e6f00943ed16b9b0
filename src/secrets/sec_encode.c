/*
 * The forms a secret can come back in. An upstream that echoes, logs,
 * redirects or range-serves what it received hands it back transformed by
 * whatever its framework does to text: percent-encoding (with the safe
 * sets of the common encoders, in either hex case, '+' for space, twice
 * over), JSON string escaping (plain, PHP's "\/", "\u" for every
 * punctuation byte), base64 and base64url (at each of the three offsets
 * the value may sit at inside a longer encoded string). Each form goes
 * into the response scanner whole, and cut into every run of min_run
 * bytes, so that no piece that long of any form reaches the sandbox
 * either (Range requests, "first 16 characters" debug pages). The runs
 * share the scanner's one automaton: the cost per scanned byte does not
 * grow with the number of secrets.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "secrets/sec.h"
#include "util/util.h"

/* A growable byte string that may hold a secret: wiped when freed. */
struct form {
	char	*f_b;
	size_t	 f_len;
	size_t	 f_cap;
};

#define FORMS_MAX	80
/*
 * Bytes of forms, per value, whose runs are added: a run of min_run bytes
 * costs up to min_run automaton nodes, so a long value (a PEM key) would
 * otherwise cost megabytes per request. Past this, forms go in whole.
 */
#define RUNS_MAX	8192

struct forms {
	struct form	fs_f[FORMS_MAX];
	size_t		fs_n;
};

static void
form_add(struct form *f, const char *p, size_t n)
{
	char	*nb;
	size_t	 ncap;

	if (f->f_len + n > f->f_cap) {
		ncap = f->f_cap ? f->f_cap : 64;
		while (ncap < f->f_len + n)
			ncap *= 2;
		nb = xmalloc(ncap);
		if (f->f_b != NULL) {
			memcpy(nb, f->f_b, f->f_len);
			OPENSSL_cleanse(f->f_b, f->f_cap);
			free(f->f_b);
		}
		f->f_b = nb;
		f->f_cap = ncap;
	}
	memcpy(f->f_b + f->f_len, p, n);
	f->f_len += n;
}

static void
form_fini(struct form *f)
{
	if (f->f_b != NULL) {
		OPENSSL_cleanse(f->f_b, f->f_cap);
		free(f->f_b);
	}
	memset(f, 0, sizeof(*f));
}

/* Keep <f> unless an equal form is kept already (takes ownership). */
static void
forms_keep(struct forms *fs, struct form *f)
{
	size_t	i;

	if (f->f_len == 0 || fs->fs_n == FORMS_MAX) {
		form_fini(f);
		return;
	}
	for (i = 0; i < fs->fs_n; i++)
		if (fs->fs_f[i].f_len == f->f_len &&
		    CRYPTO_memcmp(fs->fs_f[i].f_b, f->f_b, f->f_len) == 0) {
			form_fini(f);
			return;
		}
	fs->fs_f[fs->fs_n++] = *f;
	memset(f, 0, sizeof(*f));
}

/* ---- percent-encoding ---------------------------------------------------- */

/*
 * What each common encoder leaves as is, besides letters and digits:
 * RFC 3986 unreserved (curl, Go, Python quote(safe="")), JavaScript's
 * encodeURIComponent, Python's quote() default, encodeURI, and the
 * form encoders (PHP urlencode, WHATWG x-www-form-urlencoded).
 */
static const char *const pct_safe[] = {
	"-._~",
	"-._~!'()*",
	"-._~/",
	"-._~!#$&'()*+,/:;=?@",
	"-._",
	"-._*",
};

static int
is_alnum(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
	    (ch >= '0' && ch <= '9');
}

static void
pct_encode(struct form *out, const char *in, size_t len, const char *safe,
    int lower, int plus)
{
	const char	*hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
	char		 e[3];
	size_t		 i;

	for (i = 0; i < len; i++) {
		unsigned char	ch = (unsigned char)in[i];

		if (is_alnum(ch) || (ch != 0 && strchr(safe, ch) != NULL))
			form_add(out, (const char *)&in[i], 1);
		else if (ch == ' ' && plus)
			form_add(out, "+", 1);
		else {
			e[0] = '%';
			e[1] = hex[ch >> 4];
			e[2] = hex[ch & 15];
			form_add(out, e, 3);
		}
	}
}

static void
pct_forms(struct forms *fs, const char *v, size_t len)
{
	struct form	once, twice;
	size_t		s;
	int		lower, plus;

	for (s = 0; s < sizeof(pct_safe) / sizeof(pct_safe[0]); s++)
		for (lower = 0; lower < 2; lower++)
			for (plus = 0; plus < 2; plus++) {
				if (plus && memchr(v, ' ', len) == NULL)
					continue;
				memset(&once, 0, sizeof(once));
				memset(&twice, 0, sizeof(twice));
				pct_encode(&once, v, len, pct_safe[s], lower,
				    plus);
				/* a redirect's next= carries it encoded twice */
				if (once.f_len > 0)
					pct_encode(&twice, once.f_b,
					    once.f_len, pct_safe[s], lower,
					    plus);
				forms_keep(fs, &once);
				forms_keep(fs, &twice);
			}
}

/* ---- JSON string escaping ------------------------------------------------ */

enum json_style {
	JSON_PLAIN = 0,		/* only what JSON requires */
	JSON_SLASH,		/* and "\/" (PHP json_encode) */
	JSON_U_LOWER,		/* "\u00xx" for every ASCII non-alnum */
	JSON_U_UPPER,
};

static void
json_escape(struct form *out, const char *in, size_t len,
    enum json_style style)
{
	const char	*hex = style == JSON_U_LOWER ? "0123456789abcdef" :
			    "0123456789ABCDEF";
	char		 e[6];
	size_t		 i;

	for (i = 0; i < len; i++) {
		unsigned char	ch = (unsigned char)in[i];
		int		uall = style == JSON_U_LOWER ||
				    style == JSON_U_UPPER;

		if (is_alnum(ch) || ch >= 0x80 ||
		    (!uall && ch >= 0x20 && ch != '"' && ch != '\\' &&
		    !(ch == '/' && style == JSON_SLASH))) {
			/* bytes >= 0x80: UTF-8 passes through (kept raw) */
			form_add(out, (const char *)&in[i], 1);
			continue;
		}
		if (!uall && (ch == '"' || ch == '\\' || ch == '/')) {
			e[0] = '\\';
			e[1] = (char)ch;
			form_add(out, e, 2);
			continue;
		}
		if (!uall && (ch == '\n' || ch == '\r' || ch == '\t' ||
		    ch == '\b' || ch == '\f')) {
			e[0] = '\\';
			e[1] = ch == '\n' ? 'n' : ch == '\r' ? 'r' :
			    ch == '\t' ? 't' : ch == '\b' ? 'b' : 'f';
			form_add(out, e, 2);
			continue;
		}
		e[0] = '\\';
		e[1] = 'u';
		e[2] = '0';
		e[3] = '0';
		e[4] = hex[ch >> 4];
		e[5] = hex[ch & 15];
		form_add(out, e, 6);
	}
}

static void
json_forms(struct forms *fs, const char *v, size_t len)
{
	struct form	f;
	int		st;

	for (st = JSON_PLAIN; st <= JSON_U_UPPER; st++) {
		memset(&f, 0, sizeof(f));
		json_escape(&f, v, len, (enum json_style)st);
		forms_keep(fs, &f);
	}
	/* "\u002F" for some, lowercase short escapes for others: the runs
	   between two escapes are caught by the min_run runs */
}

/* ---- base64 -------------------------------------------------------------- */

static void
b64_full(struct form *out, const char *in, size_t len, int url, int pad)
{
	char	*enc = xmalloc(4 * ((len + 2) / 3) + 1);
	size_t	 n, i;

	n = (size_t)EVP_EncodeBlock((unsigned char *)enc,
	    (const unsigned char *)in, (int)len);
	if (url)
		for (i = 0; i < n; i++)
			enc[i] = enc[i] == '+' ? '-' : enc[i] == '/' ? '_' :
			    enc[i];
	while (!pad && n > 0 && enc[n - 1] == '=')
		n--;
	form_add(out, enc, n);
	OPENSSL_cleanse(enc, 4 * ((len + 2) / 3) + 1);
	free(enc);
}

/*
 * The base64 characters that depend on <in> alone when it sits <off>
 * bytes (mod 3) into the encoded data: the characters that also carry bits
 * of the neighbours are left out, the rest is what any encoding of a text
 * containing <in> at that offset contains.
 */
static void
b64_aligned(struct form *out, const char *in, size_t len, size_t off,
    int url)
{
	static const size_t	 skip_head[3] = { 0, 2, 3 };
	struct form		 full;
	char			*padded;
	size_t			 n = off + len, keep;

	padded = xcalloc(1, n);
	memcpy(padded + off, in, len);
	memset(&full, 0, sizeof(full));
	b64_full(&full, padded, n, url, 0);
	/* whole groups, then the characters of the last partial group
	   whose 6 bits all come from <in> */
	keep = 4 * (n / 3) + (n % 3);
	if (keep > full.f_len)
		keep = full.f_len;
	if (keep > skip_head[off])
		form_add(out, full.f_b + skip_head[off], keep - skip_head[off]);
	form_fini(&full);
	OPENSSL_cleanse(padded, n);
	free(padded);
}

static void
b64_forms(struct forms *fs, const char *v, size_t len)
{
	struct form	f;
	size_t		off;
	int		url, pad;

	for (url = 0; url < 2; url++) {
		for (pad = 0; pad < 2; pad++) {
			memset(&f, 0, sizeof(f));
			b64_full(&f, v, len, url, pad);
			forms_keep(fs, &f);
		}
		for (off = 0; off < 3; off++) {
			memset(&f, 0, sizeof(f));
			b64_aligned(&f, v, len, off, url);
			forms_keep(fs, &f);
		}
	}
}

/* ---- the scanner's patterns ---------------------------------------------- */

/* <pat> whole, and each of its runs of <min_run> bytes. */
void
sec_scan_add_runs(struct sec_scan *sc, const char *pat, size_t len,
    size_t min_run, const char *repl, size_t rlen)
{
	size_t	i;

	sec_scan_add(sc, pat, len, repl, rlen);
	if (min_run == 0 || len <= min_run)
		return;
	for (i = 0; i + min_run <= len; i++)
		sec_scan_add(sc, pat + i, min_run, repl, rlen);
}

void
sec_scan_add_forms(struct sec_scan *sc, const char *v, size_t len,
    size_t min_run, const char *repl, size_t rlen)
{
	struct forms	*fs;
	struct form	 raw, *f;
	size_t		 i, runs = 0;

	if (len == 0)
		return;
	fs = xcalloc(1, sizeof(*fs));
	memset(&raw, 0, sizeof(raw));
	form_add(&raw, v, len);
	forms_keep(fs, &raw);
	/* most likely first: they keep their runs when a long value
	   reaches RUNS_MAX */
	b64_forms(fs, v, len);
	json_forms(fs, v, len);
	pct_forms(fs, v, len);
	for (i = 0; i < fs->fs_n; i++) {
		f = &fs->fs_f[i];
		runs += f->f_len;
		sec_scan_add_runs(sc, f->f_b, f->f_len, runs <= RUNS_MAX ?
		    min_run : 0, repl, rlen);
		form_fini(f);
	}
	free(fs);
}
