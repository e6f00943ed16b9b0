/* PLACEHOLDER until the GeoIP module lands. */
#include "config.h"
#include <stdio.h>
#include "geo/geo.h"
struct geo *geo_open(const char *path, char *why, size_t whysz) { snprintf(why, whysz, "not built"); return NULL; }
void geo_close(struct geo *g) { (void)g; }
int geo_lookup(const struct geo *g, const struct sockaddr *sa, char country[3], uint32_t *asn) { country[0] = 0; *asn = 0; return -1; }
