/*
 * Why an exchange ended: one table (Varnish include/tbl/sess_close.h,
 * HAProxy's termination states) feeding the gateway's own answers (status
 * and SPEC error code), the audit record's decision, and the "reason"
 * label of airlock_requests_total.
 *
 *	X(NAME, code, status, decision, text)
 *
 * <code> is SPEC's error code, NULL for an end the gateway did not answer
 * (the upstream answered, the client left, a cut); <status> the status of
 * the gateway's answer, 0 without one; <decision> AUD_D_DENY when the
 * answer is a refusal (the audit record says "deny"), AUD_D_KEEP when the
 * exchange's decision so far stands (an allowed request whose upstream
 * failed stays "allow"; denied and budget_exceeded keep it too, as
 * their audit records always did: a 402 for a response that would pass a
 * bytes cap, or a WebSocket upgrade refused after the rule matched, are
 * audited "allow" with that code, the refusals before are "deny" set by
 * their callers); <text> the reason given when the caller has no
 * more precise one.
 */
#ifndef AIRLOCK_AUD_REASONS_H
#define AIRLOCK_AUD_REASONS_H

#include <stddef.h>

#define AUD_REASONS(X)							\
	X(NONE, NULL, 0, AUD_D_KEEP, "")				\
	/* the gateway answers (SPEC "Status codes") */			\
	X(DENIED, "denied", 403, AUD_D_KEEP, "no rule allows it")	\
	X(SECRET_MISUSE, "secret_misuse", 403, AUD_D_DENY,		\
	    "a secret's placeholder towards a host it is not bound to")	\
	X(ENCODED_BODY_REFUSED, "encoded_body_refused", 415, AUD_D_DENY,\
	    "compressed request body towards a secret's host")		\
	X(SECRET_UNAVAILABLE, "secret_unavailable", 502, AUD_D_KEEP,	\
	    "a secret (or a minted token) could not be obtained")	\
	X(BUDGET_EXCEEDED, "budget_exceeded", 402, AUD_D_KEEP,		\
	    "a cap of the sandbox is spent")				\
	X(BUDGET_UNAVAILABLE, "budget_unavailable", 503, AUD_D_KEEP,	\
	    "the shared budget store did not answer")			\
	X(PROXY_AUTH_REQUIRED, "proxy_auth_required", 407, AUD_D_DENY,	\
	    "proxy credentials required")				\
	X(RATE_LIMITED, "rate_limited", 429, AUD_D_DENY,		\
	    "request rate cap")						\
	X(BAD_REQUEST, "bad_request", 400, AUD_D_KEEP,			\
	    "malformed or ambiguous HTTP")				\
	X(HEADERS_TOO_LARGE, "headers_too_large", 431, AUD_D_KEEP,	\
	    "header block too large")					\
	X(BODY_TOO_LARGE, "body_too_large", 413, AUD_D_KEEP,		\
	    "request body too large")					\
	X(URI_TOO_LONG, "uri_too_long", 414, AUD_D_KEEP,		\
	    "request target too long")					\
	X(REQUEST_TIMEOUT, "request_timeout", 408, AUD_D_KEEP,		\
	    "request not received in time")				\
	X(NOT_IMPLEMENTED, "not_implemented", 501, AUD_D_KEEP,		\
	    "method is not relayed")					\
	X(VERSION_NOT_SUPPORTED, "version_not_supported", 505,		\
	    AUD_D_KEEP, "HTTP version not supported")			\
	X(UPSTREAM_UNREACHABLE, "upstream_unreachable", 502, AUD_D_KEEP,\
	    "upstream unreachable")					\
	X(UPSTREAM_TLS_FAILED, "upstream_tls_failed", 502, AUD_D_KEEP,	\
	    "upstream certificate not valid for the host")		\
	X(UPSTREAM_TIMEOUT, "upstream_timeout", 504, AUD_D_KEEP,	\
	    "upstream did not answer in time")				\
	X(UPSTREAM_ENCODED_BODY, "upstream_encoded_body", 502,		\
	    AUD_D_KEEP, "encoded response to a secret-bearing request")	\
	X(AUDIT_UNAVAILABLE, "audit_unavailable", 503, AUD_D_KEEP,	\
	    "the audit log cannot be written")				\
	X(OVERLOADED, "overloaded", 503, AUD_D_KEEP,			\
	    "connection or file-descriptor limits reached")		\
	X(APPROVAL_DENIED, "approval_denied", 403, AUD_D_DENY,		\
	    "an operator denied the request")				\
	X(APPROVAL_TIMEOUT, "approval_timeout", 403, AUD_D_DENY,	\
	    "no operator decided in time")				\
	/* answered 200 with JSON-RPC errors (policy/pol_mcp.c) */	\
	X(MCP_TOOL_DENIED, "mcp_tool_denied", 403, AUD_D_DENY,		\
	    "an MCP tool the rule does not allow")			\
	X(MCP_UNREADABLE, "mcp_unreadable", 400, AUD_D_DENY,		\
	    "not a JSON-RPC message for an mcp rule")			\
	X(MCP_UNFILTERABLE, NULL, 0, AUD_D_KEEP,			\
	    "mcp_unfilterable")						\
	/* ends without an answer of ours */				\
	X(DONE, NULL, 0, AUD_D_KEEP, "")				\
	X(CLIENT_CLOSED, NULL, 0, AUD_D_KEEP, "client closed")		\
	X(UPSTREAM_CLOSED, NULL, 0, AUD_D_KEEP, "upstream closed")	\
	X(IDLE_TIMEOUT, NULL, 0, AUD_D_KEEP, "idle timeout")		\
	X(CUT, NULL, 0, AUD_D_KEEP, "response cut short")		\
	X(WS_SECRET_MISUSE, NULL, 0, AUD_D_DENY,			\
	    "ws_secret_misuse")						\
	X(BUDGET_CUT, NULL, 0, AUD_D_KEEP, "budget_cut")		\
	X(BUDGET_CLAMPED, NULL, 0, AUD_D_KEEP, "budget_clamped")	\
	X(REFUSED, NULL, 0, AUD_D_DENY, "connection refused")		\
	X(REVOKED, NULL, 0, AUD_D_KEEP, "sandbox deleted")		\
	X(TLS_FAILED, NULL, 0, AUD_D_KEEP, "TLS handshake failed")	\
	X(SHUTDOWN, NULL, 0, AUD_D_KEEP,				\
	    "gateway shutting down (shutdown_grace over)")

enum aud_decision {
	AUD_D_KEEP = 0,		/* the exchange's decision stands */
	AUD_D_DENY,
};

enum aud_reason {
#define AUD_R_ENUM(name, code, status, decision, text)	AUD_R_##name,
	AUD_REASONS(AUD_R_ENUM)
#undef AUD_R_ENUM
	AUD_R_COUNT,
};

struct aud_reason_info {
	const char		*ri_name;	/* "DENIED" */
	const char		*ri_code;	/* SPEC code or NULL */
	int			 ri_status;	/* 0: no answer of ours */
	enum aud_decision	 ri_decision;
	const char		*ri_text;
};

/* The row of <r>; an out-of-range value reads as AUD_R_NONE. */
const struct aud_reason_info *aud_reason(enum aud_reason r);
/* Its SPEC error code, or NULL. */
const char	*aud_reason_code(enum aud_reason r);

#endif
