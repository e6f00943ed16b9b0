/*
 * Reloads reach open connections (conn_reload.c): each request is judged
 * under the config current when its head arrives, and tunnels or
 * WebSockets that a reload no longer allows end within
 * limits.reload_grace.
 */
#ifndef AIRLOCK_CONN_RELOAD_H
#define AIRLOCK_CONN_RELOAD_H

struct conn;
struct worker;

/* At a request head: move <c> to its worker's current config (and its
 * policy in it). The request then holds that reference to its end. */
void	conn_cfg_refresh(struct conn *);
/* Inside an intercepted session or on the transparent listener, where
 * the sandbox was identified once for the connection: is it still that
 * sandbox (not deleted, same token or source address)? 0 (c_sbx and
 * c_policy current), or -1 after answering 403. */
int	conn_sandbox_refresh(struct conn *);
/* After the worker took a new config: in limits.reload_grace, close the
 * tunnels and WebSockets it no longer allows (audited). */
void	conn_reload_sweep_arm(struct worker *);
void	conn_reload_sweep_free(struct worker *);

#endif
