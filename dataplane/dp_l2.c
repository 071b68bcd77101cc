/* SPDX-License-Identifier: BSD-3-Clause */
#include <string.h>

#include "dp_l2.h"

#define L2_VALID    (1ull << 63)
#define L2_MAC_MASK ((1ull << 48) - 1)

/* The 48-bit MAC as a number, its first byte the most significant. */
static inline uint64_t
mac_key(const uint8_t *mac)
{
	uint32_t hi;
	uint16_t lo;

	memcpy(&hi, mac, 4);
	memcpy(&lo, mac + 4, 2);
	return (uint64_t)__builtin_bswap32(hi) << 16 | __builtin_bswap16(lo);
}

static inline unsigned int
bucket(uint64_t key)
{
	/* Fibonacci hashing of the 48-bit MAC; NICs of one vendor differ in the low bytes. */
	return (unsigned int)((key * 0x9E3779B97F4A7C15ull) >> 40) & (DP_L2_ENTRIES - 1);
}

void
dp_l2_init(struct dp_l2 *t, uint64_t age_tsc)
{
	memset(t->e, 0, sizeof(t->e));
	t->age_tsc = age_tsc;
	t->refresh_tsc = age_tsc / 8;
}

/* Lcores stamp with their own burst time, so seen may be a little ahead of now. */
static inline bool
young(const struct dp_l2 *t, uint64_t seen, uint64_t now)
{
	return (int64_t)(now - seen) < (int64_t)t->age_tsc;
}

static inline bool
live(const struct dp_l2 *t, uint64_t word, uint64_t seen, uint64_t now)
{
	return (word & L2_VALID) && young(t, seen, now);
}

void
dp_l2_learn(struct dp_l2 *t, const uint8_t *mac, uint16_t port, uint64_t now)
{
	uint64_t key, want;
	unsigned int b, i, victim = DP_L2_WAYS;
	uint64_t oldest = UINT64_MAX;

	if (mac[0] & 1)
		return;
	key = mac_key(mac);
	want = L2_VALID | (uint64_t)(port & 0xFF) << 48 | key;
	b = bucket(key);
	for (i = 0; i < DP_L2_WAYS; i++) {
		struct dp_l2_entry *e = &t->e[(b + i) & (DP_L2_ENTRIES - 1)];
		uint64_t w = __atomic_load_n(&e->word, __ATOMIC_RELAXED);
		uint64_t seen = __atomic_load_n(&e->seen, __ATOMIC_RELAXED);

		if ((w & L2_VALID) && (w & L2_MAC_MASK) == key) {
			if (w != want) /* moved to another port */
				__atomic_store_n(&e->word, want, __ATOMIC_RELEASE);
			if (w != want || (int64_t)(now - seen) > (int64_t)t->refresh_tsc)
				__atomic_store_n(&e->seen, now, __ATOMIC_RELAXED);
			return;
		}
		if (!live(t, w, seen, now)) {
			if (oldest != 0) {
				victim = i;
				oldest = 0;
			}
		} else if (seen < oldest) {
			victim = i;
			oldest = seen;
		}
	}
	if (victim < DP_L2_WAYS) {
		struct dp_l2_entry *e = &t->e[(b + victim) & (DP_L2_ENTRIES - 1)];

		/* seen first: a reader that sees the new word must not find it aged */
		__atomic_store_n(&e->seen, now, __ATOMIC_RELAXED);
		__atomic_store_n(&e->word, want, __ATOMIC_RELEASE);
	}
}

int
dp_l2_lookup(const struct dp_l2 *t, const uint8_t *mac, uint64_t now)
{
	uint64_t key;
	unsigned int b, i;

	if (mac[0] & 1)
		return -1;
	key = mac_key(mac);
	b = bucket(key);
	for (i = 0; i < DP_L2_WAYS; i++) {
		const struct dp_l2_entry *e = &t->e[(b + i) & (DP_L2_ENTRIES - 1)];
		uint64_t w = __atomic_load_n(&e->word, __ATOMIC_ACQUIRE);

		if ((w & L2_VALID) && (w & L2_MAC_MASK) == key) {
			uint64_t seen = __atomic_load_n(&e->seen, __ATOMIC_RELAXED);

			return young(t, seen, now) ? (int)((w >> 48) & 0xFF) : -1;
		}
	}
	return -1;
}

unsigned int
dp_l2_count(const struct dp_l2 *t, uint64_t now)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < DP_L2_ENTRIES; i++)
		n += live(t, __atomic_load_n(&t->e[i].word, __ATOMIC_RELAXED),
			  __atomic_load_n(&t->e[i].seen, __ATOMIC_RELAXED), now);
	return n;
}
