/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The switch window of PROTOCOL.md section 3, for one UDP flow: the socket,
 * the chunks in flight (at most S, and chunk seq + S only after the result of
 * seq), their retransmission with an adaptive timer (RTT estimate, backoff),
 * RESULT, REJECT and ACK reception (E6: an ACKed chunk's round waits for
 * others; it backs off and does not count towards silence), NACKs (E11) and
 * QUERYs (E12: a stall asks the switch whether the newest chunk's DATA is in).
 *
 * The window knows chunks, not collectives: each chunk carries an opaque
 * owner and an index, given back in the events (struct ag_window_events)
 * with which the window reports what the switch said. Used by one thread
 * (its flow's); ag_window_state() and ag_window_next_seq() answer any
 * thread, as hints.
 */
#ifndef AG_WINDOW_H
#define AG_WINDOW_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

/** Datagrams per sendmmsg/recvmmsg: amortises the syscall, bounded stack use. */
#define AG_BATCH       64
/**
 * UDP GSO (UDP_SEGMENT): consecutive chunks of one length leave as one
 * message of at most AG_GSO_SEGS chunks and AG_GSO_BYTES bytes, which the
 * kernel cuts into the same datagrams: one pass through the UDP and IP
 * output path for the run, not one per chunk. A path that refuses it (no
 * checksum offload on old kernels, SO_NO_CHECK) sends one message per
 * chunk from then on; the environment variable AG_GSO_ENV set to 0 does
 * so from the start (a baseline for benchmarks).
 */
#define AG_GSO_SEGS    64
#define AG_GSO_BYTES   65000
#define AG_GSO_ENV     "CAIS_UDP_GSO"
/** One received datagram: the largest CAIS message (24 + 4 x 2048) and room to spare. */
#define AG_DGRAM       9216
/** Retransmission backoff doubles up to this (a restarting switch takes a while). */
#define AG_RETX_CAP_US	   20000u
/** The learned timer (how long rounds wait for other ranks) stops here. */
#define AG_RTO_MAX_US	   100000u
/** The timer before a flow's first RTT sample (ag_window_conf.first_timeout_us). */
#define AG_FIRST_RTO_US	   AG_RETX_CAP_US
/**
 * The QUERY interval (E12) doubles per QUERY up to this, or up to the
 * round trip where that is longer: a rank whose round waited long for the
 * others, and whose RESULT was then lost, asks again within it.
 */
#define AG_QUERY_IV_MAX_US 50000u
/**
 * A QUERY about the newest chunk goes at most this many timers after the
 * RESULT of a chunk sent with it, or after the send of a collective's only
 * chunk (window.c query_due()), not a round trip that holds the waits for
 * other ranks.
 */
#define AG_QUERY_SOON_TIMERS 4u
/** After an ACK a chunk waits twice its wait so far, at most this. */
#define AG_ACK_WAIT_MAX_US 500000u
/** A switch is silent only after it sent a flow nothing for this long (E6). */
#define AG_QUIET_US	   1000000u
/**
 * An ACKed chunk without its RESULT this long after its first DATA is
 * silent too: every rank's DATA may be in and the switch may have lost the
 * round (a restart between contributions); the peers are asked (fetch.h).
 */
#define AG_STALL_US	   1000000u

/** Where a chunk stands in the window. */
enum ag_window_state {
	AG_W_FREE = 0,	/**< not in the window (never sent, resolved, or forgotten) */
	AG_W_INFLIGHT,	/**< DATA sent (or about to be), waiting for the RESULT */
	AG_W_SILENT,	/**< retries used up and the switch quiet, or ACKed and stalled
			     (judged_silent() in window.c): still retransmitted, at the capped
			     interval (stalled: the ACK wait); an ACK undoes it unless stalled */
	AG_W_ACKED,	/**< in flight, and an ACK said its DATA is in: the round waits for
			     other ranks (E6); retransmitted, rarely, as INFLIGHT */
};

struct ag_window_conf {
	uint16_t tenant, session;
	uint8_t rank;
	uint32_t slots;		  /**< the session's pool size S, a power of two */
	uint16_t elems;		  /**< elements per packet E */
	uint32_t first_seq;	  /**< the first seq this flow may send */
	uint32_t retx_timeout_us; /**< the timer's floor */
	/**
	 * The timer before the first RTT sample (at least the floor; 0: the
	 * floor). Until a RESULT says how long this flow's rounds take, a
	 * timer as short as the floor takes every late first round for a loss.
	 */
	uint32_t first_timeout_us;
	uint32_t retries;	  /**< unacknowledged retransmissions before a chunk may be silent */
	bool no_query;		  /**< send no QUERY (E12; tests of the other rules) */
	struct sockaddr_in local; /**< this rank's data address (the socket binds it) */
	struct sockaddr_in sw;	  /**< the aggregator */
};

/** What the window reports; called from ag_window_rx() and ag_window_tx(). */
struct ag_window_events {
	void *ctx;
	/**
	 * The RESULT of a chunk; its entry is already free. payload holds its
	 * count elements in the chunk's wire dtype (len bytes), valid during
	 * the call.
	 */
	void (*result)(void *ctx, void *owner, uint32_t idx, const uint8_t *payload, uint16_t count,
		       uint32_t len, uint8_t flags);
	/**
	 * A REJECT of chunk seq of owner (reason CAIS_R_*; dtype: the one the
	 * REJECTed DATA carried); the chunk stays in the window.
	 */
	void (*reject)(void *ctx, void *owner, uint32_t seq, uint16_t reason, uint8_t dtype);
	/**
	 * Chunk seq of owner used up its retries. It stays in the window and is
	 * still retransmitted until ag_window_resolved() or ag_window_forget().
	 */
	void (*silent)(void *ctx, void *owner, uint32_t seq);
};

/** Counters, read from any thread (relaxed atomics). */
struct ag_window_stats {
	uint64_t chunks_sent;	  /**< DATA first transmissions */
	uint64_t retransmissions; /**< DATA retransmissions */
	uint64_t results_ignored; /**< RESULTs not in flight (duplicate, stale) */
	uint64_t acks;		  /**< ACKs of chunks in flight (E6) */
	uint64_t nacks;		  /**< NACKs of chunks in flight (E11) */
	uint64_t queries;	  /**< QUERYs sent (E12) */
	uint64_t send_errors;	  /**< DATA the socket refused for good (a firewall, the MTU) */
	uint64_t gso_sends;	  /**< messages that carried several chunks (UDP GSO) */
	uint64_t gso_refused;	  /**< 1 once the socket refused GSO (then none) */
};

struct ag_window;

/**
 * Open the flow: check that a packet of E elements fits the path MTU to the
 * switch, bind the UDP socket to conf->local.
 * @return 0 and *out; -EMSGSIZE; -ENOMEM; the -errno of socket() or bind()
 */
int ag_window_open(struct ag_window **out, const struct ag_window_conf *conf,
		   const struct ag_window_events *ev);

/** Close the socket and free. NULL is ignored. */
void ag_window_close(struct ag_window *w);

/** The UDP socket (for poll). */
int ag_window_fd(const struct ag_window *w);

/** @return whether chunk seq (not before any seq sent so far) may be sent now. */
bool ag_window_room(const struct ag_window *w, uint32_t seq);

/**
 * Put chunk seq in the window; ag_window_tx() sends it. Seqs between the
 * last one sent and seq are skipped (collectives that took the ring).
 * @param dtype   the wire dtype (CAIS_DT_*)
 * @param payload count elements of dtype (cais_payload_bytes()); must stay
 *                valid until the chunk is resolved or forgotten
 * @param retx    a counter of owner's that each retransmission increments
 */
void ag_window_send(struct ag_window *w, uint32_t seq, uint32_t tensor, uint8_t dtype,
		    uint16_t count, const uint8_t *payload, void *owner, uint32_t idx,
		    atomic_uint *retx);

/**
 * Chunk seq goes again, now, as a first transmission in dtype (its payload,
 * the same buffer, re-encoded by the owner): a BLOCK16 chunk the switch
 * refused as FIXED32. Nothing if the window does not hold seq.
 */
void ag_window_redo(struct ag_window *w, uint32_t seq, uint8_t dtype);

/** Send what is queued and retransmit what timed out (silent events after). */
void ag_window_tx(struct ag_window *w, uint64_t now);

/** Receive what the switch sent (result and reject events). */
void ag_window_rx(struct ag_window *w, uint64_t now);

/** Chunk seq was resolved another way (a peer had it): it leaves the window. */
void ag_window_resolved(struct ag_window *w, uint32_t seq);

/** Every chunk of owner leaves the window (its collective left the switch). */
void ag_window_forget(struct ag_window *w, const void *owner);

/** @return where chunk seq stands (any thread: a hint). */
enum ag_window_state ag_window_state(const struct ag_window *w, uint32_t seq);

/**
 * @return the seq after the last one put in the window (every earlier one
 *         of this flow was sent or skipped; any thread: a hint)
 */
uint32_t ag_window_next_seq(const struct ag_window *w);

/** @return the earliest timer (ns) of the window, or UINT64_MAX. */
uint64_t ag_window_next_timer(const struct ag_window *w, uint64_t now);

/** @return whether the socket refused a send: poll it for POLLOUT. */
bool ag_window_blocked(const struct ag_window *w);

/** Copy the counters. */
void ag_window_stats(const struct ag_window *w, struct ag_window_stats *out);

#endif /* AG_WINDOW_H */
