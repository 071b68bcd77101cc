#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The torch.distributed backend "cais" (import cais.torch), 1 to 4 ranks as processes
on 127.0.0.1 on libcais's ring path: dist.all_reduce of every dtype and op (also
async_op=True, several outstanding), bfloat16 where gloo raises, what goes to the inner
gloo group (other dtypes and ops, broadcast, all_gather, barrier, objects), reduce and
reduce_scatter through libcais, a subgroup, DistributedDataParallel trained with
backend "cais" against the same model with gloo; configuration errors raised on every
rank, in bounded time."""
import tempfile
import time
import unittest

import harness

OPS = ("SUM", "AVG", "MAX", "MIN")


def init(rank, world, path, backend="cais"):
    import torch.distributed as dist
    import cais.torch  # noqa: F401
    dist.init_process_group(backend, init_method="file://" + path, rank=rank, world_size=world)
    return dist


def w_allreduce(rank, world, path):
    import torch
    dist = init(rank, world, path)
    assert dist.get_backend() == "cais"
    n = 0
    gen = torch.Generator().manual_seed(17)
    for count in (1, 2048, 2049, 70001):
        xs = [torch.randn(count, generator=gen) for _ in range(world)]  # every rank's input
        ints = [torch.randint(-1 << 20, 1 << 20, (count,), generator=gen, dtype=torch.int32)
                for _ in range(world)]
        for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
            src = ints if dt == torch.int32 else [x.to(dt) for x in xs]
            full = torch.stack([s.double() for s in src])
            for opname in OPS:
                op = getattr(dist.ReduceOp, opname)
                t = src[rank].clone()
                if n % 2:
                    w = dist.all_reduce(t, op=op, async_op=True)
                    assert w.wait() and w.is_completed() and w.is_success()
                    assert w.get_future().wait()[0] is t
                else:
                    assert dist.all_reduce(t, op=op) is None
                assert t.dtype == dt
                got = t.double()
                if opname == "MAX":
                    exp = full.max(0).values
                elif opname == "MIN":
                    exp = full.min(0).values
                elif opname == "SUM":
                    exp = full.sum(0)
                else:
                    exp = full.sum(0) / world
                    if dt == torch.int32:
                        exp = torch.trunc(exp)
                if dt == torch.int32 or opname in ("MAX", "MIN"):
                    assert torch.equal(got, exp), (dt, opname, count)
                else:
                    eps = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8,
                           torch.float16: 2.0 ** -11}[dt]
                    mag = full.abs().sum(0) / (world if opname == "AVG" else 1)
                    bad = (got - exp).abs() > (world + 1) * eps * mag + 1e-30
                    assert not bad.any(), (dt, opname, count, int(bad.sum()))
                n += 1
    # 12 outstanding at once, waited for in reverse order
    ts = [torch.full((5000 + i,), float(rank + i)) for i in range(12)]
    ws = [dist.all_reduce(t, async_op=True) for t in ts]
    for i in reversed(range(12)):
        ws[i].wait()
        assert torch.all(ts[i] == sum(r + i for r in range(world))), i
    import cais.torch as ct
    m = ct.metrics()
    assert m["collectives"] == n + 12 and m["errors"] == 0, m
    dist.destroy_process_group()
    return n


def w_gloo_parts(rank, world, path):
    import torch
    dist = init(rank, world, path)
    # bfloat16: gloo cannot, "cais" can
    g = dist.new_group(backend="gloo")
    try:
        dist.all_reduce(torch.ones(4, dtype=torch.bfloat16), group=g)
        gloo_bf16 = "worked"
    except RuntimeError as e:
        gloo_bf16 = str(e).splitlines()[0]
    b = torch.full((1000,), 1.5, dtype=torch.bfloat16)
    dist.all_reduce(b)
    assert torch.all(b == 1.5 * world)
    # what the inner gloo group serves: other dtypes and ops
    d = torch.full((7,), float(rank + 1), dtype=torch.float64)
    dist.all_reduce(d)
    assert torch.all(d == world * (world + 1) / 2)
    p = torch.full((3,), rank + 2, dtype=torch.int64)
    dist.all_reduce(p, op=dist.ReduceOp.PRODUCT)
    prod = 1
    for r in range(world):
        prod *= r + 2
    assert torch.all(p == prod)
    f = torch.full((3,), float(rank + 2))
    dist.all_reduce(f, op=dist.ReduceOp.PRODUCT)  # float32, an op libcais does not have
    assert torch.all(f == float(prod))
    # broadcast, all_gather, barrier, objects, gather, send/recv
    x = torch.arange(10.0) if rank == 0 else torch.zeros(10)
    dist.broadcast(x, 0)
    assert torch.equal(x, torch.arange(10.0))
    # bfloat16 through gloo's data movement, bit for bit: all 65536 patterns (NaNs too)
    pat = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    bb = pat.view(torch.bfloat16).clone() if rank == 0 else torch.zeros(65536,
                                                                          dtype=torch.bfloat16)
    dist.broadcast(bb, 0)
    assert torch.equal(bb.view(torch.int16), pat)
    outs = [torch.zeros(2, dtype=torch.bfloat16) for _ in range(world)]
    dist.all_gather(outs, torch.full((2,), float(rank), dtype=torch.bfloat16))
    assert all(torch.all(o == r) for r, o in enumerate(outs))
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in range(world)]
    dist.barrier()
    if world > 1:
        if rank == 0:
            dist.send(torch.tensor([42.0]), 1)
        elif rank == 1:
            t = torch.zeros(1)
            dist.recv(t, 0)
            assert t.item() == 42.0
    # reduce and reduce_scatter: through libcais
    r = torch.full((5,), float(rank + 1), dtype=torch.bfloat16)
    dist.reduce(r, dst=world - 1)
    if rank == world - 1:
        assert torch.all(r == world * (world + 1) / 2)
    else:
        assert torch.all(r == rank + 1)  # non-roots keep their input
    out = torch.zeros(3, dtype=torch.int32)
    ins = [torch.full((3,), 10 * k + rank, dtype=torch.int32) for k in range(world)]
    dist.reduce_scatter(out, ins)
    assert torch.all(out == sum(10 * rank + q for q in range(world))), out
    cs = [torch.full((4,), float(rank), dtype=torch.bfloat16),
          torch.full((3,), float(rank), dtype=torch.bfloat16)]
    dist.all_reduce_coalesced(cs)
    assert all(torch.all(c == sum(range(world))) for c in cs)
    o2 = torch.zeros(2)
    dist.reduce_scatter_tensor(o2, torch.arange(2.0 * world) + rank)
    assert torch.equal(o2, (torch.arange(2.0 * world) * world + sum(range(world)))[
        2 * rank:2 * rank + 2]), o2
    import cais.torch as ct
    before = ct.metrics()["collectives"]
    # step(): nothing to do outside managed mode; refused for a group of another backend
    ct.step()
    try:
        ct.step(dist.new_group(ranks=list(range(world)), backend="gloo"))
        raise AssertionError("cais.torch.step on a gloo group succeeded")
    except ValueError as e:
        assert "not cais" in str(e), e
    # a subgroup of "cais" (its own communicator)
    if world >= 2:
        sub = dist.new_group(ranks=[0, 1], backend="cais")
        if rank in (0, 1):
            s = torch.full((9,), float(rank + 1))
            dist.all_reduce(s, group=sub)
            assert torch.all(s == 3.0)
    dist.barrier()
    # reduce, reduce_scatter (x2), all_reduce_coalesced (2 tensors), bf16: libcais's
    m = ct.metrics()
    assert m["collectives"] == before and before >= 6, (before, m["collectives"])
    dist.destroy_process_group()
    return gloo_bf16


def w_ddp(rank, world, path, steps):
    """The same model and data trained by DDP over "cais" and over a gloo group."""
    import torch
    dist = init(rank, world, path)
    gloo = dist.new_group(backend="gloo")
    final = {}
    for name, group in (("cais", None), ("gloo", gloo)):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                    torch.nn.Linear(64, 8))
        ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group,
                                                        bucket_cap_mb=0.01)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
        teacher = torch.randn(32, 8, generator=torch.Generator().manual_seed(5))
        losses = []
        for _ in range(steps):
            x = torch.randn(16, 32, generator=gen)
            y = x @ teacher
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        final[name] = (torch.cat([p.detach().reshape(-1) for p in model.parameters()]), losses)
    (pc, lc), (pg, _) = final["cais"], final["gloo"]
    diff = ((pc - pg).abs().max() / pg.abs().max()).item()
    assert diff < 1e-5, diff  # float sums in another order, nothing else
    assert lc[-1] < lc[0], lc  # it trained
    import cais.torch as ct
    m = ct.metrics()
    dist.destroy_process_group()
    return diff, m["collectives"]


def w_bad_config(rank, world, path):
    import cais
    t0 = time.time()
    try:
        init(rank, world, path)
    except (cais.ConfigError, cais.CaisError) as e:
        return (type(e).__name__, str(e), time.time() - t0)
    raise AssertionError("init_process_group succeeded with a bad configuration")


class Backend(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cais-py.")

    def store(self):
        return tempfile.mktemp(dir=self.tmp)

    def test_allreduce_1_to_4_ranks(self):
        for world in (1, 2, 4):
            t0 = time.time()
            n = harness.run_ranks(world, w_allreduce, (self.store(),),
                                  env=harness.ring_env(world), timeout=240)
            self.assertEqual(n, [4 * 4 * 4] * world)
            print("  %d ranks: %d checked all-reduces per rank in %.1f s" %
                  (world, n[0], time.time() - t0))

    def test_gloo_parts_bf16_subgroup(self):
        res = harness.run_ranks(3, w_gloo_parts, (self.store(),), env=harness.ring_env(3),
                                timeout=180)
        # gloo in this PyTorch cannot all-reduce bfloat16 (the reason the backend exists)
        for r in res:
            self.assertIn("Invalid scalar type", r)

    def test_ddp_trains_like_gloo(self):
        res = harness.run_ranks(3, w_ddp, (self.store(), 8), env=harness.ring_env(3),
                                timeout=180)
        for diff, collectives in res:
            self.assertLess(diff, 1e-5)
            self.assertGreaterEqual(collectives, 8)  # DDP's buckets went through libcais
        print("  DDP over cais vs gloo: largest relative parameter difference %.3g" %
              max(d for d, _ in res))

    def test_bad_config_on_one_rank_raises_everywhere(self):
        env = harness.ring_env(3)
        per = env["per_rank"]
        env["per_rank"] = lambda r: dict(per(r), **({"CAIS_PATH": "fast"} if r == 1 else {}))
        env["CAIS_JOIN_TIMEOUT_MS"] = 20000
        res = harness.run_ranks(3, w_bad_config, (self.store(),), env=env, timeout=60)
        for r, (kind, text, secs) in enumerate(res):
            self.assertEqual(kind, "ConfigError", text)
            self.assertIn("CAIS_PATH='fast'", text)
            if r != 1:
                self.assertIn("failed on rank 1", text)
            self.assertLess(secs, 20)

    def test_bad_config_everywhere(self):
        for var, val, want in (("CAIS_SWITCH", "198.18.1", "CAIS_SWITCH='198.18.1'"),
                               ("CAIS_IFNAME", "=nosuchif0", "CAIS_IFNAME='=nosuchif0'"),
                               ("CAIS_THRESHOLD", "lots", "CAIS_THRESHOLD='lots'")):
            env = harness.ring_env(2)
            env[var] = val
            res = harness.run_ranks(2, w_bad_config, (self.store(),), env=env, timeout=60)
            for kind, text, secs in res:
                self.assertEqual(kind, "ConfigError", text)
                self.assertIn(want, text)

    def test_unreachable_manager_raises_everywhere(self):
        dead = harness.free_ports(1)[0]
        env = {"CAIS_MANAGER": "127.0.0.1:%d" % dead, "CAIS_JOIN_TIMEOUT_MS": 1500,
               "CAIS_IFNAME": "lo", "CAIS_SWITCH": None, "CAIS_PEERS": None}
        res = harness.run_ranks(2, w_bad_config, (self.store(),), env=env, timeout=90)
        for kind, text, secs in res:
            self.assertEqual(kind, "CaisError", text)
            self.assertIn("cais-manager 127.0.0.1:%d" % dead, text)
            self.assertLess(secs, 30)


if __name__ == "__main__":
    harness.require("numpy", "torch")
    unittest.main(verbosity=2)
