/*
 * Metrics: process-wide counters and the Prometheus text exposition
 * (format 0.0.4) served by the admin API's GET /metrics.
 *
 * The data path only does relaxed atomic adds on fixed arrays: no lock, no
 * allocation. Rendering (admin thread) reads each counter once; a series
 * may be a request ahead of another, but each one is monotonic, and a
 * histogram's _count is its +Inf bucket, so the two always agree.
 * Gauges of other planes (connections, certificate cache, audit, budget,
 * sandbox registry) are read from their owners at render time.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "audit/aud.h"
#include "audit/aud_reasons.h"
#include "budget/bud.h"
#include "ca/ca.h"
#include "conn/worker.h"
#include "metrics/metrics.h"
#include "sbx/sbx.h"
#include "util/util.h"

/*
 * Values of the "reason" label: the SPEC error code of a reason in
 * audit/aud_reasons.h, "none" when the upstream answered (or the exchange
 * ended without an answer of ours and was allowed), "other" for a refusal
 * that carries no code. The table bounds the label set.
 */
#define MET_R_OTHER	AUD_R_COUNT	/* one slot past the table */
#define MET_R_COUNT	(AUD_R_COUNT + 1)

enum met_decision {
	MET_D_ALLOW = 0,
	MET_D_DENY,
	MET_D_COUNT,
};

static const char *const met_decision_name[MET_D_COUNT] = {
	"allow", "deny",
};

/* Upper bounds of airlock_request_duration_seconds, in µs and as text. */
static const uint64_t met_bucket_us[] = {
	1000, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 30000000, 60000000,
};
static const char *const met_bucket_le[] = {
	"0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
	"1", "2.5", "5", "10", "30", "60",
};
#define MET_NBUCKETS	(sizeof(met_bucket_us) / sizeof(met_bucket_us[0]))

/* Everything the data path writes; only ever touched atomically. */
static struct {
	uint64_t	requests[MET_D_COUNT][MET_R_COUNT];
	uint64_t	duration[MET_NBUCKETS + 1];	/* per bucket; last
							   is +Inf */
	uint64_t	duration_sum_us;
	uint64_t	bytes_in;
	uint64_t	bytes_out;
	uint64_t	reloads[2];			/* error, ok */
	uint64_t	canary_failures;
	uint64_t	would_deny;
	uint64_t	holds[MET_HOLD_COUNT];
	uint64_t	secret_mints[2];		/* failed, ok */
} met;

static uint64_t	met_start_s;

static const char *const met_hold_names[MET_HOLD_COUNT] = {
	"held", "approved", "denied", "timeout", "rule",
};

/* The process start time, for airlock_start_time_seconds. */
static void __attribute__((constructor))
met_init_start(void)
{
	struct timespec	ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
		met_start_s = (uint64_t)ts.tv_sec;
}

static inline void
met_add(uint64_t *p, uint64_t n)
{
	__atomic_add_fetch(p, n, __ATOMIC_RELAXED);
}

static inline uint64_t
met_load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* The slot of <why>: its own when it has a code, else none or other. */
static size_t
met_reason_slot(enum aud_reason why, int allowed)
{
	if ((unsigned)why < AUD_R_COUNT && aud_reason_code(why) != NULL)
		return (size_t)why;
	return allowed ? AUD_R_NONE : MET_R_OTHER;
}

static const char *
met_reason_label(size_t slot)
{
	if (slot == MET_R_OTHER)
		return "other";
	if (slot == AUD_R_NONE)
		return "none";
	return aud_reason_code((enum aud_reason)slot);
}

void
met_request(int allowed, enum aud_reason why, uint64_t duration_us,
    uint64_t bytes_in, uint64_t bytes_out)
{
	enum met_decision	d;
	size_t			b;

	d = allowed ? MET_D_ALLOW : MET_D_DENY;
	met_add(&met.requests[d][met_reason_slot(why, allowed)], 1);
	for (b = 0; b < MET_NBUCKETS; b++)
		if (duration_us <= met_bucket_us[b])
			break;
	met_add(&met.duration[b], 1);
	met_add(&met.duration_sum_us, duration_us);
	if (bytes_in != 0)
		met_add(&met.bytes_in, bytes_in);
	if (bytes_out != 0)
		met_add(&met.bytes_out, bytes_out);
}

uint64_t
met_requests_total(void)
{
	uint64_t	n = 0;
	size_t		d, r;

	for (d = 0; d < MET_D_COUNT; d++)
		for (r = 0; r < MET_R_COUNT; r++)
			n += met_load(&met.requests[d][r]);
	return n;
}

void
met_reload(int ok)
{
	met_add(&met.reloads[ok ? 1 : 0], 1);
}

void
met_canary_failure(void)
{
	met_add(&met.canary_failures, 1);
}

void
met_would_deny(void)
{
	met_add(&met.would_deny, 1);
}

void
met_hold(enum met_hold h)
{
	met_add(&met.holds[h], 1);
}

void
met_secret_mint(int ok)
{
	met_add(&met.secret_mints[ok ? 1 : 0], 1);
}

/* "# HELP" and "# TYPE" of one family. */
static void
met_family(struct evbuffer *out, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
	    name, type);
}

static void
met_sample(struct evbuffer *out, const char *name, uint64_t v)
{
	evbuffer_add_printf(out, "%s %" PRIu64 "\n", name, v);
}

/* A label value with \, " and newline escaped as the format wants. */
static void
met_label_value(struct evbuffer *out, const char *s)
{
	const char	*p;

	for (p = s; *p != '\0'; p++) {
		switch (*p) {
		case '\\':
			evbuffer_add(out, "\\\\", 2);
			break;
		case '"':
			evbuffer_add(out, "\\\"", 2);
			break;
		case '\n':
			evbuffer_add(out, "\\n", 2);
			break;
		default:
			evbuffer_add(out, p, 1);
			break;
		}
	}
}

/* µs (or µUSD) as a decimal with six places: exact, no float rounding. */
static void
met_micro(struct evbuffer *out, uint64_t v)
{
	evbuffer_add_printf(out, "%" PRIu64 ".%06" PRIu64, v / 1000000,
	    v % 1000000);
}

static void
met_render_requests(struct evbuffer *out)
{
	uint64_t	v;
	size_t		d, r;

	met_family(out, "airlock_requests_total", "counter",
	    "Finished requests, tunnels and refused connections by decision "
	    "and reason (the gateway's error code, none when the upstream "
	    "answered).");
	for (d = 0; d < MET_D_COUNT; d++)
		for (r = 0; r < MET_R_COUNT; r++) {
			v = met_load(&met.requests[d][r]);
			/* series appear with their first request; allow/none
			 * is always there so the family is never empty */
			if (v == 0 && !(d == MET_D_ALLOW && r == AUD_R_NONE))
				continue;
			evbuffer_add_printf(out, "airlock_requests_total"
			    "{decision=\"%s\",reason=\"%s\"} %" PRIu64 "\n",
			    met_decision_name[d], met_reason_label(r), v);
		}
}

static void
met_render_duration(struct evbuffer *out)
{
	uint64_t	cum = 0;
	size_t		b;

	met_family(out, "airlock_request_duration_seconds", "histogram",
	    "Time from the start of a request (or tunnel) to its audit "
	    "record.");
	for (b = 0; b < MET_NBUCKETS; b++) {
		cum += met_load(&met.duration[b]);
		evbuffer_add_printf(out, "airlock_request_duration_seconds"
		    "_bucket{le=\"%s\"} %" PRIu64 "\n", met_bucket_le[b], cum);
	}
	cum += met_load(&met.duration[MET_NBUCKETS]);
	evbuffer_add_printf(out, "airlock_request_duration_seconds_bucket"
	    "{le=\"+Inf\"} %" PRIu64 "\n", cum);
	evbuffer_add_printf(out, "airlock_request_duration_seconds_sum ");
	met_micro(out, met_load(&met.duration_sum_us));
	evbuffer_add_printf(out, "\nairlock_request_duration_seconds_count "
	    "%" PRIu64 "\n", cum);
}

static void
met_render_sandboxes(struct evbuffer *out)
{
	struct bud_counters	 bc;
	struct sbx		**list = NULL;
	struct evbuffer		*rsv;
	size_t			 n, i;

	n = sbx_list(&list);
	met_family(out, "airlock_sandboxes", "gauge",
	    "Sandboxes known to the gateway (static and created).");
	met_sample(out, "airlock_sandboxes", n);
	/* one bud_get per sandbox: both families from the same reading */
	rsv = evbuffer_new();
	met_family(out, "airlock_spend_usd", "gauge",
	    "Settled spend of a sandbox in its current budget window, USD.");
	if (rsv != NULL)
		met_family(rsv, "airlock_spend_reserved_usd", "gauge",
		    "Worst-case cost reserved by a sandbox's requests in "
		    "flight, USD.");
	for (i = 0; i < n; i++) {
		if (bud_get(list[i]->sb_id, NULL, &bc) == -1)
			memset(&bc, 0, sizeof(bc));
		evbuffer_add_printf(out, "airlock_spend_usd{sandbox=\"");
		met_label_value(out, list[i]->sb_id);
		evbuffer_add_printf(out, "\"} ");
		met_micro(out, bc.bc_spend);
		evbuffer_add(out, "\n", 1);
		if (rsv == NULL)
			continue;
		evbuffer_add_printf(rsv, "airlock_spend_reserved_usd"
		    "{sandbox=\"");
		met_label_value(rsv, list[i]->sb_id);
		evbuffer_add_printf(rsv, "\"} ");
		met_micro(rsv, bc.bc_reserved);
		evbuffer_add(rsv, "\n", 1);
	}
	sbx_list_free(list, n);
	if (rsv != NULL) {
		evbuffer_add_buffer(out, rsv);
		evbuffer_free(rsv);
	}
}

/* ---- LLM tokens and cost by sandbox and model ---------------------- */

enum met_kind {
	MET_K_INPUT = 0,	/* uncached prompt tokens */
	MET_K_CACHED,
	MET_K_CACHE_WRITE,
	MET_K_OUTPUT,
	MET_K_COUNT,
};

static const char *const met_kind_name[MET_K_COUNT] = {
	"input", "cached", "cache_write", "output",
};

struct met_llm {
	char		ml_sandbox[128];
	char		ml_model[128];
	uint64_t	ml_tokens[MET_K_COUNT];
	uint64_t	ml_requests;
	uint64_t	ml_cost;	/* µUSD */
};

/* Settles are rare next to bytes: a mutex and a small array do. */
static struct {
	pthread_mutex_t	 mtx;
	struct met_llm	*series;
	size_t		 n;
	size_t		 cap;
} met_llm = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
};

/* The series of (<sandbox>, <model>), created within the bounds; mtx
 * held. */
static struct met_llm *
met_llm_series(const char *sandbox, const char *model)
{
	struct met_llm	*m;
	size_t		 i, models = 0;

	for (i = 0; i < met_llm.n; i++) {
		m = &met_llm.series[i];
		if (strcmp(m->ml_sandbox, sandbox) != 0)
			continue;
		if (strcmp(m->ml_model, model) == 0)
			return m;
		models++;
	}
	if (strcmp(model, "other") != 0 && models >= MET_LLM_MODELS)
		return met_llm_series(sandbox, "other");
	if (met_llm.n >= MET_LLM_SERIES && (strcmp(sandbox, "other") != 0 ||
	    strcmp(model, "other") != 0))
		return met_llm_series("other", "other");
	if (met_llm.n == met_llm.cap) {
		met_llm.cap = met_llm.cap ? met_llm.cap * 2 : 16;
		met_llm.series = xrealloc(met_llm.series, met_llm.cap *
		    sizeof(*met_llm.series));
	}
	m = &met_llm.series[met_llm.n++];
	memset(m, 0, sizeof(*m));
	util_copy_str(m->ml_sandbox, sandbox, sizeof(m->ml_sandbox));
	util_copy_str(m->ml_model, model, sizeof(m->ml_model));
	return m;
}

void
met_llm_usage(const char *sandbox, const char *model, uint64_t input,
    uint64_t cached, uint64_t cache_write, uint64_t output,
    uint64_t cost_micro)
{
	struct met_llm	*m;
	uint64_t	 known = cached + cache_write;

	pthread_mutex_lock(&met_llm.mtx);
	m = met_llm_series(sandbox, model[0] != '\0' ? model : "unknown");
	m->ml_tokens[MET_K_INPUT] += input > known ? input - known : 0;
	m->ml_tokens[MET_K_CACHED] += cached;
	m->ml_tokens[MET_K_CACHE_WRITE] += cache_write;
	m->ml_tokens[MET_K_OUTPUT] += output;
	m->ml_requests++;
	m->ml_cost += cost_micro;
	pthread_mutex_unlock(&met_llm.mtx);
}

static void
met_llm_labels(struct evbuffer *out, const char *name, const struct met_llm *m)
{
	evbuffer_add_printf(out, "%s{sandbox=\"", name);
	met_label_value(out, m->ml_sandbox);
	evbuffer_add_printf(out, "\",model=\"");
	met_label_value(out, m->ml_model);
	evbuffer_add(out, "\"", 1);
}

static void
met_render_llm(struct evbuffer *out)
{
	const struct met_llm	*m;
	size_t			 i, k;

	pthread_mutex_lock(&met_llm.mtx);
	met_family(out, "airlock_llm_tokens_total", "counter",
	    "Tokens of settled metered requests by sandbox, model and kind "
	    "(input: uncached prompt tokens; cached: cache reads; "
	    "cache_write: cache creation; output: reasoning included).");
	for (i = 0; i < met_llm.n; i++)
		for (k = 0; k < MET_K_COUNT; k++) {
			m = &met_llm.series[i];
			met_llm_labels(out, "airlock_llm_tokens_total", m);
			evbuffer_add_printf(out, ",kind=\"%s\"} %" PRIu64 "\n",
			    met_kind_name[k], m->ml_tokens[k]);
		}
	met_family(out, "airlock_llm_requests_total", "counter",
	    "Settled metered requests by sandbox and model.");
	for (i = 0; i < met_llm.n; i++) {
		met_llm_labels(out, "airlock_llm_requests_total",
		    &met_llm.series[i]);
		evbuffer_add_printf(out, "} %" PRIu64 "\n",
		    met_llm.series[i].ml_requests);
	}
	met_family(out, "airlock_llm_cost_usd_total", "counter",
	    "Cost charged for metered requests by sandbox and model, USD.");
	for (i = 0; i < met_llm.n; i++) {
		met_llm_labels(out, "airlock_llm_cost_usd_total",
		    &met_llm.series[i]);
		evbuffer_add(out, "} ", 2);
		met_micro(out, met_llm.series[i].ml_cost);
		evbuffer_add(out, "\n", 1);
	}
	pthread_mutex_unlock(&met_llm.mtx);
}

void
met_render(struct evbuffer *out)
{
	struct ca_cache	*cc;
	uint64_t	 hits = 0, misses = 0;
	size_t		 entries = 0, i;

	met_render_requests(out);
	met_render_duration(out);

	met_family(out, "airlock_connections_active", "gauge",
	    "Client connections open now.");
	met_sample(out, "airlock_connections_active", worker_conn_count());

	met_family(out, "airlock_tls_handshakes_total", "counter",
	    "TLS handshakes completed with clients of intercepted CONNECTs.");
	met_sample(out, "airlock_tls_handshakes_total",
	    met_load(&worker_tls_handshakes));

	cc = __atomic_load_n(&worker_cert_cache, __ATOMIC_ACQUIRE);
	if (cc != NULL)
		ca_cache_stats(cc, &hits, &misses, &entries);
	met_family(out, "airlock_cert_cache_hits_total", "counter",
	    "Leaf certificates served from the cache.");
	met_sample(out, "airlock_cert_cache_hits_total", hits);
	met_family(out, "airlock_cert_cache_misses_total", "counter",
	    "Leaf certificates minted because the cache had none.");
	met_sample(out, "airlock_cert_cache_misses_total", misses);
	met_family(out, "airlock_cert_cache_entries", "gauge",
	    "Leaf certificates in the cache now.");
	met_sample(out, "airlock_cert_cache_entries", entries);

	met_family(out, "airlock_bytes_in_total", "counter",
	    "Bytes sent back to sandboxes (headers and bodies), counted when "
	    "a request or tunnel ends.");
	met_sample(out, "airlock_bytes_in_total", met_load(&met.bytes_in));
	met_family(out, "airlock_bytes_out_total", "counter",
	    "Bytes sandboxes sent upstream (headers and bodies), counted when "
	    "a request or tunnel ends.");
	met_sample(out, "airlock_bytes_out_total", met_load(&met.bytes_out));

	met_render_sandboxes(out);
	met_render_llm(out);

	met_family(out, "airlock_audit_write_errors_total", "counter",
	    "Audit records dropped or not written.");
	met_sample(out, "airlock_audit_write_errors_total",
	    aud_write_errors());
	met_family(out, "airlock_audit_available", "gauge",
	    "1 while audit records can be written; 0 means requests are "
	    "refused with audit_unavailable.");
	met_sample(out, "airlock_audit_available", aud_available() ? 1 : 0);

	met_family(out, "airlock_reloads_total", "counter",
	    "Configuration reloads (SIGHUP or POST /v1/reload) by outcome.");
	evbuffer_add_printf(out, "airlock_reloads_total{outcome=\"ok\"} "
	    "%" PRIu64 "\n", met_load(&met.reloads[1]));
	evbuffer_add_printf(out, "airlock_reloads_total{outcome=\"error\"} "
	    "%" PRIu64 "\n", met_load(&met.reloads[0]));

	met_family(out, "airlock_canary_failures_total", "counter",
	    "Containment checks of the escape canary that failed (airlockctl "
	    "sandbox probe).");
	met_sample(out, "airlock_canary_failures_total",
	    met_load(&met.canary_failures));

	met_family(out, "airlock_would_deny_total", "counter",
	    "Requests a policy in report mode forwarded that its rules "
	    "would deny.");
	met_sample(out, "airlock_would_deny_total", met_load(&met.would_deny));

	met_family(out, "airlock_approval_holds_total", "counter",
	    "Requests held for an operator (action: ask), by outcome.");
	for (i = 0; i < MET_HOLD_COUNT; i++)
		evbuffer_add_printf(out, "airlock_approval_holds_total"
		    "{outcome=\"%s\"} %" PRIu64 "\n", met_hold_names[i],
		    met_load(&met.holds[i]));
	met_family(out, "airlock_secret_mints_total", "counter",
	    "Tokens minted for token broker secrets (requests to a token "
	    "endpoint that gave one).");
	met_sample(out, "airlock_secret_mints_total",
	    met_load(&met.secret_mints[1]));
	met_family(out, "airlock_secret_mint_failures_total", "counter",
	    "Requests to a token endpoint that gave no token.");
	met_sample(out, "airlock_secret_mint_failures_total",
	    met_load(&met.secret_mints[0]));

	met_family(out, "airlock_build_info", "gauge",
	    "Always 1; the version is in the label.");
	evbuffer_add_printf(out, "airlock_build_info{version=\"");
	met_label_value(out, PACKAGE_VERSION);
	evbuffer_add_printf(out, "\"} 1\n");
	met_family(out, "airlock_start_time_seconds", "gauge",
	    "When the gateway started, seconds since the Unix epoch.");
	met_sample(out, "airlock_start_time_seconds", met_start_s);
}
