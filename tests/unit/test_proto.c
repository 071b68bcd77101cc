/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * include/cais/proto.h against PROTOCOL.md sections 1-3: the header's
 * build/read round trip, the byte offset and byte order of every field,
 * cais_hdr_check() on every failure, the X-macro names, serial-number
 * arithmetic across the 2^32 wrap, and slot/set derivation. No DPDK.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cais/proto.h>

/* A header with every field distinct, so a swapped or shifted field shows. */
static const struct cais_fields sample = {
    .type = CAIS_TYPE_DATA,
    .flags = CAIS_F_RETX | CAIS_F_FWD_ONLY,
    .tenant = 0x1234,
    .session = 0x5678,
    .tensor = 0x9ABCDEF0u,
    .seq = 0x0F1E2D3Cu,
    .slot = 0x2345,
    .set = 1,
    .rank = 0x42,
    .dtype = 0,
    .count = 0x0102,
    .reason = 0x0304,
};

static void
assert_fields_equal(const struct cais_fields *a, const struct cais_fields *b)
{
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->tenant, b->tenant);
	assert_int_equal(a->session, b->session);
	assert_int_equal(a->tensor, b->tensor);
	assert_int_equal(a->seq, b->seq);
	assert_int_equal(a->slot, b->slot);
	assert_int_equal(a->set, b->set);
	assert_int_equal(a->rank, b->rank);
	assert_int_equal(a->dtype, b->dtype);
	assert_int_equal(a->count, b->count);
	assert_int_equal(a->reason, b->reason);
}

static void
test_sizes(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct cais_hdr), 24);
	assert_int_equal(CAIS_HDR_LEN, 24);
	assert_int_equal(CAIS_MAGIC, 0xCA15);
	assert_int_equal(CAIS_UDP_PORT, 51733);
	assert_int_equal(CAIS_UDP_PORT, 0xCA15);
	assert_int_equal(CAIS_CTL_PORT, 51734);
	assert_int_equal(CAIS_MGR_PORT, 51735);
	assert_int_equal(CAIS_FRAME_HDR_OFF, 14 + 20 + 8);
	assert_int_equal(CAIS_FRAME_OVERHEAD, 14 + 20 + 8 + 24);
	assert_int_equal(CAIS_RANK_NONE, 0xFF);
	assert_int_equal(CAIS_SET_BIT, 0x8000);
	assert_int_equal(CAIS_SLOT_MASK, 0x7FFF);
	assert_int_equal(CAIS_MAX_SLOTS, 32768);
	assert_int_equal(CAIS_MAX_WORLD, 255);
	/* 2048 elements fit a 9000-byte MTU: IPv4 + UDP + CAIS + payload <= 9000 */
	assert_true(CAIS_IP_HLEN + CAIS_UDP_HLEN + CAIS_HDR_LEN + CAIS_MAX_ELEMS * 4 <= 9000);
	assert_int_equal(CAIS_FLAGS_ALL, 0x3F);
}

static void
test_round_trip(void **state)
{
	struct cais_hdr h;
	struct cais_fields out;
	struct cais_fields f = sample;

	(void)state;
	cais_hdr_build(&h, &f);
	memset(&out, 0xAA, sizeof(out));
	cais_hdr_read(&h, &out);
	assert_fields_equal(&f, &out);
	assert_int_equal(cais_hdr_check(&h, sizeof(h)), CAIS_HDR_OK);

	/* set bit 0 and every type */
	for (unsigned int type = CAIS_TYPE_DATA; type <= CAIS_TYPE_REJECT; type++)
		for (unsigned int set = 0; set < 2; set++) {
			f = sample;
			f.type = (uint8_t)type;
			f.set = (uint8_t)set;
			cais_hdr_build(&h, &f);
			cais_hdr_read(&h, &out);
			assert_fields_equal(&f, &out);
			assert_int_equal(cais_hdr_type(&h), type);
		}

	/* extremes of every field */
	f.type = CAIS_TYPE_REJECT;
	f.flags = CAIS_FLAGS_ALL;
	f.tenant = 0xFFFF;
	f.session = 0xFFFF;
	f.tensor = 0xFFFFFFFFu;
	f.seq = 0xFFFFFFFFu;
	f.slot = CAIS_SLOT_MASK;
	f.set = 1;
	f.rank = 0xFF;
	f.dtype = 0xFF;
	f.count = 0xFFFF;
	f.reason = 0xFFFF;
	cais_hdr_build(&h, &f);
	cais_hdr_read(&h, &out);
	assert_fields_equal(&f, &out);
	memset(&f, 0, sizeof(f));
	f.type = CAIS_TYPE_DATA;
	cais_hdr_build(&h, &f);
	cais_hdr_read(&h, &out);
	assert_fields_equal(&f, &out);

	/* the slot index is masked to 15 bits: it never spills into the set bit */
	f = sample;
	f.slot = 0xFFFF;
	f.set = 0;
	cais_hdr_build(&h, &f);
	cais_hdr_read(&h, &out);
	assert_int_equal(out.slot, 0x7FFF);
	assert_int_equal(out.set, 0);
	/* any nonzero set means set 1 */
	f.set = 7;
	cais_hdr_build(&h, &f);
	cais_hdr_read(&h, &out);
	assert_int_equal(out.set, 1);
}

/* Every field at the offset and in the byte order of PROTOCOL.md's table. */
static void
test_wire_bytes(void **state)
{
	uint8_t b[CAIS_HDR_LEN];
	struct cais_fields f = sample;
	static const uint8_t want[CAIS_HDR_LEN] = {
	    0xCA, 0x15,		    /* 0  magic */
	    0x11,		    /* 2  version 1, type DATA */
	    0x09,		    /* 3  flags RETX | FWD_ONLY */
	    0x12, 0x34,		    /* 4  tenant */
	    0x56, 0x78,		    /* 6  session */
	    0x9A, 0xBC, 0xDE, 0xF0, /* 8  tensor */
	    0x0F, 0x1E, 0x2D, 0x3C, /* 12 seq */
	    0xA3, 0x45,		    /* 16 slot: set bit | 0x2345 */
	    0x42,		    /* 18 rank */
	    0x00,		    /* 19 dtype */
	    0x01, 0x02,		    /* 20 count */
	    0x03, 0x04,		    /* 22 reason */
	};

	(void)state;
	memset(b, 0xEE, sizeof(b));
	cais_hdr_build((struct cais_hdr *)b, &f);
	assert_memory_equal(b, want, sizeof(want));

	/* one field at a time: each lands in its bytes and nowhere else */
	memset(&f, 0, sizeof(f));
	cais_hdr_build((struct cais_hdr *)b, &f);
	{
		static const uint8_t zero[CAIS_HDR_LEN] = {0xCA, 0x15, 0x10};
		assert_memory_equal(b, zero, sizeof(zero));
	}
#define ONE_FIELD(field, value, off, ...)                                                          \
	do {                                                                                       \
		uint8_t w[CAIS_HDR_LEN] = {0xCA, 0x15, 0x10};                                      \
		static const uint8_t bytes[] = {__VA_ARGS__};                                      \
		memset(&f, 0, sizeof(f));                                                          \
		f.field = value;                                                                   \
		cais_hdr_build((struct cais_hdr *)b, &f);                                          \
		memcpy(w + (off), bytes, sizeof(bytes));                                           \
		if (off == 2)                                                                      \
			w[2] = (uint8_t)(0x10 | bytes[0]);                                         \
		assert_memory_equal(b, w, sizeof(w));                                              \
	} while (0)
	ONE_FIELD(type, 3, 2, 0x03);
	ONE_FIELD(flags, 0x04, 3, 0x04);
	ONE_FIELD(tenant, 0xBEEF, 4, 0xBE, 0xEF);
	ONE_FIELD(session, 0x0102, 6, 0x01, 0x02);
	ONE_FIELD(tensor, 0x01020304u, 8, 0x01, 0x02, 0x03, 0x04);
	ONE_FIELD(seq, 0xA1B2C3D4u, 12, 0xA1, 0xB2, 0xC3, 0xD4);
	ONE_FIELD(slot, 0x1234, 16, 0x12, 0x34);
	ONE_FIELD(set, 1, 16, 0x80, 0x00);
	ONE_FIELD(rank, 0xFE, 18, 0xFE);
	ONE_FIELD(dtype, 0x07, 19, 0x07);
	ONE_FIELD(count, 0x0800, 20, 0x08, 0x00);
	ONE_FIELD(reason, 0x0006, 22, 0x00, 0x06);
#undef ONE_FIELD

	/* reading raw bytes gives host-order fields */
	{
		struct cais_fields out;

		cais_hdr_read((const struct cais_hdr *)want, &out);
		assert_fields_equal(&sample, &out);
	}
}

static void
test_hdr_check(void **state)
{
	uint8_t b[CAIS_HDR_LEN + 8];
	struct cais_fields f = sample;

	(void)state;
	f.flags = 0;
	cais_hdr_build((struct cais_hdr *)b, &f);

	/* short: every length below 24, whatever the bytes */
	for (size_t len = 0; len < CAIS_HDR_LEN; len++)
		assert_int_equal(cais_hdr_check(b, len), CAIS_HDR_SHORT);
	assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_OK);
	assert_int_equal(cais_hdr_check(b, sizeof(b)), CAIS_HDR_OK);

	/* magic: either byte */
	b[0] = 0x15;
	b[1] = 0xCA; /* byte-swapped */
	assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_BAD_MAGIC);
	b[0] = 0xCA;
	b[1] = 0x16;
	assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_BAD_MAGIC);
	b[0] = 0xCB;
	b[1] = 0x15;
	assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_BAD_MAGIC);
	b[0] = 0xCA;
	/* magic is checked before the length? no: length first */
	b[1] = 0;
	assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN - 1), CAIS_HDR_SHORT);
	b[1] = 0x15;

	/* version: every value but 1 */
	for (unsigned int v = 0; v < 16; v++) {
		b[2] = (uint8_t)(v << 4 | CAIS_TYPE_DATA);
		assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN),
				 v == 1 ? CAIS_HDR_OK : CAIS_HDR_BAD_VERSION);
	}
	/* type: 0 and 6..15 invalid (4 is ACK, E6; 5 NACK, E11) */
	for (unsigned int t = 0; t < 16; t++) {
		b[2] = (uint8_t)(0x10 | t);
		assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN),
				 (t >= 1 && t <= 5) ? CAIS_HDR_OK : CAIS_HDR_BAD_TYPE);
	}
	/* a bad version wins over a bad type */
	b[2] = 0x20;
	assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_BAD_VERSION);
	b[2] = 0x11;
	/*
	 * flags: the four bits of PROTOCOL.md are fine alone and together, bits
	 * 4..7 are not, but for WAIT (bit 4) on a RESULT (E11) and QUERY (bit 5)
	 * on a DATA (E12)
	 */
	for (unsigned int type = CAIS_TYPE_DATA; type <= CAIS_TYPE_NACK; type++) {
		b[2] = (uint8_t)(0x10 | type);
		for (unsigned int bit = 0; bit < 8; bit++) {
			bool ok = bit < 4 || (bit == 4 && type == CAIS_TYPE_RESULT) ||
				  (bit == 5 && type == CAIS_TYPE_DATA);

			b[3] = (uint8_t)(1u << bit);
			assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN),
					 ok ? CAIS_HDR_OK : CAIS_HDR_BAD_FLAGS);
		}
		b[3] = 0x0F;
		assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_OK);
		b[3] = 0x1F;
		assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN),
				 type == CAIS_TYPE_RESULT ? CAIS_HDR_OK : CAIS_HDR_BAD_FLAGS);
		b[3] = 0x2F;
		assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN),
				 type == CAIS_TYPE_DATA ? CAIS_HDR_OK : CAIS_HDR_BAD_FLAGS);
		b[3] = 0x3F; /* WAIT and QUERY: no type has both */
		assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_BAD_FLAGS);
		b[3] = 0xFF;
		assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_BAD_FLAGS);
	}
	b[2] = 0x11;
	/* a bad type wins over bad flags */
	b[2] = 0x1F;
	assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_BAD_TYPE);
	b[2] = 0x11;
	b[3] = 0;
	/* nothing else is checked: rank, dtype, count, reason may be anything */
	memset(b + 4, 0xFF, CAIS_HDR_LEN - 4);
	assert_int_equal(cais_hdr_check(b, CAIS_HDR_LEN), CAIS_HDR_OK);
}

/* cais_hdr_check() on an exact-size heap copy, so ASan catches a read past len. */
static void
test_hdr_check_exact(void **state)
{
	struct cais_fields f = sample;
	uint8_t full[CAIS_HDR_LEN];

	(void)state;
	f.flags = 0;
	cais_hdr_build((struct cais_hdr *)full, &f);
	for (size_t len = 0; len <= CAIS_HDR_LEN; len++) {
		uint8_t *p = malloc(len ? len : 1);

		assert_non_null(p);
		memcpy(p, full, len);
		assert_int_equal(cais_hdr_check(p, len),
				 len < CAIS_HDR_LEN ? CAIS_HDR_SHORT : CAIS_HDR_OK);
		free(p);
	}
}

static void
test_names(void **state)
{
	(void)state;
	assert_string_equal(cais_type_name(CAIS_TYPE_DATA), "data");
	assert_string_equal(cais_type_name(CAIS_TYPE_RESULT), "result");
	assert_string_equal(cais_type_name(CAIS_TYPE_REJECT), "reject");
	assert_int_equal(CAIS_TYPE_DATA, 1);
	assert_int_equal(CAIS_TYPE_RESULT, 2);
	assert_int_equal(CAIS_TYPE_REJECT, 3);
	assert_string_equal(cais_type_name(CAIS_TYPE_ACK), "ack");
	assert_int_equal(CAIS_TYPE_ACK, 4);
	assert_string_equal(cais_type_name(CAIS_TYPE_NACK), "nack");
	assert_int_equal(CAIS_TYPE_NACK, 5);
	assert_string_equal(cais_type_name(0), "?");
	for (unsigned int t = 6; t < 16; t++)
		assert_string_equal(cais_type_name(t), "?");

	assert_int_equal(CAIS_F_RETX, 0x01);
	assert_int_equal(CAIS_F_OVERFLOW, 0x02);
	assert_int_equal(CAIS_F_CONGESTED, 0x04);
	assert_int_equal(CAIS_F_FWD_ONLY, 0x08);
	assert_string_equal(cais_flag_name(CAIS_F_RETX), "retx");
	assert_string_equal(cais_flag_name(CAIS_F_OVERFLOW), "overflow");
	assert_string_equal(cais_flag_name(CAIS_F_CONGESTED), "congested");
	assert_string_equal(cais_flag_name(CAIS_F_FWD_ONLY), "fwd_only");
	assert_int_equal(CAIS_F_WAIT, 0x10);
	assert_string_equal(cais_flag_name(CAIS_F_WAIT), "wait");
	assert_int_equal(CAIS_F_QUERY, 0x20);
	assert_string_equal(cais_flag_name(CAIS_F_QUERY), "query");
	assert_string_equal(cais_flag_name(0), "?");
	assert_string_equal(cais_flag_name(0x03), "?"); /* one bit at a time */
	for (unsigned int bit = 6; bit < 8; bit++)
		assert_string_equal(cais_flag_name(1u << bit), "?");

	assert_int_equal(CAIS_R_NONE, 0);
	assert_int_equal(CAIS_R_UNKNOWN_TENSOR, 1);
	assert_int_equal(CAIS_R_NOT_MEMBER, 2);
	assert_int_equal(CAIS_R_NO_SLOT, 3);
	assert_int_equal(CAIS_R_FWD_ONLY, 4);
	assert_int_equal(CAIS_R_BAD_COUNT, 5);
	assert_int_equal(CAIS_R_BAD_DTYPE, 6);
	assert_int_equal(CAIS_R_MAX, 7);
	assert_string_equal(cais_reason_name(0), "none");
	assert_string_equal(cais_reason_name(CAIS_R_UNKNOWN_TENSOR), "unknown_tensor");
	assert_string_equal(cais_reason_name(CAIS_R_NOT_MEMBER), "not_member");
	assert_string_equal(cais_reason_name(CAIS_R_NO_SLOT), "no_slot");
	assert_string_equal(cais_reason_name(CAIS_R_FWD_ONLY), "fwd_only");
	assert_string_equal(cais_reason_name(CAIS_R_BAD_COUNT), "bad_count");
	assert_string_equal(cais_reason_name(CAIS_R_BAD_DTYPE), "bad_dtype");
	assert_string_equal(cais_reason_name(CAIS_R_MAX), "?");
	assert_string_equal(cais_reason_name(0xFFFF), "?");

	assert_int_equal(CAIS_DT_FIXED32, 0);

	assert_int_equal(CAIS_HDR_OK, 0);
	assert_int_equal(CAIS_HDR_CHECK_MAX, 6);
	assert_string_equal(cais_hdr_check_name(CAIS_HDR_OK), "ok");
	assert_string_equal(cais_hdr_check_name(CAIS_HDR_SHORT), "shorter than the 24-byte header");
	assert_string_equal(cais_hdr_check_name(CAIS_HDR_BAD_MAGIC), "magic is not 0xCA15");
	assert_string_equal(cais_hdr_check_name(CAIS_HDR_BAD_VERSION), "version is not 1");
	assert_string_equal(cais_hdr_check_name(CAIS_HDR_BAD_TYPE),
			    "type is not DATA, RESULT, REJECT, ACK or NACK");
	assert_string_equal(cais_hdr_check_name(CAIS_HDR_BAD_FLAGS), "reserved flag bits set");
	assert_string_equal(cais_hdr_check_name(CAIS_HDR_CHECK_MAX), "?");
	assert_string_equal(cais_hdr_check_name((enum cais_hdr_check) - 1), "?");
	/* every outcome has a distinct, non-empty text */
	for (int i = 0; i < CAIS_HDR_CHECK_MAX; i++) {
		assert_true(strlen(cais_hdr_check_name((enum cais_hdr_check)i)) > 0);
		for (int j = 0; j < i; j++)
			assert_string_not_equal(cais_hdr_check_name((enum cais_hdr_check)i),
						cais_hdr_check_name((enum cais_hdr_check)j));
	}
}

/* One definition of the reduce operations: names and values both ways. */
static void
test_op_names(void **state)
{
	(void)state;
	assert_string_equal(cais_op_name(CAIS_OP_SUM), "sum");
	assert_string_equal(cais_op_name(CAIS_OP_AVG), "avg");
	assert_string_equal(cais_op_name(CAIS_OP_MAX), "max");
	assert_string_equal(cais_op_name(CAIS_OP_MIN), "min");
	assert_string_equal(cais_op_name(CAIS_OP_COUNT), "?");
	assert_int_equal(CAIS_OP_SUM, 0);
	assert_int_equal(CAIS_OP_MIN, 3);
	for (unsigned int op = 0; op < CAIS_OP_COUNT; op++)
		assert_int_equal(cais_op_parse(cais_op_name(op)), (int)op);
	assert_int_equal(cais_op_parse("SUM"), -1);
	assert_int_equal(cais_op_parse(""), -1);
	assert_int_equal(cais_op_parse(NULL), -1);
}

static void
test_seq_before(void **state)
{
	(void)state;
	assert_true(cais_seq_before(0, 1));
	assert_false(cais_seq_before(1, 0));
	assert_false(cais_seq_before(5, 5));
	assert_false(cais_seq_before(0, 0));
	assert_false(cais_seq_before(0xFFFFFFFFu, 0xFFFFFFFFu));
	/* across the wrap: 0xFFFFFFFF is just before 0 */
	assert_true(cais_seq_before(0xFFFFFFFFu, 0));
	assert_false(cais_seq_before(0, 0xFFFFFFFFu));
	assert_true(cais_seq_before(0xFFFFFFF0u, 0x10));
	assert_false(cais_seq_before(0x10, 0xFFFFFFF0u));
	assert_true(cais_seq_before(0x7FFFFFFFu, 0x80000000u));
	assert_false(cais_seq_before(0x80000000u, 0x7FFFFFFFu));
	/* distance just below half the space: ordinary order */
	assert_true(cais_seq_before(0, 0x7FFFFFFFu));
	assert_false(cais_seq_before(0x7FFFFFFFu, 0));
	assert_true(cais_seq_before(0x80000001u, 0));
	/* (exactly half the space apart is undefined in RFC 1982: not tested) */
	/* a window of a few thousand around the wrap, both directions */
	for (uint32_t base = 0xFFFFF000u, i = 0; i < 0x2000; i++) {
		uint32_t a = base + i;
		for (uint32_t d = 1; d <= 64; d *= 2) {
			assert_true(cais_seq_before(a, a + d));
			assert_false(cais_seq_before(a + d, a));
		}
	}
}

static void
test_pool_size_ok(void **state)
{
	unsigned int ok = 0;

	(void)state;
	assert_false(cais_pool_size_ok(0));
	assert_true(cais_pool_size_ok(1));
	assert_true(cais_pool_size_ok(2));
	assert_false(cais_pool_size_ok(3));
	assert_true(cais_pool_size_ok(128));
	assert_false(cais_pool_size_ok(129));
	assert_true(cais_pool_size_ok(32768));
	assert_false(cais_pool_size_ok(32767));
	assert_false(cais_pool_size_ok(65536));
	assert_false(cais_pool_size_ok(0x80000000u));
	assert_false(cais_pool_size_ok(0xFFFFFFFFu));
	for (uint32_t s = 0; s <= 70000; s++)
		ok += cais_pool_size_ok(s);
	assert_int_equal(ok, 16); /* 2^0 .. 2^15 */
}

/* The lane of a seq (E11): slot index mod lanes; 0 and 1 lanes are one. */
static void
test_lane(void **state)
{
	(void)state;
	for (uint32_t seq = 0; seq < 100; seq++) {
		assert_int_equal(cais_lane(seq, 16, 0), 0);
		assert_int_equal(cais_lane(seq, 16, 1), 0);
		assert_int_equal(cais_lane(seq, 16, 2), seq % 2);
		assert_int_equal(cais_lane(seq, 16, 4), seq % 4);
		assert_int_equal(cais_lane(seq, 16, 3), (seq % 16) % 3);
		assert_int_equal(cais_lane(seq, 1024, 12), seq % 12);
	}
	/* the slot index, not the seq: 2^32 is no multiple of 3 */
	assert_int_equal(cais_lane(0xFFFFFFFFu, 16, 3), 0);
	assert_int_equal(cais_lane(0xFFFFFFFFu, 32768, 5), 32767 % 5);
	assert_int_equal(cais_lane(17, 16, 16), 1);
}

/* slot = seq mod S, set = (seq / S) mod 2, for S in 1..32768, including the wrap of seq. */
static void
test_slot_field(void **state)
{
	static const uint32_t pools[] = {1, 2, 4, 8, 128, 1024, 16384, 32768};

	(void)state;
	/* S = 1: slot always 0, set alternates with seq */
	assert_int_equal(cais_slot_field(0, 1), 0x0000);
	assert_int_equal(cais_slot_field(1, 1), 0x8000);
	assert_int_equal(cais_slot_field(2, 1), 0x0000);
	assert_int_equal(cais_slot_field(0xFFFFFFFFu, 1), 0x8000);
	/* S = 4 */
	assert_int_equal(cais_slot_field(0, 4), 0x0000);
	assert_int_equal(cais_slot_field(3, 4), 0x0003);
	assert_int_equal(cais_slot_field(4, 4), 0x8000);
	assert_int_equal(cais_slot_field(7, 4), 0x8003);
	assert_int_equal(cais_slot_field(8, 4), 0x0000);
	assert_int_equal(cais_slot_field(13, 4), 0x8001);
	/* S = 32768: the whole 15-bit index */
	assert_int_equal(cais_slot_field(32767, 32768), 0x7FFF);
	assert_int_equal(cais_slot_field(32768, 32768), 0x8000);
	assert_int_equal(cais_slot_field(65535, 32768), 0xFFFF);
	assert_int_equal(cais_slot_field(65536, 32768), 0x0000);
	assert_int_equal(cais_slot_field(0xFFFFFFFFu, 32768), 0xFFFF);

	for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++) {
		uint32_t s = pools[i];

		for (uint64_t q = 0; q < 3u * s + 5; q++) {
			uint16_t sf = cais_slot_field((uint32_t)q, s);

			assert_int_equal(sf & CAIS_SLOT_MASK, q % s);
			assert_int_equal(sf >> 15, (q / s) % 2);
		}
		/* across the wrap of seq: 2^32 is a multiple of 2S, so slot and
		 * set continue without a jump: seq 2^32-1 and seq 0 are neighbours
		 * exactly as seq k-1 and k */
		for (uint32_t d = 0; d < 3u * s + 5 && d < 100000; d++) {
			uint32_t before = 0xFFFFFFFFu - d, after = d;
			uint64_t wb = 0x100000000ull - 1 - d;

			assert_int_equal(cais_slot_field(before, s) & CAIS_SLOT_MASK, wb % s);
			assert_int_equal(cais_slot_field(before, s) >> 15, (wb / s) % 2);
			assert_int_equal(cais_slot_field(after, s) & CAIS_SLOT_MASK, after % s);
			assert_int_equal(cais_slot_field(after, s) >> 15, (after / s) % 2);
		}
		/* the successor relation holds across the wrap */
		{
			uint16_t last = cais_slot_field(0xFFFFFFFFu, s),
				 first = cais_slot_field(0, s);

			assert_int_equal(last & CAIS_SLOT_MASK, s - 1);
			assert_int_equal(last >> 15, 1);
			assert_int_equal(first, 0);
		}
		/* the field S chunks later is the same slot, other set; 2S later the same field */
		for (uint32_t q = 0xFFFFFFFFu - 2 * s; q != 2 * s; q++) {
			assert_int_equal(cais_slot_field(q + s, s),
					 cais_slot_field(q, s) ^ CAIS_SET_BIT);
			assert_int_equal(cais_slot_field(q + 2 * s, s), cais_slot_field(q, s));
		}
	}
}

static void
test_data_fields(void **state)
{
	struct cais_fields f;
	struct cais_hdr h;
	struct cais_fields out;

	(void)state;
	memset(&f, 0x77, sizeof(f));
	cais_data_fields(&f, 7, 9, 0xDEADBEEFu, 13, 4, 3, 64);
	assert_int_equal(f.type, CAIS_TYPE_DATA);
	assert_int_equal(f.flags, 0);
	assert_int_equal(f.tenant, 7);
	assert_int_equal(f.session, 9);
	assert_int_equal(f.tensor, 0xDEADBEEFu);
	assert_int_equal(f.seq, 13);
	assert_int_equal(f.slot, 1);
	assert_int_equal(f.set, 1);
	assert_int_equal(f.rank, 3);
	assert_int_equal(f.dtype, CAIS_DT_FIXED32);
	assert_int_equal(f.count, 64);
	assert_int_equal(f.reason, 0);
	cais_hdr_build(&h, &f);
	assert_int_equal(cais_hdr_check(&h, sizeof(h)), CAIS_HDR_OK);
	cais_hdr_read(&h, &out);
	assert_fields_equal(&f, &out);
	assert_int_equal(ntohs(h.slot), cais_slot_field(13, 4));

	cais_data_fields(&f, 1, 1, 1, 0xFFFFFFFFu, 32768, 0, 1);
	assert_int_equal(f.slot, 0x7FFF);
	assert_int_equal(f.set, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_wire_bytes),
	    cmocka_unit_test(test_hdr_check),
	    cmocka_unit_test(test_hdr_check_exact),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_op_names),
	    cmocka_unit_test(test_seq_before),
	    cmocka_unit_test(test_pool_size_ok),
	    cmocka_unit_test(test_slot_field),
	    cmocka_unit_test(test_lane),
	    cmocka_unit_test(test_data_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
