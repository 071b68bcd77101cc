#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration test of the NCCL plugin (libnccl-net-cais.so) without a GPU:
# four hosts of the namespace testbed (scripts/testbed.sh), cais-switch on
# their veth peers, and on each host cais-nccl-harness, which drives the
# plugin as NCCL's proxy thread does (tests/nccl/nccl_harness.c), all at once.
#
#   nccl_testbed.sh [--switch PATH] [--harness PATH] [--plugin PATH]
#                   [--testbed PATH] [--keep-logs]
#
# (or the environment: CAIS_SWITCH_BIN, CAIS_NCCL_HARNESS, CAIS_NCCL_PLUGIN,
# CAIS_TESTBED). Needs root; without it exits 77 (meson's skip code).
#   a. with the switch (session 1/1: the 4 hosts by address, port 47000,
#      S 64, E 2048; tensors 1 sum, 2 max, 3 min): ncclNet ring of messages,
#      CollNet connect (NCCL's collnet ranks rotated against the addresses'
#      order), every type and op the plugin claims, every element checked
#   b. CAIS_SWITCH an address nobody owns (no aggregator; the switch still
#      forwards the hosts' TCP): every rank's CollNet connect must fail within the
#      bound, with the plugin's log line saying why, and NCCL's clean-up path
#      (finalize without closeListen) must not crash
#   c. the switch REJECTs (CAIS_TENANT=9, a tenant it does not have): the
#      same, at once
# Always cleans up: the hosts, the switch, the testbed, DPDK's runtime dir.
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
KEEP_LOGS=0

while [ $# -gt 0 ]; do
	case "$1" in
	--switch) SWITCH=$2; shift 2 ;;
	--harness) HARNESS=$2; shift 2 ;;
	--plugin) PLUGIN=$2; shift 2 ;;
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

cb_need_root_and "network namespaces, veth, raw sockets for af_packet" ip ethtool timeout awk
[ -x "$SWITCH" ] || cb_skip "no cais-switch at $SWITCH (give --switch)"
[ -x "$HARNESS" ] || cb_skip "no cais-nccl-harness at $HARNESS (give --harness)"
[ -f "$PLUGIN" ] || cb_skip "no libnccl-net-cais.so at $PLUGIN (give --plugin)"
[ -f "$TESTBED" ] || cb_skip "no testbed script at $TESTBED"
ip netns list >/dev/null 2>&1 || cb_skip "network namespaces do not work here"

NAME="nc$(($$ % 10000))"
PREFIX="cais-nc-$$"
HOSTS=4
PORT=47000
SLOTS=${CAIS_NCCL_SLOTS:-64} # the session's pool: what af_packet rings of 512 frames absorb
HOST_TIMEOUT=150 # bound on one harness run (s)
FAIL_BOUND=60    # case b: connect must fail within this (s)
T0=$(date +%s.%N)
WORK=$(mktemp -d /tmp/cais-nc.XXXXXX)
SWLOG=$WORK/switch.log
SW_PID=""
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

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	for p in "${HOST_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${HOST_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
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
	local i members="" sep=""
	# the plugin ranks the hosts by address: h1 < h2 < h3 < h4
	for ((i = 1; i <= HOSTS; i++)); do
		members+="$sep{\"rank\": $((i - 1)), \"mac\": \"$(v MAC "$i")\", \"ip\": \"$(v IP "$i")\", \"port\": $PORT}"
		sep=", "
	done
	cat >"$WORK/config.json" <<EOF
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $HOSTS, "slots": $SLOTS,
    "elems_per_packet": 2048, "priority": 0, "members": [$members]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 2, "op": "max", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 3, "op": "min", "scale": 1024}}
]
EOF
}

start_switch() {
	cb_switch_start "$SWITCH" "$PREFIX" "$SWLOG" "$HOSTS" --config "$WORK/config.json" \
		--stats-period 0 || fatal "cais-switch did not start"
	SW_PID=$CB_SW_PID
}

# run_all LABEL TIMEOUT [harness args]: every host at once; sets RUN_OK, RUN_S
AGG=""
run_all() {
	local label=$1 limit=$2 i rc t0 pids=()
	shift 2
	mkdir -p "$WORK/$label"
	t0=$(date +%s.%N)
	for ((i = 1; i <= HOSTS; i++)); do
		timeout -k 5 "$limit" ip netns exec "$(v NS "$i")" env CAIS_SWITCH="${AGG:-$TB_AGG_IP}" CAIS_TENANT="${TENANT:-1}" \
			CAIS_IFNAME=eth0 CAIS_PORT=$PORT CAIS_SLOTS="$SLOTS" CAIS_TIMEOUT_MS=20000 \
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

check_fail() { # label
	if [ "$RUN_OK" -eq 1 ] && grep -q 'CollNet unavailable' "$WORK/$1.h1.err"; then
		say "$1: every rank's connect failed cleanly (whole run ${RUN_S} s):"
		grep -h 'failed cleanly' "$WORK/$1".h*.out | sed 's/^/      /'
		grep -h -m1 'CollNet unavailable' "$WORK/$1.h1.err" | sed 's/^.*CAIS: /      log: /'
	else
		fail "$1: connect did not fail cleanly on every rank"
	fi
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
start_switch
say "cais-switch running (pid $SW_PID), aggregator $TB_AGG_IP"

# ====================================================================
say "=== a. the plugin with the switch: ncclNet, CollNet, every claimed type and op"
run_all a $HOST_TIMEOUT
if [ "$RUN_OK" -eq 1 ] && grep -q PASS "$WORK"/a.h1.out; then
	say "a: every rank passed in ${RUN_S} s"
	grep -h -E 'ncclNet:|connect as|type/op pairs' "$WORK"/a.h*.out | sed 's/^/      /'
	grep -h 'closing' "$WORK"/a.h1.err | sed 's/^.*CAIS: /      rank 0: /'
	if grep -h 'closing' "$WORK"/a.h*.err | grep -q ' 0 in-network'; then
		fail "a: a rank saw no all-reduce in-network"
	fi
else
	fail "a: a rank failed"
fi
grep -m1 '^  session 1/1 ' "$SWLOG" || true

# ====================================================================
say "=== b. no aggregator at CAIS_SWITCH (an address nobody owns; the switch still forwards"
say "       the hosts' TCP): CollNet connect must fail cleanly on every rank"
AGG=${TB_AGG_IP%.*}.253
run_all b $((FAIL_BOUND + 10)) --expect-fail
check_fail b

say "=== c. the switch answers REJECT (a tenant it does not have): connect fails at once"
AGG="" TENANT=9 run_all c $((FAIL_BOUND + 10)) --expect-fail
check_fail c

stop_switch
if grep -q "CollNet unavailable" "$WORK"/a.h*.err; then
	fail "a: the log says CollNet was unavailable"
fi

echo
if [ "$FAILED" -ne 0 ]; then
	say "FAIL: $PROG"
	exit 1
fi
say "PASS: $PROG"
