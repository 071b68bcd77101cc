#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The switch as the enforcement point (docs/PROTOCOL.md E5), attacked from
# the hosts' Ethernet on the namespace testbed: hosts h1..h3 are the ranks of
# session 1/1, h4 is the attacker (tests/integration/forge.py writes its
# frames). The switch's control endpoint is keyed, on the management bridge.
# Every collective runs with cais-allreduce-perf --path switch --check, so a
# forged contribution or result that got through would show as a wrong
# element or a fallback; the switch's counters must show the forgeries
# dropped.
#
#   security_testbed.sh [--switch PATH] [--perf PATH] [--ctl PATH] [--manager PATH]
#                       [--testbed PATH] [--keep-logs]
#
#   a. the baseline: 3 ranks, in-network, every element right
#   b. spoofed DATA: h4 sends rank 0's DATA (h1's IPv4 address and UDP port)
#      for the run's seqs from its own MAC, during the run: REJECT not_member,
#      counted as spoofed, never counted as rank 0's
#   c. the same from h1's MAC too, behind h4's switch port (after h1's first
#      DATA bound it to its own)
#   d. gratuitous ARP (request and reply) claiming the aggregator's address,
#      during a run: dropped (agg_arp), never flooded: every host's neighbour
#      entry for the aggregator keeps the switch's MAC
#   e. RESULTs from the aggregator's address and UDP port, from h4's MAC, to
#      every rank for the run's seqs: dropped (agg_src_ip), every element right
#   f. session.add with members that can never take part (0.0.0.0,
#      255.255.255.255, multicast, loopback, an all-zero or multicast MAC, the
#      aggregator's address or MAC, two ranks at one address): EINVAL naming
#      the field, nothing installed
#   g. many jobs: 600 jobs registered at cais-manager; cais-ctl jobs.list
#      follows the pages and lists every one; job.join with an unusable
#      member: EINVAL
# Needs root (exits 77 without it). Always cleans up.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"
SWITCH=$ROOT/build/dataplane/cais-switch
PERF=$ROOT/build/agent/cais-allreduce-perf
CTL=$ROOT/build/control/cais-ctl
MANAGER=$ROOT/build/control/manager/cais-manager
TESTBED=$ROOT/scripts/testbed.sh
FORGE=$HERE/forge.py
KEEP_LOGS=0
while [ $# -gt 0 ]; do
	case "$1" in
	--switch) SWITCH=$2; shift 2 ;;
	--perf) PERF=$2; shift 2 ;;
	--ctl) CTL=$2; shift 2 ;;
	--manager) MANAGER=$2; shift 2 ;;
	--testbed) TESTBED=$2; shift 2 ;;
	--keep-logs) KEEP_LOGS=1; shift ;;
	-h | --help) sed -n '4,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "$PROG: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done

cb_need_root_and "network namespaces, veth, raw sockets" ip timeout awk python3
for b in "$SWITCH" "$PERF" "$CTL" "$MANAGER"; do
	[ -x "$b" ] || cb_skip "no $b (build first, or give its path)"
done
ip netns list >/dev/null 2>&1 || cb_skip "network namespaces do not work here"

NAME="se$(($$ % 10000))"
PREFIX="cais-se-$$"
RANKS=3
PORT=47000
S=64
E=2048
HOST_TIMEOUT=120
SEQ=5000
T0=$(date +%s.%N)
WORK=$(mktemp -d /tmp/cais-se.XXXXXX)
SWLOG=$WORK/switch.log
MGRLOG=$WORK/manager.log
SW_PID="" MGR_PID=""
PIDS=()
FAILED=0

say() { echo "[$(awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%6.1f", t1 - t0 }') s] $*"; }
fail() {
	FAILED=1
	say "FAIL: $*"
}
fatal() {
	say "FATAL: $*"
	[ -s "$SWLOG" ] && { echo "---- $SWLOG"; tail -n 25 "$SWLOG"; }
	exit 1
}
cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	[ -n "$MGR_PID" ] && kill -TERM "$MGR_PID" 2>/dev/null
	CB_SW_PID=$SW_PID
	cb_switch_stop 5
	wait 2>/dev/null
	bash "$TESTBED" down --name "$NAME" >/dev/null 2>&1
	rm -rf "/var/run/dpdk/$PREFIX"
	if [ "$rc" -eq 0 ] && [ "$FAILED" -eq 0 ] && [ "$KEEP_LOGS" -eq 0 ]; then
		rm -rf "$WORK"
	else
		echo "$PROG: logs in $WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ns() { eval "echo \$TB_NS_$1"; }
hip() { eval "echo \$TB_IP_$1"; }
hmac() { eval "echo \$TB_MAC_$1"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# ---- set-up ----
say "testbed $NAME: 4 hosts (h1..h3 ranks, h4 the attacker)"
bash "$TESTBED" up --name "$NAME" --hosts 4 --mtu 9000 >"$WORK/testbed.log" 2>&1 ||
	fatal "testbed up failed: $(tail -n 3 "$WORK/testbed.log")"
eval "$(bash "$TESTBED" env --name "$NAME")"
MGMT_IP=$TB_BRIDGE_IP
CTL_PORT=$((52000 + $$ % 1000))
MGR_PORT=$((53000 + $$ % 1000))
head -c 32 /dev/urandom >"$WORK/switch.key"
head -c 32 /dev/urandom >"$WORK/manager.key"
sctl() { "$CTL" -s "$MGMT_IP:$CTL_PORT" -k "$WORK/switch.key" -t 2000 "$@"; }
mctl() { "$CTL" -m "$MGMT_IP:$MGR_PORT" -k "$WORK/manager.key" -t 5000 "$@"; }
members=""
for ((i = 1; i <= RANKS; i++)); do
	members+="${members:+, }{\"rank\": $((i - 1)), \"mac\": \"$(hmac "$i")\", \"ip\": \"$(hip "$i")\", \"port\": $PORT}"
	PEERS+="${PEERS:+,}$(hip "$i"):$PORT"
done
cat >"$WORK/config.json" <<EOF
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $RANKS, "slots": $S,
    "elems_per_packet": $E, "members": [$members]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": 1024}}
]
EOF
cb_switch_start "$SWITCH" "$PREFIX" "$SWLOG" 4 --config "$WORK/config.json" \
	--ctl "$MGMT_IP:$CTL_PORT" --ctl-key "$WORK/switch.key" --stats-period 0 ||
	fatal "cais-switch did not start"
SW_PID=$CB_SW_PID
# the aggregator's MAC, as the hosts learn it (the switch answers their ARP)
ip netns exec "$(ns 1)" ping -c 1 -W 1 "$TB_AGG_IP" >/dev/null 2>&1
AGG_MAC=$(ip netns exec "$(ns 1)" ip neigh show "$TB_AGG_IP" | awk '{ for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1) }')
[ -n "$AGG_MAC" ] || fatal "h1 could not resolve the aggregator's address"
say "cais-switch (keyed endpoint $MGMT_IP:$CTL_PORT), aggregator $TB_AGG_IP at $AGG_MAC;" \
	"session 1/1: h1..h3 at $PEERS"

# counters: stat 'PYTHON EXPRESSION over d (stats.get)'
stat() { sctl --json stats.get | json "$1"; }
drops() { stat "d['drops']['$1']"; }
spoofed() { stat "[s for s in d['sessions'] if s['session'] == 1][0]['spoofed']"; }

# run LABEL BYTES ITERS [PERF ARGS...]: the 3 ranks, --path switch --check, in
# the background (run_wait LABEL: every rank passed, every collective
# in-network). Seqs go on.
CHUNKS_PER_MIB=$((1048576 / 4 / E))
run() {
	local label=$1 bytes=$2 iters=$3 i
	shift 3
	RUN_PIDS=()
	RUN_SEQ=$SEQ
	for ((i = 1; i <= RANKS; i++)); do
		timeout -k 5 "$HOST_TIMEOUT" ip netns exec "$(ns "$i")" "$PERF" --rank $((i - 1)) \
			--world $RANKS --switch "$TB_AGG_IP" --peers "$PEERS" --tenant 1 --session 1 \
			--tensor 1 --slots $S --elems $E --scale 1024 --first-seq "$SEQ" --bytes "$bytes" \
			--iters "$iters" --warmup 0 --path switch --check --check-every 0 --retries 16 \
			"$@" >"$WORK/$label.h$i.log" 2>&1 &
		RUN_PIDS+=($!)
		PIDS+=($!)
	done
	SEQ=$((SEQ + iters * $(cb_to_bytes "$bytes") / 4 / E + 10))
}
run_wait() {
	local label=$1 i ok=1 f
	for ((i = 0; i < RANKS; i++)); do
		wait "${RUN_PIDS[$i]}" || ok=0
	done
	for ((i = 1; i <= RANKS; i++)); do
		f=$WORK/$label.h$i.log
		grep -q '^# summary .* result=PASS' "$f" || ok=0
		echo "      h$i: $(grep -m1 '^# summary ' "$f" | sed 's/^# summary //; s/ dtype=[^ ]*//; s/ retx=.*wall_s=/ wall_s=/')"
	done
	[ $ok -eq 1 ] || { fail "$label: a rank failed (logs $WORK/$label.h*.log)"; return 1; }
	return 0
}
# forge ARGS...: forge.py in h4, on its eth0
forge() { ip netns exec "$(ns 4)" python3 "$FORGE" "$@" --iface eth0; }

# ---- a ----
say "a. baseline: 3 ranks, 1 MiB f32 sum x 10, --path switch"
run a 1M 10
run_wait a && say "a: every element right, in-network"

# ---- b ----
say "b. spoofed DATA: h4 sends rank 0's DATA from h1's address and port, from its own MAC"
before=$(spoofed)
n=$((20 * CHUNKS_PER_MIB + 10))
run b 1M 20
forge data --src-mac "$(hmac 4)" --src-ip "$(hip 1)" --src-port $PORT --dst-mac "$AGG_MAC" \
	--dst-ip "$TB_AGG_IP" --tenant 1 --session 1 --tensor 1 --rank 0 --slots $S --elems $E \
	--seq "$RUN_SEQ" --count $n --repeat 3 --gap-ms 50 >"$WORK/b.forge.log" 2>&1 ||
	fail "b: forge.py failed: $(cat "$WORK/b.forge.log")"
run_wait b
got=$(($(spoofed) - before))
[ "$got" -gt 0 ] || fail "b: the switch counted no spoofed DATA"
say "b: $(cat "$WORK/b.forge.log"); the switch counted $got spoofed, every element right"

# ---- c ----
say "c. the same from h1's MAC, behind h4's switch port"
before=$(spoofed)
# While h4 sends from h1's MAC, the switch's MAC table sends h1's ordinary
# traffic to h4 (the members' RESULTs go by their binding): the ranks'
# closing collective, a ring over TCP, may have to wait out TCP's backoff
# (a SYN's 1, 3, 7, 15 s), so the ranks get a longer bound, and h1 speaks
# once the forgery ends so that the table points at it again.
run c 1M 20 --timeout-ms 90000
forge data --src-mac "$(hmac 1)" --src-ip "$(hip 1)" --src-port $PORT --dst-mac "$AGG_MAC" \
	--dst-ip "$TB_AGG_IP" --tenant 1 --session 1 --tensor 1 --rank 0 --slots $S --elems $E \
	--seq "$RUN_SEQ" --count $n --repeat 3 --gap-ms 50 >"$WORK/c.forge.log" 2>&1 ||
	fail "c: forge.py failed"
ip netns exec "$(ns 1)" ping -c 1 -W 1 "$(hip 2)" >/dev/null 2>&1 || true
run_wait c
got=$(($(spoofed) - before))
[ "$got" -gt 0 ] || fail "c: the switch counted no spoofed DATA"
ports=$(stat "[s for s in d['sessions'] if s['session'] == 1][0]['switch_ports']")
[ "$ports" = "[0, 1, 2]" ] || fail "c: members bound to switch ports $ports, want [0, 1, 2]"
say "c: $(cat "$WORK/c.forge.log"); $got spoofed; members bound to ports $ports; every element right"

# ---- d ----
say "d. gratuitous ARP for the aggregator's address from h4, during a run"
before=$(drops agg_arp)
run d 1M 20
forge garp --src-mac "$(hmac 4)" --ip "$TB_AGG_IP" --repeat 50 --gap-ms 20 >"$WORK/d.forge.log" 2>&1 ||
	fail "d: forge.py failed"
run_wait d
got=$(($(drops agg_arp) - before))
[ "$got" -ge 100 ] || fail "d: the switch dropped $got of the 100 ARP frames"
for ((i = 1; i <= RANKS; i++)); do
	m=$(ip netns exec "$(ns "$i")" ip neigh show "$TB_AGG_IP" | awk '{ for (k = 1; k < NF; k++) if ($k == "lladdr") print $(k + 1) }')
	[ -z "$m" ] || [ "$m" = "$AGG_MAC" ] || fail "d: h$i's neighbour entry for the aggregator moved to $m"
done
say "d: $got ARP frames dropped; the hosts' entries for the aggregator unchanged; every element right"

# ---- e ----
say "e. RESULTs from the aggregator's address (h4's MAC) to every rank, during a run"
before=$(drops agg_src_ip)
rx_before=$(stat "d['ports'][3]['rx_packets']")
run e 1M 20
for ((i = 1; i <= RANKS; i++)); do
	forge result --src-mac "$(hmac 4)" --src-ip "$TB_AGG_IP" --src-port 51733 \
		--dst-mac "$(hmac "$i")" --dst-ip "$(hip "$i")" --dst-port $PORT --tenant 1 \
		--session 1 --tensor 1 --slots $S --elems $E --seq "$RUN_SEQ" --count $n \
		--repeat 2 --gap-ms 50 >"$WORK/e.forge.h$i.log" 2>&1 || fail "e: forge.py failed"
done
run_wait e
got=$(($(drops agg_src_ip) - before))
# every frame the switch read from h4's port was dropped as agg_src_ip (a
# burst may overrun the port's af_packet ring: what the switch never read it
# could not forward either); h4 sends nothing else meanwhile, bar an ARP
rx=$(($(stat "d['ports'][3]['rx_packets']") - rx_before))
[ "$got" -gt 0 ] && [ "$got" -ge $((rx - 4)) ] ||
	fail "e: $got forged RESULTs dropped of $rx frames read from h4's port"
say "e: $((2 * n * RANKS)) forged RESULTs sent, $rx read by the switch, $got dropped as" \
	"agg_src_ip; every element right"

# ---- f ----
say "f. session.add with members that can never take part"
bad_member() { # label field member-json
	local out rc
	out=$(sctl raw session.add "{\"tenant\": 2, \"session\": 2, \"n\": 2, \"slots\": 8, \"elems_per_packet\": 8, \"members\": [{\"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": \"10.9.0.1\", \"port\": 4000}, $3]}" 2>&1)
	rc=$?
	if [ $rc -eq 0 ] || ! grep -q "EINVAL" <<<"$out" || ! grep -q "$2" <<<"$out"; then
		fail "f: $1: exit $rc, '$out' (want EINVAL naming $2)"
	fi
}
bad_member "ip 0.0.0.0" "field 'ip'" '{"rank": 1, "mac": "02:00:00:00:00:02", "ip": "0.0.0.0", "port": 4001}'
bad_member "ip 255.255.255.255" "field 'ip'" '{"rank": 1, "mac": "02:00:00:00:00:02", "ip": "255.255.255.255", "port": 4001}'
bad_member "ip multicast" "field 'ip'" '{"rank": 1, "mac": "02:00:00:00:00:02", "ip": "239.1.2.3", "port": 4001}'
bad_member "ip loopback" "field 'ip'" '{"rank": 1, "mac": "02:00:00:00:00:02", "ip": "127.0.0.1", "port": 4001}'
bad_member "mac zero" "field 'mac'" '{"rank": 1, "mac": "00:00:00:00:00:00", "ip": "10.9.0.2", "port": 4001}'
bad_member "mac multicast" "field 'mac'" '{"rank": 1, "mac": "01:00:5e:00:00:01", "ip": "10.9.0.2", "port": 4001}'
bad_member "the aggregator's IP" "aggregator's address" "{\"rank\": 1, \"mac\": \"02:00:00:00:00:02\", \"ip\": \"$TB_AGG_IP\", \"port\": 4001}"
bad_member "the aggregator's MAC" "aggregator's MAC" "{\"rank\": 1, \"mac\": \"$AGG_MAC\", \"ip\": \"10.9.0.2\", \"port\": 4001}"
bad_member "two ranks, one address" "same 'ip' and 'port'" '{"rank": 1, "mac": "02:00:00:00:00:02", "ip": "10.9.0.1", "port": 4000}'
n_sessions=$(stat "len(d['sessions'])")
[ "$n_sessions" -eq 1 ] || fail "f: $n_sessions sessions on the switch, want 1"
say "f: 9 unusable members refused with EINVAL naming the field; nothing installed"

# ---- g ----
say "g. 600 jobs at cais-manager; jobs.list pages"
"$MANAGER" --agg "$TB_AGG_IP" --listen "$MGMT_IP:$MGR_PORT" --key "$WORK/manager.key" --switch-ctl "$MGMT_IP:$CTL_PORT" \
	--switch-key "$WORK/switch.key" --db "$WORK/manager.db" --poll-ms 1000 >>"$MGRLOG" 2>&1 &
MGR_PID=$!
for _ in $(seq 1 100); do
	mctl ping >/dev/null 2>&1 && break
	sleep 0.1
done
for ((j = 0; j < 600; j++)); do
	mctl job.register job="job-$j-of-a-long-running-sweep" tenant="team-$((j % 5))" world=4 \
		>/dev/null 2>&1 || { fail "g: job.register $j"; break; }
done
listed=$(mctl --json jobs.list | json "len(d['jobs'])")
[ "$listed" = 600 ] || fail "g: jobs.list listed $listed of 600 jobs"
out=$(mctl raw job.join '{"job": "job-0-of-a-long-running-sweep", "rank": 0, "mac": "00:00:00:00:00:00", "ip": "10.9.0.1", "port": 4000}' 2>&1)
grep -q "EINVAL.*field 'mac'" <<<"$out" || fail "g: job.join with a zero MAC: $out"
out=$(mctl raw job.join '{"job": "job-0-of-a-long-running-sweep", "rank": 0, "mac": "02:00:00:00:00:01", "ip": "0.0.0.0", "port": 4000}' 2>&1)
grep -q "EINVAL.*field 'ip'" <<<"$out" || fail "g: job.join with ip 0.0.0.0: $out"
say "g: jobs.list listed $listed jobs; job.join refused unusable members"

kill -0 "$SW_PID" 2>/dev/null || fatal "cais-switch died"
[ $FAILED -eq 0 ] || exit 1
say "PASS: $PROG"
