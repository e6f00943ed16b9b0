/*
 * Audit plane: one JSON line per request, tunnel or refused connection.
 * Workers build a record and hand it to one writer thread, which orders
 * the lines, chains their hashes (audit.hash_chain) and writes them.
 */
#ifndef AIRLOCK_AUD_H
#define AIRLOCK_AUD_H

#include <stdint.h>

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
	const char *const *ar_secrets;	/* names attached, never values */
	size_t		 ar_nsecrets;
	int64_t		 ar_bytes_in;	/* -1: absent */
	int64_t		 ar_bytes_out;
	int64_t		 ar_duration_ms;
	const char	*ar_upstream;	/* IP:PORT */
	const char	*ar_tls;	/* intercept|splice|none */
	const struct usage *ar_usage;	/* metered usage, or NULL */
	int64_t		 ar_cost_micro;	/* -1: absent */
	int		 ar_unpriced;	/* no price matched the model */
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

/* Build the JSON text of a record (no newline). Caller frees. */
char	*aud_rec_json(const struct aud_rec *);

#endif
