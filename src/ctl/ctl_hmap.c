/*
 * A string -> index map for airlockctl's audit commands: audits run to
 * millions of lines, so grouping must not search linearly. Open
 * addressing, FNV-1a, grown at half full; keys are copied.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_policy.h"
#include "util/util.h"

static uint64_t
fnv1a(const char *s)
{
	uint64_t	h = 14695981039346656037ULL;

	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

static void
hmap_grow(struct ctl_hmap *m)
{
	struct ctl_hmap	bigger;
	size_t		i, j;

	bigger.hm_cap = m->hm_cap ? m->hm_cap * 2 : 64;
	bigger.hm_n = m->hm_n;
	bigger.hm_keys = xcalloc(bigger.hm_cap, sizeof(char *));
	bigger.hm_vals = xcalloc(bigger.hm_cap, sizeof(size_t));
	for (i = 0; i < m->hm_cap; i++) {
		if (m->hm_keys[i] == NULL)
			continue;
		j = fnv1a(m->hm_keys[i]) & (bigger.hm_cap - 1);
		while (bigger.hm_keys[j] != NULL)
			j = (j + 1) & (bigger.hm_cap - 1);
		bigger.hm_keys[j] = m->hm_keys[i];
		bigger.hm_vals[j] = m->hm_vals[i];
	}
	free(m->hm_keys);
	free(m->hm_vals);
	*m = bigger;
}

int
ctl_hmap_get(struct ctl_hmap *m, const char *key, size_t *val, size_t add)
{
	size_t	j;

	if (m->hm_cap == 0 || (m->hm_n + 1) * 2 > m->hm_cap)
		hmap_grow(m);
	j = fnv1a(key) & (m->hm_cap - 1);
	while (m->hm_keys[j] != NULL) {
		if (strcmp(m->hm_keys[j], key) == 0) {
			*val = m->hm_vals[j];
			return 1;
		}
		j = (j + 1) & (m->hm_cap - 1);
	}
	m->hm_keys[j] = xstrdup(key);
	m->hm_vals[j] = add;
	m->hm_n++;
	*val = add;
	return 0;
}

void
ctl_hmap_free(struct ctl_hmap *m)
{
	size_t	i;

	for (i = 0; i < m->hm_cap; i++)
		free(m->hm_keys[i]);
	free(m->hm_keys);
	free(m->hm_vals);
	memset(m, 0, sizeof(*m));
}
