/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Framing and authentication of control datagrams (PROTOCOL.md section 4):
 * with a key, a datagram is `mac <64 lowercase hex>\n` followed by the JSON
 * bytes, the MAC being HMAC-SHA256(key, JSON bytes); without a key, the
 * JSON bytes alone. Used by both ends: the switch's endpoint, cais-manager,
 * cais-ctl and the agent.
 */
#ifndef CTL_AUTH_H
#define CTL_AUTH_H

#include <stddef.h>
#include <stdint.h>

/** Largest control datagram. */
#define CTL_MAX_DGRAM	 65536u
/** Largest reply: the largest UDP payload over IPv4 (65535 - 20 - 8). */
#define CTL_MAX_REPLY	 65507u
/** A ts more than this far from the receiver's clock is refused. */
#define CTL_TS_WINDOW_MS 30000
/** Length of the "mac <hex>\n" line. */
#define CTL_MAC_LINE	 69u
/** Largest key file. */
#define CTL_MAX_KEY	 4096u

/** A key: raw bytes (the whole key file). len 0: no authentication. */
struct ctl_key {
	size_t len;
	uint8_t bytes[CTL_MAX_KEY];
};

/**
 * Read a key file (its raw bytes).
 * @return 0; -ENOENT/-EACCES (cannot open), -EINVAL (empty or larger than
 *         CTL_MAX_KEY), or another -errno
 */
int ctl_key_load(const char *path, struct ctl_key *key);

/**
 * Frame json (json_len bytes) for sending: the MAC line when key has bytes.
 * @return the datagram length, or -EMSGSIZE when it exceeds cap or CTL_MAX_DGRAM
 */
int ctl_frame(const struct ctl_key *key, const char *json, size_t json_len, uint8_t *out,
	      size_t cap);

/**
 * Check a received datagram and find its JSON.
 * @return 0 with *json, *json_len; -EPERM (key given: no MAC line, malformed
 *         hex, or a MAC that does not verify)
 */
int ctl_unframe(const struct ctl_key *key, const uint8_t *dgram, size_t len, const char **json,
		size_t *json_len);

/** Milliseconds since the epoch (CLOCK_REALTIME), the unit of "ts". */
int64_t ctl_now_ms(void);

#endif /* CTL_AUTH_H */
