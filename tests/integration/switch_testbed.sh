#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration test of cais-switch on the namespace testbed (scripts/testbed.sh):
# four hosts, the switch on their veth peers (net_af_packet), cais-rawhost on
# every host.
#
#   switch_testbed.sh [--switch PATH] [--rawhost PATH] [--testbed PATH] [--keep-logs]
#
# (or the environment: CAIS_SWITCH, CAIS_RAWHOST, CAIS_TESTBED; CAIS_IT_SEED
# repeats a run's fault injection, whose seed is printed). Needs root;
# without it exits 77 (meson's skip code). Steps:
#   a. testbed up: 4 hosts, MTU 9000
#   b. cais-switch with a --config: session 1/1 (n 4, S 64, E 2048) with a
#      sum, a max and a min tensor; session 2/7 (n 4, S 16, E 256), sum
#   c. ordinary traffic through the switch: ping h1 -> h2, 1 MiB over TCP h3 -> h4
#   d. 2000 rounds per host, varied counts, sum, seqs wrapping past 2^32
#   e. the same with --loss 5, --dup 5, --drop-results 5; max (with session 2
#      at the same time) and min; --garbage 10 on every host; all faults at once
#   f. REJECTs: unknown tensor, not a member, bad count (0 and > E), bad
#      dtype, no slot
#   g. SIGINT: exit status 0, final counters (exact rounds per session,
#      n contributions per round, duplicates, resends, REJECTs by reason)
#   h. a switch in forward-only mode: REJECT fwd_only, L2 still forwards
# Always cleans up: the switch, the hosts, the testbed, DPDK's runtime directory.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"
SWITCH=${CAIS_SWITCH:-$ROOT/build/dataplane/cais-switch}
RAWHOST=${CAIS_RAWHOST:-$ROOT/build/tests/integration/cais-rawhost}
TESTBED=${CAIS_TESTBED:-$ROOT/scripts/testbed.sh}
KEEP_LOGS=0

while [ $# -gt 0 ]; do
	case "$1" in
	--switch) SWITCH=$2; shift 2 ;;
	--rawhost) RAWHOST=$2; shift 2 ;;
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

cb_need_root_and "network namespaces, veth, raw sockets for af_packet" ip ethtool python3 ping timeout
[ -x "$SWITCH" ] || cb_skip "no cais-switch at $SWITCH (is libdpdk installed? give --switch)"
[ -x "$RAWHOST" ] || cb_skip "no cais-rawhost at $RAWHOST (give --rawhost)"
[ -x "$TESTBED" ] || [ -f "$TESTBED" ] || cb_skip "no testbed script at $TESTBED"
ip netns list >/dev/null 2>&1 || cb_skip "network namespaces do not work here"

# ---- constants ----
NAME="it$(($$ % 10000))"
PREFIX="cais-it-$$"
HOSTS=4
MTU=9000
E=2048
S=64
E2=256
S2=16
ROUNDS=2000
PORT_BASE=40000  # session 1: rank r binds 40001 + r
PORT2_BASE=41000 # session 2: rank r binds 41001 + r
# session 1's seqs start just below 2^32, so the first run wraps
SEQ=$((4294967296 - 1000))
SEED=${CAIS_IT_SEED:-$$}
T0=$(date +%s.%N)

WORK=$(mktemp -d /tmp/cais-it.XXXXXX)
SWLOG=$WORK/switch.log
SW_PID=""
HOST_PIDS=()
FAILED=0

# ---- output ----
elapsed() { awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%6.1f", t1 - t0 }'; }
say() { echo "[$(elapsed) s] $*"; }
step() {
	echo
	say "=== $*"
}
fail() {
	FAILED=1
	echo
	say "FAIL: $*"
	if [ -s "$SWLOG" ]; then
		echo "---- switch log (last 40 lines): $SWLOG"
		tail -n 40 "$SWLOG"
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
	bash "$TESTBED" down --name "$NAME" >/dev/null 2>&1 || true
	rm -rf "/var/run/dpdk/$PREFIX" "/var/run/dpdk/$PREFIX-fwd" 2>/dev/null || true
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

members_json() { # port_base
	local i sep=""
	for ((i = 1; i <= HOSTS; i++)); do
		printf '%s{"rank": %d, "mac": "%s", "ip": "%s", "port": %d}' "$sep" $((i - 1)) \
			"$(hmac "$i")" "$(hip "$i")" $(($1 + i))
		sep=", "
	done
}

write_config() { # file [extra request]
	cat >"$1" <<EOF
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $HOSTS, "slots": $S,
    "elems_per_packet": $E, "priority": 0, "members": [$(members_json $PORT_BASE)]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": 1}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 2, "op": "max", "scale": 1}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 3, "op": "min", "scale": 1}},
  {"cmd": "session.add", "args": {"tenant": 2, "session": 7, "n": $HOSTS, "slots": $S2,
    "elems_per_packet": $E2, "members": [$(members_json $PORT2_BASE)]}},
  {"cmd": "tensor.add", "args": {"tenant": 2, "session": 7, "tensor": 70, "op": "sum", "scale": 65536}}${2:+,
  $2}
]
EOF
}

start_switch() { # config prefix
	cb_switch_start "$SWITCH" "$2" "$SWLOG" "$HOSTS" --config "$1" --stats-period 0 ||
		fail "cais-switch did not start"
	SW_PID=$CB_SW_PID
	say "cais-switch running (pid $SW_PID): $(grep -c 'port [0-9]*: net_af_packet' "$SWLOG") ports," \
		"$(grep -o 'applied .*' "$SWLOG")"
}

stop_switch() { # -> SW_RC
	kill -INT "$SW_PID" 2>/dev/null || fail "cais-switch is not running any more"
	for _ in $(seq 1 100); do # 10 s
		kill -0 "$SW_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$SW_PID" 2>/dev/null; then
		kill -KILL "$SW_PID" 2>/dev/null
		wait "$SW_PID" 2>/dev/null
		SW_PID=""
		fail "cais-switch did not stop within 10 s of SIGINT"
	fi
	wait "$SW_PID"
	SW_RC=$?
	SW_PID=""
	rm -rf "/var/run/dpdk/$PREFIX" "/var/run/dpdk/$PREFIX-fwd" 2>/dev/null || true
}

# Run cais-rawhost on every host at once; every one must exit 0.
#   run_hosts LABEL SESSION_ARGS... -- EXTRA_ARGS...
# SESSION_ARGS: s1 (session 1) or s2 (session 2); EXTRA_ARGS go to every host.
run_hosts() {
	local label=$1 sess=$2 i pid rc bad=0 port tenant session elems slots tensor
	shift 2
	[ "${1:-}" = "--" ] && shift
	if [ "$sess" = s1 ]; then
		port=$PORT_BASE tenant=1 session=1 elems=$E slots=$S
	else
		port=$PORT2_BASE tenant=2 session=7 elems=$E2 slots=$S2
	fi
	local pids=() logs=()
	for ((i = 1; i <= HOSTS; i++)); do
		local log="$WORK/$label.h$i.log"
		timeout -s INT 100 ip netns exec "$(ns "$i")" "$RAWHOST" --rank $((i - 1)) --world "$HOSTS" \
			--agg "$TB_AGG_IP" --bind "$(hip "$i"):$((port + i))" --tenant $tenant \
			--session $session --slots $slots --elems $elems --deadline-s 60 --quiet \
			--seed "$SEED" "$@" >"$log" 2>&1 &
		pids+=($!)
		logs+=("$log")
		HOST_PIDS+=($!)
	done
	for ((i = 0; i < HOSTS; i++)); do
		wait "${pids[$i]}"
		rc=$?
		if [ $rc -ne 0 ]; then
			bad=1
			echo "---- h$((i + 1)) exited $rc: ${logs[$i]}"
			tail -n 20 "${logs[$i]}"
		fi
	done
	HOST_PIDS=()
	for ((i = 0; i < HOSTS; i++)); do
		echo "    h$((i + 1)): $(tail -n 1 "${logs[$i]}")"
	done
	[ $bad -eq 0 ] || fail "$label: a host failed"
	kill -0 "$SW_PID" 2>/dev/null || fail "$label: cais-switch died"
}

# Session 1 run of ROUNDS chunks: run1 LABEL TENSOR OP EXTRA...
run1() {
	local label=$1 tensor=$2 op=$3
	shift 3
	say "$label: $ROUNDS rounds x $HOSTS hosts, tensor $tensor ($op), seq $SEQ.. $*"
	run_hosts "$label" s1 -- --tensor "$tensor" --op "$op" --rounds "$ROUNDS" \
		--first-seq "$SEQ" --counts varied "$@"
	SEQ=$(((SEQ + ROUNDS) % 4294967296))
	S1_ROUNDS=$((S1_ROUNDS + ROUNDS))
}

expect_reject() { # label host rank port reason [extra...]
	local label=$1 h=$2 rank=$3 port=$4 reason=$5 log="$WORK/reject.$1.log"
	shift 5
	ip netns exec "$(ns "$h")" "$RAWHOST" --rank "$rank" --world "$HOSTS" --agg "$TB_AGG_IP" \
		--bind "$(hip "$h"):$port" --tenant 1 --session 1 --tensor 1 --slots $S --elems $E \
		--first-seq 7 --deadline-s 10 --quiet --expect-reject "$reason" "$@" >"$log" 2>&1 ||
		{
			cat "$log"
			fail "REJECT $label: expected reason $reason"
		}
	say "REJECT $label: $(tail -n 1 "$log")"
}

# Counter from the final statistics: "name N" in the CAIS line.
final_counter() { # name
	grep -m1 '^  CAIS:' "$SWLOG" | grep -o "$1 [0-9]*" | head -n1 | awk '{print $2}'
}

# ====================================================================
step "a. testbed up: $HOSTS hosts, MTU $MTU (name $NAME; fault injection seed $SEED)"
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
	fail "testbed up failed"
}
eval "$(bash "$TESTBED" env --name "$NAME")"
say "$(cat "$WORK/testbed.log")"

# ====================================================================
step "b. cais-switch: session 1/1 (S $S, E $E; sum, max, min), session 2/7 (S $S2, E $E2)"
write_config "$WORK/config.json"
start_switch "$WORK/config.json" "$PREFIX"

# ====================================================================
step "c. ordinary traffic through the switch"
ip netns exec "$(ns 1)" ping -c 3 -i 0.2 -W 2 "$(hip 2)" >"$WORK/ping.log" 2>&1 || {
	cat "$WORK/ping.log"
	fail "ping h1 -> h2 through the switch"
}
say "ping h1 -> h2: $(grep -o '[0-9]* received' "$WORK/ping.log"), $(grep -o 'rtt.*' "$WORK/ping.log")"

TCP_PORT=5001
ip netns exec "$(ns 4)" timeout 30 python3 -c '
import hashlib, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
print("listening", flush=True)
c, _ = s.accept(); h = hashlib.sha256(); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    h.update(b); n += len(b)
print(n, h.hexdigest(), flush=True)
' "$(hip 4)" $TCP_PORT >"$WORK/tcp_server.log" 2>&1 &
TCP_PID=$!
HOST_PIDS+=($TCP_PID)
for _ in $(seq 1 100); do
	grep -q listening "$WORK/tcp_server.log" && break
	kill -0 $TCP_PID 2>/dev/null || break
	sleep 0.05
done
grep -q listening "$WORK/tcp_server.log" || {
	cat "$WORK/tcp_server.log"
	fail "TCP server on h4 did not start"
}
SENT=$(ip netns exec "$(ns 3)" timeout 30 python3 -c '
import hashlib, random, socket, sys
data = random.Random(2544).randbytes(1 << 20)
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)
s.sendall(data); s.close()
print(len(data), hashlib.sha256(data).hexdigest())
' "$(hip 4)" $TCP_PORT 2>&1) || fail "TCP client h3 -> h4: $SENT"
wait $TCP_PID || {
	cat "$WORK/tcp_server.log"
	fail "TCP server on h4 failed"
}
HOST_PIDS=()
GOT=$(tail -n 1 "$WORK/tcp_server.log")
[ "$SENT" = "$GOT" ] || fail "TCP h3 -> h4: sent '$SENT', received '$GOT'"
say "TCP h3 -> h4: 1 MiB, sha256 matches (${GOT#* })"

# ====================================================================
S1_ROUNDS=0
S2_ROUNDS=0
step "d. aggregation: $ROUNDS rounds per host, varied counts, sum (seqs wrap past 2^32)"
run1 d-sum 1 sum

# ====================================================================
step "e. aggregation under faults, max/min, two sessions, garbage"
run1 e-loss 1 sum --loss 5
run1 e-dup 1 sum --dup 5
run1 e-drop-results 1 sum --drop-results 5
# max on session 1 while session 2 runs a sum on the same hosts (other ports)
say "e-max + session 2: session 1 max and session 2/7 sum ($((ROUNDS * 2)) rounds, E $E2, S $S2) at once"
run_hosts e-s2 s2 -- --tensor 70 --op sum --rounds $((ROUNDS * 2)) --counts varied \
	--first-seq 100 >"$WORK/e-s2.out" 2>&1 &
S2_JOB=$!
run1 e-max 2 max
wait $S2_JOB
S2_RC=$?
say "session 2/7:"
cat "$WORK/e-s2.out"
[ $S2_RC -eq 0 ] || fail "session 2 run failed"
S2_ROUNDS=$((S2_ROUNDS + ROUNDS * 2))
run1 e-min 3 min --loss 2 --dup 2
run1 e-garbage 1 sum --garbage 10
run1 e-chaos 1 sum --loss 10 --dup 10 --drop-results 10 --garbage 5

# ====================================================================
step "f. REJECTs"
expect_reject unknown-tensor 1 0 $((PORT_BASE + 1)) unknown_tensor --tensor 999
expect_reject not-member 2 1 $((PORT_BASE + 2 + 100)) not_member
expect_reject bad-count-0 3 2 $((PORT_BASE + 3)) bad_count --count 0
expect_reject bad-count-big 3 2 $((PORT_BASE + 3)) bad_count --count $((E + 1))
expect_reject bad-dtype 4 3 $((PORT_BASE + 4)) bad_dtype
expect_reject no-slot 4 3 $((PORT_BASE + 4)) no_slot

# ====================================================================
step "g. SIGINT: clean stop and final counters"
stop_switch
[ "$SW_RC" -eq 0 ] || fail "cais-switch exited with status $SW_RC after SIGINT"
sed -n '/cais-switch statistics/,/-----------------------------------------------------------------------/p' "$SWLOG"
ROUNDS_ALL=$(final_counter rounds)
DUPS=$(final_counter duplicates)
RESENDS=$(final_counter resends)
[ -n "$ROUNDS_ALL" ] || fail "no final counters after SIGINT"
[ "$ROUNDS_ALL" -gt 0 ] || fail "final counters: rounds is 0"
[ "$DUPS" -gt 0 ] || fail "final counters: no duplicates after the --dup run"
[ "$RESENDS" -gt 0 ] || fail "final counters: no resends after the --drop-results run"
# every seq completes exactly once, with exactly n contributions
check_session() { # tenant/session rounds
	local line r d
	line=$(grep -m1 "^  session $1 " "$SWLOG") || fail "no counters for session $1"
	r=$(echo "$line" | grep -o 'rounds [0-9]*' | awk '{print $2}')
	d=$(echo "$line" | grep -o 'DATA [0-9]*' | awk '{print $2}')
	[ "$r" -eq "$2" ] || fail "session $1: $r rounds completed, expected exactly $2"
	[ "$d" -eq $(($2 * HOSTS)) ] || fail "session $1: $d contributions, expected exactly $(($2 * HOSTS))"
	say "session $1: $r rounds, $d contributions (exactly $HOSTS per round)"
}
check_session 1/1 $S1_ROUNDS
check_session 2/7 $S2_ROUNDS
# the hosts always send consistent counts and slots, and garbage never names their tensors
for d in inconsistent slot_mismatch; do
	grep -m1 '^  drops:' "$SWLOG" | grep -q "$d [1-9]" && fail "final counters: drops by $d"
done
for reason in unknown_tensor not_member bad_count bad_dtype no_slot; do
	grep -m1 '^  REJECTs sent:' "$SWLOG" | grep -q "$reason [1-9]" ||
		fail "final counters: no REJECT $reason counted"
done
say "switch exited 0: rounds $ROUNDS_ALL, duplicates $DUPS, resends $RESENDS," \
	"retransmissions $(final_counter retransmissions), stale $(final_counter stale)"

# ====================================================================
step "h. forward-only mode: REJECT fwd_only, L2 still forwards"
write_config "$WORK/config-fwd.json" '{"cmd": "mode.set", "args": {"mode": "forward_only"}}'
start_switch "$WORK/config-fwd.json" "$PREFIX-fwd"
expect_reject fwd-only 1 0 $((PORT_BASE + 1)) fwd_only
ip netns exec "$(ns 2)" ping -c 2 -i 0.2 -W 2 "$(hip 1)" >"$WORK/ping2.log" 2>&1 || {
	cat "$WORK/ping2.log"
	fail "ping h2 -> h1 in forward-only mode"
}
say "ping h2 -> h1 in forward-only mode: $(grep -o '[0-9]* received' "$WORK/ping2.log")"
stop_switch
[ "$SW_RC" -eq 0 ] || fail "forward-only cais-switch exited with status $SW_RC after SIGINT"
grep -m1 '^  REJECTs sent:' "$SWLOG" | grep -q "fwd_only [1-9]" || fail "no REJECT fwd_only counted"

echo
say "PASS: $PROG ($S1_ROUNDS rounds on session 1/1, $S2_ROUNDS on session 2/7, per host)"
