/*
 * llhttp glue. llhttp is built with LLHTTP_STRICT_MODE and no lenient flag
 * is ever set; on top of it we refuse what llhttp tolerates but a proxy
 * must not relay: duplicate Content-Length, Content-Length together with
 * Transfer-Encoding, transfer codings other than plain "chunked", control
 * bytes in values, several Host headers, userinfo in Host, a Connection
 * header naming a field the message depends on, CONNECT with a body,
 * extra whitespace in the request line, more than a few empty lines
 * before it, and chunk lines over HTTP_MAX_CHUNK_LINE.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>

#include "http/http_msg.h"
#include "util/util.h"

static llhttp_settings_t	http_settings;
static int			http_settings_ready;

static struct http_msg *
msg_of(llhttp_t *p)
{
	return (struct http_msg *)p->data;
}

static int
msg_fail(struct http_msg *m, int status, const char *reason)
{
	if (m->hm_err_status == 0) {
		m->hm_err_status = status;
		snprintf(m->hm_err_reason, sizeof(m->hm_err_reason), "%s",
		    reason);
	}
	return HPE_USER;
}

/* Append to the head arena; bounded by hm_max. */
static int
msg_append(struct http_msg *m, const char *at, size_t len)
{
	size_t	ncap;

	if (m->hm_len + len > m->hm_max)
		return -1;
	/* the arena exists from the first span on, even an empty one: a
	   header may have begun (hm_buf + offset) before any byte came */
	if (m->hm_buf == NULL || m->hm_len + len > m->hm_cap) {
		ncap = m->hm_cap ? m->hm_cap : 1024;
		while (ncap < m->hm_len + len)
			ncap *= 2;
		if (ncap > m->hm_max)
			ncap = m->hm_max;
		m->hm_buf = xrealloc(m->hm_buf, ncap);
		m->hm_cap = ncap;
	}
	if (len > 0)
		memcpy(m->hm_buf + m->hm_len, at, len);
	m->hm_len += len;
	return 0;
}

static int
on_url(llhttp_t *p, const char *at, size_t len)
{
	struct http_msg	*m = msg_of(p);

	if (m->hm_last != 1) {
		m->hm_url = (uint32_t)m->hm_len;
		m->hm_last = 1;
	}
	if (m->hm_url_len + len > HTTP_MAX_URI)
		return msg_fail(m, 414, "request target too long");
	if (msg_append(m, at, len) == -1)
		return msg_fail(m, 431, "request head too large");
	m->hm_url_len += (uint32_t)len;
	return 0;
}

static int
on_status(llhttp_t *p, const char *at, size_t len)
{
	struct http_msg	*m = msg_of(p);

	if (m->hm_last != 4) {
		m->hm_reason = (uint32_t)m->hm_len;
		m->hm_last = 4;
	}
	if (msg_append(m, at, len) == -1)
		return msg_fail(m, 502, "response head too large");
	m->hm_reason_len += (uint32_t)len;
	return 0;
}

static int
head_too_large(struct http_msg *m)
{
	return msg_fail(m, m->hm_type == HTTP_REQUEST ? 431 : 502,
	    m->hm_type == HTTP_REQUEST ? "request head too large" :
	    "response head too large");
}

static int
chunk_line_too_long(struct http_msg *m)
{
	return msg_fail(m, m->hm_type == HTTP_REQUEST ? 400 : 502,
	    "chunk line (size and extensions) over 4 KiB");
}

/*
 * Framing bytes of a chunked body (CRLF, size, extensions, CRLF) between
 * the previous data and <at> in the current feed. Every chunk line must
 * fit in HTTP_MAX_CHUNK_LINE: llhttp bounds neither extensions nor leading
 * zeros, and a line that never ends costs parsing time for nothing.
 */
static int
chunk_gap_check(struct http_msg *m, const char *at)
{
	const char	*from = m->hm_chunk_mark != NULL ? m->hm_chunk_mark :
			    m->hm_feed_start;

	if (at > from)
		m->hm_chunk_gap += (uint64_t)(at - from);
	if (m->hm_chunk_gap > HTTP_MAX_CHUNK_LINE + 4)
		return chunk_line_too_long(m);
	return 0;
}

static int
on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct http_msg		*m = msg_of(p);
	struct http_header	*h;

	if (m->hm_head_done && m->hm_framing == HTTP_BODY_CHUNKED &&
	    !m->hm_trailers) {
		/* the last chunk's line ended before the trailers began;
		   the trailers are bounded by the arena */
		if (chunk_gap_check(m, at) != 0)
			return HPE_USER;
		m->hm_trailers = 1;
		m->hm_trail_at = m->hm_nhdrs;
	}
	if (m->hm_last != 2) {
		if (m->hm_nhdrs == HTTP_MAX_HEADERS)
			return head_too_large(m);
		h = &m->hm_hdrs[m->hm_nhdrs++];
		memset(h, 0, sizeof(*h));
		h->h_name = (uint32_t)m->hm_len;
		m->hm_last = 2;
	}
	h = &m->hm_hdrs[m->hm_nhdrs - 1];
	if (msg_append(m, at, len) == -1)
		return head_too_large(m);
	h->h_name_len += (uint32_t)len;
	return 0;
}

static int
on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct http_msg		*m = msg_of(p);
	struct http_header	*h = &m->hm_hdrs[m->hm_nhdrs - 1];
	size_t			 i;

	/*
	 * llhttp hands an obs-fold continuation over as more value. A real
	 * continuation only happens across a buffer boundary: the last piece
	 * ended at the end of the previous buffer and this one starts ours.
	 */
	if (m->hm_last == 3 && (!m->hm_value_at_end || at != m->hm_feed_start))
		return msg_fail(m, m->hm_type == HTTP_REQUEST ? 400 : 502,
		    "obsolete line folding in header");
	m->hm_value_at_end = at + len == m->hm_feed_end;
	if (m->hm_last != 3) {
		h->h_value = (uint32_t)m->hm_len;
		m->hm_last = 3;
	}
	/* llhttp rejects these in strict mode; keep the guarantee here */
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)at[i];
		if (c == '\r' || c == '\n' || c == '\0' ||
		    (c < 0x20 && c != '\t') || c == 0x7f)
			return msg_fail(m, m->hm_type == HTTP_REQUEST ? 400 :
			    502, "control character in header value");
	}
	if (msg_append(m, at, len) == -1)
		return head_too_large(m);
	h->h_value_len += (uint32_t)len;
	return 0;
}

void
http_msg_value(const struct http_msg *m, int i, const char **v, size_t *len)
{
	*v = m->hm_buf + m->hm_hdrs[i].h_value;
	*len = m->hm_hdrs[i].h_value_len;
	util_trim_ows(v, len);
}

/*
 * A name that is not Transfer-Encoding or Content-Length but becomes one
 * when "_" is read as "-" (CGI, WSGI and some frameworks do).
 */
static int
look_alike(const char *name, size_t len)
{
	static const char *const framing[] = {
		"transfer-encoding", "content-length",
	};
	size_t	i, j;
	int	under;

	for (i = 0; i < 2; i++) {
		if (len != strlen(framing[i]))
			continue;
		under = 0;
		for (j = 0; j < len; j++) {
			char ch = (char)tolower((unsigned char)name[j]);

			if (ch == '_' && framing[i][j] == '-')
				under = 1;
			else if (ch != framing[i][j])
				break;
		}
		if (j == len && under)
			return 1;
	}
	return 0;
}

/*
 * Fields whose removal by a hop that honours Connection changes how the
 * request is framed, routed or upgraded (Varnish CVE-2022-45059): a
 * request that names one in Connection reads two ways.
 */
static const char *const conn_critical[] = {
	"host", "content-length", "transfer-encoding", "content-encoding",
	"content-type", "sec-websocket-key", "sec-websocket-version",
};

/* What only a request head must pass; returns 0 or an llhttp error. */
static int
request_head_check(struct http_msg *m, int nframing)
{
	const char	*v;
	size_t		 vlen, k;
	int		 i;

	for (i = 0; (i = http_msg_find(m, "host", i)) != -1; i++) {
		http_msg_value(m, i, &v, &vlen);
		if (memchr(v, '@', vlen) != NULL)
			return msg_fail(m, 400, "userinfo in Host");
	}
	for (k = 0; k < sizeof(conn_critical) / sizeof(conn_critical[0]); k++)
		if (http_msg_connection_has(m, conn_critical[k]))
			return msg_fail(m, 400, "Connection header names a "
			    "field the request depends on");
	if (m->hm_parser.method == HTTP_CONNECT && nframing > 0)
		return msg_fail(m, 400, "CONNECT with Content-Length or "
		    "Transfer-Encoding");
	return 0;
}

/* Checks the head as a whole; returns 0 or an llhttp error. */
static int
msg_check_head(struct http_msg *m)
{
	int		 ncl, nte, i, rc, req = m->hm_type == HTTP_REQUEST;
	int		 bad = req ? 400 : 502;
	const char	*v;
	size_t		 vlen;

	ncl = http_msg_count(m, "content-length");
	nte = http_msg_count(m, "transfer-encoding");
	if (ncl > 1)
		return msg_fail(m, bad, "duplicate Content-Length");
	if (ncl > 0 && nte > 0)
		return msg_fail(m, bad,
		    "both Content-Length and Transfer-Encoding");
	if (nte > 1)
		return msg_fail(m, bad, "more than one Transfer-Encoding");
	if (nte == 1) {
		i = http_msg_find(m, "transfer-encoding", 0);
		http_msg_value(m, i, &v, &vlen);
		if (!util_strncaseeq(v, vlen, "chunked"))
			return msg_fail(m, req ? 501 : 502,
			    "unsupported transfer coding");
		/* we and llhttp must agree the body is chunked */
		if (!(m->hm_parser.flags & F_CHUNKED))
			return msg_fail(m, bad, "ambiguous Transfer-Encoding");
		if (m->hm_parser.http_major == 1 &&
		    m->hm_parser.http_minor == 0)
			return msg_fail(m, bad,
			    "Transfer-Encoding in an HTTP/1.0 message");
	}
	for (i = 0; i < m->hm_nhdrs; i++) {
		/* "Transfer_Encoding" is Transfer-Encoding to some backends */
		if (look_alike(m->hm_buf + m->hm_hdrs[i].h_name,
		    m->hm_hdrs[i].h_name_len))
			return msg_fail(m, bad, "ambiguous framing header name");
	}
	for (i = 0; i < m->hm_nhdrs; i++)
		if (m->hm_hdrs[i].h_name_len == 0)
			return msg_fail(m, bad, "empty header name");
	if (req && http_msg_count(m, "host") > 1)
		return msg_fail(m, 400, "more than one Host header");
	if (req && (rc = request_head_check(m, ncl + nte)) != 0)
		return rc;
	if (m->hm_parser.http_major != 1)
		return msg_fail(m, req ? 505 : 502, "HTTP version not supported");
	return 0;
}

static int
on_headers_complete(llhttp_t *p)
{
	struct http_msg	*m = msg_of(p);
	int		 rc;

	m->hm_method = p->method;
	m->hm_status = p->status_code;
	m->hm_major = p->http_major;
	m->hm_minor = p->http_minor;
	m->hm_keepalive = llhttp_should_keep_alive(p);
	m->hm_head_done = 1;
	m->hm_last = 0;
	if ((rc = msg_check_head(m)) != 0)
		return rc;

	if (m->hm_type == HTTP_RESPONSE && (m->hm_no_body ||
	    (m->hm_status >= 100 && m->hm_status < 200) ||
	    m->hm_status == 204 || m->hm_status == 304)) {
		m->hm_framing = HTTP_BODY_NONE;
		return m->hm_status == 101 ? 2 : 1;
	}
	if (p->flags & F_CHUNKED)
		m->hm_framing = HTTP_BODY_CHUNKED;
	else if (p->flags & F_CONTENT_LENGTH) {
		m->hm_framing = HTTP_BODY_LENGTH;
		m->hm_content_length = p->content_length;
	} else if (m->hm_type == HTTP_RESPONSE)
		m->hm_framing = HTTP_BODY_EOF;
	else
		m->hm_framing = HTTP_BODY_NONE;
	/* stop so the owner can act on the head before any body byte */
	return HPE_PAUSED;
}

static int
on_body(llhttp_t *p, const char *at, size_t len)
{
	struct http_msg	*m = msg_of(p);

	if (m->hm_framing == HTTP_BODY_CHUNKED) {
		if (chunk_gap_check(m, at) != 0)
			return HPE_USER;
		m->hm_chunk_gap = 0;
		m->hm_chunk_mark = at + len;
	}
	m->hm_body_bytes += len;
	if (m->hm_on_body != NULL)
		m->hm_on_body(m->hm_arg, at, len);
	return 0;
}

static int
on_message_complete(llhttp_t *p)
{
	struct http_msg	*m = msg_of(p);

	m->hm_complete = 1;
	/* an upgrade carries on as a tunnel: let llhttp say so */
	if (p->upgrade)
		return 0;
	return HPE_PAUSED;
}

static void
settings_ready(void)
{
	if (http_settings_ready)
		return;
	llhttp_settings_init(&http_settings);
	http_settings.on_url = on_url;
	http_settings.on_status = on_status;
	http_settings.on_header_field = on_header_field;
	http_settings.on_header_value = on_header_value;
	http_settings.on_headers_complete = on_headers_complete;
	http_settings.on_body = on_body;
	http_settings.on_message_complete = on_message_complete;
	http_settings_ready = 1;
}

static void
msg_clear(struct http_msg *m)
{
	m->hm_len = 0;
	m->hm_head_bytes = 0;
	m->hm_url = m->hm_url_len = 0;
	m->hm_reason = m->hm_reason_len = 0;
	m->hm_nhdrs = 0;
	m->hm_last = 0;
	m->hm_method = 0;
	m->hm_status = 0;
	m->hm_keepalive = 0;
	m->hm_framing = HTTP_BODY_NONE;
	m->hm_content_length = 0;
	m->hm_head_done = 0;
	m->hm_complete = 0;
	m->hm_no_body = 0;
	m->hm_err_status = 0;
	m->hm_err_reason[0] = '\0';
	m->hm_body_bytes = 0;
	m->hm_raw_prev = m->hm_raw_prev2 = 0;
	m->hm_raw_lines = 0;
	m->hm_rl_state = 0;
	m->hm_rl_empty = m->hm_rl_spaces = 0;
	m->hm_rl_prev = 0;
	m->hm_chunk_gap = 0;
	m->hm_chunk_mark = NULL;
	m->hm_trailers = 0;
	m->hm_trail_at = 0;
}

void
http_msg_init(struct http_msg *m, int type, size_t max)
{
	/* called once per thread before any parse; the race is benign as
	 * every thread writes the same values, but do it eagerly anyway */
	settings_ready();
	memset(m, 0, sizeof(*m));
	m->hm_type = type;
	m->hm_max = max;
	llhttp_init(&m->hm_parser, (llhttp_type_t)type, &http_settings);
	m->hm_parser.data = m;
}

void
http_msg_fini(struct http_msg *m)
{
	free(m->hm_buf);
	m->hm_buf = NULL;
	m->hm_cap = m->hm_len = 0;
}

void
http_msg_reset(struct http_msg *m)
{
	msg_clear(m);
	llhttp_init(&m->hm_parser, (llhttp_type_t)m->hm_type, &http_settings);
	m->hm_parser.data = m;
}

void
http_msg_ignore_upgrade(struct http_msg *m)
{
	/* llhttp decides "the rest is another protocol" from this flag
	   after the head callback we paused in */
	m->hm_parser.upgrade = 0;
}

void
http_msg_resume(struct http_msg *m)
{
	if (llhttp_get_errno(&m->hm_parser) == HPE_PAUSED)
		llhttp_resume(&m->hm_parser);
}

static enum http_feed
msg_error(struct http_msg *m, llhttp_errno_t err)
{
	if (m->hm_err_status == 0) {
		int req = m->hm_type == HTTP_REQUEST;

		switch (err) {
		case HPE_PAUSED_H2_UPGRADE:
			/* "PRI * HTTP/2.0": HTTP/2 with prior knowledge */
			m->hm_err_status = req ? 505 : 502;
			snprintf(m->hm_err_reason, sizeof(m->hm_err_reason),
			    "HTTP/2 connection preface (h2c); airlock speaks "
			    "HTTP/1.1");
			return HTTP_FEED_ERROR;
		case HPE_INVALID_METHOD:
			m->hm_err_status = req ? 501 : 502;
			break;
		case HPE_INVALID_VERSION:
			/* a version we do not speak, not a garbled line */
			m->hm_err_status = req && llhttp_get_error_reason(
			    &m->hm_parser) != NULL && strstr(
			    llhttp_get_error_reason(&m->hm_parser),
			    "Invalid HTTP version") != NULL ? 505 : req ? 400 : 502;
			break;
		default:
			m->hm_err_status = req ? 400 : 502;
			break;
		}
		snprintf(m->hm_err_reason, sizeof(m->hm_err_reason),
		    "malformed %s: %s", req ? "request" : "response",
		    llhttp_get_error_reason(&m->hm_parser) ?
		    llhttp_get_error_reason(&m->hm_parser) : llhttp_errno_name(err));
	}
	return HTTP_FEED_ERROR;
}

/*
 * Every line of a head ends in CRLF and no header line starts with
 * whitespace (obs-fold). llhttp is lenient on some of this (an empty
 * value followed by a folded line, a bare LF ending the head), so the raw
 * bytes are checked too. The last two bytes carry over between feeds.
 */
static int
head_bytes_bad(struct http_msg *m, const char *p, size_t len)
{
	const char	*end = p + len, *q, *cr;
	char		 prev = m->hm_raw_prev, prev2 = m->hm_raw_prev2;

	while (p < end) {
		char ch = *p;

		if (prev != '\r' && prev != '\n' && ch != '\r' && ch != '\n') {
			/* no rule looks at the bytes before the next CR or LF */
			if ((q = memchr(p, '\n', (size_t)(end - p))) == NULL)
				q = end;
			if ((cr = memchr(p, '\r', (size_t)(q - p))) != NULL)
				q = cr;
			prev2 = q - p >= 2 ? q[-2] : prev;
			prev = q[-1];
			p = q;
			continue;
		}
		if (prev == '\r' && ch != '\n')
			return 1;			/* bare CR */
		if (ch == '\n' && prev != '\r')
			return 1;			/* bare LF */
		if ((ch == ' ' || ch == '\t') && prev == '\n' &&
		    prev2 == '\r' && m->hm_raw_lines > 0)
			return 1;			/* obs-fold */
		if (ch == '\n')
			m->hm_raw_lines++;
		prev2 = prev;
		prev = ch;
		p++;
	}
	m->hm_raw_prev = prev;
	m->hm_raw_prev2 = prev2;
	return 0;
}

enum {
	RL_START = 0,		/* at the start of a line before it */
	RL_EMPTY_CR,		/* an empty line's CR */
	RL_LINE,		/* in the request line */
	RL_DONE,
};

/* One byte of the request line: NULL, or why it is refused. */
static const char *
request_line_byte(struct http_msg *m, char ch)
{
	const char	*extra = "extra whitespace in the request line";

	switch (ch) {
	case ' ':
		if (m->hm_rl_prev == 0 || m->hm_rl_prev == ' ' ||
		    ++m->hm_rl_spaces > 2)
			return extra;
		break;
	case '\t': case '\v': case '\f':
		return extra;
	case '\r':
		if (m->hm_rl_prev == ' ')
			return extra;
		if (m->hm_rl_spaces != 2)
			return "request line is not METHOD SP TARGET SP VERSION";
		m->hm_rl_state = RL_DONE;
		break;
	case '\n':
		m->hm_rl_state = RL_DONE;	/* bare LF: head_bytes_bad() */
		break;
	}
	m->hm_rl_prev = ch;
	return NULL;
}

/*
 * The request line, on the raw bytes: exactly "METHOD SP TARGET SP
 * VERSION" (llhttp accepts runs of spaces between them) after at most
 * HTTP_MAX_EMPTY_LINES empty lines (llhttp skips any number). The state
 * carries over between feeds. Returns NULL or why it is refused.
 */
static const char *
request_line_bad(struct http_msg *m, const char *p, size_t len)
{
	const char	*why;
	size_t		 i;

	for (i = 0; i < len && m->hm_rl_state != RL_DONE; i++) {
		switch (m->hm_rl_state) {
		case RL_START:
			if (p[i] == '\r') {
				m->hm_rl_state = RL_EMPTY_CR;
				continue;
			}
			m->hm_rl_state = RL_LINE;
			m->hm_rl_prev = 0;
			/* FALLTHROUGH */
		case RL_LINE:
			if ((why = request_line_byte(m, p[i])) != NULL)
				return why;
			break;
		case RL_EMPTY_CR:
			if (p[i] != '\n') {
				m->hm_rl_state = RL_DONE; /* head_bytes_bad() */
				break;
			}
			if (++m->hm_rl_empty > HTTP_MAX_EMPTY_LINES)
				return "too many empty lines before the request "
				    "line";
			m->hm_rl_state = RL_START;
			break;
		}
	}
	return NULL;
}

enum http_feed
http_msg_feed(struct http_msg *m, const char *data, size_t len,
    size_t *consumed)
{
	llhttp_errno_t	 err;
	const char	*pos, *why;
	size_t		 used;
	int		 in_head = !m->hm_head_done;
	int		 was_complete = m->hm_complete;

	*consumed = 0;
	if (m->hm_err_status != 0)
		return HTTP_FEED_ERROR;
	m->hm_feed_start = data;
	m->hm_feed_end = data + len;
	m->hm_chunk_mark = NULL;
	err = llhttp_execute(&m->hm_parser, data, len);
	if (err == HPE_OK)
		used = len;
	else {
		pos = llhttp_get_error_pos(&m->hm_parser);
		used = pos != NULL && pos >= data ? (size_t)(pos - data) : 0;
	}
	*consumed = used;
	/*
	 * The request line's own verdict wins over whatever llhttp or its
	 * callbacks said about the same bytes, so that the answer does not
	 * depend on how the bytes were split; llhttp has read the target
	 * meanwhile, for the audit. The state machine stops at the line's
	 * end, so the bytes after it are not looked at.
	 */
	if (in_head && m->hm_type == HTTP_REQUEST &&
	    (why = request_line_bad(m, data, len)) != NULL) {
		m->hm_err_status = 400;
		snprintf(m->hm_err_reason, sizeof(m->hm_err_reason), "%s", why);
		return HTTP_FEED_ERROR;
	}
	/* the chunk line this feed ends in counts on into the next one;
	   the last chunk's line may end the message (no trailers) */
	if ((err == HPE_OK || err == HPE_PAUSED) && !in_head &&
	    !was_complete && m->hm_framing == HTTP_BODY_CHUNKED &&
	    !m->hm_trailers && m->hm_err_status == 0 &&
	    chunk_gap_check(m, data + used) != 0)
		return HTTP_FEED_ERROR;
	m->hm_chunk_mark = NULL;
	/* line endings of the head are checked on the raw bytes */
	if (in_head && head_bytes_bad(m, data, m->hm_head_done ? used : len) &&
	    m->hm_err_status == 0) {
		msg_fail(m, m->hm_type == HTTP_REQUEST ? 400 : 502,
		    "bare CR or LF, or obsolete line folding, in head");
		return HTTP_FEED_ERROR;
	}
	/* a head completed in this call is bounded by the arena instead */
	if (in_head && !m->hm_head_done) {
		m->hm_head_bytes += used;
		if (m->hm_head_bytes > m->hm_max && m->hm_err_status == 0)
			return msg_error(m, (llhttp_errno_t)head_too_large(m));
	}
	switch (err) {
	case HPE_OK:
		return HTTP_FEED_MORE;
	case HPE_PAUSED:
		return m->hm_complete ? HTTP_FEED_DONE : HTTP_FEED_HEAD;
	case HPE_PAUSED_UPGRADE:
		return HTTP_FEED_UPGRADE;
	default:
		return msg_error(m, err);
	}
}

enum http_feed
http_msg_finish(struct http_msg *m)
{
	llhttp_errno_t	err;

	/* after a pause at the head, step into the body state first */
	if (llhttp_get_errno(&m->hm_parser) == HPE_OK)
		(void)llhttp_execute(&m->hm_parser, "", 0);
	if (m->hm_complete)
		return HTTP_FEED_DONE;
	err = llhttp_finish(&m->hm_parser);
	if (err == HPE_OK || err == HPE_PAUSED)
		return m->hm_complete ? HTTP_FEED_DONE : HTTP_FEED_MORE;
	return msg_error(m, err);
}

const char *
http_msg_method(const struct http_msg *m)
{
	return llhttp_method_name((llhttp_method_t)m->hm_method);
}

void
http_msg_remove(struct http_msg *m, int i)
{
	if (i < 0 || i >= m->hm_nhdrs)
		return;
	memmove(&m->hm_hdrs[i], &m->hm_hdrs[i + 1],
	    (size_t)(m->hm_nhdrs - i - 1) * sizeof(m->hm_hdrs[0]));
	m->hm_nhdrs--;
}

int
http_msg_find(const struct http_msg *m, const char *name, int from)
{
	size_t	len = strlen(name);
	int	i;

	/* per field of every message: the length first, once */
	for (i = from; i < m->hm_nhdrs; i++)
		if (m->hm_hdrs[i].h_name_len == len && strncasecmp(m->hm_buf +
		    m->hm_hdrs[i].h_name, name, len) == 0)
			return i;
	return -1;
}

int
http_msg_count(const struct http_msg *m, const char *name)
{
	int	i, n = 0;

	for (i = 0; (i = http_msg_find(m, name, i)) != -1; i++)
		n++;
	return n;
}

int
http_msg_connection_has(const struct http_msg *m, const char *token)
{
	return http_msg_list_has(m, "connection", token);
}

int
http_msg_list_has(const struct http_msg *m, const char *field,
    const char *token)
{
	const char	*v, *tok;
	size_t		 vlen, toklen;
	int		 i;

	for (i = 0; (i = http_msg_find(m, field, i)) != -1; i++) {
		v = m->hm_buf + m->hm_hdrs[i].h_value;
		vlen = m->hm_hdrs[i].h_value_len;
		while (vlen > 0) {
			tok = v;
			while (vlen > 0 && *v != ',') {
				v++;
				vlen--;
			}
			toklen = (size_t)(v - tok);
			util_trim_ows(&tok, &toklen);
			if (util_strncaseeq(tok, toklen, token))
				return 1;
			if (vlen > 0) {
				v++;
				vlen--;
			}
		}
	}
	return 0;
}

int
http_msg_is_hop(const struct http_msg *m, const char *name, size_t len)
{
#define HOP(s)	{ s, sizeof(s) - 1 }
	static const struct {
		const char	*h;
		size_t		 len;
	} hop[] = {
		HOP("connection"), HOP("keep-alive"),
		HOP("proxy-authenticate"), HOP("proxy-authorization"),
		HOP("proxy-connection"), HOP("te"), HOP("trailer"),
		HOP("transfer-encoding"), HOP("upgrade"),
		HOP("http2-settings"),
	};
#undef HOP
	char	tmp[64];
	size_t	i;

	/* per field written: lengths first */
	for (i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (hop[i].len == len && strncasecmp(name, hop[i].h, len) == 0)
			return 1;
	if (len >= sizeof(tmp))
		return 0;
	memcpy(tmp, name, len);
	tmp[len] = '\0';
	return http_msg_connection_has(m, tmp);
}

static int
is_tchar(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

int
http_msg_method_override(const struct http_msg *m, char *out, size_t outsz)
{
	static const char *const names[] = {
		"x-http-method-override", "x-http-method", "x-method-override",
	};
	const char	*v;
	size_t		 vlen, k, j;
	int		 i, found = 0;

	for (k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		for (i = 0; (i = http_msg_find(m, names[k], i)) != -1; i++) {
			http_msg_value(m, i, &v, &vlen);
			if (vlen == 0 || vlen >= outsz)
				return -1;
			for (j = 0; j < vlen; j++)
				if (!is_tchar((unsigned char)v[j]))
					return -1;
			if (found && !util_strncaseeq(v, vlen, out))
				return -1;	/* two methods: which one? */
			for (j = 0; j < vlen; j++)
				out[j] = (char)toupper((unsigned char)v[j]);
			out[vlen] = '\0';
			found = 1;
		}
	}
	return found;
}

int
http_is_path_override(const char *name, size_t len)
{
	return util_strncaseeq(name, len, "x-original-url") ||
	    util_strncaseeq(name, len, "x-rewrite-url") ||
	    util_strncaseeq(name, len, "x-original-uri");
}
