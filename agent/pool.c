/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "pool.h"

void *
ag_pool_get(struct ag_pool *pool, size_t size)
{
	unsigned int best = AG_POOL_BUFS;
	void *p;

	for (unsigned int i = 0; i < AG_POOL_BUFS; i++)
		if (pool->b[i].p && pool->b[i].size >= size &&
		    (best == AG_POOL_BUFS || pool->b[i].size < pool->b[best].size))
			best = i;
	if (best == AG_POOL_BUFS)
		return malloc(size);
	p = pool->b[best].p;
	pool->b[best].p = NULL;
	return p;
}

void
ag_pool_put(struct ag_pool *pool, void *p, size_t size)
{
	unsigned int at = AG_POOL_BUFS;

	if (!p)
		return;
	/* an empty place, else the smallest buffer if it is smaller than this one */
	for (unsigned int i = 0; i < AG_POOL_BUFS; i++) {
		if (!pool->b[i].p) {
			at = i;
			break;
		}
		if (pool->b[i].size < size &&
		    (at == AG_POOL_BUFS || pool->b[i].size < pool->b[at].size))
			at = i;
	}
	if (at == AG_POOL_BUFS) {
		free(p);
		return;
	}
	free(pool->b[at].p);
	pool->b[at].p = p;
	pool->b[at].size = size;
}

void
ag_pool_free(struct ag_pool *pool)
{
	for (unsigned int i = 0; i < AG_POOL_BUFS; i++) {
		free(pool->b[i].p);
		pool->b[i].p = NULL;
	}
}
