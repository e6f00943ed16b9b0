/*
 * Metrics: the exposition read back by a strict parser of the Prometheus
 * text format 0.0.4 (every sample under a family declared by HELP and TYPE
 * before it, families contiguous, name/label/value syntax, no duplicate
 * series, histogram buckets ascending and cumulative with le="+Inf" equal
 * to _count); requests by decision and reason, durations into the right
 * buckets, bytes, reloads and spend by sandbox counted as fed. The parser
 * is itself tested on broken expositions it must refuse.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <event2/buffer.h>

#include "budget/bud.h"
#include "cfg/cfg.h"
#include "metrics/metrics.h"
#include "sbx/sbx.h"
#include "unit.h"

Suite	*suite_metrics(void);

/* ---- a strict parser of the text format ----------------------------- */

#define EX_MAXFAM	64
#define EX_MAXSAMPLE	16384	/* LLM series: 2048 pairs x 6 */

struct ex_family {
	char		 f_name[128];
	char		 f_type[16];
	int		 f_typed;
	size_t		 f_nsamples;
};

struct ex_sample {
	char		 s_name[160];
	char		 s_labels[512];	/* as written, inside {} */
	char		 s_le[32];	/* a bucket's le, else "" */
	char		 s_rest[512];	/* labels other than le */
	size_t		 s_family;
	double		 s_value;
};

struct expo {
	struct ex_family fam[EX_MAXFAM];
	size_t		 nfam;
	struct ex_sample *smp;
	size_t		 nsmp;
	char		 err[256];
};

static int
ex_fail(struct expo *e, int line, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	n = snprintf(e->err, sizeof(e->err), "line %d: ", line);
	va_start(ap, fmt);
	vsnprintf(e->err + n, sizeof(e->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* at *p; copies it to <out>, advances. */
static int
ex_name(const char **p, char *out, size_t outsz, int colon)
{
	const char	*s = *p;
	size_t		 n = 0;

	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
	    *s == '_' || (colon && *s == ':')))
		return -1;
	while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
	    (*s >= '0' && *s <= '9') || *s == '_' || (colon && *s == ':')) {
		if (n + 1 >= outsz)
			return -1;
		out[n++] = *s++;
	}
	out[n] = '\0';
	*p = s;
	return 0;
}

/* A float as Go's ParseFloat takes it in this format; no hex, no spaces. */
static int
ex_value(const char *s, double *v)
{
	const char	*p = s;
	char		*end;

	if (strcmp(s, "+Inf") == 0) {
		*v = INFINITY;
		return 0;
	}
	if (strcmp(s, "-Inf") == 0) {
		*v = -INFINITY;
		return 0;
	}
	if (strcmp(s, "NaN") == 0) {
		*v = NAN;
		return 0;
	}
	if (*p == '-' || *p == '+')
		p++;
	if (!(*p >= '0' && *p <= '9'))
		return -1;
	while (*p >= '0' && *p <= '9')
		p++;
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '-' || *p == '+')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p != '\0')
		return -1;
	*v = strtod(s, &end);
	return *end == '\0' ? 0 : -1;
}

static int
ex_suffix(const char *name, const char *fam, const char *suffix)
{
	size_t	fl = strlen(fam);

	return strncmp(name, fam, fl) == 0 && strcmp(name + fl, suffix) == 0;
}

/* One sample line of the current family <f>. */
static int
ex_sample_line(struct expo *e, int ln, const char *p, size_t f)
{
	struct ex_sample	*s;
	struct ex_family	*fa = &e->fam[f];
	char			 lname[128], lval[256], seen[16][128];
	char			 num[64];
	size_t			 nseen = 0, i, vl, rl = 0;
	const char		*lstart;

	if (e->nsmp >= EX_MAXSAMPLE)
		return ex_fail(e, ln, "too many samples");
	s = &e->smp[e->nsmp];
	memset(s, 0, sizeof(*s));
	if (ex_name(&p, s->s_name, sizeof(s->s_name), 1) == -1)
		return ex_fail(e, ln, "bad metric name");
	if (strcmp(fa->f_type, "histogram") == 0) {
		if (!ex_suffix(s->s_name, fa->f_name, "_bucket") &&
		    !ex_suffix(s->s_name, fa->f_name, "_sum") &&
		    !ex_suffix(s->s_name, fa->f_name, "_count"))
			return ex_fail(e, ln, "%s is not of histogram %s",
			    s->s_name, fa->f_name);
	} else if (strcmp(fa->f_type, "summary") == 0) {
		if (strcmp(s->s_name, fa->f_name) != 0 &&
		    !ex_suffix(s->s_name, fa->f_name, "_sum") &&
		    !ex_suffix(s->s_name, fa->f_name, "_count"))
			return ex_fail(e, ln, "%s is not of summary %s",
			    s->s_name, fa->f_name);
	} else if (strcmp(s->s_name, fa->f_name) != 0)
		return ex_fail(e, ln, "sample %s under family %s (not declared "
		    "by HELP and TYPE before it?)", s->s_name, fa->f_name);
	if (*p == '{') {
		p++;
		lstart = p;
		while (*p != '}') {
			if (ex_name(&p, lname, sizeof(lname), 0) == -1)
				return ex_fail(e, ln, "bad label name");
			if (strncmp(lname, "__", 2) == 0)
				return ex_fail(e, ln, "reserved label %s",
				    lname);
			for (i = 0; i < nseen; i++)
				if (strcmp(seen[i], lname) == 0)
					return ex_fail(e, ln, "label %s twice",
					    lname);
			if (nseen == 16)
				return ex_fail(e, ln, "too many labels");
			snprintf(seen[nseen++], sizeof(seen[0]), "%s", lname);
			if (*p++ != '=' || *p++ != '"')
				return ex_fail(e, ln, "label %s: want =\"",
				    lname);
			vl = 0;
			while (*p != '"') {
				if (*p == '\0' || *p == '\n')
					return ex_fail(e, ln, "unterminated "
					    "label value");
				if (*p == '\\') {
					p++;
					if (*p != '\\' && *p != '"' &&
					    *p != 'n')
						return ex_fail(e, ln, "bad "
						    "escape \\%c", *p);
				}
				if (vl + 1 < sizeof(lval))
					lval[vl++] = *p;
				p++;
			}
			lval[vl] = '\0';
			p++;
			if (strcmp(lname, "le") == 0)
				snprintf(s->s_le, sizeof(s->s_le), "%.31s",
				    lval);
			else
				rl += (size_t)snprintf(s->s_rest + rl,
				    sizeof(s->s_rest) - rl, "%s%s=%s",
				    rl ? "," : "", lname, lval);
			if (*p == ',') {
				p++;
				if (*p == '}')
					return ex_fail(e, ln, "trailing "
					    "comma");
			} else if (*p != '}')
				return ex_fail(e, ln, "want , or }");
		}
		snprintf(s->s_labels, sizeof(s->s_labels), "%.*s",
		    (int)(p - lstart), lstart);
		p++;
	}
	if (*p++ != ' ')
		return ex_fail(e, ln, "want one space before the value");
	if (strlen(p) >= sizeof(num) || strchr(p, ' ') != NULL)
		return ex_fail(e, ln, "bad value (or a timestamp) \"%s\"", p);
	snprintf(num, sizeof(num), "%s", p);
	if (ex_value(num, &s->s_value) == -1)
		return ex_fail(e, ln, "bad value \"%s\"", num);
	if (ex_suffix(s->s_name, fa->f_name, "_bucket") &&
	    strcmp(fa->f_type, "histogram") == 0) {
		if (s->s_le[0] == '\0')
			return ex_fail(e, ln, "bucket without le");
	} else if (s->s_le[0] != '\0')
		return ex_fail(e, ln, "le outside a bucket");
	if (strcmp(fa->f_type, "counter") == 0 &&
	    (isnan(s->s_value) || s->s_value < 0))
		return ex_fail(e, ln, "counter %s = %g", s->s_name,
		    s->s_value);
	for (i = 0; i < e->nsmp; i++)
		if (strcmp(e->smp[i].s_name, s->s_name) == 0 &&
		    strcmp(e->smp[i].s_rest, s->s_rest) == 0 &&
		    strcmp(e->smp[i].s_le, s->s_le) == 0)
			return ex_fail(e, ln, "series %s{%s} twice",
			    s->s_name, s->s_labels);
	s->s_family = f;
	fa->f_nsamples++;
	e->nsmp++;
	return 0;
}

/* Buckets per label set: le ascending, counts cumulative, +Inf = _count. */
static int
ex_histograms(struct expo *e)
{
	struct ex_sample	*s, *t;
	double			 prev_le, prev_n, le, cnt;
	size_t			 i, j, f;
	int			 inf, has_count, has_sum;
	char			 want[160];

	for (i = 0; i < e->nsmp; i++) {
		s = &e->smp[i];
		f = s->s_family;
		if (strcmp(e->fam[f].f_type, "histogram") != 0 ||
		    !ex_suffix(s->s_name, e->fam[f].f_name, "_count"))
			continue;
		prev_le = -INFINITY;
		prev_n = 0;
		inf = has_sum = has_count = 0;
		cnt = s->s_value;
		for (j = 0; j < e->nsmp; j++) {
			t = &e->smp[j];
			if (t->s_family != f || strcmp(t->s_rest,
			    s->s_rest) != 0)
				continue;
			if (ex_suffix(t->s_name, e->fam[f].f_name, "_sum"))
				has_sum = 1;
			if (ex_suffix(t->s_name, e->fam[f].f_name, "_count"))
				has_count++;
			if (!ex_suffix(t->s_name, e->fam[f].f_name, "_bucket"))
				continue;
			if (inf)
				return ex_fail(e, 0, "%s: bucket after +Inf",
				    t->s_name);
			if (ex_value(t->s_le, &le) == -1 || isnan(le))
				return ex_fail(e, 0, "%s: le=\"%s\"",
				    t->s_name, t->s_le);
			if (le <= prev_le)
				return ex_fail(e, 0, "%s: le %s not ascending",
				    t->s_name, t->s_le);
			if (t->s_value < prev_n)
				return ex_fail(e, 0, "%s{le=\"%s\"}: %g < %g, "
				    "not cumulative", t->s_name, t->s_le,
				    t->s_value, prev_n);
			prev_le = le;
			prev_n = t->s_value;
			if (isinf(le))
				inf = 1;
		}
		snprintf(want, sizeof(want), "%s", e->fam[f].f_name);
		if (!inf)
			return ex_fail(e, 0, "%s: no le=\"+Inf\" bucket", want);
		if (prev_n != cnt)
			return ex_fail(e, 0, "%s: +Inf bucket %g != _count %g",
			    want, prev_n, cnt);
		if (!has_sum)
			return ex_fail(e, 0, "%s: no _sum", want);
	}
	/* and no histogram without its _count */
	for (i = 0; i < e->nsmp; i++) {
		s = &e->smp[i];
		f = s->s_family;
		if (strcmp(e->fam[f].f_type, "histogram") != 0)
			continue;
		has_count = 0;
		for (j = 0; j < e->nsmp; j++)
			if (e->smp[j].s_family == f &&
			    strcmp(e->smp[j].s_rest, s->s_rest) == 0 &&
			    ex_suffix(e->smp[j].s_name, e->fam[f].f_name,
			    "_count"))
				has_count = 1;
		if (!has_count)
			return ex_fail(e, 0, "%s{%s}: no _count", s->s_name,
			    s->s_rest);
	}
	return 0;
}

static size_t
ex_find_family(struct expo *e, const char *name)
{
	size_t	i;

	for (i = 0; i < e->nfam; i++)
		if (strcmp(e->fam[i].f_name, name) == 0)
			return i;
	return SIZE_MAX;
}

/*
 * Parse <text>: 0, or -1 with e->err. We hold our own output to more than
 * the format demands: HELP then TYPE then the samples, for every family;
 * no blank lines, comments or timestamps.
 */
static int
ex_parse(const char *text, struct expo *e)
{
	const char	*p = text, *nl;
	char		 line[1024], name[128];
	const char	*q;
	size_t		 len, cur = SIZE_MAX;
	int		 ln = 0;

	memset(e, 0, sizeof(*e));
	e->smp = calloc(EX_MAXSAMPLE, sizeof(*e->smp));
	ck_assert_ptr_nonnull(e->smp);
	if (*p == '\0')
		return ex_fail(e, 0, "empty exposition");
	while (*p != '\0') {
		ln++;
		if ((nl = strchr(p, '\n')) == NULL)
			return ex_fail(e, ln, "no newline at the end");
		len = (size_t)(nl - p);
		if (len >= sizeof(line))
			return ex_fail(e, ln, "line too long");
		memcpy(line, p, len);
		line[len] = '\0';
		p = nl + 1;
		if (len == 0)
			return ex_fail(e, ln, "blank line");
		if (strchr(line, '\r') != NULL || strchr(line, '\t') != NULL)
			return ex_fail(e, ln, "CR or tab");
		if (strncmp(line, "# HELP ", 7) == 0) {
			q = line + 7;
			if (ex_name(&q, name, sizeof(name), 1) == -1 ||
			    *q != ' ' || q[1] == '\0')
				return ex_fail(e, ln, "bad HELP");
			for (q++; *q != '\0'; q++)
				if (*q == '\\' && q[1] != '\\' && q[1] != 'n')
					return ex_fail(e, ln, "bad escape in "
					    "HELP");
				else if (*q == '\\')
					q++;
			if (ex_find_family(e, name) != SIZE_MAX)
				return ex_fail(e, ln, "family %s declared "
				    "twice (or not contiguous)", name);
			if (e->nfam == EX_MAXFAM)
				return ex_fail(e, ln, "too many families");
			cur = e->nfam++;
			snprintf(e->fam[cur].f_name, sizeof(e->fam[0].f_name),
			    "%s", name);
			continue;
		}
		if (strncmp(line, "# TYPE ", 7) == 0) {
			q = line + 7;
			if (ex_name(&q, name, sizeof(name), 1) == -1 ||
			    *q++ != ' ')
				return ex_fail(e, ln, "bad TYPE");
			if (cur == SIZE_MAX || strcmp(e->fam[cur].f_name,
			    name) != 0 || e->fam[cur].f_typed)
				return ex_fail(e, ln, "TYPE %s not right after "
				    "its HELP", name);
			if (strcmp(q, "counter") != 0 &&
			    strcmp(q, "gauge") != 0 &&
			    strcmp(q, "histogram") != 0 &&
			    strcmp(q, "summary") != 0 &&
			    strcmp(q, "untyped") != 0)
				return ex_fail(e, ln, "unknown type %s", q);
			snprintf(e->fam[cur].f_type, sizeof(e->fam[0].f_type),
			    "%s", q);
			e->fam[cur].f_typed = 1;
			continue;
		}
		if (line[0] == '#')
			return ex_fail(e, ln, "stray comment");
		if (cur == SIZE_MAX || !e->fam[cur].f_typed)
			return ex_fail(e, ln, "sample before HELP and TYPE");
		if (ex_sample_line(e, ln, line, cur) == -1)
			return -1;
	}
	if (cur != SIZE_MAX && !e->fam[cur].f_typed)
		return ex_fail(e, ln, "HELP without TYPE at the end");
	return ex_histograms(e);
}

static void
ex_free(struct expo *e)
{
	free(e->smp);
	e->smp = NULL;
}

/* The value of series <name>{<labels> as written}; 0 when absent. */
static double
ex_get(const struct expo *e, const char *name, const char *labels)
{
	size_t	i;

	for (i = 0; i < e->nsmp; i++)
		if (strcmp(e->smp[i].s_name, name) == 0 &&
		    strcmp(e->smp[i].s_labels, labels) == 0)
			return e->smp[i].s_value;
	return 0;
}

static int
ex_has(const struct expo *e, const char *name, const char *labels)
{
	size_t	i;

	for (i = 0; i < e->nsmp; i++)
		if (strcmp(e->smp[i].s_name, name) == 0 &&
		    strcmp(e->smp[i].s_labels, labels) == 0)
			return 1;
	return 0;
}

/* Render the real exposition and parse it; fails the test if broken. */
static void
render_parse(struct expo *e)
{
	struct evbuffer	*b;
	char		*text;
	size_t		 len;

	b = evbuffer_new();
	ck_assert_ptr_nonnull(b);
	met_render(b);
	len = evbuffer_get_length(b);
	text = malloc(len + 1);
	ck_assert_ptr_nonnull(text);
	evbuffer_remove(b, text, len);
	text[len] = '\0';
	evbuffer_free(b);
	ck_assert_msg(strlen(text) == len, "NUL byte in the exposition");
	ck_assert_msg(ex_parse(text, e) == 0, "%s\n%s", e->err, text);
	free(text);
}

/* ---- the parser refuses what it must -------------------------------- */

struct bad_case {
	const char	*bc_what;
	const char	*bc_text;
};

static const struct bad_case bad_cases[] = {
	{ "empty", "" },
	{ "no final newline", "# HELP a_total x\n# TYPE a_total counter\n"
	    "a_total 1" },
	{ "no HELP/TYPE", "a_total 1\n" },
	{ "TYPE without HELP", "# TYPE a_total counter\na_total 1\n" },
	{ "HELP without TYPE", "# HELP a_total x\na_total 1\n" },
	{ "other family's sample", "# HELP a_total x\n# TYPE a_total "
	    "counter\nb_total 1\n" },
	{ "family twice", "# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n"
	    "# TYPE b gauge\nb 1\n# HELP a x\n# TYPE a gauge\n" },
	{ "unknown type", "# HELP a x\n# TYPE a gaug\na 1\n" },
	{ "bad name", "# HELP a x\n# TYPE a gauge\n1a 1\n" },
	{ "bad label name", "# HELP a x\n# TYPE a gauge\na{1x=\"v\"} 1\n" },
	{ "unquoted label", "# HELP a x\n# TYPE a gauge\na{x=v} 1\n" },
	{ "bad escape", "# HELP a x\n# TYPE a gauge\na{x=\"\\t\"} 1\n" },
	{ "label twice", "# HELP a x\n# TYPE a gauge\na{x=\"1\",x=\"2\"} "
	    "1\n" },
	{ "trailing comma", "# HELP a x\n# TYPE a gauge\na{x=\"1\",} 1\n" },
	{ "bad value", "# HELP a x\n# TYPE a gauge\na 1.\n" },
	{ "hex value", "# HELP a x\n# TYPE a gauge\na 0x10\n" },
	{ "timestamp", "# HELP a x\n# TYPE a gauge\na 1 1700000000000\n" },
	{ "negative counter", "# HELP a_total x\n# TYPE a_total counter\n"
	    "a_total -1\n" },
	{ "duplicate series", "# HELP a x\n# TYPE a gauge\na{x=\"1\"} 1\n"
	    "a{x=\"1\"} 2\n" },
	{ "blank line", "# HELP a x\n# TYPE a gauge\n\na 1\n" },
	{ "CRLF", "# HELP a x\r\n# TYPE a gauge\r\na 1\r\n" },
	{ "not cumulative", "# HELP h x\n# TYPE h histogram\n"
	    "h_bucket{le=\"1\"} 3\nh_bucket{le=\"2\"} 2\n"
	    "h_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 3\n" },
	{ "le not ascending", "# HELP h x\n# TYPE h histogram\n"
	    "h_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 2\n"
	    "h_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 3\n" },
	{ "+Inf != count", "# HELP h x\n# TYPE h histogram\n"
	    "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\n"
	    "h_count 4\n" },
	{ "no +Inf", "# HELP h x\n# TYPE h histogram\n"
	    "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n" },
	{ "no _count", "# HELP h x\n# TYPE h histogram\n"
	    "h_bucket{le=\"+Inf\"} 1\nh_sum 1\n" },
	{ "no _sum", "# HELP h x\n# TYPE h histogram\n"
	    "h_bucket{le=\"+Inf\"} 1\nh_count 1\n" },
	{ "bucket without le", "# HELP h x\n# TYPE h histogram\n"
	    "h_bucket 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n" },
	{ "foreign sample in histogram", "# HELP h x\n# TYPE h histogram\n"
	    "h 1\n" },
};

START_TEST(test_parser_rejects)
{
	const struct bad_case	*bc = &bad_cases[_i];
	struct expo		 e;

	ck_assert_msg(ex_parse(bc->bc_text, &e) == -1,
	    "accepted: %s", bc->bc_what);
	ex_free(&e);
}
END_TEST

START_TEST(test_parser_accepts)
{
	struct expo	e;
	const char	*ok =
	    "# HELP a_total Help with \\\\ and \\n escapes.\n"
	    "# TYPE a_total counter\n"
	    "a_total{x=\"q\\\"uo\\\\te\\n\",y=\"\"} 1.5e3\n"
	    "# HELP h x\n# TYPE h histogram\n"
	    "h_bucket{k=\"a\",le=\"0.5\"} 1\n"
	    "h_bucket{k=\"a\",le=\"+Inf\"} 2\nh_sum{k=\"a\"} 0.7\n"
	    "h_count{k=\"a\"} 2\n"
	    "h_bucket{k=\"b\",le=\"0.5\"} 0\n"
	    "h_bucket{k=\"b\",le=\"+Inf\"} 0\nh_sum{k=\"b\"} 0\n"
	    "h_count{k=\"b\"} 0\n"
	    "# HELP g x\n# TYPE g gauge\ng -Inf\n";

	ck_assert_msg(ex_parse(ok, &e) == 0, "%s", e.err);
	ck_assert_uint_eq(e.nfam, 3);
	ck_assert(ex_get(&e, "a_total",
	    "x=\"q\\\"uo\\\\te\\n\",y=\"\"") == 1500);
	ex_free(&e);
}
END_TEST

/* ---- the real exposition --------------------------------------------- */

static const struct {
	const char	*name;
	const char	*type;
} families[] = {
	{ "airlock_requests_total",		"counter" },
	{ "airlock_request_duration_seconds",	"histogram" },
	{ "airlock_connections_active",		"gauge" },
	{ "airlock_tls_handshakes_total",	"counter" },
	{ "airlock_cert_cache_hits_total",	"counter" },
	{ "airlock_cert_cache_misses_total",	"counter" },
	{ "airlock_cert_cache_entries",		"gauge" },
	{ "airlock_bytes_in_total",		"counter" },
	{ "airlock_bytes_out_total",		"counter" },
	{ "airlock_sandboxes",			"gauge" },
	{ "airlock_spend_usd",			"gauge" },
	{ "airlock_spend_reserved_usd",		"gauge" },
	{ "airlock_llm_tokens_total",		"counter" },
	{ "airlock_llm_requests_total",		"counter" },
	{ "airlock_llm_cost_usd_total",		"counter" },
	{ "airlock_audit_write_errors_total",	"counter" },
	{ "airlock_audit_available",		"gauge" },
	{ "airlock_reloads_total",		"counter" },
	{ "airlock_canary_failures_total",	"counter" },
	{ "airlock_would_deny_total",		"counter" },
	{ "airlock_approval_holds_total",	"counter" },
	{ "airlock_secret_mints_total",		"counter" },
	{ "airlock_secret_mint_failures_total",	"counter" },
	{ "airlock_build_info",			"gauge" },
	{ "airlock_start_time_seconds",		"gauge" },
};

START_TEST(test_families)
{
	struct expo	e;
	size_t		i, f;

	render_parse(&e);
	ck_assert_uint_eq(e.nfam, sizeof(families) / sizeof(families[0]));
	for (i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		f = ex_find_family(&e, families[i].name);
		ck_assert_msg(f != SIZE_MAX, "no family %s", families[i].name);
		ck_assert_str_eq(e.fam[f].f_type, families[i].type);
	}
	/* the always-present series */
	ck_assert(ex_has(&e, "airlock_requests_total",
	    "decision=\"allow\",reason=\"none\""));
	ck_assert(ex_has(&e, "airlock_reloads_total", "outcome=\"ok\""));
	ck_assert(ex_has(&e, "airlock_reloads_total", "outcome=\"error\""));
	ck_assert(ex_get(&e, "airlock_build_info",
	    "version=\"" PACKAGE_VERSION "\"") == 1);
	ck_assert(ex_get(&e, "airlock_start_time_seconds", "") > 1.7e9);
	ck_assert(ex_get(&e, "airlock_audit_available", "") == 1);
	ex_free(&e);
}
END_TEST

#define REQ(d, r)	"decision=\"" d "\",reason=\"" r "\""

START_TEST(test_requests)
{
	static const struct {
		const char	*labels;
		double		 delta;
	} want[] = {
		{ REQ("allow", "none"),				2 },
		{ REQ("allow", "upstream_timeout"),		1 },
		{ REQ("deny", "denied"),			3 },
		{ REQ("deny", "proxy_auth_required"),		1 },
		{ REQ("deny", "budget_exceeded"),		1 },
		{ REQ("deny", "version_not_supported"),		1 },
		{ REQ("deny", "other"),				2 },
		{ REQ("deny", "none"),				0 },
	};
	struct expo	a, b;
	uint64_t	total;
	size_t		i;

	render_parse(&a);
	total = met_requests_total();
	met_request(1, AUD_R_NONE, 1000, 100, 40);
	met_request(1, AUD_R_CLIENT_CLOSED, 2000, 200, 60);
	met_request(1, AUD_R_UPSTREAM_TIMEOUT, 30000000, 150, 10);
	met_request(0, AUD_R_DENIED, 10, 120, 50);
	met_request(0, AUD_R_DENIED, 10, 0, 0);
	met_request(0, AUD_R_DENIED, 10, 0, 0);
	met_request(0, AUD_R_PROXY_AUTH_REQUIRED, 10, 0, 0);
	met_request(0, AUD_R_BUDGET_EXCEEDED, 10, 0, 0);
	met_request(0, AUD_R_VERSION_NOT_SUPPORTED, 10, 0, 0);
	met_request(0, (enum aud_reason)9999, 10, 0, 0); /* other */
	met_request(0, AUD_R_CUT, 10, 0, 0);	/* other */
	render_parse(&b);
	ck_assert_uint_eq(met_requests_total() - total, 11);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(ex_get(&b, "airlock_requests_total",
		    want[i].labels) - ex_get(&a, "airlock_requests_total",
		    want[i].labels) == want[i].delta, "%s: %g -> %g, want +%g",
		    want[i].labels, ex_get(&a, "airlock_requests_total",
		    want[i].labels), ex_get(&b, "airlock_requests_total",
		    want[i].labels), want[i].delta);
	/* a caller's odd code never becomes a label value */
	for (i = 0; i < b.nsmp; i++)
		ck_assert_msg(strstr(b.smp[i].s_labels, "no_such") == NULL,
		    "%s", b.smp[i].s_labels);
	ck_assert(ex_get(&b, "airlock_bytes_in_total", "") -
	    ex_get(&a, "airlock_bytes_in_total", "") == 570);
	ck_assert(ex_get(&b, "airlock_bytes_out_total", "") -
	    ex_get(&a, "airlock_bytes_out_total", "") == 160);
	ck_assert(ex_get(&b, "airlock_request_duration_seconds_count", "") -
	    ex_get(&a, "airlock_request_duration_seconds_count", "") == 11);
	ex_free(&a);
	ex_free(&b);
}
END_TEST

START_TEST(test_histogram)
{
	static const struct {
		const char	*le;
		double		 delta;	/* cumulative */
	} want[] = {
		{ "0.001",	2 },	/* 0 and exactly 1 ms: le is <= */
		{ "0.005",	3 },	/* 1.001 ms */
		{ "0.01",	3 },
		{ "0.025",	4 },	/* 25 ms */
		{ "1",		5 },	/* 1 s */
		{ "2.5",	5 },
		{ "60",		6 },	/* 60 s */
		{ "+Inf",	8 },	/* 61 s, a day */
	};
	struct expo	a, b;
	char		lab[64];
	double		sum;
	size_t		i;

	render_parse(&a);
	met_request(1, AUD_R_NONE, 0, 0, 0);
	met_request(1, AUD_R_NONE, 1000, 0, 0);
	met_request(1, AUD_R_NONE, 1001, 0, 0);
	met_request(1, AUD_R_NONE, 25000, 0, 0);
	met_request(1, AUD_R_NONE, 1000000, 0, 0);
	met_request(1, AUD_R_NONE, 60000000, 0, 0);
	met_request(1, AUD_R_NONE, 61000000, 0, 0);
	met_request(0, AUD_R_DENIED, 86400000000ULL, 0, 0);
	render_parse(&b);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		snprintf(lab, sizeof(lab), "le=\"%s\"", want[i].le);
		ck_assert_msg(ex_get(&b,
		    "airlock_request_duration_seconds_bucket", lab) -
		    ex_get(&a, "airlock_request_duration_seconds_bucket",
		    lab) == want[i].delta, "bucket %s", want[i].le);
	}
	sum = ex_get(&b, "airlock_request_duration_seconds_sum", "") -
	    ex_get(&a, "airlock_request_duration_seconds_sum", "");
	ck_assert_msg(fabs(sum - 86522.027001) < 1e-6, "sum %f", sum);
	ck_assert(ex_get(&b, "airlock_request_duration_seconds_count", "") -
	    ex_get(&a, "airlock_request_duration_seconds_count", "") == 8);
	ex_free(&a);
	ex_free(&b);
}
END_TEST

START_TEST(test_reloads)
{
	struct expo	a, b;

	render_parse(&a);
	met_reload(1);
	met_reload(0);
	met_reload(0);
	met_reload(1);
	met_reload(1);
	render_parse(&b);
	ck_assert(ex_get(&b, "airlock_reloads_total", "outcome=\"ok\"") -
	    ex_get(&a, "airlock_reloads_total", "outcome=\"ok\"") == 3);
	ck_assert(ex_get(&b, "airlock_reloads_total", "outcome=\"error\"") -
	    ex_get(&a, "airlock_reloads_total", "outcome=\"error\"") == 2);
	ex_free(&a);
	ex_free(&b);
}
END_TEST

/* Concurrent writers: nothing lost with relaxed atomics. */
#define THR_N		4
#define THR_REQS	20000

static void *
writer(void *arg)
{
	int	i;

	(void)arg;
	for (i = 0; i < THR_REQS; i++)
		met_request(i % 2, i % 2 ? AUD_R_NONE : AUD_R_DENIED,
		    (uint64_t)i, 1, 2);
	return NULL;
}

START_TEST(test_threads)
{
	pthread_t	t[THR_N];
	struct expo	a, b;
	int		i;

	render_parse(&a);
	for (i = 0; i < THR_N; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, writer, NULL), 0);
	/* rendering while they write still parses (+Inf = _count) */
	render_parse(&b);
	ex_free(&b);
	for (i = 0; i < THR_N; i++)
		pthread_join(t[i], NULL);
	render_parse(&b);
	ck_assert(ex_get(&b, "airlock_request_duration_seconds_count", "") -
	    ex_get(&a, "airlock_request_duration_seconds_count", "") ==
	    THR_N * THR_REQS);
	ck_assert(ex_get(&b, "airlock_requests_total", REQ("deny", "denied")) -
	    ex_get(&a, "airlock_requests_total", REQ("deny", "denied")) ==
	    THR_N * THR_REQS / 2);
	ck_assert(ex_get(&b, "airlock_bytes_out_total", "") -
	    ex_get(&a, "airlock_bytes_out_total", "") == 2 * THR_N * THR_REQS);
	ex_free(&a);
	ex_free(&b);
}
END_TEST

START_TEST(test_spend_by_sandbox)
{
	static const char yaml[] =
	    "state_dir: /tmp/airlock-met-unused\n"
	    "policies:\n"
	    "  - name: p\n"
	    "    rules: [{host: \"a.test\"}]\n"
	    "sandboxes:\n"
	    "  - {id: s1, policy: p, token: \"literal:t1\"}\n"
	    "  - {id: s.2, policy: p, token: \"literal:t2\"}\n";
	struct cfg	*cfg;
	struct expo	 e;
	char		 why[128];
	int		 nerr = 0, retry;

	cfg = cfg_load_buffer("m.yaml", yaml, strlen(yaml), stderr, &nerr);
	ck_assert_ptr_nonnull(cfg);
	sbx_sync_config(cfg);
	ck_assert_int_eq(bud_admit("s1", NULL, 2500000, why, sizeof(why),
	    &retry), BUD_OK);
	bud_settle("s1", 2500000, 1234567);
	ck_assert_int_eq(bud_admit("s1", NULL, 300, why, sizeof(why),
	    &retry), BUD_OK);
	render_parse(&e);
	ck_assert(ex_get(&e, "airlock_sandboxes", "") == 2);
	ck_assert(ex_get(&e, "airlock_spend_usd", "sandbox=\"s1\"") ==
	    1.234567);
	ck_assert(ex_get(&e, "airlock_spend_reserved_usd",
	    "sandbox=\"s1\"") == 0.0003);
	/* a sandbox without budget activity yet still has its series */
	ck_assert(ex_has(&e, "airlock_spend_usd", "sandbox=\"s.2\""));
	ck_assert(ex_get(&e, "airlock_spend_usd", "sandbox=\"s.2\"") == 0);
	ex_free(&e);
	bud_settle("s1", 300, 0);
	sbx_shutdown();
	cfg_unref(cfg);
}
END_TEST

/* Tokens by sandbox, model and kind; the label bounds. */
START_TEST(test_llm_tokens)
{
	struct expo	e;
	char		sb[32], model[32];
	size_t		i, n;

	met_llm_usage("m1", "gpt-4o", 100, 30, 10, 5, 1500);
	met_llm_usage("m1", "gpt-4o", 1, 0, 0, 2, 1);
	met_llm_usage("m1", "we\"ird\\", 7, 0, 0, 0, 0);
	met_llm_usage("m1", "", 3, 0, 0, 0, 0);
	for (i = 0; i < MET_LLM_MODELS + 10; i++) {
		snprintf(model, sizeof(model), "model-%zu", i);
		met_llm_usage("m2", model, 1, 0, 0, 1, 1);
	}
	render_parse(&e);
#define TOK(sbx, m, k) "sandbox=\"" sbx "\",model=\"" m "\",kind=\"" k "\""
	ck_assert(ex_get(&e, "airlock_llm_tokens_total",
	    TOK("m1", "gpt-4o", "input")) == 61);
	ck_assert(ex_get(&e, "airlock_llm_tokens_total",
	    TOK("m1", "gpt-4o", "cached")) == 30);
	ck_assert(ex_get(&e, "airlock_llm_tokens_total",
	    TOK("m1", "gpt-4o", "cache_write")) == 10);
	ck_assert(ex_get(&e, "airlock_llm_tokens_total",
	    TOK("m1", "gpt-4o", "output")) == 7);
	ck_assert(ex_get(&e, "airlock_llm_tokens_total",
	    TOK("m1", "unknown", "input")) == 3);
	ck_assert(ex_has(&e, "airlock_llm_tokens_total",
	    TOK("m1", "we\\\"ird\\\\", "input")));
	ck_assert(ex_get(&e, "airlock_llm_requests_total",
	    "sandbox=\"m1\",model=\"gpt-4o\"") == 2);
	ck_assert(ex_get(&e, "airlock_llm_cost_usd_total",
	    "sandbox=\"m1\",model=\"gpt-4o\"") == 0.001501);
	/* MET_LLM_MODELS per sandbox, then "other" */
	ck_assert(ex_get(&e, "airlock_llm_requests_total",
	    "sandbox=\"m2\",model=\"other\"") == 10);
	ck_assert(!ex_has(&e, "airlock_llm_requests_total",
	    "sandbox=\"m2\",model=\"model-40\""));
	ex_free(&e);
	/* MET_LLM_SERIES pairs in all, then sandbox="other" */
	for (i = 0; i < MET_LLM_SERIES + 5; i++) {
		snprintf(sb, sizeof(sb), "many-%zu", i);
		met_llm_usage(sb, "x", 1, 0, 0, 1, 1);
	}
	render_parse(&e);
	for (i = n = 0; i < e.nsmp; i++)
		n += strcmp(e.smp[i].s_name, "airlock_llm_requests_total") == 0;
	ck_assert_uint_le(n, MET_LLM_SERIES + 1);
	ck_assert(ex_get(&e, "airlock_llm_requests_total",
	    "sandbox=\"other\",model=\"other\"") >= 5);
#undef TOK
	ex_free(&e);
}
END_TEST

Suite *
suite_metrics(void)
{
	Suite	*s = suite_create("metrics");
	TCase	*tc;

	tc = tcase_create("parser");
	tcase_add_loop_test(tc, test_parser_rejects, 0,
	    sizeof(bad_cases) / sizeof(bad_cases[0]));
	tcase_add_test(tc, test_parser_accepts);
	suite_add_tcase(s, tc);

	tc = tcase_create("exposition");
	tcase_add_test(tc, test_families);
	tcase_add_test(tc, test_requests);
	tcase_add_test(tc, test_histogram);
	tcase_add_test(tc, test_reloads);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_spend_by_sandbox);
	tcase_add_test(tc, test_llm_tokens);
	suite_add_tcase(s, tc);
	return s;
}
