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
	struct conn_req	*q = &c->c_r;

	if (q->r_host[0] == '\0') {
		if (c->c_tls) {
			util_copy_str(q->r_host, c->c_tls_host,
			    sizeof(q->r_host));
			q->r_port = c->c_tls_port;
		} else if (c->c_transparent && c->c_trans_host[0] != '\0') {
			util_copy_str(q->r_host, c->c_trans_host,
			    sizeof(q->r_host));
			q->r_port = c->c_trans_port;
		} else if (t->t_host[0] != '\0') {
			util_copy_str(q->r_host, t->t_host, sizeof(q->r_host));
			q->r_port = t->t_port;
		}
	}
	if (q->r_path == NULL && t->t_path != NULL) {
		q->r_path = t->t_path;
		t->t_path = NULL;
	} else if (q->r_path == NULL && t->t_path_raw != NULL) {
		q->r_path = t->t_path_raw;	/* the refused path as sent */
		t->t_path_raw = NULL;
	}
}

void
conn_req_early_facts(struct conn *c)
{
	struct http_msg		*m = &c->c_req;
	struct conn_req		*q = &c->c_r;
	struct http_target	 t;
	const char		*why, *url;

	if (!q->r_active)
		return;
	if (q->r_method[0] == '\0' && m->hm_head_done)
		util_copy_str(q->r_method, http_msg_method(m),
		    sizeof(q->r_method));
	if (q->r_host[0] != '\0' && (q->r_path != NULL || q->r_connect))
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
	const struct cfg_rule	*r = c->c_r.r_rule_p;

	return r != NULL && (r->r_npaths > 0 || r->r_nmethods > 0) &&
	    http_is_path_override(name, len);
}
