/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch pipeline end to end without ports: DATA frames in, RESULT
 * frames out, compared byte for byte with frames the test builds itself.
 * Covers the reliability rules of PROTOCOL.md section 3 (arrival orders,
 * duplicates, loss, lost RESULTs, stale seqs, set alternation and seq wrap,
 * saturation), the ops, ARP, L2 learning/flooding, the lcore handoff,
 * forward-only mode and the lease, the DATA a round keeps for its RESULTs
 * (and that no input mbuf is lost: tenv_free()); and BLOCK16 (E4): every
 * op, arrival orders, exponents aligned exactly, its REJECTs, a dtype
 * change within a round, OVERFLOW from a DATA exponent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dp_pipeline.h"
#include "test_env.h"
#include "../common/b16.h"

#define N_PORTS 8
#define MAXE	2048

static struct tenv *E;
static struct tf_end AGG, H[N_PORTS];
static uint8_t frame[CAIS_FRAME_OVERHEAD + 4 * MAXE];

static void
ctl_ok(const char *json)
{
	struct ctl_err err;

	if (tenv_ctl(E, json, &err) != 0)
		fail_msg("%s: %s: %s", json, ctl_errname(err.code), err.msg);
}

/* The spine of the tree tests (E9): the test, behind switch port SP_PORT. */
#define SP_PORT 7
static struct tf_end SP;

/* Fields the next session.add has besides these (JSON members and a comma), or NULL. */
static const char *session_extra;
/* Flows (E7 "ports") of member r of the next session.add, where not 0. */
static unsigned int session_ports[N_PORTS];
/* The reason field of the RESULTs expected: the switch's lcores in a loss_hints session (E11). */
static uint16_t result_lanes;

/*
 * Session (t, s) of n members H[first..first+n-1], pool `slots`, E elems;
 * their ranks 0..n-1, or first..first+n-1 (first_rank) when ranked; with
 * up_rank >= 0 a leaf whose uplink is SP, that rank.
 */
static void
session_hosts(unsigned int t, unsigned int s, unsigned int first, unsigned int n,
	      unsigned int slots, unsigned int elems, int up_rank, bool ranked)
{
	char buf[4096];
	unsigned int r0 = ranked ? first : 0;
	int k = snprintf(buf, sizeof(buf),
			 "{\"cmd\":\"session.add\",\"args\":{\"tenant\":%u,\"session\":%u,\"n\":%u,"
			 "\"slots\":%u,\"elems_per_packet\":%u,",
			 t, s, n, slots, elems);

	if (ranked)
		k += snprintf(buf + k, sizeof(buf) - (size_t)k, "\"first_rank\":%u,", r0);
	if (session_extra)
		k += snprintf(buf + k, sizeof(buf) - (size_t)k, "%s", session_extra);
	k += snprintf(buf + k, sizeof(buf) - (size_t)k, "\"members\":[");
	for (unsigned int r = 0; r < n; r++)
		k +=
		    snprintf(buf + k, sizeof(buf) - (size_t)k,
			     "%s{\"rank\":%u,\"mac\":\"02:00:00:00:00:%02x\",\"ip\":\"10.0.0.%u\","
			     "\"port\":%u,\"ports\":%u}",
			     r ? "," : "", r0 + r, first + r + 1, first + r + 1, 40000 + first + r,
			     session_ports[r] ? session_ports[r] : 1);
	k += snprintf(buf + k, sizeof(buf) - (size_t)k, "]");
	if (up_rank >= 0)
		k += snprintf(buf + k, sizeof(buf) - (size_t)k,
			      ",\"uplink\":{\"ip\":\"10.0.0.200\",\"mac\":\"02:00:00:00:00:c8\","
			      "\"rank\":%d,\"switch_port\":%u}",
			      up_rank, SP_PORT);
	snprintf(buf + k, sizeof(buf) - (size_t)k, "}}");
	ctl_ok(buf);
}

/* Session (t, s) with members H[0..n-1]. */
static void
session(unsigned int t, unsigned int s, unsigned int n, unsigned int slots, unsigned int elems)
{
	session_hosts(t, s, 0, n, slots, elems, -1, false);
}

static void
tensor_wire(unsigned int t, unsigned int s, unsigned int x, const char *op, const char *wire)
{
	char buf[256];

	snprintf(buf, sizeof(buf),
		 "{\"cmd\":\"tensor.add\",\"args\":{\"tenant\":%u,\"session\":%u,\"tensor\":%u,"
		 "\"op\":\"%s\",\"scale\":1024,\"wire\":\"%s\"}}",
		 t, s, x, op, wire);
	ctl_ok(buf);
}

static void
tensor(unsigned int t, unsigned int s, unsigned int x, const char *op)
{
	tensor_wire(t, s, x, op, "fixed32");
}

struct chunk {
	uint16_t tenant, session;
	uint32_t tensor, seq, pool;
	uint16_t count;
};

static int32_t
val(unsigned int rank, uint32_t seq, unsigned int i)
{
	return (int32_t)((rank + 1) * 100003u + seq * 7919u + i * 31u) % 200001 - 100000;
}

/* Send rank's DATA for chunk c (values val(rank, seq, i), or vals if given) on port rank. */
static void
send_data(const struct chunk *c, unsigned int rank, const int32_t *vals, uint8_t flags)
{
	static int32_t v[MAXE];
	struct cais_fields f;
	size_t len;

	if (!vals) {
		for (unsigned int i = 0; i < c->count; i++)
			v[i] = val(rank, c->seq, i);
		vals = v;
	}
	cais_data_fields(&f, c->tenant, c->session, c->tensor, c->seq, c->pool, (uint8_t)rank,
			 c->count);
	f.flags = flags;
	len = tf_cais_frame(frame, &H[rank], &AGG, &f, vals, c->count);
	tenv_send(E, (uint16_t)rank, frame, len);
}

/* The RESULT frame the switch must send to rank for chunk c: plen bytes of payload in dtype. */
static size_t
result_frame(uint8_t *buf, const struct chunk *c, unsigned int rank, uint8_t dtype,
	     const uint8_t *payload, size_t plen, uint8_t flags)
{
	struct cais_fields f;

	cais_data_fields(&f, c->tenant, c->session, c->tensor, c->seq, c->pool, CAIS_RANK_NONE,
			 c->count);
	f.type = CAIS_TYPE_RESULT;
	f.flags = flags;
	f.dtype = dtype;
	f.reason = result_lanes;
	tf_udp_headers(buf, &AGG, &H[rank], CAIS_HDR_LEN + plen);
	cais_hdr_build((struct cais_hdr *)(buf + CAIS_FRAME_HDR_OFF), &f);
	memcpy(buf + CAIS_FRAME_OVERHEAD, payload, plen);
	return CAIS_FRAME_OVERHEAD + plen;
}

/* Frame fr is the RESULT to its port's rank of payload (plen bytes in dtype), byte for byte. */
static void
check_result(const struct tenv_frame *fr, const struct chunk *c, uint8_t dtype,
	     const uint8_t *payload, size_t plen, uint8_t flags)
{
	static uint8_t exp[CAIS_FRAME_OVERHEAD + 4 * MAXE];
	size_t len = result_frame(exp, c, fr->port, dtype, payload, plen, flags);

	assert_int_equal(fr->len, len);
	if (memcmp(fr->data, exp, len) != 0) {
		size_t i = 0;

		while (fr->data[i] == exp[i])
			i++;
		fail_msg("seq %u: RESULT to rank %u differs at byte %zu: %02x, want %02x", c->seq,
			 fr->port, i, fr->data[i], exp[i]);
	}
}

/*
 * Exactly the members in mask got the RESULT of payload (plen bytes in
 * dtype), byte for byte, on their ports; clears.
 */
static void
expect_payload(const struct chunk *c, uint32_t mask, uint8_t dtype, const uint8_t *payload,
	       size_t plen, uint8_t flags)
{
	unsigned int n = (unsigned int)__builtin_popcount(mask);
	uint32_t seen = 0;

	if (E->n_cap != n)
		fail_msg("seq %u: %u frames sent, %u expected", c->seq, E->n_cap, n);
	for (unsigned int k = 0; k < E->n_cap; k++) {
		unsigned int r = E->cap[k].port;

		assert_true(r < N_PORTS && ((mask >> r) & 1) && !((seen >> r) & 1));
		seen |= 1u << r;
		check_result(&E->cap[k], c, dtype, payload, plen, flags);
	}
	tenv_clear(E);
}

/* FIXED32 values v[0..count-1] as a payload, big-endian, into p. */
static void
fixed32_payload(uint8_t *p, const int32_t *v, unsigned int count)
{
	for (unsigned int i = 0; i < count; i++) {
		uint32_t w = htonl((uint32_t)v[i]);

		memcpy(p + 4 * i, &w, 4);
	}
}

/* expect_payload() of FIXED32 values want. */
static void
expect_results(const struct chunk *c, uint32_t mask, const int32_t *want, uint8_t flags)
{
	static uint8_t p[4 * MAXE];

	fixed32_payload(p, want, c->count);
	expect_payload(c, mask, CAIS_DT_FIXED32, p, 4u * c->count, flags);
}

static void
expect_nothing(void)
{
	if (E->n_cap)
		fail_msg("%u unexpected frame(s), first to port %u", E->n_cap, E->cap[0].port);
}

/*
 * Exactly one frame was sent: the ACK (docs/PROTOCOL.md E6) of rank's DATA of
 * chunk c, back to it on its port: header only, echoing tenant, session,
 * tensor, seq, slot, rank and dtype, count 0, reason 0. Forgets it.
 */
/*
 * The header-only answer (ACK, E6; NACK, E11) of type to rank about chunk c:
 * its ids, seq, slot, the rank and dtype FIXED32, count 0, no flags.
 */
static void
answer_frame(uint8_t *buf, const struct chunk *c, unsigned int rank, uint8_t type)
{
	struct cais_fields want;

	cais_data_fields(&want, c->tenant, c->session, c->tensor, c->seq, c->pool, (uint8_t)rank,
			 0);
	want.type = type;
	tf_udp_headers(buf, &AGG, &H[rank], CAIS_HDR_LEN);
	cais_hdr_build((struct cais_hdr *)(buf + CAIS_FRAME_HDR_OFF), &want);
}

static void
expect_ack(const struct chunk *c, unsigned int rank)
{
	struct cais_fields got;
	uint8_t buf[CAIS_FRAME_OVERHEAD];

	if (E->n_cap != 1)
		fail_msg("%u frames sent, want one ACK", E->n_cap);
	answer_frame(buf, c, rank, CAIS_TYPE_ACK);
	assert_int_equal(E->cap[0].port, rank);
	assert_int_equal(E->cap[0].len, CAIS_FRAME_OVERHEAD);
	cais_hdr_read((const struct cais_hdr *)(E->cap[0].data + CAIS_FRAME_HDR_OFF), &got);
	assert_int_equal(got.type, CAIS_TYPE_ACK);
	assert_int_equal(got.rank, rank);
	assert_memory_equal(E->cap[0].data, buf, CAIS_FRAME_OVERHEAD);
	tenv_clear(E);
}

static void
expected_sum(const struct chunk *c, unsigned int n, int32_t *want)
{
	for (unsigned int i = 0; i < c->count; i++) {
		int64_t s = 0;

		for (unsigned int r = 0; r < n; r++)
			s += val(r, c->seq, i);
		want[i] = (int32_t)s;
	}
}

static const struct dp_session_counters *
counters(unsigned int t, unsigned int s, struct dp_session_counters *sum)
{
	struct dp_session *ss;

	memset(sum, 0, sizeof(*sum));
	LIST_FOREACH (ss, &E->sw->tables.sessions, link)
		if (ss->tenant == t && ss->session == s)
			for (unsigned int k = 0; k < ss->n_lcores; k++) {
				const struct dp_session_counters *p = &ss->part[k].c;

				sum->rounds += p->rounds;
				sum->duplicates += p->duplicates;
				sum->stale += p->stale;
				sum->retx += p->retx;
				sum->resends += p->resends;
				sum->inconsistent += p->inconsistent;
				sum->abandoned += p->abandoned;
				sum->overflow += p->overflow;
			}
	return sum;
}

static int
setup(void **state)
{
	(void)state;
	/* each test's own: one may move a host's port (E7 flows) or fail with
	 * its session's extras set */
	tenv_addrs(&AGG, H, N_PORTS);
	session_extra = NULL;
	memset(session_ports, 0, sizeof(session_ports));
	result_lanes = 0;
	E = tenv_create(&AGG, N_PORTS, 1);
	session(1, 1, 4, 8, 64);
	tensor(1, 1, 1, "sum");
	tensor(1, 1, 2, "max");
	tensor(1, 1, 3, "min");
	tensor(1, 1, 4, "avg");
	tensor_wire(1, 1, 11, "sum", "block16");
	tensor_wire(1, 1, 12, "max", "block16");
	tensor_wire(1, 1, 13, "min", "block16");
	tensor_wire(1, 1, 14, "avg", "block16");
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tenv_free(E);
	E = NULL;
	return 0;
}

/* Every arrival order of 4 contributions gives the same RESULT bytes. */
static void
t_orders(void **state)
{
	static const unsigned int p[24][4] = {
	    {0, 1, 2, 3}, {0, 1, 3, 2}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 3, 1, 2}, {0, 3, 2, 1},
	    {1, 0, 2, 3}, {1, 0, 3, 2}, {1, 2, 0, 3}, {1, 2, 3, 0}, {1, 3, 0, 2}, {1, 3, 2, 0},
	    {2, 0, 1, 3}, {2, 0, 3, 1}, {2, 1, 0, 3}, {2, 1, 3, 0}, {2, 3, 0, 1}, {2, 3, 1, 0},
	    {3, 0, 1, 2}, {3, 0, 2, 1}, {3, 1, 0, 2}, {3, 1, 2, 0}, {3, 2, 0, 1}, {3, 2, 1, 0}};
	int32_t vals[4][64], want[64];
	struct dp_session_counters sc;

	(void)state;
	/* the same values every time (seq changes), so the payloads must be identical */
	for (unsigned int r = 0; r < 4; r++)
		for (unsigned int i = 0; i < 64; i++)
			vals[r][i] = val(r, 5, i) * (int32_t)(r + 1) * 97;
	for (unsigned int i = 0; i < 64; i++)
		want[i] = vals[0][i] + vals[1][i] + vals[2][i] + vals[3][i];
	for (unsigned int k = 0; k < 24; k++) {
		struct chunk c = {1, 1, 1, 100 + k, 8, 64};

		for (unsigned int j = 0; j < 4; j++) {
			send_data(&c, p[k][j], vals[p[k][j]], 0);
			if (j < 3)
				expect_nothing();
		}
		expect_results(&c, 0xF, want, 0);
	}
	assert_int_equal(counters(1, 1, &sc)->rounds, 24);
	assert_int_equal(sc.duplicates, 0);
}

/* A duplicate at every point of a round is dropped and never added. */
static void
t_duplicates(void **state)
{
	int32_t want[64];

	(void)state;
	for (unsigned int point = 0; point < 4; point++)
		for (unsigned int who = 0; who <= point && who < 4; who++) {
			struct chunk c = {1, 1, 1, 200 + point * 4 + who, 8, 64};
			struct dp_session_counters sc;
			uint64_t dups = counters(1, 1, &sc)->duplicates;

			expected_sum(&c, 4, want);
			for (unsigned int r = 0; r < 4; r++) {
				send_data(&c, r, NULL, 0);
				if (r == point && r < 3) {
					/* resend an already counted contribution, twice: the
					 * retransmission gets an ACK (E6), the copy nothing */
					send_data(&c, who, NULL, CAIS_F_RETX);
					expect_ack(&c, who);
					send_data(&c, who, NULL, 0);
					expect_nothing();
				}
			}
			expect_results(&c, 0xF, want, 0);
			if (point < 3)
				assert_int_equal(counters(1, 1, &sc)->duplicates, dups + 2);
		}
}

/* A lost DATA is recovered by its retransmission; the RESULT is unchanged. */
static void
t_loss_retx(void **state)
{
	struct chunk c = {1, 1, 1, 300, 8, 64};
	struct dp_session_counters sc;
	int32_t want[64];

	(void)state;
	expected_sum(&c, 4, want);
	send_data(&c, 0, NULL, 0);
	send_data(&c, 1, NULL, 0);
	/* rank 2's DATA is lost; rank 3 and 0 time out and retransmit too */
	send_data(&c, 3, NULL, 0);
	send_data(&c, 3, NULL, CAIS_F_RETX);
	expect_ack(&c, 3); /* in, the round waits for others */
	send_data(&c, 0, NULL, CAIS_F_RETX);
	expect_ack(&c, 0);
	send_data(&c, 2, NULL, CAIS_F_RETX);
	expect_results(&c, 0xF, want, 0);
	counters(1, 1, &sc);
	assert_int_equal(sc.retx, 3);
	assert_int_equal(sc.duplicates, 2);
	assert_int_equal(sc.rounds, 1);
}

/*
 * ACKs have a per-sender budget of their own (E6): a burst of 300
 * retransmissions into an open round gets at most 50, the rest are dropped
 * as duplicates, and the sender's REJECTs are not held back by them.
 */
static void
t_ack_budget(void **state)
{
	struct chunk c = {1, 1, 1, 350, 8, 64};
	unsigned int acks = 0;
	int32_t want[64];

	(void)state;
	send_data(&c, 1, NULL, 0);
	for (unsigned int i = 0; i < DP_ACK_PER_SECOND; i++) {
		send_data(&c, 1, NULL, CAIS_F_RETX);
		acks += E->n_cap;
		tenv_clear(E);
	}
	print_message("%u retransmissions into an open round: %u ACKs\n", DP_ACK_PER_SECOND, acks);
	/* the burst, and what the bucket refilled while the test ran (< 1 s) */
	assert_true(acks >= DP_ACK_PER_SECOND / 2 && acks < DP_ACK_PER_SECOND);
	assert_int_equal(E->sw->lcores[0].c.acks_limited, DP_ACK_PER_SECOND - acks);
	/* a REJECT to the same sender still goes out */
	c.tensor = 99;
	send_data(&c, 1, NULL, 0);
	assert_int_equal(E->n_cap, 1);
	tenv_clear(E);
	c.tensor = 1;
	expected_sum(&c, 4, want);
	for (unsigned int r = 0; r < 4; r++)
		if (r != 1)
			send_data(&c, r, NULL, 0);
	expect_results(&c, 0xF, want, 0);
}

/* A lost RESULT: the retransmitted DATA gets the stored RESULT, to that rank only. */
static void
t_lost_result(void **state)
{
	struct chunk c = {1, 1, 1, 400, 8, 64};
	struct dp_session_counters sc;
	int32_t want[64];

	(void)state;
	expected_sum(&c, 4, want);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_results(&c, 0xF, want, 0);
	for (unsigned int r = 0; r < 4; r++) {
		send_data(&c, r, NULL, CAIS_F_RETX);
		expect_results(&c, 1u << r, want, 0);
	}
	/* still answered after the other set of the slot moved on */
	{
		struct chunk d = {1, 1, 1, 408, 8, 64};
		int32_t w2[64];

		expected_sum(&d, 4, w2);
		for (unsigned int r = 0; r < 4; r++)
			send_data(&d, r, NULL, 0);
		expect_results(&d, 0xF, w2, 0);
		send_data(&c, 2, NULL, CAIS_F_RETX);
		expect_results(&c, 1u << 2, want, 0);
	}
	/* a retransmission whose count differs from the round's is dropped */
	c.count = 32;
	send_data(&c, 1, NULL, CAIS_F_RETX);
	expect_nothing();
	assert_int_equal(counters(1, 1, &sc)->resends, 5);
	assert_int_equal(sc.inconsistent, 1);
}

/*
 * The frames of one completion (docs/PROTOCOL.md E11), in any order: a NACK
 * of chunk `nacked` to each rank in nack_mask (header only, that rank,
 * count 0, the round's dtype), and chunk c's RESULT (the sum of 4 ranks) to
 * each rank in mask, with WAIT where wait_mask has it. Clears.
 */
static void
expect_completion(const struct chunk *c, uint32_t mask, uint32_t wait_mask,
		  const struct chunk *nacked, uint32_t nack_mask)
{
	uint8_t p[4 * 64], nack[CAIS_FRAME_OVERHEAD];
	int32_t want[64];
	uint32_t results = 0, nacks = 0;

	assert_int_equal(E->n_cap, __builtin_popcount(nack_mask) + __builtin_popcount(mask));
	expected_sum(c, 4, want);
	fixed32_payload(p, want, c->count);
	for (unsigned int k = 0; k < E->n_cap; k++) {
		const struct tenv_frame *fr = &E->cap[k];
		unsigned int r = fr->port;

		if (cais_hdr_type((const struct cais_hdr *)(fr->data + CAIS_FRAME_HDR_OFF)) ==
		    CAIS_TYPE_NACK) {
			assert_true(((nack_mask >> r) & 1) && !((nacks >> r) & 1));
			nacks |= 1u << r;
			answer_frame(nack, nacked, r, CAIS_TYPE_NACK);
			assert_int_equal(fr->len, CAIS_FRAME_OVERHEAD);
			assert_memory_equal(fr->data, nack, CAIS_FRAME_OVERHEAD);
			continue;
		}
		assert_true(((mask >> r) & 1) && !((results >> r) & 1));
		results |= 1u << r;
		check_result(fr, c, CAIS_DT_FIXED32, p, 4u * c->count,
			     (wait_mask >> r) & 1 ? CAIS_F_WAIT : 0);
	}
	tenv_clear(E);
}

/*
 * WAIT and NACK (E11), in session (1, sess). Rank 3's DATA of seq 500 is
 * lost: with loss_hints, rounds 501.. that complete meanwhile carry WAIT to
 * ranks 0-2 (their DATA of 500 is in) and not to rank 3, and rank 3 gets a
 * NACK of 500 when round 502 completes (2 rounds later), none when 504 does
 * (4 later, but within DP_NACK_GAP_US of the first), and another when 508
 * does, after that gap. A RESULT sent again into a complete round carries
 * WAIT the same way. Once 500 completes, nothing waits; nor after a round
 * was abandoned. Without loss_hints, none of it (the RESULTs of PROTOCOL.md).
 */
static void
wait_nack(unsigned int sess, bool hints)
{
	struct chunk c500 = {1, (uint16_t)sess, 1, 500, 8, 64}, c;
	uint32_t w = hints ? 0x7 : 0;
	uint64_t nacks0 = E->sw->lcores[0].c.nacks;

	for (unsigned int r = 0; r < 3; r++)
		send_data(&c500, r, NULL, 0);
	expect_nothing();
	c = c500;
	for (uint32_t seq = 501; seq <= 508; seq++) {
		if (seq == 505)
			usleep(DP_NACK_GAP_US + 200);
		c.seq = seq;
		for (unsigned int r = 0; r < 4; r++)
			send_data(&c, r, NULL, 0);
		expect_completion(&c, 0xF, w, &c500, hints && (seq == 502 || seq == 508) ? 0x8 : 0);
	}
	assert_int_equal(E->sw->lcores[0].c.nacks - nacks0, hints ? 2 : 0);
	/* a lost RESULT of 503: rank 1's comes again with WAIT, rank 3's without */
	c.seq = 503;
	send_data(&c, 1, NULL, CAIS_F_RETX);
	expect_completion(&c, 0x2, w & 0x2, &c500, 0);
	send_data(&c, 3, NULL, CAIS_F_RETX);
	expect_completion(&c, 0x8, 0, &c500, 0);
	/* rank 3's retransmission completes 500: no round before it is open */
	send_data(&c500, 3, NULL, CAIS_F_RETX);
	expect_completion(&c500, 0xF, 0, &c500, 0);
	c.seq = 509;
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_completion(&c, 0xF, 0, &c500, 0);
	/* 510 opened, then abandoned: 526 (510 + 2 x 8) takes its slot and set */
	c.seq = 510;
	send_data(&c, 0, NULL, 0);
	c.seq = 526;
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_completion(&c, 0xF, 0, &c500, 0);
	assert_int_equal(E->sw->lcores[0].c.nacks - nacks0, hints ? 2 : 0);
}

static void
t_wait_nack(void **state)
{
	(void)state;
	wait_nack(1, false); /* the setup's session: no loss_hints */
	session_extra = "\"loss_hints\":1,";
	session(1, 2, 4, 8, 64);
	session_extra = NULL;
	tensor(1, 2, 1, "sum");
	result_lanes = 1; /* its RESULTs name the switch's one lcore */
	wait_nack(2, true);
}

/* rank's QUERY (E12) for chunk c: a header-only DATA with QUERY, count c's. */
static void
send_query(const struct chunk *c, unsigned int rank)
{
	struct cais_fields f;

	cais_data_fields(&f, c->tenant, c->session, c->tensor, c->seq, c->pool, (uint8_t)rank,
			 c->count);
	f.flags = CAIS_F_QUERY;
	tf_udp_headers(frame, &H[rank], &AGG, CAIS_HDR_LEN);
	cais_hdr_build((struct cais_hdr *)(frame + CAIS_FRAME_HDR_OFF), &f);
	tenv_send(E, (uint16_t)rank, frame, CAIS_FRAME_OVERHEAD);
}

/*
 * Exactly n header-only answers were sent, in any order: answer i of type[i]
 * to rank[i] about chunk of[i], byte for byte (answer_frame()). Clears.
 */
static void
expect_answers(unsigned int n, const uint8_t *type, const unsigned int *rank,
	       const struct chunk *const *of)
{
	uint8_t want[CAIS_FRAME_OVERHEAD];
	uint32_t matched = 0;

	if (E->n_cap != n)
		fail_msg("%u frames sent, want %u answers", E->n_cap, n);
	for (unsigned int i = 0; i < n; i++) {
		answer_frame(want, of[i], rank[i], type[i]);
		for (unsigned int k = 0; k < E->n_cap; k++)
			if (!((matched >> k) & 1) && E->cap[k].port == rank[i] &&
			    E->cap[k].len == CAIS_FRAME_OVERHEAD &&
			    memcmp(E->cap[k].data, want, CAIS_FRAME_OVERHEAD) == 0) {
				matched |= 1u << k;
				break;
			}
		if (__builtin_popcount(matched) != (int)i + 1)
			fail_msg("answer %u (type %u to rank %u, seq %u) not sent", i, type[i],
				 rank[i], of[i]->seq);
	}
	tenv_clear(E);
}

/*
 * QUERY (E12), in a session with loss_hints: a NACK when the asker's DATA
 * is not in (its round open without it, or not started), an ACK when it is
 * and the round waits, with a NACK of each older open round of the asker
 * that misses its DATA (and none of rounds that miss other ranks only; one
 * per round within DP_NACK_GAP_US), the
 * stored RESULT when the round is complete; a stale one is dropped. It adds
 * nothing; its count is checked as a DATA's; its answers draw on the ACK
 * budget.
 */
static void
t_query(void **state)
{
	struct chunk c600 = {1, 3, 1, 600, 8, 64}, c601 = c600, c602 = c600, c;
	const uint8_t NACK = CAIS_TYPE_NACK, ACK = CAIS_TYPE_ACK;
	struct dp_lcore *lc;
	unsigned int answers = 0;
	int32_t want[64];

	(void)state;
	session_extra = "\"loss_hints\":1,";
	session(1, 3, 4, 8, 64);
	session_extra = NULL;
	result_lanes = 1;
	tensor(1, 3, 1, "sum");
	lc = &E->sw->lcores[0];
	c601.seq = 601;
	c602.seq = 602;
	/* rank 3's DATA of 600 is lost */
	for (unsigned int r = 0; r < 3; r++)
		send_data(&c600, r, NULL, 0);
	send_query(&c600, 3);
	expect_answers(1, &NACK, (unsigned int[]){3}, (const struct chunk *[]){&c600});
	send_query(&c600, 0);
	expect_answers(1, &ACK, (unsigned int[]){0}, (const struct chunk *[]){&c600});
	/* nobody sent 601 yet */
	send_query(&c601, 1);
	expect_answers(1, &NACK, (unsigned int[]){1}, (const struct chunk *[]){&c601});
	/* rank 2's DATA of 601 is lost, its 602 came: its QUERY of 602 is ACKed,
	 * and 601 NACKed to it; 600 misses rank 3 only */
	for (unsigned int r = 0; r < 4; r++)
		if (r != 2)
			send_data(&c601, r, NULL, 0);
	send_data(&c602, 2, NULL, 0);
	expect_nothing();
	send_query(&c602, 2);
	expect_answers(2, (uint8_t[]){ACK, NACK}, (unsigned int[]){2, 2},
		       (const struct chunk *[]){&c602, &c601});
	send_query(&c602, 2); /* within the NACK gap of 601: the ACK alone */
	expect_answers(1, &ACK, (unsigned int[]){2}, (const struct chunk *[]){&c602});
	/* rank 0's of 602 not there: a NACK, and no look at older rounds */
	send_query(&c602, 0);
	expect_answers(1, &NACK, (unsigned int[]){0}, (const struct chunk *[]){&c602});
	/* a QUERY adds nothing: 600 completes with rank 3's DATA, the sum of 4 */
	send_data(&c600, 3, NULL, CAIS_F_RETX);
	expected_sum(&c600, 4, want);
	expect_results(&c600, 0xF, want, 0);
	/* the complete round answers with its RESULT, to the asker only */
	send_query(&c600, 1);
	expect_results(&c600, 0x2, want, 0);
	/* stale (584: the same slot and set two laps before): dropped */
	c = c600;
	c.seq = 584;
	send_query(&c, 1);
	expect_nothing();
	assert_int_equal(tenv_drops(E, DP_DROP_STALE), 1);
	/* its count is checked as a DATA's */
	c = c601;
	c.count = 65;
	send_query(&c, 1);
	assert_int_equal(E->n_cap, 1); /* REJECT BAD_COUNT */
	tenv_clear(E);
	assert_int_equal(lc->c.queries, 8);
	/* the ACK budget: a burst of QUERYs gets at most its size in answers */
	for (unsigned int i = 0; i < DP_ACK_PER_SECOND; i++) {
		send_query(&c602, 2);
		for (unsigned int k = 0; k < E->n_cap; k++)
			answers += cais_hdr_type((const struct cais_hdr *)(E->cap[k].data +
									   CAIS_FRAME_HDR_OFF)) ==
				   CAIS_TYPE_ACK;
		tenv_clear(E);
	}
	print_message("%u QUERYs: %u answered\n", DP_ACK_PER_SECOND, answers);
	assert_true(answers >= DP_ACK_PER_SECOND / 2 - 2 && answers < DP_ACK_PER_SECOND);
	assert_int_equal(tenv_drops(E, DP_DROP_QUERY_LIMITED), DP_ACK_PER_SECOND - answers);
}

/*
 * QUERY (E12) from a member with two flows (E7): flow i sends the seqs that
 * are i modulo 2 and asks about them only, so the NACKs of older open rounds
 * that come with its ACK are of its own flow's rounds, each to the flow
 * that owns the round's slot; the other flow's rounds wait for its own
 * QUERY.
 */
static void
t_query_flows(void **state)
{
	struct chunk c[4];
	const uint8_t NACK = CAIS_TYPE_NACK, ACK = CAIS_TYPE_ACK;
	uint16_t port0 = H[2].port; /* setup() sets it again for the next test */

	(void)state;
	session_extra = "\"loss_hints\":1,";
	session_ports[2] = 2;
	session(1, 4, 4, 8, 64);
	session_extra = NULL;
	session_ports[2] = 0;
	result_lanes = 1;
	tensor(1, 4, 1, "sum");
	for (unsigned int i = 0; i < 4; i++)
		c[i] = (struct chunk){1, 4, 1, 600 + i, 8, 64};
	/* ranks 0, 1, 3 sent 600 and 601; rank 2's of both were lost */
	for (unsigned int i = 0; i < 2; i++)
		for (unsigned int r = 0; r < 4; r++)
			if (r != 2)
				send_data(&c[i], r, NULL, 0);
	/* rank 2's 602 came on flow 0: its QUERY gets the ACK and a NACK of
	 * 600 (flow 0's), none of 601 (flow 1's) */
	send_data(&c[2], 2, NULL, 0);
	expect_nothing();
	send_query(&c[2], 2);
	expect_answers(2, (uint8_t[]){ACK, NACK}, (unsigned int[]){2, 2},
		       (const struct chunk *[]){&c[2], &c[0]});
	/* flow 1 (port + 1) sent 603: the ACK and a NACK of 601, to port + 1 */
	H[2].port = (uint16_t)(port0 + 1);
	send_data(&c[3], 2, NULL, 0);
	expect_nothing();
	send_query(&c[3], 2);
	expect_answers(2, (uint8_t[]){ACK, NACK}, (unsigned int[]){2, 2},
		       (const struct chunk *[]){&c[3], &c[1]});
}

/* Older seqs on a (slot, set) are stale: dropped, counted, never answered. */
static void
t_stale(void **state)
{
	struct chunk old = {1, 1, 1, 500, 8, 64}, cur = {1, 1, 1, 516, 8, 64};
	struct dp_session_counters sc;
	int32_t want[64];

	(void)state;
	expected_sum(&old, 4, want);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&old, r, NULL, 0);
	expect_results(&old, 0xF, want, 0);
	/* seq 516 = 500 + 2S: the same slot and set, a new round */
	send_data(&cur, 0, NULL, 0);
	send_data(&old, 1, NULL, CAIS_F_RETX); /* late retransmission of the old round */
	send_data(&old, 3, NULL, 0);
	expect_nothing();
	assert_int_equal(counters(1, 1, &sc)->stale, 2);
	expected_sum(&cur, 4, want);
	for (unsigned int r = 1; r < 4; r++)
		send_data(&cur, r, NULL, 0);
	expect_results(&cur, 0xF, want, 0);
	/* an open round overwritten by a newer seq is counted as abandoned */
	cur.seq = 532;
	send_data(&cur, 0, NULL, 0);
	cur.seq = 548;
	send_data(&cur, 1, NULL, 0);
	assert_int_equal(counters(1, 1, &sc)->abandoned, 1);
}

/* Thousands of rounds across the 2^32 wrap, every slot and set, S chunks in flight. */
static void
t_wrap_alternation(void **state)
{
	const uint32_t S = 8, start = 0xFFFFFFFFu - 3000;
	int32_t want[S][64];
	struct dp_session_counters sc;
	uint32_t q;

	(void)state;
	session(2, 9, 4, S, 64);
	tensor(2, 9, 1, "sum");
	/* the window: S chunks outstanding; rank order rotates per chunk */
	for (q = start; q != start + 6000; q += S) {
		for (uint32_t k = 0; k < S; k++) {
			struct chunk c = {2, 9, 1, q + k, S, (uint16_t)(1 + (q + k) % 64)};

			expected_sum(&c, 4, want[k]);
			for (unsigned int j = 0; j < 3; j++)
				send_data(&c, (j + k) % 4, NULL, 0);
		}
		expect_nothing();
		for (uint32_t k = 0; k < S; k++) {
			struct chunk c = {2, 9, 1, q + k, S, (uint16_t)(1 + (q + k) % 64)};

			send_data(&c, (3 + k) % 4, NULL, 0);
			expect_results(&c, 0xF, want[k], 0);
		}
	}
	assert_int_equal(counters(2, 9, &sc)->rounds, 6000);
	assert_int_equal(sc.stale + sc.duplicates + sc.inconsistent + sc.abandoned, 0);
	/* a chunk whose slot or set disagree with its seq is dropped */
	{
		struct cais_fields f;
		int32_t v[4] = {1, 2, 3, 4};
		size_t len;
		uint64_t before = tenv_drops(E, DP_DROP_SLOT_MISMATCH);

		cais_data_fields(&f, 2, 9, 1, q, S, 0, 4);
		f.set ^= 1;
		len = tf_cais_frame(frame, &H[0], &AGG, &f, v, 4);
		tenv_send(E, 0, frame, len);
		cais_data_fields(&f, 2, 9, 1, q, S, 0, 4);
		f.slot = (f.slot + 1) % S;
		len = tf_cais_frame(frame, &H[0], &AGG, &f, v, 4);
		tenv_send(E, 0, frame, len);
		expect_nothing();
		assert_int_equal(tenv_drops(E, DP_DROP_SLOT_MISMATCH), before + 2);
	}
}

/* Sums saturate in both directions with OVERFLOW; partial overflows that cancel do not. */
static void
t_saturation(void **state)
{
	int32_t v[4][4] = {
	    {INT32_MAX, INT32_MIN, INT32_MAX, 5},
	    {1, -1, 1, 6},
	    {-1, 0, INT32_MAX, 7},
	    {0, -5, -3, 8},
	};
	int32_t want[4] = {INT32_MAX, INT32_MIN, INT32_MAX, 26};
	int32_t cancel[4][1] = {{INT32_MAX}, {1}, {-1}, {0}};
	int32_t want_cancel[1] = {INT32_MAX};
	struct dp_session_counters sc;

	(void)state;
	for (unsigned int order = 0; order < 2; order++) {
		struct chunk c = {1, 1, 1, 600 + order, 8, 4};

		for (unsigned int j = 0; j < 4; j++) {
			unsigned int r = order ? 3 - j : j;
			send_data(&c, r, v[r], 0);
		}
		expect_results(&c, 0xF, want, CAIS_F_OVERFLOW);
		/* the stored RESULT keeps its OVERFLOW flag */
		send_data(&c, 2, v[2], CAIS_F_RETX);
		expect_results(&c, 1u << 2, want, CAIS_F_OVERFLOW);
	}
	/* MAX + 1 - 1 + 0 == MAX exactly, whatever the order: no OVERFLOW */
	for (unsigned int order = 0; order < 2; order++) {
		struct chunk c = {1, 1, 1, 610 + order, 8, 1};

		for (unsigned int j = 0; j < 4; j++) {
			unsigned int r = order ? (j + 2) % 4 : j;
			send_data(&c, r, cancel[r], 0);
		}
		expect_results(&c, 0xF, want_cancel, 0);
	}
	assert_int_equal(counters(1, 1, &sc)->overflow, 2);
}

static void
t_max_min_avg(void **state)
{
	int32_t mx[64], mn[64], sum[64];

	(void)state;
	for (unsigned int x = 2; x <= 4; x++) {
		struct chunk c = {1, 1, x, 700 + x, 8, 64};

		for (unsigned int i = 0; i < 64; i++) {
			mx[i] = INT32_MIN;
			mn[i] = INT32_MAX;
			for (unsigned int r = 0; r < 4; r++) {
				int32_t v = val(r, c.seq, i);
				mx[i] = v > mx[i] ? v : mx[i];
				mn[i] = v < mn[i] ? v : mn[i];
			}
		}
		expected_sum(&c, 4, sum);
		for (unsigned int r = 0; r < 4; r++)
			send_data(&c, 3 - r, NULL, 0);
		/* avg aggregates as sum: hosts divide by n */
		expect_results(&c, 0xF, x == 2 ? mx : x == 3 ? mn : sum, 0);
	}
}

/* Contributions whose count or tensor differ from the round's are dropped. */
static void
t_inconsistent(void **state)
{
	struct chunk c = {1, 1, 1, 800, 8, 64}, other = c;
	struct dp_session_counters sc;
	int32_t want[64];

	(void)state;
	expected_sum(&c, 4, want);
	send_data(&c, 0, NULL, 0);
	other.count = 63;
	send_data(&other, 1, NULL, 0);
	other = c;
	other.tensor = 2;
	send_data(&other, 2, NULL, 0);
	expect_nothing();
	assert_int_equal(counters(1, 1, &sc)->inconsistent, 2);
	for (unsigned int r = 1; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_results(&c, 0xF, want, 0);
}

/*
 * One burst of DATA that names three tensors in turn (sum, max, one that
 * does not exist) from every rank: each packet is matched to its own
 * tensor (the match keeps the burst's last lookup, dp_lcore.h), so both
 * rounds complete with their own op and the unknown one is REJECTed.
 */
static void
t_burst_tensors(void **state)
{
	struct chunk c[3] = {{1, 1, 1, 820, 8, 64}, {1, 1, 2, 821, 8, 64}, {1, 1, 99, 822, 8, 64}};
	struct rte_mbuf *m[12];
	int32_t sum[64], max[64];
	unsigned int k = 0, results[2] = {0, 0}, rejects = 0;

	(void)state;
	expected_sum(&c[0], 4, sum);
	for (unsigned int i = 0; i < 64; i++) {
		max[i] = val(0, c[1].seq, i);
		for (unsigned int r = 1; r < 4; r++)
			if (val(r, c[1].seq, i) > max[i])
				max[i] = val(r, c[1].seq, i);
	}
	for (unsigned int r = 0; r < 4; r++)
		for (unsigned int t = 0; t < 3; t++) {
			static int32_t v[64];
			struct cais_fields f;
			size_t len;

			for (unsigned int i = 0; i < 64; i++)
				v[i] = val(r, c[t].seq, i);
			cais_data_fields(&f, 1, 1, c[t].tensor, c[t].seq, 8, (uint8_t)r, 64);
			len = tf_cais_frame(frame, &H[r], &AGG, &f, v, 64);
			m[k++] = tenv_mbuf(E, (uint16_t)r, frame, len);
		}
	dp_lcore_input(&E->sw->lcores[0], m, 12);
	dp_lcore_flush(&E->sw->lcores[0]);
	assert_int_equal(E->n_cap, 12);
	for (unsigned int i = 0; i < E->n_cap; i++) {
		const struct tenv_frame *fr = &E->cap[i];
		struct cais_fields h;

		cais_hdr_read((const struct cais_hdr *)(fr->data + CAIS_FRAME_HDR_OFF), &h);
		if (h.type == CAIS_TYPE_REJECT) {
			assert_int_equal(h.tensor, 99);
			assert_int_equal(h.reason, CAIS_R_UNKNOWN_TENSOR);
			rejects++;
			continue;
		}
		assert_int_equal(h.type, CAIS_TYPE_RESULT);
		assert_true(h.tensor == 1 || h.tensor == 2);
		for (unsigned int e = 0; e < 64; e++) {
			uint32_t w;

			memcpy(&w, fr->data + CAIS_FRAME_OVERHEAD + 4 * e, 4);
			assert_int_equal((int32_t)ntohl(w), h.tensor == 1 ? sum[e] : max[e]);
		}
		results[h.tensor - 1]++;
	}
	assert_int_equal(results[0], 4);
	assert_int_equal(results[1], 4);
	assert_int_equal(rejects, 4);
	tenv_clear(E);
}

/* A session of one: every DATA completes its round at once. */
static void
t_world_one(void **state)
{
	struct chunk c = {5, 5, 1, 0, 1, 3};
	int32_t want[3];

	(void)state;
	session(5, 5, 1, 1, 16);
	tensor(5, 5, 1, "sum");
	for (uint32_t q = 0; q < 10; q++) {
		c.seq = q;
		expected_sum(&c, 1, want);
		send_data(&c, 0, NULL, 0);
		expect_results(&c, 1, want, 0);
	}
}

/* Input mbufs not back in their pool: DATA that open rounds keep (DP_KEEP_*). */
static unsigned int
kept_now(void)
{
	return E->in->size - rte_mempool_avail_count(E->in);
}

/*
 * A round keeps its DATA until it completes, and they carry its RESULTs
 * (dp_config.h DP_KEEP_*): none is freed before, every one is sent after,
 * the bytes those of any RESULT. A newer round that takes the slot of an
 * open one frees what that one kept; so does removing the session.
 */
static void
t_kept(void **state)
{
	struct chunk c = {1, 1, 1, 400, 8, 64};
	struct dp_session_counters sc;
	int32_t want[64];

	(void)state;
	expected_sum(&c, 4, want);
	for (unsigned int r = 0; r < 3; r++) {
		send_data(&c, r, NULL, 0);
		assert_int_equal(kept_now(), r + 1);
	}
	expect_nothing();
	send_data(&c, 3, NULL, 0);
	expect_results(&c, 0xF, want, 0);
	assert_int_equal(kept_now(), 0);
	/* two in; then seq + 2 x pool, the same slot and set, abandons them */
	c.seq = 410;
	send_data(&c, 0, NULL, 0);
	send_data(&c, 1, NULL, 0);
	assert_int_equal(kept_now(), 2);
	c.seq = 410 + 2 * 8;
	send_data(&c, 2, NULL, 0);
	assert_int_equal(kept_now(), 1);
	assert_int_equal(counters(1, 1, &sc)->abandoned, 1);
	expected_sum(&c, 4, want);
	send_data(&c, 0, NULL, 0);
	send_data(&c, 3, NULL, 0);
	send_data(&c, 1, NULL, 0);
	expect_results(&c, 0xF, want, 0);
	assert_int_equal(kept_now(), 0);
	/* rounds open when their session goes */
	c.seq = 430;
	send_data(&c, 2, NULL, 0);
	c.seq = 431;
	send_data(&c, 0, NULL, 0);
	send_data(&c, 3, NULL, 0);
	assert_int_equal(kept_now(), 3);
	ctl_ok("{\"cmd\":\"session.del\",\"args\":{\"tenant\":1,\"session\":1}}");
	assert_int_equal(kept_now(), 0);
}

/*
 * Where a round cannot keep DATA, it is freed as it comes and its sender
 * gets a copy of the RESULT: the same bytes, also in a round that kept
 * some of its DATA and not the rest. While the switch's packet pool is
 * less than half free (seen within DP_KEEP_CHECK polls), and for payloads
 * above DP_RESULT_COPY_MAX.
 */
static void
t_kept_refused(void **state)
{
	static struct rte_mbuf *drain[2048];
	static int32_t big[MAXE];
	struct dp_lcore *lc = &E->sw->lcores[0];
	struct chunk c = {1, 1, 1, 500, 8, 64};
	unsigned int nd = 0;
	json_t *st;
	int32_t want[64];

	(void)state;
	expected_sum(&c, 4, want);
	send_data(&c, 0, NULL, 0);
	assert_int_equal(kept_now(), 1);
	while (rte_mempool_avail_count(E->sw->pool) >= E->sw->pool->size / 2) {
		assert_true(nd < RTE_DIM(drain));
		drain[nd] = rte_pktmbuf_alloc(E->sw->pool);
		assert_non_null(drain[nd++]);
	}
	for (unsigned int i = 0; i < DP_KEEP_CHECK; i++)
		dp_lcore_flush(lc);
	assert_false(lc->keep_ok);
	send_data(&c, 1, NULL, 0);
	send_data(&c, 2, NULL, 0);
	assert_int_equal(kept_now(), 1);
	st = tenv_stats(E);
	assert_int_equal(json_integer_value(json_object_get(st, "keep_refused")), 2);
	assert_int_equal(json_integer_value(json_object_get(st, "mbufs")), E->sw->pool->size);
	assert_true(json_integer_value(json_object_get(st, "mbufs_free")) < E->sw->pool->size / 2);
	json_decref(st);
	send_data(&c, 3, NULL, 0);
	expect_results(&c, 0xF, want, 0);
	assert_int_equal(kept_now(), 0);
	rte_pktmbuf_free_bulk(drain, nd);
	for (unsigned int i = 0; i < DP_KEEP_CHECK; i++)
		dp_lcore_flush(lc);
	assert_true(lc->keep_ok);
	/* 2048 FIXED32 elements, 8 KiB: their RESULTs share one payload instead */
	session(6, 1, 4, 4, MAXE);
	tensor(6, 1, 1, "sum");
	c = (struct chunk){6, 1, 1, 0, 4, MAXE};
	for (unsigned int r = 0; r < 3; r++)
		send_data(&c, r, NULL, 0);
	assert_int_equal(kept_now(), 0);
	send_data(&c, 3, NULL, 0);
	expected_sum(&c, 4, big);
	expect_results(&c, 0xF, big, 0);
}

/* 2048 elements per packet (8 KiB payload, jumbo frames), 8 ranks, RESULT shared by 8. */
static void
t_jumbo(void **state)
{
	static int32_t want[MAXE];
	struct chunk c = {6, 1, 1, 0, 4, MAXE};

	(void)state;
	session(6, 1, 8, 4, MAXE);
	tensor(6, 1, 1, "sum");
	for (uint32_t q = 0; q < 9; q++) {
		c.seq = q;
		expected_sum(&c, 8, want);
		for (unsigned int r = 0; r < 8; r++)
			send_data(&c, (r * 3 + q) % 8, NULL, 0);
		expect_results(&c, 0xFF, want, 0);
	}
}

static void
t_arp(void **state)
{
	uint8_t want[60] = {0};
	size_t len = tf_arp_request(frame, &H[3], AGG.ip);
	uint8_t *a = want + 14;

	(void)state;
	tenv_send(E, 3, frame, len);
	assert_int_equal(E->n_cap, 1);
	assert_int_equal(E->cap[0].port, 3);
	assert_int_equal(E->cap[0].len, 60);
	memcpy(want, H[3].mac, 6);
	memcpy(want + 6, AGG.mac, 6);
	want[12] = 0x08;
	want[13] = 0x06;
	a[1] = 1;
	a[2] = 0x08;
	a[4] = 6;
	a[5] = 4;
	a[7] = 2;
	memcpy(a + 8, AGG.mac, 6);
	memcpy(a + 14, &AGG.ip, 4);
	memcpy(a + 18, H[3].mac, 6);
	memcpy(a + 24, &H[3].ip, 4);
	assert_memory_equal(E->cap[0].data, want, 60);
	tenv_clear(E);
	/* a request for another address is flooded like any broadcast */
	len = tf_arp_request(frame, &H[3], H[1].ip);
	tenv_send(E, 3, frame, len);
	assert_int_equal(E->n_cap, N_PORTS - 1);
	tenv_clear(E);
}

/*
 * --rx-loss drops the frames received at random, but never ARP (a lost
 * request would cost the host a second, dp_lcore.c rx_lost()).
 */
static void
t_rx_loss(void **state)
{
	struct chunk c = {1, 1, 1, 600, 8, 64};
	int32_t want[64];
	size_t len;

	(void)state;
	expected_sum(&c, 4, want);
	E->sw->rx_loss = UINT32_MAX; /* every draw but UINT32_MAX itself: drop */
	for (unsigned int i = 0; i < 100; i++) {
		len = tf_arp_request(frame, &H[i % 4], AGG.ip);
		tenv_send(E, (uint16_t)(i % 4), frame, len);
	}
	assert_int_equal(E->n_cap, 100);
	for (unsigned int k = 0; k < E->n_cap; k++)
		assert_int_equal(E->cap[k].data[21], 2); /* an ARP reply */
	tenv_clear(E);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_nothing();
	assert_int_equal(tenv_drops(E, DP_DROP_RX_LOSS), 4);
	E->sw->rx_loss = 0;
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_results(&c, 0xF, want, 0);
}

/* L2: flood unknown, learn, forward known, filter the ingress port. */
static void
t_l2(void **state)
{
	uint8_t f[100];
	struct tf_end a = H[0], b = H[1];
	size_t len;

	(void)state;
	a.mac[5] = 0x41;
	b.mac[5] = 0x42;
	len = tf_cais_frame(f, &a, &b, &(struct cais_fields){0}, NULL, 0);
	f[23] = 6; /* not UDP to the aggregator anyway: ordinary traffic */
	tenv_send(E, 0, f, len);
	assert_int_equal(E->n_cap, N_PORTS - 1);
	for (unsigned int k = 0; k < E->n_cap; k++) {
		assert_int_not_equal(E->cap[k].port, 0);
		assert_memory_equal(E->cap[k].data, f, len);
	}
	tenv_clear(E);
	/* b answers from port 5: learned; a -> b now goes to port 5 only */
	len = tf_cais_frame(f, &b, &a, &(struct cais_fields){0}, NULL, 0);
	tenv_send(E, 5, f, len);
	assert_int_equal(E->n_cap, 1);
	assert_int_equal(E->cap[0].port, 0);
	tenv_clear(E);
	len = tf_cais_frame(f, &a, &b, &(struct cais_fields){0}, NULL, 0);
	tenv_send(E, 0, f, len);
	assert_int_equal(E->n_cap, 1);
	assert_int_equal(E->cap[0].port, 5);
	assert_memory_equal(E->cap[0].data, f, len);
	tenv_clear(E);
	/* b moves to port 7 */
	len = tf_cais_frame(f, &b, &a, &(struct cais_fields){0}, NULL, 0);
	tenv_send(E, 7, f, len);
	tenv_clear(E);
	len = tf_cais_frame(f, &a, &b, &(struct cais_fields){0}, NULL, 0);
	tenv_send(E, 0, f, len);
	assert_int_equal(E->n_cap, 1);
	assert_int_equal(E->cap[0].port, 7);
	tenv_clear(E);
	/* destination behind the ingress port: filtered */
	tenv_send(E, 7, f, len);
	expect_nothing();
	assert_int_equal(tenv_drops(E, DP_DROP_L2_SAME_PORT), 1);
	/* UDP to port 51733 of another address is ordinary traffic */
	{
		struct cais_fields cf;
		int32_t v[2] = {1, 2};

		cais_data_fields(&cf, 1, 1, 1, 0, 8, 0, 2);
		len = tf_cais_frame(frame, &a, &b, &cf, v, 2);
		frame[CAIS_ETH_HLEN + 16 + 3] = 2; /* IP 10.0.0.2, b's MAC */
		tenv_send(E, 0, frame, len);
		assert_int_equal(E->n_cap, 1);
		assert_int_equal(E->cap[0].port, 7);
		tenv_clear(E);
	}
}

/*
 * Slot ownership by reciprocal (dp_slot_owner()): lcore idx mod k, the
 * (idx / k)-th of its slots, for every index of the largest pool and
 * 1..16 lcores, and at the top of the 32-bit range. The owner is the lane
 * that the hosts compute for a seq from the lanes a RESULT names (E11).
 */
static void
t_slot_owner(void **state)
{
	struct dp_switch sw;

	(void)state;
	memset(&sw, 0, sizeof(sw));
	for (unsigned int k = 1; k <= 16; k++) {
		sw.n_lcores = k;
		sw.lc_div = rte_reciprocal_value(k);
		for (unsigned int idx = 0; idx < CAIS_MAX_SLOTS; idx++) {
			unsigned int local = ~0u, owner = dp_slot_owner(&sw, idx, &local);

			if (owner != idx % k || local != idx / k)
				fail_msg("k %u idx %u: owner %u local %u", k, idx, owner, local);
			/* seq idx + 3 x 2^15 of the largest pool, and of a pool of 1024 */
			if (cais_lane(idx + 3u * CAIS_MAX_SLOTS, CAIS_MAX_SLOTS, k) != owner ||
			    (idx < 1024 && cais_lane(idx + 5u * 1024, 1024, k) != owner))
				fail_msg("k %u idx %u: lane %u, owner %u", k, idx,
					 cais_lane(idx + 3u * CAIS_MAX_SLOTS, CAIS_MAX_SLOTS, k),
					 owner);
		}
		for (unsigned int idx = 0xFFFFFFFFu - 64; idx != 0; idx++) {
			unsigned int local = ~0u, owner = dp_slot_owner(&sw, idx, &local);

			if (owner != idx % k || local != idx / k)
				fail_msg("k %u idx %u: owner %u local %u", k, idx, owner, local);
		}
	}
}

/*
 * With two lcores, DATA for a slot lcore 1 owns goes through its ring. In
 * session 2, with loss_hints, every RESULT names the two lanes (E11).
 */
static void
t_handoff(void **state)
{
	struct tenv *e1 = E;
	struct rte_mbuf *pkts[DP_BURST];
	int32_t want[64];
	unsigned int n;

	(void)state;
	E = tenv_create(&AGG, N_PORTS, 2);
	session(1, 1, 4, 8, 64);
	tensor(1, 1, 1, "sum");
	session_extra = "\"loss_hints\":1,";
	session(1, 2, 4, 8, 64);
	session_extra = NULL;
	tensor(1, 2, 1, "sum");
	for (uint32_t q = 0; q < 8; q++) {
		struct chunk c = {1, (uint16_t)(1 + q / 4), 1, q, 8, 64};

		result_lanes = q < 4 ? 0 : 2;

		expected_sum(&c, 4, want);
		/* all four arrive on lcore 0 */
		for (unsigned int r = 0; r < 4; r++)
			send_data(&c, r, NULL, 0);
		if (q % 2 == 0) {
			expect_results(&c, 0xF, want, 0);
			continue;
		}
		/* odd slots belong to lcore 1: nothing until it drains its ring */
		expect_nothing();
		n = rte_ring_dequeue_burst(E->sw->lcores[1].ring, (void **)pkts, DP_BURST, NULL);
		assert_int_equal(n, 4);
		dp_lcore_input_owned(&E->sw->lcores[1], pkts, (uint16_t)n);
		dp_lcore_flush(&E->sw->lcores[1]);
		assert_int_equal(E->cap[0].queue, 1); /* lcore 1 sends on its own TX queue */
		expect_results(&c, 0xF, want, 0);
	}
	assert_int_equal(E->sw->lcores[0].c.handoffs, 16);
	tenv_free(E);
	E = e1;
}

/* Forward-only mode and the lease: REJECT FWD_ONLY while not computing. */
static void
t_mode_lease(void **state)
{
	struct chunk c = {1, 1, 1, 900, 8, 64};
	const struct cais_hdr *h;
	struct timespec ts = {0, 30 * 1000 * 1000};
	int32_t want[64];

	(void)state;
	ctl_ok("{\"cmd\":\"mode.set\",\"args\":{\"mode\":\"forward_only\"}}");
	send_data(&c, 1, NULL, 0);
	assert_int_equal(E->n_cap, 1);
	h = (const struct cais_hdr *)(E->cap[0].data + CAIS_FRAME_HDR_OFF);
	assert_int_equal(cais_hdr_type(h), CAIS_TYPE_REJECT);
	assert_int_equal(ntohs(h->reason), CAIS_R_FWD_ONLY);
	assert_int_equal(h->flags, CAIS_F_FWD_ONLY);
	tenv_clear(E);
	/* a lease does not lift mode.set forward_only (docs/PROTOCOL.md E5) */
	ctl_ok("{\"cmd\":\"lease\",\"args\":{\"ttl_ms\":20}}");
	send_data(&c, 1, NULL, 0);
	assert_int_equal(E->n_cap, 1);
	assert_int_equal(ntohs(((const struct cais_hdr *)(E->cap[0].data + CAIS_FRAME_HDR_OFF))->reason),
			 CAIS_R_FWD_ONLY);
	tenv_clear(E);
	/* mode.set compute does; a lease then arms, its expiry turns computing off */
	ctl_ok("{\"cmd\":\"mode.set\",\"args\":{\"mode\":\"compute\"}}");
	ctl_ok("{\"cmd\":\"lease\",\"args\":{\"ttl_ms\":20}}");
	expected_sum(&c, 4, want);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_results(&c, 0xF, want, 0);
	nanosleep(&ts, NULL);
	dp_lease_check(E->sw, rte_rdtsc());
	assert_int_equal(E->sw->mode, DP_MODE_FWD_ONLY);
	c.seq = 901;
	send_data(&c, 0, NULL, 0);
	assert_int_equal(E->n_cap, 1);
	tenv_clear(E);
	ctl_ok("{\"cmd\":\"lease\",\"args\":{\"ttl_ms\":60000}}");
	dp_lease_check(E->sw, rte_rdtsc());
	assert_int_equal(E->sw->mode, DP_MODE_COMPUTE);
	expected_sum(&c, 4, want);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_results(&c, 0xF, want, 0);
}

/* A full TX queue: packets are freed and counted, not leaked. */
static void
t_tx_refused(void **state)
{
	struct chunk c = {1, 1, 1, 1000, 8, 64};
	unsigned int avail = rte_mempool_avail_count(E->sw->hdr_pool);
	unsigned int in_avail = rte_mempool_avail_count(E->in);
	uint64_t dropped = 0;

	(void)state;
	for (unsigned int r = 0; r < 3; r++)
		send_data(&c, r, NULL, 0);
	E->refuse_tx = 100;
	send_data(&c, 3, NULL, 0);
	E->refuse_tx = 0;
	expect_nothing();
	for (unsigned int p = 0; p < N_PORTS; p++)
		dropped += E->sw->lcores[0].port[p].tx_dropped;
	assert_int_equal(dropped, 4);
	assert_int_equal(tenv_drops(E, DP_DROP_TX_FULL), 4);
	assert_int_equal(rte_mempool_avail_count(E->sw->hdr_pool), avail);
	assert_int_equal(rte_mempool_avail_count(E->in), in_avail);
}

/* A deleted session answers UNKNOWN_TENSOR; added again, it starts clean. */
static void
t_session_readd(void **state)
{
	struct chunk c = {1, 1, 1, 1100, 8, 64};
	const struct cais_hdr *h;
	int32_t want[64];

	(void)state;
	send_data(&c, 0, NULL, 0);
	ctl_ok("{\"cmd\":\"session.del\",\"args\":{\"tenant\":1,\"session\":1}}");
	send_data(&c, 1, NULL, 0);
	assert_int_equal(E->n_cap, 1);
	h = (const struct cais_hdr *)(E->cap[0].data + CAIS_FRAME_HDR_OFF);
	assert_int_equal(ntohs(h->reason), CAIS_R_UNKNOWN_TENSOR);
	tenv_clear(E);
	session(1, 1, 4, 8, 64);
	tensor(1, 1, 1, "sum");
	c.seq = 1; /* an old seq is fine in a fresh session */
	expected_sum(&c, 4, want);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_results(&c, 0xF, want, 0);
}

/* High-priority sessions' RESULTs leave before normal traffic queued with them. */
static void
t_priority(void **state)
{
	struct rte_mbuf *burst[8];
	struct dp_lcore *lc = &E->sw->lcores[0];
	struct chunk lo = {1, 1, 1, 1200, 8, 64}, hi = {3, 3, 1, 1200, 8, 64};
	struct cais_fields f;
	int32_t want_lo[64], want_hi[64];
	unsigned int k = 0;
	size_t len;

	(void)state;
	ctl_ok("{\"cmd\":\"session.add\",\"args\":{\"tenant\":3,\"session\":3,\"n\":4,"
	       "\"slots\":8,\"elems_per_packet\":64,\"priority\":1,\"members\":["
	       "{\"rank\":0,\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\",\"port\":40000},"
	       "{\"rank\":1,\"mac\":\"02:00:00:00:00:02\",\"ip\":\"10.0.0.2\",\"port\":40001},"
	       "{\"rank\":2,\"mac\":\"02:00:00:00:00:03\",\"ip\":\"10.0.0.3\",\"port\":40002},"
	       "{\"rank\":3,\"mac\":\"02:00:00:00:00:04\",\"ip\":\"10.0.0.4\",\"port\":40003}]}}");
	tensor(3, 3, 1, "sum");
	expected_sum(&lo, 4, want_lo);
	expected_sum(&hi, 4, want_hi);
	for (unsigned int r = 0; r < 3; r++) {
		send_data(&lo, r, NULL, 0);
		send_data(&hi, r, NULL, 0);
	}
	expect_nothing();
	/* one burst: the normal round completes first, the high one second */
	for (unsigned int j = 0; j < 2; j++) {
		const struct chunk *c = j ? &hi : &lo;
		int32_t v[64];

		for (unsigned int i = 0; i < 64; i++)
			v[i] = val(3, c->seq, i);
		cais_data_fields(&f, c->tenant, c->session, c->tensor, c->seq, c->pool, 3, 64);
		len = tf_cais_frame(frame, &H[3], &AGG, &f, v, 64);
		burst[k++] = tenv_mbuf(E, 3, frame, len);
	}
	dp_lcore_input(lc, burst, (uint16_t)k);
	dp_lcore_flush(lc);
	assert_int_equal(E->n_cap, 8);
	/* per port: the high session's RESULT first */
	for (unsigned int p = 0; p < 4; p++) {
		int first = -1;

		for (unsigned int i = 0; i < E->n_cap; i++)
			if (E->cap[i].port == p) {
				const struct cais_hdr *h =
				    (const struct cais_hdr *)(E->cap[i].data + CAIS_FRAME_HDR_OFF);

				if (first < 0)
					first = ntohs(h->tenant);
			}
		assert_int_equal(first, 3);
	}
	tenv_clear(E);
}

/* A deep queue marks RESULTs CONGESTED; thresholds.set moves the mark. */
static void
t_congested(void **state)
{
	struct chunk c = {1, 1, 1, 1300, 8, 64};
	struct dp_lcore *lc = &E->sw->lcores[0];
	int32_t want[64];

	(void)state;
	expected_sum(&c, 4, want);
	lc->qdepth = DP_DEFAULT_QUEUE_DEPTH + 1;
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_results(&c, 0xF, want, CAIS_F_CONGESTED);
	/* the stored RESULT answers with today's congestion */
	ctl_ok("{\"cmd\":\"thresholds.set\",\"args\":{\"queue_depth\":100000}}");
	send_data(&c, 1, NULL, CAIS_F_RETX);
	expect_results(&c, 1u << 1, want, 0);
	lc->qdepth = 0;
}

/* ---- BLOCK16 (E4) ---- */

#define B16_PAY (CAIS_MAX_ELEMS / CAIS_B16_BLOCK + 2 * CAIS_MAX_ELEMS)

/* Each rank's BLOCK16 payload of the chunk at hand, as b16_fill() or a test writes it. */
static uint8_t bpay[8][B16_PAY];

/*
 * Rank's BLOCK16 payload for chunk c into bpay[rank]: block exponents spread
 * over 0..40, m from val(), -32768 now and then.
 */
static void
b16_fill(const struct chunk *c, unsigned int rank)
{
	static uint8_t exps[MAXE / CAIS_B16_BLOCK];
	static int16_t m[MAXE];

	for (unsigned int b = 0; b * CAIS_B16_BLOCK < c->count; b++)
		exps[b] = (uint8_t)((rank * 13 + c->seq * 7 + b * 5) % (CAIS_B16_EMAX_DATA + 1));
	for (unsigned int i = 0; i < c->count; i++)
		m[i] = i % 29 == rank ? INT16_MIN : (int16_t)(val(rank, c->seq, i) % 32768);
	tb16_encode(bpay[rank], exps, m, c->count);
}

/* Send bpay[rank] as rank's BLOCK16 DATA for chunk c, payload cut to plen bytes (0: whole). */
static void
send_b16_len(const struct chunk *c, unsigned int rank, uint8_t flags, size_t plen)
{
	struct cais_fields f;

	if (!plen)
		plen = cais_payload_bytes(CAIS_DT_BLOCK16, c->count);
	cais_data_fields(&f, c->tenant, c->session, c->tensor, c->seq, c->pool, (uint8_t)rank,
			 c->count);
	f.flags = flags;
	f.dtype = CAIS_DT_BLOCK16;
	tf_udp_headers(frame, &H[rank], &AGG, CAIS_HDR_LEN + plen);
	cais_hdr_build((struct cais_hdr *)(frame + CAIS_FRAME_HDR_OFF), &f);
	memcpy(frame + CAIS_FRAME_OVERHEAD, bpay[rank], plen);
	tenv_send(E, (uint16_t)rank, frame, CAIS_FRAME_OVERHEAD + plen);
}

static void
send_b16(const struct chunk *c, unsigned int rank, uint8_t flags)
{
	send_b16_len(c, rank, flags, 0);
}

/*
 * The RESULT payload of the ranks in mask (bpay[]) reduced by op (the model
 * of tests/common/b16.h); *sat: an exponent above the DATA limit. @return its bytes
 */
static size_t
b16_want(uint8_t *out, const struct chunk *c, uint32_t mask, enum cais_redop op, bool *sat)
{
	static int64_t acc[MAXE];
	bool first = true;

	*sat = false;
	for (unsigned int r = 0; r < 8; r++) {
		if (!((mask >> r) & 1))
			continue;
		for (unsigned int i = 0; i < c->count; i++) {
			int64_t v = tb16_elem(bpay[r], c->count, i, sat);

			acc[i] = first		     ? v
				 : op == CAIS_OP_MAX ? (v > acc[i] ? v : acc[i])
				 : op == CAIS_OP_MIN ? (v < acc[i] ? v : acc[i])
						     : acc[i] + v;
		}
		first = false;
	}
	return tb16_store(out, acc, c->count);
}

/* Every op, counts of one and of several blocks (a short last one), then a lost RESULT. */
static void
t_b16_ops(void **state)
{
	static const uint16_t counts[] = {64, 45, 1, 33, 32};
	static const enum cais_redop ops[] = {CAIS_OP_SUM, CAIS_OP_MAX, CAIS_OP_MIN, CAIS_OP_AVG};
	uint8_t want[B16_PAY];
	struct dp_session_counters sc;
	bool sat;

	(void)state;
	for (unsigned int x = 0; x < 4; x++)
		for (unsigned int k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
			struct chunk c = {1, 1, 11 + x, 1400 + x * 8 + k, 8, counts[k]};
			size_t plen;

			for (unsigned int r = 0; r < 4; r++)
				b16_fill(&c, r);
			/* avg is aggregated as sum */
			plen = b16_want(want, &c, 0xF, ops[x], &sat);
			assert_false(sat);
			for (unsigned int j = 0; j < 4; j++) {
				send_b16(&c, (j * 3 + k) % 4, 0);
				if (j < 3)
					expect_nothing();
			}
			expect_payload(&c, 0xF, CAIS_DT_BLOCK16, want, plen, 0);
			send_b16(&c, 2, CAIS_F_RETX);
			expect_payload(&c, 1u << 2, CAIS_DT_BLOCK16, want, plen, 0);
		}
	assert_int_equal(counters(1, 1, &sc)->rounds, 20);
	assert_int_equal(sc.resends, 20);
	assert_int_equal(sc.overflow + sc.inconsistent + sc.duplicates, 0);
}

/* 2048 elements per packet, 8 ranks: the RESULT shared by 8 members. */
static void
t_b16_jumbo(void **state)
{
	static uint8_t want[B16_PAY];
	bool sat;

	(void)state;
	session(6, 2, 8, 4, MAXE);
	tensor_wire(6, 2, 1, "sum", "block16");
	for (uint32_t q = 0; q < 9; q++) {
		struct chunk c = {6, 2, 1, q, 4, (uint16_t)(q == 4 ? MAXE - 7 : MAXE)};
		size_t plen;

		for (unsigned int r = 0; r < 8; r++)
			b16_fill(&c, r);
		plen = b16_want(want, &c, 0xFF, CAIS_OP_SUM, &sat);
		assert_int_equal(plen, q == 4 ? 64 + 2 * (MAXE - 7) : 4160);
		for (unsigned int r = 0; r < 8; r++)
			send_b16(&c, (r * 3 + q) % 8, 0);
		expect_payload(&c, 0xFF, CAIS_DT_BLOCK16, want, plen, 0);
	}
}

/*
 * Every arrival order of four contributions whose exponents differ widely
 * within a block gives the same RESULT bits: the switch aligns them exactly
 * (block 0: two contributions at 2^40 that cancel leave the small ones,
 * exactly; block 1: exponents 40, 0, 21 and 33 in one block).
 */
static void
t_b16_orders(void **state)
{
	static const uint8_t e[2][4] = {{40, 40, 0, 3}, {40, 0, 21, 33}};
	uint8_t want[B16_PAY], first[B16_PAY];
	int16_t m[4][64];
	bool sat;
	size_t plen = 0;

	(void)state;
	for (unsigned int i = 0; i < 64; i++) {
		m[0][i] = (int16_t)(val(0, 77, i) % 32768);
		m[1][i] = i < 32 ? (int16_t)-m[0][i] : (int16_t)(val(1, 77, i) % 32768);
		m[2][i] = (int16_t)(val(2, 77, i) % 32768);
		m[3][i] = i == 5 ? INT16_MIN : (int16_t)(val(3, 77, i) % 4096);
	}
	for (unsigned int r = 0; r < 4; r++) {
		const uint8_t exps[2] = {e[0][r], e[1][r]};

		tb16_encode(bpay[r], exps, m[r], 64);
	}
	{
		struct chunk c = {1, 1, 11, 0, 8, 64};

		plen = b16_want(want, &c, 0xF, CAIS_OP_SUM, &sat);
	}
	/* block 0 holds m2 + 8 m3, exactly: e <= 4; block 1 is as large as its 2^40 terms */
	assert_true(want[0] <= 4);
	assert_true(want[1] >= 35);
	for (unsigned int k = 0; k < 24; k++) {
		unsigned int perm[4] = {0, 1, 2, 3}, rest = k;
		struct chunk c = {1, 1, 11, 1700 + k, 8, 64};

		/* the k-th permutation (factorial number system) */
		for (unsigned int j = 0; j < 4; j++) {
			unsigned int pick = j + rest % (4 - j), t = perm[pick];

			rest /= 4 - j;
			memmove(perm + j + 1, perm + j, (pick - j) * sizeof(perm[0]));
			perm[j] = t;
		}
		for (unsigned int j = 0; j < 4; j++)
			send_b16(&c, perm[j], 0);
		assert_int_equal(E->n_cap, 4);
		if (k == 0)
			memcpy(first, E->cap[0].data + CAIS_FRAME_OVERHEAD, plen);
		assert_memory_equal(E->cap[0].data + CAIS_FRAME_OVERHEAD, first, plen);
		expect_payload(&c, 0xF, CAIS_DT_BLOCK16, want, plen, 0);
	}
}

/* One REJECT of why back to rank, echoing dtype; clears. */
static void
expect_reject(unsigned int rank, enum cais_reason why, uint8_t dtype)
{
	const struct cais_hdr *h;

	if (E->n_cap != 1)
		fail_msg("%u frames sent, want one REJECT %s", E->n_cap, cais_reason_name(why));
	h = (const struct cais_hdr *)(E->cap[0].data + CAIS_FRAME_HDR_OFF);
	assert_int_equal(E->cap[0].port, rank);
	assert_int_equal(E->cap[0].len, CAIS_FRAME_OVERHEAD);
	assert_int_equal(cais_hdr_type(h), CAIS_TYPE_REJECT);
	assert_int_equal(ntohs(h->reason), why);
	assert_int_equal(h->dtype, dtype);
	assert_int_equal(ntohs(h->count), 0);
	tenv_clear(E);
}

/*
 * BAD_DTYPE for DATA that is not its tensor's wire dtype, echoing the
 * DATA's dtype; BAD_COUNT for a BLOCK16 payload shorter than its count
 * needs (a FIXED32 length is not needed); none of them touches the slot.
 */
static void
t_b16_rejects(void **state)
{
	struct chunk c = {1, 1, 1, 1800, 8, 64}, b = {1, 1, 11, 1800, 8, 64};
	struct dp_session_counters sc;
	uint8_t want[B16_PAY];
	int32_t sum[64];
	bool sat;

	(void)state;
	b16_fill(&c, 0);
	send_b16(&c, 0, 0); /* BLOCK16 to a FIXED32 tensor */
	expect_reject(0, CAIS_R_BAD_DTYPE, CAIS_DT_BLOCK16);
	send_data(&b, 1, NULL, 0); /* FIXED32 to a BLOCK16 tensor */
	expect_reject(1, CAIS_R_BAD_DTYPE, CAIS_DT_FIXED32);
	{
		struct cais_fields f;
		int32_t v[2] = {1, 2};
		size_t len;

		/* 2 is PARTIAL64 (E9), which any tensor takes from a member: 3 is no dtype */
		cais_data_fields(&f, 1, 1, 11, 1800, 8, 2, 2);
		f.dtype = 3;
		len = tf_cais_frame(frame, &H[2], &AGG, &f, v, 2);
		tenv_send(E, 2, frame, len);
		expect_reject(2, CAIS_R_BAD_DTYPE, 3);
	}
	/* 64 elements: 4 + 128 bytes; 33: 4 + 66; one byte short is too short */
	b16_fill(&b, 3);
	send_b16_len(&b, 3, 0, 131);
	expect_reject(3, CAIS_R_BAD_COUNT, CAIS_DT_BLOCK16);
	b.count = 33;
	b16_fill(&b, 3);
	send_b16_len(&b, 3, 0, 69);
	expect_reject(3, CAIS_R_BAD_COUNT, CAIS_DT_BLOCK16);
	b.count = 65; /* > E */
	b16_fill(&b, 3);
	send_b16(&b, 3, 0);
	expect_reject(3, CAIS_R_BAD_COUNT, CAIS_DT_BLOCK16);
	counters(1, 1, &sc);
	/* the rounds of both tensors go on as if nothing had come */
	b.count = 64;
	for (unsigned int r = 0; r < 4; r++)
		b16_fill(&b, r);
	{
		size_t plen = b16_want(want, &b, 0xF, CAIS_OP_SUM, &sat);

		for (unsigned int r = 0; r < 4; r++)
			send_b16(&b, r, 0);
		expect_payload(&b, 0xF, CAIS_DT_BLOCK16, want, plen, 0);
	}
	c.seq = 1801;
	expected_sum(&c, 4, sum);
	for (unsigned int r = 0; r < 4; r++)
		send_data(&c, r, NULL, 0);
	expect_results(&c, 0xF, sum, 0);
	assert_int_equal(E->sw->lcores[0].c.rejects[CAIS_R_BAD_DTYPE], 3);
	assert_int_equal(E->sw->lcores[0].c.rejects[CAIS_R_BAD_COUNT], 3);
	assert_int_equal(counters(1, 1, &sc)->inconsistent, 0);
}

/*
 * The tensor changes its wire dtype while a round is open (deleted and added
 * again): a DATA of the other dtype for the round's seq is dropped and
 * counted; the round completes in its own dtype.
 */
static void
t_b16_dtype_change(void **state)
{
	struct chunk c = {1, 1, 11, 1900, 8, 64};
	struct dp_session_counters sc;
	uint8_t want[B16_PAY];
	uint64_t drops = tenv_drops(E, DP_DROP_INCONSISTENT);
	bool sat;
	size_t plen;

	(void)state;
	for (unsigned int r = 0; r < 4; r++)
		b16_fill(&c, r);
	plen = b16_want(want, &c, 0xF, CAIS_OP_SUM, &sat);
	send_b16(&c, 0, 0);
	ctl_ok("{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":1,\"tensor\":11}}");
	tensor_wire(1, 1, 11, "sum", "fixed32");
	send_data(&c, 1, NULL, 0);
	send_data(&c, 2, NULL, CAIS_F_RETX);
	expect_nothing();
	assert_int_equal(tenv_drops(E, DP_DROP_INCONSISTENT), drops + 2);
	assert_int_equal(counters(1, 1, &sc)->inconsistent, 2);
	ctl_ok("{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":1,\"tensor\":11}}");
	tensor_wire(1, 1, 11, "sum", "block16");
	for (unsigned int r = 1; r < 4; r++)
		send_b16(&c, r, 0);
	expect_payload(&c, 0xF, CAIS_DT_BLOCK16, want, plen, 0);
	/* and the other way: a FIXED32 round, a BLOCK16 DATA for its seq */
	c.tensor = 1;
	c.seq = 1901;
	{
		int32_t sum[64];

		expected_sum(&c, 4, sum);
		send_data(&c, 0, NULL, 0);
		ctl_ok(
		    "{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":1,\"tensor\":1}}");
		tensor_wire(1, 1, 1, "sum", "block16");
		send_b16(&c, 1, 0);
		expect_nothing();
		ctl_ok(
		    "{\"cmd\":\"tensor.del\",\"args\":{\"tenant\":1,\"session\":1,\"tensor\":1}}");
		tensor(1, 1, 1, "sum");
		for (unsigned int r = 1; r < 4; r++)
			send_data(&c, r, NULL, 0);
		expect_results(&c, 0xF, sum, 0);
	}
	assert_int_equal(counters(1, 1, &sc)->inconsistent, 3);
}

/*
 * A DATA exponent above 40 counts as 40 and the round's RESULT carries
 * OVERFLOW, its resend too; an exponent of 40 is no overflow.
 */
static void
t_b16_overflow(void **state)
{
	uint8_t want[B16_PAY];
	struct dp_session_counters sc;
	bool sat;

	(void)state;
	for (unsigned int k = 0; k < 3; k++) {
		/* sum with exponent 41 in block 1; max with 255 in block 0; sum with 40 */
		struct chunk c = {1, 1, k == 1 ? 12 : 11, 2000 + k, 8, 64};
		size_t plen;

		for (unsigned int r = 0; r < 4; r++)
			b16_fill(&c, r);
		bpay[2][k == 1 ? 0 : 1] = k == 0 ? 41 : k == 1 ? 255 : 40;
		plen = b16_want(want, &c, 0xF, k == 1 ? CAIS_OP_MAX : CAIS_OP_SUM, &sat);
		assert_int_equal(sat, k < 2);
		for (unsigned int r = 0; r < 4; r++)
			send_b16(&c, 3 - r, 0);
		expect_payload(&c, 0xF, CAIS_DT_BLOCK16, want, plen, k < 2 ? CAIS_F_OVERFLOW : 0);
		send_b16(&c, 0, CAIS_F_RETX);
		expect_payload(&c, 1, CAIS_DT_BLOCK16, want, plen, k < 2 ? CAIS_F_OVERFLOW : 0);
	}
	assert_int_equal(counters(1, 1, &sc)->overflow, 2);
}

/* BLOCK16 through the lcore handoff: DATA for lcore 1's slots, RESULT from its queue. */
static void
t_b16_handoff(void **state)
{
	struct tenv *e1 = E;
	struct rte_mbuf *pkts[DP_BURST];
	uint8_t want[B16_PAY];
	bool sat;

	(void)state;
	E = tenv_create(&AGG, N_PORTS, 2);
	session(1, 1, 4, 8, 64);
	tensor_wire(1, 1, 11, "min", "block16");
	for (uint32_t q = 0; q < 4; q++) {
		struct chunk c = {1, 1, 11, q, 8, 50};
		size_t plen;
		unsigned int n;

		for (unsigned int r = 0; r < 4; r++)
			b16_fill(&c, r);
		plen = b16_want(want, &c, 0xF, CAIS_OP_MIN, &sat);
		for (unsigned int r = 0; r < 4; r++)
			send_b16(&c, r, 0);
		if (q % 2) {
			expect_nothing();
			n = rte_ring_dequeue_burst(E->sw->lcores[1].ring, (void **)pkts, DP_BURST,
						   NULL);
			assert_int_equal(n, 4);
			dp_lcore_input_owned(&E->sw->lcores[1], pkts, (uint16_t)n);
			dp_lcore_flush(&E->sw->lcores[1]);
		}
		expect_payload(&c, 0xF, CAIS_DT_BLOCK16, want, plen, 0);
	}
	tenv_free(E);
	E = e1;
}

/* ---- a leaf and its spine (docs/PROTOCOL.md E9) ---- */

/* A CAIS message of type/dtype about chunk c, from src on port, rank, plen bytes of payload. */
static void
send_msg(const struct chunk *c, uint16_t port, const struct tf_end *src, uint8_t type, uint8_t rank,
	 uint8_t dtype, const void *payload, size_t plen, uint8_t flags, uint16_t reason)
{
	struct cais_fields f;

	cais_data_fields(&f, c->tenant, c->session, c->tensor, c->seq, c->pool, rank, c->count);
	f.type = type;
	f.flags = flags;
	f.dtype = dtype;
	f.reason = reason;
	if (type == CAIS_TYPE_REJECT || type == CAIS_TYPE_ACK)
		f.count = 0;
	tf_udp_headers(frame, src, &AGG, CAIS_HDR_LEN + plen);
	cais_hdr_build((struct cais_hdr *)(frame + CAIS_FRAME_HDR_OFF), &f);
	if (plen)
		memcpy(frame + CAIS_FRAME_OVERHEAD, payload, plen);
	tenv_send(E, port, frame, CAIS_FRAME_OVERHEAD + plen);
}

/* The captured frame k, checked to go to port with a CAIS message of type; its header. */
static const struct cais_hdr *
cap_msg(unsigned int k, unsigned int port, uint8_t type)
{
	const struct cais_hdr *h;

	assert_true(k < E->n_cap);
	assert_int_equal(E->cap[k].port, port);
	assert_true(E->cap[k].len >= CAIS_FRAME_OVERHEAD);
	h = (const struct cais_hdr *)(E->cap[k].data + CAIS_FRAME_HDR_OFF);
	assert_int_equal(cais_hdr_type(h), type);
	return h;
}

/* The one frame sent is the leaf's PARTIAL64 DATA of c with sums want (flags, up_rank). */
static void
expect_partial(const struct chunk *c, const int64_t *want, uint8_t up_rank, uint8_t flags)
{
	static uint8_t exp[CAIS_FRAME_OVERHEAD + 8 * MAXE];
	struct cais_fields f;
	size_t plen = 8u * c->count;

	if (E->n_cap != 1)
		fail_msg("seq %u: %u frames sent, want the partial sum only", c->seq, E->n_cap);
	cais_data_fields(&f, c->tenant, c->session, c->tensor, c->seq, c->pool, up_rank, c->count);
	f.dtype = CAIS_DT_PARTIAL64;
	f.flags = flags;
	tf_udp_headers(exp, &AGG, &SP, CAIS_HDR_LEN + plen);
	cais_hdr_build((struct cais_hdr *)(exp + CAIS_FRAME_HDR_OFF), &f);
	for (unsigned int i = 0; i < c->count; i++) {
		uint64_t w = __builtin_bswap64((uint64_t)want[i]);

		memcpy(exp + CAIS_FRAME_OVERHEAD + 8 * i, &w, 8);
	}
	assert_int_equal(E->cap[0].port, SP_PORT);
	assert_int_equal(E->cap[0].len, CAIS_FRAME_OVERHEAD + plen);
	assert_memory_equal(E->cap[0].data, exp, CAIS_FRAME_OVERHEAD + plen);
	tenv_clear(E);
}

static void
up_counters(unsigned int t, unsigned int s, uint64_t *v)
{
	struct dp_session *ss;

	memset(v, 0, 5 * sizeof(*v));
	LIST_FOREACH (ss, &E->sw->tables.sessions, link)
		if (ss->tenant == t && ss->session == s)
			for (unsigned int k = 0; k < ss->n_lcores; k++) {
				v[0] += ss->part[k].c.up_tx;
				v[1] += ss->part[k].c.up_resent;
				v[2] += ss->part[k].c.up_results;
				v[3] += ss->part[k].c.up_rejects;
				v[4] += ss->part[k].c.rounds;
			}
}

/*
 * A leaf: the partial sum goes up (exact, PARTIAL64, its uplink rank), no
 * RESULT before the spine's; a local retransmission or QUERY is ACKed and
 * sends the partial again; the spine's RESULT (its sums, not the leaf's) reaches every
 * local rank, and a lost one is resent; answers from anyone but the uplink,
 * repeated ones and ACKs change nothing; the spine's REJECT reaches every
 * local rank with the dtype they sent.
 */
static void
t_uplink(void **state)
{
	struct chunk c = {2, 70, 1, 5000, 8, 64}, d = {2, 70, 1, 5001, 8, 64};
	int32_t want[64], spine[64];
	int64_t part[64];
	uint8_t pay[4 * 64];
	uint64_t v[5];

	(void)state;
	session_hosts(2, 70, 0, 4, 8, 64, 1, false);
	tensor(2, 70, 1, "sum");
	for (unsigned int r = 0; r < 4; r++) {
		expect_nothing();
		send_data(&c, r, NULL, 0);
	}
	expected_sum(&c, 4, want);
	for (unsigned int i = 0; i < 64; i++)
		part[i] = want[i];
	expect_partial(&c, part, 1, 0);

	/* a local rank's timer: ACK, and the partial again (1 ms after the first) */
	usleep(2000);
	send_data(&c, 2, NULL, CAIS_F_RETX);
	assert_int_equal(E->n_cap, 2);
	for (unsigned int k = 0; k < 2; k++) {
		if (E->cap[k].port == 2) {
			cap_msg(k, 2, CAIS_TYPE_ACK);
		} else {
			const struct cais_hdr *h = cap_msg(k, SP_PORT, CAIS_TYPE_DATA);

			assert_int_equal(h->flags, CAIS_F_RETX);
			assert_int_equal(h->dtype, CAIS_DT_PARTIAL64);
			assert_int_equal(h->rank, 1);
		}
	}
	tenv_clear(E);
	/* a local rank's QUERY (E12) does the same; within the resend gap, the ACK alone */
	usleep(2000);
	send_query(&c, 3);
	assert_int_equal(E->n_cap, 2);
	for (unsigned int k = 0; k < 2; k++)
		cap_msg(k, E->cap[k].port == 3 ? 3 : SP_PORT,
			E->cap[k].port == 3 ? CAIS_TYPE_ACK : CAIS_TYPE_DATA);
	tenv_clear(E);
	send_query(&c, 0);
	assert_int_equal(E->n_cap, 1);
	cap_msg(0, 0, CAIS_TYPE_ACK);
	tenv_clear(E);

	/* the spine's RESULT: what every rank gets is the spine's sums */
	for (unsigned int i = 0; i < 64; i++) {
		spine[i] = want[i] * 3 + (int32_t)i;
		uint32_t w = htonl((uint32_t)spine[i]);
		memcpy(pay + 4 * i, &w, 4);
	}
	send_msg(&c, 5, &H[5], CAIS_TYPE_RESULT, CAIS_RANK_NONE, CAIS_DT_FIXED32, pay, sizeof(pay),
		 0, 0); /* not from the uplink */
	expect_nothing();
	send_msg(&c, SP_PORT, &SP, CAIS_TYPE_RESULT, CAIS_RANK_NONE, CAIS_DT_FIXED32, pay,
		 sizeof(pay), 0, 0);
	expect_results(&c, 0xF, spine, 0);
	send_data(&c, 1, NULL, CAIS_F_RETX); /* rank 1 lost it */
	expect_results(&c, 1u << 1, spine, 0);
	send_msg(&c, SP_PORT, &SP, CAIS_TYPE_RESULT, CAIS_RANK_NONE, CAIS_DT_FIXED32, pay,
		 sizeof(pay), 0, 0); /* again: nothing waits for it */
	expect_nothing();

	/* the next round: an ACK from the spine, then its REJECT */
	for (unsigned int r = 0; r < 4; r++)
		send_data(&d, r, NULL, 0);
	assert_int_equal(E->n_cap, 1);
	tenv_clear(E);
	send_msg(&d, SP_PORT, &SP, CAIS_TYPE_ACK, 1, CAIS_DT_PARTIAL64, NULL, 0, 0, 0);
	expect_nothing();
	send_msg(&d, SP_PORT, &SP, CAIS_TYPE_REJECT, CAIS_RANK_NONE, CAIS_DT_PARTIAL64, NULL, 0, 0,
		 CAIS_R_UNKNOWN_TENSOR);
	assert_int_equal(E->n_cap, 4);
	for (unsigned int k = 0; k < 4; k++) {
		const struct cais_hdr *h = cap_msg(k, E->cap[k].port, CAIS_TYPE_REJECT);

		assert_true(E->cap[k].port < 4);
		assert_int_equal(ntohs(h->reason), CAIS_R_UNKNOWN_TENSOR);
		assert_int_equal(h->dtype, CAIS_DT_FIXED32);
		assert_int_equal(ntohl(h->seq), d.seq);
		assert_int_equal(h->rank, CAIS_RANK_NONE);
	}
	tenv_clear(E);
	up_counters(2, 70, v);
	assert_int_equal(v[0], 4); /* c, c again (a retransmission, a QUERY), d */
	assert_int_equal(v[1], 2);
	assert_int_equal(v[2], 1);
	assert_int_equal(v[3], 1);
	assert_int_equal(v[4], 1);
}

/*
 * A leaf with loss_hints (E9, E12): a local rank's QUERY about its newest
 * chunk also sends up again the partials of the older rounds of its flow
 * that wait for the spine (query_older()): libcais's QUERY stands in for a
 * probe of those chunks, whose retransmission used to do it. Rounds that
 * got their RESULT are left alone; within the resend gap, the ACK alone.
 */
static void
t_uplink_query_older(void **state)
{
	struct chunk c[3] = {
	    {2, 72, 1, 7000, 8, 64}, {2, 72, 1, 7001, 8, 64}, {2, 72, 1, 7002, 8, 64}};
	uint8_t pay[4 * 64] = {0};
	unsigned int up[3] = {0};

	(void)state;
	session_extra = "\"loss_hints\":1,";
	session_hosts(2, 72, 0, 2, 8, 64, 1, false);
	session_extra = NULL;
	tensor(2, 72, 1, "sum");
	for (unsigned int k = 0; k < 3; k++) {
		send_data(&c[k], 0, NULL, 0);
		send_data(&c[k], 1, NULL, 0);
		assert_int_equal(E->n_cap, 1); /* the partial */
		tenv_clear(E);
	}
	/* round 7001 completes at the spine; 7000 and 7002 wait */
	send_msg(&c[1], SP_PORT, &SP, CAIS_TYPE_RESULT, CAIS_RANK_NONE, CAIS_DT_FIXED32, pay,
		 sizeof(pay), 0, 0);
	assert_int_equal(E->n_cap, 2); /* its RESULT to both ranks */
	tenv_clear(E);
	usleep(2000); /* past DP_UPLINK_RESEND_US */
	send_query(&c[2], 0);
	assert_int_equal(E->n_cap, 3);
	for (unsigned int k = 0; k < 3; k++) {
		const struct cais_hdr *h;

		if (E->cap[k].port == 0) {
			cap_msg(k, 0, CAIS_TYPE_ACK);
			continue;
		}
		h = cap_msg(k, SP_PORT, CAIS_TYPE_DATA);
		assert_int_equal(h->dtype, CAIS_DT_PARTIAL64);
		assert_true(ntohl(h->seq) == 7000 || ntohl(h->seq) == 7002);
		up[ntohl(h->seq) - 7000]++;
	}
	assert_int_equal(up[0], 1);
	assert_int_equal(up[2], 1);
	tenv_clear(E);
	send_query(&c[2], 1);
	assert_int_equal(E->n_cap, 1);
	cap_msg(0, 1, CAIS_TYPE_ACK);
	tenv_clear(E);
}

static void
ctl_refused(const char *json, int code, const char *needle)
{
	struct ctl_err err;

	if (tenv_ctl(E, json, &err) == 0)
		fail_msg("%s: accepted", json);
	assert_int_equal(err.code, code);
	if (!strstr(err.msg, needle))
		fail_msg("%s: '%s' does not name '%s'", json, err.msg, needle);
}

/* session.add's uplink and first_rank: what a leaf cannot be. */
static void
t_uplink_refused(void **state)
{
	static const char *const base =
	    "{\"cmd\":\"session.add\",\"args\":{\"tenant\":2,\"session\":71,\"n\":1,\"slots\":8,"
	    "\"elems_per_packet\":%u,\"members\":[{\"rank\":0,\"mac\":\"02:00:00:00:00:01\","
	    "\"ip\":\"10.0.0.1\",\"port\":40000}],\"uplink\":{%s}}}";
	static const struct {
		unsigned int elems;
		const char *up, *needle;
	} bad[] = {
	    {2048,
	     "\"ip\":\"10.0.0.200\",\"mac\":\"02:00:00:00:00:c8\",\"rank\":0,\"switch_port\":7",
	     "elems_per_packet"},
	    {64, "\"ip\":\"10.0.0.254\",\"mac\":\"02:00:00:00:00:c8\",\"rank\":0,\"switch_port\":7",
	     "uplink"},
	    {64, "\"ip\":\"10.0.0.200\",\"mac\":\"02:00:00:00:00:c8\",\"rank\":0,\"switch_port\":8",
	     "switch_port"},
	    {64,
	     "\"ip\":\"10.0.0.200\",\"mac\":\"02:00:00:00:00:c8\",\"rank\":255,\"switch_port\":7",
	     "rank"},
	    {64, "\"ip\":\"10.0.0.200\",\"mac\":\"ff:ff:ff:ff:ff:ff\",\"rank\":0,\"switch_port\":7",
	     "mac"},
	    {64, "\"ip\":\"10.0.0.200\",\"mac\":\"02:00:00:00:00:c8\",\"rank\":0", "switch_port"},
	    {64,
	     "\"ip\":\"10.0.0.200\",\"mac\":\"02:00:00:00:00:c8\",\"rank\":0,\"switch_port\":7,"
	     "\"bogus\":1",
	     "bogus"},
	};
	char buf[1024];

	(void)state;
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		snprintf(buf, sizeof(buf), base, bad[k].elems, bad[k].up);
		ctl_refused(buf, EINVAL, bad[k].needle);
	}
	snprintf(
	    buf, sizeof(buf), base, 1024u,
	    "\"ip\":\"10.0.0.200\",\"mac\":\"02:00:00:00:00:c8\",\"rank\":0,\"switch_port\":7");
	ctl_ok(buf);
	/* first_rank: the members' ranks lie in first_rank .. first_rank + n - 1, below 255 */
	ctl_refused("{\"cmd\":\"session.add\",\"args\":{\"tenant\":2,\"session\":76,\"n\":1,"
		    "\"slots\":8,\"elems_per_packet\":64,\"first_rank\":4,\"members\":[{\"rank\":0,"
		    "\"mac\":\"02:00:00:00:00:01\",\"ip\":\"10.0.0.1\",\"port\":40000}]}}",
		    EINVAL, "rank");
	ctl_refused("{\"cmd\":\"session.add\",\"args\":{\"tenant\":2,\"session\":76,\"n\":2,"
		    "\"slots\":8,\"elems_per_packet\":64,\"first_rank\":254,\"members\":[]}}",
		    EINVAL, "first_rank");
}

/* The captured frame to port: its CAIS payload (copied to out, plen bytes) and flags. */
static uint8_t
take_payload(unsigned int port, uint8_t type, uint8_t *out, size_t plen)
{
	for (unsigned int k = 0; k < E->n_cap; k++)
		if (E->cap[k].port == port) {
			const struct cais_hdr *h = cap_msg(k, port, type);

			assert_int_equal(E->cap[k].len, CAIS_FRAME_OVERHEAD + plen);
			memcpy(out, E->cap[k].data + CAIS_FRAME_OVERHEAD, plen);
			return h->flags;
		}
	fail_msg("no frame to port %u", port);
	return 0;
}

/*
 * A tree of two leaves of 3 ranks (the second's ranks 3..5: first_rank) and
 * a spine gives the bits one switch of the 6 gives: FIXED32 and BLOCK16, every op, 50 elements, and
 * a sum beyond int32 (OVERFLOW both ways); the spine's RESULT through a leaf is those bits.
 */
static void
t_tree_bits(void **state)
{
	static const char *const ops[] = {"sum", "max", "min", "avg"};
	static uint8_t pay[6][B16_PAY], ref[B16_PAY], sp[B16_PAY], pa[8 * 64], pb[8 * 64];
	unsigned int seq = 100;

	(void)state;
	session_hosts(2, 72, 0, 6, 8, 64, -1, false); /* the one switch */
	session_hosts(2, 73, 0, 3, 8, 64, 0, true);   /* leaf A: ranks 0..2 */
	session_hosts(2, 74, 3, 3, 8, 64, 1, true);   /* leaf B: ranks 3..5 (first_rank 3) */
	session_hosts(2, 75, 6, 2, 8, 64, -1, false); /* the spine: "leaves" H6, H7 */
	for (unsigned int w = 0; w < 2; w++)
		for (unsigned int o = 0; o < 4; o++)
			for (unsigned int ss = 72; ss <= 75; ss++)
				tensor_wire(2, ss, 10 * w + o, ops[o], w ? "block16" : "fixed32");
	for (unsigned int w = 0; w < 2; w++)
		for (unsigned int o = 0; o < 5; o++, seq++) {
			/*
			 * o == 4: sum, values near INT32_MAX (FIXED32), or exponents above
			 * the DATA limit (BLOCK16): OVERFLOW, from the spine's sum or from a
			 * leaf's partial
			 */
			uint8_t dt = w ? CAIS_DT_BLOCK16 : CAIS_DT_FIXED32;
			struct chunk c = {2, 72, 10 * w + (o == 4 ? 0 : o), seq, 8, 50};
			size_t plen = cais_payload_bytes(dt, c.count), p64 = 8u * c.count;
			uint8_t fref, fsp, fup[2];

			for (unsigned int g = 0; g < 6; g++) {
				if (w) {
					b16_fill(&c, g);
					memcpy(pay[g], bpay[g], plen);
					if (o == 4)
						memset(pay[g], CAIS_B16_EMAX_DATA + 1, 2);
				} else {
					for (unsigned int i = 0; i < c.count; i++) {
						int32_t x = o == 4 ? INT32_MAX / 2 : val(g, seq, i);
						uint32_t be = htonl((uint32_t)x);

						memcpy(pay[g] + 4 * i, &be, 4);
					}
				}
				send_msg(&c, (uint16_t)g, &H[g], CAIS_TYPE_DATA, (uint8_t)g, dt,
					 pay[g], plen, 0, 0);
			}
			assert_int_equal(E->n_cap, 6);
			fref = take_payload(0, CAIS_TYPE_RESULT, ref, plen);
			tenv_clear(E);
			for (unsigned int leaf = 0; leaf < 2; leaf++) {
				c.session = (uint16_t)(73 + leaf);
				for (unsigned int r = 0; r < 3; r++)
					send_msg(&c, (uint16_t)(3 * leaf + r), &H[3 * leaf + r],
						 CAIS_TYPE_DATA, (uint8_t)(3 * leaf + r), dt,
						 pay[3 * leaf + r], plen, 0, 0);
				assert_int_equal(E->n_cap, 1);
				fup[leaf] =
				    take_payload(SP_PORT, CAIS_TYPE_DATA, leaf ? pb : pa, p64);
				tenv_clear(E);
			}
			/* a leaf's OVERFLOW is its DATA's (BLOCK16 exponents), not FIXED32's sum */
			assert_int_equal(fup[0], w && o == 4 ? CAIS_F_OVERFLOW : 0);
			c.session = 75;
			send_msg(&c, 6, &H[6], CAIS_TYPE_DATA, 0, CAIS_DT_PARTIAL64, pa, p64,
				 fup[0], 0);
			send_msg(&c, 7, &H[7], CAIS_TYPE_DATA, 1, CAIS_DT_PARTIAL64, pb, p64,
				 fup[1], 0);
			assert_int_equal(E->n_cap, 2);
			fsp = take_payload(6, CAIS_TYPE_RESULT, sp, plen);
			assert_int_equal(
			    ((const struct cais_hdr *)(E->cap[0].data + CAIS_FRAME_HDR_OFF))->dtype,
			    dt);
			tenv_clear(E);
			assert_memory_equal(sp, ref, plen);
			if (fsp != fref)
				fail_msg("w %u o %u: spine flags %#x, one switch %#x", w, o, fsp,
					 fref);
			assert_int_equal(!!(fref & CAIS_F_OVERFLOW), o == 4);
			/* the spine's RESULT through leaf A: the same bits to its ranks */
			c.session = 73;
			send_msg(&c, SP_PORT, &SP, CAIS_TYPE_RESULT, CAIS_RANK_NONE, dt, sp, plen,
				 fsp, 0);
			assert_int_equal(E->n_cap, 3);
			for (unsigned int r = 0; r < 3; r++) {
				assert_int_equal(take_payload(r, CAIS_TYPE_RESULT, pa, plen), fsp);
				assert_memory_equal(pa, ref, plen);
			}
			tenv_clear(E);
		}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_slot_owner),
	    cmocka_unit_test_setup_teardown(t_orders, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_duplicates, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_loss_retx, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_ack_budget, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_query_flows, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_lost_result, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_wait_nack, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_stale, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_wrap_alternation, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_saturation, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_max_min_avg, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_inconsistent, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_burst_tensors, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_world_one, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_kept_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_jumbo, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_arp, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_rx_loss, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_l2, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_handoff, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_mode_lease, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_tx_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_session_readd, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_priority, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_congested, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_b16_ops, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_b16_jumbo, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_b16_orders, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_b16_rejects, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_b16_dtype_change, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_b16_overflow, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_b16_handoff, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_uplink, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_uplink_query_older, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_uplink_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_tree_bits, setup, teardown),
	};

	memcpy(SP.mac, (const uint8_t[6]){0x02, 0, 0, 0, 0, 0xc8}, 6);
	SP.ip = htonl(0x0A0000C8);
	SP.port = CAIS_UDP_PORT;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
