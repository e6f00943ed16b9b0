#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "cfg/cfg.h"
#include "dns/dns.h"
#include "util/log.h"
#include "util/util.h"

struct dns_req {
	dns_cb				 dr_cb;
	void				*dr_arg;
	struct evdns_getaddrinfo_request *dr_gai;
	struct event			*dr_ev;	/* deferred answer */
	struct net_addr			 dr_addrs[DNS_MAX_ADDRS];
	size_t				 dr_naddrs;
	const char			*dr_err;
	int				 dr_pending_gai;
	int				 dr_cancelled;
};

struct evdns_base *
dns_base_new(struct event_base *base, const struct cfg *cfg)
{
	struct evdns_base	*dns;

	if (strcmp(cfg->c_upstream_resolver, "system") == 0) {
		dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
		    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	} else {
		dns = evdns_base_new(base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
		if (dns != NULL) {
			if (evdns_base_nameserver_ip_add(dns,
			    cfg->c_upstream_resolver) != 0)
				log_warnx("resolver %s: cannot use it",
				    cfg->c_upstream_resolver);
			evdns_base_load_hosts(dns, NULL);
		}
	}
	if (dns == NULL)
		fatalx("evdns_base_new failed");
	/* an agent waiting on a dead resolver should hear back quickly */
	evdns_base_set_option(dns, "timeout:", "3");
	evdns_base_set_option(dns, "attempts:", "2");
	return dns;
}

void
dns_base_free(struct evdns_base *dns)
{
	if (dns != NULL)
		evdns_base_free(dns, 1);
}

static void
dns_deliver(evutil_socket_t fd, short what, void *arg)
{
	struct dns_req	*r = arg;

	event_free(r->dr_ev);
	if (!r->dr_cancelled)
		r->dr_cb(r->dr_naddrs > 0 ? NULL : r->dr_err, r->dr_addrs,
		    r->dr_naddrs, r->dr_arg);
	free(r);
}

static void
dns_gai_done(int result, struct evutil_addrinfo *res, void *arg)
{
	struct dns_req		*r = arg;
	struct evutil_addrinfo	*ai;

	r->dr_gai = NULL;
	r->dr_pending_gai = 0;
	if (result != 0)
		r->dr_err = result == EVUTIL_EAI_NONAME ||
		    result == EVUTIL_EAI_NODATA ? "name does not resolve" :
		    "name resolution failed";
	else
		r->dr_err = "name has no usable address";
	for (ai = res; ai != NULL && r->dr_naddrs < DNS_MAX_ADDRS;
	    ai = ai->ai_next) {
		if (net_addr_from_sockaddr(ai->ai_addr,
		    &r->dr_addrs[r->dr_naddrs]) == 0)
			r->dr_naddrs++;
	}
	if (res != NULL)
		evutil_freeaddrinfo(res);
	/* may run inside evdns_getaddrinfo(): always answer from the loop */
	event_active(r->dr_ev, EV_TIMEOUT, 0);
}

struct dns_req *
dns_resolve(struct event_base *base, struct evdns_base *dns,
    const struct cfg *cfg, const char *host, dns_cb cb, void *arg)
{
	struct dns_req		*r;
	struct evutil_addrinfo	 hints;
	size_t			 i;

	r = xcalloc(1, sizeof(*r));
	r->dr_cb = cb;
	r->dr_arg = arg;
	r->dr_ev = event_new(base, -1, 0, dns_deliver, r);
	if (r->dr_ev == NULL)
		fatalx("event_new failed");

	for (i = 0; i < cfg->c_nupstream_hosts; i++) {
		if (strcmp(cfg->c_upstream_hosts[i].h_name, host) != 0)
			continue;
		if (net_host_literal(cfg->c_upstream_hosts[i].h_ip,
		    &r->dr_addrs[0]) == 1)
			r->dr_naddrs = 1;
		r->dr_err = "bad upstream.hosts address";
		event_active(r->dr_ev, EV_TIMEOUT, 0);
		return r;
	}
	if (net_host_literal(host, &r->dr_addrs[0]) == 1) {
		r->dr_naddrs = 1;
		event_active(r->dr_ev, EV_TIMEOUT, 0);
		return r;
	}

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	r->dr_pending_gai = 1;
	r->dr_gai = evdns_getaddrinfo(dns, host, NULL, &hints, dns_gai_done,
	    r);
	return r;
}

void
dns_cancel(struct dns_req *r)
{
	if (r == NULL)
		return;
	r->dr_cancelled = 1;
	/* evdns calls back with EVUTIL_EAI_CANCEL, then we free */
	if (r->dr_pending_gai && r->dr_gai != NULL)
		evdns_getaddrinfo_cancel(r->dr_gai);
}
