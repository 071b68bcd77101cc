#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# cais-ctl against the real cais-switch (on a ring vdev, no hugepages), keyed
# and unkeyed, and against a fake cais-manager (python3) that checks the MAC
# with the same key, records every request and answers canned replies.
#
# Usage: test_ctl_cli.sh PATH/TO/cais-ctl   (meson passes it; exit 77 = skipped)
set -u

CTL=$(readlink -f "${1:?usage: test_ctl_cli.sh PATH/TO/cais-ctl}")
BUILD=$(dirname "$CTL")/..
SW=$(readlink -f "$BUILD/dataplane/cais-switch" 2>/dev/null || true)

if [ ! -x "$CTL" ]; then
	echo "SKIP: no cais-ctl at $1"
	exit 77
fi
if [ -z "$SW" ] || [ ! -x "$SW" ]; then
	echo "SKIP: no cais-switch next to cais-ctl ($BUILD/dataplane/cais-switch)"
	exit 77
fi
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: cais-switch needs root"
	exit 77
fi
if ! command -v python3 >/dev/null; then
	echo "SKIP: no python3"
	exit 77
fi

TMP=$(mktemp -d /tmp/cais-ctl-cli.XXXXXX)
PIDS=()
PREFIXES=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	for p in "${PREFIXES[@]}"; do
		rm -rf "/var/run/dpdk/$p"
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

FAILS=0
PASSES=0
OUT=
ERR=

fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

pass() {
	echo "ok: $*"
	PASSES=$((PASSES + 1))
}

# run WANT_STATUS DESCRIPTION CMD...: the command's stdout in $OUT, stderr in $ERR
run() {
	local want=$1 desc=$2 rc
	shift 2
	OUT=$(timeout 20 "$@" 2>"$TMP/stderr")
	rc=$?
	ERR=$(cat "$TMP/stderr")
	if [ "$rc" -ne "$want" ]; then
		fail "$desc: exit status $rc, want $want"
		[ -n "$OUT" ] && echo "  stdout: $OUT"
		[ -n "$ERR" ] && echo "  stderr: $ERR"
		return 1
	fi
	pass "$desc (exit $rc)"
	return 0
}

# expect_in TEXT PATTERN DESCRIPTION: grep -E PATTERN in TEXT
expect_in() {
	if grep -qE -- "$2" <<<"$1"; then
		pass "$3"
	else
		fail "$3: no /$2/ in:"
		echo "$1" | sed 's/^/  | /'
	fi
}

expect_not_in() {
	if grep -qE -- "$2" <<<"$1"; then
		fail "$3: /$2/ in:"
		echo "$1" | sed 's/^/  | /'
	else
		pass "$3"
	fi
}

# pycheck JSON_TEXT EXPR DESCRIPTION: python3 EXPR over d = the parsed JSON must be true
pycheck() {
	if python3 -c '
import json, sys
d = json.loads(sys.argv[1])
sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>"$TMP/pyerr"; then
		pass "$3"
	else
		fail "$3: not ($2) on:"
		echo "$1" | head -c 3000 | sed 's/^/  | /'
		cat "$TMP/pyerr"
	fi
}

free_udp_port() {
	python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# start_switch PORT [KEYFILE]: starts cais-switch; its pid in SWPID
start_switch() {
	local port=$1 key=${2:-} prefix
	prefix="cctl$$_$port"
	local args=(--agg-ip 10.0.0.254 --ctl "127.0.0.1:$port")
	[ -n "$key" ] && args+=(--ctl-key "$key")
	PREFIXES+=("$prefix")
	timeout 300 "$SW" --no-huge -m 512 --no-pci --no-shconf --file-prefix="$prefix" -l 0 \
		--vdev=net_ring0 -- "${args[@]}" >"$TMP/switch-$port.log" 2>&1 &
	SWPID=$!
	PIDS+=("$SWPID")
	local kargs=()
	[ -n "$key" ] && kargs=(--key "$key")
	for _ in $(seq 150); do
		if ! kill -0 "$SWPID" 2>/dev/null; then
			echo "cais-switch exited:"
			cat "$TMP/switch-$port.log"
			return 1
		fi
		"$CTL" --switch "127.0.0.1:$port" "${kargs[@]}" --timeout-ms 200 ping >/dev/null 2>&1 &&
			return 0
		sleep 0.2
	done
	echo "cais-switch did not answer on 127.0.0.1:$port:"
	cat "$TMP/switch-$port.log"
	return 1
}

stop_switch() {
	kill -TERM "$1" 2>/dev/null
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

KEY=$TMP/ctl.key
BADKEY=$TMP/other.key
head -c 32 /dev/urandom >"$KEY"
head -c 32 /dev/urandom >"$BADKEY"
: >"$TMP/empty.key"

# ---------------------------------------------------------------- cais-ctl alone
echo "== the command line itself"
run 0 "--help" "$CTL" --help && expect_in "$OUT" "Exit status" "--help lists the exit statuses"
run 0 "help" "$CTL" help
run 0 "help session.add" "$CTL" help session.add &&
	expect_in "$OUT" "member=RANK,MAC,IP,PORT" "help session.add shows member="
run 0 "session.add --help" "$CTL" session.add --help
run 0 "help job.join (a manager command)" "$CTL" help job.join &&
	expect_in "$OUT" "cais-manager" "help job.join names the manager"
run 0 "help raw" "$CTL" help raw
run 0 "--version" "$CTL" --version
run 2 "no command" "$CTL"
run 2 "unknown command" "$CTL" frobnicate && expect_in "$ERR" "unknown command" "says unknown command"
run 2 "unknown option" "$CTL" --frob ping
run 2 "--switch and --manager together" "$CTL" --switch 127.0.0.1 --manager 127.0.0.1 ping
run 2 "bad --switch address" "$CTL" --switch 300.0.0.1:5 ping
run 2 "bad --timeout-ms" "$CTL" --timeout-ms -5 ping
run 2 "missing key file" "$CTL" --key "$TMP/nonexistent" ping &&
	expect_in "$ERR" "cannot read" "missing key file: clear message"
run 2 "empty key file" "$CTL" --key "$TMP/empty.key" ping &&
	expect_in "$ERR" "empty" "empty key file: clear message"
run 2 "manager command sent to --switch" "$CTL" --switch 127.0.0.1:9 jobs.list

# ---------------------------------------------------------------- a dead port
echo "== no reply"
DEAD=$(free_udp_port)
t0=$(now_ms)
run 3 "dead port: no reply" "$CTL" --switch "127.0.0.1:$DEAD" --timeout-ms 500 ping &&
	expect_in "$ERR" "no reply.*within 500 ms" "dead port: says no reply" &&
	expect_in "$ERR" "--ctl" "dead port: hints at --ctl"
t1=$(now_ms)
if [ $((t1 - t0)) -lt 2500 ]; then
	pass "dead port: gave up in $((t1 - t0)) ms (timeout 500 ms)"
else
	fail "dead port: took $((t1 - t0)) ms with --timeout-ms 500"
fi

# ---------------------------------------------------------------- the keyed switch
echo "== cais-switch with --ctl-key"
PORT=$(free_udp_port)
if ! start_switch "$PORT" "$KEY"; then
	fail "cais-switch did not start"
	exit 1
fi
SW1=$SWPID
C=("$CTL" --switch "127.0.0.1:$PORT" --key "$KEY")

stats() {
	OUT=$(timeout 20 "${C[@]}" --json stats.get 2>"$TMP/stderr") || {
		fail "stats.get --json: $(cat "$TMP/stderr")"
		OUT='{}'
	}
}

run 0 "ping" "${C[@]}" ping && expect_in "$OUT" "^cais-switch 127\.0\.0\.1:$PORT: mode compute, uptime [0-9.]+ s, version" "ping is one line"
[ "$(wc -l <<<"$OUT")" -eq 1 ] && pass "ping: exactly one line" || fail "ping: $(wc -l <<<"$OUT") lines"
run 0 "ping --json" "${C[@]}" --json ping && pycheck "$OUT" 'd["mode"] == "compute" and "version" in d' "ping --json parses"

# authentication
run 7 "wrong key: EPERM" "$CTL" --switch "127.0.0.1:$PORT" --key "$BADKEY" --timeout-ms 1000 ping &&
	expect_in "$ERR" "EPERM" "wrong key: says EPERM" && expect_in "$ERR" "--ctl-key" "wrong key: hint"
run 7 "no key against a keyed switch: EPERM" "$CTL" --switch "127.0.0.1:$PORT" --timeout-ms 1000 ping &&
	expect_in "$ERR" "requires a key" "no key: hint"

# session.add
M0=0,02:ca:15:01:00:01,198.18.1.1,47000
M1=1,02:ca:15:01:00:02,198.18.1.2,47001
run 0 "session.add" "${C[@]}" session.add tenant=1 session=1 slots=64 elems_per_packet=2048 \
	priority=1 member=$M0 member=$M1 && expect_in "$OUT" "^ok$" "session.add prints ok"
stats
pycheck "$OUT" '[(s["tenant"], s["session"], s["n"], s["slots"], s["elems_per_packet"], s["priority"]) for s in d["sessions"]] == [(1, 1, 2, 64, 2048, 1)] and d["slots_used"] == 64' \
	"session.add: stats.get shows session 1/1 (n 2 from the members, S 64, E 2048, priority 1)"
run 5 "session.add again: EEXIST" "${C[@]}" session.add tenant=1 session=1 slots=64 \
	elems_per_packet=2048 member=$M0 member=$M1 && expect_in "$ERR" "EEXIST" "EEXIST on stderr"
# refused before sending
run 2 "session.add slots=3 (not a power of two)" "${C[@]}" session.add tenant=1 session=2 slots=3 elems_per_packet=64 member=$M0
run 2 "session.add tenant=70000" "${C[@]}" session.add tenant=70000 session=2 slots=4 elems_per_packet=64 member=$M0
run 2 "session.add elems_per_packet=4096" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=4096 member=$M0
run 2 "session.add multicast MAC" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=64 member=0,01:00:5e:00:00:01,198.18.1.1,47000
run 2 "session.add bad IP" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=64 member=0,02:ca:15:01:00:01,198.18.1.300,47000
run 2 "session.add port 0" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=64 member=0,02:ca:15:01:00:01,198.18.1.1,0
run 2 "session.add member without port" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=64 member=0,02:ca:15:01:00:01,198.18.1.1
run 2 "session.add rank given twice" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=64 member=$M0 member=$M0
run 2 "session.add n=3 with 2 members" "${C[@]}" session.add tenant=1 session=2 n=3 slots=4 elems_per_packet=64 member=$M0 member=$M1
run 2 "session.add without members" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=64
run 2 "session.add unknown argument" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=64 member=$M0 color=blue &&
	expect_in "$ERR" "unknown argument 'color'" "unknown argument named"
run 2 "session.add tenant=abc" "${C[@]}" session.add tenant=abc session=2 slots=4 elems_per_packet=64 member=$M0
run 2 "session.add word without =" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=64 member=$M0 oops
run 2 "session.add tenant given twice" "${C[@]}" session.add tenant=1 tenant=2 session=2 slots=4 elems_per_packet=64 member=$M0
stats
pycheck "$OUT" 'len(d["sessions"]) == 1 and d["slots_used"] == 64' "refused commands changed nothing"
# the switch's own refusals
run 1 "session.add members:= with port 0: the switch's EINVAL" "${C[@]}" session.add tenant=1 session=2 slots=4 elems_per_packet=64 \
	'members:=[{"rank": 0, "mac": "02:00:00:00:00:01", "ip": "10.0.0.1", "port": 0}]' &&
	expect_in "$ERR" "EINVAL: members\[0\]: field 'port'" "the switch's message names the field"
run 1 "--args-json with an unknown field: EINVAL" "${C[@]}" --args-json '{"tenant": 1, "session": 2, "n": 1, "slots": 4, "elems_per_packet": 64, "members": [], "color": 1}' session.add
cat >"$TMP/session.json" <<'EOF'
{"tenant": 1, "session": 2, "slots": 8, "elems_per_packet": 64,
 "members": [{"rank": 0, "mac": "02:ca:15:01:00:03", "ip": "198.18.1.3", "port": 47000}]}
EOF
run 0 "session.add @file.json (n from the words)" "${C[@]}" session.add @"$TMP/session.json" n=1
run 2 "session.add @missing.json" "${C[@]}" session.add @"$TMP/missing.json"
echo '[1, 2]' >"$TMP/array.json"
run 2 "session.add @array.json (not an object)" "${C[@]}" session.add @"$TMP/array.json"
run 2 "--args-json that is not JSON" "${C[@]}" --args-json '{tenant: 1' session.del
stats
pycheck "$OUT" 'sorted((s["tenant"], s["session"], s["slots"]) for s in d["sessions"]) == [(1, 1, 64), (1, 2, 8)] and d["slots_used"] == 72' \
	"session 1/2 from the JSON file is installed"

# tensor.add / tensor.del
run 0 "tensor.add" "${C[@]}" tensor.add tenant=1 session=1 tensor=7 op=sum scale=1024
run 0 "tensor.add max" "${C[@]}" tensor.add tenant=1 session=1 tensor=4294967295 op=max scale=0.5
stats
pycheck "$OUT" 'sorted((t["tensor"], t["op"], t["scale"]) for s in d["sessions"] if s["session"] == 1 for t in s["tensors"]) == [(7, "sum", 1024.0), (4294967295, "max", 0.5)]' \
	"tensor.add: stats.get shows both tensors"
run 5 "tensor.add again: EEXIST" "${C[@]}" tensor.add tenant=1 session=1 tensor=7 op=sum scale=1024
run 4 "tensor.add without a session: ENOENT" "${C[@]}" tensor.add tenant=9 session=9 tensor=7 op=sum scale=1 &&
	expect_in "$ERR" "ENOENT" "ENOENT on stderr"
run 2 "tensor.add op=mul" "${C[@]}" tensor.add tenant=1 session=1 tensor=8 op=mul scale=1
run 2 "tensor.add scale=0" "${C[@]}" tensor.add tenant=1 session=1 tensor=8 op=sum scale=0
run 2 "tensor.add scale=nan" "${C[@]}" tensor.add tenant=1 session=1 tensor=8 op=sum scale=nan
run 2 "tensor.add tensor=-1" "${C[@]}" tensor.add tenant=1 session=1 tensor=-1 op=sum scale=1
run 2 "tensor.add tensor=4294967296" "${C[@]}" tensor.add tenant=1 session=1 tensor=4294967296 op=sum scale=1
run 2 "tensor.add missing scale" "${C[@]}" tensor.add tenant=1 session=1 tensor=8 op=sum
run 1 "tensor.add scale 0 through --args-json: the switch's EINVAL" "${C[@]}" \
	--args-json '{"tenant": 1, "session": 1, "tensor": 8, "op": "sum", "scale": 0}' tensor.add
run 0 "tensor.del" "${C[@]}" tensor.del tenant=1 session=1 tensor=4294967295
run 4 "tensor.del again: ENOENT" "${C[@]}" tensor.del tenant=1 session=1 tensor=4294967295
run 2 "tensor.del without tensor=" "${C[@]}" tensor.del tenant=1 session=1
stats
pycheck "$OUT" '[t["tensor"] for s in d["sessions"] if s["session"] == 1 for t in s["tensors"]] == [7]' \
	"tensor.del: only tensor 7 is left"

# lease
run 0 "lease" "${C[@]}" lease ttl_ms=60000
stats
pycheck "$OUT" '0 < d["lease_left_ms"] <= 60000 and d["mode"] == "compute"' "lease: stats.get shows it"
run 2 "lease ttl_ms=0" "${C[@]}" lease ttl_ms=0
run 2 "lease ttl_ms=1.5" "${C[@]}" lease ttl_ms=1.5
run 1 "raw lease ttl_ms 0: the switch's EINVAL" "${C[@]}" raw lease '{"ttl_ms": 0}'

# mode.set
run 0 "mode.set forward_only" "${C[@]}" mode.set mode=forward_only
stats
pycheck "$OUT" 'd["mode"] == "forward_only"' "mode.set: stats.get says forward_only"
run 0 "ping in forward-only mode" "${C[@]}" ping && expect_in "$OUT" "mode forward_only" "ping shows the mode"
# the rule of docs/PROTOCOL.md E5: a lease does not lift mode.set forward_only
run 0 "lease while held in forward_only" "${C[@]}" lease ttl_ms=60000
stats
pycheck "$OUT" 'd["mode"] == "forward_only" and d["mode_held"] and d["lease_left_ms"] > 0' \
	"mode.set forward_only holds through a lease"
run 0 "mode.set compute" "${C[@]}" mode.set mode=compute
stats
pycheck "$OUT" 'd["mode"] == "compute" and "lease_left_ms" not in d and not d["mode_held"]' \
	"mode.set: back to compute, which ends the lease"
run 0 "lease again" "${C[@]}" lease ttl_ms=60000
run 2 "mode.set mode=fast" "${C[@]}" mode.set mode=fast
run 2 "mode.set without mode" "${C[@]}" mode.set

# thresholds.set, and ENOSPC
run 0 "thresholds.set" "${C[@]}" thresholds.set queue_depth=100 slot_usage=0.5
stats
pycheck "$OUT" 'd["thresholds"]["queue_depth"] == 100 and abs(d["thresholds"]["slot_usage"] - 0.5) < 1e-9' \
	"thresholds.set: stats.get shows them"
run 0 "thresholds.set queue_depth only" "${C[@]}" thresholds.set queue_depth=200
stats
pycheck "$OUT" 'd["thresholds"]["queue_depth"] == 200 and abs(d["thresholds"]["slot_usage"] - 0.5) < 1e-9' \
	"thresholds.set: a missing one keeps its value"
run 2 "thresholds.set without arguments" "${C[@]}" thresholds.set
run 2 "thresholds.set slot_usage=1.5" "${C[@]}" thresholds.set slot_usage=1.5
run 1 "thresholds.set slot_usage 1.5 through --args-json" "${C[@]}" --args-json '{"slot_usage": 1.5}' thresholds.set
run 0 "thresholds.set slot_usage=0.001" "${C[@]}" thresholds.set slot_usage=0.001
run 6 "session.add past the slot-usage threshold: ENOSPC" "${C[@]}" session.add tenant=1 session=3 \
	slots=1024 elems_per_packet=64 member=$M0 && expect_in "$ERR" "ENOSPC" "ENOSPC on stderr"
run 0 "thresholds.set slot_usage=1" "${C[@]}" thresholds.set slot_usage=1

# stats.get as a table
run 0 "stats.get table" "${C[@]}" stats.get
expect_in "$OUT" "cais-switch 127\.0\.0\.1:$PORT: uptime [0-9.]+ s, mode compute, lease [0-9]+ ms left" "stats table: title line"
expect_in "$OUT" "port +name +RX-packets +RX-bytes +RX-missed +TX-packets +TX-bytes +TX-dropped" "stats table: port header"
expect_in "$OUT" "0 +net_ring0( +[0-9]+){6}" "stats table: port 0 row"
expect_in "$OUT" "REJECTs sent: none" "stats table: no REJECTs"
expect_in "$OUT" "drops: none" "stats table: no drops"
expect_in "$OUT" "^  session 1/1 \(n 2, slots 64, elems 2048, priority 1, tensors 1\): " "stats table: session 1/1 line"
expect_in "$OUT" "^  session 1/1 .*: DATA 0, rounds 0, retx 0, resends 0, dup 0, stale 0, overflow 0$" "stats table: session 1/1 counters"
expect_in "$OUT" "^    tensors: 7 \(sum, scale 1024\)$" "stats table: tensors of 1/1"
expect_in "$OUT" "slots 72/[0-9]+" "stats table: slot usage"
expect_in "$OUT" "mbufs free [0-9]+/[0-9]+" "stats table: the packet pool"
run 0 "stats.get --json: the packet pool" "${C[@]}" --json stats.get &&
	pycheck "$OUT" '0 < d["mbufs_free"] <= d["mbufs"] and d["keep_refused"] == 0' \
		"stats.get: mbufs, mbufs_free, keep_refused"

# raw
run 0 "raw ping" "${C[@]}" raw ping && pycheck "$OUT" 'd["mode"] == "compute"' "raw prints JSON"
run 1 "raw unknown command: EINVAL" "${C[@]}" raw no.such '{}' && expect_in "$ERR" "unknown command" "names the command"
run 2 "raw without a command" "${C[@]}" raw
run 2 "raw with bad JSON" "${C[@]}" raw ping '{'

# session.del
run 0 "session.del" "${C[@]}" session.del tenant=1 session=1
run 4 "session.del again: ENOENT" "${C[@]}" session.del tenant=1 session=1
run 2 "session.del session=-1" "${C[@]}" session.del tenant=1 session=-1
stats
pycheck "$OUT" '[(s["tenant"], s["session"]) for s in d["sessions"]] == [(1, 2)] and d["slots_used"] == 8' \
	"session.del: only 1/2 left, its slots freed"
run 0 "session.del 1/2" "${C[@]}" session.del tenant=1 session=2
run 0 "stats.get without sessions" "${C[@]}" stats.get && expect_in "$OUT" "sessions: 0" "no sessions"

# a key given to an unkeyed switch is the other case, below
stop_switch "$SW1"

# ---------------------------------------------------------------- a switch without a key
echo "== cais-switch without a key (loopback)"
PORT2=$(free_udp_port)
if start_switch "$PORT2"; then
	SW2=$SWPID
	U=("$CTL" --switch "127.0.0.1:$PORT2")
	run 0 "unkeyed: ping" "${U[@]}" ping
	run 0 "unkeyed: session.add" "${U[@]}" session.add tenant=5 session=6 slots=16 elems_per_packet=256 member=$M0
	run 0 "unkeyed: tensor.add" "${U[@]}" tensor.add tenant=5 session=6 tensor=1 op=avg scale=64
	run 0 "unkeyed: stats.get --json" "${U[@]}" --json stats.get &&
		pycheck "$OUT" '[(s["tenant"], s["session"], [t["op"] for t in s["tensors"]]) for s in d["sessions"]] == [(5, 6, ["avg"])]' \
			"unkeyed: the session and tensor are there"
	run 1 "unkeyed switch, request with a key: EINVAL" "${U[@]}" --key "$KEY" ping &&
		expect_in "$ERR" "try without --key" "key given to an unkeyed switch: hint"
	stop_switch "$SW2"
else
	fail "unkeyed cais-switch did not start"
fi

# ---------------------------------------------------------------- a fake cais-manager
echo "== cais-manager commands against a fake manager"
MPORT=$(free_udp_port)
cat >"$TMP/fake_manager.py" <<'EOF'
import hashlib, hmac, json, socket, sys

port, keyfile, log, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
key = open(keyfile, "rb").read()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", port))
open(ready, "w").close()
last_ts = 0

def err(rid, code, msg):
    return {"id": rid, "ok": False, "error": {"code": code, "message": msg}}

stats = {
    "uptime_s": 42.5, "mode": "compute", "lease_left_ms": 2500,
    "ports": [{"port": 0, "name": "p0", "rx_packets": 10, "rx_bytes": 1000, "rx_missed": 0,
               "tx_packets": 9, "tx_bytes": 900, "tx_dropped": 1}],
    "drops": {"runt": 0, "cais_magic": 3, "stale": 0},
    "rejects": {"unknown_tensor": 2, "not_member": 0},
    "data_rx": 8, "rounds": 4, "retransmissions": 1, "resends": 0, "duplicates": 1, "stale": 0,
    "arp_replies": 1, "l2_forwarded": 0, "l2_flooded": 0, "handoffs": 0, "macs": 2,
    "queue_depth": 0, "slots_used": 64, "slot_capacity": 65536, "slot_usage": 64 / 65536,
    "thresholds": {"queue_depth": 512, "slot_usage": 0.9},
    "completion_us": {"samples": 4, "p50": 12.0, "p90": 20.0, "p99": 30.0, "max": 31.0},
    "sessions": [{"tenant": 3, "session": 17, "n": 2, "slots": 64, "elems_per_packet": 2048,
                  "priority": 0, "tensors": [{"tensor": 7, "op": "sum", "scale": 1024.0}],
                  "data_rx": 8, "rounds": 4, "results_tx": 8, "retx": 1, "resends": 0,
                  "duplicates": 1, "stale": 0, "inconsistent": 0, "slot_mismatch": 0,
                  "abandoned": 0, "overflow": 0,
                  "rejects": {"unknown_tensor": 2, "not_member": 0},
                  "completion_us": {"samples": 4, "p50": 12.0, "p90": 20.0, "p99": 30.0,
                                    "max": 31.0}}],
}

def answer(cmd, a):
    job = a.get("job")
    if cmd == "ping":
        return {"version": "0.1.0", "uptime_s": 12.5, "jobs": 2}
    if cmd == "job.register":
        if job == "dup":
            return ("EEXIST", "job 'dup' is registered with other values")
        return {"tenant": 3, "session": 17, "state": "waiting"}
    if cmd in ("job.join", "job.status"):
        if job == "nope":
            return ("ENOENT", "no job 'nope'")
        if job == "busy":
            return ("EBUSY", "the manager is busy")
        if job == "weird":
            return ("EWEIRD", "a code that is not the protocol's")
        if cmd == "job.join":
            return {"state": "waiting", "joined": 1}
        return {"state": "ready", "joined": 2, "tenant": 3, "session": 17,
                "switch": "10.0.0.254:51733", "slots": 64, "elems_per_packet": 2048,
                "first_seq": 0, "offload": True,
                "members": [{"rank": 0, "ip": "198.18.1.1", "port": 47000},
                            {"rank": 1, "ip": "198.18.1.2", "port": 47001}]}
    if cmd == "tensor.register":
        return {"installed": True}
    if cmd == "step.begin":
        return {"step": a.get("step"), "offload": [7], "scales": [{"tensor": 7, "scale": 1024.0}]}
    if cmd in ("stats.report", "job.end"):
        return {}
    if cmd == "jobs.list":
        return {"jobs": [
            {"job": "llama", "tenant": 3, "session": 17, "world": 2, "joined": 2, "state": "ready"},
            {"job": "bert-large", "tenant": 4, "session": 18, "world": 8, "joined": 3,
             "state": "waiting"}]}
    if cmd == "switch.status":
        return {"switch": "127.0.0.1:51734", "lease": "held", "polled_ms_ago": 120,
                "stats": stats}
    return ("EINVAL", "unknown command '%s'" % cmd)

while True:
    data, peer = s.recvfrom(70000)
    if not data.startswith(b"mac ") or len(data) < 69 or data[68:69] != b"\n":
        s.sendto(json.dumps(err(None, "EPERM", "missing or bad MAC")).encode(), peer)
        continue
    body = data[69:]
    want = hmac.new(key, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want.encode(), data[4:68]):
        s.sendto(json.dumps(err(None, "EPERM", "missing or bad MAC")).encode(), peer)
        continue
    req = json.loads(body)
    if not isinstance(req.get("ts"), int) or req["ts"] <= last_ts:
        s.sendto(json.dumps(err(req.get("id"), "EPERM", "field 'ts' is not newer than the last (replay)")).encode(), peer)
        continue
    last_ts = req["ts"]
    with open(log, "a") as f:
        f.write(json.dumps({"cmd": req.get("cmd"), "args": req.get("args")}) + "\n")
    res = answer(req.get("cmd"), req.get("args") or {})
    if isinstance(res, tuple):
        rep = err(req["id"], res[0], res[1])
    else:
        rep = {"id": req["id"], "ok": True, "result": res}
    s.sendto(json.dumps(rep).encode(), peer)
EOF
: >"$TMP/manager.log"
timeout 300 python3 "$TMP/fake_manager.py" "$MPORT" "$KEY" "$TMP/manager.log" "$TMP/manager.ready" &
PIDS+=($!)
for _ in $(seq 100); do
	[ -e "$TMP/manager.ready" ] && break
	sleep 0.05
done
MG=("$CTL" --manager "127.0.0.1:$MPORT" --key "$KEY")

# last_request: the last request the fake manager received, as JSON
last_request() {
	tail -n 1 "$TMP/manager.log"
}
requests() {
	wc -l <"$TMP/manager.log"
}

run 0 "manager ping" "${MG[@]}" ping &&
	expect_in "$OUT" "^cais-manager 127\.0\.0\.1:$MPORT: version 0\.1\.0, uptime 12\.5 s, jobs 2" "manager ping: one line"
run 7 "manager: wrong key" "$CTL" --manager "127.0.0.1:$MPORT" --key "$BADKEY" ping
run 7 "manager: no key" "$CTL" --manager "127.0.0.1:$MPORT" ping && expect_in "$ERR" "cais-manager requires a key" "hint"

run 0 "job.register" "${MG[@]}" job.register job=llama tenant=lab world=2 slots=64 elems_per_packet=2048
pycheck "$(last_request)" 'd == {"cmd": "job.register", "args": {"job": "llama", "tenant": "lab", "world": 2, "slots": 64, "elems_per_packet": 2048}}' \
	"job.register: arguments encoded (tenant a string, numbers integers)"
expect_in "$OUT" "^tenant: 3$" "job.register: output shows the tenant id"
expect_in "$OUT" "^state: waiting$" "job.register: output shows the state"
run 0 "job.register --json" "${MG[@]}" --json job.register job=llama tenant=lab world=2 &&
	pycheck "$OUT" 'd == {"tenant": 3, "session": 17, "state": "waiting"}' "job.register --json"
run 5 "job.register with other values: EEXIST" "${MG[@]}" job.register job=dup tenant=lab world=2
N=$(requests)
run 2 "job.register world=0" "${MG[@]}" job.register job=llama tenant=lab world=0
run 2 "job.register slots=5" "${MG[@]}" job.register job=llama tenant=lab world=2 slots=5
run 2 "job.register without tenant" "${MG[@]}" job.register job=llama world=2
run 2 "job.register job of 65 characters" "${MG[@]}" job.register job=$(printf 'x%.0s' $(seq 65)) tenant=lab world=2
run 2 "job.register job=''" "${MG[@]}" job.register job= tenant=lab world=2
run 2 "job.join bad MAC" "${MG[@]}" job.join job=llama rank=0 mac=02:ca:15 ip=198.18.1.1 port=47000
run 2 "job.join bad IP" "${MG[@]}" job.join job=llama rank=0 mac=02:ca:15:01:00:01 ip=198.18.1 port=47000
run 2 "job.join rank=255" "${MG[@]}" job.join job=llama rank=255 mac=02:ca:15:01:00:01 ip=198.18.1.1 port=47000
run 2 "step.begin step=-1" "${MG[@]}" step.begin job=llama rank=0 step=-1
run 2 "stats.report tensor=7 (no max_abs)" "${MG[@]}" stats.report job=llama rank=0 step=1 tensor=7
run 2 "tensor.register op=prod" "${MG[@]}" tensor.register job=llama tensor=7 op=prod
run 2 "job.status unknown argument" "${MG[@]}" job.status job=llama verbose=1
run 2 "manager: switch command session.add" "${MG[@]}" session.add tenant=1 session=1 slots=1 elems_per_packet=1 member=$M0
[ "$(requests)" -eq "$N" ] && pass "refused manager commands sent nothing" ||
	fail "refused manager commands sent $(($(requests) - N)) requests"

run 0 "job.join" "${MG[@]}" job.join job=llama rank=1 mac=02:ca:15:01:00:02 ip=198.18.1.2 port=47001
pycheck "$(last_request)" 'd == {"cmd": "job.join", "args": {"job": "llama", "rank": 1, "mac": "02:ca:15:01:00:02", "ip": "198.18.1.2", "port": 47001}}' \
	"job.join: arguments encoded"
run 0 "job.status" "${MG[@]}" job.status job=llama
pycheck "$(last_request)" 'd == {"cmd": "job.status", "args": {"job": "llama"}}' "job.status: arguments encoded"
expect_in "$OUT" "^state: ready$" "job.status: state"
expect_in "$OUT" "^switch: 10\.0\.0\.254:51733$" "job.status: switch"
expect_in "$OUT" "rank +ip +port" "job.status: members as a table"
expect_in "$OUT" "1 +198\.18\.1\.2 +47001" "job.status: member 1"
run 4 "job.status of an unknown job: ENOENT" "${MG[@]}" job.status job=nope && expect_in "$ERR" "ENOENT: no job 'nope'" "the manager's message"
run 8 "job.status: EBUSY" "${MG[@]}" job.status job=busy
run 9 "job.status: an unknown error code" "${MG[@]}" job.status job=weird && expect_in "$ERR" "EWEIRD" "the code as the reply said"
run 0 "tensor.register" "${MG[@]}" tensor.register job=llama tensor=7 op=avg
pycheck "$(last_request)" 'd == {"cmd": "tensor.register", "args": {"job": "llama", "tensor": 7, "op": "avg"}}' "tensor.register: arguments encoded"
expect_in "$OUT" "^installed: true$" "tensor.register: output"
run 0 "step.begin" "${MG[@]}" step.begin job=llama rank=0 step=12
pycheck "$(last_request)" 'd == {"cmd": "step.begin", "args": {"job": "llama", "rank": 0, "step": 12}}' "step.begin: arguments encoded"
expect_in "$OUT" "^offload: 7$" "step.begin: offload list"
expect_in "$OUT" "7 +1024" "step.begin: scales table"
run 0 "stats.report" "${MG[@]}" stats.report job=llama rank=0 step=12 tensor=7,3.5 tensor=8,0 \
	collectives=40 fallbacks=1 errors=0 congested=2 && expect_in "$OUT" "^ok$" "stats.report prints ok"
pycheck "$(last_request)" 'd == {"cmd": "stats.report", "args": {"job": "llama", "rank": 0, "step": 12, "tensors": [{"tensor": 7, "max_abs": 3.5}, {"tensor": 8, "max_abs": 0.0}], "collectives": 40, "fallbacks": 1, "errors": 0, "congested": 2}}' \
	"stats.report: arguments encoded (tensors as a list)"
run 0 "jobs.list" "${MG[@]}" jobs.list
expect_in "$OUT" "^job +tenant +session +world +joined +state$" "jobs.list: header"
expect_in "$OUT" "^llama +3 +17 +2 +2 +ready$" "jobs.list: row llama"
expect_in "$OUT" "^bert-large +4 +18 +8 +3 +waiting$" "jobs.list: row bert-large"
run 0 "jobs.list --json" "${MG[@]}" --json jobs.list && pycheck "$OUT" '[j["job"] for j in d["jobs"]] == ["llama", "bert-large"]' "jobs.list --json"
run 0 "switch.status" "${MG[@]}" switch.status
expect_in "$OUT" "^lease: held$" "switch.status: scalars"
expect_in "$OUT" "REJECTs sent: unknown_tensor 2$" "switch.status: non-zero REJECTs only"
expect_in "$OUT" "drops: cais_magic 3$" "switch.status: non-zero drops only"
expect_in "$OUT" "completion p50 12\.0 p90 20\.0 p99 30\.0 max 31\.0 us" "switch.status: percentiles"
expect_in "$OUT" "^  session 3/17 \(n 2, slots 64, elems 2048, priority 0, tensors 1\): DATA 8, rounds 4, retx 1, resends 0, dup 1, stale 0, overflow 0$" "switch.status: session line"
expect_in "$OUT" "^    REJECTs: unknown_tensor 2$" "switch.status: session REJECTs"
run 0 "job.end" "${MG[@]}" job.end job=llama && expect_in "$OUT" "^ok$" "job.end prints ok"
pycheck "$(last_request)" 'd == {"cmd": "job.end", "args": {"job": "llama"}}' "job.end: arguments encoded"
run 0 "raw to the manager" "${MG[@]}" raw jobs.list && pycheck "$OUT" 'len(d["jobs"]) == 2' "raw jobs.list"
run 0 "--args-json to the manager" "${MG[@]}" --args-json '{"job": "llama", "extra": [1, 2]}' job.status
pycheck "$(last_request)" 'd == {"cmd": "job.status", "args": {"job": "llama", "extra": [1, 2]}}' "--args-json sent as given"

echo
echo "$PASSES passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
