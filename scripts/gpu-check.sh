#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# gpu-check.sh: PyTorch all-reduce through cais-switch on a machine with one
# NVIDIA GPU, with the NCCL of /usr/local/cuda (2.28.9). 2 to 4 NCCL ranks
# run as processes on GPU 0, each in its own network namespace of the
# testbed (scripts/testbed.sh) and each its own "node" (a distinct
# NCCL_HOSTID), with NCCL_NET_PLUGIN naming the staged libnccl-net-cais.so
# by its absolute path and NCCL_COLLNET_ENABLE=1. Two passes:
#   collnet  NCCL_ALGO=allreduce:collnetchain: every all-reduce through the
#            plugin's CollNet and the switch (fp32 and bf16, every element);
#   tuner    no NCCL_ALGO, sizes on both sides of the tuner's threshold: the
#            small ones must take NCCL's ring or tree over the plugin's TCP
#            transport (NET/CAIS), the large ones CollNet, chosen by the
#            plugin's tuner; every element checked.
# Prints NCCL's and torch's versions, which algorithm each size took, and
# the times. Bounded: each pass --timeout seconds at most.
#
#   gpu-check.sh [--ranks N] [--sizes LIST] [--iters K] [--threshold BYTES]
#                [--nccl PATH] [--build DIR] [--stage DIR] [--timeout S]
#                [--stage-only] [--dry-run] [--keep-logs]
#
#   --ranks N        ranks (2..4, default 2: the ranks time-slice one GPU,
#                    and four CUDA contexts on one GPU are slow)
#   --sizes LIST     the collnet pass's sizes in bytes (default
#                    65536,1048576,8388608)
#   --iters K        timed iterations per size (default 5)
#   --threshold B    CAIS_THRESHOLD of the tuner pass (default 524288); its
#                    sizes are B/4, B/2, B, 2B, 8B
#   --nccl PATH      the libnccl.so.2 to use (default: the one under
#                    /usr/local/cuda); preloaded into the ranks, and torch
#                    must report its version
#   --build DIR      where the built binaries are (default: build-nccl, then build)
#   --stage DIR      the staging directory (default: gpu-stage in the repository)
#   --timeout S      bound on each pass (default 180)
#   --stage-only     only stage: copy cais-switch, libnccl-net-cais.so, the DPDK
#                    drivers and every shared library they need (ldd) that is not
#                    the C library into DIR (do this where the project is built)
#   --dry-run        stage (when a build is there), check that every staged binary
#                    finds its libraries, print what the run would do; no root, no GPU
#   --keep-logs      keep the logs also when the check passes
#
# The stage travels to the GPU machine with the working tree: gpu-stage/ is
# ignored by git, so the device tool must be told to carry it, e.g.
#   run(command="scripts/gpu-check.sh", carry=["gpu-stage"], timeout_s=500)
# (it stays well under the tool's 64 MiB; --stage-only prints its size).
#
# The machine needs root, ip (iproute2), network namespaces, veth, AF_PACKET
# sockets, python3 with torch (CUDA) and a GPU, and the NCCL to test; where
# one of them is missing the script says which and exits 77 (skipped).
# The python ranks get no LD_LIBRARY_PATH from here: the plugin finds its
# libraries beside it (its run path is $ORIGIN), and only cais-switch runs
# with the staged ones.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
RANKS=2
SIZES=65536,1048576,8388608
ITERS=5
THRESHOLD=524288
NCCL_LIB=""
BUILD=""
STAGE=$ROOT/gpu-stage
PASS_TIMEOUT=180
STAGE_ONLY=0
DRY_RUN=0
KEEP_LOGS=0
PORT=47000
SLOTS=64
STAGE_MAX_BYTES=$((60 << 20)) # the device tool carries at most 64 MiB

usage() { sed -n '4,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
	case "$1" in
	--ranks) RANKS=$2; shift 2 ;;
	--sizes) SIZES=$2; shift 2 ;;
	--iters) ITERS=$2; shift 2 ;;
	--threshold) THRESHOLD=$2; shift 2 ;;
	--nccl) NCCL_LIB=$2; shift 2 ;;
	--build) BUILD=$2; shift 2 ;;
	--stage) STAGE=$2; shift 2 ;;
	--timeout) PASS_TIMEOUT=$2; shift 2 ;;
	--stage-only) STAGE_ONLY=1; shift ;;
	--dry-run) DRY_RUN=1; shift ;;
	--keep-logs) KEEP_LOGS=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "$PROG: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
[[ "$RANKS" =~ ^[2-4]$ ]] || { echo "$PROG: --ranks must be 2, 3 or 4" >&2; exit 2; }
[[ "$SIZES" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "$PROG: --sizes: bytes, comma-separated" >&2; exit 2; }
[[ "$ITERS" =~ ^[1-9][0-9]*$ ]] || { echo "$PROG: --iters: a positive integer" >&2; exit 2; }
[[ "$THRESHOLD" =~ ^[1-9][0-9]*$ ]] && [ "$THRESHOLD" -ge 4096 ] ||
	{ echo "$PROG: --threshold: bytes, 4096 or more" >&2; exit 2; }
[[ "$PASS_TIMEOUT" =~ ^[1-9][0-9]*$ ]] || { echo "$PROG: --timeout: seconds" >&2; exit 2; }
case "$STAGE" in /*) ;; *) STAGE=$PWD/$STAGE ;; esac # NCCL_NET_PLUGIN needs an absolute path
TUNER_SIZES=$((THRESHOLD / 4)),$((THRESHOLD / 2)),$THRESHOLD,$((THRESHOLD * 2)),$((THRESHOLD * 8))

T0=$(date +%s.%N)
say() { echo "[$(awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%6.1f", t1 - t0 }') s] $*"; }
die() { say "FAIL: $*"; exit 1; }
skip() { say "SKIP: $*"; exit 77; }

# ---- staging ----

# Shared libraries a binary needs, except the C library's own (the target has those).
needed_libs() {
	ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
		grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' || true
}

find_build() {
	local d
	for d in ${BUILD:+"$BUILD"} "$ROOT/build-nccl" "$ROOT/build"; do
		if [ -x "$d/dataplane/cais-switch" ] && [ -f "$d/agent/nccl/libnccl-net-cais.so" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

do_stage() {
	local build=$1 pmd f lib bytes
	rm -rf "$STAGE"
	mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/pmds" || die "cannot create $STAGE"
	cp "$build/dataplane/cais-switch" "$STAGE/bin/"
	cp "$build/agent/nccl/libnccl-net-cais.so" "$STAGE/lib/"
	cp "$ROOT/scripts/testbed.sh" "$STAGE/bin/"
	command -v ethtool >/dev/null && cp "$(command -v ethtool)" "$STAGE/bin/"
	# DPDK loads its drivers (vdev bus, mempool ops, af_packet) with dlopen: ldd
	# does not list them
	pmd=$(strings "$(ldd "$STAGE/bin/cais-switch" | awk '/librte_eal/ { print $3 }')" 2>/dev/null |
		sed -n 's/^DPDK_PLUGIN_PATH=//p' | head -n1)
	for f in librte_bus_vdev librte_mempool_ring librte_net_af_packet; do
		lib=$(find "$pmd" -maxdepth 1 -name "$f.so.[0-9]*" 2>/dev/null | sort | head -n1)
		[ -n "$lib" ] || die "no $f in DPDK's driver directory '$pmd'"
		cp "$lib" "$STAGE/pmds/"
	done
	for f in "$STAGE/bin/cais-switch" "$STAGE/lib/libnccl-net-cais.so" "$STAGE"/pmds/*.so* \
		"$STAGE/bin/ethtool"; do
		[ -e "$f" ] || continue
		for lib in $(needed_libs "$f"); do
			[ -e "$STAGE/lib/${lib##*/}" ] || cp -L "$lib" "$STAGE/lib/"
		done
	done
	cat >"$STAGE/MANIFEST" <<EOF
staged $(date -u +%Y-%m-%dT%H:%M:%SZ) from $build on $(uname -n)
dpdk_pmd_path=$pmd
$(cd "$STAGE" && find . -type f | sort)
EOF
	bytes=$(du -sb "$STAGE" | cut -f1)
	say "staged into $STAGE: $(find "$STAGE" -type f | wc -l) files, $((bytes >> 20)) MiB" \
		"(carry it to the GPU machine: run(..., carry=[\"${STAGE#"$ROOT"/}\"]))"
	[ "$bytes" -le $STAGE_MAX_BYTES ] ||
		say "WARNING: the stage is over $((STAGE_MAX_BYTES >> 20)) MiB: the device tool may not carry it"
}

# Every staged binary resolves every library from the stage or the system;
# the plugin does so by its own run path, without LD_LIBRARY_PATH.
check_stage() {
	local f bad=0
	for f in "$STAGE/bin/cais-switch" "$STAGE"/pmds/*.so*; do
		if LD_LIBRARY_PATH=$STAGE/lib ldd "$f" 2>&1 | grep -q 'not found'; then
			echo "  $f: $(LD_LIBRARY_PATH=$STAGE/lib ldd "$f" | grep 'not found' | tr -s ' \t' ' ')"
			bad=1
		fi
	done
	f=$STAGE/lib/libnccl-net-cais.so
	if env -u LD_LIBRARY_PATH ldd "$f" 2>&1 | grep -q 'not found'; then
		echo "  $f: $(env -u LD_LIBRARY_PATH ldd "$f" | grep 'not found' | tr -s ' \t' ' ')"
		bad=1
	fi
	# shellcheck disable=SC2016 # the literal $ORIGIN
	readelf -d "$f" 2>/dev/null | grep -q 'R.*PATH.*\$ORIGIN' ||
		die "$f has no \$ORIGIN run path (rebuild: agent/nccl/meson.build sets it)"
	[ $bad -eq 0 ] || die "staged binaries miss libraries (above)"
	LD_LIBRARY_PATH=$STAGE/lib "$STAGE/bin/cais-switch" --help >/dev/null 2>&1 ||
		LD_LIBRARY_PATH=$STAGE/lib "$STAGE/bin/cais-switch" --no-huge --no-pci -- --help \
			>/dev/null 2>&1 || die "the staged cais-switch does not start (--help)"
	say "stage checked: every binary finds its libraries (the plugin by \$ORIGIN); cais-switch --help runs"
}

# The NCCL to test: --nccl, else /usr/local/cuda's.
find_nccl() {
	local f
	if [ -n "$NCCL_LIB" ]; then
		[ -f "$NCCL_LIB" ] && echo "$NCCL_LIB"
		return
	fi
	for f in /usr/local/cuda/lib/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2 \
		/usr/local/cuda/targets/*/lib/libnccl.so.2; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
}

# Its version as NCCL's ncclGetVersion says (22809 for 2.28.9), or nothing.
nccl_version() {
	python3 -c 'import ctypes, sys
v = ctypes.c_int()
ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
print(v.value)' "$1" 2>/dev/null
}

if [ $STAGE_ONLY -eq 1 ] || [ $DRY_RUN -eq 1 ]; then
	if [ ! -f "$STAGE/MANIFEST" ] || [ $STAGE_ONLY -eq 1 ] || [ -n "$BUILD" ]; then
		if b=$(find_build); then
			do_stage "$b"
		elif [ ! -f "$STAGE/MANIFEST" ]; then
			die "nothing staged at $STAGE and no build (cais-switch and libnccl-net-cais.so) to stage from"
		fi
	fi
	check_stage
	[ $STAGE_ONLY -eq 1 ] && exit 0
fi

# ---- the PyTorch program each rank runs ----
WORK=$(mktemp -d /tmp/cais-gpu.XXXXXX)
cat >"$WORK/allreduce.py" <<'EOF'
import ctypes, os, sys, time
import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
sizes = [int(s) for s in os.environ["CAIS_GPU_SIZES"].split(",")]
iters = int(os.environ["CAIS_GPU_ITERS"])
scale = float(os.environ.get("CAIS_SCALE", "1024"))
torch.cuda.set_device(0)
# the preloaded NCCL is the one torch uses only if torch links it dynamically
want = ctypes.c_int()
ctypes.CDLL(os.environ["CAIS_GPU_NCCL"]).ncclGetVersion(ctypes.byref(want))
got = torch.cuda.nccl.version()
got = got[0] * 10000 + got[1] * 100 + got[2] if isinstance(got, tuple) else int(got)
if rank == 0:
    print(f"torch {torch.__version__}, NCCL {got} in torch, {want.value} in "
          f"{os.environ['CAIS_GPU_NCCL']}; {torch.cuda.get_device_name(0)}", flush=True)
if got != want.value:
    print(f"rank {rank}: RESULT FAIL: torch uses NCCL {got}, not {want.value} "
          "(torch links its NCCL statically?)", flush=True)
    sys.exit(3)
dist.init_process_group("nccl", rank=rank, world_size=world)

def inputs(r, n, dtype):
    # multiples of 1/8 up to 60 in magnitude: exact in every type and in fixed point
    i = torch.arange(n, device="cuda", dtype=torch.int64)
    return ((((i * 7) % 61) - 30) * (r + 1)).to(torch.float32).div_(8).to(dtype)

bad_total = 0
for dtype, eps in ((torch.float32, 2.0 ** -24), (torch.bfloat16, 2.0 ** -8)):
    esz = torch.tensor([], dtype=dtype).element_size()
    for nbytes in sizes:
        n = max(1, nbytes // esz)
        want_sum = sum(inputs(r, n, torch.float32) for r in range(world))
        x = inputs(rank, n, dtype)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        tol = world / scale + want_sum.abs() * eps * 2
        bad = int(((x.float() - want_sum).abs() > tol).sum())
        bad_total += bad
        times = []
        for _ in range(iters):
            x = inputs(rank, n, dtype)
            torch.cuda.synchronize()
            t = time.perf_counter()
            dist.all_reduce(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        med = sorted(times)[len(times) // 2]
        print(f"rank {rank}: {str(dtype)[6:]:9s} {n * esz:10d} B  median {med * 1e6:10.0f} us"
              f"  algbw {n * esz / med / 1e9:7.3f} GB/s  wrong {bad}", flush=True)
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: RESULT {'ok' if bad_total == 0 else 'FAIL'}", flush=True)
EOF

NCCL_FOUND=$(find_nccl)
PMD_PATH=$(sed -n 's/^dpdk_pmd_path=//p' "$STAGE/MANIFEST" 2>/dev/null)
EAL_D=()
[ -d "$PMD_PATH" ] || EAL_D=(-d "$STAGE/pmds") # the target has no DPDK drivers: the staged ones

rank_env() { # pass rank agg_ip master_ip
	local algo="" sizes=$SIZES
	if [ "$1" = collnet ]; then
		algo="NCCL_ALGO=allreduce:collnetchain"
	else
		sizes=$TUNER_SIZES
	fi
	echo "RANK=$2 WORLD_SIZE=$RANKS MASTER_ADDR=$4 MASTER_PORT=29500 CUDA_VISIBLE_DEVICES=0" \
		"LD_PRELOAD=${NCCL_FOUND:-<libnccl.so.2>} CAIS_GPU_NCCL=${NCCL_FOUND:-<libnccl.so.2>}" \
		"NCCL_NET_PLUGIN=$STAGE/lib/libnccl-net-cais.so NCCL_COLLNET_ENABLE=1 $algo" \
		"NCCL_HOSTID=cais-gpu-host-$2 NCCL_SOCKET_IFNAME=mgmt0 NCCL_IB_DISABLE=1" \
		"NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_DEBUG=INFO" \
		"NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,TUNING,ENV" \
		"CAIS_SWITCH=$3 CAIS_IFNAME=eth0 CAIS_PORT=$PORT CAIS_SLOTS=$SLOTS" \
		"CAIS_THRESHOLD=$THRESHOLD CAIS_GPU_SIZES=$sizes CAIS_GPU_ITERS=$ITERS"
}

if [ $DRY_RUN -eq 1 ]; then
	say "dry run: $RANKS ranks; collnet pass sizes $SIZES; tuner pass sizes $TUNER_SIZES" \
		"(threshold $THRESHOLD); $ITERS iterations"
	if [ -n "$NCCL_FOUND" ]; then
		echo "  NCCL:     $NCCL_FOUND, version $(nccl_version "$NCCL_FOUND" || echo '?')"
	else
		echo "  NCCL:     none under /usr/local/cuda (give --nccl)"
	fi
	echo "  testbed:  bash $STAGE/bin/testbed.sh up --name <n> --hosts $RANKS --mtu 9000"
	echo "  switch:   LD_LIBRARY_PATH=$STAGE/lib $STAGE/bin/cais-switch --no-huge -m 512 --no-pci" \
		"--no-shconf ${EAL_D[*]} --vdev=net_af_packetI,iface=<port I>,... -- --agg-ip <agg>" \
		"--config <session 1/1: $RANKS members, port $PORT, S $SLOTS, E 2048; tensors 1 sum, 2 max, 3 min>"
	for pass in collnet tuner; do
		for ((r = 0; r < RANKS; r++)); do
			echo "  $pass rank $r: ip netns exec <n>-h$((r + 1)) env $(rank_env $pass $r '<agg>' '<mgmt ip of h1>') python3 allreduce.py"
		done
	done
	python3 -c 'import ast,sys; ast.parse(open(sys.argv[1]).read())' "$WORK/allreduce.py" &&
		say "allreduce.py parses"
	rm -rf "$WORK"
	exit 0
fi

# ---- preconditions of a real run: each missing one skips, with the reason ----
nope() { rm -rf "$WORK"; skip "$*"; }
[ "$(id -u)" -eq 0 ] || nope "needs root (namespaces, veth, AF_PACKET)"
command -v ip >/dev/null || nope "ip (iproute2) not found"
command -v python3 >/dev/null || nope "python3 not found"
PROBE_NS="cais-gcprobe-$$"
ip netns add "$PROBE_NS" 2>/dev/null || nope "network namespaces are not available ('ip netns add' fails)"
if ! ip netns exec "$PROBE_NS" ip link add gcp0 type veth peer name gcp1 2>/dev/null; then
	ip netns del "$PROBE_NS" 2>/dev/null
	nope "veth interfaces are not available ('ip link add ... type veth' fails)"
fi
ip netns del "$PROBE_NS" 2>/dev/null
python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()' 2>/dev/null ||
	nope "AF_PACKET sockets are not available (cais-switch's net_af_packet needs them)"
command -v ethtool >/dev/null || [ -x "$STAGE/bin/ethtool" ] || nope "ethtool not found (and not staged)"
command -v ethtool >/dev/null || export PATH=$STAGE/bin:$PATH
python3 -c 'import torch' 2>/dev/null || nope "python3 has no torch"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
	nope "torch sees no CUDA GPU"
[ -n "$NCCL_FOUND" ] || nope "no libnccl.so.2 under /usr/local/cuda (give --nccl PATH)"
NCCL_VERSION=$(nccl_version "$NCCL_FOUND")
[ -n "$NCCL_VERSION" ] || nope "$NCCL_FOUND does not load (ncclGetVersion)"
[ -f "$STAGE/MANIFEST" ] || [ -n "$BUILD" ] || find_build >/dev/null ||
	die "nothing staged at $STAGE: run --stage-only where the project is built, and carry the stage"
if [ ! -f "$STAGE/MANIFEST" ] || [ -n "$BUILD" ]; then
	do_stage "$(find_build)"
fi
check_stage
say "NCCL $NCCL_VERSION from $NCCL_FOUND; plugin $STAGE/lib/libnccl-net-cais.so"

NAME="gc$(($$ % 10000))"
PREFIX="cais-gc-$$"
SW_PID=""
PIDS=()
FAILED=0
SWLOG=$WORK/switch.log

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ -n "$SW_PID" ]; then
		kill -INT "$SW_PID" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$SW_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$SW_PID" 2>/dev/null || true
		wait "$SW_PID" 2>/dev/null || true
	fi
	bash "$STAGE/bin/testbed.sh" down --name "$NAME" >/dev/null 2>&1 || true
	rm -rf "/var/run/dpdk/$PREFIX" 2>/dev/null || true
	if [ "$rc" -eq 0 ] && [ "$FAILED" -eq 0 ] && [ $KEEP_LOGS -eq 0 ]; then
		rm -rf "$WORK"
	else
		echo "$PROG: logs kept in $WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "=== testbed: $RANKS hosts"
for attempt in 0 1 2 3 4; do
	net=$(((($$ % 250) + attempt * 53) % 250 + 1))
	bash "$STAGE/bin/testbed.sh" up --name "$NAME" --hosts "$RANKS" --mtu 9000 --net "$net" \
		>"$WORK/testbed.log" 2>&1 && break
	grep -q "already used" "$WORK/testbed.log" || { cat "$WORK/testbed.log"; die "testbed up failed"; }
done
eval "$(bash "$STAGE/bin/testbed.sh" env --name "$NAME")" || die "testbed env"
members="" vdevs=()
for ((i = 1; i <= RANKS; i++)); do
	members+="${members:+, }{\"rank\": $((i - 1)), \"mac\": \"$(eval echo "\$TB_MAC_$i")\", \"ip\": \"$(eval echo "\$TB_IP_$i")\", \"port\": $PORT}"
	vdevs+=("--vdev=net_af_packet$((i - 1)),iface=$(eval echo "\$TB_SWIF_$i"),blocksz=16384,framesz=16384,framecnt=512")
done
cat >"$WORK/config.json" <<EOF
[
  {"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": $RANKS, "slots": $SLOTS,
    "elems_per_packet": 2048, "priority": 0, "loss_hints": 1, "members": [$members]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 2, "op": "max", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 3, "op": "min", "scale": 1024}}
]
EOF
# only the switch gets the staged libraries
LD_LIBRARY_PATH=$STAGE/lib "$STAGE/bin/cais-switch" --no-huge -m 512 --no-pci --no-shconf \
	--file-prefix="$PREFIX" -l 0 "${EAL_D[@]}" "${vdevs[@]}" -- --agg-ip "$TB_AGG_IP" \
	--config "$WORK/config.json" --stats-period 0 >"$SWLOG" 2>&1 &
SW_PID=$!
for _ in $(seq 1 300); do
	grep -q running "$SWLOG" && break
	kill -0 "$SW_PID" 2>/dev/null || { tail -n 20 "$SWLOG"; die "cais-switch exited during start"; }
	sleep 0.1
done
grep -q running "$SWLOG" || die "cais-switch did not start in 30 s"
say "cais-switch running, aggregator $TB_AGG_IP"

# run_pass PASS: every rank at once; the ranks' logs are $WORK/PASS.rankR.log
run_pass() {
	local pass=$1 r rc
	PIDS=()
	for ((r = 0; r < RANKS; r++)); do
		# shellcheck disable=SC2046 # the environment is a list of words
		timeout -k 5 "$PASS_TIMEOUT" ip netns exec "$(eval echo "\$TB_NS_$((r + 1))")" \
			env $(rank_env "$pass" $r "$TB_AGG_IP" "$TB_MGMT_IP_1") python3 "$WORK/allreduce.py" \
			>"$WORK/$pass.rank$r.log" 2>&1 &
		PIDS+=($!)
	done
	for ((r = 0; r < RANKS; r++)); do
		wait "${PIDS[$r]}"
		rc=$?
		if [ $rc -ne 0 ]; then
			FAILED=1
			say "$pass: rank $r exited $rc$([ $rc -ge 124 ] && echo ' (timeout)'); its last lines:"
			grep -v ' INFO ' "$WORK/$pass.rank$r.log" | tail -n 15
		fi
	done
	PIDS=()
	for ((r = 0; r < RANKS; r++)); do
		grep -q "RESULT ok" "$WORK/$pass.rank$r.log" ||
			{ FAILED=1; say "$pass: rank $r: results wrong or missing"; }
		grep -h "CollNet unavailable" "$WORK/$pass.rank$r.log" | head -n1
	done
	grep -h -m1 '^torch ' "$WORK/$pass.rank0.log"
}

# algo_of LOG BYTES: the algorithm NCCL chose for an all-reduce of BYTES (rank 0's log)
algo_of() {
	grep -h "AllReduce: $2 Bytes -> Algo" "$1" | head -n1 | sed 's/^.*-> Algo \([A-Za-z_]*\).*$/\1/'
}

say "=== collnet pass: $RANKS PyTorch ranks on GPU 0, NCCL_ALGO=allreduce:collnetchain, sizes $SIZES"
run_pass collnet
log=$WORK/collnet.rank0.log
for ((r = 0; r < RANKS; r++)); do
	if ! grep -q "CAIS: CollNet rank .* is CAIS rank" "$WORK/collnet.rank$r.log" ||
		! grep -q "first all-reduce through the switch" "$WORK/collnet.rank$r.log"; then
		FAILED=1
		say "collnet: rank $r: CollNet was not used (no CAIS CollNet connect / in-network all-reduce)"
	fi
done
echo "NCCL (rank 0):"
grep -h -E "NCCL version|NET_PLUGIN|Loaded (net|collnet) plugin|TUNER/Plugin|CAIS tuner|CAIS: device|CAIS: CollNet rank" \
	"$log" | sed 's/^.*NCCL INFO /  /' | sort -u | head -n 12
echo "times (rank 0):"
grep -h "median" "$log" | sed 's/^/  /'

say "=== tuner pass: no NCCL_ALGO, CAIS_THRESHOLD=$THRESHOLD, sizes $TUNER_SIZES"
run_pass tuner
log=$WORK/tuner.rank0.log
grep -q "TUNER/Plugin: Using CAIS" "$log" || { FAILED=1; say "tuner: NCCL did not load the plugin's tuner"; }
grep -q "via NET/CAIS" "$log" ||
	{ FAILED=1; say "tuner: no ring or tree connection went through the plugin's ncclNet (NET/CAIS)"; }
echo "algorithms (rank 0; the tuner's threshold $THRESHOLD B; fp32 and bf16 alike):"
for bytes in ${TUNER_SIZES//,/ }; do
	algo=$(algo_of "$log" "$bytes")
	case "$algo" in
	COLLNET*) side=collnet ;;
	"") side=missing ;;
	*) side=nccl ;;
	esac
	want=nccl
	[ "$bytes" -ge "$THRESHOLD" ] && want=collnet
	if [ $side = $want ]; then
		printf '  %10d B  %-14s ok\n' "$bytes" "$algo"
	else
		printf '  %10d B  %-14s WRONG: want %s\n' "$bytes" "${algo:-?}" "$want"
		FAILED=1
	fi
done
grep -h "via NET/CAIS" "$log" | sed 's/^.*NCCL INFO /  /' | head -n 2
echo "times (rank 0):"
grep -h "median" "$log" | sed 's/^/  /'
grep -h -m1 '^  session 1/1 ' "$SWLOG" || true
if [ $FAILED -ne 0 ]; then
	say "FAIL: $PROG"
	exit 1
fi
say "PASS: $PROG: $RANKS ranks, NCCL $NCCL_VERSION, every element right; CollNet through cais-switch" \
	"when forced and above the threshold, NCCL's own algorithms over the plugin's TCP below it"
