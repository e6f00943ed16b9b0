/*
 * The secrets stage (pipe/stage.h): placeholders resolved and injected
 * on the request head (misuse refused), the body held when SigV4 signs
 * it, the body watched for placeholders of secrets not bound to its host
 * (the tripwire), a response to a request towards a secret's hosts
 * refused when it could carry the secret past the scanner, and what a
 * secret went out with redacted from the response (its head as one
 * piece, its body as it streams): a secret that went out never comes
 * back to the sandbox.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

#include "cfg/cfg.h"
#include "http/http_msg.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "secrets/sec.h"
#include "secrets/sec_req.h"
#include "secrets/sec_ws.h"
#include "util/util.h"

/* Does any field <name> of <m> hold <token> (case-insensitive)? */
static int
field_has(const struct http_msg *m, const char *name, const char *token)
{
	const char	*v;
	size_t		 vlen, tlen = strlen(token), k;
	int		 i;

	for (i = 0; (i = http_msg_find(m, name, i)) != -1; i++) {
		v = http_msg_str(m, m->hm_hdrs[i].h_value);
		vlen = m->hm_hdrs[i].h_value_len;
		for (k = 0; k + tlen <= vlen; k++)
			if (strncasecmp(v + k, token, tlen) == 0)
				return 1;
	}
	return 0;
}

/* Any content coding but identity? */
static int
encoded(const struct http_msg *m)
{
	const char	*v;
	size_t		 vlen;
	int		 i;

	for (i = 0; (i = http_msg_find(m, "content-encoding", i)) != -1;
	    i++) {
		http_msg_value(m, i, &v, &vlen);
		if (vlen > 0 && !util_strncaseeq(v, vlen, "identity"))
			return 1;
	}
	return 0;
}

/* Arm the tripwire (placeholders of secrets not bound to the host) when
 * the request has a body. */
static void
trip_setup(struct xs_call *xc)
{
	xc->xc_x->x_sec.s_trip = sec_trip_body_new(xc->xc_cfg,
	    xc->xc_x->x_host, xc->xc_tls);
}

static int
has_body(const struct http_msg *m)
{
	return !(m->hm_framing == HTTP_BODY_NONE || (m->hm_framing ==
	    HTTP_BODY_LENGTH && m->hm_content_length == 0));
}

/* The body's kind, from its Content-Type. */
static int
body_kind(const struct http_msg *m)
{
	const char	*v;
	size_t		 vlen;
	int		 i;

	if ((i = http_msg_find(m, "content-type", 0)) == -1)
		return SEC_BODY_RAW;
	http_msg_value(m, i, &v, &vlen);
	return sec_body_kind(v, vlen);
}

/* Resolve the request's secrets; XS_WAIT: a token is being minted. */
static enum xs_verdict
sec_prepare(struct xs_call *xc)
{
	struct xchg		*x = xc->xc_x;
	struct sec_facts	 f;

	f.sf_cfg = xc->xc_cfg;
	f.sf_rule = x->x_rule_p;
	f.sf_msg = xc->xc_req;
	f.sf_host = x->x_host;
	f.sf_path = x->x_path;
	f.sf_query = x->x_query;
	f.sf_tls = xc->xc_tls;	/* the upstream handshake verifies */
	f.sf_wait_idx = 0;
	f.sf_body_kind = x->x_sec.s_body_want && x->x_sec.s_body == NULL ?
	    body_kind(xc->xc_req) : -1;
	switch (sec_req_prepare(&f, &x->x_sec.s_req, xc->xc_reason,
	    sizeof(xc->xc_reason))) {
	case SEC_OK:
		if (f.sf_body != NULL)
			x->x_sec.s_body = f.sf_body;
		break;
	case SEC_WAIT:
		x->x_sec.s_wait = f.sf_wait_idx + 1;
		return XS_WAIT;
	case SEC_MISUSE:
		x->x_allowed = 0;
		xc->xc_why = AUD_R_SECRET_MISUSE;
		return XS_DENY;
	case SEC_ERROR:
		xc->xc_why = AUD_R_SECRET_UNAVAILABLE;
		return XS_DENY;
	}
	/* frames after a 101: sec_ws_stage.c */
	return XS_GO;
}

static enum xs_verdict
sec_req_head(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;
	enum xs_verdict	 v;

	if (has_body(xc->xc_req))
		trip_setup(xc);
	if (has_body(xc->xc_req) && sec_body_wanted(xc->xc_cfg, x->x_host,
	    xc->xc_tls)) {
		/* compressed bytes could carry a placeholder past us */
		if (encoded(xc->xc_req))
			return xs_deny(xc, AUD_R_ENCODED_BODY_REFUSED,
			    "compressed request body (Content-Encoding) "
			    "towards %s, where placeholders are replaced in "
			    "bodies: it could not be scanned", x->x_host);
		/* a declared length within body_bytes is held and goes
		   with its new length, else the body goes chunked */
		if (xc->xc_req->hm_framing == HTTP_BODY_LENGTH &&
		    xc->xc_req->hm_content_length <=
		    xc->xc_cfg->c_limits.l_body_bytes)
			x->x_sec.s_body_want = 2;
		else {
			x->x_sec.s_body_want = 1;
			x->x_req_reframe = 1;
		}
	}
	if ((v = sec_prepare(xc)) == XS_WAIT)
		/* the head cannot wait: req_ready does, before anything
		 * goes upstream (a minted token is never SigV4) */
		return XS_GO;
	if (v != XS_GO)
		return v;
	if (x->x_sec.s_body_want == 2 || (x->x_sec.s_req != NULL &&
	    x->x_sec.s_req->sr_need_body)) {
		/* SigV4 signs the body, or its placeholders change its
		   length: hold it whole */
		xc->xc_hold = (size_t)xc->xc_cfg->c_limits.l_body_bytes;
		return XS_HOLD;
	}
	return XS_GO;
}

/* Audit: the secrets whose placeholders the body had. */
static void
body_mark(struct xchg *x)
{
	const char	*name;
	size_t		 i;

	for (i = 0; i < sec_body_count(x->x_sec.s_body); i++)
		if (sec_body_hits(x->x_sec.s_body, i, &name) > 0)
			sec_req_mark(x->x_sec.s_req, name, CFG_PH_BODY);
}

/*
 * The body was held before its substitution could be made (a token was
 * being minted): it goes through it whole now.
 */
static void
body_late(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;
	struct evbuffer	*nb, *held;
	size_t		 n;
	char		*p;

	if (!x->x_sec.s_body_late || x->x_sec.s_body == NULL ||
	    xc->xc_body == NULL || (held = *xc->xc_body) == NULL)
		return;
	x->x_sec.s_body_late = 0;
	nb = evbuffer_new();
	n = evbuffer_get_length(held);
	p = n > 0 ? (char *)evbuffer_pullup(held, (ssize_t)n) : NULL;
	sec_body_feed(x->x_sec.s_body, p, n, 1, nb);
	if (n > 0)
		OPENSSL_cleanse(p, n);
	evbuffer_free(held);
	*xc->xc_body = nb;
	body_mark(x);
}

/*
 * A token broker secret had no token yet at the head: wait for the mint
 * (the store makes the resume event active), then resolve again.
 */
static enum xs_verdict
sec_req_ready(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;
	struct sec_store *ss = xc->xc_cfg->c_store;
	struct event	*ev;
	size_t		 idx;
	enum xs_verdict	 v;

	while (x->x_sec.s_wait != 0) {
		idx = x->x_sec.s_wait - 1;
		if (xc->xc_resume != NULL && (ev = xc->xc_resume(xc)) != NULL) {
			if (sec_store_watch(ss, idx, ev) == 0) {
				x->x_sec.s_wait_ev = ev;
				return XS_WAIT;
			}
		} else
			sec_store_wait(ss, idx, xc->xc_cfg->c_limits.
			    l_connect_timeout_ms);
		x->x_sec.s_wait = 0;
		if ((v = sec_prepare(xc)) == XS_WAIT && xc->xc_resume == NULL &&
		    sec_store_pending(ss, x->x_sec.s_wait - 1))
			return xs_deny(xc, AUD_R_SECRET_UNAVAILABLE, "secret "
			    "\"%s\": no token minted in time",
			    xc->xc_cfg->c_secrets[x->x_sec.s_wait - 1].sc_name);
		if (v != XS_GO && v != XS_WAIT)
			return v;
	}
	body_late(xc);
	return XS_GO;
}

static enum xs_verdict
sec_req_body(struct xs_call *xc, const char *p, size_t len)
{
	struct xchg	*x = xc->xc_x;
	struct evbuffer	*held;
	size_t		 n;

	if (xc->xc_tunnel)
		return sec_ws_req_body(xc, p, len);
	if (x->x_sec.s_body == NULL && x->x_sec.s_body_want && len > 0)
		x->x_sec.s_body_late = 1;	/* held: replaced at req_ready */
	if (x->x_sec.s_trip == NULL ||
	    !sec_trip_feed(x->x_sec.s_trip, p, len, xc->xc_scratch)) {
		if (xc->xc_body_out == NULL)
			return XS_GO;
		if (x->x_sec.s_trip != NULL) {
			/* nothing of a placeholder leaves before it is seen
			   whole: the bytes that could begin one wait */
			held = x->x_sec.s_body != NULL ? xc->xc_scratch :
			    xc->xc_body_out;
			evbuffer_drain(held, evbuffer_get_length(held));
			n = sec_trip_hold(x->x_sec.s_trip, p, len, xc->xc_eof,
			    held);
			xc->xc_rewrote = 1;
			if (x->x_sec.s_body == NULL)
				return XS_GO;
			p = n > 0 ? (const char *)evbuffer_pullup(held,
			    (ssize_t)n) : "";
			len = n;
		}
		if (x->x_sec.s_body == NULL)
			return XS_GO;
		sec_body_feed(x->x_sec.s_body, p, len, xc->xc_eof,
		    xc->xc_body_out);
		if (x->x_sec.s_trip != NULL)
			evbuffer_drain(xc->xc_scratch,
			    evbuffer_get_length(xc->xc_scratch));
		xc->xc_rewrote = 1;
		if (xc->xc_eof)
			body_mark(x);
		return XS_GO;
	}
	x->x_allowed = 0;
	if (sec_host_bound(xc->xc_cfg, x->x_host))
		return xs_deny(xc, AUD_R_SECRET_MISUSE, "a secret's placeholder "
		    "was sent in the request body towards %s, where it is not "
		    "replaced (another secret's host, placeholder_in without "
		    "body, or plain HTTP)", x->x_host);
	return xs_deny(xc, AUD_R_SECRET_MISUSE, "a secret's placeholder was "
	    "sent in the request body towards %s, which it is not bound to",
	    x->x_host);
}

static enum xs_verdict
sec_resp_head(struct xs_call *xc)
{
	const struct sec_req	*sr = xc->xc_x->x_sec.s_req;
	const struct http_msg	*m = xc->xc_resp;

	if (sr == NULL || sr->sr_reflect == NULL)
		return XS_GO;
	/* we asked for Accept-Encoding: identity; compressed anyway would
	   carry a reflected secret past the scanner */
	if (encoded(m))
		return xs_deny(xc, AUD_R_UPSTREAM_ENCODED_BODY, "upstream "
		    "sent an encoded body for a request towards a secret's "
		    "host (it could not be scanned)");
	/* Range was removed: a piece of a resource now is an upstream
	   handing out a secret a few bytes at a time */
	if (sr->sr_carries && (m->hm_status == 206 ||
	    field_has(m, "content-type", "multipart/byteranges") ||
	    http_msg_find(m, "content-range", 0) != -1))
		return xs_deny(xc, AUD_R_UPSTREAM_UNREACHABLE, "upstream sent "
		    "a partial answer (206, byte ranges) to a request that "
		    "carried a secret");
	/* redaction changes the body's length */
	xc->xc_reframe = 1;
	return XS_GO;
}

/*
 * The head as it goes to the client, redacted as one block: the reason
 * phrase, names and values could each echo a secret, and a value split
 * across two fields is seen whole where it is whole.
 */
static enum xs_verdict
sec_resp_head_out(struct xs_call *xc, struct evbuffer *in,
    struct evbuffer *out)
{
	struct sec_scan	*reflect = sec_req_reflector(xc->xc_x->x_sec.s_req);
	char		*raw, *clean;
	size_t		 n = evbuffer_get_length(in), clen;

	if (reflect == NULL || n == 0)
		return XS_GO;
	raw = (char *)evbuffer_pullup(in, (ssize_t)n);
	clean = sec_scan_string(reflect, raw, n, &clen, NULL);
	OPENSSL_cleanse(raw, n);
	evbuffer_drain(in, n);
	evbuffer_add(out, clean, clen);
	free(clean);
	return XS_GO;
}

/* The body through the scanner, which keeps back at most a partial match
 * and lets it go at the end. */
static enum xs_verdict
sec_resp_body(struct xs_call *xc, struct evbuffer *in, struct evbuffer *out)
{
	struct sec_scan		*reflect;
	struct evbuffer_iovec	 v[8];
	size_t			 taken;
	int			 i, n;

	if (xc->xc_tunnel)
		return sec_ws_resp_body(xc, in, out);
	if ((reflect = sec_req_reflector(xc->xc_x->x_sec.s_req)) == NULL)
		return XS_GO;
	while (evbuffer_get_length(in) > 0 &&
	    (n = evbuffer_peek(in, -1, NULL, v, 8)) > 0) {
		taken = 0;
		for (i = 0; i < n && i < 8; i++) {
			sec_scan_feed(reflect, v[i].iov_base, v[i].iov_len,
			    out);
			taken += v[i].iov_len;
		}
		evbuffer_drain(in, taken);
	}
	if (xc->xc_eof)
		sec_scan_finish(reflect, out);
	return XS_GO;
}

/* An exchange that ended while waiting for a mint (a timeout, the client
 * gone) is no longer woken: its event may be freed before the mint ends. */
static void
sec_done(struct xs_call *xc)
{
	struct xchg	*x = xc->xc_x;

	if (x->x_sec.s_wait_ev == NULL)
		return;
	sec_store_unwatch(xc->xc_cfg->c_store, x->x_sec.s_wait_ev);
	x->x_sec.s_wait_ev = NULL;
}

/* The reflection guard reads a body wherever it has a scanner: the host
 * has a secret bound to it (stored reflection) or one went out; a
 * WebSocket's frames are read both ways (sec_ws_stage.c). */
static unsigned
sec_watch(struct xs_call *xc)
{
	return xc->xc_tunnel || xc->xc_upgrade ||
	    sec_req_reflector(xc->xc_x->x_sec.s_req) != NULL ?
	    XS_W_RESP_BODY : 0;
}

const struct xstage sec_stage = {
	.xs_name = "secrets",
	.xs_req_head = sec_req_head,
	.xs_req_ready = sec_req_ready,
	.xs_req_drop = sec_ws_req_drop,
	.xs_req_body = sec_req_body,
	.xs_resp_head = sec_resp_head,
	.xs_done = sec_done,
	.xs_resp_head_out = sec_resp_head_out,
	.xs_resp_body = sec_resp_body,
	.xs_watch = sec_watch,
};
