# SPDX-License-Identifier: BSD-3-Clause
"""CAIS from Python: in-network all-reduce through cais-switch, over libcais (ctypes).

    import numpy as np, cais
    cais.init()                       # CAIS_RANK, CAIS_NRANKS, CAIS_PEERS / CAIS_SWITCH / CAIS_MANAGER
    x = np.ones(1 << 20, np.float32)
    cais.allreduce(x)                 # in place: the sum over the ranks
    h = cais.allreduce(x, op="max", async_op=True); h.wait()
    cais.finalize()

Arrays: numpy (float32, float16, int32) and CPU torch tensors (float32,
bfloat16, float16, int32); ops sum, avg, max, min. `import cais.torch`
registers the torch.distributed backend "cais". The configuration is the
environment, read once (cais.config.get(); README.md, "PyTorch").
"""
from . import config
from ._comm import (AVG, MAX, MIN, SUM, CaisError, Communicator, Handle, dtype_of,  # noqa: F401
                    op_code)
from ._lib import LibraryNotFound  # noqa: F401
from .config import ConfigError  # noqa: F401

__all__ = ["init", "finalize", "allreduce", "get_communicator", "Communicator", "Handle",
           "CaisError", "ConfigError", "LibraryNotFound", "SUM", "AVG", "MAX", "MIN", "config",
           "library_path", "dtype_of", "op_code"]

_default = None


def init(rank=None, world=None, **kw):
    """Create the default communicator (arguments as Communicator's; the rest from the
    environment) and return it."""
    global _default
    if _default is not None:
        raise RuntimeError("cais: init() was already called (finalize() first)")
    _default = Communicator(rank, world, **kw)
    return _default


def get_communicator():
    """The default communicator; created by init() from the environment on first use."""
    if _default is None:
        init()
    return _default


def finalize():
    """Close the default communicator (every rank, after its last collective)."""
    global _default
    if _default is not None:
        c, _default = _default, None
        c.close()


def allreduce(x, op=SUM, async_op=False, comm=None, tensor=None):
    """All-reduce x in place across the ranks: a numpy array or a CPU torch tensor (float32,
    bfloat16 (torch only), float16, int32), op "sum", "avg", "max" or "min". Returns x, or
    with async_op=True a Handle whose wait() returns x. Raises CaisError when the
    collective fails (e.g. ETIMEDOUT after CAIS_TIMEOUT_MS), TypeError or ValueError for an
    argument it cannot take."""
    c = comm if comm is not None else get_communicator()
    h = c.iallreduce(x, op, tensor)
    return h if async_op else h.wait()


def library_path():
    """The path of the libcais.so in use."""
    from . import _lib
    return _lib.lib()._cais_path
