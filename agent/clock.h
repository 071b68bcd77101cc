/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The agent's one clock: nanoseconds of CLOCK_MONOTONIC. Every timer of the
 * agent (retransmission, peer queries, reconnects, collective deadlines) is
 * a time on this clock.
 */
#ifndef AG_CLOCK_H
#define AG_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t
ag_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* AG_CLOCK_H */
