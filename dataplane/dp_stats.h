/* SPDX-License-Identifier: BSD-3-Clause */
/** @file The switch's counters as text, for its periodic printout and its exit. */
#ifndef DP_STATS_H
#define DP_STATS_H

#include <stdio.h>

struct dp_switch;

/** Print the counters (the stats.get result, testpmd-like) to f. */
void dp_stats_print(struct dp_switch *sw, FILE *f);

#endif /* DP_STATS_H */
