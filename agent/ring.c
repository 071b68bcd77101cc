/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring fallback: joining (RING_REQ to every peer; FINISHED from a peer
 * that has the switch's results instead), then a ring all-reduce on the
 * original input: n-1 reduce-scatter steps and n-1 all-gather steps over
 * the connection to the next rank. Floats are reduced in fp32 (bf16 and
 * fp16 widened exactly first), int32 with saturating sums; every rank ends
 * with the same bytes, since each segment is reduced once, in ring order,
 * and then copied.
 */
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

static unsigned int
world(const struct cais_comm *c)
{
	return c->cfg.world;
}

static uint8_t
ring_flags(const struct cais_request *r)
{
	return (uint8_t)((r->in_check ? AG_RING_CHECK : 0) | (r->fb & 0x7F));
}

void
ag_ring_free(struct cais_request *r)
{
	struct ag_ring *g = r->ring;
	struct cais_comm *c = r->c;

	if (!g)
		return;
	if (g->sends_left)
		/* its data is still queued, borrowed from the work buffer */
		ag_ring_purge(c, r->seq0);
	ag_buf_put(c, g->work, g->work_size);
	free(g->seg_off);
	free(g->joined);
	free(g);
	r->ring = NULL;
}

static void
mark_joined(struct cais_comm *c, struct ag_ring *g, int peer)
{
	(void)c;
	if (peer >= 0 && !g->joined[peer]) {
		g->joined[peer] = 1;
		g->n_join++;
	}
}

/* Merge RING_REQs that came early; forget them. */
static void
merge_pending(struct cais_comm *c, struct cais_request *r)
{
	struct ag_pending_join *pj, *next;

	for (pj = LIST_FIRST(&c->pending_joins); pj; pj = next) {
		next = LIST_NEXT(pj, link);
		if (pj->seq0 != r->seq0 || pj->check != r->in_check)
			continue;
		for (unsigned int p = 0; p < world(c); p++)
			if (pj->joined[p])
				mark_joined(c, r->ring, (int)p);
		LIST_REMOVE(pj, link);
		free(pj->joined);
		free(pj);
	}
}

static struct ag_pending_join *
pending_find(struct cais_comm *c, uint32_t seq0, bool check)
{
	struct ag_pending_join *pj;

	LIST_FOREACH (pj, &c->pending_joins, link)
		if (pj->seq0 == seq0 && pj->check == check)
			return pj;
	return NULL;
}

void
ag_ring_adopt_pending(struct cais_comm *c, struct cais_request *r, bool check)
{
	struct ag_pending_join *pj = pending_find(c, r->seq0, check);

	if (!pj)
		return;
	if (!check && r->state == AG_RQ_INNET)
		ag_to_ring(c, r,
			   (enum cais_fallback)(pj->fb < CAIS_FB_COUNT ? pj->fb : CAIS_FB_SILENT));
}

/* The ring state of r: segments, the work buffer from the input, the join broadcast. */
static int
ring_start(struct cais_comm *c, struct cais_request *r)
{
	unsigned int n = world(c);
	struct ag_ring *g = calloc(1, sizeof(*g));
	size_t base, rem, esz = cais_datatype_size(r->dt);
	struct ag_msg h;

	if (!g)
		return -ENOMEM;
	r->ring = g;
	g->joined = calloc(n, 1);
	g->seg_off = calloc(n + 1, sizeof(*g->seg_off));
	g->work_size = r->count * 4;
	g->work = ag_buf_get(c, g->work_size);
	if (!g->joined || !g->seg_off || !g->work)
		return -ENOMEM;
	base = r->count / n;
	rem = r->count % n;
	for (unsigned int i = 0; i < n; i++)
		g->seg_off[i + 1] = g->seg_off[i] + base + (i < rem ? 1 : 0);
	if (r->dt == CAIS_INT32 || r->dt == CAIS_FLOAT32)
		memcpy(g->work, r->send, r->count * esz);
	else
		c->q->to_f32((float *)g->work, r->send, r->count, r->dt);
	merge_pending(c, r);
	ag_msg_init(&h, c, AG_RING_REQ, ring_flags(r), r->seq0, r->nchunks, r->count, 0);
	for (unsigned int p = 0; p < n; p++)
		if (p != c->cfg.rank)
			ag_peer_send(c, (int)p, &h, NULL, 0);
	return 0;
}

/* Segment sent at step s (reduce-scatter, then all-gather). */
static unsigned int
send_seg(const struct cais_comm *c, unsigned int s)
{
	unsigned int n = world(c), r = c->cfg.rank;

	if (s < n - 1)
		return (r + 2 * n - s) % n;
	return (r + 1 + 2 * n - (s - (n - 1))) % n;
}

/* Segment received at step s. */
static unsigned int
recv_seg(const struct cais_comm *c, unsigned int s)
{
	unsigned int n = world(c), r = c->cfg.rank;

	if (s < n - 1)
		return (r + 2 * n - s - 1) % n;
	return (r + 2 * n - (s - (n - 1))) % n;
}

static int
queue_step(struct cais_comm *c, struct cais_request *r, unsigned int s)
{
	struct ag_ring *g = r->ring;
	unsigned int seg = send_seg(c, s);
	uint64_t bytes = (uint64_t)(g->seg_off[seg + 1] - g->seg_off[seg]) * 4, off = 0;
	const uint8_t *p = g->work + g->seg_off[seg] * 4;

	do {
		uint32_t len =
		    bytes - off > AG_RING_PIECE ? AG_RING_PIECE : (uint32_t)(bytes - off);
		struct ag_msg h;

		ag_msg_init(&h, c, AG_RING_DATA, 0, r->seq0, s, off, len);
		if (ag_ring_send(c, &h, p + off, len) != 0)
			return -ENOMEM;
		g->sends_left++;
		off += len;
	} while (off < bytes);
	return 0;
}

void
ag_ring_progress(struct cais_comm *c, struct cais_request *r)
{
	unsigned int steps = 2 * (world(c) - 1);
	struct ag_ring *g;

	if (r->state != AG_RQ_RING)
		return;
	if (!r->ring && ring_start(c, r) != 0) {
		ag_complete(c, r, -ENOMEM);
		return;
	}
	g = r->ring;
	if (g->n_join < world(c) - 1)
		return; /* not everyone is in yet (or a peer finished: FINISHED comes) */
	g->started = true;
	while (g->send_step < steps && g->recv_step >= g->send_step) {
		if (queue_step(c, r, g->send_step) != 0) {
			ag_complete(c, r, -ENOMEM);
			return;
		}
		g->send_step++;
	}
	if (g->recv_step == steps && g->sends_left == 0)
		ag_ring_finish(c, r);
}

void
ag_ring_sent(struct cais_comm *c, uint32_t seq0)
{
	struct cais_request *r = ag_req_by_seq0(c, seq0);

	if (r && r->ring && r->ring->sends_left) {
		r->ring->sends_left--;
		ag_ring_progress(c, r);
	}
}

int
ag_ring_on_data(struct cais_comm *c, const struct ag_msg *h, const uint8_t *data)
{
	uint32_t seq0 = ntohl(h->seq), step = ntohl(h->n), len = ntohl(h->len);
	uint64_t off = be64toh(h->off);
	struct cais_request *r = ag_req_by_seq0(c, seq0);
	struct ag_ring *g;
	unsigned int seg;
	uint64_t bytes;
	uint8_t *dst;

	if (!r || r->state != AG_RQ_RING || !r->ring)
		return 0; /* a collective that ended here (timeout): its data is moot */
	g = r->ring;
	if (step != g->recv_step || off != g->recv_got || (len & 3))
		return -EPROTO;
	seg = recv_seg(c, step);
	bytes = (uint64_t)(g->seg_off[seg + 1] - g->seg_off[seg]) * 4;
	if (off + len > bytes)
		return -EPROTO;
	dst = g->work + g->seg_off[seg] * 4 + off;
	if (step < world(c) - 1) {
		if (r->dt == CAIS_INT32)
			c->q->reduce_i32((int32_t *)dst, (const int32_t *)data, len / 4, r->op);
		else
			c->q->reduce_f32((float *)dst, (const float *)data, len / 4, r->op);
	} else {
		memcpy(dst, data, len);
	}
	g->recv_got += len;
	if (g->recv_got == bytes) {
		g->recv_step++;
		g->recv_got = 0;
	}
	ag_ring_progress(c, r);
	return 0;
}

/*
 * Relative error (L2) of the switch's fixed-point result against the ring's
 * fp32 one, both before any rounding to the output type (that rounding is
 * the same on either path, and is not the switch's error).
 */
static double
rel_error(struct cais_comm *c, struct cais_request *r)
{
	const float *ref = (const float *)r->ring->work;
	float inv = (float)(1.0 / r->scale);
	double num = 0, den = 0;
	float buf[1024];

	for (size_t i = 0; i < r->count; i += 1024) {
		size_t n = r->count - i < 1024 ? r->count - i : 1024;

		c->q->decode(buf, r->stage + i * CAIS_ELEM_SIZE, n, CAIS_FLOAT32, inv, 1);
		for (size_t k = 0; k < n; k++) {
			double e = (double)ref[i + k], d = (double)buf[k] - e;

			num += d * d;
			den += e * e;
		}
	}
	if (den == 0)
		return num == 0 ? 0 : 1;
	return sqrt(num / den);
}

void
ag_ring_finish(struct cais_comm *c, struct cais_request *r)
{
	unsigned int n = world(c);
	float mul = r->op == CAIS_OP_AVG ? 1.0f / (float)n : 1.0f;

	if (r->in_check) {
		/* recv gets the switch's result; the ring's is the reference */
		ag_decode_stage(c, r);
		r->rel_error = rel_error(c, r);
		ag_complete(c, r, 0);
		return;
	}
	if (r->dt == CAIS_INT32) {
		const int32_t *w = (const int32_t *)r->ring->work;
		int32_t *out = r->recv;

		for (size_t i = 0; i < r->count; i++)
			out[i] = r->op == CAIS_OP_AVG ? w[i] / (int32_t)n : w[i];
	} else {
		c->q->from_f32(r->recv, (const float *)r->ring->work, r->count, r->dt, mul);
	}
	r->via_switch = false;
	ag_complete(c, r, 0);
}

void
ag_ring_on_req(struct cais_comm *c, int peer, uint32_t seq0, uint32_t nchunks, uint64_t count,
	       uint8_t flags)
{
	bool check = flags & AG_RING_CHECK;
	uint8_t fb = flags & 0x7F;
	struct cais_request *r = ag_req_by_seq0(c, seq0);
	struct ag_pending_join *pj;

	if (!check && ag_finished_innet(c, seq0)) {
		struct ag_msg h;

		/* the switch's results are here: the asker fetches them, no ring */
		ag_msg_init(&h, c, AG_FINISHED, 0, seq0, 0, 0, 0);
		ag_peer_send(c, peer, &h, NULL, 0);
		return;
	}
	if (r) {
		if (r->nchunks != nchunks || r->count != count) {
			/* the ranks do not agree on what this collective is */
			ag_complete(c, r, -EPROTO);
			return;
		}
		if (!check && r->state == AG_RQ_INNET)
			ag_to_ring(c, r,
				   fb < CAIS_FB_COUNT ? (enum cais_fallback)fb : CAIS_FB_SILENT);
		if (r->state == AG_RQ_RING && r->in_check == check && r->ring) {
			mark_joined(c, r->ring, peer);
			ag_ring_progress(c, r);
			return;
		}
		if (r->state == AG_RQ_FETCH || r->state == AG_RQ_DONE || (!check && r->in_check))
			return;
	}
	/* not issued here yet, or its reference ring has not begun: remember */
	pj = pending_find(c, seq0, check);
	if (!pj) {
		pj = calloc(1, sizeof(*pj));
		if (!pj)
			return;
		pj->joined = calloc(world(c), 1);
		if (!pj->joined) {
			free(pj);
			return;
		}
		pj->seq0 = seq0;
		pj->check = check;
		pj->fb = fb;
		pj->nchunks = nchunks;
		pj->count = count;
		LIST_INSERT_HEAD(&c->pending_joins, pj, link);
	}
	if (!pj->joined[peer]) {
		pj->joined[peer] = 1;
		pj->n_join++;
	}
}

void
ag_ring_on_finished(struct cais_comm *c, int peer, uint32_t seq0)
{
	struct cais_request *r = ag_req_by_seq0(c, seq0);
	struct ag_msg h;
	uint32_t idx = 0;

	if (!r || r->state != AG_RQ_RING || r->in_check)
		return;
	if (!r->stage) {
		/* it went to the ring at issue here, yet a peer used the switch */
		ag_complete(c, r, -EPROTO);
		return;
	}
	ag_ring_free(r);
	r->state = AG_RQ_FETCH;
	r->fetch_from = peer;
	/* ask for the missing chunks, in runs of consecutive seqs */
	while (idx < r->nchunks) {
		uint32_t first;

		while (idx < r->nchunks && r->resolved[idx])
			idx++;
		first = idx;
		while (idx < r->nchunks && !r->resolved[idx] && idx - first < 2 * c->cfg.slots)
			idx++;
		if (idx > first) {
			ag_msg_init(&h, c, AG_FETCH, 0, r->seq0 + first, idx - first, 0, 0);
			ag_peer_send(c, peer, &h, NULL, 0);
		}
	}
}
