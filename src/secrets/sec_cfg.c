/*
 * The "secrets" keys: each secret's source, hosts, inject form,
 * placeholder and sandbox_env; the values themselves are read by the
 * secrets store (sec_store.c), not here.
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
#include "secrets/sec_broker.h"

/* secrets */

/* One secret while its mapping is walked: the value nodes seen. */
struct cfg_xctx {
	struct cfg_secret	*xc_sec;
	const yaml_node_t	*xc_name;
	const yaml_node_t	*xc_refresh;
	const yaml_node_t	*xc_inject;
	const yaml_node_t	*xc_placeholder;
	const yaml_node_t	*xc_env;
	const yaml_node_t	*xc_ph_in;
};

/* Its "inject" mapping: which forms were given. */
struct cfg_ictx {
	struct cfg_secret	*ic_sec;
	const yaml_node_t	*ic_header;
	const yaml_node_t	*ic_value;
	const yaml_node_t	*ic_basic;
	const yaml_node_t	*ic_query;
	const yaml_node_t	*ic_sigv4;
};

static void
cfg_k_sec_name(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg_xctx	*xc = arg;

	xc->xc_sec->sc_name = cfg_name_dup(cp, v, "secret name");
	xc->xc_name = v;
}

/*
 * A plain source "kind:rest" (env:, file:, exec:, literal:) as stored:
 * file: made absolute relative to the config's directory. NULL after an
 * error at <v> (the text is never echoed: it may be the secret itself).
 */
char *
sec_cfg_plain_source(struct cfg_parse *cp, const yaml_node_t *v,
    const char *s, const char *key)
{
	static const struct {
		const char	*prefix;
		const char	*needs;
	} kinds[] = {
		{ "env:", "a variable name" }, { "file:", "a path" },
		{ "exec:", "a command" }, { "literal:", "a value" },
	};
	const char		*rest;
	char			*path, *out;
	size_t			 i, len, plen;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strncmp(s, kinds[i].prefix, strlen(kinds[i].prefix)) == 0)
			break;
	if (i == sizeof(kinds) / sizeof(kinds[0])) {
		/* Do not echo it: a bare value may well be the secret. */
		cfg_err(cp, v, "\"%s\" must be env:NAME, file:PATH, "
		    "exec:COMMAND or literal:VALUE (a bare value is refused)",
		    key);
		return NULL;
	}
	rest = s + strlen(kinds[i].prefix);
	if (*rest == '\0') {
		cfg_err(cp, v, "\"%s\": %s needs %s", key, kinds[i].prefix,
		    kinds[i].needs);
		return NULL;
	}
	if (strcmp(kinds[i].prefix, "file:") != 0)
		return xstrdup(s);
	/* Relative to the configuration's directory, stored absolute. */
	path = cfg_path_join(cp->cp_cfg->c_dir, rest);
	plen = strlen(path);
	len = 5 + plen + 1;
	out = xmalloc(len);
	snprintf(out, len, "file:%s", path);
	free(path);
	return out;
}

/*
 * Only the form is checked here: the value is read by the secrets store
 * (sec_store_new), which keeps it in locked memory. A mapping is a token
 * broker (sec_cfg_broker.c).
 */
static void
cfg_k_sec_source(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_secret	*sc = ((struct cfg_xctx *)arg)->xc_sec;

	(void)k;
	if (v->type == YAML_MAPPING_NODE) {
		sec_cfg_broker(cp, v, sc);
		return;
	}
	if (v->type != YAML_SCALAR_NODE) {
		cfg_err(cp, v, "\"source\" must be a source such as env:NAME "
		    "or a token broker mapping, not %s", cfg_node_kind(v));
		return;
	}
	sc->sc_source = sec_cfg_plain_source(cp, v, cfg_str(v), "source");
}

static void
cfg_k_sec_refresh(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_xctx	*xc = arg;
	const char	*s;
	uint64_t	 ms;

	s = cfg_str(v);
	if (cfg_parse_duration(s, &ms) == -1) {
		cfg_err(cp, v, "bad duration \"%s\" for \"refresh\" (use e.g. "
		    "500ms, 10s, 5m, 24h, 7d)", s);
		return;
	}
	/* Each refresh runs a shell: keep a typo from spawning thousands. */
	if (ms < CFG_MIN_REFRESH_MS) {
		cfg_err(cp, v, "\"refresh\" must be at least %dms, not \"%s\"",
		    CFG_MIN_REFRESH_MS, s);
		return;
	}
	xc->xc_sec->sc_refresh_ms = ms;
}

static void
cfg_k_sec_hosts(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_secret	*sc = ((struct cfg_xctx *)arg)->xc_sec;
	struct cfg_namev	 nv = { NULL, 0, 0 };
	yaml_node_t		*item;
	const char		*s, *why;
	char			*h;
	size_t			 i, n;

	if ((n = cfg_seq_len(v)) == 0) {
		cfg_err(cp, v, "\"hosts\" is an empty list: a secret must be "
		    "bound to at least one host");
		return;
	}
	sc->sc_hosts = xcalloc(n, sizeof(char *));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "a \"hosts\" entry",
		    "a host pattern")) == NULL)
			continue;
		if ((why = cfg_host_pattern(s, &h)) != NULL) {
			cfg_err(cp, item, "bad host \"%s\": %s", s, why);
			continue;
		}
		sc->sc_hosts[sc->sc_nhosts++] = h;
		cfg_namev_add(&nv, h, item);
	}
	cfg_check_dups(cp, nv.nv_v, nv.nv_n, "host");
	free(nv.nv_v);
}

/* inject: {header, value} | {basic} | {query} | {aws_sigv4} */

static void
cfg_k_inj_header(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	/* Framing and routing are airlock's: a secret must not set them. */
	static const char	*refused[] = {
		"host", "content-length", "transfer-encoding", "connection",
		"upgrade", "te", "trailer", "keep-alive",
		"proxy-authorization", "proxy-connection",
	};
	struct cfg_ictx		*ic = arg;
	const char		*s;
	size_t			 i;

	s = cfg_str(v);
	if (!cfg_header_name_ok(s)) {
		cfg_err(cp, v, "bad header name \"%s\": not an HTTP header "
		    "token", s);
		return;
	}
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		if (strcasecmp(s, refused[i]) == 0) {
			cfg_err(cp, v, "header \"%s\" cannot be injected: "
			    "it frames or routes the request", s);
			return;
		}
	}
	ic->ic_sec->sc_header = xstrdup(s);
}

static void
cfg_k_inj_value(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_ictx	*ic = arg;
	const char	*s, *p;

	s = cfg_str(v);
	for (p = s; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			cfg_err(cp, v, "\"value\" contains control characters");
			return;
		}
	}
	if (strstr(s, "${secret}") == NULL) {
		cfg_err(cp, v, "\"value\" must contain ${secret} where the "
		    "secret goes, e.g. \"Bearer ${secret}\"");
		return;
	}
	ic->ic_sec->sc_template = xstrdup(s);
}

static void
cfg_k_inj_username(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_secret	*sc = arg;
	const char		*s, *p;

	s = cfg_str(v);
	if (*s == '\0') {
		cfg_err(cp, v, "\"username\" is empty (leave it out when the "
		    "secret is \"user:password\")");
		return;
	}
	for (p = s; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == ':') {
			cfg_err(cp, v, "bad \"username\" \"%s\": Basic "
			    "user names have no \":\" or control characters",
			    s);
			return;
		}
	}
	sc->sc_username = xstrdup(s);
}

static const struct cfg_key cfg_basic_keys[] = {
	CFG_SCALAR("username", 0, cfg_k_inj_username, 0, "a string"),
	CFG_END,
};

static void
cfg_k_inj_basic(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_ictx	*ic = arg;

	cfg_walk_map(cp, v, "basic", cfg_basic_keys, ic->ic_sec);
}

static void
cfg_k_inj_query(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_ictx	*ic = arg;
	const char	*s, *p;

	s = cfg_str(v);
	/* Unreserved characters: the name is sent as written. */
	for (p = s; *p != '\0'; p++)
		if (!isalnum((unsigned char)*p) && strchr("-._~", *p) == NULL)
			break;
	if (*s == '\0' || *p != '\0') {
		cfg_err(cp, v, "bad query parameter \"%s\": use letters, "
		    "digits, \"-\", \".\", \"_\" and \"~\"", s);
		return;
	}
	ic->ic_sec->sc_query = xstrdup(s);
}

/* AWS region and service names: lowercase letters, digits and "-". */
static void
cfg_k_inj_aws_name(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s, *p;
	char		*copy;

	s = cfg_str(v);
	for (p = s; *p != '\0'; p++)
		if (!(*p >= 'a' && *p <= 'z') &&
		    !isdigit((unsigned char)*p) && *p != '-')
			break;
	if (*s == '\0' || *p != '\0' || strlen(s) > 64) {
		cfg_err(cp, v, "bad \"%s\" \"%s\": use lowercase letters, "
		    "digits and \"-\", e.g. %s", k->k_name, s,
		    strcmp(k->k_name, "region") == 0 ? "us-east-1" : "s3");
		return;
	}
	copy = xstrdup(s);
	memcpy((char *)arg + k->k_off, &copy, sizeof(copy));
}

#define SEC(m)	offsetof(struct cfg_secret, m)
static const struct cfg_key cfg_sigv4_keys[] = {
	CFG_SCALAR("region", CFG_K_REQUIRED, cfg_k_inj_aws_name,
	    SEC(sc_region), "a string"),
	CFG_SCALAR("service", CFG_K_REQUIRED, cfg_k_inj_aws_name,
	    SEC(sc_service), "a string"),
	CFG_END,
};
#undef SEC

static void
cfg_k_inj_sigv4(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_ictx	*ic = arg;

	cfg_walk_map(cp, v, "aws_sigv4", cfg_sigv4_keys, ic->ic_sec);
}

static const struct cfg_key cfg_inject_keys[] = {
	CFG_NOTE("header", 0, cfg_k_inj_header, "a header name",
	    offsetof(struct cfg_ictx, ic_header)),
	CFG_NOTE("value", 0, cfg_k_inj_value,
	    "a template such as \"Bearer ${secret}\"",
	    offsetof(struct cfg_ictx, ic_value)),
	CFG_MAP_NOTE("basic", 0, cfg_k_inj_basic,
	    offsetof(struct cfg_ictx, ic_basic)),
	CFG_NOTE("query", 0, cfg_k_inj_query, "a parameter name",
	    offsetof(struct cfg_ictx, ic_query)),
	CFG_MAP_NOTE("aws_sigv4", 0, cfg_k_inj_sigv4,
	    offsetof(struct cfg_ictx, ic_sigv4)),
	CFG_END,
};

static void
cfg_k_sec_inject(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_xctx	*xc = arg;
	struct cfg_ictx	 ic;
	yaml_node_t	*bkey;
	const char	*forms[4];
	size_t		 n = 0;

	memset(&ic, 0, sizeof(ic));
	ic.ic_sec = xc->xc_sec;
	cfg_walk_map(cp, v, "inject", cfg_inject_keys, &ic);
	if (cp->cp_toobig)
		return;
	if (ic.ic_header != NULL || ic.ic_value != NULL)
		forms[n++] = "header";
	if (ic.ic_basic != NULL)
		forms[n++] = "basic";
	if (ic.ic_query != NULL)
		forms[n++] = "query";
	if (ic.ic_sigv4 != NULL)
		forms[n++] = "aws_sigv4";
	if (n == 0) {
		/* A null value counts as absent: say what "basic:" wants. */
		if ((bkey = cfg_map_key(cp, v, "basic", NULL)) != NULL)
			cfg_err(cp, bkey, "\"basic\" needs a mapping: {} when "
			    "the secret is \"user:password\", or {username: "
			    "U}");
		else
			cfg_err(cp, v, "\"inject\" needs one of: header (with "
			    "value), basic, query, aws_sigv4");
		return;
	}
	if (n > 1) {
		cfg_err(cp, v, "\"inject\" takes one form, not %s and %s%s",
		    forms[0], forms[1], n > 2 ? " and more" : "");
		return;
	}
	if (ic.ic_header != NULL && ic.ic_value == NULL) {
		cfg_err(cp, v, "\"header\" needs \"value\", a template such "
		    "as \"Bearer ${secret}\"");
		return;
	}
	if (ic.ic_value != NULL && ic.ic_header == NULL) {
		cfg_err(cp, v, "\"value\" needs \"header\", the name of the "
		    "header to set");
		return;
	}
	if (ic.ic_header != NULL)
		xc->xc_sec->sc_inject = CFG_INJECT_HEADER;
	else if (ic.ic_basic != NULL)
		xc->xc_sec->sc_inject = CFG_INJECT_BASIC;
	else if (ic.ic_query != NULL)
		xc->xc_sec->sc_inject = CFG_INJECT_QUERY;
	else
		xc->xc_sec->sc_inject = CFG_INJECT_SIGV4;
}

/*
 * Placeholders are looked for in request targets and header values, so
 * they must pass through URLs unchanged: no character a client would
 * percent-encode or that splits a query.
 */
static void
cfg_k_sec_placeholder(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_xctx	*xc = arg;
	const char	*s, *p;

	s = cfg_str(v);
	for (p = s; *p != '\0'; p++)
		if (!isalnum((unsigned char)*p) &&
		    strchr("-._~:@!$'()*,;=/", *p) == NULL)
			break;
	if (*p != '\0') {
		cfg_err(cp, v, "bad \"placeholder\" \"%s\": use letters, "
		    "digits and -._~:@!$'()*,;=/ (it must pass unchanged in "
		    "URLs and headers)", s);
		return;
	}
	if (strlen(s) < CFG_MIN_PLACEHOLDER) {
		cfg_err(cp, v, "\"placeholder\" \"%s\" is too short: at least "
		    "%d characters, so that it is not found by chance", s,
		    CFG_MIN_PLACEHOLDER);
		return;
	}
	xc->xc_sec->sc_placeholder = xstrdup(s);
}

static void
cfg_k_sec_sandbox_env(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	/* What the launcher sets itself inside a sandbox (SPEC). */
	static const char	*reserved[] = {
		"PATH", "HOME", "USER", "LANG", "TERM", "SSL_CERT_FILE",
		"REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE",
		"GIT_SSL_CAINFO",
	};
	struct cfg_xctx		*xc = arg;
	const char		*s;
	size_t			 i;

	s = cfg_str(v);
	if (!cfg_env_name_ok(s)) {
		cfg_err(cp, v, "bad \"sandbox_env\" \"%s\": use A-Z, 0-9 and "
		    "\"_\", not starting with a digit", s);
		return;
	}
	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strcmp(s, reserved[i]) == 0)
			break;
	if (i < sizeof(reserved) / sizeof(reserved[0]) ||
	    strncmp(s, "AIRLOCK_", 8) == 0) {
		cfg_err(cp, v, "\"sandbox_env\" \"%s\" is set by airlock "
		    "itself inside a sandbox", s);
		return;
	}
	xc->xc_sec->sc_sandbox_env = xstrdup(s);
}

/* placeholder_in: [header, query, path, body], a set. */
static void
cfg_k_sec_placeholder_in(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	static const struct { const char *n; int bit; } where[] = {
		{ "header", CFG_PH_HEADER }, { "query", CFG_PH_QUERY },
		{ "path", CFG_PH_PATH }, { "body", CFG_PH_BODY },
		{ "ws", CFG_PH_WS },
	};
	struct cfg_secret	*sc = ((struct cfg_xctx *)arg)->xc_sec;
	yaml_node_t		*item;
	const char		*s;
	size_t			 i, j;
	int			 mask = 0;

	(void)k;
	if (cfg_seq_len(v) == 0) {
		cfg_err(cp, v, "\"placeholder_in\" is an empty list: name "
		    "where the placeholder may be replaced (header, query, "
		    "path, body, ws)");
		return;
	}
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "a \"placeholder_in\" entry",
		    "header, query, path, body or ws")) == NULL)
			continue;
		for (j = 0; j < sizeof(where) / sizeof(where[0]); j++)
			if (strcmp(s, where[j].n) == 0)
				break;
		if (j == sizeof(where) / sizeof(where[0])) {
			cfg_err(cp, item, "bad \"placeholder_in\" entry \"%s\": "
			    "use header, query, path, body or ws", s);
			continue;
		}
		if (mask & where[j].bit) {
			cfg_err(cp, item, "\"%s\" is listed twice in "
			    "\"placeholder_in\"", s);
			continue;
		}
		mask |= where[j].bit;
	}
	sc->sc_ph_in = mask;
	sc->sc_ph_given = 1;
}

/* Plain HTTP shows the value to every hop: only when the secret says so. */
static void
cfg_k_sec_allow_plaintext(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_xctx	*xc = arg;

	cfg_set_bool(cp, k, v, xc->xc_sec);
}

static const struct cfg_key cfg_secret_keys[] = {
	CFG_SCALAR("name", CFG_K_REQUIRED, cfg_k_sec_name, 0, "a string"),
	CFG_ANY("source", CFG_K_REQUIRED, cfg_k_sec_source, 0),
	CFG_NOTE("refresh", 0, cfg_k_sec_refresh, "a duration",
	    offsetof(struct cfg_xctx, xc_refresh)),
	CFG_SEQ("hosts", CFG_K_REQUIRED, cfg_k_sec_hosts),
	CFG_MAP_NOTE("inject", 0, cfg_k_sec_inject,
	    offsetof(struct cfg_xctx, xc_inject)),
	CFG_NOTE("placeholder", 0, cfg_k_sec_placeholder, "a string",
	    offsetof(struct cfg_xctx, xc_placeholder)),
	{ "placeholder_in", CFG_T_SEQ | CFG_K_NOTE, cfg_k_sec_placeholder_in,
	    0, 0, 0, NULL, NULL, NULL, offsetof(struct cfg_xctx, xc_ph_in) },
	CFG_NOTE("sandbox_env", 0, cfg_k_sec_sandbox_env, "a variable name",
	    offsetof(struct cfg_xctx, xc_env)),
	{ "allow_plaintext", CFG_T_SCALAR, cfg_k_sec_allow_plaintext,
	    offsetof(struct cfg_secret, sc_allow_plaintext), 0, 0,
	    "true or false", NULL, NULL, 0 },
	CFG_END,
};

/* What one secret's keys say together, once all of them are read. */
static void
cfg_secret_check(struct cfg_parse *cp, yaml_node_t *map,
    const struct cfg_xctx *xc)
{
	const struct cfg_secret	*sc = xc->xc_sec;

	if (xc->xc_refresh != NULL && sc->sc_source != NULL &&
	    strncmp(sc->sc_source, "exec:", 5) != 0)
		cfg_err(cp, xc->xc_refresh, "\"refresh\" applies only to "
		    "exec: sources");
	if (sc->sc_broker != NULL)
		sec_cfg_broker_check(cp, map, sc);
	if (xc->xc_inject == NULL && xc->xc_placeholder == NULL)
		cfg_err(cp, map, "secret \"%s\" needs \"inject\", "
		    "\"placeholder\" or both", sc->sc_name != NULL ?
		    sc->sc_name : "?");
	if (xc->xc_ph_in != NULL && xc->xc_placeholder == NULL)
		cfg_err(cp, xc->xc_ph_in, "\"placeholder_in\" needs a "
		    "\"placeholder\"");
	if (xc->xc_env != NULL && xc->xc_placeholder == NULL)
		cfg_err(cp, xc->xc_env, "\"sandbox_env\" needs a "
		    "\"placeholder\" to give to the sandbox");
}

/*
 * Placeholders are replaced by plain search: one inside another would
 * make the replaced text depend on which is tried first.
 */
static void
cfg_placeholders_check(struct cfg_parse *cp, const struct cfg_xctx *xcs,
    size_t n)
{
	const char	*a, *b;
	size_t		 i, j;

	if (cp->cp_toobig)
		return;
	for (j = 1; j < n; j++) {
		if ((b = xcs[j].xc_sec->sc_placeholder) == NULL)
			continue;
		for (i = 0; i < j; i++) {
			if ((a = xcs[i].xc_sec->sc_placeholder) == NULL)
				continue;
			if (strstr(a, b) == NULL && strstr(b, a) == NULL)
				continue;
			cfg_err(cp, xcs[j].xc_placeholder, "placeholder \"%s\" "
			    "%s the placeholder of secret \"%s\" (at "
			    "%zu:%zu)", b, strcmp(a, b) == 0 ? "repeats" :
			    strstr(b, a) != NULL ? "contains" : "is part of",
			    xcs[i].xc_sec->sc_name != NULL ?
			    xcs[i].xc_sec->sc_name : "?",
			    xcs[i].xc_placeholder->start_mark.line + 1,
			    xcs[i].xc_placeholder->start_mark.column + 1);
			break;
		}
	}
}

static void
cfg_k_secrets(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_xctx		*xcs, *xc;
	struct cfg_namev	 names = { NULL, 0, 0 }, envs = { NULL, 0, 0 };
	yaml_node_t		*item;
	size_t			 i, n;

	n = cfg_seq_len(v);
	c->c_secrets = xcalloc(n, sizeof(*c->c_secrets));
	xcs = xcalloc(n, sizeof(*xcs));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		xc = &xcs[c->c_nsecrets];
		xc->xc_sec = &c->c_secrets[c->c_nsecrets++];
		xc->xc_sec->sc_line = (int)item->start_mark.line + 1;
		xc->xc_sec->sc_col = (int)item->start_mark.column + 1;
		xc->xc_sec->sc_ph_in = CFG_PH_DEFAULT;
		if (cfg_want_map(cp, item, "a secret") == -1)
			continue;
		cfg_walk_map(cp, item, "secret", cfg_secret_keys, xc);
		if (cp->cp_toobig)
			break;
		cfg_secret_check(cp, item, xc);
		if (xc->xc_sec->sc_name != NULL)
			cfg_namev_add(&names, xc->xc_sec->sc_name,
			    xc->xc_name);
		if (xc->xc_sec->sc_sandbox_env != NULL)
			cfg_namev_add(&envs, xc->xc_sec->sc_sandbox_env,
			    xc->xc_env);
	}
	cfg_check_dups(cp, names.nv_v, names.nv_n, "secret name");
	cfg_check_dups(cp, envs.nv_v, envs.nv_n, "sandbox_env");
	cfg_placeholders_check(cp, xcs, c->c_nsecrets);
	free(names.nv_v);
	free(envs.nv_v);
	free(xcs);
}

const struct cfg_key sec_cfg_keys[] = {
	CFG_SEQ("secrets", 0, cfg_k_secrets),
	CFG_COUNT("reflect_min_run", 0, offsetof(struct cfg, c_reflect_min_run),
	    4, 4096),
	CFG_END,
};
