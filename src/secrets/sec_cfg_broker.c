/*
 * "source" as a token broker mapping (sec_broker.h):
 *   source: {oauth2_client_credentials: {token_url, client_id,
 *            client_secret: SOURCE, scope, renew_before}}
 *   source: {oauth2_refresh: {token_url, client_id, refresh_token: SOURCE,
 *            client_secret: SOURCE, scope, renew_before}}
 *   source: {google_service_account: {key_file, scopes, token_url,
 *            renew_before}}
 *   source: {github_app: {app_id, private_key: SOURCE, installation_id,
 *            api_url, renew_before}}
 * Only the form is checked; the credential is read by the store.
 */
#include "config.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg_walk.h"
#include "secrets/sec_broker.h"
#include "util/util.h"

/* One broker mapping while it is walked. */
struct bk_ctx {
	struct cfg_broker	*bc_b;
	struct cfg_secret	*bc_sec;
	const yaml_node_t	*bc_url;
};

static const char *const bk_kinds[] = {
	NULL, "oauth2_client_credentials", "oauth2_refresh",
	"google_service_account", "github_app",
};

/* "http(s)://HOST[:PORT]/..." without userinfo: NULL or the problem. */
static const char *
bk_url_check(const char *s)
{
	const char	*h;
	size_t		 n;

	if (strncmp(s, "https://", 8) == 0)
		h = s + 8;
	else if (strncmp(s, "http://", 7) == 0)
		h = s + 7;
	else
		return "must start with https:// (or http://)";
	n = strcspn(h, "/?#");
	if (n == 0)
		return "has no host";
	if (memchr(h, '@', n) != NULL)
		return "must not carry credentials (user@)";
	for (; *s != '\0'; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return "contains spaces or control characters";
	return NULL;
}

static void
bk_str(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct bk_ctx	*bc = arg;
	char		**dst = (char **)((char *)bc->bc_b + k->k_off);
	const char	*s = cfg_str(v), *why;

	if (*s == '\0') {
		cfg_err(cp, v, "\"%s\" is empty", k->k_name);
		return;
	}
	if ((strcmp(k->k_name, "token_url") == 0 ||
	    strcmp(k->k_name, "api_url") == 0)) {
		if ((why = bk_url_check(s)) != NULL) {
			cfg_err(cp, v, "\"%s\" %s", k->k_name, why);
			return;
		}
		bc->bc_url = v;
	}
	if (strcmp(k->k_name, "app_id") == 0 ||
	    strcmp(k->k_name, "installation_id") == 0) {
		if (strspn(s, "0123456789") != strlen(s) || strlen(s) > 20) {
			cfg_err(cp, v, "\"%s\" must be a number", k->k_name);
			return;
		}
	} else if (strpbrk(s, "\r\n") != NULL) {
		cfg_err(cp, v, "\"%s\" contains a line break", k->k_name);
		return;
	}
	free(*dst);
	*dst = xstrdup(s);
}

/* A credential: a plain source (env:, file:, exec:, literal:). */
static void
bk_cred(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct bk_ctx	*bc = arg;
	char		*s;

	if ((s = sec_cfg_plain_source(cp, v, cfg_str(v), k->k_name)) == NULL)
		return;
	if (strcmp(k->k_name, "client_secret") == 0 &&
	    bc->bc_b->b_kind == CFG_BROKER_REFRESH) {
		/* the refresh grant's optional client authentication */
		free(bc->bc_b->b_cred2);
		bc->bc_b->b_cred2 = s;
		return;
	}
	free(bc->bc_b->b_cred);
	bc->bc_b->b_cred = s;
}

static void
bk_key_file(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct bk_ctx	*bc = arg;
	char		*path;
	size_t		 len;

	(void)k;
	if (*cfg_str(v) == '\0') {
		cfg_err(cp, v, "\"key_file\" is empty");
		return;
	}
	path = cfg_path_join(cp->cp_cfg->c_dir, cfg_str(v));
	len = strlen(path) + 6;
	free(bc->bc_b->b_cred);
	bc->bc_b->b_cred = xmalloc(len);
	snprintf(bc->bc_b->b_cred, len, "file:%s", path);
	free(path);
}

/* "scopes": a list or one space-separated string, kept space-joined. */
static void
bk_scopes(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct bk_ctx	*bc = arg;
	yaml_node_t	*item;
	const char	*s;
	char		*out = NULL, *t;
	size_t		 i;

	(void)k;
	if (v->type == YAML_SCALAR_NODE) {
		free(bc->bc_b->b_scope);
		bc->bc_b->b_scope = xstrdup(cfg_str(v));
		return;
	}
	if (cfg_want_seq(cp, v, "\"scopes\"") == -1)
		return;
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, "a \"scopes\" entry",
		    "a scope")) == NULL)
			continue;
		if (*s == '\0' || strpbrk(s, " \t\r\n") != NULL) {
			cfg_err(cp, item, "a scope must be one word");
			continue;
		}
		if (out == NULL)
			out = xstrdup(s);
		else {
			t = xmalloc(strlen(out) + strlen(s) + 2);
			sprintf(t, "%s %s", out, s);
			free(out);
			out = t;
		}
	}
	free(bc->bc_b->b_scope);
	bc->bc_b->b_scope = out;
}

#define BK_STR(name, fl, field)						\
	CFG_SCALAR(name, fl, bk_str, offsetof(struct cfg_broker, field),	\
	    "a string")
#define BK_CRED(name, fl)						\
	CFG_SCALAR(name, fl, bk_cred, 0, "a source such as env:NAME")
#define BK_RENEW							\
	{ "renew_before", CFG_T_SCALAR, cfg_set_duration,		\
	    offsetof(struct cfg_broker, b_margin_ms), 1000,		\
	    24ULL * 3600 * 1000, "a duration", NULL, NULL, 0 }

static const struct cfg_key bk_cc_keys[] = {
	BK_STR("token_url", CFG_K_REQUIRED, b_token_url),
	BK_STR("client_id", CFG_K_REQUIRED, b_client_id),
	BK_CRED("client_secret", CFG_K_REQUIRED),
	BK_STR("scope", 0, b_scope),
	BK_RENEW,
	CFG_END,
};

static const struct cfg_key bk_refresh_keys[] = {
	BK_STR("token_url", CFG_K_REQUIRED, b_token_url),
	BK_STR("client_id", CFG_K_REQUIRED, b_client_id),
	BK_CRED("refresh_token", CFG_K_REQUIRED),
	BK_CRED("client_secret", 0),
	BK_STR("scope", 0, b_scope),
	BK_RENEW,
	CFG_END,
};

static const struct cfg_key bk_google_keys[] = {
	CFG_SCALAR("key_file", CFG_K_REQUIRED, bk_key_file, 0, "a path"),
	CFG_ANY("scopes", CFG_K_REQUIRED, bk_scopes, 0),
	BK_STR("token_url", 0, b_token_url),
	BK_RENEW,
	CFG_END,
};

static const struct cfg_key bk_github_keys[] = {
	BK_STR("app_id", CFG_K_REQUIRED, b_app_id),
	BK_CRED("private_key", CFG_K_REQUIRED),
	BK_STR("installation_id", CFG_K_REQUIRED, b_installation_id),
	BK_STR("api_url", 0, b_token_url),
	BK_RENEW,
	CFG_END,
};

static const struct cfg_key *const bk_tables[] = {
	NULL, bk_cc_keys, bk_refresh_keys, bk_google_keys, bk_github_keys,
};

void
sec_cfg_broker(struct cfg_parse *cp, yaml_node_t *map, struct cfg_secret *sc)
{
	yaml_node_pair_t	*pair;
	yaml_node_t		*key, *val;
	struct bk_ctx		 bc;
	const char		*name;
	size_t			 i, len;

	if (map->data.mapping.pairs.top - map->data.mapping.pairs.start != 1) {
		cfg_err(cp, map, "a token broker \"source\" has exactly one "
		    "key: oauth2_client_credentials, oauth2_refresh, "
		    "google_service_account or github_app");
		return;
	}
	pair = map->data.mapping.pairs.start;
	if ((key = cfg_node(cp, pair->key)) == NULL ||
	    (val = cfg_node(cp, pair->value)) == NULL)
		return;
	if ((name = cfg_scalar(cp, key, "a key", "a string")) == NULL)
		return;
	for (i = 1; i < sizeof(bk_kinds) / sizeof(bk_kinds[0]); i++)
		if (strcmp(name, bk_kinds[i]) == 0)
			break;
	if (i == sizeof(bk_kinds) / sizeof(bk_kinds[0])) {
		cfg_err(cp, key, "unknown token broker \"%s\" (use "
		    "oauth2_client_credentials, oauth2_refresh, "
		    "google_service_account or github_app)", name);
		return;
	}
	if (cfg_want_map(cp, val, name) == -1)
		return;
	memset(&bc, 0, sizeof(bc));
	bc.bc_sec = sc;
	bc.bc_b = xcalloc(1, sizeof(*bc.bc_b));
	bc.bc_b->b_kind = (enum cfg_broker_kind)i;
	bc.bc_b->b_margin_ms = SEC_BROKER_MARGIN_MS;
	cfg_walk_map(cp, val, name, bk_tables[i], &bc);
	sc->sc_broker = bc.bc_b;
	len = strlen("broker:") + strlen(name) + 1;
	free(sc->sc_source);
	sc->sc_source = xmalloc(len);
	snprintf(sc->sc_source, len, "broker:%s", name);
}

void
sec_cfg_broker_check(struct cfg_parse *cp, yaml_node_t *map,
    const struct cfg_secret *sc)
{
	const struct cfg_broker	*b = sc->sc_broker;

	if (sc->sc_inject == CFG_INJECT_SIGV4)
		cfg_err(cp, map, "secret \"%s\": a minted token cannot sign "
		    "AWS SigV4 (use header, basic or query)", sc->sc_name !=
		    NULL ? sc->sc_name : "?");
	if (b->b_token_url != NULL && strncmp(b->b_token_url, "http://",
	    7) == 0 && !sc->sc_allow_plaintext)
		cfg_err(cp, map, "secret \"%s\": its token endpoint is plain "
		    "http:// (the credential would cross the network in "
		    "clear); use https:// or allow_plaintext: true",
		    sc->sc_name != NULL ? sc->sc_name : "?");
}
