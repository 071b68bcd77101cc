#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""gloo_allreduce.py: torch.distributed's gloo all_reduce, timed like
cais-allreduce-perf, for bench/e2e.sh's third baseline (what a PyTorch user
on CPUs runs today).

One process per rank, each in its own testbed namespace. Every doubling of
the size from --min-bytes to --max-bytes: --warmup untimed and --iters timed
all_reduce(sum) calls of a float32 tensor, each preceded by a barrier (the
ranks start together, as cais-allreduce-perf --sync does). Every element of
every result is checked (the inputs are small integers, so the float sums
are exact), after another barrier, as cais-allreduce-perf --sync --check
does: no rank's check runs beside another's timed call. Prints one line per
size, as cais-allreduce-perf does:

    bytes count dtype op path time_us

with the median time in microseconds; exits 1 on a wrong element.
"""
import argparse
import statistics
import sys
import time


def size_arg(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        if s and s[-1].upper() in m:
            return int(s[:-1]) * m[s[-1].upper()]
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}': a byte count like 131072, 128K or 64M")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="IP:PORT of rank 0's TCP store")
    ap.add_argument("--min-bytes", type=size_arg, default=128 << 10)
    ap.add_argument("--max-bytes", type=size_arg, default=64 << 20)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--timeout-s", type=int, default=300,
                    help="bound on the rendezvous and on each collective (default 300)")
    a = ap.parse_args()
    if not (0 <= a.rank < a.world) or a.iters < 1 or a.warmup < 0:
        ap.error("need 0 <= rank < world, iters >= 1, warmup >= 0")
    if a.min_bytes < 4 or a.min_bytes % 4 or a.max_bytes < a.min_bytes:
        ap.error("--min-bytes: a multiple of 4, at most --max-bytes")
    try:
        import datetime
        import torch
        import torch.distributed as dist
    except ImportError as e:
        sys.exit(f"gloo_allreduce: {e} (Debian's python3-torch, for /usr/bin/python3)")

    dist.init_process_group("gloo", init_method=f"tcp://{a.master}", rank=a.rank,
                            world_size=a.world,
                            timeout=datetime.timedelta(seconds=a.timeout_s))
    bad = 0
    b = a.min_bytes
    while b <= a.max_bytes:
        n = b // 4
        # rank r contributes (i + r) % 7 - 3: small integers, exact float sums
        base = torch.arange(n, dtype=torch.int64)
        want = sum(((base + r) % 7 - 3) for r in range(a.world)).to(torch.float32)
        mine = ((base + a.rank) % 7 - 3).to(torch.float32)
        times = []
        for it in range(a.warmup + a.iters):
            t = mine.clone()
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            dt = time.perf_counter() - t0
            dist.barrier()  # no rank checks beside another's timed call
            if not torch.equal(t, want):
                bad += int((t != want).sum())
            if it >= a.warmup:
                times.append(dt)
        print(f"{b} {n} f32 sum gloo {statistics.median(times) * 1e6:.1f}", flush=True)
        b *= 2
    dist.destroy_process_group()
    if bad:
        print(f"gloo_allreduce: rank {a.rank}: {bad} wrong elements", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
