#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# cais-manager with the real cais-switch, no testbed: the switch runs on a
# net_ring virtual device (no traffic), both control endpoints with keys.
#
#   manager_switch.sh [--switch PATH] [--manager PATH] [--call PATH] [--keep-logs]
#
# (or CAIS_SWITCH, CAIS_MANAGER, CAIS_MGR_CALL). Needs root and cais-switch;
# without them exits 77 (meson's skip code). Steps:
#   a. cais-switch and cais-manager up; a wrong key is refused (EPERM)
#   b. a job registered, 2 tensors, joined by 4 fake ranks: ready, offload;
#      the session and its tensors are in the switch's stats.get
#   c. step.begin the same for every rank; stats.report; scales follow
#   d. kill -9 the manager, restart it: the job is still there with its ids;
#      a new job gets new ids
#   e. the lease: the manager stopped (SIGTERM, clean) -> the switch goes
#      forward_only within the lease time (ping says mode); restarted ->
#      compute again
#   f. the switch restarts (its tables lost): the manager installs the job's
#      session and tensors again
#   g. job.end: the session leaves the switch; ending again is harmless
# Always cleans up: both daemons, the temporary directory, DPDK's runtime
# directory. Bounded: every call has a timeout, every wait a deadline.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SWITCH=${CAIS_SWITCH:-$ROOT/build/dataplane/cais-switch}
MANAGER=${CAIS_MANAGER:-$ROOT/build/control/manager/cais-manager}
CALL=${CAIS_MGR_CALL:-$ROOT/build/tests/integration/manager/cais-mgr-call}
KEEP_LOGS=0
LEASE_MS=2000

while [ $# -gt 0 ]; do
	case "$1" in
	--switch) SWITCH=$2; shift 2 ;;
	--manager) MANAGER=$2; shift 2 ;;
	--call) CALL=$2; shift 2 ;;
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

skip() {
	echo "$PROG: SKIP: $*"
	exit 77
}

[ "$(id -u)" -eq 0 ] || skip "needs root (DPDK's EAL)"
[ -x "$SWITCH" ] || skip "no cais-switch at $SWITCH (is libdpdk installed? give --switch)"
[ -x "$MANAGER" ] || skip "no cais-manager at $MANAGER (give --manager)"
[ -x "$CALL" ] || skip "no cais-mgr-call at $CALL (give --call)"
for t in ss timeout; do
	command -v "$t" >/dev/null || skip "$t not found"
done

TMP=$(mktemp -d /tmp/cais-mgr-it.XXXXXX)
PREFIX=cais-mgr-it-$$
SW_PID=
MG_PID=
SWLOG=$TMP/switch.log
MGLOG=$TMP/manager.log

cleanup() {
	local rc=$?

	trap - EXIT INT TERM
	[ -n "$MG_PID" ] && kill -9 "$MG_PID" 2>/dev/null && wait "$MG_PID" 2>/dev/null
	if [ -n "$SW_PID" ] && kill -INT "$SW_PID" 2>/dev/null; then
		for _ in $(seq 50); do kill -0 "$SW_PID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$SW_PID" 2>/dev/null
		wait "$SW_PID" 2>/dev/null
	fi
	rm -rf "/var/run/dpdk/$PREFIX"
	if [ $rc -ne 0 ] || [ $KEEP_LOGS -eq 1 ]; then
		echo "$PROG: logs in $TMP"
		[ $rc -ne 0 ] && { echo "--- manager log (tail)"; tail -n 30 "$MGLOG" 2>/dev/null
			echo "--- switch log (tail)"; tail -n 15 "$SWLOG" 2>/dev/null; }
	else
		rm -rf "$TMP"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'echo "$PROG: interrupted"; exit 130' INT
trap 'echo "$PROG: terminated"; exit 143' TERM

say() { echo "$PROG: $*"; }
step() { echo; echo "== $*"; }
fail() {
	echo "$PROG: FAIL: $*" >&2
	exit 1
}

# Two free UDP ports on loopback.
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 40000))
		ss -Hlun "sport = :$p" | grep -q . || { echo "$p"; return; }
	done
	fail "no free UDP port"
}
SW_PORT=$(free_port)
MG_PORT=$(free_port)
while [ "$MG_PORT" = "$SW_PORT" ]; do MG_PORT=$(free_port); done
head -c 32 /dev/urandom >"$TMP/switch.key"
head -c 32 /dev/urandom >"$TMP/manager.key"
head -c 32 /dev/urandom >"$TMP/wrong.key"

sw() { timeout 10 "$CALL" "127.0.0.1:$SW_PORT" --key "$TMP/switch.key" "$@"; }
mg() { timeout 10 "$CALL" "127.0.0.1:$MG_PORT" --key "$TMP/manager.key" "$@"; }
# mg_ok CMD ARGS [--get PATH]: the call must succeed; prints its output
mg_ok() {
	local out
	out=$(mg "$@") || fail "manager $1 ${2:-}: $out"
	echo "$out"
}
expect() { # expect WHAT GOT WANT
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}

start_manager() {
	"$MANAGER" --agg 10.0.0.254 --listen "127.0.0.1:$MG_PORT" --key "$TMP/manager.key" \
		--switch-ctl "127.0.0.1:$SW_PORT" --switch-key "$TMP/switch.key" \
		--db "$TMP/manager.db" --lease-ms $LEASE_MS --poll-ms 250 --log-level info \
		>>"$MGLOG" 2>&1 &
	MG_PID=$!
	for _ in $(seq 100); do
		mg ping >/dev/null 2>&1 && return
		kill -0 "$MG_PID" 2>/dev/null || fail "cais-manager exited during start"
		sleep 0.1
	done
	fail "cais-manager does not answer ping within 10 s"
}

start_switch() {
	: >"$SWLOG"
	"$SWITCH" --no-huge -m 512 --no-pci --no-shconf --file-prefix="$PREFIX" -l 0 --vdev=net_ring0 \
		-- --agg-ip 10.0.0.254 --ctl "127.0.0.1:$SW_PORT" --ctl-key "$TMP/switch.key" \
		--stats-period 0 >"$SWLOG" 2>&1 &
	SW_PID=$!
	for _ in $(seq 300); do
		grep -q "running" "$SWLOG" && return
		kill -0 "$SW_PID" 2>/dev/null || fail "cais-switch exited during start"
		sleep 0.1
	done
	fail "cais-switch did not report 'running' within 30 s"
}

# wait_mode MODE SECONDS: the switch's ping says MODE within SECONDS; prints the time taken (ms)
wait_mode() {
	local t0 now mode
	t0=$(date +%s%3N)
	while :; do
		mode=$(sw --get mode ping 2>/dev/null)
		now=$(date +%s%3N)
		[ "$mode" = "$1" ] && { echo $((now - t0)); return 0; }
		[ $((now - t0)) -gt $(($2 * 1000)) ] && return 1
		sleep 0.1
	done
}

# ---------------------------------------------------------------------------
step "a. cais-switch (net_ring0, control on 127.0.0.1:$SW_PORT) and cais-manager (127.0.0.1:$MG_PORT)"
start_switch
expect "switch mode before any lease" "$(sw --get mode ping)" compute
start_manager
out=$(timeout 10 "$CALL" "127.0.0.1:$MG_PORT" --key "$TMP/wrong.key" ping)
expect "a wrong key" "${out%%:*}" EPERM
out=$(timeout 10 "$CALL" "127.0.0.1:$MG_PORT" ping)
expect "no key" "${out%%:*}" EPERM
say "manager up (pid $MG_PID); a wrong key and no key refused with EPERM"
for _ in $(seq 50); do
	[ "$(mg --get lease.renewals switch.status)" -ge 1 ] 2>/dev/null && break
	sleep 0.1
done
lease_left=$(sw --get lease_left_ms stats.get)
[ "$lease_left" != null ] && [ "$lease_left" -gt 0 ] && [ "$lease_left" -le $LEASE_MS ] ||
	fail "the switch has no lease from the manager (lease_left_ms $lease_left)"
say "the switch holds the manager's lease ($lease_left ms left)"

# ---------------------------------------------------------------------------
step "b. job it-a: 4 ranks, 2 tensors"
reg=$(mg_ok job.register '{"job": "it-a", "tenant": "lab", "world": 4, "slots": 64, "elems_per_packet": 256}')
T=$(mg --get tenant job.register '{"job": "it-a", "tenant": "lab", "world": 4, "slots": 64, "elems_per_packet": 256}')
S=$(mg --get session job.register '{"job": "it-a", "tenant": "lab", "world": 4, "slots": 64, "elems_per_packet": 256}')
say "registered: $reg"
out=$(mg job.register '{"job": "it-a", "tenant": "lab", "world": 8}')
expect "it-a with another world" "${out%%:*}" EEXIST
mg_ok tensor.register '{"job": "it-a", "tensor": 1, "op": "sum"}' >/dev/null
mg_ok tensor.register '{"job": "it-a", "tensor": 2, "op": "max"}' >/dev/null
for r in 0 1 2 3; do
	out=$(mg_ok job.join "{\"job\": \"it-a\", \"rank\": $r, \"mac\": \"02:ca:15:00:00:0$((r + 1))\", \"ip\": \"10.0.0.$((r + 1))\", \"port\": 47000}")
done
say "rank 3 joined: $out"
expect "it-a state" "$(mg --get state job.status '{"job": "it-a"}')" ready
expect "it-a offload" "$(mg --get offload job.status '{"job": "it-a"}')" true
expect "it-a switch" "$(mg --get switch job.status '{"job": "it-a"}')" 10.0.0.254:51733
expect "it-a first_seq" "$(mg --get first_seq job.status '{"job": "it-a"}')" 0
sessions=$(sw --get sessions stats.get)
echo "$sessions" | grep -q "\"tenant\":$T,\"session\":$S,\"n\":4,\"slots\":64,\"elems_per_packet\":256" ||
	fail "session $T/$S not on the switch: $sessions"
echo "$sessions" | grep -q '"tensor":1,"op":"sum","wire":"fixed32","scale":1024' &&
	echo "$sessions" | grep -q '"tensor":2,"op":"max","wire":"fixed32","scale":1024' ||
	fail "tensors not on the switch: $sessions"
expect "switch slots_used" "$(sw --get slots_used stats.get)" 64
say "session $T/$S on the switch with tensors 1 (sum) and 2 (max)"

# ---------------------------------------------------------------------------
step "c. step.begin and stats.report"
a0=$(mg_ok step.begin '{"job": "it-a", "rank": 0, "step": 0}')
for r in 1 2 3; do
	expect "step 0 for rank $r" "$(mg_ok step.begin "{\"job\": \"it-a\", \"rank\": $r, \"step\": 0}")" "$a0"
done
say "step 0, every rank: $a0"
mg_ok stats.report '{"job": "it-a", "rank": 2, "step": 0, "tensors": [{"tensor": 1, "max_abs": 3.0}], "collectives": 8, "fallbacks": 0, "errors": 0, "congested": 0}' >/dev/null
# every rank's report: a scale goes up only on all of them (docs/PROTOCOL.md E3)
for r in 0 1 3; do
	mg_ok stats.report "{\"job\": \"it-a\", \"rank\": $r, \"step\": 0, \"tensors\": [], \"collectives\": 8, \"fallbacks\": 0, \"errors\": 0, \"congested\": 0}" >/dev/null
done
a1=$(mg_ok step.begin '{"job": "it-a", "rank": 3, "step": 1}')
expect "step 1 scale of tensor 1 (4 x 3 x s x 2 < 2^31)" "$(mg --get scales.0.scale step.begin '{"job": "it-a", "rank": 0, "step": 1}')" 67108864.0
expect "step 1 for rank 1" "$(mg_ok step.begin '{"job": "it-a", "rank": 1, "step": 1}')" "$a1"
say "step 1: $a1"

# ---------------------------------------------------------------------------
step "d. kill -9 the manager, restart it"
{ kill -9 "$MG_PID"; wait "$MG_PID"; } 2>/dev/null
MG_PID=
start_manager
expect "it-a state after the restart" "$(mg --get state job.status '{"job": "it-a"}')" ready
expect "it-a session after the restart" "$(mg --get session job.status '{"job": "it-a"}')" "$S"
expect "it-a step 1 after the restart" "$(mg_ok step.begin '{"job": "it-a", "rank": 2, "step": 1}')" "$a1"
S2=$(mg --get session job.register '{"job": "it-b", "tenant": "lab", "world": 2}')
T2=$(mg --get tenant job.register '{"job": "it-b", "tenant": "lab", "world": 2}')
T3=$(mg --get tenant job.register '{"job": "it-c", "tenant": "other", "world": 2}')
[ "$S2" -gt "$S" ] 2>/dev/null || fail "the new job's session $S2 is not new (it-a has $S)"
expect "tenant of 'lab'" "$T2" "$T"
[ "$T3" != "$T" ] || fail "tenant 'other' got the id of 'lab'"
say "it-a still ready with session $S; new jobs: it-b session $S2 (tenant $T2), it-c tenant $T3"
echo "$(mg_ok jobs.list)"

# ---------------------------------------------------------------------------
step "e. the lease: the manager stops, the switch goes forward_only"
expect "switch mode with the manager" "$(sw --get mode ping)" compute
kill -TERM "$MG_PID"
for _ in $(seq 100); do kill -0 "$MG_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$MG_PID" 2>/dev/null && fail "cais-manager did not stop within 10 s of SIGTERM"
wait "$MG_PID"
mrc=$?
MG_PID=
expect "cais-manager's exit status after SIGTERM" "$mrc" 0
grep -q "stopped" "$MGLOG" || fail "no 'stopped' in the manager's log"
t=$(wait_mode forward_only $((LEASE_MS / 1000 + 3))) ||
	fail "the switch is still '$(sw --get mode ping)' $((LEASE_MS / 1000 + 3)) s after the manager stopped"
[ "$t" -le $((LEASE_MS + 1000)) ] || fail "forward_only only after $t ms (lease $LEASE_MS ms)"
say "forward_only $t ms after the manager stopped (lease $LEASE_MS ms)"
start_manager
t=$(wait_mode compute 5) || fail "the switch is not back to compute 5 s after the manager restarted"
say "compute again $t ms after the manager restarted"

# ---------------------------------------------------------------------------
step "f. the switch restarts: the manager installs it-a's session again"
kill -INT "$SW_PID"
for _ in $(seq 100); do kill -0 "$SW_PID" 2>/dev/null || break; sleep 0.1; done
{ kill -9 "$SW_PID"; wait "$SW_PID"; } 2>/dev/null
SW_PID=
start_switch
back=
for _ in $(seq 100); do
	sw --get sessions stats.get | grep -q "\"tenant\":$T,\"session\":$S,\"n\":4" && { back=1; break; }
	sleep 0.1
done
[ -n "$back" ] || fail "session $T/$S not back on the restarted switch within 10 s"
sessions=$(sw --get sessions stats.get)
echo "$sessions" | grep -q '"tensor":2,"op":"max"' || fail "tensor 2 not back on the switch: $sessions"
t=$(wait_mode compute 5) || fail "the restarted switch is not in compute mode"
grep -q "switch 127.0.0.1:$SW_PORT restarted" "$MGLOG" || fail "the manager did not log the restart"
expect "it-a offload after the switch restart" "$(mg --get offload job.status '{"job": "it-a"}')" true
say "session $T/$S and its tensors are back on the restarted switch"

# ---------------------------------------------------------------------------
step "g. job.end"
expect "job.end it-a" "$(mg --get state job.end '{"job": "it-a"}')" ended
sessions=$(sw --get sessions stats.get)
echo "$sessions" | grep -q "\"tenant\":$T,\"session\":$S," && fail "session $T/$S still on the switch: $sessions"
expect "switch slots_used after job.end" "$(sw --get slots_used stats.get)" 0
expect "job.end it-a again" "$(mg --get state job.end '{"job": "it-a"}')" ended
out=$(mg step.begin '{"job": "it-a", "rank": 0, "step": 2}')
expect "step.begin of an ended job" "${out%%:*}" ENOENT
S4=$(mg --get session job.register '{"job": "it-a", "tenant": "lab", "world": 4}')
[ "$S4" -gt "$S2" ] 2>/dev/null || fail "it-a again got session $S4, not a new one"
say "session $T/$S removed from the switch; it-a registered again gets session $S4"
grep -E " (warn|error): " "$MGLOG" | grep -v "lease renewal failed\|stats.get failed\|restarted:" &&
	fail "unexpected warnings or errors in the manager's log"
echo
say "PASS"
