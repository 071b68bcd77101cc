/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The action: DATA that the match (dp_match.c) has checked, for a slot this
 * lcore owns, steps the slot's state machine (dp_slot.h) and folds its
 * payload into the slot's accumulator with the kernels of its wire dtype
 * (dp_agg.h), noting a payload that saturated on the way in (OVERFLOW). A
 * round it completes, or a RESULT a rank lost, goes on to dp_reply.c. DATA
 * that joins a round without completing it waits in the round's slot, kept
 * to carry its sender's RESULT (DP_KEEP_*: no mbuf allocated nor freed per
 * RESULT), or is freed where the round cannot keep it; a newer round that
 * takes the slot of an open one frees what that one kept. Anything else is
 * dropped. In a session with loss_hints, a round that completes while older
 * ones wait on this lcore marks the RESULTs of their members WAIT and NACKs
 * the ranks they miss (docs/PROTOCOL.md E11, older_open()). A QUERY (E12)
 * changes nothing: the slot's state answers it (query()).
 *
 * A leaf (a session with an uplink, docs/PROTOCOL.md E9) sends a complete
 * round's partial sum up instead (DP_SLOT_UP) and completes it on the
 * spine's RESULT: the local ranks then get the spine's sums. A local rank's
 * retransmission into a round that waits for the spine is ACKed and sends
 * the partial up again (at most once per DP_UPLINK_RESEND_US a round), and
 * so does the spine's NACK of it (E11): the agents' timers are the tree's,
 * no timer runs here.
 */
#include <string.h>

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

/* Whether us microseconds have passed since TSC t, at this burst's time. */
static inline bool
elapsed_us(const struct dp_lcore *lc, uint64_t t, unsigned int us)
{
	return lc->now - t >= lc->sw->hz / 1000000 * us;
}

/*
 * WAIT and NACK (docs/PROTOCOL.md E11). A round that completes while older
 * rounds are still open on this lcore means that a rank's DATA of each of
 * those was lost: every member's DATA of the complete round came, and a
 * rank sends its chunks in seq order. The members counted in one of the
 * older rounds get the RESULT with WAIT: it is no evidence that a DATA or
 * RESULT of theirs was lost, their DATA is in and waits for others. The
 * members missing from one of them get a NACK for it, when the complete
 * round is 2, 4, 8, ... of this lcore's rounds after it and the last NACKs
 * of that round went DP_NACK_GAP_US before (a NACK or its retransmission
 * lost again gets another; a rank not scheduled meanwhile is not sent one
 * per doubling), so that the rank that must retransmit does so at once,
 * and only it.
 *
 * pt->older bounds the open rounds' seqs from below: a new round older
 * than it lowers it, and a completion that finds no open round before its
 * own raises it past its own. Without loss rounds complete in order, each
 * finds older at its own seq, and nothing is scanned: a compare a round.
 */
static inline bool
round_open(const struct dp_slot *sl, uint32_t seq)
{
	return (sl->state == DP_SLOT_OPEN || sl->state == DP_SLOT_UP) && sl->seq == seq;
}

/* The round in sl started on this lcore: no NACK of it yet. */
static inline void
round_started(struct dp_session_part *pt, struct dp_slot *sl)
{
	uint32_t seq = sl->seq;

	sl->t_nack = 0;
	if (unlikely(!pt->started) || cais_seq_before(seq, pt->older)) {
		pt->started = true;
		pt->older = seq;
	}
}

/* Round sl's last NACKs went DP_NACK_GAP_US before, or none did (E11, E12). */
static inline bool
nack_gap_over(const struct dp_lcore *lc, const struct dp_slot *sl)
{
	return sl->t_nack == 0 || elapsed_us(lc, sl->t_nack, DP_NACK_GAP_US);
}

/*
 * Whether open round y (in sl) gets NACKs now that round seq completed:
 * they are 2, 4, 8, ... of this lcore's rounds apart, and y's last NACKs
 * went at least DP_NACK_GAP_US before.
 */
static inline bool
nack_due(const struct dp_lcore *lc, const struct dp_slot *sl, uint32_t y, uint32_t seq)
{
	const struct dp_switch *sw = lc->sw;
	uint32_t d = seq - y;

	if (sw->n_lcores > 1)
		d = rte_reciprocal_divide(d, sw->lc_div);
	return d >= 2 && (d & (d - 1)) == 0 && nack_gap_over(lc, sl);
}

/* NACK every member that open round sl (n members) misses. */
static void
nack_missing(struct dp_lcore *lc, const struct dp_session *s, const struct dp_slot *sl)
{
	for (unsigned int w = 0; w * 64 < s->n; w++) {
		uint64_t miss = ~sl->seen[w];

		if (s->n - w * 64 < 64)
			miss &= (1ull << (s->n - w * 64)) - 1;
		for (; miss; miss &= miss - 1)
			dp_reply_nack(lc, s, sl, w * 64 + (unsigned int)__builtin_ctzll(miss));
	}
}

/* older_open() past its fast path: the rounds from pt->older up to seq looked at. */
static __rte_noinline bool
older_scan(struct dp_lcore *lc, const struct dp_session *s, struct dp_session_part *pt,
	   uint32_t seq, uint64_t *wait, bool nack)
{
	bool open = false, any = false;
	unsigned int steps = 0;

	for (unsigned int w = 0; w < DP_SEEN_WORDS; w++)
		wait[w] = 0;
	for (uint32_t y = pt->older; cais_seq_before(y, seq); y++) {
		unsigned int si;
		struct dp_slot *sl;

		if (++steps > DP_WAIT_SCAN)
			return false;
		if (dp_slot_of(lc->sw, cais_slot_field(y, s->pool), &si) != lc->idx)
			continue; /* another lcore's round */
		sl = &pt->slots[si];
		if (!round_open(sl, y)) {
			if (!open)
				pt->older = y + 1; /* closed, and every one before it */
			continue;
		}
		open = true;
		for (unsigned int w = 0; w < DP_SEEN_WORDS; w++)
			wait[w] |= sl->seen[w];
		if (nack && sl->state == DP_SLOT_OPEN && nack_due(lc, sl, y, seq)) {
			nack_missing(lc, s, sl);
			sl->t_nack = lc->now;
		}
	}
	if (!open) {
		pt->older = seq + 1; /* none before it is open, and it is complete */
		return false;
	}
	for (unsigned int w = 0; w < DP_SEEN_WORDS; w++)
		any |= wait[w] != 0;
	return any;
}

/*
 * Round seq is complete here: wait[] (DP_SEEN_WORDS words) = the members
 * counted in an open round before it on this lcore, and with nack those
 * rounds' NACKs (above). @return whether any member waits; false also when
 * the rounds before it are more than DP_WAIT_SCAN (none is told to wait
 * on what was not looked at).
 */
static inline bool
older_open(struct dp_lcore *lc, const struct dp_session *s, struct dp_session_part *pt,
	   uint32_t seq, uint64_t *wait, bool nack)
{
	if (!s->loss_hints)
		return false;
	if (likely(pt->older == seq)) { /* in order: none before it is open */
		pt->older = seq + 1;
		return false;
	}
	if (!cais_seq_before(pt->older, seq))
		return false; /* a RESULT again of a round before every open one */
	return older_scan(lc, s, pt, seq, wait, nack);
}

/*
 * A local rank waits for leaf round sl's RESULT from the spine (E9): its
 * partial goes up again, at most once per DP_UPLINK_RESEND_US a round.
 */
static void
up_again(struct dp_lcore *lc, struct dp_session *s, struct dp_slot *sl, const int64_t *acc)
{
	struct rte_mbuf *up;

	if (!elapsed_us(lc, sl->t_up, DP_UPLINK_RESEND_US))
		return;
	up = rte_pktmbuf_alloc(lc->sw->pool);
	if (unlikely(!up)) {
		lc->c.drops[DP_DROP_NO_MBUF]++;
		return;
	}
	sl->t_up = lc->now;
	dp_reply_uplink(lc, s, sl, acc, up, true);
}

/*
 * The stored RESULT of complete round sl again, to member r in DATA m (its
 * retransmission or QUERY), with WAIT where an older open round has r.
 */
static void
resend(struct dp_lcore *lc, const struct dp_session *s, struct dp_session_part *pt,
       const struct dp_slot *sl, const int64_t *acc, struct rte_mbuf *m, uint8_t r)
{
	uint64_t wait[DP_SEEN_WORDS];
	bool any = older_open(lc, s, pt, sl->seq, wait, false);

	pt->c.resends++;
	dp_reply_resend(lc, s, sl, acc, m, r, any && ((wait[r >> 6] >> (r & 63)) & 1u));
}

/*
 * A QUERY found member r's DATA of seq in its open round (E12): r's DATA of
 * the older rounds of the same flow (seqs equal to seq modulo the member's
 * flows, E7) left before it, on the same path. Each such round open on this
 * lcore that misses r lost it: r gets a NACK for it, within the round's
 * NACK gap (E11: its last NACKs went DP_NACK_GAP_US before, or none did),
 * so that QUERYs after a retransmission still on its way do not send it
 * again. On a leaf (E9), each such round that waits for the spine sends
 * its partial up again (up_again(): at most once per DP_UPLINK_RESEND_US a
 * round), as the QUERY's own does: libcais sends a QUERY in place of a
 * probe of its older chunks (E12), and the probes' retransmissions were
 * what repaired a partial lost on its way up. The rounds from pt->older
 * (the oldest that may be open) are looked at, DP_WAIT_SCAN at most, the
 * newest.
 */
static void
query_older(struct dp_lcore *lc, struct dp_session *s, struct dp_session_part *pt, uint32_t seq,
	    uint8_t r)
{
	uint32_t k = s->members[r].n_ports, y = pt->older;

	if (!cais_seq_before(y, seq))
		return; /* none before it is open */
	if (seq - y > DP_WAIT_SCAN)
		y = seq - DP_WAIT_SCAN;
	y += (seq - y) % k; /* the first of the flow's seqs */
	for (; cais_seq_before(y, seq); y += k) {
		unsigned int si;
		struct dp_slot *sl;

		if (dp_slot_of(lc->sw, cais_slot_field(y, s->pool), &si) != lc->idx)
			continue; /* another lcore's round */
		sl = &pt->slots[si];
		if (sl->seq != y)
			continue;
		if (sl->state == DP_SLOT_UP) {
			up_again(lc, s, sl, pt->acc + (size_t)si * s->elems);
		} else if (sl->state == DP_SLOT_OPEN && !dp_slot_seen(sl, r) &&
			   nack_gap_over(lc, sl)) {
			dp_reply_nack(lc, s, sl, r);
			sl->t_nack = lc->now;
		}
	}
}

/*
 * A QUERY (docs/PROTOCOL.md E12): is member r's DATA of seq in? It left
 * after that DATA on the same flow, so the round's state answers, once per
 * QUERY, within the sender's ACK budget: a NACK when the DATA is not in (no
 * round of seq yet, or one that misses r: it was lost), an ACK when it is
 * and the round waits (with loss_hints, and NACKs of r's older rounds that
 * miss it, query_older(); a leaf's round that waits for the spine sends
 * its partial up again, as for a retransmission), the stored RESULT when
 * the round is complete.
 * A stale or inconsistent QUERY is dropped, as its DATA would be. Nothing
 * is added nor changed.
 */
static void
query(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_tensor *t, unsigned int si)
{
	struct dp_session *s = t->s;
	struct dp_session_part *pt = &s->part[lc->idx];
	const struct cais_hdr *h = dp_mbuf_cais(m);
	struct dp_slot *sl = &pt->slots[si];
	int64_t *acc = pt->acc + (size_t)si * s->elems;
	uint8_t r = dp_member_of(s, h->rank);
	uint32_t seq = rte_be_to_cpu_32(h->seq);
	enum dp_verdict v =
	    dp_slot_query(sl, seq, t->tensor, r, rte_be_to_cpu_16(h->count), h->dtype);

	lc->c.queries++;
	if (v == DP_V_STALE) {
		pt->c.stale++;
		return dp_drop(lc, m, DP_DROP_STALE);
	}
	if (v == DP_V_INCONSISTENT) {
		pt->c.inconsistent++;
		return dp_drop(lc, m, DP_DROP_INCONSISTENT);
	}
	if (!dp_reply_budget(lc, m))
		return dp_drop(lc, m, DP_DROP_QUERY_LIMITED);
	switch (v) {
	case DP_V_NEW:
	case DP_V_ADD:
		return dp_reply_answer(lc, m, sl, CAIS_TYPE_NACK);
	case DP_V_RESEND:
		return resend(lc, s, pt, sl, acc, m, r);
	case DP_V_UP_WAIT:
		up_again(lc, s, sl, acc);
		/* fall through */
	default: /* DUPLICATE, UP_WAIT: in, the round waits */
		if (s->loss_hints)
			query_older(lc, s, pt, seq, r);
		return dp_reply_answer(lc, m, sl, CAIS_TYPE_ACK);
	}
}

/* The DATA an abandoned round kept: freed (a newer round takes the slot). */
static inline void
kept_free(struct dp_lcore *lc, struct rte_mbuf **kept, uint16_t n)
{
	for (unsigned int r = 0; r < n; r++)
		if (kept[r]) {
			dp_free_later(lc, kept[r]);
			kept[r] = NULL;
		}
}

void
dp_action_data(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_tensor *t, unsigned int si)
{
	struct dp_switch *sw = lc->sw;
	struct dp_session *s = t->s;
	struct dp_session_part *pt = &s->part[lc->idx];
	struct dp_session_counters *sc = &pt->c;
	const struct cais_hdr *h = dp_mbuf_cais(m);
	struct dp_slot *sl = &pt->slots[si];
	int64_t *acc = pt->acc + (size_t)si * s->elems;
	/* the round's kept DATA, by member (DP_KEEP_*); NULL: the session keeps none */
	struct rte_mbuf **kept = pt->kept ? pt->kept + (size_t)si * s->keep : NULL;
	const void *payload = (const uint8_t *)h + CAIS_HDR_LEN;
	/* the match checked it: the tensor's wire dtype, so a kernel set's index */
	const struct dp_agg_ops *k = sw->agg->wire[h->dtype];
	uint16_t count = rte_be_to_cpu_16(h->count);
	uint64_t wait[DP_SEEN_WORDS]; /* older_open() */
	uint8_t was = sl->state;
	/* a leaf's partial saturated on its way in (E9); a host's DATA has no OVERFLOW */
	bool leaf_ovf = h->dtype == CAIS_DT_PARTIAL64 && (h->flags & CAIS_F_OVERFLOW);
	bool complete, any;
	enum dp_verdict v;

	if (unlikely(h->flags & CAIS_F_QUERY))
		return query(lc, m, t, si);
	sc->retx += (h->flags & CAIS_F_RETX) != 0;
	/*
	 * A round's contributions share a dtype: the wire's, or PARTIAL64 from
	 * leaves (E9), never both, so the wire kernels never meet an accumulator
	 * a 64-bit partial filled (only PARTIAL64's own saturate at the int64
	 * range). Its RESULT is in the wire dtype either way.
	 */
	v = dp_slot_step(sl, rte_be_to_cpu_32(h->seq), t->tensor, dp_member_of(s, h->rank), count,
			 h->dtype, s->n, &complete);
	switch (v) {
	case DP_V_NEW:
		sc->data_rx++;
		sc->abandoned += was == DP_SLOT_OPEN || was == DP_SLOT_UP;
		if (kept && was == DP_SLOT_OPEN)
			kept_free(lc, kept, s->keep);
		sl->t_start = lc->now;
		sl->out = t->wire;
		if (s->loss_hints)
			round_started(pt, sl);
		sl->ovf = k->load(acc, payload, count) | leaf_ovf;
		break;
	case DP_V_ADD:
		sc->data_rx++;
		sl->ovf |= fold(k, t->op, acc, payload, count) | leaf_ovf;
		break;
	case DP_V_UP_WAIT:
		sc->duplicates++;
		if (!(h->flags & CAIS_F_RETX))
			return dp_drop(lc, m, DP_DROP_DUPLICATE);
		up_again(lc, s, sl, acc);
		return dp_reply_ack(lc, m, sl);
	case DP_V_RESEND:
		return resend(lc, s, pt, sl, acc, m, dp_member_of(s, h->rank));
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
	if (!complete) {
		/* kept until the round completes, to carry this member's RESULT */
		if (kept && cais_payload_bytes(h->dtype, count) <= DP_RESULT_COPY_MAX) {
			if (likely(lc->keep_ok)) {
				kept[dp_member_of(s, h->rank)] = m;
				return;
			}
			lc->c.keep_refused++;
		}
		return dp_free_later(lc, m);
	}
	if (s->up.on) {
		sl->state = DP_SLOT_UP;
		sl->t_up = lc->now;
		return dp_reply_uplink(lc, s, sl, acc, m, false);
	}
	sc->rounds++;
	sc->hist[cmn_hist_bucket(lc->now - sl->t_start)]++;
	any = older_open(lc, s, pt, sl->seq, wait, true);
	dp_reply_results(lc, s, sl, acc, m, kept, dp_member_of(s, h->rank), any ? wait : NULL);
}

/* The spine's RESULT m for the round sl waits for: its sums become the round's. */
static void
up_result(struct dp_lcore *lc, struct rte_mbuf *m, struct dp_session *s, struct dp_slot *sl,
	  int64_t *acc)
{
	struct dp_session_counters *sc = &s->part[lc->idx].c;
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct cais_hdr *h = (const struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF);
	uint64_t wait[DP_SEEN_WORDS];
	uint16_t udp_len;
	bool any;

	memcpy(&udp_len, f + CAIS_ETH_HLEN + CAIS_IP_HLEN + 4, 2);
	if (h->dtype != sl->out || rte_be_to_cpu_16(h->count) != sl->count ||
	    rte_be_to_cpu_16(udp_len) <
		CAIS_UDP_HLEN + CAIS_HDR_LEN + cais_payload_bytes(sl->out, sl->count) ||
	    !dp_agg_result(acc, (const uint8_t *)h + CAIS_HDR_LEN, sl->count, sl->out)) {
		sc->inconsistent++;
		return dp_drop(lc, m, DP_DROP_INCONSISTENT);
	}
	sl->ovf |= !!(h->flags & CAIS_F_OVERFLOW);
	sl->state = DP_SLOT_DONE;
	sc->up_results++;
	sc->rounds++;
	sc->hist[cmn_hist_bucket(lc->now - sl->t_start)]++;
	/* a leaf keeps no DATA (its sessions' keep is 0) */
	any = older_open(lc, s, &s->part[lc->idx], sl->seq, wait, true);
	dp_reply_results(lc, s, sl, acc, m, NULL, (uint8_t)(s->n - 1), any ? wait : NULL);
}

void
dp_action_answer(struct dp_lcore *lc, struct rte_mbuf *m, const struct dp_tensor *t, unsigned int si)
{
	struct dp_session *s = t->s;
	struct dp_session_part *pt = &s->part[lc->idx];
	const struct cais_hdr *h = dp_mbuf_cais(m);
	struct dp_slot *sl = &pt->slots[si];

	/* only the round that waits for the spine: a late or repeated answer is stale */
	if (sl->state != DP_SLOT_UP || sl->seq != rte_be_to_cpu_32(h->seq) ||
	    sl->tensor != t->tensor) {
		pt->c.stale++;
		return dp_drop(lc, m, DP_DROP_STALE);
	}
	switch (cais_hdr_type(h)) {
	case CAIS_TYPE_RESULT:
		return up_result(lc, m, s, sl, pt->acc + (size_t)si * s->elems);
	case CAIS_TYPE_REJECT:
		pt->c.up_rejects++;
		return dp_reply_reject_members(lc, s, sl, m);
	case CAIS_TYPE_NACK: /* the partial was lost on its way up (E11): again, in m */
		if (elapsed_us(lc, sl->t_up, DP_UPLINK_RESEND_US)) {
			sl->t_up = lc->now;
			return dp_reply_uplink(lc, s, sl, pt->acc + (size_t)si * s->elems, m, true);
		}
		return dp_free_later(lc, m);
	default: /* an ACK: the partial is in, the spine's round waits for others */
		return dp_free_later(lc, m);
	}
}
