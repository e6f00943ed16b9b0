/*
 * Create-after-write in fleet mode: an admin answer that changed the
 * shared registry (create, delete, usage reset) is sent once Redis has
 * the change, so a login on another gateway right after it is known
 * there. The wait is an event on the main loop, woken by the registry's
 * thread (sbx_fleet_ack_watch) or by limits.store_timeout; nothing
 * blocks the admin loop or a worker meanwhile. A client that hangs up
 * meanwhile changes nothing but that the answer is dropped (admin.c);
 * at stop (admin_stop) the waits still there end at once.
 */
#include "config.h"

#include <sys/queue.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#include <event2/event.h>

#include "admin/admin_internal.h"
#include "cfg/cfg.h"
#include "cfg/cfg_internal.h"
#include "sbx/sbx_fleet.h"
#include "util/log.h"
#include "util/util.h"

struct adm_wait {
	TAILQ_ENTRY(adm_wait)	 w_entry;
	struct admin_defer	*w_defer;
	struct event		*w_ev;
	uint64_t		 w_seq;
	int			 w_acked;
	adm_fleet_fill_fn	*w_fill;
	void			*w_arg;
};

/* The answers waiting: finished by adm_fleet_stop() if still there. */
static TAILQ_HEAD(, adm_wait)	adm_waits = TAILQ_HEAD_INITIALIZER(adm_waits);

static void
wait_fill(struct admin_resp *r, void *arg)
{
	struct adm_wait	*w = arg;

	w->w_fill(r, w->w_arg, w->w_acked);
	free(w);
}

/* The wait ends (on the main loop): its answer, sent or dropped. */
static void
wait_end(struct adm_wait *w, int stopping)
{
	TAILQ_REMOVE(&adm_waits, w, w_entry);
	/* no activation from the registry's thread after this */
	sbx_fleet_unwatch(w->w_ev);
	event_free(w->w_ev);
	w->w_acked = sbx_fleet_acked(w->w_seq);
	if (!w->w_acked && stopping)
		w->w_acked = -1;
	else if (!w->w_acked)
		log_warnx("admin: the fleet's registry (Redis) did not "
		    "acknowledge a change within limits.store_timeout");
	admin_defer_answer(w->w_defer, wait_fill, w);
}

/* Redis acknowledged, or the timeout passed. */
static void
wait_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	wait_end(arg, 0);
}

void
adm_fleet_answer(struct admin_resp *r, uint64_t seq, adm_fleet_fill_fn *fill,
    void *arg)
{
	const struct cfg	*cfg = admin_hooks.ah_cfg();
	struct adm_wait		*w;
	struct timeval		 tv;
	uint64_t		 ms = cfg->c_limits.l_store_timeout_ms;

	if (!sbx_fleet_on() || sbx_fleet_acked(seq)) {
		fill(r, arg, 1);
		return;
	}
	/* never queued (queue full), or Redis known away: no wait */
	if (seq == 0 || !sbx_fleet_ready()) {
		fill(r, arg, 0);
		return;
	}
	w = xcalloc(1, sizeof(*w));
	w->w_seq = seq;
	w->w_fill = fill;
	w->w_arg = arg;
	/* armed before the registry may wake it */
	if ((w->w_ev = event_new(admin_base(), -1, 0, wait_cb, w)) == NULL)
		fatalx("admin: event_new");
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	event_add(w->w_ev, &tv);
	switch (sbx_fleet_ack_watch(seq, w->w_ev)) {
	case 0:
		w->w_defer = admin_defer(r);
		TAILQ_INSERT_TAIL(&adm_waits, w, w_entry);
		return;
	default:			/* in Redis already, or stopped */
		event_free(w->w_ev);
		fill(r, arg, sbx_fleet_acked(seq));
		free(w);
	}
}

void
adm_fleet_stop(void)
{
	while (!TAILQ_EMPTY(&adm_waits))
		wait_end(TAILQ_FIRST(&adm_waits), 1);
}

void
adm_fleet_unconfirmed(struct admin_resp *r, const char *what)
{
	char	why[256];

	snprintf(why, sizeof(why), "%s: the fleet's shared registry (Redis) "
	    "did not confirm it within limits.store_timeout", what);
	admin_error(r, 503, "budget_unavailable", why);
}
