/*
 * The escape canary, gateway side (canary.h). The checks themselves run
 * in the launcher (src/launcher/lnc_probe.c).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "audit/aud.h"
#include "launcher/launcher.h"
#include "metrics/metrics.h"
#include "sbx/sbx.h"
#include "sched/canary.h"
#include "sched/pool.h"
#include "util/log.h"
#include "util/util.h"

static void
canary_audit(const struct sbx *s, int failures, const char *reason)
{
	struct aud_rec	r;
	char		id[25];

	memset(&r, 0, sizeof(r));
	util_random_hex(id, 12);
	r.ar_start_wall_ms = util_wall_ms();
	r.ar_id = id;
	r.ar_sandbox = s->sb_id;
	r.ar_mode = "launcher";
	r.ar_proto = "canary";
	r.ar_port = -1;
	r.ar_status = -1;
	/* "deny": containment did not hold somewhere */
	r.ar_decision = failures ? "deny" : "allow";
	r.ar_reason = reason;
	r.ar_bytes_in = -1;
	r.ar_bytes_out = -1;
	r.ar_duration_ms = -1;
	r.ar_cost_micro = -1;
	aud_submit(&r);
}

int
canary_probe(struct sbx *s, json_object **out, char *why, size_t whysz)
{
	char		 res[200], reason[400];
	json_object	*o, *checks, *c;
	const char	*detail;
	size_t		 off = 0;
	int		 i, failures = 0;

	if (pool_probe(s, res, sizeof(res)) == -1) {
		snprintf(why, whysz, "%s", res);
		return -1;
	}
	if (strlen(res) < LNC_PROBE_N) {
		snprintf(why, whysz, "the launcher's answer is short");
		return -1;
	}
	detail = res[LNC_PROBE_N] == ' ' ? res + LNC_PROBE_N + 1 : "";
	o = json_object_new_object();
	checks = json_object_new_array();
	reason[0] = '\0';
	for (i = 0; i < LNC_PROBE_N; i++) {
		int pass = res[i] == 'P' || res[i] == 'S';

		c = json_object_new_object();
		json_object_object_add(c, "name",
		    json_object_new_string(launcher_probe_checks[i]));
		json_object_object_add(c, "pass",
		    json_object_new_boolean(pass));
		if (res[i] == 'S')
			json_object_object_add(c, "skipped",
			    json_object_new_boolean(1));
		json_object_array_add(checks, c);
		if (pass)
			continue;
		failures++;
		met_canary_failure();
		log_warnx("error: sandbox %s: containment check %s FAILED%s%s",
		    s->sb_id, launcher_probe_checks[i],
		    detail[0] != '\0' ? ": " : "", detail);
		if (off < sizeof(reason))
			off += snprintf(reason + off, sizeof(reason) - off,
			    "%s%s", off ? " " : "canary failed: ",
			    launcher_probe_checks[i]);
	}
	if (failures == 0)
		snprintf(reason, sizeof(reason), "canary: all %d checks pass",
		    LNC_PROBE_N);
	else if (detail[0] != '\0' && off < sizeof(reason))
		snprintf(reason + off, sizeof(reason) - off, " (%s)", detail);
	canary_audit(s, failures, reason);
	json_object_object_add(o, "id", json_object_new_string(s->sb_id));
	json_object_object_add(o, "passed",
	    json_object_new_boolean(failures == 0));
	json_object_object_add(o, "failures", json_object_new_int(failures));
	json_object_object_add(o, "checks", checks);
	json_object_object_add(o, "detail", json_object_new_string(detail));
	*out = o;
	return 0;
}
