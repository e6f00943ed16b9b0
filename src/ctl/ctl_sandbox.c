/*
 * airlockctl sandbox create | list | show | probe | delete | ca, and
 * usage (the shared printing is in ctl_cmds.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ctl/ctl.h"
#include "util/util.h"

int
ctl_cmd_sandbox_create(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*body;
	struct ctl_resp		 r;
	int			 rc;

	body = json_object_new_object();
	if (a->a_policy != NULL)
		json_object_object_add(body, "policy",
		    json_object_new_string(a->a_policy));
	if (a->a_id != NULL)
		json_object_object_add(body, "id",
		    json_object_new_string(a->a_id));
	rc = ctl_call(c, "POST", "/v1/sandboxes", body, CTL_TIMEOUT_MS, &r);
	json_object_put(body);
	if (rc != CTL_OK)
		return rc;
	/* Always JSON: its token and PEM are meant for programs. */
	ctl_print_body(&r);
	if (r.r_json == NULL)
		rc = CTL_FAIL;
	ctl_resp_fini(&r);
	return rc;
}

/* A table with a header row; <cells> is rows * ncol strings (taken). */
static void
print_table(const char *const *head, size_t ncol, char **cells,
    size_t rows)
{
	size_t	*w, i, j, l;

	w = xcalloc(ncol, sizeof(*w));
	for (j = 0; j < ncol; j++)
		w[j] = strlen(head[j]);
	for (i = 0; i < rows; i++)
		for (j = 0; j < ncol; j++)
			if ((l = strlen(cells[i * ncol + j])) > w[j])
				w[j] = l;
	for (j = 0; j < ncol; j++) {
		if (j + 1 < ncol)
			printf("%-*s  ", (int)w[j], head[j]);
		else
			printf("%s\n", head[j]);
	}
	for (i = 0; i < rows; i++) {
		for (j = 0; j < ncol; j++) {
			if (j + 1 < ncol)
				printf("%-*s  ", (int)w[j],
				    cells[i * ncol + j]);
			else
				printf("%s\n", cells[i * ncol + j]);
			free(cells[i * ncol + j]);
		}
	}
	free(w);
}

/*
 * ID POLICY KIND STATE CREATED CONNS. KIND: static (config file) or
 * dynamic; STATE, for dynamic ones: created (sandbox create), warm (in the
 * launcher's pool), launched (claimed).
 */
int
ctl_cmd_sandbox_list(struct ctl *c, struct ctl_args *a)
{
	static const char *const head[] = { "ID", "POLICY", "KIND", "STATE",
	    "CREATED", "CONNS" };
	static const char *const keys[] = { "id", "policy", "static", "state",
	    "created", "connections" };
	const size_t		 ncol = sizeof(head) / sizeof(head[0]);
	struct json_object	*list, *sb, *v, *st;
	struct ctl_resp		 r;
	char			**cells;
	size_t			 n, i, j;
	int			 rc, is_static;

	if ((rc = ctl_call(c, "GET", "/v1/sandboxes", NULL, CTL_TIMEOUT_MS,
	    &r)) != CTL_OK)
		return rc;
	if (c->c_json) {
		ctl_print_body(&r);
		ctl_resp_fini(&r);
		return CTL_OK;
	}
	if (ctl_need_object(c, &r) == -1 ||
	    !json_object_object_get_ex(r.r_json, "sandboxes", &list) ||
	    !json_object_is_type(list, json_type_array)) {
		if (r.r_json != NULL)
			ctl_err("the gateway's answer has no \"sandboxes\" "
			    "list");
		ctl_resp_fini(&r);
		return CTL_FAIL;
	}
	n = json_object_array_length(list);
	cells = xcalloc(n * ncol + 1, sizeof(char *));
	for (i = 0; i < n; i++) {
		sb = json_object_array_get_idx(list, i);
		if (sb == NULL || !json_object_is_type(sb, json_type_object))
			sb = NULL;
		st = NULL;
		if (sb != NULL)
			json_object_object_get_ex(sb, "static", &st);
		is_static = st != NULL &&
		    json_object_is_type(st, json_type_boolean) &&
		    json_object_get_boolean(st);
		for (j = 0; j < ncol; j++) {
			v = NULL;
			if (sb != NULL)
				json_object_object_get_ex(sb, keys[j], &v);
			if (j == 2 && st != NULL &&
			    json_object_is_type(st, json_type_boolean))
				cells[i * ncol + j] = xstrdup(is_static ?
				    "static" : "dynamic");
			else if (j == 3 && is_static)
				cells[i * ncol + j] = xstrdup("-");
			else
				cells[i * ncol + j] = ctl_val_text(v);
		}
	}
	print_table(head, ncol, cells, n);
	free(cells);
	ctl_resp_fini(&r);
	return CTL_OK;
}

/* A PEM as the gateway gave it, ending in a newline. */
static void
print_pem(const char *pem)
{
	printf("%s%s", pem, *pem != '\0' && pem[strlen(pem) - 1] == '\n' ?
	    "" : "\n");
}

/*
 * GET the sandbox: its fields and its CA, or with <pem_only> (sandbox ca)
 * the CA's PEM alone.
 */
static int
sandbox_get(struct ctl *c, const char *id, int pem_only)
{
	static const char *const skip[] = { "ca_cert", NULL };
	struct ctl_resp	 r;
	const char	*pem;
	int		 rc;

	rc = ctl_sandbox_call(c, "GET", id, "", CTL_TIMEOUT_MS, &r);
	if (rc != CTL_OK)
		return rc;
	pem = ctl_jstr(r.r_json, "ca_cert");
	if (c->c_json)
		ctl_print_body(&r);
	else if (pem_only && pem != NULL && *pem != '\0')
		print_pem(pem);
	else if (pem_only) {
		ctl_err("the gateway's answer has no \"ca_cert\"");
		rc = CTL_FAIL;
	} else if (ctl_need_object(c, &r) == 0) {
		ctl_print_kv(r.r_json, skip);
		if (pem != NULL) {
			printf("ca_cert:\n");
			print_pem(pem);
		}
	} else
		rc = CTL_FAIL;
	ctl_resp_fini(&r);
	return rc;
}

int
ctl_cmd_sandbox_show(struct ctl *c, struct ctl_args *a)
{
	return sandbox_get(c, a->a_pos[0], 0);
}

/*
 * sandbox probe ID: the escape canary (POST …/probe). One line per check,
 * "pass" or "FAIL"; exit 1 when any failed.
 */
int
ctl_cmd_sandbox_probe(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*checks, *ch, *v;
	struct ctl_resp		 r;
	const char		*name, *detail;
	size_t			 i, n;
	int			 rc, failures = 0, pass, skipped;

	rc = ctl_sandbox_call(c, "POST", a->a_pos[0], "/probe",
	    CTL_LONG_TIMEOUT_MS, &r);
	if (rc != CTL_OK)
		return rc;
	if (ctl_need_object(c, &r) == -1) {
		ctl_resp_fini(&r);
		return CTL_FAIL;
	}
	if (json_object_object_get_ex(r.r_json, "failures", &v))
		failures = json_object_get_int(v);
	if (c->c_json)
		ctl_print_body(&r);
	else if (json_object_object_get_ex(r.r_json, "checks", &checks) &&
	    json_object_is_type(checks, json_type_array)) {
		n = json_object_array_length(checks);
		for (i = 0; i < n; i++) {
			ch = json_object_array_get_idx(checks, i);
			if ((name = ctl_jstr(ch, "name")) == NULL ||
			    !json_object_object_get_ex(ch, "pass", &v))
				continue;
			pass = json_object_get_boolean(v);
			skipped = json_object_object_get_ex(ch, "skipped", &v) &&
			    json_object_get_boolean(v);
			printf("%-20s %s%s\n", name, pass ? "pass" : "FAIL",
			    skipped ? " (skipped)" : "");
		}
		if ((detail = ctl_jstr(r.r_json, "detail")) != NULL &&
		    *detail != '\0')
			printf("detail: %s\n", detail);
	}
	ctl_resp_fini(&r);
	return failures ? CTL_FAIL : CTL_OK;
}

int
ctl_cmd_sandbox_delete(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*o;
	struct ctl_resp		 r;
	char			*id;
	int			 rc;

	rc = ctl_sandbox_call(c, "DELETE", a->a_pos[0], "", CTL_TIMEOUT_MS, &r);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json) {
		/* 204 has no body: say what happened as JSON all the same. */
		if (r.r_json != NULL)
			ctl_print_body(&r);
		else {
			o = json_object_new_object();
			json_object_object_add(o, "id",
			    json_object_new_string(a->a_pos[0]));
			json_object_object_add(o, "deleted",
			    json_object_new_boolean(1));
			ctl_print_json(o);
			json_object_put(o);
		}
	} else {
		id = ctl_clean(a->a_pos[0]);
		printf("deleted %s\n", id);
		free(id);
	}
	ctl_resp_fini(&r);
	return CTL_OK;
}

int
ctl_cmd_sandbox_ca(struct ctl *c, struct ctl_args *a)
{
	return sandbox_get(c, a->a_pos[0], 1);
}

int
ctl_cmd_usage(struct ctl *c, struct ctl_args *a)
{
	char	*path;
	int	 rc;

	if (a->a_by != NULL)
		return ctl_usage_by(c, a->a_pos[0], a->a_by);
	path = ctl_sandbox_path(a->a_pos[0], "/usage");
	rc = ctl_get_and_print(c, path);
	free(path);
	return rc;
}

int
ctl_cmd_usage_reset(struct ctl *c, struct ctl_args *a)
{
	struct ctl_resp	 r;
	int		 rc;

	rc = ctl_sandbox_call(c, "POST", a->a_pos[0], "/usage/reset",
	    CTL_TIMEOUT_MS, &r);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json)
		ctl_print_body(&r);
	else if (r.r_json != NULL && json_object_is_type(r.r_json,
	    json_type_object))
		ctl_print_kv(r.r_json, NULL);
	else
		printf("usage reset\n");
	ctl_resp_fini(&r);
	return CTL_OK;
}
