#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration test of stripes (docs/PROTOCOL.md E8): one session over two
# cais-switch servers on the namespace testbed. Four ranks (hosts 1-4) with
# two flows each; switch A is the testbed's (the aggregator 198.18.X.254, on
# every host's port and on host 5's), switch B runs inside host 5 on its eth0
# with the aggregator address 198.18.X.253, so A forwards B's traffic as any
# L2 switch would. Both hold the same session (ports 2 per member); flow 0
# of every rank sends to A (even seqs), flow 1 to B (odd seqs).
#
#   stripes_testbed.sh [--switch PATH] [--perf PATH] [--ctl PATH] [--manager PATH]
#                      [--testbed PATH] [--keep-logs]
#                      [--bench [--bytes LIST] [--iters N] [--dtype f32|bf16]]
#
# --bench (bench/stripes.sh runs it so): instead of the cases, the same
# all-reduces through one server (--switch A, both flows to A) and through
# both (--stripes A,B), one after the other on the same testbed, and a table
# of the median times and their ratio. On this testbed B sits behind A's
# ports and every switch shares the machine's cores, so this measures the
# cost of the second server, not bandwidth that adds up.
#
# (or CAIS_SWITCH, CAIS_PERF, CAIS_CTL, CAIS_MANAGER, CAIS_TESTBED). Needs root; without it
# exits 77 (meson's skip code). Cases, every element checked (--check):
#   a. every dtype and op, 1 element to 4 MiB (and 100003 elements),
#      FIXED32 and BLOCK16: in-network; each switch counted about half of
#      the rounds, and exactly the chunk count in all
#   b. 5% loss both ways on B's stripe only (B restarted with --rx-loss 5;
#      nftables input hooks in the ranks' hosts, from B's address): in-network
#   c. B killed: the collectives go to the ring, every rank right; B
#      started again (same config): in-network again
#   d. the stripes set up by cais-manager (--fabric, docs/PROTOCOL.md E10)
#      once the static session is removed, the ranks joining a job each run
#      (two flows each): job.status lists both servers; every dtype and op
#      in-network, both servers counting rounds; B killed during a run and
#      started without sessions: every rank right, and the manager installs
#      the session there again; job.end: no session left on either
# Always cleans up: hosts, switches, testbed, DPDK's runtime directories.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"
# shellcheck source=../../scripts/lib/cases.sh
. "$ROOT/scripts/lib/cases.sh"
BENCH_BYTES=1M,4M,16M
cb_parse_args "$@"
cb_need_testbed

NAME="st$(($$ % 10000))"
PREFIX_A="cais-sta-$$"
PREFIX_B="cais-stb-$$"
RANKS=4
E=2048
S=64
PORT=47000
FLOWS=2
CTL_A="127.0.0.1:$((20000 + $$ % 20000))"
WORK=$(mktemp -d /tmp/cais-st.XXXXXX)
A_PID="" B_PID=""
# what scripts/lib/cases.sh reads and writes
# shellcheck disable=SC2034
{
	SEQ=1000 HOST_TIMEOUT=120 T0=$(date +%s.%N)
	FAILED=0 FAILURES=() HOST_PIDS=()
}

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	for p in "${HOST_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	cb_stop_pid "$B_PID"
	cb_stop_pid "$A_PID"
	rm -rf "/var/run/dpdk/$PREFIX_A" "/var/run/dpdk/$PREFIX_B" 2>/dev/null || true
	cb_finish "$rc"
}
cb_traps

cb_step "testbed: $RANKS ranks and a host for the second switch server"
bash "$TESTBED" up --name "$NAME" --hosts $((RANKS + 1)) >"$WORK/testbed.log" 2>&1 ||
	cb_fatal "testbed up failed: $(tail -n 3 "$WORK/testbed.log")"
eval "$(bash "$TESTBED" env --name "$NAME")"
AGG_A=$TB_AGG_IP
AGG_B=${TB_AGG_IP%.*}.253
NS_B=$(eval "echo \$TB_NS_$((RANKS + 1))")
# B's control endpoint: on its host's management interface, with a key
CTL_B="$(eval "echo \$TB_MGMT_IP_$((RANKS + 1))"):51734"
head -c 32 /dev/urandom >"$WORK/switch-b.key"
B_CONFIG=1 # B starts with the session (case d: without, the manager's)

cb_members "$RANKS" "$PORT" "$FLOWS"
cat >"$WORK/config.json" <<EOF
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $RANKS, "slots": $S,
    "elems_per_packet": $E, "priority": 0, "loss_hints": 1, "members": [$CB_MEMBERS]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 2, "op": "max", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 3, "op": "min", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 4, "op": "sum", "scale": 16777216, "wire": "block16"}}
]
EOF

# start_b [OPTION...]: switch B, with these options too
start_b() {
	local log=$WORK/switch-b.log
	rm -rf "/var/run/dpdk/$PREFIX_B" 2>/dev/null || true
	: >"$log"
	ip netns exec "$NS_B" "$SWITCH" --no-huge -m 512 --no-pci --no-shconf \
		--file-prefix="$PREFIX_B" -l 1 \
		"--vdev=net_af_packet0,iface=eth0,blocksz=16384,framesz=16384,framecnt=512" \
		-- --agg-ip "$AGG_B" ${B_CONFIG:+--config "$WORK/config.json"} --stats-period 0 \
		--ctl "$CTL_B" --ctl-key "$WORK/switch-b.key" --idle-sleep-us 50 "$@" >>"$log" 2>&1 &
	B_PID=$!
	for _ in $(seq 1 300); do
		grep -q "running" "$log" && return 0
		kill -0 "$B_PID" 2>/dev/null || cb_fatal "switch B exited during start"
		sleep 0.1
	done
	cb_fatal "switch B did not report 'running' within 30 s"
}

cb_step "switch A ($AGG_A, every port) and switch B ($AGG_B, inside host $((RANKS + 1)))"
cb_switch_start "$SWITCH" "$PREFIX_A" "$WORK/switch-a.log" $((RANKS + 1)) \
	--config "$WORK/config.json" --stats-period 0 --ctl "$CTL_A" --idle-sleep-us 50 ||
	cb_fatal "switch A did not start"
A_PID=$CB_SW_PID
start_b

# A switch's total rounds (stats.get's top-level "rounds")
sctl_a() { "$CTL" -s "$CTL_A" -t 2000 "$@"; }
sctl_b() { "$CTL" -s "$CTL_B" -k "$WORK/switch-b.key" -t 2000 "$@"; }
# stats.get's "rounds", or session TENANT/SESSION's; "sessions": how many it holds
rounds_of() {
	/usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
a = sys.argv[1:]
if a == ["sessions"]:
    print(len(d["sessions"]))
    sys.exit(0)
if a:
    d = next(s for s in d["sessions"] if s["tenant"] == int(a[0]) and s["session"] == int(a[1]))
print(d["rounds"])' "$@" 2>/dev/null
}
rounds_a() { sctl_a -j stats.get 2>/dev/null | rounds_of "$@"; }
rounds_b() { sctl_b -j stats.get 2>/dev/null | rounds_of "$@"; }

# cb_run's ranks; TO: where they send (both servers unless a case says otherwise)
TO=(--stripes "$AGG_A,$AGG_B")
JOB="" # case d: joining that job through the manager instead
# shellcheck disable=SC2034 # CB_CMD: cb_run's
cb_rank_cmd() {
	if [ -n "$JOB" ]; then
		CB_CMD=(ip netns exec "$(eval "echo \$TB_NS_$1")" "$PERF"
			--rank $(($1 - 1)) --world "$RANKS" --manager "$CB_MGR"
			--manager-key "$WORK/manager.key" --job "$JOB" --peers "$CB_PEERS" --slots "$S"
			--elems "$E" --threads "$FLOWS" --check --check-every 0 --retries 16)
		return
	fi
	CB_CMD=(ip netns exec "$(eval "echo \$TB_NS_$1")" "$PERF"
		--rank $(($1 - 1)) --world "$RANKS" "${TO[@]}" --peers "$CB_PEERS"
		--tenant 1 --session 1 --slots "$S" --elems "$E" --scale 1024 --threads "$FLOWS"
		--check --check-every 0 --retries 16)
}

if [ "$BENCH" -eq 1 ]; then
	case $BENCH_DTYPE in f32 | bf16) ;; *) cb_fatal "--dtype $BENCH_DTYPE: f32 or bf16" ;; esac
	case "$BENCH_ITERS" in '' | *[!0-9]*) cb_fatal "--iters '$BENCH_ITERS': a count" ;; esac
	[ "$BENCH_DTYPE" = bf16 ] && wire=(--wire block16 --b16-scale 16777216 --tensor 4) ||
		wire=(--tensor 1)
	cb_step "bench: $BENCH_DTYPE sum, $BENCH_BYTES, $BENCH_ITERS iterations: one server, then two"
	TO=(--switch "$AGG_A")
	cb_run bench-one --dtype "$BENCH_DTYPE" --op sum "${wire[@]}" --path switch \
		--iters "$BENCH_ITERS" --warmup 2 --bytes "$BENCH_BYTES" || cb_fatal "the one-server run failed"
	TO=(--stripes "$AGG_A,$AGG_B")
	cb_run bench-two --dtype "$BENCH_DTYPE" --op sum "${wire[@]}" --path switch \
		--iters "$BENCH_ITERS" --warmup 2 --bytes "$BENCH_BYTES" || cb_fatal "the two-server run failed"
	cb_all_paths bench-one switch && cb_all_paths bench-two switch || cb_fatal "not every collective in-network"
	echo
	printf '%12s %16s %16s %10s\n' bytes "one server (us)" "two (us)" one/two
	join <(cb_slowest bench-one) <(cb_slowest bench-two) | sort -n |
		awk '{ printf "%12d %16.1f %16.1f %10.2f\n", $1, $2, $3, $2 / $3 }'
	exit 0
fi

cb_step "a. every dtype and op through both stripes, FIXED32 and BLOCK16"
ra0=$(rounds_a) rb0=$(rounds_b)
[ -n "$ra0" ] && [ -n "$rb0" ] || cb_fatal "stats.get from a switch failed"
chunks=0
for dt in f32 bf16 f16 i32; do
	case $dt in f32 | i32) esz=4 ;; *) esz=2 ;; esac
	for op in sum avg max min; do
		case $op in sum | avg) t=1 ;; max) t=2 ;; min) t=3 ;; esac
		label="a-$dt-$op"
		if cb_run "$label" --dtype "$dt" --op "$op" --tensor $t --path switch --iters 2 --warmup 0 \
			--bytes "$esz,$((2049 * esz)),$((100003 * esz)),4M" && cb_all_paths "$label" 'switch'; then
			cb_say "$label: ok"
		else
			cb_case_fail "$label"
		fi
		# chunks per rank: 1 + 2 + 49 + 4M/(E x esz), each size twice
		chunks=$((chunks + 2 * (1 + 2 + (100003 + E - 1) / E + 4194304 / (E * esz))))
	done
done
for dt in f32 bf16 f16; do
	label="a-b16-$dt"
	case $dt in f32) esz=4 ;; *) esz=2 ;; esac
	cb_run "$label" --dtype "$dt" --op sum --tensor 4 --wire block16 --b16-scale 16777216 \
		--path switch --iters 2 --warmup 0 --bytes "$esz,$((100003 * esz)),1M" &&
		cb_all_paths "$label" 'switch' && cb_say "$label: ok" || cb_case_fail "$label"
done
ra=$(($(rounds_a) - ra0)) rb=$(($(rounds_b) - rb0))
cb_say "rounds: switch A $ra, switch B $rb (FIXED32 chunks of the f32..i32 runs: $chunks)"
if [ "$ra" -lt $((chunks / 3)) ] || [ "$rb" -lt $((chunks / 3)) ] || [ $((ra + rb)) -lt "$chunks" ]; then
	cb_case_fail "a: the rounds are not spread over both servers (A $ra, B $rb, at least $chunks in all)"
fi

# Loss on the way to B comes from B itself (--rx-loss): a drop in the hosts'
# output hook is no loss on the wire (sendmmsg() sends the refused message
# again in its next call)
cb_step "b. 5% loss both ways on switch B's stripe (B's --rx-loss 5; nftables input hooks)"
kill -TERM "$B_PID" 2>/dev/null
wait "$B_PID" 2>/dev/null
start_b --rx-loss 5
for ((i = 1; i <= RANKS; i++)); do
	ip netns exec "$(eval "echo \$TB_NS_$i")" nft -f - <<EOF || cb_fatal "nft failed on host $i"
table inet caisloss {
	chain in { type filter hook input priority 0; ip saddr $AGG_B numgen random mod 100 < 5 drop; }
}
EOF
done
cb_run b-loss --dtype f32 --op sum --tensor 1 --path switch --iters 5 --warmup 1 --bytes 64K,1M,4M &&
	cb_all_paths b-loss 'switch' && cb_say "b-loss: ok" || cb_case_fail "b: in-network under loss at one stripe"
lost_b=$(sctl_b -j stats.get 2>/dev/null |
	/usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["drops"]["rx_loss"])' 2>/dev/null)
[ "${lost_b:-0}" -gt 0 ] && cb_say "b: switch B dropped $lost_b frames on receipt" ||
	cb_case_fail "b: switch B's --rx-loss dropped nothing (${lost_b:-?})"
for ((i = 1; i <= RANKS; i++)); do
	ip netns exec "$(eval "echo \$TB_NS_$i")" nft delete table inet caisloss ||
		cb_fatal "nft: removing the loss rules on host $i"
done

cb_step "c. switch B killed: the ring, every rank right; B again: in-network"
kill -KILL "$B_PID" 2>/dev/null
wait "$B_PID" 2>/dev/null
B_PID=""
cb_run c-down --dtype f32 --op sum --tensor 1 --path auto --threshold 0 --iters 2 --warmup 0 \
	--bytes 1M && cb_all_paths c-down 'ring.*' && cb_say "c-down: ok (ring)" ||
	cb_case_fail "c: one stripe gone, not on the ring or not right"
start_b
cb_run c-up --dtype bf16 --op sum --tensor 1 --path switch --iters 3 --warmup 0 --bytes 1M &&
	cb_all_paths c-up 'switch' && cb_say "c-up: ok" || cb_case_fail "c: in-network again after B's restart"

cb_step "d. cais-manager sets the stripes up (--fabric): every dtype and op, B restarted, job.end"
sctl_a session.del tenant=1 session=1 >/dev/null && sctl_b session.del tenant=1 session=1 >/dev/null ||
	cb_fatal "removing the static session"
# few cores: deep queues, and CONGESTED would take tensors off the switches
sctl_a thresholds.set queue_depth=100000000 >/dev/null && sctl_b thresholds.set queue_depth=100000000 >/dev/null ||
	cb_fatal "thresholds.set"
B_CONFIG=""
cat >"$WORK/fabric.json" <<EOF
{"mode": "stripes", "switches": [
  {"name": "a", "ctl": "$CTL_A", "agg": "$AGG_A"},
  {"name": "b", "ctl": "$CTL_B", "agg": "$AGG_B", "key": "$WORK/switch-b.key"}
]}
EOF
cb_manager_start "$WORK/fabric.json" || cb_fatal "cais-manager did not start"
cb_say "cais-manager $CB_MGR: holds both switches' leases"
# a job per run: a rank that joins again starts at seq 0 (first_seq of a new
# session), which the switches hold as old in a session that carried a run
for dt in f32 bf16 f16 i32; do
	case $dt in f32 | i32) esz=4 ;; *) esz=2 ;; esac
	for op in sum avg max min; do
		label="d-$dt-$op" JOB="stripes-d-$dt-$op"
		if cb_run "$label" --dtype "$dt" --op "$op" --tensor 1 --path switch --iters 2 \
			--warmup 0 --bytes "$esz,$((2049 * esz)),1M" && cb_all_paths "$label" 'switch'; then
			tenant=$(cb_job_field 'd["tenant"]') session=$(cb_job_field 'd["session"]')
			ra=$(rounds_a "$tenant" "$session") rb=$(rounds_b "$tenant" "$session")
			# the chunks of 2 iterations of 1 element, 2049 and 1 MiB: each one round
			want=$((2 * (1 + 2 + 1048576 / (E * esz))))
			cb_say "$label: ok (session $tenant/$session: rounds A $ra, B $rb of $want)"
			[ "${ra:-0}" -gt 0 ] && [ "${rb:-0}" -gt 0 ] && [ $((ra + rb)) -eq "$want" ] ||
				cb_case_fail "$label: rounds A ${ra:-?}, B ${rb:-?}: not both servers, or not $want in all"
		else
			cb_case_fail "$label"
		fi
		if [ "$label" = d-f32-sum ]; then
			st=$(cb_job_field '",".join(d["stripes"])')
			cb_say "job $JOB: stripes $st"
			[ "$st" = "$AGG_A:51733,$AGG_B:51733" ] ||
				cb_case_fail "d: job.status: stripes '$st', not A's and B's aggregators"
		fi
		cb_mctl job.end job="$JOB" >/dev/null || cb_case_fail "d: job.end $JOB refused"
	done
done
[ "$(rounds_a sessions)" = 0 ] && [ "$(rounds_b sessions)" = 0 ] ||
	cb_case_fail "d: sessions left after job.end (A $(rounds_a sessions), B $(rounds_b sessions))"
cb_say "16 jobs ended: no session left on A or B"

label=d-restart-b JOB=stripes-d-restart
before=$(grep -c 'installed again' "$WORK/manager.log")
# B is killed once it holds the job's session (its ranks are sending), not
# after a fixed time: a faster run could end before it
(
	for _ in $(seq 1 200); do
		[ "$(rounds_b sessions)" = 1 ] && break
		sleep 0.1
	done
	sleep 0.3
	kill -KILL "$B_PID"
	sleep 0.5
	start_b
	sctl_b thresholds.set queue_depth=100000000 >/dev/null
) >"$WORK/$label.log" 2>&1 &
rpid=$!
cb_run "$label" --dtype f32 --op sum --tensor 1 --path auto --threshold 0 --iters 100 --warmup 0 \
	--bytes 1M && cb_say "$label: ok, every rank right ($(awk '/^ +[0-9]/ { print $5 }' "$WORK/$label.h1.log"))" ||
	cb_case_fail "d: B restarted during a managed run: not every rank right"
wait "$rpid"
B_PID=$(pgrep -f -- "--file-prefix=$PREFIX_B" | head -n 1)
[ -n "$B_PID" ] || cb_fatal "B did not come back: $(cat "$WORK/$label.log")"
# the restart may fall at the run's end (its last iterations then go to the
# ring on REJECT, before the manager reinstalls): a short run after the
# manager logs the reinstall
for _ in $(seq 1 150); do
	[ "$(grep -c 'installed again' "$WORK/manager.log")" -gt "$before" ] && break
	sleep 0.1
done
cb_run d-after-b --dtype f32 --op sum --tensor 1 --path auto --threshold 0 --iters 3 --warmup 0 \
	--bytes 1M || cb_case_fail "d: the run after B's restart: not every rank right"
tenant=$(cb_job_field 'd["tenant"]') session=$(cb_job_field 'd["session"]')
r=$(rounds_b "$tenant" "$session")
cb_say "B after its restart: the job's session back on it (rounds $r since);" \
	"$(($(grep -c 'installed again' "$WORK/manager.log") - before)) reinstall(s) logged"
[ -n "$r" ] && [ "$r" -gt 0 ] ||
	cb_case_fail "d: B restarted: the manager did not install the session again (rounds '$r')"
cb_mctl job.end job="$JOB" >/dev/null || cb_case_fail "d: job.end $JOB refused"
[ "$(rounds_a sessions)" = 0 ] && [ "$(rounds_b sessions)" = 0 ] ||
	cb_case_fail "d: sessions left after job.end (A $(rounds_a sessions), B $(rounds_b sessions))"
JOB=""

cb_summary "$PROG"
