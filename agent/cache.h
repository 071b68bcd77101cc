/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The result cache: the fixed-point results of a communicator's last 2 x S
 * chunks, as their RESULTs carried them, which peers may fetch (fetch.h).
 * Entry seq & (2S - 1) holds seq's result. The flow that owns a chunk writes
 * its entry (flow.c); the progress thread reads entries to answer FETCHes.
 * Two seqs that share an entry differ by a multiple of 2S and so belong to
 * the same flow: every entry has one writer, and a sequence count per entry
 * (a seqlock) lets readers on other threads take a consistent copy.
 */
#ifndef AG_CACHE_H
#define AG_CACHE_H

#include <stdbool.h>
#include <stdint.h>

/** One chunk result, as a RESULT carried it. */
struct ag_result {
	const uint8_t *payload;
	uint32_t len; /**< payload bytes */
	uint16_t count;
	uint8_t dtype; /**< wire dtype, CAIS_DT_* */
	uint8_t flags; /**< the RESULT's flags */
};

struct ag_cache;

/**
 * @param slots  the session's pool size S (2S entries)
 * @param stride the largest payload of a chunk, in bytes
 * @return 0 and *out; -ENOMEM
 */
int ag_cache_open(struct ag_cache **out, uint32_t slots, uint32_t stride);
void ag_cache_close(struct ag_cache *c);

/** Keep seq's result (copied). The flow that owns seq only. */
void ag_cache_put(struct ag_cache *c, uint32_t seq, const struct ag_result *res);

/**
 * Copy seq's result into buf (at least stride bytes); res->payload points
 * there. Any thread.
 * @return whether the cache holds seq's result
 */
bool ag_cache_get(const struct ag_cache *c, uint32_t seq, uint8_t *buf, struct ag_result *res);

#endif /* AG_CACHE_H */
