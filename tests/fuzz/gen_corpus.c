/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writes the seed corpus of fuzz_pipeline into a directory: one file per
 * scenario, in the input format of fuzz_setup.h. No DPDK.
 *
 *   cais-gen-corpus DIR
 *
 * The seeds in tests/fuzz/corpus/ are this program's output; regenerate
 * them after changing the format or the installed sessions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/b16.h"
#include "../common/frames.h"
#include "fuzz_setup.h"

#define MAX_INPUT (64 * 1024)

struct input {
	uint8_t b[MAX_INPUT];
	size_t len;
};

static struct tf_end agg, member[FZ_A_N], mb_b, stranger;
static const char *dir;

static struct tf_end
end_of(const uint8_t mac[6], const uint8_t ip[4], uint16_t port)
{
	struct tf_end e;

	memcpy(e.mac, mac, 6);
	memcpy(&e.ip, ip, 4);
	e.port = port;
	return e;
}

static void
addresses(void)
{
	uint8_t mac[6], ip[4];
	uint16_t port;
	static const uint8_t smac[6] = {0x02, 0, 0, 0, 0x09, 0x09};
	static const uint8_t sip[4] = {10, 0, 0, 99};

	agg = end_of(fz_agg_mac, fz_agg_ip, CAIS_UDP_PORT);
	for (unsigned int r = 0; r < FZ_A_N; r++) {
		fz_member_a(r, mac, ip, &port);
		member[r] = end_of(mac, ip, port);
	}
	fz_member_b(mac, ip, &port);
	mb_b = end_of(mac, ip, port);
	stranger = end_of(smac, sip, 45000);
}

static void
rec(struct input *in, uint8_t ctl, const uint8_t *frame, size_t len)
{
	if (in->len + FZ_REC_HDR + len > MAX_INPUT) {
		fprintf(stderr, "input too long\n");
		exit(1);
	}
	in->b[in->len] = ctl;
	in->b[in->len + 1] = (uint8_t)(len >> 8);
	in->b[in->len + 2] = (uint8_t)len;
	memcpy(in->b + in->len + FZ_REC_HDR, frame, len);
	in->len += FZ_REC_HDR + len;
}

static void
save(const struct input *in, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(in->b, 1, in->len, f) != in->len || fclose(f) != 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* A DATA record of session A from rank r (on port r % 2). */
static void
data_a(struct input *in, uint8_t ctl, uint32_t tensor, uint32_t seq, unsigned int r, uint16_t count,
       int32_t base)
{
	uint8_t b[FZ_MAX_FRAME];
	struct cais_fields f;
	int32_t v[CAIS_MAX_ELEMS];
	size_t len;

	cais_data_fields(&f, FZ_A_TENANT, FZ_A_SESSION, tensor, seq, FZ_A_SLOTS, (uint8_t)r, count);
	for (unsigned int i = 0; i < count; i++)
		v[i] = base + (int32_t)(i * 1000 + r);
	len = tf_cais_frame(b, &member[r], &agg, &f, v, count);
	rec(in, (uint8_t)(ctl | (r & 1)), b, len);
}

/* A DATA record from src with fields f and n_values values. */
static void
data_raw(struct input *in, uint8_t ctl, const struct tf_end *src, const struct cais_fields *f,
	 size_t n_values)
{
	uint8_t b[FZ_MAX_FRAME];
	int32_t v[CAIS_MAX_ELEMS];
	size_t len;

	for (size_t i = 0; i < n_values; i++)
		v[i] = (int32_t)(i * 7 - 3);
	len = tf_cais_frame(b, src, &agg, f, v, n_values);
	rec(in, ctl, b, len);
}

/*
 * A BLOCK16 DATA record from src with fields f (dtype set here): block
 * exponents e0, e0 + 1, ..., m of every size; payload cut to plen bytes
 * (0: whole).
 */
static void
data_b16(struct input *in, uint8_t ctl, const struct tf_end *src, struct cais_fields f,
	 unsigned int e0, size_t plen)
{
	uint8_t b[FZ_MAX_FRAME], exps[CAIS_MAX_ELEMS / CAIS_B16_BLOCK];
	int16_t m[CAIS_MAX_ELEMS];
	size_t full;

	for (unsigned int k = 0; k < CAIS_MAX_ELEMS / CAIS_B16_BLOCK; k++)
		exps[k] = (uint8_t)(e0 + k);
	for (unsigned int i = 0; i < f.count; i++)
		m[i] = (int16_t)(i % 3 == 0   ? 32767 - (int)(i * 5 + f.rank)
				 : i % 3 == 1 ? -(int)(i * 1000 + f.rank) - 1
					      : (int)(f.seq % 7 + f.rank));
	if (f.count > 4)
		m[4] = INT16_MIN;
	f.dtype = CAIS_DT_BLOCK16;
	full = tb16_encode(b + CAIS_FRAME_OVERHEAD, exps, m, f.count);
	plen = plen ? plen : full;
	tf_udp_headers(b, src, &agg, CAIS_HDR_LEN + plen);
	cais_hdr_build((struct cais_hdr *)(b + CAIS_FRAME_HDR_OFF), &f);
	rec(in, ctl, b, CAIS_FRAME_OVERHEAD + plen);
}

static struct cais_fields
fields_a(uint32_t tensor, uint32_t seq, uint8_t rank, uint16_t count)
{
	struct cais_fields f;

	cais_data_fields(&f, FZ_A_TENANT, FZ_A_SESSION, tensor, seq, FZ_A_SLOTS, rank, count);
	return f;
}

/* Complete rounds seq0 .. seq0 + rounds - 1 of a tensor, one frame per burst. */
static void
rounds(struct input *in, uint32_t tensor, uint32_t seq0, unsigned int nrounds, uint16_t count,
       int32_t base, uint8_t ctl)
{
	for (uint32_t s = seq0; s != seq0 + nrounds; s++)
		for (unsigned int r = 0; r < FZ_A_N; r++)
			data_a(in, ctl, tensor, s, r, count, base + (int32_t)s);
}

static void
seeds_rounds(void)
{
	static struct input in;

	/* sum, every slot and set, two passes (new rounds overwrite) */
	in.len = 0;
	rounds(&in, 1, 0, 2 * 2 * FZ_A_SLOTS, FZ_A_ELEMS, 1, FZ_CTL_END_BURST);
	save(&in, "rounds-sum");
	/* the same in one burst per round */
	in.len = 0;
	for (uint32_t s = 0; s < 4; s++)
		for (unsigned int r = 0; r < FZ_A_N; r++)
			data_a(&in, r == FZ_A_N - 1 ? FZ_CTL_END_BURST : 0, 1, s, r, 3, -5);
	save(&in, "rounds-sum-burst");
	/* max, min, avg */
	in.len = 0;
	rounds(&in, 2, 0, 3, 5, -100, FZ_CTL_END_BURST);
	save(&in, "rounds-max");
	in.len = 0;
	rounds(&in, 3, 0, 3, 5, 100, FZ_CTL_END_BURST);
	save(&in, "rounds-min");
	in.len = 0;
	rounds(&in, 4, 0, 3, FZ_A_ELEMS, 7, FZ_CTL_END_BURST);
	save(&in, "rounds-avg");
	/* saturation: every rank sends INT32_MAX (sum overflows, OVERFLOW flag) */
	in.len = 0;
	for (unsigned int r = 0; r < FZ_A_N; r++)
		data_a(&in, FZ_CTL_END_BURST, 1, 0, r, 2, INT32_MAX - 1000);
	for (unsigned int r = 0; r < FZ_A_N; r++)
		data_a(&in, FZ_CTL_END_BURST, 1, 1, r, 2, INT32_MIN);
	save(&in, "rounds-overflow");
	/* a lost RESULT of a saturated round: the resend carries OVERFLOW too */
	in.len = 0;
	for (unsigned int r = 0; r < FZ_A_N; r++)
		data_a(&in, FZ_CTL_END_BURST, 1, 5, r, 2, INT32_MIN + 10);
	data_a(&in, FZ_CTL_END_BURST, 1, 5, 0, 2, INT32_MIN + 10);
	data_a(&in, FZ_CTL_END_BURST, 1, 5, 3, 2, INT32_MIN + 10);
	save(&in, "resend-overflow");
	/* around the wrap of seq */
	in.len = 0;
	rounds(&in, 1, 0xFFFFFFFEu, 4, 2, 0, FZ_CTL_END_BURST);
	save(&in, "rounds-wrap");
	/* lost RESULT: a rank resends after completion; duplicates; stale; inconsistent count */
	in.len = 0;
	data_a(&in, FZ_CTL_END_BURST, 1, 0, 0, 4, 1);
	data_a(&in, FZ_CTL_END_BURST, 1, 0, 0, 4, 1); /* duplicate */
	data_a(&in, FZ_CTL_END_BURST, 1, 0, 1, 3, 1); /* count differs */
	data_a(&in, FZ_CTL_END_BURST, 1, 0, 1, 4, 1);
	data_a(&in, FZ_CTL_END_BURST, 2, 0, 2, 4, 1); /* tensor differs */
	data_a(&in, FZ_CTL_END_BURST, 1, 0, 2, 4, 1);
	data_a(&in, FZ_CTL_END_BURST, 1, 0, 3, 4, 1);		     /* completes */
	data_a(&in, FZ_CTL_END_BURST, 1, 0, 2, 4, 1 | FZ_CTL_STATS); /* resend */
	data_a(&in, FZ_CTL_END_BURST, 1, 8, 0, 4, 1); /* newer round, same slot/set */
	data_a(&in, FZ_CTL_END_BURST, 1, 0, 3, 4, 1); /* stale */
	data_a(&in, FZ_CTL_END_BURST | FZ_CTL_STATS, 1, 4, 3, 4, 1);
	save(&in, "reliability");
	/*
	 * E11: rank 3's DATA of seq 0 lost; 2 and 4 (lcore 0's rounds, as 0)
	 * complete with WAIT to ranks 0-2, and 4 NACKs rank 3; its DATA, and a
	 * lost RESULT of 2 sent again with WAIT while 0 waits (rank 1's)
	 */
	in.len = 0;
	for (unsigned int r = 0; r < FZ_A_N - 1; r++)
		data_a(&in, FZ_CTL_END_BURST, 1, 0, r, 4, 9);
	for (uint32_t s = 1; s <= 4; s++)
		for (unsigned int r = 0; r < FZ_A_N; r++)
			data_a(&in, FZ_CTL_END_BURST, 1, s, r, 4, 9 + (int32_t)s);
	data_a(&in, FZ_CTL_END_BURST, 1, 2, 1, 4, 11);
	data_a(&in, FZ_CTL_END_BURST, 1, 2, 3, 4, 11);
	data_a(&in, FZ_CTL_END_BURST | FZ_CTL_STATS, 1, 0, 3, 4, 9);
	save(&in, "wait-nack");
	/*
	 * E12: QUERYs (header only; one with a payload) of rank 3, whose DATA of
	 * 0 is lost (NACK), rank 0 (ACK), rank 3 of 2, which it sent (ACK, and
	 * 0 NACKed), rank 1 of 2 and of 4, not sent (NACK); 0 completes and a
	 * QUERY gets its RESULT again
	 */
	in.len = 0;
	for (unsigned int r = 0; r < FZ_A_N - 1; r++)
		data_a(&in, FZ_CTL_END_BURST, 1, 0, r, 4, 9);
	data_a(&in, FZ_CTL_END_BURST, 1, 2, 0, 4, 3);
	data_a(&in, FZ_CTL_END_BURST, 1, 2, 3, 4, 3);
	{
		static const struct {
			uint32_t seq;
			unsigned int r;
			size_t n;
		} q[] = {{0, 3, 0}, {0, 0, 0}, {2, 3, 0}, {2, 1, 4}, {4, 1, 0}};

		for (unsigned int i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
			struct cais_fields qi = fields_a(1, q[i].seq, (uint8_t)q[i].r, 4);

			qi.flags = CAIS_F_QUERY;
			data_raw(&in, FZ_CTL_END_BURST | (q[i].r & 1), &member[q[i].r], &qi,
				 q[i].n);
		}
		struct cais_fields qf = fields_a(1, 0, 1, 4);

		data_a(&in, FZ_CTL_END_BURST, 1, 0, 3, 4, 9);
		qf.flags = CAIS_F_QUERY;
		data_raw(&in, FZ_CTL_END_BURST | FZ_CTL_STATS | 1, &member[1], &qf, 0);
	}
	save(&in, "query");
	/* session B: one rank, every DATA completes a round */
	in.len = 0;
	for (uint32_t s = 0; s < 4; s++) {
		struct cais_fields f;

		cais_data_fields(&f, FZ_B_TENANT, FZ_B_SESSION, FZ_B_TENSOR, s, FZ_B_SLOTS, 0,
				 FZ_B_ELEMS);
		data_raw(&in, FZ_CTL_END_BURST, &mb_b, &f, FZ_B_ELEMS);
	}
	save(&in, "session-b");
}

static void
seeds_rejects(void)
{
	static struct input in;
	struct cais_fields f;
	struct tf_end src;

	in.len = 0;
	f = fields_a(1, 0, 0, 0); /* count 0 */
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 0);
	save(&in, "reject-count0");
	in.len = 0;
	f = fields_a(1, 0, 0, FZ_A_ELEMS + 1); /* count > elems_per_packet */
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, FZ_A_ELEMS + 1);
	save(&in, "reject-count-big");
	in.len = 0;
	f = fields_a(1, 0, 0, 4); /* count > bytes present */
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 2);
	save(&in, "reject-count-short");
	in.len = 0;
	f = fields_a(1, 0, 0, 4);
	f.dtype = 1;
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 4);
	save(&in, "reject-dtype");
	in.len = 0;
	f = fields_a(1, 0, 0, 4);
	f.slot = FZ_A_SLOTS;
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 4);
	save(&in, "reject-no-slot");
	in.len = 0;
	f = fields_a(77, 0, 0, 4);
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 4);
	save(&in, "reject-unknown-tensor");
	in.len = 0;
	f = fields_a(1, 0, 1, 4);
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 4); /* rank 1 from rank 0's address */
	src = member[0];
	src.port++;
	f = fields_a(1, 0, 0, 4);
	data_raw(&in, FZ_CTL_END_BURST | 1, &src, &f, 4); /* wrong port */
	f = fields_a(1, 0, FZ_A_N, 4);
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 4); /* rank >= n */
	data_raw(&in, FZ_CTL_END_BURST, &stranger, &f, 4);
	save(&in, "reject-not-member");
	in.len = 0;
	f = fields_a(1, 0, 0, 4);
	data_raw(&in, FZ_CTL_END_BURST | FZ_OP_FWD_ONLY << FZ_CTL_OP_SHIFT, &member[0], &f, 4);
	data_raw(&in, FZ_CTL_END_BURST, &member[1], &f, 4);
	f = fields_a(1, 0, 1, 4);
	data_raw(&in, FZ_CTL_END_BURST | FZ_OP_COMPUTE << FZ_CTL_OP_SHIFT, &member[1], &f, 4);
	save(&in, "reject-fwd-only");
	/* the tensor removed and re-added between DATA */
	in.len = 0;
	data_a(&in, FZ_CTL_END_BURST, 2, 0, 0, 4, 1);
	data_a(&in, FZ_CTL_END_BURST | FZ_OP_TOGGLE_TENSOR << FZ_CTL_OP_SHIFT, 2, 0, 1, 4, 1);
	data_a(&in, FZ_CTL_END_BURST | FZ_OP_TOGGLE_TENSOR << FZ_CTL_OP_SHIFT, 2, 0, 2, 4, 1);
	data_a(&in, FZ_CTL_END_BURST, 2, 0, 3, 4, 1);
	data_a(&in, FZ_CTL_END_BURST, 2, 0, 1, 4, 1);
	save(&in, "tensor-toggle");
	/* slot/set disagreeing with seq: silent drop */
	in.len = 0;
	f = fields_a(1, 5, 0, 4);
	f.set = !f.set;
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 4);
	f = fields_a(1, 5, 0, 4);
	f.slot = (uint16_t)((f.slot + 1) % FZ_A_SLOTS);
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 4);
	save(&in, "slot-mismatch");
	/* RESULT and REJECT addressed to the switch */
	in.len = 0;
	f = fields_a(1, 0, CAIS_RANK_NONE, 4);
	f.type = CAIS_TYPE_RESULT;
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 4);
	f.type = CAIS_TYPE_REJECT;
	f.count = 0;
	f.reason = CAIS_R_NO_SLOT;
	data_raw(&in, FZ_CTL_END_BURST, &member[0], &f, 0);
	save(&in, "not-data");
	/* a burst of REJECTs from one sender (rate limit) */
	in.len = 0;
	f = fields_a(77, 0, 0, 1);
	for (unsigned int i = 0; i < FZ_MAX_FRAMES; i++) {
		f.seq = i;
		data_raw(&in, i % 8 == 7 ? FZ_CTL_END_BURST : 0, &stranger, &f, 1);
	}
	save(&in, "reject-burst");
}

/* BLOCK16 (E4): rounds of every op, OVERFLOW, REJECTs, a tensor changing its dtype. */
static void
seeds_b16(void)
{
	static struct input in;
	struct cais_fields f;

	/* sum, max, min; counts of one block, a short one, one element; a lost RESULT */
	in.len = 0;
	for (uint32_t t = FZ_A_B16_SUM; t <= FZ_A_B16_MIN; t++)
		for (uint32_t q = 0; q < 3; q++)
			for (unsigned int r = 0; r < FZ_A_N; r++)
				data_b16(&in, FZ_CTL_END_BURST | (r & 1), &member[r],
					 fields_a(t, t * 4 + q, (uint8_t)r,
						  (uint16_t)(q == 0   ? FZ_A_ELEMS
							     : q == 1 ? 5
								      : 1)),
					 (r * 13 + q * 7) % 41, 0);
	data_b16(&in, FZ_CTL_END_BURST, &member[2], fields_a(FZ_A_B16_MIN, 28, 2, FZ_A_ELEMS), 9,
		 0);
	f = fields_a(FZ_A_B16_MIN, 28, 2, FZ_A_ELEMS);
	f.flags = CAIS_F_RETX;
	data_b16(&in, FZ_CTL_END_BURST, &member[2], f, 9, 0);
	save(&in, "b16-rounds");
	/* exponents above the DATA limit: OVERFLOW, the exponent counted as 40 */
	in.len = 0;
	for (unsigned int r = 0; r < FZ_A_N; r++)
		data_b16(&in, FZ_CTL_END_BURST | (r & 1), &member[r],
			 fields_a(FZ_A_B16_SUM, 1, (uint8_t)r, 3), r == 1 ? 41 : 40, 0);
	for (unsigned int r = 0; r < FZ_A_N; r++)
		data_b16(&in, FZ_CTL_END_BURST | (r & 1), &member[r],
			 fields_a(FZ_A_B16_MAX, 2, (uint8_t)r, 2), r == 3 ? 255 : 0, 0);
	save(&in, "b16-overflow");
	/* BAD_DTYPE both ways and for an unknown dtype; BAD_COUNT for a short payload */
	in.len = 0;
	data_b16(&in, FZ_CTL_END_BURST, &member[0], fields_a(1, 0, 0, 4), 0, 0);
	f = fields_a(FZ_A_B16_SUM, 0, 1, 4);
	data_raw(&in, FZ_CTL_END_BURST | 1, &member[1], &f, 4);
	f.dtype = 2;
	data_raw(&in, FZ_CTL_END_BURST | 1, &member[1], &f, 4);
	data_b16(&in, FZ_CTL_END_BURST, &member[2], fields_a(FZ_A_B16_SUM, 0, 2, 8), 0, 19);
	data_b16(&in, FZ_CTL_END_BURST, &member[2], fields_a(FZ_A_B16_SUM, 0, 2, 3), 0, 4);
	data_b16(&in, FZ_CTL_END_BURST, &member[2], fields_a(FZ_A_B16_SUM, 0, 2, 9), 0, 0);
	save(&in, "b16-rejects");
	/* tensor 2 deleted and added again in BLOCK16 while its FIXED32 round is open */
	in.len = 0;
	data_a(&in, FZ_CTL_END_BURST, FZ_TOGGLE_TENSOR, 0, 0, 4, 1);
	data_a(&in, FZ_CTL_END_BURST | FZ_OP_TOGGLE_TENSOR << FZ_CTL_OP_SHIFT, FZ_TOGGLE_TENSOR, 0,
	       1, 4, 1);
	data_b16(&in, FZ_CTL_END_BURST | FZ_OP_TOGGLE_TENSOR << FZ_CTL_OP_SHIFT | 1, &member[1],
		 fields_a(FZ_TOGGLE_TENSOR, 0, 1, 4), 3, 0);
	for (unsigned int r = 0; r < FZ_A_N; r++)
		data_b16(&in, FZ_CTL_END_BURST | (r & 1), &member[r],
			 fields_a(FZ_TOGGLE_TENSOR, 1, (uint8_t)r, 4), 3, 0);
	data_a(&in, FZ_CTL_END_BURST, FZ_TOGGLE_TENSOR, 2, 0, 4, 1);
	save(&in, "b16-toggle");
	/* session B: one rank, each BLOCK16 DATA a round */
	in.len = 0;
	for (uint32_t q = 0; q < 4; q++) {
		cais_data_fields(&f, FZ_B_TENANT, FZ_B_SESSION, FZ_B_B16_TENSOR, q, FZ_B_SLOTS, 0,
				 (uint16_t)(FZ_B_ELEMS - q));
		data_b16(&in, FZ_CTL_END_BURST, &mb_b, f, q * 12, 0);
	}
	save(&in, "b16-session-b");
}

static void
seeds_other(void)
{
	static struct input in;
	uint8_t b[FZ_MAX_FRAME], full[FZ_MAX_FRAME];
	size_t len, flen;
	struct cais_fields f;
	int32_t v[4] = {1, 2, 3, 4};

	/* ARP: broadcast and unicast requests for the aggregator, another IP, a reply */
	in.len = 0;
	len = tf_arp_request(b, &member[0], agg.ip);
	rec(&in, FZ_CTL_END_BURST, b, len);
	memcpy(b, agg.mac, 6);
	rec(&in, FZ_CTL_END_BURST | 1, b, len);
	len = tf_arp_request(b, &member[1], member[2].ip);
	rec(&in, FZ_CTL_END_BURST, b, len);
	len = tf_arp_request(b, &member[1], agg.ip);
	memcpy(b, agg.mac, 6);
	b[CAIS_ETH_HLEN + 7] = 2;
	rec(&in, FZ_CTL_END_BURST, b, len);
	len = tf_arp_request(b, &member[2], agg.ip);
	rec(&in, FZ_CTL_END_BURST, b, len - 5); /* truncated */
	memset(b + len, 0, 18);
	rec(&in, FZ_CTL_END_BURST, b, 60); /* padded */
	save(&in, "arp");

	/* L2: hosts talking to each other, learning, broadcast, VLAN, IPv6 */
	in.len = 0;
	{
		struct tf_end a = member[0], c = member[1];

		len = tf_cais_frame(b, &a, &c, &(struct cais_fields){.type = 1, .count = 1}, v, 1);
		rec(&in, FZ_CTL_END_BURST, b, len); /* unknown destination: flooded */
		len = tf_cais_frame(b, &c, &a, &(struct cais_fields){.type = 1, .count = 1}, v, 1);
		rec(&in, FZ_CTL_END_BURST | 1, b, len); /* a is learned on port 0 */
		len = tf_cais_frame(b, &a, &c, &(struct cais_fields){.type = 1, .count = 1}, v, 1);
		rec(&in, FZ_CTL_END_BURST, b, len);	/* forwarded to port 1 */
		rec(&in, FZ_CTL_END_BURST | 1, b, len); /* same port: dropped */
		memset(b, 0xFF, 6);
		rec(&in, FZ_CTL_END_BURST, b, len); /* broadcast */
		b[12] = 0x86;
		b[13] = 0xDD;
		rec(&in, FZ_CTL_END_BURST, b, len);
		memcpy(b, agg.mac, 6);
		rec(&in, FZ_CTL_END_BURST, b, len); /* IPv6 to the aggregator MAC */
	}
	flen = tf_cais_frame(full, &member[0], &agg, &(struct cais_fields){.type = 1, .count = 1},
			     v, 1);
	memcpy(b, full, 12);
	b[12] = 0x81;
	b[13] = 0x00;
	b[14] = 0;
	b[15] = 5;
	memcpy(b + 16, full + 12, flen - 12);
	rec(&in, FZ_CTL_END_BURST, b, flen + 4); /* VLAN to the aggregator */
	memcpy(b, member[3].mac, 6);
	rec(&in, FZ_CTL_END_BURST, b, flen + 4); /* VLAN elsewhere */
	save(&in, "l2");

	/* malformed: truncated at each boundary, bad IP fields, bad CAIS fields */
	in.len = 0;
	f = fields_a(1, 0, 0, 4);
	flen = tf_cais_frame(full, &member[0], &agg, &f, v, 4);
	{
		static const size_t cuts[] = {0, 1, 13, 14, 20, 33, 34, 41, 42, 50, 65, 66, 81};

		for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
			rec(&in, FZ_CTL_END_BURST, full, cuts[i]);
	}
	{
		static const struct {
			unsigned int off;
			uint8_t val;
		} pokes[] = {
		    {14, 0x46}, {14, 0x44}, {14, 0x65}, {16, 0xFF}, {20, 0x20}, {21, 0x01},
		    {23, 6},	{23, 1},    {24, 0},	{33, 99},   {36, 0x12}, {38, 0},
		    {39, 3},	{42, 0},    {44, 0x21}, {44, 0x10}, {44, 0x12}, {45, 0x80},
		};

		for (size_t i = 0; i < sizeof(pokes) / sizeof(pokes[0]); i++) {
			memcpy(b, full, flen);
			b[pokes[i].off] = pokes[i].val;
			if (pokes[i].off != 24 && pokes[i].off < 34 && pokes[i].off != 33) {
				uint16_t c;

				b[24] = b[25] = 0;
				c = tf_csum(b + 14, 20);
				b[24] = (uint8_t)(c >> 8);
				b[25] = (uint8_t)c;
			}
			rec(&in, FZ_CTL_END_BURST, b, flen);
		}
	}
	memcpy(b, full, flen);
	memset(b + flen, 0, 30);
	rec(&in, FZ_CTL_END_BURST, b, flen + 30); /* padding: still DATA */
	save(&in, "malformed");

	/* group and zero source MACs: dropped, never answered */
	in.len = 0;
	{
		static const uint8_t bad[][6] = {{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01},
						 {0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
						 {0x00, 0x00, 0x00, 0x00, 0x00, 0x00}};

		for (size_t i = 0; i < 3; i++) {
			f = fields_a(77, 0, 0, 1);
			flen = tf_cais_frame(b, &member[0], &agg, &f, v, 1);
			memcpy(b + 6, bad[i], 6);
			rec(&in, FZ_CTL_END_BURST, b, flen);
			len = tf_arp_request(b, &member[1], agg.ip);
			memcpy(b + 6, bad[i], 6);
			rec(&in, FZ_CTL_END_BURST, b, len);
		}
	}
	save(&in, "group-src-mac");

	/* ports: 2 (a third port), 3 (not driven by the switch), two-segment mbufs */
	in.len = 0;
	for (unsigned int r = 0; r < FZ_A_N; r++) {
		uint8_t ctl = r == 0 ? FZ_CTL_PORT_HI : r == 1 ? FZ_CTL_MULTISEG : 0;

		data_a(&in, (uint8_t)(ctl | FZ_CTL_END_BURST), 1, 1, r, 2, 9);
	}
	data_a(&in, FZ_CTL_END_BURST, 1, 1, 1, 2, 9); /* rank 1 again, as one segment */
	data_a(&in, FZ_CTL_END_BURST | FZ_CTL_PORT_HI | FZ_CTL_PORT, 1, 2, 0, 2, 9); /* port 3 */
	len = tf_arp_request(b, &member[2], agg.ip);
	rec(&in, FZ_CTL_END_BURST | FZ_CTL_PORT_HI, b, len);
	rec(&in, FZ_CTL_END_BURST | FZ_CTL_MULTISEG, b, len);
	len = tf_arp_request(b, &member[2], member[3].ip);
	rec(&in, FZ_CTL_END_BURST | FZ_CTL_PORT_HI, b, len); /* flooded to ports 0 and 1 */
	save(&in, "ports");

	/* ACKs (docs/PROTOCOL.md E6): retransmissions into an open round, one
	 * sender past its ACK budget, a network duplicate (no RETX), the round's end */
	in.len = 0;
	for (unsigned int r = 0; r + 1 < FZ_A_N; r++)
		data_a(&in, FZ_CTL_END_BURST, 1, 9, r, 4, 5);
	for (unsigned int k = 0; k < 56; k++) { /* FZ_MAX_FRAMES is 64 in all */
		f = fields_a(1, 9, 0, 4);
		f.flags = CAIS_F_RETX;
		data_raw(&in, k % 8 == 7 ? FZ_CTL_END_BURST : 0, &member[0], &f, 4);
	}
	f = fields_a(1, 9, 1, 4);
	data_raw(&in, FZ_CTL_END_BURST | FZ_CTL_PORT, &member[1], &f, 4);
	data_a(&in, FZ_CTL_END_BURST, 1, 9, FZ_A_N - 1, 4, 5);
	save(&in, "acks");

	/* forgeries (docs/PROTOCOL.md E5): rank 0's address from a stranger's MAC, then
	 * from its own MAC behind another port once it is bound; ARP that claims the
	 * aggregator's address; a RESULT from the aggregator's address; a frame from
	 * its MAC; the real round in between */
	in.len = 0;
	{
		struct tf_end fake = member[0], liar = stranger;

		memcpy(fake.mac, stranger.mac, 6);
		f = fields_a(1, 5, 0, 2);
		data_raw(&in, FZ_CTL_END_BURST | FZ_CTL_PORT_HI, &fake, &f, 2);
		data_a(&in, FZ_CTL_END_BURST, 1, 5, 0, 2, 1); /* the real one, port 0 */
		data_raw(&in, FZ_CTL_END_BURST | FZ_CTL_PORT, &member[0], &f, 2);
		for (unsigned int r = 1; r < FZ_A_N; r++)
			data_a(&in, FZ_CTL_END_BURST, 1, 5, r, 2, 1);
		liar.ip = agg.ip;
		len = tf_arp_request(b, &liar, agg.ip); /* gratuitous */
		rec(&in, FZ_CTL_END_BURST | FZ_CTL_PORT_HI, b, len);
		len = tf_arp_request(b, &liar, member[1].ip);
		b[14 + 7] = 2; /* a reply */
		memcpy(b, member[1].mac, 6);
		rec(&in, FZ_CTL_END_BURST | FZ_CTL_PORT_HI, b, len);
		liar.port = CAIS_UDP_PORT;
		f = fields_a(1, 5, 0, 2);
		f.type = CAIS_TYPE_RESULT;
		f.rank = CAIS_RANK_NONE;
		len = tf_cais_frame(b, &liar, &member[1], &f, v, 2);
		rec(&in, FZ_CTL_END_BURST | FZ_CTL_PORT_HI, b, len);
		liar = agg;
		len = tf_arp_request(b, &liar, member[1].ip);
		rec(&in, FZ_CTL_END_BURST | FZ_CTL_PORT_HI, b, len);
	}
	save(&in, "forged");

	/* everything at once, with bursts */
	in.len = 0;
	for (unsigned int r = 0; r < FZ_A_N; r++)
		data_a(&in, 0, 1, 0, r, FZ_A_ELEMS, 3);
	len = tf_arp_request(b, &member[3], agg.ip);
	rec(&in, 0, b, len);
	f = fields_a(1, 1, 0, 0);
	data_raw(&in, 0, &member[0], &f, 0);
	for (unsigned int r = 0; r < FZ_A_N; r++)
		data_a(&in, FZ_CTL_STATS, 3, 1, r, 2, -3);
	data_a(&in, FZ_CTL_END_BURST | FZ_OP_FWD_ONLY << FZ_CTL_OP_SHIFT, 1, 2, 0, 2, 0);
	data_a(&in, FZ_CTL_END_BURST | FZ_OP_COMPUTE << FZ_CTL_OP_SHIFT, 1, 2, 0, 2, 0);
	save(&in, "mixed");
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	mkdir(dir, 0755);
	addresses();
	seeds_rounds();
	seeds_rejects();
	seeds_b16();
	seeds_other();
	return 0;
}
