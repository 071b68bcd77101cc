/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What a communicator joined through cais-manager keeps (join.c): the
 * manager's address and key, the job, and the per-tensor max |x|
 * of the step's inputs, which cais_iallreduce() records (comm.c) and the
 * next step's report sends, so that the manager can choose the scales.
 */
#ifndef AG_MANAGED_H
#define AG_MANAGED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include <cais/cais.h>

#include "ctl_auth.h"
#include "quant.h"

/** Tensors whose max |x| one step tracks. */
#define AG_MAX_MANAGED_TENSORS 1024u

struct ag_managed {
	struct sockaddr_in mgr;
	struct ctl_key key;
	char job[65];
	unsigned int rank;
	bool started;		      /**< a step has begun: the next one reports it */
	bool report_apart;	      /**< a manager before E13: reports by stats.report */
	uint64_t skip;		      /**< after no answer: steps not to ask; 0: none */
	uint64_t ask_at;	      /**< while skip: the first step that asks again */
	struct cais_metrics last;     /**< metrics at the last report */
	struct cais_metrics reported; /**< ... as reported */
	pthread_mutex_t lock;	      /**< the max |x| table: API threads write, the report reads */
	unsigned int n_maxabs;
	struct {
		uint32_t tensor;
		float value;
	} maxabs[AG_MAX_MANAGED_TENSORS];
};

/** @return a zeroed record with its lock, or NULL. */
struct ag_managed *ag_managed_new(void);
void ag_managed_free(struct ag_managed *m);

/** @return max |x| of count elements of dt (0 for int32; NaN never wins). */
float ag_maxabs(const struct cais_quant_ops *q, const void *x, size_t count,
		enum cais_datatype dt);

/** Record max |x| of a collective's input for tensor (the step keeps the largest). */
void ag_managed_note(struct ag_managed *m, uint32_t tensor, float maxabs);

#endif /* AG_MANAGED_H */
