/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The match: DATA from the RX burst (dp_lcore.c), parsed, or handed over by
 * another lcore, is looked up by (tenant, session, tensor) and checked, in
 * the order of docs/PROTOCOL.md E1: FWD_ONLY, UNKNOWN_TENSOR, NOT_MEMBER,
 * BAD_DTYPE (not the tensor's wire dtype, E4), BAD_COUNT (count outside
 * 1..E, or a payload shorter than count elements of that dtype), NO_SLOT,
 * each failure a REJECT (dp_reply.c); then slot and set against seq (a
 * silent drop). What passes goes to the action (dp_action.c) on the lcore
 * that owns its slot: here, or through a handoff (dp_tx.c) to the owner,
 * which runs the match again on it, since the tables may have changed in
 * between.
 */
#include <string.h>

#include <rte_byteorder.h>

#include "dp_pipeline.h"

/* The sender is the member registered for its rank: IPv4 address and UDP port. */
static inline bool
from_member(const uint8_t *f, const struct dp_session *s, uint8_t rank)
{
	const struct dp_member *mb = &s->members[rank < s->n ? rank : 0];

	return rank < s->n && dp_eq4(f + CAIS_ETH_HLEN + 12, &mb->ip) &&
	       dp_eq2(f + CAIS_ETH_HLEN + CAIS_IP_HLEN, &mb->port);
}

/* count is 1..E, and the UDP length holds count elements of dtype (a wire dtype). */
static inline bool
count_ok(const uint8_t *f, const struct dp_session *s, uint8_t dtype, uint16_t count)
{
	uint16_t udp_len;
	uint32_t payload_len;

	memcpy(&udp_len, f + CAIS_ETH_HLEN + CAIS_IP_HLEN + 4, 2);
	payload_len = rte_be_to_cpu_16(udp_len) - CAIS_UDP_HLEN - CAIS_HDR_LEN;
	return count != 0 && count <= s->elems && cais_payload_bytes(dtype, count) <= payload_len;
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
	unsigned int owner;

	if (unlikely(__atomic_load_n(&sw->mode, __ATOMIC_RELAXED) == DP_MODE_FWD_ONLY))
		return dp_reply_reject(lc, m, CAIS_R_FWD_ONLY, NULL);
	t = dp_tensor_lookup(&sw->tables, dp_tensor_key(rte_be_to_cpu_16(h->tenant),
							rte_be_to_cpu_16(h->session),
							rte_be_to_cpu_32(h->tensor)));
	if (unlikely(!t))
		return dp_reply_reject(lc, m, CAIS_R_UNKNOWN_TENSOR, NULL);
	s = t->s;
	sc = &s->part[lc->idx].c;
	if (unlikely(!from_member(f, s, h->rank)))
		return dp_reply_reject(lc, m, CAIS_R_NOT_MEMBER, sc);
	if (unlikely(h->dtype != t->wire))
		return dp_reply_reject(lc, m, CAIS_R_BAD_DTYPE, sc);
	if (unlikely(!count_ok(f, s, h->dtype, rte_be_to_cpu_16(h->count))))
		return dp_reply_reject(lc, m, CAIS_R_BAD_COUNT, sc);
	slotf = rte_be_to_cpu_16(h->slot);
	if (unlikely((slotf & CAIS_SLOT_MASK) >= s->pool))
		return dp_reply_reject(lc, m, CAIS_R_NO_SLOT, sc);
	if (unlikely(cais_slot_field(rte_be_to_cpu_32(h->seq), s->pool) != slotf)) {
		sc->slot_mismatch++;
		return dp_drop(lc, m, DP_DROP_SLOT_MISMATCH);
	}
	/* the owner computes the same owner: a handed-off packet never moves twice */
	owner = sw->n_lcores == 1 ? 0 : (slotf & CAIS_SLOT_MASK) % sw->n_lcores;
	if (owner != lc->idx)
		return dp_handoff(lc, owner, m);
	dp_action_data(lc, m, t, slotf);
}
