/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What the manager's modules share: struct mgr, and the switch side
 * (mgr_switch.c) used by the commands and the tick (mgr_core.c). Every
 * switch function takes k, the switch's index in the fabric.
 */
#ifndef MGR_INTERNAL_H
#define MGR_INTERNAL_H

#include <errno.h>
#include <pthread.h>

#include "ctl_auth.h"
#include "cmn_addr.h"
#include "mgr.h"
#include "mgr_fabric.h"
#include "mgr_store.h"

/** A switch as last seen: lease renewals and the last stats.get. */
struct mgr_switch_state {
	json_t *stats;	      /**< the last stats.get result, NULL before one */
	int64_t polled_ms;    /**< when (mgr_now_ms) */
	bool reachable;	      /**< the last poll got an answer */
	unsigned int poll_fail_run; /**< polls unanswered since the last answer */
	char poll_error[256]; /**< why the last poll failed */
	int64_t lease_ok_ms;  /**< last renewal that succeeded, 0 never */
	uint64_t leases, lease_failures;
	unsigned int lease_fail_run; /**< failures since the last success */
	char lease_error[256];
	double uptime_s; /**< the switch's uptime at the last poll */
	bool checked;	 /**< a poll of this process has been compared with the jobs */
	bool check;	 /**< compare the last poll's sessions with the jobs on the switch:
			  *   the first poll, and after a restart (its tables are lost) */
	int64_t next_lease_ms, next_poll_ms;
	bool started; /**< the first tick has run */
};

/** One switch server of the fabric. */
struct mgr_sw {
	struct ctl_key key;
	char text[64];		      /**< "A.B.C.D:port", or "NAME (A.B.C.D:port)" in a fabric */
	char agg_text[CMN_ADDR_TEXT]; /**< its aggregator, "A.B.C.D:port" */
	pthread_mutex_t call_lock;    /**< one call to it at a time (ts order) */
	struct mgr_switch_state st;   /**< under the manager's st_lock */
};

struct mgr {
	struct mgr_conf conf;
	struct mgr_fabric fabric;
	struct mgr_sw sw[MGR_MAX_SWITCHES]; /**< fabric.n of them, in the fabric's order */
	struct mgr_store *store;
	int64_t start_ms;
	pthread_mutex_t lock;	 /**< the store and the jobs: one request at a time */
	pthread_mutex_t st_lock; /**< every sw[].st */
	int64_t next_settle_ms; /**< mgr_tick()'s own: when the store is settled next */
};

/**
 * The name of an error of a switch call: ctl_errname()'s, plus the local
 * causes of ctl_call() that the protocol has no code for.
 */
static inline const char *
mgr_errname(int code)
{
	code = code < 0 ? -code : code;
	return code == ETIMEDOUT ? "ETIMEDOUT" : code == EPROTO ? "EPROTO" : ctl_errname(code);
}

/**
 * One request to the switch (ctl_call, serialised, retried once when the
 * switch refused its ts or MAC before dispatch: nothing changed then);
 * stats.get followed through its pages (ctl_call_pages()).
 * @param args   consumed (may be NULL)
 * @param result NULL, or the reply's result (a new reference)
 * @return 0 or -code (ETIMEDOUT when the switch is silent)
 */
int mgr_switch_call(struct mgr *m, unsigned int k, const char *cmd, json_t *args, json_t **result,
		    struct ctl_err *err);

/**
 * Admission (the two thresholds) against the last stats.get, polled now
 * when there is none yet.
 * @return true when a session of `slots` slots may go on the switch; else
 *         false with the reason
 */
bool mgr_admit(struct mgr *m, unsigned int k, uint32_t slots, char *reason, size_t cap);

/**
 * Is switch k there for the data path: it answered one of its last two
 * polls (one lost reply on a loaded machine is not a switch down), or none
 * was made yet?
 */
bool mgr_switch_reachable(struct mgr *m, unsigned int k);

/** The switch.status result: the one switch, or each of the fabric's. */
void mgr_switch_status(struct mgr *m, json_t *result);

/**
 * The switch's data lcores, from its last stats.get (docs/PROTOCOL.md E7:
 * its slots s belong to lcore s mod lcores); 1 before any answer.
 */
unsigned int mgr_switch_lcores(struct mgr *m, unsigned int k);

/** The most data lcores of the fabric's switches (mgr_switch_lcores()). */
unsigned int mgr_switch_lcores_max(struct mgr *m);

/**
 * Lease and poll every switch when due: mgr_tick()'s part that needs no
 * store.
 * @param next_ms set to when the next lease or poll is due
 */
void mgr_switch_tick(struct mgr *m, int64_t now_ms, int64_t *next_ms);

#endif /* MGR_INTERNAL_H */
