/*
 * airlock's own request parser (src/http/http_msg.c) over raw connection
 * bytes, for tests/integration/345-differential.sh: what airlock believes
 * each message of the stream is, to compare with what an upstream receives.
 *
 * usage: httpparse [-m HEAD_MAX] FILE...
 *
 * Each FILE is the byte stream of one client connection. The bytes go
 * through http_msg_feed() the way conn.c's request loop drives it (resume
 * after the head, an Upgrade other than websocket ignored, an empty feed
 * when no body follows, reset after each message) until an error, an upgrade or the end of the data. One JSON
 * object per FILE goes to stdout:
 *
 *   {"file": F, "msgs": [M...], "rest": BYTES_NOT_CONSUMED}
 *
 * with M {"r": "done", "method", "target_hex", "version", "framing",
 * "keepalive", "body_hex", "consumed"} for a complete message,
 * {"r": "error", "status", "reason", "head_done"} for a refusal (head_done:
 * the error came after the head, in the body), {"r": "upgrade", ...} for
 * CONNECT/Upgrade, {"r": "incomplete", "head_done"} when the data ended
 * inside a message. Exit 0, or 2 on a usage or I/O error.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "http/http_msg.h"
#include "util/util.h"

#define MAX_MSGS	64

struct body {
	char	*b_buf;
	size_t	 b_len;
	size_t	 b_cap;
};

static void
on_body(void *arg, const char *p, size_t len)
{
	struct body	*b = arg;

	if (b->b_len + len > b->b_cap) {
		b->b_cap = (b->b_len + len) * 2 + 64;
		if ((b->b_buf = realloc(b->b_buf, b->b_cap)) == NULL) {
			perror("realloc");
			exit(2);
		}
	}
	memcpy(b->b_buf + b->b_len, p, len);
	b->b_len += len;
}

/* As conn.c's on_request_head: only a WebSocket upgrade is honoured;
 * any other (h2c) leaves an HTTP/1.1 request. */
static void
upgrade_policy(struct http_msg *m)
{
	const char	*v;
	size_t		 vlen;
	int		 i;

	if (m->hm_method == HTTP_CONNECT ||
	    (i = http_msg_find(m, "upgrade", 0)) == -1 ||
	    !http_msg_connection_has(m, "upgrade"))
		return;
	v = http_msg_str(m, m->hm_hdrs[i].h_value);
	vlen = m->hm_hdrs[i].h_value_len;
	util_trim_ows(&v, &vlen);
	if (!util_strncaseeq(v, vlen, "websocket"))
		http_msg_ignore_upgrade(m);
}

static json_object *
hex(const char *p, size_t len)
{
	static const char	 digits[] = "0123456789abcdef";
	json_object		*o;
	char			*h;
	size_t			 i;

	if ((h = malloc(2 * len + 1)) == NULL) {
		perror("malloc");
		exit(2);
	}
	for (i = 0; i < len; i++) {
		h[2 * i] = digits[(unsigned char)p[i] >> 4];
		h[2 * i + 1] = digits[(unsigned char)p[i] & 15];
	}
	h[2 * len] = '\0';
	o = json_object_new_string(h);
	free(h);
	return o;
}

static const char *
framing_name(enum http_framing f)
{
	switch (f) {
	case HTTP_BODY_NONE: return "none";
	case HTTP_BODY_LENGTH: return "length";
	case HTTP_BODY_CHUNKED: return "chunked";
	case HTTP_BODY_EOF: return "eof";
	}
	return "?";
}

/* The head's facts, into <o>. */
static void
add_head(json_object *o, const struct http_msg *m)
{
	char	ver[16];

	json_object_object_add(o, "method",
	    json_object_new_string(http_msg_method(m)));
	json_object_object_add(o, "target_hex",
	    hex(http_msg_str(m, m->hm_url), m->hm_url_len));
	snprintf(ver, sizeof(ver), "%d.%d", m->hm_major, m->hm_minor);
	json_object_object_add(o, "version", json_object_new_string(ver));
	json_object_object_add(o, "framing",
	    json_object_new_string(framing_name(m->hm_framing)));
	json_object_object_add(o, "keepalive",
	    json_object_new_boolean(m->hm_keepalive));
}

static void
parse_one(const char *file, const char *in, size_t n, size_t max)
{
	struct http_msg	 m;
	struct body	 b;
	json_object	*top, *msgs, *o;
	enum http_feed	 f;
	size_t		 off = 0, used, start = 0;
	int		 stop = 0, nmsgs = 0, guard = 0;

	memset(&b, 0, sizeof(b));
	http_msg_init(&m, HTTP_REQUEST, max);
	m.hm_on_body = on_body;
	m.hm_arg = &b;
	top = json_object_new_object();
	msgs = json_object_new_array();
	json_object_object_add(top, "file", json_object_new_string(file));

	while (!stop && (off < n || (m.hm_head_done && !m.hm_complete &&
	    (m.hm_framing == HTTP_BODY_NONE ||
	    (m.hm_framing == HTTP_BODY_LENGTH &&
	    m.hm_content_length == 0))))) {
		if (++guard > 16 * MAX_MSGS) {
			fprintf(stderr, "%s: no progress\n", file);
			exit(2);
		}
		f = http_msg_feed(&m, in + off, n - off, &used);
		off += used;
		switch (f) {
		case HTTP_FEED_MORE:
			break;
		case HTTP_FEED_HEAD:
			upgrade_policy(&m);
			http_msg_resume(&m);
			break;
		case HTTP_FEED_DONE:
			o = json_object_new_object();
			json_object_object_add(o, "r",
			    json_object_new_string("done"));
			add_head(o, &m);
			json_object_object_add(o, "body_hex",
			    hex(b.b_buf, b.b_len));
			json_object_object_add(o, "consumed",
			    json_object_new_int64((int64_t)(off - start)));
			json_object_array_add(msgs, o);
			b.b_len = 0;
			start = off;
			if (++nmsgs >= MAX_MSGS)
				stop = 1;
			http_msg_reset(&m);
			m.hm_on_body = on_body;
			m.hm_arg = &b;
			break;
		case HTTP_FEED_UPGRADE:
			o = json_object_new_object();
			json_object_object_add(o, "r",
			    json_object_new_string("upgrade"));
			add_head(o, &m);
			json_object_array_add(msgs, o);
			stop = 1;
			break;
		case HTTP_FEED_ERROR:
			o = json_object_new_object();
			json_object_object_add(o, "r",
			    json_object_new_string("error"));
			json_object_object_add(o, "status",
			    json_object_new_int(m.hm_err_status));
			json_object_object_add(o, "reason",
			    json_object_new_string(m.hm_err_reason));
			json_object_object_add(o, "head_done",
			    json_object_new_boolean(m.hm_head_done));
			json_object_array_add(msgs, o);
			stop = 1;
			break;
		}
	}
	if (!stop && (m.hm_head_done || m.hm_head_bytes > 0)) {
		o = json_object_new_object();
		json_object_object_add(o, "r",
		    json_object_new_string("incomplete"));
		json_object_object_add(o, "head_done",
		    json_object_new_boolean(m.hm_head_done));
		json_object_array_add(msgs, o);
	}
	json_object_object_add(top, "msgs", msgs);
	json_object_object_add(top, "rest",
	    json_object_new_int64((int64_t)(n - off)));
	puts(json_object_to_json_string_ext(top, JSON_C_TO_STRING_PLAIN));
	json_object_put(top);
	http_msg_fini(&m);
	free(b.b_buf);
}

int
main(int argc, char **argv)
{
	FILE	*fp;
	char	*buf = NULL;
	size_t	 len, r, cap = 0, max = 64 * 1024;
	int	 ch, i;

	while ((ch = getopt(argc, argv, "m:")) != -1) {
		switch (ch) {
		case 'm':
			max = strtoul(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: httpparse [-m HEAD_MAX] "
			    "FILE...\n");
			return 2;
		}
	}
	for (i = optind; i < argc; i++) {
		if ((fp = fopen(argv[i], "rb")) == NULL) {
			perror(argv[i]);
			return 2;
		}
		len = 0;
		for (;;) {
			if (len == cap) {
				cap = cap * 2 + 65536;
				if ((buf = realloc(buf, cap)) == NULL) {
					perror("realloc");
					return 2;
				}
			}
			r = fread(buf + len, 1, cap - len, fp);
			if (r == 0)
				break;
			len += r;
		}
		if (ferror(fp)) {
			perror(argv[i]);
			return 2;
		}
		fclose(fp);
		parse_one(argv[i], buf, len, max);
	}
	free(buf);
	return 0;
}
