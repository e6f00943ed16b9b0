/*
 * The rewrites airlock makes to a metered request body, as byte edits of
 * the held body (bud_stage.c applies them): stream_options.include_usage
 * put in (req_scan.c plans it), and the output bound lowered to what the
 * budget allows (clamping). Everything else stays byte for byte. Pure.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "budget/bud.h"

static int
ends_with(const char *s, const char *tail)
{
	size_t	n = strlen(s), t = strlen(tail);

	return n >= t && strcmp(s + n - t, tail) == 0;
}

enum req_api
req_api_of(const char *path)
{
	if (path == NULL)
		return REQ_API_OTHER;
	if (ends_with(path, "/chat/completions"))
		return REQ_API_CHAT;
	if (ends_with(path, "/completions"))
		return REQ_API_COMPLETIONS;
	if (ends_with(path, "/responses"))
		return REQ_API_RESPONSES;
	if (ends_with(path, "/messages"))
		return REQ_API_MESSAGES;
	if (ends_with(path, ":generateContent") ||
	    ends_with(path, ":streamGenerateContent"))
		return REQ_API_GEMINI;
	return REQ_API_OTHER;
}

static int
edit_add(struct req_edits *ed, uint64_t from, uint64_t to, const char *text)
{
	struct req_edit	*e;

	if (ed->re_n >= REQ_EDITS)
		return -1;
	e = &ed->re[ed->re_n++];
	e->re_from = from;
	e->re_to = to;
	snprintf(e->re_text, sizeof(e->re_text), "%s", text);
	return 0;
}

void
req_edits_usage(const struct req_facts *rf, struct req_edits *ed)
{
	if (rf->rf_rewrite)
		(void)edit_add(ed, rf->rf_cut_from, rf->rf_cut_to,
		    rf->rf_insert);
}

int
req_edits_clamp(const struct req_facts *rf, enum req_api api, uint64_t k,
    struct req_edits *ed)
{
	const char		*sep = rf->rf_root_members ? "," : "";
	const char		*name;
	unsigned long long	 n = (unsigned long long)k;
	char			 t[64];
	int			 i;

	if (api == REQ_API_OTHER)
		return -1;
	if (rf->rf_nbound > 0) {
		/* every bound given: providers differ in which they honour */
		snprintf(t, sizeof(t), ":%llu", n);
		for (i = 0; i < rf->rf_nbound; i++)
			if (edit_add(ed, rf->rf_bound[i].rs_from,
			    rf->rf_bound[i].rs_to, t) == -1)
				return -1;
		return 0;
	}
	switch (api) {
	case REQ_API_CHAT:
		name = "max_completion_tokens";
		break;
	case REQ_API_RESPONSES:
		name = "max_output_tokens";
		break;
	case REQ_API_GEMINI:
		if (rf->rf_gc == -1)
			return -1;
		if (rf->rf_gc == 1) {
			snprintf(t, sizeof(t), "%s\"%s\":%llu",
			    rf->rf_gc_members ? "," : "", rf->rf_gc_snake ?
			    "max_output_tokens" : "maxOutputTokens", n);
			return edit_add(ed, rf->rf_gc_brace, rf->rf_gc_brace,
			    t);
		}
		snprintf(t, sizeof(t),
		    "%s\"generationConfig\":{\"maxOutputTokens\":%llu}", sep, n);
		return edit_add(ed, rf->rf_root_brace, rf->rf_root_brace, t);
	default:
		name = "max_tokens";
		break;
	}
	snprintf(t, sizeof(t), "%s\"%s\":%llu", sep, name, n);
	return edit_add(ed, rf->rf_root_brace, rf->rf_root_brace, t);
}

int
req_edits_sort(struct req_edits *ed)
{
	struct req_edit	 t;
	size_t		 i, j;

	/* a few edits: insertion sort, stable (equal offsets keep order) */
	for (i = 1; i < ed->re_n; i++) {
		t = ed->re[i];
		for (j = i; j > 0 && ed->re[j - 1].re_from > t.re_from; j--)
			ed->re[j] = ed->re[j - 1];
		ed->re[j] = t;
	}
	for (i = 1; i < ed->re_n; i++)
		if (ed->re[i].re_from < ed->re[i - 1].re_to)
			return -1;
	return 0;
}
