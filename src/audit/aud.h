/*
 * Audit plane: one JSON line per request, tunnel or refused connection.
 * Workers build a record and hand it to one writer thread, which orders
 * the lines, chains their hashes (audit.hash_chain) and writes them.
 */
#ifndef AIRLOCK_AUD_H
#define AIRLOCK_AUD_H

#include <stdint.h>
#include <stdio.h>

struct cfg;
struct usage;

/* Everything a record can say; NULL/-1 fields are left out. */
struct aud_rec {
	uint64_t	 ar_start_wall_ms;
	const char	*ar_id;
	const char	*ar_sandbox;
	const char	*ar_client;	/* IP:PORT */
	const char	*ar_mode;	/* explicit|transparent */
	const char	*ar_proto;	/* http|https|tunnel|dns */
	const char	*ar_method;
	const char	*ar_host;
	int		 ar_port;	/* -1: absent */
	const char	*ar_path;	/* without query */
	int		 ar_status;	/* -1: absent (e.g. tunnel) */
	const char	*ar_decision;	/* allow|deny */
	const char	*ar_reason;
	const char	*ar_rule;	/* POLICY#INDEX */
	const char	*ar_would_deny;	/* report mode: the refusal, or NULL */
	const char *const *ar_secrets;	/* names attached, never values */
	size_t		 ar_nsecrets;
	int64_t		 ar_bytes_in;	/* -1: absent */
	int64_t		 ar_bytes_out;
	int64_t		 ar_duration_ms;
	const char	*ar_upstream;	/* IP:PORT */
	const char	*ar_via;	/* parent proxy URL, NULL direct */
	const char	*ar_tls;	/* intercept|splice|none */
	const char	*ar_http;	/* "2" for an HTTP/2 stream, or NULL */
	const struct usage *ar_usage;	/* metered usage, or NULL */
	int64_t		 ar_cost_micro;	/* -1: absent */
	int		 ar_unpriced;	/* no price matched the model */
	int		 ar_unmetered;	/* a complete 2xx that reported no
					   usage: charged its reservation */
	int		 ar_usage_partial; /* it reported some, not all */
	const char	*ar_country;	/* GeoIP of the upstream, or NULL */
	uint32_t	 ar_asn;	/* 0: absent */
	const char	*ar_dns_type;	/* DNS stub: query type, "A", "MX",
					   "TYPE65" (RFC 3597) */
	const char	*ar_dns_rcode;	/* DNS stub: NOERROR|NXDOMAIN|... */
	const char	*ar_dns_answer;	/* DNS stub: synthetic address given */
	const char	*ar_mcp_method;	/* an mcp rule's JSON-RPC method, or
					   "batch"; NULL: no "mcp" object */
	const char	*ar_mcp_tool;	/* tools/call: the tool, or NULL */
};

/*
 * Open the audit file of <cfg> and start the writer. With hash_chain the
 * chain continues from the last line already in the file. Returns 0 or -1
 * (logged).
 */
int	aud_start(const struct cfg *);
/* Borrow <rec>; the line is built now and written by the writer. */
void	aud_submit(const struct aud_rec *);
/* SIGUSR1: reopen the file (log rotation). Async-signal unsafe: call from
 * the main loop. */
void	aud_reopen(void);
/* Flush everything queued, stop the writer, close. */
void	aud_stop(void);
/* Lines dropped or failed since start (for metrics and tests). */
uint64_t aud_write_errors(void);

/*
 * 1 while records can be written; 0 after a write failed (disk full, file
 * or directory gone) until a retry succeeds. Workers refuse new requests
 * with 503 audit_unavailable meanwhile (fail closed).
 */
int	aud_available(void);

/* Result of checking a hash-chained audit file. */
struct aud_verify {
	uint64_t	 av_lines;	/* lines read */
	uint64_t	 av_bad_line;	/* 1-based first bad line; 0 = OK */
	char		 av_why[256];	/* what is wrong with it */
	char		 av_first_prev[65];	/* "prev" of the first line */
	char		 av_last_hash[65];	/* "hash" of the last good line */
};

/*
 * Check the chain of <in>: each line's hash over its bytes without the
 * ,"hash":"..." member, each prev equal to the hash before it; the first
 * line's prev must equal <prev_hex> (NULL: 64 zeros). Returns 0 when the
 * whole file is intact, 1 at the first broken line (av_bad_line, av_why),
 * -1 on a read error.
 */
int	aud_verify_file(FILE *in, const char *prev_hex, struct aud_verify *);

/* Build the JSON text of a record (no newline). Caller frees. */
char	*aud_rec_json(const struct aud_rec *);

#endif
