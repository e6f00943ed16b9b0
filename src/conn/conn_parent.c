/*
 * Upstream connections through a parent proxy (upstream.proxy, a rule's
 * "via"). Policy, the destination guard, secrets and budgets have all
 * run when we get here: the parent is asked for a tunnel to the address
 * airlock checked (its name only when airlock could not resolve it), and
 * TLS to the origin runs inside that tunnel, verified as if direct.
 * Plain HTTP goes through the same CONNECT, so the origin sees exactly
 * the request the pipeline wrote.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/worker.h"
#include "geo/geo.h"
#include "upstream/upstream.h"
#include "util/util.h"

/*
 * The rule that allowed the exchange. A tunnel (CONNECT spliced or raw,
 * transparent or SOCKS5 raw TCP) has no x_rule_p, only its "policy#N"
 * in x_rule, under the connection's policy.
 */
static const struct cfg_rule *
via_rule(const struct conn *c)
{
	const struct cfg_policy	*p = c->c_policy;
	const char		*hash;
	size_t			 n, idx = 0;

	if (c->c_x->x_rule_p != NULL)
		return c->c_x->x_rule_p;
	if (p == NULL || (hash = strrchr(c->c_x->x_rule, '#')) == NULL)
		return NULL;
	n = (size_t)(hash - c->c_x->x_rule);
	if (strlen(p->p_name) != n || strncmp(p->p_name, c->c_x->x_rule, n))
		return NULL;
	if (hash[1] == '\0')
		return NULL;
	for (hash++; *hash >= '0' && *hash <= '9'; hash++)
		idx = idx * 10 + (size_t)(*hash - '0');
	if (*hash != '\0' || idx >= p->p_nrules)
		return NULL;
	return &p->p_rules[idx];
}

const struct up_parent *
conn_via(const struct conn *c)
{
	const struct cfg_rule	*r = via_rule(c);

	if (r != NULL && r->r_via_direct)
		return NULL;
	if (r != NULL && r->r_via != NULL)
		return r->r_via;
	return c->c_cfg->c_upstream_proxy;
}

static void
parent_dialed(void *arg, int ok, const char *reason)
{
	struct conn	*c = arg;

	conn_ref(c);
	up_dial_free(c->c_up->u_dial);
	c->c_up->u_dial = NULL;
	if (!ok)
		conn_upstream_failed(c, AUD_R_UPSTREAM_UNREACHABLE, reason);
	else if (conn_upstream_tunnel_open(c) == -1)
		conn_upstream_failed(c, AUD_R_UPSTREAM_UNREACHABLE,
		    "cannot set up TLS towards the upstream");
	conn_unref(c);
}

int
conn_parent_connect(struct conn *c, const struct up_parent *p)
{
	struct upstream		*u;
	struct bufferevent	*sock;
	const struct net_addr	*a = NULL;
	char			 target[INET6_ADDRSTRLEN + 256];
	size_t			 i;
	int			 one = 1, err = 0;

	if (c->c_r.r_naddrs > 0) {
		a = &c->c_r.r_addrs[0];
		net_addr_format(a, target, sizeof(target));
	} else
		util_copy_str(target, c->c_x->x_host, sizeof(target));
	/* one try per request: the parent picks its own way on */
	c->c_r.r_next_addr = c->c_r.r_naddrs;
	u = xcalloc(1, sizeof(*u));
	u->u_worker = c->c_worker;
	conn_upstream_key(c, u->u_key, sizeof(u->u_key));
	snprintf(u->u_addr, sizeof(u->u_addr), strchr(target, ':') != NULL ?
	    "[%s]:%d" : "%s:%d", target, c->c_x->x_port);
	util_copy_str(u->u_via, p->p_url, sizeof(u->u_via));
	if (a != NULL)
		(void)geo_lookup_addr(c->c_cfg->c_geo, a, u->u_country,
		    &u->u_asn);
	for (i = 0; i < p->p_naddrs; i++) {
		sock = bufferevent_socket_new(c->c_worker->w_base, -1,
		    BEV_OPT_CLOSE_ON_FREE);
		if (sock == NULL)
			break;
		if (bufferevent_socket_connect(sock,
		    (struct sockaddr *)&p->p_addrs[i], (int)p->p_lens[i]) ==
		    -1) {
			err = errno;
			bufferevent_free(sock);
			if (err == EMFILE || err == ENFILE)
				break;
			continue;
		}
		(void)setsockopt(bufferevent_getfd(sock), IPPROTO_TCP,
		    TCP_NODELAY, &one, sizeof(one));
		u->u_bev = sock;
		c->c_up = u;
		u->u_dial = up_dial_new(sock, p, target, c->c_x->x_port,
		    parent_dialed, c);
		return 0;
	}
	upstream_free(u);
	errno = err;
	return -1;
}
