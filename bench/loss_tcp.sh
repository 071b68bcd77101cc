#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/loss_tcp.sh: what a drop in a host's own nftables output hook does to
# TCP, against the same share dropped on the way in (bench/README.md, "Loss
# on the wire"). Two network namespaces on a veth pair, rto_min 5 ms on the
# route, a 4-byte ping-pong over two one-way TCP connections (as the agent's
# ring and line-ups use them), N exchanges per way of dropping:
#   output+input  P% in each host's output hook and P% in its input hook
#   input         2P% in each host's input hook only (the same loss per
#                 exchange, all of it on the way in)
# Prints the median, p90, p99 and largest exchange time and how many took
# over 100 ms. Linux sends a segment its own output hook dropped again only
# when the zero-window probe timer fires, after max(RTO, 200 ms).
#
#   bench/loss_tcp.sh [--loss P] [--count N]    (default 5, 1500; needs root)
set -euo pipefail
PROG=loss_tcp.sh
# shellcheck source=../scripts/lib/cli.sh
. "$(dirname "$0")/../scripts/lib/cli.sh"
LOSS=5 COUNT=1500

while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) cli_help 4 16 && exit 0 ;;
	--loss) LOSS=${2:-} && shift ;;
	--count) COUNT=${2:-} && shift ;;
	*) cli_unknown "$1" ;;
	esac
	shift
done
[[ "$LOSS" =~ ^[0-9]{1,2}$ ]] && [ "$LOSS" -le 25 ] || die "--loss '$LOSS': a percentage, 0..25"
[[ "$COUNT" =~ ^[0-9]{1,5}$ ]] && [ "$COUNT" -ge 10 ] || die "--count '$COUNT': 10..99999"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
command -v nft >/dev/null || die "needs nft (nftables)"

TAG=lt$$
A=$TAG-a B=$TAG-b
cleanup() {
	ip netns del "$A" 2>/dev/null || true
	ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT

# the ping-pong: a server and a client, each listening on 7000 and connecting
# to the other's 7000, one-way connections; the client prints the times
PINGPONG='
import socket, sys, time
role, me, other, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((me, 7000))
ls.listen(1)
ls.settimeout(30)
def out():
    s = socket.create_connection((other, 7000), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s
if role == "server":
    i, _ = ls.accept(); o = out()
else:
    time.sleep(0.3); o = out(); i, _ = ls.accept()
i.settimeout(30)
def rx(s):
    b = b""
    while len(b) < 4:
        c = s.recv(4 - len(b))
        if not c:
            sys.exit("peer closed")
        b += c
t = []
for k in range(n):
    t0 = time.perf_counter()
    if role == "client":
        o.sendall(b"ping"); rx(i)
    else:
        rx(i); o.sendall(b"pong")
    t.append((time.perf_counter() - t0) * 1e3)
if role == "client":
    t.sort()
    print("median %.3f ms, p90 %.2f, p99 %.2f, max %.1f; over 100 ms: %d of %d"
          % (t[n // 2], t[n * 9 // 10], t[n * 99 // 100], t[-1], sum(x > 100 for x in t), n))
'

# one way of dropping: its nft rules (in both hosts), then the ping-pong
run() { # label out_pct in_pct
	local ns rules
	cleanup
	ip netns add "$A" && ip netns add "$B" || die "ip netns add"
	ip link add "$TAG"a type veth peer name "$TAG"b || die "ip link add"
	ip link set "$TAG"a netns "$A" && ip link set "$TAG"b netns "$B" || die "ip link set netns"
	ip -n "$A" addr add 10.213.0.1/24 dev "$TAG"a && ip -n "$B" addr add 10.213.0.2/24 dev "$TAG"b ||
		die "ip addr add"
	for ns in "$A" "$B"; do
		ip -n "$ns" link set lo up
		ip -n "$ns" link set "$TAG${ns: -1}" up
		ip -n "$ns" route change 10.213.0.0/24 dev "$TAG${ns: -1}" rto_min 5ms ||
			die "rto_min on $ns"
		rules="chain in { type filter hook input priority 0; numgen random mod 100 < $3 drop; }"
		[ "$2" -eq 0 ] ||
			rules+=$'\n'"chain out { type filter hook output priority 0; numgen random mod 100 < $2 drop; }"
		printf 'table inet %s {\n%s\n}\n' "$TAG" "$rules" | ip netns exec "$ns" nft -f - ||
			die "nft in $ns"
	done
	ip netns exec "$B" timeout 600 /usr/bin/python3 -c "$PINGPONG" server 10.213.0.2 10.213.0.1 "$COUNT" &
	local server=$!
	printf '  %-14s ' "$1"
	ip netns exec "$A" timeout 600 /usr/bin/python3 -c "$PINGPONG" client 10.213.0.1 10.213.0.2 "$COUNT" ||
		die "$1: the ping-pong failed"
	wait "$server" || die "$1: the ping-pong's server failed"
}

echo "$PROG: $COUNT TCP ping-pongs between two namespaces, rto_min 5 ms, per way of dropping:"
run "output+input" "$LOSS" "$LOSS"
run "input" 0 $((2 * LOSS))
