/*
 * The driver of the stage table (pipe/stage.h) for HTTP/1 connections:
 * it lends each hook the exchange and what the connection knows, and is
 * the one that answers the client when a stage refuses. A refusal raised
 * inside the parser's callbacks (a request body chunk) is kept and
 * answered once the parser has returned (conn_pipe_pending), so no stage
 * ever answers from under llhttp.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_internal.h"
#include "conn/worker.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "policy/pol_ask.h"
#include "sbx/sbx.h"
#include "sbx/sbx_fleet.h"
#include "secrets/sec.h"
#include "util/log.h"

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
	xc->xc_tunnel = c->c_r.r_connect || c->c_state == CONN_TUNNEL;
	xc->xc_eof = 0;
	xc->xc_body_out = NULL;
	xc->xc_body_spare = NULL;
	xc->xc_rewrote = 0;
	xc->xc_back = NULL;
	xc->xc_addrs = NULL;
	xc->xc_naddrs = 0;
	xc->xc_intercept = 0;
	xc->xc_cut = AUD_R_NONE;
	xc->xc_cut_whole = 0;
	xc->xc_reframe = 0;
	xc->xc_rec = NULL;
	xc->xc_usage = NULL;
	xc->xc_dur_us = 0;
	xc->xc_flow_at = 0;
	xc->xc_resume = NULL;
	xc->xc_driver = c;
	xc->xc_at = 0;
	xc->xc_add_field = NULL;
	xc->xc_fields = NULL;
	xc->xc_why = AUD_R_NONE;
	xc->xc_close = 0;
	xc->xc_hold = 0;
	xc->xc_wait_ms = 0;
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
conn_pipe_policy(struct conn *c, int *intercept)
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	if (xs_run(xs_table, XS_REQ_POLICY, &xc) == XS_GO) {
		*intercept = xc.xc_intercept;
		return 0;
	}
	if (xc.xc_close)
		conn_reply_error(c, xc.xc_why, pipe_reason(&xc), 1);
	else if (c->c_r.r_connect && xc.xc_why == AUD_R_DENIED)
		conn_connect_denied(c, pipe_reason(&xc));  /* 403 inside TLS */
	else
		conn_deny(c, xc.xc_why, pipe_reason(&xc));
	return -1;
}

int
conn_pipe_dest(struct conn *c, const struct net_addr *addrs, size_t naddrs)
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	xc.xc_addrs = addrs;
	xc.xc_naddrs = naddrs;
	if (xs_run(xs_table, XS_DEST, &xc) == XS_GO)
		return 0;
	conn_deny(c, xc.xc_why, pipe_reason(&xc));
	return -1;
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
	if (c->c_r.r_ident_wait && !c->c_closing) {
		conn_ref(c);
		c->c_r.r_ident_wait = 0;
		conn_ident_resume(c);
		conn_unref(c);
		return;
	}
	if (c->c_r.r_room_wait && !c->c_closing) {
		conn_ref(c);
		conn_room_resume(c);
		conn_unref(c);
		return;
	}
	if (c->c_closing || next == NULL)
		return;
	conn_ref(c);
	c->c_r.r_wait_next = NULL;
	if (conn_pipe_ready(c, next) == 0)
		next(c);
	conn_unref(c);
}

/* xc_resume: the connection's resume event, made the first time a stage
 * waits (most connections never need one). */
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
conn_pipe_ident_wait(struct conn *c, const char *id)
{
	struct xs_call	xc;
	struct event	*ev;

	pipe_call(c, &xc);
	if (!sbx_fleet_on() || (ev = pipe_resume_ev(&xc)) == NULL ||
	    sbx_fleet_watch(id, ev) == -1)
		return -1;
	c->c_r.r_ident_wait = 1;
	c->c_state = CONN_WAIT;
	conn_timer_arm(c, c->c_cfg->c_limits.l_store_timeout_ms);
	return 0;
}

int
conn_pipe_ready(struct conn *c, void (*next)(struct conn *))
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	/* a stage never blocks the worker: it waits, and <next> follows */
	xc.xc_resume = pipe_resume_ev;
	xc.xc_at = c->c_r.r_wait_at;
	switch (xs_run(xs_table, XS_REQ_READY, &xc)) {
	case XS_GO:
		c->c_r.r_wait_at = 0;
		return 0;
	case XS_WAIT:
		c->c_r.r_wait_at = xc.xc_at;
		c->c_r.r_wait_next = next;
		c->c_state = CONN_WAIT;
		/* the stage's bound, else that of resolving and connecting */
		conn_timer_arm(c, xc.xc_wait_ms != 0 ? xc.xc_wait_ms :
		    c->c_cfg->c_limits.l_connect_timeout_ms);
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
	sbx_fleet_unwatch(c->c_resume_ev);
	ask_unwatch(c->c_resume_ev);
	sec_store_unwatch(c->c_cfg->c_store, c->c_resume_ev);
	event_free(c->c_resume_ev);
	c->c_resume_ev = NULL;
}

/*
 * A stage ended the exchange while it streamed: as a refusal when it
 * gave no cut reason (the upstream is let go; the client gets the answer
 * or, once it began, a cut), else a 402-like answer while nothing went
 * back yet, or a cut audited with the cut's text.
 */
static void
pipe_end(struct conn *c, enum aud_reason why, const char *reason,
    enum aud_reason cut)
{
	if (cut == AUD_R_NONE) {
		conn_upstream_failed(c, why, reason);
		return;
	}
	if (!c->c_r.r_resp_started && !c->c_r.r_connect_replied) {
		conn_reply_error(c, why, reason, 1);
		return;
	}
	log_info("%s: sandbox %s: %s: cut", c->c_client,
	    c->c_sbx != NULL ? c->c_sbx->sb_id : "-", reason);
	conn_cut(c, aud_reason(cut)->ri_text);
}

/* Keep a refusal raised inside the parser for conn_pipe_pending(). */
static void
pipe_keep(struct conn *c, const struct xs_call *xc)
{
	if (c->c_r.r_pend_why != AUD_R_NONE)
		return;
	c->c_r.r_pend_why = xc->xc_why != AUD_R_NONE ? xc->xc_why :
	    AUD_R_UPSTREAM_UNREACHABLE;
	c->c_r.r_pend_cut = xc->xc_cut;
	c->c_r.r_pend_whole = xc->xc_cut_whole;
	snprintf(c->c_r.r_pend_reason, sizeof(c->c_r.r_pend_reason), "%s",
	    pipe_reason(xc));
}

int
conn_pipe_req_body(struct conn *c, const char **p, size_t *len, int eof,
    size_t *pass)
{
	struct xs_call	xc;
	enum xs_verdict	v;

	*pass = 0;
	if (c->c_r.r_pend_why != AUD_R_NONE)
		return -1;
	pipe_call(c, &xc);
	xc.xc_eof = eof;
	xc.xc_body_out = c->c_worker->w_filt[0];
	xc.xc_body_spare = c->c_worker->w_filt[1];
	v = xs_run_req_body(xs_table, &xc, *p, *len);
	if (xc.xc_rewrote) {
		*len = evbuffer_get_length(xc.xc_body_out);
		*p = *len > 0 ? (const char *)evbuffer_pullup(xc.xc_body_out,
		    (ssize_t)*len) : "";
	}
	if (v == XS_GO)
		return 0;
	*pass = xc.xc_pass < *len ? xc.xc_pass : *len;
	pipe_keep(c, &xc);
	return -1;
}

void
conn_pipe_req_body_end(struct conn *c)
{
	struct evbuffer	*b;
	int		 i;

	/* the filters expect them empty */
	for (i = 0; i < 2; i++)
		if (evbuffer_get_length(b = c->c_worker->w_filt[i]) > 0)
			evbuffer_drain(b, evbuffer_get_length(b));
}

int
conn_pipe_pending(struct conn *c)
{
	char		reason[sizeof(c->c_r.r_pend_reason)];
	enum aud_reason	why = c->c_r.r_pend_why, cut = c->c_r.r_pend_cut;

	if (why == AUD_R_NONE)
		return 0;
	/* conn_upstream_failed() resets the request state it is read from */
	memcpy(reason, c->c_r.r_pend_reason, sizeof(reason));
	if (c->c_r.r_pend_whole && cut != AUD_R_NONE &&
	    c->c_r.r_resp_started && !c->c_r.r_resp_done) {
		/* the stage ended the body itself (an error event): it goes
		   out whole, then the connections close */
		if (c->c_r.r_rechunk) {
			evbuffer_add(c->c_pend, "0\r\n\r\n", 5);
			c->c_x->x_bytes_in += 5;
		}
		c->c_r.r_resp_done = 1;
		conn_client_flush(c);
	}
	pipe_end(c, why, reason, cut);
	return 1;
}

int
conn_pipe_resp_head(struct conn *c)
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	if (xs_run(xs_table, XS_RESP_HEAD, &xc) == XS_GO) {
		c->c_r.r_reframe = xc.xc_reframe;
		c->c_x->x_quiet = xs_run_quiet(xs_table, &xc);
		return 0;
	}
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

int
conn_pipe_req_drop(struct conn *c, const char *name, size_t nlen)
{
	struct xs_call	xc;

	pipe_call(c, &xc);
	return xs_run_req_drop(xs_table, &xc, name, nlen);
}

void
conn_pipe_resp_head_out(struct conn *c, struct evbuffer *head,
    struct evbuffer *out)
{
	struct xs_call	 xc;
	struct evbuffer	*res, *spare = c->c_worker->w_filt[1];

	pipe_call(c, &xc);
	(void)xs_run_filter(xs_table, XS_F_RESP_HEAD_OUT, &xc, head, spare,
	    &res);
	evbuffer_add_buffer(out, res);
}

int
conn_pipe_resp_body(struct conn *c, const char *p, size_t len, int eof)
{
	struct xs_call	 xc;
	struct evbuffer	*in = c->c_worker->w_filt[0];
	struct evbuffer	*spare = c->c_worker->w_filt[1], *res;
	enum xs_verdict	 v;
	size_t		 n;

	if (c->c_r.r_pend_why != AUD_R_NONE)
		return -1;	/* ended already: nothing more goes out */
	if (c->c_x->x_quiet & XS_W_RESP_BODY) {
		/* no stage reads this body: straight on */
		if (len > 0)
			conn_body_out(c, c->c_bev, p, len, c->c_r.r_rechunk,
			    &c->c_x->x_bytes_in);
		return 0;
	}
	pipe_call(c, &xc);
	xc.xc_eof = eof;
	/* the parser's bytes, not copied: they go out before it returns */
	if (len > 0)
		evbuffer_add_reference(in, p, len, NULL, NULL);
	v = xs_run_filter(xs_table, XS_F_RESP_BODY, &xc, in, spare, &res);
	if ((n = evbuffer_get_length(res)) > 0)
		conn_body_out(c, c->c_bev, (const char *)evbuffer_pullup(res,
		    (ssize_t)n), n, c->c_r.r_rechunk, &c->c_x->x_bytes_in);
	evbuffer_drain(res, n);
	if (v == XS_GO)
		return 0;
	pipe_keep(c, &xc);
	return -1;
}

int
conn_pipe_tunnel(struct conn *c, int up, struct evbuffer *in,
    struct evbuffer *out, uint64_t *count)
{
	struct xs_call		 xc;
	struct evbuffer		*spare = c->c_worker->w_filt[1], *res;
	struct evbuffer		*from = in;
	struct evbuffer_iovec	 v[8];
	enum xs_verdict		 r = XS_GO;
	size_t			 n, ok = 0, pass, used, room;
	int			 i, k;

	if ((room = conn_pipe_room(c, up)) == 0)
		return 1;
	pipe_call(c, &xc);
	xc.xc_tunnel = 1;
	if (up) {
		/* towards the upstream: each piece through req_body, which
		   may change it (WebSocket frames, sec_ws_stage.c), as far
		   as the stages' room goes */
		xc.xc_back = bufferevent_get_output(c->c_bev);
		while (r == XS_GO && room > 0 && (k = evbuffer_peek(in,
		    room == SIZE_MAX ? -1 : (ssize_t)room, NULL, v, 8)) > 0) {
			used = 0;
			for (i = 0; i < k && i < 8 && r == XS_GO; i++) {
				if (v[i].iov_len > room)
					v[i].iov_len = room;
				if (room != SIZE_MAX)
					room -= v[i].iov_len;
				xc.xc_body_out = c->c_worker->w_filt[0];
				xc.xc_body_spare = spare;
				r = xs_run_req_body(xs_table, &xc,
				    v[i].iov_base, v[i].iov_len);
				n = xc.xc_rewrote ? evbuffer_get_length(
				    xc.xc_body_out) : v[i].iov_len;
				pass = r == XS_GO || xc.xc_pass > n ? n :
				    xc.xc_pass;
				if (xc.xc_rewrote)
					evbuffer_remove_buffer(xc.xc_body_out,
					    out, pass);
				else
					evbuffer_add(out, v[i].iov_base, pass);
				ok += pass;
				used += v[i].iov_len;
				conn_pipe_req_body_end(c);
			}
			evbuffer_drain(in, used);
		}
		*count += ok;
	} else {
		if (room < evbuffer_get_length(in)) {
			/* what the room takes; the rest waits in <in> */
			from = c->c_worker->w_filt[0];
			evbuffer_remove_buffer(in, from, room);
		}
		r = xs_run_filter(xs_table, XS_F_RESP_BODY, &xc, from, spare,
		    &res);
		*count += evbuffer_get_length(res);
		evbuffer_add_buffer(out, res);
	}
	if (r == XS_GO)
		return evbuffer_get_length(in) > 0 &&
		    conn_pipe_room(c, up) == 0 ? 1 : 0;
	n = evbuffer_get_length(in);
	evbuffer_drain(in, n);
	if (up && xc.xc_cut_whole) {
		/* the stage ended it (a WebSocket close, both ways): what
		   went out is written, then the tunnel closes */
		conn_tunnel_end(c, xc.xc_why, pipe_reason(&xc));
		return -1;
	}
	pipe_end(c, xc.xc_why, pipe_reason(&xc), xc.xc_cut);
	return -1;
}

size_t
conn_pipe_room(struct conn *c, int up)
{
	struct xs_call	xc;
	size_t		room;

	if (c->c_closing || c->c_x == NULL || !c->c_x->x_active ||
	    (c->c_x->x_quiet & XS_W_ROOM))
		return SIZE_MAX;
	pipe_call(c, &xc);
	if ((room = xs_run_room(xs_table, &xc, up)) == 0)
		c->c_r.r_room_wait |= up ? 2 : 1;
	return room;
}

void
conn_pipe_flow(struct conn *c)
{
	struct xs_call	 xc;
	struct xchg	*x = c->c_x;

	if (c->c_closing || x == NULL || !x->x_active ||
	    (x->x_quiet & XS_W_FLOW) ||
	    x->x_bytes_in + x->x_bytes_out < x->x_flow_at)
		return;
	pipe_call(c, &xc);
	if (xs_run_flow(xs_table, &xc) == XS_DENY)
		pipe_end(c, xc.xc_why, pipe_reason(&xc), xc.xc_cut);
	else
		x->x_flow_at = xc.xc_flow_at;
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
