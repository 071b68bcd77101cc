/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The switch's counters as text: the stats.get result object (see
 * docs/PROTOCOL.md section 4) rendered testpmd-style, one renderer for
 * cais-switch's periodic printout and for cais-ctl (stats.get, and the
 * manager's switch.status).
 *
 * The layout, between a title line and a closing line of dashes: a table
 * of the ports; the CAIS totals with the completion-time percentiles; L2;
 * slot usage, queue depth and the thresholds; the non-zero REJECTs and
 * drops; then a line per session ("  session T/S (...): DATA n, rounds n,
 * ...") followed by its completion times, its tensors and its non-zero
 * REJECTs. Scripts grep these lines (the CAIS totals, "session T/S",
 * "REJECTs sent:", "drops:") and cut the printout at the closing line.
 */
#ifndef CTL_STATS_H
#define CTL_STATS_H

#include <stdio.h>

#include <jansson.h>

/**
 * Print a stats.get result object to f. Members that are missing print
 * as 0 or "-".
 * @param title names what was polled ("cais-switch statistics",
 *              "cais-switch 127.0.0.1:51734")
 * @return 0; -ENOMEM (the port table could not be built; the rest is printed)
 */
int ctl_stats_print(FILE *f, const json_t *stats, const char *title);

#endif /* CTL_STATS_H */
