/*
 * Raw byte pump for CONNECT tunnels and upgraded (WebSocket) connections:
 * each side's input goes to the other side's output, and a side stops
 * reading while the other has CONN_HIWAT bytes waiting.
 *
 * The end: once either side reports EOF or an error, neither is read
 * again. Enabling a TLS filter for reading runs SSL_read at once, and on
 * a filter that has ended that reports the end again, from inside the
 * enable: re-enabling an ended side recursed until the stack overflowed
 * (issue 15.1). What both sides had read still goes across; once the
 * upstream has written it (its TLS socket included), the tunnel is
 * audited and the client is closed the way every connection is
 * (conn_close_when_flushed: its last bytes, close_notify, lingering).
 */
#include "config.h"

#include <stdio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "util/util.h"

/* c_tunnel_dead: sides that can take no more bytes (an error) */
#define TUNNEL_CLIENT_DEAD	0x1
#define TUNNEL_UP_DEAD		0x2
/* how long the upstream gets to take the last bytes */
#define TUNNEL_GRACE_MS		5000

/*
 * Move <from>'s input to <to>, <up> when towards the upstream, through
 * the stages (the budget charges it; what would pass a bytes cap
 * is dropped and the tunnel is cut).
 */
static void
pump(struct conn *c, struct bufferevent *from, struct bufferevent *to,
    uint64_t *count, int up)
{
	struct evbuffer	*in = bufferevent_get_input(from);
	struct evbuffer	*out = bufferevent_get_output(to);
	int		 rc;

	if (c->c_closing)
		return;
	if (evbuffer_get_length(in) > 0 &&
	    (rc = conn_pipe_tunnel(c, up, in, out, count)) != 0) {
		if (rc == 1)	/* the budget's next grant resumes it */
			bufferevent_disable(from, EV_READ);
		return;
	}
	if (evbuffer_get_length(out) >= CONN_HIWAT)
		bufferevent_disable(from, EV_READ);
}

/* Both directions: what each side read goes to the other. */
static void
tunnel_move(struct conn *c)
{
	pump(c, c->c_bev, c->c_up->u_bev, &c->c_x->x_bytes_out, 1);
	/* a stage may have ended the tunnel (a bytes cap) */
	if (c->c_up != NULL && !c->c_closing)
		pump(c, c->c_up->u_bev, c->c_bev, &c->c_x->x_bytes_in, 0);
}

/*
 * Read <from> again once <to> has room, while the tunnel runs. Only what
 * is not enabled yet (conn_bev_enable): the SSL_read that enabling a
 * filter runs may end the tunnel right here, nested.
 */
static void
tunnel_resume(struct conn *c, struct bufferevent *from,
    struct bufferevent *to)
{
	if (c->c_tunnel_eof || c->c_closing ||
	    (c->c_r.r_room_wait & (from == c->c_bev ? 2 : 1)))
		return;
	if (evbuffer_get_length(bufferevent_get_output(to)) < CONN_HIWAT)
		conn_bev_enable(from, EV_READ);
}

/* Start the tunnel, or move whatever is waiting (idempotent). */
void
conn_tunnel_start(struct conn *c)
{
	struct evbuffer	*out;

	if (c->c_up == NULL || c->c_tunnel_eof)
		return;
	if (c->c_state != CONN_TUNNEL) {
		c->c_state = CONN_TUNNEL;
		c->c_r.r_resp_started = 1;
		if (c->c_r.r_connect && !c->c_r.r_connect_replied) {
			out = bufferevent_get_output(c->c_bev);
			evbuffer_add_printf(out,
			    "HTTP/1.1 200 Connection established\r\n\r\n");
			c->c_x->x_status = 200;
		}
		bufferevent_setwatermark(c->c_bev, EV_WRITE, 0, 0);
		bufferevent_setwatermark(c->c_up->u_bev, EV_WRITE, 0, 0);
	}
	tunnel_move(c);
	if (c->c_up == NULL || c->c_closing)
		return;
	tunnel_resume(c, c->c_bev, c->c_up->u_bev);
	if (c->c_up != NULL)
		tunnel_resume(c, c->c_up->u_bev, c->c_bev);
}

/* Bytes the upstream has still to write, its TLS socket's included. */
static size_t
upstream_pending(struct upstream *u)
{
	struct bufferevent	*under = bufferevent_get_underlying(u->u_bev);
	size_t			 n;

	n = evbuffer_get_length(bufferevent_get_output(u->u_bev));
	if (under != NULL)
		n += evbuffer_get_length(bufferevent_get_output(under));
	return n;
}

/* The upstream's TLS socket drained: go on from the timer, as we are
 * inside libevent's write path. */
static void
upstream_drained(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct conn	*c = arg;

	if (evbuffer_get_length(buf) == 0 && info->n_deleted > 0)
		event_active(c->c_timer, EV_TIMEOUT, 1);
}

/* Stop watching the upstream's TLS socket (before it is freed). */
void
conn_tunnel_fini(struct conn *c)
{
	struct bufferevent	*under;

	if (c->c_tunnel_drain_cb == NULL || c->c_up == NULL)
		return;
	under = bufferevent_get_underlying(c->c_up->u_bev);
	if (under != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_output(under),
		    c->c_tunnel_drain_cb);
	c->c_tunnel_drain_cb = NULL;
}

/* Wake us when the upstream's output is written: its write callback for
 * its own buffer, an evbuffer callback for the socket under a filter. */
static void
upstream_watch(struct conn *c)
{
	struct bufferevent	*under = bufferevent_get_underlying(
				    c->c_up->u_bev);

	if (under != NULL && c->c_tunnel_drain_cb == NULL)
		c->c_tunnel_drain_cb = evbuffer_add_cb(
		    bufferevent_get_output(under), upstream_drained, c);
}

/*
 * One side of a tunnel ended (<bev>, with libevent's <what>): stop
 * reading both, hand the other side what is still buffered, then close
 * once it is written. Called again for the other side, or when writing to
 * an ended side fails: idempotent.
 */
void
conn_tunnel_eof(struct conn *c, struct bufferevent *bev, short what)
{
	int	client = bev == c->c_bev;

	if (!c->c_tunnel_eof) {
		c->c_tunnel_eof = 1;	/* first: nothing below reads again */
		if (c->c_x->x_reason[0] == '\0')
			snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason),
			    "%s %s", client ? "client" : "upstream",
			    (what & BEV_EVENT_ERROR) ? "connection failed" :
			    "closed the connection");
		bufferevent_disable(c->c_bev, EV_READ);
		if (c->c_up != NULL)
			bufferevent_disable(c->c_up->u_bev, EV_READ);
		conn_timer_arm(c, TUNNEL_GRACE_MS);
	}
	if (what & BEV_EVENT_ERROR) {
		/* it takes nothing more: drop what was meant for it */
		c->c_tunnel_dead |= client ? TUNNEL_CLIENT_DEAD :
		    TUNNEL_UP_DEAD;
		evbuffer_drain(bufferevent_get_output(bev),
		    evbuffer_get_length(bufferevent_get_output(bev)));
	}
	/*
	 * Go on from the timer, once this callback has unwound: a TLS
	 * filter reports the end before it adds the records it decrypted
	 * with it (the last WebSocket frame) to its input, and nothing of
	 * the end runs nested inside a bufferevent's callbacks.
	 */
	event_active(c->c_timer, EV_TIMEOUT, 1);
}

/* A stage ended the tunnel itself (a WebSocket close it sent both ways):
 * audited with <why>, closed once what it wrote is written. */
void
conn_tunnel_end(struct conn *c, enum aud_reason why, const char *reason)
{
	c->c_x->x_why = why;
	if (aud_reason(why)->ri_decision == AUD_D_DENY)
		c->c_x->x_allowed = 0;
	snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%s", reason);
	conn_tunnel_eof(c, c->c_bev, BEV_EVENT_EOF);
}

/* The grace timer; conn_tunnel_eof() and upstream_drained() through it. */
void
conn_tunnel_timer(struct conn *c)
{
	uint64_t	now = util_now_ms();

	if (now >= c->c_deadline_ms)
		c->c_tunnel_dead |= TUNNEL_UP_DEAD;	/* not reading */
	else
		conn_timer_arm(c, c->c_deadline_ms - now);
	conn_tunnel_check(c);
}

void
conn_tunnel_check(struct conn *c)
{
	struct upstream	*u = c->c_up;

	if (!c->c_tunnel_eof || c->c_closing || c->c_state != CONN_TUNNEL)
		return;
	if (u != NULL)
		tunnel_move(c);		/* what came in with the end */
	if (c->c_closing || c->c_r.r_room_wait)
		return;		/* ended, or its bytes wait for a grant */
	if (u != NULL && !(c->c_tunnel_dead & TUNNEL_UP_DEAD) &&
	    upstream_pending(u) > 0) {
		upstream_watch(c);
		return;
	}
	/* the record says what went through, not how long the client
	   lingers */
	conn_audit(c);
	if (u != NULL) {
		/* detached, not freed: we may be inside its callbacks */
		conn_tunnel_fini(c);
		bufferevent_setcb(u->u_bev, NULL, NULL, NULL, NULL);
		bufferevent_disable(u->u_bev, EV_READ | EV_WRITE);
	}
	if (c->c_tunnel_dead & TUNNEL_CLIENT_DEAD)
		conn_close(c, AUD_R_CLIENT_CLOSED);
	else
		conn_close_when_flushed(c);
}
