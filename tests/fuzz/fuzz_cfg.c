/*
 * libFuzzer: the config loader (libyaml -> node tree -> keyword tables ->
 * checks) on a buffer. Errors go to /dev/null; a config that loads is
 * released, so LeakSanitizer sees everything either path allocates.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cfg/cfg.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static FILE	*errs;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfg	*cfg;
	int		 nerr = 0;

	if (errs == NULL && (errs = fopen("/dev/null", "w")) == NULL)
		abort();
	cfg = cfg_load_buffer("fuzz.yaml", (const char *)data, size, errs,
	    &nerr);
	if ((cfg == NULL) != (nerr > 0))
		abort();
	cfg_unref(cfg);
	return 0;
}
