/*
 * rediss:// without a TLS-capable hiredis (Debian 12 ships 0.14): an
 * in-process TLS relay. It listens on a private unix socket
 * (state_dir/redis-tls.sock, 0600) that every hiredis connection of this
 * gateway uses; each accepted connection is relayed through a
 * bufferevent_openssl client to the Redis server, whose certificate must
 * chain to budget_store_ca (else the system's CAs) and name the URL's host
 * (DNS name or IP address; SNI when it is a name). One thread, its own
 * event_base: hiredis never sees TLS, the workers never wait on it.
 */
#include "config.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "budget/bud_tls.h"
#include "cfg/cfg.h"
#include "util/log.h"
#include "util/util.h"

#define BT_HIGH		(256 * 1024)	/* per direction, then back off */

static struct {
	struct event_base	*base;
	struct evconnlistener	*lis;
	SSL_CTX			*ctx;
	char			*host;
	int			 port;
	int			 host_is_ip;
	char			 path[108];
	pthread_t		 thr;
	int			 running;
} bt;

struct bt_pair {
	LIST_ENTRY(bt_pair)	 p_entry;
	struct bufferevent	*p_plain;	/* hiredis' side */
	struct bufferevent	*p_tls;		/* Redis' side */
};
static LIST_HEAD(, bt_pair) bt_pairs = LIST_HEAD_INITIALIZER(bt_pairs);

static void
bt_pair_free(struct bt_pair *p)
{
	LIST_REMOVE(p, p_entry);
	bufferevent_free(p->p_plain);
	bufferevent_free(p->p_tls);
	free(p);
}

static void
bt_read(struct bufferevent *bev, void *arg)
{
	struct bt_pair		*p = arg;
	struct bufferevent	*to = bev == p->p_plain ? p->p_tls : p->p_plain;

	evbuffer_add_buffer(bufferevent_get_output(to),
	    bufferevent_get_input(bev));
	if (evbuffer_get_length(bufferevent_get_output(to)) > BT_HIGH)
		bufferevent_disable(bev, EV_READ);
}

static void
bt_write(struct bufferevent *bev, void *arg)
{
	struct bt_pair	*p = arg;

	/* drained: the other side may read again */
	bufferevent_enable(bev == p->p_plain ? p->p_tls : p->p_plain, EV_READ);
}

static void
bt_event(struct bufferevent *bev, short what, void *arg)
{
	struct bt_pair	*p = arg;
	unsigned long	 e;
	SSL		*ssl;
	long		 vr;

	if (what & BEV_EVENT_CONNECTED)
		return;
	if (bev == p->p_tls && (what & BEV_EVENT_ERROR)) {
		/* the server's certificate refused: say which check failed
		   (the name, the chain), not only "certificate verify
		   failed" */
		if ((ssl = bufferevent_openssl_get_ssl(bev)) != NULL &&
		    (vr = SSL_get_verify_result(ssl)) != X509_V_OK)
			log_warnx("bud: rediss://%s:%d: the server's "
			    "certificate is refused: %s (it must chain to "
			    "budget_store_ca and name %s)", bt.host, bt.port,
			    X509_verify_cert_error_string(vr), bt.host);
		while ((e = bufferevent_get_openssl_error(bev)) != 0)
			if (ERR_reason_error_string(e) != NULL)
				log_warnx("bud: rediss: %s",
				    ERR_reason_error_string(e));
	}
	bt_pair_free(p);	/* either side gone: both go */
}

static void
bt_accept(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct bt_pair	*p;
	SSL		*ssl;

	(void)l;
	(void)sa;
	(void)salen;
	(void)arg;
	if ((ssl = SSL_new(bt.ctx)) == NULL) {
		close(fd);
		return;
	}
	if (!bt.host_is_ip)
		SSL_set_tlsext_host_name(ssl, bt.host);
	if (SSL_set1_host(ssl, bt.host) != 1) {
		SSL_free(ssl);
		close(fd);
		return;
	}
	p = xcalloc(1, sizeof(*p));
	p->p_plain = bufferevent_socket_new(bt.base, fd, BEV_OPT_CLOSE_ON_FREE);
	p->p_tls = bufferevent_openssl_socket_new(bt.base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (p->p_plain == NULL || p->p_tls == NULL) {
		if (p->p_plain == NULL)
			close(fd);
		if (p->p_tls == NULL)
			SSL_free(ssl);
		if (p->p_plain != NULL)
			bufferevent_free(p->p_plain);
		if (p->p_tls != NULL)
			bufferevent_free(p->p_tls);
		free(p);
		return;
	}
	LIST_INSERT_HEAD(&bt_pairs, p, p_entry);
	bufferevent_setcb(p->p_plain, bt_read, bt_write, bt_event, p);
	bufferevent_setcb(p->p_tls, bt_read, bt_write, bt_event, p);
	bufferevent_enable(p->p_plain, EV_READ | EV_WRITE);
	bufferevent_enable(p->p_tls, EV_READ | EV_WRITE);
	/* a name is resolved by libevent's blocking resolver in this
	   thread only: no worker waits on it */
	if (bufferevent_socket_connect_hostname(p->p_tls, NULL, AF_UNSPEC,
	    bt.host, bt.port) == -1) {
		log_warnx("bud: rediss: cannot connect to %s:%d", bt.host,
		    bt.port);
		bt_pair_free(p);
	}
}

static void *
bt_main(void *arg)
{
	(void)arg;
	event_base_dispatch(bt.base);
	return NULL;
}

int
bud_tls_start(const struct cfg *cfg)
{
	struct sockaddr_un	 sun;
	struct in6_addr		 a6;
	mode_t			 old;

	if (!cfg->c_bs_tls)
		return 0;
	bt.host = xstrdup(cfg->c_bs_host);
	bt.port = cfg->c_bs_port;
	bt.host_is_ip = inet_pton(AF_INET, bt.host, &a6) == 1 ||
	    inet_pton(AF_INET6, bt.host, &a6) == 1;
	if ((bt.ctx = SSL_CTX_new(TLS_client_method())) == NULL)
		return -1;
	SSL_CTX_set_min_proto_version(bt.ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(bt.ctx, SSL_VERIFY_PEER, NULL);
	if ((cfg->c_bs_ca != NULL ? SSL_CTX_load_verify_locations(bt.ctx,
	    cfg->c_bs_ca, NULL) : SSL_CTX_set_default_verify_paths(bt.ctx)) !=
	    1) {
		log_warnx("bud: budget_store_ca %s: not a CA file",
		    cfg->c_bs_ca != NULL ? cfg->c_bs_ca : "(system)");
		return -1;
	}
	if (snprintf(bt.path, sizeof(bt.path), "%s/redis-tls.sock",
	    cfg->c_state_dir) >= (int)sizeof(bt.path)) {
		log_warnx("bud: rediss: state_dir too long for a unix socket");
		return -1;
	}
	unlink(bt.path);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, bt.path, strlen(bt.path) + 1);
	if ((bt.base = event_base_new()) == NULL)
		return -1;
	old = umask(077);
	bt.lis = evconnlistener_new_bind(bt.base, bt_accept, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 64,
	    (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (bt.lis == NULL) {
		log_warn("bud: rediss: listen on %s", bt.path);
		return -1;
	}
	if ((errno = pthread_create(&bt.thr, NULL, bt_main, NULL)) != 0) {
		log_warn("bud: rediss: thread");
		return -1;
	}
	bt.running = 1;
	log_info("bud: rediss://%s:%d through the TLS relay %s", bt.host,
	    bt.port, bt.path);
	return 0;
}

const char *
bud_tls_path(void)
{
	return bt.running ? bt.path : NULL;
}

void
bud_tls_stop(void)
{
	if (bt.running) {
		event_base_loopbreak(bt.base);
		pthread_join(bt.thr, NULL);
		unlink(bt.path);
	}
	while (!LIST_EMPTY(&bt_pairs))
		bt_pair_free(LIST_FIRST(&bt_pairs));
	if (bt.lis != NULL)
		evconnlistener_free(bt.lis);
	if (bt.base != NULL)
		event_base_free(bt.base);
	if (bt.ctx != NULL)
		SSL_CTX_free(bt.ctx);
	free(bt.host);
	memset(&bt, 0, sizeof(bt));
}
