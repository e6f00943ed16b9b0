/*
 * What a metered request body says about its cost, read with jscan (no
 * tree): the model, the output bound, how many completions it asks for,
 * streaming and background, and where stream_options.include_usage must
 * go when an OpenAI stream lacks it. Pure; no I/O.
 *
 * A body the provider could read differently from us is refused rather
 * than guessed at: not one JSON object, nested too deep, a key that
 * matters given twice (parsers disagree on which one wins), a choice
 * count that is not a whole number.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "budget/bud.h"
#include "budget/jscan.h"
#include "policy/pol.h"

/* Memory yajl may use for a body held whole: a few small buffers. */
#define REQ_SCAN_MEM	(256 * 1024)

enum {
	F_ROOT = 0,
	F_MODEL,
	F_MAX_TOKENS,
	F_MAX_COMPLETION,
	F_MAX_OUTPUT,
	F_N,
	F_BEST_OF,
	F_STREAM,
	F_SO,
	F_SO_USAGE,
	F_BACKGROUND,
	/* Gemini: proto JSON takes both spellings, so both are read */
	F_GC,
	F_GC_MAX,
	F_GC_N,
	F_GC_SNAKE,
	F_GC_SNAKE_MAX,
	F_GC_SNAKE_N,
	F_COUNT,
};

static const char *const req_paths[F_COUNT] = {
	"", "model", "max_tokens", "max_completion_tokens",
	"max_output_tokens", "n", "best_of", "stream", "stream_options",
	"stream_options.include_usage", "background",
	"generationConfig", "generationConfig.maxOutputTokens",
	"generationConfig.candidateCount", "generation_config",
	"generation_config.max_output_tokens",
	"generation_config.candidate_count",
};

void
bud_model_copy(char *dst, size_t dstsz, const char *s, size_t len)
{
	size_t	i, n = len;

	if (dstsz == 0)
		return;
	if (n >= dstsz) {
		/* never end inside a UTF-8 sequence */
		n = dstsz - 1;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	for (i = 0; i < n; i++) {
		unsigned char	ch = (unsigned char)s[i];

		dst[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	dst[n] = '\0';
}

/* n / best_of: absent or null = 1; a whole number; anything else -1. */
static int
choices(const struct jscan_val *v, uint64_t *out)
{
	uint64_t	n;

	if (v->jv_type == JV_ABSENT || v->jv_type == JV_NULL) {
		*out = 1;
		return 0;
	}
	if (jscan_u64(v, &n) == -1)
		return -1;
	*out = n == 0 ? 1 : n;
	return 0;
}

static void
plan_usage_option(struct jscan *js, struct req_facts *rf)
{
	const struct jscan_val	*root = jscan_get(js, F_ROOT);
	const struct jscan_val	*so = jscan_get(js, F_SO);
	const struct jscan_val	*iu = jscan_get(js, F_SO_USAGE);

	if (iu->jv_type == JV_BOOL && iu->jv_bool)
		return;
	rf->rf_rewrite = 1;
	if (so->jv_type == JV_ABSENT) {
		/* before the root's closing brace; "stream" is a member */
		rf->rf_cut_from = rf->rf_cut_to = root->jv_val_end - 1;
		rf->rf_insert = ",\"stream_options\":{\"include_usage\":true}";
	} else if (so->jv_type != JV_OBJECT) {
		rf->rf_cut_from = so->jv_key_end;
		rf->rf_cut_to = so->jv_val_end;
		rf->rf_insert = ":{\"include_usage\":true}";
	} else if (iu->jv_type != JV_ABSENT) {
		rf->rf_cut_from = iu->jv_key_end;
		rf->rf_cut_to = iu->jv_val_end;
		rf->rf_insert = ":true";
	} else {
		rf->rf_cut_from = rf->rf_cut_to = so->jv_val_end - 1;
		rf->rf_insert = so->jv_members == 0 ? "\"include_usage\":true" :
		    ",\"include_usage\":true";
	}
}

/*
 * Gemini's generationConfig: maxOutputTokens bounds each candidate,
 * candidateCount is how many (as n). Given in both spellings, the body
 * is ambiguous: -1.
 */
static int
gemini_facts(struct jscan *js, struct req_facts *rf)
{
	uint64_t	m, n;
	size_t		g;

	if (jscan_get(js, F_GC)->jv_type != JV_ABSENT &&
	    jscan_get(js, F_GC_SNAKE)->jv_type != JV_ABSENT) {
		snprintf(rf->rf_why, sizeof(rf->rf_why), "metered request body "
		    "gives both \"generationConfig\" and "
		    "\"generation_config\"");
		return -1;
	}
	g = jscan_get(js, F_GC_SNAKE)->jv_type != JV_ABSENT ? F_GC_SNAKE :
	    F_GC;
	if (jscan_u64(jscan_get(js, g + 1), &m) == 0 && m > rf->rf_max_out)
		rf->rf_max_out = m;
	if (choices(jscan_get(js, g + 2), &n) == -1) {
		snprintf(rf->rf_why, sizeof(rf->rf_why), "\"candidateCount\" "
		    "must be a whole number in a metered request");
		return -1;
	}
	if (n > rf->rf_choices)
		rf->rf_choices = n;
	return 0;
}

/* Where the output bounds are and where one would go (clamping). */
static void
bounds_where(struct jscan *js, struct req_facts *rf)
{
	static const int	 bound[] = { F_MAX_TOKENS, F_MAX_COMPLETION,
				    F_MAX_OUTPUT, F_GC_MAX, F_GC_SNAKE_MAX };
	const struct jscan_val	*v;
	size_t			 i;

	for (i = 0; i < sizeof(bound) / sizeof(bound[0]); i++) {
		v = jscan_get(js, bound[i]);
		if (v->jv_type == JV_ABSENT)
			continue;
		rf->rf_bound[rf->rf_nbound].rs_from = v->jv_key_end;
		rf->rf_bound[rf->rf_nbound++].rs_to = v->jv_val_end;
	}
	v = jscan_get(js, F_ROOT);
	rf->rf_root_brace = v->jv_val_end - 1;
	rf->rf_root_members = v->jv_members;
	rf->rf_gc_snake = jscan_get(js, F_GC_SNAKE)->jv_type != JV_ABSENT;
	v = jscan_get(js, rf->rf_gc_snake ? F_GC_SNAKE : F_GC);
	rf->rf_gc = v->jv_type == JV_ABSENT ? 0 : v->jv_type == JV_OBJECT ?
	    1 : -1;
	if (rf->rf_gc == 1) {
		rf->rf_gc_brace = v->jv_val_end - 1;
		rf->rf_gc_members = v->jv_members;
	}
}

void
req_path_model(const char *path, char *dst, size_t dstsz)
{
	const char	*p, *end;

	if (dstsz == 0)
		return;
	dst[0] = '\0';
	if (path == NULL || (p = strstr(path, "/models/")) == NULL)
		return;
	p += 8;
	for (end = p; *end != '\0' && *end != ':' && *end != '/' &&
	    *end != '?'; end++)
		;
	bud_model_copy(dst, dstsz, p, (size_t)(end - p));
}

int
req_scan(const char *body, size_t len, int openai, struct req_facts *rf)
{
	struct jscan		*js;
	const struct jscan_val	*v;
	enum jscan_status	 st;
	uint64_t		 n, best, m;
	size_t			 i;
	int			 rc = -1;

	memset(rf, 0, sizeof(*rf));
	rf->rf_choices = 1;
	js = jscan_new(req_paths, F_COUNT, 1, REQ_SCAN_MEM);
	st = jscan_feed(js, body, len);
	if (st == JSCAN_MORE)
		st = jscan_finish(js);
	if (st != JSCAN_OK) {
		snprintf(rf->rf_why, sizeof(rf->rf_why), "metered request body "
		    "is %s", jscan_why(js));
		goto out;
	}
	if (jscan_get(js, F_ROOT)->jv_type != JV_OBJECT) {
		snprintf(rf->rf_why, sizeof(rf->rf_why), "metered request body "
		    "is not a JSON object");
		goto out;
	}
	for (i = F_MODEL; i < F_COUNT; i++)
		if (jscan_get(js, i)->jv_count > 1) {
			snprintf(rf->rf_why, sizeof(rf->rf_why),
			    "metered request body gives \"%s\" more than once",
			    req_paths[i]);
			goto out;
		}
	v = jscan_get(js, F_MODEL);
	if (v->jv_type == JV_STRING)
		bud_model_copy(rf->rf_model, sizeof(rf->rf_model), v->jv_text,
		    v->jv_len < JSCAN_TEXT - 1 ? v->jv_len : JSCAN_TEXT - 1);
	/* several bounds given: the largest (providers differ in which
	   they honour) */
	for (i = F_MAX_TOKENS; i <= F_MAX_OUTPUT; i++)
		if (jscan_u64(jscan_get(js, i), &m) == 0 && m > rf->rf_max_out)
			rf->rf_max_out = m;
	bounds_where(js, rf);
	if (choices(jscan_get(js, F_N), &n) == -1 ||
	    choices(jscan_get(js, F_BEST_OF), &best) == -1) {
		snprintf(rf->rf_why, sizeof(rf->rf_why),
		    "\"n\" and \"best_of\" must be whole numbers in a "
		    "metered request");
		goto out;
	}
	rf->rf_choices = n > best ? n : best;
	if (gemini_facts(js, rf) == -1)
		goto out;
	v = jscan_get(js, F_STREAM);
	rf->rf_stream = v->jv_type == JV_BOOL && v->jv_bool;
	v = jscan_get(js, F_BACKGROUND);
	/* anything but false or null may start a background job */
	rf->rf_background = v->jv_type != JV_ABSENT && v->jv_type != JV_NULL &&
	    !(v->jv_type == JV_BOOL && !v->jv_bool);
	if (openai && rf->rf_stream)
		plan_usage_option(js, rf);
	rc = 0;
 out:
	jscan_free(js);
	return rc;
}

/*
 * Endpoints whose work (and cost) happens after the answer, out of the
 * meter's sight: creating batches, fine-tuning jobs, assistants runs.
 * Reading them (GET) and cancelling are not work.
 */
static const char *const async_globs[] = {
	"*/batches", "*/batches/*", "*/fine_tuning/*", "*/fine-tunes",
	"*/fine-tunes/*", "*/threads/runs", "*/threads/*/runs",
	"*/threads/*/runs/*", "*:batchGenerateContent",
	"*:asyncBatchEmbedContent",
};

int
req_async_path(const char *method, const char *path)
{
	size_t	i, n;

	if (path == NULL || strcmp(method, "GET") == 0 ||
	    strcmp(method, "HEAD") == 0 || strcmp(method, "DELETE") == 0)
		return 0;
	n = strlen(path);
	if (n >= 7 && strcmp(path + n - 7, "/cancel") == 0)
		return 0;
	for (i = 0; i < sizeof(async_globs) / sizeof(async_globs[0]); i++)
		if (pol_glob_match(async_globs[i], path))
			return 1;
	return 0;
}

/*
 * Calls that generate nothing and report no usage: reading (model lists,
 * files, batch and response status), deleting, counting tokens,
 * uploading files, cancelling. Everything else a metered rule passes is
 * taken to generate (it may bill: images, audio) and is reserved.
 */
static const char *const free_globs[] = {
	"*/count_tokens", "*:countTokens", "*/input_tokens", "*/files",
	"*/uploads", "*/uploads/*", "*/cancel",
};

int
req_free_path(const char *method, const char *path)
{
	size_t	i;

	if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
	    strcmp(method, "DELETE") == 0 || strcmp(method, "OPTIONS") == 0)
		return 1;
	if (path == NULL)
		return 0;
	for (i = 0; i < sizeof(free_globs) / sizeof(free_globs[0]); i++)
		if (pol_glob_match(free_globs[i], path))
			return 1;
	return 0;
}
