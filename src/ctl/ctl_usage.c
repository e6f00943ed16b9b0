/*
 * airlockctl usage ID --by model|day: GET /v1/sandboxes/ID/usage?by=...
 * and its "breakdown" as a table, one row per model or UTC day.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ctl/ctl.h"

static const char *
member_text(struct json_object *o, const char *key)
{
	struct json_object	*v;

	if (!json_object_object_get_ex(o, key, &v) || v == NULL)
		return "-";
	return json_object_get_string(v);
}

static void
print_table(struct json_object *rows, const char *by)
{
	static const char *const cols[] = { "requests", "cost_usd",
	    "input_tokens", "cached_tokens", "cache_write_tokens",
	    "output_tokens" };
	struct json_object	*row;
	size_t			 i, j, n, w = strlen(by);

	n = json_object_array_length(rows);
	for (i = 0; i < n; i++) {
		row = json_object_array_get_idx(rows, i);
		if (strlen(member_text(row, by)) > w)
			w = strlen(member_text(row, by));
	}
	printf("%-*s  %8s  %14s  %12s  %12s  %12s  %12s\n", (int)w,
	    strcmp(by, "model") == 0 ? "MODEL" : "DAY", "REQUESTS",
	    "COST_USD", "INPUT", "CACHED", "CACHE_WRITE", "OUTPUT");
	for (i = 0; i < n; i++) {
		row = json_object_array_get_idx(rows, i);
		if (!json_object_is_type(row, json_type_object))
			continue;
		printf("%-*s", (int)w, member_text(row, by));
		printf("  %8s", member_text(row, cols[0]));
		printf("  %14s", member_text(row, cols[1]));
		for (j = 2; j < sizeof(cols) / sizeof(cols[0]); j++)
			printf("  %12s", member_text(row, cols[j]));
		printf("\n");
	}
	if (n == 0)
		printf("(no metered requests recorded)\n");
}

int
ctl_usage_by(struct ctl *c, const char *id, const char *by)
{
	struct json_object	*rows;
	struct ctl_resp		 r;
	char			*rest;
	int			 rc;

	if (asprintf(&rest, "/usage?by=%s", by) == -1) {
		ctl_err("out of memory");
		return CTL_FAIL;
	}
	rc = ctl_sandbox_call(c, "GET", id, rest, CTL_TIMEOUT_MS, &r);
	free(rest);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json)
		ctl_print_body(&r);
	else if (r.r_json != NULL &&
	    json_object_object_get_ex(r.r_json, "breakdown", &rows) &&
	    json_object_is_type(rows, json_type_array))
		print_table(rows, by);
	else {
		ctl_err("the gateway's answer has no \"breakdown\"");
		rc = CTL_FAIL;
	}
	ctl_resp_fini(&r);
	return rc;
}
