/*
 * airlockctl policy suggest: a policy (YAML) that allows what the audit
 * shows was allowed, one rule per host and port, paths generalised by
 * pol_paths_generalise(); requests the allowlist denied follow as
 * commented candidate rules. Sorted, so the same audit gives the same text.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "cfg/cfg_walk.h"
#include "ctl/ctl.h"
#include "ctl/ctl_policy.h"
#include "policy/pol.h"
#include "policy/pol_replay.h"
#include "util/util.h"

#define SG_DEFAULT_POLICY	"suggested"

/* What was seen of one host and port, allowed or denied. */
struct sg_rule {
	int		  sr_denied;	/* a candidate, printed commented */
	char		 *sr_host;
	int		  sr_port;
	int		  sr_splice;	/* a spliced tunnel was allowed */
	int		  sr_any_path;	/* a tunnel: host and port only */
	int		  sr_no_paths;	/* a double-encoded path was allowed:
					   a rule with paths would 400 it */
	char		**sr_methods;
	size_t		  sr_nmethods;
	char		**sr_paths;
	size_t		  sr_npaths;
	struct ctl_hmap	  sr_pathset;	/* sr_paths, to add each once */
	unsigned long	  sr_count;
};

struct sg_state {
	const char	*s_sandbox;	/* --sandbox, or NULL: all */
	struct sg_rule	*s_rules;
	struct ctl_hmap	 s_index;	/* "D HOST PORT" -> s_rules[] */
	size_t		 s_nrules;
	size_t		 s_cap;
	unsigned long	 s_used;
	unsigned long	 s_skipped;
};

static void
strv_add_unique(char ***v, size_t *n, const char *s)
{
	size_t	i;

	for (i = 0; i < *n; i++)
		if (strcmp((*v)[i], s) == 0)
			return;
	*v = xrealloc(*v, (*n + 1) * sizeof(char *));
	(*v)[(*n)++] = xstrdup(s);
}

static int
has_high_bytes(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s >= 0x80)
			return 1;
	return 0;
}

static struct sg_rule *
sg_rule_get(struct sg_state *s, int denied, const char *host, int port)
{
	struct sg_rule	*r;
	char		 key[300];
	size_t		 idx;

	snprintf(key, sizeof(key), "%d %d %s", denied, port, host);
	if (ctl_hmap_get(&s->s_index, key, &idx, s->s_nrules))
		return &s->s_rules[idx];
	if (s->s_nrules == s->s_cap) {
		s->s_cap = s->s_cap ? s->s_cap * 2 : 16;
		s->s_rules = xrealloc(s->s_rules,
		    s->s_cap * sizeof(*s->s_rules));
	}
	r = &s->s_rules[s->s_nrules++];
	memset(r, 0, sizeof(*r));
	r->sr_denied = denied;
	r->sr_host = xstrdup(host);
	r->sr_port = port;
	return r;
}

static void
sg_add_path(struct sg_rule *r, const char *path)
{
	size_t	idx;

	if (ctl_hmap_get(&r->sr_pathset, path, &idx, r->sr_npaths))
		return;
	r->sr_paths = xrealloc(r->sr_paths, (r->sr_npaths + 1) *
	    sizeof(char *));
	r->sr_paths[r->sr_npaths++] = xstrdup(path);
}

/* An upper-case method token, as rules hold them. */
static int
method_ok(const char *m)
{
	const char	*p;

	if (m == NULL || *m == '\0' || strlen(m) > 32)
		return 0;
	for (p = m; *p != '\0'; p++)
		if (!((*p >= 'A' && *p <= 'Z') || *p == '-' || *p == '_'))
			return 0;
	return 1;
}

/*
 * The glob for <path>: the path itself as rules match it (normalised,
 * every "%2F" read as '/', which rules may not contain). A path the config
 * loader would refuse as a glob ('#', raw non-ASCII, which YAML would not
 * read back as these bytes) is cut before the first such byte and ends in
 * '*', so it is still allowed. Returns 0; 1 for a double-encoded path
 * (a rule with paths answers it 400: the rule must not have paths); -1
 * when it does not normalise.
 */
static int
rule_path(const char *path, char *out, size_t outsz)
{
	char	 norm[POL_PATH_MAX];
	char	*p;

	if (pol_path_normalize(path, strlen(path), norm, sizeof(norm)) == -1 ||
	    pol_path_slash_reading(norm, out, outsz) == -1)
		return -1;
	if (pol_path_double_encoded(out))
		return 1;
	if (cfg_path_glob_check(out) == NULL && !has_high_bytes(out))
		return 0;
	for (p = out; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f ||
		    *p == '#' || *p == '?')
			break;
	if ((size_t)(p - out) + 2 > outsz)
		p = out + 1;
	p[0] = '*';
	p[1] = '\0';
	if (cfg_path_glob_check(out) != NULL)
		snprintf(out, outsz, "/*");
	return 0;
}

static void
sg_one(void *arg, const char *where, const struct pol_arec *rec)
{
	struct sg_state	*s = arg;
	struct sg_rule	*r;
	char		 host[256], path[POL_PATH_MAX];
	int		 allowed, tunnel, pr = 0;

	(void)where;
	if (rec == NULL || rec->pa_sandbox == NULL || rec->pa_host == NULL ||
	    rec->pa_decision == NULL || rec->pa_port <= 0 ||
	    (rec->pa_proto != NULL && strcmp(rec->pa_proto, "dns") == 0))
		return;
	if (s->s_sandbox != NULL && strcmp(s->s_sandbox, rec->pa_sandbox) != 0)
		return;
	/* allowed by the allowlist: allowed, or denied after it (rule) */
	allowed = strcmp(rec->pa_decision, "allow") == 0 ||
	    rec->pa_rule != NULL;
	if (!allowed && !pol_replay_allowlist_reason(rec->pa_reason))
		return;		/* denied for something a rule cannot fix */
	tunnel = rec->pa_proto != NULL && strcmp(rec->pa_proto, "tunnel") ==
	    0 && rec->pa_path == NULL;
	if (pol_host_normalize(rec->pa_host, host, sizeof(host)) == -1 ||
	    (!tunnel && (!method_ok(rec->pa_method) || rec->pa_path == NULL ||
	    (pr = rule_path(rec->pa_path, path, sizeof(path))) == -1))) {
		s->s_skipped++;
		return;
	}
	s->s_used++;
	r = sg_rule_get(s, !allowed, host, rec->pa_port);
	r->sr_count++;
	if (tunnel) {
		r->sr_any_path = 1;
		if (rec->pa_tls != NULL && strcmp(rec->pa_tls, "splice") == 0)
			r->sr_splice = 1;
		return;
	}
	strv_add_unique(&r->sr_methods, &r->sr_nmethods, rec->pa_method);
	if (pr == 1)
		r->sr_no_paths = 1;
	else
		sg_add_path(r, path);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Allowed rules first, then candidates; each by host, then port. */
static int
sg_rule_cmp(const void *pa, const void *pb)
{
	const struct sg_rule	*a = pa, *b = pb;
	int			 d;

	if (a->sr_denied != b->sr_denied)
		return a->sr_denied - b->sr_denied;
	if ((d = strcmp(a->sr_host, b->sr_host)) != 0)
		return d;
	return a->sr_port - b->sr_port;
}

/* A YAML single-quoted scalar: only "'" needs escaping (doubled). */
static void
put_quoted(const char *s)
{
	putchar('\'');
	for (; *s != '\0'; s++) {
		if (*s == '\'')
			putchar('\'');
		putchar(*s);
	}
	putchar('\'');
}

static void
sg_print_rule(const struct sg_rule *r)
{
	const char	*pre = r->sr_denied ? "      # " : "      ";
	char		**globs;
	size_t		  i, nglobs;

	printf("%s- host: ", pre);
	put_quoted(r->sr_host);
	printf("   # %lu request%s\n", r->sr_count, r->sr_count == 1 ? "" :
	    "s");
	printf("%s  ports: [%d]\n", pre, r->sr_port);
	if (r->sr_splice) {
		/* a spliced rule is judged on host and port alone */
		printf("%s  intercept: false\n", pre);
		return;
	}
	if (r->sr_any_path || r->sr_nmethods == 0)
		return;		/* a tunnel was seen: its inner requests not */
	qsort(r->sr_methods, r->sr_nmethods, sizeof(char *), cmp_str);
	printf("%s  methods: [", pre);
	for (i = 0; i < r->sr_nmethods; i++)
		printf("%s%s", i > 0 ? ", " : "", r->sr_methods[i]);
	printf("]\n");
	if (r->sr_no_paths) {
		printf("%s  # no paths: a double-encoded path was seen, which "
		    "a rule with paths refuses\n", pre);
		return;
	}
	globs = pol_paths_generalise((const char *const *)r->sr_paths,
	    r->sr_npaths, &nglobs);
	printf("%s  paths: [", pre);
	for (i = 0; i < nglobs; i++) {
		if (i > 0)
			printf(", ");
		put_quoted(globs[i]);
	}
	printf("]\n");
	pol_globs_free(globs, nglobs);
}

static void
sg_print(const struct sg_state *s, const char *name)
{
	size_t	i;
	int	candidates = 0;

	printf("# airlockctl policy suggest: %lu request%s%s%s", s->s_used,
	    s->s_used == 1 ? "" : "s", s->s_sandbox != NULL ?
	    " of sandbox " : "", s->s_sandbox != NULL ? s->s_sandbox : "");
	if (s->s_skipped > 0)
		printf(", %lu skipped (no usable method or path)",
		    s->s_skipped);
	printf("\npolicies:\n  - name: ");
	put_quoted(name);
	printf("\n    rules:\n");
	for (i = 0; i < s->s_nrules; i++) {
		if (s->s_rules[i].sr_denied && !candidates) {
			printf("    # Denied by the allowlist; to allow, "
			    "uncomment (remove \"# \"):\n");
			candidates = 1;
		}
		sg_print_rule(&s->s_rules[i]);
	}
	if (s->s_nrules == 0 || s->s_rules[0].sr_denied)
		/* no rule at all is an error: one that never matches */
		printf("      - {host: 'nothing.invalid', ports: [1]}   # "
		    "nothing was allowed\n");
}

static void
sg_free(struct sg_state *s)
{
	size_t	i, k;

	for (i = 0; i < s->s_nrules; i++) {
		free(s->s_rules[i].sr_host);
		for (k = 0; k < s->s_rules[i].sr_nmethods; k++)
			free(s->s_rules[i].sr_methods[k]);
		free(s->s_rules[i].sr_methods);
		for (k = 0; k < s->s_rules[i].sr_npaths; k++)
			free(s->s_rules[i].sr_paths[k]);
		free(s->s_rules[i].sr_paths);
		ctl_hmap_free(&s->s_rules[i].sr_pathset);
	}
	free(s->s_rules);
	ctl_hmap_free(&s->s_index);
}

int
ctl_cmd_policy_suggest(struct ctl *c, struct ctl_args *a)
{
	struct sg_state	 s;
	const char	*name = a->a_policy != NULL ? a->a_policy :
			    SG_DEFAULT_POLICY;
	int		 rc = CTL_OK;

	(void)c;
	if (*name == '\0') {
		ctl_err("policy suggest: --policy wants a name");
		return CTL_USAGE;
	}
	memset(&s, 0, sizeof(s));
	s.s_sandbox = a->a_id;
	ctl_chain_warn(a->a_pos, a->a_npos);
	if (ctl_audit_each(a->a_pos, a->a_npos, sg_one, &s) == -1)
		rc = CTL_USAGE;
	else {
		if (s.s_nrules > 0)
			qsort(s.s_rules, s.s_nrules, sizeof(*s.s_rules),
			    sg_rule_cmp);
		sg_print(&s, name);
	}
	sg_free(&s);
	return rc;
}
