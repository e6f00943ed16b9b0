/*
 * The configuration's sections: keyword tables and setters, defaults, the
 * cross-references checked once the whole file is read (sandbox policies,
 * rule secrets and their host bindings), and the life cycle of struct cfg
 * (load, ref, unref, free).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include "cfg/cfg_internal.h"
#include "dns/net_guard.h"
#include "dns/net_self.h"
#include "geo/geo.h"
#include "secrets/sec.h"
#include "util/log.h"
#include "util/util.h"

/* A growable list of names with their nodes, for duplicate checks. */
struct cfg_namev {
	struct cfg_name	*nv_v;
	size_t		 nv_n;
	size_t		 nv_cap;
};

struct cfg_pctx {
	struct cfg_policy	*pc_pol;
	const yaml_node_t	*pc_name;
};

struct cfg_sctx {
	struct cfg_sandbox	*sc_sbx;
	const yaml_node_t	*sc_id;
	const yaml_node_t	**sc_policy;
	struct cfg_namev	*sc_addrs;
};

static void
cfg_namev_add(struct cfg_namev *nv, const char *name, const yaml_node_t *n)
{
	if (nv->nv_n == nv->nv_cap) {
		nv->nv_cap = nv->nv_cap == 0 ? 8 : nv->nv_cap * 2;
		nv->nv_v = xrealloc(nv->nv_v, nv->nv_cap * sizeof(*nv->nv_v));
	}
	nv->nv_v[nv->nv_n].n_name = name;
	nv->nv_v[nv->nv_n].n_node = n;
	nv->nv_n++;
}

/* listen */

static void
cfg_k_proxy(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_namev	 nv = { NULL, 0, 0 };
	yaml_node_t		*item;
	const char		*s, *why;
	char			*canon;
	size_t			 i, n;

	/* one listener (an address or {address, default_sandbox}), or a
	   list of them */
	n = v->type != YAML_SEQUENCE_NODE ? 1 : cfg_seq_len(v);
	if (n == 0) {
		cfg_err(cp, v, "\"proxy\" needs at least one address");
		return;
	}
	c->c_listen_proxy = xcalloc(n, sizeof(char *));
	for (i = 0; i < n; i++) {
		item = v->type != YAML_SEQUENCE_NODE ? v :
		    cfg_seq_at(cp, v, i);
		if (item == NULL)
			break;
		if (item->type == YAML_MAPPING_NODE) {
			if ((canon = cfg_listen_item_map(cp, item, n,
			    c->c_nlisten_proxy)) == NULL)
				continue;
			c->c_listen_proxy[c->c_nlisten_proxy++] = canon;
			cfg_namev_add(&nv, canon, item);
			continue;
		}
		if ((s = cfg_scalar(cp, item, "a \"proxy\" address",
		    "a string or {address, default_sandbox}")) == NULL)
			continue;
		if ((why = cfg_parse_hostport(s, 0, &canon)) != NULL) {
			cfg_err(cp, item, "bad listen address \"%s\": %s", s,
			    why);
			continue;
		}
		c->c_listen_proxy[c->c_nlisten_proxy++] = canon;
		cfg_namev_add(&nv, canon, item);
	}
	cfg_check_dups(cp, nv.nv_v, nv.nv_n, "listen address");
	free(nv.nv_v);
}

static void
cfg_k_default_sandbox(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"default_sandbox\"", "a sandbox id")) ==
	    NULL)
		return;
	cp->cp_cfg->c_default_sandbox = xstrdup(s);
	cp->cp_default_sandbox = v;
}

/* "unix:PATH" (relative to the config's directory) or "HOST:PORT". */
static void
cfg_k_listen_admin(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s, *why;
	char		*canon, *path;

	if ((s = cfg_scalar(cp, v, "\"admin\"", "\"unix:PATH\" or "
	    "\"HOST:PORT\"")) == NULL)
		return;
	if (strncmp(s, "unix:", 5) == 0) {
		if (s[5] == '\0') {
			cfg_err(cp, v, "\"admin\": unix: needs a socket path");
			return;
		}
		path = cfg_path_join(c->c_dir, s + 5);
		if (strlen(path) >= CFG_MAX_UNIX_PATH) {
			cfg_err(cp, v, "\"admin\": socket path \"%s\" is "
			    "longer than %d bytes", path, CFG_MAX_UNIX_PATH - 1);
			free(path);
			return;
		}
		if (asprintf(&c->c_listen_admin, "unix:%s", path) == -1)
			fatal("asprintf");
		free(path);
		return;
	}
	if ((why = cfg_parse_hostport(s, 0, &canon)) != NULL) {
		cfg_err(cp, v, "bad admin address \"%s\": %s (or use "
		    "\"unix:PATH\")", s, why);
		return;
	}
	c->c_listen_admin = canon;
}

/* listen.transparent, listen.dns: one "IP:PORT" each. */
static void
cfg_k_listen_one(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s, *why;
	char		*canon, what[32];

	snprintf(what, sizeof(what), "\"%s\"", k->k_name);
	if ((s = cfg_scalar(cp, v, what, "\"IP:PORT\"")) == NULL)
		return;
	if ((why = cfg_parse_hostport(s, 0, &canon)) != NULL) {
		cfg_err(cp, v, "bad %s address \"%s\": %s", k->k_name, s, why);
		return;
	}
	memcpy((char *)cp->cp_cfg + k->k_off, &canon, sizeof(canon));
}

static const struct cfg_key cfg_listen_keys[] = {
	{ "proxy", 0, cfg_k_proxy, 0, 0, 0 },
	{ "default_sandbox", 0, cfg_k_default_sandbox, 0, 0, 0 },
	{ "transparent", 0, cfg_k_listen_one,
	    offsetof(struct cfg, c_listen_transparent), 0, 0 },
	{ "dns", 0, cfg_k_listen_one, offsetof(struct cfg, c_listen_dns),
	    0, 0 },
	{ "admin", 0, cfg_k_listen_admin, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_listen(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	if (cfg_want_map(cp, v, "\"listen\"") == 0)
		cfg_walk_map(cp, v, "listen", cfg_listen_keys, arg);
}

/* state_dir, workers */

static void
cfg_k_state_dir(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"state_dir\"", "a path")) == NULL)
		return;
	if (*s == '\0') {
		cfg_err(cp, v, "\"state_dir\" is empty");
		return;
	}
	c->c_state_dir = cfg_path_join(c->c_dir, s);
}

static void
cfg_k_workers(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	const char	*s;
	uint64_t	 n;

	if ((s = cfg_scalar(cp, v, "\"workers\"", "a number")) == NULL)
		return;
	if (cfg_parse_uint(s, CFG_MAX_WORKERS, &n) == -1) {
		cfg_err(cp, v, "\"workers\" must be a whole number from 0 "
		    "(one per core) to %d, not \"%s\"", CFG_MAX_WORKERS, s);
		return;
	}
	cp->cp_cfg->c_workers = (int)n;
}

/* limits */

#define LIM(m)	offsetof(struct cfg_limits, m)
static const struct cfg_key cfg_limits_keys[] = {
	{ "header_bytes", 0, cfg_set_size, LIM(l_header_bytes), 1024, 0 },
	{ "header_timeout", 0, cfg_set_duration, LIM(l_header_timeout_ms),
	    1, 0 },
	{ "connect_timeout", 0, cfg_set_duration, LIM(l_connect_timeout_ms),
	    1, 0 },
	{ "idle_timeout", 0, cfg_set_duration, LIM(l_idle_timeout_ms),
	    1, 0 },
	{ "shutdown_grace", 0, cfg_set_duration, LIM(l_shutdown_grace_ms),
	    0, 0 },
	{ "reload_grace", 0, cfg_set_duration, LIM(l_reload_grace_ms),
	    0, 0 },
	{ "max_connections", 0, cfg_set_count, LIM(l_max_connections),
	    1, 0 },
	{ "max_connections_per_sandbox", 0, cfg_set_count,
	    LIM(l_max_connections_per_sandbox), 1, 0 },
	{ "unidentified_per_source", 0, cfg_set_count,
	    LIM(l_unidentified_per_source), 1, 0 },
	{ "unidentified_share", 0, cfg_set_percent,
	    LIM(l_unidentified_share), 1, 0 },
	{ "identify_timeout", 0, cfg_set_duration,
	    LIM(l_identify_timeout_ms), 1, 0 },
	{ "upstream_timeout", 0, cfg_set_duration,
	    LIM(l_upstream_timeout_ms), 1, 0 },
	{ "body_bytes", 0, cfg_set_size64, LIM(l_body_bytes), 0, 0 },
	{ "default_max_tokens", 0, cfg_set_count64, LIM(l_default_max_tokens),
	    1, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};
#undef LIM

static void
cfg_k_limits(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	if (cfg_want_map(cp, v, "\"limits\"") == 0)
		cfg_walk_map(cp, v, "limits", cfg_limits_keys,
		    &cp->cp_cfg->c_limits);
}

/* upstream */

static void
cfg_k_ca_file(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s;
	char		*path, why[256];
	int		 fd, n;

	if ((s = cfg_scalar(cp, v, "\"ca_file\"", "\"system\" or a path")) ==
	    NULL)
		return;
	if (strcmp(s, "system") == 0) {
		c->c_upstream_ca_file = xstrdup(s);
		return;
	}
	if (*s == '\0') {
		cfg_err(cp, v, "\"ca_file\" is empty");
		return;
	}
	path = cfg_path_join(c->c_dir, s);
	/*
	 * Found at -t time rather than at the first upstream handshake: it
	 * must open and hold at least one certificate.
	 */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) == -1) {
		cfg_err(cp, v, "cannot read \"ca_file\" \"%s\": %s", path,
		    strerror(errno));
		free(path);
		return;
	}
	n = cfg_pem_count(fd, why, sizeof(why));
	close(fd);
	if (n <= 0) {
		cfg_err(cp, v, "bad \"ca_file\" \"%s\": %s", path, n == 0 ?
		    "no PEM certificate in it" : why);
		free(path);
		return;
	}
	c->c_upstream_ca_file = path;
}

static void
cfg_k_resolver(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s, *why;
	char		*canon;

	if ((s = cfg_scalar(cp, v, "\"resolver\"", "\"system\" or IP:PORT")) ==
	    NULL)
		return;
	if (strcmp(s, "system") == 0) {
		c->c_upstream_resolver = xstrdup(s);
		return;
	}
	if ((why = cfg_parse_hostport(s, 53, &canon)) != NULL) {
		cfg_err(cp, v, "bad resolver \"%s\": %s (use \"system\" or "
		    "IP:PORT)", s, why);
		return;
	}
	c->c_upstream_resolver = canon;
}

static void
cfg_k_hosts(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_host_override *h;
	struct cfg_namev	 nv = { NULL, 0, 0 };
	yaml_node_pair_t	*pair;
	yaml_node_t		*key, *val;
	const char		*name, *addr, *why;
	char			*lname, *ip;
	size_t			 n;

	if (cfg_want_map(cp, v, "\"hosts\"") == -1)
		return;
	n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
	c->c_upstream_hosts = xcalloc(n, sizeof(*c->c_upstream_hosts));
	for (pair = v->data.mapping.pairs.start;
	    pair < v->data.mapping.pairs.top; pair++) {
		if ((key = cfg_node(cp, pair->key)) == NULL ||
		    (val = cfg_node(cp, pair->value)) == NULL)
			break;
		if ((name = cfg_scalar(cp, key, "a \"hosts\" name",
		    "a host name")) == NULL)
			continue;
		if ((why = cfg_host_name(name, &lname)) != NULL) {
			cfg_err(cp, key, "bad host name \"%s\" in \"hosts\": "
			    "%s", name, why);
			continue;
		}
		if ((ip = cfg_ip_canon(lname)) != NULL) {
			cfg_err(cp, key, "bad host name \"%s\" in \"hosts\": "
			    "it is an address already", name);
			free(ip);
			free(lname);
			continue;
		}
		h = &c->c_upstream_hosts[c->c_nupstream_hosts++];
		h->h_name = lname;
		cfg_namev_add(&nv, lname, key);
		if ((addr = cfg_scalar(cp, val, "a \"hosts\" address",
		    "an IP address")) == NULL)
			continue;
		if ((h->h_ip = cfg_ip_canon(addr)) == NULL)
			cfg_err(cp, val, "\"hosts\": \"%s\" must map to an IP "
			    "address, not \"%s\"", name, addr);
	}
	cfg_check_dups(cp, nv.nv_v, nv.nv_n, "host");
	free(nv.nv_v);
}

static void
cfg_networks(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    int deny)
{
	struct net_guard	*g = cp->cp_cfg->c_guard;
	struct net_cidr		 cidr;
	yaml_node_t		*item;
	const char		*s;
	char			 what[64];
	size_t			 i;

	snprintf(what, sizeof(what), "\"%s\"", k->k_name);
	if (cfg_want_seq(cp, v, what) == -1)
		return;
	snprintf(what, sizeof(what), "a \"%s\" entry", k->k_name);
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((s = cfg_scalar(cp, item, what, "a CIDR")) == NULL)
			continue;
		if (deny && strcmp(s, "default") == 0)
			net_guard_deny_default(g);
		else if (net_cidr_parse(s, &cidr) == -1)
			cfg_err(cp, item, "bad network \"%s\" in \"%s\": "
			    "expected ADDRESS/PREFIX%s", s, k->k_name,
			    deny ? " or default" : "");
		else if (deny)
			net_guard_deny(g, &cidr);
		else
			net_guard_allow(g, &cidr);
	}
}

static void
cfg_k_deny_networks(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	cp->cp_deny_seen = 1;
	cfg_networks(cp, k, v, 1);
}

static void
cfg_k_allow_networks(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	cfg_networks(cp, k, v, 0);
}

static const struct cfg_key cfg_upstream_keys[] = {
	{ "ca_file", 0, cfg_k_ca_file, 0, 0, 0 },
	{ "resolver", 0, cfg_k_resolver, 0, 0, 0 },
	{ "hosts", 0, cfg_k_hosts, 0, 0, 0 },
	{ "deny_networks", 0, cfg_k_deny_networks, 0, 0, 0 },
	{ "allow_networks", 0, cfg_k_allow_networks, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_upstream(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	if (cfg_want_map(cp, v, "\"upstream\"") == 0)
		cfg_walk_map(cp, v, "upstream", cfg_upstream_keys, arg);
}

/* tls */

static void
cfg_k_min_version(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"min_version\"", "\"1.2\" or \"1.3\"")) ==
	    NULL)
		return;
	if (strcmp(s, "1.2") == 0)
		cp->cp_cfg->c_tls_min_version = TLS1_2_VERSION;
	else if (strcmp(s, "1.3") == 0)
		cp->cp_cfg->c_tls_min_version = TLS1_3_VERSION;
	else
		cfg_err(cp, v, "\"min_version\" must be \"1.2\" or \"1.3\", "
		    "not \"%s\"", s);
}

#define TLS(m)	offsetof(struct cfg, m)
static const struct cfg_key cfg_tls_keys[] = {
	{ "cert_cache", 0, cfg_set_count, TLS(c_tls_cert_cache), 1, 0 },
	{ "leaf_validity", 0, cfg_set_duration, TLS(c_tls_leaf_validity_ms),
	    1, CFG_MAX_LEAF_VALIDITY_MS },
	{ "min_version", 0, cfg_k_min_version, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};
#undef TLS

static void
cfg_k_tls(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	if (cfg_want_map(cp, v, "\"tls\"") == 0)
		cfg_walk_map(cp, v, "tls", cfg_tls_keys, cp->cp_cfg);
}

/* secrets */

/* One secret while its mapping is walked: the value nodes seen. */
struct cfg_xctx {
	struct cfg_secret	*xc_sec;
	const yaml_node_t	*xc_name;
	const yaml_node_t	*xc_refresh;
	const yaml_node_t	*xc_inject;
	const yaml_node_t	*xc_placeholder;
	const yaml_node_t	*xc_env;
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
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"name\"", "a string")) == NULL)
		return;
	if (!cfg_name_ok(s)) {
		cfg_err(cp, v, "bad secret name \"%s\": use letters, digits, "
		    "\".\", \"_\" and \"-\" (at most %d, starting with a "
		    "letter or digit)", s, CFG_MAX_NAME);
		/* Kept, so that rules naming it add no noise. */
	}
	xc->xc_sec->sc_name = xstrdup(s);
	xc->xc_name = v;
}

/*
 * Only the form is checked here: the value is read by the secrets store
 * (sec_store_new), which keeps it in locked memory.
 */
static void
cfg_k_sec_source(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	static const struct {
		const char	*prefix;
		const char	*needs;
	} kinds[] = {
		{ "env:", "a variable name" }, { "file:", "a path" },
		{ "exec:", "a command" }, { "literal:", "a value" },
	};
	struct cfg_secret	*sc = ((struct cfg_xctx *)arg)->xc_sec;
	const char		*s, *rest;
	char			*path;
	size_t			 i, len, plen;

	if ((s = cfg_scalar(cp, v, "\"source\"", "a source such as "
	    "env:NAME")) == NULL)
		return;
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strncmp(s, kinds[i].prefix, strlen(kinds[i].prefix)) == 0)
			break;
	if (i == sizeof(kinds) / sizeof(kinds[0])) {
		/* Do not echo it: a bare value may well be the secret. */
		cfg_err(cp, v, "\"source\" must be env:NAME, file:PATH, "
		    "exec:COMMAND or literal:VALUE (a bare value is refused)");
		return;
	}
	rest = s + strlen(kinds[i].prefix);
	if (*rest == '\0') {
		cfg_err(cp, v, "\"source\": %s needs %s", kinds[i].prefix,
		    kinds[i].needs);
		return;
	}
	if (strcmp(kinds[i].prefix, "file:") != 0) {
		sc->sc_source = xstrdup(s);
		return;
	}
	/* Relative to the configuration's directory, stored absolute. */
	path = cfg_path_join(cp->cp_cfg->c_dir, rest);
	plen = strlen(path);
	len = 5 + plen + 1;
	sc->sc_source = xmalloc(len);
	snprintf(sc->sc_source, len, "file:%s", path);
	free(path);
}

static void
cfg_k_sec_refresh(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_xctx	*xc = arg;
	const char	*s;
	uint64_t	 ms;

	xc->xc_refresh = v;
	if ((s = cfg_scalar(cp, v, "\"refresh\"", "a duration")) == NULL)
		return;
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

	if (cfg_want_seq(cp, v, "\"hosts\"") == -1)
		return;
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

	ic->ic_header = v;
	if ((s = cfg_scalar(cp, v, "\"header\"", "a header name")) == NULL)
		return;
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

	ic->ic_value = v;
	if ((s = cfg_scalar(cp, v, "\"value\"", "a template such as "
	    "\"Bearer ${secret}\"")) == NULL)
		return;
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

	if ((s = cfg_scalar(cp, v, "\"username\"", "a string")) == NULL)
		return;
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
	{ "username", 0, cfg_k_inj_username, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_inj_basic(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_ictx	*ic = arg;

	ic->ic_basic = v;
	if (cfg_want_map(cp, v, "\"basic\"") == 0)
		cfg_walk_map(cp, v, "basic", cfg_basic_keys, ic->ic_sec);
}

static void
cfg_k_inj_query(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_ictx	*ic = arg;
	const char	*s, *p;

	ic->ic_query = v;
	if ((s = cfg_scalar(cp, v, "\"query\"", "a parameter name")) == NULL)
		return;
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
	char		 what[32];
	char		*copy;

	snprintf(what, sizeof(what), "\"%s\"", k->k_name);
	if ((s = cfg_scalar(cp, v, what, "a string")) == NULL)
		return;
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
	{ "region", CFG_K_REQUIRED, cfg_k_inj_aws_name, SEC(sc_region), 0, 0 },
	{ "service", CFG_K_REQUIRED, cfg_k_inj_aws_name, SEC(sc_service),
	    0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};
#undef SEC

static void
cfg_k_inj_sigv4(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_ictx	*ic = arg;

	ic->ic_sigv4 = v;
	if (cfg_want_map(cp, v, "\"aws_sigv4\"") == 0)
		cfg_walk_map(cp, v, "aws_sigv4", cfg_sigv4_keys, ic->ic_sec);
}

static const struct cfg_key cfg_inject_keys[] = {
	{ "header", 0, cfg_k_inj_header, 0, 0, 0 },
	{ "value", 0, cfg_k_inj_value, 0, 0, 0 },
	{ "basic", 0, cfg_k_inj_basic, 0, 0, 0 },
	{ "query", 0, cfg_k_inj_query, 0, 0, 0 },
	{ "aws_sigv4", 0, cfg_k_inj_sigv4, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
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

	xc->xc_inject = v;
	if (cfg_want_map(cp, v, "\"inject\"") == -1)
		return;
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

	xc->xc_placeholder = v;
	if ((s = cfg_scalar(cp, v, "\"placeholder\"", "a string")) == NULL)
		return;
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

	xc->xc_env = v;
	if ((s = cfg_scalar(cp, v, "\"sandbox_env\"", "a variable name")) ==
	    NULL)
		return;
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

/* Plain HTTP shows the value to every hop: only when the secret says so. */
static void
cfg_k_sec_allow_plaintext(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_xctx	*xc = arg;

	cfg_set_bool(cp, k, v, xc->xc_sec);
}

static const struct cfg_key cfg_secret_keys[] = {
	{ "name", CFG_K_REQUIRED, cfg_k_sec_name, 0, 0, 0 },
	{ "source", CFG_K_REQUIRED, cfg_k_sec_source, 0, 0, 0 },
	{ "refresh", 0, cfg_k_sec_refresh, 0, 0, 0 },
	{ "hosts", CFG_K_REQUIRED, cfg_k_sec_hosts, 0, 0, 0 },
	{ "inject", 0, cfg_k_sec_inject, 0, 0, 0 },
	{ "placeholder", 0, cfg_k_sec_placeholder, 0, 0, 0 },
	{ "sandbox_env", 0, cfg_k_sec_sandbox_env, 0, 0, 0 },
	{ "allow_plaintext", 0, cfg_k_sec_allow_plaintext,
	    offsetof(struct cfg_secret, sc_allow_plaintext), 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
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
	if (xc->xc_inject == NULL && xc->xc_placeholder == NULL)
		cfg_err(cp, map, "secret \"%s\" needs \"inject\", "
		    "\"placeholder\" or both", sc->sc_name != NULL ?
		    sc->sc_name : "?");
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

	if (cfg_want_seq(cp, v, "\"secrets\"") == -1)
		return;
	n = cfg_seq_len(v);
	c->c_secrets = xcalloc(n, sizeof(*c->c_secrets));
	xcs = xcalloc(n, sizeof(*xcs));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		xc = &xcs[c->c_nsecrets];
		xc->xc_sec = &c->c_secrets[c->c_nsecrets++];
		xc->xc_sec->sc_line = (int)item->start_mark.line + 1;
		xc->xc_sec->sc_col = (int)item->start_mark.column + 1;
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

/* policies and their rules */

static void
cfg_k_rule_host(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_rule	*r = arg;
	const char	*s, *why;

	if ((s = cfg_scalar(cp, v, "\"host\"", "a host pattern")) == NULL)
		return;
	if ((why = cfg_host_pattern(s, &r->r_host)) != NULL)
		cfg_err(cp, v, "bad host \"%s\": %s", s, why);
}

/* The list of key <k>, refusing [] where absent means "any". */
static size_t
cfg_rule_list(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v)
{
	char	what[32];
	size_t	n;

	snprintf(what, sizeof(what), "\"%s\"", k->k_name);
	if (cfg_want_seq(cp, v, what) == -1)
		return 0;
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

	if (cfg_want_seq(cp, v, "\"secrets\"") == -1)
		return;
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

	if ((s = cfg_scalar(cp, v, "\"meter\"",
	    "openai, anthropic, gemini or none")) == NULL)
		return;
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

static const struct cfg_key cfg_rule_keys[] = {
	{ "host", CFG_K_REQUIRED, cfg_k_rule_host, 0, 0, 0 },
	{ "ports", 0, cfg_k_rule_ports, 0, 0, 0 },
	{ "methods", 0, cfg_k_rule_methods, 0, 0, 0 },
	{ "paths", 0, cfg_k_rule_paths, 0, 0, 0 },
	{ "intercept", 0, cfg_set_bool, offsetof(struct cfg_rule, r_intercept),
	    0, 0 },
	{ "secrets", 0, cfg_k_rule_secrets, 0, 0, 0 },
	{ "meter", 0, cfg_k_rule_meter, 0, 0, 0 },
	{ "async_usd", 0, cfg_k_rule_async, offsetof(struct cfg_rule,
	    r_async_usd), 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
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
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"name\"", "a string")) == NULL)
		return;
	if (!cfg_name_ok(s)) {
		cfg_err(cp, v, "bad policy name \"%s\": use letters, digits, "
		    "\".\", \"_\" and \"-\" (at most %d, starting with a "
		    "letter or digit)", s, CFG_MAX_NAME);
		/* Kept, so that sandboxes naming it add no noise. */
	}
	pc->pc_pol->p_name = xstrdup(s);
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

	if (cfg_want_seq(cp, v, "\"rules\"") == -1)
		return;
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
		if (r->r_ports == NULL) {
			r->r_ports = xmalloc(sizeof(defports));
			memcpy(r->r_ports, defports, sizeof(defports));
			r->r_nports = 2;
		}
	}
}

/*
 * Caps: each setter marks its cap present once its value is good. The
 * generic setters report problems themselves: a new error means no value.
 */
static void
cfg_k_cap_usd(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg_caps	*cc = arg;
	int		 nerr = cp->cp_errors;

	cfg_set_money(cp, k, v, arg);
	cc->cp_has_usd = cp->cp_errors == nerr;
}

static void
cfg_k_cap_requests(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_caps	*cc = arg;
	int		 nerr = cp->cp_errors;

	cfg_set_count64(cp, k, v, arg);
	cc->cp_has_requests = cp->cp_errors == nerr;
}

static void
cfg_k_cap_bytes(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_caps	*cc = arg;
	int		 nerr = cp->cp_errors;

	cfg_set_size64(cp, k, v, arg);
	if (cp->cp_errors != nerr)
		return;
	if (k->k_off == offsetof(struct cfg_caps, cp_bytes_in))
		cc->cp_has_bytes_in = 1;
	else
		cc->cp_has_bytes_out = 1;
}

static void
cfg_k_cap_rate(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_caps	*cc = arg;
	const char	*s, *why;

	if ((s = cfg_scalar(cp, v, "\"rate\"", "a rate such as 50/s")) ==
	    NULL)
		return;
	if ((why = cfg_parse_rate(s, &cc->cp_rate_n, &cc->cp_rate_ms)) !=
	    NULL) {
		cfg_err(cp, v, "bad rate \"%s\": %s (use e.g. 50/s, 600/m, "
		    "10/h)", s, why);
		return;
	}
	cc->cp_has_rate = 1;
}

/* Counters are kept per window of whole seconds (bud_counters). */
static void
cfg_k_cap_window(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_caps	*cc = arg;
	const char	*s;
	uint64_t	 ms;

	if ((s = cfg_scalar(cp, v, "\"window\"", "a duration")) == NULL)
		return;
	if (cfg_parse_duration(s, &ms) == -1) {
		cfg_err(cp, v, "bad duration \"%s\" for \"window\" (use e.g. "
		    "1h, 24h, 7d)", s);
		return;
	}
	if (ms < 1000 || ms % 1000 != 0) {
		cfg_err(cp, v, "\"window\" must be a whole number of seconds, "
		    "at least 1s, not \"%s\"", s);
		return;
	}
	cc->cp_window_ms = ms;
}

#define CAP(m)	offsetof(struct cfg_caps, m)
static const struct cfg_key cfg_caps_keys[] = {
	{ "usd", 0, cfg_k_cap_usd, CAP(cp_usd), 0, 0 },
	{ "requests", 0, cfg_k_cap_requests, CAP(cp_requests), 0, 0 },
	{ "bytes_in", 0, cfg_k_cap_bytes, CAP(cp_bytes_in), 0, 0 },
	{ "bytes_out", 0, cfg_k_cap_bytes, CAP(cp_bytes_out), 0, 0 },
	{ "rate", 0, cfg_k_cap_rate, 0, 0, 0 },
	{ "window", 0, cfg_k_cap_window, 0, 0, 0 },
	{ "llm_concurrency", 0, cfg_set_count64, CAP(cp_llm_concurrency),
	    0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};
#undef CAP

static void
cfg_k_policy_caps(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_policy	*p = ((struct cfg_pctx *)arg)->pc_pol;

	if (cfg_want_map(cp, v, "\"caps\"") == 0)
		cfg_walk_map(cp, v, "caps", cfg_caps_keys, &p->p_caps);
}

/* A list of ISO 3166-1 alpha-2 codes, kept upper-case. */
static void
cfg_geo_list(struct cfg_parse *cp, yaml_node_t *v, const char *what,
    char (**out)[3], size_t *n)
{
	yaml_node_t	*item;
	const char	*s;
	size_t		 i;

	if (cfg_want_seq(cp, v, what) == -1)
		return;
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
	{ "deny_countries", 0, cfg_k_geo_deny, 0, 0, 0 },
	{ "allow_countries", 0, cfg_k_geo_allow, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_policy_geo(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_policy	*p = ((struct cfg_pctx *)arg)->pc_pol;

	if (cfg_want_map(cp, v, "\"geo\"") == 0)
		cfg_walk_map(cp, v, "geo", cfg_geo_keys, p);
	if (cp->cp_geo_node == NULL && p->p_ngeo_deny + p->p_ngeo_allow > 0)
		cp->cp_geo_node = v;	/* checked once geoip is known */
}

static const struct cfg_key cfg_policy_keys[] = {
	{ "name", CFG_K_REQUIRED, cfg_k_policy_name, 0, 0, 0 },
	{ "rules", 0, cfg_k_policy_rules, 0, 0, 0 },
	{ "geo", 0, cfg_k_policy_geo, 0, 0, 0 },
	{ "caps", 0, cfg_k_policy_caps, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
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

	if (cfg_want_seq(cp, v, "\"policies\"") == -1)
		return;
	c->c_policies = xcalloc(cfg_seq_len(v), sizeof(*c->c_policies));
	names = xcalloc(cfg_seq_len(v), sizeof(*names));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		pc.pc_pol = &c->c_policies[c->c_npolicies++];
		pc.pc_pol->p_caps.cp_llm_concurrency = CFG_LLM_CONCURRENCY;
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

/* sandboxes */

static void
cfg_k_sbx_id(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg_sctx	*sc = arg;
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"id\"", "a string")) == NULL)
		return;
	if (!cfg_name_ok(s)) {
		cfg_err(cp, v, "bad sandbox id \"%s\": use letters, digits, "
		    "\".\", \"_\" and \"-\" (at most %d, starting with a "
		    "letter or digit)", s, CFG_MAX_NAME);
		/* Kept, so that default_sandbox naming it adds no noise. */
	}
	sc->sc_sbx->s_id = xstrdup(s);
	sc->sc_id = v;
}

static void
cfg_k_sbx_policy(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_sctx	*sc = arg;
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"policy\"", "a policy name")) == NULL)
		return;
	sc->sc_sbx->s_policy_name = xstrdup(s);
	*sc->sc_policy = v;
}

static void
cfg_k_sbx_token(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_sandbox	*s = ((struct cfg_sctx *)arg)->sc_sbx;
	const char		*src;

	s->s_token_generated = 0;
	if ((src = cfg_scalar(cp, v, "\"token\"", "a source such as "
	    "env:NAME")) == NULL)
		return;
	cfg_source_read(cp, v, "token", src, &s->s_token, &s->s_token_len);
}

static void
cfg_k_sbx_addresses(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_sctx		*sc = arg;
	struct cfg_sandbox	*s = sc->sc_sbx;
	yaml_node_t		*item;
	const char		*a;
	char			*ip;
	size_t			 i;

	if (cfg_want_seq(cp, v, "\"addresses\"") == -1)
		return;
	s->s_addresses = xcalloc(cfg_seq_len(v), sizeof(char *));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		if ((a = cfg_scalar(cp, item, "an address", "an IP address")) ==
		    NULL)
			continue;
		if ((ip = cfg_ip_canon(a)) == NULL) {
			cfg_err(cp, item, "bad address \"%s\": not an IP "
			    "address", a);
			continue;
		}
		s->s_addresses[s->s_naddresses++] = ip;
		cfg_namev_add(sc->sc_addrs, ip, item);
	}
}

static const struct cfg_key cfg_sandbox_keys[] = {
	{ "id", CFG_K_REQUIRED, cfg_k_sbx_id, 0, 0, 0 },
	{ "policy", CFG_K_REQUIRED, cfg_k_sbx_policy, 0, 0, 0 },
	{ "token", 0, cfg_k_sbx_token, 0, 0, 0 },
	{ "addresses", 0, cfg_k_sbx_addresses, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_sandboxes(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_sctx		 sc;
	struct cfg_namev	 addrs = { NULL, 0, 0 };
	struct cfg_name		*ids;
	yaml_node_t		*item;
	size_t			 i, n, nids = 0;

	if (cfg_want_seq(cp, v, "\"sandboxes\"") == -1)
		return;
	n = cfg_seq_len(v);
	c->c_sandboxes = xcalloc(n, sizeof(*c->c_sandboxes));
	cp->cp_sbx_policy = xcalloc(n, sizeof(*cp->cp_sbx_policy));
	ids = xcalloc(n, sizeof(*ids));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		sc.sc_sbx = &c->c_sandboxes[c->c_nsandboxes];
		sc.sc_id = NULL;
		sc.sc_policy = &cp->cp_sbx_policy[c->c_nsandboxes];
		sc.sc_addrs = &addrs;
		c->c_nsandboxes++;
		/* No token key: the daemon makes one up. */
		sc.sc_sbx->s_token_generated = 1;
		if (cfg_want_map(cp, item, "a sandbox") == -1)
			continue;
		cfg_walk_map(cp, item, "sandbox", cfg_sandbox_keys, &sc);
		if (sc.sc_sbx->s_id != NULL) {
			ids[nids].n_name = sc.sc_sbx->s_id;
			ids[nids++].n_node = sc.sc_id;
		}
	}
	cfg_check_dups(cp, ids, nids, "sandbox id");
	cfg_check_dups(cp, addrs.nv_v, addrs.nv_n, "sandbox address");
	free(ids);
	free(addrs.nv_v);
}

/* pricing */

/* One pricing entry while its mapping is walked. */
struct cfg_prctx {
	struct cfg_price	*px_price;
	const yaml_node_t	*px_model;
	int			 px_cached;	/* cached_input given */
	int			 px_write;	/* cache_write given */
};

static void
cfg_k_price_model(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_prctx	*px = arg;
	const char		*s, *p;

	if ((s = cfg_scalar(cp, v, "\"model\"", "a model name glob")) == NULL)
		return;
	for (p = s; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			break;
	if (*s == '\0' || *p != '\0') {
		cfg_err(cp, v, "bad model \"%s\": %s", s, *s == '\0' ?
		    "empty (use \"*\" for any model)" :
		    "contains a space or control character");
		return;
	}
	px->px_price->pr_model = xstrdup(s);
	px->px_model = v;
}

/* A price: k_off is into struct cfg_price, the walk's arg a cfg_prctx. */
static void
cfg_k_price(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg_prctx	*px = arg;
	int			 nerr = cp->cp_errors;

	cfg_set_money(cp, k, v, px->px_price);
	if (cp->cp_errors != nerr)
		return;
	if (k->k_off == offsetof(struct cfg_price, pr_cached_input))
		px->px_cached = 1;
	else if (k->k_off == offsetof(struct cfg_price, pr_cache_write))
		px->px_write = 1;
}

/* max_output: the most output tokens the model can produce. */
static void
cfg_k_price_max_output(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	cfg_set_count64(cp, k, v, ((struct cfg_prctx *)arg)->px_price);
}

#define PR(m)	offsetof(struct cfg_price, m)
static const struct cfg_key cfg_price_keys[] = {
	{ "model", CFG_K_REQUIRED, cfg_k_price_model, 0, 0, 0 },
	{ "input", CFG_K_REQUIRED, cfg_k_price, PR(pr_input), 0, 0 },
	{ "output", CFG_K_REQUIRED, cfg_k_price, PR(pr_output), 0, 0 },
	{ "cached_input", 0, cfg_k_price, PR(pr_cached_input), 0, 0 },
	{ "cache_write", 0, cfg_k_price, PR(pr_cache_write), 0, 0 },
	{ "max_output", 0, cfg_k_price_max_output, PR(pr_max_output), 1, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};
#undef PR

/*
 * First match wins, so an entry repeating an earlier model glob could never
 * apply: reported as a duplicate.
 */
static void
cfg_k_pricing(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_namev	 models = { NULL, 0, 0 };
	struct cfg_prctx	 px;
	yaml_node_t		*item;
	size_t			 i;

	if (cfg_want_seq(cp, v, "\"pricing\"") == -1)
		return;
	c->c_pricing = xcalloc(cfg_seq_len(v), sizeof(*c->c_pricing));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		memset(&px, 0, sizeof(px));
		px.px_price = &c->c_pricing[c->c_npricing++];
		if (cfg_want_map(cp, item, "a pricing entry") == -1)
			continue;
		cfg_walk_map(cp, item, "pricing entry", cfg_price_keys, &px);
		if (cp->cp_toobig)
			break;
		if (!px.px_cached)
			px.px_price->pr_cached_input = px.px_price->pr_input;
		if (!px.px_write)
			px.px_price->pr_cache_write = px.px_price->pr_input;
		if (px.px_price->pr_model != NULL)
			cfg_namev_add(&models, px.px_price->pr_model,
			    px.px_model);
	}
	cfg_check_dups(cp, models.nv_v, models.nv_n, "pricing model");
	free(models.nv_v);
}

/* budget_store */

static void
cfg_k_budget_store(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s, *auth, *end, *at;

	if ((s = cfg_scalar(cp, v, "\"budget_store\"", "\"file\"")) == NULL)
		return;
	if (strcmp(s, "file") == 0) {
		cp->cp_cfg->c_budget_store = xstrdup(s);
		return;
	}
	if (strncmp(s, "redis://", 8) != 0 && strncmp(s, "rediss://", 9) != 0) {
		cfg_err(cp, v, "\"budget_store\" must be \"file\", not \"%s\"",
		    s);
		return;
	}
	/* A password in the URL's user part is not echoed. */
	auth = strstr(s, "://") + 3;
	end = auth + strcspn(auth, "/?#");
	for (at = end; at > auth && *at != '@'; at--)
		;
	if (*at == '@')
		cfg_err(cp, v, "budget_store \"%.*s***%s\" is not supported "
		    "yet (only \"file\")", (int)(auth - s), s, at);
	else
		cfg_err(cp, v, "budget_store \"%s\" is not supported yet "
		    "(only \"file\")", s);
}

/* launcher */

static void
cfg_k_launcher_backend(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"backend\"", "netns, qemu or none")) ==
	    NULL)
		return;
	if (strcmp(s, "none") == 0)
		cp->cp_cfg->c_launcher_backend = CFG_BACKEND_NONE;
	else if (strcmp(s, "netns") == 0) {
		cp->cp_cfg->c_launcher_backend = CFG_BACKEND_NETNS;
		cp->cp_backend_node = v;
	} else if (strcmp(s, "qemu") == 0) {
		cp->cp_cfg->c_launcher_backend = CFG_BACKEND_QEMU;
		cp->cp_backend_node = v;
	} else
		cfg_err(cp, v, "\"backend\" must be netns, qemu or none, not "
		    "\"%s\"", s);
}

#define LCH(m)	offsetof(struct cfg, m)
static const struct cfg_key cfg_pool_keys[] = {
	{ "warm", 0, cfg_set_count, LCH(c_pool_warm), 0, 0 },
	{ "max", 0, cfg_set_count, LCH(c_pool_max), 1, 0 },
	{ "idle_timeout", 0, cfg_set_duration, LCH(c_pool_idle_ms), 1, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};
#undef LCH

static void
cfg_k_launcher_pool(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	if (cfg_want_map(cp, v, "\"pool\"") == 0)
		cfg_walk_map(cp, v, "pool", cfg_pool_keys, cp->cp_cfg);
}

/* launcher.network, launcher.dns_pool: an IPv4 CIDR, /8 to /30. */
static void
cfg_k_launcher_cidr(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct net_cidr	 nc;
	const char	*s;
	char		 what[32];
	snprintf(what, sizeof(what), "\"%s\"", k->k_name);
	if ((s = cfg_scalar(cp, v, what, "an IPv4 CIDR such as "
	    "\"10.88.0.0/16\"")) == NULL)
		return;
	if (net_cidr_parse(s, &nc) == -1 || nc.nc_addr.na_family != AF_INET ||
	    strchr(s, '/') == NULL) {
		cfg_err(cp, v, "bad %s \"%s\": an IPv4 network such as "
		    "\"10.88.0.0/16\" (host bits zero)", k->k_name, s);
		return;
	}
	if (nc.nc_prefix < 8 || nc.nc_prefix > 30) {
		cfg_err(cp, v, "%s \"%s\": the prefix must be /8 to /30",
		    k->k_name, s);
		return;
	}
	memcpy((char *)cp->cp_cfg + k->k_off, &nc, sizeof(nc));
}

static void
cfg_k_launcher_rootfs(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;
	if (cfg_is_null(v))
		return;
	if ((s = cfg_scalar(cp, v, "\"rootfs\"", "a directory or null")) ==
	    NULL)
		return;
	if (*s == '\0') {
		cfg_err(cp, v, "\"rootfs\" is empty (null = the host's tools)");
		return;
	}
	cp->cp_cfg->c_launcher_rootfs = cfg_path_join(cp->cp_cfg->c_dir, s);
}

/* launcher.interface_prefix: host veth names are <prefix><n>. */
static void
cfg_k_launcher_ifprefix(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s, *p;

	if ((s = cfg_scalar(cp, v, "\"interface_prefix\"", "a short "
	    "name such as \"sbx-\"")) == NULL)
		return;
	for (p = s; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-'))
			break;
	if (*s == '\0' || *p != '\0' || strlen(s) > 8) {
		cfg_err(cp, v, "\"interface_prefix\" must be 1 to 8 of a-z, "
		    "0-9 and \"-\", not \"%s\"", s);
		return;
	}
	free(cp->cp_cfg->c_launcher_ifprefix);
	cp->cp_cfg->c_launcher_ifprefix = xstrdup(s);
}

/* "UID:GID", numeric. */
static void
cfg_k_launcher_user(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s, *colon;
	char		 uid[16];
	uint64_t	 u, g;
	if ((s = cfg_scalar(cp, v, "\"user\"", "\"UID:GID\"")) == NULL)
		return;
	colon = strchr(s, ':');
	if (colon == NULL || (size_t)(colon - s) >= sizeof(uid)) {
		cfg_err(cp, v, "\"user\" must be \"UID:GID\" (numbers), not "
		    "\"%s\"", s);
		return;
	}
	memcpy(uid, s, (size_t)(colon - s));
	uid[colon - s] = '\0';
	if (cfg_parse_uint(uid, 0xfffffffeU, &u) == -1 ||
	    cfg_parse_uint(colon + 1, 0xfffffffeU, &g) == -1) {
		cfg_err(cp, v, "\"user\" must be \"UID:GID\" (numbers), not "
		    "\"%s\"", s);
		return;
	}
	if (u == 0 || g == 0) {
		cfg_err(cp, v, "\"%s\" must not be root (uid and gid 0)",
		    k->k_name);
		return;
	}
	if (strcmp(k->k_name, "gateway_user") == 0) {
		cp->cp_cfg->c_gateway_uid = (uint32_t)u;
		cp->cp_cfg->c_gateway_gid = (uint32_t)g;
	} else {
		cp->cp_cfg->c_launcher_uid = (uint32_t)u;
		cp->cp_cfg->c_launcher_gid = (uint32_t)g;
	}
}

#define LCH(m)	offsetof(struct cfg, m)
static const struct cfg_key cfg_llimits_keys[] = {
	{ "memory", 0, cfg_set_size64, LCH(c_launcher_memory), 1024 * 1024,
	    0 },
	{ "pids", 0, cfg_set_count64, LCH(c_launcher_pids), 1, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_launcher_limits(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	if (cfg_want_map(cp, v, "\"limits\"") == 0)
		cfg_walk_map(cp, v, "launcher limits", cfg_llimits_keys,
		    cp->cp_cfg);
}

/* launcher.qemu: kernel, initrd (files), binary (a program) */
static void
cfg_k_qemu_path(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;
	char		 what[32], **dst, *path;
	int		 mode = strcmp(k->k_name, "binary") == 0 ? X_OK : R_OK;

	snprintf(what, sizeof(what), "\"%s\"", k->k_name);
	if ((s = cfg_scalar(cp, v, what, "a file")) == NULL)
		return;
	if (*s == '\0') {
		cfg_err(cp, v, "\"%s\" is empty", k->k_name);
		return;
	}
	path = cfg_path_join(cp->cp_cfg->c_dir, s);
	if (access(path, mode) == -1)
		cfg_err(cp, v, "qemu %s \"%s\": %s", k->k_name, path,
		    strerror(errno));
	dst = (char **)((char *)cp->cp_cfg + k->k_off);
	free(*dst);
	*dst = path;
}

static void
cfg_k_qemu_accel(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"accel\"", "auto, kvm or tcg")) == NULL)
		return;
	if (strcmp(s, "auto") == 0)
		cp->cp_cfg->c_qemu_accel = CFG_ACCEL_AUTO;
	else if (strcmp(s, "kvm") == 0)
		cp->cp_cfg->c_qemu_accel = CFG_ACCEL_KVM;
	else if (strcmp(s, "tcg") == 0)
		cp->cp_cfg->c_qemu_accel = CFG_ACCEL_TCG;
	else
		cfg_err(cp, v, "\"accel\" must be auto, kvm or tcg, not "
		    "\"%s\"", s);
}

static const struct cfg_key cfg_qemu_keys[] = {
	{ "kernel", 0, cfg_k_qemu_path, LCH(c_qemu_kernel), 0, 0 },
	{ "initrd", 0, cfg_k_qemu_path, LCH(c_qemu_initrd), 0, 0 },
	{ "binary", 0, cfg_k_qemu_path, LCH(c_qemu_binary), 0, 0 },
	{ "memory", 0, cfg_set_size64, LCH(c_qemu_memory), 64ULL << 20,
	    64ULL << 30 },
	{ "vcpus", 0, cfg_set_count64, LCH(c_qemu_vcpus), 1, 64 },
	{ "accel", 0, cfg_k_qemu_accel, 0, 0, 0 },
	{ "boot_timeout", 0, cfg_set_duration, LCH(c_qemu_boot_ms), 1000,
	    600000 },
	{ "min_free", 0, cfg_set_size64, LCH(c_qemu_min_free), 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_launcher_qemu(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	if (cfg_want_map(cp, v, "\"qemu\"") == 0) {
		cp->cp_qemu_node = v;
		cfg_walk_map(cp, v, "launcher qemu", cfg_qemu_keys,
		    cp->cp_cfg);
	}
}

static const struct cfg_key cfg_launcher_keys[] = {
	{ "backend", 0, cfg_k_launcher_backend, 0, 0, 0 },
	{ "pool", 0, cfg_k_launcher_pool, 0, 0, 0 },
	{ "network", 0, cfg_k_launcher_cidr, LCH(c_launcher_network), 0, 0 },
	{ "dns_pool", 0, cfg_k_launcher_cidr, LCH(c_dns_pool), 0, 0 },
	{ "rootfs", 0, cfg_k_launcher_rootfs, 0, 0, 0 },
	{ "interface_prefix", 0, cfg_k_launcher_ifprefix, 0, 0, 0 },
	{ "gateway_user", 0, cfg_k_launcher_user, 0, 0, 0 },
	{ "user", 0, cfg_k_launcher_user, 0, 0, 0 },
	{ "limits", 0, cfg_k_launcher_limits, 0, 0, 0 },
	{ "qemu", 0, cfg_k_launcher_qemu, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};
#undef LCH

static void
cfg_k_launcher(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	cp->cp_cfg->c_launcher_set = 1;
	if (cfg_want_map(cp, v, "\"launcher\"") == 0)
		cfg_walk_map(cp, v, "launcher", cfg_launcher_keys, cp->cp_cfg);
}

/* audit */

static void
cfg_k_audit_file(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s;

	if ((s = cfg_scalar(cp, v, "\"file\"", "a path or \"-\"")) == NULL)
		return;
	if (*s == '\0')
		cfg_err(cp, v, "\"file\" is empty (use \"-\" for stdout)");
	else if (strcmp(s, "-") == 0)
		c->c_audit_file = xstrdup(s);
	else
		c->c_audit_file = cfg_path_join(c->c_dir, s);
}

static const struct cfg_key cfg_audit_keys[] = {
	{ "file", 0, cfg_k_audit_file, 0, 0, 0 },
	{ "hash_chain", 0, cfg_set_bool, offsetof(struct cfg,
	    c_audit_hash_chain), 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_audit(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	if (cfg_want_map(cp, v, "\"audit\"") == 0)
		cfg_walk_map(cp, v, "audit", cfg_audit_keys, cp->cp_cfg);
}

/* admin: {token: SOURCE}; a file: source that does not exist yet is
 * created by the daemon (0600). */
static void
cfg_k_admin_token(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*src;
	char		*path;

	if ((src = cfg_scalar(cp, v, "\"token\"", "a source such as "
	    "file:PATH")) == NULL)
		return;
	if (strncmp(src, "file:", 5) == 0 && src[5] != '\0') {
		path = cfg_path_join(c->c_dir, src + 5);
		if (access(path, F_OK) == -1 && errno == ENOENT) {
			c->c_admin_token_file = path;
			return;
		}
		c->c_admin_token_file = path;
	}
	cfg_source_read(cp, v, "admin.token", src, &c->c_admin_token,
	    &c->c_admin_token_len);
}

static const struct cfg_key cfg_admin_keys[] = {
	{ "token", 0, cfg_k_admin_token, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_admin(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	if (cfg_want_map(cp, v, "\"admin\"") == 0)
		cfg_walk_map(cp, v, "admin", cfg_admin_keys, cp->cp_cfg);
}

/* geoip: {database: PATH}; null = off. The file is opened by the daemon. */
static void
cfg_k_geoip_database(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s;
	char		 why[256];

	if (cfg_is_null(v))
		return;
	if ((s = cfg_scalar(cp, v, "\"database\"", "a path to a .mmdb "
	    "file")) == NULL)
		return;
	if (*s == '\0') {
		cfg_err(cp, v, "\"database\" is empty (use null to turn "
		    "GeoIP off)");
		return;
	}
	c->c_geoip_database = cfg_path_join(c->c_dir, s);
	/* opened now, so that a bad file is reported at its key */
	if (access(c->c_geoip_database, R_OK) == -1)
		cfg_err(cp, v, "geoip database \"%s\": %s",
		    c->c_geoip_database, strerror(errno));
	else if ((c->c_geo = geo_open(c->c_geoip_database, why,
	    sizeof(why))) == NULL)
		cfg_err(cp, v, "geoip database \"%s\": %s",
		    c->c_geoip_database, why);
}

static const struct cfg_key cfg_geoip_keys[] = {
	{ "database", 0, cfg_k_geoip_database, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

static void
cfg_k_geoip(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	if (cfg_want_map(cp, v, "\"geoip\"") == 0)
		cfg_walk_map(cp, v, "geoip", cfg_geoip_keys, cp->cp_cfg);
}

static const struct cfg_key cfg_top_keys[] = {
	{ "listen", 0, cfg_k_listen, 0, 0, 0 },
	{ "state_dir", 0, cfg_k_state_dir, 0, 0, 0 },
	{ "workers", 0, cfg_k_workers, 0, 0, 0 },
	{ "limits", 0, cfg_k_limits, 0, 0, 0 },
	{ "upstream", 0, cfg_k_upstream, 0, 0, 0 },
	{ "policies", 0, cfg_k_policies, 0, 0, 0 },
	{ "sandboxes", 0, cfg_k_sandboxes, 0, 0, 0 },
	{ "audit", 0, cfg_k_audit, 0, 0, 0 },
	{ "tls", 0, cfg_k_tls, 0, 0, 0 },
	{ "admin", 0, cfg_k_admin, 0, 0, 0 },
	{ "geoip", 0, cfg_k_geoip, 0, 0, 0 },
	{ "secrets", 0, cfg_k_secrets, 0, 0, 0 },
	{ "reflect_min_run", 0, cfg_set_count,
	    offsetof(struct cfg, c_reflect_min_run), 4, 4096 },
	{ "pricing", 0, cfg_k_pricing, 0, 0, 0 },
	{ "budget_store", 0, cfg_k_budget_store, 0, 0, 0 },
	{ "launcher", 0, cfg_k_launcher, 0, 0, 0 },
	{ NULL, 0, NULL, 0, 0, 0 },
};

/* Takes ownership of <file> and <dir>. */
static struct cfg *
cfg_new(char *file, char *dir)
{
	struct cfg	*c;

	c = xcalloc(1, sizeof(*c));
	c->c_file = file;
	c->c_dir = dir;
	c->c_limits.l_header_bytes = 64 * 1024;
	c->c_reflect_min_run = 12;
	c->c_limits.l_header_timeout_ms = 30 * 1000;
	c->c_limits.l_connect_timeout_ms = 10 * 1000;
	c->c_limits.l_idle_timeout_ms = 120 * 1000;
	c->c_limits.l_shutdown_grace_ms = 30 * 1000;
	c->c_limits.l_reload_grace_ms = 10 * 1000;
	c->c_limits.l_upstream_timeout_ms = 300 * 1000;
	c->c_limits.l_max_connections = 20000;
	c->c_limits.l_max_connections_per_sandbox = 512;
	c->c_limits.l_unidentified_per_source = 128;
	c->c_limits.l_unidentified_share = 50;
	c->c_limits.l_identify_timeout_ms = 10 * 1000;
	c->c_limits.l_body_bytes = 16 * 1024 * 1024;
	c->c_limits.l_default_max_tokens = CFG_DEFAULT_MAX_OUTPUT;
	c->c_tls_cert_cache = 10000;
	c->c_pool_warm = 2;
	c->c_pool_max = 64;
	c->c_pool_idle_ms = 15ULL * 60 * 1000;
	if (net_cidr_parse("10.88.0.0/16", &c->c_launcher_network) == -1 ||
	    net_cidr_parse("198.18.0.0/15", &c->c_dns_pool) == -1)
		fatalx("default launcher networks");
	c->c_launcher_uid = 65534;
	c->c_launcher_gid = 65534;
	c->c_gateway_uid = 65533;
	c->c_gateway_gid = 65533;
	c->c_launcher_memory = 512ULL * 1024 * 1024;
	c->c_launcher_pids = 256;
	c->c_qemu_memory = 256ULL << 20;
	c->c_qemu_vcpus = 1;
	c->c_qemu_boot_ms = 60000;
	c->c_qemu_min_free = 512ULL << 20;
	c->c_tls_leaf_validity_ms = 7ULL * 24 * 3600 * 1000;
	c->c_tls_min_version = TLS1_2_VERSION;
	if ((c->c_guard = net_guard_new()) == NULL)
		fatalx("net_guard_new");
	c->c_refs = 1;
	return c;
}

/*
 * A rule's "secrets" item: the secret must exist, and its own "hosts" must
 * cover every host the rule can match, so that the binding holds whatever
 * the request (it is checked again when attaching).
 */
static void
cfg_secref_resolve(struct cfg_parse *cp, const struct cfg_secref *sr)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_rule		*r = sr->sr_rule;
	const struct cfg_secret	*sc;
	const char		*name;
	char			 hosts[512];
	size_t			 i, j, off;

	name = (const char *)sr->sr_node->data.scalar.value;
	for (i = 0; i < c->c_nsecrets; i++)
		if (c->c_secrets[i].sc_name != NULL &&
		    strcmp(c->c_secrets[i].sc_name, name) == 0)
			break;
	if (i == c->c_nsecrets) {
		cfg_err(cp, sr->sr_node, "secret \"%s\" is not defined", name);
		return;
	}
	sc = &c->c_secrets[i];
	/* Spliced rules and repeated names are reported already. */
	if (!r->r_intercept || r->r_host == NULL)
		return;
	for (off = 0; off < r->r_nsecrets; off++)
		if (r->r_secrets[off] == i)
			return;
	if (sc->sc_nhosts == 0)
		return;
	if (!cfg_hosts_cover(sc->sc_hosts, sc->sc_nhosts, r->r_host)) {
		/* Truncated past the buffer: the message stays one line. */
		hosts[0] = '\0';
		for (off = 0, j = 0; j < sc->sc_nhosts && off < sizeof(hosts);
		    j++)
			off += (size_t)snprintf(hosts + off,
			    sizeof(hosts) - off, "%s\"%s\"", j ? ", " : "",
			    sc->sc_hosts[j]);
		cfg_err(cp, sr->sr_node, "secret \"%s\" is bound to hosts "
		    "[%s] which do not cover rule host \"%s\"", name, hosts,
		    r->r_host);
		return;
	}
	r->r_secrets[r->r_nsecrets++] = i;
}

/* Defaults that depend on other keys, then the cross-references. */
static void
cfg_finish(struct cfg_parse *cp)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_sandbox	*s;
	size_t			 i;

	if (c->c_listen_proxy == NULL) {
		c->c_listen_proxy = xcalloc(1, sizeof(char *));
		c->c_listen_proxy[0] = xstrdup("127.0.0.1:3128");
		c->c_nlisten_proxy = 1;
	}
	cfg_listen_finish(cp);
	if (c->c_state_dir == NULL)
		c->c_state_dir = cfg_path_join(c->c_dir, "state");
	if (c->c_audit_file == NULL)
		c->c_audit_file = cfg_path_join(c->c_state_dir, "audit.jsonl");
	if (c->c_listen_admin == NULL) {
		char *sock = cfg_path_join(c->c_state_dir, "admin.sock");

		if (asprintf(&c->c_listen_admin, "unix:%s", sock) == -1)
			fatal("asprintf");
		free(sock);
	}
	if (c->c_admin_token == NULL && c->c_admin_token_file == NULL)
		c->c_admin_token_file = cfg_path_join(c->c_state_dir,
		    "admin.token");
	if (c->c_upstream_ca_file == NULL)
		c->c_upstream_ca_file = xstrdup("system");
	if (c->c_upstream_resolver == NULL)
		c->c_upstream_resolver = xstrdup("system");
	if (c->c_budget_store == NULL)
		c->c_budget_store = xstrdup("file");
	if (!cp->cp_deny_seen)
		net_guard_deny_default(c->c_guard);
	c->c_self = net_self_from_cfg(c);
	if (cp->cp_toobig)
		return;

	for (i = 0; i < c->c_nsandboxes; i++) {
		s = &c->c_sandboxes[i];
		if (s->s_policy_name == NULL)
			continue;
		s->s_policy = (struct cfg_policy *)cfg_policy_find(c,
		    s->s_policy_name);
		if (s->s_policy == NULL && cp->cp_sbx_policy[i] != NULL)
			cfg_err(cp, cp->cp_sbx_policy[i], "sandbox \"%s\": "
			    "policy \"%s\" is not defined",
			    s->s_id != NULL ? s->s_id : "?", s->s_policy_name);
	}
	/* launched sandboxes have no way out but these two */
	if (CFG_BACKEND_LAUNCHED(c) &&
	    (c->c_listen_transparent == NULL || c->c_listen_dns == NULL))
		cfg_err(cp, cp->cp_backend_node, "launcher backend \"%s\" "
		    "needs listen.transparent and listen.dns (the sandboxes' "
		    "only way out)", c->c_launcher_backend == CFG_BACKEND_QEMU ?
		    "qemu" : "netns");
	if (c->c_launcher_backend == CFG_BACKEND_QEMU &&
	    (c->c_qemu_kernel == NULL || c->c_qemu_initrd == NULL))
		cfg_err(cp, cp->cp_qemu_node != NULL ? cp->cp_qemu_node :
		    cp->cp_backend_node, "launcher backend \"qemu\" needs "
		    "launcher.qemu.kernel and launcher.qemu.initrd (make "
		    "guest-image builds both)");
	/* country rules without a database would refuse everything */
	if (cp->cp_geo_node != NULL && c->c_geoip_database == NULL)
		cfg_err(cp, cp->cp_geo_node, "\"geo\" rules need "
		    "geoip.database (no country is known without it)");
	if (c->c_default_sandbox != NULL &&
	    cfg_sandbox_find(c, c->c_default_sandbox) == NULL)
		cfg_err(cp, cp->cp_default_sandbox, "default_sandbox \"%s\" "
		    "is not a defined sandbox", c->c_default_sandbox);
	for (i = 0; i < cp->cp_nsecrefs; i++)
		cfg_secref_resolve(cp, &cp->cp_secrefs[i]);
}

/* Parse <buf> into cp->cp_cfg; the count of problems is in cp_errors. */
static void
cfg_parse_buf(struct cfg_parse *cp, const char *buf, size_t len)
{
	yaml_node_t	*root;

	root = cfg_doc_load(cp, buf, len);
	/* nothing in it: most likely the wrong file, or a pipe read twice;
	   running with every default would hide that */
	if (cp->cp_errors == 0 && (root == NULL || cfg_is_null(root))) {
		cfg_err_mark(cp, root != NULL ? &root->start_mark :
		    &(yaml_mark_t){ 0, 0, 0 }, "the configuration is empty "
		    "(refused: it would run with every default)");
		root = NULL;
	}
	if (root != NULL) {
		if (root->type != YAML_MAPPING_NODE && !cfg_is_null(root))
			cfg_err(cp, root, "the configuration must be a "
			    "mapping of keys, not %s", cfg_node_kind(root));
		else
			cfg_walk_map(cp, root, NULL, cfg_top_keys,
			    cp->cp_cfg);
	}
	/* No document after a syntax error: nothing to cross-check. */
	if (cp->cp_have_doc)
		cfg_finish(cp);
	cfg_doc_free(cp);
	free(cp->cp_sbx_policy);
	cp->cp_sbx_policy = NULL;
	free(cp->cp_secrefs);
	cp->cp_secrefs = NULL;
	free(cp->cp_listen_nodes);
	cp->cp_listen_nodes = NULL;
	cp->cp_nsecrefs = cp->cp_secrefs_cap = 0;
}

static struct cfg *
cfg_done(struct cfg_parse *cp, int *nerrors)
{
	if (nerrors != NULL)
		*nerrors = cp->cp_errors;
	if (cp->cp_errors != 0) {
		cfg_free(cp->cp_cfg);
		return NULL;
	}
	return cp->cp_cfg;
}

/* The whole file, NUL-terminated, or NULL with errno set. */
static char *
cfg_read_file(const char *path, size_t *len)
{
	char	*buf = NULL;
	size_t	 cap = 0;
	ssize_t	 r;
	int	 fd, saved;

	*len = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	for (;;) {
		if (*len + 1 >= cap) {
			if (cap >= CFG_MAX_FILE) {
				errno = EFBIG;
				goto fail;
			}
			cap = cap == 0 ? 8192 : cap * 2;
			buf = xrealloc(buf, cap);
		}
		r = read(fd, buf + *len, cap - *len - 1);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			goto fail;
		if (r == 0)
			break;
		*len += (size_t)r;
	}
	close(fd);
	buf[*len] = '\0';
	return buf;
fail:
	saved = errno;
	close(fd);
	free(buf);
	errno = saved;
	return NULL;
}

/* Absolute directory of <path>, so later chdir()s do not matter. */
char *
cfg_dir_of(const char *path)
{
	const char	*slash;
	char		*dir, *abs;

	if ((slash = strrchr(path, '/')) == NULL)
		dir = xstrdup(".");
	else if (slash == path)
		dir = xstrdup("/");
	else
		dir = xstrndup(path, (size_t)(slash - path));
	if ((abs = realpath(dir, NULL)) == NULL)
		return dir;
	free(dir);
	return abs;
}

struct cfg *
cfg_load(const char *path, FILE *errs, int *nerrors)
{
	struct cfg_parse	 cp;
	char			*buf;
	size_t			 len;

	memset(&cp, 0, sizeof(cp));
	cp.cp_file = path;
	cp.cp_errs = errs;
	cp.cp_cfg = cfg_new(xstrdup(path), cfg_dir_of(path));
	if ((buf = cfg_read_file(path, &len)) == NULL) {
		cfg_err_file(&cp, "cannot read: %s", errno == EFBIG ?
		    "larger than 16MiB" : strerror(errno));
		return cfg_done(&cp, nerrors);
	}
	cfg_parse_buf(&cp, buf, len);
	free(buf);
	return cfg_done(&cp, nerrors);
}

struct cfg *
cfg_load_buffer(const char *name, const char *buf, size_t len, FILE *errs,
    int *nerrors)
{
	struct cfg_parse	 cp;
	char			*cwd;

	memset(&cp, 0, sizeof(cp));
	cp.cp_file = name;
	cp.cp_errs = errs;
	if ((cwd = getcwd(NULL, 0)) == NULL)
		cwd = xstrdup(".");
	cp.cp_cfg = cfg_new(xstrdup(name), cwd);
	cfg_parse_buf(&cp, buf, len);
	return cfg_done(&cp, nerrors);
}

static void
cfg_strv_free(char **v, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void
cfg_secret_free(struct cfg_secret *sc)
{
	/* literal: holds the value itself, exec: may. */
	if (sc->sc_source != NULL)
		OPENSSL_cleanse(sc->sc_source, strlen(sc->sc_source));
	free(sc->sc_source);
	free(sc->sc_name);
	cfg_strv_free(sc->sc_hosts, sc->sc_nhosts);
	free(sc->sc_header);
	free(sc->sc_template);
	free(sc->sc_username);
	free(sc->sc_query);
	free(sc->sc_region);
	free(sc->sc_service);
	free(sc->sc_placeholder);
	free(sc->sc_sandbox_env);
}

/*
 * Frees <c> and all it owns; token and secret bytes are wiped first (the
 * store's values by sec_store_free). NULL ok.
 */
void
cfg_free(struct cfg *c)
{
	struct cfg_policy	*p;
	struct cfg_rule		*r;
	struct cfg_sandbox	*s;
	size_t			 i, j;

	if (c == NULL)
		return;
	sec_store_free(c->c_store);
	geo_close(c->c_geo);
	for (i = 0; i < c->c_nsecrets; i++)
		cfg_secret_free(&c->c_secrets[i]);
	free(c->c_secrets);
	free(c->c_file);
	free(c->c_dir);
	cfg_listen_free(c);
	cfg_strv_free(c->c_listen_proxy, c->c_nlisten_proxy);
	free(c->c_default_sandbox);
	free(c->c_listen_admin);
	free(c->c_listen_transparent);
	free(c->c_listen_dns);
	free(c->c_launcher_rootfs);
	free(c->c_launcher_ifprefix);
	free(c->c_qemu_kernel);
	free(c->c_qemu_initrd);
	free(c->c_qemu_binary);
	if (c->c_admin_token != NULL)
		OPENSSL_cleanse(c->c_admin_token, c->c_admin_token_len);
	free(c->c_admin_token);
	free(c->c_admin_token_file);
	free(c->c_geoip_database);
	free(c->c_state_dir);
	free(c->c_upstream_ca_file);
	free(c->c_upstream_resolver);
	for (i = 0; i < c->c_nupstream_hosts; i++) {
		free(c->c_upstream_hosts[i].h_name);
		free(c->c_upstream_hosts[i].h_ip);
	}
	free(c->c_upstream_hosts);
	net_guard_free(c->c_guard);
	net_self_free(c->c_self);
	for (i = 0; i < c->c_npolicies; i++) {
		p = &c->c_policies[i];
		free(p->p_name);
		for (j = 0; j < p->p_nrules; j++) {
			r = &p->p_rules[j];
			free(r->r_host);
			free(r->r_ports);
			cfg_strv_free(r->r_methods, r->r_nmethods);
			cfg_strv_free(r->r_paths, r->r_npaths);
			free(r->r_secrets);
		}
		free(p->p_rules);
		free(p->p_geo_deny);
		free(p->p_geo_allow);
	}
	free(c->c_policies);
	for (i = 0; i < c->c_npricing; i++)
		free(c->c_pricing[i].pr_model);
	free(c->c_pricing);
	free(c->c_budget_store);
	for (i = 0; i < c->c_nsandboxes; i++) {
		s = &c->c_sandboxes[i];
		free(s->s_id);
		free(s->s_policy_name);
		if (s->s_token != NULL)
			OPENSSL_cleanse(s->s_token, s->s_token_len);
		free(s->s_token);
		cfg_strv_free(s->s_addresses, s->s_naddresses);
	}
	free(c->c_sandboxes);
	free(c->c_audit_file);
	free(c);
}

struct cfg *
cfg_ref(struct cfg *c)
{
	__atomic_add_fetch(&c->c_refs, 1, __ATOMIC_RELAXED);
	return c;
}

void
cfg_unref(struct cfg *c)
{
	if (c == NULL)
		return;
	/* Acquire-release: the last holder sees every other's writes. */
	if (__atomic_sub_fetch(&c->c_refs, 1, __ATOMIC_ACQ_REL) == 0)
		cfg_free(c);
}

const struct cfg_sandbox *
cfg_sandbox_find(const struct cfg *c, const char *id)
{
	size_t	i;

	for (i = 0; i < c->c_nsandboxes; i++)
		if (c->c_sandboxes[i].s_id != NULL &&
		    strcmp(c->c_sandboxes[i].s_id, id) == 0)
			return &c->c_sandboxes[i];
	return NULL;
}

const struct cfg_policy *
cfg_policy_find(const struct cfg *c, const char *name)
{
	size_t	i;

	for (i = 0; i < c->c_npolicies; i++)
		if (c->c_policies[i].p_name != NULL &&
		    strcmp(c->c_policies[i].p_name, name) == 0)
			return &c->c_policies[i];
	return NULL;
}
