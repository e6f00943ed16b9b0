#ifndef AIRLOCK_UNIT_H
#define AIRLOCK_UNIT_H

#include <check.h>
#include <stddef.h>

#include "budget/bud.h"

/* test_meter.c: the recorded LLM response fixtures (../shared/testdata/llm
 * when present, tests/data/llm always) with their expected usage. */
struct unit_llm_fixture {
	char			*path;
	char			*name;
	enum meter_dialect	 dialect;
	int			 sse;
	struct usage		 want;
};
const struct unit_llm_fixture *unit_llm_fixtures(size_t *n);
/* A whole file, NUL-terminated; NULL if unreadable. */
char	*unit_slurp(const char *path, size_t *lenp);

/* One suite per module; tests/unit/main.c runs them all. */
Suite	*suite_cfg(void);
Suite	*suite_pol(void);
Suite	*suite_pol_replay(void);
Suite	*suite_net_guard(void);
Suite	*suite_net_self(void);
Suite	*suite_http(void);
Suite	*suite_http_write(void);
Suite	*suite_ca(void);
Suite	*suite_tls(void);
Suite	*suite_sec_store(void);
Suite	*suite_sec_sigv4(void);
Suite	*suite_sec_scan(void);
Suite	*suite_sec_encode(void);
Suite	*suite_sec_trip(void);
Suite	*suite_sec_body(void);
Suite	*suite_sec_ws(void);
Suite	*suite_meter(void);
Suite	*suite_sse_filt(void);
Suite	*suite_mcp(void);
Suite	*suite_arr_filt(void);
Suite	*suite_decode(void);
Suite	*suite_bud(void);
Suite	*suite_bud_use(void);
Suite	*suite_bud_redis(void);
Suite	*suite_geo(void);
/* test_geo.c: writes a small .mmdb with tests/integration/mkmmdb.pl. */
int	 unit_mkmmdb(const char *out);
Suite	*suite_metrics(void);
Suite	*suite_aud_verify(void);
Suite	*suite_dns_synth(void);
Suite	*suite_dns_stub(void);
Suite	*suite_stage(void);
Suite	*suite_stage_sec(void);
Suite	*suite_stage_bud(void);
Suite	*suite_stage_pol(void);
Suite	*suite_stage_geo(void);
Suite	*suite_sbx_ident(void);
Suite	*suite_stage_mcp(void);
Suite	*suite_stage_ask(void);
Suite	*suite_stage_aud(void);
Suite	*suite_lnc_ready(void);

#endif
