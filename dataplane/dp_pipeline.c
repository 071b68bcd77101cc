/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-lcore pipeline: rx burst -> parse -> (ARP | L2 | DATA) ->
 * match (tensor table) -> action (slot state machine, accumulator) ->
 * RESULT/REJECT -> TX buffers. No locks, no allocation but mbufs, no
 * syscalls, no logging: counters only.
 */
#include <string.h>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "dp_switch.h"

#define ARP_LEN	      28u
#define ETH_MIN_FRAME 60u

void
dp_frame_hdr(uint8_t *p, const uint8_t *dst_mac, const uint8_t *src_mac, uint32_t src_ip,
	     uint32_t dst_ip, uint16_t sport_be, uint16_t dport_be)
{
	memcpy(p, dst_mac, 6);
	memcpy(p + 6, src_mac, 6);
	p[12] = 0x08;
	p[13] = 0x00;
	p += CAIS_ETH_HLEN;
	memset(p, 0, CAIS_IP_HLEN + CAIS_UDP_HLEN);
	p[0] = 0x45; /* IPv4, no options */
	p[6] = 0x40; /* don't fragment */
	p[8] = 64;   /* TTL */
	p[9] = 17;   /* UDP */
	memcpy(p + 12, &src_ip, 4);
	memcpy(p + 16, &dst_ip, 4);
	p += CAIS_IP_HLEN;
	memcpy(p, &sport_be, 2);
	memcpy(p + 2, &dport_be, 2);
}

void
dp_frame_lengths(uint8_t *frame, unsigned int cais_bytes)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(frame + CAIS_ETH_HLEN);
	uint8_t *udp = frame + CAIS_ETH_HLEN + CAIS_IP_HLEN;
	uint16_t ulen = rte_cpu_to_be_16((uint16_t)(CAIS_UDP_HLEN + cais_bytes));

	ip->total_length = rte_cpu_to_be_16((uint16_t)(CAIS_IP_HLEN + CAIS_UDP_HLEN + cais_bytes));
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	memcpy(udp + 4, &ulen, 2);
	memset(udp + 6, 0, 2); /* UDP checksum 0: allowed for IPv4 */
}

/* ---- output ---- */

static void
free_flush(struct dp_lcore *lc)
{
	if (lc->n_free) {
		rte_pktmbuf_free_bulk(lc->free, lc->n_free);
		lc->n_free = 0;
	}
}

static inline void
free_later(struct dp_lcore *lc, struct rte_mbuf *m)
{
	lc->free[lc->n_free++] = m;
	if (unlikely(lc->n_free == RTE_DIM(lc->free)))
		free_flush(lc);
}

static inline void
drop(struct dp_lcore *lc, struct rte_mbuf *m, enum dp_drop why)
{
	lc->c.drops[why]++;
	free_later(lc, m);
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
static void
tx_flush(struct dp_lcore *lc, uint16_t port)
{
	if (lc->tx_hi[port].n)
		tx_send(lc, port, &lc->tx_hi[port]);
	if (lc->tx[port].n)
		tx_send(lc, port, &lc->tx[port]);
}

static inline void
tx(struct dp_lcore *lc, uint16_t port, struct rte_mbuf *m)
{
	struct dp_txbuf *b = &lc->tx[port];

	b->m[b->n++] = m;
	if (unlikely(b->n >= lc->sw->normal_cap))
		tx_flush(lc, port);
}

static inline void
tx_high(struct dp_lcore *lc, uint16_t port, struct rte_mbuf *m)
{
	struct dp_txbuf *b = &lc->tx_hi[port];

	b->m[b->n++] = m;
	if (unlikely(b->n == DP_TX_BUF))
		tx_flush(lc, port);
}

static void
handoff_flush(struct dp_lcore *lc, unsigned int owner)
{
	struct dp_handoff *h = &lc->out[owner];
	unsigned int done;

	done = rte_ring_enqueue_burst(lc->sw->lcores[owner].ring, (void **)h->m, h->n, NULL);
	lc->c.handoffs += done;
	for (unsigned int i = done; i < h->n; i++)
		drop(lc, h->m[i], DP_DROP_HANDOFF_FULL);
	h->n = 0;
}

void
dp_lcore_flush(struct dp_lcore *lc)
{
	struct dp_switch *sw = lc->sw;

	if (sw->n_lcores > 1)
		for (unsigned int o = 0; o < sw->n_lcores; o++)
			if (lc->out[o].n)
				handoff_flush(lc, o);
	for (uint16_t p = 0; p < sw->n_ports; p++)
		if (lc->tx[p].n || lc->tx_hi[p].n)
			tx_flush(lc, p);
	free_flush(lc);
}

/* ---- ARP and L2 ---- */

static inline void
set_len(struct rte_mbuf *m, uint32_t len)
{
	m->data_len = (uint16_t)len;
	m->pkt_len = len;
}

static void
arp_reply(struct dp_lcore *lc, struct rte_mbuf *m)
{
	const struct dp_parse_cfg *pc = &lc->sw->pcfg;
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	uint8_t *arp = f + CAIS_ETH_HLEN;
	uint32_t len = CAIS_ETH_HLEN + ARP_LEN;

	memcpy(f, arp + 8, 6); /* to the asker's hardware address */
	memcpy(f + 6, pc->agg_mac, 6);
	arp[7] = 2;		       /* reply */
	memcpy(arp + 18, arp + 8, 10); /* target = asker (MAC and IP) */
	memcpy(arp + 8, pc->agg_mac, 6);
	memcpy(arp + 14, &pc->agg_ip, 4);
	if ((uint32_t)m->data_len + rte_pktmbuf_tailroom(m) >= ETH_MIN_FRAME) {
		memset(f + len, 0, ETH_MIN_FRAME - len); /* pad to the Ethernet minimum */
		len = ETH_MIN_FRAME;
	}
	set_len(m, len);
	lc->c.arp_replies++;
	tx(lc, m->port, m);
}

static void
l2_forward(struct dp_lcore *lc, struct rte_mbuf *m)
{
	struct dp_switch *sw = lc->sw;
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	int out = dp_l2_lookup(sw->l2, f, lc->now);
	uint16_t in = m->port;
	int last = -1;

	if (out >= 0 && out < sw->n_ports) {
		if (out == in)
			return drop(lc, m, DP_DROP_L2_SAME_PORT);
		lc->c.l2_forwarded++;
		return tx(lc, (uint16_t)out, m);
	}
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
				tx(lc, (uint16_t)last, c);
		}
		last = p;
	}
	if (last >= 0)
		tx(lc, (uint16_t)last, m);
	else
		free_later(lc, m); /* a one-port switch has nowhere to flood */
}

/* ---- CAIS ---- */

static inline struct cais_hdr *
frame_cais(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod_offset(m, struct cais_hdr *, CAIS_FRAME_HDR_OFF);
}

/*
 * Per-sender token bucket: 50 REJECTs of burst, 50 per second, so never above
 * 100 in any second. Senders that hash to the same entry share its bucket
 * (a takeover keeps the credit), so alternating colliding senders cannot
 * reset the limit.
 */
static bool
reject_allowed(struct dp_lcore *lc, uint32_t ip, uint16_t port)
{
	const uint64_t hz = lc->sw->hz, cost = hz / (DP_RL_PER_SECOND / 2);
	uint32_t h = (ip * 0x9E3779B1u) ^ ((uint32_t)port * 0x85EBCA77u);
	struct dp_rl *e = &lc->rl[(h >> 16) & (DP_RL_ENTRIES - 1)];

	e->ip = ip;
	e->port = port;
	if (e->last == 0) {
		e->credit = hz;
	} else {
		e->credit += lc->now - e->last;
		if (e->credit > hz)
			e->credit = hz;
	}
	e->last = lc->now;
	if (e->credit < cost)
		return false;
	e->credit -= cost;
	return true;
}

static void
reject(struct dp_lcore *lc, struct rte_mbuf *m, enum cais_reason why,
       struct dp_session_counters *sc)
{
	struct dp_switch *sw = lc->sw;
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	struct cais_hdr *h = frame_cais(m);
	uint8_t dst_mac[6];
	uint32_t dst_ip;
	uint16_t dport;

	memcpy(dst_mac, f + 6, 6);
	memcpy(&dst_ip, f + CAIS_ETH_HLEN + 12, 4);
	memcpy(&dport, f + CAIS_ETH_HLEN + CAIS_IP_HLEN, 2);
	if (!reject_allowed(lc, dst_ip, dport))
		return drop(lc, m, DP_DROP_REJECT_LIMITED);
	dp_frame_hdr(f, dst_mac, sw->pcfg.agg_mac, sw->pcfg.agg_ip, dst_ip, sw->udp_port_be, dport);
	dp_frame_lengths(f, CAIS_HDR_LEN);
	h->ver_type = (uint8_t)(CAIS_VERSION << 4 | CAIS_TYPE_REJECT);
	h->flags = why == CAIS_R_FWD_ONLY ? CAIS_F_FWD_ONLY : 0;
	h->rank = CAIS_RANK_NONE;
	h->dtype = CAIS_DT_FIXED32;
	h->count = 0;
	h->reason = rte_cpu_to_be_16(why);
	set_len(m, CAIS_FRAME_OVERHEAD);
	lc->c.rejects[why]++;
	if (sc)
		sc->rejects[why]++;
	tx(lc, m->port, m);
}

static inline void
to_result(struct cais_hdr *h, uint8_t flags)
{
	h->ver_type = (uint8_t)(CAIS_VERSION << 4 | CAIS_TYPE_RESULT);
	h->flags = flags;
	h->rank = CAIS_RANK_NONE;
	h->dtype = CAIS_DT_FIXED32;
	h->reason = 0;
}

/* Address a frame to member mb (Ethernet/IPv4/UDP) for a CAIS message of cais_bytes. */
static inline void
to_member(uint8_t *f, const struct dp_member *mb, unsigned int cais_bytes)
{
	memcpy(f, mb->hdr, CAIS_FRAME_HDR_OFF);
	dp_frame_lengths(f, cais_bytes);
}

/* A RESULT leaves in its session's class. */
static inline void
tx_result(struct dp_lcore *lc, const struct dp_session *s, uint16_t port, struct rte_mbuf *m)
{
	if (s->priority == CTL_PRIO_HIGH)
		tx_high(lc, port, m);
	else
		tx(lc, port, m);
}

static inline void
send_to_member(struct dp_lcore *lc, const struct dp_session *s, const struct dp_member *mb,
	       struct rte_mbuf *m)
{
	int port = dp_l2_lookup(lc->sw->l2, mb->mac.addr_bytes, lc->now);

	if (unlikely(port < 0 || port >= lc->sw->n_ports))
		return drop(lc, m, DP_DROP_NO_PORT);
	tx_result(lc, s, (uint16_t)port, m);
}

/* RESULT flags: OVERFLOW of the round, CONGESTED while this lcore's queue is deep. */
static inline uint8_t
result_flags(const struct dp_lcore *lc, const struct dp_slot *sl)
{
	uint8_t f = sl->ovf ? CAIS_F_OVERFLOW : 0;

	if (lc->qdepth > __atomic_load_n(&lc->sw->queue_depth_threshold, __ATOMIC_RELAXED))
		f |= CAIS_F_CONGESTED;
	return f;
}

/*
 * The round in sl is complete: write its RESULT payload once, into the
 * completing DATA mbuf m, and send it to every member: n-1 header mbufs
 * chained to indirect mbufs that share m's payload, and m itself (headers
 * rewritten in place) to the last member.
 */
static void
send_results(struct dp_lcore *lc, struct dp_session *s, struct dp_slot *sl, const int64_t *acc,
	     struct rte_mbuf *m, struct dp_session_counters *sc)
{
	struct dp_switch *sw = lc->sw;
	struct rte_mbuf *mb[2 * (CAIS_MAX_WORLD - 1)];
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	struct cais_hdr *h = frame_cais(m);
	unsigned int plen = (unsigned int)sl->count * CAIS_ELEM_SIZE;
	unsigned int copies = s->n - 1u, r;

	set_len(m, CAIS_FRAME_OVERHEAD + plen);
	sl->ovf = sw->agg->store(f + CAIS_FRAME_OVERHEAD, acc, sl->count);
	sc->overflow += sl->ovf;
	to_result(h, result_flags(lc, sl));

	if (copies && unlikely(rte_pktmbuf_alloc_bulk(sw->hdr_pool, mb, 2 * copies) != 0)) {
		/* the round stays complete: those members retransmit and get a unicast */
		lc->c.drops[DP_DROP_NO_MBUF] += copies;
		copies = 0;
	}
	for (r = 0; r < copies; r++) {
		struct rte_mbuf *hd = mb[2 * r], *ind = mb[2 * r + 1];
		uint8_t *p = (uint8_t *)rte_pktmbuf_append(hd, CAIS_FRAME_OVERHEAD);

		rte_pktmbuf_attach(ind, m);
		rte_pktmbuf_adj(ind, CAIS_FRAME_OVERHEAD);
		to_member(p, &s->members[r], CAIS_HDR_LEN + plen);
		memcpy(p + CAIS_FRAME_HDR_OFF, h, CAIS_HDR_LEN);
		hd->next = ind;
		hd->nb_segs = 2;
		hd->pkt_len = CAIS_FRAME_OVERHEAD + plen;
		send_to_member(lc, s, &s->members[r], hd);
	}
	to_member(f, &s->members[s->n - 1], CAIS_HDR_LEN + plen);
	send_to_member(lc, s, &s->members[s->n - 1], m);
	sc->results_tx += copies + 1;
}

/* A rank that lost the RESULT of a complete round: answer it alone, reusing its DATA mbuf. */
static void
resend_result(struct dp_lcore *lc, const struct dp_session *s, const struct dp_slot *sl,
	      const int64_t *acc, struct rte_mbuf *m, uint8_t rank)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	unsigned int plen = (unsigned int)sl->count * CAIS_ELEM_SIZE;

	set_len(m, CAIS_FRAME_OVERHEAD + plen);
	lc->sw->agg->store(f + CAIS_FRAME_OVERHEAD, acc, sl->count);
	to_result(frame_cais(m), result_flags(lc, sl));
	to_member(f, &s->members[rank], CAIS_HDR_LEN + plen);
	tx_result(lc, s, m->port, m);
}

/* The action: DATA m for a slot this lcore owns, already matched and checked. */
static void
data_owned(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_tensor *t,
	   const struct cais_hdr *h, uint16_t slotf)
{
	struct dp_switch *sw = lc->sw;
	struct dp_session *s = t->s;
	struct dp_session_part *pt = &s->part[lc->idx];
	struct dp_session_counters *sc = &pt->c;
	unsigned int idx = slotf & CAIS_SLOT_MASK, set = slotf >> 15;
	unsigned int si = (idx / sw->n_lcores) * 2 + set;
	struct dp_slot *sl = &pt->slots[si];
	int64_t *acc = pt->acc + (size_t)si * s->elems;
	const void *payload = (const uint8_t *)h + CAIS_HDR_LEN;
	uint16_t count = rte_be_to_cpu_16(h->count);
	uint8_t was = sl->state;
	bool complete;
	enum dp_verdict v;

	sc->retx += (h->flags & CAIS_F_RETX) != 0;
	v = dp_slot_step(sl, rte_be_to_cpu_32(h->seq), t->tensor, h->rank, count, s->n, &complete);
	switch (v) {
	case DP_V_NEW:
		sc->data_rx++;
		sc->abandoned += was == DP_SLOT_OPEN;
		sl->t_start = lc->now;
		sw->agg->load(acc, payload, count);
		break;
	case DP_V_ADD:
		sc->data_rx++;
		if (t->op == CAIS_OP_MAX)
			sw->agg->max(acc, payload, count);
		else if (t->op == CAIS_OP_MIN)
			sw->agg->min(acc, payload, count);
		else
			sw->agg->sum(acc, payload, count);
		break;
	case DP_V_RESEND:
		sc->resends++;
		return resend_result(lc, s, sl, acc, m, h->rank);
	case DP_V_DUPLICATE:
		sc->duplicates++;
		return drop(lc, m, DP_DROP_DUPLICATE);
	case DP_V_STALE:
		sc->stale++;
		return drop(lc, m, DP_DROP_STALE);
	default:
		sc->inconsistent++;
		return drop(lc, m, DP_DROP_INCONSISTENT);
	}
	if (!complete)
		return free_later(lc, m);
	sc->rounds++;
	sc->hist[cmn_hist_bucket(lc->now - sl->t_start)]++;
	send_results(lc, s, sl, acc, m, sc);
}

/*
 * The match: DATA m (parsed, header at its fixed offset) -> tensor entry;
 * the REJECT checks in order: FWD_ONLY, UNKNOWN_TENSOR, NOT_MEMBER,
 * BAD_DTYPE, BAD_COUNT, NO_SLOT; then slot/set against seq. Run again by the
 * owner on a handed-off packet, since the tables may have changed.
 */
static void
data_rx(struct dp_lcore *lc, struct rte_mbuf *m)
{
	struct dp_switch *sw = lc->sw;
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct cais_hdr *h = (const struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF);
	const struct dp_tensor *t;
	const struct dp_session *s;
	const struct dp_member *mb;
	struct dp_session_counters *sc;
	uint32_t payload_len, seq;
	uint16_t count, slotf, udp_len;
	unsigned int owner;

	if (unlikely(__atomic_load_n(&sw->mode, __ATOMIC_RELAXED) == DP_MODE_FWD_ONLY))
		return reject(lc, m, CAIS_R_FWD_ONLY, NULL);
	t = dp_tensor_lookup(sw, dp_tensor_key(rte_be_to_cpu_16(h->tenant),
					       rte_be_to_cpu_16(h->session),
					       rte_be_to_cpu_32(h->tensor)));
	if (unlikely(!t))
		return reject(lc, m, CAIS_R_UNKNOWN_TENSOR, NULL);
	s = t->s;
	sc = &s->part[lc->idx].c;
	mb = &s->members[h->rank < s->n ? h->rank : 0];
	if (unlikely(h->rank >= s->n || !dp_eq4(f + CAIS_ETH_HLEN + 12, &mb->ip) ||
		     !dp_eq2(f + CAIS_ETH_HLEN + CAIS_IP_HLEN, &mb->port)))
		return reject(lc, m, CAIS_R_NOT_MEMBER, sc);
	if (unlikely(h->dtype != CAIS_DT_FIXED32))
		return reject(lc, m, CAIS_R_BAD_DTYPE, sc);
	count = rte_be_to_cpu_16(h->count);
	memcpy(&udp_len, f + CAIS_ETH_HLEN + CAIS_IP_HLEN + 4, 2);
	payload_len = rte_be_to_cpu_16(udp_len) - CAIS_UDP_HLEN - CAIS_HDR_LEN;
	if (unlikely(count == 0 || count > s->elems ||
		     (uint32_t)count * CAIS_ELEM_SIZE > payload_len))
		return reject(lc, m, CAIS_R_BAD_COUNT, sc);
	slotf = rte_be_to_cpu_16(h->slot);
	if (unlikely((slotf & CAIS_SLOT_MASK) >= s->pool))
		return reject(lc, m, CAIS_R_NO_SLOT, sc);
	seq = rte_be_to_cpu_32(h->seq);
	if (unlikely(cais_slot_field(seq, s->pool) != slotf)) {
		sc->slot_mismatch++;
		return drop(lc, m, DP_DROP_SLOT_MISMATCH);
	}
	/* the owner computes the same owner: a handed-off packet never moves twice */
	owner = sw->n_lcores == 1 ? 0 : (slotf & CAIS_SLOT_MASK) % sw->n_lcores;
	if (owner != lc->idx) {
		struct dp_handoff *ho = &lc->out[owner];

		ho->m[ho->n++] = m;
		if (ho->n == DP_BURST)
			handoff_flush(lc, owner);
		return;
	}
	data_owned(lc, m, t, h, slotf);
}

/* The first DP_PREFETCH_BYTES of m's frame into the cache. */
static inline void
prefetch_frame(const struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	unsigned int len = m->data_len < DP_PREFETCH_BYTES ? m->data_len : DP_PREFETCH_BYTES;

	for (unsigned int off = 0; off < len; off += RTE_CACHE_LINE_SIZE)
		rte_prefetch0(f + off);
}

void
dp_lcore_input(struct dp_lcore *lc, struct rte_mbuf **pkts, uint16_t n)
{
	struct dp_switch *sw = lc->sw;
	struct dp_parsed p;

	lc->now = rte_rdtsc();
	for (uint16_t i = 0; i < n && i < DP_PREFETCH_MBUF; i++)
		rte_prefetch0(pkts[i]);
	for (uint16_t i = 0; i < n && i < DP_PREFETCH_FRAME; i++)
		prefetch_frame(pkts[i]);
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const uint8_t *f;
		uint16_t port = m->port;

		if (i + DP_PREFETCH_MBUF < n)
			rte_prefetch0(pkts[i + DP_PREFETCH_MBUF]);
		if (i + DP_PREFETCH_FRAME < n)
			prefetch_frame(pkts[i + DP_PREFETCH_FRAME]);
		if (unlikely(port >= sw->n_ports)) {
			drop(lc, m, DP_DROP_BAD_PORT);
			continue;
		}
		lc->port[port].rx_pkts++;
		lc->port[port].rx_bytes += m->pkt_len;
		if (unlikely(m->nb_segs != 1)) {
			drop(lc, m, DP_DROP_MULTISEG);
			continue;
		}
		f = rte_pktmbuf_mtod(m, const uint8_t *);
		dp_parse(f, m->data_len, &sw->pcfg, &p);
		if (likely(m->data_len >= CAIS_ETH_HLEN))
			dp_l2_learn(sw->l2, f + 6, port, lc->now);
		switch (p.cls) {
		case DP_CLASS_DATA:
			lc->c.data_rx++;
			data_rx(lc, m);
			break;
		case DP_CLASS_L2:
			l2_forward(lc, m);
			break;
		case DP_CLASS_ARP_AGG:
			arp_reply(lc, m);
			break;
		default:
			drop(lc, m, p.drop);
			break;
		}
	}
}

void
dp_lcore_input_owned(struct dp_lcore *lc, struct rte_mbuf **pkts, uint16_t n)
{
	lc->now = rte_rdtsc();
	for (uint16_t i = 0; i < n; i++)
		data_rx(lc, pkts[i]);
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

int
dp_lcore_run(void *arg)
{
	struct dp_lcore *lc = arg;
	struct dp_switch *sw = lc->sw;
	const uint64_t period = sw->hz * DP_PERIODIC_US / 1000000;
	struct rte_mbuf *pkts[DP_BURST];
	uint64_t next = rte_rdtsc() + period;
	unsigned int iter = 0;

	dp_rcu_online(sw, lc->idx);
	lc->rx_count_ok = lc->n_rxq > 0;
	for (uint16_t q = 0; q < lc->n_rxq; q++)
		if (rte_eth_rx_queue_count(lc->rxq[q].port, lc->rxq[q].queue) < 0)
			lc->rx_count_ok = false;
	while (!__atomic_load_n(&sw->quit, __ATOMIC_RELAXED)) {
		bool full = lc->n_rxq > 0;

		for (uint16_t q = 0; q < lc->n_rxq; q++) {
			uint16_t n =
			    rte_eth_rx_burst(lc->rxq[q].port, lc->rxq[q].queue, pkts, DP_BURST);
			if (n)
				dp_lcore_input(lc, pkts, n);
			full &= n == DP_BURST;
		}
		queue_depth(lc, full, ++iter);
		if (lc->ring) {
			unsigned int n =
			    rte_ring_dequeue_burst(lc->ring, (void **)pkts, DP_BURST, NULL);
			if (n)
				dp_lcore_input_owned(lc, pkts, (uint16_t)n);
		}
		dp_lcore_flush(lc);
		dp_rcu_quiescent(sw, lc->idx);
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
	dp_rcu_offline(sw, lc->idx);
	return 0;
}
