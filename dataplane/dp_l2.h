/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The MAC table for L2 forwarding: learning and ageing without locks.
 *
 * Every data lcore learns and looks up. An entry is one 64-bit word
 * (valid bit, port, MAC) written with a single atomic store, so a reader
 * never sees a torn entry; its last-seen time is a second word, refreshed
 * at most a few times per ageing period so that a busy sender does not
 * bounce the cache line between lcores. Two lcores learning into the same
 * bucket at once can lose one of the two entries; the next frame from
 * that MAC learns it again (a MAC table is a cache: a miss floods).
 */
#ifndef DP_L2_H
#define DP_L2_H

#include <stdbool.h>
#include <stdint.h>

#include "dp_config.h"

struct dp_l2_entry {
	uint64_t word; /**< bit 63 valid, bits 48..55 port, bits 0..47 MAC */
	uint64_t seen; /**< TSC of the last refresh */
};

struct dp_l2 {
	uint64_t age_tsc;     /**< an entry older than this is a miss */
	uint64_t refresh_tsc; /**< refresh seen[] no more often than this */
	struct dp_l2_entry e[DP_L2_ENTRIES];
};

/**
 * Initialise an empty table.
 * @param age_tsc ageing time in TSC cycles (> 0)
 */
void dp_l2_init(struct dp_l2 *t, uint64_t age_tsc);

/** Learn that mac (6 bytes) is behind port, at time now. Multicast sources are ignored. */
void dp_l2_learn(struct dp_l2 *t, const uint8_t *mac, uint16_t port, uint64_t now);

/**
 * @return the port of a unicast mac learned within the ageing time, or -1
 *         (unknown, aged out, or multicast/broadcast: flood)
 */
int dp_l2_lookup(const struct dp_l2 *t, const uint8_t *mac, uint64_t now);

/** @return the number of live entries at time now (for stats). */
unsigned int dp_l2_count(const struct dp_l2 *t, uint64_t now);

#endif /* DP_L2_H */
