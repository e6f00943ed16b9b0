/* Answers the gateway gives itself, and the audit record of a request. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <json-c/json.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "h2/h2.h"
#include "http/http_write.h"
#include "conn/worker.h"
#include "dns/dns.h"
#include "metrics/metrics.h"
#include "sbx/sbx.h"
#include "secrets/sec_inject.h"
#include "util/log.h"
#include "util/util.h"

void
conn_reply_error(struct conn *c, enum aud_reason why, const char *reason,
    int close)
{
	const struct aud_reason_info *ri = aud_reason(why);
	struct evbuffer	*out = c->c_worker->w_scratch;
	const char	*code = ri->ri_code != NULL ? ri->ri_code :
			    "internal_error";
	int		 status = ri->ri_status != 0 ? ri->ri_status : 500;
	json_object	*o;
	const char	*body, *ctype = "application/json";
	char		 extra[80];
	size_t		 blen, nl = 1;
	struct evbuffer	*ans = c->c_x->x_answer;

	if (c->c_dns != NULL) {
		dns_cancel(c->c_dns);
		c->c_dns = NULL;
	}
	if (c->c_up != NULL) {
		upstream_free(c->c_up);
		c->c_up = NULL;
	}
	conn_req_early_facts(c);
	c->c_x->x_status = status;
	if (reason == NULL)
		reason = ri->ri_text;
	c->c_x->x_why = why;
	if (ri->ri_decision == AUD_D_DENY)
		c->c_x->x_allowed = 0;
	snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%s", reason);
	if (c->c_r.r_connect_replied && !c->c_tls) {
		/* after "200 Connection established" the bytes are TLS: no
		 * HTTP answer fits, the audit record says why */
		conn_close(c, why);
		return;
	}
	if (c->c_r.r_resp_started) {
		/* part of a response went out already: only a cut is honest */
		conn_cut(c, reason);
		return;
	}

	if (ans != NULL) {
		/* a stage's own answer (an MCP tool refused: JSON-RPC) */
		o = NULL;
		status = c->c_x->x_answer_status;
		c->c_x->x_status = status;
		ctype = c->c_x->x_answer_type;
		nl = 0;
		blen = evbuffer_get_length(ans);
		body = blen > 0 ? (const char *)evbuffer_pullup(ans, -1) : "";
		goto head;
	}
	/* on a metered rule, the provider's error shape (SDKs read it) */
	if ((o = bud_error_body(c->c_x->x_rule_p != NULL ?
	    (int)c->c_x->x_rule_p->r_meter : CFG_METER_NONE, status, code,
	    reason, c->c_x->x_id)) == NULL) {
		o = json_object_new_object();
		json_object_object_add(o, "error",
		    json_object_new_string(code));
		json_object_object_add(o, "reason",
		    json_object_new_string(reason));
		json_object_object_add(o, "request_id",
		    json_object_new_string(c->c_x->x_id));
		/* the allowlist refused it: the rule that would allow it */
		if (why == AUD_R_DENIED && c->c_x->x_hint[0] != '\0')
			json_object_object_add(o, "rule_hint",
			    json_object_new_string(c->c_x->x_hint));
	}
	body = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	blen = strlen(body);
head:
	if (status == 407)
		snprintf(extra, sizeof(extra),
		    "Proxy-Authenticate: Basic realm=\"airlock\"\r\n");
	else if (status == 429 && c->c_x->x_bud.b_retry_after > 0)
		snprintf(extra, sizeof(extra), "Retry-After: %d\r\n",
		    c->c_x->x_bud.b_retry_after);
	else
		extra[0] = '\0';
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: %s\r\n"
	    "Content-Length: %zu\r\n"
	    "X-Airlock-Request-Id: %s\r\n"
	    "Cache-Control: no-store\r\n"
	    "%s%s%s\r\n",
	    status, http_reason_phrase(status), ctype, blen + nl, c->c_x->x_id,
	    extra,
	    close ? "Connection: close\r\n" : "",
	    /* the stream's side reshapes it for gRPC (h2/h2_stream.c) */
	    c->c_http2 ? H2_GATEWAY_FIELD ": 1\r\n" : "");
	evbuffer_add(out, body, blen);
	evbuffer_add(out, "\n", nl);
	json_object_put(o);
	c->c_x->x_bytes_in += evbuffer_get_length(out);
	bufferevent_write_buffer(c->c_bev, out);
	c->c_r.r_resp_started = 1;
	c->c_r.r_resp_done = 1;
	c->c_r.r_req_done = !close;
	c->c_r.r_keepalive = c->c_r.r_keepalive && !close;
	conn_request_finished(c);
}

void
conn_refuse(struct conn *c, const char *reason)
{
	c->c_x->x_allowed = 0;
	snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%.500s", reason);
	log_info("%s: %s%s", c->c_client, c->c_transparent ?
	    "transparent: " : "", reason);
	conn_close(c, AUD_R_REFUSED);
}

/*
 * The head went out and the body will not be whole. Where the client's
 * body ends at the close (HTTP/1.0 without a length) a FIN would read as
 * the end of a complete body: reset instead (SO_LINGER 0), so the client
 * sees an error. Elsewhere the missing bytes or last chunk say it, and
 * a FIN keeps what was already sent.
 */
void
conn_cut(struct conn *c, const char *reason)
{
	struct bufferevent	*raw = bufferevent_get_underlying(c->c_bev);
	struct linger		 l = { 1, 0 };
	evutil_socket_t		 fd;

	snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%s", reason);
	fd = bufferevent_getfd(raw != NULL ? raw : c->c_bev);
	if (c->c_r.r_close_delim && !c->c_r.r_resp_done && fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	conn_close(c, AUD_R_CUT);
}

void
conn_idle_end(struct conn *c)
{
	const char	*why = "idle timeout";

	if (c->c_state == CONN_FORWARD && c->c_r.r_resp_started &&
	    !c->c_r.r_resp_done)
		why = evbuffer_get_length(bufferevent_get_output(c->c_bev)) > 0 ?
		    "client stopped reading mid-response (idle timeout)" :
		    "upstream stalled mid-response (idle timeout)";
	else if (c->c_state == CONN_FORWARD || c->c_state == CONN_BODY_BUFFER)
		why = "client stalled mid-request (idle timeout)";
	if (c->c_state == CONN_FORWARD && c->c_r.r_resp_started)
		conn_cut(c, why);
	else {
		snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason), "%s", why);
		conn_close(c, AUD_R_IDLE_TIMEOUT);
	}
}

void
conn_audit(struct conn *c)
{
	struct aud_rec	 r;
	struct usage	 u;
	struct conn_req	*q = &c->c_r;
	struct xchg	*x = c->c_x;
	uint64_t	 dur_us;

	if (!x->x_active)
		return;
	x->x_active = 0;
	memset(&r, 0, sizeof(r));
	r.ar_cost_micro = -1;
	r.ar_start_wall_ms = x->x_start_wall;
	r.ar_id = x->x_id;
	r.ar_sandbox = c->c_sbx ? c->c_sbx->sb_id : NULL;
	r.ar_client = c->c_client;
	r.ar_mode = c->c_socks5 ? "socks5" : c->c_transparent ?
	    "transparent" : "explicit";
	r.ar_proto = x->x_proto;
	r.ar_method = x->x_method[0] ? x->x_method : NULL;
	r.ar_host = x->x_host[0] ? x->x_host : NULL;
	r.ar_port = x->x_port;
	r.ar_path = q->r_connect ? NULL : x->x_path;
	r.ar_status = x->x_status;
	r.ar_decision = x->x_allowed ? "allow" : "deny";
	r.ar_reason = x->x_reason[0] ? x->x_reason : NULL;
	r.ar_rule = x->x_rule[0] ? x->x_rule : NULL;
	r.ar_would_deny = x->x_would_deny[0] ? x->x_would_deny : NULL;
	if (x->x_sec.s_req != NULL) {
		r.ar_secrets = sec_req_names(x->x_sec.s_req,
		    &r.ar_nsecrets);
		r.ar_secrets_at = sec_req_names_at(x->x_sec.s_req,
		    &r.ar_nsecrets_at);
	}
	r.ar_bytes_in = (int64_t)x->x_bytes_in;
	r.ar_bytes_out = (int64_t)x->x_bytes_out;
	dur_us = util_now_us() - x->x_start_us;
	r.ar_duration_ms = (int64_t)(dur_us / 1000);
	r.ar_upstream = x->x_upstream[0] ? x->x_upstream : NULL;
	r.ar_via = x->x_via[0] ? x->x_via : NULL;
	r.ar_country = x->x_country[0] ? x->x_country : NULL;
	r.ar_asn = x->x_asn;
	r.ar_tls = x->x_tls;
	r.ar_http = c->c_http2 ? "2" : NULL;
	conn_pipe_done(c, &r, &u, dur_us);
}

/*
 * limits.shutdown_grace is over: every connection still open ends here,
 * each exchange under way audited and its budget settled (conn_audit),
 * as if it had been cut (a timer of the worker: no callback of these
 * connections is on the stack, so each is freed at once).
 */
void
conn_close_all(struct worker *w, enum aud_reason why)
{
	struct conn	*c, *next;

	for (c = TAILQ_FIRST(&w->w_conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, c_entry);
		if (c->c_x->x_active && c->c_x->x_reason[0] == '\0')
			snprintf(c->c_x->x_reason, sizeof(c->c_x->x_reason),
			    "%s", aud_reason(why)->ri_text);
		conn_close(c, why);
	}
}
