#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# demo.sh: CAIS end to end on one machine, in about a minute.
#
#   dependencies (scripts/install-deps.sh) -> build (meson, ninja) ->
#   a namespace testbed of N hosts (scripts/testbed.sh) -> cais-switch on the
#   hosts' veth peers -> every host streams chunks through the switch with
#   cais-rawhost at a few chunk sizes, checking every RESULT -> a table ->
#   the switch's final counters -> everything torn down (also on Ctrl-C).
set -euo pipefail

PROG=${0##*/}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

HOSTS=4
SIZES="256,1024,2048"
ROUNDS=""
BUILD="$ROOT/build"
NAME="demo"
DEPS=1
SLOTS=64
TIMEOUT_US=10000

usage() {
	cat <<EOF
Usage: $PROG [--hosts N] [--sizes E1,E2,...] [--rounds K] [--timeout-us US]
            [--build DIR] [--name NAME] [--no-deps] [--help]

CAIS end to end on one machine (needs root): installs what is missing
(scripts/install-deps.sh), builds into DIR (meson; an existing build is reused),
makes a testbed of N hosts (scripts/testbed.sh), starts cais-switch on the
hosts' data ports with one session per chunk size, and runs cais-rawhost on
every host: K chunks per size, each RESULT checked byte for byte against the
reduction the host computes itself. Prints progress, a table per size, and the
switch's final counters; tears everything down at the end and on Ctrl-C.

  --hosts N        hosts (ranks), 2..16 (default $HOSTS)
  --sizes LIST     elements per chunk, each 1..2048 (default $SIZES)
  --rounds K       chunks per host and size (default: 250000 / 250000 / 150000 for
                   sizes up to 256 / 1024 / 2048 elements, some 10 s each)
  --timeout-us US  the hosts' smallest retransmission timeout (default $TIMEOUT_US: the
                   testbed loses nothing, and on a machine with few cores a short timer
                   only measures CPU scheduling, in spurious retransmissions)
  --build DIR      build directory (default build/)
  --name NAME      testbed name, 1..6 characters [a-z0-9] (default $NAME)
  --no-deps        skip scripts/install-deps.sh
  --help           this text
EOF
}

die() {
	echo "$PROG: $*" >&2
	exit 1
}

usage_error() {
	echo "$PROG: $*" >&2
	echo "Try '$PROG --help'." >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--hosts | --sizes | --rounds | --timeout-us | --build | --name)
		[ $# -ge 2 ] || usage_error "$1 needs a value"
		case "$1" in
		--hosts) HOSTS=$2 ;;
		--sizes) SIZES=$2 ;;
		--rounds) ROUNDS=$2 ;;
		--timeout-us) TIMEOUT_US=$2 ;;
		--build) BUILD=$2 ;;
		--name) NAME=$2 ;;
		esac
		shift 2
		;;
	--no-deps)
		DEPS=0
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) usage_error "unknown argument '$1'" ;;
	esac
done
[[ "$HOSTS" =~ ^[0-9]{1,2}$ ]] && [ "$HOSTS" -ge 2 ] && [ "$HOSTS" -le 16 ] ||
	usage_error "--hosts '$HOSTS': an integer in 2..16"
[[ "$SIZES" =~ ^[0-9]{1,4}(,[0-9]{1,4})*$ ]] || usage_error "--sizes '$SIZES': a list like 256,1024,2048"
IFS=, read -r -a SIZE_LIST <<<"$SIZES"
for e in "${SIZE_LIST[@]}"; do
	[ "$e" -ge 1 ] && [ "$e" -le 2048 ] || usage_error "--sizes: $e is not in 1..2048"
done
[ ${#SIZE_LIST[@]} -le 8 ] || usage_error "--sizes: at most 8 sizes"
[ -z "$ROUNDS" ] || { [[ "$ROUNDS" =~ ^[0-9]{1,9}$ ]] && [ "$ROUNDS" -ge 1 ]; } ||
	usage_error "--rounds '$ROUNDS': a positive integer"
[[ "$TIMEOUT_US" =~ ^[0-9]{1,8}$ ]] && [ "$TIMEOUT_US" -ge 1 ] ||
	usage_error "--timeout-us '$TIMEOUT_US': a positive integer"
[[ "$NAME" =~ ^[a-z0-9]{1,6}$ ]] || usage_error "--name '$NAME': 1..6 characters [a-z0-9]"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth, af_packet); run: sudo $0"

T0=$(date +%s.%N)
elapsed() { awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%5.1f", t1 - t0 }'; }
say() { echo "[demo $(elapsed) s] $*"; }

WORK=""
SW_PID=""
PREFIX="cais-demo-$$"
TB_UP=0

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	set +e
	if [ -n "$SW_PID" ] && kill -0 "$SW_PID" 2>/dev/null; then
		kill -INT "$SW_PID" 2>/dev/null
		for _ in $(seq 1 50); do
			kill -0 "$SW_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$SW_PID" 2>/dev/null
		wait "$SW_PID" 2>/dev/null
	fi
	if [ "$TB_UP" -eq 1 ]; then
		# also stops any cais-rawhost still running in the hosts
		bash "$ROOT/scripts/testbed.sh" down --name "$NAME" >/dev/null 2>&1
		say "testbed $NAME removed"
	fi
	rm -rf "/var/run/dpdk/$PREFIX" 2>/dev/null
	if [ -n "$WORK" ]; then
		if [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ] && [ "$rc" -ne 143 ]; then
			echo "$PROG: failed; logs kept in $WORK" >&2
		else
			rm -rf "$WORK"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'echo; say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

fail() {
	say "FAILED: $*"
	if [ -n "$WORK" ] && [ -s "$WORK/switch.log" ]; then
		echo "---- switch log (last 30 lines)"
		tail -n 30 "$WORK/switch.log"
	fi
	exit 1
}

# ---- 1. dependencies ----
if [ "$DEPS" -eq 1 ]; then
	say "1/5 dependencies: scripts/install-deps.sh"
	bash "$ROOT/scripts/install-deps.sh"
else
	say "1/5 dependencies: skipped (--no-deps)"
fi

# ---- 2. build ----
if [ -f "$BUILD/build.ninja" ]; then
	say "2/5 build: reusing $BUILD"
else
	say "2/5 build: meson setup $BUILD"
	meson setup "$BUILD" "$ROOT" >/dev/null || die "meson setup failed"
fi
meson compile -C "$BUILD" >"/tmp/cais-demo-build.$$.log" 2>&1 || {
	tail -n 30 "/tmp/cais-demo-build.$$.log"
	rm -f "/tmp/cais-demo-build.$$.log"
	die "build failed"
}
rm -f "/tmp/cais-demo-build.$$.log"
SWITCH="$BUILD/dataplane/cais-switch"
RAWHOST="$BUILD/tests/integration/cais-rawhost"
[ -x "$SWITCH" ] || die "no $SWITCH: libdpdk was not found at configure time (scripts/install-deps.sh, then rm -rf $BUILD)"
[ -x "$RAWHOST" ] || die "no $RAWHOST: tests are disabled in $BUILD (meson configure $BUILD -Dtests=enabled)"
say "    cais-switch and cais-rawhost built in $BUILD"

WORK=$(mktemp -d /tmp/cais-demo.XXXXXX)

# ---- 3. testbed ----
say "3/5 testbed: $HOSTS hosts (namespaces $NAME-h1..$NAME-h$HOSTS), MTU 9000"
TB_UP=1
bash "$ROOT/scripts/testbed.sh" up --name "$NAME" --hosts "$HOSTS" --mtu 9000 >"$WORK/testbed.log" 2>&1 || {
	cat "$WORK/testbed.log"
	fail "testbed up"
}
eval "$(bash "$ROOT/scripts/testbed.sh" env --name "$NAME")"
say "    data $TB_DATA_NET (aggregator $TB_AGG_IP), management $TB_MGMT_NET"

# ---- 4. the switch: one session per size ----
# session k (tenant 1) has E = size k, S = $SLOTS; rank r binds port 42000 + 100 k + r
port_of() { echo $((42000 + 100 * $1 + $2)); }
{
	echo "["
	for k in "${!SIZE_LIST[@]}"; do
		e=${SIZE_LIST[$k]}
		members=""
		for ((i = 1; i <= HOSTS; i++)); do
			members+="${members:+, }{\"rank\": $((i - 1)), \"mac\": \"$(eval "echo \$TB_MAC_$i")\", \"ip\": \"$(eval "echo \$TB_IP_$i")\", \"port\": $(port_of $((k + 1)) $((i - 1)))}"
		done
		[ "$k" -eq 0 ] || echo ","
		echo "  {\"cmd\": \"session.add\", \"args\": {\"tenant\": 1, \"session\": $((k + 1)), \"n\": $HOSTS, \"slots\": $SLOTS, \"elems_per_packet\": $e, \"members\": [$members]}},"
		echo "  {\"cmd\": \"tensor.add\", \"args\": {\"tenant\": 1, \"session\": $((k + 1)), \"tensor\": 1, \"op\": \"sum\", \"scale\": 1}}"
	done
	echo "]"
} >"$WORK/config.json"
VDEVS=()
for ((i = 1; i <= HOSTS; i++)); do
	VDEVS+=("--vdev=net_af_packet$((i - 1)),iface=$(eval "echo \$TB_SWIF_$i"),blocksz=16384,framesz=16384,framecnt=512")
done
say "4/5 cais-switch: $HOSTS af_packet ports, aggregator $TB_AGG_IP, ${#SIZE_LIST[@]} session(s) (sizes $SIZES, S $SLOTS)"
"$SWITCH" --no-huge -m 512 --no-pci --no-shconf --file-prefix="$PREFIX" -l 0 "${VDEVS[@]}" \
	-- --agg-ip "$TB_AGG_IP" --config "$WORK/config.json" --stats-period 0 >"$WORK/switch.log" 2>&1 &
SW_PID=$!
for _ in $(seq 1 300); do
	grep -q "running" "$WORK/switch.log" && break
	kill -0 "$SW_PID" 2>/dev/null || fail "cais-switch exited during start"
	sleep 0.1
done
grep -q "running" "$WORK/switch.log" || fail "cais-switch did not start within 30 s"
say "    running (pid $SW_PID): $(grep -o 'applied .*' "$WORK/switch.log" | sed "s|$WORK/||")"

# ---- 5. the hosts ----
say "5/5 allreduce: every host streams chunks through the switch, checking every RESULT"
declare -A R_ROUNDS R_ELEMS R_ERR R_RETX R_TIME R_OK
for k in "${!SIZE_LIST[@]}"; do
	e=${SIZE_LIST[$k]}
	sess=$((k + 1))
	if [ -n "$ROUNDS" ]; then
		rounds=$ROUNDS
	elif [ "$e" -le 256 ]; then
		rounds=250000
	elif [ "$e" -le 1024 ]; then
		rounds=250000
	else
		rounds=150000
	fi
	say "    E = $e elements ($((e * 4)) B per chunk): $rounds chunks per host, session 1/$sess"
	pids=()
	for ((i = 1; i <= HOSTS; i++)); do
		ip netns exec "$(eval "echo \$TB_NS_$i")" "$RAWHOST" --rank $((i - 1)) --world "$HOSTS" \
			--agg "$TB_AGG_IP" --bind "$(eval "echo \$TB_IP_$i"):$(port_of $sess $((i - 1)))" \
			--tenant 1 --session $sess --tensor 1 --slots $SLOTS --elems "$e" --rounds "$rounds" \
			--counts full --deadline-s 120 --timeout-us "$TIMEOUT_US" >"$WORK/E$e.h$i.out" 2>"$WORK/E$e.h$i.err" &
		pids+=($!)
	done
	# progress: each host's last progress line, once a second, until all are done
	while :; do
		running=0
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null && running=$((running + 1))
		done
		[ $running -gt 0 ] || break
		sleep 1
		line=""
		for ((i = 1; i <= HOSTS; i++)); do
			done_=$(grep -o '[0-9]*/[0-9]* rounds' "$WORK/E$e.h$i.err" 2>/dev/null | tail -n 1 | cut -d/ -f1 || true)
			[ -s "$WORK/E$e.h$i.out" ] && done_=$rounds
			line+=" h$i ${done_:-0}"
		done
		say "      E=$e:$line (of $rounds)"
	done
	ok=1
	for ((i = 1; i <= HOSTS; i++)); do
		if ! wait "${pids[$((i - 1))]}"; then
			ok=0
			echo "---- h$i failed:"
			tail -n 15 "$WORK/E$e.h$i.err"
		fi
	done
	# sum the hosts' summary lines
	elems=0 errs=0 retx=0 tmax=0
	for ((i = 1; i <= HOSTS; i++)); do
		s=$(tail -n 1 "$WORK/E$e.h$i.out" 2>/dev/null || true)
		[ -n "$s" ] || continue
		n=$(echo "$s" | grep -o '[0-9]* elements checked' | cut -d' ' -f1 || true)
		elems=$((elems + ${n:-0}))
		n=$(echo "$s" | grep -o '[0-9]* errors' | cut -d' ' -f1 || true)
		errs=$((errs + ${n:-0}))
		n=$(echo "$s" | grep -o '[0-9]* retransmissions' | cut -d' ' -f1 || true)
		retx=$((retx + ${n:-0}))
		t=$(echo "$s" | grep -o '[0-9.]* s (' | cut -d' ' -f1 || true)
		t=${t:-0}
		tmax=$(awk -v a="$tmax" -v b="$t" 'BEGIN { if (b + 0 > a + 0) print b; else print a }')
	done
	R_ROUNDS[$e]=$rounds R_ELEMS[$e]=$elems R_ERR[$e]=$errs R_RETX[$e]=$retx R_TIME[$e]=$tmax
	R_OK[$e]=$ok
	say "      E=$e: $([ $ok -eq 1 ] && echo ok || echo FAILED), $elems elements checked on $HOSTS hosts in $tmax s"
	kill -0 "$SW_PID" 2>/dev/null || fail "cais-switch died"
done

# ---- the switch's final counters ----
kill -INT "$SW_PID"
for _ in $(seq 1 100); do
	kill -0 "$SW_PID" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$SW_PID" 2>/dev/null && fail "cais-switch did not stop within 10 s of SIGINT"
wait "$SW_PID" && SW_RC=0 || SW_RC=$?
SW_PID=""

echo
echo "Results: $HOSTS hosts, sum, every RESULT checked byte for byte"
printf '  %6s %8s %12s %6s %8s %8s %10s %9s %9s %8s %8s %10s\n' \
	"E" "rounds" "elements" "errors" "retx" "time s" "Melem/s" "sw rounds" "sw dup" "resends" "p50 us" "p99 us"
all_ok=1
for k in "${!SIZE_LIST[@]}"; do
	e=${SIZE_LIST[$k]}
	line=$(grep -m1 "^  session 1/$((k + 1)) " "$WORK/switch.log" || true)
	get() { echo "$line" | grep -o "$1 [0-9.]*" | head -n1 | awk '{print $2}' || true; }
	rate=$(awk -v n="${R_ELEMS[$e]}" -v h="$HOSTS" -v t="${R_TIME[$e]}" 'BEGIN { printf "%.1f", (t > 0) ? n / h / t / 1e6 : 0 }')
	printf '  %6s %8s %12s %6s %8s %8s %10s %9s %9s %8s %8s %10s\n' \
		"$e" "${R_ROUNDS[$e]}" "${R_ELEMS[$e]}" "${R_ERR[$e]}" "${R_RETX[$e]}" "${R_TIME[$e]}" "$rate" \
		"$(get rounds)" "$(get dup)" "$(get resends)" "$(get p50)" "$(get p99)"
	[ "${R_OK[$e]}" -eq 1 ] && [ "${R_ERR[$e]}" -eq 0 ] && [ "$(get rounds)" = "${R_ROUNDS[$e]}" ] || all_ok=0
done
echo "  (elements: checked on all hosts; retx: retransmissions of all hosts; time: slowest host;"
echo "   Melem/s: reduced elements per second per host; sw: the switch's counters for the session;"
echo "   p50/p99: round completion time in the switch, first DATA to last)"
echo
echo "cais-switch final counters (SIGINT, exit status $SW_RC):"
sed -n '/cais-switch statistics/,/---------------------------------------------------------------------/p' "$WORK/switch.log"
echo
[ "$SW_RC" -eq 0 ] || fail "cais-switch exited with status $SW_RC"
[ $all_ok -eq 1 ] || fail "some rounds were missing or wrong"
say "done: every round of every size arrived and was right"
