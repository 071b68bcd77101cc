/* SPDX-License-Identifier: BSD-3-Clause */
/* The register actions: scalar and AVX2 kernels against a reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "dp_agg.h"

#define MAXN 2048

static uint64_t rng = 88172645463325252ull;

static uint32_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

static void
be_fill(uint8_t *p, const int32_t *v, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		uint32_t w = htonl((uint32_t)v[i]);
		memcpy(p + 4 * i, &w, 4);
	}
}

static int32_t
be_at(const uint8_t *p, unsigned int i)
{
	uint32_t w;

	memcpy(&w, p + 4 * i, 4);
	return (int32_t)ntohl(w);
}

/* Fold k payloads with one kernel set and compare every element with a reference. */
static void
check_kernels(const struct dp_agg_kernels *k, unsigned int n, int op, unsigned int npay)
{
	static int32_t vals[8][MAXN];
	static uint8_t pay[8][MAXN * 4 + 3];
	static int64_t acc[MAXN + 1], ref[MAXN];
	static uint8_t out[MAXN * 4 + 3];
	bool sat, want_sat = false;

	for (unsigned int j = 0; j < npay; j++) {
		for (unsigned int i = 0; i < n; i++) {
			uint32_t r = rnd();
			/* mostly full range, so sums of 8 saturate often; some small values */
			vals[j][i] = (r & 3) ? (int32_t)rnd() : (int32_t)(r % 2001) - 1000;
		}
		/* odd offset: payloads are not aligned in mbufs */
		be_fill(pay[j] + 1, vals[j], n);
	}
	for (unsigned int i = 0; i < n; i++) {
		int64_t r = vals[0][i];
		for (unsigned int j = 1; j < npay; j++) {
			int64_t v = vals[j][i];
			r = op == 0 ? r + v : op == 1 ? (v > r ? v : r) : (v < r ? v : r);
		}
		ref[i] = r;
	}
	acc[n] = 0x5a5a5a5a5a5a5a5all; /* guard */
	k->load(acc, pay[0] + 1, n);
	for (unsigned int j = 1; j < npay; j++) {
		if (op == 0)
			k->sum(acc, pay[j] + 1, n);
		else if (op == 1)
			k->max(acc, pay[j] + 1, n);
		else
			k->min(acc, pay[j] + 1, n);
	}
	assert_int_equal(acc[n], 0x5a5a5a5a5a5a5a5all);
	for (unsigned int i = 0; i < n; i++)
		assert_int_equal(acc[i], ref[i]);
	out[1 + 4 * n] = 0xEE;
	sat = k->store(out + 1, acc, n);
	assert_int_equal(out[1 + 4 * n], 0xEE);
	for (unsigned int i = 0; i < n; i++) {
		int64_t want = ref[i] > INT32_MAX   ? INT32_MAX
			       : ref[i] < INT32_MIN ? INT32_MIN
						    : ref[i];
		want_sat |= want != ref[i];
		assert_int_equal(be_at(out + 1, i), want);
	}
	assert_int_equal(sat, want_sat);
}

static void
run_all(const struct dp_agg_kernels *k)
{
	static const unsigned int sizes[] = {0,	 1,  2,	 3,  7,	  8,   9,    15,   16,	17,
					     31, 63, 64, 65, 255, 256, 1000, 2047, 2048};

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (int op = 0; op < 3; op++)
			for (unsigned int npay = 1; npay <= 8; npay += 3)
				check_kernels(k, sizes[s], op, npay);
}

static void
t_scalar(void **state)
{
	(void)state;
	run_all(&dp_agg_scalar);
}

static void
t_avx2(void **state)
{
	const struct dp_agg_kernels *k = dp_agg_avx2();

	(void)state;
	if (!k) {
		print_message("no AVX2 on this CPU: checking that the best kernels are scalar\n");
		assert_ptr_equal(dp_agg_best(), &dp_agg_scalar);
		return;
	}
	assert_ptr_equal(dp_agg_best(), k);
	run_all(k);
}

/* Saturation in both directions, and no false OVERFLOW at the exact limits. */
static void
t_saturation(void **state)
{
	const struct dp_agg_kernels *ks[2] = {&dp_agg_scalar, dp_agg_avx2()};
	int64_t acc[9];
	uint8_t out[36];

	(void)state;
	for (int k = 0; k < 2 && ks[k]; k++) {
		for (int i = 0; i < 9; i++)
			acc[i] = (i % 3 == 0)	? (int64_t)INT32_MAX + 1
				 : (i % 3 == 1) ? (int64_t)INT32_MIN - 1
						: 5;
		assert_true(ks[k]->store(out, acc, 9));
		for (int i = 0; i < 9; i++)
			assert_int_equal(be_at(out, (unsigned int)i), i % 3 == 0   ? INT32_MAX
								      : i % 3 == 1 ? INT32_MIN
										   : 5);
		for (int i = 0; i < 9; i++)
			acc[i] = (i & 1) ? INT32_MAX : INT32_MIN;
		assert_false(ks[k]->store(out, acc, 9));
		/* the lane that saturates is the tail (scalar) lane */
		acc[8] = (int64_t)INT32_MAX * 3;
		assert_true(ks[k]->store(out, acc, 9));
		assert_int_equal(be_at(out, 8), INT32_MAX);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_scalar),
	    cmocka_unit_test(t_avx2),
	    cmocka_unit_test(t_saturation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
