#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""cais.allreduce() on numpy arrays and CPU torch tensors, 1 to 4 ranks as processes on
127.0.0.1: libcais's ring path (no switch), and a static communicator whose switch is
absent (the transparent fallback). Every element checked: int32 exactly, max and min
exactly, sums and averages of floats within a bound; in place, strided views, handles
outstanding at once; errors as Python exceptions within a bound, never a hang."""
import errno
import os
import time
import unittest

import harness

SIZES = (1, 2047, 2048, 2049, 100003)
OPS = ("sum", "avg", "max", "min")


def inputs(np, rank, count, kind):
    """Rank rank's input (float64 values exactly representable in the dtype kind)."""
    rs = np.random.RandomState(1000 * rank + count % 1000)
    if kind == "i32":
        return (rs.randint(-1 << 20, 1 << 20, count)).astype(np.float64)
    x = rs.standard_normal(count)
    if kind == "f16":
        return x.astype(np.float16).astype(np.float64)
    if kind == "bf16":
        import torch
        return torch.from_numpy(x).to(torch.bfloat16).double().numpy()
    return x.astype(np.float32).astype(np.float64)


# unit roundoff of the dtype the result is stored in
EPS = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}


def expected(np, world, count, kind, op):
    xs = [inputs(np, r, count, kind) for r in range(world)]
    s = np.sum(xs, axis=0)
    if op == "sum":
        e = s
    elif op == "avg":
        e = np.trunc(s / world) if kind == "i32" else s / world
    elif op == "max":
        e = np.max(xs, axis=0)
    else:
        e = np.min(xs, axis=0)
    mag = np.sum(np.abs(xs), axis=0) / (world if op == "avg" else 1)
    return e, mag


def check(np, got, kind, op, world, count):
    exp, mag = expected(np, world, count, kind, op)
    got = np.asarray(got, dtype=np.float64)
    if kind == "i32" or op in ("max", "min"):
        bad = np.nonzero(got != exp)[0]
        assert bad.size == 0, "%s %s count %d: %d wrong, first at %d: %r != %r" % (
            kind, op, count, bad.size, bad[0], got[bad[0]], exp[bad[0]])
        return
    # world - 1 additions in the ring plus the final rounding, each within eps x magnitude
    bound = (world + 1) * EPS[kind] * mag + 1e-30
    err = np.abs(got - exp)
    bad = np.nonzero(err > bound)[0]
    assert bad.size == 0, "%s %s count %d: %d beyond the bound, worst %g > %g at %d" % (
        kind, op, count, bad.size, err[bad[0]], bound[bad[0]], bad[0])


def w_sweep(rank, world):
    import numpy as np
    import torch
    import cais
    c = cais.init()
    n = 0
    for count in SIZES:
        for op in OPS:
            # numpy: f32, f16, i32
            for kind, dt in (("f32", np.float32), ("f16", np.float16), ("i32", np.int32)):
                x = inputs(np, rank, count, kind).astype(dt)
                r = cais.allreduce(x, op)
                assert r is x
                check(np, x, kind, op, world, count)
                n += 1
            # torch: every dtype, bf16 included
            for kind, dt in (("f32", torch.float32), ("bf16", torch.bfloat16),
                             ("f16", torch.float16), ("i32", torch.int32)):
                t = torch.from_numpy(inputs(np, rank, count, kind)).to(dt)
                h = cais.allreduce(t, op, async_op=True)
                assert h.wait(timeout=60) is t and h.is_completed()
                assert h.status["path"] == "ring"
                check(np, t.double().numpy(), kind, op, world, count)
                n += 1
    m = c.metrics()
    assert m["collectives"] == n and m["errors"] == 0, m
    assert m["fallback"]["forced"] == n  # ring mode: every collective on the ring, asked for
    cais.finalize()
    return n


def w_views_and_handles(rank, world):
    import numpy as np
    import torch
    import cais
    cais.init()
    # strided views: reduced in place, the rest of the base untouched
    base = torch.full((64, 64), 100.0)
    v = base[:, ::2]
    v.copy_(torch.arange(64 * 32, dtype=torch.float32).view(64, 32) * (rank + 1))
    cais.allreduce(v)
    tot = sum(range(1, world + 1))
    assert torch.equal(base[:, ::2], torch.arange(64 * 32, dtype=torch.float32).view(64, 32) *
                       tot)
    assert torch.all(base[:, 1::2] == 100.0)
    a = np.arange(30, dtype=np.int32).reshape(5, 6).T * (rank + 1)  # Fortran order
    assert not a.flags.c_contiguous
    cais.allreduce(a)
    assert (a == np.arange(30, dtype=np.int32).reshape(5, 6).T * tot).all()
    # 16 requests outstanding at once, waited for in reverse order
    xs = [np.full(1000 + 37 * i, rank + i, dtype=np.int32) for i in range(16)]
    hs = [cais.allreduce(x, "sum", async_op=True) for x in xs]
    for i in reversed(range(16)):
        got = hs[i].wait(timeout=60)
        assert (got == sum(r + i for r in range(world))).all(), (i, got[:4])
    # empty: nothing to do, no collective
    e = np.zeros(0, np.float32)
    assert cais.allreduce(e) is e
    # errors that never reach libcais
    for bad, exc in ((np.zeros(4, np.float64), TypeError), ([1, 2], TypeError),
                     (torch.zeros(4, dtype=torch.int64), TypeError)):
        try:
            cais.allreduce(bad)
            raise AssertionError("no %s for %r" % (exc.__name__, bad))
        except exc as e:
            assert "cais:" in str(e), e
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    for args, exc in (((ro,), ValueError), ((np.zeros(4, np.float32), "prod"), ValueError)):
        try:
            cais.allreduce(*args)
            raise AssertionError("no %s" % exc.__name__)
        except exc as e:
            assert "cais:" in str(e)
    # the communicator still works after them
    x = np.ones(10, np.float32)
    cais.allreduce(x)
    assert (x == world).all()
    cais.finalize()
    return True


def w_static_no_switch(rank, world, path):
    """A static communicator whose switch does not exist: auto takes the ring (SILENT),
    or (threshold) at once; switch-only fails with a CaisError."""
    import numpy as np
    import cais
    c = cais.init()
    x = np.arange(5000, dtype=np.float32) * (rank + 1)
    if path == "switch":
        t0 = time.time()
        try:
            cais.allreduce(x)
        except cais.CaisError as e:
            return ("error", e.errno, time.time() - t0, str(e))
        raise AssertionError("the switch-only path succeeded without a switch")
    h = cais.allreduce(x, async_op=True)
    h.wait(timeout=60)
    assert np.array_equal(x, np.arange(5000, dtype=np.float32) * sum(range(1, world + 1)))
    small = np.ones(4, np.float32)
    hs = cais.allreduce(small, async_op=True)
    hs.wait(timeout=60)
    assert (small == world).all()
    m = c.metrics()
    cais.finalize()
    return (h.status["fallback"], hs.status["fallback"], m["in_network"])


def w_lonely(rank, world):
    """Rank 0 of 2 alone: the all-reduce ends with a CaisError in bounded time."""
    import numpy as np
    import cais
    cais.init()
    t0 = time.time()
    try:
        cais.allreduce(np.ones(100, np.float32))
    except cais.CaisError as e:
        return (e.errno, time.time() - t0, str(e))
    raise AssertionError("an all-reduce with a missing peer succeeded")


def w_join_unreachable(rank, world):
    import cais
    t0 = time.time()
    try:
        cais.init()
    except cais.CaisError as e:
        return (e.errno, time.time() - t0, str(e))
    raise AssertionError("joining an absent manager succeeded")


class Ring(unittest.TestCase):
    def test_sweep_1_to_4_ranks(self):
        # every dtype, op and size around the packet size, numpy and torch
        for world in (1, 2, 4):
            t0 = time.time()
            n = harness.run_ranks(world, w_sweep, env=harness.ring_env(world), timeout=240)
            self.assertEqual(n, [len(SIZES) * len(OPS) * 7] * world)
            print("  %d ranks: %d checked collectives per rank in %.1f s" %
                  (world, n[0], time.time() - t0))

    def test_views_handles_errors(self):
        harness.run_ranks(3, w_views_and_handles, env=harness.ring_env(3), timeout=120)


class StaticWithoutSwitch(unittest.TestCase):
    def env(self, world, **kw):
        e = harness.ring_env(world)
        dead = harness.free_ports(1)[0]  # nothing listens there
        e.update({"CAIS_SWITCH": "127.0.0.1:%d" % dead, "CAIS_RETRIES": 2,
                  "CAIS_RETX_US": 2000, "CAIS_THRESHOLD": "1K", "CAIS_FIRST_SEQ": 7})
        e.update(kw)
        return e

    def test_auto_falls_back_to_the_ring(self):
        res = harness.run_ranks(3, w_static_no_switch, ("auto",), env=self.env(3), timeout=120)
        for fb_big, fb_small, innet in res:
            self.assertIn(fb_big, ("SILENT", "REJECT"))  # ICMP port unreachable or silence
            self.assertEqual(fb_small, "THRESHOLD")
            self.assertEqual(innet, 0)

    def test_switch_only_fails_cleanly(self):
        res = harness.run_ranks(2, w_static_no_switch, ("switch",),
                                env=self.env(2, CAIS_PATH="switch", CAIS_TIMEOUT_MS=5000),
                                timeout=120)
        for kind, err, secs, text in res:
            self.assertEqual(kind, "error")
            self.assertIn(err, (errno.ECONNREFUSED, errno.ETIMEDOUT), text)
            self.assertLess(secs, 20, text)
            self.assertTrue(text.startswith("cais: "), text)


class Errors(unittest.TestCase):
    def test_missing_peer_times_out(self):
        env = harness.ring_env(2)
        env["CAIS_TIMEOUT_MS"] = 1500
        (err, secs, text), = harness.run_ranks(2, w_lonely, env=env, ranks=[0], timeout=60)
        self.assertEqual(err, errno.ETIMEDOUT, text)
        self.assertLess(secs, 15, text)
        self.assertIn("all-reduce of 100 f32 (sum, tensor 1)", text)

    def test_unreachable_manager(self):
        dead = harness.free_ports(1)[0]
        env = {"CAIS_MANAGER": "127.0.0.1:%d" % dead, "CAIS_JOB": "nobody-%d" % os.getpid(),
               "CAIS_JOIN_TIMEOUT_MS": 1500, "CAIS_IFNAME": "lo", "CAIS_NRANKS": 1,
               "CAIS_RANK": 0, "CAIS_SWITCH": None, "CAIS_PEERS": None}
        (err, secs, text), = harness.run_ranks(1, w_join_unreachable, env=env, timeout=60)
        self.assertEqual(err, errno.ETIMEDOUT, text)
        self.assertLess(secs, 15, text)
        self.assertIn("joining job 'nobody-", text)


class _FakeLib:
    """The two calls of libcais that managed tensor ids and steps make."""
    def __init__(self):
        self.registered, self.steps = [], []

    def cais_tensor_register(self, comm, tensor, op, dt):
        self.registered.append(tensor)
        return 0

    def cais_step_begin(self, comm, step):
        self.steps.append(step)
        return 0


class ManagedSteps(unittest.TestCase):
    """Managed tensor ids and manager steps, on a fake libcais: the guessed steps (a new
    one when a tensor comes again) and explicit ones (step(): one per iteration, a tensor
    per use of a call site in it)."""
    def comm(self):
        from cais import _comm
        c = object.__new__(_comm.Communicator)
        c.mode, c._comm, c._L = "managed", None, _FakeLib()
        c._ids, c._registered, c._since_step = {}, {}, set()
        c._next_id, c._step = 1, 0
        c._explicit, c._uses = False, {}
        c._step_warned, c._step_s = False, 0.0
        return c

    @staticmethod
    def iteration(c, layers=2):
        """A training iteration: two call sites (forward, backward), each once per layer."""
        ids = []
        for _ in range(layers):
            ids.append(c._tensor_id(0, 0, 4096, None, ("fwd",)))
        for _ in range(layers):
            ids.append(c._tensor_id(0, 0, 4096, None, ("bwd",)))
        return ids

    def test_guessed_steps(self):
        c = self.comm()
        for _ in range(3):
            # one tensor per call site, a step each time one comes again
            self.assertEqual(self.iteration(c), [1, 1, 2, 2])
        # the first use, then each layer's second use of a site: 7 steps for 3 iterations
        self.assertEqual(c._L.steps, list(range(7)))
        self.assertEqual(c._L.registered, [1, 2])

    def test_explicit_steps(self):
        c = self.comm()
        for _ in range(3):
            c.step()
            # a tensor per use: each layer's, with a scale of its own
            self.assertEqual(self.iteration(c), [1, 2, 3, 4])
        # one manager step per iteration, none guessed
        self.assertEqual(c._L.steps, [0, 1, 2])
        self.assertEqual(c._L.registered, [1, 2, 3, 4])
        # iterations with a third layer: its uses are new tensors, the rest the same
        for _ in range(3):
            c.step()
            self.assertEqual(self.iteration(c, layers=3), [1, 2, 5, 3, 4, 6])
        self.assertEqual(c._L.steps, [0, 1, 2, 3, 4, 5])

    def test_step_elsewhere_does_nothing(self):
        c = self.comm()
        c.mode = "ring"
        c.step()
        self.assertEqual(c._L.steps, [])
        self.assertFalse(c._explicit)


if __name__ == "__main__":
    harness.require("numpy", "torch")
    unittest.main(verbosity=2)
