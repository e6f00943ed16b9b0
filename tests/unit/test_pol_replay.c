/*
 * Check suite for src/policy/pol_replay.c: the path generaliser of
 * "policy suggest" and the verdicts of "policy replay" on audit records.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "cfg/cfg.h"
#include "policy/pol_replay.h"
#include "unit.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* pol_paths_generalise: input paths -> globs, both NULL-terminated. */
static const struct {
	const char	*in[8];
	const char	*want[8];
} gen_cases[] = {
	{ { NULL }, { NULL } },
	{ { "/v1/a", NULL }, { "/v1/a", NULL } },
	{ { "/v1/b/c", "/v1/a", NULL }, { "/v1/*", NULL } },
	/* the directory itself stays exact: "/v1/" + star does not match it */
	{ { "/v1/a", "/v1", "/v1/b", NULL }, { "/v1", "/v1/*", NULL } },
	/* "/v1/" alone has nothing after the directory */
	{ { "/v1/", "/v1/a", NULL }, { "/v1/", "/v1/a", NULL } },
	/* repeats are one path */
	{ { "/a/x", "/b/y", "/a/x", NULL }, { "/a/x", "/b/y", NULL } },
	{ { "/", "/x", NULL }, { "/", "/x", NULL } },
	/* "/v10/" is another directory than "/v1/" */
	{ { "/v1/a", "/v10/a", "/v1/b", NULL }, { "/v1/*", "/v10/a", NULL } },
	{ { "/z/1", "/a/1", "/z/2", "/a/2", "/m", NULL },
	  { "/a/*", "/m", "/z/*", NULL } },
	/* an empty first segment is not a directory */
	{ { "//x", "//y", NULL }, { "//x", "//y", NULL } },
};

START_TEST(test_generalise)
{
	char	**got;
	size_t	  n = 0, ngot, i;

	while (gen_cases[_i].in[n] != NULL)
		n++;
	got = pol_paths_generalise(gen_cases[_i].in, n, &ngot);
	for (i = 0; gen_cases[_i].want[i] != NULL; i++) {
		ck_assert_msg(i < ngot, "case %d: only %zu globs", _i, ngot);
		ck_assert_str_eq(got[i], gen_cases[_i].want[i]);
	}
	ck_assert_uint_eq(ngot, i);
	pol_globs_free(got, ngot);
}
END_TEST

START_TEST(test_generalise_many)
{
	const char	*in[POL_SUGGEST_MAX_GLOBS + 1];
	char		 buf[POL_SUGGEST_MAX_GLOBS + 1][16];
	char		**got;
	size_t		 i, ngot;

	for (i = 0; i < NELEM(in); i++) {
		snprintf(buf[i], sizeof(buf[i]), "/p%zu", i);
		in[i] = buf[i];
	}
	/* at the limit: kept exact */
	got = pol_paths_generalise(in, POL_SUGGEST_MAX_GLOBS, &ngot);
	ck_assert_uint_eq(ngot, POL_SUGGEST_MAX_GLOBS);
	pol_globs_free(got, ngot);
	/* one more: any path */
	got = pol_paths_generalise(in, NELEM(in), &ngot);
	ck_assert_uint_eq(ngot, 1);
	ck_assert_str_eq(got[0], "/*");
	pol_globs_free(got, ngot);
}
END_TEST

/* pol_replay_judge */

static const char replay_yaml[] =
"policies:\n"
"  - name: p\n"
"    rules:\n"
"      - {host: \"api.test\", ports: [443], methods: [GET], paths: [\"/v1/*\"]}\n"
"      - {host: \"git.test\", ports: [443], intercept: false}\n"
"  - name: g\n"
"    rules:\n"
"      - {host: \"*\", ports: [443]}\n"
"sandboxes:\n"
"  - {id: s, policy: p, token: \"literal:t1\"}\n"
"  - {id: geo, policy: g, token: \"literal:t2\"}\n";

#define A(...)	((struct pol_arec){ .pa_port = 443, __VA_ARGS__ })

static const struct {
	struct pol_arec		 rec;
	enum pol_replay_kind	 kind;
	const char		*why;	/* prefix of po_why, or NULL */
	const char		*rule;	/* po_new_rule, or NULL */
} judge_cases[] = {
	/* allowed then, allowed now */
	{ A(.pa_sandbox = "s", .pa_method = "GET", .pa_host = "api.test",
	    .pa_path = "/v1/x", .pa_decision = "allow", .pa_rule = "p#0"),
	  POL_RP_SAME, NULL, "p#0" },
	/* allowed then, the new path rule refuses it */
	{ A(.pa_sandbox = "s", .pa_method = "GET", .pa_host = "api.test",
	    .pa_path = "/admin", .pa_decision = "allow", .pa_rule = "old#3"),
	  POL_RP_ALLOW_TO_DENY, "path /admin is not allowed for api.test:443",
	  NULL },
	/* a method the new rule does not name */
	{ A(.pa_sandbox = "s", .pa_method = "POST", .pa_host = "api.test",
	    .pa_path = "/v1/x", .pa_decision = "allow", .pa_rule = "old#0"),
	  POL_RP_ALLOW_TO_DENY, "method POST is not allowed", NULL },
	/* denied by the allowlist then, allowed now */
	{ A(.pa_sandbox = "s", .pa_method = "GET", .pa_host = "api.test",
	    .pa_path = "/v1/y", .pa_decision = "deny",
	    .pa_reason = "host api.test is not allowed"),
	  POL_RP_DENY_TO_ALLOW, NULL, "p#0" },
	/* the recorded path is judged normalised */
	{ A(.pa_sandbox = "s", .pa_method = "GET", .pa_host = "API.test",
	    .pa_path = "/v1/./%61", .pa_decision = "deny",
	    .pa_reason = "path /v1/a is not allowed for api.test:443"),
	  POL_RP_DENY_TO_ALLOW, NULL, "p#0" },
	/* a sandbox the new config does not have */
	{ A(.pa_sandbox = "gone", .pa_method = "GET", .pa_host = "api.test",
	    .pa_path = "/v1/x", .pa_decision = "allow", .pa_rule = "p#0"),
	  POL_RP_ALLOW_TO_DENY, "no such sandbox gone", NULL },
	/* a spliced tunnel: host and port */
	{ A(.pa_sandbox = "s", .pa_method = "CONNECT", .pa_host = "git.test",
	    .pa_proto = "tunnel", .pa_mode = "explicit", .pa_decision = "allow",
	    .pa_rule = "p#1"), POL_RP_SAME, NULL, "p#1" },
	{ A(.pa_sandbox = "s", .pa_method = "CONNECT", .pa_host = "x.test",
	    .pa_proto = "tunnel", .pa_mode = "explicit", .pa_decision = "allow",
	    .pa_rule = "p#1"), POL_RP_ALLOW_TO_DENY, "host x.test is not "
	    "allowed", NULL },
	/* a tunnel under a rule that intercepts and judges paths */
	{ A(.pa_sandbox = "s", .pa_method = "CONNECT", .pa_host = "api.test",
	    .pa_proto = "tunnel", .pa_mode = "explicit", .pa_tls = "splice",
	    .pa_decision = "allow", .pa_rule = "old#0"),
	  POL_RP_UNJUDGED, "tunnel whose new rule intercepts", NULL },
	/* what the record does not say enough about */
	{ A(.pa_sandbox = "s", .pa_host = "git.test", .pa_proto = "tunnel",
	    .pa_mode = "transparent", .pa_decision = "allow"),
	  POL_RP_UNJUDGED, "transparent tunnel", NULL },
	{ A(.pa_sandbox = "s", .pa_host = "api.test", .pa_proto = "dns",
	    .pa_decision = "allow"), POL_RP_UNJUDGED, "DNS query", NULL },
	{ A(.pa_method = "GET", .pa_host = "api.test", .pa_path = "/v1/x",
	    .pa_decision = "deny", .pa_reason = "proxy credentials not valid"),
	  POL_RP_UNJUDGED, "no sandbox", NULL },
	{ A(.pa_sandbox = "s", .pa_host = "api.test", .pa_proto = "http",
	    .pa_decision = "deny", .pa_reason = "bad request"),
	  POL_RP_UNJUDGED, "no method or path", NULL },
	{ A(.pa_sandbox = "s", .pa_method = "GET", .pa_host = "api.test",
	    .pa_path = "/v1/x", .pa_decision = "deny",
	    .pa_reason = "body over limits"),
	  POL_RP_UNJUDGED, "denied before the allowlist", NULL },
	{ A(.pa_sandbox = "s", .pa_method = "GET", .pa_host = "api.test",
	    .pa_path = "/v1/x", .pa_decision = "maybe"),
	  POL_RP_UNJUDGED, "no decision", NULL },
	/* allowlist passed, the guard denied (DNS at the time) */
	{ A(.pa_sandbox = "s", .pa_method = "GET", .pa_host = "api.test",
	    .pa_path = "/v1/x", .pa_decision = "deny", .pa_rule = "p#0",
	    .pa_reason = "destination api.test resolves to 10.0.0.1 in "
	    "denied network 10.0.0.0/8"),
	  POL_RP_UNJUDGED, "allowed by the allowlist, then denied", NULL },
	/* ... but when the new allowlist denies it, it is a deny either way */
	{ A(.pa_sandbox = "s", .pa_method = "GET", .pa_host = "api.test",
	    .pa_path = "/other", .pa_decision = "deny", .pa_rule = "p#0",
	    .pa_reason = "destination api.test resolves to 10.0.0.1 in "
	    "denied network 10.0.0.0/8"), POL_RP_SAME, "path /other", NULL },
	/* country rules of the new policy */
	{ A(.pa_sandbox = "geo", .pa_method = "GET", .pa_host = "a.test",
	    .pa_path = "/", .pa_decision = "allow", .pa_rule = "g#0",
	    .pa_country = "KP"), POL_RP_ALLOW_TO_DENY, "country KP", NULL },
	{ A(.pa_sandbox = "geo", .pa_method = "GET", .pa_host = "a.test",
	    .pa_path = "/", .pa_decision = "allow", .pa_rule = "g#0",
	    .pa_country = "DE"), POL_RP_SAME, NULL, "g#0" },
	{ A(.pa_sandbox = "geo", .pa_method = "GET", .pa_host = "a.test",
	    .pa_path = "/", .pa_decision = "allow", .pa_rule = "g#0"),
	  POL_RP_UNJUDGED, "the new policy has country rules", NULL },
};

START_TEST(test_judge)
{
	struct pol_replay_out	 out;
	struct cfg		*c;
	struct cfg_policy	*g;
	FILE			*errs = tmpfile();
	int			 nerr = 0;

	c = cfg_load_buffer("t.yaml", replay_yaml, strlen(replay_yaml), errs,
	    &nerr);
	fclose(errs);
	ck_assert_ptr_nonnull(c);
	/* geo rules load only with a GeoIP database: set them here */
	g = (struct cfg_policy *)cfg_policy_find(c, "g");
	ck_assert_ptr_nonnull(g);
	g->p_geo_deny = calloc(1, sizeof(*g->p_geo_deny));
	ck_assert_ptr_nonnull(g->p_geo_deny);
	memcpy(g->p_geo_deny[0], "KP", 3);
	g->p_ngeo_deny = 1;
	pol_replay_judge(c, &judge_cases[_i].rec, &out);
	ck_assert_msg(out.po_kind == judge_cases[_i].kind,
	    "case %d: kind %d, want %d (%s)", _i, out.po_kind,
	    judge_cases[_i].kind, out.po_why);
	if (judge_cases[_i].why != NULL)
		ck_assert_msg(strncmp(out.po_why, judge_cases[_i].why,
		    strlen(judge_cases[_i].why)) == 0, "case %d: why \"%s\"",
		    _i, out.po_why);
	if (judge_cases[_i].rule != NULL)
		ck_assert_str_eq(out.po_new_rule, judge_cases[_i].rule);
	cfg_unref(c);
}
END_TEST

START_TEST(test_allowlist_reason)
{
	ck_assert(pol_replay_allowlist_reason("host a.test is not allowed"));
	ck_assert(pol_replay_allowlist_reason("port 8080 is not allowed for "
	    "host a.test"));
	ck_assert(pol_replay_allowlist_reason("method DELETE is not allowed "
	    "for a.test:80"));
	ck_assert(pol_replay_allowlist_reason("path /x is not allowed for "
	    "a.test:80"));
	ck_assert(pol_replay_allowlist_reason("the sandbox's policy is not in "
	    "the running config"));
	ck_assert(!pol_replay_allowlist_reason(NULL));
	ck_assert(!pol_replay_allowlist_reason("destination a.test resolves "
	    "to 10.0.0.1 in denied network 10.0.0.0/8"));
	ck_assert(!pol_replay_allowlist_reason("proxy credentials not valid"));
}
END_TEST

Suite *
suite_pol_replay(void)
{
	Suite	*s = suite_create("pol_replay");
	TCase	*tc = tcase_create("generalise");

	tcase_add_loop_test(tc, test_generalise, 0, NELEM(gen_cases));
	tcase_add_test(tc, test_generalise_many);
	suite_add_tcase(s, tc);
	tc = tcase_create("judge");
	tcase_add_loop_test(tc, test_judge, 0, NELEM(judge_cases));
	tcase_add_test(tc, test_allowlist_reason);
	suite_add_tcase(s, tc);
	return s;
}
