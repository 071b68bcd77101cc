/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RESULT and REJECT frames. A RESULT comes from the action (dp_action.c) when
 * a round completes or a rank lost its copy: its payload is the store kernel
 * of the round's wire dtype (dp_agg.h) on the accumulator. A REJECT comes from
 * the match (dp_match.c) when DATA fails a check. Both are written into the
 * DATA mbuf that caused them (a RESULT payload is as long as the DATA's:
 * the same count and dtype), a round's RESULT also into the DATA the round
 * kept (DP_KEEP_*), one per sender, and into copies where it kept none;
 * they go to the TX buffers (dp_tx.c). A RESULT to a member that an older
 * round waits on carries WAIT, and a member that round misses gets a NACK
 * of it, header only, in a fresh mbuf (E11). A leaf's
 * partial sum goes up to its spine as PARTIAL64 DATA, and a spine's REJECT
 * to each of the leaf's members (E9).
 */
#include <string.h>

#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include "dp_frame.h"
#include "dp_pipeline.h"

/* A RESULT's reason field: the session's lanes (E11: which rounds it speaks of). */
static inline void
to_result(struct cais_hdr *h, const struct dp_session *s, uint8_t flags, uint8_t dtype)
{
	h->ver_type = (uint8_t)(CAIS_VERSION << 4 | CAIS_TYPE_RESULT);
	h->flags = flags;
	h->rank = CAIS_RANK_NONE;
	h->dtype = dtype;
	h->reason = s->lanes_be;
}

/*
 * Address a frame to member mb (Ethernet/IPv4/UDP) for a CAIS message of
 * cais_bytes about seq: to the UDP port of the member's flow that owns
 * seq's slot (E7: port + seq mod n_ports; n_ports divides the pool).
 */
static inline void
to_member(uint8_t *f, const struct dp_member *mb, unsigned int cais_bytes, uint32_t seq)
{
	memcpy(f, mb->hdr, CAIS_FRAME_HDR_OFF);
	if (unlikely(mb->n_ports > 1))
		dp_frame_wr16(f + CAIS_ETH_HLEN + CAIS_IP_HLEN + 2,
			      mb->port_h + (seq & (mb->n_ports - 1u)));
	dp_frame_lengths(f, cais_bytes);
}

/* A RESULT leaves in its session's class. */
static inline void
tx_result(struct dp_lcore *lc, const struct dp_session *s, uint16_t port, struct rte_mbuf *m)
{
	if (s->priority == DP_PRIO_HIGH)
		dp_tx_high(lc, port, m);
	else
		dp_tx(lc, port, m);
}

/*
 * To the switch port the member is bound to (dp_match.c): a host that sends
 * frames from the member's MAC elsewhere moves the MAC table's entry, not
 * the member's RESULTs. A member not bound yet (the guards off) by its MAC.
 */
static inline void
send_to_member(struct dp_lcore *lc, const struct dp_session *s, const struct dp_member *mb,
	       struct rte_mbuf *m)
{
	uint32_t bound = __atomic_load_n(&mb->bound, __ATOMIC_RELAXED);
	int port = bound ? (int)bound - 1 : dp_l2_lookup(lc->sw->l2, mb->mac, lc->now);

	if (unlikely(port < 0 || port >= lc->sw->n_ports))
		return dp_drop(lc, m, DP_DROP_NO_PORT);
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

/* WAIT into the RESULT frame f to member r where wait (NULL: none) has r. */
static inline void
with_wait(uint8_t *f, const uint64_t *wait, unsigned int r)
{
	if (unlikely(wait != NULL) && (wait[r >> 6] >> (r & 63)) & 1u)
		((struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF))->flags |= CAIS_F_WAIT;
}

/*
 * Copies of a RESULT whose frame m holds (payload and CAIS header written)
 * for the n_to members to[]: small ones copied whole into one header-pool
 * mbuf each, larger ones as a header mbuf chained to an indirect mbuf that
 * shares m's payload. A copy costs an mbuf and the copy of its bytes, a
 * shared one two mbufs and the reference count of m (an atomic on attach
 * and again on free): below DP_RESULT_COPY_MAX bytes the copy is cheaper.
 * Returns the copies sent; none when the header pool is empty (the round
 * stays complete: those members retransmit and get a unicast).
 */
static unsigned int
send_copies(struct dp_lcore *lc, const struct dp_session *s, const struct dp_slot *sl,
	    struct rte_mbuf *m, unsigned int plen, const uint8_t *to, unsigned int n_to,
	    const uint64_t *wait)
{
	struct rte_mbuf *mb[2 * (CAIS_MAX_WORLD - 1)];
	const uint8_t *h = rte_pktmbuf_mtod_offset(m, const uint8_t *, CAIS_FRAME_HDR_OFF);
	const unsigned int whole = plen <= DP_RESULT_COPY_MAX;
	const unsigned int len = CAIS_FRAME_OVERHEAD + plen;

	if (n_to == 0)
		return 0;
	if (unlikely(rte_pktmbuf_alloc_bulk(lc->sw->hdr_pool, mb, whole ? n_to : 2 * n_to))) {
		lc->c.drops[DP_DROP_NO_MBUF] += n_to;
		return 0;
	}
	for (unsigned int k = 0; k < n_to; k++) {
		const struct dp_member *mr = &s->members[to[k]];
		struct rte_mbuf *hd = mb[whole ? k : 2 * k];
		uint8_t *p = (uint8_t *)rte_pktmbuf_append(hd, whole ? len : CAIS_FRAME_OVERHEAD);

		to_member(p, mr, CAIS_HDR_LEN + plen, sl->seq);
		if (whole) {
			memcpy(p + CAIS_FRAME_HDR_OFF, h, CAIS_HDR_LEN + plen);
		} else {
			struct rte_mbuf *ind = mb[2 * k + 1];

			rte_pktmbuf_attach(ind, m);
			rte_pktmbuf_adj(ind, CAIS_FRAME_OVERHEAD);
			memcpy(p + CAIS_FRAME_HDR_OFF, h, CAIS_HDR_LEN);
			hd->next = ind;
			hd->nb_segs = 2;
			hd->pkt_len = len;
		}
		with_wait(p, wait, to[k]);
		send_to_member(lc, s, mr, hd);
	}
	return n_to;
}

/*
 * The RESULT in m (payload and CAIS header written) rewritten into d, the
 * DATA that member mr sent for this round and the round kept (DP_KEEP_*):
 * the same count and a dtype at least as wide, so d's frame has the room.
 */
static inline void
result_into(struct rte_mbuf *d, const uint8_t *f, unsigned int plen, const struct dp_member *mr,
	    uint32_t seq)
{
	uint8_t *p = rte_pktmbuf_mtod(d, uint8_t *);

	dp_mbuf_set_len(d, CAIS_FRAME_OVERHEAD + plen);
	memcpy(p + CAIS_FRAME_HDR_OFF, f + CAIS_FRAME_HDR_OFF, CAIS_HDR_LEN + plen);
	to_member(p, mr, CAIS_HDR_LEN + plen, seq);
}

/*
 * The payload is stored once, into m, which goes to member `to`; every
 * other member gets the DATA it sent, where the round kept it, rewritten
 * into the RESULT, else a copy (send_copies()).
 */
void
dp_reply_results(struct dp_lcore *lc, struct dp_session *s, struct dp_slot *sl, const int64_t *acc,
		 struct rte_mbuf *m, struct rte_mbuf **kept, uint8_t to, const uint64_t *wait)
{
	struct dp_session_counters *sc = &s->part[lc->idx].c;
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	unsigned int plen = cais_payload_bytes(sl->out, sl->count), sent = 0, n_copy = 0;
	uint8_t copy[CAIS_MAX_WORLD];

	dp_mbuf_set_len(m, CAIS_FRAME_OVERHEAD + plen);
	sl->ovf |= lc->sw->agg->wire[sl->out]->store(f + CAIS_FRAME_OVERHEAD, acc, sl->count);
	sc->overflow += sl->ovf;
	to_result(dp_mbuf_cais(m), s, result_flags(lc, sl), sl->out);
	for (unsigned int r = 0; r < s->n; r++) {
		if (r == to)
			continue;
		if (kept && kept[r]) {
			result_into(kept[r], f, plen, &s->members[r], sl->seq);
			with_wait(rte_pktmbuf_mtod(kept[r], uint8_t *), wait, r);
			send_to_member(lc, s, &s->members[r], kept[r]);
			kept[r] = NULL;
			sent++;
		} else {
			copy[n_copy++] = (uint8_t)r;
		}
	}
	sent += send_copies(lc, s, sl, m, plen, copy, n_copy, wait);
	to_member(f, &s->members[to], CAIS_HDR_LEN + plen, sl->seq);
	with_wait(f, wait, to);
	send_to_member(lc, s, &s->members[to], m);
	sc->results_tx += sent + 1;
}

void
dp_reply_resend(struct dp_lcore *lc, const struct dp_session *s, const struct dp_slot *sl,
		const int64_t *acc, struct rte_mbuf *m, uint8_t rank, bool wait)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	unsigned int plen = cais_payload_bytes(sl->out, sl->count);

	dp_mbuf_set_len(m, CAIS_FRAME_OVERHEAD + plen);
	/* the round's OVERFLOW is in sl->ovf already */
	lc->sw->agg->wire[sl->out]->store(f + CAIS_FRAME_OVERHEAD, acc, sl->count);
	to_result(dp_mbuf_cais(m), s, result_flags(lc, sl) | (wait ? CAIS_F_WAIT : 0), sl->out);
	to_member(f, &s->members[rank], CAIS_HDR_LEN + plen, sl->seq);
	tx_result(lc, s, m->port, m);
}

/*
 * Per-sender token bucket of per_second / 2 of burst, refilled at
 * per_second / 2 a second, so never above per_second in any second: REJECTs
 * (DP_RL_PER_SECOND) and ACKs (DP_ACK_PER_SECOND), each in a table of its
 * own. Senders that hash to the same entry share its bucket (a takeover
 * keeps the credit), so alternating colliding senders cannot reset the limit.
 */
static bool
budget_allowed(struct dp_lcore *lc, struct dp_rl *table, uint32_t ip, uint16_t port,
	       uint32_t per_second)
{
	const uint64_t hz = lc->sw->hz, cost = hz / (per_second / 2);
	uint32_t h = (ip * 0x9E3779B1u) ^ ((uint32_t)port * 0x85EBCA77u);
	struct dp_rl *e = &table[(h >> 16) & (DP_RL_ENTRIES - 1)];

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

/* The DATA's sender (network order), for its budget. */
static inline void
sender_of(const uint8_t *f, uint32_t *ip, uint16_t *port)
{
	memcpy(ip, f + CAIS_ETH_HLEN + 12, 4);
	memcpy(port, f + CAIS_ETH_HLEN + CAIS_IP_HLEN, 2);
}

/*
 * Readdress a DATA frame f to its sender, from the aggregator, as a
 * header-only CAIS message; the caller writes the header's type and fields.
 */
static inline void
turn_around(const struct dp_lcore *lc, uint8_t *f)
{
	const struct dp_parse_cfg *agg = &lc->sw->pcfg;
	uint8_t dst_mac[6];
	uint32_t dst_ip;
	uint16_t dport;

	memcpy(dst_mac, f + 6, 6);
	sender_of(f, &dst_ip, &dport);
	dp_frame_hdr(f, dst_mac, agg->agg_mac, agg->agg_ip, dst_ip, agg->udp_port, dport);
	dp_frame_lengths(f, CAIS_HDR_LEN);
}

void
dp_reply_reject(struct dp_lcore *lc, struct rte_mbuf *m, enum cais_reason why,
		struct dp_session_counters *sc)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	struct cais_hdr *h = dp_mbuf_cais(m);
	uint32_t ip;
	uint16_t port;

	sender_of(f, &ip, &port);
	if (!budget_allowed(lc, lc->rl, ip, port, DP_RL_PER_SECOND))
		return dp_drop(lc, m, DP_DROP_REJECT_LIMITED);
	turn_around(lc, f);
	h->ver_type = (uint8_t)(CAIS_VERSION << 4 | CAIS_TYPE_REJECT);
	h->flags = why == CAIS_R_FWD_ONLY ? CAIS_F_FWD_ONLY : 0;
	h->rank = CAIS_RANK_NONE;
	/* dtype stays the DATA's: a host tells a BAD_DTYPE for what it sent before by it */
	h->count = 0;
	h->reason = rte_cpu_to_be_16(why);
	dp_mbuf_set_len(m, CAIS_FRAME_OVERHEAD);
	lc->c.rejects[why]++;
	if (sc)
		sc->rejects[why]++;
	dp_tx(lc, m->port, m);
}

bool
dp_reply_budget(struct dp_lcore *lc, const struct rte_mbuf *m)
{
	uint32_t ip;
	uint16_t port;

	sender_of(rte_pktmbuf_mtod(m, const uint8_t *), &ip, &port);
	if (budget_allowed(lc, lc->rl_ack, ip, port, DP_ACK_PER_SECOND))
		return true;
	lc->c.acks_limited++;
	return false;
}

void
dp_reply_answer(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_slot *sl, uint8_t type)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	struct cais_hdr *h = dp_mbuf_cais(m);

	turn_around(lc, f);
	h->ver_type = (uint8_t)(CAIS_VERSION << 4 | type);
	h->flags = result_flags(lc, sl) & CAIS_F_CONGESTED;
	/* tenant .. rank and dtype stay the DATA's */
	h->count = 0;
	h->reason = 0;
	dp_mbuf_set_len(m, CAIS_FRAME_OVERHEAD);
	if (type == CAIS_TYPE_ACK)
		lc->c.acks++;
	else
		lc->c.nacks++;
	dp_tx(lc, m->port, m);
}

/*
 * docs/PROTOCOL.md E6: a retransmitted DATA whose contribution is already in
 * its open round: tell the sender so (header only, its rank, the RESULT
 * flags), within its ACK budget; else drop it as the duplicate it is.
 */
void
dp_reply_ack(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_slot *sl)
{
	if (!dp_reply_budget(lc, m))
		return dp_drop(lc, m, DP_DROP_DUPLICATE);
	dp_reply_answer(lc, m, sl, CAIS_TYPE_ACK);
}

void
dp_reply_nack(struct dp_lcore *lc, const struct dp_session *s, const struct dp_slot *sl,
	      unsigned int r)
{
	const struct dp_member *mb = &s->members[r];
	struct rte_mbuf *m = rte_pktmbuf_alloc(lc->sw->hdr_pool);
	struct cais_fields cf;
	uint8_t *f;

	if (unlikely(!m)) {
		lc->c.drops[DP_DROP_NO_MBUF]++;
		return;
	}
	f = (uint8_t *)rte_pktmbuf_append(m, CAIS_FRAME_OVERHEAD);
	to_member(f, mb, CAIS_HDR_LEN, sl->seq);
	cais_data_fields(&cf, s->tenant, s->session, sl->tensor, sl->seq, s->pool,
			 (uint8_t)(r + s->first_rank), 0);
	cf.type = CAIS_TYPE_NACK;
	cf.flags = result_flags(lc, sl) & CAIS_F_CONGESTED;
	cf.dtype = sl->out;
	cais_hdr_build((struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF), &cf);
	lc->c.nacks++;
	send_to_member(lc, s, mb, m);
}

void
dp_reply_uplink(struct dp_lcore *lc, struct dp_session *s, struct dp_slot *sl, const int64_t *acc,
		struct rte_mbuf *m, bool retx)
{
	struct dp_session_counters *sc = &s->part[lc->idx].c;
	unsigned int plen = cais_payload_bytes(CAIS_DT_PARTIAL64, sl->count);
	struct cais_fields cf;
	uint8_t *f;

	if (unlikely(rte_pktmbuf_headroom(m) + CAIS_FRAME_OVERHEAD + plen >
		     rte_pktmbuf_data_room_size(m->pool))) {
		lc->c.drops[DP_DROP_NO_MBUF]++;
		return rte_pktmbuf_free(m);
	}
	dp_mbuf_set_len(m, CAIS_FRAME_OVERHEAD + plen);
	f = rte_pktmbuf_mtod(m, uint8_t *);
	memcpy(f, s->up.hdr, CAIS_FRAME_HDR_OFF);
	dp_frame_lengths(f, CAIS_HDR_LEN + plen);
	cais_data_fields(&cf, s->tenant, s->session, sl->tensor, sl->seq, s->pool, s->up.rank,
			 sl->count);
	cf.dtype = CAIS_DT_PARTIAL64;
	cf.flags = (uint8_t)((retx ? CAIS_F_RETX : 0) | (sl->ovf ? CAIS_F_OVERFLOW : 0));
	cais_hdr_build(dp_mbuf_cais(m), &cf);
	lc->sw->agg->wire[CAIS_DT_PARTIAL64]->store(f + CAIS_FRAME_OVERHEAD, acc, sl->count);
	sc->up_tx++;
	sc->up_resent += retx;
	tx_result(lc, s, s->up.sw_port, m);
}

void
dp_reply_reject_members(struct dp_lcore *lc, struct dp_session *s, const struct dp_slot *sl,
			struct rte_mbuf *m)
{
	struct dp_session_counters *sc = &s->part[lc->idx].c;
	const struct cais_hdr *up = dp_mbuf_cais(m);
	uint16_t why = rte_be_to_cpu_16(up->reason);

	for (unsigned int r = 0; r < s->n; r++) {
		const struct dp_member *mb = &s->members[r];
		struct rte_mbuf *c;
		struct cais_hdr *h;
		uint8_t *p;

		if (!budget_allowed(lc, lc->rl, mb->ip, mb->port, DP_RL_PER_SECOND)) {
			lc->c.drops[DP_DROP_REJECT_LIMITED]++;
			continue;
		}
		c = rte_pktmbuf_alloc(lc->sw->hdr_pool);
		if (unlikely(!c)) {
			lc->c.drops[DP_DROP_NO_MBUF]++;
			continue;
		}
		p = (uint8_t *)rte_pktmbuf_append(c, CAIS_FRAME_OVERHEAD);
		to_member(p, mb, CAIS_HDR_LEN, sl->seq);
		h = (struct cais_hdr *)(p + CAIS_FRAME_HDR_OFF);
		memcpy(h, up, CAIS_HDR_LEN);
		h->rank = CAIS_RANK_NONE;
		h->dtype = sl->dtype; /* what the members sent, not the PARTIAL64 the spine saw */
		h->count = 0;
		if (why < CAIS_R_MAX) {
			lc->c.rejects[why]++;
			sc->rejects[why]++;
		}
		send_to_member(lc, s, mb, c);
	}
	dp_free_later(lc, m);
}
