/*
 * airlockctl snapshot create | list | show | delete | rollback (issue 22): the admin
 * API's /v1/snapshots. Text: one line per snapshot, "NAME LAYER PARENT
 * BYTES SANDBOX" (LAYER shortened to 16 hex digits, PARENT "-" when on the
 * base); --json: the gateway's body.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ctl/ctl.h"

#define SNAP_TIMEOUT_MS	120000	/* a large upper layer takes a while */

static const char *
jget(struct json_object *o, const char *key)
{
	struct json_object	*v;

	if (o == NULL || !json_object_object_get_ex(o, key, &v) ||
	    json_object_is_type(v, json_type_null))
		return NULL;
	return json_object_get_string(v);
}

/* <method> <path>: CTL_OK with a 2xx JSON object in <r>, else reported. */
static int
snap_call(struct ctl *c, const char *method, const char *path,
    struct json_object *body, struct ctl_resp *r)
{
	struct json_object	*e;
	int			 rc;

	if ((rc = ctl_request(c, method, path, body, SNAP_TIMEOUT_MS, r)) !=
	    CTL_OK)
		return rc;
	if (r->r_status >= 200 && r->r_status < 300 && r->r_json != NULL &&
	    json_object_is_type(r->r_json, json_type_object))
		return CTL_OK;
	e = r->r_json;
	ctl_err("the gateway answered HTTP %d%s%s", r->r_status,
	    jget(e, "reason") != NULL ? ": " : "",
	    jget(e, "reason") != NULL ? jget(e, "reason") : "");
	ctl_resp_fini(r);
	return CTL_FAIL;
}

static void
snap_print(struct json_object *o)
{
	const char	*parent = jget(o, "parent"), *layer = jget(o, "layer");

	printf("%s %.16s %s %s %s\n", jget(o, "name") ? jget(o, "name") : "?",
	    layer ? layer : "?", parent ? parent : "-",
	    jget(o, "bytes") ? jget(o, "bytes") : "0",
	    jget(o, "sandbox") ? jget(o, "sandbox") : "?");
}

static int
snap_show_answer(struct ctl *c, struct ctl_resp *r)
{
	if (c->c_json)
		printf("%s\n", json_object_to_json_string_ext(r->r_json,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		snap_print(r->r_json);
	ctl_resp_fini(r);
	return CTL_OK;
}

static char *
snap_path(const char *name)
{
	char	*esc, *path;

	esc = ctl_path_escape(name);
	if (asprintf(&path, "/v1/snapshots/%s", esc) == -1)
		path = NULL;
	free(esc);
	return path;
}

int
ctl_cmd_snap_create(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*body;
	struct ctl_resp		 r;
	int			 rc;

	if (a->a_name == NULL) {
		ctl_err("snapshot create: --name NAME is required");
		return CTL_USAGE;
	}
	body = json_object_new_object();
	json_object_object_add(body, "sandbox",
	    json_object_new_string(a->a_pos[0]));
	json_object_object_add(body, "name", json_object_new_string(a->a_name));
	rc = snap_call(c, "POST", "/v1/snapshots", body, &r);
	json_object_put(body);
	return rc != CTL_OK ? rc : snap_show_answer(c, &r);
}

int
ctl_cmd_snap_list(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*v;
	struct ctl_resp		 r;
	size_t			 i;
	int			 rc;

	(void)a;
	if ((rc = snap_call(c, "GET", "/v1/snapshots", NULL, &r)) != CTL_OK)
		return rc;
	if (c->c_json)
		return snap_show_answer(c, &r);
	if (json_object_object_get_ex(r.r_json, "snapshots", &v) &&
	    json_object_is_type(v, json_type_array))
		for (i = 0; i < json_object_array_length(v); i++)
			snap_print(json_object_array_get_idx(v, i));
	ctl_resp_fini(&r);
	return CTL_OK;
}

int
ctl_cmd_snap_show(struct ctl *c, struct ctl_args *a)
{
	struct ctl_resp	 r;
	char		*path;
	int		 rc;

	if ((path = snap_path(a->a_pos[0])) == NULL)
		return CTL_FAIL;
	rc = snap_call(c, "GET", path, NULL, &r);
	free(path);
	return rc != CTL_OK ? rc : snap_show_answer(c, &r);
}

int
ctl_cmd_snap_delete(struct ctl *c, struct ctl_args *a)
{
	struct ctl_resp	 r;
	char		*path;
	int		 rc;

	if ((path = snap_path(a->a_pos[0])) == NULL)
		return CTL_FAIL;
	rc = snap_call(c, "DELETE", path, NULL, &r);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json)
		return snap_show_answer(c, &r);
	printf("deleted %s\n", a->a_pos[0]);
	ctl_resp_fini(&r);
	return CTL_OK;
}

int
ctl_cmd_snap_rollback(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*body;
	struct ctl_resp		 r;
	char			*esc, *path;
	int			 rc;

	esc = ctl_path_escape(a->a_pos[0]);
	rc = asprintf(&path, "/v1/sandboxes/%s/rollback", esc);
	free(esc);
	if (rc == -1)
		return CTL_FAIL;
	body = json_object_new_object();
	json_object_object_add(body, "snapshot",
	    json_object_new_string(a->a_pos[1]));
	rc = snap_call(c, "POST", path, body, &r);
	json_object_put(body);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json)
		return snap_show_answer(c, &r);
	printf("%s rolled back to %s\n", a->a_pos[0], a->a_pos[1]);
	ctl_resp_fini(&r);
	return CTL_OK;
}
