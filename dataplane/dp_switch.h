/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * cais-switch's shared state: the switch, its data lcores, and the match
 * tables (sessions, tensors) with their slot arrays.
 *
 * Data path: dp_lcore_run() polls the lcore's RX queues and its handoff
 * ring; dp_lcore_input() runs one burst through parse -> match -> action
 * -> TX. Tests and benchmarks call dp_lcore_input() directly, with a TX
 * function that captures what would be sent (struct dp_switch_conf.tx).
 *
 * Tables: the tensor table is an rte_hash keyed by (tenant, session,
 * tensor) with lock-free readers; the control side (one writer at a time,
 * under ctl_lock) publishes fully built entries and frees removed ones only
 * after an RCU (QSBR) grace period in which every data lcore has passed a
 * quiescent point. The data path takes no lock and allocates nothing but
 * mbufs.
 *
 * Slot ownership: slot index i of a session belongs to data lcore
 * (i mod n_lcores); an lcore that receives DATA for a slot it does not own
 * hands the packet to the owner over the owner's ring, once per burst.
 */
#ifndef DP_SWITCH_H
#define DP_SWITCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include <rte_common.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#include <cais/proto.h>

#include "cmn_hist.h"
#include "ctl.h"
#include "dp_agg.h"
#include "dp_config.h"
#include "dp_l2.h"
#include "dp_parse.h"
#include "dp_slot.h"

struct rte_hash;
struct rte_rcu_qsbr;
struct rte_ring;

/** A member of a session, as RESULTs address it. */
struct dp_member {
	struct rte_ether_addr mac;
	uint32_t ip;   /**< network order */
	uint16_t port; /**< UDP port, network order */
	/** Ethernet/IPv4/UDP toward the member; lengths and checksum patched per packet. */
	uint8_t hdr[CAIS_FRAME_HDR_OFF];
};

/** Per-session counters, one copy per lcore (no atomics on the data path). */
struct dp_session_counters {
	uint64_t data_rx;	/**< DATA accepted by the state machine */
	uint64_t rounds;	/**< rounds completed */
	uint64_t results_tx;	/**< RESULT copies queued for TX */
	uint64_t retx;		/**< DATA with the RETX flag */
	uint64_t resends;	/**< stored RESULTs unicast to a rank that lost one */
	uint64_t duplicates;	/**< contributions already counted */
	uint64_t stale;		/**< seq older than the round held */
	uint64_t inconsistent;	/**< count or tensor differing from the round's */
	uint64_t slot_mismatch; /**< slot/set not matching seq */
	uint64_t abandoned;	/**< open rounds overwritten by a newer seq */
	uint64_t overflow;	/**< rounds completed with OVERFLOW */
	uint64_t rejects[CAIS_R_MAX];
	uint64_t hist[CMN_HIST_BUCKETS]; /**< round completion time, TSC cycles */
};

/** The slots of one session that one lcore owns. */
struct dp_session_part {
	struct dp_slot *slots; /**< n_local x 2 sets */
	int64_t *acc;	       /**< n_local x 2 x elems */
	uint32_t n_local;
	struct dp_session_counters c;
} __rte_cache_aligned;

struct dp_tensor;

/** A session entry: (tenant, session) -> members, n, S, E, priority. */
struct dp_session {
	uint16_t tenant;
	uint16_t session;
	uint16_t n;
	uint16_t elems;
	uint32_t pool;
	uint8_t priority;
	unsigned int n_lcores;
	struct dp_member *members;    /**< n, indexed by rank */
	struct dp_session_part *part; /**< n_lcores */
	LIST_ENTRY(dp_session) link;  /**< control side only */
	LIST_HEAD(, dp_tensor) tensors;
};

/** A tensor entry: (tenant, session, tensor) -> op, scale. */
struct dp_tensor {
	uint64_t key;
	struct dp_session *s;
	uint32_t tensor;
	uint8_t op; /**< enum cais_redop */
	double scale;
	int32_t pos; /**< hash position returned on delete, freed after the grace period */
	LIST_ENTRY(dp_tensor) link; /**< control side only */
};

/** @return the tensor table key of a triple. */
static inline uint64_t
dp_tensor_key(uint16_t tenant, uint16_t session, uint32_t tensor)
{
	return (uint64_t)tenant << 48 | (uint64_t)session << 32 | tensor;
}

/** TX hook: returns how many of pkts it took (the rest are freed as TX drops). */
typedef uint16_t (*dp_tx_fn)(void *ctx, uint16_t port, uint16_t queue, struct rte_mbuf **pkts,
			     uint16_t n);

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
};

/** Token bucket of the REJECT receivers that hash to one entry (see DP_RL_*). */
struct dp_rl {
	uint32_t ip; /**< last sender seen here (for debugging) */
	uint16_t port;
	uint64_t credit; /**< TSC cycles of credit, capped at one second */
	uint64_t last;	 /**< TSC of the last refill; 0: never used */
};

struct dp_switch;

/** One data lcore. */
struct dp_lcore {
	struct dp_switch *sw;
	unsigned int idx; /**< 0..n_lcores-1: slot owner index and TX queue */
	unsigned int lcore_id;
	uint16_t n_rxq;
	struct {
		uint16_t port;
		uint16_t queue;
	} rxq[DP_MAX_RXQ_PER_LCORE];
	struct rte_ring *ring;	/**< handoff input */
	struct dp_handoff *out; /**< n_lcores staging areas */
	uint64_t now;		/**< TSC at the start of the burst */
	uint16_t n_free;
	struct rte_mbuf *free[2 * DP_BURST];
	struct dp_txbuf tx[DP_MAX_PORTS];    /**< normal class: REJECT, ARP, L2, normal RESULTs */
	struct dp_txbuf tx_hi[DP_MAX_PORTS]; /**< RESULTs of high-priority sessions: sent first */
	uint32_t qdepth;		     /**< packets waiting for this lcore (estimate) */
	uint32_t full_streak;		     /**< consecutive polls that filled every burst */
	bool rx_count_ok;		     /**< the PMD reports RX queue occupancy */
	struct dp_lcore_counters c;
	struct dp_port_counters port[DP_MAX_PORTS];
	struct dp_rl rl[DP_RL_ENTRIES];
} __rte_cache_aligned;

/** What dp_switch_create() needs. */
struct dp_switch_conf {
	bool agg_enabled;
	uint32_t agg_ip; /**< network order */
	struct rte_ether_addr agg_mac;
	uint16_t udp_port; /**< host order */
	uint16_t n_ports;
	unsigned int n_lcores;
	unsigned int lcore_ids[RTE_MAX_LCORE]; /**< for the TX queue and RCU thread ids */
	uint32_t slot_capacity;
	uint32_t mac_age_s;
	unsigned int mbufs;	/**< packet pool size */
	unsigned int mbuf_data; /**< packet mbuf data room (without headroom) */
	unsigned int hdr_mbufs; /**< header pool size */
	int socket;		/**< NUMA socket of the pools */
	const char *name;	/**< prefix of pool and table names (unique per process) */
	dp_tx_fn tx;		/**< NULL: rte_eth_tx_burst */
	void *tx_ctx;
	const struct dp_agg_kernels *agg; /**< NULL: dp_agg_best() */
	unsigned int high_share; /**< % of TX buffering reserved for high priority; 0: 30 */
};

/** Switch modes (values of ctl_mode). */
enum dp_mode { DP_MODE_COMPUTE = CTL_MODE_COMPUTE, DP_MODE_FWD_ONLY = CTL_MODE_FORWARD_ONLY };

struct dp_switch {
	struct dp_parse_cfg pcfg;
	uint16_t udp_port_be;
	uint16_t n_ports;
	unsigned int n_lcores;
	uint64_t hz;
	uint64_t start_tsc;
	const struct dp_agg_kernels *agg;
	struct rte_mempool *pool;
	struct rte_mempool *hdr_pool;
	struct rte_hash *tensors;
	struct rte_rcu_qsbr *rcu;
	dp_tx_fn tx;
	void *tx_ctx;
	struct dp_lcore *lcores; /**< n_lcores, cache aligned */
	uint16_t normal_cap;	 /**< normal-class packets a TX buffer takes before a flush */
	struct dp_l2 *l2;
	volatile bool quit;
	/** Called by data lcore 0 about every DP_PERIODIC_US (stats, signals); may be NULL. */
	void (*periodic)(struct dp_switch *sw, void *arg);
	void *periodic_arg;
	uint64_t periodic_tsc;
	int mode;		 /**< enum dp_mode, read by lcores every burst */
	uint64_t lease_deadline; /**< TSC; 0: no lease (static mode) */

	/* Control side: everything below is under ctl_lock. */
	pthread_mutex_t ctl_lock;
	LIST_HEAD(, dp_session) sessions;
	unsigned int n_sessions;
	uint32_t slot_capacity;
	uint32_t slots_used;
	uint32_t queue_depth_threshold; /**< above it RESULTs carry CONGESTED (read by lcores) */
	double slot_usage_threshold;
	unsigned int n_tensors;
	char name[32];
};

/**
 * Create a switch: pools, tables, RCU, MAC table, lcore contexts. Needs EAL;
 * does not touch ports.
 * @return the switch, or NULL with rte_errno set (ENOMEM, EINVAL)
 */
struct dp_switch *dp_switch_create(const struct dp_switch_conf *conf);

/** Free a switch and everything in its tables. Lcores must have stopped. */
void dp_switch_free(struct dp_switch *sw);

/** The table operations, for ctl_dispatch() and ctl_apply_file(). */
void dp_switch_ctl_ops(struct dp_switch *sw, struct ctl_ops *ops);

/* Table operations: each takes ctl_lock; 0 or -errno with err filled. */
int dp_session_add(struct dp_switch *sw, const struct ctl_session *s, struct ctl_err *err);
int dp_session_del(struct dp_switch *sw, uint16_t tenant, uint16_t session, struct ctl_err *err);
int dp_tensor_add(struct dp_switch *sw, const struct ctl_tensor *t, struct ctl_err *err);
int dp_tensor_del(struct dp_switch *sw, uint16_t tenant, uint16_t session, uint32_t tensor,
		  struct ctl_err *err);
int dp_lease(struct dp_switch *sw, uint32_t ttl_ms, struct ctl_err *err);
int dp_mode_set(struct dp_switch *sw, enum ctl_mode mode, struct ctl_err *err);
int dp_thresholds_set(struct dp_switch *sw, const struct ctl_thresholds *t, struct ctl_err *err);

/**
 * Look up a tensor entry on a data lcore (inside its RCU read side).
 * @return the entry or NULL
 */
const struct dp_tensor *dp_tensor_lookup(const struct dp_switch *sw, uint64_t key);

/** Write Ethernet/IPv4/UDP headers at p (lengths and checksum left for dp_frame_lengths()). */
void dp_frame_hdr(uint8_t *p, const uint8_t *dst_mac, const uint8_t *src_mac, uint32_t src_ip,
		  uint32_t dst_ip, uint16_t sport_be, uint16_t dport_be);

/** Set the IPv4 and UDP lengths of a frame carrying cais_bytes after UDP, and the IPv4 checksum. */
void dp_frame_lengths(uint8_t *frame, unsigned int cais_bytes);

/** Run one burst received on port through the pipeline (the lcore's own burst). */
void dp_lcore_input(struct dp_lcore *lc, struct rte_mbuf **pkts, uint16_t n);

/** Run packets handed over by other lcores (DATA for slots this lcore owns). */
void dp_lcore_input_owned(struct dp_lcore *lc, struct rte_mbuf **pkts, uint16_t n);

/** Flush TX buffers, handoffs and freed mbufs; called once per poll iteration. */
void dp_lcore_flush(struct dp_lcore *lc);

/** The poll loop of a data lcore (an lcore_function_t); returns when sw->quit is set. */
int dp_lcore_run(void *lcore);

/** Check the lease (called by one lcore per iteration): expiry -> forward-only. */
void dp_lease_check(struct dp_switch *sw, uint64_t now);

/** Register/unregister the calling thread as RCU reader idx (lcore loops and tests). */
void dp_rcu_online(struct dp_switch *sw, unsigned int idx);
void dp_rcu_offline(struct dp_switch *sw, unsigned int idx);
void dp_rcu_quiescent(struct dp_switch *sw, unsigned int idx);

/**
 * Counters of the whole switch as the stats.get result object: uptime, mode,
 * ports, drops and rejects by reason, per session rounds and the rest,
 * slot usage, completion-time percentiles. Takes ctl_lock.
 */
int dp_stats_json(struct dp_switch *sw, json_t *out);

/** Print the counters (testpmd-like) to f. */
void dp_stats_print(struct dp_switch *sw, FILE *f);

#endif /* DP_SWITCH_H */
