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
#include "cfg/cfg_planes.h"
#include "dns/net_guard.h"
#include "dns/net_self.h"
#include "geo/geo.h"
#include "secrets/sec.h"
#include "upstream/upstream.h"
#include "util/log.h"
#include "util/util.h"

/* Top-level keys: each plane's table, in this order (cfg_planes.h). */
static const struct cfg_key *const cfg_planes[] = {
	cfg_core_keys, pol_cfg_keys, sbx_cfg_keys, aud_cfg_keys, tls_cfg_keys,
	adm_cfg_keys, geo_cfg_keys, sec_cfg_keys, bud_cfg_keys, lnc_cfg_keys,
};

#define CFG_MAX_TOP	32	/* top-level keys of all planes */

/* The planes' tables as the one table the walker takes. */
static void
cfg_top_keys(struct cfg_key *out)
{
	const struct cfg_key	*k;
	size_t			 i, n = 0;

	for (i = 0; i < sizeof(cfg_planes) / sizeof(cfg_planes[0]); i++)
		for (k = cfg_planes[i]; k->k_name != NULL; k++) {
			if (n == CFG_MAX_TOP - 1)
				fatalx("more than %d top-level keys",
				    CFG_MAX_TOP - 1);
			out[n++] = *k;
		}
	memset(&out[n], 0, sizeof(out[n]));
}

/* Takes ownership of <file> and <dir>. */
static struct cfg *
cfg_new(char *file, char *dir)
{
	struct cfg	*c;

	c = xcalloc(1, sizeof(*c));
	c->c_file = file;
	c->c_dir = dir;
	c->c_limits.l_header_bytes = 64 * 1024;
	c->c_limits.l_h2_max_streams = 100;
	c->c_reflect_min_run = 12;
	c->c_limits.l_header_timeout_ms = 30 * 1000;
	c->c_limits.l_connect_timeout_ms = 10 * 1000;
	c->c_limits.l_store_timeout_ms = 2 * 1000;
	c->c_limits.l_store_lease_ms = 30 * 1000;
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
	c->c_ask_timeout_ms = 30 * 1000;
	c->c_ask_max_pending = 16;
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
	c->c_launcher_snap_max = 1ULL << 30;
	c->c_launcher_dns_max_names = 4096;
	c->c_launcher_dns_per_min = 30;
	c->c_qemu_memory = 256ULL << 20;
	c->c_qemu_vcpus = 1;
	c->c_qemu_boot_ms = 60000;
	c->c_qemu_min_free = 512ULL << 20;
	c->c_tls_leaf_validity_ms = 7ULL * 24 * 3600 * 1000;
	c->c_tls_min_version = TLS1_2_VERSION;
	c->c_tls_alpn = 0x03;	/* h2 and http/1.1 (TLS_ALPN_*) */
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
	up_cfg_attach_auth(cp);
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
	struct cfg_key	 top[CFG_MAX_TOP];
	yaml_node_t	*root;

	cfg_top_keys(top);
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
			cfg_walk_map(cp, root, NULL, top,
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
	if (sc->sc_broker != NULL) {
		if (sc->sc_broker->b_cred != NULL)
			OPENSSL_cleanse(sc->sc_broker->b_cred,
			    strlen(sc->sc_broker->b_cred));
		free(sc->sc_broker->b_cred);
		if (sc->sc_broker->b_cred2 != NULL)
			OPENSSL_cleanse(sc->sc_broker->b_cred2,
			    strlen(sc->sc_broker->b_cred2));
		free(sc->sc_broker->b_cred2);
		free(sc->sc_broker->b_token_url);
		free(sc->sc_broker->b_client_id);
		free(sc->sc_broker->b_scope);
		free(sc->sc_broker->b_app_id);
		free(sc->sc_broker->b_installation_id);
		free(sc->sc_broker);
	}
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
	free(c->c_listen_socks5);
	free(c->c_listen_dns);
	free(c->c_launcher_rootfs);
	free(c->c_pool_from);
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
	up_parent_free(c->c_upstream_proxy);
	if (c->c_upstream_proxy_auth != NULL)
		OPENSSL_cleanse(c->c_upstream_proxy_auth,
		    c->c_upstream_proxy_auth_len);
	free(c->c_upstream_proxy_auth);
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
			if (r->r_mcp != NULL) {
				cfg_strv_free(r->r_mcp->m_tools,
				    r->r_mcp->m_ntools);
				cfg_strv_free(r->r_mcp->m_deny,
				    r->r_mcp->m_ndeny);
				free(r->r_mcp);
			}
			free(r->r_secrets);
			up_parent_free(r->r_via);
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
	free(c->c_bs_host);
	free(c->c_bs_unix);
	free(c->c_bs_auth);
	free(c->c_gateway);
	free(c->c_tls_fleet_ca_key);
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
	free(c->c_ask_webhook);
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

