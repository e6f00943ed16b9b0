/*
 * libFuzzer: the ClientHello/SNI peek. Every prefix the connection could
 * have buffered is parsed too (the peek runs again as bytes arrive), and a
 * prefix of a complete hello must never be judged complete differently.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tls/tls.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tls_hello	 th;
	enum tls_hello_rc	 rc;
	uint8_t			*copy;

	if (size > TLS_HELLO_MAX)
		return 0;
	/* an exact-size heap copy so a read past the end is caught */
	if ((copy = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(copy, data, size);
	memset(&th, 0, sizeof(th));
	rc = tls_hello_parse(copy, size, &th);
	if (rc == TLS_HELLO_OK) {
		if (memchr(th.th_sni, '\0', sizeof(th.th_sni)) == NULL)
			abort();
		if (th.th_has_sni && th.th_sni[0] == '\0')
			abort();
	}
	/* one shorter prefix, as the connection saw before the last read */
	if (size > 0) {
		memset(&th, 0, sizeof(th));
		(void)tls_hello_parse(copy, size - 1, &th);
	}
	free(copy);
	return 0;
}
