/*
 * Audit hash chain: aud_verify_file on chains built here by the SPEC's
 * rule (a line altered, removed, swapped, inserted, cut), on files of the
 * real writer (restart, rotation, a cut line left by a crash), and the
 * writer failing closed: a file size limit standing in for a full disk,
 * the file or its directory removed, the bound on records held in memory.
 */
#include "config.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <json-c/json.h>
#include <openssl/sha.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "unit.h"

/* Test hook of src/audit/aud.c. */
void	aud_test_set_hold_max(size_t);

#define NLINES	10
#define ZEROS	"00000000000000000000000000000000" \
		"00000000000000000000000000000000"

/* ---- records and chains built by the SPEC's rule ---- */

static void
sha_hex(const char *p, size_t len, char out[65])
{
	unsigned char	md[SHA256_DIGEST_LENGTH];
	int		i;

	SHA256((const unsigned char *)p, len, md);
	for (i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void
rec_init(struct aud_rec *r, int i, char *id, size_t idsz)
{
	memset(r, 0, sizeof(*r));
	snprintf(id, idsz, "req-%04d", i);
	r->ar_start_wall_ms = 1767225600000ULL + (uint64_t)i;
	r->ar_id = id;
	r->ar_sandbox = "sb";
	r->ar_client = "127.0.0.1:40000";
	r->ar_mode = "explicit";
	r->ar_proto = "http";
	r->ar_method = "GET";
	r->ar_host = "api.test";
	r->ar_port = 443;
	r->ar_path = "/v1/x";
	r->ar_status = 200;
	r->ar_decision = "allow";
	r->ar_bytes_in = 10;
	r->ar_bytes_out = 20;
	r->ar_duration_ms = 1;
	r->ar_cost_micro = -1;
}

/*
 * Record <i> chained after <prev> (then set to its hash): the line with its
 * newline, hashed over {...,"prev":"P"} as SPEC says. Caller frees.
 */
static char *
chained(int i, char prev[65])
{
	struct aud_rec	 r;
	char		 id[32], hash[65], *text, *body, *line;

	rec_init(&r, i, id, sizeof(id));
	text = aud_rec_json(&r);
	ck_assert_int_ne(asprintf(&body, "%.*s,\"prev\":\"%s\"}",
	    (int)strlen(text) - 1, text, prev), -1);
	sha_hex(body, strlen(body), hash);
	ck_assert_int_ne(asprintf(&line, "%.*s,\"hash\":\"%s\"}\n",
	    (int)strlen(body) - 1, body, hash), -1);
	memcpy(prev, hash, 65);
	free(text);
	free(body);
	return line;
}

/* The "hash" at the end of <line> (with or without its newline). */
static void
line_hash(const char *line, char out[65])
{
	const char	*p = strstr(line, ",\"hash\":\"");

	ck_assert_ptr_nonnull(p);
	memcpy(out, p + 9, 64);
	out[64] = '\0';
}

/* Run aud_verify_file over <text>. */
static int
verify_text(const char *text, size_t len, const char *prev,
    struct aud_verify *v)
{
	FILE	*f;
	int	 rc;

	ck_assert_ptr_nonnull(f = tmpfile());
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	rewind(f);
	rc = aud_verify_file(f, prev, v);
	fclose(f);
	return rc;
}

/* ---- a table of changes to a chain of NLINES records ---- */

struct chain {
	char	*l[NLINES + 8];	/* lines with their newline */
	int	 n;
	char	 prev0[65];	/* prev of line 1 */
	char	 extra[65];	/* for a case that needs a hash */
};

static void
chain_build(struct chain *c)
{
	char	prev[65] = ZEROS;
	int	i;

	memset(c, 0, sizeof(*c));
	memcpy(c->prev0, prev, 65);
	for (i = 0; i < NLINES; i++)
		c->l[i] = chained(i + 1, prev);
	c->n = NLINES;
}

static void
chain_free(struct chain *c)
{
	int	i;

	for (i = 0; i < c->n; i++)
		free(c->l[i]);
}

static char *
chain_join(const struct chain *c, size_t *len)
{
	char	*s;
	size_t	 n = 0;
	int	 i;

	for (i = 0; i < c->n; i++)
		n += strlen(c->l[i]);
	s = calloc(1, n + 1);
	ck_assert_ptr_nonnull(s);
	for (i = 0, n = 0; i < c->n; i++) {
		memcpy(s + n, c->l[i], strlen(c->l[i]));
		n += strlen(c->l[i]);
	}
	*len = n;
	return s;
}

/* line numbers below are 1-based, as verification reports them */
static void
del_line(struct chain *c, int no)
{
	free(c->l[no - 1]);
	memmove(&c->l[no - 1], &c->l[no], sizeof(char *) * (size_t)(c->n - no));
	c->n--;
}

static void
ins_line(struct chain *c, int no, char *line)
{
	memmove(&c->l[no], &c->l[no - 1],
	    sizeof(char *) * (size_t)(c->n - no + 1));
	c->l[no - 1] = line;
	c->n++;
}

static void
replace_in(struct chain *c, int no, const char *from, const char *to)
{
	char	*p = strstr(c->l[no - 1], from), *s;

	ck_assert_ptr_nonnull(p);
	ck_assert_int_ne(asprintf(&s, "%.*s%s%s", (int)(p - c->l[no - 1]),
	    c->l[no - 1], to, p + strlen(from)), -1);
	free(c->l[no - 1]);
	c->l[no - 1] = s;
}

static void
m_none(struct chain *c)
{
	(void)c;
}

static void
m_alter(struct chain *c)
{
	replace_in(c, 7, "GET", "PUT");
}

static void
m_spaces(struct chain *c)
{
	replace_in(c, 1, "{\"ts\":", "{\"ts\": ");
}

static void
m_del5(struct chain *c)
{
	del_line(c, 5);
}

static void
m_del1(struct chain *c)
{
	line_hash(c->l[0], c->extra);
	del_line(c, 1);
}

static void
m_empty(struct chain *c)
{
	while (c->n > 0)
		del_line(c, 1);
}

static void
m_garbage(struct chain *c)
{
	free(c->l[2]);
	c->l[2] = strdup("hello\n");
}

static void
m_nohash(struct chain *c)
{
	free(c->l[2]);
	c->l[2] = strdup("{\"ts\":\"x\"}\n");
}

static void
m_blank_mid(struct chain *c)
{
	ins_line(c, 4, strdup("\n"));
}

static void
m_crlf(struct chain *c)
{
	replace_in(c, 5, "}\n", "}\r\n");
}

static void
m_not_last(struct chain *c)
{
	replace_in(c, 2, "\"}\n", "\",\"x\":1}\n");
}

static void
m_alter_prev(struct chain *c)
{
	/* one hex digit of line 4's prev */
	char	*p = strstr(c->l[3], "\"prev\":\"") + 8;

	*p = *p == 'a' ? 'b' : 'a';
}

static void
m_alter_hash(struct chain *c)
{
	char	*p = strstr(c->l[3], "\"hash\":\"") + 8;

	*p = *p == 'a' ? 'b' : 'a';
}

static void
m_upper_hash(struct chain *c)
{
	char	*p = strstr(c->l[1], "\"hash\":\"") + 8;
	int	 i;

	for (i = 0; i < 64; i++)
		p[i] = (char)(p[i] >= 'a' ? p[i] - 32 : p[i]);
}

static void
m_swap(struct chain *c)
{
	char	*t = c->l[2];

	c->l[2] = c->l[3];
	c->l[3] = t;
}

static void
m_dup(struct chain *c)
{
	/* an old line copied in as line 7 */
	ins_line(c, 7, strdup(c->l[1]));
}

static void
m_forge(struct chain *c)
{
	/* a line with a valid hash, chained to line 6, as line 7 */
	char	prev[65];

	line_hash(c->l[5], prev);
	ins_line(c, 7, chained(99, prev));
}

static void
m_cut(struct chain *c)
{
	c->l[NLINES - 1][strlen(c->l[NLINES - 1]) / 2] = '\0';
}

static void
m_no_final_nl(struct chain *c)
{
	c->l[NLINES - 1][strlen(c->l[NLINES - 1]) - 1] = '\0';
}

static void
m_trailing_blank(struct chain *c)
{
	ins_line(c, c->n + 1, strdup("\n"));
	ins_line(c, c->n + 1, strdup("\n"));
}

/* \001 becomes a NUL byte once the lines are joined */
static void
m_nul(struct chain *c)
{
	replace_in(c, 3, "GET", "G\001T");
}

struct vcase {
	const char	*name;
	void		(*mut)(struct chain *);
	int		 prev;	/* 1: c->extra, 2: upper case */
	int		 rc;
	uint64_t	 bad;
	uint64_t	 lines;		/* av_lines */
	const char	*why;		/* in av_why */
};

static const struct vcase vcases[] = {
	{ "intact", m_none, 0, 0, 0, NLINES, "" },
	{ "byte altered", m_alter, 0, 1, 7, 7,
	    "hash does not match its content (line altered)" },
	{ "spaces added", m_spaces, 0, 1, 1, 1, "hash does not match" },
	{ "prev altered", m_alter_prev, 0, 1, 4, 4, "hash does not match" },
	{ "hash altered", m_alter_hash, 0, 1, 4, 4, "hash does not match" },
	{ "line removed", m_del5, 0, 1, 5, 5,
	    "prev does not match line 4's hash (a line was removed, "
	    "inserted or reordered here)" },
	{ "lines swapped", m_swap, 0, 1, 3, 3, "line 2's hash" },
	{ "old line copied in", m_dup, 0, 1, 7, 7, "line 6's hash" },
	{ "forged line inserted", m_forge, 0, 1, 8, 8, "line 7's hash" },
	{ "last line cut", m_cut, 0, 1, NLINES, NLINES, "truncated" },
	{ "no final newline", m_no_final_nl, 0, 0, 0, NLINES, "" },
	{ "blank lines at the end", m_trailing_blank, 0, 0, 0, NLINES, "" },
	{ "blank line inside", m_blank_mid, 0, 1, 4, 4, "empty line" },
	{ "not JSON", m_garbage, 0, 1, 3, 3, "not JSON" },
	{ "no hash", m_nohash, 0, 1, 3, 3, "no hash" },
	{ "NUL byte", m_nul, 0, 1, 3, 3, "NUL" },
	{ "CR LF", m_crlf, 0, 1, 5, 5, "" },
	{ "hash not last", m_not_last, 0, 1, 2, 2, "not the last members" },
	{ "uppercase hash", m_upper_hash, 0, 1, 2, 2,
	    "not 64 lowercase hex" },
	{ "first line removed", m_del1, 0, 1, 1, 1, "prev is not 64 zeros" },
	{ "rotated, prev given", m_del1, 1, 0, 0, NLINES - 1, "" },
	{ "rotated, prev given uppercase", m_del1, 2, 0, 0, NLINES - 1, "" },
	{ "wrong prev given", m_none, 1, 1, 1, 1, "given previous hash" },
	{ "empty file", m_empty, 0, 0, 0, 0, "" },
};

START_TEST(test_verify_cases)
{
	const struct vcase	*vc = &vcases[_i];
	struct aud_verify	 v;
	struct chain		 c;
	char			*text, prev[65] = "";
	const char		*pp = NULL;
	size_t			 len;
	int			 rc, i;

	chain_build(&c);
	memset(c.extra, '1', 64);
	c.extra[64] = '\0';
	vc->mut(&c);
	if (vc->prev != 0) {
		memcpy(prev, c.extra, 65);
		if (vc->prev == 2)
			for (i = 0; i < 64; i++)
				prev[i] = (char)(prev[i] >= 'a' ?
				    prev[i] - 32 : prev[i]);
		pp = prev;
	}
	text = chain_join(&c, &len);
	if (vc->mut == m_nul)
		*strchr(text, '\001') = '\0';
	rc = verify_text(text, len, pp, &v);
	ck_assert_msg(rc == vc->rc, "%s: rc %d, want %d (line %llu: %s)",
	    vc->name, rc, vc->rc, (unsigned long long)v.av_bad_line,
	    v.av_why);
	ck_assert_msg(v.av_bad_line == vc->bad, "%s: bad line %llu, want "
	    "%llu (%s)", vc->name, (unsigned long long)v.av_bad_line,
	    (unsigned long long)vc->bad, v.av_why);
	ck_assert_msg(v.av_lines == vc->lines, "%s: %llu lines, want %llu",
	    vc->name, (unsigned long long)v.av_lines,
	    (unsigned long long)vc->lines);
	ck_assert_msg(strstr(v.av_why, vc->why) != NULL,
	    "%s: why \"%s\", want \"%s\"", vc->name, v.av_why, vc->why);
	if (rc == 0 && c.n > 0 && vc->mut != m_trailing_blank) {
		char	last[65];

		line_hash(c.l[c.n - 1], last);
		ck_assert_str_eq(v.av_last_hash, last);
		ck_assert_str_eq(v.av_first_prev, pp != NULL ? c.extra : ZEROS);
	}
	free(text);
	chain_free(&c);
}
END_TEST

/* A read error is -1, not a verdict on the chain. */
START_TEST(test_verify_read_error)
{
	struct aud_verify	 v;
	FILE			*f;

	/* reading a directory fails with EISDIR */
	if ((f = fopen("/", "r")) == NULL)
		return;
	ck_assert_int_eq(aud_verify_file(f, NULL, &v), -1);
	ck_assert_ptr_nonnull(strstr(v.av_why, "read error"));
	fclose(f);
}
END_TEST

/* ---- the real writer ---- */

static char	tdir[128];
static char	apath[256];

static void
wsetup(void)
{
	snprintf(tdir, sizeof(tdir), "/tmp/airlock-audv-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tdir));
	snprintf(apath, sizeof(apath), "%s/audit.jsonl", tdir);
	/* past RLIMIT_FSIZE a write fails with EFBIG instead of killing */
	signal(SIGXFSZ, SIG_IGN);
}

static void
wteardown(void)
{
	char	cmd[300];

	aud_test_set_hold_max(0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct cfg *
mkcfg(const char *file)
{
	struct cfg	*c;
	FILE		*f;
	char		*yaml, *out = NULL;
	size_t		 sz;
	int		 nerr;

	ck_assert_int_ne(asprintf(&yaml, "state_dir: %s/state\n"
	    "audit: {file: \"%s\", hash_chain: true}\n", tdir, file), -1);
	f = open_memstream(&out, &sz);
	c = cfg_load_buffer("t.yaml", yaml, strlen(yaml), f, &nerr);
	fclose(f);
	ck_assert_msg(c != NULL, "config:\n%s\nerrors:\n%s", yaml, out);
	free(yaml);
	free(out);
	return c;
}

/* Submit records <from> .. <to>-1. */
static void
submit(int from, int to)
{
	struct aud_rec	r;
	char		id[32];
	int		i;

	for (i = from; i < to; i++) {
		rec_init(&r, i, id, sizeof(id));
		aud_submit(&r);
	}
}

static int
count_lines(const char *path)
{
	FILE	*f;
	int	 ch, n = 0;

	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while ((ch = getc(f)) != EOF)
		if (ch == '\n')
			n++;
	fclose(f);
	return n;
}

static void
msleep(int ms)
{
	struct timespec	ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Until <path> has <n> lines (the writer is asynchronous). */
static void
wait_lines(const char *path, int n)
{
	int	i;

	for (i = 0; i < 500 && count_lines(path) < n; i++)
		msleep(10);
	ck_assert_int_eq(count_lines(path), n);
}

/* Until aud_available() is <want>; 0 when it did not happen in <ms>. */
static int
wait_available(int want, int ms)
{
	int	i;

	for (i = 0; i < ms / 10; i++) {
		if (aud_available() == want)
			return 1;
		msleep(10);
	}
	return aud_available() == want;
}

static int
verify_path(const char *path, const char *prev, struct aud_verify *v)
{
	FILE	*f;
	int	 rc;

	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	rc = aud_verify_file(f, prev, v);
	fclose(f);
	return rc;
}

/* <path> verifies after <prev> and holds exactly records from .. to-1. */
static void
assert_chain(const char *path, const char *prev, int from, int to)
{
	struct aud_verify	 v;
	FILE			*f;
	char			*line = NULL, id[40];
	size_t			 cap = 0;
	int			 i = from;

	ck_assert_msg(verify_path(path, prev, &v) == 0, "%s: line %llu: %s",
	    path, (unsigned long long)v.av_bad_line, v.av_why);
	ck_assert_uint_eq(v.av_lines, (uint64_t)(to - from));
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	while (getline(&line, &cap, f) != -1) {
		snprintf(id, sizeof(id), "\"id\":\"req-%04d\"", i);
		ck_assert_msg(strstr(line, id) != NULL, "%s: want %s in %s",
		    path, id, line);
		i++;
	}
	ck_assert_int_eq(i, to);
	free(line);
	fclose(f);
}

static void
last_hash(const char *path, char out[65])
{
	struct aud_verify	v;

	ck_assert_int_eq(verify_path(path, NULL, &v), 0);
	memcpy(out, v.av_last_hash, 65);
}

/* The chain continues across a restart and a rotation (SIGUSR1). */
START_TEST(test_writer_restart_rotate)
{
	struct cfg		*c = mkcfg(apath);
	struct aud_verify	 v;
	char			 old[300], last[65];

	ck_assert_int_eq(aud_start(c), 0);
	submit(0, 50);
	aud_stop();
	assert_chain(apath, NULL, 0, 50);
	ck_assert_int_eq(aud_start(c), 0);
	submit(50, 60);
	aud_stop();
	assert_chain(apath, NULL, 0, 60);

	ck_assert_int_eq(aud_start(c), 0);
	submit(60, 70);
	wait_lines(apath, 70);
	snprintf(old, sizeof(old), "%s.1", apath);
	ck_assert_int_eq(rename(apath, old), 0);
	aud_reopen();
	submit(70, 75);
	aud_stop();
	assert_chain(old, NULL, 0, 70);
	last_hash(old, last);
	assert_chain(apath, last, 70, 75);
	ck_assert_int_eq(verify_path(apath, NULL, &v), 1);
	ck_assert_uint_eq(v.av_bad_line, 1);
	ck_assert_str_eq(v.av_first_prev, last);
	ck_assert_uint_eq(aud_write_errors(), 0);
	cfg_unref(c);
}
END_TEST

/* A cut last line (a crash) stays; new records start on their own line
 * and chain from the last whole one. */
START_TEST(test_writer_cut_tail)
{
	struct cfg		*c = mkcfg(apath);
	struct aud_verify	 v;
	char			 prev[65] = ZEROS, *l, *line = NULL;
	FILE			*f, *rest;
	size_t			 cap = 0;
	int			 i;

	ck_assert_ptr_nonnull(f = fopen(apath, "w"));
	for (i = 0; i < 3; i++) {
		l = chained(i, prev);
		fputs(l, f);
		free(l);
	}
	l = chained(3, (char [65]){ 0 });
	fwrite(l, 1, strlen(l) / 2, f);
	free(l);
	fclose(f);

	ck_assert_int_eq(aud_start(c), 0);
	submit(10, 12);
	aud_stop();
	ck_assert_int_eq(count_lines(apath), 6);
	ck_assert_int_eq(verify_path(apath, NULL, &v), 1);
	ck_assert_uint_eq(v.av_bad_line, 4);
	ck_assert_ptr_nonnull(strstr(v.av_why, "not JSON"));
	/* lines 5 and 6 continue from line 3's hash */
	ck_assert_ptr_nonnull(f = fopen(apath, "r"));
	ck_assert_ptr_nonnull(rest = tmpfile());
	for (i = 1; getline(&line, &cap, f) != -1; i++)
		if (i >= 5)
			fputs(line, rest);
	rewind(rest);
	ck_assert_int_eq(aud_verify_file(rest, prev, &v), 0);
	ck_assert_uint_eq(v.av_lines, 2);
	free(line);
	fclose(rest);
	fclose(f);
	cfg_unref(c);
}
END_TEST

/*
 * Disk full: a file size limit makes writes fail (EFBIG) part-way through
 * a batch. The audit turns unavailable, the file keeps whole lines only,
 * records wait in memory, and once the limit is lifted every one of them
 * is written, in order, with the chain intact.
 */
START_TEST(test_writer_full)
{
	struct cfg		*c = mkcfg(apath);
	struct aud_verify	 v;
	struct rlimit		 old, lim;
	struct stat		 st;
	int			 n;

	ck_assert_int_eq(aud_start(c), 0);
	ck_assert_int_eq(aud_available(), 1);
	/* a big file first: the limit must not hit Check's own files */
	submit(0, 3000);
	wait_lines(apath, 3000);
	ck_assert_int_eq(stat(apath, &st), 0);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)st.st_size + 700;	/* a line and a bit */
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);

	submit(3000, 3020);
	ck_assert_msg(wait_available(0, 3000), "still available");
	/* whole lines only, and they verify */
	ck_assert_int_eq(stat(apath, &st), 0);
	ck_assert_int_le(st.st_size, (off_t)lim.rlim_cur);
	ck_assert_int_eq(verify_path(apath, NULL, &v), 0);
	n = (int)v.av_lines;
	ck_assert_int_gt(n, 3000);	/* a line fits; the next one is cut */
	ck_assert_int_lt(n, 3020);
	submit(3020, 3040);
	msleep(700);		/* retries fail meanwhile */
	ck_assert_int_eq(aud_available(), 0);
	ck_assert_int_eq(count_lines(apath), n);

	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	ck_assert_msg(wait_available(1, 3000), "did not recover");
	submit(3040, 3050);
	aud_stop();
	assert_chain(apath, NULL, 0, 3050);
	ck_assert_uint_eq(aud_write_errors(), 0);
	cfg_unref(c);
}
END_TEST

/*
 * The directory of the audit file removed: unavailable within the check
 * interval, records held; the directory back: the file is created again
 * and the held records continue the chain.
 */
START_TEST(test_writer_dir_removed)
{
	struct cfg	*c;
	char		 sub[200], path[260], cmd[300], last[65];

	snprintf(sub, sizeof(sub), "%s/sub", tdir);
	snprintf(path, sizeof(path), "%s/audit.jsonl", sub);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	c = mkcfg(path);
	ck_assert_int_eq(aud_start(c), 0);
	submit(0, 5);
	wait_lines(path, 5);
	last_hash(path, last);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sub);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(wait_available(0, 2000), "still available");
	submit(5, 15);
	msleep(700);
	ck_assert_int_eq(aud_available(), 0);
	ck_assert_int_eq(access(path, F_OK), -1);

	ck_assert_int_eq(mkdir(sub, 0700), 0);
	ck_assert_msg(wait_available(1, 3000), "did not recover");
	wait_lines(path, 10);
	submit(15, 17);
	aud_stop();
	assert_chain(path, last, 5, 17);
	ck_assert_uint_eq(aud_write_errors(), 0);
	cfg_unref(c);
}
END_TEST

/* The file alone removed: a new one at that path, no outage. */
START_TEST(test_writer_file_removed)
{
	struct cfg	*c = mkcfg(apath);
	char		 last[65];
	int		 i;

	ck_assert_int_eq(aud_start(c), 0);
	submit(0, 5);
	wait_lines(apath, 5);
	last_hash(apath, last);
	ck_assert_int_eq(unlink(apath), 0);
	/* the writer looks every 250 ms */
	for (i = 0; i < 300 && access(apath, F_OK) == -1; i++)
		msleep(10);
	ck_assert_int_eq(access(apath, F_OK), 0);
	ck_assert_int_eq(aud_available(), 1);
	submit(5, 8);
	aud_stop();
	assert_chain(apath, last, 5, 8);
	ck_assert_uint_eq(aud_write_errors(), 0);
	cfg_unref(c);
}
END_TEST

/* Past the memory bound records are dropped, counted, and a line in the
 * file says how many once it can be written again. */
START_TEST(test_writer_hold_bound)
{
	struct cfg		*c;
	struct aud_verify	 v;
	char			 sub[200], path[260], cmd[300], last[65];
	char			 want[80], *line = NULL;
	size_t			 cap = 0;
	uint64_t		 lost;
	FILE			*f;
	int			 i, n, stable;

	snprintf(sub, sizeof(sub), "%s/sub", tdir);
	snprintf(path, sizeof(path), "%s/audit.jsonl", sub);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	aud_test_set_hold_max(4096);
	c = mkcfg(path);
	ck_assert_int_eq(aud_start(c), 0);
	submit(0, 2);
	wait_lines(path, 2);
	last_hash(path, last);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sub);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(wait_available(0, 2000), "still available");
	submit(2, 40);
	/* until the writer has taken all of them: the count stays put */
	for (i = 0, stable = 0, lost = 0; i < 300 && stable < 5; i++) {
		msleep(20);
		if (aud_write_errors() > 0 && aud_write_errors() == lost)
			stable++;
		else
			stable = 0;
		lost = aud_write_errors();
	}
	ck_assert_uint_gt(lost, 0);
	ck_assert_uint_lt(lost, 38);

	ck_assert_int_eq(mkdir(sub, 0700), 0);
	ck_assert_msg(wait_available(1, 3000), "did not recover");
	n = 38 - (int)lost + 1;
	wait_lines(path, n);
	aud_stop();
	ck_assert_int_eq(verify_path(path, last, &v), 0);
	ck_assert_uint_eq(v.av_lines, (uint64_t)n);
	/* the last line marks the gap */
	snprintf(want, sizeof(want), "\"event\":\"audit_records_lost\","
	    "\"count\":%llu,", (unsigned long long)lost);
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	while (getline(&line, &cap, f) != -1)
		continue;
	fclose(f);
	ck_assert_msg(line != NULL && strstr(line, want) != NULL,
	    "no %s at the end: %s", want, line);
	free(line);
	ck_assert_uint_eq(aud_write_errors(), lost);
	cfg_unref(c);
}
END_TEST

/*
 * The record builder writes JSON itself: whatever bytes a client put in a
 * host, path or reason, the line parses and gives them back (invalid UTF-8
 * as U+FFFD), and the members keep SPEC's order.
 */
static const struct {
	const char	*in;
	const char	*out;	/* what a JSON parser reads back */
} jcases[] = {
	{ "/plain/path", "/plain/path" },
	{ "quote\"back\\slash", "quote\"back\\slash" },
	{ "ctl\x01\x1f\n\r\t\b\x7f", "ctl\x01\x1f\n\r\t\b\x7f" },
	{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac "
	    "\xf0\x9f\x98\x80" },
	{ "bad\xff\xc3(", "bad\xef\xbf\xbd\xef\xbf\xbd(" },
	{ "overlong\xc0\xaf", "overlong\xef\xbf\xbd\xef\xbf\xbd" },
	{ "surrogate\xed\xa0\x80", "surrogate\xef\xbf\xbd\xef\xbf\xbd"
	    "\xef\xbf\xbd" },
	{ "cut\xe2\x82", "cut\xef\xbf\xbd\xef\xbf\xbd" },
	{ "", "" },
};

START_TEST(test_rec_json_escaping)
{
	static const char *const secrets[] = { "a\"b", "c" };
	struct aud_rec	 r;
	json_object	*o, *v;
	char		*text;

	memset(&r, 0, sizeof(r));
	r.ar_start_wall_ms = 1795000000123ULL;
	r.ar_id = "abc";
	r.ar_path = jcases[_i].in;
	r.ar_reason = jcases[_i].in;
	r.ar_port = 443;
	r.ar_status = -1;
	r.ar_bytes_in = r.ar_bytes_out = r.ar_duration_ms = -1;
	r.ar_cost_micro = 1234567;
	r.ar_secrets = secrets;
	r.ar_nsecrets = 2;
	text = aud_rec_json(&r);
	o = json_tokener_parse(text);
	ck_assert_msg(o != NULL, "not JSON: %s", text);
	ck_assert(json_object_object_get_ex(o, "path", &v));
	ck_assert_str_eq(json_object_get_string(v), jcases[_i].out);
	ck_assert(json_object_object_get_ex(o, "reason", &v));
	ck_assert_str_eq(json_object_get_string(v), jcases[_i].out);
	ck_assert(!json_object_object_get_ex(o, "status", &v));
	ck_assert(json_object_object_get_ex(o, "secrets", &v));
	ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(v,
	    0)), "a\"b");
	/* order: ts, id, port, path, ..., cost_usd as exact decimals */
	ck_assert_msg(strncmp(text, "{\"ts\":\"2026-", 12) == 0, "%s", text);
	ck_assert_ptr_nonnull(strstr(text, "\"id\":\"abc\",\"port\":443,"
	    "\"path\":"));
	ck_assert_ptr_nonnull(strstr(text, "\"cost_usd\":1.234567,"
	    "\"cost_microusd\":1234567}"));
	json_object_put(o);
	free(text);
}
END_TEST

Suite *
suite_aud_verify(void)
{
	Suite	*s = suite_create("aud_verify");
	TCase	*tc;

	tc = tcase_create("verify");
	tcase_add_loop_test(tc, test_verify_cases, 0,
	    (int)(sizeof(vcases) / sizeof(vcases[0])));
	tcase_add_test(tc, test_verify_read_error);
	tcase_add_loop_test(tc, test_rec_json_escaping, 0,
	    (int)(sizeof(jcases) / sizeof(jcases[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("writer");
	tcase_add_checked_fixture(tc, wsetup, wteardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_writer_restart_rotate);
	tcase_add_test(tc, test_writer_cut_tail);
	tcase_add_test(tc, test_writer_full);
	tcase_add_test(tc, test_writer_dir_removed);
	tcase_add_test(tc, test_writer_file_removed);
	tcase_add_test(tc, test_writer_hold_bound);
	suite_add_tcase(s, tc);
	return s;
}
