/*
 * What goes out of a connection, through the stage table's body hooks:
 * the request head written for the upstream (with the framing a stage
 * that changes the body's length asks for: chunked, or the held body's
 * Content-Length), the request body pumped (held whole, or streamed and
 * re-framed), and the pieces gathered for the client (c_pend). conn.c
 * keeps the state machine and the callbacks.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_internal.h"
#include "conn/worker.h"
#include "http/http_write.h"
#include "pipe/xchg.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "upstream/upstream.h"
#include "util/log.h"

/*
 * After its head, a message without body bytes still needs one (empty)
 * feed for llhttp to complete it.
 */
int
conn_msg_empty_body_left(const struct http_msg *m)
{
	return m->hm_head_done && !m->hm_complete &&
	    (m->hm_framing == HTTP_BODY_NONE ||
	    (m->hm_framing == HTTP_BODY_LENGTH && m->hm_content_length == 0));
}

/* The socket bufferevent under <bev> (a TLS filter), or <bev> itself. */
static struct bufferevent *
bev_socket(struct bufferevent *bev)
{
	struct bufferevent	*under = bufferevent_get_underlying(bev);

	return under != NULL ? under : bev;
}

/*
 * Send what was just queued on <sock> now, when its output held nothing
 * before (<was>), instead of arming EV_WRITE for the next loop turn and
 * disarming it once written: two epoll_ctl saved per request and per
 * response. What the socket does not take goes out the usual way; with a
 * backlog (which backpressure resumes from the write callback) nothing
 * changes.
 */
static void
bev_send_now(struct bufferevent *sock, size_t was)
{
	struct evbuffer	*out = bufferevent_get_output(sock);
	evutil_socket_t	 fd = bufferevent_getfd(sock);

	if (was != 0 || fd < 0 || evbuffer_get_length(out) == 0)
		return;
	/* a socket bufferevent keeps its output's start frozen but while
	   it writes itself, as here */
	evbuffer_unfreeze(out, 1);
	(void)evbuffer_write(out, fd);
	evbuffer_freeze(out, 1);
	if (evbuffer_get_length(out) == 0)
		event_del(&sock->ev_write);	/* armed for nothing now */
}

static void
evb_add(void *arg, const void *p, size_t n)
{
	evbuffer_add(arg, p, n);
}

void
conn_evb_sink(struct evbuffer *b, struct hw_sink *s)
{
	s->hs_add = evb_add;
	s->hs_arg = b;
}

/*
 * Move what the response path gathered for the client into its
 * bufferevent, as one contiguous chain: a TLS bufferevent makes one
 * SSL_write (one record) of each chain it is handed, and each record costs
 * an encryption and, often, a send of its own. Called before control
 * returns to the event loop and before anything else writes to the client,
 * so nothing is ever held back from a stream.
 */
void
conn_client_flush(struct conn *c)
{
	struct bufferevent	*sock;
	size_t			 n = evbuffer_get_length(c->c_pend), was;

	if (n == 0)
		return;
	if (c->c_closing) {
		evbuffer_drain(c->c_pend, n);
		return;
	}
	sock = bev_socket(c->c_bev);
	was = evbuffer_get_length(bufferevent_get_output(sock));
	evbuffer_pullup(c->c_pend, (ssize_t)n);
	bufferevent_write_buffer(c->c_bev, c->c_pend);
	bev_send_now(sock, was);
}

/* A TLS record holds 16 KiB: gathering more saves nothing. */
#define CONN_PEND_MAX	(16 * 1024)

/*
 * Write one piece of body to <to>, chunk-framed when <chunked>. Built in
 * one buffer and moved in one go, so a TLS bufferevent makes one record
 * of it, not three; towards the client it joins the head (or the pieces)
 * gathered in the same callback.
 */
void
conn_body_out(struct conn *c, struct bufferevent *to, const char *p, size_t len,
    int chunked, uint64_t *count)
{
	struct evbuffer	*tmp = to == c->c_bev ? c->c_pend :
			    c->c_worker->w_scratch;
	size_t		 before = evbuffer_get_length(tmp);

	if (len == 0)
		return;
	if (chunked)
		evbuffer_add_printf(tmp, "%zx\r\n", len);
	evbuffer_add(tmp, p, len);
	if (chunked)
		evbuffer_add(tmp, "\r\n", 2);
	*count += evbuffer_get_length(tmp) - before;
	if (tmp == c->c_pend) {
		if (evbuffer_get_length(tmp) >= CONN_PEND_MAX)
			conn_client_flush(c);
	} else
		bufferevent_write_buffer(to, tmp);
}

/* Body bytes as the stages let them through: held, or upstream. */
static void
request_body_emit(struct conn *c, const char *p, size_t len)
{
	if (c->c_state == CONN_BODY_BUFFER) {
		/* held whole (SigV4 hash, usage options), within body_bytes */
		if (c->c_r.r_body == NULL)
			c->c_r.r_body = evbuffer_new();
		if (evbuffer_get_length(c->c_r.r_body) + len >
		    c->c_r.r_hold) {
			c->c_r.r_body_too_large = 1;
			return;
		}
		evbuffer_add(c->c_r.r_body, p, len);
		return;
	}
	if (c->c_up == NULL || len == 0)
		return;
	conn_body_out(c, c->c_up->u_bev, p, len, c->c_r.r_up_chunked,
	    &c->c_x->x_bytes_out);
}

static void
request_body(struct conn *c, const char *p, size_t len, int eof)
{
	size_t	pass;

	if (conn_pipe_req_body(c, &p, &len, eof, &pass) == -1) {
		/* refused once the parser returns; what a stage let through
		   still goes (up to a cap) */
		if (pass > 0 && c->c_up != NULL &&
		    c->c_state == CONN_FORWARD)
			conn_body_out(c, c->c_up->u_bev, p, pass,
			    c->c_r.r_up_chunked, &c->c_x->x_bytes_out);
	} else
		request_body_emit(c, p, len);
	conn_pipe_req_body_end(c);
}

void
conn_request_body_cb(void *arg, const char *p, size_t len)
{
	request_body(arg, p, len, 0);
}

void
conn_request_body_end(struct conn *c)
{
	/* what a stage kept back of the body goes now */
	if (c->c_x != NULL && c->c_x->x_active)
		request_body(c, "", 0, 1);
	c->c_r.r_req_done = 1;
	if (c->c_r.r_up_chunked && c->c_up != NULL) {
		bufferevent_write(c->c_up->u_bev, "0\r\n\r\n", 5);
		c->c_x->x_bytes_out += 5;
	}
}

/* The connection's own rewriting of the head going upstream: the path
 * overrides a rule strips, what the stages drop (req_drop) and add
 * (req_fields). Its sink is the evbuffer being built. */
struct head_rw {
	struct conn		*hr_c;
	struct evbuffer		*hr_out;
	struct hw_gather	*hr_gather;	/* in front of hr_out */
};

static int
head_rw_drop(void *arg, const char *name, size_t nlen)
{
	struct head_rw	*h = arg;

	return conn_header_stripped(h->hr_c, name, nlen) ||
	    conn_pipe_req_drop(h->hr_c, name, nlen);
}

static void
head_rw_fields(void *arg, const struct hw_sink *out)
{
	struct head_rw	*h = arg;

	(void)out;		/* gathered in front of the same evbuffer */
	hw_gather_flush(h->hr_gather);
	conn_pipe_req_fields(h->hr_c, h->hr_out);
}

/* Serialize the request head for the upstream (http/http_write.c). */
void
conn_request_head_write(struct conn *c)
{
	struct http_msg	*m = &c->c_req;
	struct sec_req	*sr = c->c_x->x_sec.s_req;
	/* built aside: a TLS bufferevent drains its output as we add */
	struct evbuffer	*out = c->c_worker->w_scratch;
	const char	*query, *signer;
	struct bufferevent *sock;
	struct hw_rewrite sec_rw, conn_rw = { head_rw_drop, NULL,
			    head_rw_fields, NULL };
	struct hw_gather gather;
	struct head_rw	 h = { c, out, &gather };
	struct hw_sink	 evb, sink;
	struct hw_req	 q;
	char		 host[300];
	size_t		 was;

	memset(&q, 0, sizeof(q));
	q.hq_method = c->c_x->x_method;
	q.hq_path = sec_req_path(sr, c->c_x->x_path);
	q.hq_query = query = sec_req_query(sr, c->c_x->x_query);
	q.hq_host = host;
	q.hq_hostlen = http_write_host(host, sizeof(host), c->c_x->x_host,
	    c->c_x->x_port, c->c_tls ? 443 : 80);
	if ((signer = sec_req_sigv4_name(sr, c->c_cfg)) != NULL &&
	    !c->c_x->x_sec.s_signed) {
		if (sec_req_sign(sr, c->c_cfg, c->c_x->x_method, host,
		    q.hq_path, query != NULL && query[0] != '\0' ? query :
		    NULL, m, c->c_r.r_body) == -1)
			log_warnx("SigV4 signing failed (secret %s)", signer);
		c->c_x->x_sec.s_signed = 1;
	}
	if (sec_req_rewriter(sr, &sec_rw))
		q.hq_rw[q.hq_nrw++] = &sec_rw;
	conn_rw.hr_arg = &h;
	q.hq_rw[q.hq_nrw++] = &conn_rw;
	q.hq_upgrade = c->c_r.r_upgrade;
	if (c->c_r.r_body != NULL) {
		q.hq_held = 1;
		q.hq_held_len = evbuffer_get_length(c->c_r.r_body);
	} else
		q.hq_chunked = c->c_x->x_req_reframe;
	conn_evb_sink(out, &evb);
	hw_gather_sink(&gather, &evb, &sink);
	c->c_r.r_up_chunked = http_write_request_head(m, &q, &sink);
	hw_gather_flush(&gather);
	if (c->c_r.r_body != NULL)
		evbuffer_add_buffer(out, c->c_r.r_body);	/* moved */
	c->c_x->x_bytes_out += evbuffer_get_length(out);
	sock = bev_socket(c->c_up->u_bev);
	was = evbuffer_get_length(bufferevent_get_output(sock));
	bufferevent_write_buffer(c->c_up->u_bev, out);
	bev_send_now(sock, was);
}

