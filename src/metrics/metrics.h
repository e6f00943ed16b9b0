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
/*
 * A settled metered request of <sandbox>: its tokens (<input> every
 * prompt token, <cached> and <cache_write> among them) and cost, under
 * <model>. Series: at most MET_LLM_MODELS models per sandbox (then
 * model="other") and MET_LLM_SERIES (sandbox, model) pairs in all (then
 * sandbox="other", model="other").
 */
#define MET_LLM_MODELS	32
#define MET_LLM_SERIES	2048
void	met_llm_usage(const char *sandbox, const char *model, uint64_t input,
	    uint64_t cached, uint64_t cache_write, uint64_t output,
	    uint64_t cost_micro);
/* One failed containment check of the escape canary (sched/canary.c). */
void	met_canary_failure(void);
/* A request a policy in report mode forwarded though its rules deny it. */
void	met_would_deny(void);
/* An approval hold and how it ended (policy/pol_ask.c). */
enum met_hold {
	MET_HOLD_HELD = 0,	/* held for an operator */
	MET_HOLD_APPROVED,
	MET_HOLD_DENIED,
	MET_HOLD_TIMEOUT,
	MET_HOLD_RULE,		/* let through by a runtime rule */
	MET_HOLD_COUNT,
};
void	met_hold(enum met_hold);
/* One token mint of a broker secret (secrets/sec_store.c), <ok> or not. */
void	met_secret_mint(int ok);
/* Append the whole exposition to <out>. */
void	met_render(struct evbuffer *out);

#endif
