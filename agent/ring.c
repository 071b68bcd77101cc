/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring fallback (ring.h). Segment i of the work buffer is the i-th
 * n-th of the elements; at step s a rank sends one segment to the next rank
 * and receives another from the previous one, in pieces of at most
 * AG_RING_PIECE bytes.
 */
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "ring.h"

/** RING_REQs for a ring this rank has not begun yet. */
struct ag_pending_join {
	uint32_t seq0;
	bool check;
	uint8_t fb;
	uint8_t *joined; /**< per rank */
	LIST_ENTRY(ag_pending_join) link;
};

struct ag_rings {
	struct ag_rings_conf conf;
	LIST_HEAD(, ag_pending_join) pending;
};

struct ag_ring {
	struct ag_ring_job job;
	uint8_t *work; /**< count x 4 bytes: fp32 (float types) or int32 */
	size_t work_size;
	size_t *seg_off;	 /**< world + 1 element offsets of the segments */
	uint8_t *joined;	 /**< per rank */
	unsigned int n_join;	 /**< peers that sent RING_REQ */
	unsigned int send_step;	 /**< next step to queue for sending, 0..2(n-1) */
	unsigned int recv_step;	 /**< step being received */
	uint64_t recv_got;	 /**< bytes of recv_step received */
	unsigned int sends_left; /**< queued ring messages not yet written */
};

int
ag_rings_open(struct ag_rings **out, const struct ag_rings_conf *conf)
{
	struct ag_rings *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->conf = *conf;
	LIST_INIT(&g->pending);
	*out = g;
	return 0;
}

static void
pending_free(struct ag_pending_join *pj)
{
	LIST_REMOVE(pj, link);
	free(pj->joined);
	free(pj);
}

void
ag_rings_close(struct ag_rings *g)
{
	if (!g)
		return;
	while (!LIST_EMPTY(&g->pending))
		pending_free(LIST_FIRST(&g->pending));
	free(g);
}

static struct ag_pending_join *
pending_find(const struct ag_rings *g, uint32_t seq0, bool check)
{
	struct ag_pending_join *pj;

	LIST_FOREACH (pj, &g->pending, link)
		if (pj->seq0 == seq0 && pj->check == check)
			return pj;
	return NULL;
}

void
ag_ring_remember(struct ag_rings *g, int peer, uint32_t seq0, bool check, uint8_t fb)
{
	struct ag_pending_join *pj = pending_find(g, seq0, check);

	if (!pj) {
		pj = calloc(1, sizeof(*pj));
		if (!pj)
			return;
		pj->joined = calloc(g->conf.world, 1);
		if (!pj->joined) {
			free(pj);
			return;
		}
		pj->seq0 = seq0;
		pj->check = check;
		pj->fb = fb;
		LIST_INSERT_HEAD(&g->pending, pj, link);
	}
	pj->joined[peer] = 1;
}

bool
ag_ring_requested(const struct ag_rings *g, uint32_t seq0, bool check, uint8_t *fb)
{
	const struct ag_pending_join *pj = pending_find(g, seq0, check);

	if (pj && fb)
		*fb = pj->fb;
	return pj != NULL;
}

void
ag_ring_decline(struct ag_rings *g, int peer, uint32_t seq0)
{
	struct ag_msg h;

	ag_msg_init(&h, g->conf.rank, AG_FINISHED, 0, seq0, 0, 0, 0);
	ag_peers_send(g->conf.peers, peer, &h, NULL, 0);
}

void
ag_ring_joined(struct ag_rings *g, struct ag_ring *ring, int peer)
{
	(void)g;
	if (peer >= 0 && !ring->joined[peer]) {
		ring->joined[peer] = 1;
		ring->n_join++;
	}
}

void
ag_ring_end(struct ag_rings *g, struct ag_ring *ring)
{
	if (!ring)
		return;
	if (ring->sends_left)
		/* its data is still queued, borrowed from the work buffer */
		ag_peers_purge_ring(g->conf.peers, ring->job.seq0);
	ag_pool_put(g->conf.pool, ring->work, ring->work_size);
	free(ring->seg_off);
	free(ring->joined);
	free(ring);
}

int
ag_ring_begin(struct ag_rings *g, const struct ag_ring_job *job, struct ag_ring **out)
{
	unsigned int n = g->conf.world;
	struct ag_ring *ring = calloc(1, sizeof(*ring));
	struct ag_pending_join *pj;
	size_t base, rem;
	struct ag_msg h;

	if (!ring)
		return -ENOMEM;
	ring->job = *job;
	ring->joined = calloc(n, 1);
	ring->seg_off = calloc(n + 1, sizeof(*ring->seg_off));
	ring->work_size = job->count * 4;
	ring->work = ag_pool_get(g->conf.pool, ring->work_size);
	if (!ring->joined || !ring->seg_off || !ring->work) {
		ag_ring_end(g, ring);
		return -ENOMEM;
	}
	base = job->count / n;
	rem = job->count % n;
	for (unsigned int i = 0; i < n; i++)
		ring->seg_off[i + 1] = ring->seg_off[i] + base + (i < rem ? 1 : 0);
	if (job->dt == CAIS_INT32 || job->dt == CAIS_FLOAT32)
		memcpy(ring->work, job->send, job->count * 4);
	else
		g->conf.q->to_f32((float *)ring->work, job->send, job->count, job->dt);
	/* the RING_REQs that came first */
	pj = pending_find(g, job->seq0, job->check);
	if (pj) {
		for (unsigned int p = 0; p < n; p++)
			if (pj->joined[p])
				ag_ring_joined(g, ring, (int)p);
		pending_free(pj);
	}
	ag_msg_init(&h, g->conf.rank, AG_RING_REQ,
		    (uint8_t)((job->check ? AG_RING_CHECK : 0) | (job->fb & 0x7F)), job->seq0,
		    job->nchunks, job->count, 0);
	for (unsigned int p = 0; p < n; p++)
		if (p != g->conf.rank)
			ag_peers_send(g->conf.peers, (int)p, &h, NULL, 0);
	*out = ring;
	return 0;
}

/* Segment sent at step s (reduce-scatter, then all-gather). */
static unsigned int
send_seg(const struct ag_rings *g, unsigned int s)
{
	unsigned int n = g->conf.world, r = g->conf.rank;

	if (s < n - 1)
		return (r + 2 * n - s) % n;
	return (r + 1 + 2 * n - (s - (n - 1))) % n;
}

/* Segment received at step s. */
static unsigned int
recv_seg(const struct ag_rings *g, unsigned int s)
{
	unsigned int n = g->conf.world, r = g->conf.rank;

	if (s < n - 1)
		return (r + 2 * n - s - 1) % n;
	return (r + 2 * n - (s - (n - 1))) % n;
}

static int
queue_step(struct ag_rings *g, struct ag_ring *ring, unsigned int s)
{
	unsigned int seg = send_seg(g, s);
	uint64_t bytes = (uint64_t)(ring->seg_off[seg + 1] - ring->seg_off[seg]) * 4, off = 0;
	const uint8_t *p = ring->work + ring->seg_off[seg] * 4;

	do {
		uint32_t len =
		    bytes - off > AG_RING_PIECE ? AG_RING_PIECE : (uint32_t)(bytes - off);
		struct ag_msg h;

		ag_msg_init(&h, g->conf.rank, AG_RING_DATA, 0, ring->job.seq0, s, off, len);
		if (ag_peers_send_ring(g->conf.peers, &h, p + off, len) != 0)
			return -ENOMEM;
		ring->sends_left++;
		off += len;
	} while (off < bytes);
	return 0;
}

int
ag_ring_progress(struct ag_rings *g, struct ag_ring *ring)
{
	unsigned int steps = 2 * (g->conf.world - 1);

	if (ring->n_join < g->conf.world - 1)
		return 0; /* not everyone is in yet (or a peer finished: FINISHED comes) */
	while (ring->send_step < steps && ring->recv_step >= ring->send_step) {
		if (queue_step(g, ring, ring->send_step) != 0)
			return -ENOMEM;
		ring->send_step++;
	}
	return ring->recv_step == steps && ring->sends_left == 0;
}

int
ag_ring_sent(struct ag_rings *g, struct ag_ring *ring)
{
	if (ring->sends_left)
		ring->sends_left--;
	return ag_ring_progress(g, ring);
}

int
ag_ring_on_data(struct ag_rings *g, struct ag_ring *ring, const struct ag_msg *h,
		const uint8_t *data)
{
	uint32_t step = ntohl(h->n), len = ntohl(h->len);
	uint64_t off = be64toh(h->off), bytes;
	unsigned int seg;
	uint8_t *dst;

	if (step != ring->recv_step || off != ring->recv_got || (len & 3))
		return -EPROTO;
	seg = recv_seg(g, step);
	bytes = (uint64_t)(ring->seg_off[seg + 1] - ring->seg_off[seg]) * 4;
	if (off + len > bytes)
		return -EPROTO;
	dst = ring->work + ring->seg_off[seg] * 4 + off;
	if (step < g->conf.world - 1) {
		if (ring->job.dt == CAIS_INT32)
			g->conf.q->reduce_i32((int32_t *)dst, (const int32_t *)data, len / 4,
					      ring->job.op);
		else
			g->conf.q->reduce_f32((float *)dst, (const float *)data, len / 4,
					      ring->job.op);
	} else {
		memcpy(dst, data, len);
	}
	ring->recv_got += len;
	if (ring->recv_got == bytes) {
		ring->recv_step++;
		ring->recv_got = 0;
	}
	return ag_ring_progress(g, ring);
}

void
ag_ring_output(struct ag_rings *g, const struct ag_ring *ring, void *recv)
{
	unsigned int n = g->conf.world;
	const struct ag_ring_job *job = &ring->job;

	if (job->dt == CAIS_INT32) {
		const int32_t *w = (const int32_t *)ring->work;
		int32_t *out = recv;

		for (size_t i = 0; i < job->count; i++)
			out[i] = job->op == CAIS_OP_AVG ? w[i] / (int32_t)n : w[i];
	} else {
		g->conf.q->from_f32(recv, (const float *)ring->work, job->count, job->dt,
				    job->op == CAIS_OP_AVG ? 1.0f / (float)n : 1.0f);
	}
}

double
ag_ring_rel_error(struct ag_rings *g, const struct ag_ring *ring, const struct ag_stage *stage)
{
	const float *ref = (const float *)ring->work;
	float inv = (float)(1.0 / stage->scale), *buf = malloc(stage->elems * sizeof(float));
	double num = 0, den = 0;

	if (!buf)
		return -1;
	for (size_t i = 0, c = 0; i < ring->job.count; i += stage->elems, c++) {
		size_t n = ring->job.count - i < stage->elems ? ring->job.count - i : stage->elems;
		const uint8_t *p = stage->base + c * stage->stride;

		if (stage->dtype == CAIS_DT_BLOCK16)
			g->conf.q->decode_b16(buf, p, n, CAIS_FLOAT32, inv);
		else
			g->conf.q->decode(buf, p, n, CAIS_FLOAT32, inv, 1);
		for (size_t k = 0; k < n; k++) {
			double e = (double)ref[i + k], d = (double)buf[k] - e;

			num += d * d;
			den += e * e;
		}
	}
	free(buf);
	if (den == 0)
		return num == 0 ? 0 : 1;
	return sqrt(num / den);
}
