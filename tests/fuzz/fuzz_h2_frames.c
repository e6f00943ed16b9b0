/*
 * libFuzzer: the HTTP/2 server frame path (issue 19 point 4). The input
 * is what a client sends after the connection preface (which the target
 * prepends). It reaches a real h2 session, h2_srv_start() on a
 * connection whose TLS handshake is taken as done (ALPN h2, sandbox s1,
 * server name a.test:443), through a bufferevent pair instead of the
 * TLS socket: nghttp2's frame and HPACK parsing with our options
 * (streams, resets, SETTINGS, CONTINUATION), our callbacks (header list
 * bounds, pseudo-headers, cookies, bodies with and without
 * content-length) and every stream's own connection running the whole
 * pipeline (:authority against the server name, policy, the answers
 * sent back as HEADERS and DATA). No upstream is ever connected: a.test
 * maps to 127.0.0.1, which upstream.allow_networks does not allow.
 * The input goes in chunks of 1 KiB with the loop run in between; then
 * everything is closed, and what is still allocated is a leak.
 * FUZZ_H2_AUDIT=FILE keeps the audit records (default /dev/null).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/conn_internal.h"
#include "conn/worker.h"
#include "h2/h2.h"
#include "sbx/sbx.h"
#include "util/log.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FZ_CHUNK	1024
#define FZ_SPINS	64	/* loop runs after the input, at most */

static struct cfg	*fz_cfg;
static struct worker	 fz_w;
static struct sbx	*fz_sbx;

static const char fz_yaml[] =
    "state_dir: \"%s\"\n"
    "audit: {file: \"%s\"}\n"
    "limits: {header_bytes: 4096, h2_max_streams: 16}\n"
    "upstream:\n"
    "  hosts: {\"a.test\": \"127.0.0.1\"}\n"
    "policies:\n"
    "  - name: p\n"
    "    rules: [{host: \"a.test\", paths: [\"/ok*\"]}]\n"
    "sandboxes:\n"
    "  - {id: s1, policy: p, token: \"literal:t1\"}\n";

static void
fz_init(void)
{
	char		 dir[] = "/tmp/airlock-fuzz-h2-XXXXXX";
	char		 yaml[sizeof(fz_yaml) + 1024];
	const char	*audit = getenv("FUZZ_H2_AUDIT");
	int		 nerr = 0;

	log_init(0);
	if (mkdtemp(dir) == NULL)
		abort();
	snprintf(yaml, sizeof(yaml), fz_yaml, dir,
	    audit ? audit : "/dev/null");
	fz_cfg = cfg_load_buffer("fuzz.yaml", yaml, strlen(yaml), stderr,
	    &nerr);
	if (fz_cfg == NULL || sbx_init(dir) == -1)
		abort();
	sbx_sync_config(fz_cfg);
	if ((fz_sbx = sbx_find("s1")) == NULL)
		abort();
	if (aud_start(fz_cfg) == -1)
		abort();
	TAILQ_INIT(&fz_w.w_conns);
	TAILQ_INIT(&fz_w.w_idle);
	fz_w.w_cfg = fz_cfg;
	if ((fz_w.w_base = event_base_new()) == NULL)
		abort();
	fz_w.w_scratch = evbuffer_new();
	fz_w.w_scratch2 = evbuffer_new();
	fz_w.w_filt[0] = evbuffer_new();
	fz_w.w_filt[1] = evbuffer_new();
	fz_w.w_spare_fd = -1;
}

/* The intercepted session as conn_tls_handshake_event() leaves it. */
static struct conn *
fz_session(struct bufferevent *bev)
{
	struct conn	*c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->c_x = &c->c_x0;
	TAILQ_INIT(&c->c_xq);
	c->c_worker = &fz_w;
	c->c_cfg = cfg_ref(fz_cfg);
	c->c_sbx = sbx_ref(fz_sbx);
	__atomic_add_fetch(&fz_sbx->sb_conns, 1, __ATOMIC_RELAXED);
	c->c_policy = cfg_policy_find(fz_cfg, fz_sbx->sb_policy);
	snprintf(c->c_client, sizeof(c->c_client), "127.0.0.1:40000");
	c->c_tls = 1;
	snprintf(c->c_tls_host, sizeof(c->c_tls_host), "a.test");
	c->c_tls_port = 443;
	c->c_bev = bev;
	c->c_pend = evbuffer_new();
	http_msg_init(&c->c_req, HTTP_REQUEST,
	    fz_cfg->c_limits.l_header_bytes);
	http_msg_init(&c->c_resp, HTTP_RESPONSE,
	    fz_cfg->c_limits.l_header_bytes);
	c->c_req.hm_on_body = conn_request_body_cb;
	c->c_req.hm_arg = c;
	c->c_resp.hm_on_body = conn_response_body_cb;
	c->c_resp.hm_arg = c;
	c->c_timer = evtimer_new(fz_w.w_base, conn_timer_cb, c);
	TAILQ_INSERT_TAIL(&fz_w.w_conns, c, c_entry);
	fz_w.w_nconns++;
	worker_conn_more();
	conn_touch(c);
	return c;
}

/* What the gateway sends back is read and forgotten. */
static void
fz_client_read(struct bufferevent *bev, void *arg)
{
	(void)arg;
	evbuffer_drain(bufferevent_get_input(bev),
	    evbuffer_get_length(bufferevent_get_input(bev)));
}

static void
fz_spin(int n)
{
	while (n-- > 0 && fz_w.w_nconns > 0)
		(void)event_base_loop(fz_w.w_base, EVLOOP_NONBLOCK);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char	 preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct bufferevent	*pair[2];
	size_t			 at, n;

	if (fz_cfg == NULL)
		fz_init();
	if (bufferevent_pair_new(fz_w.w_base, BEV_OPT_DEFER_CALLBACKS,
	    pair) != 0)
		abort();
	bufferevent_setcb(pair[1], fz_client_read, NULL, NULL, NULL);
	bufferevent_enable(pair[1], EV_READ | EV_WRITE);
	bufferevent_write(pair[1], preface, sizeof(preface) - 1);
	(void)h2_srv_start(fz_session(pair[0]));
	for (at = 0; at < size && fz_w.w_nconns > 0; at += n) {
		n = size - at < FZ_CHUNK ? size - at : FZ_CHUNK;
		bufferevent_write(pair[1], data + at, n);
		fz_spin(4);
	}
	fz_spin(FZ_SPINS);
	conn_close_all(&fz_w, AUD_R_CLIENT_CLOSED);
	fz_spin(FZ_SPINS);
	if (fz_w.w_nconns != 0)
		abort();	/* a connection that does not end */
	bufferevent_free(pair[1]);
	/* the deferred callbacks of what was freed */
	(void)event_base_loop(fz_w.w_base, EVLOOP_NONBLOCK);
	return 0;
}
