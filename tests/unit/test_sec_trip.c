/*
 * The body tripwire (sec_trip.c): a placeholder disguised in a request
 * body (any case, every byte percent-encoded once or twice, JSON "\u"
 * escapes in either hex case, mixed with plain bytes) is seen whatever the
 * chunking, split at every offset and fed a byte at a time; the same text
 * with one byte of the placeholder changed is not.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "unit.h"

#define PH	"airlock:trip:0123abcd"

/* Disguise <ph> (new string): kind selects how. */
static char *
disguise(const char *ph, int kind)
{
	char	*out = malloc(strlen(ph) * 12 + 64), *o = out;
	size_t	 i;

	o += sprintf(o, "{\"prompt\": \"x ");
	for (i = 0; ph[i] != '\0'; i++) {
		unsigned char	c = (unsigned char)ph[i];

		switch (kind) {
		case 0:		/* upper case */
			*o++ = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
			break;
		case 1:		/* every byte percent-encoded */
			o += sprintf(o, "%%%02X", c);
			break;
		case 2:		/* twice, lower hex */
			o += sprintf(o, "%%25%02x", c);
			break;
		case 3:		/* JSON \u for every byte */
			o += sprintf(o, "\\u%04x", c);
			break;
		case 4:		/* JSON \u upper hex, every other byte */
			if (i % 2)
				o += sprintf(o, "\\u%04X", c);
			else
				*o++ = (char)c;
			break;
		case 5:		/* \u of a percent escape of the byte */
			o += sprintf(o, "\\u0025%02X", c);
			break;
		}
	}
	o += sprintf(o, " y\"}");
	*o = '\0';
	return out;
}

static int
hit_split(const char *body, size_t len, size_t cut, int bytewise)
{
	struct sec_trip	*tr = sec_trip_new();
	struct evbuffer	*sink = evbuffer_new();
	size_t		 i;
	int		 hit = 0;

	sec_trip_add(tr, PH);
	if (bytewise)
		for (i = 0; i < len; i++)
			hit |= sec_trip_feed(tr, body + i, 1, sink);
	else {
		hit |= sec_trip_feed(tr, body, cut, sink);
		hit |= sec_trip_feed(tr, body + cut, len - cut, sink);
	}
	sec_trip_free(tr);
	evbuffer_free(sink);
	return hit;
}

START_TEST(test_trip_disguises)
{
	char	*body = disguise(PH, _i);
	size_t	 len = strlen(body), cut;

	for (cut = 0; cut <= len; cut++)
		ck_assert_msg(hit_split(body, len, cut, 0),
		    "disguise %d cut at %zu not seen: %s", _i, cut, body);
	ck_assert_msg(hit_split(body, len, 0, 1),
	    "disguise %d fed a byte at a time not seen", _i);
	free(body);
}
END_TEST

START_TEST(test_trip_near_miss)
{
	char	 near[] = PH, *body;
	size_t	 len, cut;

	near[sizeof(near) - 2] = 'z';	/* one byte off */
	body = disguise(near, _i);
	len = strlen(body);
	for (cut = 0; cut <= len; cut += 3)
		ck_assert_msg(!hit_split(body, len, cut, 0),
		    "disguise %d of a near miss seen at cut %zu", _i, cut);
	free(body);
}
END_TEST

Suite *
suite_sec_trip(void)
{
	Suite	*s = suite_create("sec_trip");
	TCase	*tc = tcase_create("body");

	tcase_add_loop_test(tc, test_trip_disguises, 0, 6);
	tcase_add_loop_test(tc, test_trip_near_miss, 0, 6);
	suite_add_tcase(s, tc);
	return s;
}
