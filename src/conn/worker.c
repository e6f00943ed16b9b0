#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include <openssl/ssl.h>

#include "ca/ca.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_reload.h"
#include "conn/worker.h"
#include "h2/h2.h"
#include "dns/dns.h"
#include "tls/tls.h"
#include "sbx/sbx.h"
#include "util/log.h"
#include "util/util.h"

static struct worker	*workers;
static int		 nworkers;

static void	reload_cb(evutil_socket_t, short, void *);
static void	revoke_cb(evutil_socket_t, short, void *);
static size_t		 conns_total;	/* atomic */
static char		 boot_id[9];
struct ca_cache		*worker_cert_cache;
uint64_t		 worker_tls_handshakes;

size_t
worker_conn_count(void)
{
	return __atomic_load_n(&conns_total, __ATOMIC_RELAXED);
}

void
worker_conn_more(void)
{
	__atomic_add_fetch(&conns_total, 1, __ATOMIC_RELAXED);
}

void
worker_conn_gone(void)
{
	__atomic_sub_fetch(&conns_total, 1, __ATOMIC_RELAXED);
}

void
worker_request_id(struct worker *w, char *out, size_t outsz)
{
	/* boot id (8) + worker (2) + sequence (14) hex digits: per request,
	   so no snprintf */
	if (outsz < 25)
		return;
	memcpy(out, boot_id, 8);
	util_hex_fixed((uint64_t)(w->w_id & 0xff), 2, out + 8);
	util_hex_fixed(++w->w_seq, 14, out + 10);
	out[24] = '\0';
}

static void
accept_ok(struct worker *w)
{
	if (w->w_fd_short) {
		w->w_fd_short = 0;
		log_info("worker %d: accepting connections again", w->w_id);
	}
}

/* Which proxy listener <l> is: its index in c_listen_proxy (they come
   first in w_listeners, in config order). */
static int
listener_index(struct worker *w, struct evconnlistener *l)
{
	size_t	i;

	for (i = 0; i < w->w_nlisteners; i++)
		if (w->w_listeners[i] == l)
			return (int)i;
	return -1;
}

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int socklen, void *arg)
{
	struct worker	*w = arg;

	accept_ok(w);
	__atomic_add_fetch(&conns_total, 1, __ATOMIC_RELAXED);
	w->w_accept_listener = listener_index(w, l);
	conn_accept(w, fd, sa, socklen, 0);
}

/* listen.transparent: connections redirected by the host's rules */
static void
accept_transparent_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int socklen, void *arg)
{
	struct worker	*w = arg;

	accept_ok(w);
	__atomic_add_fetch(&conns_total, 1, __ATOMIC_RELAXED);
	conn_accept(w, fd, sa, socklen, 1);
}

/* listen.socks5 */
static void
accept_socks5_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int socklen, void *arg)
{
	struct worker	*w = arg;

	accept_ok(w);
	__atomic_add_fetch(&conns_total, 1, __ATOMIC_RELAXED);
	conn_accept(w, fd, sa, socklen, CONN_ACCEPT_SOCKS5);
}

static void
listeners_enable(struct worker *w, int on)
{
	size_t	i;

	for (i = 0; i < w->w_nlisteners; i++)
		if (on)
			evconnlistener_enable(w->w_listeners[i]);
		else
			evconnlistener_disable(w->w_listeners[i]);
}

/* Paused for want of descriptors: take the spare back, then listen. */
static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker		*w = arg;
	struct timeval		 tv = { 0, 100 * 1000 };

	if (w->w_stopping)
		return;
	if (w->w_spare_fd == -1 &&
	    (w->w_spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1) {
		evtimer_add(w->w_resume_ev, &tv);
		return;
	}
	listeners_enable(w, 1);
}

/*
 * accept() failed. Out of descriptors (EMFILE, ENFILE) or memory, the
 * waiting connection keeps the socket readable and libevent would call us
 * again at once, a busy loop: spend the spare descriptor on one waiting
 * client, who gets 503 overloaded (audited) instead of silence, and pause
 * this worker's listeners until the spare can be had again (every 100 ms).
 * Connections already open are served all along.
 */
static void
accept_failed(struct evconnlistener *l, struct worker *w, int transparent)
{
	struct sockaddr_storage	 ss;
	socklen_t		 len = sizeof(ss);
	struct timeval		 tv = { 0, 100 * 1000 };
	int			 err = EVUTIL_SOCKET_ERROR(), fd;

	if (err != EMFILE && err != ENFILE && err != ENOBUFS &&
	    err != ENOMEM) {
		log_warnx("worker %d: accept: %s", w->w_id, strerror(err));
		return;
	}
	if (!w->w_fd_short) {
		w->w_fd_short = 1;
		log_warnx("worker %d: accept: %s: new connections get 503 "
		    "until descriptors free up", w->w_id, strerror(err));
	}
	if (w->w_spare_fd != -1) {
		close(w->w_spare_fd);
		w->w_spare_fd = -1;
		fd = accept4(evconnlistener_get_fd(l), (struct sockaddr *)&ss,
		    &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd != -1) {
			__atomic_add_fetch(&conns_total, 1, __ATOMIC_RELAXED);
			w->w_overload = "file descriptor limit reached";
			w->w_accept_listener = listener_index(w, l);
			conn_accept(w, fd, (struct sockaddr *)&ss, (int)len,
			    transparent);
			w->w_overload = NULL;
		}
	}
	listeners_enable(w, 0);
	evtimer_add(w->w_resume_ev, &tv);
}

static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
	accept_failed(l, arg, 0);
}

static void
accept_transparent_error_cb(struct evconnlistener *l, void *arg)
{
	accept_failed(l, arg, 1);
}

static void
accept_socks5_error_cb(struct evconnlistener *l, void *arg)
{
	accept_failed(l, arg, CONN_ACCEPT_SOCKS5);
}

static void
grace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker	*w = arg;

	log_info("worker %d: shutdown grace over, %zu connections cut",
	    w->w_id, w->w_nconns);
	/* each exchange still open is audited and settled first */
	conn_close_all(w, AUD_R_SHUTDOWN);
	event_base_loopbreak(w->w_base);
}

static void
stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker	*w = arg;
	struct conn	*c, *next;
	struct timeval	 tv;
	size_t		 i;
	uint64_t	 ms = w->w_cfg->c_limits.l_shutdown_grace_ms;

	w->w_stopping = 1;
	evtimer_del(w->w_resume_ev);
	for (i = 0; i < w->w_nlisteners; i++)
		evconnlistener_free(w->w_listeners[i]);
	w->w_nlisteners = 0;
	upstream_pool_flush(w);
	h2_pool_flush(w);
	for (c = TAILQ_FIRST(&w->w_conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, c_entry);
		conn_drain(c);
	}
	if (w->w_nconns == 0) {
		event_base_loopexit(w->w_base, NULL);
		return;
	}
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	w->w_grace_ev = evtimer_new(w->w_base, grace_cb, w);
	evtimer_add(w->w_grace_ev, &tv);
}

static void *
worker_main(void *arg)
{
	struct worker	*w = arg;
	struct conn	*c;

	event_base_dispatch(w->w_base);
	while ((c = TAILQ_FIRST(&w->w_conns)) != NULL)
		conn_free(c);
	upstream_pool_flush(w);
	h2_pool_flush(w);
	bud_redis_worker_fini();	/* its settlements, then its Redis */
	return NULL;
}

static void
worker_free(struct worker *w)
{
	size_t	i;

	for (i = 0; i < w->w_nlisteners; i++)
		evconnlistener_free(w->w_listeners[i]);
	free(w->w_listeners);
	if (w->w_grace_ev != NULL)
		event_free(w->w_grace_ev);
	if (w->w_stop_ev != NULL)
		event_free(w->w_stop_ev);
	dns_base_free(w->w_dns);
	if (w->w_scratch != NULL)
		evbuffer_free(w->w_scratch);
	if (w->w_scratch2 != NULL)
		evbuffer_free(w->w_scratch2);
	if (w->w_filt[0] != NULL)
		evbuffer_free(w->w_filt[0]);
	if (w->w_filt[1] != NULL)
		evbuffer_free(w->w_filt[1]);
	SSL_CTX_free(w->w_tls_server);
	SSL_CTX_free(w->w_tls_client);
	if (w->w_resume_ev != NULL)
		event_free(w->w_resume_ev);
	conn_reload_sweep_free(w);
	if (w->w_spare_fd != -1)
		close(w->w_spare_fd);
	if (w->w_base != NULL)
		event_base_free(w->w_base);
	cfg_unref(w->w_cfg);
}

/*
 * One loop per thread, never shared: no lock needed, and the epoll
 * changelist folds the many enable/disable calls of a request into one
 * epoll_ctl per fd per loop iteration.
 */
static struct event_base *
worker_base_new(void)
{
	struct event_config	*ec;
	struct event_base	*base;

	if ((ec = event_config_new()) == NULL)
		return NULL;
	if (getenv("AIRLOCK_NO_CHANGELIST") == NULL)
		event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	base = event_base_new_with_config(ec);
	event_config_free(ec);
	return base;
}

/* TLS contexts follow the worker's config (min_version, ca_file). */
static int
worker_tls_ctx(struct worker *w, const struct cfg *cfg)
{
	SSL_CTX	*server, *client;

	if ((server = tls_server_ctx_new(cfg)) == NULL)
		return -1;
	if ((client = tls_client_ctx_new(cfg)) == NULL) {
		SSL_CTX_free(server);
		return -1;
	}
	SSL_CTX_free(w->w_tls_server);
	SSL_CTX_free(w->w_tls_client);
	w->w_tls_server = server;
	w->w_tls_client = client;
	return 0;
}

/* One SO_REUSEPORT socket per worker and address; errors are fatal. */
static int
listen_socket(const char *addr)
{
	struct sockaddr_storage	ss;
	int			len = sizeof(ss), fd, one = 1;

	if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &len) != 0)
		fatalx("listen address %s: cannot parse", addr);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd == -1)
		fatal("socket for %s", addr);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == -1)
		fatal("SO_REUSEPORT on %s", addr);
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	else
		/* the sandbox gateway address may come up after us */
		setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, (socklen_t)len) == -1)
		fatal("bind %s", addr);
	if (listen(fd, 1024) == -1)
		fatal("listen %s", addr);
	return fd;
}

int
workers_start(struct cfg *cfg)
{
	sigset_t	 all, old;
	struct worker	*w;
	size_t		 i;
	int		 n, fd;

	util_random_hex(boot_id, 4);
	worker_cert_cache = ca_cache_new(cfg->c_tls_cert_cache);
	n = cfg->c_workers > 0 ? cfg->c_workers :
	    (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	nworkers = n;
	workers = xcalloc((size_t)n, sizeof(*workers));
	for (w = workers; w < workers + n; w++) {
		w->w_id = (int)(w - workers);
		w->w_cfg = cfg_ref(cfg);
		TAILQ_INIT(&w->w_conns);
		TAILQ_INIT(&w->w_idle);
		if ((w->w_base = worker_base_new()) == NULL)
			fatalx("event_base_new failed");
		w->w_dns = dns_base_new(w->w_base, cfg);
		w->w_scratch = evbuffer_new();
		w->w_scratch2 = evbuffer_new();
		w->w_filt[0] = evbuffer_new();
		w->w_filt[1] = evbuffer_new();
		if (worker_tls_ctx(w, cfg) == -1)
			fatalx("cannot set up TLS contexts");
		w->w_stop_ev = event_new(w->w_base, -1, 0, stop_cb, w);
		w->w_reload_ev = event_new(w->w_base, -1, 0, reload_cb, w);
		w->w_revoke_ev = event_new(w->w_base, -1, 0, revoke_cb, w);
		w->w_resume_ev = evtimer_new(w->w_base, resume_cb, w);
		w->w_spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (w->w_spare_fd == -1)
			fatal("open /dev/null");
		w->w_listeners = xcalloc(cfg->c_nlisten_proxy + 2,
		    sizeof(*w->w_listeners));
		for (i = 0; i < cfg->c_nlisten_proxy; i++) {
			fd = listen_socket(cfg->c_listen_proxy[i]);
			w->w_listeners[i] = evconnlistener_new(w->w_base,
			    accept_cb, w, LEV_OPT_CLOSE_ON_FREE, -1, fd);
			if (w->w_listeners[i] == NULL)
				fatalx("evconnlistener_new failed");
			evconnlistener_set_error_cb(w->w_listeners[i],
			    accept_error_cb);
			w->w_nlisteners++;
		}
		if (cfg->c_listen_transparent != NULL) {
			fd = listen_socket(cfg->c_listen_transparent);
			w->w_listeners[w->w_nlisteners] = evconnlistener_new(
			    w->w_base, accept_transparent_cb, w,
			    LEV_OPT_CLOSE_ON_FREE, -1, fd);
			if (w->w_listeners[w->w_nlisteners] == NULL)
				fatalx("evconnlistener_new failed");
			evconnlistener_set_error_cb(
			    w->w_listeners[w->w_nlisteners],
			    accept_transparent_error_cb);
			w->w_nlisteners++;
		}
		if (cfg->c_listen_socks5 != NULL) {
			fd = listen_socket(cfg->c_listen_socks5);
			w->w_listeners[w->w_nlisteners] = evconnlistener_new(
			    w->w_base, accept_socks5_cb, w,
			    LEV_OPT_CLOSE_ON_FREE, -1, fd);
			if (w->w_listeners[w->w_nlisteners] == NULL)
				fatalx("evconnlistener_new failed");
			evconnlistener_set_error_cb(
			    w->w_listeners[w->w_nlisteners],
			    accept_socks5_error_cb);
			w->w_nlisteners++;
		}
	}
	/* signals belong to the main thread */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (w = workers; w < workers + n; w++)
		if (pthread_create(&w->w_thread, NULL, worker_main, w) != 0)
			fatalx("pthread_create failed");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (i = 0; i < cfg->c_nlisten_proxy; i++)
		log_info("explicit proxy listening on %s (%d workers)",
		    cfg->c_listen_proxy[i], n);
	if (cfg->c_listen_transparent != NULL)
		log_info("transparent listener on %s",
		    cfg->c_listen_transparent);
	if (cfg->c_listen_socks5 != NULL)
		log_info("SOCKS5 listener on %s", cfg->c_listen_socks5);
	return 0;
}

void
workers_stop(void)
{
	int	i;

	for (i = 0; i < nworkers; i++)
		event_active(workers[i].w_stop_ev, EV_READ, 0);
}

static void
reload_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker	*w = arg;
	struct cfg	*next;

	/* only the newest config counts when reloads come faster than us */
	next = __atomic_exchange_n(&w->w_next_cfg, NULL, __ATOMIC_ACQ_REL);
	if (next == NULL)
		return;
	/* established TLS sessions keep the SSL they started with */
	if (worker_tls_ctx(w, next) == -1)
		log_warnx("worker %d: TLS contexts kept from the old config",
		    w->w_id);
	cfg_unref(w->w_cfg);
	w->w_cfg = next;
	/* idle upstreams were checked (networks, GeoIP, TLS trust) under the
	   old config: new requests connect afresh */
	upstream_pool_flush(w);
	h2_pool_flush(w);
	/* open requests finish under their config, the next request of a
	   connection takes this one; tunnels are judged after the grace */
	conn_reload_sweep_arm(w);
}

void
workers_reload(struct cfg *cfg)
{
	struct worker	*w;
	struct cfg	*old;

	for (w = workers; w < workers + nworkers; w++) {
		old = __atomic_exchange_n(&w->w_next_cfg, cfg_ref(cfg),
		    __ATOMIC_ACQ_REL);
		cfg_unref(old);		/* a swap the worker never took */
		event_active(w->w_reload_ev, EV_READ, 0);
	}
}

static void
revoke_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker	*w = arg;
	struct conn	*c, *next;

	for (c = TAILQ_FIRST(&w->w_conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, c_entry);
		if (c->c_sbx != NULL && __atomic_load_n(&c->c_sbx->sb_revoked,
		    __ATOMIC_ACQUIRE)) {
			log_info("%s: sandbox %s deleted: closing its "
			    "connection", c->c_client, c->c_sbx->sb_id);
			conn_close(c, AUD_R_REVOKED);
		}
	}
}

void
workers_revoke(void)
{
	int	i;

	for (i = 0; i < nworkers; i++)
		event_active(workers[i].w_revoke_ev, EV_READ, 0);
}

void
workers_join(void)
{
	int	i;

	for (i = 0; i < nworkers; i++) {
		pthread_join(workers[i].w_thread, NULL);
		event_free(workers[i].w_reload_ev);
		event_free(workers[i].w_revoke_ev);
		cfg_unref(workers[i].w_next_cfg);
		worker_free(&workers[i]);
	}
	free(workers);
	workers = NULL;
	nworkers = 0;
	ca_cache_free(worker_cert_cache);
	worker_cert_cache = NULL;
}
