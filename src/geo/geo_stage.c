/*
 * The destination stage (pipe/stage.h): its dest hook sees the addresses
 * a request's host resolved to, before anything connects. Every address
 * is checked, since one bad answer spoils the name: the destination
 * guard (upstream.allow_networks / deny), the gateway's own addresses,
 * then the policy's countries (geo_deny / geo_allow).
 */
#include "config.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>

#include "cfg/cfg.h"
#include "dns/net_guard.h"
#include "dns/net_self.h"
#include "geo/geo.h"
#include "pipe/stage.h"
#include "pipe/xchg.h"

static enum xs_verdict
geo_dest(struct xs_call *xc)
{
	const struct cfg_policy	*p = xc->xc_policy;
	struct xchg		*x = xc->xc_x;
	char			 why[64], ip[INET6_ADDRSTRLEN], cc[3];
	const char		*list;
	uint32_t		 asn;
	size_t			 i;

	for (i = 0; i < xc->xc_naddrs; i++) {
		if (!net_guard_check(xc->xc_cfg->c_guard, &xc->xc_addrs[i],
		    why, sizeof(why))) {
			net_addr_format(&xc->xc_addrs[i], ip, sizeof(ip));
			x->x_allowed = 0;
			return xs_deny(xc, AUD_R_DENIED, "destination %s "
			    "resolves to %s in denied network %s", x->x_host,
			    ip, why);
		}
		/* allow_networks cannot open the gateway to itself */
		if (net_self_check(xc->xc_cfg->c_self, &xc->xc_addrs[i],
		    x->x_port, xc->xc_reason, sizeof(xc->xc_reason))) {
			x->x_allowed = 0;
			xc->xc_why = AUD_R_DENIED;
			return XS_DENY;
		}
	}
	for (i = 0; p != NULL && (p->p_ngeo_deny > 0 ||
	    p->p_ngeo_allow > 0) && i < xc->xc_naddrs; i++) {
		(void)geo_lookup_addr(xc->xc_cfg->c_geo, &xc->xc_addrs[i], cc,
		    &asn);
		if (geo_policy_allows(p, cc, &list))
			continue;
		net_addr_format(&xc->xc_addrs[i], ip, sizeof(ip));
		x->x_allowed = 0;
		return xs_deny(xc, AUD_R_DENIED, "destination %s resolves to "
		    "%s in %s%s, denied by policy \"%s\" (%s)", x->x_host, ip,
		    cc[0] != '\0' ? "country " : "no known country", cc,
		    p->p_name, list);
	}
	return XS_GO;
}

const struct xstage geo_stage = {
	.xs_name = "dest",
	.xs_dest = geo_dest,
};
