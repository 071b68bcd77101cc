/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pipeline's first stage, a data lcore's poll loop: packets come from
 * the lcore's RX queues (rte_eth_rx_burst) and from its handoff ring (DATA
 * for slots it owns, received by other lcores). A burst from the RX queues
 * is parsed (dp_parse.c), its source MACs learned (dp_l2.c), and each
 * packet goes on by class: ARP and L2 to dp_fwd.c, DATA and a spine's
 * answers (E9) to the match (dp_match.c), malformed frames to a counted
 * drop. Handed-over packets go straight to the match. Once per poll
 * everything queued leaves (dp_tx.c) and the lcore passes an RCU quiescent
 * point (dp_rcu.h). An lcore whose queues stay empty sleeps in short steps
 * (idle()), unless the switch busy-polls.
 */
#include <sys/prctl.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "dp_frame.h"
#include "dp_pipeline.h"
#include "dp_rcu.h"

/* --rx-loss (tests, benchmarks): a 32-bit random number from the lcore's xorshift64. */
static inline uint32_t
loss_draw(struct dp_lcore *lc)
{
	uint64_t x = lc->loss_rng ? lc->loss_rng : 0x9E3779B97F4A7C15ull + lc->idx;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	lc->loss_rng = x;
	return (uint32_t)(x >> 32);
}

/*
 * Whether --rx-loss drops m: a share of the frames received, at random, but
 * never ARP. Linux asks again for an address only a second after its
 * request went unanswered and drops what it queued beyond a few packets
 * meanwhile, so a lost request would make a host's flow look silent (E6)
 * for reasons of the kernel's neighbour timer, not of the protocol.
 */
static inline bool
rx_lost(struct dp_lcore *lc, const struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	if (m->data_len >= CAIS_ETH_HLEN && f[12] == (DP_ETHERTYPE_ARP >> 8) &&
	    f[13] == (DP_ETHERTYPE_ARP & 0xff))
		return false;
	return loss_draw(lc) < lc->sw->rx_loss;
}

/* One received packet: count, parse, learn, and on by class. */
static inline void
input_one(struct dp_lcore *lc, struct rte_mbuf *m)
{
	struct dp_switch *sw = lc->sw;
	uint16_t port = m->port;
	const uint8_t *f;
	struct dp_parsed p;

	if (unlikely(port >= sw->n_ports))
		return dp_drop(lc, m, DP_DROP_BAD_PORT);
	if (unlikely(sw->rx_loss) && rx_lost(lc, m))
		return dp_drop(lc, m, DP_DROP_RX_LOSS);
	lc->port[port].rx_pkts++;
	lc->port[port].rx_bytes += m->pkt_len;
	if (unlikely(m->nb_segs != 1))
		return dp_drop(lc, m, DP_DROP_MULTISEG);
	f = rte_pktmbuf_mtod(m, const uint8_t *);
	dp_parse(f, m->data_len, &sw->pcfg, &p);
	if (likely(dp_parse_learn(&p)))
		dp_l2_learn(sw->l2, f + 6, port, lc->now);
	switch (p.cls) {
	case DP_CLASS_DATA:
		lc->c.data_rx++;
		return dp_match_data(lc, m);
	case DP_CLASS_ANSWER:
		return dp_match_answer(lc, m);
	case DP_CLASS_L2:
		return dp_fwd_l2(lc, m);
	case DP_CLASS_ARP_AGG:
		return dp_fwd_arp(lc, m);
	default:
		return dp_drop(lc, m, p.drop);
	}
}

/* A packet another lcore handed over: its slot is this lcore's (dp_match.c). */
static inline void
owned_one(struct dp_lcore *lc, struct rte_mbuf *m)
{
	if (likely(cais_hdr_type(dp_mbuf_cais(m)) == CAIS_TYPE_DATA))
		dp_match_data(lc, m);
	else
		dp_match_answer(lc, m);
}

/*
 * A burst through one(), prefetching mbufs DP_PREFETCH_MBUF and frames
 * DP_PREFETCH_FRAME packets ahead (the frames of a handed-over burst sit in
 * another core's cache as the NIC's sit in memory).
 */
static __rte_always_inline void
burst(struct dp_lcore *lc, struct rte_mbuf **pkts, uint16_t n,
      void (*one)(struct dp_lcore *, struct rte_mbuf *))
{
	lc->now = rte_rdtsc();
	lc->last_tensor = NULL;
	dp_lcore_prefetch_first(pkts, n);
	for (uint16_t i = 0; i < n; i++) {
		dp_lcore_prefetch_ahead(pkts, i, n);
		one(lc, pkts[i]);
	}
}

void
dp_lcore_input(struct dp_lcore *lc, struct rte_mbuf **pkts, uint16_t n)
{
	burst(lc, pkts, n, input_one);
}

void
dp_lcore_input_owned(struct dp_lcore *lc, struct rte_mbuf **pkts, uint16_t n)
{
	burst(lc, pkts, n, owned_one);
}

/*
 * Packets waiting for this lcore: what its RX queues hold where the PMD says
 * (read every few polls), else a lower bound from the polls that filled every
 * burst in a row; plus its handoff ring.
 */
static void
queue_depth(struct dp_lcore *lc, bool full, unsigned int iter)
{
	uint32_t d = lc->ring ? rte_ring_count(lc->ring) : 0;

	lc->full_streak = full ? (lc->full_streak < 65535 ? lc->full_streak + 1 : 65535) : 0;
	if (lc->rx_count_ok) {
		if (iter % DP_QDEPTH_EVERY)
			return;
		for (uint16_t q = 0; q < lc->n_rxq; q++) {
			int n = rte_eth_rx_queue_count(lc->rxq[q].port, lc->rxq[q].queue);

			d += n > 0 ? (uint32_t)n : 0;
		}
	} else {
		/* a backlog no deeper than the queues themselves */
		uint32_t est = lc->full_streak * DP_BURST, cap = (uint32_t)lc->n_rxq * DP_RX_DESC;

		d += est < cap ? est : cap;
	}
	lc->qdepth = d;
}

/* One poll of every RX queue; *full: whether every burst came back full. @return packets */
static unsigned int
poll_rx(struct dp_lcore *lc, bool *full)
{
	struct rte_mbuf *pkts[DP_BURST];
	unsigned int got = 0;

	*full = lc->n_rxq > 0;
	for (uint16_t q = 0; q < lc->n_rxq; q++) {
		uint16_t n = rte_eth_rx_burst(lc->rxq[q].port, lc->rxq[q].queue, pkts, DP_BURST);

		if (n)
			dp_lcore_input(lc, pkts, n);
		*full &= n == DP_BURST;
		got += n;
	}
	return got;
}

/* @return packets */
static unsigned int
poll_handoffs(struct dp_lcore *lc)
{
	struct rte_mbuf *pkts[DP_BURST];
	unsigned int n = rte_ring_dequeue_burst(lc->ring, (void **)pkts, DP_BURST, NULL);

	if (n)
		dp_lcore_input_owned(lc, pkts, (uint16_t)n);
	return n;
}

/*
 * Idle-aware polling (dp_config.h DP_IDLE_*): after `empty` polls in a row
 * found nothing, sleep 1 us doubling per poll up to the switch's bound. The
 * lcore stays an RCU reader: it passed a quiescent point before, and a
 * grace period waits at most one sleep for it.
 */
static void
idle(struct dp_lcore *lc, unsigned int empty)
{
	unsigned int k = empty - DP_IDLE_SPIN;
	uint32_t us = k < 14 ? 1u << k : 1u << 14;
	uint64_t t0 = rte_rdtsc();

	if (us > lc->sw->idle_sleep_us)
		us = lc->sw->idle_sleep_us;
	rte_delay_us_sleep(us);
	lc->c.idle_sleeps++;
	lc->c.idle_tsc += rte_rdtsc() - t0;
}

/* Whether PMDs tell every RX queue's occupancy (else queue_depth() estimates it). */
static bool
rx_count_ok(const struct dp_lcore *lc)
{
	for (uint16_t q = 0; q < lc->n_rxq; q++)
		if (rte_eth_rx_queue_count(lc->rxq[q].port, lc->rxq[q].queue) < 0)
			return false;
	return lc->n_rxq > 0;
}

int
dp_lcore_run(void *arg)
{
	struct dp_lcore *lc = arg;
	struct dp_switch *sw = lc->sw;
	const uint64_t period = sw->hz * DP_PERIODIC_US / 1000000;
	uint64_t next = rte_rdtsc() + period;
	unsigned int iter = 0, empty = 0;

	dp_rcu_online(sw->rcu, lc->idx);
	lc->rx_count_ok = rx_count_ok(lc);
	/* sleeps of a few us must not be rounded up to the default 50 us slack */
	if (sw->idle_sleep_us)
		prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	while (!__atomic_load_n(&sw->quit, __ATOMIC_RELAXED)) {
		bool full;
		unsigned int got = poll_rx(lc, &full);

		queue_depth(lc, full, ++iter);
		if (lc->ring)
			got += poll_handoffs(lc);
		dp_lcore_flush(lc);
		dp_rcu_quiescent(sw->rcu, lc->idx);
		empty = got ? 0 : empty < DP_IDLE_SPIN + 32 ? empty + 1 : empty;
		if (empty > DP_IDLE_SPIN && sw->idle_sleep_us)
			idle(lc, empty);
		if (lc->idx == 0) {
			uint64_t now = rte_rdtsc();

			if ((int64_t)(now - next) >= 0) {
				next = now + period;
				dp_lease_check(sw, now);
				if (sw->periodic)
					sw->periodic(sw, sw->periodic_arg);
			}
		}
	}
	dp_lcore_flush(lc);
	dp_rcu_offline(sw->rcu, lc->idx);
	return 0;
}
