/*
 * Policy matching: request facts -> verdict. Pure, no I/O, no allocation,
 * so every worker can call it on a shared, immutable policy.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cfg/cfg.h"
#include "dns/net_guard.h"
#include "policy/pol.h"

/* How far a rule got before it failed; the deny reason uses the best. */
enum pol_depth {
	POL_D_NONE = 0,
	POL_D_HOST,		/* host matched, port did not */
	POL_D_PORT,		/* host and port matched, method did not */
	POL_D_METHOD,		/* all but the path matched */
	POL_D_ALL,
};

/* cfg fills ports; an empty list means SPEC's default, [80, 443]. */
static const int	pol_default_ports[] = { 80, 443 };

int
pol_host_match(const char *pattern, const char *host)
{
	size_t	plen, hlen;

	if (pattern == NULL || host == NULL)
		return 0;
	if (strcmp(pattern, "*") == 0)
		return 1;
	if (strchr(pattern, '/') != NULL) {
		/* a network: only IP literals fall in it */
		struct net_cidr	nc;
		struct net_addr	a;

		return net_cidr_parse(pattern, &nc) == 0 &&
		    net_host_literal(host, &a) == 1 &&
		    net_cidr_contains(&nc, &a);
	}
	if (pattern[0] == '*' && pattern[1] == '.') {
		/* ".example.com": strict subdomains, not the apex itself */
		plen = strlen(pattern + 1);
		hlen = strlen(host);
		return hlen > plen &&
		    strcasecmp(host + hlen - plen, pattern + 1) == 0;
	}
	return strcasecmp(pattern, host) == 0;
}

int
pol_host_allowed(const struct cfg_policy *pol, const char *host)
{
	size_t	i;

	if (pol == NULL || host == NULL)
		return -1;
	for (i = 0; i < pol->p_nrules; i++)
		if (pol_host_match(pol->p_rules[i].r_host, host))
			return (int)i;
	return -1;
}

/*
 * Iterative glob with one backtrack point: on a mismatch, the most recent
 * '*' absorbs one more character. Earlier stars never need revisiting
 * because '*' matches any run, so the cost is O(len(p) * len(s)) at worst
 * instead of exponential ("*a*a*a*a*b" against a long run of 'a').
 */
int
pol_glob_match(const char *pattern, const char *s)
{
	const char	*p = pattern, *star = NULL, *mark = NULL;

	if (pattern == NULL || s == NULL)
		return 0;
	while (*s != '\0') {
		if (*p == '*') {
			while (*p == '*')
				p++;
			if (*p == '\0')
				return 1;	/* a trailing star eats all */
			star = p;
			mark = s;
		} else if (*p == *s) {
			p++;
			s++;
		} else if (star != NULL) {
			p = star;
			s = ++mark;
		} else
			return 0;
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

static int
pol_port_match(const struct cfg_rule *r, int port)
{
	const int	*ports = r->r_ports;
	size_t		 n = r->r_nports, i;

	if (ports == NULL || n == 0) {
		ports = pol_default_ports;
		n = sizeof(pol_default_ports) / sizeof(pol_default_ports[0]);
	}
	for (i = 0; i < n; i++)
		if (ports[i] == port)
			return 1;
	return 0;
}

/* Methods are compared as sent: "get" is not "GET". */
static int
pol_method_match(const struct cfg_rule *r, const char *method)
{
	size_t	i;

	if (r->r_methods == NULL || r->r_nmethods == 0)
		return 1;
	if (method == NULL)
		return 0;
	for (i = 0; i < r->r_nmethods; i++)
		if (r->r_methods[i] != NULL &&
		    strcmp(r->r_methods[i], method) == 0)
			return 1;
	return 0;
}

static int
pol_path_match(const struct cfg_rule *r, const char *path)
{
	size_t	i;

	if (r->r_paths == NULL || r->r_npaths == 0)
		return 1;
	for (i = 0; i < r->r_npaths; i++)
		if (pol_glob_match(r->r_paths[i], path))
			return 1;
	return 0;
}

/*
 * A tunnel (CONNECT, or transparent TLS before interception) carries no
 * path, and the method of a rule names the HTTP requests inside it, not
 * CONNECT. So with pr_path == NULL a rule matches on host and port alone:
 * an intercepted tunnel has each inner request judged again in full; a
 * spliced one cannot be looked into, which is what "intercept: false"
 * asks for. <path> is the reading of pr_path that globs see. A method
 * that a method-override header names must be allowed as well
 * (*by_override says that it was what failed).
 */
static enum pol_depth
pol_rule_match(const struct cfg_rule *r, const struct pol_request *req,
    const char *path, int *by_override)
{
	*by_override = 0;
	if (!pol_host_match(r->r_host, req->pr_host))
		return POL_D_NONE;
	if (!pol_port_match(r, req->pr_port))
		return POL_D_HOST;
	if (req->pr_path == NULL)
		return POL_D_ALL;
	if (!pol_method_match(r, req->pr_method))
		return POL_D_PORT;
	if (req->pr_method_override != NULL &&
	    !pol_method_match(r, req->pr_method_override)) {
		*by_override = 1;
		return POL_D_PORT;
	}
	if (!pol_path_match(r, path))
		return POL_D_METHOD;
	return POL_D_ALL;
}

static void
pol_deny_reason(const struct pol_request *req, enum pol_depth best,
    int by_override, struct pol_result *res)
{
	const char	*host = req->pr_host != NULL ? req->pr_host : "";
	const char	*lb = "", *rb = "";

	if (strchr(host, ':') != NULL) {
		lb = "[";	/* keep "[::1]:80" readable */
		rb = "]";
	}
	switch (best) {
	case POL_D_METHOD:
		snprintf(res->pr_reason, sizeof(res->pr_reason),
		    "path %s is not allowed for %s%s%s:%d", req->pr_path,
		    lb, host, rb, req->pr_port);
		break;
	case POL_D_PORT:
		if (by_override)
			snprintf(res->pr_reason, sizeof(res->pr_reason),
			    "method %s, named by a method-override header, is "
			    "not allowed for %s%s%s:%d",
			    req->pr_method_override, lb, host, rb,
			    req->pr_port);
		else
			snprintf(res->pr_reason, sizeof(res->pr_reason),
			    "method %s is not allowed for %s%s%s:%d",
			    req->pr_method != NULL ? req->pr_method : "-",
			    lb, host, rb, req->pr_port);
		break;
	case POL_D_HOST:
		snprintf(res->pr_reason, sizeof(res->pr_reason),
		    "port %d is not allowed for host %s", req->pr_port, host);
		break;
	default:
		snprintf(res->pr_reason, sizeof(res->pr_reason),
		    "host %s is not allowed", host);
		break;
	}
}

/*
 * A rule with "paths" judged the path as sent; an upstream that decodes
 * twice reads "%252e%252e" as "..". That is not a path this rule can
 * vouch for.
 */
static enum pol_verdict
pol_double_encoded(const struct pol_request *req, size_t rule,
    struct pol_result *res)
{
	res->pr_verdict = POL_BAD;
	res->pr_rule = (int)rule;
	snprintf(res->pr_reason, sizeof(res->pr_reason), "path %s has an "
	    "encoded %% before two hex digits (double encoding), refused "
	    "under a rule with paths", req->pr_path);
	return POL_BAD;
}

enum pol_verdict
pol_evaluate(const struct cfg_policy *pol, const struct pol_request *req,
    struct pol_result *res)
{
	enum pol_depth	 best = POL_D_NONE, d;
	char		 slashed[POL_PATH_MAX];
	const char	*path = req->pr_path;
	const struct cfg_rule *r;
	int		 by_override, best_override = 0, dbl = 0;
	size_t		 i;

	res->pr_rule = -1;
	res->pr_reason[0] = '\0';
	if (path != NULL && pol_path_has_enc_slash(path)) {
		/* both readings agree (pol_path_normalize): "%2F" is '/' */
		if (pol_path_slash_reading(path, slashed, sizeof(slashed)) ==
		    -1) {
			res->pr_verdict = POL_BAD;
			snprintf(res->pr_reason, sizeof(res->pr_reason),
			    "path with encoded slashes is too long");
			return POL_BAD;
		}
		path = slashed;
	}
	if (req->pr_path != NULL)
		dbl = pol_path_double_encoded(req->pr_path);
	for (i = 0; pol != NULL && i < pol->p_nrules; i++) {
		r = &pol->p_rules[i];
		d = pol_rule_match(r, req, path, &by_override);
		if (d == POL_D_ALL) {
			if (dbl && r->r_paths != NULL && r->r_npaths > 0)
				return pol_double_encoded(req, i, res);
			res->pr_verdict = POL_ALLOW;
			res->pr_rule = (int)i;
			return POL_ALLOW;
		}
		if (d > best) {
			best = d;
			best_override = by_override;
		}
	}

	/* Name the most specific thing some rule would have allowed. */
	res->pr_verdict = POL_DENY;
	pol_deny_reason(req, best, best_override, res);
	return POL_DENY;
}
