/*
 * Admin API transport: the listener (unix socket 0600, or TCP), one
 * bufferevent per client, llhttp for the request, the bearer-token check,
 * and the response framing. The routes are in admin_routes.c.
 *
 * It runs on the main thread's event loop, away from the workers: an
 * operator's slow client never delays proxied traffic.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <llhttp.h>
#include <openssl/crypto.h>

#include "admin/admin.h"
#include "admin/admin_internal.h"
#include "cfg/cfg.h"
#include "http/http_write.h"
#include "util/log.h"
#include "util/util.h"

#define ADMIN_URL_MAX		2048
#define ADMIN_BODY_MAX		(1024 * 1024)
#define ADMIN_AUTH_MAX		512
#define ADMIN_HEAD_MAX		(64 * 1024)
#define ADMIN_IDLE_SECS		60
#define ADMIN_TOKEN_BYTES	32

struct admin_conn {
	TAILQ_ENTRY(admin_conn)	 ac_entry;
	struct bufferevent	*ac_bev;
	llhttp_t		 ac_parser;
	char			 ac_url[ADMIN_URL_MAX];
	size_t			 ac_url_len;
	int			 ac_url_toolong;
	char			 ac_field[32];	/* current header name */
	size_t			 ac_field_len;
	int			 ac_in_auth;	/* reading Authorization */
	char			 ac_auth[ADMIN_AUTH_MAX];
	size_t			 ac_auth_len;
	size_t			 ac_head_bytes;
	struct evbuffer		*ac_body;
	int			 ac_body_toolong;
	int			 ac_close;	/* after this response */
	struct admin_defer	*ac_defer;	/* an answer to come */
};

struct admin_defer {
	struct admin_conn	*ad_ac;		/* NULL once it has gone */
	char			 ad_id[25];
};

static TAILQ_HEAD(, admin_conn)	 admin_conns =
    TAILQ_HEAD_INITIALIZER(admin_conns);
static struct evconnlistener	*admin_listener;
static struct event_base	*admin_evbase;
static struct event		*admin_resume_ev;	/* paused: EMFILE */
static int			 admin_fd_short;	/* said so in the log */
static char			*admin_sock_path;	/* unlinked at stop */
static char			*admin_token;
static size_t			 admin_token_len;
static llhttp_settings_t	 admin_settings;
struct admin_hooks		 admin_hooks;
time_t				 admin_started;

static void	admin_conn_free(struct admin_conn *);

/*
 * The token: the config's value, else the token file, created (0600) with
 * a random token when absent. A file others can read is refused.
 */
static int
admin_token_load(const struct cfg *cfg, char **out, size_t *outlen)
{
	char		 buf[256], tok[ADMIN_TOKEN_BYTES * 2 + 1];
	const char	*path = cfg->c_admin_token_file;
	struct stat	 st;
	ssize_t		 n;
	int		 fd;

	if (cfg->c_admin_token != NULL) {
		*out = xstrndup(cfg->c_admin_token, cfg->c_admin_token_len);
		*outlen = cfg->c_admin_token_len;
		return 0;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
		if (fstat(fd, &st) == -1 || !util_file_private(&st)) {
			log_warnx("admin token %s: readable by group or "
			    "others; chmod 600 it", path);
			close(fd);
			return -1;
		}
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			n--;
		if (n <= 0) {
			log_warnx("admin token %s: empty", path);
			return -1;
		}
		*out = xstrndup(buf, (size_t)n);
		*outlen = (size_t)n;
		OPENSSL_cleanse(buf, sizeof(buf));
		return 0;
	}
	if (errno != ENOENT) {
		log_warn("admin token %s", path);
		return -1;
	}
	util_random_hex(tok, ADMIN_TOKEN_BYTES);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd == -1 || write(fd, tok, strlen(tok)) != (ssize_t)strlen(tok) ||
	    write(fd, "\n", 1) != 1) {
		log_warn("admin token %s", path);
		if (fd != -1)
			close(fd);
		OPENSSL_cleanse(tok, sizeof(tok));
		return -1;
	}
	close(fd);
	*out = xstrdup(tok);
	*outlen = strlen(tok);
	OPENSSL_cleanse(tok, sizeof(tok));
	log_info("admin token created in %s", path);
	return 0;
}

static int
on_url(llhttp_t *p, const char *at, size_t len)
{
	struct admin_conn	*ac = p->data;

	if (ac->ac_url_len + len >= sizeof(ac->ac_url)) {
		ac->ac_url_toolong = 1;
		return 0;
	}
	memcpy(ac->ac_url + ac->ac_url_len, at, len);
	ac->ac_url_len += len;
	ac->ac_url[ac->ac_url_len] = '\0';
	return 0;
}

static int
on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct admin_conn	*ac = p->data;

	ac->ac_in_auth = 0;
	ac->ac_head_bytes += len;
	if (ac->ac_field_len + len < sizeof(ac->ac_field)) {
		memcpy(ac->ac_field + ac->ac_field_len, at, len);
		ac->ac_field_len += len;
	} else
		ac->ac_field_len = sizeof(ac->ac_field);	/* not ours */
	return ac->ac_head_bytes > ADMIN_HEAD_MAX ? -1 : 0;
}

static int
on_header_field_complete(llhttp_t *p)
{
	struct admin_conn	*ac = p->data;

	ac->ac_in_auth = ac->ac_field_len == 13 &&
	    strncasecmp(ac->ac_field, "authorization", 13) == 0;
	ac->ac_field_len = 0;
	if (ac->ac_in_auth)
		ac->ac_auth_len = 0;	/* a repeated header replaces */
	return 0;
}

static int
on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct admin_conn	*ac = p->data;

	ac->ac_head_bytes += len;
	if (ac->ac_in_auth) {
		if (ac->ac_auth_len + len >= sizeof(ac->ac_auth))
			len = sizeof(ac->ac_auth) - 1 - ac->ac_auth_len;
		memcpy(ac->ac_auth + ac->ac_auth_len, at, len);
		ac->ac_auth_len += len;
	}
	return ac->ac_head_bytes > ADMIN_HEAD_MAX ? -1 : 0;
}

static int
on_body(llhttp_t *p, const char *at, size_t len)
{
	struct admin_conn	*ac = p->data;

	if (evbuffer_get_length(ac->ac_body) + len > ADMIN_BODY_MAX)
		ac->ac_body_toolong = 1;
	else
		evbuffer_add(ac->ac_body, at, len);
	return 0;
}

/* Constant-time bearer check. */
static int
admin_authorized(struct admin_conn *ac)
{
	const char	*v = ac->ac_auth;
	size_t		 len = ac->ac_auth_len;

	while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		len--;
	if (len < 7 || strncasecmp(v, "bearer ", 7) != 0)
		return 0;
	v += 7;
	len -= 7;
	while (len > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		len--;
	}
	return admin_token != NULL && util_secret_eq(v, len, admin_token,
	    admin_token_len);
}

static void
admin_send(struct admin_conn *ac, struct admin_resp *r)
{
	struct evbuffer	*out = bufferevent_get_output(ac->ac_bev);
	size_t		 blen = r->ar_body ? evbuffer_get_length(r->ar_body) : 0;

	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: %s\r\n"
	    "Content-Length: %zu\r\n"
	    "Cache-Control: no-store\r\n"
	    "X-Airlock-Request-Id: %s\r\n"
	    "%s%s\r\n",
	    r->ar_status, http_reason_phrase(r->ar_status),
	    r->ar_ctype ? r->ar_ctype : "application/json", blen, r->ar_id,
	    r->ar_status == 401 ?
	    "WWW-Authenticate: Bearer realm=\"airlock-admin\"\r\n" : "",
	    ac->ac_close ? "Connection: close\r\n" : "");
	if (r->ar_body != NULL)
		evbuffer_add_buffer(out, r->ar_body);
}

static int
on_message_complete(llhttp_t *p)
{
	struct admin_conn	*ac = p->data;
	struct admin_resp	 r;
	struct admin_req	 q;
	size_t			 blen;

	memset(&r, 0, sizeof(r));
	r.ar_body = evbuffer_new();
	util_random_hex(r.ar_id, 12);
	ac->ac_close = !llhttp_should_keep_alive(p);

	memset(&q, 0, sizeof(q));
	q.aq_method = llhttp_get_method(p);
	q.aq_url = ac->ac_url;
	blen = evbuffer_get_length(ac->ac_body);
	q.aq_body = blen ? (const char *)evbuffer_pullup(ac->ac_body, -1) : "";
	q.aq_body_len = blen;

	if (ac->ac_url_toolong)
		admin_error(&r, 414, "uri_too_long", "request target too long");
	else if (ac->ac_body_toolong)
		admin_error(&r, 413, "body_too_large",
		    "request body over 1 MiB");
	else if (strcmp(ac->ac_url, "/healthz") != 0 &&
	    !admin_authorized(ac))
		admin_error(&r, 401, "unauthorized", ac->ac_auth_len == 0 ?
		    "missing \"Authorization: Bearer <admin token>\"" :
		    "admin token not valid");
	else {
		r.ar_conn = ac;
		admin_route(&q, &r);
	}
	if (r.ar_deferred) {
		/* the answer comes later, and closes the connection; still
		   read (and ignored) for the client's hang-up, with no idle
		   limit meanwhile: the wait has its own */
		struct timeval	idle = { ADMIN_IDLE_SECS, 0 };

		ac->ac_close = 1;
		bufferevent_set_timeouts(ac->ac_bev, NULL, &idle);
	} else
		admin_send(ac, &r);
	evbuffer_free(r.ar_body);

	/* ready for the next request on this connection */
	OPENSSL_cleanse(ac->ac_auth, sizeof(ac->ac_auth));
	ac->ac_auth_len = 0;
	ac->ac_url_len = 0;
	ac->ac_url[0] = '\0';
	ac->ac_url_toolong = 0;
	ac->ac_body_toolong = 0;
	ac->ac_head_bytes = 0;
	evbuffer_drain(ac->ac_body, evbuffer_get_length(ac->ac_body));
	if (ac->ac_close)
		return HPE_PAUSED;
	return 0;
}

static void
admin_write_cb(struct bufferevent *bev, void *arg)
{
	struct admin_conn	*ac = arg;

	if (ac->ac_close)
		admin_conn_free(ac);
}

/* A malformed request: answer 400 and close. */
static void
admin_bad_request(struct admin_conn *ac, const char *why)
{
	struct admin_resp	 r;

	memset(&r, 0, sizeof(r));
	r.ar_body = evbuffer_new();
	util_random_hex(r.ar_id, 12);
	admin_error(&r, 400, "bad_request", why);
	ac->ac_close = 1;
	admin_send(ac, &r);
	evbuffer_free(r.ar_body);
	bufferevent_disable(ac->ac_bev, EV_READ);
}

static void
admin_read_cb(struct bufferevent *bev, void *arg)
{
	struct admin_conn	*ac = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);
	struct evbuffer_iovec	 v;
	llhttp_errno_t		 err;

	while (!ac->ac_close && evbuffer_peek(in, -1, NULL, &v, 1) > 0) {
		err = llhttp_execute(&ac->ac_parser, v.iov_base, v.iov_len);
		if (err == HPE_PAUSED)
			break;
		if (err != HPE_OK) {
			admin_bad_request(ac, llhttp_get_error_reason(
			    &ac->ac_parser));
			return;
		}
		evbuffer_drain(in, v.iov_len);
	}
	if (!ac->ac_close)
		return;
	/* the last answer is given, or to come: ignore the rest; an answer
	   to come still reads, for an EOF (admin_event_cb) */
	evbuffer_drain(in, evbuffer_get_length(in));
	if (ac->ac_defer == NULL)
		bufferevent_disable(bev, EV_READ);
}

static void
admin_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct admin_conn	*ac = arg;

	/* EOF, error or idle timeout: nothing more to say (an answer to
	   come is dropped: admin_defer_answer) */
	admin_conn_free(ac);
}

struct event_base *
admin_base(void)
{
	return admin_evbase;
}

struct admin_defer *
admin_defer(struct admin_resp *r)
{
	struct admin_defer	*d = xcalloc(1, sizeof(*d));

	d->ad_ac = r->ar_conn;
	memcpy(d->ad_id, r->ar_id, sizeof(d->ad_id));
	r->ar_conn->ac_defer = d;
	r->ar_deferred = 1;
	return d;
}

void
admin_defer_answer(struct admin_defer *d,
    void (*fill)(struct admin_resp *, void *), void *arg)
{
	struct admin_resp	r;

	memset(&r, 0, sizeof(r));
	r.ar_body = evbuffer_new();
	memcpy(r.ar_id, d->ad_id, sizeof(r.ar_id));
	fill(&r, arg);
	if (d->ad_ac != NULL) {
		d->ad_ac->ac_defer = NULL;
		admin_send(d->ad_ac, &r);	/* the write callback closes */
	}
	evbuffer_free(r.ar_body);
	free(d);
}

static void
admin_conn_free(struct admin_conn *ac)
{
	if (ac->ac_defer != NULL)
		ac->ac_defer->ad_ac = NULL;	/* its answer is dropped */
	TAILQ_REMOVE(&admin_conns, ac, ac_entry);
	bufferevent_free(ac->ac_bev);
	evbuffer_free(ac->ac_body);
	OPENSSL_cleanse(ac->ac_auth, sizeof(ac->ac_auth));
	free(ac);
}

static void
admin_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct admin_conn	*ac;
	struct timeval		 idle = { ADMIN_IDLE_SECS, 0 };

	if (admin_fd_short) {
		admin_fd_short = 0;
		log_info("admin: accepting connections again");
	}
	ac = xcalloc(1, sizeof(*ac));
	ac->ac_bev = bufferevent_socket_new(evconnlistener_get_base(l), fd,
	    BEV_OPT_CLOSE_ON_FREE);
	ac->ac_body = evbuffer_new();
	if (ac->ac_bev == NULL || ac->ac_body == NULL) {
		if (ac->ac_bev == NULL)
			close(fd);
		else
			bufferevent_free(ac->ac_bev);
		if (ac->ac_body != NULL)
			evbuffer_free(ac->ac_body);
		free(ac);
		return;
	}
	TAILQ_INSERT_TAIL(&admin_conns, ac, ac_entry);
	llhttp_init(&ac->ac_parser, HTTP_REQUEST, &admin_settings);
	ac->ac_parser.data = ac;
	bufferevent_setcb(ac->ac_bev, admin_read_cb, admin_write_cb,
	    admin_event_cb, ac);
	bufferevent_set_timeouts(ac->ac_bev, &idle, &idle);
	bufferevent_enable(ac->ac_bev, EV_READ | EV_WRITE);
}

static void
admin_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	if (admin_listener != NULL)
		evconnlistener_enable(admin_listener);
}

static void
admin_accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct timeval	tv = { 0, 100 * 1000 };
	int		err = EVUTIL_SOCKET_ERROR();

	if (err != EMFILE && err != ENFILE && err != ENOBUFS &&
	    err != ENOMEM) {
		log_warnx("admin: accept: %s", strerror(err));
		return;
	}
	if (!admin_fd_short) {
		admin_fd_short = 1;
		log_warnx("admin: accept: %s: paused until descriptors free "
		    "up", strerror(err));
	}
	/* the waiting client keeps the socket readable: without a pause
	   this would be a busy loop until descriptors free up */
	if (admin_resume_ev == NULL)
		admin_resume_ev = evtimer_new(evconnlistener_get_base(l),
		    admin_resume_cb, NULL);
	if (admin_resume_ev != NULL) {
		evconnlistener_disable(l);
		evtimer_add(admin_resume_ev, &tv);
	}
}

/* A unix socket at <path>, mode 0600; a stale socket file is replaced. */
static evutil_socket_t
admin_listen_unix(const char *path)
{
	struct sockaddr_un	 sun;
	struct stat		 st;
	evutil_socket_t		 fd;
	mode_t			 old;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_warnx("admin: socket path too long: %s", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_warnx("admin: %s exists and is not a socket", path);
			return -1;
		}
		unlink(path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		log_warn("admin: socket");
		return -1;
	}
	old = umask(0177);	/* the socket is born 0600 */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		umask(old);
		log_warn("admin: bind %s", path);
		close(fd);
		return -1;
	}
	umask(old);
	if (chmod(path, 0600) == -1 || listen(fd, 64) == -1) {
		log_warn("admin: %s", path);
		close(fd);
		return -1;
	}
	return fd;
}

int
admin_start(struct event_base *base, const struct cfg *cfg,
    const struct admin_hooks *hooks)
{
	evutil_socket_t		 fd;
	struct sockaddr_storage	 ss;
	int			 sslen = sizeof(ss);

	admin_hooks = *hooks;
	admin_evbase = base;
	admin_started = time(NULL);
	llhttp_settings_init(&admin_settings);
	admin_settings.on_url = on_url;
	admin_settings.on_header_field = on_header_field;
	admin_settings.on_header_field_complete = on_header_field_complete;
	admin_settings.on_header_value = on_header_value;
	admin_settings.on_body = on_body;
	admin_settings.on_message_complete = on_message_complete;

	if (admin_token_load(cfg, &admin_token, &admin_token_len) == -1)
		return -1;
	if (strncmp(cfg->c_listen_admin, "unix:", 5) == 0) {
		if ((fd = admin_listen_unix(cfg->c_listen_admin + 5)) == -1)
			return -1;
		admin_sock_path = xstrdup(cfg->c_listen_admin + 5);
	} else {
		if (evutil_parse_sockaddr_port(cfg->c_listen_admin,
		    (struct sockaddr *)&ss, &sslen) == -1) {
			log_warnx("admin: bad address %s", cfg->c_listen_admin);
			return -1;
		}
		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd == -1 || evutil_make_listen_socket_reuseable(fd) ==
		    -1 || bind(fd, (struct sockaddr *)&ss, (socklen_t)sslen) ==
		    -1 || listen(fd, 64) == -1) {
			log_warn("admin: listen %s", cfg->c_listen_admin);
			if (fd != -1)
				close(fd);
			return -1;
		}
	}
	evutil_make_socket_nonblocking(fd);
	admin_listener = evconnlistener_new(base, admin_accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE, -1, fd);
	if (admin_listener == NULL) {
		close(fd);
		return -1;
	}
	evconnlistener_set_error_cb(admin_listener, admin_accept_error_cb);
	log_info("admin API listening on %s", cfg->c_listen_admin);
	return 0;
}

void
admin_reload(const struct cfg *cfg)
{
	char	*tok;
	size_t	 len;

	/* the address stays; the token may have been rotated */
	if (admin_token_load(cfg, &tok, &len) == -1) {
		log_warnx("admin: keeping the previous admin token");
		return;
	}
	if (admin_token != NULL) {
		OPENSSL_cleanse(admin_token, admin_token_len);
		free(admin_token);
	}
	admin_token = tok;
	admin_token_len = len;
}

void
admin_stop(void)
{
	while (!TAILQ_EMPTY(&admin_conns))
		admin_conn_free(TAILQ_FIRST(&admin_conns));
	/* their answers go nowhere now, but release what they hold */
	adm_fleet_stop();
	if (admin_listener != NULL)
		evconnlistener_free(admin_listener);
	admin_listener = NULL;
	if (admin_resume_ev != NULL)
		event_free(admin_resume_ev);
	admin_resume_ev = NULL;
	if (admin_sock_path != NULL)
		unlink(admin_sock_path);
	free(admin_sock_path);
	admin_sock_path = NULL;
	if (admin_token != NULL)
		OPENSSL_cleanse(admin_token, admin_token_len);
	free(admin_token);
	admin_token = NULL;
}
