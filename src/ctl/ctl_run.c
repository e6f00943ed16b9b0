/*
 * airlockctl run: claim a sandbox, run a command in it (its namespaces,
 * or its VM through the guest agent) with the gateway's environment and
 * CA bundle, release it, and exit with the command's status.
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

#include "launcher/launcher.h"
#include "ctl/ctl.h"
#include "util/util.h"

extern char	**environ;

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

	path = ctl_sandbox_path(id, "");
	if (ctl_request(c, "DELETE", path, NULL, CTL_TIMEOUT_MS, &r) ==
	    CTL_OK) {
		if (r.r_status != 204 && r.r_status != 404) {
			cid = ctl_clean(id);
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

	sock = ctl_jstr(r, "ctl_socket");
	if (sock == NULL && (!json_object_object_get_ex(r, "pid", &v) ||
	    (pid = json_object_get_int(v)) <= 1 ||
	    (user = ctl_jstr(r, "user")) == NULL ||
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

	path = ctl_sandbox_path(id, "");
	rc = ctl_call(c, "GET", path, NULL, CTL_TIMEOUT_MS, r);
	free(path);
	if (rc != CTL_OK)
		return rc;
	if (json_object_object_get_ex(r->r_json, "paused", &v) &&
	    json_object_get_boolean(v)) {
		path = ctl_sandbox_path(id, "/resume");
		rc = ctl_call(c, "POST", path, NULL, CTL_LONG_TIMEOUT_MS, &rr);
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
		rc = ctl_call(c, "POST", "/v1/sandboxes/claim", body,
		    CTL_CLAIM_TIMEOUT_MS, &r);
		json_object_put(body);
	}
	if (rc != CTL_OK)
		return rc;
	if ((id = ctl_jstr(r.r_json, "id")) == NULL) {
		ctl_err("the gateway's claim answer names no sandbox");
		ctl_resp_fini(&r);
		return CTL_FAIL;
	}
	cid = ctl_clean(id);
	pem = ctl_jstr(r.r_json, "ca_cert");
	backend = ctl_jstr(r.r_json, "backend");
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
