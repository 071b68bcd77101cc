# SPDX-License-Identifier: BSD-3-Clause
"""The torch.distributed backend "cais" (PyTorch 1.13 and later, CPU tensors).

    import torch.distributed as dist
    import cais.torch                       # registers the backend "cais"
    dist.init_process_group("cais", ...)    # as with "gloo"
    dist.all_reduce(t, op=dist.ReduceOp.SUM)

all_reduce (also async_op=True, allreduce_coalesced, reduce, reduce_scatter)
of float32, bfloat16, float16 and int32 CPU tensors with SUM, AVG, MAX, MIN
goes through libcais: in-network through cais-switch, or its ring fallback.
Everything else (other dtypes and ops, broadcast, all_gather, barrier,
send/recv, ...) goes to a gloo process group the backend keeps inside, on
the same data address, so a training script runs unchanged (DDP included).
Configuration: the CAIS_* environment variables (cais.config; README.md,
"PyTorch"). The ranks agree through torch's store on their data addresses,
the job's name (managed) and the first seq (static), and report every
configuration error to each other, so a wrong setting on any rank raises
the same ConfigError or CaisError on every rank instead of a hang.
"""
import datetime
import os
import threading
import time
import uuid

import torch
import torch.distributed as dist

from . import _comm, _lib
from . import config as _config
from ._comm import CaisError, Communicator
from .config import ConfigError

__all__ = ["BACKEND", "ProcessGroupCAIS", "communicator", "metrics", "create_process_group"]

BACKEND = "cais"

_R = dist.ReduceOp
_OPS = ((_R.SUM, "sum"), (_R.AVG, "avg"), (_R.MAX, "max"), (_R.MIN, "min"))
_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32)

_groups_lock = threading.Lock()
_groups_made = [0]  # communicators this process made: the k-th takes CAIS_PORT + k, session + k


def _op_name(op):
    for r, name in _OPS:
        if op == r:
            return name
    return None


def _ours(tensors, op):
    """Can libcais take this collective? (the op's name, else None)"""
    name = _op_name(op)
    if name is None:
        return None
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or t.dtype not in _DTYPES \
                or t.is_sparse or t.is_complex():
            return None
    return name


# Works handed to C++ (DDP's reducer) must outlive the Python reference the
# override returned: PyTorch 1.13 keeps only the C++ part, and a Work whose
# Python object is gone answers getFuture() with "not implemented". So every
# Work stays here until it is complete and its future was taken, or for
# _KEEP_S after it completed when nobody asked for the future.
_KEEP_S = 5.0
_alive = {}
_alive_lock = threading.Lock()


def _purge(now):
    with _alive_lock:
        for k in [k for k, w in _alive.items() if w._released(now)]:
            del _alive[k]


class _Work(torch._C._distributed_c10d.Work):
    """The Work of one or more libcais requests: wait(), is_completed(), get_future()
    (a torch.futures.Future of the tensors, which DDP's comm hooks use)."""

    def __init__(self, result, handles, then=None):
        super().__init__()
        now = time.monotonic()
        _purge(now)
        self._t_done = None
        self._fut_taken = False
        with _alive_lock:
            _alive[id(self)] = self
        self._result = result
        self._fut = torch.futures.Future()
        self._ev = threading.Event()
        self._err = None
        self._then = then
        self._left = len(handles)
        self._lock = threading.Lock()
        if not handles:
            self._done()
        for h in handles:
            h.add_done_callback(self._one)

    def _one(self, h):
        with self._lock:
            if h.exception() is not None and self._err is None:
                self._err = h.exception()
            self._left -= 1
            last = self._left == 0
        if last:
            self._done()

    def _released(self, now):
        return self._t_done is not None and (self._fut_taken or now - self._t_done > _KEEP_S)

    def _done(self):
        if self._err is None and self._then is not None:
            try:
                self._then()
            except Exception as e:
                self._err = e
        self._ev.set()
        if self._err is not None:
            self._fut.set_exception(self._err)
        else:
            self._fut.set_result(self._result)
        self._t_done = time.monotonic()

    def wait(self, timeout=None):
        self._ev.wait()
        if self._err is not None:
            raise self._err
        return True

    def is_completed(self):
        return self._ev.is_set()

    def is_success(self):
        return self._ev.is_set() and self._err is None

    def exception(self):
        return self._err

    def get_future(self):
        self._fut_taken = True
        return self._fut

    def result(self):
        return self._result

    def synchronize(self):
        pass

    def source_rank(self):
        return -1


def _agree(store, rank, size, name, value, timeout_s):
    """Every rank posts value (a str, or an exception); returns every rank's, in rank order.
    Raises on every rank when one posted an error."""
    if isinstance(value, BaseException):
        text = "!%s: %s" % (type(value).__name__, value)
    else:
        text = "=" + value
    store.set("cais/%s/%d" % (name, rank), text)
    keys = ["cais/%s/%d" % (name, r) for r in range(size)]
    try:
        store.wait(keys, datetime.timedelta(seconds=timeout_s))
    except RuntimeError:
        missing = [r for r in range(size) if not store.check([keys[r]])]
        raise CaisError(-110, "backend 'cais' set-up (%s): rank(s) %s did not report within "
                              "%g s (not started, or failed before)" %
                        (name, ", ".join(map(str, missing)), timeout_s)) from None
    vals = [store.get(k).decode() for k in keys]
    for r, v in enumerate(vals):
        if v.startswith("!"):
            kind, _, msg = v[1:].partition(": ")
            err = ConfigError if kind == "ConfigError" else CaisError
            if r == rank and isinstance(value, BaseException):
                raise value
            if err is CaisError:
                raise CaisError(-71, "backend 'cais' set-up failed on rank %d: %s" % (r, msg))
            raise ConfigError("backend 'cais' set-up failed on rank %d: %s" % (r, msg))
    return [v[1:] for v in vals]


def _bits(obj):
    """bfloat16 tensors (in lists, at any depth) as float16 views of the same memory (gloo
    has no 16-bit integers; it copies these, never adds them): what
    only moves data (broadcast, all_gather, send, ...) goes through gloo bit for bit."""
    if isinstance(obj, torch.Tensor):
        return obj.view(torch.float16) if obj.dtype == torch.bfloat16 else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_bits(x) for x in obj)
    return obj


def step(group=None):
    """A training step begins: call it once per iteration, before the iteration's
    collectives (managed mode; elsewhere it does nothing). cais-manager's step then follows
    the training's, one per iteration, and each use of an all-reduce call site in the step
    (a layer's, in every layer) is a tensor with a scale of its own. group: a process group
    of backend "cais" (default: the default group)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupCAIS):
        raise ValueError("cais.torch.step: the group's backend is not cais")
    pg.communicator.step()


def create_process_group(store, rank, size, timeout):
    """The creator registered for "cais" (torch calls it with a PrefixStore of the group)."""
    return ProcessGroupCAIS(store, rank, size, timeout)


class ProcessGroupCAIS(dist.ProcessGroup):
    """A ProcessGroup whose all-reduces go through libcais; the rest through gloo."""

    def __init__(self, store, rank, size, timeout=datetime.timedelta(minutes=30)):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._comm = None
        err = None
        cfg = None
        try:
            cfg = _config.get()
            agree_s = (cfg.join_timeout_ms or 60000) / 1000.0
        except ConfigError as e:
            err, agree_s = e, 60.0
        ip = port = None
        k = 0
        if err is None:
            try:
                ip = _config.data_ip(cfg, toward=os.environ.get("MASTER_ADDR"))
                with _groups_lock:
                    k = _groups_made[0]
                    _groups_made[0] += 1
                nports = max(1, cfg.threads or 1)
                if cfg.port:
                    port = cfg.port + k * nports
                    if port + nports - 1 > 65535:
                        raise ConfigError("CAIS_PORT %d + %d communicators is past 65535" %
                                          (cfg.port, k))
                else:
                    port = _comm._free_port(ip, nports)
                _lib.lib()  # LibraryNotFound now, on every rank alike
            except (ConfigError, ImportError, CaisError) as e:
                err = e
        addrs = _agree(store, rank, size, "addr", err or "%s:%d" % (ip, port), agree_s)
        peers = [_config.parse_addr(a, None, "peer") for a in addrs]
        # the job (managed) and the first seq (static): rank 0's choice
        if rank == 0:
            job = cfg.job or "torch-%s" % uuid.uuid4().hex[:16]
            if k and cfg.job:
                job = "%s-g%d" % (cfg.job, k)
            fs = cfg.first_seq if cfg.first_seq is not None else \
                int(time.time() * (1 << 18)) & 0xFFFFFFFF
            store.set("cais/job", job)
            store.set("cais/first_seq", str(fs))
        job = store.get("cais/job").decode()
        first_seq = int(store.get("cais/first_seq").decode())
        # the inner gloo group, for everything libcais does not do, on the data address
        gstore = dist.PrefixStore("cais-gloo", store)
        if os.environ.get("GLOO_SOCKET_IFNAME"):
            self._gloo = dist.ProcessGroupGloo(gstore, rank, size, timeout)
        else:
            o = dist.ProcessGroupGloo._Options()
            o._devices = [dist.ProcessGroupGloo.create_device(hostname=ip)]
            o._timeout = timeout
            o._threads = 2
            self._gloo = dist.ProcessGroupGloo(gstore, rank, size, o)
        c = None
        try:
            if cfg.mode == "managed":
                c = Communicator(rank, size, data=(ip, port), job=job, config=cfg)
            else:
                ccfg = cfg.replace(session=cfg.session + k) if cfg.mode == "static" else cfg
                if ccfg.session > 65535:
                    raise ConfigError("CAIS_SESSION %d + %d is past 65535" % (cfg.session, k))
                c = Communicator(rank, size, peers=peers, first_seq=first_seq, config=ccfg)
            err = None
        except (ConfigError, CaisError) as e:
            err = e
        try:
            _agree(store, rank, size, "comm", err or "ok", agree_s)
        except Exception:
            if c is not None:
                c.close()
            raise
        self._comm = c
        self.mode = cfg.mode

    # ---- identity ----
    def name(self):
        return BACKEND

    def _get_backend_name(self):
        return BACKEND

    def getBackendName(self):
        return BACKEND

    @property
    def communicator(self):
        return self._comm

    # ---- through libcais ----
    def _issue(self, tensors, op):
        return [self._comm.iallreduce(t, op) for t in tensors]

    def allreduce(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        op = opts.reduceOp if opts is not None else _R.SUM
        name = _ours(tensors, op)
        if name is None:
            return self._gloo.allreduce(tensors, opts) if opts is not None else \
                self._gloo.allreduce(tensors)
        return _Work(tensors, self._issue(tensors, name))

    def allreduce_coalesced(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else _R.SUM
        name = _ours(tensors, op)
        if name is None:
            return self._gloo.allreduce_coalesced(tensors, opts) if opts is not None else \
                self._gloo.allreduce_coalesced(tensors)
        return _Work(tensors, self._issue(tensors, name))

    def reduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else _R.SUM
        root = opts.rootRank if opts is not None else 0
        name = _ours(tensors, op)
        if name is None:
            return self._gloo.reduce(tensors, opts) if opts is not None else \
                self._gloo.reduce(tensors)
        tmp = [t.detach().contiguous().clone() for t in tensors]

        def then():
            if self._rank == root:
                with torch.no_grad():
                    for t, x in zip(tensors, tmp):
                        t.copy_(x)
        return _Work(tensors, self._issue(tmp, name), then)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op = opts.reduceOp if opts is not None else _R.SUM
        flat_in = [t for ts in input_tensors for t in ts]
        name = _ours(list(output_tensors) + flat_in, op)
        if name is None or len(output_tensors) != len(input_tensors) or \
                any(len(ts) != self._size for ts in input_tensors) or \
                len({t.dtype for t in list(output_tensors) + flat_in}) != 1:
            return self._gloo.reduce_scatter(output_tensors, input_tensors, opts) \
                if opts is not None else self._gloo.reduce_scatter(output_tensors, input_tensors)
        flats = [torch.cat([t.detach().reshape(-1) for t in ts]) for ts in input_tensors]

        def then():
            with torch.no_grad():
                for out, ts, f in zip(output_tensors, input_tensors, flats):
                    off = sum(t.numel() for t in ts[:self._rank])
                    out.copy_(f[off:off + ts[self._rank].numel()].view_as(out))
        return _Work(output_tensors, self._issue(flats, name), then)

    def _reduce_scatter_base(self, output, input, opts=None):
        op = opts.reduceOp if opts is not None else _R.SUM
        name = _ours([output, input], op)
        if name is None or input.numel() != output.numel() * self._size or \
                input.dtype != output.dtype:
            return self._gloo._reduce_scatter_base(output, input, opts) if opts is not None \
                else self._gloo._reduce_scatter_base(output, input)
        flat = input.detach().reshape(-1).clone()
        n = output.numel()

        def then():
            with torch.no_grad():
                output.copy_(flat[self._rank * n:(self._rank + 1) * n].view_as(output))
        return _Work([output], self._issue([flat], name), then)

    # ---- through gloo: data movement, bfloat16 moved as its 16 bits (gloo has no bf16) ----
    def broadcast(self, *a, **kw):
        return self._gloo.broadcast(*_bits(a), **kw)

    def allgather(self, *a, **kw):
        return self._gloo.allgather(*_bits(a), **kw)

    def _allgather_base(self, *a, **kw):
        return self._gloo._allgather_base(*_bits(a), **kw)

    def allgather_coalesced(self, *a, **kw):
        return self._gloo.allgather_coalesced(*_bits(a), **kw)

    def gather(self, *a, **kw):
        return self._gloo.gather(*_bits(a), **kw)

    def scatter(self, *a, **kw):
        return self._gloo.scatter(*_bits(a), **kw)

    def alltoall(self, *a, **kw):
        return self._gloo.alltoall(*_bits(a), **kw)

    def alltoall_base(self, *a, **kw):
        return self._gloo.alltoall_base(*_bits(a), **kw)

    def barrier(self, *a, **kw):
        return self._gloo.barrier(*a, **kw)

    def monitored_barrier(self, *a, **kw):
        return self._gloo.monitored_barrier(*a, **kw)

    def send(self, *a, **kw):
        return self._gloo.send(*_bits(a), **kw)

    def recv(self, *a, **kw):
        return self._gloo.recv(*_bits(a), **kw)

    def recv_anysource(self, *a, **kw):
        return self._gloo.recv_anysource(*_bits(a), **kw)

    def _get_sequence_number_for_group(self):
        return self._gloo._get_sequence_number_for_group()

    def _set_sequence_number_for_group(self):
        return self._gloo._set_sequence_number_for_group()

    # ---- end ----
    def shutdown(self):
        """Close the libcais communicator (every rank, after its last collective)."""
        c, self._comm = self._comm, None
        if c is not None:
            c.close()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass


def _pg(group=None):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupCAIS):
        raise ValueError("cais.torch: the group is not a 'cais' process group")
    return pg


def communicator(group=None):
    """The cais.Communicator of a "cais" group (default: the world)."""
    return _pg(group).communicator


def metrics(group=None):
    """libcais's counters of a "cais" group (cais.Communicator.metrics())."""
    return _pg(group).communicator.metrics()


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, create_process_group)
