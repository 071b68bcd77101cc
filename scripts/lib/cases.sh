# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
#
# Sourced by the testbeds that run several switch servers and check every
# rank's run (tests/integration/stripes_testbed.sh, tree_testbed.sh): the
# progress lines, the case bookkeeping, the ranks' runs and the --bench table.
# The caller sets ROOT, PROG, T0 (date +%s.%N), WORK, RANKS, HOST_TIMEOUT, SEQ
# and FAILED=0 FAILURES=() HOST_PIDS=(), and defines cb_rank_cmd (below).
#
#   cb_parse_args ARGS...   the scripts' command line: --switch/--perf/--ctl/
#                           --manager/--testbed PATH (or CAIS_SWITCH, CAIS_PERF,
#                           CAIS_CTL, CAIS_MANAGER, CAIS_TESTBED), --keep-logs,
#                           --bench with --bytes
#                           LIST (BENCH_BYTES, the caller's default), --iters N,
#                           --dtype; --help prints the script's head comment
#   cb_need_testbed         skip (77) unless root, the tools, the four
#                           programs and network namespaces are there
#   cb_traps                on EXIT the caller's cleanup (which stops what it
#                           started, then calls cb_finish); INT, TERM: exit 130, 143
#   cb_finish RC            the testbed NAME down, WORK removed (kept on a failure
#                           or --keep-logs), exit RC
#   cb_say TEXT...          a line with the seconds since T0
#   cb_step TEXT...         a blank line, then a "=== TEXT" line
#   cb_case_fail TEXT...    count a failed case (cb_summary lists them)
#   cb_fatal TEXT...        say it, show the switches' logs (WORK/switch-*.log), exit 1
#   cb_stop_pid PID         SIGINT, 5 s, SIGKILL
#   cb_run LABEL ARGS...    every rank at once: cb_rank_cmd I (I = 1..RANKS)
#                           sets CB_CMD, the command of host I's rank, which
#                           ARGS and the run's --first-seq follow; each must
#                           exit 0 within HOST_TIMEOUT (logs WORK/LABEL.hI.log);
#                           SEQ moves past the seqs the run used; 1 if one failed
#   cb_all_paths LABEL RE   every line of LABEL's per-size tables took a path
#                           matching RE (the 5th column), on every rank
#   cb_slowest LABEL        "bytes us" lines: the slowest rank's median time per
#                           size in LABEL's run (for join)
#   cb_summary PROG         "all cases passed" and exit 0, or the failed cases
#                           and exit 1
#   cb_manager_start FABRIC cais-manager with that --fabric file, in the root
#                           namespace on the testbed's management bridge
#                           (CB_MGR, key WORK/manager.key, store WORK/manager.db,
#                           log WORK/manager.log); waits (10 s at most) until it
#                           holds every switch's lease; 1 if not. cb_finish
#                           stops it
#   cb_mctl ARGS...         cais-ctl to that manager
#   cb_job_field EXPR       a Python expression of d, the manager's job.status of
#                           job JOB, printed (nothing when it fails)

# shellcheck disable=SC2034 # the settings are the caller's
cb_parse_args() {
	SWITCH=${CAIS_SWITCH:-$ROOT/build/dataplane/cais-switch}
	PERF=${CAIS_PERF:-$ROOT/build/agent/cais-allreduce-perf}
	CTL=${CAIS_CTL:-$ROOT/build/control/cais-ctl}
	MANAGER=${CAIS_MANAGER:-$ROOT/build/control/manager/cais-manager}
	TESTBED=${CAIS_TESTBED:-$ROOT/scripts/testbed.sh}
	KEEP_LOGS=0 BENCH=0 BENCH_ITERS=10 BENCH_DTYPE=f32
	while [ $# -gt 0 ]; do
		case "$1" in
		--switch) SWITCH=$2; shift 2 ;;
		--perf) PERF=$2; shift 2 ;;
		--ctl) CTL=$2; shift 2 ;;
		--manager) MANAGER=$2; shift 2 ;;
		--testbed) TESTBED=$2; shift 2 ;;
		--keep-logs) KEEP_LOGS=1; shift ;;
		--bench) BENCH=1; shift ;;
		--bytes) BENCH_BYTES=$2; shift 2 ;;
		--iters) BENCH_ITERS=$2; shift 2 ;;
		--dtype) BENCH_DTYPE=$2; shift 2 ;;
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
}

cb_need_testbed() {
	cb_need_root_and "network namespaces, veth, raw sockets for af_packet" ip ethtool nft timeout awk
	[ -x "$SWITCH" ] || cb_skip "no cais-switch at $SWITCH (is libdpdk installed? give --switch)"
	[ -x "$PERF" ] || cb_skip "no cais-allreduce-perf at $PERF (give --perf)"
	[ -x "$CTL" ] || cb_skip "no cais-ctl at $CTL (give --ctl)"
	[ -x "$MANAGER" ] || cb_skip "no cais-manager at $MANAGER (give --manager)"
	[ -x /usr/bin/python3 ] || cb_skip "no /usr/bin/python3 (the checks read JSON with it)"
	ip netns list >/dev/null 2>&1 || cb_skip "network namespaces do not work here"
}

cb_traps() {
	trap cleanup EXIT
	trap 'echo "$PROG: interrupted"; exit 130' INT
	trap 'echo "$PROG: terminated"; exit 143' TERM
}

cb_finish() {
	cb_stop_pid "${CB_MGR_PID:-}"
	bash "$TESTBED" down --name "$NAME" >/dev/null 2>&1 || true
	if [ "$1" -eq 0 ] && [ "$FAILED" -eq 0 ] && [ "$KEEP_LOGS" -eq 0 ]; then
		rm -rf "$WORK"
	else
		echo "$PROG: logs kept in $WORK"
	fi
	exit "$1"
}

cb_say() { echo "[$(awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%6.1f", t1 - t0 }') s] $*"; }

cb_step() {
	echo
	cb_say "=== $*"
}

cb_case_fail() {
	FAILED=1
	FAILURES+=("$*")
	cb_say "FAIL: $*"
}

cb_fatal() {
	FAILED=1
	cb_say "FATAL: $*"
	for l in "$WORK"/switch-*.log; do
		[ -s "$l" ] && { echo "---- $l (last 20 lines)"; tail -n 20 "$l"; }
	done
	exit 1
}

cb_stop_pid() {
	[ -n "$1" ] || return 0
	kill -INT "$1" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

cb_run() {
	local label=$1 i pids=() rc bad=0 s max=0
	shift
	for ((i = 1; i <= RANKS; i++)); do
		cb_rank_cmd "$i"
		timeout -k 5 "$HOST_TIMEOUT" "${CB_CMD[@]}" --first-seq "$SEQ" "$@" \
			>"$WORK/$label.h$i.log" 2>&1 &
		pids+=($!)
		HOST_PIDS+=($!)
	done
	for ((i = 1; i <= RANKS; i++)); do
		wait "${pids[$((i - 1))]}"
		rc=$?
		if [ $rc -ne 0 ]; then
			bad=1
			echo "---- h$i exited $rc: $WORK/$label.h$i.log"
			grep -v '^#' "$WORK/$label.h$i.log" | head -n 8
		fi
		s=$(grep -m1 '^# summary ' "$WORK/$label.h$i.log" | tr ' ' '\n' | sed -n 's/^next_seq=//p')
		[ -n "$s" ] && [ "$s" -gt "$max" ] && max=$s
	done
	HOST_PIDS=()
	SEQ=$((bad || max == 0 ? (max > SEQ ? max : SEQ) + 100000 : max))
	return $bad
}

cb_all_paths() {
	local i
	for ((i = 1; i <= RANKS; i++)); do
		awk -v re="^($2)\$" '/^ +[0-9]/ && $5 !~ re { bad = 1 } END { exit bad }' \
			"$WORK/$1.h$i.log" || return 1
	done
}

cb_slowest() { # label: "bytes us" per size, the slowest rank's median (column 6)
	awk '/^ +[0-9]/ { if ($6 > t[$1]) t[$1] = $6 } END { for (b in t) print b, t[b] }' \
		"$WORK/$1".h*.log | sort
}

cb_summary() {
	echo
	if [ "$FAILED" -eq 0 ]; then
		cb_say "$1: all cases passed"
		exit 0
	fi
	cb_say "$1: ${#FAILURES[@]} case(s) failed:"
	printf '  - %s\n' "${FAILURES[@]}"
	exit 1
}

cb_manager_start() {
	CB_MGR="$TB_BRIDGE_IP:51735"
	head -c 32 /dev/urandom >"$WORK/manager.key"
	# the switches share two cores with the ranks: their queues run deep, which
	# is no reason to refuse a job (admission) here
	"$MANAGER" --fabric "$1" --listen "$CB_MGR" --key "$WORK/manager.key" \
		--db "$WORK/manager.db" --lease-ms 3000 --poll-ms 500 --max-queue-depth 100000000 \
		>"$WORK/manager.log" 2>&1 &
	CB_MGR_PID=$!
	for _ in $(seq 1 100); do
		cb_mctl -j switch.status 2>/dev/null | /usr/bin/python3 -c '
import json, sys
sys.exit(0 if all(s["lease"]["renewals"] > 0 for s in json.load(sys.stdin)["switches"]) else 1)' \
			2>/dev/null && return 0
		if ! kill -0 "$CB_MGR_PID" 2>/dev/null; then
			cb_say "cais-manager exited: $(tail -n 3 "$WORK/manager.log")"
			return 1
		fi
		sleep 0.1
	done
	cb_say "cais-manager holds not every switch's lease within 10 s: $(tail -n 3 "$WORK/manager.log")"
	return 1
}

cb_mctl() { "$CTL" -m "$CB_MGR" -k "$WORK/manager.key" -t 2000 "$@"; }

cb_job_field() {
	cb_mctl -j job.status job="$JOB" 2>/dev/null | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
print($1)" 2>/dev/null
}
