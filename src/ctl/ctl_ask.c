/*
 * airlockctl pending | approve | deny | rules (issue 21.1): the admin
 * API's /v1/pending and /v1/rules. Text: one line per hold, "ID SANDBOX
 * METHOD HOST:PORT PATH EXPIRES_IN_S"; per rule, "RULE SCOPE SUBJECT
 * HOST:PORT EXPIRES" (EXPIRES "-" for none, else unix seconds); --json:
 * the gateway's body.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ctl/ctl.h"

static const char *
aget(struct json_object *o, const char *key)
{
	struct json_object	*v;

	if (o == NULL || !json_object_object_get_ex(o, key, &v) ||
	    json_object_is_type(v, json_type_null))
		return NULL;
	return json_object_get_string(v);
}

#define AGET(o, k)	(aget(o, k) != NULL ? aget(o, k) : "-")

/* <method> <path>: CTL_OK with a 2xx JSON object in <r>, else reported. */
static int
ask_call(struct ctl *c, const char *method, const char *path,
    struct json_object *body, struct ctl_resp *r)
{
	int	rc;

	if ((rc = ctl_request(c, method, path, body, CTL_TIMEOUT_MS, r)) !=
	    CTL_OK)
		return rc;
	if (r->r_status >= 200 && r->r_status < 300 && r->r_json != NULL &&
	    json_object_is_type(r->r_json, json_type_object))
		return CTL_OK;
	ctl_err("the gateway answered HTTP %d%s%s", r->r_status,
	    aget(r->r_json, "reason") != NULL ? ": " : "",
	    aget(r->r_json, "reason") != NULL ? aget(r->r_json, "reason") : "");
	ctl_resp_fini(r);
	return CTL_FAIL;
}

/* The answer's list <key>, one line each through <line>. */
static int
ask_list(struct ctl *c, const char *path, const char *key,
    void (*line)(struct json_object *))
{
	struct ctl_resp		 r;
	struct json_object	*a;
	size_t			 i;
	int			 rc;

	if ((rc = ask_call(c, "GET", path, NULL, &r)) != CTL_OK)
		return rc;
	if (c->c_json)
		printf("%s\n", json_object_to_json_string_ext(r.r_json,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	else if (json_object_object_get_ex(r.r_json, key, &a) &&
	    json_object_is_type(a, json_type_array))
		for (i = 0; i < json_object_array_length(a); i++)
			line(json_object_array_get_idx(a, i));
	ctl_resp_fini(&r);
	return CTL_OK;
}

static void
pending_line(struct json_object *o)
{
	struct json_object	*v;
	int64_t			 ms = 0;

	if (json_object_object_get_ex(o, "expires_in_ms", &v))
		ms = json_object_get_int64(v);
	printf("%s %s %s %s:%s %s %" PRId64 "\n", AGET(o, "id"),
	    AGET(o, "sandbox"), AGET(o, "method"), AGET(o, "host"),
	    AGET(o, "port"), AGET(o, "path"), (ms + 999) / 1000);
}

int
ctl_cmd_pending(struct ctl *c, struct ctl_args *a)
{
	(void)a;
	return ask_list(c, "/v1/pending", "pending", pending_line);
}

static int
ask_decide(struct ctl *c, const char *id, const char *verb,
    struct json_object *body)
{
	struct ctl_resp	 r;
	char		*esc, *path;
	int		 rc;

	esc = ctl_path_escape(id);
	if ((path = malloc(strlen(esc) + 32)) == NULL) {
		free(esc);
		json_object_put(body);
		ctl_err("out of memory");
		return CTL_FAIL;
	}
	sprintf(path, "/v1/pending/%s/%s", esc, verb);
	free(esc);
	rc = ask_call(c, "POST", path, body, &r);
	free(path);
	json_object_put(body);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json)
		printf("%s\n", json_object_to_json_string_ext(r.r_json,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	else if (aget(r.r_json, "rule") != NULL)
		printf("%s %s: rule %s\n", verb, id, aget(r.r_json, "rule"));
	else
		printf("%s %s\n", verb, id);
	ctl_resp_fini(&r);
	return CTL_OK;
}

int
ctl_cmd_approve(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*body = json_object_new_object();

	if (a->a_scope != NULL)
		json_object_object_add(body, "scope",
		    json_object_new_string(a->a_scope));
	if (a->a_ttl != NULL)
		json_object_object_add(body, "ttl",
		    json_object_new_string(a->a_ttl));
	if (a->a_match != NULL)
		json_object_object_add(body, "match",
		    json_object_new_string(a->a_match));
	return ask_decide(c, a->a_pos[0], "approve", body);
}

int
ctl_cmd_deny(struct ctl *c, struct ctl_args *a)
{
	return ask_decide(c, a->a_pos[0], "deny", NULL);
}

static void
rule_line(struct json_object *o)
{
	struct json_object	*v;
	const char		*scope = AGET(o, "scope");
	char			 exp[24] = "-";

	if (json_object_object_get_ex(o, "expires_ms", &v) &&
	    !json_object_is_type(v, json_type_null))
		snprintf(exp, sizeof(exp), "%" PRId64,
		    json_object_get_int64(v) / 1000);
	printf("%s %s %s %s:%s %s", AGET(o, "id"), scope,
	    strcmp(scope, "sandbox") == 0 ? AGET(o, "sandbox") :
	    AGET(o, "policy"), AGET(o, "host"), AGET(o, "port"), exp);
	if (strcmp(AGET(o, "match"), "request") == 0)
		printf(" %s %s", AGET(o, "method"), AGET(o, "path"));
	printf("\n");
}

int
ctl_cmd_rules(struct ctl *c, struct ctl_args *a)
{
	(void)a;
	return ask_list(c, "/v1/rules", "rules", rule_line);
}

int
ctl_cmd_rules_revoke(struct ctl *c, struct ctl_args *a)
{
	struct ctl_resp	 r;
	char		*esc, *path;
	int		 rc;

	esc = ctl_path_escape(a->a_pos[0]);
	if ((path = malloc(strlen(esc) + 16)) == NULL) {
		free(esc);
		ctl_err("out of memory");
		return CTL_FAIL;
	}
	sprintf(path, "/v1/rules/%s", esc);
	free(esc);
	rc = ask_call(c, "DELETE", path, NULL, &r);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json)
		printf("%s\n", json_object_to_json_string_ext(r.r_json,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		printf("revoked %s\n", a->a_pos[0]);
	ctl_resp_fini(&r);
	return CTL_OK;
}
