/*
 * The sandbox registry. Lookups (every authenticated request) take the
 * read lock; create, delete and config sync take the write lock. Entries
 * are reference counted so that a connection keeps its sandbox alive while
 * the registry forgets it.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "ca/ca.h"
#include "cfg/cfg.h"
#include "cfg/cfg_internal.h"
#include "sbx/sbx.h"
#include "sbx/sbx_fleet.h"
#include "util/log.h"
#include "util/util.h"

#define SBX_TOKEN_BYTES	24	/* 48 hex digits */
#define SBX_FILE_MAX	(64 * 1024)

static pthread_rwlock_t	  sbx_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct sbx	**sbx_v;	/* sorted by id */
static size_t		  sbx_n, sbx_cap;
static char		 *sbx_state_dir;
static void		(*sbx_destroy_hook)(const char *);

void
sbx_set_destroy_hook(void (*fn)(const char *))
{
	sbx_destroy_hook = fn;
}

void
sbx_token_hash(const char *tok, size_t len, unsigned char out[32])
{
	unsigned int	n = 0;

	if (EVP_Digest(tok, len, out, &n, EVP_sha256(), NULL) != 1 ||
	    n != 32)
		fatalx("sandbox: SHA-256");
}

int
sbx_same_token(const struct sbx *a, const struct sbx *b)
{
	return CRYPTO_memcmp(a->sb_token_sha, b->sb_token_sha, 32) == 0;
}

/* Tell the fleet about <s> (its first address read under the lock). */
static void
sbx_announce(struct sbx *s)
{
	char	addr[64] = "";

	if (!sbx_fleet_on() || (s->sb_flags & (SBX_F_POOLED | SBX_F_REMOTE)))
		return;
	pthread_rwlock_rdlock(&sbx_lock);
	if (s->sb_naddrs > 0)
		net_addr_format(&s->sb_addrs[0], addr, sizeof(addr));
	pthread_rwlock_unlock(&sbx_lock);
	sbx_fleet_announce(s->sb_id, s->sb_policy, s->sb_token_sha,
	    s->sb_created, addr);
}

static struct sbx *
sbx_new(const char *id, const char *policy, const char *token, size_t toklen,
    int is_static, int64_t created)
{
	struct sbx	*s;

	s = xcalloc(1, sizeof(*s));
	s->sb_id = xstrdup(id);
	s->sb_policy = xstrdup(policy);
	if (token != NULL) {
		s->sb_token = xstrndup(token, toklen);
		s->sb_token_len = toklen;
		sbx_token_hash(token, toklen, s->sb_token_sha);
	}
	s->sb_static = is_static;
	s->sb_created = created;
	s->sb_refs = 1;
	s->sb_last_used_ms = util_now_ms();
	return s;
}

struct sbx *
sbx_ref(struct sbx *s)
{
	__atomic_add_fetch(&s->sb_refs, 1, __ATOMIC_RELAXED);
	return s;
}

void
sbx_unref(struct sbx *s)
{
	if (s == NULL || __atomic_sub_fetch(&s->sb_refs, 1,
	    __ATOMIC_ACQ_REL) != 0)
		return;
	if (s->sb_token != NULL)
		OPENSSL_cleanse(s->sb_token, s->sb_token_len);
	free(s->sb_token);
	free(s->sb_addrs);
	free(s->sb_id);
	free(s->sb_policy);
	free(s);
}

/* Index of <id>, or -(insertion point) - 1. Caller holds the lock. */
static ssize_t
sbx_index(const char *id)
{
	size_t	lo = 0, hi = sbx_n, mid;
	int	cmp;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if ((cmp = strcmp(id, sbx_v[mid]->sb_id)) == 0)
			return (ssize_t)mid;
		if (cmp < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -(ssize_t)lo - 1;
}

/* Takes the caller's reference to <s>. Caller holds the write lock. */
static void
sbx_insert_at(size_t at, struct sbx *s)
{
	if (sbx_n == sbx_cap) {
		sbx_cap = sbx_cap ? sbx_cap * 2 : 16;
		sbx_v = xrealloc(sbx_v, sbx_cap * sizeof(*sbx_v));
	}
	memmove(&sbx_v[at + 1], &sbx_v[at], (sbx_n - at) * sizeof(*sbx_v));
	sbx_v[at] = s;
	sbx_n++;
}

static void
sbx_remove_at(size_t at)
{
	struct sbx	*s = sbx_v[at];

	memmove(&sbx_v[at], &sbx_v[at + 1], (sbx_n - at - 1) *
	    sizeof(*sbx_v));
	sbx_n--;
	sbx_unref(s);
}

static char *
sbx_file(const char *id)
{
	char	*p;

	if (asprintf(&p, "%s/sandboxes/%s.json", sbx_state_dir, id) == -1)
		fatal("asprintf");
	return p;
}

/*
 * Write <s> to state_dir/sandboxes/<id>.json atomically (tmp + rename);
 * with <sync> the data is on disk before the rename.
 */
static int
sbx_persist(const struct sbx *s, int sync)
{
	json_object	*o;
	const char	*text;
	char		*dir, *path, *tmp;
	size_t		 len;
	int		 fd, rv = -1;

	if (s->sb_flags & (SBX_F_NETNS | SBX_F_REMOTE))
		return 0;

	if (asprintf(&dir, "%s/sandboxes", sbx_state_dir) == -1)
		fatal("asprintf");
	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		log_warn("sandbox %s: mkdir %s", s->sb_id, dir);
		free(dir);
		return -1;
	}
	free(dir);
	path = sbx_file(s->sb_id);
	if (asprintf(&tmp, "%s.tmp", path) == -1)
		fatal("asprintf");
	o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(s->sb_id));
	json_object_object_add(o, "policy",
	    json_object_new_string(s->sb_policy));
	json_object_object_add(o, "token", json_object_new_string_len(
	    s->sb_token, (int)s->sb_token_len));
	json_object_object_add(o, "created",
	    json_object_new_int64(s->sb_created));
	if (s->sb_flags & SBX_F_LAUNCHED)
		json_object_object_add(o, "launched",
		    json_object_new_boolean(1));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	len = strlen(text);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd == -1 || write(fd, text, len) != (ssize_t)len ||
	    (sync && fsync(fd) == -1)) {
		log_warn("sandbox %s: write %s", s->sb_id, tmp);
		if (fd != -1)
			close(fd);
		unlink(tmp);
	} else if (close(fd) == -1 || rename(tmp, path) == -1) {
		log_warn("sandbox %s: %s", s->sb_id, path);
		unlink(tmp);
	} else
		rv = 0;
	/* the token was in json-c's buffers too */
	OPENSSL_cleanse((char *)text, len);
	json_object_put(o);
	free(tmp);
	free(path);
	return rv;
}

/* One persisted sandbox; NULL (logged) when the file is not usable. */
static struct sbx *
sbx_load_file(const char *path)
{
	json_object	*o = NULL, *id, *pol, *tok, *cr, *la;
	struct sbx	*s = NULL;
	struct stat	 st;
	char		 buf[SBX_FILE_MAX];
	ssize_t		 n;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		log_warn("sandbox state %s", path);
		return NULL;
	}
	if (fstat(fd, &st) == -1 || !util_file_private(&st)) {
		log_warnx("sandbox state %s: readable by group or others; "
		    "ignored", path);
		close(fd);
		return NULL;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0) {
		log_warnx("sandbox state %s: empty or unreadable", path);
		return NULL;
	}
	buf[n] = '\0';
	o = json_tokener_parse(buf);
	if (o == NULL || !json_object_object_get_ex(o, "id", &id) ||
	    !json_object_object_get_ex(o, "policy", &pol) ||
	    !json_object_object_get_ex(o, "token", &tok) ||
	    !json_object_is_type(id, json_type_string) ||
	    !json_object_is_type(pol, json_type_string) ||
	    !json_object_is_type(tok, json_type_string) ||
	    !cfg_name_ok(json_object_get_string(id)) ||
	    json_object_get_string_len(tok) == 0)
		log_warnx("sandbox state %s: not a sandbox record; ignored",
		    path);
	else
		s = sbx_new(json_object_get_string(id),
		    json_object_get_string(pol), json_object_get_string(tok),
		    (size_t)json_object_get_string_len(tok), 0,
		    json_object_object_get_ex(o, "created", &cr) ?
		    json_object_get_int64(cr) : 0);
	if (s != NULL && json_object_object_get_ex(o, "launched", &la) &&
	    json_object_get_boolean(la))
		s->sb_flags |= SBX_F_LAUNCHED;
	if (o != NULL) {
		if (json_object_object_get_ex(o, "token", &tok) &&
		    json_object_is_type(tok, json_type_string))
			OPENSSL_cleanse((char *)json_object_get_string(tok),
			    (size_t)json_object_get_string_len(tok));
		json_object_put(o);
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	return s;
}

int
sbx_init(const char *state_dir)
{
	DIR		*d;
	struct dirent	*de;
	struct sbx	*s;
	char		*dir, *path;
	size_t		 len;
	ssize_t		 at;

	free(sbx_state_dir);
	sbx_state_dir = xstrdup(state_dir);
	if (asprintf(&dir, "%s/sandboxes", state_dir) == -1)
		fatal("asprintf");
	if ((d = opendir(dir)) == NULL) {
		free(dir);
		return errno == ENOENT ? 0 : -1;
	}
	pthread_rwlock_wrlock(&sbx_lock);
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		if (asprintf(&path, "%s/%s", dir, de->d_name) == -1)
			fatal("asprintf");
		s = sbx_load_file(path);
		free(path);
		if (s == NULL)
			continue;
		if ((at = sbx_index(s->sb_id)) >= 0) {
			sbx_unref(s);
			continue;
		}
		sbx_insert_at((size_t)(-at - 1), s);
	}
	pthread_rwlock_unlock(&sbx_lock);
	closedir(d);
	log_info("sandboxes: %zu restored from %s", sbx_n, dir);
	free(dir);
	return 0;
}

/* The config's "addresses" of a static sandbox (canonical IP text). */
static void
sbx_static_addrs(struct sbx *s, const struct cfg_sandbox *cs)
{
	size_t	i;

	s->sb_addrs = xcalloc(cs->s_naddresses + 1, sizeof(*s->sb_addrs));
	for (i = 0; i < cs->s_naddresses; i++)
		if (net_host_literal(cs->s_addresses[i],
		    &s->sb_addrs[s->sb_naddrs]) == 1)
			s->sb_naddrs++;
}

static int
sbx_same_addrs(const struct sbx *s, const struct cfg_sandbox *cs)
{
	struct net_addr	a;
	size_t		i;

	if (s->sb_naddrs != cs->s_naddresses)
		return 0;
	for (i = 0; i < cs->s_naddresses; i++)
		if (net_host_literal(cs->s_addresses[i], &a) != 1 ||
		    memcmp(&a, &s->sb_addrs[i], sizeof(a)) != 0)
			return 0;
	return 1;
}

void
sbx_sync_config(const struct cfg *cfg)
{
	const struct cfg_sandbox *cs;
	struct sbx		*s;
	size_t			 i;
	ssize_t			 at;

	pthread_rwlock_wrlock(&sbx_lock);
	/* static entries the file no longer has: forgotten (requests in
	   flight finish; the next one on an open connection is refused,
	   see conn_reload.c) */
	for (i = 0; i < sbx_n; ) {
		if (sbx_v[i]->sb_static && cfg_sandbox_find(cfg,
		    sbx_v[i]->sb_id) == NULL)
			sbx_remove_at(i);
		else
			i++;
	}
	for (i = 0; i < cfg->c_nsandboxes; i++) {
		cs = &cfg->c_sandboxes[i];
		if (cs->s_token == NULL)
			continue;
		at = sbx_index(cs->s_id);
		if (at >= 0) {
			s = sbx_v[at];
			if (!s->sb_static)
				log_warnx("sandbox %s: defined in the config "
				    "file and through the admin API; the "
				    "config file's definition wins", cs->s_id);
			else if (strcmp(s->sb_policy, cs->s_policy_name) == 0 &&
			    util_secret_eq(s->sb_token, s->sb_token_len,
			    cs->s_token, cs->s_token_len) &&
			    sbx_same_addrs(s, cs))
				continue;
			sbx_remove_at((size_t)at);
			at = sbx_index(cs->s_id);
		}
		s = sbx_new(cs->s_id, cs->s_policy_name, cs->s_token,
		    cs->s_token_len, 1, (int64_t)time(NULL));
		sbx_static_addrs(s, cs);
		sbx_insert_at((size_t)(-at - 1), s);
	}
	pthread_rwlock_unlock(&sbx_lock);
}

struct sbx *
sbx_find(const char *id)
{
	struct sbx	*s = NULL;
	ssize_t		 at;

	pthread_rwlock_rdlock(&sbx_lock);
	if ((at = sbx_index(id)) >= 0)
		s = sbx_ref(sbx_v[at]);
	pthread_rwlock_unlock(&sbx_lock);
	return s;
}

static int
addr_eq(const struct net_addr *a, const struct net_addr *b)
{
	return a->na_family == b->na_family && memcmp(a->na_bytes,
	    b->na_bytes, a->na_family == AF_INET ? 4 : 16) == 0;
}

/* Caller holds the lock. A linear scan: the table is small next to the
 * cost of the connection or query it identifies. */
static struct sbx *
sbx_by_addr_locked(const struct net_addr *a)
{
	size_t	i, j;

	for (i = 0; i < sbx_n; i++)
		for (j = 0; j < sbx_v[i]->sb_naddrs; j++)
			if (addr_eq(&sbx_v[i]->sb_addrs[j], a))
				return sbx_v[i];
	return NULL;
}

struct sbx *
sbx_find_addr(const struct net_addr *a)
{
	struct sbx	*s;

	pthread_rwlock_rdlock(&sbx_lock);
	if ((s = sbx_by_addr_locked(a)) != NULL)
		sbx_ref(s);
	pthread_rwlock_unlock(&sbx_lock);
	return s;
}

int
sbx_set_addr(struct sbx *s, const struct net_addr *a)
{
	struct sbx	*other;
	int		 rv = 0;

	pthread_rwlock_wrlock(&sbx_lock);
	if ((other = sbx_by_addr_locked(a)) != NULL && other != s)
		rv = -1;
	else if (other == NULL) {
		s->sb_addrs = xrealloc(s->sb_addrs, (s->sb_naddrs + 1) *
		    sizeof(*s->sb_addrs));
		s->sb_addrs[s->sb_naddrs++] = *a;
	}
	pthread_rwlock_unlock(&sbx_lock);
	if (rv == 0 && other == NULL)
		sbx_announce(s);
	return rv;
}

void
sbx_clear_addrs(struct sbx *s)
{
	pthread_rwlock_wrlock(&sbx_lock);
	free(s->sb_addrs);
	s->sb_addrs = NULL;
	s->sb_naddrs = 0;
	pthread_rwlock_unlock(&sbx_lock);
}

struct sbx *
sbx_auth(const char *id, const char *token, size_t tokenlen)
{
	struct sbx	*s = NULL;
	unsigned char	 sha[32];
	ssize_t		 at;

	/* the hashes are compared: a sandbox of another gateway has no
	   other form of its token here */
	sbx_token_hash(token, tokenlen, sha);
	pthread_rwlock_rdlock(&sbx_lock);
	if ((at = sbx_index(id)) >= 0 && CRYPTO_memcmp(sha,
	    sbx_v[at]->sb_token_sha, sizeof(sha)) == 0)
		s = sbx_ref(sbx_v[at]);
	pthread_rwlock_unlock(&sbx_lock);
	if (at < 0)
		sbx_fleet_miss(id);	/* read-through: the next try may know */
	return s;
}

enum sbx_err
sbx_create(const struct cfg *cfg, const char *policy, const char *id,
    int flags, struct sbx **out)
{
	struct sbx	*s;
	char		 idbuf[32], tok[SBX_TOKEN_BYTES * 2 + 1];
	ssize_t		 at;

	*out = NULL;
	if (policy == NULL || cfg_policy_find(cfg, policy) == NULL)
		return SBX_E_POLICY;
	/* another gateway could not learn of it: refused, not split */
	if (!(flags & SBX_F_POOLED) && !sbx_fleet_ready())
		return SBX_E_FLEET;
	if (id == NULL) {
		memcpy(idbuf, "sbx-", 4);
		util_random_hex(idbuf + 4, 8);
		id = idbuf;
	} else if (!cfg_name_ok(id))
		return SBX_E_BADID;
	util_random_hex(tok, SBX_TOKEN_BYTES);
	s = sbx_new(id, policy, tok, strlen(tok), 0, (int64_t)time(NULL));
	OPENSSL_cleanse(tok, sizeof(tok));

	/* the id is taken at once; the slow part (keys, files, fsync)
	   runs outside the lock, so that requests and claims never wait
	   behind it. Nobody knows the token yet, and it joins the pool
	   only when ready. */
	s->sb_flags = flags & ~SBX_F_POOLED;
	pthread_rwlock_wrlock(&sbx_lock);
	if ((at = sbx_index(id)) >= 0) {
		pthread_rwlock_unlock(&sbx_lock);
		sbx_unref(s);
		return SBX_E_EXISTS;
	}
	sbx_insert_at((size_t)(-at - 1), sbx_ref(s));
	pthread_rwlock_unlock(&sbx_lock);
	/* its CA first: fetchable as soon as the sandbox is announced */
	if (ca_get(sbx_state_dir, id) == NULL || (!(flags & SBX_F_POOLED) &&
	    sbx_persist(s, 1) == -1)) {
		pthread_rwlock_wrlock(&sbx_lock);
		if ((at = sbx_index(s->sb_id)) >= 0 && sbx_v[at] == s)
			sbx_remove_at((size_t)at);
		pthread_rwlock_unlock(&sbx_lock);
		ca_registry_drop(sbx_state_dir, s->sb_id);
		sbx_unref(s);
		return SBX_E_IO;
	}
	if (flags & SBX_F_POOLED)
		sbx_add_flags(s, SBX_F_POOLED);
	else
		sbx_announce(s);
	log_info("sandbox %s: created (policy %s%s)", s->sb_id, policy,
	    (flags & SBX_F_POOLED) ? ", warm in the pool" : "");
	*out = s;
	return SBX_OK;
}

enum sbx_err
sbx_delete(const char *id)
{
	enum sbx_err	e;

	if ((e = sbx_delete_quiet(id)) == SBX_OK)
		sbx_fleet_retract(id);
	return e;
}

enum sbx_err
sbx_delete_quiet(const char *id)
{
	struct sbx	*s;
	char		*path, *gone = NULL;
	ssize_t		 at;

	pthread_rwlock_wrlock(&sbx_lock);
	if ((at = sbx_index(id)) < 0) {
		pthread_rwlock_unlock(&sbx_lock);
		return SBX_E_NOTFOUND;
	}
	s = sbx_v[at];
	if (s->sb_static) {
		pthread_rwlock_unlock(&sbx_lock);
		return SBX_E_STATIC;
	}
	__atomic_store_n(&s->sb_revoked, 1, __ATOMIC_RELEASE);
	path = sbx_file(id);
	if (unlink(path) == -1 && errno != ENOENT)
		log_warn("sandbox %s: unlink %s", id, path);
	free(path);
	ca_registry_drop(sbx_state_dir, id);
	if (s->sb_flags & SBX_F_NETNS)
		gone = xstrdup(id);
	sbx_remove_at((size_t)at);
	pthread_rwlock_unlock(&sbx_lock);
	if (gone != NULL && sbx_destroy_hook != NULL)
		sbx_destroy_hook(gone);
	free(gone);
	log_info("sandbox %s: deleted", id);
	return SBX_OK;
}

struct sbx *
sbx_claim_pooled(const char *policy, const char *from)
{
	struct sbx	*s = NULL;
	size_t		 i;

	pthread_rwlock_wrlock(&sbx_lock);
	for (i = 0; i < sbx_n; i++) {
		if ((sbx_v[i]->sb_flags & SBX_F_POOLED) &&
		    strcmp(sbx_v[i]->sb_policy, policy) == 0 &&
		    strcmp(sbx_v[i]->sb_pool_from, from ? from : "") == 0) {
			s = sbx_v[i];
			break;
		}
	}
	if (s != NULL) {
		s->sb_flags = (s->sb_flags & ~SBX_F_POOLED) | SBX_F_LAUNCHED;
		__atomic_store_n(&s->sb_last_used_ms, util_now_ms(),
		    __ATOMIC_RELAXED);
		/*
		 * Persisted without fsync: a crash of the process keeps it
		 * (page cache), and the claim answers in well under 2 ms.
		 */
		if (sbx_persist(s, 0) == -1)
			log_warnx("sandbox %s: claimed but not persisted; it "
			    "ends with this process", s->sb_id);
		sbx_ref(s);
	}
	pthread_rwlock_unlock(&sbx_lock);
	if (s != NULL)
		sbx_announce(s);
	return s;
}

void
sbx_add_flags(struct sbx *s, int flags)
{
	pthread_rwlock_wrlock(&sbx_lock);
	s->sb_flags |= flags;
	pthread_rwlock_unlock(&sbx_lock);
}

void
sbx_clear_flags(struct sbx *s, int flags)
{
	pthread_rwlock_wrlock(&sbx_lock);
	s->sb_flags &= ~flags;
	pthread_rwlock_unlock(&sbx_lock);
}

void
sbx_drop_pooled(void)
{
	char	**gone;
	size_t	  i, n = 0;

	pthread_rwlock_wrlock(&sbx_lock);
	gone = xcalloc(sbx_n + 1, sizeof(*gone));
	for (i = 0; i < sbx_n; ) {
		if (sbx_v[i]->sb_flags & (SBX_F_POOLED | SBX_F_NETNS)) {
			/* namespaces end with the process: so do their
			   sandboxes, claimed or not */
			if (sbx_v[i]->sb_flags & SBX_F_NETNS)
				gone[n++] = xstrdup(sbx_v[i]->sb_id);
			ca_registry_drop(sbx_state_dir, sbx_v[i]->sb_id);
			sbx_remove_at(i);
		} else
			i++;
	}
	pthread_rwlock_unlock(&sbx_lock);
	for (i = 0; i < n; i++) {
		if (sbx_destroy_hook != NULL)
			sbx_destroy_hook(gone[i]);
		free(gone[i]);
	}
	free(gone);
}

size_t
sbx_list(struct sbx ***out)
{
	size_t	 i, n;

	pthread_rwlock_rdlock(&sbx_lock);
	n = sbx_n;
	*out = xcalloc(n + 1, sizeof(**out));
	for (i = 0; i < n; i++)
		(*out)[i] = sbx_ref(sbx_v[i]);
	pthread_rwlock_unlock(&sbx_lock);
	return n;
}

void
sbx_list_free(struct sbx **v, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		sbx_unref(v[i]);
	free(v);
}

const char *
sbx_strerror(enum sbx_err e)
{
	switch (e) {
	case SBX_OK:
		return "ok";
	case SBX_E_EXISTS:
		return "a sandbox with this id exists";
	case SBX_E_BADID:
		return "bad sandbox id: use letters, digits, \".\", \"_\" and "
		    "\"-\" (at most 64, starting with a letter or digit)";
	case SBX_E_POLICY:
		return "no such policy";
	case SBX_E_NOTFOUND:
		return "no such sandbox";
	case SBX_E_STATIC:
		return "the sandbox is defined in the config file: remove it "
		    "there and reload";
	case SBX_E_IO:
		return "the sandbox state could not be written (see the log)";
	case SBX_E_LAUNCH:
		return "the launcher could not build the sandbox (see the "
		    "gateway's log)";
	case SBX_E_FLEET:
		return "the fleet's shared registry (Redis) is unreachable: "
		    "no sandbox is created until it is back";
	}
	return "?";
}

void
sbx_put_remote(const char *id, const char *policy,
    const unsigned char sha[32], int64_t created, const char *addr)
{
	struct sbx	*s;
	struct net_addr	 a;
	ssize_t		 at;

	if (!cfg_name_ok(id))
		return;
	s = sbx_new(id, policy, NULL, 0, 0, created);
	memcpy(s->sb_token_sha, sha, 32);
	s->sb_flags = SBX_F_REMOTE;
	if (addr[0] != '\0' && net_host_literal(addr, &a) == 1) {
		s->sb_addrs = xcalloc(1, sizeof(a));
		s->sb_addrs[0] = a;
		s->sb_naddrs = 1;
	}
	pthread_rwlock_wrlock(&sbx_lock);
	if ((at = sbx_index(id)) >= 0 || (s->sb_naddrs > 0 &&
	    sbx_by_addr_locked(&s->sb_addrs[0]) != NULL)) {
		pthread_rwlock_unlock(&sbx_lock);
		sbx_unref(s);
		return;
	}
	sbx_insert_at((size_t)(-at - 1), s);
	pthread_rwlock_unlock(&sbx_lock);
	log_info("sandbox %s: known from the fleet (policy %s)", id, policy);
}

void
sbx_shutdown(void)
{
	pthread_rwlock_wrlock(&sbx_lock);
	while (sbx_n > 0)
		sbx_remove_at(sbx_n - 1);
	free(sbx_v);
	sbx_v = NULL;
	sbx_cap = 0;
	pthread_rwlock_unlock(&sbx_lock);
	free(sbx_state_dir);
	sbx_state_dir = NULL;
}
