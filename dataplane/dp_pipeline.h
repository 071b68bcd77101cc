/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Inside the pipeline: how a packet goes from one stage's file to the next,
 * and the output helpers every stage uses. Not for use outside dataplane/.
 *
 * A packet's path, file by file:
 *
 *   dp_lcore.c   the poll loop: RX burst and handoff ring -> parse
 *                (dp_parse.c), learn the source MAC (dp_l2.c), by class:
 *   dp_fwd.c       ARP request for the aggregator -> reply;
 *                  ordinary traffic -> forward or flood
 *   dp_match.c     DATA -> tensor lookup (dp_table.h), REJECT checks,
 *                  slot owner (here, or a handoff to the owner lcore)
 *   dp_action.c  the slot state machine (dp_slot.h), the accumulators
 *                (dp_agg.h); a complete round or a lost RESULT ->
 *   dp_reply.c   RESULT frames (one payload, n headers), REJECT frames
 *   dp_tx.c      TX buffers (two classes), handoff batches, deferred frees,
 *                all flushed once per poll (dp_lcore_flush())
 *
 * Each stage takes the mbuf over: it sends it, hands it on, or drops it.
 * No locks, no allocation but mbufs, no syscalls, no logging: counters only.
 */
#ifndef DP_PIPELINE_H
#define DP_PIPELINE_H

#include <stdint.h>

#include <rte_branch_prediction.h>
#include <rte_mbuf.h>

#include <cais/proto.h>

#include "dp_switch.h"

/* ---- dp_fwd.c: ARP and ordinary traffic ---- */

/** Answer an ARP request for the aggregator address (in place, back out its port). */
void dp_fwd_arp(struct dp_lcore *lc, struct rte_mbuf *m);

/** Forward m to the port its destination MAC was learned on, or flood it. */
void dp_fwd_l2(struct dp_lcore *lc, struct rte_mbuf *m);

/* ---- dp_match.c ---- */

/** DATA m (parsed): match, check, then act here or hand it to the slot's owner. */
void dp_match_data(struct dp_lcore *lc, struct rte_mbuf *m);

/**
 * A RESULT, REJECT or ACK m to the aggregator (parsed): from the uplink of
 * its session (E9), acted on by the slot's owner; any other dropped (NOT_DATA).
 */
void dp_match_answer(struct dp_lcore *lc, struct rte_mbuf *m);

/* ---- dp_action.c ---- */

/**
 * The action on DATA m for a slot this lcore owns, matched and checked.
 * @param t  its tensor entry
 * @param si its (slot, set) among this lcore's in the session's part:
 *           (index / n_lcores) x 2 + set (dp_slot_owner()), from a slot
 *           field consistent with its seq
 */
void dp_action_data(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_tensor *t,
		    unsigned int si);

/**
 * The action on a spine's answer m (E9) for a slot this lcore owns, from the
 * session's uplink: a RESULT completes the round that waits for it (RESULT
 * to every local member), a REJECT goes on to them, an ACK is dropped.
 */
void dp_action_answer(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_tensor *t,
		      unsigned int si);

/* ---- dp_reply.c: RESULT and REJECT ---- */

/**
 * The round in sl is complete: write its RESULT payload (in the round's wire
 * dtype) into m, the completing DATA (or a spine's RESULT, E9), and send it
 * to every member: m itself to member `to`, the others the DATA the round
 * kept of theirs (kept: by member, NULL where none; kept NULL: none), or
 * copies. Empties kept. wait: the members whose RESULT carries WAIT (a
 * bitmap by rank, dp_action.c), NULL for none.
 */
void dp_reply_results(struct dp_lcore *lc, struct dp_session *s, struct dp_slot *sl,
		      const int64_t *acc, struct rte_mbuf *m, struct rte_mbuf **kept, uint8_t to,
		      const uint64_t *wait);

/**
 * Send the partial sum of a leaf's complete round (acc, sl in DP_SLOT_UP)
 * to its spine as PARTIAL64 DATA of its uplink rank, in m (a DATA or a
 * fresh mbuf with room for it); retx: as a retransmission.
 */
void dp_reply_uplink(struct dp_lcore *lc, struct dp_session *s, struct dp_slot *sl,
		     const int64_t *acc, struct rte_mbuf *m, bool retx);

/**
 * The spine's REJECT m of a leaf's round sl: a REJECT of the same reason to
 * every local member (within each one's REJECT budget), dtype the tensor's.
 */
void dp_reply_reject_members(struct dp_lcore *lc, struct dp_session *s, const struct dp_slot *sl,
			     struct rte_mbuf *m);

/**
 * A NACK (E11) of the open round sl on this lcore to member r, missing from
 * it while a later round completed: its DATA was lost.
 */
void dp_reply_nack(struct dp_lcore *lc, const struct dp_session *s, const struct dp_slot *sl,
		   unsigned int r);

/**
 * Unicast the stored RESULT of a complete round to rank, reusing its DATA
 * mbuf m; wait: with WAIT (E11).
 */
void dp_reply_resend(struct dp_lcore *lc, const struct dp_session *s, const struct dp_slot *sl,
		     const int64_t *acc, struct rte_mbuf *m, uint8_t rank, bool wait);

/**
 * DATA m, a retransmission, found its contribution in the open round of sl:
 * turn it around as an ACK (docs/PROTOCOL.md E6) within the sender's ACK
 * budget, else drop it (a duplicate).
 */
void dp_reply_ack(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_slot *sl);

/**
 * Take one answer from the ACK budget of DATA m's sender (ACKs, and the
 * answers to a QUERY, E12). @return false when it is spent (counted)
 */
bool dp_reply_budget(struct dp_lcore *lc, const struct rte_mbuf *m);

/**
 * Turn DATA m around to its sender as a header-only answer of type
 * (CAIS_TYPE_ACK or CAIS_TYPE_NACK), echoing its fields and rank, flags
 * the CONGESTED of sl's RESULT: no budget taken (dp_reply_budget()).
 */
void dp_reply_answer(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_slot *sl,
		     uint8_t type);

/**
 * Turn DATA m around as a REJECT of why to its sender (echoing its dtype),
 * unless the sender's REJECT budget is spent (then m is dropped).
 * @param sc the session's counters, when the session is known; else NULL
 */
void dp_reply_reject(struct dp_lcore *lc, struct rte_mbuf *m, enum cais_reason why,
		     struct dp_session_counters *sc);

/* ---- dp_tx.c: output buffers; their slow paths there, their fast paths here ---- */

/** Send port's TX buffers, the high class first. */
void dp_tx_flush(struct dp_lcore *lc, uint16_t port);

/** Move the packets staged for owner into its ring (the rest are dropped). */
void dp_handoff_flush(struct dp_lcore *lc, unsigned int owner);

/** Free the mbufs put aside by dp_free_later(). */
void dp_free_flush(struct dp_lcore *lc);

/** Free m with the next batch. */
static inline void
dp_free_later(struct dp_lcore *lc, struct rte_mbuf *m)
{
	lc->free[lc->n_free++] = m;
	if (unlikely(lc->n_free == RTE_DIM(lc->free)))
		dp_free_flush(lc);
}

/** Drop m, counting why. */
static inline void
dp_drop(struct dp_lcore *lc, struct rte_mbuf *m, enum dp_drop why)
{
	lc->c.drops[why]++;
	dp_free_later(lc, m);
}

/** Queue m for port, normal class. */
static inline void
dp_tx(struct dp_lcore *lc, uint16_t port, struct rte_mbuf *m)
{
	struct dp_txbuf *b = &lc->tx[port];

	b->m[b->n++] = m;
	if (unlikely(b->n >= lc->sw->normal_cap))
		dp_tx_flush(lc, port);
}

/** Queue m for port, high class. */
static inline void
dp_tx_high(struct dp_lcore *lc, uint16_t port, struct rte_mbuf *m)
{
	struct dp_txbuf *b = &lc->tx_hi[port];

	b->m[b->n++] = m;
	if (unlikely(b->n == DP_TX_BUF))
		dp_tx_flush(lc, port);
}

/** Stage m for owner's ring. */
static inline void
dp_handoff(struct dp_lcore *lc, unsigned int owner, struct rte_mbuf *m)
{
	struct dp_handoff *ho = &lc->out[owner];

	ho->m[ho->n++] = m;
	if (ho->n == DP_BURST)
		dp_handoff_flush(lc, owner);
}

/*
 * Slots are dealt to the data lcores in turn: slot index idx is owned by
 * lcore idx mod n_lcores, as the (idx / n_lcores)-th of its slots (in
 * dp_session_part). Both by a reciprocal, a multiply and shifts, not a
 * divide: every DATA asks.
 */
static inline unsigned int
dp_slot_owner(const struct dp_switch *sw, unsigned int idx, unsigned int *local)
{
	unsigned int q = rte_reciprocal_divide(idx, sw->lc_div);

	*local = q;
	return idx - q * sw->n_lcores;
}

/**
 * The lcore that owns the slot of slot field slotf (CAIS header: index and
 * set bit); *si: its (slot, set) in that lcore's part of the session,
 * (index / n_lcores) x 2 + set.
 */
static inline unsigned int
dp_slot_of(const struct dp_switch *sw, uint16_t slotf, unsigned int *si)
{
	unsigned int local, owner = dp_slot_owner(sw, slotf & CAIS_SLOT_MASK, &local);

	*si = local * 2 + (slotf >> 15);
	return owner;
}

/** Make m a single segment of len bytes. */
static inline void
dp_mbuf_set_len(struct rte_mbuf *m, uint32_t len)
{
	m->data_len = (uint16_t)len;
	m->pkt_len = len;
}

/** The CAIS header of a DATA frame (at its fixed offset: no IPv4 options). */
static inline struct cais_hdr *
dp_mbuf_cais(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod_offset(m, struct cais_hdr *, CAIS_FRAME_HDR_OFF);
}

#endif /* DP_PIPELINE_H */
