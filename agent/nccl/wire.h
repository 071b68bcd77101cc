/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What the plugin's ranks say to each other: the listen handles NCCL carries
 * between them (in its 128 bytes), the first bytes of an ncclNet
 * connection, and the two messages of CollNet's agreement (agree.c). The
 * harness (tests/nccl/) reads these too, to act as a peer.
 *
 * Handles travel only between ranks of one job, which run the same build
 * on the same architecture: host order, except addresses and ports, which
 * are in network order as in a sockaddr_in. The agreement's messages go
 * over TCP: every field big-endian.
 *
 *   ncclNet handle (32 of 128 bytes)       CollNet handle (32 of 128 bytes)
 *    0  magic                                0  magic
 *    4  ip                                   4  ip
 *    8  port | pad                           8  port | agree_port
 *   12  pad2                                12  seq_hint
 *   16  nonce (8)                           16  nonce (8)
 *   24  stage (a pointer: see below)        24  slot | pad, then padding to 32
 */
#ifndef CAIS_NCCL_WIRE_H
#define CAIS_NCCL_WIRE_H

#include <stdint.h>

#define NP_NET_MAGIC   0xCA15AE7Bu
#define NP_COLL_MAGIC  0xCA15C012u /* ..11 was the handle without the agreement port */
#define NP_AGREE_MAGIC 0xCA15A6EEu

/** The ncclNet listen handle. */
struct np_net_handle {
	uint32_t magic;
	uint32_t ip;   /**< the listener's address */
	uint16_t port; /**< and TCP port */
	uint16_t pad;
	uint32_t pad2;
	uint64_t nonce; /**< identifies the listener in the connection's hello */
	/** The connecting side's progress between connect() calls: NCCL hands the
	 * same handle to every call until the connection exists (its own socket
	 * transport keeps its state there too). Zero from the listener. */
	void *stage;
};

/** The first bytes on an ncclNet connection. */
struct np_hello {
	uint32_t magic;
	uint32_t pad;
	uint64_t nonce; /**< the listener's, from the handle */
};

/** The CollNet listen handle. */
struct np_coll_handle {
	uint32_t magic;
	uint32_t ip;	     /**< the rank's data address */
	uint16_t port;	     /**< its data port: UDP to the switch, TCP of libcais's ring */
	uint16_t agree_port; /**< TCP port of its agreement listener (same address) */
	uint32_t seq_hint;   /**< rank 0's is everyone's first seq (static mode) */
	uint64_t nonce;	     /**< rank 0's names the communicator (agreement, managed job) */
	uint16_t slot;	     /**< static mode: which of the host's CollNet communicators
			      * (port CAIS_PORT + slot, session CAIS_SESSION + slot) */
	uint16_t pad;
};

/** A rank's outcome, to collnet rank 0; and rank 0's verdict, to every rank. */
struct np_agree_msg {
	uint32_t magic;
	uint32_t rank; /**< report: the sender's collnet rank; verdict: the rank that failed
			* (UINT32_MAX when none did) */
	int32_t rc;    /**< report: 0 or the sender's -errno; verdict: 0 when every rank
			* succeeded, else the failed rank's -errno (-ETIMEDOUT: it never reported) */
	uint32_t pad;
	uint64_t job; /**< collnet rank 0's nonce: which communicator */
};

#endif /* CAIS_NCCL_WIRE_H */
