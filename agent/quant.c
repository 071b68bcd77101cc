/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's conversions (quant.h): a portable implementation, an AVX2 +
 * F16C one, and AVX2's with AVX-512 encoders (FIXED32 and BLOCK16) and
 * BLOCK16 decoder, chosen at run time. The three give the same bits for
 * every function and every input, the stochastic
 * encode included (the vector paths draw the same random numbers, in the
 * same order, as the scalar one); the tests compare them on every 16-bit
 * pattern and on random data, and tests/fuzz/fuzz_quant.c on arbitrary
 * bits. One exception, outside what quant.h allows: from_f32 with a NaN
 * factor (quant.h: 1 or 1/n), where a NaN element times it may come out
 * with either NaN's sign and payload (the compiler may swap a product's
 * operands).
 *
 * Semantics, where quant.h leaves a choice:
 *
 * - Encode of float types: x = value x scale as one fp32 multiply (bf16 and
 *   fp16 are first widened to fp32, exactly). NaN becomes 0. Rounding to
 *   nearest: ties to even. Stochastic: f = floor(x), q = f + (u < x - f) with
 *   u = k x 2^-24, k a uniform 24-bit integer, so P(q = f + 1) is the
 *   fraction x - f (to 2^-24) whatever the magnitude of x: f and x - f are
 *   exact in fp32 (but for x in (-1, 0), where x - f = x + 1 may round, by
 *   2^-25 at most), and an integral x is never moved. (floor(x + u) in fp32
 *   would be biased: x + u rounds once |x| >= 1.) Saturation: a
 *   rounded value >= 2^31 gives INT32_MAX, <= -2^31 gives INT32_MIN, and both
 *   count (so -2^31 itself counts: it is the edge of the range). +-inf
 *   saturate.
 *
 * - Decode of float types: quant.h hands over inv_scale = fl32(1/S) (S the
 *   scale, times n for avg). A product by that rounded reciprocal is off by
 *   up to 2^-24 relative, so q x inv_scale would not give back a value whose
 *   fixed point is exact (value = q / S) for about a quarter of the integer
 *   scales. So decode first recovers S where it is a "round" number: if a
 *   float S with at most 16 significant bits (1024, 3, 1000, 1024 x 255, ...)
 *   has a reciprocal that rounds to inv_scale, the factor is 1/S, else
 *   inv_scale itself; value = q x factor in double precision, rounded once
 *   to fp32. With a round S and |q| < 2^24 that is q / S correctly rounded,
 *   so exact whenever q / S is representable; otherwise within 2^-24
 *   relative of q x inv_scale, plus the one rounding. (Where the caller's S
 *   is not round, a round neighbour one ulp away may be taken for it, with
 *   odds below 1%: then the error is up to 2^-23 plus the rounding.) A power
 *   of two is used as is. The recovery costs a few double divisions per
 *   call. bf16 and fp16 outputs are then rounded from that fp32 value, to
 *   nearest even (a second rounding).
 *
 * - Decode of int32 with avg_n > 1: q / avg_n, C division (toward zero).
 *
 * - bf16 <-> fp32: widening is a shift (NaN payloads kept as they are);
 *   narrowing rounds to nearest even, overflows to inf, and turns every NaN
 *   into the quiet NaN 0x7FC0 with the input's sign.
 *
 * - fp16 <-> fp32: what F16C does, so that both paths agree on every input:
 *   widening is exact and sets the quiet bit of a NaN (payload kept);
 *   narrowing rounds to nearest even (subnormals included), overflows to inf
 *   (from 65520 up), and a NaN becomes sign | 0x7E00 | mantissa >> 13.
 *
 * - reduce_f32: sum and avg add in fp32. max: acc = in if in > acc or in is
 *   NaN, else acc; min the same with <. So a NaN on either side gives a NaN
 *   (the one of in when both are), and max(+0, -0) keeps acc. Only selects,
 *   so NaN payloads are kept bit for bit.
 *
 * - The fp32 arithmetic assumes the default rounding mode (to nearest) and no
 *   flush-to-zero; FMA contraction is switched off for this file, as a fused
 *   multiply-subtract in one path only would break the bit-for-bit promise.
 *
 * - Random numbers: 8 xorshift128+ streams (shifts 23, 18, 5), seeded by
 *   splitmix64. One "block" of 16 elements takes one 64-bit draw from every
 *   stream: element e of the block uses the low (e even) or high (e odd) 32
 *   bits of stream e / 2, of which it keeps the top 24. A call takes
 *   ceil(n / 16) blocks, the last one partly used.
 *
 * Buffers: dst and src of encode and decode may be unaligned and may be the
 * same buffer when the element sizes are equal (fp32, int32); other overlaps
 * are not allowed. Unknown datatypes and ops write nothing; encode with a
 * NULL rng rounds to nearest.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define QUANT_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <cais/proto.h>

#define QUANT_BLOCK 16 /* elements per random block: 8 streams x 2 halves */

/* ---------------------------------------------------------------- helpers */

static inline uint32_t
f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float
u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t
ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void
st32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

static inline uint16_t
ld16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void
st16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof(v));
}

/* The payload is big-endian (PROTOCOL.md section 1). */
static inline uint32_t
to_be32(uint32_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return v;
#else
	return __builtin_bswap32(v);
#endif
}

static inline uint16_t
to_be16(uint16_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return v;
#else
	return __builtin_bswap16(v);
#endif
}

/* ------------------------------------------------------------ random state */

static uint64_t
splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void
cais_rng_seed(struct cais_rng *r, uint64_t seed)
{
	uint64_t x = seed;

	for (int i = 0; i < 8; i++) {
		r->s[i][0] = splitmix64(&x);
		r->s[i][1] = splitmix64(&x);
		if ((r->s[i][0] | r->s[i][1]) == 0) /* the one state xorshift cannot leave */
			r->s[i][1] = 1;
	}
}

static inline uint64_t
xorshift128p(uint64_t s[2])
{
	uint64_t s1 = s[0];
	const uint64_t s0 = s[1];
	const uint64_t result = s0 + s1;

	s[0] = s0;
	s1 ^= s1 << 23;
	s[1] = s1 ^ s0 ^ (s1 >> 18) ^ (s0 >> 5);
	return result;
}

/* One block of 16 uniform numbers in [0, 1), 24 bits each (exact in fp32). */
static inline void
rng_block(struct cais_rng *r, float u[QUANT_BLOCK])
{
	for (int j = 0; j < 8; j++) {
		uint64_t v = xorshift128p(r->s[j]);

		u[2 * j] = (float)((uint32_t)v >> 8) * 0x1p-24f;
		u[2 * j + 1] = (float)((uint32_t)(v >> 32) >> 8) * 0x1p-24f;
	}
}

/* ------------------------------------------------- bf16 / fp16 <-> fp32 */

float
cais_bf16_to_f32(uint16_t h)
{
	return u2f((uint32_t)h << 16);
}

uint16_t
cais_f32_to_bf16(float f)
{
	uint32_t u = f2u(f);

	if ((u & 0x7FFFFFFFu) > 0x7F800000u)
		return (uint16_t)(((u >> 16) & 0x8000u) | 0x7FC0u);
	/* Round to nearest even on the 16 bits dropped; a carry into the
	 * exponent is right, up to inf. */
	u += 0x7FFFu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float
cais_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;

	if (e == 0x1F)
		return u2f(sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0));
	if (e == 0)
		return u2f(sign | f2u((float)m * 0x1p-24f)); /* exact, 0 included */
	return u2f(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t
cais_f32_to_f16(float f)
{
	uint32_t u = f2u(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7FFFFFFFu;

	if (a > 0x7F800000u)
		return (uint16_t)(sign | 0x7E00u | ((a & 0x7FFFFFu) >> 13));
	if (a >= 0x477FF000u) /* 65520 (the tie above 65504) and up */
		return (uint16_t)(sign | 0x7C00u);
	if (a >= 0x38800000u) { /* 2^-14: a normal fp16 */
		a += 0xFFFu + ((a >> 13) & 1u);
		return (uint16_t)(sign | ((a - (112u << 23)) >> 13));
	}
	if (a <= 0x33000000u) /* up to 2^-25 (the tie rounds to 0, even) */
		return sign;
	/* Subnormal: round(|f| x 2^24) from the 24-bit significand. */
	uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
	uint32_t shift = 126 - e; /* 14..24 */
	uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);

	if (rem > half || (rem == half && (r & 1u)))
		r++;
	return (uint16_t)(sign | r);
}

/* ------------------------------------------------------ one element, scalar */

/* Round to nearest even; exact under the default rounding mode. */
static inline float
round_even(float x)
{
	if (fabsf(x) < 0x1p23f) {
		float t = fabsf(x) + 0x1p23f;

		t -= 0x1p23f;
		return copysignf(t, x);
	}
	return x; /* integral already, or inf */
}

static inline float
round_down(float x)
{
	float t = round_even(x);

	return t > x ? t - 1.0f : t;
}

static inline int32_t
saturate(float r, size_t *sat)
{
	if (r >= 0x1p31f) {
		(*sat)++;
		return INT32_MAX;
	}
	if (r <= -0x1p31f) {
		(*sat)++;
		return INT32_MIN;
	}
	return (int32_t)r;
}

static inline int32_t
fix_nearest(float x, size_t *sat)
{
	if (x != x)
		x = 0.0f;
	return saturate(round_even(x), sat);
}

static inline int32_t
fix_stochastic(float x, float u, size_t *sat)
{
	if (x != x)
		x = 0.0f;
	float f = round_down(x);
	float frac = x - f; /* NaN for +-inf: never taken */

	return saturate(u < frac ? f + 1.0f : f, sat);
}

static inline float
load_elem(const uint8_t *p, enum cais_datatype dt)
{
	switch (dt) {
	case CAIS_BFLOAT16:
		return cais_bf16_to_f32(ld16(p));
	case CAIS_FLOAT16:
		return cais_f16_to_f32(ld16(p));
	default:
		return u2f(ld32(p));
	}
}

static inline void
store_elem(uint8_t *p, float v, enum cais_datatype dt)
{
	switch (dt) {
	case CAIS_BFLOAT16:
		st16(p, cais_f32_to_bf16(v));
		break;
	case CAIS_FLOAT16:
		st16(p, cais_f32_to_f16(v));
		break;
	default:
		st32(p, f2u(v));
		break;
	}
}

static inline size_t
float_size(enum cais_datatype dt)
{
	switch (dt) {
	case CAIS_FLOAT32:
		return 4;
	case CAIS_BFLOAT16:
	case CAIS_FLOAT16:
		return 2;
	default:
		return 0;
	}
}

/* Encode elements [i, n) of a float type; i is a multiple of QUANT_BLOCK. */
static inline size_t
encode_tail(uint8_t *d, const uint8_t *s, size_t i, size_t n, enum cais_datatype dt, float scale,
	    bool nearest, struct cais_rng *rng)
{
	size_t esz = float_size(dt), sat = 0;
	float u[QUANT_BLOCK];

	for (; i < n; i += QUANT_BLOCK) {
		size_t m = n - i < QUANT_BLOCK ? n - i : QUANT_BLOCK;

		if (!nearest)
			rng_block(rng, u);
		for (size_t k = 0; k < m; k++) {
			float x = load_elem(s + (i + k) * esz, dt) * scale;
			int32_t q = nearest ? fix_nearest(x, &sat) : fix_stochastic(x, u[k], &sat);

			st32(d + (i + k) * 4, to_be32((uint32_t)q));
		}
	}
	return sat;
}

/* Decode elements [i, n) of a float type. */
static inline void
decode_tail(uint8_t *d, const uint8_t *s, size_t i, size_t n, enum cais_datatype dt, double inv)
{
	size_t esz = float_size(dt);

	for (; i < n; i++) {
		int32_t q = (int32_t)to_be32(ld32(s + i * 4));

		store_elem(d + i * esz, (float)((double)q * inv), dt);
	}
}

static inline void
decode_i32_tail(uint8_t *d, const uint8_t *s, size_t i, size_t n, unsigned int avg_n)
{
	for (; i < n; i++) {
		int32_t q = (int32_t)to_be32(ld32(s + i * 4));

		if (avg_n > 1)
			q = (int32_t)((int64_t)q / (int64_t)avg_n);
		st32(d + i * 4, (uint32_t)q);
	}
}

static inline void
bswap_tail(uint8_t *d, const uint8_t *s, size_t i, size_t n)
{
	for (; i < n; i++)
		st32(d + i * 4, to_be32(ld32(s + i * 4)));
}

static inline int32_t
add_sat(int32_t a, int32_t b)
{
	int32_t r;

	if (__builtin_add_overflow(a, b, &r))
		return a < 0 ? INT32_MIN : INT32_MAX;
	return r;
}

static inline float
max_f32(float acc, float in)
{
	return (in > acc || in != in) ? in : acc;
}

static inline float
min_f32(float acc, float in)
{
	return (in < acc || in != in) ? in : acc;
}

/*
 * What decode multiplies by (in double): 1/S when a float S with at most 16
 * significant bits has a reciprocal that rounds to inv (the one with the
 * fewest, when there are two), else inv itself. Such S lie within one ulp
 * of fl(1/inv): the floats whose reciprocal rounds to inv span at most
 * 2^-23, relative, around 1/inv.
 */
static double
decode_factor(float inv)
{
	uint32_t u = f2u(inv);
	float a = fabsf(inv);

	if ((u & 0x7FFFFFu) == 0 || !(a >= 0x1p-126f) || !(a <= 0x1p126f))
		return (double)inv; /* a power of two, exact; or no better guess */
	uint32_t s = f2u((float)(1.0 / (double)a));
	int best_tz = 7; /* trailing zeros of the 24-bit significand: >= 8 */
	float best = 0.0f;

	for (int k = 0; k < 3; k++) {
		uint32_t c = k == 0 ? s : k == 1 ? s - 1 : s + 1;
		float cf = u2f(c);
		int tz = __builtin_ctz((c & 0x7FFFFFu) | 0x800000u);

		if (tz > best_tz && (float)(1.0 / (double)cf) == a) {
			best_tz = tz;
			best = cf;
		}
	}
	if (best == 0.0f)
		return (double)inv;
	return (inv < 0 ? -1.0 : 1.0) / (double)best;
}

/* ------------------------------------------------------ scalar bulk ops */

static size_t
scalar_encode(void *dst, const void *src, size_t n, enum cais_datatype dt, float scale,
	      bool nearest, struct cais_rng *rng)
{
	if (dt == CAIS_INT32) {
		bswap_tail(dst, src, 0, n);
		return 0;
	}
	if (float_size(dt) == 0)
		return 0;
	if (rng == NULL)
		nearest = true;
	switch (dt) { /* one loop per type, so that the type is a constant in it */
	case CAIS_FLOAT32:
		return encode_tail(dst, src, 0, n, CAIS_FLOAT32, scale, nearest, rng);
	case CAIS_BFLOAT16:
		return encode_tail(dst, src, 0, n, CAIS_BFLOAT16, scale, nearest, rng);
	default:
		return encode_tail(dst, src, 0, n, CAIS_FLOAT16, scale, nearest, rng);
	}
}

static void
scalar_decode(void *dst, const void *src, size_t n, enum cais_datatype dt, float inv_scale,
	      unsigned int avg_n)
{
	if (dt == CAIS_INT32) {
		if (avg_n > 1)
			decode_i32_tail(dst, src, 0, n, avg_n);
		else
			bswap_tail(dst, src, 0, n);
		return;
	}
	double inv = decode_factor(inv_scale);

	switch (dt) {
	case CAIS_FLOAT32:
		decode_tail(dst, src, 0, n, CAIS_FLOAT32, inv);
		break;
	case CAIS_BFLOAT16:
		decode_tail(dst, src, 0, n, CAIS_BFLOAT16, inv);
		break;
	case CAIS_FLOAT16:
		decode_tail(dst, src, 0, n, CAIS_FLOAT16, inv);
		break;
	default:
		break;
	}
}

static void
scalar_to_f32(float *dst, const void *src, size_t n, enum cais_datatype dt)
{
	const uint8_t *s = src;

	switch (dt) {
	case CAIS_FLOAT32:
		memmove(dst, src, n * sizeof(float));
		break;
	case CAIS_BFLOAT16:
		for (size_t i = 0; i < n; i++)
			dst[i] = cais_bf16_to_f32(ld16(s + 2 * i));
		break;
	case CAIS_FLOAT16:
		for (size_t i = 0; i < n; i++)
			dst[i] = cais_f16_to_f32(ld16(s + 2 * i));
		break;
	default:
		break;
	}
}

static void
scalar_from_f32(void *dst, const float *src, size_t n, enum cais_datatype dt, float mul)
{
	uint8_t *d = dst;

	switch (dt) {
	case CAIS_FLOAT32:
		for (size_t i = 0; i < n; i++)
			st32(d + 4 * i, f2u(src[i] * mul));
		break;
	case CAIS_BFLOAT16:
		for (size_t i = 0; i < n; i++)
			st16(d + 2 * i, cais_f32_to_bf16(src[i] * mul));
		break;
	case CAIS_FLOAT16:
		for (size_t i = 0; i < n; i++)
			st16(d + 2 * i, cais_f32_to_f16(src[i] * mul));
		break;
	default:
		break;
	}
}

static inline void
reduce_f32_tail(float *acc, const float *in, size_t i, size_t n, enum cais_redop op)
{
	switch (op) {
	case CAIS_OP_SUM:
	case CAIS_OP_AVG:
		for (; i < n; i++)
			acc[i] = acc[i] + in[i];
		break;
	case CAIS_OP_MAX:
		for (; i < n; i++)
			acc[i] = max_f32(acc[i], in[i]);
		break;
	case CAIS_OP_MIN:
		for (; i < n; i++)
			acc[i] = min_f32(acc[i], in[i]);
		break;
	default:
		break;
	}
}

static inline void
reduce_i32_tail(int32_t *acc, const int32_t *in, size_t i, size_t n, enum cais_redop op)
{
	switch (op) {
	case CAIS_OP_SUM:
	case CAIS_OP_AVG:
		for (; i < n; i++)
			acc[i] = add_sat(acc[i], in[i]);
		break;
	case CAIS_OP_MAX:
		for (; i < n; i++)
			acc[i] = in[i] > acc[i] ? in[i] : acc[i];
		break;
	case CAIS_OP_MIN:
		for (; i < n; i++)
			acc[i] = in[i] < acc[i] ? in[i] : acc[i];
		break;
	default:
		break;
	}
}

static void
scalar_reduce_f32(float *acc, const float *in, size_t n, enum cais_redop op)
{
	reduce_f32_tail(acc, in, 0, n, op);
}

static void
scalar_reduce_i32(int32_t *acc, const int32_t *in, size_t n, enum cais_redop op)
{
	reduce_i32_tail(acc, in, 0, n, op);
}

/* ------------------------------------------------------------- BLOCK16 */

#define B16 CAIS_B16_BLOCK

/* 2^k in fp32, for -126 <= k <= 127. */
static inline float
pow2f(int k)
{
	return u2f((uint32_t)(k + 127) << 23);
}

/* A block's exponent from its largest |x| (finite, below 2^55): |x| / 2^e < 2^15. */
static inline unsigned int
b16_exponent(float max_abs)
{
	if (!(max_abs >= 0x1p15f))
		return 0;
	return ((f2u(max_abs) >> 23) & 0xFFu) - 127u - 14u;
}

/* m from x / 2^e (t): rounded as asked, clamped to the symmetric range. */
static inline int32_t
b16_round(float t, float u, bool nearest)
{
	float r;

	if (nearest) {
		r = round_even(t);
	} else {
		r = round_down(t);
		if (u < t - r)
			r += 1.0f;
	}
	if (r > (float)CAIS_B16_MMAX)
		return CAIS_B16_MMAX;
	if (r < (float)-CAIS_B16_MMAX)
		return -CAIS_B16_MMAX;
	return (int32_t)r;
}

/* Zero the exponent area's padding (after the exponents of n elements). */
static inline void
b16_pad(uint8_t *d, size_t n)
{
	for (size_t b = (n + B16 - 1) / B16; b < cais_b16_exp_bytes((uint32_t)n); b++)
		d[b] = 0;
}

/* Encode the blocks from element i (a multiple of B16) to n. */
static inline size_t
b16_encode_tail(uint8_t *d, const uint8_t *s, size_t i, size_t n, enum cais_datatype dt,
		float scale, bool nearest, struct cais_rng *rng)
{
	const size_t esz = float_size(dt);
	uint8_t *mant = d + cais_b16_exp_bytes((uint32_t)n);
	float u[B16] = {0}, y[B16];
	size_t sat = 0;

	for (; i < n; i += B16) {
		size_t m = n - i < B16 ? n - i : B16;
		float max_abs = 0, f;
		unsigned int e;

		if (!nearest)
			for (size_t k = 0; k < m; k += QUANT_BLOCK)
				rng_block(rng, u + k);
		for (size_t k = 0; k < m; k++) {
			float a;

			y[k] = load_elem(s + (i + k) * esz, dt) * scale;
			if (y[k] != y[k])
				y[k] = 0.0f;
			a = fabsf(y[k]);
			max_abs = a > max_abs ? a : max_abs;
		}
		if (!(max_abs < 0x1p55f)) {
			sat += m;
			d[i / B16] = 0;
			memset(mant + 2 * i, 0, 2 * m);
			continue;
		}
		e = b16_exponent(max_abs);
		f = pow2f(-(int)e);
		d[i / B16] = (uint8_t)e;
		for (size_t k = 0; k < m; k++)
			st16(mant + 2 * (i + k),
			     to_be16((uint16_t)b16_round(y[k] * f, u[k], nearest)));
	}
	return sat;
}

/* Decode elements [i, n) of a BLOCK16 payload of n. */
static inline void
b16_decode_tail(uint8_t *d, const uint8_t *s, size_t i, size_t n, enum cais_datatype dt,
		float inv)
{
	const size_t esz = float_size(dt);
	const uint8_t *mant = s + cais_b16_exp_bytes((uint32_t)n);

	for (; i < n; i++) {
		unsigned int e = s[i / B16] < CAIS_B16_EMAX ? s[i / B16] : CAIS_B16_EMAX;
		int16_t m = (int16_t)to_be16(ld16(mant + 2 * i));

		store_elem(d + i * esz, (float)m * (inv * pow2f((int)e)), dt);
	}
}

static size_t
scalar_encode_b16(void *dst, const void *src, size_t n, enum cais_datatype dt, float scale,
		  bool nearest, struct cais_rng *rng)
{
	if (float_size(dt) == 0)
		return n;
	if (rng == NULL)
		nearest = true;
	b16_pad(dst, n);
	switch (dt) {
	case CAIS_FLOAT32:
		return b16_encode_tail(dst, src, 0, n, CAIS_FLOAT32, scale, nearest, rng);
	case CAIS_BFLOAT16:
		return b16_encode_tail(dst, src, 0, n, CAIS_BFLOAT16, scale, nearest, rng);
	default:
		return b16_encode_tail(dst, src, 0, n, CAIS_FLOAT16, scale, nearest, rng);
	}
}

static void
scalar_decode_b16(void *dst, const void *src, size_t n, enum cais_datatype dt, float inv_scale)
{
	switch (dt) {
	case CAIS_FLOAT32:
		b16_decode_tail(dst, src, 0, n, CAIS_FLOAT32, inv_scale);
		break;
	case CAIS_BFLOAT16:
		b16_decode_tail(dst, src, 0, n, CAIS_BFLOAT16, inv_scale);
		break;
	case CAIS_FLOAT16:
		b16_decode_tail(dst, src, 0, n, CAIS_FLOAT16, inv_scale);
		break;
	default:
		break;
	}
}

const struct cais_quant_ops cais_quant_scalar = {
    .name = "scalar",
    .encode = scalar_encode,
    .decode = scalar_decode,
    .to_f32 = scalar_to_f32,
    .from_f32 = scalar_from_f32,
    .reduce_f32 = scalar_reduce_f32,
    .reduce_i32 = scalar_reduce_i32,
    .encode_b16 = scalar_encode_b16,
    .decode_b16 = scalar_decode_b16,
};

/* ------------------------------------------------------------ AVX2 + F16C */

#ifdef QUANT_X86

#define AVX2	    __attribute__((target("avx2,f16c")))
#define AVX2_INLINE static inline __attribute__((target("avx2,f16c"), always_inline))

AVX2_INLINE __m256i
v_bswap32(__m256i v)
{
	const __m256i m = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3,
					   2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
	return _mm256_shuffle_epi8(v, m);
}

/* 8 elements of dt at p, as fp32. */
AVX2_INLINE __m256
v_load(const uint8_t *p, enum cais_datatype dt)
{
	switch (dt) {
	case CAIS_BFLOAT16: {
		__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));

		return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
	}
	case CAIS_FLOAT16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
	default:
		return _mm256_loadu_ps((const float *)p);
	}
}

/* 8 fp32 -> 8 bf16 as cais_f32_to_bf16(), in the low halves of 32-bit lanes;
 * nan: whether f may hold NaNs. */
AVX2_INLINE __m256i
v_bf16_round(__m256 f, bool nan)
{
	__m256i u = _mm256_castps_si256(f);
	__m256i hi = _mm256_srli_epi32(u, 16);
	__m256i r = _mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF));

	r = _mm256_srli_epi32(_mm256_add_epi32(r, _mm256_and_si256(hi, _mm256_set1_epi32(1))), 16);
	if (nan) {
		__m256i qnan = _mm256_or_si256(_mm256_and_si256(hi, _mm256_set1_epi32(0x8000)),
					       _mm256_set1_epi32(0x7FC0));
		__m256i isnan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));

		r = _mm256_blendv_epi8(r, qnan, isnan);
	}
	return r;
}

/* Store 16 fp32 (a, then b) at p as dt. */
AVX2_INLINE void
v_store16(uint8_t *p, __m256 a, __m256 b, enum cais_datatype dt, bool nan)
{
	switch (dt) {
	case CAIS_BFLOAT16: {
		/* packs within 128-bit lanes: a0-3 b0-3 a4-7 b4-7; then reorder */
		__m256i r = _mm256_packus_epi32(v_bf16_round(a, nan), v_bf16_round(b, nan));

		_mm256_storeu_si256((__m256i *)p,
				    _mm256_permute4x64_epi64(r, _MM_SHUFFLE(3, 1, 2, 0)));
		break;
	}
	case CAIS_FLOAT16:
		_mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
		_mm_storeu_si128((__m128i *)(p + 16),
				 _mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT));
		break;
	default:
		_mm256_storeu_ps((float *)p, a);
		_mm256_storeu_ps((float *)(p + 32), b);
		break;
	}
}

/*
 * Rounded fp32 (integral, no NaN) -> saturated int32, plus 1 where up is -1,
 * big-endian, at p; the lanes that saturated add 1 to cnt. Out of range
 * converts to INT32_MIN on either side, as does -2^31 itself: all count, and
 * the positive ones become INT32_MIN ^ -1 = INT32_MAX. up is 0 there (an x
 * that large is integral).
 */
AVX2_INLINE void
v_fix_store(uint8_t *p, __m256 r, __m256i up, __m256i *cnt)
{
	__m256i q = _mm256_cvttps_epi32(r);
	__m256i sat = _mm256_cmpeq_epi32(q, _mm256_set1_epi32(INT32_MIN));
	__m256i neg = _mm256_srai_epi32(_mm256_castps_si256(r), 31);

	q = _mm256_xor_si256(q, _mm256_andnot_si256(neg, sat));
	_mm256_storeu_si256((__m256i *)p, v_bswap32(_mm256_sub_epi32(q, up)));
	*cnt = _mm256_sub_epi32(*cnt, sat);
}

/* Lanes of cnt count at most one per 8 elements: add them up at least
 * every 2^32 x 8 elements. */
#define QUANT_PIECE ((size_t)1 << 32)

AVX2_INLINE size_t
v_sum_counts(__m256i cnt)
{
	uint32_t c[8];
	size_t sum = 0;

	_mm256_storeu_si256((__m256i *)c, cnt);
	for (int k = 0; k < 8; k++)
		sum += c[k];
	return sum;
}

/* x x scale with NaN -> 0. */
AVX2_INLINE __m256
v_scaled(const uint8_t *p, enum cais_datatype dt, __m256 scale)
{
	__m256 x = _mm256_mul_ps(v_load(p, dt), scale);

	return _mm256_and_ps(x, _mm256_cmp_ps(x, x, _CMP_ORD_Q));
}

AVX2_INLINE size_t
v_encode_nearest(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, float scale)
{
	const size_t esz = float_size(dt);
	const __m256 sc = _mm256_set1_ps(scale);
	size_t i = 0, sat = 0;

	while (i + 8 <= n) {
		size_t end = n - i > QUANT_PIECE ? i + QUANT_PIECE : n;
		__m256i cnt = _mm256_setzero_si256();

		for (; i + 8 <= end; i += 8) {
			__m256 x = v_scaled(s + i * esz, dt, sc);

			v_fix_store(
			    d + i * 4,
			    _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
			    _mm256_setzero_si256(), &cnt);
		}
		sat += v_sum_counts(cnt);
	}
	for (; i < n; i++) {
		float x = load_elem(s + i * esz, dt) * scale;

		st32(d + i * 4, to_be32((uint32_t)fix_nearest(x, &sat)));
	}
	return sat;
}

/* One xorshift128+ step on 4 streams: a = s[.][0], b = s[.][1]. */
AVX2_INLINE __m256i
v_xorshift(__m256i *a, __m256i *b)
{
	__m256i s1 = *a;
	const __m256i s0 = *b;
	__m256i r = _mm256_add_epi64(s0, s1);

	*a = s0;
	s1 = _mm256_xor_si256(s1, _mm256_slli_epi64(s1, 23));
	*b = _mm256_xor_si256(_mm256_xor_si256(s1, s0), _mm256_xor_si256(_mm256_srli_epi64(s1, 18),
									 _mm256_srli_epi64(s0, 5)));
	return r;
}

/* 8 uniform numbers in [0, 1), the top 24 bits of each 32-bit half. */
AVX2_INLINE __m256
v_uniform(__m256i r)
{
	return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(r, 8)), _mm256_set1_ps(0x1p-24f));
}

/* The 4 xorshift128+ streams of two registers, loaded from and stored to rng. */
AVX2_INLINE void
v_rng_load(const struct cais_rng *rng, __m256i st[4])
{
	const uint64_t(*s)[2] = rng->s;

	st[0] = _mm256_setr_epi64x((long long)s[0][0], (long long)s[1][0], (long long)s[2][0],
				   (long long)s[3][0]);
	st[1] = _mm256_setr_epi64x((long long)s[0][1], (long long)s[1][1], (long long)s[2][1],
				   (long long)s[3][1]);
	st[2] = _mm256_setr_epi64x((long long)s[4][0], (long long)s[5][0], (long long)s[6][0],
				   (long long)s[7][0]);
	st[3] = _mm256_setr_epi64x((long long)s[4][1], (long long)s[5][1], (long long)s[6][1],
				   (long long)s[7][1]);
}

AVX2_INLINE void
v_rng_store(struct cais_rng *rng, const __m256i st[4])
{
	uint64_t t[4][4];

	for (int k = 0; k < 4; k++)
		_mm256_storeu_si256((__m256i *)t[k], st[k]);
	for (int j = 0; j < 4; j++) {
		rng->s[j][0] = t[0][j];
		rng->s[j][1] = t[1][j];
		rng->s[4 + j][0] = t[2][j];
		rng->s[4 + j][1] = t[3][j];
	}
}

/* floor(x), and -1 where u < x - floor(x) (rounds up), at p. */
AVX2_INLINE void
v_stochastic_store(uint8_t *p, __m256 x, __m256 u, __m256i *cnt)
{
	__m256 f = _mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
	__m256 up = _mm256_cmp_ps(u, _mm256_sub_ps(x, f), _CMP_LT_OQ);

	v_fix_store(p, f, _mm256_castps_si256(up), cnt);
}

AVX2_INLINE size_t
v_encode_stochastic(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, float scale,
		    struct cais_rng *rng)
{
	const size_t esz = float_size(dt);
	const __m256 sc = _mm256_set1_ps(scale);
	__m256i st[4];
	size_t i = 0, sat = 0;

	v_rng_load(rng, st);
	while (i + QUANT_BLOCK <= n) {
		size_t end = n - i > QUANT_PIECE ? i + QUANT_PIECE : n;
		__m256i cnt = _mm256_setzero_si256();

		for (; i + QUANT_BLOCK <= end; i += QUANT_BLOCK) {
			__m256 ua = v_uniform(v_xorshift(&st[0], &st[1]));
			__m256 ub = v_uniform(v_xorshift(&st[2], &st[3]));
			__m256 xa = v_scaled(s + i * esz, dt, sc);
			__m256 xb = v_scaled(s + (i + 8) * esz, dt, sc);

			v_stochastic_store(d + i * 4, xa, ua, &cnt);
			v_stochastic_store(d + (i + 8) * 4, xb, ub, &cnt);
		}
		sat += v_sum_counts(cnt);
	}
	v_rng_store(rng, st);
	return sat + encode_tail(d, s, i, n, dt, scale, false, rng);
}

AVX2_INLINE void
v_bswap(uint8_t *d, const uint8_t *s, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(s + i * 4));

		_mm256_storeu_si256((__m256i *)(d + i * 4), v_bswap32(q));
	}
	bswap_tail(d, s, i, n);
}

static AVX2 size_t
avx2_encode(void *dst, const void *src, size_t n, enum cais_datatype dt, float scale, bool nearest,
	    struct cais_rng *rng)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	if (rng == NULL)
		nearest = true;
	switch (dt) {
	case CAIS_INT32:
		v_bswap(d, s, n);
		return 0;
	case CAIS_FLOAT32:
		return nearest ? v_encode_nearest(d, s, n, CAIS_FLOAT32, scale)
			       : v_encode_stochastic(d, s, n, CAIS_FLOAT32, scale, rng);
	case CAIS_BFLOAT16:
		return nearest ? v_encode_nearest(d, s, n, CAIS_BFLOAT16, scale)
			       : v_encode_stochastic(d, s, n, CAIS_BFLOAT16, scale, rng);
	case CAIS_FLOAT16:
		return nearest ? v_encode_nearest(d, s, n, CAIS_FLOAT16, scale)
			       : v_encode_stochastic(d, s, n, CAIS_FLOAT16, scale, rng);
	default:
		return 0;
	}
}

/* 8 big-endian int32 at p times f: in double, or (pow2) in fp32. */
AVX2_INLINE __m256
v_dec8(const uint8_t *p, __m256d f, __m256 f32, bool pow2)
{
	__m256i q = v_bswap32(_mm256_loadu_si256((const __m256i *)p));

	if (pow2)
		return _mm256_mul_ps(_mm256_cvtepi32_ps(q), f32);
	__m256d lo = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(q)), f);
	__m256d hi = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(q, 1)), f);

	return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

/*
 * pow2: inv is +-2^k, where fl32(q) x inv equals fl32(q x inv), so the
 * cheaper fp32 product gives the same bits: scaling by 2^k commutes with the
 * rounding to 24 bits, overflow included; a subnormal result needs
 * |q| < 2^24, which fl32(q) holds exactly. nan: whether the results may be
 * NaN (inv not finite).
 */
AVX2_INLINE void
v_decode(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, double inv, bool pow2,
	 bool nan)
{
	const size_t esz = float_size(dt);
	const __m256d f = _mm256_set1_pd(inv);
	const __m256 f32 = _mm256_set1_ps((float)inv);
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		v_store16(d + i * esz, v_dec8(s + i * 4, f, f32, pow2),
			  v_dec8(s + (i + 8) * 4, f, f32, pow2), dt, nan);
	decode_tail(d, s, i, n, dt, inv);
}

/*
 * q / n toward zero through double: exact for every n, as the quotient's
 * error (|q / n| x 2^-53 <= 2^-22 / n) is below the distance from a
 * fraction to the next integer (>= 1 / n).
 */
AVX2_INLINE void
v_decode_i32_avg(uint8_t *d, const uint8_t *s, size_t n, unsigned int avg_n)
{
	const __m256d dn = _mm256_set1_pd((double)avg_n);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i q = v_bswap32(_mm256_loadu_si256((const __m256i *)(s + i * 4)));
		__m256d lo = _mm256_div_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(q)), dn);
		__m256d hi = _mm256_div_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(q, 1)), dn);

		_mm256_storeu_si256(
		    (__m256i *)(d + i * 4),
		    _mm256_set_m128i(_mm256_cvttpd_epi32(hi), _mm256_cvttpd_epi32(lo)));
	}
	decode_i32_tail(d, s, i, n, avg_n);
}

static AVX2 void
avx2_decode(void *dst, const void *src, size_t n, enum cais_datatype dt, float inv_scale,
	    unsigned int avg_n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	if (dt == CAIS_INT32) {
		if (avg_n <= 1)
			v_bswap(d, s, n);
		else
			v_decode_i32_avg(d, s, n, avg_n);
		return;
	}
	double inv = decode_factor(inv_scale);
	int k;
	bool pow2 = fabs(frexp(inv, &k)) == 0.5;

	/* one instance of the loop per (type, kind of factor) */
#define V_DECODE(DT)                                                                               \
	do {                                                                                       \
		if (pow2)                                                                          \
			v_decode(d, s, n, DT, inv, true, false);                                   \
		else if (isfinite(inv))                                                            \
			v_decode(d, s, n, DT, inv, false, false);                                  \
		else                                                                               \
			v_decode(d, s, n, DT, inv, false, true);                                   \
	} while (0)
	switch (dt) {
	case CAIS_FLOAT32:
		V_DECODE(CAIS_FLOAT32);
		break;
	case CAIS_BFLOAT16:
		V_DECODE(CAIS_BFLOAT16);
		break;
	case CAIS_FLOAT16:
		V_DECODE(CAIS_FLOAT16);
		break;
	default:
		break;
	}
#undef V_DECODE
}

static AVX2 void
avx2_to_f32(float *dst, const void *src, size_t n, enum cais_datatype dt)
{
	const uint8_t *s = src;
	size_t i = 0;

	switch (dt) {
	case CAIS_FLOAT32:
		memmove(dst, src, n * sizeof(float));
		return;
	case CAIS_BFLOAT16:
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(dst + i, v_load(s + 2 * i, CAIS_BFLOAT16));
		for (; i < n; i++)
			dst[i] = cais_bf16_to_f32(ld16(s + 2 * i));
		return;
	case CAIS_FLOAT16:
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(dst + i, v_load(s + 2 * i, CAIS_FLOAT16));
		for (; i < n; i++)
			dst[i] = cais_f16_to_f32(ld16(s + 2 * i));
		return;
	default:
		return;
	}
}

AVX2_INLINE void
v_from_f32(uint8_t *d, const float *src, size_t n, enum cais_datatype dt, float mul)
{
	const size_t esz = float_size(dt);
	const __m256 m = _mm256_set1_ps(mul);
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		v_store16(d + i * esz, _mm256_mul_ps(_mm256_loadu_ps(src + i), m),
			  _mm256_mul_ps(_mm256_loadu_ps(src + i + 8), m), dt, true);
	for (; i < n; i++)
		store_elem(d + i * esz, src[i] * mul, dt);
}

static AVX2 void
avx2_from_f32(void *dst, const float *src, size_t n, enum cais_datatype dt, float mul)
{
	switch (dt) {
	case CAIS_FLOAT32:
		v_from_f32(dst, src, n, CAIS_FLOAT32, mul);
		break;
	case CAIS_BFLOAT16:
		v_from_f32(dst, src, n, CAIS_BFLOAT16, mul);
		break;
	case CAIS_FLOAT16:
		v_from_f32(dst, src, n, CAIS_FLOAT16, mul);
		break;
	default:
		break;
	}
}

static AVX2 void
avx2_reduce_f32(float *acc, const float *in, size_t n, enum cais_redop op)
{
	size_t i = 0;

	switch (op) {
	case CAIS_OP_SUM:
	case CAIS_OP_AVG:
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i),
								_mm256_loadu_ps(in + i)));
		break;
	case CAIS_OP_MAX:
	case CAIS_OP_MIN:
		for (; i + 8 <= n; i += 8) {
			__m256 a = _mm256_loadu_ps(acc + i), b = _mm256_loadu_ps(in + i);
			__m256 take = op == CAIS_OP_MAX ? _mm256_cmp_ps(b, a, _CMP_GT_OQ)
							: _mm256_cmp_ps(b, a, _CMP_LT_OQ);

			take = _mm256_or_ps(take, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
			_mm256_storeu_ps(acc + i, _mm256_blendv_ps(a, b, take));
		}
		break;
	default:
		return;
	}
	reduce_f32_tail(acc, in, i, n, op);
}

static AVX2 void
avx2_reduce_i32(int32_t *acc, const int32_t *in, size_t n, enum cais_redop op)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(acc + i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(in + i));
		__m256i r;

		switch (op) {
		case CAIS_OP_SUM:
		case CAIS_OP_AVG: {
			r = _mm256_add_epi32(a, b);
			/* Overflow: the sign of r differs from both a's and b's. */
			__m256i ovf =
			    _mm256_and_si256(_mm256_xor_si256(r, a), _mm256_xor_si256(r, b));
			__m256i lim = _mm256_xor_si256(_mm256_srai_epi32(a, 31),
						       _mm256_set1_epi32(INT32_MAX));

			r = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r),
								 _mm256_castsi256_ps(lim),
								 _mm256_castsi256_ps(ovf)));
			break;
		}
		case CAIS_OP_MAX:
			r = _mm256_max_epi32(a, b);
			break;
		case CAIS_OP_MIN:
			r = _mm256_min_epi32(a, b);
			break;
		default:
			return;
		}
		_mm256_storeu_si256((__m256i *)(acc + i), r);
	}
	reduce_i32_tail(acc, in, i, n, op);
}

/* ---- BLOCK16 ---- */

/* The largest of the 8 lanes of m, in every lane. */
AVX2_INLINE __m256
v_hmax(__m256 m)
{
	m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
	m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
	return _mm256_max_ps(m, _mm256_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
}

AVX2_INLINE __m256
v_abs(__m256 x)
{
	return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
}

/* b16_round() on 8 lanes, as int32. */
AVX2_INLINE __m256i
v_b16_round(__m256 t, __m256 u, bool nearest)
{
	__m256i q;

	if (nearest) {
		q = _mm256_cvttps_epi32(
		    _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	} else {
		__m256 f = _mm256_round_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
		__m256 up = _mm256_cmp_ps(u, _mm256_sub_ps(t, f), _CMP_LT_OQ);

		q = _mm256_sub_epi32(_mm256_cvttps_epi32(f), _mm256_castps_si256(up));
	}
	q = _mm256_max_epi32(q, _mm256_set1_epi32(-CAIS_B16_MMAX));
	return _mm256_min_epi32(q, _mm256_set1_epi32(CAIS_B16_MMAX));
}

/* 16 int32 in -32767..32767 (a, then b) as big-endian int16 at p. */
AVX2_INLINE void
v_b16_store(uint8_t *p, __m256i a, __m256i b)
{
	const __m256i bswap = _mm256_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14,
					       1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
	/* packs within 128-bit lanes: a0-3 b0-3 a4-7 b4-7; then reorder */
	__m256i r = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));

	_mm256_storeu_si256((__m256i *)p, _mm256_shuffle_epi8(r, bswap));
}

AVX2_INLINE size_t
v_b16_encode(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, float scale,
	     bool nearest, struct cais_rng *rng)
{
	const size_t esz = float_size(dt);
	const __m256 sc = _mm256_set1_ps(scale);
	uint8_t *mant = d + cais_b16_exp_bytes((uint32_t)n);
	__m256i st[4];
	size_t i = 0, sat = 0;

	if (!nearest)
		v_rng_load(rng, st);
	for (; i + B16 <= n; i += B16) {
		__m256 x[4], u[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
				     _mm256_setzero_ps()};
		__m256 mx = _mm256_setzero_ps(), f;
		float max_abs;
		unsigned int e;

		if (!nearest)
			for (int k = 0; k < 4; k += 2) { /* a random block per 16 elements */
				u[k] = v_uniform(v_xorshift(&st[0], &st[1]));
				u[k + 1] = v_uniform(v_xorshift(&st[2], &st[3]));
			}
		for (int k = 0; k < 4; k++) {
			x[k] = v_scaled(s + (i + 8 * k) * esz, dt, sc);
			mx = _mm256_max_ps(mx, v_abs(x[k]));
		}
		max_abs = _mm256_cvtss_f32(v_hmax(mx));
		if (!(max_abs < 0x1p55f)) {
			sat += B16;
			d[i / B16] = 0;
			memset(mant + 2 * i, 0, 2 * B16);
			continue;
		}
		e = b16_exponent(max_abs);
		d[i / B16] = (uint8_t)e;
		f = _mm256_set1_ps(pow2f(-(int)e));
		v_b16_store(mant + 2 * i, v_b16_round(_mm256_mul_ps(x[0], f), u[0], nearest),
			    v_b16_round(_mm256_mul_ps(x[1], f), u[1], nearest));
		v_b16_store(mant + 2 * i + 32, v_b16_round(_mm256_mul_ps(x[2], f), u[2], nearest),
			    v_b16_round(_mm256_mul_ps(x[3], f), u[3], nearest));
	}
	if (!nearest)
		v_rng_store(rng, st);
	return sat + b16_encode_tail(d, s, i, n, dt, scale, nearest, rng);
}

static AVX2 size_t
avx2_encode_b16(void *dst, const void *src, size_t n, enum cais_datatype dt, float scale,
		bool nearest, struct cais_rng *rng)
{
	if (float_size(dt) == 0)
		return n;
	if (rng == NULL)
		nearest = true;
	b16_pad(dst, n);
	/* one instance of the loop per (type, rounding) */
#define V_B16(DT)                                                                                  \
	(nearest ? v_b16_encode(dst, src, n, DT, scale, true, rng)                                 \
		 : v_b16_encode(dst, src, n, DT, scale, false, rng))
	switch (dt) {
	case CAIS_FLOAT32:
		return V_B16(CAIS_FLOAT32);
	case CAIS_BFLOAT16:
		return V_B16(CAIS_BFLOAT16);
	default:
		return V_B16(CAIS_FLOAT16);
	}
#undef V_B16
}

/* 16 big-endian int16 at p, as two registers of 8 fp32 times f. */
AVX2_INLINE void
v_b16_load(const uint8_t *p, __m256 f, __m256 *a, __m256 *b)
{
	const __m256i bswap = _mm256_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14,
					       1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
	__m256i m = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)p), bswap);

	*a = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(m))), f);
	*b = _mm256_mul_ps(
	    _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(m, 1))), f);
}

AVX2_INLINE void
v_b16_decode(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, float inv)
{
	const size_t esz = float_size(dt);
	const uint8_t *mant = s + cais_b16_exp_bytes((uint32_t)n);
	size_t i = 0;

	for (; i + B16 <= n; i += B16) {
		unsigned int e = s[i / B16] < CAIS_B16_EMAX ? s[i / B16] : CAIS_B16_EMAX;
		__m256 f = _mm256_set1_ps(inv * pow2f((int)e)), a, b;

		v_b16_load(mant + 2 * i, f, &a, &b);
		v_store16(d + i * esz, a, b, dt, false);
		v_b16_load(mant + 2 * i + 32, f, &a, &b);
		v_store16(d + (i + 16) * esz, a, b, dt, false);
	}
	b16_decode_tail(d, s, i, n, dt, inv);
}

static AVX2 void
avx2_decode_b16(void *dst, const void *src, size_t n, enum cais_datatype dt, float inv_scale)
{
	if (inv_scale != inv_scale) { /* a NaN factor: bf16's NaN rule is scalar's */
		scalar_decode_b16(dst, src, n, dt, inv_scale);
		return;
	}
	switch (dt) {
	case CAIS_FLOAT32:
		v_b16_decode(dst, src, n, CAIS_FLOAT32, inv_scale);
		break;
	case CAIS_BFLOAT16:
		v_b16_decode(dst, src, n, CAIS_BFLOAT16, inv_scale);
		break;
	case CAIS_FLOAT16:
		v_b16_decode(dst, src, n, CAIS_FLOAT16, inv_scale);
		break;
	default:
		break;
	}
}

static const struct cais_quant_ops quant_avx2 = {
    .name = "avx2",
    .encode = avx2_encode,
    .decode = avx2_decode,
    .to_f32 = avx2_to_f32,
    .from_f32 = avx2_from_f32,
    .reduce_f32 = avx2_reduce_f32,
    .reduce_i32 = avx2_reduce_i32,
    .encode_b16 = avx2_encode_b16,
    .decode_b16 = avx2_decode_b16,
};

const struct cais_quant_ops *
cais_quant_avx2(void)
{
	unsigned int a, b, c, d;

	/* avx2 includes the OS's consent to the YMM state; F16C from CPUID
	 * itself, as not every compiler knows it by name. */
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C))
		return NULL;
	return &quant_avx2;
}

/* ---------- AVX-512 encode, FIXED32 decode and BLOCK16 (F, BW, DQ, VL) */

/*
 * The encoders once more on 16 lanes: one block of the random stream is one
 * xorshift128+ step of all 8 streams in one register (lane 2j + h of the
 * 32-bit view is the half h of stream j: the block's element order), so the
 * results are those of the scalar path bit for bit. BLOCK16 encode and
 * decode, and FIXED32 decode of the float types, as well (below). The rest
 * (int32, the conversions, the reductions) is AVX2's. Worth it where
 * 512-bit operations run at full rate (AMD Zen 5, Intel since Ice Lake); the AVX2 encoders
 * spend about 40% of their time in the random numbers, 12 vector operations
 * per 8 of them.
 */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c")))
#define AVX512_INLINE                                                                              \
	static inline                                                                              \
	    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c"), always_inline))

/* 16 elements of dt at p, as fp32, times scale, NaN -> 0 (via the mask). */
AVX512_INLINE __m512
w_scaled(const uint8_t *p, enum cais_datatype dt, __m512 scale, __mmask16 *ord)
{
	__m512 v;

	switch (dt) {
	case CAIS_BFLOAT16:
		v = _mm512_castsi512_ps(_mm512_slli_epi32(
		    _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
		break;
	case CAIS_FLOAT16:
		v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
		break;
	default:
		v = _mm512_loadu_ps((const float *)p);
		break;
	}
	v = _mm512_mul_ps(v, scale);
	*ord = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
	return v;
}

/*
 * f (integral, 0 where not ord) -> saturated int32, plus 1 in the lanes of
 * up, big-endian, at p; returns the lanes that saturated. As v_fix_store():
 * out of range (and -2^31) converts to INT32_MIN, the positive ones become
 * INT32_MAX; up is never set there.
 */
AVX512_INLINE __mmask16
w_fix_store(uint8_t *p, __m512 f, __mmask16 up)
{
	const __m512i bswap = _mm512_broadcast_i32x4(
	    _mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12));
	__m512i q = _mm512_cvttps_epi32(f);
	__mmask16 sat = _mm512_cmpeq_epi32_mask(q, _mm512_set1_epi32(INT32_MIN));
	__mmask16 pos = sat & ~_mm512_movepi32_mask(_mm512_castps_si512(f));

	q = _mm512_mask_mov_epi32(q, pos, _mm512_set1_epi32(INT32_MAX));
	q = _mm512_mask_sub_epi32(q, up, q, _mm512_set1_epi32(-1));
	_mm512_storeu_si512((void *)p, _mm512_shuffle_epi8(q, bswap));
	return sat;
}

AVX512_INLINE size_t
w_encode_nearest(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, float scale)
{
	const size_t esz = float_size(dt);
	const __m512 sc = _mm512_set1_ps(scale);
	size_t i = 0, sat = 0;

	for (; i + 16 <= n; i += 16) {
		__mmask16 ord;
		__m512 x = w_scaled(s + i * esz, dt, sc, &ord);
		__m512 r = _mm512_maskz_roundscale_ps(
		    ord, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);

		sat += (size_t)__builtin_popcount(w_fix_store(d + i * 4, r, 0));
	}
	for (; i < n; i++) {
		float x = load_elem(s + i * esz, dt) * scale;

		st32(d + i * 4, to_be32((uint32_t)fix_nearest(x, &sat)));
	}
	return sat;
}

AVX512_INLINE size_t
w_encode_stochastic(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, float scale,
		    struct cais_rng *rng)
{
	const size_t esz = float_size(dt);
	const __m512 sc = _mm512_set1_ps(scale);
	const __m512 k24 = _mm512_set1_ps(0x1p-24f);
	uint64_t(*st)[2] = rng->s;
	__m512i a = _mm512_setr_epi64((long long)st[0][0], (long long)st[1][0], (long long)st[2][0],
				      (long long)st[3][0], (long long)st[4][0], (long long)st[5][0],
				      (long long)st[6][0], (long long)st[7][0]);
	__m512i b = _mm512_setr_epi64((long long)st[0][1], (long long)st[1][1], (long long)st[2][1],
				      (long long)st[3][1], (long long)st[4][1], (long long)st[5][1],
				      (long long)st[6][1], (long long)st[7][1]);
	size_t i = 0, sat = 0;

	for (; i + QUANT_BLOCK <= n; i += QUANT_BLOCK) {
		/* xorshift128+ on the 8 streams */
		__m512i s1 = a;
		const __m512i s0 = b;
		__m512i r = _mm512_add_epi64(s0, s1);

		a = s0;
		s1 = _mm512_xor_si512(s1, _mm512_slli_epi64(s1, 23));
		b = _mm512_ternarylogic_epi64(s1, s0, _mm512_srli_epi64(s1, 18), 0x96);
		b = _mm512_xor_si512(b, _mm512_srli_epi64(s0, 5));

		__m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(r, 8)), k24);
		__mmask16 ord;
		__m512 x = w_scaled(s + i * esz, dt, sc, &ord);
		__m512 f =
		    _mm512_maskz_roundscale_ps(ord, x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
		__mmask16 up = _mm512_mask_cmp_ps_mask(ord, u, _mm512_sub_ps(x, f), _CMP_LT_OQ);

		sat += (size_t)__builtin_popcount(w_fix_store(d + i * 4, f, up));
	}
	uint64_t ta[8], tb[8];

	_mm512_storeu_si512((void *)ta, a);
	_mm512_storeu_si512((void *)tb, b);
	for (int j = 0; j < 8; j++) {
		st[j][0] = ta[j];
		st[j][1] = tb[j];
	}
	return sat + encode_tail(d, s, i, n, dt, scale, false, rng);
}

static AVX512 size_t
avx512_encode(void *dst, const void *src, size_t n, enum cais_datatype dt, float scale,
	      bool nearest, struct cais_rng *rng)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	if (rng == NULL)
		nearest = true;
	switch (dt) {
	case CAIS_FLOAT32:
		return nearest ? w_encode_nearest(d, s, n, CAIS_FLOAT32, scale)
			       : w_encode_stochastic(d, s, n, CAIS_FLOAT32, scale, rng);
	case CAIS_BFLOAT16:
		return nearest ? w_encode_nearest(d, s, n, CAIS_BFLOAT16, scale)
			       : w_encode_stochastic(d, s, n, CAIS_BFLOAT16, scale, rng);
	case CAIS_FLOAT16:
		return nearest ? w_encode_nearest(d, s, n, CAIS_FLOAT16, scale)
			       : w_encode_stochastic(d, s, n, CAIS_FLOAT16, scale, rng);
	default:
		return avx2_encode(dst, src, n, dt, scale, nearest, rng);
	}
}

/* ---- BLOCK16 on 16 lanes ---- */

/*
 * A block of 32 elements is two registers; its random numbers are two steps
 * of the 8 streams (one per 16 elements, as the scalar path draws them).
 * The block's largest |x| is an unsigned maximum of the bit patterns of
 * |x|, so the exponent and the 2^55 check are integer compares on it (a
 * NaN's pattern is above 2^55's: such a block goes the slow way, which
 * zeroes its NaNs first, as the scalar path does). m is rounded as
 * b16_round() rounds, packed with signed saturation (which clamps +32768 to
 * 32767) and raised to -32767 where it was -32768: the same clamp. Only
 * fp32 operations whose results the scalar path computes too (x x scale,
 * x x 2^-e, t - floor(t)), so the same bits.
 */

/* One xorshift128+ step of the 8 streams: a = s[.][0], b = s[.][1]. */
AVX512_INLINE __m512i
w_xorshift(__m512i *a, __m512i *b)
{
	__m512i s1 = *a;
	const __m512i s0 = *b;
	__m512i r = _mm512_add_epi64(s0, s1);

	*a = s0;
	s1 = _mm512_xor_si512(s1, _mm512_slli_epi64(s1, 23));
	*b = _mm512_ternarylogic_epi64(s1, s0, _mm512_srli_epi64(s1, 18), 0x96);
	*b = _mm512_xor_si512(*b, _mm512_srli_epi64(s0, 5));
	return r;
}

AVX512_INLINE __m512
w_uniform(__m512i r)
{
	return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(r, 8)), _mm512_set1_ps(0x1p-24f));
}

/*
 * m of 16 lanes of t = x / 2^e as int32 (0 where not ord), not yet clamped:
 * b16_round() but the clamp. nan: whether t may hold NaNs (lanes not ord);
 * without, ord is all lanes and the conversion rounds by itself.
 */
AVX512_INLINE __m512i
w_b16_round(__m512 t, __m512 u, __mmask16 ord, bool nearest, bool nan)
{
	if (nearest)
		return nan ? _mm512_maskz_cvt_roundps_epi32(
				 ord, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
			   : _mm512_cvt_roundps_epi32(t, _MM_FROUND_TO_NEAREST_INT |
							     _MM_FROUND_NO_EXC);
	__m512 f =
	    nan ? _mm512_maskz_roundscale_ps(ord, t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
		: _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
	__mmask16 up = nan ? _mm512_mask_cmp_ps_mask(ord, u, _mm512_sub_ps(t, f), _CMP_LT_OQ)
			   : _mm512_cmp_ps_mask(u, _mm512_sub_ps(t, f), _CMP_LT_OQ);
	__m512i q = _mm512_cvttps_epi32(f);

	return _mm512_mask_sub_epi32(q, up, q, _mm512_set1_epi32(-1));
}

/* 32 int32 (a, then b; |m| <= 32768) as big-endian int16 in +-32767 at p. */
AVX512_INLINE void
w_b16_store(uint8_t *p, __m512i a, __m512i b)
{
	const __m512i bswap = _mm512_broadcast_i32x4(
	    _mm_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
	/* packs within 128-bit lanes: qwords a0-3 b0-3 a4-7 b4-7 ...; then reorder */
	__m512i r = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7),
					     _mm512_packs_epi32(a, b));

	r = _mm512_max_epi16(r, _mm512_set1_epi16(-CAIS_B16_MMAX));
	_mm512_storeu_si512((void *)p, _mm512_shuffle_epi8(r, bswap));
}

/* The largest of 16 unsigned lanes. */
AVX512_INLINE uint32_t
w_hmax_epu32(__m512i m)
{
	__m256i h = _mm256_max_epu32(_mm512_castsi512_si256(m), _mm512_extracti64x4_epi64(m, 1));
	__m128i q = _mm_max_epu32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));

	q = _mm_max_epu32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(1, 0, 3, 2)));
	q = _mm_max_epu32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(2, 3, 0, 1)));
	return (uint32_t)_mm_cvtsi128_si32(q);
}

/* The largest of each of two registers of 16 unsigned lanes: of a in *ma, of b in *mb. */
AVX512_INLINE void
w_hmax2_epu32(__m512i a, __m512i b, uint32_t *ma, uint32_t *mb)
{
	/* 128-bit lanes a0 a1 b0 b1 against a2 a3 b2 b3, then lane pairs, then within */
	__m512i m = _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
				     _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));

	m = _mm512_max_epu32(m, _mm512_shuffle_i32x4(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
	m = _mm512_max_epu32(m, _mm512_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
	m = _mm512_max_epu32(m, _mm512_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
	*ma = (uint32_t)_mm_cvtsi128_si32(_mm512_castsi512_si128(m));
	*mb = (uint32_t)_mm_cvtsi128_si32(_mm512_extracti32x4_epi32(m, 2));
}

/* The block's exponent (b16_exponent()) from the bits of its largest |x| (< 2^55). */
static inline unsigned int
w_b16_exp(uint32_t mx)
{
	return mx >= 0x47000000u ? (mx >> 23) - 141u : 0; /* 2^15 */
}

/*
 * One block of 32 at element i whose x (x0, x1: value x scale) may hold
 * NaNs or reach 2^55: the exponent and m with the NaN lanes as 0, or a block
 * of zeros. @return the elements not carried (0 or 32)
 */
AVX512_INLINE size_t
w_b16_block_slow(uint8_t *d, uint8_t *mant, size_t i, __m512 x0, __m512 x1, __m512 u0, __m512 u1,
		 bool nearest)
{
	const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF);
	__mmask16 o0 = _mm512_cmp_ps_mask(x0, x0, _CMP_ORD_Q);
	__mmask16 o1 = _mm512_cmp_ps_mask(x1, x1, _CMP_ORD_Q);
	__m512i a0 = _mm512_maskz_and_epi32(o0, _mm512_castps_si512(x0), absm);
	__m512i a1 = _mm512_maskz_and_epi32(o1, _mm512_castps_si512(x1), absm);
	uint32_t mx = w_hmax_epu32(_mm512_max_epu32(a0, a1)); /* |x| of the largest */

	if (mx >= 0x5B000000u) { /* 2^55 and up (inf) */
		d[i / B16] = 0;
		memset(mant + 2 * i, 0, 2 * B16);
		return B16;
	}
	unsigned int e = w_b16_exp(mx);
	__m512 f = _mm512_set1_ps(pow2f(-(int)e));

	d[i / B16] = (uint8_t)e;
	w_b16_store(mant + 2 * i, w_b16_round(_mm512_mul_ps(x0, f), u0, o0, nearest, true),
		    w_b16_round(_mm512_mul_ps(x1, f), u1, o1, nearest, true));
	return 0;
}

/* One block of 32 whose largest |x| is mx (no NaN, below 2^55). */
AVX512_INLINE void
w_b16_block(uint8_t *d, uint8_t *mant, size_t i, uint32_t mx, __m512 x0, __m512 x1, __m512 u0,
	    __m512 u1, bool nearest)
{
	unsigned int e = w_b16_exp(mx);
	__m512 f = _mm512_set1_ps(pow2f(-(int)e));

	d[i / B16] = (uint8_t)e;
	w_b16_store(mant + 2 * i, w_b16_round(_mm512_mul_ps(x0, f), u0, 0xFFFF, nearest, false),
		    w_b16_round(_mm512_mul_ps(x1, f), u1, 0xFFFF, nearest, false));
}

/* 16 elements of dt at p, as fp32, times scale (NaN kept). */
AVX512_INLINE __m512
w_load_scaled(const uint8_t *p, enum cais_datatype dt, __m512 scale)
{
	switch (dt) {
	case CAIS_BFLOAT16:
		return _mm512_mul_ps(
		    _mm512_castsi512_ps(_mm512_slli_epi32(
			_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16)),
		    scale);
	case CAIS_FLOAT16:
		return _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)),
				     scale);
	default:
		return _mm512_mul_ps(_mm512_loadu_ps((const float *)p), scale);
	}
}

/*
 * Two blocks per step: their largest |x| in one reduction, as bit patterns
 * (NaN lanes included: a NaN's bits are above 2^55's, so a block with a NaN
 * takes the slow path, which zeroes them, as one reaching 2^55 does).
 */
AVX512_INLINE size_t
w_b16_encode(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, float scale,
	     bool nearest, struct cais_rng *rng)
{
	const size_t esz = float_size(dt);
	const __m512 sc = _mm512_set1_ps(scale);
	const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF);
	uint8_t *mant = d + cais_b16_exp_bytes((uint32_t)n);
	uint64_t(*st)[2] = rng != NULL ? rng->s : NULL;
	__m512i ra = _mm512_setzero_si512(), rb = _mm512_setzero_si512();
	size_t i = 0, sat = 0;

	if (!nearest) {
		ra =
		    _mm512_setr_epi64((long long)st[0][0], (long long)st[1][0], (long long)st[2][0],
				      (long long)st[3][0], (long long)st[4][0], (long long)st[5][0],
				      (long long)st[6][0], (long long)st[7][0]);
		rb =
		    _mm512_setr_epi64((long long)st[0][1], (long long)st[1][1], (long long)st[2][1],
				      (long long)st[3][1], (long long)st[4][1], (long long)st[5][1],
				      (long long)st[6][1], (long long)st[7][1]);
	}
	for (; i + 2 * B16 <= n; i += 2 * B16) {
		/* (no arrays: the compiler keeps these in registers) */
		__m512 u0 = _mm512_setzero_ps(), u1 = u0, u2 = u0, u3 = u0;
		uint32_t ma, mb;

		if (!nearest) { /* a random block per 16 elements */
			u0 = w_uniform(w_xorshift(&ra, &rb));
			u1 = w_uniform(w_xorshift(&ra, &rb));
			u2 = w_uniform(w_xorshift(&ra, &rb));
			u3 = w_uniform(w_xorshift(&ra, &rb));
		}
		__m512 x0 = w_load_scaled(s + i * esz, dt, sc);
		__m512 x1 = w_load_scaled(s + (i + 16) * esz, dt, sc);
		__m512 x2 = w_load_scaled(s + (i + 32) * esz, dt, sc);
		__m512 x3 = w_load_scaled(s + (i + 48) * esz, dt, sc);

		w_hmax2_epu32(_mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(x0), absm),
					       _mm512_and_si512(_mm512_castps_si512(x1), absm)),
			      _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(x2), absm),
					       _mm512_and_si512(_mm512_castps_si512(x3), absm)),
			      &ma, &mb);
		if (ma < 0x5B000000u)
			w_b16_block(d, mant, i, ma, x0, x1, u0, u1, nearest);
		else
			sat += w_b16_block_slow(d, mant, i, x0, x1, u0, u1, nearest);
		if (mb < 0x5B000000u)
			w_b16_block(d, mant, i + B16, mb, x2, x3, u2, u3, nearest);
		else
			sat += w_b16_block_slow(d, mant, i + B16, x2, x3, u2, u3, nearest);
	}
	if (i + B16 <= n) {
		__m512 u0 = _mm512_setzero_ps(), u1 = _mm512_setzero_ps();

		if (!nearest) {
			u0 = w_uniform(w_xorshift(&ra, &rb));
			u1 = w_uniform(w_xorshift(&ra, &rb));
		}
		sat += w_b16_block_slow(d, mant, i, w_load_scaled(s + i * esz, dt, sc),
					w_load_scaled(s + (i + 16) * esz, dt, sc), u0, u1, nearest);
		i += B16;
	}
	if (!nearest) {
		uint64_t ta[8], tb[8];

		_mm512_storeu_si512((void *)ta, ra);
		_mm512_storeu_si512((void *)tb, rb);
		for (int j = 0; j < 8; j++) {
			st[j][0] = ta[j];
			st[j][1] = tb[j];
		}
	}
	return sat + b16_encode_tail(d, s, i, n, dt, scale, nearest, rng);
}

static AVX512 size_t
avx512_encode_b16(void *dst, const void *src, size_t n, enum cais_datatype dt, float scale,
		  bool nearest, struct cais_rng *rng)
{
	if (float_size(dt) == 0)
		return n;
	if (rng == NULL)
		nearest = true;
	b16_pad(dst, n);
	/* one instance of the loop per (type, rounding) */
#define W_B16(DT)                                                                                  \
	(nearest ? w_b16_encode(dst, src, n, DT, scale, true, rng)                                 \
		 : w_b16_encode(dst, src, n, DT, scale, false, rng))
	switch (dt) {
	case CAIS_FLOAT32:
		return W_B16(CAIS_FLOAT32);
	case CAIS_BFLOAT16:
		return W_B16(CAIS_BFLOAT16);
	default:
		return W_B16(CAIS_FLOAT16);
	}
#undef W_B16
}

/* 16 fp32 -> bf16 in the low halves of 32-bit lanes, as v_bf16_round(f, false)
 * (a NaN here can only be inf x 0's, the default NaN, which this rounds as
 * cais_f32_to_bf16() does; a NaN factor goes the scalar way). */
AVX512_INLINE __m512i
w_bf16_round(__m512 f)
{
	__m512i u = _mm512_castps_si512(f);
	__m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));

	return _mm512_srli_epi32(
	    _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
}

/* Store 32 fp32 (a, then b) at p as dt, rounded as v_store16(..., false). */
AVX512_INLINE void
w_store32(uint8_t *p, __m512 a, __m512 b, enum cais_datatype dt)
{
	switch (dt) {
	case CAIS_BFLOAT16: {
		__m512i r = _mm512_packus_epi32(w_bf16_round(a), w_bf16_round(b));

		_mm512_storeu_si512((void *)p, _mm512_permutexvar_epi64(
						   _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), r));
		break;
	}
	case CAIS_FLOAT16:
		_mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
		_mm256_storeu_si256((__m256i *)(p + 32),
				    _mm512_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT));
		break;
	default:
		_mm512_storeu_ps((float *)p, a);
		_mm512_storeu_ps((float *)(p + 64), b);
		break;
	}
}

AVX512_INLINE void
w_b16_decode(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, float inv)
{
	const __m512i bswap = _mm512_broadcast_i32x4(
	    _mm_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
	const size_t esz = float_size(dt);
	const uint8_t *mant = s + cais_b16_exp_bytes((uint32_t)n);
	size_t i = 0;

	for (; i + B16 <= n; i += B16) {
		unsigned int e = s[i / B16] < CAIS_B16_EMAX ? s[i / B16] : CAIS_B16_EMAX;
		__m512 f = _mm512_set1_ps(inv * pow2f((int)e));
		__m512i m =
		    _mm512_shuffle_epi8(_mm512_loadu_si512((const void *)(mant + 2 * i)), bswap);
		__m512 a = _mm512_mul_ps(
		    _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(m))), f);
		__m512 b = _mm512_mul_ps(
		    _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(m, 1))), f);

		w_store32(d + i * esz, a, b, dt);
	}
	b16_decode_tail(d, s, i, n, dt, inv);
}

/* 16 big-endian int32 at p times f: in double, or (pow2) in fp32, as v_dec8(). */
AVX512_INLINE __m512
w_dec16(const uint8_t *p, __m512i bswap, __m512d f, __m512 f32, bool pow2)
{
	__m512i q = _mm512_shuffle_epi8(_mm512_loadu_si512((const void *)p), bswap);

	if (pow2)
		return _mm512_mul_ps(_mm512_cvtepi32_ps(q), f32);
	__m512d lo = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(q)), f);
	__m512d hi = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(q, 1)), f);

	return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi),
				  1);
}

/* FIXED32 -> dt, 32 elements a step; both loads before the stores, so in place works. */
AVX512_INLINE void
w_decode(uint8_t *d, const uint8_t *s, size_t n, enum cais_datatype dt, double inv, bool pow2)
{
	const __m512i bswap = _mm512_broadcast_i32x4(
	    _mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12));
	const __m512d f = _mm512_set1_pd(inv);
	const __m512 f32 = _mm512_set1_ps((float)inv);
	const size_t esz = float_size(dt);
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m512 a = w_dec16(s + i * 4, bswap, f, f32, pow2);
		__m512 b = w_dec16(s + (i + 16) * 4, bswap, f, f32, pow2);

		w_store32(d + i * esz, a, b, dt);
	}
	decode_tail(d, s, i, n, dt, inv);
}

/*
 * FIXED32 decode (avx2_decode()'s rules: decode_factor(), the fp32 product
 * for a power-of-two factor) at 512 bits; int32 and a factor that is not
 * finite (NaN results, bf16's NaN rule) go to avx2_decode().
 */
static AVX512 void
avx512_decode(void *dst, const void *src, size_t n, enum cais_datatype dt, float inv_scale,
	      unsigned int avg_n)
{
	double inv = decode_factor(inv_scale);
	int k;
	bool pow2;

	if (dt == CAIS_INT32 || !isfinite(inv)) {
		avx2_decode(dst, src, n, dt, inv_scale, avg_n);
		return;
	}
	pow2 = fabs(frexp(inv, &k)) == 0.5;
	/* one instance of the loop per (type, kind of factor) */
#define W_DECODE(DT)                                                                               \
	do {                                                                                       \
		if (pow2)                                                                          \
			w_decode(dst, src, n, DT, inv, true);                                      \
		else                                                                               \
			w_decode(dst, src, n, DT, inv, false);                                     \
	} while (0)
	switch (dt) {
	case CAIS_FLOAT32:
		W_DECODE(CAIS_FLOAT32);
		break;
	case CAIS_BFLOAT16:
		W_DECODE(CAIS_BFLOAT16);
		break;
	case CAIS_FLOAT16:
		W_DECODE(CAIS_FLOAT16);
		break;
	default:
		break;
	}
#undef W_DECODE
}

static AVX512 void
avx512_decode_b16(void *dst, const void *src, size_t n, enum cais_datatype dt, float inv_scale)
{
	if (inv_scale != inv_scale) { /* a NaN factor: bf16's NaN rule is scalar's */
		scalar_decode_b16(dst, src, n, dt, inv_scale);
		return;
	}
	switch (dt) {
	case CAIS_FLOAT32:
		w_b16_decode(dst, src, n, CAIS_FLOAT32, inv_scale);
		break;
	case CAIS_BFLOAT16:
		w_b16_decode(dst, src, n, CAIS_BFLOAT16, inv_scale);
		break;
	case CAIS_FLOAT16:
		w_b16_decode(dst, src, n, CAIS_FLOAT16, inv_scale);
		break;
	default:
		break;
	}
}

static const struct cais_quant_ops quant_avx512 = {
    .name = "avx512",
    .encode = avx512_encode,
    .decode = avx512_decode,
    .to_f32 = avx2_to_f32,
    .from_f32 = avx2_from_f32,
    .reduce_f32 = avx2_reduce_f32,
    .reduce_i32 = avx2_reduce_i32,
    .encode_b16 = avx512_encode_b16,
    .decode_b16 = avx512_decode_b16,
};

const struct cais_quant_ops *
cais_quant_avx512(void)
{
	__builtin_cpu_init();
	if (cais_quant_avx2() == NULL || !__builtin_cpu_supports("avx512f") ||
	    !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512dq") ||
	    !__builtin_cpu_supports("avx512vl"))
		return NULL;
	return &quant_avx512;
}

#else /* !QUANT_X86 */

const struct cais_quant_ops *
cais_quant_avx2(void)
{
	return NULL;
}

const struct cais_quant_ops *
cais_quant_avx512(void)
{
	return NULL;
}

#endif

const struct cais_quant_ops *
cais_quant_best(void)
{
	const struct cais_quant_ops *q = cais_quant_avx512();

	if (q == NULL)
		q = cais_quant_avx2();
	return q != NULL ? q : &cais_quant_scalar;
}
