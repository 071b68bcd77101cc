/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * libcais internals: the communicator, requests, the switch window, the
 * peer channel and the ring. Everything here belongs to the communicator's
 * progress thread, except the submission queue and the completion flags.
 *
 * A collective (request) owns the seqs [seq0, seq0 + nchunks). Its path:
 *  - in-network: chunks are quantized into the request's staging buffer and
 *    sent as DATA within the window of PROTOCOL.md section 3; a RESULT's
 *    payload replaces the chunk's staging bytes and goes into the result
 *    cache (the last 2 x slots chunks, served to peers). A chunk the switch
 *    stays silent about is asked of the peers (FETCH); a peer that has it
 *    answers with the same fixed-point bytes. When every chunk is in, the
 *    staging buffer is decoded into recv (so the input is intact until then,
 *    in place or not).
 *  - ring: every rank joins (RING_REQ to all peers); when all have joined,
 *    reduce-scatter and all-gather run over the ring connections on the
 *    original input. A peer that had already finished the collective
 *    in-network answers FINISHED instead, and the others fetch from it.
 * A collective goes to the ring at issue (threshold, tensor off, forced),
 * or when a chunk is REJECTed, flagged OVERFLOW or FWD_ONLY, or silent and
 * not to be had from any peer while every peer has sent it.
 */
#ifndef CAIS_AGENT_H
#define CAIS_AGENT_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <netinet/in.h>

#include <cais/cais.h>
#include <cais/proto.h>

#include "cmn_hist.h"
#include "ctl_auth.h"
#include "quant.h"

/* ---- sizes and timers, with their reasons ---- */

/** Datagrams per sendmmsg/recvmmsg: amortises the syscall, bounded stack use. */
#define AG_BATCH	    64
/** One received datagram: the largest CAIS message (24 + 4 x 2048) and headers. */
#define AG_DGRAM	    9216
/** Retransmission backoff doubles up to this (a restarting switch takes a while). */
#define AG_RETX_CAP_US	    20000u
/** While waiting on peers for a silent chunk, ask again this often. */
#define AG_QUERY_US	    20000u
/** A peer not listening yet (starting up): connect again after this. */
#define AG_CONNECT_RETRY_US 20000u
/** Ring data moves in messages of at most this many bytes (bounded receive buffers). */
#define AG_RING_PIECE	    (256u << 10)
/** Sockets one progress thread polls at most (peers x 2 + 3). */
#define AG_MAX_POLL	    1024
/** Completed in-network collectives remembered, to answer RING_REQ with FINISHED. */
#define AG_FINISHED_LOG	    4096u
/** Collectives smaller than this are not sampled by the error alarm (too few values). */
#define AG_CHECK_MIN_COUNT  256u
/** Staging and ring buffers kept for reuse: fresh large buffers cost page faults. */
#define AG_POOL_BUFS	    4u

/* ---- peer messages (TCP) ---- */

#define AG_MSG_MAGIC 0xCA15CA1Fu

enum ag_msg_type {
	AG_HELLO = 1, /**< first message of a connection: rank, connection kind */
	AG_FETCH,     /**< seq, n: the results of seqs [seq, seq + n), please */
	AG_FETCH_OK,  /**< seq, n elements, flags: one chunk's fixed-point result */
	AG_FETCH_NO,  /**< seq, flags = enum ag_have: why not */
	AG_RING_REQ,  /**< seq0, n chunks, off = count: I join the ring for this collective */
	AG_FINISHED,  /**< seq0: I finished it in-network; fetch from me */
	AG_RING_DATA, /**< seq0, n = step, off = byte offset in the segment: ring payload */
};

/** Connection kinds (AG_HELLO flags). */
enum ag_conn_kind { AG_CONN_NEW = 0, AG_CONN_CTL = 1, AG_CONN_RING = 2 };

/** A FETCH_NO's state of the answering rank for that seq. */
enum ag_have {
	AG_HAVE_NOT_SENT = 1, /**< it has not sent that chunk yet: wait */
	AG_HAVE_INFLIGHT = 2, /**< it sent it recently, its RESULT may be on the way: wait */
	AG_HAVE_STUCK = 3,    /**< it used up its retries too: the switch lost the round */
	AG_HAVE_RING = 4,     /**< its collective is on the ring */
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

/** One queued output: a header, and a payload either owned (copied) or borrowed. */
struct ag_out {
	STAILQ_ENTRY(ag_out) link;
	struct ag_msg h;
	const uint8_t *data; /**< borrowed (ring data in a work buffer) or own[] */
	uint32_t len;
	uint32_t done; /**< bytes of header + payload written */
	uint8_t own[];
};

struct ag_conn {
	int fd;
	int peer; /**< rank, -1 until HELLO */
	int kind; /**< enum ag_conn_kind */
	bool outbound;
	bool connecting; /**< non-blocking connect in progress */
	uint64_t retry_at;
	STAILQ_HEAD(, ag_out) outq;
	/* input */
	struct ag_msg in;
	uint32_t in_got;     /**< header bytes read */
	uint8_t *in_buf;     /**< payload buffer (AG_RING_PIECE or a chunk) */
	uint32_t in_len;     /**< payload bytes expected */
	uint32_t in_pay_got; /**< payload bytes read */
};

/* ---- the switch window ---- */

enum ag_chunk_state {
	AG_CH_FREE = 0,
	AG_CH_INFLIGHT, /**< DATA sent, waiting for the RESULT */
	AG_CH_SILENT,	/**< retries used up: asking peers, still retransmitting slowly */
};

/** A window entry, at index seq & (slots - 1). */
struct ag_slot {
	uint32_t seq;
	uint8_t state;
	uint16_t tries;
	uint16_t count;
	struct cais_request *req;
	uint32_t idx; /**< chunk index in req */
	uint64_t deadline;
	uint64_t t_first;
	uint64_t next_query;
	uint8_t answered[32]; /**< peers that answered this round of FETCH */
	uint16_t n_answered;
	bool any_waiting; /**< some peer has not sent it, or sent it recently */
	struct cais_hdr hdr;
};

/** A cached chunk result, at index seq & (2 x slots - 1). */
struct ag_cached {
	uint32_t seq;
	uint16_t count;
	uint8_t flags;
	bool valid;
};

/* ---- requests ---- */

enum ag_req_state {
	AG_RQ_INNET = 1, /**< chunks through the switch */
	AG_RQ_RING,	 /**< joined the ring: waiting for every peer, then moving data */
	AG_RQ_FETCH,	 /**< a peer finished it in-network: fetching the rest from it */
	AG_RQ_DONE,
};

/** The ring phase of a collective. */
struct ag_ring {
	uint8_t *work; /**< count x 4 bytes: fp32 (float types) or int32 */
	size_t work_size;
	size_t *seg_off;     /**< world + 1 element offsets of the segments */
	unsigned int n_join; /**< peers that sent RING_REQ */
	uint8_t *joined;     /**< per rank */
	bool started;
	unsigned int send_step;	 /**< next step to queue for sending, 0..2(n-1) */
	unsigned int recv_step;	 /**< step being received */
	uint64_t recv_got;	 /**< bytes of recv_step received */
	unsigned int sends_left; /**< queued ring messages not yet written */
};

struct cais_request {
	struct cais_comm *c;
	TAILQ_ENTRY(cais_request) link;
	uint32_t tensor;
	const void *send;
	void *recv;
	size_t count;
	enum cais_datatype dt;
	enum cais_redop op;
	uint32_t seq0;
	uint32_t nchunks;
	float scale;
	int state;	       /**< enum ag_req_state */
	enum cais_fallback fb; /**< why the ring */
	bool switch_only;      /**< CAIS_PATH_SWITCH: fail instead of the ring */
	bool check;	       /**< sample the error against the ring */
	bool in_check;	       /**< in-network done; its reference ring is running */
	bool via_switch;       /**< the result came from the switch (directly or via peers) */
	uint8_t *stage;	       /**< nchunks x elems x 4: quantized input, then results (BE) */
	size_t stage_size;
	uint8_t *resolved; /**< per chunk: has its result */
	uint32_t n_resolved;
	uint32_t next_idx; /**< next chunk to send */
	bool overflow;
	struct ag_ring *ring;
	int fetch_from;	      /**< the peer that answered FINISHED, or -1 */
	uint32_t fetch_asked; /**< chunks requested from it */
	uint64_t t_issue;
	uint64_t deadline;
	uint32_t retx;
	uint32_t peer_chunks;
	double rel_error;
	/* completion, read by other threads */
	atomic_int done;
	int error;
	struct cais_status st;
};

TAILQ_HEAD(ag_req_list, cais_request);

/** RING_REQ flags: the low bits carry the fallback reason; this bit marks a reference ring. */
#define AG_RING_CHECK 0x80u

/** RING_REQs for a ring this rank has not joined yet. */
struct ag_pending_join {
	uint32_t seq0;
	bool check;
	uint8_t fb;
	uint32_t nchunks;
	uint64_t count;
	uint8_t *joined;
	unsigned int n_join;
	LIST_ENTRY(ag_pending_join) link;
};

/** Tensors whose max |x| one step tracks (managed communicators). */
#define AG_MAX_MANAGED_TENSORS 1024u

/** What a communicator joined through cais-manager keeps. */
struct ag_managed {
	struct sockaddr_in mgr;
	struct ctl_key key;
	char job[65];
	unsigned int rank;
	uint64_t step;
	bool started;		      /**< a step has begun: the next one reports it */
	struct cais_metrics last;     /**< metrics at the last report */
	struct cais_metrics reported; /**< ... as reported */
	unsigned int n_maxabs;	      /**< under the communicator's lock */
	struct {
		uint32_t tensor;
		float value;
	} maxabs[AG_MAX_MANAGED_TENSORS];
};

/** Per-tensor settings. */
struct ag_tensor {
	uint32_t id;
	double scale;
	bool offload;
	bool disabled; /**< by the error alarm */
	LIST_ENTRY(ag_tensor) link;
};

struct cais_comm {
	struct cais_config cfg;
	struct ag_managed *managed; /**< joined through cais-manager, or NULL */
	struct sockaddr_in *peers;  /**< world entries */
	struct sockaddr_in sw;
	const struct cais_quant_ops *q;
	struct cais_rng rng;

	/* submission, from API threads */
	pthread_mutex_t lock;
	pthread_cond_t cond; /**< signalled on every completion */
	struct ag_req_list submitted;
	uint32_t next_seq; /**< seq0 of the next collective issued */
	uint64_t innet_issued;
	size_t threshold;
	enum cais_path path;
	LIST_HEAD(, ag_tensor) tensors;
	int wake_fd; /**< eventfd: submissions, stop */
	atomic_bool stop;
	pthread_t thread;
	bool thread_started;

	/* progress thread */
	int udp;
	int listen_fd;
	struct ag_req_list active; /**< issued, not done, in seq order */
	struct ag_slot *win;	   /**< slots entries */
	uint32_t base;		   /**< oldest seq the window still holds */
	uint32_t next_send;	   /**< next seq to send */
	struct cais_request *send_req;
	uint8_t *cache;		   /**< 2 x slots x elems x 4 bytes */
	struct ag_cached *cached;  /**< 2 x slots */
	struct ag_conn **ctl;	   /**< world: control connection per peer */
	struct ag_conn *ring_out;  /**< to rank + 1 */
	struct ag_conn *ring_in;   /**< from rank - 1 */
	struct ag_conn **accepted; /**< connections not yet identified */
	unsigned int n_accepted;
	LIST_HEAD(, ag_pending_join) pending_joins;
	struct {
		uint32_t seq0, nchunks;
	} finished[AG_FINISHED_LOG]; /**< ring log of collectives finished in-network */
	unsigned int n_finished;
	uint8_t *rxbuf; /**< AG_BATCH x AG_DGRAM */
	struct {
		void *p;
		size_t size;
	} pool[AG_POOL_BUFS];  /**< free buffers for staging and ring work */
	struct pollfd *pfd;    /**< AG_MAX_POLL */
	bool udp_blocked;      /**< the socket refused a send: wait for POLLOUT */
	uint64_t srtt, rttvar; /**< round-trip estimate of chunks (ns), Jacobson/Karels */
	uint64_t now;	       /**< ns, CLOCK_MONOTONIC, per loop iteration */

	/* metrics, written by the progress thread, read under lock */
	struct cais_metrics m;
	uint64_t hist[CMN_HIST_BUCKETS]; /**< completion times, ns */
};

/* ---- join.c ---- */
/** Track max |x| of a collective's input for the step's report (managed only). */
void ag_note_maxabs(struct cais_comm *c, uint32_t tensor, const void *send, size_t count,
		    enum cais_datatype dt);

/* ---- comm.c ---- */
uint64_t ag_now_ns(void);
/** A buffer of at least size bytes from the pool (progress thread), or NULL. */
void *ag_buf_get(struct cais_comm *c, size_t size);
/** Give a buffer of size bytes back to the pool (or free it). */
void ag_buf_put(struct cais_comm *c, void *p, size_t size);
/** Complete a request: results are in recv (or err), it leaves every list. */
void ag_complete(struct cais_comm *c, struct cais_request *r, int err);
/** Decode the staging buffer (every chunk's result) into recv. */
void ag_decode_stage(struct cais_comm *c, struct cais_request *r);
/** Every chunk result of r is in: finish it as an in-network collective. */
void ag_innet_done(struct cais_comm *c, struct cais_request *r);
/** Move a request to the ring (joining it), for reason fb. */
void ag_to_ring(struct cais_comm *c, struct cais_request *r, enum cais_fallback fb);
/** The request owning seq among the active ones, or NULL. */
struct cais_request *ag_req_of_seq(struct cais_comm *c, uint32_t seq);
/** The active request with this seq0, or NULL. */
struct cais_request *ag_req_by_seq0(struct cais_comm *c, uint32_t seq0);
/** Was seq0 finished in-network here (still remembered)? */
bool ag_finished_innet(const struct cais_comm *c, uint32_t seq0);

/* ---- switchio.c: the UDP side ---- */
int ag_switch_open(struct cais_comm *c);
/** Receive and handle what the switch sent. */
void ag_switch_rx(struct cais_comm *c);
/** Send new chunks while the window allows; retransmit what timed out. */
void ag_switch_tx(struct cais_comm *c);
/** Earliest timer of the window (ns), or UINT64_MAX. */
uint64_t ag_switch_next_timer(const struct cais_comm *c);
/** A chunk's result is in (from the switch or a peer): stage, cache, window. */
void ag_chunk_resolved(struct cais_comm *c, struct cais_request *r, uint32_t idx,
		       const void *payload_be, uint16_t count, uint8_t flags);
/** Remove a request's chunks from the window (it leaves the switch path). */
void ag_window_release(struct cais_comm *c, struct cais_request *r);
/** The cached result of seq, or NULL. */
const uint8_t *ag_cache_get(const struct cais_comm *c, uint32_t seq, uint16_t *count,
			    uint8_t *flags);
/** What this rank can say about seq to a peer that lacks it. */
enum ag_have ag_have_state(struct cais_comm *c, uint32_t seq);
/** A peer answered a FETCH: with the result (data) or without (have). */
void ag_on_fetch_ok(struct cais_comm *c, int peer, uint32_t seq, uint16_t count, uint8_t flags,
		    const uint8_t *data);
void ag_on_fetch_no(struct cais_comm *c, int peer, uint32_t seq, enum ag_have have);
/** Answer a peer's FETCH of seqs [seq, seq + n). */
void ag_on_fetch(struct cais_comm *c, int peer, uint32_t seq, uint32_t n);
/** Elements in chunk idx of r. */
uint16_t ag_chunk_count(const struct cais_comm *c, const struct cais_request *r, uint32_t idx);

/* ---- peer.c: the TCP side ---- */
int ag_peer_open(struct cais_comm *c);
void ag_peer_close(struct cais_comm *c);
/** Fill pollfds for the peer sockets; returns how many. */
unsigned int ag_peer_pollfds(struct cais_comm *c, struct pollfd *p, unsigned int max);
/** Accept, connect, read and write whatever is ready. */
void ag_peer_progress(struct cais_comm *c);
/** Queue a control message to peer (copying len bytes of data). @return 0 or -ENOMEM */
int ag_peer_send(struct cais_comm *c, int peer, const struct ag_msg *h, const void *data,
		 uint32_t len);
/** Queue ring data (borrowed) to the right neighbour. */
int ag_ring_send(struct cais_comm *c, const struct ag_msg *h, const void *data, uint32_t len);
/** Drop the queued ring data of seq0 (its work buffer goes away). */
void ag_ring_purge(struct cais_comm *c, uint32_t seq0);
/** Earliest peer timer (reconnects), or UINT64_MAX. */
uint64_t ag_peer_next_timer(const struct cais_comm *c);
/** Fill a message header (network order). */
void ag_msg_init(struct ag_msg *h, const struct cais_comm *c, enum ag_msg_type type, uint8_t flags,
		 uint32_t seq, uint32_t n, uint64_t off, uint32_t len);

/* ---- ring.c ---- */
/** Start or continue the ring of r (joining, data movement). */
void ag_ring_progress(struct cais_comm *c, struct cais_request *r);
/** A RING_REQ arrived from peer (flags: fallback reason, AG_RING_CHECK). */
void ag_ring_on_req(struct cais_comm *c, int peer, uint32_t seq0, uint32_t nchunks, uint64_t count,
		    uint8_t flags);
/** Ring data arrived for (seq0, step, off). @return 0, or -EPROTO */
int ag_ring_on_data(struct cais_comm *c, const struct ag_msg *h, const uint8_t *data);
/** A ring message was written out (sends_left bookkeeping). */
void ag_ring_sent(struct cais_comm *c, uint32_t seq0);
/** Free a request's ring state. */
void ag_ring_free(struct cais_request *r);
/** The ring's result of r, into recv (and the relative error against the switch's). */
void ag_ring_finish(struct cais_comm *c, struct cais_request *r);
/** Apply RING_REQs that came before r was issued (check: those of its reference ring). */
void ag_ring_adopt_pending(struct cais_comm *c, struct cais_request *r, bool check);
/** A FINISHED arrived from peer for seq0: fetch the rest from it. */
void ag_ring_on_finished(struct cais_comm *c, int peer, uint32_t seq0);

#endif /* CAIS_AGENT_H */
