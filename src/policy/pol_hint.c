/*
 * Deny answers that help: the rule an operator would add to allow what
 * the allowlist refused (pol_rule_hint), and the start/reload warning
 * for policies that only report.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cfg/cfg.h"
#include "policy/pol.h"
#include "util/log.h"

/* Append <s> as a YAML double-quoted scalar; a path stops at a byte no
 * glob could name plainly and gets '*' instead. */
static size_t
hint_quote(char *out, size_t n, size_t outsz, const char *s, int glob)
{
	const unsigned char	*p;

	/* worst case per byte: an escape and the byte, then '*' '"' NUL */
	for (p = (const unsigned char *)s, out[n++] = '"'; *p != '\0'; p++) {
		if (n + 5 > outsz)
			return outsz;
		if (*p < 0x21 || *p > 0x7e) {
			if (glob)
				out[n++] = '*';
			break;
		}
		if (*p == '"' || *p == '\\')
			out[n++] = '\\';
		out[n++] = (char)*p;
	}
	if (n + 2 > outsz)
		return outsz;
	out[n++] = '"';
	out[n] = '\0';
	return n;
}

int
pol_rule_hint(const struct pol_request *pr, char *out, size_t outsz)
{
	size_t	n;
	int	w;

	if (outsz < 16)
		return -1;
	n = (size_t)snprintf(out, outsz, "{host: ");
	n = hint_quote(out, n, outsz, pr->pr_host, 0);
	if (n >= outsz)
		goto toolong;
	w = snprintf(out + n, outsz - n, ", ports: [%d]", pr->pr_port);
	if (w < 0 || (size_t)w >= outsz - n)
		goto toolong;
	n += (size_t)w;
	if (pr->pr_path != NULL) {
		/* methods are tokens (the parser saw to it): no quoting */
		if (pr->pr_method_override != NULL &&
		    strcmp(pr->pr_method_override, pr->pr_method) != 0)
			w = snprintf(out + n, outsz - n, ", methods: [%s, %s]",
			    pr->pr_method, pr->pr_method_override);
		else
			w = snprintf(out + n, outsz - n, ", methods: [%s]",
			    pr->pr_method);
		if (w < 0 || (size_t)w >= outsz - n)
			goto toolong;
		n += (size_t)w;
		w = snprintf(out + n, outsz - n, ", paths: [");
		if (w < 0 || (size_t)w >= outsz - n)
			goto toolong;
		n = hint_quote(out, n + (size_t)w, outsz, pr->pr_path, 1);
		if (n >= outsz)
			goto toolong;
		if (n + 2 >= outsz)
			goto toolong;
		out[n++] = ']';
	}
	if (n + 2 >= outsz)
		goto toolong;
	out[n++] = '}';
	out[n] = '\0';
	return 0;
toolong:
	out[0] = '\0';
	return -1;
}

void
pol_report_warn(const struct cfg *cfg)
{
	size_t	i;

	for (i = 0; i < cfg->c_npolicies; i++)
		if (cfg->c_policies[i].p_report)
			log_warnx("policy \"%s\" is in report mode: requests its "
			    "rules would deny are forwarded (audited "
			    "would_deny); the destination guard, secrets and "
			    "caps still refuse", cfg->c_policies[i].p_name);
}

int
pol_unmatched(const struct cfg_policy *p, struct pol_result *res,
    char *would_deny, size_t wdsz, int *ask)
{
	if (p->p_unmatched_ask)
		*ask = 1;
	else if (p->p_report)
		snprintf(would_deny, wdsz, "%s", res->pr_reason);
	else
		return 0;
	res->pr_verdict = POL_ALLOW;
	res->pr_rule = -1;
	return 1;
}
