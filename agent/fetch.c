/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * FETCH recovery (fetch.h). A query per silent chunk, indexed like the
 * window (seq mod S): which peers answered this round of FETCH, and whether
 * one of them still expects the switch to answer.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cais/proto.h>

#include "fetch.h"

struct ag_query {
	uint32_t seq;
	bool active;
	uint8_t answered[32]; /**< peers that answered this round, a bit per rank */
	uint16_t n_answered;
	bool any_waiting; /**< some peer has not sent it, or sent it recently */
	uint64_t next;	  /**< the next round of FETCH */
	uint32_t wait_us; /**< ... this long after the last (AG_QUERY_US, doubling) */
};

struct ag_fetch {
	struct ag_fetch_conf conf;
	struct ag_fetch_source src;
	struct ag_query *q; /**< S */
	unsigned int n_active;
	uint64_t served;
	uint8_t *buf; /**< a cached result's copy */
};

int
ag_fetch_open(struct ag_fetch **out, const struct ag_fetch_conf *conf,
	      const struct ag_fetch_source *src)
{
	struct ag_fetch *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->conf = *conf;
	f->src = *src;
	f->q = calloc(conf->slots, sizeof(*f->q));
	f->buf = malloc(conf->stride);
	if (!f->q || !f->buf) {
		ag_fetch_close(f);
		return -ENOMEM;
	}
	*out = f;
	return 0;
}

void
ag_fetch_close(struct ag_fetch *f)
{
	if (!f)
		return;
	free(f->q);
	free(f->buf);
	free(f);
}

static inline struct ag_query *
query(const struct ag_fetch *f, uint32_t seq)
{
	return &f->q[seq & (f->conf.slots - 1)];
}

/* Is q a live question about a chunk the window still holds as silent? */
static bool
live(struct ag_fetch *f, struct ag_query *q)
{
	if (q->active && ag_flow_chunk_state(f->conf.flows[ag_flow_of(q->seq, f->conf.nflows)],
					     q->seq) != AG_W_SILENT) {
		q->active = false;
		f->n_active--;
	}
	return q->active;
}

static void
ask(struct ag_fetch *f, struct ag_query *q, uint64_t now)
{
	struct ag_msg h;

	memset(q->answered, 0, sizeof(q->answered));
	q->n_answered = 0;
	q->any_waiting = false;
	q->next = now + (uint64_t)q->wait_us * 1000;
	ag_msg_init(&h, f->conf.rank, AG_FETCH, 0, q->seq, 1, 0, 0);
	for (unsigned int p = 0; p < f->conf.world; p++)
		if (p != f->conf.rank)
			ag_peers_send(f->conf.peers, (int)p, &h, NULL, 0);
}

enum ag_fetch_verdict
ag_fetch_start(struct ag_fetch *f, uint32_t seq, uint64_t now)
{
	struct ag_query *q = query(f, seq);

	if (f->conf.world == 1)
		return AG_FETCH_RING; /* nobody to ask: the switch is all there is */
	if (!live(f, q))
		f->n_active++;
	q->active = true;
	q->seq = seq;
	q->wait_us = AG_QUERY_US;
	ask(f, q, now);
	return AG_FETCH_WAIT;
}

void
ag_fetch_tick(struct ag_fetch *f, uint64_t now)
{
	for (uint32_t i = 0; f->n_active && i < f->conf.slots; i++) {
		struct ag_query *q = &f->q[i];

		if (live(f, q) && (int64_t)(now - q->next) >= 0) {
			if (q->wait_us < AG_QUERY_MAX_US)
				q->wait_us *= 2;
			ask(f, q, now);
		}
	}
}

uint64_t
ag_fetch_next_timer(const struct ag_fetch *f)
{
	uint64_t t = UINT64_MAX;

	for (uint32_t i = 0; f->n_active && i < f->conf.slots; i++)
		if (f->q[i].active && f->q[i].next < t)
			t = f->q[i].next;
	return t;
}

void
ag_fetch_answer(struct ag_fetch *f, int peer, uint32_t seq, uint32_t n)
{
	struct ag_msg h;

	if (n > 2 * f->conf.slots)
		n = 2 * f->conf.slots;
	for (uint32_t k = 0; k < n; k++, seq++) {
		enum ag_have have = AG_HAVE_STUCK;
		struct ag_result res;

		if (ag_cache_get(f->conf.cache, seq, f->buf, &res) ||
		    f->src.lookup(f->src.ctx, seq, &res, &have)) {
			ag_msg_init(&h, f->conf.rank, AG_FETCH_OK, res.flags, seq, res.count,
				    res.dtype, res.len);
			if (ag_peers_send(f->conf.peers, peer, &h, res.payload, res.len) == 0)
				__atomic_fetch_add(&f->served, 1, __ATOMIC_RELAXED);
		} else {
			ag_msg_init(&h, f->conf.rank, AG_FETCH_NO, (uint8_t)have, seq, 0, 0, 0);
			ag_peers_send(f->conf.peers, peer, &h, NULL, 0);
		}
	}
}

enum ag_fetch_verdict
ag_fetch_on_no(struct ag_fetch *f, int peer, uint32_t seq, enum ag_have have)
{
	struct ag_query *q = query(f, seq);

	if (!live(f, q) || q->seq != seq || peer < 0 || (unsigned int)peer >= f->conf.world ||
	    (q->answered[peer / 8] & (1u << (peer % 8))))
		return AG_FETCH_WAIT;
	q->answered[peer / 8] |= (uint8_t)(1u << (peer % 8));
	q->n_answered++;
	if (have == AG_HAVE_NOT_SENT || have == AG_HAVE_INFLIGHT)
		q->any_waiting = true;
	if (have == AG_HAVE_RING)
		return AG_FETCH_RING; /* that peer's collective is on the ring: so is ours */
	/* every peer gave up on this chunk too, or its DATA is in and the round
	 * waits (an ACK): none has the result, and what the round lacks is this
	 * rank's own DATA, which the switch does not hear, or the switch lost the
	 * round: the ring */
	if (q->n_answered == f->conf.world - 1 && !q->any_waiting)
		return AG_FETCH_RING;
	return AG_FETCH_WAIT;
}

void
ag_fetch_from(struct ag_fetch *f, int peer, uint32_t seq0, uint32_t nchunks, const uint8_t *have)
{
	uint32_t idx = 0;
	struct ag_msg h;

	while (idx < nchunks) {
		uint32_t first;

		while (idx < nchunks && have[idx])
			idx++;
		first = idx;
		while (idx < nchunks && !have[idx] && idx - first < 2 * f->conf.slots)
			idx++;
		if (idx > first) {
			ag_msg_init(&h, f->conf.rank, AG_FETCH, 0, seq0 + first, idx - first, 0, 0);
			ag_peers_send(f->conf.peers, peer, &h, NULL, 0);
		}
	}
}

uint64_t
ag_fetch_served(const struct ag_fetch *f)
{
	return __atomic_load_n(&f->served, __ATOMIC_RELAXED);
}
