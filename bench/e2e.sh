#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# e2e.sh: the benefit curve end to end on the namespace testbed. For each
# rank count, one testbed of that many hosts with cais-switch on their
# ports, and all-reduces (sum; f32 or bf16) of every size from B_min to
# B_max by doubling, several ways in one run:
#   cais-W  in-network with wire type W (fixed32, block16: PROTOCOL.md E4),
#           cais-allreduce-perf --path auto --threshold 0 (the agent falls
#           back to its ring only where it must), K flows per rank
#   ring    the agent's own fallback ring (--path ring), through the switch as
#           forwarded traffic
#   gloo    torch.distributed's gloo all_reduce (bench/gloo_allreduce.py,
#           f32 only: gloo cannot reduce bf16), where /usr/bin/python3 has torch
#   mpi     OpenMPI's MPI_Allreduce (bench/mpi_allreduce.c, f32 only; TCP over
#           the data network, so through the same switch as forwarded traffic)
# A fresh testbed is first warmed by untimed in-network all-reduces
# (--warm-iters). Medians over the timed iterations; the time of a size is
# the slowest rank's median, the ranks lined up before each iteration and
# again before checking its result (--sync / barriers: no rank's check runs
# beside another's timed collective on the shared cores). For each in-network way,
# from the switch's counters over its run: the share of DATA that were
# retransmissions and the bytes on the wire per element per host each way
# (port counters); for in-network and the ring, the hosts' CPU per tensor
# byte (cais-allreduce-perf's cpu_ns_per_byte). Prints a table per
# rank count, the speed-ups and the crossover sizes, writes CSV. Needs root.
set -euo pipefail

PROG=${0##*/}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"

RANKS="4,8"
MIN_BYTES=128K
MAX_BYTES=64M
ITERS=5
WARMUP=1
WARM_ITERS=30
BUILD="$ROOT/build"
CSV=""
NAME="cbe2e"
MPI=1
GLOO=1
DTYPE=f32
BOUND_S=""
WIRES=fixed32
THREADS=1
LCORES=1
IDLE_SLEEP=""
LOSS=0
LOSS_UP=
LOSS_DOWN=
SLOTS=64
ELEMS=2048
SCALE=1024
PORT=47000

usage() {
	cat <<EOF
Usage: $PROG [--ranks LIST] [--min-bytes B] [--max-bytes B] [--iters K] [--warmup W]
            [--warm-iters K] [--dtype f32|bf16] [--wires LIST] [--threads K]
            [--lcores L] [--idle-sleep-us US] [--loss P] [--loss-up P] [--loss-down P]
            [--build DIR] [--csv FILE] [--no-mpi] [--no-gloo] [--bound-s S] [--quick] [--help]

The end-to-end benchmark (needs root): for every rank count N of LIST, a
testbed of N hosts (scripts/testbed.sh) with cais-switch on their ports, then
all-reduces (sum) of every doubling from B_min to B_max: in-network for each
wire type of --wires (cais-fixed32, cais-block16), the agent's fallback ring
(ring), torch.distributed's gloo (gloo) and OpenMPI's MPI_Allreduce (mpi),
both over TCP through the same switch and f32 only. Every element is
checked. Prints a table per N with the speed-ups of in-network over the
others, the crossover sizes, the retransmitted share of DATA and the bytes
per element per host on the wire each way (the switch's port counters), the
hosts' CPU per tensor byte in-network and on the ring (each rank's process,
every thread, user and system, over its timed collectives; the mean of the
ranks), and writes CSV.

  --ranks LIST     rank counts, 2..16 (default $RANKS)
  --min-bytes B    smallest all-reduce (default $MIN_BYTES; K, M: powers of 1024)
  --max-bytes B    largest (default $MAX_BYTES)
  --iters K        timed iterations per size (default $ITERS): the median counts
  --warmup W       untimed iterations before them (default $WARMUP)
  --warm-iters K   a fresh testbed's untimed warm-up (default $WARM_ITERS, --quick 2;
                   0: none): K in-network all-reduces of 1 MiB (of
                   --max-bytes if smaller; the first of --wires) before the
                   first timed way, so that the first way does not pay for
                   a cold testbed (bench/README.md section 2)
  --build DIR      the meson build with cais-switch, cais-allreduce-perf and
                   bench/mpi_allreduce (default build/)
  --dtype T        f32 (default) or bf16 (the ring and in-network only)
  --wires LIST     in-network wire types, from fixed32,block16 (default $WIRES)
  --threads K      flows per rank in-network (cais_config.threads; default $THREADS)
  --lcores L       the switch's data lcores, 1..16, each port with L RX
                   queues (af_packet's fanout hash spreads the flows over
                   them; default $LCORES). A flow's rounds are on lcore
                   seq mod L, so with --threads not a multiple of L some
                   DATA is handed over between lcores
  --idle-sleep-us US  the switch's --idle-sleep-us (default: the switch's;
                   0: busy polling)
  --loss P         drop P% of the frames both ways, every way: on their way
                   to the switch (cais-switch --rx-loss, which spares ARP)
                   and on their way into each host (IP only: nftables
                   input hook in its namespace;
                   this kernel has no netem). Never in a host's own output:
                   TCP takes such a local drop as a failed send and retries
                   it only after 200 ms. The hosts' TCP gets rto_min 5 ms on
                   the data network, so that a lost segment of a line-up
                   does not start ranks 200 ms apart (the TCP baselines get
                   it too)
  --loss-up P      the share lost on the way to the switch only (default: --loss)
  --loss-down P    the share lost on the way into the hosts only (default: --loss)
  --csv FILE       write the figures as CSV
  --no-mpi         leave out the MPI baseline (also when OpenMPI is missing:
                   scripts/install-deps.sh --bench installs it)
  --no-gloo        leave out the gloo baseline (also without torch for
                   /usr/bin/python3: scripts/install-deps.sh --python)
  --bound-s S      how long one way's run may take on all its hosts (default
                   1200, --quick 180); past it the run is a hang: the stacks of
                   its processes are printed (gdb, or the kernel's wait
                   channels) and it fails. A third-party baseline (gloo, mpi)
                   that fails or hangs is run once more, said so, then fails
  --quick          a smoke run: --ranks 4 --min-bytes 128K --max-bytes 1M
                   --iters 1 --warmup 0 --warm-iters 2 --bound-s 180 (checks
                   that it works, not a speed)
  --help           this text

Environment: E2E_KEEP=1 keeps the logs (the switch's, every rank's) of a
run that passed, and says where; a failed run always keeps them.

Times: per size the median over the timed iterations of each rank's
all-reduce, issue to completion, after an untimed line-up of every rank (and
another before its result is checked, so that no rank checks while another
is timed); the slowest rank's median is the size's time. On a 2-core
machine the switch's lcore and all the hosts share the cores (the lcore
sleeps when idle, --idle-sleep-us): the figures compare the ways under the
same constraint, not a NIC's line rate.
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
	--ranks | --min-bytes | --max-bytes | --iters | --warmup | --warm-iters | --build | --csv | \
		--dtype | --wires | --threads | --lcores | --idle-sleep-us | --loss | --loss-up | --loss-down | \
		--bound-s)
		[ $# -ge 2 ] || usage_error "$1 needs a value"
		case "$1" in
		--ranks) RANKS=$2 ;;
		--min-bytes) MIN_BYTES=$2 ;;
		--max-bytes) MAX_BYTES=$2 ;;
		--iters) ITERS=$2 ;;
		--warmup) WARMUP=$2 ;;
		--warm-iters) WARM_ITERS=$2 ;;
		--build) BUILD=$2 ;;
		--csv) CSV=$2 ;;
		--dtype) DTYPE=$2 ;;
		--wires) WIRES=$2 ;;
		--threads) THREADS=$2 ;;
		--lcores) LCORES=$2 ;;
		--idle-sleep-us) IDLE_SLEEP=$2 ;;
		--loss) LOSS=$2 ;;
		--loss-up) LOSS_UP=$2 ;;
		--loss-down) LOSS_DOWN=$2 ;;
		--bound-s) BOUND_S=$2 ;;
		esac
		shift 2
		;;
	--no-mpi)
		MPI=0
		shift
		;;
	--no-gloo)
		GLOO=0
		shift
		;;
	--quick)
		RANKS=4 MIN_BYTES=128K MAX_BYTES=1M ITERS=1 WARMUP=0 WARM_ITERS=2 QUICK_BOUND=180
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) usage_error "unknown argument '$1'" ;;
	esac
done

[[ "$RANKS" =~ ^[0-9]{1,2}(,[0-9]{1,2})*$ ]] || usage_error "--ranks '$RANKS': a list of integers"
IFS=, read -r -a RANK_LIST <<<"$RANKS"
for n in "${RANK_LIST[@]}"; do
	[ "$n" -ge 2 ] && [ "$n" -le 16 ] || usage_error "--ranks: $n is not in 2..16"
done
for b in "$MIN_BYTES" "$MAX_BYTES"; do
	[[ "$b" =~ ^[0-9]{1,9}[KkMm]?$ ]] || usage_error "'$b': a byte count like 131072, 128K or 64M"
done
MIN_B=$(cb_to_bytes "$MIN_BYTES")
MAX_B=$(cb_to_bytes "$MAX_BYTES")
[ "$MIN_B" -ge 4 ] && [ $((MIN_B % 4)) -eq 0 ] || usage_error "--min-bytes: a multiple of 4, at least 4"
[ "$MAX_B" -ge "$MIN_B" ] && [ "$MAX_B" -le $((256 << 20)) ] || usage_error "--max-bytes: from --min-bytes to 256M"
[[ "$ITERS" =~ ^[0-9]{1,4}$ ]] && [ "$ITERS" -ge 1 ] || usage_error "--iters '$ITERS': a positive integer"
[[ "$WARMUP" =~ ^[0-9]{1,4}$ ]] || usage_error "--warmup '$WARMUP': a non-negative integer"
[[ "$WARM_ITERS" =~ ^[0-9]{1,4}$ ]] || usage_error "--warm-iters '$WARM_ITERS': a non-negative integer"
case "$DTYPE" in f32 | bf16) ;; *) usage_error "--dtype '$DTYPE': f32 or bf16" ;; esac
[[ "$WIRES" =~ ^(fixed32|block16)(,(fixed32|block16))?$ ]] || usage_error "--wires '$WIRES': fixed32, block16 or both"
IFS=, read -r -a WIRE_LIST <<<"$WIRES"
case "$THREADS" in 1 | 2 | 4 | 8 | 16) ;; *) usage_error "--threads '$THREADS': 1, 2, 4, 8 or 16" ;; esac
[[ "$LCORES" =~ ^[0-9]+$ ]] && [ "$LCORES" -ge 1 ] && [ "$LCORES" -le 16 ] ||
	usage_error "--lcores '$LCORES': 1..16"
[ "$LCORES" -le "$(nproc)" ] || usage_error "--lcores $LCORES: this machine has $(nproc) CPU(s)"
CB_SW_LCORES=$LCORES
[ -z "$IDLE_SLEEP" ] || [[ "$IDLE_SLEEP" =~ ^[0-9]{1,6}$ ]] || usage_error "--idle-sleep-us '$IDLE_SLEEP': microseconds"
for v in "--loss:$LOSS" "--loss-up:${LOSS_UP:-0}" "--loss-down:${LOSS_DOWN:-0}"; do
	[[ "${v#*:}" =~ ^[0-9]{1,2}$ ]] && [ "${v#*:}" -le 50 ] ||
		usage_error "${v%%:*} '${v#*:}': a percentage, 0..50"
done
LOSS_UP=${LOSS_UP:-$LOSS} LOSS_DOWN=${LOSS_DOWN:-$LOSS}
[ "$LOSS_DOWN" -eq 0 ] || command -v nft >/dev/null || die "--loss needs nft (nftables)"
[ -n "$BOUND_S" ] || BOUND_S=${QUICK_BOUND:-1200}
[[ "$BOUND_S" =~ ^[0-9]{1,5}$ ]] && [ "$BOUND_S" -ge 10 ] || usage_error "--bound-s '$BOUND_S': seconds, at least 10"
# timeout(1)'s backstop behind watch_pids' bound
KILL_S=$((BOUND_S + 60))
ESIZE=4
[ "$DTYPE" = f32 ] || ESIZE=2
[ $((MIN_B % ESIZE)) -eq 0 ] || usage_error "--min-bytes: a multiple of the element size"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth, af_packet)"

SWITCH="$BUILD/dataplane/cais-switch"
PERF="$BUILD/agent/cais-allreduce-perf"
CTL="$BUILD/control/cais-ctl"
MPIBIN="$BUILD/bench/mpi_allreduce"
[ -x "$SWITCH" ] || die "no $SWITCH (build first: meson setup $BUILD && ninja -C $BUILD)"
[ -x "$PERF" ] || die "no $PERF"
[ -x "$CTL" ] || die "no $CTL"
if [ "$DTYPE" != f32 ]; then
	MPI=0 GLOO=0 # neither reduces bf16 (gloo in PyTorch 1.13 raises)
elif [ "$GLOO" -eq 1 ] && ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
	echo "$PROG: no torch for /usr/bin/python3: the gloo column is left out;" \
		"scripts/install-deps.sh --python" >&2
	GLOO=0
fi
if [ "$MPI" -eq 1 ] && { [ -x "$MPIBIN" ] && command -v mpirun >/dev/null; } ; then
	:
elif [ "$MPI" -eq 1 ]; then
	echo "$PROG: no OpenMPI (mpirun, $MPIBIN): the MPI column is left out;" \
		"scripts/install-deps.sh --bench, then reconfigure $BUILD" >&2
	MPI=0
fi

SIZES=()
for ((b = MIN_B; b <= MAX_B; b *= 2)); do
	SIZES+=("$b")
done

T0=$(date +%s.%N)
say() { echo "[e2e $(awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%5.1f", t1 - t0 }') s] $*"; }

WORK=$(mktemp -d /tmp/cais-e2e.XXXXXX)
PREFIX="cais-e2e-$$"
TB_UP=0
PIDS=()
cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	set +e
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	cb_switch_stop 5
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	[ "$TB_UP" -eq 1 ] && bash "$ROOT/scripts/testbed.sh" down --name "$NAME" >/dev/null 2>&1
	rm -rf "/var/run/dpdk/$PREFIX"
	if [ "$rc" -ne 0 ]; then
		echo "$PROG: failed (status $rc); logs kept in $WORK" >&2
	elif [ -n "${E2E_KEEP:-}" ]; then
		echo "$PROG: logs kept in $WORK (E2E_KEEP)" >&2
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'say interrupted; exit 130' INT
trap 'say terminated; exit 143' TERM

# the processes below pid $1, itself included (the ranks run under timeout,
# ip netns exec, mpirun's daemons)
tree_pids() {
	local p=$1 c
	echo "$p"
	for c in $(pgrep -P "$p" 2>/dev/null); do tree_pids "$c"; done
}

# the stacks of every process below PIDS, to stderr: what a hang waits on
dump_stacks() {
	local p q t
	for p in "${PIDS[@]}"; do
		for q in $(tree_pids "$p"); do
			[ -r "/proc/$q/comm" ] || continue
			echo "---- pid $q ($(cat "/proc/$q/comm" 2>/dev/null)): $(tr '\0' ' ' <"/proc/$q/cmdline" 2>/dev/null | cut -c1-160)" >&2
			if command -v gdb >/dev/null; then
				timeout 30 gdb -p "$q" -batch -nx -ex 'thread apply all bt 12' 2>/dev/null |
					grep -E '^(Thread|#)' | head -n 60 >&2 || true
			else
				for t in /proc/"$q"/task/*; do
					echo "  thread ${t##*/}: $(cat "$t/wchan" 2>/dev/null)" >&2
				done
			fi
		done
	done
}

# progress: wait for PIDS, printing the newest size line of LOG every 10 s;
# past BOUND_S the run is a hang: the stacks, then every process stopped
watch_pids() {
	local label=$1 log=$2 t_start=$SECONDS last="" line running p q hung=0
	while :; do
		running=0
		for p in "${PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null && running=$((running + 1))
		done
		[ $running -gt 0 ] || break
		if [ $hung -eq 0 ] && [ $((SECONDS - t_start)) -ge "$BOUND_S" ]; then
			hung=1
			say "      $label: $running process(es) still running after $BOUND_S s (--bound-s): a hang; their stacks:"
			dump_stacks
			for p in "${PIDS[@]}"; do
				kill -TERM "$p" 2>/dev/null || true
			done
			sleep 5
			for p in "${PIDS[@]}"; do
				for q in $(tree_pids "$p"); do kill -KILL "$q" 2>/dev/null || true; done
			done
		fi
		if [ $(((SECONDS - t_start) % 10)) -eq 9 ]; then
			line=$(grep -E '^ *[0-9]+ ' "$log" 2>/dev/null | tail -n 1 | awk '{ print $1 }' || true)
			if [ -n "$line" ] && [ "$line" != "$last" ]; then
				say "      $label: $(cb_human "$line") done"
				last=$line
			fi
		fi
		sleep 1
	done
}

# run the agent on every host: LABEL PATH N TENSOR WIRE; the slowest host's
# median per size into $WORK/LABEL.t ("bytes time_us path")
SEQ=0
# The mean over LABEL's N ranks of cais-allreduce-perf's cpu_ns_per_byte:
# each process's CPU time over its timed collectives per byte of them.
host_cpu() {
	local i
	for ((i = 1; i <= $2; i++)); do
		grep -m1 -o 'cpu_ns_per_byte=[0-9.]*' "$WORK/$1.h$i.log" | cut -d= -f2
	done | awk '{ s += $1; n++ } END { if (n) printf "%.2f", s / n; else printf "?" }'
}
run_agent() {
	local label=$1 path=$2 n=$3 tensor=$4 wire=$5 i ok=1
	PIDS=()
	for ((i = 1; i <= n; i++)); do
		timeout -k 5 "$KILL_S" ip netns exec "$(eval "echo \$TB_NS_$i")" "$PERF" --rank $((i - 1)) \
			--world "$n" --switch "$TB_AGG_IP" --peers "$CB_PEERS" --slots $SLOTS --elems $ELEMS \
			--scale $SCALE --dtype "$DTYPE" --op sum --min-bytes "$MIN_B" --max-bytes "$MAX_B" \
			--iters "$ITERS" --warmup "$WARMUP" --sync --check --check-every 0 --path "$path" \
			--threshold 0 --first-seq "$SEQ" --tensor "$tensor" --wire "$wire" \
			--threads "$THREADS" >"$WORK/$label.h$i.log" 2>&1 &
		PIDS+=($!)
	done
	watch_pids "$label" "$WORK/$label.h1.log"
	for ((i = 1; i <= n; i++)); do
		if ! wait "${PIDS[$((i - 1))]}"; then
			ok=0
			echo "---- $label: host $i failed:" >&2
			grep -v '^#' "$WORK/$label.h$i.log" | tail -n 15 >&2
		fi
	done
	PIDS=()
	[ $ok -eq 1 ] || die "$label failed"
	SEQ=$(grep -h -o 'next_seq=[0-9]*' "$WORK/$label".h*.log | cut -d= -f2 | sort -n | tail -n 1)
	# bytes count dtype op path time_us ...: the slowest host's time; the path of host 1
	for b in "${SIZES[@]}"; do
		awk -v b="$b" '$1 == b { if ($6 > t) t = $6; if (p == "") p = $5 } END { print b, t, p }' \
			"$WORK/$label".h*.log
	done >"$WORK/$label.t"
}

# A fresh testbed's warm-up (--warm-iters): N WIRE. The first timed way of a
# testbed ran slower than the same way later on it (bench/README.md section
# 2); this run takes that, untimed and outside every way's counters. Each
# host checks its results as in a timed run.
warm_testbed() {
	local n=$1 wire=$2 tensor=1 b=$((1 << 20))
	[ "$MAX_B" -ge "$b" ] || b=$MAX_B
	local MIN_B=$b MAX_B=$b ITERS=$WARM_ITERS WARMUP=0
	local SIZES=("$b")

	[ "$wire" = fixed32 ] || tensor=2
	say "    warm-up: $WARM_ITERS untimed in-network all-reduces of $(cb_human "$b") (cais-$wire)"
	run_agent "warm.$n" auto "$n" "$tensor" "$wire"
}

# gloo on every host (f32): LABEL N
run_gloo() {
	local label=$1 n=$2 i ok=1
	PIDS=()
	for ((i = 1; i <= n; i++)); do
		GLOO_SOCKET_IFNAME=eth0 timeout -k 5 "$KILL_S" ip netns exec "$(eval "echo \$TB_NS_$i")" \
			/usr/bin/python3 "$ROOT/bench/gloo_allreduce.py" --rank $((i - 1)) --world "$n" \
			--master "$TB_IP_1:$((PORT + 100))" --min-bytes "$MIN_B" --max-bytes "$MAX_B" \
			--iters "$ITERS" --warmup "$WARMUP" >"$WORK/$label.h$i.log" 2>&1 &
		PIDS+=($!)
	done
	watch_pids "$label" "$WORK/$label.h1.log"
	for ((i = 1; i <= n; i++)); do
		if ! wait "${PIDS[$((i - 1))]}"; then
			ok=0
			echo "---- $label: host $i failed:" >&2
			tail -n 15 "$WORK/$label.h$i.log" >&2
		fi
	done
	PIDS=()
	[ $ok -eq 1 ] || { echo "$PROG: $label failed" >&2; return 1; }
	for b in "${SIZES[@]}"; do
		awk -v b="$b" '$1 == b { if ($6 > t) t = $6 } END { print b, t, "gloo" }' "$WORK/$label".h*.log
	done >"$WORK/$label.t"
}

# the switch's counters now: "rx_bytes tx_bytes DATA retx lost" (every port,
# every session; DATA: counted, resends, duplicates, stale, inconsistent;
# lost: frames the ports dropped, RX missed and TX dropped)
switch_counters() {
	"$CTL" -s "$CTL_ADDR" -j stats.get 2>/dev/null | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
ports = r.get("ports", [])
ss = r.get("sessions", [])
print(sum(p["rx_bytes"] for p in ports), sum(p["tx_bytes"] for p in ports),
      sum(s.get(k, 0) for s in ss for k in ("data_rx", "resends", "duplicates", "stale",
                                            "inconsistent")),
      sum(s.get("retx", 0) for s in ss),
      sum(p.get("rx_missed", 0) + p.get("tx_dropped", 0) for p in ports))' ||
		echo "0 0 0 0 0"
}

run_mpi() {
	local label=$1 n=$2 i
	: >"$WORK/hosts"
	for ((i = 1; i <= n; i++)); do
		echo "$(eval "echo \$TB_NS_$i") slots=1" >>"$WORK/hosts"
	done
	cat >"$WORK/nsrsh" <<'EOF'
#!/bin/sh
# mpirun's "ssh": [options] HOST COMMAND... -> the command in the host's namespace
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1
shift
exec ip netns exec "$host" /bin/sh -c "$*"
EOF
	chmod +x "$WORK/nsrsh"
	# yield_when_idle: the ranks share cores, as the agents' do (busy-polling
	# MPI ranks would starve one another); TCP on the data network only
	timeout -k 5 "$KILL_S" mpirun --allow-run-as-root --hostfile "$WORK/hosts" -np "$n" \
		--mca plm_rsh_agent "$WORK/nsrsh" --mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include "$TB_MGMT_NET" --mca btl tcp,self \
		--mca btl_tcp_if_include "$TB_DATA_NET" --mca mpi_yield_when_idle 1 --bind-to none \
		"$MPIBIN" --min-bytes "$MIN_B" --max-bytes "$MAX_B" --iters "$ITERS" \
		--warmup "$WARMUP" >"$WORK/$label.log" 2>&1 &
	PIDS=($!)
	watch_pids "$label" "$WORK/$label.log"
	wait "${PIDS[0]}" || {
		tail -n 20 "$WORK/$label.log" >&2
		PIDS=()
		echo "$PROG: $label failed" >&2
		return 1
	}
	PIDS=()
	awk '/^[0-9]/ { if ($6 != 0) bad = 1; print $1, $3, "mpi" } END { exit bad }' \
		"$WORK/$label.log" >"$WORK/$label.t" || die "$label: wrong elements"
}

# twice NAME COMMAND...: a third-party baseline's run, once more if it fails
twice() {
	local name=$1
	shift
	"$@" && return 0
	say "    $name failed (above): once more, a third-party baseline"
	"$@" || die "$name failed twice"
}

COLS=()
for w in "${WIRE_LIST[@]}"; do COLS+=("cais-$w"); done
COLS+=(ring)
[ "$GLOO" -eq 0 ] || COLS+=(gloo)
[ "$MPI" -eq 0 ] || COLS+=(mpi)
# elements each host sends one way over a whole run (warm-up included)
ELEMS_RUN=0
for b in "${SIZES[@]}"; do ELEMS_RUN=$((ELEMS_RUN + (ITERS + WARMUP) * b / ESIZE)); done
if [ -n "$CSV" ]; then
	{
		printf 'ranks,bytes'
		for c in "${COLS[@]}"; do printf ',%s_us' "${c//-/_}"; done
		for w in "${WIRE_LIST[@]}"; do
			printf ',cais_%s_path,cais_%s_retx_share,cais_%s_up_B_per_elem,cais_%s_down_B_per_elem' \
				"$w" "$w" "$w" "$w"
		done
		echo
	} >"$CSV"
fi
SUMMARY=()
SW_LOSS=() # --loss, --loss-up: the switch drops that share of what it receives (the way up)
[ "$LOSS_UP" -eq 0 ] || SW_LOSS=(--rx-loss "$LOSS_UP")
CTL_ADDR="127.0.0.1:$((20000 + $$ % 30000))"
for n in "${RANK_LIST[@]}"; do
	say "$n ranks: testbed $NAME ($n hosts), cais-switch ($LCORES lcore(s)), $DTYPE, sizes $(cb_human "$MIN_B")..$(cb_human "$MAX_B"), $ITERS timed iterations ($WARMUP warm-up; testbed warm-up: $WARM_ITERS), ways: ${COLS[*]}"
	TB_UP=1
	bash "$ROOT/scripts/testbed.sh" up --name "$NAME" --hosts "$n" --mtu 9000 >"$WORK/testbed.log" 2>&1 ||
		{ cat "$WORK/testbed.log" >&2; die "testbed up"; }
	eval "$(bash "$ROOT/scripts/testbed.sh" env --name "$NAME")"
	if [ "$LOSS_UP" -gt 0 ] || [ "$LOSS_DOWN" -gt 0 ]; then # the tables go with the namespaces
		cb_host_loss "$n" "$LOSS_DOWN" || die "the hosts' loss rules"
		say "    loss on every host: $LOSS_UP% into the switch (its --rx-loss), $LOSS_DOWN% into each host (nftables); TCP rto_min 5 ms on the data network"
	fi
	cb_members "$n" "$PORT" "$THREADS"
	# tensor 1: FIXED32 at scale SCALE; tensor 2: BLOCK16
	cb_bench_session "$WORK/config.json" "$n" "$SLOTS" "$ELEMS" "$SCALE"
	cb_switch_start "$SWITCH" "$PREFIX" "$WORK/switch.$n.log" "$n" --config "$WORK/config.json" \
		--stats-period 0 --ctl "$CTL_ADDR" ${IDLE_SLEEP:+--idle-sleep-us "$IDLE_SLEEP"} \
		"${SW_LOSS[@]}" ||
		die "cais-switch did not start"
	SEQ=0
	WIRE_NOTES=()
	[ "$WARM_ITERS" -eq 0 ] || warm_testbed "$n" "${WIRE_LIST[0]}"
	for w in "${WIRE_LIST[@]}"; do
		say "    cais-$w (in-network, $THREADS flow(s) per rank)"
		read -r rx0 tx0 d0 r0 l0 <<<"$(switch_counters)"
		tensor=1
		[ "$w" = fixed32 ] || tensor=2
		run_agent "cais-$w.$n" auto "$n" "$tensor" "$w"
		read -r rx1 tx1 d1 r1 l1 <<<"$(switch_counters)"
		# the retransmitted share of DATA; bytes per element per host each
		# way, frames and their headers included (and the --sync line-ups,
		# forwarded through the same ports)
		awk -v d=$((d1 - d0)) -v r=$((r1 - r0)) -v up=$((rx1 - rx0)) -v down=$((tx1 - tx0)) \
			-v e=$((ELEMS_RUN * n)) 'BEGIN { printf "%.4f %.3f %.3f\n", d ? r / d : 0, up / e, down / e }' \
			>"$WORK/cais-$w.$n.wire"
		read -r share up down <"$WORK/cais-$w.$n.wire"
		WIRE_NOTES+=("cais-$w: DATA $((d1 - d0)), retransmitted $((r1 - r0)) ($(awk -v s="$share" 'BEGIN { printf "%.2f%%", 100 * s }')); bytes per element per host: $up up, $down down; frames the switch's ports dropped: $((l1 - l0)); host CPU $(host_cpu "cais-$w.$n" "$n") ns per tensor byte")
	done
	say "    ring (the agent's fallback)"
	run_agent "ring.$n" ring "$n" 1 fixed32
	WIRE_NOTES+=("ring: host CPU $(host_cpu "ring.$n" "$n") ns per tensor byte")
	if [ "$GLOO" -eq 1 ]; then
		say "    gloo (torch.distributed all_reduce, TCP)"
		twice gloo run_gloo "gloo.$n" "$n"
	fi
	if [ "$MPI" -eq 1 ]; then
		say "    mpi (OpenMPI MPI_Allreduce, TCP)"
		twice mpi run_mpi "mpi.$n" "$n"
	fi
	IDLE=$("$CTL" -s "$CTL_ADDR" -j stats.get 2>/dev/null | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
n = r.get("lcores", 1)
print("idle_sleep_us %s, %s sleeps, %.1f s asleep of %s%.1f s up" % (r.get("idle_sleep_us"),
      r.get("idle_sleeps"), r.get("idle_s", 0), "%d x " % n if n > 1 else "",
      r.get("uptime_s", 0)))' || true)
	cb_switch_stop 10
	[ "$CB_SW_RC" -eq 0 ] || die "cais-switch exited with status $CB_SW_RC"
	SWLINE=$(grep -m1 -o 'CAIS: DATA .*' "$WORK/switch.$n.log" | sed 's/, completion.*//' || true)
	bash "$ROOT/scripts/testbed.sh" down --name "$NAME" >/dev/null 2>&1
	TB_UP=0

	# one row per size: bytes, then each column's time and path
	: >"$WORK/all.$n"
	for b in "${SIZES[@]}"; do
		row="$b"
		for c in "${COLS[@]}"; do
			row+=" $(awk -v b="$b" '$1 == b { print $2, $3 }' "$WORK/$c.$n.t")"
		done
		echo "$row" >>"$WORK/all.$n"
	done
	echo
	echo "  ---------- all-reduce ($DTYPE, sum), $n ranks through cais-switch: median ms ----------"
	awk -v n="$n" -v cols="${COLS[*]}" -v nw="${#WIRE_LIST[@]}" -v csv="$CSV" -v wdir="$WORK" '
	function human(b) {
		return b >= 1048576 && b % 1048576 == 0 ? b / 1048576 "M" : (b >= 1024 && b % 1024 == 0 ? b / 1024 "K" : b)
	}
	BEGIN {
		nc = split(cols, c, " ")
		printf "  %6s |", "size"
		for (i = 1; i <= nc; i++) printf " %12s", c[i]
		printf " |"
		for (w = 1; w <= nw; w++) for (i = nw + 1; i <= nc; i++) printf " %10s", c[i] "/" substr(c[w], 6, 3)
		if (nw == 2) printf " %10s", "fix/blo"
		printf " | paths\n"
		for (w = 1; w <= nw; w++) {
			getline line < (wdir "/" c[w] "." n ".wire")
			split(line, a, " ")
			share[w] = a[1]; up[w] = a[2]; down[w] = a[3]
		}
	}
	{
		printf "  %6s |", human($1)
		for (i = 1; i <= nc; i++) { t[i] = $(2 * i); p[i] = $(2 * i + 1); printf " %12.2f", t[i] / 1000 }
		printf " |"
		for (w = 1; w <= nw; w++) for (i = nw + 1; i <= nc; i++) printf " %9.2fx", t[i] / t[w]
		if (nw == 2) printf " %9.2fx", t[1] / t[2]
		printf " |"
		for (w = 1; w <= nw; w++) printf " %s", p[w]
		printf "\n"
		if (csv != "") {
			printf "%d,%d", n, $1 >> csv
			for (i = 1; i <= nc; i++) printf ",%.1f", t[i] >> csv
			for (w = 1; w <= nw; w++) printf ",%s,%s,%s,%s", p[w], share[w], up[w], down[w] >> csv
			printf "\n" >> csv
		}
	}' "$WORK/all.$n"
	# crossover: the smallest size from which in-network wins at every larger size
	for ((w = 0; w < ${#WIRE_LIST[@]}; w++)); do
		for ((c = ${#WIRE_LIST[@]}; c < ${#COLS[@]}; c++)); do
			x=$(awk -v a=$((2 * w + 2)) -v o=$((2 * c + 2)) '{ win[NR] = ($a < $o); b[NR] = $1 }
				END { s = ""; for (i = NR; i >= 1 && win[i]; i--) s = b[i]; print s }' "$WORK/all.$n")
			SUMMARY+=("$n ranks: ${COLS[$w]} faster than ${COLS[$c]} from $([ -n "$x" ] && cb_human "$x" || echo 'no size')")
		done
	done
	echo "  (paths: switch = every iteration in-network; mixed(K/N,REASON) or ring(REASON): the"
	echo "   agent's fallbacks, as cais-allreduce-perf reports them)"
	for l in "${WIRE_NOTES[@]}"; do echo "  $l"; done
	echo "  switch, whole run: $SWLINE"
	[ -z "$IDLE" ] || echo "  switch lcores: $IDLE"
	echo
done
say "done"
for l in "${SUMMARY[@]}"; do
	echo "  $l"
done
