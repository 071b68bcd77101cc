/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The switch behind the control requests (docs/PROTOCOL.md section 4): a
 * struct ctl_ops on a struct dp_switch, for ctl_dispatch(), ctl_apply_file()
 * and the endpoint, and the stats.get result. The one place where the
 * control plane's types and JSON meet the data path's (dp_switch.h).
 */
#ifndef DP_CTL_H
#define DP_CTL_H

#include <jansson.h>

#include "ctl.h"

struct dp_switch;

/** Fill ops with the operations of sw (ops->ctx = sw). */
void dp_switch_ctl_ops(struct dp_switch *sw, struct ctl_ops *ops);

/**
 * Add the stats.get result members to out: uptime, mode, lease, ports,
 * drops and REJECTs by reason, switch-wide counters (every session's
 * included), slot usage and memory, thresholds, completion-time
 * percentiles, and a page of the sessions after key after (-1: from the
 * first) with their counters and tensors, "next" when more follow
 * (struct ctl_ops). Takes the tables' lock.
 * @return 0
 */
int dp_stats_json(struct dp_switch *sw, int64_t after, json_t *out);

#endif /* DP_CTL_H */
