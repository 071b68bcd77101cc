/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * One all-reduce (struct cais_request of cais.h), as the progress thread
 * (req.c) and the flows (flow.c) share it. Only req.c changes its state;
 * the flows, each with its own part of the chunks, write only the results
 * (their chunks' staging bytes or their part of recv, resolved[]) and the
 * atomic counters, and read the rest.
 *
 * Chunk idx of a collective is seq seq0 + idx; seq goes to flow
 * seq & (nflows - 1) (nflows a power of two that divides the pool size S),
 * so a flow owns the slots seq & (S - 1) that are its index modulo nflows.
 */
#ifndef AG_REQUEST_H
#define AG_REQUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <cais/cais.h>

enum ag_req_state {
	AG_RQ_NEW = 0, /**< submitted, not issued yet */
	AG_RQ_INNET,   /**< chunks through the switch */
	AG_RQ_RING,    /**< on the ring: waiting for every peer, then moving data */
	AG_RQ_FETCH,   /**< a peer finished it in-network: fetching the rest from it */
	AG_RQ_DONE,    /**< completed (handed over once every flow let it go) */
};

struct ag_ring;

struct cais_request {
	/* set at submission, then only read */
	struct cais_comm *c; /**< whose (for cais_wait()) */
	TAILQ_ENTRY(cais_request) link;
	uint32_t tensor;
	const void *send;
	void *recv;
	size_t count;
	enum cais_datatype dt;
	enum cais_redop op;
	uint32_t seq0;
	uint32_t nchunks;
	bool switch_only; /**< CAIS_PATH_SWITCH: fail instead of the ring */
	bool check;	  /**< sample the error against a reference ring */
	uint64_t t_issue;
	uint64_t deadline;

	/*
	 * How chunks are encoded: set at submission; changed only by the
	 * progress thread (a switch without BLOCK16), scale before wire, each
	 * store a release; flows load wire, then scale.
	 */
	_Atomic float scale;
	_Atomic uint8_t wire; /**< CAIS_DT_* */

	/* set at issue by the progress thread, then read by the flows */
	uint8_t *stage; /**< nchunks x stride: encoded input (the send buffers), then results */
	size_t stage_size;
	bool direct; /**< results decoded straight into recv (recv != send, no check) */
	_Atomic uint8_t *resolved; /**< per chunk: has its result */

	/* counters the flows change */
	atomic_uint n_resolved;
	atomic_uint retx;	 /**< DATA retransmitted */
	atomic_uint stop_left;	 /**< flows yet to leave the switch path (STOP) */
	atomic_uint decode_left; /**< flows yet to decode their chunks (DECODE) */
	atomic_uint held;	 /**< flows that still hold it (until DROP) */

	/* the progress thread's */
	enum ag_req_state state;
	enum cais_fallback fb; /**< why the ring (CAIS_FB_NONE: in-network) */
	bool in_check;	       /**< in-network done; its reference ring is running */
	bool via_switch;       /**< the result came from the switch (directly or via peers) */
	bool overflow;	       /**< a chunk came back with OVERFLOW */
	bool stopping;	       /**< STOP sent to the flows */
	bool stopped;	       /**< ... and every flow left the switch path */
	bool ring_complete;    /**< the ring is done; its output waits for stopped */
	bool decoding;	       /**< DECODE sent */
	bool dropping;	       /**< DROP sent: handed over when held reaches 0 */
	struct ag_ring *ring;
	uint8_t *taken; /**< per chunk: a peer's result is on its way to the flow */
	int fetch_from; /**< the peer that answered FINISHED, or -1 */
	uint32_t peer_chunks;
	double rel_error;

	/* completion, read by other threads */
	atomic_int done;
	int error;
	struct cais_status st;
};

TAILQ_HEAD(ag_req_list, cais_request);

/** @return the elements of chunk idx of r (elems per packet E). */
static inline uint16_t
ag_chunk_count(const struct cais_request *r, uint16_t elems, uint32_t idx)
{
	size_t first = (size_t)idx * elems;

	return (uint16_t)(r->count - first < elems ? r->count - first : elems);
}

/** @return the flow of chunk seq among nflows (a power of two). */
static inline unsigned int
ag_flow_of(uint32_t seq, unsigned int nflows)
{
	return seq & (nflows - 1);
}

#endif /* AG_REQUEST_H */
