/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Test helper: BLOCK16 (docs/PROTOCOL.md E4) without DPDK: the wire form of
 * a payload, and a straightforward model of what the switch makes of one:
 * each element m x 2^e (an exponent above the DATA limit counted as the
 * limit), and the RESULT payload of exact sums with its exponents found by
 * trying each from 0 up, rounding by floor division. Written from the page,
 * apart from the switch's kernels (dataplane/dp_agg_b16.c), for the unit
 * tests, the fuzzer's model and its seeds, the parity vectors and the
 * benchmark.
 */
#ifndef CAIS_TEST_B16_H
#define CAIS_TEST_B16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#include <cais/proto.h>

/**
 * Write a BLOCK16 payload of n elements at p: the exponent of each block
 * (exps[b], ceil(n / 32) of them), zero padding, then m[0..n-1] big-endian.
 * @return its bytes, cais_payload_bytes(CAIS_DT_BLOCK16, n)
 */
static inline size_t
tb16_encode(uint8_t *p, const uint8_t *exps, const int16_t *m, size_t n)
{
	size_t eb = cais_b16_exp_bytes((uint32_t)n);

	memset(p, 0, eb);
	for (size_t b = 0; b * CAIS_B16_BLOCK < n; b++)
		p[b] = exps[b];
	for (size_t i = 0; i < n; i++) {
		uint16_t w = htons((uint16_t)m[i]);

		memcpy(p + eb + 2 * i, &w, 2);
	}
	return eb + 2 * n;
}

/**
 * Element i of a BLOCK16 payload of n elements: m_i x 2^e of its block, an
 * exponent above CAIS_B16_EMAX_DATA counted as that (and *sat set).
 */
static inline int64_t
tb16_elem(const uint8_t *payload, size_t n, size_t i, bool *sat)
{
	unsigned int e = payload[i / CAIS_B16_BLOCK];
	uint16_t w;

	memcpy(&w, payload + cais_b16_exp_bytes((uint32_t)n) + 2 * i, 2);
	if (e > CAIS_B16_EMAX_DATA) {
		*sat = true;
		e = CAIS_B16_EMAX_DATA;
	}
	return (int64_t)(int16_t)ntohs(w) * ((int64_t)1 << e);
}

/** a / 2^e rounded to nearest, ties to even (floor division, then the remainder). */
static inline int64_t
tb16_round(int64_t a, unsigned int e)
{
	int64_t d = (int64_t)1 << e, q = a / d, r = a % d;

	if (r < 0) { /* C division truncates: make it floor */
		q--;
		r += d;
	}
	if (2 * r > d || (2 * r == d && (q & 1)))
		q++;
	return q;
}

/**
 * The RESULT payload of accumulators acc[0..n-1] (exact sums, maxima or
 * minima): per block the smallest exponent in 0..CAIS_B16_EMAX at which
 * every rounded quotient lies in -32767..32767, and the quotients.
 * @return its bytes; 0 if a block fits no exponent (never, for sums of
 *         at most 255 contributions)
 */
static inline size_t
tb16_store(uint8_t *out, const int64_t *acc, size_t n)
{
	size_t eb = cais_b16_exp_bytes((uint32_t)n);

	memset(out, 0, eb);
	for (size_t b = 0; b * CAIS_B16_BLOCK < n; b++) {
		size_t i0 = b * CAIS_B16_BLOCK, i1 = i0 + CAIS_B16_BLOCK < n ? i0 + 32 : n;
		unsigned int e = 0;
		bool fits = false;

		for (; !fits; e += !fits) {
			if (e > CAIS_B16_EMAX)
				return 0;
			fits = true;
			for (size_t i = i0; i < i1; i++) {
				int64_t q = tb16_round(acc[i], e);

				fits &= q >= -CAIS_B16_MMAX && q <= CAIS_B16_MMAX;
			}
		}
		out[b] = (uint8_t)e;
		for (size_t i = i0; i < i1; i++) {
			uint16_t w = htons((uint16_t)tb16_round(acc[i], e));

			memcpy(out + eb + 2 * i, &w, 2);
		}
	}
	return eb + 2 * n;
}

#endif /* CAIS_TEST_B16_H */
