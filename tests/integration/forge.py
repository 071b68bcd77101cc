#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""forge.py: an attacker on the hosts' Ethernet, for tests/integration/security_testbed.sh.

Writes whole Ethernet frames with any source MAC and IPv4 address through an
AF_PACKET socket (root, Linux), so it can say what a host's own stack would
never say: DATA in another member's name, RESULTs from the aggregator's
address, ARP that claims the aggregator's address (docs/PROTOCOL.md E5).
Python's standard library only.

  forge.py data   --iface IF --src-mac M --src-ip A --src-port P --dst-mac M --dst-ip A
                  --tenant T --session S --tensor X --rank R --slots S --elems E
                  --seq Q --count N [--repeat K] [--gap-ms MS] [--value V]
  forge.py result --iface IF --src-mac M --src-ip A --dst-mac M --dst-ip A --dst-port P
                  --tenant T --session S --tensor X --slots S --elems E --seq Q --count N
                  [--repeat K] [--gap-ms MS] [--value V]
  forge.py garp   --iface IF --src-mac M --ip A [--repeat K] [--gap-ms MS]

data: DATA for seqs Q..Q+N-1 (slot fields from S), E int32 elements of value V
(FIXED32); result: RESULTs of those seqs from the aggregator's UDP port;
garp: a gratuitous ARP request and an ARP reply, both broadcast, saying that
A is at M. Every frame is sent K times (default 1), GAP ms between rounds.
Prints how many frames it sent. Exit status 0, or 2 on bad usage.
"""
import argparse
import socket
import struct
import sys
import time

CAIS_MAGIC = 0xCA15
CAIS_PORT = 51733
T_DATA, T_RESULT = 1, 2


def mac(text):
    parts = text.split(":")
    if len(parts) != 6:
        raise argparse.ArgumentTypeError(f"'{text}' is not a MAC")
    return bytes(int(p, 16) for p in parts)


def ip4(text):
    return socket.inet_aton(text)


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frame(dst_mac, src_mac, src_ip, dst_ip, sport, dport, payload):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                      src_ip, dst_ip)
    iph = iph[:10] + struct.pack("!H", csum(iph)) + iph[12:]
    return dst_mac + src_mac + b"\x08\x00" + iph + udp


def cais(typ, a, seq, rank):
    index = seq & (a.slots - 1)
    slot = index | (0x8000 if (seq // a.slots) & 1 else 0)
    hdr = struct.pack("!HBBHHIIHBBHH", CAIS_MAGIC, 0x10 | typ, 0, a.tenant, a.session,
                      a.tensor, seq & 0xFFFFFFFF, slot, rank, 0, a.elems, 0)
    return hdr + struct.pack("!i", a.value) * a.elems


def arp_frames(a):
    bcast = b"\xff" * 6
    out = []
    for op in (1, 2):  # a gratuitous request, then a reply
        arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, a.src_mac, ip4(a.ip),
                          bcast if op == 2 else b"\0" * 6, ip4(a.ip))
        out.append(bcast + a.src_mac + b"\x08\x06" + arp + b"\0" * 18)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("what", choices=["data", "result", "garp"])
    p.add_argument("--iface", required=True)
    p.add_argument("--src-mac", type=mac, required=True)
    p.add_argument("--src-ip")
    p.add_argument("--src-port", type=int, default=CAIS_PORT)
    p.add_argument("--dst-mac", type=mac)
    p.add_argument("--dst-ip")
    p.add_argument("--dst-port", type=int, default=CAIS_PORT)
    p.add_argument("--ip", help="garp: the address claimed")
    for f in ("tenant", "session", "tensor", "rank", "slots", "elems", "seq", "count"):
        p.add_argument("--" + f, type=int, default=0)
    p.add_argument("--value", type=int, default=77777)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--gap-ms", type=float, default=0.0)
    a = p.parse_args()

    if a.what == "garp":
        if not a.ip:
            p.error("garp needs --ip")
        frames = arp_frames(a)
    else:
        if not (a.src_ip and a.dst_ip and a.dst_mac and a.slots > 0 and a.elems > 0):
            p.error(f"{a.what} needs --src-ip, --dst-ip, --dst-mac, --slots and --elems")
        typ, rank = (T_DATA, a.rank) if a.what == "data" else (T_RESULT, 0xFF)
        frames = [udp_frame(a.dst_mac, a.src_mac, ip4(a.src_ip), ip4(a.dst_ip), a.src_port,
                            a.dst_port, cais(typ, a, a.seq + i, rank)) for i in range(a.count)]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((a.iface, 0))
    sent = 0
    for k in range(a.repeat):
        for f in frames:
            try:
                s.send(f)
                sent += 1
            except OSError:  # a full queue: the next round tries again
                pass
        if a.gap_ms and k + 1 < a.repeat:
            time.sleep(a.gap_ms / 1000)
    print(f"forge.py {a.what}: {sent} frames sent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
