/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A collective's life, on the communicator's progress thread: issue, the
 * in-network path (handed to the flows, flow.h, which carry the chunks), the
 * moves to the ring (REJECT, OVERFLOW, FWD_ONLY, silence, a peer's
 * RING_REQ), the fetch from a peer that finished it in-network, and
 * completion. This module alone changes a request's state (request.h); the
 * flows, FETCH recovery and the ring report to it through their events and
 * return values, and it answers the peers' messages (the peer channel's
 * handler).
 *
 * A collective owns the seqs [seq0, seq0 + nchunks). In-network, results go
 * straight into recv when recv is not the input (and no error check is
 * due); else into staging, decoded into recv by the flows once every chunk
 * is in, so the input stays intact until then (the ring, should the
 * collective need it, works on the input).
 *
 * Wire types: a request's chunks go as its wire dtype (FIXED32, or BLOCK16
 * for float tensors that ask for it). A BAD_DTYPE REJECT of a BLOCK16 chunk
 * moves the tensor to FIXED32 (the owner decides its scale) and the flows
 * send the request's chunks again as FIXED32, same seqs.
 */
#ifndef AG_REQ_H
#define AG_REQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cais/cais.h>

#include "cache.h"
#include "fetch.h"
#include "flow.h"
#include "peer.h"
#include "pool.h"
#include "quant.h"
#include "request.h"
#include "ring.h"

/** Completed in-network collectives remembered, to answer RING_REQ with FINISHED. */
#define AG_FINISHED_LOG 4096u

/** The requests of a communicator and what they use. The owner fills it, then ag_req_init(). */
struct ag_reqs {
	/* set by the owner */
	unsigned int rank, world;
	uint32_t slots;
	uint16_t elems;
	uint32_t stride; /**< staging bytes of one chunk (its largest payload) */
	const struct cais_quant_ops *q;
	struct ag_pool *pool;
	struct ag_flow **flows; /**< nflows */
	unsigned int nflows;	/**< a power of two */
	struct ag_cache *cache;
	struct ag_peers *peers;
	struct ag_fetch *f;
	struct ag_rings *rings;
	/** A request completed and no flow holds it: hand it over. */
	void (*completed)(void *ctx, struct cais_request *r);
	/**
	 * The switch refused tensor as BLOCK16: from now on FIXED32.
	 * @return the tensor's FIXED32 scale (the same on every rank)
	 */
	float (*wire_refused)(void *ctx, uint32_t tensor);
	/** Wake the progress thread (an event came from a flow); any thread. */
	void (*wake)(void *ctx);
	void *ctx;

	/* the module's */
	struct ag_req_list active; /**< issued, not handed over, in seq order */
	uint64_t now;
	uint32_t finished[AG_FINISHED_LOG]; /**< seq0 of collectives finished in-network */
	unsigned int n_finished;
	uint64_t peer_chunks;  /**< chunk results fetched from peers (relaxed atomics) */
	pthread_mutex_t lock;  /**< the events */
	struct ag_flow_event *ev;
	unsigned int n_ev, cap_ev;
};

/** @return 0; -ENOMEM. */
int ag_req_init(struct ag_reqs *q);

/** The host the flows post to, the handler of the peer channel, FETCH recovery's source. */
void ag_req_flow_host(struct ag_reqs *q, struct ag_flow_host *h);
void ag_req_peer_handler(struct ag_reqs *q, struct ag_peer_handler *h);
void ag_req_fetch_source(struct ag_reqs *q, struct ag_fetch_source *src);

/**
 * Issue a submitted request (r->fb says whether the offload decision sent
 * it to the ring). It may complete at once (switch-only, refused).
 */
void ag_req_issue(struct ag_reqs *q, struct cais_request *r);

/** Take the flows' events; complete what is complete, move rings on, time out what is late. */
void ag_req_progress(struct ag_reqs *q, uint64_t now);

/** @return the earliest time (ns) the requests need the thread again, or UINT64_MAX. */
uint64_t ag_req_next_timer(const struct ag_reqs *q);

/** Free every request's resources and the requests (the flows have stopped). */
void ag_req_discard(struct ag_reqs *q);

/** @return chunk results fetched from peers. */
uint64_t ag_req_peer_chunks(const struct ag_reqs *q);

#endif /* AG_REQ_H */
