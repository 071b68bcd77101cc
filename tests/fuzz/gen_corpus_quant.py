#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the seed corpus of fuzz_quant into a directory.

    tests/fuzz/gen_corpus_quant.py DIR

One file per (function, dtype) that fuzz_quant.c runs, in its input format:
fn | dtype, nearest, op and alignment | factor (fp32 bits) | avg_n | seed |
elements. The elements mix normal values of many magnitudes with the edge
cases (zeros of both signs, halves, fp16's largest, subnormals, infinities,
NaN, +-2^31); the BLOCK16 payloads have extreme exponent bytes. The seeds in
tests/fuzz/corpus_quant/ are this script's output (fixed random seed);
regenerate them after changing the input format.
"""
import os
import random
import struct
import sys

NAMES = ["encode", "decode", "to_f32", "from_f32", "reduce_f32", "reduce_i32",
         "encode_b16", "decode_b16"]
SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 65504.0, 1e-8, 3.4e38,
            float("inf"), float("-inf"), float("nan"), 1e-45, 2.0**31, -2.0**31,
            2.0**24 + 1]
FACTORS = [1.0, 1024.0, 2.0**-10, 3.0, float("nan"), float("inf"), 0.0, 1e-40]


def f32(x):
    return struct.pack("<f", x)


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rnd = random.Random(20261208)
    k = 0
    for fn in range(8):
        for dt in range(4):
            if dt == 3 and fn not in (0, 1):  # int32: encode and decode only
                continue
            if fn in (0, 6):  # encoders: a scale as the manager gives one
                fac = [1024.0, 3.0, 2.0**-10, 1.0][dt]
            else:
                fac = FACTORS[(fn + dt) % len(FACTORS)]
            nearest, op, align = (fn + dt) % 2, (fn * 3 + dt) % 4, (fn + 2 * dt) % 8
            hdr = bytes([fn, dt | nearest << 2 | op << 3 | align << 5]) + f32(fac) + \
                bytes([k % 5 + 1]) + struct.pack("<Q", 1000 + k)
            n = [67, 33, 100, 17][dt]
            if fn == 7:  # BLOCK16: exponent bytes and mantissas alike
                body = bytes(rnd.choice([0, 1, 127, 128, 200, 255, rnd.randrange(256)])
                             for _ in range(3 * n))
            else:
                body = b"".join(
                    f32(rnd.choice(SPECIALS) if rnd.random() < 0.3
                        else rnd.gauss(0, 10**rnd.randint(-3, 6)))
                    for _ in range(2 * n))
            with open(os.path.join(out, "seed-%s-dt%d" % (NAMES[fn], dt)), "wb") as f:
                f.write(hdr + body)
            k += 1
    print("%d seeds in %s" % (k, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
