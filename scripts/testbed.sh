#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# testbed.sh: a CAIS cluster on one machine, made of network namespaces.
#
#   testbed.sh up     --name NAME --hosts N [--mtu 9000] [--net X]
#   testbed.sh down   --name NAME
#   testbed.sh status --name NAME
#   testbed.sh env    --name NAME        (shell assignments, for eval)
#
# Host i (1..N) is the namespace NAME-h<i> with
#   eth0   data: a veth whose peer NAMEs<i> (root namespace, no IP) is a switch
#          port, driven by cais-switch through net_af_packet;
#          198.18.X.i/24, MAC 02:ca:15:X:00:i (hex)
#   mgmt0  management: a veth whose peer NAMEm<i> is enslaved to the Linux
#          bridge NAMEbr (198.19.X.254/24); 198.19.X.i/24
# 198.18.X.254 is the aggregator address: the switch owns it, nobody
# configures it. Addresses come from the RFC 2544 benchmarking range
# (198.18.0.0/15), so they never clash with real networks.
set -euo pipefail

PROG=${0##*/}
MAX_HOSTS=16

usage() {
	cat <<EOF
Usage: $PROG up     --name NAME --hosts N [--mtu BYTES] [--net X]
       $PROG down   --name NAME
       $PROG status --name NAME
       $PROG env    --name NAME
       $PROG --help

A CAIS cluster on one machine (needs root): hosts NAME-h1..NAME-hN are network
namespaces, each with a data interface eth0 (veth; its peer NAMEs<i> in the
root namespace is a cais-switch port, driven by net_af_packet) and a
management interface mgmt0 (veth to the bridge NAMEbr in the root namespace).

  up      create the testbed (an existing one of that name is torn down first;
          a failed or interrupted 'up' removes what it created)
  down    remove everything of that name (never fails when nothing exists)
  status  show what exists; exit 0 when the testbed is complete, 1 otherwise
  env     print shell assignments describing the testbed, for eval:
            TB_NAME TB_NET TB_HOSTS TB_MTU TB_AGG_IP TB_DATA_NET TB_MGMT_NET
            TB_BRIDGE TB_BRIDGE_IP TB_SWIFS (all switch ports, in order)
            TB_NS_i TB_IP_i TB_MAC_i TB_SWIF_i TB_MGMT_IP_i TB_MGMTIF_i

Options:
  --name NAME   1..6 characters [a-z0-9] (interface names stay within 15)
  --hosts N     number of hosts, 1..$MAX_HOSTS
  --mtu BYTES   MTU of the data veths, 1280..9000 (default 9000)
  --net X       the third octet, 1..250, of 198.18.X.0/24 (data) and
                198.19.X.0/24 (management); default: derived from NAME

Addresses: data 198.18.X.i/24, aggregator 198.18.X.254 (the switch's),
management 198.19.X.i/24 with the bridge at 198.19.X.254,
eth0 MACs 02:ca:15:X:00:i (hex).
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

need_root() {
	[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth, bridge)"
	command -v ip >/dev/null || die "ip (iproute2) not found; run scripts/install-deps.sh"
}

# The default X of a name: 1..250, stable.
net_of_name() {
	local sum
	sum=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
	echo $((sum % 250 + 1))
}

hex2() { printf '%02x' "$1"; }

# Namespaces of the testbed NAME, sorted by host number.
list_ns() {
	ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NAME}-h[0-9]+\$" | sort -V || true
}

# Root-namespace links of the testbed NAME.
list_links() {
	ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
		grep -E "^${NAME}(s[0-9]+|m[0-9]+|br)\$" || true
}

# Processes still running in the testbed's namespaces (they would keep a
# deleted namespace, and its veths, alive).
ns_pids() {
	local ns
	for ns in $(list_ns); do
		ip netns pids "$ns" 2>/dev/null || true
	done
}

do_down() {
	local ns l pids
	pids=$(ns_pids)
	if [ -n "$pids" ]; then
		echo "$PROG: stopping processes left in $NAME's namespaces: $(echo $pids)" >&2
		kill -TERM $pids 2>/dev/null || true
		for _ in $(seq 1 40); do
			[ -z "$(ns_pids)" ] && break
			sleep 0.05
		done
		pids=$(ns_pids)
		[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
	fi
	for ns in $(list_ns); do
		ip netns del "$ns" 2>/dev/null || true
	done
	# veth peers go with their namespace; remove what is left (half-made pairs, the bridge)
	for l in $(list_links); do
		ip link del "$l" 2>/dev/null || true
	done
	# namespaces are dismantled asynchronously: wait (bounded) until nothing is left
	for _ in $(seq 1 100); do
		[ -z "$(list_ns)$(list_links)" ] && return 0
		sleep 0.05
		for l in $(list_links); do
			ip link del "$l" 2>/dev/null || true
		done
	done
	echo "$PROG: warning: left behind: $(list_ns) $(list_links)" >&2
}

# Turn off the offloads that break a software switch, on one interface.
no_offloads() { # [netns] ifname
	local pre=()
	if [ $# -eq 2 ]; then
		pre=(ip netns exec "$1")
		shift
	fi
	"${pre[@]}" ethtool -K "$1" tx off rx off tso off gso off gro off >/dev/null 2>&1 ||
		"${pre[@]}" ethtool -K "$1" tx off >/dev/null 2>&1 ||
		die "ethtool -K $1 tx off failed"
}

# No IPv6 on an interface (no router solicitations, no MLD): quiet links.
# [netns] sysctl-path-suffix...; nothing to do where the kernel has no IPv6.
no_ipv6() {
	local pre=() k
	if [ "$1" = "-n" ]; then
		pre=(ip netns exec "$2")
		shift 2
	fi
	for k in "$@"; do
		"${pre[@]}" sh -c "[ ! -d /proc/sys/net/ipv6 ] || sysctl -qw net.ipv6.conf.$k.disable_ipv6=1" ||
			die "cannot disable IPv6 on $k"
	done
}

UP_IN_PROGRESS=0
up_cleanup() {
	local rc=$?
	if [ "$UP_IN_PROGRESS" -eq 1 ]; then
		echo "$PROG: 'up' did not finish; removing the half-made testbed $NAME" >&2
		UP_IN_PROGRESS=0
		do_down
		[ "$rc" -ne 0 ] || rc=1
	fi
	exit "$rc"
}

do_up() {
	local i ns sw mg mac ip ipm x16 other
	command -v ethtool >/dev/null || die "ethtool not found; run scripts/install-deps.sh"
	modprobe veth 2>/dev/null || true
	modprobe bridge 2>/dev/null || true

	do_down
	# the management subnet lives in the root namespace: refuse a clash
	other=$(ip -o -4 addr show 2>/dev/null | awk -v p="198.19.$NET." 'index($4, p) == 1 {print $2}' | head -n1)
	[ -z "$other" ] || die "198.19.$NET.0/24 is already used by $other; choose another --net"

	UP_IN_PROGRESS=1
	trap up_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	x16=$(hex2 "$NET")
	ip link add "${NAME}br" type bridge stp_state 0
	no_ipv6 "${NAME}br"
	ip addr add "198.19.$NET.254/24" dev "${NAME}br"
	ip link set "${NAME}br" up

	for ((i = 1; i <= HOSTS; i++)); do
		ns="${NAME}-h$i"
		sw="${NAME}s$i"
		mg="${NAME}m$i"
		mac="02:ca:15:$x16:00:$(hex2 "$i")"
		ip="198.18.$NET.$i"
		ipm="198.19.$NET.$i"

		ip netns add "$ns"
		no_ipv6 -n "$ns" all default
		ip -n "$ns" link set lo up

		# data: eth0 <-> NAMEs<i> (switch port)
		ip link add "$sw" mtu "$MTU" type veth peer name eth0 netns "$ns" mtu "$MTU"
		no_ipv6 "$sw"
		ip -n "$ns" link set eth0 address "$mac"
		no_offloads "$sw"
		no_offloads "$ns" eth0
		ip -n "$ns" addr add "$ip/24" dev eth0

		# management: mgmt0 <-> NAMEm<i> in the bridge
		ip link add "$mg" type veth peer name mgmt0 netns "$ns"
		no_ipv6 "$mg"
		no_offloads "$mg"
		no_offloads "$ns" mgmt0
		ip link set "$mg" master "${NAME}br"
		ip -n "$ns" addr add "$ipm/24" dev mgmt0

		ip link set "$sw" up
		ip link set "$mg" up
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link set mgmt0 up
	done
	UP_IN_PROGRESS=0
	trap - EXIT INT TERM
	echo "$PROG: testbed $NAME up: $HOSTS host(s), data 198.18.$NET.0/24 (MTU $MTU," \
		"aggregator 198.18.$NET.254), management 198.19.$NET.0/24 on ${NAME}br"
}

# Discover an existing testbed: sets HOSTS, NET, MTU; returns 1 when there is none.
discover() {
	local nss addr
	nss=$(list_ns)
	[ -n "$nss" ] || return 1
	HOSTS=$(echo "$nss" | wc -l)
	addr=$(ip -o -4 addr show dev "${NAME}br" 2>/dev/null | awk '{print $4}' | head -n1)
	[ -n "$addr" ] || return 1
	NET=$(echo "$addr" | cut -d. -f3)
	MTU=$(cat "/sys/class/net/${NAME}s1/mtu" 2>/dev/null || echo "?")
	return 0
}

do_env() {
	local i x16 swifs=""
	discover || die "no testbed named $NAME (run: $PROG up --name $NAME --hosts N)"
	x16=$(hex2 "$NET")
	printf 'TB_NAME=%q\n' "$NAME"
	printf 'TB_NET=%q\n' "$NET"
	printf 'TB_HOSTS=%q\n' "$HOSTS"
	printf 'TB_MTU=%q\n' "$MTU"
	printf 'TB_AGG_IP=%q\n' "198.18.$NET.254"
	printf 'TB_DATA_NET=%q\n' "198.18.$NET.0/24"
	printf 'TB_MGMT_NET=%q\n' "198.19.$NET.0/24"
	printf 'TB_BRIDGE=%q\n' "${NAME}br"
	printf 'TB_BRIDGE_IP=%q\n' "198.19.$NET.254"
	for ((i = 1; i <= HOSTS; i++)); do
		printf 'TB_NS_%d=%q\n' "$i" "${NAME}-h$i"
		printf 'TB_IP_%d=%q\n' "$i" "198.18.$NET.$i"
		printf 'TB_MAC_%d=%q\n' "$i" "02:ca:15:$x16:00:$(hex2 "$i")"
		printf 'TB_SWIF_%d=%q\n' "$i" "${NAME}s$i"
		printf 'TB_MGMT_IP_%d=%q\n' "$i" "198.19.$NET.$i"
		printf 'TB_MGMTIF_%d=%q\n' "$i" "${NAME}m$i"
		swifs="$swifs${swifs:+ }${NAME}s$i"
	done
	printf 'TB_SWIFS=%q\n' "$swifs"
}

do_status() {
	local nss links i ok=1 st
	nss=$(list_ns)
	links=$(list_links)
	if [ -z "$nss" ] && [ -z "$links" ]; then
		echo "testbed $NAME: absent"
		return 1
	fi
	if ! discover; then
		echo "testbed $NAME: incomplete"
		echo "  namespaces: ${nss:-none}" | tr '\n' ' '
		echo
		echo "  links: ${links:-none}" | tr '\n' ' '
		echo
		return 1
	fi
	echo "testbed $NAME: $HOSTS host(s), data 198.18.$NET.0/24 MTU $MTU, aggregator 198.18.$NET.254," \
		"management 198.19.$NET.0/24 on ${NAME}br"
	for ((i = 1; i <= HOSTS; i++)); do
		st="ok"
		if ! ip netns list | awk '{print $1}' | grep -qx "${NAME}-h$i"; then
			st="namespace missing"
		elif ! ip -n "${NAME}-h$i" -o link show eth0 2>/dev/null | grep -q 'state UP\|LOWER_UP'; then
			st="eth0 missing or down"
		elif ! ip -o link show "${NAME}s$i" 2>/dev/null | grep -q 'LOWER_UP'; then
			st="switch port ${NAME}s$i missing or down"
		elif ! ip -o link show "${NAME}m$i" 2>/dev/null | grep -q "master ${NAME}br"; then
			st="${NAME}m$i not in ${NAME}br"
		fi
		[ "$st" = ok ] || ok=0
		printf '  h%-2d %-10s eth0 198.18.%s.%-3d port %-9s mgmt0 198.19.%s.%-3d %s\n' \
			"$i" "${NAME}-h$i" "$NET" "$i" "${NAME}s$i" "$NET" "$i" "$st"
	done
	[ "$ok" -eq 1 ]
}

# ---- command line ----
[ $# -gt 0 ] || {
	usage >&2
	exit 2
}
case "$1" in
-h | --help)
	usage
	exit 0
	;;
up | down | status | env) CMD=$1 ;;
*) usage_error "unknown command '$1'" ;;
esac
shift
NAME="" HOSTS="" MTU=9000 NET=""
while [ $# -gt 0 ]; do
	case "$1" in
	--name | --hosts | --mtu | --net)
		[ $# -ge 2 ] || usage_error "$1 needs a value"
		case "$1" in
		--name) NAME=$2 ;;
		--hosts) HOSTS=$2 ;;
		--mtu) MTU=$2 ;;
		--net) NET=$2 ;;
		esac
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) usage_error "unknown option '$1'" ;;
	esac
done

[ -n "$NAME" ] || usage_error "--name is required"
[[ "$NAME" =~ ^[a-z0-9]{1,6}$ ]] || usage_error "--name '$NAME': 1..6 characters [a-z0-9]"
is_int() { [[ "$1" =~ ^[0-9]{1,5}$ ]]; }
if [ "$CMD" = up ]; then
	[ -n "$HOSTS" ] || usage_error "up needs --hosts N"
	{ is_int "$HOSTS" && [ "$HOSTS" -ge 1 ] && [ "$HOSTS" -le $MAX_HOSTS ]; } ||
		usage_error "--hosts '$HOSTS': an integer in 1..$MAX_HOSTS"
	{ is_int "$MTU" && [ "$MTU" -ge 1280 ] && [ "$MTU" -le 9000 ]; } ||
		usage_error "--mtu '$MTU': an integer in 1280..9000"
	[ -n "$NET" ] || NET=$(net_of_name "$NAME")
	{ is_int "$NET" && [ "$NET" -ge 1 ] && [ "$NET" -le 250 ]; } ||
		usage_error "--net '$NET': an integer in 1..250"
	HOSTS=$((10#$HOSTS)) MTU=$((10#$MTU)) NET=$((10#$NET))
fi

need_root
case "$CMD" in
up) do_up ;;
down) do_down ;;
status) do_status ;;
env) do_env ;;
esac
