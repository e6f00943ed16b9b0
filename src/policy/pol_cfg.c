/*
 * The "policies" keys: each policy's rules and geo lists (its caps are
 * budget/bud_cfg.c's).
 * Checked by the walker in src/cfg/ (cfg_walk.h); listed in cfg_planes.h.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cfg/cfg_walk.h"
#include "util/util.h"
#include "cfg/cfg_planes.h"

/* policies and their rules */

struct cfg_pctx {
	struct cfg_policy	*pc_pol;
	const yaml_node_t	*pc_name;
};

static void
cfg_k_rule_host(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule	*r = arg;
	const char	*s, *why;

	s = cfg_str(v);
	if ((why = cfg_host_pattern(s, &r->r_host)) != NULL)
		cfg_err(cp, v, "bad host \"%s\": %s", s, why);
}

/* The list of key <k>, refusing [] where absent means "any". */
static size_t
cfg_rule_list(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v)
{
	size_t	n;

	if ((n = cfg_seq_len(v)) == 0)
		cfg_err(cp, v, "\"%s\" is an empty list: leave the key out "
		    "to allow any", k->k_name);
	return n;
}

static void
cfg_k_rule_ports(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule	*r = arg;
	yaml_node_t	*item;
	const char	*s;
	uint64_t	 port;
	size_t		 i, n;

	if ((n = cfg_rule_list(cp, k, v)) == 0)
		return;
	r->r_ports = xcalloc(n, sizeof(int));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "a port", "a number")) == NULL)
			continue;
		if (cfg_parse_uint(s, 65535, &port) == -1 || port == 0) {
			cfg_err(cp, item, "bad port \"%s\": must be a number "
			    "from 1 to 65535", s);
			continue;
		}
		r->r_ports[r->r_nports++] = (int)port;
	}
}

static void
cfg_k_rule_methods(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule	*r = arg;
	yaml_node_t	*item;
	const char	*s;
	char		*m;
	size_t		 i, j, n;

	if ((n = cfg_rule_list(cp, k, v)) == 0)
		return;
	r->r_methods = xcalloc(n, sizeof(char *));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "a method", "a string")) == NULL)
			continue;
		if (strcmp(s, "*") == 0) {
			cfg_err(cp, item, "bad method \"*\": leave "
			    "\"methods\" out to allow any");
			continue;
		}
		m = xstrdup(s);
		for (j = 0; m[j] != '\0'; j++)
			m[j] = (char)toupper((unsigned char)m[j]);
		if (!cfg_method_ok(m)) {
			cfg_err(cp, item, "bad method \"%s\": not an HTTP "
			    "method token", s);
			free(m);
			continue;
		}
		r->r_methods[r->r_nmethods++] = m;
	}
}

static void
cfg_k_rule_paths(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule	*r = arg;
	yaml_node_t	*item;
	const char	*s, *why;
	size_t		 i, n;

	if ((n = cfg_rule_list(cp, k, v)) == 0)
		return;
	r->r_paths = xcalloc(n, sizeof(char *));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "a path", "a string")) == NULL)
			continue;
		if ((why = cfg_path_glob_check(s)) != NULL) {
			cfg_err(cp, item, "bad path \"%s\": %s", s, why);
			continue;
		}
		r->r_paths[r->r_npaths++] = xstrdup(s);
	}
}

/* Names only: resolved in cfg_finish(), as "secrets" may come later. */
static void
cfg_k_rule_secrets(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule		*r = arg;
	struct cfg_namev	 nv = { NULL, 0, 0 };
	struct cfg_secref	*sr;
	yaml_node_t		*item;
	const char		*s;
	size_t			 i;

	r->r_secrets = xcalloc(cfg_seq_len(v), sizeof(*r->r_secrets));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "a secret name", "a string")) ==
		    NULL)
			continue;
		if (cp->cp_nsecrefs == cp->cp_secrefs_cap) {
			cp->cp_secrefs_cap = cp->cp_secrefs_cap == 0 ? 16 :
			    cp->cp_secrefs_cap * 2;
			cp->cp_secrefs = xrealloc(cp->cp_secrefs,
			    cp->cp_secrefs_cap * sizeof(*cp->cp_secrefs));
		}
		sr = &cp->cp_secrefs[cp->cp_nsecrefs++];
		sr->sr_rule = r;
		sr->sr_node = item;
		cfg_namev_add(&nv, s, item);
	}
	cfg_check_dups(cp, nv.nv_v, nv.nv_n, "secret");
	free(nv.nv_v);
}

static void
cfg_k_rule_meter(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule	*r = arg;
	const char	*s;

	s = cfg_str(v);
	if (strcmp(s, "openai") == 0)
		r->r_meter = CFG_METER_OPENAI;
	else if (strcmp(s, "anthropic") == 0)
		r->r_meter = CFG_METER_ANTHROPIC;
	else if (strcmp(s, "gemini") == 0)
		r->r_meter = CFG_METER_GEMINI;
	else if (strcmp(s, "none") == 0)
		r->r_meter = CFG_METER_NONE;
	else
		cfg_err(cp, v, "\"meter\" must be openai, anthropic, gemini or "
		    "none, not \"%s\"", s);
}

/* async_usd: what one asynchronous job (batch, fine-tuning, run,
 * background response) is charged on a metered rule; allows them. */
static void
cfg_k_rule_async(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule	*r = arg;
	int		 nerr = cp->cp_errors;

	cfg_set_money(cp, k, v, arg);
	r->r_has_async = cp->cp_errors == nerr;
}

/* action: allow (the default) or ask: held for an operator. */
static void
cfg_k_rule_action(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule	*r = arg;
	const char	*s = cfg_str(v);

	if (strcmp(s, "ask") == 0)
		r->r_ask = 1;
	else if (strcmp(s, "allow") != 0)
		cfg_err(cp, v, "\"action\" must be allow or ask, not \"%s\"",
		    s);
}

/* A tools or deny_tools list of mcp: names or fnmatch(3) globs. */
static void
cfg_mcp_list(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    char ***out, size_t *nout)
{
	yaml_node_t	*item;
	const char	*s;
	size_t		 i, n;

	if ((n = cfg_rule_list(cp, k, v)) == 0)
		return;
	*out = xcalloc(n, sizeof(char *));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "a tool name or glob",
		    "a string")) == NULL)
			continue;
		if (s[0] == '\0' || strlen(s) > 128) {
			cfg_err(cp, item, "bad tool \"%.40s\": a name or glob "
			    "of 1 to 128 characters", s);
			continue;
		}
		(*out)[(*nout)++] = xstrdup(s);
	}
}

static void
cfg_k_mcp_tools(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_mcp	*m = arg;

	cfg_mcp_list(cp, k, v, &m->m_tools, &m->m_ntools);
}

static void
cfg_k_mcp_deny(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_mcp	*m = arg;

	cfg_mcp_list(cp, k, v, &m->m_deny, &m->m_ndeny);
}

static const struct cfg_key cfg_mcp_keys[] = {
	CFG_SEQ("tools", 0, cfg_k_mcp_tools),
	CFG_SEQ("deny_tools", 0, cfg_k_mcp_deny),
	CFG_END,
};

/* mcp: {tools, deny_tools}: the rule's host is an MCP server whose
 * JSON-RPC bodies are judged (policy/pol_mcp_stage.c). */
static void
cfg_k_rule_mcp(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule	*r = arg;

	(void)k;
	r->r_mcp = xcalloc(1, sizeof(*r->r_mcp));
	cfg_walk_map(cp, v, "mcp", cfg_mcp_keys, r->r_mcp);
	if (cfg_map_key(cp, v, "tools", NULL) == NULL &&
	    cfg_map_key(cp, v, "deny_tools", NULL) == NULL)
		cfg_err(cp, v, "\"mcp\" needs \"tools\" or \"deny_tools\"");
}

static const struct cfg_key cfg_rule_keys[] = {
	CFG_SCALAR("host", CFG_K_REQUIRED, cfg_k_rule_host, 0,
	    "a host pattern"),
	CFG_SEQ("ports", 0, cfg_k_rule_ports),
	CFG_SEQ("methods", 0, cfg_k_rule_methods),
	CFG_SEQ("paths", 0, cfg_k_rule_paths),
	CFG_BOOL("intercept", 0, offsetof(struct cfg_rule, r_intercept)),
	CFG_SEQ("secrets", 0, cfg_k_rule_secrets),
	CFG_SCALAR("meter", 0, cfg_k_rule_meter, 0,
	    "openai, anthropic, gemini or none"),
	CFG_SCALAR("async_usd", 0, cfg_k_rule_async,
	    offsetof(struct cfg_rule, r_async_usd), "an amount of USD"),
	CFG_SCALAR("via", 0, up_cfg_k_via, 0,
	    "direct, http://HOST:PORT or socks5://HOST:PORT"),
	CFG_SCALAR("action", 0, cfg_k_rule_action, 0, "allow or ask"),
	CFG_MAP("mcp", 0, cfg_k_rule_mcp),
	CFG_END,
};

/*
 * A spliced rule lets TLS through undecrypted once its SNI matches the
 * host: no request inside is ever seen, so methods and paths could not be
 * enforced, nor secrets attached, nor usage metered. Refused rather than
 * silently ignored.
 */
static void
cfg_rule_splice_check(struct cfg_parse *cp, yaml_node_t *map,
    const struct cfg_rule *r)
{
	static const char	*keys[] = { "methods", "paths" };
	yaml_node_t		*key, *val;
	size_t			 i;

	if (r->r_intercept)
		return;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		val = NULL;
		if ((key = cfg_map_key(cp, map, keys[i], &val)) == NULL ||
		    val == NULL || cfg_is_null(val))
			continue;
		cfg_err(cp, key, "methods/paths cannot be enforced on a "
		    "spliced (intercept: false) rule; remove \"%s\" or "
		    "intercept the rule", keys[i]);
	}
	val = NULL;
	if ((key = cfg_map_key(cp, map, "secrets", &val)) != NULL &&
	    val != NULL && !cfg_is_null(val) &&
	    !(val->type == YAML_SEQUENCE_NODE && cfg_seq_len(val) == 0))
		cfg_err(cp, key, "secrets cannot be attached on a spliced "
		    "(intercept: false) rule; remove \"secrets\" or "
		    "intercept the rule");
	/* "meter: none" says what a spliced rule does anyway. */
	if (r->r_meter != CFG_METER_NONE &&
	    (key = cfg_map_key(cp, map, "meter", NULL)) != NULL)
		cfg_err(cp, key, "usage cannot be metered on a spliced "
		    "(intercept: false) rule, its responses are not decrypted; "
		    "remove \"meter\" or intercept the rule");
}

static void
cfg_k_policy_name(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_pctx	*pc = arg;

	pc->pc_pol->p_name = cfg_name_dup(cp, v, "policy name");
	pc->pc_name = v;
}

static void
cfg_k_policy_rules(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	static const int	 defports[] = { 80, 443 };
	struct cfg_policy	*p = ((struct cfg_pctx *)arg)->pc_pol;
	struct cfg_rule		*r;
	yaml_node_t		*item;
	size_t			 i;

	p->p_rules = xcalloc(cfg_seq_len(v), sizeof(*p->p_rules));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		r = &p->p_rules[p->p_nrules++];
		r->r_line = (int)item->start_mark.line + 1;
		r->r_col = (int)item->start_mark.column + 1;
		r->r_intercept = 1;
		if (cfg_want_map(cp, item, "a rule") == -1)
			continue;
		cfg_walk_map(cp, item, "rule", cfg_rule_keys, r);
		cfg_rule_splice_check(cp, item, r);
		if (r->r_mcp != NULL && !r->r_intercept)
			cfg_err(cp, item, "\"mcp\" reads JSON-RPC bodies, "
			    "which a spliced (intercept: false) rule never "
			    "sees; intercept the rule");
		if (r->r_ask && !r->r_intercept)
			cfg_err(cp, item, "\"action: ask\" holds requests, "
			    "which a spliced (intercept: false) rule never "
			    "sees; intercept the rule");
		if (r->r_ports == NULL) {
			r->r_ports = xmalloc(sizeof(defports));
			memcpy(r->r_ports, defports, sizeof(defports));
			r->r_nports = 2;
		}
	}
}

static void
cfg_k_policy_caps(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_policy	*p = ((struct cfg_pctx *)arg)->pc_pol;

	cfg_walk_map(cp, v, "caps", bud_cfg_caps_keys, &p->p_caps);
}

/* A list of ISO 3166-1 alpha-2 codes, kept upper-case. */
static void
cfg_geo_list(struct cfg_parse *cp, yaml_node_t *v, const char *what,
    char (**out)[3], size_t *n)
{
	yaml_node_t	*item;
	const char	*s;
	size_t		 i;

	*out = xcalloc(cfg_seq_len(v) + 1, sizeof(**out));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "a country code",
		    "a two-letter code such as \"KP\"")) == NULL)
			continue;
		if (strlen(s) != 2 || !isalpha((unsigned char)s[0]) ||
		    !isalpha((unsigned char)s[1])) {
			cfg_err(cp, item, "bad country code \"%s\" in %s: "
			    "use ISO 3166 two-letter codes such as \"KP\"",
			    s, what);
			continue;
		}
		(*out)[*n][0] = (char)toupper((unsigned char)s[0]);
		(*out)[*n][1] = (char)toupper((unsigned char)s[1]);
		(*out)[*n][2] = '\0';
		(*n)++;
	}
}

static void
cfg_k_geo_deny(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg_policy	*p = arg;

	cfg_geo_list(cp, v, "\"deny_countries\"", &p->p_geo_deny,
	    &p->p_ngeo_deny);
}

static void
cfg_k_geo_allow(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_policy	*p = arg;

	cfg_geo_list(cp, v, "\"allow_countries\"", &p->p_geo_allow,
	    &p->p_ngeo_allow);
}

static const struct cfg_key cfg_geo_keys[] = {
	CFG_SEQ("deny_countries", 0, cfg_k_geo_deny),
	CFG_SEQ("allow_countries", 0, cfg_k_geo_allow),
	CFG_END,
};

static void
cfg_k_policy_geo(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_policy	*p = ((struct cfg_pctx *)arg)->pc_pol;

	cfg_walk_map(cp, v, "geo", cfg_geo_keys, p);
	if (cp->cp_geo_node == NULL && p->p_ngeo_deny + p->p_ngeo_allow > 0)
		cp->cp_geo_node = v;	/* checked once geoip is known */
}

/* mode: enforce (the default) or report (observe only). */
static void
cfg_k_policy_mode(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_policy	*p = ((struct cfg_pctx *)arg)->pc_pol;
	const char		*s = cfg_str(v);

	if (strcmp(s, "report") == 0)
		p->p_report = 1;
	else if (strcmp(s, "enforce") != 0)
		cfg_err(cp, v, "\"mode\" must be enforce or report, not "
		    "\"%s\"", s);
}

static void
cfg_k_policy_unmatched(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_policy	*p = ((struct cfg_pctx *)arg)->pc_pol;
	const char		*s = cfg_str(v);

	if (strcmp(s, "ask") == 0)
		p->p_unmatched_ask = 1;
	else if (strcmp(s, "deny") != 0)
		cfg_err(cp, v, "\"on_unmatched\" must be deny or ask, not "
		    "\"%s\"", s);
}

static const struct cfg_key cfg_policy_keys[] = {
	CFG_SCALAR("name", CFG_K_REQUIRED, cfg_k_policy_name, 0, "a string"),
	CFG_SEQ("rules", 0, cfg_k_policy_rules),
	CFG_MAP("geo", 0, cfg_k_policy_geo),
	CFG_MAP("caps", 0, cfg_k_policy_caps),
	CFG_SCALAR("mode", 0, cfg_k_policy_mode, 0, "enforce or report"),
	CFG_SCALAR("on_unmatched", 0, cfg_k_policy_unmatched, 0,
	    "deny or ask"),
	CFG_END,
};

static void
cfg_k_policies(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	struct cfg_pctx	 pc;
	struct cfg_name	*names;
	yaml_node_t	*item;
	size_t		 i, nnames = 0;

	c->c_policies = xcalloc(cfg_seq_len(v), sizeof(*c->c_policies));
	names = xcalloc(cfg_seq_len(v), sizeof(*names));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		pc.pc_pol = &c->c_policies[c->c_npolicies++];
		pc.pc_pol->p_caps.cp_llm_concurrency = CFG_LLM_CONCURRENCY;
		pc.pc_pol->p_caps.cp_clamp = 1;
		pc.pc_pol->p_caps.cp_cut_streams = -1;
		pc.pc_name = NULL;
		if (cfg_want_map(cp, item, "a policy") == -1)
			continue;
		cfg_walk_map(cp, item, "policy", cfg_policy_keys, &pc);
		if (pc.pc_pol->p_name != NULL) {
			names[nnames].n_name = pc.pc_pol->p_name;
			names[nnames++].n_node = pc.pc_name;
		}
	}
	cfg_check_dups(cp, names, nnames, "policy name");
	free(names);
}

/* ask.webhook: plain http:// (a chat-ops relay beside the gateway). */
static void
cfg_k_ask_webhook(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s = cfg_str(v), *why;
	char		*hp, *slash, *canon = NULL;

	if (strncmp(s, "http://", 7) != 0) {
		cfg_err(cp, v, "\"webhook\" must be an http:// URL, not "
		    "\"%s\"", s);
		return;
	}
	hp = xstrdup(s + 7);
	if ((slash = strchr(hp, '/')) != NULL)
		*slash = '\0';
	/* an IP literal: the gateway resolves no name for itself */
	if ((why = cfg_parse_hostport(hp, 80, &canon)) != NULL)
		cfg_err(cp, v, "bad \"webhook\" \"%s\": %s", s, why);
	else
		c->c_ask_webhook = xstrdup(s);
	free(canon);
	free(hp);
}

static const struct cfg_key cfg_ask_keys[] = {
	CFG_DURATION("timeout", 0, offsetof(struct cfg, c_ask_timeout_ms), 1,
	    3600 * 1000),
	CFG_SCALAR("webhook", 0, cfg_k_ask_webhook, 0, "an http:// URL"),
	CFG_COUNT("max_pending_per_sandbox", 0,
	    offsetof(struct cfg, c_ask_max_pending), 1, 10000),
	CFG_END,
};

const struct cfg_key pol_cfg_keys[] = {
	CFG_SEQ("policies", 0, cfg_k_policies),
	CFG_NEST("ask", 0, cfg_ask_keys, "ask", 0),
	CFG_END,
};
