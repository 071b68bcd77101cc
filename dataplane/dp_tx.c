/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Output, the pipeline's last stage: what every other stage queued (TX
 * buffers per port and class, packets for other lcores, mbufs to free)
 * leaves here, when a buffer fills (dp_pipeline.h) and once per poll
 * (dp_lcore_flush(), from dp_lcore.c). Packets go to the port's TX queue
 * of this lcore (or the TX hook), and to the owner lcores' handoff rings,
 * where dp_lcore.c picks them up again. Every DP_KEEP_CHECK flushes the
 * lcore looks whether rounds may keep DATA (dp_config.h DP_KEEP_*): the
 * packet pool free enough.
 */
#include <rte_ethdev.h>
#include <rte_ring.h>

#include "dp_pipeline.h"

void
dp_free_flush(struct dp_lcore *lc)
{
	if (lc->n_free) {
		rte_pktmbuf_free_bulk(lc->free, lc->n_free);
		lc->n_free = 0;
	}
}

static void
tx_send(struct dp_lcore *lc, uint16_t port, struct dp_txbuf *b)
{
	struct dp_switch *sw = lc->sw;
	struct dp_port_counters *pc = &lc->port[port];
	uint64_t bytes = 0;
	uint16_t sent, i;

	for (i = 0; i < b->n; i++)
		bytes += b->m[i]->pkt_len;
	if (sw->tx)
		sent = sw->tx(sw->tx_ctx, port, (uint16_t)lc->idx, b->m, b->n);
	else
		sent = rte_eth_tx_burst(port, (uint16_t)lc->idx, b->m, b->n);
	for (i = sent; i < b->n; i++) {
		bytes -= b->m[i]->pkt_len;
		pc->tx_dropped++;
		lc->c.drops[DP_DROP_TX_FULL]++;
		rte_pktmbuf_free(b->m[i]);
	}
	pc->tx_pkts += sent;
	pc->tx_bytes += bytes;
	b->n = 0;
}

/* The high class first: when the queue is nearly full, it is the normal class that waits. */
void
dp_tx_flush(struct dp_lcore *lc, uint16_t port)
{
	if (lc->tx_hi[port].n)
		tx_send(lc, port, &lc->tx_hi[port]);
	if (lc->tx[port].n)
		tx_send(lc, port, &lc->tx[port]);
}

void
dp_handoff_flush(struct dp_lcore *lc, unsigned int owner)
{
	struct dp_handoff *h = &lc->out[owner];
	unsigned int done;

	done = rte_ring_enqueue_burst(lc->sw->lcores[owner].ring, (void **)h->m, h->n, NULL);
	lc->c.handoffs += done;
	for (unsigned int i = done; i < h->n; i++)
		dp_drop(lc, h->m[i], DP_DROP_HANDOFF_FULL);
	h->n = 0;
}

void
dp_lcore_flush(struct dp_lcore *lc)
{
	struct dp_switch *sw = lc->sw;

	if (sw->n_lcores > 1)
		for (unsigned int o = 0; o < sw->n_lcores; o++)
			if (lc->out[o].n)
				dp_handoff_flush(lc, o);
	for (uint16_t p = 0; p < sw->n_ports; p++)
		if (lc->tx[p].n || lc->tx_hi[p].n)
			dp_tx_flush(lc, p);
	dp_free_flush(lc);
	if (++lc->flushes % DP_KEEP_CHECK == 0)
		dp_lcore_keep_check(lc);
}

void
dp_lcore_keep_check(struct dp_lcore *lc)
{
	const struct dp_switch *sw = lc->sw;

	lc->keep_ok = !__atomic_load_n(&sw->no_keep, __ATOMIC_RELAXED) &&
		      rte_mempool_avail_count(sw->pool) >= sw->pool->size / 2;
}
