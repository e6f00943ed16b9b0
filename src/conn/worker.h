/*
 * Workers: one thread per core, each with its own event_base, evdns base,
 * SO_REUSEPORT listening sockets, connections and idle upstream pool, so
 * nothing on the data path takes a lock.
 */
#ifndef AIRLOCK_WORKER_H
#define AIRLOCK_WORKER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct cfg;
struct conn;
struct upstream;

struct worker {
	int			  w_id;
	pthread_t		  w_thread;
	struct event_base	 *w_base;
	struct evdns_base	 *w_dns;
	struct evconnlistener	**w_listeners;
	size_t			  w_nlisteners;
	struct event		 *w_stop_ev;	/* main asks us to drain */
	struct event		 *w_grace_ev;	/* drain deadline */
	struct cfg		 *w_cfg;	/* reference */
	TAILQ_HEAD(, conn)	  w_conns;
	size_t			  w_nconns;
	TAILQ_HEAD(, upstream)	  w_idle;	/* pooled upstream conns */
	size_t			  w_nidle;
	struct h2_pool		 *w_h2pool;	/* upstream h2 (h2/h2_pool.c) */
	uint64_t		  w_seq;	/* request ids */
	int			  w_stopping;
	struct evbuffer		 *w_scratch;	/* heads are built here */
	struct evbuffer		 *w_scratch2;	/* lent to stages */
	struct evbuffer		 *w_filt[2];	/* the stages' filters
						   (conn_pipe.c) */
	struct ssl_ctx_st	 *w_tls_server;	/* towards intercepted clients */
	struct ssl_ctx_st	 *w_tls_client;	/* towards upstreams */
	struct event		 *w_reload_ev;	/* main hands a new config */
	struct cfg		 *w_next_cfg;	/* atomic handoff */
	struct event		 *w_revoke_ev;	/* a sandbox was deleted */
	int			  w_spare_fd;	/* given up for one 503 when
						   accept() runs out of fds */
	struct event		 *w_resume_ev;	/* listeners paused: retry */
	int			  w_fd_short;	/* accept() failed for fds */
	const char		 *w_overload;	/* conn_accept: answer 503
						   overloaded with this */
	struct event		 *w_sweep_ev;	/* reload_grace after a reload:
						   close revoked tunnels */
	int			  w_accept_listener; /* conn_accept: index of
						   the proxy listener in
						   c_listen_proxy */
};

/* Bind every listener of <cfg> once per worker, start the threads. */
int	workers_start(struct cfg *);
/* Stop accepting; workers exit when drained or after shutdown_grace. */
void	workers_stop(void);
void	workers_join(void);
/* SIGHUP: new connections use <cfg> (each worker takes a reference). */
void	workers_reload(struct cfg *);
void	worker_conn_gone(void);
/* One more connection counted (an HTTP/2 stream's, conn_stream.c). */
void	worker_conn_more(void);
/* A sandbox was deleted: every worker closes its revoked connections. */
void	workers_revoke(void);

/* Leaf certificates, shared by all workers (tls.cert_cache). */
extern struct ca_cache	*worker_cert_cache;
extern uint64_t		 worker_tls_handshakes;

/* Global connection count against limits.max_connections. */
size_t	worker_conn_count(void);
/* Unique request id, 24 hex digits. */
void	worker_request_id(struct worker *, char *out, size_t outsz);

#endif
