/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * cais-switch's data path: the switch, what its data lcores read (the
 * aggregator's addresses, the mode, the lease, the thresholds), and its
 * lifecycle. No control-plane types: requests reach it through dp_ctl.h.
 *
 * dp_switch_create() makes the mbuf pools, the RCU state (dp_rcu.h), the
 * match tables (dp_table.h), the MAC table (dp_l2.h) and a context per data
 * lcore (dp_lcore.h); the ports are main.c's.
 */
#ifndef DP_SWITCH_H
#define DP_SWITCH_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_ether.h>
#include <rte_reciprocal.h>

#include "dp_agg.h"
#include "dp_config.h"
#include "dp_l2.h"
#include "dp_lcore.h"
#include "dp_parse.h"
#include "dp_table.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_rcu_qsbr;

/** TX hook: returns how many of pkts it took (the rest are freed as TX drops). */
typedef uint16_t (*dp_tx_fn)(void *ctx, uint16_t port, uint16_t queue, struct rte_mbuf **pkts,
			     uint16_t n);

/** What dp_switch_create() needs. */
struct dp_switch_conf {
	bool agg_enabled;
	uint32_t agg_ip; /**< network order */
	struct rte_ether_addr agg_mac;
	uint16_t udp_port; /**< host order */
	uint16_t n_ports;
	unsigned int n_lcores;
	unsigned int lcore_ids[RTE_MAX_LCORE]; /**< for rte_eal_remote_launch() */
	uint32_t slot_capacity;
	uint64_t slot_mem; /**< bytes of slot arrays in all; 0: DP_DEFAULT_SLOT_MEM */
	uint32_t mac_age_s;
	unsigned int mbufs;	/**< packet pool size */
	unsigned int mbuf_data; /**< packet mbuf data room (without headroom) */
	unsigned int hdr_mbufs; /**< header pool size */
	int socket;		/**< NUMA socket of the pools */
	const char *name;	/**< prefix of pool and table names (unique per process) */
	dp_tx_fn tx;		/**< NULL: rte_eth_tx_burst */
	void *tx_ctx;
	const struct dp_agg_kernels *agg; /**< NULL: dp_agg_best() */
	unsigned int high_share; /**< % of TX buffering reserved for high priority; 0: default */
	bool unguarded;		 /**< the guards off (struct dp_parse_cfg): bench_pipeline only */
	uint32_t idle_sleep_us;	 /**< an idle lcore sleeps up to this long (dp_lcore.c); 0: busy polling */
	uint32_t rx_loss_pct;	 /**< tests, benchmarks: drop this share of received frames (0..99) */
};

/** Switch modes (mode.set; a lease that runs out sets forward-only). */
enum dp_mode { DP_MODE_COMPUTE, DP_MODE_FWD_ONLY };

/** thresholds.set: a value not given keeps its setting. */
struct dp_thresholds {
	bool has_queue_depth;
	bool has_slot_usage;
	uint32_t queue_depth; /**< packets */
	double slot_usage;    /**< 0..1 of the slot capacity */
};

struct dp_switch {
	/* Read by the data lcores on every packet. */
	struct dp_parse_cfg pcfg; /**< the aggregator's addresses */
	uint16_t n_ports;
	unsigned int n_lcores;
	struct rte_reciprocal lc_div; /**< divides by n_lcores: slot ownership (dp_slot_owner()) */
	uint64_t hz;
	uint32_t idle_sleep_us; /**< the longest sleep of an idle lcore; 0: busy polling */
	uint32_t rx_loss;	/**< tests, benchmarks: a received frame is dropped when a random
				 *   32-bit number falls below this (0: never) */
	const struct dp_agg_kernels *agg;
	struct rte_mempool *hdr_pool; /**< RESULT copies' headers, flood clones */
	dp_tx_fn tx;
	void *tx_ctx;
	struct dp_lcore *lcores; /**< n_lcores, cache aligned */
	uint16_t normal_cap;	 /**< normal-class packets a TX buffer takes before a flush */
	struct dp_l2 *l2;
	int mode;			/**< enum dp_mode: what the data path does */
	uint32_t queue_depth_threshold; /**< above it RESULTs carry CONGESTED */
	struct dp_tables tables;

	/* Read once per poll: quit by every data lcore, the rest by data lcore 0. */
	volatile bool quit;
	/** Called by data lcore 0 about every DP_PERIODIC_US (stats, signals); may be NULL. */
	void (*periodic)(struct dp_switch *sw, void *arg);
	void *periodic_arg;
	uint64_t lease_deadline; /**< TSC; 0: no lease (static mode, or ended by mode.set compute) */
	bool held;		 /**< mode.set forward_only holds: leases do not lift it */
	/** Rounds keep no DATA (DP_KEEP_*) from the next keep check on: bench_pipeline only. */
	bool no_keep;

	/* Set at creation. */
	uint64_t start_tsc;
	struct rte_mempool *pool; /**< packet mbufs, for the RX queues */
	struct rte_rcu_qsbr *rcu; /**< the data lcores are its readers */
};

/**
 * Create a switch: pools, RCU, tables, MAC table, lcore contexts. Needs EAL;
 * does not touch ports.
 * @return the switch, or NULL with rte_errno set (ENOMEM, EINVAL)
 */
struct dp_switch *dp_switch_create(const struct dp_switch_conf *conf);

/** Free a switch and everything in its tables. Lcores must have stopped. */
void dp_switch_free(struct dp_switch *sw);

/*
 * Mode and lease, one rule (docs/PROTOCOL.md E5): the switch is in
 * forward-only mode (DATA gets REJECT FWD_ONLY) while the operator holds it
 * there (mode.set forward_only, until mode.set compute) or while a lease has
 * run out (until the next lease or mode.set compute). mode.set compute also
 * ends the lease: the switch computes until a new lease arms one. The
 * control side calls these one at a time; dp_lease_check() runs beside them.
 */

/** mode.set: forward-only holds until compute; compute ends the lease. */
void dp_mode_set(struct dp_switch *sw, enum dp_mode mode);

/**
 * Grant or renew the lease: ttl_ms from now, then forward-only unless
 * renewed; compute mode again after an expiry (not after mode.set forward_only).
 */
void dp_lease(struct dp_switch *sw, uint32_t ttl_ms);

/** Check the lease (data lcore 0, periodically): once it has run out, forward-only. */
void dp_lease_check(struct dp_switch *sw, uint64_t now);

/** Set the thresholds given. */
void dp_thresholds_set(struct dp_switch *sw, const struct dp_thresholds *t);

#endif /* DP_SWITCH_H */
