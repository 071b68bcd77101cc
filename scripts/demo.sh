#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# demo.sh: CAIS end to end on one machine, in two to three minutes.
#
#   dependencies (scripts/install-deps.sh) -> build (meson, ninja) ->
#   a namespace testbed of N hosts (scripts/testbed.sh) -> cais-switch on the
#   hosts' veth peers and cais-manager on the management network (it holds
#   the switch's lease, installs each job's session, gives per-tensor scales)
#   -> a tensor-parallel-like workload on every host with the host agent
#   (cais-allreduce-perf --manager): steps of activation all-reduces of every
#   size from 128 KiB to 64 MiB, fp32 and bf16, in-network and then on the
#   fallback ring, every element checked -> a table per size, with the scales
#   the manager gave -> the switch's final counters -> everything torn down
#   (also on Ctrl-C). --static: the switch configured from a file, no
#   manager, the static scale 1024.
set -euo pipefail

PROG=${0##*/}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"

HOSTS=4
MIN_BYTES=128K
MAX_BYTES=64M
STEPS=2
WARMUP=1
DTYPES="f32,bf16"
BUILD="$ROOT/build"
NAME="demo"
DEPS=1
STATIC=0
SLOTS=64
ELEMS=2048
SCALE=1024 # --static only; managed runs get theirs from cais-manager
PORT=47000
CTL_PORT=51734 # cais-switch's control endpoint, on the management bridge
MGR_PORT=51735 # cais-manager's, likewise
LEASE_MS=3000  # the switch's lease from the manager
TENSOR=1

usage() {
	cat <<EOF
Usage: $PROG [--hosts N] [--min-bytes B] [--max-bytes B] [--steps K] [--warmup W]
            [--dtypes LIST] [--build DIR] [--name NAME] [--static] [--no-deps] [--help]

CAIS end to end on one machine (needs root): installs what is missing
(scripts/install-deps.sh), builds into DIR (meson; an existing build is reused),
makes a testbed of N hosts (scripts/testbed.sh), starts cais-switch on the
hosts' data ports and cais-manager on the management network (keyed; it holds
the switch's lease), and runs the host agent (cais-allreduce-perf --manager,
libcais) on every host: a tensor-parallel-like workload, steps of activation
all-reduces (sum) of every size from B_min to B_max (doubling), one of each
size per step, as a model's layers would issue them. Each run is a job of
the manager: the ranks register it and their tensor, the manager installs its
session on the switch, and before every all-reduce each rank reports the max
|x| it saw and takes the manager's per-tensor fixed-point scale (the largest
power of two s with N x max|x| x s x 2 < 2^31). Each dtype runs twice:
in-network (the switch; the agent falls back to the ring where it must) and
on the fallback ring alone (--path ring), the same sizes, every element of
every result checked on every host. Prints progress, then a table per size:
in-network and ring time, speed-up, max relative error, fallback rate, the
scale used; then the switch's final counters. Tears everything down at the
end and on Ctrl-C.

  --hosts N        hosts (ranks), 2..16 (default $HOSTS)
  --min-bytes B    smallest all-reduce (default $MIN_BYTES; K, M: powers of 1024)
  --max-bytes B    largest all-reduce (default $MAX_BYTES)
  --steps K        timed steps per dtype and path (default $STEPS)
  --warmup W       untimed steps before them (default $WARMUP)
  --dtypes LIST    element types, from f32, bf16, f16 (default $DTYPES)
  --build DIR      build directory (default build/)
  --name NAME      testbed name, 1..6 characters [a-z0-9] (default $NAME)
  --static         no cais-manager: the switch's session and tensor from a
                   --config file, fixed ids, the static scale $SCALE
  --no-deps        skip scripts/install-deps.sh
  --help           this text

Times are the median over the timed steps of each all-reduce, issue to
completion, of the slowest host; the hosts line up before each all-reduce
(cais-allreduce-perf --sync), so the time is the all-reduce's own. On a
machine with few cores the switch busy-polls one core and the hosts share the
rest: the figures show the mechanism, not a NIC's line rate.
EOF
}

die() {
	echo "$PROG: $*" >&2
	exit 1
}

usage_error() {
	echo "$PROG: $*" >&2
	echo "Try '$PROG --help'." >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--hosts | --min-bytes | --max-bytes | --steps | --warmup | --dtypes | --build | --name)
		[ $# -ge 2 ] || usage_error "$1 needs a value"
		case "$1" in
		--hosts) HOSTS=$2 ;;
		--min-bytes) MIN_BYTES=$2 ;;
		--max-bytes) MAX_BYTES=$2 ;;
		--steps) STEPS=$2 ;;
		--warmup) WARMUP=$2 ;;
		--dtypes) DTYPES=$2 ;;
		--build) BUILD=$2 ;;
		--name) NAME=$2 ;;
		esac
		shift 2
		;;
	--static)
		STATIC=1
		shift
		;;
	--no-deps)
		DEPS=0
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) usage_error "unknown argument '$1'" ;;
	esac
done

[[ "$HOSTS" =~ ^[0-9]{1,2}$ ]] && [ "$HOSTS" -ge 2 ] && [ "$HOSTS" -le 16 ] ||
	usage_error "--hosts '$HOSTS': an integer in 2..16"
for b in "$MIN_BYTES" "$MAX_BYTES"; do
	[[ "$b" =~ ^[0-9]{1,9}[KkMm]?$ ]] || usage_error "'$b': a byte count like 131072, 128K or 64M"
done
MIN_B=$(cb_to_bytes "$MIN_BYTES")
MAX_B=$(cb_to_bytes "$MAX_BYTES")
[ "$MIN_B" -ge 4 ] && [ $((MIN_B % 4)) -eq 0 ] || usage_error "--min-bytes: a multiple of 4, at least 4"
[ "$MAX_B" -ge "$MIN_B" ] && [ "$MAX_B" -le $((256 << 20)) ] ||
	usage_error "--max-bytes: from --min-bytes to 256M"
[[ "$STEPS" =~ ^[0-9]{1,4}$ ]] && [ "$STEPS" -ge 1 ] || usage_error "--steps '$STEPS': a positive integer"
[[ "$WARMUP" =~ ^[0-9]{1,4}$ ]] || usage_error "--warmup '$WARMUP': a non-negative integer"
[[ "$DTYPES" =~ ^(f32|bf16|f16)(,(f32|bf16|f16))*$ ]] || usage_error "--dtypes '$DTYPES': a list from f32, bf16, f16"
IFS=, read -r -a DTYPE_LIST <<<"$DTYPES"
[[ "$NAME" =~ ^[a-z0-9]{1,6}$ ]] || usage_error "--name '$NAME': 1..6 characters [a-z0-9]"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth, af_packet); run: sudo $0"

SIZES=()
for ((b = MIN_B; b <= MAX_B; b *= 2)); do
	SIZES+=("$b")
done
# a managed run: one manager step per all-reduce (cais-allreduce-perf --manager),
# step = iteration x sizes + size index (--interleave); the manager keeps them all
RUN_STEPS=$(((WARMUP + STEPS) * ${#SIZES[@]}))
HISTORY=$((RUN_STEPS < 8 ? 8 : RUN_STEPS > 1000 ? 1000 : RUN_STEPS))

T0=$(date +%s.%N)
elapsed() { awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%5.1f", t1 - t0 }'; }
say() { echo "[demo $(elapsed) s] $*"; }

WORK=""
CB_SW_PID=""
MGR_PID=""
HOST_PIDS=()
PREFIX="cais-demo-$$"
TB_UP=0

stop_manager() {
	[ -n "$MGR_PID" ] || return 0
	kill -TERM "$MGR_PID" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$MGR_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$MGR_PID" 2>/dev/null || true
	wait "$MGR_PID" 2>/dev/null || true
	MGR_PID=""
}

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	set +e
	for p in "${HOST_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	stop_manager
	cb_switch_stop 5
	for p in "${HOST_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	if [ "$TB_UP" -eq 1 ]; then
		# also stops anything still running in the hosts
		bash "$ROOT/scripts/testbed.sh" down --name "$NAME" >/dev/null 2>&1
		say "testbed $NAME removed"
	fi
	rm -rf "/var/run/dpdk/$PREFIX" 2>/dev/null
	if [ -n "$WORK" ]; then
		if [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ] && [ "$rc" -ne 143 ]; then
			echo "$PROG: failed; logs kept in $WORK" >&2
		else
			rm -rf "$WORK"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'echo; say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

fail() {
	local f
	say "FAILED: $*"
	for f in switch manager; do
		if [ -n "$WORK" ] && [ -s "$WORK/$f.log" ]; then
			echo "---- $f log (last 30 lines)"
			tail -n 30 "$WORK/$f.log"
		fi
	done
	exit 1
}

# ---- 1. dependencies ----
if [ "$DEPS" -eq 1 ]; then
	say "1/5 dependencies: scripts/install-deps.sh"
	bash "$ROOT/scripts/install-deps.sh"
else
	say "1/5 dependencies: skipped (--no-deps)"
fi

# ---- 2. build ----
if [ -f "$BUILD/build.ninja" ]; then
	say "2/5 build: reusing $BUILD"
else
	say "2/5 build: meson setup $BUILD"
	meson setup "$BUILD" "$ROOT" >/dev/null || die "meson setup failed"
fi
meson compile -C "$BUILD" >"/tmp/cais-demo-build.$$.log" 2>&1 || {
	tail -n 30 "/tmp/cais-demo-build.$$.log"
	rm -f "/tmp/cais-demo-build.$$.log"
	die "build failed"
}
rm -f "/tmp/cais-demo-build.$$.log"
SWITCH="$BUILD/dataplane/cais-switch"
PERF="$BUILD/agent/cais-allreduce-perf"
MANAGER="$BUILD/control/manager/cais-manager"
CTL="$BUILD/control/cais-ctl"
[ -x "$SWITCH" ] || die "no $SWITCH: libdpdk was not found at configure time (scripts/install-deps.sh, then rm -rf $BUILD)"
[ -x "$PERF" ] || die "no $PERF: the build did not make the agent's tool"
if [ "$STATIC" -eq 0 ]; then
	[ -x "$MANAGER" ] && [ -x "$CTL" ] ||
		die "no $MANAGER or $CTL: the build did not make the control plane (or use --static)"
	say "    cais-switch, cais-manager, cais-ctl and cais-allreduce-perf built in $BUILD"
else
	say "    cais-switch and cais-allreduce-perf built in $BUILD"
fi

WORK=$(mktemp -d /tmp/cais-demo.XXXXXX)

# ---- 3. testbed ----
say "3/5 testbed: $HOSTS hosts (namespaces $NAME-h1..$NAME-h$HOSTS), MTU 9000"
TB_UP=1
bash "$ROOT/scripts/testbed.sh" up --name "$NAME" --hosts "$HOSTS" --mtu 9000 >"$WORK/testbed.log" 2>&1 || {
	cat "$WORK/testbed.log"
	fail "testbed up"
}
eval "$(bash "$ROOT/scripts/testbed.sh" env --name "$NAME")"
say "    data $TB_DATA_NET (aggregator $TB_AGG_IP), management $TB_MGMT_NET (bridge $TB_BRIDGE_IP)"

# ---- 4. the switch, and the manager that drives it ----
if [ "$STATIC" -eq 1 ]; then
	# one session of every host and its tensor, from a file, for the whole demo
	cb_members "$HOSTS" "$PORT"
	PEERS=$CB_PEERS
	cat >"$WORK/config.json" <<EOF
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $HOSTS, "slots": $SLOTS,
    "elems_per_packet": $ELEMS, "priority": 0, "loss_hints": 1, "members": [$CB_MEMBERS]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": $TENSOR, "op": "sum", "scale": $SCALE}}
]
EOF
	say "4/5 cais-switch: $HOSTS af_packet ports, aggregator $TB_AGG_IP, session 1/1 (n $HOSTS, S $SLOTS, E $ELEMS), tensor $TENSOR sum, static scale $SCALE"
	cb_switch_start "$SWITCH" "$PREFIX" "$WORK/switch.log" "$HOSTS" --config "$WORK/config.json" \
		--stats-period 0 || fail "cais-switch did not start"
	say "    running (pid $CB_SW_PID): $(grep -o 'applied .*' "$WORK/switch.log" | sed "s|$WORK/||")"
else
	head -c 32 /dev/urandom >"$WORK/switch.key"
	head -c 32 /dev/urandom >"$WORK/manager.key"
	SW_CTL="$TB_BRIDGE_IP:$CTL_PORT"
	MGR="$TB_BRIDGE_IP:$MGR_PORT"
	say "4/5 cais-switch: $HOSTS af_packet ports, aggregator $TB_AGG_IP, control endpoint $SW_CTL (keyed), no sessions"
	cb_switch_start "$SWITCH" "$PREFIX" "$WORK/switch.log" "$HOSTS" --ctl "$SW_CTL" \
		--ctl-key "$WORK/switch.key" --stats-period 0 || fail "cais-switch did not start"
	say "    running (pid $CB_SW_PID)"
	sctl() { "$CTL" -s "$SW_CTL" -k "$WORK/switch.key" -t 2000 "$@"; }
	mctl() { "$CTL" -m "$MGR" -k "$WORK/manager.key" -t 2000 "$@"; }
	# on a machine with few cores the switch's queue runs deep: with the default threshold
	# its RESULTs say CONGESTED and the manager's congestion policy takes the tensor off
	# the switch for some steps (a third of the 4M all-reduces here); the demo shows the
	# switch path, so the threshold goes up (as in tests/integration/control_testbed.sh)
	sctl thresholds.set queue_depth=1000000 >/dev/null || fail "cais-ctl thresholds.set"
	say "    its CONGESTED threshold raised (thresholds.set queue_depth=1000000): few cores here"
	"$MANAGER" --agg "$TB_AGG_IP" --listen "$MGR" --key "$WORK/manager.key" \
		--switch-ctl "$SW_CTL" --switch-key "$WORK/switch.key" --db "$WORK/manager.db" \
		--lease-ms "$LEASE_MS" --history "$HISTORY" >"$WORK/manager.log" 2>&1 &
	MGR_PID=$!
	up=0
	for _ in $(seq 1 100); do # 10 s: answering, and the switch holds its lease
		if mctl -j switch.status 2>/dev/null | grep -Eq '"renewals": *[1-9]'; then
			up=1
			break
		fi
		kill -0 "$MGR_PID" 2>/dev/null || fail "cais-manager exited during start"
		sleep 0.1
	done
	[ $up -eq 1 ] || fail "cais-manager did not answer, or the switch has no lease from it, within 10 s"
	left=$(sctl -j stats.get | tr -d ' \n' | grep -Eo '"lease_left_ms":[0-9]+' | cut -d: -f2 || true)
	say "    cais-manager on $MGR (keyed; pid $MGR_PID): holds the switch's lease (${left:-?} of" \
		"$LEASE_MS ms left); keeps the answers of $HISTORY steps per job (the demo reads the scales back)"
fi

# ---- 5. the workload ----
say "5/5 workload: $((WARMUP + STEPS)) steps ($WARMUP warm-up) of ${#SIZES[@]} all-reduces each," \
	"$(cb_human "$MIN_B")..$(cb_human "$MAX_B"), sum, $DTYPES, in-network then ring, every element checked"
SEQ=0
# run_hosts LABEL PATH DTYPE: every host at once, progress from host 1's step lines;
# managed: the run is the job demo-LABEL of the manager
run_hosts() {
	local label=$1 path=$2 dt=$3 i ok=1 last="" t_start line now_s
	local pids=() how
	t_start=$(date +%s)
	for ((i = 1; i <= HOSTS; i++)); do
		if [ "$STATIC" -eq 1 ]; then
			how=(--switch "$TB_AGG_IP" --peers "$PEERS" --tenant 1 --session 1 --scale "$SCALE"
				--first-seq "$SEQ")
		else
			how=(--manager "$MGR" --manager-key "$WORK/manager.key" --job "demo-$label"
				--tenant-name demo --data "$(eval "echo \$TB_IP_$i"):$PORT")
		fi
		timeout -k 5 900 ip netns exec "$(eval "echo \$TB_NS_$i")" "$PERF" --rank $((i - 1)) \
			--world "$HOSTS" "${how[@]}" --tensor $TENSOR --slots $SLOTS --elems $ELEMS \
			--dtype "$dt" --op sum --min-bytes "$MIN_B" --max-bytes "$MAX_B" --iters "$STEPS" \
			--warmup "$WARMUP" --interleave --sync --check --check-every 0 --path "$path" \
			--threshold 0 >"$WORK/$label.h$i.log" 2>&1 &
		pids+=($!)
		HOST_PIDS+=($!)
	done
	while :; do
		local running=0
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null && running=$((running + 1))
		done
		line=$(grep '^# step ' "$WORK/$label.h1.log" 2>/dev/null | tail -n 1 || true)
		now_s=$(($(date +%s) - t_start))
		if [ -n "$line" ] && [ "$line" != "$last" ]; then
			say "      $label: ${line#\# }"
			last=$line
		elif [ $running -gt 0 ] && [ $((now_s % 10)) -eq 0 ] && [ "$now_s" -gt 0 ]; then
			say "      $label: running, ${now_s} s"
		fi
		[ $running -gt 0 ] || break
		sleep 1
	done
	for ((i = 1; i <= HOSTS; i++)); do
		if ! wait "${pids[$((i - 1))]}"; then
			ok=0
			echo "---- h$i failed:"
			grep -v '^#' "$WORK/$label.h$i.log" | head -n 15
		fi
	done
	HOST_PIDS=()
	if [ "$STATIC" -eq 1 ]; then
		# the next run continues the session's seqs
		SEQ=$(grep -h -o 'next_seq=[0-9]*' "$WORK/$label".h*.log | cut -d= -f2 | sort -n | tail -n 1)
		[ -n "$SEQ" ] || SEQ=$((1 << 20))
	fi
	[ $ok -eq 1 ] || fail "$label: a host failed (logs in $WORK)"
	say "      $label: done in $(($(date +%s) - t_start)) s; $(grep -h -o 'checked=[0-9]*' "$WORK/$label".h*.log |
		cut -d= -f2 | awk '{ s += $1 } END { print s }') elements checked on $HOSTS hosts, 0 wrong"
	kill -0 "$CB_SW_PID" 2>/dev/null || fail "cais-switch died"
	if [ "$STATIC" -eq 0 ]; then
		# the job stays (its session on the switch, for the final counters); the next run
		# is another job, in a session of its own
		[ "$path" = ring ] || job_scales "demo-$label" >"$WORK/$label.scales"
		kill -0 "$MGR_PID" 2>/dev/null || fail "cais-manager died"
	fi
}
# job_scales JOB: "STEP SCALE WIRE" for every step of the run, tensor $TENSOR's entry
# in the manager's stored answers, read back with step.begin (the same answer for any
# rank); WIRE is the element type on the wire where the answer names one, else "-".
# SCALE is "ring" in steps 0 and 1: libcais takes the tensor to the ring there, before
# the manager has every rank's max|x| (docs/PROTOCOL.md E3)
job_scales() {
	local s obj sc wire
	for ((s = 0; s < RUN_STEPS; s++)); do
		obj=$(mctl -j step.begin job="$1" rank=0 step=$s 2>/dev/null | tr -d ' \n' |
			grep -o '{[^{}]*}' | grep -E "\"tensor\":${TENSOR}[,}]" | head -n 1 || true)
		sc=$(grep -Eo '"scale":[0-9.eE+-]+' <<<"$obj" | cut -d: -f2 || true)
		wire=$(grep -Eo '"wire":"[a-z0-9]+"' <<<"$obj" | cut -d'"' -f4 || true)
		if [ -n "$sc" ] && [ "$s" -lt 2 ]; then sc=ring; fi
		[ -z "$sc" ] || echo "$s $sc ${wire:--}"
	done
}
# scales_text [STEP SCALE WIRE lines on stdin]: "ring then 2^27" (consecutive repeats
# once), with the wire when the answers name one: "ring then 2^27, fixed32"; with
# RANGES=1 each with its steps: "steps 0..1 ring, steps 2..29 2^27"
scales_text() {
	awk -v ranges="${RANGES:-0}" '
	function pow2(x, e) { e = log(x) / log(2); return e == int(e) ? sprintf("2^%d", e) : sprintf("%g", x) }
	function flush() {
		if (n == 0) return
		if (ranges) out = out (out == "" ? "" : ", ") (from == to ? "step " from : "steps " from ".." to) " " key
		else out = out (out == "" ? "" : " then ") key
	}
	{
		k = ($2 == "ring" ? "ring" : pow2($2)) ($3 == "-" ? "" : "/" $3)
		if (k != key) { flush(); key = k; from = $1; n++ }
		to = $1
		w[$3] = 1
	}
	END {
		flush()
		if (n == 0) { print "?"; exit }
		nw = 0
		for (x in w) { nw++; one = x }
		if (nw == 1 && one != "-") { gsub("/" one, "", out); out = out ", " one }
		else gsub("/-", "", out)
		print out
	}'
}
for dt in "${DTYPE_LIST[@]}"; do
	say "    $dt in-network (--path auto, threshold 0: the agent falls back to the ring only where it must)"
	run_hosts "$dt-switch" auto "$dt"
	[ "$STATIC" -eq 1 ] || say "      $dt-switch: the manager's scales of tensor $TENSOR: $(RANGES=1 scales_text <"$WORK/$dt-switch.scales")"
	say "    $dt on the fallback ring (--path ring)"
	run_hosts "$dt-ring" ring "$dt"
done

# ---- the switch's final counters (before the manager stops: its lease still runs) ----
cb_switch_stop 10
SW_RC=$CB_SW_RC
stop_manager
[ "$SW_RC" -ne 137 ] || fail "cais-switch did not stop within 10 s of SIGINT"

# ---- the table ----
# a size's line of a host's log: bytes count type op path time algbw busbw retx wrong maxrel
size_line() { awk -v b="$2" '$1 == b' "$1"; }
# size_scales DT I: the scales the all-reduces of size index I of dtype DT took, in order
size_scales() {
	awk -v i="$2" -v ns="${#SIZES[@]}" '$1 % ns == i' "$WORK/$1-switch.scales" | scales_text
}
echo
if [ "$STATIC" -eq 1 ]; then
	echo "All-reduce (sum) on $HOSTS hosts through cais-switch: in-network vs the fallback ring"
else
	echo "All-reduce (sum) on $HOSTS hosts through cais-switch, driven by cais-manager: in-network vs the fallback ring"
fi
printf '  %5s %6s %10s %10s %8s %11s %12s %8s %5s  %s\n' "dtype" "size" "in-net ms" "ring ms" \
	"speed-up" "max rel err" "ring rel err" "fallback" "wrong" \
	"$([ "$STATIC" -eq 1 ] && echo "scale" || echo "scale (manager, per tensor)")"
all_ok=1
for dt in "${DTYPE_LIST[@]}"; do
	for ((si = 0; si < ${#SIZES[@]}; si++)); do
		b=${SIZES[$si]}
		t_sw=0 t_ring=0 err_sw=0 err_ring=0 n=0 notsw=0 wrong=0
		for ((i = 1; i <= HOSTS; i++)); do
			l=$(size_line "$WORK/$dt-switch.h$i.log" "$b")
			r=$(size_line "$WORK/$dt-ring.h$i.log" "$b")
			[ -n "$l" ] && [ -n "$r" ] || fail "no result for $b bytes ($dt) on h$i"
			read -r _ _ _ _ path us _ _ _ w e <<<"$l"
			t_sw=$(awk -v a="$t_sw" -v b="$us" 'BEGIN { print (b > a) ? b : a }')
			err_sw=$(awk -v a="$err_sw" -v b="$e" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
			wrong=$((wrong + w))
			# switch: all in-network; ring(R): none; mixed(K/N,R): K of N
			case "$path" in
			switch) k=$((WARMUP + STEPS)) ;;
			ring*) k=0 ;;
			mixed*) k=$(echo "$path" | sed 's/mixed(\([0-9]*\)\/.*/\1/') ;;
			esac
			n=$((n + WARMUP + STEPS))
			notsw=$((notsw + WARMUP + STEPS - k))
			read -r _ _ _ _ _ us _ _ _ w e <<<"$r"
			t_ring=$(awk -v a="$t_ring" -v b="$us" 'BEGIN { print (b > a) ? b : a }')
			err_ring=$(awk -v a="$err_ring" -v b="$e" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
			wrong=$((wrong + w))
		done
		[ "$wrong" -eq 0 ] || all_ok=0
		if [ "$STATIC" -eq 1 ]; then
			sc="$SCALE (static)"
		else
			sc=$(size_scales "$dt" "$si")
		fi
		awk -v dt="$dt" -v sz="$(cb_human "$b")" -v a="$t_sw" -v r="$t_ring" -v e="$err_sw" \
			-v er="$err_ring" -v nf="$notsw" -v n="$n" -v w="$wrong" -v sc="$sc" 'BEGIN {
			printf "  %5s %6s %10.1f %10.1f %7.2fx %11.2e %12.2e %7.1f%% %5d  %s\n",
				dt, sz, a / 1000, r / 1000, r / a, e, er, 100 * nf / n, w, sc }'
	done
done
cat <<EOF
  (in-net, ring: the median over $STEPS timed steps of the slowest host's all-reduce time,
   the hosts lined up before each; speed-up: ring / in-network; max rel err: the largest
   |got - expected| / |expected| of any element on any host, warm-up included (in-network:
   fixed point at the scale, then the dtype's rounding; ring: fp32 sums, then the dtype's
   rounding); fallback: the share of the in-network run's all-reduces, warm-up included,
   that the agent completed on the ring; wrong: elements outside PROTOCOL.md section 6's
   bound)
EOF
if [ "$STATIC" -eq 1 ]; then
	echo "  (scale: the fixed-point scale of the switch's tensor entry and of every agent, fixed)"
else
	cat <<EOF
  (scale: what cais-manager gave tensor $TENSOR for that size's in-network all-reduces, one
   manager step each, and the wire's element type where it names one: per tensor, from
   the largest max|x| the ranks reported for the step before (fixed32: the largest power
   of two s with $HOSTS x max|x| x s x 2 < 2^31); the first two all-reduces of a job, steps
   0 and 1, take the ring: the manager has every rank's report from step 2 on (E3))
EOF
fi
echo
echo "cais-switch final counters (SIGINT, exit status $SW_RC):"
sed -n '/cais-switch statistics/,/---------------------------------------------------------------------/p' "$WORK/switch.log"
echo
[ "$SW_RC" -eq 0 ] || fail "cais-switch exited with status $SW_RC"
[ $all_ok -eq 1 ] || fail "some elements were wrong"
say "done: every element of every all-reduce on every host was right"
