#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# gpu-check.sh: PyTorch all-reduce through cais-switch on a machine with one
# NVIDIA GPU. 2 to 4 NCCL ranks run as processes on GPU 0, each in its own
# network namespace of the testbed (scripts/testbed.sh) and each its own
# "node" (a distinct NCCL_HOSTID), with
#   NCCL_NET_PLUGIN=cais NCCL_COLLNET_ENABLE=1 NCCL_ALGO=allreduce:collnetchain
# so that every all-reduce goes through libnccl-net-cais.so's CollNet and the
# switch. Checks every element, checks that CollNet was chosen (NCCL_DEBUG=INFO
# and the plugin's own log lines), prints the times. Bounded: under 5 minutes.
#
#   gpu-check.sh [--ranks N] [--sizes LIST] [--iters K] [--build DIR]
#                [--stage DIR] [--stage-only] [--dry-run] [--keep-logs]
#
#   --ranks N      ranks (2..4, default 4)
#   --sizes LIST   all-reduce sizes in bytes (default 65536,1048576,8388608)
#   --iters K      timed iterations per size (default 5)
#   --build DIR    where the built binaries are (default: build-nccl, then build)
#   --stage DIR    the staging directory (default: gpu-stage in the repository)
#   --stage-only   only stage: copy cais-switch, libnccl-net-cais.so, the DPDK
#                  drivers and every shared library they need (ldd) that is not
#                  the C library into DIR (do this where the project is built)
#   --dry-run      stage (when a build is there), check that every staged binary
#                  finds its libraries, print what the run would do; no root, no GPU
#   --keep-logs    keep the logs also when the check passes
#
# The machine needs root, ip (iproute2), python3 with torch (CUDA) and the
# staged directory; ethtool is staged when the build machine has it. Without
# a GPU or torch the script says so and exits 77.
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
RANKS=4
SIZES=65536,1048576,8388608
ITERS=5
BUILD=""
STAGE=$ROOT/gpu-stage
STAGE_ONLY=0
DRY_RUN=0
KEEP_LOGS=0
PORT=47000
SLOTS=64
RANK_TIMEOUT=200 # s, per rank process; the whole check stays under 5 minutes

usage() { sed -n '4,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
	case "$1" in
	--ranks) RANKS=$2; shift 2 ;;
	--sizes) SIZES=$2; shift 2 ;;
	--iters) ITERS=$2; shift 2 ;;
	--build) BUILD=$2; shift 2 ;;
	--stage) STAGE=$2; shift 2 ;;
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

T0=$(date +%s.%N)
say() { echo "[$(awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%6.1f", t1 - t0 }') s] $*"; }
die() { say "FAIL: $*"; exit 1; }

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
	local build=$1 pmd f lib
	rm -rf "$STAGE"
	mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/pmds" || die "cannot create $STAGE"
	cp "$build/dataplane/cais-switch" "$STAGE/bin/"
	cp "$build/agent/nccl/libnccl-net-cais.so" "$STAGE/lib/"
	for f in "$build"/agent/libcais.so*; do
		[ -f "$f" ] && cp -P "$f" "$STAGE/lib/"
	done
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
		${STAGE}/bin/ethtool; do
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
	say "staged into $STAGE: $(find "$STAGE" -type f | wc -l) files, $(du -sh "$STAGE" | cut -f1)"
}

# Every staged binary resolves every library from the stage or the system.
check_stage() {
	local f bad=0
	for f in "$STAGE/bin/cais-switch" "$STAGE/lib/libnccl-net-cais.so" "$STAGE"/pmds/*.so*; do
		if LD_LIBRARY_PATH=$STAGE/lib ldd "$f" 2>&1 | grep -q 'not found'; then
			echo "  $f: $(LD_LIBRARY_PATH=$STAGE/lib ldd "$f" | grep 'not found' | tr -s ' \t' ' ')"
			bad=1
		fi
	done
	[ $bad -eq 0 ] || die "staged binaries miss libraries (above)"
	LD_LIBRARY_PATH=$STAGE/lib "$STAGE/bin/cais-switch" --help >/dev/null 2>&1 ||
		LD_LIBRARY_PATH=$STAGE/lib "$STAGE/bin/cais-switch" --no-huge --no-pci -- --help \
			>/dev/null 2>&1 || die "the staged cais-switch does not start (--help)"
	say "stage checked: every binary finds its libraries; cais-switch --help runs"
}

if [ ! -f "$STAGE/MANIFEST" ] || [ $STAGE_ONLY -eq 1 ] || [ -n "$BUILD" ]; then
	if b=$(find_build); then
		do_stage "$b"
	elif [ ! -f "$STAGE/MANIFEST" ]; then
		die "nothing staged at $STAGE and no build (cais-switch and libnccl-net-cais.so) to stage from"
	fi
fi
check_stage
[ $STAGE_ONLY -eq 1 ] && exit 0

# ---- the PyTorch program each rank runs ----
WORK=$(mktemp -d /tmp/cais-gpu.XXXXXX)
cat >"$WORK/allreduce.py" <<'EOF'
import os, sys, time
import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
sizes = [int(s) for s in os.environ["CAIS_GPU_SIZES"].split(",")]
iters = int(os.environ["CAIS_GPU_ITERS"])
scale = float(os.environ.get("CAIS_SCALE", "1024"))
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=rank, world_size=world)
if rank == 0:
    print(f"torch {torch.__version__}, NCCL {torch.cuda.nccl.version()}, {torch.cuda.get_device_name(0)}",
          flush=True)

def inputs(r, n, dtype):
    # multiples of 1/8 up to 60 in magnitude: exact in every type and in fixed point
    i = torch.arange(n, device="cuda", dtype=torch.int64)
    return ((((i * 7) % 61) - 30) * (r + 1)).to(torch.float32).div_(8).to(dtype)

bad_total = 0
for dtype, eps in ((torch.float32, 2.0 ** -24), (torch.bfloat16, 2.0 ** -8)):
    esz = torch.tensor([], dtype=dtype).element_size()
    for nbytes in sizes:
        n = max(1, nbytes // esz)
        want = sum(inputs(r, n, torch.float32) for r in range(world))
        x = inputs(rank, n, dtype)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        tol = world / scale + want.abs() * eps * 2
        bad = int(((x.float() - want).abs() > tol).sum())
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

PMD_PATH=$(sed -n 's/^dpdk_pmd_path=//p' "$STAGE/MANIFEST")
EAL_D=()
[ -d "$PMD_PATH" ] || EAL_D=(-d "$STAGE/pmds") # the target has no DPDK drivers: the staged ones

rank_env() { # rank agg_ip master_ip
	echo "RANK=$1 WORLD_SIZE=$RANKS MASTER_ADDR=$3 MASTER_PORT=29500 CUDA_VISIBLE_DEVICES=0" \
		"LD_LIBRARY_PATH=$STAGE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		"NCCL_NET_PLUGIN=cais NCCL_COLLNET_ENABLE=1 NCCL_ALGO=allreduce:collnetchain" \
		"NCCL_HOSTID=cais-gpu-host-$1 NCCL_SOCKET_IFNAME=mgmt0 NCCL_IB_DISABLE=1" \
		"NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_DEBUG=INFO" \
		"NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,TUNING,ENV" \
		"CAIS_SWITCH=$2 CAIS_IFNAME=eth0 CAIS_PORT=$PORT CAIS_SLOTS=$SLOTS" \
		"CAIS_GPU_SIZES=$SIZES CAIS_GPU_ITERS=$ITERS"
}

if [ $DRY_RUN -eq 1 ]; then
	say "dry run: $RANKS ranks; sizes $SIZES; $ITERS iterations"
	echo "  testbed:  bash $STAGE/bin/testbed.sh up --name <n> --hosts $RANKS --mtu 9000"
	echo "  switch:   LD_LIBRARY_PATH=$STAGE/lib $STAGE/bin/cais-switch --no-huge -m 512 --no-pci" \
		"--no-shconf ${EAL_D[*]} --vdev=net_af_packetI,iface=<port I>,... -- --agg-ip <agg>" \
		"--config <session 1/1: $RANKS members, port $PORT, S $SLOTS, E 2048; tensors 1 sum, 2 max, 3 min>"
	for ((r = 0; r < RANKS; r++)); do
		echo "  rank $r:   ip netns exec <n>-h$((r + 1)) env $(rank_env $r '<agg>' '<mgmt ip of h1>') python3 allreduce.py"
	done
	python3 -c 'import ast,sys; ast.parse(open(sys.argv[1]).read())' "$WORK/allreduce.py" &&
		say "allreduce.py parses"
	rm -rf "$WORK"
	exit 0
fi

# ---- preconditions of a real run ----
skip() { say "SKIP: $*"; rm -rf "$WORK"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (namespaces, raw sockets)"
command -v ip >/dev/null || skip "ip (iproute2) not found"
command -v python3 >/dev/null || skip "python3 not found"
command -v ethtool >/dev/null || [ -x "$STAGE/bin/ethtool" ] || skip "ethtool not found (and not staged)"
command -v ethtool >/dev/null || export PATH=$STAGE/bin:$PATH
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
	skip "python3 with torch and a CUDA GPU is not available"

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
    "elems_per_packet": 2048, "priority": 0, "members": [$members]}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 2, "op": "max", "scale": 1024}},
  {"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 3, "op": "min", "scale": 1024}}
]
EOF
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

say "=== $RANKS PyTorch ranks on GPU 0 (NCCL_ALGO=allreduce:collnetchain), sizes $SIZES"
for ((r = 0; r < RANKS; r++)); do
	# shellcheck disable=SC2046 # the environment is a list of words
	timeout -k 5 "$RANK_TIMEOUT" ip netns exec "$(eval echo "\$TB_NS_$((r + 1))")" \
		env $(rank_env $r "$TB_AGG_IP" "$TB_MGMT_IP_1") python3 "$WORK/allreduce.py" \
		>"$WORK/rank$r.log" 2>&1 &
	PIDS+=($!)
done
for ((r = 0; r < RANKS; r++)); do
	wait "${PIDS[$r]}"
	rc=$?
	if [ $rc -ne 0 ]; then
		FAILED=1
		say "rank $r exited $rc$([ $rc -ge 124 ] && echo ' (timeout)'); its last lines:"
		grep -v ' INFO ' "$WORK/rank$r.log" | tail -n 15
	fi
done
PIDS=()

# ---- the verdict ----
grep -h -m1 '^torch ' "$WORK/rank0.log"
for ((r = 0; r < RANKS; r++)); do
	log=$WORK/rank$r.log
	grep -q "RESULT ok" "$log" || { FAILED=1; say "rank $r: results wrong or missing"; }
	if ! grep -q "CAIS: CollNet rank .* is CAIS rank" "$log" ||
		! grep -q "first all-reduce through the switch" "$log"; then
		FAILED=1
		say "rank $r: CollNet was not used (no CAIS CollNet connect / in-network all-reduce in its log)"
	fi
	grep -q "CollNet unavailable" "$log" && grep -h "CollNet unavailable" "$log" | head -n1
done
echo "NCCL (rank 0):"
grep -h -E "Loaded (net|collnet) plugin|tuner plugin|via COLLNET|CollNet.*CAIS|CAIS tuner|CAIS: device" \
	"$WORK/rank0.log" | sed 's/^.*NCCL INFO /  /' | sort -u | head -n 12
echo "times (rank 0):"
grep -h "median" "$WORK/rank0.log" | sed 's/^/  /'
grep -h -m1 '^  session 1/1 ' "$SWLOG" || true
if [ $FAILED -ne 0 ]; then
	say "FAIL: $PROG"
	exit 1
fi
say "PASS: $PROG: $RANKS ranks, every element right, CollNet through cais-switch"
