/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The BLOCK16 kernels (docs/PROTOCOL.md E4, dp_agg.h), scalar, AVX2 and
 * AVX-512, bit for bit the same.
 *
 * A payload of n elements is cais_b16_exp_bytes(n) exponent bytes, one per
 * block of CAIS_B16_BLOCK elements, then n big-endian int16. The folds go
 * block by block: the block's exponent, capped at CAIS_B16_EMAX_DATA (and
 * reported when it was above), then each element as m_i x 2^e into its
 * int64 accumulator.
 *
 * The store, block by block:
 *  1. Let L be the bit length of the block's largest u_i = acc_i ^ (acc_i >> 63)
 *     (|acc_i|, less one when negative), and e0 = max(0, L - 15). Every
 *     |acc_i| <= 2^L, so every acc_i / 2^e0 lies in [-32768, 32768]; below
 *     e0, the acc_i with u_i >= 2^(L-1) has a quotient of magnitude 2^15 or
 *     more: no smaller exponent fits. L is also the bit length of the OR of
 *     acc ^ (acc >>> 1) without bit 63 (the highest bit at which acc differs
 *     from its sign), which AVX2 computes without a 64-bit compare.
 *  2. m_i = acc_i / 2^e rounded to nearest, ties to even, as
 *     (acc + 2^(e-1) - 1 + bit e of acc) >> e. Only a quotient of +-32768
 *     (0x8000 in 16 bits) can be out of range at e0; then the block is
 *     written again at e0 + 1, where every |acc_i| / 2^(e0+1) <= 2^14.
 * The low 16 bits of a logical right shift are those of the arithmetic one
 * while e <= 48, and they are all a quotient in -32768..32768 needs.
 */
#include <string.h>

#include "dp_agg_b16.h"

/*
 * What keeps the store in range: the accumulators hold at most CAIS_MAX_WORLD
 * contributions of |m| <= 2^15 at exponents <= CAIS_B16_EMAX_DATA, so every
 * block fits at CAIS_B16_EMAX (e <= 48, no saturation), and acc + 2^(e-1)
 * cannot overflow.
 */
_Static_assert((((uint64_t)CAIS_MAX_WORLD << 15 << CAIS_B16_EMAX_DATA) >> CAIS_B16_EMAX) <=
		   CAIS_B16_MMAX,
	       "the largest BLOCK16 sum fits a RESULT block at CAIS_B16_EMAX");
_Static_assert(CAIS_B16_EMAX + 15 <= 63, "a quotient's 16 bits lie within the accumulator");

/* The 16-bit pattern of a quotient out of range (+32768 and -32768 alike). */
#define OUT_OF_RANGE 0x8000u

/* What a fold does with an element's value. */
enum fold { F_LOAD, F_SUM, F_MAX, F_MIN };

/* ---- shared by every instruction set ---- */

/* End of the block that starts at element i. */
static inline unsigned int
block_end(unsigned int i, unsigned int n)
{
	return n - i < CAIS_B16_BLOCK ? n : i + CAIS_B16_BLOCK;
}

/* Exponent of block b, capped at the DATA limit; *sat set when it was above. */
static inline unsigned int
block_exp(const uint8_t *ex, unsigned int b, bool *sat)
{
	unsigned int e = ex[b];

	*sat |= e > CAIS_B16_EMAX_DATA;
	return e > CAIS_B16_EMAX_DATA ? CAIS_B16_EMAX_DATA : e;
}

/* The smallest exponent that can fit, from the OR of acc ^ (acc >>> 1) over a block. */
static inline unsigned int
first_exp(uint64_t bits)
{
	unsigned int len;

	bits &= (uint64_t)INT64_MAX;
	len = bits ? 64u - (unsigned int)__builtin_clzll(bits) : 0;
	return len > 15 ? len - 15 : 0;
}

/* Exponent bytes nb.. of the area: zero. */
static inline void
zero_pad(uint8_t *ex, unsigned int nb, unsigned int n)
{
	for (unsigned int b = nb; b < cais_b16_exp_bytes(n); b++)
		ex[b] = 0;
}

/*
 * The kernels of one instruction set (attr: its target attribute, empty for
 * the baseline; isa: its name), dp_agg_b16_<isa>, from what the set defines:
 * fold_<isa>() (a payload into acc with one op), mag_bits_<isa>() (see
 * first_exp()) and put_run_<isa>() (a block's m_i at one exponent, and
 * whether one was out of range). The store takes each block's first
 * exponent, and the next one if a quotient was out of range there.
 */
#define B16_KERNELS(attr, isa)                                                                     \
	attr static bool load_##isa(int64_t *acc, const void *payload, unsigned int n)             \
	{                                                                                          \
		return fold_##isa(acc, payload, n, F_LOAD);                                        \
	}                                                                                          \
	attr static bool sum_##isa(int64_t *acc, const void *payload, unsigned int n)              \
	{                                                                                          \
		return fold_##isa(acc, payload, n, F_SUM);                                         \
	}                                                                                          \
	attr static bool max_##isa(int64_t *acc, const void *payload, unsigned int n)              \
	{                                                                                          \
		return fold_##isa(acc, payload, n, F_MAX);                                         \
	}                                                                                          \
	attr static bool min_##isa(int64_t *acc, const void *payload, unsigned int n)              \
	{                                                                                          \
		return fold_##isa(acc, payload, n, F_MIN);                                         \
	}                                                                                          \
	/* One block of len accumulators: its m_i at m. @return its exponent */                    \
	attr static inline uint8_t put_block_##isa(uint8_t *m, const int64_t *acc,                 \
						   unsigned int len)                               \
	{                                                                                          \
		unsigned int e = first_exp(mag_bits_##isa(acc, len));                              \
                                                                                                   \
		if (put_run_##isa(m, acc, len, e))                                                 \
			put_run_##isa(m, acc, len, ++e);                                           \
		return (uint8_t)e;                                                                 \
	}                                                                                          \
	attr static bool store_##isa(void *out, const int64_t *acc, unsigned int n)                \
	{                                                                                          \
		uint8_t *ex = out, *m = ex + cais_b16_exp_bytes(n);                                \
		unsigned int b = 0;                                                                \
                                                                                                   \
		for (unsigned int i = 0; i < n; b++, i += CAIS_B16_BLOCK) {                        \
			unsigned int len = block_end(i, n) - i;                                    \
                                                                                                   \
			/* a whole block has a constant length: unrolled */                        \
			ex[b] = len == CAIS_B16_BLOCK                                              \
				    ? put_block_##isa(m + 2 * i, acc + i, CAIS_B16_BLOCK)          \
				    : put_block_##isa(m + 2 * i, acc + i, len);                    \
		}                                                                                  \
		zero_pad(ex, b, n);                                                                \
		return false;                                                                      \
	}                                                                                          \
	const struct dp_agg_ops dp_agg_b16_##isa = {                                               \
	    .load = load_##isa,                                                                    \
	    .sum = sum_##isa,                                                                      \
	    .max = max_##isa,                                                                      \
	    .min = min_##isa,                                                                      \
	    .store = store_##isa,                                                                  \
	};

/* ---- scalar ---- */

/* Element i: m_i x 2^e (at most 2^55 in magnitude). */
static inline int64_t
elem(const uint8_t *m, unsigned int i, unsigned int e)
{
	uint16_t w;

	memcpy(&w, m + 2 * i, 2);
	return (int64_t)(int16_t)__builtin_bswap16(w) * ((int64_t)1 << e);
}

/* One element: *a op= v. */
static inline void
fold1(int64_t *a, int64_t v, enum fold op)
{
	switch (op) {
	case F_LOAD:
		*a = v;
		break;
	case F_SUM:
		*a += v;
		break;
	case F_MAX:
		*a = v > *a ? v : *a;
		break;
	case F_MIN:
		*a = v < *a ? v : *a;
		break;
	}
}

/* Elements [i, end), whose int16 start at m, into acc at exponent e. */
static inline void
fold_run_scalar(int64_t *acc, const uint8_t *m, unsigned int i, unsigned int end, unsigned int e,
		enum fold op)
{
	for (; i < end; i++)
		fold1(&acc[i], elem(m, i, e), op);
}

static inline bool
fold_scalar(int64_t *acc, const void *payload, unsigned int n, enum fold op)
{
	const uint8_t *ex = payload, *m = ex + cais_b16_exp_bytes(n);
	bool sat = false;

	for (unsigned int b = 0, i = 0; i < n; b++, i += CAIS_B16_BLOCK)
		fold_run_scalar(acc, m, i, block_end(i, n), block_exp(ex, b, &sat), op);
	return sat;
}

/* OR of acc ^ (acc >>> 1) over acc[0..len-1]: see first_exp(). */
static inline uint64_t
mag_bits_scalar(const int64_t *acc, unsigned int len)
{
	uint64_t bits = 0;

	for (unsigned int i = 0; i < len; i++)
		bits |= (uint64_t)acc[i] ^ ((uint64_t)acc[i] >> 1);
	return bits;
}

/* acc / 2^e rounded to nearest, ties to even: its low 16 bits. */
static inline uint16_t
round16(int64_t acc, unsigned int e)
{
	uint64_t x = (uint64_t)acc;

	if (e)
		x += ((uint64_t)1 << (e - 1)) - 1 + ((x >> e) & 1);
	return (uint16_t)(x >> e);
}

/* m_i of acc[0..len-1] at exponent e, big-endian at m. @return whether one was out of range */
static inline bool
put_run_scalar(uint8_t *m, const int64_t *acc, unsigned int len, unsigned int e)
{
	bool over = false;

	for (unsigned int i = 0; i < len; i++) {
		uint16_t v = round16(acc[i], e), w = __builtin_bswap16(v);

		over |= v == OUT_OF_RANGE;
		memcpy(m + 2 * i, &w, 2);
	}
	return over;
}

B16_KERNELS(, scalar)

/* ---- AVX2 ---- */

#ifdef DP_AGG_X86
/* Byte swap of each 16-bit lane, in each 128-bit half. */
#define BSWAP16_IDX 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14

/*
 * Elements i..i+7 as two vectors of four int64 m x 2^e (ec: the shift count
 * e; one count for every lane, which costs less than a shift by lane).
 */
AVX2 static inline void
ld8(const uint8_t *m, __m128i ec, __m256i *lo, __m256i *hi)
{
	const __m128i swap = _mm_setr_epi8(BSWAP16_IDX);
	__m128i v = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)m), swap);

	*lo = _mm256_sll_epi64(_mm256_cvtepi16_epi64(v), ec);
	*hi = _mm256_sll_epi64(_mm256_cvtepi16_epi64(_mm_unpackhi_epi64(v, v)), ec);
}

AVX2 static inline __m256i
fold4(__m256i a, __m256i v, enum fold op)
{
	switch (op) {
	case F_LOAD:
		return v;
	case F_SUM:
		return _mm256_add_epi64(a, v);
	case F_MAX:
		return _mm256_blendv_epi8(a, v, _mm256_cmpgt_epi64(v, a));
	default:
		return _mm256_blendv_epi8(a, v, _mm256_cmpgt_epi64(a, v));
	}
}

AVX2 static inline void
fold8(int64_t *acc, const uint8_t *m, __m128i ec, enum fold op)
{
	__m256i lo, hi, a0 = _mm256_setzero_si256(), a1 = a0;

	ld8(m, ec, &lo, &hi);
	if (op != F_LOAD) {
		a0 = _mm256_loadu_si256((const __m256i *)acc);
		a1 = _mm256_loadu_si256((const __m256i *)(acc + 4));
	}
	_mm256_storeu_si256((__m256i *)acc, fold4(a0, lo, op));
	_mm256_storeu_si256((__m256i *)(acc + 4), fold4(a1, hi, op));
}

AVX2 static inline bool
fold_avx2(int64_t *acc, const void *payload, unsigned int n, enum fold op)
{
	const uint8_t *ex = payload, *m = ex + cais_b16_exp_bytes(n);
	bool sat = false;

	for (unsigned int b = 0, i = 0; i < n; b++) {
		unsigned int e = block_exp(ex, b, &sat), end = block_end(i, n);
		__m128i ec = _mm_cvtsi32_si128((int)e);

		if (end - i == CAIS_B16_BLOCK) { /* a whole block: unrolled */
			for (unsigned int k = 0; k < CAIS_B16_BLOCK; k += 8)
				fold8(acc + i + k, m + 2 * (i + k), ec, op);
		} else {
			for (; i + 8 <= end; i += 8)
				fold8(acc + i, m + 2 * i, ec, op);
			fold_run_scalar(acc, m, i, end, e, op);
		}
		i = end;
	}
	return sat;
}

/* OR of acc ^ (acc >>> 1) over acc[0..len-1]: see first_exp(). */
AVX2 static inline uint64_t
mag_bits_avx2(const int64_t *acc, unsigned int len)
{
	__m256i o = _mm256_setzero_si256();
	__m128i h;
	unsigned int i = 0;

	for (; i + 4 <= len; i += 4) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(acc + i));

		o = _mm256_or_si256(o, _mm256_xor_si256(a, _mm256_srli_epi64(a, 1)));
	}
	h = _mm_or_si128(_mm256_castsi256_si128(o), _mm256_extracti128_si256(o, 1));
	h = _mm_or_si128(h, _mm_unpackhi_epi64(h, h));
	return (uint64_t)_mm_cvtsi128_si64(h) | mag_bits_scalar(acc + i, len - i);
}

/* The rounding of one exponent, as round16() does it, in every lane. */
struct rounding {
	__m128i e;    /* the shift count: the exponent */
	__m256i bias; /* 2^(e-1) - 1; 0 for e = 0 */
	__m256i odd;  /* 1: add bit e of acc (ties to even); 0 for e = 0 */
};

AVX2 static inline struct rounding
rounding(unsigned int e)
{
	return (struct rounding){
	    .e = _mm_cvtsi32_si128((int)e),
	    .bias = _mm256_set1_epi64x(e ? (int64_t)(((uint64_t)1 << (e - 1)) - 1) : 0),
	    .odd = _mm256_set1_epi64x(e ? 1 : 0),
	};
}

/* acc[0..3] rounded: each quotient's 16 bits in the low 16 bits of its lane. */
AVX2 static inline __m256i
round4(const int64_t *acc, const struct rounding *r)
{
	__m256i a = _mm256_loadu_si256((const __m256i *)acc);
	__m256i odd = _mm256_and_si256(_mm256_srl_epi64(a, r->e), r->odd);

	return _mm256_srl_epi64(_mm256_add_epi64(_mm256_add_epi64(a, r->bias), odd), r->e);
}

/*
 * Quotients 4k..4k+3 to 16-bit words 2k, 2k+1 of each 128-bit half, byte
 * swapped (big-endian), the other words zero: the low two bytes of each
 * 64-bit lane.
 */
#define PICK(k) _mm256_setr_epi8(PICK_HALF(k), PICK_HALF(k))
#define PICK_HALF(k)                                                                               \
	PICK_AT(k, 0), PICK_AT(k, 1), PICK_AT(k, 2), PICK_AT(k, 3), PICK_AT(k, 4), PICK_AT(k, 5),  \
	    PICK_AT(k, 6), PICK_AT(k, 7), PICK_AT(k, 8), PICK_AT(k, 9), PICK_AT(k, 10),            \
	    PICK_AT(k, 11), PICK_AT(k, 12), PICK_AT(k, 13), PICK_AT(k, 14), PICK_AT(k, 15)
/* byte j of the half: for words 2k, 2k+1 the bytes 1, 0 of lane 0 and 9, 8 of lane 1 */
#define PICK_AT(k, j)                                                                              \
	((j) / 4 != (k) ? -1 : (j) % 4 == 0 ? 1 : (j) % 4 == 1 ? 0 : (j) % 4 == 2 ? 9 : 8)

/*
 * acc[0..15] rounded, as 16 big-endian int16 at m; *over collects the
 * out-of-range ones. The halves come out interleaved (quotients 0, 1, 4, 5,
 * 8, 9, 12, 13 in the low one): the permutation of 32-bit pairs undoes it.
 */
AVX2 static inline void
put16(uint8_t *m, const int64_t *acc, const struct rounding *r, __m256i *over)
{
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	__m256i w =
	    _mm256_or_si256(_mm256_or_si256(_mm256_shuffle_epi8(round4(acc, r), PICK(0)),
					    _mm256_shuffle_epi8(round4(acc + 4, r), PICK(1))),
			    _mm256_or_si256(_mm256_shuffle_epi8(round4(acc + 8, r), PICK(2)),
					    _mm256_shuffle_epi8(round4(acc + 12, r), PICK(3))));

	w = _mm256_permutevar8x32_epi32(w, order);
	/* 0x8000 big-endian */
	*over = _mm256_or_si256(*over, _mm256_cmpeq_epi16(w, _mm256_set1_epi16(0x0080)));
	_mm256_storeu_si256((__m256i *)m, w);
}

/* put_run_scalar(), 16 at a time. */
AVX2 static inline bool
put_run_avx2(uint8_t *m, const int64_t *acc, unsigned int len, unsigned int e)
{
	const struct rounding r = rounding(e);
	__m256i over = _mm256_setzero_si256();
	unsigned int i = 0;
	bool tail;

	for (; i + 16 <= len; i += 16)
		put16(m + 2 * i, acc + i, &r, &over);
	tail = put_run_scalar(m + 2 * i, acc + i, len - i, e);
	return tail || !_mm256_testz_si256(over, over);
}

B16_KERNELS(AVX2, avx2)

/* ---- AVX-512: 16 elements a step (a whole block in two) ---- */

/*
 * Elements 0..15 at m, at exponent count ec, folded into acc[0..15]: the
 * 16 words byte swapped in one ymm, each half widened to eight int64.
 */
AVX512 static inline void
fold16(int64_t *acc, const uint8_t *m, __m128i ec, enum fold op)
{
	const __m256i swap = _mm256_setr_epi8(BSWAP16_IDX, BSWAP16_IDX);
	__m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)m), swap);
	__m512i lo = _mm512_sll_epi64(_mm512_cvtepi16_epi64(_mm256_castsi256_si128(v)), ec);
	__m512i hi = _mm512_sll_epi64(_mm512_cvtepi16_epi64(_mm256_extracti128_si256(v, 1)), ec);

	if (op != F_LOAD) {
		__m512i a0 = _mm512_loadu_si512(acc), a1 = _mm512_loadu_si512(acc + 8);

		switch (op) {
		case F_SUM:
			lo = _mm512_add_epi64(a0, lo);
			hi = _mm512_add_epi64(a1, hi);
			break;
		case F_MAX:
			lo = _mm512_max_epi64(a0, lo);
			hi = _mm512_max_epi64(a1, hi);
			break;
		default:
			lo = _mm512_min_epi64(a0, lo);
			hi = _mm512_min_epi64(a1, hi);
			break;
		}
	}
	_mm512_storeu_si512(acc, lo);
	_mm512_storeu_si512(acc + 8, hi);
}

AVX512 static inline bool
fold_avx512(int64_t *acc, const void *payload, unsigned int n, enum fold op)
{
	const uint8_t *ex = payload, *m = ex + cais_b16_exp_bytes(n);
	bool sat = false;

	for (unsigned int b = 0, i = 0; i < n; b++) {
		unsigned int e = block_exp(ex, b, &sat), end = block_end(i, n);
		__m128i ec = _mm_cvtsi32_si128((int)e);

		for (; i + 16 <= end; i += 16)
			fold16(acc + i, m + 2 * i, ec, op);
		if (i + 8 <= end) {
			fold8(acc + i, m + 2 * i, ec, op);
			i += 8;
		}
		fold_run_scalar(acc, m, i, end, e, op);
		i = end;
	}
	return sat;
}

/* OR of acc ^ (acc >>> 1) over acc[0..len-1]: see first_exp(). */
AVX512 static inline uint64_t
mag_bits_avx512(const int64_t *acc, unsigned int len)
{
	__m512i o = _mm512_setzero_si512();
	unsigned int i = 0;

	for (; i + 8 <= len; i += 8) {
		__m512i a = _mm512_loadu_si512(acc + i);

		o = _mm512_or_si512(o, _mm512_xor_si512(a, _mm512_srli_epi64(a, 1)));
	}
	return (uint64_t)_mm512_reduce_or_epi64(o) | mag_bits_scalar(acc + i, len - i);
}

/* rounding() on 8 lanes, widened once per run. */
struct rounding512 {
	__m128i e;
	__m512i bias, odd;
};

AVX512 static inline struct rounding512
rounding512(unsigned int e)
{
	const struct rounding r = rounding(e);

	return (struct rounding512){
	    .e = r.e,
	    .bias = _mm512_broadcastq_epi64(_mm256_castsi256_si128(r.bias)),
	    .odd = _mm512_broadcastq_epi64(_mm256_castsi256_si128(r.odd)),
	};
}

/* acc[0..7] rounded as round16() does, narrowed to eight words. */
AVX512 static inline __m128i
round8(const int64_t *acc, const struct rounding512 *r)
{
	__m512i a = _mm512_loadu_si512(acc);
	__m512i odd = _mm512_and_si512(_mm512_srl_epi64(a, r->e), r->odd);

	/* vpmovqw keeps each lane's low 16 bits: the quotient's, as in round16() */
	return _mm512_cvtepi64_epi16(
	    _mm512_srl_epi64(_mm512_add_epi64(_mm512_add_epi64(a, r->bias), odd), r->e));
}

/* put_run_scalar(), 16 at a time. */
AVX512 static inline bool
put_run_avx512(uint8_t *m, const int64_t *acc, unsigned int len, unsigned int e)
{
	const __m256i swap = _mm256_setr_epi8(BSWAP16_IDX, BSWAP16_IDX);
	const __m256i out_of_range = _mm256_set1_epi16((short)OUT_OF_RANGE);
	const struct rounding512 r = rounding512(e);
	__m256i over = _mm256_setzero_si256();
	unsigned int i = 0;

	for (; i + 16 <= len; i += 16) {
		__m256i w = _mm256_inserti128_si256(_mm256_castsi128_si256(round8(acc + i, &r)),
						    round8(acc + i + 8, &r), 1);

		over = _mm256_or_si256(over, _mm256_cmpeq_epi16(w, out_of_range));
		_mm256_storeu_si256((__m256i *)(m + 2 * i), _mm256_shuffle_epi8(w, swap));
	}
	return put_run_scalar(m + 2 * i, acc + i, len - i, e) || !_mm256_testz_si256(over, over);
}

B16_KERNELS(AVX512, avx512)
#endif
