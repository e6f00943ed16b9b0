/* Check suite for src/policy: matching, verdicts, normalisation. */
#include "config.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "cfg/cfg.h"
#include "policy/pol.h"
#include "policy/pol_ask.h"
#include "unit.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* pol_host_match */

static const struct {
	const char	*pattern;
	const char	*host;
	int		 match;
} hostm_cases[] = {
	{ "*",			"anything.test",	1 },
	{ "*",			"93.184.216.34",	1 },
	{ "*",			"::1",			1 },
	{ "*.example.com",	"a.example.com",	1 },
	{ "*.example.com",	"a.b.example.com",	1 },
	{ "*.example.com",	"example.com",		0 },
	{ "*.example.com",	".example.com",		0 },
	{ "*.example.com",	"badexample.com",	0 },
	{ "*.example.com",	"a.example.com.evil",	0 },
	{ "*.example.com",	"a.example.co",		0 },
	{ "*.s3.amazonaws.com",	"b.s3.amazonaws.com",	1 },
	{ "example.com",	"example.com",		1 },
	{ "example.com",	"a.example.com",	0 },
	{ "example.com",	"example.co",		0 },
	{ "example.com",	"example.com.",		0 },
	{ "a*.example.com",	"ab.example.com",	0 },
	{ "*example.com",	"aexample.com",		0 },
	{ "127.0.0.1",		"127.0.0.1",		1 },
	{ "127.0.0.1",		"127.0.0.10",		0 },
	{ "::1",		"::1",			1 },
	/* networks: only IP literals fall in them */
	{ "10.1.0.0/16",	"10.1.2.3",		1 },
	{ "10.1.0.0/16",	"10.2.0.1",		0 },
	{ "10.1.0.0/16",	"a.example",		0 },
	{ "127.0.0.0/8",	"127.255.0.1",		1 },
	{ "2001:db8::/32",	"2001:db8::1",		1 },
	{ "2001:db8::/32",	"2001:db9::1",		0 },
	{ "0.0.0.0/0",		"192.0.2.7",		1 },
};

START_TEST(test_host_match)
{
	ck_assert_msg(pol_host_match(hostm_cases[_i].pattern,
	    hostm_cases[_i].host) == hostm_cases[_i].match, "%s vs %s",
	    hostm_cases[_i].pattern, hostm_cases[_i].host);
}
END_TEST

/* pol_glob_match */

static const struct {
	const char	*pattern;
	const char	*s;
	int		 match;
} glob_cases[] = {
	{ "*",			"",				1 },
	{ "*",			"/anything/at/all",		1 },
	{ "",			"",				1 },
	{ "",			"/",				0 },
	{ "/v1/*",		"/v1/chat/completions",		1 },
	{ "/v1/*",		"/v1/",				1 },
	{ "/v1/*",		"/v1",				0 },
	{ "/v1/*",		"/v10/x",			0 },
	{ "/v1/*",		"/V1/x",			0 },
	{ "/v1/*",		"/x/v1/y",			0 },
	{ "/exact",		"/exact",			1 },
	{ "/exact",		"/exact/",			0 },
	{ "/exact",		"/exac",			0 },
	{ "*.json",		"/a/b/c.json",			1 },
	{ "*.json",		"/a/b/c.jsonx",			0 },
	{ "/a/*/c",		"/a/b/x/c",			1 },
	{ "/a/*/c",		"/a//c",			1 },
	{ "/a/*/c",		"/a/c",				0 },
	{ "/a/**",		"/a/b",				1 },
	{ "a*b*c",		"abc",				1 },
	{ "a*b*c",		"axxbyyc",			1 },
	{ "a*b*c",		"acb",				0 },
	{ "*ab",		"aab",				1 },
	{ "*aab",		"aaab",				1 },
	{ "*a*a*a*a*b",		"aaaaaaaaaaaaaaaaaaaa",		0 },
	{ "*a*a*a*a*b",		"aaaaaaaaaaaaaaaaaaab",		1 },
	{ "a*",			"b",				0 },
	{ "*a",			"ba",				1 },
	{ "*a",			"ab",				0 },
	{ "/a?b",		"/a?b",				1 },
	{ "/a?b",		"/axb",				0 },
	{ "[ab]",		"a",				0 },
	{ "/x%20y/*",		"/x%20y/z",			1 },
};

START_TEST(test_glob)
{
	ck_assert_msg(pol_glob_match(glob_cases[_i].pattern,
	    glob_cases[_i].s) == glob_cases[_i].match, "%s vs %s",
	    glob_cases[_i].pattern, glob_cases[_i].s);
}
END_TEST

/* A naive backtracking matcher would take ages here. */
START_TEST(test_glob_no_blowup)
{
	static char	s[200001];

	memset(s, 'a', sizeof(s) - 1);
	s[sizeof(s) - 1] = '\0';
	ck_assert_int_eq(pol_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*b", s), 0);
	ck_assert_int_eq(pol_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*a", s), 1);
	ck_assert_int_eq(pol_glob_match("*aaaaaaaaaaaaaaaaaaaaaab", s), 0);
	s[sizeof(s) - 2] = 'b';
	ck_assert_int_eq(pol_glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*b", s), 1);
}
END_TEST

/* pol_evaluate against hand-built policies */

static int	ports_443[] = { 443 };
static int	ports_80[] = { 80 };
static int	ports_8080[] = { 8080 };
static int	ports_web[] = { 80, 443 };
static char	*m_getpost[] = { "GET", "POST" };
static char	*m_delete[] = { "DELETE" };
static char	*m_get[] = { "GET" };
static char	*p_v1[] = { "/v1/*" };
static char	*p_files[] = { "/v1/files/*" };
static char	*p_static[] = { "/public/*", "/index.html" };

/* RULE(host, A(ports), A(methods) or ANY, A(paths) or ANY) */
#define A(x)		(x), NELEM(x)
#define ANY		NULL, 0
#define RULE(...)	RULE_(__VA_ARGS__)
#define RULE_(h, p, np, m, nm, pa, npa) {				\
	.r_host = (h), .r_ports = (p), .r_nports = (np),		\
	.r_methods = (m), .r_nmethods = (nm),				\
	.r_paths = (pa), .r_npaths = (npa),				\
}

static struct cfg_rule	main_rules[] = {
	/* 0 */ RULE("api.openai.com", A(ports_443), A(m_getpost), A(p_v1)),
	/* 1 */ RULE("*.example.com", A(ports_web), ANY, ANY),
	/* 2 */ RULE("github.com", A(ports_443), ANY, ANY),
	/* 3 */ RULE("api.openai.com", A(ports_443), A(m_delete), A(p_files)),
	/* 4 */ RULE("static.test", A(ports_80), A(m_get), A(p_static)),
	/* 5 */ RULE("::1", A(ports_8080), A(m_get), ANY),
	/* 6 */ RULE("dup.example.com", A(ports_443), ANY, ANY),
	/* 7 */ RULE("127.0.0.1", A(ports_8080), ANY, ANY),
};

static struct cfg_rule	star_rules[] = {
	/* 0 */ RULE("*", A(ports_443), A(m_get), ANY),
	/* 1 */ RULE("noports.test", ANY, ANY, ANY),
};

static const struct cfg_policy	main_pol = {
	.p_name = "main", .p_rules = main_rules,
	.p_nrules = NELEM(main_rules),
};
static const struct cfg_policy	star_pol = {
	.p_name = "star", .p_rules = star_rules,
	.p_nrules = NELEM(star_rules),
};
static const struct cfg_policy	empty_pol = { .p_name = "empty" };

static const struct {
	const struct cfg_policy	*pol;
	const char		*host;
	int			 port;
	const char		*method;
	const char		*path;		/* NULL: a tunnel */
	int			 rule;		/* -1: denied */
	const char		*reason;
} eval_cases[] = {
	{ &main_pol, "api.openai.com", 443, "POST", "/v1/chat/completions",
	    0, "" },
	{ &main_pol, "api.openai.com", 443, "GET", "/v1/models", 0, "" },
	{ &main_pol, "api.openai.com", 443, "GET", "/v1/", 0, "" },
	{ &main_pol, "api.openai.com", 443, "DELETE", "/v1/files/abc",
	    3, "" },
	/* rule 3 got as far as the path, rule 0 only to the method */
	{ &main_pol, "api.openai.com", 443, "DELETE", "/v1/models", -1,
	    "path /v1/models is not allowed for api.openai.com:443" },
	{ &main_pol, "api.openai.com", 443, "PUT", "/v1/models", -1,
	    "method PUT is not allowed for api.openai.com:443" },
	{ &main_pol, "api.openai.com", 443, "get", "/v1/models", -1,
	    "method get is not allowed for api.openai.com:443" },
	{ &main_pol, "api.openai.com", 443, "GET", "/v2/models", -1,
	    "path /v2/models is not allowed for api.openai.com:443" },
	{ &main_pol, "api.openai.com", 443, "GET", "/v1", -1,
	    "path /v1 is not allowed for api.openai.com:443" },
	{ &main_pol, "api.openai.com", 80, "GET", "/v1/models", -1,
	    "port 80 is not allowed for host api.openai.com" },
	{ &main_pol, "evil.test", 443, "GET", "/", -1,
	    "host evil.test is not allowed" },
	{ &main_pol, "a.example.com", 80, "DELETE", "/anything", 1, "" },
	{ &main_pol, "a.b.example.com", 443, "PATCH", "/", 1, "" },
	{ &main_pol, "example.com", 443, "GET", "/", -1,
	    "host example.com is not allowed" },
	{ &main_pol, "badexample.com", 443, "GET", "/", -1,
	    "host badexample.com is not allowed" },
	{ &main_pol, "a.example.com", 8080, "GET", "/", -1,
	    "port 8080 is not allowed for host a.example.com" },
	/* first match wins: rule 6 is shadowed by rule 1 */
	{ &main_pol, "dup.example.com", 443, "GET", "/", 1, "" },
	{ &main_pol, "github.com", 443, "GET", "/x/y.git", 2, "" },
	{ &main_pol, "github.com", 22, "GET", "/", -1,
	    "port 22 is not allowed for host github.com" },
	/* tunnels: host and port only */
	{ &main_pol, "github.com", 443, "CONNECT", NULL, 2, "" },
	{ &main_pol, "api.openai.com", 443, "CONNECT", NULL, 0, "" },
	{ &main_pol, "static.test", 80, "CONNECT", NULL, 4, "" },
	{ &main_pol, "api.openai.com", 8443, "CONNECT", NULL, -1,
	    "port 8443 is not allowed for host api.openai.com" },
	{ &main_pol, "evil.test", 443, "CONNECT", NULL, -1,
	    "host evil.test is not allowed" },
	{ &main_pol, "github.com", 443, NULL, NULL, 2, "" },
	{ &main_pol, "static.test", 80, "GET", "/index.html", 4, "" },
	{ &main_pol, "static.test", 80, "GET", "/public/a/b.css", 4, "" },
	{ &main_pol, "static.test", 80, "GET", "/Index.html", -1,
	    "path /Index.html is not allowed for static.test:80" },
	{ &main_pol, "static.test", 80, "GET", "/private", -1,
	    "path /private is not allowed for static.test:80" },
	{ &main_pol, "static.test", 80, "HEAD", "/index.html", -1,
	    "method HEAD is not allowed for static.test:80" },
	{ &main_pol, "static.test", 443, "GET", "/index.html", -1,
	    "port 443 is not allowed for host static.test" },
	{ &main_pol, "::1", 8080, "GET", "/", 5, "" },
	{ &main_pol, "::1", 8080, "POST", "/", -1,
	    "method POST is not allowed for [::1]:8080" },
	{ &main_pol, "::1", 80, "GET", "/", -1,
	    "port 80 is not allowed for host ::1" },
	{ &main_pol, "127.0.0.1", 8080, "GET", "/", 7, "" },
	{ &main_pol, "127.0.0.2", 8080, "GET", "/", -1,
	    "host 127.0.0.2 is not allowed" },
	{ &star_pol, "anything.test", 443, "GET", "/x", 0, "" },
	{ &star_pol, "93.184.216.34", 443, "GET", "/", 0, "" },
	{ &star_pol, "anything.test", 443, "POST", "/x", -1,
	    "method POST is not allowed for anything.test:443" },
	{ &star_pol, "anything.test", 80, "GET", "/x", -1,
	    "port 80 is not allowed for host anything.test" },
	/* a rule without ports gets SPEC's default [80, 443] */
	{ &star_pol, "noports.test", 80, "PUT", "/", 1, "" },
	{ &star_pol, "noports.test", 443, "PUT", "/", 1, "" },
	{ &star_pol, "noports.test", 8080, "PUT", "/", -1,
	    "port 8080 is not allowed for host noports.test" },
	{ &empty_pol, "a.test", 443, "GET", "/", -1,
	    "host a.test is not allowed" },
	{ NULL, "a.test", 443, "GET", "/", -1,
	    "host a.test is not allowed" },
};

START_TEST(test_evaluate)
{
	struct pol_request	req;
	struct pol_result	res;
	enum pol_verdict	v;

	memset(&req, 0, sizeof(req));
	req.pr_host = eval_cases[_i].host;
	req.pr_port = eval_cases[_i].port;
	req.pr_method = eval_cases[_i].method;
	req.pr_path = eval_cases[_i].path;
	memset(&res, 0xa5, sizeof(res));
	v = pol_evaluate(eval_cases[_i].pol, &req, &res);
	ck_assert_int_eq(v, res.pr_verdict);
	ck_assert_int_eq(v, eval_cases[_i].rule >= 0 ? POL_ALLOW : POL_DENY);
	ck_assert_int_eq(res.pr_rule, eval_cases[_i].rule);
	ck_assert_str_eq(res.pr_reason, eval_cases[_i].reason);
}
END_TEST

START_TEST(test_evaluate_long_reason)
{
	static char		path[2048];
	struct pol_request	req;
	struct pol_result	res;

	/* a reason longer than pr_reason is cut, not overrun */
	memset(&req, 0, sizeof(req));
	path[0] = '/';
	memset(path + 1, 'x', sizeof(path) - 2);
	path[sizeof(path) - 1] = '\0';
	req.pr_host = "static.test";
	req.pr_port = 80;
	req.pr_method = "GET";
	req.pr_path = path;
	ck_assert_int_eq(pol_evaluate(&main_pol, &req, &res), POL_DENY);
	ck_assert_uint_eq(strlen(res.pr_reason), sizeof(res.pr_reason) - 1);
	ck_assert(strncmp(res.pr_reason, "path /xxx", 9) == 0);
}
END_TEST

/*
 * Encoded slashes, method overrides, double encoding (issues 14.10, 15.2,
 * 15.6). A path with "%2F" is matched with each encoded slash read as '/'
 * (pol_path_normalize() refused it when the readings differ).
 */
static char	*p_scope[] = { "/@scope/*" };
static char	*p_all[] = { "/*" };
static char	*p_gl[] = { "/api/v4/projects/*" };

static struct cfg_rule	enc_rules[] = {
	/* 0 */ RULE("registry.test", A(ports_443), ANY, A(p_scope)),
	/* 1 */ RULE("npm.test", A(ports_443), ANY, A(p_all)),
	/* 2 */ RULE("gl.test", A(ports_443), A(m_get), A(p_gl)),
	/* 3 */ RULE("api.openai.com", A(ports_443), A(m_getpost), A(p_v1)),
	/* 4 */ RULE("open.test", A(ports_443), ANY, ANY),
	/* 5 */ RULE("api.openai.com", A(ports_443), A(m_delete), ANY),
};
static const struct cfg_policy	enc_pol = {
	.p_name = "enc", .p_rules = enc_rules,
	.p_nrules = NELEM(enc_rules),
};

static const struct {
	const char		*host;
	const char		*method;
	const char		*override;
	const char		*path;
	enum pol_verdict	 verdict;
	int			 rule;
	const char		*reason;
} enc_cases[] = {
	{ "registry.test", "GET", NULL, "/@scope%2fname", POL_ALLOW, 0, "" },
	{ "registry.test", "GET", NULL, "/@scope%2Fname", POL_ALLOW, 0, "" },
	{ "registry.test", "GET", NULL, "/@scope/name/-/name-1.0.0.tgz",
	    POL_ALLOW, 0, "" },
	{ "registry.test", "GET", NULL, "/@other%2Fname", POL_DENY, -1,
	    "path /@other%2Fname is not allowed for registry.test:443" },
	{ "registry.test", "GET", NULL, "/@scope", POL_DENY, -1,
	    "path /@scope is not allowed for registry.test:443" },
	{ "registry.test", "GET", NULL, "/@scope%2F", POL_ALLOW, 0, "" },
	{ "npm.test", "GET", NULL, "/@scope%2fname", POL_ALLOW, 1, "" },
	{ "npm.test", "GET", NULL, "/%2F", POL_ALLOW, 1, "" },
	{ "gl.test", "GET", NULL, "/api/v4/projects/group%2Fproject/issues",
	    POL_ALLOW, 2, "" },
	{ "gl.test", "GET", NULL, "/api%2Fv4%2Fprojects%2Fg", POL_ALLOW, 2,
	    "" },
	{ "gl.test", "GET", NULL, "/api/v4%2Fother", POL_DENY, -1,
	    "path /api/v4%2Fother is not allowed for gl.test:443" },
	/* method overrides are judged against the rule's methods */
	{ "api.openai.com", "POST", "GET", "/v1/x", POL_ALLOW, 3, "" },
	{ "api.openai.com", "POST", "PATCH", "/v1/x", POL_DENY, -1,
	    "method PATCH, named by a method-override header, is not "
	    "allowed for api.openai.com:443" },
	/* rule 5 allows DELETE of any path: the override may go there */
	{ "api.openai.com", "DELETE", NULL, "/v1/x", POL_ALLOW, 5, "" },
	{ "api.openai.com", "POST", "DELETE", "/v1/x", POL_DENY, -1,
	    "method DELETE, named by a method-override header, is not "
	    "allowed for api.openai.com:443" },
	{ "open.test", "POST", "DELETE", "/x", POL_ALLOW, 4, "" },
	{ "gl.test", "GET", "DELETE", "/api/v4/projects/1", POL_DENY, -1,
	    "method DELETE, named by a method-override header, is not "
	    "allowed for gl.test:443" },
	/* a tunnel has no method to override */
	{ "gl.test", "CONNECT", "DELETE", NULL, POL_ALLOW, 2, "" },
	/* double encoding: 400 under a rule with paths that would allow */
	{ "api.openai.com", "GET", NULL, "/v1/%252e%252e/admin", POL_BAD, 3,
	    "path /v1/%252e%252e/admin has an encoded % before two hex "
	    "digits (double encoding), refused under a rule with paths" },
	{ "api.openai.com", "GET", NULL, "/v1/a%252Fb", POL_BAD, 3, NULL },
	{ "registry.test", "GET", NULL, "/@scope/%2541", POL_BAD, 0, NULL },
	{ "api.openai.com", "GET", NULL, "/v1/100%25", POL_ALLOW, 3, "" },
	{ "api.openai.com", "GET", NULL, "/v1/%25zz", POL_ALLOW, 3, "" },
	{ "api.openai.com", "GET", NULL, "/v2/%2541", POL_DENY, -1,
	    "path /v2/%2541 is not allowed for api.openai.com:443" },
	{ "open.test", "GET", NULL, "/x/%252e%252e/y", POL_ALLOW, 4, "" },
};

START_TEST(test_evaluate_encoded)
{
	struct pol_request	req;
	struct pol_result	res;
	enum pol_verdict	v;

	memset(&req, 0, sizeof(req));
	req.pr_host = enc_cases[_i].host;
	req.pr_port = 443;
	req.pr_method = enc_cases[_i].method;
	req.pr_method_override = enc_cases[_i].override;
	req.pr_path = enc_cases[_i].path;
	memset(&res, 0xa5, sizeof(res));
	v = pol_evaluate(&enc_pol, &req, &res);
	ck_assert_msg(v == enc_cases[_i].verdict, "%s %s: verdict %d (%s)",
	    enc_cases[_i].host, enc_cases[_i].path ? enc_cases[_i].path : "-",
	    v, res.pr_reason);
	ck_assert_int_eq(res.pr_verdict, v);
	ck_assert_int_eq(res.pr_rule, enc_cases[_i].rule);
	if (enc_cases[_i].reason != NULL)
		ck_assert_str_eq(res.pr_reason, enc_cases[_i].reason);
}
END_TEST

/* pol_host_allowed: any rule naming the host, whatever its ports */

static const struct {
	const struct cfg_policy	*pol;
	const char		*host;
	int			 rule;		/* -1: none */
} allowed_cases[] = {
	{ &main_pol, "api.openai.com",		0 },
	{ &main_pol, "a.example.com",		1 },
	{ &main_pol, "a.b.example.com",		1 },
	{ &main_pol, "example.com",		-1 },	/* apex not covered */
	{ &main_pol, "badexample.com",		-1 },
	{ &main_pol, "github.com",		2 },
	{ &main_pol, "github.com.evil",		-1 },
	{ &main_pol, "static.test",		4 },	/* port 80 only */
	{ &main_pol, "dup.example.com",		1 },	/* first rule wins */
	{ &main_pol, "127.0.0.1",		7 },	/* port 8080 only */
	{ &main_pol, "evil.test",		-1 },
	{ &main_pol, "",			-1 },
	{ &main_pol, NULL,			-1 },
	{ &star_pol, "anything.test",		0 },
	{ &star_pol, "noports.test",		0 },
	{ &empty_pol, "a.test",			-1 },
	{ NULL, "a.test",			-1 },
};

START_TEST(test_host_allowed)
{
	ck_assert_int_eq(pol_host_allowed(allowed_cases[_i].pol,
	    allowed_cases[_i].host), allowed_cases[_i].rule);
}
END_TEST

/* pol_path_normalize */

static const struct {
	const char	*in;
	const char	*out;		/* NULL: rejected */
} path_cases[] = {
	{ "/",				"/" },
	{ "/a/b/c",			"/a/b/c" },
	{ "/a/b/",			"/a/b/" },
	{ "/v1/chat/completions",	"/v1/chat/completions" },
	{ "/a/./b",			"/a/b" },
	{ "/a/../b",			"/b" },
	{ "/a/b/../../c",		"/c" },
	{ "/a/b/..",			"/a/" },
	{ "/a/.",			"/a/" },
	{ "/a/./",			"/a/" },
	{ "/.",				"/" },
	{ "/./",			"/" },
	{ "/a/..",			"/" },
	{ "/a/../",			"/" },
	{ "/%7Euser",			"/~user" },
	{ "/%7euser",			"/~user" },
	{ "/%41%62%63",			"/Abc" },
	{ "/a%2db%5F%2E",		"/a-b_." },
	{ "/v1/%2e%2e/admin",		"/admin" },
	{ "/v1/%2E/x",			"/v1/x" },
	{ "/v1/.%2e/admin",		"/admin" },
	{ "/a/%2e",			"/a/" },
	{ "/%2e%2e%2e",			"/..." },
	{ "/a%3fb",			"/a%3Fb" },
	{ "/a%20b",			"/a%20b" },
	{ "/caf%c3%a9",			"/caf%C3%A9" },
	{ "/a%0a",			"/a%0A" },
	{ "/a//b",			"/a//b" },
	{ "/a//../b",			"/a/b" },
	{ "//",				"//" },
	{ "/...",			"/..." },
	{ "/.a/..b/",			"/.a/..b/" },
	{ "/a;b=c/d",			"/a;b=c/d" },
	{ "/a+b@c:d",			"/a+b@c:d" },
	{ "/caf\xc3\xa9",		"/caf\xc3\xa9" },
	/* %2F is data, kept as the client wrote it (SPEC "Paths") */
	{ "/a%2Fb",			"/a%2Fb" },
	{ "/a%2fb",			"/a%2fb" },
	{ "/@scope%2fname",		"/@scope%2fname" },
	{ "/@scope%2Fname",		"/@scope%2Fname" },
	{ "/api/v4/projects/group%2Fproject/issues",
					"/api/v4/projects/group%2Fproject/issues" },
	{ "/%2F",			"/%2F" },
	{ "/a%2F%2Fb",			"/a%2F%2Fb" },
	{ "/a/x%2Fy/./z",		"/a/x%2Fy/z" },
	{ "/a/b/../x%2Fy",		"/a/x%2Fy" },
	{ "/%7Euser%2F%7e",		"/~user%2F~" },
	{ "/o/a%2F.b%2F..c",		"/o/a%2F.b%2F..c" },
	/* ";" parameters: fine outside dot segments */
	{ "/v1/...;/x",			"/v1/...;/x" },
	{ "/v1/.x;y/z",			"/v1/.x;y/z" },
	{ "/v1/x;..",			"/v1/x;.." },
	/* double encoding is judged by the rule (pol_evaluate) */
	{ "/v1/%252e%252e/admin",	"/v1/%252e%252e/admin" },
	/* rejected */
	{ "/v1/..%2Fadmin",		NULL },
	{ "/v1/..%2fadmin",		NULL },
	{ "/v1/x%2F..%2F..%2Fadmin",	NULL },
	{ "/v1/%2e%2e%2Fadmin",		NULL },
	{ "/a%2F.",			NULL },
	{ "/a%2F%2E",			NULL },
	{ "/a%2F..",			NULL },
	{ "/%2F..%2F..",		NULL },
	{ "/a/x%2Fy/../z",		NULL },	/* reads /a/z and /a/x/z */
	{ "/a/x%2F..;/z",		NULL },
	{ "/v1/..;/admin",		NULL },
	{ "/v1/.;x/",			NULL },
	{ "/v1/..;jsessionid=1/x",	NULL },
	{ "/v1/..%3B/admin",		NULL },
	{ "/v1/..%3b/admin",		NULL },
	{ "/v1/%2e%2e;/admin",		NULL },
	{ "/v1/.;",			NULL },
	{ "/a%5C%2Fb",			NULL },
	{ "",				NULL },
	{ "a/b",			NULL },
	{ "*",				NULL },
	{ "/a%5Cb",			NULL },
	{ "/a%5cb",			NULL },
	{ "/a%00b",			NULL },
	{ "/a\\b",			NULL },
	{ "/a\tb",			NULL },
	{ "/a\nb",			NULL },
	{ "/a\rb",			NULL },
	{ "/a b",			NULL },
	{ "/a\x7f",			NULL },
	{ "/a%",			NULL },
	{ "/a%4",			NULL },
	{ "/a%zz",			NULL },
	{ "/a%4g",			NULL },
	{ "/a%%41",			NULL },
	{ "/..",			NULL },
	{ "/../",			NULL },
	{ "/../x",			NULL },
	{ "/a/../../x",			NULL },
	{ "/a/b/../../..",		NULL },
	{ "/%2e%2e/x",			NULL },
	{ "/a/%2E%2E/%2e%2e",		NULL },
	{ "/./../x",			NULL },
};

START_TEST(test_path_normalize)
{
	char		out[256];
	const char	*in = path_cases[_i].in;
	int		r;

	memset(out, 'Z', sizeof(out));
	r = pol_path_normalize(in, strlen(in), out, sizeof(out));
	if (path_cases[_i].out == NULL)
		ck_assert_msg(r == -1, "\"%s\" accepted as \"%s\"", in, out);
	else {
		ck_assert_msg(r == 0, "\"%s\" rejected", in);
		ck_assert_str_eq(out, path_cases[_i].out);
	}
}
END_TEST

START_TEST(test_path_normalize_edges)
{
	char	out[16];

	/* raw NUL inside the given length */
	ck_assert_int_eq(pol_path_normalize("/a\0b", 4, out, sizeof(out)),
	    -1);
	/* the length is honoured: the rest of the string is not read */
	ck_assert_int_eq(pol_path_normalize("/a/b?q=1", 4, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "/a/b");
	/* does not fit */
	ck_assert_int_eq(pol_path_normalize("/abc", 4, out, 4), -1);
	ck_assert_int_eq(pol_path_normalize("/abc", 4, out, 5), 0);
	ck_assert_str_eq(out, "/abc");
	ck_assert_int_eq(pol_path_normalize("/%20", 4, out, 4), -1);
	ck_assert_int_eq(pol_path_normalize("/%20", 4, out, 5), 0);
	/* decoding shrinks, so this fits */
	ck_assert_int_eq(pol_path_normalize("/%61%62%63", 10, out, 5), 0);
	ck_assert_str_eq(out, "/abc");
	ck_assert_int_eq(pol_path_normalize("/", 1, out, 1), -1);
	ck_assert_int_eq(pol_path_normalize("/", 1, out, 0), -1);
	ck_assert_int_eq(pol_path_normalize("/", 0, out, sizeof(out)), -1);
}
END_TEST

/* Output is a fixed point: normalising twice changes nothing. */
START_TEST(test_path_normalize_idempotent)
{
	char		once[256], twice[256];
	const char	*in = path_cases[_i].in;

	if (pol_path_normalize(in, strlen(in), once, sizeof(once)) == -1)
		return;
	ck_assert_int_eq(pol_path_normalize(once, strlen(once), twice,
	    sizeof(twice)), 0);
	ck_assert_str_eq(once, twice);
}
END_TEST

/*
 * Every accepted normalisation of a path with "%2F" reads the same under
 * both readings: no dot segment appears once the slashes are decoded.
 */
START_TEST(test_path_enc_slash_readings)
{
	char		once[256], slashed[256];
	const char	*in = path_cases[_i].in;

	if (pol_path_normalize(in, strlen(in), once, sizeof(once)) == -1 ||
	    !pol_path_has_enc_slash(once))
		return;
	ck_assert_int_eq(pol_path_slash_reading(once, slashed,
	    sizeof(slashed)), 0);
	ck_assert_msg(strstr(slashed, "/./") == NULL &&
	    strstr(slashed, "/../") == NULL, "%s reads as %s", in, slashed);
	ck_assert_int_eq(pol_path_slash_reading(once, slashed, 2), -1);
}
END_TEST

/*
 * Random paths over the pieces that make readings differ: whatever is
 * accepted is a fixed point, reads without dot segments once "%2F" is
 * decoded, and never climbs; nothing overruns (the ASan build).
 */
START_TEST(test_path_random_readings)
{
	static const char *const piece[] = {
		"/", "/", "a", ".", "..", "%2F", "%2f", "%2E", "%2e", ";", "%3B",
		"%25", "2F", "x;y", "%41", "%5C", "//", "/..", "/.",
	};
	char		in[64], once[256], twice[256], slashed[256];
	uint32_t	seed = 0x2f2f2f2fu;
	size_t		n, k, np = sizeof(piece) / sizeof(piece[0]);
	int		iter, accepted = 0, withslash = 0;

	for (iter = 0; iter < 50000; iter++) {
		in[0] = '/';
		n = 1;
		for (k = 0; k < 6; k++) {
			const char *p;

			seed = seed * 1103515245u + 12345u;
			p = piece[(seed >> 16) % np];
			if (n + strlen(p) >= sizeof(in))
				break;
			memcpy(in + n, p, strlen(p));
			n += strlen(p);
		}
		in[n] = '\0';
		if (pol_path_normalize(in, n, once, sizeof(once)) == -1)
			continue;
		accepted++;
		ck_assert_msg(pol_path_normalize(once, strlen(once), twice,
		    sizeof(twice)) == 0 && strcmp(once, twice) == 0,
		    "%s -> %s is not a fixed point", in, once);
		ck_assert_msg(once[0] == '/' && strstr(once, "/../") == NULL &&
		    strstr(once, "/./") == NULL, "%s -> %s has dots", in, once);
		if (!pol_path_has_enc_slash(once))
			continue;
		withslash++;
		ck_assert_int_eq(pol_path_slash_reading(once, slashed,
		    sizeof(slashed)), 0);
		ck_assert_msg(strstr(slashed, "/../") == NULL &&
		    strstr(slashed, "/./") == NULL &&
		    (strlen(slashed) < 3 ||
		    strcmp(slashed + strlen(slashed) - 3, "/..") != 0) &&
		    (strlen(slashed) < 2 ||
		    strcmp(slashed + strlen(slashed) - 2, "/.") != 0),
		    "%s -> %s reads as %s", in, once, slashed);
	}
	/* the generator reaches both outcomes */
	ck_assert_int_gt(accepted, 1000);
	ck_assert_int_gt(withslash, 100);
}
END_TEST

/* pol_host_normalize */

static const struct {
	const char	*in;
	const char	*out;		/* NULL: rejected */
} hostn_cases[] = {
	{ "example.com",		"example.com" },
	{ "Example.COM",		"example.com" },
	{ "example.com.",		"example.com" },
	{ "API.OpenAI.com.",		"api.openai.com" },
	{ "a_b.example",		"a_b.example" },
	{ "x-y.example",		"x-y.example" },
	{ "localhost",			"localhost" },
	{ "1password.com",		"1password.com" },
	{ "123.example",		"123.example" },
	{ "2130706433",			"127.0.0.1" },
	{ "0x7F.1",			"127.0.0.1" },
	{ "0177.0.0.1",			"127.0.0.1" },
	{ "127.0.0.1.",			"127.0.0.1" },
	{ "2852039166",			"169.254.169.254" },
	{ "[::1]",			"::1" },
	{ "::1",			"::1" },
	{ "[::FFFF:7F00:1]",		"::ffff:127.0.0.1" },
	{ "[2001:0DB8::0001]",		"2001:db8::1" },
	{ "",				NULL },
	{ ".",				NULL },
	{ "..",				NULL },
	{ "example.com..",		NULL },
	{ ".example.com",		NULL },
	{ "a..b",			NULL },
	{ "a b.example",		NULL },
	{ "a*.example",			NULL },
	{ "*.example.com",		NULL },
	{ "exa%mple.com",		NULL },
	{ "ex/ample.com",		NULL },
	{ "ex\\ample.com",		NULL },
	{ "example.com:443",		NULL },
	{ "b\xc3\xbc" "cher.example",	NULL },
	{ "1.2.3.4.5",			NULL },
	{ "256.1.1.1",			NULL },
	{ "0x1g",			NULL },
	{ "4294967296",			NULL },
	{ "[::1",			NULL },
	{ "[127.0.0.1]",		NULL },
};

START_TEST(test_host_normalize)
{
	char	out[300];
	int	r;

	r = pol_host_normalize(hostn_cases[_i].in, out, sizeof(out));
	if (hostn_cases[_i].out == NULL)
		ck_assert_msg(r == -1, "\"%s\" accepted as \"%s\"",
		    hostn_cases[_i].in, out);
	else {
		ck_assert_msg(r == 0, "\"%s\" rejected", hostn_cases[_i].in);
		ck_assert_str_eq(out, hostn_cases[_i].out);
	}
}
END_TEST

START_TEST(test_host_normalize_lengths)
{
	char	in[400], out[300];
	size_t	i;

	/* 63-octet label fine, 64 not */
	memset(in, 'a', 63);
	strcpy(in + 63, ".test");
	ck_assert_int_eq(pol_host_normalize(in, out, sizeof(out)), 0);
	memset(in, 'a', 64);
	strcpy(in + 64, ".test");
	ck_assert_int_eq(pol_host_normalize(in, out, sizeof(out)), -1);

	/* 253 octets fine (254 with the trailing dot), 254 not */
	for (i = 0; i < 253; i++)
		in[i] = (i % 10 == 9) ? '.' : 'b';
	in[253] = '\0';
	ck_assert_int_eq(pol_host_normalize(in, out, sizeof(out)), 0);
	ck_assert_uint_eq(strlen(out), 253);
	in[253] = '.';
	in[254] = '\0';
	ck_assert_int_eq(pol_host_normalize(in, out, sizeof(out)), 0);
	ck_assert_uint_eq(strlen(out), 253);
	in[253] = 'c';
	ck_assert_int_eq(pol_host_normalize(in, out, sizeof(out)), -1);
	memset(in, 'c', sizeof(in) - 1);
	in[sizeof(in) - 1] = '\0';
	ck_assert_int_eq(pol_host_normalize(in, out, sizeof(out)), -1);

	/* output buffer too small */
	ck_assert_int_eq(pol_host_normalize("abc.test", out, 8), -1);
	ck_assert_int_eq(pol_host_normalize("abc.test", out, 9), 0);
	ck_assert_int_eq(pol_host_normalize("127.1", out, 9), -1);
	ck_assert_int_eq(pol_host_normalize("127.1", out, 10), 0);
	ck_assert_str_eq(out, "127.0.0.1");
}
END_TEST

/* The rule a deny answer suggests: the target only, quoted, bounded. */
START_TEST(test_rule_hint)
{
	struct pol_request	pr = { "api.test", 443, "POST", "/v1/a\"b",
				    NULL };
	char			out[128], small[40];

	ck_assert_int_eq(pol_rule_hint(&pr, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "{host: \"api.test\", ports: [443], methods: "
	    "[POST], paths: [\"/v1/a\\\"b\"]}");
	pr.pr_method_override = "DELETE";
	pr.pr_path = "/x\x01y";
	ck_assert_int_eq(pol_rule_hint(&pr, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "{host: \"api.test\", ports: [443], methods: "
	    "[POST, DELETE], paths: [\"/x*\"]}");
	pr.pr_path = NULL;	/* CONNECT: no methods, no paths */
	ck_assert_int_eq(pol_rule_hint(&pr, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "{host: \"api.test\", ports: [443]}");
	pr.pr_path = "/a-long-path-that-does-not-fit";
	ck_assert_int_eq(pol_rule_hint(&pr, small, sizeof(small)), -1);
	ck_assert_str_eq(small, "");
}
END_TEST

/* The hold registry without its thread: bounds, decisions, rules. */
START_TEST(test_ask_registry)
{
	struct ask_req	q = { "rid", "sb", "pol", "GET", "h.test", 80, "/p" };
	uint64_t	id1, id2, id3, left = 0;
	char		rule[32];

	id1 = ask_hold(&q, NULL, 60000, 2, NULL);
	id2 = ask_hold(&q, NULL, 60000, 2, NULL);
	ck_assert_int_eq(ask_take(id1, &left), ASK_WAITING);
	ck_assert(left > 0 && left <= 60000);
	id3 = ask_hold(&q, NULL, 60000, 2, NULL);	/* id1 gives way */
	ck_assert_int_eq(ask_take(id1, NULL), ASK_REFUSED);
	ck_assert_int_eq(ask_take(id1, NULL), ASK_GONE);
	ck_assert_int_eq(ask_decide(id2, 0, ASK_ONCE, 0, 0, rule, sizeof(rule)),
	    0);
	ck_assert_int_eq(ask_decide(id2, 1, ASK_ONCE, 0, 0, rule, sizeof(rule)),
	    -1);	/* decided already */
	ck_assert_int_eq(ask_take(id2, NULL), ASK_DENIED);
	ck_assert(!ask_rule_allows("sb", "pol", "h.test", 80, "GET", "/p"));
	ck_assert_int_eq(ask_decide(id3, 1, ASK_POLICY, 0, 0, rule, sizeof(rule)),
	    0);
	ck_assert_int_eq(ask_take(id3, NULL), ASK_APPROVED);
	ck_assert(ask_rule_allows("other", "pol", "h.test", 80, "GET", "/p"));
	ck_assert(!ask_rule_allows("sb", "pol2", "h.test", 80, "GET", "/p"));
	ck_assert(!ask_rule_allows("sb", "pol", "h.test", 443, "GET", "/p"));
	ck_assert_int_eq(ask_rule_revoke(rule), 0);
	ck_assert_int_eq(ask_rule_revoke(rule), -1);
	ck_assert(!ask_rule_allows("other", "pol", "h.test", 80, "GET", "/p"));
	/* kept to the held request: its method and exact path only */
	id1 = ask_hold(&q, NULL, 60000, 2, NULL);
	ck_assert_int_eq(ask_decide(id1, 1, ASK_SANDBOX, 1, 0, rule,
	    sizeof(rule)), 0);
	ck_assert(ask_rule_allows("sb", "pol", "h.test", 80, "GET", "/p"));
	ck_assert(!ask_rule_allows("sb", "pol", "h.test", 80, "POST", "/p"));
	ck_assert(!ask_rule_allows("sb", "pol", "h.test", 80, "GET", "/p/q"));
	ck_assert(!ask_rule_allows("sb", "pol", "h.test", 80, "GET", NULL));
	ck_assert_int_eq(ask_rule_revoke(rule), 0);
	/* timed out by the clock even before the thread says so */
	id1 = ask_hold(&q, NULL, 0, 2, NULL);
	ck_assert_int_eq(ask_take(id1, NULL), ASK_TIMEOUT);
	ask_close();
}
END_TEST

Suite *
suite_pol(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("pol");

	tc = tcase_create("match");
	tcase_add_loop_test(tc, test_host_match, 0, NELEM(hostm_cases));
	tcase_add_loop_test(tc, test_glob, 0, NELEM(glob_cases));
	tcase_add_test(tc, test_glob_no_blowup);
	suite_add_tcase(s, tc);

	tc = tcase_create("evaluate");
	tcase_add_loop_test(tc, test_evaluate, 0, NELEM(eval_cases));
	tcase_add_test(tc, test_evaluate_long_reason);
	tcase_add_loop_test(tc, test_evaluate_encoded, 0, NELEM(enc_cases));
	tcase_add_loop_test(tc, test_host_allowed, 0, NELEM(allowed_cases));
	tcase_add_test(tc, test_rule_hint);
	tcase_add_test(tc, test_ask_registry);
	suite_add_tcase(s, tc);

	tc = tcase_create("normalize");
	tcase_add_loop_test(tc, test_path_normalize, 0, NELEM(path_cases));
	tcase_add_test(tc, test_path_normalize_edges);
	tcase_add_loop_test(tc, test_path_normalize_idempotent, 0,
	    NELEM(path_cases));
	tcase_add_loop_test(tc, test_path_enc_slash_readings, 0,
	    NELEM(path_cases));
	tcase_add_test(tc, test_path_random_readings);
	tcase_add_loop_test(tc, test_host_normalize, 0, NELEM(hostn_cases));
	tcase_add_test(tc, test_host_normalize_lengths);
	suite_add_tcase(s, tc);

	return s;
}
