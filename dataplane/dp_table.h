/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The match tables: sessions (tenant, session) -> members, n, S, E,
 * priority, with their slot arrays; tensors (tenant, session, tensor) ->
 * session, op, wire dtype, scale. What session.add/del and tensor.add/del
 * change.
 *
 * The tensor table is an rte_hash with lock-free readers: the data lcores
 * look entries up (dp_tensor_lookup()) without a lock, inside their RCU
 * read side (dp_rcu.h). The control side, one writer at a time under the
 * tables' lock, publishes only fully built entries and frees removed ones
 * after a grace period in which every data lcore has passed a quiescent
 * point. The list of sessions is the control side's alone. The data path
 * takes no lock and allocates nothing here.
 *
 * Slot ownership: slot index i of a session belongs to data lcore
 * (i mod n_lcores), which keeps the slot's state, accumulator and kept
 * DATA in its part of the session (struct dp_session_part): no two lcores
 * write one slot. Kept DATA still in a removed session's slots go back to
 * their pools when it is freed.
 */
#ifndef DP_TABLE_H
#define DP_TABLE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/queue.h>

#include <rte_common.h>
#include <rte_hash.h>

#include <cais/proto.h>

#include "cmn_hist.h"
#include "dp_config.h"
#include "dp_parse.h"
#include "dp_slot.h"

struct rte_mbuf;
struct rte_rcu_qsbr;

/** Session priority classes: RESULTs of high-priority sessions leave first. */
enum dp_prio { DP_PRIO_NORMAL = 0, DP_PRIO_HIGH = 1 };

/** A member of a session as session.add gives it. */
struct dp_member_conf {
	uint8_t mac[6];
	uint32_t ip;	 /**< network order */
	uint16_t port;	 /**< UDP port, host order */
	int16_t sw_port; /**< the switch port it sits behind; -1: pinned by its first DATA */
	uint8_t ports;	 /**< UDP ports port..port+ports-1, one per flow (E7); 1..16 */
};

/**
 * A leaf's uplink (docs/PROTOCOL.md E9): the spine switch whose session of
 * the same (tenant, session) this switch's complete rounds join as rank
 * `rank`, from the aggregator's own address and CAIS port.
 */
struct dp_uplink_conf {
	bool on;
	uint8_t mac[6];	  /**< the spine's aggregator MAC */
	uint32_t ip;	  /**< the spine's aggregator IPv4 address, network order */
	uint16_t port;	  /**< the spine's CAIS UDP port, host order */
	uint8_t rank;	  /**< this leaf's rank in the spine's session */
	uint16_t sw_port; /**< the switch port toward the spine */
};

/** A session's settings (session.add). */
struct dp_session_conf {
	uint16_t tenant;
	uint16_t session;
	uint16_t n;				       /**< world size 1..CAIS_MAX_WORLD */
	uint32_t slots;				       /**< pool size S, a power of two */
	uint16_t elems;				       /**< elements per packet E */
	uint8_t priority;			       /**< enum dp_prio */
	uint8_t first_rank; /**< its DATA's ranks are first_rank..first_rank+n-1 (E9) */
	bool loss_hints;    /**< WAIT and NACK to its members (docs/PROTOCOL.md E11) */
	struct dp_member_conf members[CAIS_MAX_WORLD]; /**< by rank - first_rank, n of them */
	struct dp_uplink_conf uplink;
};

/** A tensor's settings (tensor.add). */
struct dp_tensor_conf {
	uint16_t tenant;
	uint16_t session;
	uint32_t tensor;
	enum cais_redop op;
	uint8_t wire; /**< the DATA's wire dtype, CAIS_DT_* (E4): other dtypes get BAD_DTYPE */
	double scale; /**< what hosts scale by; the switch only keeps it */
};

/** Why a table operation refused, one line for the client. */
struct dp_err {
	char msg[DP_ERR_MSG];
};

/**
 * A member of a session: what its DATA must come from (docs/PROTOCOL.md E5:
 * IPv4 address, UDP port, source MAC, switch port) and how RESULTs address it.
 */
struct dp_member {
	uint8_t mac[6];
	uint32_t ip;   /**< network order */
	uint16_t port; /**< UDP port, network order: its first flow's */
	uint16_t port_h;  /**< the same, host order */
	uint16_t n_ports; /**< flows (E7): DATA from port..port+n_ports-1; slot s's RESULT to
			   * port + s mod n_ports */
	/**
	 * The switch port + 1 its DATA must arrive on, and its RESULTs leave by;
	 * 0 until its first DATA pins it (one compare-and-swap by whichever
	 * lcore sees that DATA first; never written again), unless session.add
	 * gave the port.
	 */
	uint32_t bound;
	/** Ethernet/IPv4/UDP toward the member; lengths and checksum set per packet. */
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
	uint64_t inconsistent;	/**< count, dtype or tensor differing from the round's */
	uint64_t slot_mismatch; /**< slot/set not matching seq */
	uint64_t spoofed;	/**< DATA with a member's address from another MAC or port */
	uint64_t abandoned;	/**< open rounds overwritten by a newer seq */
	uint64_t overflow;	/**< rounds completed with OVERFLOW */
	uint64_t up_tx;		/**< partial sums sent up (E9), resends included */
	uint64_t up_resent;	/**< of those, resends on a local rank's retransmission */
	uint64_t up_results;	/**< RESULTs from the spine that completed a round */
	uint64_t up_rejects;	/**< REJECTs from the spine, passed on to the local ranks */
	uint64_t rejects[CAIS_R_MAX];
	uint64_t hist[CMN_HIST_BUCKETS]; /**< round completion time, TSC cycles */
};

/** The slots of one session that one lcore owns. */
struct dp_session_part {
	struct dp_slot *slots; /**< n_local x 2 sets */
	int64_t *acc;	       /**< n_local x 2 x elems */
	/**
	 * n_local x 2 x keep: each open round's kept DATA mbufs by member
	 * (DP_KEEP_*, dp_action.c), NULL where none; NULL when keep is 0.
	 */
	struct rte_mbuf **kept;
	uint32_t n_local;
	/**
	 * Open rounds behind a complete one (WAIT, NACK: docs/PROTOCOL.md E11,
	 * dp_action.c): every open round here has a seq of at least older,
	 * once a round started.
	 */
	uint32_t older;
	bool started;
	struct dp_session_counters c;
} __rte_cache_aligned;

struct dp_tensor;

/** A leaf's uplink as the data path uses it (E9). */
struct dp_uplink {
	bool on;
	uint8_t rank;	  /**< its rank in the spine's session */
	uint16_t sw_port; /**< the switch port toward the spine */
	uint32_t ip;	  /**< the spine's address, network order: answers come from it */
	uint16_t port;	  /**< and its CAIS port, network order */
	uint8_t mac[6];
	/** Ethernet/IPv4/UDP from the aggregator to the spine; lengths set per packet. */
	uint8_t hdr[CAIS_FRAME_HDR_OFF];
};

/** A session entry: (tenant, session) -> members, n, S, E, priority. */
struct dp_session {
	uint16_t tenant;
	uint16_t session;
	uint16_t n;
	uint16_t elems;
	uint32_t pool;
	uint8_t priority;   /**< enum dp_prio */
	uint8_t first_rank; /**< DATA's rank r is member r - first_rank (a leaf's ranks, E9) */
	bool loss_hints;    /**< WAIT and NACK to its members (E11, dp_action.c) */
	uint16_t lanes_be;  /**< its RESULTs' reason field, network order: n_lcores with
			     * loss_hints, else 0 (E11) */
	uint16_t keep;	    /**< DATA kept per round: n, or 0 (dp_table.c keep_of()) */
	unsigned int n_lcores;
	struct dp_member *members;    /**< n, indexed by rank */
	struct dp_uplink up;	      /**< a leaf's spine (E9); up.on false elsewhere */
	struct dp_session_part *part; /**< n_lcores */
	LIST_ENTRY(dp_session) link;  /**< control side only */
	LIST_HEAD(, dp_tensor) tensors;
};

/** A tensor entry: (tenant, session, tensor) -> op, wire dtype, scale. */
struct dp_tensor {
	uint64_t key;
	struct dp_session *s;
	uint32_t tensor;
	uint8_t op;   /**< enum cais_redop */
	uint8_t wire; /**< the wire dtype its DATA must have, CAIS_DT_* */
	double scale;
	int32_t pos; /**< hash position returned on delete, freed after the grace period */
	LIST_ENTRY(dp_tensor) link; /**< control side only */
};

/** The tables of one switch. */
struct dp_tables {
	struct rte_hash *tensors; /**< dp_tensor_key() -> struct dp_tensor; lock-free readers */
	struct rte_rcu_qsbr *rcu; /**< the readers: the data lcores */
	unsigned int n_lcores;	  /**< a session's slots are spread over them */
	struct dp_parse_cfg agg;  /**< the aggregator's addresses, the source of RESULTs */

	/* Control side: everything below is under lock. */
	pthread_mutex_t lock;
	LIST_HEAD(, dp_session) sessions;
	unsigned int n_sessions;
	unsigned int n_tensors;
	uint32_t slot_capacity;
	uint32_t slots_used;
	uint64_t slot_mem_cap;	/**< bytes the sessions' slot arrays may take in all */
	uint64_t slot_mem_used; /**< bytes they take */
	double slot_usage_threshold; /**< session.add refuses pools beyond this share */
};

/** What dp_tables_init() needs. */
struct dp_tables_conf {
	const char *name; /**< prefix of the hash's name (unique per process) */
	int socket;
	unsigned int n_lcores;
	struct rte_rcu_qsbr *rcu;
	const struct dp_parse_cfg *agg;
	uint32_t slot_capacity; /**< 0: DP_DEFAULT_SLOT_CAPACITY */
	uint64_t slot_mem;	/**< bytes; 0: DP_DEFAULT_SLOT_MEM */
};

/**
 * Empty tables.
 * @return 0, or -ENOMEM (the hash could not be created)
 */
int dp_tables_init(struct dp_tables *t, const struct dp_tables_conf *c);

/** Free the tables and every entry in them. No data lcore may be reading. */
void dp_tables_fini(struct dp_tables *t);

/*
 * The table operations: each takes the lock; why (may be NULL) says why
 * they refused.
 */

/**
 * Add a session and its slot arrays.
 * @return 0; -EEXIST (the session exists); -EINVAL (a member uses the
 *         aggregator's IPv4 address or MAC); -ENOSPC (session table full, the
 *         pool would pass the slot-usage threshold or the slot memory
 *         bound, or no memory for it)
 */
int dp_session_add(struct dp_tables *t, const struct dp_session_conf *c, struct dp_err *why);

/**
 * Remove a session and its tensors; wait for a grace period and free them.
 * @return 0; -ENOENT (no such session)
 */
int dp_session_del(struct dp_tables *t, uint16_t tenant, uint16_t session, struct dp_err *why);

/**
 * Publish a tensor of a session.
 * @return 0; -EINVAL (a wire dtype the switch does not know); -ENOENT (no
 *         such session); -EEXIST (the tensor exists); -ENOSPC (tensor table
 *         full, or no memory)
 */
int dp_tensor_add(struct dp_tables *t, const struct dp_tensor_conf *c, struct dp_err *why);

/**
 * Unpublish a tensor; wait for a grace period and free it.
 * @return 0; -ENOENT (no such tensor in that session)
 */
int dp_tensor_del(struct dp_tables *t, uint16_t tenant, uint16_t session, uint32_t tensor,
		  struct dp_err *why);

/**
 * Bytes the slot arrays of a session of pool slots of elems elements take,
 * keeping keep DATA per round (DP_KEEP_*: n, or 0).
 */
uint64_t dp_session_mem(uint32_t pool, uint16_t elems, uint16_t keep, unsigned int n_lcores);

/** Set the share of the slot capacity (0..1) beyond which session.add refuses. */
void dp_tables_set_slot_usage(struct dp_tables *t, double share);

/** Hold the control side still (the sessions list, the counts) while reading it. */
static inline void
dp_tables_lock(struct dp_tables *t)
{
	pthread_mutex_lock(&t->lock);
}

static inline void
dp_tables_unlock(struct dp_tables *t)
{
	pthread_mutex_unlock(&t->lock);
}

/** The member index of a DATA's rank field (>= n: none; the match checks it). */
static inline uint8_t
dp_member_of(const struct dp_session *s, uint8_t rank)
{
	return (uint8_t)(rank - s->first_rank);
}

/** @return the tensor table key of a triple. */
static inline uint64_t
dp_tensor_key(uint16_t tenant, uint16_t session, uint32_t tensor)
{
	return (uint64_t)tenant << 48 | (uint64_t)session << 32 | tensor;
}

/**
 * Look up a tensor entry on a data lcore (inside its RCU read side).
 * @return the entry, or NULL
 */
static inline const struct dp_tensor *
dp_tensor_lookup(const struct dp_tables *t, uint64_t key)
{
	void *data;

	if (rte_hash_lookup_data(t->tensors, &key, &data) < 0)
		return NULL;
	return data;
}

#endif /* DP_TABLE_H */
