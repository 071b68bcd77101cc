/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The communicator (struct cais_comm of cais.h): its configuration, the
 * submission queue that API threads fill, the per-tensor settings, the
 * metrics, the flows (flow.h: a worker thread each, carrying the chunks),
 * and the progress thread with what it owns (the peer channel, FETCH
 * recovery, the rings, the requests). comm.c implements the API on top of
 * it; join.c adds the managed mode.
 */
#ifndef AG_COMM_H
#define AG_COMM_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <netinet/in.h>

#include <cais/cais.h>

#include "cache.h"
#include "cmn_hist.h"
#include "fetch.h"
#include "flow.h"
#include "managed.h"
#include "peer.h"
#include "pool.h"
#include "quant.h"
#include "req.h"
#include "ring.h"

/**
 * Flows of a managed communicator whose cais_config.threads is 0: one per CPU
 * this process may run on, rounded down to a power of two, at most
 * AG_MAX_FLOWS and slots (join.c registers them with the manager); then,
 * where the switch's lcores (the manager's job.register says them) are a
 * power of two within those bounds, at least as many, so that each flow's
 * rounds are on one lcore (docs/PROTOCOL.md E7, E11).
 */
unsigned int ag_comm_auto_flows(uint32_t slots, unsigned int lcores);

/** Every tensor of c off the switch (the ring) until cais_tensor_set() says
 * otherwise: a managed rank without its step's answer (join.c). */
void ag_comm_offload_none(struct cais_comm *c);

/** The manager's step that c's collectives issued from now on belong to (join.c). */
void ag_comm_step(struct cais_comm *c, uint64_t step);

/** Sockets one progress thread polls at most (peers x 2 + 3). */
#define AG_MAX_POLL	   1024
/** Collectives smaller than this are not sampled by the error alarm (too few values). */
#define AG_CHECK_MIN_COUNT 256u

/** Per-tensor settings. */
struct ag_tensor {
	uint32_t id;
	double scale;	   /**< when has_scale; else the wire type's default */
	bool has_scale;	   /**< set by cais_tensor_set() (or the manager) */
	uint8_t wire;	   /**< CAIS_DT_*: how float collectives of it go */
	bool offload;
	bool disabled;	     /**< by the error alarm */
	bool used;	     /**< managed: a collective of it was issued ... */
	uint64_t first_step; /**< ... first in this manager step */
	LIST_ENTRY(ag_tensor) link;
};

struct cais_comm {
	struct cais_config cfg;
	struct sockaddr_in *peers;  /**< world entries (cfg.peers points here) */
	unsigned int nstripes;	    /**< switch servers the flows send to (cais.h) */
	struct sockaddr_in stripes[AG_MAX_FLOWS]; /**< cfg.stripes points here */
	struct ag_managed *managed; /**< joined through cais-manager, or NULL */
	const struct cais_quant_ops *q;

	/* API threads, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond; /**< signalled on every completion */
	struct ag_req_list submitted;
	uint32_t next_seq; /**< seq0 of the next collective issued */
	uint64_t innet_issued;
	size_t threshold;
	enum cais_path path;
	uint64_t step; /**< managed: the step begun last (ag_comm_step(); its only writer) */
	LIST_HEAD(, ag_tensor) tensors;
	struct cais_metrics m;		 /**< completions; the modules keep their own counters */
	uint64_t hist[CMN_HIST_BUCKETS]; /**< completion times, ns */
	int wake_fd;			 /**< eventfd: submissions, stop */
	bool wake_ready; /**< the progress thread's last poll found wake_fd readable */
	atomic_bool stop;
	pthread_t thread;
	bool thread_started;

	/* the flows, and the progress thread's */
	unsigned int nflows;
	struct ag_flow *flows[AG_MAX_FLOWS];
	struct ag_cache *cache;
	struct ag_pool pool;
	struct ag_peers *net;
	struct ag_fetch *fetch;
	struct ag_rings *rings;
	struct ag_reqs reqs;
	struct pollfd *pfd; /**< AG_MAX_POLL */
};

#endif /* AG_COMM_H */
