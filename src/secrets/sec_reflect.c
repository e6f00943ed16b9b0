/*
 * The response scanner of a secret's hosts: every form of every secret
 * bound to the host (sec_encode.c), and the parts of a value an upstream
 * may echo alone. Building it costs a few hundred microseconds and a few
 * hundred KiB for a couple of secrets, the same for every request towards
 * the same host with the same values: so it is built once and shared
 * (sec_scan_share), each request with its own stream state. The cache is
 * keyed by the values themselves (the entries hold references, so a key
 * cannot be reused by another value) and the names and injection forms;
 * a rotated value makes a new key, the old entry ages out.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "cfg/cfg.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "util/util.h"

#define REFLECT_CACHE	32	/* hosts x value sets kept built */

struct reflect_entry {
	char		*re_key;
	struct sec_scan	*re_scan;	/* built; shared, never fed */
	struct sec_val	**re_vals;	/* refs: keep the key unique */
	size_t		 re_nvals;
	uint64_t	 re_used;
};

static pthread_mutex_t		reflect_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct reflect_entry	reflect_cache[REFLECT_CACHE];
static uint64_t			reflect_clock;

static void
add_as(struct sec_scan *sc, size_t min_run, const char *name,
    const char *pat, size_t len, int how)
{
	char	repl[128];
	int	n;

	if (len == 0)
		return;
	n = snprintf(repl, sizeof(repl), "[airlock:redacted:%s]", name);
	if (how == 2)		/* every form and its runs */
		sec_scan_add_forms(sc, pat, len, min_run, repl, (size_t)n);
	else if (how == 1)	/* these bytes and their runs */
		sec_scan_add_runs(sc, pat, len, min_run, repl, (size_t)n);
	else			/* these bytes */
		sec_scan_add(sc, pat, len, repl, (size_t)n);
}

/*
 * Secret <s> with value <v>: the value and, where it is made of parts, the
 * parts an upstream may echo alone (a Basic password, the SigV4 secret key
 * and session token), and the Basic base64 exactly as it is sent.
 */
static void
reflect_gen(struct sec_scan *sc, size_t min_run, const struct cfg_secret *s,
    const struct sec_val *v)
{
	const char	*colon, *end = v->sv_data + v->sv_len, *t;
	char		*tmp, *enc;
	size_t		 n;

	if (s->sc_inject == CFG_INJECT_SIGV4) {
		/* "AKID:SECRET[:TOKEN]": the key id is not a secret (S3
		   errors quote it), so only the whole value and the parts */
		add_as(sc, min_run, s->sc_name, v->sv_data, v->sv_len, 0);
		if ((colon = memchr(v->sv_data, ':', v->sv_len)) == NULL) {
			add_as(sc, min_run, s->sc_name, v->sv_data, v->sv_len,
			    2);
			return;
		}
		colon++;
		n = (size_t)(end - colon);
		t = memchr(colon, ':', n);
		add_as(sc, min_run, s->sc_name, colon, t != NULL ?
		    (size_t)(t - colon) : n, 2);
		if (t != NULL)
			add_as(sc, min_run, s->sc_name, t + 1,
			    (size_t)(end - t - 1), 2);
		return;
	}
	add_as(sc, min_run, s->sc_name, v->sv_data, v->sv_len, 2);
	if (s->sc_inject != CFG_INJECT_BASIC)
		return;
	if (s->sc_username != NULL) {
		n = strlen(s->sc_username) + 1 + v->sv_len;
		tmp = xmalloc(n + 1);
		snprintf(tmp, n + 1, "%s:%s", s->sc_username, v->sv_data);
	} else {
		n = v->sv_len;
		tmp = xstrndup(v->sv_data, n);
		if ((colon = memchr(v->sv_data, ':', v->sv_len)) != NULL)
			add_as(sc, min_run, s->sc_name, colon + 1,
			    (size_t)(end - colon - 1), 2);
	}
	/* the encoded form is as much a secret as the value */
	enc = xmalloc(4 * ((n + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)tmp,
	    (int)n);
	add_as(sc, min_run, s->sc_name, enc, strlen(enc), 1);
	OPENSSL_cleanse(enc, strlen(enc));
	free(enc);
	OPENSSL_cleanse(tmp, n);
	free(tmp);
}

/* What the scanner depends on, as a string (no value bytes in it). */
static char *
reflect_key(const struct cfg *cfg, const size_t *idx,
    struct sec_val *const *vals, size_t n, size_t min_run)
{
	const struct cfg_secret	*s;
	struct evbuffer		*b = evbuffer_new();
	size_t			 i, len;
	char			*key;

	evbuffer_add_printf(b, "%zu", min_run);
	for (i = 0; i < n; i++) {
		s = &cfg->c_secrets[idx[i]];
		evbuffer_add_printf(b, "|%p/%s/%d/%s", (void *)vals[i],
		    s->sc_name, (int)s->sc_inject, s->sc_username != NULL ?
		    s->sc_username : "");
	}
	len = evbuffer_get_length(b);
	key = xmalloc(len + 1);
	evbuffer_remove(b, key, len);
	key[len] = '\0';
	evbuffer_free(b);
	return key;
}

static void
entry_clear(struct reflect_entry *e)
{
	size_t	i;

	free(e->re_key);
	sec_scan_free(e->re_scan);
	for (i = 0; i < e->re_nvals; i++)
		sec_val_unref(e->re_vals[i]);
	free(e->re_vals);
	memset(e, 0, sizeof(*e));
}

struct sec_scan *
sec_reflect_scanner(const struct cfg *cfg, const size_t *idx,
    struct sec_val *const *vals, size_t n, size_t min_run)
{
	struct reflect_entry	*e, *victim;
	struct sec_scan		*built, *mine;
	char			*key;
	size_t			 i;

	key = reflect_key(cfg, idx, vals, n, min_run);
	pthread_mutex_lock(&reflect_mtx);
	for (i = 0; i < REFLECT_CACHE; i++) {
		e = &reflect_cache[i];
		if (e->re_key != NULL && strcmp(e->re_key, key) == 0) {
			e->re_used = ++reflect_clock;
			mine = sec_scan_share(e->re_scan);
			pthread_mutex_unlock(&reflect_mtx);
			free(key);
			return mine;
		}
	}
	pthread_mutex_unlock(&reflect_mtx);

	/* built outside the lock: other requests go on meanwhile */
	built = sec_scan_new();
	for (i = 0; i < n; i++)
		reflect_gen(built, min_run, &cfg->c_secrets[idx[i]], vals[i]);
	mine = sec_scan_share(built);		/* builds it */

	pthread_mutex_lock(&reflect_mtx);
	victim = &reflect_cache[0];
	for (i = 0; i < REFLECT_CACHE; i++) {
		e = &reflect_cache[i];
		if (e->re_key != NULL && strcmp(e->re_key, key) == 0) {
			victim = NULL;		/* another thread was first */
			break;
		}
		if (e->re_key == NULL || e->re_used < victim->re_used)
			victim = e;
		if (e->re_key == NULL)
			break;
	}
	if (victim != NULL) {
		entry_clear(victim);
		victim->re_key = key;
		key = NULL;
		victim->re_scan = built;
		built = NULL;
		victim->re_vals = xcalloc(n ? n : 1, sizeof(*victim->re_vals));
		for (i = 0; i < n; i++)
			victim->re_vals[i] = sec_val_ref(vals[i]);
		victim->re_nvals = n;
		victim->re_used = ++reflect_clock;
	}
	pthread_mutex_unlock(&reflect_mtx);
	free(key);
	sec_scan_free(built);
	return mine;
}

void
sec_reflect_flush(void)
{
	size_t	i;

	pthread_mutex_lock(&reflect_mtx);
	for (i = 0; i < REFLECT_CACHE; i++)
		entry_clear(&reflect_cache[i]);
	pthread_mutex_unlock(&reflect_mtx);
}
