#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/ring_loss.sh: the agent's ring all-reduce (TCP through cais-switch,
# forwarded), or its in-network one, under loss, and its slowest
# collectives (bench/README.md "Lanes"). One testbed of N hosts, cais-switch
# with L data lcores dropping P% of what it receives (--rx-loss), each host
# dropping P% of its IP input (nftables) with rto_min T on its route;
# cais-allreduce-perf of bf16 1, 2 and 4 MiB, K timed iterations each, every
# one after a 1-element ring line-up: --way ring (--path ring), or fixed32
# or block16 (in-network on that wire: --path auto --threshold 0, the
# fallbacks counted). Prints rank 0's medians, each rank's p50/p90/p99 over
# all its collectives (line-ups included) and its slowest timed one, its
# TCP counters: SYN (and SYN-ACK) retransmissions, timeouts, retransmitted
# segments, and in-network its retransmitted chunks and the collectives
# that stayed in-network.
#
#   bench/ring_loss.sh [--ranks N] [--lcores L] [--loss P] [--iters K] [--way W] [--build DIR]
#                      [--route-rto-min T]
#                            (default 8, 2, 5, 8, ring, build/, 5ms; needs root)
# --route-rto-min: the hosts' routes' rto_min (ip route ... rto_min T), or
#   "kernel" to leave them at Linux's 200 ms, which libcais then lowers per
#   socket where the kernel has TCP_RTO_MIN_US (CAIS_TCP_RTO_MIN_US=0 in the
#   environment: it does not)
set -euo pipefail
# shellcheck disable=SC2034 # scripts/lib/cli.sh's messages name it
PROG=ring_loss.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"
# shellcheck source=../scripts/lib/cli.sh
. "$ROOT/scripts/lib/cli.sh"
N=8 LCORES=2 LOSS=5 ITERS=8 WAY=ring BUILD="$ROOT/build" RTO=5ms

while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) cli_help 4 24 && exit 0 ;;
	--ranks) N=${2:-} && shift ;;
	--lcores) LCORES=${2:-} && shift ;;
	--loss) LOSS=${2:-} && shift ;;
	--iters) ITERS=${2:-} && shift ;;
	--way) WAY=${2:-} && shift ;;
	--build) BUILD=${2:-} && shift ;;
	--route-rto-min) RTO=${2:-} && shift ;;
	*) cli_unknown "$1" ;;
	esac
	shift
done
[[ "$N" =~ ^[0-9]{1,2}$ ]] && [ "$N" -ge 2 ] && [ "$N" -le 16 ] || die "--ranks '$N': 2..16"
[[ "$LCORES" =~ ^[0-9]{1,2}$ ]] && [ "$LCORES" -ge 1 ] || die "--lcores '$LCORES': 1 or more"
[ "$LCORES" -le "$(nproc)" ] || die "--lcores $LCORES: this machine has $(nproc) CPUs"
[[ "$LOSS" =~ ^[0-9]{1,2}$ ]] && [ "$LOSS" -le 25 ] || die "--loss '$LOSS': a percentage, 0..25"
[[ "$ITERS" =~ ^[0-9]{1,3}$ ]] && [ "$ITERS" -ge 1 ] || die "--iters '$ITERS': 1..999"
[[ "$RTO" =~ ^[0-9]{1,4}ms$ || "$RTO" == kernel ]] || die "--route-rto-min '$RTO': like 5ms, or kernel"
case $WAY in
ring) WAY_ARGS=(--path ring) ;;
fixed32) WAY_ARGS=(--path auto --threshold 0 --wire fixed32 --tensor 1 --scale 1024) ;;
block16) WAY_ARGS=(--path auto --threshold 0 --wire block16 --tensor 2) ;;
*) die "--way '$WAY': ring, fixed32 or block16" ;;
esac
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
[ "$LOSS" -eq 0 ] || command -v nft >/dev/null || die "--loss needs nft (nftables)"
SWITCH="$BUILD/dataplane/cais-switch" PERF="$BUILD/agent/cais-allreduce-perf"
[ -x "$SWITCH" ] && [ -x "$PERF" ] || die "no cais-switch or cais-allreduce-perf in $BUILD (meson compile -C $BUILD)"

NAME="rl$((RANDOM % 9000 + 1000))"
WORK=$(mktemp -d /tmp/cais-ring-loss.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -z "${CB_SW_PID:-}" ] || cb_switch_stop 5 >/dev/null 2>&1 || true
	bash "$ROOT/scripts/testbed.sh" down --name "$NAME" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
say() { echo "[ring_loss $(date +%T)] $*"; }

say "$N hosts, cais-switch with $LCORES lcore(s), $LOSS% loss both ways, $ITERS iterations of 1, 2, 4 MiB (bf16, ${WAY_ARGS[*]}); routes' rto_min $RTO, CAIS_TCP_RTO_MIN_US ${CAIS_TCP_RTO_MIN_US-unset}"
bash "$ROOT/scripts/testbed.sh" up --name "$NAME" --hosts "$N" --mtu 9000 >"$WORK/testbed.log" 2>&1 ||
	{ cat "$WORK/testbed.log" >&2; die "testbed up"; }
eval "$(bash "$ROOT/scripts/testbed.sh" env --name "$NAME")"
cb_host_loss "$N" "$LOSS" "$RTO" || die "the hosts' loss rules"
cb_members "$N" 47000
SW_LOSS=()
[ "$LOSS" -eq 0 ] || SW_LOSS=(--rx-loss "$LOSS")
# the in-network ways' session (bench/e2e.sh's): tensor 1 FIXED32, tensor 2 BLOCK16
cb_bench_session "$WORK/config.json" "$N" 64 2048 1024
CB_SW_LCORES=$LCORES cb_switch_start "$SWITCH" "$NAME" "$WORK/switch.log" "$N" --stats-period 0 \
	--config "$WORK/config.json" "${SW_LOSS[@]}" || die "cais-switch did not start"
for ((i = 1; i <= N; i++)); do
	timeout -k 5 300 ip netns exec "$(eval "echo \$TB_NS_$i")" "$PERF" --rank $((i - 1)) \
		--world "$N" --switch "$TB_AGG_IP" --peers "$CB_PEERS" --slots 64 --elems 2048 \
		--dtype bf16 --op sum --min-bytes 1M --max-bytes 4M --iters "$ITERS" --warmup 1 --sync \
		--check "${WAY_ARGS[@]}" >"$WORK/h$i.log" 2>&1 &
	PIDS+=($!)
done
ok=1
for ((i = 1; i <= N; i++)); do
	wait "${PIDS[$((i - 1))]}" || { ok=0 && echo "---- host $i failed:" >&2 && grep -v '^#' "$WORK/h$i.log" | tail -n 5 >&2; }
done
PIDS=()
say "rank 0's medians and slowest of its timed iterations:"
grep -v '^#' "$WORK/h1.log" | awk 'NF > 11 { printf "    %9d bytes  %10.1f ms  (slowest %.1f ms)\n", $1, $6 / 1000, $12 / 1000 }'
say "each rank's collectives, line-ups included (p50 / p90 / p99 ms), its slowest timed one (ms) and TCP (SYN retransmissions, timeouts, retransmitted segments):"
for ((i = 1; i <= N; i++)); do
	ns=$(eval "echo \$TB_NS_$i")
	pct=$(grep -o 'p50 [0-9]* us p90 [0-9]* us p99 [0-9]* us' "$WORK/h$i.log" |
		awk '{ printf "%.0f / %.0f / %.0f", $2 / 1000, $5 / 1000, $8 / 1000 }')
	tcp=$(ip netns exec "$ns" nstat -a 2>/dev/null | awk '
		$1 == "TcpExtTCPSynRetrans" { s = $2 } $1 == "TcpExtTCPTimeouts" { t = $2 }
		$1 == "TcpRetransSegs" { r = $2 } END { printf "%d, %d, %d", s, t, r }')
	net=
	[ "$WAY" = ring ] || net=$(awk '$1 == "#" && $2 == "summary" {
		for (f = 3; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
		printf "; in-network %s of %s collectives, %s chunks retransmitted", v["in_network"], v["collectives"], v["retx"] }' "$WORK/h$i.log")
	slow=$(grep -v '^#' "$WORK/h$i.log" | awk 'NF > 11 && $12 > m { m = $12 } END { printf "%.0f", m / 1000 }')
	echo "    rank $((i - 1)): ${pct:-?}; $slow; TCP $tcp$net"
done
[ $ok -eq 1 ] || die "a rank failed"
