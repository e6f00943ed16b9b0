/*
 * HTTP/1 heads as a proxy writes them (see http_write.h). Every request
 * and response passes here, so no printf: literals and util_u64_dec.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "http/http_write.h"
#include "util/util.h"

#define ADD(o, p, n)	((o)->hs_add((o)->hs_arg, (p), (n)))
#define ADDLIT(o, s)	ADD(o, s, sizeof(s) - 1)

/* a head may carry a substituted secret: no copy is left behind */
static void
buf_wipe(struct hw_buf *b)
{
	if (b->hb_p != NULL) {
		OPENSSL_cleanse(b->hb_p, b->hb_cap);
		free(b->hb_p);
	}
	b->hb_p = NULL;
	b->hb_cap = 0;
}

static void
buf_add(void *arg, const void *p, size_t n)
{
	struct hw_buf	*b = arg;
	size_t		 cap;
	char		*np;

	if (n == 0)
		return;
	if (b->hb_len + n > b->hb_cap) {
		cap = b->hb_cap ? b->hb_cap : 256;
		while (cap < b->hb_len + n)
			cap *= 2;
		np = xmalloc(cap);
		if (b->hb_len > 0)
			memcpy(np, b->hb_p, b->hb_len);
		buf_wipe(b);
		b->hb_p = np;
		b->hb_cap = cap;
	}
	memcpy(b->hb_p + b->hb_len, p, n);
	b->hb_len += n;
}

void
hw_buf_sink(struct hw_buf *b, struct hw_sink *s)
{
	s->hs_add = buf_add;
	s->hs_arg = b;
}

void
hw_buf_fini(struct hw_buf *b)
{
	buf_wipe(b);
	b->hb_len = 0;
}

void
hw_gather_flush(struct hw_gather *g)
{
	if (g->hg_len == 0)
		return;
	g->hg_to.hs_add(g->hg_to.hs_arg, g->hg_buf, g->hg_len);
	OPENSSL_cleanse(g->hg_buf, g->hg_len);
	g->hg_len = 0;
}

static void
gather_add(void *arg, const void *p, size_t n)
{
	struct hw_gather	*g = arg;

	if (n > sizeof(g->hg_buf) - g->hg_len) {
		hw_gather_flush(g);
		if (n >= sizeof(g->hg_buf)) {
			g->hg_to.hs_add(g->hg_to.hs_arg, p, n);
			return;
		}
	}
	memcpy(g->hg_buf + g->hg_len, p, n);
	g->hg_len += n;
}

void
hw_gather_sink(struct hw_gather *g, const struct hw_sink *to,
    struct hw_sink *s)
{
	g->hg_to = *to;
	g->hg_len = 0;
	s->hs_add = gather_add;
	s->hs_arg = g;
}

size_t
http_write_host(char *buf, size_t sz, const char *host, int port,
    int default_port)
{
	char	num[22];
	int	v6 = strchr(host, ':') != NULL;
	size_t	n;

	n = util_copy_str(buf, v6 ? "[" : "", sz);
	n += util_copy_str(buf + n, host, sz - n);
	n += util_copy_str(buf + n, v6 ? "]" : "", sz - n);
	if (port != default_port) {
		num[0] = ':';
		util_u64_dec((uint64_t)port, num + 1);
		n += util_copy_str(buf + n, num, sz - n);
	}
	return n;
}

static int
req_dropped(const struct http_msg *m, const struct hw_req *q,
    const char *name, size_t nlen)
{
	size_t	k;

	if (http_msg_is_hop(m, name, nlen) ||
	    util_strncaseeq(name, nlen, "host") ||
	    util_strncaseeq(name, nlen, "content-length") ||
	    (nlen > 6 && strncasecmp(name, "proxy-", 6) == 0) ||
	    (q->hq_held && util_strncaseeq(name, nlen, "expect")))
		return 1;
	for (k = 0; k < q->hq_nrw; k++)
		if (q->hq_rw[k]->hr_drop != NULL &&
		    q->hq_rw[k]->hr_drop(q->hq_rw[k]->hr_arg, name, nlen))
			return 1;
	return 0;
}

/* Field <i> of <m>, its value OWS-trimmed and through <vrw> if any. */
static void
write_field(const struct http_msg *m, int i, const struct hw_sink *out,
    const struct hw_rewrite *vrw)
{
	const char	*v;
	size_t		 vlen;

	http_msg_value(m, i, &v, &vlen);
	ADD(out, http_msg_str(m, m->hm_hdrs[i].h_name),
	    m->hm_hdrs[i].h_name_len);
	ADDLIT(out, ": ");
	if (vrw != NULL)
		vrw->hr_value(vrw->hr_arg, v, vlen, out);
	else
		ADD(out, v, vlen);
	ADDLIT(out, "\r\n");
}

int
http_write_request_head(const struct http_msg *m, const struct hw_req *q,
    const struct hw_sink *out)
{
	const struct hw_rewrite	*vrw = NULL;
	const char		*name;
	char			 num[21];
	size_t			 nlen, k;
	int			 i, chunked = 0;

	for (k = 0; k < q->hq_nrw && vrw == NULL; k++)
		if (q->hq_rw[k]->hr_value != NULL)
			vrw = q->hq_rw[k];
	ADD(out, q->hq_method, strlen(q->hq_method));
	ADDLIT(out, " ");
	ADD(out, q->hq_path, strlen(q->hq_path));
	if (q->hq_query != NULL && q->hq_query[0] != '\0') {
		ADDLIT(out, "?");
		ADD(out, q->hq_query, strlen(q->hq_query));
	}
	ADDLIT(out, " HTTP/1.1\r\nHost: ");
	ADD(out, q->hq_host, q->hq_hostlen);
	ADDLIT(out, "\r\n");
	for (i = 0; i < m->hm_nhdrs; i++) {
		name = http_msg_str(m, m->hm_hdrs[i].h_name);
		nlen = m->hm_hdrs[i].h_name_len;
		if (req_dropped(m, q, name, nlen))
			continue;
		write_field(m, i, out, vrw);
	}
	for (k = 0; k < q->hq_nrw; k++)
		if (q->hq_rw[k]->hr_fields != NULL)
			q->hq_rw[k]->hr_fields(q->hq_rw[k]->hr_arg, out);
	if (q->hq_upgrade)
		ADDLIT(out, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	if (q->hq_held) {
		ADDLIT(out, "Content-Length: ");
		ADD(out, num, util_u64_dec((uint64_t)q->hq_held_len, num));
		ADDLIT(out, "\r\n");
	} else if (m->hm_framing == HTTP_BODY_CHUNKED || (q->hq_chunked &&
	    m->hm_framing == HTTP_BODY_LENGTH && m->hm_content_length > 0)) {
		ADDLIT(out, "Transfer-Encoding: chunked\r\n");
		chunked = 1;
	} else if (m->hm_framing == HTTP_BODY_LENGTH) {
		ADDLIT(out, "Content-Length: ");
		ADD(out, num, util_u64_dec(m->hm_content_length, num));
		ADDLIT(out, "\r\n");
	}
	ADDLIT(out, "\r\n");
	return chunked;
}

void
http_write_status_fields(const struct http_msg *m, const struct hw_sink *out)
{
	const char	*name;
	char		 num[21];
	size_t		 nlen;
	int		 i;

	ADDLIT(out, "HTTP/1.1 ");
	ADD(out, num, util_u64_dec((uint64_t)m->hm_status, num));
	ADDLIT(out, " ");
	ADD(out, http_msg_str(m, m->hm_reason), m->hm_reason_len);
	ADDLIT(out, "\r\n");
	for (i = 0; i < m->hm_nhdrs; i++) {
		name = http_msg_str(m, m->hm_hdrs[i].h_name);
		nlen = m->hm_hdrs[i].h_name_len;
		if (http_msg_is_hop(m, name, nlen) ||
		    (util_strncaseeq(name, nlen, "content-length") &&
		    m->hm_framing != HTTP_BODY_NONE))
			continue;
		write_field(m, i, out, NULL);
	}
}

void
http_write_trailers(const struct http_msg *m, const struct hw_sink *out)
{
	const char	*name;
	size_t		 nlen;
	int		 i;

	if (!m->hm_trailers)
		return;
	for (i = m->hm_trail_at; i < m->hm_nhdrs; i++) {
		name = http_msg_str(m, m->hm_hdrs[i].h_name);
		nlen = m->hm_hdrs[i].h_name_len;
		if (http_msg_is_hop(m, name, nlen) ||
		    util_strncaseeq(name, nlen, "content-length") ||
		    util_strncaseeq(name, nlen, "transfer-encoding"))
			continue;
		write_field(m, i, out, NULL);
	}
}

int
http_write_response_end(const struct hw_resp *p, const struct hw_sink *out)
{
	char	num[21];
	int	flags = 0;

	if (p->hp_id != NULL) {
		ADDLIT(out, "X-Airlock-Request-Id: ");
		ADD(out, p->hp_id, strlen(p->hp_id));
		ADDLIT(out, "\r\n");
		switch (p->hp_framing) {
		case HTTP_BODY_LENGTH:
			ADDLIT(out, "Content-Length: ");
			ADD(out, num, util_u64_dec(p->hp_length, num));
			ADDLIT(out, "\r\n");
			break;
		case HTTP_BODY_CHUNKED:
		case HTTP_BODY_EOF:
			/* an HTTP/1.0 client has no chunking: the close
			   ends the body */
			if (p->hp_http10)
				flags |= HW_CLOSE_DELIM;
			else {
				flags |= HW_RECHUNK;
				ADDLIT(out, "Transfer-Encoding: chunked\r\n");
			}
			break;
		case HTTP_BODY_NONE:
			break;
		}
		if (p->hp_upgrade)
			ADDLIT(out, "Connection: Upgrade\r\n"
			    "Upgrade: websocket\r\n");
		else if (p->hp_close || (flags & HW_CLOSE_DELIM))
			ADDLIT(out, "Connection: close\r\n");
		else if (p->hp_http10)
			ADDLIT(out, "Connection: keep-alive\r\n");
	}
	ADDLIT(out, "\r\n");
	return flags;
}

const char *
http_reason_phrase(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 203: return "Non-Authoritative Information";
	case 204: return "No Content";
	case 205: return "Reset Content";
	case 206: return "Partial Content";
	case 300: return "Multiple Choices";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 402: return "Payment Required";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 407: return "Proxy Authentication Required";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 411: return "Length Required";
	case 412: return "Precondition Failed";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 416: return "Range Not Satisfiable";
	case 417: return "Expectation Failed";
	case 421: return "Misdirected Request";
	case 422: return "Unprocessable Content";
	case 426: return "Upgrade Required";
	case 428: return "Precondition Required";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 451: return "Unavailable For Legal Reasons";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	}
	switch (status / 100) {
	case 1: return "Informational";
	case 2: return "Success";
	case 3: return "Redirection";
	case 4: return "Client Error";
	default: return "Server Error";
	}
}
