/*
 * The audit stage (audit/aud_stage.c) driven by a fake exchange (no
 * connection, no event loop): the real writer (aud.c) to a file of a
 * temporary directory, the done hook through the walker after a stage
 * that fills part of the record, as the driver's conn_audit does. What
 * the line says, and what the metrics count (decision, reason, bytes,
 * report mode's would-deny).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <json-c/json.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "metrics/metrics.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "unit.h"

static char		tdir[128];
static char		apath[256];
static struct cfg	acfg;

static void
setup(void)
{
	snprintf(tdir, sizeof(tdir), "/tmp/airlock-audst-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tdir));
	snprintf(apath, sizeof(apath), "%s/audit.jsonl", tdir);
	memset(&acfg, 0, sizeof(acfg));
	acfg.c_audit_file = apath;
	ck_assert_int_eq(aud_start(&acfg), 0);
}

static void
teardown(void)
{
	char	cmd[300];

	aud_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A stage before the audit's: what it adds to the record at done. */
static void
fill_done(struct xs_call *xc)
{
	xc->xc_rec->ar_country = "NL";
	xc->xc_rec->ar_mcp_method = "tools/call";
}

static const struct xstage fill_stage = {
	.xs_name = "fill",
	.xs_done = fill_done,
};

static const struct xstage *const tbl[] = { &fill_stage, &aud_stage, NULL };

struct fake {
	struct xs_call	 xc;
	struct xchg	 x;
	struct aud_rec	 r;
};

/* An exchange of sandbox sb to h.test:443, ended as <why>. */
static void
fake_new(struct fake *f, const char *id, int allowed, enum aud_reason why)
{
	struct xchg	*x = &f->x;

	memset(f, 0, sizeof(*f));
	snprintf(x->x_id, sizeof(x->x_id), "%s", id);
	snprintf(x->x_method, sizeof(x->x_method), "POST");
	snprintf(x->x_host, sizeof(x->x_host), "h.test");
	x->x_port = 443;
	x->x_path = "/v1/p";
	x->x_proto = "https";
	x->x_tls = "intercept";
	x->x_allowed = allowed;
	x->x_why = why;
	x->x_status = why == AUD_R_NONE ? 200 : aud_reason(why)->ri_status;
	if (why != AUD_R_NONE)
		snprintf(x->x_reason, sizeof(x->x_reason), "%s",
		    aud_reason(why)->ri_text);
	snprintf(x->x_rule, sizeof(x->x_rule), "pol#2");
	x->x_bytes_in = 1234;
	x->x_bytes_out = 56;
	/* the record as the driver (conn_reply.c conn_audit) starts it */
	f->r.ar_cost_micro = -1;
	f->r.ar_start_wall_ms = 1700000000000ULL;
	f->r.ar_id = x->x_id;
	f->r.ar_sandbox = "sb";
	f->r.ar_mode = "explicit";
	f->r.ar_proto = x->x_proto;
	f->r.ar_method = x->x_method;
	f->r.ar_host = x->x_host;
	f->r.ar_port = x->x_port;
	f->r.ar_path = x->x_path;
	f->r.ar_status = x->x_status;
	f->r.ar_decision = allowed ? "allow" : "deny";
	f->r.ar_reason = x->x_reason[0] ? x->x_reason : NULL;
	f->r.ar_rule = x->x_rule;
	f->r.ar_bytes_in = (int64_t)x->x_bytes_in;
	f->r.ar_bytes_out = (int64_t)x->x_bytes_out;
	f->r.ar_tls = x->x_tls;
	f->xc.xc_x = x;
	f->xc.xc_rec = &f->r;
	f->xc.xc_dur_us = 1500;
}

/* The value of metrics sample <name> (with its labels), 0 when absent. */
static uint64_t
sample(const char *name)
{
	struct evbuffer	*b = evbuffer_new();
	char		*s, *p, *line;
	uint64_t	 v = 0;
	size_t		 n = strlen(name);

	met_render(b);
	evbuffer_add(b, "", 1);
	s = (char *)evbuffer_pullup(b, -1);
	for (line = s; line != NULL && *line != '\0'; line = p) {
		if ((p = strchr(line, '\n')) != NULL)
			p++;
		if (strncmp(line, name, n) == 0 && line[n] == ' ') {
			v = strtoull(line + n + 1, NULL, 10);
			break;
		}
	}
	evbuffer_free(b);
	return v;
}

/* The one line the writer wrote (it stops first), parsed. */
static json_object *
the_line(void)
{
	json_object	*o;
	char		*text;
	size_t		 len;

	aud_stop();
	ck_assert_ptr_nonnull(text = unit_slurp(apath, &len));
	ck_assert_msg(len > 0 && text[len - 1] == '\n' &&
	    strchr(text, '\n') == text + len - 1, "one line: %s", text);
	ck_assert_ptr_nonnull(o = json_tokener_parse(text));
	free(text);
	ck_assert_int_eq(aud_start(&acfg), 0);	/* for teardown */
	return o;
}

static const char *
str(json_object *o, const char *k)
{
	json_object	*v;

	return json_object_object_get_ex(o, k, &v) ?
	    json_object_get_string(v) : NULL;
}

static int64_t
num(json_object *o, const char *k)
{
	json_object	*v;

	ck_assert_msg(json_object_object_get_ex(o, k, &v), "no %s", k);
	return json_object_get_int64(v);
}

/* The audit stage only writes: no hook that could refuse or hold. */
START_TEST(test_aud_stage_hooks)
{
	ck_assert_ptr_nonnull(aud_stage.xs_done);
	ck_assert_ptr_null(aud_stage.xs_req_policy);
	ck_assert_ptr_null(aud_stage.xs_req_head);
	ck_assert_ptr_null(aud_stage.xs_req_ready);
	ck_assert_ptr_null(aud_stage.xs_req_body);
	ck_assert_ptr_null(aud_stage.xs_dest);
	ck_assert_ptr_null(aud_stage.xs_resp_head);
	ck_assert_ptr_null(aud_stage.xs_resp_body);
	ck_assert_ptr_null(aud_stage.xs_flow);
}
END_TEST

#define DENY_SAMPLE	"airlock_requests_total{decision=\"deny\"," \
			    "reason=\"approval_denied\"}"
#define ALLOW_SAMPLE	"airlock_requests_total{decision=\"allow\"," \
			    "reason=\"none\"}"

START_TEST(test_aud_stage_denied)
{
	struct fake	 f;
	json_object	*o;
	uint64_t	 total = met_requests_total();
	uint64_t	 denied = sample(DENY_SAMPLE);
	uint64_t	 bin = sample("airlock_bytes_in_total");
	uint64_t	 would = sample("airlock_would_deny_total");

	fake_new(&f, "x-deny", 0, AUD_R_APPROVAL_DENIED);
	xs_run_done(tbl, &f.xc);
	ck_assert_uint_eq(met_requests_total() - total, 1);
	ck_assert_uint_eq(sample(DENY_SAMPLE) - denied, 1);
	ck_assert_uint_eq(sample("airlock_bytes_in_total") - bin, 1234);
	ck_assert_uint_eq(sample("airlock_would_deny_total"), would);
	o = the_line();
	ck_assert_str_eq(str(o, "id"), "x-deny");
	ck_assert_str_eq(str(o, "sandbox"), "sb");
	ck_assert_str_eq(str(o, "decision"), "deny");
	ck_assert_str_eq(str(o, "reason"),
	    aud_reason(AUD_R_APPROVAL_DENIED)->ri_text);
	ck_assert_int_eq(num(o, "status"), 403);
	ck_assert_str_eq(str(o, "host"), "h.test");
	ck_assert_int_eq(num(o, "port"), 443);
	ck_assert_str_eq(str(o, "path"), "/v1/p");
	ck_assert_str_eq(str(o, "rule"), "pol#2");
	ck_assert_int_eq(num(o, "bytes_in"), 1234);
	ck_assert_int_eq(num(o, "bytes_out"), 56);
	/* the stage before the audit's filled these at done */
	ck_assert_str_eq(str(o, "country"), "NL");
	ck_assert_ptr_nonnull(json_object_object_get(o, "mcp"));
	ck_assert_ptr_null(str(o, "would_deny"));
	json_object_put(o);
}
END_TEST

/* Report mode: forwarded, counted as allowed and as a would-deny. */
START_TEST(test_aud_stage_would_deny)
{
	struct fake	 f;
	json_object	*o;
	uint64_t	 allowed = sample(ALLOW_SAMPLE);
	uint64_t	 would = sample("airlock_would_deny_total");

	fake_new(&f, "x-report", 1, AUD_R_NONE);
	snprintf(f.x.x_would_deny, sizeof(f.x.x_would_deny), "no rule "
	    "allows it");
	f.r.ar_would_deny = f.x.x_would_deny;
	xs_run_done(tbl, &f.xc);
	ck_assert_uint_eq(sample(ALLOW_SAMPLE) - allowed, 1);
	ck_assert_uint_eq(sample("airlock_would_deny_total") - would, 1);
	o = the_line();
	ck_assert_str_eq(str(o, "decision"), "allow");
	ck_assert_int_eq(num(o, "status"), 200);
	ck_assert_ptr_null(str(o, "reason"));
	ck_assert_str_eq(str(o, "would_deny"), "no rule allows it");
	json_object_put(o);
}
END_TEST

Suite *
suite_stage_aud(void)
{
	Suite	*s = suite_create("stage_aud");
	TCase	*tc = tcase_create("fake exchange");

	tcase_add_test(tc, test_aud_stage_hooks);
	suite_add_tcase(s, tc);
	tc = tcase_create("writer");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_aud_stage_denied);
	tcase_add_test(tc, test_aud_stage_would_deny);
	suite_add_tcase(s, tc);
	return s;
}
