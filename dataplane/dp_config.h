/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Every size, limit and default of cais-switch in one place, with the
 * reason for each value. Protocol limits live in include/cais/proto.h.
 */
#ifndef DP_CONFIG_H
#define DP_CONFIG_H

#include <cais/proto.h>

/** Packets per rx burst: DPDK's usual 32 amortises the PMD call without hurting latency. */
#define DP_BURST 32

/**
 * Software prefetch distances of the RX loop, in packets (as DPDK's l3fwd):
 * the mbuf header of packet i + 8 and the frame of packet i + 4 (its first
 * DP_PREFETCH_BYTES, enough for the hardware prefetcher to take over the
 * rest of a payload) are requested while packet i is processed, so the
 * pipeline does not stall on the misses a NIC's DMA leaves it. Measured
 * with bench_pipeline (4/2/512 and 12/6/2048 within noise of these).
 */
#define DP_PREFETCH_MBUF  8
#define DP_PREFETCH_FRAME 4
#define DP_PREFETCH_BYTES 1024

/** Packets a TX buffer holds before it is flushed: a burst of RESULTs (n per round) fits. */
#define DP_TX_BUF 64

/** Ports the switch drives; one byte in the MAC table, far above any server's NIC count. */
#define DP_MAX_PORTS 32

/** RX queues one lcore polls at most (ports x queues spread over lcores). */
#define DP_MAX_RXQ_PER_LCORE 64

/** Descriptors per RX/TX queue: 1024 absorbs a 9000-byte burst of 16 hosts at 10 Gb/s. */
#define DP_RX_DESC 1024
#define DP_TX_DESC 1024

/**
 * mbuf data room: a 9000-byte frame, and af_packet's 16 KiB frame size
 * (framesz=16384) must fit one mbuf, so payloads are never chained on RX.
 */
#define DP_MBUF_DATA 16384

/** mbufs in the packet pool: 8192 x 16.5 KiB = 135 MiB; enough for 32 queues of 128 in flight. */
#define DP_MBUFS 8192

/**
 * Header pool: per RESULT copy (dp_reply.c) one mbuf with the whole frame
 * when its payload is at most DP_RESULT_COPY_MAX bytes, else a header mbuf
 * and an indirect mbuf that shares the one payload; plus flood clones.
 */
#define DP_RESULT_COPY_MAX 1024
#define DP_HDR_MBUF_DATA   (CAIS_FRAME_OVERHEAD + DP_RESULT_COPY_MAX)
#define DP_HDR_MBUFS	 16384

/**
 * Kept DATA (dp_action.c): a round's DATA mbufs wait in its slot until it
 * completes and then carry its RESULTs, one to each sender, so no copy is
 * allocated and no DATA freed. For sessions of at most DP_KEEP_RANKS
 * members without an uplink (E9), DATA payloads of at most
 * DP_RESULT_COPY_MAX bytes (larger RESULTs share one payload, dp_reply.c),
 * and only while the packet pool has at least half of its mbufs free,
 * looked at every DP_KEEP_CHECK polls: rounds that wait for a stalled rank
 * must not leave the RX queues without mbufs.
 */
#define DP_KEEP_RANKS 64
#define DP_KEEP_CHECK 64

/**
 * A leaf (E9) sends a waiting round's partial up again on a local rank's
 * retransmission at most this often: the ranks' timers fire together, one
 * resend serves them all.
 */
#define DP_UPLINK_RESEND_US 1000u

/** Per-lcore mbuf cache: DPDK's recommended size for bursts of 32. */
#define DP_MBUF_CACHE 256

/** Handoff ring per lcore (packets for slots it owns, received elsewhere). */
#define DP_HANDOFF_RING 4096

/**
 * Slot capacity of the switch (sum of all sessions' pools), what admission
 * (slot_usage) counts. A Tofino holds some tens of thousands of 256-byte
 * slots; the software switch is bounded by memory instead (DP_DEFAULT_SLOT_MEM).
 * Settable with --max-slots.
 */
#define DP_DEFAULT_SLOT_CAPACITY 65536u

/**
 * Bytes the slot arrays of all sessions may take (--slot-mem): a session
 * takes S x 2 sets x (E x 8 + 64 + n x 8) bytes (the n x 8 of kept DATA
 * pointers only where DP_KEEP_* applies), allocated and zeroed by session.add,
 * so the slot count alone lets one request take gigabytes (S 32768 at E 2048
 * is 1 GiB). 512 MiB holds 16 sessions of S 1024 at E 2048 (32 MiB each),
 * far more than a switch's ports feed at once, and leaves the mbuf pools
 * (about 140 MiB) and the host room.
 */
#define DP_DEFAULT_SLOT_MEM (512ull << 20)

/** Sessions and tensors in the tables (rte_hash sizes). */
#define DP_MAX_SESSIONS 1024u
#define DP_MAX_TENSORS	65536u

/** MAC table: 4096 entries, 4-way probing; ageing as Linux bridges (300 s). */
#define DP_L2_ENTRIES	    4096u
#define DP_L2_WAYS	    4u
#define DP_L2_DEFAULT_AGE_S 300u

/**
 * REJECT rate limit (docs/PROTOCOL.md 1 and E1): every REJECT while a sender
 * provokes fewer than 10 per second, never more than 100 per second to one
 * sender. A token bucket per sender of DP_RL_PER_SECOND / 2 of burst, refilled
 * at DP_RL_PER_SECOND / 2 per second; DP_RL_ENTRIES buckets per lcore, shared
 * by the senders that hash to one.
 */
#define DP_RL_PER_SECOND 100u
#define DP_RL_ENTRIES	 1024u

/**
 * ACK budget (docs/PROTOCOL.md E6), per sender, in buckets of its own: an
 * ACK answers a retransmission of a verified member, is smaller than the
 * DATA it answers (no amplification) and goes only to that member, so the
 * bound is only against a runaway sender; it must stay above what the
 * agents' own timers send under heavy loss (8 ranks at 5% loss both ways
 * retransmitted a few hundred DATA a second per rank). Burst half of it.
 */
#define DP_ACK_PER_SECOND 4000u

/**
 * WAIT (docs/PROTOCOL.md E11, dp_action.c): a completing round looks at
 * most this many rounds back for open ones; beyond, its RESULTs carry no
 * WAIT. Stalls behind one lost DATA spanned up to ~55 rounds at 8 ranks
 * and 5% loss on the testbed.
 */
#define DP_WAIT_SCAN 256u

/**
 * NACKs of one open round (E11) go at most this often: a rank that is not
 * scheduled reads them all at once when it runs, and one is enough. The
 * agent's default timer, within which it ignores a NACK of a chunk it just
 * sent again (agent/window.c handle_nack()).
 */
#define DP_NACK_GAP_US 500u

/**
 * Default thresholds (thresholds.set changes them): session.add is refused
 * beyond this share of the slot capacity (all of it), and RESULTs carry
 * CONGESTED while more packets than this wait for an lcore (half its RX ring).
 */
#define DP_DEFAULT_SLOT_USAGE  1.0
#define DP_DEFAULT_QUEUE_DEPTH 512u

/**
 * Priority classes: RESULTs of high-priority sessions leave first, and this
 * share (%) of each TX buffer is theirs alone (normal traffic flushes when it
 * has used the rest). --high-share sets it, up to DP_MAX_HIGH_SHARE so that
 * normal traffic keeps some room.
 */
#define DP_DEFAULT_HIGH_SHARE 30u
#define DP_MAX_HIGH_SHARE     90u

/**
 * Idle-aware polling (as DPDK's l3fwd-power; --idle-sleep-us): an lcore
 * whose queues stayed empty for DP_IDLE_SPIN polls in a row sleeps, 1 us at
 * first, doubling per empty poll up to the configured bound, so a packet
 * that arrives while it sleeps waits at most that long (plus the
 * scheduler's wake-up). 100 us: below a round's usual completion time on a
 * shared machine (hundreds of us), a 1000th of a second of CPU per sleep
 * otherwise; 0 keeps pure busy polling for dedicated cores. 256 empty polls
 * are some tens of us of spinning: bursts a few us apart never sleep.
 */
#define DP_DEFAULT_IDLE_SLEEP_US 100u
#define DP_MAX_IDLE_SLEEP_US	 10000u
#define DP_IDLE_SPIN		 256u

/** RX occupancy is read from PMDs that report it every this many polls. */
#define DP_QDEPTH_EVERY 8u

/** Data lcore 0 runs the periodic hook (stats, lease) this often. */
#define DP_PERIODIC_US 10000u

/** Default MTU requested of devices that accept it (jumbo frames for E=2048). */
#define DP_DEFAULT_MTU 9000u

/** Why a table operation refused, in one line: as long as a control reply's message. */
#define DP_ERR_MSG 256

#endif /* DP_CONFIG_H */
