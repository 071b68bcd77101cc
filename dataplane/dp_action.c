/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The action: DATA that the match (dp_match.c) has checked, for a slot this
 * lcore owns, steps the slot's state machine (dp_slot.h) and folds its
 * payload into the slot's accumulator with the kernels of its wire dtype
 * (dp_agg.h), noting a payload that saturated on the way in (OVERFLOW). A
 * round it completes, or a RESULT a rank lost, goes on to dp_reply.c;
 * anything else is dropped.
 */
#include <rte_byteorder.h>

#include "dp_pipeline.h"

/* acc op= payload, for the tensor's reduce op (avg is aggregated as sum). @return saturated */
static inline bool
fold(const struct dp_agg_ops *k, uint8_t op, int64_t *acc, const void *payload, uint16_t count)
{
	if (op == CAIS_OP_MAX)
		return k->max(acc, payload, count);
	if (op == CAIS_OP_MIN)
		return k->min(acc, payload, count);
	return k->sum(acc, payload, count);
}

void
dp_action_data(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_tensor *t, uint16_t slotf)
{
	struct dp_switch *sw = lc->sw;
	struct dp_session *s = t->s;
	struct dp_session_part *pt = &s->part[lc->idx];
	struct dp_session_counters *sc = &pt->c;
	const struct cais_hdr *h = dp_mbuf_cais(m);
	unsigned int idx = slotf & CAIS_SLOT_MASK, set = slotf >> 15;
	unsigned int si = (idx / sw->n_lcores) * 2 + set;
	struct dp_slot *sl = &pt->slots[si];
	int64_t *acc = pt->acc + (size_t)si * s->elems;
	const void *payload = (const uint8_t *)h + CAIS_HDR_LEN;
	/* the match checked it: the tensor's wire dtype, so a kernel set's index */
	const struct dp_agg_ops *k = sw->agg->wire[h->dtype];
	uint16_t count = rte_be_to_cpu_16(h->count);
	uint8_t was = sl->state;
	bool complete;
	enum dp_verdict v;

	sc->retx += (h->flags & CAIS_F_RETX) != 0;
	v = dp_slot_step(sl, rte_be_to_cpu_32(h->seq), t->tensor, h->rank, count, h->dtype, s->n,
			 &complete);
	switch (v) {
	case DP_V_NEW:
		sc->data_rx++;
		sc->abandoned += was == DP_SLOT_OPEN;
		sl->t_start = lc->now;
		sl->ovf = k->load(acc, payload, count);
		break;
	case DP_V_ADD:
		sc->data_rx++;
		sl->ovf |= fold(k, t->op, acc, payload, count);
		break;
	case DP_V_RESEND:
		sc->resends++;
		return dp_reply_resend(lc, s, sl, acc, m, h->rank);
	case DP_V_DUPLICATE:
		sc->duplicates++;
		/* the sender retransmits for nothing: its DATA is in (E6) */
		if (h->flags & CAIS_F_RETX)
			return dp_reply_ack(lc, m, sl);
		return dp_drop(lc, m, DP_DROP_DUPLICATE);
	case DP_V_STALE:
		sc->stale++;
		return dp_drop(lc, m, DP_DROP_STALE);
	default:
		sc->inconsistent++;
		return dp_drop(lc, m, DP_DROP_INCONSISTENT);
	}
	if (!complete)
		return dp_free_later(lc, m);
	sc->rounds++;
	sc->hist[cmn_hist_bucket(lc->now - sl->t_start)]++;
	dp_reply_results(lc, s, sl, acc, m);
}
