/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A flow: one worker thread with its own UDP socket (source port: the rank's
 * port + its index) and its own switch window (window.h), that carries the
 * chunks of every collective whose seq is its own (request.h: ag_flow_of()):
 * it encodes them straight into their staging bytes (the send buffers),
 * sends and retransmits them, takes their RESULTs (decoded straight into
 * recv, or kept in staging), keeps them in the result cache (cache.h), and
 * tells the progress thread what it must decide (struct ag_flow_event).
 *
 * The progress thread (req.c) talks to a flow with commands, carried out in
 * order on the flow's thread: add a collective, stop it (leave the switch
 * path), resolve a chunk with a peer's result, decode its chunks from
 * staging into recv, encode them again after a change of wire type, drop it.
 * Each of stop, decode and drop counts down a counter of the request's; the
 * flow that brings it to zero says so with an event.
 */
#ifndef AG_FLOW_H
#define AG_FLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "cache.h"
#include "quant.h"
#include "request.h"
#include "window.h"

/** Flows per rank at most (each a thread, a socket and a port). */
#define AG_MAX_FLOWS 16u

/** What a flow tells the progress thread. */
enum ag_flow_event_type {
	AG_FE_DONE = 1,	 /**< every chunk of r has its result */
	AG_FE_RING,	 /**< r must take the ring, for reason fb */
	AG_FE_BAD_WIRE,	 /**< the switch has no BLOCK16 for r's tensor */
	AG_FE_SILENT,	 /**< chunk seq of r used its retries: ask the peers */
	AG_FE_STOPPED,	 /**< every flow left r's switch path */
	AG_FE_DECODED,	 /**< every flow decoded its chunks of r */
	AG_FE_RELEASED,	 /**< every flow let r go */
};

struct ag_flow_event {
	uint8_t type; /**< enum ag_flow_event_type */
	uint8_t fb;   /**< AG_FE_RING: enum cais_fallback */
	uint32_t seq; /**< AG_FE_SILENT */
	struct cais_request *r;
};

/** Where events go; post() is called on the flow's thread and must be thread-safe. */
struct ag_flow_host {
	void *ctx;
	void (*post)(void *ctx, const struct ag_flow_event *ev);
};

struct ag_flow_conf {
	unsigned int idx, nflows;
	struct ag_window_conf w; /**< the switch window; w.local: this flow's own port */
	unsigned int world;	 /**< for avg */
	uint16_t elems;		 /**< elements per packet E */
	uint32_t stride;	 /**< staging bytes of a chunk */
	bool round_nearest;
	uint64_t seed; /**< of the stochastic rounding's random stream */
	const struct cais_quant_ops *q;
	struct ag_cache *cache;
	struct ag_flow_host host;
};

struct ag_flow;

/**
 * Open the flow's socket and start its thread.
 * @return 0 and *out; what ag_window_open() returns; -ENOMEM
 */
int ag_flow_start(struct ag_flow **out, const struct ag_flow_conf *conf);

/** Stop the thread and free. The requests it held are not freed (the owner's). NULL ignored. */
void ag_flow_stop(struct ag_flow *f);

/* Commands (any thread; carried out in order on the flow's thread). */
/** r is in-network: send its chunks of this flow. */
void ag_flow_add(struct ag_flow *f, struct cais_request *r);
/** r leaves the switch path: forget its chunks in the window (r->stop_left). */
void ag_flow_stop_req(struct ag_flow *f, struct cais_request *r);
/** Chunk idx of r has this result from a peer (len bytes in r's wire dtype, copied). */
void ag_flow_resolve(struct ag_flow *f, struct cais_request *r, uint32_t idx,
		     const uint8_t *payload, uint32_t len, uint16_t count, uint8_t flags);
/** Decode this flow's chunks of r from staging into recv (r->decode_left). */
void ag_flow_decode(struct ag_flow *f, struct cais_request *r);
/** r's wire type changed: encode its chunks in the window again and send them at once. */
void ag_flow_redo(struct ag_flow *f, struct cais_request *r);
/** Let r go (r->held). */
void ag_flow_drop(struct ag_flow *f, struct cais_request *r);

/** @return where chunk seq stands in this flow's window (any thread: a hint). */
enum ag_window_state ag_flow_chunk_state(const struct ag_flow *f, uint32_t seq);

/** @return the seq after the last one this flow sent (any thread: a hint). */
uint32_t ag_flow_next_seq(const struct ag_flow *f);

/** Add this flow's window counters to *st; *congested += RESULTs with CONGESTED. */
void ag_flow_stats(const struct ag_flow *f, struct ag_window_stats *st, uint64_t *congested);

#endif /* AG_FLOW_H */
