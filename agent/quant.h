/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Conversions of the agent: tensor elements <-> the switch's fixed point
 * (big-endian int32 wire payload), bf16/fp16 <-> fp32, and the reductions
 * of the ring fallback. AVX2 (and F16C for fp16) chosen at run time where
 * the CPU has them, scalar otherwise; both give the same results (bit for
 * bit, except the random stream of stochastic rounding).
 *
 * Fixed point: q = value x scale, rounded (stochastically: floor(v + u),
 * u uniform in [0, 1), so E[q] = value x scale exactly; or to nearest,
 * ties to even), then saturated to [INT32_MIN, INT32_MAX]. NaN becomes 0.
 * int32 passes unscaled. Back: value = q x inv_scale, where the caller folds
 * avg's 1/n into inv_scale; int32 avg is q / n rounded toward zero.
 *
 * BLOCK16 (proto.h, docs/PROTOCOL.md E4), float types only: per block of 32
 * elements, x = value x scale; the block's exponent e = max(0, floor(log2
 * max |x|) - 14), so that |x| / 2^e < 2^15; m = x / 2^e, rounded as above and
 * clamped to +-32767. With a power-of-two scale every step is exact but the
 * rounding of m, which only elements below 2^-7 (bf16) of their block's
 * largest need. Back: value = m x (2^e x inv_scale), in fp32, then rounded
 * to the type.
 */
#ifndef CAIS_AGENT_QUANT_H
#define CAIS_AGENT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cais/cais.h>

/** Random state of stochastic rounding (xoshiro/xorshift family; 4 independent lanes x 2). */
struct cais_rng {
	uint64_t s[8][2];
};

/** Seed a random state (any seed; 0 is fine). */
void cais_rng_seed(struct cais_rng *r, uint64_t seed);

/** bf16 and fp16 <-> fp32, one value: widening is exact; narrowing rounds to nearest even. */
float cais_bf16_to_f32(uint16_t h);
uint16_t cais_f32_to_bf16(float f);
float cais_f16_to_f32(uint16_t h);
uint16_t cais_f32_to_f16(float f);

/** One implementation of the bulk conversions. n is a count of elements. */
struct cais_quant_ops {
	const char *name;
	/**
	 * Encode n elements of dt at src as big-endian int32 at dst (fixed point;
	 * int32 unscaled). Stochastic rounding draws from rng unless nearest.
	 * @return the number of elements that saturated (0 for int32)
	 */
	size_t (*encode)(void *dst, const void *src, size_t n, enum cais_datatype dt, float scale,
			 bool nearest, struct cais_rng *rng);
	/**
	 * Decode n big-endian int32 at src into dt at dst: value = q x inv_scale
	 * (float types); int32: q, or q / avg_n rounded toward 0 when avg_n > 1.
	 */
	void (*decode)(void *dst, const void *src, size_t n, enum cais_datatype dt, float inv_scale,
		       unsigned int avg_n);
	/** n elements of dt (float types) -> fp32 (exact). */
	void (*to_f32)(float *dst, const void *src, size_t n, enum cais_datatype dt);
	/** n fp32 -> dt (float types; round to nearest even), times mul (1 or 1/n for avg). */
	void (*from_f32)(void *dst, const float *src, size_t n, enum cais_datatype dt, float mul);
	/** acc[i] = op(acc[i], in[i]) in fp32 (avg: sum). */
	void (*reduce_f32)(float *acc, const float *in, size_t n, enum cais_redop op);
	/** acc[i] = op(acc[i], in[i]) in int32; sums saturate (avg: sum). */
	void (*reduce_i32)(int32_t *acc, const int32_t *in, size_t n, enum cais_redop op);
	/**
	 * Encode n elements of dt (a float type) at src as the BLOCK16 payload
	 * at dst (cais_payload_bytes(CAIS_DT_BLOCK16, n) bytes; the padding of
	 * the exponent area is zeroed). The random stream is drawn as encode()
	 * draws it. A block whose largest |x| reaches 2^55 (it would need an
	 * exponent above CAIS_B16_EMAX_DATA; inf too) is written as zeros.
	 * @return the elements of such blocks; n for int32 (not carried)
	 */
	size_t (*encode_b16)(void *dst, const void *src, size_t n, enum cais_datatype dt,
			     float scale, bool nearest, struct cais_rng *rng);
	/**
	 * Decode a BLOCK16 payload of n elements at src into dt (a float type)
	 * at dst: value = m x (2^e x inv_scale) in fp32 (an exponent above
	 * CAIS_B16_EMAX counts as CAIS_B16_EMAX). int32: nothing is written.
	 */
	void (*decode_b16)(void *dst, const void *src, size_t n, enum cais_datatype dt,
			   float inv_scale);
};

/** The portable implementation. */
extern const struct cais_quant_ops cais_quant_scalar;

/** @return the AVX2 implementation, or NULL when the CPU (or the build) lacks AVX2/F16C. */
const struct cais_quant_ops *cais_quant_avx2(void);

/**
 * @return AVX2's implementation with AVX-512 (F, BW, DQ, VL) encoders (FIXED32
 *         and BLOCK16) and BLOCK16 decoder, or NULL when the CPU (or the
 *         build) lacks them.
 */
const struct cais_quant_ops *cais_quant_avx512(void);

/** @return the best implementation for this CPU: avx512, avx2 or scalar. */
const struct cais_quant_ops *cais_quant_best(void);

#endif /* CAIS_AGENT_QUANT_H */
