/*
 * Configuration load time: cfg_load() of one file, N times, in-process, so
 * that what is measured is the YAML parse, the keyword walk and the
 * cross-checks, not process start-up. Prints the fastest, the median and
 * the mean load in microseconds (docs/benchmarks.md "Config load"); on a
 * shared machine the fastest is the steadiest of the three.
 *
 *	bench/cfgbench FILE [LOADS]
 *
 * bench/cfggen.py writes the large generated config it is run on.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cfg/cfg.h"

static double
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	struct cfg	*c;
	double		*t, t0, sum = 0;
	int		 i, n, nerr;

	if (argc < 2) {
		fprintf(stderr, "usage: cfgbench FILE [LOADS]\n");
		return 2;
	}
	n = argc > 2 ? atoi(argv[2]) : 200;
	if (n < 1)
		n = 1;
	if ((t = calloc((size_t)n, sizeof(*t))) == NULL)
		return 1;
	for (i = 0; i < n; i++) {
		t0 = now_us();
		c = cfg_load(argv[1], stderr, &nerr);
		t[i] = now_us() - t0;
		if (c == NULL) {
			fprintf(stderr, "%s: %d problems\n", argv[1], nerr);
			return 1;
		}
		cfg_unref(c);
		sum += t[i];
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	printf("%s: %d loads, min %.0f us, median %.0f us, mean %.0f us\n",
	    argv[1], n, t[0], t[n / 2], sum / n);
	free(t);
	return 0;
}
