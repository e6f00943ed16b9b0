/*
 * Admin API server: HTTP/1.1 (llhttp) + JSON (json-c) on listen.admin, a
 * unix socket (0600) or a loopback address, served by the main thread's
 * event loop. Every route but /healthz needs "Authorization: Bearer
 * <admin token>".
 */
#ifndef AIRLOCK_ADMIN_H
#define AIRLOCK_ADMIN_H

struct event_base;
struct cfg;

/* Hooks into the daemon: reload (returns 0, or -1 with the errors, one
 * FILE:LINE:COL line each, in *errs which the caller frees). */
struct admin_hooks {
	int	(*ah_reload)(char **errs);
	const struct cfg *(*ah_cfg)(void);	/* the running config */
};

/* Listen on cfg->c_listen_admin with cfg's admin token. 0 or -1 (logged). */
int	admin_start(struct event_base *, const struct cfg *,
	    const struct admin_hooks *);
/* A reload may change the token (not the address). */
void	admin_reload(const struct cfg *);
void	admin_stop(void);
/* Every reload attempt, SIGHUP or API, for GET /v1/status. */
void	admin_count_reload(int ok);

#endif
