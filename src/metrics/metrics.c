/* PLACEHOLDER until the metrics module lands. */
#include "config.h"
#include <event2/buffer.h>
#include "metrics/metrics.h"
void met_request(const char *d, const char *c, uint64_t us, uint64_t bi, uint64_t bo) { }
void met_reload(int ok) { }
void met_render(struct evbuffer *out) { }
