/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The process's CPU time, for tools that report CPU per byte beside their
 * rates (cais-allreduce-perf, bench_agent): on a shared machine it moves
 * much less than wall time does.
 */
#ifndef CMN_CPU_H
#define CMN_CPU_H

#include <sys/resource.h>

/** @return the calling process's CPU time so far, every thread, user and system (s). */
static inline double
cmn_cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e-6;
}

#endif
