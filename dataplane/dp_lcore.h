/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A data lcore: its private state (TX buffers, handoff staging, counters,
 * REJECT buckets) and the entry points of the pipeline.
 *
 * dp_lcore_run() polls the lcore's RX queues and its handoff ring;
 * dp_lcore_input() runs one burst through parse -> ARP/L2 or match ->
 * action -> output (the files in that order: dp_pipeline.h). Tests and
 * benchmarks call dp_lcore_input() and dp_lcore_flush() directly, with a
 * TX function that captures what would be sent (struct dp_switch_conf.tx).
 *
 * Slot ownership: an lcore that receives DATA for a slot another lcore owns
 * (dp_table.h) hands the packet to the owner over the owner's ring, in
 * batches flushed once per poll.
 */
#ifndef DP_LCORE_H
#define DP_LCORE_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <cais/proto.h>

#include "dp_config.h"
#include "dp_parse.h"

struct dp_switch;
struct dp_tensor;
struct rte_ring;

/** Packets waiting for one TX queue of one port. */
struct dp_txbuf {
	uint16_t n;
	struct rte_mbuf *m[DP_TX_BUF];
};

/** Packets bound for one owner lcore, collected during a burst. */
struct dp_handoff {
	uint16_t n;
	struct rte_mbuf *m[DP_BURST];
};

/** Per-port counters of one lcore. */
struct dp_port_counters {
	uint64_t rx_pkts, rx_bytes;
	uint64_t tx_pkts, tx_bytes, tx_dropped;
};

/** Switch-wide counters of one lcore. */
struct dp_lcore_counters {
	uint64_t drops[DP_DROP_MAX];
	uint64_t rejects[CAIS_R_MAX]; /**< REJECTs sent, by reason */
	uint64_t arp_replies;
	uint64_t l2_forwarded;
	uint64_t l2_flooded;
	uint64_t data_rx; /**< CAIS DATA parsed */
	uint64_t handoffs;
	uint64_t idle_sleeps;  /**< sleeps of the idle-aware poll loop */
	uint64_t idle_tsc;     /**< TSC cycles spent in them */
	uint64_t acks;	       /**< ACKs sent (docs/PROTOCOL.md E6) */
	uint64_t acks_limited; /**< ACKs the per-sender budget held back */
	uint64_t nacks;	       /**< NACKs sent (docs/PROTOCOL.md E11) */
	uint64_t queries;      /**< QUERYs taken (docs/PROTOCOL.md E12) */
	uint64_t keep_refused; /**< DATA a round could not keep: the packet pool low (DP_KEEP_*) */
};

/** Token bucket of the REJECT (or ACK) receivers that hash to one entry (see DP_RL_*). */
struct dp_rl {
	uint64_t credit; /**< TSC cycles of credit, capped at one second */
	uint64_t last;	 /**< TSC of the last refill; 0: never used */
};

/** One data lcore. */
struct dp_lcore {
	struct dp_switch *sw;
	unsigned int idx; /**< 0..n_lcores-1: slot owner index, TX queue, RCU reader */
	unsigned int lcore_id;
	uint16_t n_rxq;
	struct {
		uint16_t port;
		uint16_t queue;
	} rxq[DP_MAX_RXQ_PER_LCORE];
	struct rte_ring *ring;	/**< handoff input; NULL with one lcore */
	struct dp_handoff *out; /**< n_lcores staging areas */
	uint64_t now;		/**< TSC at the start of the burst */
	/**
	 * The last tensor the match looked up in this burst (key and entry):
	 * a burst's DATA mostly name one tensor. Valid for the burst only
	 * (dp_lcore_input() clears it), inside the lcore's RCU read side.
	 */
	uint64_t last_key;
	const struct dp_tensor *last_tensor;
	uint16_t n_free;
	bool keep_ok;	  /**< the packet pool is half free: DATA may be kept (DP_KEEP_*) */
	uint32_t flushes; /**< dp_lcore_flush() calls, for the DP_KEEP_CHECK period */
	struct rte_mbuf *free[2 * DP_BURST];
	struct dp_txbuf tx[DP_MAX_PORTS];    /**< normal class: REJECT, ARP, L2, normal RESULTs */
	struct dp_txbuf tx_hi[DP_MAX_PORTS]; /**< RESULTs of high-priority sessions: sent first */
	uint32_t qdepth;		     /**< packets waiting for this lcore (estimate) */
	uint32_t full_streak;		     /**< consecutive polls that filled every burst */
	bool rx_count_ok;		     /**< the PMD reports RX queue occupancy */
	uint64_t loss_rng;		     /**< --rx-loss's xorshift64 state */
	struct dp_lcore_counters c;
	struct dp_port_counters port[DP_MAX_PORTS];
	struct dp_rl rl[DP_RL_ENTRIES];	    /**< REJECT budgets */
	struct dp_rl rl_ack[DP_RL_ENTRIES]; /**< ACK budgets, apart: ACKs never eat REJECTs' */
} __rte_cache_aligned;

/** The poll loop of a data lcore (an lcore_function_t); returns when sw->quit is set. */
int dp_lcore_run(void *lcore);

/** The first DP_PREFETCH_BYTES of m's frame into the cache. */
static inline void
dp_lcore_prefetch_frame(const struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	unsigned int len = m->data_len < DP_PREFETCH_BYTES ? m->data_len : DP_PREFETCH_BYTES;

	for (unsigned int off = 0; off < len; off += RTE_CACHE_LINE_SIZE)
		rte_prefetch0(f + off);
}

/**
 * The RX loop's prefetches (dp_lcore_input()), which bench_pipeline's
 * kernel baseline makes too: dp_lcore_prefetch_first() before the burst
 * pkts[0..n), the mbufs and frames of its first packets, and
 * dp_lcore_prefetch_ahead() before packet i, the mbuf DP_PREFETCH_MBUF
 * and the frame DP_PREFETCH_FRAME packets ahead.
 */
static inline void
dp_lcore_prefetch_first(struct rte_mbuf *const *pkts, unsigned int n)
{
	for (unsigned int j = 0; j < n && j < DP_PREFETCH_MBUF; j++)
		rte_prefetch0(pkts[j]);
	for (unsigned int j = 0; j < n && j < DP_PREFETCH_FRAME; j++)
		dp_lcore_prefetch_frame(pkts[j]);
}

static inline void
dp_lcore_prefetch_ahead(struct rte_mbuf *const *pkts, unsigned int i, unsigned int n)
{
	if (i + DP_PREFETCH_MBUF < n)
		rte_prefetch0(pkts[i + DP_PREFETCH_MBUF]);
	if (i + DP_PREFETCH_FRAME < n)
		dp_lcore_prefetch_frame(pkts[i + DP_PREFETCH_FRAME]);
}

/** Run one burst received on the lcore's RX queues through the pipeline. */
void dp_lcore_input(struct dp_lcore *lc, struct rte_mbuf **pkts, uint16_t n);

/** Run packets handed over by other lcores (DATA for slots this lcore owns). */
void dp_lcore_input_owned(struct dp_lcore *lc, struct rte_mbuf **pkts, uint16_t n);

/**
 * Send the TX buffers and handoffs, free the dropped mbufs; once per poll
 * iteration. Every DP_KEEP_CHECK calls, dp_lcore_keep_check().
 */
void dp_lcore_flush(struct dp_lcore *lc);

/** Whether rounds may keep DATA now (DP_KEEP_*): the packet pool half free, sw->no_keep off. */
void dp_lcore_keep_check(struct dp_lcore *lc);

#endif /* DP_LCORE_H */
