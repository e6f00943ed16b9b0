/*
 * What of the secrets stage still runs in the connection (the stage's
 * hooks, redaction included, are in secrets/sec_stage.c): the refusal of
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
