/*
 * The secrets stage driven by a fake exchange (no connection, no event
 * loop): a secret that went out is redacted from the response body
 * wherever the upstream splits it, and from the head as one block.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "pipe/stage.h"
#include "pipe/xchg.h"
#include "secrets/sec.h"
#include "secrets/sec_req.h"
#include "unit.h"

static const char	secret[] = "s3cr3t-VALUE-0123";
static const char	mask[] = "[redacted]";

/* An exchange that sent <secret>: its reflector set up. */
static void
sec_fake(struct xs_call *xc, struct xchg *x, struct sec_req *sr)
{
	memset(xc, 0, sizeof(*xc));
	memset(x, 0, sizeof(*x));
	memset(sr, 0, sizeof(*sr));
	sr->sr_reflect = sec_scan_new();
	sec_scan_add(sr->sr_reflect, secret, strlen(secret), mask,
	    strlen(mask));
	x->x_sec.s_req = sr;
	xc->xc_x = x;
}

/* <in>'s bytes through the stage's resp_body, appended to <all>. */
static void
body_call(struct xs_call *xc, const char *p, size_t len, int eof,
    struct evbuffer *all)
{
	struct evbuffer	*in = evbuffer_new(), *out = evbuffer_new();

	evbuffer_add(in, p, len);
	xc->xc_eof = eof;
	ck_assert_int_eq(sec_stage.xs_resp_body(xc, in, out), XS_GO);
	/* a filter either observes or takes: here it takes all */
	ck_assert_uint_eq(evbuffer_get_length(in), 0);
	evbuffer_add_buffer(all, out);
	evbuffer_free(in);
	evbuffer_free(out);
}

START_TEST(test_sec_body_split_everywhere)
{
	const char	body[] = "{\"echo\":\"s3cr3t-VALUE-0123\",\"again\":"
			    "\"xs3cr3t-VALUE-0123s3cr3t-VALUE-0123\"}";
	const char	want[] = "{\"echo\":\"[redacted]\",\"again\":"
			    "\"x[redacted][redacted]\"}";
	size_t		len = strlen(body), k, j, n;
	struct xs_call	xc;
	struct xchg	x;
	struct sec_req	sr;
	struct evbuffer	*all;
	char		*got;

	for (k = 0; k <= len; k++) {
		for (j = k; j <= len; j += 5) {
			sec_fake(&xc, &x, &sr);
			all = evbuffer_new();
			/* three pieces: [0,k) [k,j) [j,len), then the end */
			body_call(&xc, body, k, 0, all);
			body_call(&xc, body + k, j - k, 0, all);
			body_call(&xc, body + j, len - j, 0, all);
			body_call(&xc, "", 0, 1, all);
			n = evbuffer_get_length(all);
			got = (char *)evbuffer_pullup(all, (ssize_t)n);
			ck_assert_msg(n == strlen(want) &&
			    memcmp(got, want, n) == 0,
			    "split at %zu/%zu: %.*s", k, j, (int)n, got);
			evbuffer_free(all);
			sec_scan_free(sr.sr_reflect);
		}
	}
}
END_TEST

START_TEST(test_sec_body_untouched_without_secret)
{
	struct xs_call	xc;
	struct xchg	x;
	struct evbuffer	*in = evbuffer_new(), *out = evbuffer_new();

	memset(&xc, 0, sizeof(xc));
	memset(&x, 0, sizeof(x));
	xc.xc_x = &x;
	evbuffer_add(in, secret, strlen(secret));
	/* no secret went out: observed, nothing taken */
	ck_assert_int_eq(sec_stage.xs_resp_body(&xc, in, out), XS_GO);
	ck_assert_uint_eq(evbuffer_get_length(in), strlen(secret));
	ck_assert_uint_eq(evbuffer_get_length(out), 0);
	evbuffer_free(in);
	evbuffer_free(out);
}
END_TEST

START_TEST(test_sec_head_out_one_block)
{
	const char	head[] = "HTTP/1.1 200 s3cr3t-VALUE-0123\r\n"
			    "X-Echo: s3cr3t-VALUE-0123\r\n";
	struct xs_call	xc;
	struct xchg	x;
	struct sec_req	sr;
	struct evbuffer	*in = evbuffer_new(), *out = evbuffer_new();
	size_t		n;
	char		*got;

	sec_fake(&xc, &x, &sr);
	evbuffer_add(in, head, strlen(head));
	ck_assert_int_eq(sec_stage.xs_resp_head_out(&xc, in, out), XS_GO);
	ck_assert_uint_eq(evbuffer_get_length(in), 0);
	n = evbuffer_get_length(out);
	got = (char *)evbuffer_pullup(out, (ssize_t)n);
	ck_assert_ptr_null(memmem(got, n, secret, strlen(secret)));
	ck_assert_ptr_nonnull(memmem(got, n, "X-Echo: [redacted]\r\n", 20));
	evbuffer_free(in);
	evbuffer_free(out);
	sec_scan_free(sr.sr_reflect);
}
END_TEST

Suite *
suite_stage_sec(void)
{
	Suite	*s = suite_create("stage_secrets");
	TCase	*tc = tcase_create("fake exchange");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_sec_body_split_everywhere);
	tcase_add_test(tc, test_sec_body_untouched_without_secret);
	tcase_add_test(tc, test_sec_head_out_one_block);
	suite_add_tcase(s, tc);
	return s;
}
