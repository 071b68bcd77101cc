/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The register actions: the scalar, AVX2 and AVX-512 kernels of every wire dtype
 * against straightforward models (FIXED32: int32 sums and saturation;
 * BLOCK16: tests/common/b16.h, m x 2^e element by element and the RESULT
 * exponent found by trying every one with a floor-division rounding), and
 * against each other bit for bit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "dp_agg.h"
#include "../common/b16.h"

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

/* The kernel sets to check: scalar, then AVX2 and AVX-512 where the CPU has them. */
static unsigned int
kernel_sets(const struct dp_agg_kernels *ks[3])
{
	unsigned int n = 1;

	ks[0] = &dp_agg_scalar;
	if ((ks[n] = dp_agg_avx2()) != NULL)
		n++;
	if ((ks[n] = dp_agg_avx512()) != NULL)
		n++;
	return n;
}

/* Fold with a reduce op: 0 sum, 1 max, 2 min. */
static bool
fold(const struct dp_agg_ops *k, int op, int64_t *acc, const void *payload, unsigned int n)
{
	return op == 0	 ? k->sum(acc, payload, n)
	       : op == 1 ? k->max(acc, payload, n)
			 : k->min(acc, payload, n);
}

static int64_t
fold_ref(int op, int64_t r, int64_t v)
{
	return op == 0 ? r + v : op == 1 ? (v > r ? v : r) : (v < r ? v : r);
}

/* ---- FIXED32 ---- */

/* Fold k payloads with one kernel set and compare every element with a reference. */
static void
check_kernels(const struct dp_agg_ops *k, unsigned int n, int op, unsigned int npay)
{
	static int32_t vals[8][MAXN];
	static uint8_t pay[8][MAXN * 4 + 3];
	static int64_t acc[MAXN + 1], ref[MAXN];
	static uint8_t out[MAXN * 4 + 3];
	bool sat, want_sat = false, in_sat = false;

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
		for (unsigned int j = 1; j < npay; j++)
			r = fold_ref(op, r, vals[j][i]);
		ref[i] = r;
	}
	acc[n] = 0x5a5a5a5a5a5a5a5all; /* guard */
	in_sat |= k->load(acc, pay[0] + 1, n);
	for (unsigned int j = 1; j < npay; j++)
		in_sat |= fold(k, op, acc, pay[j] + 1, n);
	assert_false(in_sat); /* FIXED32 saturates only in the RESULT */
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
				check_kernels(k->wire[CAIS_DT_FIXED32], sizes[s], op, npay);
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
	if (!dp_agg_avx512())
		assert_ptr_equal(dp_agg_best(), k);
	run_all(k);
}

/* AVX-512 FIXED32 against the reference, every size, op and payload count. */
static void
t_avx512(void **state)
{
	const struct dp_agg_kernels *k = dp_agg_avx512();

	(void)state;
	if (!k) {
		print_message("no AVX-512 on this CPU: checking that it is not chosen\n");
		assert_int_not_equal(strcmp(dp_agg_best()->name, "avx512"), 0);
		return;
	}
	assert_ptr_equal(dp_agg_best(), k);
	run_all(k);
}

/* Saturation in both directions, and no false OVERFLOW at the exact limits. */
static void
t_saturation(void **state)
{
	const struct dp_agg_kernels *ks[3];
	unsigned int nk = kernel_sets(ks);
	int64_t acc[9];
	uint8_t out[36];

	(void)state;
	for (unsigned int k = 0; k < nk; k++) {
		const struct dp_agg_ops *f32 = ks[k]->wire[CAIS_DT_FIXED32];

		for (int i = 0; i < 9; i++)
			acc[i] = (i % 3 == 0)	? (int64_t)INT32_MAX + 1
				 : (i % 3 == 1) ? (int64_t)INT32_MIN - 1
						: 5;
		assert_true(f32->store(out, acc, 9));
		for (int i = 0; i < 9; i++)
			assert_int_equal(be_at(out, (unsigned int)i), i % 3 == 0   ? INT32_MAX
								      : i % 3 == 1 ? INT32_MIN
										   : 5);
		for (int i = 0; i < 9; i++)
			acc[i] = (i & 1) ? INT32_MAX : INT32_MIN;
		assert_false(f32->store(out, acc, 9));
		/* the lane that saturates is the tail (scalar) lane */
		acc[8] = (int64_t)INT32_MAX * 3;
		assert_true(f32->store(out, acc, 9));
		assert_int_equal(be_at(out, 8), INT32_MAX);
		/* one vector lane alone, below and then above the range */
		for (int i = 0; i < 9; i++)
			acc[i] = 7;
		acc[3] = (int64_t)INT32_MIN - 1;
		assert_true(f32->store(out, acc, 9));
		assert_int_equal(be_at(out, 3), INT32_MIN);
		acc[3] = (int64_t)INT32_MAX + 1;
		assert_true(f32->store(out, acc, 9));
		assert_int_equal(be_at(out, 3), INT32_MAX);
	}
}

/* ---- BLOCK16 ---- */

#define NBLK	    (MAXN / CAIS_B16_BLOCK)
#define B16_BYTES   (NBLK + 2 * MAXN) /* 2048 elements: 64 exponent bytes (a multiple of 4) */
#define B16_LARGEST ((int64_t)CAIS_MAX_WORLD * 32768 * ((int64_t)1 << CAIS_B16_EMAX_DATA))

/* A BLOCK16 payload in host form. */
struct b16 {
	unsigned int n;
	uint8_t e[NBLK];
	int16_t m[MAXN];
};

/* The wire form (E4): exponents, zero padding, big-endian m. @return its bytes */
static size_t
b16_encode(uint8_t *p, const struct b16 *x)
{
	size_t len = tb16_encode(p, x->e, x->m, x->n);

	assert_int_equal(len, cais_payload_bytes(CAIS_DT_BLOCK16, x->n));
	return len;
}

/* Exponent draws: mostly anywhere in 0..40, often the ends, above 40 when allowed. */
static uint8_t
draw_exp(bool over)
{
	uint32_t r = rnd() % 16;

	if (over && r == 0)
		return (uint8_t)(CAIS_B16_EMAX_DATA + 1 + rnd() % (255 - CAIS_B16_EMAX_DATA));
	if (r <= 2)
		return 0;
	if (r <= 4)
		return CAIS_B16_EMAX_DATA;
	return (uint8_t)(rnd() % (CAIS_B16_EMAX_DATA + 1));
}

/* m draws: full range (-32768 included), the extremes, zero, small. */
static int16_t
draw_m(void)
{
	static const int16_t special[] = {INT16_MIN, -CAIS_B16_MMAX, CAIS_B16_MMAX, 0, 1, -1};
	uint32_t r = rnd() % 8;

	if (r == 0)
		return special[rnd() % (sizeof(special) / sizeof(special[0]))];
	if (r == 1)
		return (int16_t)((int32_t)(rnd() % 201) - 100);
	return (int16_t)rnd();
}

static void
b16_draw(struct b16 *x, unsigned int n, bool over)
{
	x->n = n;
	for (unsigned int b = 0; b < NBLK; b++)
		x->e[b] = draw_exp(over);
	/* a block of one exponent now and then: every element rounds alike */
	if (rnd() % 4 == 0)
		memset(x->e, draw_exp(over), sizeof(x->e));
	for (unsigned int i = 0; i < n; i++)
		x->m[i] = draw_m();
}

/*
 * Fold npay random payloads of n elements with kernels k and op (-1: load
 * only), compare the accumulators and the saturation with the model, then
 * the RESULT payload byte for byte (guards around both). Leaves acc and the
 * RESULT in the statics for the caller.
 */
static int64_t b16_acc[MAXN + 1];
static uint8_t b16_out[B16_BYTES + 8];

static void
check_b16(const struct dp_agg_ops *k, const struct b16 *pays, unsigned int npay, int op)
{
	static uint8_t wire[8][B16_BYTES + 3], want[B16_BYTES];
	static int64_t ref[MAXN];
	unsigned int n = pays[0].n;
	bool sat = false, want_sat = false;
	size_t len = 0;

	for (unsigned int j = 0; j < npay; j++)
		len = b16_encode(wire[j] + 1, &pays[j]); /* odd offset, as in an mbuf */
	for (unsigned int i = 0; i < n; i++) {
		ref[i] = tb16_elem(wire[0] + 1, n, i, &want_sat);
		for (unsigned int j = 1; j < npay; j++)
			ref[i] = fold_ref(op, ref[i], tb16_elem(wire[j] + 1, n, i, &want_sat));
	}
	b16_acc[n] = 0x5a5a5a5a5a5a5a5all;
	sat = k->load(b16_acc, wire[0] + 1, n);
	for (unsigned int j = 1; j < npay; j++)
		sat |= fold(k, op, b16_acc, wire[j] + 1, n);
	assert_int_equal(b16_acc[n], 0x5a5a5a5a5a5a5a5all);
	assert_int_equal(sat, want_sat);
	for (unsigned int i = 0; i < n; i++)
		if (b16_acc[i] != ref[i])
			fail_msg("n %u op %d element %u: %lld, want %lld", n, op, i,
				 (long long)b16_acc[i], (long long)ref[i]);
	memset(b16_out, 0xEE, sizeof(b16_out)); /* the padding must be written as zeros */
	assert_false(k->store(b16_out, b16_acc, n));
	assert_int_equal(tb16_store(want, ref, n), len);
	assert_int_equal(b16_out[len], 0xEE);
	if (memcmp(b16_out, want, len) != 0) {
		size_t at = 0;

		while (b16_out[at] == want[at])
			at++;
		fail_msg("n %u op %d: RESULT byte %zu is %02x, want %02x", n, op, at, b16_out[at],
			 want[at]);
	}
}

static const unsigned int b16_sizes[] = {1,   2,   7,	8,   15,   16,	 17,   31,  32,	 33,
					 47,  63,  64,	65,  95,   96,	 97,   99,  100, 127,
					 128, 129, 255, 256, 1000, 1024, 2047, 2048};

/* Every size, every op, 1 to 8 contributions, exponents within the DATA limit. */
static void
run_b16(const struct dp_agg_kernels *ks)
{
	static struct b16 pays[8];
	const struct dp_agg_ops *k = ks->wire[CAIS_DT_BLOCK16];

	for (size_t s = 0; s < sizeof(b16_sizes) / sizeof(b16_sizes[0]); s++)
		for (int op = 0; op < 3; op++)
			for (unsigned int npay = 1; npay <= 8; npay += 3) {
				for (unsigned int j = 0; j < npay; j++)
					b16_draw(&pays[j], b16_sizes[s], false);
				check_b16(k, pays, npay, op);
			}
	/* odd counts 1..100, summed */
	for (unsigned int n = 1; n <= 100; n += 2) {
		for (unsigned int j = 0; j < 4; j++)
			b16_draw(&pays[j], n, false);
		check_b16(k, pays, 4, 0);
	}
}

static void
t_b16_scalar(void **state)
{
	(void)state;
	run_b16(&dp_agg_scalar);
}

static void
t_b16_avx2(void **state)
{
	const struct dp_agg_kernels *k = dp_agg_avx2();

	(void)state;
	if (!k) {
		print_message("no AVX2 on this CPU: skipped\n");
		return;
	}
	run_b16(k);
}

static void
t_b16_avx512(void **state)
{
	const struct dp_agg_kernels *k = dp_agg_avx512();

	(void)state;
	if (!k) {
		print_message("no AVX-512 on this CPU: skipped\n");
		return;
	}
	assert_ptr_not_equal(k->wire[CAIS_DT_BLOCK16], dp_agg_avx2()->wire[CAIS_DT_BLOCK16]);
	run_b16(k);
}

/*
 * Scalar against each vector set (AVX2, AVX-512) on the same random data,
 * exponents above the limit included: the same accumulators, saturation and
 * RESULT bytes.
 */
static void
t_b16_same_bits(void **state)
{
	static uint8_t wire[B16_BYTES], out[3][B16_BYTES];
	static int64_t acc[3][MAXN];
	static struct b16 x;
	const struct dp_agg_kernels *ks[3];
	unsigned int nk = kernel_sets(ks);

	(void)state;
	if (nk < 2) {
		print_message("no AVX2 on this CPU: skipped\n");
		return;
	}
	for (unsigned int round = 0; round < 400; round++) {
		unsigned int n =
		    round % 2 ? 1 + rnd() % MAXN
			      : b16_sizes[round / 2 % (sizeof(b16_sizes) / sizeof(*b16_sizes))];
		unsigned int npay = 1 + rnd() % 6;
		int op = (int)(rnd() % 3);
		bool sat[3] = {false, false, false};

		for (unsigned int j = 0; j < npay; j++) {
			b16_draw(&x, n, true);
			b16_encode(wire, &x);
			for (unsigned int k = 0; k < nk; k++) {
				const struct dp_agg_ops *o = ks[k]->wire[CAIS_DT_BLOCK16];

				sat[k] |=
				    j ? fold(o, op, acc[k], wire, n) : o->load(acc[k], wire, n);
			}
		}
		for (unsigned int k = 0; k < nk; k++)
			ks[k]->wire[CAIS_DT_BLOCK16]->store(out[k], acc[k], n);
		for (unsigned int k = 1; k < nk; k++) {
			assert_int_equal(sat[0], sat[k]);
			assert_memory_equal(acc[0], acc[k], n * sizeof(int64_t));
			assert_memory_equal(out[0], out[k], cais_payload_bytes(CAIS_DT_BLOCK16, n));
		}
	}
}

/* One accumulator block through both stores: the exponent and the m_i written. */
static void
expect_store(const int64_t *acc, unsigned int n, unsigned int want_e, const int16_t *want_m)
{
	const struct dp_agg_kernels *ks[3];
	unsigned int nk = kernel_sets(ks);
	uint8_t out[4 + 2 * CAIS_B16_BLOCK];

	for (unsigned int k = 0; k < nk; k++) {
		memset(out, 0xEE, sizeof(out));
		assert_false(ks[k]->wire[CAIS_DT_BLOCK16]->store(out, acc, n));
		assert_int_equal(out[0], want_e);
		assert_int_equal(out[1], 0); /* padding */
		assert_int_equal(out[3], 0);
		for (unsigned int i = 0; i < n; i++) {
			uint16_t w;

			memcpy(&w, out + 4 + 2 * i, 2);
			if ((int16_t)ntohs(w) != want_m[i])
				fail_msg("%s: element %u of %lld: m %d, want %d at e %u",
					 ks[k]->name, i, (long long)acc[i], (int16_t)ntohs(w),
					 want_m[i], want_e);
		}
	}
}

/*
 * The RESULT exponent and rounding at their edges: the largest |m| is 32767
 * (a quotient that rounds to +-32768 takes the next exponent), ties go to
 * the even quotient, in both signs; the block's largest decides for all.
 */
static void
t_b16_rounding(void **state)
{
	static const struct {
		int64_t acc;
		unsigned int e;
		int16_t m;
	} one[] = {
	    {0, 0, 0},
	    {32767, 0, 32767},
	    {-32767, 0, -32767},
	    {-32768, 1, -16384},
	    {32768, 1, 16384},
	    {65533, 1, 32766}, /* 32766.5: tie, even */
	    {65534, 1, 32767}, /* 32767 exactly */
	    {65535, 2, 16384}, /* 32767.5 would round to 32768: e 2, 16383.75 */
	    {-65535, 2, -16384},
	    {-65534, 1, -32767},
	    {-65533, 1, -32766}, /* -32766.5: tie, even */
	    {-98303, 2, -24576}, /* -24575.75 */
	    {(int64_t)65535 << 10, 12, 16384},
	    {((int64_t)65534 << 10) + 511, 11, 32767},	/* 32767.499: down */
	    {((int64_t)65535 << 10) - 1, 11, 32767},	/* 32767.4995: down */
	    {((int64_t)32766 << 11) + 1024, 11, 32766}, /* 32766.5: tie, even */
	    {((int64_t)32765 << 11) + 1024, 11, 32766}, /* 32765.5: tie, even */
	    {-(((int64_t)32765 << 11) + 1024), 11, -32766},
	    {B16_LARGEST, 48, 32640},
	    {-B16_LARGEST, 48, -32640},
	    {(int64_t)CAIS_MAX_WORLD * CAIS_B16_MMAX << CAIS_B16_EMAX_DATA, 48, 32639},
	};
	int64_t acc[CAIS_B16_BLOCK];
	int16_t m[CAIS_B16_BLOCK];

	(void)state;
	for (size_t t = 0; t < sizeof(one) / sizeof(one[0]); t++) {
		/* alone, and as the largest of a full block whose others round with it */
		expect_store(&one[t].acc, 1, one[t].e, &one[t].m);
		for (unsigned int i = 0; i < CAIS_B16_BLOCK; i++) {
			int64_t small = (int64_t)(i * 3) << (one[t].e ? one[t].e - 1 : 0);

			acc[i] = i == 17 ? one[t].acc : (one[t].acc < 0 ? small : -small);
			m[i] = (int16_t)tb16_round(acc[i], one[t].e);
		}
		assert_int_equal(m[17], one[t].m);
		expect_store(acc, CAIS_B16_BLOCK, one[t].e, m);
	}
	/* ties of small quotients at e 3: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, -3.5 -> -4 */
	acc[0] = 32767 << 3;
	acc[1] = 20;
	acc[2] = 28;
	acc[3] = -20;
	acc[4] = -28;
	acc[5] = 4;  /* 0.5 -> 0 */
	acc[6] = 12; /* 1.5 -> 2 */
	acc[7] = -4;
	{
		const int16_t want[8] = {32767, 2, 4, -2, -4, 0, 2, 0};

		expect_store(acc, 8, 3, want);
	}
}

/* Random accumulators of every magnitude, many at the edge of an exponent. */
static void
t_b16_store_random(void **state)
{
	static int64_t acc[MAXN];
	static uint8_t out[B16_BYTES], want[B16_BYTES];
	const struct dp_agg_kernels *ks[3];
	unsigned int nk = kernel_sets(ks);

	(void)state;
	for (unsigned int round = 0; round < 300; round++) {
		unsigned int n = round % 3 ? 1 + rnd() % 300 : MAXN;

		for (unsigned int i = 0; i < n; i++) {
			unsigned int sh = rnd() % 48;
			uint64_t v;

			switch (rnd() % 4) {
			case 0: /* the edge of a quotient of 32767.5 at exponent sh + 1 */
				v = ((uint64_t)65535 << sh) + rnd() % 5 - 2;
				break;
			case 1: /* a tie at exponent sh */
				v = ((uint64_t)(rnd() % 65535) << sh) + (sh ? 1ull << (sh - 1) : 0);
				break;
			default: /* anything up to 2^63 */
				v = ((uint64_t)rnd() << 32 | rnd()) >> (1 + rnd() % 63);
				break;
			}
			if (v > (uint64_t)B16_LARGEST)
				v = (uint64_t)B16_LARGEST;
			acc[i] = rnd() % 2 ? -(int64_t)v : (int64_t)v;
		}
		assert_int_not_equal(tb16_store(want, acc, n), 0);
		for (unsigned int k = 0; k < nk; k++) {
			assert_false(ks[k]->wire[CAIS_DT_BLOCK16]->store(out, acc, n));
			assert_memory_equal(out, want, cais_payload_bytes(CAIS_DT_BLOCK16, n));
		}
	}
}

/*
 * Sums at the limits: 255 contributions of -32768 x 2^40 and of 32767 x 2^40
 * in one block, exact in 64 bits, stored at e 48.
 */
static void
t_b16_extreme_sum(void **state)
{
	static struct b16 x;
	static uint8_t wire[B16_BYTES];
	const struct dp_agg_kernels *ks[3];
	unsigned int nk = kernel_sets(ks);
	int64_t acc[40];
	int16_t want[40];

	(void)state;
	x.n = 40;
	x.e[0] = x.e[1] = CAIS_B16_EMAX_DATA;
	for (unsigned int i = 0; i < 40; i++)
		x.m[i] = i % 2 ? INT16_MIN : CAIS_B16_MMAX;
	b16_encode(wire, &x);
	for (unsigned int k = 0; k < nk; k++) {
		const struct dp_agg_ops *o = ks[k]->wire[CAIS_DT_BLOCK16];
		uint8_t out[4 + 80];

		assert_false(o->load(acc, wire, 40));
		for (unsigned int r = 1; r < CAIS_MAX_WORLD; r++)
			assert_false(o->sum(acc, wire, 40));
		for (unsigned int i = 0; i < 40; i++) {
			assert_int_equal(acc[i], (int64_t)CAIS_MAX_WORLD * x.m[i] *
						     ((int64_t)1 << CAIS_B16_EMAX_DATA));
			want[i] = i % 2 ? -32640 : 32639; /* 255 x 32767 / 256 = 32639.004 */
		}
		assert_false(o->store(out, acc, 40));
		assert_int_equal(out[0], CAIS_B16_EMAX);
		assert_int_equal(out[1], CAIS_B16_EMAX);
		for (unsigned int i = 0; i < 40; i++) {
			uint16_t w;

			memcpy(&w, out + 4 + 2 * i, 2);
			assert_int_equal((int16_t)ntohs(w), want[i]);
		}
	}
}

/* A DATA exponent above 40 counts as 40 and is reported, by every fold; 40 itself is not. */
static void
t_b16_overflow(void **state)
{
	static struct b16 x;
	static uint8_t wire[B16_BYTES];
	const struct dp_agg_kernels *ks[3];
	unsigned int nk = kernel_sets(ks);
	static int64_t acc[70];

	(void)state;
	x.n = 70; /* blocks 0..2, the last of 6 elements; one byte of padding */
	for (unsigned int i = 0; i < 70; i++)
		x.m[i] = (int16_t)(i % 2 ? -(int)i : (int)i);
	for (unsigned int k = 0; k < nk; k++) {
		const struct dp_agg_ops *o = ks[k]->wire[CAIS_DT_BLOCK16];

		for (unsigned int blk = 0; blk < 3; blk++)
			for (unsigned int e = CAIS_B16_EMAX_DATA; e <= 255; e += e < 42 ? 1 : 71) {
				bool want = e > CAIS_B16_EMAX_DATA;

				memset(x.e, 3, sizeof(x.e));
				x.e[blk] = (uint8_t)e;
				b16_encode(wire, &x);
				assert_int_equal(o->load(acc, wire, 70), want);
				for (unsigned int i = 0; i < 70; i++) {
					unsigned int ei = i / 32 == blk ? CAIS_B16_EMAX_DATA : 3;

					assert_int_equal(acc[i],
							 (int64_t)x.m[i] * ((int64_t)1 << ei));
				}
				assert_int_equal(o->sum(acc, wire, 70), want);
				assert_int_equal(o->max(acc, wire, 70), want);
				assert_int_equal(o->min(acc, wire, 70), want);
				/* the padding of the exponent bytes is not looked at */
				wire[3] = 0xFF;
				assert_int_equal(o->sum(acc, wire, 70), want);
			}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_scalar),		 cmocka_unit_test(t_avx2),
	    cmocka_unit_test(t_avx512),		 cmocka_unit_test(t_saturation),
	    cmocka_unit_test(t_b16_scalar),	 cmocka_unit_test(t_b16_avx2),
	    cmocka_unit_test(t_b16_avx512),	 cmocka_unit_test(t_b16_same_bits),
	    cmocka_unit_test(t_b16_rounding),	 cmocka_unit_test(t_b16_store_random),
	    cmocka_unit_test(t_b16_extreme_sum), cmocka_unit_test(t_b16_overflow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
