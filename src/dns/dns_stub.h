/*
 * DNS stub for sandboxes (listen.dns), on libevent's evdns server (UDP).
 *
 * A sandbox is known by the source address of its query (sbx_find_addr).
 * For one question of class IN:
 *   A, name some rule of its policy names    -> one answer: the name's
 *                                               synthetic address
 *                                               (dns_synth), TTL 60
 *   AAAA, such a name                        -> NOERROR, no answer
 *   A or AAAA, any other name, or a query
 *   name that is no valid host name          -> NXDOMAIN (another valid
 *                                               name is answered under
 *                                               mode: report, audited
 *                                               would_deny, and under
 *                                               on_unmatched: ask)
 *   any other type (MX, TXT, ANY, HTTPS...)  -> REFUSED
 *   any other class                          -> REFUSED
 *   2 to DNS_STUB_MAX_QUESTIONS questions    -> FORMERR
 *   no question                              -> no answer (libevent's
 *                                               parser drops it)
 *   no synthetic address free                -> SERVFAIL
 * REFUSED rather than NOTIMP for other types: the type is understood and
 * declined by policy, which is what REFUSED says; NOTIMP is about the
 * kind of query, the opcode (RFC 1035 4.1.1), and other opcodes never get
 * this far (see the socket filter below).
 *
 * Nothing is ever forwarded: the stub holds no upstream resolver, so a
 * query name carries no data out of the gateway; the gateway resolves an
 * allowed name for real only when the sandbox connects to it.
 *
 * Every query gets one audit record (proto "dns", mode "transparent",
 * host = the normalised name, or the query name in DNS presentation form
 * with \DDD escapes when it is not a host name; dns_type, dns_rcode and
 * dns_answer), except beyond the rate limits below, where one summary
 * record per second and sandbox counts what was refused.
 *
 * Limits: each sandbox has a token bucket of DNS_STUB_RATE queries per
 * second with bursts of DNS_STUB_BURST; beyond it, REFUSED. Sources that
 * are no sandbox's share one bucket (DNS_STUB_UNKNOWN_*): within it they
 * get REFUSED, beyond it no answer at all. A socket filter drops, before
 * libevent parses them, packets shorter than a DNS header, responses,
 * opcodes other than QUERY and packets with more than
 * DNS_STUB_MAX_QUESTIONS questions; they get no answer and no record,
 * like the packets libevent's parser rejects (a label over 63 bytes, a
 * name over 255, a compression loop, a question cut short).
 * libevent 2.1.12 crashes on a datagram shorter than a DNS header,
 * takes an UPDATE or NOTIFY for a QUERY (it clears the opcode before its
 * own NOTIMP check), and allocates for every question the header claims
 * before parsing one; without the filter (Linux only) the stub does not
 * start.
 *
 * TCP: libevent 2.1's server is UDP only. Queries over TCP are refused by
 * the kernel (nothing listens on TCP at listen.dns, so a connection gets
 * a RST). The answer to a one-question query never exceeds 512 bytes, so
 * no client is sent to TCP by a truncated answer; dig asks ANY over TCP
 * by default and gets "connection refused", which is as good a refusal.
 */
#ifndef AIRLOCK_DNS_STUB_H
#define AIRLOCK_DNS_STUB_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct cfg;
struct cfg_policy;
struct dns_synth;

#define DNS_STUB_TTL		60	/* seconds, on A answers */
#define DNS_STUB_RATE		50	/* queries per second per sandbox */
#define DNS_STUB_BURST		100
#define DNS_STUB_UNKNOWN_RATE	20	/* all unknown sources together */
#define DNS_STUB_UNKNOWN_BURST	40
#define DNS_STUB_SUMMARY_MS	1000	/* one rate-limit record per
					   sandbox per second at most */
#define DNS_STUB_MAX_QUESTIONS	4	/* more: dropped unanswered */

struct dns_stub_hooks {
	/*
	 * The running config, called on the stub's event loop for every
	 * query. Borrowed: it must stay valid until dh_cfg_done (when set)
	 * or the callback returns, which holds for airlockd's running_cfg()
	 * when the stub runs on the main event loop (reloads happen there).
	 */
	const struct cfg *(*dh_cfg)(void);
	void	(*dh_cfg_done)(const struct cfg *);	/* optional */
	struct dns_synth *dh_synth;	/* borrowed; outlives the stub */
};

struct dns_stub;

/*
 * Serve DNS on <listen_addr> ("IP:PORT", IPv6 as "[IP]:PORT") from
 * <base>. An address not (yet) on any interface is bound with
 * IP_FREEBIND. <hooks> is copied. Returns NULL after logging.
 */
struct dns_stub *dns_stub_new(struct event_base *, const char *listen_addr,
	    const struct dns_stub_hooks *);
/*
 * Close the socket; summary records still pending are written. Call it
 * before freeing the event base (libevent keeps the port until replies
 * queued on EAGAIN are sent). NULL ok.
 */
/* Write the summary records of the limits still pending now (free does
   it too); the counters then include them. */
void	dns_stub_flush(struct dns_stub *);
void	dns_stub_free(struct dns_stub *);

/* Bound port (0 on error): for tests that listen on port 0. */
int	dns_stub_port(const struct dns_stub *);

struct dns_stub_stats {
	uint64_t	ss_queries;	/* reached the callback */
	uint64_t	ss_answered;	/* A answers with an address */
	uint64_t	ss_rate_refused;	/* sandbox over its limit */
	uint64_t	ss_unknown_dropped;	/* unknown source, over the
						   shared limit: no answer */
	uint64_t	ss_records;	/* audit records written */
};
void	dns_stub_stats(const struct dns_stub *, struct dns_stub_stats *);

/* Below: the stub's pure parts, exported for the unit tests. */

enum dns_stub_verdict {
	DNS_STUB_ANSWER = 0,	/* A: the synthetic address */
	DNS_STUB_NODATA,	/* NOERROR without an answer */
	DNS_STUB_NXDOMAIN,
	DNS_STUB_REFUSED,
	DNS_STUB_FORMERR,
	DNS_STUB_SERVFAIL,
};

/*
 * Judge one question of a known sandbox under <pol> (NULL: its policy is
 * gone, nothing is allowed). <qname> is the name as libevent parsed it.
 * <name> gets what the audit record shows as host: the normalised name,
 * or <qname> escaped by dns_stub_name_escape() when it is none. <rule>
 * gets the index of the rule that allows the name, or -1; <why> a deny
 * reason ("" on allow). A name no rule names is answered anyway (rule -1)
 * under mode: report, its refusal then in <would_deny> (else ""), and
 * under on_unmatched: ask, <why> saying so: its connections are judged,
 * or held, in their turn (pol_unmatched). Buffers: <namesz> >= 1024
 * holds any escaped name.
 */
enum dns_stub_verdict dns_stub_decide(const struct cfg_policy *pol,
	    int qtype, int qclass, const char *qname, char *name,
	    size_t namesz, int *rule, char *why, size_t whysz,
	    char *would_deny, size_t wdsz);

/*
 * A query name as a host name: lowercase, one trailing dot dropped,
 * labels of 1..63 letters, digits, '-' or '_', 253 bytes at most, and no
 * IP literal in any form inet_aton(3) takes (a sandbox has no business
 * resolving those). Returns 0, or -1 when it is not a host name.
 */
int	dns_stub_name_normalize(const char *in, char *out, size_t outsz);

/*
 * <in> in DNS presentation form for the audit log: printable ASCII but
 * '\\' as is, every other byte as \DDD (decimal), cut at <outsz>.
 */
void	dns_stub_name_escape(const char *in, char *out, size_t outsz);

/* "A", "AAAA", "MX", ... or "TYPE<n>" (RFC 3597) into <buf>. */
const char *dns_stub_type_name(int qtype, char *buf, size_t bufsz);
/* "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED". */
const char *dns_stub_rcode_name(int rcode);
/* The DNS rcode of a verdict. */
int	dns_stub_verdict_rcode(enum dns_stub_verdict);

/* Token bucket in thousandths of a query, so integer arithmetic is exact. */
struct dns_stub_bucket {
	uint64_t	b_milli;	/* tokens x 1000 */
	uint64_t	b_last_ms;	/* last refill */
	uint64_t	b_refused;	/* over the limit since the last
					   summary record */
	uint64_t	b_refused_since_ms;	/* first of those */
	uint64_t	b_summary_ms;	/* last summary record, 0: none */
};

/* A full bucket at <now_ms>. */
void	dns_stub_bucket_init(struct dns_stub_bucket *, uint64_t now_ms,
	    unsigned burst);
/*
 * Refill for the time since the last call (<rate> per second, at most
 * <burst>), then take one query. Returns 1 when it may pass, 0 when over
 * the limit. A clock going backwards refills nothing, nor does rate 0.
 */
int	dns_stub_bucket_take(struct dns_stub_bucket *, uint64_t now_ms,
	    unsigned rate, unsigned burst);

#endif
