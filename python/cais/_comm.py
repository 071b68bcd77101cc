# SPDX-License-Identifier: BSD-3-Clause
"""Communicators and requests over libcais (ctypes); numpy arrays and CPU torch tensors."""
import atexit
import ctypes
import os
import queue
import socket
import sys
import threading
import time
import warnings
import weakref

from . import _lib
from . import config as _config
from .config import ConfigError

__all__ = ["CaisError", "Communicator", "Handle", "SUM", "AVG", "MAX", "MIN", "op_code",
           "dtype_of"]

SUM, AVG, MAX, MIN = "sum", "avg", "max", "min"
_OPS = {"sum": _lib.OP_SUM, "avg": _lib.OP_AVG, "mean": _lib.OP_AVG, "max": _lib.OP_MAX,
        "min": _lib.OP_MIN}
_CAIS_DIR = os.path.dirname(os.path.abspath(__file__))


class CaisError(RuntimeError):
    """A libcais call failed; errno is the positive errno value it returned."""

    def __init__(self, rc, what):
        self.errno = abs(rc)
        self.what = what
        super().__init__("cais: %s: %s (%s)" % (what, _lib.strerror(rc), _lib.errno_name(rc)))


def _check(rc, what):
    if rc != 0:
        raise CaisError(rc, what)


def op_code(op):
    """'sum', 'avg', 'max', 'min' (or cais.SUM..., or the enum's int) -> enum cais_redop."""
    if isinstance(op, str):
        try:
            return _OPS[op.lower()]
        except KeyError:
            raise ValueError("cais: op '%s' is not sum, avg, max or min" % op) from None
    if isinstance(op, int) and op in _lib.OP_NAMES:
        return op
    raise ValueError("cais: op %r is not sum, avg, max or min" % (op,))


# ---- buffers: numpy arrays and torch tensors ----

def _torch():
    return sys.modules.get("torch")


def dtype_of(x):
    """The enum cais_datatype of x (numpy array or torch tensor), or raise TypeError."""
    t = _torch()
    if t is not None and isinstance(x, t.Tensor):
        m = {t.float32: _lib.FLOAT32, t.bfloat16: _lib.BFLOAT16, t.float16: _lib.FLOAT16,
             t.int32: _lib.INT32}
        if x.dtype not in m:
            raise TypeError("cais: tensor dtype %s is not one of float32, bfloat16, float16, "
                            "int32" % x.dtype)
        return m[x.dtype]
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        m = {np.dtype(np.float32): _lib.FLOAT32, np.dtype(np.float16): _lib.FLOAT16,
             np.dtype(np.int32): _lib.INT32}
        d = x.dtype.newbyteorder("=") if x.dtype.byteorder == "=" else x.dtype
        if d not in m or not x.dtype.isnative:
            raise TypeError("cais: array dtype %s is not one of float32, float16, int32 "
                            "(native byte order; bfloat16: use a torch tensor)" % x.dtype)
        return m[d]
    raise TypeError("cais: %s is neither a numpy array nor a torch tensor" % type(x).__name__)


class _Buffer:
    """The contiguous memory an all-reduce works on, and how to write it back to x."""

    def __init__(self, x):
        self.x = x
        self.dt = dtype_of(x)
        t = _torch()
        if t is not None and isinstance(x, t.Tensor):
            if x.device.type != "cpu":
                raise ValueError("cais: tensor on %s: only CPU tensors" % x.device)
            d = x.detach()  # the same memory, outside autograd (as gloo writes it)
            self.work = d if d.is_contiguous() else d.contiguous()
            self.count = self.work.numel()
            self.ptr = self.work.data_ptr()
            self.copy_back = not d.is_contiguous()
        else:
            if not x.flags.writeable:
                raise ValueError("cais: the array is read-only (the all-reduce is in place)")
            import numpy as np
            self.work = x if x.flags.c_contiguous else np.ascontiguousarray(x)
            self.count = self.work.size
            self.ptr = self.work.ctypes.data
            self.copy_back = self.work is not x

    def finish(self):
        if self.copy_back:
            t = _torch()
            if t is not None and isinstance(self.x, t.Tensor):
                with t.no_grad():
                    self.x.copy_(self.work)
            else:
                self.x[...] = self.work
        self.work = None


# ---- requests ----

class Handle:
    """An all-reduce in flight: wait() returns the (reduced in place) input."""

    def __init__(self, buf, op, tensor):
        self._buf = buf
        self._x = buf.x if buf is not None else None
        self.op = op
        self.tensor = tensor
        self._done = threading.Event()
        self._error = None
        self._callbacks = []
        self._lock = threading.Lock()
        self.status = None  # dict once completed: path, fallback, wire, time_us, ...

    def _finish(self, rc, st, what):
        try:
            if rc == 0 and self._buf is not None:
                self._buf.finish()
        except Exception as e:  # pragma: no cover (a copy that failed)
            self._error = e
        if rc != 0:
            self._error = CaisError(rc, what)
        if st is not None:
            self.status = {"path": _lib.PATH_NAMES.get(st.path, str(st.path)),
                           "fallback": _lib.FALLBACKS[st.fallback]
                           if 0 <= st.fallback < _lib.FB_COUNT else str(st.fallback),
                           "wire": _lib.WIRE_NAMES.get(st.wire, str(st.wire)),
                           "time_us": st.time_us, "retransmissions": st.retransmissions,
                           "peer_chunks": st.peer_chunks, "rel_error": st.rel_error}
        self._buf = None
        with self._lock:
            self._done.set()
            cbs, self._callbacks = self._callbacks, []
        for cb in cbs:
            cb(self)

    def add_done_callback(self, fn):
        """fn(handle) once the request completes (at once if it has)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def is_completed(self):
        return self._done.is_set()

    def exception(self):
        return self._error

    def wait(self, timeout=None):
        """Wait until completed; return the input, reduced; raise CaisError on failure.
        timeout (s) bounds the wait itself (TimeoutError); the collective is bounded by
        CAIS_TIMEOUT_MS anyway."""
        if not self._done.wait(timeout):
            raise TimeoutError("cais: the all-reduce did not complete within %s s" % timeout)
        if self._error is not None:
            raise self._error
        return self._x


def _call_site():
    """The caller's frames outside cais and torch: (file, line, function) up to 12 deep."""
    t = _torch()
    skip = [_CAIS_DIR]
    if t is not None:
        skip.append(os.path.dirname(os.path.abspath(t.__file__)))
    out = []
    f = sys._getframe(2)
    while f is not None and len(out) < 12:
        fn = f.f_code.co_filename
        if not any(fn.startswith(s) for s in skip):
            out.append((os.path.basename(fn), f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return tuple(out)


def _free_port(ip, n=1):
    """A port p such that p..p+n-1 are free for UDP and TCP on ip."""
    for _ in range(50):
        socks = []
        try:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(u)
            u.bind((ip, 0))
            p = u.getsockname()[1]
            if p + n > 65535:
                continue
            for i in range(n):
                tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(tcp)
                tcp.bind((ip, p + i))
                if i:
                    u2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    socks.append(u2)
                    u2.bind((ip, p + i))
            return p
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise CaisError(-98, "no free data port on %s" % ip)  # EADDRINUSE


_live = weakref.WeakSet()


@atexit.register
def _close_all():
    for c in list(_live):
        try:
            c.close()
        except Exception:
            pass


class Communicator:
    """One libcais communicator: this process as rank `rank` of `world`.

    Which kind comes from the configuration (config.get(), the CAIS_*
    variables, unless config= is given): managed (CAIS_MANAGER: joins the job
    `job` through cais-manager; per-tensor scales from it), static
    (CAIS_SWITCH: the switch's session lists every rank at peers[rank]) or
    ring only (neither: libcais's ring over TCP among the peers).

      rank, world   default CAIS_RANK, CAIS_NRANKS
      peers         every rank's data address, rank order, [(ip, port)] or
                    ['ip:port'] (static and ring; default CAIS_PEERS)
      data          this rank's data address (ip, port) (managed; default
                    CAIS_IFNAME's address and CAIS_PORT or a free port)
      job           the job's name (managed; default CAIS_JOB)
      first_seq     the session's first seq (static; default CAIS_FIRST_SEQ or 0)
    """

    def __init__(self, rank=None, world=None, peers=None, data=None, job=None, first_seq=None,
                 config=None):
        cfg = config if config is not None else _config.get()
        self.cfg = cfg
        rank = cfg.rank if rank is None else rank
        world = cfg.nranks if world is None else world
        if rank is None or world is None:
            raise ConfigError("cais: rank and world size unknown: pass rank= and world= or "
                              "set CAIS_RANK and CAIS_NRANKS")
        if not 1 <= world <= _lib.MAX_WORLD or not 0 <= rank < world:
            raise ConfigError("cais: rank %d of world %d: want 0 <= rank < world <= %d" %
                              (rank, world, _lib.MAX_WORLD))
        self.rank, self.world, self.mode = rank, world, cfg.mode
        L = _lib.lib()
        self._L = L
        self._comm = ctypes.c_void_p()
        self._closed = False
        self._lock = threading.RLock()
        tmpl = _lib.cais_config()
        L.cais_config_init(ctypes.byref(tmpl))
        tmpl.rank, tmpl.world = rank, world
        if cfg.threshold is not None:
            tmpl.threshold = cfg.threshold
        for f, v in (("timeout_ms", cfg.timeout_ms), ("retries", cfg.retries),
                     ("retx_timeout_us", cfg.retx_us), ("check_every", cfg.check_every),
                     ("scale", cfg.scale), ("b16_scale", cfg.b16_scale)):
            if v is not None:
                setattr(tmpl, f, v)
        if cfg.wire is not None:
            tmpl.wire = _lib.WIRE_FIXED32 if cfg.wire == "fixed32" else _lib.WIRE_BLOCK16
        tmpl.threads = cfg.threads if cfg.threads is not None else 1
        self._path = {"auto": _lib.PATH_AUTO, "switch": _lib.PATH_SWITCH,
                      "ring": _lib.PATH_RING}[cfg.path or "auto"]
        # managed: tensor ids by call site, registered at first sight; steps
        self._ids, self._registered, self._since_step = {}, {}, set()
        self._next_id, self._step = 1, 0
        # after step(): steps begin there only; uses of a key in the step so far
        self._explicit, self._uses = False, {}
        self._step_warned = False
        self._step_s = 0.0
        self._wires = {}  # in-network collectives by the wire type their chunks went as
        if self.mode == "managed":
            self._join(cfg, tmpl, data, job)
        else:
            self._create(cfg, tmpl, peers, first_seq)
        if self.mode == "ring":
            self._path = _lib.PATH_RING
        if self._path != _lib.PATH_AUTO:
            _check(L.cais_set_path(self._comm, self._path), "cais_set_path")
        self._q = queue.Queue()
        self._thread = threading.Thread(target=self._complete, name="cais-completer-%d" % rank,
                                        daemon=True)
        self._thread.start()
        _live.add(self)

    # -- creation --
    def _create(self, cfg, tmpl, peers, first_seq):
        peers = peers if peers is not None else cfg.peers
        if peers is None:
            raise ConfigError("cais: the peers' data addresses are unknown: set CAIS_PEERS "
                              "(every rank's IP:PORT in rank order) or pass peers=")
        pl = [p if isinstance(p, tuple) else _config.parse_addr(p, 47000, "peers")
              for p in peers]
        if len(pl) != self.world:
            raise ConfigError("cais: %d peers for a world of %d" % (len(pl), self.world))
        arr = (_lib.sockaddr_in * self.world)(*[_lib.sockaddr_in.make(ip, p) for ip, p in pl])
        self.peers = pl
        tmpl.peers = arr
        if self.mode == "static":
            tmpl.switch_addr = _lib.sockaddr_in.make(*cfg.switch)
            tmpl.tenant, tmpl.session = cfg.tenant, cfg.session
        else:  # the ring never sends to the switch; the route check finds this host
            tmpl.switch_addr = _lib.sockaddr_in.make(pl[self.rank][0], _lib.UDP_PORT)
        tmpl.slots = cfg.slots or 128
        tmpl.elems = cfg.elems or _lib.MAX_ELEMS
        fs = first_seq if first_seq is not None else cfg.first_seq
        tmpl.first_seq = (fs or 0) & 0xFFFFFFFF
        rc = self._L.cais_comm_create(ctypes.byref(tmpl), ctypes.byref(self._comm))
        if rc == -90:  # EMSGSIZE
            raise ConfigError("cais: %d elements per packet do not fit the MTU toward the "
                              "switch %s: set CAIS_ELEMS (e.g. 360 for an MTU of 1500)" %
                              (tmpl.elems, tmpl.switch_addr.text()))
        _check(rc, "cais_comm_create (rank %d of %d, data address %s:%d)" %
               (self.rank, self.world, pl[self.rank][0], pl[self.rank][1]))

    def _join(self, cfg, tmpl, data, job):
        job = job if job is not None else cfg.job
        if not job:
            raise ConfigError("cais: CAIS_MANAGER is set but the job's name is unknown: set "
                              "CAIS_JOB (the same on every rank) or pass job=")
        if data is None:
            ip = _config.data_ip(cfg)
            port = cfg.port or _free_port(ip, max(1, tmpl.threads))
            data = (ip, port)
        elif not isinstance(data, tuple):
            data = _config.parse_addr(data, None, "data")
        self.data, self.job = data, job
        j = _lib.cais_join()
        j.manager = ("%s:%d" % cfg.manager).encode()
        j.key_file = cfg.manager_key.encode() if cfg.manager_key else None
        j.job = job.encode()
        j.tenant = cfg.tenant_name.encode()
        j.rank, j.world = self.rank, self.world
        j.data = _lib.sockaddr_in.make(*data)
        j.slots = cfg.slots or 0
        j.elems = cfg.elems or 0
        j.timeout_ms = cfg.join_timeout_ms or 60000
        rc = self._L.cais_comm_join(ctypes.byref(j), ctypes.byref(tmpl),
                                    ctypes.byref(self._comm))
        _check(rc, "joining job '%s' through cais-manager %s:%d (rank %d of %d, data address "
               "%s:%d)" % ((job,) + cfg.manager + (self.rank, self.world) + data))

    # -- the completion thread: waits for each request in issue order --
    def _complete(self):
        L = self._L
        while True:
            item = self._q.get()
            if item is None:
                return
            req, h, what = item
            st = _lib.cais_status()
            rc = L.cais_wait_status(req, ctypes.byref(st))
            if rc == 0 and st.path == _lib.PATH_SWITCH:
                w = _lib.WIRE_NAMES.get(st.wire, str(st.wire))
                self._wires[w] = self._wires.get(w, 0) + 1
            try:
                h._finish(rc, st, what)
            except Exception as e:  # a callback's failure must not stop the others
                warnings.warn("cais: a completion callback failed: %r" % (e,))

    # -- tensor ids and steps (managed) --
    def _tensor_id(self, op, dt, count, tensor, key):
        """The tensor id of this collective (managed: registered, and the step begun).
        libcais takes a managed tensor's collectives to the ring in the step of its first
        one and the next, before the manager has its magnitude from every rank."""
        if self.mode != "managed":
            if tensor is not None:
                return tensor
            c = self.cfg
            return {_lib.OP_SUM: c.tensor_sum, _lib.OP_AVG: c.tensor_sum,
                    _lib.OP_MAX: c.tensor_max, _lib.OP_MIN: c.tensor_min}[op]
        if tensor is None:
            k = (op, dt, count, key)
            if self._explicit:
                # the n-th use of this call site in the step: a tensor of its own
                n = self._uses.get(k, 0)
                self._uses[k] = n + 1
                k += (n,)
            tensor = self._ids.get(k)
            if tensor is None:
                tensor = self._ids[k] = self._next_id
                self._next_id += 1
        reg = self._registered.get(tensor)
        if reg is None:
            _check(self._L.cais_tensor_register(self._comm, tensor, op, dt),
                   "cais_tensor_register (tensor %d, %s, %s)" %
                   (tensor, _lib.OP_NAMES[op], _lib.DTYPE_NAMES[dt]))
            self._registered[tensor] = (op, dt)
        elif reg != (op, dt):
            raise ValueError("cais: tensor %d was registered as %s %s, now used as %s %s" %
                             (tensor, _lib.OP_NAMES[reg[0]], _lib.DTYPE_NAMES[reg[1]],
                              _lib.OP_NAMES[op], _lib.DTYPE_NAMES[dt]))
        if self._step == 0 or (tensor in self._since_step and not self._explicit):
            self.step_begin()
        self._since_step.add(tensor)
        return tensor

    def step(self):
        """Managed: a training step begins (call it once per iteration, before the
        iteration's collectives; elsewhere it does nothing). From the first call on, the
        manager's steps begin here only, one per iteration, and a call site used several
        times in a step (the same layer code in every layer) is a tensor per use, each with a
        scale of its own; the package no longer guesses steps from a tensor coming again."""
        if self.mode != "managed":
            return
        self._explicit = True
        self.step_begin()

    def step_begin(self):
        """Managed: begin the next step (report the last one's max |x|, take the manager's
        scales and offload list). The package calls it itself: before the first collective,
        and, until step() is called, before a collective whose tensor was already used since
        the last step began."""
        t0 = time.perf_counter()
        rc = self._L.cais_step_begin(self._comm, self._step)
        self._step_s += time.perf_counter() - t0
        self._step += 1
        self._since_step.clear()
        self._uses.clear()
        if rc != 0 and not self._step_warned:
            self._step_warned = True
            warnings.warn("cais: cais_step_begin (step %d): %s; the tensors take the ring "
                          "until a step's answer" % (self._step - 1, _lib.strerror(rc)))

    # -- collectives --
    def iallreduce(self, x, op=SUM, tensor=None, key=None):
        """Start an in-place all-reduce of x (numpy array or CPU torch tensor: float32,
        bfloat16 (torch), float16, int32) with op sum, avg, max or min. Returns a Handle.
        tensor: the tensor id (default: static, the CAIS_TENSOR_* of the op; managed, one per
        call site and shape); key: what tells tensors apart instead of the call site."""
        o = op_code(op)
        buf = _Buffer(x)
        h = Handle(buf, o, tensor)
        if buf.count == 0:
            h._finish(0, None, "")
            return h
        if self.mode == "managed" and tensor is None and key is None:
            key = _call_site() if self.cfg.tensor_key != "shape" else ()
        with self._lock:
            if self._closed:
                raise CaisError(-125, "all-reduce on a closed communicator")  # ECANCELED
            tid = self._tensor_id(o, buf.dt, buf.count, tensor, key)
            h.tensor = tid
            req = ctypes.c_void_p()
            rc = self._L.cais_iallreduce(self._comm, tid, buf.ptr, buf.ptr, buf.count, buf.dt,
                                         o, ctypes.byref(req))
            what = "all-reduce of %d %s (%s, tensor %d)" % (
                buf.count, _lib.DTYPE_NAMES[buf.dt], _lib.OP_NAMES[o], tid)
            _check(rc, "cais_iallreduce: " + what)
            self._q.put((req, h, what))
        return h

    def allreduce(self, x, op=SUM, tensor=None, key=None):
        """iallreduce(...).wait(): x, reduced in place."""
        if self.mode == "managed" and tensor is None and key is None:
            key = _call_site() if self.cfg.tensor_key != "shape" else ()
        return self.iallreduce(x, op, tensor, key).wait()

    def set_path(self, path):
        """'auto', 'switch' or 'ring' for the next collectives (the same on every rank)."""
        p = {"auto": _lib.PATH_AUTO, "switch": _lib.PATH_SWITCH, "ring": _lib.PATH_RING}[path]
        with self._lock:
            _check(self._L.cais_set_path(self._comm, p), "cais_set_path")
            self._path = p

    def set_threshold(self, nbytes):
        with self._lock:
            _check(self._L.cais_set_threshold(self._comm, nbytes), "cais_set_threshold")

    def metrics(self):
        """libcais's counters (struct cais_metrics) as a dict; fallback by reason."""
        m = _lib.cais_metrics()
        _check(self._L.cais_metrics_get(self._comm, ctypes.byref(m)), "cais_metrics_get")
        d = {f: getattr(m, f) for f, _ in _lib.cais_metrics._fields_ if f != "fallback"}
        d["fallback"] = {_lib.FALLBACKS[i].lower(): m.fallback[i] for i in range(_lib.FB_COUNT)}
        d["steps"] = self._step
        d["step_begin_s"] = self._step_s
        d["in_network_wire"] = dict(self._wires)
        d["tensors"] = len(self._registered)
        return d

    def close(self):
        """Finish what is in flight, linger (peers may still fetch results), destroy."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._q.put(None)
        self._thread.join()
        if self.cfg.debug:
            m = self.metrics()
            sys.stderr.write("cais: rank %d: %d collectives, %d in-network, fallbacks %s, "
                             "%d steps (%.3f s in cais_step_begin), %d tensors, max rel error "
                             "%.3g, p50 %.0f us\n" %
                             (self.rank, m["collectives"], m["in_network"],
                              {k: v for k, v in m["fallback"].items() if v}, m["steps"],
                              m["step_begin_s"], m["tensors"], m["max_rel_error"],
                              m["p50_us"]))
        if self.cfg.linger_ms:
            time.sleep(self.cfg.linger_ms / 1000.0)
        self._L.cais_comm_destroy(self._comm)
        self._comm = ctypes.c_void_p()
        _live.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self._closed and sys is not None:
                self.close()
        except Exception:
            pass

