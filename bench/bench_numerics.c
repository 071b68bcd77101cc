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
 *   bench_numerics [--ranks 2,4,8,16,32,64] [--elems E] [--trials T]
 *                  [--csv FILE] [--quick]
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

/* ------------------------------------------------------------------ main */

static void
usage(void)
{
	printf("Usage: bench_numerics [--ranks LIST] [--elems E] [--trials T] [--csv FILE]\n"
	       "                      [--quick]\n"
	       "The in-network sum (each rank encodes with the agent's code, the switch adds in\n"
	       "int64 and saturates to int32, decode) against a float64 sum, for normal data\n"
	       "(x1, x1e-4, x1e5), LLM-like activations with outlier channels and Student-t(3);\n"
	       "scale: static 1024 or per tensor (the manager's rule); rounding: stochastic (sr)\n"
	       "or to nearest (rn). Relative L2 error, worst max error, bias, fallback share.\n"
	       "Defaults: --ranks 2,4,8,16,32,64 --elems 16384 --trials 8; --quick: ranks 2,8,\n"
	       "1024 elements, 2 trials (a smoke run: checks that the exact cases are exact).\n");
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {{"ranks", required_argument, NULL, 'n'},
					   {"elems", required_argument, NULL, 'e'},
					   {"trials", required_argument, NULL, 't'},
					   {"csv", required_argument, NULL, 'c'},
					   {"quick", no_argument, NULL, 'q'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	unsigned int ranks[MAX_LIST] = {2, 4, 8, 16, 32, 64}, nr = 6, trials = 8;
	size_t elems = 16384;
	const char *csv_path = NULL;
	const struct cais_quant_ops *q = cais_quant_best();
	FILE *csv = NULL;
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
	if (nr == 0 || elems < 1 || elems > (1u << 26) || trials < 1) {
		fprintf(stderr, "bench_numerics: --ranks LIST, --elems 1..2^26, --trials >= 1\n");
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
