/*
 * One HTTP/2 stream as a connection of its own: the h2 plane (src/h2/)
 * hands each stream's request to a struct conn that reads it as HTTP/1.1
 * from one end of a bufferevent pair, so that every stream is one
 * exchange through the whole pipeline (identity of the session, policy,
 * the stage table, upstream pool, audit) with nothing of it written
 * twice. The connection stands in the session's place: same sandbox,
 * same TLS server name and CONNECT port, counted against the sandbox's
 * and the gateway's connection limits like the session itself.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_internal.h"
#include "conn/worker.h"
#include "sbx/sbx.h"
#include "util/util.h"

struct conn *
conn_stream_new(struct conn *p, struct bufferevent *bev, struct h2_stream *s)
{
	struct worker	*w = p->c_worker;
	struct conn	*c;
	size_t		 n;

	if (p->c_sbx == NULL ||
	    worker_conn_count() >= p->c_cfg->c_limits.l_max_connections) {
		bufferevent_free(bev);
		return NULL;
	}
	n = __atomic_add_fetch(&p->c_sbx->sb_conns, 1, __ATOMIC_RELAXED);
	if (n > p->c_cfg->c_limits.l_max_connections_per_sandbox) {
		__atomic_sub_fetch(&p->c_sbx->sb_conns, 1, __ATOMIC_RELAXED);
		bufferevent_free(bev);
		return NULL;
	}
	c = xcalloc(1, sizeof(*c));
	c->c_x = &c->c_x0;
	TAILQ_INIT(&c->c_xq);
	c->c_worker = w;
	c->c_cfg = cfg_ref(p->c_cfg);
	c->c_sbx = sbx_ref(p->c_sbx);
	c->c_policy = p->c_policy;
	c->c_listener = p->c_listener;
	memcpy(c->c_client, p->c_client, sizeof(c->c_client));
	c->c_tls = 1;
	memcpy(c->c_tls_host, p->c_tls_host, sizeof(c->c_tls_host));
	c->c_tls_port = p->c_tls_port;
	memcpy(c->c_tls_fronting, p->c_tls_fronting,
	    sizeof(c->c_tls_fronting));
	c->c_transparent = p->c_transparent;
	c->c_socks5 = p->c_socks5;
	c->c_trans_named = p->c_trans_named;
	c->c_orig_addr = p->c_orig_addr;
	c->c_trans_port = p->c_trans_port;
	memcpy(c->c_trans_host, p->c_trans_host, sizeof(c->c_trans_host));
	c->c_h2s = s;
	c->c_http2 = 1;
	c->c_bev = bev;
	c->c_pend = evbuffer_new();
	http_msg_init(&c->c_req, HTTP_REQUEST,
	    c->c_cfg->c_limits.l_header_bytes);
	http_msg_init(&c->c_resp, HTTP_RESPONSE,
	    c->c_cfg->c_limits.l_header_bytes);
	c->c_req.hm_on_body = conn_request_body_cb;
	c->c_req.hm_arg = c;
	c->c_resp.hm_on_body = conn_response_body_cb;
	c->c_resp.hm_arg = c;
	c->c_timer = evtimer_new(w->w_base, conn_timer_cb, c);
	/* before its session: a walk of the list that closes connections
	   (grace, revocation) ends the streams before the session frees
	   them */
	TAILQ_INSERT_BEFORE(p, c, c_entry);
	w->w_nconns++;
	worker_conn_more();
	conn_touch(c);
	c->c_state = CONN_HEAD;
	conn_set_client_callbacks(c);
	conn_timer_arm(c, c->c_cfg->c_limits.l_header_timeout_ms);
	return c;
}
