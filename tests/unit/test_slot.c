/* SPDX-License-Identifier: BSD-3-Clause */
/* The slot state machine on its own: every verdict, in every state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dp_slot.h"

static enum dp_verdict
step(struct dp_slot *sl, uint32_t seq, uint8_t rank, uint16_t count, uint16_t n, bool *done)
{
	return dp_slot_step(sl, seq, 7, rank, count, CAIS_DT_FIXED32, n, done);
}

static void
t_round(void **state)
{
	struct dp_slot sl;
	bool done;

	(void)state;
	memset(&sl, 0, sizeof(sl));
	assert_int_equal(step(&sl, 100, 2, 64, 4, &done), DP_V_NEW);
	assert_false(done);
	assert_int_equal(sl.state, DP_SLOT_OPEN);
	assert_int_equal(step(&sl, 100, 2, 64, 4, &done), DP_V_DUPLICATE);
	assert_int_equal(step(&sl, 100, 0, 64, 4, &done), DP_V_ADD);
	assert_int_equal(step(&sl, 100, 3, 64, 4, &done), DP_V_ADD);
	assert_false(done);
	assert_int_equal(step(&sl, 100, 3, 64, 4, &done), DP_V_DUPLICATE);
	assert_int_equal(step(&sl, 100, 1, 32, 4, &done), DP_V_INCONSISTENT);
	assert_int_equal(dp_slot_step(&sl, 100, 8, 1, 64, CAIS_DT_FIXED32, 4, &done),
			 DP_V_INCONSISTENT);
	assert_int_equal(sl.n_seen, 3);
	assert_int_equal(step(&sl, 100, 1, 64, 4, &done), DP_V_ADD);
	assert_true(done);
	assert_int_equal(sl.state, DP_SLOT_DONE);
	for (uint8_t r = 0; r < 4; r++) {
		assert_int_equal(step(&sl, 100, r, 64, 4, &done), DP_V_RESEND);
		assert_false(done);
	}
	assert_int_equal(step(&sl, 100, 0, 63, 4, &done), DP_V_INCONSISTENT);
	/* older seq: stale, in both states */
	assert_int_equal(step(&sl, 84, 0, 64, 4, &done), DP_V_STALE);
	/* newer seq starts a new round over a done one */
	assert_int_equal(step(&sl, 116, 1, 64, 4, &done), DP_V_NEW);
	assert_int_equal(sl.n_seen, 1);
	assert_true(dp_slot_seen(&sl, 1));
	assert_false(dp_slot_seen(&sl, 0));
	assert_int_equal(step(&sl, 100, 1, 64, 4, &done), DP_V_STALE);
	/* and over an open one (abandoned round) */
	assert_int_equal(step(&sl, 132, 3, 16, 4, &done), DP_V_NEW);
	assert_int_equal(sl.count, 16);
}

static void
t_world_one_and_max(void **state)
{
	struct dp_slot sl;
	bool done;

	(void)state;
	memset(&sl, 0, sizeof(sl));
	assert_int_equal(step(&sl, 5, 0, 1, 1, &done), DP_V_NEW);
	assert_true(done);
	assert_int_equal(step(&sl, 5, 0, 1, 1, &done), DP_V_RESEND);
	/* n = 255: ranks 0..254 across all four bitmap words */
	memset(&sl, 0, sizeof(sl));
	for (unsigned int r = 0; r < 255; r++) {
		uint8_t rank = (uint8_t)((r * 7) % 255); /* every rank once, scattered */
		assert_int_equal(step(&sl, 9, rank, 2, 255, &done), r ? DP_V_ADD : DP_V_NEW);
		assert_int_equal(done, r == 254);
		assert_int_equal(step(&sl, 9, rank, 2, 255, &done),
				 r == 254 ? DP_V_RESEND : DP_V_DUPLICATE);
	}
}

static void
t_wrap(void **state)
{
	struct dp_slot sl;
	bool done;
	uint32_t seq = 0xFFFFFFF0u;

	(void)state;
	memset(&sl, 0, sizeof(sl));
	/* the same (slot, set) sees seq, seq + 2S, ... across 2^32 (S = 8) */
	for (int k = 0; k < 10; k++, seq += 16) {
		assert_int_equal(step(&sl, seq, 0, 4, 2, &done), DP_V_NEW);
		assert_int_equal(step(&sl, seq - 16, 1, 4, 2, &done), DP_V_STALE);
		assert_int_equal(step(&sl, seq, 1, 4, 2, &done), DP_V_ADD);
		assert_true(done);
	}
	assert_true(cais_seq_before(0xFFFFFFF0u, 0x10u));
	assert_false(cais_seq_before(0x10u, 0xFFFFFFF0u));
}

/* A round keeps the dtype of the DATA that opened it; another dtype is inconsistent. */
static void
t_dtype(void **state)
{
	struct dp_slot sl;
	bool done;

	(void)state;
	memset(&sl, 0, sizeof(sl));
	assert_int_equal(dp_slot_step(&sl, 3, 7, 0, 64, CAIS_DT_BLOCK16, 3, &done), DP_V_NEW);
	assert_int_equal(sl.dtype, CAIS_DT_BLOCK16);
	assert_int_equal(step(&sl, 3, 1, 64, 3, &done), DP_V_INCONSISTENT);
	assert_int_equal(dp_slot_step(&sl, 3, 7, 1, 64, CAIS_DT_BLOCK16, 3, &done), DP_V_ADD);
	/* checked before the rank: not a duplicate, not a resend */
	assert_int_equal(step(&sl, 3, 0, 64, 3, &done), DP_V_INCONSISTENT);
	assert_int_equal(dp_slot_step(&sl, 3, 7, 2, 64, CAIS_DT_BLOCK16, 3, &done), DP_V_ADD);
	assert_true(done);
	assert_int_equal(step(&sl, 3, 2, 64, 3, &done), DP_V_INCONSISTENT);
	assert_int_equal(dp_slot_step(&sl, 3, 7, 2, 64, CAIS_DT_BLOCK16, 3, &done), DP_V_RESEND);
	/* a newer round takes the new DATA's dtype */
	assert_int_equal(step(&sl, 9, 2, 64, 3, &done), DP_V_NEW);
	assert_int_equal(sl.dtype, CAIS_DT_FIXED32);
	assert_int_equal(dp_slot_step(&sl, 9, 7, 0, 64, CAIS_DT_BLOCK16, 3, &done),
			 DP_V_INCONSISTENT);
	assert_int_equal(sl.n_seen, 1);
}

/*
 * A QUERY (E12) finds the verdict a DATA of the same fields would get, in
 * every state a round of 3 ranks passes through (and a leaf's UP), for
 * seqs before, at and after the round's, every rank, a count and a tensor
 * that differ; and leaves the slot as it was.
 */
static void
t_query(void **state)
{
	struct dp_slot sl;
	bool done;

	(void)state;
	memset(&sl, 0, sizeof(sl));
	for (unsigned int phase = 0; phase < 6; phase++) {
		if (phase == 1)
			step(&sl, 50, 1, 64, 3, &done);
		else if (phase == 2)
			step(&sl, 50, 0, 64, 3, &done);
		else if (phase == 3)
			step(&sl, 50, 2, 64, 3, &done); /* complete */
		else if (phase == 4)
			sl.state = DP_SLOT_UP;
		else if (phase == 5)
			step(&sl, 0xFFFFFFF0u, 2, 64, 3, &done); /* stale across the wrap */
		for (uint32_t seq = 49; seq <= 51; seq++)
			for (uint8_t r = 0; r < 3; r++)
				for (unsigned int v = 0; v < 3; v++) {
					uint16_t count = v == 1 ? 32 : 64;
					uint32_t tensor = v == 2 ? 8 : 7;
					struct dp_slot before = sl, copy = sl;
					enum dp_verdict q = dp_slot_query(&sl, seq, tensor, r,
									  count, CAIS_DT_FIXED32);

					assert_int_equal(q,
							 dp_slot_step(&copy, seq, tensor, r, count,
								      CAIS_DT_FIXED32, 3, &done));
					assert_memory_equal(&sl, &before, sizeof(sl));
				}
	}
	/* what each reading means, at the complete round of phase 3 */
	memset(&sl, 0, sizeof(sl));
	step(&sl, 50, 1, 64, 3, &done);
	assert_int_equal(dp_slot_query(&sl, 50, 7, 1, 64, CAIS_DT_FIXED32), DP_V_DUPLICATE);
	assert_int_equal(dp_slot_query(&sl, 50, 7, 0, 64, CAIS_DT_FIXED32), DP_V_ADD);
	assert_int_equal(dp_slot_query(&sl, 51, 7, 1, 64, CAIS_DT_FIXED32), DP_V_NEW);
	step(&sl, 50, 0, 64, 3, &done);
	step(&sl, 50, 2, 64, 3, &done);
	assert_int_equal(dp_slot_query(&sl, 50, 7, 0, 64, CAIS_DT_FIXED32), DP_V_RESEND);
	assert_int_equal(dp_slot_query(&sl, 49, 7, 0, 64, CAIS_DT_FIXED32), DP_V_STALE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_round),
	    cmocka_unit_test(t_dtype),
	    cmocka_unit_test(t_world_one_and_max),
	    cmocka_unit_test(t_wrap),
	    cmocka_unit_test(t_query),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
