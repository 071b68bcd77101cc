/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: the agent's conversions (agent/quant.c), scalar against
 * AVX2 against AVX-512, on arbitrary bits.
 *
 * quant.c promises the same bits from its three implementations for every
 * function and every input, and its decoders read RESULT payloads that
 * come off the network: any bytes at all. An input picks one function, a
 * dtype, an op, the scale (or inverse scale, or factor) as raw fp32 bits
 * (NaN, infinities and subnormals included; from_f32 takes 1/avg_n, as
 * quant.h allows), avg_n, the rounding mode, a
 * random seed, and the elements; each implementation the CPU has runs it
 * on exact-size heap copies (ASan catches a vector read or write past an
 * end), and its output bytes and return value must equal the scalar
 * one's. UBSan catches undefined shifts and overflows on the way.
 *
 * Input: fn (1 byte) | dtype and flags (1) | factor (4, little-endian fp32
 * bits) | avg_n (1) | seed (8) | elements (the rest; n = as many as fit,
 * at most MAX_N). fn mod 8: encode, decode, to_f32, from_f32, reduce_f32,
 * reduce_i32, encode_b16, decode_b16. Byte 1: bits 0-1 dtype (conversions
 * of float types only take the three float ones: 3 -> fp32), bit 2
 * nearest, bits 3-4 op, bits 5-7 k: every buffer starts k elements' worth
 * of bytes (2 or 4: the least a call's pointers allow) past a 64-byte
 * boundary, since a user's tensor need not be aligned beyond its elements,
 * and ends where its heap block ends. Seeds: tests/fuzz/corpus_quant/,
 * written by gen_corpus_quant.py.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cais/proto.h>

#include "../../agent/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HDR   15u
#define MAX_N 4096u

enum fn {
	F_ENCODE,
	F_DECODE,
	F_TO_F32,
	F_FROM_F32,
	F_REDUCE_F32,
	F_REDUCE_I32,
	F_ENC_B16,
	F_DEC_B16
};

static const char *const fn_names[] = {"encode",     "decode",	   "to_f32",	 "from_f32",
				       "reduce_f32", "reduce_i32", "encode_b16", "decode_b16"};

struct args {
	enum fn fn;
	enum cais_datatype dt;
	bool nearest;
	enum cais_redop op;
	float factor;
	unsigned int avg_n;
	uint64_t seed;
	size_t n;
	size_t off;	   /* where buffers start past a 64-byte boundary */
	const uint8_t *in; /* the elements' bytes */
	size_t in_len;
};

/* What one implementation made of the input. */
struct out {
	uint8_t *buf; /* in block */
	void *block;
	size_t len;
	size_t ret;
};

static size_t
esize(enum cais_datatype dt)
{
	return dt == CAIS_BFLOAT16 || dt == CAIS_FLOAT16 ? 2 : 4;
}

/*
 * len bytes at off past a 64-byte boundary, ending where the heap block
 * ends (ASan catches a read or write past them), filled from src, or with a
 * pattern the function must overwrite where src is NULL. *block: what to free.
 */
static uint8_t *
at(const uint8_t *src, size_t len, size_t off, void **block)
{
	uint8_t *p;

	if (posix_memalign(block, 64, off + len ? off + len : 1) != 0)
		abort();
	p = (uint8_t *)*block + off;
	if (src)
		memcpy(p, src, len);
	else
		memset(p, 0xA5, len);
	return p;
}

/* The output bytes of a's function. */
static size_t
out_bytes(const struct args *a)
{
	switch (a->fn) {
	case F_ENCODE:
	case F_TO_F32:
	case F_REDUCE_F32:
	case F_REDUCE_I32:
		return 4 * a->n;
	case F_ENC_B16:
		return cais_payload_bytes(CAIS_DT_BLOCK16, (uint32_t)a->n);
	default: /* decode, from_f32, decode_b16 */
		return esize(a->dt) * a->n;
	}
}

static void
run(const struct cais_quant_ops *q, const struct args *a, struct out *o)
{
	/* the reductions: acc the first n elements, in the next n */
	bool reduce = a->fn == F_REDUCE_F32 || a->fn == F_REDUCE_I32;
	struct cais_rng rng;
	size_t n = a->n;
	void *src_block;
	uint8_t *src = at(a->in, a->in_len, a->off, &src_block);

	cais_rng_seed(&rng, a->seed);
	o->len = out_bytes(a);
	o->buf = at(reduce ? a->in : NULL, o->len, a->off, &o->block);
	o->ret = 0;
	switch (a->fn) {
	case F_ENCODE:
		o->ret = q->encode(o->buf, src, n, a->dt, a->factor, a->nearest, &rng);
		break;
	case F_DECODE:
		q->decode(o->buf, src, n, a->dt, a->factor, a->avg_n);
		break;
	case F_TO_F32:
		q->to_f32((float *)o->buf, src, n, a->dt);
		break;
	case F_FROM_F32:
		/* mul is 1 or 1/n (quant.h): a NaN times a NaN may give either */
		q->from_f32(o->buf, (const float *)src, n, a->dt,
			    1.0f / (float)(a->avg_n ? a->avg_n : 1));
		break;
	case F_REDUCE_F32:
		q->reduce_f32((float *)o->buf, (const float *)(src + 4 * n), n, a->op);
		break;
	case F_REDUCE_I32:
		q->reduce_i32((int32_t *)o->buf, (const int32_t *)(src + 4 * n), n, a->op);
		break;
	case F_ENC_B16:
		o->ret = q->encode_b16(o->buf, src, n, a->dt, a->factor, a->nearest, &rng);
		break;
	case F_DEC_B16:
		q->decode_b16(o->buf, src, n, a->dt, a->factor);
		break;
	}
	free(src_block);
}

/* The input bytes of n elements. */
static size_t
in_bytes(const struct args *a, size_t n)
{
	switch (a->fn) {
	case F_DECODE:
	case F_FROM_F32:
		return 4 * n;
	case F_REDUCE_F32:
	case F_REDUCE_I32:
		return 8 * n; /* acc, then in */
	case F_DEC_B16:
		return cais_payload_bytes(CAIS_DT_BLOCK16, (uint32_t)n);
	default: /* encode, to_f32, encode_b16 */
		return esize(a->dt) * n;
	}
}

/* Parse an input; false: too short. */
static bool
parse(const uint8_t *d, size_t size, struct args *a)
{
	size_t room, es;
	bool typed;

	if (size < HDR)
		return false;
	a->fn = (enum fn)(d[0] % 8);
	a->dt = (enum cais_datatype)(d[1] & 3);
	a->nearest = d[1] & 4;
	a->op = (enum cais_redop)((d[1] >> 3) & 3);
	memcpy(&a->factor, d + 2, 4); /* x86: little-endian */
	a->avg_n = d[6];
	memcpy(&a->seed, d + 7, 8);
	a->in = d + HDR;
	room = size - HDR;
	/* the float-only conversions take fp32 for int32 */
	if (a->dt == CAIS_INT32 && a->fn != F_ENCODE && a->fn != F_DECODE)
		a->dt = CAIS_FLOAT32;
	es = esize(a->dt);
	/* 2-byte elements may start at any even address; float and int32 pointers at 4 */
	typed = a->fn == F_TO_F32 || a->fn == F_FROM_F32 || a->fn == F_REDUCE_F32 ||
		a->fn == F_REDUCE_I32;
	a->off = (d[1] >> 5) * (es == 2 && !typed ? 2u : 4u);
	/* as many elements as the rest holds (BLOCK16: 2 bytes each and the exponents) */
	a->n = room / (a->fn == F_DEC_B16 ? 2 : in_bytes(a, 1));
	if (a->n > MAX_N)
		a->n = MAX_N;
	while (a->n && in_bytes(a, a->n) > room)
		a->n--;
	a->in_len = in_bytes(a, a->n);
	return true;
}

static void
report(const char *name, const struct args *a, const struct out *want, const struct out *got)
{
	uint32_t bits;
	size_t i;

	memcpy(&bits, &a->factor, 4);
	for (i = 0; i < want->len && want->buf[i] == got->buf[i]; i++)
		;
	fprintf(stderr,
		"fuzz_quant: %s differs from scalar: %s dtype %d nearest %d op %d factor %a "
		"(0x%08x) avg_n %u n %zu offset %zu; return %zu, scalar %zu",
		name, fn_names[a->fn], (int)a->dt, (int)a->nearest, (int)a->op, (double)a->factor,
		bits, a->avg_n, a->n, a->off, got->ret, want->ret);
	if (i < want->len)
		fprintf(stderr, "; output byte %zu: %02x, scalar %02x", i, got->buf[i],
			want->buf[i]);
	fprintf(stderr, "\n");
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct cais_quant_ops *impl[2] = {cais_quant_avx2(), cais_quant_avx512()};
	struct args a;
	struct out want, got;

	if (!parse(data, size, &a))
		return 0;
	run(&cais_quant_scalar, &a, &want);
	for (unsigned int k = 0; k < 2; k++) {
		if (!impl[k])
			continue;
		run(impl[k], &a, &got);
		if (got.ret != want.ret || memcmp(got.buf, want.buf, want.len) != 0)
			report(impl[k]->name, &a, &want, &got);
		free(got.block);
	}
	free(want.block);
	return 0;
}
