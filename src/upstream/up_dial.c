/*
 * Ask a parent proxy for a tunnel to one destination: HTTP CONNECT
 * (RFC 9110 9.3.6; the answer's head read by llhttp) or SOCKS5 CONNECT
 * (RFC 1928, user/password RFC 1929). Every failure names the parent and
 * what it said (its status line, or the SOCKS5 reply code), never the
 * credentials.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>
#include <llhttp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "dns/net_guard.h"
#include "upstream/upstream.h"
#include "util/util.h"

#define DIAL_MAX_HEAD	16384	/* bytes of a parent's CONNECT answer */

enum dial_state {
	D_CONNECTING,
	D_HTTP,		/* waiting for the CONNECT answer's head */
	D_S5_METHOD,
	D_S5_AUTH,
	D_S5_REPLY,
	D_DONE,
};

struct up_dial {
	struct bufferevent	*d_bev;
	const struct up_parent	*d_p;
	up_dial_cb		*d_cb;
	void			*d_arg;
	enum dial_state		 d_state;
	char			 d_target[256];
	int			 d_port;
	char			 d_status[64];	/* the parent's reason phrase */
};

static void
dial_end(struct up_dial *d, int ok, const char *reason)
{
	d->d_state = D_DONE;
	bufferevent_setcb(d->d_bev, NULL, NULL, NULL, NULL);
	/* the callback may free <d> */
	d->d_cb(d->d_arg, ok, reason);
}

static void dial_fail(struct up_dial *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));

static void
dial_fail(struct up_dial *d, const char *fmt, ...)
{
	char	reason[1024], msg[400];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(reason, sizeof(reason), "parent proxy %s: %s (asked for "
	    "%s%s%s:%d)", d->d_p->p_url, msg,
	    strchr(d->d_target, ':') ? "[" : "", d->d_target,
	    strchr(d->d_target, ':') ? "]" : "", d->d_port);
	dial_end(d, 0, reason);
}

/* HTTP */

static int
on_status(llhttp_t *p, const char *at, size_t len)
{
	struct up_dial	*d = p->data;
	size_t		 n = strlen(d->d_status), i;

	for (i = 0; i < len && n + 1 < sizeof(d->d_status); i++)
		d->d_status[n++] = (at[i] >= 0x20 && at[i] < 0x7f) ? at[i] : '?';
	d->d_status[n] = '\0';
	return 0;
}

static int
on_headers_complete(llhttp_t *p)
{
	return 1;	/* no body is read here */
}

static void
http_send(struct up_dial *d)
{
	struct evbuffer	*out = bufferevent_get_output(d->d_bev);
	const char	*ob = strchr(d->d_target, ':') ? "[" : "";
	const char	*cb = *ob ? "]" : "";
	unsigned char	*b64;
	int		 n;

	evbuffer_add_printf(out, "CONNECT %s%s%s:%d HTTP/1.1\r\nHost: "
	    "%s%s%s:%d\r\n", ob, d->d_target, cb, d->d_port, ob, d->d_target,
	    cb, d->d_port);
	if (d->d_p->p_auth != NULL) {
		b64 = xcalloc(1, 4 * ((d->d_p->p_auth_len + 2) / 3) + 1);
		n = EVP_EncodeBlock(b64, (const unsigned char *)d->d_p->p_auth,
		    (int)d->d_p->p_auth_len);
		evbuffer_add_printf(out, "Proxy-Authorization: Basic ");
		evbuffer_add(out, b64, (size_t)n);
		evbuffer_add_printf(out, "\r\n");
		OPENSSL_cleanse(b64, (size_t)n);
		free(b64);
	}
	evbuffer_add_printf(out, "\r\n");
	d->d_state = D_HTTP;
}

static void
http_read(struct up_dial *d)
{
	struct evbuffer		*in = bufferevent_get_input(d->d_bev);
	struct evbuffer_ptr	 end;
	llhttp_settings_t	 s;
	llhttp_t		 p;
	const char		*head;
	char			 st[96];
	size_t			 len;
	int			 code;

	end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos == -1) {
		if (evbuffer_get_length(in) > DIAL_MAX_HEAD)
			dial_fail(d, "%s", "answer head too long");
		return;
	}
	len = (size_t)end.pos + 4;
	if (len > DIAL_MAX_HEAD) {
		dial_fail(d, "%s", "answer head too long");
		return;
	}
	head = (const char *)evbuffer_pullup(in, (ssize_t)len);
	llhttp_settings_init(&s);
	s.on_status = on_status;
	s.on_headers_complete = on_headers_complete;
	llhttp_init(&p, HTTP_RESPONSE, &s);
	p.data = d;
	d->d_status[0] = '\0';
	if (llhttp_execute(&p, head, len) != HPE_OK ||
	    (code = llhttp_get_status_code(&p)) < 100) {
		dial_fail(d, "%s", "malformed answer to CONNECT");
		return;
	}
	evbuffer_drain(in, len);
	if (code / 100 != 2) {
		snprintf(st, sizeof(st), "%d %s", code, d->d_status);
		dial_fail(d, "refused the tunnel: %s", st);
		return;
	}
	dial_end(d, 1, NULL);
}

/* SOCKS5 */

static const char *
s5_reply_text(int rep)
{
	static const char *t[] = { "succeeded", "general failure",
	    "connection not allowed by ruleset", "network unreachable",
	    "host unreachable", "connection refused", "TTL expired",
	    "command not supported", "address type not supported" };

	return rep >= 0 && rep < (int)(sizeof(t) / sizeof(t[0])) ? t[rep] :
	    "unassigned reply code";
}

static void
s5_greet(struct up_dial *d)
{
	static const unsigned char noauth[] = { 5, 1, 0 };
	static const unsigned char both[] = { 5, 2, 0, 2 };
	struct evbuffer	*out = bufferevent_get_output(d->d_bev);

	if (d->d_p->p_auth != NULL)
		evbuffer_add(out, both, sizeof(both));
	else
		evbuffer_add(out, noauth, sizeof(noauth));
	d->d_state = D_S5_METHOD;
}

static void
s5_request(struct up_dial *d)
{
	struct evbuffer	*out = bufferevent_get_output(d->d_bev);
	struct net_addr	 a;
	unsigned char	 b[4 + 1 + 255 + 2];
	size_t		 n = 0, hl;

	b[n++] = 5;
	b[n++] = 1;		/* CONNECT */
	b[n++] = 0;
	if (net_host_literal(d->d_target, &a) == 1) {
		b[n++] = a.na_family == AF_INET ? 1 : 4;
		hl = a.na_family == AF_INET ? 4 : 16;
		memcpy(b + n, a.na_bytes, hl);
		n += hl;
	} else {
		hl = strlen(d->d_target);
		b[n++] = 3;
		b[n++] = (unsigned char)hl;	/* x_host: at most 253 */
		memcpy(b + n, d->d_target, hl);
		n += hl;
	}
	b[n++] = (unsigned char)(d->d_port >> 8);
	b[n++] = (unsigned char)(d->d_port & 0xff);
	evbuffer_add(out, b, n);
	d->d_state = D_S5_REPLY;
}

static void
s5_auth(struct up_dial *d)
{
	struct evbuffer	*out = bufferevent_get_output(d->d_bev);
	const char	*a = d->d_p->p_auth, *colon;
	unsigned char	 b[3 + 255 + 255];
	size_t		 ul, pl, n = 0;

	colon = memchr(a, ':', d->d_p->p_auth_len);
	ul = colon != NULL ? (size_t)(colon - a) : d->d_p->p_auth_len;
	pl = colon != NULL ? d->d_p->p_auth_len - ul - 1 : 0;
	if (ul == 0 || ul > 255 || pl > 255) {
		dial_fail(d, "%s", "proxy_auth is not \"user:pass\" of at "
		    "most 255 bytes each (RFC 1929)");
		return;
	}
	b[n++] = 1;
	b[n++] = (unsigned char)ul;
	memcpy(b + n, a, ul);
	n += ul;
	b[n++] = (unsigned char)pl;
	memcpy(b + n, colon != NULL ? colon + 1 : "", pl);
	n += pl;
	evbuffer_add(out, b, n);
	OPENSSL_cleanse(b, sizeof(b));
	d->d_state = D_S5_AUTH;
}

static void
s5_read(struct up_dial *d)
{
	struct evbuffer	*in = bufferevent_get_input(d->d_bev);
	unsigned char	*p;
	size_t		 have = evbuffer_get_length(in), need;
	char		 st[96];
	int		 method;

	switch (d->d_state) {
	case D_S5_METHOD:
		if (have < 2)
			return;
		p = evbuffer_pullup(in, 2);
		if (p[0] != 5) {
			dial_fail(d, "%s", "not a SOCKS5 server");
			return;
		}
		if (p[1] == 0xff || (p[1] == 2 && d->d_p->p_auth == NULL) ||
		    (p[1] != 0 && p[1] != 2)) {
			dial_fail(d, "%s", d->d_p->p_auth == NULL ?
			    "wants authentication, and this parent has no proxy_auth" :
			    "accepts none of our authentication methods");
			return;
		}
		method = p[1];
		evbuffer_drain(in, 2);	/* <p> is gone */
		if (method == 2)
			s5_auth(d);
		else
			s5_request(d);
		return;
	case D_S5_AUTH:
		if (have < 2)
			return;
		p = evbuffer_pullup(in, 2);
		if (p[1] != 0) {
			dial_fail(d, "%s", "refused our credentials (RFC 1929)");
			return;
		}
		evbuffer_drain(in, 2);
		s5_request(d);
		return;
	case D_S5_REPLY:
		if (have < 5)
			return;
		p = evbuffer_pullup(in, 5);
		if (p[0] != 5) {
			dial_fail(d, "%s", "malformed SOCKS5 reply");
			return;
		}
		if (p[1] != 0) {
			snprintf(st, sizeof(st), "SOCKS5 reply %d (%s)", p[1],
			    s5_reply_text(p[1]));
			dial_fail(d, "refused the tunnel: %s", st);
			return;
		}
		switch (p[3]) {
		case 1: need = 4 + 4 + 2; break;
		case 4: need = 4 + 16 + 2; break;
		case 3: need = 4 + 1 + (size_t)p[4] + 2; break;
		default:
			dial_fail(d, "%s", "malformed SOCKS5 reply");
			return;
		}
		if (have < need)
			return;
		evbuffer_drain(in, need);
		dial_end(d, 1, NULL);
		return;
	default:
		return;
	}
}

static void
dial_read_cb(struct bufferevent *bev, void *arg)
{
	struct up_dial	*d = arg;

	if (d->d_p->p_kind == UP_HTTP)
		http_read(d);
	else
		s5_read(d);
}

static void
dial_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct up_dial	*d = arg;
	int		 err = EVUTIL_SOCKET_ERROR();

	if (what & BEV_EVENT_CONNECTED) {
		if (d->d_p->p_kind == UP_HTTP)
			http_send(d);
		else
			s5_greet(d);
		return;
	}
	if (d->d_state == D_CONNECTING)
		dial_fail(d, "connect: %s", err ? strerror(err) : "failed");
	else
		dial_fail(d, "%s", (what & BEV_EVENT_EOF) ? "closed the "
		    "connection before the tunnel was open" : "connection "
		    "error");
}

struct up_dial *
up_dial_new(struct bufferevent *bev, const struct up_parent *p,
    const char *target, int port, up_dial_cb *cb, void *arg)
{
	struct up_dial	*d;

	d = xcalloc(1, sizeof(*d));
	d->d_bev = bev;
	d->d_p = p;
	d->d_cb = cb;
	d->d_arg = arg;
	d->d_port = port;
	util_copy_str(d->d_target, target, sizeof(d->d_target));
	bufferevent_setcb(bev, dial_read_cb, NULL, dial_event_cb, d);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	return d;
}

void
up_dial_free(struct up_dial *d)
{
	free(d);
}
