/*
 * Value parsers for the configuration: durations, sizes, names, addresses,
 * host patterns and their coverage, secret sources and PEM files. Apart
 * from cfg_check_dups() and cfg_source_read() nothing here prints; callers
 * word the message.
 */
#include "config.h"

#include <arpa/inet.h>

#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "cfg/cfg_internal.h"
#include "dns/net_guard.h"
#include "policy/pol.h"
#include "util/exec.h"
#include "util/util.h"

#define CFG_MAX_KEYLEN	40	/* longer keys get no suggestion */
#define CFG_NOT_MONEY	"not a decimal number of USD (e.g. 5, 0.15, 2.50)"

extern char	**environ;

/* Leading decimal digits of <s> into *n; returns the rest or NULL. */
static const char *
cfg_digits(const char *s, uint64_t *n)
{
	uint64_t	v = 0;

	if (s == NULL || !isdigit((unsigned char)*s))
		return NULL;
	for (; isdigit((unsigned char)*s); s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return NULL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*n = v;
	return s;
}

int
cfg_parse_duration(const char *s, uint64_t *ms)
{
	static const struct {
		const char	*u;
		uint64_t	 ms;
	} units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60 * 1000 },
		{ "h", 3600 * 1000 }, { "d", 24 * 3600 * 1000 },
	};
	const char	*u;
	uint64_t	 n;
	size_t		 i;

	/* A bare number is refused: "10" could mean seconds or ms. */
	if ((u = cfg_digits(s, &n)) == NULL || *u == '\0')
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(u, units[i].u) != 0)
			continue;
		if (n > UINT64_MAX / units[i].ms)
			return -1;
		*ms = n * units[i].ms;
		return 0;
	}
	return -1;
}

/* <ms> in the largest unit that divides it: "30d", "90s", "1500ms". */
void
cfg_fmt_duration(uint64_t ms, char *buf, size_t bufsz)
{
	static const struct {
		const char	*u;
		uint64_t	 ms;
	} units[] = {
		{ "d", 24 * 3600 * 1000 }, { "h", 3600 * 1000 },
		{ "m", 60 * 1000 }, { "s", 1000 },
	};
	size_t	i;

	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ms != 0 && ms % units[i].ms == 0) {
			snprintf(buf, bufsz, "%llu%s",
			    (unsigned long long)(ms / units[i].ms),
			    units[i].u);
			return;
		}
	}
	snprintf(buf, bufsz, "%llums", (unsigned long long)ms);
}

int
cfg_parse_size(const char *s, uint64_t *bytes)
{
	static const struct {
		const char	*u;
		uint64_t	 mult;
	} units[] = {
		{ "", 1 }, { "B", 1 },
		{ "KiB", 1ULL << 10 }, { "MiB", 1ULL << 20 },
		{ "GiB", 1ULL << 30 }, { "TiB", 1ULL << 40 },
		{ "KB", 1000 }, { "kB", 1000 }, { "MB", 1000 * 1000 },
		{ "GB", 1000 * 1000 * 1000 },
		{ "TB", 1000ULL * 1000 * 1000 * 1000 },
	};
	const char	*u;
	uint64_t	 n;
	size_t		 i;

	if ((u = cfg_digits(s, &n)) == NULL)
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(u, units[i].u) != 0)
			continue;
		if (n > UINT64_MAX / units[i].mult)
			return -1;
		*bytes = n * units[i].mult;
		return 0;
	}
	return -1;
}

/*
 * A decimal amount of US dollars ("5", "0.15", "2.50") into whole
 * micro-dollars, exactly: no floating point, at most 6 decimals. Returns
 * NULL with *micro set, else the reason.
 */
const char *
cfg_parse_money(const char *s, uint64_t *micro)
{
	const char	*p;
	uint64_t	 whole, frac = 0;
	int		 ndec = 0;

	if (*s == '-')
		return "amounts cannot be negative";
	if ((p = cfg_digits(s, &whole)) == NULL) {
		/* Digits only, but too many: "too large", not "not a number". */
		for (p = s; isdigit((unsigned char)*p); p++)
			;
		if (p != s && (*p == '\0' || *p == '.'))
			return "too large";
		return CFG_NOT_MONEY;
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++) {
			if (++ndec > 6)
				break;
			frac = frac * 10 + (uint64_t)(*p - '0');
		}
		if (ndec > 6) {
			for (; isdigit((unsigned char)*p); p++)
				;
			if (*p == '\0')
				return "more than 6 decimal places (amounts "
				    "are whole micro-dollars)";
			return CFG_NOT_MONEY;
		}
		if (ndec == 0)
			return CFG_NOT_MONEY;
	}
	if (*p != '\0')
		return CFG_NOT_MONEY;
	for (; ndec < 6; ndec++)
		frac *= 10;
	if (whole > (UINT64_MAX - frac) / 1000000)
		return "too large";
	*micro = whole * 1000000 + frac;
	return NULL;
}

/*
 * A rate "N/s", "N/m" or "N/h": N (at least 1) per 1000, 60000 or
 * 3600000 ms. Returns NULL with *n and *ms set, else the reason.
 */
const char *
cfg_parse_rate(const char *s, uint32_t *n, uint64_t *ms)
{
	static const struct {
		const char	*u;
		uint64_t	 ms;
	} units[] = {
		{ "s", 1000 }, { "m", 60 * 1000 }, { "h", 3600 * 1000 },
	};
	const char	*u;
	uint64_t	 v;
	size_t		 i;

	if ((u = cfg_digits(s, &v)) == NULL) {
		for (u = s; isdigit((unsigned char)*u); u++)
			;
		return u != s && *u == '/' ? "N is too large" :
		    "expected N/s, N/m or N/h";
	}
	if (*u != '/')
		return "expected N/s, N/m or N/h";
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(u + 1, units[i].u) == 0)
			break;
	if (i == sizeof(units) / sizeof(units[0]))
		return "the unit must be s, m or h";
	if (v == 0)
		return "N must be at least 1";
	if (v > UINT32_MAX)
		return "N is too large";
	*n = (uint32_t)v;
	*ms = units[i].ms;
	return NULL;
}

int
cfg_parse_uint(const char *s, uint64_t max, uint64_t *n)
{
	const char	*rest;

	if ((rest = cfg_digits(s, n)) == NULL || *rest != '\0' || *n > max)
		return -1;
	return 0;
}

int
cfg_parse_bool(const char *s, int *b)
{
	if (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0 ||
	    strcasecmp(s, "on") == 0)
		*b = 1;
	else if (strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0 ||
	    strcasecmp(s, "off") == 0)
		*b = 0;
	else
		return -1;
	return 0;
}

/* Optimal string alignment distance: a swap of neighbours costs one. */
static size_t
cfg_distance(const char *a, const char *b)
{
	size_t	d[CFG_MAX_KEYLEN + 1][CFG_MAX_KEYLEN + 1];
	size_t	la, lb, i, j, c, v;

	la = strlen(a);
	lb = strlen(b);
	if (la > CFG_MAX_KEYLEN || lb > CFG_MAX_KEYLEN)
		return SIZE_MAX;
	for (i = 0; i <= la; i++)
		d[i][0] = i;
	for (j = 0; j <= lb; j++)
		d[0][j] = j;
	for (i = 1; i <= la; i++) {
		for (j = 1; j <= lb; j++) {
			c = a[i - 1] == b[j - 1] ? 0 : 1;
			v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + c < v)
				v = d[i - 1][j - 1] + c;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

/* The implemented key closest to <name>, if it is close enough. */
const char *
cfg_suggest(const char *name, const struct cfg_key *keys)
{
	const char	*best = NULL;
	size_t		 bestd = SIZE_MAX, d, len;

	len = strlen(name);
	for (; keys->k_name != NULL; keys++) {
		if (keys->k_flags & CFG_K_LATER)
			continue;
		d = cfg_distance(name, keys->k_name);
		if (d < bestd) {
			bestd = d;
			best = keys->k_name;
		}
	}
	/* Two edits at most, and never most of the word. */
	if (best == NULL || bestd > 2 || bestd * 2 >= len)
		return NULL;
	return best;
}

/*
 * <p> relative to <dir> (both borrowed); a new string. "./" prefixes are
 * dropped so that messages show tidy paths.
 */
char *
cfg_path_join(const char *dir, const char *p)
{
	char	*out;
	size_t	 dl;

	if (p[0] == '/')
		return xstrdup(p);
	while (p[0] == '.' && p[1] == '/') {
		p += 2;
		while (*p == '/')
			p++;
	}
	if (*p == '\0' || strcmp(p, ".") == 0)
		return xstrdup(dir);
	dl = strlen(dir);
	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	out = xmalloc(dl + 1 + strlen(p) + 1);
	if (dl == 1 && dir[0] == '/')
		snprintf(out, dl + 1 + strlen(p) + 1, "/%s", p);
	else
		snprintf(out, dl + 1 + strlen(p) + 1, "%.*s/%s", (int)dl, dir,
		    p);
	return out;
}

static int
cfg_name_cmp(const void *va, const void *vb)
{
	const struct cfg_name	*a = va, *b = vb;
	int			 c;

	if ((c = strcmp(a->n_name, b->n_name)) != 0)
		return c;
	if (a->n_node->start_mark.line != b->n_node->start_mark.line)
		return a->n_node->start_mark.line <
		    b->n_node->start_mark.line ? -1 : 1;
	if (a->n_node->start_mark.column != b->n_node->start_mark.column)
		return a->n_node->start_mark.column <
		    b->n_node->start_mark.column ? -1 : 1;
	return 0;
}

/*
 * Report each name of <names> (sorted in place) that repeats an earlier
 * one, at the later position: 'duplicate <what> "x" (first at L:C)'.
 */
void
cfg_check_dups(struct cfg_parse *cp, struct cfg_name *names, size_t n,
    const char *what)
{
	size_t	i, first;

	/* Past the visit budget the lists are partial: say nothing. */
	if (n < 2 || cp->cp_toobig)
		return;
	qsort(names, n, sizeof(*names), cfg_name_cmp);
	for (first = 0, i = 1; i < n; i++) {
		if (strcmp(names[i].n_name, names[first].n_name) != 0) {
			first = i;
			continue;
		}
		cfg_err(cp, names[i].n_node, "duplicate %s \"%s\" (first at "
		    "%zu:%zu)", what, names[i].n_name,
		    names[first].n_node->start_mark.line + 1,
		    names[first].n_node->start_mark.column + 1);
	}
}

/* Canonical text of an IP literal (new string), NULL when not one. */
char *
cfg_ip_canon(const char *s)
{
	struct net_addr	a;
	char		buf[64];

	if (*s == '\0' || net_host_literal(s, &a) != 1)
		return NULL;
	net_addr_format(&a, buf, sizeof(buf));
	return xstrdup(buf);
}

/*
 * "HOST:PORT" or "[V6]:PORT" with an IP literal HOST; without ":PORT"
 * only when <defport> is not 0. On success *canon gets "IP:PORT" (IPv6
 * bracketed) and NULL is returned, else the reason.
 */
const char *
cfg_parse_hostport(const char *s, int defport, char **canon)
{
	struct net_addr	 a;
	const char	*colon, *port;
	char		 host[128], ip[64], out[160];
	uint64_t	 p;
	size_t		 hl;
	int		 bracket = 0;

	if (s[0] == '[') {
		if ((colon = strchr(s, ']')) == NULL)
			return "missing \"]\"";
		bracket = 1;
		hl = (size_t)(colon - s - 1);
		if (hl >= sizeof(host))
			return "address too long";
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		colon++;
		if (*colon != '\0' && *colon != ':')
			return "expected \":PORT\" after \"]\"";
	} else {
		colon = strrchr(s, ':');
		if (colon != NULL && strchr(s, ':') != colon)
			return "IPv6 addresses need brackets, e.g. "
			    "[::1]:3128";
		hl = colon != NULL ? (size_t)(colon - s) : strlen(s);
		if (hl >= sizeof(host))
			return "address too long";
		memcpy(host, s, hl);
		host[hl] = '\0';
	}
	if (colon == NULL || *colon == '\0') {
		if (defport == 0)
			return "missing \":PORT\"";
		p = (uint64_t)defport;
	} else {
		port = colon + 1;
		if (cfg_parse_uint(port, 65535, &p) == -1 || p == 0)
			return "port must be a number from 1 to 65535";
	}
	if (host[0] == '\0' || net_host_literal(host, &a) != 1)
		return "the host must be an IP address";
	if (bracket != (a.na_family == AF_INET6))
		return bracket ? "brackets are for IPv6 addresses" :
		    "IPv6 addresses need brackets, e.g. [::1]:3128";
	net_addr_format(&a, ip, sizeof(ip));
	if (a.na_family == AF_INET6)
		snprintf(out, sizeof(out), "[%s]:%u", ip, (unsigned)p);
	else
		snprintf(out, sizeof(out), "%s:%u", ip, (unsigned)p);
	*canon = xstrdup(out);
	return NULL;
}

/*
 * A DNS name as policy and overrides match it: lowercase, one trailing
 * dot dropped, labels of letters, digits, "-" and "_". On success *out is
 * a new string and NULL is returned, else the reason.
 */
const char *
cfg_host_name(const char *s, char **out)
{
	struct net_addr	 a;
	char		*h;
	size_t		 len, i, label;

	len = strlen(s);
	if (len > 0 && s[len - 1] == '.')
		len--;
	if (len == 0)
		return "empty host name";
	if (len > 253)
		return "host name longer than 253 characters";
	h = xstrndup(s, len);
	for (i = 0, label = 0; i < len; i++) {
		h[i] = (char)tolower((unsigned char)h[i]);
		if (h[i] == '.') {
			if (label == 0)
				goto empty;
			label = 0;
			continue;
		}
		if (h[i] == ':') {
			free(h);
			return "a port belongs in \"ports\", not in the host";
		}
		if (!isalnum((unsigned char)h[i]) && h[i] != '-' &&
		    h[i] != '_') {
			free(h);
			return "host names have only letters, digits, "
			    "\"-\", \"_\" and dots";
		}
		if (++label > 63) {
			free(h);
			return "a label of the host name is longer than 63 "
			    "characters";
		}
	}
	if (label == 0)
		goto empty;
	if (net_host_literal(h, &a) == -1) {
		free(h);
		return "malformed numeric address";
	}
	*out = h;
	return NULL;
empty:
	free(h);
	return "empty label in host name";
}

/*
 * A rule's host: "*", "*.suffix", an IP literal (canonical, IPv6 without
 * brackets) or a name (see cfg_host_name). Returns NULL with *out set (new
 * string), else the reason.
 */
const char *
cfg_host_pattern(const char *s, char **out)
{
	const char	*why;
	char		*name, *ip;
	size_t		 len;

	if (*s == '\0')
		return "empty host";
	if (strcmp(s, "*") == 0) {
		*out = xstrdup("*");
		return NULL;
	}
	if (s[0] == '*') {
		if (s[1] != '.')
			return "\"*\" is only allowed alone or as \"*.\" at "
			    "the start, e.g. \"*.example.com\"";
		if (strchr(s + 2, '*') != NULL)
			return "only one \"*\", at the start, is allowed";
		if ((ip = cfg_ip_canon(s + 2)) != NULL) {
			free(ip);
			return "\"*.\" needs a domain name, not an address";
		}
		if ((why = cfg_host_name(s + 2, &name)) != NULL)
			return why;
		len = strlen(name) + 3;
		*out = xmalloc(len);
		snprintf(*out, len, "*.%s", name);
		free(name);
		return NULL;
	}
	if (strchr(s, '*') != NULL)
		return "\"*\" is only allowed alone or as \"*.\" at the "
		    "start, e.g. \"*.example.com\"";
	if (strchr(s, '/') != NULL) {
		/* a network: IP literals in it (raw TCP on the transparent
		   listener, CONNECT to an address) */
		struct net_cidr	nc;
		char		a[INET6_ADDRSTRLEN];

		if (net_cidr_parse(s, &nc) == -1)
			return "a network must be ADDRESS/PREFIX with the host "
			    "bits zero, e.g. \"10.1.0.0/16\"";
		net_addr_format(&nc.nc_addr, a, sizeof(a));
		len = strlen(a) + 8;
		*out = xmalloc(len);
		snprintf(*out, len, "%s/%d", a, nc.nc_prefix);
		return NULL;
	}
	if ((ip = cfg_ip_canon(s)) != NULL) {
		*out = ip;
		return NULL;
	}
	return cfg_host_name(s, out);
}

/* Sandbox ids and policy names: safe as file names and in audit lines. */
int
cfg_name_ok(const char *s)
{
	size_t	i;

	if (!isalnum((unsigned char)s[0]))
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (i >= CFG_MAX_NAME)
			return 0;
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' &&
		    s[i] != '_' && s[i] != '-')
			return 0;
	}
	return 1;
}

/* An RFC 9110 token (tchar) of 1 to <max> characters. */
static int
cfg_token_ok(const char *s, size_t max)
{
	size_t	i;

	if (*s == '\0' || strlen(s) > max)
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if (!isalnum((unsigned char)s[i]) &&
		    strchr("!#$%&'*+-.^_`|~", s[i]) == NULL)
			return 0;
	return 1;
}

/* A method: a token, as RFC 9110 says. */
int
cfg_method_ok(const char *s)
{
	return cfg_token_ok(s, 32);
}

/* A header name: a token of reasonable length. */
int
cfg_header_name_ok(const char *s)
{
	return cfg_token_ok(s, 64);
}

/* An environment variable name a shell can set: [A-Z_][A-Z0-9_]*. */
int
cfg_env_name_ok(const char *s)
{
	size_t	i;

	if (*s == '\0' || isdigit((unsigned char)*s) || strlen(s) > 128)
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if (!(s[i] >= 'A' && s[i] <= 'Z') &&
		    !isdigit((unsigned char)s[i]) && s[i] != '_')
			return 0;
	return 1;
}

/*
 * Does the set of host patterns <pats> match every host that rule host
 * <rule> can match? Both are normalised patterns (see cfg_host_pattern).
 * An exact host needs one matching pattern; "*.s" needs "*" or a "*.t"
 * with s equal to t or a subdomain of it; "*" only "*".
 */
int
cfg_hosts_cover(char **pats, size_t n, const char *rule)
{
	const char	*s, *t;
	size_t		 i, sl, tl;

	for (i = 0; i < n; i++) {
		if (pats[i] == NULL)
			continue;
		if (strcmp(pats[i], "*") == 0)
			return 1;
		if (strcmp(rule, "*") == 0)
			continue;
		if (rule[0] != '*') {
			if (pol_host_match(pats[i], rule))
				return 1;
			continue;
		}
		if (pats[i][0] != '*')
			continue;
		s = rule + 2;
		t = pats[i] + 2;
		sl = strlen(s);
		tl = strlen(t);
		if (strcmp(s, t) == 0 || (sl > tl + 1 &&
		    strcmp(s + sl - tl, t) == 0 && s[sl - tl - 1] == '.'))
			return 1;
	}
	return 0;
}

/* Paths are matched after normalisation: refuse globs that never match. */
const char *
cfg_path_glob_check(const char *s)
{
	const char	*p;
	size_t		 len;

	if (s[0] != '/' && s[0] != '*')
		return "must start with \"/\" or \"*\"";
	for (p = s; *p != '\0'; p++) {
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return "contains a space or control character";
		if (*p == '?' || *p == '#')
			return "the query is not matched: leave out \"?\" and "
			    "what follows";
		/* requests are matched with an encoded slash read as '/' */
		if (p[0] == '%' && p[1] == '2' && (p[2] == 'F' || p[2] == 'f'))
			return "has \"%2F\": an encoded slash in a request is "
			    "matched as \"/\", write \"/\"";
	}
	len = strlen(s);
	if (strstr(s, "/./") != NULL || strstr(s, "/../") != NULL ||
	    (len >= 2 && strcmp(s + len - 2, "/.") == 0) ||
	    (len >= 3 && strcmp(s + len - 3, "/..") == 0))
		return "has \".\" or \"..\" segments, which requests never "
		    "have after normalisation";
	return NULL;
}

/* The file's bytes (at most <max>) into <buf>, refusing loose modes. */
static int
cfg_read_secret_file(const char *path, char *buf, size_t max, size_t *len,
    char *why, size_t whysz)
{
	ssize_t		r;
	int		fd;

	*len = 0;
	if ((fd = util_open_secret(path, why, whysz)) == -1)
		return -1;
	while (*len < max) {
		r = read(fd, buf + *len, max - *len);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			snprintf(why, whysz, "cannot read file \"%s\": %s",
			    path, strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		*len += (size_t)r;
	}
	close(fd);
	if (*len == max) {
		snprintf(why, whysz, "file \"%s\" is larger than %zu bytes",
		    path, max - 1);
		return -1;
	}
	return 0;
}

/* Encrypted PEM blocks are never decrypted: no password prompt. */
static int
cfg_no_password(char *buf, int size, int rwflag, void *arg)
{
	return -1;
}

/*
 * The certificates in the PEM file open on <fd> (a regular file of at most
 * CFG_MAX_FILE bytes): "CERTIFICATE", "X509 CERTIFICATE" and "TRUSTED
 * CERTIFICATE" blocks are counted, other blocks skipped, as the upstream
 * trust store reads it. Returns the count (0 when there is none), or -1
 * with the reason in <why>. OpenSSL's error queue is left empty.
 */
int
cfg_pem_count(int fd, char *why, size_t whysz)
{
	struct stat	 st;
	BIO		*bio;
	X509		*x;
	const char	*reason;
	unsigned long	 e;
	int		 n;

	if (fstat(fd, &st) == -1) {
		snprintf(why, whysz, "%s", strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whysz, "not a regular file");
		return -1;
	}
	if (st.st_size > CFG_MAX_FILE) {
		snprintf(why, whysz, "larger than %d MiB",
		    CFG_MAX_FILE / (1024 * 1024));
		return -1;
	}
	ERR_clear_error();
	if ((bio = BIO_new_fd(fd, BIO_NOCLOSE)) == NULL) {
		snprintf(why, whysz, "out of memory");
		return -1;
	}
	for (n = 0; (x = PEM_read_bio_X509_AUX(bio, NULL, cfg_no_password,
	    NULL)) != NULL; n++)
		X509_free(x);
	BIO_free(bio);
	/*
	 * The loop ends with "no start line" at the end of the file; any
	 * other error is a broken block, best told by its first error.
	 */
	e = ERR_peek_last_error();
	if (e != 0 && !(ERR_GET_LIB(e) == ERR_LIB_PEM &&
	    ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
		if ((reason = ERR_reason_error_string(ERR_peek_error())) ==
		    NULL)
			reason = "unknown error";
		snprintf(why, whysz, "malformed PEM certificate (%s)",
		    reason);
		n = -1;
	}
	ERR_clear_error();
	return n;
}

/*
 * Resolve a secret source: env:NAME, file:PATH, exec:COMMAND or
 * literal:VALUE. <what> names the key in messages; problems are reported
 * at <n>. On success *out is a new string the caller wipes with
 * OPENSSL_cleanse() before freeing. Never prints the value.
 */
int
cfg_source_read(struct cfg_parse *cp, const yaml_node_t *n, const char *what,
    const char *src, char **out, size_t *outlen)
{
	char		 buf[CFG_MAX_TOKEN + 1], why[512];
	const char	*v = NULL;
	char		*path;
	size_t		 len = 0, i;
	int		 trim = 0, rc;

	if (strncmp(src, "env:", 4) == 0) {
		if (src[4] == '\0') {
			cfg_err(cp, n, "\"%s\": env: needs a variable name",
			    what);
			return -1;
		}
		if ((v = getenv(src + 4)) == NULL) {
			cfg_err(cp, n, "\"%s\": environment variable \"%s\" "
			    "is not set", what, src + 4);
			return -1;
		}
		len = strlen(v);
	} else if (strncmp(src, "literal:", 8) == 0) {
		v = src + 8;
		len = strlen(v);
	} else if (strncmp(src, "file:", 5) == 0) {
		if (src[5] == '\0') {
			cfg_err(cp, n, "\"%s\": file: needs a path", what);
			return -1;
		}
		path = cfg_path_join(cp->cp_cfg->c_dir, src + 5);
		rc = cfg_read_secret_file(path, buf, sizeof(buf), &len, why,
		    sizeof(why));
		free(path);
		if (rc == -1) {
			OPENSSL_cleanse(buf, sizeof(buf));
			cfg_err(cp, n, "\"%s\": %s", what, why);
			return -1;
		}
		v = buf;
		trim = 1;
	} else if (strncmp(src, "exec:", 5) == 0) {
		if (src[5] == '\0') {
			cfg_err(cp, n, "\"%s\": exec: needs a command", what);
			return -1;
		}
		if (util_exec(src + 5, buf, sizeof(buf), &len,
		    CFG_EXEC_TIMEOUT_MS, -1, NULL, why, sizeof(why)) == -1) {
			OPENSSL_cleanse(buf, sizeof(buf));
			cfg_err(cp, n, "\"%s\": command %s", what, why);
			return -1;
		}
		v = buf;
		trim = 1;
	} else {
		/* Do not echo it: a bare value may well be the secret. */
		cfg_err(cp, n, "\"%s\" must be env:NAME, file:PATH, "
		    "exec:COMMAND or literal:VALUE (a bare value is refused)",
		    what);
		return -1;
	}
	while (trim && len > 0 && (v[len - 1] == '\n' || v[len - 1] == '\r'))
		len--;
	rc = 0;
	if (len == 0) {
		cfg_err(cp, n, "\"%s\" is empty", what);
		rc = -1;
	}
	for (i = 0; rc == 0 && i < len; i++) {
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
			cfg_err(cp, n, "\"%s\" contains control characters",
			    what);
			rc = -1;
		}
	}
	if (rc == 0) {
		*out = xstrndup(v, len);
		*outlen = len;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	return rc;
}

void
cfg_namev_add(struct cfg_namev *nv, const char *name, const yaml_node_t *n)
{
	if (nv->nv_n == nv->nv_cap) {
		nv->nv_cap = nv->nv_cap == 0 ? 8 : nv->nv_cap * 2;
		nv->nv_v = xrealloc(nv->nv_v, nv->nv_cap * sizeof(*nv->nv_v));
	}
	nv->nv_v[nv->nv_n].n_name = name;
	nv->nv_v[nv->nv_n].n_node = n;
	nv->nv_n++;
}

char *
cfg_name_dup(struct cfg_parse *cp, const yaml_node_t *v, const char *what)
{
	const char	*s = cfg_str(v);

	if (!cfg_name_ok(s))
		cfg_err(cp, v, "bad %s \"%s\": use letters, digits, \".\", "
		    "\"_\" and \"-\" (at most %d, starting with a letter or "
		    "digit)", what, s, CFG_MAX_NAME);
	return xstrdup(s);
}
