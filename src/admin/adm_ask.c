/*
 * Approval holds and runtime rules (issue 21.1), over policy/pol_ask.c:
 *
 *   GET    /v1/pending                 {"pending": [HOLD...]}, oldest first
 *   POST   /v1/pending/ID/approve      {"scope": once|sandbox|policy,
 *					 "ttl": DURATION} -> {"id","decision",
 *					 "scope","rule"}
 *   POST   /v1/pending/ID/deny         {"id","decision"}
 *   GET    /v1/rules                   {"rules": [RULE...]}
 *   DELETE /v1/rules/RULE              {"revoked": RULE}
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <llhttp.h>

#include "admin/admin_internal.h"
#include "cfg/cfg.h"
#include "policy/pol_ask.h"

static void
ask_approve_deny(const struct admin_req *q, struct admin_resp *r,
    const char *idstr, int approve)
{
	static const char *const allowed[] = { "scope", "ttl", "match", NULL };
	static const char *const none[] = { NULL };
	json_object	*body, *o;
	enum ask_scope	 scope = ASK_ONCE;
	const char	*s = NULL, *ttl = NULL, *match = NULL;
	char		 rule[32], why[160], *end;
	uint64_t	 id, ttl_ms = 0;

	errno = 0;
	id = strtoull(idstr, &end, 10);
	if (errno != 0 || *end != '\0' || id == 0) {
		admin_error(r, 404, "not_found", "no such pending request");
		return;
	}
	if ((body = admin_body_object(q, r, approve ? allowed : none)) == NULL)
		return;
	if (admin_body_string(body, "scope", &s, r) == -1 ||
	    admin_body_string(body, "ttl", &ttl, r) == -1 ||
	    admin_body_string(body, "match", &match, r) == -1)
		goto out;
	if (match != NULL && strcmp(match, "host") != 0 &&
	    strcmp(match, "request") != 0) {
		admin_error(r, 400, "bad_request",
		    "\"match\" must be host or request");
		goto out;
	}
	if (s != NULL && strcmp(s, "sandbox") == 0)
		scope = ASK_SANDBOX;
	else if (s != NULL && strcmp(s, "policy") == 0)
		scope = ASK_POLICY;
	else if (s != NULL && strcmp(s, "once") != 0) {
		admin_error(r, 400, "bad_request",
		    "\"scope\" must be once, sandbox or policy");
		goto out;
	}
	if (ttl != NULL && (cfg_parse_duration(ttl, &ttl_ms) == -1 ||
	    ttl_ms == 0)) {
		admin_error(r, 400, "bad_request",
		    "\"ttl\" must be a duration such as 10m or 24h");
		goto out;
	}
	if (ttl != NULL && scope == ASK_ONCE) {
		admin_error(r, 400, "bad_request",
		    "\"ttl\" needs a scope of sandbox or policy");
		goto out;
	}
	if (match != NULL && strcmp(match, "request") == 0 &&
	    scope == ASK_ONCE) {
		admin_error(r, 400, "bad_request",
		    "\"match\" needs a scope of sandbox or policy");
		goto out;
	}
	if (ask_decide(id, approve, scope, match != NULL &&
	    strcmp(match, "request") == 0, ttl_ms, rule, sizeof(rule)) == -1) {
		snprintf(why, sizeof(why), "no pending request \"%.32s\" (it "
		    "may have been decided or timed out)", idstr);
		admin_error(r, 404, "not_found", why);
		goto out;
	}
	o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(idstr));
	json_object_object_add(o, "decision",
	    json_object_new_string(approve ? "approve" : "deny"));
	if (approve) {
		json_object_object_add(o, "scope", json_object_new_string(
		    s != NULL ? s : "once"));
		json_object_object_add(o, "rule", rule[0] == '\0' ? NULL :
		    json_object_new_string(rule));
	}
	admin_json(r, 200, o);
out:
	json_object_put(body);
}

void
adm_ask_route(const struct admin_req *q, struct admin_resp *r, char **seg,
    int n)
{
	json_object	*o;
	char		 why[160];
	int		 m = q->aq_method;

	/* seg[0] is "pending" or "rules" */
	if (strcmp(seg[0], "pending") == 0) {
		if (n == 1 && m == HTTP_GET) {
			admin_json(r, 200, ask_pending_json());
			return;
		}
		if (n == 1) {
			admin_error(r, 405, "method_not_allowed",
			    "method not allowed here (use GET)");
			return;
		}
		if (n == 3 && (strcmp(seg[2], "approve") == 0 ||
		    strcmp(seg[2], "deny") == 0)) {
			if (m != HTTP_POST)
				admin_error(r, 405, "method_not_allowed",
				    "method not allowed here (use POST)");
			else
				ask_approve_deny(q, r, seg[1],
				    strcmp(seg[2], "approve") == 0);
			return;
		}
	} else if (n == 1) {
		if (m == HTTP_GET)
			admin_json(r, 200, ask_rules_json());
		else
			admin_error(r, 405, "method_not_allowed",
			    "method not allowed here (use GET)");
		return;
	} else if (n == 2) {
		if (m != HTTP_DELETE) {
			admin_error(r, 405, "method_not_allowed",
			    "method not allowed here (use DELETE)");
			return;
		}
		if (ask_rule_revoke(seg[1]) == -1) {
			snprintf(why, sizeof(why), "no runtime rule \"%.32s\"",
			    seg[1]);
			admin_error(r, 404, "not_found", why);
			return;
		}
		o = json_object_new_object();
		json_object_object_add(o, "revoked",
		    json_object_new_string(seg[1]));
		admin_json(r, 200, o);
		return;
	}
	admin_error(r, 404, "not_found", "no such route");
}
