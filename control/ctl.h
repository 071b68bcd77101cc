/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The switch's control requests (docs/PROTOCOL.md section 4), without
 * DPDK: the server side of the switch's table (ctl_request.c).
 *
 * A request is `{"cmd": "<name>", "args": {...}}` (the endpoint adds "id"
 * and "ts"). ctl_dispatch() checks every argument and only then calls one
 * function of a struct ctl_ops, the table operations the switch provides.
 * The same path serves `cais-switch --config FILE` (ctl_apply_file()) and
 * the UDP endpoint (ctl_endpoint.h), so both accept and refuse exactly the
 * same input. Nothing malformed reaches an operation, so a malformed
 * request never changes any state.
 */
#ifndef CTL_H
#define CTL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include <cais/proto.h>

#include "ctl_err.h"

/** Switch modes of mode.set. */
enum ctl_mode { CTL_MODE_COMPUTE, CTL_MODE_FORWARD_ONLY };

/** @return "compute", "forward_only". */
const char *ctl_mode_name(enum ctl_mode mode);

/** Session priority classes. */
#define CTL_PRIO_NORMAL 0
#define CTL_PRIO_HIGH	1

/** Largest lease: a day; a manager renews every few seconds. */
#define CTL_LEASE_MAX_MS 86400000u

/** One member of a session. */
/** UDP ports (flows) a member may send from at most (docs/PROTOCOL.md E7). */
#define CTL_MAX_MEMBER_PORTS 16u

struct ctl_member {
	uint8_t mac[6];
	uint32_t ip;	     /**< network order */
	uint16_t port;	     /**< UDP port, host order */
	int16_t switch_port; /**< the switch port it sits behind; -1: not given */
	uint8_t ports;	     /**< its flows' UDP ports port..port+ports-1 (E7): 1..16, a power of two */
};

/** session.add's "uplink" (docs/PROTOCOL.md E9): a leaf's spine. */
struct ctl_uplink {
	bool on;
	uint8_t mac[6];	      /**< the spine's aggregator MAC */
	uint32_t ip;	      /**< its aggregator address, network order */
	uint16_t port;	      /**< its CAIS UDP port, host order; 0: the switch's own */
	uint8_t rank;	      /**< the leaf's rank in the spine's session */
	uint16_t switch_port; /**< the leaf's port toward the spine */
};

/** session.add arguments, checked. */
struct ctl_session {
	uint16_t tenant;
	uint16_t session;
	uint16_t n;				   /**< world size 1..255 */
	uint32_t slots;				   /**< pool size, power of two 1..32768 */
	uint16_t elems;				   /**< elements per packet 1..CAIS_MAX_ELEMS */
	uint8_t priority;			   /**< CTL_PRIO_* */
	uint8_t first_rank; /**< its DATA's ranks: first_rank..first_rank+n-1 (a leaf's, E9) */
	uint8_t loss_hints; /**< 1: WAIT and NACK to its members (E11), 0: not */
	struct ctl_member members[CAIS_MAX_WORLD]; /**< indexed by rank - first_rank, n entries */
	struct ctl_uplink uplink;		   /**< optional: uplink.on */
};

/** tensor.add arguments, checked. */
struct ctl_tensor {
	uint16_t tenant;
	uint16_t session;
	uint32_t tensor;
	enum cais_redop op;
	double scale; /**< > 0, finite; hosts use it, the switch only records it */
	uint8_t wire; /**< the tensor's wire dtype, CAIS_DT_* (default FIXED32) */
};

/** thresholds.set arguments; a missing one keeps its value. */
struct ctl_thresholds {
	bool has_queue_depth;
	bool has_slot_usage;
	uint32_t queue_depth; /**< packets */
	double slot_usage;    /**< 0..1 of the slot capacity */
};

/**
 * The operations a switch provides. Each returns 0 or -errno and fills err.
 * Results are added to the object `result` (already created).
 */
struct ctl_ops {
	void *ctx;
	int (*ping)(void *ctx, json_t *result, struct ctl_err *err);
	int (*session_add)(void *ctx, const struct ctl_session *s, struct ctl_err *err);
	int (*session_del)(void *ctx, uint16_t tenant, uint16_t session, struct ctl_err *err);
	int (*tensor_add)(void *ctx, const struct ctl_tensor *t, struct ctl_err *err);
	int (*tensor_del)(void *ctx, uint16_t tenant, uint16_t session, uint32_t tensor,
			  struct ctl_err *err);
	int (*lease)(void *ctx, uint32_t ttl_ms, struct ctl_err *err);
	int (*mode_set)(void *ctx, enum ctl_mode mode, struct ctl_err *err);
	int (*thresholds_set)(void *ctx, const struct ctl_thresholds *t, struct ctl_err *err);
	/**
	 * stats.get: the counters, and the sessions after the one of key after
	 * (key = tenant << 16 | session; -1: from the first) in key order, a
	 * page of them (ctl_fields.h), with "next" when more follow.
	 */
	int (*stats_get)(void *ctx, int64_t after, json_t *result, struct ctl_err *err);
};

/**
 * Check and carry out one request.
 * @param ops    the switch's operations
 * @param req    `{"cmd": ..., "args": {...}}`; other members ("id", "ts") are ignored
 * @param result on success a new JSON object (the reply's "result"), else NULL
 * @param err    on failure the code and a message naming the field
 * @return 0, or -EINVAL (malformed: not an object, unknown command, missing,
 *         unknown, mistyped or out-of-range field), or what the operation
 *         returned (-ENOENT, -EEXIST, -ENOSPC, -EBUSY, -EPERM)
 */
int ctl_dispatch(const struct ctl_ops *ops, const json_t *req, json_t **result,
		 struct ctl_err *err);

/**
 * Apply a file holding a JSON array of requests, in order; stop at the
 * first failure.
 * @return 0, or the failing request's error, with err->msg prefixed by
 *         "FILE: request #i (cmd): "; -EINVAL when the file is unreadable
 *         or not a JSON array
 */
int ctl_apply_file(const struct ctl_ops *ops, const char *path, struct ctl_err *err);

#endif /* CTL_H */
