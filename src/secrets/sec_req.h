/*
 * Inside secrets/ only: what one request involves (sec_inject.h keeps it
 * opaque for the connection, which goes through its accessors).
 */
#ifndef AIRLOCK_SEC_REQ_H
#define AIRLOCK_SEC_REQ_H

#include "secrets/sec_inject.h"

struct sec_req {
	struct sec_scan	*sr_subst;	/* placeholder -> value, or NULL */
	struct sec_scan	*sr_subst_path;	/* placeholder -> encoded value */
	struct sec_scan	*sr_reflect;	/* value/encodings -> redacted */
	struct sec_val	*sr_vals[SEC_REQ_MAX];	/* refs held */
	size_t		 sr_nvals;
	const char	*sr_names[SEC_REQ_MAX];	/* attached, for the audit */
	int		 sr_where[SEC_REQ_MAX];	/* CFG_PH_*: where each went */
	size_t		 sr_nnames;
	char		*sr_at[SEC_REQ_MAX * 5];	/* "name@where", audit */
	size_t		 sr_nat;
	const char	*sr_drop[SEC_REQ_MAX + 16];	/* header names replaced
							   or removed */
	size_t		 sr_ndrop;
	struct evbuffer	*sr_add;	/* header lines we add */
	char		*sr_query;	/* rewritten query, or NULL */
	char		*sr_path;	/* path with placeholders replaced, or
					   NULL */
	int		 sr_sigv4;	/* index+1 of the SigV4 secret */
	struct sec_val	*sr_sigv4_val;	/* its value (one of sr_vals) */
	int		 sr_need_body;	/* SigV4 wants the body's SHA-256 */
	int		 sr_carries;	/* a value goes out with the request
					   (else the scanner only guards
					   against stored values) */
	size_t		 sr_min_run;	/* cfg reflect_min_run */
};

/* sec_inject.c, for sec_body.c */
struct cfg_secret;
struct sec_req	*sec_req_get(struct sec_req **, const struct cfg *);
/* A reference to secret <idx>'s value held for the request, or NULL. */
struct sec_val	*sec_req_hold(struct sec_req *, const struct cfg *, size_t idx);
int		 sec_bound(const struct cfg_secret *, const char *host);
/* May its placeholder be replaced in a body towards a bound host over
 * this transport (sec_body.c)? */
int		 sec_body_allowed(const struct cfg_secret *, int tls);

#endif
