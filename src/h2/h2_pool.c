/*
 * The worker's pool of upstream HTTP/2 connections, keyed like the
 * HTTP/1.1 pool ("host:port", conn_upstream_key): a request takes a
 * stream on one with room (the origin's SETTINGS_MAX_CONCURRENT_STREAMS,
 * no GOAWAY), else it connects, and a connection whose origin chose h2
 * joins the pool. One with no stream for limits.idle_timeout goes.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/worker.h"
#include "h2/h2.h"
#include "h2/h2_internal.h"
#include "util/util.h"

struct h2_pool {
	TAILQ_HEAD(, h2_cli)	 p_clis;
};

static struct h2_pool *
pool_of(struct worker *w)
{
	if (w->w_h2pool == NULL) {
		w->w_h2pool = xcalloc(1, sizeof(*w->w_h2pool));
		TAILQ_INIT(&w->w_h2pool->p_clis);
	}
	return w->w_h2pool;
}

static void
pool_free_cli(struct h2_cli *h)
{
	TAILQ_REMOVE(&pool_of(h->hc_worker)->p_clis, h, hc_entry);
	h->hc_freeing = 1;
	h2_cli_free(h);
}

/* No stream for idle_timeout, or over with no stream: it goes. */
static void
idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2_cli	*h = arg;

	(void)fd;
	(void)what;
	if (h->hc_nstreams > 0)
		return;
	if (!h->hc_dead)
		h2_cli_goaway(h);
	pool_free_cli(h);
}

void
h2_pool_idle(struct h2_cli *h)
{
	struct timeval	 tv = { 0, 0 };
	uint64_t	 ms = h->hc_worker->w_cfg->c_limits.l_idle_timeout_ms;

	if (h->hc_freeing)
		return;
	if (h->hc_nstreams > 0) {
		evtimer_del(h->hc_idle);
		return;
	}
	if (!h->hc_dead && !h->hc_goaway && !h->hc_worker->w_stopping) {
		tv.tv_sec = (time_t)(ms / 1000);
		tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	}
	/* from the loop: this may run inside the session's callbacks */
	evtimer_add(h->hc_idle, &tv);
}

/* A connection's upstream on stream <s> of <h>. */
static void
up_set(struct upstream *u, struct h2_cli *h, struct h2_cs *s)
{
	s->cs_up = u;
	u->u_h2 = s;
	u->u_worker = h->hc_worker;
	util_copy_str(u->u_key, h->hc_key, sizeof(u->u_key));
	util_copy_str(u->u_addr, h->hc_addr, sizeof(u->u_addr));
	memcpy(u->u_country, h->hc_country, sizeof(u->u_country));
	u->u_asn = h->hc_asn;
	util_copy_str(u->u_via, h->hc_via, sizeof(u->u_via));
}

struct upstream *
h2_pool_take(struct worker *w, const char *key)
{
	struct h2_cli		*h;
	struct h2_cs		*s;
	struct upstream		*u;
	struct bufferevent	*bev;

	if (w->w_h2pool == NULL || w->w_stopping)
		return NULL;
	TAILQ_FOREACH(h, &w->w_h2pool->p_clis, hc_entry) {
		if (strcmp(h->hc_key, key) != 0 || !h2_cli_has_room(h))
			continue;
		if ((s = h2_cs_new(h, &bev)) == NULL)
			return NULL;
		u = xcalloc(1, sizeof(*u));
		u->u_bev = bev;
		up_set(u, h, s);
		/* a stream refused (GOAWAY) before any answer is retried
		   on a new connection like a stale pooled one */
		u->u_reused = 1;
		evtimer_del(h->hc_idle);
		return u;
	}
	return NULL;
}

int
h2_pool_adopt(struct conn *c)
{
	struct upstream		*u = c->c_up;
	struct h2_cli		*h;
	struct h2_cs		*s;
	struct bufferevent	*bev;

	if (!h2_alpn_is_h2(bufferevent_openssl_get_ssl(u->u_bev)))
		return 0;
	h = h2_cli_new(c->c_worker, u->u_bev);
	h->hc_idle = evtimer_new(c->c_worker->w_base, idle_cb, h);
	util_copy_str(h->hc_key, u->u_key, sizeof(h->hc_key));
	util_copy_str(h->hc_addr, u->u_addr, sizeof(h->hc_addr));
	memcpy(h->hc_country, u->u_country, sizeof(h->hc_country));
	h->hc_asn = u->u_asn;
	util_copy_str(h->hc_via, u->u_via, sizeof(h->hc_via));
	TAILQ_INSERT_HEAD(&pool_of(c->c_worker)->p_clis, h, hc_entry);
	u->u_bev = NULL;	/* the session's now */
	if ((s = h2_cs_new(h, &bev)) == NULL) {
		h2_pool_idle(h);
		return -1;
	}
	u->u_bev = bev;
	up_set(u, h, s);
	return 0;
}

void
h2_pool_flush(struct worker *w)
{
	struct h2_cli	*h, *next;

	if (w->w_h2pool == NULL)
		return;
	for (h = TAILQ_FIRST(&w->w_h2pool->p_clis); h != NULL; h = next) {
		next = TAILQ_NEXT(h, hc_entry);
		if (h->hc_nstreams == 0)
			pool_free_cli(h);
		else
			h2_cli_goaway(h);	/* its streams go on */
	}
	if (TAILQ_EMPTY(&w->w_h2pool->p_clis)) {
		free(w->w_h2pool);
		w->w_h2pool = NULL;
	}
}
