/*
 * The driver of the stage table (pipe/stage.h) for HTTP/1 connections:
 * it lends each hook the exchange and what the connection knows, and is
 * the one that answers the client when a stage refuses. A refusal raised
 * inside the parser's callbacks (a request body chunk) is kept and
 * answered once the parser has returned (conn_pipe_pending), so no stage
 * ever answers from under llhttp.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/worker.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "sbx/sbx.h"
#include "secrets/sec.h"

static void
pipe_call(struct conn *c, struct xs_call *xc)
{
	xc->xc_x = c->c_x;
	xc->xc_cfg = c->c_cfg;
	xc->xc_policy = c->c_policy;
	xc->xc_sandbox = c->c_sbx != NULL ? c->c_sbx->sb_id : NULL;
	xc->xc_req = &c->c_req;
	xc->xc_resp = &c->c_resp;
	xc->xc_body = &c->c_r.r_body;
	xc->xc_scratch = c->c_worker->w_scratch2;
	xc->xc_tls = c->c_tls;
	xc->xc_upgrade = c->c_r.r_upgrade;
	xc->xc_tunnel = c->c_r.r_connect;
	xc->xc_rec = NULL;
	xc->xc_usage = NULL;
	xc->xc_dur_us = 0;
	xc->xc_resume = NULL;
	xc->xc_driver = c;
	xc->xc_at = 0;
	xc->xc_add_field = NULL;
	xc->xc_fields = NULL;
	xc->xc_why = AUD_R_NONE;
	xc->xc_close = 0;
	xc->xc_hold = 0;
	xc->xc_reason[0] = '\0';
}

/* The reason a stage gave, or its row's text when it gave none. */
static const char *
pipe_reason(const struct xs_call *xc)
{
	return xc->xc_reason[0] != '\0' ? xc->xc_reason :
	    aud_reason(xc->xc_why)->ri_text;
}

int
conn_pipe_req_head(struct conn *c, size_t *hold)
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	switch (xs_run(xs_table, XS_REQ_HEAD, &xc)) {
	case XS_GO:
		return 0;
	case XS_HOLD:
		*hold = xc.xc_hold;
		return 1;
	case XS_DENY:
	case XS_WAIT:	/* no stage waits on the head */
		break;
	}
	conn_deny(c, xc.xc_why, pipe_reason(&xc));
	return -1;
}

/* A stage that waited made the event active: walk on from it. */
static void
pipe_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn	*c = arg;
	void		(*next)(struct conn *) = c->c_r.r_wait_next;

	(void)fd;
	(void)what;
	if (c->c_closing || next == NULL)
		return;
	conn_enter(c);
	c->c_r.r_wait_next = NULL;
	if (conn_pipe_ready(c, next) == 0)
		next(c);
	conn_leave(c);
}

/* xc_resume: the connection's resume event, made the first time a stage
 * waits (most connections never need one). NULL: the stage blocks. */
static struct event *
pipe_resume_ev(struct xs_call *xc)
{
	struct conn	*c = xc->xc_driver;

	if (c->c_resume_ev == NULL)
		c->c_resume_ev = event_new(c->c_worker->w_base, -1, 0,
		    pipe_resume_cb, c);
	return c->c_resume_ev;
}

int
conn_pipe_ready(struct conn *c, void (*next)(struct conn *))
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	if (next != NULL) {
		xc.xc_resume = pipe_resume_ev;
		xc.xc_at = c->c_r.r_wait_at;
	}
	switch (xs_run(xs_table, XS_REQ_READY, &xc)) {
	case XS_GO:
		c->c_r.r_wait_at = 0;
		return 0;
	case XS_WAIT:
		c->c_r.r_wait_at = xc.xc_at;
		c->c_r.r_wait_next = next;
		c->c_state = CONN_WAIT;
		/* the same bound as resolving and connecting */
		conn_timer_arm(c, c->c_cfg->c_limits.l_connect_timeout_ms);
		return 1;
	case XS_DENY:
	case XS_HOLD:
		break;
	}
	c->c_r.r_wait_at = 0;
	conn_deny(c, xc.xc_why, pipe_reason(&xc));
	return -1;
}

void
conn_pipe_fini(struct conn *c)
{
	if (c->c_resume_ev == NULL)
		return;
	bud_led_unwatch(c->c_resume_ev);
	sec_store_unwatch(c->c_cfg->c_store, c->c_resume_ev);
	event_free(c->c_resume_ev);
	c->c_resume_ev = NULL;
}

int
conn_pipe_req_body(struct conn *c, const char *p, size_t len)
{
	struct xs_call	xc;

	if (c->c_r.r_pend_why != AUD_R_NONE)
		return -1;
	pipe_call(c, &xc);
	if (xs_run_req_body(xs_table, &xc, p, len) == XS_GO)
		return 0;
	c->c_r.r_pend_why = xc.xc_why;
	snprintf(c->c_r.r_pend_reason, sizeof(c->c_r.r_pend_reason), "%s",
	    pipe_reason(&xc));
	return -1;
}

int
conn_pipe_pending(struct conn *c)
{
	char	reason[sizeof(c->c_r.r_pend_reason)];

	if (c->c_r.r_pend_why == AUD_R_NONE)
		return 0;
	/* conn_upstream_failed() resets the request state it is read from */
	memcpy(reason, c->c_r.r_pend_reason, sizeof(reason));
	conn_upstream_failed(c, c->c_r.r_pend_why, reason);
	return 1;
}

int
conn_pipe_resp_head(struct conn *c)
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	if (xs_run(xs_table, XS_RESP_HEAD, &xc) == XS_GO)
		return 0;
	if (xc.xc_close)
		conn_reply_error(c, xc.xc_why, pipe_reason(&xc), 1);
	else
		conn_upstream_failed(c, xc.xc_why, pipe_reason(&xc));
	return -1;
}

/* xc_add_field for the request head being written (an evbuffer). */
static void
pipe_add_field(struct xs_call *xc, const char *name, const char *value)
{
	if (name[0] == '\0' || strpbrk(name, "\r\n: \t") != NULL ||
	    strpbrk(value, "\r\n") != NULL)
		return;
	evbuffer_add_printf(xc->xc_fields, "%s: %s\r\n", name, value);
}

void
conn_pipe_req_fields(struct conn *c, struct evbuffer *out)
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	xc.xc_add_field = pipe_add_field;
	xc.xc_fields = out;
	xs_run_req_fields(xs_table, &xc);
}

void
conn_pipe_resp_body(struct conn *c, const char *p, size_t len)
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	xs_run_resp_body(xs_table, &xc, p, len);
}

void
conn_pipe_done(struct conn *c, struct aud_rec *r, struct usage *u,
    uint64_t dur_us)
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	c->c_x->x_resp_done = c->c_r.r_resp_done;
	xc.xc_rec = r;
	xc.xc_usage = u;
	xc.xc_dur_us = dur_us;
	xs_run_done(xs_table, &xc);
}
