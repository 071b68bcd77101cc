# SPDX-License-Identifier: BSD-3-Clause
"""The package's configuration: environment variables in NCCL's manner, read once.

The names are the NCCL plugin's where they mean the same (docs/NCCL.md);
README.md ("PyTorch") has the table. get() reads the environment the first
time it is called and returns the same Config afterwards; from_env() parses
any mapping (the tests use it). Every bad value raises ConfigError naming the
variable, before anything is created.
"""
import fcntl
import os
import socket
import struct

from . import _lib

__all__ = ["ConfigError", "Config", "from_env", "get", "reload", "parse_addr", "parse_bytes",
           "interface_ipv4", "data_ip"]


class ConfigError(ValueError):
    """A configuration (environment variable or argument) that cannot work."""


def parse_addr(text, default_port, what):
    """'A.B.C.D[:PORT]' -> (ip, port)."""
    if not isinstance(text, str) or not text:
        raise ConfigError("%s: empty address (want A.B.C.D[:PORT])" % what)
    host, sep, port = text.partition(":")
    try:
        packed = socket.inet_aton(host)
        if host.count(".") != 3:
            raise OSError
    except OSError:
        raise ConfigError("%s='%s': not an IPv4 address A.B.C.D[:PORT]" % (what, text)) from None
    if sep:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError("%s='%s': the port is not 1..65535" % (what, text))
        p = int(port)
    else:
        if default_port is None:
            raise ConfigError("%s='%s': needs a port (A.B.C.D:PORT)" % (what, text))
        p = default_port
    return socket.inet_ntoa(packed), p


def parse_bytes(text, what):
    """'512K', '1M', '4096' -> bytes (K, M, G: powers of 1024)."""
    s = str(text).strip()
    mult = 1
    if s and s[-1] in "kKmMgG":
        mult = 1 << {"k": 10, "m": 20, "g": 30}[s[-1].lower()]
        s = s[:-1]
    if not s.isdigit():
        raise ConfigError("%s='%s': not a size in bytes (digits, optional K, M, G)" % (what, text))
    return int(s) * mult


def _int(env, name, default, lo, hi):
    v = env.get(name)
    if v is None or v == "":
        return default
    try:
        n = int(v, 0)
    except ValueError:
        raise ConfigError("%s='%s': not an integer" % (name, v)) from None
    if not lo <= n <= hi:
        raise ConfigError("%s=%d: not in %d..%d" % (name, n, lo, hi))
    return n


def _float(env, name, default):
    v = env.get(name)
    if v is None or v == "":
        return default
    try:
        f = float(v)
    except ValueError:
        raise ConfigError("%s='%s': not a number" % (name, v)) from None
    if not f > 0 or f != f or f == float("inf"):
        raise ConfigError("%s='%s': must be a positive finite number" % (name, v))
    return f


def _str(env, name, default=None):
    v = env.get(name)
    return default if v is None or v == "" else v


_SIOCGIFADDR = 0x8915


def interface_ipv4(ifname):
    """The IPv4 address of interface ifname, or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        req = struct.pack("256s", ifname.encode()[:15])
        res = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, req)
        return socket.inet_ntoa(res[20:24])
    except OSError:
        return None
    finally:
        s.close()


def _if_matches(name, spec):
    """NCCL_SOCKET_IFNAME syntax: prefixes, '=' exact, '^' excluding; comma-separated."""
    exclude = spec.startswith("^")
    if exclude:
        spec = spec[1:]
    exact = spec.startswith("=")
    if exact:
        spec = spec[1:]
    hit = any((name == t) if exact else name.startswith(t) for t in spec.split(",") if t)
    return not hit if exclude else hit


def _route_source(ip):
    """The local address the kernel would send to ip from, or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((ip, 9))
        return s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()


def data_ip(cfg, toward=None):
    """This host's data address: the interface of CAIS_IFNAME (else
    NCCL_SOCKET_IFNAME), else the source of the route toward the switch, the
    manager or `toward` (e.g. MASTER_ADDR), else the first up non-loopback
    IPv4 interface, else 127.0.0.1."""
    spec = cfg.ifname
    if spec:
        for _, name in socket.if_nameindex():
            if _if_matches(name, spec):
                ip = interface_ipv4(name)
                if ip:
                    return ip
        raise ConfigError("%s='%s': no interface with an IPv4 address matches (have: %s)" %
                          (cfg.ifname_var, spec,
                           ", ".join(n for _, n in socket.if_nameindex())))
    for target in (cfg.switch and cfg.switch[0], cfg.manager and cfg.manager[0], toward):
        if target:
            try:
                target = socket.gethostbyname(target)
            except OSError:
                continue
            ip = _route_source(target)
            if ip:
                return ip
    for _, name in socket.if_nameindex():
        if name != "lo":
            ip = interface_ipv4(name)
            if ip and not ip.startswith("127."):
                return ip
    return "127.0.0.1"


class Config:
    """Everything a communicator is made from, parsed and checked."""

    FIELDS = ("manager", "manager_key", "tenant_name", "job", "switch", "peers", "ifname",
              "ifname_var", "port", "tenant", "session", "tensor_sum", "tensor_max",
              "tensor_min", "slots", "elems", "scale", "b16_scale", "wire", "threshold", "path",
              "threads", "first_seq", "timeout_ms", "retries", "retx_us", "check_every",
              "join_timeout_ms", "linger_ms", "tensor_key", "rank", "nranks", "debug")

    def __init__(self, **kw):
        for f in self.FIELDS:
            setattr(self, f, kw.pop(f, None))
        if kw:
            raise TypeError("Config: unknown fields %s" % ", ".join(sorted(kw)))

    @property
    def mode(self):
        """'managed' (CAIS_MANAGER), 'static' (CAIS_SWITCH) or 'ring' (neither)."""
        if self.manager:
            return "managed"
        if self.switch:
            return "static"
        return "ring"

    def replace(self, **kw):
        d = {f: getattr(self, f) for f in self.FIELDS}
        d.update(kw)
        return Config(**d)

    def __repr__(self):
        return "Config(%s)" % ", ".join("%s=%r" % (f, getattr(self, f)) for f in self.FIELDS
                                        if getattr(self, f) is not None)


def from_env(env=None):
    """Parse the CAIS_* variables of env (default os.environ) into a Config."""
    env = os.environ if env is None else env
    c = {}
    m = _str(env, "CAIS_MANAGER")
    c["manager"] = parse_addr(m, _lib.MGR_PORT, "CAIS_MANAGER") if m else None
    key = _str(env, "CAIS_MANAGER_KEY")
    if key is not None and not os.path.isfile(key):
        raise ConfigError("CAIS_MANAGER_KEY='%s': no such file" % key)
    c["manager_key"] = key
    c["tenant_name"] = _str(env, "CAIS_TENANT_NAME", "torch")
    c["job"] = _str(env, "CAIS_JOB")
    for name in ("tenant_name", "job"):
        v = c[name]
        if v is not None and not 1 <= len(v) <= 64:
            raise ConfigError("CAIS_%s='%s': 1..64 characters" % (name.upper(), v))
    s = _str(env, "CAIS_SWITCH")
    c["switch"] = parse_addr(s, _lib.UDP_PORT, "CAIS_SWITCH") if s else None
    p = _str(env, "CAIS_PEERS")
    c["peers"] = None
    if p:
        c["peers"] = [parse_addr(x.strip(), 47000, "CAIS_PEERS") for x in p.split(",")]
    c["ifname"] = _str(env, "CAIS_IFNAME")
    c["ifname_var"] = "CAIS_IFNAME"
    if c["ifname"] is None and _str(env, "NCCL_SOCKET_IFNAME"):
        c["ifname"], c["ifname_var"] = env["NCCL_SOCKET_IFNAME"], "NCCL_SOCKET_IFNAME"
    # static: the switch's session lists this port; managed and ring: a free one
    c["port"] = _int(env, "CAIS_PORT", 47000 if c["switch"] and not c["manager"] else 0,
                     0, 65535)
    c["tenant"] = _int(env, "CAIS_TENANT", 1, 0, 65535)
    c["session"] = _int(env, "CAIS_SESSION", 1, 0, 65535)
    c["tensor_sum"] = _int(env, "CAIS_TENSOR_SUM", 1, 0, 2**32 - 1)
    c["tensor_max"] = _int(env, "CAIS_TENSOR_MAX", 2, 0, 2**32 - 1)
    c["tensor_min"] = _int(env, "CAIS_TENSOR_MIN", 3, 0, 2**32 - 1)
    # static: must equal the switch's session; managed: 0 asks the manager's default
    c["slots"] = _int(env, "CAIS_SLOTS", 0 if c["manager"] else 128, 0, 32768)
    if c["slots"] and c["slots"] & (c["slots"] - 1):
        raise ConfigError("CAIS_SLOTS=%d: not a power of two" % c["slots"])
    if not c["manager"] and c["slots"] == 0:
        raise ConfigError("CAIS_SLOTS=0: only with CAIS_MANAGER (the manager's default)")
    c["elems"] = _int(env, "CAIS_ELEMS", 0, 0, _lib.MAX_ELEMS)
    c["scale"] = _float(env, "CAIS_SCALE", None)
    c["b16_scale"] = _float(env, "CAIS_B16_SCALE", None)
    w = _str(env, "CAIS_WIRE")
    if w is not None and w not in ("fixed32", "block16"):
        raise ConfigError("CAIS_WIRE='%s': fixed32 or block16" % w)
    c["wire"] = w
    t = _str(env, "CAIS_THRESHOLD")
    c["threshold"] = parse_bytes(t, "CAIS_THRESHOLD") if t is not None else None
    path = _str(env, "CAIS_PATH", "auto")
    if path not in ("auto", "switch", "ring"):
        raise ConfigError("CAIS_PATH='%s': auto, switch or ring" % path)
    if path == "switch" and not (c["switch"] or c["manager"]):
        raise ConfigError("CAIS_PATH=switch needs CAIS_SWITCH or CAIS_MANAGER")
    c["path"] = path
    c["threads"] = _int(env, "CAIS_THREADS", 1, 0, 16)
    if c["threads"] & (c["threads"] - 1):
        raise ConfigError("CAIS_THREADS=%d: a power of two 1..16 (0: one per CPU, "
                          "managed only)" % c["threads"])
    if c["threads"] == 0 and not c["manager"]:
        raise ConfigError("CAIS_THREADS=0: only with CAIS_MANAGER")
    fs = _str(env, "CAIS_FIRST_SEQ")
    c["first_seq"] = _int(env, "CAIS_FIRST_SEQ", 0, 0, 2**32 - 1) if fs is not None else None
    c["timeout_ms"] = _int(env, "CAIS_TIMEOUT_MS", None, 1, 3600000)
    c["retries"] = _int(env, "CAIS_RETRIES", None, 0, 1000)
    c["retx_us"] = _int(env, "CAIS_RETX_US", None, 1, 10000000)
    c["check_every"] = _int(env, "CAIS_CHECK_EVERY", None, 0, 2**32 - 1)
    c["join_timeout_ms"] = _int(env, "CAIS_JOIN_TIMEOUT_MS", 60000, 1, 3600000)
    c["linger_ms"] = _int(env, "CAIS_LINGER_MS", 200, 0, 60000)
    c["tensor_key"] = _str(env, "CAIS_TENSOR_KEY", "site")
    if c["tensor_key"] not in ("site", "shape"):
        raise ConfigError("CAIS_TENSOR_KEY='%s': site or shape" % c["tensor_key"])
    c["rank"] = _int(env, "CAIS_RANK", None, 0, _lib.MAX_WORLD - 1)
    c["nranks"] = _int(env, "CAIS_NRANKS", None, 1, _lib.MAX_WORLD)
    c["debug"] = _str(env, "CAIS_DEBUG", "0") not in ("0", "", "no", "false")
    if c["peers"] is not None and c["nranks"] is not None and len(c["peers"]) != c["nranks"]:
        raise ConfigError("CAIS_PEERS has %d entries, CAIS_NRANKS is %d" %
                          (len(c["peers"]), c["nranks"]))
    return Config(**c)


_cached = None


def get():
    """The process's configuration: the environment as it was at the first call."""
    global _cached
    if _cached is None:
        _cached = from_env()
    return _cached


def reload():
    """Read the environment again (tests; a running communicator keeps its own)."""
    global _cached
    _cached = None
    return get()
