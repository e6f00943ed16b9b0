/*
 * The budget keys: a policy's "caps", "pricing" and "budget_store".
 * Checked by the walker in src/cfg/ (cfg_walk.h); listed in cfg_planes.h.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cfg/cfg_walk.h"
#include "util/util.h"
#include "cfg/cfg_planes.h"

/*
 * Caps: each setter marks its cap present once its value is good. The
 * generic setters report problems themselves: a new error means no value.
 */
static void
cfg_k_cap_usd(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg_caps	*cc = arg;
	int		 nerr = cp->cp_errors;

	cfg_set_money(cp, k, v, arg);
	cc->cp_has_usd = cp->cp_errors == nerr;
}

static void
cfg_k_cap_requests(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_caps	*cc = arg;
	int		 nerr = cp->cp_errors;

	cfg_set_count64(cp, k, v, arg);
	cc->cp_has_requests = cp->cp_errors == nerr;
}

static void
cfg_k_cap_bytes(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_caps	*cc = arg;
	int		 nerr = cp->cp_errors;

	cfg_set_size64(cp, k, v, arg);
	if (cp->cp_errors != nerr)
		return;
	if (k->k_off == offsetof(struct cfg_caps, cp_bytes_in))
		cc->cp_has_bytes_in = 1;
	else
		cc->cp_has_bytes_out = 1;
}

static void
cfg_k_cap_rate(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_caps	*cc = arg;
	const char	*s, *why;

	s = cfg_str(v);
	if ((why = cfg_parse_rate(s, &cc->cp_rate_n, &cc->cp_rate_ms)) !=
	    NULL) {
		cfg_err(cp, v, "bad rate \"%s\": %s (use e.g. 50/s, 600/m, "
		    "10/h)", s, why);
		return;
	}
	cc->cp_has_rate = 1;
}

/* Counters are kept per window of whole seconds (bud_counters). */
static void
cfg_k_cap_window(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_caps	*cc = arg;
	const char	*s;
	uint64_t	 ms;

	s = cfg_str(v);
	if (cfg_parse_duration(s, &ms) == -1) {
		cfg_err(cp, v, "bad duration \"%s\" for \"window\" (use e.g. "
		    "1h, 24h, 7d)", s);
		return;
	}
	if (ms < 1000 || ms % 1000 != 0) {
		cfg_err(cp, v, "\"window\" must be a whole number of seconds, "
		    "at least 1s, not \"%s\"", s);
		return;
	}
	cc->cp_window_ms = ms;
}

#define CAP(m)	offsetof(struct cfg_caps, m)
const struct cfg_key bud_cfg_caps_keys[] = {
	CFG_SCALAR("usd", 0, cfg_k_cap_usd, CAP(cp_usd), "an amount of USD"),
	CFG_SCALAR("requests", 0, cfg_k_cap_requests, CAP(cp_requests),
	    "a number"),
	CFG_SCALAR("bytes_in", 0, cfg_k_cap_bytes, CAP(cp_bytes_in), "a size"),
	CFG_SCALAR("bytes_out", 0, cfg_k_cap_bytes, CAP(cp_bytes_out),
	    "a size"),
	CFG_SCALAR("rate", 0, cfg_k_cap_rate, 0, "a rate such as 50/s"),
	CFG_SCALAR("window", 0, cfg_k_cap_window, 0, "a duration"),
	CFG_COUNT64("llm_concurrency", 0, CAP(cp_llm_concurrency), 0, 0),
	CFG_BOOL("clamp", 0, CAP(cp_clamp)),
	CFG_BOOL("cut_streams", 0, CAP(cp_cut_streams)),
	CFG_END,
};
#undef CAP


/* pricing */

/* One pricing entry while its mapping is walked. */
struct cfg_prctx {
	struct cfg_price	*px_price;
	const yaml_node_t	*px_model;
	int			 px_cached;	/* cached_input given */
	int			 px_write;	/* cache_write given */
};

static void
cfg_k_price_model(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	struct cfg_prctx	*px = arg;
	const char		*s, *p;

	s = cfg_str(v);
	for (p = s; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			break;
	if (*s == '\0' || *p != '\0') {
		cfg_err(cp, v, "bad model \"%s\": %s", s, *s == '\0' ?
		    "empty (use \"*\" for any model)" :
		    "contains a space or control character");
		return;
	}
	px->px_price->pr_model = xstrdup(s);
	px->px_model = v;
}

/* A price: k_off is into struct cfg_price, the walk's arg a cfg_prctx. */
static void
cfg_k_price(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg_prctx	*px = arg;
	int			 nerr = cp->cp_errors;

	cfg_set_money(cp, k, v, px->px_price);
	if (cp->cp_errors != nerr)
		return;
	if (k->k_off == offsetof(struct cfg_price, pr_cached_input))
		px->px_cached = 1;
	else if (k->k_off == offsetof(struct cfg_price, pr_cache_write))
		px->px_write = 1;
}

/* max_output: the most output tokens the model can produce. */
static void
cfg_k_price_max_output(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	cfg_set_count64(cp, k, v, ((struct cfg_prctx *)arg)->px_price);
}

#define PR(m)	offsetof(struct cfg_price, m)
static const struct cfg_key cfg_price_keys[] = {
	CFG_SCALAR("model", CFG_K_REQUIRED, cfg_k_price_model, 0,
	    "a model name glob"),
	CFG_SCALAR("input", CFG_K_REQUIRED, cfg_k_price, PR(pr_input),
	    "an amount of USD"),
	CFG_SCALAR("output", CFG_K_REQUIRED, cfg_k_price, PR(pr_output),
	    "an amount of USD"),
	CFG_SCALAR("cached_input", 0, cfg_k_price, PR(pr_cached_input),
	    "an amount of USD"),
	CFG_SCALAR("cache_write", 0, cfg_k_price, PR(pr_cache_write),
	    "an amount of USD"),
	{ "max_output", CFG_T_SCALAR, cfg_k_price_max_output,
	    PR(pr_max_output), 1, 0, "a number", NULL, NULL, 0 },
	CFG_END,
};
#undef PR

/*
 * First match wins, so an entry repeating an earlier model glob could never
 * apply: reported as a duplicate.
 */
static void
cfg_k_pricing(struct cfg_parse *cp, const struct cfg_key *k, yaml_node_t *v,
    void *arg)
{
	struct cfg		*c = cp->cp_cfg;
	struct cfg_namev	 models = { NULL, 0, 0 };
	struct cfg_prctx	 px;
	yaml_node_t		*item;
	size_t			 i;

	c->c_pricing = xcalloc(cfg_seq_len(v), sizeof(*c->c_pricing));
	for (i = 0; (item = cfg_seq_at(cp, v, i)) != NULL; i++) {
		memset(&px, 0, sizeof(px));
		px.px_price = &c->c_pricing[c->c_npricing++];
		if (cfg_want_map(cp, item, "a pricing entry") == -1)
			continue;
		cfg_walk_map(cp, item, "pricing entry", cfg_price_keys, &px);
		if (cp->cp_toobig)
			break;
		if (!px.px_cached)
			px.px_price->pr_cached_input = px.px_price->pr_input;
		if (!px.px_write)
			px.px_price->pr_cache_write = px.px_price->pr_input;
		if (px.px_price->pr_model != NULL)
			cfg_namev_add(&models, px.px_price->pr_model,
			    px.px_model);
	}
	cfg_check_dups(cp, models.nv_v, models.nv_n, "pricing model");
	free(models.nv_v);
}

/* budget_store */

/* A URL with its user part (a password) shown as "***". */
static void
store_shown(const char *s, char *dst, size_t dstsz)
{
	const char	*auth, *end, *at;

	if ((auth = strstr(s, "://")) == NULL) {
		snprintf(dst, dstsz, "%s", s);
		return;
	}
	auth += 3;
	end = auth + strcspn(auth, "/?#");
	for (at = end; at > auth && *at != '@'; at--)
		;
	if (*at == '@')
		snprintf(dst, dstsz, "%.*s***%s", (int)(auth - s), s, at);
	else
		snprintf(dst, dstsz, "%s", s);
}

static int
store_uint(const char *s, size_t len, unsigned max, unsigned *out)
{
	unsigned long	v = 0;
	size_t		i;

	if (len == 0 || len > 6)
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/*
 * redis://[HOST]:PORT[/DB] (HOST defaults to 127.0.0.1, IPv6 in
 * brackets) or unix:PATH[?db=N]; 0, or -1 with <why>.
 */
static int
store_parse(struct cfg *c, const char *s, char *why, size_t whysz)
{
	const char	*h, *colon, *slash, *q;
	unsigned	 port, db = 0;
	int		 tls = strncmp(s, "rediss://", 9) == 0;
	if (strncmp(s, "unix:", 5) == 0) {
		if (s[5] != '/') {
			snprintf(why, whysz, "unix: needs an absolute path");
			return -1;
		}
		q = strchr(s, '?');
		if (q != NULL && (strncmp(q, "?db=", 4) != 0 ||
		    store_uint(q + 4, strlen(q + 4), 15, &db) == -1)) {
			snprintf(why, whysz, "unix:PATH takes only ?db=N "
			    "(0-15)");
			return -1;
		}
		c->c_bs_unix = q != NULL ? xstrndup(s + 5, (size_t)(q - s - 5)) :
		    xstrdup(s + 5);
		c->c_bs_db = (int)db;
		c->c_bs_redis = 1;
		return 0;
	}
	if (strncmp(s, "redis://", 8) != 0 && !tls) {
		snprintf(why, whysz, "\"budget_store\" must be \"file\", a "
		    "redis:// or rediss:// URL or unix:PATH");
		return -1;
	}
	h = s + (tls ? 9 : 8);
	slash = h + strcspn(h, "/?#");
	if (memchr(h, '@', (size_t)(slash - h)) != NULL) {
		snprintf(why, whysz, "no credentials in the URL: give the "
		    "password with budget_store_auth");
		return -1;
	}
	if (*h == '[') {
		if ((colon = memchr(h, ']', (size_t)(slash - h))) == NULL) {
			snprintf(why, whysz, "unterminated [IPv6] host");
			return -1;
		}
		c->c_bs_host = xstrndup(h + 1, (size_t)(colon - h - 1));
		colon++;
	} else {
		colon = memchr(h, ':', (size_t)(slash - h));
		if (colon == NULL)
			colon = slash;
		c->c_bs_host = colon == h ? xstrdup("127.0.0.1") :
		    xstrndup(h, (size_t)(colon - h));
	}
	if (*colon != ':' || store_uint(colon + 1, (size_t)(slash - colon -
	    1), 65535, &port) == -1 || port == 0) {
		snprintf(why, whysz, "the URL needs a port (1-65535): "
		    "redis://[HOST]:PORT/DB");
		return -1;
	}
	if (*slash == '/' && slash[1] != '\0' &&
	    store_uint(slash + 1, strlen(slash + 1), 15, &db) == -1) {
		snprintf(why, whysz, "the database must be a number 0-15");
		return -1;
	}
	if (*slash != '\0' && *slash != '/') {
		snprintf(why, whysz, "no query or fragment in the URL");
		return -1;
	}
	c->c_bs_port = (int)port;
	c->c_bs_db = (int)db;
	c->c_bs_redis = 1;
	c->c_bs_tls = tls;
	return 0;
}

static void
cfg_k_budget_store(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	char		 shown[512], why[200];
	const char	*s;

	(void)k;
	(void)arg;
	s = cfg_str(v);
	if (strcmp(s, "file") == 0) {
		cp->cp_cfg->c_budget_store = xstrdup(s);
		return;
	}
	if (store_parse(cp->cp_cfg, s, why, sizeof(why)) == -1) {
		store_shown(s, shown, sizeof(shown));
		cfg_err(cp, v, "budget_store \"%s\": %s", shown, why);
		return;
	}
	store_shown(s, shown, sizeof(shown));
	cp->cp_cfg->c_budget_store = xstrdup(shown);
}

/* budget_store_auth: the Redis password's source (read at start). */
static void
cfg_k_budget_store_auth(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s = cfg_str(v);

	(void)k;
	(void)arg;
	if ((strncmp(s, "env:", 4) != 0 || s[4] == '\0') &&
	    (strncmp(s, "file:", 5) != 0 || s[5] != '/')) {
		cfg_err(cp, v, "\"budget_store_auth\" must be env:NAME or "
		    "file:/PATH");
		return;
	}
	free(cp->cp_cfg->c_bs_auth);
	cp->cp_cfg->c_bs_auth = xstrdup(s);
}

/* budget_store_ca: the CA file a rediss:// server's certificate must
 * chain to (default: the system's). */
static void
cfg_k_budget_store_ca(struct cfg_parse *cp, const struct cfg_key *k,
    yaml_node_t *v, void *arg)
{
	const char	*s = cfg_str(v);

	(void)k;
	(void)arg;
	if (s[0] != '/' || access(s, R_OK) == -1) {
		cfg_err(cp, v, "\"budget_store_ca\" must be a readable file "
		    "(absolute path)");
		return;
	}
	free(cp->cp_cfg->c_bs_ca);
	cp->cp_cfg->c_bs_ca = xstrdup(s);
}

const struct cfg_key bud_cfg_keys[] = {
	CFG_SEQ("pricing", 0, cfg_k_pricing),
	CFG_SCALAR("budget_store", CFG_K_RESTART, cfg_k_budget_store, 0,
	    "\"file\", redis://HOST:PORT/DB or unix:PATH"),
	CFG_SCALAR("budget_store_auth", CFG_K_RESTART,
	    cfg_k_budget_store_auth, 0, "env:NAME or file:/PATH"),
	CFG_SCALAR("budget_store_ca", CFG_K_RESTART,
	    cfg_k_budget_store_ca, 0, "a CA file (PEM)"),
	CFG_END,
};
