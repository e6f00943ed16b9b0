/*
 * Policy replay: a recorded request judged again under a candidate config
 * with the gateway's allowlist code, and observed paths generalised into
 * globs for "airlockctl policy suggest". Pure, no I/O.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "geo/geo.h"
#include "policy/pol.h"
#include "policy/pol_replay.h"
#include "util/util.h"

static int
starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

int
pol_replay_allowlist_reason(const char *reason)
{
	if (reason == NULL)
		return 0;
	if (strcmp(reason, "the sandbox's policy is not in the running "
	    "config") == 0)
		return 1;
	/* the four shapes pol_deny_reason() writes */
	return (starts_with(reason, "host ") || starts_with(reason, "port ") ||
	    starts_with(reason, "method ") || starts_with(reason, "path ")) &&
	    strstr(reason, " is not allowed") != NULL;
}

static int
unjudged(struct pol_replay_out *out, const char *why, const char *detail)
{
	out->po_kind = POL_RP_UNJUDGED;
	if (detail != NULL)
		snprintf(out->po_why, sizeof(out->po_why), "%.150s: %.200s", why,
		    detail);
	else
		snprintf(out->po_why, sizeof(out->po_why), "%s", why);
	return 0;
}

/* Does an intercepting rule judge requests inside a tunnel further? */
static int
rule_looks_inside(const struct cfg_rule *r)
{
	return r->r_intercept && (r->r_nmethods > 0 || r->r_npaths > 0);
}

/*
 * The new allowlist's verdict on <rec> (host, port, method, path), with
 * the deny reason or matching rule in <out>. Returns 1 allow, 0 deny, -1
 * when the record cannot be judged (out filled).
 */
static int
new_verdict(const struct cfg *ncfg, const struct pol_arec *rec, int tunnel,
    struct pol_replay_out *out)
{
	const struct cfg_sandbox *sb;
	struct pol_request	 pr;
	struct pol_result	 res;
	char			 host[256], path[POL_PATH_MAX];
	const char		*geo_rule;

	if ((sb = cfg_sandbox_find(ncfg, rec->pa_sandbox)) == NULL) {
		snprintf(out->po_why, sizeof(out->po_why), "no such sandbox "
		    "%.100s in the new config", rec->pa_sandbox);
		return 0;
	}
	if (sb->s_policy == NULL) {
		snprintf(out->po_why, sizeof(out->po_why), "the sandbox's "
		    "policy is not in the new config");
		return 0;
	}
	if (pol_host_normalize(rec->pa_host, host, sizeof(host)) == -1) {
		unjudged(out, "host that does not normalise", NULL);
		return -1;
	}
	memset(&pr, 0, sizeof(pr));
	pr.pr_host = host;
	pr.pr_port = rec->pa_port;
	pr.pr_method = rec->pa_method;
	if (!tunnel) {
		if (pol_path_normalize(rec->pa_path, strlen(rec->pa_path), path,
		    sizeof(path)) == -1) {
			unjudged(out, "path that does not normalise", NULL);
			return -1;
		}
		pr.pr_path = path;
	}
	/* double encoding under a rule with paths is a 400: a deny too */
	if (pol_evaluate(sb->s_policy, &pr, &res) != POL_ALLOW) {
		snprintf(out->po_why, sizeof(out->po_why), "%s", res.pr_reason);
		return 0;
	}
	snprintf(out->po_new_rule, sizeof(out->po_new_rule), "%.120s#%d",
	    sb->s_policy->p_name, res.pr_rule);
	if (tunnel && rule_looks_inside(&sb->s_policy->p_rules[res.pr_rule])) {
		/* intercepted now: its requests would be judged one by one,
		   and a spliced tunnel's were never seen */
		unjudged(out, "tunnel whose new rule intercepts and judges "
		    "methods or paths the record does not have", NULL);
		return -1;
	}
	if (sb->s_policy->p_ngeo_deny > 0 || sb->s_policy->p_ngeo_allow > 0) {
		if (rec->pa_country == NULL) {
			unjudged(out, "the new policy has country rules and the "
			    "record has no country", NULL);
			return -1;
		}
		if (!geo_policy_allows(sb->s_policy, rec->pa_country,
		    &geo_rule)) {
			snprintf(out->po_why, sizeof(out->po_why), "country "
			    "%.8s refused by %s", rec->pa_country, geo_rule);
			return 0;
		}
	}
	return 1;
}

static int
judge(const struct cfg *ncfg, const struct pol_arec *rec,
    struct pol_replay_out *out)
{
	int	old_allow, later_deny = 0, tunnel, v;

	if (rec->pa_proto != NULL && strcmp(rec->pa_proto, "dns") == 0)
		return unjudged(out, "DNS query (names are judged when the "
		    "sandbox connects)", NULL);
	if (rec->pa_decision == NULL || (strcmp(rec->pa_decision, "allow") !=
	    0 && strcmp(rec->pa_decision, "deny") != 0))
		return unjudged(out, "no decision", NULL);
	if (rec->pa_sandbox == NULL)
		return unjudged(out, "no sandbox (connection not identified)",
		    rec->pa_reason);
	if (rec->pa_host == NULL || rec->pa_port <= 0)
		return unjudged(out, "no host or port", rec->pa_reason);
	tunnel = rec->pa_proto != NULL && strcmp(rec->pa_proto, "tunnel") == 0
	    && rec->pa_path == NULL;
	if (tunnel && rec->pa_mode != NULL &&
	    strcmp(rec->pa_mode, "transparent") == 0)
		return unjudged(out, "transparent tunnel (named by SNI or the "
		    "DNS stub at the time)", NULL);
	if (!tunnel && (rec->pa_method == NULL || rec->pa_path == NULL))
		return unjudged(out, "no method or path", rec->pa_reason);

	old_allow = strcmp(rec->pa_decision, "allow") == 0;
	if (!old_allow && rec->pa_rule != NULL)
		later_deny = 1;	/* the allowlist allowed, a later check not */
	else if (!old_allow && !pol_replay_allowlist_reason(rec->pa_reason))
		return unjudged(out, "denied before the allowlist",
		    rec->pa_reason != NULL ? rec->pa_reason : "no reason");

	v = new_verdict(ncfg, rec, tunnel, out);
	if (v == -1)
		return 0;
	out->po_new_allow = v;
	if (later_deny && v == 1)
		return unjudged(out, "allowed by the allowlist, then denied "
		    "by a check that depends on the time (destination guard, "
		    "DNS, GeoIP, secrets, caps)", rec->pa_reason);
	if (old_allow && !v)
		out->po_kind = POL_RP_ALLOW_TO_DENY;
	else if (!old_allow && !later_deny && v)
		out->po_kind = POL_RP_DENY_TO_ALLOW;
	else
		out->po_kind = POL_RP_SAME;
	return 0;
}

void
pol_replay_judge(const struct cfg *ncfg, const struct pol_arec *rec,
    struct pol_replay_out *out)
{
	memset(out, 0, sizeof(*out));
	(void)judge(ncfg, rec, out);
}

/* Generaliser */

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Length of "/seg/" at the start of <p> when something follows it, else 0. */
static size_t
first_dir_len(const char *p)
{
	const char	*slash;

	if (p[0] != '/' || p[1] == '/' || p[1] == '\0')
		return 0;
	if ((slash = strchr(p + 1, '/')) == NULL || slash[1] == '\0')
		return 0;
	return (size_t)(slash - p) + 1;
}

/*
 * Sorted, unique <sorted> -> globs. Paths under one "/seg/" sit next to
 * each other once sorted: a run of two or more becomes "/seg/" and a star.
 */
static size_t
generalise_sorted(char **sorted, size_t n, char **globs)
{
	size_t	i, j, dlen, ng = 0;

	for (i = 0; i < n; i = j) {
		dlen = first_dir_len(sorted[i]);
		j = i + 1;
		while (dlen > 0 && j < n && first_dir_len(sorted[j]) > 0 &&
		    strncmp(sorted[j], sorted[i], dlen) == 0)
			j++;
		if (j - i >= 2) {
			globs[ng] = xmalloc(dlen + 2);
			memcpy(globs[ng], sorted[i], dlen);
			memcpy(globs[ng] + dlen, "*", 2);
			ng++;
			continue;
		}
		globs[ng++] = xstrdup(sorted[i]);
	}
	return ng;
}

/* Sort <v> and drop repeats (freed); returns the new count. */
static size_t
sort_unique(char **v, size_t n)
{
	size_t	i, k = 0;

	qsort(v, n, sizeof(char *), cmp_str);
	for (i = 0; i < n; i++) {
		if (k > 0 && strcmp(v[k - 1], v[i]) == 0) {
			free(v[i]);
			continue;
		}
		v[k++] = v[i];
	}
	return k;
}

char **
pol_paths_generalise(const char *const *paths, size_t n, size_t *nout)
{
	char	**sorted, **globs;
	size_t	  i, ns, ng;

	sorted = xcalloc(n + 1, sizeof(char *));
	for (i = 0; i < n; i++)
		sorted[i] = xstrdup(paths[i]);
	ns = sort_unique(sorted, n);
	globs = xcalloc(ns + 1, sizeof(char *));
	ng = sort_unique(globs, generalise_sorted(sorted, ns, globs));
	pol_globs_free(sorted, ns);
	if (ng > POL_SUGGEST_MAX_GLOBS) {
		pol_globs_free(globs, ng);
		globs = xcalloc(2, sizeof(char *));
		globs[0] = xstrdup("/*");
		ng = 1;
	}
	*nout = ng;
	return globs;
}

void
pol_globs_free(char **globs, size_t n)
{
	size_t	i;

	if (globs == NULL)
		return;
	for (i = 0; i < n; i++)
		free(globs[i]);
	free(globs);
}
