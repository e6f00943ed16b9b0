/*
 * Admin API routes (SPEC "Admin API"): the shared helpers, status,
 * metrics, reload and the dispatch; sandboxes are in adm_sandbox.c, the
 * warm pool and claims in adm_pool.c, usage in admin_usage.c. Bodies are JSON objects read with json-c; unknown fields are
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
admin_jint(json_object *o, const char *key, int64_t v)
{
	json_object_object_add(o, key, json_object_new_int64(v));
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

void
admin_fmt_time(int64_t t, char *buf, size_t bufsz)
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
	admin_jint(o, "uptime_s", time(NULL) - admin_started);
	admin_jint(o, "connections", worker_conn_count());
	admin_jint(o, "sandboxes", n);
	admin_jint(o, "requests", met_requests_total());
	a = json_object_new_object();
	json_object_object_add(a, "available",
	    json_object_new_boolean(aud_available()));
	admin_jint(a, "write_errors", aud_write_errors());
	json_object_object_add(o, "audit", a);
	rl = json_object_new_object();
	admin_jint(rl, "ok", admin_reloads_ok);
	admin_jint(rl, "failed", admin_reloads_failed);
	json_object_object_add(o, "reloads", rl);
	json_object_object_add(o, "config", json_object_new_string(
	    cfg->c_file));
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
		return adm_prewarm(q, r);
	}
	if (IS(1, "snapshots"))
		return adm_snap_route(q, r, seg + 2, n - 2);
	if (IS(1, "pending") || IS(1, "rules"))
		return adm_ask_route(q, r, seg + 1, n - 1);
	if (n == 2 && IS(1, "pool")) {
		if (m != HTTP_GET)
			return method_not_allowed(r, "GET");
		return adm_pool(q, r);
	}
	if (!IS(1, "sandboxes")) {
		admin_error(r, 404, "not_found", "no such route");
		return;
	}
	if (n == 2) {
		if (m == HTTP_GET)
			return adm_sandbox_list(q, r);
		if (m == HTTP_POST)
			return adm_sandbox_create(q, r);
		return method_not_allowed(r, "GET or POST");
	}
	if (n == 3 && IS(2, "claim")) {
		if (m != HTTP_POST)
			return method_not_allowed(r, "POST");
		return adm_claim(q, r);
	}
	if ((s = sbx_find(seg[2])) == NULL) {
		snprintf(why, sizeof(why), "no sandbox \"%.64s\"", seg[2]);
		admin_error(r, 404, "not_found", why);
		return;
	}
	if (n == 3 && m == HTTP_GET)
		adm_sandbox_show(q, r, s);
	else if (n == 3 && m == HTTP_DELETE)
		adm_sandbox_delete(q, r, s);
	else if (n == 3)
		method_not_allowed(r, "GET or DELETE");
	else if (n == 4 && IS(3, "usage") && m == HTTP_GET)
		adm_usage(q, r, s, 0);
	else if (n == 5 && IS(3, "usage") && IS(4, "reset") && m == HTTP_POST)
		adm_usage(q, r, s, 1);
	else if ((n == 4 && IS(3, "usage")) || (n == 5 && IS(3, "usage") &&
	    IS(4, "reset")))
		method_not_allowed(r, n == 4 ? "GET" : "POST");
	else if (n == 4 && (IS(3, "pause") || IS(3, "resume")) &&
	    m == HTTP_POST)
		adm_sandbox_vm(q, r, s, IS(3, "pause"));
	else if (n == 4 && (IS(3, "pause") || IS(3, "resume")))
		method_not_allowed(r, "POST");
	else if (n == 4 && IS(3, "probe") && m == HTTP_POST)
		adm_sandbox_probe(q, r, s);
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
