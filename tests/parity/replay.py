#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Replay CAIS parity vectors through a switch and compare every output byte.

Runs where the switch's ports can be reached as network interfaces (the
runner puts their peers in a namespace and starts this there):

    replay.py --vectors FILE --ifaces IF0,IF1,... [--wait S] [--quiet S] [-v]

Interface k is switch port k. First, every station of the file sends one
learning frame (broadcast, ethertype 0x88b5) from its port, and whatever
comes out is ignored. Then each input frame is sent on its port; the frames
that come out of every port until all expected ones arrived (plus a short
grace time), or until --quiet seconds passed when none is expected, are
compared with the expected ones: the same multiset of (port, bytes).
Frames this side sent itself, and frames from the interfaces' own MACs
(the kernel's), are not switch output and are ignored.

Python standard library only (socket.AF_PACKET). Exit status 0 when every
input matched, 1 otherwise, 2 on a usage or format error.
"""
import argparse
import collections
import select
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
AUXDATA = struct.Struct("=IIIHHHH")  # struct tpacket_auxdata
LEARN_TYPE = b"\x88\xb5"


class Case:
    def __init__(self, name):
        self.name = name
        self.what = ""
        self.steps = []  # (port, frame, [(port, frame), ...])


def parse(path):
    """-> (header dict, [Case])"""
    head = {"stations": []}
    cases = []
    cur = None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("#"):
                if cur is not None and not cur.what:
                    cur.what = line[1:].strip()
                continue
            tok = line.split()
            try:
                if tok[0] == "agg":
                    head["agg_mac"], head["agg_ip"] = tok[1], tok[2]
                elif tok[0] == "ports":
                    head["ports"] = int(tok[1])
                elif tok[0] == "config":
                    head["config"] = tok[1]
                elif tok[0] == "station":
                    head["stations"].append((int(tok[1]), bytes.fromhex(tok[2].replace(":", ""))))
                elif tok[0] == "case":
                    cur = Case(tok[1])
                    cases.append(cur)
                elif tok[0] == "in":
                    if cur is None:
                        cur = Case("-")
                        cases.append(cur)
                    cur.steps.append((int(tok[1]), bytes.fromhex(tok[2]), []))
                elif tok[0] == "out":
                    cur.steps[-1][2].append((int(tok[1]), bytes.fromhex(tok[2])))
                else:
                    raise ValueError("unknown item '%s'" % tok[0])
            except (IndexError, ValueError, AttributeError) as e:
                sys.exit("replay: %s:%d: %s" % (path, n, e))
    return head, cases


class Ports:
    def __init__(self, ifaces):
        self.socks = []
        self.own = set()
        for name in ifaces:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
            # the kernel strips VLAN tags before packet sockets see a frame; get them back
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            s.bind((name, 0))
            s.setblocking(False)
            self.socks.append(s)
            with open("/sys/class/net/%s/address" % name) as f:
                self.own.add(bytes.fromhex(f.read().strip().replace(":", "")))

    def send(self, port, frame):
        self.socks[port].send(frame)

    def poll(self, timeout):
        """Frames that arrived within timeout: [(port, bytes)]."""
        got = []
        r, _, _ = select.select(self.socks, [], [], max(timeout, 0))
        for s in r:
            port = self.socks.index(s)
            while True:
                try:
                    data, anc, _, addr = s.recvmsg(65536, socket.CMSG_SPACE(AUXDATA.size))
                except BlockingIOError:
                    break
                data = self.retag(data, anc)
                if addr[2] == PACKET_OUTGOING or data[6:12] in self.own:
                    continue
                got.append((port, data))
        return got

    @staticmethod
    def retag(data, anc):
        """Put back a VLAN tag the kernel moved into the auxiliary data."""
        for level, kind, aux in anc:
            if level != SOL_PACKET or kind != PACKET_AUXDATA or len(aux) < AUXDATA.size:
                continue
            status, _, _, _, _, tci, tpid = AUXDATA.unpack_from(aux)
            if status & TP_STATUS_VLAN_VALID:
                if not status & TP_STATUS_VLAN_TPID_VALID:
                    tpid = 0x8100
                return data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
        return data

    def drain(self, quiet):
        while self.poll(quiet):
            pass


def show(frames):
    return "".join("\n      port %d: %s" % (p, f.hex()) for p, f in sorted(frames))


def diff_at(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vectors", required=True, help="a vector file (tests/parity/vectors/*.txt)")
    ap.add_argument("--ifaces", required=True, help="interfaces of switch ports 0,1,..., comma-separated")
    ap.add_argument("--wait", type=float, default=2.0, help="longest wait for expected outputs (s)")
    ap.add_argument("--quiet", type=float, default=0.15, help="wait when no output is expected (s)")
    ap.add_argument("--grace", type=float, default=0.03, help="wait for extra outputs (s)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()

    head, cases = parse(a.vectors)
    ifaces = a.ifaces.split(",")
    if head.get("ports", 0) > len(ifaces):
        sys.exit("replay: %s needs %d ports, %d interfaces given" % (a.vectors, head["ports"], len(ifaces)))
    ports = Ports(ifaces)

    # learning: one frame from every station, outputs ignored
    ports.drain(0.05)
    for port, mac in head["stations"]:
        ports.send(port, b"\xff" * 6 + mac + LEARN_TYPE + bytes(46))
    time.sleep(max(a.quiet, 0.2))
    ports.drain(0.1)

    n_in = n_out = bad = 0
    for c in cases:
        ok = True
        for port, frame, want in c.steps:
            n_in += 1
            n_out += len(want)
            ports.drain(0)
            ports.send(port, frame)
            got = []
            need = collections.Counter(want)
            deadline = time.monotonic() + (a.wait if want else a.quiet)
            while time.monotonic() < deadline:
                got += ports.poll(deadline - time.monotonic())
                if want and not (need - collections.Counter(got)):
                    got += ports.poll(a.grace)
                    break
            if collections.Counter(got) == need:
                continue
            ok = False
            bad += 1
            missing = list((need - collections.Counter(got)).elements())
            extra = list((collections.Counter(got) - need).elements())
            print("FAIL %s: input #%d on port %d: %s" % (c.name, n_in, port, frame.hex()))
            if missing:
                print("    missing:%s" % show(missing))
            if extra:
                print("    unexpected:%s" % show(extra))
            for p, f in extra:
                for q, g in missing:
                    if p == q:
                        print("    port %d: first difference at byte %d (len %d, want %d)"
                              % (p, diff_at(f, g), len(f), len(g)))
                        break
        if a.verbose or not ok:
            print("%s %-24s %s" % ("ok  " if ok else "FAIL", c.name, c.what))
    print("replay: %s: %d inputs, %d expected outputs, %d mismatches"
          % (a.vectors.rsplit("/", 1)[-1], n_in, n_out, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
