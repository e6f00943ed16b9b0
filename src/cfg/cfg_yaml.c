/*
 * libyaml glue: load the document (nodes keep their marks), print problems
 * as FILE:LINE:COL, and walk mappings against keyword tables so that every
 * section gets the same unknown/later/duplicate/required checks.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <yaml.h>

#include "cfg/cfg_walk.h"
#include "util/log.h"

#define CFG_MAX_KEYS	32		/* entries in one keyword table */

static void	cfg_verr(struct cfg_parse *, const yaml_mark_t *,
		    const char *, va_list)
		    __attribute__((format(printf, 3, 0)));

static void
cfg_verr(struct cfg_parse *cp, const yaml_mark_t *m, const char *fmt,
    va_list ap)
{
	char	 msg[1024];
	char	*p;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* Values are echoed: keep one problem on one line. */
	for (p = msg; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (cp->cp_errs != NULL) {
		if (m != NULL)
			fprintf(cp->cp_errs, "%s:%zu:%zu: %s\n", cp->cp_file,
			    m->line + 1, m->column + 1, msg);
		else
			fprintf(cp->cp_errs, "%s: %s\n", cp->cp_file, msg);
	}
	cp->cp_errors++;		/* keep going; report them all */
}

void
cfg_err(struct cfg_parse *cp, const yaml_node_t *n, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	cfg_verr(cp, &n->start_mark, fmt, ap);
	va_end(ap);
}

void
cfg_err_mark(struct cfg_parse *cp, const yaml_mark_t *m, const char *fmt,
    ...)
{
	va_list	ap;

	va_start(ap, fmt);
	cfg_verr(cp, m, fmt, ap);
	va_end(ap);
}

/* A problem of the file as a whole: "FILE: message". */
void
cfg_err_file(struct cfg_parse *cp, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	cfg_verr(cp, NULL, fmt, ap);
	va_end(ap);
}

static void
cfg_yaml_error(struct cfg_parse *cp, const yaml_parser_t *yp,
    const char *buf, size_t len)
{
	yaml_mark_t	 m;
	const char	*problem;
	size_t		 i;

	problem = yp->problem != NULL ? yp->problem : "syntax error";
	m = yp->problem_mark;
	if (yp->error == YAML_READER_ERROR) {
		/* The reader only knows the byte offset: count lines. */
		memset(&m, 0, sizeof(m));
		for (i = 0; i < yp->problem_offset && i < len; i++) {
			if (buf[i] == '\n') {
				m.line++;
				m.column = 0;
			} else
				m.column++;
		}
	}
	if (yp->context != NULL)
		cfg_err_mark(cp, &m, "YAML syntax error: %s %s started at "
		    "%zu:%zu", problem, yp->context,
		    yp->context_mark.line + 1, yp->context_mark.column + 1);
	else
		cfg_err_mark(cp, &m, "YAML syntax error: %s", problem);
}

/*
 * Parse <buf> into cp->cp_doc. Returns the root node, or NULL for an empty
 * file or after reporting a syntax error (cp_errors tells which).
 */
yaml_node_t *
cfg_doc_load(struct cfg_parse *cp, const char *buf, size_t len)
{
	yaml_parser_t	 yp;
	yaml_document_t	 next;
	yaml_node_t	*root, *extra;

	if (!yaml_parser_initialize(&yp)) {
		cfg_err_file(cp, "cannot initialise the YAML parser");
		return NULL;
	}
	yaml_parser_set_input_string(&yp, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&yp, &cp->cp_doc)) {
		cfg_yaml_error(cp, &yp, buf, len);
		yaml_parser_delete(&yp);
		return NULL;
	}
	cp->cp_have_doc = 1;
	root = yaml_document_get_root_node(&cp->cp_doc);
	if (root != NULL) {
		/* A second document would be silently ignored otherwise. */
		if (!yaml_parser_load(&yp, &next))
			cfg_yaml_error(cp, &yp, buf, len);
		else {
			if ((extra = yaml_document_get_root_node(&next)) !=
			    NULL)
				cfg_err(cp, extra, "only one YAML document is "
				    "allowed in a configuration file");
			yaml_document_delete(&next);
		}
	}
	yaml_parser_delete(&yp);
	return root;
}

void
cfg_doc_free(struct cfg_parse *cp)
{
	if (cp->cp_have_doc)
		yaml_document_delete(&cp->cp_doc);
	cp->cp_have_doc = 0;
}

/*
 * Every node reached goes through here: aliases can make a small file
 * expand into billions of nodes, so the walk has a budget. Returns NULL
 * once it is spent (reported once).
 */
yaml_node_t *
cfg_node(struct cfg_parse *cp, yaml_node_item_t id)
{
	yaml_node_t	*n;

	if (cp->cp_toobig)
		return NULL;
	if ((n = yaml_document_get_node(&cp->cp_doc, id)) == NULL)
		return NULL;
	if (++cp->cp_visits > CFG_MAX_VISITS) {
		cp->cp_toobig = 1;
		cfg_err(cp, n, "the configuration expands to more than %d "
		    "nodes (aliases?)", CFG_MAX_VISITS);
		return NULL;
	}
	return n;
}

const char *
cfg_node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_SCALAR_NODE:
		return "a single value";
	default:
		return "empty";
	}
}

/* Plain null, ~ or nothing at all: the key takes its default. */
int
cfg_is_null(const yaml_node_t *n)
{
	const char	*v;

	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	v = (const char *)n->data.scalar.value;
	return *v == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
	    strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

/*
 * The text of a scalar, or NULL after reporting "<what> must be <want>".
 * <what> is free text naming the value, e.g. "\"state_dir\"".
 */
const char *
cfg_scalar(struct cfg_parse *cp, yaml_node_t *n, const char *what,
    const char *want)
{
	if (n->type != YAML_SCALAR_NODE) {
		cfg_err(cp, n, "%s must be %s, not %s", what,
		    want != NULL ? want : "a string", cfg_node_kind(n));
		return NULL;
	}
	/* "\0" in a quoted scalar would cut C strings short. */
	if (memchr(n->data.scalar.value, '\0', n->data.scalar.length) !=
	    NULL) {
		cfg_err(cp, n, "%s contains a NUL character", what);
		return NULL;
	}
	return (const char *)n->data.scalar.value;
}

size_t
cfg_seq_len(const yaml_node_t *n)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return 0;
	return (size_t)(n->data.sequence.items.top -
	    n->data.sequence.items.start);
}

int
cfg_want_seq(struct cfg_parse *cp, yaml_node_t *n, const char *what)
{
	if (n->type == YAML_SEQUENCE_NODE)
		return 0;
	cfg_err(cp, n, "%s must be a list, not %s", what, cfg_node_kind(n));
	return -1;
}

int
cfg_want_map(struct cfg_parse *cp, yaml_node_t *n, const char *what)
{
	if (n->type == YAML_MAPPING_NODE)
		return 0;
	cfg_err(cp, n, "%s must be a mapping, not %s", what, cfg_node_kind(n));
	return -1;
}

/* Item <i> of a sequence; NULL when out of range or over budget. */
yaml_node_t *
cfg_seq_at(struct cfg_parse *cp, yaml_node_t *n, size_t i)
{
	if (i >= cfg_seq_len(n))
		return NULL;
	return cfg_node(cp, n->data.sequence.items.start[i]);
}

/*
 * The key node of the first pair of mapping <map> named <name>, with its
 * value in *val (may be NULL); NULL when there is none. For checks after
 * cfg_walk_map(), which has already counted these nodes: they are not
 * counted again.
 */
yaml_node_t *
cfg_map_key(struct cfg_parse *cp, yaml_node_t *map, const char *name,
    yaml_node_t **val)
{
	yaml_node_pair_t	*pair;
	yaml_node_t		*key;

	if (map->type != YAML_MAPPING_NODE || cp->cp_toobig)
		return NULL;
	for (pair = map->data.mapping.pairs.start;
	    pair < map->data.mapping.pairs.top; pair++) {
		if ((key = yaml_document_get_node(&cp->cp_doc, pair->key)) ==
		    NULL || key->type != YAML_SCALAR_NODE ||
		    key->data.scalar.length != strlen(name) ||
		    memcmp(key->data.scalar.value, name,
		    key->data.scalar.length) != 0)
			continue;
		if (val != NULL)
			*val = yaml_document_get_node(&cp->cp_doc,
			    pair->value);
		return key;
	}
	return NULL;
}

/*
 * The node-type flags of <k> against its value: the one place that says
 * "\"<key>\" must be a mapping/a list/<want>". -1 after reporting.
 */
static int
cfg_key_type_ok(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v)
{
	char	what[80];

	switch (k->k_flags & CFG_T_MASK) {
	case 0:
		return 0;
	case CFG_T_SCALAR:	/* the common case, without formatting */
		if (v->type == YAML_SCALAR_NODE &&
		    memchr(v->data.scalar.value, '\0', v->data.scalar.length) ==
		    NULL)
			return 0;
		break;
	case CFG_T_SEQ:
		if (v->type == YAML_SEQUENCE_NODE)
			return 0;
		break;
	case CFG_T_MAP:
		if (v->type == YAML_MAPPING_NODE)
			return 0;
		break;
	}
	snprintf(what, sizeof(what), "\"%s\"", k->k_name);
	switch (k->k_flags & CFG_T_MASK) {
	case CFG_T_SCALAR:
		return cfg_scalar(cp, v, what, k->k_want) != NULL ? 0 : -1;
	case CFG_T_SEQ:
		return cfg_want_seq(cp, v, what);
	case CFG_T_MAP:
		return cfg_want_map(cp, v, what);
	default:
		fatalx("cfg key \"%s\": one node type at most", k->k_name);
	}
}

/*
 * The text of a scalar the walker has checked (CFG_T_SCALAR, so no NUL
 * inside); a table row without the flag is a broken invariant.
 */
const char *
cfg_str(const yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE)
		fatalx("cfg_str: not a scalar (a key lacks CFG_T_SCALAR)");
	return (const char *)n->data.scalar.value;
}

/*
 * Check every key of mapping <map> against <keys> and hand each value to
 * its setter with <arg>. <where> names the mapping in messages ("rule"),
 * NULL for the top level. Null values leave the default in place.
 */
void
cfg_walk_map(struct cfg_parse *cp, yaml_node_t *map, const char *where,
    const struct cfg_key *keys, void *arg)
{
	const yaml_node_t	*seen[CFG_MAX_KEYS];
	const struct cfg_key	*k;
	yaml_node_pair_t	*pair;
	yaml_node_t		*key, *val;
	const char		*name, *hint;
	char			 in[64];
	size_t			 i, nkeys;

	if (map->type != YAML_MAPPING_NODE)
		return;
	for (nkeys = 0; keys[nkeys].k_name != NULL; nkeys++)
		;
	if (nkeys > CFG_MAX_KEYS)
		nkeys = CFG_MAX_KEYS;
	memset(seen, 0, sizeof(seen));
	if (where != NULL)
		snprintf(in, sizeof(in), "in %s", where);
	else
		snprintf(in, sizeof(in), "at the top level");

	for (pair = map->data.mapping.pairs.start;
	    pair < map->data.mapping.pairs.top; pair++) {
		if ((key = cfg_node(cp, pair->key)) == NULL ||
		    (val = cfg_node(cp, pair->value)) == NULL)
			return;
		if ((name = cfg_scalar(cp, key, "a key", "a string")) == NULL)
			continue;
		for (i = 0; i < nkeys; i++)
			if (strcmp(keys[i].k_name, name) == 0)
				break;
		if (i == nkeys) {
			if ((hint = cfg_suggest(name, keys)) != NULL)
				cfg_err(cp, key, "unknown key \"%s\" %s "
				    "(did you mean \"%s\"?)", name, in, hint);
			else
				cfg_err(cp, key, "unknown key \"%s\" %s",
				    name, in);
			continue;
		}
		k = &keys[i];
		if (k->k_flags & CFG_K_LATER) {
			cfg_err(cp, key, "key \"%s\" is not supported yet",
			    name);
			continue;
		}
		if (seen[i] != NULL) {
			cfg_err(cp, key, "duplicate key \"%s\" (first at "
			    "%zu:%zu)", name, seen[i]->start_mark.line + 1,
			    seen[i]->start_mark.column + 1);
			continue;
		}
		seen[i] = key;
		if (cfg_is_null(val)) {
			if (k->k_flags & CFG_K_REQUIRED)
				cfg_err(cp, val, "\"%s\" needs a value", name);
			continue;
		}
		if (k->k_flags & CFG_K_NOTE)
			memcpy((char *)arg + k->k_note, &val, sizeof(val));
		if (cfg_key_type_ok(cp, k, val) == -1)
			continue;
		if (k->k_fn != NULL)
			k->k_fn(cp, k, val, arg);
		else
			cfg_walk_map(cp, val, k->k_in != NULL ? k->k_in :
			    k->k_name, k->k_sub, (char *)arg + k->k_off);
		if (cp->cp_toobig)
			return;
	}
	for (i = 0; i < nkeys; i++)
		if ((keys[i].k_flags & CFG_K_REQUIRED) && seen[i] == NULL)
			cfg_err(cp, map, "missing required key \"%s\" %s",
			    keys[i].k_name, in);
}

/* Generic setters: <arg> is the struct, k_off the member. */

void
cfg_set_duration(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;
	char		 max[32];
	uint64_t	 ms;

	s = cfg_str(v);
	if (cfg_parse_duration(s, &ms) == -1) {
		cfg_err(cp, v, "bad duration \"%s\" for \"%s\" (use e.g. "
		    "500ms, 10s, 5m, 24h, 7d)", s, k->k_name);
		return;
	}
	if (ms < k->k_min) {
		cfg_err(cp, v, "\"%s\" must be more than 0", k->k_name);
		return;
	}
	if (k->k_max != 0 && ms > k->k_max) {
		cfg_fmt_duration(k->k_max, max, sizeof(max));
		cfg_err(cp, v, "\"%s\" must be at most %s, not \"%s\"",
		    k->k_name, max, s);
		return;
	}
	memcpy((char *)arg + k->k_off, &ms, sizeof(ms));
}

static int
cfg_get_size(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    uint64_t max, uint64_t *out)
{
	const char	*s;

	s = cfg_str(v);
	if (cfg_parse_size(s, out) == -1 || *out > max) {
		cfg_err(cp, v, "bad size \"%s\" for \"%s\" (use e.g. 512, "
		    "64KiB, 16MiB, 1GiB)", s, k->k_name);
		return -1;
	}
	if (*out < k->k_min) {
		cfg_err(cp, v, "\"%s\" must be at least %llu bytes",
		    k->k_name, (unsigned long long)k->k_min);
		return -1;
	}
	if (k->k_max != 0 && *out > k->k_max) {
		cfg_err(cp, v, "\"%s\" must be at most %llu bytes",
		    k->k_name, (unsigned long long)k->k_max);
		return -1;
	}
	return 0;
}

void
cfg_set_size(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	uint64_t	b;
	size_t		sz;

	if (cfg_get_size(cp, k, v, SIZE_MAX, &b) == -1)
		return;
	sz = (size_t)b;
	memcpy((char *)arg + k->k_off, &sz, sizeof(sz));
}

void
cfg_set_size64(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	uint64_t	b;

	if (cfg_get_size(cp, k, v, UINT64_MAX, &b) == -1)
		return;
	memcpy((char *)arg + k->k_off, &b, sizeof(b));
}

/* A whole number within the key's bounds, <max> when it has none. */
static int
cfg_get_count(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    uint64_t max, uint64_t *out)
{
	const char	*s;
	uint64_t	 n;
	int		 bad;

	s = cfg_str(v);
	if (k->k_max != 0)
		max = k->k_max;
	if ((bad = (cfg_parse_uint(s, max, &n) == -1)) || n < k->k_min) {
		if (k->k_max != 0)
			cfg_err(cp, v, "\"%s\" must be a whole number from "
			    "%llu to %llu, not \"%s\"", k->k_name,
			    (unsigned long long)k->k_min,
			    (unsigned long long)max, s);
		else if (!bad)
			cfg_err(cp, v, "\"%s\" must be at least %llu, not "
			    "\"%s\"", k->k_name,
			    (unsigned long long)k->k_min, s);
		else
			cfg_err(cp, v, "\"%s\" must be a whole number of at "
			    "least %llu, not \"%s\"", k->k_name,
			    (unsigned long long)k->k_min, s);
		return -1;
	}
	*out = n;
	return 0;
}

void
cfg_set_count(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	uint64_t	n;
	size_t		sz;

	if (cfg_get_count(cp, k, v, SIZE_MAX, &n) == -1)
		return;
	sz = (size_t)n;
	memcpy((char *)arg + k->k_off, &sz, sizeof(sz));
}

void
cfg_set_count64(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	uint64_t	n;

	if (cfg_get_count(cp, k, v, UINT64_MAX, &n) == -1)
		return;
	memcpy((char *)arg + k->k_off, &n, sizeof(n));
}

/* A share as "25%" (or a bare 25), from k_min to 100; size_t percent. */
void
cfg_set_percent(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;
	char		 num[8];
	uint64_t	 n;
	size_t		 len, pct;

	s = cfg_str(v);
	len = strlen(s);
	if (len > 0 && s[len - 1] == '%')
		len--;
	if (len == 0 || len >= sizeof(num)) {
		n = 0;
		goto bad;
	}
	memcpy(num, s, len);
	num[len] = '\0';
	if (cfg_parse_uint(num, 100, &n) == -1 || n < k->k_min)
		goto bad;
	pct = (size_t)n;
	memcpy((char *)arg + k->k_off, &pct, sizeof(pct));
	return;
bad:
	cfg_err(cp, v, "\"%s\" must be a percentage from %llu%% to 100%%, "
	    "not \"%s\"", k->k_name, (unsigned long long)k->k_min, s);
}

/* USD as a decimal, stored as uint64_t micro-dollars. */
void
cfg_set_money(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	const char	*s, *why;
	uint64_t	 micro;

	s = cfg_str(v);
	if ((why = cfg_parse_money(s, &micro)) != NULL) {
		cfg_err(cp, v, "bad amount \"%s\" for \"%s\": %s", s,
		    k->k_name, why);
		return;
	}
	memcpy((char *)arg + k->k_off, &micro, sizeof(micro));
}

void
cfg_set_bool(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	const char	*s;
	int		 b;

	s = cfg_str(v);
	if (cfg_parse_bool(s, &b) == -1) {
		cfg_err(cp, v, "\"%s\" must be true or false, not \"%s\"",
		    k->k_name, s);
		return;
	}
	memcpy((char *)arg + k->k_off, &b, sizeof(b));
}
