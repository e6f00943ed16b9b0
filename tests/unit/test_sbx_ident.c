/*
 * Who an explicit-proxy request is (sbx/sbx_ident.c), without a
 * connection: Proxy-Authorization Basic ID:TOKEN against the registry (a
 * config's static sandboxes), the listener's default without the field,
 * the 407 texts, a revoked sandbox.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cfg/cfg.h"
#include "sbx/sbx.h"
#include "unit.h"

static struct cfg	*cfg;

static void
setup(void)
{
	static const char yaml[] =
	    "state_dir: /tmp/airlock-ident-unused\n"
	    "policies:\n"
	    "  - name: p\n"
	    "    rules: [{host: \"a.test\"}]\n"
	    "sandboxes:\n"
	    "  - {id: s1, policy: p, token: \"literal:t1\"}\n"
	    "  - {id: s.2, policy: p, token: \"literal:t2\"}\n";
	int	nerr = 0;

	cfg = cfg_load_buffer("i.yaml", yaml, strlen(yaml), stderr, &nerr);
	ck_assert_ptr_nonnull(cfg);
	sbx_sync_config(cfg);
}

static void
teardown(void)
{
	sbx_shutdown();
	cfg_unref(cfg);
}

/* sbx_ident of the field value <v> (NULL: none), default <def>: the id
 * found, or NULL with *why. */
static const char *
who(const char *v, const char *def, const char **why)
{
	static char	 id[64];
	char		 login[64];
	struct sbx	*s;

	*why = NULL;
	s = sbx_ident(v, v != NULL ? strlen(v) : 0, def, login,
	    sizeof(login), why);
	if (s == NULL) {
		ck_assert_ptr_nonnull(*why);
		return NULL;
	}
	ck_assert_ptr_null(*why);
	snprintf(id, sizeof(id), "%s", s->sb_id);
	sbx_unref(s);
	return id;
}

START_TEST(test_ident_basic)
{
	const char	*why, *id;

	ck_assert_ptr_nonnull(id = who("Basic czE6dDE=", NULL, &why));
	ck_assert_str_eq(id, "s1");
	/* the scheme in any case, spaces around the credentials */
	ck_assert_ptr_nonnull(id = who("basic   cy4yOnQy  ", NULL, &why));
	ck_assert_str_eq(id, "s.2");
	/* credentials win over the listener's default */
	ck_assert_ptr_nonnull(id = who("BASIC czE6dDE=", "s.2", &why));
	ck_assert_str_eq(id, "s1");
}
END_TEST

START_TEST(test_ident_not_valid)
{
	static const char *const bad[] = {
		"Basic czE6dDI=",	/* s1:t2, another's token */
		"Basic czF0MQ==",	/* s1t1, no colon */
		"Basic !!!!",		/* not base64 */
		"Basic ",		/* empty */
		"Bearer czE6dDE=",	/* not Basic */
		"",
	};
	const char	*why;
	size_t		 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(who(bad[i], "s1", &why) == NULL, "%s", bad[i]);
		/* a wrong field is not the default sandbox */
		ck_assert_str_eq(why, "proxy credentials not valid");
	}
}
END_TEST

START_TEST(test_ident_default)
{
	const char	*why, *id;

	ck_assert_ptr_nonnull(id = who(NULL, "s.2", &why));
	ck_assert_str_eq(id, "s.2");
	ck_assert_ptr_null(who(NULL, NULL, &why));
	ck_assert_str_eq(why, "proxy credentials required");
	ck_assert_ptr_null(who(NULL, "gone", &why));
	ck_assert_str_eq(why, "proxy credentials required");
}
END_TEST

START_TEST(test_ident_revoked)
{
	struct sbx	*s;
	const char	*why;

	ck_assert_ptr_nonnull(s = sbx_find("s1"));
	__atomic_store_n(&s->sb_revoked, 1, __ATOMIC_RELEASE);
	ck_assert_ptr_null(who("Basic czE6dDE=", NULL, &why));
	ck_assert_str_eq(why, "proxy credentials not valid");
	ck_assert_ptr_null(who(NULL, "s1", &why));
	ck_assert_str_eq(why, "proxy credentials not valid");
	__atomic_store_n(&s->sb_revoked, 0, __ATOMIC_RELEASE);
	sbx_unref(s);
}
END_TEST

Suite *
suite_sbx_ident(void)
{
	Suite	*s = suite_create("sbx_ident");
	TCase	*tc = tcase_create("ident");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_ident_basic);
	tcase_add_test(tc, test_ident_not_valid);
	tcase_add_test(tc, test_ident_default);
	tcase_add_test(tc, test_ident_revoked);
	suite_add_tcase(s, tc);
	return s;
}
