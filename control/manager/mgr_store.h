/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The manager's store: one SQLite file that survives restarts (and kill -9:
 * every change is a transaction, WAL journal, synchronous=FULL). It holds
 * the id counters and a log of every id granted (whose primary key makes
 * granting an id twice impossible), tenants, jobs, their members and
 * tensors, the agents' reports and the step answers of the last steps.
 *
 * Every mutating caller brackets its changes with mgr_store_begin() and
 * mgr_store_commit() (or mgr_store_rollback() on any failure), so a
 * refused request changes nothing. Functions return 0 or -errno (-EIO for
 * an SQLite failure, logged with SQLite's message).
 */
#ifndef MGR_STORE_H
#define MGR_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include <cais/proto.h>

#include "ctl_err.h"
#include "mgr.h"

enum mgr_state { MGR_WAITING, MGR_READY, MGR_ENDED };

/** A job as stored. */
struct mgr_job {
	char name[MGR_NAME_BYTES + 1];
	char tenant_name[MGR_NAME_BYTES + 1];
	uint16_t tenant, session;
	uint16_t world;
	uint32_t slots;
	uint16_t elems;
	uint8_t priority;
	enum mgr_state state;
	bool offload;	  /**< ready with the session on the switch */
	char reason[256]; /**< why offload is false */
	uint32_t first_seq;
	bool on_switch;	   /**< session.add succeeded, no session.del yet */
	bool installing;   /**< an install was started (a restart may have cut it) */
	bool pending_del;  /**< session.del still to confirm */
	int32_t limit;	   /**< tensors offloaded at last_step, -1 all (congestion policy) */
	int64_t last_step; /**< newest step answered, -1 none */
	unsigned int joined;
	int64_t row; /**< its row in the store, older jobs lower: jobs.list's page cursor */
};

struct mgr_member {
	uint16_t rank;
	char mac[18];
	char ip[16];
	uint16_t port;
	uint8_t ports; /**< its flows' UDP ports port..port+ports-1 (docs/PROTOCOL.md E7) */
};

struct mgr_tensor {
	uint32_t id;
	enum cais_redop op;
	bool installed;
	double scale; /**< the current one (tensor.add, step answers) */
	uint8_t wire; /**< CAIS_DT_*: FIXED32, or BLOCK16 (docs/PROTOCOL.md E4) */
};

struct mgr_store;

/**
 * Open or create the store at path.
 * @return 0; -EINVAL (not a store of this manager), -EIO, -ENOMEM
 */
int mgr_store_open(const char *path, struct mgr_store **out, struct ctl_err *err);
void mgr_store_close(struct mgr_store *st);

int mgr_store_begin(struct mgr_store *st);
/** A transaction whose commit does not wait for the disk (what the manager
 * can lose in a crash of its machine: a step's report). */
int mgr_store_begin_lazy(struct mgr_store *st);
int mgr_store_commit(struct mgr_store *st);
void mgr_store_rollback(struct mgr_store *st);

/**
 * The tenant id of name, granted (and logged as granted) when new.
 * @return 0; -ENOSPC when every tenant id was granted; -EIO
 */
int mgr_store_tenant(struct mgr_store *st, const char *name, const char *job, uint16_t *id);

/** A new session id, never granted before. @return 0, -ENOSPC, -EIO */
int mgr_store_grant_session(struct mgr_store *st, const char *job, uint16_t *id);

/** The next id that would be granted ("tenant" or "session"), for tests and logs. */
int mgr_store_next_id(struct mgr_store *st, const char *kind, int64_t *next);

/** @return 0 with *job (joined counted), -ENOENT, -EIO */
int mgr_store_job_get(struct mgr_store *st, const char *name, struct mgr_job *job);

/** Insert or update a job (every stored column). */
int mgr_store_job_put(struct mgr_store *st, const struct mgr_job *job, int64_t now_ms);

/** Remove a job and everything that hangs off it (an ended job's name reused). */
int mgr_store_job_delete(struct mgr_store *st, const char *name);

/** Call fn for every job, oldest first (by row); fn's non-zero return stops. */
int mgr_store_jobs(struct mgr_store *st, int (*fn)(void *arg, const struct mgr_job *job),
		   void *arg);

/** mgr_store_jobs() from the job after row after (struct mgr_job.row; -1: the first). */
int mgr_store_jobs_after(struct mgr_store *st, int64_t after,
			 int (*fn)(void *arg, const struct mgr_job *job), void *arg);

/** Delete ended jobs beyond the newest `keep`. */
int mgr_store_prune_ended(struct mgr_store *st, unsigned int keep);

/** The members of a job, in rank order; *n of at most cap. */
int mgr_store_members(struct mgr_store *st, const char *job, struct mgr_member *m, unsigned int cap,
		      unsigned int *n);
int mgr_store_member_put(struct mgr_store *st, const char *job, const struct mgr_member *m);

/** The tensors of a job, by id; *n of at most cap. */
int mgr_store_tensors(struct mgr_store *st, const char *job, struct mgr_tensor *t, unsigned int cap,
		      unsigned int *n);
int mgr_store_tensor_put(struct mgr_store *st, const char *job, const struct mgr_tensor *t);

/** One agent report of stats.report (replaces an earlier one of that rank and step). */
struct mgr_report {
	uint16_t rank;
	int64_t step;
	int64_t collectives, fallbacks, errors, congested;
	unsigned int n_tensors;
	const uint32_t *tensor;
	const double *max_abs;
};
int mgr_store_report_put(struct mgr_store *st, const char *job, const struct mgr_report *r);

/**
 * The reports of (job, step): whether any said congested. Each rank's
 * latest report as of step (its report of step, else of step - 1): how
 * many ranks have one, and the max over them of max_abs for tensor (a
 * negative *max_abs when none reported it).
 */
int mgr_store_step_congested(struct mgr_store *st, const char *job, int64_t step, bool *congested);
int mgr_store_latest_ranks(struct mgr_store *st, const char *job, int64_t step,
			   unsigned int *ranks);
int mgr_store_latest_max_abs(struct mgr_store *st, const char *job, int64_t step, uint32_t tensor,
			     double *max_abs);

/** A step's answer (JSON text): 0 with *text (malloc'ed), -ENOENT. */
int mgr_store_answer_get(struct mgr_store *st, const char *job, int64_t step, char **text);
int mgr_store_answer_put(struct mgr_store *st, const char *job, int64_t step, const char *text);

/** Forget reports and answers of steps before `first` (the bounded history). */
int mgr_store_prune_steps(struct mgr_store *st, const char *job, int64_t first);

/**
 * Every row of every table as text (malloc'ed), for tests that check a
 * refused request changed nothing. @return 0, -ENOMEM, -EIO
 */
int mgr_store_dump(struct mgr_store *st, char **text);

/** @return "waiting", "ready", "ended". */
const char *mgr_state_name(enum mgr_state s);

#endif /* MGR_STORE_H */
