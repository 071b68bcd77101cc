/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The result cache (cache.h). The sequence count of an entry is odd while
 * its one writer changes it: a reader that sees the same even count before
 * and after its copy has a consistent one.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"

struct ag_cache_entry {
	atomic_uint version; /**< odd while written */
	uint32_t seq;
	uint32_t len;
	uint16_t count;
	uint8_t dtype;
	uint8_t flags;
	bool valid;
};

struct ag_cache {
	uint32_t mask; /**< 2S - 1 */
	uint32_t stride;
	struct ag_cache_entry *e;
	uint8_t *data; /**< 2S x stride */
};

int
ag_cache_open(struct ag_cache **out, uint32_t slots, uint32_t stride)
{
	struct ag_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->mask = 2 * slots - 1;
	c->stride = stride;
	c->e = calloc(2u * slots, sizeof(*c->e));
	c->data = malloc((size_t)2 * slots * stride);
	if (!c->e || !c->data) {
		ag_cache_close(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void
ag_cache_close(struct ag_cache *c)
{
	if (!c)
		return;
	free(c->e);
	free(c->data);
	free(c);
}

void
ag_cache_put(struct ag_cache *c, uint32_t seq, const struct ag_result *res)
{
	uint32_t i = seq & c->mask;
	struct ag_cache_entry *e = &c->e[i];
	unsigned int v = atomic_load_explicit(&e->version, memory_order_relaxed);

	if (res->len > c->stride)
		return;
	atomic_store_explicit(&e->version, v + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(c->data + (size_t)i * c->stride, res->payload, res->len);
	e->seq = seq;
	e->len = res->len;
	e->count = res->count;
	e->dtype = res->dtype;
	e->flags = res->flags;
	e->valid = true;
	atomic_store_explicit(&e->version, v + 2, memory_order_release);
}

bool
ag_cache_get(const struct ag_cache *c, uint32_t seq, uint8_t *buf, struct ag_result *res)
{
	uint32_t i = seq & c->mask;
	struct ag_cache_entry *e = &c->e[i];

	for (int tries = 0; tries < 8; tries++) {
		unsigned int v = atomic_load_explicit(&e->version, memory_order_acquire);
		bool hit;

		if (v & 1)
			continue; /* being written */
		hit = e->valid && e->seq == seq;
		if (hit) {
			*res = (struct ag_result){.payload = buf,
						  .len = e->len,
						  .count = e->count,
						  .dtype = e->dtype,
						  .flags = e->flags};
			memcpy(buf, c->data + (size_t)i * c->stride, res->len);
		}
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->version, memory_order_relaxed) == v)
			return hit;
	}
	return false; /* written all the while: as good as gone */
}
