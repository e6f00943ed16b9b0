/*
 * airlockctl policy replay / suggest (ctl_policy.c, ctl_suggest.c): local
 * commands over audit files, no gateway needed.
 */
#ifndef AIRLOCK_CTL_POLICY_H
#define AIRLOCK_CTL_POLICY_H

#include <stddef.h>

struct ctl;
struct ctl_args;
struct pol_arec;

/*
 * Called for every non-empty line of the files, in order; <where> is
 * "FILE:LINE", <rec> NULL when the line is not a JSON object. <rec> and
 * its strings live until the call returns.
 */
typedef void (*ctl_audit_fn)(void *arg, const char *where,
    const struct pol_arec *rec);

/* 0, or -1 (printed) when a file cannot be opened or read. */
int	ctl_audit_each(char **files, int nfiles, ctl_audit_fn fn, void *arg);

/* A warning on stderr for each broken hash chain (ctl_policy.c). */
void	ctl_chain_warn(char **files, int nfiles);

/* ctl_hmap.c: string -> index (zeroed = empty). */
struct ctl_hmap {
	char		**hm_keys;
	size_t		 *hm_vals;
	size_t		  hm_cap;	/* a power of two */
	size_t		  hm_n;
};

/*
 * 1 with *val set when <key> is there; else 0 after adding it with value
 * <add> (*val = add).
 */
int	ctl_hmap_get(struct ctl_hmap *, const char *key, size_t *val,
	    size_t add);
void	ctl_hmap_free(struct ctl_hmap *);

int	ctl_cmd_policy_replay(struct ctl *, struct ctl_args *);
int	ctl_cmd_policy_suggest(struct ctl *, struct ctl_args *);

#endif
