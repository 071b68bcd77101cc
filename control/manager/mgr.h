/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * cais-manager's core (docs/PROTOCOL.md E3), without sockets: the cluster's
 * control daemon grants tenant and session ids from a store that survives
 * restarts (SQLite), keeps the jobs and their tensors, installs sessions and
 * tensors on the switch, or on the switches of a --fabric (E10: a tree or
 * stripes; ctl_call() to each endpoint), renews each switch's lease, polls
 * its counters, applies the admission thresholds, and answers step.begin
 * once per (job, step) with the offload list and the scales.
 *
 * The daemon (main.c) puts mgr_handle() behind a ctl_endpoint (handler mode)
 * and calls mgr_tick() from a thread of its own; tests call both directly.
 * mgr_handle() serves one request at a time (it takes the manager's lock);
 * mgr_tick() may run concurrently with it: the switches' leases and counters
 * have a lock of their own, and the calls to each switch are serialised
 * (its endpoint refuses a ts that is not newer than the last one).
 */
#ifndef MGR_H
#define MGR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <netinet/in.h>

#include <jansson.h>

#include "ctl_err.h"

/** Limits, with their reasons. */
/** Job and tenant names: 1..64 characters (E3). */
#define MGR_NAME_CHARS	  64u
/** ... of UTF-8, so at most 4 bytes each. */
#define MGR_NAME_BYTES	  (4u * MGR_NAME_CHARS)
/** Tenant and session ids are 16-bit on the wire; 0 is never granted. */
#define MGR_ID_MAX	  65535u
/**
 * Tensors per job: step.begin lists every tensor with its scale and wire in
 * one reply datagram (65507 bytes); at most 81 bytes each (a 10-digit id in
 * the offload list and
 * {"tensor":4294967295,"scale":5.9604644775390625e-08,"wire":"block16"})
 * leaves room for 808, and the reply's envelope for 768.
 */
#define MGR_MAX_TENSORS	  768u
/** Ended jobs kept for job.status and jobs.list (their ids stay retired). */
#define MGR_ENDED_KEPT	  100u
/** Scales are clamped to [2^-24, 2^30] (fp32's precision, int32's range). */
#define MGR_SCALE_MIN_EXP     (-24)
#define MGR_SCALE_MAX_EXP     30
/** ... and BLOCK16 ones to [2^-24, 2^54] (the exponent limit, E4). */
#define MGR_B16_SCALE_MAX_EXP 54

/** Log levels (--log-level). */
enum mgr_log_level { MGR_LOG_ERROR, MGR_LOG_WARN, MGR_LOG_INFO, MGR_LOG_DEBUG };

/** Path buffers. */
#define MGR_PATH_MAX 1024u

/** Everything the command line and the config file set. */
struct mgr_conf {
	struct sockaddr_in listen;	    /**< --listen (127.0.0.1:51735) */
	char key_file[MGR_PATH_MAX];	    /**< --key, "" for none (loopback only) */
	struct sockaddr_in switch_ctl;	    /**< --switch-ctl (127.0.0.1:51734) */
	char switch_key_file[MGR_PATH_MAX]; /**< --switch-key, "" for none */
	struct sockaddr_in agg;		    /**< --agg (required) */
	bool has_agg;
	char db[MGR_PATH_MAX];	      /**< --db (cais-manager.db) */
	uint32_t lease_ms;	      /**< --lease-ms (3000; 0: never send a lease) */
	uint32_t poll_ms;	      /**< --poll-ms (1000) */
	uint32_t switch_timeout_ms;   /**< --switch-timeout-ms (500) */
	double max_slot_usage;	      /**< --max-slot-usage (0.9) */
	uint32_t max_queue_depth;     /**< --max-queue-depth (512) */
	double default_scale;	      /**< --default-scale (1024): FIXED32 tensors */
	uint8_t half_wire;	      /**< --half-wire (block16): bf16/fp16 tensors' wire */
	uint32_t default_slots;	      /**< --default-slots (128) */
	uint32_t default_elems;	      /**< --default-elems (2048) */
	uint32_t default_priority;    /**< --default-priority (0) */
	uint32_t history;	      /**< --history: steps kept per job (8) */
	enum mgr_log_level log_level; /**< --log-level (info) */
	char config[MGR_PATH_MAX];    /**< --config, "" for none */
	char fabric[MGR_PATH_MAX];    /**< --fabric, "" for one switch (docs/PROTOCOL.md E10) */
};

struct mgr;

/** Set every default. */
void mgr_conf_init(struct mgr_conf *conf);

/**
 * Read the command line: --config FILE first (a JSON object whose keys are
 * the long option names), then every other option, which overrides it.
 * @return 0; 1 when --help was given (usage printed to out); -EINVAL with
 *         err naming the option (an unknown one, a bad value, --agg missing)
 */
int mgr_conf_parse(struct mgr_conf *conf, int argc, char **argv, FILE *out, struct ctl_err *err);

/**
 * Apply one option by its long name (as the command line and the config
 * file do).
 * @return 0 or -EINVAL (unknown option, bad value; err names it)
 */
int mgr_conf_set(struct mgr_conf *conf, const char *name, const char *value, struct ctl_err *err);

/** Print the usage (every option, the defaults and the policies). */
void mgr_usage(FILE *out);

/**
 * Open the store (created when absent), read the --fabric file and load
 * the switches' keys.
 * @return 0; -EINVAL (no --agg or --fabric, bad option values, a fabric
 *         file refused, a store that is not the manager's), -ENOENT/-EACCES
 *         (key files, fabric file, store), -ENOMEM
 */
int mgr_open(const struct mgr_conf *conf, struct mgr **out, struct ctl_err *err);

/** Close the store. No switch calls are made. */
void mgr_close(struct mgr *m);

/**
 * The command table of E3: a ctl_handler_fn (ctx is the struct mgr).
 * Checks every argument first (EINVAL naming the field, unknown fields and
 * commands refused); a request refused for any reason changes nothing.
 * @return 0 with result filled, or -EINVAL, -ENOENT (no such job or
 *         tensor; the job has ended), -EEXIST (registered with other values,
 *         rank taken), -ENOSPC (ids exhausted, too many tensors), -EBUSY (the
 *         job is not ready yet), with err set
 */
int mgr_handle(void *m, const json_t *req, json_t *result, struct ctl_err *err);

/**
 * The periodic work, due by now_ms (mgr_now_ms()'s clock): renew every
 * switch's lease every lease_ms / 3, poll their stats.get every poll_ms, retry
 * session.del of ended jobs the switch did not confirm and install jobs
 * whose ranks have all joined but that a restart interrupted.
 * @return milliseconds until the next thing is due
 */
int64_t mgr_tick(struct mgr *m, int64_t now_ms);

/** A monotonic clock in milliseconds (the clock of mgr_tick). */
int64_t mgr_now_ms(void);

/**
 * The scale rule of E3 and E4: the largest power of two s with
 * n x max_abs x s x 2 < 2^31 (FIXED32), clamped to [2^-24, 2^30]; or with
 * max_abs x s x 2 < 2^55 (BLOCK16: the exponent limit, whatever n),
 * clamped to [2^-24, 2^54].
 */
double mgr_scale_rule(unsigned int n, double max_abs, uint8_t wire);

/** Log one line to stderr (timestamp, level, message) when level is enabled. */
void mgr_log(enum mgr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** The level mgr_log() prints up to (mgr_open() sets it from the conf). */
void mgr_log_set_level(enum mgr_log_level level);

/** @return "error", "warn", "info", "debug". */
const char *mgr_log_level_name(enum mgr_log_level level);

#endif /* MGR_H */
