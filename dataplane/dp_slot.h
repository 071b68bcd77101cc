/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The slot state machine of docs/PROTOCOL.md section 3, for one (slot, set).
 *
 * dp_slot_step() decides what a DATA contribution does to the state; the
 * caller applies the verdict to the accumulator (dp_agg.h). Kept apart
 * from the accumulator so that it is tested exhaustively on its own.
 *
 * A round keeps the count, wire dtype (E4) and tensor of the DATA that
 * opened it: a contribution that differs in any of them is inconsistent.
 * A complete round of a leaf (E9) becomes DP_SLOT_UP, not DONE, until the
 * spine's RESULT comes (the caller's, dp_action.c).
 */
#ifndef DP_SLOT_H
#define DP_SLOT_H

#include <stdbool.h>
#include <stdint.h>

#include <cais/proto.h>

enum dp_slot_state {
	DP_SLOT_EMPTY = 0, /**< never used: the first DATA starts a round */
	DP_SLOT_OPEN,	   /**< round in progress */
	DP_SLOT_DONE,	   /**< all n ranks seen; the accumulator is the RESULT */
	/**
	 * A leaf's round (E9): all n local ranks seen, the accumulator is their
	 * partial sum, sent up; waits for the spine's RESULT, which makes it DONE.
	 */
	DP_SLOT_UP,
};

/** What a contribution does. */
enum dp_verdict {
	DP_V_NEW,	   /**< newer seq (or empty slot): a new round; acc = payload */
	DP_V_ADD,	   /**< joins the open round: acc op= payload */
	DP_V_RESEND,	   /**< round complete and rank seen: unicast the stored RESULT */
	DP_V_DUPLICATE,	   /**< rank already counted in the open round: drop */
	DP_V_STALE,	   /**< seq older than the round held: drop */
	DP_V_INCONSISTENT, /**< count, dtype or tensor differ from the round's: drop */
	DP_V_UP_WAIT,	   /**< rank counted, the round waits for the spine (E9) */
};

#define DP_SEEN_WORDS ((CAIS_MAX_WORLD + 1 + 63) / 64)

/** State of one (slot, set): one cache line. */
struct dp_slot {
	uint32_t seq;	  /**< the round held */
	uint32_t tensor;  /**< the round's tensor */
	uint16_t count;	  /**< the round's element count */
	uint8_t state;	  /**< enum dp_slot_state */
	uint8_t ovf;	  /**< the round saturated (OVERFLOW): on the way in or in its RESULT */
	uint16_t n_seen;  /**< ranks counted */
	uint8_t dtype;	  /**< its contributions' dtype, CAIS_DT_* (PARTIAL64 from leaves, E9) */
	uint8_t out;	  /**< its RESULT's: the tensor's wire dtype (the caller sets it) */
	uint64_t t_start; /**< TSC of the round's first DATA */
	union {
		uint64_t t_up;	 /**< DP_SLOT_UP: TSC of its partial's last send up */
		uint64_t t_nack; /**< DP_SLOT_OPEN: TSC of its last NACKs, 0: none (E11) */
	};
	uint64_t seen[DP_SEEN_WORDS]; /**< bitmap of ranks counted */
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct dp_slot) == 64, "a slot's state is one cache line");

static inline bool
dp_slot_seen(const struct dp_slot *sl, uint8_t rank)
{
	return (sl->seen[rank >> 6] >> (rank & 63)) & 1u;
}

static inline void
dp_slot_open(struct dp_slot *sl, uint32_t seq, uint32_t tensor, uint8_t rank, uint16_t count,
	     uint8_t dtype)
{
	sl->seq = seq;
	sl->tensor = tensor;
	sl->count = count;
	sl->dtype = dtype;
	sl->state = DP_SLOT_OPEN;
	sl->ovf = 0;
	sl->n_seen = 1;
	for (unsigned int w = 0; w < DP_SEEN_WORDS; w++)
		sl->seen[w] = 0;
	sl->seen[rank >> 6] = 1ull << (rank & 63);
}

/**
 * Apply one DATA contribution to a slot's state.
 * @param sl       the (slot, set) named by the packet
 * @param seq      the packet's seq (already checked against slot and set)
 * @param tensor   the packet's tensor
 * @param rank     the sender's rank, < n
 * @param count    the packet's count
 * @param dtype    the packet's wire dtype
 * @param n        the session's world size
 * @param complete set to true when this contribution completed the round
 * @return the verdict; the state is changed only for DP_V_NEW and DP_V_ADD
 */
static inline enum dp_verdict
dp_slot_step(struct dp_slot *sl, uint32_t seq, uint32_t tensor, uint8_t rank, uint16_t count,
	     uint8_t dtype, uint16_t n, bool *complete)
{
	*complete = false;
	if (sl->state == DP_SLOT_EMPTY || cais_seq_before(sl->seq, seq)) {
		dp_slot_open(sl, seq, tensor, rank, count, dtype);
		if (n == 1) {
			sl->state = DP_SLOT_DONE;
			*complete = true;
		}
		return DP_V_NEW;
	}
	if (seq != sl->seq)
		return DP_V_STALE;
	if (count != sl->count || dtype != sl->dtype || tensor != sl->tensor)
		return DP_V_INCONSISTENT;
	if (dp_slot_seen(sl, rank))
		return sl->state == DP_SLOT_DONE ? DP_V_RESEND
		       : sl->state == DP_SLOT_UP ? DP_V_UP_WAIT
						 : DP_V_DUPLICATE;
	if (sl->state == DP_SLOT_DONE) /* unreachable: a done round has seen every rank */
		return DP_V_DUPLICATE;
	sl->seen[rank >> 6] |= 1ull << (rank & 63);
	if (++sl->n_seen == n) {
		sl->state = DP_SLOT_DONE;
		*complete = true;
	}
	return DP_V_ADD;
}

/**
 * What a QUERY (docs/PROTOCOL.md E12) for rank's DATA of seq finds, the
 * state left as it is: the verdict its DATA would get, read as
 *  - DP_V_NEW, DP_V_ADD: not in (no round of seq yet, or seq's round
 *    misses rank);
 *  - DP_V_DUPLICATE, DP_V_UP_WAIT: in, the round waits;
 *  - DP_V_RESEND: the round is complete;
 *  - DP_V_STALE, DP_V_INCONSISTENT: as for DATA.
 */
static inline enum dp_verdict
dp_slot_query(const struct dp_slot *sl, uint32_t seq, uint32_t tensor, uint8_t rank, uint16_t count,
	      uint8_t dtype)
{
	if (sl->state == DP_SLOT_EMPTY || cais_seq_before(sl->seq, seq))
		return DP_V_NEW;
	if (seq != sl->seq)
		return DP_V_STALE;
	if (count != sl->count || dtype != sl->dtype || tensor != sl->tensor)
		return DP_V_INCONSISTENT;
	if (!dp_slot_seen(sl, rank))
		return sl->state == DP_SLOT_DONE ? DP_V_DUPLICATE /* unreachable, as above */
						 : DP_V_ADD;
	return sl->state == DP_SLOT_DONE ? DP_V_RESEND
	       : sl->state == DP_SLOT_UP ? DP_V_UP_WAIT
					 : DP_V_DUPLICATE;
}

#endif /* DP_SLOT_H */
