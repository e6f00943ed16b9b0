/*
 * DNS stub for sandboxes: libevent's evdns server on a UDP socket, one
 * verdict per query from the sandbox's policy, answers from the synthetic
 * address map, one audit record per query (see dns_stub.h for the rules).
 *
 * The stub runs on one event loop; its rate-limit state is touched from
 * that loop only and needs no lock. What it shares with the workers (the
 * synthetic map, the sandbox registry, the audit queue) locks itself.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/filter.h>
#endif

#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/event.h>
#include <event2/util.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "dns/dns_stub.h"
#include "dns/dns_names.h"
#include "dns/dns_synth.h"
#include "dns/net_guard.h"
#include "metrics/metrics.h"
#include "policy/pol.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

#define DNS_CLASS_IN		1
#define STUB_SB_BUCKETS		1024	/* chains of per-sandbox buckets */
#define STUB_SB_IDLE_MS		60000	/* forget a sandbox's bucket after */
#define STUB_NAME_BUF		1024	/* 255 bytes as \DDD, and a NUL */
#define STUB_CLIENT_BUF		(INET6_ADDRSTRLEN + 8)

/* Rate-limit state of one sandbox, by id (ids are never reused while a
   connection could still hold the old one, and a stale entry only costs
   a full bucket). */
struct stub_sb {
	struct stub_sb		*s_next;
	uint64_t		 s_hash;
	struct dns_stub_bucket	 s_b;
	char			 s_client[STUB_CLIENT_BUF]; /* last refused */
	char			 s_id[];
};

struct dns_stub {
	struct event_base	*st_base;
	struct evdns_server_port *st_port;
	struct event		*st_sweep;	/* summaries, idle buckets */
	struct dns_stub_hooks	 st_hooks;
	int			 st_port_num;
	struct stub_sb		*st_sb[STUB_SB_BUCKETS];
	struct dns_stub_bucket	 st_unknown;	/* every unknown source */
	char			 st_unknown_client[STUB_CLIENT_BUF];
	struct dns_stub_stats	 st_stats;
	struct dns_names	*st_names;	/* per sandbox (dns_names.h) */
};

/* Pure parts. */

static const struct {
	int		 code;
	const char	*name;
} stub_types[] = {
	{ 1, "A" }, { 2, "NS" }, { 5, "CNAME" }, { 6, "SOA" },
	{ 12, "PTR" }, { 13, "HINFO" }, { 15, "MX" }, { 16, "TXT" },
	{ 28, "AAAA" }, { 33, "SRV" }, { 35, "NAPTR" }, { 39, "DNAME" },
	{ 43, "DS" }, { 46, "RRSIG" }, { 48, "DNSKEY" }, { 52, "TLSA" },
	{ 64, "SVCB" }, { 65, "HTTPS" }, { 99, "SPF" }, { 251, "IXFR" },
	{ 252, "AXFR" }, { 255, "ANY" }, { 257, "CAA" },
};

const char *
dns_stub_type_name(int qtype, char *buf, size_t bufsz)
{
	size_t	i;

	for (i = 0; i < sizeof(stub_types) / sizeof(stub_types[0]); i++)
		if (stub_types[i].code == qtype)
			return stub_types[i].name;
	snprintf(buf, bufsz, "TYPE%d", qtype);
	return buf;
}

const char *
dns_stub_rcode_name(int rcode)
{
	static const char *const names[] = {
		"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP",
		"REFUSED",
	};

	if (rcode < 0 || rcode >= (int)(sizeof(names) / sizeof(names[0])))
		return "RCODE?";
	return names[rcode];
}

int
dns_stub_verdict_rcode(enum dns_stub_verdict v)
{
	switch (v) {
	case DNS_STUB_ANSWER:
	case DNS_STUB_NODATA:
		return DNS_ERR_NONE;
	case DNS_STUB_NXDOMAIN:
		return DNS_ERR_NOTEXIST;
	case DNS_STUB_FORMERR:
		return DNS_ERR_FORMAT;
	case DNS_STUB_SERVFAIL:
		return DNS_ERR_SERVERFAILED;
	case DNS_STUB_REFUSED:
	default:
		return DNS_ERR_REFUSED;
	}
}

void
dns_stub_name_escape(const char *in, char *out, size_t outsz)
{
	size_t		 o = 0;
	unsigned char	 c;
	char		 esc[5];

	if (outsz == 0)
		return;
	for (; in != NULL && *in != '\0'; in++) {
		c = (unsigned char)*in;
		if (c > 0x20 && c < 0x7f && c != '\\') {
			if (o + 1 >= outsz)
				break;
			out[o++] = (char)c;
			continue;
		}
		snprintf(esc, sizeof(esc), "\\%03u", c);
		if (o + 4 >= outsz)
			break;
		memcpy(out + o, esc, 4);
		o += 4;
	}
	out[o] = '\0';
}

int
dns_stub_name_normalize(const char *in, char *out, size_t outsz)
{
	struct net_addr	a;

	/* pol_host_normalize() also maps IP literals; here they are no
	   names at all (net_host_literal() sees every inet_aton form) */
	if (in == NULL || net_host_literal(in, &a) != 0)
		return -1;
	if (pol_host_normalize(in, out, outsz) == -1)
		return -1;
	/* a trailing dot dropped may have made a literal: "1.2.3.4." */
	if (net_host_literal(out, &a) != 0)
		return -1;
	return 0;
}

enum dns_stub_verdict
dns_stub_decide(const struct cfg_policy *pol, int qtype, int qclass,
    const char *qname, char *name, size_t namesz, int *rule, char *why,
    size_t whysz, char *would_deny, size_t wdsz)
{
	struct pol_result	res;
	char			tbuf[16];
	int			ask = 0;

	*rule = -1;
	why[0] = '\0';
	would_deny[0] = '\0';
	if (dns_stub_name_normalize(qname, name, namesz) == -1) {
		dns_stub_name_escape(qname, name, namesz);
		if (qclass == DNS_CLASS_IN &&
		    (qtype == EVDNS_TYPE_A || qtype == EVDNS_TYPE_AAAA)) {
			snprintf(why, whysz, "not a valid host name");
			return DNS_STUB_NXDOMAIN;
		}
	}
	if (qclass != DNS_CLASS_IN) {
		snprintf(why, whysz, "query class %d is not served", qclass);
		return DNS_STUB_REFUSED;
	}
	if (qtype != EVDNS_TYPE_A && qtype != EVDNS_TYPE_AAAA) {
		snprintf(why, whysz, "query type %s is not served",
		    dns_stub_type_name(qtype, tbuf, sizeof(tbuf)));
		return DNS_STUB_REFUSED;
	}
	if (pol == NULL) {
		snprintf(why, whysz, "the sandbox's policy is gone");
		return DNS_STUB_NXDOMAIN;
	}
	if ((*rule = pol_host_allowed(pol, name)) < 0) {
		snprintf(res.pr_reason, sizeof(res.pr_reason), "host %s is not "
		    "allowed", name);
		res.pr_verdict = POL_DENY;
		/* report mode, on_unmatched: ask: as the policy stage does */
		if (!pol_unmatched(pol, &res, would_deny, wdsz, &ask)) {
			snprintf(why, whysz, "%s", res.pr_reason);
			return DNS_STUB_NXDOMAIN;
		}
		if (ask)
			snprintf(why, whysz, "no rule names host %s: answered "
			    "for on_unmatched: ask (its connections are held)",
			    name);
	}
	return qtype == EVDNS_TYPE_A ? DNS_STUB_ANSWER : DNS_STUB_NODATA;
}

void
dns_stub_bucket_init(struct dns_stub_bucket *b, uint64_t now_ms,
    unsigned burst)
{
	memset(b, 0, sizeof(*b));
	b->b_milli = (uint64_t)burst * 1000;
	b->b_last_ms = now_ms;
}

int
dns_stub_bucket_take(struct dns_stub_bucket *b, uint64_t now_ms,
    unsigned rate, unsigned burst)
{
	uint64_t	cap = (uint64_t)burst * 1000, dt;

	if (now_ms > b->b_last_ms) {
		dt = now_ms - b->b_last_ms;
		/* <rate> per second is <rate> thousandths per ms; a long
		   pause only fills the bucket, so cap dt before multiplying */
		if (rate == 0)
			;
		else if (dt >= cap / rate + 1)
			b->b_milli = cap;
		else if ((b->b_milli += dt * rate) > cap)
			b->b_milli = cap;
		b->b_last_ms = now_ms;
	}
	if (b->b_milli < 1000)
		return 0;
	b->b_milli -= 1000;
	return 1;
}

/* The server. */

static uint64_t
stub_hash(const char *s)
{
	uint64_t	h = 0xcbf29ce484222325ULL;	/* FNV-1a */

	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static struct stub_sb *
stub_sb_get(struct dns_stub *st, const char *id, uint64_t now)
{
	struct stub_sb	*s;
	uint64_t	 h = stub_hash(id);
	size_t		 len;

	for (s = st->st_sb[h % STUB_SB_BUCKETS]; s != NULL; s = s->s_next)
		if (s->s_hash == h && strcmp(s->s_id, id) == 0)
			return s;
	len = strlen(id);
	s = xcalloc(1, sizeof(*s) + len + 1);
	memcpy(s->s_id, id, len + 1);
	s->s_hash = h;
	dns_stub_bucket_init(&s->s_b, now, DNS_STUB_BURST);
	s->s_next = st->st_sb[h % STUB_SB_BUCKETS];
	st->st_sb[h % STUB_SB_BUCKETS] = s;
	return s;
}

static void
stub_client(const struct sockaddr *sa, struct net_addr *na, char *buf,
    size_t bufsz)
{
	char	 ip[INET6_ADDRSTRLEN];
	int	 port = 0;

	if (net_addr_from_sockaddr(sa, na) == -1) {
		memset(na, 0, sizeof(*na));
		snprintf(buf, bufsz, "?");
		return;
	}
	if (sa->sa_family == AF_INET)
		port = ntohs(((const struct sockaddr_in *)(const void *)sa)->
		    sin_port);
	else
		port = ntohs(((const struct sockaddr_in6 *)(const void *)sa)->
		    sin6_port);
	/* a dual-stack socket shows IPv4 peers as ::ffff:a.b.c.d */
	if (na->na_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(
	    (const struct in6_addr *)(const void *)na->na_bytes)) {
		memmove(na->na_bytes, na->na_bytes + 12, 4);
		memset(na->na_bytes + 4, 0, 12);
		na->na_family = AF_INET;
	}
	net_addr_format(na, ip, sizeof(ip));
	if (na->na_family == AF_INET6)
		snprintf(buf, bufsz, "[%s]:%d", ip, port);
	else
		snprintf(buf, bufsz, "%s:%d", ip, port);
}

/* What one record says; NULL fields are left out. */
struct stub_rec {
	const char	*sr_sandbox;
	const char	*sr_client;
	const char	*sr_host;
	const char	*sr_type;
	int		 sr_rcode;
	const char	*sr_answer;
	const char	*sr_rule;
	const char	*sr_reason;
	const char	*sr_would_deny;	/* report mode: the refusal */
	int		 sr_allow;
};

static void
stub_audit(struct dns_stub *st, const struct stub_rec *sr)
{
	struct aud_rec	r;
	char		id[25];

	memset(&r, 0, sizeof(r));
	util_random_hex(id, 12);
	r.ar_start_wall_ms = util_wall_ms();
	r.ar_id = id;
	r.ar_sandbox = sr->sr_sandbox;
	r.ar_client = sr->sr_client;
	r.ar_mode = "transparent";
	r.ar_proto = "dns";
	r.ar_host = sr->sr_host;
	r.ar_port = -1;
	r.ar_status = -1;
	r.ar_decision = sr->sr_allow ? "allow" : "deny";
	r.ar_reason = sr->sr_reason != NULL && sr->sr_reason[0] != '\0' ?
	    sr->sr_reason : NULL;
	r.ar_rule = sr->sr_rule;
	r.ar_would_deny = sr->sr_would_deny;
	r.ar_bytes_in = -1;
	r.ar_bytes_out = -1;
	r.ar_duration_ms = -1;
	r.ar_cost_micro = -1;
	r.ar_dns_type = sr->sr_type;
	r.ar_dns_rcode = dns_stub_rcode_name(sr->sr_rcode);
	r.ar_dns_answer = sr->sr_answer;
	aud_submit(&r);
	st->st_stats.ss_records++;
}

/* The one record that stands for the queries a limit refused. */
static void
stub_summary(struct dns_stub *st, const char *sandbox, const char *client,
    struct dns_stub_bucket *b, uint64_t now, int answered, unsigned rate,
    unsigned burst)
{
	struct stub_rec	sr;
	char		why[256];

	if (b->b_refused == 0)
		return;
	snprintf(why, sizeof(why), "dns rate limit: %llu %s %s in %llu ms "
	    "(limit %u/s, burst %u)", (unsigned long long)b->b_refused,
	    b->b_refused == 1 ? "query" : "queries",
	    answered ? "refused" : "dropped unanswered",
	    (unsigned long long)(now - b->b_refused_since_ms), rate, burst);
	memset(&sr, 0, sizeof(sr));
	sr.sr_sandbox = sandbox;
	sr.sr_client = client;
	sr.sr_rcode = DNS_ERR_REFUSED;
	sr.sr_reason = why;
	stub_audit(st, &sr);
	b->b_refused = 0;
	b->b_summary_ms = now;
}

/* Count a refused query; write the summary when a second has passed. */
static void
stub_over_limit(struct dns_stub *st, const char *sandbox, const char *client,
    struct dns_stub_bucket *b, uint64_t now, int answered, unsigned rate,
    unsigned burst)
{
	if (b->b_refused++ == 0)
		b->b_refused_since_ms = now;
	if (b->b_summary_ms == 0 || now - b->b_summary_ms >= DNS_STUB_SUMMARY_MS)
		stub_summary(st, sandbox, client, b, now, answered, rate,
		    burst);
}

/*
 * Send the answer. libevent 2.1 keeps the request when it cannot format
 * the answer (the echoed questions overflow its 1500-byte buffer) or
 * sendto() says EAGAIN, and returns -1 without freeing it: drop it then,
 * or it leaks (about 40 KiB a packet with 146 questions, measured).
 */
static void
stub_respond(struct evdns_server_request *req, int rcode)
{
	evdns_server_request_set_flags(req, EVDNS_FLAGS_AA | EVDNS_FLAGS_RD);
	if (evdns_server_request_respond(req, rcode) < 0)
		evdns_server_request_drop(req);
}

/*
 * The sandbox's own name set (issue 24, points 5 and 6): its address for
 * <name>, held for as long as the sandbox lives; past launcher.dns's
 * bounds REFUSED with the reason in <why>. A new name under a wildcard
 * rule says so in <why> (its audit record). 0 with <syn>, or -1 with *v
 * and <why> set.
 */
static int
stub_admit(struct dns_stub *st, const struct sbx *s, const struct cfg *cfg,
    int rix, const char *name, uint64_t now, struct net_addr *syn,
    enum dns_stub_verdict *v, char *why, size_t whysz)
{
	const struct cfg_policy	*pol;
	size_t			 max = DNS_NAMES_MAX_DEFAULT, n;
	unsigned		 per_min = DNS_NAMES_PER_MIN_DEFAULT;
	int			 wild = 0;

	if (cfg != NULL) {
		max = (size_t)cfg->c_launcher_dns_max_names;
		per_min = (unsigned)cfg->c_launcher_dns_per_min;
		pol = cfg_policy_find(cfg, s->sb_policy);
		wild = pol != NULL && rix >= 0 && (size_t)rix < pol->p_nrules &&
		    pol->p_rules[rix].r_host[0] == '*';
	}
	switch (dns_names_admit(st->st_names, s->sb_id, name, wild, max,
	    per_min, now, syn, &n)) {
	case DNS_NAMES_KNOWN:
		return 0;
	case DNS_NAMES_NEW:
		if (wild)
			snprintf(why, whysz, "new name under a wildcard rule "
			    "(%zu names)", n);
		return 0;
	case DNS_NAMES_OVER_BOUND:
		*v = DNS_STUB_REFUSED;
		snprintf(why, whysz, "the sandbox has %zu names "
		    "(launcher.dns.max_names)", n);
		return -1;
	case DNS_NAMES_OVER_RATE:
		*v = DNS_STUB_REFUSED;
		snprintf(why, whysz, "too many new names under a wildcard "
		    "rule (launcher.dns.new_names_per_minute %u)", per_min);
		return -1;
	case DNS_NAMES_NO_ADDRESS:
	default:
		*v = DNS_STUB_SERVFAIL;
		snprintf(why, whysz, "no synthetic address free (dns_pool "
		    "exhausted by recent names)");
		return -1;
	}
}

static void
stub_query(struct evdns_server_request *req, void *arg)
{
	struct dns_stub			*st = arg;
	struct evdns_server_question	*q;
	struct sockaddr_storage		 ss;
	struct net_addr			 na, syn;
	struct stub_rec			 sr;
	struct stub_sb			*sb;
	struct sbx			*s;
	const struct cfg		*cfg;
	enum dns_stub_verdict		 v;
	struct in_addr			 in;
	char				 client[STUB_CLIENT_BUF];
	char				 name[STUB_NAME_BUF], why[512];
	char				 tbuf[16], ans[INET_ADDRSTRLEN];
	char				 rule[256], wd[256];
	uint64_t			 now = util_now_ms();
	int				 rix;

	st->st_stats.ss_queries++;
	memset(&sr, 0, sizeof(sr));
	memset(&ss, 0, sizeof(ss));
	if (evdns_server_request_get_requesting_addr(req,
	    (struct sockaddr *)&ss, (int)sizeof(ss)) < 0) {
		evdns_server_request_drop(req);
		return;
	}
	stub_client((struct sockaddr *)&ss, &na, client, sizeof(client));
	sr.sr_client = client;
	q = req->nquestions > 0 ? req->questions[0] : NULL;
	if (q != NULL) {
		dns_stub_name_escape(q->name, name, sizeof(name));
		sr.sr_host = name;
		sr.sr_type = dns_stub_type_name(q->type, tbuf, sizeof(tbuf));
	}

	s = na.na_family != 0 ? sbx_find_addr(&na) : NULL;
	if (s != NULL && __atomic_load_n(&s->sb_revoked, __ATOMIC_RELAXED)) {
		sbx_unref(s);
		s = NULL;
	}
	if (s == NULL) {
		/* no sandbox: refused within a small shared budget, beyond
		   it not even answered (nothing to reflect) */
		if (!dns_stub_bucket_take(&st->st_unknown, now,
		    DNS_STUB_UNKNOWN_RATE, DNS_STUB_UNKNOWN_BURST)) {
			st->st_stats.ss_unknown_dropped++;
			snprintf(st->st_unknown_client,
			    sizeof(st->st_unknown_client), "%s", client);
			stub_over_limit(st, NULL, client, &st->st_unknown, now,
			    0, DNS_STUB_UNKNOWN_RATE, DNS_STUB_UNKNOWN_BURST);
			evdns_server_request_drop(req);
			return;
		}
		sr.sr_rcode = DNS_ERR_REFUSED;
		sr.sr_reason = "unknown source address";
		stub_audit(st, &sr);
		stub_respond(req, DNS_ERR_REFUSED);
		return;
	}
	sr.sr_sandbox = s->sb_id;

	sb = stub_sb_get(st, s->sb_id, now);
	if (!dns_stub_bucket_take(&sb->s_b, now, DNS_STUB_RATE,
	    DNS_STUB_BURST)) {
		st->st_stats.ss_rate_refused++;
		snprintf(sb->s_client, sizeof(sb->s_client), "%s", client);
		stub_over_limit(st, s->sb_id, client, &sb->s_b, now, 1,
		    DNS_STUB_RATE, DNS_STUB_BURST);
		stub_respond(req, DNS_ERR_REFUSED);
		sbx_unref(s);
		return;
	}

	if (req->nquestions != 1) {
		if (req->nquestions == 0)
			snprintf(why, sizeof(why), "no question in the query");
		else
			snprintf(why, sizeof(why), "%d questions in one query",
			    req->nquestions);
		sr.sr_rcode = DNS_ERR_FORMAT;
		sr.sr_reason = why;
		stub_audit(st, &sr);
		stub_respond(req, DNS_ERR_FORMAT);
		sbx_unref(s);
		return;
	}

	cfg = st->st_hooks.dh_cfg();
	v = dns_stub_decide(cfg != NULL ? cfg_policy_find(cfg, s->sb_policy) :
	    NULL, q->type, q->dns_question_class, q->name, name, sizeof(name),
	    &rix, why, sizeof(why), wd, sizeof(wd));
	if (rix >= 0) {
		snprintf(rule, sizeof(rule), "%s#%d", s->sb_policy, rix);
		sr.sr_rule = rule;
	}
	if (v == DNS_STUB_ANSWER &&
	    stub_admit(st, s, cfg, rix, name, now, &syn, &v, why,
	    sizeof(why)) == 0) {
		memcpy(&in, syn.na_bytes, 4);
		if (evdns_server_request_add_a_reply(req, q->name, 1, &in,
		    DNS_STUB_TTL) == -1) {
			v = DNS_STUB_SERVFAIL;
			snprintf(why, sizeof(why), "answer not built");
		} else {
			net_addr_format(&syn, ans, sizeof(ans));
			sr.sr_answer = ans;
			st->st_stats.ss_answered++;
		}
	}
	sr.sr_allow = v == DNS_STUB_ANSWER || v == DNS_STUB_NODATA;
	sr.sr_rcode = dns_stub_verdict_rcode(v);
	sr.sr_reason = why;
	/* report mode: answered, unless a bound of launcher.dns refused */
	if (sr.sr_allow && wd[0] != '\0') {
		sr.sr_would_deny = wd;
		met_would_deny();
	}
	stub_audit(st, &sr);
	stub_respond(req, sr.sr_rcode);
	if (cfg != NULL && st->st_hooks.dh_cfg_done != NULL)
		st->st_hooks.dh_cfg_done(cfg);
	sbx_unref(s);
}

/*
 * Every second: the summary of refusals that no later query wrote, and
 * the buckets of sandboxes quiet for a minute (full again by then).
 */
static int
stub_sbx_alive(const char *id)
{
	struct sbx	*s = sbx_find(id);
	int		 alive;

	alive = s != NULL && !__atomic_load_n(&s->sb_revoked,
	    __ATOMIC_RELAXED);
	sbx_unref(s);
	return alive;
}

static void
stub_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct dns_stub	*st = arg;
	struct stub_sb	**sp, *s;
	uint64_t	  now = util_now_ms();
	size_t		  i;

	for (i = 0; i < STUB_SB_BUCKETS; i++) {
		for (sp = &st->st_sb[i]; (s = *sp) != NULL; ) {
			if (s->s_b.b_refused > 0 &&
			    now - s->s_b.b_summary_ms >= DNS_STUB_SUMMARY_MS)
				stub_summary(st, s->s_id, s->s_client, &s->s_b,
				    now, 1, DNS_STUB_RATE, DNS_STUB_BURST);
			if (s->s_b.b_refused == 0 &&
			    now - s->s_b.b_last_ms >= STUB_SB_IDLE_MS) {
				*sp = s->s_next;
				free(s);
				continue;
			}
			sp = &s->s_next;
		}
	}
	if (st->st_unknown.b_refused > 0 &&
	    now - st->st_unknown.b_summary_ms >= DNS_STUB_SUMMARY_MS)
		stub_summary(st, NULL, st->st_unknown_client, &st->st_unknown,
		    now, 0, DNS_STUB_UNKNOWN_RATE, DNS_STUB_UNKNOWN_BURST);
	/* deleted sandboxes give their names' addresses back */
	dns_names_sweep(st->st_names, stub_sbx_alive);
}

/*
 * Drop in the kernel what libevent 2.1.12 must not see:
 *  - less than a DNS header: its parser then dereferences a NULL
 *    request (any datagram of 1 to 11 bytes, measured), a crash any
 *    sandbox could cause (found by 290-dns-stub.sh);
 *  - responses, and opcodes other than QUERY: libevent masks the opcode
 *    off before its own check, so they would reach stub_query() looking
 *    like queries;
 *  - more than DNS_STUB_MAX_QUESTIONS questions: libevent allocates for
 *    every question the header claims before parsing one, and echoes them
 *    all, which can overflow its answer buffer.
 * For UDP the filter sees the datagram from its UDP header, so the DNS
 * header starts at offset 8; a load past the end makes the filter drop.
 * Returns 0, or -1 when it cannot be attached (then the stub must not
 * run: the first item is a remote crash).
 */
static int
stub_filter(int fd)
{
#ifdef __linux__
	struct sock_filter	code[] = {
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 8 + 11),	/* 12 bytes */
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 8 + 2),	/* flags */
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0xf800, 2, 0),
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 8 + 4),	/* QDCOUNT */
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, DNS_STUB_MAX_QUESTIONS,
		    0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0),			/* drop */
		BPF_STMT(BPF_RET | BPF_K, 0xffffffff),		/* keep */
	};
	struct sock_fprog	prog = {
		.len = sizeof(code) / sizeof(code[0]),
		.filter = code,
	};

	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog,
	    sizeof(prog)) == -1) {
		log_warn("dns stub: socket filter");
		return -1;
	}
	return 0;
#else
	log_warnx("dns stub: no socket filter on this system; a query cut "
	    "short can crash libevent 2.1's parser");
	return 0;
#endif
}

/*
 * "IP:PORT" or "[IPv6]:PORT" with PORT 0..65535 (0: any, for tests;
 * evutil_parse_sockaddr_port() refuses it). Returns the length or -1.
 */
static int
stub_parse_addr(const char *s, struct sockaddr_storage *ss)
{
	struct sockaddr_in	*sin = (struct sockaddr_in *)(void *)ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)(void *)ss;
	const char		*colon, *p;
	char			 host[INET6_ADDRSTRLEN];
	size_t			 hl;
	long			 port = 0;
	int			 bracket;

	memset(ss, 0, sizeof(*ss));
	if ((colon = strrchr(s, ':')) == NULL || colon[1] == '\0')
		return -1;
	for (p = colon + 1; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || (port = port * 10 + (*p - '0')) >
		    65535)
			return -1;
	}
	if ((bracket = s[0] == '[')) {
		if (colon == s || colon[-1] != ']')
			return -1;
		s++;
		hl = (size_t)(colon - 1 - s);
	} else if (memchr(s, ':', (size_t)(colon - s)) != NULL)
		return -1;		/* IPv6 needs its brackets */
	else
		hl = (size_t)(colon - s);
	if (hl == 0 || hl >= sizeof(host))
		return -1;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (!bracket && inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		return (int)sizeof(*sin);
	}
	if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		return (int)sizeof(*sin6);
	}
	return -1;
}

static int
stub_socket(const char *listen_addr, int *port)
{
	struct sockaddr_storage	 ss;
	socklen_t		 sl;
	int			 len, fd, on = 1;

	if (listen_addr == NULL ||
	    (len = stub_parse_addr(listen_addr, &ss)) == -1) {
		log_warnx("dns stub: bad listen address %s",
		    listen_addr != NULL ? listen_addr : "(none)");
		return -1;
	}
	if ((fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) == -1) {
		log_warn("dns stub: socket");
		return -1;
	}
	if (stub_filter(fd) == -1) {
		close(fd);
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&ss, (socklen_t)len) == -1) {
#ifdef IP_FREEBIND
		/* the gateway address may come up later (host setup) */
		if (errno == EADDRNOTAVAIL && setsockopt(fd, IPPROTO_IP,
		    IP_FREEBIND, &on, sizeof(on)) == 0 &&
		    bind(fd, (struct sockaddr *)&ss, (socklen_t)len) == 0) {
			log_info("dns stub: %s is on no interface yet; bound "
			    "with IP_FREEBIND", listen_addr);
			goto bound;
		}
#endif
		log_warn("dns stub: bind %s", listen_addr);
		close(fd);
		return -1;
	}
#ifdef IP_FREEBIND
bound:
#endif
	(void)on;
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		*port = ss.ss_family == AF_INET ?
		    ntohs(((struct sockaddr_in *)(void *)&ss)->sin_port) :
		    ntohs(((struct sockaddr_in6 *)(void *)&ss)->sin6_port);
	return fd;
}

struct dns_stub *
dns_stub_new(struct event_base *base, const char *listen_addr,
    const struct dns_stub_hooks *hooks)
{
	struct dns_stub	*st;
	struct timeval	 tv = { 1, 0 };
	int		 fd, port = 0;

	if (hooks == NULL || hooks->dh_cfg == NULL || hooks->dh_synth == NULL) {
		log_warnx("dns stub: hooks missing");
		return NULL;
	}
	if ((fd = stub_socket(listen_addr, &port)) == -1)
		return NULL;
	st = xcalloc(1, sizeof(*st));
	st->st_base = base;
	st->st_hooks = *hooks;
	st->st_port_num = port;
	st->st_names = dns_names_new(hooks->dh_synth);
	dns_stub_bucket_init(&st->st_unknown, util_now_ms(),
	    DNS_STUB_UNKNOWN_BURST);
	/* the port owns the socket from here: closing the port closes it */
	if ((st->st_port = evdns_add_server_port_with_base(base, fd, 0,
	    stub_query, st)) == NULL) {
		log_warnx("dns stub: evdns server on %s failed", listen_addr);
		close(fd);
		dns_names_free(st->st_names);
		free(st);
		return NULL;
	}
	if ((st->st_sweep = event_new(base, -1, EV_PERSIST, stub_sweep,
	    st)) == NULL || event_add(st->st_sweep, &tv) == -1)
		fatalx("dns stub: timer");
	log_info("dns stub listening on %s (udp port %d)", listen_addr, port);
	return st;
}

void
dns_stub_flush(struct dns_stub *st)
{
	struct stub_sb	*s;
	uint64_t	 now = util_now_ms();
	size_t		 i;

	for (i = 0; i < STUB_SB_BUCKETS; i++)
		for (s = st->st_sb[i]; s != NULL; s = s->s_next)
			stub_summary(st, s->s_id, s->s_client, &s->s_b, now, 1,
			    DNS_STUB_RATE, DNS_STUB_BURST);
	stub_summary(st, NULL, st->st_unknown_client, &st->st_unknown, now, 0,
	    DNS_STUB_UNKNOWN_RATE, DNS_STUB_UNKNOWN_BURST);
}

void
dns_stub_free(struct dns_stub *st)
{
	struct stub_sb	*s;
	size_t		 i;

	if (st == NULL)
		return;
	event_free(st->st_sweep);
	evdns_close_server_port(st->st_port);
	dns_stub_flush(st);
	for (i = 0; i < STUB_SB_BUCKETS; i++) {
		while ((s = st->st_sb[i]) != NULL) {
			st->st_sb[i] = s->s_next;
			free(s);
		}
	}
	dns_names_free(st->st_names);
	free(st);
}

int
dns_stub_port(const struct dns_stub *st)
{
	return st != NULL ? st->st_port_num : 0;
}

void
dns_stub_stats(const struct dns_stub *st, struct dns_stub_stats *out)
{
	*out = st->st_stats;
}
