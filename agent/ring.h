/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The ring fallback (docs/PROTOCOL.md E2): a ring all-reduce of one
 * collective among the ranks over the peer channel, reduce-scatter (n - 1
 * steps) then all-gather (n - 1 steps) on the original input. Floats are
 * reduced in fp32 (bf16 and fp16 widened exactly first), int32 with
 * saturating sums; every rank ends with the same bytes, since each segment
 * is reduced once, in ring order, and then copied.
 *
 * Joining: a rank that begins a ring sends RING_REQ to every peer, and the
 * data moves once every peer has joined. RING_REQs that come before this
 * rank begins that ring are remembered (ag_ring_remember()) and counted when
 * it does. Deciding whether a collective takes the ring is the owner's; this
 * module moves the data. Used by one thread (the progress thread).
 */
#ifndef AG_RING_H
#define AG_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cais/cais.h>

#include "peer.h"
#include "pool.h"
#include "quant.h"

/** RING_REQ flags: the low bits carry the fallback reason; this bit marks a reference ring. */
#define AG_RING_CHECK 0x80u

/** One collective as the ring sees it. */
struct ag_ring_job {
	uint32_t seq0;	  /**< its first seq: names the ring on the wire */
	uint32_t nchunks; /**< its chunks (checked against the peers' RING_REQ) */
	size_t count;
	enum cais_datatype dt;
	enum cais_redop op;
	const void *send; /**< the input, intact */
	bool check;	  /**< a reference ring (the error alarm's), not a fallback */
	uint8_t fb;	  /**< the fallback reason (enum cais_fallback), told to the peers */
};

struct ag_rings_conf {
	unsigned int rank, world;
	struct ag_peers *peers;
	struct ag_pool *pool;
	const struct cais_quant_ops *q;
};

struct ag_rings;
struct ag_ring;

int ag_rings_open(struct ag_rings **out, const struct ag_rings_conf *conf);
void ag_rings_close(struct ag_rings *g);

/**
 * Begin the ring of job: the work buffer from the input, RING_REQ to every
 * peer, the joins remembered for it counted.
 * @return 0 and *out; -ENOMEM
 */
int ag_ring_begin(struct ag_rings *g, const struct ag_ring_job *job, struct ag_ring **out);

/** Free a ring (its queued data is dropped). NULL is ignored. */
void ag_ring_end(struct ag_rings *g, struct ag_ring *ring);

/** Peer joined this ring (its RING_REQ). */
void ag_ring_joined(struct ag_rings *g, struct ag_ring *ring, int peer);

/**
 * Move data while every peer has joined.
 * @return 1 when the ring is complete (ag_ring_output() may follow), 0 while
 *         it goes on, -ENOMEM
 */
int ag_ring_progress(struct ag_rings *g, struct ag_ring *ring);

/**
 * Ring data (seq0, step, offset) arrived from the previous rank.
 * @return 1 complete, 0 going on, -EPROTO (not the step or offset expected),
 *         -ENOMEM
 */
int ag_ring_on_data(struct ag_rings *g, struct ag_ring *ring, const struct ag_msg *h,
		    const uint8_t *data);

/** A ring message of this ring is out. @return as ag_ring_progress() */
int ag_ring_sent(struct ag_rings *g, struct ag_ring *ring);

/** Write the ring's result into recv (the job's dtype; avg divided by n). */
void ag_ring_output(struct ag_rings *g, const struct ag_ring *ring, void *recv);

/** The switch's results of a collective: its chunks' payloads, one every stride bytes. */
struct ag_stage {
	const uint8_t *base;
	uint32_t stride; /**< bytes from one chunk to the next */
	uint16_t elems;	 /**< elements per chunk (the last may have fewer) */
	uint8_t dtype;	 /**< wire dtype */
	float scale;
};

/**
 * Relative L2 error of the switch's result against the ring's fp32 one,
 * both before any rounding to the output type (that rounding is the same on
 * either path). @return it, or -1 when out of memory
 */
double ag_ring_rel_error(struct ag_rings *g, const struct ag_ring *ring,
			 const struct ag_stage *stage);

/** Remember peer's RING_REQ for a ring this rank has not begun. */
void ag_ring_remember(struct ag_rings *g, int peer, uint32_t seq0, bool check, uint8_t fb);

/**
 * @return whether a peer asked for the ring (seq0, check) before this rank
 *         began it, and its fallback reason in *fb
 */
bool ag_ring_requested(const struct ag_rings *g, uint32_t seq0, bool check, uint8_t *fb);

/** Tell peer that this rank finished seq0's collective in-network (FINISHED). */
void ag_ring_decline(struct ag_rings *g, int peer, uint32_t seq0);

#endif /* AG_RING_H */
