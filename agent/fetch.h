/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * FETCH recovery (docs/PROTOCOL.md E2): a chunk the switch stays silent
 * about is asked of the peers (again AG_QUERY_US later, then at doubling
 * intervals), since a peer that got its RESULT holds the same fixed-point
 * bytes; this rank answers the peers' FETCHes from its result cache
 * (cache.h) and its owner's active collectives. A chunk goes to the ring
 * only when every peer says it is stuck too (the switch lost the round) or
 * one peer is on the ring already. A FETCH_OK carries one chunk's result
 * as its RESULT carried it: n = count, flags = the RESULT's flags, off =
 * its wire dtype, len bytes of payload. Used by one thread (the
 * communicator's progress thread).
 */
#ifndef AG_FETCH_H
#define AG_FETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "cache.h"
#include "flow.h"
#include "peer.h"

/**
 * While waiting on peers for a silent chunk, ask again after this, then
 * twice as long each time, up to AG_QUERY_MAX_US: a round that waits for a
 * rank busy elsewhere (its collective on the ring, or not issued yet) keeps
 * every chunk of the window silent, and each asks every peer.
 */
#define AG_QUERY_US	20000u
#define AG_QUERY_MAX_US 320000u

/** A FETCH_NO's state of the answering rank for that seq (the message's flags). */
enum ag_have {
	AG_HAVE_NOT_SENT = 1, /**< it has not sent that chunk yet: wait */
	AG_HAVE_INFLIGHT = 2, /**< it sent it recently, its RESULT may be on the way: wait */
	AG_HAVE_STUCK = 3,    /**< it used up its retries too: the switch lost the round */
	AG_HAVE_RING = 4,     /**< its collective is on the ring */
	AG_HAVE_ACKED = 5,    /**< its DATA is in (an ACK, E6): the round waits for a rank */
};

/** What the decisions say. */
enum ag_fetch_verdict {
	AG_FETCH_WAIT = 0, /**< keep waiting (for the switch or a peer) */
	AG_FETCH_RING,	   /**< nobody has it: the collective goes to the ring */
};

/** The owner's side of chunks that the cache no longer (or not yet) holds. */
struct ag_fetch_source {
	void *ctx;
	/**
	 * @return whether this rank has seq's result (then in *res), else
	 *         *have says why not
	 */
	bool (*lookup)(void *ctx, uint32_t seq, struct ag_result *res, enum ag_have *have);
};

struct ag_fetch_conf {
	unsigned int rank, world;
	uint32_t slots;	 /**< the session's pool size S (queries are indexed by seq mod S) */
	uint32_t stride; /**< the largest payload of a chunk */
	struct ag_peers *peers;
	struct ag_cache *cache;
	struct ag_flow *const *flows; /**< nflows: where chunks stand */
	unsigned int nflows;
};

struct ag_fetch;

/** @return 0 and *out; -ENOMEM */
int ag_fetch_open(struct ag_fetch **out, const struct ag_fetch_conf *conf,
		  const struct ag_fetch_source *src);

void ag_fetch_close(struct ag_fetch *f);

/**
 * Chunk seq is silent (its flow says so): ask every peer now, and again
 * while its flow holds it as silent, AG_QUERY_US later, then at doubling
 * intervals (AG_QUERY_MAX_US at most).
 * @return AG_FETCH_RING when there is no peer to ask
 */
enum ag_fetch_verdict ag_fetch_start(struct ag_fetch *f, uint32_t seq, uint64_t now);

/** Ask again about the silent chunks whose time has come. */
void ag_fetch_tick(struct ag_fetch *f, uint64_t now);

/** @return the next query time (ns), or UINT64_MAX. */
uint64_t ag_fetch_next_timer(const struct ag_fetch *f);

/** Answer a peer's FETCH of [seq, seq + n) (at most 2 x S of them), chunk by chunk. */
void ag_fetch_answer(struct ag_fetch *f, int peer, uint32_t seq, uint32_t n);

/**
 * A peer's FETCH_NO about silent chunk seq.
 * @return AG_FETCH_RING when every peer is stuck too, or this one is on the ring
 */
enum ag_fetch_verdict ag_fetch_on_no(struct ag_fetch *f, int peer, uint32_t seq,
				     enum ag_have have);

/**
 * Ask peer (which finished the collective in-network) for every chunk of
 * [seq0, seq0 + nchunks) that have[] does not mark, in runs of consecutive seqs.
 */
void ag_fetch_from(struct ag_fetch *f, int peer, uint32_t seq0, uint32_t nchunks,
		   const uint8_t *have);

/** @return chunk results served to peers (any thread). */
uint64_t ag_fetch_served(const struct ag_fetch *f);

#endif /* AG_FETCH_H */
