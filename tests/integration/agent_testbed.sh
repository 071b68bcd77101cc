#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration test of the host agent (libcais, through cais-allreduce-perf)
# with cais-switch on the namespace testbed (scripts/testbed.sh): four hosts,
# the switch on their veth peers (net_af_packet), one cais-allreduce-perf
# --check per host, all at once; every element of every collective checked,
# every rank must exit 0 within a bound (each host runs under `timeout`).
#
#   agent_testbed.sh [--switch PATH] [--perf PATH] [--testbed PATH] [--keep-logs]
#
# (or the environment: CAIS_SWITCH, CAIS_PERF, CAIS_TESTBED). Needs root;
# without it exits 77 (meson's skip code). The switch holds one session
# (tenant 1, session 1: the 4 hosts, S 64, E 2048) with tensors 1 (sum; also
# serves avg, which the switch aggregates as sum), 2 (max) and 3 (min), and
# 4, 5, 6 the same in BLOCK16 (docs/PROTOCOL.md E4). Seqs continue from run
# to run (--first-seq), as the switch keeps its slots.
#   a. in-network, --path auto --threshold 0: sweeps from 1 element to
#      16 MiB (f32 sum, bf16 avg, f16 max, i32 min) and, for every dtype and
#      op, 1, 2047, 2048, 2049 and 100003 elements; every float dtype and op
#      again in BLOCK16; every collective must have gone through the switch;
#      then the library's own sampled error check (--check-every 1) on f32
#      and f16 sums must not turn the tensor off; and BLOCK16 sent to a
#      FIXED32 tensor: BAD_DTYPE, the agent goes on in FIXED32, in-network
#   b. the same with 5% loss both ways on every host: the switch drops 5% of
#      what it receives (--rx-loss 5, restarted with it), each host 5% of what
#      it receives (nftables input hook). Not in the hosts' output: a frame
#      that sendmmsg() cannot send is sent again by the next call, and TCP
#      takes a local drop as a failed send, retried after 200 ms
#   c. cais-switch SIGKILLed about 2 s into a stream of 200 x 1 MiB and
#      restarted (same config) about 1 s later; then a short run that must be
#      in-network again
#   d. one host's DATA dropped silently (nftables egress hook on its eth0):
#      every collective falls back to the ring, every rank right;
#      d2. the same DATA dropped by an output-hook rule (the sender's sendmsg
#      gets EPERM): the same outcome expected
#   e. one host's RESULTs dropped (input rule) for ~3 s, then let through
#   f. a tensor the switch does not have: REJECT, immediate fallback (with
#      --retries 50 it must still be fast; path ring(REJECT)); f2. the same
#      with --path switch: every rank fails with the library's error, exit 1
#   g. one rank slower than the others (--delay-ms 150 on one host)
#   h. SIGINT: the switch stops cleanly, final counters
# A failing case is reported and the next one still runs (seqs skip ahead);
# the exit status is 1 when any case failed. Always cleans up: the hosts,
# the switch, the testbed (the nftables tables go with the namespaces),
# DPDK's runtime directory.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"
SWITCH=${CAIS_SWITCH:-$ROOT/build/dataplane/cais-switch}
PERF=${CAIS_PERF:-$ROOT/build/agent/cais-allreduce-perf}
TESTBED=${CAIS_TESTBED:-$ROOT/scripts/testbed.sh}
KEEP_LOGS=0

while [ $# -gt 0 ]; do
	case "$1" in
	--switch) SWITCH=$2; shift 2 ;;
	--perf) PERF=$2; shift 2 ;;
	--testbed) TESTBED=$2; shift 2 ;;
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

cb_need_root_and "network namespaces, veth, raw sockets for af_packet" ip ethtool nft timeout awk
[ -x "$SWITCH" ] || cb_skip "no cais-switch at $SWITCH (is libdpdk installed? give --switch)"
[ -x "$PERF" ] || cb_skip "no cais-allreduce-perf at $PERF (give --perf)"
[ -x "$TESTBED" ] || [ -f "$TESTBED" ] || cb_skip "no testbed script at $TESTBED"
ip netns list >/dev/null 2>&1 || cb_skip "network namespaces do not work here"

# ---- constants ----
NAME="ag$(($$ % 10000))"
PREFIX="cais-ag-$$"
HOSTS=4
MTU=9000
E=2048
S=64
PORT=47000        # every rank's UDP (switch) and TCP (ring) port, on its own address
SEQ=1000          # the next seq of the session; every run continues it
HOST_TIMEOUT=120  # the bound on one run of one host (s)
# a and b: retransmissions before a chunk counts as silent (the library's 8 span
# ~70 ms; a loaded 2-core machine can stall that long and a must stay in-network)
RETRIES=16
T0=$(date +%s.%N)

WORK=$(mktemp -d /tmp/cais-ag.XXXXXX)
SWLOG=$WORK/switch.log
SW_PID=""
HOST_PIDS=()
FAILED=0
FAILURES=()
declare -A CASE_TIME

# ---- output ----
now() { date +%s.%N; }
elapsed() { awk -v t0="$T0" -v t1="$(now)" 'BEGIN { printf "%6.1f", t1 - t0 }'; }
say() { echo "[$(elapsed) s] $*"; }
step() {
	echo
	say "=== $*"
}
# A case failed: say why, keep going (the summary at the end lists it).
case_fail() {
	FAILED=1
	FAILURES+=("$*")
	say "FAIL: $*"
}
# Set-up failed: nothing after it can run.
fatal() {
	FAILED=1
	echo
	say "FATAL: $*"
	if [ -s "$SWLOG" ]; then
		echo "---- switch log (last 30 lines): $SWLOG"
		tail -n 30 "$SWLOG"
		echo "----"
	fi
	exit 1
}

# ---- cleanup: always ----
cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	for p in "${HOST_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	if [ -n "$SW_PID" ] && kill -0 "$SW_PID" 2>/dev/null; then
		kill -INT "$SW_PID" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$SW_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$SW_PID" 2>/dev/null || true
	fi
	for p in "${HOST_PIDS[@]}" $SW_PID; do
		wait "$p" 2>/dev/null || true
	done
	# removes the namespaces, with the nftables tables in them
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

# ---- helpers ----
ns() { eval "echo \$TB_NS_$1"; }
hip() { eval "echo \$TB_IP_$1"; }
hmac() { eval "echo \$TB_MAC_$1"; }

write_config() { # file
	local i members="" sep=""
	for ((i = 1; i <= HOSTS; i++)); do
		members+="$sep{\"rank\": $((i - 1)), \"mac\": \"$(hmac "$i")\", \"ip\": \"$(hip "$i")\", \"port\": $PORT}"
		sep=", "
	done
	cat >"$1" <<EOF
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $HOSTS, "slots": $S,
    "elems_per_packet": $E, "priority": 0, "loss_hints": 1, "members": [$members]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 2, "op": "max", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 3, "op": "min", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 4, "op": "sum", "scale": 16777216, "wire": "block16"}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 5, "op": "max", "scale": 16777216, "wire": "block16"}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 6, "op": "min", "scale": 16777216, "wire": "block16"}}
]
EOF
}

# start_switch [OPTION...]: with the testbed's config, and these options
start_switch() {
	cb_switch_start "$SWITCH" "$PREFIX" "$SWLOG" "$HOSTS" --config "$WORK/config.json" \
		--stats-period 0 "$@" || fatal "cais-switch did not start"
	SW_PID=$CB_SW_PID
}

# The switch stopped (SIGTERM: its log ends with its counters, kept as
# $SWLOG.prev) and started again with these options.
restart_switch() {
	kill -TERM "$SW_PID" 2>/dev/null
	wait "$SW_PID" 2>/dev/null
	cp "$SWLOG" "$SWLOG.prev"
	start_switch "$@"
}

# The peers list: every host's data address, rank order.
peers() {
	local i out=""
	for ((i = 1; i <= HOSTS; i++)); do
		out+="${out:+,}$(hip "$i"):$PORT"
	done
	echo "$out"
}

# A field of a host's summary line: field LOG KEY
field() { grep -m1 '^# summary ' "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# Run cais-allreduce-perf on every host at once; every one must exit with
# EXPECT_RC (default 0) within HOST_TIMEOUT.
#   run_all LABEL [--host-args H ARGS...] -- COMMON_ARGS...
# (ARGS go to host H only.) run_start starts them, run_wait waits and sets
# RUN_S (wall time), RUN_OK (1 when every host did as expected), and
# advances SEQ past the run (the largest next_seq of the hosts, and well
# beyond when a host stopped early).
EXPECT_RC=0
RUN_PIDS=()
RUN_LOGS=()
run_start() {
	local label=$1 i hostarg=() hosthost=0
	shift
	if [ "${1:-}" = "--host-args" ]; then
		hosthost=$2
		shift 2
		while [ "$1" != "--" ]; do
			hostarg+=("$1")
			shift
		done
	fi
	[ "${1:-}" = "--" ] && shift
	RUN_PIDS=()
	RUN_LOGS=()
	RUN_T0=$(now)
	for ((i = 1; i <= HOSTS; i++)); do
		local log="$WORK/$label.h$i.log" extra=()
		[ "$i" -eq "$hosthost" ] && extra=("${hostarg[@]}")
		timeout -k 5 "$HOST_TIMEOUT" ip netns exec "$(ns "$i")" "$PERF" --rank $((i - 1)) \
			--world "$HOSTS" --switch "$TB_AGG_IP" --peers "$(peers)" --tenant 1 --session 1 \
			--slots $S --elems $E --scale 1024 --first-seq "$SEQ" "$@" "${extra[@]}" \
			>"$log" 2>&1 &
		RUN_PIDS+=($!)
		RUN_LOGS+=("$log")
		HOST_PIDS+=($!)
	done
}

run_wait() {
	local i rc bad=0 max_seq=0 s p
	for ((i = 0; i < HOSTS; i++)); do
		wait "${RUN_PIDS[$i]}"
		rc=$?
		if [ $rc -ne "$EXPECT_RC" ]; then
			bad=1
			echo "---- h$((i + 1)) exited $rc (expected $EXPECT_RC): ${RUN_LOGS[$i]}"
			if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
				echo "     (killed by timeout after $HOST_TIMEOUT s: a hang)"
			fi
			grep -v '^#' "${RUN_LOGS[$i]}" | head -n 12
		fi
		s=$(field "${RUN_LOGS[$i]}" next_seq)
		[ -n "$s" ] && [ "$s" -gt "$max_seq" ] && max_seq=$s
	done
	HOST_PIDS=()
	RUN_S=$(awk -v a="$RUN_T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
	if [ $bad -eq 1 ] || [ "$max_seq" -eq 0 ]; then
		SEQ=$(((max_seq > SEQ ? max_seq : SEQ) + 100000))
	else
		SEQ=$max_seq
	fi
	for ((i = 0; i < HOSTS; i++)); do
		p=$(grep -m1 '^# summary ' "${RUN_LOGS[$i]}" 2>/dev/null |
			sed 's/^# summary //; s/ dtype=[^ ]*//; s/ op=[^ ]*//; s/ retx=.*wall_s=/ wall_s=/')
		echo "      h$((i + 1)): ${p:-(no summary)}"
	done
	RUN_OK=$((1 - bad))
	kill -0 "$SW_PID" 2>/dev/null || fatal "cais-switch died"
	return 0
}

run_all() {
	run_start "$@"
	run_wait
}

# Every host's summary has KEY=VALUE.
all_have() { # label key value
	local i v
	for ((i = 1; i <= HOSTS; i++)); do
		v=$(field "$WORK/$1.h$i.log" "$2")
		[ "$v" = "$3" ] || return 1
	done
}

# Every host's per-size lines show path PATH (the 5th column).
all_paths() { # label path-regex
	local i
	for ((i = 1; i <= HOSTS; i++)); do
		awk -v re="^($2)\$" '/^ +[0-9]/ && $5 !~ re { bad = 1 } END { exit bad }' \
			"$WORK/$1.h$i.log" || return 1
	done
}

case_start() { CASE_T0=$(now); }
case_end() { CASE_TIME[$1]=$(awk -v a="$CASE_T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'); }

esz() { case $1 in f32 | i32) echo 4 ;; *) echo 2 ;; esac }
tensor_of() { case $1 in sum | avg) echo 1 ;; max) echo 2 ;; min) echo 3 ;; esac }
b16_tensor_of() { echo $(($(tensor_of "$1") + 3)); }

# The in-network runs of a and b: label prefix, then extra arguments.
innet_suite() { # prefix
	local pre=$1 dt op e sizes bad=0
	# every doubling from 1 element to 16 MiB, one dtype per op
	for pair in f32:sum bf16:avg f16:max i32:min; do
		dt=${pair%:*} op=${pair#*:}
		e=$(esz "$dt")
		say "$pre-sweep-$dt-$op: $e B .. 16 MiB, every doubling, $dt $op, tensor $(tensor_of "$op"), seq $SEQ"
		run_all "$pre-sweep-$dt-$op" -- --dtype "$dt" --op "$op" --tensor "$(tensor_of "$op")" \
			--min-bytes "$e" --max-bytes 16M --iters 2 --warmup 1 --path auto --threshold 0 \
			--check --check-every 0 --retries $RETRIES
		say "    ${RUN_S} s"
		check_innet "$pre-sweep-$dt-$op" || bad=1
	done
	# sizes around the packet (E = 2048 elements), every dtype and op
	for dt in f32 bf16 f16 i32; do
		e=$(esz "$dt")
		sizes="$e,$((2047 * e)),$((2048 * e)),$((2049 * e)),$((100003 * e))"
		for op in sum avg max min; do
			local label="$pre-odd-$dt-$op" verdict=ok
			run_all "$label" -- --dtype "$dt" --op "$op" --tensor "$(tensor_of "$op")" \
				--bytes "$sizes" --iters 2 --warmup 1 --path auto --threshold 0 --check \
				--check-every 0 --retries $RETRIES >"$WORK/$label.out"
			if ! check_innet "$label" >>"$WORK/$label.out"; then
				bad=1
				verdict=FAILED
				cat "$WORK/$label.out"
			fi
			say "$label: 1, 2047, 2048, 2049, 100003 elements: $verdict (${RUN_S} s;" \
				"$(field "$WORK/$label.h1.log" checked) elements checked per host)"
		done
	done
	# BLOCK16: every float dtype and op, the same sizes, tensors 4..6 (a block16 wire)
	for dt in f32 bf16 f16; do
		e=$(esz "$dt")
		sizes="$e,$((31 * e)),$((33 * e)),$((2049 * e)),$((100003 * e))"
		for op in sum avg max min; do
			local label="$pre-b16-$dt-$op" verdict=ok
			run_all "$label" -- --dtype "$dt" --op "$op" --tensor "$(b16_tensor_of "$op")" \
				--wire block16 --bytes "$sizes" --iters 2 --warmup 1 --path auto \
				--threshold 0 --check --check-every 0 --retries $RETRIES >"$WORK/$label.out"
			if ! check_innet "$label" >>"$WORK/$label.out"; then
				bad=1
				verdict=FAILED
				cat "$WORK/$label.out"
			fi
			say "$label: block16, 1, 31, 33, 2049, 100003 elements: $verdict (${RUN_S} s)"
		done
	done
	# the library's own sampled error check (a ring reference of every in-network
	# collective here), where its 1e-3 alarm has room: 100003 elements, f32 and f16
	for dt in f32 f16; do
		local label="$pre-sampled-$dt"
		run_all "$label" -- --dtype "$dt" --op sum --tensor 1 --bytes $((100003 * $(esz "$dt"))) \
			--iters 4 --warmup 0 --path auto --threshold 0 --check --check-every 1 \
			--retries $RETRIES >"$WORK/$label.out"
		if ! check_innet "$label" >>"$WORK/$label.out"; then
			bad=1
			cat "$WORK/$label.out"
		fi
		say "$label: 4 x 100003 elements, every one also checked by the library against a ring:" \
			"$(grep -o 'error checks [0-9]* max [0-9.e+-]*' "$WORK/$label.h1.log")," \
			"$(grep -o 'tensors disabled [0-9]*' "$WORK/$label.h1.log")"
	done
	return $bad
}

# A run of a/b: every host passed, and (a only) every collective in-network.
REQUIRE_SWITCH=1
check_innet() { # label
	if [ "$RUN_OK" -ne 1 ] || ! all_have "$1" result PASS; then
		case_fail "$1: a host failed"
		return 1
	fi
	if [ "$REQUIRE_SWITCH" -eq 1 ] && ! { all_have "$1" ring 0 && all_paths "$1" switch; }; then
		case_fail "$1: a collective did not go in-network (path must be switch)"
		return 1
	fi
	return 0
}

nft_host() { # host: nft -f - in that host
	ip netns exec "$(ns "$1")" nft -f -
}

# ====================================================================
step "testbed: $HOSTS hosts, MTU $MTU (name $NAME)"
up_ok=0
base=$(($$ % 250))
for attempt in 0 1 2 3 4; do
	net=$(((base + attempt * 47) % 250 + 1))
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
say "$(cat "$WORK/testbed.log")"
write_config "$WORK/config.json"
start_switch
say "cais-switch running (pid $SW_PID): session 1/1 (n $HOSTS, S $S, E $E), tensors 1 sum, 2 max, 3 min;" \
	"ranks on $(peers)"

# ====================================================================
step "a. in-network: 1 element .. 16 MiB, every dtype and op, --path auto --threshold 0"
case_start
innet_suite a
# BLOCK16 to a FIXED32 tensor: REJECT BAD_DTYPE, then FIXED32 from the first
# collective on, in-network, once per rank
run_all a-b16-refused -- --dtype bf16 --op sum --tensor 1 --wire block16 --bytes 1M --iters 3 \
	--warmup 1 --path switch --check --check-every 0 --retries $RETRIES
if check_innet a-b16-refused; then
	n=0
	for ((i = 1; i <= HOSTS; i++)); do
		grep -q 'wire fallbacks 1,' "$WORK/a-b16-refused.h$i.log" && n=$((n + 1))
	done
	[ $n -eq $HOSTS ] || case_fail "a-b16-refused: $n of $HOSTS hosts counted one wire fallback"
	say "a-b16-refused: BLOCK16 refused by a FIXED32 tensor: in-network as FIXED32," \
		"wire fallback counted on $n of $HOSTS hosts"
fi
case_end a

# ====================================================================
step "b. the same with 5% loss both ways on every host (cais-switch --rx-loss 5; nftables input hooks)"
restart_switch --rx-loss 5
for ((i = 1; i <= HOSTS; i++)); do
	nft_host "$i" <<'EOF' || fatal "nft: the loss rules on h$i"
table inet cais_loss {
	chain in { type filter hook input priority 0; numgen random mod 100 < 5 drop; }
}
EOF
done
case_start
REQUIRE_SWITCH=0 # lost rounds may legitimately end on the ring; the results must be right
innet_suite b
REQUIRE_SWITCH=1
for ((i = 1; i <= HOSTS; i++)); do
	ip netns exec "$(ns "$i")" nft delete table inet cais_loss || fatal "nft: removing the loss rules on h$i"
done
restart_switch
lost=$(grep -o 'rx_loss [0-9]*' "$SWLOG.prev" | awk '{ print $2 }')
[ "${lost:-0}" -gt 0 ] || case_fail "b: the switch's --rx-loss dropped nothing (${lost:-?})"
# the session has loss_hints: a rank whose DATA was lost is told (E11)
nacks=$(grep -o 'NACKs [0-9]*' "$SWLOG.prev" | tail -n 1 | awk '{ print $2 }')
[ "${nacks:-0}" -gt 0 ] || case_fail "b: no NACK for a lost DATA (${nacks:-?})"
# ... and the ranks count the NACKs they took for chunks in flight (cais_metrics.nacks)
nacked=0
for f in "$WORK"/b-*.h*.log; do
	n=$(grep -o ' nacked [0-9]*' "$f" | tail -n 1 | awk '{ print $2 }')
	nacked=$((nacked + ${n:-0}))
done
[ "$nacked" -gt 0 ] || case_fail "b: the ranks counted no NACK (cais_metrics.nacks)"
# a rank that hears no RESULT for a while asks (E12): the ranks sent QUERYs, the switch took them
queried=0
for f in "$WORK"/b-*.h*.log; do
	n=$(grep -o ' queries [0-9]*' "$f" | tail -n 1 | awk '{ print $2 }')
	queried=$((queried + ${n:-0}))
done
taken=$(grep -o 'QUERYs [0-9]*' "$SWLOG.prev" | tail -n 1 | awk '{ print $2 }')
[ "$queried" -gt 0 ] || case_fail "b: the ranks sent no QUERY (cais_metrics.queries)"
[ "${taken:-0}" -gt 0 ] || case_fail "b: the switch took no QUERY (${taken:-?})"
in_net=0 total=0
for f in "$WORK"/b-*.h1.log; do
	in_net=$((in_net + $(field "$f" in_network))) total=$((total + $(field "$f" collectives)))
done
say "b: $in_net of $total collectives of rank 0 in-network under 5% loss; the switch dropped $lost frames on receipt and sent $nacks NACKs; the ranks took $nacked for chunks in flight, sent $queried QUERYs, of which the switch took $taken"
case_end b

# ====================================================================
step "c. cais-switch SIGKILLed ~2 s into 200 x 1 MiB all-reduces, restarted ~1 s later"
case_start
say "c-stream: 200 x 1 MiB, f32 sum, seq $SEQ (the switch dies at ~2 s)"
run_start c-stream -- --dtype f32 --op sum --tensor 1 --bytes 1M --iters 200 --warmup 0 \
	--path auto --threshold 0 --check --check-every 0 --quiet
sleep 2
kill -KILL "$SW_PID"
wait "$SW_PID" 2>/dev/null
KILLED_AT=$(awk -v a="$RUN_T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
running=0
for p in "${RUN_PIDS[@]}"; do
	kill -0 "$p" 2>/dev/null && running=$((running + 1))
done
say "c: cais-switch killed (SIGKILL) at ${KILLED_AT} s into the stream, $running of $HOSTS hosts still running"
sleep 1
start_switch
say "c: cais-switch restarted (pid $SW_PID)"
run_wait
if [ "$RUN_OK" -eq 1 ] && all_have c-stream result PASS; then
	say "c-stream: every rank right in ${RUN_S} s: rank 0 $(field "$WORK/c-stream.h1.log" in_network) in-network," \
		"$(field "$WORK/c-stream.h1.log" ring) on the ring ($(field "$WORK/c-stream.h1.log" fallbacks))"
	[ "$running" -eq "$HOSTS" ] ||
		case_fail "c: the stream ended before the switch was killed: make it longer"
else
	case_fail "c-stream: a host failed across the switch restart"
fi
say "c-after: 5 x 1 MiB on the restarted switch, seq $SEQ: must be in-network again"
run_all c-after -- --dtype f32 --op sum --tensor 1 --bytes 1M --iters 5 --warmup 0 --path auto \
	--threshold 0 --check --check-every 0
check_innet c-after && say "c-after: in-network again (${RUN_S} s)"
case_end c

# ====================================================================
step "d. h2's DATA dropped silently (nftables egress hook on h2's eth0): the ring"
case_start
if nft_host 2 <<EOF; then
table netdev cais_drop_data {
	chain egress { type filter hook egress device eth0 priority 0; ip daddr $TB_AGG_IP udp dport 51733 counter drop; }
}
EOF
	say "d: sizes 1 element, 100003 elements, 1 MiB, 4 MiB; 3 iterations each, seq $SEQ"
	run_all d-silent -- --dtype f32 --op sum --tensor 1 --bytes 4,400012,1M,4M --iters 2 \
		--warmup 1 --path auto --threshold 0 --check --check-every 0 --timeout-ms 20000 --quiet
	if [ "$RUN_OK" -eq 1 ] && all_have d-silent result PASS && all_have d-silent in_network 0; then
		say "d-silent: every rank right, every collective on the ring" \
			"($(field "$WORK/d-silent.h1.log" fallbacks)) in ${RUN_S} s;" \
			"$(ip netns exec "$(ns 2)" nft list table netdev cais_drop_data | grep -o 'packets [0-9]*') dropped"
	else
		case_fail "d-silent: a host failed, or a collective claims the switch while h2's DATA never arrived"
	fi
	ip netns exec "$(ns 2)" nft delete table netdev cais_drop_data
else
	case_fail "d-silent: nft refused the netdev egress hook (it needs Linux 5.16 or later)"
fi
step "d2. h2's DATA dropped by an output-hook rule (sendmsg gets EPERM): the ring"
nft_host 2 <<EOF || fatal "nft: the output rule on h2"
table inet cais_drop_data {
	chain out { type filter hook output priority 0; ip daddr $TB_AGG_IP udp dport 51733 counter drop; }
}
EOF
run_all d-eperm -- --dtype f32 --op sum --tensor 1 --bytes 4,1M --iters 2 --warmup 1 --path auto \
	--threshold 0 --check --check-every 0 --timeout-ms 10000 --quiet
if [ "$RUN_OK" -eq 1 ] && all_have d-eperm result PASS; then
	say "d-eperm: every rank right in ${RUN_S} s ($(field "$WORK/d-eperm.h1.log" fallbacks))"
else
	case_fail "d-eperm: with h2's DATA refused by its own firewall (EPERM) the ranks did not complete"
fi
ip netns exec "$(ns 2)" nft delete table inet cais_drop_data
case_end d

# ====================================================================
step "e. h3's RESULTs dropped (input rule) for ~3 s, then let through"
case_start
nft_host 3 <<EOF || fatal "nft: the input rule on h3"
table inet cais_drop_results {
	chain in { type filter hook input priority 0; ip saddr $TB_AGG_IP udp sport 51733 counter drop; }
}
EOF
(
	sleep 3
	ip netns exec "$(ns 3)" nft list table inet cais_drop_results | grep -o 'packets [0-9]*' >"$WORK/e.dropped"
	ip netns exec "$(ns 3)" nft delete table inet cais_drop_results
) &
LIFTER=$!
say "e: 100 x 1 MiB, f32 sum, seq $SEQ (the rule goes after 3 s)"
run_all e-results -- --dtype f32 --op sum --tensor 1 --bytes 1M --iters 100 --warmup 0 --path auto \
	--threshold 0 --check --check-every 0 --quiet
wait $LIFTER
if [ "$(awk -v a="$RUN_S" 'BEGIN { print (a < 3.0) }')" -eq 1 ]; then
	case_fail "e: the stream ended (${RUN_S} s) before the rule was lifted: make it longer"
elif [ "$RUN_OK" -eq 1 ] && all_have e-results result PASS; then
	say "e: every rank right in ${RUN_S} s; h3 fetched $(field "$WORK/e-results.h3.log" peer_chunks) chunk" \
		"results from its peers, $(cat "$WORK/e.dropped" 2>/dev/null) RESULT(s) dropped;" \
		"rank 0: $(field "$WORK/e-results.h1.log" in_network) in-network, $(field "$WORK/e-results.h1.log" ring) ring"
else
	case_fail "e: a host failed while h3's RESULTs were dropped"
fi
case_end e

# ====================================================================
step "f. a tensor the switch does not have (99): REJECT, immediate fallback"
case_start
run_all f-reject -- --dtype f32 --op sum --tensor 99 --retries 50 --bytes 4,1M --iters 10 \
	--warmup 0 --path auto --threshold 0 --check --check-every 0
# with 50 retries, waiting for the timers would take ~1 s per collective (500 us doubling
# to 20 ms): 20 collectives must end well before that
slow=$(awk '/^ +[0-9]/ && $6 + 0 > 200000 { print $1 " B: " $6 " us" }' "$WORK/f-reject.h1.log")
if [ "$RUN_OK" -eq 1 ] && all_have f-reject result PASS && all_paths f-reject 'ring[(]REJECT[)]' &&
	[ -z "$slow" ] && [ "$(awk -v a="$RUN_S" 'BEGIN { print (a < 8) }')" -eq 1 ]; then
	say "f-reject: 20 collectives on the ring (REJECT) in ${RUN_S} s, medians:" \
		"$(awk '/^ +[0-9]/ { printf "%s B %s us; ", $1, $6 }' "$WORK/f-reject.h1.log")"
else
	grep -v '^#   ' "$WORK/f-reject.h1.log"
	case_fail "f-reject: not an immediate REJECT fallback (run ${RUN_S} s${slow:+, slow: $slow})"
fi
step "f2. the same with --path switch: every rank fails (exit 1) with the library's error"
EXPECT_RC=1
run_all f-switch -- --dtype f32 --op sum --tensor 99 --retries 50 --bytes 1M --iters 2 \
	--warmup 0 --path switch --check --check-every 0 --timeout-ms 10000 --quiet
EXPECT_RC=0
if [ "$RUN_OK" -eq 1 ] && grep -q "cannot serve" "$WORK"/f-switch.h1.log; then
	say "f-switch: every rank exit 1 in ${RUN_S} s: $(grep -m1 'failed' "$WORK/f-switch.h1.log")"
else
	case_fail "f-switch: --path switch on a REJECTed tensor must fail on every rank (exit 1)"
fi
case_end f

# ====================================================================
step "g. one slow rank: h4 sleeps 150 ms before each collective"
case_start
run_all g-slow --host-args 4 --delay-ms 150 -- --dtype f32 --op sum --tensor 1 --bytes 4,1M \
	--iters 5 --warmup 1 --path auto --threshold 0 --check --check-every 0
# the ranks that wait for h4 send no DATA twice for it: the QUERY is their
# probe (docs/PROTOCOL.md E12); a flow's first collective, before its first
# RESULT says that the session answers QUERYs, may probe a few times
G_RETX=$(for i in 1 2 3; do field "$WORK/g-slow.h$i.log" retx; done | paste -sd' ')
G_RETX_SUM=$(echo "$G_RETX" | awk '{ for (i = 1; i <= NF; i++) s += $i } END { print s + 0 }')
if [ "$RUN_OK" -eq 1 ] && all_have g-slow result PASS && [ "$G_RETX_SUM" -le 30 ]; then
	say "g: every rank right in ${RUN_S} s; rank 0's medians (they include waiting for h4):" \
		"$(awk '/^ +[0-9]/ { printf "%s B %s us %s; ", $1, $6, $5 }' "$WORK/g-slow.h1.log")" \
		"h4's: $(awk '/^ +[0-9]/ { printf "%s B %s us; ", $1, $6 }' "$WORK/g-slow.h4.log")" \
		"DATA sent again by h1-h3: $G_RETX"
elif [ "$RUN_OK" -eq 1 ] && all_have g-slow result PASS; then
	case_fail "g: h1-h3 sent $G_RETX DATA again while they waited for h4 (at most 30 in all)"
else
	case_fail "g: a host failed with one slow rank"
fi
case_end g

# ====================================================================
step "h. SIGINT: the switch stops cleanly"
kill -INT "$SW_PID"
for _ in $(seq 1 100); do
	kill -0 "$SW_PID" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$SW_PID" 2>/dev/null; then
	kill -KILL "$SW_PID"
	case_fail "h: cais-switch did not stop within 10 s of SIGINT"
fi
wait "$SW_PID"
SW_RC=$?
SW_PID=""
[ "$SW_RC" -eq 0 ] || case_fail "h: cais-switch exited $SW_RC after SIGINT"
grep -m1 '^  session 1/1 ' "$SWLOG" || true
grep -m1 '^  REJECTs sent:' "$SWLOG" || true

# ====================================================================
echo
say "case times (s): a ${CASE_TIME[a]:-?}, b ${CASE_TIME[b]:-?}, c ${CASE_TIME[c]:-?}," \
	"d ${CASE_TIME[d]:-?}, e ${CASE_TIME[e]:-?}, f ${CASE_TIME[f]:-?}, g ${CASE_TIME[g]:-?}"
if [ "$FAILED" -ne 0 ]; then
	say "FAIL: $PROG: ${#FAILURES[@]} failure(s):"
	for f in "${FAILURES[@]}"; do
		echo "    - $f"
	done
	exit 1
fi
say "PASS: $PROG"
