/*
 * The one list of keyword tables cfg_load.c walks the top level with, each
 * owned by its plane and holding that plane's top-level keys. Their order
 * is the order of cfg_load.c's cfg_planes[] (and so of "did you mean").
 */
#ifndef AIRLOCK_CFG_PLANES_H
#define AIRLOCK_CFG_PLANES_H

#include "cfg/cfg_walk.h"

extern const struct cfg_key cfg_core_keys[];	/* cfg/cfg_core.c: listen,
						   state_dir, workers,
						   limits, upstream */
extern const struct cfg_key pol_cfg_keys[];	/* policy/pol_cfg.c */
extern const struct cfg_key sbx_cfg_keys[];	/* sbx/sbx_cfg.c */
extern const struct cfg_key aud_cfg_keys[];	/* audit/aud_cfg.c */
extern const struct cfg_key tls_cfg_keys[];	/* tls/tls_cfg.c */
extern const struct cfg_key adm_cfg_keys[];	/* admin/adm_cfg.c */
extern const struct cfg_key geo_cfg_keys[];	/* geo/geo_cfg.c */
extern const struct cfg_key sec_cfg_keys[];	/* secrets/sec_cfg.c */
extern const struct cfg_key bud_cfg_keys[];	/* budget/bud_cfg.c:
						   pricing, budget_store */
extern const struct cfg_key lnc_cfg_keys[];	/* launcher/lnc_cfg.c */

/* budget/bud_cfg.c: a policy's "caps" (arg: struct cfg_caps). */
extern const struct cfg_key bud_cfg_caps_keys[];

/* upstream/up_cfg.c: upstream.proxy, upstream.proxy_auth, a rule's "via"
   (arg: struct cfg_rule), and proxy_auth given to the proxy after the
   walk. */
cfg_key_fn	up_cfg_k_proxy;
cfg_key_fn	up_cfg_k_proxy_auth;
cfg_key_fn	up_cfg_k_via;
/* tls/tls_cfg.c: upstream.alpn */
cfg_key_fn	tls_cfg_k_upstream_alpn;
void		up_cfg_attach_auth(struct cfg_parse *);

#endif
