/*
 * rediss://: the in-process TLS relay that hiredis 0.14 (no TLS) talks
 * to over a private unix socket (bud_tls.c).
 */
#ifndef AIRLOCK_BUD_TLS_H
#define AIRLOCK_BUD_TLS_H

struct cfg;

/* Start the relay when <cfg>'s store is rediss://. 0 or -1 (logged). */
int		 bud_tls_start(const struct cfg *);
/* The relay's unix socket, or NULL when there is none. */
const char	*bud_tls_path(void);
void		 bud_tls_stop(void);

#endif
