/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The peer channel (docs/PROTOCOL.md E2): TCP among the ranks' data
 * addresses, through the switch as ordinary forwarded traffic. Transport
 * only: connections, the 32-byte message header, per-connection output
 * queues. What the messages mean is the owner's business: each whole
 * message received goes to the owner's handler (struct ag_peer_handler).
 *
 * Every rank listens on its data IP and port. Control connections (FETCH,
 * RING_REQ, FINISHED and their answers) are opened on first use by
 * whichever side needs one; ring data goes on a connection of its own from
 * each rank to the next, so small control messages never wait behind
 * megabytes of ring data. Sockets are non-blocking; a failed outbound
 * connection with data to send connects again after AG_CONNECT_RETRY_US,
 * and a connect not answered within AG_CONNECT_SYN_US starts over.
 * Used by one thread (the communicator's progress thread).
 */
#ifndef AG_PEER_H
#define AG_PEER_H

#include <poll.h>
#include <stdint.h>
#include <netinet/in.h>

/** A peer not listening yet (starting up): connect again after this. */
#define AG_CONNECT_RETRY_US 20000u
/**
 * A connect not answered this long (a SYN or SYN-ACK lost) starts over with
 * a fresh SYN from a new socket; each start-over waits twice as long as the
 * one before, up to AG_CONNECT_SYN_MAX_US, for AG_CONNECT_FAST_RESTARTS
 * start-overs (ag_connect_wait_us()). Linux would send the SYN again only
 * after 1 s, and again 1 s or more after that, whatever the route's
 * rto_min; and a connection whose SYN it did send again can measure its
 * RTT from the first SYN (about 1 s: an RTO of 3 s on that connection,
 * kept in the host's TCP metrics as a start for the next connections to
 * the same peer). These waits stay under that 1 s, so the kernel does not
 * send a SYN of ours twice. After them (a path whose answer takes longer
 * than AG_CONNECT_SYN_MAX_US, rather than a lost SYN) each wait doubles
 * again, up to 32 times AG_CONNECT_SYN_MAX_US, so that such a path still
 * connects.
 */
#define AG_CONNECT_SYN_US	 20000u
#define AG_CONNECT_SYN_MAX_US	 320000u
#define AG_CONNECT_FAST_RESTARTS 8u

/** How long a connect started over `restarts` times waits for its answer, in us. */
static inline uint32_t
ag_connect_wait_us(unsigned int restarts)
{
	uint64_t us;

	if (restarts >= AG_CONNECT_FAST_RESTARTS) {
		unsigned int more = restarts - AG_CONNECT_FAST_RESTARTS + 1;

		return AG_CONNECT_SYN_MAX_US << (more < 5 ? more : 5);
	}
	us = (uint64_t)AG_CONNECT_SYN_US << restarts;
	return us < AG_CONNECT_SYN_MAX_US ? (uint32_t)us : AG_CONNECT_SYN_MAX_US;
}
_Static_assert(AG_CONNECT_SYN_MAX_US < 1000000u, "a fresh SYN before Linux's own, at 1 s");
/**
 * The ranks' TCP (this channel, the NCCL plugin's ncclNet) sends a lost
 * segment again after at least this long instead of Linux's 200 ms
 * (TCP_RTO_MIN_US, Linux 6.15 and later; older kernels keep their own, and
 * a route's rto_min still applies): one lost segment of the ring (the
 * fallback, which runs when the network is at its worst) would otherwise
 * stall every rank for 200 ms. AG_RTO_MIN_ENV in the environment sets
 * another floor in us, 0 for the kernel's (ag_tcp_rto_min_conf()).
 */
#define AG_RTO_MIN_US	    5000u
#define AG_RTO_MIN_ENV	    "CAIS_TCP_RTO_MIN_US"
/** Ring data moves in messages of at most this many bytes (bounded receive buffers). */
#define AG_RING_PIECE	    (256u << 10)

#define AG_MSG_MAGIC 0xCA15CA1Fu

/** Message types (E2). */
enum ag_msg_type {
	AG_HELLO = 1, /**< first message of a connection: rank, connection kind */
	AG_FETCH,     /**< seq, n: the results of seqs [seq, seq + n), please */
	AG_FETCH_OK,  /**< seq, n elements, flags: one chunk's fixed-point result */
	AG_FETCH_NO,  /**< seq, flags = enum ag_have: why not */
	AG_RING_REQ,  /**< seq0, n chunks, off = count: I join the ring for this collective */
	AG_FINISHED,  /**< seq0: I finished it in-network; fetch from me */
	AG_RING_DATA, /**< seq0, n = step, off = byte offset in the segment: ring payload */
};

/** Wire header of every peer message; fields in network order. */
struct ag_msg {
	uint32_t magic;
	uint8_t type;
	uint8_t flags;
	uint16_t rank;
	uint32_t seq;
	uint32_t n;
	uint64_t off;
	uint32_t len; /**< payload bytes after this header */
	uint32_t pad;
};
_Static_assert(sizeof(struct ag_msg) == 32, "peer message header is 32 bytes");

/** Fill a message header (network order) from this rank. */
void ag_msg_init(struct ag_msg *h, unsigned int rank, enum ag_msg_type type, uint8_t flags,
		 uint32_t seq, uint32_t n, uint64_t off, uint32_t len);

/** What the owner hears from the channel. */
struct ag_peer_handler {
	void *ctx;
	/**
	 * A whole message from peer (any type but HELLO; the header still in
	 * network order, payload h->len bytes, valid during the call).
	 * @return 0, or -EPROTO to close the connection (a peer that broke
	 *         the protocol)
	 */
	int (*message)(void *ctx, int peer, const struct ag_msg *h, const uint8_t *payload);
	/** A ring message queued with ag_peers_send_ring() is out: its buffer is free. */
	void (*ring_sent)(void *ctx, uint32_t seq0);
};

struct ag_peers;

/**
 * The ranks' TCP retransmission floor in us: AG_RTO_MIN_ENV's value, else
 * AG_RTO_MIN_US; 0 for the kernel's own. A value that is not a number of
 * us in 0..1000000 is said on stderr and AG_RTO_MIN_US taken instead.
 */
int ag_tcp_rto_min_conf(void);

/**
 * A TCP socket between ranks: no Nagle (small control messages), and the
 * retransmission floor rto_min_us unless 0 (a kernel without
 * TCP_RTO_MIN_US keeps its own).
 */
void ag_tcp_tune(int fd, int rto_min_us);

/**
 * Listen on this rank's data address (TCP).
 * @param rank, world   this rank, the world size
 * @param addrs         world data addresses (copied)
 * @param max_payload   largest payload a message may carry (bigger ones close the connection)
 * @param h             the owner's handler (copied)
 * @return 0 and *out; -ENOMEM; the -errno of socket(), bind() or listen()
 */
int ag_peers_open(struct ag_peers **out, unsigned int rank, unsigned int world,
		  const struct sockaddr_in *addrs, uint32_t max_payload,
		  const struct ag_peer_handler *h);

/** Close every connection and free. NULL is ignored. */
void ag_peers_close(struct ag_peers *p);

/**
 * Queue a message to peer, copying len bytes of data.
 * @return 0; -EINVAL (peer is this rank or out of range); -ENOMEM
 */
int ag_peers_send(struct ag_peers *p, int peer, const struct ag_msg *h, const void *data,
		  uint32_t len);

/**
 * Queue a ring message to the next rank; data is borrowed until the
 * handler's ring_sent() for its seq0, or ag_peers_purge_ring().
 * @return 0; -ENOMEM
 */
int ag_peers_send_ring(struct ag_peers *p, const struct ag_msg *h, const void *data, uint32_t len);

/** Drop the queued ring messages of seq0 (their buffer goes away). */
void ag_peers_purge_ring(struct ag_peers *p, uint32_t seq0);

/**
 * Accept, connect, read (handler calls) and write whatever is ready: reads
 * and accepts only where the last poll (ag_peers_polled()) found something,
 * or on sockets not polled since they were opened.
 */
void ag_peers_progress(struct ag_peers *p, uint64_t now);

/** Fill up to max pollfds for the channel's sockets. @return how many */
unsigned int ag_peers_pollfds(const struct ag_peers *p, struct pollfd *pfd, unsigned int max);

/**
 * What a poll of the n pollfds that ag_peers_pollfds() filled found: the
 * sockets ag_peers_progress() reads. Before the channel changes (nothing
 * in between but the poll).
 */
void ag_peers_polled(struct ag_peers *p, const struct pollfd *pfd, unsigned int n);

/** @return the earliest reconnect time (ns), or UINT64_MAX. */
uint64_t ag_peers_next_timer(const struct ag_peers *p);

#endif /* AG_PEER_H */
