/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The switch's parser: Ethernet -> IPv4 -> UDP -> CAIS on plain bytes.
 *
 * Works on (pointer, length) so that it needs no DPDK and can be fuzzed
 * with exact-size buffers; it never reads outside [frame, frame + len).
 *
 * Outcomes (the documented behaviour for every malformed form):
 *  - a frame with a multicast or all-zero source MAC is dropped (as Linux
 *    bridges do): no station may send from one, and nothing answers it;
 *  - a frame shorter than an Ethernet header is dropped (RUNT);
 *  - the aggregator is disabled (no --agg-ip): every other frame is L2 traffic;
 *  - the aggregator's addresses are the switch's alone (docs/PROTOCOL.md
 *    E5): a frame from its MAC, an ARP packet whose sender protocol address
 *    is its IPv4 address, and an IPv4 packet from its address are dropped
 *    (AGG_SRC_MAC, AGG_ARP, AGG_SRC_IP), wherever they are addressed, and
 *    their source MAC is not learned (dp_parse_learn());
 *  - an ARP request for the aggregator address (broadcast or to the
 *    aggregator MAC) whose sender hardware address is the frame's source:
 *    answered; any other ARP to the aggregator MAC: dropped;
 *  - frames to another MAC (including broadcast/multicast, VLAN-tagged
 *    frames and UDP to port 51733 of another address): L2 traffic;
 *  - frames to the aggregator MAC: must be IPv4 without options or
 *    fragmentation, to the aggregator IP, UDP to the CAIS port, with a full
 *    CAIS header of version 1: type DATA, or an answer (RESULT, REJECT,
 *    ACK, NACK), which only a leaf's spine may send it (E9: the match checks
 *    that, and drops any other as NOT_DATA); anything else is dropped and
 *    counted by reason (DP_DROP_*), never answered with a REJECT.
 * Count, dtype and membership are checked after the table lookup, where a
 * failure earns a REJECT.
 */
#ifndef DP_PARSE_H
#define DP_PARSE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <cais/proto.h>

/**
 * Drop reasons of the whole switch: X(name, what it means). Parse failures
 * first, then the pipeline's.
 */
#define DP_DROPS(X)                                                                                \
	X(RUNT, "frame shorter than an Ethernet header")                                           \
	X(BAD_SRC_MAC, "multicast or zero source MAC")                                             \
	X(AGG_SRC_MAC, "frame from the aggregator's MAC (spoofed)")                                \
	X(AGG_SRC_IP, "IPv4 from the aggregator's address (spoofed)")                              \
	X(AGG_ARP, "ARP claiming the aggregator's address (spoofed)")                              \
	X(VLAN, "VLAN-tagged frame to the aggregator MAC")                                         \
	X(TO_AGG_OTHER, "non-IPv4/ARP frame or other IP to the aggregator MAC")                    \
	X(ARP_OTHER, "ARP to the aggregator MAC that is not a request for its address")            \
	X(IP_SHORT, "truncated IPv4 header")                                                       \
	X(IP_VERSION, "IP version is not 4")                                                       \
	X(IP_HDRLEN, "IPv4 header length below 20")                                                \
	X(IP_OPTIONS, "IPv4 options")                                                              \
	X(IP_LEN, "IPv4 total length inconsistent with the frame")                                 \
	X(IP_CSUM, "bad IPv4 header checksum")                                                     \
	X(IP_FRAGMENT, "IPv4 fragment")                                                            \
	X(NOT_UDP, "non-UDP packet to the aggregator")                                             \
	X(UDP_LEN, "UDP length inconsistent with the IPv4 length")                                 \
	X(UDP_PORT, "UDP to another port of the aggregator")                                       \
	X(CAIS_SHORT, "UDP payload shorter than the CAIS header")                                  \
	X(CAIS_MAGIC, "CAIS magic is not 0xCA15")                                                  \
	X(CAIS_VERSION, "CAIS version is not 1")                                                   \
	X(CAIS_TYPE, "CAIS type undefined")                                                        \
	X(CAIS_FLAGS, "CAIS reserved flag bits set")                                               \
	X(NOT_DATA, "an answer to the switch, not from a session's uplink")                        \
	X(MULTISEG, "multi-segment frame")                                                         \
	X(SLOT_MISMATCH, "slot or set disagree with seq")                                          \
	X(INCONSISTENT, "count, dtype or tensor differ from the round's")                          \
	X(DUPLICATE, "duplicate contribution to an open round")                                    \
	X(STALE, "seq older than the slot's round")                                                \
	X(REJECT_LIMITED, "REJECT suppressed by the per-sender rate limit")                        \
	X(HANDOFF_FULL, "handoff ring to the slot's lcore full")                                   \
	X(NO_MBUF, "no mbuf for a RESULT copy or a flood clone")                                   \
	X(NO_PORT, "member MAC not learned: RESULT copy not sent")                                 \
	X(BAD_PORT, "mbuf from a port the switch does not drive")                                  \
	X(L2_SAME_PORT, "L2 destination on the ingress port")                                      \
	X(TX_FULL, "TX queue full")                                                                \
	X(QUERY_LIMITED, "QUERY unanswered: the sender's ACK budget is spent")                     \
	X(RX_LOSS, "dropped at random on receipt (--rx-loss: tests, benchmarks)")

#define DP_X_ENUM(name, text) DP_DROP_##name,
enum dp_drop { DP_DROP_NONE = 0, DP_DROPS(DP_X_ENUM) DP_DROP_MAX };
#undef DP_X_ENUM

/** @return the lower-case name of a drop reason ("ip_options"), as the counters show it. */
const char *dp_drop_name(enum dp_drop d);

/** What the pipeline does with a frame. */
enum dp_class {
	DP_CLASS_L2,	  /**< ordinary traffic: learn, forward or flood */
	DP_CLASS_ARP_AGG, /**< ARP request for the aggregator address: reply */
	DP_CLASS_DATA,	  /**< CAIS DATA to the aggregator: match and act */
	DP_CLASS_ANSWER,  /**< a CAIS answer (not DATA) to the aggregator: a spine's? (E9) */
	DP_CLASS_DROP,	  /**< malformed for the aggregator: drop, count drop */
};

/** The addresses the parser matches, in network byte order. */
struct dp_parse_cfg {
	uint8_t agg_mac[6];
	uint32_t agg_ip;   /**< network order */
	uint16_t udp_port; /**< network order */
	bool agg_enabled;  /**< false: the switch only forwards */
	/**
	 * The guards of docs/PROTOCOL.md E5 (the aggregator's addresses here,
	 * member binding in dp_match.c) off. Never in cais-switch; only
	 * bench_pipeline sets it, to measure what the guards cost.
	 */
	bool unguarded;
};

/**
 * Parser result. A DATA frame has no IPv4 options, so its CAIS header is at
 * CAIS_FRAME_HDR_OFF, and its UDP length lies within the frame: the match
 * (dp_match.c) reads both from the frame itself.
 */
struct dp_parsed {
	enum dp_class cls;
	enum dp_drop drop; /**< DP_CLASS_DROP: why */
};

/**
 * Classify one frame.
 * @param frame first byte of the Ethernet header
 * @param len   bytes present
 * @param cfg   the aggregator's addresses
 * @param out   the result; always written
 */
void dp_parse(const uint8_t *frame, uint32_t len, const struct dp_parse_cfg *cfg,
	      struct dp_parsed *out);

/**
 * Whether the switch may learn the source MAC of a frame so classified: not
 * from a runt, a bad source MAC or a frame that forges the aggregator's
 * addresses (the reasons that come first in DP_DROPS).
 */
static inline bool
dp_parse_learn(const struct dp_parsed *p)
{
	return p->cls != DP_CLASS_DROP || p->drop > DP_DROP_AGG_ARP;
}

/** Internet checksum of an IPv4 header of hlen bytes (0 when valid). */
uint16_t dp_ip_csum(const void *hdr, unsigned int hlen);

/** Byte-equality of 2, 4 and 6 bytes without a call (memcmp may not be inlined). */
static inline bool
dp_eq2(const void *a, const void *b)
{
	uint16_t x, y;

	memcpy(&x, a, 2);
	memcpy(&y, b, 2);
	return x == y;
}

static inline bool
dp_eq4(const void *a, const void *b)
{
	uint32_t x, y;

	memcpy(&x, a, 4);
	memcpy(&y, b, 4);
	return x == y;
}

static inline bool
dp_eq6(const void *a, const void *b)
{
	return dp_eq4(a, b) && dp_eq2((const uint8_t *)a + 4, (const uint8_t *)b + 4);
}

#endif /* DP_PARSE_H */
