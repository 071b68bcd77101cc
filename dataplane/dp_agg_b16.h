/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Inside the kernels (dp_agg.h): the BLOCK16 kernels of dp_agg_b16.c, which
 * the kernel sets of dp_agg.c take in, and what both files share. Not for
 * use elsewhere.
 */
#ifndef DP_AGG_B16_H
#define DP_AGG_B16_H

#include "dp_agg.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
/** AVX2 kernels are built; dp_agg_avx2() offers them where the CPU has AVX2. */
#define DP_AGG_X86 1
/** A function compiled for AVX2 in files built for the baseline ISA. */
#define AVX2	   __attribute__((target("avx2")))
/** The same for AVX-512 F and BW (which include AVX2). */
#define AVX512	   __attribute__((target("avx512f,avx512bw")))
#endif

/** BLOCK16, portable C. */
extern const struct dp_agg_ops dp_agg_b16_scalar;

#ifdef DP_AGG_X86
/** BLOCK16, AVX2: call only where the CPU has it. */
extern const struct dp_agg_ops dp_agg_b16_avx2;
/** BLOCK16, AVX-512 F and BW: call only where the CPU has them. */
extern const struct dp_agg_ops dp_agg_b16_avx512;
#endif

#endif /* DP_AGG_B16_H */
