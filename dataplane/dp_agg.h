/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The register actions: fold a DATA payload into a slot's 64-bit
 * accumulator, and write the accumulator back as a RESULT payload, for
 * each wire dtype (docs/PROTOCOL.md 1 and E4).
 *
 * FIXED32: payload[i] is a big-endian int32. Sums are kept in 64 bits
 * (n <= 255 int32 values cannot overflow them), so they are exact and
 * independent of arrival order; saturation happens once, in store, which
 * reports whether any element saturated (the OVERFLOW flag).
 *
 * BLOCK16: element i is m_i x 2^e_b, m_i a big-endian int16 and e_b the
 * exponent byte of its block of CAIS_B16_BLOCK. The folds add (or compare)
 * those exact integers; a DATA exponent above CAIS_B16_EMAX_DATA counts as
 * CAIS_B16_EMAX_DATA and is reported (OVERFLOW). 255 contributions then stay
 * below 2^63, so store never saturates: per block it picks the smallest
 * exponent in 0..CAIS_B16_EMAX at which every acc_i / 2^e rounds (to nearest,
 * ties to even) into -32767..32767, writes it, zero padding, and the m_i.
 *
 * PARTIAL64 (E9, from a leaf switch to its spine): big-endian int64, the
 * leaf's exact sums; the folds saturate at the int64 range (only a forged
 * payload can reach it) and report it; store writes the accumulator as it is.
 *
 * AVX-512 (FIXED32 and BLOCK16) or AVX2 versions are chosen at run
 * time where the CPU has them, scalar ones otherwise; all give the same bits
 * (PARTIAL64, a leaf's once-per-round traffic, is scalar in every set).
 */
#ifndef DP_AGG_H
#define DP_AGG_H

#include <stdbool.h>
#include <stdint.h>

#include <cais/proto.h>

/**
 * The kernels of one wire dtype; n is a count of elements, payloads are as
 * the wire has them (any alignment). The folds return true when the payload
 * saturated on the way in (a BLOCK16 exponent above the DATA limit), store
 * when the RESULT saturated (a FIXED32 element outside int32): either sets
 * the round's OVERFLOW.
 */
struct dp_agg_ops {
	/** acc[i] = element i (first contribution of a round) */
	bool (*load)(int64_t *acc, const void *payload, unsigned int n);
	/** acc[i] += element i */
	bool (*sum)(int64_t *acc, const void *payload, unsigned int n);
	/** acc[i] = max(acc[i], element i) */
	bool (*max)(int64_t *acc, const void *payload, unsigned int n);
	/** acc[i] = min(acc[i], element i) */
	bool (*min)(int64_t *acc, const void *payload, unsigned int n);
	/** out = the RESULT payload of acc, cais_payload_bytes(dtype, n) bytes */
	bool (*store)(void *out, const int64_t *acc, unsigned int n);
};

/** One implementation of the kernels, for every wire dtype. */
struct dp_agg_kernels {
	const char *name;
	/** by wire dtype, CAIS_DT_*, and CAIS_DT_PARTIAL64 */
	const struct dp_agg_ops *wire[CAIS_DT_PARTIAL64 + 1];
};

_Static_assert(CAIS_DT_PARTIAL64 == CAIS_DT_COUNT, "PARTIAL64 follows the wire dtypes");

/**
 * acc[i] = the value element i of a RESULT payload of a wire dtype stands
 * for (a leaf takes its spine's RESULT in, E9). store() of that acc writes
 * the same payload again.
 * @return false when the payload is not one store() writes (a BLOCK16
 *         exponent above CAIS_B16_EMAX; another dtype)
 */
bool dp_agg_result(int64_t *acc, const void *payload, unsigned int n, unsigned int dtype);

/** Portable C kernels. */
extern const struct dp_agg_kernels dp_agg_scalar;

/** @return the AVX2 kernels, or NULL when this CPU or build has no AVX2. */
const struct dp_agg_kernels *dp_agg_avx2(void);

/**
 * @return the AVX-512 kernels (F and BW; FIXED32 and BLOCK16), or NULL
 *         when this CPU or build lacks them.
 */
const struct dp_agg_kernels *dp_agg_avx512(void);

/** @return the best kernels for this CPU (AVX-512, else AVX2, else scalar). */
const struct dp_agg_kernels *dp_agg_best(void);

#endif /* DP_AGG_H */
