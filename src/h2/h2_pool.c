/*
 * The worker's pool of upstream HTTP/2 connections, keyed like the
 * HTTP/1.1 pool ("host:port", conn_upstream_key): a request takes a
 * stream on one with room (the origin's SETTINGS_MAX_CONCURRENT_STREAMS,
 * no GOAWAY), else it connects, and a connection whose origin chose h2
 * joins the pool. One with no stream for limits.idle_timeout goes.
 *
 * A burst of requests to an origin not known to speak HTTP/1.1 opens one
 * connection, not one each: while a TLS connection to the key is being
 * set up (its owner), the others wait (h2_pool_wait) until the origin's
 * SETTINGS came, then share it up to its MAX_CONCURRENT_STREAMS; one that
 * finds it full (or HTTP/1.1, or failed) becomes the next owner or goes
 * its own way.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_internal.h"
#include "conn/worker.h"
#include "h2/h2.h"
#include "h2/h2_internal.h"
#include "tls/tls.h"
#include "util/util.h"

/* A connection to <pe_key> being set up, and who waits for it. */
struct h2_pend {
	TAILQ_ENTRY(h2_pend)	 pe_entry;
	char			 pe_key[300];
	struct conn		*pe_owner;	/* connecting, or NULL */
	struct h2_cli		*pe_cli;	/* h2: until its SETTINGS */
	struct conn		**pe_wait;
	size_t			 pe_nwait, pe_cap;
	struct event		*pe_wake;
	struct worker		*pe_worker;
};

#define H2_POOL_H1_KEYS	16

struct h2_pool {
	TAILQ_HEAD(, h2_cli)	 p_clis;
	TAILQ_HEAD(, h2_pend)	 p_pends;
	/* origins that chose HTTP/1.1 lately: their bursts do not wait */
	char			 p_h1[H2_POOL_H1_KEYS][300];
	unsigned		 p_h1_next;
};

static struct h2_pool *
pool_of(struct worker *w)
{
	if (w->w_h2pool == NULL) {
		w->w_h2pool = xcalloc(1, sizeof(*w->w_h2pool));
		TAILQ_INIT(&w->w_h2pool->p_clis);
		TAILQ_INIT(&w->w_h2pool->p_pends);
	}
	return w->w_h2pool;
}

static void
pend_free(struct h2_pool *p, struct h2_pend *pe)
{
	TAILQ_REMOVE(&p->p_pends, pe, pe_entry);
	event_free(pe->pe_wake);
	free(pe->pe_wait);
	free(pe);
}

/* The waiters look again, one at a time (each may free itself). */
static void
pend_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2_pend	*pe = arg;
	struct h2_pool	*p = pool_of(pe->pe_worker);
	struct conn	*c;

	(void)fd;
	(void)what;
	while (pe->pe_nwait > 0) {
		c = pe->pe_wait[0];
		memmove(pe->pe_wait, pe->pe_wait + 1,
		    --pe->pe_nwait * sizeof(*pe->pe_wait));
		conn_ref(c);
		conn_find_upstream(c);
		conn_unref(c);
	}
	pend_free(p, pe);
}

/* <pe>'s connection is up (SETTINGS came), HTTP/1.1 or gone. */
static void
pend_done(struct h2_pend *pe)
{
	pe->pe_owner = NULL;
	pe->pe_cli = NULL;
	event_active(pe->pe_wake, EV_TIMEOUT, 1);
}

static int
key_is_h1(struct h2_pool *p, const char *key)
{
	unsigned	i;

	for (i = 0; i < H2_POOL_H1_KEYS; i++)
		if (strcmp(p->p_h1[i], key) == 0)
			return 1;
	return 0;
}

int
h2_pool_wait(struct conn *c, const char *key)
{
	struct h2_pool	*p = pool_of(c->c_worker);
	struct h2_pend	*pe;

	if (!c->c_tls || !(c->c_cfg->c_upstream_alpn & TLS_ALPN_H2) ||
	    c->c_worker->w_stopping || key_is_h1(p, key))
		return 0;
	TAILQ_FOREACH(pe, &p->p_pends, pe_entry) {
		if ((pe->pe_owner == NULL && pe->pe_cli == NULL) ||
		    strcmp(pe->pe_key, key) != 0)
			continue;
		if (pe->pe_nwait == pe->pe_cap) {
			pe->pe_cap = pe->pe_cap ? pe->pe_cap * 2 : 8;
			pe->pe_wait = xrealloc(pe->pe_wait,
			    pe->pe_cap * sizeof(*pe->pe_wait));
		}
		pe->pe_wait[pe->pe_nwait++] = c;
		c->c_state = CONN_WAIT;
		conn_timer_arm(c, c->c_cfg->c_limits.l_connect_timeout_ms);
		return 1;
	}
	/* none under way: <c>'s connection is the one the next wait for */
	pe = xcalloc(1, sizeof(*pe));
	util_copy_str(pe->pe_key, key, sizeof(pe->pe_key));
	pe->pe_owner = c;
	pe->pe_worker = c->c_worker;
	pe->pe_wake = event_new(c->c_worker->w_base, -1, 0, pend_wake_cb, pe);
	TAILQ_INSERT_TAIL(&p->p_pends, pe, pe_entry);
	return 0;
}

void
h2_pool_forget(struct conn *c)
{
	struct h2_pend	*pe;
	size_t		 i;

	if (c->c_worker->w_h2pool == NULL)
		return;
	TAILQ_FOREACH(pe, &c->c_worker->w_h2pool->p_pends, pe_entry) {
		if (pe->pe_owner == c)
			pend_done(pe);
		for (i = 0; i < pe->pe_nwait; i++) {
			if (pe->pe_wait[i] != c)
				continue;
			memmove(pe->pe_wait + i, pe->pe_wait + i + 1,
			    (--pe->pe_nwait - i) * sizeof(*pe->pe_wait));
			break;
		}
	}
}

void
h2_pool_ready(struct h2_cli *h)
{
	struct h2_pend	*pe;

	if (h->hc_worker->w_h2pool == NULL)
		return;
	TAILQ_FOREACH(pe, &h->hc_worker->w_h2pool->p_pends, pe_entry)
		if (pe->pe_cli == h)
			pend_done(pe);
}

/* <c>'s connection is up: its waiters wait for the SETTINGS (h2) or go. */
static void
pend_connected(struct conn *c, struct h2_cli *h)
{
	struct h2_pool	*p = pool_of(c->c_worker);
	struct h2_pend	*pe;

	if (h == NULL && !key_is_h1(p, c->c_up->u_key)) {
		util_copy_str(p->p_h1[p->p_h1_next], c->c_up->u_key,
		    sizeof(p->p_h1[0]));
		p->p_h1_next = (p->p_h1_next + 1) % H2_POOL_H1_KEYS;
	}
	TAILQ_FOREACH(pe, &p->p_pends, pe_entry) {
		if (pe->pe_owner != c)
			continue;
		if (h == NULL)
			pend_done(pe);
		else {
			pe->pe_owner = NULL;
			pe->pe_cli = h;
		}
	}
}

static void
pool_free_cli(struct h2_cli *h)
{
	TAILQ_REMOVE(&pool_of(h->hc_worker)->p_clis, h, hc_entry);
	h2_pool_ready(h);
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

	if (!h2_alpn_is_h2(bufferevent_openssl_get_ssl(u->u_bev))) {
		pend_connected(c, NULL);
		return 0;
	}
	h = h2_cli_new(c->c_worker, u->u_bev);
	h->hc_idle = evtimer_new(c->c_worker->w_base, idle_cb, h);
	util_copy_str(h->hc_key, u->u_key, sizeof(h->hc_key));
	util_copy_str(h->hc_addr, u->u_addr, sizeof(h->hc_addr));
	memcpy(h->hc_country, u->u_country, sizeof(h->hc_country));
	h->hc_asn = u->u_asn;
	util_copy_str(h->hc_via, u->u_via, sizeof(h->hc_via));
	TAILQ_INSERT_HEAD(&pool_of(c->c_worker)->p_clis, h, hc_entry);
	pend_connected(c, h);
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
	if (TAILQ_EMPTY(&w->w_h2pool->p_clis) &&
	    TAILQ_EMPTY(&w->w_h2pool->p_pends)) {
		free(w->w_h2pool);
		w->w_h2pool = NULL;
	}
}
