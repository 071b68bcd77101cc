/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A few large buffers kept for reuse (staging of in-network collectives,
 * work buffers of the ring): a fresh buffer of many megabytes costs a page
 * fault per page on first touch, every collective. One pool per
 * communicator, used by its progress thread only.
 */
#ifndef AG_POOL_H
#define AG_POOL_H

#include <stddef.h>

/** Buffers kept: a staging and a ring buffer of two collectives in flight. */
#define AG_POOL_BUFS 4u

struct ag_pool {
	struct {
		void *p;
		size_t size;
	} b[AG_POOL_BUFS];
};

/** @return a buffer of at least size bytes (the smallest kept one that fits, else malloc), or NULL. */
void *ag_pool_get(struct ag_pool *pool, size_t size);

/** Give back a buffer of size bytes (NULL is ignored): kept in place of a smaller one, or freed. */
void ag_pool_put(struct ag_pool *pool, void *p, size_t size);

/** Free every kept buffer. */
void ag_pool_free(struct ag_pool *pool);

#endif /* AG_POOL_H */
