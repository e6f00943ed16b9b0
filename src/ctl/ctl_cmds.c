/*
 * airlockctl commands: one admin API call each (audit verify: none), the
 * answer printed as a table or key/value lines, or with --json as the
 * gateway's JSON. Errors go to stderr as "airlockctl: REASON (ERROR, HTTP
 * STATUS)".
 */
#include "config.h"

#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/x509.h>

#include "audit/aud.h"
#include "launcher/launcher.h"
#include "ctl/ctl.h"
#include "util/util.h"

extern char	**environ;

#define JSON_OUT_FLAGS	(JSON_C_TO_STRING_PRETTY | \
	JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)

static void
print_json(struct json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o, JSON_OUT_FLAGS));
}

/* --json: the body as JSON when it is, else as it came. */
static void
print_body(const struct ctl_resp *r)
{
	if (r->r_json != NULL)
		print_json(r->r_json);
	else if (r->r_len > 0)
		fwrite(r->r_body, 1, r->r_len, stdout);
}

/* A string member of <o>, or NULL. */
static const char *
jstr(struct json_object *o, const char *key)
{
	struct json_object	*v;

	if (o == NULL || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* Printable copy: a gateway's strings must not drive the terminal. */
static char *
clean(const char *s)
{
	char	*out, *p;

	out = xstrdup(s);
	for (p = out; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return out;
}

/* The text of a value for a table cell; caller frees. */
static char *
val_text(struct json_object *v)
{
	if (v == NULL)
		return xstrdup("-");
	switch (json_object_get_type(v)) {
	case json_type_null:
		return xstrdup("-");
	case json_type_string:
		return clean(json_object_get_string(v));
	default:
		return clean(json_object_to_json_string_ext(v,
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
		print_body(r);
	fflush(stdout);
	if (r->r_json != NULL && json_object_object_get_ex(r->r_json,
	    "errors", &errs) && json_object_is_type(errs, json_type_array)) {
		n = json_object_array_length(errs);
		for (i = 0; i < n; i++) {
			e = json_object_array_get_idx(errs, i);
			line = val_text(e);
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
	error = jstr(r->r_json, "error");
	reason = jstr(r->r_json, "reason");
	if (reason != NULL || error != NULL) {
		line = clean(reason != NULL ? reason : error);
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
	line = clean(nl);
	free(nl);
	ctl_err("the gateway answered HTTP %d%s%s", r->r_status,
	    *line != '\0' ? ": " : "", line);
	free(line);
}

/*
 * One call: CTL_OK with a 2xx answer in <r> (caller calls ctl_resp_fini),
 * else the exit code after reporting.
 */
static int
call(const struct ctl *c, const char *method, const char *path,
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

int
ctl_call(const struct ctl *c, const char *method, const char *path,
    struct json_object *body, int timeout_ms, struct ctl_resp *r)
{
	return call(c, method, path, body, timeout_ms, r);
}

void
ctl_print_body(const struct ctl_resp *r)
{
	print_body(r);
}

/* A 2xx answer that should be a JSON object but is not. */
static int
need_object(const struct ctl *c, struct ctl_resp *r)
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
	kl->kl_v[kl->kl_n].kv_key = clean(key);
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
			val = val_text(v);
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
static void
print_kv(struct json_object *o, const char *const *skip)
{
	struct kvlist	kl;

	memset(&kl, 0, sizeof(kl));
	kv_flatten(&kl, "", o, skip);
	kv_print(&kl);
}

/* GET <path>, then key/value lines (or the JSON). */
static int
get_and_print(struct ctl *c, const char *path)
{
	struct ctl_resp	r;
	int		rc;

	if ((rc = call(c, "GET", path, NULL, CTL_TIMEOUT_MS, &r)) != CTL_OK)
		return rc;
	if (c->c_json)
		print_body(&r);
	else if (need_object(c, &r) == 0)
		print_kv(r.r_json, NULL);
	else
		rc = CTL_FAIL;
	ctl_resp_fini(&r);
	return rc;
}

/* "/v1/sandboxes/<escaped id><rest>"; caller frees. */
static char *
sandbox_path(const char *id, const char *rest)
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

int
ctl_cmd_status(struct ctl *c, struct ctl_args *a)
{
	return get_and_print(c, "/v1/status");
}

int
ctl_cmd_sandbox_create(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*body;
	struct ctl_resp		 r;
	int			 rc;

	body = json_object_new_object();
	if (a->a_policy != NULL)
		json_object_object_add(body, "policy",
		    json_object_new_string(a->a_policy));
	if (a->a_id != NULL)
		json_object_object_add(body, "id",
		    json_object_new_string(a->a_id));
	rc = call(c, "POST", "/v1/sandboxes", body, CTL_TIMEOUT_MS, &r);
	json_object_put(body);
	if (rc != CTL_OK)
		return rc;
	/* Always JSON: its token and PEM are meant for programs. */
	print_body(&r);
	if (r.r_json == NULL)
		rc = CTL_FAIL;
	ctl_resp_fini(&r);
	return rc;
}

/* A table with a header row; <cells> is rows * ncol strings (taken). */
static void
print_table(const char *const *head, size_t ncol, char **cells,
    size_t rows)
{
	size_t	*w, i, j, l;

	w = xcalloc(ncol, sizeof(*w));
	for (j = 0; j < ncol; j++)
		w[j] = strlen(head[j]);
	for (i = 0; i < rows; i++)
		for (j = 0; j < ncol; j++)
			if ((l = strlen(cells[i * ncol + j])) > w[j])
				w[j] = l;
	for (j = 0; j < ncol; j++) {
		if (j + 1 < ncol)
			printf("%-*s  ", (int)w[j], head[j]);
		else
			printf("%s\n", head[j]);
	}
	for (i = 0; i < rows; i++) {
		for (j = 0; j < ncol; j++) {
			if (j + 1 < ncol)
				printf("%-*s  ", (int)w[j],
				    cells[i * ncol + j]);
			else
				printf("%s\n", cells[i * ncol + j]);
			free(cells[i * ncol + j]);
		}
	}
	free(w);
}

/*
 * ID POLICY KIND STATE CREATED CONNS. KIND: static (config file) or
 * dynamic; STATE, for dynamic ones: created (sandbox create), warm (in the
 * launcher's pool), launched (claimed).
 */
int
ctl_cmd_sandbox_list(struct ctl *c, struct ctl_args *a)
{
	static const char *const head[] = { "ID", "POLICY", "KIND", "STATE",
	    "CREATED", "CONNS" };
	static const char *const keys[] = { "id", "policy", "static", "state",
	    "created", "connections" };
	const size_t		 ncol = sizeof(head) / sizeof(head[0]);
	struct json_object	*list, *sb, *v, *st;
	struct ctl_resp		 r;
	char			**cells;
	size_t			 n, i, j;
	int			 rc, is_static;

	if ((rc = call(c, "GET", "/v1/sandboxes", NULL, CTL_TIMEOUT_MS,
	    &r)) != CTL_OK)
		return rc;
	if (c->c_json) {
		print_body(&r);
		ctl_resp_fini(&r);
		return CTL_OK;
	}
	if (need_object(c, &r) == -1 ||
	    !json_object_object_get_ex(r.r_json, "sandboxes", &list) ||
	    !json_object_is_type(list, json_type_array)) {
		if (r.r_json != NULL)
			ctl_err("the gateway's answer has no \"sandboxes\" "
			    "list");
		ctl_resp_fini(&r);
		return CTL_FAIL;
	}
	n = json_object_array_length(list);
	cells = xcalloc(n * ncol + 1, sizeof(char *));
	for (i = 0; i < n; i++) {
		sb = json_object_array_get_idx(list, i);
		if (sb == NULL || !json_object_is_type(sb, json_type_object))
			sb = NULL;
		st = NULL;
		if (sb != NULL)
			json_object_object_get_ex(sb, "static", &st);
		is_static = st != NULL &&
		    json_object_is_type(st, json_type_boolean) &&
		    json_object_get_boolean(st);
		for (j = 0; j < ncol; j++) {
			v = NULL;
			if (sb != NULL)
				json_object_object_get_ex(sb, keys[j], &v);
			if (j == 2 && st != NULL &&
			    json_object_is_type(st, json_type_boolean))
				cells[i * ncol + j] = xstrdup(is_static ?
				    "static" : "dynamic");
			else if (j == 3 && is_static)
				cells[i * ncol + j] = xstrdup("-");
			else
				cells[i * ncol + j] = val_text(v);
		}
	}
	print_table(head, ncol, cells, n);
	free(cells);
	ctl_resp_fini(&r);
	return CTL_OK;
}

int
ctl_cmd_sandbox_show(struct ctl *c, struct ctl_args *a)
{
	static const char *const skip[] = { "ca_cert", NULL };
	struct ctl_resp	 r;
	const char	*pem;
	char		*path;
	int		 rc;

	path = sandbox_path(a->a_pos[0], "");
	rc = call(c, "GET", path, NULL, CTL_TIMEOUT_MS, &r);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json)
		print_body(&r);
	else if (need_object(c, &r) == 0) {
		print_kv(r.r_json, skip);
		if ((pem = jstr(r.r_json, "ca_cert")) != NULL)
			printf("ca_cert:\n%s%s", pem,
			    *pem != '\0' && pem[strlen(pem) - 1] == '\n' ?
			    "" : "\n");
	} else
		rc = CTL_FAIL;
	ctl_resp_fini(&r);
	return rc;
}

/*
 * sandbox probe ID: the escape canary (POST …/probe). One line per check,
 * "pass" or "FAIL"; exit 1 when any failed.
 */
int
ctl_cmd_sandbox_probe(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*checks, *ch, *v;
	struct ctl_resp		 r;
	const char		*name, *detail;
	char			*path;
	size_t			 i, n;
	int			 rc, failures = 0, pass, skipped;

	path = sandbox_path(a->a_pos[0], "/probe");
	rc = call(c, "POST", path, NULL, CTL_LONG_TIMEOUT_MS, &r);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (need_object(c, &r) == -1) {
		ctl_resp_fini(&r);
		return CTL_FAIL;
	}
	if (json_object_object_get_ex(r.r_json, "failures", &v))
		failures = json_object_get_int(v);
	if (c->c_json)
		print_body(&r);
	else if (json_object_object_get_ex(r.r_json, "checks", &checks) &&
	    json_object_is_type(checks, json_type_array)) {
		n = json_object_array_length(checks);
		for (i = 0; i < n; i++) {
			ch = json_object_array_get_idx(checks, i);
			if ((name = jstr(ch, "name")) == NULL ||
			    !json_object_object_get_ex(ch, "pass", &v))
				continue;
			pass = json_object_get_boolean(v);
			skipped = json_object_object_get_ex(ch, "skipped", &v) &&
			    json_object_get_boolean(v);
			printf("%-20s %s%s\n", name, pass ? "pass" : "FAIL",
			    skipped ? " (skipped)" : "");
		}
		if ((detail = jstr(r.r_json, "detail")) != NULL &&
		    *detail != '\0')
			printf("detail: %s\n", detail);
	}
	ctl_resp_fini(&r);
	return failures ? CTL_FAIL : CTL_OK;
}

int
ctl_cmd_sandbox_delete(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*o;
	struct ctl_resp		 r;
	char			*path, *id;
	int			 rc;

	path = sandbox_path(a->a_pos[0], "");
	rc = call(c, "DELETE", path, NULL, CTL_TIMEOUT_MS, &r);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json) {
		/* 204 has no body: say what happened as JSON all the same. */
		if (r.r_json != NULL)
			print_body(&r);
		else {
			o = json_object_new_object();
			json_object_object_add(o, "id",
			    json_object_new_string(a->a_pos[0]));
			json_object_object_add(o, "deleted",
			    json_object_new_boolean(1));
			print_json(o);
			json_object_put(o);
		}
	} else {
		id = clean(a->a_pos[0]);
		printf("deleted %s\n", id);
		free(id);
	}
	ctl_resp_fini(&r);
	return CTL_OK;
}

int
ctl_cmd_sandbox_ca(struct ctl *c, struct ctl_args *a)
{
	struct ctl_resp	 r;
	const char	*pem;
	char		*path;
	int		 rc;

	path = sandbox_path(a->a_pos[0], "");
	rc = call(c, "GET", path, NULL, CTL_TIMEOUT_MS, &r);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json)
		print_body(&r);
	else if ((pem = jstr(r.r_json, "ca_cert")) != NULL && *pem != '\0')
		printf("%s%s", pem, pem[strlen(pem) - 1] == '\n' ? "" : "\n");
	else {
		ctl_err("the gateway's answer has no \"ca_cert\"");
		rc = CTL_FAIL;
	}
	ctl_resp_fini(&r);
	return rc;
}

int
ctl_cmd_usage(struct ctl *c, struct ctl_args *a)
{
	char	*path;
	int	 rc;

	if (a->a_by != NULL)
		return ctl_usage_by(c, a->a_pos[0], a->a_by);
	path = sandbox_path(a->a_pos[0], "/usage");
	rc = get_and_print(c, path);
	free(path);
	return rc;
}

int
ctl_cmd_usage_reset(struct ctl *c, struct ctl_args *a)
{
	struct ctl_resp	 r;
	char		*path;
	int		 rc;

	path = sandbox_path(a->a_pos[0], "/usage/reset");
	rc = call(c, "POST", path, NULL, CTL_TIMEOUT_MS, &r);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (c->c_json)
		print_body(&r);
	else if (r.r_json != NULL && json_object_is_type(r.r_json,
	    json_type_object))
		print_kv(r.r_json, NULL);
	else
		printf("usage reset\n");
	ctl_resp_fini(&r);
	return CTL_OK;
}

/* The caller's variables a sandboxed command keeps (SPEC "Inside a
 * sandbox"), and the CA variables that point at the sandbox's bundle. */
static const char *const run_keep_env[] = { "PATH", "HOME", "USER", "LANG",
    "TERM", NULL };
static const char *const run_ca_env[] = { "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO", NULL };

static volatile sig_atomic_t	run_child;

static void
run_forward(int sig)
{
	if (run_child > 0)
		kill((pid_t)run_child, sig);
}

/* Append the file at <path> to <fd>. 0, or -1 when it cannot be read. */
static int
copy_file(int fd, const char *path)
{
	char	buf[16384];
	ssize_t	n;
	int	in;

	if ((in = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n) {
			close(in);
			return -1;
		}
	close(in);
	return n == 0 ? 0 : -1;
}

/*
 * <dir> (a new private directory) with ca-bundle.pem: the system's trust
 * store (spliced hosts show their real certificates) and the sandbox's CA.
 * Returns 0 with <bundle> set, or -1 after printing why.
 */
static int
run_bundle(const char *pem, char *dir, size_t dirsz, char *bundle,
    size_t bsz)
{
	const char	*tmp, *sys;
	size_t		 len = strlen(pem);
	int		 fd;

	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
		tmp = "/tmp";
	snprintf(dir, dirsz, "%s/airlockctl-run.XXXXXX", tmp);
	if (mkdtemp(dir) == NULL) {
		ctl_err("cannot create a directory in %s: %s", tmp,
		    strerror(errno));
		return -1;
	}
	snprintf(bundle, bsz, "%s/ca-bundle.pem", dir);
	if ((fd = open(bundle, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0644)) == -1) {
		ctl_err("cannot create %s: %s", bundle, strerror(errno));
		rmdir(dir);
		return -1;
	}
	if ((sys = getenv(X509_get_default_cert_file_env())) == NULL ||
	    copy_file(fd, sys) == -1)
		(void)copy_file(fd, X509_get_default_cert_file());
	if (write(fd, "\n", 1) != 1 || write(fd, pem, len) != (ssize_t)len ||
	    close(fd) == -1) {
		ctl_err("cannot write %s: %s", bundle, strerror(errno));
		unlink(bundle);
		rmdir(dir);
		return -1;
	}
	return 0;
}

/* Is "NAME=VALUE" for <name> in <envp> (<n> entries)? */
static int
env_has(char **envp, size_t n, const char *name)
{
	size_t	i, nl = strlen(name);

	for (i = 0; i < n; i++)
		if (strncmp(envp[i], name, nl) == 0 && envp[i][nl] == '=')
			return 1;
	return 0;
}

static int
env_name_ok(const char *k)
{
	const char	*p;

	if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
	    *k == '_'))
		return 0;
	for (p = k; *p != '\0'; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return 1;
}

/*
 * The command's whole environment: the sandbox's variables from the claim,
 * PATH HOME USER LANG TERM of ours, the CA variables. NULL-terminated;
 * caller frees each entry and the array.
 */
static char **
run_env(struct json_object *env, const char *bundle)
{
	char		**envp;
	const char	 *v;
	size_t		  n = 0, cap;
	int		  i;

	cap = (size_t)json_object_object_length(env) + 16;
	envp = xcalloc(cap, sizeof(char *));
	json_object_object_foreach(env, k, jv) {
		if (!env_name_ok(k) || jv == NULL ||
		    !json_object_is_type(jv, json_type_string) ||
		    env_has(envp, n, k))
			continue;
		if (asprintf(&envp[n], "%s=%s", k,
		    json_object_get_string(jv)) != -1)
			n++;
	}
	for (i = 0; run_keep_env[i] != NULL; i++)
		if ((v = getenv(run_keep_env[i])) != NULL &&
		    !env_has(envp, n, run_keep_env[i]) &&
		    asprintf(&envp[n], "%s=%s", run_keep_env[i], v) != -1)
			n++;
	for (i = 0; run_ca_env[i] != NULL; i++)
		if (!env_has(envp, n, run_ca_env[i]) &&
		    asprintf(&envp[n], "%s=%s", run_ca_env[i], bundle) != -1)
			n++;
	envp[n] = NULL;
	return envp;
}

/* Run <argv> with <envp>; its exit status (128 + signal when killed). */
static int
run_exec(char **argv, char **envp)
{
	struct sigaction	 sa, o_int, o_quit, o_term, o_hup;
	sigset_t		 all, old;
	pid_t			 pid;
	int			 st, e;

	fflush(stdout);
	fflush(stderr);
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	if ((pid = fork()) == -1) {
		e = errno;
		sigprocmask(SIG_SETMASK, &old, NULL);
		ctl_err("fork: %s", strerror(e));
		return CTL_FAIL;
	}
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		environ = envp;
		execvp(argv[0], argv);
		e = errno;
		fprintf(stderr, "airlockctl: %s: %s\n", argv[0], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	/* ^C and ^\ reach the command (same process group): outlive it to
	 * clean up. TERM and HUP sent to us are passed on. */
	run_child = pid;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGINT, &sa, &o_int);
	sigaction(SIGQUIT, &sa, &o_quit);
	sa.sa_handler = run_forward;
	sigaction(SIGTERM, &sa, &o_term);
	sigaction(SIGHUP, &sa, &o_hup);
	sigprocmask(SIG_SETMASK, &old, NULL);
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR) {
			st = 1 << 8;
			break;
		}
	run_child = 0;
	sigaction(SIGINT, &o_int, NULL);
	sigaction(SIGQUIT, &o_quit, NULL);
	sigaction(SIGTERM, &o_term, NULL);
	sigaction(SIGHUP, &o_hup, NULL);
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return CTL_FAIL;
}

/* Give a claimed sandbox back: its token and CA stop working. */
static void
run_release(const struct ctl *c, const char *id)
{
	struct ctl_resp	 r;
	char		*path, *cid;

	path = sandbox_path(id, "");
	if (ctl_request(c, "DELETE", path, NULL, CTL_TIMEOUT_MS, &r) ==
	    CTL_OK) {
		if (r.r_status != 204 && r.r_status != 404) {
			cid = clean(id);
			ctl_err("could not release sandbox %s (HTTP %d)", cid,
			    r.r_status);
			free(cid);
		}
		ctl_resp_fini(&r);
	}
	free(path);
}

/*
 * launcher.backend netns or qemu: the sandbox has its own namespaces and
 * root, or is a VM; the command runs inside with the environment SPEC
 * allows: the claim's variables, the CA variables at the bundle the
 * launcher (or the guest's init) wrote inside, PATH, HOME (its own), USER,
 * LANG and TERM. netns: we (root) enter its namespaces as its user. qemu:
 * its guest agent starts the command as that user (ctl_vm.c).
 */
static int
run_launched(struct json_object *r, struct json_object *env, char **argv)
{
	static const char *const ca_vars[] = { "SSL_CERT_FILE",
	    "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE",
	    "GIT_SSL_CAINFO", NULL };
	struct json_object	*v;
	const char		*user, *t, *sock;
	char			**envp;
	unsigned		 uid, gid;
	size_t			 n = 0, i;
	int			 pid = 0, rc;

	sock = jstr(r, "ctl_socket");
	if (sock == NULL && (!json_object_object_get_ex(r, "pid", &v) ||
	    (pid = json_object_get_int(v)) <= 1 ||
	    (user = jstr(r, "user")) == NULL ||
	    sscanf(user, "%u:%u", &uid, &gid) != 2)) {
		ctl_err("the gateway's answer lacks the sandbox's pid or user");
		return CTL_FAIL;
	}
	if (geteuid() != 0) {
		ctl_err("running a command in a %s sandbox needs root",
		    sock != NULL ? "VM" : "netns");
		return CTL_FAIL;
	}
	envp = xcalloc((size_t)json_object_object_length(env) + 16,
	    sizeof(char *));
	json_object_object_foreach(env, k, jv) {
		if (!env_name_ok(k) || jv == NULL ||
		    !json_object_is_type(jv, json_type_string))
			continue;
		if (asprintf(&envp[n], "%s=%s", k,
		    json_object_get_string(jv)) != -1)
			n++;
	}
	for (i = 0; ca_vars[i] != NULL; i++)
		if (asprintf(&envp[n], "%s=%s", ca_vars[i], LNC_CA_BUNDLE) !=
		    -1)
			n++;
	if (asprintf(&envp[n], "PATH=/usr/local/bin:/usr/bin:/bin%s",
	    sock != NULL ? ":/usr/sbin:/sbin" : "") != -1)
		n++;
	if (asprintf(&envp[n], "HOME=%s", LNC_HOME) != -1)
		n++;
	if (asprintf(&envp[n], "USER=sandbox") != -1)
		n++;
	if ((t = getenv("LANG")) != NULL && asprintf(&envp[n], "LANG=%s",
	    t) != -1)
		n++;
	if ((t = getenv("TERM")) != NULL && asprintf(&envp[n], "TERM=%s",
	    t) != -1)
		n++;
	envp[n] = NULL;
	fflush(stdout);
	fflush(stderr);
	if (sock != NULL)
		rc = ctl_vm_exec(sock, argv, envp);
	else
		rc = launcher_enter_exec_flags((pid_t)pid, (uid_t)uid,
		    (gid_t)gid, argv, envp,
		    json_object_object_get_ex(r, "io_uring", &v) &&
		    json_object_get_boolean(v) ? LNC_EXEC_IO_URING : 0);
	for (i = 0; i < n; i++)
		free(envp[i]);
	free(envp);
	if (rc == -1) {
		ctl_err("could not enter the sandbox (pid %d)", pid);
		return CTL_FAIL;
	}
	return rc;
}

/*
 * run --sandbox ID: a sandbox claimed before (and kept afterwards); a VM
 * paused while idle is resumed first.
 */
static int
run_get(struct ctl *c, const char *id, struct ctl_resp *r)
{
	struct json_object	*v;
	struct ctl_resp		 rr;
	char			*path;
	int			 rc;

	path = sandbox_path(id, "");
	rc = call(c, "GET", path, NULL, CTL_TIMEOUT_MS, r);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (json_object_object_get_ex(r->r_json, "paused", &v) &&
	    json_object_get_boolean(v)) {
		path = sandbox_path(id, "/resume");
		rc = call(c, "POST", path, NULL, CTL_LONG_TIMEOUT_MS, &rr);
		free(path);
		if (rc != CTL_OK) {
			ctl_resp_fini(r);
			return rc;
		}
		ctl_resp_fini(&rr);
	}
	return CTL_OK;
}

/*
 * Claim a sandbox from the launcher's pool and run CMD with it. With
 * launcher.backend none a sandbox is an
 * identity, and the workload runs wherever its caller runs it: here, as a
 * child with the sandbox's environment (proxy, token, CA bundle) and
 * nothing else of ours but PATH HOME USER LANG TERM. Not isolated: what
 * ignores HTTPS_PROXY goes around the gateway. With backend netns the
 * command runs inside the sandbox instead (run_netns). A refused claim is
 * reported. The sandbox is released afterwards.
 */
int
ctl_cmd_run(struct ctl *c, struct ctl_args *a)
{
	struct json_object	*body, *env;
	struct ctl_resp		 r;
	const char		*id, *pem, *backend;
	char			 dir[PATH_MAX], bundle[PATH_MAX + 32];
	char			*cid, **envp;
	size_t			 i;
	int			 rc;

	if (a->a_id != NULL) {
		if (a->a_policy != NULL) {
			ctl_err("run: --sandbox and --policy exclude each "
			    "other");
			return CTL_USAGE;
		}
		rc = run_get(c, a->a_id, &r);
	} else {
		body = json_object_new_object();
		if (a->a_policy != NULL)
			json_object_object_add(body, "policy",
			    json_object_new_string(a->a_policy));
		if (a->a_from != NULL)	/* a snapshot (issue 22) */
			json_object_object_add(body, "from",
			    json_object_new_string(a->a_from));
		rc = call(c, "POST", "/v1/sandboxes/claim", body,
		    CTL_CLAIM_TIMEOUT_MS, &r);
		json_object_put(body);
	}
	if (rc != CTL_OK)
		return rc;
	if ((id = jstr(r.r_json, "id")) == NULL) {
		ctl_err("the gateway's claim answer names no sandbox");
		ctl_resp_fini(&r);
		return CTL_FAIL;
	}
	cid = clean(id);
	pem = jstr(r.r_json, "ca_cert");
	backend = jstr(r.r_json, "backend");
	if (backend != NULL && (strcmp(backend, "netns") == 0 ||
	    strcmp(backend, "qemu") == 0) &&
	    json_object_object_get_ex(r.r_json, "env", &env) &&
	    json_object_is_type(env, json_type_object)) {
		rc = run_launched(r.r_json, env, a->a_tail);
		if (a->a_id == NULL)
			run_release(c, id);
		free(cid);
		ctl_resp_fini(&r);
		return rc;
	}
	if (!json_object_object_get_ex(r.r_json, "env", &env) ||
	    !json_object_is_type(env, json_type_object) || pem == NULL ||
	    (backend != NULL && strcmp(backend, "none") != 0)) {
		ctl_err("sandbox %s: this airlockctl cannot run commands with "
		    "this launcher (backend %s); not running \"%s\"", cid,
		    backend != NULL ? backend : "unknown", a->a_tail[0]);
		if (a->a_id == NULL)
			run_release(c, id);
		free(cid);
		ctl_resp_fini(&r);
		return CTL_FAIL;
	}
	if (run_bundle(pem, dir, sizeof(dir), bundle, sizeof(bundle)) == -1) {
		if (a->a_id == NULL)
			run_release(c, id);
		free(cid);
		ctl_resp_fini(&r);
		return CTL_FAIL;
	}
	if (isatty(STDERR_FILENO))
		ctl_err("running %s as sandbox %s (launcher.backend none: on "
		    "this host, not isolated)", a->a_tail[0], cid);
	envp = run_env(env, bundle);
	rc = run_exec(a->a_tail, envp);
	for (i = 0; envp[i] != NULL; i++)
		free(envp[i]);
	free(envp);
	if (a->a_id == NULL)
		run_release(c, id);
	unlink(bundle);
	rmdir(dir);
	free(cid);
	ctl_resp_fini(&r);
	return rc;
}

int
ctl_cmd_reload(struct ctl *c, struct ctl_args *a)
{
	struct ctl_resp	r;
	int		rc;

	if ((rc = call(c, "POST", "/v1/reload", NULL, CTL_LONG_TIMEOUT_MS,
	    &r)) != CTL_OK)
		return rc;
	if (c->c_json)
		print_body(&r);
	else
		printf("configuration reloaded\n");
	ctl_resp_fini(&r);
	return CTL_OK;
}

static int
is_hash(const char *s)
{
	size_t	i;

	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[64] == '\0';
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
		print_json(out);
		json_object_put(out);
	}
	return rc;
}
