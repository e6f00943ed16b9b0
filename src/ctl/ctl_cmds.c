/*
 * airlockctl commands: one admin API call each (audit verify: none), the
 * answer printed as a table or key/value lines, or with --json as the
 * gateway's JSON. Errors go to stderr as "airlockctl: REASON (ERROR, HTTP
 * STATUS)". Here: the printing the command files share, status, reload
 * and audit verify; sandbox and usage verbs in ctl_sandbox.c, run in
 * ctl_run.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "audit/aud.h"
#include "ctl/ctl.h"
#include "util/util.h"

#define JSON_OUT_FLAGS	(JSON_C_TO_STRING_PRETTY | \
	JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)

void
ctl_print_json(struct json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o, JSON_OUT_FLAGS));
}

/* --json: the body as JSON when it is, else as it came. */
void
ctl_print_body(const struct ctl_resp *r)
{
	if (r->r_json != NULL)
		ctl_print_json(r->r_json);
	else if (r->r_len > 0)
		fwrite(r->r_body, 1, r->r_len, stdout);
}

/* A string member of <o>, or NULL. */
const char *
ctl_jstr(struct json_object *o, const char *key)
{
	struct json_object	*v;

	if (o == NULL || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* Printable copy: a gateway's strings must not drive the terminal. */
char *
ctl_clean(const char *s)
{
	char	*out, *p;

	out = xstrdup(s);
	for (p = out; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return out;
}

/* The text of a value for a table cell; caller frees. */
char *
ctl_val_text(struct json_object *v)
{
	if (v == NULL)
		return xstrdup("-");
	switch (json_object_get_type(v)) {
	case json_type_null:
		return xstrdup("-");
	case json_type_string:
		return ctl_clean(json_object_get_string(v));
	default:
		return ctl_clean(json_object_to_json_string_ext(v,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	}
}

/*
 * Report a non-2xx answer: its "errors" lines (reload), then one line
 * with the reason. With --json the body also goes to stdout.
 */
static void
report_error(const struct ctl *c, const struct ctl_resp *r)
{
	struct json_object	*errs, *e;
	const char		*error, *reason;
	char			*line, *nl;
	size_t			 i, n;

	if (c->c_json)
		ctl_print_body(r);
	fflush(stdout);
	if (r->r_json != NULL && json_object_object_get_ex(r->r_json,
	    "errors", &errs) && json_object_is_type(errs, json_type_array)) {
		n = json_object_array_length(errs);
		for (i = 0; i < n; i++) {
			e = json_object_array_get_idx(errs, i);
			line = ctl_val_text(e);
			fprintf(stderr, "%s\n", line);
			free(line);
		}
	}
	if (r->r_status == 401) {
		ctl_err("admin token rejected by the gateway at %s (token "
		    "from %s; check -k TOKEN_FILE, AIRLOCK_ADMIN_TOKEN_FILE or "
		    "the config's admin.token)", c->c_addr, c->c_token_from);
		return;
	}
	error = ctl_jstr(r->r_json, "error");
	reason = ctl_jstr(r->r_json, "reason");
	if (reason != NULL || error != NULL) {
		line = ctl_clean(reason != NULL ? reason : error);
		ctl_err("%s (%s, HTTP %d)", line, error != NULL ? error : "?",
		    r->r_status);
		free(line);
		return;
	}
	/* Not our JSON: show the start of the body. */
	line = xstrdup(r->r_body != NULL ? r->r_body : "");
	if ((nl = strpbrk(line, "\r\n")) != NULL)
		*nl = '\0';
	if (strlen(line) > 200)
		line[200] = '\0';
	nl = line;
	line = ctl_clean(nl);
	free(nl);
	ctl_err("the gateway answered HTTP %d%s%s", r->r_status,
	    *line != '\0' ? ": " : "", line);
	free(line);
}

/*
 * One call: CTL_OK with a 2xx answer in <r> (caller calls ctl_resp_fini),
 * else the exit code after reporting.
 */
int
ctl_call(const struct ctl *c, const char *method, const char *path,
    struct json_object *body, int timeout_ms, struct ctl_resp *r)
{
	int	rc;

	if ((rc = ctl_request(c, method, path, body, timeout_ms, r)) !=
	    CTL_OK)
		return rc;
	if (r->r_status >= 200 && r->r_status < 300)
		return CTL_OK;
	report_error(c, r);
	ctl_resp_fini(r);
	return CTL_FAIL;
}

/* A 2xx answer that should be a JSON object but is not. */
int
ctl_need_object(const struct ctl *c, struct ctl_resp *r)
{
	if (r->r_json != NULL && json_object_is_type(r->r_json,
	    json_type_object))
		return 0;
	ctl_err("the gateway at %s answered HTTP %d without a JSON object",
	    c->c_addr, r->r_status);
	return -1;
}

/* Key/value lines. */
struct kv {
	char	*kv_key;
	char	*kv_val;
};

struct kvlist {
	struct kv	*kl_v;
	size_t		 kl_n;
	size_t		 kl_cap;
};

/* Takes ownership of <val>. */
static void
kv_add(struct kvlist *kl, const char *key, char *val)
{
	if (kl->kl_n == kl->kl_cap) {
		kl->kl_cap = kl->kl_cap ? kl->kl_cap * 2 : 16;
		kl->kl_v = xrealloc(kl->kl_v, kl->kl_cap * sizeof(*kl->kl_v));
	}
	kl->kl_v[kl->kl_n].kv_key = ctl_clean(key);
	kl->kl_v[kl->kl_n].kv_val = val;
	kl->kl_n++;
}

/* "1d 2h 3m 4s" */
static char *
human_secs(int64_t s)
{
	char	buf[64];
	int	off = 0;

	if (s >= 86400)
		off += snprintf(buf + off, sizeof(buf) - off, "%lldd ",
		    (long long)(s / 86400));
	if (s >= 3600)
		off += snprintf(buf + off, sizeof(buf) - off, "%lldh ",
		    (long long)(s % 86400 / 3600));
	if (s >= 60)
		off += snprintf(buf + off, sizeof(buf) - off, "%lldm ",
		    (long long)(s % 3600 / 60));
	snprintf(buf + off, sizeof(buf) - off, "%llds", (long long)(s % 60));
	return xstrdup(buf);
}

/*
 * Every member of <o>, nested objects as "outer.inner"; members named in
 * <skip> (NULL-terminated) are left out.
 */
static void
kv_flatten(struct kvlist *kl, const char *prefix, struct json_object *o,
    const char *const *skip)
{
	const char *const	*sk;
	char			*key, *val, *h;

	json_object_object_foreach(o, k, v) {
		for (sk = skip; sk != NULL && *sk != NULL; sk++)
			if (strcmp(*sk, k) == 0)
				break;
		if (sk != NULL && *sk != NULL)
			continue;
		if (asprintf(&key, "%s%s%s", prefix, *prefix ? "." : "", k) ==
		    -1)
			continue;
		if (v != NULL && json_object_is_type(v, json_type_object) &&
		    json_object_object_length(v) > 0) {
			kv_flatten(kl, key, v, NULL);
			free(key);
			continue;
		}
		if (*prefix == '\0' && strcmp(k, "static") == 0 &&
		    v != NULL && json_object_is_type(v, json_type_boolean)) {
			kv_add(kl, "kind", xstrdup(json_object_get_boolean(v) ?
			    "static" : "dynamic"));
			free(key);
			continue;
		}
		if (v == NULL || json_object_is_type(v, json_type_null))
			val = xstrdup("none");
		else if (strcmp(k, "uptime_s") == 0 &&
		    json_object_is_type(v, json_type_int)) {
			h = human_secs(json_object_get_int64(v));
			if (asprintf(&val, "%lld (%s)",
			    (long long)json_object_get_int64(v), h) == -1)
				val = xstrdup("?");
			free(h);
		} else
			val = ctl_val_text(v);
		kv_add(kl, key, val);
		free(key);
	}
}

static void
kv_print(struct kvlist *kl)
{
	size_t	i, w = 0;

	for (i = 0; i < kl->kl_n; i++)
		if (strlen(kl->kl_v[i].kv_key) > w)
			w = strlen(kl->kl_v[i].kv_key);
	for (i = 0; i < kl->kl_n; i++) {
		printf("%-*s  %s\n", (int)w, kl->kl_v[i].kv_key,
		    kl->kl_v[i].kv_val);
		free(kl->kl_v[i].kv_key);
		free(kl->kl_v[i].kv_val);
	}
	free(kl->kl_v);
	memset(kl, 0, sizeof(*kl));
}

/* Key/value lines of an object answer. */
void
ctl_print_kv(struct json_object *o, const char *const *skip)
{
	struct kvlist	kl;

	memset(&kl, 0, sizeof(kl));
	kv_flatten(&kl, "", o, skip);
	kv_print(&kl);
}

/* GET <path>, then key/value lines (or the JSON). */
int
ctl_get_and_print(struct ctl *c, const char *path)
{
	struct ctl_resp	r;
	int		rc;

	if ((rc = ctl_call(c, "GET", path, NULL, CTL_TIMEOUT_MS, &r)) != CTL_OK)
		return rc;
	if (c->c_json)
		ctl_print_body(&r);
	else if (ctl_need_object(c, &r) == 0)
		ctl_print_kv(r.r_json, NULL);
	else
		rc = CTL_FAIL;
	ctl_resp_fini(&r);
	return rc;
}

/* "/v1/sandboxes/<escaped id><rest>"; caller frees. */
char *
ctl_sandbox_path(const char *id, const char *rest)
{
	char	*esc, *path;

	esc = ctl_path_escape(id);
	if (asprintf(&path, "/v1/sandboxes/%s%s", esc, rest) == -1)
		path = NULL;
	free(esc);
	if (path == NULL) {
		ctl_err("out of memory");
		exit(CTL_FAIL);
	}
	return path;
}

/* ctl_call() on /v1/sandboxes/<id><rest>, <id> escaped. */
int
ctl_sandbox_call(const struct ctl *c, const char *method, const char *id,
    const char *rest, int timeout_ms, struct ctl_resp *r)
{
	char	*path;
	int	 rc;

	path = ctl_sandbox_path(id, rest);
	rc = ctl_call(c, method, path, NULL, timeout_ms, r);
	free(path);
	return rc;
}

int
ctl_cmd_status(struct ctl *c, struct ctl_args *a)
{
	return ctl_get_and_print(c, "/v1/status");
}

int
ctl_cmd_reload(struct ctl *c, struct ctl_args *a)
{
	struct ctl_resp	r;
	int		rc;

	if ((rc = ctl_call(c, "POST", "/v1/reload", NULL, CTL_LONG_TIMEOUT_MS,
	    &r)) != CTL_OK)
		return rc;
	if (c->c_json)
		ctl_print_body(&r);
	else
		printf("configuration reloaded\n");
	ctl_resp_fini(&r);
	return CTL_OK;
}

static int
is_hash(const char *s)
{
	return strlen(s) == 64 && util_is_lower_hex(s, 64);
}

/*
 * --by gateway: FILE... (a fleet's merged file, or one per gateway, in
 * order) hold one chain per gateway; each is checked and reported.
 */
static int
audit_verify_by_gateway(struct ctl *c, struct ctl_args *a)
{
	struct aud_chains	*cs = xcalloc(1, sizeof(*cs));
	struct aud_chain	*ch;
	struct json_object	*out = NULL, *arr = NULL, *o;
	FILE			*f;
	size_t			 i;
	int			 k, vr, rc = CTL_OK;

	for (k = 0; k < a->a_npos; k++) {
		f = strcmp(a->a_pos[k], "-") == 0 ? stdin :
		    fopen(a->a_pos[k], "r");
		if (f == NULL) {
			ctl_err("%s: %s", a->a_pos[k], strerror(errno));
			free(cs);
			return CTL_FAIL;
		}
		vr = aud_verify_chains(f, a->a_pos[k], cs);
		if (f != stdin)
			fclose(f);
		if (vr != 0) {
			ctl_err("%s: %s", a->a_pos[k], vr == 1 ?
			    "more gateways than airlockctl tracks" :
			    "read error");
			free(cs);
			return CTL_FAIL;
		}
	}
	if (c->c_json) {
		out = json_object_new_object();
		arr = json_object_new_array();
	}
	for (i = 0; i < cs->ac_n; i++) {
		ch = &cs->ac_v[i];
		if (ch->ac_bad_line != 0)
			rc = CTL_FAIL;
		if (arr != NULL) {
			o = json_object_new_object();
			json_object_object_add(o, "gateway",
			    json_object_new_string(ch->ac_gateway));
			json_object_object_add(o, "ok",
			    json_object_new_boolean(ch->ac_bad_line == 0));
			json_object_object_add(o, "records",
			    json_object_new_int64((int64_t)ch->ac_records));
			if (ch->ac_bad_line != 0) {
				json_object_object_add(o, "file",
				    json_object_new_string(ch->ac_file));
				json_object_object_add(o, "line",
				    json_object_new_int64(
				    (int64_t)ch->ac_bad_line));
				json_object_object_add(o, "why",
				    json_object_new_string(ch->ac_why));
			} else if (ch->ac_records > 0)
				json_object_object_add(o, "last_hash",
				    json_object_new_string(ch->ac_last_hash));
			json_object_array_add(arr, o);
		} else if (ch->ac_bad_line != 0)
			printf("gateway %s: %s:%llu: %s\n", ch->ac_gateway[0] ?
			    ch->ac_gateway : "(none)", ch->ac_file,
			    (unsigned long long)ch->ac_bad_line, ch->ac_why);
		else
			printf("gateway %s: OK (%llu record%s)\n",
			    ch->ac_gateway[0] ? ch->ac_gateway : "(none)",
			    (unsigned long long)ch->ac_records,
			    ch->ac_records == 1 ? "" : "s");
	}
	if (out != NULL) {
		json_object_object_add(out, "ok",
		    json_object_new_boolean(rc == CTL_OK));
		json_object_object_add(out, "gateways", arr);
		ctl_print_json(out);
		json_object_put(out);
	}
	free(cs);
	return rc;
}

/*
 * Check FILE... as one hash chain, in order: each file's first "prev" must
 * be the hash the file before ended with (the first file's: --prev, else
 * 64 zeros). Stops at the first break.
 */
int
ctl_cmd_audit_verify(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*out = NULL, *files = NULL, *fo;
	struct aud_verify	 v;
	char			 prev[65];
	const char		*name;
	FILE			*f;
	int			 i, vr, saved, rc = CTL_OK, have_prev = 0;

	if (a->a_by != NULL)
		return audit_verify_by_gateway(c, a);
	if (a->a_prev != NULL) {
		if (!is_hash(a->a_prev)) {
			ctl_err("--prev wants 64 lowercase hex digits (a "
			    "\"hash\" of the audit file before)");
			return CTL_USAGE;
		}
		snprintf(prev, sizeof(prev), "%s", a->a_prev);
		have_prev = 1;
	}
	if (c->c_json) {
		out = json_object_new_object();
		files = json_object_new_array();
	}
	for (i = 0; i < a->a_npos && rc == CTL_OK; i++) {
		name = a->a_pos[i];
		if (strcmp(name, "-") == 0)
			f = stdin;
		else if ((f = fopen(name, "r")) == NULL) {
			saved = errno;
			ctl_err("%s: %s", name, strerror(saved));
			rc = CTL_FAIL;
			if (files != NULL) {
				fo = json_object_new_object();
				json_object_object_add(fo, "file",
				    json_object_new_string(name));
				json_object_object_add(fo, "ok",
				    json_object_new_boolean(0));
				json_object_object_add(fo, "error",
				    json_object_new_string(strerror(saved)));
				json_object_array_add(files, fo);
			}
			break;
		}
		memset(&v, 0, sizeof(v));
		vr = aud_verify_file(f, have_prev ? prev : NULL, &v);
		if (vr == -1)
			ctl_err("%s: read error: %s", name,
			    v.av_why[0] != '\0' ? v.av_why : strerror(errno));
		if (f != stdin)
			fclose(f);
		if (files != NULL) {
			fo = json_object_new_object();
			json_object_object_add(fo, "file",
			    json_object_new_string(name));
			json_object_object_add(fo, "ok",
			    json_object_new_boolean(vr == 0));
			json_object_object_add(fo, "records",
			    json_object_new_int64((int64_t)v.av_lines));
			if (vr == 1) {
				json_object_object_add(fo, "line",
				    json_object_new_int64(
				    (int64_t)v.av_bad_line));
				json_object_object_add(fo, "why",
				    json_object_new_string(v.av_why));
			}
			if (vr == 0 && v.av_lines > 0) {
				json_object_object_add(fo, "first_prev",
				    json_object_new_string(v.av_first_prev));
				json_object_object_add(fo, "last_hash",
				    json_object_new_string(v.av_last_hash));
			}
			json_object_array_add(files, fo);
		}
		if (vr != 0) {
			if (vr == 1 && out == NULL)
				printf("%s:%llu: %s\n", name,
				    (unsigned long long)v.av_bad_line,
				    v.av_why);
			rc = CTL_FAIL;
			break;
		}
		if (out == NULL)
			printf("%s: OK (%llu record%s)\n", name,
			    (unsigned long long)v.av_lines,
			    v.av_lines == 1 ? "" : "s");
		/* An empty file carries the chain through unchanged. */
		if (v.av_lines > 0 && is_hash(v.av_last_hash)) {
			memcpy(prev, v.av_last_hash, sizeof(prev));
			have_prev = 1;
		}
	}
	if (out != NULL) {
		json_object_object_add(out, "ok",
		    json_object_new_boolean(rc == CTL_OK));
		json_object_object_add(out, "files", files);
		ctl_print_json(out);
		json_object_put(out);
	}
	return rc;
}
