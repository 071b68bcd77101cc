#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Parity check: replay the vectors of tests/parity/vectors (made by the
# cais-switch pipeline, see gen_vectors.c) through a running switch on veth
# ports and compare every output byte.
#
#   run-parity.sh [--target cais-switch|bmv2|both] [--switch PATH] [--vectors DIR]
#                 [--p4 FILE] [--keep-logs]
#
#   cais-switch  the DPDK switch (net_af_packet on the veths, no hugepages)
#   bmv2         dataplane/p4/cais.p4 compiled with p4c (v1model) and run by
#                simple_switch on the same veths, its tables written by
#                scripts/cais-p4-config from the same JSON requests;
#                skipped, with a message, where p4c, simple_switch or
#                simple_switch_CLI is not found (they are not Debian
#                packages: scripts/p4-toolchain.sh builds them; looked for
#                in $CAIS_P4_PREFIX/bin, default /opt/p4/bin, then the PATH)
#   both         (default) one after the other
#
# (or the environment: CAIS_SWITCH). Needs root: without it exits 77 (meson's
# skip code), as does --target bmv2 without the P4 tools. Each simple_switch
# gets a thrift port, --device-id and notifications socket of its own, is
# stopped with SIGTERM, and any CLI answer with "Unknown syntax", "Error" or
# "Invalid" fails the run (scripts/lib/bmv2.sh). Every vector file gets a freshly started switch with the file's
# config. The switch's ports are veths in the root namespace whose peers sit
# in a private namespace with no addresses, no IPv6 and no ARP, where
# replay.py sends and captures raw frames; frames from those peers' own MACs
# (the kernel's) are ignored. Always cleans up: switch, namespace, veths.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SWITCH=${CAIS_SWITCH:-$ROOT/build/dataplane/cais-switch}
VECTORS=$HERE/vectors
P4SRC=$ROOT/dataplane/p4/cais.p4
CONVERTER=$ROOT/scripts/cais-p4-config
# shellcheck source=../../scripts/lib/bmv2.sh
. "$ROOT/scripts/lib/bmv2.sh"
TARGET=both
KEEP_LOGS=0

while [ $# -gt 0 ]; do
	case "$1" in
	--target) TARGET=$2; shift 2 ;;
	--switch) SWITCH=$2; shift 2 ;;
	--vectors) VECTORS=$2; shift 2 ;;
	--p4) P4SRC=$2; shift 2 ;;
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
case "$TARGET" in
cais-switch | bmv2 | both) ;;
*)
	echo "$PROG: --target must be cais-switch, bmv2 or both" >&2
	exit 2
	;;
esac

skip() {
	echo "$PROG: SKIP: $*"
	exit 77
}

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, veths, raw sockets)"
for t in ip python3 timeout; do
	command -v "$t" >/dev/null || skip "$t not found"
done
ls "$VECTORS"/*.txt >/dev/null 2>&1 || skip "no vectors in $VECTORS"
ip netns list >/dev/null 2>&1 || skip "network namespaces do not work here"
# --target bmv2 without the P4 tools: skip before building anything
BM_FOUND=1
bm_find || BM_FOUND=0
[ "$TARGET" != bmv2 ] || [ "$BM_FOUND" -eq 1 ] || skip "bmv2: $BM_WHY"

ID=$(($$ % 100000))
NS="cais-par-$ID"
PORTS=4
SWIFS=()
NSIFS=()
for ((k = 0; k < PORTS; k++)); do
	SWIFS+=("cp${ID}p$k")
	NSIFS+=("rp$k")
done
WORK=$(mktemp -d /tmp/cais-parity.XXXXXX)
LOG=$WORK/switch.log
PREFIX="cais-par-$$"
SW_PID=""
BM_PID=""
FAILED=0

say() { echo "$PROG: $*"; }

stop_switch() {
	[ -n "$SW_PID" ] || return 0
	if kill -0 "$SW_PID" 2>/dev/null; then
		kill -INT "$SW_PID" 2>/dev/null
		for _ in $(seq 1 50); do
			kill -0 "$SW_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$SW_PID" 2>/dev/null || true
	fi
	wait "$SW_PID" 2>/dev/null || true
	SW_PID=""
}

cleanup() {
	local rc=$? k
	trap - EXIT INT TERM
	stop_switch
	bm_stop
	ip netns del "$NS" 2>/dev/null || true
	for k in "${SWIFS[@]}"; do
		ip link del "$k" 2>/dev/null || true
	done
	rm -rf "/var/run/dpdk/$PREFIX" 2>/dev/null || true
	if { [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; } && [ "$KEEP_LOGS" -eq 0 ]; then
		rm -rf "$WORK"
	else
		echo "$PROG: logs kept in $WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'echo "$PROG: interrupted"; exit 130' INT
trap 'echo "$PROG: terminated"; exit 143' TERM

quiet_link() { # [netns] ifname: no IPv6, no offloads that would hand a switch partial checksums
	local pre=()
	if [ $# -eq 2 ]; then
		pre=(ip netns exec "$1")
		shift
	fi
	"${pre[@]}" sh -c "[ ! -d /proc/sys/net/ipv6/conf/$1 ] || sysctl -qw net.ipv6.conf.$1.disable_ipv6=1"
	"${pre[@]}" ethtool -K "$1" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
}

veths_up() {
	local k
	ip netns add "$NS" || { echo "$PROG: cannot create namespace $NS"; exit 1; }
	ip netns exec "$NS" sh -c '[ ! -d /proc/sys/net/ipv6 ] || { sysctl -qw net.ipv6.conf.all.disable_ipv6=1; sysctl -qw net.ipv6.conf.default.disable_ipv6=1; }'
	for ((k = 0; k < PORTS; k++)); do
		ip link add "${SWIFS[k]}" type veth peer name "${NSIFS[k]}" netns "$NS" ||
			{ echo "$PROG: cannot create veth ${SWIFS[k]}"; exit 1; }
		quiet_link "${SWIFS[k]}"
		quiet_link "$NS" "${NSIFS[k]}"
		ip -n "$NS" link set "${NSIFS[k]}" arp off promisc on up
		ip link set "${SWIFS[k]}" arp off up
	done
}

# field of the header of a vector file: agg MAC, agg IP, config
vhead() { awk -v k="$2" '$1 == k { print $2, $3; exit }' "$1"; }

replay() { # vector file, extra replay.py options...
	local f=$1
	shift
	timeout 100 ip netns exec "$NS" python3 "$HERE/replay.py" --vectors "$f" \
		--ifaces "$(
			IFS=,
			echo "${NSIFS[*]}"
		)" "$@"
}

start_cais_switch() { # vector file
	local f=$1 agg cfg vdevs=() k
	agg=($(vhead "$f" agg))
	cfg=$(vhead "$f" config)
	for ((k = 0; k < PORTS; k++)); do
		vdevs+=("--vdev=net_af_packet$k,iface=${SWIFS[k]},blocksz=4096,framesz=2048,framecnt=512")
	done
	: >"$LOG"
	"$SWITCH" --no-huge -m 512 --no-pci --no-shconf --file-prefix="$PREFIX" -l 0 "${vdevs[@]}" \
		-- --agg-ip "${agg[1]}" --agg-mac "${agg[0]}" --config "$VECTORS/${cfg% *}" \
		--ctl none --stats-period 0 >>"$LOG" 2>&1 &
	SW_PID=$!
	for _ in $(seq 1 300); do
		grep -q "running" "$LOG" && return 0
		kill -0 "$SW_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "$PROG: cais-switch did not start; its log:"
	tail -n 30 "$LOG"
	return 1
}

run_cais_switch() {
	local f rc=0
	[ -x "$SWITCH" ] || { say "FAIL: no cais-switch at $SWITCH (give --switch)"; return 1; }
	say "=== cais-switch ($SWITCH)"
	for f in "$VECTORS"/*.txt; do
		start_cais_switch "$f" || { rc=1; continue; }
		replay "$f" --quiet 0.1 || rc=1
		stop_switch
	done
	return $rc
}

# ---- BMv2 ----

start_bmv2() { # vector file
	local f=$1 agg cfg k mac args=()
	agg=($(vhead "$f" agg))
	cfg=$(vhead "$f" config)
	while read -r k mac; do
		args+=(--l2 "$mac=$k")
	done < <(awk '$1 == "station" { print $2, $3 }' "$f")
	python3 "$CONVERTER" --agg-mac "${agg[0]}" --agg-ip "${agg[1]}" --ports "$PORTS" \
		"${args[@]}" "$VECTORS/${cfg% *}" >"$WORK/commands.txt" ||
		{ say "FAIL: cais-p4-config refused $cfg"; return 1; }
	bm_start "$WORK/p4/$(basename "${P4SRC%.p4}").json" "$WORK" "$LOG" "${SWIFS[@]}" || { say "FAIL: simple_switch did not start"; return 1; }
	bm_cli "$WORK/commands.txt" "$WORK/cli.log" || { say "FAIL: the tables of $cfg were not written"; return 1; }
	return 0
}

run_bmv2() {
	local f rc=0
	if [ "$BM_FOUND" -eq 0 ]; then
		say "SKIP bmv2: $BM_WHY"
		return 77
	fi
	say "=== bmv2 ($BM_SS running $P4SRC; $("$BM_P4C" --version 2>/dev/null | head -n1), simple_switch $("$BM_SS" --version 2>/dev/null | head -n1))"
	bm_compile "$P4SRC" "$WORK/p4" "$WORK/p4c.log" || { say "FAIL: p4c"; return 1; }
	for f in "$VECTORS"/*.txt; do
		start_bmv2 "$f" || { rc=1; bm_stop; continue; }
		replay "$f" --quiet 0.5 --wait 5 || rc=1
		bm_stop
	done
	return $rc
}

veths_up
RC_SW=0 RC_BM=0
if [ "$TARGET" != bmv2 ]; then
	run_cais_switch || RC_SW=1
fi
if [ "$TARGET" != cais-switch ]; then
	run_bmv2
	RC_BM=$?
fi
[ "$TARGET" = bmv2 ] && [ "$RC_BM" -eq 77 ] && exit 77
if [ "$RC_SW" -ne 0 ] || { [ "$RC_BM" -ne 0 ] && [ "$RC_BM" -ne 77 ]; }; then
	say "FAIL (cais-switch: $([ "$TARGET" = bmv2 ] && echo not run || { [ $RC_SW -eq 0 ] && echo ok || echo failed; }), bmv2: $(
		case $RC_BM in 0) [ "$TARGET" = cais-switch ] && echo not run || echo ok ;; 77) echo skipped ;; *) echo failed ;; esac
	))"
	exit 1
fi
say "PASS (cais-switch: $([ "$TARGET" = bmv2 ] && echo not run || echo ok), bmv2: $(
	case $RC_BM in 0) [ "$TARGET" = cais-switch ] && echo not run || echo ok ;; *) echo skipped ;; esac
))"
exit 0
