/* SPDX-License-Identifier: BSD-3-Clause */
/* The MAC table: learning, moves, ageing, multicast, many entries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dp_l2.h"

static struct dp_l2 t;

static void
mac_of(uint32_t i, uint8_t mac[6])
{
	mac[0] = 0x02;
	mac[1] = 0xca;
	mac[2] = (uint8_t)(i >> 24);
	mac[3] = (uint8_t)(i >> 16);
	mac[4] = (uint8_t)(i >> 8);
	mac[5] = (uint8_t)i;
}

static void
t_learn_move_age(void **state)
{
	uint8_t a[6], b[6];

	(void)state;
	dp_l2_init(&t, 1000);
	mac_of(1, a);
	mac_of(2, b);
	assert_int_equal(dp_l2_lookup(&t, a, 10), -1);
	dp_l2_learn(&t, a, 3, 10);
	assert_int_equal(dp_l2_lookup(&t, a, 10), 3);
	assert_int_equal(dp_l2_lookup(&t, b, 10), -1);
	dp_l2_learn(&t, a, 5, 20); /* moved */
	assert_int_equal(dp_l2_lookup(&t, a, 20), 5);
	assert_int_equal(dp_l2_count(&t, 20), 1);
	/* ageing: refreshed only when older than age/8, looked up as a miss after age */
	assert_int_equal(dp_l2_lookup(&t, a, 1019), 5);
	assert_int_equal(dp_l2_lookup(&t, a, 1020), -1);
	dp_l2_learn(&t, a, 5, 900); /* refresh */
	assert_int_equal(dp_l2_lookup(&t, a, 1800), 5);
	assert_int_equal(dp_l2_count(&t, 5000), 0);
	/* a reader slightly behind the writer's clock still hits */
	dp_l2_learn(&t, b, 1, 6000);
	assert_int_equal(dp_l2_lookup(&t, b, 5990), 1);
}

static void
t_multicast(void **state)
{
	uint8_t bc[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	uint8_t mc[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};

	(void)state;
	dp_l2_init(&t, 1000);
	dp_l2_learn(&t, bc, 1, 1);
	dp_l2_learn(&t, mc, 1, 1);
	assert_int_equal(dp_l2_count(&t, 1), 0);
	assert_int_equal(dp_l2_lookup(&t, bc, 1), -1);
	assert_int_equal(dp_l2_lookup(&t, mc, 1), -1);
}

static void
t_many(void **state)
{
	const uint32_t n = DP_L2_ENTRIES / 2;
	uint32_t found = 0;
	uint8_t m[6];

	(void)state;
	dp_l2_init(&t, 1u << 30);
	for (uint32_t i = 0; i < n; i++) {
		mac_of(i * 2654435761u, m);
		dp_l2_learn(&t, m, (uint16_t)(i % 7), 100);
	}
	for (uint32_t i = 0; i < n; i++) {
		int p;

		mac_of(i * 2654435761u, m);
		p = dp_l2_lookup(&t, m, 100);
		if (p >= 0) {
			assert_int_equal(p, i % 7); /* never a wrong port */
			found++;
		}
	}
	/* half full with 4-way probing: nearly every MAC fits */
	assert_true(found >= n * 99 / 100);
	assert_int_equal(dp_l2_count(&t, 100), found);
	/* a full bucket replaces its oldest entry: learning never fails for a new MAC */
	for (uint32_t i = 0; i < 4 * DP_L2_ENTRIES; i++) {
		mac_of(0x80000000u + i, m);
		dp_l2_learn(&t, m, 1, 200 + i);
		assert_int_equal(dp_l2_lookup(&t, m, 200 + i), 1);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_learn_move_age),
	    cmocka_unit_test(t_multicast),
	    cmocka_unit_test(t_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
