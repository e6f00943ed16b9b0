/* libFuzzer: response framing through http_msg (see fuzz_http.h). */
#include "config.h"

#include "fuzz_http.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_http_run(HTTP_RESPONSE, data, size);
	return 0;
}
