/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cais.p4: the CAIS switch for a programmable switch (P4_16, v1model, BMv2
 * simple_switch): the same wire protocol (PROTOCOL.md sections 1-3), the
 * same hosts, agents and control plane as cais-switch, in the P4 profile:
 * at most 64 elements per packet, one pipeline pass per packet (no
 * resubmit, no recirculation), at most 32 ranks and 128 slots per session.
 *
 * Data packet, and the CAIS header (every multi-byte field big-endian):
 *
 *   Ethernet II (0x0800) | IPv4, no options | UDP, dst 51733 | CAIS (24 B) | payload
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
 *   |     payload: count x int32 (at most CAIS_ELEMS here) ...      | 24
 *
 * Pipeline (one pass):
 *   parser     Ethernet -> ARP (+ its 18-byte Ethernet padding) | IPv4 ->
 *              UDP (IHL 5) -> CAIS (dst port CAIS_UDP_PORT) -> count
 *              elements (DATA with 1 <= count <= CAIS_ELEMS); extraction
 *              only, every check is in ingress, in cais-switch's order
 *              (dataplane/dp_parse.c, dataplane/dp_pipeline.c)
 *   ingress    classify: frames from the aggregator's MAC, ARP claiming
 *              its IPv4 address, IPv4 from that address -> drop (E5); ARP
 *              for the aggregator -> reply; not to the aggregator MAC -> L2
 *              (mac_tbl, flood on a miss); malformed -> drop; DATA ->
 *              FWD_ONLY, tensor_tbl, member_tbl (address, UDP port, MAC,
 *              switch port: r_bound), dtype (FIXED32 only), count, slot ->
 *              REJECT with the first failed reason; slot/set disagreeing
 *              with seq -> drop; then the slot state machine on the
 *              registers and the 64 accumulators; a retransmission already
 *              counted in the open round -> ACK (E6)
 *   egress     RESULT replicas (multicast group of the session, one per
 *              member, egress_rid = rank) rewritten for their member
 *              (result_member_tbl); REJECT, ACK and unicast RESULT addressed
 *              in ingress; every CAIS answer gets canonical Ethernet/IPv4/UDP
 *              headers from the aggregator, UDP checksum 0 (as cais-switch
 *              writes), and is truncated to its exact length; flood copies
 *              never go back to their ingress port
 *
 * The control plane writes the tables through scripts/cais-p4-config,
 * which turns the JSON requests of cais-switch --config into
 * simple_switch_CLI commands. dataplane/p4/README.md: how to run it, how
 * parity with cais-switch is checked, and what this profile cannot do.
 */
#include <core.p4>
#include <v1model.p4>

/* ---- sizes and constants: every limit of the P4 profile, with its reason ---- */

/*
 * Elements per packet: 64 int32 = 256 B of payload, what one pass of a
 * Tofino pipeline can fold into registers (SwitchML's figure); also the
 * header stack depth and the number of accumulator register operations per
 * pass.
 */
#define CAIS_ELEMS 64
/* Ranks per session: the bitmap of ranks seen is one 32-bit register word. */
#define CAIS_MAX_WORKERS 32
/*
 * Slot capacity of the switch (the sum of all sessions' pools): 2048 slots
 * x 2 sets x 64 accumulators = 262144 32-bit registers (1 MiB of state),
 * the order of a Tofino stage's SRAM and small for BMv2.
 */
#define CAIS_SLOTS 2048
/* Largest pool of one session: 128 slots (the seed's default, a hardware limit here). */
#define CAIS_MAX_POOL 128
/* (slot, set) pairs and accumulators. */
#define CAIS_SLOT_SETS (CAIS_SLOTS * 2)
#define CAIS_ACCS      (CAIS_SLOT_SETS * CAIS_ELEMS)
/* Sessions (one multicast group each) and tensors in the tables. */
#define CAIS_MAX_SESSIONS 1024
#define CAIS_MAX_TENSORS  65536
/* Members: every rank of every session. */
#define CAIS_MAX_MEMBERS (CAIS_MAX_SESSIONS * CAIS_MAX_WORKERS)
/* MAC table: as cais-switch's (DP_L2_ENTRIES). */
#define CAIS_MAC_ENTRIES 4096
/*
 * The CAIS data port. The parser needs it as a constant; build with
 * -DCAIS_UDP_PORT=N where cais-switch runs with --udp-port N.
 */
#ifndef CAIS_UDP_PORT
#define CAIS_UDP_PORT 51733
#endif
/* Multicast group 1 floods; a session's RESULT group is given by the control plane (>= 2). */
#define FLOOD_GRP 1

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP = 0x0806;
const bit<16> CAIS_MAGIC = 0xCA15;
const bit<4> CAIS_VERSION = 1;
const bit<4> TYPE_DATA = 1;
const bit<4> TYPE_RESULT = 2;
const bit<4> TYPE_REJECT = 3;
const bit<4> TYPE_ACK = 4; /* PROTOCOL.md E6 */
const bit<8> F_RETX = 0x01;
const bit<8> F_OVERFLOW = 0x02;
const bit<8> F_CONGESTED = 0x04;
const bit<8> F_FWD_ONLY = 0x08;
const bit<16> R_UNKNOWN_TENSOR = 1;
const bit<16> R_NOT_MEMBER = 2;
const bit<16> R_NO_SLOT = 3;
const bit<16> R_FWD_ONLY = 4;
const bit<16> R_BAD_COUNT = 5;
const bit<16> R_BAD_DTYPE = 6;
const bit<8> RANK_NONE = 0xFF;

/* Reduce operations (tensor_tbl's parameter; as cais-switch's enum dp_op). */
const bit<8> OP_SUM = 0;
const bit<8> OP_AVG = 1; /* aggregated as sum; hosts divide by n */
const bit<8> OP_MAX = 2;
const bit<8> OP_MIN = 3;

/* Slot state (r_state). */
const bit<8> ST_EMPTY = 0;
const bit<8> ST_OPEN = 1;
const bit<8> ST_DONE = 2;

/* What the state machine decided (dataplane/dp_slot.h). */
const bit<8> V_NONE = 0;
const bit<8> V_NEW = 1;
const bit<8> V_ADD = 2;
const bit<8> V_RESEND = 3;
const bit<8> V_DUPLICATE = 4;
const bit<8> V_STALE = 5;
const bit<8> V_INCONSISTENT = 6;

/* What leaves the switch for a packet (meta.out_kind). */
const bit<8> OUT_NONE = 0;
const bit<8> OUT_L2 = 1;
const bit<8> OUT_FLOOD = 2;
const bit<8> OUT_ARP = 3;
const bit<8> OUT_REJECT = 4;
const bit<8> OUT_RESULT_MC = 5; /* to every member, by the session's multicast group */
const bit<8> OUT_RESULT_UC = 6; /* the stored RESULT to the rank that lost it */
const bit<8> OUT_ACK = 7;       /* a retransmission already counted in the open round (E6) */

const bit<16> ETH_MIN_FRAME = 60;
const bit<16> FRAME_HDR_LEN = 42; /* Ethernet + IPv4 + UDP */
const bit<16> CAIS_HDR_LEN = 24;

/* ---- headers ---- */

header ethernet_h {
	bit<48> dst;
	bit<48> src;
	bit<16> ether_type;
}

header arp_h {
	bit<16> htype;
	bit<16> ptype;
	bit<8> hlen;
	bit<8> plen;
	bit<16> oper;
	bit<48> sha;
	bit<32> spa;
	bit<48> tha;
	bit<32> tpa;
}

/* The Ethernet padding after an ARP message in a minimum-size frame: zeroed in replies. */
header arp_pad_h {
	bit<144> pad;
}

header ipv4_h {
	bit<4> version;
	bit<4> ihl;
	bit<8> diffserv;
	bit<16> total_len;
	bit<16> identification;
	bit<3> flags;
	bit<13> frag_offset;
	bit<8> ttl;
	bit<8> protocol;
	bit<16> hdr_checksum;
	bit<32> src;
	bit<32> dst;
}

header udp_h {
	bit<16> src_port;
	bit<16> dst_port;
	bit<16> len;
	bit<16> checksum;
}

header cais_h {
	bit<16> magic;
	bit<4> version;
	bit<4> msg_type;
	bit<8> flags;
	bit<16> tenant;
	bit<16> session;
	bit<32> tensor;
	bit<32> seq;
	bit<1> set_bit;
	bit<15> slot_idx;
	bit<8> rank;
	bit<8> dtype;
	bit<16> count;
	bit<16> reason;
}

header elem_h {
	bit<32> v; /* int32, two's complement */
}

struct headers_t {
	ethernet_h ethernet;
	arp_h arp;
	arp_pad_h arp_pad;
	ipv4_h ipv4;
	udp_h udp;
	cais_h cais;
	elem_h[CAIS_ELEMS] elems;
}

struct meta_t {
	/* the switch's configuration (cais_config) */
	bit<1> agg_enabled;
	bit<48> agg_mac;
	bit<32> agg_ip;
	bit<1> fwd_only;
	bit<32> qdepth_threshold;
	/* parser: elements left to extract */
	bit<16> remaining;
	/* match results */
	bit<8> op;
	bit<8> n;
	bit<32> full_mask;
	bit<16> elems;
	bit<32> pool;
	bit<32> slot_base;
	bit<16> mcast_grp;
	bit<48> m_mac;
	bit<32> m_ip;
	bit<16> m_port;
	bit<32> m_idx; /* the member's index in r_bound */
	/* what goes out */
	bit<8> out_kind;
	bit<8> verdict;
	bit<8> res_flags;
	bit<16> reason;
	bit<16> tenant;
	bit<16> session;
	bit<48> dst_mac;
	bit<32> dst_ip;
	bit<16> dst_port;
	bit<16> cais_len; /* bytes after the UDP header */
	bit<16> out_len;  /* frame length the egress truncates to; 0: as is */
	bit<1> rewrite_ip;
}

/* ---- parser: extraction only ---- */

parser CaisParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
		  inout standard_metadata_t sm)
{
	state start {
		pkt.extract(hdr.ethernet);
		transition select(hdr.ethernet.ether_type) {
			ETHERTYPE_ARP: parse_arp;
			ETHERTYPE_IPV4: parse_ipv4;
			default: accept;
		}
	}

	/*
	 * A frame shorter than 60 bytes ends in a PacketTooShort parser error
	 * here: v1model still runs ingress (with what was extracted; the rest
	 * stays payload), which is what is wanted.
	 */
	state parse_arp {
		pkt.extract(hdr.arp);
		pkt.extract(hdr.arp_pad);
		transition accept;
	}

	state parse_ipv4 {
		pkt.extract(hdr.ipv4);
		transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
			(4w5, 8w17): parse_udp;
			default: accept;
		}
	}

	state parse_udp {
		pkt.extract(hdr.udp);
		transition select(hdr.udp.dst_port) {
			CAIS_UDP_PORT: parse_cais;
			default: accept;
		}
	}

	state parse_cais {
		pkt.extract(hdr.cais);
		meta.remaining = hdr.cais.count;
		transition select(hdr.cais.magic, hdr.cais.version, hdr.cais.msg_type,
				  hdr.cais.count) {
			(CAIS_MAGIC, CAIS_VERSION, TYPE_DATA, 16w0): accept;
			(CAIS_MAGIC, CAIS_VERSION, TYPE_DATA, 16w0 &&& 16w0xFFC0): parse_elem; /* 1..63 */
			(CAIS_MAGIC, CAIS_VERSION, TYPE_DATA, 16w64): parse_elem;
			default: accept;
		}
	}

	state parse_elem {
		pkt.extract(hdr.elems.next);
		meta.remaining = meta.remaining - 1;
		transition select(meta.remaining) {
			16w0: accept;
			default: parse_elem;
		}
	}
}

control CaisVerifyChecksum(inout headers_t hdr, inout meta_t meta)
{
	apply {
		verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
				{hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
				 hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
				 hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
				 hdr.ipv4.src, hdr.ipv4.dst},
				hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
	}
}

/*
 * One accumulator element i of the (slot, set) at acc_base: the register
 * action of the verdict. NEW loads the payload, ADD folds it in (sum
 * saturates with |+| and records OVERFLOW when that differs from the
 * wrapping sum; max/min compare as signed values, by flipping the sign bit
 * and comparing unsigned), RESEND only reads. The element then carries the
 * accumulator, which is the RESULT payload when the round is complete.
 */
#define ACC_ELEM(i)                                                                    \
	if (hdr.elems[i].isValid()) {                                                  \
		r_acc.read(acc, acc_base + i);                                         \
		x = hdr.elems[i].v;                                                    \
		if (meta.verdict == V_NEW) {                                           \
			acc = x;                                                       \
		} else if (meta.verdict == V_ADD) {                                    \
			if (meta.op == OP_MAX) {                                       \
				if ((x ^ 0x80000000) > (acc ^ 0x80000000)) {           \
					acc = x;                                       \
				}                                                      \
			} else if (meta.op == OP_MIN) {                                \
				if ((x ^ 0x80000000) < (acc ^ 0x80000000)) {           \
					acc = x;                                       \
				}                                                      \
			} else if (op_sum == 1) {                                      \
				sat = (int<32>)acc |+| (int<32>)x;                     \
				if (sat != (int<32>)acc + (int<32>)x) {                \
					ovf = 1;                                       \
				}                                                      \
				acc = (bit<32>)sat;                                    \
			}                                                              \
		}                                                                      \
		r_acc.write(acc_base + i, acc);                                        \
		hdr.elems[i].v = acc;                                                  \
	}

control CaisIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm)
{
	/* Slot state per (slot, set), index ((slot_base + slot) * 2 + set). */
	register<bit<32>>(CAIS_SLOT_SETS) r_seq;    /* the round held */
	register<bit<8>>(CAIS_SLOT_SETS) r_state;   /* ST_EMPTY / ST_OPEN / ST_DONE */
	register<bit<16>>(CAIS_SLOT_SETS) r_count;  /* the round's count */
	register<bit<32>>(CAIS_SLOT_SETS) r_tensor; /* the round's tensor */
	register<bit<32>>(CAIS_SLOT_SETS) r_seen;   /* bitmap of ranks counted */
	register<bit<8>>(CAIS_SLOT_SETS) r_ovf;     /* a sum saturated in this round */
	/* The accumulators, index (slot, set) * CAIS_ELEMS + element. */
	register<bit<32>>(CAIS_ACCS) r_acc;
	/*
	 * The switch port each member is bound to (PROTOCOL.md E5), by member
	 * index: 0 unbound, else port + 1. The control plane writes session.add's
	 * "switch_port" here; otherwise the member's first DATA that matches its
	 * address, UDP port and MAC pins the port it came in on.
	 */
	register<bit<16>>(CAIS_MAX_MEMBERS) r_bound;

	action drop() {
		mark_to_drop(sm);
		meta.out_kind = OUT_NONE;
	}

	/* The switch's configuration: the default action, written by the control plane. */
	action set_config(bit<48> agg_mac, bit<32> agg_ip, bit<1> enabled, bit<1> fwd_only,
			  bit<32> qdepth_threshold) {
		meta.agg_mac = agg_mac;
		meta.agg_ip = agg_ip;
		meta.agg_enabled = enabled;
		meta.fwd_only = fwd_only;
		meta.qdepth_threshold = qdepth_threshold;
	}

	table cais_config {
		actions = { set_config; }
		/* no aggregator until configured; CONGESTED above 512 packets as cais-switch */
		default_action = set_config(0, 0, 0, 0, 512);
	}

	action l2_forward(bit<9> port) {
		sm.egress_spec = port;
		meta.out_kind = OUT_L2;
	}

	action l2_flood() {
		sm.mcast_grp = FLOOD_GRP;
		meta.out_kind = OUT_FLOOD;
	}

	/* The MAC table: the control plane fills it; a miss floods. */
	table mac_tbl {
		key = { hdr.ethernet.dst: exact; }
		actions = { l2_forward; l2_flood; }
		default_action = l2_flood();
		size = CAIS_MAC_ENTRIES;
	}

	action set_tensor(bit<8> op) {
		meta.op = op;
	}

	/* (tenant, session, tensor) -> op */
	table tensor_tbl {
		key = {
			hdr.cais.tenant: exact;
			hdr.cais.session: exact;
			hdr.cais.tensor: exact;
		}
		actions = { set_tensor; NoAction; }
		default_action = NoAction();
		size = CAIS_MAX_TENSORS;
	}

	action set_session(bit<8> n, bit<32> full_mask, bit<16> elems, bit<32> pool,
			   bit<32> slot_base, bit<16> mcast_grp) {
		meta.n = n;
		meta.full_mask = full_mask;
		meta.elems = elems;
		meta.pool = pool;
		meta.slot_base = slot_base;
		meta.mcast_grp = mcast_grp;
	}

	/* (tenant, session) -> n, the mask of n ranks, E, pool size, first slot, RESULT group */
	table session_tbl {
		key = {
			hdr.cais.tenant: exact;
			hdr.cais.session: exact;
		}
		actions = { set_session; NoAction; }
		default_action = NoAction();
		size = CAIS_MAX_SESSIONS;
	}

	action set_member(bit<48> mac, bit<32> ip, bit<16> port, bit<32> idx) {
		meta.m_mac = mac;
		meta.m_ip = ip;
		meta.m_port = port;
		meta.m_idx = idx;
	}

	/*
	 * (tenant, session, rank) -> the member's MAC, IPv4 address, UDP port
	 * and its index in r_bound (the control plane numbers the members)
	 */
	table member_tbl {
		key = {
			hdr.cais.tenant: exact;
			hdr.cais.session: exact;
			hdr.cais.rank: exact;
		}
		actions = { set_member; NoAction; }
		default_action = NoAction();
		size = CAIS_MAX_MEMBERS;
	}

	apply {
		bit<1> to_agg = 0;
		bit<1> drop_it = 0;
		bit<1> is_data = 0;
		bit<16> rej_reason = 0;
		bit<1> member_ok = 0;
		bit<16> bound = 0;
		bit<16> here = 0;
		bit<1> op_sum = 0;
		bit<32> g = 0;
		bit<32> acc_base = 0;
		bit<32> h_seq = 0;
		bit<8> h_state = 0;
		bit<16> h_count = 0;
		bit<32> h_tensor = 0;
		bit<32> h_seen = 0;
		bit<8> h_ovf = 0;
		bit<32> rank_bit = 0;
		bit<32> seen = 0;
		bit<32> age = 0;
		bit<32> expect_idx = 0;
		bit<1> expect_set = 0;
		bit<32> acc = 0;
		bit<32> x = 0;
		int<32> sat = 0;
		bit<8> ovf = 0;
		bit<1> complete = 0;

		meta.out_kind = OUT_NONE;
		meta.verdict = V_NONE;
		cais_config.apply();

		/* ---- classify (dp_parse.c) ---- */
		if (!hdr.ethernet.isValid()) {
			drop_it = 1; /* runt */
		} else if (hdr.ethernet.src[40:40] == 1 || hdr.ethernet.src == 0) {
			drop_it = 1; /* multicast or zero source MAC */
		} else if (meta.agg_enabled == 1) {
			if (hdr.ethernet.dst == meta.agg_mac) {
				to_agg = 1;
			}
			/*
			 * The aggregator's addresses are the switch's alone (E5): a frame
			 * from its MAC, ARP whose sender protocol address is its IPv4
			 * address (gratuitous requests and replies alike), IPv4 from its
			 * address are dropped wherever they are addressed.
			 */
			if (hdr.ethernet.src == meta.agg_mac) {
				drop_it = 1;
			} else if (hdr.ethernet.ether_type == ETHERTYPE_ARP) {
				if (hdr.arp.isValid() && hdr.arp.ptype == ETHERTYPE_IPV4 &&
				    hdr.arp.plen == 4 && hdr.arp.spa == meta.agg_ip) {
					drop_it = 1;
				} else if ((to_agg == 1 || hdr.ethernet.dst == 0xFFFFFFFFFFFF) &&
				    hdr.arp.isValid() && hdr.arp.htype == 1 &&
				    hdr.arp.ptype == ETHERTYPE_IPV4 && hdr.arp.hlen == 6 &&
				    hdr.arp.plen == 4 && hdr.arp.oper == 1 &&
				    hdr.arp.tpa == meta.agg_ip && hdr.arp.sha == hdr.ethernet.src) {
					meta.out_kind = OUT_ARP;
				} else if (to_agg == 1) {
					drop_it = 1;
				}
			} else if (hdr.ethernet.ether_type == ETHERTYPE_IPV4 && hdr.ipv4.isValid() &&
				   hdr.ipv4.src == meta.agg_ip) {
				drop_it = 1;
			} else if (to_agg == 1) {
				if (hdr.ethernet.ether_type != ETHERTYPE_IPV4 || !hdr.ipv4.isValid()) {
					drop_it = 1; /* VLAN, other types, truncated IPv4 */
				} else if (hdr.ipv4.version != 4 || hdr.ipv4.ihl != 5) {
					drop_it = 1;
				} else if (hdr.ipv4.total_len < 20 ||
					   (bit<32>)hdr.ipv4.total_len + 14 > sm.packet_length) {
					drop_it = 1;
				} else if (sm.checksum_error == 1) {
					drop_it = 1;
				} else if (hdr.ipv4.dst != meta.agg_ip) {
					drop_it = 1;
				} else if (hdr.ipv4.flags[0:0] == 1 || hdr.ipv4.frag_offset != 0) {
					drop_it = 1; /* MF or an offset: a fragment */
				} else if (hdr.ipv4.protocol != 17 || hdr.ipv4.total_len < 28) {
					drop_it = 1;
				} else if (hdr.udp.len < 8 || hdr.udp.len > hdr.ipv4.total_len - 20) {
					drop_it = 1;
				} else if (hdr.udp.dst_port != CAIS_UDP_PORT) {
					drop_it = 1;
				} else if (hdr.udp.len < 32 || !hdr.cais.isValid()) {
					drop_it = 1; /* shorter than the CAIS header */
				} else if (hdr.cais.magic != CAIS_MAGIC ||
					   hdr.cais.version != CAIS_VERSION ||
					   hdr.cais.msg_type != TYPE_DATA || hdr.cais.flags[7:4] != 0) {
					drop_it = 1; /* also RESULT and REJECT sent to the switch */
				} else {
					is_data = 1;
				}
			}
		}

		/* ---- match and the REJECT checks, in cais-switch's order ---- */
		if (is_data == 1) {
			meta.tenant = hdr.cais.tenant;
			meta.session = hdr.cais.session;
			if (meta.fwd_only == 1) {
				rej_reason = R_FWD_ONLY;
			} else if (!tensor_tbl.apply().hit) {
				rej_reason = R_UNKNOWN_TENSOR;
			} else {
				session_tbl.apply();
				/*
				 * The member of that rank (a rank >= n has no entry): its
				 * IPv4 address and UDP port, its MAC and its switch port
				 * (E5), pinned here by its first DATA unless the control
				 * plane bound it
				 */
				if (member_tbl.apply().hit) {
					if (hdr.ipv4.src == meta.m_ip && hdr.udp.src_port == meta.m_port &&
					    hdr.ethernet.src == meta.m_mac) {
						r_bound.read(bound, meta.m_idx);
						here = (bit<16>)sm.ingress_port + 1;
						if (bound == 0) {
							r_bound.write(meta.m_idx, here);
							member_ok = 1;
						} else if (bound == here) {
							member_ok = 1;
						}
					}
				}
				if (member_ok == 0) {
					rej_reason = R_NOT_MEMBER;
				} else if (hdr.cais.dtype != 0) {
					rej_reason = R_BAD_DTYPE;
				} else if (hdr.cais.count == 0 || hdr.cais.count > meta.elems ||
					   ((bit<32>)hdr.cais.count << 2) >
					       (bit<32>)(hdr.udp.len - 32)) {
					rej_reason = R_BAD_COUNT;
				} else if ((bit<32>)hdr.cais.slot_idx >= meta.pool) {
					rej_reason = R_NO_SLOT;
				} else {
					/* pool is a power of two: index seq mod S, set (seq / S) mod 2 */
					expect_idx = hdr.cais.seq & (meta.pool - 1);
					if ((hdr.cais.seq & meta.pool) != 0) {
						expect_set = 1;
					}
					if (expect_idx != (bit<32>)hdr.cais.slot_idx ||
					    expect_set != hdr.cais.set_bit) {
						drop_it = 1;
						is_data = 0;
					}
				}
			}
			if (rej_reason != 0) {
				is_data = 0;
				meta.reason = rej_reason;
				meta.out_kind = OUT_REJECT;
				meta.dst_mac = hdr.ethernet.src;
				meta.dst_ip = hdr.ipv4.src;
				meta.dst_port = hdr.udp.src_port;
				meta.res_flags = 0;
				if (rej_reason == R_FWD_ONLY) {
					meta.res_flags = F_FWD_ONLY;
				}
				meta.cais_len = CAIS_HDR_LEN;
				sm.egress_spec = sm.ingress_port;
			}
		}

		/* ---- the slot state machine (dp_slot.h) ---- */
		if (is_data == 1) {
			g = ((meta.slot_base + (bit<32>)hdr.cais.slot_idx) << 1) |
			    (bit<32>)hdr.cais.set_bit;
			acc_base = g << 6; /* x CAIS_ELEMS */
			r_seq.read(h_seq, g);
			r_state.read(h_state, g);
			r_count.read(h_count, g);
			r_tensor.read(h_tensor, g);
			r_seen.read(h_seen, g);
			r_ovf.read(h_ovf, g);
			rank_bit = (bit<32>)1 << hdr.cais.rank;
			/* h older than seq, modulo 2^32: (int32)(h - seq) < 0 */
			age = h_seq - hdr.cais.seq;
			if (h_state == ST_EMPTY || age[31:31] == 1) {
				meta.verdict = V_NEW;
				r_seq.write(g, hdr.cais.seq);
				r_tensor.write(g, hdr.cais.tensor);
				r_count.write(g, hdr.cais.count);
				r_seen.write(g, rank_bit);
				r_ovf.write(g, 0);
				h_ovf = 0;
				if (meta.n == 1) {
					r_state.write(g, ST_DONE);
					complete = 1;
				} else {
					r_state.write(g, ST_OPEN);
				}
			} else if (h_seq != hdr.cais.seq) {
				meta.verdict = V_STALE;
			} else if (h_count != hdr.cais.count || h_tensor != hdr.cais.tensor) {
				meta.verdict = V_INCONSISTENT;
			} else if ((h_seen & rank_bit) != 0) {
				if (h_state == ST_DONE) {
					meta.verdict = V_RESEND;
				} else {
					meta.verdict = V_DUPLICATE;
				}
			} else {
				meta.verdict = V_ADD;
				seen = h_seen | rank_bit;
				r_seen.write(g, seen);
				if (seen == meta.full_mask) {
					r_state.write(g, ST_DONE);
					complete = 1;
				}
			}

			if (meta.op == OP_SUM || meta.op == OP_AVG) {
				op_sum = 1;
			}
			if (meta.verdict == V_NEW || meta.verdict == V_ADD ||
			    meta.verdict == V_RESEND) {
				ACC_ELEM(0) ACC_ELEM(1) ACC_ELEM(2) ACC_ELEM(3)
				ACC_ELEM(4) ACC_ELEM(5) ACC_ELEM(6) ACC_ELEM(7)
				ACC_ELEM(8) ACC_ELEM(9) ACC_ELEM(10) ACC_ELEM(11)
				ACC_ELEM(12) ACC_ELEM(13) ACC_ELEM(14) ACC_ELEM(15)
				ACC_ELEM(16) ACC_ELEM(17) ACC_ELEM(18) ACC_ELEM(19)
				ACC_ELEM(20) ACC_ELEM(21) ACC_ELEM(22) ACC_ELEM(23)
				ACC_ELEM(24) ACC_ELEM(25) ACC_ELEM(26) ACC_ELEM(27)
				ACC_ELEM(28) ACC_ELEM(29) ACC_ELEM(30) ACC_ELEM(31)
				ACC_ELEM(32) ACC_ELEM(33) ACC_ELEM(34) ACC_ELEM(35)
				ACC_ELEM(36) ACC_ELEM(37) ACC_ELEM(38) ACC_ELEM(39)
				ACC_ELEM(40) ACC_ELEM(41) ACC_ELEM(42) ACC_ELEM(43)
				ACC_ELEM(44) ACC_ELEM(45) ACC_ELEM(46) ACC_ELEM(47)
				ACC_ELEM(48) ACC_ELEM(49) ACC_ELEM(50) ACC_ELEM(51)
				ACC_ELEM(52) ACC_ELEM(53) ACC_ELEM(54) ACC_ELEM(55)
				ACC_ELEM(56) ACC_ELEM(57) ACC_ELEM(58) ACC_ELEM(59)
				ACC_ELEM(60) ACC_ELEM(61) ACC_ELEM(62) ACC_ELEM(63)
			}
			if (meta.verdict == V_ADD && ovf == 1) {
				r_ovf.write(g, 1);
				h_ovf = 1;
			}

			meta.res_flags = 0;
			if (h_ovf != 0) {
				meta.res_flags = F_OVERFLOW;
			}
			meta.cais_len = CAIS_HDR_LEN + (hdr.cais.count << 2);
			if (complete == 1) {
				meta.out_kind = OUT_RESULT_MC;
				sm.mcast_grp = meta.mcast_grp;
			} else if (meta.verdict == V_RESEND) {
				meta.out_kind = OUT_RESULT_UC;
				meta.dst_mac = meta.m_mac;
				meta.dst_ip = meta.m_ip;
				meta.dst_port = meta.m_port;
				sm.egress_spec = sm.ingress_port;
			} else if (meta.verdict == V_DUPLICATE && (hdr.cais.flags & F_RETX) != 0) {
				/* E6: a retransmission whose contribution is in: ACK to the sender */
				meta.out_kind = OUT_ACK;
				meta.dst_mac = hdr.ethernet.src;
				meta.dst_ip = hdr.ipv4.src;
				meta.dst_port = hdr.udp.src_port;
				meta.res_flags = 0;
				meta.cais_len = CAIS_HDR_LEN;
				sm.egress_spec = sm.ingress_port;
			} else {
				drop_it = 1; /* counted, or a duplicate, stale or inconsistent DATA */
			}
		}

		/* ---- ARP reply: to the asker, from the aggregator, padded with zeros ---- */
		if (meta.out_kind == OUT_ARP) {
			hdr.ethernet.dst = hdr.arp.sha;
			hdr.ethernet.src = meta.agg_mac;
			hdr.arp.oper = 2;
			hdr.arp.tha = hdr.arp.sha;
			hdr.arp.tpa = hdr.arp.spa;
			hdr.arp.sha = meta.agg_mac;
			hdr.arp.spa = meta.agg_ip;
			hdr.arp_pad.setValid();
			hdr.arp_pad.pad = 0;
			meta.out_len = ETH_MIN_FRAME;
			sm.egress_spec = sm.ingress_port;
		}

		/* ---- everything else that is not dropped: L2 ---- */
		if (drop_it == 1) {
			drop();
		} else if (meta.out_kind == OUT_NONE) {
			mac_tbl.apply();
			if (meta.out_kind == OUT_L2 && sm.egress_spec == sm.ingress_port) {
				drop(); /* the destination is behind the ingress port */
			}
		}
	}
}

control CaisEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm)
{
	action drop() {
		mark_to_drop(sm);
	}

	action set_result_dst(bit<48> mac, bit<32> ip, bit<16> port) {
		meta.dst_mac = mac;
		meta.dst_ip = ip;
		meta.dst_port = port;
	}

	/* A RESULT replica -> its member: (tenant, session, egress_rid = rank) -> MAC, IP, port */
	table result_member_tbl {
		key = {
			meta.tenant: exact;
			meta.session: exact;
			sm.egress_rid: exact;
		}
		actions = { set_result_dst; drop; }
		default_action = drop();
		size = CAIS_MAX_MEMBERS;
	}

	apply {
		if (meta.out_kind == OUT_FLOOD && sm.egress_port == sm.ingress_port) {
			drop();
		} else if (meta.out_kind == OUT_REJECT || meta.out_kind == OUT_RESULT_MC ||
			   meta.out_kind == OUT_RESULT_UC || meta.out_kind == OUT_ACK) {
			if (meta.out_kind == OUT_RESULT_MC) {
				result_member_tbl.apply();
			}
			/*
			 * tenant, session, tensor, seq, slot and dtype stay the DATA's:
			 * a REJECT echoes the dtype whatever it is (E1, E4), and only
			 * FIXED32 (dtype 0) reaches a RESULT or an ACK
			 */
			if (meta.out_kind == OUT_REJECT) {
				hdr.cais.msg_type = TYPE_REJECT;
				hdr.cais.count = 0;
				hdr.cais.reason = meta.reason;
				hdr.cais.rank = RANK_NONE;
			} else if (meta.out_kind == OUT_ACK) {
				/* E6: header only, the DATA's rank, CONGESTED as a RESULT's */
				hdr.cais.msg_type = TYPE_ACK;
				hdr.cais.count = 0;
				hdr.cais.reason = 0;
				if ((bit<32>)sm.enq_qdepth > meta.qdepth_threshold) {
					meta.res_flags = meta.res_flags | F_CONGESTED;
				}
			} else {
				hdr.cais.msg_type = TYPE_RESULT;
				hdr.cais.reason = 0;
				hdr.cais.rank = RANK_NONE;
				if ((bit<32>)sm.enq_qdepth > meta.qdepth_threshold) {
					meta.res_flags = meta.res_flags | F_CONGESTED;
				}
			}
			hdr.cais.flags = meta.res_flags;

			hdr.ethernet.dst = meta.dst_mac;
			hdr.ethernet.src = meta.agg_mac;
			hdr.ethernet.ether_type = ETHERTYPE_IPV4;
			hdr.ipv4.version = 4;
			hdr.ipv4.ihl = 5;
			hdr.ipv4.diffserv = 0;
			hdr.ipv4.total_len = 28 + meta.cais_len;
			hdr.ipv4.identification = 0;
			hdr.ipv4.flags = 3w2; /* don't fragment */
			hdr.ipv4.frag_offset = 0;
			hdr.ipv4.ttl = 64;
			hdr.ipv4.protocol = 17;
			hdr.ipv4.src = meta.agg_ip;
			hdr.ipv4.dst = meta.dst_ip;
			hdr.udp.src_port = CAIS_UDP_PORT;
			hdr.udp.dst_port = meta.dst_port;
			hdr.udp.len = 8 + meta.cais_len;
			hdr.udp.checksum = 0; /* allowed for IPv4; what cais-switch writes */
			meta.rewrite_ip = 1;
			meta.out_len = FRAME_HDR_LEN + meta.cais_len;
		}
		/* drop the elements of a REJECT and any Ethernet trailer of the DATA */
		if (meta.out_len != 0) {
			truncate((bit<32>)meta.out_len);
		}
	}
}

control CaisComputeChecksum(inout headers_t hdr, inout meta_t meta)
{
	apply {
		update_checksum(meta.rewrite_ip == 1,
				{hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
				 hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
				 hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
				 hdr.ipv4.src, hdr.ipv4.dst},
				hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
	}
}

control CaisDeparser(packet_out pkt, in headers_t hdr)
{
	apply {
		pkt.emit(hdr.ethernet);
		pkt.emit(hdr.arp);
		pkt.emit(hdr.arp_pad);
		pkt.emit(hdr.ipv4);
		pkt.emit(hdr.udp);
		pkt.emit(hdr.cais);
		pkt.emit(hdr.elems);
	}
}

V1Switch(CaisParser(), CaisVerifyChecksum(), CaisIngress(), CaisEgress(), CaisComputeChecksum(),
	 CaisDeparser()) main;
