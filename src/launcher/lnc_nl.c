/*
 * Just enough rtnetlink for the netns backend: links (veth, dummy),
 * addresses and routes. Building a request is appending attributes to one
 * buffer; every request asks for an ACK and waits for it, so errors come
 * back as errno from the kernel. Shelling out to ip(8) costs 10-20 ms per
 * sandbox; this costs tens of microseconds per call.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include "launcher/lnc_internal.h"

#define NLB_SIZE	1024

struct nlb {
	union {
		struct nlmsghdr	h;
		char		buf[NLB_SIZE];
	} n;
};

static uint32_t	nl_seq;

static void
nlb_init(struct nlb *b, int type, int flags)
{
	memset(b, 0, sizeof(*b));
	b->n.h.nlmsg_len = NLMSG_LENGTH(0);
	b->n.h.nlmsg_type = type;
	b->n.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	b->n.h.nlmsg_seq = ++nl_seq;
}

/* Append <len> bytes (zeroed when <data> is NULL), aligned. */
static void *
nlb_put(struct nlb *b, const void *data, size_t len)
{
	char	*p = b->n.buf + NLMSG_ALIGN(b->n.h.nlmsg_len);

	if (NLMSG_ALIGN(b->n.h.nlmsg_len) + RTA_ALIGN(len) > NLB_SIZE)
		abort();		/* our own requests are small */
	if (data != NULL)
		memcpy(p, data, len);
	else
		memset(p, 0, len);
	b->n.h.nlmsg_len = NLMSG_ALIGN(b->n.h.nlmsg_len) + RTA_ALIGN(len);
	return p;
}

static struct rtattr *
nla_put(struct nlb *b, int type, const void *data, size_t len)
{
	struct rtattr	*rta;

	rta = nlb_put(b, NULL, RTA_LENGTH(len));
	rta->rta_type = type;
	rta->rta_len = RTA_LENGTH(len);
	if (data != NULL)
		memcpy(RTA_DATA(rta), data, len);
	return rta;
}

static void
nla_put_u32(struct nlb *b, int type, uint32_t v)
{
	nla_put(b, type, &v, sizeof(v));
}

static void
nla_put_str(struct nlb *b, int type, const char *s)
{
	nla_put(b, type, s, strlen(s) + 1);
}

static struct rtattr *
nla_nest(struct nlb *b, int type)
{
	return nla_put(b, type, NULL, 0);
}

static void
nla_nest_end(struct nlb *b, struct rtattr *rta)
{
	rta->rta_len = (char *)b->n.buf + b->n.h.nlmsg_len - (char *)rta;
}

int
lnc_nl_open(void)
{
	struct sockaddr_nl	sa;
	int			fd, one = 1;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd == -1)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
		close(fd);
		return -1;
	}
	/* errors without the request echoed back: smaller answers */
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	return fd;
}

/*
 * Send <b> and read until its ACK (or error). With <cb>, every answer
 * message of the right sequence number that is not the ACK goes to it
 * (dumps, NLM_F_ECHO); a dump ends with NLMSG_DONE.
 */
static int
nl_talk(int nl, struct nlb *b, int (*cb)(struct nlmsghdr *, void *),
    void *arg)
{
	char		 buf[16384];
	struct nlmsghdr	*h;
	ssize_t		 n;
	int		 err = 0, done = 0;

	if (send(nl, &b->n.h, b->n.h.nlmsg_len, 0) == -1)
		return -1;
	while (!done) {
		n = recv(nl, buf, sizeof(buf), 0);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		    h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != b->n.h.nlmsg_seq)
				continue;	/* late answer, old request */
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr	*e = NLMSG_DATA(h);

				err = -e->error;
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (cb != NULL && cb(h, arg) == -1)
				err = err ? err : EIO;
		}
	}
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* Start a link request <b> (on <ifindex>, 0: none): its ifinfomsg. */
static struct ifinfomsg *
nlb_link(struct nlb *b, int type, int flags, int ifindex)
{
	struct ifinfomsg	*ifi;

	nlb_init(b, type, flags);
	ifi = nlb_put(b, NULL, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	return ifi;
}

static int
getlink_cb(struct nlmsghdr *h, void *arg)
{
	struct ifinfomsg	*ifi;

	if (h->nlmsg_type != RTM_NEWLINK ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
		return 0;
	ifi = NLMSG_DATA(h);
	*(int *)arg = ifi->ifi_index;
	return 0;
}

int
lnc_nl_link_index(int nl, const char *name)
{
	struct nlb		 b;
	int			 index = 0;

	nlb_link(&b, RTM_GETLINK, 0, 0);
	nla_put_u32(&b, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	nla_put_str(&b, IFLA_IFNAME, name);
	if (nl_talk(nl, &b, getlink_cb, &index) == -1)
		return errno == ENODEV ? 0 : -1;
	return index;
}

int
lnc_nl_link_add(int nl, const char *name, const char *kind)
{
	struct nlb		 b;
	struct rtattr		*li;

	nlb_link(&b, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0);
	nla_put_str(&b, IFLA_IFNAME, name);
	li = nla_nest(&b, IFLA_LINKINFO);
	nla_put_str(&b, IFLA_INFO_KIND, kind);
	nla_nest_end(&b, li);
	return nl_talk(nl, &b, NULL, NULL);
}

int
lnc_nl_veth_add(int nl, const char *name, const char *peer, int peer_nsfd)
{
	struct nlb		 b;
	struct rtattr		*li, *data, *pi;

	nlb_link(&b, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0);
	nla_put_str(&b, IFLA_IFNAME, name);
	li = nla_nest(&b, IFLA_LINKINFO);
	nla_put_str(&b, IFLA_INFO_KIND, "veth");
	data = nla_nest(&b, IFLA_INFO_DATA);
	pi = nla_nest(&b, VETH_INFO_PEER);
	/* the peer's attributes follow its own ifinfomsg */
	nlb_put(&b, NULL, sizeof(struct ifinfomsg));
	nla_put_str(&b, IFLA_IFNAME, peer);
	nla_put_u32(&b, IFLA_NET_NS_FD, (uint32_t)peer_nsfd);
	nla_nest_end(&b, pi);
	nla_nest_end(&b, data);
	nla_nest_end(&b, li);
	return nl_talk(nl, &b, NULL, NULL);
}

int
lnc_nl_link_del(int nl, int ifindex)
{
	struct nlb	b;

	nlb_link(&b, RTM_DELLINK, 0, ifindex);
	return nl_talk(nl, &b, NULL, NULL);
}

int
lnc_nl_link_up(int nl, int ifindex)
{
	struct nlb		 b;
	struct ifinfomsg	*ifi;

	ifi = nlb_link(&b, RTM_NEWLINK, 0, ifindex);
	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	return nl_talk(nl, &b, NULL, NULL);
}

static int
nl_addr(int nl, int type, int flags, int ifindex, in_addr_t a, int plen)
{
	struct nlb		 b;
	struct ifaddrmsg	*ifa;

	nlb_init(&b, type, flags);
	ifa = nlb_put(&b, NULL, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = plen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = ifindex;
	nla_put(&b, IFA_LOCAL, &a, sizeof(a));
	nla_put(&b, IFA_ADDRESS, &a, sizeof(a));
	return nl_talk(nl, &b, NULL, NULL);
}

int
lnc_nl_addr_add(int nl, int ifindex, in_addr_t a, int plen)
{
	return nl_addr(nl, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE,
	    ifindex, a, plen);
}

int
lnc_nl_addr_del(int nl, int ifindex, in_addr_t a, int plen)
{
	return nl_addr(nl, RTM_DELADDR, 0, ifindex, a, plen);
}

int
lnc_nl_route(int nl, int add, in_addr_t dst, int plen, int type,
    int ifindex, in_addr_t gw, in_addr_t src)
{
	struct nlb	 b;
	struct rtmsg	*rtm;

	nlb_init(&b, add ? RTM_NEWROUTE : RTM_DELROUTE,
	    add ? NLM_F_CREATE | NLM_F_REPLACE : 0);
	rtm = nlb_put(&b, NULL, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = plen;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_type = type;
	if (type == RTN_BLACKHOLE)
		rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	else if (gw != 0)
		rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	else
		rtm->rtm_scope = RT_SCOPE_LINK;
	if (gw != 0)
		rtm->rtm_flags = RTNH_F_ONLINK;
	if (plen > 0)
		nla_put(&b, RTA_DST, &dst, sizeof(dst));
	if (ifindex > 0)
		nla_put_u32(&b, RTA_OIF, (uint32_t)ifindex);
	if (gw != 0)
		nla_put(&b, RTA_GATEWAY, &gw, sizeof(gw));
	if (src != 0)
		nla_put(&b, RTA_PREFSRC, &src, sizeof(src));
	return nl_talk(nl, &b, NULL, NULL);
}

struct prefix_dump {
	const char	*pd_prefix;
	int		 pd_index[256];
	size_t		 pd_n;
};

static int
prefix_cb(struct nlmsghdr *h, void *arg)
{
	struct prefix_dump	*pd = arg;
	struct ifinfomsg	*ifi;
	struct rtattr		*rta;
	size_t			 plen = strlen(pd->pd_prefix);
	int			 len;
	const char		*name, *p;

	if (h->nlmsg_type != RTM_NEWLINK ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
		return 0;
	ifi = NLMSG_DATA(h);
	len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*ifi));
	for (rta = IFLA_RTA(ifi); RTA_OK(rta, len);
	    rta = RTA_NEXT(rta, len)) {
		if (rta->rta_type != IFLA_IFNAME)
			continue;
		name = RTA_DATA(rta);
		if (RTA_PAYLOAD(rta) < 1 ||
		    name[RTA_PAYLOAD(rta) - 1] != '\0' ||
		    strncmp(name, pd->pd_prefix, plen) != 0 ||
		    name[plen] == '\0')
			return 0;
		for (p = name + plen; *p != '\0'; p++)
			if (*p < '0' || *p > '9')
				return 0;
		if (pd->pd_n < sizeof(pd->pd_index) / sizeof(pd->pd_index[0]))
			pd->pd_index[pd->pd_n++] = ifi->ifi_index;
		return 0;
	}
	return 0;
}

int
lnc_nl_link_del_prefix(int nl, const char *prefix)
{
	struct nlb		 b;
	struct prefix_dump	 pd;
	size_t			 i;
	int			 rc = 0;

	do {
		memset(&pd, 0, sizeof(pd));
		pd.pd_prefix = prefix;
		nlb_link(&b, RTM_GETLINK, NLM_F_DUMP, 0);
		nla_put_u32(&b, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
		if (nl_talk(nl, &b, prefix_cb, &pd) == -1)
			return -1;
		for (i = 0; i < pd.pd_n; i++)
			if (lnc_nl_link_del(nl, pd.pd_index[i]) == -1 &&
			    errno != ENODEV)
				rc = -1;
	} while (rc == 0 && pd.pd_n ==
	    sizeof(pd.pd_index) / sizeof(pd.pd_index[0]));
	return rc;
}

int
lnc_write_file(const char *path, const char *val)
{
	int	fd;
	ssize_t	w;
	size_t	len = strlen(val);

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	w = write(fd, val, len);
	if (close(fd) == -1 && w == (ssize_t)len)
		return -1;
	return w == (ssize_t)len ? 0 : -1;
}

int
lnc_sysctl(const char *path, const char *val)
{
	char	p[256];
	int	n;

	n = snprintf(p, sizeof(p), "/proc/sys/%s", path);
	if (n < 0 || (size_t)n >= sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return lnc_write_file(p, val);
}
