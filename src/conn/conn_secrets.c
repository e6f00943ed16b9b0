/*
 * The secrets stage's side of the connection driver: what a response to a
 * request towards a secret's hosts may not be, and the redaction of its
 * head as one piece (names, values and the status line together, so a
 * value split across two fields is seen whole where it is whole).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <openssl/crypto.h>

#include "conn/conn.h"
#include "conn/worker.h"
#include "http/http_msg.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
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
		v = http_msg_str(m, m->hm_hdrs[i].h_value);
		vlen = m->hm_hdrs[i].h_value_len;
		util_trim_ows(&v, &vlen);
		if (vlen > 0 && !util_strncaseeq(v, vlen, "identity"))
			return 1;
	}
	return 0;
}

const char *
conn_sec_response_refused(struct conn *c, const char **code)
{
	const struct sec_req	*sr = c->c_r.r_sec;
	const struct http_msg	*m = &c->c_resp;

	if (sr == NULL || sr->sr_reflect == NULL)
		return NULL;
	/* we asked for Accept-Encoding: identity; compressed anyway would
	   carry a reflected secret past the scanner */
	*code = "upstream_encoded_body";
	if (encoded(m))
		return "upstream sent an encoded body for a request towards a "
		    "secret's host (it could not be scanned)";
	/* Range was removed: a piece of a resource now is an upstream
	   handing out a secret a few bytes at a time */
	*code = "upstream_unreachable";
	if (sr->sr_carries && (m->hm_status == 206 ||
	    field_has(m, "content-type", "multipart/byteranges") ||
	    http_msg_find(m, "content-range", 0) != -1))
		return "upstream sent a partial answer (206, byte ranges) to a "
		    "request that carried a secret";
	return NULL;
}

void
conn_sec_head_out(struct conn *c, struct evbuffer *head, struct evbuffer *out)
{
	const struct sec_req	*sr = c->c_r.r_sec;
	char			*raw, *clean;
	size_t			 n = evbuffer_get_length(head), clen;

	if (n == 0)
		return;
	raw = (char *)evbuffer_pullup(head, (ssize_t)n);
	if (sr == NULL || sr->sr_reflect == NULL) {
		evbuffer_add(out, raw, n);
		evbuffer_drain(head, n);
		return;
	}
	/* a reflected secret never reaches the sandbox */
	clean = sec_scan_string(sr->sr_reflect, raw, n, &clen, NULL);
	OPENSSL_cleanse(raw, n);
	evbuffer_drain(head, n);
	evbuffer_add(out, clean, clen);
	free(clean);
}

void
conn_sec_trip_setup(struct conn *c)
{
	const struct http_msg	*m = &c->c_req;

	if (m->hm_framing == HTTP_BODY_NONE || (m->hm_framing ==
	    HTTP_BODY_LENGTH && m->hm_content_length == 0))
		return;
	c->c_r.r_trip = sec_trip_body_new(c->c_cfg, c->c_r.r_host);
}

void
conn_sec_trip_body(struct conn *c, const char *p, size_t len)
{
	if (sec_trip_feed(c->c_r.r_trip, p, len, c->c_worker->w_scratch2))
		c->c_r.r_trip_hit = 1;
}

int
conn_sec_trip_check(struct conn *c)
{
	char	reason[400];

	if (!c->c_r.r_trip_hit)
		return 0;
	c->c_r.r_trip_hit = 0;
	c->c_r.r_allowed = 0;
	snprintf(reason, sizeof(reason), "a secret's placeholder was sent in "
	    "the request body towards %s, which it is not bound to",
	    c->c_r.r_host);
	conn_upstream_failed(c, 403, "secret_misuse", reason);
	return -1;
}

int
conn_sec_splice_refused(struct conn *c)
{
	static const char	reason[] = "a secret's host is not spliced "
				    "(intercept: false): its responses could "
				    "not be scanned for the secret";

	if (!sec_host_bound(c->c_cfg, c->c_r.r_host))
		return 0;
	c->c_r.r_allowed = 0;
	if (c->c_transparent)
		conn_refuse(c, reason);
	else
		conn_deny(c, 403, "denied", reason);
	return 1;
}
