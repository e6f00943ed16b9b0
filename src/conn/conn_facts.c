/*
 * Request facts beyond the target: what an early refusal's audit record
 * knows, and the headers that would let an upstream act on another path
 * than the one the policy judged.
 */
#include "config.h"

#include <string.h>

#include "cfg/cfg.h"
#include "conn/conn.h"
#include "http/http_msg.h"
#include "http/http_target.h"
#include "util/util.h"

/* The session's host and port, else the target's; takes t_path_raw. */
static void
facts_take(struct conn *c, struct http_target *t)
{
	struct xchg	*x = c->c_x;

	if (x->x_host[0] == '\0') {
		if (c->c_tls) {
			util_copy_str(x->x_host, c->c_tls_host,
			    sizeof(x->x_host));
			x->x_port = c->c_tls_port;
		} else if (c->c_transparent && c->c_trans_host[0] != '\0') {
			util_copy_str(x->x_host, c->c_trans_host,
			    sizeof(x->x_host));
			x->x_port = c->c_trans_port;
		} else if (t->t_host[0] != '\0') {
			util_copy_str(x->x_host, t->t_host, sizeof(x->x_host));
			x->x_port = t->t_port;
		}
	}
	if (x->x_path == NULL && t->t_path != NULL) {
		x->x_path = t->t_path;
		t->t_path = NULL;
	} else if (x->x_path == NULL && t->t_path_raw != NULL) {
		x->x_path = t->t_path_raw;	/* the refused path as sent */
		t->t_path_raw = NULL;
	}
}

void
conn_req_early_facts(struct conn *c)
{
	struct http_msg		*m = &c->c_req;
	struct conn_req		*q = &c->c_r;
	struct xchg	*x = c->c_x;
	struct http_target	 t;
	const char		*why, *url;

	if (!x->x_active)
		return;
	if (x->x_method[0] == '\0' && m->hm_head_done)
		util_copy_str(x->x_method, http_msg_method(m),
		    sizeof(x->x_method));
	if (x->x_host[0] != '\0' && (x->x_path != NULL || q->r_connect))
		return;
	memset(&t, 0, sizeof(t));
	if (m->hm_url_len > 0 && m->hm_buf != NULL) {
		/* best effort: a refused target still names what it can */
		url = http_msg_str(m, m->hm_url);
		if (m->hm_head_done && m->hm_method == HTTP_CONNECT)
			(void)http_authority_parse(url, m->hm_url_len, 0, 1,
			    &t, &why);
		else
			(void)http_target_parse(url, m->hm_url_len, c->c_tls,
			    c->c_tls || c->c_transparent, &t, &why);
	}
	facts_take(c, &t);
	http_target_fini(&t);
}

int
conn_header_stripped(const struct conn *c, const char *name, size_t len)
{
	const struct cfg_rule	*r = c->c_x->x_rule_p;

	return r != NULL && (r->r_npaths > 0 || r->r_nmethods > 0) &&
	    http_is_path_override(name, len);
}
