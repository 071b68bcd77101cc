#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# End to end through the P4 program: real agents (cais-allreduce-perf
# --check, one per host, --path switch) on the namespace testbed
# (scripts/testbed.sh), first through cais-switch, then through BMv2's
# simple_switch running dataplane/p4/cais.p4, with the same configuration
# (scripts/cais-p4-config turns it into simple_switch_CLI commands), the
# same agents and the same options: the P4 profile's 64 elements per
# packet, 3 ranks, a pool of 8 slots and a 500 ms retransmission timer
# (simple_switch's pace; --slots up to the profile's 128, --retx-us).
#
#   bmv2_e2e.sh [--switch PATH] [--perf PATH] [--testbed PATH] [--p4 FILE]
#               [--only cais-switch|bmv2] [--slots S] [--retx-us US]
#               [--quick] [--keep-logs]
#
#   ops     FIXED32 (f32 data) sum, max, min at 4 B, 4 KiB, 64 KiB, 1 MiB:
#           every element checked, every collective in-network
#   loss    5% loss both ways on every host (nftables in the namespaces;
#           this kernel has no netem): sum, max and min at 64 KiB, still
#           --path switch, every element right
#   block16 bf16 sent as BLOCK16 (--wire block16) to the FIXED32 tensor 1:
#           REJECT BAD_DTYPE on both switches, after which every rank goes
#           on in FIXED32 in-network and counts one wire fallback
#   b16tensor the same to tensor 4, registered "wire": "block16": cais-switch
#           aggregates it as BLOCK16 (no fallback); the P4 profile has no
#           BLOCK16 (cais-p4-config installs the tensor as FIXED32), so
#           simple_switch answers BAD_DTYPE and every rank goes on in FIXED32
#           in-network, one wire fallback each (PROTOCOL.md E4)
# Then a table of rank 0's median time per collective on both switches (and
# the ratio). --quick: fewer sizes and iterations (ops at 4 KiB and 64 KiB).
# --only: run the cases on one of the two switches (cais-switch alone needs
# no P4 tools; the table then has one column).
#
# (or the environment: CAIS_SWITCH, CAIS_PERF, CAIS_TESTBED). The P4 tools
# are looked for in $CAIS_P4_PREFIX/bin (default /opt/p4/bin), then on the
# PATH (scripts/lib/bmv2.sh). Exits 77 (meson's skip) without root, the P4
# tools, cais-switch or cais-allreduce-perf, saying which. Always cleans up:
# hosts, switches, the testbed (with its nftables tables), DPDK's runtime
# directory.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"
# shellcheck source=../../scripts/lib/bmv2.sh
. "$ROOT/scripts/lib/bmv2.sh"
SWITCH=${CAIS_SWITCH:-$ROOT/build/dataplane/cais-switch}
PERF=${CAIS_PERF:-$ROOT/build/agent/cais-allreduce-perf}
TESTBED=${CAIS_TESTBED:-$ROOT/scripts/testbed.sh}
P4SRC=$ROOT/dataplane/p4/cais.p4
CONVERTER=$ROOT/scripts/cais-p4-config
QUICK=0
KEEP_LOGS=0
ONLY=""
S=8         # the session's pool: chunks in flight per rank (the P4 profile allows 128)
RETX_US=500000 # the agents' retransmission timer

while [ $# -gt 0 ]; do
	case "$1" in
	--switch) SWITCH=$2; shift 2 ;;
	--perf) PERF=$2; shift 2 ;;
	--testbed) TESTBED=$2; shift 2 ;;
	--p4) P4SRC=$2; shift 2 ;;
	--quick) QUICK=1; shift ;;
	--slots) S=${2:-}; shift 2 ;;
	--retx-us) RETX_US=${2:-}; shift 2 ;;
	--only)
		ONLY=${2:-}
		case $ONLY in cais-switch | bmv2) ;; *) echo "$PROG: --only takes cais-switch or bmv2" >&2; exit 2 ;; esac
		shift 2
		;;
	--keep-logs) KEEP_LOGS=1; shift ;;
	-h | --help)
		sed -n '4,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "$PROG: unknown argument '$1' (see --help)" >&2
		exit 2
		;;
	esac
done

case $S in 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128) ;; *) echo "$PROG: --slots must be a power of two, 1..128 (the P4 profile)" >&2; exit 2 ;; esac
case $RETX_US in '' | *[!0-9]*) echo "$PROG: --retx-us takes microseconds" >&2; exit 2 ;; esac

cb_need_root_and "network namespaces, veth, raw sockets" ip ethtool nft timeout awk python3 ss
if [ "$ONLY" != cais-switch ]; then
	bm_find || cb_skip "$BM_WHY"
fi
[ -x "$SWITCH" ] || cb_skip "no cais-switch at $SWITCH (is libdpdk installed? give --switch)"
[ -x "$PERF" ] || cb_skip "no cais-allreduce-perf at $PERF (give --perf)"
[ -f "$TESTBED" ] || cb_skip "no testbed script at $TESTBED"
ip netns list >/dev/null 2>&1 || cb_skip "network namespaces do not work here"

# ---- constants ----
NAME="p4e$(($$ % 1000))"
PREFIX="cais-p4e-$$"
HOSTS=3
MTU=1500
E=64  # the P4 profile's elements per packet
PORT=47000
HOST_TIMEOUT=900 # one run of one host (s)
# Both switches see the same agents with the same options. The window and the
# retransmission timer are simple_switch's: it runs cais.p4 at a few hundred
# DATA a second here (about 3 ms of CPU each on this 2-core machine), so
# every chunk in flight waits for the DATA queued before it: with the P4
# profile's 128 slots (384 DATA queued for 3 ranks) or a timer of
# milliseconds the hosts retransmit what is only queued, which adds to the
# queue, and a 64 KiB collective takes tens of seconds instead of two.
# 8 slots and 500 ms keep the queue under the timer (--slots, --retx-us).
AGENT_OPTS=(--elems "$E" --slots "$S" --scale 1024 --path switch --check --check-every 0
	--retries 40 --retx-us "$RETX_US" --timeout-ms 300000)
if [ "$QUICK" -eq 1 ]; then
	OP_SIZES=4K,64K ITERS=2 LOSS_SUM=64K LOSS_OTHER=4K
else
	OP_SIZES=4,4K,64K,1M ITERS=2 LOSS_SUM=64K LOSS_OTHER=64K
fi
SEQ=1000
T0=$(date +%s.%N)

WORK=$(mktemp -d /tmp/cais-p4e.XXXXXX)
CB_SW_PID=""
BM_PID=""
HOST_PIDS=()
FAILED=0
FAILURES=()

now() { date +%s.%N; }
elapsed() { awk -v t0="$T0" -v t1="$(now)" 'BEGIN { printf "%6.1f", t1 - t0 }'; }
say() { echo "[$(elapsed) s] $*"; }
step() {
	echo
	say "=== $*"
}
case_fail() {
	FAILED=1
	FAILURES+=("$*")
	say "FAIL: $*"
}
fatal() {
	FAILED=1
	say "FATAL: $*"
	exit 1
}

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	for p in "${HOST_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${HOST_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	cb_switch_stop 5
	bm_stop
	bash "$TESTBED" down --name "$NAME" >/dev/null 2>&1 || true
	rm -rf "/var/run/dpdk/$PREFIX" 2>/dev/null || true
	if [ "$rc" -eq 0 ] && [ "$FAILED" -eq 0 ] && [ "$KEEP_LOGS" -eq 0 ]; then
		rm -rf "$WORK"
	else
		echo "$PROG: logs kept in $WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'echo "$PROG: interrupted"; exit 130' INT
trap 'echo "$PROG: terminated"; exit 143' TERM

ns() { eval "echo \$TB_NS_$1"; }
hip() { eval "echo \$TB_IP_$1"; }
hmac() { eval "echo \$TB_MAC_$1"; }
swif() { eval "echo \$TB_SWIF_$1"; }
field() { grep -m1 '^# summary ' "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"; }

peers() {
	local i out=""
	for ((i = 1; i <= HOSTS; i++)); do
		out+="${out:+,}$(hip "$i"):$PORT"
	done
	echo "$out"
}

write_config() { # file
	local i members="" sep=""
	for ((i = 1; i <= HOSTS; i++)); do
		members+="$sep{\"rank\": $((i - 1)), \"mac\": \"$(hmac "$i")\", \"ip\": \"$(hip "$i")\", \"port\": $PORT}"
		sep=", "
	done
	cat >"$1" <<EOF
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $HOSTS, "slots": $S,
    "elems_per_packet": $E, "priority": 0, "members": [$members]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": 1024, "wire": "fixed32"}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 2, "op": "max", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 3, "op": "min", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 4, "op": "sum", "scale": 1024, "wire": "block16"}}
]
EOF
}

# Run cais-allreduce-perf on every host at once: run_all LABEL ARGS...; sets
# RUN_OK (every host exited 0 with result=PASS) and RUN_S; continues SEQ.
run_all() {
	local label=$1 i rc bad=0 max_seq=0 s pids=()
	shift
	RUN_T0=$(now)
	for ((i = 1; i <= HOSTS; i++)); do
		timeout -k 5 "$HOST_TIMEOUT" ip netns exec "$(ns "$i")" "$PERF" --rank $((i - 1)) \
			--world "$HOSTS" --switch "$TB_AGG_IP" --peers "$(peers)" --tenant 1 --session 1 \
			--first-seq "$SEQ" "${AGENT_OPTS[@]}" "$@" >"$WORK/$label.h$i.log" 2>&1 &
		pids+=($!)
		HOST_PIDS+=($!)
	done
	for ((i = 1; i <= HOSTS; i++)); do
		wait "${pids[$((i - 1))]}"
		rc=$?
		if [ $rc -ne 0 ] || [ "$(field "$WORK/$label.h$i.log" result)" != PASS ]; then
			bad=1
			echo "---- h$i exited $rc: $WORK/$label.h$i.log"
			[ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "     (killed after $HOST_TIMEOUT s)"
			grep -v '^#' "$WORK/$label.h$i.log" | tail -n 8
		fi
		s=$(field "$WORK/$label.h$i.log" next_seq)
		[ -n "$s" ] && [ "$s" -gt "$max_seq" ] && max_seq=$s
	done
	HOST_PIDS=()
	RUN_S=$(awk -v a="$RUN_T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
	if [ $bad -eq 1 ] || [ "$max_seq" -eq 0 ]; then
		SEQ=$(((max_seq > SEQ ? max_seq : SEQ) + 100000))
	else
		SEQ=$max_seq
	fi
	RUN_OK=$((1 - bad))
}

# Every host's per-size lines show path switch, and its summary ring=0.
all_in_network() { # label
	local i
	for ((i = 1; i <= HOSTS; i++)); do
		[ "$(field "$WORK/$1.h$i.log" ring)" = 0 ] || return 1
		awk '/^ +[0-9]/ && $5 != "switch" { bad = 1 } END { exit bad }' "$WORK/$1.h$i.log" || return 1
	done
}

# rank 0's per-size lines: "bytes time_us" (time: the 6th column)
times_of() { [ ! -f "$WORK/$1.h1.log" ] || awk '/^ +[0-9]/ { print $1, $6 }' "$WORK/$1.h1.log"; }

nft_loss() { # on|off
	local i
	for ((i = 1; i <= HOSTS; i++)); do
		if [ "$1" = on ]; then
			ip netns exec "$(ns "$i")" nft -f - <<'EOF' || fatal "nft: the loss rules on h$i"
table inet cais_loss {
	chain out { type filter hook output priority 0; numgen random mod 100 < 5 counter drop; }
	chain in { type filter hook input priority 0; numgen random mod 100 < 5 counter drop; }
}
EOF
		else
			ip netns exec "$(ns "$i")" nft delete table inet cais_loss || fatal "nft: removing the loss rules on h$i"
		fi
	done
}

# The cases, on the switch now running (tag: sw or bm).
suite() { # tag
	local tag=$1 op t label n i
	for op in sum max min; do
		case $op in sum) t=1 ;; max) t=2 ;; min) t=3 ;; esac
		label="$tag-ops-$op"
		run_all "$label" --dtype f32 --op "$op" --tensor "$t" --bytes "$OP_SIZES" \
			--iters "$ITERS" --warmup 1
		if [ "$RUN_OK" -eq 1 ] && all_in_network "$label"; then
			say "$label: f32 $op, $OP_SIZES: every element right, in-network (${RUN_S} s;" \
				"retx $(field "$WORK/$label.h1.log" retx) on rank 0)"
		else
			case_fail "$label: a host failed or a collective left the switch"
		fi
	done

	nft_loss on
	for op in sum max min; do
		case $op in sum) t=1 ;; max) t=2 ;; min) t=3 ;; esac
		label="$tag-loss-$op"
		run_all "$label" --dtype f32 --op "$op" --tensor "$t" \
			--bytes "$([ $op = sum ] && echo "$LOSS_SUM" || echo "$LOSS_OTHER")" --iters 2 --warmup 0
		if [ "$RUN_OK" -eq 1 ] && all_in_network "$label"; then
			say "$label: 5% loss both ways, f32 $op: every element right, in-network (${RUN_S} s;" \
				"retx $(field "$WORK/$label.h1.log" retx) on rank 0)"
		else
			case_fail "$label: under 5% loss a host failed or a collective left the switch"
		fi
	done
	say "$tag: dropped by the loss rules on h1: $(ip netns exec "$(ns 1)" nft list table inet cais_loss |
		grep -o 'packets [0-9]*' | awk '{ s += $2 } END { print s + 0 }') packets"
	nft_loss off

	# BLOCK16 DATA to the FIXED32 tensor 1: BAD_DTYPE on both switches
	b16_case "$tag-block16" 1 1 "BLOCK16 to the FIXED32 tensor: BAD_DTYPE, then FIXED32 in-network"
	# the BLOCK16 tensor 4: cais-switch aggregates BLOCK16; the P4 profile has
	# none (cais-p4-config installed it as FIXED32): BAD_DTYPE, then FIXED32
	if [ "$tag" = sw ]; then
		b16_case "$tag-b16tensor" 4 0 "BLOCK16 to the BLOCK16 tensor: aggregated as BLOCK16 in-network"
	else
		b16_case "$tag-b16tensor" 4 1 "BLOCK16 to the BLOCK16 tensor: BAD_DTYPE (no BLOCK16 in the P4 profile), then FIXED32 in-network"
	fi
}

# bf16 sent as BLOCK16: b16_case LABEL TENSOR FALLBACKS TEXT: every rank in-network,
# every element right, and FALLBACKS (0 or 1) wire fallbacks counted by each rank.
b16_case() {
	local label=$1 t=$2 want=$3 text=$4 n=0 i
	run_all "$label" --dtype bf16 --op sum --tensor "$t" --wire block16 --bytes 64K --iters 2 --warmup 0
	for ((i = 1; i <= HOSTS; i++)); do
		grep -q "wire fallbacks $want," "$WORK/$label.h$i.log" && n=$((n + 1))
	done
	if [ "$RUN_OK" -eq 1 ] && all_in_network "$label" && [ $n -eq $HOSTS ]; then
		say "$label: $text; $n of $HOSTS ranks counted $want wire fallback(s)"
	else
		case_fail "$label: bf16 as BLOCK16 to tensor $t: a host failed, left the switch, or did" \
			"not count $want wire fallback(s) ($n of $HOSTS did)"
	fi
}

# ====================================================================
if [ "$ONLY" != cais-switch ]; then
	step "p4c: $P4SRC"
	bm_compile "$P4SRC" "$WORK/p4" "$WORK/p4c.log" || fatal "p4c"
	P4JSON=$WORK/p4/$(basename "${P4SRC%.p4}").json
	say "$("$BM_P4C" --version | head -n1); simple_switch $("$BM_SS" --version | head -n1)"
fi

step "testbed: $HOSTS hosts, MTU $MTU (name $NAME)"
up_ok=0
for attempt in 0 1 2 3 4; do
	net=$((($$ + attempt * 47) % 250 + 1))
	if bash "$TESTBED" up --name "$NAME" --hosts "$HOSTS" --mtu "$MTU" --net "$net" >"$WORK/testbed.log" 2>&1; then
		up_ok=1
		break
	fi
	grep -q "already used" "$WORK/testbed.log" || break
done
[ $up_ok -eq 1 ] || {
	cat "$WORK/testbed.log"
	fatal "testbed up failed"
}
eval "$(bash "$TESTBED" env --name "$NAME")"
AGG_MAC=$(printf '02:ca:15:%02x:00:fe' "$TB_NET")
write_config "$WORK/config.json"
L2=()
SWIFS=()
for ((i = 1; i <= HOSTS; i++)); do
	L2+=(--l2 "$(hmac "$i")=$((i - 1))")
	SWIFS+=("$(swif "$i")")
done
python3 "$CONVERTER" --agg-ip "$TB_AGG_IP" --agg-mac "$AGG_MAC" --ports "$HOSTS" "${L2[@]}" \
	"$WORK/config.json" >"$WORK/commands.txt" || fatal "cais-p4-config refused the configuration"
say "session 1/1: n $HOSTS, S $S, E $E; tensors 1 sum, 2 max, 3 min, 4 sum (block16); aggregator $TB_AGG_IP at $AGG_MAC"

if [ "$ONLY" != bmv2 ]; then
	step "cais-switch"
	cb_switch_start "$SWITCH" "$PREFIX" "$WORK/cais-switch.log" "$HOSTS" --agg-mac "$AGG_MAC" \
		--config "$WORK/config.json" --stats-period 0 || fatal "cais-switch did not start"
	suite sw
	cb_switch_stop 10
	say "cais-switch stopped (status $CB_SW_RC)"
fi

if [ "$ONLY" != cais-switch ]; then
	step "simple_switch (BMv2) running cais.p4"
	SEQ=1000 # a fresh switch: its slots are empty
	bm_start "$P4JSON" "$WORK" "$WORK/simple_switch.log" "${SWIFS[@]}" || fatal "simple_switch did not start"
	bm_cli "$WORK/commands.txt" "$WORK/cli.log" || fatal "simple_switch_CLI did not take the tables"
	say "simple_switch running (pid $BM_PID, thrift port $BM_THRIFT)"
	suite bm
	bm_stop
	say "simple_switch stopped"
fi

# ====================================================================
step "time per collective, rank 0's median (us): cais-switch vs simple_switch, same agents"
printf '%-14s %10s %14s %14s %8s\n' case bytes cais-switch simple_switch ratio
for c in ops-sum ops-max ops-min loss-sum loss-max loss-min block16 b16tensor; do
	join -a1 -a2 -e - -o 0,1.2,2.2 <(times_of "sw-$c" | sort -k1,1) <(times_of "bm-$c" | sort -k1,1) 2>/dev/null |
		sort -n | while read -r b t1 t2; do
			awk -v c="$c" -v b="$b" -v t1="$t1" -v t2="$t2" 'BEGIN {
				printf "%-14s %10d %14s %14s %8s\n", c, b, t1, t2,
					(t1 != "-" && t2 != "-" && t1 > 0) ? sprintf("%.1f", t2 / t1) : "-" }'
		done
done

echo
if [ "$FAILED" -ne 0 ]; then
	say "FAIL: ${#FAILURES[@]} case(s):"
	printf '  %s\n' "${FAILURES[@]}"
	exit 1
fi
case $ONLY in
cais-switch) say "PASS: the agents through cais-switch (simple_switch not run: --only)" ;;
bmv2) say "PASS: the agents through simple_switch running cais.p4 (cais-switch not run: --only)" ;;
*) say "PASS: the same agents through cais-switch and through simple_switch running cais.p4" ;;
esac
exit 0
