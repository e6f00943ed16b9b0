/*
 * Secrets plane: real credentials live only here, in locked memory, and
 * are attached to requests as they leave, only towards each secret's own
 * hosts. Three parts:
 *   sec_store.c  values from env:/file:/exec:/literal: sources, mlock'd,
 *                wiped on replace/exit, exec: sources refreshed
 *   sec_sigv4.c  AWS Signature Version 4 (pure)
 *   sec_scan.c   streaming multi-pattern replacer (reflection guard, pure)
 *   sec_encode.c the encoded forms of a value the guard looks for
 * and sec_inject.c (the pipeline stage, written against conn).
 */
#ifndef AIRLOCK_SEC_H
#define AIRLOCK_SEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

struct cfg;
struct evbuffer;

/* ---- values ---------------------------------------------------------- */

/*
 * One value of one secret, immutable, reference counted. The bytes live in
 * their own mmap'd, mlock'd, MADV_DONTDUMP pages and are wiped
 * (OPENSSL_cleanse) before they are unmapped at the last unref.
 */
struct sec_val {
	int		 sv_refs;	/* atomic */
	size_t		 sv_len;
	size_t		 sv_maplen;
	char		 sv_data[];	/* sv_len bytes + NUL */
};

/* An empty value with room for <cap> bytes and a NUL, or NULL. */
struct sec_val	*sec_val_new(size_t cap);
struct sec_val	*sec_val_ref(struct sec_val *);
void		 sec_val_unref(struct sec_val *);	/* NULL ok */

struct sec_store;

/*
 * Load the value of every secret of <cfg> (cfg->c_secrets) from its source.
 * Each problem goes to <errs> as "FILE:LINE:COL: message" at the secret's
 * position, never with a value; returns NULL if any secret could not be
 * loaded. exec: sources with refresh get re-run by a background thread of
 * the store every refresh interval; on failure the last good value stays
 * and the error is logged (without value). Thread-safe.
 */
struct sec_store *sec_store_new(const struct cfg *, FILE *errs);
/* Stops the refresh thread, wipes and frees every value. NULL ok. */
void		 sec_store_free(struct sec_store *);
/* Current value of secret <idx> (index in cfg->c_secrets): new ref. */
struct sec_val	*sec_store_get(struct sec_store *, size_t idx);
/* Number of successful loads/refreshes of <idx> (tests, metrics). */
uint64_t	 sec_store_generation(struct sec_store *, size_t idx);

/*
 * Token brokers (sec_broker.h). A broker secret's value is its current
 * token, handed out only before it expires. pending: no usable token and
 * a mint under way (or not begun yet): wait for it with watch (1: nothing
 * to wait for; else <ev> is made active, from the mint's thread, when a
 * mint ends; unwatch before freeing it) or, where nothing can wait, wait
 * (blocks at most <ms>). why: the failure that left it without a token,
 * or "" (never a value).
 */
struct event;
int		 sec_store_pending(struct sec_store *, size_t idx);
int		 sec_store_watch(struct sec_store *, size_t idx, struct event *);
void		 sec_store_unwatch(struct sec_store *, struct event *);
void		 sec_store_wait(struct sec_store *, size_t idx, uint64_t ms);
void		 sec_store_why(struct sec_store *, size_t idx, char *, size_t);
/* The token a broker secret had before, while it is valid (new ref). */
struct sec_val	*sec_store_prev(struct sec_store *, size_t idx);
/* airlockd -t: stores made after this never reach a token endpoint. */
void		 sec_store_no_mint(void);

/* Process hardening: PR_SET_DUMPABLE 0 and RLIMIT_CORE 0. */
void		 sec_harden_process(void);

/* ---- AWS SigV4 ------------------------------------------------------- */

struct sigv4_header {
	const char	*name;		/* as sent; any case */
	size_t		 name_len;
	const char	*value;		/* raw; trimmed and space-folded by
					   the signer */
	size_t		 value_len;
};

struct sigv4_req {
	const char		*method;
	const char		*path;		/* as it goes on the wire */
	const char		*query;		/* raw, without '?', or NULL */
	const struct sigv4_header *headers;	/* every header to sign; must
						   include Host */
	size_t			 nheaders;
	const char		*payload_hash;	/* lowercase hex SHA-256 of the
						   body, or "UNSIGNED-PAYLOAD" */
	const char		*region;
	const char		*service;
	const char		*access_key;
	const char		*secret_key;
	const char		*session_token;	/* NULL if none */
	time_t			 when;
	int			 normalize_path;/* 0 for s3 (path as is) */
	int			 add_content_sha256; /* sign and add
						   x-amz-content-sha256 */
};

/* Everything sigv4_sign() produces (NUL-terminated strings). */
struct sigv4_out {
	char	 amz_date[17];		/* X-Amz-Date: 20150830T123600Z */
	char	 authorization[1024];	/* Authorization value */
	char	*canonical_request;	/* heap, for tests; caller frees */
	char	*string_to_sign;	/* heap, for tests; caller frees */
};

/*
 * Sign <r>: canonical request (URI-encoded path, normalised unless
 * !normalize_path; sorted, encoded query; lowercase sorted header names
 * with trimmed, space-folded values, duplicates joined with ","; signed
 * headers also include x-amz-date, x-amz-security-token when a session
 * token is given, x-amz-content-sha256 when add_content_sha256), string to
 * sign, signing key, signature. Returns 0 or -1.
 */
int	sigv4_sign(const struct sigv4_req *, struct sigv4_out *);
void	sigv4_out_fini(struct sigv4_out *);

/* ---- reflection guard ------------------------------------------------ */

struct sec_scan;

/*
 * A streaming replacer for a fixed set of byte patterns (secret values and
 * the encodings that were sent, e.g. the Basic base64). Matches spanning
 * feed boundaries are found; output never contains a pattern. Pending
 * bytes (a possible match prefix) are held, at most the longest pattern
 * minus one, and wiped when released.
 */
struct sec_scan	*sec_scan_new(void);
/*
 * A new scanner with the patterns (and the built automaton) of <sc>,
 * shared read-only, and a stream state of its own; either may be used
 * from another thread. Adding a pattern to either copies first.
 */
struct sec_scan	*sec_scan_share(struct sec_scan *);
/* Borrow nothing: pattern and replacement are copied. */
void	 sec_scan_add(struct sec_scan *, const char *pat, size_t patlen,
	    const char *repl, size_t repllen);
size_t	 sec_scan_npatterns(const struct sec_scan *);
/* Scanned bytes go to <out>; returns the number of replacements. */
size_t	 sec_scan_feed(struct sec_scan *, const char *, size_t,
	    struct evbuffer *out);
/* End of stream: flush held bytes; returns the replacements among them. */
size_t	 sec_scan_finish(struct sec_scan *, struct evbuffer *out);
/* Replace in a whole string (headers); returns a new heap string. */
char	*sec_scan_string(struct sec_scan *, const char *, size_t,
	    size_t *outlen, size_t *nrepl);
void	 sec_scan_free(struct sec_scan *);

/* ---- encodings (sec_encode.c) ---------------------------------------- */

/*
 * Add <pat> as it is and, when <min_run> > 0, each of its runs of
 * <min_run> bytes, all replaced by <repl>. Copies what it needs.
 */
void	 sec_scan_add_runs(struct sec_scan *, const char *pat, size_t len,
	    size_t min_run, const char *repl, size_t rlen);
/*
 * Add every form of value <v> an upstream may send back (raw; percent-
 * encoded with the common encoders' safe sets, either hex case, '+' for
 * space, once and twice; JSON-escaped plainly, with "\/", and with
 * "\u00XX" for every ASCII non-alphanumeric in either case; base64 and
 * base64url, padded, unpadded and at the three offsets inside a longer
 * encoding), each with its runs of <min_run> bytes (0 = whole forms only).
 */
void	 sec_scan_add_forms(struct sec_scan *, const char *v, size_t len,
	    size_t min_run, const char *repl, size_t rlen);

#endif
