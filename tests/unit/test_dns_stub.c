/*
 * Check suite for src/dns/dns_stub.c: query names, verdicts from a policy,
 * the rate limiter. The server itself runs in tests/harness/dnsstubtest
 * (tests/integration/290-dns-stub.sh).
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "cfg/cfg.h"
#include "dns/dns_stub.h"
#include "unit.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* dns_stub_name_normalize */

static const struct {
	const char	*in;
	const char	*out;		/* NULL: not a host name */
} name_cases[] = {
	{ "api.openai.com",		"api.openai.com" },
	{ "API.OpenAI.Com",		"api.openai.com" },
	{ "api.openai.com.",		"api.openai.com" },
	{ "localhost",			"localhost" },
	{ "_dmarc.example.com",		"_dmarc.example.com" },
	{ "xn--bcher-kva.example",	"xn--bcher-kva.example" },
	{ "a-b.c-d.test",		"a-b.c-d.test" },
	{ "host.123",			NULL },	/* numeric TLD */
	{ "",				NULL },
	{ ".",				NULL },
	{ "..",				NULL },
	{ "a..b",			NULL },
	{ ".a.b",			NULL },
	{ "a.b..",			NULL },
	{ "a b.test",			NULL },
	{ "a\\.b.test",			NULL },
	{ "a\001b.test",		NULL },
	{ "caf\xc3\xa9.test",		NULL },
	{ "a/b.test",			NULL },
	{ "a*.test",			NULL },
	{ "*.example.com",		NULL },
	/* IP literals, every inet_aton form, are not names */
	{ "1.2.3.4",			NULL },
	{ "1.2.3.4.",			NULL },
	{ "127.1",			NULL },
	{ "0x7f.0.0.1",			NULL },
	{ "2130706433",			NULL },
	{ "0177.0.0.1",			NULL },
	{ "1.2.3.4.5",			NULL },
	{ "::1",			NULL },
	{ "[::1]",			NULL },
};

START_TEST(test_name_normalize)
{
	char	out[256];
	int	r;

	r = dns_stub_name_normalize(name_cases[_i].in, out, sizeof(out));
	if (name_cases[_i].out == NULL)
		ck_assert_msg(r == -1, "\"%s\" accepted as \"%s\"",
		    name_cases[_i].in, out);
	else {
		ck_assert_msg(r == 0, "\"%s\" refused", name_cases[_i].in);
		ck_assert_str_eq(out, name_cases[_i].out);
	}
}
END_TEST

START_TEST(test_name_lengths)
{
	char	in[300], out[300];

	ck_assert_int_eq(dns_stub_name_normalize(NULL, out, sizeof(out)), -1);
	/* a label of 63 is fine, 64 is not */
	memset(in, 'a', 63);
	strcpy(in + 63, ".test");
	ck_assert_int_eq(dns_stub_name_normalize(in, out, sizeof(out)), 0);
	memset(in, 'a', 64);
	strcpy(in + 64, ".test");
	ck_assert_int_eq(dns_stub_name_normalize(in, out, sizeof(out)), -1);
	/* 253 bytes (with a trailing dot: 254) fine, 254 not */
	memset(in, 'a', 253);
	in[63] = in[127] = in[191] = '.';
	in[253] = '\0';
	ck_assert_int_eq(dns_stub_name_normalize(in, out, sizeof(out)), 0);
	ck_assert_uint_eq(strlen(out), 253);
	in[253] = '.';
	in[254] = '\0';
	ck_assert_int_eq(dns_stub_name_normalize(in, out, sizeof(out)), 0);
	in[253] = 'a';
	ck_assert_int_eq(dns_stub_name_normalize(in, out, sizeof(out)), -1);
	/* no room */
	ck_assert_int_eq(dns_stub_name_normalize("abc.test", out, 8), -1);
	ck_assert_int_eq(dns_stub_name_normalize("abc.test", out, 9), 0);
}
END_TEST

/* dns_stub_name_escape */

static const struct {
	const char	*in;
	const char	*out;
} esc_cases[] = {
	{ "api.test",		"api.test" },
	{ "a b",		"a\\032b" },
	{ "a\\b",		"a\\092b" },
	{ "a\"b",		"a\"b" },
	{ "\001\177\377",	"\\001\\127\\255" },
	{ "caf\xc3\xa9",	"caf\\195\\169" },
	{ "a\nb",		"a\\010b" },
	{ "",			"" },
};

START_TEST(test_name_escape)
{
	char	out[64];

	dns_stub_name_escape(esc_cases[_i].in, out, sizeof(out));
	ck_assert_str_eq(out, esc_cases[_i].out);
}
END_TEST

START_TEST(test_name_escape_cut)
{
	char	in[256], out[1024];

	/* never more than outsz - 1 bytes, never half an escape */
	dns_stub_name_escape("abcdef", out, 4);
	ck_assert_str_eq(out, "abc");
	dns_stub_name_escape("a\001", out, 5);
	ck_assert_str_eq(out, "a");
	dns_stub_name_escape("a\001", out, 6);
	ck_assert_str_eq(out, "a\\001");
	dns_stub_name_escape(NULL, out, sizeof(out));
	ck_assert_str_eq(out, "");
	/* the worst name libevent can hand over fits the stub's buffer */
	memset(in, 0xff, 255);
	in[255] = '\0';
	dns_stub_name_escape(in, out, sizeof(out));
	ck_assert_uint_eq(strlen(out), 255 * 4);
}
END_TEST

START_TEST(test_names_of_codes)
{
	char	buf[16];

	ck_assert_str_eq(dns_stub_type_name(1, buf, sizeof(buf)), "A");
	ck_assert_str_eq(dns_stub_type_name(28, buf, sizeof(buf)), "AAAA");
	ck_assert_str_eq(dns_stub_type_name(15, buf, sizeof(buf)), "MX");
	ck_assert_str_eq(dns_stub_type_name(16, buf, sizeof(buf)), "TXT");
	ck_assert_str_eq(dns_stub_type_name(65, buf, sizeof(buf)), "HTTPS");
	ck_assert_str_eq(dns_stub_type_name(255, buf, sizeof(buf)), "ANY");
	ck_assert_str_eq(dns_stub_type_name(1234, buf, sizeof(buf)),
	    "TYPE1234");
	ck_assert_str_eq(dns_stub_type_name(0, buf, sizeof(buf)), "TYPE0");
	ck_assert_str_eq(dns_stub_rcode_name(0), "NOERROR");
	ck_assert_str_eq(dns_stub_rcode_name(1), "FORMERR");
	ck_assert_str_eq(dns_stub_rcode_name(2), "SERVFAIL");
	ck_assert_str_eq(dns_stub_rcode_name(3), "NXDOMAIN");
	ck_assert_str_eq(dns_stub_rcode_name(4), "NOTIMP");
	ck_assert_str_eq(dns_stub_rcode_name(5), "REFUSED");
	ck_assert_str_eq(dns_stub_rcode_name(9), "RCODE?");
	ck_assert_int_eq(dns_stub_verdict_rcode(DNS_STUB_ANSWER), 0);
	ck_assert_int_eq(dns_stub_verdict_rcode(DNS_STUB_NODATA), 0);
	ck_assert_int_eq(dns_stub_verdict_rcode(DNS_STUB_FORMERR), 1);
	ck_assert_int_eq(dns_stub_verdict_rcode(DNS_STUB_SERVFAIL), 2);
	ck_assert_int_eq(dns_stub_verdict_rcode(DNS_STUB_NXDOMAIN), 3);
	ck_assert_int_eq(dns_stub_verdict_rcode(DNS_STUB_REFUSED), 5);
}
END_TEST

/* dns_stub_decide against hand-built policies */

static int	ports_443[] = { 443 };
static int	ports_5432[] = { 5432 };

static struct cfg_rule	dns_rules[] = {
	/* 0 */ { .r_host = "api.test", .r_ports = ports_443, .r_nports = 1 },
	/* 1 */ { .r_host = "*.example.com" },
	/* 2 */ { .r_host = "db.internal.test", .r_ports = ports_5432,
	    .r_nports = 1 },
	/* 3 */ { .r_host = "127.0.0.1" },
};
static struct cfg_rule	any_rules[] = {
	/* 0 */ { .r_host = "*", .r_ports = ports_443, .r_nports = 1 },
};

static const struct cfg_policy	dns_pol = {
	.p_name = "dns", .p_rules = dns_rules, .p_nrules = NELEM(dns_rules),
};
static const struct cfg_policy	any_pol = {
	.p_name = "any", .p_rules = any_rules, .p_nrules = NELEM(any_rules),
};
static const struct cfg_policy	none_pol = { .p_name = "none" };

#define T_A	1
#define T_AAAA	28
#define T_MX	15
#define T_TXT	16
#define T_ANY	255
#define T_HTTPS	65
#define C_IN	1
#define C_CH	3

static const struct {
	const struct cfg_policy	*pol;
	int			 type;
	int			 class;
	const char		*qname;
	enum dns_stub_verdict	 v;
	const char		*name;	/* what the audit record shows */
	int			 rule;
	const char		*why;
} decide_cases[] = {
	{ &dns_pol, T_A, C_IN, "api.test", DNS_STUB_ANSWER, "api.test", 0,
	    "" },
	{ &dns_pol, T_A, C_IN, "API.Test.", DNS_STUB_ANSWER, "api.test", 0,
	    "" },
	{ &dns_pol, T_AAAA, C_IN, "api.test", DNS_STUB_NODATA, "api.test", 0,
	    "" },
	{ &dns_pol, T_A, C_IN, "a.b.example.com", DNS_STUB_ANSWER,
	    "a.b.example.com", 1, "" },
	/* a rule for another port still makes the name resolvable */
	{ &dns_pol, T_A, C_IN, "db.internal.test", DNS_STUB_ANSWER,
	    "db.internal.test", 2, "" },
	{ &dns_pol, T_A, C_IN, "example.com", DNS_STUB_NXDOMAIN,
	    "example.com", -1, "host example.com is not allowed" },
	{ &dns_pol, T_AAAA, C_IN, "evil.test", DNS_STUB_NXDOMAIN,
	    "evil.test", -1, "host evil.test is not allowed" },
	{ &dns_pol, T_A, C_IN, "api.test.evil", DNS_STUB_NXDOMAIN,
	    "api.test.evil", -1, "host api.test.evil is not allowed" },
	/* data in a name goes nowhere: NXDOMAIN, and no lookup happens */
	{ &dns_pol, T_A, C_IN, "c2VjcmV0.evil.test", DNS_STUB_NXDOMAIN,
	    "c2vjcmv0.evil.test", -1,
	    "host c2vjcmv0.evil.test is not allowed" },
	{ &dns_pol, T_MX, C_IN, "api.test", DNS_STUB_REFUSED, "api.test", -1,
	    "query type MX is not served" },
	{ &dns_pol, T_TXT, C_IN, "evil.test", DNS_STUB_REFUSED, "evil.test",
	    -1, "query type TXT is not served" },
	{ &dns_pol, T_ANY, C_IN, "api.test", DNS_STUB_REFUSED, "api.test", -1,
	    "query type ANY is not served" },
	{ &dns_pol, T_HTTPS, C_IN, "api.test", DNS_STUB_REFUSED, "api.test",
	    -1, "query type HTTPS is not served" },
	{ &dns_pol, 4242, C_IN, "api.test", DNS_STUB_REFUSED, "api.test", -1,
	    "query type TYPE4242 is not served" },
	{ &dns_pol, T_A, C_CH, "version.bind", DNS_STUB_REFUSED,
	    "version.bind", -1, "query class 3 is not served" },
	/* not host names */
	{ &dns_pol, T_A, C_IN, "1.2.3.4", DNS_STUB_NXDOMAIN, "1.2.3.4", -1,
	    "not a valid host name" },
	{ &dns_pol, T_A, C_IN, "127.0.0.1", DNS_STUB_NXDOMAIN, "127.0.0.1",
	    -1, "not a valid host name" },
	{ &dns_pol, T_AAAA, C_IN, "bad name.test", DNS_STUB_NXDOMAIN,
	    "bad\\032name.test", -1, "not a valid host name" },
	{ &dns_pol, T_A, C_IN, "x\\y.test", DNS_STUB_NXDOMAIN,
	    "x\\092y.test", -1, "not a valid host name" },
	{ &dns_pol, T_A, C_IN, "", DNS_STUB_NXDOMAIN, "", -1,
	    "not a valid host name" },
	{ &dns_pol, T_MX, C_IN, "bad name", DNS_STUB_REFUSED,
	    "bad\\032name", -1, "query type MX is not served" },
	/* "*" allows any name, but types stay A and AAAA */
	{ &any_pol, T_A, C_IN, "whatever.test", DNS_STUB_ANSWER,
	    "whatever.test", 0, "" },
	{ &any_pol, T_TXT, C_IN, "whatever.test", DNS_STUB_REFUSED,
	    "whatever.test", -1, "query type TXT is not served" },
	{ &none_pol, T_A, C_IN, "api.test", DNS_STUB_NXDOMAIN, "api.test",
	    -1, "host api.test is not allowed" },
	{ NULL, T_A, C_IN, "api.test", DNS_STUB_NXDOMAIN, "api.test", -1,
	    "the sandbox's policy is gone" },
};

START_TEST(test_decide)
{
	char			name[1024], why[256], wd[256];
	int			rule = 99;
	enum dns_stub_verdict	v;

	memset(name, 'x', sizeof(name));
	v = dns_stub_decide(decide_cases[_i].pol, decide_cases[_i].type,
	    decide_cases[_i].class, decide_cases[_i].qname, name, sizeof(name),
	    &rule, why, sizeof(why), wd, sizeof(wd));
	ck_assert_int_eq(v, decide_cases[_i].v);
	ck_assert_str_eq(name, decide_cases[_i].name);
	ck_assert_int_eq(rule, decide_cases[_i].rule);
	ck_assert_str_eq(why, decide_cases[_i].why);
	ck_assert_str_eq(wd, "");
}
END_TEST

/* mode: report answers a name no rule names, the refusal kept for the
 * audit; on_unmatched: ask answers it too (the connection is held);
 * neither changes what is not a name or not served */
static const struct cfg_policy	report_pol = {
	.p_name = "rep", .p_rules = dns_rules, .p_nrules = NELEM(dns_rules),
	.p_report = 1,
};
static const struct cfg_policy	ask_pol = {
	.p_name = "ask", .p_rules = dns_rules, .p_nrules = NELEM(dns_rules),
	.p_unmatched_ask = 1,
};

START_TEST(test_decide_unmatched)
{
	char			name[1024], why[256], wd[256];
	int			rule;
	enum dns_stub_verdict	v;

	v = dns_stub_decide(&report_pol, T_A, C_IN, "evil.test", name,
	    sizeof(name), &rule, why, sizeof(why), wd, sizeof(wd));
	ck_assert_int_eq(v, DNS_STUB_ANSWER);
	ck_assert_int_eq(rule, -1);
	ck_assert_str_eq(why, "");
	ck_assert_str_eq(wd, "host evil.test is not allowed");
	v = dns_stub_decide(&report_pol, T_AAAA, C_IN, "evil.test", name,
	    sizeof(name), &rule, why, sizeof(why), wd, sizeof(wd));
	ck_assert_int_eq(v, DNS_STUB_NODATA);
	ck_assert_str_eq(wd, "host evil.test is not allowed");
	/* allowed by a rule: no would_deny */
	v = dns_stub_decide(&report_pol, T_A, C_IN, "api.test", name,
	    sizeof(name), &rule, why, sizeof(why), wd, sizeof(wd));
	ck_assert_int_eq(v, DNS_STUB_ANSWER);
	ck_assert_int_eq(rule, 0);
	ck_assert_str_eq(wd, "");
	/* not a name, not a type served: as in enforce mode */
	v = dns_stub_decide(&report_pol, T_A, C_IN, "1.2.3.4", name,
	    sizeof(name), &rule, why, sizeof(why), wd, sizeof(wd));
	ck_assert_int_eq(v, DNS_STUB_NXDOMAIN);
	ck_assert_str_eq(wd, "");
	v = dns_stub_decide(&report_pol, T_TXT, C_IN, "evil.test", name,
	    sizeof(name), &rule, why, sizeof(why), wd, sizeof(wd));
	ck_assert_int_eq(v, DNS_STUB_REFUSED);
	ck_assert_str_eq(wd, "");
	v = dns_stub_decide(&ask_pol, T_A, C_IN, "evil.test", name,
	    sizeof(name), &rule, why, sizeof(why), wd, sizeof(wd));
	ck_assert_int_eq(v, DNS_STUB_ANSWER);
	ck_assert_int_eq(rule, -1);
	ck_assert_str_eq(wd, "");
	ck_assert_ptr_nonnull(strstr(why, "on_unmatched: ask"));
}
END_TEST

/* dns_stub_bucket_take */

START_TEST(test_bucket_burst)
{
	struct dns_stub_bucket	b;
	uint64_t		t = 1000000;
	int			i;

	dns_stub_bucket_init(&b, t, 100);
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(dns_stub_bucket_take(&b, t, 50, 100), 1);
	ck_assert_int_eq(dns_stub_bucket_take(&b, t, 50, 100), 0);
	ck_assert_int_eq(dns_stub_bucket_take(&b, t, 50, 100), 0);
	/* 50/s: one query per 20 ms */
	ck_assert_int_eq(dns_stub_bucket_take(&b, t + 10, 50, 100), 0);
	ck_assert_int_eq(dns_stub_bucket_take(&b, t + 20, 50, 100), 1);
	ck_assert_int_eq(dns_stub_bucket_take(&b, t + 20, 50, 100), 0);
	ck_assert_int_eq(dns_stub_bucket_take(&b, t + 39, 50, 100), 0);
	ck_assert_int_eq(dns_stub_bucket_take(&b, t + 40, 50, 100), 1);
	/* one second: 50 more, not more */
	t += 1040;
	for (i = 0; i < 50; i++)
		ck_assert_int_eq(dns_stub_bucket_take(&b, t, 50, 100), 1);
	ck_assert_int_eq(dns_stub_bucket_take(&b, t, 50, 100), 0);
	/* a long pause fills it to the burst, no further */
	t += 3600 * 1000;
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(dns_stub_bucket_take(&b, t, 50, 100), 1);
	ck_assert_int_eq(dns_stub_bucket_take(&b, t, 50, 100), 0);
}
END_TEST

START_TEST(test_bucket_sustained)
{
	struct dns_stub_bucket	b;
	uint64_t		t = 5, passed = 0;
	int			i;

	/* 10 s of a query every ms: burst + 10 s x rate pass, exactly */
	dns_stub_bucket_init(&b, t, 100);
	for (i = 0; i < 10000; i++)
		passed += (uint64_t)dns_stub_bucket_take(&b, t + (uint64_t)i,
		    50, 100);
	ck_assert_uint_eq(passed, 100 + 9999 * 50 / 1000);
}
END_TEST

START_TEST(test_bucket_clock)
{
	struct dns_stub_bucket	b;
	int			i;

	/* backwards: no refill, no wrap */
	dns_stub_bucket_init(&b, 1000, 2);
	ck_assert_int_eq(dns_stub_bucket_take(&b, 1000, 50, 2), 1);
	ck_assert_int_eq(dns_stub_bucket_take(&b, 1000, 50, 2), 1);
	ck_assert_int_eq(dns_stub_bucket_take(&b, 10, 50, 2), 0);
	ck_assert_int_eq(dns_stub_bucket_take(&b, 0, 50, 2), 0);
	/* a huge jump does not overflow */
	ck_assert_int_eq(dns_stub_bucket_take(&b, UINT64_MAX / 2, 50, 2), 1);
	ck_assert_int_eq(dns_stub_bucket_take(&b, UINT64_MAX, 50, 2), 1);
	ck_assert_int_eq(dns_stub_bucket_take(&b, UINT64_MAX, 50, 2), 1);
	ck_assert_int_eq(dns_stub_bucket_take(&b, UINT64_MAX, 50, 2), 0);
	/* rate 0: the burst, then nothing ever again */
	dns_stub_bucket_init(&b, 0, 3);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(dns_stub_bucket_take(&b, 0, 0, 3), 1);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(dns_stub_bucket_take(&b,
		    (uint64_t)i * 1000000, 0, 3), 0);
}
END_TEST

Suite *
suite_dns_stub(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("dns_stub");
	tc = tcase_create("names");
	tcase_add_loop_test(tc, test_name_normalize, 0, NELEM(name_cases));
	tcase_add_test(tc, test_name_lengths);
	tcase_add_loop_test(tc, test_name_escape, 0, NELEM(esc_cases));
	tcase_add_test(tc, test_name_escape_cut);
	tcase_add_test(tc, test_names_of_codes);
	suite_add_tcase(s, tc);

	tc = tcase_create("decide");
	tcase_add_loop_test(tc, test_decide, 0, NELEM(decide_cases));
	tcase_add_test(tc, test_decide_unmatched);
	suite_add_tcase(s, tc);

	tc = tcase_create("limit");
	tcase_add_test(tc, test_bucket_burst);
	tcase_add_test(tc, test_bucket_sustained);
	tcase_add_test(tc, test_bucket_clock);
	suite_add_tcase(s, tc);
	return s;
}
