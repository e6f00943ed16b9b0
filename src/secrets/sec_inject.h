/*
 * The secrets stage of the request pipeline. For one request it decides,
 * from the matching rule and the destination host, which secrets go out
 * and how, checks placeholders (misuse towards other hosts is refused),
 * and carries what the header writer and the response path need:
 * substitutions, headers to drop and add, SigV4 signing, and a scanner
 * that redacts reflected values from the response.
 */
#ifndef AIRLOCK_SEC_INJECT_H
#define AIRLOCK_SEC_INJECT_H

#include <stddef.h>
#include <stdint.h>

struct cfg;
struct cfg_secret;
struct cfg_rule;
struct http_msg;
struct hw_rewrite;
struct evbuffer;
struct sec_scan;
struct sec_val;

#define SEC_REQ_MAX	8	/* secrets one request can involve */

/* What one request involves; opaque outside secrets/ (sec_req.h). */
struct sec_req;

enum sec_verdict {
	SEC_OK = 0,
	SEC_MISUSE,		/* a placeholder towards an unbound host */
	SEC_ERROR,		/* a value is unavailable */
	SEC_WAIT,		/* a token is being minted: *wait_idx */
};

/* What the stage needs to know about the request. */
struct sec_facts {
	const struct cfg	*sf_cfg;
	const struct cfg_rule	*sf_rule;	/* the matching rule */
	const struct http_msg	*sf_msg;	/* the request head */
	const char		*sf_host;	/* normalised destination */
	const char		*sf_path;
	const char		*sf_query;	/* raw, or NULL */
	int			 sf_tls;	/* the upstream is reached over
						   TLS whose certificate is
						   verified */
	size_t			 sf_wait_idx;	/* out, SEC_WAIT: the secret */
	int			 sf_body_kind;	/* SEC_BODY_*: placeholders are
						   replaced in the body, else
						   -1 */
	struct sec_body		*sf_body;	/* out, SEC_OK: that, or NULL */
};

/*
 * Decide for one request. On SEC_OK, *out is NULL when no secret is
 * involved, else a new sec_req (sec_req_free()): one that carries values
 * (sr_carries), or only the scanner for the values bound to the host
 * (stored reflection). SEC_WAIT: a token broker secret it needs has no
 * token yet, one is being minted (sf_wait_idx; sec_store_watch).
 * SEC_MISUSE: a placeholder towards an unbound host,
 * or a value that would go over plain HTTP without allow_plaintext. On
 * SEC_MISUSE/ERROR <reason> names the secret, never a value.
 */
enum sec_verdict sec_req_prepare(struct sec_facts *,
	    struct sec_req **out, char *reason, size_t reasonsz);
void	sec_req_free(struct sec_req *);

/* The accessors the connection uses (all take NULL: no secrets). */
/* The path and query going upstream: placeholders replaced, else <dflt>. */
const char *sec_req_path(const struct sec_req *, const char *dflt);
const char *sec_req_query(const struct sec_req *, const char *dflt);
/* Does SigV4 sign this request? Its secret's name, or NULL. */
const char *sec_req_sigv4_name(const struct sec_req *, const struct cfg *);
/*
 * The secrets' rewriter of the request head going upstream
 * (http/http_write.h): the fields they replace dropped, placeholders in
 * values substituted (bound hosts only), their fields added. Fills <rw>;
 * 0 when there is nothing to rewrite (<sr> NULL).
 */
int	sec_req_rewriter(const struct sec_req *, struct hw_rewrite *rw);
/* The scanner redacting reflected values from the response, or NULL. */
struct sec_scan *sec_req_reflector(const struct sec_req *);
/* The names of the secrets attached, for the audit (borrowed). */
const char *const *sec_req_names(const struct sec_req *, size_t *n);
/* The same with where each went, "name@header" (header, query, path,
 * body), for the audit's secrets_at (borrowed, until the next call). */
const char *const *sec_req_names_at(struct sec_req *, size_t *n);
/* Secret <name> (the cfg's string) went out in <where> (CFG_PH_*). */
void	sec_req_mark(struct sec_req *, const char *name, int where);

/*
 * The response scanner for the secrets <idx>[0..n) with values <vals>:
 * every form of each (and its runs of <min_run> bytes), shared with the
 * other requests of the same secrets and values, a stream state of its
 * own. Borrows the values. sec_reflect_flush() empties the cache.
 */
struct sec_scan	*sec_reflect_scanner(const struct cfg *, const size_t *idx,
	    struct sec_val *const *vals, size_t n, size_t min_run);
void	sec_reflect_flush(void);

/* Is <host> one of some secret's hosts (its responses are scanned)? */
int	sec_host_bound(const struct cfg *, const char *host);

/* Is header <name> one the stage replaces (drop it from the request)? */
int	sec_req_drops(const struct sec_req *, const char *name, size_t len);

/*
 * SigV4: sign once the payload hash is known (the SHA-256 of <body>, the
 * whole buffered body or NULL for none; UNSIGNED-PAYLOAD for S3) and add
 * the signature headers.
 * <host_header> is the Host value that goes upstream; <path> and <query>
 * as sent. Returns 0 or -1.
 */
int	sec_req_sign(struct sec_req *, const struct cfg *, const char *method,
	    const char *host_header, const char *path, const char *query,
	    const struct http_msg *, struct evbuffer *body);

/* ---- tripwire (sec_trip.c) ---- */

/*
 * Does the request carry placeholder <ph> anywhere in its head: any case,
 * percent-decoded once or twice, JSON-unescaped, inside Basic credentials,
 * split across two adjacent header fields? <path>, <query> may be NULL.
 * Returns where (CFG_PH_HEADER | CFG_PH_PATH | CFG_PH_QUERY), 0: nowhere.
 */
int	sec_trip_sent(const struct http_msg *, const char *path,
	    const char *query, const char *ph);
/* New "Basic ..." value with <subst> applied inside, or NULL. */
char	*sec_trip_basic_subst(const struct http_msg *, struct sec_scan *);
/*
 * The body tripwire towards <host>: the placeholders of the secrets not
 * bound to it, looked for in the body decoded as it streams (JSON escapes,
 * percent-escapes twice, any letter case). NULL when there are none.
 */
struct sec_trip;
struct sec_trip	*sec_trip_body_new(const struct cfg *, const char *host,
	    int tls);
struct sec_trip	*sec_trip_new(void);
void	sec_trip_add(struct sec_trip *, const char *ph);
/* Feed body bytes (<sink> is scratch); returns 1 once one was seen. */
int	sec_trip_feed(struct sec_trip *, const char *, size_t,
	    struct evbuffer *sink);
/*
 * Bytes the tripwire let by, kept back until nothing after them could
 * complete a placeholder (at most 30 bytes per placeholder byte, its
 * widest disguise): what may go on moves to <out> (all of it at <eof>);
 * returns how much.
 */
size_t	sec_trip_hold(struct sec_trip *, const char *, size_t, int eof,
	    struct evbuffer *out);
void	sec_trip_free(struct sec_trip *);	/* NULL ok */

/* ---- request bodies (sec_body.c) ---- */

/*
 * The placeholder substitution of a request body: each secret added is a
 * placeholder and its value, encoded for the body's kind (sec_body_kind()
 * of its Content-Type). Streams: a placeholder split across chunks is
 * found; at most sec_body_lookbehind() bytes are kept back until <eof>.
 */
enum { SEC_BODY_RAW = 0, SEC_BODY_JSON, SEC_BODY_FORM };
struct sec_body;
int	 sec_body_kind(const char *ctype, size_t len);	/* NULL ok */
struct sec_body	*sec_body_new(int kind);
/* Copies <ph> and the value; <name> is borrowed. -1: too many. */
int	 sec_body_add(struct sec_body *, const char *name, const char *ph,
	    const char *val, size_t vlen);
void	 sec_body_feed(struct sec_body *, const char *, size_t, int eof,
	    struct evbuffer *out);
size_t	 sec_body_lookbehind(const struct sec_body *);
size_t	 sec_body_count(const struct sec_body *);	/* NULL ok */
/* Secret <i>'s replacements so far, and its name. */
size_t	 sec_body_hits(const struct sec_body *, size_t i, const char **name);
void	 sec_body_free(struct sec_body *);		/* NULL ok */
/* Does a request towards <host> have placeholders replaced in its body? */
int	 sec_body_wanted(const struct cfg *, const char *host, int tls);
/* Its substitution: the values held by *srp (made when needed); NULL
 * when none, or a value is missing (it is then not replaced). */
struct sec_body	*sec_req_body_new(struct sec_req **srp, const struct cfg *,
	    const char *host, int tls, int kind);
/* The same for where a placeholder lands (<where> a CFG_PH_* bit: body,
 * WebSocket frames), of SEC_BODY_* <kind>; sec_ph_allowed: may secret <s>
 * be replaced there, over TLS or (allow_plaintext) not. */
struct sec_body	*sec_subst_new(struct sec_req **srp, const struct cfg *,
	    const char *host, int tls, int where, int kind);
int	 sec_ph_allowed(const struct cfg_secret *, int tls, int where);

#endif
