#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration test of the hierarchy (docs/PROTOCOL.md E9): two leaf
# cais-switches of 4 ranks each under a spine cais-switch, on the namespace
# testbed. The testbed's switch is the fabric (plain L2 here) between 11
# hosts: hosts 1-8 are the ranks, hosts 9, 10 and 11 run leaf A
# (198.18.X.251, ranks 0-3), leaf B (.252, ranks 4-7) and the spine (.253),
# each on its host's eth0, as aggregation servers beside a ToR switch. The
# leaves' sessions carry an uplink (B's ranks start at 4: first_rank); the
# spine's session has the two leaves as its members. Each rank sends to its
# leaf; the ring runs over the fabric, whichever aggregator is down.
#
#   tree_testbed.sh [--switch PATH] [--perf PATH] [--ctl PATH] [--manager PATH]
#                   [--testbed PATH] [--keep-logs]
#                   [--bench [--bytes LIST] [--iters N] [--dtype f32|bf16]]
#
# --bench (bench/tree.sh runs it so): instead of the cases, the same
# all-reduces through the spine alone (a flat session of the 8 ranks on it,
# reached through the leaves as plain L2 switches) and through the tree,
# one after the other on the same testbed, and a table of the median times
# and their ratio: what the second level costs. Every switch shares the
# machine's cores.
#
# (or CAIS_SWITCH, CAIS_PERF, CAIS_CTL, CAIS_MANAGER, CAIS_TESTBED). Needs root; without it
# exits 77 (meson's skip code). Cases, every element checked (--check):
#   a. every dtype and op, FIXED32 and BLOCK16, 1 element to 1 MiB: in-network;
#      the spine's rounds equal each leaf's RESULTs from it
#   b. 5% loss of what every rank receives from its leaf (nftables input
#      hooks in the hosts): in-network; then 5% loss of what each of the
#      three switches receives (cais-switch --rx-loss 5: the ranks' DATA,
#      the partials the spine gets and the RESULTs the leaves get): in-network
#   c. a rank behind each leaf silenced (its DATA to the leaf dropped): the
#      ring, every rank right; then in-network again
#   d. leaf B restarted in the middle of a run (kill -9, started again from
#      its configuration): every rank right, none hanging; leaf B down for a
#      whole run: the ring; back: in-network
#   e. the same for the spine
#   f. the tree set up by cais-manager (--fabric, docs/PROTOCOL.md E10) on
#      switches started without sessions, the ranks joining a job through it:
#      each rank's switch in job.status is its leaf; every dtype and op
#      (bf16, f16 as BLOCK16, the manager's choice), a job each, ended after
#      its run: in-network, and no session left on any switch; the spine,
#      then leaf A, killed during a run and started without sessions: every
#      rank right, and the manager installs the job's part there again (the
#      new instance counts rounds of it); leaf B down when a job is set up:
#      ready without offload (the reason names it), the ring, every rank right
# Loss between a leaf and the spine comes from cais-switch itself
# (--rx-loss): those frames leave and enter by af_packet on both ends, which
# nftables does not see, and this kernel has no tc actions.
# Always cleans up: hosts, switches, testbed, DPDK's runtime directories.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"
# shellcheck source=../../scripts/lib/cases.sh
. "$ROOT/scripts/lib/cases.sh"
BENCH_BYTES=1M,4M
cb_parse_args "$@"
cb_need_testbed

NAME="tr$(($$ % 10000))"
PREFIX_F="cais-trf-$$"
RANKS=8
PER_LEAF=4
E=1024 # a session with an uplink carries at most 1024 (E9)
S=64
PORT=47000
NCPU=$(nproc)
WORK=$(mktemp -d /tmp/cais-tree.XXXXXX)
# the three switches: leaf A, leaf B, spine (index 0, 1, 2)
SW_NAMES=(leaf-a leaf-b spine)
SW_PIDS=("" "" "")
SW_MACS=(02:ca:fe:00:00:0a 02:ca:fe:00:00:0b 02:ca:fe:00:00:05)
SW_EXTRA=()  # more options for the three (case b: --rx-loss)
SW_CONFIG=1  # start them with their sessions (case f: empty, the manager's)
FABRIC_PID=""
# what scripts/lib/cases.sh reads and writes
# shellcheck disable=SC2034
{
	SEQ=1000 HOST_TIMEOUT=120 T0=$(date +%s.%N)
	FAILED=0 FAILURES=() HOST_PIDS=()
}

cleanup() {
	local rc=$? p k
	trap - EXIT INT TERM
	for p in "${HOST_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for k in 0 1 2; do
		cb_stop_pid "${SW_PIDS[$k]}"
		rm -rf "/var/run/dpdk/cais-tr$k-$$" 2>/dev/null || true
	done
	cb_stop_pid "$FABRIC_PID"
	rm -rf "/var/run/dpdk/$PREFIX_F" 2>/dev/null || true
	cb_finish "$rc"
}
cb_traps

cb_step "testbed: $RANKS ranks and three aggregation servers on one fabric"
bash "$TESTBED" up --name "$NAME" --hosts $((RANKS + 3)) >"$WORK/testbed.log" 2>&1 ||
	cb_fatal "testbed up failed: $(tail -n 3 "$WORK/testbed.log")"
eval "$(bash "$TESTBED" env --name "$NAME")"
NET=${TB_AGG_IP%.*}
SW_IPS=("$NET.251" "$NET.252" "$NET.253")
# their control endpoints: on their hosts' management interfaces, each with a key
SW_CTLS=()
for k in 0 1 2; do
	SW_CTLS+=("$(eval "echo \$TB_MGMT_IP_$((RANKS + 1 + k))"):51734")
	head -c 32 /dev/urandom >"$WORK/switch-$k.key"
done
sctl() { "$CTL" -s "${SW_CTLS[$1]}" -k "$WORK/switch-$1.key" -t 2000 "${@:2}"; }

# tensors: 1 sum, 2 max, 3 min (FIXED32), 4 sum (BLOCK16); the same on every switch
tensors() { # session
	local t
	for t in "1 sum 1024 fixed32" "2 max 1024 fixed32" "3 min 1024 fixed32" "4 sum 16777216 block16"; do
		# shellcheck disable=SC2086
		set -- $t
		printf ',\n  {"cmd": "tensor.add", "args": {"tenant": 1, "session": %s, "tensor": %s, "op": "%s", "scale": %s, "wire": "%s"}}' \
			"$S_ID" "$1" "$2" "$3" "$4"
	done
}
members() { # first count: hosts first..first+count-1, ranks first-1..
	local i out=""
	for ((i = $1; i < $1 + $2; i++)); do
		out+="${out:+, }{\"rank\": $((i - 1)), \"mac\": \"$(eval "echo \$TB_MAC_$i")\", \"ip\": \"$(eval "echo \$TB_IP_$i")\", \"port\": $PORT}"
	done
	echo "$out"
}
PEERS=""
for ((i = 1; i <= RANKS; i++)); do
	PEERS+="${PEERS:+,}$(eval "echo \$TB_IP_$i"):$PORT"
done
for k in 0 1; do
	S_ID=1
	{
		printf '[\n  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": %s, "slots": %s, "elems_per_packet": %s, "first_rank": %s, "loss_hints": 1, "members": [%s], "uplink": {"ip": "%s", "mac": "%s", "rank": %s, "switch_port": %s}}}' \
			"$PER_LEAF" "$S" "$E" $((k * PER_LEAF)) "$(members $((k * PER_LEAF + 1)) "$PER_LEAF")" \
			"${SW_IPS[2]}" "${SW_MACS[2]}" "$k" 0
		tensors
		printf '\n]\n'
	} >"$WORK/config-$k.json"
done
{
	S_ID=1
	printf '[\n  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": 2, "slots": %s, "elems_per_packet": %s, "loss_hints": 1, "members": [{"rank": 0, "mac": "%s", "ip": "%s", "port": 51733, "switch_port": 0}, {"rank": 1, "mac": "%s", "ip": "%s", "port": 51733, "switch_port": 0}]}}' \
		"$S" "$E" "${SW_MACS[0]}" "${SW_IPS[0]}" "${SW_MACS[1]}" "${SW_IPS[1]}"
	tensors
	# the flat session of --bench: every rank on the spine, through the leaves as L2
	S_ID=2
	printf ',\n  {"cmd": "session.add", "args": {"tenant": 1, "session": 2, "n": %s, "slots": %s, "elems_per_packet": %s, "loss_hints": 1, "members": [%s]}}' \
		"$RANKS" "$S" "$E" "$(members 1 "$RANKS")"
	tensors
	printf '\n]\n'
} >"$WORK/config-2.json"

# DPDK's af_packet joins a PACKET_FANOUT group whose id it derives from its
# pid and the interface, and fails (EINVAL) when that id is taken by another
# switch's socket: such a start is tried again (another pid, another id).
start_sw() { # k: 0 leaf A, 1 leaf B, 2 spine
	local try
	for try in 1 2 3; do
		start_sw_once "$1" && return 0
		grep -q "PACKET_FANOUT" "$WORK/switch-${SW_NAMES[$1]}.log" || break
		cb_say "${SW_NAMES[$1]}: af_packet's fanout id was taken, start $((try + 1))"
	done
	cb_fatal "${SW_NAMES[$1]} did not start"
}
start_sw_once() { # k: on host RANKS + 1 + k's eth0
	local k=$1 log=$WORK/switch-${SW_NAMES[$1]}.log prefix="cais-tr$1-$$"
	rm -rf "/var/run/dpdk/$prefix" 2>/dev/null || true
	: >"$log"
	ip netns exec "$(sw_ns "$k")" "$SWITCH" --no-huge -m 512 --no-pci --no-shconf \
		--file-prefix="$prefix" -l $(((k + 1) % NCPU)) \
		"--vdev=net_af_packet0,iface=eth0,blocksz=16384,framesz=16384,framecnt=512" \
		-- --agg-ip "${SW_IPS[$k]}" --agg-mac "${SW_MACS[$k]}" \
		${SW_CONFIG:+--config "$WORK/config-$k.json"} --stats-period 0 \
		--ctl "${SW_CTLS[$k]}" --ctl-key "$WORK/switch-$k.key" \
		--idle-sleep-us 50 "${SW_EXTRA[@]}" >>"$log" 2>&1 &
	SW_PIDS[k]=$!
	disown "${SW_PIDS[$k]}" # killed and restarted by whichever shell: no job reports
	for _ in $(seq 1 300); do
		grep -q "running" "$log" && return 0
		if ! kill -0 "${SW_PIDS[$k]}" 2>/dev/null; then
			SW_PIDS[k]=""
			cb_say "${SW_NAMES[$k]} exited during start: $(grep -v '^EAL' "$log" | tail -n 2)"
			return 1
		fi
		sleep 0.1
	done
	cb_fatal "${SW_NAMES[$k]} did not report 'running' within 30 s"
}
kill_sw() { # k: SIGKILL, and wait until it is gone (at most 5 s)
	local pid=${SW_PIDS[$1]}
	[ -n "$pid" ] || return 0
	kill -KILL "$pid" 2>/dev/null
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	SW_PIDS[$1]=""
}

sw_ns() { eval "echo \$TB_NS_$((RANKS + 1 + $1))"; }

cb_step "the fabric; leaf A (${SW_IPS[0]}), leaf B (${SW_IPS[1]}), spine (${SW_IPS[2]}) on hosts 9-11"
cb_switch_start "$SWITCH" "$PREFIX_F" "$WORK/switch-fabric.log" $((RANKS + 3)) \
	--stats-period 0 --idle-sleep-us 50 || cb_fatal "the fabric switch did not start"
FABRIC_PID=$CB_SW_PID
for k in 2 0 1; do
	start_sw $k
done

# stats.get of switch k: field F (a.b for nested ones) of its session TENANT/SESSION
# (tenant 1 unless given), or at the top
stat_of() { # k field [session [tenant]]
	sctl "$1" -j stats.get 2>/dev/null | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
if len(sys.argv) > 2 and sys.argv[2]:
    d = next(s for s in d["sessions"]
             if s["tenant"] == int(sys.argv[3]) and s["session"] == int(sys.argv[2]))
for k in sys.argv[1].split("."):
    d = d[k]
print(d)' "$2" "${3:-}" "${4:-1}" 2>/dev/null
}

# cb_run's ranks: SESSION 1 (the tree: each rank to its leaf) or 2 (flat:
# every rank to the spine); JOB: joining that job through the manager instead
SESSION=1
JOB=""
cb_rank_cmd() {
	local to=${SW_IPS[2]}

	if [ -n "$JOB" ]; then
		# shellcheck disable=SC2034 # cb_run's
		CB_CMD=(ip netns exec "$(eval "echo \$TB_NS_$1")" "$PERF"
			--rank $(($1 - 1)) --world "$RANKS" --manager "$CB_MGR"
			--manager-key "$WORK/manager.key" --job "$JOB" --peers "$PEERS" --slots "$S"
			--elems "$E" --threads 1 --check --check-every 0 --retries 16)
		return
	fi
	[ "$SESSION" -eq 1 ] && to=${SW_IPS[$((($1 - 1) / PER_LEAF))]}
	# shellcheck disable=SC2034 # cb_run's
	CB_CMD=(ip netns exec "$(eval "echo \$TB_NS_$1")" "$PERF"
		--rank $(($1 - 1)) --world "$RANKS" --switch "$to" --peers "$PEERS"
		--tenant 1 --session "$SESSION" --slots "$S" --elems "$E" --scale 1024 --threads 1
		--check --check-every 0 --retries 16)
}

# nft rules in host i's namespace: PCT of what its leaf sends it lost (on the
# way in: a drop in the host's own output hook is no loss on the wire, the
# socket sends it again; the way up is case b2's --rx-loss); 100: the host
# silenced both ways
loss_on() { # i pct (100: all)
	local leaf=${SW_IPS[$((($1 - 1) / PER_LEAF))]} some="numgen random mod 100 < $2" out=""
	if [ "$2" -ge 100 ]; then
		some=""
		out="chain out { type filter hook output priority 0; ip daddr $leaf udp dport 51733 drop; }"
	fi
	ip netns exec "$(eval "echo \$TB_NS_$1")" nft -f - <<EOF
table inet caisloss {
	$out
	chain in { type filter hook input priority 0; ip saddr $leaf udp sport 51733 $some drop; }
}
EOF
}
loss_off() { # i
	ip netns exec "$(eval "echo \$TB_NS_$1")" nft delete table inet caisloss
}

if [ "$BENCH" -eq 1 ]; then
	case $BENCH_DTYPE in f32 | bf16) ;; *) cb_fatal "--dtype $BENCH_DTYPE: f32 or bf16" ;; esac
	case "$BENCH_ITERS" in '' | *[!0-9]*) cb_fatal "--iters '$BENCH_ITERS': a count" ;; esac
	[ "$BENCH_DTYPE" = bf16 ] && wire=(--wire block16 --b16-scale 16777216 --tensor 4) ||
		wire=(--tensor 1)
	cb_step "bench: $BENCH_DTYPE sum, $BENCH_BYTES, $BENCH_ITERS iterations: one switch, then the tree"
	SESSION=2
	cb_run bench-flat --dtype "$BENCH_DTYPE" --op sum "${wire[@]}" --path switch \
		--iters "$BENCH_ITERS" --warmup 2 --bytes "$BENCH_BYTES" || cb_fatal "the one-switch run failed"
	SESSION=1
	cb_run bench-tree --dtype "$BENCH_DTYPE" --op sum "${wire[@]}" --path switch \
		--iters "$BENCH_ITERS" --warmup 2 --bytes "$BENCH_BYTES" || cb_fatal "the tree run failed"
	cb_all_paths bench-flat switch && cb_all_paths bench-tree switch || cb_fatal "not every collective in-network"
	echo
	printf '%12s %16s %16s %10s %14s\n' bytes "one switch (us)" "tree (us)" tree/one "extra level (us)"
	join <(cb_slowest bench-flat) <(cb_slowest bench-tree) | sort -n |
		awk '{ printf "%12d %16.1f %16.1f %10.2f %14.1f\n", $1, $2, $3, $3 / $2, $3 - $2 }'
	exit 0
fi

cb_step "a. every dtype and op through the tree, FIXED32 and BLOCK16"
for dt in f32 bf16 f16 i32; do
	case $dt in f32 | i32) esz=4 ;; *) esz=2 ;; esac
	for op in sum avg max min; do
		case $op in sum | avg) t=1 ;; max) t=2 ;; min) t=3 ;; esac
		label="a-$dt-$op"
		if cb_run "$label" --dtype "$dt" --op "$op" --tensor $t --path switch --iters 2 --warmup 0 \
			--bytes "$esz,$((1025 * esz)),$((100003 * esz)),1M" && cb_all_paths "$label" 'switch'; then
			cb_say "$label: ok"
		else
			cb_case_fail "$label"
		fi
	done
done
for dt in f32 bf16 f16; do
	label="a-b16-$dt"
	case $dt in f32) esz=4 ;; *) esz=2 ;; esac
	cb_run "$label" --dtype "$dt" --op sum --tensor 4 --wire block16 --b16-scale 16777216 \
		--path switch --iters 2 --warmup 0 --bytes "$esz,$((100003 * esz)),1M" &&
		cb_all_paths "$label" 'switch' && cb_say "$label: ok" || cb_case_fail "$label"
done
sp=$(stat_of 2 rounds 1) ua=$(stat_of 0 up_results 1) ub=$(stat_of 1 up_results 1)
cb_say "rounds: spine $sp; RESULTs from the spine: leaf A $ua, leaf B $ub"
if [ -z "$sp" ] || [ "$sp" -eq 0 ] || [ "$sp" != "$ua" ] || [ "$sp" != "$ub" ]; then
	cb_case_fail "a: the spine's rounds ($sp) are not each leaf's RESULTs from it ($ua, $ub)"
fi

cb_step "b. 5% loss of what every rank receives from its leaf (the way up: b2)"
for ((i = 1; i <= RANKS; i++)); do
	loss_on "$i" 5 || cb_fatal "nft failed on host $i"
done
cb_run b-loss --dtype f32 --op sum --tensor 1 --path switch --iters 4 --warmup 1 --bytes 64K,1M &&
	cb_all_paths b-loss 'switch' && cb_say "b-loss: ok" || cb_case_fail "b: in-network under loss"
for ((i = 1; i <= RANKS; i++)); do
	loss_off "$i" || cb_fatal "nft: removing the loss rules on host $i"
done
cb_say "partials resent: leaf A $(stat_of 0 up_resent 1), leaf B $(stat_of 1 up_resent 1)"

cb_step "b2. 5% loss of what every switch receives: below and above the leaves"
SW_EXTRA=(--rx-loss 5)
for k in 2 0 1; do
	kill_sw $k
	start_sw $k
done
cb_run b2-loss --dtype f32 --op sum --tensor 1 --path switch --iters 4 --warmup 1 --bytes 64K,1M &&
	cb_all_paths b2-loss 'switch' && cb_say "b2-loss: ok" || cb_case_fail "b2: in-network under loss at both levels"
lost_sp=$(stat_of 2 drops.rx_loss) lost_a=$(stat_of 0 drops.rx_loss)
cb_say "partials resent: leaf A $(stat_of 0 up_resent 1), leaf B $(stat_of 1 up_resent 1);" \
	"dropped on receipt: spine $lost_sp, leaf A $lost_a;" \
	"NACKs (E11): spine $(stat_of 2 nacks), leaf A $(stat_of 0 nacks)"
[ "${lost_sp:-0}" -gt 0 ] && [ "${lost_a:-0}" -gt 0 ] ||
	cb_case_fail "b2: --rx-loss dropped nothing (spine ${lost_sp:-?}, leaf A ${lost_a:-?})"
SW_EXTRA=()
for k in 2 0 1; do
	kill_sw $k
	start_sw $k
done

cb_step "c. rank 1 (leaf A) and rank 5 (leaf B) silenced: the ring, every rank right"
loss_on 2 100 && loss_on 6 100 || cb_fatal "nft failed"
cb_run c-silent --dtype f32 --op sum --tensor 1 --path auto --threshold 0 --iters 2 --warmup 0 \
	--retries 4 --bytes 256K && cb_all_paths c-silent 'ring.*' && cb_say "c-silent: ok (ring)" ||
	cb_case_fail "c: two silenced ranks, not on the ring or not right"
loss_off 2 && loss_off 6 || cb_fatal "nft: removing the rules"
cb_run c-back --dtype f32 --op sum --tensor 1 --path switch --iters 2 --warmup 0 --bytes 256K &&
	cb_all_paths c-back 'switch' && cb_say "c-back: ok" || cb_case_fail "c: in-network again"

# restart K in the middle of a run: every rank right, none hanging; then K
# down for a whole run: the ring; then K back: in-network
restart_cases() { # k letter
	local k=$1 c=$2 name=${SW_NAMES[$1]} rpid
	( sleep 1.5; kill_sw "$k"; start_sw "$k" ) >"$WORK/$c-restart.log" 2>&1 &
	rpid=$!
	cb_run "$c-restart" --dtype f32 --op sum --tensor 1 --path auto --threshold 0 --iters 20 \
		--warmup 0 --bytes 1M && cb_say "$c-restart: ok ($(awk '/^ +[0-9]/ { p[$5]++ }
		END { for (x in p) printf "%s%s x%d", n++ ? ", " : "", x, p[x] }' "$WORK/$c-restart.h1.log"))" ||
		cb_case_fail "$c: $name restarted during a run: not every rank right"
	wait "$rpid"
	# the restart ran in a subshell: the new instance's pid, by its file prefix
	SW_PIDS[k]=$(pgrep -f -- "--file-prefix=cais-tr$k-$$" | head -n 1)
	[ -n "${SW_PIDS[$k]}" ] || cb_fatal "$name did not come back: $(cat "$WORK/$c-restart.log")"
	# what the new instance served of the run: it came back before the run ended
	cb_say "$name after its restart: rounds $(stat_of "$k" rounds 1)"
	kill_sw "$k"
	cb_run "$c-down" --dtype f32 --op sum --tensor 1 --path auto --threshold 0 --iters 2 \
		--warmup 0 --bytes 1M && cb_all_paths "$c-down" 'ring.*' && cb_say "$c-down: ok (ring)" ||
		cb_case_fail "$c: $name down, not on the ring or not right"
	start_sw "$k"
	cb_run "$c-up" --dtype bf16 --op max --tensor 2 --path switch --iters 2 --warmup 0 --bytes 1M &&
		cb_all_paths "$c-up" 'switch' && cb_say "$c-up: ok" ||
		cb_case_fail "$c: in-network again after $name came back"
}

cb_step "d. leaf B restarted during a run, down, back"
restart_cases 1 d

cb_step "e. the spine restarted during a run, down, back"
restart_cases 2 e

cb_step "f. cais-manager sets the tree up (--fabric): every dtype and op, restarts, job.end"
SW_CONFIG=""
for k in 2 0 1; do
	kill_sw $k
	start_sw $k
	# few cores: deep queues, and CONGESTED would take tensors off the switches
	sctl $k thresholds.set queue_depth=100000000 >/dev/null || cb_fatal "thresholds.set on ${SW_NAMES[$k]}"
done
hosts_json() { # first count: the hosts' data addresses
	local i out=""
	for ((i = $1; i < $1 + $2; i++)); do
		out+="${out:+, }\"$(eval "echo \$TB_IP_$i")\""
	done
	echo "$out"
}
{
	printf '{"mode": "tree", "spine": "spine", "switches": [\n'
	for k in 0 1 2; do
		printf '  {"name": "%s", "ctl": "%s", "agg": "%s", "mac": "%s", "key": "%s"' \
			"${SW_NAMES[$k]}" "${SW_CTLS[$k]}" "${SW_IPS[$k]}" "${SW_MACS[$k]}" "$WORK/switch-$k.key"
		[ $k -lt 2 ] && printf ', "hosts": [%s], "uplink_port": 0},\n' \
			"$(hosts_json $((k * PER_LEAF + 1)) "$PER_LEAF")"
	done
	printf '}\n]}\n'
} >"$WORK/fabric.json"
cb_manager_start "$WORK/fabric.json" || cb_fatal "cais-manager did not start"
cb_say "cais-manager $CB_MGR: holds the three switches' leases"
cb_mctl switch.status >"$WORK/switch-status.txt" 2>&1 &&
	grep -q '^switch 3 of 3' "$WORK/switch-status.txt" && grep -q 'leaf-b' "$WORK/switch-status.txt" ||
	cb_case_fail "f: cais-ctl switch.status does not show the three switches ($WORK/switch-status.txt)"
sessions_on() { # k: how many sessions switch k holds
	stat_of "$1" sessions | /usr/bin/python3 -c 'import ast, sys; print(len(ast.literal_eval(sys.stdin.read())))' 2>/dev/null
}
# a job per run: a rank that joins again starts at seq 0 (first_seq of a new
# session), which the switches hold as old in a session that carried a run
for dt in f32 bf16 f16 i32; do
	case $dt in f32 | i32) esz=4 ;; *) esz=2 ;; esac
	for op in sum avg max min; do
		label="f-$dt-$op" JOB="tree-f-$dt-$op"
		if cb_run "$label" --dtype "$dt" --op "$op" --tensor 1 --path switch --iters 2 \
			--warmup 0 --bytes "$esz,$((1025 * esz)),256K" && cb_all_paths "$label" 'switch'; then
			cb_say "$label: ok ($(cb_job_field 'd["world"]') ranks, session $(cb_job_field 'd["session"]'))"
		else
			cb_case_fail "$label"
		fi
		if [ "$label" = f-f32-sum ]; then
			tenant=$(cb_job_field 'd["tenant"]') session=$(cb_job_field 'd["session"]')
			sws=$(cb_job_field '" ".join(m["switch"] for m in sorted(d["members"], key=lambda m: m["rank"]))')
			want="$(printf "${SW_IPS[0]}:51733 %.0s" 1 2 3 4)$(printf "${SW_IPS[1]}:51733 %.0s" 1 2 3 4)"
			cb_say "job $JOB: session $tenant/$session; the ranks' switches: $sws"
			[ "$sws " = "$want" ] ||
				cb_case_fail "f: job.status: the ranks' switches are not their leaves ($sws)"
			sp=$(stat_of 2 rounds "$session" "$tenant") ua=$(stat_of 0 up_results "$session" "$tenant")
			ub=$(stat_of 1 up_results "$session" "$tenant")
			cb_say "rounds: spine $sp; RESULTs from the spine: leaf A $ua, leaf B $ub"
			if [ -z "$sp" ] || [ "$sp" -eq 0 ] || [ "$sp" != "$ua" ] || [ "$sp" != "$ub" ]; then
				cb_case_fail "f: the spine's rounds ($sp) are not each leaf's RESULTs from it ($ua, $ub)"
			fi
		fi
		cb_mctl job.end job="$JOB" >/dev/null || cb_case_fail "f: job.end $JOB refused"
	done
done
for k in 0 1 2; do
	n=$(sessions_on $k)
	[ "$n" = 0 ] || cb_case_fail "f: after job.end ${SW_NAMES[$k]} still holds ${n:-?} sessions"
done
cb_say "16 jobs ended: no session left on the three switches"

# switch k killed during a run and started again without sessions: the
# manager finds its job missing there at its next poll and installs it again
for k in 2 0; do
	name=${SW_NAMES[$k]} label="f-restart-${SW_NAMES[$k]}" JOB="tree-f-restart-$k"
	before=$(grep -c 'installed again' "$WORK/manager.log")
	# killed once it holds the job's session (the ranks are sending), not
	# after a fixed time that a fast run could outlast
	(
		for _ in $(seq 1 200); do
			[ "$(sessions_on "$k")" = 1 ] && break
			sleep 0.1
		done
		sleep 0.3
		kill_sw "$k"
		start_sw "$k"
		sctl "$k" thresholds.set queue_depth=100000000 >/dev/null
	) >"$WORK/$label.log" 2>&1 &
	rpid=$!
	cb_run "$label" --dtype f32 --op sum --tensor 1 --path auto --threshold 0 --iters 30 \
		--warmup 0 --bytes 1M && cb_say "$label: ok, every rank right ($(awk '/^ +[0-9]/ { print $5 }' "$WORK/$label.h1.log"))" ||
		cb_case_fail "f: $name restarted during a managed run: not every rank right"
	wait "$rpid"
	SW_PIDS[k]=$(pgrep -f -- "--file-prefix=cais-tr$k-$$" | head -n 1)
	[ -n "${SW_PIDS[$k]}" ] || cb_fatal "$name did not come back: $(cat "$WORK/$label.log")"
	# the restart may fall at the run's end (its last all-reduces then go to
	# the ring, before the manager reinstalls): a short run once the manager
	# logs the reinstall
	for _ in $(seq 1 150); do
		[ "$(grep -c 'installed again' "$WORK/manager.log")" -gt "$before" ] && break
		sleep 0.1
	done
	cb_run "$label-after" --dtype f32 --op sum --tensor 1 --path auto --threshold 0 --iters 3 \
		--warmup 0 --bytes 1M || cb_case_fail "f: the run after $name's restart: not every rank right"
	tenant=$(cb_job_field 'd["tenant"]') session=$(cb_job_field 'd["session"]')
	r=$(stat_of "$k" rounds "$session" "$tenant")
	cb_say "$name after its restart: the job's session back on it (rounds $r since);" \
		"$(($(grep -c 'installed again' "$WORK/manager.log") - before)) reinstall(s) logged"
	[ -n "$r" ] && [ "$r" -gt 0 ] ||
		cb_case_fail "f: $name restarted: the manager did not install the session again (rounds '${r}')"
	cb_mctl job.end job="$JOB" >/dev/null || cb_case_fail "f: job.end $JOB refused"
done
# a leaf down when a job's ranks have all joined: admission finds it silent,
# the job is ready without offload (the reason names it), every rank on the
# ring and right, and nothing of the job on the other two
kill_sw 1
label=f-leaf-b-down JOB=tree-f-down
cb_run "$label" --dtype f32 --op sum --tensor 1 --path auto --threshold 0 --iters 2 --warmup 0 \
	--bytes 256K && cb_all_paths "$label" 'ring.*' || cb_case_fail "f: leaf B down: not on the ring or not right"
why=$(cb_job_field 'd["reason"]')
cb_say "$label: ready without offload: $why"
case $why in *leaf-b*unreachable*) ;; *) cb_case_fail "f: leaf B down: the reason does not name it ($why)" ;; esac
[ "$(sessions_on 0)" = 0 ] && [ "$(sessions_on 2)" = 0 ] ||
	cb_case_fail "f: leaf B down: the job's session is on leaf A or the spine"
cb_mctl job.end job="$JOB" >/dev/null || cb_case_fail "f: job.end $JOB refused"
start_sw 1
for k in 0 1 2; do
	n=$(sessions_on $k)
	[ "$n" = 0 ] || cb_case_fail "f: after job.end ${SW_NAMES[$k]} still holds ${n:-?} sessions"
done
JOB=""

cb_summary "$PROG"
