/*
 * Replay and suggestion: judge recorded audit requests again under another
 * config with the gateway's own allowlist code (pol_evaluate), and turn
 * observed paths into rule globs. Pure, no I/O; airlockctl reads the files.
 */
#ifndef AIRLOCK_POL_REPLAY_H
#define AIRLOCK_POL_REPLAY_H

#include <stddef.h>

struct cfg;

/* What one audit record says (NULL / -1: the field was absent). */
struct pol_arec {
	const char	*pa_id;
	const char	*pa_sandbox;
	const char	*pa_mode;	/* explicit|transparent */
	const char	*pa_proto;	/* http|https|tunnel|dns */
	const char	*pa_method;
	const char	*pa_host;
	int		 pa_port;
	const char	*pa_path;	/* no query */
	const char	*pa_decision;	/* allow|deny */
	const char	*pa_reason;
	const char	*pa_rule;	/* POLICY#INDEX */
	const char	*pa_tls;	/* intercept|splice|none */
	const char	*pa_country;
};

enum pol_replay_kind {
	POL_RP_SAME = 0,		/* same outcome under the new config */
	POL_RP_ALLOW_TO_DENY,
	POL_RP_DENY_TO_ALLOW,
	POL_RP_UNJUDGED,		/* the record does not say enough */
};

struct pol_replay_out {
	enum pol_replay_kind	 po_kind;
	int			 po_new_allow;	/* the new allowlist allows */
	char			 po_new_rule[160];	/* POLICY#INDEX or "" */
	char			 po_why[400];	/* deny reason under the new
						   config, or why unjudged */
};

/*
 * Judge <rec> under <ncfg>: the sandbox's policy in <ncfg> (absent: "no
 * such sandbox", a deny), host, port, method and path through
 * pol_evaluate, then the new policy's country lists when it has any.
 * Records whose outcome did not come from the allowlist (DNS queries,
 * unidentified connections, transparent tunnels named by SNI, denials
 * before the allowlist or after it by the destination guard, GeoIP,
 * secrets or caps) are POL_RP_UNJUDGED with the reason in po_why, unless
 * the new allowlist denies them too (then the outcome is a deny either way).
 */
void	pol_replay_judge(const struct cfg *ncfg, const struct pol_arec *rec,
	    struct pol_replay_out *out);

/* Is <reason> one pol_evaluate (or a missing policy) gives on a deny? */
int	pol_replay_allowlist_reason(const char *reason);

/*
 * Generalise observed paths (normalised, no query) into sorted, unique
 * globs: two or more distinct paths under one first segment ("/v1/a",
 * "/v1/b/c") become "/v1/" followed by a star; any other path stays
 * exact. More than POL_SUGGEST_MAX_GLOBS globs collapse to "/" and a star
 * (any path). Returns a new array of
 * new strings (*nout of them); caller frees with pol_globs_free().
 */
#define POL_SUGGEST_MAX_GLOBS	32
char	**pol_paths_generalise(const char *const *paths, size_t n,
	    size_t *nout);
void	  pol_globs_free(char **globs, size_t n);

#endif
