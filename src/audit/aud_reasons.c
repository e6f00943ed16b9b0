/* The reason table of aud_reasons.h, as data. */
#include "config.h"

#include "audit/aud_reasons.h"

static const struct aud_reason_info aud_reason_tbl[AUD_R_COUNT] = {
#define AUD_R_ROW(name, code, status, decision, text)			\
	[AUD_R_##name] = { #name, code, status, decision, text },
	AUD_REASONS(AUD_R_ROW)
#undef AUD_R_ROW
};

const struct aud_reason_info *
aud_reason(enum aud_reason r)
{
	if ((unsigned)r >= AUD_R_COUNT)
		r = AUD_R_NONE;
	return &aud_reason_tbl[r];
}

const char *
aud_reason_code(enum aud_reason r)
{
	return aud_reason(r)->ri_code;
}
