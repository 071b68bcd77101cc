/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_numerics: the error of the in-network sum against a float64 sum.
 *
 * The path exactly as the agent and the switch take it: each of n ranks
 * encodes its fp32 tensor with the same scale (cais_quant_best()->encode,
 * the agent's code: value x scale, stochastic rounding or to nearest,
 * saturating to int32, big-endian); the switch adds the n payloads in int64
 * and saturates the sum to int32, flagging OVERFLOW (dataplane/dp_agg.c);
 * every rank decodes q x 1/scale (->decode). A tensor with a saturated
 * element at encode or an OVERFLOW at the switch falls back to the ring in
 * the agent: such trials count in ovf% and are left out of the errors.
 *
 * Scales: the static default 1024, and the manager's per-tensor rule
 * (control/manager/mgr_core.c): the largest power of two s with
 * n x max_abs x s x 2 < 2^31, max_abs the largest |x| over the ranks (the
 * manager takes last step's; here the tensor's own), clamped to
 * [2^-24, 2^30].
 *
 * Data, independent per rank: normal N(0, 1) and scaled variants (x 1e-4,
 * x 1e5); "llm": activations with outlier channels (98% of the channels
 * N(0, 0.02^2), 2% outliers of magnitude 10..100, log-uniform, the same
 * channels on every rank); "t3": Student-t with 3 degrees of freedom x 0.02.
 *
 * Metrics, over T trials of E elements: rel = ||x - ref||_2 / ||ref||_2
 * (mean over trials), maxerr = max |x - ref| / max |ref| (worst trial),
 * bias = sum (x - ref) sign(ref) / sum |ref| over all elements and trials
 * (negative: the sum shrinks toward 0; SR's is 0 within noise), ovf% (the
 * trials that fall back). For comparison, ring = the rel of the ring's fp32
 * sum (the fallback path). alarm: rel above the agent's 1e-3.
 *
 * BLOCK16 (PROTOCOL.md E4), a second table: bf16, fp16 and fp32 inputs
 * (normal, llm, t3 drawn in fp32 and rounded to the type), the scale the
 * manager gives a BLOCK16 tensor (E3: the largest power of two s with
 * max_abs x s x 2 < 2^55, in [2^-24, 2^54]). In-network: each rank's
 * ->encode_b16 (to nearest, and stochastic), the switch's exact int64 sum
 * of m x 2^e, the RESULT re-encoded per block from the sums (the smallest e
 * in 0..48 with every |round(acc / 2^e)| <= 32767, to nearest even), then
 * ->decode_b16 into the type. Against it a ring that rounds to the type at
 * every hop, as NCCL does for bf16: reduce-scatter, each of the n - 1
 * partial sums of a chunk added in fp32 and rounded to the type (the
 * library's to_f32 / reduce_f32 / from_f32). Both against the float64 sum of
 * the inputs: rel L2, and the largest and mean error in units of the type's
 * last place at the exact sum (ulp). A third table: the block size (--blocks,
 * to nearest), from a model of the format, which at 32 must give the
 * library's bits (checked every trial).
 *
 *   bench_numerics [--ranks 2,4,8,16,32,64] [--elems E] [--trials T]
 *                  [--blocks 16,32,64] [--csv FILE] [--quick]
 *
 * With --csv FILE, the BLOCK16 rows go to FILE-b16.csv (FILE less its .csv):
 * FILE keeps the rows bench/plot/numerics.gp reads by position.
 */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_args.h"
#include "../agent/quant.h"

#define MAX_LIST    16
#define MAX_RANKS   255
#define STATIC_S    1024.0
#define ERROR_ALARM 1e-3

enum dist { D_NORMAL, D_SMALL, D_LARGE, D_LLM, D_T3, D_MAX_ };

static const char *const dist_names[] = {"normal", "normal*1e-4", "normal*1e5", "llm", "t3"};

/* ---------------------------------------------------------- test data */

static uint64_t rs[4];

static uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** */
static uint64_t
next64(void)
{
	uint64_t r = rotl(rs[1] * 5, 7) * 9, t = rs[1] << 17;

	rs[2] ^= rs[0];
	rs[3] ^= rs[1];
	rs[1] ^= rs[2];
	rs[0] ^= rs[3];
	rs[2] ^= t;
	rs[3] = rotl(rs[3], 45);
	return r;
}

static void
seed_data(uint64_t seed)
{
	for (int i = 0; i < 4; i++) {
		uint64_t z = (seed += 0x9E3779B97F4A7C15ull);

		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		rs[i] = z ^ (z >> 31);
	}
}

/* (0, 1) */
static double
unif(void)
{
	return ((double)(next64() >> 11) + 0.5) * 0x1p-53;
}

static double
normal(void)
{
	static double spare;
	static bool have;

	if (have) {
		have = false;
		return spare;
	}
	double r = sqrt(-2 * log(unif())), a = 6.283185307179586 * unif();

	spare = r * sin(a);
	have = true;
	return r * cos(a);
}

/* Student-t, nu = 3: N / sqrt(chi2_3 / 3). */
static double
student_t3(void)
{
	double z = normal(), c = 0;

	for (int k = 0; k < 3; k++) {
		double g = normal();

		c += g * g;
	}
	return z / sqrt(c / 3);
}

/* Whether channel i is an outlier channel of "llm" (2%, fixed over ranks). */
static bool
outlier_channel(size_t i)
{
	uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull;

	z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
	return (z >> 40) % 100 < 2;
}

static void
fill(float *x, size_t n, enum dist d)
{
	for (size_t i = 0; i < n; i++) {
		double v;

		switch (d) {
		case D_SMALL:
			v = normal() * 1e-4;
			break;
		case D_LARGE:
			v = normal() * 1e5;
			break;
		case D_LLM:
			if (outlier_channel(i))
				v = (next64() & 1 ? 1 : -1) * 10 * pow(10, unif());
			else
				v = normal() * 0.02;
			break;
		case D_T3:
			v = student_t3() * 0.02;
			break;
		default:
			v = normal();
			break;
		}
		x[i] = (float)v;
	}
}

/* --------------------------------------------------- the in-network path */

/* The manager's per-tensor scale (mgr_scale_rule). */
static double
scale_rule(unsigned int n, double max_abs)
{
	double prod = (double)n * max_abs * 2.0, s;
	int e;

	if (!(prod > 0))
		return ldexp(1.0, 30);
	if (!isfinite(max_abs))
		return ldexp(1.0, -24);
	frexp(2147483648.0 / prod, &e);
	s = ldexp(1.0, e - 1);
	while (prod * s >= 2147483648.0 && s > 0)
		s /= 2;
	while (prod * s * 2 < 2147483648.0)
		s *= 2;
	if (s < ldexp(1.0, -24))
		s = ldexp(1.0, -24);
	if (s > ldexp(1.0, 30))
		s = ldexp(1.0, 30);
	return s;
}

static int32_t
be_get(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static void
be_put(uint8_t *p, int32_t v)
{
	uint32_t u = (uint32_t)v;

	p[0] = (uint8_t)(u >> 24);
	p[1] = (uint8_t)(u >> 16);
	p[2] = (uint8_t)(u >> 8);
	p[3] = (uint8_t)u;
}

struct acc {
	double rel_sum, maxerr, bias_num, bias_var, bias_den, scale_log2;
	unsigned int ok, ovf;
};

/*
 * One collective: ranks' data x[r] (E each) -> out; @return whether it
 * stayed in-network (no saturation at encode, no OVERFLOW at the switch).
 */
static bool
collective(const struct cais_quant_ops *q, float *const *x, unsigned int n, size_t e, double scale,
	   bool nearest, struct cais_rng *rngs, uint8_t *wire, int64_t *sum, float *out)
{
	bool ok = true;

	memset(sum, 0, e * sizeof(*sum));
	for (unsigned int r = 0; r < n; r++) {
		if (q->encode(wire, x[r], e, CAIS_FLOAT32, (float)scale, nearest, &rngs[r]) != 0)
			ok = false;
		for (size_t i = 0; i < e; i++)
			sum[i] += be_get(wire + 4 * i);
	}
	for (size_t i = 0; i < e; i++) {
		int64_t v = sum[i];

		if (v > INT32_MAX) {
			v = INT32_MAX;
			ok = false;
		} else if (v < INT32_MIN) {
			v = INT32_MIN;
			ok = false;
		}
		be_put(wire + 4 * i, (int32_t)v);
	}
	q->decode(out, wire, e, CAIS_FLOAT32, (float)(1.0 / scale), 1);
	return ok;
}

static void
account(struct acc *a, const float *out, const double *ref, size_t e, bool ok, double scale)
{
	double d2 = 0, r2 = 0, maxd = 0, maxr = 0;

	a->scale_log2 = log2(scale);
	if (!ok) {
		a->ovf++;
		return;
	}
	a->ok++;
	for (size_t i = 0; i < e; i++) {
		double d = (double)out[i] - ref[i];

		d2 += d * d;
		r2 += ref[i] * ref[i];
		maxd = fmax(maxd, fabs(d));
		maxr = fmax(maxr, fabs(ref[i]));
		a->bias_num += ref[i] > 0 ? d : ref[i] < 0 ? -d : 0;
		a->bias_var += d * d;
		a->bias_den += fabs(ref[i]);
	}
	a->rel_sum += r2 > 0 ? sqrt(d2 / r2) : 0;
	if (maxr > 0)
		a->maxerr = fmax(a->maxerr, maxd / maxr);
}

/* ------------------------------------------------ BLOCK16 (PROTOCOL.md E4) */

static const enum cais_datatype b16_dtypes[] = {CAIS_BFLOAT16, CAIS_FLOAT16, CAIS_FLOAT32};
static const char *const b16_dt_names[] = {"bf16", "fp16", "fp32"};
static const enum dist b16_dists[] = {D_NORMAL, D_LLM, D_T3};

static size_t
dt_size(enum cais_datatype dt)
{
	return dt == CAIS_FLOAT32 ? 4 : 2;
}

static float
dt_get(const uint8_t *p, size_t i, enum cais_datatype dt)
{
	uint16_t h;
	float f;

	if (dt == CAIS_FLOAT32) {
		memcpy(&f, p + 4 * i, 4);
		return f;
	}
	memcpy(&h, p + 2 * i, 2);
	return dt == CAIS_BFLOAT16 ? cais_bf16_to_f32(h) : cais_f16_to_f32(h);
}

static void
dt_put(uint8_t *p, size_t i, float v, enum cais_datatype dt)
{
	uint16_t h;

	if (dt == CAIS_FLOAT32) {
		memcpy(p + 4 * i, &v, 4);
		return;
	}
	h = dt == CAIS_BFLOAT16 ? cais_f32_to_bf16(v) : cais_f32_to_f16(v);
	memcpy(p + 2 * i, &h, 2);
}

/* The dtype's unit in the last place at x: 2^(max(floor(log2 |x|), emin) - (p - 1)). */
static double
ulp_of(double x, enum cais_datatype dt)
{
	int p = dt == CAIS_BFLOAT16 ? 8 : dt == CAIS_FLOAT16 ? 11 : 24;
	int emin = dt == CAIS_FLOAT16 ? -14 : -126, e = emin;

	if (x != 0) {
		(void)frexp(fabs(x), &e);
		e = e - 1 < emin ? emin : e - 1;
	}
	return ldexp(1.0, e - (p - 1));
}

/* The manager's BLOCK16 scale (mgr_scale_rule, E3): the largest power of two
 * s with max_abs x s x 2 < 2^55, clamped to [2^-24, 2^54]. */
static double
scale_rule_b16(double max_abs)
{
	const double lim = ldexp(1.0, 55);
	double prod = max_abs * 2.0, s;
	int e;

	if (!(prod > 0))
		return ldexp(1.0, 54);
	if (!isfinite(max_abs))
		return ldexp(1.0, -24);
	frexp(lim / prod, &e);
	s = ldexp(1.0, e - 1);
	while (prod * s >= lim && s > 0)
		s /= 2;
	while (prod * s * 2 < lim)
		s *= 2;
	return fmin(fmax(s, ldexp(1.0, -24)), ldexp(1.0, 54));
}

/* acc / 2^e rounded to nearest, ties to even. */
static int64_t
rne_shift(int64_t a, unsigned int e)
{
	if (e == 0)
		return a;
	int64_t q = a >> e; /* floor (arithmetic shift) */
	int64_t r = a - q * ((int64_t)1 << e), h = (int64_t)1 << (e - 1);

	return r > h || (r == h && (q & 1)) ? q + 1 : q;
}

/*
 * The switch's RESULT for one block of len sums (E4): the smallest e in
 * 0..48 with every |round(acc / 2^e)| <= 32767, m = acc / 2^e to nearest
 * even. No e below bitlen(max |acc|) - 16 can fit (|acc| / 2^e >= 2^16), so
 * the search starts there. @return e (CAIS_B16_EMAX + 1: none fits)
 */
static unsigned int
result_block(const int64_t *acc, size_t len, int16_t *m)
{
	uint64_t mx = 0;
	unsigned int e, bits;

	for (size_t i = 0; i < len; i++) {
		uint64_t a = acc[i] < 0 ? -(uint64_t)acc[i] : (uint64_t)acc[i];

		mx = a > mx ? a : mx;
	}
	bits = mx ? 64u - (unsigned int)__builtin_clzll(mx) : 0;
	for (e = bits > 16 ? bits - 16 : 0; e <= CAIS_B16_EMAX; e++) {
		size_t i = 0;

		for (; i < len; i++) {
			int64_t q = rne_shift(acc[i], e);

			if (q > CAIS_B16_MMAX || q < -CAIS_B16_MMAX)
				break;
		}
		if (i == len) {
			for (i = 0; i < len; i++)
				m[i] = (int16_t)rne_shift(acc[i], e);
			return e;
		}
	}
	return CAIS_B16_EMAX + 1;
}

/* Element i of a BLOCK16 payload of n: m x 2^e as an integer. */
static int64_t
b16_elem(const uint8_t *w, size_t n, size_t i)
{
	const uint8_t *p = w + cais_b16_exp_bytes((uint32_t)n) + 2 * i;
	int16_t m = (int16_t)((uint16_t)p[0] << 8 | p[1]);

	return (int64_t)m * ((int64_t)1 << w[i / CAIS_B16_BLOCK]);
}

/*
 * The in-network BLOCK16 sum with the library's code: each rank's
 * ->encode_b16 (its own random stream), the switch's exact int64 sum of
 * m x 2^e, the RESULT re-encoded from the sums (result_block), ->decode_b16
 * into dt. @return whether every encode and the RESULT fit (always, with
 * the manager's scale)
 */
static bool
innet_b16(const struct cais_quant_ops *q, uint8_t *const *xd, unsigned int n, size_t e,
	  enum cais_datatype dt, double scale, bool nearest, struct cais_rng *rngs, uint8_t *wire,
	  int64_t *acc, int16_t *mres, uint8_t *out)
{
	const size_t eb = cais_b16_exp_bytes((uint32_t)e);
	bool ok = true;

	memset(acc, 0, e * sizeof(*acc));
	for (unsigned int r = 0; r < n; r++) {
		if (q->encode_b16(wire, xd[r], e, dt, (float)scale, nearest, &rngs[r]) != 0)
			ok = false;
		for (size_t i = 0; i < e; i++)
			acc[i] += b16_elem(wire, e, i);
	}
	memset(wire, 0, eb);
	for (size_t b = 0; b * CAIS_B16_BLOCK < e; b++) {
		size_t i0 = b * CAIS_B16_BLOCK,
		       len = e - i0 < CAIS_B16_BLOCK ? e - i0 : CAIS_B16_BLOCK;
		unsigned int x = result_block(acc + i0, len, mres + i0);

		ok = ok && x <= CAIS_B16_EMAX;
		wire[b] = (uint8_t)x;
		for (size_t i = i0; i < i0 + len; i++) {
			wire[eb + 2 * i] = (uint8_t)((uint16_t)mres[i] >> 8);
			wire[eb + 2 * i + 1] = (uint8_t)mres[i];
		}
	}
	q->decode_b16(out, wire, e, dt, (float)(1.0 / scale));
	return ok;
}

/*
 * The same path, to nearest, for a block of bs elements (any size): the
 * format's definition written out (as agent/quant.c computes it: y =
 * fl32(value x scale), e = max(0, floor(log2 max |y|) - 14), m = y / 2^e to
 * nearest even within +-32767; decode m x fl32(2^e x fl32(1 / scale)), then
 * the type's rounding). At bs = 32 it must give innet_b16()'s bits (checked).
 */
static bool
model_b16(uint8_t *const *xd, unsigned int n, size_t e, enum cais_datatype dt, double scale,
	  size_t bs, int64_t *acc, int16_t *mres, uint8_t *out)
{
	const float sc = (float)scale, inv = (float)(1.0 / scale);
	bool ok = true;

	memset(acc, 0, e * sizeof(*acc));
	for (unsigned int r = 0; r < n; r++)
		for (size_t i0 = 0; i0 < e; i0 += bs) {
			size_t len = e - i0 < bs ? e - i0 : bs;
			float mx = 0;
			int be = 0, ex;

			for (size_t i = i0; i < i0 + len; i++)
				mx = fmaxf(mx, fabsf(dt_get(xd[r], i, dt) * sc));
			if (!(mx < 0x1p55f)) {
				ok = false;
				continue;
			}
			if (mx >= 0x1p15f) {
				(void)frexpf(mx, &ex);
				be = ex - 1 - 14;
			}
			for (size_t i = i0; i < i0 + len; i++) {
				double m =
				    nearbyint(ldexp((double)(dt_get(xd[r], i, dt) * sc), -be));

				m = fmin(fmax(m, -CAIS_B16_MMAX), CAIS_B16_MMAX);
				acc[i] += (int64_t)m * ((int64_t)1 << be);
			}
		}
	for (size_t i0 = 0; i0 < e; i0 += bs) {
		size_t len = e - i0 < bs ? e - i0 : bs;
		unsigned int x = result_block(acc + i0, len, mres + i0);
		float f = inv * ldexpf(1.0f, (int)x);

		ok = ok && x <= CAIS_B16_EMAX;
		for (size_t i = i0; i < i0 + len; i++)
			dt_put(out, i, (float)mres[i] * f, dt);
	}
	return ok;
}

/*
 * The ring as NCCL runs it for a 16-bit type: reduce-scatter, chunk c
 * (elements [c e / n, (c + 1) e / n)) starting at rank c + 1 and going
 * round to its owner c; every hop adds in fp32 and rounds the partial sum to
 * dt (the library's ->to_f32, ->reduce_f32, ->from_f32): n - 1 roundings.
 * The all-gather then copies.
 */
static void
ring_dt(const struct cais_quant_ops *q, uint8_t *const *xd, unsigned int n, size_t e,
	enum cais_datatype dt, uint8_t *out, float *fa, float *fb)
{
	const size_t es = dt_size(dt);

	for (unsigned int c = 0; c < n; c++) {
		size_t lo = c * e / n, len = (c + 1) * e / n - lo;
		uint8_t *a = out + lo * es;

		memcpy(a, xd[(c + 1) % n] + lo * es, len * es);
		for (unsigned int k = 2; k <= n; k++) {
			q->to_f32(fa, a, len, dt);
			q->to_f32(fb, xd[(c + k) % n] + lo * es, len, dt);
			q->reduce_f32(fa, fb, len, CAIS_OP_SUM);
			q->from_f32(a, fa, len, dt, 1.0f);
		}
	}
}

/* Errors of one path over the trials: every element's error in ulps is kept
 * (ulps, cap of them) for the percentile. */
struct acc16 {
	double rel_sum, max_ulp;
	float *ulps;
	size_t n_ulps, cap;
	unsigned int trials, fail;
};

static void
acc16_init(struct acc16 *a, size_t cap)
{
	memset(a, 0, sizeof(*a));
	a->cap = cap;
	if (!(a->ulps = malloc(cap * sizeof(float)))) {
		fprintf(stderr, "bench_numerics: out of memory\n");
		exit(1);
	}
}

static void
account16(struct acc16 *a, const uint8_t *out, const double *ref, size_t e, enum cais_datatype dt,
	  bool ok)
{
	double d2 = 0, r2 = 0;

	if (!ok)
		a->fail++;
	a->trials++;
	for (size_t i = 0; i < e; i++) {
		double d = (double)dt_get(out, i, dt) - ref[i], u = fabs(d) / ulp_of(ref[i], dt);

		d2 += d * d;
		r2 += ref[i] * ref[i];
		a->max_ulp = u > a->max_ulp || u != u ? u : a->max_ulp;
		if (a->n_ulps < a->cap)
			a->ulps[a->n_ulps++] = u != u ? INFINITY : (float)u;
	}
	a->rel_sum += r2 > 0 ? sqrt(d2 / r2) : 0;
}

static double
rel_of(const struct acc16 *a)
{
	return a->trials ? a->rel_sum / a->trials : NAN;
}

static int
cmp_float(const void *x, const void *y)
{
	float a = *(const float *)x, b = *(const float *)y;

	return a < b ? -1 : a > b;
}

/* The 99th percentile of the errors in ulps; frees them. */
static double
p99_ulp_of(struct acc16 *a)
{
	double v = NAN;

	if (a->n_ulps) {
		qsort(a->ulps, a->n_ulps, sizeof(float), cmp_float);
		v = a->ulps[(size_t)((double)(a->n_ulps - 1) * 0.99)];
	}
	free(a->ulps);
	a->ulps = NULL;
	return v;
}

/* The ranks' data in dt (fp32 drawn, rounded to dt) and its exact sum. */
static double
b16_data(float *const *x, uint8_t *const *xd, unsigned int n, size_t e, enum cais_datatype dt,
	 enum dist d, double *ref)
{
	double maxabs = 0;

	for (unsigned int r = 0; r < n; r++) {
		fill(x[r], e, d);
		for (size_t i = 0; i < e; i++)
			dt_put(xd[r], i, x[r][i], dt);
	}
	for (size_t i = 0; i < e; i++) {
		double s = 0;

		for (unsigned int r = 0; r < n; r++) {
			double v = dt_get(xd[r], i, dt);

			s += v;
			maxabs = fmax(maxabs, fabs(v));
		}
		ref[i] = s;
	}
	return maxabs;
}

struct b16_bufs {
	float *const *x;
	uint8_t *const *xd;
	uint8_t *wire, *out, *out2;
	double *ref;
	int64_t *acc;
	int16_t *mres;
	float *fa, *fb;
	struct cais_rng *rngs;
};

/*
 * The BLOCK16 tables: per dtype, distribution and n, the in-network sum
 * (rn, sr) against the ring rounding at every hop; then, to nearest, the
 * block sizes of blocks[] (the model). @return false on a failed check
 */
static bool
run_b16(const struct cais_quant_ops *q, const unsigned int *ranks, unsigned int nr, size_t elems,
	unsigned int trials, const unsigned int *blocks, unsigned int nb, FILE *csv,
	struct b16_bufs *b)
{
	bool ok = true;

	/* Smoke check: integers 1..127 (within 2^7 of every block's largest)
	 * sum exactly on 2 ranks, in every type, both roundings, and the ring. */
	for (size_t t = 0; t < 3; t++) {
		enum cais_datatype dt = b16_dtypes[t];

		for (unsigned int r = 0; r < 2; r++)
			for (size_t i = 0; i < elems; i++)
				dt_put(b->xd[r], i, (float)(i % 127 + 1), dt);
		double s = scale_rule_b16(127);

		for (int nearest = 0; nearest < 3; nearest++) {
			for (unsigned int r = 0; r < 2; r++)
				cais_rng_seed(&b->rngs[r], r);
			if (nearest == 2)
				ring_dt(q, b->xd, 2, elems, dt, b->out, b->fa, b->fb);
			else
				innet_b16(q, b->xd, 2, elems, dt, s, nearest, b->rngs, b->wire,
					  b->acc, b->mres, b->out);
			for (size_t i = 0; i < elems; i++)
				if (dt_get(b->out, i, dt) != (float)(2 * (i % 127 + 1))) {
					fprintf(
					    stderr,
					    "bench_numerics: BLOCK16 %s exact case %zu (%s): %g, "
					    "want %g\n",
					    b16_dt_names[t], i,
					    nearest == 2 ? "ring" : "in-network",
					    (double)dt_get(b->out, i, dt),
					    2.0 * (double)(i % 127 + 1));
					ok = false;
					break;
				}
		}
	}

	printf("\n  ------- BLOCK16 in-network sum vs a ring that rounds to the type at every hop"
	       " -------\n"
	       "  (%s code, %zu elements x %u trials; errors against the float64 sum of the"
	       " inputs)\n",
	       q->name, elems, trials);
	printf("  %-4s %-6s %3s %5s | %8s %6s %8s | %8s %6s %8s | %8s %6s %8s | %s\n", "type",
	       "data", "n", "log2s", "rn relL2", "p99", "max ulp", "sr relL2", "p99", "max ulp",
	       "ring rel", "p99", "max ulp", "rn vs ring");
	for (size_t t = 0; t < 3; t++) {
		enum cais_datatype dt = b16_dtypes[t];

		for (size_t di = 0; di < sizeof(b16_dists) / sizeof(b16_dists[0]); di++) {
			enum dist d = b16_dists[di];

			for (unsigned int ni = 0; ni < nr; ni++) {
				unsigned int n = ranks[ni];
				struct acc16 a[3];
				double scale = 1, p99[3];

				for (int k = 0; k < 3; k++)
					acc16_init(&a[k], elems * trials);
				for (unsigned int tr = 0; tr < trials; tr++) {
					seed_data(0xB16000000000000ull ^ ((uint64_t)t << 40) ^
						  ((uint64_t)d << 48) ^ ((uint64_t)n << 32) ^ tr);
					scale = scale_rule_b16(
					    b16_data(b->x, b->xd, n, elems, dt, d, b->ref));
					for (int nearest = 1; nearest >= 0; nearest--) {
						for (unsigned int r = 0; r < n; r++)
							cais_rng_seed(&b->rngs[r],
								      ((uint64_t)tr << 32) ^ r ^
									  ((uint64_t)d << 56) ^
									  ((uint64_t)t << 48));
						bool in = innet_b16(q, b->xd, n, elems, dt, scale,
								    nearest, b->rngs, b->wire,
								    b->acc, b->mres, b->out);

						account16(&a[!nearest], b->out, b->ref, elems, dt,
							  in);
					}
					ring_dt(q, b->xd, n, elems, dt, b->out, b->fa, b->fb);
					account16(&a[2], b->out, b->ref, elems, dt, true);
				}
				for (int k = 0; k < 3; k++)
					p99[k] = p99_ulp_of(&a[k]);
				/* rn against the ring: rel L2 (within 1%: the type's own
				 * rounding dominates both at small n), p99, max */
				char verdict[32];
				bool wr = rel_of(&a[0]) > rel_of(&a[2]) * 1.01,
				     wp = p99[0] > p99[2], wm = a[0].max_ulp > a[2].max_ulp;

				if (a[0].fail || a[1].fail)
					snprintf(verdict, sizeof(verdict), "FAILED (saturated)");
				else if (dt == CAIS_FLOAT32)
					snprintf(verdict, sizeof(verdict), "-");
				else if (!wr && !wp && !wm)
					snprintf(verdict, sizeof(verdict), "no worse");
				else
					snprintf(verdict, sizeof(verdict), "worse:%s%s%s",
						 wr ? " rel" : "", wp ? " p99" : "",
						 wm ? " max" : "");
				printf("  %-4s %-6s %3u %5.0f | %8.2e %6.2f %8.3g | %8.2e %6.2f "
				       "%8.3g | %8.2e %6.2f %8.3g | %s\n",
				       b16_dt_names[t], dist_names[d], n, log2(scale),
				       rel_of(&a[0]), p99[0], a[0].max_ulp, rel_of(&a[1]), p99[1],
				       a[1].max_ulp, rel_of(&a[2]), p99[2], a[2].max_ulp, verdict);
				if (a[0].fail || a[1].fail)
					ok = false;
				for (int k = 0; csv && k < 3; k++)
					fprintf(csv, "%s,%s,%u,%s,%u,%.0f,%.6e,%.6e,%.6e,%u,%zu\n",
						b16_dt_names[t], dist_names[d], n,
						k == 0	 ? "block16-rn"
						: k == 1 ? "block16-sr"
							 : "ring-per-hop",
						k < 2 ? CAIS_B16_BLOCK : 0, log2(scale),
						rel_of(&a[k]), p99[k], a[k].max_ulp, trials, elems);
				fflush(stdout);
			}
		}
	}
	printf("  (rn, sr: the agent's BLOCK16 encode to nearest / stochastic, the switch's "
	       "exact sum,\n"
	       "   the RESULT re-encoded from the sums, decode to the type; ring: reduce-scatter"
	       " whose\n"
	       "   partial sums are rounded to the type at each of the n-1 hops (fp32: the fp32"
	       " ring).\n"
	       "   rel L2 mean over trials; max ulp: the largest |x - ref| in units of the type's"
	       " last\n"
	       "   place at ref, over all elements and trials (huge where ref is ~0 by "
	       "cancellation);\n"
	       "   p99: its 99th percentile. log2s: the manager's scale (E3). rn vs ring: "
	       "which of\n"
	       "   rn's rel L2 (1%% margin), p99 and max are above the ring's)\n");

	if (nb == 0)
		return ok;
	printf("\n  ------- BLOCK16 block size, to nearest (the format's model; 32 = the wire's,"
	       " checked) -------\n");
	printf("  %-4s %-6s %3s |", "type", "data", "n");
	for (unsigned int k = 0; k < nb; k++)
		printf(" B=%-4u relL2    p99  max ulp |", blocks[k]);
	printf("\n  %-4s %-6s %3s |", "", "", "");
	for (unsigned int k = 0; k < nb; k++)
		printf("  (+%5.2f%% bytes)               |", 100.0 / (2.0 * blocks[k]));
	printf("\n");
	for (size_t t = 0; t < 2; t++) {
		enum cais_datatype dt = b16_dtypes[t];

		for (size_t di = 0; di < sizeof(b16_dists) / sizeof(b16_dists[0]); di++) {
			enum dist d = b16_dists[di];

			for (unsigned int ni = 0; ni < nr; ni++) {
				unsigned int n = ranks[ni];
				struct acc16 a[MAX_LIST];

				for (unsigned int k = 0; k < nb; k++)
					acc16_init(&a[k], elems * trials);
				for (unsigned int tr = 0; tr < trials; tr++) {
					seed_data(0xB16000000000000ull ^ ((uint64_t)t << 40) ^
						  ((uint64_t)d << 48) ^ ((uint64_t)n << 32) ^ tr);
					double scale = scale_rule_b16(
					    b16_data(b->x, b->xd, n, elems, dt, d, b->ref));

					innet_b16(q, b->xd, n, elems, dt, scale, true, b->rngs,
						  b->wire, b->acc, b->mres, b->out2);
					for (unsigned int k = 0; k < nb; k++) {
						bool in =
						    model_b16(b->xd, n, elems, dt, scale, blocks[k],
							      b->acc, b->mres, b->out);

						if (blocks[k] == CAIS_B16_BLOCK &&
						    memcmp(b->out, b->out2, elems * dt_size(dt))) {
							fprintf(stderr,
								"bench_numerics: the BLOCK16 model "
								"(B = 32) differs from the library "
								"(%s %s n %u)\n",
								b16_dt_names[t], dist_names[d], n);
							ok = false;
						}
						account16(&a[k], b->out, b->ref, elems, dt, in);
					}
				}
				printf("  %-4s %-6s %3u |", b16_dt_names[t], dist_names[d], n);
				for (unsigned int k = 0; k < nb; k++) {
					double p = p99_ulp_of(&a[k]);

					printf(" %13.2e %6.2f %8.3g |", rel_of(&a[k]), p,
					       a[k].max_ulp);
					if (csv)
						fprintf(
						    csv,
						    "%s,%s,%u,model-rn,%u,nan,%.6e,%.6e,%.6e,%u,"
						    "%zu\n",
						    b16_dt_names[t], dist_names[d], n, blocks[k],
						    rel_of(&a[k]), p, a[k].max_ulp, trials, elems);
				}
				printf("\n");
				fflush(stdout);
			}
		}
	}
	printf("  (B: elements per exponent byte; bytes: the exponents' share of 2 bytes per"
	       " element)\n");
	return ok;
}

/* ------------------------------------------------------------------ main */

static void
usage(void)
{
	printf("Usage: bench_numerics [--ranks LIST] [--elems E] [--trials T] [--blocks LIST]\n"
	       "                      [--csv FILE] [--quick]\n"
	       "The in-network sum (each rank encodes with the agent's code, the switch adds in\n"
	       "int64 and saturates to int32, decode) against a float64 sum, for normal data\n"
	       "(x1, x1e-4, x1e5), LLM-like activations with outlier channels and Student-t(3);\n"
	       "scale: static 1024 or per tensor (the manager's rule); rounding: stochastic (sr)\n"
	       "or to nearest (rn). Relative L2 error, worst max error, bias, fallback share.\n"
	       "Then BLOCK16 for bf16, fp16 and fp32 inputs (the manager's BLOCK16 scale, the\n"
	       "switch's exact sum and RESULT re-encoding) against a ring that rounds to the\n"
	       "type at every hop: rel L2, largest and mean error in ulps of the type; and the\n"
	       "block sizes of --blocks (default 16,32,64; to nearest). --csv FILE: BLOCK16\n"
	       "rows in FILE-b16.csv.\n"
	       "Defaults: --ranks 2,4,8,16,32,64 --elems 16384 --trials 8; --quick: ranks 2,8,\n"
	       "1024 elements, 2 trials (a smoke run: checks that the exact cases are exact).\n");
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"ranks", required_argument, NULL, 'n'},  {"elems", required_argument, NULL, 'e'},
	    {"trials", required_argument, NULL, 't'}, {"blocks", required_argument, NULL, 'b'},
	    {"csv", required_argument, NULL, 'c'},    {"quick", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},	      {NULL, 0, NULL, 0}};
	unsigned int ranks[MAX_LIST] = {2, 4, 8, 16, 32, 64}, nr = 6, trials = 8;
	unsigned int blocks[MAX_LIST] = {16, 32, 64}, nb = 3;
	size_t elems = 16384;
	const char *csv_path = NULL;
	const struct cais_quant_ops *q = cais_quant_best();
	FILE *csv = NULL, *csv16 = NULL;
	bool ok = true;
	int o;

	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (o) {
		case 'n':
			nr = bench_parse_list("bench_numerics", "--ranks", optarg, ranks, MAX_LIST);
			break;
		case 'e':
			elems = (size_t)strtoul(optarg, NULL, 10);
			break;
		case 't':
			trials = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'b':
			nb = bench_parse_list("bench_numerics", "--blocks", optarg, blocks,
					      MAX_LIST);
			break;
		case 'c':
			csv_path = optarg;
			break;
		case 'q':
			ranks[0] = 2;
			ranks[1] = 8;
			nr = 2;
			elems = 1024;
			trials = 2;
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	for (unsigned int i = 0; i < nr; i++)
		if (ranks[i] < 1 || ranks[i] > MAX_RANKS) {
			fprintf(stderr, "bench_numerics: --ranks %u: 1..%u\n", ranks[i], MAX_RANKS);
			return 2;
		}
	for (unsigned int i = 0; i < nb; i++)
		if (blocks[i] > 4096) {
			fprintf(stderr, "bench_numerics: --blocks %u: 1..4096\n", blocks[i]);
			return 2;
		}
	if (nr == 0 || elems < 1 || elems > (1u << 26) || trials < 1 ||
	    (double)elems * trials > 0x1p25) {
		fprintf(stderr, "bench_numerics: --ranks LIST, --elems 1..2^26, --trials >= 1, "
				"elems x trials <= 2^25\n");
		return 2;
	}
	if (csv_path && !(csv = fopen(csv_path, "w"))) {
		perror(csv_path);
		return 1;
	}
	if (csv)
		fprintf(csv, "dist,ranks,scale_kind,rounding,scale_log2,rel_l2,max_err,bias,bias_"
			     "se,ovf_frac,"
			     "ring_rel_l2,trials,elems\n");
	if (csv_path) {
		size_t len = strlen(csv_path);
		char *p16 = malloc(len + 16);

		if (!p16)
			return 1;
		memcpy(p16, csv_path, len + 1);
		if (len > 4 && !strcmp(p16 + len - 4, ".csv"))
			p16[len - 4] = 0;
		strcat(p16, "-b16.csv");
		if (!(csv16 = fopen(p16, "w"))) {
			perror(p16);
			return 1;
		}
		free(p16);
		fprintf(csv16, "dtype,dist,ranks,path,block,scale_log2,rel_l2,p99_ulp,max_ulp,"
			       "trials,elems\n");
	}

	float *x[MAX_RANKS], *out = malloc(elems * sizeof(float)), *ring = malloc(elems * 4);
	double *ref = malloc(elems * sizeof(double));
	uint8_t *wire = malloc(elems * 4);
	int64_t *sum = malloc(elems * sizeof(int64_t));
	struct cais_rng *rngs = malloc(MAX_RANKS * sizeof(*rngs));
	unsigned int maxn = 0;

	for (unsigned int i = 0; i < nr; i++)
		maxn = ranks[i] > maxn ? ranks[i] : maxn;
	for (unsigned int r = 0; r < maxn; r++)
		if (!(x[r] = malloc(elems * sizeof(float))))
			return 1;
	if (!out || !ring || !ref || !wire || !sum || !rngs)
		return 1;

	/* Smoke check: k / 1024 with |k| small is exact for both roundings. */
	for (unsigned int r = 0; r < 2; r++)
		for (size_t i = 0; i < elems; i++)
			x[r][i] = (float)((int)(i % 2001) - 1000) / 1024.0f;
	for (int nearest = 0; nearest < 2; nearest++) {
		for (unsigned int r = 0; r < 2; r++)
			cais_rng_seed(&rngs[r], r);
		collective(q, x, 2, elems, STATIC_S, nearest, rngs, wire, sum, out);
		for (size_t i = 0; i < elems; i++)
			if (out[i] != 2 * x[0][i]) {
				fprintf(stderr, "bench_numerics: exact case %zu: %g, want %g\n", i,
					(double)out[i], 2.0 * x[0][i]);
				ok = false;
				break;
			}
	}

	printf(
	    "\n  ------- in-network sum vs float64 (%s encode, %zu elements x %u trials) -------\n",
	    q->name, elems, trials);
	printf("  %-11s %3s %6s %3s %6s | %9s %9s %10s %8s %5s | %9s | %s\n", "data", "n", "scale",
	       "rnd", "log2 s", "rel L2", "max err", "bias", "+-se", "ovf%", "ring fp32", "alarm");
	for (unsigned int d = 0; d < D_MAX_; d++) {
		for (unsigned int ni = 0; ni < nr; ni++) {
			unsigned int n = ranks[ni];
			struct acc a[2][2];
			double ring_rel = 0;

			memset(a, 0, sizeof(a));
			for (unsigned int t = 0; t < trials; t++) {
				double maxabs = 0, d2 = 0, r2 = 0;

				seed_data(((uint64_t)d << 48) ^ ((uint64_t)n << 32) ^ t);
				for (unsigned int r = 0; r < n; r++)
					fill(x[r], elems, (enum dist)d);
				for (size_t i = 0; i < elems; i++) {
					double s = 0;
					float f = 0;

					for (unsigned int r = 0; r < n; r++) {
						s += x[r][i];
						f += x[r][i];
						maxabs = fmax(maxabs, fabs((double)x[r][i]));
					}
					ref[i] = s;
					ring[i] = f;
					d2 += ((double)f - s) * ((double)f - s);
					r2 += s * s;
				}
				ring_rel += r2 > 0 ? sqrt(d2 / r2) : 0;
				for (int k = 0; k < 2; k++) {
					double scale = k ? scale_rule(n, maxabs) : STATIC_S;

					for (int nearest = 0; nearest < 2; nearest++) {
						for (unsigned int r = 0; r < n; r++)
							cais_rng_seed(&rngs[r],
								      ((uint64_t)t << 32) ^ r ^
									  ((uint64_t)d << 56));
						bool in = collective(q, x, n, elems, scale, nearest,
								     rngs, wire, sum, out);

						account(&a[k][nearest], out, ref, elems, in, scale);
					}
				}
			}
			ring_rel /= trials;
			for (int k = 0; k < 2; k++)
				for (int nearest = 1; nearest >= 0; nearest--) {
					struct acc *c = &a[k][nearest];
					double rel = c->ok ? c->rel_sum / c->ok : NAN;
					double bias = c->ok && c->bias_den > 0
							  ? c->bias_num / c->bias_den
							  : NAN;
					double se = c->ok && c->bias_den > 0
							? sqrt(c->bias_var) / c->bias_den
							: NAN;
					double ovf = (double)c->ovf / trials;
					const char *kind = k ? "tensor" : "1024";
					const char *rnd = nearest ? "rn" : "sr";

					printf(
					    "  %-11s %3u %6s %3s %6.0f | %9.2e %9.2e %10.2e %8.1e "
					    "%5.0f | %9.2e | %s\n",
					    dist_names[d], n, kind, rnd, c->scale_log2, rel,
					    c->ok ? c->maxerr : NAN, bias, se, 100 * ovf, ring_rel,
					    !c->ok		? "FALLBACK"
					    : rel > ERROR_ALARM ? "ALARM"
								: "");
					if (csv)
						fprintf(csv,
							"%s,%u,%s,%s,%.0f,%.6e,%.6e,%.6e,%.6e,%.4f,"
							"%.6e,"
							"%u,%zu\n",
							dist_names[d], n, kind, rnd, c->scale_log2,
							rel, c->ok ? c->maxerr : NAN, bias, se, ovf,
							ring_rel, trials, elems);
				}
			fflush(stdout);
		}
	}
	printf("  (rel L2: ||x - ref|| / ||ref||, mean over trials; max err: max |x - ref| /\n"
	       "   max |ref|, worst trial; bias: sum (x - ref) sign(ref) / sum |ref| (< 0: the\n"
	       "   sum shrinks toward 0), +-se its standard error; ovf%%: trials that saturate and "
	       "fall back to the ring,\n"
	       "   left out of the errors; ring fp32: the fallback's own rel L2; alarm: rel L2\n"
	       "   above the agent's %g, which turns offload off for the tensor)\n",
	       ERROR_ALARM);
	if (csv)
		fclose(csv);

	uint8_t *xd[MAX_RANKS];
	uint8_t *wire16 = malloc(elems * 4 + 64), *out16 = malloc(elems * 4),
		*out16b = malloc(elems * 4);
	double *ref16 = malloc(elems * sizeof(double));
	int16_t *mres = malloc(elems * sizeof(int16_t));
	float *fa = malloc(elems * 4), *fb = malloc(elems * 4);

	for (unsigned int r = 0; r < maxn; r++)
		if (!(xd[r] = malloc(elems * 4)))
			return 1;
	if (!wire16 || !out16 || !out16b || !ref16 || !mres || !fa || !fb)
		return 1;
	struct b16_bufs bb = {.x = x,
			      .xd = xd,
			      .wire = wire16,
			      .out = out16,
			      .out2 = out16b,
			      .ref = ref16,
			      .acc = sum,
			      .mres = mres,
			      .fa = fa,
			      .fb = fb,
			      .rngs = rngs};

	if (!run_b16(q, ranks, nr, elems, trials, blocks, nb, csv16, &bb))
		ok = false;
	if (csv16)
		fclose(csv16);
	for (unsigned int r = 0; r < maxn; r++)
		free(xd[r]);
	free(wire16);
	free(out16);
	free(out16b);
	free(ref16);
	free(mres);
	free(fa);
	free(fb);
	for (unsigned int r = 0; r < maxn; r++)
		free(x[r]);
	free(out);
	free(ring);
	free(ref);
	free(wire);
	free(sum);
	free(rngs);
	if (!ok) {
		fprintf(stderr, "bench_numerics: FAILED\n");
		return 1;
	}
	return 0;
}
