/*
 * Unidentified connection slots: a table of source addresses shared by
 * the workers (one mutex; touched only at accept and at identification,
 * never per byte), plus a gateway-wide count.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_slots.h"
#include "dns/net_guard.h"
#include "util/util.h"

#define SLOT_BUCKETS	1024

struct slot_src {
	struct slot_src	*ss_next;
	struct net_addr	 ss_addr;
	size_t		 ss_n;		/* unidentified connections from it */
};

struct conn_slot {
	struct slot_src	*cs_src;
	uint64_t	 cs_deadline_ms;	/* identify by then */
};

static pthread_mutex_t	 slots_mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot_src	*slots_tab[SLOT_BUCKETS];
static size_t		 slots_total;

static size_t
slot_hash(const struct net_addr *a)
{
	size_t	h = 2166136261u, i, n = a->na_family == AF_INET ? 4 : 16;

	for (i = 0; i < n; i++)
		h = (h ^ a->na_bytes[i]) * 16777619u;
	return h % SLOT_BUCKETS;
}

static struct slot_src **
slot_find(const struct net_addr *a)
{
	struct slot_src	**pp;

	for (pp = &slots_tab[slot_hash(a)]; *pp != NULL; pp = &(*pp)->ss_next)
		if ((*pp)->ss_addr.na_family == a->na_family &&
		    memcmp((*pp)->ss_addr.na_bytes, a->na_bytes, 16) == 0)
			return pp;
	return pp;
}

/* max_connections * share / 100, at least one. */
static size_t
slot_share(const struct cfg_limits *l)
{
	size_t	n = l->l_max_connections / 100 * l->l_unidentified_share +
	    l->l_max_connections % 100 * l->l_unidentified_share / 100;

	return n > 0 ? n : 1;
}

const char *
conn_slot_take(struct conn *c, const struct sockaddr *sa)
{
	const struct cfg_limits	*l = &c->c_cfg->c_limits;
	struct slot_src		**pp, *src;
	struct net_addr		  a;
	const char		 *why = NULL;

	memset(&a, 0, sizeof(a));
	if (net_addr_from_sockaddr(sa, &a) == -1)
		a.na_family = AF_UNSPEC;	/* one bucket for the odd */
	pthread_mutex_lock(&slots_mu);
	pp = slot_find(&a);
	if (slots_total >= slot_share(l))
		why = "gateway limit of connections not identified yet "
		    "reached (limits.unidentified_share)";
	else if (*pp != NULL && (*pp)->ss_n >= l->l_unidentified_per_source)
		why = "too many connections not identified yet from this "
		    "address (limits.unidentified_per_source)";
	else {
		if ((src = *pp) == NULL) {
			src = xcalloc(1, sizeof(*src));
			src->ss_addr = a;
			*pp = src;
		}
		src->ss_n++;
		slots_total++;
		c->c_slot = xcalloc(1, sizeof(*c->c_slot));
		c->c_slot->cs_src = src;
		c->c_slot->cs_deadline_ms = util_now_ms() +
		    l->l_identify_timeout_ms;
	}
	pthread_mutex_unlock(&slots_mu);
	return why;
}

void
conn_slot_release(struct conn *c)
{
	struct slot_src	**pp, *src;

	if (c->c_slot == NULL)
		return;
	src = c->c_slot->cs_src;
	pthread_mutex_lock(&slots_mu);
	slots_total--;
	if (--src->ss_n == 0) {
		pp = slot_find(&src->ss_addr);
		*pp = src->ss_next;
		free(src);
	}
	pthread_mutex_unlock(&slots_mu);
	free(c->c_slot);
	c->c_slot = NULL;
}

uint64_t
conn_slot_bound_ms(const struct conn *c, uint64_t ms)
{
	uint64_t	now;

	if (c->c_slot == NULL)
		return ms;
	now = util_now_ms();
	if (now >= c->c_slot->cs_deadline_ms)
		return 1;
	return ms < c->c_slot->cs_deadline_ms - now ? ms :
	    c->c_slot->cs_deadline_ms - now;
}
