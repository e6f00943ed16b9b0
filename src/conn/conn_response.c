/*
 * The response side of a request: the upstream's head through the stage
 * table and out to the client, the body re-framed, scanned and metered.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <openssl/crypto.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_internal.h"
#include "conn/conn_reload.h"
#include "conn/worker.h"
#include "dns/dns.h"
#include "conn/conn_slots.h"
#include "dns/net_self.h"
#include "geo/geo.h"
#include "http/http_target.h"
#include "http/http_write.h"
#include "budget/bud.h"
#include "policy/pol.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

void
conn_response_body_cb(void *arg, const char *p, size_t len)
{
	/* a stage that ends the exchange is answered once the parser
	   returns (conn_pipe_pending) */
	(void)conn_pipe_resp_body(arg, p, len, 0);
}

/* End of a response body: what the stages held, then the last chunk.
 * -1 when a stage ended the exchange (conn_pipe_pending answers). */
int
conn_response_body_end(struct conn *c)
{
	if (conn_pipe_resp_body(c, NULL, 0, 1) == -1)
		return -1;
	if (c->c_r.r_rechunk && c->c_resp.hm_trailers && (c->c_http2 ||
	    http_msg_list_has(&c->c_req, "te", "trailers"))) {
		/* an HTTP/2 stream, or an HTTP/1.1 client that said "TE:
		   trailers" (RFC 9112 7.1.2), gets them (gRPC's grpc-status);
		   they go through the stages as a head does: a grpc-message
		   can echo a secret as well as any field */
		size_t		 before = evbuffer_get_length(c->c_pend);
		struct evbuffer	*up = c->c_worker->w_filt[0];
		struct hw_sink	 sink;

		evbuffer_add(c->c_pend, "0\r\n", 3);
		conn_evb_sink(up, &sink);
		http_write_trailers(&c->c_resp, &sink);
		conn_pipe_resp_head_out(c, up, c->c_pend);
		evbuffer_add(c->c_pend, "\r\n", 2);
		c->c_x->x_bytes_in += evbuffer_get_length(c->c_pend) - before;
	} else if (c->c_r.r_rechunk) {
		evbuffer_add(c->c_pend, "0\r\n\r\n", 5);
		c->c_x->x_bytes_in += 5;
	}
	return 0;
}

/* Response head from upstream -> client (http/http_write.c). */
static void
write_response_head(struct conn *c, int interim)
{
	struct http_msg	*m = &c->c_resp;
	struct evbuffer	*out = c->c_pend;	/* the body may join it */
	struct evbuffer	*up;
	struct hw_gather gather;
	struct hw_sink	 evb, sink;
	struct hw_resp	 p;
	size_t		 before = evbuffer_get_length(out);
	int		 flags;

	memset(&p, 0, sizeof(p));
	p.hp_id = interim ? NULL : c->c_x->x_id;
	p.hp_framing = m->hm_framing;
	p.hp_length = m->hm_content_length;
	/* a stage changes the body's length: it is re-framed */
	if (c->c_r.r_reframe && p.hp_framing == HTTP_BODY_LENGTH)
		p.hp_framing = HTTP_BODY_CHUNKED;
	p.hp_http10 = c->c_req.hm_minor == 0;
	p.hp_upgrade = m->hm_status == 101;
	p.hp_close = !c->c_r.r_keepalive || c->c_worker->w_stopping;

	/* the upstream's part goes through the stages as one block */
	up = c->c_worker->w_filt[0];
	conn_evb_sink(up, &evb);
	hw_gather_sink(&gather, &evb, &sink);
	http_write_status_fields(m, &sink);
	hw_gather_flush(&gather);
	conn_pipe_resp_head_out(c, up, out);
	conn_evb_sink(out, &evb);
	hw_gather_sink(&gather, &evb, &sink);
	flags = http_write_response_end(&p, &sink);
	hw_gather_flush(&gather);
	if (flags & HW_RECHUNK)
		c->c_r.r_rechunk = 1;
	if (flags & HW_CLOSE_DELIM) {
		c->c_r.r_keepalive = 0;
		c->c_r.r_close_delim = 1;
	}
	c->c_x->x_bytes_in += evbuffer_get_length(out) - before;
}

void
conn_feed_response(struct conn *c)
{
	conn_feed_response_loop(c);
	conn_client_flush(c);
}

void
conn_feed_response_loop(struct conn *c)
{
	struct evbuffer		*in;
	struct evbuffer_iovec	 v;
	enum http_feed		 f;
	size_t			 used, room;

	if (c->c_up == NULL)
		return;
	in = bufferevent_get_input(c->c_up->u_bev);
	while (!c->c_closing && c->c_up != NULL && !c->c_r.r_resp_done &&
	    (evbuffer_get_length(in) > 0 || conn_msg_empty_body_left(&c->c_resp))) {
		if (evbuffer_get_length(bufferevent_get_output(c->c_bev)) >=
		    CONN_HIWAT) {
			/* conn_client_write_cb resumes us */
			bufferevent_disable(c->c_up->u_bev, EV_READ);
			return;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
			v.iov_base = (void *)"";
			v.iov_len = 0;
		} else if ((room = conn_pipe_room(c, 0)) == 0) {
			/* the budget's next byte grant resumes us */
			bufferevent_disable(c->c_up->u_bev, EV_READ);
			return;
		} else if (v.iov_len > room)
			v.iov_len = room;
		f = http_msg_feed(&c->c_resp, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		if (conn_pipe_pending(c))
			return;
		switch (f) {
		case HTTP_FEED_MORE:
			break;
		case HTTP_FEED_HEAD:
			c->c_x->x_status = c->c_resp.hm_status;
			if (conn_pipe_resp_head(c) == -1)
				return;
			write_response_head(c, 0);
			c->c_r.r_resp_started = 1;
			/* from here on only idleness is a timeout */
			conn_timer_arm(c, c->c_cfg->c_limits.l_idle_timeout_ms);
			http_msg_resume(&c->c_resp);
			break;
		case HTTP_FEED_DONE:
			if (c->c_resp.hm_status >= 100 &&
			    c->c_resp.hm_status < 200) {
				/* interim (100 Continue): pass, keep waiting */
				if (c->c_req.hm_minor >= 1)
					write_response_head(c, 1);
				http_msg_reset(&c->c_resp);
				c->c_resp.hm_no_body =
				    c->c_req.hm_method == HTTP_HEAD;
				break;
			}
			if (!c->c_r.r_resp_started) {
				c->c_x->x_status = c->c_resp.hm_status;
				write_response_head(c, 0);
				c->c_r.r_resp_started = 1;
			}
			if (conn_response_body_end(c) == -1) {
				(void)conn_pipe_pending(c);
				return;
			}
			c->c_r.r_resp_done = 1;
			conn_client_flush(c);
			conn_request_finished(c);
			return;
		case HTTP_FEED_UPGRADE:
			if (!c->c_r.r_upgrade) {
				/* nothing asked for it: no tunnel, no 101 */
				conn_upstream_failed(c,
				    AUD_R_UPSTREAM_UNREACHABLE, "upstream "
				    "switched protocols (101) for a request "
				    "that asked for no upgrade");
				return;
			}
			c->c_x->x_status = c->c_resp.hm_status;
			write_response_head(c, 0);
			conn_client_flush(c);
			c->c_r.r_resp_started = 1;
			if (c->c_resp.hm_status == 101 && c->c_r.r_upgrade) {
				conn_tunnel_start(c);
				return;
			}
			conn_upstream_failed(c, AUD_R_UPSTREAM_UNREACHABLE,
			    "unexpected protocol switch");
			return;
		case HTTP_FEED_ERROR:
			conn_upstream_failed(c, AUD_R_UPSTREAM_UNREACHABLE,
			    c->c_resp.hm_err_reason);
			return;
		}
	}
}
