/*
 * The gateway's own answers on a metered rule, in the provider's error
 * shape: an SDK reads "error" as an object (OpenAI, Gemini) or the
 * "type": "error" envelope (Anthropic) and shows its message, so a
 * refusal's reason reaches the program instead of a bare "402". SPEC's
 * "reason" and "request_id" stay beside it (docs/spec-changes.md).
 */
#include "config.h"

#include <stdio.h>

#include <json-c/json.h>

#include "budget/bud.h"
#include "cfg/cfg.h"

/* google.rpc.Code names for the statuses the gateway answers with. */
static const char *
gemini_status(int status)
{
	switch (status) {
	case 400: return "INVALID_ARGUMENT";
	case 401:
	case 407: return "UNAUTHENTICATED";
	case 403: return "PERMISSION_DENIED";
	case 402:
	case 429: return "RESOURCE_EXHAUSTED";
	case 404: return "NOT_FOUND";
	case 408:
	case 504: return "DEADLINE_EXCEEDED";
	case 501: return "UNIMPLEMENTED";
	case 503: return "UNAVAILABLE";
	default: return status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION";
	}
}

static json_object *
openai_error(const char *code, const char *reason)
{
	json_object	*e = json_object_new_object();

	json_object_object_add(e, "message", json_object_new_string(reason));
	json_object_object_add(e, "type", json_object_new_string(code));
	json_object_object_add(e, "param", NULL);
	json_object_object_add(e, "code", json_object_new_string(code));
	return e;
}

static json_object *
gemini_error(int status, const char *code, const char *reason)
{
	json_object	*e = json_object_new_object(), *d, *info;

	json_object_object_add(e, "code", json_object_new_int(status));
	json_object_object_add(e, "message", json_object_new_string(reason));
	json_object_object_add(e, "status",
	    json_object_new_string(gemini_status(status)));
	info = json_object_new_object();
	json_object_object_add(info, "@type", json_object_new_string(
	    "type.googleapis.com/google.rpc.ErrorInfo"));
	json_object_object_add(info, "reason", json_object_new_string(code));
	json_object_object_add(info, "domain",
	    json_object_new_string("airlock"));
	d = json_object_new_array();
	json_object_array_add(d, info);
	json_object_object_add(e, "details", d);
	return e;
}

json_object *
bud_error_body(int meter, int status, const char *code, const char *reason,
    const char *request_id)
{
	json_object	*o, *e;
	char		 msg[600];

	if (meter != CFG_METER_OPENAI && meter != CFG_METER_ANTHROPIC &&
	    meter != CFG_METER_GEMINI)
		return NULL;
	/* the code in the message too: SDKs show the message alone */
	snprintf(msg, sizeof(msg), "airlock %s: %s", code, reason);
	o = json_object_new_object();
	switch (meter) {
	case CFG_METER_OPENAI:
		json_object_object_add(o, "error", openai_error(code, msg));
		break;
	case CFG_METER_ANTHROPIC:
		json_object_object_add(o, "type",
		    json_object_new_string("error"));
		e = json_object_new_object();
		json_object_object_add(e, "type",
		    json_object_new_string(code));
		json_object_object_add(e, "message",
		    json_object_new_string(msg));
		json_object_object_add(o, "error", e);
		break;
	default:
		json_object_object_add(o, "error",
		    gemini_error(status, code, msg));
		break;
	}
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_object_add(o, "request_id",
	    json_object_new_string(request_id));
	return o;
}
