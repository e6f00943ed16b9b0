/*
 * What of the secrets stage still runs in the connection (the stage's
 * hooks are in secrets/sec_stage.c): the redaction of a response head as
 * one piece (names, values and the status line together, so a value split
 * across two fields is seen whole where it is whole), and the refusal of
 * a splice towards a secret's host.
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

void
conn_sec_head_out(struct conn *c, struct evbuffer *head, struct evbuffer *out)
{
	const struct sec_req	*sr = c->c_x->x_sec.s_req;
	struct sec_scan		*reflect;
	char			*raw, *clean;
	size_t			 n = evbuffer_get_length(head), clen;

	if (n == 0)
		return;
	raw = (char *)evbuffer_pullup(head, (ssize_t)n);
	if ((reflect = sec_req_reflector(sr)) == NULL) {
		evbuffer_add(out, raw, n);
		evbuffer_drain(head, n);
		return;
	}
	/* a reflected secret never reaches the sandbox */
	clean = sec_scan_string(reflect, raw, n, &clen, NULL);
	OPENSSL_cleanse(raw, n);
	evbuffer_drain(head, n);
	evbuffer_add(out, clean, clen);
	free(clean);
}

int
conn_sec_splice_refused(struct conn *c)
{
	static const char	reason[] = "a secret's host is not spliced "
				    "(intercept: false): its responses could "
				    "not be scanned for the secret";

	if (!sec_host_bound(c->c_cfg, c->c_x->x_host))
		return 0;
	c->c_x->x_allowed = 0;
	if (c->c_transparent)
		conn_refuse(c, reason);
	else
		conn_deny(c, AUD_R_DENIED, reason);
	return 1;
}
