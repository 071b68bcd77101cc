/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The tuner: all-reduces of CAIS_THRESHOLD bytes or more go to CollNet
 * (chain, else direct), smaller ones to NCCL's own algorithms, where the
 * switch does not pay off (CAIS_DEFAULT_THRESHOLD: the knee bench/e2e.sh measured). NCCL finds the table
 * in the net plugin's library when NCCL_TUNER_PLUGIN is not set. The tuner
 * only chooses among the entries NCCL left open (NCCL_ALGO, CollNet set up
 * or not): it never closes the last one.
 */
#include <stdlib.h>

#include "plugin.h"

struct np_tuner {
	size_t nranks, nnodes;
	uint64_t threshold;
};

static ncclResult_t
tuner_init(size_t nranks, size_t nnodes, ncclDebugLogger_t log, void **ctx)
{
	struct np_tuner *t = calloc(1, sizeof(*t));

	if (!t)
		return ncclSystemError;
	np_setup(log);
	t->nranks = nranks;
	t->nnodes = nnodes;
	t->threshold = np_conf()->threshold;
	NP_INFO(NCCL_INIT | NCCL_TUNING,
		"CAIS tuner: %zu ranks on %zu nodes: all-reduces of %llu B or more to CollNet",
		nranks, nnodes, (unsigned long long)t->threshold);
	*ctx = t;
	return ncclSuccess;
}

static bool
open_entry(float v)
{
	return v != NCCL_ALGO_PROTO_IGNORE && v >= 0;
}

static ncclResult_t
tuner_get_coll_info(void *ctx, ncclFunc_t coll, size_t bytes, int num_pipe_ops, float **cost_table,
		    int num_algo, int num_proto, int reg_buff, int *nchannels)
{
	struct np_tuner *t = ctx;
	float *cost = (float *)cost_table; /* NCCL passes a [num_algo][num_proto] array */
	static const int collnet[] = {NCCL_ALGO_COLLNET_CHAIN, NCCL_ALGO_COLLNET_DIRECT};
	bool other_open = false;

	(void)num_pipe_ops;
	(void)reg_buff;
	(void)nchannels;
	if (coll != ncclFuncAllReduce || t->nnodes < 2 || num_algo <= NCCL_ALGO_COLLNET_CHAIN ||
	    num_proto <= NCCL_PROTO_SIMPLE)
		return ncclSuccess;
	if (bytes >= t->threshold) {
		for (unsigned int i = 0; i < 2; i++) {
			float *e = &cost[collnet[i] * num_proto + NCCL_PROTO_SIMPLE];

			if (open_entry(*e)) {
				*e = 0.0f; /* the cheapest: NCCL takes it */
				break;
			}
		}
		return ncclSuccess;
	}
	for (int a = 0; a < num_algo; a++)
		for (int p = 0; p < num_proto; p++)
			if (a != NCCL_ALGO_COLLNET_CHAIN && a != NCCL_ALGO_COLLNET_DIRECT &&
			    open_entry(cost[a * num_proto + p]))
				other_open = true;
	if (!other_open)
		return ncclSuccess;
	for (unsigned int i = 0; i < 2; i++)
		for (int p = 0; p < num_proto; p++)
			cost[collnet[i] * num_proto + p] = NCCL_ALGO_PROTO_IGNORE;
	return ncclSuccess;
}

static ncclResult_t
tuner_destroy(void *ctx)
{
	free(ctx);
	return ncclSuccess;
}

static ncclResult_t
tuner_init_v5(void **ctx, uint64_t comm_id, size_t nranks, size_t nnodes, ncclDebugLogger_t log,
	      ncclNvlDomainInfo_v5_t *nvl, ncclTunerConstants_v5_t *constants)
{
	(void)comm_id;
	(void)nvl;
	(void)constants; /* NCCL's defaults stay */
	return tuner_init(nranks, nnodes, log, ctx);
}

NP_EXPORT ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = NP_NAME,
    .init = tuner_init_v5,
    .getCollInfo = tuner_get_coll_info,
    .finalize = tuner_destroy,
};

NP_EXPORT ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = NP_NAME,
    .init = tuner_init,
    .getCollInfo = tuner_get_coll_info,
    .destroy = tuner_destroy,
};
