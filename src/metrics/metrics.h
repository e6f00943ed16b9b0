/*
 * Metrics: process-wide counters updated with relaxed atomics on the data
 * path, rendered in Prometheus text format (version 0.0.4) by the admin
 * server's GET /metrics.
 */
#ifndef AIRLOCK_METRICS_H
#define AIRLOCK_METRICS_H

#include <stdint.h>

#include "audit/aud_reasons.h"

struct evbuffer;

/*
 * One finished request (or refused connection, tunnel): <allowed> its
 * decision, <why> how it ended (audit/aud_reasons.h; its SPEC code is the
 * "reason" label).
 */
void	met_request(int allowed, enum aud_reason why,
	    uint64_t duration_us, uint64_t bytes_in, uint64_t bytes_out);
/* Requests counted so far, every decision and reason (admin status). */
uint64_t met_requests_total(void);
/* A reload attempt and its outcome (SIGHUP or POST /v1/reload). */
void	met_reload(int ok);
/* One failed containment check of the escape canary (sched/canary.c). */
void	met_canary_failure(void);
/* Append the whole exposition to <out>. */
void	met_render(struct evbuffer *out);

#endif
