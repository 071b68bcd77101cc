/* SPDX-License-Identifier: BSD-3-Clause */
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include "dp_rcu.h"

struct rte_rcu_qsbr *
dp_rcu_create(unsigned int n_readers, int socket)
{
	struct rte_rcu_qsbr *rcu = rte_zmalloc_socket("dp_rcu", rte_rcu_qsbr_get_memsize(n_readers),
						      RTE_CACHE_LINE_SIZE, socket);

	if (!rcu || rte_rcu_qsbr_init(rcu, n_readers) != 0) {
		rte_free(rcu);
		rte_errno = ENOMEM;
		return NULL;
	}
	return rcu;
}

void
dp_rcu_free(struct rte_rcu_qsbr *rcu)
{
	rte_free(rcu);
}

void
dp_rcu_online(struct rte_rcu_qsbr *rcu, unsigned int idx)
{
	rte_rcu_qsbr_thread_register(rcu, idx);
	rte_rcu_qsbr_thread_online(rcu, idx);
}

void
dp_rcu_offline(struct rte_rcu_qsbr *rcu, unsigned int idx)
{
	rte_rcu_qsbr_thread_offline(rcu, idx);
	rte_rcu_qsbr_thread_unregister(rcu, idx);
}

void
dp_rcu_quiescent(struct rte_rcu_qsbr *rcu, unsigned int idx)
{
	rte_rcu_qsbr_quiescent(rcu, idx);
}

void
dp_rcu_synchronize(struct rte_rcu_qsbr *rcu)
{
	rte_rcu_qsbr_synchronize(rcu, RTE_QSBR_THRID_INVALID);
}
