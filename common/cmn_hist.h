/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A log-linear histogram of durations (or any 64-bit quantity), as HdrHistogram
 * keeps them: CMN_HIST_SUB buckets per power of two, so a bucket's upper bound
 * is within 1/CMN_HIST_SUB (12.5%) of any value in it, and the whole uint64_t
 * range fits in CMN_HIST_BUCKETS counters. The agent counts completion times
 * in ns, the switch round times in TSC cycles; both report percentiles with
 * cmn_hist_quantile().
 *
 * Recording is one bucket computation and one increment, without locks: each
 * writer keeps its own array and readers add arrays up.
 */
#ifndef CMN_HIST_H
#define CMN_HIST_H

#include <stdint.h>

/** Buckets per power of two (a power of two itself). */
#define CMN_HIST_SUB_BITS 3u
#define CMN_HIST_SUB	  (1u << CMN_HIST_SUB_BITS)
/**
 * Counters of a histogram: values below CMN_HIST_SUB have a bucket each, then
 * every power of two from 2^CMN_HIST_SUB_BITS to 2^63 has CMN_HIST_SUB.
 */
#define CMN_HIST_BUCKETS  ((64u - CMN_HIST_SUB_BITS + 1) * CMN_HIST_SUB)

/** @return the bucket of v, < CMN_HIST_BUCKETS. */
static inline unsigned int
cmn_hist_bucket(uint64_t v)
{
	unsigned int msb;

	if (v < CMN_HIST_SUB)
		return (unsigned int)v;
	msb = 63u - (unsigned int)__builtin_clzll(v);
	return (msb - CMN_HIST_SUB_BITS + 1) * CMN_HIST_SUB +
	       (unsigned int)((v >> (msb - CMN_HIST_SUB_BITS)) & (CMN_HIST_SUB - 1));
}

/** @return one more than the largest value of bucket b (UINT64_MAX for the last). */
static inline uint64_t
cmn_hist_upper(unsigned int b)
{
	unsigned int shift = b / CMN_HIST_SUB - 1, sub = b % CMN_HIST_SUB;

	if (b < CMN_HIST_SUB)
		return (uint64_t)b + 1;
	if (b >= CMN_HIST_BUCKETS - 1)
		return UINT64_MAX; /* 2^64 does not fit */
	return (uint64_t)(CMN_HIST_SUB + sub + 1) << shift;
}

/** @return the number of values counted in h (CMN_HIST_BUCKETS counters). */
uint64_t cmn_hist_total(const uint64_t *h);

/**
 * The q-quantile of h, as the upper bound of the bucket that holds the
 * ceil(q x total)-th smallest value (at least the first).
 * @param h CMN_HIST_BUCKETS counters
 * @param q 0..1 (1: the largest value's bucket)
 * @return that bound, or 0 when h is empty
 */
uint64_t cmn_hist_quantile(const uint64_t *h, double q);

#endif /* CMN_HIST_H */
