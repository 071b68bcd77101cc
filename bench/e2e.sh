#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# e2e.sh: the benefit curve end to end on the namespace testbed. For each
# rank count, one testbed of that many hosts with cais-switch on their
# ports, and three all-reduces (float, sum) of every size from B_min to
# B_max by doubling:
#   cais  in-network (cais-allreduce-perf --path auto --threshold 0: the
#         agent falls back to its ring only where it must)
#   ring  the agent's own fallback ring (--path ring), through the switch as
#         forwarded traffic
#   mpi   OpenMPI's MPI_Allreduce (bench/mpi_allreduce.c; TCP over the data
#         network, so through the same switch as forwarded traffic)
# Medians over the timed iterations; the time of a size is the slowest
# rank's median, the ranks lined up before each iteration (--sync /
# MPI_Barrier). Prints a table per rank count, the speed-ups and the
# crossover sizes, writes CSV. Needs root.
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
BUILD="$ROOT/build"
CSV=""
NAME="cbe2e"
MPI=1
SLOTS=64
ELEMS=2048
SCALE=1024
PORT=47000

usage() {
	cat <<EOF
Usage: $PROG [--ranks LIST] [--min-bytes B] [--max-bytes B] [--iters K] [--warmup W]
            [--build DIR] [--csv FILE] [--no-mpi] [--quick] [--help]

The end-to-end benchmark (needs root): for every rank count N of LIST, a
testbed of N hosts (scripts/testbed.sh) with cais-switch on their ports, then
all-reduces (float, sum) of every doubling from B_min to B_max three ways:
in-network (cais), the agent's fallback ring (ring), OpenMPI's MPI_Allreduce
over TCP through the same switch (mpi). Every element is checked. Prints a
table per N with the speed-ups of cais over ring and mpi and the crossover
sizes, and writes CSV.

  --ranks LIST     rank counts, 2..16 (default $RANKS)
  --min-bytes B    smallest all-reduce (default $MIN_BYTES; K, M: powers of 1024)
  --max-bytes B    largest (default $MAX_BYTES)
  --iters K        timed iterations per size (default $ITERS): the median counts
  --warmup W       untimed iterations before them (default $WARMUP)
  --build DIR      the meson build with cais-switch, cais-allreduce-perf and
                   bench/mpi_allreduce (default build/)
  --csv FILE       write the figures as CSV
  --no-mpi         leave out the MPI baseline (also when OpenMPI is missing:
                   scripts/install-deps.sh --bench installs it)
  --quick          a smoke run: --ranks 4 --min-bytes 128K --max-bytes 1M
                   --iters 1 --warmup 0 (checks that it works, not a speed)
  --help           this text

Times: per size the median over the timed iterations of each rank's
all-reduce, issue to completion, after an untimed line-up of every rank; the
slowest rank's median is the size's time. On a 2-core machine the switch
busy-polls one core and all the hosts share the other: the figures compare
the three ways under the same constraint, not a NIC's line rate.
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
	--ranks | --min-bytes | --max-bytes | --iters | --warmup | --build | --csv)
		[ $# -ge 2 ] || usage_error "$1 needs a value"
		case "$1" in
		--ranks) RANKS=$2 ;;
		--min-bytes) MIN_BYTES=$2 ;;
		--max-bytes) MAX_BYTES=$2 ;;
		--iters) ITERS=$2 ;;
		--warmup) WARMUP=$2 ;;
		--build) BUILD=$2 ;;
		--csv) CSV=$2 ;;
		esac
		shift 2
		;;
	--no-mpi)
		MPI=0
		shift
		;;
	--quick)
		RANKS=4 MIN_BYTES=128K MAX_BYTES=1M ITERS=1 WARMUP=0
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
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth, af_packet)"

SWITCH="$BUILD/dataplane/cais-switch"
PERF="$BUILD/agent/cais-allreduce-perf"
MPIBIN="$BUILD/bench/mpi_allreduce"
[ -x "$SWITCH" ] || die "no $SWITCH (build first: meson setup $BUILD && ninja -C $BUILD)"
[ -x "$PERF" ] || die "no $PERF"
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
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'say interrupted; exit 130' INT
trap 'say terminated; exit 143' TERM

# progress: wait for PIDS, printing the newest size line of LOG every 10 s
watch_pids() {
	local label=$1 log=$2 t_start=$SECONDS last="" line running p
	while :; do
		running=0
		for p in "${PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null && running=$((running + 1))
		done
		[ $running -gt 0 ] || break
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

# run the agent on every host: LABEL PATH; the slowest host's median per size into $WORK/LABEL.t
SEQ=0
run_agent() {
	local label=$1 path=$2 n=$3 i ok=1
	PIDS=()
	for ((i = 1; i <= n; i++)); do
		timeout -k 5 1200 ip netns exec "$(eval "echo \$TB_NS_$i")" "$PERF" --rank $((i - 1)) \
			--world "$n" --switch "$TB_AGG_IP" --peers "$CB_PEERS" --slots $SLOTS --elems $ELEMS \
			--scale $SCALE --dtype f32 --op sum --min-bytes "$MIN_B" --max-bytes "$MAX_B" \
			--iters "$ITERS" --warmup "$WARMUP" --sync --check --check-every 0 --path "$path" \
			--threshold 0 --first-seq "$SEQ" >"$WORK/$label.h$i.log" 2>&1 &
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
	timeout -k 5 1200 mpirun --allow-run-as-root --hostfile "$WORK/hosts" -np "$n" \
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
		die "$label failed"
	}
	PIDS=()
	awk '/^[0-9]/ { if ($6 != 0) bad = 1; print $1, $3, "mpi" } END { exit bad }' \
		"$WORK/$label.log" >"$WORK/$label.t" || die "$label: wrong elements"
}

[ -z "$CSV" ] || echo "ranks,bytes,cais_us,ring_us,mpi_us,cais_vs_ring,cais_vs_mpi,cais_path" >"$CSV"
SUMMARY=()
for n in "${RANK_LIST[@]}"; do
	say "$n ranks: testbed $NAME ($n hosts), cais-switch, sizes $(cb_human "$MIN_B")..$(cb_human "$MAX_B"), $ITERS timed iterations ($WARMUP warm-up)"
	TB_UP=1
	bash "$ROOT/scripts/testbed.sh" up --name "$NAME" --hosts "$n" --mtu 9000 >"$WORK/testbed.log" 2>&1 ||
		{ cat "$WORK/testbed.log" >&2; die "testbed up"; }
	eval "$(bash "$ROOT/scripts/testbed.sh" env --name "$NAME")"
	cb_members "$n" "$PORT"
	cat >"$WORK/config.json" <<EOF
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $n, "slots": $SLOTS,
    "elems_per_packet": $ELEMS, "members": [$CB_MEMBERS]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": $SCALE}}
]
EOF
	cb_switch_start "$SWITCH" "$PREFIX" "$WORK/switch.$n.log" "$n" --config "$WORK/config.json" \
		--stats-period 0 || die "cais-switch did not start"
	SEQ=0
	say "    cais (in-network)"
	run_agent "cais.$n" auto "$n"
	say "    ring (the agent's fallback)"
	run_agent "ring.$n" ring "$n"
	if [ "$MPI" -eq 1 ]; then
		say "    mpi (OpenMPI MPI_Allreduce, TCP)"
		run_mpi "mpi.$n" "$n"
	else
		for b in "${SIZES[@]}"; do echo "$b 0 -"; done >"$WORK/mpi.$n.t"
	fi
	cb_switch_stop 10
	[ "$CB_SW_RC" -eq 0 ] || die "cais-switch exited with status $CB_SW_RC"
	# what the in-network runs cost the switch: retransmissions, and which were needless
	SWLINE=$(grep -m1 -o 'CAIS: DATA .*' "$WORK/switch.$n.log" | sed 's/, completion.*//' || true)
	RETX=$(grep -h -o ' retx=[0-9]*' "$WORK/cais.$n".h*.log | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
	bash "$ROOT/scripts/testbed.sh" down --name "$NAME" >/dev/null 2>&1
	TB_UP=0

	echo
	echo "  ---------- all-reduce (float, sum), $n ranks through cais-switch: median ms ----------"
	printf '  %6s | %10s %10s %10s | %9s %9s | %s\n' size cais ring mpi "ring/cais" "mpi/cais" "cais path"
	paste -d' ' "$WORK/cais.$n.t" "$WORK/ring.$n.t" "$WORK/mpi.$n.t" >"$WORK/all.$n"
	while read -r b tc pc _ tr _ _ tm _; do
		awk -v n="$n" -v b="$b" -v s="$(cb_human "$b")" -v c="$tc" -v r="$tr" -v m="$tm" -v p="$pc" -v csv="$CSV" 'BEGIN {
			sr = r / c; sm = (m > 0) ? m / c : 0
			printf "  %6s | %10.2f %10.2f %10s | %8.2fx %9s | %s\n", s, c / 1000, r / 1000,
				(m > 0) ? sprintf("%.2f", m / 1000) : "-", sr, (m > 0) ? sprintf("%.2fx", sm) : "-", p
			if (csv != "")
				printf "%d,%d,%.1f,%.1f,%.1f,%.4f,%.4f,%s\n", n, b, c, r, m, sr, sm, p >> csv
		}'
	done <"$WORK/all.$n"
	# crossover: the smallest size from which cais wins at every larger size
	for col in ring mpi; do
		x=$(awk -v col="$col" '{ t = (col == "ring") ? $5 : $8; w[NR] = (t > 0 && $2 < t); b[NR] = $1 }
			END { c = ""; for (i = NR; i >= 1 && w[i]; i--) c = b[i]; print c }' "$WORK/all.$n")
		if [ "$MPI" -eq 0 ] && [ "$col" = mpi ]; then continue; fi
		SUMMARY+=("$n ranks: cais faster than $col from $( [ -n "$x" ] && cb_human "$x" || echo 'no size')")
	done
	echo "  (cais path: switch = every iteration in-network; mixed(K/N,REASON) or ring(REASON): the"
	echo "   agent's fallbacks, as cais-allreduce-perf reports them)"
	echo "  switch, whole run: $SWLINE"
	echo "  (retransmissions: DATA sent again after the agent's timer; resends: into a complete"
	echo "   round, answered with the stored RESULT; duplicates: into the open round they had"
	echo "   already joined. The agents' own count of retransmissions, in-network runs: $RETX)"
	echo
done
say "done"
for l in "${SUMMARY[@]}"; do
	echo "  $l"
done
