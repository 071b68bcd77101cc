/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent/fetch.c alone, on the test's clock: the peers, the flows and the
 * result cache are stubs of this file. What is checked is when FETCH asks
 * the peers about a silent chunk: at once, AG_QUERY_US later, then at
 * doubling intervals up to AG_QUERY_MAX_US, and no more once the chunk is
 * not silent; a chunk that goes silent again starts over. (Ranks that wait
 * on the switch for one busy elsewhere keep a whole window silent: asked
 * every 20 ms, 64 chunks of 6 ranks asked 7 peers each some 130,000 times
 * a second, bench/README.md "Lanes".)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/fetch.h"

#define WORLD 4
#define MS    1000000ull /* ns */

static unsigned int sent[WORLD];		 /* FETCHes to each peer */
static uint32_t last_seq, last_n;		 /* the last one's seq and count */
static enum ag_window_state chunk = AG_W_SILENT; /* what the flow says of every chunk */

/* ---- stubs: the header in host order, the test reads it back ---- */

void
ag_msg_init(struct ag_msg *h, unsigned int rank, enum ag_msg_type type, uint8_t flags, uint32_t seq,
	    uint32_t n, uint64_t off, uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->type = (uint8_t)type;
	h->flags = flags;
	h->rank = (uint16_t)rank;
	h->seq = seq;
	h->n = n;
	h->off = off;
	h->len = len;
}

int
ag_peers_send(struct ag_peers *p, int peer, const struct ag_msg *h, const void *data, uint32_t len)
{
	(void)p, (void)data, (void)len;
	assert_int_equal(h->type, AG_FETCH);
	assert_true(peer > 0 && peer < WORLD); /* never to this rank, 0 */
	sent[peer]++;
	last_seq = h->seq;
	last_n = h->n;
	return 0;
}

enum ag_window_state
ag_flow_chunk_state(const struct ag_flow *f, uint32_t seq)
{
	(void)f, (void)seq;
	return chunk;
}

bool
ag_cache_get(const struct ag_cache *c, uint32_t seq, uint8_t *buf, struct ag_result *res)
{
	(void)c, (void)seq, (void)buf, (void)res;
	return false;
}

/* ---- the tests ---- */

static bool
lookup(void *ctx, uint32_t seq, struct ag_result *res, enum ag_have *have)
{
	(void)ctx, (void)seq, (void)res;
	*have = AG_HAVE_NOT_SENT;
	return false;
}

static struct ag_fetch *
open_fetch(void)
{
	static struct ag_flow *flows[1]; /* never looked into: the stub answers */
	struct ag_fetch_conf conf = {
	    .rank = 0, .world = WORLD, .slots = 16, .stride = 64, .flows = flows, .nflows = 1};
	struct ag_fetch_source src = {.lookup = lookup};
	struct ag_fetch *f;

	memset(sent, 0, sizeof(sent));
	chunk = AG_W_SILENT;
	assert_int_equal(ag_fetch_open(&f, &conf, &src), 0);
	return f;
}

/* Rounds of FETCH so far: each asks every peer about the one chunk. */
static unsigned int
rounds(void)
{
	for (unsigned int p = 2; p < WORLD; p++)
		assert_int_equal(sent[p], sent[1]);
	return sent[1];
}

/* Tick at t_ms: @return the rounds of FETCH so far. */
static unsigned int
tick_at(struct ag_fetch *f, double t_ms)
{
	ag_fetch_tick(f, (uint64_t)(t_ms * MS));
	return rounds();
}

static void
t_backoff(void **state)
{
	/* 0, then +20, +40, +80, +160, +320, +320 ms */
	static const double at[] = {20, 60, 140, 300, 620, 940};
	struct ag_fetch *f = open_fetch();

	(void)state;
	assert_int_equal(ag_fetch_next_timer(f), UINT64_MAX);
	assert_int_equal(ag_fetch_start(f, 21, 0), AG_FETCH_WAIT);
	assert_int_equal(rounds(), 1);
	assert_int_equal(last_seq, 21);
	assert_int_equal(last_n, 1);
	for (unsigned int i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		assert_int_equal(ag_fetch_next_timer(f), (uint64_t)(at[i] * MS));
		assert_int_equal(tick_at(f, at[i] - 0.001), i + 1);
		assert_int_equal(tick_at(f, at[i]), i + 2);
	}
	assert_int_equal(ag_fetch_next_timer(f), (uint64_t)(1260 * MS));
	/* its RESULT came: asked no more */
	chunk = AG_W_INFLIGHT;
	assert_int_equal(tick_at(f, 1300), 7);
	assert_int_equal(ag_fetch_next_timer(f), UINT64_MAX);
	/* silent again: from the start */
	chunk = AG_W_SILENT;
	assert_int_equal(ag_fetch_start(f, 21, (uint64_t)(2000 * MS)), AG_FETCH_WAIT);
	assert_int_equal(rounds(), 8);
	assert_int_equal(ag_fetch_next_timer(f), (uint64_t)(2020 * MS));
	ag_fetch_close(f);
}

/* Every peer stuck too (FETCH_NO 3): the ring; one waiting (1): wait. */
static void
t_verdicts(void **state)
{
	struct ag_fetch *f = open_fetch();

	(void)state;
	assert_int_equal(ag_fetch_start(f, 5, 0), AG_FETCH_WAIT);
	assert_int_equal(ag_fetch_on_no(f, 1, 5, AG_HAVE_STUCK), AG_FETCH_WAIT);
	assert_int_equal(ag_fetch_on_no(f, 2, 5, AG_HAVE_NOT_SENT), AG_FETCH_WAIT);
	assert_int_equal(ag_fetch_on_no(f, 3, 5, AG_HAVE_ACKED), AG_FETCH_WAIT);
	/* the next round: every peer gave up or has its DATA in */
	assert_int_equal(tick_at(f, 20), 2);
	assert_int_equal(ag_fetch_on_no(f, 1, 5, AG_HAVE_STUCK), AG_FETCH_WAIT);
	assert_int_equal(ag_fetch_on_no(f, 1, 5, AG_HAVE_STUCK), AG_FETCH_WAIT); /* once a round */
	assert_int_equal(ag_fetch_on_no(f, 2, 5, AG_HAVE_ACKED), AG_FETCH_WAIT);
	assert_int_equal(ag_fetch_on_no(f, 3, 5, AG_HAVE_STUCK), AG_FETCH_RING);
	ag_fetch_close(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_backoff),
	    cmocka_unit_test(t_verdicts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
