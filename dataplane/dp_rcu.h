/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Grace periods of the match tables (DPDK's QSBR RCU). The readers are the
 * data lcores, reader idx being lcore idx: each is online while it polls and
 * reports a quiescent point once per poll iteration, between bursts, when it
 * holds no table entry. The control side waits for a grace period
 * (dp_rcu_synchronize()) between unpublishing an entry and freeing it.
 */
#ifndef DP_RCU_H
#define DP_RCU_H

struct rte_rcu_qsbr;

/**
 * RCU state for n_readers readers.
 * @return the state, or NULL with rte_errno set (ENOMEM)
 */
struct rte_rcu_qsbr *dp_rcu_create(unsigned int n_readers, int socket);

/** Free what dp_rcu_create() made (NULL is fine). */
void dp_rcu_free(struct rte_rcu_qsbr *rcu);

/** Register the calling thread as reader idx and put it online (an lcore loop starts). */
void dp_rcu_online(struct rte_rcu_qsbr *rcu, unsigned int idx);

/** Take reader idx offline and unregister it (an lcore loop ends). */
void dp_rcu_offline(struct rte_rcu_qsbr *rcu, unsigned int idx);

/** Reader idx holds no table entry now. */
void dp_rcu_quiescent(struct rte_rcu_qsbr *rcu, unsigned int idx);

/** Wait until every online reader has passed a quiescent point. */
void dp_rcu_synchronize(struct rte_rcu_qsbr *rcu);

#endif /* DP_RCU_H */
