/*
 * lnc_ready: the console handshake of launcher.qemu.snapshot's template
 * (issue 22). A template whose init never announced the identity protocol
 * (an image built before the identity reader, or before its "rng" line) is
 * refused with a reason naming the key and the fix; one that did is
 * accepted; guest/init announces the version the launcher needs.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include <check.h>

#include "launcher/lnc_internal.h"
#include "unit.h"

/* The template's console saying <lines>, then staying open (or not). */
static int
template_says(const char *lines, char *why, size_t whysz, int hangup)
{
	int	sv[2], rc;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(write(sv[1], lines, strlen(lines)),
	    (ssize_t)strlen(lines));
	if (hangup)
		close(sv[1]);
	rc = lnc_vm_wait_template(sv[0], 300, why, whysz);
	close(sv[0]);
	if (!hangup)
		close(sv[1]);
	return rc;
}

START_TEST(old_image_refused)
{
	char	why[256] = "";

	/* built before the identity reader: the agent is ready at once */
	ck_assert_int_eq(template_says("Linux version 6.1\r\n"
	    "AIRLOCK-READY template\r\n", why, sizeof(why), 0), -1);
	ck_assert_ptr_nonnull(strstr(why, "launcher.qemu.snapshot"));
	ck_assert_ptr_nonnull(strstr(why, "make guest-image"));
	ck_assert_ptr_nonnull(strstr(why, "protocol 0"));
	/* an identity reader without the "rng" line */
	ck_assert_int_eq(template_says("AIRLOCK-IDENTITY 1\n"
	    "AIRLOCK-READY template\n", why, sizeof(why), 0), -1);
	ck_assert_ptr_nonnull(strstr(why, "protocol 1"));
}
END_TEST

START_TEST(current_image_accepted)
{
	char	why[256] = "", line[96];

	snprintf(line, sizeof(line), "[    1.0] virtio\nAIRLOCK-IDENTITY %d\n"
	    "AIRLOCK-READY template\n", LNC_VM_ID_PROTO);
	ck_assert_msg(template_says(line, why, sizeof(why), 0) == 0, "%s",
	    why);
	/* a later one too */
	snprintf(line, sizeof(line), "AIRLOCK-IDENTITY %d\n"
	    "AIRLOCK-READY template\n", LNC_VM_ID_PROTO + 1);
	ck_assert_int_eq(template_says(line, why, sizeof(why), 0), 0);
	/* the marker is no readiness: qemu gone before READY fails */
	snprintf(line, sizeof(line), "AIRLOCK-IDENTITY %d\n", LNC_VM_ID_PROTO);
	ck_assert_int_eq(template_says(line, why, sizeof(why), 1), -1);
	ck_assert_ptr_nonnull(strstr(why, "qemu exited"));
}
END_TEST

/* The image's init and the launcher agree on the version. */
START_TEST(init_announces_version)
{
	const char	*top = getenv("top_srcdir");
	char		 path[4096], want[64];
	char		*init;
	size_t		 len;

	snprintf(path, sizeof(path), "%s/guest/init", top ? top : ".");
	ck_assert_msg((init = unit_slurp(path, &len)) != NULL, "%s", path);
	snprintf(want, sizeof(want), "echo \"AIRLOCK-IDENTITY %d\"",
	    LNC_VM_ID_PROTO);
	ck_assert_msg(strstr(init, want) != NULL, "%s lacks %s", path, want);
	ck_assert_ptr_nonnull(strstr(init, "airlock-guest -s"));
	free(init);
}
END_TEST

Suite *
suite_lnc_ready(void)
{
	Suite	*s = suite_create("lnc_ready");
	TCase	*tc = tcase_create("template");

	tcase_add_test(tc, old_image_refused);
	tcase_add_test(tc, current_image_accepted);
	tcase_add_test(tc, init_announces_version);
	suite_add_tcase(s, tc);
	return s;
}
