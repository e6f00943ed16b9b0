/*
 * The stage walker: no libevent, no connection, so a fake exchange can
 * drive it (tests/unit/test_stage.c).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "pipe/stage.h"

static enum xs_verdict
xs_call_hook(const struct xstage *s, enum xs_hook hook, struct xs_call *xc)
{
	enum xs_verdict	(*fn)(struct xs_call *) = NULL;

	switch (hook) {
	case XS_REQ_HEAD:
		fn = s->xs_req_head;
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
	enum xs_verdict	v;

	for (; *tbl != NULL; tbl++)
		if ((*tbl)->xs_req_body != NULL &&
		    (v = (*tbl)->xs_req_body(xc, p, len)) != XS_GO)
			return v;
	return XS_GO;
}

void
xs_run_resp_body(const struct xstage *const *tbl, struct xs_call *xc,
    const char *p, size_t len)
{
	for (; *tbl != NULL; tbl++)
		if ((*tbl)->xs_resp_body != NULL)
			(*tbl)->xs_resp_body(xc, p, len);
}

void
xs_run_req_fields(const struct xstage *const *tbl, struct xs_call *xc)
{
	for (; *tbl != NULL; tbl++)
		if ((*tbl)->xs_req_fields != NULL)
			(*tbl)->xs_req_fields(xc);
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
