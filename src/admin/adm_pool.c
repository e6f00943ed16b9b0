/*
 * Admin API: the warm pool (POST /v1/claim, POST /v1/pool/prewarm,
 * GET /v1/pool).
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
#include "sched/canary.h"
#include "sched/pool.h"
#include "util/log.h"
#include "util/util.h"

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

/* The body of a claim or prewarm (keys <fields>) with its policy and
 * "from" (borrowed from it); NULL after answering. */
static json_object *
claim_body(const struct admin_req *q, struct admin_resp *r,
    const char *const *fields, const char **policy, const char **from)
{
	json_object	*body;

	if ((body = admin_body_object(q, r, fields)) == NULL)
		return NULL;
	if ((*policy = body_policy(body, r)) == NULL ||
	    admin_body_string(body, "from", from, r) == -1) {
		json_object_put(body);
		return NULL;
	}
	return body;
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

	adm_claim_answer(r, cl->cl_err, cl->cl_sbx, cl->cl_warm, cl->cl_policy);
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

void
adm_claim(const struct admin_req *q, struct admin_resp *r)
{
	static const char *const fields[] = { "policy", "from", NULL };
	struct claim_later	*cl;
	json_object		*body;
	const char		*policy, *from;
	struct sbx		*s = NULL;
	enum sbx_err		 e;
	int			 warm = 0;

	if ((body = claim_body(q, r, fields, &policy, &from)) == NULL)
		return;
	if (from != NULL) {
		/* from a snapshot (issue 22): netns, answered here */
		if (adm_snap_from_ok(r, from) == 0) {
			e = pool_claim_from(policy, from, &s, &warm);
			adm_claim_answer(r, e, s, warm, policy);
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
			adm_claim_answer(r, e, NULL, 0, policy);
			free(cl->cl_policy);
			free(cl);
		}
		json_object_put(body);
		return;
	}
	e = pool_claim(policy, &s, &warm);
	adm_claim_answer(r, e, s, warm, policy);
	sbx_unref(s);
	json_object_put(body);
}

void
adm_prewarm(const struct admin_req *q, struct admin_resp *r)
{
	static const char *const fields[] = { "policy", "count", "from",
	    NULL };
	json_object	*body, *v, *o;
	const char	*policy, *from;
	int64_t		 count = 1;
	long		 n;
	char		 why[200];

	if ((body = claim_body(q, r, fields, &policy, &from)) == NULL)
		return;
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
	admin_jint(o, "requested", count);
	admin_jint(o, "scheduled", n);
	json_object_put(body);
	admin_json(r, 202, o);
}

void
adm_pool(const struct admin_req *q, struct admin_resp *r)
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
		admin_jint(p, "warm", st[i].ps_warm);
		admin_jint(p, "launched", st[i].ps_launched);
		admin_jint(p, "target", st[i].ps_target);
		json_object_object_add(p, "claim_rate",
		    json_object_new_double(st[i].ps_rate));
		json_object_object_add(p, "refill_ms",
		    json_object_new_double(st[i].ps_refill_ms));
		admin_jint(p, "claims", st[i].ps_claims);
		admin_jint(p, "claims_cold", st[i].ps_claims_cold);
		admin_jint(p, "evicted", st[i].ps_evicted);
		json_object_array_add(a, p);
	}
	pool_stats_free(st, n);
	json_object_object_add(o, "backend", json_object_new_string(
	    adm_backend_name(cfg->c_launcher_backend)));
	admin_jint(o, "warm_floor", cfg->c_launcher_set ? cfg->c_pool_warm : 0);
	admin_jint(o, "max", cfg->c_pool_max);
	admin_jint(o, "idle_timeout_ms", cfg->c_pool_idle_ms);
	json_object_object_add(o, "policies", a);
	admin_json(r, 200, o);
}

