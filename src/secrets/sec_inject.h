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
struct cfg_rule;
struct http_msg;
struct evbuffer;
struct sec_scan;
struct sec_val;

#define SEC_REQ_MAX	8	/* secrets one request can involve */

struct sec_req {
	struct sec_scan	*sr_subst;	/* placeholder -> value, or NULL */
	struct sec_scan	*sr_reflect;	/* value/encodings -> redacted */
	struct sec_val	*sr_vals[SEC_REQ_MAX];	/* refs held */
	size_t		 sr_nvals;
	const char	*sr_names[SEC_REQ_MAX];	/* attached, for the audit */
	size_t		 sr_nnames;
	const char	*sr_drop[SEC_REQ_MAX + 4];	/* header names replaced */
	size_t		 sr_ndrop;
	struct evbuffer	*sr_add;	/* header lines we add */
	char		*sr_query;	/* rewritten query, or NULL */
	char		*sr_path;	/* path with placeholders replaced, or
					   NULL */
	int		 sr_sigv4;	/* index+1 of the SigV4 secret */
	struct sec_val	*sr_sigv4_val;	/* its value (one of sr_vals) */
	int		 sr_need_body;	/* SigV4 wants the body's SHA-256 */
};

enum sec_verdict {
	SEC_OK = 0,
	SEC_MISUSE,		/* a placeholder towards an unbound host */
	SEC_ERROR,		/* a value is unavailable */
};

/* What the stage needs to know about the request. */
struct sec_facts {
	const struct cfg	*sf_cfg;
	const struct cfg_rule	*sf_rule;	/* the matching rule */
	const struct http_msg	*sf_msg;	/* the request head */
	const char		*sf_host;	/* normalised destination */
	const char		*sf_path;
	const char		*sf_query;	/* raw, or NULL */
};

/*
 * Decide for one request. On SEC_OK, *out is NULL when no secret is
 * involved, else a new sec_req (sec_req_free()). On SEC_MISUSE/ERROR
 * <reason> names the secret, never a value.
 */
enum sec_verdict sec_req_prepare(const struct sec_facts *,
	    struct sec_req **out, char *reason, size_t reasonsz);
void	sec_req_free(struct sec_req *);

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

#endif
