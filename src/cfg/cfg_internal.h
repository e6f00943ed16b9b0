/*
 * Private to src/cfg/: the parse state, the keyword-table walker over the
 * libyaml document (cfg_yaml.c) and the value parsers (cfg_util.c) that
 * cfg_load.c builds the configuration with.
 */
#ifndef AIRLOCK_CFG_INTERNAL_H
#define AIRLOCK_CFG_INTERNAL_H

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
	struct cfg_secref	 *cp_secrefs;	/* rule "secrets" items */
	size_t			  cp_nsecrefs;
	size_t			  cp_secrefs_cap;
};

/* Keyword tables, one per mapping kind, checked by cfg_walk_map(). */
#define CFG_K_REQUIRED	0x01	/* missing: error at the mapping */
#define CFG_MAX_UNIX_PATH	108	/* sizeof(sun_path) */
#define CFG_K_LATER	0x02	/* SPEC key of a feature not built yet */

struct cfg_key;
typedef void	cfg_key_fn(struct cfg_parse *, const struct cfg_key *,
		    yaml_node_t *value, void *arg);

struct cfg_key {
	const char	*k_name;
	int		 k_flags;
	cfg_key_fn	*k_fn;
	size_t		 k_off;		/* for the generic setters */
	uint64_t	 k_min;
	uint64_t	 k_max;		/* 0 = no bound */
};

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
struct cfg_name {
	const char		*n_name;
	const yaml_node_t	*n_node;
};
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
int		 cfg_method_ok(const char *);
int		 cfg_header_name_ok(const char *);
int		 cfg_env_name_ok(const char *);
int		 cfg_hosts_cover(char **, size_t, const char *);
const char	*cfg_path_glob_check(const char *);
int		 cfg_pem_count(int, char *, size_t);
int		 cfg_source_read(struct cfg_parse *, const yaml_node_t *,
		    const char *, const char *, char **, size_t *);

/* cfg_load.c */
void		 cfg_free(struct cfg *);

/* cfg_listen.c: listen.proxy items as {address, default_sandbox}. */
/* Parse <map> as listener <i> of at most <n>; returns its canonical
   address (new string), or NULL after reporting why. */
char		*cfg_listen_item_map(struct cfg_parse *, yaml_node_t *map,
		    size_t n, size_t i);
/* Give every listener its default sandbox and check those named. */
void		 cfg_listen_finish(struct cfg_parse *);
void		 cfg_listen_free(struct cfg *);

#endif
