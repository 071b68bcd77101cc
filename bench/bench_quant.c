/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_quant: the agent's conversions (agent/quant.h) against memcpy.
 *
 * For fp32, bf16, fp16 (and int32 for reference), in the implementation the
 * agent picks (cais_quant_best(), or --impl):
 *   enc-sr   encode to big-endian fixed point, stochastic rounding (default)
 *   enc-rn   encode, round to nearest even
 *   dec      decode a sum: q x 1/scale (scale 1024: the fp32 shortcut)
 *   dec-avg  decode an average over 6 ranks: q x 1/(6 x scale), the double
 *            path (int32: q / 6 toward zero)
 * and BLOCK16 (16-bit elements with an exponent per block of 32, PROTOCOL.md
 * E4; float types, scale 2^24 as static communicators use):
 *   b16-sr   encode to BLOCK16, stochastic rounding
 *   b16-rn   encode to BLOCK16, round to nearest even
 *   b16-dec  decode a BLOCK16 payload: m x 2^e x 1/scale, rounded to the type
 * Throughput is of the source tensor's bytes (the dtype's, both ways: what
 * the caller hands over or gets back), against memcpy of those same bytes,
 * in the same run: every repetition times memcpy, then the conversion, back
 * to back (the box is noisy); the table shows the medians and the median of
 * the per-repetition ratios. Sizes: one cache-resident, one memory-bound.
 * Every run also checks that decode(encode(x)) gives x back within one step
 * of the fixed point, or of its block for BLOCK16 (so --quick is a working
 * smoke test, never a speed). With --csv FILE, the BLOCK16 rows go to
 * FILE-b16.csv (FILE less its .csv), same columns, so that FILE keeps the
 * rows bench/plot/quant.gp draws.
 *
 *   bench_quant [--sizes 256K,64M] [--reps R] [--impl best|scalar|avx2|avx512|all]
 *               [--ops LIST] [--csv FILE] [--quick]
 */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../agent/quant.h"

#define MAX_LIST  8
#define SCALE	  1024.0f
#define AVG_N	  6u
#define B16_SCALE 0x1p24f /* CAIS_B16_DEFAULT_SCALE_EXP */

enum op { OP_ENC_SR, OP_ENC_RN, OP_DEC, OP_DEC_AVG, OP_B16_SR, OP_B16_RN, OP_B16_DEC, OP_MAX_ };

static const char *const op_names[] = {"enc-sr", "enc-rn", "dec",    "dec-avg",
				       "b16-sr", "b16-rn", "b16-dec"};
static const enum cais_datatype dtypes[] = {CAIS_FLOAT32, CAIS_BFLOAT16, CAIS_FLOAT16, CAIS_INT32};
static const char *const dt_names[] = {"fp32", "bf16", "fp16", "int32"};

static size_t
esize(enum cais_datatype dt)
{
	return dt == CAIS_BFLOAT16 || dt == CAIS_FLOAT16 ? 2 : 4;
}

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* splitmix64 -> N(0, 1) by Box-Muller (test data only) */
static uint64_t rs = 0x2545F4914F6CDD1Dull;

static double
unif(void)
{
	uint64_t z = (rs += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return ((double)((z ^ (z >> 31)) >> 11) + 0.5) * 0x1p-53;
}

static double
normal(void)
{
	return sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif());
}

static void *
xalloc(size_t bytes)
{
	void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);

	if (!p) {
		fprintf(stderr, "bench_quant: out of memory (%zu bytes)\n", bytes);
		exit(1);
	}
	memset(p, 0, bytes); /* fault the pages in before timing */
	return p;
}

/* n elements of dt: N(0, 1) x 8 (floats), or N(0, 1) x 2^20 (int32). */
static void
fill(void *p, size_t n, enum cais_datatype dt)
{
	for (size_t i = 0; i < n; i++) {
		float v = (float)(normal() * 8.0);

		switch (dt) {
		case CAIS_BFLOAT16:
			((uint16_t *)p)[i] = cais_f32_to_bf16(v);
			break;
		case CAIS_FLOAT16:
			((uint16_t *)p)[i] = cais_f32_to_f16(v);
			break;
		case CAIS_INT32:
			((int32_t *)p)[i] = (int32_t)(normal() * 0x1p20);
			break;
		default:
			((float *)p)[i] = v;
			break;
		}
	}
}

struct bufs {
	void *src, *wire, *out, *copy;
};

static volatile size_t sink;

static void
do_op(const struct cais_quant_ops *q, enum op op, enum cais_datatype dt, struct bufs *b, size_t n,
      struct cais_rng *rng)
{
	switch (op) {
	case OP_ENC_SR:
		sink += q->encode(b->wire, b->src, n, dt, SCALE, false, rng);
		break;
	case OP_ENC_RN:
		sink += q->encode(b->wire, b->src, n, dt, SCALE, true, rng);
		break;
	case OP_DEC:
		q->decode(b->out, b->wire, n, dt, 1.0f / SCALE, 1);
		break;
	case OP_DEC_AVG:
		q->decode(b->out, b->wire, n, dt, (float)(1.0 / (SCALE * (double)AVG_N)), AVG_N);
		break;
	case OP_B16_SR:
		sink += q->encode_b16(b->wire, b->src, n, dt, B16_SCALE, false, rng);
		break;
	case OP_B16_RN:
		sink += q->encode_b16(b->wire, b->src, n, dt, B16_SCALE, true, rng);
		break;
	case OP_B16_DEC:
		q->decode_b16(b->out, b->wire, n, dt, 1.0f / B16_SCALE);
		break;
	default:
		break;
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct result {
	double gbps, memcpy_gbps, ratio, ratio_lo, ratio_hi; /* medians; ratio range */
};

/*
 * reps repetitions, each one memcpy loop then one conversion loop of iters
 * calls (iters chosen so that a loop takes about 2 ms).
 */
static struct result
measure(const struct cais_quant_ops *q, enum op op, enum cais_datatype dt, struct bufs *b, size_t n,
	unsigned int reps, struct cais_rng *rng)
{
	size_t bytes = n * esize(dt);
	double *tm = calloc(reps, sizeof(double)), *to = calloc(reps, sizeof(double));
	double *ra = calloc(reps, sizeof(double));
	unsigned int iters = 1;
	struct result r;

	if (!tm || !to || !ra) {
		fprintf(stderr, "bench_quant: out of memory\n");
		exit(1);
	}
	/* warm up, and size the loops */
	for (;;) {
		double t0 = now();

		for (unsigned int k = 0; k < iters; k++)
			do_op(q, op, dt, b, n, rng);
		if (now() - t0 > 2e-3 || iters >= 1u << 20)
			break;
		iters *= 2;
	}
	for (unsigned int i = 0; i < reps; i++) {
		double t0 = now();

		for (unsigned int k = 0; k < iters; k++) {
			memcpy(b->copy, b->src, bytes);
			__asm__ volatile("" ::: "memory");
		}
		double t1 = now();

		for (unsigned int k = 0; k < iters; k++)
			do_op(q, op, dt, b, n, rng);
		double t2 = now();

		tm[i] = (t1 - t0) / iters;
		to[i] = (t2 - t1) / iters;
		ra[i] = tm[i] / to[i];
	}
	r.memcpy_gbps = (double)bytes / median(tm, reps) / 1e9;
	r.gbps = (double)bytes / median(to, reps) / 1e9;
	r.ratio = median(ra, reps);
	r.ratio_lo = ra[0];
	r.ratio_hi = ra[reps - 1];
	free(tm);
	free(to);
	free(ra);
	return r;
}

/* decode(encode(x)) == x within a step of the fixed point (plus the 16-bit
 * types' rounding); both roundings; avg gives x's sixth part. */
static bool
check(const struct cais_quant_ops *q, enum cais_datatype dt, struct bufs *b, size_t n,
      struct cais_rng *rng)
{
	const size_t es = esize(dt);
	bool ok = true;

	for (int nearest = 0; nearest < 2 && ok; nearest++) {
		q->encode(b->wire, b->src, n, dt, SCALE, nearest, rng);
		for (int avg = 0; avg < 2 && ok; avg++) {
			double div = avg ? AVG_N : 1;

			q->decode(b->out, b->wire, n, dt, (float)(1.0 / (SCALE * div)),
				  avg ? AVG_N : 1);
			for (size_t i = 0; i < n && ok; i++) {
				double x, y, tol;
				const uint8_t *s = (const uint8_t *)b->src + i * es;
				const uint8_t *o = (const uint8_t *)b->out + i * es;

				switch (dt) {
				case CAIS_BFLOAT16:
					x = cais_bf16_to_f32(*(const uint16_t *)s) / div;
					y = cais_bf16_to_f32(*(const uint16_t *)o);
					tol = 1.0 / SCALE + fabs(x) * 0x1p-8;
					break;
				case CAIS_FLOAT16:
					x = cais_f16_to_f32(*(const uint16_t *)s) / div;
					y = cais_f16_to_f32(*(const uint16_t *)o);
					tol = 1.0 / SCALE + fabs(x) * 0x1p-11;
					break;
				case CAIS_INT32:
					x = (double)*(const int32_t *)s / div;
					y = *(const int32_t *)o;
					tol = 1;
					break;
				default:
					x = *(const float *)s / div;
					y = *(const float *)o;
					tol = 1.0 / SCALE + fabs(x) * 0x1p-23;
					break;
				}
				if (!(fabs(x - y) <= tol)) {
					fprintf(
					    stderr,
					    "bench_quant: %s %s nearest %d avg %d: element %zu: "
					    "%g -> %g\n",
					    q->name, dt_names[dt], nearest, avg, i, x, y);
					ok = false;
				}
			}
		}
	}
	return ok;
}

/* The same for BLOCK16 (float types): within one step of the element's block
 * (half a step to nearest but at the clamp), plus the types' own rounding. */
static bool
check_b16(const struct cais_quant_ops *q, enum cais_datatype dt, struct bufs *b, size_t n,
	  struct cais_rng *rng)
{
	const size_t es = esize(dt), eb = ((n + 31) / 32 + 3) / 4 * 4;
	const uint8_t *w = b->wire;
	bool ok = true;

	for (int nearest = 0; nearest < 2 && ok; nearest++) {
		if (q->encode_b16(b->wire, b->src, n, dt, B16_SCALE, nearest, rng) != 0) {
			fprintf(stderr, "bench_quant: %s %s b16: a block saturated\n", q->name,
				dt_names[dt]);
			return false;
		}
		q->decode_b16(b->out, b->wire, n, dt, 1.0f / B16_SCALE);
		for (size_t i = 0; i < n && ok; i++) {
			const uint8_t *s = (const uint8_t *)b->src + i * es;
			const uint8_t *o = (const uint8_t *)b->out + i * es;
			int16_t m = (int16_t)((uint16_t)w[eb + 2 * i] << 8 | w[eb + 2 * i + 1]);
			double step = ldexp(1.0, w[i / 32]) / B16_SCALE, x, y, rel;

			switch (dt) {
			case CAIS_BFLOAT16:
				x = cais_bf16_to_f32(*(const uint16_t *)s);
				y = cais_bf16_to_f32(*(const uint16_t *)o);
				rel = 0x1p-8;
				break;
			case CAIS_FLOAT16:
				x = cais_f16_to_f32(*(const uint16_t *)s);
				y = cais_f16_to_f32(*(const uint16_t *)o);
				rel = 0x1p-11;
				break;
			default:
				x = *(const float *)s;
				y = *(const float *)o;
				rel = 0x1p-24;
				break;
			}
			/* (to nearest, m at the clamp may be a whole step off: 32767.7) */
			if (!(fabs(x - y) <=
			      step * (nearest && abs(m) < 32767 ? 0.5 : 1.0) + fabs(x) * rel) ||
			    abs(m) > 32767) {
				fprintf(stderr,
					"bench_quant: %s %s b16 nearest %d: element %zu: %.9g -> "
					"%.9g (e %u m %d)\n",
					q->name, dt_names[dt], nearest, i, x, y, w[i / 32], m);
				ok = false;
			}
		}
	}
	return ok;
}

static size_t
parse_size(const char *t)
{
	char *end;
	double v = strtod(t, &end);

	switch (*end) {
	case 'k':
	case 'K':
		v *= 1024;
		break;
	case 'm':
	case 'M':
		v *= 1024 * 1024;
		break;
	case 'g':
	case 'G':
		v *= 1024.0 * 1024 * 1024;
		break;
	default:
		break;
	}
	return v > 0 ? (size_t)v : 0;
}

static unsigned int
parse_sizes(const char *s, size_t *out)
{
	unsigned int n = 0;
	char *copy = strdup(s), *save = NULL;

	for (char *t = strtok_r(copy, ",", &save); t && n < MAX_LIST;
	     t = strtok_r(NULL, ",", &save))
		out[n++] = parse_size(t);
	free(copy);
	return n;
}

static const char *
human(size_t bytes, char *buf, size_t len)
{
	if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
		snprintf(buf, len, "%zuM", bytes >> 20);
	else if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(buf, len, "%zuK", bytes >> 10);
	else
		snprintf(buf, len, "%zu", bytes);
	return buf;
}

/* Whether name is one of the comma-separated list. */
static bool
in_list(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);

		if (l == len && !strncmp(p, name, len))
			return true;
		p += l + (c != NULL);
	}
	return false;
}

static void
usage(void)
{
	printf("Usage: bench_quant [--sizes LIST] [--reps R] [--impl best|scalar|avx2|avx512|all]\n"
	       "                   [--ops LIST] [--csv FILE] [--quick]\n"
	       "The agent's conversions against memcpy of the same bytes, interleaved in one\n"
	       "run: encode (stochastic rounding, round to nearest) and decode (sum, avg over\n"
	       "%u ranks) of fp32, bf16, fp16 and int32, scale %g; BLOCK16 encode (b16-sr,\n"
	       "b16-rn) and decode (b16-dec) of the float types, scale 2^24. GB/s of the source\n"
	       "tensor's bytes, medians of R repetitions, and the median ratio to memcpy (goal\n"
	       ">= 0.5). --csv FILE: BLOCK16 rows in FILE-b16.csv (FILE less .csv). --ops: a\n"
	       "comma-separated subset of enc-sr,enc-rn,dec,dec-avg,b16-sr,b16-rn,b16-dec\n"
	       "(int32's encode is enc-sr).\n"
	       "Sizes are the tensor's bytes (K, M suffixes). Defaults: --sizes 256K,64M --reps\n"
	       "15 --impl best; --quick: 64K, 3 repetitions (a smoke run: it checks the\n"
	       "conversions give the values back, never a speed).\n",
	       AVG_N, (double)SCALE);
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"sizes", required_argument, NULL, 's'}, {"reps", required_argument, NULL, 'r'},
	    {"impl", required_argument, NULL, 'i'},  {"ops", required_argument, NULL, 'o'},
	    {"csv", required_argument, NULL, 'c'},   {"quick", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},	     {NULL, 0, NULL, 0}};
	size_t sizes[MAX_LIST] = {256 * 1024, 64 * 1024 * 1024};
	unsigned int ns = 2, reps = 15, ni = 0;
	const char *csv_path = NULL, *impl_name = "best", *ops = NULL;
	const struct cais_quant_ops *impls[3];
	FILE *csv = NULL, *csv16 = NULL;
	bool ok = true;
	int o;

	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (o) {
		case 's':
			ns = parse_sizes(optarg, sizes);
			break;
		case 'r':
			reps = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'i':
			impl_name = optarg;
			break;
		case 'o':
			ops = optarg;
			break;
		case 'c':
			csv_path = optarg;
			break;
		case 'q':
			sizes[0] = 64 * 1024;
			ns = 1;
			reps = 3;
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	for (unsigned int i = 0; i < ns; i++)
		if (sizes[i] < 64 || sizes[i] > ((size_t)1 << 33)) {
			fprintf(stderr, "bench_quant: --sizes: 64 bytes .. 8G each\n");
			return 2;
		}
	if (ns == 0 || reps < 1 || reps > 10000) {
		fprintf(stderr, "bench_quant: --sizes needs a size, --reps 1..10000\n");
		return 2;
	}
	if (!strcmp(impl_name, "best")) {
		impls[ni++] = cais_quant_best();
	} else if (!strcmp(impl_name, "all")) {
		impls[ni++] = &cais_quant_scalar;
		if (cais_quant_avx2())
			impls[ni++] = cais_quant_avx2();
		if (cais_quant_avx512())
			impls[ni++] = cais_quant_avx512();
	} else {
		const struct cais_quant_ops *q = !strcmp(impl_name, "scalar") ? &cais_quant_scalar
						 : !strcmp(impl_name, "avx2") ? cais_quant_avx2()
						 : !strcmp(impl_name, "avx512")
						     ? cais_quant_avx512()
						     : NULL;

		if (q == NULL) {
			fprintf(stderr,
				"bench_quant: --impl %s: not one of best, scalar, avx2, "
				"avx512, all, or not on this CPU\n",
				impl_name);
			return 2;
		}
		impls[ni++] = q;
	}
	if (csv_path && !(csv = fopen(csv_path, "w"))) {
		perror(csv_path);
		return 1;
	}
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
	}
	for (FILE *f = csv; f; f = f == csv ? csv16 : NULL)
		fprintf(f, "size_bytes,dtype,op,impl,elems,gbps,memcpy_gbps,ratio,ratio_min,"
			   "ratio_max,reps\n");
	printf("\n  ------------- agent conversions vs memcpy (scale %g, %u reps, median) "
	       "-------------\n",
	       (double)SCALE, reps);
	printf("  %5s %5s %7s %6s | %9s %9s | %6s %6s %6s | %s\n", "size", "dtype", "op", "impl",
	       "GB/s", "memcpy", "ratio", "min", "max", "goal");
	for (unsigned int si = 0; si < ns; si++) {
		for (unsigned int t = 0; t < 4; t++) {
			enum cais_datatype dt = dtypes[t];
			size_t n = sizes[si] / esize(dt);
			struct bufs b;
			char hb[32];

			b.src = xalloc(n * esize(dt));
			b.wire = xalloc(n * 4 + 64); /* FIXED32, or BLOCK16's 2n + n/32 */
			b.out = xalloc(n * esize(dt));
			b.copy = xalloc(n * esize(dt));
			fill(b.src, n, dt);
			for (unsigned int k = 0; k < ni; k++) {
				const struct cais_quant_ops *q = impls[k];
				struct cais_rng rng;

				cais_rng_seed(&rng, 1);
				if (!check(q, dt, &b, n < 1 << 20 ? n : 1 << 20, &rng))
					ok = false;
				if (dt != CAIS_INT32 &&
				    !check_b16(q, dt, &b, n < 1 << 20 ? n : 1 << 20, &rng))
					ok = false;
				for (unsigned int op = 0; op < OP_MAX_; op++) {
					bool b16 = op >= OP_B16_SR;
					FILE *out = b16 ? csv16 : csv;

					if (dt == CAIS_INT32 && op == OP_ENC_RN)
						continue; /* int32 has one encode: a byte swap */
					if (b16 && (dt == CAIS_INT32 || n > UINT32_MAX))
						continue; /* BLOCK16 carries float types */
					if (ops && !in_list(ops, op_names[op]))
						continue;
					if (op == OP_DEC || op == OP_DEC_AVG)
						q->encode(b.wire, b.src, n, dt, SCALE, true, NULL);
					if (op == OP_B16_DEC)
						q->encode_b16(b.wire, b.src, n, dt, B16_SCALE, true,
							      NULL);
					struct result r =
					    measure(q, (enum op)op, dt, &b, n, reps, &rng);
					const char *name = dt == CAIS_INT32 && op == OP_ENC_SR
							       ? "enc"
							       : op_names[op];

					printf("  %5s %5s %7s %6s | %9.2f %9.2f | %6.2f %6.2f "
					       "%6.2f | %s\n",
					       human(sizes[si], hb, sizeof(hb)), dt_names[t], name,
					       q->name, r.gbps, r.memcpy_gbps, r.ratio, r.ratio_lo,
					       r.ratio_hi, r.ratio >= 0.5 ? "ok" : "BELOW");
					if (out)
						fprintf(out,
							"%zu,%s,%s,%s,%zu,%.3f,%.3f,%.4f,%.4f,"
							"%.4f,%u\n",
							sizes[si], dt_names[t], name, q->name, n,
							r.gbps, r.memcpy_gbps, r.ratio, r.ratio_lo,
							r.ratio_hi, reps);
					fflush(stdout);
				}
			}
			free(b.src);
			free(b.wire);
			free(b.out);
			free(b.copy);
		}
	}
	printf("  (GB/s of the tensor's bytes: the dtype's; the wire is int32, or BLOCK16 for\n"
	       "   b16-*: 2 bytes per element + 1 per 32. memcpy: the tensor's bytes copied,\n"
	       "   timed in the same repetitions; ratio = memcpy time / conversion time, median\n"
	       "   over repetitions, min..max beside it. goal: >= 0.5)\n");
	if (csv)
		fclose(csv);
	if (csv16)
		fclose(csv16);
	if (!ok) {
		fprintf(stderr, "bench_quant: FAILED: a conversion did not give its input back\n");
		return 1;
	}
	return 0;
}
