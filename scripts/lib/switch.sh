# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
#
# Sourced by the scripts that run cais-switch on the namespace testbed
# (scripts/demo.sh, bench/e2e.sh, tests/integration/*.sh); safe under set -e. Expects the
# testbed's variables in the environment (eval "$(testbed.sh env --name N)").
#
#   cb_vdevs N                 -> CB_VDEVS: one net_af_packet vdev per host port,
#                                 with CB_SW_LCORES (default 1) queue pairs
#                                 each (af_packet's fanout hash spreads the
#                                 flows over them)
#   cb_members N PORT [FLOWS]  -> CB_MEMBERS (session.add members, JSON; with
#                                 FLOWS > 1 each member's "ports": PORT..PORT +
#                                 FLOWS - 1, PROTOCOL.md E7) and CB_PEERS
#                                 (IP:PORT,..., rank order)
#   cb_switch_start SWITCH PREFIX LOG N ARGS...
#                              -> starts SWITCH, CB_SW_LCORES data lcores
#                                 (default 1), on the N hosts' ports with the
#                                 app options ARGS (after --agg-ip), waits up to
#                                 30 s for 'running'; sets CB_SW_PID; returns 1
#                                 (with the reason on stderr) if it did not start
#   cb_switch_stop [SECONDS]   -> SIGINT, wait (default 10 s), SIGKILL after;
#                                 CB_SW_RC: its exit status (137: it had to be
#                                 killed); CB_SW_PID cleared
#   cb_bench_session FILE N SLOTS ELEMS SCALE
#                              -> FILE: cais-switch --config for the benchmarks'
#                                 session 1 of the N members of CB_MEMBERS,
#                                 loss_hints on; tensor 1 FIXED32 at SCALE,
#                                 tensor 2 BLOCK16
#   cb_host_loss N P [RTO]     -> each of the N hosts drops P% of its IP input
#                                 (nftables; none for 0) and gets rto_min RTO
#                                 (default 5ms; "kernel": the route left as it
#                                 is) on its route to the data network; returns
#                                 1 (with the reason on stderr) on failure
#   cb_to_bytes B              -> B with an optional K/M suffix, in bytes
#   cb_human BYTES             -> 128K, 64M (or the number)
#   cb_skip, cb_need_root_and  -> for test scripts: see below

cb_to_bytes() {
	case "$1" in
	*K | *k) echo $((${1%?} * 1024)) ;;
	*M | *m) echo $((${1%?} * 1048576)) ;;
	*) echo "$1" ;;
	esac
}

cb_human() {
	if [ "$1" -ge 1048576 ] && [ $(($1 % 1048576)) -eq 0 ]; then
		echo "$(($1 / 1048576))M"
	elif [ "$1" -ge 1024 ] && [ $(($1 % 1024)) -eq 0 ]; then
		echo "$(($1 / 1024))K"
	else
		echo "$1"
	fi
}

cb_vdevs() {
	local i
	CB_VDEVS=()
	for ((i = 1; i <= $1; i++)); do
		CB_VDEVS+=("--vdev=net_af_packet$((i - 1)),iface=$(eval "echo \$TB_SWIF_$i"),blocksz=16384,framesz=16384,framecnt=512,qpairs=${CB_SW_LCORES:-1}")
	done
}

cb_members() {
	local i ip
	CB_MEMBERS="" CB_PEERS=""
	for ((i = 1; i <= $1; i++)); do
		ip=$(eval "echo \$TB_IP_$i")
		CB_MEMBERS+="${CB_MEMBERS:+, }{\"rank\": $((i - 1)), \"mac\": \"$(eval "echo \$TB_MAC_$i")\", \"ip\": \"$ip\", \"port\": $2${3:+, \"ports\": $3}}"
		CB_PEERS+="${CB_PEERS:+,}$ip:$2"
	done
}

cb_bench_session() {
	# tensor 2's scale is BLOCK16's floor (E4): its blocks carry the magnitude
	cat >"$1" <<JSON
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $2, "slots": $3,
    "elems_per_packet": $4, "loss_hints": 1, "members": [$CB_MEMBERS]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": $5}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 2, "op": "sum",
    "scale": 16777216, "wire": "block16"}}
]
JSON
}

cb_host_loss() {
	local i ns route rto=${3:-5ms}
	for ((i = 1; i <= $1; i++)); do
		ns=$(eval "echo \$TB_NS_$i")
		if [ "$2" -gt 0 ]; then # the table goes with the namespace
			ip netns exec "$ns" nft -f - <<NFT || { echo "nft: the loss rule on host $i" >&2 && return 1; }
table inet cais_host_loss {
	chain in { type filter hook input priority 0; numgen random mod 100 < $2 drop; }
}
NFT
		fi
		# a lost TCP segment costs Linux's minimum RTO, 200 ms: the line-ups
		# before each iteration (TCP) would start the ranks that far apart,
		# and that, not the collective, would be what the times measure
		# (libcais sets its own floor per socket where Linux has
		# TCP_RTO_MIN_US; gloo and MPI rely on this)
		[ "$rto" != kernel ] || continue
		route=$(ip netns exec "$ns" ip -4 route show dev eth0 scope link | head -n 1)
		# shellcheck disable=SC2086 # the route is words: the command's arguments
		[ -n "$route" ] && ip netns exec "$ns" ip route change $route dev eth0 rto_min "$rto" ||
			{ echo "host $i: rto_min on its route to the data network" >&2 && return 1; }
	done
	return 0
}

cb_switch_start() {
	local switch=$1 prefix=$2 log=$3 n=$4 rc
	shift 4
	cb_vdevs "$n"
	# The switch's control endpoint defaults to 127.0.0.1:51734; a caller
	# that names none gets a port of its own, so two testbeds can run at once.
	case " $* " in
	*" --ctl "*) ;;
	*) set -- "$@" --ctl "127.0.0.1:$((20000 + (RANDOM * 32768 + RANDOM + $$) % 30000))" ;;
	esac
	rm -rf "/var/run/dpdk/$prefix" 2>/dev/null || true
	: >"$log"
	"$switch" --no-huge -m 512 --no-pci --no-shconf --file-prefix="$prefix" \
		-l "0-$((${CB_SW_LCORES:-1} - 1))" "${CB_VDEVS[@]}" \
		-- --agg-ip "$TB_AGG_IP" "$@" >>"$log" 2>&1 &
	CB_SW_PID=$!
	for _ in $(seq 1 300); do # 30 s
		grep -q "running" "$log" && return 0
		if ! kill -0 "$CB_SW_PID" 2>/dev/null; then
			rc=0
			wait "$CB_SW_PID" || rc=$?
			CB_SW_PID=""
			echo "cais-switch exited during start (status $rc); its log: $log" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "cais-switch did not report 'running' within 30 s; its log: $log" >&2
	return 1
}

cb_switch_stop() {
	local wait_s=${1:-10}
	CB_SW_RC=0
	[ -n "${CB_SW_PID:-}" ] || return 0
	kill -INT "$CB_SW_PID" 2>/dev/null || true
	for _ in $(seq 1 $((wait_s * 10))); do
		kill -0 "$CB_SW_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$CB_SW_PID" 2>/dev/null || true
	wait "$CB_SW_PID" 2>/dev/null || CB_SW_RC=$?
	CB_SW_PID=""
}

# Test scripts (meson's skip status is 77): cb_skip REASON...; cb_need_root_and
# WHY TOOL...: skip unless root and every TOOL is on the PATH.
cb_skip() {
	echo "${PROG:-${0##*/}}: SKIP: $*"
	exit 77
}

cb_need_root_and() {
	local why=$1 t
	shift
	[ "$(id -u)" -eq 0 ] || cb_skip "needs root ($why)"
	for t in "$@"; do
		command -v "$t" >/dev/null || cb_skip "$t not found (scripts/install-deps.sh installs it)"
	done
}
