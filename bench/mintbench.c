/*
 * mintbench: what a leaf certificate costs. `mintbench [N]` times N cold
 * mints (distinct hosts, straight ca_mint_leaf()), N cache misses (mint
 * plus insert) and N cache hits, single-threaded, and prints microseconds
 * per operation. The CA lives in a temporary state_dir removed at exit.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/opensslv.h>

#include "ca/ca.h"

#define BENCH_ID	"mintbench"
#define VALIDITY_MS	(7ULL * 24 * 3600 * 1000)
#define HIT_ROUNDS	20	/* hits are cheap: repeat to get a reading */

static uint64_t
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static void
report(const char *what, uint64_t ns, unsigned long ops)
{
	printf("%-36s %10.2f us/op  (%lu ops)\n", what,
	    (double)ns / 1000.0 / (double)ops, ops);
}

int
main(int argc, char *argv[])
{
	struct ca_cache	*cc;
	struct ca	*ca;
	X509		*x;
	char		 dir[] = "/tmp/mintbench-XXXXXX", sub[64], host[64];
	unsigned long	 n = 2000, i, r;
	uint64_t	 t0, hits;
	char		*end;
	int		 minted, rv = 1;

	if (argc > 2 || (argc == 2 && ((n = strtoul(argv[1], &end, 10)) == 0 ||
	    *end != '\0'))) {
		fprintf(stderr, "usage: mintbench [N]\n");
		return 2;
	}
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	if ((ca = ca_get(dir, BENCH_ID)) == NULL)
		goto out;
	printf("mintbench: N=%lu, ECDSA P-256 leaves, %s\n", n,
	    OpenSSL_version(OPENSSL_VERSION));

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		snprintf(host, sizeof(host), "m%lu.bench.test", i);
		if ((x = ca_mint_leaf(ca, host, VALIDITY_MS)) == NULL)
			goto out;
		X509_free(x);
	}
	report("mint (distinct hosts)", now_ns() - t0, n);

	/* room to spare: shards fill unevenly, and every host must stay */
	cc = ca_cache_new(2 * n + 1024);
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		snprintf(host, sizeof(host), "c%lu.bench.test", i);
		if ((x = ca_cache_get(cc, ca, host, VALIDITY_MS,
		    &minted)) == NULL || !minted)
			goto out_cache;
		X509_free(x);
	}
	report("cache miss (mint + insert)", now_ns() - t0, n);

	t0 = now_ns();
	for (r = 0; r < HIT_ROUNDS; r++) {
		for (i = 0; i < n; i++) {
			snprintf(host, sizeof(host), "c%lu.bench.test", i);
			if ((x = ca_cache_get(cc, ca, host, VALIDITY_MS,
			    &minted)) == NULL || minted)
				goto out_cache;
			X509_free(x);
		}
	}
	report("cache hit", now_ns() - t0, n * HIT_ROUNDS);
	ca_cache_stats(cc, &hits, NULL, NULL);
	if (hits != n * HIT_ROUNDS)
		goto out_cache;
	rv = 0;
 out_cache:
	ca_cache_free(cc);
 out:
	if (rv != 0)
		fprintf(stderr, "mintbench: failed\n");
	ca_registry_drop(dir, BENCH_ID);
	ca_registry_free();
	snprintf(sub, sizeof(sub), "%s/ca", dir);
	rmdir(sub);
	rmdir(dir);
	return rv;
}
