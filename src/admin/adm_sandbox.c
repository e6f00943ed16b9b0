/*
 * Admin API: /v1/sandboxes (list, create, show, pause/resume, probe,
 * delete) and what a sandbox is told about itself (proxy URL, env), also
 * the answer to a claim (adm_pool.c).
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

/* The sandbox gateway: the first host address of launcher.network. */
static void
net_gateway_text(const struct cfg *cfg, char *buf, size_t bufsz)
{
	struct net_addr	gw = cfg->c_launcher_network.nc_addr;

	gw.na_bytes[3] |= 1;
	net_addr_format(&gw, buf, bufsz);
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

	admin_fmt_time(s->sb_created, ts, sizeof(ts));
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

const char *
adm_backend_name(int backend)
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

void
adm_sandbox_list(const struct admin_req *q, struct admin_resp *r)
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

struct create_wait {
	struct sbx	*cw_sbx;
	uint64_t	 cw_seq;
};

/*
 * Redis has the new sandbox: its answer. Not in time: it goes here too
 * (and from Redis, unless its announcement is dropped before ever being
 * sent), so that a 503 leaves nothing half-created behind. The gateway
 * stopping meanwhile (acked -1): it stays, announced at the next start.
 */
static void
create_fill(struct admin_resp *r, void *arg, int acked)
{
	struct create_wait	*cw = arg;
	struct sbx		*s = cw->cw_sbx;

	if (acked > 0)
		admin_json(r, 201, sandbox_full(admin_hooks.ah_cfg(), s));
	else {
		if (acked == 0 && sbx_fleet_cancel(cw->cw_seq))
			(void)sbx_delete_quiet(s->sb_id);
		else if (acked == 0)
			(void)sbx_delete(s->sb_id);
		adm_fleet_unconfirmed(r, "the sandbox was not created");
	}
	sbx_unref(s);
	free(cw);
}

void
adm_sandbox_create(const struct admin_req *q, struct admin_resp *r)
{
	static const char *const fields[] = { "policy", "id", "from", NULL };
	const struct cfg *cfg = admin_hooks.ah_cfg();
	json_object	*body;
	const char	*policy, *id, *from;
	struct sbx	*s;
	struct create_wait *cw;
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
			adm_claim_answer(r, e, s, warm, policy);
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
		    e == SBX_E_FLEET ? "budget_unavailable" : "bad_request",
		    why);
		return;
	}
	json_object_put(body);
	/* fleet mode: answered once Redis has it (create-after-write) */
	cw = xcalloc(1, sizeof(*cw));
	cw->cw_sbx = s;
	cw->cw_seq = sbx_fleet_last_seq();
	adm_fleet_answer(r, cw->cw_seq, create_fill, cw);
}

void
adm_sandbox_show(const struct admin_req *q, struct admin_resp *r,
    struct sbx *s)
{
	const struct cfg	*cfg = admin_hooks.ah_cfg();
	json_object		*o = sandbox_full(cfg, s);

	json_object_object_add(o, "env", sandbox_env(cfg, s));
	sandbox_launched(cfg, s, o);
	admin_json(r, 200, o);
}

/* POST …/pause, …/resume: a VM of the qemu backend. */
void
adm_sandbox_vm(const struct admin_req *q, struct admin_resp *r,
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
void
adm_sandbox_probe(const struct admin_req *q, struct admin_resp *r,
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

/* Deleted here at once; answered 204 once Redis has it too. */
static void
delete_fill(struct admin_resp *r, void *arg, int acked)
{
	(void)arg;
	if (acked > 0)
		r->ar_status = 204;
	else
		adm_fleet_unconfirmed(r, "deleted on this gateway, not yet in "
		    "the fleet (sent when Redis answers)");
}

void
adm_sandbox_delete(const struct admin_req *q, struct admin_resp *r,
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
	adm_fleet_answer(r, sbx_fleet_last_seq(), delete_fill, NULL);
}


/* The answer to a claim: the sandbox and how to reach it, or why not. */
void
adm_claim_answer(struct admin_resp *r, enum sbx_err e, struct sbx *s, int warm,
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

