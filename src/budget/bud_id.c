/*
 * Sandbox ids in ledger lines (bud.c, usage_tab.c): escaped so that no id
 * can split or forge a line, and decoded on replay.
 */
#include "config.h"

#include <string.h>

#include "budget/bud_internal.h"
#include "util/util.h"

/* Ids have no spaces (the config sees to it); escape anyway, so that no id
 * can ever split or forge a ledger line. */
char *
bud_escape(const char *id)
{
	static const char	 hex[] = "0123456789ABCDEF";
	const unsigned char	*p;
	char			*out, *o;

	out = xmalloc(strlen(id) * 3 + 1);
	for (p = (const unsigned char *)id, o = out; *p != '\0'; p++) {
		if (*p <= ' ' || *p >= 0x7f || *p == '%') {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		} else
			*o++ = (char)*p;
	}
	*o = '\0';
	return out;
}

/* Decode an escaped id in place; -1 if malformed (or it would hold NUL). */
int
bud_unescape(char *s)
{
	char	*o = s;
	int	 h, l;

	if (*s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		if (*s != '%') {
			*o++ = *s;
			continue;
		}
		if ((h = util_hex_val(s[1])) == -1 ||
		    (l = util_hex_val(s[2])) == -1 ||
		    (h | l) == 0)
			return -1;
		*o++ = (char)(h << 4 | l);
		s += 2;
	}
	*o = '\0';
	return 0;
}
