#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A small GPT trained with Megatron-style tensor parallelism, on any torch.distributed backend.

Every rank holds 1/P of every block: the attention's QKV projection and the
MLP's first layer are column-parallel (each rank computes its heads / its
slice of the hidden layer), the attention's output projection and the MLP's
second layer are row-parallel (each rank a partial sum, all-reduced).
Megatron's f and g: f is the identity forward and an all-reduce of the
input's gradient backward; g an all-reduce forward and the identity
backward. So a step of an L-layer model makes 2L all-reduces forward and 2L
backward, each of batch x seq x hidden elements, in the activations' dtype.
Embeddings, layer norms and the head are replicated: every rank computes
the same gradients for them, so they need no all-reduce.

The data is generated here (nothing is downloaded): sequences of a random
sparse Markov chain over the vocabulary, from --seed, the same on every
rank. Weights are drawn for the full model from --seed and sliced, so every
backend and every rank count starts from the same model.

Run one process per rank with torch's env:// variables (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), e.g. on the namespace testbed
(examples/tp_testbed.sh does it all):

  RANK=0 WORLD_SIZE=4 MASTER_ADDR=198.19.1.1 MASTER_PORT=29500 \\
      tp_gpt.py --backend cais --steps 200 --csv cais.csv

Rank 0 writes one CSV line per step: step, loss, step time (s). With
--dtype bf16 the blocks compute in bfloat16 (weights and the optimizer stay
float32) and every all-reduce is of bfloat16 tensors (gloo cannot do that in
PyTorch 1.13; "cais" can). At the end rank 0 prints one line of JSON: the
run's figures and, with backend cais, libcais's counters. With backend cais
each iteration begins with cais.torch.step() (one cais-manager step per
iteration, a tensor per all-reduce of it) unless --guess-steps.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--backend", default="cais", help="torch.distributed backend (cais, gloo)")
    p.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    p.add_argument("--seed", type=int, default=1234, help="seed of the model and the data")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                   help="the blocks' compute and all-reduce dtype (default fp32)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--csv", help="rank 0: per-step CSV (step,loss,seconds)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--guess-steps", action="store_true",
                   help="cais: no cais.torch.step() per iteration; the package guesses the "
                   "manager's steps (a new one whenever a call site's all-reduce comes again)")
    p.add_argument("--max-seconds", type=float, default=0,
                   help="stop after this many seconds of training (0: no bound)")
    return p.parse_args(argv)


# ---- Megatron's f and g ----

class _CopyToTP(torch.autograd.Function):
    """f: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g)
        return g


class _ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def _shard(full, dim, rank, world):
    n = full.shape[dim] // world
    return full.narrow(dim, rank * n, n).clone()


class ColumnParallelLinear(torch.nn.Module):
    """y_i = f(x) A_i^T + b_i: this rank's output columns (no gather: the next layer is row-parallel)."""

    def __init__(self, w_full, b_full, rank, world, dtype):
        super().__init__()
        self.weight = torch.nn.Parameter(_shard(w_full, 0, rank, world))
        self.bias = torch.nn.Parameter(_shard(b_full, 0, rank, world))
        self.dtype = dtype

    def forward(self, x):
        x = _CopyToTP.apply(x.to(self.dtype))
        return F.linear(x, self.weight.to(self.dtype), self.bias.to(self.dtype))


class RowParallelLinear(torch.nn.Module):
    """y = g(x_i B_i^T) + b: the partial sums of this rank's input rows, all-reduced."""

    def __init__(self, w_full, b_full, rank, world, dtype):
        super().__init__()
        self.weight = torch.nn.Parameter(_shard(w_full, 1, rank, world))
        self.bias = torch.nn.Parameter(b_full.clone())
        self.dtype = dtype

    def forward(self, x):
        y = _ReduceFromTP.apply(F.linear(x.to(self.dtype), self.weight.to(self.dtype)))
        return y.float() + self.bias


class Block(torch.nn.Module):
    def __init__(self, a, gen, rank, world, dtype):
        super().__init__()
        h = a.hidden
        std = 0.02
        proj_std = 0.02 / math.sqrt(2 * a.layers)
        self.ln1 = torch.nn.LayerNorm(h)
        self.ln2 = torch.nn.LayerNorm(h)
        self.heads = a.heads // world
        self.hd = h // a.heads
        # qkv: [3h, h] laid out per head group so that a rank's slice holds whole heads
        qkv = torch.randn(3, a.heads, self.hd, h, generator=gen) * std
        qkv = qkv.permute(1, 0, 2, 3).reshape(3 * h, h)  # head-major: [heads x (q,k,v) x hd]
        self.qkv = ColumnParallelLinear(qkv, torch.zeros(3 * h), rank, world, dtype)
        self.proj = RowParallelLinear(torch.randn(h, h, generator=gen) * proj_std,
                                      torch.zeros(h), rank, world, dtype)
        self.fc1 = ColumnParallelLinear(torch.randn(4 * h, h, generator=gen) * std,
                                        torch.zeros(4 * h), rank, world, dtype)
        self.fc2 = RowParallelLinear(torch.randn(h, 4 * h, generator=gen) * proj_std,
                                     torch.zeros(h), rank, world, dtype)

    def forward(self, x):
        b, t, _ = x.shape
        qkv = self.qkv(self.ln1(x))  # [b, t, heads_local * 3 * hd]
        qkv = qkv.view(b, t, self.heads, 3, self.hd).permute(3, 0, 2, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # [b, heads_local, t, hd]
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = att.float().masked_fill(mask, float("-inf")).softmax(-1).to(q.dtype)
        y = (att @ v).transpose(1, 2).reshape(b, t, self.heads * self.hd)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x


class TPGPT(torch.nn.Module):
    def __init__(self, a, rank, world, dtype):
        super().__init__()
        gen = torch.Generator().manual_seed(a.seed)
        self.wte = torch.nn.Parameter(torch.randn(a.vocab, a.hidden, generator=gen) * 0.02)
        self.wpe = torch.nn.Parameter(torch.randn(a.seq, a.hidden, generator=gen) * 0.01)
        self.blocks = torch.nn.ModuleList(Block(a, gen, rank, world, dtype)
                                          for _ in range(a.layers))
        self.ln_f = torch.nn.LayerNorm(a.hidden)
        self.head = torch.nn.Parameter(torch.randn(a.vocab, a.hidden, generator=gen) * 0.02)

    def forward(self, idx):
        x = self.wte[idx] + self.wpe[: idx.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return F.linear(self.ln_f(x), self.head)


def make_data(a):
    """A random sparse Markov chain: each token has 4 likely successors."""
    gen = torch.Generator().manual_seed(a.seed + 1)
    succ = torch.randint(0, a.vocab, (a.vocab, 4), generator=gen)
    probs = torch.tensor([0.55, 0.25, 0.12, 0.08])

    def batch(step):
        g = torch.Generator().manual_seed(a.seed * 1000003 + step)
        x = torch.empty(a.batch, a.seq + 1, dtype=torch.long)
        x[:, 0] = torch.randint(0, a.vocab, (a.batch,), generator=g)
        for i in range(1, a.seq + 1):
            pick = torch.multinomial(probs, a.batch, replacement=True, generator=g)
            x[:, i] = succ[x[:, i - 1], pick]
        return x[:, :-1], x[:, 1:]
    return batch


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.backend == "cais":
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
        import cais.torch  # noqa: F401  registers the backend "cais"
    t0 = time.time()
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.heads % world or a.hidden % a.heads:
        raise SystemExit("tp_gpt: --heads must be a multiple of the world size, --hidden of "
                         "--heads")
    t_init = time.time() - t0
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    model = TPGPT(a, rank, world, dtype)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    batch = make_data(a)
    out = open(a.csv, "w") if a.csv and rank == 0 else None
    if out:
        out.write("step,loss,seconds\n")
    times, losses = [], []
    # cais: the manager's step is the iteration (one request to it per iteration)
    cais_step = None
    if a.backend == "cais" and not a.guess_steps:
        import cais.torch as ct
        cais_step = ct.step
    t_train = time.time()
    for step in range(a.steps):
        x, y = batch(step)
        ts = time.time()
        if cais_step:
            cais_step()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, a.vocab).float(), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        lv = loss.item()
        dt = time.time() - ts
        times.append(dt)
        losses.append(lv)
        if out:
            out.write("%d,%.9g,%.6f\n" % (step, lv, dt))
            out.flush()
        if rank == 0 and (step % 20 == 0 or step == a.steps - 1):
            print("tp_gpt: %s %s step %d loss %.6f (%.1f ms)" %
                  (a.backend, a.dtype, step, lv, dt * 1e3), flush=True)
        if not math.isfinite(lv):
            raise SystemExit("tp_gpt: the loss is %r at step %d" % (lv, step))
        if a.max_seconds and time.time() - t_train > a.max_seconds:
            break
    res = {"backend": a.backend, "dtype": a.dtype, "world": world, "steps": len(losses),
           "final_loss": losses[-1], "first_loss": losses[0], "init_s": round(t_init, 3),
           "step_ms_median": round(1e3 * sorted(times[5:] or times)[len(times[5:] or times) // 2],
                                   3),
           "step_ms_mean": round(1e3 * sum(times[5:] or times) / len(times[5:] or times), 3),
           "allreduce_bytes": a.batch * a.seq * a.hidden * (2 if a.dtype == "bf16" else 4),
           "allreduces_per_step": 4 * a.layers}
    if a.backend == "cais":
        import cais.torch as ct
        m = ct.metrics()
        res["cais"] = {"mode": dist.distributed_c10d._get_default_group().mode,
                       "collectives": m["collectives"], "in_network": m["in_network"],
                       "fallback": {k: v for k, v in m["fallback"].items() if v},
                       "chunks_sent": m["chunks_sent"],
                       "retransmissions": m["retransmissions"], "acks": m["acks"],
                       "nacks": m["nacks"], "queries": m["queries"], "steps": m["steps"],
                       "tensors": m["tensors"], "tensors_disabled": m["tensors_disabled"],
                       "max_rel_error": m["max_rel_error"], "p50_us": m["p50_us"],
                       "in_network_wire": m["in_network_wire"],
                       "step_begin_s": round(m["step_begin_s"], 3)}
    if rank == 0:
        print("tp_gpt: result " + json.dumps(res, sort_keys=True), flush=True)
    if out:
        out.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
