/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: the switch's parser and pipeline on arbitrary frames.
 *
 * An input is a sequence of frames (fuzz_setup.h), so that slot state,
 * MAC learning and the REJECT limiter carry from one frame to the next
 * within an input; every input starts from the same state. Each frame
 * goes through dp_parse() on an exact-size heap copy (ASan catches a read
 * past it; the outcome is checked against the documented rules, restated
 * independently in ref_class()), then through the pipeline in bursts
 * (dp_lcore_input + dp_lcore_flush on lcore 0, then the handoffs on
 * lcore 1). A reference model of PROTOCOL.md 1-3 and E4 (REJECT checks in
 * order, the slot/set/seq state machine, sum/max/min with saturation, the
 * BLOCK16 payloads by tests/common/b16.h, lost-RESULT resends) predicts
 * every frame the switch must send. The TX hook checks
 * that each frame sent is well formed (Ethernet/IPv4/UDP lengths and
 * checksum, CAIS header, RESULT count <= elems_per_packet, never to a
 * group address) and is one the model expects (an input frame forwarded
 * unchanged, an ARP reply, a REJECT with the right reason and echo, dtype
 * included, a RESULT with the right dtype, payload and flags to a member),
 * and abort()s
 * otherwise; after each input every expected frame must have been sent
 * (REJECTs beyond a sender's burst may be rate limited) and every mbuf
 * must be back in its pool, but for the DATA that open rounds keep for
 * their RESULTs (DP_KEEP_*).
 *
 * Built only with clang: -fsanitize=fuzzer,address,undefined, the dataplane
 * sources compiled into the target (tests/fuzz/meson.build).
 *
 * Environment: CAIS_FUZZ_VERBOSE=1 prints, per input, what the model
 * expected and how much of it was sent.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dp_ctl.h"
#include "dp_switch.h"
#include "fuzz_setup.h"
#include "../common/b16.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define IN_MBUFS  128u
#define HDR_MBUFS 1024u

static struct dp_switch *sw;
static struct rte_mempool *in_pool;
static uint32_t agg_ip; /* network order */
static uint64_t l2_age;

/* The frames of the current input, for matching L2 output and answers. */
struct in_frame {
	const uint8_t *data; /* in the fuzz input */
	uint32_t len;
	uint16_t port;
	bool multiseg;
	enum dp_class cls;
	bool learns; /* ref_learns() */
};
static struct in_frame frames[FZ_MAX_FRAMES];
static unsigned int n_frames;
static bool toggle_tensor_present;
/* the wire dtype of FZ_TOGGLE_TENSOR, the last time it was added */
static uint8_t toggle_tensor_wire;
static bool verbose; /* CAIS_FUZZ_VERBOSE=1: what each input made the switch send */

/* ---- helpers ---- */

static inline uint16_t
rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void
hexdump(const char *what, const uint8_t *p, uint32_t len)
{
	fprintf(stderr, "%s (%u bytes):", what, len);
	for (uint32_t i = 0; i < len && i < 128; i++)
		fprintf(stderr, "%s%02x", i % 16 ? " " : "\n  ", p[i]);
	fprintf(stderr, "\n");
}

#define VIOLATION(...)                                                                             \
	do {                                                                                       \
		fprintf(stderr, "fuzz_pipeline: " __VA_ARGS__);                                    \
		fprintf(stderr, "\n");                                                             \
		abort();                                                                           \
	} while (0)

/* ---- the documented parser outcomes, restated (dp_parse.h, PROTOCOL.md 1) ---- */

/*
 * The aggregator's addresses are the switch's alone (PROTOCOL.md E5): a
 * frame from its MAC, ARP with its address as the sender's, IPv4 from it.
 */
static bool
ref_forged(const uint8_t *f, uint32_t len, const struct dp_parse_cfg *c)
{
	if (memcmp(f + 6, c->agg_mac, 6) == 0)
		return true;
	if (rd16(f + 12) == 0x0806 && len >= 14 + 28 && rd16(f + 16) == 0x0800 && f[19] == 4 &&
	    memcmp(f + 28, &c->agg_ip, 4) == 0)
		return true;
	return rd16(f + 12) == 0x0800 && len >= 34 && memcmp(f + 26, &c->agg_ip, 4) == 0;
}

/* Whether the switch learns the frame's source MAC: a full header, a station's, not forged. */
static bool
ref_learns(const uint8_t *f, uint32_t len, const struct dp_parse_cfg *c)
{
	if (len < 14 || (f[6] & 1) || !(f[6] | f[7] | f[8] | f[9] | f[10] | f[11]))
		return false;
	return !c->agg_enabled || !ref_forged(f, len, c);
}

static enum dp_class
ref_class(const uint8_t *f, uint32_t len, const struct dp_parse_cfg *c)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	bool to_agg, bc;
	uint32_t ip_len, udp_len;
	const uint8_t *ip, *udp, *h;

	if (len < 14)
		return DP_CLASS_DROP;
	/* no station sends from a group or all-zero MAC: dropped, never answered */
	if ((f[6] & 1) || !(f[6] | f[7] | f[8] | f[9] | f[10] | f[11]))
		return DP_CLASS_DROP;
	if (!c->agg_enabled)
		return DP_CLASS_L2;
	if (ref_forged(f, len, c))
		return DP_CLASS_DROP;
	to_agg = memcmp(f, c->agg_mac, 6) == 0;
	bc = memcmp(f, bcast, 6) == 0;
	if (rd16(f + 12) == 0x0806) {
		const uint8_t *a = f + 14;
		bool req =
		    len >= 14 + 28 && rd16(a) == 1 && rd16(a + 2) == 0x0800 && a[4] == 6 &&
		    a[5] == 4 && rd16(a + 6) == 1 && memcmp(a + 24, &c->agg_ip, 4) == 0 &&
		    memcmp(a + 8, f + 6, 6) == 0; /* the reply goes to the sender: its own MAC */

		if (req && (to_agg || bc))
			return DP_CLASS_ARP_AGG;
		return to_agg ? DP_CLASS_DROP : DP_CLASS_L2;
	}
	if (!to_agg)
		return DP_CLASS_L2;
	/* to the aggregator MAC: IPv4/UDP/CAIS DATA to its address and port, or dropped */
	if (rd16(f + 12) != 0x0800 || len < 34)
		return DP_CLASS_DROP;
	ip = f + 14;
	if (ip[0] != 0x45)
		return DP_CLASS_DROP;
	ip_len = rd16(ip + 2);
	if (ip_len < 20 + 8 + CAIS_HDR_LEN || ip_len > len - 14)
		return DP_CLASS_DROP;
	if (dp_ip_csum(ip, 20) != 0 || memcmp(ip + 16, &c->agg_ip, 4) != 0 ||
	    (rd16(ip + 6) & 0x3FFF) != 0 || ip[9] != 17)
		return DP_CLASS_DROP;
	udp = ip + 20;
	udp_len = rd16(udp + 4);
	if (udp_len < 8 + CAIS_HDR_LEN || udp_len > ip_len - 20 ||
	    memcmp(udp + 2, &c->udp_port, 2) != 0)
		return DP_CLASS_DROP;
	h = udp + 8;
	/* flag bits 0-3 (PROTOCOL.md 1), bit 4, WAIT, on a RESULT (E11), and
	 * bit 5, QUERY, on a DATA (E12) */
	if (rd16(h) != CAIS_MAGIC || h[2] >> 4 != CAIS_VERSION ||
	    (h[3] & ((h[2] & 0x0F) == CAIS_TYPE_RESULT ? 0xE0
		     : (h[2] & 0x0F) == CAIS_TYPE_DATA ? 0xD0
						       : 0xF0)) != 0)
		return DP_CLASS_DROP;
	/* RESULT, REJECT, ACK and NACK: answers, for a leaf from its spine (E9) */
	switch (h[2] & 0x0F) {
	case CAIS_TYPE_DATA:
		return DP_CLASS_DATA;
	case CAIS_TYPE_RESULT:
	case CAIS_TYPE_REJECT:
	case CAIS_TYPE_ACK:
	case CAIS_TYPE_NACK:
		return DP_CLASS_ANSWER;
	default:
		return DP_CLASS_DROP;
	}
}

/* dp_parse() on an exact-size heap copy, checked against ref_class(). */
static enum dp_class
parse_checked(const uint8_t *frame, uint32_t len)
{
	uint8_t *copy = malloc(len); /* exactly len bytes (0 included): ASan flags any read past */
	struct dp_parsed p;
	enum dp_class want;

	if (!copy && len)
		abort();
	if (len)
		memcpy(copy, frame, len);
	memset(&p, 0xA5, sizeof(p));
	dp_parse(copy, len, &sw->pcfg, &p);
	want = ref_class(frame, len, &sw->pcfg);
	if (p.cls != want) {
		hexdump("frame", frame, len);
		VIOLATION("dp_parse class %d (drop %s), documented class %d", p.cls,
			  dp_drop_name(p.drop), want);
	}
	switch (p.cls) {
	case DP_CLASS_DATA:
		/* the match reads the CAIS header and count values within the UDP length */
		if (p.drop != DP_DROP_NONE || len < CAIS_FRAME_OVERHEAD ||
		    14u + 20u + rd16(frame + 14 + 20 + 4) > len)
			VIOLATION("DATA with drop %d, UDP length %u of %u bytes", p.drop,
				  len >= CAIS_FRAME_OVERHEAD ? rd16(frame + 14 + 20 + 4) : 0u, len);
		break;
	case DP_CLASS_DROP:
		if (p.drop == DP_DROP_NONE || p.drop >= DP_DROP_MAX)
			VIOLATION("DROP with drop %d", p.drop);
		/* only parse-time reasons */
		if (p.drop > DP_DROP_NOT_DATA)
			VIOLATION("parse drop with a pipeline reason %s", dp_drop_name(p.drop));
		break;
	default:
		if (p.drop != DP_DROP_NONE)
			VIOLATION("class %d with drop %d", p.cls, p.drop);
		break;
	}
	free(copy);
	return p.cls;
}

/* ---- the form of what the switch sends ---- */

struct member {
	uint8_t mac[6];
	uint8_t ip[4];
	uint16_t port;
};

static const char *
check_arp_reply(const uint8_t *f, uint32_t len)
{
	const uint8_t *a = f + 14;

	if (len != 60 && len != 42)
		return "ARP reply length";
	if (rd16(a) != 1 || rd16(a + 2) != 0x0800 || a[4] != 6 || a[5] != 4 || rd16(a + 6) != 2)
		return "ARP reply header";
	if (memcmp(a + 8, fz_agg_mac, 6) != 0 || memcmp(a + 14, &agg_ip, 4) != 0)
		return "ARP reply sender is not the aggregator";
	if (memcmp(f, a + 18, 6) != 0)
		return "ARP reply not to the target hardware address";
	return NULL;
}

/*
 * @return NULL when f is a well-formed ARP reply, REJECT or RESULT from the
 * aggregator (PROTOCOL.md 1), else what is wrong.
 */
static const char *
check_generated(const uint8_t *f, uint32_t len)
{
	const uint8_t *ip = f + 14, *udp = ip + 20;
	struct cais_fields h;
	uint32_t ip_len;

	if (len < 14)
		return "runt";
	if (memcmp(f + 6, fz_agg_mac, 6) != 0)
		return "not from the aggregator MAC";
	/* an answer never goes to a group address (nor to 00:00:00:00:00:00) */
	if ((f[0] & 1) || !(f[0] | f[1] | f[2] | f[3] | f[4] | f[5]))
		return "to a group or zero MAC address";
	if (rd16(f + 12) == 0x0806)
		return check_arp_reply(f, len);
	if (rd16(f + 12) != 0x0800)
		return "ethertype";
	if (len < CAIS_FRAME_OVERHEAD)
		return "shorter than a CAIS message";
	if (ip[0] != 0x45)
		return "IPv4 version/IHL";
	ip_len = rd16(ip + 2);
	if (ip_len != len - 14)
		return "IPv4 total length differs from the frame";
	if (dp_ip_csum(ip, 20) != 0)
		return "IPv4 checksum";
	if (rd16(ip + 6) & 0x3FFF)
		return "IPv4 fragment";
	if (ip[9] != 17 || ip[8] == 0)
		return "IPv4 protocol or TTL";
	if (memcmp(ip + 12, &agg_ip, 4) != 0)
		return "IPv4 source is not the aggregator";
	if (rd16(udp) != CAIS_UDP_PORT)
		return "UDP source port";
	if (rd16(udp + 4) != ip_len - 20)
		return "UDP length";
	if (rd16(udp + 6) != 0)
		return "UDP checksum not 0"; /* the switch writes 0 (PROTOCOL.md 1) */
	if (cais_hdr_check(f + CAIS_FRAME_HDR_OFF, len - CAIS_FRAME_HDR_OFF) != CAIS_HDR_OK)
		return "CAIS header check";
	cais_hdr_read((const struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF), &h);
	if (h.type == CAIS_TYPE_ACK || h.type == CAIS_TYPE_NACK) {
		if (len != CAIS_FRAME_OVERHEAD || h.count != 0 || h.reason != 0)
			return "ACK or NACK with a payload, a count or a reason";
		if (h.flags & ~CAIS_F_CONGESTED)
			return "ACK or NACK flags";
		return NULL;
	}
	if (h.rank != CAIS_RANK_NONE)
		return "rank is not 0xFF";
	if (h.type == CAIS_TYPE_REJECT) {
		if (len != CAIS_FRAME_OVERHEAD || h.count != 0)
			return "REJECT with a payload or a count";
		if (h.reason < CAIS_R_UNKNOWN_TENSOR || h.reason > CAIS_R_BAD_DTYPE)
			return "REJECT reason";
		if (h.flags != (h.reason == CAIS_R_FWD_ONLY ? CAIS_F_FWD_ONLY : 0))
			return "REJECT flags";
		return NULL;
	}
	if (h.type == CAIS_TYPE_RESULT) {
		unsigned int elems = h.tenant == FZ_A_TENANT ? FZ_A_ELEMS : FZ_B_ELEMS;

		if (h.count < 1 || h.count > elems)
			return "RESULT count outside 1..elems_per_packet";
		if (h.dtype >= CAIS_DT_COUNT)
			return "RESULT dtype";
		if (len != CAIS_FRAME_OVERHEAD + cais_payload_bytes(h.dtype, h.count))
			return "RESULT length differs from its count";
		/* E11: session A (loss_hints) names the switch's lanes, B nothing */
		if (h.reason != (h.tenant == FZ_A_TENANT ? FZ_LCORES : 0))
			return "RESULT reason";
		if (h.flags & ~(CAIS_F_OVERFLOW | CAIS_F_CONGESTED | CAIS_F_WAIT))
			return "RESULT flags";
		return NULL;
	}
	return "CAIS DATA sent by the switch";
}

/* ---- the reference model: what the switch must send (PROTOCOL.md 1-3) ---- */

/*
 * Every frame of the input is run through the model when it is queued, in
 * the order the pipeline sees it; the model records what the switch must
 * send in answer (struct expect). The TX hook matches each frame sent to
 * one unmatched record (or aborts); at the end of the input every record
 * that is not optional must have been matched. The only parts not modelled
 * independently are the MAC table (a shadow dp_l2 fed the same frames,
 * with burst numbers as time, decides where RESULTs and L2 frames go) and
 * the REJECT rate limit (a sender with at most DP_RL_BURST REJECTs in an
 * input must get every one, unless the input has more than that from all
 * senders: senders whose addresses hash to one bucket share its budget;
 * beyond that they are optional).
 */

#define MAX_EXPECT  (FZ_MAX_FRAMES * FZ_A_N + 8)
#define DP_RL_BURST 50u /* REJECTs a fresh sender gets before the limiter says no */

enum expect_kind { X_L2, X_ARP, X_REJECT, X_RESULT, X_ACK, X_NACK };

struct expect {
	uint8_t kind;
	bool matched;
	uint16_t port;	/* where it must go out */
	uint16_t frame; /* the input frame it answers */
	/* REJECT */
	uint16_t reason;
	/* RESULT, NACK; ACK: h.type only, ACK or a QUERY's NACK */
	uint8_t rank; /* the member it goes to */
	bool wait_ok; /* RESULT: WAIT allowed (E11: the rank is in an older open round) */
	struct cais_fields h;
	uint16_t plen;
	uint8_t payload[4 * (FZ_A_ELEMS > FZ_B_ELEMS ? FZ_A_ELEMS : FZ_B_ELEMS)];
};

static struct expect expects[MAX_EXPECT];
static unsigned int n_expects;

struct mslot {
	uint8_t state; /* 0 empty, 1 open, 2 done */
	uint8_t seen;  /* ranks (n <= 8) */
	uint8_t ovf;
	uint8_t dtype; /* its contributions' (PARTIAL64 too, E9) */
	uint8_t out;   /* its RESULT's: the tensor's wire dtype */
	uint16_t count;
	uint32_t seq, tensor;
	int64_t acc[FZ_A_ELEMS];
};

struct msession {
	uint16_t tenant, session;
	unsigned int n, pool, elems;
	uint16_t bound[FZ_A_N]; /* the switch port + 1 each member is pinned to; 0: not yet */
	struct mslot slots[2 * FZ_A_SLOTS];
};

static struct msession model[2];
static bool model_fwd_only;
static struct dp_l2 shadow_l2;
static unsigned int deferred[FZ_MAX_FRAMES]; /* frames for lcore 1, this burst */
static unsigned int n_deferred;
static uint64_t burst_no; /* the shadow MAC table's clock */

static void
model_reset(void)
{
	memset(model, 0, sizeof(model));
	model[0].tenant = FZ_A_TENANT;
	model[0].session = FZ_A_SESSION;
	model[0].n = FZ_A_N;
	model[0].pool = FZ_A_SLOTS;
	model[0].elems = FZ_A_ELEMS;
	model[1].tenant = FZ_B_TENANT;
	model[1].session = FZ_B_SESSION;
	model[1].n = FZ_B_N;
	model[1].pool = FZ_B_SLOTS;
	model[1].elems = FZ_B_ELEMS;
	model_fwd_only = false;
	dp_l2_init(&shadow_l2, 1ull << 60);
	burst_no = 1;
	n_expects = 0;
	n_deferred = 0;
}

static struct expect *
expect_new(enum expect_kind kind, unsigned int frame, uint16_t port)
{
	struct expect *x;

	if (n_expects == MAX_EXPECT)
		VIOLATION("model: too many expected frames");
	x = &expects[n_expects++];
	memset(x, 0, sizeof(*x));
	x->kind = (uint8_t)kind;
	x->frame = (uint16_t)frame;
	x->port = port;
	return x;
}

/* The reduce op of a tensor, or -1 when the tensor table has no entry. */
static int
model_op(const struct msession *s, uint32_t tensor)
{
	if (s->tenant == FZ_A_TENANT) {
		switch (tensor) {
		case 1:
		case FZ_A_B16_SUM:
			return CAIS_OP_SUM;
		case 2:
			return toggle_tensor_present ? CAIS_OP_MAX : -1;
		case FZ_A_B16_MAX:
			return CAIS_OP_MAX;
		case 3:
		case FZ_A_B16_MIN:
			return CAIS_OP_MIN;
		case 4:
			return CAIS_OP_AVG;
		default:
			return -1;
		}
	}
	return tensor == FZ_B_TENSOR || tensor == FZ_B_B16_TENSOR ? CAIS_OP_SUM : -1;
}

/* The wire dtype of a tensor that has an entry. */
static uint8_t
model_wire(const struct msession *s, uint32_t tensor)
{
	if (s->tenant == FZ_A_TENANT && tensor == FZ_TOGGLE_TENSOR)
		return toggle_tensor_wire;
	if (s->tenant == FZ_A_TENANT)
		return tensor >= FZ_A_B16_SUM ? CAIS_DT_BLOCK16 : CAIS_DT_FIXED32;
	return tensor == FZ_B_B16_TENSOR ? CAIS_DT_BLOCK16 : CAIS_DT_FIXED32;
}

static void
member_addr(const struct msession *s, unsigned int r, struct member *m)
{
	if (s->tenant == FZ_A_TENANT)
		fz_member_a(r, m->mac, m->ip, &m->port);
	else
		fz_member_b(m->mac, m->ip, &m->port);
}

/* The RESULT payload of a complete round; @return its bytes. */
static size_t
result_payload(uint8_t *out, const struct mslot *sl)
{
	if (sl->out == CAIS_DT_BLOCK16)
		return tb16_store(out, sl->acc, sl->count);
	for (unsigned int i = 0; i < sl->count; i++) {
		int64_t v = sl->acc[i];
		uint32_t w = htonl((uint32_t)(v > INT32_MAX   ? INT32_MAX
					      : v < INT32_MIN ? INT32_MIN
							      : (int32_t)v));

		memcpy(out + 4 * i, &w, 4);
	}
	return 4u * sl->count;
}

/* The lcore that owns seq's slot: odd slot indexes are lcore 1's (fuzz_setup.h). */
static unsigned int
model_lcore(const struct msession *s, uint32_t seq)
{
	return (seq % s->pool) & 1u;
}

/* An optional NACK record (E11, E12) of open round o to rank r, on its pinned port. */
static void
expect_nack(const struct msession *s, const struct mslot *o, unsigned int r, unsigned int frame)
{
	/* to the member's pinned port; not pinned yet: by its MAC, or nowhere */
	struct expect *x = expect_new(X_NACK, frame, s->bound[r] ? s->bound[r] - 1 : 0xFFFF);

	x->rank = (uint8_t)r;
	x->h.tenant = s->tenant;
	x->h.session = s->session;
	x->h.tensor = o->tensor;
	x->h.seq = o->seq;
	x->h.dtype = o->out;
}

/*
 * E11 for the round sl completing: the ranks counted in an open round
 * before it on its lcore (WAIT is allowed on their RESULTs; the switch
 * leaves it out where the rounds before are more than it scans), and with
 * nack, NACK records (optional: the same bound, and at most one a
 * DP_NACK_GAP_US per round) to the ranks missing from such a round 2, 4,
 * 8, ... of the lcore's rounds before it. @return the ranks.
 */
static uint8_t
model_older(const struct msession *s, const struct mslot *sl, unsigned int frame, bool nack)
{
	uint8_t in = 0;

	if (s->tenant != FZ_A_TENANT) /* session B has no loss_hints */
		return 0;
	for (unsigned int k = 0; k < 2 * s->pool; k++) {
		const struct mslot *o = &s->slots[k];
		uint32_t d;

		if (o->state != 1 || !cais_seq_before(o->seq, sl->seq) ||
		    model_lcore(s, o->seq) != model_lcore(s, sl->seq))
			continue;
		in |= o->seen;
		d = (sl->seq - o->seq) / 2; /* two lcores: this lcore's rounds apart */
		if (!nack || d < 2 || (d & (d - 1)) != 0)
			continue;
		for (unsigned int r = 0; r < s->n; r++)
			if (!((o->seen >> r) & 1))
				expect_nack(s, o, r, frame);
	}
	return in;
}

/* RESULT records for the round in sl: to every member, or only to rank `only`. */
static void
model_results(const struct msession *s, const struct mslot *sl, const struct cais_fields *h,
	      unsigned int frame, int only, uint16_t in_port)
{
	uint8_t waits = model_older(s, sl, frame, only < 0);

	for (unsigned int r = 0; r < s->n; r++) {
		struct member m;
		struct expect *x;
		int port;

		if (only >= 0 && r != (unsigned int)only)
			continue;
		member_addr(s, r, &m);
		if (only >= 0) {
			port = in_port; /* a resend goes back where the DATA came from */
		} else {
			/* to the port the member is bound to (every member of a complete
			 * round sent DATA, and was pinned) */
			if (!s->bound[r])
				VIOLATION("model: a complete round with rank %u not bound", r);
			port = s->bound[r] - 1;
		}
		x = expect_new(X_RESULT, frame, (uint16_t)port);
		x->rank = (uint8_t)r;
		x->wait_ok = (waits >> r) & 1;
		x->h = *h;
		x->h.type = CAIS_TYPE_RESULT;
		x->h.flags = sl->ovf ? CAIS_F_OVERFLOW : 0;
		x->h.rank = CAIS_RANK_NONE;
		x->h.dtype = sl->out;
		x->h.count = sl->count;
		x->h.reason = 0;
		x->plen = (uint16_t)result_payload(x->payload, sl);
	}
}

static int32_t
be32_at(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* Element i of a DATA payload in accumulator units (*sat: a BLOCK16 exponent above 40). */
static int64_t
model_elem(const uint8_t *payload, const struct cais_fields *h, unsigned int i, bool *sat)
{
	if (h->dtype == CAIS_DT_BLOCK16)
		return tb16_elem(payload, h->count, i, sat);
	if (h->dtype == CAIS_DT_PARTIAL64) {
		uint64_t v = 0;

		for (unsigned int b = 0; b < 8; b++)
			v = v << 8 | payload[8 * i + b];
		return (int64_t)v;
	}
	return be32_at(payload + 4 * i);
}

/*
 * A QUERY (E12) that passed every check: the answer its DATA's state gives,
 * the slot left as it is. Not in: a NACK of it (an answer record, as an ACK,
 * of type NACK); in and waiting: an ACK, and NACK records (optional: the
 * switch looks at DP_WAIT_SCAN rounds) of the older open rounds on its
 * lcore that miss the rank, with loss_hints; complete: the RESULT again.
 */
static void
model_query(struct msession *s, const struct cais_fields *h, unsigned int frame, uint16_t in_port)
{
	const struct mslot *sl = &s->slots[2 * h->slot + h->set];
	struct expect *x;

	if (sl->state != 0 && !cais_seq_before(sl->seq, h->seq) &&
	    (h->seq != sl->seq || h->count != sl->count || h->tensor != sl->tensor ||
	     h->dtype != sl->dtype))
		return; /* stale or inconsistent */
	if (sl->state == 0 || h->seq != sl->seq || !(sl->seen & (1u << h->rank))) {
		x = expect_new(X_ACK, frame, in_port);
		x->h.type = CAIS_TYPE_NACK;
		return;
	}
	if (sl->state == 2)
		return model_results(s, sl, h, frame, h->rank, in_port);
	x = expect_new(X_ACK, frame, in_port);
	x->h.type = CAIS_TYPE_ACK;
	if (s->tenant != FZ_A_TENANT) /* session B has no loss_hints */
		return;
	for (unsigned int k = 0; k < 2 * s->pool; k++) {
		const struct mslot *o = &s->slots[k];

		if (o->state == 1 && cais_seq_before(o->seq, h->seq) &&
		    model_lcore(s, o->seq) == model_lcore(s, h->seq) && !((o->seen >> h->rank) & 1))
			expect_nack(s, o, h->rank, frame);
	}
}

/* Section 3 for one DATA that passed every check. */
static void
model_step(struct msession *s, int op, const struct cais_fields *h, const uint8_t *payload,
	   unsigned int frame, uint16_t in_port)
{
	struct mslot *sl = &s->slots[2 * h->slot + h->set];
	uint8_t all = (uint8_t)((1u << s->n) - 1);

	bool sat = false;

	if (h->flags & CAIS_F_QUERY)
		return model_query(s, h, frame, in_port);
	if (sl->state == 0 || cais_seq_before(sl->seq, h->seq)) {
		sl->state = 1;
		sl->seq = h->seq;
		sl->tensor = h->tensor;
		sl->count = h->count;
		sl->dtype = h->dtype;
		sl->out = model_wire(s, h->tensor);
		sl->seen = (uint8_t)(1u << h->rank);
		for (unsigned int i = 0; i < h->count; i++)
			sl->acc[i] = model_elem(payload, h, i, &sat);
		sl->ovf = sat;
		/* a leaf's partial that saturated on its way in (E9) */
		sl->ovf |= h->dtype == CAIS_DT_PARTIAL64 && (h->flags & CAIS_F_OVERFLOW);
	} else if (h->seq != sl->seq) {
		return; /* stale */
	} else if (h->count != sl->count || h->tensor != sl->tensor || h->dtype != sl->dtype) {
		return; /* inconsistent */
	} else if (sl->seen & (1u << h->rank)) {
		if (sl->state == 2)
			model_results(s, sl, h, frame, h->rank, in_port); /* lost RESULT */
		else if (h->flags & CAIS_F_RETX) /* in, waiting for others (E6) */
			expect_new(X_ACK, frame, in_port)->h.type = CAIS_TYPE_ACK;
		return; /* else a duplicate */
	} else {
		for (unsigned int i = 0; i < h->count; i++) {
			int64_t v = model_elem(payload, h, i, &sat);

			if (op == CAIS_OP_MAX)
				sl->acc[i] = v > sl->acc[i] ? v : sl->acc[i];
			else if (op == CAIS_OP_MIN)
				sl->acc[i] = v < sl->acc[i] ? v : sl->acc[i];
			else if (__builtin_add_overflow(sl->acc[i], v, &sl->acc[i]))
				/* only PARTIAL64 can: saturated, OVERFLOW */
				sl->acc[i] = v < 0 ? INT64_MIN : INT64_MAX, sat = true;
		}
		sl->seen |= (uint8_t)(1u << h->rank);
		sl->ovf |= sat || (h->dtype == CAIS_DT_PARTIAL64 && (h->flags & CAIS_F_OVERFLOW));
	}
	if (sl->seen == all && sl->state == 1) {
		sl->state = 2;
		for (unsigned int i = 0; i < sl->count && sl->out == CAIS_DT_FIXED32; i++)
			sl->ovf |= sl->acc[i] > INT32_MAX || sl->acc[i] < INT32_MIN;
		model_results(s, sl, h, frame, -1, in_port);
	}
}

/*
 * Is the DATA from the member registered for its rank: its IPv4 address and
 * UDP port, its MAC, and the switch port of its first DATA (E5), pinned here?
 */
static bool
model_sender(struct msession *s, const struct cais_fields *h, const uint8_t *f, uint16_t port)
{
	const uint8_t *ip = f + 14, *udp = ip + 20;
	struct member m;

	if (h->rank >= s->n)
		return false;
	member_addr(s, h->rank, &m);
	if (memcmp(ip + 12, m.ip, 4) != 0 || rd16(udp) != m.port || memcmp(f + 6, m.mac, 6) != 0)
		return false;
	if (s->bound[h->rank] && s->bound[h->rank] != port + 1)
		return false;
	s->bound[h->rank] = (uint16_t)(port + 1);
	return true;
}

/* A DATA frame (parsed as such): the REJECT checks in order, then the slot. */
static void
model_data(unsigned int frame, const uint8_t *f, uint16_t port)
{
	const struct cais_hdr *hdr = (const struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF);
	const uint8_t *ip = f + 14, *udp = ip + 20;
	struct cais_fields h;
	struct msession *s = NULL;
	uint32_t payload_len = rd16(udp + 4) - 8u - CAIS_HDR_LEN;
	int op = -1;
	uint16_t reason = 0;

	cais_hdr_read(hdr, &h);
	for (unsigned int i = 0; i < 2; i++)
		if (model[i].tenant == h.tenant && model[i].session == h.session)
			s = &model[i];
	if (s)
		op = model_op(s, h.tensor);
	if (model_fwd_only) {
		reason = CAIS_R_FWD_ONLY;
	} else if (op < 0) {
		reason = CAIS_R_UNKNOWN_TENSOR;
	} else {
		if (!model_sender(s, &h, f, port))
			reason = CAIS_R_NOT_MEMBER;
		else if (h.dtype != model_wire(s, h.tensor) && h.dtype != CAIS_DT_PARTIAL64)
			reason = CAIS_R_BAD_DTYPE;
		else if (h.count == 0 || h.count > s->elems ||
			 (!(h.flags & CAIS_F_QUERY) &&
			  cais_payload_bytes(h.dtype, h.count) > payload_len))
			reason = CAIS_R_BAD_COUNT;
		else if (h.slot >= s->pool)
			reason = CAIS_R_NO_SLOT;
	}
	if (reason) {
		struct expect *x = expect_new(X_REJECT, frame, port);

		x->reason = reason;
		return;
	}
	if (cais_slot_field(h.seq, s->pool) != ((h.set ? CAIS_SET_BIT : 0) | h.slot))
		return; /* SLOT_MISMATCH: silent */
	if (h.slot % FZ_LCORES != 0) {
		/* owned by another lcore: it runs after lcore 0's burst */
		if (n_deferred == FZ_MAX_FRAMES)
			VIOLATION("model: deferred list full");
		deferred[n_deferred++] = frame;
		return;
	}
	model_step(s, op, &h, f + CAIS_FRAME_OVERHEAD, frame, port);
}

/* The DATA of the burst that lcore 1 owns, in order (tables do not change within a burst). */
static void
model_deferred(void)
{
	for (unsigned int k = 0; k < n_deferred; k++) {
		const struct in_frame *fr = &frames[deferred[k]];
		struct cais_fields h;
		struct msession *s;

		cais_hdr_read((const struct cais_hdr *)(fr->data + CAIS_FRAME_HDR_OFF), &h);
		s = h.tenant == FZ_A_TENANT ? &model[0] : &model[1];
		model_step(s, model_op(s, h.tensor), &h, fr->data + CAIS_FRAME_OVERHEAD,
			   deferred[k], fr->port);
	}
	n_deferred = 0;
}

/* Run one input frame through the model (in pipeline order). */
static void
model_frame(unsigned int i)
{
	const struct in_frame *fr = &frames[i];
	int out;

	if (fr->port >= FZ_PORTS || fr->multiseg)
		return; /* dropped before anything else (BAD_PORT, MULTISEG) */
	if (fr->learns)
		dp_l2_learn(&shadow_l2, fr->data + 6, fr->port, burst_no);
	switch (fr->cls) {
	case DP_CLASS_L2:
		out = dp_l2_lookup(&shadow_l2, fr->data, burst_no);
		if (out == fr->port)
			break; /* L2_SAME_PORT */
		for (uint16_t p = 0; p < FZ_PORTS; p++)
			if (out >= 0 ? p == out : p != fr->port)
				expect_new(X_L2, i, p);
		break;
	case DP_CLASS_ARP_AGG:
		expect_new(X_ARP, i, fr->port);
		break;
	case DP_CLASS_DATA:
		model_data(i, fr->data, fr->port);
		break;
	default:
		break;
	}
}

/* ---- matching what the switch sends ---- */

static bool
match_l2(const struct expect *x, const uint8_t *f, uint32_t len)
{
	const struct in_frame *fr = &frames[x->frame];

	return fr->len == len && memcmp(fr->data, f, len) == 0;
}

static bool
match_arp(const struct expect *x, const uint8_t *f, uint32_t len)
{
	const uint8_t *a = f + 14, *q = frames[x->frame].data + 14;

	if (len < 42 || rd16(f + 12) != 0x0806)
		return false;
	return memcmp(a + 18, q + 8, 10) == 0; /* target = asker (MAC, IP) */
}

static bool
match_reject(const struct expect *x, const uint8_t *f, const struct cais_fields *h)
{
	const uint8_t *d = frames[x->frame].data, *ip = f + 14, *dip = d + 14;
	struct cais_fields df;

	cais_hdr_read((const struct cais_hdr *)(d + CAIS_FRAME_HDR_OFF), &df);
	return h->type == CAIS_TYPE_REJECT && h->reason == x->reason && memcmp(f, d + 6, 6) == 0 &&
	       memcmp(ip + 16, dip + 12, 4) == 0 && memcmp(ip + 20 + 2, dip + 20, 2) == 0 &&
	       df.tenant == h->tenant && df.session == h->session && df.tensor == h->tensor &&
	       df.seq == h->seq && df.slot == h->slot && df.set == h->set && df.dtype == h->dtype;
}

/*
 * An ACK, or a QUERY's NACK (E12; x->h.type says which), echoes the DATA's
 * ids, seq, slot, rank and dtype, back to its sender.
 */
static bool
match_ack(const struct expect *x, const uint8_t *f, const struct cais_fields *h)
{
	const uint8_t *d = frames[x->frame].data, *ip = f + 14, *dip = d + 14;
	struct cais_fields df;

	cais_hdr_read((const struct cais_hdr *)(d + CAIS_FRAME_HDR_OFF), &df);
	return h->type == x->h.type && memcmp(f, d + 6, 6) == 0 &&
	       memcmp(ip + 16, dip + 12, 4) == 0 && memcmp(ip + 20 + 2, dip + 20, 2) == 0 &&
	       df.tenant == h->tenant && df.session == h->session && df.tensor == h->tensor &&
	       df.seq == h->seq && df.slot == h->slot && df.set == h->set && df.dtype == h->dtype &&
	       df.rank == h->rank;
}

static bool
match_result(const struct expect *x, const uint8_t *f, const struct cais_fields *h)
{
	const uint8_t *ip = f + 14;
	struct member m;
	const struct msession *s = x->h.tenant == FZ_A_TENANT ? &model[0] : &model[1];

	if (h->type != CAIS_TYPE_RESULT)
		return false;
	member_addr(s, x->rank, &m);
	if (memcmp(f, m.mac, 6) != 0 || memcmp(ip + 16, m.ip, 4) != 0 || rd16(ip + 22) != m.port)
		return false;
	if (h->tenant != x->h.tenant || h->session != x->h.session || h->tensor != x->h.tensor ||
	    h->seq != x->h.seq || h->slot != x->h.slot || h->set != x->h.set ||
	    h->count != x->h.count || h->dtype != x->h.dtype ||
	    (h->flags != x->h.flags && !(x->wait_ok && h->flags == (x->h.flags | CAIS_F_WAIT))))
		return false;
	/* the length is the count's (check_generated()) */
	return memcmp(f + CAIS_FRAME_OVERHEAD, x->payload, x->plen) == 0;
}

/* A NACK (E11) to the member, of the open round's ids, seq, slot and dtype, its rank. */
static bool
match_nack(const struct expect *x, const uint8_t *f, const struct cais_fields *h)
{
	const struct msession *s = x->h.tenant == FZ_A_TENANT ? &model[0] : &model[1];
	uint16_t sf = cais_slot_field(x->h.seq, s->pool);
	struct member m;

	if (h->type != CAIS_TYPE_NACK)
		return false;
	member_addr(s, x->rank, &m);
	return memcmp(f, m.mac, 6) == 0 && memcmp(f + 14 + 16, m.ip, 4) == 0 &&
	       rd16(f + 14 + 22) == m.port && h->tenant == x->h.tenant &&
	       h->session == x->h.session && h->tensor == x->h.tensor && h->seq == x->h.seq &&
	       h->slot == (sf & CAIS_SLOT_MASK) && h->set == !!(sf & CAIS_SET_BIT) &&
	       h->dtype == x->h.dtype && h->rank == x->rank;
}

static void
dump_expects(void)
{
	for (unsigned int i = 0; i < n_expects; i++) {
		const struct expect *x = &expects[i];

		fprintf(stderr, "  expect %u: kind %u port %u frame %u matched %d", i, x->kind,
			x->port, x->frame, x->matched);
		if (x->kind == X_REJECT)
			fprintf(stderr, " reason %u", x->reason);
		if (x->kind == X_RESULT) {
			fprintf(stderr,
				" rank %u seq %u slot %u/%u dtype %u count %u flags %u:", x->rank,
				x->h.seq, x->h.slot, x->h.set, x->h.dtype, x->h.count, x->h.flags);
			for (unsigned int k = 0; k < x->plen; k++)
				fprintf(stderr, "%s%02x", k % 4 ? "" : " ", x->payload[k]);
		}
		fprintf(stderr, "\n");
	}
}

/* Match a frame the switch sent to what the model expects; abort if nothing fits. */
static void
match_output(const uint8_t *f, uint32_t len, uint16_t port)
{
	const char *why = NULL;
	struct cais_fields h;

	/* an input frame forwarded unchanged */
	for (unsigned int i = 0; i < n_expects; i++) {
		struct expect *x = &expects[i];

		if (!x->matched && x->kind == X_L2 && x->port == port && match_l2(x, f, len)) {
			x->matched = true;
			return;
		}
	}
	why = check_generated(f, len);
	if (!why) {
		if (rd16(f + 12) == 0x0800)
			cais_hdr_read((const struct cais_hdr *)(f + CAIS_FRAME_HDR_OFF), &h);
		/*
		 * Required records first, then the optional NACK records: a
		 * QUERY's NACK answer and a NACK record the switch left out (its
		 * round's NACK gap) can be the same frame, which must then count
		 * for the answer.
		 */
		for (unsigned int k = 0; k < 2 * n_expects; k++) {
			struct expect *x = &expects[k % n_expects];
			bool ok;

			if (x->matched || (x->kind == X_NACK) != (k >= n_expects) ||
			    (x->port != port && !(x->kind == X_NACK && x->port == 0xFFFF)))
				continue;
			if (x->kind == X_ARP)
				ok = rd16(f + 12) == 0x0806 && match_arp(x, f, len);
			else if (x->kind == X_REJECT)
				ok = rd16(f + 12) == 0x0800 && match_reject(x, f, &h);
			else if (x->kind == X_RESULT)
				ok = rd16(f + 12) == 0x0800 && match_result(x, f, &h);
			else if (x->kind == X_ACK)
				ok = rd16(f + 12) == 0x0800 && match_ack(x, f, &h);
			else if (x->kind == X_NACK)
				ok = rd16(f + 12) == 0x0800 && match_nack(x, f, &h);
			else
				ok = false;
			if (ok) {
				x->matched = true;
				return;
			}
		}
		why = "well formed, but not what the model expects";
	}
	hexdump("frame sent", f, len);
	dump_expects();
	VIOLATION("port %u: %s", port, why);
}

/* At the end of an input: everything the switch had to send was sent. */
static void
check_complete(void)
{
	for (unsigned int i = 0; i < n_expects; i++) {
		const struct expect *x = &expects[i];
		unsigned int same = 0, all = 0;

		if (x->matched || x->kind == X_NACK) /* NACKs: optional (model_older()) */
			continue;
		if (x->kind == X_REJECT || x->kind == X_ACK) {
			/* rate limited: optional once the sender has had its burst (REJECTs
			 * and ACKs have budgets of their own); senders that hash to one
			 * bucket share it, so beyond a burst of them in all, any may be */
			const uint8_t *d = frames[x->frame].data;

			for (unsigned int j = 0; j < n_expects; j++) {
				const uint8_t *e = frames[expects[j].frame].data;

				all += expects[j].kind == x->kind;
				same += expects[j].kind == x->kind &&
					memcmp(d + 14 + 12, e + 14 + 12, 4) == 0 &&
					memcmp(d + 34, e + 34, 2) == 0;
			}
			if (same > DP_RL_BURST || all > DP_RL_BURST)
				continue;
		}
		dump_expects();
		hexdump("input frame", frames[x->frame].data, frames[x->frame].len);
		VIOLATION("expected frame %u (kind %u, port %u) never sent", i, x->kind, x->port);
	}
}

static uint8_t out_buf[DP_MBUF_DATA + 256];

static uint16_t
fuzz_tx(void *ctx, uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	(void)ctx;
	if (port >= FZ_PORTS || queue >= FZ_LCORES)
		VIOLATION("TX on port %u queue %u", port, queue);
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint32_t len = m->pkt_len;
		const uint8_t *f;
		const char *why;

		if (len > sizeof(out_buf))
			VIOLATION("frame of %u bytes", len);
		if (rte_mbuf_check(m, 1, &why) != 0)
			VIOLATION("bad mbuf: %s", why);
		f = rte_pktmbuf_read(m, 0, len, out_buf);
		if (!f)
			VIOLATION("unreadable mbuf");
		match_output(f, len, port);
		rte_pktmbuf_free(m);
	}
	return n;
}

/* ---- setup ---- */

static void
install(void)
{
	static struct dp_session_conf cs; /* big: members[255] */
	struct dp_tensor_conf ct = {0};
	struct dp_err err = {{0}};
	/* tensors 1..7 of session A: their ops; from FZ_A_B16_SUM on in BLOCK16 */
	static const uint8_t ops[] = {CAIS_OP_SUM, CAIS_OP_MAX, CAIS_OP_MIN, CAIS_OP_AVG,
				      CAIS_OP_SUM, CAIS_OP_MAX, CAIS_OP_MIN};

	memset(&cs, 0, sizeof(cs));
	cs.tenant = FZ_A_TENANT;
	cs.session = FZ_A_SESSION;
	cs.n = FZ_A_N;
	cs.slots = FZ_A_SLOTS;
	cs.elems = FZ_A_ELEMS;
	cs.loss_hints = true; /* WAIT and NACK (E11); session B has none */
	for (unsigned int r = 0; r < FZ_A_N; r++) {
		uint8_t ip[4];

		fz_member_a(r, cs.members[r].mac, ip, &cs.members[r].port);
		memcpy(&cs.members[r].ip, ip, 4);
	}
	if (dp_session_add(&sw->tables, &cs, &err) != 0)
		VIOLATION("session.add A: %s", err.msg);
	for (unsigned int t = 0; t < sizeof(ops); t++) {
		ct.tenant = FZ_A_TENANT;
		ct.session = FZ_A_SESSION;
		ct.tensor = t + 1;
		ct.op = (enum cais_redop)ops[t];
		ct.wire = t + 1 >= FZ_A_B16_SUM ? CAIS_DT_BLOCK16 : CAIS_DT_FIXED32;
		ct.scale = 1024;
		if (dp_tensor_add(&sw->tables, &ct, &err) != 0)
			VIOLATION("tensor.add: %s", err.msg);
	}
	memset(&cs, 0, sizeof(cs));
	cs.tenant = FZ_B_TENANT;
	cs.session = FZ_B_SESSION;
	cs.n = FZ_B_N;
	cs.slots = FZ_B_SLOTS;
	cs.elems = FZ_B_ELEMS;
	{
		uint8_t ip[4];

		fz_member_b(cs.members[0].mac, ip, &cs.members[0].port);
		memcpy(&cs.members[0].ip, ip, 4);
	}
	if (dp_session_add(&sw->tables, &cs, &err) != 0)
		VIOLATION("session.add B: %s", err.msg);
	ct.tenant = FZ_B_TENANT;
	ct.session = FZ_B_SESSION;
	ct.op = CAIS_OP_SUM;
	for (unsigned int w = 0; w < 2; w++) {
		ct.tensor = w ? FZ_B_B16_TENSOR : FZ_B_TENSOR;
		ct.wire = w ? CAIS_DT_BLOCK16 : CAIS_DT_FIXED32;
		if (dp_tensor_add(&sw->tables, &ct, &err) != 0)
			VIOLATION("tensor.add B: %s", err.msg);
	}
	toggle_tensor_present = true;
	toggle_tensor_wire = CAIS_DT_FIXED32;
}

/* FZ_TOGGLE_TENSOR deleted, or added again with the other wire dtype (fuzz_setup.h). */
static void
toggle_tensor(void)
{
	struct dp_err err = {{0}};

	if (toggle_tensor_present) {
		int rc =
		    dp_tensor_del(&sw->tables, FZ_A_TENANT, FZ_A_SESSION, FZ_TOGGLE_TENSOR, &err);

		if (rc != 0)
			VIOLATION("tensor.del: %s", err.msg);
	} else {
		struct dp_tensor_conf ct = {.tenant = FZ_A_TENANT,
					    .session = FZ_A_SESSION,
					    .tensor = FZ_TOGGLE_TENSOR,
					    .op = CAIS_OP_MAX,
					    .wire = toggle_tensor_wire ^ 1,
					    .scale = 1};

		if (dp_tensor_add(&sw->tables, &ct, &err) != 0)
			VIOLATION("tensor.add: %s", err.msg);
		toggle_tensor_wire = ct.wire;
	}
	toggle_tensor_present = !toggle_tensor_present;
}

/*
 * The DATA that open rounds keep (dp_config.h DP_KEEP_*), in every
 * session; with release, freed and forgotten. @return how many
 */
static unsigned int
kept_data(bool release)
{
	struct dp_session *s;
	unsigned int n = 0;

	LIST_FOREACH (s, &sw->tables.sessions, link)
		for (unsigned int k = 0; k < s->n_lcores; k++) {
			struct dp_session_part *pt = &s->part[k];

			for (size_t i = 0; pt->kept && i < (size_t)pt->n_local * 2 * s->keep; i++) {
				if (!pt->kept[i])
					continue;
				n++;
				if (release) {
					rte_pktmbuf_free(pt->kept[i]);
					pt->kept[i] = NULL;
				}
			}
		}
	return n;
}

/* Back to the state every input starts from. */
static void
reset(void)
{
	struct dp_session *s;

	/* the toggled tensor present, in FIXED32 */
	if (toggle_tensor_present && toggle_tensor_wire != CAIS_DT_FIXED32)
		toggle_tensor();
	if (!toggle_tensor_present) {
		toggle_tensor_wire = CAIS_DT_BLOCK16; /* the next one added is FIXED32 */
		toggle_tensor();
	}
	dp_mode_set(sw, DP_MODE_COMPUTE);
	sw->lease_deadline = 0;
	kept_data(true); /* the rounds that kept them are wiped below */
	LIST_FOREACH (s, &sw->tables.sessions, link) {
		for (unsigned int r = 0; r < s->n; r++)
			s->members[r].bound = 0; /* each input pins its own (E5) */
		for (unsigned int k = 0; k < s->n_lcores; k++) {
			struct dp_session_part *pt = &s->part[k];

			memset(&pt->c, 0, sizeof(pt->c));
			if (!pt->n_local)
				continue;
			memset(pt->slots, 0, (size_t)pt->n_local * 2 * sizeof(*pt->slots));
			memset(pt->acc, 0, (size_t)pt->n_local * 2 * s->elems * sizeof(int64_t));
		}
	}
	for (unsigned int i = 0; i < FZ_LCORES; i++) {
		struct dp_lcore *lc = &sw->lcores[i];

		memset(lc->rl, 0, sizeof(lc->rl));
		memset(lc->rl_ack, 0, sizeof(lc->rl_ack));
		memset(&lc->c, 0, sizeof(lc->c));
		memset(lc->port, 0, sizeof(lc->port));
	}
	dp_l2_init(sw->l2, l2_age);
	n_frames = 0;
	model_reset();
}

static void
cleanup(void)
{
	if (sw)
		dp_switch_free(sw);
	sw = NULL;
	rte_mempool_free(in_pool);
	in_pool = NULL;
	rte_eal_cleanup();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static char prefix[64];
	char *eal[] = {"fuzz_pipeline",
		       "--no-huge",
		       "-m",
		       "512",
		       "--no-pci",
		       "--no-shconf",
		       "--no-telemetry",
		       "-l",
		       "0",
		       "--log-level=error",
		       "--log-level=lib.ethdev:critical",
		       prefix,
		       NULL};
	struct dp_switch_conf c = {0};
	cpu_set_t cpus;
	bool have_cpus;

	(void)argc;
	(void)argv;
	verbose = getenv("CAIS_FUZZ_VERBOSE") && strcmp(getenv("CAIS_FUZZ_VERBOSE"), "0") != 0;
	snprintf(prefix, sizeof(prefix), "--file-prefix=cais-fuzz-%d", (int)getpid());
	have_cpus = sched_getaffinity(0, sizeof(cpus), &cpus) == 0;
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0) {
		fprintf(stderr, "EAL init failed: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
	/* EAL pinned this thread to CPU 0; parallel fuzzing jobs should not share it */
	if (have_cpus)
		sched_setaffinity(0, sizeof(cpus), &cpus);
	/*
	 * With --no-shconf and --no-telemetry nothing lives in EAL's runtime
	 * directory (/var/run/dpdk/cais-fuzz-PID): remove it now, so that a
	 * crashing run (which never reaches atexit) leaves nothing behind.
	 */
	if (rte_eal_get_runtime_dir())
		rmdir(rte_eal_get_runtime_dir());

	memcpy(&agg_ip, fz_agg_ip, 4);
	c.agg_enabled = true;
	c.agg_ip = agg_ip;
	memcpy(c.agg_mac.addr_bytes, fz_agg_mac, 6);
	c.udp_port = CAIS_UDP_PORT;
	c.n_ports = FZ_PORTS;
	c.n_lcores = FZ_LCORES;
	for (unsigned int i = 0; i < FZ_LCORES; i++)
		c.lcore_ids[i] = i;
	c.slot_capacity = 1024;
	c.mbufs = 512; /* RX pool of the real switch, unused here (>= 1.5 x the 256 cache) */
	c.mbuf_data = 2048;
	c.hdr_mbufs = HDR_MBUFS;
	c.socket = SOCKET_ID_ANY;
	c.name = "fz";
	c.tx = fuzz_tx;
	sw = dp_switch_create(&c);
	if (!sw) {
		fprintf(stderr, "dp_switch_create: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
	l2_age = (uint64_t)DP_L2_DEFAULT_AGE_S * sw->hz;
	/* no cache, so that the free count is exact after every input */
	in_pool = rte_pktmbuf_pool_create("fz_in", IN_MBUFS, 0, 0,
					  RTE_PKTMBUF_HEADROOM + FZ_MAX_FRAME, SOCKET_ID_ANY);
	if (!in_pool) {
		fprintf(stderr, "input pool: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
	install();
	atexit(cleanup);
	return 0;
}

static void
run_burst(struct rte_mbuf **burst, uint16_t *nb)
{
	struct dp_lcore *lc = &sw->lcores[0], *owner = &sw->lcores[1];
	struct rte_mbuf *ho[DP_BURST];
	unsigned int n;

	/* DATA handed to lcore 1 is stepped after lcore 0's whole burst, as in the switch */
	model_deferred();
	if (*nb) {
		dp_lcore_input(lc, burst, *nb);
		burst_no++; /* the next burst is later for the shadow MAC table */
	}
	dp_lcore_flush(lc); /* TX, and the handoffs into lcore 1's ring */
	while ((n = rte_ring_dequeue_burst(owner->ring, (void **)ho, DP_BURST, NULL)) > 0) {
		dp_lcore_input_owned(owner, ho, (uint16_t)n);
		dp_lcore_flush(owner);
	}
	*nb = 0;
}

static void
stats(void)
{
	json_t *o = json_object();

	if (!o || dp_stats_json(sw, -1, o) != 0)
		VIOLATION("stats.get failed");
	json_decref(o);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rte_mbuf *burst[DP_BURST];
	uint16_t nb = 0;
	size_t pos = 0;
	unsigned int in_use, kept;

	reset();
	while (pos + FZ_REC_HDR <= size && n_frames < FZ_MAX_FRAMES) {
		uint8_t ctl = data[pos];
		uint32_t len = rd16(data + pos + 1);
		unsigned int op = (ctl & FZ_CTL_OP_MASK) >> FZ_CTL_OP_SHIFT;
		struct in_frame *fr = &frames[n_frames];
		struct rte_mbuf *m;
		char *p;

		pos += FZ_REC_HDR;
		if (len > size - pos)
			len = (uint32_t)(size - pos);
		if (len > FZ_MAX_FRAME)
			len = FZ_MAX_FRAME;
		if (op != FZ_OP_NONE) {
			run_burst(burst, &nb); /* the control change comes between packets */
			if (op == FZ_OP_FWD_ONLY)
				dp_mode_set(sw, DP_MODE_FWD_ONLY);
			else if (op == FZ_OP_COMPUTE)
				dp_mode_set(sw, DP_MODE_COMPUTE);
			if (op == FZ_OP_FWD_ONLY || op == FZ_OP_COMPUTE)
				model_fwd_only = op == FZ_OP_FWD_ONLY;
			else
				toggle_tensor();
		}
		fr->data = data + pos;
		fr->len = len;
		fr->port = fz_ctl_port(ctl);
		fr->multiseg = (ctl & FZ_CTL_MULTISEG) && len >= 2;
		fr->cls = parse_checked(fr->data, len);
		fr->learns = ref_learns(fr->data, len, &sw->pcfg);
		model_frame(n_frames);
		n_frames++;
		pos += len;

		m = rte_pktmbuf_alloc(in_pool);
		if (!m)
			VIOLATION("input pool empty");
		p = rte_pktmbuf_append(m, (uint16_t)(fr->multiseg ? len / 2 : len));
		if (!p)
			VIOLATION("no room for %u bytes", len);
		memcpy(p, fr->data, fr->multiseg ? len / 2 : len);
		if (fr->multiseg) {
			struct rte_mbuf *m2 = rte_pktmbuf_alloc(in_pool);

			if (!m2 || !(p = rte_pktmbuf_append(m2, (uint16_t)(len - len / 2))))
				VIOLATION("input pool empty");
			memcpy(p, fr->data + len / 2, len - len / 2);
			if (rte_pktmbuf_chain(m, m2) != 0)
				VIOLATION("rte_pktmbuf_chain");
		}
		m->port = fr->port;
		burst[nb++] = m;
		if ((ctl & FZ_CTL_END_BURST) || nb == DP_BURST)
			run_burst(burst, &nb);
		if (ctl & FZ_CTL_STATS) {
			run_burst(burst, &nb);
			stats();
		}
	}
	run_burst(burst, &nb);
	if (verbose) {
		unsigned int kinds[6] = {0}, matched = 0;

		for (unsigned int i = 0; i < n_expects; i++) {
			kinds[expects[i].kind]++;
			matched += expects[i].matched;
		}
		fprintf(stderr,
			"input: %u frames; expected %u L2, %u ARP, %u REJECT, %u RESULT, %u ACK, "
			"%u NACK (optional); %u sent\n",
			n_frames, kinds[X_L2], kinds[X_ARP], kinds[X_REJECT], kinds[X_RESULT],
			kinds[X_ACK], kinds[X_NACK], matched);
	}
	check_complete();
	if (n_deferred)
		VIOLATION("model: deferred DATA left");
	/* every mbuf is back or kept by an open round: nothing sent twice, nothing leaked */
	in_use = IN_MBUFS - rte_mempool_avail_count(in_pool);
	kept = kept_data(false);
	if (in_use != kept)
		VIOLATION("%u input mbufs not returned, %u of them kept by open rounds", in_use,
			  kept);
	in_use = HDR_MBUFS - rte_mempool_avail_count(sw->hdr_pool);
	if (in_use)
		VIOLATION("%u header mbufs not returned", in_use);
	return 0;
}
