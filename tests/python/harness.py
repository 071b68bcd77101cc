# SPDX-License-Identifier: BSD-3-Clause
"""Shared by the Python tests: the package on the path, torch and numpy required
(never a silent skip), and N ranks as processes on 127.0.0.1 with a bound."""
import multiprocessing as mp
import os
import socket
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))


def require(*mods):
    """Import and return the modules; fail (not skip) with how to install them."""
    out = []
    for m in mods:
        try:
            out.append(__import__(m))
        except ImportError as e:
            sys.stderr.write("FAIL: %s cannot import %s (%s); scripts/install-deps.sh --python "
                             "installs python3-torch and python3-numpy for /usr/bin/python3\n" %
                             (sys.executable, m, e))
            sys.exit(1)
    return out


def free_ports(n):
    """n ports free for UDP and TCP on 127.0.0.1 (each with its neighbour free too)."""
    ports, socks = [], []
    try:
        while len(ports) < n:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.bind(("127.0.0.1", 0))
            p = u.getsockname()[1]
            t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                u.close()
                t.close()
                continue
            socks += [u, t]
            ports.append(p)
    finally:
        for s in socks:
            s.close()
    return ports


def _entry(rank, world, target, args, env, q):
    try:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)
        q.put((rank, "ok", target(rank, world, *args)))
    except BaseException:
        q.put((rank, "error", traceback.format_exc()))


def run_ranks(world, target, args=(), env=None, timeout=90, ranks=None):
    """Run target(rank, world, *args) in one process per rank (spawn), with env; return
    the results by rank. Raise AssertionError with every failure's traceback, or when a
    rank has not finished within timeout s (it is killed). ranks: only these."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    env = dict(env or {})
    procs = {}
    for r in (ranks if ranks is not None else range(world)):
        e = dict(env)
        if callable(env.get("per_rank")):
            e.pop("per_rank")
            e.update(env["per_rank"](r))
        p = ctx.Process(target=_entry, args=(r, world, target, args, e, q), daemon=True)
        p.start()
        procs[r] = p
    results, errors = {}, []
    deadline = time.time() + timeout
    while len(results) + len(errors) < len(procs) and time.time() < deadline:
        try:
            r, kind, val = q.get(timeout=0.5)
        except Exception:
            if all(not p.is_alive() for p in procs.values()) and q.empty():
                break
            continue
        if kind == "ok":
            results[r] = val
        else:
            errors.append("rank %d:\n%s" % (r, val))
    for r, p in procs.items():
        p.join(max(0.1, deadline - time.time()) if r in results else 0.1)
        if p.is_alive():
            p.kill()
            p.join()
    missing = [r for r in procs if r not in results and not any(
        e.startswith("rank %d:" % r) for e in errors)]
    if missing:
        errors.append("rank(s) %s: no result within %d s (killed, or died with exit code %s)" %
                      (missing, timeout, [procs[r].exitcode for r in missing]))
    if errors:
        raise AssertionError("\n".join(errors))
    return [results[r] for r in sorted(results)]


def ring_env(world):
    """CAIS_* for a ring-only job of world ranks on 127.0.0.1."""
    ports = free_ports(world)
    return {"CAIS_PEERS": ",".join("127.0.0.1:%d" % p for p in ports),
            "CAIS_NRANKS": world, "CAIS_MANAGER": None, "CAIS_SWITCH": None,
            "CAIS_TIMEOUT_MS": 20000, "CAIS_IFNAME": "lo", "per_rank": lambda r: {"CAIS_RANK": r}}
