# SPDX-License-Identifier: BSD-3-Clause
"""ctypes bindings of libcais (include/cais/cais.h), nothing compiled.

The structs mirror cais.h member for member (tests/python/test_lib.py
compares every offset with the C compiler's, through cais-py-layout). The
library is found, in this order, at $CAIS_LIB, in the build directories next
to the repository (build/agent/libcais.so and the like), then by the loader
(libcais.so.0 on its path, e.g. after `meson install`).
"""
import ctypes
import ctypes.util
import errno as _errno
import os
import socket
import struct

# ---- enums of cais.h and proto.h ----
FLOAT32, BFLOAT16, FLOAT16, INT32 = 0, 1, 2, 3
DTYPE_NAMES = {FLOAT32: "f32", BFLOAT16: "bf16", FLOAT16: "f16", INT32: "i32"}
DTYPE_SIZES = {FLOAT32: 4, BFLOAT16: 2, FLOAT16: 2, INT32: 4}

OP_SUM, OP_AVG, OP_MAX, OP_MIN = 0, 1, 2, 3
OP_NAMES = {OP_SUM: "sum", OP_AVG: "avg", OP_MAX: "max", OP_MIN: "min"}

PATH_AUTO, PATH_SWITCH, PATH_RING = 0, 1, 2
PATH_NAMES = {PATH_AUTO: "auto", PATH_SWITCH: "switch", PATH_RING: "ring"}

WIRE_FIXED32, WIRE_BLOCK16 = 0, 1
WIRE_NAMES = {WIRE_FIXED32: "fixed32", WIRE_BLOCK16: "block16"}

# enum cais_fallback, in the order of CAIS_FALLBACKS
FALLBACKS = ("NONE", "THRESHOLD", "TENSOR_OFF", "ERROR_ALARM", "FORCED", "REJECT",
             "FWD_ONLY", "OVERFLOW", "SILENT")
FB_COUNT = len(FALLBACKS)

UDP_PORT = 51733  # CAIS_UDP_PORT: the aggregator's data port
MGR_PORT = 51735  # CAIS_MGR_PORT: cais-manager's
MAX_WORLD = 255
MAX_ELEMS = 2048
DEFAULT_THRESHOLD = 512 << 10


class sockaddr_in(ctypes.Structure):
    _fields_ = [("sin_family", ctypes.c_ushort),
                ("sin_port", ctypes.c_uint16),  # network order
                ("sin_addr", ctypes.c_uint32),  # network order
                ("sin_zero", ctypes.c_ubyte * 8)]

    @classmethod
    def make(cls, ip, port):
        s = cls()
        s.sin_family = socket.AF_INET
        s.sin_port = socket.htons(port)
        s.sin_addr = struct.unpack("=I", socket.inet_aton(ip))[0]
        return s

    def text(self):
        return "%s:%d" % (socket.inet_ntoa(struct.pack("=I", self.sin_addr)),
                          socket.ntohs(self.sin_port))


class cais_config(ctypes.Structure):
    _fields_ = [("tenant", ctypes.c_uint16),
                ("session", ctypes.c_uint16),
                ("rank", ctypes.c_uint),
                ("world", ctypes.c_uint),
                ("switch_addr", sockaddr_in),
                ("peers", ctypes.POINTER(sockaddr_in)),
                ("slots", ctypes.c_uint32),
                ("elems", ctypes.c_uint16),
                ("scale", ctypes.c_double),
                ("wire", ctypes.c_int),
                ("b16_scale", ctypes.c_double),
                ("threads", ctypes.c_uint),
                ("threshold", ctypes.c_size_t),
                ("retx_timeout_us", ctypes.c_uint32),
                ("retries", ctypes.c_uint32),
                ("timeout_ms", ctypes.c_uint32),
                ("check_every", ctypes.c_uint32),
                ("error_alarm", ctypes.c_double),
                ("round_nearest", ctypes.c_bool),
                ("first_seq", ctypes.c_uint32),
                ("stripes", ctypes.POINTER(sockaddr_in)),
                ("nstripes", ctypes.c_uint)]


class cais_status(ctypes.Structure):
    _fields_ = [("error", ctypes.c_int),
                ("path", ctypes.c_int),
                ("wire", ctypes.c_int),
                ("fallback", ctypes.c_int),
                ("retransmissions", ctypes.c_uint32),
                ("peer_chunks", ctypes.c_uint32),
                ("time_us", ctypes.c_double),
                ("rel_error", ctypes.c_double)]


class cais_metrics(ctypes.Structure):
    _fields_ = [("collectives", ctypes.c_uint64),
                ("in_network", ctypes.c_uint64),
                ("fallback", ctypes.c_uint64 * FB_COUNT),
                ("errors", ctypes.c_uint64),
                ("chunks_sent", ctypes.c_uint64),
                ("retransmissions", ctypes.c_uint64),
                ("results_ignored", ctypes.c_uint64),
                ("acks", ctypes.c_uint64),
                ("send_errors", ctypes.c_uint64),
                ("peer_chunks", ctypes.c_uint64),
                ("peer_chunks_served", ctypes.c_uint64),
                ("congested", ctypes.c_uint64),
                ("error_checks", ctypes.c_uint64),
                ("max_rel_error", ctypes.c_double),
                ("tensors_disabled", ctypes.c_uint32),
                ("wire_fallbacks", ctypes.c_uint32),
                ("p50_us", ctypes.c_double),
                ("p90_us", ctypes.c_double),
                ("p99_us", ctypes.c_double),
                ("fallback_rate", ctypes.c_double),
                ("nacks", ctypes.c_uint64),
                ("queries", ctypes.c_uint64)]


class cais_join(ctypes.Structure):
    _fields_ = [("manager", ctypes.c_char_p),
                ("key_file", ctypes.c_char_p),
                ("job", ctypes.c_char_p),
                ("tenant", ctypes.c_char_p),
                ("rank", ctypes.c_uint),
                ("world", ctypes.c_uint),
                ("data", sockaddr_in),
                ("slots", ctypes.c_uint32),
                ("elems", ctypes.c_uint16),
                ("priority", ctypes.c_int),
                ("timeout_ms", ctypes.c_uint32)]


STRUCTS = {"cais_config": cais_config, "cais_status": cais_status,
           "cais_metrics": cais_metrics, "cais_join": cais_join}

_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_PROTOS = {
    "cais_config_init": (None, [ctypes.POINTER(cais_config)]),
    "cais_comm_create": (ctypes.c_int, [ctypes.POINTER(cais_config), _PP]),
    "cais_comm_join": (ctypes.c_int, [ctypes.POINTER(cais_join), ctypes.POINTER(cais_config),
                                      _PP]),
    "cais_tensor_register": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_int, ctypes.c_int]),
    "cais_step_begin": (ctypes.c_int, [_P, ctypes.c_uint64]),
    "cais_comm_destroy": (ctypes.c_int, [_P]),
    "cais_tensor_set": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_double, ctypes.c_bool]),
    "cais_tensor_wire": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_int]),
    "cais_set_threshold": (ctypes.c_int, [_P, ctypes.c_size_t]),
    "cais_set_path": (ctypes.c_int, [_P, ctypes.c_int]),
    "cais_iallreduce": (ctypes.c_int, [_P, ctypes.c_uint32, _P, _P, ctypes.c_size_t,
                                       ctypes.c_int, ctypes.c_int, _PP]),
    "cais_test": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_int)]),
    "cais_test_status": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_int),
                                        ctypes.POINTER(cais_status)]),
    "cais_wait": (ctypes.c_int, [_P]),
    "cais_wait_status": (ctypes.c_int, [_P, ctypes.POINTER(cais_status)]),
    "cais_allreduce": (ctypes.c_int, [_P, ctypes.c_uint32, _P, _P, ctypes.c_size_t,
                                      ctypes.c_int, ctypes.c_int]),
    "cais_metrics_get": (ctypes.c_int, [_P, ctypes.POINTER(cais_metrics)]),
    "cais_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "cais_datatype_name": (ctypes.c_char_p, [ctypes.c_int]),
    "cais_redop_name": (ctypes.c_char_p, [ctypes.c_int]),
    "cais_path_name": (ctypes.c_char_p, [ctypes.c_int]),
    "cais_fallback_name": (ctypes.c_char_p, [ctypes.c_int]),
    "cais_datatype_size": (ctypes.c_size_t, [ctypes.c_int]),
}


class LibraryNotFound(ImportError):
    """libcais.so could not be loaded: none where CAIS_LIB, the build directories
    or the loader point, or the one found is not libcais."""


def _candidates():
    env = os.environ.get("CAIS_LIB")
    if env is not None and env != "":
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))  # python/cais -> the repository
    out = []
    for b in ("build", "build-py", "builddir"):
        out.append(os.path.join(root, b, "agent", "libcais.so"))
    found = ctypes.util.find_library("cais")
    out += ["libcais.so.0", "libcais.so"] + ([found] if found else [])
    return out, False


def _load():
    paths, explicit = _candidates()
    tried = []
    for p in paths:
        if os.sep in p and not os.path.exists(p):
            tried.append("%s (absent)" % p)
            continue
        try:
            lib = ctypes.CDLL(p)
        except OSError as e:
            tried.append("%s (%s)" % (p, e))
            continue
        missing = [n for n in _PROTOS if not hasattr(lib, n)]
        if missing:
            tried.append("%s (not libcais: no %s)" % (p, ", ".join(missing[:3])))
            continue
        for name, (res, args) in _PROTOS.items():
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = args
        lib._cais_path = p
        return lib
    how = ("CAIS_LIB=%s" % os.environ.get("CAIS_LIB")) if explicit else \
        "CAIS_LIB unset, the repository's build directories, the loader's path"
    raise LibraryNotFound("cais: cannot load libcais.so (%s); tried: %s. Build it "
                          "(meson setup build && ninja -C build) or set CAIS_LIB to "
                          "its path." % (how, "; ".join(tried)))


_lib = None


def lib():
    """The loaded library (loaded on first use, once)."""
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


def strerror(rc):
    return lib().cais_strerror(rc).decode(errors="replace")


def errno_name(rc):
    return _errno.errorcode.get(abs(rc), "E%d" % abs(rc))
