/*
 * Admin API routes (SPEC "Admin API"): sandboxes, usage, reload, status,
 * metrics. Bodies are JSON objects read with json-c; unknown fields are
 * refused so that a typo never silently does something else.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <json-c/json.h>
#include <llhttp.h>
#include <openssl/crypto.h>

#include "admin/admin_internal.h"
#include "audit/aud.h"
#include "budget/bud.h"
#include "ca/ca.h"
#include "cfg/cfg.h"
#include "cfg/cfg_internal.h"
#include "conn/worker.h"
#include "metrics/metrics.h"
#include "sbx/sbx.h"
#include "sbx/sbx_fleet.h"
#include "sched/canary.h"
#include "sched/pool.h"
#include "util/log.h"
#include "util/util.h"

#define ADMIN_MAX_SEGS	6

static uint64_t	admin_reloads_ok, admin_reloads_failed;

void
admin_count_reload(int ok)
{
	if (ok)
		admin_reloads_ok++;
	else
		admin_reloads_failed++;
}

/* Serialize <o> as the response body (and drop it). */
void
admin_json(struct admin_resp *r, int status, json_object *o)
{
	const char	*text;

	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	r->ar_status = status;
	evbuffer_add(r->ar_body, text, strlen(text));
	evbuffer_add(r->ar_body, "\n", 1);
	json_object_put(o);
}

void
admin_error(struct admin_resp *r, int status, const char *code,
    const char *reason)
{
	json_object	*o = json_object_new_object();

	json_object_object_add(o, "error", json_object_new_string(code));
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_object_add(o, "request_id",
	    json_object_new_string(r->ar_id));
	evbuffer_drain(r->ar_body, evbuffer_get_length(r->ar_body));
	admin_json(r, status, o);
}

static void
fmt_time(int64_t t, char *buf, size_t bufsz)
{
	struct tm	tm;
	time_t		tt = (time_t)t;

	gmtime_r(&tt, &tm);
	strftime(buf, bufsz, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/*
 * The request body as a JSON object whose keys are all in <allowed>
 * (NULL-terminated). An empty body is {}. NULL after answering 400.
 */
json_object *
admin_body_object(const struct admin_req *q, struct admin_resp *r,
    const char *const *allowed)
{
	json_tokener	*tok;
	json_object	*o;
	char		 why[256];
	size_t		 i;

	if (q->aq_body_len == 0)
		return json_object_new_object();
	tok = json_tokener_new();
	o = json_tokener_parse_ex(tok, q->aq_body, (int)q->aq_body_len);
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success ||
	    (size_t)json_tokener_get_parse_end(tok) != q->aq_body_len) {
		snprintf(why, sizeof(why), "body is not valid JSON: %s",
		    json_tokener_error_desc(json_tokener_get_error(tok)));
		if (o != NULL &&
		    json_tokener_get_error(tok) == json_tokener_success)
			snprintf(why, sizeof(why), "body is not valid JSON: "
			    "trailing bytes after the object");
		json_tokener_free(tok);
		json_object_put(o);
		admin_error(r, 400, "bad_request", why);
		return NULL;
	}
	json_tokener_free(tok);
	if (!json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		admin_error(r, 400, "bad_request", "body must be a JSON object");
		return NULL;
	}
	json_object_object_foreach(o, key, val) {
		(void)val;
		for (i = 0; allowed[i] != NULL; i++)
			if (strcmp(key, allowed[i]) == 0)
				break;
		if (allowed[i] == NULL) {
			snprintf(why, sizeof(why), "unknown field \"%.64s\"",
			    key);
			json_object_put(o);
			admin_error(r, 400, "bad_request", why);
			return NULL;
		}
	}
	return o;
}

/* A string member, NULL when absent; -1 after answering 400. */
int
admin_body_string(json_object *o, const char *key, const char **out,
    struct admin_resp *r)
{
	json_object	*v;
	char		 why[128];

	*out = NULL;
	if (!json_object_object_get_ex(o, key, &v) ||
	    json_object_is_type(v, json_type_null))
		return 0;
	if (!json_object_is_type(v, json_type_string)) {
		snprintf(why, sizeof(why), "\"%s\" must be a string", key);
		admin_error(r, 400, "bad_request", why);
		return -1;
	}
	*out = json_object_get_string(v);
	return 0;
}

/* The sandbox gateway: the first host address of launcher.network. */
static void
net_gateway_text(const struct cfg *cfg, char *buf, size_t bufsz)
{
	struct net_addr	gw = cfg->c_launcher_network.nc_addr;

	gw.na_bytes[3] |= 1;
	net_addr_format(&gw, buf, bufsz);
}

static void
route_healthz(const struct admin_req *q, struct admin_resp *r)
{
	json_object	*o = json_object_new_object();

	json_object_object_add(o, "status", json_object_new_string("ok"));
	admin_json(r, 200, o);
}

static void
route_metrics(const struct admin_req *q, struct admin_resp *r)
{
	r->ar_status = 200;
	r->ar_ctype = "text/plain; version=0.0.4; charset=utf-8";
	met_render(r->ar_body);
}

static void
route_status(const struct admin_req *q, struct admin_resp *r)
{
	const struct cfg *cfg = admin_hooks.ah_cfg();
	json_object	*o = json_object_new_object(), *a, *rl;
	struct sbx	**list;
	size_t		 n;

	n = sbx_list(&list);
	sbx_list_free(list, n);
	json_object_object_add(o, "status", json_object_new_string("ok"));
	json_object_object_add(o, "version",
	    json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(o, "uptime_s",
	    json_object_new_int64((int64_t)(time(NULL) - admin_started)));
	json_object_object_add(o, "connections",
	    json_object_new_int64((int64_t)worker_conn_count()));
	json_object_object_add(o, "sandboxes",
	    json_object_new_int64((int64_t)n));
	json_object_object_add(o, "requests",
	    json_object_new_int64((int64_t)met_requests_total()));
	a = json_object_new_object();
	json_object_object_add(a, "available",
	    json_object_new_boolean(aud_available()));
	json_object_object_add(a, "write_errors",
	    json_object_new_int64((int64_t)aud_write_errors()));
	json_object_object_add(o, "audit", a);
	rl = json_object_new_object();
	json_object_object_add(rl, "ok",
	    json_object_new_int64((int64_t)admin_reloads_ok));
	json_object_object_add(rl, "failed",
	    json_object_new_int64((int64_t)admin_reloads_failed));
	json_object_object_add(o, "reloads", rl);
	json_object_object_add(o, "config", json_object_new_string(
	    cfg->c_file));
	admin_json(r, 200, o);
}

/* http://ID:TOKEN@HOST:PORT of the first explicit-proxy listener. */
static json_object *
proxy_url(const struct cfg *cfg, const struct sbx *s)
{
	json_object	*v;
	char		*url;

	if (s->sb_token == NULL)	/* another gateway's: token unknown */
		return NULL;
	if (asprintf(&url, "http://%s:%.*s@%s", s->sb_id,
	    (int)s->sb_token_len, s->sb_token, cfg->c_listen_proxy[0]) == -1)
		fatal("asprintf");
	v = json_object_new_string(url);
	OPENSSL_cleanse(url, strlen(url));
	free(url);
	return v;
}

static json_object *
sandbox_summary(const struct sbx *s)
{
	json_object	*o = json_object_new_object();
	char		 ts[32];

	fmt_time(s->sb_created, ts, sizeof(ts));
	json_object_object_add(o, "id", json_object_new_string(s->sb_id));
	json_object_object_add(o, "policy",
	    json_object_new_string(s->sb_policy));
	json_object_object_add(o, "static",
	    json_object_new_boolean(s->sb_static));
	json_object_object_add(o, "state", json_object_new_string(
	    s->sb_static ? "static" : (s->sb_flags & SBX_F_POOLED) ? "warm" :
	    (s->sb_flags & SBX_F_LAUNCHED) ? "launched" : "created"));
	json_object_object_add(o, "created", json_object_new_string(ts));
	json_object_object_add(o, "connections", json_object_new_int64(
	    __atomic_load_n(&s->sb_conns, __ATOMIC_RELAXED)));
	if (s->sb_flags & SBX_F_VM)
		json_object_object_add(o, "paused", json_object_new_boolean(
		    (s->sb_flags & SBX_F_PAUSED) != 0));
	return o;
}

static const char *
backend_name(int backend)
{
	return backend == CFG_BACKEND_QEMU ? "qemu" :
	    backend == CFG_BACKEND_NETNS ? "netns" : "none";
}

/*
 * For airlockctl run: how to reach a launched sandbox. netns: enter the
 * namespaces of its init as its user; qemu: its guest agent's socket.
 */
static void
sandbox_launched(const struct cfg *cfg, const struct sbx *s, json_object *o)
{
	char	 user[32], ip[INET6_ADDRSTRLEN];

	json_object_object_add(o, "backend", json_object_new_string(
	    (s->sb_flags & SBX_F_VM) ? "qemu" : (s->sb_flags & SBX_F_NETNS) ?
	    "netns" : "none"));
	if (!(s->sb_flags & SBX_F_NETNS))
		return;
	json_object_object_add(o, "pid", json_object_new_int(s->sb_init_pid));
	snprintf(user, sizeof(user), "%u:%u", cfg->c_launcher_uid,
	    cfg->c_launcher_gid);
	json_object_object_add(o, "user", json_object_new_string(user));
	json_object_object_add(o, "io_uring",
	    json_object_new_boolean(cfg->c_launcher_io_uring));
	if (s->sb_flags & SBX_F_VM)
		json_object_object_add(o, "ctl_socket",
		    json_object_new_string(s->sb_ctl));
	if (s->sb_naddrs > 0) {
		net_addr_format(&s->sb_addrs[0], ip, sizeof(ip));
		json_object_object_add(o, "address",
		    json_object_new_string(ip));
	}
}

/* Summary plus token, proxy_url and the CA certificate. */
static json_object *
sandbox_full(const struct cfg *cfg, const struct sbx *s)
{
	json_object	*o = sandbox_summary(s);
	struct ca	*ca;

	/* another gateway's sandbox: its token is known by its hash only */
	json_object_object_add(o, "token", s->sb_token == NULL ? NULL :
	    json_object_new_string_len(s->sb_token, (int)s->sb_token_len));
	json_object_object_add(o, "proxy_url", proxy_url(cfg, s));
	ca = ca_get(cfg->c_state_dir, s->sb_id);
	json_object_object_add(o, "ca_cert", ca != NULL ?
	    json_object_new_string(ca_cert_pem(ca)) : NULL);
	return o;
}

/*
 * What a workload of <s> sees in its environment (SPEC "Inside a
 * sandbox"), less the CA variables, which point at a file the launcher
 * writes. Backend none has no route to force, so the proxy variables are
 * set too. Placeholders only, never a secret's value.
 */
static json_object *
sandbox_env(const struct cfg *cfg, const struct sbx *s)
{
	json_object	*o = json_object_new_object(), *url;
	const char	*gw = cfg->c_listen_proxy[0];
	char		 host[64];
	size_t		 i, len;

	json_object_object_add(o, "AIRLOCK_SANDBOX_ID",
	    json_object_new_string(s->sb_id));
	json_object_object_add(o, "AIRLOCK_SESSION_TOKEN",
	    s->sb_token == NULL ? NULL :
	    json_object_new_string_len(s->sb_token, (int)s->sb_token_len));
	if (s->sb_flags & SBX_F_NETNS) {
		/* its only route leads to the gateway: no proxy settings */
		net_gateway_text(cfg, host, sizeof(host));
		json_object_object_add(o, "AIRLOCK_GATEWAY",
		    json_object_new_string(host));
	} else {
		/* the gateway's IP: the proxy address without port/brackets */
		len = strcspn(gw[0] == '[' ? gw + 1 : gw, gw[0] == '[' ?
		    "]" : ":");
		if (len >= sizeof(host))
			len = sizeof(host) - 1;
		memcpy(host, gw[0] == '[' ? gw + 1 : gw, len);
		host[len] = '\0';
		json_object_object_add(o, "AIRLOCK_GATEWAY",
		    json_object_new_string(host));
		url = proxy_url(cfg, s);
		json_object_object_add(o, "HTTP_PROXY", json_object_get(url));
		json_object_object_add(o, "HTTPS_PROXY", json_object_get(url));
		json_object_object_add(o, "http_proxy", json_object_get(url));
		json_object_object_add(o, "https_proxy", url);
	}
	for (i = 0; i < cfg->c_nsecrets; i++)
		if (cfg->c_secrets[i].sc_sandbox_env != NULL &&
		    cfg->c_secrets[i].sc_placeholder != NULL)
			json_object_object_add(o,
			    cfg->c_secrets[i].sc_sandbox_env,
			    json_object_new_string(
			    cfg->c_secrets[i].sc_placeholder));
	return o;
}

static void
route_sandbox_list(const struct admin_req *q, struct admin_resp *r)
{
	json_object	*o = json_object_new_object(), *a;
	struct sbx	**list;
	size_t		 i, n;

	a = json_object_new_array();
	n = sbx_list(&list);
	for (i = 0; i < n; i++)
		json_object_array_add(a, sandbox_summary(list[i]));
	sbx_list_free(list, n);
	json_object_object_add(o, "sandboxes", a);
	admin_json(r, 200, o);
}

static void	claim_answer(struct admin_resp *, enum sbx_err, struct sbx *,
		    int warm, const char *policy);

static void
route_sandbox_create(const struct admin_req *q, struct admin_resp *r)
{
	static const char *const fields[] = { "policy", "id", "from", NULL };
	const struct cfg *cfg = admin_hooks.ah_cfg();
	json_object	*body;
	const char	*policy, *id, *from;
	struct sbx	*s;
	enum sbx_err	 e;
	char		 why[256];
	int		 warm;

	if ((body = admin_body_object(q, r, fields)) == NULL)
		return;
	if (admin_body_string(body, "policy", &policy, r) == -1 ||
	    admin_body_string(body, "id", &id, r) == -1 ||
	    admin_body_string(body, "from", &from, r) == -1) {
		json_object_put(body);
		return;
	}
	/* no policy named: "default" if there is one, else the only one */
	if (policy == NULL) {
		if (cfg_policy_find(cfg, "default") != NULL)
			policy = "default";
		else if (cfg->c_npolicies == 1)
			policy = cfg->c_policies[0].p_name;
		else {
			json_object_put(body);
			admin_error(r, 400, "bad_request", "\"policy\" is "
			    "required (the config has no policy named "
			    "\"default\")");
			return;
		}
	}
	if (from != NULL) {
		/* a launched sandbox from a snapshot (issue 22, point 2) */
		if (id != NULL)
			admin_error(r, 400, "bad_request", "\"id\" and "
			    "\"from\" do not go together");
		else if (adm_snap_from_ok(r, from) == 0) {
			s = NULL;
			e = pool_claim_from(policy, from, &s, &warm);
			claim_answer(r, e, s, warm, policy);
			sbx_unref(s);
		}
		json_object_put(body);
		return;
	}
	e = sbx_create(cfg, policy, id, 0, &s);
	if (e != SBX_OK) {
		if (e == SBX_E_POLICY)
			snprintf(why, sizeof(why), "no policy \"%.64s\" in "
			    "the running config", policy);
		else
			snprintf(why, sizeof(why), "%s", sbx_strerror(e));
		json_object_put(body);
		admin_error(r, e == SBX_E_EXISTS ? 409 : e == SBX_E_IO ? 500 :
		    e == SBX_E_FLEET ? 503 : 400, e == SBX_E_EXISTS ?
		    "conflict" : e == SBX_E_IO ? "internal_error" :
		    e == SBX_E_FLEET ? "unavailable" : "bad_request", why);
		return;
	}
	json_object_put(body);
	admin_json(r, 201, sandbox_full(cfg, s));
	sbx_unref(s);
}

static void
route_sandbox_show(const struct admin_req *q, struct admin_resp *r,
    struct sbx *s)
{
	const struct cfg	*cfg = admin_hooks.ah_cfg();
	json_object		*o = sandbox_full(cfg, s);

	json_object_object_add(o, "env", sandbox_env(cfg, s));
	sandbox_launched(cfg, s, o);
	admin_json(r, 200, o);
}

/* POST …/pause, …/resume: a VM of the qemu backend. */
static void
route_sandbox_vm(const struct admin_req *q, struct admin_resp *r,
    struct sbx *s, int pause)
{
	char	why[200];

	if (!(s->sb_flags & SBX_F_VM)) {
		admin_error(r, 409, "conflict", "only a VM (launcher backend "
		    "qemu) can be paused or resumed");
		return;
	}
	if ((pause ? pool_pause(s, 0, why, sizeof(why)) :
	    pool_resume(s, why, sizeof(why))) == -1) {
		admin_error(r, 500, "internal_error", why);
		return;
	}
	admin_json(r, 200, sandbox_summary(s));
}

/* POST …/probe: the escape canary (sched/canary.c). */
static void
route_sandbox_probe(const struct admin_req *q, struct admin_resp *r,
    struct sbx *s)
{
	json_object	*o;
	char		 why[200];

	if (canary_probe(s, &o, why, sizeof(why)) == -1) {
		admin_error(r, errno == ENOTSUP ? 409 : 500, errno == ENOTSUP ?
		    "conflict" : "internal_error", why);
		return;
	}
	admin_json(r, 200, o);
}

static void
route_sandbox_delete(const struct admin_req *q, struct admin_resp *r,
    struct sbx *s)
{
	enum sbx_err	e;

	if ((e = sbx_delete(s->sb_id)) != SBX_OK) {
		admin_error(r, e == SBX_E_STATIC ? 409 : e == SBX_E_NOTFOUND ?
		    404 : 500, e == SBX_E_STATIC ? "conflict" :
		    e == SBX_E_NOTFOUND ? "not_found" : "internal_error",
		    sbx_strerror(e));
		return;
	}
	/* its token is refused from now on; close what it has open */
	workers_revoke();
	r->ar_status = 204;
}

/*
 * USD as a JSON number written exactly from integer micro-dollars
 * ("0.041490"): a double alone would print as 0.041489999999999999.
 */
static json_object *
money_json(uint64_t micro)
{
	char	text[32];

	snprintf(text, sizeof(text), "%" PRIu64 ".%06" PRIu64,
	    micro / 1000000, micro % 1000000);
	return json_object_new_double_s((double)micro / 1e6, text);
}

static json_object *
caps_json(const struct cfg_caps *caps)
{
	json_object	*o;
	char		 buf[64];

	if (caps == NULL || !(caps->cp_has_usd || caps->cp_has_requests ||
	    caps->cp_has_bytes_in || caps->cp_has_bytes_out ||
	    caps->cp_has_rate))
		return NULL;
	o = json_object_new_object();
	if (caps->cp_has_usd) {
		json_object_object_add(o, "usd_microusd",
		    json_object_new_int64((int64_t)caps->cp_usd));
		json_object_object_add(o, "usd", money_json(caps->cp_usd));
	}
	if (caps->cp_has_requests)
		json_object_object_add(o, "requests",
		    json_object_new_int64((int64_t)caps->cp_requests));
	if (caps->cp_has_bytes_in)
		json_object_object_add(o, "bytes_in",
		    json_object_new_int64((int64_t)caps->cp_bytes_in));
	if (caps->cp_has_bytes_out)
		json_object_object_add(o, "bytes_out",
		    json_object_new_int64((int64_t)caps->cp_bytes_out));
	if (caps->cp_has_rate) {
		char	per[32];

		cfg_fmt_duration(caps->cp_rate_ms, per, sizeof(per));
		snprintf(buf, sizeof(buf), "%" PRIu32 "/%s", caps->cp_rate_n,
		    per);
		json_object_object_add(o, "rate", json_object_new_string(buf));
	}
	if (caps->cp_window_ms > 0) {
		cfg_fmt_duration(caps->cp_window_ms, buf, sizeof(buf));
		json_object_object_add(o, "window", json_object_new_string(buf));
	}
	return o;
}

static void
route_usage(const struct admin_req *q, struct admin_resp *r, struct sbx *s,
    int reset)
{
	const struct cfg	*cfg = admin_hooks.ah_cfg();
	const struct cfg_policy	*pol = cfg_policy_find(cfg, s->sb_policy);
	const struct cfg_caps	*caps = pol != NULL ? &pol->p_caps : NULL;
	struct bud_counters	 bc;
	json_object		*o = json_object_new_object();
	char			 ts[32];

	if (reset) {
		bud_reset(s->sb_id);
		sbx_fleet_reset(s->sb_id);	/* fleet mode: Redis too */
	}
	if (bud_get(s->sb_id, caps, &bc) == -1)
		memset(&bc, 0, sizeof(bc));	/* no traffic yet */
	json_object_object_add(o, "sandbox", json_object_new_string(s->sb_id));
	if (bc.bc_window_start > 0) {
		fmt_time((int64_t)bc.bc_window_start, ts, sizeof(ts));
		json_object_object_add(o, "window_start",
		    json_object_new_string(ts));
	} else
		json_object_object_add(o, "window_start", NULL);
	json_object_object_add(o, "requests",
	    json_object_new_int64((int64_t)bc.bc_requests));
	json_object_object_add(o, "bytes_in",
	    json_object_new_int64((int64_t)bc.bc_bytes_in));
	json_object_object_add(o, "bytes_out",
	    json_object_new_int64((int64_t)bc.bc_bytes_out));
	json_object_object_add(o, "spend_microusd",
	    json_object_new_int64((int64_t)bc.bc_spend));
	json_object_object_add(o, "reserved_microusd",
	    json_object_new_int64((int64_t)bc.bc_reserved));
	json_object_object_add(o, "spend_usd", money_json(bc.bc_spend));
	json_object_object_add(o, "caps", caps_json(caps));
	if (!reset && admin_usage_by(q, r, s->sb_id, o) == -1) {
		json_object_put(o);
		return;
	}
	admin_json(r, 200, o);
}

static void
route_reload(const struct admin_req *q, struct admin_resp *r)
{
	json_object	*o, *a;
	char		*errs = NULL, *line, *save = NULL;
	int		 n = 0;

	if (admin_hooks.ah_reload(&errs) == 0) {
		free(errs);
		o = json_object_new_object();
		json_object_object_add(o, "status", json_object_new_string(
		    "ok"));
		admin_json(r, 200, o);
		return;
	}
	o = json_object_new_object();
	a = json_object_new_array();
	for (line = strtok_r(errs, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save), n++)
		json_object_array_add(a, json_object_new_string(line));
	json_object_object_add(o, "error", json_object_new_string("bad_config"));
	json_object_object_add(o, "reason", json_object_new_string(
	    "the new configuration was refused; the running one stays"));
	json_object_object_add(o, "request_id",
	    json_object_new_string(r->ar_id));
	json_object_object_add(o, "errors", a);
	free(errs);
	admin_json(r, 400, o);
}

/* The policy of a claim or prewarm body: named, else the default one. */
static const char *
body_policy(json_object *body, struct admin_resp *r)
{
	const struct cfg *cfg = admin_hooks.ah_cfg();
	const char	*policy;

	if (admin_body_string(body, "policy", &policy, r) == -1)
		return NULL;
	if (policy != NULL)
		return policy;
	if (cfg_policy_find(cfg, "default") != NULL)
		return "default";
	if (cfg->c_npolicies == 1)
		return cfg->c_policies[0].p_name;
	admin_error(r, 400, "bad_request", "\"policy\" is required (the "
	    "config has no policy named \"default\")");
	return NULL;
}

/* The answer to a claim: the sandbox and how to reach it, or why not. */
static void
claim_answer(struct admin_resp *r, enum sbx_err e, struct sbx *s, int warm,
    const char *policy)
{
	const struct cfg	*cfg = admin_hooks.ah_cfg();
	json_object		*o;
	char			 why[160];

	if (e != SBX_OK) {
		if (e == SBX_E_POLICY)
			snprintf(why, sizeof(why), "no policy \"%.64s\" in "
			    "the running config", policy);
		else
			snprintf(why, sizeof(why), "%s", sbx_strerror(e));
		admin_error(r, e == SBX_E_POLICY ? 400 : 500, e == SBX_E_POLICY ?
		    "bad_request" : "internal_error", why);
		return;
	}
	o = sandbox_full(cfg, s);
	json_object_object_add(o, "warm", json_object_new_boolean(warm));
	json_object_object_add(o, "env", sandbox_env(cfg, s));
	sandbox_launched(cfg, s, o);
	admin_json(r, 200, o);
}

struct claim_later {
	struct admin_defer	*cl_defer;
	char			*cl_policy;
	enum sbx_err		 cl_err;
	struct sbx		*cl_sbx;
	int			 cl_warm;
};

static void
claim_fill(struct admin_resp *r, void *arg)
{
	struct claim_later	*cl = arg;

	claim_answer(r, cl->cl_err, cl->cl_sbx, cl->cl_warm, cl->cl_policy);
	sbx_unref(cl->cl_sbx);
	free(cl->cl_policy);
	free(cl);
}

static void
claim_done(enum sbx_err e, struct sbx *s, int warm, void *arg)
{
	struct claim_later	*cl = arg;

	cl->cl_err = e;
	cl->cl_sbx = e == SBX_OK ? s : NULL;
	cl->cl_warm = warm;
	admin_defer_answer(cl->cl_defer, claim_fill, cl);
}

static void
route_claim(const struct admin_req *q, struct admin_resp *r)
{
	static const char *const fields[] = { "policy", "from", NULL };
	struct claim_later	*cl;
	json_object		*body;
	const char		*policy, *from;
	struct sbx		*s = NULL;
	enum sbx_err		 e;
	int			 warm = 0;

	if ((body = admin_body_object(q, r, fields)) == NULL)
		return;
	if ((policy = body_policy(body, r)) == NULL ||
	    admin_body_string(body, "from", &from, r) == -1) {
		json_object_put(body);
		return;
	}
	if (from != NULL) {
		/* from a snapshot (issue 22): netns, answered here */
		if (adm_snap_from_ok(r, from) == 0) {
			e = pool_claim_from(policy, from, &s, &warm);
			claim_answer(r, e, s, warm, policy);
			sbx_unref(s);
		}
		json_object_put(body);
		return;
	}
	if (pool_claim_is_slow()) {
		/* a cold VM boots for seconds: answer from the main loop
		   once it is ready, serving everyone else meanwhile */
		cl = xcalloc(1, sizeof(*cl));
		cl->cl_policy = xstrdup(policy);
		if (pool_claim_async(policy, claim_done, cl, &e) == 0)
			cl->cl_defer = admin_defer(r);
		else {
			claim_answer(r, e, NULL, 0, policy);
			free(cl->cl_policy);
			free(cl);
		}
		json_object_put(body);
		return;
	}
	e = pool_claim(policy, &s, &warm);
	claim_answer(r, e, s, warm, policy);
	sbx_unref(s);
	json_object_put(body);
}

static void
route_prewarm(const struct admin_req *q, struct admin_resp *r)
{
	static const char *const fields[] = { "policy", "count", "from",
	    NULL };
	json_object	*body, *v, *o;
	const char	*policy, *from;
	int64_t		 count = 1;
	long		 n;
	char		 why[200];

	if ((body = admin_body_object(q, r, fields)) == NULL)
		return;
	if ((policy = body_policy(body, r)) == NULL ||
	    admin_body_string(body, "from", &from, r) == -1) {
		json_object_put(body);
		return;
	}
	if (json_object_object_get_ex(body, "count", &v)) {
		if (!json_object_is_type(v, json_type_int) ||
		    (count = json_object_get_int64(v)) < 1 || count > 100000) {
			json_object_put(body);
			admin_error(r, 400, "bad_request", "\"count\" must be "
			    "a whole number from 1 to 100000");
			return;
		}
	}
	/* a pool from a snapshot (issue 22, point 3): it must exist */
	if (from != NULL && adm_snap_from_ok(r, from) == -1) {
		json_object_put(body);
		return;
	}
	if ((n = pool_prewarm(policy, from, (size_t)count, why,
	    sizeof(why))) < 0) {
		json_object_put(body);
		if (from != NULL && errno == ENOENT)
			admin_error(r, 404, "not_found", why);
		else if (from != NULL && errno == ENOSPC)
			admin_error(r, 507, "insufficient_storage", why);
		else
			admin_error(r, 400, "bad_request", why);
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "policy", json_object_new_string(policy));
	if (from != NULL)
		json_object_object_add(o, "from", json_object_new_string(from));
	json_object_object_add(o, "requested", json_object_new_int64(count));
	json_object_object_add(o, "scheduled", json_object_new_int64(n));
	json_object_put(body);
	admin_json(r, 202, o);
}

static void
route_pool(const struct admin_req *q, struct admin_resp *r)
{
	const struct cfg *cfg = admin_hooks.ah_cfg();
	struct pool_stat *st;
	json_object	*o = json_object_new_object(), *a, *p;
	size_t		 i, n;

	n = pool_stats(&st);
	a = json_object_new_array();
	for (i = 0; i < n; i++) {
		p = json_object_new_object();
		json_object_object_add(p, "policy",
		    json_object_new_string(st[i].ps_policy));
		json_object_object_add(p, "warm",
		    json_object_new_int64((int64_t)st[i].ps_warm));
		json_object_object_add(p, "launched",
		    json_object_new_int64((int64_t)st[i].ps_launched));
		json_object_object_add(p, "target",
		    json_object_new_int64((int64_t)st[i].ps_target));
		json_object_object_add(p, "claim_rate",
		    json_object_new_double(st[i].ps_rate));
		json_object_object_add(p, "refill_ms",
		    json_object_new_double(st[i].ps_refill_ms));
		json_object_object_add(p, "claims",
		    json_object_new_int64((int64_t)st[i].ps_claims));
		json_object_object_add(p, "claims_cold",
		    json_object_new_int64((int64_t)st[i].ps_claims_cold));
		json_object_object_add(p, "evicted",
		    json_object_new_int64((int64_t)st[i].ps_evicted));
		json_object_array_add(a, p);
	}
	pool_stats_free(st, n);
	json_object_object_add(o, "backend", json_object_new_string(
	    backend_name(cfg->c_launcher_backend)));
	json_object_object_add(o, "warm_floor", json_object_new_int64(
	    (int64_t)(cfg->c_launcher_set ? cfg->c_pool_warm : 0)));
	json_object_object_add(o, "max",
	    json_object_new_int64((int64_t)cfg->c_pool_max));
	json_object_object_add(o, "idle_timeout_ms",
	    json_object_new_int64((int64_t)cfg->c_pool_idle_ms));
	json_object_object_add(o, "policies", a);
	admin_json(r, 200, o);
}

/* Split the path (query dropped) into at most ADMIN_MAX_SEGS segments. */
static int
split_path(const char *url, char *buf, size_t bufsz, char **segs)
{
	char	*p, *save = NULL, *q;
	int	 n = 0;

	if (snprintf(buf, bufsz, "%s", url) >= (int)bufsz || buf[0] != '/')
		return -1;
	if ((q = strchr(buf, '?')) != NULL)
		*q = '\0';
	for (p = strtok_r(buf, "/", &save); p != NULL;
	    p = strtok_r(NULL, "/", &save)) {
		if (n == ADMIN_MAX_SEGS)
			return -1;
		segs[n++] = p;
	}
	return n;
}

static void
method_not_allowed(struct admin_resp *r, const char *allow)
{
	char	why[96];

	snprintf(why, sizeof(why), "method not allowed here (use %s)", allow);
	admin_error(r, 405, "method_not_allowed", why);
}

void
admin_route(const struct admin_req *q, struct admin_resp *r)
{
	char		 buf[2048], *seg[ADMIN_MAX_SEGS], why[160];
	struct sbx	*s;
	int		 n, m = q->aq_method;

	if ((n = split_path(q->aq_url, buf, sizeof(buf), seg)) < 0) {
		admin_error(r, 404, "not_found", "no such route");
		return;
	}
#define IS(i, s)	(n > (i) && strcmp(seg[i], (s)) == 0)
	if (n == 1 && IS(0, "healthz")) {
		if (m != HTTP_GET)
			return method_not_allowed(r, "GET");
		return route_healthz(q, r);
	}
	if (n == 1 && IS(0, "metrics")) {
		if (m != HTTP_GET)
			return method_not_allowed(r, "GET");
		return route_metrics(q, r);
	}
	if (!IS(0, "v1") || n < 2) {
		admin_error(r, 404, "not_found", "no such route");
		return;
	}
	if (n == 2 && IS(1, "status")) {
		if (m != HTTP_GET)
			return method_not_allowed(r, "GET");
		return route_status(q, r);
	}
	if (n == 2 && IS(1, "reload")) {
		if (m != HTTP_POST)
			return method_not_allowed(r, "POST");
		return route_reload(q, r);
	}
	if (n == 3 && IS(1, "pool") && IS(2, "prewarm")) {
		if (m != HTTP_POST)
			return method_not_allowed(r, "POST");
		return route_prewarm(q, r);
	}
	if (IS(1, "snapshots"))
		return adm_snap_route(q, r, seg + 2, n - 2);
	if (IS(1, "pending") || IS(1, "rules"))
		return adm_ask_route(q, r, seg + 1, n - 1);
	if (n == 2 && IS(1, "pool")) {
		if (m != HTTP_GET)
			return method_not_allowed(r, "GET");
		return route_pool(q, r);
	}
	if (!IS(1, "sandboxes")) {
		admin_error(r, 404, "not_found", "no such route");
		return;
	}
	if (n == 2) {
		if (m == HTTP_GET)
			return route_sandbox_list(q, r);
		if (m == HTTP_POST)
			return route_sandbox_create(q, r);
		return method_not_allowed(r, "GET or POST");
	}
	if (n == 3 && IS(2, "claim")) {
		if (m != HTTP_POST)
			return method_not_allowed(r, "POST");
		return route_claim(q, r);
	}
	if ((s = sbx_find(seg[2])) == NULL) {
		snprintf(why, sizeof(why), "no sandbox \"%.64s\"", seg[2]);
		admin_error(r, 404, "not_found", why);
		return;
	}
	if (n == 3 && m == HTTP_GET)
		route_sandbox_show(q, r, s);
	else if (n == 3 && m == HTTP_DELETE)
		route_sandbox_delete(q, r, s);
	else if (n == 3)
		method_not_allowed(r, "GET or DELETE");
	else if (n == 4 && IS(3, "usage") && m == HTTP_GET)
		route_usage(q, r, s, 0);
	else if (n == 5 && IS(3, "usage") && IS(4, "reset") && m == HTTP_POST)
		route_usage(q, r, s, 1);
	else if ((n == 4 && IS(3, "usage")) || (n == 5 && IS(3, "usage") &&
	    IS(4, "reset")))
		method_not_allowed(r, n == 4 ? "GET" : "POST");
	else if (n == 4 && (IS(3, "pause") || IS(3, "resume")) &&
	    m == HTTP_POST)
		route_sandbox_vm(q, r, s, IS(3, "pause"));
	else if (n == 4 && (IS(3, "pause") || IS(3, "resume")))
		method_not_allowed(r, "POST");
	else if (n == 4 && IS(3, "probe") && m == HTTP_POST)
		route_sandbox_probe(q, r, s);
	else if (n == 4 && IS(3, "rollback") && m == HTTP_POST)
		adm_snap_rollback(q, r, s);
	else if (n == 4 && IS(3, "rollback"))
		method_not_allowed(r, "POST");
	else if (n == 4 && IS(3, "probe"))
		method_not_allowed(r, "POST");
	else
		admin_error(r, 404, "not_found", "no such route");
	sbx_unref(s);
#undef IS
}
