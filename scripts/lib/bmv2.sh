# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
#
# Sourced by the scripts that run dataplane/p4/cais.p4 in BMv2's
# simple_switch (tests/parity/run-parity.sh, tests/p4/bmv2_e2e.sh); safe
# under set -e and set -u. The toolchain is what scripts/p4-toolchain.sh
# builds (p4c and BMv2 are not Debian packages), found in $CAIS_P4_PREFIX/bin
# (default /opt/p4), else on the PATH.
#
#   bm_find                 -> BM_P4C, BM_SS, BM_CLI (the three tools); returns
#                              1 with BM_WHY (what is missing, where it looked)
#   bm_compile SRC DIR LOG  -> p4c --target bmv2 --arch v1model -o DIR SRC
#                              (DIR/cais.json); returns 1 on an error; prints
#                              every warning p4c gave (there should be none)
#   bm_start JSON WORK LOG IF0 IF1 ...
#                           -> simple_switch on the interfaces (port k =
#                              IFk) with a thrift port, --device-id and
#                              --notifications-addr (an ipc socket in WORK) of
#                              its own, so other BMv2s on the host do not
#                              matter; waits until its CLI answers; sets
#                              BM_PID, BM_THRIFT; returns 1 (reason on
#                              stderr) if it did not start
#   bm_cli CMDS OUT         -> feeds the simple_switch_CLI commands of file
#                              CMDS (comment and blank lines stripped) to the
#                              running switch; returns 1, printing the lines,
#                              when any answer has "Unknown syntax", "Error" or
#                              "Invalid" in it, or when the multicast node
#                              handles are not 0, 1, ... in creation order
#                              (cais-p4-config relies on it)
#   bm_stop                 -> SIGTERM (simple_switch started in a script's
#                              background ignores SIGINT), up to 5 s, then
#                              SIGKILL; BM_PID cleared

bm_find() {
	local prefix=${CAIS_P4_PREFIX:-/opt/p4} t p missing=""
	BM_WHY=""
	for t in p4c simple_switch simple_switch_CLI; do
		if [ -x "$prefix/bin/$t" ]; then
			p=$prefix/bin/$t
		else
			p=$(command -v "$t" 2>/dev/null) || p=""
		fi
		[ -n "$p" ] || missing+=" $t"
		case $t in
		p4c) BM_P4C=$p ;;
		simple_switch) BM_SS=$p ;;
		simple_switch_CLI) BM_CLI=$p ;;
		esac
	done
	if [ -n "$missing" ]; then
		BM_WHY="not found in $prefix/bin (CAIS_P4_PREFIX) nor on the PATH:$missing (build them with scripts/p4-toolchain.sh; dataplane/p4/README.md)"
		return 1
	fi
	return 0
}

bm_compile() { # src dir log
	mkdir -p "$2"
	if ! "$BM_P4C" --target bmv2 --arch v1model -o "$2" "$1" >"$3" 2>&1; then
		echo "p4c could not compile $1:" >&2
		tail -n 30 "$3" >&2
		return 1
	fi
	if grep -qi "warning" "$3"; then
		echo "p4c warnings for $1 (dataplane/p4/README.md explains every one; there should be none):" >&2
		grep -i "warning" "$3" >&2
	fi
	[ -s "$2/$(basename "${1%.p4}").json" ] || {
		echo "p4c wrote no $2/$(basename "${1%.p4}").json" >&2
		return 1
	}
}

# A TCP port nobody listens on, from a per-process starting point.
bm_free_port() {
	local p=$((20000 + ($$ * 7 + RANDOM) % 20000)) k
	for ((k = 0; k < 200; k++)); do
		if ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
			echo "$p"
			return 0
		fi
		p=$((p + 1))
	done
	return 1
}

bm_start() { # json work log if0 if1 ...
	local json=$1 work=$2 log=$3 k=0 ifs=() ifname
	shift 3
	for ifname in "$@"; do
		ifs+=(-i "$k@$ifname")
		k=$((k + 1))
	done
	BM_THRIFT=$(bm_free_port) || {
		echo "no free TCP port for simple_switch's thrift server" >&2
		return 1
	}
	: >"$log"
	"$BM_SS" --thrift-port "$BM_THRIFT" --device-id $((($$ + BM_THRIFT) % 60000 + 1000)) \
		--notifications-addr "ipc://$work/bmv2-notifications.ipc" "${ifs[@]}" "$json" \
		>>"$log" 2>&1 &
	BM_PID=$!
	for _ in $(seq 1 150); do # 15 s (the CLI itself takes ~0.3 s to start)
		if ! kill -0 "$BM_PID" 2>/dev/null; then
			wait "$BM_PID" 2>/dev/null || true
			BM_PID=""
			echo "simple_switch exited during start; its log ($log):" >&2
			tail -n 20 "$log" >&2
			return 1
		fi
		echo | "$BM_CLI" --thrift-port "$BM_THRIFT" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "simple_switch's CLI did not answer within 15 s; its log ($log):" >&2
	tail -n 20 "$log" >&2
	return 1
}

bm_cli() { # commands out
	local cmds=$1 out=$2 want=0 h bad=0
	grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$cmds" >"$out.in"
	if ! "$BM_CLI" --thrift-port "$BM_THRIFT" <"$out.in" >"$out" 2>&1; then
		echo "simple_switch_CLI failed; its output ($out):" >&2
		tail -n 20 "$out" >&2
		return 1
	fi
	if grep -qiE "unknown syntax|error|invalid" "$out"; then
		echo "simple_switch_CLI refused commands ($out):" >&2
		grep -iE "unknown syntax|error|invalid" "$out" | head -n 20 >&2
		return 1
	fi
	for h in $(sed -n 's/.*node was created with handle \([0-9]*\).*/\1/p' "$out"); do
		[ "$h" -eq "$want" ] || bad=1
		want=$((want + 1))
	done
	if [ "$bad" -ne 0 ] || [ "$want" -ne "$(grep -c '^mc_node_create' "$out.in")" ]; then
		echo "simple_switch numbered the multicast nodes otherwise than 0, 1, ... ($out)" >&2
		return 1
	fi
	return 0
}

bm_stop() {
	[ -n "${BM_PID:-}" ] || return 0
	if kill -0 "$BM_PID" 2>/dev/null; then
		kill -TERM "$BM_PID" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$BM_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$BM_PID" 2>/dev/null || true
	fi
	wait "$BM_PID" 2>/dev/null || true
	BM_PID=""
}
