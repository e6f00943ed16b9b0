/*
 * The admin API client: one HTTP/1.1 request per connection to
 * "unix:PATH" or "HOST:PORT", "Authorization: Bearer <token>", the answer
 * parsed with llhttp (strict) and its body with json-c. Blocking sockets
 * with poll() deadlines: a CLI has nothing else to do meanwhile.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <llhttp.h>
#include <openssl/crypto.h>

#include "ctl/ctl.h"
#include "util/exec.h"
#include "util/util.h"

void
ctl_err(const char *fmt, ...)
{
	va_list	ap;

	fflush(stdout);
	fputs("airlockctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

char *
ctl_path_escape(const char *s)
{
	return util_pct_encode(s, strlen(s));
}

/* The file's bytes, at most <max> - 1 of them. */
static int
token_file(const char *path, char *buf, size_t max, size_t *len, char *why,
    size_t whysz)
{
	struct stat	st;
	ssize_t		r;
	int		fd;

	*len = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) ==
	    -1 || fstat(fd, &st) == -1) {
		snprintf(why, whysz, "cannot read \"%s\": %s", path,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whysz, "\"%s\" is not a regular file", path);
		close(fd);
		return -1;
	}
	while (*len < max) {
		r = read(fd, buf + *len, max - *len);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			snprintf(why, whysz, "cannot read \"%s\": %s", path,
			    strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		*len += (size_t)r;
	}
	close(fd);
	if (*len == max) {
		snprintf(why, whysz, "\"%s\" is larger than %zu bytes", path,
		    max - 1);
		return -1;
	}
	return 0;
}

int
ctl_token_read(const char *src, char *buf, size_t bufsz, char *why,
    size_t whysz)
{
	const char	*v;
	char		 ewhy[256];
	size_t		 len = 0, i;
	int		 trim = 0;

	if (strncmp(src, "env:", 4) == 0) {
		if ((v = getenv(src + 4)) == NULL) {
			snprintf(why, whysz, "environment variable \"%s\" is "
			    "not set", src + 4);
			return -1;
		}
		if ((len = strlen(v)) >= bufsz) {
			snprintf(why, whysz, "environment variable \"%s\" is "
			    "too long", src + 4);
			return -1;
		}
		memcpy(buf, v, len);
	} else if (strncmp(src, "literal:", 8) == 0) {
		v = src + 8;
		if ((len = strlen(v)) >= bufsz) {
			snprintf(why, whysz, "literal token too long");
			return -1;
		}
		memcpy(buf, v, len);
	} else if (strncmp(src, "file:", 5) == 0) {
		if (token_file(src + 5, buf, bufsz, &len, why, whysz) == -1)
			return -1;
		trim = 1;
	} else if (strncmp(src, "exec:", 5) == 0) {
		if (util_exec(src + 5, buf, bufsz - 1, &len,
		    CTL_TIMEOUT_MS, -1, NULL, ewhy, sizeof(ewhy)) == -1) {
			/* util_exec's reason reads "exited with status 3" */
			snprintf(why, whysz, "command %s", ewhy);
			return -1;
		}
		trim = 1;
	} else {
		snprintf(why, whysz, "not a source (env:NAME, file:PATH, "
		    "exec:COMMAND or literal:VALUE)");
		return -1;
	}
	while (trim && len > 0 && (buf[len - 1] == '\n' ||
	    buf[len - 1] == '\r'))
		len--;
	buf[len] = '\0';
	if (len == 0) {
		snprintf(why, whysz, "the token is empty");
		return -1;
	}
	/* A CR or LF would end the header and start another. */
	for (i = 0; i < len; i++) {
		if ((unsigned char)buf[i] < 0x21 || buf[i] == 0x7f) {
			OPENSSL_cleanse(buf, bufsz);
			snprintf(why, whysz, "the token contains spaces or "
			    "control characters");
			return -1;
		}
	}
	return (int)len;
}

/* Wait for <events> on <fd> at most <ms>; 1 ready, 0 timeout, -1 error. */
static int
wait_fd(int fd, short events, int ms)
{
	struct pollfd	pfd;
	int		n;

	pfd.fd = fd;
	pfd.events = events;
	for (;;) {
		n = poll(&pfd, 1, ms);
		if (n == -1 && errno == EINTR)
			continue;
		return n > 0 ? 1 : n;
	}
}

/*
 * Connect <fd> to <sa> within CTL_TIMEOUT_MS. Returns 0, or -1 with errno
 * set (ETIMEDOUT on timeout).
 */
static int
connect_wait(int fd, const struct sockaddr *sa, socklen_t salen)
{
	socklen_t	len;
	int		err, fl;

	if ((fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		return -1;
	if (connect(fd, sa, salen) == -1) {
		if (errno != EINPROGRESS && errno != EINTR)
			return -1;
		switch (wait_fd(fd, POLLOUT, CTL_TIMEOUT_MS)) {
		case 0:
			errno = ETIMEDOUT;
			return -1;
		case -1:
			return -1;
		}
		len = sizeof(err);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
			return -1;
		if (err != 0) {
			errno = err;
			return -1;
		}
	}
	return 0;
}

/*
 * Open a connection to <addr>. Returns the socket, or -1 after printing
 * "gateway not reachable at ADDR: ...".
 */
static int
ctl_connect(const char *addr)
{
	struct sockaddr_un	 sun;
	struct addrinfo		 hints, *res, *ai;
	const char		*path, *port, *end, *start;
	char			 host[256];
	size_t			 hl;
	int			 fd, rc, saved = 0;

	if (strncmp(addr, "unix:", 5) == 0) {
		path = addr + 5;
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		if (strlen(path) >= sizeof(sun.sun_path)) {
			ctl_err("gateway not reachable at %s: socket path "
			    "longer than %zu bytes", addr,
			    sizeof(sun.sun_path) - 1);
			return -1;
		}
		memcpy(sun.sun_path, path, strlen(path));
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) ==
		    -1 || connect_wait(fd, (struct sockaddr *)&sun,
		    sizeof(sun)) == -1) {
			saved = errno;
			if (fd != -1)
				close(fd);
			ctl_err("gateway not reachable at %s: %s (is airlockd "
			    "running?)", addr, strerror(saved));
			return -1;
		}
		return fd;
	}

	/* HOST:PORT, [V6]:PORT */
	if (addr[0] == '[') {
		if ((end = strchr(addr, ']')) == NULL || end[1] != ':')
			goto bad;
		hl = (size_t)(end - addr - 1);
		port = end + 2;
		start = addr + 1;
	} else {
		if ((end = strrchr(addr, ':')) == NULL)
			goto bad;
		hl = (size_t)(end - addr);
		port = end + 1;
		start = addr;
	}
	if (hl == 0 || hl >= sizeof(host) || *port == '\0')
		goto bad;
	memcpy(host, start, hl);
	host[hl] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
		ctl_err("gateway not reachable at %s: %s", addr,
		    gai_strerror(rc));
		return -1;
	}
	fd = -1;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if ((fd = socket(ai->ai_family, ai->ai_socktype |
		    SOCK_CLOEXEC, ai->ai_protocol)) == -1) {
			saved = errno;
			continue;
		}
		if (connect_wait(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1)
		ctl_err("gateway not reachable at %s: %s (is airlockd "
		    "running?)", addr, strerror(saved));
	return fd;
bad:
	ctl_err("bad gateway address \"%s\": use unix:PATH or HOST:PORT",
	    addr);
	return -1;
}

/* Write all of <buf>; 0, or -1 with errno set. */
static int
send_all(int fd, const char *buf, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		switch (wait_fd(fd, POLLOUT, CTL_TIMEOUT_MS)) {
		case 0:
			errno = ETIMEDOUT;
			return -1;
		case -1:
			return -1;
		}
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n == -1)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

struct resp_parse {
	struct ctl_resp	*rp_resp;
	size_t		 rp_cap;
	int		 rp_done;
	int		 rp_toobig;
};

static int
on_body(llhttp_t *p, const char *at, size_t len)
{
	struct resp_parse	*rp = p->data;
	struct ctl_resp		*r = rp->rp_resp;

	if (r->r_len + len > CTL_MAX_BODY) {
		rp->rp_toobig = 1;
		return HPE_USER;
	}
	if (r->r_len + len + 1 > rp->rp_cap) {
		while (r->r_len + len + 1 > rp->rp_cap)
			rp->rp_cap = rp->rp_cap ? rp->rp_cap * 2 : 4096;
		r->r_body = xrealloc(r->r_body, rp->rp_cap);
	}
	memcpy(r->r_body + r->r_len, at, len);
	r->r_len += len;
	r->r_body[r->r_len] = '\0';
	return 0;
}

static int
on_message_complete(llhttp_t *p)
{
	struct resp_parse	*rp = p->data;

	rp->rp_done = 1;
	return HPE_PAUSED;
}

/* The request bytes; caller frees. The token is cleansed by the caller. */
static char *
build_request(const struct ctl *c, const char *method, const char *path,
    const char *token, const char *body, size_t *len)
{
	const char	*host;
	char		*req;
	int		 n;

	host = strncmp(c->c_addr, "unix:", 5) == 0 ? "localhost" : c->c_addr;
	if (body != NULL)
		n = asprintf(&req, "%s %s HTTP/1.1\r\n"
		    "Host: %s\r\n"
		    "User-Agent: airlockctl/%s\r\n"
		    "Authorization: Bearer %s\r\n"
		    "Accept: application/json\r\n"
		    "Content-Type: application/json\r\n"
		    "Content-Length: %zu\r\n"
		    "Connection: close\r\n\r\n%s", method, path, host,
		    PACKAGE_VERSION, token, strlen(body), body);
	else
		n = asprintf(&req, "%s %s HTTP/1.1\r\n"
		    "Host: %s\r\n"
		    "User-Agent: airlockctl/%s\r\n"
		    "Authorization: Bearer %s\r\n"
		    "Accept: application/json\r\n"
		    "%s"
		    "Connection: close\r\n\r\n", method, path, host,
		    PACKAGE_VERSION, token,
		    strcmp(method, "POST") == 0 ? "Content-Length: 0\r\n" : "");
	if (n == -1) {
		fprintf(stderr, "airlockctl: out of memory\n");
		exit(CTL_FAIL);
	}
	*len = (size_t)n;
	return req;
}

/* Read and parse the answer on <fd>. */
static int
read_response(const struct ctl *c, int fd, int timeout_ms,
    struct ctl_resp *r)
{
	llhttp_settings_t	 settings;
	llhttp_t		 parser;
	struct resp_parse	 rp;
	llhttp_errno_t		 err;
	char			 buf[16384];
	ssize_t			 n;
	size_t			 total = 0;

	llhttp_settings_init(&settings);
	settings.on_body = on_body;
	settings.on_message_complete = on_message_complete;
	llhttp_init(&parser, HTTP_RESPONSE, &settings);
	memset(&rp, 0, sizeof(rp));
	rp.rp_resp = r;
	parser.data = &rp;
	r->r_body = xstrdup("");
	rp.rp_cap = 1;

	while (!rp.rp_done) {
		switch (wait_fd(fd, POLLIN, timeout_ms)) {
		case 0:
			ctl_err("no answer from the gateway at %s within %ds",
			    c->c_addr, timeout_ms / 1000);
			return CTL_UNREACHABLE;
		case -1:
			ctl_err("poll: %s", strerror(errno));
			return CTL_FAIL;
		}
		n = recv(fd, buf, sizeof(buf), 0);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n == -1 || n == 0) {
			if (n == -1 && total == 0) {
				ctl_err("gateway at %s closed the connection: "
				    "%s", c->c_addr, strerror(errno));
				return CTL_UNREACHABLE;
			}
			if (n == 0 && total == 0) {
				ctl_err("gateway at %s closed the connection "
				    "without answering", c->c_addr);
				return CTL_UNREACHABLE;
			}
			if (n == 0 && llhttp_finish(&parser) == HPE_OK &&
			    rp.rp_done)
				break;
			ctl_err("gateway at %s closed the connection in the "
			    "middle of its answer", c->c_addr);
			return CTL_FAIL;
		}
		total += (size_t)n;
		err = llhttp_execute(&parser, buf, (size_t)n);
		if (err == HPE_PAUSED || (err == HPE_OK && rp.rp_done))
			break;
		if (err != HPE_OK) {
			if (rp.rp_toobig)
				ctl_err("answer from the gateway at %s is "
				    "larger than %d bytes", c->c_addr,
				    CTL_MAX_BODY);
			else
				ctl_err("bad HTTP answer from the gateway at "
				    "%s: %s", c->c_addr,
				    llhttp_get_error_reason(&parser));
			return CTL_FAIL;
		}
	}
	r->r_status = llhttp_get_status_code(&parser);
	if (r->r_len > 0)
		r->r_json = json_tokener_parse(r->r_body);
	return CTL_OK;
}

int
ctl_request(const struct ctl *c, const char *method, const char *path,
    struct json_object *body, int timeout_ms, struct ctl_resp *r)
{
	char		 token[CTL_MAX_TOKEN + 1], why[512];
	const char	*btext = NULL;
	char		*req;
	size_t		 len;
	int		 fd, rc, saved;

	memset(r, 0, sizeof(*r));
	if (c->c_token_src == NULL) {
		ctl_err("%s", c->c_token_err != NULL ? c->c_token_err :
		    "no admin token");
		return CTL_USAGE;
	}
	if ((fd = ctl_connect(c->c_addr)) == -1)
		return CTL_UNREACHABLE;
	if (ctl_token_read(c->c_token_src, token, sizeof(token), why,
	    sizeof(why)) == -1) {
		OPENSSL_cleanse(token, sizeof(token));
		close(fd);
		ctl_err("cannot read the admin token (%s): %s",
		    c->c_token_from, why);
		return CTL_FAIL;
	}
	if (body != NULL)
		btext = json_object_to_json_string_ext(body,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	req = build_request(c, method, path, token, btext, &len);
	OPENSSL_cleanse(token, sizeof(token));
	rc = send_all(fd, req, len);
	saved = errno;
	OPENSSL_cleanse(req, len);
	free(req);
	/* A refusal may come before the whole request is read: try it. */
	if (rc == -1 && saved == ETIMEDOUT) {
		close(fd);
		ctl_err("gateway at %s does not read its requests (timed out "
		    "after %ds)", c->c_addr, CTL_TIMEOUT_MS / 1000);
		return CTL_UNREACHABLE;
	}
	rc = read_response(c, fd, timeout_ms, r);
	close(fd);
	if (rc != CTL_OK)
		ctl_resp_fini(r);
	return rc;
}

void
ctl_resp_fini(struct ctl_resp *r)
{
	free(r->r_body);
	r->r_body = NULL;
	if (r->r_json != NULL)
		json_object_put(r->r_json);
	r->r_json = NULL;
}
