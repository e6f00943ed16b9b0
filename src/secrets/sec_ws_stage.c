/*
 * The secrets stage's part in an upgraded connection (sec_stage.c calls
 * it for the bytes after a 101): frames parsed both ways (sec_ws.c) when
 * any secret has a placeholder; a placeholder that may not go where the
 * frames go closes the connection with 1008, both ways, and is audited.
 * Sec-WebSocket-Extensions is left out of the upgrade so that nothing is
 * compressed (permessage-deflate would hide a placeholder, or a reflected
 * secret, from the scanners).
 */
#include "config.h"

#include <strings.h>

#include <event2/buffer.h>

#include "cfg/cfg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "secrets/sec_req.h"
#include "secrets/sec_ws.h"
#include "util/util.h"

#define WS_STATE_PARSED	1
#define WS_STATE_RAW	2
#define WS_STATE_CLOSED	3

int
sec_ws_req_drop(struct xs_call *xc, const char *name, size_t nlen)
{
	return xc->xc_upgrade && util_strncaseeq(name, nlen,
	    "sec-websocket-extensions") && sec_ws_watch(xc->xc_cfg);
}

static void
ws_setup(struct xs_call *xc)
{
	struct xchg_secrets	*s = &xc->xc_x->x_sec;
	struct sec_body		*sb;
	struct sec_trip		*td, *tc;
	struct sec_scan		*reflect;

	if (s->s_ws_on != 0)
		return;
	s->s_ws_on = WS_STATE_RAW;
	if (!sec_ws_watch(xc->xc_cfg))
		return;
	sb = sec_ws_subst_new(&s->s_req, xc->xc_cfg, xc->xc_x->x_host,
	    xc->xc_tls);
	td = sec_ws_trip_new(xc->xc_cfg, xc->xc_x->x_host, xc->xc_tls);
	tc = sec_ws_trip_new(xc->xc_cfg, xc->xc_x->x_host, xc->xc_tls);
	if (sb != NULL || td != NULL) {
		s->s_ws[1] = sec_ws_new(1);
		sec_ws_set_subst(s->s_ws[1], sb);
		sec_ws_set_trip(s->s_ws[1], td, tc);
	}
	if ((reflect = sec_req_reflector(s->s_req)) != NULL) {
		s->s_ws[0] = sec_ws_new(0);
		sec_ws_set_reflect(s->s_ws[0], reflect);
	}
	s->s_ws_on = WS_STATE_PARSED;
}

/* Audit: the secrets whose placeholders the frames had. */
static void
ws_mark(struct xchg *x)
{
	const struct sec_body	*sb = sec_ws_subst(x->x_sec.s_ws[1]);
	const char		*name;
	size_t			 i;

	for (i = 0; i < sec_body_count(sb); i++)
		if (sec_body_hits(sb, i, &name) > 0)
			sec_req_mark(x->x_sec.s_req, name, CFG_PH_WS);
}

/* Close both ways with <code>; the connection ends once they are sent. */
static enum xs_verdict
ws_close(struct xs_call *xc, uint16_t code, enum aud_reason why,
    const char *text)
{
	struct xchg	*x = xc->xc_x;

	x->x_sec.s_ws_on = WS_STATE_CLOSED;
	sec_ws_close_frame(1, code, text, xc->xc_body_out);
	if (xc->xc_back != NULL)
		sec_ws_close_frame(0, code, text, xc->xc_back);
	xc->xc_pass = evbuffer_get_length(xc->xc_body_out);
	xc->xc_rewrote = 1;
	xc->xc_cut_whole = 1;
	if (why == AUD_R_WS_SECRET_MISUSE) {
		x->x_allowed = 0;
		return xs_deny(xc, why, "a secret's placeholder was sent in a "
		    "WebSocket frame towards %s, where it is not replaced "
		    "(not bound to it, placeholder_in without ws, or plain "
		    "HTTP): closed with 1008", x->x_host);
	}
	return xs_deny(xc, why, "the client's WebSocket frames broke RFC 6455 "
	    "(or used an extension): closed with 1002");
}

enum xs_verdict
sec_ws_req_body(struct xs_call *xc, const char *p, size_t len)
{
	struct xchg_secrets	*s = &xc->xc_x->x_sec;

	if (!xc->xc_upgrade)
		return XS_GO;		/* a CONNECT splice: not frames */
	ws_setup(xc);
	if (s->s_ws_on == WS_STATE_CLOSED && xc->xc_body_out != NULL) {
		xc->xc_rewrote = 1;	/* nothing after the close */
		return XS_GO;
	}
	if (s->s_ws[1] == NULL)
		return XS_GO;
	if (xc->xc_body_out == NULL)
		/* bytes that cannot be rewritten cannot be parsed */
		return xs_deny(xc, AUD_R_CUT, "WebSocket frames towards a "
		    "secret's host could not be rewritten");
	switch (sec_ws_feed(s->s_ws[1], p, len, xc->xc_body_out)) {
	case SEC_WS_OK:
		xc->xc_rewrote = 1;
		ws_mark(xc->xc_x);
		return XS_GO;
	case SEC_WS_MISUSE:
		return ws_close(xc, 1008, AUD_R_WS_SECRET_MISUSE,
		    "airlock: secret_misuse");
	default:
		return ws_close(xc, 1002, AUD_R_CUT,
		    "airlock: protocol error");
	}
}

enum xs_verdict
sec_ws_resp_body(struct xs_call *xc, struct evbuffer *in,
    struct evbuffer *out)
{
	struct xchg_secrets	*s = &xc->xc_x->x_sec;
	struct evbuffer_iovec	 v[8];
	size_t			 taken;
	int			 i, n;

	if (!xc->xc_upgrade)
		return XS_GO;
	ws_setup(xc);
	if (s->s_ws_on == WS_STATE_CLOSED) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return XS_GO;
	}
	if (s->s_ws[0] == NULL)
		return XS_GO;
	while (evbuffer_get_length(in) > 0 &&
	    (n = evbuffer_peek(in, -1, NULL, v, 8)) > 0) {
		taken = 0;
		for (i = 0; i < n && i < 8; i++) {
			if (sec_ws_feed(s->s_ws[0], v[i].iov_base,
			    v[i].iov_len, out) != SEC_WS_OK) {
				evbuffer_drain(in, evbuffer_get_length(in));
				s->s_ws_on = WS_STATE_CLOSED;
				xc->xc_cut = AUD_R_CUT;
				return xs_deny(xc, AUD_R_CUT, "the upstream's "
				    "WebSocket frames broke RFC 6455 (or used "
				    "an extension)");
			}
			taken += v[i].iov_len;
		}
		evbuffer_drain(in, taken);
	}
	return XS_GO;
}
