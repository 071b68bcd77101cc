#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration test of the NCCL plugin (libnccl-net-cais.so) without a GPU:
# four hosts of the namespace testbed (scripts/testbed.sh), cais-switch on
# their veth peers, and on each host cais-nccl-harness, which drives the
# plugin as NCCL's proxy threads do (tests/nccl/nccl_harness.c), all at once.
#
#   nccl_testbed.sh [--switch PATH] [--harness PATH] [--plugin PATH]
#                   [--manager PATH] [--testbed PATH] [--keep-logs]
#
# (or the environment: CAIS_SWITCH_BIN, CAIS_NCCL_HARNESS, CAIS_NCCL_PLUGIN,
# CAIS_MANAGER_BIN, CAIS_TESTBED). Needs root; without it exits 77 (meson's
# skip code). The harness runs under MALLOC_PERTURB_ and MALLOC_CHECK_, so
# that memory used after it was freed shows.
#   a. static mode (sessions 1/1 and 1/2: the 4 hosts by address, ports 47000
#      and 47001, S 64, E 2048; tensors 1 sum, 2 max, 3 min): ncclNet with a
#      silent connection in each listener, connect/accept that return NULL
#      until done; two CollNet communicators at once in each process (NCCL's
#      collnet ranks rotated against the addresses' order), every type and
#      op the plugin claims, every element checked; then one communicator
#      initialised while another is finalised
#   b. CAIS_SWITCH an address nobody owns (no aggregator; the switch still
#      forwards the hosts' TCP): every rank's CollNet connect must fail within the
#      bound, with the plugin's log line saying why, and NCCL's clean-up path
#      (finalize without closeListen) must not crash
#   c. the switch REJECTs (CAIS_TENANT=9, a tenant it does not have): the
#      same, at once
#   d. one host's probe fails (CAIS_NCCL_TEST_FAIL=probe on h2) while the
#      others' succeed: connect fails on every rank, which names the rank
#   e. the same with the failing host collnet rank 0 (h4), which decides
#   f. managed mode: cais-switch with its control endpoint only, cais-manager
#      on the management network, CAIS_MANAGER on every host: as a
#      (two communicators at once, each its own job), a manager step every
#      2 collectives (CAIS_STEP_EVERY=2), counted in the closing lines
# Always cleans up: the hosts, the switch, the manager, the testbed, DPDK's
# runtime dir.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"
SWITCH=${CAIS_SWITCH_BIN:-$ROOT/build/dataplane/cais-switch}
HARNESS=${CAIS_NCCL_HARNESS:-$ROOT/build/tests/nccl/cais-nccl-harness}
PLUGIN=${CAIS_NCCL_PLUGIN:-$ROOT/build/agent/nccl/libnccl-net-cais.so}
TESTBED=${CAIS_TESTBED:-$ROOT/scripts/testbed.sh}
MANAGER=${CAIS_MANAGER_BIN:-$ROOT/build/control/manager/cais-manager}
KEEP_LOGS=0

while [ $# -gt 0 ]; do
	case "$1" in
	--switch) SWITCH=$2; shift 2 ;;
	--harness) HARNESS=$2; shift 2 ;;
	--plugin) PLUGIN=$2; shift 2 ;;
	--testbed) TESTBED=$2; shift 2 ;;
	--manager) MANAGER=$2; shift 2 ;;
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

cb_need_root_and "network namespaces, veth, raw sockets for af_packet" ip ethtool timeout awk
[ -x "$SWITCH" ] || cb_skip "no cais-switch at $SWITCH (give --switch)"
[ -x "$HARNESS" ] || cb_skip "no cais-nccl-harness at $HARNESS (give --harness)"
[ -f "$PLUGIN" ] || cb_skip "no libnccl-net-cais.so at $PLUGIN (give --plugin)"
[ -f "$TESTBED" ] || cb_skip "no testbed script at $TESTBED"
[ -x "$MANAGER" ] || cb_skip "no cais-manager at $MANAGER (give --manager)"
ip netns list >/dev/null 2>&1 || cb_skip "network namespaces do not work here"

NAME="nc$(($$ % 10000))"
PREFIX="cais-nc-$$"
HOSTS=4
PORT=47000
SLOTS=${CAIS_NCCL_SLOTS:-64} # the session's pool: what af_packet rings of 512 frames absorb
HOST_TIMEOUT=150 # bound on one harness run (s)
FAIL_BOUND=60    # cases b..e: connect must fail within this (s)
T0=$(date +%s.%N)
WORK=$(mktemp -d /tmp/cais-nc.XXXXXX)
SWLOG=$WORK/switch.log
SW_PID=""
MGR_PID=""
MGRLOG=$WORK/manager.log
HOST_PIDS=()
FAILED=0

say() { echo "[$(awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%6.1f", t1 - t0 }') s] $*"; }
fail() {
	FAILED=1
	say "FAIL: $*"
}
fatal() {
	FAILED=1
	say "FATAL: $*"
	[ -s "$SWLOG" ] && tail -n 20 "$SWLOG"
	exit 1
}

stop_switch() {
	[ -n "$SW_PID" ] || return 0
	kill -INT "$SW_PID" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$SW_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$SW_PID" 2>/dev/null || true
	wait "$SW_PID" 2>/dev/null || true
	SW_PID=""
}

stop_manager() {
	[ -n "$MGR_PID" ] || return 0
	kill -TERM "$MGR_PID" 2>/dev/null || true
	wait "$MGR_PID" 2>/dev/null || true
	MGR_PID=""
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
	stop_manager
	stop_switch
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

v() { eval "echo \$TB_$1_$2"; }

write_config() {
	local i s members sep cmds=""
	# the plugin ranks the hosts by address: h1 < h2 < h3 < h4; the k-th
	# CollNet communicator of a process is session 1 + k on port 47000 + k
	for s in 0 1; do
		members="" sep=""
		for ((i = 1; i <= HOSTS; i++)); do
			members+="$sep{\"rank\": $((i - 1)), \"mac\": \"$(v MAC "$i")\", \"ip\": \"$(v IP "$i")\", \"port\": $((PORT + s))}"
			sep=", "
		done
		cmds+="${cmds:+,
}  {\"cmd\": \"session.add\", \"args\": {\"tenant\": 1, \"session\": $((1 + s)), \"n\": $HOSTS, \"slots\": $SLOTS,
    \"elems_per_packet\": 2048, \"priority\": 0, \"loss_hints\": 1, \"members\": [$members]}}"
		for t in "1 sum" "2 max" "3 min"; do
			set -- $t
			cmds+=",
  {\"cmd\": \"tensor.add\", \"args\": {\"tenant\": 1, \"session\": $((1 + s)), \"tensor\": $1, \"op\": \"$2\", \"scale\": 1024}}"
		done
	done
	printf '[\n%s\n]\n' "$cmds" >"$WORK/config.json"
}

start_switch() { # the switch's options
	cb_switch_start "$SWITCH" "$PREFIX" "$SWLOG" "$HOSTS" "$@" --stats-period 0 ||
		fatal "cais-switch did not start"
	SW_PID=$CB_SW_PID
}

start_manager() {
	: >"$MGRLOG"
	"$MANAGER" --agg "$TB_AGG_IP" --listen "$MGMT_IP:$MGR_PORT" --key "$WORK/manager.key" \
		--switch-ctl "127.0.0.1:$CTL_PORT" --switch-key "$WORK/switch.key" \
		--db "$WORK/manager.db" --lease-ms 1500 --poll-ms 500 >>"$MGRLOG" 2>&1 &
	MGR_PID=$!
	for _ in $(seq 1 100); do
		grep -q "listening on" "$MGRLOG" && return 0
		kill -0 "$MGR_PID" 2>/dev/null || fatal "cais-manager exited during start: $(tail -n 3 "$MGRLOG")"
		sleep 0.1
	done
	fatal "cais-manager did not start in 10 s"
}

# run_all LABEL TIMEOUT [harness args]: every host at once; sets RUN_OK, RUN_S.
# The environment: MODE (static, managed), AGG, TENANT, TIMEOUT_MS, FAIL_HOST.
AGG=""
MODE=static
mode_env() { # host index
	if [ "$MODE" = managed ]; then
		# a manager step every 2 collectives: the scales follow the tensors, and a
		# float tensor takes the ring in its first two steps (docs/PROTOCOL.md E3)
		echo "CAIS_MANAGER=$MGMT_IP:$MGR_PORT CAIS_MANAGER_KEY=$WORK/manager.key CAIS_TENANT_NAME=nccl-it CAIS_STEP_EVERY=2"
	else
		echo "CAIS_SWITCH=${AGG:-$TB_AGG_IP} CAIS_TENANT=${TENANT:-1} CAIS_PORT=$PORT"
	fi
	[ "${FAIL_HOST:-0}" = "$1" ] && echo "CAIS_NCCL_TEST_FAIL=probe"
}
run_all() {
	local label=$1 limit=$2 i rc t0 pids=()
	shift 2
	mkdir -p "$WORK/$label"
	t0=$(date +%s.%N)
	for ((i = 1; i <= HOSTS; i++)); do
		# shellcheck disable=SC2046 # the environment is a list of words
		timeout -k 5 "$limit" ip netns exec "$(v NS "$i")" env $(mode_env "$i") \
			CAIS_IFNAME=eth0 CAIS_SLOTS="$SLOTS" CAIS_TIMEOUT_MS="${TIMEOUT_MS:-20000}" \
			MALLOC_PERTURB_=165 MALLOC_CHECK_=3 \
			"$HARNESS" --plugin "$PLUGIN" --rank $((i - 1)) --world $HOSTS --dir "$WORK/$label" \
			--timeout $((limit - 10)) "$@" >"$WORK/$label.h$i.out" 2>"$WORK/$label.h$i.err" &
		pids+=($!)
		HOST_PIDS+=($!)
	done
	RUN_OK=1
	for ((i = 1; i <= HOSTS; i++)); do
		wait "${pids[$((i - 1))]}"
		rc=$?
		if [ $rc -ne 0 ]; then
			RUN_OK=0
			echo "---- h$i exited $rc$([ $rc -ge 124 ] && echo " (timeout: a hang)"); its stderr:"
			grep -v ' INFO ' "$WORK/$label.h$i.err" | tail -n 15
		fi
	done
	HOST_PIDS=()
	RUN_S=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

check_pass() { # label
	local f
	if [ "$RUN_OK" -eq 1 ] && [ "$(grep -l PASS "$WORK/$1".h*.out | wc -l)" -eq $HOSTS ]; then
		say "$1: every rank passed in ${RUN_S} s"
		grep -h -E 'ncclNet: connect|connect as|type/op pairs|f32 sum, |at once|while another' \
			"$WORK/$1".h*.out | sed 's/^/      /'
		grep -h 'CollNet rank 0 of' "$WORK/$1".h*.err | sed 's/^.*CAIS: /      log: /' | head -n 2
		if grep -h 'closing' "$WORK/$1".h*.err | grep -q ' 0 in-network'; then
			fail "$1: a communicator saw no all-reduce in-network"
		fi
		if grep -q "CollNet unavailable" "$WORK/$1".h*.err; then
			fail "$1: the log says CollNet was unavailable"
		fi
	else
		fail "$1: a rank failed"
	fi
	for f in "$WORK/$1".h*.err; do
		if grep -q -E 'double free|corrupted|malloc\(\)|free\(\)' "$f"; then
			fail "$1: the C library found memory misuse in ${f##*/}"
		fi
	done
}

check_fail() { # label [a line every rank's log must have]
	local i
	if [ "$RUN_OK" -ne 1 ]; then
		fail "$1: connect did not fail cleanly on every rank"
		return
	fi
	for ((i = 1; i <= HOSTS; i++)); do
		if ! grep -q "CollNet unavailable.*${2:-}" "$WORK/$1.h$i.err"; then
			fail "$1: h$i's log does not say 'CollNet unavailable ... ${2:-}'"
			return
		fi
	done
	say "$1: every rank's connect failed cleanly (whole run ${RUN_S} s):"
	grep -h 'failed cleanly' "$WORK/$1".h*.out | sed 's/^/      /'
	for ((i = 1; i <= HOSTS; i++)); do
		grep -h -m1 'CollNet unavailable' "$WORK/$1.h$i.err" | sed "s/^.*CAIS: /      h$i: /"
	done
}

# ====================================================================
say "=== testbed: $HOSTS hosts (name $NAME)"
up=0
for attempt in 0 1 2 3 4; do
	net=$(((($$ % 250) + attempt * 47) % 250 + 1))
	if bash "$TESTBED" up --name "$NAME" --hosts $HOSTS --mtu 9000 --net "$net" >"$WORK/testbed.log" 2>&1; then
		up=1
		break
	fi
	grep -q "already used" "$WORK/testbed.log" || break
done
[ $up -eq 1 ] || {
	cat "$WORK/testbed.log"
	fatal "testbed up failed"
}
eval "$(bash "$TESTBED" env --name "$NAME")"
write_config
# a control endpoint of its own: other tests' switches may hold the default one
CTL_PORT=$((52000 + $$ % 1000))
start_switch --config "$WORK/config.json" --ctl "127.0.0.1:$CTL_PORT"
say "cais-switch running (pid $SW_PID), aggregator $TB_AGG_IP"

# ====================================================================
say "=== a. static mode: ncclNet, two CollNet communicators at once, every claimed type and op,"
say "       then an init while another communicator is finalised"
run_all a $HOST_TIMEOUT --comms 2 --finalize-race
check_pass a
grep -E '^  session 1/[12] ' "$SWLOG" | head -n 2 || true

# ====================================================================
say "=== b. no aggregator at CAIS_SWITCH (an address nobody owns; the switch still forwards"
say "       the hosts' TCP): CollNet connect must fail cleanly on every rank"
AGG=${TB_AGG_IP%.*}.253 TIMEOUT_MS=5000 run_all b $((FAIL_BOUND + 10)) --expect-fail
check_fail b "did not aggregate a probe"

say "=== c. the switch answers REJECT (a tenant it does not have): connect fails at once"
TENANT=9 run_all c $((FAIL_BOUND + 10)) --expect-fail
check_fail c "did not aggregate a probe"

# (process rank r, host h(r+1), is collnet rank (r + 1) mod 4: h2 is collnet rank 2)
say "=== d. h2's probe fails, the others' succeed: every rank fails, naming the rank"
FAIL_HOST=2 run_all d $((FAIL_BOUND + 10)) --expect-fail
check_fail d
grep -q "CAIS_NCCL_TEST_FAIL=probe" "$WORK/d.h2.err" || fail "d: h2 does not say why it failed"
for i in 1 3 4; do
	grep -q "collnet rank 2 failed" "$WORK/d.h$i.err" || fail "d: h$i does not name collnet rank 2 (h2)"
done

say "=== e. h4's probe fails: h4 is collnet rank 0, which decides"
FAIL_HOST=4 run_all e $((FAIL_BOUND + 10)) --expect-fail
check_fail e
for i in 1 2 3; do
	grep -q "collnet rank 0 failed" "$WORK/e.h$i.err" || fail "e: h$i does not name collnet rank 0 (h4)"
done

# ====================================================================
say "=== f. managed mode: cais-manager installs each communicator's session"
stop_switch
MGMT_IP=${TB_MGMT_IP_1%.*}.254 # the management bridge, in this namespace
MGR_PORT=$((53000 + $$ % 1000))
head -c 32 /dev/urandom >"$WORK/switch.key"
head -c 32 /dev/urandom >"$WORK/manager.key"
start_switch --ctl "127.0.0.1:$CTL_PORT" --ctl-key "$WORK/switch.key"
start_manager
say "cais-switch (control endpoint 127.0.0.1:$CTL_PORT), cais-manager on $MGMT_IP:$MGR_PORT"
MODE=managed run_all f $HOST_TIMEOUT --comms 2
check_pass f
grep -h "ready" "$MGRLOG" | sed 's/^/      manager: /' | head -n 2
grep -q "manager" "$WORK/f.h1.err" || fail "f: the plugin's log does not show managed mode"
# every communicator began a manager step every 2 collectives
grep -h 'closing' "$WORK"/f.h*.err | sed 's/^.*CAIS: /      log: /' | head -n 2
grep -h 'closing' "$WORK"/f.h*.err | awk '{
	for (i = 1; i < NF; i++) {
		if ($(i + 1) == "all-reduces,") n = $i
		if ($(i + 1) == "manager") s = $i
	}
	if (s != 1 + int((n - 1) / 2) || n < 1) bad++
	lines++
} END { exit !(lines >= 8 && !bad) }' || fail "f: a communicator did not begin a manager step every 2 collectives"
stop_manager
stop_switch

echo
if [ "$FAILED" -ne 0 ]; then
	say "FAIL: $PROG"
	exit 1
fi
say "PASS: $PROG"
