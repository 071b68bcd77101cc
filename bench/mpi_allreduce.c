/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_allreduce: the baseline of the end-to-end benchmark (bench/e2e.sh).
 * MPI_Allreduce (float, sum) of every size from --min-bytes to --max-bytes
 * by doubling, timed as cais-allreduce-perf --sync times a collective: the
 * ranks line up (MPI_Barrier, untimed), then MPI_Allreduce from issue to
 * completion, then line up again before checking (no rank checks beside
 * another's timed call). Each size: --warmup untimed iterations, --iters
 * timed ones; the median per rank, and the slowest rank's median printed by
 * rank 0:
 *
 *   # mpi_allreduce ranks=N iters=K warmup=W
 *   bytes count time_us algbw_GBps busbw_GBps wrong
 *
 * Every element of every iteration is checked: the inputs are small
 * integers (exact in float), so the sum is exact and compared with ==.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static long
parse_bytes(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || v <= 0)
		return -1;
	if (*end == 'K' || *end == 'k')
		v *= 1024, end++;
	else if (*end == 'M' || *end == 'm')
		v *= 1024 * 1024, end++;
	return *end ? -1 : v;
}

static void
usage(FILE *f)
{
	fprintf(f, "Usage: mpirun ... mpi_allreduce [--min-bytes B] [--max-bytes B] [--iters K]\n"
		   "                     [--warmup W]\n"
		   "MPI_Allreduce (float, sum) of every doubling from B_min (default 128K) to\n"
		   "B_max (default 64M); each size W untimed (default 1) and K timed (default 5)\n"
		   "iterations after an untimed barrier; prints per size the slowest rank's\n"
		   "median time. Every element is checked (exact small-integer sums).\n");
}

int
main(int argc, char **argv)
{
	long min_b = 128 * 1024, max_b = 64L * 1024 * 1024;
	int iters = 5, warmup = 1, rank, world, bad = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "mpi_allreduce: %s needs a value\n", argv[i]);
			return 2;
		}
		if (!strcmp(argv[i], "--min-bytes"))
			min_b = parse_bytes(argv[++i]);
		else if (!strcmp(argv[i], "--max-bytes"))
			max_b = parse_bytes(argv[++i]);
		else if (!strcmp(argv[i], "--iters"))
			iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--warmup"))
			warmup = atoi(argv[++i]);
		else {
			fprintf(stderr, "mpi_allreduce: unknown argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (min_b < 4 || max_b < min_b || min_b % 4 || iters < 1 || iters > 10000 || warmup < 0) {
		fprintf(stderr, "mpi_allreduce: bad sizes or counts\n");
		return 2;
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);

	size_t max_count = (size_t)max_b / 4;
	float *in = malloc(max_count * sizeof(float)), *out = malloc(max_count * sizeof(float));
	double *t = malloc((size_t)iters * sizeof(double));

	if (!in || !out || !t) {
		fprintf(stderr, "mpi_allreduce: rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
	if (rank == 0)
		printf("# mpi_allreduce ranks=%d iters=%d warmup=%d\n"
		       "# bytes count time_us algbw_GBps busbw_GBps wrong\n",
		       world, iters, warmup);
	for (long bytes = min_b; bytes <= max_b; bytes *= 2) {
		size_t count = (size_t)bytes / 4;
		long wrong = 0, wrong_all = 0;
		double med, med_max;

		for (int it = 0; it < warmup + iters; it++) {
			/* element i of rank r: (i + r + it) % 7 - 3, exact sums */
			for (size_t i = 0; i < count; i++)
				in[i] = (float)((long)((i + (size_t)rank + (size_t)it) % 7) - 3);
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			double dt = MPI_Wtime() - t0;

			/* no rank checks beside another's timed call (as
			 * cais-allreduce-perf --sync --check does) */
			MPI_Barrier(MPI_COMM_WORLD);
			if (it >= warmup)
				t[it - warmup] = dt;
			float want[7]; /* the sum depends on (i + it) % 7 only */

			for (int k = 0; k < 7; k++) {
				long w = 0;

				for (int r = 0; r < world; r++)
					w += (long)((k + r) % 7) - 3;
				want[k] = (float)w;
			}
			for (size_t i = 0; i < count; i++)
				if (out[i] != want[(i + (size_t)it) % 7])
					wrong++;
		}
		qsort(t, (size_t)iters, sizeof(double), cmp_double);
		med = iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2;
		MPI_Reduce(&med, &med_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			double algbw = (double)bytes / med_max / 1e9;

			printf("%ld %zu %.1f %.3f %.3f %ld\n", bytes, count, med_max * 1e6, algbw,
			       algbw * 2.0 * (world - 1) / world, wrong_all);
			fflush(stdout);
		}
		if (wrong_all)
			bad = 1;
	}
	MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
	free(in);
	free(out);
	free(t);
	MPI_Finalize();
	return bad ? 1 : 0;
}
