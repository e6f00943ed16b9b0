/*
 * Configuration: loaded from YAML (libyaml), validated, then immutable.
 * A reload builds a new struct cfg; a request holds a reference to the one
 * current when its head arrived, a tunnel to the one it was opened under
 * (cfg_ref/cfg_unref; src/conn/conn_reload.c).
 */
#ifndef AIRLOCK_CFG_H
#define AIRLOCK_CFG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dns/net_guard.h"

struct up_parent;

struct net_guard;
struct net_self;
struct sec_store;
struct geo;

enum cfg_meter {
	CFG_METER_NONE = 0,
	CFG_METER_OPENAI,
	CFG_METER_ANTHROPIC,
	CFG_METER_GEMINI,
};

/* mcp: which tools of an MCP server a rule lets the agent see and call
 * (policy/pol_mcp.c); NULL/0 tools = any not denied. */
struct cfg_mcp {
	char		**m_tools;	/* names or fnmatch(3) globs */
	size_t		  m_ntools;
	char		**m_deny;	/* deny_tools: win over tools */
	size_t		  m_ndeny;
};

struct cfg_rule {
	char		 *r_host;	/* lowercase: exact, "*.suffix" or "*" */
	int		 *r_ports;	/* default {80, 443} */
	size_t		  r_nports;
	char		**r_methods;	/* upper-case; NULL/0 = any */
	size_t		  r_nmethods;
	char		**r_paths;	/* globs; NULL/0 = any */
	size_t		  r_npaths;
	int		  r_intercept;	/* default 1; 0 = splice TLS by SNI */
	size_t		 *r_secrets;	/* indexes into cfg->c_secrets */
	size_t		  r_nsecrets;
	enum cfg_meter	  r_meter;	/* usage extraction dialect */
	int		  r_has_async;	/* async_usd given: async endpoints
					   allowed, each charged r_async_usd */
	uint64_t	  r_async_usd;	/* µUSD */
	struct up_parent *r_via;	/* via: URL; NULL: upstream.proxy */
	int		  r_via_direct;	/* via: direct */
	int		  r_ask;	/* action: ask: held for an operator
					   (policy/pol_ask.c) */
	struct cfg_mcp	 *r_mcp;	/* mcp: the tool policy, or NULL */
	int		  r_line;	/* 1-based position of the rule */
	int		  r_col;
};

/* Where a secret's placeholder may be replaced (placeholder_in). */
#define CFG_PH_HEADER	0x01
#define CFG_PH_QUERY	0x02
#define CFG_PH_PATH	0x04
#define CFG_PH_BODY	0x08
#define CFG_PH_WS	0x10	/* WebSocket text messages after a 101 */
#define CFG_PH_DEFAULT	(CFG_PH_HEADER | CFG_PH_QUERY | CFG_PH_PATH)

enum cfg_inject {
	CFG_INJECT_NONE = 0,	/* placeholder only */
	CFG_INJECT_HEADER,	/* {header: NAME, value: TEMPLATE} */
	CFG_INJECT_BASIC,	/* {basic: {username: U}} */
	CFG_INJECT_QUERY,	/* {query: PARAM} */
	CFG_INJECT_SIGV4,	/* {aws_sigv4: {region: R, service: S}} */
};

/* A secret minted by the gateway from a credential (token brokers). */
enum cfg_broker_kind {
	CFG_BROKER_CLIENT_CREDENTIALS = 1,	/* oauth2_client_credentials */
	CFG_BROKER_REFRESH,			/* oauth2_refresh */
	CFG_BROKER_GOOGLE,			/* google_service_account */
	CFG_BROKER_GITHUB,			/* github_app */
};

struct cfg_broker {
	enum cfg_broker_kind b_kind;
	char		*b_token_url;	/* http(s)://host[:port]/path; github:
					   the API base; google: NULL = the
					   key file's token_uri */
	char		*b_client_id;	/* oauth2_* */
	char		*b_cred;	/* client_secret / refresh_token /
					   private_key: "env:X" | "file:/abs"
					   | "exec:CMD" | "literal:V"; google:
					   "file:" of key_file */
	char		*b_cred2;	/* oauth2_refresh: client_secret, or
					   NULL */
	char		*b_scope;	/* space-separated, or NULL */
	char		*b_app_id;	/* github_app */
	char		*b_installation_id;
	uint64_t	 b_margin_ms;	/* renew this long before expiry
					   (at most half the lifetime) */
};

struct cfg_secret {
	char		 *sc_name;
	char		 *sc_source;	/* "env:X" | "file:/abs" | "exec:CMD" |
					   "literal:V" (file: made absolute) */
	uint64_t	  sc_refresh_ms;	/* exec: only; 0 = never */
	struct cfg_broker *sc_broker;	/* minted, else NULL; sc_source is
					   then "broker:KIND" */
	char		**sc_hosts;	/* lowercase patterns like rule hosts */
	size_t		  sc_nhosts;
	enum cfg_inject	  sc_inject;
	char		 *sc_header;	/* HEADER: header name */
	char		 *sc_template;	/* HEADER: value, "${secret}" inside */
	char		 *sc_username;	/* BASIC: NULL = secret is user:pass */
	char		 *sc_query;	/* QUERY: parameter name */
	char		 *sc_region;	/* SIGV4 */
	char		 *sc_service;	/* SIGV4 */
	char		 *sc_placeholder;	/* NULL = none */
	char		 *sc_sandbox_env;	/* NULL = none */
	int		  sc_allow_plaintext;	/* may go over plain HTTP */
	int		  sc_ph_in;	/* CFG_PH_*: where its placeholder
					   is replaced (placeholder_in) */
	int		  sc_ph_given;	/* placeholder_in was given */
	int		  sc_line;	/* position of the secret's mapping */
	int		  sc_col;
};

/* Prices in µUSD per million tokens. */
struct cfg_price {
	char		*pr_model;	/* glob, '*' any run */
	uint64_t	 pr_input;
	uint64_t	 pr_output;
	uint64_t	 pr_cached_input;	/* default = input */
	uint64_t	 pr_cache_write;	/* default = input */
	uint64_t	 pr_max_output;	/* tokens; 0 = limits.default_max_tokens */
};

/* caps.llm_concurrency when a policy does not say. */
#define CFG_LLM_CONCURRENCY	4
/* limits.default_max_tokens: the largest output current models allow
 * (OpenAI's gpt-5 family: 128000), so a request without a bound and a
 * model without max_output are reserved at a maximum, not a guess. */
#define CFG_DEFAULT_MAX_OUTPUT	128000

struct cfg_caps {
	int		 cp_has_usd;
	uint64_t	 cp_usd;		/* µUSD */
	int		 cp_has_requests;
	uint64_t	 cp_requests;
	int		 cp_has_bytes_in;
	uint64_t	 cp_bytes_in;
	int		 cp_has_bytes_out;
	uint64_t	 cp_bytes_out;
	int		 cp_has_rate;
	uint32_t	 cp_rate_n;		/* "50/s": 50 per 1000 ms */
	uint64_t	 cp_rate_ms;
	uint64_t	 cp_window_ms;		/* 0 = lifetime */
	uint64_t	 cp_llm_concurrency;	/* metered requests in flight;
						   default 4, 0 = no limit */
	int		 cp_clamp;		/* lower output bounds to fit
						   usd (default 1) */
	int		 cp_cut_streams;	/* cut streams at usd; -1 = not
						   said (on when usd is set) */
};

struct cfg_policy {
	char		 *p_name;
	struct cfg_rule	 *p_rules;
	size_t		  p_nrules;
	struct cfg_caps	  p_caps;	/* all cp_has_* 0 = no caps */
	char		(*p_geo_deny)[3];	/* ISO 3166 alpha-2, upper */
	size_t		  p_ngeo_deny;
	char		(*p_geo_allow)[3];	/* non-empty: only these */
	size_t		  p_ngeo_allow;
	int		  p_report;	/* mode: report: the allowlist's
					   denials are forwarded, audited
					   would_deny */
	int		  p_unmatched_ask; /* on_unmatched: ask */
};

struct cfg_sandbox {
	char		 *s_id;
	char		 *s_policy_name;
	struct cfg_policy *s_policy;	/* borrowed from cfg->c_policies */
	char		 *s_token;	/* resolved value (secret: never log) */
	size_t		  s_token_len;
	int		  s_token_generated; /* no token key: the daemon
					      supplies one */
	char		**s_addresses;	/* source addresses (transparent) */
	size_t		  s_naddresses;
};

enum cfg_backend {
	CFG_BACKEND_NONE = 0,	/* sandboxes are identities: the workload runs
				   wherever its caller runs it */
	CFG_BACKEND_NETNS,	/* network namespaces (launcher) */
	CFG_BACKEND_QEMU,	/* qemu microVMs (launcher) */
};

enum cfg_accel {
	CFG_ACCEL_AUTO = 0,	/* KVM where a probe boots, else TCG */
	CFG_ACCEL_KVM,
	CFG_ACCEL_TCG,
};

/* A backend whose sandboxes the launcher makes (namespaces or VMs). */
#define CFG_BACKEND_LAUNCHED(c)	((c)->c_launcher_backend != CFG_BACKEND_NONE)

struct cfg_host_override {
	char		*h_name;	/* lowercase */
	char		*h_ip;	/* IP literal, canonical */
};

struct cfg_limits {
	size_t		 l_header_bytes;	/* 64KiB */
	size_t		 l_h2_max_streams;	/* 100: concurrent streams of
						   an HTTP/2 connection */
	uint64_t	 l_header_timeout_ms;	/* 30s: whole request head */
	uint64_t	 l_connect_timeout_ms;	/* 10s */
	uint64_t	 l_idle_timeout_ms;	/* 120s */
	uint64_t	 l_shutdown_grace_ms;	/* 30s */
	uint64_t	 l_reload_grace_ms;	/* 10s: tunnels a reload
						   revoked live this long */
	uint64_t	 l_upstream_timeout_ms;	/* 300s */
	size_t		 l_max_connections;	/* 20000 */
	size_t		 l_max_connections_per_sandbox; /* 512 */
	size_t		 l_unidentified_per_source; /* 128: connections of one
						   source address not
						   identified yet */
	size_t		 l_unidentified_share;	/* 50: percent of
						   max_connections such
						   connections may hold */
	uint64_t	 l_identify_timeout_ms;	/* 10s: from accept to a
						   head that identifies */
	uint64_t	 l_body_bytes;		/* 16MiB */
	uint64_t	 l_store_timeout_ms;	/* 2s: a shared store's answer */
	uint64_t	 l_store_lease_ms;	/* 30s: a Redis reservation's
						   lease (renewed) */
	uint64_t	 l_default_max_tokens;	/* 128000: max_output of a model
						   whose pricing names none */
};

struct cfg {
	char			 *c_file;	/* path as given */
	char			 *c_dir;	/* its directory, for relative paths */

	char			**c_listen_proxy;	/* "HOST:PORT"; default
							   {"127.0.0.1:3128"} */
	size_t			  c_nlisten_proxy;
	char			 *c_default_sandbox;	/* NULL = none */
	char			**c_listen_default;	/* per proxy listener:
							   its default sandbox
							   or NULL (resolved:
							   see cfg_listen.c) */
	int			 *c_listen_own;		/* given in the
							   listener's map */
	char			 *c_listen_admin;	/* "unix:/abs/path" or
							   "HOST:PORT"; default
							   unix:<state_dir>/
							   admin.sock */
	char			 *c_admin_token;	/* resolved value; NULL
							   when the file is to
							   be created */
	size_t			  c_admin_token_len;
	char			 *c_admin_token_file;	/* file: source path
							   (absolute), or
							   NULL; default
							   <state_dir>/
							   admin.token */
	char			 *c_geoip_database;	/* .mmdb path or NULL */

	char			 *c_state_dir;	/* resolved against c_dir;
						   default "<dir>/state" */
	int			  c_workers;	/* 0 = one per core */
	struct cfg_limits	  c_limits;

	char			 *c_upstream_ca_file;	/* "system" or a path */
	char			 *c_upstream_resolver;	/* "system" or "IP:PORT" */
	struct cfg_host_override *c_upstream_hosts;
	struct up_parent	 *c_upstream_proxy;	/* NULL: direct */
	char			 *c_upstream_proxy_auth; /* until attached */
	size_t			  c_upstream_proxy_auth_len;
	size_t			  c_nupstream_hosts;
	struct net_guard	 *c_guard;	/* deny_networks/allow_networks */
	struct net_self		 *c_self;	/* our own listeners: never an
						   upstream */

	size_t			  c_tls_cert_cache;	/* 10000 */
	uint64_t		  c_tls_leaf_validity_ms; /* 7d, <= 30d */
	int			  c_tls_min_version;	/* TLS1_2_VERSION or
							   TLS1_3_VERSION */
	char			 *c_tls_fleet_ca_key;	/* master key file, or
							   NULL */
	int			  c_tls_alpn;	/* H2_ALPN_* offered to
						   intercepted clients; both */
	int			  c_upstream_alpn; /* TLS_ALPN_* offered to
						   origins; both */

	struct cfg_price	 *c_pricing;
	size_t			  c_npricing;
	char			 *c_budget_store;	/* "file" or its URL */
	char			 *c_gateway;	/* this gateway's name, or NULL
						   (the host name in a fleet) */
	/* budget_store: redis://HOST:PORT/DB or unix:PATH[?db=N] */
	int			  c_bs_redis;
	char			 *c_bs_host;		/* NULL: unix socket */
	int			  c_bs_port;
	char			 *c_bs_unix;
	int			  c_bs_db;
	int			  c_bs_tls;	/* rediss:// */
	char			 *c_bs_ca;	/* budget_store_ca, or NULL */
	char			 *c_bs_auth;	/* env:NAME | file:PATH, or
						   NULL (no AUTH) */

	struct cfg_secret	 *c_secrets;
	size_t			  c_nsecrets;
	size_t			  c_reflect_min_run;	/* 12: runs of a bound
							   secret this long
							   are redacted */
	struct sec_store	 *c_store;	/* values, set by the daemon
						   after load; cfg_free frees */
	struct geo		 *c_geo;	/* geoip.database, opened by the
						   daemon; cfg_free closes */

	struct cfg_policy	 *c_policies;
	size_t			  c_npolicies;
	struct cfg_sandbox	 *c_sandboxes;
	size_t			  c_nsandboxes;

	char			 *c_listen_transparent;	/* "IP:PORT" or NULL */
	char			 *c_listen_socks5;	/* "IP:PORT" or NULL */
	char			 *c_listen_dns;		/* "IP:PORT" or NULL */
	struct net_cidr		  c_launcher_network;	/* IPv4; default
							   10.88.0.0/16 */
	struct net_cidr		  c_dns_pool;		/* IPv4; default
							   198.18.0.0/15 */
	char			 *c_launcher_rootfs;	/* NULL = host tools */
	char			 *c_launcher_ifprefix;	/* host veth names;
							   default "sbx-" */
	uint32_t		  c_gateway_uid;	/* netns: the gateway
							   drops root to this;
							   65533 */
	uint32_t		  c_gateway_gid;
	uint32_t		  c_launcher_uid;	/* 65534 */
	uint32_t		  c_launcher_gid;	/* 65534 */
	uint64_t		  c_launcher_memory;	/* bytes; 512MiB */
	uint64_t		  c_launcher_pids;	/* 256 */
	uint64_t		  c_launcher_snap_max;	/* snapshots.max_bytes;
							   1GiB */
	char			 *c_pool_from;		/* pool.from: a snapshot,
							   or NULL */
	uint64_t		  c_launcher_dns_max_names; /* per sandbox;
							       4096 */
	uint64_t		  c_launcher_dns_per_min; /* new names per
							     minute under a
							     wildcard; 30 */
	uint64_t		  c_launcher_canary_ms;	/* periodic escape
							   canary; 0 = off */
	int			  c_launcher_io_uring;	/* 0: seccomp denies
							   io_uring */
	int			  c_launcher_set;	/* a launcher section:
							   keep warm pools */
	int			  c_launcher_backend;	/* CFG_BACKEND_* */
	/* launcher.qemu */
	char			 *c_qemu_kernel;	/* required with qemu */
	char			 *c_qemu_initrd;	/* required with qemu */
	char			 *c_qemu_binary;	/* NULL = search */
	uint64_t		  c_qemu_memory;	/* bytes; 256MiB */
	uint64_t		  c_qemu_vcpus;		/* 1 */
	int			  c_qemu_accel;		/* CFG_ACCEL_* */
	uint64_t		  c_qemu_boot_ms;	/* 60s */
	uint64_t		  c_qemu_min_free;	/* bytes; 512MiB */
	size_t			  c_pool_warm;		/* 2 */
	size_t			  c_pool_max;		/* 64 */
	uint64_t		  c_pool_idle_ms;	/* 15m */

	uint64_t		  c_ask_timeout_ms;	/* ask.timeout; 30s */
	char			 *c_ask_webhook;	/* ask.webhook URL, or
							   NULL */
	size_t			  c_ask_max_pending;	/* per sandbox; 16 */

	char			 *c_audit_file;	/* "-" = stdout; default
						   "<state_dir>/audit.jsonl" */
	int			  c_audit_hash_chain;	/* default 0 */

	int			  c_refs;
};

/*
 * Load and validate <path>. Every problem is printed to <errs> as
 * "FILE:LINE:COL: message\n" (1-based, FILE as given); all of them, not just
 * the first. Returns a new config (one reference) when there were none,
 * else NULL; *nerrors (may be NULL) gets the count.
 */
struct cfg	*cfg_load(const char *path, FILE *errs, int *nerrors);

/* Same, from a buffer (for tests); <name> is used as FILE in messages. */
struct cfg	*cfg_load_buffer(const char *name, const char *buf, size_t len,
		    FILE *errs, int *nerrors);

struct cfg	*cfg_ref(struct cfg *);		/* atomic */
void		 cfg_unref(struct cfg *);	/* frees at zero; NULL ok */

const struct cfg_sandbox *cfg_sandbox_find(const struct cfg *, const char *id);
/* The default sandbox of explicit listener <listener> (an index into
   c_listen_proxy), or NULL: such a listener answers 407 without
   credentials. */
const char	*cfg_listen_default_sandbox(const struct cfg *, int listener);
const struct cfg_policy	 *cfg_policy_find(const struct cfg *, const char *name);

/* "500ms" "10s" "5m" "24h" "7d" -> ms. Returns 0 or -1. */
int	cfg_parse_duration(const char *, uint64_t *ms);
/* "512" "64KiB" "16MiB" "1GiB" (also KB/MB/GB as powers of 1000) -> bytes. */
int	cfg_parse_size(const char *, uint64_t *bytes);

#endif
