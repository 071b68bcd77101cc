/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What fuzz_pipeline.c installs and what gen_corpus.c builds seeds for:
 * the aggregator's addresses, the sessions and their members, and the
 * layout of a fuzz input. No DPDK.
 *
 * A fuzz input is a sequence of records, each
 *
 *   ctl (1 byte) | len (2 bytes, big-endian) | len bytes of frame
 *
 * (a last record shorter than len takes what is left). ctl:
 *   bits 0, 5 ingress port: (bit 0) | (bit 5) << 1, so 0..3; the switch has
 *             FZ_PORTS = 3 ports, port 3 is one it does not drive
 *   bit 1     end the burst after this frame (dp_lcore_input + dp_lcore_flush);
 *             a burst also ends at DP_BURST frames and at the end of the input
 *   bits 2-3  before this frame: 0 nothing, 1 mode.set forward_only,
 *             2 mode.set compute, 3 toggle tensor FZ_TOGGLE_TENSOR: deleted
 *             when present, else added again with the other wire dtype than
 *             the last time (FIXED32 at the start of an input, then BLOCK16,
 *             FIXED32, ...), so that rounds see their tensor change dtype
 *   bit 4     stats.get after this frame's burst
 *   bit 6     deliver the frame as a two-segment mbuf chain
 *   bit 7     unused
 * Every input starts from the same state: the sessions below with empty
 * slots, compute mode, an empty MAC table and fresh REJECT buckets. The
 * switch has two data lcores: lcore 0 receives every burst, and DATA for
 * odd slots is handed to lcore 1 (slot ownership), which runs after it.
 */
#ifndef CAIS_FUZZ_SETUP_H
#define CAIS_FUZZ_SETUP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cais/proto.h>

#define FZ_CTL_PORT	    0x01u
#define FZ_CTL_PORT_HI	    0x20u
#define FZ_CTL_MULTISEG	    0x40u
#define FZ_CTL_END_BURST    0x02u
#define FZ_CTL_OP_SHIFT	    2
#define FZ_CTL_OP_MASK	    0x0Cu
#define FZ_OP_NONE	    0u
#define FZ_OP_FWD_ONLY	    1u
#define FZ_OP_COMPUTE	    2u
#define FZ_OP_TOGGLE_TENSOR 3u
#define FZ_CTL_STATS	    0x10u

#define FZ_REC_HDR    3u
#define FZ_MAX_FRAME  9216u /* a jumbo frame; longer records are cut */
#define FZ_MAX_FRAMES 64u   /* frames per input; the rest is ignored */
#define FZ_PORTS      3u
#define FZ_LCORES     2u

/* The ingress port a ctl byte names (0..3). */
static inline uint16_t
fz_ctl_port(uint8_t ctl)
{
	return (uint16_t)((ctl & FZ_CTL_PORT) | ((ctl & FZ_CTL_PORT_HI) ? 2 : 0));
}

/* The aggregator: 02:00:00:00:00:aa, 10.0.0.100, port 51733. */
static const uint8_t fz_agg_mac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0xAA};
static const uint8_t fz_agg_ip[4] = {10, 0, 0, 100};

/*
 * Session A: tenant 1 session 1, n = 4, 4 slots, 8 elements, loss_hints
 * (E11); FIXED32 tensors 1 sum, 2 max, 3 min, 4 avg; BLOCK16 tensors (E4) 5
 * sum, 6 max, 7 min.
 */
#define FZ_A_TENANT	 1u
#define FZ_A_SESSION	 1u
#define FZ_A_N		 4u
#define FZ_A_SLOTS	 4u
#define FZ_A_ELEMS	 8u
#define FZ_A_B16_SUM	 5u
#define FZ_A_B16_MAX	 6u
#define FZ_A_B16_MIN	 7u
/* Session B: tenant 2 session 7, n = 1, 1 slot, 4 elements; tensor 9 sum, 10 sum in BLOCK16. */
#define FZ_B_TENANT	 2u
#define FZ_B_SESSION	 7u
#define FZ_B_N		 1u
#define FZ_B_SLOTS	 1u
#define FZ_B_ELEMS	 4u
#define FZ_B_TENSOR	 9u
#define FZ_B_B16_TENSOR	 10u
/* The tensor that control op 3 removes and re-adds. */
#define FZ_TOGGLE_TENSOR 2u

/* Member r of session A: 02:00:00:00:01:0r, 10.0.0.(r+1), port 40000 + r. */
static inline void
fz_member_a(unsigned int r, uint8_t mac[6], uint8_t ip[4], uint16_t *port)
{
	const uint8_t m[6] = {0x02, 0x00, 0x00, 0x00, 0x01, (uint8_t)r};
	const uint8_t a[4] = {10, 0, 0, (uint8_t)(r + 1)};

	memcpy(mac, m, 6);
	memcpy(ip, a, 4);
	*port = (uint16_t)(40000 + r);
}

/* The member of session B: 02:00:00:00:02:00, 10.0.1.1, port 41000. */
static inline void
fz_member_b(uint8_t mac[6], uint8_t ip[4], uint16_t *port)
{
	const uint8_t m[6] = {0x02, 0x00, 0x00, 0x00, 0x02, 0x00};
	const uint8_t a[4] = {10, 0, 1, 1};

	memcpy(mac, m, 6);
	memcpy(ip, a, 4);
	*port = 41000;
}

#endif /* CAIS_FUZZ_SETUP_H */
