/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A collective's life (req.h). Reading order: issue -> the flows' events
 * (results in, REJECT, silence, decode, release) -> the ring -> completion
 * -> the peers' messages.
 *
 * Completing a request hands it to the caller once no flow holds it: the
 * request stays in the active list, DONE, until the flows have let it go
 * (AG_FE_RELEASED), and everything that looks a request up skips DONE ones.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cais/proto.h>

#include "clock.h"
#include "req.h"

static void complete(struct ag_reqs *q, struct cais_request *r, int err);
static bool to_ring(struct ag_reqs *q, struct cais_request *r, enum cais_fallback fb);

int
ag_req_init(struct ag_reqs *q)
{
	TAILQ_INIT(&q->active);
	q->n_finished = 0;
	q->peer_chunks = 0;
	q->ev = NULL;
	q->n_ev = q->cap_ev = 0;
	return pthread_mutex_init(&q->lock, NULL) ? -ENOMEM : 0;
}

/* The live request that owns seq, or NULL. */
static struct cais_request *
req_of_seq(const struct ag_reqs *q, uint32_t seq)
{
	struct cais_request *r;

	TAILQ_FOREACH (r, &q->active, link)
		if (r->state != AG_RQ_DONE && seq - r->seq0 < r->nchunks)
			return r;
	return NULL;
}

/* The live request whose first seq is seq0, or NULL. */
static struct cais_request *
req_by_seq0(const struct ag_reqs *q, uint32_t seq0)
{
	struct cais_request *r;

	TAILQ_FOREACH (r, &q->active, link)
		if (r->state != AG_RQ_DONE && r->seq0 == seq0)
			return r;
	return NULL;
}

/* Was seq0 finished in-network here (and is it still remembered)? */
static bool
finished_innet(const struct ag_reqs *q, uint32_t seq0)
{
	unsigned int n = q->n_finished < AG_FINISHED_LOG ? q->n_finished : AG_FINISHED_LOG;

	for (unsigned int i = 0; i < n; i++)
		if (q->finished[(q->n_finished - 1 - i) % AG_FINISHED_LOG] == seq0)
			return true;
	return false;
}

static inline struct ag_flow *
flow_of(const struct ag_reqs *q, uint32_t seq)
{
	return q->flows[ag_flow_of(seq, q->nflows)];
}

/* ---- the flows ---- */

static void
flows_stop(struct ag_reqs *q, struct cais_request *r)
{
	r->stopping = true;
	atomic_store(&r->stop_left, q->nflows);
	for (unsigned int i = 0; i < q->nflows; i++)
		ag_flow_stop_req(q->flows[i], r);
}

static void
flows_decode(struct ag_reqs *q, struct cais_request *r)
{
	r->decoding = true;
	atomic_store(&r->decode_left, q->nflows);
	for (unsigned int i = 0; i < q->nflows; i++)
		ag_flow_decode(q->flows[i], r);
}

/* ---- issue ---- */

void
ag_req_issue(struct ag_reqs *q, struct cais_request *r)
{
	uint8_t fb;

	r->fetch_from = -1;
	r->rel_error = -1;
	TAILQ_INSERT_TAIL(&q->active, r, link);
	if (r->fb != CAIS_FB_NONE) {
		if (r->switch_only)
			complete(q, r, -ECONNREFUSED);
		else
			to_ring(q, r, r->fb);
		return;
	}
	r->stage_size = (size_t)r->nchunks * q->stride;
	r->stage = ag_pool_get(q->pool, r->stage_size);
	r->resolved = calloc(r->nchunks, sizeof(*r->resolved));
	r->taken = calloc(r->nchunks, 1);
	if (!r->stage || !r->resolved || !r->taken) {
		complete(q, r, -ENOMEM);
		return;
	}
	/* straight into recv unless recv is the input, which the ring (fallback,
	 * or the error check's reference) may still need */
	r->direct = r->recv != r->send && !r->check;
	r->state = AG_RQ_INNET;
	atomic_store(&r->held, q->nflows);
	for (unsigned int i = 0; i < q->nflows; i++)
		ag_flow_add(q->flows[i], r);
	/* a peer gave up on it before this rank issued it: the ring it is */
	if (ag_ring_requested(q->rings, r->seq0, false, &fb))
		to_ring(q, r, fb < CAIS_FB_COUNT ? (enum cais_fallback)fb : CAIS_FB_SILENT);
}

/* ---- events ---- */

static void
post(void *ctx, const struct ag_flow_event *ev)
{
	struct ag_reqs *q = ctx;

	pthread_mutex_lock(&q->lock);
	if (q->n_ev == q->cap_ev) {
		unsigned int cap = q->cap_ev ? 2 * q->cap_ev : 64;
		struct ag_flow_event *e = realloc(q->ev, cap * sizeof(*e));

		/* an event lost would hang its collective */
		if (!e)
			abort();
		q->ev = e;
		q->cap_ev = cap;
	}
	q->ev[q->n_ev++] = *ev;
	pthread_mutex_unlock(&q->lock);
	q->wake(q->ctx);
}

void
ag_req_flow_host(struct ag_reqs *q, struct ag_flow_host *h)
{
	h->ctx = q;
	h->post = post;
}

/* Every chunk result of r is in. May complete r. */
static void
innet_done(struct ag_reqs *q, struct cais_request *r)
{
	q->finished[q->n_finished++ % AG_FINISHED_LOG] = r->seq0;
	r->via_switch = true;
	if (r->check) {
		/* the same collective on the ring, from the intact input, as the float
		 * reference; recv gets the switch's result after the comparison */
		r->in_check = true;
		r->state = AG_RQ_INNET; /* so that to_ring() moves it */
		to_ring(q, r, r->fb);
		return;
	}
	if (r->direct)
		complete(q, r, 0);
	else
		flows_decode(q, r); /* then AG_FE_DECODED */
}

/*
 * The switch has no BLOCK16 for r's tensor: r and the tensor go on as
 * FIXED32, the flows send r's chunks again at once, same seqs (a REJECT
 * never touches a slot). A request with results already in BLOCK16 takes
 * the ring instead.
 */
static void
wire_fallback(struct ag_reqs *q, struct cais_request *r)
{
	if (atomic_load(&r->n_resolved)) {
		to_ring(q, r, CAIS_FB_REJECT);
		return;
	}
	if (atomic_load(&r->wire) != CAIS_DT_BLOCK16)
		return;
	atomic_store_explicit(&r->scale, q->wire_refused(q->ctx, r->tensor), memory_order_relaxed);
	atomic_store_explicit(&r->wire, CAIS_DT_FIXED32, memory_order_release);
	for (unsigned int i = 0; i < q->nflows; i++)
		ag_flow_redo(q->flows[i], r);
}

static void ring_finish(struct ag_reqs *q, struct cais_request *r);

/* The flows decoded r's results into recv: the error against the reference, and done. */
static void
decoded(struct ag_reqs *q, struct cais_request *r)
{
	if (r->in_check) {
		struct ag_stage st = {.base = r->stage,
				      .stride = q->stride,
				      .elems = q->elems,
				      .dtype = atomic_load(&r->wire),
				      .scale = atomic_load(&r->scale)};

		r->rel_error = ag_ring_rel_error(q->rings, r->ring, &st);
	}
	complete(q, r, 0);
}

/* r is done and no flow holds it: hand it over. */
static void
finalize(struct ag_reqs *q, struct cais_request *r)
{
	TAILQ_REMOVE(&q->active, r, link);
	ag_pool_put(q->pool, r->stage, r->stage_size);
	free((void *)r->resolved);
	free(r->taken);
	r->stage = NULL;
	r->resolved = NULL;
	r->taken = NULL;
	q->completed(q->ctx, r);
}

static void
on_event(struct ag_reqs *q, const struct ag_flow_event *ev)
{
	struct cais_request *r = ev->r;

	if (ev->type == AG_FE_RELEASED) {
		finalize(q, r);
		return;
	}
	if (r->state == AG_RQ_DONE)
		return; /* what the flows said before they let it go */
	switch (ev->type) {
	case AG_FE_DONE:
		if (r->state == AG_RQ_INNET || r->state == AG_RQ_FETCH)
			innet_done(q, r);
		break;
	case AG_FE_RING:
		if (ev->fb == CAIS_FB_OVERFLOW)
			r->overflow = true;
		if (r->state == AG_RQ_INNET)
			to_ring(q, r, (enum cais_fallback)ev->fb);
		break;
	case AG_FE_BAD_WIRE:
		if (r->state == AG_RQ_INNET)
			wire_fallback(q, r);
		break;
	case AG_FE_SILENT:
		if (r->state == AG_RQ_INNET && ag_fetch_start(q->f, ev->seq, q->now) == AG_FETCH_RING)
			to_ring(q, r, CAIS_FB_SILENT);
		break;
	case AG_FE_STOPPED:
		r->stopped = true;
		if (r->state == AG_RQ_RING && r->ring_complete)
			ring_finish(q, r);
		break;
	case AG_FE_DECODED:
		decoded(q, r);
		break;
	default:
		break;
	}
}

static void
take_events(struct ag_reqs *q)
{
	struct ag_flow_event *ev;
	unsigned int n;

	pthread_mutex_lock(&q->lock);
	ev = q->ev;
	n = q->n_ev;
	q->ev = NULL;
	q->n_ev = q->cap_ev = 0;
	pthread_mutex_unlock(&q->lock);
	for (unsigned int i = 0; i < n; i++)
		on_event(q, &ev[i]);
	free(ev);
}

/* ---- the ring ---- */

/*
 * The ring is complete: its result into recv (once the flows, which may
 * write recv, have left), or the reference of the error check.
 */
static void
ring_finish(struct ag_reqs *q, struct cais_request *r)
{
	r->ring_complete = true;
	if (r->in_check) {
		flows_decode(q, r); /* then decoded() */
		return;
	}
	if (r->stopping && !r->stopped)
		return; /* AG_FE_STOPPED finishes it */
	ag_ring_output(q->rings, r->ring, r->recv);
	r->via_switch = false;
	complete(q, r, 0);
}

/* What a ring call returned: 1 done, < 0 failed. @return whether the ring goes on */
static bool
ring_step(struct ag_reqs *q, struct cais_request *r, int rc)
{
	if (rc == 0)
		return true;
	if (rc > 0)
		ring_finish(q, r);
	else
		complete(q, r, rc);
	return false;
}

/*
 * Move r to the ring for reason fb (nothing if it is there or past it).
 * @return whether r is still on its way (the ring of one rank completes at once)
 */
static bool
to_ring(struct ag_reqs *q, struct cais_request *r, enum cais_fallback fb)
{
	struct ag_ring_job job;
	int rc;

	if (r->state != AG_RQ_INNET && r->state != AG_RQ_NEW)
		return r->state != AG_RQ_DONE;
	if (r->state == AG_RQ_INNET && !r->in_check)
		flows_stop(q, r);
	if (r->switch_only) {
		complete(q, r, -ECONNREFUSED);
		return false;
	}
	if (!r->in_check)
		r->fb = fb;
	r->state = AG_RQ_RING;
	job = (struct ag_ring_job){.seq0 = r->seq0,
				   .nchunks = r->nchunks,
				   .count = r->count,
				   .dt = r->dt,
				   .op = r->op,
				   .send = r->send,
				   .check = r->in_check,
				   .fb = (uint8_t)r->fb};
	rc = ag_ring_begin(q->rings, &job, &r->ring);
	if (rc == 0)
		rc = ag_ring_progress(q->rings, r->ring);
	return ring_step(q, r, rc) || r->state != AG_RQ_DONE;
}

/* ---- completion ---- */

static void
complete(struct ag_reqs *q, struct cais_request *r, int err)
{
	bool innet = err == 0 && r->via_switch;

	r->state = AG_RQ_DONE;
	ag_ring_end(q->rings, r->ring);
	r->ring = NULL;
	r->error = err;
	r->st.error = err;
	r->st.path = innet ? CAIS_PATH_SWITCH : CAIS_PATH_RING;
	r->st.wire = (enum cais_wire_dtype)atomic_load(&r->wire);
	r->st.fallback = innet ? CAIS_FB_NONE : r->fb;
	r->st.retransmissions = atomic_load(&r->retx);
	r->st.peer_chunks = r->peer_chunks;
	r->st.time_us = (double)(ag_now_ns() - r->t_issue) / 1000.0;
	r->st.rel_error = r->rel_error;
	if (atomic_load(&r->held) == 0) {
		finalize(q, r);
		return;
	}
	/* the flows let it go, then AG_FE_RELEASED hands it over */
	r->dropping = true;
	for (unsigned int i = 0; i < q->nflows; i++)
		ag_flow_drop(q->flows[i], r);
}

void
ag_req_progress(struct ag_reqs *q, uint64_t now)
{
	struct cais_request *r, *next;

	q->now = now;
	take_events(q);
	for (r = TAILQ_FIRST(&q->active); r; r = next) {
		next = TAILQ_NEXT(r, link);
		if (r->state == AG_RQ_DONE)
			continue;
		if (r->state == AG_RQ_RING && !r->ring_complete &&
		    !ring_step(q, r, ag_ring_progress(q->rings, r->ring)))
			continue;
		if (r->state != AG_RQ_DONE && (int64_t)(now - r->deadline) >= 0)
			complete(q, r, -ETIMEDOUT);
	}
}

uint64_t
ag_req_next_timer(const struct ag_reqs *q)
{
	const struct cais_request *r;
	uint64_t t = UINT64_MAX;

	TAILQ_FOREACH (r, &q->active, link)
		if (r->state != AG_RQ_DONE && r->deadline < t)
			t = r->deadline;
	return t;
}

void
ag_req_discard(struct ag_reqs *q)
{
	struct cais_request *r;

	while ((r = TAILQ_FIRST(&q->active))) {
		TAILQ_REMOVE(&q->active, r, link);
		ag_ring_end(q->rings, r->ring);
		free(r->stage);
		free((void *)r->resolved);
		free(r->taken);
		free(r);
	}
	free(q->ev);
	q->ev = NULL;
	pthread_mutex_destroy(&q->lock);
}

uint64_t
ag_req_peer_chunks(const struct ag_reqs *q)
{
	return __atomic_load_n(&q->peer_chunks, __ATOMIC_RELAXED);
}

/* ---- the peers' messages ---- */

/* FETCH recovery's question: does this rank have seq's result, and if not, why not? */
static bool
lookup(void *ctx, uint32_t seq, struct ag_result *res, enum ag_have *have)
{
	struct ag_reqs *q = ctx;
	struct cais_request *r = req_of_seq(q, seq);
	enum ag_window_state ws;
	uint32_t idx;
	bool got;

	if (!r) {
		/* not issued here yet, or long done (then the asker is confused) */
		*have = cais_seq_before(seq, ag_flow_next_seq(flow_of(q, seq))) ? AG_HAVE_STUCK
										   : AG_HAVE_NOT_SENT;
		return false;
	}
	idx = seq - r->seq0;
	got = r->resolved && atomic_load_explicit(&r->resolved[idx], memory_order_acquire);
	if (got && !r->direct && !r->overflow) {
		/* an active collective's result, older than the cache */
		res->count = ag_chunk_count(r, q->elems, idx);
		res->dtype = atomic_load(&r->wire);
		res->len = cais_payload_bytes(res->dtype, res->count);
		res->flags = 0;
		res->payload = r->stage + (size_t)idx * q->stride;
		return true;
	}
	if (r->state == AG_RQ_RING) {
		*have = AG_HAVE_RING;
		return false;
	}
	if (r->state != AG_RQ_INNET) {
		*have = AG_HAVE_STUCK;
		return false;
	}
	ws = ag_flow_chunk_state(flow_of(q, seq), seq);
	if (ws == AG_W_FREE)
		*have = got ? AG_HAVE_STUCK : AG_HAVE_NOT_SENT;
	else
		*have = ws == AG_W_SILENT  ? AG_HAVE_STUCK
			: ws == AG_W_ACKED ? AG_HAVE_ACKED
					   : AG_HAVE_INFLIGHT;
	return false;
}

void
ag_req_fetch_source(struct ag_reqs *q, struct ag_fetch_source *src)
{
	src->ctx = q;
	src->lookup = lookup;
}

/* A peer's result of chunk seq: taken when it is one r lacks, in r's wire dtype. */
static void
on_fetch_ok(struct ag_reqs *q, const struct ag_msg *h, const uint8_t *data)
{
	uint32_t seq = ntohl(h->seq), n = ntohl(h->n), len = ntohl(h->len);
	struct cais_request *r = req_of_seq(q, seq);
	uint8_t wire;
	uint32_t idx;

	if (!r || (r->state != AG_RQ_INNET && r->state != AG_RQ_FETCH))
		return;
	idx = seq - r->seq0;
	wire = atomic_load(&r->wire);
	if (r->taken[idx] || atomic_load(&r->resolved[idx]) ||
	    n != ag_chunk_count(r, q->elems, idx) || be64toh(h->off) != wire ||
	    len != cais_payload_bytes(wire, n))
		return;
	r->taken[idx] = 1;
	r->peer_chunks++;
	__atomic_fetch_add(&q->peer_chunks, 1, __ATOMIC_RELAXED);
	/* the flow that owns the chunk takes it: only it writes the chunk's bytes */
	ag_flow_resolve(flow_of(q, seq), r, idx, data, len, (uint16_t)n, h->flags);
}

static void
on_fetch_no(struct ag_reqs *q, int peer, uint32_t seq, enum ag_have have)
{
	struct cais_request *r = req_of_seq(q, seq);

	if (r && r->state == AG_RQ_FETCH && r->fetch_from == peer) {
		/* it said FINISHED, yet lacks a chunk: not the protocol */
		complete(q, r, -EPROTO);
		return;
	}
	if (ag_fetch_on_no(q->f, peer, seq, have) == AG_FETCH_RING && r)
		to_ring(q, r, CAIS_FB_SILENT);
}

/* A peer joins the ring of seq0 (or its reference ring). */
static void
on_ring_req(struct ag_reqs *q, int peer, uint32_t seq0, uint32_t nchunks, uint64_t count,
	    uint8_t flags)
{
	bool check = flags & AG_RING_CHECK;
	uint8_t fb = flags & 0x7F;
	struct cais_request *r;

	if (!check && finished_innet(q, seq0)) {
		/* the switch's results are here: the asker fetches them, no ring */
		ag_ring_decline(q->rings, peer, seq0);
		return;
	}
	r = req_by_seq0(q, seq0);
	if (r) {
		if (r->nchunks != nchunks || r->count != count) {
			/* the ranks do not agree on what this collective is */
			complete(q, r, -EPROTO);
			return;
		}
		if (!check && r->state == AG_RQ_INNET &&
		    !to_ring(q, r, fb < CAIS_FB_COUNT ? (enum cais_fallback)fb : CAIS_FB_SILENT))
			return;
		if (r->state == AG_RQ_RING && r->in_check == check && r->ring) {
			ag_ring_joined(q->rings, r->ring, peer);
			if (!r->ring_complete)
				ring_step(q, r, ag_ring_progress(q->rings, r->ring));
			return;
		}
		if (r->state == AG_RQ_FETCH || (!check && r->in_check))
			return;
	}
	/* not issued here yet, or its reference ring has not begun: remember */
	ag_ring_remember(q->rings, peer, seq0, check, fb);
}

/* A peer finished seq0 in-network: fetch the rest from it instead of the ring. */
static void
on_finished(struct ag_reqs *q, int peer, uint32_t seq0)
{
	struct cais_request *r = req_by_seq0(q, seq0);
	uint8_t *have;

	if (!r || r->state != AG_RQ_RING || r->in_check || r->ring_complete)
		return;
	if (!r->stage) {
		/* it went to the ring at issue here, yet a peer used the switch */
		complete(q, r, -EPROTO);
		return;
	}
	have = malloc(r->nchunks);
	if (!have) {
		complete(q, r, -ENOMEM);
		return;
	}
	for (uint32_t i = 0; i < r->nchunks; i++)
		have[i] = atomic_load(&r->resolved[i]);
	ag_ring_end(q->rings, r->ring);
	r->ring = NULL;
	r->state = AG_RQ_FETCH;
	r->fetch_from = peer;
	ag_fetch_from(q->f, peer, r->seq0, r->nchunks, have);
	free(have);
}

static int
on_ring_data(struct ag_reqs *q, const struct ag_msg *h, const uint8_t *data)
{
	struct cais_request *r = req_by_seq0(q, ntohl(h->seq));
	int rc;

	if (!r || r->state != AG_RQ_RING || !r->ring || r->ring_complete)
		return 0; /* a collective that ended here (timeout): its data is moot */
	rc = ag_ring_on_data(q->rings, r->ring, h, data);
	if (rc == -EPROTO)
		return rc;
	ring_step(q, r, rc);
	return 0;
}

static int
on_message(void *ctx, int peer, const struct ag_msg *h, const uint8_t *payload)
{
	struct ag_reqs *q = ctx;
	uint32_t seq = ntohl(h->seq), n = ntohl(h->n);

	switch (h->type) {
	case AG_FETCH:
		ag_fetch_answer(q->f, peer, seq, n);
		return 0;
	case AG_FETCH_OK:
		if (n > q->elems || ntohl(h->len) > q->stride)
			return -EPROTO;
		on_fetch_ok(q, h, payload);
		return 0;
	case AG_FETCH_NO:
		on_fetch_no(q, peer, seq, (enum ag_have)h->flags);
		return 0;
	case AG_RING_REQ:
		on_ring_req(q, peer, seq, n, be64toh(h->off), h->flags);
		return 0;
	case AG_FINISHED:
		on_finished(q, peer, seq);
		return 0;
	case AG_RING_DATA:
		return on_ring_data(q, h, payload);
	default:
		return -EPROTO;
	}
}

static void
on_ring_sent(void *ctx, uint32_t seq0)
{
	struct ag_reqs *q = ctx;
	struct cais_request *r = req_by_seq0(q, seq0);

	if (r && r->ring && !r->ring_complete)
		ring_step(q, r, ag_ring_sent(q->rings, r->ring));
}

void
ag_req_peer_handler(struct ag_reqs *q, struct ag_peer_handler *h)
{
	h->ctx = q;
	h->message = on_message;
	h->ring_sent = on_ring_sent;
}
