/* Runs every Check suite; exit status for automake's test driver. */
#include "config.h"

#include <stdlib.h>

#include "unit.h"

int
main(void)
{
	SRunner	*sr;
	int	 failed;

	sr = srunner_create(suite_cfg());
	srunner_add_suite(sr, suite_pol());
	srunner_add_suite(sr, suite_pol_replay());
	srunner_add_suite(sr, suite_net_guard());
	srunner_add_suite(sr, suite_net_self());
	srunner_add_suite(sr, suite_http());
	srunner_add_suite(sr, suite_http_write());
	srunner_add_suite(sr, suite_ca());
	srunner_add_suite(sr, suite_tls());
	srunner_add_suite(sr, suite_sec_store());
	srunner_add_suite(sr, suite_sec_sigv4());
	srunner_add_suite(sr, suite_sec_scan());
	srunner_add_suite(sr, suite_sec_encode());
	srunner_add_suite(sr, suite_sec_trip());
	srunner_add_suite(sr, suite_sec_body());
	srunner_add_suite(sr, suite_sec_ws());
	srunner_add_suite(sr, suite_meter());
	srunner_add_suite(sr, suite_sse_filt());
	srunner_add_suite(sr, suite_mcp());
	srunner_add_suite(sr, suite_arr_filt());
	srunner_add_suite(sr, suite_decode());
	srunner_add_suite(sr, suite_bud());
	srunner_add_suite(sr, suite_bud_use());
	srunner_add_suite(sr, suite_bud_redis());
	srunner_add_suite(sr, suite_geo());
	srunner_add_suite(sr, suite_metrics());
	srunner_add_suite(sr, suite_aud_verify());
	srunner_add_suite(sr, suite_dns_synth());
	srunner_add_suite(sr, suite_dns_stub());
	srunner_add_suite(sr, suite_stage());
	srunner_add_suite(sr, suite_stage_sec());
	srunner_add_suite(sr, suite_stage_bud());
	srunner_add_suite(sr, suite_stage_pol());
	srunner_add_suite(sr, suite_stage_geo());
	srunner_add_suite(sr, suite_sbx_ident());
	srunner_add_suite(sr, suite_stage_mcp());
	srunner_add_suite(sr, suite_stage_ask());
	srunner_add_suite(sr, suite_stage_aud());
	srunner_add_suite(sr, suite_lnc_ready());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
