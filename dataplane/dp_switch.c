/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch's lifecycle (its pools, RCU state, tables, MAC table and lcore
 * contexts) and the settings its data lcores read: mode, lease, thresholds.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "dp_rcu.h"
#include "dp_switch.h"

static struct rte_mempool *
pool_create(const struct dp_switch_conf *c, const char *what, unsigned int n, unsigned int data)
{
	char name[RTE_MEMPOOL_NAMESIZE];

	snprintf(name, sizeof(name), "%s_%s", c->name, what);
	/* a cache may hold at most n / 1.5 mbufs */
	return rte_pktmbuf_pool_create(name, n, RTE_MIN((unsigned int)DP_MBUF_CACHE, n / 4), 0,
				       (uint16_t)(data + RTE_PKTMBUF_HEADROOM), c->socket);
}

static int
lcores_create(struct dp_switch *sw, const struct dp_switch_conf *c)
{
	unsigned int i;

	sw->lcores = rte_zmalloc_socket("dp_lcores", sizeof(struct dp_lcore) * c->n_lcores,
					RTE_CACHE_LINE_SIZE, c->socket);
	if (!sw->lcores)
		return -ENOMEM;
	for (i = 0; i < c->n_lcores; i++) {
		struct dp_lcore *lc = &sw->lcores[i];
		char name[RTE_RING_NAMESIZE];

		lc->sw = sw;
		lc->idx = i;
		lc->keep_ok = true;
		lc->lcore_id = c->lcore_ids[i];
		lc->out = rte_zmalloc_socket("dp_handoff", sizeof(*lc->out) * c->n_lcores,
					     RTE_CACHE_LINE_SIZE, c->socket);
		if (!lc->out)
			return -ENOMEM;
		if (c->n_lcores > 1) {
			snprintf(name, sizeof(name), "%s_ho%u", c->name, i);
			lc->ring = rte_ring_create(name, DP_HANDOFF_RING, c->socket, RING_F_SC_DEQ);
			if (!lc->ring)
				return -rte_errno;
		}
	}
	return 0;
}

/* Normal-class packets a TX buffer takes: what the high class's share leaves. */
static uint16_t
normal_cap(unsigned int high_share)
{
	unsigned int share = high_share ? high_share : DP_DEFAULT_HIGH_SHARE;
	uint16_t cap;

	if (share > DP_MAX_HIGH_SHARE)
		share = DP_MAX_HIGH_SHARE;
	cap = (uint16_t)(DP_TX_BUF * (100 - share) / 100);
	return cap ? cap : 1;
}

/* What the data lcores read, from the configuration. */
static void
settings_init(struct dp_switch *sw, const struct dp_switch_conf *c)
{
	sw->pcfg.agg_enabled = c->agg_enabled;
	sw->pcfg.unguarded = c->unguarded;
	sw->pcfg.agg_ip = c->agg_ip;
	memcpy(sw->pcfg.agg_mac, c->agg_mac.addr_bytes, 6);
	sw->pcfg.udp_port = rte_cpu_to_be_16(c->udp_port);
	sw->n_ports = c->n_ports;
	sw->n_lcores = c->n_lcores;
	sw->lc_div = rte_reciprocal_value(c->n_lcores);
	sw->hz = rte_get_tsc_hz();
	sw->idle_sleep_us = c->idle_sleep_us;
	sw->rx_loss = (uint32_t)((uint64_t)c->rx_loss_pct * 4294967296ull / 100);
	sw->start_tsc = rte_rdtsc();
	sw->agg = c->agg ? c->agg : dp_agg_best();
	sw->tx = c->tx;
	sw->tx_ctx = c->tx_ctx;
	sw->mode = DP_MODE_COMPUTE;
	sw->queue_depth_threshold = DP_DEFAULT_QUEUE_DEPTH;
	sw->normal_cap = normal_cap(c->high_share);
}

static int
tables_init(struct dp_switch *sw, const struct dp_switch_conf *c)
{
	struct dp_tables_conf tc = {
	    .name = c->name,
	    .socket = c->socket,
	    .n_lcores = c->n_lcores,
	    .rcu = sw->rcu,
	    .agg = &sw->pcfg,
	    .slot_capacity = c->slot_capacity,
	    .slot_mem = c->slot_mem,
	};

	return dp_tables_init(&sw->tables, &tc);
}

struct dp_switch *
dp_switch_create(const struct dp_switch_conf *c)
{
	struct dp_switch *sw;
	uint32_t age_s;

	if (c->n_lcores == 0 || c->n_lcores > RTE_MAX_LCORE || c->n_ports > DP_MAX_PORTS ||
	    !c->name) {
		rte_errno = EINVAL;
		return NULL;
	}
	sw = rte_zmalloc_socket("dp_switch", sizeof(*sw), RTE_CACHE_LINE_SIZE, c->socket);
	if (!sw) {
		rte_errno = ENOMEM;
		return NULL;
	}
	settings_init(sw, c);
	sw->pool = pool_create(c, "pkt", c->mbufs ? c->mbufs : DP_MBUFS,
			       c->mbuf_data ? c->mbuf_data : DP_MBUF_DATA);
	sw->hdr_pool =
	    pool_create(c, "hdr", c->hdr_mbufs ? c->hdr_mbufs : DP_HDR_MBUFS, DP_HDR_MBUF_DATA);
	sw->rcu = dp_rcu_create(c->n_lcores, c->socket);
	sw->l2 = rte_zmalloc_socket("dp_l2", sizeof(*sw->l2), RTE_CACHE_LINE_SIZE, c->socket);
	if (!sw->pool || !sw->hdr_pool || !sw->rcu || !sw->l2 || tables_init(sw, c) != 0 ||
	    lcores_create(sw, c) != 0) {
		dp_switch_free(sw);
		rte_errno = ENOMEM;
		return NULL;
	}
	age_s = c->mac_age_s ? c->mac_age_s : DP_L2_DEFAULT_AGE_S;
	dp_l2_init(sw->l2, (uint64_t)age_s * sw->hz);
	return sw;
}

void
dp_switch_free(struct dp_switch *sw)
{
	if (!sw)
		return;
	if (sw->tables.tensors)
		dp_tables_fini(&sw->tables);
	if (sw->lcores) {
		for (unsigned int i = 0; i < sw->n_lcores; i++) {
			rte_ring_free(sw->lcores[i].ring);
			rte_free(sw->lcores[i].out);
		}
		rte_free(sw->lcores);
	}
	dp_rcu_free(sw->rcu);
	rte_free(sw->l2);
	rte_mempool_free(sw->pool);
	rte_mempool_free(sw->hdr_pool);
	rte_free(sw);
}

void
dp_mode_set(struct dp_switch *sw, enum dp_mode mode)
{
	if (mode == DP_MODE_COMPUTE) {
		__atomic_store_n(&sw->held, false, __ATOMIC_RELAXED);
		/* before the mode: an expiry seen in between fails its exchange */
		__atomic_store_n(&sw->lease_deadline, 0, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&sw->held, true, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&sw->mode, (int)mode, __ATOMIC_RELEASE);
}

void
dp_lease(struct dp_switch *sw, uint32_t ttl_ms)
{
	uint64_t deadline = rte_rdtsc() + (uint64_t)ttl_ms * sw->hz / 1000;

	__atomic_store_n(&sw->lease_deadline, deadline, __ATOMIC_RELEASE);
	if (!__atomic_load_n(&sw->held, __ATOMIC_RELAXED))
		__atomic_store_n(&sw->mode, DP_MODE_COMPUTE, __ATOMIC_RELEASE);
}

void
dp_lease_check(struct dp_switch *sw, uint64_t now)
{
	uint64_t deadline = __atomic_load_n(&sw->lease_deadline, __ATOMIC_ACQUIRE);

	if (deadline && (int64_t)(now - deadline) > 0 &&
	    __atomic_load_n(&sw->mode, __ATOMIC_RELAXED) == DP_MODE_COMPUTE) {
		/* only this expiry may switch modes: a renewal in between wins */
		if (__atomic_compare_exchange_n(&sw->lease_deadline, &deadline, 0, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			__atomic_store_n(&sw->mode, DP_MODE_FWD_ONLY, __ATOMIC_RELEASE);
	}
}

void
dp_thresholds_set(struct dp_switch *sw, const struct dp_thresholds *t)
{
	if (t->has_queue_depth)
		__atomic_store_n(&sw->queue_depth_threshold, t->queue_depth, __ATOMIC_RELAXED);
	if (t->has_slot_usage)
		dp_tables_set_slot_usage(&sw->tables, t->slot_usage);
}
