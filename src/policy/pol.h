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
	POL_BAD,		/* ambiguous under the rule: answer 400 */
};

/*
 * Longest path with an encoded slash that is judged (the request target
 * is bounded by HTTP_MAX_URI anyway): both readings are built on the
 * stack.
 */
#define POL_PATH_MAX	8256

struct pol_request {
	const char	*pr_host;	/* normalised: lowercase, no trailing
					   dot, IP literals canonical */
	int		 pr_port;
	const char	*pr_method;	/* as sent, e.g. "GET" */
	const char	*pr_path;	/* normalised by pol_path_normalize(),
					   no query; NULL for CONNECT */
	const char	*pr_method_override; /* the method a method-override
					   header names, upper-cased, or
					   NULL; read only with a pr_path */
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
 *
 * A path with "%2F" is matched with each encoded slash read as '/' (the
 * path normaliser has made sure both readings agree, see SPEC "Paths").
 * A method-override header's method must be allowed by the rule too. A
 * rule with "paths" that would allow a path with "%25" and two hex
 * digits (double encoding) answers POL_BAD, with pr_rule set, instead.
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
 * "%2F" is not a separator: it stays as the client wrote it ("%2f" too),
 * and the path is refused unless decoding it before resolving dots gives
 * the same path (no "..%2F", no dot segment popping one). Returns 0 with
 * the result in <out>, or -1 (caller answers 400) when the path does not
 * start with '/', contains %5C or %00 (any case), a bad escape, a raw NUL
 * or backslash, a dot segment with ";" parameters ("..;", ".;x"), climbs
 * above "/", reads two ways around an encoded slash, or does not fit.
 */
int	pol_path_normalize(const char *in, size_t len, char *out, size_t outsz);

/* Does a normalised path contain "%2F" (either case)? */
int	pol_path_has_enc_slash(const char *path);

/*
 * <path> with every "%2F" read as '/', into <out>. 0, or -1 when it does
 * not fit.
 */
int	pol_path_slash_reading(const char *path, char *out, size_t outsz);

/*
 * Does a normalised path hold "%25" followed by two hex digits, which an
 * upstream that decodes twice reads as another escape ("%252e" → ".")?
 */
int	pol_path_double_encoded(const char *path);

/*
 * Normalise a host name for matching: lowercase, strip one trailing dot,
 * IPv4 literals in any radix to a dotted quad, IPv6 literals (with or
 * without brackets) to canonical form without brackets. Returns 0, or -1
 * for an empty or invalid host (bad characters, malformed numeric form).
 */
int	pol_host_normalize(const char *in, char *out, size_t outsz);

/*
 * The smallest rule that would allow <pr>, as one line of YAML (a flow
 * mapping for a policy's "rules" list): its host, port, the method (and
 * a method override's) and the path, quoted. Only the request target is
 * named, never a header or body value; a path with bytes outside
 * printable ASCII is cut there and ends in "*". Returns 0, or -1 when it
 * does not fit (out is then "").
 */
int	pol_rule_hint(const struct pol_request *pr, char *out, size_t outsz);

/*
 * No rule of <p> allowed the request (<res> says why): does the policy
 * let it go on anyway? on_unmatched: ask holds it for an operator (*ask
 * set); mode: report forwards it, the refusal copied to <would_deny> for
 * the audit. Returns 1 (res->pr_rule then -1: no rule), or 0: denied.
 */
int	pol_unmatched(const struct cfg_policy *p, struct pol_result *res,
	    char *would_deny, size_t wdsz, int *ask);

/* Log a warning for every policy of <cfg> in report mode (start, reload). */
struct cfg;
void	pol_report_warn(const struct cfg *cfg);

/*
 * pol_evaluate() for exchange <x> (policy NULL: POL_DENY), which gets the
 * rule that matched, "policy#N", for the audit (pol_stage.c).
 */
struct xchg;
enum pol_verdict pol_xchg_eval(const struct cfg_policy *, struct xchg *x,
		    const struct pol_request *, struct pol_result *);
/*
 * The judgment of the policy stage: pol_xchg_eval(), then what no rule
 * allowed goes on under report mode (x_would_deny) or on_unmatched: ask
 * (POL_ALLOW, pr_rule -1), and x_ask says whether the exchange is held.
 */
enum pol_verdict pol_xchg_judge(const struct cfg_policy *, struct xchg *x,
		    const struct pol_request *, struct pol_result *);

#endif
