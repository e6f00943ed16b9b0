/*
 * The stage walker: no event loop, no connection, so a fake exchange can
 * drive it (tests/unit/test_stage.c).
 */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "pipe/stage.h"

static enum xs_verdict
xs_call_hook(const struct xstage *s, enum xs_hook hook, struct xs_call *xc)
{
	enum xs_verdict	(*fn)(struct xs_call *) = NULL;

	switch (hook) {
	case XS_REQ_POLICY:
		fn = s->xs_req_policy;
		break;
	case XS_REQ_HEAD:
		fn = s->xs_req_head;
		break;
	case XS_DEST:
		fn = s->xs_dest;
		break;
	case XS_REQ_READY:
		fn = s->xs_req_ready;
		break;
	case XS_RESP_HEAD:
		fn = s->xs_resp_head;
		break;
	}
	return fn != NULL ? fn(xc) : XS_GO;
}

enum xs_verdict
xs_run(const struct xstage *const *tbl, enum xs_hook hook,
    struct xs_call *xc)
{
	enum xs_verdict	 v, out = XS_GO;
	size_t		 bound = (size_t)-1, i;

	xc->xc_why = AUD_R_NONE;
	xc->xc_close = 0;
	xc->xc_reason[0] = '\0';
	for (i = 0; i < xc->xc_at && tbl[i] != NULL; i++)
		;
	for (; tbl[i] != NULL; i++) {
		xc->xc_hold = 0;
		v = xs_call_hook(tbl[i], hook, xc);
		if (v == XS_HOLD && hook == XS_REQ_HEAD) {
			if (xc->xc_hold < bound)
				bound = xc->xc_hold;
			out = XS_HOLD;
			continue;
		}
		if (v == XS_WAIT)
			xc->xc_at = i;
		if (v != XS_GO && v != XS_HOLD)
			return v;
	}
	xc->xc_hold = out == XS_HOLD ? bound : 0;
	return out;
}

enum xs_verdict
xs_run_req_body(const struct xstage *const *tbl, struct xs_call *xc,
    const char *p, size_t len)
{
	struct evbuffer	*out = xc->xc_body_out, *spare = xc->xc_body_spare;
	struct evbuffer	*t;
	enum xs_verdict	 v = XS_GO;
	int		 rewrote = 0;

	for (; *tbl != NULL && v == XS_GO; tbl++) {
		xc->xc_pass = 0;
		xc->xc_rewrote = 0;
		if ((*tbl)->xs_req_body == NULL)
			continue;
		if (out != NULL)
			evbuffer_drain(out, evbuffer_get_length(out));
		/* no room: no stage may change the bytes */
		xc->xc_body_out = spare != NULL ? out : NULL;
		v = (*tbl)->xs_req_body(xc, p, len);
		if (!xc->xc_rewrote || xc->xc_body_out == NULL)
			continue;
		/* the later stages see what this one let through */
		len = evbuffer_get_length(out);
		p = len > 0 ? (const char *)evbuffer_pullup(out,
		    (ssize_t)len) : "";
		t = out;
		out = spare;
		spare = t;
		rewrote = 1;
	}
	xc->xc_rewrote = rewrote;
	/* what goes on, when a stage changed it */
	xc->xc_body_out = rewrote ? spare : NULL;
	return v;
}

enum xs_verdict
xs_run_filter(const struct xstage *const *tbl, enum xs_filter f,
    struct xs_call *xc, struct evbuffer *in, struct evbuffer *spare,
    struct evbuffer **res)
{
	enum xs_verdict	 (*fn)(struct xs_call *, struct evbuffer *,
			    struct evbuffer *);
	struct evbuffer	*cur = in, *next = spare, *t;
	enum xs_verdict	 out = XS_GO;
	enum aud_reason	 why = AUD_R_NONE, cut = AUD_R_NONE;
	char		 reason[sizeof(xc->xc_reason)];

	for (; *tbl != NULL; tbl++) {
		fn = f == XS_F_RESP_BODY ? (*tbl)->xs_resp_body :
		    (*tbl)->xs_resp_head_out;
		if (fn == NULL)
			continue;
		xc->xc_why = AUD_R_NONE;
		xc->xc_cut = AUD_R_NONE;
		xc->xc_reason[0] = '\0';
		if (fn(xc, cur, next) == XS_DENY && out == XS_GO) {
			/* the first refusal stands; the rest still filter */
			out = XS_DENY;
			why = xc->xc_why;
			cut = xc->xc_cut;
			memcpy(reason, xc->xc_reason, sizeof(reason));
		}
		if (evbuffer_get_length(next) == 0)
			continue;	/* observed (or kept all back) */
		/* what it left goes on after what it wrote */
		evbuffer_add_buffer(next, cur);
		t = cur;
		cur = next;
		next = t;
	}
	xc->xc_why = why;
	xc->xc_cut = cut;
	if (out == XS_DENY)
		memcpy(xc->xc_reason, reason, sizeof(reason));
	else
		xc->xc_reason[0] = '\0';
	*res = cur;
	return out;
}

void
xs_run_req_fields(const struct xstage *const *tbl, struct xs_call *xc)
{
	for (; *tbl != NULL; tbl++)
		if ((*tbl)->xs_req_fields != NULL)
			(*tbl)->xs_req_fields(xc);
}

unsigned
xs_run_quiet(const struct xstage *const *tbl, struct xs_call *xc)
{
	unsigned	has, want = 0;

	for (; *tbl != NULL; tbl++) {
		has = ((*tbl)->xs_resp_body != NULL ? XS_W_RESP_BODY : 0) |
		    ((*tbl)->xs_room != NULL ? XS_W_ROOM : 0) |
		    ((*tbl)->xs_flow != NULL ? XS_W_FLOW : 0);
		want |= (*tbl)->xs_watch != NULL ?
		    (*tbl)->xs_watch(xc) & has : has;
	}
	return XS_W_ALL & ~want;
}

int
xs_run_req_drop(const struct xstage *const *tbl, struct xs_call *xc,
    const char *name, size_t nlen)
{
	for (; *tbl != NULL; tbl++)
		if ((*tbl)->xs_req_drop != NULL &&
		    (*tbl)->xs_req_drop(xc, name, nlen))
			return 1;
	return 0;
}

void
xs_run_done(const struct xstage *const *tbl, struct xs_call *xc)
{
	for (; *tbl != NULL; tbl++)
		if ((*tbl)->xs_done != NULL)
			(*tbl)->xs_done(xc);
}

enum xs_verdict
xs_deny(struct xs_call *xc, enum aud_reason why, const char *fmt, ...)
{
	va_list	ap;

	xc->xc_why = why;
	va_start(ap, fmt);
	(void)vsnprintf(xc->xc_reason, sizeof(xc->xc_reason), fmt, ap);
	va_end(ap);
	return XS_DENY;
}

enum xs_verdict
xs_run_flow(const struct xstage *const *tbl, struct xs_call *xc)
{
	enum xs_verdict	v;
	uint64_t	at = UINT64_MAX;

	for (; *tbl != NULL; tbl++) {
		if ((*tbl)->xs_flow == NULL)
			continue;
		xc->xc_flow_at = 0;
		if ((v = (*tbl)->xs_flow(xc)) == XS_DENY)
			return v;
		if (xc->xc_flow_at < at)
			at = xc->xc_flow_at;
	}
	xc->xc_flow_at = at == UINT64_MAX ? 0 : at;
	return XS_GO;
}

size_t
xs_run_room(const struct xstage *const *tbl, struct xs_call *xc, int up)
{
	size_t	room = SIZE_MAX, n;

	for (; *tbl != NULL; tbl++)
		if ((*tbl)->xs_room != NULL &&
		    (n = (*tbl)->xs_room(xc, up)) < room)
			room = n;
	return room;
}
