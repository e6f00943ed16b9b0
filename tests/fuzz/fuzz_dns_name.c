/*
 * libFuzzer: the DNS stub's query handling. The packet itself is parsed by
 * libevent's evdns server inside dns_stub.c (behind a socket filter), so
 * there is no airlock function that takes raw DNS bytes; what airlock
 * does with a parsed question is pure and fuzzed here: the name
 * normalisation and validation, the \DDD escaping for the audit record,
 * and the verdict against a policy like the unit suite's.
 *
 * Input: byte 0 picks the query type, byte 1 the class, the policy and an
 * output buffer size; the rest, up to its first NUL, is the query name as
 * libevent hands it over (a C string).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "dns/dns_stub.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int	ports_443[] = { 443 };

static struct cfg_rule	rules[] = {
	{ .r_host = "api.test", .r_ports = ports_443, .r_nports = 1 },
	{ .r_host = "*.example.com" },
	{ .r_host = "127.0.0.1" },
	{ .r_host = "*", .r_ports = ports_443, .r_nports = 1 },
};
static const struct cfg_policy	pols[] = {
	{ .p_name = "some", .p_rules = rules, .p_nrules = 3 },
	{ .p_name = "any", .p_rules = rules + 3, .p_nrules = 1 },
	{ .p_name = "none" },
};
static const int	types[] = { 1, 28, 15, 16, 255, 65, 5, 12 };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct cfg_policy	*pol;
	enum dns_stub_verdict	 v;
	char			 name[1024], norm[1024], why[512], small[64];
	char			 wd[256];
	char			*qname;
	size_t			 outsz;
	int			 qtype, qclass, rule;

	if (size < 2)
		return 0;
	qtype = data[0] < 8 * 16 ? types[data[0] % 8] : data[0];
	qclass = (data[1] & 1) ? 1 + (data[1] >> 1) % 4 : 1;
	pol = (data[1] & 6) == 6 ? NULL : &pols[(data[1] >> 1) & 3];
	outsz = 1 + (data[1] >> 3) % sizeof(small);
	qname = strndup((const char *)data + 2, size - 2);
	if (qname == NULL)
		return 0;

	v = dns_stub_decide(pol, qtype, qclass, qname, name, sizeof(name),
	    &rule, why, sizeof(why), wd, sizeof(wd));
	if (memchr(name, '\0', sizeof(name)) == NULL ||
	    memchr(why, '\0', sizeof(why)) == NULL)
		abort();
	if ((v == DNS_STUB_ANSWER || v == DNS_STUB_NODATA) &&
	    (pol == NULL || rule < 0 || (size_t)rule >= pol->p_nrules ||
	    dns_stub_name_normalize(qname, norm, sizeof(norm)) == -1 ||
	    strcmp(norm, name) != 0))
		abort();
	(void)dns_stub_verdict_rcode(v);

	/* the helpers with a buffer that may be too small */
	if (dns_stub_name_normalize(qname, small, outsz) == 0 &&
	    memchr(small, '\0', outsz) == NULL)
		abort();
	dns_stub_name_escape(qname, small, outsz);
	if (memchr(small, '\0', outsz) == NULL)
		abort();
	(void)dns_stub_type_name(qtype, small, outsz);
	free(qname);
	return 0;
}
