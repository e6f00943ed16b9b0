/*
 * airlockctl policy replay / policy suggest: local commands over audit
 * files (several, in order: rotated files oldest first; hash-chained or
 * not). Replay judges each recorded request again under a candidate config
 * with the gateway's allowlist code (src/policy/pol_replay.c); suggest
 * writes a policy that allows what was allowed (src/ctl/ctl_suggest.c).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "ctl/ctl.h"
#include "ctl/ctl_policy.h"
#include "policy/pol_replay.h"
#include "util/util.h"

#define RP_EXAMPLES	3	/* request ids kept per group */

static int
jint(struct json_object *o, const char *key)
{
	struct json_object	*v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_int))
		return -1;
	return json_object_get_int(v);
}

static void
arec_from_json(struct json_object *o, struct pol_arec *r)
{
	memset(r, 0, sizeof(*r));
	r->pa_id = ctl_jstr(o, "id");
	r->pa_sandbox = ctl_jstr(o, "sandbox");
	r->pa_mode = ctl_jstr(o, "mode");
	r->pa_proto = ctl_jstr(o, "proto");
	r->pa_method = ctl_jstr(o, "method");
	r->pa_host = ctl_jstr(o, "host");
	r->pa_port = jint(o, "port");
	r->pa_path = ctl_jstr(o, "path");
	r->pa_decision = ctl_jstr(o, "decision");
	r->pa_reason = ctl_jstr(o, "reason");
	r->pa_rule = ctl_jstr(o, "rule");
	r->pa_tls = ctl_jstr(o, "tls");
	r->pa_country = ctl_jstr(o, "country");
}

int
ctl_audit_each(char **files, int nfiles, ctl_audit_fn fn, void *arg)
{
	struct json_object	*o;
	struct pol_arec		 rec;
	char			*line = NULL, where[512];
	size_t			 cap = 0;
	ssize_t			 len;
	unsigned long		 lineno;
	FILE			*f;
	int			 i;

	for (i = 0; i < nfiles; i++) {
		if (strcmp(files[i], "-") == 0)
			f = stdin;	/* zcat audit.jsonl.1.gz | ... - */
		else if ((f = fopen(files[i], "r")) == NULL) {
			ctl_err("%s: %s", files[i], strerror(errno));
			free(line);
			return -1;
		}
		for (lineno = 1; (len = getline(&line, &cap, f)) != -1;
		    lineno++) {
			snprintf(where, sizeof(where), "%.480s:%lu", files[i],
			    lineno);
			while (len > 0 && (line[len - 1] == '\n' ||
			    line[len - 1] == '\r'))
				line[--len] = '\0';
			if (len == 0)
				continue;
			o = json_tokener_parse(line);
			if (o == NULL || !json_object_is_type(o,
			    json_type_object)) {
				json_object_put(o);
				fn(arg, where, NULL);
				continue;
			}
			arec_from_json(o, &rec);
			fn(arg, where, &rec);
			json_object_put(o);
		}
		if (ferror(f)) {
			ctl_err("%s: read error", files[i]);
			if (f != stdin)
				fclose(f);
			free(line);
			return -1;
		}
		if (f != stdin)
			fclose(f);
	}
	free(line);
	return 0;
}

/* Replay: changes grouped by kind, sandbox, host and rule. */

struct rp_group {
	enum pol_replay_kind	 g_kind;
	char			*g_sandbox;
	char			*g_host;
	char			*g_rule;	/* a->d: old rule; d->a: new */
	char			*g_why;		/* a->d: new reason; unjudged:
						   what is missing */
	unsigned long		 g_count;
	char			*g_ex[RP_EXAMPLES];	/* ids, or FILE:LINE */
	size_t			 g_nex;
};

struct rp_state {
	const struct cfg	*s_cfg;
	struct rp_group		*s_groups;
	struct ctl_hmap		 s_index;	/* group key -> s_groups[] */
	size_t			 s_ngroups;
	size_t			 s_cap;
	unsigned long		 s_records;
	unsigned long		 s_same;
	unsigned long		 s_count[POL_RP_UNJUDGED + 1];
};

/* "KIND\x1fA\x1fB\x1fC\x1fD" (NULL as ""): a group's map key. Caller frees. */
static char *
key_join(int kind, const char *a, const char *b, const char *c,
    const char *d)
{
	const char	*part[4] = { a, b, c, d };
	size_t		 len = 16, i;
	char		*key, *p;

	for (i = 0; i < 4; i++)
		len += (part[i] != NULL ? strlen(part[i]) : 0) + 1;
	key = xmalloc(len);
	p = key + snprintf(key, len, "%d", kind);
	for (i = 0; i < 4; i++) {
		*p++ = '\x1f';
		if (part[i] != NULL) {
			memcpy(p, part[i], strlen(part[i]));
			p += strlen(part[i]);
		}
	}
	*p = '\0';
	return key;
}

static struct rp_group *
rp_group_get(struct rp_state *s, enum pol_replay_kind kind,
    const char *sandbox, const char *host, const char *rule, const char *why)
{
	struct rp_group	*g;
	char		*key;
	size_t		 idx;

	/* changes group by sandbox, host and rule (the first reason shown);
	   unjudged lines by why */
	key = key_join((int)kind, sandbox, host, rule,
	    kind == POL_RP_UNJUDGED ? why : NULL);
	if (ctl_hmap_get(&s->s_index, key, &idx, s->s_ngroups)) {
		free(key);
		return &s->s_groups[idx];
	}
	free(key);
	if (s->s_ngroups == s->s_cap) {
		s->s_cap = s->s_cap ? s->s_cap * 2 : 16;
		s->s_groups = xrealloc(s->s_groups,
		    s->s_cap * sizeof(*s->s_groups));
	}
	g = &s->s_groups[s->s_ngroups++];
	memset(g, 0, sizeof(*g));
	g->g_kind = kind;
	g->g_sandbox = xstrdup(sandbox != NULL ? sandbox : "");
	g->g_host = xstrdup(host != NULL ? host : "");
	g->g_rule = xstrdup(rule != NULL ? rule : "");
	g->g_why = xstrdup(why != NULL ? why : "");
	return g;
}

static void
rp_one(void *arg, const char *where, const struct pol_arec *rec)
{
	struct rp_state		*s = arg;
	struct pol_replay_out	 out;
	struct rp_group		*g;
	const char		*rule = NULL, *ex;

	s->s_records++;
	if (rec == NULL) {
		memset(&out, 0, sizeof(out));
		out.po_kind = POL_RP_UNJUDGED;
		snprintf(out.po_why, sizeof(out.po_why), "not a JSON object");
	} else
		pol_replay_judge(s->s_cfg, rec, &out);
	s->s_count[out.po_kind]++;
	if (out.po_kind == POL_RP_SAME)
		return;
	if (out.po_kind == POL_RP_ALLOW_TO_DENY)
		rule = rec->pa_rule;
	else if (out.po_kind == POL_RP_DENY_TO_ALLOW)
		rule = out.po_new_rule;
	if (out.po_kind == POL_RP_UNJUDGED)
		g = rp_group_get(s, out.po_kind, NULL, NULL, NULL, out.po_why);
	else
		g = rp_group_get(s, out.po_kind, rec->pa_sandbox,
		    rec->pa_host, rule, out.po_why);
	g->g_count++;
	/* unjudged lines are named by place: they may have no id */
	ex = out.po_kind == POL_RP_UNJUDGED || rec->pa_id == NULL ? where :
	    rec->pa_id;
	if (g->g_nex < RP_EXAMPLES)
		g->g_ex[g->g_nex++] = xstrdup(ex);
}

static int
rp_group_cmp(const void *pa, const void *pb)
{
	const struct rp_group	*a = pa, *b = pb;
	int			 d;

	if (a->g_kind != b->g_kind)
		return (int)a->g_kind - (int)b->g_kind;
	if ((d = strcmp(a->g_sandbox, b->g_sandbox)) != 0 ||
	    (d = strcmp(a->g_host, b->g_host)) != 0 ||
	    (d = strcmp(a->g_rule, b->g_rule)) != 0)
		return d;
	return strcmp(a->g_why, b->g_why);
}

static const char *
rp_kind_name(enum pol_replay_kind k)
{
	switch (k) {
	case POL_RP_ALLOW_TO_DENY:
		return "allow_to_deny";
	case POL_RP_DENY_TO_ALLOW:
		return "deny_to_allow";
	case POL_RP_UNJUDGED:
		return "not_judged";
	default:
		return "unchanged";
	}
}

static void
rp_print_text(const struct rp_state *s)
{
	static const char	*heads[] = { NULL, "allow -> deny",
	    "deny -> allow", "not judged" };
	const struct rp_group	*g;
	enum pol_replay_kind	 k;
	size_t			 i, e;

	for (k = POL_RP_ALLOW_TO_DENY; k <= POL_RP_UNJUDGED; k++) {
		if (s->s_count[k] == 0)
			continue;
		printf("%s: %lu\n", heads[k], s->s_count[k]);
		for (i = 0; i < s->s_ngroups; i++) {
			g = &s->s_groups[i];
			if (g->g_kind != k)
				continue;
			if (k == POL_RP_UNJUDGED)
				printf("  %lu  %s\n", g->g_count, g->g_why);
			else
				printf("  %lu  sandbox %s  host %s  rule %s\n",
				    g->g_count, g->g_sandbox, g->g_host,
				    g->g_rule[0] != '\0' ? g->g_rule : "-");
			if (k == POL_RP_ALLOW_TO_DENY)
				printf("      now: %s\n", g->g_why);
			printf("      e.g.");
			for (e = 0; e < g->g_nex; e++)
				printf(" %s", g->g_ex[e]);
			printf("\n");
		}
	}
	printf("%lu records: %lu unchanged, %lu allow -> deny, %lu deny -> "
	    "allow, %lu not judged\n", s->s_records, s->s_count[POL_RP_SAME],
	    s->s_count[POL_RP_ALLOW_TO_DENY], s->s_count[POL_RP_DENY_TO_ALLOW],
	    s->s_count[POL_RP_UNJUDGED]);
}

static struct json_object *
rp_group_json(const struct rp_group *g)
{
	struct json_object	*o, *ex;
	size_t			 e;

	o = json_object_new_object();
	if (g->g_kind != POL_RP_UNJUDGED) {
		json_object_object_add(o, "sandbox",
		    json_object_new_string(g->g_sandbox));
		json_object_object_add(o, "host",
		    json_object_new_string(g->g_host));
		json_object_object_add(o, "rule", g->g_rule[0] != '\0' ?
		    json_object_new_string(g->g_rule) : NULL);
	}
	if (g->g_kind != POL_RP_DENY_TO_ALLOW)
		json_object_object_add(o, "reason",
		    json_object_new_string(g->g_why));
	json_object_object_add(o, "count",
	    json_object_new_int64((int64_t)g->g_count));
	ex = json_object_new_array();
	for (e = 0; e < g->g_nex; e++)
		json_object_array_add(ex, json_object_new_string(g->g_ex[e]));
	json_object_object_add(o, g->g_kind == POL_RP_UNJUDGED ? "lines" :
	    "examples", ex);
	return o;
}

static void
rp_print_json(const struct rp_state *s)
{
	struct json_object	*out, *arr[POL_RP_UNJUDGED + 1];
	enum pol_replay_kind	 k;
	size_t			 i;

	out = json_object_new_object();
	json_object_object_add(out, "records",
	    json_object_new_int64((int64_t)s->s_records));
	json_object_object_add(out, "unchanged",
	    json_object_new_int64((int64_t)s->s_count[POL_RP_SAME]));
	for (k = POL_RP_ALLOW_TO_DENY; k <= POL_RP_UNJUDGED; k++) {
		arr[k] = json_object_new_array();
		json_object_object_add(out, rp_kind_name(k), arr[k]);
	}
	for (i = 0; i < s->s_ngroups; i++)
		json_object_array_add(arr[s->s_groups[i].g_kind],
		    rp_group_json(&s->s_groups[i]));
	printf("%s\n", json_object_to_json_string_ext(out,
	    JSON_C_TO_STRING_PLAIN));
	json_object_put(out);
}

static void
rp_free(struct rp_state *s)
{
	size_t	i, e;

	for (i = 0; i < s->s_ngroups; i++) {
		free(s->s_groups[i].g_sandbox);
		free(s->s_groups[i].g_host);
		free(s->s_groups[i].g_rule);
		free(s->s_groups[i].g_why);
		for (e = 0; e < s->s_groups[i].g_nex; e++)
			free(s->s_groups[i].g_ex[e]);
	}
	free(s->s_groups);
	ctl_hmap_free(&s->s_index);
}

/* The "prev" of the first line of <f> (rewound after), into prev[65]. */
static int
first_prev(FILE *f, char prev[65])
{
	struct json_object	*o;
	char			*line = NULL;
	size_t			 cap = 0;
	const char		*v;
	int			 found = 0;

	if (getline(&line, &cap, f) != -1 &&
	    (o = json_tokener_parse(line)) != NULL) {
		if ((v = ctl_jstr(o, "prev")) != NULL && strlen(v) == 64) {
			memcpy(prev, v, 65);
			found = 1;
		}
		json_object_put(o);
	}
	free(line);
	rewind(f);
	return found;
}

/*
 * Hash-chained files are replayed whatever their chain says, but a break
 * is worth a warning: the records may have been altered. Each file must
 * continue the one before it; the first may continue an earlier file.
 */
void
ctl_chain_warn(char **files, int nfiles)
{
	struct aud_verify	 v;
	char			 prev[65];
	int			 i, have_prev = 0;
	FILE			*f;

	for (i = 0; i < nfiles; i++) {
		if (strcmp(files[i], "-") == 0 ||
		    (f = fopen(files[i], "r")) == NULL) {
			have_prev = 0;
			continue;
		}
		if (!have_prev && !first_prev(f, prev)) {
			fclose(f);	/* not hash-chained */
			continue;
		}
		memset(&v, 0, sizeof(v));
		if (aud_verify_file(f, prev, &v) == 1)
			ctl_err("warning: %s:%llu: hash chain broken (%s); "
			    "replayed anyway, see \"airlockctl audit verify\"",
			    files[i], (unsigned long long)v.av_bad_line,
			    v.av_why);
		fclose(f);
		memcpy(prev, v.av_last_hash, sizeof(prev));
		have_prev = v.av_bad_line == 0 && prev[0] != '\0';
	}
}

int
ctl_cmd_policy_replay(struct ctl *c, struct ctl_args *a)
{
	struct rp_state	 s;
	struct cfg	*ncfg;
	int		 nerr = 0, rc;

	if (a->a_config == NULL) {
		ctl_err("policy replay: --config NEW.yaml is required (the "
		    "candidate config)");
		return CTL_USAGE;
	}
	if ((ncfg = cfg_load(a->a_config, stderr, &nerr)) == NULL) {
		ctl_err("%s: %d error%s; nothing replayed", a->a_config, nerr,
		    nerr == 1 ? "" : "s");
		return CTL_USAGE;
	}
	memset(&s, 0, sizeof(s));
	s.s_cfg = ncfg;
	ctl_chain_warn(a->a_pos, a->a_npos);
	if (ctl_audit_each(a->a_pos, a->a_npos, rp_one, &s) == -1) {
		rc = CTL_USAGE;
		goto out;
	}
	if (s.s_ngroups > 0)
		qsort(s.s_groups, s.s_ngroups, sizeof(*s.s_groups),
		    rp_group_cmp);
	if (c->c_json)
		rp_print_json(&s);
	else
		rp_print_text(&s);
	rc = s.s_count[POL_RP_ALLOW_TO_DENY] > 0 ? CTL_FAIL : CTL_OK;
out:
	rp_free(&s);
	cfg_unref(ncfg);
	return rc;
}
