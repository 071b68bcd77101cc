/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The FIXED32 kernels, and the kernel sets of every wire dtype (the
 * BLOCK16 kernels are dp_agg_b16.c's): the scalar set, the AVX2 set, the
 * AVX-512 set, and the choice.
 */
#include <string.h>

#include "dp_agg_b16.h"

static inline int32_t
ld_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return (int32_t)__builtin_bswap32(v);
}

static inline void
st_be32(uint8_t *p, int32_t v)
{
	uint32_t w = __builtin_bswap32((uint32_t)v);

	memcpy(p, &w, 4);
}

static bool
load_scalar(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;

	for (unsigned int i = 0; i < n; i++)
		acc[i] = ld_be32(p + 4 * i);
	return false;
}

static bool
sum_scalar(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;

	for (unsigned int i = 0; i < n; i++)
		acc[i] += ld_be32(p + 4 * i);
	return false;
}

static bool
max_scalar(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;

	for (unsigned int i = 0; i < n; i++) {
		int64_t v = ld_be32(p + 4 * i);
		acc[i] = v > acc[i] ? v : acc[i];
	}
	return false;
}

static bool
min_scalar(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;

	for (unsigned int i = 0; i < n; i++) {
		int64_t v = ld_be32(p + 4 * i);
		acc[i] = v < acc[i] ? v : acc[i];
	}
	return false;
}

static bool
store_scalar(void *out, const int64_t *acc, unsigned int n)
{
	uint8_t *p = out;
	bool sat = false;

	for (unsigned int i = 0; i < n; i++) {
		int64_t v = acc[i];
		if (v > INT32_MAX) {
			v = INT32_MAX;
			sat = true;
		} else if (v < INT32_MIN) {
			v = INT32_MIN;
			sat = true;
		}
		st_be32(p + 4 * i, (int32_t)v);
	}
	return sat;
}

static const struct dp_agg_ops fixed32_scalar = {
    .load = load_scalar,
    .sum = sum_scalar,
    .max = max_scalar,
    .min = min_scalar,
    .store = store_scalar,
};

/* ---- PARTIAL64 (E9): a leaf's exact sums, one DATA a round ---- */

static inline int64_t
ld_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return (int64_t)__builtin_bswap64(v);
}

static inline bool
p64_fold(int64_t *acc, const void *payload, unsigned int n, int op)
{
	const uint8_t *p = payload;
	bool sat = false;

	for (unsigned int i = 0; i < n; i++) {
		int64_t v = ld_be64(p + 8 * i), r;

		if (op == 0) {
			acc[i] = v;
		} else if (op == 1) {
			if (__builtin_add_overflow(acc[i], v, &r)) {
				r = v < 0 ? INT64_MIN : INT64_MAX;
				sat = true;
			}
			acc[i] = r;
		} else {
			acc[i] = (op == 2) == (v > acc[i]) ? v : acc[i];
		}
	}
	return sat;
}

static bool
p64_load(int64_t *acc, const void *payload, unsigned int n)
{
	return p64_fold(acc, payload, n, 0);
}

static bool
p64_sum(int64_t *acc, const void *payload, unsigned int n)
{
	return p64_fold(acc, payload, n, 1);
}

static bool
p64_max(int64_t *acc, const void *payload, unsigned int n)
{
	return p64_fold(acc, payload, n, 2);
}

static bool
p64_min(int64_t *acc, const void *payload, unsigned int n)
{
	return p64_fold(acc, payload, n, 3);
}

static bool
p64_store(void *out, const int64_t *acc, unsigned int n)
{
	uint8_t *p = out;

	for (unsigned int i = 0; i < n; i++) {
		uint64_t w = __builtin_bswap64((uint64_t)acc[i]);

		memcpy(p + 8 * i, &w, 8);
	}
	return false;
}

static const struct dp_agg_ops partial64 = {
    .load = p64_load,
    .sum = p64_sum,
    .max = p64_max,
    .min = p64_min,
    .store = p64_store,
};

bool
dp_agg_result(int64_t *acc, const void *payload, unsigned int n, unsigned int dtype)
{
	const uint8_t *p = payload;

	if (dtype == CAIS_DT_FIXED32) {
		load_scalar(acc, payload, n);
		return true;
	}
	if (dtype != CAIS_DT_BLOCK16)
		return false;
	for (unsigned int i = 0; i < n; i++) {
		unsigned int e = p[i / CAIS_B16_BLOCK];
		uint16_t w;

		if (e > CAIS_B16_EMAX)
			return false;
		memcpy(&w, p + cais_b16_exp_bytes(n) + 2 * i, 2);
		acc[i] = (int64_t)(int16_t)__builtin_bswap16(w) * ((int64_t)1 << e);
	}
	return true;
}

const struct dp_agg_kernels dp_agg_scalar = {
    .name = "scalar",
    .wire = {[CAIS_DT_FIXED32] = &fixed32_scalar,
	     [CAIS_DT_BLOCK16] = &dp_agg_b16_scalar,
	     [CAIS_DT_PARTIAL64] = &partial64},
};

#ifdef DP_AGG_X86
/* Byte-swap each 32-bit lane. */
AVX2 static inline __m256i
bswap32x8(__m256i v)
{
	const __m256i idx = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
					     3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
	return _mm256_shuffle_epi8(v, idx);
}

/* Eight big-endian int32 as two vectors of four sign-extended int64. */
AVX2 static inline void
ld8(const uint8_t *p, __m256i *lo, __m256i *hi)
{
	__m256i v = bswap32x8(_mm256_loadu_si256((const __m256i *)p));

	*lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v));
	*hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1));
}

AVX2 static bool
load_avx2(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;
	unsigned int i = 0;
	__m256i lo, hi;

	for (; i + 8 <= n; i += 8) {
		ld8(p + 4 * i, &lo, &hi);
		_mm256_storeu_si256((__m256i *)(acc + i), lo);
		_mm256_storeu_si256((__m256i *)(acc + i + 4), hi);
	}
	return load_scalar(acc + i, p + 4 * i, n - i);
}

AVX2 static bool
sum_avx2(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;
	unsigned int i = 0;
	__m256i lo, hi, a0, a1;

	for (; i + 8 <= n; i += 8) {
		ld8(p + 4 * i, &lo, &hi);
		a0 = _mm256_loadu_si256((const __m256i *)(acc + i));
		a1 = _mm256_loadu_si256((const __m256i *)(acc + i + 4));
		_mm256_storeu_si256((__m256i *)(acc + i), _mm256_add_epi64(a0, lo));
		_mm256_storeu_si256((__m256i *)(acc + i + 4), _mm256_add_epi64(a1, hi));
	}
	return sum_scalar(acc + i, p + 4 * i, n - i);
}

/* keep_new selects the lanes where the new value wins. */
AVX2 static inline __m256i
pick(__m256i a, __m256i v, bool want_max)
{
	__m256i gt = _mm256_cmpgt_epi64(v, a);
	__m256i keep_new = want_max ? gt : _mm256_cmpgt_epi64(a, v);

	return _mm256_blendv_epi8(a, v, keep_new);
}

AVX2 static inline bool
extreme_avx2(int64_t *acc, const uint8_t *p, unsigned int n, bool want_max)
{
	unsigned int i = 0;
	__m256i lo, hi, a0, a1;

	for (; i + 8 <= n; i += 8) {
		ld8(p + 4 * i, &lo, &hi);
		a0 = _mm256_loadu_si256((const __m256i *)(acc + i));
		a1 = _mm256_loadu_si256((const __m256i *)(acc + i + 4));
		_mm256_storeu_si256((__m256i *)(acc + i), pick(a0, lo, want_max));
		_mm256_storeu_si256((__m256i *)(acc + i + 4), pick(a1, hi, want_max));
	}
	return want_max ? max_scalar(acc + i, p + 4 * i, n - i)
			: min_scalar(acc + i, p + 4 * i, n - i);
}

AVX2 static bool
max_avx2(int64_t *acc, const void *payload, unsigned int n)
{
	return extreme_avx2(acc, payload, n, true);
}

AVX2 static bool
min_avx2(int64_t *acc, const void *payload, unsigned int n)
{
	return extreme_avx2(acc, payload, n, false);
}

/* Clamp four int64 to int32 range; sat collects the lanes that clamped. */
AVX2 static inline __m256i
clamp4(__m256i v, __m256i *sat)
{
	const __m256i hi = _mm256_set1_epi64x(INT32_MAX);
	const __m256i lo = _mm256_set1_epi64x(INT32_MIN);
	__m256i over = _mm256_cmpgt_epi64(v, hi);
	__m256i under = _mm256_cmpgt_epi64(lo, v);

	*sat = _mm256_or_si256(*sat, _mm256_or_si256(over, under));
	v = _mm256_blendv_epi8(v, hi, over);
	return _mm256_blendv_epi8(v, lo, under);
}

AVX2 static bool
store_avx2(void *out, const int64_t *acc, unsigned int n)
{
	/* The low dword of each int64 lane, gathered into the low 128 bits. */
	const __m256i low_dwords = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
	uint8_t *p = out;
	__m256i sat = _mm256_setzero_si256();
	unsigned int i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i a0 = clamp4(_mm256_loadu_si256((const __m256i *)(acc + i)), &sat);
		__m256i a1 = clamp4(_mm256_loadu_si256((const __m256i *)(acc + i + 4)), &sat);
		__m128i l0 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(a0, low_dwords));
		__m128i l1 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(a1, low_dwords));
		__m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(l0), l1, 1);
		_mm256_storeu_si256((__m256i *)(p + 4 * i), bswap32x8(v));
	}
	return store_scalar(p + 4 * i, acc + i, n - i) || !_mm256_testz_si256(sat, sat);
}

static const struct dp_agg_ops fixed32_avx2 = {
    .load = load_avx2,
    .sum = sum_avx2,
    .max = max_avx2,
    .min = min_avx2,
    .store = store_avx2,
};

static const struct dp_agg_kernels agg_avx2 = {
    .name = "avx2",
    .wire = {[CAIS_DT_FIXED32] = &fixed32_avx2,
	     [CAIS_DT_BLOCK16] = &dp_agg_b16_avx2,
	     [CAIS_DT_PARTIAL64] = &partial64},
};

const struct dp_agg_kernels *
dp_agg_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") ? &agg_avx2 : NULL;
}

/* ---- AVX-512 (F, BW): 16 elements a step ---- */

/* Sixteen big-endian int32 as two vectors of eight sign-extended int64. */
AVX512 static inline void
ld16(const uint8_t *p, __m512i *lo, __m512i *hi)
{
	const __m512i idx = _mm512_set4_epi32(0x0c0d0e0f, 0x08090a0b, 0x04050607, 0x00010203);
	__m512i v = _mm512_shuffle_epi8(_mm512_loadu_si512(p), idx);

	*lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v));
	*hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v, 1));
}

AVX512 static bool
load_avx512(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;
	unsigned int i = 0;
	__m512i lo, hi;

	for (; i + 16 <= n; i += 16) {
		ld16(p + 4 * i, &lo, &hi);
		_mm512_storeu_si512(acc + i, lo);
		_mm512_storeu_si512(acc + i + 8, hi);
	}
	return load_scalar(acc + i, p + 4 * i, n - i);
}

/* acc[i] op= element i, op 0 sum, 1 max, 2 min (constant where inlined) */
AVX512 static inline void
fold16(int64_t *acc, const uint8_t *p, int op)
{
	__m512i lo, hi, a0 = _mm512_loadu_si512(acc), a1 = _mm512_loadu_si512(acc + 8);

	ld16(p, &lo, &hi);
	switch (op) {
	case 0:
		a0 = _mm512_add_epi64(a0, lo);
		a1 = _mm512_add_epi64(a1, hi);
		break;
	case 1:
		a0 = _mm512_max_epi64(a0, lo);
		a1 = _mm512_max_epi64(a1, hi);
		break;
	default:
		a0 = _mm512_min_epi64(a0, lo);
		a1 = _mm512_min_epi64(a1, hi);
		break;
	}
	_mm512_storeu_si512(acc, a0);
	_mm512_storeu_si512(acc + 8, a1);
}

AVX512 static bool
sum_avx512(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;
	unsigned int i = 0;

	for (; i + 16 <= n; i += 16)
		fold16(acc + i, p + 4 * i, 0);
	return sum_scalar(acc + i, p + 4 * i, n - i);
}

AVX512 static bool
max_avx512(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;
	unsigned int i = 0;

	for (; i + 16 <= n; i += 16)
		fold16(acc + i, p + 4 * i, 1);
	return max_scalar(acc + i, p + 4 * i, n - i);
}

AVX512 static bool
min_avx512(int64_t *acc, const void *payload, unsigned int n)
{
	const uint8_t *p = payload;
	unsigned int i = 0;

	for (; i + 16 <= n; i += 16)
		fold16(acc + i, p + 4 * i, 2);
	return min_scalar(acc + i, p + 4 * i, n - i);
}

/*
 * Sixteen int64 to big-endian int32, saturating (vpmovsqd); sat collects
 * whether any lane was outside int32.
 */
AVX512 static bool
store_avx512(void *out, const int64_t *acc, unsigned int n)
{
	const __m256i idx = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
					     3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
	const __m512i hi = _mm512_set1_epi64(INT32_MAX), lo = _mm512_set1_epi64(INT32_MIN);
	uint8_t *p = out;
	__mmask8 sat = 0;
	unsigned int i = 0;

	for (; i + 8 <= n; i += 8) {
		__m512i a = _mm512_loadu_si512(acc + i);

		sat |= _mm512_cmpgt_epi64_mask(a, hi) | _mm512_cmplt_epi64_mask(a, lo);
		_mm256_storeu_si256((__m256i *)(p + 4 * i),
				    _mm256_shuffle_epi8(_mm512_cvtsepi64_epi32(a), idx));
	}
	return store_scalar(p + 4 * i, acc + i, n - i) || sat;
}

static const struct dp_agg_ops fixed32_avx512 = {
    .load = load_avx512,
    .sum = sum_avx512,
    .max = max_avx512,
    .min = min_avx512,
    .store = store_avx512,
};

static const struct dp_agg_kernels agg_avx512 = {
    .name = "avx512",
    .wire = {[CAIS_DT_FIXED32] = &fixed32_avx512,
	     [CAIS_DT_BLOCK16] = &dp_agg_b16_avx512,
	     [CAIS_DT_PARTIAL64] = &partial64},
};

const struct dp_agg_kernels *
dp_agg_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx2")
		   ? &agg_avx512
		   : NULL;
}
#else
const struct dp_agg_kernels *
dp_agg_avx2(void)
{
	return NULL;
}

const struct dp_agg_kernels *
dp_agg_avx512(void)
{
	return NULL;
}
#endif

const struct dp_agg_kernels *
dp_agg_best(void)
{
	const struct dp_agg_kernels *k = dp_agg_avx512();

	if (!k)
		k = dp_agg_avx2();
	return k ? k : &dp_agg_scalar;
}
