/*
 * The keyword-table walker, for src/cfg/ and for each plane's own table
 * (src/secrets/sec_cfg.c, src/policy/pol_cfg.c, ...): the parse state, the
 * libyaml document with its marks (cfg_yaml.c), struct cfg_key with the
 * node-type and where-allowed flags that cfg_walk_map() checks, the
 * generic setters and the value parsers (cfg_util.c). Nothing here pulls
 * in libevent or src/conn/: planes include this, cfg_load.c lists their
 * tables (cfg_planes.h).
 */
#ifndef AIRLOCK_CFG_WALK_H
#define AIRLOCK_CFG_WALK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <yaml.h>

#include "cfg/cfg.h"

#define CFG_MAX_FILE	(16 * 1024 * 1024)	/* bytes of YAML */
#define CFG_MAX_VISITS	1000000		/* nodes walked: alias bombs */
#define CFG_MAX_WORKERS	1024
#define CFG_MAX_TOKEN	4096		/* bytes of a resolved token */
#define CFG_MAX_NAME	64		/* sandbox ids, policy names */
#define CFG_EXEC_TIMEOUT_MS 10000	/* exec: sources */
#define CFG_MAX_LEAF_VALIDITY_MS (30ULL * 24 * 3600 * 1000) /* tls */
#define CFG_MIN_PLACEHOLDER 8		/* chars of a secret placeholder */
#define CFG_MIN_REFRESH_MS 100		/* exec: refresh interval */

/* A rule's "secrets" item, resolved once every secret is known. */
struct cfg_secref {
	struct cfg_rule		*sr_rule;
	const yaml_node_t	*sr_node;	/* the name in the rule */
};

/* One load: where messages go and what is still to be cross-checked. */
struct cfg_parse {
	const char		 *cp_file;	/* FILE in messages */
	FILE			 *cp_errs;	/* may be NULL */
	int			  cp_errors;
	yaml_document_t		  cp_doc;
	int			  cp_have_doc;
	size_t			  cp_visits;
	int			  cp_toobig;	/* visit budget spent */
	struct cfg		 *cp_cfg;

	/* Resolved after the walk: YAML order must not matter. */
	int			  cp_deny_seen;
	const yaml_node_t	 *cp_default_sandbox;
	const yaml_node_t	**cp_listen_nodes;	/* per listener: its own
							   default_sandbox */
	const yaml_node_t	**cp_sbx_policy;	/* per sandbox */
	const yaml_node_t	 *cp_geo_node;	/* first policy "geo" */
	const yaml_node_t	 *cp_backend_node;	/* launcher.backend */
	const yaml_node_t	 *cp_qemu_node;		/* launcher.qemu */
	const yaml_node_t	 *cp_proxy_auth_node;	/* upstream.proxy_auth */
	struct cfg_secref	 *cp_secrefs;	/* rule "secrets" items */
	size_t			  cp_nsecrefs;
	size_t			  cp_secrefs_cap;
};

/*
 * Keyword tables, one per mapping kind, checked by cfg_walk_map() (h2o's
 * configurator flags, nginx's ngx_command_t). Where a key is allowed:
 */
#define CFG_K_REQUIRED	0x01	/* missing: error at the mapping */
#define CFG_K_LATER	0x02	/* SPEC key of a feature not built yet */
#define CFG_K_RESTART	0x04	/* a reload that changes it is refused
				   (main.c reload_restart_keys) */
#define CFG_K_NOTE	0x08	/* the value node is kept at arg + k_note
				   before its type is checked */
/*
 * What node the value must be. The walker refuses any other with
 * "\"<key>\" must be <want>, not <kind>" at the value, so that setters
 * never look at the node type of their own value; 0 lets the setter
 * check (values that may be of several kinds with their own messages).
 */
#define CFG_T_SCALAR	0x10	/* want: k_want, or "a string" */
#define CFG_T_SEQ	0x20	/* want: "a list" */
#define CFG_T_MAP	0x40	/* want: "a mapping" */
#define CFG_T_MASK	(CFG_T_SCALAR | CFG_T_SEQ | CFG_T_MAP)
#define CFG_MAX_UNIX_PATH	108	/* sizeof(sun_path) */

struct cfg_key;
typedef void	cfg_key_fn(struct cfg_parse *, const struct cfg_key *,
		    yaml_node_t *value, void *arg);

struct cfg_key {
	const char	*k_name;
	int		 k_flags;	/* CFG_K_* | CFG_T_* */
	cfg_key_fn	*k_fn;		/* NULL: walk k_sub */
	size_t		 k_off;		/* generic setters; k_sub: arg
					   offset of the nested struct */
	uint64_t	 k_min;
	uint64_t	 k_max;		/* 0 = no bound */
	const char	*k_want;	/* CFG_T_SCALAR: "a duration" */
	const struct cfg_key *k_sub;	/* CFG_T_MAP: its keys */
	const char	*k_in;		/* k_sub: "in <k_in>" in messages,
					   default k_name */
	size_t		 k_note;	/* CFG_K_NOTE: offset in arg */
};

/* A scalar row: setter <fn> into arg + <off>, bounds, "must be <want>". */
#define CFG_ROW(name, fl, fn, off, min, max, want)			\
	{ name, (fl) | CFG_T_SCALAR, fn, off, min, max, want, NULL, NULL, 0 }
/* Table rows for the generic setters: one scalar each. */
#define CFG_DURATION(name, fl, off, min, max)				\
	CFG_ROW(name, fl, cfg_set_duration, off, min, max, "a duration")
#define CFG_SIZE(name, fl, off, min, max)				\
	CFG_ROW(name, fl, cfg_set_size, off, min, max, "a size")
#define CFG_SIZE64(name, fl, off, min, max)				\
	CFG_ROW(name, fl, cfg_set_size64, off, min, max, "a size")
#define CFG_COUNT(name, fl, off, min, max)				\
	CFG_ROW(name, fl, cfg_set_count, off, min, max, "a number")
#define CFG_COUNT64(name, fl, off, min, max)				\
	CFG_ROW(name, fl, cfg_set_count64, off, min, max, "a number")
#define CFG_PERCENT(name, fl, off, min)					\
	CFG_ROW(name, fl, cfg_set_percent, off, min, 0, "a percentage")
#define CFG_MONEY(name, fl, off)					\
	CFG_ROW(name, fl, cfg_set_money, off, 0, 0, "an amount of USD")
#define CFG_BOOL(name, fl, off)						\
	CFG_ROW(name, fl, cfg_set_bool, off, 0, 0, "true or false")
/* A scalar with its own setter; <want> completes "must be ...". */
#define CFG_SCALAR(name, fl, fn, off, want)				\
	CFG_ROW(name, fl, fn, off, 0, 0, want)
/* The same, the value node kept at arg + <note> even when refused. */
#define CFG_NOTE(name, fl, fn, want, note)				\
	{ name, (fl) | CFG_T_SCALAR | CFG_K_NOTE, fn, 0, 0, 0, want, NULL,	\
	    NULL, note }
/* A list or a mapping handed to its own setter. */
#define CFG_SEQ(name, fl, fn)						\
	{ name, (fl) | CFG_T_SEQ, fn, 0, 0, 0, NULL, NULL, NULL, 0 }
#define CFG_MAP(name, fl, fn)						\
	{ name, (fl) | CFG_T_MAP, fn, 0, 0, 0, NULL, NULL, NULL, 0 }
#define CFG_MAP_NOTE(name, fl, fn, note)				\
	{ name, (fl) | CFG_T_MAP | CFG_K_NOTE, fn, 0, 0, 0, NULL, NULL, NULL,	\
	    note }
/* A nested mapping walked with <sub>, arg + <off> as its arg. */
#define CFG_NEST(name, fl, sub, in, off)				\
	{ name, (fl) | CFG_T_MAP, NULL, off, 0, 0, NULL, sub, in, 0 }
/* Any node: the setter checks it. */
#define CFG_ANY(name, fl, fn, off)					\
	{ name, fl, fn, off, 0, 0, NULL, NULL, NULL, 0 }
#define CFG_END	{ NULL, 0, NULL, 0, 0, 0, NULL, NULL, NULL, 0 }

/* The text of a value the walker checked as CFG_T_SCALAR. */
const char	*cfg_str(const yaml_node_t *);

/* A growable list of names with their nodes, for duplicate checks. */
struct cfg_name {
	const char		*n_name;
	const yaml_node_t	*n_node;
};
struct cfg_namev {
	struct cfg_name	*nv_v;
	size_t		 nv_n;
	size_t		 nv_cap;
};
void		 cfg_namev_add(struct cfg_namev *, const char *,
		    const yaml_node_t *);

/* cfg_yaml.c: libyaml document, positions, messages, walking. */
void		 cfg_err(struct cfg_parse *, const yaml_node_t *,
		    const char *, ...) __attribute__((format(printf, 3, 4)));
void		 cfg_err_mark(struct cfg_parse *, const yaml_mark_t *,
		    const char *, ...) __attribute__((format(printf, 3, 4)));
void		 cfg_err_file(struct cfg_parse *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
yaml_node_t	*cfg_doc_load(struct cfg_parse *, const char *, size_t);
void		 cfg_doc_free(struct cfg_parse *);
yaml_node_t	*cfg_node(struct cfg_parse *, yaml_node_item_t);
const char	*cfg_node_kind(const yaml_node_t *);
int		 cfg_is_null(const yaml_node_t *);
const char	*cfg_scalar(struct cfg_parse *, yaml_node_t *, const char *,
		    const char *);
size_t		 cfg_seq_len(const yaml_node_t *);
int		 cfg_want_seq(struct cfg_parse *, yaml_node_t *, const char *);
int		 cfg_want_map(struct cfg_parse *, yaml_node_t *, const char *);
yaml_node_t	*cfg_seq_at(struct cfg_parse *, yaml_node_t *, size_t);
yaml_node_t	*cfg_map_key(struct cfg_parse *, yaml_node_t *, const char *,
		    yaml_node_t **);
void		 cfg_walk_map(struct cfg_parse *, yaml_node_t *,
		    const char *, const struct cfg_key *, void *);

/* Generic setters for cfg_key tables: k_off into the arg struct. */
cfg_key_fn	 cfg_set_duration;	/* uint64_t ms */
cfg_key_fn	 cfg_set_size;		/* size_t bytes */
cfg_key_fn	 cfg_set_size64;	/* uint64_t bytes */
cfg_key_fn	 cfg_set_count;		/* size_t */
cfg_key_fn	 cfg_set_count64;	/* uint64_t */
cfg_key_fn	 cfg_set_money;		/* uint64_t µUSD */
cfg_key_fn	 cfg_set_percent;	/* size_t, "25%" or 25 */
cfg_key_fn	 cfg_set_bool;		/* int, 0 or 1 */

/* cfg_util.c: value parsers; none of them prints. */
void		 cfg_check_dups(struct cfg_parse *, struct cfg_name *, size_t,
		    const char *);
const char	*cfg_suggest(const char *, const struct cfg_key *);
char		*cfg_path_join(const char *, const char *);
int		 cfg_parse_bool(const char *, int *);
int		 cfg_parse_uint(const char *, uint64_t max, uint64_t *);
const char	*cfg_parse_money(const char *, uint64_t *);
const char	*cfg_parse_rate(const char *, uint32_t *, uint64_t *);
void		 cfg_fmt_duration(uint64_t, char *, size_t);
const char	*cfg_parse_hostport(const char *, int, char **);
/* The absolute directory of a config file's <path> (airlockctl too). */
char		*cfg_dir_of(const char *path);
const char	*cfg_host_pattern(const char *, char **);
const char	*cfg_host_name(const char *, char **);
char		*cfg_ip_canon(const char *);
int		 cfg_name_ok(const char *);
/*
 * A copy of scalar <v>, a name, reported at <v> unless cfg_name_ok()
 * (<what>: "policy name"). Kept even when bad, so that what names it adds
 * no noise.
 */
char		*cfg_name_dup(struct cfg_parse *, const yaml_node_t *,
		    const char *what);
int		 cfg_method_ok(const char *);
int		 cfg_header_name_ok(const char *);
int		 cfg_env_name_ok(const char *);
int		 cfg_hosts_cover(char **, size_t, const char *);
const char	*cfg_path_glob_check(const char *);
int		 cfg_pem_count(int, char *, size_t);
int		 cfg_source_read(struct cfg_parse *, const yaml_node_t *,
		    const char *, const char *, char **, size_t *);

#endif
