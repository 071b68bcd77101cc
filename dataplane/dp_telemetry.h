/* SPDX-License-Identifier: BSD-3-Clause */
/** @file The switch's rte_telemetry commands under /cais/ (see dp_telemetry.c). */
#ifndef DP_TELEMETRY_H
#define DP_TELEMETRY_H

struct dp_switch;

/** Register the /cais/ commands for sw (one switch per process). @return 0 or -errno */
int dp_telemetry_register(struct dp_switch *sw);

#endif /* DP_TELEMETRY_H */
