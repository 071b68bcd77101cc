/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * libcais: the host agent of CAIS. All-reduce through an aggregating switch,
 * with a transparent fallback to a ring all-reduce among the ranks.
 *
 * A communicator joins one CAIS session (tenant, session) as one rank. Each
 * all-reduce is cut into chunks of at most elems_per_packet elements,
 * converted to fixed point (value x the tensor's scale, stochastic rounding,
 * saturating; int32 unscaled), and sent to the switch as DATA; the switch
 * sends back the sum (or max, min) as RESULT, which is converted back
 * (avg: divided by the world size). Chunks are numbered by a per-session
 * seq that every collective advances by its number of chunks, in issue
 * order, on every rank alike.
 *
 * The fallback path is a ring all-reduce (reduce-scatter, then all-gather)
 * over TCP among the ranks' data addresses, through the switch as ordinary
 * forwarded traffic. It is taken for a whole collective when the collective
 * is below the offload threshold or its tensor is not offloaded, and when
 * the switch REJECTs, flags OVERFLOW or FWD_ONLY, or stays silent. A rank
 * that lost RESULTs first asks its peers: every rank keeps the fixed-point
 * results of its last 2 x slots chunks and serves them, so a rank never
 * waits for a ring that its peers, already done, will not form. Every wait
 * is bounded (cais_config.timeout_ms).
 *
 * Threads: each communicator runs one progress thread that owns its sockets
 * and does all the network work, so cais_test() never blocks and a rank
 * that is busy elsewhere still serves its peers.
 *
 * Thread safety:
 *  - cais_strerror(), cais_config_init(), cais_*_name(): any thread.
 *  - cais_iallreduce(), cais_allreduce(), cais_tensor_set(),
 *    cais_set_threshold(), cais_set_path(), cais_comm_destroy(): one thread at
 *    a time per communicator (the issue order must be the same on every
 *    rank, which concurrent callers could not guarantee anyway).
 *  - cais_test(), cais_wait(): any thread, each request by one thread at a time.
 *  - cais_metrics_get(): any thread.
 *
 * Errors: functions return 0 or a negative errno value; cais_strerror()
 * says what it means here.
 */
#ifndef CAIS_H
#define CAIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include <cais/proto.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Element types of cais_allreduce(). */
enum cais_datatype {
	CAIS_FLOAT32 = 0,
	CAIS_BFLOAT16 = 1,
	CAIS_FLOAT16 = 2,
	CAIS_INT32 = 3,
};

/*
 * Reductions: enum cais_redop of <cais/proto.h> (CAIS_OP_SUM, CAIS_OP_AVG,
 * CAIS_OP_MAX, CAIS_OP_MIN). avg is a sum divided by the world size (int32:
 * rounded toward 0).
 */

/** Which path collectives take. The same on every rank of a session. */
enum cais_path {
	CAIS_PATH_AUTO = 0,   /**< the switch when the offload decision says so, else the ring */
	CAIS_PATH_SWITCH = 1, /**< the switch only: -ECONNREFUSED where it cannot help */
	CAIS_PATH_RING = 2,   /**< the ring only */
};

/** Why a collective took the ring: X(name, text). */
#define CAIS_FALLBACKS(X)                                                                          \
	X(NONE, "in-network")                                                                      \
	X(THRESHOLD, "below the offload threshold")                                                \
	X(TENSOR_OFF, "tensor not offloaded")                                                      \
	X(ERROR_ALARM, "tensor disabled by the numerical-error alarm")                             \
	X(FORCED, "ring path requested")                                                           \
	X(REJECT, "the switch sent REJECT")                                                        \
	X(FWD_ONLY, "the switch is in forward-only mode")                                          \
	X(OVERFLOW, "fixed point overflowed (OVERFLOW, or a value beyond the scale's range)")      \
	X(SILENT, "the switch stayed silent after the retries")

#define CAIS_X_ENUM(name, text) CAIS_FB_##name,
enum cais_fallback { CAIS_FALLBACKS(CAIS_X_ENUM) CAIS_FB_COUNT };
#undef CAIS_X_ENUM

/**
 * Default offload threshold: 512 KiB, where in-network starts to beat the
 * ring at every larger size on the testbed (bench/e2e.sh: from 512 KiB with
 * 4 ranks, from 256 KiB with 8). bench/README.md.
 */
#define CAIS_DEFAULT_THRESHOLD	 (512u << 10)
/** Default retransmission timer floor (the adaptive timer never goes below it). */
#define CAIS_DEFAULT_RETX_US	 500u
/** Default retransmissions of one chunk before the switch counts as silent. */
#define CAIS_DEFAULT_RETRIES	 8u
/** Default bound on one collective. */
#define CAIS_DEFAULT_TIMEOUT_MS	 30000u
/** Default: the relative error is sampled every 100th in-network collective. */
#define CAIS_DEFAULT_CHECK_EVERY 100u
/** Default numerical-error alarm (relative error of a sampled collective). */
#define CAIS_DEFAULT_ERROR_ALARM 1e-3
/**
 * Default scale of BLOCK16 tensors without their own: 2^24, so that values
 * up to 2^30 in magnitude fit (docs/PROTOCOL.md E4) and every element keeps
 * 15 significant bits relative to its block's largest.
 */
#define CAIS_DEFAULT_B16_SCALE	 ((double)(1ull << CAIS_B16_DEFAULT_SCALE_EXP))

/** Everything a communicator is made from (static mode). cais_config_init() fills defaults. */
struct cais_config {
	uint16_t tenant;		 /**< tenant id (granted by the manager) */
	uint16_t session;		 /**< session id within the tenant */
	unsigned int rank;		 /**< this rank, 0..world-1 */
	unsigned int world;		 /**< world size n, 1..255 */
	struct sockaddr_in switch_addr;	 /**< the aggregator; port 0 means 51733 */
	const struct sockaddr_in *peers; /**< world entries, every rank's data address in rank
					  * order; peers[rank] is this rank's: its UDP port is
					  * the one registered with the switch, and the ring
					  * listens on the same TCP port */
	uint32_t slots;			 /**< the session's pool size S (power of two, 1..32768) */
	uint16_t elems;			 /**< elements per packet E (1..2048) */
	double scale;		  /**< FIXED32 scale of tensors without their own (> 0) */
	enum cais_wire_dtype wire; /**< the wire type of float tensors without their own:
				    * CAIS_DT_FIXED32 (default) or CAIS_DT_BLOCK16 (2 bytes an
				    * element; int32 always goes as FIXED32) */
	double b16_scale;	   /**< scale of BLOCK16 tensors without their own (> 0) */
	unsigned int threads;	   /**< flows: worker threads, each with its own UDP socket on
				    * port peers[rank] + i (i < threads), carrying the chunks
				    * whose seq is i modulo threads; a power of two, at most 16
				    * and at most slots. The switch's member entry must cover
				    * the same ports (docs/PROTOCOL.md E7). 0 (the default):
				    * a communicator that joins through cais-manager takes one
				    * per CPU this process may run on (rounded down to a power
				    * of two), at least the switch's lcores (a power of two:
				    * each flow's rounds on one lcore), and registers them; a
				    * static one takes one, as its switch entry is the
				    * operator's (a multiple of the switch's lcores keeps
				    * each flow's rounds on one lcore) */
	size_t threshold;	  /**< offload threshold in bytes */
	uint32_t retx_timeout_us; /**< retransmission timer */
	uint32_t retries;     /**< retransmissions before the switch counts as silent, 0..1000 */
	uint32_t timeout_ms;  /**< bound on one collective; then -ETIMEDOUT */
	uint32_t check_every; /**< sample the error every K-th in-network collective; 0: never */
	double error_alarm;   /**< relative error above which a tensor leaves the switch */
	bool round_nearest;   /**< round to nearest instead of stochastic rounding */
	uint32_t first_seq;   /**< seq of the first chunk (the same on every rank). A
			       * switch keeps its slots' seqs: a job that reuses a
			       * session of a running switch starts past the last
			       * seq used, or its chunks are stale there */
	const struct sockaddr_in *stripes; /**< nstripes entries when nstripes > 1: the
					    * switch servers one session is striped over
					    * (docs/PROTOCOL.md E8), in place of switch_addr.
					    * Flow i sends to stripes[i mod nstripes], so
					    * stripe j carries the seqs q with q mod nstripes
					    * = j; each holds the same session. A power of two,
					    * at most threads (every stripe needs a flow);
					    * port 0 means 51733 */
	unsigned int nstripes;		   /**< 0 or 1: one switch, switch_addr */
};

/** Completion details of one collective (cais_test_status(), cais_wait_status()). */
struct cais_status {
	int error;	     /**< 0 or the negative errno the collective ended with */
	enum cais_path path; /**< CAIS_PATH_SWITCH or CAIS_PATH_RING: where the result came from */
	enum cais_wire_dtype wire;   /**< in-network: the wire dtype its chunks went as */
	enum cais_fallback fallback; /**< why the ring, CAIS_FB_NONE in-network */
	uint32_t retransmissions;    /**< DATA retransmitted for this collective */
	uint32_t peer_chunks;	     /**< chunk results fetched from peers */
	double time_us;		     /**< issue to completion */
	double
	    rel_error; /**< sampled relative error against a float reference; < 0 if not sampled */
};

/** Per-communicator counters (cais_metrics_get()). */
struct cais_metrics {
	uint64_t collectives;		  /**< completed */
	uint64_t in_network;		  /**< completed through the switch */
	uint64_t fallback[CAIS_FB_COUNT]; /**< completed on the ring, by reason */
	uint64_t errors;		  /**< ended with an error */
	uint64_t chunks_sent;		  /**< DATA first transmissions */
	uint64_t retransmissions;	  /**< DATA retransmissions */
	uint64_t results_ignored;	  /**< RESULTs not in flight (duplicate, stale) */
	uint64_t acks;			  /**< ACKs: the DATA was in, the round waited (E6) */
	uint64_t send_errors;		  /**< DATA the socket refused (a firewall, the MTU) */
	uint64_t peer_chunks;		  /**< chunk results fetched from peers */
	uint64_t peer_chunks_served;	  /**< chunk results served to peers */
	uint64_t congested;		  /**< RESULTs with CONGESTED */
	uint64_t error_checks;		  /**< sampled error measurements */
	double max_rel_error;		  /**< largest sampled relative error */
	uint32_t tensors_disabled;	  /**< tensors moved off the switch by the alarm */
	uint32_t wire_fallbacks;	  /**< BLOCK16 tensors sent as FIXED32 after a BAD_DTYPE */
	double p50_us, p90_us, p99_us;	  /**< completion time percentiles, all collectives */
	double fallback_rate;		  /**< fallback / collectives (alarm above 0.1) */
	uint64_t nacks;			  /**< NACKs of chunks in flight: a DATA lost (E11) */
	uint64_t queries;		  /**< QUERYs sent: no RESULT came for a while (E12) */
};

struct cais_comm;
struct cais_request;

/** Joining through cais-manager instead of a static configuration (docs/PROTOCOL.md E3). */
struct cais_join {
	const char *manager;	 /**< "A.B.C.D[:PORT]" of cais-manager (port default 51735) */
	const char *key_file;	 /**< the manager's HMAC key file, or NULL */
	const char *job;	 /**< the job's name, the same on every rank (1..64 chars) */
	const char *tenant;	 /**< the tenant's name (1..64 chars) */
	unsigned int rank;	 /**< this rank, 0..world-1 */
	unsigned int world;	 /**< world size, 1..255 */
	struct sockaddr_in data; /**< this rank's data address: its UDP port is registered
				  * with the switch, the ring listens on the same TCP port */
	uint32_t slots;		 /**< pool size wanted; 0: the manager's default */
	uint16_t elems;		 /**< elements per packet wanted; 0: the manager's default */
	int priority;		 /**< 0 normal, 1 high */
	uint32_t timeout_ms;	 /**< how long to wait for every rank to join; 0: 60 s */
};

/**
 * Fill c with defaults: threshold 512 KiB, 500 us, 8 retries, 30 s, scale 1024,
 * FIXED32, BLOCK16 scale 2^24, K 100, 1e-3.
 */
void cais_config_init(struct cais_config *c);

/**
 * Create a communicator: bind this rank's UDP port (switch traffic) and TCP
 * port (ring, peers), start its progress thread. Does not wait for peers.
 * @return 0; -EINVAL (a field out of range: rank >= world, world 0 or > 255,
 *         slots not a power of two, elems 0 or > 2048, scale <= 0, no peers);
 *         -EMSGSIZE (a packet of elems elements would not fit the MTU of the
 *         route to the switch: the switch drops fragments); -EADDRINUSE or
 *         another socket error of bind(); -ENOMEM
 */
int cais_comm_create(const struct cais_config *cfg, struct cais_comm **comm);

/**
 * Join a job through cais-manager: register it (every rank registers the same
 * job; the first creates it), join with this rank's MAC (found from the
 * interface that holds data's address), IPv4 address and port, wait until
 * every rank has joined and the manager has installed the session on the
 * switch, then create the communicator from what the manager says (tenant,
 * session, aggregator, peers, slots, elems, first seq). Timers, threshold and
 * the like come from tmpl (NULL: cais_config_init()'s). When the manager
 * refused the switch (admission), every collective takes the ring.
 * @return 0; -EINVAL (bad arguments); -EADDRNOTAVAIL (no interface holds
 *         data's address); -ETIMEDOUT (no manager, or not every rank joined
 *         in time); -EEXIST (the job exists with other parameters); -EPROTO (a
 *         reply that is not the protocol's); what cais_comm_create() returns
 */
int cais_comm_join(const struct cais_join *j, const struct cais_config *tmpl,
		   struct cais_comm **comm);

/**
 * Register a tensor with the manager (managed communicators; every rank, the
 * same values): its op and the element type its collectives will have, from
 * which the manager chooses its wire type (BLOCK16 for bf16 and fp16 unless
 * it is told otherwise) and scale; step.begin then gives both.
 * @return 0; -EINVAL (not managed, bad op or dtype); the manager's error
 */
int cais_tensor_register(struct cais_comm *comm, uint32_t tensor, enum cais_redop op,
			 enum cais_datatype dtype);

/**
 * Begin training step `step` (managed communicators; every rank, once per
 * step, before the step's collectives): report the previous step's
 * statistics (per-tensor max |x|, fallbacks, errors, CONGESTED) and take this
 * step's offload list and scales, the same on every rank. Never called per
 * all-reduce. On CAIS_PATH_AUTO a float tensor's collectives take the ring
 * (CAIS_FB_TENSOR_OFF) in the step of its first one and the next, before
 * the manager has its magnitude from every rank (docs/PROTOCOL.md E3).
 * After a request the manager left unanswered, the rank asks again only
 * after 1, 2, 4, ... steps (at most 64; one answer resets it): a manager
 * that is down costs one request's wait (0.5 s) per up to 64 steps, not
 * every step.
 * @return 0; -EINVAL (not managed); -ETIMEDOUT (no manager); -EAGAIN (not
 *         asked: the manager did not answer lately); the manager's error.
 *         Without an answer the rank's tensors take the ring until a step's
 *         answer (the other ranks may have new scales: in-network sums at
 *         different scales would be wrong); the scales stay
 */
int cais_step_begin(struct cais_comm *comm, uint64_t step);

/**
 * Stop the progress thread and free everything. Requests still outstanding
 * end with -ECANCELED; they must not be used afterwards. Peers that still
 * need this rank's results will not get them: destroy a communicator on all
 * ranks after the last collective, as with MPI_Comm_free.
 * @return 0; -EINVAL for NULL
 */
int cais_comm_destroy(struct cais_comm *comm);

/**
 * Set a tensor's fixed-point scale and whether it may use the switch. The
 * same on every rank, before its first collective or between collectives.
 * @return 0; -EINVAL (scale <= 0 or not finite); -ENOMEM
 */
int cais_tensor_set(struct cais_comm *comm, uint32_t tensor, double scale, bool offload);

/**
 * Set the wire type of a float tensor (the same on every rank, between
 * collectives): CAIS_DT_FIXED32 or CAIS_DT_BLOCK16 (docs/PROTOCOL.md E4). A
 * tensor without a scale of its own then uses the wire type's default.
 * @return 0; -EINVAL (another wire type); -ENOMEM
 */
int cais_tensor_wire(struct cais_comm *comm, uint32_t tensor, enum cais_wire_dtype wire);

/** Set the offload threshold in bytes (the same on every rank). @return 0; -EINVAL */
int cais_set_threshold(struct cais_comm *comm, size_t bytes);

/** Choose the path of the next collectives (the same on every rank). @return 0; -EINVAL */
int cais_set_path(struct cais_comm *comm, enum cais_path path);

/**
 * Start an all-reduce of count elements of send into recv (recv == send is
 * allowed). The buffers must stay valid and unchanged (send) until the
 * request completes. Takes the next count/elems chunks of seq.
 * @return 0 and *req; -EINVAL (count 0, NULL buffers, bad dtype or op,
 *         partially overlapping buffers); -ENOMEM; -ECANCELED (destroying)
 */
int cais_iallreduce(struct cais_comm *comm, uint32_t tensor, const void *send, void *recv,
		    size_t count, enum cais_datatype dtype, enum cais_redop op,
		    struct cais_request **req);

/**
 * Has the request completed? Never blocks. When *done is set the request is
 * freed and the return value is the collective's result.
 * @return 0; with *done: the collective's error (-ETIMEDOUT when it could not
 *         complete within timeout_ms, -ECONNREFUSED on the switch-only path
 *         when the switch cannot help, -ECANCELED, -ENETDOWN)
 */
int cais_test(struct cais_request *req, int *done);

/** cais_test() that also reports the completion details (st may be NULL). */
int cais_test_status(struct cais_request *req, int *done, struct cais_status *st);

/**
 * Wait for the request (at most about timeout_ms), free it.
 * @return the collective's result, as cais_test()
 */
int cais_wait(struct cais_request *req);

/** cais_wait() that also reports the completion details (st may be NULL). */
int cais_wait_status(struct cais_request *req, struct cais_status *st);

/** cais_iallreduce() + cais_wait(). @return as both */
int cais_allreduce(struct cais_comm *comm, uint32_t tensor, const void *send, void *recv,
		   size_t count, enum cais_datatype dtype, enum cais_redop op);

/** Copy the communicator's counters. @return 0; -EINVAL */
int cais_metrics_get(struct cais_comm *comm, struct cais_metrics *m);

/** @return a text for an error code returned by this library (either sign). */
const char *cais_strerror(int err);

/** @return "f32", "bf16", "f16", "i32" / "sum", "avg", "max", "min" / "switch", "ring", "auto". */
const char *cais_datatype_name(enum cais_datatype dt);
const char *cais_redop_name(enum cais_redop op);
const char *cais_path_name(enum cais_path path);
/** @return the text of a fallback reason. */
const char *cais_fallback_name(enum cais_fallback fb);

/** @return the size in bytes of one element of dt, 0 if undefined. */
size_t cais_datatype_size(enum cais_datatype dt);

#ifdef __cplusplus
}
#endif

#endif /* CAIS_H */
