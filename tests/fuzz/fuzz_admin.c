/*
 * libFuzzer: the admin API request path. admin.c's llhttp callbacks are
 * static and tied to a bufferevent, so this target runs llhttp with the
 * same settings (request mode, the same callbacks' bounds: target up to
 * ADMIN_URL_MAX, body up to ADMIN_BODY_MAX, head up to ADMIN_HEAD_MAX) and
 * hands each complete request to the exported admin_route() the way
 * on_message_complete() does (the bearer check is skipped: the routes are
 * what parse the rest). The config has one policy and one sandbox; the
 * sandboxes a request creates are deleted after each input. The warm
 * pool is started on an event base that never runs, so it only counts.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <llhttp.h>

#include "admin/admin_internal.h"
#include "cfg/cfg.h"
#include "sbx/sbx.h"
#include "sched/pool.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define URL_MAX		2048		/* admin.c ADMIN_URL_MAX */
#define BODY_MAX	(1024 * 1024)	/* ADMIN_BODY_MAX */
#define HEAD_MAX	(64 * 1024)	/* ADMIN_HEAD_MAX */

struct fz_conn {
	char		 url[URL_MAX];
	size_t		 url_len;
	int		 url_toolong;
	size_t		 head_bytes;
	struct evbuffer	*body;
	int		 body_toolong;
	int		 nreq;
};

static struct cfg	*fz_cfg;
static llhttp_settings_t fz_settings;

static const char fz_yaml[] =
    "state_dir: /nonexistent/airlock-fuzz\n"
    "policies:\n"
    "  - name: p\n"
    "    rules: [{host: \"a.test\"}, {host: \"*.b.test\", ports: [443]}]\n"
    "sandboxes:\n"
    "  - {id: s1, policy: p, token: \"literal:t1\"}\n";

static const struct cfg *
fz_hook_cfg(void)
{
	return fz_cfg;
}

static int
fz_hook_reload(char **errs)
{
	*errs = strdup("fuzz.yaml:1:1: error: reload refused in the fuzzer\n");
	return -1;
}

static int
on_url(llhttp_t *p, const char *at, size_t len)
{
	struct fz_conn	*c = p->data;

	if (c->url_len + len >= sizeof(c->url)) {
		c->url_toolong = 1;
		return 0;
	}
	memcpy(c->url + c->url_len, at, len);
	c->url_len += len;
	c->url[c->url_len] = '\0';
	return 0;
}

static int
on_header(llhttp_t *p, const char *at, size_t len)
{
	struct fz_conn	*c = p->data;

	c->head_bytes += len;
	return c->head_bytes > HEAD_MAX ? -1 : 0;
}

static int
on_body(llhttp_t *p, const char *at, size_t len)
{
	struct fz_conn	*c = p->data;

	if (evbuffer_get_length(c->body) + len > BODY_MAX)
		c->body_toolong = 1;
	else
		evbuffer_add(c->body, at, len);
	return 0;
}

static int
on_message_complete(llhttp_t *p)
{
	struct fz_conn		*c = p->data;
	struct admin_resp	 r;
	struct admin_req	 q;
	size_t			 blen;

	memset(&r, 0, sizeof(r));
	r.ar_body = evbuffer_new();
	memcpy(r.ar_id, "000000000000000000000000", 24);
	memset(&q, 0, sizeof(q));
	q.aq_method = llhttp_get_method(p);
	q.aq_url = c->url;
	blen = evbuffer_get_length(c->body);
	q.aq_body = blen ? (const char *)evbuffer_pullup(c->body, -1) : "";
	q.aq_body_len = blen;
	if (!c->url_toolong && !c->body_toolong && c->nreq++ < 8)
		admin_route(&q, &r);
	if (r.ar_status != 0 && (r.ar_status < 200 || r.ar_status > 599))
		abort();
	evbuffer_free(r.ar_body);
	evbuffer_drain(c->body, evbuffer_get_length(c->body));
	c->url_len = 0;
	c->url[0] = '\0';
	c->url_toolong = c->body_toolong = 0;
	c->head_bytes = 0;
	return 0;
}

static void
fz_init(void)
{
	struct admin_hooks	h = { fz_hook_reload, fz_hook_cfg };
	char			dir[] = "/tmp/airlock-fuzz-XXXXXX";
	FILE			*devnull;
	int			 nerr = 0;

	if ((devnull = fopen("/dev/null", "w")) == NULL)
		abort();
	fz_cfg = cfg_load_buffer("fuzz.yaml", fz_yaml, strlen(fz_yaml),
	    devnull, &nerr);
	fclose(devnull);
	if (fz_cfg == NULL || mkdtemp(dir) == NULL || sbx_init(dir) == -1)
		abort();
	sbx_sync_config(fz_cfg);
	/* the pool's timer is on a base never dispatched: prewarm requests
	   are counted, nothing is ever launched */
	if (pool_start(event_base_new(), fz_hook_cfg) == -1)
		abort();
	admin_hooks = h;
	llhttp_settings_init(&fz_settings);
	fz_settings.on_url = on_url;
	fz_settings.on_header_field = on_header;
	fz_settings.on_header_value = on_header;
	fz_settings.on_body = on_body;
	fz_settings.on_message_complete = on_message_complete;
}

/* Drop what the requests created, so inputs stay independent. */
static void
fz_cleanup(void)
{
	struct sbx	**list;
	size_t		  i, n;

	sbx_drop_pooled();
	n = sbx_list(&list);
	for (i = 0; i < n; i++)
		(void)sbx_delete(list[i]->sb_id);
	sbx_list_free(list, n);
	sbx_sync_config(fz_cfg);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_conn	c;
	llhttp_t	p;

	if (fz_cfg == NULL)
		fz_init();
	memset(&c, 0, sizeof(c));
	c.body = evbuffer_new();
	llhttp_init(&p, HTTP_REQUEST, &fz_settings);
	p.data = &c;
	(void)llhttp_execute(&p, (const char *)data, size);
	evbuffer_free(c.body);
	fz_cleanup();
	return 0;
}
