/*
 * Policy: request facts -> verdict. Pure, no I/O, no allocation.
 */
#ifndef AIRLOCK_POL_H
#define AIRLOCK_POL_H

#include <stddef.h>

struct cfg_policy;

enum pol_verdict {
	POL_ALLOW = 0,
	POL_DENY,
};

struct pol_request {
	const char	*pr_host;	/* normalised: lowercase, no trailing
					   dot, IP literals canonical */
	int		 pr_port;
	const char	*pr_method;	/* as sent, e.g. "GET" */
	const char	*pr_path;	/* normalised by pol_path_normalize(),
					   no query; NULL for CONNECT */
};

struct pol_result {
	enum pol_verdict pr_verdict;
	int		 pr_rule;	/* index of the matching rule, or -1 */
	char		 pr_reason[256];/* on deny: what was refused */
};

/*
 * First matching rule wins; no match = deny. On deny the reason names what
 * was refused as precisely as the rules allow, e.g.
 * "host evil.test is not allowed", "port 8080 is not allowed for host
 * a.test", "method DELETE is not allowed for a.test:80",
 * "path /admin is not allowed for a.test:80".
 */
enum pol_verdict pol_evaluate(const struct cfg_policy *,
	    const struct pol_request *, struct pol_result *);

/* "*" any; "*.example.com" strict subdomains; otherwise exact. */
int	pol_host_match(const char *pattern, const char *host);

/*
 * Does some rule of <pol> name <host> (normalised), whatever its ports,
 * methods and paths? The DNS stub answers only such names: the rest of
 * the rule is judged when the sandbox connects. Returns the index of the
 * first such rule, or -1 (also for a NULL policy or host).
 */
int	pol_host_allowed(const struct cfg_policy *pol, const char *host);

/* Glob: '*' matches any run of characters including '/'; case-sensitive. */
int	pol_glob_match(const char *pattern, const char *s);

/*
 * Normalise the path of a request target (no query; <in> is the path part
 * only): decode percent-encoded unreserved characters (ALPHA DIGIT - . _ ~),
 * upper-case the hex of other escapes, resolve "." and ".." segments.
 * Returns 0 with the result in <out>, or -1 (caller answers 400) when the
 * path does not start with '/', contains %2F, %5C or %00 (any case), a bad
 * escape, a raw NUL or backslash, climbs above "/", or does not fit.
 */
int	pol_path_normalize(const char *in, size_t len, char *out, size_t outsz);

/*
 * Normalise a host name for matching: lowercase, strip one trailing dot,
 * IPv4 literals in any radix to a dotted quad, IPv6 literals (with or
 * without brackets) to canonical form without brackets. Returns 0, or -1
 * for an empty or invalid host (bad characters, malformed numeric form).
 */
int	pol_host_normalize(const char *in, char *out, size_t outsz);

#endif
