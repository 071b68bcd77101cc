/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Command-line helpers shared by the benchmarks: a comma-separated list of
 * positive integers, checked (a bad list is an error, exit status 2).
 */
#ifndef CAIS_BENCH_ARGS_H
#define CAIS_BENCH_ARGS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/** Parse "a,b,c" into out[0..max-1]; @return the count; exit(2) on bad input. */
static inline unsigned int
bench_parse_list(const char *prog, const char *opt, const char *s, unsigned int *out,
		 unsigned int max)
{
	unsigned int n = 0;
	const char *p = s;

	for (;;) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(p, &end, 10);
		if (end == p || errno || v == 0 || v > 1u << 30 || (*end != ',' && *end) ||
		    n == max) {
			fprintf(stderr,
				"%s: %s '%s': up to %u positive integers, comma-separated\n", prog,
				opt, s, max);
			exit(2);
		}
		out[n++] = (unsigned int)v;
		if (!*end)
			return n;
		p = end + 1;
	}
}

#endif /* CAIS_BENCH_ARGS_H */
