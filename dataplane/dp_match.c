/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The match: DATA from the RX burst (dp_lcore.c), parsed, or handed over by
 * another lcore, is looked up by (tenant, session, tensor) and checked, in
 * the order of docs/PROTOCOL.md E1: FWD_ONLY, UNKNOWN_TENSOR, NOT_MEMBER (the
 * member's address, MAC and switch port: E5),
 * BAD_DTYPE (not the tensor's wire dtype, E4), BAD_COUNT (count outside
 * 1..E, or a payload shorter than count elements of that dtype; a QUERY,
 * E12, has none), NO_SLOT,
 * each failure a REJECT (dp_reply.c); then slot and set against seq (a
 * silent drop). What passes goes to the action (dp_action.c) on the lcore
 * that owns its slot: here, or through a handoff (dp_tx.c) to the owner,
 * which runs the match again on it, since the tables may have changed in
 * between. A RESULT, REJECT or ACK to the aggregator is an answer from a
 * leaf's spine (E9) when it comes from the uplink of its tensor's session,
 * and goes to that slot's owner as DATA does; any other is dropped.
 */
#include <string.h>

#include <rte_byteorder.h>

#include "dp_pipeline.h"

/*
 * Is the sender the member registered for its rank (docs/PROTOCOL.md E5)?
 * Its IPv4 address and UDP port (else NOT_MEMBER), and, with the guards on,
 * its source MAC and the switch port it sits behind: the one session.add
 * gave, else the one its first DATA came in on, pinned here (else SPOOFED:
 * someone else sends with the member's address).
 */
enum sender { SENDER_OK, SENDER_NOT_MEMBER, SENDER_SPOOFED };

/* From one of the member's flows' UDP ports (E7): port .. port + n_ports - 1. */
static inline bool
from_flow(const uint8_t *f, const struct dp_member *mb)
{
	uint16_t sport;

	if (likely(mb->n_ports == 1))
		return dp_eq2(f + CAIS_ETH_HLEN + CAIS_IP_HLEN, &mb->port);
	memcpy(&sport, f + CAIS_ETH_HLEN + CAIS_IP_HLEN, 2);
	return (uint16_t)(rte_be_to_cpu_16(sport) - mb->port_h) < mb->n_ports;
}

static inline enum sender
sender_check(const struct rte_mbuf *m, const uint8_t *f, const struct dp_session *s, uint8_t rank,
	     bool guard)
{
	struct dp_member *mb;
	uint32_t bound, here = (uint32_t)m->port + 1;

	if (rank >= s->n)
		return SENDER_NOT_MEMBER;
	mb = &s->members[rank];
	if (!dp_eq4(f + CAIS_ETH_HLEN + 12, &mb->ip) || !from_flow(f, mb))
		return SENDER_NOT_MEMBER;
	if (!guard)
		return SENDER_OK;
	if (!dp_eq6(f + 6, mb->mac))
		return SENDER_SPOOFED;
	bound = __atomic_load_n(&mb->bound, __ATOMIC_RELAXED);
	if (likely(bound == here))
		return SENDER_OK;
	if (bound == 0 && __atomic_compare_exchange_n(&mb->bound, &bound, here, false,
						      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return SENDER_OK;
	return bound == here ? SENDER_OK : SENDER_SPOOFED; /* another lcore pinned it first */
}

/*
 * count is 1..E, and the UDP length holds count elements of dtype (a wire
 * dtype); a QUERY (E12) has none.
 */
static inline bool
count_ok(const uint8_t *f, const struct dp_session *s, const struct cais_hdr *h)
{
	uint16_t count = rte_be_to_cpu_16(h->count);
	uint16_t udp_len;
	uint32_t payload_len;

	memcpy(&udp_len, f + CAIS_ETH_HLEN + CAIS_IP_HLEN + 4, 2);
	payload_len = rte_be_to_cpu_16(udp_len) - CAIS_UDP_HLEN - CAIS_HDR_LEN;
	return count != 0 && count <= s->elems &&
	       ((h->flags & CAIS_F_QUERY) || cais_payload_bytes(h->dtype, count) <= payload_len);
}

/* The tensor entry a CAIS header names, or NULL; the burst's last one without a lookup. */
static inline const struct dp_tensor *
tensor_of(struct dp_lcore *lc, const struct cais_hdr *h)
{
	uint64_t key = dp_tensor_key(rte_be_to_cpu_16(h->tenant), rte_be_to_cpu_16(h->session),
				     rte_be_to_cpu_32(h->tensor));

	if (lc->last_tensor && key == lc->last_key)
		return lc->last_tensor;
	lc->last_key = key;
	lc->last_tensor = dp_tensor_lookup(&lc->sw->tables, key);
	return lc->last_tensor;
}

void
dp_match_data(struct dp_lcore *lc, struct rte_mbuf *m)
{
	struct dp_switch *sw = lc->sw;
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct cais_hdr *h = (const struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF);
	const struct dp_tensor *t;
	const struct dp_session *s;
	struct dp_session_counters *sc;
	uint16_t slotf;
	unsigned int owner, si;

	if (unlikely(__atomic_load_n(&sw->mode, __ATOMIC_RELAXED) == DP_MODE_FWD_ONLY))
		return dp_reply_reject(lc, m, CAIS_R_FWD_ONLY, NULL);
	t = tensor_of(lc, h);
	if (unlikely(!t))
		return dp_reply_reject(lc, m, CAIS_R_UNKNOWN_TENSOR, NULL);
	s = t->s;
	sc = &s->part[lc->idx].c;
	switch (sender_check(m, f, s, dp_member_of(s, h->rank), !sw->pcfg.unguarded)) {
	case SENDER_OK:
		break;
	case SENDER_SPOOFED:
		sc->spoofed++;
		/* fall through */
	default:
		return dp_reply_reject(lc, m, CAIS_R_NOT_MEMBER, sc);
	}
	/* a leaf's partial sums (E9) join a round of any wire dtype */
	if (unlikely(h->dtype != t->wire && h->dtype != CAIS_DT_PARTIAL64))
		return dp_reply_reject(lc, m, CAIS_R_BAD_DTYPE, sc);
	if (unlikely(!count_ok(f, s, h)))
		return dp_reply_reject(lc, m, CAIS_R_BAD_COUNT, sc);
	slotf = rte_be_to_cpu_16(h->slot);
	if (unlikely((slotf & CAIS_SLOT_MASK) >= s->pool))
		return dp_reply_reject(lc, m, CAIS_R_NO_SLOT, sc);
	if (unlikely(cais_slot_field(rte_be_to_cpu_32(h->seq), s->pool) != slotf)) {
		sc->slot_mismatch++;
		return dp_drop(lc, m, DP_DROP_SLOT_MISMATCH);
	}
	/* the owner computes the same owner: a handed-off packet never moves twice */
	owner = dp_slot_of(sw, slotf, &si);
	if (owner != lc->idx)
		return dp_handoff(lc, owner, m);
	dp_action_data(lc, m, t, si);
}

/*
 * From the session's uplink (E9): the spine's address and CAIS port, and,
 * with the guards on, its MAC and the switch port toward it.
 */
static inline bool
from_uplink(const struct rte_mbuf *m, const uint8_t *f, const struct dp_uplink *up, bool guard)
{
	return dp_eq4(f + CAIS_ETH_HLEN + 12, &up->ip) &&
	       dp_eq2(f + CAIS_ETH_HLEN + CAIS_IP_HLEN, &up->port) &&
	       (!guard || (dp_eq6(f + 6, up->mac) && m->port == up->sw_port));
}

void
dp_match_answer(struct dp_lcore *lc, struct rte_mbuf *m)
{
	struct dp_switch *sw = lc->sw;
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct cais_hdr *h = (const struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF);
	const struct dp_tensor *t;
	const struct dp_session *s;
	uint16_t slotf;
	unsigned int owner, si;

	t = tensor_of(lc, h);
	if (!t || !t->s->up.on || !from_uplink(m, f, &t->s->up, !sw->pcfg.unguarded))
		return dp_drop(lc, m, DP_DROP_NOT_DATA);
	s = t->s;
	slotf = rte_be_to_cpu_16(h->slot);
	if (unlikely((slotf & CAIS_SLOT_MASK) >= s->pool ||
		     cais_slot_field(rte_be_to_cpu_32(h->seq), s->pool) != slotf)) {
		s->part[lc->idx].c.slot_mismatch++;
		return dp_drop(lc, m, DP_DROP_SLOT_MISMATCH);
	}
	owner = dp_slot_of(sw, slotf, &si);
	if (owner != lc->idx)
		return dp_handoff(lc, owner, m);
	dp_action_answer(lc, m, t, si);
}
