#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The ctypes bindings: every struct's layout equals the C compiler's (cais-py-layout,
built by meson from <cais/cais.h>), the library is found and refused as documented,
the enums and names agree with libcais's own."""
import ctypes
import ctypes.util
import os
import subprocess
import sys
import unittest

import harness  # noqa: F401  (the package on the path)

from cais import _lib  # noqa: E402


def run_py(code, env):
    e = dict(os.environ)
    e.update(env)
    e["PYTHONPATH"] = os.path.join(harness.REPO, "python")
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                          timeout=60)


class Layout(unittest.TestCase):
    def test_structs_match_c(self):
        exe = os.environ.get("CAIS_PY_LAYOUT")
        self.assertTrue(exe and os.path.exists(exe),
                        "CAIS_PY_LAYOUT must name cais-py-layout (meson sets it)")
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        checked = 0
        for line in out.splitlines():
            name, value = line.rsplit(" ", 1)
            value = int(value)
            if name == "CAIS_FB_COUNT":
                self.assertEqual(_lib.FB_COUNT, value)
                continue
            if name == "CAIS_DEFAULT_THRESHOLD":
                self.assertEqual(_lib.DEFAULT_THRESHOLD, value)
                continue
            struct, member = name.split(".")
            cls = _lib.STRUCTS[struct]
            if member == "sizeof":
                self.assertEqual(ctypes.sizeof(cls), value, "sizeof(struct %s)" % struct)
            else:
                self.assertEqual(getattr(cls, member).offset, value,
                                 "offsetof(struct %s, %s)" % (struct, member))
            checked += 1
        # every member of every mirrored struct was compared
        self.assertEqual(checked, sum(len(c._fields_) + 1 for c in _lib.STRUCTS.values()))


class Names(unittest.TestCase):
    def test_enum_names(self):
        L = _lib.lib()
        for k, v in _lib.DTYPE_NAMES.items():
            self.assertEqual(L.cais_datatype_name(k).decode(), v)
            self.assertEqual(L.cais_datatype_size(k), _lib.DTYPE_SIZES[k])
        for k, v in _lib.OP_NAMES.items():
            self.assertEqual(L.cais_redop_name(k).decode(), v)
        for k, v in _lib.PATH_NAMES.items():
            self.assertEqual(L.cais_path_name(k).decode(), v)
        self.assertEqual(L.cais_fallback_name(0).decode(), "in-network")
        self.assertEqual(L.cais_fallback_name(4).decode(), "ring path requested")
        self.assertEqual(L.cais_datatype_size(17), 0)

    def test_config_defaults(self):
        c = _lib.cais_config()
        _lib.lib().cais_config_init(ctypes.byref(c))
        self.assertEqual(c.threshold, 512 << 10)
        self.assertEqual(c.retries, 8)
        self.assertEqual(c.timeout_ms, 30000)
        self.assertEqual(c.scale, 1024.0)
        self.assertEqual(c.wire, _lib.WIRE_FIXED32)
        self.assertEqual(c.b16_scale, float(1 << 24))

    def test_bad_create_is_einval(self):
        c = _lib.cais_config()
        L = _lib.lib()
        L.cais_config_init(ctypes.byref(c))
        c.world, c.rank = 2, 5  # rank >= world
        comm = ctypes.c_void_p()
        self.assertEqual(L.cais_comm_create(ctypes.byref(c), ctypes.byref(comm)), -22)
        self.assertIn("nvalid", _lib.strerror(-22))


class Loading(unittest.TestCase):
    def test_cais_lib_found(self):
        r = run_py("import cais; print(cais.library_path())", {})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), os.environ["CAIS_LIB"])

    def test_missing_library_is_a_clear_import_error(self):
        r = run_py("import cais\ntry:\n    cais.library_path()\nexcept cais.LibraryNotFound as e:"
                   "\n    print('LNF', e)\n", {"CAIS_LIB": "/nonexistent/libcais.so"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("LNF cais: cannot load libcais.so (CAIS_LIB=/nonexistent/libcais.so)",
                      r.stdout)
        self.assertIn("absent", r.stdout)

    def test_not_libcais_is_refused(self):
        libc = ctypes.util.find_library("c")
        r = run_py("import cais\ntry:\n    cais.library_path()\nexcept ImportError as e:"
                   "\n    print('IE', e)\n", {"CAIS_LIB": libc})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("not libcais", r.stdout)

    def test_torch_backend_without_library_fails_clearly(self):
        # the error comes out of init_process_group, on the rank itself, not a crash
        r = run_py("import tempfile, torch.distributed as dist, cais.torch\n"
                   "try:\n    dist.init_process_group('cais', init_method='file://' + "
                   "tempfile.mktemp(), rank=0, world_size=1)\n"
                   "except ImportError as e:\n    print('IE', e)\n",
                   {"CAIS_LIB": "/nonexistent/libcais.so", "CAIS_JOIN_TIMEOUT_MS": "5000"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("IE cais: cannot load libcais.so", r.stdout)


if __name__ == "__main__":
    harness.require("numpy", "torch")
    unittest.main(verbosity=2)
