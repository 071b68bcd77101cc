/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The register actions: fold a big-endian int32 payload into a slot's
 * 64-bit accumulator, and write the accumulator back as a big-endian int32
 * RESULT payload.
 *
 * Sums are kept in 64 bits (n <= 255 int32 values cannot overflow them), so
 * they are exact and independent of arrival order; saturation happens once,
 * in dp_agg_kernels.store, which reports whether any element saturated
 * (the OVERFLOW flag). AVX2 versions are chosen at run time where the CPU
 * has AVX2, scalar ones otherwise.
 */
#ifndef DP_AGG_H
#define DP_AGG_H

#include <stdbool.h>
#include <stdint.h>

/** One implementation of the kernels; n is a count of elements. */
struct dp_agg_kernels {
	const char *name;
	/** acc[i] = payload[i] (first contribution of a round) */
	void (*load)(int64_t *acc, const void *payload, unsigned int n);
	/** acc[i] += payload[i] */
	void (*sum)(int64_t *acc, const void *payload, unsigned int n);
	/** acc[i] = max(acc[i], payload[i]) */
	void (*max)(int64_t *acc, const void *payload, unsigned int n);
	/** acc[i] = min(acc[i], payload[i]) */
	void (*min)(int64_t *acc, const void *payload, unsigned int n);
	/** out[i] = saturate(acc[i]) big-endian; @return true if any saturated */
	bool (*store)(void *out, const int64_t *acc, unsigned int n);
};

/** Portable C kernels. */
extern const struct dp_agg_kernels dp_agg_scalar;

/** @return the AVX2 kernels, or NULL when this CPU or build has no AVX2. */
const struct dp_agg_kernels *dp_agg_avx2(void);

/** @return the best kernels for this CPU (AVX2, else scalar). */
const struct dp_agg_kernels *dp_agg_best(void);

#endif /* DP_AGG_H */
