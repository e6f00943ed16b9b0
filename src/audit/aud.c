#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/sha.h>

#include "audit/aud.h"
#include "budget/bud.h"
#include "cfg/cfg.h"
#include "util/log.h"
#include "util/util.h"

struct aud_line {
	STAILQ_ENTRY(aud_line)	 al_entry;
	char			*al_text;	/* "{...}" without newline */
};

static struct {
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cond;
	pthread_t		 thread;
	STAILQ_HEAD(, aud_line)	 queue;
	int			 running;
	size_t			 queued;	/* lines in queue */
	char			*obuf;		/* batch of lines to write */
	uint64_t		 nbuffered;
	size_t			 olen;
	size_t			 ocap;
	int			 stopping;
	int			 reopen;
	char			*path;		/* NULL: stdout */
	int			 fd;
	int			 chain;
	int			 prev_known;
	char			 prev[SHA256_DIGEST_LENGTH * 2 + 1];
	uint64_t		 errors;
} aud = {
	.mtx = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.fd = -1,
};

static void
hex_encode(const unsigned char *in, size_t len, char *out)
{
	static const char	hex[] = "0123456789abcdef";
	size_t			i;

	for (i = 0; i < len; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * len] = '\0';
}

/* Find "hash":"HEX" in the last line of the file to continue the chain. */
static void
aud_load_prev(int fd)
{
	char		 buf[8192], *p, *line;
	off_t		 end, start;
	ssize_t		 n;

	memset(aud.prev, '0', SHA256_DIGEST_LENGTH * 2);
	aud.prev[SHA256_DIGEST_LENGTH * 2] = '\0';
	if ((end = lseek(fd, 0, SEEK_END)) <= 0)
		return;
	start = end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0;
	if ((n = pread(fd, buf, (size_t)(end - start), start)) <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	line = (p = strrchr(buf, '\n')) != NULL ? p + 1 : buf;
	if ((p = strstr(line, "\"hash\":\"")) == NULL)
		return;
	p += 8;
	if (strlen(p) >= SHA256_DIGEST_LENGTH * 2 &&
	    p[SHA256_DIGEST_LENGTH * 2] == '"')
		memcpy(aud.prev, p, SHA256_DIGEST_LENGTH * 2);
}

static int
aud_open_file(void)
{
	int	fd;

	if (aud.path == NULL) {
		aud.fd = STDOUT_FILENO;
		return 0;
	}
	fd = open(aud.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd == -1) {
		log_warn("audit: open %s", aud.path);
		return -1;
	}
	if (aud.chain && !aud.prev_known) {
		/* first open: continue the chain from the file's last line;
		 * a reopen (rotation) continues from the hash in memory */
		int rfd = open(aud.path, O_RDONLY | O_CLOEXEC);

		memset(aud.prev, '0', SHA256_DIGEST_LENGTH * 2);
		aud.prev[SHA256_DIGEST_LENGTH * 2] = '\0';
		if (rfd != -1) {
			aud_load_prev(rfd);
			close(rfd);
		}
		aud.prev_known = 1;
	}
	aud.fd = fd;
	return 0;
}

static void	aud_flush(void);

static int
write_all(int fd, const char *p, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Writer side: chain and write one line. */
static void
aud_write_line(const char *text)
{
	unsigned char	 digest[SHA256_DIGEST_LENGTH];
	char		 hash[SHA256_DIGEST_LENGTH * 2 + 1];
	char		*line;
	size_t		 len = strlen(text), cap;
	int		 n;

	if (aud.fd == -1 && aud_open_file() == -1) {
		aud.errors++;
		return;
	}
	cap = len + 200;
	line = xmalloc(cap);
	if (aud.chain && len >= 2) {
		/* {...,"prev":"P"}: hash these bytes, then add "hash" */
		n = snprintf(line, cap, "%.*s,\"prev\":\"%s\"}", (int)(len - 1),
		    text, aud.prev);
		SHA256((unsigned char *)line, (size_t)n, digest);
		hex_encode(digest, sizeof(digest), hash);
		n = snprintf(line + n - 1, cap - (size_t)n + 1,
		    ",\"hash\":\"%s\"}\n", hash) + n - 1;
	} else
		n = snprintf(line, cap, "%s\n", text);
	if (aud.olen + (size_t)n > aud.ocap) {
		aud.ocap = aud.olen + (size_t)n + 65536;
		aud.obuf = xrealloc(aud.obuf, aud.ocap);
	}
	memcpy(aud.obuf + aud.olen, line, (size_t)n);
	aud.olen += (size_t)n;
	aud.nbuffered++;
	if (aud.chain)
		memcpy(aud.prev, hash, sizeof(hash));
	free(line);
	if (aud.olen >= 65536)
		aud_flush();
}

/* Write the buffered lines; on failure they count as errors. */
static void
aud_flush(void)
{
	if (aud.olen == 0)
		return;
	if (write_all(aud.fd, aud.obuf, aud.olen) == -1) {
		log_warn("audit: write");
		aud.errors += aud.nbuffered;
	}
	aud.olen = 0;
	aud.nbuffered = 0;
}

/*
 * The writer wakes when AUD_BATCH lines wait, on stop/reopen, or every
 * AUD_FLUSH_MS: one wakeup and a few write(2)s per batch instead of a
 * context switch per request. A line waits at most AUD_FLUSH_MS.
 */
#define AUD_BATCH	256
#define AUD_FLUSH_MS	10

static void *
aud_writer(void *arg)
{
	struct aud_line	*al;
	struct timespec	 ts;

	pthread_mutex_lock(&aud.mtx);
	for (;;) {
		while (STAILQ_EMPTY(&aud.queue) && !aud.stopping &&
		    !aud.reopen)
			pthread_cond_wait(&aud.cond, &aud.mtx);
		if (!aud.stopping && !aud.reopen && aud.queued < AUD_BATCH) {
			/* let a batch gather */
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += AUD_FLUSH_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&aud.cond, &aud.mtx, &ts);
		}
		if (aud.reopen) {
			aud.reopen = 0;
			if (aud.fd != -1 && aud.fd != STDOUT_FILENO)
				close(aud.fd);
			aud.fd = -1;
			pthread_mutex_unlock(&aud.mtx);
			if (aud_open_file() == 0)
				log_info("audit: reopened %s",
				    aud.path ? aud.path : "stdout");
			pthread_mutex_lock(&aud.mtx);
		}
		if (!STAILQ_EMPTY(&aud.queue)) {
			struct aud_line	*next;
			STAILQ_HEAD(, aud_line) batch =
			    STAILQ_HEAD_INITIALIZER(batch);

			STAILQ_CONCAT(&batch, &aud.queue);
			aud.queued = 0;
			pthread_mutex_unlock(&aud.mtx);
			for (al = STAILQ_FIRST(&batch); al != NULL; al = next) {
				next = STAILQ_NEXT(al, al_entry);
				aud_write_line(al->al_text);
				free(al->al_text);
				free(al);
			}
			aud_flush();
			pthread_mutex_lock(&aud.mtx);
			continue;
		}
		if (aud.stopping)
			break;
	}
	pthread_mutex_unlock(&aud.mtx);
	return NULL;
}

int
aud_start(const struct cfg *cfg)
{
	STAILQ_INIT(&aud.queue);
	aud.chain = cfg->c_audit_hash_chain;
	memset(aud.prev, '0', SHA256_DIGEST_LENGTH * 2);
	aud.prev[SHA256_DIGEST_LENGTH * 2] = '\0';
	aud.path = strcmp(cfg->c_audit_file, "-") == 0 ? NULL :
	    xstrdup(cfg->c_audit_file);
	if (aud_open_file() == -1)
		return -1;
	if (pthread_create(&aud.thread, NULL, aud_writer, NULL) != 0) {
		log_warnx("audit: cannot start writer");
		return -1;
	}
	aud.running = 1;
	return 0;
}

void
aud_submit(const struct aud_rec *rec)
{
	struct aud_line	*al;

	al = xmalloc(sizeof(*al));
	al->al_text = aud_rec_json(rec);
	pthread_mutex_lock(&aud.mtx);
	STAILQ_INSERT_TAIL(&aud.queue, al, al_entry);
	/* wake an idle writer, or a gathering one when the batch is full */
	if (++aud.queued == 1 || aud.queued == AUD_BATCH)
		pthread_cond_signal(&aud.cond);
	pthread_mutex_unlock(&aud.mtx);
}

void
aud_reopen(void)
{
	pthread_mutex_lock(&aud.mtx);
	aud.reopen = 1;
	pthread_cond_signal(&aud.cond);
	pthread_mutex_unlock(&aud.mtx);
}

void
aud_stop(void)
{
	if (!aud.running)
		return;
	pthread_mutex_lock(&aud.mtx);
	aud.stopping = 1;
	pthread_cond_signal(&aud.cond);
	pthread_mutex_unlock(&aud.mtx);
	pthread_join(aud.thread, NULL);
	aud.running = 0;
	if (aud.fd != -1 && aud.fd != STDOUT_FILENO)
		close(aud.fd);
	aud.fd = -1;
	free(aud.path);
	aud.path = NULL;
	free(aud.obuf);
	aud.obuf = NULL;
	aud.ocap = 0;
}

uint64_t
aud_write_errors(void)
{
	uint64_t	n;

	pthread_mutex_lock(&aud.mtx);
	n = aud.errors;
	pthread_mutex_unlock(&aud.mtx);
	return n;
}

static void
add_str(json_object *o, const char *k, const char *v)
{
	if (v != NULL)
		json_object_object_add(o, k, json_object_new_string(v));
}

static void
add_int(json_object *o, const char *k, int64_t v)
{
	if (v >= 0)
		json_object_object_add(o, k, json_object_new_int64(v));
}

char *
aud_rec_json(const struct aud_rec *r)
{
	json_object	*o;
	char		 ts[40], *text;

	o = json_object_new_object();
	util_rfc3339_ms(r->ar_start_wall_ms, ts, sizeof(ts));
	add_str(o, "ts", ts);
	add_str(o, "id", r->ar_id);
	add_str(o, "sandbox", r->ar_sandbox);
	add_str(o, "client", r->ar_client);
	add_str(o, "mode", r->ar_mode);
	add_str(o, "proto", r->ar_proto);
	add_str(o, "method", r->ar_method);
	add_str(o, "host", r->ar_host);
	add_int(o, "port", r->ar_port);
	add_str(o, "path", r->ar_path);
	add_int(o, "status", r->ar_status);
	add_str(o, "decision", r->ar_decision);
	add_str(o, "reason", r->ar_reason);
	add_str(o, "rule", r->ar_rule);
	if (r->ar_nsecrets > 0) {
		json_object	*a = json_object_new_array();
		size_t		 i;

		for (i = 0; i < r->ar_nsecrets; i++)
			json_object_array_add(a,
			    json_object_new_string(r->ar_secrets[i]));
		json_object_object_add(o, "secrets", a);
	}
	add_int(o, "bytes_in", r->ar_bytes_in);
	add_int(o, "bytes_out", r->ar_bytes_out);
	add_int(o, "duration_ms", r->ar_duration_ms);
	add_str(o, "upstream", r->ar_upstream);
	add_str(o, "tls", r->ar_tls);
	if (r->ar_usage != NULL) {
		json_object	*u = json_object_new_object();

		add_str(u, "model", r->ar_usage->u_model[0] ?
		    r->ar_usage->u_model : NULL);
		add_int(u, "input_tokens", (int64_t)r->ar_usage->u_input);
		add_int(u, "cached_tokens", (int64_t)r->ar_usage->u_cached);
		add_int(u, "cache_write_tokens",
		    (int64_t)r->ar_usage->u_cache_write);
		add_int(u, "output_tokens", (int64_t)r->ar_usage->u_output);
		json_object_object_add(o, "usage", u);
	}
	if (r->ar_cost_micro >= 0) {
		/* a JSON number derived from the integer, never a float sum */
		char	num[40];

		snprintf(num, sizeof(num), "%lld.%06lld",
		    (long long)(r->ar_cost_micro / 1000000),
		    (long long)(r->ar_cost_micro % 1000000));
		json_object_object_add(o, "cost_usd",
		    json_object_new_double_s((double)r->ar_cost_micro / 1e6,
		    num));
		add_int(o, "cost_microusd", r->ar_cost_micro);
		if (r->ar_unpriced)
			json_object_object_add(o, "unpriced",
			    json_object_new_boolean(1));
	}
	text = xstrdup(json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return text;
}

/* PLACEHOLDER until fail-closed audit lands. */
int
aud_available(void)
{
	return 1;
}
