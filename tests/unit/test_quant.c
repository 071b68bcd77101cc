/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent/quant.h: fixed-point encode/decode, bf16/fp16 conversions and the
 * ring's reductions. Every behavioural test runs once per implementation
 * (the scalar one, then AVX2 and AVX-512 where the CPU has them) against
 * references written here from the rules (double arithmetic, explicit
 * rounding); a last group compares the vector paths with scalar bit for bit
 * on random data, and BLOCK16's AVX-512 == AVX2 == scalar on blocks of every
 * kind (AVX-512's part skipped, and said, where the CPU lacks it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "../../agent/quant.h"

/* The implementation under test, set by the group's setup. */
static const struct cais_quant_ops *impl;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			print_error("%s: ", impl ? impl->name : "-");                              \
			print_error(__VA_ARGS__);                                                  \
			print_error("\n");                                                         \
			fail_msg("%s", #cond);                                                     \
		}                                                                                  \
	} while (0)

static const enum cais_datatype float_types[] = {CAIS_FLOAT32, CAIS_BFLOAT16, CAIS_FLOAT16};

/* ------------------------------------------------------------- utilities */

static uint64_t test_rng_state = 0x853C49E6748FEA9Bull;

static uint64_t
rnd64(void)
{
	uint64_t z = (test_rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint32_t
rnd32(void)
{
	return (uint32_t)(rnd64() >> 32);
}

/* Uniform in [lo, hi). */
static double
rnd_uniform(double lo, double hi)
{
	return lo + (hi - lo) * ((double)(rnd64() >> 11) * 0x1p-53);
}

static uint32_t
f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float
u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static size_t
esize(enum cais_datatype dt)
{
	return dt == CAIS_BFLOAT16 || dt == CAIS_FLOAT16 ? 2 : 4;
}

/* The big-endian int32 at element i of a payload. */
static int32_t
be_get(const void *p, size_t i)
{
	const uint8_t *b = (const uint8_t *)p + 4 * i;

	return (int32_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
}

static void
be_put(void *p, size_t i, int32_t v)
{
	uint8_t *b = (uint8_t *)p + 4 * i;
	uint32_t u = (uint32_t)v;

	b[0] = (uint8_t)(u >> 24);
	b[1] = (uint8_t)(u >> 16);
	b[2] = (uint8_t)(u >> 8);
	b[3] = (uint8_t)u;
}

static uint16_t
get16(const void *p, size_t i)
{
	uint16_t v;

	memcpy(&v, (const uint8_t *)p + 2 * i, 2);
	return v;
}

static void
put16(void *p, size_t i, uint16_t v)
{
	memcpy((uint8_t *)p + 2 * i, &v, 2);
}

static float
getf(const void *p, size_t i)
{
	float v;

	memcpy(&v, (const uint8_t *)p + 4 * i, 4);
	return v;
}

static void
putf(void *p, size_t i, float v)
{
	memcpy((uint8_t *)p + 4 * i, &v, 4);
}

/* Element i of a dt buffer as fp32 (via the library's exact widening). */
static float
get_as_f32(const void *p, size_t i, enum cais_datatype dt)
{
	switch (dt) {
	case CAIS_BFLOAT16:
		return cais_bf16_to_f32(get16(p, i));
	case CAIS_FLOAT16:
		return cais_f16_to_f32(get16(p, i));
	default:
		return getf(p, i);
	}
}

/* ------------------------------------------- reference 16-bit formats */

/*
 * The value of a bf16 (e bits 8, m bits 7) or fp16 (5, 10) pattern, in
 * double, from the IEEE 754 definition. NaN for NaNs.
 */
static double
ref_widen(uint16_t h, int ebits, int mbits)
{
	int bias = (1 << (ebits - 1)) - 1;
	unsigned int e = (h >> mbits) & ((1u << ebits) - 1), m = h & ((1u << mbits) - 1);
	double sign = (h & 0x8000) ? -1.0 : 1.0;

	if (e == (1u << ebits) - 1)
		return m ? NAN : sign * INFINITY;
	if (e == 0)
		return sign * ldexp((double)m, 1 - bias - mbits);
	return sign * ldexp((double)((1u << mbits) + m), (int)e - bias - mbits);
}

/*
 * fp32 (finite) rounded to a format with p significant bits, minimum normal
 * exponent emin and largest finite value max, to nearest even, in double:
 * |f| / ulp is exact, nearbyint() rounds it (default mode: ties to even).
 */
static double
ref_narrow(float f, int p, int emin, double max)
{
	double a = fabs((double)f);

	if (a == 0)
		return (double)f;
	int ex;

	(void)frexp(a, &ex); /* a = fr x 2^ex, fr in [0.5, 1) */
	int e = ex - 1 < emin ? emin : ex - 1;
	double ulp = ldexp(1.0, e - (p - 1));
	double r = nearbyint(a / ulp) * ulp;

	if (r > max)
		r = INFINITY;
	return signbit(f) ? -r : r;
}

#define BF16_MAX ((2.0 - 0x1p-7) * 0x1p127)
#define F16_MAX	 65504.0

/* out must be the rounding of f, with f's sign. */
static void
check_narrow(float f, uint16_t out, bool bf16)
{
	uint32_t u = f2u(f);

	if (isnan(f)) {
		uint16_t want =
		    bf16 ? (uint16_t)(((u >> 16) & 0x8000) | 0x7FC0)
			 : (uint16_t)(((u >> 16) & 0x8000) | 0x7E00 | ((u & 0x7FFFFF) >> 13));
		CHECK(out == want, "narrow NaN %08x -> %04x, want %04x", u, out, want);
		return;
	}
	double want = bf16 ? ref_narrow(f, 8, -126, BF16_MAX) : ref_narrow(f, 11, -14, F16_MAX);
	double got = bf16 ? ref_widen(out, 8, 7) : ref_widen(out, 5, 10);

	CHECK(got == want && (signbit(got) != 0) == (signbit(f) != 0),
	      "%s %08x (%a) -> %04x (%a), want %a", bf16 ? "bf16" : "f16", u, (double)f, out, got,
	      want);
}

/* A large set of fp32 patterns: every exponent, both signs, the rounding ties
 * at every bit position and their neighbours, the edges, random mantissas. */
static uint32_t *
narrow_patterns(size_t *count)
{
	size_t cap = 2 * 256 * 200 + 1000000, n = 0;
	uint32_t *v = malloc(cap * sizeof(*v));
	static const uint32_t fixed[] = {0,	   1,	     2,	       3,	 0x7FFFFF, 0x7FFFFE,
					 0x400000, 0x3FFFFF, 0x400001, 0x8000,	 0x7FFF,   0x8001,
					 0x18000,  0x10000,  0x1000,   0xFFF,	 0x1001,   0x3000,
					 0x2000,   0x7F8000, 0x7FF000, 0x7FEFFF, 0x7F7FFF};

	assert_non_null(v);
	for (uint32_t s = 0; s < 2; s++) {
		for (uint32_t e = 0; e < 256; e++) {
			uint32_t base = s << 31 | e << 23;

			for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++)
				v[n++] = base | fixed[k];
			for (int b = 0; b < 23; b++) {
				for (int r = 0; r < 2; r++) {
					uint32_t hi = rnd32() & 0x7FFFFFu & ~((2u << b) - 1);
					uint32_t tie = hi | (1u << b);

					v[n++] = base | tie;
					v[n++] = base | (tie - 1);
					v[n++] = base | ((tie + 1) & 0x7FFFFF);
				}
			}
			for (int r = 0; r < 24; r++)
				v[n++] = base | (rnd32() & 0x7FFFFF);
		}
	}
	for (int r = 0; r < 1000000; r++)
		v[n++] = rnd32();
	assert_true(n <= cap);
	*count = n;
	return v;
}

/* ------------------------------------------------------ random test data */

/* Floats of every kind: small and large, integral, ties, tiny, denormal,
 * zero of both signs, inf, NaN (quiet and signalling, with payloads). */
static float
rnd_float(void)
{
	switch (rnd32() % 16) {
	case 0:
		return u2f(rnd32()); /* any pattern, NaNs included */
	case 1:
		return (float)((int32_t)rnd32()) / 4.0f; /* near the int32 edge after scaling */
	case 2:
		return (float)(int)(rnd32() % 2001 - 1000) + 0.5f; /* ties */
	case 3:
		return (rnd32() & 1) ? INFINITY : -INFINITY;
	case 4:
		return (rnd32() & 1) ? 0.0f : -0.0f;
	case 5:
		return u2f((rnd32() & 0x807FFFFFu) | 0x7F800000u); /* NaN or inf */
	case 6:
		return u2f(rnd32() & 0x807FFFFFu); /* denormal */
	default:
		return (float)rnd_uniform(-1e4, 1e4);
	}
}

static void
fill_dt(void *p, size_t n, enum cais_datatype dt)
{
	for (size_t i = 0; i < n; i++) {
		switch (dt) {
		case CAIS_BFLOAT16:
		case CAIS_FLOAT16:
			put16(p, i,
			      (rnd32() & 3) ? (dt == CAIS_BFLOAT16 ? cais_f32_to_bf16(rnd_float())
								   : cais_f32_to_f16(rnd_float()))
					    : (uint16_t)rnd32());
			break;
		case CAIS_INT32:
			be_put(p, i, (int32_t)rnd32());
			break;
		default:
			putf(p, i, rnd_float());
			break;
		}
	}
}

static int32_t
rnd_i32(void)
{
	switch (rnd32() % 8) {
	case 0:
		return INT32_MAX - (int32_t)(rnd32() % 4);
	case 1:
		return INT32_MIN + (int32_t)(rnd32() % 4);
	case 2:
		return (int32_t)(rnd32() % 2001) - 1000;
	default:
		return (int32_t)rnd32();
	}
}

/* ---------------------------------------------------------------- setup */

static int
setup_scalar(void **state)
{
	(void)state;
	impl = &cais_quant_scalar;
	return 0;
}

static int
setup_avx2(void **state)
{
	(void)state;
	impl = cais_quant_avx2();
	return impl == NULL ? -1 : 0;
}

static int
setup_avx512(void **state)
{
	(void)state;
	impl = cais_quant_avx512();
	return impl == NULL ? -1 : 0;
}

/* The vector implementations this CPU has (NULL-terminated). */
static const struct cais_quant_ops *const *
vector_impls(void)
{
	static const struct cais_quant_ops *v[3];
	int n = 0;

	if (cais_quant_avx2() != NULL)
		v[n++] = cais_quant_avx2();
	if (cais_quant_avx512() != NULL)
		v[n++] = cais_quant_avx512();
	v[n] = NULL;
	return v;
}

/* ------------------------------------------------------------------ tests */

static void
test_selection(void **state)
{
	(void)state;
	const struct cais_quant_ops *a = cais_quant_avx2(), *b = cais_quant_best();
	const struct cais_quant_ops *w = cais_quant_avx512();

	assert_string_equal(cais_quant_scalar.name, "scalar");
	assert_non_null(b);
	assert_ptr_equal(b, w != NULL ? w : a != NULL ? a : &cais_quant_scalar);
	if (a != NULL)
		assert_string_equal(a->name, "avx2");
	else
		print_message("AVX2/F16C not available: only the scalar path is tested\n");
	if (w != NULL) {
		assert_non_null(a); /* AVX-512's implementation is AVX2's but for encode */
		assert_string_equal(w->name, "avx512");
	} else {
		print_message("AVX-512 not available: its encoders are not tested\n");
	}
}

/* The scalar value and the wire format of a few known values. */
static void
test_wire_format(void **state)
{
	(void)state;
	uint8_t buf[3 + 4 * 4];
	float in[4] = {1.0f, -1.0f, 0.0009765625f, 2.5f};
	static const uint8_t want[16] = {0x00, 0x00, 0x04, 0x00, 0xFF, 0xFF, 0xFC, 0x00,
					 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x0A, 0x00};

	/* odd destination offset, as in a packet */
	assert_int_equal(impl->encode(buf + 3, in, 4, CAIS_FLOAT32, 1024.0f, true, NULL), 0);
	assert_memory_equal(buf + 3, want, 16);

	int32_t i32[2] = {0x01020304, -2};
	static const uint8_t want_i[8] = {1, 2, 3, 4, 0xFF, 0xFF, 0xFF, 0xFE};

	assert_int_equal(impl->encode(buf + 1, i32, 2, CAIS_INT32, 123.0f, false, NULL), 0);
	assert_memory_equal(buf + 1, want_i, 8);
}

/* encode and decode in place, where the element sizes match */
static void
test_in_place(void **state)
{
	(void)state;
	enum { N = 77 };
	float f[N], copy[N];
	uint8_t want[N * 4];
	int32_t i32[N], want_i[N];
	struct cais_rng r1, r2;

	for (int i = 0; i < N; i++) {
		f[i] = (float)rnd_uniform(-1e3, 1e3);
		i32[i] = rnd_i32();
	}
	memcpy(copy, f, sizeof(f));
	cais_rng_seed(&r1, 5);
	r2 = r1;
	assert_int_equal(impl->encode(want, copy, N, CAIS_FLOAT32, 3.0f, false, &r1), 0);
	assert_int_equal(impl->encode(f, f, N, CAIS_FLOAT32, 3.0f, false, &r2), 0);
	assert_memory_equal(f, want, sizeof(want));
	impl->decode(copy, want, N, CAIS_FLOAT32, 1.0f / 3.0f, 1);
	impl->decode(f, f, N, CAIS_FLOAT32, 1.0f / 3.0f, 1);
	assert_memory_equal(f, copy, sizeof(f));
	for (int i = 0; i < N; i++)
		want_i[i] = i32[i] / 3;
	impl->encode(i32, i32, N, CAIS_INT32, 1.0f, true, NULL);
	impl->decode(i32, i32, N, CAIS_INT32, 1.0f, 3);
	assert_memory_equal(i32, want_i, sizeof(want_i));
}

/*
 * value = k / scale (fp32) -> encode -> q == k -> decode -> the same value,
 * for every float type (only the values it represents), both roundings, and
 * avg (inv_scale = 1 / (scale x n), q = n x k).
 */
static void
round_trip(enum cais_datatype dt, float scale, int64_t k0, int64_t k1, int64_t step)
{
	size_t cap = (size_t)((k1 - k0) / step + 1), n = 0;
	size_t es = esize(dt);
	uint8_t *src = malloc(cap * es + 1), *wire = malloc(cap * 4 + 1),
		*back = malloc(cap * es + 1);
	uint8_t *want = malloc(cap * es);
	int32_t *ks = malloc(cap * sizeof(*ks));
	struct cais_rng rng;

	assert_non_null(src);
	assert_non_null(wire);
	assert_non_null(back);
	assert_non_null(want);
	assert_non_null(ks);
	for (int64_t k = k0; k <= k1; k += step) {
		float v = (float)k / scale;

		if (dt == CAIS_BFLOAT16) {
			uint16_t h = cais_f32_to_bf16(v);

			if (cais_bf16_to_f32(h) != v)
				continue;
			put16(src + 1, n, h);
		} else if (dt == CAIS_FLOAT16) {
			uint16_t h = cais_f32_to_f16(v);

			if (cais_f16_to_f32(h) != v)
				continue;
			put16(src + 1, n, h);
		} else {
			putf(src + 1, n, v);
		}
		ks[n++] = (int32_t)k;
	}
	assert_true(n > 0);
	cais_rng_seed(&rng, 42);
	for (int nearest = 0; nearest < 2; nearest++) {
		memset(wire, 0, cap * 4 + 1);
		assert_int_equal(impl->encode(wire + 1, src + 1, n, dt, scale, nearest, &rng), 0);
		for (size_t i = 0; i < n; i++)
			CHECK(be_get(wire + 1, i) == ks[i],
			      "dt %d scale %g nearest %d: q %d, want %d", dt, (double)scale,
			      nearest, be_get(wire + 1, i), ks[i]);
		impl->decode(back + 1, wire + 1, n, dt, (float)(1.0 / scale), 1);
		for (size_t i = 0; i < n; i++)
			CHECK(memcmp(back + 1 + i * es, src + 1 + i * es, es) == 0,
			      "dt %d scale %g: k %d decodes to %a, want %a", dt, (double)scale,
			      ks[i], (double)get_as_f32(back + 1, i, dt),
			      (double)get_as_f32(src + 1, i, dt));
	}
	/* avg: the sum of n equal contributions, divided by n */
	static const unsigned int ns[] = {2, 3, 7, 255};

	for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++) {
		size_t m = 0;

		for (size_t i = 0; i < n; i++) {
			int64_t q = (int64_t)ks[i] * ns[j];

			if (q >= (1 << 24) || q <= -(1 << 24))
				continue;
			be_put(wire, m, (int32_t)q);
			memcpy(want + m * es, src + 1 + i * es, es);
			m++;
		}
		impl->decode(back, wire, m, dt, (float)(1.0 / ((double)scale * ns[j])), 0);
		for (size_t i = 0; i < m; i++)
			CHECK(memcmp(back + i * es, want + i * es, es) == 0,
			      "avg n %u dt %d scale %g: q %d decodes to %a, want %a", ns[j], dt,
			      (double)scale, be_get(wire, i), (double)get_as_f32(back, i, dt),
			      (double)get_as_f32(want, i, dt));
	}
	free(src);
	free(wire);
	free(back);
	free(want);
	free(ks);
}

static void
test_round_trip_float(void **state)
{
	(void)state;
	for (size_t t = 0; t < 3; t++) {
		enum cais_datatype dt = float_types[t];

		round_trip(dt, 1.0f, -(1 << 20), 1 << 20, 1);
		round_trip(dt, 1024.0f, -(1 << 20), 1 << 20, 1);
		round_trip(dt, 3.0f, -(1 << 20), 1 << 20, 1);
		/* all of q's 24 bits, sparsely */
		round_trip(dt, 65536.0f, -(1 << 24) + 1, (1 << 24) - 1, 61);
		if (dt != CAIS_FLOAT32)
			continue;
		/* up to the last integers below 2^24, and a sparse wide range */
		round_trip(dt, 1.0f, (1 << 24) - 4096, (1 << 24) - 1, 1);
		round_trip(dt, 1024.0f, -(1 << 24) + 1, -(1 << 24) + 4096, 1);
		round_trip(dt, 1.0f, -((int64_t)1 << 30), (int64_t)1 << 30, 4097 * 64);
	}
}

/* Values v with v x S an integer < 2^24 decode exactly whatever the scale S
 * (decode recovers S from its rounded reciprocal). */
static void
test_decode_exact_scales(void **state)
{
	(void)state;
	enum { N = 512 };
	uint8_t wire[N * 4];
	float out[N];

	for (int s = 1; s <= 3000; s++) {
		float S = (float)s * ((s & 1) ? 1.0f : 0.125f);
		float inv = 1.0f / S;
		size_t n = 0;
		float want[N];

		for (int j = -(N / 2); j < N / 2; j++) {
			float v = (float)j * 0.5f;
			double q = (double)v * S;

			if (q != floor(q) || fabs(q) >= 0x1p24)
				continue;
			be_put(wire, n, (int32_t)q);
			want[n++] = v;
		}
		impl->decode(out, wire, n, CAIS_FLOAT32, inv, 1);
		for (size_t i = 0; i < n; i++)
			CHECK(f2u(out[i]) == f2u(want[i]), "scale %a q %d -> %a, want %a",
			      (double)S, be_get(wire, i), (double)out[i], (double)want[i]);
	}
	/* Any scale, any q: within 2^-23 of q / S plus the rounding (a round
	 * neighbour of S may be taken for it). */
	for (int r = 0; r < 2000; r++) {
		float S = (float)exp(rnd_uniform(-20, 20));
		size_t n = 64;

		for (size_t i = 0; i < n; i++)
			be_put(wire, i, rnd_i32());
		impl->decode(out, wire, n, CAIS_FLOAT32, 1.0f / S, 1);
		for (size_t i = 0; i < n; i++) {
			double want_d = (double)be_get(wire, i) / S;
			double err = fabs((double)out[i] - want_d);

			CHECK(err <= 3 * fabs(want_d) * 0x1p-24, "scale %a q %d -> %a, want %a",
			      (double)S, be_get(wire, i), (double)out[i], want_d);
		}
	}
	/* NaN and inf inv_scale are used as they are */
	be_put(wire, 0, 5);
	be_put(wire, 1, 0);
	impl->decode(out, wire, 2, CAIS_FLOAT32, INFINITY, 1);
	assert_true(isinf(out[0]));
	assert_true(isnan(out[1]));
}

/* Decoding rounds the fp32 value q x inv_scale to bf16 / fp16 to nearest even. */
static void
test_decode_narrow(void **state)
{
	(void)state;
	uint8_t wire[8 * 4];
	uint16_t out[8];
	int32_t q[8] = {257, 259, 2049, 2051, 70000, -70000, 65519, INT32_MAX};

	for (int i = 0; i < 8; i++)
		be_put(wire, i, q[i]);
	impl->decode(out, wire, 8, CAIS_BFLOAT16, 1.0f, 1);
	for (int i = 0; i < 8; i++)
		check_narrow((float)q[i], out[i], true);
	assert_int_equal(out[0], 0x4380); /* 257 -> 256 (tie to even) */
	assert_int_equal(out[1], 0x4382); /* 259 -> 260 */
	impl->decode(out, wire, 8, CAIS_FLOAT16, 1.0f, 1);
	for (int i = 0; i < 8; i++)
		check_narrow((float)q[i], out[i], false);
	assert_int_equal(out[2], 0x6800); /* 2049 -> 2048 */
	assert_int_equal(out[3], 0x6802); /* 2051 -> 2052 */
	assert_int_equal(out[4], 0x7C00); /* inf */
	assert_int_equal(out[5], 0xFC00);
	assert_int_equal(out[6], 0x7BFF); /* 65504 */

	float f[1];

	impl->decode(f, wire + 7 * 4, 1, CAIS_FLOAT32, 1.0f, 1);
	assert_true(f[0] == 0x1p31f);
}

/* int32: unscaled both ways, avg rounds toward zero. */
static void
test_int32(void **state)
{
	(void)state;
	enum { N = 1037 };
	static const unsigned int ns[] = {
	    0, 1, 2, 3, 7, 255, 1u << 22, (1u << 22) + 1, 1u << 31, UINT32_MAX};
	int32_t in[N], out[N];
	uint8_t wire[N * 4 + 1];
	struct cais_rng rng;

	cais_rng_seed(&rng, 1);
	for (int i = 0; i < N; i++)
		in[i] = rnd_i32();
	in[0] = -7;
	in[1] = 7;
	in[2] = INT32_MIN;
	in[3] = INT32_MAX;
	in[4] = -1;
	for (int nearest = 0; nearest < 2; nearest++) {
		assert_int_equal(impl->encode(wire + 1, in, N, CAIS_INT32, 0.001f, nearest, &rng),
				 0);
		for (int i = 0; i < N; i++)
			assert_int_equal(be_get(wire + 1, i), in[i]);
	}
	for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++) {
		impl->decode(out, wire + 1, N, CAIS_INT32, 0.5f, ns[j]);
		for (int i = 0; i < N; i++) {
			int32_t want =
			    ns[j] > 1 ? (int32_t)((int64_t)in[i] / (int64_t)ns[j]) : in[i];

			CHECK(out[i] == want, "%d / %u -> %d, want %d", in[i], ns[j], out[i], want);
		}
		if (ns[j] == 2) {
			assert_int_equal(out[0], -3);
			assert_int_equal(out[1], 3);
			assert_int_equal(out[2], INT32_MIN / 2);
			assert_int_equal(out[4], 0);
		}
	}
}

/*
 * Stochastic rounding: each q is floor or ceil of x = value x scale (fp32),
 * and the mean of q - x is 0 within 4 standard errors (from the sample).
 */
static void
check_unbiased(const float *val, size_t n, enum cais_datatype dt, float scale, uint64_t seed)
{
	size_t es = esize(dt);
	uint8_t *src = malloc(n * es), *wire = malloc(n * 4);
	struct cais_rng rng;
	double sum = 0, sum2 = 0;
	size_t ups = 0;

	assert_non_null(src);
	assert_non_null(wire);
	for (size_t i = 0; i < n; i++) {
		if (dt == CAIS_BFLOAT16)
			put16(src, i, cais_f32_to_bf16(val[i]));
		else if (dt == CAIS_FLOAT16)
			put16(src, i, cais_f32_to_f16(val[i]));
		else
			putf(src, i, val[i]);
	}
	cais_rng_seed(&rng, seed);
	/* in pieces of odd lengths, so that the random blocks straddle calls */
	for (size_t i = 0, len = 1; i < n; i += len, len = len * 3 + 1) {
		if (len > n - i)
			len = n - i;
		assert_int_equal(
		    impl->encode(wire + 4 * i, src + es * i, len, dt, scale, false, &rng), 0);
	}
	for (size_t i = 0; i < n; i++) {
		double x = (double)(get_as_f32(src, i, dt) * scale);
		double q = be_get(wire, i);

		CHECK(q == floor(x) || q == ceil(x), "x %a -> q %.0f", x, q);
		ups += q != floor(x);
		sum += q - x;
		sum2 += (q - x) * (q - x);
	}
	double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
	double se = sqrt(var > 0 ? var / (double)(n - 1) : 0);

	CHECK(fabs(mean) <= 4 * se, "dt %d value[0] %g scale %g: mean %g, se %g (%zu of %zu up)",
	      dt, (double)val[0], (double)scale, mean, se, ups, n);
	free(src);
	free(wire);
}

static void
test_stochastic_unbiased(void **state)
{
	(void)state;
	enum { N = 1000000 };
	float *v = malloc(N * sizeof(*v));
	static const float constants[] = {0.3f, -2.7f, 0.5f, -0.25f, 0x1p22f + 0.5f, 1e-3f};

	assert_non_null(v);
	for (size_t c = 0; c < sizeof(constants) / sizeof(constants[0]); c++) {
		for (size_t i = 0; i < N; i++)
			v[i] = constants[c];
		check_unbiased(v, N, CAIS_FLOAT32, 1.0f, c);
	}
	for (size_t i = 0; i < N; i++)
		v[i] = 0.3f;
	check_unbiased(v, N, CAIS_FLOAT32, 1024.0f, 7); /* 307.2 */
	check_unbiased(v, N, CAIS_BFLOAT16, 1.0f, 8);
	check_unbiased(v, N, CAIS_FLOAT16, 1.0f, 9);
	for (size_t i = 0; i < N; i++)
		v[i] = (float)rnd_uniform(-100, 100);
	check_unbiased(v, N, CAIS_FLOAT32, 3.0f, 10);
	check_unbiased(v, N, CAIS_FLOAT16, 1.0f, 11);
	check_unbiased(v, N, CAIS_BFLOAT16, 1024.0f, 12);
	free(v);
}

/* Each of the 16 positions of a random block rounds up about half of the
 * time, and no two positions go together (independent streams). */
static void
test_stochastic_lanes(void **state)
{
	(void)state;
	enum { CALLS = 4000 };
	float half[16];
	uint8_t wire[16 * 4];
	uint32_t bits[16][CALLS / 32] = {{0}};
	struct cais_rng rng;

	for (int i = 0; i < 16; i++)
		half[i] = 0.5f;
	cais_rng_seed(&rng, 0);
	for (int c = 0; c < CALLS; c++) {
		impl->encode(wire, half, 16, CAIS_FLOAT32, 1.0f, false, &rng);
		for (int i = 0; i < 16; i++)
			if (be_get(wire, i))
				bits[i][c / 32] |= 1u << (c % 32);
	}
	for (int i = 0; i < 16; i++) {
		int up = 0;

		for (int w = 0; w < CALLS / 32; w++)
			up += __builtin_popcount(bits[i][w]);
		/* 4000 fair coins: sd 31.6, so 6 sd */
		CHECK(abs(up - CALLS / 2) < 190, "position %d: %d of %d up", i, up, CALLS);
		for (int j = 0; j < i; j++) {
			int same = 0;

			for (int w = 0; w < CALLS / 32; w++)
				same += 32 - __builtin_popcount(bits[i][w] ^ bits[j][w]);
			CHECK(abs(same - CALLS / 2) < 190, "positions %d and %d agree %d of %d", i,
			      j, same, CALLS);
		}
	}
}

static void
test_rng_seed(void **state)
{
	(void)state;
	struct cais_rng a, b, c;

	cais_rng_seed(&a, 0);
	cais_rng_seed(&b, 0);
	cais_rng_seed(&c, 1);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_memory_not_equal(&a, &c, sizeof(a));
	for (int i = 0; i < 8; i++) {
		assert_true((a.s[i][0] | a.s[i][1]) != 0);
		for (int j = 0; j < i; j++)
			assert_true(a.s[i][0] != a.s[j][0] || a.s[i][1] != a.s[j][1]);
	}
	/* the same seed, the same rounding; another seed, another */
	enum { N = 999 };
	float v[N];
	uint8_t w1[N * 4], w2[N * 4], w3[N * 4];

	for (int i = 0; i < N; i++)
		v[i] = 0.5f;
	impl->encode(w1, v, N, CAIS_FLOAT32, 1.0f, false, &a);
	impl->encode(w2, v, N, CAIS_FLOAT32, 1.0f, false, &b);
	impl->encode(w3, v, N, CAIS_FLOAT32, 1.0f, false, &c);
	assert_memory_equal(w1, w2, sizeof(w1));
	assert_memory_not_equal(w1, w3, sizeof(w1));
	assert_memory_equal(&a, &b, sizeof(a)); /* the state advanced alike */
}

/* Round to nearest: ties to even, both signs. */
static void
test_nearest_even(void **state)
{
	(void)state;
	static const float in[] = {0.5f,       1.5f,	    2.5f,	-0.5f,	     -1.5f,
				   -2.5f,      0.3f,	    0.7f,	-2.7f,	     1e-30f,
				   -1e-30f,    0.49999997f, 8388607.5f, -8388608.5f, 16777215.0f,
				   4194304.5f, 4194305.5f};
	static const int32_t want[] = {0, 2, 2, 0,	 -2,	   -2,	     0,	      1,      -3,
				       0, 0, 0, 8388608, -8388608, 16777215, 4194304, 4194306};
	enum { N = sizeof(in) / sizeof(in[0]) };
	uint8_t wire[N * 4];

	assert_int_equal(impl->encode(wire, in, N, CAIS_FLOAT32, 1.0f, true, NULL), 0);
	for (int i = 0; i < N; i++)
		CHECK(be_get(wire, i) == want[i], "%a -> %d, want %d", (double)in[i],
		      be_get(wire, i), want[i]);
}

/* Saturation both ways, counted; NaN is 0 and not counted; inf saturates. */
static void
test_saturation(void **state)
{
	(void)state;
	const float in[] = {0x1p31f,
			    2147483520.0f,
			    -0x1p31f,
			    -2147483520.0f,
			    1e30f,
			    -1e30f,
			    INFINITY,
			    -INFINITY,
			    NAN,
			    -NAN,
			    u2f(0x7F800001u),
			    1.0f,
			    3e9f,
			    -3e9f,
			    0x1p30f,
			    -0x1p30f,
			    u2f(0xFFC12345u),
			    0.0f,
			    2147483520.0f,
			    -2147483520.0f};
	static const int32_t want[] = {INT32_MAX,  2147483520, INT32_MIN, -2147483520, INT32_MAX,
				       INT32_MIN,  INT32_MAX,  INT32_MIN, 0,	       0,
				       0,	   1,	       INT32_MAX, INT32_MIN,   1 << 30,
				       -(1 << 30), 0,	       0,	  2147483520,  -2147483520};
	enum { N = sizeof(in) / sizeof(in[0]) };
	struct cais_rng rng;
	uint8_t wire[64 * N * 4 + 1];
	float big[64 * N];

	size_t want_sat = 0;

	for (int i = 0; i < N; i++)
		want_sat += want[i] == INT32_MAX || want[i] == INT32_MIN;
	assert_int_equal(want_sat, 8);
	cais_rng_seed(&rng, 3);
	for (int nearest = 0; nearest < 2; nearest++) {
		assert_int_equal(impl->encode(wire + 1, in, N, CAIS_FLOAT32, 1.0f, nearest, &rng),
				 want_sat);
		for (int i = 0; i < N; i++)
			CHECK(be_get(wire + 1, i) == want[i], "nearest %d: %a -> %d, want %d",
			      nearest, (double)in[i], be_get(wire + 1, i), want[i]);
		/* many copies: the vector loop and its tail count alike */
		for (int i = 0; i < 64 * N; i++)
			big[i] = in[i % N];
		for (size_t n = 0; n <= 64 * N; n += 37) {
			size_t want_n = 0;

			for (size_t i = 0; i < n; i++)
				want_n += want[i % N] == INT32_MAX || want[i % N] == INT32_MIN;
			assert_int_equal(
			    impl->encode(wire + 1, big, n, CAIS_FLOAT32, 1.0f, nearest, &rng),
			    want_n);
			for (size_t i = 0; i < n; i++)
				assert_int_equal(be_get(wire + 1, i), want[i % N]);
		}
	}
	/* the scale pushes out of range */
	float v[3] = {3e6f, -3e6f, 1e6f};

	assert_int_equal(impl->encode(wire, v, 3, CAIS_FLOAT32, 1024.0f, true, NULL), 2);
	assert_int_equal(be_get(wire, 0), INT32_MAX);
	assert_int_equal(be_get(wire, 1), INT32_MIN);
	assert_int_equal(be_get(wire, 2), 1024000000);
	/* 16-bit inputs */
	uint16_t h[5] = {0x7C00, 0xFC00, 0x7E00, 0x7BFF, 0x3C00}; /* inf -inf NaN 65504 1 */

	assert_int_equal(impl->encode(wire, h, 5, CAIS_FLOAT16, 65536.0f, true, NULL), 3);
	assert_int_equal(be_get(wire, 0), INT32_MAX);
	assert_int_equal(be_get(wire, 1), INT32_MIN);
	assert_int_equal(be_get(wire, 2), 0);
	assert_int_equal(be_get(wire, 3), INT32_MAX);
	assert_int_equal(be_get(wire, 4), 65536);
	uint16_t b[4] = {0x7F80, 0xFF80, 0xFFC1, 0x4F00}; /* inf -inf NaN 2^31 */

	assert_int_equal(impl->encode(wire, b, 4, CAIS_BFLOAT16, 1.0f, false, &rng), 3);
	assert_int_equal(be_get(wire, 0), INT32_MAX);
	assert_int_equal(be_get(wire, 1), INT32_MIN);
	assert_int_equal(be_get(wire, 2), 0);
	assert_int_equal(be_get(wire, 3), INT32_MAX);
}

/* Widening on all 65536 patterns: the helpers against the definition, the
 * bulk to_f32 against the helpers. */
static void
test_widen_all(void **state)
{
	(void)state;
	uint16_t *h = malloc(65536 * 2 + 2);
	float *f = malloc(65537 * sizeof(float));

	assert_non_null(h);
	assert_non_null(f);
	for (uint32_t i = 0; i < 65536; i++) {
		uint16_t x = (uint16_t)i;
		float b = cais_bf16_to_f32(x), g = cais_f16_to_f32(x);
		double rb = ref_widen(x, 8, 7), rg = ref_widen(x, 5, 10);

		if (isnan(rb)) /* payload kept as is */
			CHECK(f2u(b) == (uint32_t)x << 16, "bf16 %04x -> %08x", x, f2u(b));
		else
			CHECK((double)b == rb && !signbit(b) == !(x & 0x8000), "bf16 %04x -> %a", x,
			      (double)b);
		if (isnan(rg)) /* quiet, payload kept, as F16C does */
			CHECK(f2u(g) == (((uint32_t)(x & 0x8000) << 16) | 0x7FC00000u |
					 ((uint32_t)(x & 0x3FF) << 13)),
			      "f16 %04x -> %08x", x, f2u(g));
		else
			CHECK((double)g == rg && !signbit(g) == !(x & 0x8000), "f16 %04x -> %a", x,
			      (double)g);
	}
	/* the bulk conversion, from an unaligned source */
	for (uint32_t i = 0; i < 65536; i++)
		put16((uint8_t *)h + 1, i, (uint16_t)i);
	impl->to_f32(f + 1, (uint8_t *)h + 1, 65536, CAIS_BFLOAT16);
	for (uint32_t i = 0; i < 65536; i++)
		CHECK(f2u(f[1 + i]) == f2u(cais_bf16_to_f32((uint16_t)i)), "bf16 bulk %04x", i);
	impl->to_f32(f + 1, (uint8_t *)h + 1, 65536, CAIS_FLOAT16);
	for (uint32_t i = 0; i < 65536; i++)
		CHECK(f2u(f[1 + i]) == f2u(cais_f16_to_f32((uint16_t)i)), "f16 bulk %04x", i);
	free(h);
	free(f);
}

/* Narrowing: the helpers against the double reference on every exponent and
 * the ties, the bulk from_f32 against the helpers. */
static void
test_narrow(void **state)
{
	(void)state;
	size_t n;
	uint32_t *pat = narrow_patterns(&n);
	float *f = malloc(n * sizeof(float));
	uint8_t *out = malloc(n * 2 + 1);

	assert_non_null(f);
	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		f[i] = u2f(pat[i]);
		check_narrow(f[i], cais_f32_to_bf16(f[i]), true);
		check_narrow(f[i], cais_f32_to_f16(f[i]), false);
	}
	impl->from_f32(out + 1, f, n, CAIS_BFLOAT16, 1.0f);
	for (size_t i = 0; i < n; i++)
		CHECK(get16(out + 1, i) == cais_f32_to_bf16(f[i]), "bf16 bulk %08x -> %04x", pat[i],
		      get16(out + 1, i));
	impl->from_f32(out + 1, f, n, CAIS_FLOAT16, 1.0f);
	for (size_t i = 0; i < n; i++)
		CHECK(get16(out + 1, i) == cais_f32_to_f16(f[i]), "f16 bulk %08x -> %04x", pat[i],
		      get16(out + 1, i));

	/* known patterns */
	assert_int_equal(cais_f32_to_bf16(1.0f), 0x3F80);
	assert_int_equal(cais_f32_to_bf16(u2f(0x3F808000u)), 0x3F80); /* tie, even */
	assert_int_equal(cais_f32_to_bf16(u2f(0x3F818000u)), 0x3F82); /* tie, up to even */
	assert_int_equal(cais_f32_to_bf16(u2f(0x3F808001u)), 0x3F81);
	assert_int_equal(cais_f32_to_bf16(u2f(0x7F7FFFFFu)), 0x7F80); /* overflow */
	assert_int_equal(cais_f32_to_bf16(u2f(0xFF800000u)), 0xFF80);
	assert_int_equal(cais_f32_to_bf16(u2f(0x00000001u)), 0x0000);
	assert_int_equal(cais_f32_to_bf16(u2f(0x00018000u)), 0x0002);
	assert_int_equal(cais_f32_to_bf16(u2f(0x7F800001u)), 0x7FC0);
	assert_int_equal(cais_f32_to_bf16(u2f(0xFFFFFFFFu)), 0xFFC0);
	assert_int_equal(cais_f32_to_f16(65504.0f), 0x7BFF);
	assert_int_equal(cais_f32_to_f16(65519.996f), 0x7BFF);
	assert_int_equal(cais_f32_to_f16(65520.0f), 0x7C00);
	assert_int_equal(cais_f32_to_f16(-1e10f), 0xFC00);
	assert_int_equal(cais_f32_to_f16(0x1p-14f), 0x0400);
	assert_int_equal(cais_f32_to_f16(0x1p-24f), 0x0001);
	assert_int_equal(cais_f32_to_f16(0x1p-25f), 0x0000);
	assert_int_equal(cais_f32_to_f16(-0x1p-25f), 0x8000);
	assert_int_equal(cais_f32_to_f16(u2f(0x33000001u)), 0x0001);
	assert_int_equal(cais_f32_to_f16(0x1.8p-24f), 0x0002);
	assert_int_equal(cais_f32_to_f16(0x1.8p-23f), 0x0003);
	assert_int_equal(cais_f32_to_f16(0x1.ffcp-15f), 0x0400); /* subnormal rounds to normal */
	assert_int_equal(cais_f32_to_f16(1.0f + 0x1p-11f), 0x3C00);
	assert_int_equal(cais_f32_to_f16(1.0f + 0x3p-11f), 0x3C02);
	assert_int_equal(cais_f32_to_f16(u2f(0x7FA5A5A5u)), 0x7F2D);
	assert_int_equal(cais_f32_to_f16(u2f(0x7F800001u)), 0x7E00);
	free(pat);
	free(f);
	free(out);
}

/* from_f32 multiplies first (avg's 1/n), in fp32. */
static void
test_from_f32_mul(void **state)
{
	(void)state;
	enum { N = 203 };
	float in[N];
	uint8_t out[N * 4 + 1];
	const float mul = 1.0f / 3.0f;

	for (int i = 0; i < N; i++)
		in[i] = rnd_float();
	for (size_t t = 0; t < 3; t++) {
		enum cais_datatype dt = float_types[t];

		impl->from_f32(out + 1, in, N, dt, mul);
		for (int i = 0; i < N; i++) {
			float y = in[i] * mul;

			if (dt == CAIS_FLOAT32) {
				float got = getf(out + 1, i);

				CHECK(f2u(got) == f2u(y) || (isnan(got) && isnan(y)),
				      "%a x 1/3 -> %a", (double)in[i], (double)got);
			} else {
				check_narrow(y, get16(out + 1, i), dt == CAIS_BFLOAT16);
			}
		}
	}
	/* to_f32 of fp32 is a copy */
	float back[N];

	impl->to_f32(back, in, N, CAIS_FLOAT32);
	assert_memory_equal(back, in, sizeof(in));
}

static float
ref_op_f32(float a, float b, enum cais_redop op)
{
	switch (op) {
	case CAIS_OP_MAX:
		if (isnan(b))
			return b;
		if (isnan(a))
			return a;
		return b > a ? b : a;
	case CAIS_OP_MIN:
		if (isnan(b))
			return b;
		if (isnan(a))
			return a;
		return b < a ? b : a;
	default:
		return a + b;
	}
}

static int32_t
ref_op_i32(int32_t a, int32_t b, enum cais_redop op)
{
	int64_t s = (int64_t)a + b;

	switch (op) {
	case CAIS_OP_MAX:
		return b > a ? b : a;
	case CAIS_OP_MIN:
		return b < a ? b : a;
	default:
		return s > INT32_MAX ? INT32_MAX : s < INT32_MIN ? INT32_MIN : (int32_t)s;
	}
}

static void
test_reduce(void **state)
{
	(void)state;
	enum { N = 1029 };
	float *a = malloc((N + 1) * sizeof(float)), *b = malloc((N + 1) * sizeof(float));
	int32_t ia[N + 1], ib[N + 1];

	assert_non_null(a);
	assert_non_null(b);
	for (int op = CAIS_OP_SUM; op <= CAIS_OP_MIN; op++) {
		float want[N];
		int32_t iwant[N];

		for (int i = 0; i < N; i++) {
			/* NaN only on one side for sum: which payload wins when both are
			 * NaN is the hardware's choice */
			a[1 + i] = (float)rnd_uniform(-1e3, 1e3);
			b[1 + i] = (i % 5 == 0) ? rnd_float() : (float)rnd_uniform(-1e3, 1e3);
			if (op != CAIS_OP_SUM && op != CAIS_OP_AVG && i % 7 == 0)
				a[1 + i] = rnd_float();
			want[i] = ref_op_f32(a[1 + i], b[1 + i], (enum cais_redop)op);
			ia[1 + i] = rnd_i32();
			ib[1 + i] = rnd_i32();
			iwant[i] = ref_op_i32(ia[1 + i], ib[1 + i], (enum cais_redop)op);
		}
		/* signed zeros: max / min keep acc */
		a[1] = 0.0f;
		b[1] = -0.0f;
		want[0] = 0.0f;
		impl->reduce_f32(a + 1, b + 1, N, (enum cais_redop)op);
		for (int i = 0; i < N; i++)
			CHECK(f2u(a[1 + i]) == f2u(want[i]) ||
				  (isnan(want[i]) && isnan(a[1 + i]) && op != CAIS_OP_MAX &&
				   op != CAIS_OP_MIN),
			      "op %d: %a, want %a", op, (double)a[1 + i], (double)want[i]);
		impl->reduce_i32(ia + 1, ib + 1, N, (enum cais_redop)op);
		for (int i = 0; i < N; i++)
			CHECK(ia[1 + i] == iwant[i], "op %d: %d, want %d", op, ia[1 + i], iwant[i]);
	}
	/* the saturation cases themselves */
	int32_t x[4] = {INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN};
	int32_t y[4] = {1, -1, INT32_MIN, INT32_MIN};

	impl->reduce_i32(x, y, 4, CAIS_OP_SUM);
	assert_int_equal(x[0], INT32_MAX);
	assert_int_equal(x[1], INT32_MIN);
	assert_int_equal(x[2], -1);
	assert_int_equal(x[3], INT32_MIN);
	free(a);
	free(b);
}

/* ------------------------------------------------------------- BLOCK16 */

static int16_t
b16_m(const uint8_t *payload, size_t n, size_t i)
{
	const uint8_t *p = payload + cais_b16_exp_bytes((uint32_t)n) + 2 * i;

	return (int16_t)((uint16_t)p[0] << 8 | p[1]);
}

/*
 * The model of BLOCK16 encode, to nearest, from the format's definition in
 * double: y = fl32(value x scale), NaN -> 0; per block e = max(0,
 * floor(log2 max |y|) - 14); m = y / 2^e to nearest even, within +-32767; a
 * block reaching 2^55 is zeros and counted.
 */
static size_t
b16_model(uint8_t *d, const void *src, size_t n, enum cais_datatype dt, float scale)
{
	uint8_t *mant = d + cais_b16_exp_bytes((uint32_t)n);
	size_t sat = 0;

	memset(d, 0, cais_payload_bytes(CAIS_DT_BLOCK16, (uint32_t)n));
	for (size_t b = 0; b * CAIS_B16_BLOCK < n; b++) {
		size_t i0 = b * CAIS_B16_BLOCK, m = n - i0 < CAIS_B16_BLOCK ? n - i0 : CAIS_B16_BLOCK;
		double y[CAIS_B16_BLOCK], mx = 0;
		int e = 0, ex;

		for (size_t k = 0; k < m; k++) {
			float v = get_as_f32(src, i0 + k, dt) * scale;

			y[k] = isnan(v) ? 0.0 : (double)v;
			mx = fabs(y[k]) > mx ? fabs(y[k]) : mx;
		}
		if (!(mx < 0x1p55)) {
			sat += m;
			continue;
		}
		if (mx >= 0x1p15) {
			(void)frexp(mx, &ex);
			e = ex - 1 - 14;
		}
		d[b] = (uint8_t)e;
		for (size_t k = 0; k < m; k++) {
			double q = nearbyint(ldexp(y[k], -e));

			q = q > 32767 ? 32767 : q < -32767 ? -32767 : q;
			mant[2 * (i0 + k)] = (uint8_t)((uint16_t)(int16_t)q >> 8);
			mant[2 * (i0 + k) + 1] = (uint8_t)(uint16_t)(int16_t)q;
		}
	}
	return sat;
}

/* Encode to nearest and decode agree with the model, on every kind of float. */
static void
test_b16_model(void **state)
{
	static const size_t sizes[] = {1, 5, 31, 32, 33, 64, 100, 2048};
	static const float scales[] = {1.0f, 0x1p24f, 0x1p40f, 0x1p-10f, 3.0f};
	uint8_t src[2048 * 4], got[8192], want[8192];
	float dec[2048];

	(void)state;
	for (size_t t = 0; t < 3; t++)
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
			for (size_t k = 0; k < sizeof(scales) / sizeof(scales[0]); k++) {
				enum cais_datatype dt = float_types[t];
				size_t n = sizes[si], len = cais_payload_bytes(CAIS_DT_BLOCK16, n);

				fill_dt(src, n, dt);
				memset(got, 0xA5, sizeof(got));
				size_t s1 = impl->encode_b16(got, src, n, dt, scales[k], true, NULL);
				size_t s2 = b16_model(want, src, n, dt, scales[k]);

				CHECK(s1 == s2 && memcmp(got, want, len) == 0,
				      "b16 encode dt %d n %zu scale %g: sat %zu/%zu", dt, n,
				      (double)scales[k], s1, s2);
				CHECK(got[len] == 0xA5, "b16 encode wrote past its payload");
				for (size_t b = 0; b < cais_b16_exp_bytes(n); b++)
					CHECK(got[b] <= CAIS_B16_EMAX_DATA, "exponent %u", got[b]);
				/* decode: value = m x 2^e / scale, one fp32 rounding */
				impl->decode_b16(dec, got, n, CAIS_FLOAT32, 1.0f / scales[k]);
				for (size_t i = 0; i < n; i++) {
					double v = ldexp((double)b16_m(got, n, i), got[i / 32]) *
						   (double)(1.0f / scales[k]);

					CHECK(dec[i] == (float)v, "b16 decode %zu: %a, want %a", i,
					      (double)dec[i], v);
				}
			}
}

/*
 * bf16 inputs at a power-of-two scale: an element within 2^7 of its
 * block's largest comes back exactly, any other within half a step.
 */
static void
test_b16_round_trip(void **state)
{
	enum { N = 4096 };
	uint16_t *x = malloc(N * 2), *y = malloc(N * 2);
	uint8_t *w = malloc(cais_payload_bytes(CAIS_DT_BLOCK16, N));
	struct cais_rng rng;

	(void)state;
	assert_non_null(x);
	assert_non_null(y);
	assert_non_null(w);
	cais_rng_seed(&rng, 7);
	for (size_t i = 0; i < N; i++) /* magnitudes over 2^-20..2^20, outliers among them */
		x[i] = cais_f32_to_bf16((float)(rnd_uniform(-1, 1) *
						ldexp(1.0, (int)(rnd32() % 41) - 20)));
	for (int nearest = 1; nearest >= 0; nearest--) {
		assert_int_equal(impl->encode_b16(w, x, N, CAIS_BFLOAT16, 0x1p24f, nearest, &rng), 0);
		impl->decode_b16(y, w, N, CAIS_BFLOAT16, 0x1p-24f);
		for (size_t b = 0; b < N / 32; b++) {
			float mx = 0;

			for (size_t k = 0; k < 32; k++)
				mx = fmaxf(mx, fabsf(cais_bf16_to_f32(x[32 * b + k])));
			for (size_t k = 0; k < 32; k++) {
				size_t i = 32 * b + k;
				float a = cais_bf16_to_f32(x[i]), r = cais_bf16_to_f32(y[i]);
				double step = ldexp(1.0, w[b]) * 0x1p-24;

				if (fabsf(a) >= mx * 0x1p-7f)
					CHECK(r == a, "element %zu: %a came back %a", i, (double)a,
					      (double)r);
				else /* m's rounding, then bf16's */
					CHECK(fabs(r - a) <= step * (nearest ? 0.5 : 1.0) +
								 fabs((double)a) * 0x1p-8,
					      "element %zu: %a came back %a", i, (double)a,
					      (double)r);
			}
		}
	}
	free(x);
	free(y);
	free(w);
}

/* Blocks that cannot be carried: inf, NaN (as 0), 2^55; int32 refused. */
static void
test_b16_saturation(void **state)
{
	float x[96];
	uint8_t w[4 + 2 * 96];
	float back[96];

	(void)state;
	for (size_t i = 0; i < 96; i++)
		x[i] = (float)i;
	x[5] = INFINITY;	 /* block 0 saturates */
	x[40] = NAN;		 /* block 1: NaN counts as 0 */
	x[70] = 0x1p55f / 1024;	 /* block 2 at scale 1024: 2^55, saturates */
	x[71] = -0x1p54f / 1024; /* (and 2^54 alone would not) */
	assert_int_equal(impl->encode_b16(w, x, 96, CAIS_FLOAT32, 1024.0f, true, NULL), 64);
	assert_int_equal(w[0], 0);
	assert_int_equal(w[3], 0); /* padding */
	assert_int_equal(b16_m(w, 96, 6), 0);
	impl->decode_b16(back, w, 96, CAIS_FLOAT32, 1.0f / 1024);
	assert_true(back[40] == 0.0f);
	assert_true(back[41] == 41.0f);
	x[70] = 1.0f;
	assert_int_equal(impl->encode_b16(w, x, 96, CAIS_FLOAT32, 1024.0f, true, NULL), 32);
	assert_int_equal(w[2], 54 - 14);
	int32_t i32[4] = {1, 2, 3, 4};

	assert_int_equal(impl->encode_b16(w, i32, 4, CAIS_INT32, 1.0f, true, NULL), 4);
}

/* Stochastic rounding of m is unbiased: a small element beside a large one. */
static void
test_b16_stochastic(void **state)
{
	float x[32] = {0}, back[32];
	uint8_t w[4 + 64];
	struct cais_rng rng;
	double sum = 0;
	enum { T = 20000 };

	(void)state;
	x[0] = 30000.0f * 4; /* e = 2: a step of 4 */
	x[1] = 1.25f;	     /* 0.3125 of a step */
	cais_rng_seed(&rng, 11);
	for (int t = 0; t < T; t++) {
		impl->encode_b16(w, x, 32, CAIS_FLOAT32, 1.0f, false, &rng);
		impl->decode_b16(back, w, 32, CAIS_FLOAT32, 1.0f);
		CHECK(back[1] == 0.0f || back[1] == 4.0f, "%g", (double)back[1]);
		assert_true(back[0] == x[0]);
		sum += back[1];
	}
	/* mean 1.25, sd of the mean 4 x sqrt(p(1-p)) / sqrt(T) = 0.013 */
	CHECK(fabs(sum / T - 1.25) < 0.06, "mean %g", sum / T);
}

/* ------------------------------------------- AVX2 against scalar, bit for bit */

static void
compare_one(const struct cais_quant_ops *v, size_t n, size_t off)
{
	const struct cais_quant_ops *s = &cais_quant_scalar;
	const size_t pad = 40; /* the bytes after n elements must stay untouched */
	size_t cap = n * 4 + pad + off;
	uint8_t *src = malloc(cap), *d1 = malloc(cap), *d2 = malloc(cap);
	float *fa = malloc((n + 9) * 4), *fb = malloc((n + 9) * 4), *fc = malloc((n + 9) * 4);
	struct cais_rng r1, r2;

	assert_non_null(src);
	assert_non_null(d1);
	assert_non_null(d2);
	assert_non_null(fa);
	assert_non_null(fb);
	assert_non_null(fc);
	cais_rng_seed(&r1, n);
	r2 = r1;
	for (size_t t = 0; t < 4; t++) {
		enum cais_datatype dt = t < 3 ? float_types[t] : CAIS_INT32;
		/* powers of two in and out of the range of decode's fp32 shortcut */
		static const float scales[] = {1.0f,	 1024.0f,  3.0f,     1e-3f,	0x1p26f,
					       0x1p126f, 0x1p-96f, 0x1p-97f, 0x1p-100f, 0x1p127f};
		float scale = scales[rnd32() % 10];

		fill_dt(src + off, n, dt);
		for (int nearest = 1; nearest >= 0; nearest--) {
			memset(d1, 0xA5, cap);
			memset(d2, 0xA5, cap);
			size_t s1 = s->encode(d1 + off, src + off, n, dt, scale, nearest, &r1);
			size_t s2 = v->encode(d2 + off, src + off, n, dt, scale, nearest, &r2);

			CHECK(s1 == s2 && memcmp(d1, d2, cap) == 0,
			      "encode n %zu dt %zu nearest %d", n, t, nearest);
			CHECK(memcmp(&r1, &r2, sizeof(r1)) == 0, "rng after n %zu", n);
			if (dt == CAIS_INT32)
				continue;
			memset(d1, 0xA5, cap);
			memset(d2, 0xA5, cap);
			s1 = s->encode_b16(d1 + off, src + off, n, dt, scale, nearest, &r1);
			s2 = v->encode_b16(d2 + off, src + off, n, dt, scale, nearest, &r2);
			CHECK(s1 == s2 && memcmp(d1, d2, cap) == 0,
			      "encode_b16 n %zu dt %zu nearest %d", n, t, nearest);
			CHECK(memcmp(&r1, &r2, sizeof(r1)) == 0, "rng after b16 n %zu", n);
		}
		if (dt != CAIS_INT32) {
			/* decode any BLOCK16 payload: random exponents (0..255) and m */
			for (size_t i = 0; i < cais_payload_bytes(CAIS_DT_BLOCK16, n); i++)
				src[off + i] = (uint8_t)rnd32();
			memset(d1, 0xA5, cap);
			memset(d2, 0xA5, cap);
			s->decode_b16(d1 + off, src + off, n, dt, 1.0f / scale);
			v->decode_b16(d2 + off, src + off, n, dt, 1.0f / scale);
			CHECK(memcmp(d1, d2, cap) == 0, "decode_b16 n %zu dt %zu", n, t);
		}
		/* decode random fixed point (and avg) */
		fill_dt(src + off, n, CAIS_INT32);
		unsigned int avg = (unsigned int)(rnd32() % 4 ? 1 + rnd32() % 300 : rnd32());
		float inv = rnd32() % 2 ? 1.0f / scale : (float)(1.0 / ((double)scale * avg));

		if (rnd32() % 8 == 0) /* NaN results: 0 x inf, or a NaN with a payload */
			inv = rnd32() % 2 ? INFINITY : u2f(0x7FE12345u | (rnd32() & 0x80000000u));

		memset(d1, 0xA5, cap);
		memset(d2, 0xA5, cap);
		s->decode(d1 + off, src + off, n, dt, inv, avg);
		v->decode(d2 + off, src + off, n, dt, inv, avg);
		CHECK(memcmp(d1, d2, cap) == 0, "decode n %zu dt %zu avg %u", n, t, avg);
		if (dt == CAIS_INT32)
			continue;
		/* to_f32 and from_f32 */
		fill_dt(src + off, n, dt);
		memset(fa, 0xA5, (n + 9) * 4);
		memset(fb, 0xA5, (n + 9) * 4);
		s->to_f32(fa + 1, src + off, n, dt);
		v->to_f32(fb + 1, src + off, n, dt);
		CHECK(memcmp(fa, fb, (n + 9) * 4) == 0, "to_f32 n %zu dt %zu", n, t);
		for (size_t i = 0; i < n; i++)
			fa[1 + i] = rnd_float();
		float mul = rnd32() % 2 ? 1.0f : 1.0f / (float)(1 + rnd32() % 255);

		memset(d1, 0xA5, cap);
		memset(d2, 0xA5, cap);
		s->from_f32(d1 + off, fa + 1, n, dt, mul);
		v->from_f32(d2 + off, fa + 1, n, dt, mul);
		CHECK(memcmp(d1, d2, cap) == 0, "from_f32 n %zu dt %zu", n, t);
	}
	/* reductions, NaN included (one side for sum) */
	for (int op = CAIS_OP_SUM; op <= CAIS_OP_MIN; op++) {
		for (size_t i = 0; i < n + 9; i++) {
			fa[i] = rnd_float();
			fc[i] = rnd_float();
			if ((op == CAIS_OP_SUM || op == CAIS_OP_AVG) && isnan(fa[i]) &&
			    isnan(fc[i]))
				fc[i] = 1.0f;
		}
		memcpy(fb, fa, (n + 9) * 4);
		s->reduce_f32(fa + 1, fc + 1, n, (enum cais_redop)op);
		v->reduce_f32(fb + 1, fc + 1, n, (enum cais_redop)op);
		CHECK(memcmp(fa, fb, (n + 9) * 4) == 0, "reduce_f32 n %zu op %d", n, op);

		int32_t *ia = (int32_t *)(void *)fa, *ib = (int32_t *)(void *)fb,
			*ic = (int32_t *)(void *)fc;

		for (size_t i = 0; i < n + 9; i++) {
			ia[i] = rnd_i32();
			ic[i] = rnd_i32();
		}
		memcpy(ib, ia, (n + 9) * 4);
		s->reduce_i32(ia + 1, ic + 1, n, (enum cais_redop)op);
		v->reduce_i32(ib + 1, ic + 1, n, (enum cais_redop)op);
		CHECK(memcmp(ia, ib, (n + 9) * 4) == 0, "reduce_i32 n %zu op %d", n, op);
	}
	free(src);
	free(d1);
	free(d2);
	free(fa);
	free(fb);
	free(fc);
}

static void
test_avx2_equals_scalar(void **state)
{
	(void)state;
	const struct cais_quant_ops *const *vs = vector_impls();

	if (vs[0] == NULL)
		skip();
	for (; *vs != NULL; vs++) {
		const struct cais_quant_ops *v = *vs;

		impl = v;
		for (size_t n = 0; n <= 70; n++)
			for (size_t off = 0; off < 4; off++)
				compare_one(v, n, off);
		static const size_t large[] = {1000, 2048, 4099, 65536 + 5, 1 << 20};

		for (size_t i = 0; i < sizeof(large) / sizeof(large[0]); i++)
			compare_one(v, large[i], 1 + i % 3);
	}
}

/* AVX2's encode, decode and conversions on the 65536 patterns of bf16 and
 * fp16 and on the fp32 pattern set (the bulk functions above use random data). */
static void
patterns_one(const struct cais_quant_ops *v)
{
	const struct cais_quant_ops *s = &cais_quant_scalar;

	impl = v;
	size_t n;
	uint32_t *pat = narrow_patterns(&n);
	uint8_t *w1 = malloc(n * 4 + 1), *w2 = malloc(n * 4 + 1);
	uint16_t *h = malloc(65536 * 2);

	assert_non_null(w1);
	assert_non_null(w2);
	assert_non_null(h);
	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	for (size_t t = 0; t < 3; t++) {
		enum cais_datatype dt = float_types[t];
		const void *src = dt == CAIS_FLOAT32 ? (const void *)pat : (const void *)h;
		size_t cnt = dt == CAIS_FLOAT32 ? n : 65536;
		static const float scales[] = {1.0f, 1024.0f, 3.0f, 0x1p-20f};

		for (size_t k = 0; k < 4; k++) {
			size_t a = s->encode(w1 + 1, src, cnt, dt, scales[k], true, NULL);
			size_t b = v->encode(w2 + 1, src, cnt, dt, scales[k], true, NULL);

			CHECK(a == b && memcmp(w1 + 1, w2 + 1, cnt * 4) == 0,
			      "encode dt %d scale %g", dt, (double)scales[k]);
			/* decode of the patterns as fixed point */
			s->decode(w1 + 1, pat, n, dt, 1.0f / scales[k], 1);
			v->decode(w2 + 1, pat, n, dt, 1.0f / scales[k], 1);
			CHECK(memcmp(w1 + 1, w2 + 1, n * esize(dt)) == 0, "decode dt %d", dt);
		}
	}
	free(pat);
	free(w1);
	free(w2);
	free(h);
}

static void
test_avx2_patterns(void **state)
{
	(void)state;
	const struct cais_quant_ops *const *vs = vector_impls();

	if (vs[0] == NULL)
		skip();
	for (; *vs != NULL; vs++)
		patterns_one(*vs);
}

/* Stochastic rounding as well: the AVX2 path draws the same numbers. */
static void
stochastic_same_stream_one(const struct cais_quant_ops *v)
{
	const struct cais_quant_ops *s = &cais_quant_scalar;

	impl = v;
	enum { N = 100003 };
	float *f = malloc(N * 4);
	uint8_t *w1 = malloc(N * 4), *w2 = malloc(N * 4);
	struct cais_rng r1, r2;

	assert_non_null(f);
	assert_non_null(w1);
	assert_non_null(w2);
	for (int i = 0; i < N; i++)
		f[i] = (float)rnd_uniform(-10, 10);
	cais_rng_seed(&r1, 99);
	r2 = r1;
	for (size_t i = 0, len = 1; i < N; i += len, len = len * 2 + 3) {
		if (len > N - i)
			len = N - i;
		s->encode(w1 + 4 * i, f + i, len, CAIS_FLOAT32, 1.0f, false, &r1);
		v->encode(w2 + 4 * i, f + i, len, CAIS_FLOAT32, 1.0f, false, &r2);
	}
	assert_memory_equal(w1, w2, N * 4);
	assert_memory_equal(&r1, &r2, sizeof(r1));
	free(f);
	free(w1);
	free(w2);
}

static void
test_avx2_stochastic_same_stream(void **state)
{
	(void)state;
	const struct cais_quant_ops *const *vs = vector_impls();

	if (vs[0] == NULL)
		skip();
	for (; *vs != NULL; vs++)
		stochastic_same_stream_one(*vs);
}

/* ------------------- BLOCK16: AVX-512 == AVX2 == scalar, bit for bit */

/*
 * The implementations BLOCK16 is compared over: scalar, then AVX2 and
 * AVX-512 where the CPU has them. Says once what is not compared.
 */
static size_t
b16_impls(const struct cais_quant_ops *v[3])
{
	static bool said;
	size_t n = 0;

	v[n++] = &cais_quant_scalar;
	if (cais_quant_avx2() != NULL)
		v[n++] = cais_quant_avx2();
	if (cais_quant_avx512() != NULL)
		v[n++] = cais_quant_avx512();
	if (!said) {
		said = true;
		if (cais_quant_avx2() == NULL)
			print_message("AVX2/F16C not available: BLOCK16 vector comparisons "
				      "skipped\n");
		else if (cais_quant_avx512() == NULL)
			print_message("AVX-512 not available: BLOCK16 compared for AVX2 == "
				      "scalar only (the AVX-512 comparison is skipped)\n");
		else
			print_message("BLOCK16: comparing avx512 == avx2 == scalar\n");
	}
	return n;
}

static int
b16_log2(float scale)
{
	int e;

	(void)frexpf(scale, &e);
	return e - 1;
}

/*
 * One value of a BLOCK16 test block whose largest is about 2^top (value
 * domain): mostly within 2^40 below it, with what the encoders treat
 * apart: m's rounding ties ((k + 1/2) x 2^(top - 15 - j)), values whose m
 * rounds to 32768 and is clamped, the block's top itself, zeros of both
 * signs, denormals, NaN, and rarely inf (the block is then not carried).
 */
static float
b16_value(int top)
{
	float s = (rnd32() & 1) ? -1.0f : 1.0f;
	uint32_t r = rnd32() % 64;

	if (r == 0)
		return u2f(0x7F800001u | (rnd32() & 0x803FFFFFu) | (rnd32() & 0x400000u));
	if (r == 1)
		return rnd32() % 8 ? 0.0f : s * INFINITY;
	if (r == 2)
		return s * 0.0f;
	if (r == 3)
		return u2f(rnd32() & 0x807FFFFFu);
	if (r < 12)
		return ldexpf((float)((int)(rnd32() % 65535) - 32767) + 0.5f,
			      top - 15 - (int)(rnd32() % 4));
	if (r < 16)
		return s * ldexpf(32768.0f - ldexpf(1.0f, -(int)(rnd32() % 9)), top - 15);
	if (r == 16)
		return s * (rnd32() & 1 ? ldexpf(1.0f, top) : ldexpf(2.0f - 0x1p-23f, top));
	return s * ldexpf((float)rnd_uniform(1, 2), top - (int)(rnd32() % 41));
}

/*
 * n elements of dt at p in blocks of 32 (from element 0), each block's top
 * drawn so that at this scale some blocks reach 2^55 (not carried), most do
 * not, and the 16-bit types stay mostly in their range.
 */
static void
fill_b16(void *p, size_t n, enum cais_datatype dt, float scale)
{
	int hi = 56 - b16_log2(scale), lo = hi - 75, top = 0;

	if (dt == CAIS_FLOAT16) {
		hi = 16;
		lo = -20;
	} else if (lo < -120) {
		lo = -120;
	}
	for (size_t i = 0; i < n; i++) {
		if (i % CAIS_B16_BLOCK == 0)
			top = lo + (int)(rnd32() % (uint32_t)(hi - lo));
		float v = b16_value(top);

		switch (dt) {
		case CAIS_BFLOAT16:
			put16(p, i, cais_f32_to_bf16(v));
			break;
		case CAIS_FLOAT16:
			put16(p, i, cais_f32_to_f16(v));
			break;
		default:
			putf(p, i, v);
			break;
		}
	}
}

static const float b16_scales[] = {1.0f, 0x1p24f, 0x1p-10f, 3.0f, 0x1p40f, 1024.0f, 1e-3f};
#define B16_NSCALES (sizeof(b16_scales) / sizeof(b16_scales[0]))

/*
 * encode_b16 of n elements of dt at src by every implementation, rng from
 * the same state, into buffers of cap bytes at offset off: the same counts,
 * the same bytes (the guard bytes after the payload untouched), the same
 * random state after. *rng is advanced as the calls advance it.
 */
static void
b16_encode_same(const void *src, size_t n, enum cais_datatype dt, float scale, bool nearest,
		struct cais_rng *rng, size_t off, const char *what)
{
	const struct cais_quant_ops *v[3];
	size_t nv = b16_impls(v), len = cais_payload_bytes(CAIS_DT_BLOCK16, (uint32_t)n);
	size_t cap = off + len + 40, sat[3];
	uint8_t *d[3];
	struct cais_rng r[3];

	for (size_t k = 0; k < nv; k++) {
		d[k] = malloc(cap);
		assert_non_null(d[k]);
		memset(d[k], 0xA5, cap);
		r[k] = *rng;
		impl = v[k];
		sat[k] = v[k]->encode_b16(d[k] + off, src, n, dt, scale, nearest, &r[k]);
	}
	for (size_t k = 1; k < nv; k++) {
		size_t at = 0;

		impl = v[k];
		while (at < cap && d[k][at] == d[0][at])
			at++;
		CHECK(sat[k] == sat[0] && at == cap,
		      "%s: encode_b16 n %zu dt %d scale %g nearest %d: sat %zu (scalar %zu), "
		      "first difference at byte %zu of %zu",
		      what, n, dt, (double)scale, nearest, sat[k], sat[0], at, len);
		CHECK(memcmp(&r[k], &r[0], sizeof(r[0])) == 0,
		      "%s: random state after encode_b16 n %zu nearest %d", what, n, nearest);
	}
	*rng = r[0];
	for (size_t k = 0; k < nv; k++)
		free(d[k]);
}

/* decode_b16 of a payload by every implementation: the same bytes. */
static void
b16_decode_same(const void *payload, size_t n, enum cais_datatype dt, float inv, size_t off,
		const char *what)
{
	const struct cais_quant_ops *v[3];
	size_t nv = b16_impls(v), cap = off + n * esize(dt) + 40;
	uint8_t *d[3];

	for (size_t k = 0; k < nv; k++) {
		d[k] = malloc(cap);
		assert_non_null(d[k]);
		memset(d[k], 0xA5, cap);
		v[k]->decode_b16(d[k] + off, payload, n, dt, inv);
	}
	for (size_t k = 1; k < nv; k++) {
		size_t at = 0;

		impl = v[k];
		while (at < cap && d[k][at] == d[0][at])
			at++;
		CHECK(at == cap, "%s: decode_b16 n %zu dt %d inv %a: first difference at byte %zu",
		      what, n, dt, (double)inv, at);
	}
	for (size_t k = 0; k < nv; k++)
		free(d[k]);
}

/* Random blocks of every kind, every length 0..100 and some large, odd
 * offsets, both roundings, every float type and scale. */
static void
test_b16_vector_random(void **state)
{
	static const size_t large[] = {1000, 2048, 2049, 4099, 65536 + 5, 1 << 20};
	uint8_t *src = malloc((1 << 20) * 4 + 8);
	struct cais_rng rng;

	(void)state;
	if (cais_quant_avx2() == NULL) {
		b16_impls((const struct cais_quant_ops *[3]){0});
		skip();
	}
	assert_non_null(src);
	cais_rng_seed(&rng, 2024);
	for (size_t si = 0; si < 101 + sizeof(large) / sizeof(large[0]); si++) {
		size_t n = si <= 100 ? si : large[si - 101];

		for (size_t t = 0; t < 3; t++) {
			enum cais_datatype dt = float_types[t];
			float scale = b16_scales[rnd32() % B16_NSCALES];
			size_t soff = rnd32() % 4; /* unaligned source as well */

			fill_b16(src + soff, n, dt, scale);
			for (int nearest = 1; nearest >= 0; nearest--)
				b16_encode_same(src + soff, n, dt, scale, nearest, &rng, si % 4,
						"random blocks");
		}
	}
	free(src);
}

/* The stochastic stream across calls of odd lengths (partial random
 * blocks at every call's end), as one tensor is sent in chunks. */
static void
test_b16_vector_stream(void **state)
{
	enum { N = 100003 };
	uint8_t *src = malloc(N * 4);
	struct cais_rng rng;

	(void)state;
	if (cais_quant_avx2() == NULL)
		skip();
	assert_non_null(src);
	for (size_t t = 0; t < 3; t++) {
		enum cais_datatype dt = float_types[t];
		size_t es = esize(dt);

		fill_b16(src, N, dt, 0x1p24f);
		cais_rng_seed(&rng, 77 + t);
		for (size_t i = 0, len = 1; i < N; i += len, len = len * 2 + 3) {
			if (len > N - i)
				len = N - i;
			b16_encode_same(src + i * es, len, dt, 0x1p24f, false, &rng, 0, "stream");
		}
	}
	free(src);
}

/* Every bf16 and fp16 pattern, in order and shuffled into random blocks;
 * fp32 patterns (ties and edges at every exponent) with their exponents
 * as they are and folded into a carried range. Both roundings. */
static void
test_b16_vector_patterns(void **state)
{
	size_t np;
	uint32_t *pat;
	uint16_t *h = malloc(65536 * 2);
	struct cais_rng rng;

	(void)state;
	if (cais_quant_avx2() == NULL)
		skip();
	assert_non_null(h);
	pat = narrow_patterns(&np);
	cais_rng_seed(&rng, 5);
	for (int shuffled = 0; shuffled < 2; shuffled++) {
		for (uint32_t i = 0; i < 65536; i++)
			h[i] = (uint16_t)i;
		if (shuffled)
			for (uint32_t i = 65535; i > 0; i--) {
				uint32_t j = rnd32() % (i + 1);
				uint16_t x = h[i];

				h[i] = h[j];
				h[j] = x;
			}
		for (size_t k = 0; k < B16_NSCALES; k++)
			for (int nearest = 1; nearest >= 0; nearest--) {
				b16_encode_same(h, 65536, CAIS_BFLOAT16, b16_scales[k], nearest,
						&rng, 1, "bf16 patterns");
				b16_encode_same(h, 65536, CAIS_FLOAT16, b16_scales[k], nearest,
						&rng, 1, "fp16 patterns");
			}
	}
	for (int folded = 0; folded < 2; folded++) {
		if (folded) /* exponents 2^-40..2^39: most blocks carried at scale 1 */
			for (size_t i = 0; i < np; i++)
				pat[i] = (pat[i] & 0x807FFFFFu) |
					 ((((pat[i] >> 23) & 0xFFu) % 80u + 87u) << 23);
		for (size_t k = 0; k < 3; k++)
			for (int nearest = 1; nearest >= 0; nearest--)
				b16_encode_same(pat, np, CAIS_FLOAT32, b16_scales[k], nearest, &rng,
						2, "fp32 patterns");
	}
	free(pat);
	free(h);
}

/* decode_b16 of any payload (random exponents 0..255 and m, -32768
 * included) into every type, at scales whose results overflow or are
 * NaN (inf x 0) as well. */
static void
test_b16_vector_decode(void **state)
{
	static const size_t sizes[] = {1, 31, 32, 33, 64, 95, 2048, 4099, 65536 + 7};
	static const float invs[] = {0x1p-24f,	1.0f,	  1.0f / 3.0f, 0x1p100f,
				     0x1p-140f, INFINITY, 1e-3f,       0.0f /* NaN, set below */};
	uint8_t *p = malloc(cais_payload_bytes(CAIS_DT_BLOCK16, 65536 + 7) + 3);

	(void)state;
	if (cais_quant_avx2() == NULL)
		skip();
	assert_non_null(p);
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t n = sizes[si], len = cais_payload_bytes(CAIS_DT_BLOCK16, (uint32_t)n);

		for (size_t k = 0; k < sizeof(invs) / sizeof(invs[0]); k++) {
			float inv = invs[k] != 0 ? invs[k] : u2f(0xFFE12345u); /* with a payload */

			for (size_t i = 0; i < len + 3; i++)
				p[i] = (uint8_t)rnd32();
			if (k % 2) /* realistic exponents too */
				for (size_t b = 0; b < (n + 31) / 32; b++)
					p[1 + b] = (uint8_t)(rnd32() % (CAIS_B16_EMAX + 2));
			for (size_t t = 0; t < 3; t++)
				b16_decode_same(p + 1, n, float_types[t], inv, si % 4, "decode");
		}
	}
	free(p);
}

#define IMPL_TESTS                                                                                 \
	cmocka_unit_test(test_wire_format), cmocka_unit_test(test_in_place),                       \
	    cmocka_unit_test(test_round_trip_float), cmocka_unit_test(test_decode_exact_scales),   \
	    cmocka_unit_test(test_decode_narrow), cmocka_unit_test(test_int32),                    \
	    cmocka_unit_test(test_stochastic_unbiased), cmocka_unit_test(test_stochastic_lanes),   \
	    cmocka_unit_test(test_rng_seed), cmocka_unit_test(test_nearest_even),                  \
	    cmocka_unit_test(test_saturation), cmocka_unit_test(test_widen_all),                   \
	    cmocka_unit_test(test_narrow), cmocka_unit_test(test_from_f32_mul),                    \
	    cmocka_unit_test(test_reduce), cmocka_unit_test(test_b16_model),                       \
	    cmocka_unit_test(test_b16_round_trip), cmocka_unit_test(test_b16_saturation),          \
	    cmocka_unit_test(test_b16_stochastic)

int
main(void)
{
	const struct CMUnitTest common[] = {
	    cmocka_unit_test(test_selection),
	    cmocka_unit_test(test_avx2_equals_scalar),
	    cmocka_unit_test(test_avx2_patterns),
	    cmocka_unit_test(test_avx2_stochastic_same_stream),
	    cmocka_unit_test(test_b16_vector_random),
	    cmocka_unit_test(test_b16_vector_stream),
	    cmocka_unit_test(test_b16_vector_patterns),
	    cmocka_unit_test(test_b16_vector_decode),
	};
	const struct CMUnitTest per_impl[] = {IMPL_TESTS};
	int rc = 0;

	rc |= cmocka_run_group_tests_name("quant_scalar", per_impl, setup_scalar, NULL);
	if (cais_quant_avx2() != NULL)
		rc |= cmocka_run_group_tests_name("quant_avx2", per_impl, setup_avx2, NULL);
	else
		print_message("AVX2/F16C not available: group quant_avx2 skipped\n");
	if (cais_quant_avx512() != NULL)
		rc |= cmocka_run_group_tests_name("quant_avx512", per_impl, setup_avx512, NULL);
	else
		print_message("AVX-512 not available: group quant_avx512 skipped\n");
	rc |= cmocka_run_group_tests_name("quant_compare", common, NULL, NULL);
	return rc;
}
