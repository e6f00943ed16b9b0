/*
 * Raw byte pump for CONNECT tunnels and upgraded (WebSocket) connections:
 * each side's input goes to the other side's output, and a side stops
 * reading while the other has CONN_HIWAT bytes waiting.
 */
#include "config.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "cfg/cfg.h"
#include "conn/conn.h"

/*
 * Move <from>'s input to <to>, <up> when towards the upstream. Charged to
 * the sandbox as it moves (conn_budget_allow batches the charges); what
 * would pass a bytes cap stays behind and the tunnel is cut.
 */
static void
pump(struct conn *c, struct bufferevent *from, struct bufferevent *to,
    uint64_t *count, int up)
{
	struct evbuffer	*in = bufferevent_get_input(from);
	struct evbuffer	*out = bufferevent_get_output(to);
	size_t		 n = evbuffer_get_length(in), ok;

	if (c->c_closing)
		return;
	if (n > 0) {
		ok = conn_budget_allow(c, up, n);
		*count += ok;
		if (ok == n)
			evbuffer_add_buffer(out, in);
		else {
			evbuffer_remove_buffer(in, out, ok);
			conn_budget_cut(c);
			return;
		}
	}
	if (evbuffer_get_length(out) >= CONN_HIWAT)
		bufferevent_disable(from, EV_READ);
	else
		bufferevent_enable(from, EV_READ);
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
			c->c_r.r_status = 200;
		}
		bufferevent_setwatermark(c->c_bev, EV_WRITE, 0, 0);
		bufferevent_setwatermark(c->c_up->u_bev, EV_WRITE, 0, 0);
	}
	pump(c, c->c_bev, c->c_up->u_bev, &c->c_r.r_bytes_out, 1);
	pump(c, c->c_up->u_bev, c->c_bev, &c->c_r.r_bytes_in, 0);
}

/*
 * One side of a tunnel ended (EOF or error): hand the other side what is
 * still buffered, then close once it is written.
 */
void
conn_tunnel_eof(struct conn *c)
{
	conn_tunnel_start(c);
	c->c_tunnel_eof = 1;
	bufferevent_disable(c->c_bev, EV_READ);
	if (c->c_up != NULL)
		bufferevent_disable(c->c_up->u_bev, EV_READ);
	conn_tunnel_check(c);
}

void
conn_tunnel_check(struct conn *c)
{
	if (!c->c_tunnel_eof)
		return;
	if (evbuffer_get_length(bufferevent_get_output(c->c_bev)) == 0 &&
	    (c->c_up == NULL ||
	    evbuffer_get_length(bufferevent_get_output(c->c_up->u_bev)) == 0))
		conn_close(c);
}
