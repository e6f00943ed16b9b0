/*
 * /v1/snapshots (issue 22): the launcher's snapshot store, through its
 * socket (src/launcher/lnc_snap.c does the work, as root).
 *
 *   GET    /v1/snapshots            {"snapshots": [SNAPSHOT...]}, oldest
 *   POST   /v1/snapshots            {"sandbox", "name"} -> 201 SNAPSHOT
 *   GET    /v1/snapshots/NAME       SNAPSHOT
 *   DELETE /v1/snapshots/NAME       {"deleted": NAME}
 *   POST   /v1/sandboxes/ID/rollback {"snapshot"} -> {"id","snapshot"}:
 *	its processes restarted on a fresh upper layer over the snapshot
 *
 * SNAPSHOT: {"name","layer","parent" (null: on the base),"bytes",
 * "created" (unix seconds),"sandbox"}.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>
#include <json-c/json.h>

#include "admin/admin_internal.h"
#include "launcher/launcher.h"
#include "launcher/lnc_proto.h"
#include "sbx/sbx.h"
#include "sched/pool.h"

#define SNAP_LINE	320

/* "name layer parent bytes created sandbox" -> SNAPSHOT. */
static json_object *
snap_json(const char *line)
{
	char		name[64], layer[65], parent[64], sandbox[64];
	uint64_t	bytes;
	int64_t		created;
	json_object	*o;

	if (sscanf(line, "%63s %64s %63s %" SCNu64 " %" SCNd64 " %63s", name,
	    layer, parent, &bytes, &created, sandbox) != 6)
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(name));
	json_object_object_add(o, "layer", json_object_new_string(layer));
	json_object_object_add(o, "parent", strcmp(parent, "-") == 0 ? NULL :
	    json_object_new_string(parent));
	json_object_object_add(o, "bytes", json_object_new_int64(
	    (int64_t)bytes));
	json_object_object_add(o, "created", json_object_new_int64(created));
	json_object_object_add(o, "sandbox", json_object_new_string(sandbox));
	return o;
}

/* The launcher's errno as the admin API's status. */
static void
snap_error(struct admin_resp *r, int err, const char *why)
{
	switch (err) {
	case ENOENT:
		admin_error(r, 404, "not_found", why);
		break;
	case EINVAL:
		admin_error(r, 400, "bad_request", why);
		break;
	case EEXIST:
	case EBUSY:
	case ENOTSUP:
		admin_error(r, 409, "conflict", why);
		break;
	case ENOSPC:
	case EDQUOT:
		admin_error(r, 507, "insufficient_storage", why);
		break;
	default:
		admin_error(r, 500, "internal_error", why);
	}
}

static struct launcher *
snap_launcher(struct admin_resp *r)
{
	struct launcher	*lc = pool_get_launcher();

	if (lc == NULL)
		admin_error(r, 409, "conflict", "snapshots need the netns "
		    "launcher (launcher.backend netns)");
	return lc;
}

static void
snap_list(struct admin_resp *r, struct launcher *lc)
{
	json_object	*o, *a, *one;
	char		 line[SNAP_LINE];
	unsigned	 i;

	a = json_object_new_array();
	for (i = 0; launcher_snap(lc, LNC_SNAP_LIST, NULL, NULL, i, line,
	    sizeof(line)) == 0; i++)
		if ((one = snap_json(line)) != NULL)
			json_object_array_add(a, one);
	if (errno != ENOENT) {
		json_object_put(a);
		snap_error(r, errno, line);
		return;
	}
	o = json_object_new_object();
	json_object_object_add(o, "snapshots", a);
	admin_json(r, 200, o);
}

static void
snap_create(const struct admin_req *q, struct admin_resp *r,
    struct launcher *lc)
{
	static const char *const fields[] = { "sandbox", "name", NULL };
	json_object	*body, *o;
	const char	*sandbox, *name;
	char		 line[SNAP_LINE];

	if ((body = admin_body_object(q, r, fields)) == NULL)
		return;
	if (admin_body_string(body, "sandbox", &sandbox, r) == -1 ||
	    admin_body_string(body, "name", &name, r) == -1) {
		json_object_put(body);
		return;
	}
	if (sandbox == NULL || name == NULL) {
		admin_error(r, 400, "bad_request", "\"sandbox\" and \"name\" "
		    "are required");
	} else if (launcher_snap(lc, LNC_SNAP_CREATE, sandbox, name, 0, line,
	    sizeof(line)) == -1)
		snap_error(r, errno, line);
	else if ((o = snap_json(line)) == NULL)
		admin_error(r, 500, "internal_error", "bad launcher answer");
	else
		admin_json(r, 201, o);
	json_object_put(body);
}

void
adm_snap_route(const struct admin_req *q, struct admin_resp *r, char **seg,
    int n)
{
	struct launcher	*lc;
	json_object	*o;
	char		 line[SNAP_LINE];
	int		 m = q->aq_method;

	if (n > 1) {
		admin_error(r, 404, "not_found", "no such route");
		return;
	}
	if (n == 0 && m != HTTP_GET && m != HTTP_POST) {
		admin_error(r, 405, "method_not_allowed", "method not allowed here (use GET or POST)");
		return;
	}
	if (n == 1 && m != HTTP_GET && m != HTTP_DELETE) {
		admin_error(r, 405, "method_not_allowed", "method not allowed here (use GET or DELETE)");
		return;
	}
	if ((lc = snap_launcher(r)) == NULL)
		return;
	if (n == 0 && m == HTTP_GET)
		return snap_list(r, lc);
	if (n == 0)
		return snap_create(q, r, lc);
	if (launcher_snap(lc, m == HTTP_GET ? LNC_SNAP_SHOW : LNC_SNAP_DELETE,
	    NULL, seg[0], 0, line, sizeof(line)) == -1)
		return snap_error(r, errno, line);
	if (m == HTTP_GET) {
		if ((o = snap_json(line)) == NULL)
			return admin_error(r, 500, "internal_error",
			    "bad launcher answer");
		return admin_json(r, 200, o);
	}
	o = json_object_new_object();
	json_object_object_add(o, "deleted", json_object_new_string(seg[0]));
	admin_json(r, 200, o);
}

int
adm_snap_from_ok(struct admin_resp *r, const char *from)
{
	struct launcher	*lc;
	char		 line[SNAP_LINE];

	if ((lc = snap_launcher(r)) == NULL)
		return -1;
	if (launcher_snap(lc, LNC_SNAP_SHOW, NULL, from, 0, line,
	    sizeof(line)) == -1) {
		snap_error(r, errno, line);
		return -1;
	}
	return 0;
}

void
adm_snap_rollback(const struct admin_req *q, struct admin_resp *r,
    struct sbx *s)
{
	static const char *const fields[] = { "snapshot", NULL };
	json_object	*body, *o;
	const char	*name;
	char		 why[SNAP_LINE];

	if ((body = admin_body_object(q, r, fields)) == NULL)
		return;
	if (admin_body_string(body, "snapshot", &name, r) == -1) {
		json_object_put(body);
		return;
	}
	if (name == NULL)
		admin_error(r, 400, "bad_request", "\"snapshot\" is required");
	else if (!(s->sb_flags & SBX_F_LAUNCHED))
		admin_error(r, 409, "conflict", "only a claimed sandbox is "
		    "rolled back");
	else if (adm_snap_from_ok(r, name) == -1)
		;	/* answered */
	else if (pool_rollback(s, name, why, sizeof(why)) == -1)
		admin_error(r, errno == ENOTSUP ? 409 : 500, errno == ENOTSUP ?
		    "conflict" : "internal_error", why);
	else {
		o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_string(
		    s->sb_id));
		json_object_object_add(o, "snapshot",
		    json_object_new_string(name));
		admin_json(r, 200, o);
	}
	json_object_put(body);
}
