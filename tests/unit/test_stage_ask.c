/*
 * The ask stage (policy/pol_ask_stage.c) driven by a fake exchange (no
 * connection, no event loop): the registry (pol_ask.c) without its thread,
 * and a resume event of an event base that never runs, so a decision is
 * seen as that event made active. What the driver is told at req_ready
 * (go on, wait and for how long, refused and why), what the operator
 * sees of a hold, what the exchange keeps (x_ask, x_ask_id).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "cfg/cfg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "policy/pol_ask.h"
#include "unit.h"

#define SLACK_MS	2000	/* pol_ask_stage.c's ASK_SLACK_MS */

struct fake {
	struct xs_call		 xc;
	struct xchg		 x;
	struct cfg		 cfg;
	struct cfg_policy	 pol;
	struct event_base	*base;
	struct event		*ev;
	int			 resumes;	/* xc_resume calls */
};

static void
never(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* The driver's resume event: made on first use, as conn_pipe.c does. */
static struct event *
resume(struct xs_call *xc)
{
	struct fake	*f = xc->xc_driver;

	f->resumes++;
	if (f->ev == NULL)
		f->ev = event_new(f->base, -1, 0, never, NULL);
	return f->ev;
}

/* A GET of <sandbox> (policy "pol") to h.test:80/p, held for an operator. */
static void
fake_new(struct fake *f, const char *sandbox, const char *id)
{
	memset(f, 0, sizeof(*f));
	f->cfg.c_ask_timeout_ms = 60000;
	f->cfg.c_ask_max_pending = 4;
	f->pol.p_name = "pol";
	snprintf(f->x.x_id, sizeof(f->x.x_id), "%s", id);
	snprintf(f->x.x_method, sizeof(f->x.x_method), "GET");
	snprintf(f->x.x_host, sizeof(f->x.x_host), "h.test");
	f->x.x_port = 80;
	f->x.x_path = "/p";
	f->x.x_ask = 1;
	ck_assert_ptr_nonnull(f->base = event_base_new());
	f->xc.xc_x = &f->x;
	f->xc.xc_cfg = &f->cfg;
	f->xc.xc_policy = &f->pol;
	f->xc.xc_sandbox = sandbox;
	f->xc.xc_resume = resume;
	f->xc.xc_driver = f;
}

static void
fake_free(struct fake *f)
{
	if (f->ev != NULL) {
		ask_unwatch(f->ev);
		event_free(f->ev);
	}
	event_base_free(f->base);
}

/* Did the registry make the exchange's resume event active? */
static int
woken(const struct fake *f)
{
	return f->ev != NULL && event_pending(f->ev, EV_TIMEOUT, NULL);
}

static enum xs_verdict
ready(struct fake *f)
{
	f->xc.xc_why = AUD_R_NONE;
	f->xc.xc_reason[0] = '\0';
	f->xc.xc_wait_ms = 0;
	return ask_stage.xs_req_ready(&f->xc);
}

/* The pending hold of request <id> as GET /v1/pending shows it, or NULL. */
static json_object *
pending(const char *id)
{
	json_object	*o = ask_pending_json(), *a, *e, *v, *r = NULL;
	size_t		 i;

	ck_assert(json_object_object_get_ex(o, "pending", &a));
	for (i = 0; i < json_object_array_length(a); i++) {
		e = json_object_array_get_idx(a, i);
		if (json_object_object_get_ex(e, "request_id", &v) &&
		    strcmp(json_object_get_string(v), id) == 0) {
			r = json_object_get(e);
			break;
		}
	}
	json_object_put(o);
	return r;
}

static const char *
field(json_object *o, const char *k)
{
	json_object	*v;

	return json_object_object_get_ex(o, k, &v) ?
	    json_object_get_string(v) : NULL;
}

static void
teardown(void)
{
	ask_close();
}

START_TEST(test_ask_stage_not_held)
{
	struct fake	f;

	fake_new(&f, "sb-not", "r0");
	f.x.x_ask = 0;
	ck_assert_int_eq(ready(&f), XS_GO);
	ck_assert_uint_eq(f.x.x_ask_id, 0);
	ck_assert_int_eq(f.resumes, 0);
	ck_assert_ptr_null(pending("r0"));
	fake_free(&f);
}
END_TEST

/* Held, woken early (still waiting), approved: then on, once. */
START_TEST(test_ask_stage_approved)
{
	struct fake	 f;
	json_object	*p;
	uint64_t	 id;

	fake_new(&f, "sb-ok", "r1");
	ck_assert_int_eq(ready(&f), XS_WAIT);
	ck_assert_int_eq(f.resumes, 1);
	ck_assert_uint_ne(id = f.x.x_ask_id, 0);
	ck_assert_uint_eq(f.xc.xc_wait_ms, 60000 + SLACK_MS);
	ck_assert(!woken(&f));
	/* what the operator is shown of it */
	ck_assert_ptr_nonnull(p = pending("r1"));
	ck_assert_str_eq(field(p, "sandbox"), "sb-ok");
	ck_assert_str_eq(field(p, "policy"), "pol");
	ck_assert_str_eq(field(p, "host"), "h.test");
	ck_assert_str_eq(field(p, "method"), "GET");
	ck_assert_str_eq(field(p, "path"), "/p");
	ck_assert_str_eq(field(p, "port"), "80");
	json_object_put(p);
	/* woken before a decision: it waits on, for what is left */
	ck_assert_int_eq(ready(&f), XS_WAIT);
	ck_assert_uint_eq(f.x.x_ask_id, id);
	ck_assert(f.xc.xc_wait_ms > SLACK_MS &&
	    f.xc.xc_wait_ms <= 60000 + SLACK_MS);
	ck_assert_int_eq(ask_decide(id, 1, ASK_ONCE, 0, 0, NULL, 0), 0);
	ck_assert(woken(&f));
	ck_assert_int_eq(ready(&f), XS_GO);
	ck_assert_int_eq(f.x.x_ask, 0);
	ck_assert_uint_eq(f.x.x_ask_id, 0);
	ck_assert_ptr_null(pending("r1"));
	/* approved once: the next request of the sandbox is held again */
	fake_free(&f);
	fake_new(&f, "sb-ok", "r1b");
	ck_assert_int_eq(ready(&f), XS_WAIT);
	fake_free(&f);
}
END_TEST

START_TEST(test_ask_stage_denied)
{
	struct fake	f;

	fake_new(&f, "sb-no", "r2");
	ck_assert_int_eq(ready(&f), XS_WAIT);
	ck_assert_int_eq(ask_decide(f.x.x_ask_id, 0, ASK_ONCE, 0, 0, NULL, 0),
	    0);
	ck_assert(woken(&f));
	ck_assert_int_eq(ready(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_APPROVAL_DENIED);
	ck_assert_str_eq(f.xc.xc_reason, "an operator denied the request");
	ck_assert_int_eq(aud_reason(f.xc.xc_why)->ri_status, 403);
	ck_assert_str_eq(aud_reason(f.xc.xc_why)->ri_code, "approval_denied");
	ck_assert_ptr_null(pending("r2"));
	fake_free(&f);
}
END_TEST

/* ask.timeout passed with no decision (by the clock, no thread). */
START_TEST(test_ask_stage_timeout)
{
	struct fake	f;

	fake_new(&f, "sb-late", "r3");
	f.cfg.c_ask_timeout_ms = 0;
	ck_assert_int_eq(ready(&f), XS_WAIT);
	ck_assert_uint_eq(f.xc.xc_wait_ms, SLACK_MS);
	usleep(2000);
	ck_assert_int_eq(ready(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_APPROVAL_TIMEOUT);
	ck_assert_str_eq(f.xc.xc_reason, "no operator decided within "
	    "ask.timeout");
	ck_assert_str_eq(aud_reason(f.xc.xc_why)->ri_code, "approval_timeout");
	fake_free(&f);
}
END_TEST

/* ask.max_pending: the sandbox's oldest hold gives way, and is told so. */
START_TEST(test_ask_stage_refused)
{
	struct fake	 a, b, other;
	json_object	*p;

	fake_new(&a, "sb-many", "r4a");
	fake_new(&b, "sb-many", "r4b");
	fake_new(&other, "sb-else", "r4c");
	a.cfg.c_ask_max_pending = b.cfg.c_ask_max_pending = 1;
	other.cfg.c_ask_max_pending = 1;
	ck_assert_int_eq(ready(&a), XS_WAIT);
	ck_assert_int_eq(ready(&other), XS_WAIT);
	ck_assert_int_eq(ready(&b), XS_WAIT);
	ck_assert(woken(&a));
	ck_assert(!woken(&other));	/* another sandbox's list */
	ck_assert(!woken(&b));
	ck_assert_int_eq(ready(&a), XS_DENY);
	ck_assert_int_eq(a.xc.xc_why, AUD_R_APPROVAL_DENIED);
	ck_assert_str_eq(a.xc.xc_reason, "too many requests of the sandbox "
	    "held for approval: the oldest was refused");
	ck_assert_ptr_nonnull(p = pending("r4b"));	/* still held */
	json_object_put(p);
	fake_free(&a);
	fake_free(&b);
	fake_free(&other);
}
END_TEST

/* A runtime rule left by a scoped approval answers without a hold. */
START_TEST(test_ask_stage_runtime_rule)
{
	struct fake	 f, g;
	char		 rule[32];

	fake_new(&f, "sb-rule", "r5");
	ck_assert_int_eq(ready(&f), XS_WAIT);
	ck_assert_int_eq(ask_decide(f.x.x_ask_id, 1, ASK_SANDBOX, 0, 0, rule,
	    sizeof(rule)), 0);
	ck_assert_int_eq(ready(&f), XS_GO);
	fake_free(&f);
	fake_new(&g, "sb-rule", "r6");
	ck_assert_int_eq(ready(&g), XS_GO);
	ck_assert_int_eq(g.x.x_ask, 0);
	ck_assert_uint_eq(g.x.x_ask_id, 0);
	ck_assert_int_eq(g.resumes, 0);		/* never held */
	ck_assert_ptr_null(pending("r6"));
	fake_free(&g);
	/* another port: not covered */
	fake_new(&g, "sb-rule", "r7");
	g.x.x_port = 8080;
	ck_assert_int_eq(ready(&g), XS_WAIT);
	fake_free(&g);
	ck_assert_int_eq(ask_rule_revoke(rule), 0);
	fake_new(&g, "sb-rule", "r8");
	ck_assert_int_eq(ready(&g), XS_WAIT);
	fake_free(&g);
}
END_TEST

/* No event to wait on (a tunnel's head, a driver without one): refused. */
START_TEST(test_ask_stage_cannot_hold)
{
	struct fake	f;

	fake_new(&f, "sb-tun", "r9");
	f.xc.xc_tunnel = 1;
	f.xc.xc_resume = NULL;
	ck_assert_int_eq(ready(&f), XS_DENY);
	ck_assert_int_eq(f.xc.xc_why, AUD_R_APPROVAL_DENIED);
	ck_assert_str_eq(f.xc.xc_reason, "approval required, and this request "
	    "cannot be held");
	ck_assert_uint_eq(f.x.x_ask_id, 0);
	ck_assert_ptr_null(pending("r9"));
	fake_free(&f);
}
END_TEST

/* A tunnel is held by host and port only: no path shown or kept. */
START_TEST(test_ask_stage_tunnel)
{
	struct fake	 f;
	json_object	*p;

	fake_new(&f, "sb-tun2", "r10");
	f.xc.xc_tunnel = 1;
	snprintf(f.x.x_method, sizeof(f.x.x_method), "CONNECT");
	ck_assert_int_eq(ready(&f), XS_WAIT);
	ck_assert_ptr_nonnull(p = pending("r10"));
	ck_assert_ptr_null(field(p, "path"));
	ck_assert_str_eq(field(p, "method"), "CONNECT");
	json_object_put(p);
	fake_free(&f);
}
END_TEST

Suite *
suite_stage_ask(void)
{
	Suite	*s = suite_create("stage_ask");
	TCase	*tc = tcase_create("fake exchange");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_ask_stage_not_held);
	tcase_add_test(tc, test_ask_stage_approved);
	tcase_add_test(tc, test_ask_stage_denied);
	tcase_add_test(tc, test_ask_stage_timeout);
	tcase_add_test(tc, test_ask_stage_refused);
	tcase_add_test(tc, test_ask_stage_runtime_rule);
	tcase_add_test(tc, test_ask_stage_cannot_hold);
	tcase_add_test(tc, test_ask_stage_tunnel);
	suite_add_tcase(s, tc);
	return s;
}
