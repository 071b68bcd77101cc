#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The environment: every variable parsed as documented, every bad value a ConfigError
that names the variable, read once."""
import os
import unittest

import harness

from cais import config  # noqa: E402
from cais.config import ConfigError  # noqa: E402


class Parse(unittest.TestCase):
    def test_defaults_ring(self):
        c = config.from_env({})
        self.assertEqual(c.mode, "ring")
        self.assertEqual((c.tenant, c.session, c.slots, c.port), (1, 1, 128, 0))
        self.assertEqual((c.tensor_sum, c.tensor_max, c.tensor_min), (1, 2, 3))
        self.assertIsNone(c.threshold)  # libcais's default (512K)
        self.assertEqual(c.path, "auto")
        self.assertEqual(c.tensor_key, "site")

    def test_static(self):
        c = config.from_env({"CAIS_SWITCH": "198.18.1.254", "CAIS_THRESHOLD": "256K",
                             "CAIS_WIRE": "block16", "CAIS_SLOTS": "64", "CAIS_ELEMS": "1024",
                             "CAIS_PEERS": "10.0.0.1:47000,10.0.0.2", "CAIS_SCALE": "4096",
                             "CAIS_FIRST_SEQ": "0x100", "CAIS_PATH": "switch"})
        self.assertEqual(c.mode, "static")
        self.assertEqual(c.switch, ("198.18.1.254", 51733))
        self.assertEqual(c.port, 47000)
        self.assertEqual(c.threshold, 256 << 10)
        self.assertEqual(c.wire, "block16")
        self.assertEqual((c.slots, c.elems, c.scale, c.first_seq), (64, 1024, 4096.0, 256))
        self.assertEqual(c.peers, [("10.0.0.1", 47000), ("10.0.0.2", 47000)])

    def test_managed_wins(self):
        c = config.from_env({"CAIS_MANAGER": "198.19.1.254", "CAIS_SWITCH": "198.18.1.254",
                             "CAIS_JOB": "j1"})
        self.assertEqual(c.mode, "managed")
        self.assertEqual(c.manager, ("198.19.1.254", 51735))
        self.assertEqual((c.slots, c.port, c.job), (0, 0, "j1"))

    def test_nccl_socket_ifname(self):
        c = config.from_env({"NCCL_SOCKET_IFNAME": "lo"})
        self.assertEqual((c.ifname, c.ifname_var), ("lo", "NCCL_SOCKET_IFNAME"))
        self.assertEqual(config.data_ip(c), "127.0.0.1")
        c = config.from_env({"CAIS_IFNAME": "=lo", "NCCL_SOCKET_IFNAME": "eth"})
        self.assertEqual(c.ifname, "=lo")
        self.assertEqual(config.data_ip(c), "127.0.0.1")

    def test_sizes(self):
        for text, n in (("0", 0), ("4096", 4096), ("1k", 1024), ("2M", 2 << 20), ("1G", 1 << 30)):
            self.assertEqual(config.parse_bytes(text, "X"), n)

    def test_bad_values_name_the_variable(self):
        bad = {
            "CAIS_SWITCH": ["1.2.3", "host", "1.2.3.4:0", "1.2.3.4:70000", "1.2.3.4:x"],
            "CAIS_MANAGER": ["nope"],
            "CAIS_PEERS": ["10.0.0.1:1,bad"],
            "CAIS_THRESHOLD": ["12Q", "-1", "1.5M"],
            "CAIS_SLOTS": ["3", "x", "65536"],
            "CAIS_ELEMS": ["2049", "-1"],
            "CAIS_WIRE": ["fp8"],
            "CAIS_PATH": ["fast"],
            "CAIS_THREADS": ["3", "32"],
            "CAIS_SCALE": ["0", "-2", "inf", "nan", "x"],
            "CAIS_PORT": ["65536"],
            "CAIS_TIMEOUT_MS": ["0"],
            "CAIS_RETRIES": ["1001"],
            "CAIS_JOB": ["x" * 65],
            "CAIS_MANAGER_KEY": ["/nonexistent/key"],
            "CAIS_TENSOR_KEY": ["stack"],
            "CAIS_RANK": ["255"],
        }
        for var, values in bad.items():
            for v in values:
                with self.assertRaises(ConfigError, msg="%s=%s" % (var, v)) as cm:
                    config.from_env({var: v})
                self.assertIn(var, str(cm.exception))

    def test_combinations(self):
        with self.assertRaisesRegex(ConfigError, "CAIS_PATH=switch needs"):
            config.from_env({"CAIS_PATH": "switch"})
        with self.assertRaisesRegex(ConfigError, "CAIS_SLOTS=0"):
            config.from_env({"CAIS_SLOTS": "0"})
        with self.assertRaisesRegex(ConfigError, "CAIS_PEERS has 2 entries, CAIS_NRANKS is 3"):
            config.from_env({"CAIS_PEERS": "1.1.1.1,1.1.1.2", "CAIS_NRANKS": "3"})

    def test_bad_interface(self):
        c = config.from_env({"CAIS_IFNAME": "=nosuchif0"})
        with self.assertRaisesRegex(ConfigError, "CAIS_IFNAME='=nosuchif0': no interface"):
            config.data_ip(c)

    def test_read_once(self):
        os.environ["CAIS_THRESHOLD"] = "1K"
        try:
            a = config.reload()
            os.environ["CAIS_THRESHOLD"] = "2K"
            self.assertIs(config.get(), a)
            self.assertEqual(config.get().threshold, 1024)
            self.assertEqual(config.reload().threshold, 2048)
        finally:
            del os.environ["CAIS_THRESHOLD"]
            config.reload()

    def test_communicator_needs_peers_rank(self):
        import cais
        with self.assertRaisesRegex(ConfigError, "rank and world size unknown"):
            cais.Communicator(config=config.from_env({}))
        with self.assertRaisesRegex(ConfigError, "CAIS_PEERS"):
            cais.Communicator(0, 2, config=config.from_env({}))
        with self.assertRaisesRegex(ConfigError, "3 peers for a world of 2"):
            cais.Communicator(0, 2, peers=["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"],
                              config=config.from_env({}))
        with self.assertRaisesRegex(ConfigError, "CAIS_JOB"):
            cais.Communicator(0, 2, config=config.from_env({"CAIS_MANAGER": "127.0.0.1:1"}))
        with self.assertRaisesRegex(ConfigError, "rank 2 of world 2"):
            cais.Communicator(2, 2, peers=["127.0.0.1:1", "127.0.0.1:2"],
                              config=config.from_env({}))


if __name__ == "__main__":
    harness.require("numpy", "torch")
    unittest.main(verbosity=2)
