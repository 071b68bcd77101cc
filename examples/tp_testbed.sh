#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tp_testbed.sh: examples/tp_gpt.py (a tensor-parallel GPT) trained on 4
# ranks of the namespace testbed, through cais-switch, once per run of
# --runs, with the same seed and data:
#   gloo       backend "gloo", fp32 (its TCP through the switch, forwarded)
#   cais       backend "cais", fp32, managed: cais-manager gives every tensor
#              its fixed-point scale each step (FIXED32 on the wire)
#   cais-bf16  backend "cais", bf16 activations and gradients, all-reduced in
#              bf16 (the manager's wire for bf16: BLOCK16)
# then compares the loss curves step by step (examples/tp_compare.py) and,
# with --png, draws them (gnuplot). First of all it runs README.md's example,
# examples/hello_cais.py, on the 4 hosts, managed and then static (a session
# installed with cais-ctl, CAIS_SWITCH). Needs root (network namespaces).
#
#   tp_testbed.sh [--steps N] [--runs LIST] [--out DIR] [--png FILE] [--build DIR]
#                 [--timeout S] [--threshold B] [--keep-logs] [--help]
#
#   --steps N      training steps of every run (default 200)
#   --runs LIST    comma-separated, of gloo, cais, cais-bf16 (default all three)
#   --out DIR      where the per-step CSVs, the logs and summary.txt go
#                  (default: a new /tmp/cais-tp.XXXXXX)
#   --png FILE     draw the loss curves there (needs gnuplot)
#   --build DIR    the meson build with cais-switch, cais-manager, cais-ctl and
#                  libcais (default build/)
#   --timeout S    the bound on each run, every rank (default 900 s)
#   --threshold B  CAIS_THRESHOLD of the cais runs (default 0: every
#                  all-reduce may go in-network)
#   --tol X        fp32: the largest relative loss difference allowed at any
#                  step (default 1e-3)
#   --bf16-tol X   bf16: the final loss's relative difference from gloo's
#                  fp32 (default 0.01)
#   --keep-logs    keep --out's logs also when everything passed (a given
#                  --out is always kept)
#   --guess-steps  the cais runs without cais.torch.step() per iteration: the
#                  package guesses the manager's steps (tp_gpt.py --guess-steps)
#
# Exit status: 0 when every comparison passed, 1 when one failed or a run
# failed, 2 usage, 77 without root. Cleans up everything it started, also on
# Ctrl-C (the ranks, the manager, the switch, the testbed).
set -uo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"

STEPS=200
RUNS="gloo,cais,cais-bf16"
OUT=""
PNG=""
BUILD="$ROOT/build"
RUN_TIMEOUT=900
THRESHOLD=0
TOL=1e-3
BF16_TOL=0.01
KEEP=0
HOSTS=4
PY=${CAIS_PYTHON:-/usr/bin/python3}

usage() { sed -n '4,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
usage_error() {
	echo "$PROG: $*" >&2
	echo "Try '$PROG --help'." >&2
	exit 2
}
GUESS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--steps | --runs | --out | --png | --build | --timeout | --threshold | --tol | --bf16-tol)
		[ $# -ge 2 ] || usage_error "$1 needs a value"
		case "$1" in
		--steps) STEPS=$2 ;;
		--runs) RUNS=$2 ;;
		--out) OUT=$2 ;;
		--png) PNG=$2 ;;
		--build) BUILD=$2 ;;
		--timeout) RUN_TIMEOUT=$2 ;;
		--threshold) THRESHOLD=$2 ;;
		--tol) TOL=$2 ;;
		--bf16-tol) BF16_TOL=$2 ;;
		esac
		shift 2
		;;
	--keep-logs) KEEP=1; shift ;;
	--guess-steps) GUESS=(--guess-steps); shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
done
[[ "$STEPS" =~ ^[0-9]+$ ]] && [ "$STEPS" -ge 1 ] || usage_error "--steps: a positive integer"
[[ "$RUN_TIMEOUT" =~ ^[0-9]+$ ]] || usage_error "--timeout: seconds"
IFS=, read -r -a RUN_LIST <<<"$RUNS"
for r in "${RUN_LIST[@]}"; do
	case "$r" in gloo | cais | cais-bf16) ;; *) usage_error "--runs: '$r' is not gloo, cais or cais-bf16" ;; esac
done

cb_need_root_and "network namespaces, veth, raw sockets for af_packet" ip ethtool timeout awk
SWITCH=$BUILD/dataplane/cais-switch
MANAGER=$BUILD/control/manager/cais-manager
CTL=$BUILD/control/cais-ctl
LIB=$BUILD/agent/libcais.so
for b in "$SWITCH" "$MANAGER" "$CTL"; do
	[ -x "$b" ] || { echo "$PROG: no $b (build first: meson setup build && ninja -C build, or --build)" >&2; exit 1; }
done
[ -f "$LIB" ] || { echo "$PROG: no $LIB" >&2; exit 1; }
"$PY" -c "import torch, numpy" 2>/dev/null ||
	{ echo "$PROG: $PY has no torch or numpy (scripts/install-deps.sh --python installs them)" >&2; exit 1; }

NAME="tp$(($$ % 10000))"
PREFIX="cais-tp-$$"
if [ -n "$OUT" ]; then
	mkdir -p "$OUT" || exit 1
	KEEP=1
else
	OUT=$(mktemp -d /tmp/cais-tp.XXXXXX)
fi
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s.%N)
SW_PID=""
MGR_PID=""
PIDS=()
FAILED=0
TB_UP=0

say() { echo "[$(awk -v t0="$T0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%6.1f", t1 - t0 }') s] $*"; }
fatal() {
	say "FATAL: $*"
	for f in "$OUT/switch.log" "$OUT/manager.log"; do
		[ -s "$f" ] && { echo "---- $f (last 15 lines)"; tail -n 15 "$f"; }
	done
	FAILED=1
	exit 1
}
cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ -n "$MGR_PID" ]; then
		kill -TERM "$MGR_PID" 2>/dev/null || true
		wait "$MGR_PID" 2>/dev/null || true
	fi
	CB_SW_PID=$SW_PID
	cb_switch_stop 5
	[ "$TB_UP" -eq 1 ] && bash "$ROOT/scripts/testbed.sh" down --name "$NAME" >/dev/null 2>&1
	rm -rf "/var/run/dpdk/$PREFIX" 2>/dev/null || true
	if [ "$rc" -eq 0 ] && [ "$FAILED" -eq 0 ] && [ "$KEEP" -eq 0 ]; then
		rm -rf "$OUT"
	else
		echo "$PROG: logs in $OUT"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'echo "$PROG: interrupted"; exit 130' INT
trap 'echo "$PROG: terminated"; exit 143' TERM

# ---- the testbed, the switch, the manager ----
say "testbed $NAME: $HOSTS hosts, MTU 9000"
TB_UP=1
bash "$ROOT/scripts/testbed.sh" up --name "$NAME" --hosts "$HOSTS" --mtu 9000 >"$OUT/testbed.log" 2>&1 ||
	fatal "testbed up (see $OUT/testbed.log)"
eval "$(bash "$ROOT/scripts/testbed.sh" env --name "$NAME")"
head -c 32 /dev/urandom >"$OUT/switch.key"
head -c 32 /dev/urandom >"$OUT/manager.key"
SW_CTL="$TB_BRIDGE_IP:51734"
MGR="$TB_BRIDGE_IP:51735"
cb_switch_start "$SWITCH" "$PREFIX" "$OUT/switch.log" "$HOSTS" --ctl "$SW_CTL" \
	--ctl-key "$OUT/switch.key" --stats-period 0 || fatal "cais-switch did not start"
SW_PID=$CB_SW_PID
say "cais-switch: aggregator $TB_AGG_IP, control $SW_CTL (pid $SW_PID)"
sctl() { "$CTL" -s "$SW_CTL" -k "$OUT/switch.key" -t 2000 "$@"; }
mctl() { "$CTL" -m "$MGR" -k "$OUT/manager.key" -t 2000 "$@"; }
# few cores: the switch's queue runs deep, and CONGESTED would make the manager
# take tensors off the switch (as scripts/demo.sh and control_testbed.sh do)
sctl thresholds.set queue_depth=1000000 >/dev/null || fatal "cais-ctl thresholds.set"
"$MANAGER" --agg "$TB_AGG_IP" --listen "$MGR" --key "$OUT/manager.key" --switch-ctl "$SW_CTL" \
	--switch-key "$OUT/switch.key" --db "$OUT/manager.db" --lease-ms 3000 >"$OUT/manager.log" 2>&1 &
MGR_PID=$!
up=0
for _ in $(seq 1 100); do
	if mctl -j switch.status 2>/dev/null | grep -Eq '"renewals": *[1-9]'; then up=1; break; fi
	kill -0 "$MGR_PID" 2>/dev/null || fatal "cais-manager exited during start"
	sleep 0.1
done
[ $up -eq 1 ] || fatal "cais-manager did not answer, or the switch has no lease from it, within 10 s"
say "cais-manager: $MGR (pid $MGR_PID), holds the switch's lease"

# ---- the runs ----
MASTER_PORT=29500
# run_ranks LABEL BACKEND DTYPE: the 4 ranks at once, each in its host, bounded
run_ranks() {
	local label=$1 be=$2 dt=$3 i ok=1 t_start
	local -a env_cais=()
	PIDS=()
	MASTER_PORT=$((MASTER_PORT + 1))
	[ "$be" = cais ] && env_cais=(CAIS_LIB="$LIB" PYTHONPATH="$ROOT/python" CAIS_MANAGER="$MGR" CAIS_MANAGER_KEY="$OUT/manager.key"
		CAIS_IFNAME=eth0 CAIS_THRESHOLD="$THRESHOLD" CAIS_DEBUG=1 CAIS_TENANT_NAME=tp-example)
	t_start=$(date +%s)
	for ((i = 1; i <= HOSTS; i++)); do
		ip netns exec "$(eval "echo \$TB_NS_$i")" env RANK=$((i - 1)) WORLD_SIZE=$HOSTS \
			MASTER_ADDR="$TB_MGMT_IP_1" MASTER_PORT=$MASTER_PORT GLOO_SOCKET_IFNAME=eth0 \
			"${env_cais[@]}" timeout -k 5 "$RUN_TIMEOUT" "$PY" "$HERE/tp_gpt.py" --backend "$be" \
			--dtype "$dt" --steps "$STEPS" --csv "$OUT/$label.csv" "${GUESS[@]}" \
			>"$OUT/$label.h$i.log" 2>&1 &
		PIDS+=($!)
	done
	local last=""
	while :; do
		local running=0 p line
		for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && running=$((running + 1)); done
		line=$(grep '^tp_gpt: .* step ' "$OUT/$label.h1.log" 2>/dev/null | tail -n 1 || true)
		if [ -n "$line" ] && [ "$line" != "$last" ]; then say "  $label: ${line#tp_gpt: }"; last=$line; fi
		[ $running -gt 0 ] || break
		sleep 1
	done
	for ((i = 1; i <= HOSTS; i++)); do
		if ! wait "${PIDS[$((i - 1))]}"; then
			ok=0
			echo "---- $label: rank $((i - 1)) failed (last 15 lines of $OUT/$label.h$i.log):"
			tail -n 15 "$OUT/$label.h$i.log"
		fi
	done
	PIDS=()
	kill -0 "$SW_PID" 2>/dev/null || fatal "cais-switch died"
	if [ $ok -eq 1 ]; then
		say "  $label: done in $(($(date +%s) - t_start)) s: $(grep -h '^tp_gpt: result' "$OUT/$label.h1.log" | cut -c17-)"
		grep -h '^cais: rank' "$OUT/$label".h*.log | sed 's/^/      /'
	else
		FAILED=1
	fi
	return $((1 - ok))
}

# the README's example first: 3 bf16 all-reduces of one tensor (the first on the ring,
# before the manager has seen its magnitude, then through the switch) and one max
say "run hello: examples/hello_cais.py (README.md's example) on $HOSTS hosts"
PIDS=()
MASTER_PORT=$((MASTER_PORT + 1))
for ((i = 1; i <= HOSTS; i++)); do
	ip netns exec "$(eval "echo \$TB_NS_$i")" env RANK=$((i - 1)) WORLD_SIZE=$HOSTS \
		MASTER_ADDR="$TB_MGMT_IP_1" MASTER_PORT=$MASTER_PORT PYTHONPATH="$ROOT/python" CAIS_LIB="$LIB" \
		CAIS_MANAGER="$MGR" CAIS_MANAGER_KEY="$OUT/manager.key" CAIS_IFNAME=eth0 CAIS_THRESHOLD=0 \
		CAIS_DEBUG=1 timeout -k 5 120 "$PY" "$HERE/hello_cais.py" >"$OUT/hello.h$i.log" 2>&1 &
	PIDS+=($!)
done
hello_ok=1
for ((i = 1; i <= HOSTS; i++)); do
	wait "${PIDS[$((i - 1))]}" || hello_ok=0
	grep -q "^cais: rank $((i - 1)): 5 collectives, 2 in-network" "$OUT/hello.h$i.log" || hello_ok=0
done
PIDS=()
if [ $hello_ok -eq 1 ]; then
	say "  hello: every rank right, $(grep -h '^cais: rank 0' "$OUT/hello.h1.log" | cut -d, -f1-3)"
else
	FAILED=1
	say "  hello: FAIL (want every rank: 5 collectives, 2 in-network); $OUT/hello.h1.log:"
	tail -n 15 "$OUT/hello.h1.log"
fi

# static mode too: a session installed by hand (tenant 9), CAIS_SWITCH instead of the
# manager; every all-reduce of the example in-network (tensors 1 sum, 2 max)
members=()
for ((i = 1; i <= HOSTS; i++)); do
	members+=("member=$((i - 1)),$(eval "echo \$TB_MAC_$i"),$(eval "echo \$TB_IP_$i"),47000")
done
if sctl session.add tenant=9 session=1 slots=64 elems_per_packet=2048 loss_hints=1 "${members[@]}" >/dev/null &&
	sctl tensor.add tenant=9 session=1 tensor=1 op=sum scale=1024 >/dev/null &&
	sctl tensor.add tenant=9 session=1 tensor=2 op=max scale=1024 >/dev/null; then
	say "run hello-static: examples/hello_cais.py, static mode (CAIS_SWITCH=$TB_AGG_IP, session 9/1)"
	MASTER_PORT=$((MASTER_PORT + 1))
	for ((i = 1; i <= HOSTS; i++)); do
		ip netns exec "$(eval "echo \$TB_NS_$i")" env RANK=$((i - 1)) WORLD_SIZE=$HOSTS \
			MASTER_ADDR="$TB_MGMT_IP_1" MASTER_PORT=$MASTER_PORT PYTHONPATH="$ROOT/python" \
			CAIS_LIB="$LIB" CAIS_SWITCH="$TB_AGG_IP" CAIS_TENANT=9 CAIS_SESSION=1 CAIS_SLOTS=64 \
			CAIS_IFNAME=eth0 CAIS_THRESHOLD=0 CAIS_DEBUG=1 \
			timeout -k 5 120 "$PY" "$HERE/hello_cais.py" >"$OUT/hello-static.h$i.log" 2>&1 &
		PIDS+=($!)
	done
	hello_ok=1
	for ((i = 1; i <= HOSTS; i++)); do
		wait "${PIDS[$((i - 1))]}" || hello_ok=0
		grep -q "^cais: rank $((i - 1)): 5 collectives, 5 in-network" "$OUT/hello-static.h$i.log" ||
			hello_ok=0
	done
	PIDS=()
	if [ $hello_ok -eq 1 ]; then
		say "  hello-static: every rank right, $(grep -h '^cais: rank 0' "$OUT/hello-static.h1.log" | cut -d, -f1-2)"
	else
		FAILED=1
		say "  hello-static: FAIL (want every rank: 5 collectives, 5 in-network); $OUT/hello-static.h1.log:"
		tail -n 15 "$OUT/hello-static.h1.log"
	fi
else
	FAILED=1
	say "  hello-static: FAIL: cais-ctl could not install session 9/1"
fi

for r in "${RUN_LIST[@]}"; do
	case "$r" in
	gloo) say "run gloo: backend gloo, fp32, $STEPS steps"; run_ranks gloo gloo fp32 ;;
	cais) say "run cais: backend cais, fp32, managed (per-tensor scales), $STEPS steps"; run_ranks cais cais fp32 ;;
	cais-bf16) say "run cais-bf16: backend cais, bf16 (BLOCK16 on the wire), $STEPS steps"; run_ranks cais-bf16 cais bf16 ;;
	esac
done
# gloo cannot all-reduce bfloat16 in this PyTorch: show it (one rank, one process)
if printf '%s\n' "${RUN_LIST[@]}" | grep -qx cais-bf16; then
	"$PY" - >"$OUT/gloo-bf16.txt" 2>&1 <<'EOF'
import os, tempfile, torch, torch.distributed as dist
f = tempfile.mktemp()
dist.init_process_group("gloo", init_method="file://" + f, rank=0, world_size=1)
try:
    dist.all_reduce(torch.ones(4, dtype=torch.bfloat16))
    print("gloo bf16 all-reduce: worked")
except RuntimeError as e:
    print("gloo bf16 all-reduce: RuntimeError: %s" % str(e).splitlines()[0])
EOF
	say "$(cat "$OUT/gloo-bf16.txt")"
fi
rounds=$(sctl -j stats.get 2>/dev/null | tr -d ' \n' | grep -Eo '"rounds":[0-9]+' | cut -d: -f2 |
	awk '{ s += $1 } END { print s + 0 }')
say "cais-switch: $rounds rounds aggregated in all (every session of these runs)"
# the manager's CPU time (/proc/PID/stat utime + stime): its cost for these runs' steps
say "cais-manager: $(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' \
	"/proc/$MGR_PID/stat") s of CPU since its start (user + system)"

# ---- compare, draw ----
cmp_args=()
[ -f "$OUT/gloo.csv" ] && cmp_args+=(--gloo "$OUT/gloo.csv")
[ -f "$OUT/cais.csv" ] && cmp_args+=(--cais "$OUT/cais.csv")
[ -f "$OUT/cais-bf16.csv" ] && cmp_args+=(--bf16 "$OUT/cais-bf16.csv")
[ -n "$PNG" ] && cmp_args+=(--png "$PNG")
say "comparison (examples/tp_compare.py):"
"$PY" "$HERE/tp_compare.py" "${cmp_args[@]}" --steps "$STEPS" --tol "$TOL" --bf16-tol "$BF16_TOL" \
	--logs "$OUT" | tee "$OUT/summary.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || FAILED=1
[ $FAILED -eq 0 ] && say "PASS" || say "FAIL"
exit $FAILED
