/*
 * Configuration loader: every error is reported at FILE:LINE:COL, all of
 * them in one pass; defaults and parsed values are as SPEC says.
 */
#include "config.h"

#include <sys/stat.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <openssl/ssl.h>

#include "cfg/cfg.h"
#include "tls/tls.h"
#include "cfg/cfg_internal.h"
#include "cfg/cfg_planes.h"
#include "dns/net_guard.h"
#include "unit.h"

/* Load <yaml> as "t.yaml"; *out gets everything printed (caller frees). */

static struct cfg *
load(const char *yaml, char **out, int *nerr)
{
	struct cfg	*c;
	FILE		*f;
	size_t		 sz;

	*out = NULL;
	f = open_memstream(out, &sz);
	ck_assert_ptr_nonnull(f);
	c = cfg_load_buffer("t.yaml", yaml, strlen(yaml), f, nerr);
	fclose(f);
	return c;
}

static int
count_lines(const char *s)
{
	int	n = 0;

	for (; *s != '\0'; s++)
		if (*s == '\n')
			n++;
	return n;
}

/* Does some line of <out> start with <where> and contain <msg>? */
static int
has_error(const char *out, const char *where, const char *msg)
{
	const char	*line, *nl;
	size_t		 wl = strlen(where);

	for (line = out; *line != '\0'; line = nl + 1) {
		if ((nl = strchr(line, '\n')) == NULL)
			return 0;
		if (strncmp(line, where, wl) == 0 &&
		    memmem(line, (size_t)(nl - line), msg, strlen(msg)) != NULL)
			return 1;
	}
	return 0;
}

#define POL	"policies:\n  - name: p\n    rules:\n      - host: a.com\n"
#define SBX	"policies:\n  - name: p\nsandboxes:\n  - id: s\n" \
		"    policy: p\n"

/* A secret (lines 1-4) with no inject or placeholder yet; PH adds one. */
#define SECK	"secrets:\n  - name: k\n    source: literal:v\n" \
		"    hosts: [api.test]\n"
#define PH	"    placeholder: airlock-k-1234\n"
/* A policy whose only rule (at the line after) has host <h>. */
#define RULE(h)	"policies:\n  - name: p\n    rules:\n" \
		"      - host: " h "\n"
/* A pricing entry: input on line 3 (value at column 12), output on 4. */
#define PRICE(in, out) "pricing:\n  - model: m\n    input: " in "\n" \
		"    output: " out "\n"
/* A policy whose geo value starts on line 3, column 10. */
#define GEO	"policies:\n  - name: p\n    geo: "
/* A policy whose caps keys start on line 4, indented by 6. */
#define CAPS	"policies:\n  - name: p\n    caps:\n"

struct err_case {
	const char	*ec_yaml;
	const char	*ec_where;	/* exact "FILE:LINE:COL: " prefix */
	const char	*ec_msg;	/* substring of the message */
};

static const struct err_case err_cases[] = {
	/* unknown keys, with and without a suggestion */
	{ POL "        metods: [GET]\n", "t.yaml:5:9: ",
	    "unknown key \"metods\" in rule (did you mean \"methods\"?)" },
	{ "frobnicate: 1\n", "t.yaml:1:1: ",
	    "unknown key \"frobnicate\" at the top level" },
	{ "lisen:\n  proxy: \"127.0.0.1:1\"\n", "t.yaml:1:1: ",
	    "unknown key \"lisen\" at the top level (did you mean "
	    "\"listen\"?)" },
	/* SPEC keys of later features */
	{ RULE("\"10.1.0.1/16\""), "t.yaml:4:15: ",
	    "a network must be ADDRESS/PREFIX with the host bits zero" },
	{ "launcher:\n  backend: netns\n", "t.yaml:2:12: ",
	    "launcher backend \"netns\" needs listen.transparent and "
	    "listen.dns" },
	{ "launcher:\n  qemu: {memory: 1KiB}\n", "t.yaml:2:18: ",
	    "\"memory\" must be at least 67108864 bytes" },
	{ "launcher:\n  qemu: {vcpus: 0}\n", "t.yaml:2:17: ",
	    "\"vcpus\" must be a whole number from 1 to 64" },
	{ "launcher:\n  qemu: {accel: hvf}\n", "t.yaml:2:17: ",
	    "\"accel\" must be auto, kvm or tcg, not \"hvf\"" },
	{ "launcher:\n  qemu: {kernel: /nonexistent/vmlinuz}\n",
	    "t.yaml:2:18: ", "qemu kernel \"/nonexistent/vmlinuz\": No such "
	    "file or directory" },
	{ "launcher:\n  qemu: {boot_timeout: 10ms}\n", "t.yaml:2:24: ",
	    "\"boot_timeout\" must be more than 0" },
	{ "launcher:\n  qemu: {kernal: x}\n", "t.yaml:2:10: ",
	    "unknown key \"kernal\" in launcher qemu (did you mean "
	    "\"kernel\"?)" },
	{ "listen:\n  transparent: \"10.0.0.1\"\n", "t.yaml:2:16: ",
	    "bad transparent address \"10.0.0.1\": " },
	{ "launcher:\n  network: 10.88.0.1/16\n", "t.yaml:2:12: ",
	    "bad network \"10.88.0.1/16\": an IPv4 network" },
	{ "launcher:\n  dns_pool: 198.18.0.0/31\n", "t.yaml:2:13: ",
	    "dns_pool \"198.18.0.0/31\": the prefix must be /8 to /30" },
	{ "launcher:\n  user: \"0:0\"\n", "t.yaml:2:9: ",
	    "\"user\" must not be root" },
	{ "launcher:\n  user: nobody\n", "t.yaml:2:9: ",
	    "\"user\" must be \"UID:GID\" (numbers)" },
	{ "launcher:\n  limits: {memory: 1KiB}\n", "t.yaml:2:20: ",
	    "\"memory\" must be at least 1048576 bytes" },
	/* issue 24 */
	{ "launcher:\n  dns: {max_names: 0}\n", "t.yaml:2:20: ",
	    "\"max_names\" must be at least 1, not \"0\"" },
	{ "launcher:\n  dns: {new_names_per_minute: -1}\n", "t.yaml:2:31: ",
	    "\"new_names_per_minute\"" },
	{ "launcher:\n  dns: {max_name: 5}\n", "t.yaml:2:9: ",
	    "unknown key \"max_name\" in launcher dns" },
	{ "launcher:\n  io_uring: maybe\n", "t.yaml:2:13: ",
	    "\"io_uring\" must be true or false" },
	{ "launcher:\n  canary: soon\n", "t.yaml:2:11: ", "\"canary\"" },
	{ "launcher:\n  backend: qemu\n  qemu: {kernel: /etc/hostname, "
	    "initrd: /etc/hostname}\n", "t.yaml:2:12: ",
	    "launcher backend \"qemu\" needs listen.transparent and "
	    "listen.dns" },
	{ "listen:\n  transparent: \"10.88.0.1:1\"\n  dns: \"10.88.0.1:2\"\n"
	    "launcher:\n  backend: qemu\n", "t.yaml:5:12: ",
	    "launcher backend \"qemu\" needs launcher.qemu.kernel and "
	    "launcher.qemu.initrd" },
	/* geoip and a policy's geo */
	{ GEO "{deny_countries: [KPX]}\n", "t.yaml:3:28: ",
	    "bad country code \"KPX\" in \"deny_countries\": use ISO 3166 "
	    "two-letter codes such as \"KP\"" },
	{ GEO "{allow_countries: [\"1A\"]}\n", "t.yaml:3:29: ",
	    "bad country code \"1A\" in \"allow_countries\"" },
	{ GEO "{deny_countries: KP}\n", "t.yaml:3:27: ",
	    "\"deny_countries\" must be a list" },
	{ GEO "{allow_countries: [{a: b}]}\n", "t.yaml:3:29: ",
	    "must be a two-letter code such as \"KP\", not a mapping" },
	{ GEO "[KP]\n", "t.yaml:3:10: ", "\"geo\" must be a mapping" },
	{ GEO "{alow_countries: [KP]}\n", "t.yaml:3:11: ",
	    "unknown key \"alow_countries\" in geo (did you mean "
	    "\"allow_countries\"?)" },
	{ "geoip: {database: \"\"}\n", "t.yaml:1:19: ",
	    "\"database\" is empty (use null to turn GeoIP off)" },
	{ "geoip: {database: /nonexistent/airlock/geo.mmdb}\n",
	    "t.yaml:1:19: ", "geoip database \"/nonexistent/airlock/geo.mmdb\": "
	    "No such file or directory" },
	{ "geoip: {database: [a]}\n", "t.yaml:1:19: ",
	    "\"database\" must be a path to a .mmdb file, not a list" },
	{ "geoip: {path: /x.mmdb}\n", "t.yaml:1:9: ",
	    "unknown key \"path\" in geoip" },
	{ "geoip: /x.mmdb\n", "t.yaml:1:8: ", "\"geoip\" must be a mapping" },
	/* wrong types */
	{ "state_dir: {a: b}\n", "t.yaml:1:12: ",
	    "\"state_dir\" must be a path, not a mapping" },
	{ POL "        ports: 443\n", "t.yaml:5:16: ",
	    "\"ports\" must be a list, not a single value" },
	{ "policies: {name: p}\n", "t.yaml:1:11: ",
	    "\"policies\" must be a list, not a mapping" },
	{ "listen:\n  proxy: {default_sandbox: null}\n", "t.yaml:2:10: ",
	    "missing required key \"address\" in a \"proxy\" listener" },
	{ "listen:\n  proxy: {address: \"127.0.0.1:1\", a: 1}\n", "t.yaml:2:35: ",
	    "unknown key \"a\" in a \"proxy\" listener" },
	{ "listen:\n  proxy:\n    - {address: \"127.0.0.1\"}\n",
	    "t.yaml:3:17: ", "bad listen address \"127.0.0.1\"" },
	{ "listen:\n  proxy:\n    - {address: \"127.0.0.1:1\", "
	    "default_sandbox: nobody}\n", "t.yaml:3:49: ",
	    "default_sandbox \"nobody\" of listener 127.0.0.1:1 is not a "
	    "defined sandbox" },
	{ "listen:\n  proxy:\n    - {address: \"127.0.0.1:1\", "
	    "default_sandbox: [a]}\n", "t.yaml:3:49: ",
	    "\"default_sandbox\" must be a sandbox id, not a list" },
	{ "listen:\n  proxy:\n    - {address: \"127.0.0.1:1\"}\n"
	    "    - \"127.0.0.1:1\"\n", "t.yaml:4:7: ",
	    "duplicate listen address" },
	{ "listen:\n  proxy: [{address: \"127.0.0.1:1\", "
	    "defualt_sandbox: x}]\n", "t.yaml:2:36: ",
	    "unknown key \"defualt_sandbox\" in a \"proxy\" listener (did "
	    "you mean \"default_sandbox\"?)" },
	{ "workers: {n: 1}\n", "t.yaml:1:10: ",
	    "\"workers\" must be a number, not a mapping" },
	{ "- a\n- b\n", "t.yaml:1:1: ",
	    "the configuration must be a mapping of keys, not a list" },
	/* durations and sizes */
	{ "limits:\n  connect_timeout: 10 parsecs\n", "t.yaml:2:20: ",
	    "bad duration \"10 parsecs\" for \"connect_timeout\"" },
	{ "limits:\n  idle_timeout: -1s\n", "t.yaml:2:17: ",
	    "bad duration \"-1s\"" },
	{ "limits:\n  header_timeout: 10\n", "t.yaml:2:19: ",
	    "bad duration \"10\"" },
	{ "limits:\n  connect_timeout: 0s\n", "t.yaml:2:20: ",
	    "\"connect_timeout\" must be more than 0" },
	{ "limits:\n  header_bytes: 12 bananas\n", "t.yaml:2:17: ",
	    "bad size \"12 bananas\" for \"header_bytes\"" },
	{ "limits:\n  max_connections: lots\n", "t.yaml:2:20: ",
	    "\"max_connections\" must be a whole number" },
	{ "limits:\n  max_connections: 0\n", "t.yaml:2:20: ",
	    "\"max_connections\" must be at least 1, not \"0\"" },
	/* workers */
	{ "workers: 5000\n", "t.yaml:1:10: ",
	    "\"workers\" must be a whole number from 0" },
	{ "workers: -1\n", "t.yaml:1:10: ",
	    "\"workers\" must be a whole number from 0" },
	/* listen addresses */
	{ "listen:\n  proxy: \"localhost:3128\"\n", "t.yaml:2:10: ",
	    "bad listen address \"localhost:3128\": the host must be an IP" },
	{ "listen:\n  proxy: [\"127.0.0.1:3128\", \"127.0.0.1:70000\"]\n",
	    "t.yaml:2:29: ", "bad listen address \"127.0.0.1:70000\": port" },
	{ "listen:\n  proxy: \"::1:3128\"\n", "t.yaml:2:10: ",
	    "IPv6 addresses need brackets" },
	{ "listen:\n  proxy: \"127.0.0.1\"\n", "t.yaml:2:10: ",
	    "missing \":PORT\"" },
	/* rules */
	{ POL "        ports: [443, 65536]\n", "t.yaml:5:22: ",
	    "bad port \"65536\": must be a number from 1 to 65535" },
	{ POL "        ports: [0]\n", "t.yaml:5:17: ", "bad port \"0\"" },
	{ POL "        ports: [https]\n", "t.yaml:5:17: ",
	    "bad port \"https\"" },
	{ POL "        methods: [GET, \"GE T\"]\n", "t.yaml:5:24: ",
	    "bad method \"GE T\": not an HTTP method token" },
	{ POL "        methods: []\n", "t.yaml:5:18: ",
	    "\"methods\" is an empty list" },
	{ POL "        paths: [\"v1/*\"]\n", "t.yaml:5:17: ",
	    "bad path \"v1/*\": must start with \"/\" or \"*\"" },
	{ POL "        paths: [\"/@scope%2f*\"]\n", "t.yaml:5:17: ",
	    "bad path \"/@scope%2f*\": has \"%2F\": an encoded slash in a "
	    "request is matched as \"/\", write \"/\"" },
	{ "policies:\n  - name: p\n    rules:\n      - host: a.*.com\n",
	    "t.yaml:4:15: ", "bad host \"a.*.com\"" },
	{ "policies:\n  - name: p\n    rules:\n      - host: \"**\"\n",
	    "t.yaml:4:15: ", "bad host \"**\"" },
	{ "policies:\n  - name: p\n    rules:\n      - host: \"\"\n",
	    "t.yaml:4:15: ", "bad host \"\": empty host" },
	{ "policies:\n  - name: p\n    rules:\n      - host: \"a b.com\"\n",
	    "t.yaml:4:15: ", "bad host \"a b.com\"" },
	{ "policies:\n  - name: p\n    rules:\n      - host: \"a.com:443\"\n",
	    "t.yaml:4:15: ", "a port belongs in \"ports\"" },
	{ "policies:\n  - name: p\n    rules:\n      - ports: [443]\n",
	    "t.yaml:4:9: ", "missing required key \"host\" in rule" },
	/* duplicates */
	{ "policies:\n  - name: p\n  - name: p\n", "t.yaml:3:11: ",
	    "duplicate policy name \"p\" (first at 2:11)" },
	{ SBX "  - id: s\n    policy: p\n", "t.yaml:6:9: ",
	    "duplicate sandbox id \"s\" (first at 4:9)" },
	{ "workers: 1\nworkers: 2\n", "t.yaml:2:1: ",
	    "duplicate key \"workers\" (first at 1:1)" },
	{ "upstream:\n  hosts:\n    a.test: 10.0.0.1\n    A.Test.: 10.0.0.2\n",
	    "t.yaml:4:5: ", "duplicate host \"a.test\" (first at 3:5)" },
	{ "listen:\n  proxy:\n    - \"127.0.0.1:3128\"\n    - \"127.1:3128\"\n",
	    "t.yaml:4:7: ",
	    "duplicate listen address \"127.0.0.1:3128\" (first at 3:7)" },
	{ SBX "    addresses: [10.0.0.2]\n  - id: t\n    policy: p\n"
	    "    addresses: [10.0.0.2]\n", "t.yaml:9:17: ",
	    "duplicate sandbox address \"10.0.0.2\" (first at 6:17)" },
	/* references and required keys */
	{ "sandboxes:\n  - id: s\n    policy: nope\n", "t.yaml:3:13: ",
	    "sandbox \"s\": policy \"nope\" is not defined" },
	{ "listen:\n  default_sandbox: ghost\n", "t.yaml:2:20: ",
	    "default_sandbox \"ghost\" is not a defined sandbox" },
	{ "policies:\n  - name: p\nsandboxes:\n  - policy: p\n",
	    "t.yaml:4:5: ", "missing required key \"id\" in sandbox" },
	{ "sandboxes:\n  - id: s\n", "t.yaml:2:5: ",
	    "missing required key \"policy\" in sandbox" },
	{ "policies:\n  - name: p\nsandboxes:\n  - id: \"../x\"\n"
	    "    policy: p\n", "t.yaml:4:9: ", "bad sandbox id \"../x\"" },
	{ SBX "    addresses: [10.0.0.300]\n", "t.yaml:6:17: ",
	    "bad address \"10.0.0.300\": not an IP address" },
	/* upstream */
	{ "upstream:\n  deny_networks: [default, 10.0.0.0/33]\n",
	    "t.yaml:2:28: ",
	    "bad network \"10.0.0.0/33\" in \"deny_networks\"" },
	{ "upstream:\n  allow_networks: [default]\n", "t.yaml:2:20: ",
	    "bad network \"default\" in \"allow_networks\"" },
	{ "upstream:\n  hosts:\n    api.test: example.com\n", "t.yaml:3:15: ",
	    "\"hosts\": \"api.test\" must map to an IP address, not "
	    "\"example.com\"" },
	{ "upstream:\n  resolver: dns.google\n", "t.yaml:2:13: ",
	    "bad resolver \"dns.google\"" },
	{ "upstream:\n  ca_file: /nonexistent/ca.pem\n", "t.yaml:2:12: ",
	    "cannot read \"ca_file\" \"/nonexistent/ca.pem\"" },
	{ "upstream:\n  ca_file: /dev/null\n", "t.yaml:2:12: ",
	    "bad \"ca_file\" \"/dev/null\": not a regular file" },
	{ "upstream:\n  ca_file: \"\"\n", "t.yaml:2:12: ",
	    "\"ca_file\" is empty" },
	/* tls */
	{ "tls: [1]\n", "t.yaml:1:6: ",
	    "\"tls\" must be a mapping, not a list" },
	{ "tls:\n  cert_cahce: 5\n", "t.yaml:2:3: ",
	    "unknown key \"cert_cahce\" in tls (did you mean "
	    "\"cert_cache\"?)" },
	{ "tls:\n  cert_cache: 0\n", "t.yaml:2:15: ",
	    "\"cert_cache\" must be at least 1, not \"0\"" },
	{ "tls:\n  cert_cache: -1\n", "t.yaml:2:15: ",
	    "\"cert_cache\" must be a whole number of at least 1, not \"-1\"" },
	{ "tls:\n  cert_cache: 10k\n", "t.yaml:2:15: ",
	    "\"cert_cache\" must be a whole number" },
	{ "tls:\n  cert_cache: [1]\n", "t.yaml:2:15: ",
	    "\"cert_cache\" must be a number, not a list" },
	{ "tls:\n  leaf_validity: 0s\n", "t.yaml:2:18: ",
	    "\"leaf_validity\" must be more than 0" },
	{ "tls:\n  leaf_validity: 31d\n", "t.yaml:2:18: ",
	    "\"leaf_validity\" must be at most 30d, not \"31d\"" },
	{ "tls:\n  leaf_validity: 43201m\n", "t.yaml:2:18: ",
	    "\"leaf_validity\" must be at most 30d, not \"43201m\"" },
	{ "tls:\n  leaf_validity: 1 week\n", "t.yaml:2:18: ",
	    "bad duration \"1 week\" for \"leaf_validity\"" },
	{ "tls:\n  leaf_validity: 7\n", "t.yaml:2:18: ",
	    "bad duration \"7\" for \"leaf_validity\"" },
	{ "tls:\n  min_version: 1.1\n", "t.yaml:2:16: ",
	    "\"min_version\" must be \"1.2\" or \"1.3\", not \"1.1\"" },
	{ "tls:\n  min_version: \"1.4\"\n", "t.yaml:2:16: ",
	    "\"min_version\" must be \"1.2\" or \"1.3\", not \"1.4\"" },
	{ "tls:\n  min_version: TLSv1.3\n", "t.yaml:2:16: ",
	    "\"min_version\" must be \"1.2\" or \"1.3\", not \"TLSv1.3\"" },
	{ "tls:\n  min_version: 1.20\n", "t.yaml:2:16: ",
	    "not \"1.20\"" },
	{ "tls:\n  min_version: [\"1.2\"]\n", "t.yaml:2:16: ",
	    "\"min_version\" must be \"1.2\" or \"1.3\", not a list" },
	{ "tls:\n  min_version: 1.2\n  min_version: 1.3\n", "t.yaml:3:3: ",
	    "duplicate key \"min_version\" (first at 2:3)" },
	/* intercept and splicing */
	{ POL "        intercept: maybe\n", "t.yaml:5:20: ",
	    "\"intercept\" must be true or false, not \"maybe\"" },
	{ POL "        intercept: [false]\n", "t.yaml:5:20: ",
	    "\"intercept\" must be true or false, not a list" },
	{ POL "        intercept: false\n        methods: [GET]\n",
	    "t.yaml:6:9: ", "methods/paths cannot be enforced on a spliced "
	    "(intercept: false) rule; remove \"methods\"" },
	{ POL "        paths: [\"/v1/*\"]\n        intercept: no\n",
	    "t.yaml:5:9: ", "methods/paths cannot be enforced on a spliced "
	    "(intercept: false) rule; remove \"paths\"" },
	{ "policies:\n  - name: p\n    rules:\n      - intercept: off\n"
	    "        host: a.com\n        ports: [443]\n"
	    "        methods: [GET, HEAD]\n", "t.yaml:7:9: ",
	    "methods/paths cannot be enforced on a spliced" },
	/* token sources */
	{ SBX "    token: hunter2\n", "t.yaml:6:12: ",
	    "\"token\" must be env:NAME, file:PATH, exec:COMMAND or "
	    "literal:VALUE" },
	{ SBX "    token: env:AIRLOCK_TEST_SURELY_UNSET\n", "t.yaml:6:12: ",
	    "environment variable \"AIRLOCK_TEST_SURELY_UNSET\" is not set" },
	{ SBX "    token: \"exec:exit 3\"\n", "t.yaml:6:12: ",
	    "command exited with status 3" },
	{ SBX "    token: \"literal:\"\n", "t.yaml:6:12: ",
	    "\"token\" is empty" },
	{ SBX "    token: file:/nonexistent/token\n", "t.yaml:6:12: ",
	    "cannot read file \"/nonexistent/token\"" },
	/* secrets: the list and each secret's keys */
	{ "secrets: {}\n", "t.yaml:1:10: ",
	    "\"secrets\" must be a list, not a mapping" },
	{ "secrets: [k]\n", "t.yaml:1:11: ",
	    "a secret must be a mapping, not a single value" },
	{ SECK, "t.yaml:2:5: ",
	    "secret \"k\" needs \"inject\", \"placeholder\" or both" },
	{ SECK "    hsots: [a.test]\n" PH, "t.yaml:5:5: ",
	    "unknown key \"hsots\" in secret (did you mean \"hosts\"?)" },
	{ "secrets:\n  - source: literal:v\n    hosts: [a.test]\n" PH,
	    "t.yaml:2:5: ", "missing required key \"name\" in secret" },
	{ "secrets:\n  - name: k\n    hosts: [a.test]\n" PH, "t.yaml:2:5: ",
	    "missing required key \"source\" in secret" },
	{ "secrets:\n  - name: k\n    source: literal:v\n" PH, "t.yaml:2:5: ",
	    "missing required key \"hosts\" in secret" },
	{ "secrets:\n  - name: \"../k\"\n    source: literal:v\n"
	    "    hosts: [a.test]\n" PH, "t.yaml:2:11: ",
	    "bad secret name \"../k\": use letters, digits" },
	{ SECK PH "  - name: k\n    source: literal:w\n    hosts: [b.test]\n"
	    "    inject: {query: key}\n", "t.yaml:6:11: ",
	    "duplicate secret name \"k\" (first at 2:11)" },
	/* sources are checked for form only; values are the store's */
	{ "secrets:\n  - name: k\n    source: hunter2\n    hosts: [a.test]\n"
	    PH, "t.yaml:3:13: ", "\"source\" must be env:NAME, file:PATH, "
	    "exec:COMMAND or literal:VALUE (a bare value is refused)" },
	{ "secrets:\n  - name: k\n    source: \"env:\"\n"
	    "    hosts: [a.test]\n" PH, "t.yaml:3:13: ",
	    "\"source\": env: needs a variable name" },
	{ "secrets:\n  - name: k\n    source: \"exec:\"\n"
	    "    hosts: [a.test]\n" PH, "t.yaml:3:13: ",
	    "\"source\": exec: needs a command" },
	{ "secrets:\n  - name: k\n    source: [env:X]\n"
	    "    hosts: [a.test]\n" PH, "t.yaml:3:13: ",
	    "\"source\" must be a source such as env:NAME or a token broker "
	    "mapping, not a list" },
	/* refresh */
	{ SECK PH "    refresh: 5m\n", "t.yaml:6:14: ",
	    "\"refresh\" applies only to exec: sources" },
	{ "secrets:\n  - name: k\n    source: \"exec:echo v\"\n"
	    "    refresh: 10\n    hosts: [a.test]\n" PH, "t.yaml:4:14: ",
	    "bad duration \"10\" for \"refresh\"" },
	{ "secrets:\n  - name: k\n    source: \"exec:echo v\"\n"
	    "    refresh: 50ms\n    hosts: [a.test]\n" PH, "t.yaml:4:14: ",
	    "\"refresh\" must be at least 100ms, not \"50ms\"" },
	/* hosts */
	{ "secrets:\n  - name: k\n    source: literal:v\n    hosts: []\n" PH,
	    "t.yaml:4:12: ", "\"hosts\" is an empty list: a secret must be "
	    "bound to at least one host" },
	{ "secrets:\n  - name: k\n    source: literal:v\n"
	    "    hosts: [a.test, \"b.*.test\"]\n" PH, "t.yaml:4:21: ",
	    "bad host \"b.*.test\"" },
	{ "secrets:\n  - name: k\n    source: literal:v\n"
	    "    hosts: api.test\n" PH, "t.yaml:4:12: ",
	    "\"hosts\" must be a list, not a single value" },
	{ "secrets:\n  - name: k\n    source: literal:v\n"
	    "    hosts: [a.test, A.Test.]\n" PH, "t.yaml:4:21: ",
	    "duplicate host \"a.test\" (first at 4:13)" },
	/* inject */
	{ SECK "    inject: header\n", "t.yaml:5:13: ",
	    "\"inject\" must be a mapping, not a single value" },
	{ SECK "    inject: {}\n", "t.yaml:5:13: ",
	    "\"inject\" needs one of: header (with value), basic, query, "
	    "aws_sigv4" },
	{ SECK "    inject: {heder: X-Key, query: key}\n", "t.yaml:5:14: ",
	    "unknown key \"heder\" in inject (did you mean \"header\"?)" },
	{ SECK "    inject: {header: X-Key}\n", "t.yaml:5:13: ",
	    "\"header\" needs \"value\", a template such as" },
	{ SECK "    inject: {value: \"${secret}\"}\n", "t.yaml:5:13: ",
	    "\"value\" needs \"header\"" },
	{ SECK "    inject: {header: X-Key, value: \"Bearer $secret\"}\n",
	    "t.yaml:5:36: ", "\"value\" must contain ${secret}" },
	{ SECK "    inject: {header: X-Key, value: \"a\\nb${secret}\"}\n",
	    "t.yaml:5:36: ", "\"value\" contains control characters" },
	{ SECK "    inject: {header: \"X Key\", value: \"${secret}\"}\n",
	    "t.yaml:5:22: ", "bad header name \"X Key\": not an HTTP header "
	    "token" },
	{ SECK "    inject: {header: Content-Length, value: \"${secret}\"}\n",
	    "t.yaml:5:22: ", "header \"Content-Length\" cannot be injected: "
	    "it frames or routes the request" },
	{ SECK "    inject: {query: key, basic: {}}\n", "t.yaml:5:13: ",
	    "\"inject\" takes one form, not basic and query" },
	{ SECK "    inject:\n      header: A\n      value: \"${secret}\"\n"
	    "      aws_sigv4: {region: r, service: s}\n", "t.yaml:6:7: ",
	    "\"inject\" takes one form, not header and aws_sigv4" },
	{ SECK "    inject:\n      basic:\n", "t.yaml:6:7: ",
	    "\"basic\" needs a mapping: {} when the secret is "
	    "\"user:password\", or {username: U}" },
	{ SECK "    inject: {basic: user}\n", "t.yaml:5:21: ",
	    "\"basic\" must be a mapping, not a single value" },
	{ SECK "    inject: {basic: {username: \"a:b\"}}\n", "t.yaml:5:32: ",
	    "bad \"username\" \"a:b\": Basic user names have no \":\"" },
	{ SECK "    inject: {basic: {username: \"\"}}\n", "t.yaml:5:32: ",
	    "\"username\" is empty" },
	{ SECK "    inject: {basic: {user: u}}\n", "t.yaml:5:22: ",
	    "unknown key \"user\" in basic" },
	{ SECK "    inject: {query: \"a&b\"}\n", "t.yaml:5:21: ",
	    "bad query parameter \"a&b\": use letters, digits" },
	{ SECK "    inject: {query: [key]}\n", "t.yaml:5:21: ",
	    "\"query\" must be a parameter name, not a list" },
	{ SECK "    inject:\n      aws_sigv4: {region: us-east-1}\n",
	    "t.yaml:6:18: ", "missing required key \"service\" in aws_sigv4" },
	{ SECK "    inject:\n      aws_sigv4: {region: US_EAST, service: s3}\n",
	    "t.yaml:6:27: ", "bad \"region\" \"US_EAST\": use lowercase "
	    "letters, digits and \"-\", e.g. us-east-1" },
	{ SECK "    inject:\n      aws_sigv4: {region: a, service: S3}\n",
	    "t.yaml:6:39: ", "bad \"service\" \"S3\"" },
	{ SECK "    inject:\n      aws_sigv4: {region: ~, service: s3}\n",
	    "t.yaml:6:27: ", "\"region\" needs a value" },
	/* allow_plaintext, reflect_min_run */
	{ SECK PH "    allow_plaintext: maybe\n", "t.yaml:6:22: ",
	    "allow_plaintext" },
	{ "reflect_min_run: 3\n", "t.yaml:1:18: ", "reflect_min_run" },
	{ "reflect_min_run: twelve\n", "t.yaml:1:18: ", "reflect_min_run" },
	/* placeholder_in */
	{ SECK PH "    placeholder_in: [header, bodi]\n", "t.yaml:6:30: ",
	    "bad \"placeholder_in\" entry \"bodi\": use header, query, path, "
	    "body or ws" },
	{ SECK PH "    placeholder_in: []\n", "t.yaml:6:21: ",
	    "\"placeholder_in\" is an empty list" },
	{ SECK PH "    placeholder_in: [ws, ws]\n", "t.yaml:6:26: ",
	    "\"ws\" is listed twice in \"placeholder_in\"" },
	{ SECK PH "    placeholder_in: [header, [ws]]\n", "t.yaml:6:30: ",
	    "placeholder_in" },
	/* placeholder and sandbox_env */
	{ SECK "    placeholder: short\n", "t.yaml:5:18: ",
	    "\"placeholder\" \"short\" is too short: at least 8 characters" },
	{ SECK "    placeholder: \"ph#12345678\"\n", "t.yaml:5:18: ",
	    "bad \"placeholder\" \"ph#12345678\": use letters, digits and" },
	{ SECK "    placeholder: \"airlock k 1\"\n", "t.yaml:5:18: ",
	    "bad \"placeholder\" \"airlock k 1\"" },
	{ SECK "    placeholder: {a: b}\n", "t.yaml:5:18: ",
	    "\"placeholder\" must be a string, not a mapping" },
	{ SECK PH "  - name: j\n    source: literal:w\n    hosts: [a.test]\n"
	    "    placeholder: airlock-k-12345\n", "t.yaml:9:18: ",
	    "placeholder \"airlock-k-12345\" contains the placeholder of "
	    "secret \"k\" (at 5:18)" },
	{ SECK PH "  - name: j\n    source: literal:w\n    hosts: [a.test]\n"
	    "    placeholder: airlock-k\n", "t.yaml:9:18: ",
	    "placeholder \"airlock-k\" is part of the placeholder of secret "
	    "\"k\" (at 5:18)" },
	{ SECK PH "  - name: j\n    source: literal:w\n    hosts: [a.test]\n"
	    "    placeholder: airlock-k-1234\n", "t.yaml:9:18: ",
	    "placeholder \"airlock-k-1234\" repeats the placeholder of "
	    "secret \"k\"" },
	{ SECK PH "    sandbox_env: api_key\n", "t.yaml:6:18: ",
	    "bad \"sandbox_env\" \"api_key\": use A-Z, 0-9 and \"_\"" },
	{ SECK PH "    sandbox_env: 1KEY\n", "t.yaml:6:18: ",
	    "bad \"sandbox_env\" \"1KEY\"" },
	{ SECK PH "    sandbox_env: PATH\n", "t.yaml:6:18: ",
	    "\"sandbox_env\" \"PATH\" is set by airlock itself inside a "
	    "sandbox" },
	{ SECK PH "    sandbox_env: AIRLOCK_GATEWAY\n", "t.yaml:6:18: ",
	    "\"sandbox_env\" \"AIRLOCK_GATEWAY\" is set by airlock" },
	{ SECK "    inject: {query: key}\n    sandbox_env: KEY\n",
	    "t.yaml:6:18: ", "\"sandbox_env\" needs a \"placeholder\" to give "
	    "to the sandbox" },
	{ SECK PH "    sandbox_env: KEY\n  - name: j\n    source: literal:w\n"
	    "    hosts: [a.test]\n    placeholder: other-placeholder\n"
	    "    sandbox_env: KEY\n", "t.yaml:11:18: ",
	    "duplicate sandbox_env \"KEY\" (first at 6:18)" },
	/* rule secrets: defined, bound to hosts covering the rule's */
	{ SECK PH RULE("api.test") "        secrets: [k, nope]\n",
	    "t.yaml:10:22: ", "secret \"nope\" is not defined" },
	{ RULE("api.test") "        secrets: [k]\n", "t.yaml:5:19: ",
	    "secret \"k\" is not defined" },
	{ SECK PH RULE("other.test") "        secrets: [k]\n", "t.yaml:10:19: ",
	    "secret \"k\" is bound to hosts [\"api.test\"] which do not "
	    "cover rule host \"other.test\"" },
	{ SECK PH RULE("\"*.test\"") "        secrets: [k]\n",
	    "t.yaml:10:19: ", "secret \"k\" is bound to hosts [\"api.test\"] "
	    "which do not cover rule host \"*.test\"" },
	{ "secrets:\n  - name: k\n    source: literal:v\n"
	    "    hosts: [\"*.test\", a.test]\n" PH RULE("\"*\"")
	    "        secrets: [k]\n", "t.yaml:10:19: ",
	    "secret \"k\" is bound to hosts [\"*.test\", \"a.test\"] which "
	    "do not cover rule host \"*\"" },
	{ "secrets:\n  - name: k\n    source: literal:v\n"
	    "    hosts: [\"*.a.test\"]\n" PH RULE("\"*.test\"")
	    "        secrets: [k]\n", "t.yaml:10:19: ",
	    "which do not cover rule host \"*.test\"" },
	{ "secrets:\n  - name: k\n    source: literal:v\n"
	    "    hosts: [\"*.api.test\"]\n" PH RULE("api.test")
	    "        secrets: [k]\n", "t.yaml:10:19: ",
	    "which do not cover rule host \"api.test\"" },
	{ SECK PH RULE("api.test") "        secrets: [k, k]\n",
	    "t.yaml:10:22: ", "duplicate secret \"k\" (first at 10:19)" },
	{ SECK PH RULE("api.test") "        secrets: k\n", "t.yaml:10:18: ",
	    "\"secrets\" must be a list, not a single value" },
	{ SECK PH RULE("api.test") "        intercept: false\n"
	    "        secrets: [k]\n", "t.yaml:11:9: ",
	    "secrets cannot be attached on a spliced (intercept: false) rule; "
	    "remove \"secrets\" or intercept the rule" },
	/* audit */
	/* pricing */
	{ PRICE("abc", "1"), "t.yaml:3:12: ",
	    "bad amount \"abc\" for \"input\": not a decimal number of USD "
	    "(e.g. 5, 0.15, 2.50)" },
	{ PRICE("0.0000015", "1"), "t.yaml:3:12: ",
	    "bad amount \"0.0000015\" for \"input\": more than 6 decimal "
	    "places" },
	{ PRICE("1", "-0.60"), "t.yaml:4:13: ",
	    "bad amount \"-0.60\" for \"output\": amounts cannot be negative" },
	{ PRICE("1e-6", "1"), "t.yaml:3:12: ",
	    "bad amount \"1e-6\" for \"input\": not a decimal number" },
	{ PRICE("\"1.\"", "1"), "t.yaml:3:12: ",
	    "bad amount \"1.\" for \"input\": not a decimal number" },
	{ PRICE(".5", "1"), "t.yaml:3:12: ",
	    "bad amount \".5\" for \"input\": not a decimal number" },
	{ PRICE("\"$3\"", "1"), "t.yaml:3:12: ",
	    "bad amount \"$3\" for \"input\": not a decimal number" },
	{ PRICE("\"1,50\"", "1"), "t.yaml:3:12: ",
	    "bad amount \"1,50\" for \"input\": not a decimal number" },
	{ PRICE("\" 1\"", "1"), "t.yaml:3:12: ",
	    "bad amount \" 1\" for \"input\": not a decimal number" },
	{ PRICE("18446744073710", "1"), "t.yaml:3:12: ",
	    "bad amount \"18446744073710\" for \"input\": too large" },
	{ PRICE("99999999999999999999.5", "1"), "t.yaml:3:12: ",
	    "for \"input\": too large" },
	{ PRICE("[1]", "1"), "t.yaml:3:12: ",
	    "\"input\" must be an amount of USD, not a list" },
	{ PRICE("1", "1") "    cached_input: 0.1234567\n", "t.yaml:5:19: ",
	    "bad amount \"0.1234567\" for \"cached_input\": more than 6" },
	{ PRICE("1", "1") "    cache_write: x\n", "t.yaml:5:18: ",
	    "bad amount \"x\" for \"cache_write\"" },
	{ PRICE("1", "1") "    inptu: 2\n", "t.yaml:5:5: ",
	    "unknown key \"inptu\" in pricing entry (did you mean "
	    "\"input\"?)" },
	{ "pricing:\n  - {input: 1, output: 2}\n", "t.yaml:2:5: ",
	    "missing required key \"model\" in pricing entry" },
	{ "pricing:\n  - {model: m, input: 1}\n", "t.yaml:2:5: ",
	    "missing required key \"output\" in pricing entry" },
	{ "pricing:\n  - {model: ~, input: 1, output: 1}\n", "t.yaml:2:13: ",
	    "\"model\" needs a value" },
	{ "pricing:\n  - {model: \"\", input: 1, output: 1}\n",
	    "t.yaml:2:13: ", "bad model \"\": empty" },
	{ "pricing:\n  - {model: \"gpt 4\", input: 1, output: 1}\n",
	    "t.yaml:2:13: ", "bad model \"gpt 4\": contains a space" },
	{ "pricing:\n  - {model: \"a*\", input: 1, output: 1}\n"
	    "  - {model: \"a*\", input: 2, output: 2}\n", "t.yaml:3:13: ",
	    "duplicate pricing model \"a*\" (first at 2:13)" },
	{ "pricing: {model: m}\n", "t.yaml:1:10: ",
	    "\"pricing\" must be a list, not a mapping" },
	{ "pricing: [m]\n", "t.yaml:1:11: ",
	    "a pricing entry must be a mapping, not a single value" },
	/* caps */
	{ CAPS "      usd: 5$\n", "t.yaml:4:12: ",
	    "bad amount \"5$\" for \"usd\": not a decimal number" },
	{ CAPS "      usd: 0.0000001\n", "t.yaml:4:12: ",
	    "bad amount \"0.0000001\" for \"usd\": more than 6 decimal places "
	    "(amounts are whole micro-dollars)" },
	{ CAPS "      usd: -5\n", "t.yaml:4:12: ",
	    "bad amount \"-5\" for \"usd\": amounts cannot be negative" },
	{ CAPS "      requests: -1\n", "t.yaml:4:17: ",
	    "\"requests\" must be a whole number of at least 0, not \"-1\"" },
	{ CAPS "      requests: 1.5\n", "t.yaml:4:17: ",
	    "\"requests\" must be a whole number" },
	{ CAPS "      bytes_in: 10 gigs\n", "t.yaml:4:17: ",
	    "bad size \"10 gigs\" for \"bytes_in\"" },
	{ CAPS "      bytes_out: 1.5GiB\n", "t.yaml:4:18: ",
	    "bad size \"1.5GiB\" for \"bytes_out\"" },
	{ CAPS "      rate: 50/x\n", "t.yaml:4:13: ",
	    "bad rate \"50/x\": the unit must be s, m or h (use e.g. 50/s, "
	    "600/m, 10/h)" },
	{ CAPS "      rate: 0/s\n", "t.yaml:4:13: ",
	    "bad rate \"0/s\": N must be at least 1" },
	{ CAPS "      rate: 50\n", "t.yaml:4:13: ",
	    "bad rate \"50\": expected N/s, N/m or N/h" },
	{ CAPS "      rate: 50/sec\n", "t.yaml:4:13: ",
	    "bad rate \"50/sec\": the unit must be s, m or h" },
	{ CAPS "      rate: \"50 / s\"\n", "t.yaml:4:13: ",
	    "bad rate \"50 / s\": expected N/s, N/m or N/h" },
	{ CAPS "      rate: 4294967296/s\n", "t.yaml:4:13: ",
	    "bad rate \"4294967296/s\": N is too large" },
	{ CAPS "      rate: {n: 5}\n", "t.yaml:4:13: ",
	    "\"rate\" must be a rate such as 50/s, not a mapping" },
	{ CAPS "      window: 500ms\n", "t.yaml:4:15: ",
	    "\"window\" must be a whole number of seconds, at least 1s, not "
	    "\"500ms\"" },
	{ CAPS "      window: 1500ms\n", "t.yaml:4:15: ",
	    "\"window\" must be a whole number of seconds" },
	{ CAPS "      window: 0s\n", "t.yaml:4:15: ",
	    "\"window\" must be a whole number of seconds, at least 1s" },
	{ CAPS "      window: 1 day\n", "t.yaml:4:15: ",
	    "bad duration \"1 day\" for \"window\"" },
	{ CAPS "      dollars: 5\n", "t.yaml:4:7: ",
	    "unknown key \"dollars\" in caps" },
	{ CAPS "      reqeusts: 5\n", "t.yaml:4:7: ",
	    "unknown key \"reqeusts\" in caps (did you mean \"requests\"?)" },
	{ CAPS "      usd: 1\n      usd: 2\n", "t.yaml:5:7: ",
	    "duplicate key \"usd\" (first at 4:7)" },
	{ "policies:\n  - name: p\n    caps: [usd]\n", "t.yaml:3:11: ",
	    "\"caps\" must be a mapping, not a list" },
	/* meter */
	{ POL "        intercept: false\n        meter: openai\n",
	    "t.yaml:6:9: ", "usage cannot be metered on a spliced (intercept: "
	    "false) rule, its responses are not decrypted; remove \"meter\" "
	    "or intercept the rule" },
	{ POL "        meter: anthropic\n        intercept: no\n",
	    "t.yaml:5:9: ", "usage cannot be metered on a spliced" },
	{ POL "        meter: gpt\n", "t.yaml:5:16: ",
	    "\"meter\" must be openai, anthropic, gemini or none, not \"gpt\"" },
	{ POL "        meter: OpenAI\n", "t.yaml:5:16: ",
	    "\"meter\" must be openai, anthropic, gemini or none, not \"OpenAI\"" },
	{ POL "        meter: [openai]\n", "t.yaml:5:16: ",
	    "\"meter\" must be openai, anthropic, gemini or none, not a list" },
	/* budget_store */
	{ "budget_store: \"redis://127.0.0.1/0\"\n", "t.yaml:1:15: ",
	    "budget_store \"redis://127.0.0.1/0\": the URL needs a port "
	    "(1-65535): redis://[HOST]:PORT/DB" },
	{ "budget_store: \"rediss://u:hunter2@cache.test/1\"\n",
	    "t.yaml:1:15: ", "budget_store \"rediss://***@cache.test/1\": "
	    "no credentials in the URL" },
	{ "budget_store: sqlite\n", "t.yaml:1:15: ",
	    "budget_store \"sqlite\": \"budget_store\" must be \"file\", a "
	    "redis:// or rediss:// URL or unix:PATH" },
	{ "budget_store: File\n", "t.yaml:1:15: ",
	    "budget_store \"File\": \"budget_store\" must be \"file\"" },
	{ "budget_store: \"redis://h:6379/16\"\n", "t.yaml:1:15: ",
	    "budget_store \"redis://h:6379/16\": the database must be a "
	    "number 0-15" },
	{ "budget_store: \"unix:sock\"\n", "t.yaml:1:15: ",
	    "budget_store \"unix:sock\": unix: needs an absolute path" },
	{ "budget_store_auth: \"literal:x\"\n", "t.yaml:1:20: ",
	    "\"budget_store_auth\" must be env:NAME or file:/PATH" },
	{ "budget_store: [file]\n", "t.yaml:1:15: ",
	    "\"budget_store\" must be \"file\", redis://HOST:PORT/DB or "
	    "unix:PATH, not a list" },
	/* limits.default_max_tokens */
	{ "limits:\n  default_max_tokens: 0\n", "t.yaml:2:23: ",
	    "\"default_max_tokens\" must be at least 1, not \"0\"" },
	{ "limits:\n  default_max_tokens: 4k\n", "t.yaml:2:23: ",
	    "\"default_max_tokens\" must be a whole number of at least 1, "
	    "not \"4k\"" },
	{ "audit:\n  hash_chain: maybe\n", "t.yaml:2:15: ",
	    "\"hash_chain\" must be true or false, not \"maybe\"" },
	/* YAML itself */
	{ "listen:\n  proxy: [a\nworkers: 1\n", "t.yaml:3:8: ",
	    "YAML syntax error: did not find expected ',' or ']'" },
	{ "workers: 1\n---\nworkers: 2\n", "t.yaml:3:1: ",
	    "only one YAML document" },
	{ "state_dir: \"a\\0b\"\n", "t.yaml:1:12: ",
	    "\"state_dir\" contains a NUL character" },
	{ "a: \xff\n", "t.yaml:1:4: ", "YAML syntax error: invalid" },
	/* node types the walker checks from the table flags (issue 16) */
	{ "listen: [1]\n", "t.yaml:1:9: ",
	    "\"listen\" must be a mapping, not a list" },
	{ "upstream: x\n", "t.yaml:1:11: ",
	    "\"upstream\" must be a mapping, not a single value" },
	{ "limits: x\n", "t.yaml:1:9: ",
	    "\"limits\" must be a mapping, not a single value" },
	{ "audit: [1]\n", "t.yaml:1:8: ",
	    "\"audit\" must be a mapping, not a list" },
	{ "admin: [1]\n", "t.yaml:1:8: ",
	    "\"admin\" must be a mapping, not a list" },
	{ "launcher: [1]\n", "t.yaml:1:11: ",
	    "\"launcher\" must be a mapping, not a list" },
	{ "launcher:\n  pool: x\n", "t.yaml:2:9: ",
	    "\"pool\" must be a mapping, not a single value" },
	{ "launcher:\n  qemu: [1]\n", "t.yaml:2:9: ",
	    "\"qemu\" must be a mapping, not a list" },
	{ "workers: {a: 1}\n", "t.yaml:1:10: ",
	    "\"workers\" must be a number, not a mapping" },
	{ "workers: \"a\\0b\"\n", "t.yaml:1:10: ",
	    "\"workers\" contains a NUL character" },
	{ "budget_store: [1]\n", "t.yaml:1:15: ",
	    "\"budget_store\" must be \"file\", redis://HOST:PORT/DB or "
	    "unix:PATH, not a list" },
	{ "listen:\n  admin: {a: 1}\n", "t.yaml:2:10: ",
	    "\"admin\" must be \"unix:PATH\" or \"HOST:PORT\", not a "
	    "mapping" },
	{ "upstream:\n  hosts: [1]\n", "t.yaml:2:10: ",
	    "\"hosts\" must be a mapping, not a list" },
	{ "upstream:\n  deny_networks: x\n", "t.yaml:2:18: ",
	    "\"deny_networks\" must be a list, not a single value" },
	{ POL "        ports: {a: 1}\n", "t.yaml:5:16: ",
	    "\"ports\" must be a list, not a mapping" },
	{ "policies:\n  - name: p\n    geo:\n      deny_countries: x\n",
	    "t.yaml:4:23: ", "\"deny_countries\" must be a list, not a "
	    "single value" },
	{ "secrets:\n  - name: s\n    source: env:X\n    placeholder: "
	    "PLACEHOLDER1\n    hosts: {a: 1}\n", "t.yaml:5:12: ",
	    "\"hosts\" must be a list, not a mapping" },
	/* parent proxies (src/upstream/up_cfg.c) */
	{ "upstream:\n  proxy: \"ftp://1.2.3.4:21\"\n", "t.yaml:2:10: ",
	    "expected http://HOST:PORT or socks5://HOST:PORT" },
	{ "upstream:\n  proxy: \"http://u:secretpw@1.2.3.4:3128\"\n",
	    "t.yaml:2:10: ", "credentials do not go in the URL" },
	{ "upstream:\n  proxy: \"http://1.2.3.4\"\n", "t.yaml:2:10: ",
	    "missing \":PORT\"" },
	{ "upstream:\n  proxy: \"http://::1:3128\"\n", "t.yaml:2:10: ",
	    "IPv6 addresses need brackets" },
	{ "upstream:\n  proxy: \"socks5://1.2.3.4:0\"\n", "t.yaml:2:10: ",
	    "port must be a number from 1 to 65535" },
	{ "upstream:\n  proxy: \"http://1.2.3.4:8/x\"\n", "t.yaml:2:10: ",
	    "no path, query or fragment" },
	{ "upstream:\n  proxy_auth: \"literal:a:b\"\n", "t.yaml:2:15: ",
	    "\"proxy_auth\" without \"upstream.proxy\"" },
	{ "upstream:\n  proxy: \"http://1.2.3.4:8\"\n  proxy_auth: "
	    "\"literal:nocolon\"\n", "t.yaml:3:15: ", "must resolve to "
	    "\"user:password\"" },
	{ POL "        via: \"socks4://1.2.3.4:1080\"\n", "t.yaml:5:14: ",
	    "bad \"via\"" },
};

START_TEST(test_cfg_error_table)
{
	const struct err_case	*ec = &err_cases[_i];
	struct cfg		*c;
	char			*out;
	int			 nerr = -1;

	c = load(ec->ec_yaml, &out, &nerr);
	ck_assert_msg(c == NULL, "case %d loaded", _i);
	ck_assert_msg(nerr == 1 && count_lines(out) == 1,
	    "case %d: %d errors:\n%s", _i, nerr, out);
	ck_assert_msg(strncmp(out, ec->ec_where, strlen(ec->ec_where)) == 0,
	    "case %d: want prefix \"%s\", got: %s", _i, ec->ec_where, out);
	ck_assert_msg(strstr(out, ec->ec_msg) != NULL,
	    "case %d: want \"%s\", got: %s", _i, ec->ec_msg, out);
	free(out);
}
END_TEST

/*
 * A key whose value has the wrong type still counts as given (CFG_K_NOTE):
 * the checks across keys of its mapping see it, as before the walker
 * checked types.
 */
START_TEST(test_cfg_type_error_still_noted)
{
	char	*out;
	int	 nerr;

	ck_assert_ptr_null(load("secrets:\n  - name: s\n    source: env:X\n"
	    "    hosts: [a.com]\n    inject:\n      value: [1]\n", &out,
	    &nerr));
	ck_assert_int_eq(nerr, 2);
	ck_assert_str_eq(out, "t.yaml:6:14: \"value\" must be a template "
	    "such as \"Bearer ${secret}\", not a list\n"
	    "t.yaml:6:7: \"value\" needs \"header\", the name of the header "
	    "to set\n");
	free(out);
}
END_TEST

/*
 * The planes' tables as the walker needs them: one node type at most, a
 * generic setter always on a scalar, a nested row with its table and no
 * setter, a kept node with somewhere to keep it, names unique in a table
 * and across the top level.
 */
static void
check_table(const struct cfg_key *keys, const char *where)
{
	static cfg_key_fn	*generic[] = {
		cfg_set_duration, cfg_set_size, cfg_set_size64, cfg_set_count,
		cfg_set_count64, cfg_set_money, cfg_set_percent, cfg_set_bool,
	};
	const struct cfg_key	*k, *j;
	int			 t;
	size_t			 i, n = 0;

	for (k = keys; k->k_name != NULL; k++, n++) {
		t = k->k_flags & CFG_T_MASK;
		ck_assert_msg(t == 0 || t == CFG_T_SCALAR || t == CFG_T_SEQ ||
		    t == CFG_T_MAP, "%s.%s: two node types", where, k->k_name);
		for (i = 0; i < sizeof(generic) / sizeof(generic[0]); i++)
			if (k->k_fn == generic[i])
				ck_assert_msg(t == CFG_T_SCALAR, "%s.%s: generic "
				    "setter without CFG_T_SCALAR", where,
				    k->k_name);
		if (k->k_fn == NULL) {
			ck_assert_msg(k->k_sub != NULL && t == CFG_T_MAP,
			    "%s.%s: no setter and no table", where, k->k_name);
			check_table(k->k_sub, k->k_name);
		}
		if (k->k_flags & CFG_K_NOTE)
			ck_assert_msg(k->k_note != 0, "%s.%s: CFG_K_NOTE at 0",
			    where, k->k_name);
		for (j = keys; j < k; j++)
			ck_assert_msg(strcmp(j->k_name, k->k_name) != 0,
			    "%s.%s twice", where, k->k_name);
	}
	ck_assert_msg(n < 32, "%s: %zu keys", where, n);
}

START_TEST(test_cfg_tables_consistent)
{
	const struct cfg_key	*planes[] = {
		cfg_core_keys, pol_cfg_keys, sbx_cfg_keys, aud_cfg_keys,
		tls_cfg_keys, adm_cfg_keys, geo_cfg_keys, sec_cfg_keys,
		bud_cfg_keys, lnc_cfg_keys,
	};
	const struct cfg_key	*k, *j;
	size_t			 i, p;

	for (i = 0; i < sizeof(planes) / sizeof(planes[0]); i++)
		check_table(planes[i], "top");
	check_table(bud_cfg_caps_keys, "caps");
	for (i = 0; i < sizeof(planes) / sizeof(planes[0]); i++)
		for (k = planes[i]; k->k_name != NULL; k++)
			for (p = 0; p < i; p++)
				for (j = planes[p]; j->k_name != NULL; j++)
					ck_assert_msg(strcmp(j->k_name,
					    k->k_name) != 0, "top-level \"%s\" "
					    "in two planes", k->k_name);
}
END_TEST

/* A bare token is refused without echoing it: it may be the secret. */
START_TEST(test_cfg_bare_token_not_echoed)
{
	char	*out;
	int	 nerr;

	ck_assert_ptr_null(load(SBX "    token: hunter2\n", &out, &nerr));
	ck_assert_ptr_null(strstr(out, "hunter2"));
	free(out);
}
END_TEST

START_TEST(test_cfg_all_errors_reported)
{
	static const char	*yaml =
	    "listen:\n"
	    "  proxy: \"localhost:1\"\n"
	    "workers: 5000\n"
	    "limits:\n"
	    "  idle_timeout: 10 parsecs\n"
	    "policies:\n"
	    "  - name: p\n"
	    "    rules:\n"
	    "      - host: \"a.*.com\"\n"
	    "        metods: [GET]\n"
	    "  - name: p\n"
	    "sandboxes:\n"
	    "  - id: s\n"
	    "    policy: nope\n"
	    "geoip: {database: \"\"}\n";
	static const struct {
		const char	*where, *msg;
	} want[] = {
		{ "t.yaml:2:10: ", "bad listen address \"localhost:1\"" },
		{ "t.yaml:3:10: ", "\"workers\" must be a whole number" },
		{ "t.yaml:5:17: ", "bad duration \"10 parsecs\"" },
		{ "t.yaml:9:15: ", "bad host \"a.*.com\"" },
		{ "t.yaml:10:9: ", "unknown key \"metods\" in rule" },
		{ "t.yaml:11:11: ", "duplicate policy name \"p\"" },
		{ "t.yaml:14:13: ", "policy \"nope\" is not defined" },
		{ "t.yaml:15:19: ", "\"database\" is empty" },
	};
	char	*out;
	size_t	 i;
	int	 nerr;

	ck_assert_ptr_null(load(yaml, &out, &nerr));
	ck_assert_int_eq(nerr, (int)(sizeof(want) / sizeof(want[0])));
	ck_assert_int_eq(count_lines(out), nerr);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(has_error(out, want[i].where, want[i].msg),
		    "missing %s%s in:\n%s", want[i].where, want[i].msg, out);
	free(out);
}
END_TEST

static int
guard_allows(const struct cfg *c, const char *ip)
{
	struct net_addr	a;

	ck_assert_int_eq(net_host_literal(ip, &a), 1);
	return net_guard_check(c->c_guard, &a, NULL, 0);
}

START_TEST(test_cfg_full)
{
	static const char	*yaml =
	    "listen:\n"
	    "  proxy: [\"127.0.0.1:3128\", \"[::1]:3129\"]\n"
	    "  default_sandbox: demo\n"
	    "state_dir: /var/lib/airlock\n"
	    "workers: 4\n"
	    "limits:\n"
	    "  header_bytes: 32KiB\n"
	    "  header_timeout: 15s\n"
	    "  connect_timeout: 5s\n"
	    "  idle_timeout: 2m\n"
	    "  shutdown_grace: 0s\n"
	    "  max_connections: 100\n"
	    "  max_connections_per_sandbox: 10\n"
	    "  upstream_timeout: 1h\n"
	    "  body_bytes: 1MB\n"
	    "upstream:\n"
	    "  ca_file: system\n"
	    "  resolver: \"127.0.0.1:5353\"\n"
	    "  hosts: {\"API.Test\": \"127.0.0.1\", \"v6.test\": \"[::1]\"}\n"
	    "  deny_networks: [default, \"8.8.4.0/24\"]\n"
	    "  allow_networks: [\"127.0.0.1/32\"]\n"
	    "policies:\n"
	    "  - name: default\n"
	    "    rules:\n"
	    "      - host: \"API.OpenAI.com\"\n"
	    "        ports: [443]\n"
	    "        methods: [get, POST]\n"
	    "        paths: [\"/v1/*\"]\n"
	    "        intercept: yes\n"
	    "      - host: \"*.Example.COM.\"\n"
	    "      - host: github.com\n"
	    "        ports: [443, 22]\n"
	    "        intercept: false\n"
	    "        methods: ~\n"
	    "  - name: empty\n"
	    "sandboxes:\n"
	    "  - id: demo\n"
	    "    policy: default\n"
	    "    token: literal:s3cret\n"
	    "    addresses: [\"10.88.0.2\", \"FD00::2\"]\n"
	    "  - id: other\n"
	    "    policy: empty\n"
	    "    token: ~\n"
	    "audit:\n"
	    "  file: \"-\"\n"
	    "  hash_chain: yes\n"
	    "tls:\n"
	    "  cert_cache: 50\n"
	    "  leaf_validity: 30d\n"
	    "  min_version: \"1.3\"\n";
	const struct cfg_sandbox	*s;
	const struct cfg_policy		*p;
	const struct cfg_rule		*r;
	struct cfg			*c;
	char				*out;
	int				 nerr = -1;

	c = load(yaml, &out, &nerr);
	ck_assert_msg(c != NULL, "errors:\n%s", out);
	ck_assert_int_eq(nerr, 0);
	ck_assert_str_eq(out, "");
	free(out);

	ck_assert_uint_eq(c->c_nlisten_proxy, 2);
	ck_assert_str_eq(c->c_listen_proxy[0], "127.0.0.1:3128");
	ck_assert_str_eq(c->c_listen_proxy[1], "[::1]:3129");
	ck_assert_str_eq(c->c_default_sandbox, "demo");
	ck_assert_str_eq(c->c_state_dir, "/var/lib/airlock");
	ck_assert_int_eq(c->c_workers, 4);
	ck_assert_uint_eq(c->c_limits.l_header_bytes, 32 * 1024);
	ck_assert_uint_eq(c->c_limits.l_header_timeout_ms, 15000);
	ck_assert_uint_eq(c->c_limits.l_connect_timeout_ms, 5000);
	ck_assert_uint_eq(c->c_limits.l_idle_timeout_ms, 120000);
	ck_assert_uint_eq(c->c_limits.l_shutdown_grace_ms, 0);
	ck_assert_uint_eq(c->c_limits.l_max_connections, 100);
	ck_assert_uint_eq(c->c_limits.l_max_connections_per_sandbox, 10);
	ck_assert_uint_eq(c->c_limits.l_upstream_timeout_ms, 3600000);
	ck_assert_uint_eq(c->c_limits.l_body_bytes, 1000000);

	ck_assert_str_eq(c->c_upstream_ca_file, "system");
	ck_assert_str_eq(c->c_upstream_resolver, "127.0.0.1:5353");
	ck_assert_uint_eq(c->c_nupstream_hosts, 2);
	ck_assert_str_eq(c->c_upstream_hosts[0].h_name, "api.test");
	ck_assert_str_eq(c->c_upstream_hosts[0].h_ip, "127.0.0.1");
	ck_assert_str_eq(c->c_upstream_hosts[1].h_name, "v6.test");
	ck_assert_str_eq(c->c_upstream_hosts[1].h_ip, "::1");
	ck_assert_int_eq(guard_allows(c, "127.0.0.1"), 1);
	ck_assert_int_eq(guard_allows(c, "127.0.0.2"), 0);
	ck_assert_int_eq(guard_allows(c, "169.254.169.254"), 0);
	ck_assert_int_eq(guard_allows(c, "8.8.4.4"), 0);
	ck_assert_int_eq(guard_allows(c, "8.8.8.8"), 1);

	ck_assert_uint_eq(c->c_npolicies, 2);
	p = cfg_policy_find(c, "default");
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->p_nrules, 3);
	r = &p->p_rules[0];
	ck_assert_str_eq(r->r_host, "api.openai.com");
	ck_assert_uint_eq(r->r_nports, 1);
	ck_assert_int_eq(r->r_ports[0], 443);
	ck_assert_uint_eq(r->r_nmethods, 2);
	ck_assert_str_eq(r->r_methods[0], "GET");
	ck_assert_str_eq(r->r_methods[1], "POST");
	ck_assert_uint_eq(r->r_npaths, 1);
	ck_assert_str_eq(r->r_paths[0], "/v1/*");
	ck_assert_int_eq(r->r_line, 25);
	ck_assert_int_eq(r->r_col, 9);
	ck_assert_int_eq(r->r_intercept, 1);
	r = &p->p_rules[1];
	ck_assert_str_eq(r->r_host, "*.example.com");
	ck_assert_uint_eq(r->r_nports, 2);
	ck_assert_int_eq(r->r_ports[0], 80);
	ck_assert_int_eq(r->r_ports[1], 443);
	ck_assert_ptr_null(r->r_methods);
	ck_assert_uint_eq(r->r_nmethods, 0);
	ck_assert_ptr_null(r->r_paths);
	ck_assert_uint_eq(r->r_npaths, 0);
	ck_assert_int_eq(r->r_intercept, 1);
	r = &p->p_rules[2];
	ck_assert_str_eq(r->r_host, "github.com");
	ck_assert_uint_eq(r->r_nports, 2);
	ck_assert_int_eq(r->r_ports[1], 22);
	ck_assert_ptr_null(r->r_methods);
	ck_assert_ptr_null(r->r_paths);
	ck_assert_int_eq(r->r_intercept, 0);
	ck_assert_int_eq(r->r_line, 31);
	p = cfg_policy_find(c, "empty");
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->p_nrules, 0);
	ck_assert_ptr_null(cfg_policy_find(c, "nope"));

	ck_assert_uint_eq(c->c_nsandboxes, 2);
	s = cfg_sandbox_find(c, "demo");
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_eq(s->s_policy, cfg_policy_find(c, "default"));
	ck_assert_str_eq(s->s_policy_name, "default");
	ck_assert_str_eq(s->s_token, "s3cret");
	ck_assert_uint_eq(s->s_token_len, 6);
	ck_assert_int_eq(s->s_token_generated, 0);
	ck_assert_uint_eq(s->s_naddresses, 2);
	ck_assert_str_eq(s->s_addresses[0], "10.88.0.2");
	ck_assert_str_eq(s->s_addresses[1], "fd00::2");
	s = cfg_sandbox_find(c, "other");
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_eq(s->s_policy, cfg_policy_find(c, "empty"));
	ck_assert_ptr_null(s->s_token);
	ck_assert_int_eq(s->s_token_generated, 1);
	ck_assert_ptr_null(cfg_sandbox_find(c, "nope"));

	ck_assert_str_eq(c->c_audit_file, "-");
	ck_assert_int_eq(c->c_audit_hash_chain, 1);

	ck_assert_uint_eq(c->c_tls_cert_cache, 50);
	ck_assert_uint_eq(c->c_tls_leaf_validity_ms, 30ULL * 86400 * 1000);
	ck_assert_int_eq(c->c_tls_min_version, TLS1_3_VERSION);
	cfg_unref(c);
}
END_TEST

/* SPEC: "a file with only policies and sandboxes works"; the rest is
 * default. */
START_TEST(test_cfg_defaults)
{
	static const char	*yaml =
	    "policies:\n"
	    "  - name: p\n"
	    "    rules:\n"
	    "      - host: pypi.org\n"
	    "sandboxes:\n"
	    "  - id: s\n"
	    "    policy: p\n";
	struct cfg	*c;
	char		*out, *cwd, want[4096];
	int		 nerr = -1;

	c = load(yaml, &out, &nerr);
	ck_assert_msg(c != NULL, "errors:\n%s", out);
	ck_assert_int_eq(nerr, 0);
	free(out);
	cwd = getcwd(NULL, 0);
	ck_assert_ptr_nonnull(cwd);

	ck_assert_str_eq(c->c_file, "t.yaml");
	ck_assert_str_eq(c->c_dir, cwd);
	ck_assert_uint_eq(c->c_nlisten_proxy, 1);
	ck_assert_str_eq(c->c_listen_proxy[0], "127.0.0.1:3128");
	ck_assert_ptr_null(c->c_default_sandbox);
	snprintf(want, sizeof(want), "%s/state", cwd);
	ck_assert_str_eq(c->c_state_dir, want);
	ck_assert_int_eq(c->c_workers, 0);
	ck_assert_uint_eq(c->c_limits.l_header_bytes, 64 * 1024);
	ck_assert_uint_eq(c->c_limits.l_header_timeout_ms, 30000);
	ck_assert_uint_eq(c->c_limits.l_connect_timeout_ms, 10000);
	ck_assert_uint_eq(c->c_limits.l_idle_timeout_ms, 120000);
	ck_assert_uint_eq(c->c_limits.l_shutdown_grace_ms, 30000);
	ck_assert_uint_eq(c->c_limits.l_reload_grace_ms, 10000);
	ck_assert_uint_eq(c->c_limits.l_upstream_timeout_ms, 300000);
	ck_assert_uint_eq(c->c_limits.l_max_connections, 20000);
	ck_assert_uint_eq(c->c_limits.l_max_connections_per_sandbox, 512);
	ck_assert_uint_eq(c->c_limits.l_body_bytes, 16 * 1024 * 1024);
	ck_assert_str_eq(c->c_upstream_ca_file, "system");
	ck_assert_str_eq(c->c_upstream_resolver, "system");
	ck_assert_uint_eq(c->c_nupstream_hosts, 0);
	/* deny_networks: [default] */
	ck_assert_int_eq(guard_allows(c, "127.0.0.1"), 0);
	ck_assert_int_eq(guard_allows(c, "10.1.2.3"), 0);
	ck_assert_int_eq(guard_allows(c, "::1"), 0);
	ck_assert_int_eq(guard_allows(c, "1.1.1.1"), 1);
	snprintf(want, sizeof(want), "%s/state/audit.jsonl", cwd);
	ck_assert_str_eq(c->c_audit_file, want);
	ck_assert_int_eq(c->c_audit_hash_chain, 0);
	ck_assert_uint_eq(c->c_tls_cert_cache, 10000);
	ck_assert_uint_eq(c->c_tls_leaf_validity_ms, 7ULL * 86400 * 1000);
	ck_assert_int_eq(c->c_tls_min_version, TLS1_2_VERSION);
	ck_assert_int_eq(c->c_policies[0].p_rules[0].r_intercept, 1);
	ck_assert_ptr_nonnull(c->c_sandboxes[0].s_policy);
	ck_assert_ptr_null(c->c_sandboxes[0].s_token);
	ck_assert_int_eq(c->c_sandboxes[0].s_token_generated, 1);
	/* no pricing, no caps, no metering, the file ledger */
	ck_assert_uint_eq(c->c_limits.l_default_max_tokens, 128000);
	ck_assert_ptr_null(c->c_pricing);
	ck_assert_uint_eq(c->c_npricing, 0);
	ck_assert_str_eq(c->c_budget_store, "file");
	ck_assert_int_eq(c->c_policies[0].p_caps.cp_has_usd, 0);
	ck_assert_int_eq(c->c_policies[0].p_caps.cp_has_requests, 0);
	ck_assert_int_eq(c->c_policies[0].p_caps.cp_has_bytes_in, 0);
	ck_assert_int_eq(c->c_policies[0].p_caps.cp_has_bytes_out, 0);
	ck_assert_int_eq(c->c_policies[0].p_caps.cp_has_rate, 0);
	ck_assert_uint_eq(c->c_policies[0].p_caps.cp_window_ms, 0);
	ck_assert_int_eq(c->c_policies[0].p_rules[0].r_meter,
	    CFG_METER_NONE);
	free(cwd);
	cfg_unref(c);
}
END_TEST

/* Each explicit listener's default sandbox: listen.default_sandbox for a
 * plain address, its own (null: none) for {address, default_sandbox}. */
START_TEST(test_cfg_listen_defaults)
{
	static const char	*yaml =
	    "listen:\n"
	    "  proxy:\n"
	    "    - \"127.0.0.1:1\"\n"
	    "    - {address: \"127.0.0.1:2\", default_sandbox: null}\n"
	    "    - {address: \"127.0.0.1:3\", default_sandbox: b}\n"
	    "    - {address: \"[::1]:4\"}\n"
	    "  default_sandbox: a\n"
	    "policies: [{name: p}]\n"
	    "sandboxes: [{id: a, policy: p}, {id: b, policy: p}]\n";
	static const char	*one =
	    "listen:\n"
	    "  proxy: {address: \"127.0.0.1:5\", default_sandbox: a}\n"
	    "policies: [{name: p}]\n"
	    "sandboxes: [{id: a, policy: p}]\n";
	struct cfg	*c;
	char		*out;
	int		 nerr;

	c = load(yaml, &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	free(out);
	ck_assert_uint_eq(c->c_nlisten_proxy, 4);
	ck_assert_str_eq(c->c_listen_proxy[1], "127.0.0.1:2");
	ck_assert_str_eq(c->c_listen_proxy[3], "[::1]:4");
	ck_assert_str_eq(cfg_listen_default_sandbox(c, 0), "a");
	ck_assert_ptr_null(cfg_listen_default_sandbox(c, 1));
	ck_assert_str_eq(cfg_listen_default_sandbox(c, 2), "b");
	ck_assert_str_eq(cfg_listen_default_sandbox(c, 3), "a");
	ck_assert_ptr_null(cfg_listen_default_sandbox(c, 4));
	ck_assert_ptr_null(cfg_listen_default_sandbox(c, -1));
	cfg_unref(c);

	c = load(one, &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	free(out);
	ck_assert_uint_eq(c->c_nlisten_proxy, 1);
	ck_assert_str_eq(c->c_listen_proxy[0], "127.0.0.1:5");
	ck_assert_str_eq(cfg_listen_default_sandbox(c, 0), "a");
	ck_assert_ptr_null(c->c_default_sandbox);
	cfg_unref(c);

	/* the defaults: one listener, no default sandbox */
	c = load("policies: []\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	free(out);
	ck_assert_ptr_null(cfg_listen_default_sandbox(c, 0));
	cfg_unref(c);
}
END_TEST

/* limits for connections that have not identified yet. */
START_TEST(test_cfg_unidentified_limits)
{
	struct cfg	*c;
	char		*out;
	int		 nerr;

	c = load("policies: []\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	free(out);
	ck_assert_uint_eq(c->c_limits.l_unidentified_per_source, 128);
	ck_assert_uint_eq(c->c_limits.l_unidentified_share, 50);
	ck_assert_uint_eq(c->c_limits.l_identify_timeout_ms, 10000);
	cfg_unref(c);
	c = load("limits:\n  unidentified_per_source: 3\n"
	    "  unidentified_share: 25%\n  identify_timeout: 1500ms\n",
	    &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	free(out);
	ck_assert_uint_eq(c->c_limits.l_unidentified_per_source, 3);
	ck_assert_uint_eq(c->c_limits.l_unidentified_share, 25);
	ck_assert_uint_eq(c->c_limits.l_identify_timeout_ms, 1500);
	cfg_unref(c);
	c = load("limits: {unidentified_share: 100}\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	free(out);
	ck_assert_uint_eq(c->c_limits.l_unidentified_share, 100);
	cfg_unref(c);
	ck_assert_ptr_null(load("limits:\n  unidentified_share: 0%\n", &out,
	    &nerr));
	ck_assert_msg(has_error(out, "t.yaml:2:23: ", "\"unidentified_share\" "
	    "must be a percentage from 1% to 100%, not \"0%\""), "%s", out);
	free(out);
	ck_assert_ptr_null(load("limits:\n  unidentified_share: 101%\n", &out,
	    &nerr));
	ck_assert_msg(has_error(out, "t.yaml:2:23: ", "not \"101%\""), "%s",
	    out);
	free(out);
	ck_assert_ptr_null(load("limits:\n  unidentified_share: \"%\"\n",
	    &out, &nerr));
	ck_assert_msg(has_error(out, "t.yaml:2:23: ", "percentage"), "%s", out);
	free(out);
	ck_assert_ptr_null(load("limits:\n  unidentified_per_source: 0\n",
	    &out, &nerr));
	ck_assert_msg(has_error(out, "t.yaml:2:28: ",
	    "\"unidentified_per_source\" must be at least 1"), "%s", out);
	free(out);
	ck_assert_ptr_null(load("limits:\n  identify_timeout: 0s\n", &out,
	    &nerr));
	ck_assert_msg(has_error(out, "t.yaml:2:21: ", "identify_timeout"), "%s",
	    out);
	free(out);
}
END_TEST

/* An empty file is refused (a pipe read twice came back empty and ran
 * with every default), at FILE:LINE:COL. */
START_TEST(test_cfg_empty_file)
{
	static const struct {
		const char	*doc;
		const char	*where;
	} cases[] = {
		{ "", "t.yaml:1:1: " },
		{ "# nothing but a comment\n", "t.yaml:1:1: " },
		{ "\n\n~\n", "t.yaml:3:1: " },
		{ "---\nnull\n", "t.yaml:2:1: " },
	};
	struct cfg	*c;
	char		*out;
	size_t		 i;
	int		 nerr;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c = load(cases[i].doc, &out, &nerr);
		ck_assert_msg(c == NULL, "doc %zu loaded", i);
		ck_assert_int_eq(nerr, 1);
		ck_assert_msg(has_error(out, cases[i].where,
		    "the configuration is empty"), "doc %zu: %s", i, out);
		free(out);
	}
}
END_TEST

/* Empty lists and explicit nulls all mean "the defaults". */
START_TEST(test_cfg_empty_and_null)
{
	static const char	*docs[] = {
		"policies: []\nsandboxes: []\n",
		"listen:\nlimits: ~\nupstream: null\naudit:\n",
		("listen:\n  default_sandbox: null\nupstream:\n"
		"  deny_networks: ~\n"),
		"tls:\n",
		"tls: {}\n",
		("tls:\n  cert_cache: ~\n  leaf_validity:\n"
		"  min_version: null\n"),
	};
	struct cfg	*c;
	char		*out;
	size_t		 i;
	int		 nerr;

	for (i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		c = load(docs[i], &out, &nerr);
		ck_assert_msg(c != NULL, "doc %zu: %s", i, out);
		ck_assert_int_eq(nerr, 0);
		ck_assert_str_eq(c->c_listen_proxy[0], "127.0.0.1:3128");
		ck_assert_ptr_null(c->c_default_sandbox);
		ck_assert_int_eq(guard_allows(c, "127.0.0.1"), 0);
		ck_assert_uint_eq(c->c_tls_cert_cache, 10000);
		ck_assert_uint_eq(c->c_tls_leaf_validity_ms,
		    7ULL * 86400 * 1000);
		ck_assert_int_eq(c->c_tls_min_version, TLS1_2_VERSION);
		free(out);
		cfg_unref(c);
	}
}
END_TEST

/* tls: the values each key accepts, and what they are stored as. */
struct tls_case {
	const char	*tc_yaml;	/* after "tls:\n" */
	size_t		 tc_cache;
	uint64_t	 tc_validity;
	int		 tc_version;
};

#define DAY	(86400ULL * 1000)
static const struct tls_case tls_cases[] = {
	{ "  cert_cache: 1\n", 1, 7 * DAY, TLS1_2_VERSION },
	{ "  cert_cache: 250000\n", 250000, 7 * DAY, TLS1_2_VERSION },
	{ "  leaf_validity: 1ms\n", 10000, 1, TLS1_2_VERSION },
	{ "  leaf_validity: 1h\n", 10000, 3600 * 1000, TLS1_2_VERSION },
	{ "  leaf_validity: 30d\n", 10000, 30 * DAY, TLS1_2_VERSION },
	{ "  leaf_validity: 720h\n", 10000, 30 * DAY, TLS1_2_VERSION },
	{ "  leaf_validity: 43200m\n", 10000, 30 * DAY, TLS1_2_VERSION },
	{ "  min_version: 1.2\n", 10000, 7 * DAY, TLS1_2_VERSION },
	{ "  min_version: \"1.2\"\n", 10000, 7 * DAY, TLS1_2_VERSION },
	{ "  min_version: 1.3\n", 10000, 7 * DAY, TLS1_3_VERSION },
	{ "  min_version: '1.3'\n", 10000, 7 * DAY, TLS1_3_VERSION },
	{ "  {cert_cache: 3, leaf_validity: 2d, min_version: \"1.3\"}\n", 3,
	    2 * DAY, TLS1_3_VERSION },
};
#undef DAY

/* upstream.alpn: what origins are offered; both by default */
START_TEST(test_cfg_upstream_alpn)
{
	struct cfg	*c;
	char		*out;
	int		 nerr;

	c = load("upstream: {alpn: [\"http/1.1\"]}\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_int_eq(c->c_upstream_alpn, TLS_ALPN_HTTP11);
	ck_assert_int_eq(c->c_tls_alpn, TLS_ALPN_H2 | TLS_ALPN_HTTP11);
	free(out);
	cfg_unref(c);
	c = load("tls: {alpn: [h2]}\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_int_eq(c->c_upstream_alpn, TLS_ALPN_H2 | TLS_ALPN_HTTP11);
	free(out);
	cfg_unref(c);
	c = load("upstream: {alpn: [h3]}\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(out, "t.yaml:1:"));
	ck_assert_ptr_nonnull(strstr(out, "not \"h3\""));
	free(out);
}
END_TEST

START_TEST(test_cfg_tls)
{
	const struct tls_case	*tc = &tls_cases[_i];
	struct cfg		*c;
	char			 yaml[256], *out;
	int			 nerr;

	snprintf(yaml, sizeof(yaml), "tls:\n%s", tc->tc_yaml);
	c = load(yaml, &out, &nerr);
	ck_assert_msg(c != NULL, "%s: %s", tc->tc_yaml, out);
	ck_assert_int_eq(nerr, 0);
	ck_assert_uint_eq(c->c_tls_cert_cache, tc->tc_cache);
	ck_assert_uint_eq(c->c_tls_leaf_validity_ms, tc->tc_validity);
	ck_assert_int_eq(c->c_tls_min_version, tc->tc_version);
	free(out);
	cfg_unref(c);
}
END_TEST

/*
 * intercept: false splices by SNI, so nothing inside the tunnel can be
 * checked: methods and paths are refused there, each at its own key.
 */
START_TEST(test_cfg_splice)
{
	static const struct {
		const char	*yaml;	/* rule keys after "host: a.com" */
		int		 intercept;
	} ok[] = {
		{ "", 1 },
		{ "        intercept: ~\n        methods: [GET]\n", 1 },
		{ "        intercept: true\n        paths: [\"/x\"]\n", 1 },
		{ "        intercept: On\n", 1 },
		{ "        intercept: false\n", 0 },
		{ "        intercept: NO\n        ports: [443]\n", 0 },
		{ "        intercept: false\n        methods:\n"
		    "        paths: ~\n", 0 },
	};
	struct cfg	*c;
	char		 yaml[512], *out;
	size_t		 i;
	int		 nerr;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(yaml, sizeof(yaml), POL "%s", ok[i].yaml);
		c = load(yaml, &out, &nerr);
		ck_assert_msg(c != NULL, "%zu: %s", i, out);
		ck_assert_int_eq(c->c_policies[0].p_rules[0].r_intercept,
		    ok[i].intercept);
		free(out);
		cfg_unref(c);
	}

	c = load(POL "        methods: [GET]\n        intercept: false\n"
	    "        paths: [\"/v1/*\"]\n      - host: b.com\n"
	    "        intercept: false\n        paths: [\"*\"]\n"
	    "      - host: c.com\n        paths: [\"*\"]\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 3);
	ck_assert_int_eq(count_lines(out), 3);
	ck_assert_msg(has_error(out, "t.yaml:5:9: ", "spliced (intercept: "
	    "false) rule; remove \"methods\""), "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:7:9: ", "spliced (intercept: "
	    "false) rule; remove \"paths\""), "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:10:9: ", "spliced (intercept: "
	    "false) rule; remove \"paths\""), "%s", out);
	free(out);

	/* a bad methods list is still a splice conflict: both reported */
	c = load(POL "        intercept: false\n        methods: []\n", &out,
	    &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 2);
	ck_assert_msg(has_error(out, "t.yaml:6:18: ", "\"methods\" is an "
	    "empty list"), "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:6:9: ", "spliced"), "%s", out);
	free(out);
}
END_TEST

/* deny_networks: [] turns the default list off; allow still applies. */
START_TEST(test_cfg_networks_empty)
{
	struct cfg	*c;
	char		*out;
	int		 nerr;

	c = load("upstream:\n  deny_networks: []\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_int_eq(guard_allows(c, "127.0.0.1"), 1);
	free(out);
	cfg_unref(c);
}
END_TEST

/* Rule hosts are stored the way pol_host_normalize() leaves requests. */
struct host_case {
	const char	*hc_in;		/* as written in YAML */
	const char	*hc_out;	/* NULL: refused */
};

static const struct host_case host_cases[] = {
	{ "API.OpenAI.com", "api.openai.com" },
	{ "\"*.Example.COM.\"", "*.example.com" },
	{ "\"*\"", "*" },
	{ "\"[::1]\"", "::1" },
	{ "\"2001:DB8::0:1\"", "2001:db8::1" },
	{ "127.1", "127.0.0.1" },
	{ "under_score.test", "under_score.test" },
	{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
	{ "a..b", NULL },
	{ ".a", NULL },
	{ "\"*.\"", NULL },
	{ "\"*a.com\"", NULL },
	{ "\"a.com*\"", NULL },
	{ "\"*.*.com\"", NULL },
	{ "1.2.3.4.5", NULL },
	{ "\"*.10.0.0.1\"", NULL },
	{ "\"http://a.com\"", NULL },
	{ "\"a/b\"", NULL },
};

START_TEST(test_cfg_host_pattern)
{
	const struct host_case	*hc = &host_cases[_i];
	struct cfg		*c;
	char			 yaml[256], *out;
	int			 nerr;

	snprintf(yaml, sizeof(yaml), "policies:\n  - name: p\n    rules:\n"
	    "      - host: %s\n", hc->hc_in);
	c = load(yaml, &out, &nerr);
	if (hc->hc_out != NULL) {
		ck_assert_msg(c != NULL, "%s: %s", hc->hc_in, out);
		ck_assert_str_eq(c->c_policies[0].p_rules[0].r_host,
		    hc->hc_out);
	} else {
		ck_assert_msg(c == NULL, "%s loaded", hc->hc_in);
		ck_assert_int_eq(nerr, 1);
		ck_assert_msg(strncmp(out, "t.yaml:4:15: bad host ", 22) == 0,
		    "%s: %s", hc->hc_in, out);
	}
	free(out);
	cfg_unref(c);
}
END_TEST

/* Path globs that could never match a normalised path are refused. */
static const struct host_case path_cases[] = {
	{ "\"/v1/*\"", "/v1/*" },
	{ "\"*\"", "*" },
	{ "\"*.json\"", "*.json" },
	{ "/", "/" },
	{ "v1", NULL },
	{ "\"/a b\"", NULL },
	{ "\"/v1/../admin\"", NULL },
	{ "\"/v1/.\"", NULL },
	{ "\"/search?q=*\"", NULL },
	{ "\"\"", NULL },
};

START_TEST(test_cfg_path_glob)
{
	const struct host_case	*pc = &path_cases[_i];
	struct cfg		*c;
	char			 yaml[256], *out;
	int			 nerr;

	snprintf(yaml, sizeof(yaml), "policies:\n  - name: p\n    rules:\n"
	    "      - host: a.com\n        paths:\n          - %s\n",
	    pc->hc_in);
	c = load(yaml, &out, &nerr);
	if (pc->hc_out != NULL) {
		ck_assert_msg(c != NULL, "%s: %s", pc->hc_in, out);
		ck_assert_str_eq(c->c_policies[0].p_rules[0].r_paths[0],
		    pc->hc_out);
	} else {
		ck_assert_msg(c == NULL, "%s loaded", pc->hc_in);
		ck_assert_int_eq(nerr, 1);
		ck_assert_msg(strncmp(out, "t.yaml:6:13: bad path ", 22) == 0,
		    "%s: %s", pc->hc_in, out);
	}
	free(out);
	cfg_unref(c);
}
END_TEST

struct dur_case {
	const char	*dc_in;
	int		 dc_rc;
	uint64_t	 dc_ms;
};

static const struct dur_case dur_cases[] = {
	{ "500ms", 0, 500 },
	{ "10s", 0, 10000 },
	{ "5m", 0, 300000 },
	{ "24h", 0, 86400000 },
	{ "7d", 0, 604800000 },
	{ "0s", 0, 0 },
	{ "120s", 0, 120000 },
	{ "10", -1, 0 },
	{ "-1s", -1, 0 },
	{ "10 parsecs", -1, 0 },
	{ "", -1, 0 },
	{ "s", -1, 0 },
	{ "1.5s", -1, 0 },
	{ "10S", -1, 0 },
	{ "10 s", -1, 0 },
	{ " 10s", -1, 0 },
	{ "10sec", -1, 0 },
	{ "99999999999999999999s", -1, 0 },
	{ "18446744073709551615s", -1, 0 },
	{ "213503982334d", 0, 18446744073657600000ULL },
	{ "213503982335d", -1, 0 },
};

START_TEST(test_cfg_duration)
{
	const struct dur_case	*dc = &dur_cases[_i];
	uint64_t		 ms = 12345;

	ck_assert_msg(cfg_parse_duration(dc->dc_in, &ms) == dc->dc_rc,
	    "\"%s\"", dc->dc_in);
	if (dc->dc_rc == 0)
		ck_assert_uint_eq(ms, dc->dc_ms);
	else
		ck_assert_uint_eq(ms, 12345);
}
END_TEST

struct size_case {
	const char	*sc_in;
	int		 sc_rc;
	uint64_t	 sc_bytes;
};

static const struct size_case size_cases[] = {
	{ "512", 0, 512 },
	{ "0", 0, 0 },
	{ "10B", 0, 10 },
	{ "64KiB", 0, 65536 },
	{ "16MiB", 0, 16777216 },
	{ "1GiB", 0, 1073741824 },
	{ "2TiB", 0, 2199023255552ULL },
	{ "1KB", 0, 1000 },
	{ "1kB", 0, 1000 },
	{ "2MB", 0, 2000000 },
	{ "3GB", 0, 3000000000ULL },
	{ "12 bananas", -1, 0 },
	{ "-1", -1, 0 },
	{ "", -1, 0 },
	{ "KiB", -1, 0 },
	{ "1.5MiB", -1, 0 },
	{ "64kib", -1, 0 },
	{ "64 KiB", -1, 0 },
	{ "99999999999999999999", -1, 0 },
	{ "17179869184GiB", -1, 0 },
};

START_TEST(test_cfg_size)
{
	const struct size_case	*sc = &size_cases[_i];
	uint64_t		 b = 12345;

	ck_assert_msg(cfg_parse_size(sc->sc_in, &b) == sc->sc_rc, "\"%s\"",
	    sc->sc_in);
	if (sc->sc_rc == 0)
		ck_assert_uint_eq(b, sc->sc_bytes);
	else
		ck_assert_uint_eq(b, 12345);
}
END_TEST

/* Money: exact decimal USD to whole micro-dollars, no floating point. */
struct money_case {
	const char	*mc_in;
	int		 mc_ok;
	uint64_t	 mc_micro;
};

static const struct money_case money_cases[] = {
	{ "0.15", 1, 150000 },
	{ "0.60", 1, 600000 },
	{ "3", 1, 3000000 },
	{ "3.00", 1, 3000000 },
	{ "15.000000", 1, 15000000 },
	{ "0", 1, 0 },
	{ "0.0", 1, 0 },
	{ "0.000001", 1, 1 },
	{ "0.1", 1, 100000 },
	{ "1.1", 1, 1100000 },		/* not 1.1000000000000000888 */
	{ "2.675", 1, 2675000 },
	{ "007.5", 1, 7500000 },
	{ "1000000", 1, 1000000000000ULL },
	{ "18446744073709.551615", 1, UINT64_MAX },
	{ "18446744073709.551616", 0, 0 },
	{ "18446744073710", 0, 0 },
	{ "99999999999999999999", 0, 0 },
	{ "0.0000015", 0, 0 },
	{ "0.1234567", 0, 0 },
	{ "0.1500000", 0, 0 },
	{ "-1", 0, 0 },
	{ "-0.15", 0, 0 },
	{ "+1", 0, 0 },
	{ "1e3", 0, 0 },
	{ "1E-6", 0, 0 },
	{ "", 0, 0 },
	{ ".", 0, 0 },
	{ "1.", 0, 0 },
	{ ".5", 0, 0 },
	{ "1.2.3", 0, 0 },
	{ "1 ", 0, 0 },
	{ " 1", 0, 0 },
	{ "0x10", 0, 0 },
	{ "1_000", 0, 0 },
	{ "1,5", 0, 0 },
	{ "$1", 0, 0 },
	{ "1USD", 0, 0 },
	{ ".inf", 0, 0 },
	{ "NaN", 0, 0 },
};

START_TEST(test_cfg_money)
{
	const struct money_case	*mc = &money_cases[_i];
	const char		*why;
	uint64_t		 micro = 12345;

	why = cfg_parse_money(mc->mc_in, &micro);
	ck_assert_msg((why == NULL) == mc->mc_ok, "\"%s\": %s", mc->mc_in,
	    why != NULL ? why : "accepted");
	if (mc->mc_ok)
		ck_assert_uint_eq(micro, mc->mc_micro);
	else
		ck_assert_uint_eq(micro, 12345);
}
END_TEST

struct rate_case {
	const char	*rc_in;
	int		 rc_ok;
	uint32_t	 rc_n;
	uint64_t	 rc_ms;
};

static const struct rate_case rate_cases[] = {
	{ "50/s", 1, 50, 1000 },
	{ "600/m", 1, 600, 60000 },
	{ "10/h", 1, 10, 3600000 },
	{ "1/s", 1, 1, 1000 },
	{ "4294967295/h", 1, 4294967295U, 3600000 },
	{ "4294967296/s", 0, 0, 0 },
	{ "99999999999999999999/s", 0, 0, 0 },
	{ "0/s", 0, 0, 0 },
	{ "-1/s", 0, 0, 0 },
	{ "50/d", 0, 0, 0 },
	{ "50/S", 0, 0, 0 },
	{ "50/ms", 0, 0, 0 },
	{ "50/1s", 0, 0, 0 },
	{ "50/", 0, 0, 0 },
	{ "/s", 0, 0, 0 },
	{ "50", 0, 0, 0 },
	{ "50s", 0, 0, 0 },
	{ "1.5/s", 0, 0, 0 },
	{ "50 /s", 0, 0, 0 },
	{ "", 0, 0, 0 },
};

START_TEST(test_cfg_rate)
{
	const struct rate_case	*rc = &rate_cases[_i];
	const char		*why;
	uint64_t		 ms = 12345;
	uint32_t		 n = 678;

	why = cfg_parse_rate(rc->rc_in, &n, &ms);
	ck_assert_msg((why == NULL) == rc->rc_ok, "\"%s\": %s", rc->rc_in,
	    why != NULL ? why : "accepted");
	if (rc->rc_ok) {
		ck_assert_uint_eq(n, rc->rc_n);
		ck_assert_uint_eq(ms, rc->rc_ms);
	} else {
		ck_assert_uint_eq(n, 678);
		ck_assert_uint_eq(ms, 12345);
	}
}
END_TEST

/* A pricing table: order kept, USD/M as µUSD/M, cache prices default. */
START_TEST(test_cfg_pricing)
{
	static const char	*yaml =
	    "pricing:\n"
	    "  - {model: \"gpt-4o-mini*\", input: 0.15, output: 0.60}\n"
	    "  - {model: \"claude-sonnet-4*\", input: 3.00, output: 15.00}\n"
	    "  - model: \"claude-haiku-*\"\n"
	    "    input: 1\n"
	    "    output: \"5\"\n"
	    "    cached_input: 0.1\n"
	    "    cache_write: 1.25\n"
	    "  - model: \"o3*\"\n"
	    "    input: 2\n"
	    "    output: 8\n"
	    "    cached_input: 0.5\n"
	    "    cache_write: ~\n"
	    "  - {model: \"text-embedding-3-small\", input: 0.02, output: 0}\n"
	    "  - {model: \"*\", input: 0.000001, output: 1000000}\n";
	static const struct {
		const char	*model;
		uint64_t	 in, out, cached, write;
	} want[] = {
		{ "gpt-4o-mini*", 150000, 600000, 150000, 150000 },
		{ "claude-sonnet-4*", 3000000, 15000000, 3000000, 3000000 },
		{ "claude-haiku-*", 1000000, 5000000, 100000, 1250000 },
		{ "o3*", 2000000, 8000000, 500000, 2000000 },
		{ "text-embedding-3-small", 20000, 0, 20000, 20000 },
		{ "*", 1, 1000000000000ULL, 1, 1 },
	};
	const struct cfg_price	*pr;
	struct cfg		*c;
	char			*out;
	size_t			 i;
	int			 nerr = -1;

	c = load(yaml, &out, &nerr);
	ck_assert_msg(c != NULL, "errors:\n%s", out);
	ck_assert_int_eq(nerr, 0);
	free(out);
	ck_assert_uint_eq(c->c_npricing, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < c->c_npricing; i++) {
		pr = &c->c_pricing[i];
		ck_assert_str_eq(pr->pr_model, want[i].model);
		ck_assert_uint_eq(pr->pr_input, want[i].in);
		ck_assert_uint_eq(pr->pr_output, want[i].out);
		ck_assert_uint_eq(pr->pr_cached_input, want[i].cached);
		ck_assert_uint_eq(pr->pr_cache_write, want[i].write);
	}
	cfg_unref(c);

	/* an empty table, or none at all */
	c = load("pricing: []\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_uint_eq(c->c_npricing, 0);
	free(out);
	cfg_unref(c);
	c = load("pricing:\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_uint_eq(c->c_npricing, 0);
	free(out);
	cfg_unref(c);

	/* every bad entry is reported, each at its value */
	c = load("pricing:\n"
	    "  - {model: a, input: 0.15, output: 0.0000001}\n"
	    "  - {model: b, input: -1, output: 1, cache_write: x}\n"
	    "  - {input: 1, output: 1}\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 4);
	ck_assert_int_eq(count_lines(out), 4);
	ck_assert_msg(has_error(out, "t.yaml:2:37: ", "\"0.0000001\" for "
	    "\"output\": more than 6 decimal places"), "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:3:23: ", "\"-1\" for \"input\": "
	    "amounts cannot be negative"), "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:3:51: ", "\"x\" for "
	    "\"cache_write\""), "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:4:5: ", "missing required key "
	    "\"model\" in pricing entry"), "%s", out);
	free(out);
}
END_TEST

/* Caps: each key, its flag, and the forms a value may take. */
START_TEST(test_cfg_caps)
{
	static const char	*yaml =
	    "policies:\n"
	    "  - name: full\n"
	    "    caps:\n"
	    "      usd: 5.00\n"
	    "      requests: 10000\n"
	    "      bytes_in: 10GiB\n"
	    "      bytes_out: 1GB\n"
	    "      rate: 50/s\n"
	    "      window: 24h\n"
	    "  - name: money\n"
	    "    caps: {usd: \"0.000001\", window: 1h}\n"
	    "  - name: zero\n"
	    "    caps: {usd: 0, requests: 0, bytes_in: 0, bytes_out: 0}\n"
	    "  - name: rate\n"
	    "    caps: {rate: 600/m}\n"
	    "  - name: hourly\n"
	    "    caps: {rate: 10/h, requests: 18446744073709551615}\n"
	    "  - name: nulls\n"
	    "    caps: {usd: ~, rate: null, window: }\n"
	    "  - name: empty\n"
	    "    caps: {}\n"
	    "  - name: nocaps\n"
	    "    caps:\n";
	const struct cfg_caps	*cc;
	struct cfg		*c;
	char			*out;
	int			 nerr = -1;

	c = load(yaml, &out, &nerr);
	ck_assert_msg(c != NULL, "errors:\n%s", out);
	ck_assert_int_eq(nerr, 0);
	free(out);

	cc = &cfg_policy_find(c, "full")->p_caps;
	ck_assert_int_eq(cc->cp_has_usd, 1);
	ck_assert_uint_eq(cc->cp_usd, 5000000);
	ck_assert_int_eq(cc->cp_has_requests, 1);
	ck_assert_uint_eq(cc->cp_requests, 10000);
	ck_assert_int_eq(cc->cp_has_bytes_in, 1);
	ck_assert_uint_eq(cc->cp_bytes_in, 10ULL << 30);
	ck_assert_int_eq(cc->cp_has_bytes_out, 1);
	ck_assert_uint_eq(cc->cp_bytes_out, 1000000000);
	ck_assert_int_eq(cc->cp_has_rate, 1);
	ck_assert_uint_eq(cc->cp_rate_n, 50);
	ck_assert_uint_eq(cc->cp_rate_ms, 1000);
	ck_assert_uint_eq(cc->cp_window_ms, 86400000);

	cc = &cfg_policy_find(c, "money")->p_caps;
	ck_assert_int_eq(cc->cp_has_usd, 1);
	ck_assert_uint_eq(cc->cp_usd, 1);
	ck_assert_int_eq(cc->cp_has_requests, 0);
	ck_assert_int_eq(cc->cp_has_bytes_in, 0);
	ck_assert_int_eq(cc->cp_has_bytes_out, 0);
	ck_assert_int_eq(cc->cp_has_rate, 0);
	ck_assert_uint_eq(cc->cp_window_ms, 3600000);

	/* a cap of 0 is a cap: nothing may be spent */
	cc = &cfg_policy_find(c, "zero")->p_caps;
	ck_assert_int_eq(cc->cp_has_usd, 1);
	ck_assert_uint_eq(cc->cp_usd, 0);
	ck_assert_int_eq(cc->cp_has_requests, 1);
	ck_assert_uint_eq(cc->cp_requests, 0);
	ck_assert_int_eq(cc->cp_has_bytes_in, 1);
	ck_assert_int_eq(cc->cp_has_bytes_out, 1);
	ck_assert_int_eq(cc->cp_has_rate, 0);
	ck_assert_uint_eq(cc->cp_window_ms, 0);

	cc = &cfg_policy_find(c, "rate")->p_caps;
	ck_assert_int_eq(cc->cp_has_usd, 0);
	ck_assert_int_eq(cc->cp_has_rate, 1);
	ck_assert_uint_eq(cc->cp_rate_n, 600);
	ck_assert_uint_eq(cc->cp_rate_ms, 60000);

	cc = &cfg_policy_find(c, "hourly")->p_caps;
	ck_assert_uint_eq(cc->cp_rate_n, 10);
	ck_assert_uint_eq(cc->cp_rate_ms, 3600000);
	ck_assert_int_eq(cc->cp_has_requests, 1);
	ck_assert_uint_eq(cc->cp_requests, UINT64_MAX);

	/* null values, {} and an empty caps: no caps at all */
	cc = &cfg_policy_find(c, "nulls")->p_caps;
	ck_assert_int_eq(cc->cp_has_usd + cc->cp_has_requests +
	    cc->cp_has_bytes_in + cc->cp_has_bytes_out + cc->cp_has_rate, 0);
	ck_assert_uint_eq(cc->cp_window_ms, 0);
	cc = &cfg_policy_find(c, "empty")->p_caps;
	ck_assert_int_eq(cc->cp_has_usd + cc->cp_has_requests +
	    cc->cp_has_bytes_in + cc->cp_has_bytes_out + cc->cp_has_rate, 0);
	cc = &cfg_policy_find(c, "nocaps")->p_caps;
	ck_assert_int_eq(cc->cp_has_usd + cc->cp_has_requests +
	    cc->cp_has_bytes_in + cc->cp_has_bytes_out + cc->cp_has_rate, 0);
	cfg_unref(c);

	/* one pass reports every bad cap */
	c = load("policies:\n  - name: p\n    caps:\n"
	    "      usd: 1.0000001\n      rate: 5/d\n      window: 10ms\n"
	    "      bytes: 1GiB\n      requests: many\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 5);
	ck_assert_int_eq(count_lines(out), 5);
	ck_assert_msg(has_error(out, "t.yaml:4:12: ", "more than 6 decimal "
	    "places"), "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:5:13: ", "bad rate \"5/d\""),
	    "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:6:15: ", "\"window\" must be a "
	    "whole number of seconds"), "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:7:7: ", "unknown key \"bytes\" "
	    "in caps"), "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:8:17: ", "\"requests\" must be "
	    "a whole number"), "%s", out);
	free(out);
}
END_TEST

/* Window values: whole seconds, from 1s; any length above. */
START_TEST(test_cfg_caps_window)
{
	static const struct {
		const char	*in;
		uint64_t	 ms;
	} ok[] = {
		{ "1s", 1000 }, { "1000ms", 1000 }, { "60s", 60000 },
		{ "15m", 900000 }, { "1h", 3600000 }, { "6h", 21600000 },
		{ "24h", 86400000 }, { "1d", 86400000 }, { "7d", 604800000 },
		{ "30d", 2592000000ULL },
	};
	struct cfg	*c;
	char		 yaml[256], *out;
	size_t		 i;
	int		 nerr;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(yaml, sizeof(yaml), CAPS "      window: %s\n",
		    ok[i].in);
		c = load(yaml, &out, &nerr);
		ck_assert_msg(c != NULL, "%s: %s", ok[i].in, out);
		ck_assert_uint_eq(c->c_policies[0].p_caps.cp_window_ms,
		    ok[i].ms);
		free(out);
		cfg_unref(c);
	}
}
END_TEST

/* meter: the three dialects; none (or absent) on any rule. */
START_TEST(test_cfg_meter)
{
	static const char	*yaml =
	    "policies:\n"
	    "  - name: p\n"
	    "    rules:\n"
	    "      - host: api.openai.com\n"
	    "        meter: openai\n"
	    "      - host: api.anthropic.com\n"
	    "        meter: anthropic\n"
	    "      - host: example.com\n"
	    "        meter: none\n"
	    "      - host: github.com\n"
	    "        intercept: false\n"
	    "        meter: none\n"
	    "      - host: gitlab.com\n"
	    "        intercept: false\n"
	    "        meter: ~\n"
	    "      - host: pypi.org\n";
	static const enum cfg_meter	 want[] = {
		CFG_METER_OPENAI, CFG_METER_ANTHROPIC, CFG_METER_NONE,
		CFG_METER_NONE, CFG_METER_NONE, CFG_METER_NONE,
	};
	const struct cfg_policy	*p;
	struct cfg		*c;
	char			*out;
	size_t			 i;
	int			 nerr = -1;

	c = load(yaml, &out, &nerr);
	ck_assert_msg(c != NULL, "errors:\n%s", out);
	ck_assert_int_eq(nerr, 0);
	free(out);
	p = &c->c_policies[0];
	ck_assert_uint_eq(p->p_nrules, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < p->p_nrules; i++)
		ck_assert_msg(p->p_rules[i].r_meter == want[i], "rule %zu: %d",
		    i, (int)p->p_rules[i].r_meter);
	cfg_unref(c);

	/* a spliced rule with methods and a meter: both reported */
	c = load(POL "        intercept: false\n        methods: [GET]\n"
	    "        meter: openai\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 2);
	ck_assert_msg(has_error(out, "t.yaml:6:9: ", "remove \"methods\""),
	    "%s", out);
	ck_assert_msg(has_error(out, "t.yaml:7:9: ", "remove \"meter\""),
	    "%s", out);
	free(out);
}
END_TEST

/* budget_store: "file" or Redis; a password in a URL is refused and
 * never echoed. */
START_TEST(test_cfg_budget_store)
{
	struct cfg	*c;
	char		*out;
	int		 nerr;

	c = load("budget_store: file\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_str_eq(c->c_budget_store, "file");
	free(out);
	cfg_unref(c);
	c = load("budget_store: ~\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_str_eq(c->c_budget_store, "file");
	free(out);
	cfg_unref(c);

	ck_assert_ptr_null(load("budget_store: "
	    "\"redis://default:hunter2@10.0.0.5:6379/0\"\n", &out, &nerr));
	ck_assert_int_eq(nerr, 1);
	ck_assert_ptr_null(strstr(out, "hunter2"));
	ck_assert_msg(has_error(out, "t.yaml:1:15: ", "budget_store "
	    "\"redis://***@10.0.0.5:6379/0\": no credentials in the URL"),
	    "%s", out);
	free(out);
	/* redis and unix: forms */
	c = load("budget_store: \"redis://10.0.0.5:6380/3\"\n"
	    "budget_store_auth: \"env:REDIS_PW\"\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_int_eq(c->c_bs_redis, 1);
	ck_assert_str_eq(c->c_bs_host, "10.0.0.5");
	ck_assert_int_eq(c->c_bs_port, 6380);
	ck_assert_int_eq(c->c_bs_db, 3);
	ck_assert_str_eq(c->c_bs_auth, "env:REDIS_PW");
	free(out);
	cfg_unref(c);
	c = load("budget_store: \"redis://[::1]:6379\"\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_str_eq(c->c_bs_host, "::1");
	ck_assert_int_eq(c->c_bs_db, 0);
	free(out);
	cfg_unref(c);
	c = load("budget_store: \"unix:/run/redis.sock?db=2\"\n", &out,
	    &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_ptr_null(c->c_bs_host);
	ck_assert_str_eq(c->c_bs_unix, "/run/redis.sock");
	ck_assert_int_eq(c->c_bs_db, 2);
	free(out);
	cfg_unref(c);
	/* an "@" past the authority is not a user part */
	ck_assert_ptr_null(load("budget_store: \"redis://h/0?x=a@b\"\n", &out,
	    &nerr));
	ck_assert_msg(has_error(out, "t.yaml:1:15: ", "budget_store "
	    "\"redis://h/0?x=a@b\": the URL needs a port"), "%s", out);
	free(out);
}
END_TEST

/* caps.llm_concurrency (default 4), pricing max_output, rule async_usd */
START_TEST(test_cfg_llm_keys)
{
	struct cfg	*c;
	char		*out;
	int		 nerr;

	c = load("pricing:\n  - {model: \"a*\", input: 1, output: 2, "
	    "max_output: 16384}\n  - {model: \"b\", input: 1, output: 2}\n"
	    "policies:\n  - name: p\n    rules:\n      - {host: h, meter: "
	    "openai, async_usd: 0.25}\n      - {host: i, meter: openai}\n"
	    "  - name: q\n    rules: []\n    caps: {llm_concurrency: 0}\n",
	    &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	free(out);
	ck_assert_uint_eq(c->c_pricing[0].pr_max_output, 16384);
	ck_assert_uint_eq(c->c_pricing[1].pr_max_output, 0);
	ck_assert_int_eq(c->c_policies[0].p_rules[0].r_has_async, 1);
	ck_assert_uint_eq(c->c_policies[0].p_rules[0].r_async_usd, 250000);
	ck_assert_int_eq(c->c_policies[0].p_rules[1].r_has_async, 0);
	ck_assert_uint_eq(c->c_policies[0].p_caps.cp_llm_concurrency, 4);
	ck_assert_uint_eq(c->c_policies[1].p_caps.cp_llm_concurrency, 0);
	cfg_unref(c);
	c = load("pricing:\n  - {model: a, input: 1, output: 2, max_output: "
	    "0}\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(out, "t.yaml:2:49: ") != NULL, "%s", out);
	free(out);
}
END_TEST

START_TEST(test_cfg_default_max_tokens)
{
	struct cfg	*c;
	char		*out;
	int		 nerr;

	c = load("limits:\n  default_max_tokens: 1\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_uint_eq(c->c_limits.l_default_max_tokens, 1);
	free(out);
	cfg_unref(c);
	c = load("limits:\n  default_max_tokens: 128000\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_uint_eq(c->c_limits.l_default_max_tokens, 128000);
	free(out);
	cfg_unref(c);
	c = load("limits:\n  default_max_tokens: ~\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_uint_eq(c->c_limits.l_default_max_tokens, 128000);
	free(out);
	cfg_unref(c);
}
END_TEST

/* A scratch directory with a config file in it, for relative paths. */
struct tmpconf {
	char	dir[256];
	char	path[300];
};

static void
tmp_write(const char *path, const char *text, mode_t mode)
{
	int	fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

static void
tmp_init(struct tmpconf *t)
{
	char	*real;

	snprintf(t->dir, sizeof(t->dir), "/tmp/airlock-cfg-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	/* The loader stores absolute, symlink-free directories. */
	real = realpath(t->dir, NULL);
	ck_assert_ptr_nonnull(real);
	ck_assert_uint_lt(strlen(real), sizeof(t->dir));
	snprintf(t->dir, sizeof(t->dir), "%s", real);
	free(real);
	snprintf(t->path, sizeof(t->path), "%s/airlock.yaml", t->dir);
}

static void
tmp_fini(struct tmpconf *t)
{
	char	cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct cfg *
tmp_load(struct tmpconf *t, const char *yaml, char **out, int *nerr)
{
	struct cfg	*c;
	FILE		*f;
	size_t		 sz;

	tmp_write(t->path, yaml, 0644);
	f = open_memstream(out, &sz);
	c = cfg_load(t->path, f, nerr);
	fclose(f);
	return c;
}

START_TEST(test_cfg_file_paths)
{
	struct tmpconf	 t;
	struct cfg	*c;
	char		*out, want[512], tok[512];
	int		 nerr;

	tmp_init(&t);
	snprintf(tok, sizeof(tok), "%s/tok", t.dir);
	tmp_write(tok, "from-file\n", 0600);
	c = tmp_load(&t,
	    "state_dir: ./st\n"
	    "audit:\n"
	    "  file: logs/audit.jsonl\n"
	    "policies: [{name: p}]\n"
	    "sandboxes:\n"
	    "  - id: s\n"
	    "    policy: p\n"
	    "    token: file:tok\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_int_eq(nerr, 0);
	ck_assert_str_eq(c->c_file, t.path);
	snprintf(want, sizeof(want), "%s/st", t.dir);
	ck_assert_str_eq(c->c_state_dir, want);
	snprintf(want, sizeof(want), "%s/logs/audit.jsonl", t.dir);
	ck_assert_str_eq(c->c_audit_file, want);
	ck_assert_str_eq(c->c_sandboxes[0].s_token, "from-file");
	ck_assert_uint_eq(c->c_sandboxes[0].s_token_len, 9);
	free(out);
	cfg_unref(c);

	/* audit.file defaults under state_dir */
	c = tmp_load(&t, "state_dir: /srv/al\n", &out, &nerr);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c->c_audit_file, "/srv/al/audit.jsonl");
	free(out);
	cfg_unref(c);
	tmp_fini(&t);
}
END_TEST

/*
 * geoip.database: relative to the config file, must exist and be a MaxMind
 * DB (opened by the loader, so a bad file has a position); null turns it
 * off. A policy's geo lists are kept upper-case and need a database.
 */
START_TEST(test_cfg_geo)
{
	static const char	*off[] = {
		"geoip: {database: null}\n",
		"geoip: {database: ~}\n",
		"geoip:\n",
		"geoip: {}\n",
		"policies: [{name: p, geo: {}}]\n",
	};
	const struct cfg_policy	*p;
	struct tmpconf		 t;
	struct cfg		*c;
	char			*out, db[512], yaml[1024];
	size_t			 i;
	int			 nerr;

	tmp_init(&t);
	snprintf(db, sizeof(db), "%s/geo.mmdb", t.dir);
	ck_assert_int_eq(unit_mkmmdb(db), 0);
	c = tmp_load(&t,
	    "geoip: {database: geo.mmdb}\n"
	    "policies:\n"
	    "  - name: p\n"
	    "    geo: {deny_countries: [kp, Ir], allow_countries: [DE, fR]}\n"
	    "  - name: q\n"
	    "    geo: {deny_countries: [], allow_countries: ~}\n"
	    "  - name: r\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_int_eq(nerr, 0);
	ck_assert_str_eq(c->c_geoip_database, db);
	ck_assert_ptr_nonnull(c->c_geo);
	ck_assert_ptr_nonnull(p = cfg_policy_find(c, "p"));
	ck_assert_uint_eq(p->p_ngeo_deny, 2);
	ck_assert_str_eq(p->p_geo_deny[0], "KP");
	ck_assert_str_eq(p->p_geo_deny[1], "IR");
	ck_assert_uint_eq(p->p_ngeo_allow, 2);
	ck_assert_str_eq(p->p_geo_allow[0], "DE");
	ck_assert_str_eq(p->p_geo_allow[1], "FR");
	ck_assert_ptr_nonnull(p = cfg_policy_find(c, "q"));
	ck_assert_uint_eq(p->p_ngeo_deny, 0);
	ck_assert_uint_eq(p->p_ngeo_allow, 0);
	ck_assert_ptr_nonnull(p = cfg_policy_find(c, "r"));
	ck_assert_uint_eq(p->p_ngeo_deny, 0);
	ck_assert_uint_eq(p->p_ngeo_allow, 0);
	free(out);
	cfg_unref(c);

	/* an absolute path is kept as it is */
	snprintf(yaml, sizeof(yaml), "geoip:\n  database: %s\n", db);
	c = tmp_load(&t, yaml, &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_str_eq(c->c_geoip_database, db);
	free(out);
	cfg_unref(c);

	/* a relative path that is not there: FILE:LINE:COL, absolute name */
	c = tmp_load(&t, "workers: 1\ngeoip:\n  database: gone.mmdb\n", &out,
	    &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 1);
	snprintf(yaml, sizeof(yaml), "%s:3:13: geoip database "
	    "\"%s/gone.mmdb\": No such file or directory\n", t.path, t.dir);
	ck_assert_str_eq(out, yaml);
	free(out);

	/* a file that is not a MaxMind DB: refused at its key */
	snprintf(db, sizeof(db), "%s/junk.mmdb", t.dir);
	tmp_write(db, "not a database", 0644);
	c = tmp_load(&t, "geoip: {database: junk.mmdb}\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 1);
	snprintf(yaml, sizeof(yaml), "%s:1:19: geoip database "
	    "\"%s/junk.mmdb\": not a MaxMind DB", t.path, t.dir);
	ck_assert_msg(strncmp(out, yaml, strlen(yaml)) == 0, "%s", out);
	free(out);

	/* country rules without a database would refuse everything */
	c = load("policies:\n  - name: p\n    geo: {deny_countries: [KP]}\n",
	    &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(out, "t.yaml:3:10: \"geo\" rules need "
	    "geoip.database") != NULL, "%s", out);
	free(out);

	for (i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
		c = load(off[i], &out, &nerr);
		ck_assert_msg(c != NULL, "off %zu: %s", i, out);
		ck_assert_ptr_null(c->c_geoip_database);
		ck_assert_ptr_null(c->c_geo);
		free(out);
		cfg_unref(c);
	}
	tmp_fini(&t);
}
END_TEST

START_TEST(test_cfg_file_token_mode)
{
	struct tmpconf	 t;
	struct cfg	*c;
	char		*out, tok[512], where[512];
	int		 nerr;

	tmp_init(&t);
	snprintf(tok, sizeof(tok), "%s/tok", t.dir);
	tmp_write(tok, "secret\n", 0640);
	c = tmp_load(&t, SBX "    token: file:tok\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 1);
	snprintf(where, sizeof(where), "%s:6:12: ", t.path);
	ck_assert_msg(strncmp(out, where, strlen(where)) == 0, "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "is readable by group or others"));
	ck_assert_ptr_null(strstr(out, "secret\n"));
	free(out);

	tmp_write(tok, "secret\n", 0604);
	c = tmp_load(&t, SBX "    token: file:tok\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(out, "is readable by group or others"));
	free(out);

	c = tmp_load(&t, SBX "    token: file:missing\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 1);
	ck_assert_ptr_nonnull(strstr(out, "cannot read file"));
	ck_assert_ptr_nonnull(strstr(out, "No such file or directory"));
	free(out);

	/* a directory is not a secret file */
	c = tmp_load(&t, SBX "    token: \"file:.\"\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(out, "is not a regular file"));
	free(out);
	tmp_fini(&t);
}
END_TEST

/* A self-signed certificate (only parsed, never verified). */
#define CERT_B64							\
	"MIIBiTCCAS+gAwIBAgIUNYH28m7zlRQwpMB3BYiKeaVXoeswCgYIKoZIzj0EAwIw\n" \
	"GjEYMBYGA1UEAwwPYWlybG9jayB0ZXN0IENBMB4XDTI2MTEyOTA5NDIzOFoXDTM2\n" \
	"MTEyNjA5NDIzOFowGjEYMBYGA1UEAwwPYWlybG9jayB0ZXN0IENBMFkwEwYHKoZI\n" \
	"zj0CAQYIKoZIzj0DAQcDQgAETZLKCpwwY2Wm4piViEEYBPfSFASnmGAYyW7PaaGz\n" \
	"ORC/y0+wWePc8zUrjun5LCSiY2Zcx9cLnUsmNH6qbS9N2KNTMFEwHQYDVR0OBBYE\n" \
	"FOZHW7c4oZOA7u8AwV7j4emsSz+oMB8GA1UdIwQYMBaAFOZHW7c4oZOA7u8AwV7j\n" \
	"4emsSz+oMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhAJeUykcM\n" \
	"P3bcHxiKyGaTAkGoOku46SAoKp8bNTDK2GFaAiBXfGxRWV6fxQBMowpNIGlgZ21M\n" \
	"T5//41wn9NQ0mYdTqA==\n"
#define CERT_PEM							\
	"-----BEGIN CERTIFICATE-----\n" CERT_B64 "-----END CERTIFICATE-----\n"

/* upstream.ca_file must hold at least one PEM certificate. */
START_TEST(test_cfg_ca_file)
{
#define KEY_PEM							\
	"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
#define CERT_CUT							\
	"MIIBiTCCAS+gAwIBAgIUNYH28m7zlRQwpMB3BYiKeaVXoeswCgYIKoZIzj0EAwIw\n"
	static const struct {
		const char	*pem;
		const char	*msg;	/* NULL: accepted */
	} cases[] = {
		{ CERT_PEM, NULL },
		{ "a bundle\n" CERT_PEM "\n" CERT_PEM, NULL },
		{ KEY_PEM CERT_PEM, NULL },
		{ "-----BEGIN TRUSTED CERTIFICATE-----\n" CERT_B64
		    "-----END TRUSTED CERTIFICATE-----\n", NULL },
		{ "", "no PEM certificate in it" },
		{ "not a certificate\n", "no PEM certificate in it" },
		{ KEY_PEM, "no PEM certificate in it" },
		{ "-----BEGIN CERTIFICATE-----\nMIIB!!!!\n"
		    "-----END CERTIFICATE-----\n", "malformed PEM" },
		/* base64 fine, DER cut short */
		{ "-----BEGIN CERTIFICATE-----\n" CERT_CUT
		    "-----END CERTIFICATE-----\n", "malformed PEM" },
		/* one good certificate does not excuse a broken one */
		{ CERT_PEM "-----BEGIN CERTIFICATE-----\nMIIBiTCC\n",
		    "malformed PEM certificate" },
	};
	struct tmpconf	 t;
	struct cfg	*c;
	char		*out, pem[512], where[512], want[1024];
	size_t		 i;
	int		 nerr;

	tmp_init(&t);
	snprintf(pem, sizeof(pem), "%s/ca.pem", t.dir);
	snprintf(where, sizeof(where), "%s:2:12: ", t.path);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tmp_write(pem, cases[i].pem, 0644);
		c = tmp_load(&t, "upstream:\n  ca_file: ./ca.pem\n", &out,
		    &nerr);
		if (cases[i].msg == NULL) {
			ck_assert_msg(c != NULL, "%zu: %s", i, out);
			ck_assert_str_eq(c->c_upstream_ca_file, pem);
		} else {
			ck_assert_msg(c == NULL, "%zu loaded", i);
			ck_assert_int_eq(nerr, 1);
			snprintf(want, sizeof(want), "bad \"ca_file\" \"%s\": "
			    "%s", pem, cases[i].msg);
			ck_assert_msg(has_error(out, where, want),
			    "%zu: want %s%s, got %s", i, where, want, out);
		}
		free(out);
		cfg_unref(c);
	}

	/* a directory */
	c = tmp_load(&t, "upstream:\n  ca_file: .\n", &out, &nerr);
	ck_assert_ptr_null(c);
	snprintf(want, sizeof(want), "bad \"ca_file\" \"%s\": not a regular "
	    "file", t.dir);
	ck_assert_msg(has_error(out, where, want), "%s", out);
	free(out);

	/* missing, relative to the configuration's directory */
	c = tmp_load(&t, "upstream:\n  ca_file: nope.pem\n", &out, &nerr);
	ck_assert_ptr_null(c);
	snprintf(want, sizeof(want), "cannot read \"ca_file\" \"%s/nope.pem\": "
	    "No such file or directory", t.dir);
	ck_assert_msg(has_error(out, where, want), "%s", out);
	free(out);
	tmp_fini(&t);
#undef KEY_PEM
#undef CERT_CUT
}
END_TEST

START_TEST(test_cfg_token_sources)
{
	struct cfg	*c;
	char		*out;
	int		 nerr;

	ck_assert_int_eq(setenv("AIRLOCK_TEST_TOKEN", "from-env", 1), 0);
	c = load(SBX "    token: env:AIRLOCK_TEST_TOKEN\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_str_eq(c->c_sandboxes[0].s_token, "from-env");
	free(out);
	cfg_unref(c);

	c = load(SBX "    token: \"exec:printf 'from-exec\\\\r\\\\n\\\\n'\"\n",
	    &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_str_eq(c->c_sandboxes[0].s_token, "from-exec");
	ck_assert_uint_eq(c->c_sandboxes[0].s_token_len, 9);
	free(out);
	cfg_unref(c);

	c = load(SBX "    token: \"literal:a:b c\"\n", &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_str_eq(c->c_sandboxes[0].s_token, "a:b c");
	free(out);
	cfg_unref(c);

	/* a newline inside is not trimmed away: refused */
	c = load(SBX "    token: \"literal:a\\nb\"\n", &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(out, "contains control characters"));
	free(out);
}
END_TEST

/* A bare secret source is refused without echoing it. */
START_TEST(test_cfg_bare_source_not_echoed)
{
	char	*out;
	int	 nerr;

	ck_assert_ptr_null(load("secrets:\n  - name: k\n    source: hunter2\n"
	    "    hosts: [a.test]\n" PH, &out, &nerr));
	ck_assert_int_eq(nerr, 1);
	ck_assert_ptr_null(strstr(out, "hunter2"));
	free(out);
}
END_TEST

/* Each inject form, and what every secret key is stored as. */
START_TEST(test_cfg_secrets)
{
	static const char	*yaml =
	    "policies:\n"			/* rules before secrets */
	    "  - name: p\n"
	    "    rules:\n"
	    "      - host: API.OpenAI.com\n"
	    "        secrets: [openai, both]\n"
	    "      - host: \"*.s3.amazonaws.com\"\n"
	    "        secrets: [s3]\n"
	    "      - host: \"*.eu.s3.amazonaws.com\"\n"
	    "        secrets: [s3, ph]\n"
	    "      - host: files.example\n"
	    "        secrets: []\n"
	    "      - host: \"*\"\n"
	    "        secrets: [any]\n"
	    "secrets:\n"
	    "  - name: openai\n"
	    "    source: env:OPENAI_API_KEY\n"
	    "    hosts: [\"API.OpenAI.com.\"]\n"
	    "    inject:\n"
	    "      header: Authorization\n"
	    "      value: \"Bearer ${secret}\"\n"
	    "    placeholder: \"airlock:openai\"\n"
	    "    sandbox_env: OPENAI_API_KEY\n"
	    "  - name: both\n"
	    "    source: \"exec:pass show api\"\n"
	    "    refresh: 5m\n"
	    "    hosts: [\"*.openai.com\", api.test]\n"
	    "    inject: {basic: {username: Aladdin}}\n"
	    "  - name: s3\n"
	    "    source: file:/run/secrets/aws\n"
	    "    hosts: [\"*.s3.amazonaws.com\"]\n"
	    "    inject:\n"
	    "      aws_sigv4: {region: us-east-1, service: s3}\n"
	    "  - name: ph\n"
	    "    source: literal:user:pass\n"
	    "    hosts: [\"*.amazonaws.com\"]\n"
	    "    inject: {basic: {}}\n"
	    "  - name: q\n"
	    "    source: \"literal:k\"\n"
	    "    hosts: [maps.test]\n"
	    "    inject: {query: api_key}\n"
	    "    placeholder: q-placeholder\n"
	    "  - name: any\n"
	    "    source: literal:x\n"
	    "    hosts: [\"*\"]\n"
	    "    placeholder: any-placeholder\n";
	const struct cfg_secret	*sc;
	const struct cfg_rule	*r;
	struct cfg		*c;
	char			*out;
	int			 nerr = -1;

	c = load(yaml, &out, &nerr);
	ck_assert_msg(c != NULL, "errors:\n%s", out);
	ck_assert_int_eq(nerr, 0);
	free(out);
	ck_assert_ptr_null(c->c_store);
	ck_assert_uint_eq(c->c_nsecrets, 6);

	sc = &c->c_secrets[0];
	ck_assert_str_eq(sc->sc_name, "openai");
	ck_assert_str_eq(sc->sc_source, "env:OPENAI_API_KEY");
	ck_assert_uint_eq(sc->sc_refresh_ms, 0);
	ck_assert_uint_eq(sc->sc_nhosts, 1);
	ck_assert_str_eq(sc->sc_hosts[0], "api.openai.com");
	ck_assert_int_eq(sc->sc_inject, CFG_INJECT_HEADER);
	ck_assert_str_eq(sc->sc_header, "Authorization");
	ck_assert_str_eq(sc->sc_template, "Bearer ${secret}");
	ck_assert_ptr_null(sc->sc_username);
	ck_assert_ptr_null(sc->sc_query);
	ck_assert_ptr_null(sc->sc_region);
	ck_assert_str_eq(sc->sc_placeholder, "airlock:openai");
	ck_assert_str_eq(sc->sc_sandbox_env, "OPENAI_API_KEY");
	ck_assert_int_eq(sc->sc_line, 15);
	ck_assert_int_eq(sc->sc_col, 5);

	sc = &c->c_secrets[1];
	ck_assert_str_eq(sc->sc_source, "exec:pass show api");
	ck_assert_uint_eq(sc->sc_refresh_ms, 300000);
	ck_assert_uint_eq(sc->sc_nhosts, 2);
	ck_assert_str_eq(sc->sc_hosts[0], "*.openai.com");
	ck_assert_str_eq(sc->sc_hosts[1], "api.test");
	ck_assert_int_eq(sc->sc_inject, CFG_INJECT_BASIC);
	ck_assert_str_eq(sc->sc_username, "Aladdin");
	ck_assert_ptr_null(sc->sc_header);
	ck_assert_ptr_null(sc->sc_placeholder);
	ck_assert_ptr_null(sc->sc_sandbox_env);

	sc = &c->c_secrets[2];
	ck_assert_str_eq(sc->sc_source, "file:/run/secrets/aws");
	ck_assert_int_eq(sc->sc_inject, CFG_INJECT_SIGV4);
	ck_assert_str_eq(sc->sc_region, "us-east-1");
	ck_assert_str_eq(sc->sc_service, "s3");

	sc = &c->c_secrets[3];
	ck_assert_int_eq(sc->sc_inject, CFG_INJECT_BASIC);
	ck_assert_ptr_null(sc->sc_username);	/* secret is user:pass */
	ck_assert_str_eq(sc->sc_source, "literal:user:pass");

	sc = &c->c_secrets[4];
	ck_assert_int_eq(sc->sc_inject, CFG_INJECT_QUERY);
	ck_assert_str_eq(sc->sc_query, "api_key");
	ck_assert_str_eq(sc->sc_placeholder, "q-placeholder");

	sc = &c->c_secrets[5];
	ck_assert_int_eq(sc->sc_inject, CFG_INJECT_NONE);
	ck_assert_str_eq(sc->sc_hosts[0], "*");

	/* rule secrets are indexes into c_secrets, in the order listed */
	r = &c->c_policies[0].p_rules[0];
	ck_assert_uint_eq(r->r_nsecrets, 2);
	ck_assert_uint_eq(r->r_secrets[0], 0);
	ck_assert_uint_eq(r->r_secrets[1], 1);
	r = &c->c_policies[0].p_rules[1];
	ck_assert_uint_eq(r->r_nsecrets, 1);
	ck_assert_uint_eq(r->r_secrets[0], 2);
	r = &c->c_policies[0].p_rules[2];
	ck_assert_uint_eq(r->r_nsecrets, 2);
	ck_assert_uint_eq(r->r_secrets[0], 2);
	ck_assert_uint_eq(r->r_secrets[1], 3);
	r = &c->c_policies[0].p_rules[3];
	ck_assert_uint_eq(r->r_nsecrets, 0);
	r = &c->c_policies[0].p_rules[4];
	ck_assert_uint_eq(r->r_nsecrets, 1);
	ck_assert_uint_eq(r->r_secrets[0], 5);
	cfg_unref(c);
}
END_TEST

/* file: sources are made absolute against the configuration's dir. */
START_TEST(test_cfg_secret_file_path)
{
	struct tmpconf	 t;
	struct cfg	*c;
	char		*out, want[600];
	int		 nerr;

	tmp_init(&t);
	c = tmp_load(&t, "secrets:\n  - name: k\n    source: file:./keys/k\n"
	    "    hosts: [a.test]\n" PH, &out, &nerr);
	ck_assert_msg(c != NULL, "%s", out);
	snprintf(want, sizeof(want), "file:%s/keys/k", t.dir);
	ck_assert_str_eq(c->c_secrets[0].sc_source, want);
	free(out);
	cfg_unref(c);
	tmp_fini(&t);
}
END_TEST

/* Which secret hosts cover which rule hosts. */
struct cover_case {
	const char	*cc_secret;	/* YAML list: the secret's hosts */
	const char	*cc_rule;	/* the rule's host */
	int		 cc_ok;
};

static const struct cover_case cover_cases[] = {
	{ "[api.test]", "api.test", 1 },
	{ "[API.Test.]", "api.TEST", 1 },
	{ "[api.test]", "b.test", 0 },
	{ "[\"*.test\"]", "api.test", 1 },
	{ "[\"*.test\"]", "test", 0 },
	{ "[\"*.test\"]", "\"*.test\"", 1 },
	{ "[\"*.test\"]", "\"*.a.test\"", 1 },
	{ "[\"*.test\"]", "\"*.atest\"", 0 },
	{ "[\"*.a.test\"]", "\"*.test\"", 0 },
	{ "[a.test, b.test]", "\"*.test\"", 0 },
	{ "[\"*\"]", "\"*\"", 1 },
	{ "[\"*\"]", "\"*.test\"", 1 },
	{ "[\"*\"]", "a.test", 1 },
	{ "[\"*.test\"]", "\"*\"", 0 },
	{ "[a.test, \"*.b.test\"]", "x.b.test", 1 },
	{ "[\"10.0.0.1\"]", "\"10.0.0.1\"", 1 },
	{ "[\"[::1]\"]", "\"::1\"", 1 },
	{ "[\"*.test\"]", "\"10.0.0.1\"", 0 },
};

START_TEST(test_cfg_secret_cover)
{
	const struct cover_case	*cc = &cover_cases[_i];
	struct cfg		*c;
	char			 yaml[512], *out;
	int			 nerr;

	snprintf(yaml, sizeof(yaml), "secrets:\n  - name: k\n"
	    "    source: literal:v\n    hosts: %s\n" PH RULE("%s")
	    "        secrets: [k]\n", cc->cc_secret, cc->cc_rule);
	c = load(yaml, &out, &nerr);
	if (cc->cc_ok) {
		ck_assert_msg(c != NULL, "%s / %s: %s", cc->cc_secret,
		    cc->cc_rule, out);
		ck_assert_uint_eq(c->c_policies[0].p_rules[0].r_nsecrets, 1);
	} else {
		ck_assert_msg(c == NULL, "%s / %s loaded", cc->cc_secret,
		    cc->cc_rule);
		ck_assert_int_eq(nerr, 1);
		ck_assert_msg(has_error(out, "t.yaml:10:19: ", "which do not "
		    "cover rule host"), "%s / %s: %s", cc->cc_secret,
		    cc->cc_rule, out);
	}
	free(out);
	cfg_unref(c);
}
END_TEST

START_TEST(test_cfg_unreadable_file)
{
	struct cfg	*c;
	FILE		*f;
	char		*out;
	size_t		 sz;
	int		 nerr = 0;

	f = open_memstream(&out, &sz);
	c = cfg_load("/nonexistent/airlock.yaml", f, &nerr);
	fclose(f);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 1);
	ck_assert_str_eq(out, "/nonexistent/airlock.yaml: cannot read: "
	    "No such file or directory\n");
	free(out);

	/* NULL errs and nerrors are allowed */
	ck_assert_ptr_null(cfg_load("/nonexistent/airlock.yaml", NULL, NULL));
}
END_TEST

/* Aliases must not make a small file expand without bound. */
START_TEST(test_cfg_alias_bomb)
{
	struct cfg	*c;
	char		*yaml, *p, *out;
	size_t		 i, cap = 64 * 1024;
	int		 nerr;

	yaml = p = malloc(cap);
	ck_assert_ptr_nonnull(yaml);
	p += sprintf(p, "policies: [{name: p}]\nsandboxes:\n"
	    "  - &s {id: a, policy: p, addresses: [");
	for (i = 0; i < 1000; i++)
		p += sprintf(p, "%s10.0.0.1", i ? ", " : "");
	p += sprintf(p, "]}\n");
	for (i = 0; i < 1100; i++)
		p += sprintf(p, "  - *s\n");
	ck_assert_uint_lt((size_t)(p - yaml), cap);
	c = load(yaml, &out, &nerr);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(nerr, 1);
	ck_assert_ptr_nonnull(strstr(out, "expands to more than"));
	free(out);
	free(yaml);
}
END_TEST

START_TEST(test_cfg_refcount)
{
	struct cfg	*c;
	char		*out;
	int		 nerr;

	c = load(SBX "    token: literal:x\n", &out, &nerr);
	ck_assert_ptr_nonnull(c);
	free(out);
	ck_assert_ptr_eq(cfg_ref(c), c);
	ck_assert_int_eq(c->c_refs, 2);
	cfg_unref(c);
	ck_assert_int_eq(c->c_refs, 1);
	cfg_unref(c);		/* freed: ASan would see a leak otherwise */
	cfg_unref(NULL);
}
END_TEST

/* The example configuration shipped in conf/ must load as it is. */
START_TEST(test_cfg_example)
{
	const struct cfg_sandbox	*s;
	const struct cfg_policy		*p;
	struct cfg			*c;
	const char			*top;
	char				 path[4096], *out;
	FILE				*f;
	size_t				 sz, i;
	int				 nerr = -1, nsplice;

	if ((top = getenv("top_srcdir")) == NULL)
		top = ".";
	snprintf(path, sizeof(path), "%s/conf/airlock.yaml", top);
	f = open_memstream(&out, &sz);
	c = cfg_load(path, f, &nerr);
	fclose(f);
	ck_assert_msg(c != NULL, "%s", out);
	ck_assert_int_eq(nerr, 0);
	ck_assert_str_eq(c->c_listen_proxy[0], "127.0.0.1:3128");
	ck_assert_str_eq(c->c_default_sandbox, "local");
	s = cfg_sandbox_find(c, "local");
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_eq(s->s_policy, cfg_policy_find(c, "default"));
	ck_assert_int_eq(s->s_token_generated, 1);
	/* its github.com rule splices; the rest is intercepted */
	p = cfg_policy_find(c, "default");
	ck_assert_ptr_nonnull(p);
	for (i = 0, nsplice = 0; i < p->p_nrules; i++) {
		if (strcmp(p->p_rules[i].r_host, "github.com") == 0) {
			ck_assert_int_eq(p->p_rules[i].r_intercept, 0);
			nsplice++;
		} else
			ck_assert_int_eq(p->p_rules[i].r_intercept, 1);
	}
	ck_assert_int_eq(nsplice, 1);
	/* pricing and caps are shown commented out */
	ck_assert_uint_eq(c->c_npricing, 0);
	ck_assert_int_eq(p->p_caps.cp_has_usd, 0);
	ck_assert_str_eq(c->c_budget_store, "file");
	ck_assert_uint_eq(c->c_limits.l_default_max_tokens, 128000);
	ck_assert_uint_eq(c->c_tls_cert_cache, 10000);
	ck_assert_uint_eq(c->c_tls_leaf_validity_ms, 7ULL * 86400 * 1000);
	ck_assert_int_eq(c->c_tls_min_version, TLS1_2_VERSION);
	free(out);
	cfg_unref(c);
}
END_TEST

/* allow_plaintext defaults to false and reads; reflect_min_run to 12. */
START_TEST(test_cfg_reflect_keys)
{
	struct cfg	*c;
	char		*out;
	int		 nerr = -1;

	c = load(SECK PH, &out, &nerr);
	ck_assert_msg(c != NULL, "errors:\n%s", out);
	free(out);
	ck_assert_int_eq(c->c_secrets[0].sc_allow_plaintext, 0);
	ck_assert_uint_eq(c->c_reflect_min_run, 12);
	cfg_free(c);
	c = load("reflect_min_run: 20\n" SECK PH "    allow_plaintext: true\n",
	    &out, &nerr);
	ck_assert_msg(c != NULL, "errors:\n%s", out);
	free(out);
	ck_assert_int_eq(c->c_secrets[0].sc_allow_plaintext, 1);
	ck_assert_uint_eq(c->c_reflect_min_run, 20);
	cfg_free(c);
}
END_TEST

/* placeholder_in: the default leaves bodies and frames out; lists read. */
START_TEST(test_cfg_placeholder_in)
{
	static const struct { const char *in; int mask; } ok[] = {
		{ "", CFG_PH_DEFAULT },
		{ "    placeholder_in: [header, body]\n",
		    CFG_PH_HEADER | CFG_PH_BODY },
		{ "    placeholder_in: [ws]\n", CFG_PH_WS },
		{ "    placeholder_in: [path, query, header, body, ws]\n",
		    CFG_PH_DEFAULT | CFG_PH_BODY | CFG_PH_WS },
	};
	struct cfg	*c;
	char		*out;
	size_t		 i;
	int		 nerr = -1;
	char		 y[512];

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(y, sizeof(y), "%s%s%s", SECK, PH, ok[i].in);
		c = load(y, &out, &nerr);
		ck_assert_msg(c != NULL, "errors:\n%s", out);
		free(out);
		ck_assert_int_eq(c->c_secrets[0].sc_ph_in, ok[i].mask);
		ck_assert_int_eq(c->c_secrets[0].sc_ph_given, i > 0);
		ck_assert(i > 0 || !(c->c_secrets[0].sc_ph_in &
		    (CFG_PH_BODY | CFG_PH_WS)));
		cfg_free(c);
	}
}
END_TEST

Suite *
suite_cfg(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("cfg");
	tc = tcase_create("errors");
	tcase_add_test(tc, test_cfg_type_error_still_noted);
	tcase_add_test(tc, test_cfg_tables_consistent);
	tcase_add_loop_test(tc, test_cfg_error_table, 0,
	    (int)(sizeof(err_cases) / sizeof(err_cases[0])));
	tcase_add_test(tc, test_cfg_bare_token_not_echoed);
	tcase_add_test(tc, test_cfg_reflect_keys);
	tcase_add_test(tc, test_cfg_placeholder_in);
	tcase_add_test(tc, test_cfg_bare_source_not_echoed);
	tcase_add_test(tc, test_cfg_all_errors_reported);
	tcase_add_test(tc, test_cfg_unreadable_file);
	tcase_add_test(tc, test_cfg_alias_bomb);
	suite_add_tcase(s, tc);

	tc = tcase_create("values");
	tcase_add_test(tc, test_cfg_full);
	tcase_add_test(tc, test_cfg_defaults);
	tcase_add_test(tc, test_cfg_empty_and_null);
	tcase_add_test(tc, test_cfg_empty_file);
	tcase_add_test(tc, test_cfg_listen_defaults);
	tcase_add_test(tc, test_cfg_unidentified_limits);
	tcase_add_test(tc, test_cfg_networks_empty);
	tcase_add_test(tc, test_cfg_upstream_alpn);
	tcase_add_loop_test(tc, test_cfg_tls, 0,
	    (int)(sizeof(tls_cases) / sizeof(tls_cases[0])));
	tcase_add_test(tc, test_cfg_splice);
	tcase_add_loop_test(tc, test_cfg_host_pattern, 0,
	    (int)(sizeof(host_cases) / sizeof(host_cases[0])));
	tcase_add_loop_test(tc, test_cfg_path_glob, 0,
	    (int)(sizeof(path_cases) / sizeof(path_cases[0])));
	tcase_add_loop_test(tc, test_cfg_duration, 0,
	    (int)(sizeof(dur_cases) / sizeof(dur_cases[0])));
	tcase_add_loop_test(tc, test_cfg_size, 0,
	    (int)(sizeof(size_cases) / sizeof(size_cases[0])));
	tcase_add_test(tc, test_cfg_refcount);
	tcase_add_test(tc, test_cfg_example);
	tcase_add_test(tc, test_cfg_secrets);
	tcase_add_loop_test(tc, test_cfg_secret_cover, 0,
	    (int)(sizeof(cover_cases) / sizeof(cover_cases[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("budget");
	tcase_add_loop_test(tc, test_cfg_money, 0,
	    (int)(sizeof(money_cases) / sizeof(money_cases[0])));
	tcase_add_loop_test(tc, test_cfg_rate, 0,
	    (int)(sizeof(rate_cases) / sizeof(rate_cases[0])));
	tcase_add_test(tc, test_cfg_pricing);
	tcase_add_test(tc, test_cfg_caps);
	tcase_add_test(tc, test_cfg_caps_window);
	tcase_add_test(tc, test_cfg_meter);
	tcase_add_test(tc, test_cfg_budget_store);
	tcase_add_test(tc, test_cfg_default_max_tokens);
	tcase_add_test(tc, test_cfg_llm_keys);
	suite_add_tcase(s, tc);

	tc = tcase_create("sources");
	tcase_add_test(tc, test_cfg_file_paths);
	tcase_add_test(tc, test_cfg_geo);
	tcase_add_test(tc, test_cfg_file_token_mode);
	tcase_add_test(tc, test_cfg_ca_file);
	tcase_add_test(tc, test_cfg_token_sources);
	tcase_add_test(tc, test_cfg_secret_file_path);
	suite_add_tcase(s, tc);
	return s;
}
