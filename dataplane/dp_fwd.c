/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ARP and ordinary traffic, from the RX burst (dp_lcore.c) once the parser
 * has classified a frame and its source MAC is learned: an ARP request for
 * the aggregator address is answered in place; everything else not for the
 * aggregator goes to the port its destination was learned on (dp_l2.c), or
 * to every other port. Both end in the TX buffers (dp_tx.c).
 */
#include <string.h>

#include <rte_mbuf.h>

#include "dp_frame.h"
#include "dp_pipeline.h"

void
dp_fwd_arp(struct dp_lcore *lc, struct rte_mbuf *m)
{
	const struct dp_parse_cfg *pc = &lc->sw->pcfg;
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	uint8_t *arp = f + CAIS_ETH_HLEN;
	uint32_t len = CAIS_ETH_HLEN + DP_ARP_LEN;

	memcpy(f, arp + 8, 6); /* to the asker's hardware address */
	memcpy(f + 6, pc->agg_mac, 6);
	arp[7] = 2;		       /* reply */
	memcpy(arp + 18, arp + 8, 10); /* target = asker (MAC and IP) */
	memcpy(arp + 8, pc->agg_mac, 6);
	memcpy(arp + 14, &pc->agg_ip, 4);
	if ((uint32_t)m->data_len + rte_pktmbuf_tailroom(m) >= DP_ETH_MIN_FRAME) {
		memset(f + len, 0, DP_ETH_MIN_FRAME - len); /* pad to the Ethernet minimum */
		len = DP_ETH_MIN_FRAME;
	}
	dp_mbuf_set_len(m, len);
	lc->c.arp_replies++;
	dp_tx(lc, m->port, m);
}

/* Every port but the ingress one gets m: clones that share its data, m itself last. */
static void
flood(struct dp_lcore *lc, struct rte_mbuf *m)
{
	struct dp_switch *sw = lc->sw;
	uint16_t in = m->port;
	int last = -1;

	lc->c.l2_flooded++;
	for (uint16_t p = 0; p < sw->n_ports; p++) {
		struct rte_mbuf *c;

		if (p == in)
			continue;
		if (last >= 0) {
			c = rte_pktmbuf_clone(m, sw->hdr_pool);
			if (unlikely(!c))
				lc->c.drops[DP_DROP_NO_MBUF]++;
			else
				dp_tx(lc, (uint16_t)last, c);
		}
		last = p;
	}
	if (last >= 0)
		dp_tx(lc, (uint16_t)last, m);
	else
		dp_free_later(lc, m); /* a one-port switch has nowhere to flood */
}

void
dp_fwd_l2(struct dp_lcore *lc, struct rte_mbuf *m)
{
	struct dp_switch *sw = lc->sw;
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	int out = dp_l2_lookup(sw->l2, f, lc->now);

	if (out < 0 || out >= sw->n_ports)
		return flood(lc, m);
	if (out == m->port)
		return dp_drop(lc, m, DP_DROP_L2_SAME_PORT);
	lc->c.l2_forwarded++;
	dp_tx(lc, (uint16_t)out, m);
}
