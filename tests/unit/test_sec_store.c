/*
 * Secrets store: every source kind, refusals reported at the secret's
 * FILE:LINE:COL without the value, exec: refresh (and its failures), locked
 * memory, wiping, and process hardening.
 */
#include "config.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "cfg/cfg.h"
#include "secrets/sec.h"
#include "util/util.h"
#include "unit.h"

/* Test hooks of src/secrets/sec_store.c. */
void	sec_store_test_timeout(uint64_t);
void	sec_store_test_wipe_hook(void (*)(const void *, size_t));

/* A distinctive value: no message may ever contain it. */
#define VALUE	"sk-LEAKCHECK-7f3a9c"

static char	tmpdir[256];

static void
tmp_setup(void)
{
	char	*real;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/airlock-sec-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	real = realpath(tmpdir, NULL);
	ck_assert_ptr_nonnull(real);
	snprintf(tmpdir, sizeof(tmpdir), "%s", real);
	free(real);
}

static void
tmp_teardown(void)
{
	char	cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	sec_store_test_timeout(0);
	sec_store_test_wipe_hook(NULL);
}

/* <dir>/<name> with <text> and <mode>; the path goes to <path>. */
static void
tmp_file(const char *name, const char *text, mode_t mode, char *path,
    size_t pathsz)
{
	int	fd;

	snprintf(path, pathsz, "%s/%s", tmpdir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

/* A valid configuration with "secrets:" followed by <items>. */
static struct cfg *
mkcfg(const char *items)
{
	struct cfg	*c;
	FILE		*f;
	char		*yaml, *out = NULL;
	size_t		 sz;
	int		 nerr;

	ck_assert_int_ne(asprintf(&yaml, "secrets:\n%s", items), -1);
	f = open_memstream(&out, &sz);
	c = cfg_load_buffer("t.yaml", yaml, strlen(yaml), f, &nerr);
	fclose(f);
	ck_assert_msg(c != NULL, "config:\n%s\nerrors:\n%s", yaml, out);
	free(yaml);
	free(out);
	return c;
}

/* One secret item: source <src> (YAML double-quoted), <extra> keys. */
static char *
item(const char *name, const char *src, const char *extra)
{
	char	*s;

	ck_assert_int_ne(asprintf(&s, "  - name: %s\n    source: \"%s\"\n"
	    "    hosts: [api.test]\n    placeholder: airlock-%s-ph\n%s", name,
	    src, name, extra != NULL ? extra : ""), -1);
	return s;
}

/* sec_store_new on <c>; what it printed goes to *out (caller frees). */
static struct sec_store *
store(struct cfg *c, char **out)
{
	struct sec_store	*ss;
	FILE			*f;
	size_t			 sz;

	*out = NULL;
	f = open_memstream(out, &sz);
	ss = sec_store_new(c, f);
	fclose(f);
	return ss;
}

/* Load one secret with source <src>; it must fail with <msg> only. */
#define WHERE	"t.yaml:2:5: secret \"k\": "
static void
want_error(const char *src, const char *msg)
{
	struct cfg	*c;
	char		*it, *out;

	it = item("k", src, NULL);
	c = mkcfg(it);
	ck_assert_ptr_null(store(c, &out));
	ck_assert_msg(strncmp(out, WHERE, strlen(WHERE)) == 0,
	    "%s: %s", src, out);
	ck_assert_msg(strstr(out, msg) != NULL, "%s: want %s, got %s", src,
	    msg, out);
	ck_assert_msg(strchr(out, '\n') == out + strlen(out) - 1,
	    "%s: more than one line: %s", src, out);
	ck_assert_msg(strstr(out, VALUE) == NULL, "value leaked: %s", out);
	ck_assert_msg(strstr(out, "LEAKCHECK") == NULL, "value leaked: %s",
	    out);
	free(out);
	free(it);
	cfg_unref(c);
}

static void
want_value(struct sec_store *ss, size_t idx, const char *v)
{
	struct sec_val	*sv;

	sv = sec_store_get(ss, idx);
	ck_assert_ptr_nonnull(sv);
	ck_assert_uint_eq(sv->sv_len, strlen(v));
	ck_assert_str_eq(sv->sv_data, v);
	sec_val_unref(sv);
}

START_TEST(test_sec_sources)
{
	struct sec_store	*ss;
	struct cfg		*c;
	char			 path[512], src[600];
	char			*items, *a, *b, *d, *e, *out;

	tmp_setup();
	ck_assert_int_eq(setenv("AIRLOCK_TEST_SECRET", VALUE, 1), 0);
	tmp_file("f", VALUE "\r\n\n", 0600, path, sizeof(path));
	snprintf(src, sizeof(src), "file:%s", path);
	a = item("e", "env:AIRLOCK_TEST_SECRET", NULL);
	b = item("f", src, NULL);
	d = item("x", "exec:printf 'from-exec\\\\r\\\\n\\\\n'", NULL);
	e = item("l", "literal:a:b c", NULL);
	ck_assert_int_ne(asprintf(&items, "%s%s%s%s", a, b, d, e), -1);
	c = mkcfg(items);
	ss = store(c, &out);
	ck_assert_msg(ss != NULL, "%s", out);
	ck_assert_str_eq(out, "");
	want_value(ss, 0, VALUE);
	want_value(ss, 1, VALUE);
	want_value(ss, 2, "from-exec");
	want_value(ss, 3, "a:b c");
	ck_assert_uint_eq(sec_store_generation(ss, 0), 1);
	ck_assert_uint_eq(sec_store_generation(ss, 3), 1);
	/* out of range, and no store at all */
	ck_assert_ptr_null(sec_store_get(ss, 4));
	ck_assert_uint_eq(sec_store_generation(ss, 4), 0);
	ck_assert_ptr_null(sec_store_get(NULL, 0));
	ck_assert_uint_eq(sec_store_generation(NULL, 0), 0);
	sec_store_free(NULL);
	sec_val_unref(NULL);
	c->c_store = ss;	/* cfg_free frees it */
	cfg_unref(c);
	free(out);
	free(items);
	free(a);
	free(b);
	free(d);
	free(e);
	unsetenv("AIRLOCK_TEST_SECRET");
	tmp_teardown();
}
END_TEST

/* A relative file: path is resolved against the configuration's dir. */
START_TEST(test_sec_file_relative)
{
	struct sec_store	*ss;
	struct cfg		*c;
	FILE			*f;
	char			 path[512], conf[512], want[600], *out;
	size_t			 sz;
	int			 nerr;

	tmp_setup();
	tmp_file("key", "rel-value\n", 0400, path, sizeof(path));
	tmp_file("airlock.yaml", "secrets:\n  - name: k\n"
	    "    source: file:./key\n    hosts: [api.test]\n"
	    "    placeholder: airlock-k-ph\n", 0644, conf, sizeof(conf));
	f = open_memstream(&out, &sz);
	c = cfg_load(conf, f, &nerr);
	fclose(f);
	ck_assert_msg(c != NULL, "%s", out);
	free(out);
	snprintf(want, sizeof(want), "file:%s", path);
	ck_assert_str_eq(c->c_secrets[0].sc_source, want);
	ss = store(c, &out);
	ck_assert_msg(ss != NULL, "%s", out);
	want_value(ss, 0, "rel-value");
	sec_store_free(ss);
	free(out);
	cfg_unref(c);
	tmp_teardown();
}
END_TEST

START_TEST(test_sec_file_refused)
{
	char	path[512], src[600], msg[700];

	tmp_setup();
	tmp_file("g", VALUE "\n", 0640, path, sizeof(path));
	snprintf(src, sizeof(src), "file:%s", path);
	snprintf(msg, sizeof(msg), "file \"%s\" is readable by group or "
	    "others (mode 0640): chmod 600 it", path);
	want_error(src, msg);
	tmp_file("o", VALUE "\n", 0604, path, sizeof(path));
	snprintf(src, sizeof(src), "file:%s", path);
	want_error(src, "is readable by group or others (mode 0604)");
	tmp_file("w", VALUE "\n", 0620, path, sizeof(path));
	snprintf(src, sizeof(src), "file:%s", path);
	want_error(src, "is readable by group or others");

	snprintf(src, sizeof(src), "file:%s/missing", tmpdir);
	snprintf(msg, sizeof(msg), "cannot read file \"%s/missing\": No such "
	    "file or directory", tmpdir);
	want_error(src, msg);
	snprintf(src, sizeof(src), "file:%s", tmpdir);
	want_error(src, "is not a regular file");

	tmp_file("empty", "\n\n", 0600, path, sizeof(path));
	snprintf(src, sizeof(src), "file:%s", path);
	want_error(src, "the value is empty");
	tmp_file("ctl", VALUE "\nsecond line\n", 0600, path, sizeof(path));
	snprintf(src, sizeof(src), "file:%s", path);
	want_error(src, "the value contains control characters");
	tmp_teardown();
}
END_TEST

START_TEST(test_sec_file_too_large)
{
	char	path[512], src[600], *big;

	tmp_setup();
	big = malloc(64 * 1024 + 2);
	ck_assert_ptr_nonnull(big);
	memset(big, 'a', 64 * 1024 + 1);
	big[64 * 1024 + 1] = '\0';
	tmp_file("big", big, 0600, path, sizeof(path));
	snprintf(src, sizeof(src), "file:%s", path);
	want_error(src, "is larger than 65536 bytes");
	/* exactly 64 KiB is fine */
	big[64 * 1024] = '\0';
	tmp_file("big", big, 0600, path, sizeof(path));
	{
		struct sec_store	*ss;
		struct cfg		*c;
		char			*it, *out;

		it = item("k", src, NULL);
		c = mkcfg(it);
		ss = store(c, &out);
		ck_assert_msg(ss != NULL, "%s", out);
		want_value(ss, 0, big);
		sec_store_free(ss);
		free(out);
		free(it);
		cfg_unref(c);
	}
	free(big);
	tmp_teardown();
}
END_TEST

START_TEST(test_sec_env_refused)
{
	tmp_setup();
	unsetenv("AIRLOCK_TEST_SURELY_UNSET");
	want_error("env:AIRLOCK_TEST_SURELY_UNSET", "environment variable "
	    "\"AIRLOCK_TEST_SURELY_UNSET\" is not set");
	ck_assert_int_eq(setenv("AIRLOCK_TEST_SECRET", "", 1), 0);
	want_error("env:AIRLOCK_TEST_SECRET", "the value is empty");
	ck_assert_int_eq(setenv("AIRLOCK_TEST_SECRET", VALUE "\n", 1), 0);
	want_error("env:AIRLOCK_TEST_SECRET", "the value contains control "
	    "characters");
	unsetenv("AIRLOCK_TEST_SECRET");
	want_error("literal:" VALUE "\\t", "the value contains control "
	    "characters");
	tmp_teardown();
}
END_TEST

START_TEST(test_sec_exec_refused)
{
	char	path[512], src[600];

	tmp_setup();
	/* what the command printed stays out of the message */
	want_error("exec:printf " VALUE "; exit 3",
	    "command exited with status 3");
	want_error("exec:echo " VALUE "; kill -9 $$",
	    "command killed by signal 9");
	want_error("exec:true", "the value is empty");
	want_error("exec:printf 'a\\\\nb'", "the value contains control "
	    "characters");
	tmp_file("big.sh", "head -c 70000 /dev/zero | tr '\\0' a\n", 0700,
	    path, sizeof(path));
	snprintf(src, sizeof(src), "exec:sh %s", path);
	want_error(src, "command printed more than 65536 bytes");
	want_error("exec:/nonexistent/cmd", "command exited with status 127");
	tmp_teardown();
}
END_TEST

START_TEST(test_sec_exec_timeout)
{
	uint64_t	t0;

	tmp_setup();
	sec_store_test_timeout(300);
	t0 = util_now_ms();
	want_error("exec:echo " VALUE "; sleep 10", "command timed out after "
	    "300ms");
	ck_assert_uint_lt(util_now_ms() - t0, 3000);
	/* stdout closed early is not the end: the exit is waited for */
	t0 = util_now_ms();
	want_error("exec:echo " VALUE "; exec >&-; sleep 10",
	    "command timed out");
	ck_assert_uint_lt(util_now_ms() - t0, 3000);
	/* a background job holding stdout is killed with its group */
	t0 = util_now_ms();
	want_error("exec:sleep 10 & echo " VALUE, "command timed out");
	ck_assert_uint_lt(util_now_ms() - t0, 3000);
	tmp_teardown();
}
END_TEST

/* Every secret is tried and reported, not just the first bad one. */
START_TEST(test_sec_all_errors)
{
	struct cfg	*c;
	char		*a, *b, *d, *items, *out;

	tmp_setup();
	unsetenv("AIRLOCK_TEST_SURELY_UNSET");
	a = item("a", "env:AIRLOCK_TEST_SURELY_UNSET", NULL);
	b = item("b", "literal:fine", NULL);
	d = item("d", "exec:exit 4", NULL);
	ck_assert_int_ne(asprintf(&items, "%s%s%s", a, b, d), -1);
	c = mkcfg(items);
	ck_assert_ptr_null(store(c, &out));
	ck_assert_msg(strstr(out, "t.yaml:2:5: secret \"a\": environment "
	    "variable") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "t.yaml:10:5: secret \"d\": command exited "
	    "with status 4\n") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "\"b\"") == NULL, "%s", out);
	free(out);
	free(items);
	free(a);
	free(b);
	free(d);
	cfg_unref(c);
	tmp_teardown();
}
END_TEST

/* Run <fn> with stderr going to a file; its contents into *out. */
struct capture {
	int	saved;
	char	path[512];
};

static void
capture_start(struct capture *cap)
{
	int	fd;

	snprintf(cap->path, sizeof(cap->path), "%s/stderr", tmpdir);
	fd = open(cap->path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
	ck_assert_int_ne(fd, -1);
	fflush(stderr);
	cap->saved = dup(2);
	ck_assert_int_ne(cap->saved, -1);
	ck_assert_int_eq(dup2(fd, 2), 2);
	close(fd);
}

static char *
capture_end(struct capture *cap)
{
	FILE	*f;
	char	*buf;
	long	 n;

	fflush(stderr);
	ck_assert_int_eq(dup2(cap->saved, 2), 2);
	close(cap->saved);
	f = fopen(cap->path, "r");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* A command's stderr may echo the secret: it goes nowhere. */
START_TEST(test_sec_exec_stderr)
{
	struct sec_store	*ss;
	struct cfg		*c;
	struct capture		 cap;
	char			*it, *out, *err;

	tmp_setup();
	it = item("k", "exec:echo " VALUE " >&2; echo " VALUE, NULL);
	c = mkcfg(it);
	capture_start(&cap);
	ss = store(c, &out);
	err = capture_end(&cap);
	ck_assert_msg(ss != NULL, "%s", out);
	ck_assert_msg(strstr(err, "LEAKCHECK") == NULL, "stderr: %s", err);
	want_value(ss, 0, VALUE);
	sec_store_free(ss);
	free(err);
	free(out);
	free(it);
	cfg_unref(c);
	tmp_teardown();
}
END_TEST

/* Poll until <idx>'s generation is at least <gen>, for at most <ms>. */
static int
wait_gen(struct sec_store *ss, size_t idx, uint64_t gen, uint64_t ms)
{
	struct timespec	ts = { 0, 20 * 1000 * 1000 };
	uint64_t	end = util_now_ms() + ms;

	while (util_now_ms() < end) {
		if (sec_store_generation(ss, idx) >= gen)
			return 1;
		nanosleep(&ts, NULL);
	}
	return sec_store_generation(ss, idx) >= gen;
}

START_TEST(test_sec_refresh)
{
	struct sec_store	*ss;
	struct sec_val		*first, *v;
	struct cfg		*c;
	struct capture		 cap;
	struct timespec		 ts = { 0, 700 * 1000 * 1000 };
	char			 script[512], src[600], fail[600];
	char			*it, *out, *err;
	uint64_t		 gen;

	tmp_setup();
	/* prints sk-LEAKCHECK-7f3a9c-N, N counting runs; fails when told */
	tmp_file("count", "0\n", 0600, script, sizeof(script));
	snprintf(fail, sizeof(fail), "%s/fail", tmpdir);
	tmp_file("s.sh", "cd \"$(dirname \"$0\")\"\n"
	    "n=$(($(cat count) + 1)); echo $n > count\n"
	    "echo " VALUE "-$n\n"
	    "if [ -e fail ]; then exit 1; fi\n", 0700, script,
	    sizeof(script));
	snprintf(src, sizeof(src), "exec:sh %s", script);
	it = item("k", src, "    refresh: 200ms\n");
	c = mkcfg(it);
	ck_assert_uint_eq(c->c_secrets[0].sc_refresh_ms, 200);
	capture_start(&cap);
	ss = store(c, &out);
	ck_assert_msg(ss != NULL, "%s", out);
	first = sec_store_get(ss, 0);
	ck_assert_str_eq(first->sv_data, VALUE "-1");
	ck_assert_uint_eq(sec_store_generation(ss, 0), 1);

	/* refreshed: a new value and generation */
	ck_assert(wait_gen(ss, 0, 2, 3000));
	v = sec_store_get(ss, 0);
	ck_assert_ptr_ne(v, first);
	ck_assert_int_eq(strncmp(v->sv_data, VALUE "-", strlen(VALUE) + 1),
	    0);
	ck_assert_str_ne(v->sv_data, VALUE "-1");
	sec_val_unref(v);
	/* a reference taken before the swap still holds the old value */
	ck_assert_str_eq(first->sv_data, VALUE "-1");
	sec_val_unref(first);

	/* failing: the last good value stays, the generation too */
	tmp_file("fail", "", 0600, fail, sizeof(fail));
	nanosleep(&ts, NULL);	/* a refresh in flight may still succeed */
	gen = sec_store_generation(ss, 0);
	v = sec_store_get(ss, 0);
	nanosleep(&ts, NULL);
	ck_assert_uint_eq(sec_store_generation(ss, 0), gen);
	first = sec_store_get(ss, 0);
	ck_assert_ptr_eq(first, v);
	sec_val_unref(first);
	sec_val_unref(v);

	/* and it recovers */
	ck_assert_int_eq(unlink(fail), 0);
	ck_assert(wait_gen(ss, 0, gen + 1, 3000));
	sec_store_free(ss);
	err = capture_end(&cap);
	ck_assert_msg(strstr(err, "secret \"k\": refresh failed: command "
	    "exited with status 1") != NULL, "stderr: %s", err);
	ck_assert_msg(strstr(err, "secret \"k\": refresh works again") !=
	    NULL, "stderr: %s", err);
	/* once while it kept failing, not at every interval */
	ck_assert_ptr_null(strstr(strstr(err, "refresh failed") + 1,
	    "refresh failed"));
	ck_assert_msg(strstr(err, "LEAKCHECK") == NULL, "stderr: %s", err);
	free(err);
	free(out);
	free(it);
	cfg_unref(c);
	tmp_teardown();
}
END_TEST

/* Freeing the store stops a refresh command that is still running. */
START_TEST(test_sec_refresh_stop)
{
	struct sec_store	*ss;
	struct cfg		*c;
	struct timespec		 ts = { 0, 400 * 1000 * 1000 };
	char			 script[512], src[600], *it, *out;
	uint64_t		 t0;

	tmp_setup();
	tmp_file("s.sh", "cd \"$(dirname \"$0\")\"\n"
	    "if [ -e ran ]; then sleep 30; fi\n"
	    "touch ran; echo v\n", 0700, script, sizeof(script));
	snprintf(src, sizeof(src), "exec:sh %s", script);
	it = item("k", src, "    refresh: 100ms\n");
	c = mkcfg(it);
	ss = store(c, &out);
	ck_assert_msg(ss != NULL, "%s", out);
	nanosleep(&ts, NULL);	/* now in "sleep 30" */
	t0 = util_now_ms();
	sec_store_free(ss);
	ck_assert_uint_lt(util_now_ms() - t0, 2000);
	free(out);
	free(it);
	cfg_unref(c);
	tmp_teardown();
}
END_TEST

static long
vmlck_kb(void)
{
	FILE	*f;
	char	 line[256];
	long	 kb = -1;

	if ((f = fopen("/proc/self/status", "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

#if defined(__SANITIZE_ADDRESS__)
static const int	sanitized = 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
static const int	sanitized = 1;
#else
static const int	sanitized = 0;
#endif
#else
static const int	sanitized = 0;
#endif

START_TEST(test_sec_locked)
{
	struct sec_store	*ss;
	struct cfg		*c;
	struct rlimit		 rl;
	char			*it, *out;
	long			 before, after;

	tmp_setup();
	before = vmlck_kb();
	it = item("k", "literal:" VALUE, NULL);
	c = mkcfg(it);
	ss = store(c, &out);
	ck_assert_msg(ss != NULL, "%s", out);
	after = vmlck_kb();
	ck_assert_int_eq(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	if (sanitized) {
		/* ASan's mlock() is a no-op that reports success */
	} else if (geteuid() != 0 && rl.rlim_cur < 4096) {
		/* not permitted here: the store warns and goes on */
		fprintf(stderr, "test_sec_locked: mlock not permitted "
		    "(RLIMIT_MEMLOCK %llu), skipped\n",
		    (unsigned long long)rl.rlim_cur);
	} else if (before >= 0) {
		ck_assert_msg(after > before, "VmLck %ld kB -> %ld kB", before,
		    after);
	}
	want_value(ss, 0, VALUE);
	sec_store_free(ss);
	if (before >= 0 && after > before)
		ck_assert_int_eq(vmlck_kb(), before);
	free(out);
	free(it);
	cfg_unref(c);
	tmp_teardown();
}
END_TEST

static int	wipes, wipes_dirty;

static void
wipe_hook(const void *p, size_t len)
{
	const unsigned char	*b = p;
	size_t			 i;

	wipes++;
	for (i = 0; i < len; i++)
		if (b[i] != 0)
			wipes_dirty++;
}

/* The last unref wipes the whole mapping before it is unmapped. */
START_TEST(test_sec_wipe)
{
	struct sec_store	*ss;
	struct sec_val		*v;
	struct cfg		*c;
	char			*it, *out;

	tmp_setup();
	wipes = wipes_dirty = 0;
	sec_store_test_wipe_hook(wipe_hook);
	it = item("k", "literal:" VALUE, NULL);
	c = mkcfg(it);
	ss = store(c, &out);
	ck_assert_msg(ss != NULL, "%s", out);
	wipes = 0;	/* scratch values of the load */
	v = sec_store_get(ss, 0);
	ck_assert_int_eq(v->sv_refs, 2);
	ck_assert_uint_eq(v->sv_maplen % (size_t)sysconf(_SC_PAGESIZE), 0);
	sec_store_free(ss);
	ck_assert_int_eq(wipes, 0);	/* still referenced */
	ck_assert_str_eq(v->sv_data, VALUE);
	sec_val_unref(v);
	ck_assert_int_eq(wipes, 1);
	ck_assert_int_eq(wipes_dirty, 0);
	free(out);
	free(it);
	cfg_unref(c);
	tmp_teardown();
}
END_TEST

/* No core dumps and not dumpable: checked in a child, as it sticks. */
START_TEST(test_sec_harden)
{
	struct rlimit	rl;
	pid_t		pid;
	int		status;

	if ((pid = fork()) == 0) {
		sec_harden_process();
		if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
			_exit(1);
		if (getrlimit(RLIMIT_CORE, &rl) == -1 || rl.rlim_cur != 0 ||
		    rl.rlim_max != 0)
			_exit(2);
		_exit(0);
	}
	ck_assert_int_ne(pid, -1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/* No secrets: an empty store, which gets nothing. */
START_TEST(test_sec_empty)
{
	struct sec_store	*ss;
	struct cfg		*c;
	char			*out;

	c = mkcfg("");
	ck_assert_uint_eq(c->c_nsecrets, 0);
	ss = store(c, &out);
	ck_assert_ptr_nonnull(ss);
	ck_assert_ptr_null(sec_store_get(ss, 0));
	sec_store_free(ss);
	free(out);
	cfg_unref(c);
}
END_TEST

/*
 * Token brokers: the credential is read at load (multi-line allowed), the
 * mint runs in the store's thread; a failed one leaves no value and the
 * reason (the destination guard's here: 127.0.0.0/8 is denied by default),
 * never a value.
 */
START_TEST(test_sec_broker)
{
	struct cfg	*c;
	struct sec_val	*v;
	char		 path[512], why[400], *items, *out;

	tmp_setup();
	tmp_file("sa.json", "{\"client_email\": \"a@b\",\n"
	    "\"private_key\": \"LEAKCHECK\"}\n", 0600, path, sizeof(path));
	ck_assert_int_ne(asprintf(&items,
	    "  - name: cc\n    source:\n      oauth2_client_credentials:\n"
	    "        token_url: \"https://127.0.0.1:9/t\"\n"
	    "        client_id: c\n        client_secret: \"literal:%s\"\n"
	    "    hosts: [api.test]\n    inject: {header: X-A, value: "
	    "\"${secret}\"}\n"
	    "  - name: g\n    source:\n      google_service_account:\n"
	    "        key_file: \"%s\"\n        scopes: [a, b]\n"
	    "    hosts: [api.test]\n    inject: {header: X-B, value: "
	    "\"${secret}\"}\n", VALUE, path), -1);
	c = mkcfg(items);
	free(items);
	ck_assert_ptr_nonnull(c->c_secrets[0].sc_broker);
	ck_assert_str_eq(c->c_secrets[1].sc_broker->b_scope, "a b");
	c->c_store = store(c, &out);
	ck_assert_msg(c->c_store != NULL, "%s", out);
	free(out);
	sec_store_wait(c->c_store, 0, 5000);
	sec_store_wait(c->c_store, 1, 5000);
	ck_assert_int_eq(sec_store_pending(c->c_store, 0), 0);
	ck_assert_ptr_null(v = sec_store_get(c->c_store, 0));
	sec_store_why(c->c_store, 0, why, sizeof(why));
	ck_assert_msg(strstr(why, "denied network 127.0.0.0/8") != NULL, "%s",
	    why);
	ck_assert_ptr_null(strstr(why, VALUE));
	ck_assert_ptr_null(sec_store_get(c->c_store, 1));
	sec_store_why(c->c_store, 1, why, sizeof(why));
	ck_assert_msg(strstr(why, "not a service-account JSON key") != NULL ||
	    strstr(why, "not a PEM RSA key") != NULL, "%s", why);
	ck_assert_ptr_null(strstr(why, "LEAKCHECK"));
	cfg_unref(c);	/* stops the threads */
	tmp_teardown();
}
END_TEST

Suite *
suite_sec_store(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("sec_store");
	tc = tcase_create("sources");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_sec_sources);
	tcase_add_test(tc, test_sec_file_relative);
	tcase_add_test(tc, test_sec_file_refused);
	tcase_add_test(tc, test_sec_file_too_large);
	tcase_add_test(tc, test_sec_env_refused);
	tcase_add_test(tc, test_sec_exec_refused);
	tcase_add_test(tc, test_sec_exec_timeout);
	tcase_add_test(tc, test_sec_all_errors);
	tcase_add_test(tc, test_sec_exec_stderr);
	tcase_add_test(tc, test_sec_empty);
	suite_add_tcase(s, tc);

	tc = tcase_create("refresh");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_sec_refresh);
	tcase_add_test(tc, test_sec_refresh_stop);
	tcase_add_test(tc, test_sec_broker);
	suite_add_tcase(s, tc);

	tc = tcase_create("memory");
	tcase_add_test(tc, test_sec_locked);
	tcase_add_test(tc, test_sec_wipe);
	tcase_add_test(tc, test_sec_harden);
	suite_add_tcase(s, tc);
	return s;
}
