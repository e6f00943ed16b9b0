/*
 * The core keys: listen, state_dir, workers, limits, upstream.
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

#include <fcntl.h>

#include "cfg/cfg_internal.h"
#include "dns/net_guard.h"
#include "util/log.h"
#include "util/util.h"
#include "cfg/cfg_planes.h"

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

	s = cfg_str(v);
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

	s = cfg_str(v);
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
	char		*canon;

	s = cfg_str(v);
	if ((why = cfg_parse_hostport(s, 0, &canon)) != NULL) {
		cfg_err(cp, v, "bad %s address \"%s\": %s", k->k_name, s, why);
		return;
	}
	memcpy((char *)cp->cp_cfg + k->k_off, &canon, sizeof(canon));
}

static const struct cfg_key cfg_listen_keys[] = {
	CFG_ANY("proxy", CFG_K_RESTART, cfg_k_proxy, 0),
	CFG_SCALAR("default_sandbox", 0, cfg_k_default_sandbox, 0,
	    "a sandbox id"),
	CFG_SCALAR("transparent", CFG_K_RESTART, cfg_k_listen_one,
	    offsetof(struct cfg, c_listen_transparent), "\"IP:PORT\""),
	CFG_SCALAR("socks5", CFG_K_RESTART, cfg_k_listen_one,
	    offsetof(struct cfg, c_listen_socks5), "\"IP:PORT\""),
	CFG_SCALAR("dns", CFG_K_RESTART, cfg_k_listen_one,
	    offsetof(struct cfg, c_listen_dns), "\"IP:PORT\""),
	CFG_SCALAR("admin", CFG_K_RESTART, cfg_k_listen_admin, 0,
	    "\"unix:PATH\" or \"HOST:PORT\""),
	CFG_END,
};

/* state_dir, workers */

static void
cfg_k_state_dir(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s;

	s = cfg_str(v);
	if (*s == '\0') {
		cfg_err(cp, v, "\"state_dir\" is empty");
		return;
	}
	c->c_state_dir = cfg_path_join(c->c_dir, s);
}

/* gateway: this gateway's name in a fleet (audit records say it). */
static void
cfg_k_gateway(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	const char	*s = cfg_str(v), *p;

	(void)k;
	(void)arg;
	for (p = s; *p != '\0'; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f ||
		    *p == '"' || *p == '\\')
			break;
	if (*s == '\0' || *p != '\0' || p - s > 64) {
		cfg_err(cp, v, "\"gateway\" must be 1 to 64 printable "
		    "characters without spaces or quotes, not \"%s\"", s);
		return;
	}
	free(cp->cp_cfg->c_gateway);
	cp->cp_cfg->c_gateway = xstrdup(s);
}

static void
cfg_k_workers(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	const char	*s;
	uint64_t	 n;

	s = cfg_str(v);
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
	CFG_SIZE("header_bytes", 0, LIM(l_header_bytes), 1024, 0),
	CFG_COUNT("h2_max_streams", 0, LIM(l_h2_max_streams), 1, 1000),
	CFG_DURATION("header_timeout", 0, LIM(l_header_timeout_ms), 1, 0),
	CFG_DURATION("connect_timeout", 0, LIM(l_connect_timeout_ms), 1, 0),
	CFG_DURATION("store_timeout", 0, LIM(l_store_timeout_ms), 1, 0),
	CFG_DURATION("store_lease", 0, LIM(l_store_lease_ms), 300, 0),
	CFG_DURATION("idle_timeout", 0, LIM(l_idle_timeout_ms), 1, 0),
	CFG_DURATION("shutdown_grace", 0, LIM(l_shutdown_grace_ms), 0, 0),
	CFG_DURATION("reload_grace", 0, LIM(l_reload_grace_ms), 0, 0),
	CFG_COUNT("max_connections", 0, LIM(l_max_connections), 1, 0),
	CFG_COUNT("max_connections_per_sandbox", 0,
	    LIM(l_max_connections_per_sandbox), 1, 0),
	CFG_COUNT("unidentified_per_source", 0,
	    LIM(l_unidentified_per_source), 1, 0),
	CFG_PERCENT("unidentified_share", 0, LIM(l_unidentified_share), 1),
	CFG_DURATION("identify_timeout", 0, LIM(l_identify_timeout_ms), 1, 0),
	CFG_DURATION("upstream_timeout", 0, LIM(l_upstream_timeout_ms), 1, 0),
	CFG_SIZE64("body_bytes", 0, LIM(l_body_bytes), 0, 0),
	CFG_COUNT64("default_max_tokens", 0, LIM(l_default_max_tokens), 1, 0),
	CFG_END,
};
#undef LIM

/* upstream */

static void
cfg_k_ca_file(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg	*c = cp->cp_cfg;
	const char	*s;
	char		*path, why[256];
	int		 fd, n;

	s = cfg_str(v);
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

	s = cfg_str(v);
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
	CFG_SCALAR("ca_file", 0, cfg_k_ca_file, 0, "\"system\" or a path"),
	CFG_SCALAR("resolver", 0, cfg_k_resolver, 0, "\"system\" or IP:PORT"),
	CFG_MAP("hosts", 0, cfg_k_hosts),
	CFG_SCALAR("proxy", 0, up_cfg_k_proxy, 0,
	    "http://HOST:PORT, socks5://HOST:PORT or direct"),
	CFG_SCALAR("proxy_auth", 0, up_cfg_k_proxy_auth, 0,
	    "env:NAME, file:PATH, exec:COMMAND or literal:VALUE"),
	CFG_SEQ("deny_networks", 0, cfg_k_deny_networks),
	CFG_SEQ("allow_networks", 0, cfg_k_allow_networks),
	CFG_SEQ("alpn", 0, tls_cfg_k_upstream_alpn),
	CFG_END,
};

const struct cfg_key cfg_core_keys[] = {
	CFG_NEST("listen", 0, cfg_listen_keys, "listen", 0),
	CFG_SCALAR("state_dir", CFG_K_RESTART, cfg_k_state_dir, 0, "a path"),
	CFG_SCALAR("workers", CFG_K_RESTART, cfg_k_workers, 0, "a number"),
	CFG_SCALAR("gateway", CFG_K_RESTART, cfg_k_gateway, 0, "a name"),
	CFG_NEST("limits", 0, cfg_limits_keys, "limits",
	    offsetof(struct cfg, c_limits)),
	CFG_NEST("upstream", 0, cfg_upstream_keys, "upstream", 0),
	CFG_END,
};
