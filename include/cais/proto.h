/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The CAIS wire format, version 1: PROTOCOL.md sections 1-3 as code.
 *
 * Shared by the switch (dataplane/), the host agent (agent/) and the tests.
 * Depends only on libc, so hosts never link DPDK.
 *
 * A data packet:
 *
 *   Ethernet II (0x0800) | IPv4, no options | UDP, dst 51733 | CAIS (24 B) | payload
 *
 * The CAIS header, every multi-byte field big-endian:
 *
 *    0                   1                   2                   3
 *    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *   +-------------------------------+-------+-------+---------------+
 *   |         magic 0xCA15          |  ver  | type  |     flags     |  0
 *   +-------------------------------+-------+-------+---------------+
 *   |            tenant             |            session            |  4
 *   +-------------------------------+-------------------------------+
 *   |                            tensor                             |  8
 *   +---------------------------------------------------------------+
 *   |                              seq                              | 12
 *   +-+-----------------------------+---------------+---------------+
 *   |S|      slot index (15)        |     rank      |     dtype     | 16
 *   +-+-----------------------------+---------------+---------------+
 *   |             count             |            reason             | 20
 *   +-------------------------------+-------------------------------+
 *   |              payload: count x int32, big-endian ...           | 24
 *
 * S is the set bit (shadow copy 0/1).
 *
 * Reliability (section 3): a session numbers its chunks by seq (mod 2^32).
 * Chunk seq lives in slot (seq mod S), set ((seq / S) mod 2) of the
 * session's pool of S slots, S a power of two. A host keeps at most S chunks
 * in flight, so the first DATA of a newer seq on a (slot, set) starts a new
 * round. The switch keeps per (slot, set): the seq held, the accumulator,
 * the bitmap of ranks seen, completion and the OVERFLOW bit.
 *
 * Sum is exact and order-independent: the switch adds in 64 bits and
 * saturates once, when the round completes; OVERFLOW is set exactly when an
 * element of the true sum lies outside int32 (the payload then carries
 * INT32_MIN/INT32_MAX for it). Results never depend on arrival order.
 */
#ifndef CAIS_PROTO_H
#define CAIS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Big-endian (network order) field types; documentation only, like rte_be16_t. */
typedef uint16_t cais_be16_t;
typedef uint32_t cais_be32_t;

#define CAIS_MAGIC	    0xCA15u /**< first two bytes of every CAIS header */
#define CAIS_VERSION	    1u	    /**< protocol version in the high nibble of ver_type */
#define CAIS_UDP_PORT	    51733u  /**< default data port (0xCA15) */
#define CAIS_CTL_PORT	    51734u  /**< default control endpoint port (cais-switch) */
#define CAIS_MGR_PORT	    51735u  /**< default control port of cais-manager */
#define CAIS_HDR_LEN	    24u	    /**< size of struct cais_hdr */
#define CAIS_RANK_NONE	    0xFFu   /**< rank field of RESULT and REJECT */
#define CAIS_MAX_WORLD	    255u    /**< world size n: 1..255 (rank 0xFF is reserved) */
#define CAIS_MAX_SLOTS	    32768u  /**< pool size S: power of two 1..32768 (15-bit index) */
#define CAIS_SET_BIT	    0x8000u /**< set bit in the slot field */
#define CAIS_SLOT_MASK	    0x7FFFu /**< slot index bits in the slot field */
#define CAIS_ELEM_SIZE	    4u	    /**< bytes per payload element (FIXED32) */
/** Largest elems_per_packet: 2048 x 4 B fit a 9000-byte MTU with IPv4/UDP/CAIS headers. */
#define CAIS_MAX_ELEMS	    2048u
/** Elements per packet of the P4 (hardware) profile. */
#define CAIS_P4_ELEMS	    64u
#define CAIS_ETH_HLEN	    14u /**< Ethernet II header, no VLAN tag */
#define CAIS_IP_HLEN	    20u /**< IPv4 header, no options */
#define CAIS_UDP_HLEN	    8u	/**< UDP header */
/** Offset of the CAIS header in a frame: fixed because options and tags are not allowed. */
#define CAIS_FRAME_HDR_OFF  (CAIS_ETH_HLEN + CAIS_IP_HLEN + CAIS_UDP_HLEN)
/** Frame bytes before the payload. */
#define CAIS_FRAME_OVERHEAD (CAIS_FRAME_HDR_OFF + CAIS_HDR_LEN)

/** Message types (low nibble of ver_type): X(name, value, text). */
#define CAIS_TYPES(X)                                                                              \
	X(DATA, 1, "data")                                                                         \
	X(RESULT, 2, "result")                                                                     \
	X(REJECT, 3, "reject")                                                                     \
	X(ACK, 4, "ack")                                                                           \
	X(NACK, 5, "nack")

/**
 * Header flags: X(name, bit value, text). WAIT is a RESULT's only
 * (docs/PROTOCOL.md E11), QUERY a DATA's only (E12: a header-only DATA
 * that asks whether the sender's DATA of its seq is in).
 */
#define CAIS_FLAGS(X)                                                                              \
	X(RETX, 0x01, "retx")                                                                      \
	X(OVERFLOW, 0x02, "overflow")                                                              \
	X(CONGESTED, 0x04, "congested")                                                            \
	X(FWD_ONLY, 0x08, "fwd_only")                                                              \
	X(WAIT, 0x10, "wait")                                                                      \
	X(QUERY, 0x20, "query")

/** REJECT reason codes: X(name, value, text). */
#define CAIS_REASONS(X)                                                                            \
	X(UNKNOWN_TENSOR, 1, "unknown_tensor")                                                     \
	X(NOT_MEMBER, 2, "not_member")                                                             \
	X(NO_SLOT, 3, "no_slot")                                                                   \
	X(FWD_ONLY, 4, "fwd_only")                                                                 \
	X(BAD_COUNT, 5, "bad_count")                                                               \
	X(BAD_DTYPE, 6, "bad_dtype")

/**
 * Payload element types on the wire (the dtype field): X(name, value, text).
 * FIXED32: count x int32. BLOCK16: blocks of CAIS_B16_BLOCK elements, each a
 * power-of-two exponent byte and 16-bit integers (cais_payload_bytes()).
 */
#define CAIS_DTYPES(X)                                                                             \
	X(FIXED32, 0, "fixed32")                                                                   \
	X(BLOCK16, 1, "block16")

/**
 * BLOCK16 (docs/PROTOCOL.md E4): element i stands for m_i x 2^e_b units of
 * the tensor's accumulator, m_i a 16-bit integer in -32767..32767 and e_b
 * the exponent of its block b = i / CAIS_B16_BLOCK. The payload is the
 * exponent bytes of the ceil(count / 32) blocks, padded with zeros to a
 * multiple of 4, then the count m_i, big-endian.
 */
#define CAIS_B16_BLOCK	   32u
/** Largest exponent of a DATA block: 255 contributions of 2^15 x 2^40 sum below 2^63. */
#define CAIS_B16_EMAX_DATA 40u
/** Largest exponent of a RESULT block: the sums' 63 bits in 16. */
#define CAIS_B16_EMAX	   48u
/** Largest |m_i| (the range is symmetric). */
#define CAIS_B16_MMAX	   32767
/**
 * log2 of the scale of a BLOCK16 tensor nobody measured: 2^24 keeps values up
 * to 2^30 in range (max |x| x scale below 2^55) and resolves 2^-24.
 */
#define CAIS_B16_DEFAULT_SCALE_EXP 24

/**
 * Reduce operations of a tensor entry (section 2): X(name, value, text).
 * The switch aggregates avg as sum; hosts divide by n. The same values in
 * the agent's API (cais.h), the control requests and the switch's tables.
 */
#define CAIS_REDOPS(X)                                                                             \
	X(SUM, 0, "sum")                                                                           \
	X(AVG, 1, "avg")                                                                           \
	X(MAX, 2, "max")                                                                           \
	X(MIN, 3, "min")

/** Outcome of cais_hdr_check(): X(name, text). OK first. */
#define CAIS_HDR_CHECKS(X)                                                                         \
	X(OK, "ok")                                                                                \
	X(SHORT, "shorter than the 24-byte header")                                                \
	X(BAD_MAGIC, "magic is not 0xCA15")                                                        \
	X(BAD_VERSION, "version is not 1")                                                         \
	X(BAD_TYPE, "type is not DATA, RESULT, REJECT, ACK or NACK")                               \
	X(BAD_FLAGS, "reserved flag bits set")

#define CAIS_X_ENUM(name, val, text) CAIS_TYPE_##name = val,
enum cais_type { CAIS_TYPES(CAIS_X_ENUM) };
#undef CAIS_X_ENUM
#define CAIS_X_ENUM(name, val, text) CAIS_F_##name = val,
enum cais_flag { CAIS_FLAGS(CAIS_X_ENUM) };
#undef CAIS_X_ENUM
#define CAIS_X_ENUM(name, val, text) CAIS_R_##name = val,
enum cais_reason { CAIS_R_NONE = 0, CAIS_REASONS(CAIS_X_ENUM) CAIS_R_MAX };
#undef CAIS_X_ENUM
#define CAIS_X_ENUM(name, val, text) CAIS_DT_##name = val,
enum cais_wire_dtype { CAIS_DTYPES(CAIS_X_ENUM) CAIS_DT_COUNT };
#undef CAIS_X_ENUM
/**
 * PARTIAL64 (docs/PROTOCOL.md E9): count x int64, big-endian, the exact
 * partial sums a leaf switch sends up to its spine. Switch to switch only:
 * no tensor's wire dtype, and no host sends or receives it.
 */
#define CAIS_DT_PARTIAL64	     2u
/** Largest elems_per_packet of a session with an uplink: 8 KiB of PARTIAL64 fit 9000 bytes. */
#define CAIS_UPLINK_MAX_ELEMS	     1024u
#define CAIS_X_ENUM(name, val, text) CAIS_OP_##name = val,
enum cais_redop { CAIS_REDOPS(CAIS_X_ENUM) CAIS_OP_COUNT };
#undef CAIS_X_ENUM
#define CAIS_X_ENUM(name, text) CAIS_HDR_##name,
enum cais_hdr_check { CAIS_HDR_CHECKS(CAIS_X_ENUM) CAIS_HDR_CHECK_MAX };
#undef CAIS_X_ENUM

/** Every defined flag bit; the others must be 0. */
#define CAIS_X_OR(name, val, text) | (val)
enum { CAIS_FLAGS_ALL = 0 CAIS_FLAGS(CAIS_X_OR) };
#undef CAIS_X_OR

/** The 24-byte CAIS header. Multi-byte fields are big-endian. */
struct __attribute__((packed)) cais_hdr {
	cais_be16_t magic;   /**< CAIS_MAGIC */
	uint8_t ver_type;    /**< version (high nibble) << 4 | type (low nibble) */
	uint8_t flags;	     /**< CAIS_F_* bits */
	cais_be16_t tenant;  /**< tenant id, unique in the cluster */
	cais_be16_t session; /**< session id, unique within the tenant */
	cais_be32_t tensor;  /**< tensor id, registered in the tensor table */
	cais_be32_t seq;     /**< chunk sequence number within the session, mod 2^32 */
	cais_be16_t slot;    /**< bit 15: set; bits 0..14: slot index in the pool */
	uint8_t rank;	     /**< sender's rank (DATA); CAIS_RANK_NONE otherwise */
	uint8_t dtype;	     /**< payload element type, CAIS_DT_FIXED32 */
	cais_be16_t count;   /**< payload elements, 1..elems_per_packet (0 on REJECT) */
	cais_be16_t reason;  /**< CAIS_R_* on REJECT; lanes on RESULT (E11); 0 otherwise */
};

_Static_assert(sizeof(struct cais_hdr) == CAIS_HDR_LEN, "CAIS header is 24 bytes");
_Static_assert(offsetof(struct cais_hdr, magic) == 0, "magic at 0");
_Static_assert(offsetof(struct cais_hdr, ver_type) == 2, "ver_type at 2");
_Static_assert(offsetof(struct cais_hdr, flags) == 3, "flags at 3");
_Static_assert(offsetof(struct cais_hdr, tenant) == 4, "tenant at 4");
_Static_assert(offsetof(struct cais_hdr, session) == 6, "session at 6");
_Static_assert(offsetof(struct cais_hdr, tensor) == 8, "tensor at 8");
_Static_assert(offsetof(struct cais_hdr, seq) == 12, "seq at 12");
_Static_assert(offsetof(struct cais_hdr, slot) == 16, "slot at 16");
_Static_assert(offsetof(struct cais_hdr, rank) == 18, "rank at 18");
_Static_assert(offsetof(struct cais_hdr, dtype) == 19, "dtype at 19");
_Static_assert(offsetof(struct cais_hdr, count) == 20, "count at 20");
_Static_assert(offsetof(struct cais_hdr, reason) == 22, "reason at 22");

/** Host-order view of a header, for building and tests. */
struct cais_fields {
	uint8_t type;
	uint8_t flags;
	uint16_t tenant;
	uint16_t session;
	uint32_t tensor;
	uint32_t seq;
	uint16_t slot; /**< index, 0..32767 */
	uint8_t set;   /**< 0 or 1 */
	uint8_t rank;
	uint8_t dtype;
	uint16_t count;
	uint16_t reason;
};

/** @return the name of a type, "?" if undefined. */
static inline const char *
cais_type_name(unsigned int type)
{
#define CAIS_X_CASE(name, val, text)                                                               \
	case val:                                                                                  \
		return text;
	switch (type) {
		CAIS_TYPES(CAIS_X_CASE) default : return "?";
	}
#undef CAIS_X_CASE
}

/** @return the name of a REJECT reason, "none" for 0, "?" if undefined. */
static inline const char *
cais_reason_name(unsigned int reason)
{
#define CAIS_X_CASE(name, val, text)                                                               \
	case val:                                                                                  \
		return text;
	switch (reason) {
	case 0:
		return "none";
		CAIS_REASONS(CAIS_X_CASE)
	default:
		return "?";
	}
#undef CAIS_X_CASE
}

/** @return the name of one flag bit, "?" if undefined. */
static inline const char *
cais_flag_name(unsigned int flag)
{
#define CAIS_X_CASE(name, val, text)                                                               \
	case val:                                                                                  \
		return text;
	switch (flag) {
		CAIS_FLAGS(CAIS_X_CASE) default : return "?";
	}
#undef CAIS_X_CASE
}

/** @return the name of a wire dtype ("fixed32", "block16"), "?" if undefined. */
static inline const char *
cais_dtype_name(unsigned int dtype)
{
#define CAIS_X_CASE(name, val, text)                                                               \
	case val:                                                                                  \
		return text;
	switch (dtype) {
		CAIS_DTYPES(CAIS_X_CASE) default : return "?";
	}
#undef CAIS_X_CASE
}

/** @return the wire dtype named s, or -1. */
static inline int
cais_dtype_parse(const char *s)
{
	for (unsigned int dt = 0; dt < CAIS_DT_COUNT; dt++)
		if (s && strcmp(s, cais_dtype_name(dt)) == 0)
			return (int)dt;
	return -1;
}

/** @return the bytes of BLOCK16's exponent area for count elements (a multiple of 4). */
static inline uint32_t
cais_b16_exp_bytes(uint32_t count)
{
	return ((count + CAIS_B16_BLOCK - 1) / CAIS_B16_BLOCK + 3u) & ~3u;
}

/** @return the payload bytes of count elements of a wire dtype (0 for an unknown one). */
static inline uint32_t
cais_payload_bytes(unsigned int dtype, uint32_t count)
{
	switch (dtype) {
	case CAIS_DT_FIXED32:
		return count * CAIS_ELEM_SIZE;
	case CAIS_DT_BLOCK16:
		return cais_b16_exp_bytes(count) + 2u * count;
	case CAIS_DT_PARTIAL64:
		return 8u * count;
	default:
		return 0;
	}
}

/** @return the name of a reduce operation ("sum", ...), "?" if undefined. */
static inline const char *
cais_op_name(unsigned int op)
{
#define CAIS_X_CASE(name, val, text)                                                               \
	case val:                                                                                  \
		return text;
	switch (op) {
		CAIS_REDOPS(CAIS_X_CASE) default : return "?";
	}
#undef CAIS_X_CASE
}

/** @return the reduce operation named s ("sum", ...), or -1. */
static inline int
cais_op_parse(const char *s)
{
	for (unsigned int op = 0; op < CAIS_OP_COUNT; op++)
		if (s && strcmp(s, cais_op_name(op)) == 0)
			return (int)op;
	return -1;
}

/** @return the text of a cais_hdr_check() outcome. */
static inline const char *
cais_hdr_check_name(enum cais_hdr_check c)
{
#define CAIS_X_TEXT(name, text) text,
	static const char *const names[] = {CAIS_HDR_CHECKS(CAIS_X_TEXT)};
#undef CAIS_X_TEXT
	return (unsigned int)c < CAIS_HDR_CHECK_MAX ? names[c] : "?";
}

/** Serial-number comparison (RFC 1982 style): is a older than b? */
static inline bool
cais_seq_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/** @return true when s is a power of two in 1..CAIS_MAX_SLOTS. */
static inline bool
cais_pool_size_ok(uint32_t s)
{
	return s >= 1 && s <= CAIS_MAX_SLOTS && (s & (s - 1)) == 0;
}

/**
 * The slot field (set bit and index) that chunk seq must carry in a pool
 * of S slots (S a power of two): index seq mod S, set (seq / S) mod 2,
 * which for a power of two is the bit of seq that S is (no divide: the
 * switch computes this for every DATA).
 */
static inline uint16_t
cais_slot_field(uint32_t seq, uint32_t pool)
{
	uint32_t index = seq & (pool - 1);
	return (uint16_t)(index | ((seq & pool) ? CAIS_SET_BIT : 0));
}

/**
 * The lane of chunk seq in a pool of S slots on a switch of `lanes` data
 * lcores (docs/PROTOCOL.md E11: the reason field of a RESULT in a
 * loss_hints session; 0 and 1 mean one): slot index mod lanes, the lcore
 * whose rounds the RESULTs of that lane speak of.
 */
static inline unsigned int
cais_lane(uint32_t seq, uint32_t pool, unsigned int lanes)
{
	uint32_t index = seq & (pool - 1);

	if (lanes <= 1)
		return 0;
	return (lanes & (lanes - 1)) == 0 ? index & (lanes - 1) : index % lanes;
}

/** @return the type in a header (low nibble of ver_type). */
static inline unsigned int
cais_hdr_type(const struct cais_hdr *h)
{
	return h->ver_type & 0x0Fu;
}

/**
 * Check the fixed fields of a header that arrived in len bytes: length,
 * magic, version, type, reserved flags. Does not look at the payload.
 * @return CAIS_HDR_OK or the first failed check.
 */
static inline enum cais_hdr_check
cais_hdr_check(const void *buf, size_t len)
{
	const struct cais_hdr *h = (const struct cais_hdr *)buf;
	unsigned int type;

	if (len < CAIS_HDR_LEN)
		return CAIS_HDR_SHORT;
	if (ntohs(h->magic) != CAIS_MAGIC)
		return CAIS_HDR_BAD_MAGIC;
	if ((h->ver_type >> 4) != CAIS_VERSION)
		return CAIS_HDR_BAD_VERSION;
	type = cais_hdr_type(h);
	if (type < CAIS_TYPE_DATA || type > CAIS_TYPE_NACK)
		return CAIS_HDR_BAD_TYPE;
	/* WAIT is a RESULT's only (docs/PROTOCOL.md E11), QUERY a DATA's (E12) */
	if (h->flags & ~(CAIS_FLAGS_ALL & ~(type == CAIS_TYPE_RESULT ? 0u : CAIS_F_WAIT) &
			 ~(type == CAIS_TYPE_DATA ? 0u : CAIS_F_QUERY)))
		return CAIS_HDR_BAD_FLAGS;
	return CAIS_HDR_OK;
}

/** Write a header from host-order fields. */
static inline void
cais_hdr_build(struct cais_hdr *h, const struct cais_fields *f)
{
	h->magic = htons(CAIS_MAGIC);
	h->ver_type = (uint8_t)((CAIS_VERSION << 4) | (f->type & 0x0Fu));
	h->flags = f->flags;
	h->tenant = htons(f->tenant);
	h->session = htons(f->session);
	h->tensor = htonl(f->tensor);
	h->seq = htonl(f->seq);
	h->slot = htons((uint16_t)((f->slot & CAIS_SLOT_MASK) | (f->set ? CAIS_SET_BIT : 0)));
	h->rank = f->rank;
	h->dtype = f->dtype;
	h->count = htons(f->count);
	h->reason = htons(f->reason);
}

/** Read a header into host-order fields (no checks; see cais_hdr_check()). */
static inline void
cais_hdr_read(const struct cais_hdr *h, struct cais_fields *f)
{
	uint16_t slot = ntohs(h->slot);

	f->type = (uint8_t)cais_hdr_type(h);
	f->flags = h->flags;
	f->tenant = ntohs(h->tenant);
	f->session = ntohs(h->session);
	f->tensor = ntohl(h->tensor);
	f->seq = ntohl(h->seq);
	f->slot = slot & CAIS_SLOT_MASK;
	f->set = (slot & CAIS_SET_BIT) ? 1 : 0;
	f->rank = h->rank;
	f->dtype = h->dtype;
	f->count = ntohs(h->count);
	f->reason = ntohs(h->reason);
}

/**
 * Fill the fields of DATA chunk seq from rank for a pool of S slots: slot
 * and set derived from seq as section 3 requires.
 */
static inline void
cais_data_fields(struct cais_fields *f, uint16_t tenant, uint16_t session, uint32_t tensor,
		 uint32_t seq, uint32_t pool, uint8_t rank, uint16_t count)
{
	uint16_t sf = cais_slot_field(seq, pool);

	memset(f, 0, sizeof(*f));
	f->type = CAIS_TYPE_DATA;
	f->tenant = tenant;
	f->session = session;
	f->tensor = tensor;
	f->seq = seq;
	f->slot = sf & CAIS_SLOT_MASK;
	f->set = (sf & CAIS_SET_BIT) ? 1 : 0;
	f->rank = rank;
	f->dtype = CAIS_DT_FIXED32;
	f->count = count;
}

#ifdef __cplusplus
}
#endif

#endif /* CAIS_PROTO_H */
