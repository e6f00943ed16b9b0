/*
 * Private to src/cfg/: what cfg_load.c and cfg_listen.c share beyond the
 * walker (cfg_walk.h).
 */
#ifndef AIRLOCK_CFG_INTERNAL_H
#define AIRLOCK_CFG_INTERNAL_H

#include "cfg/cfg_walk.h"

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
