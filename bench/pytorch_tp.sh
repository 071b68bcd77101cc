#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# pytorch_tp.sh: the PyTorch benchmark. examples/tp_gpt.py, a small GPT with
# Megatron-style tensor parallelism, trained on 4 ranks of the namespace
# testbed with the same seed and data three times: backend "gloo" (fp32),
# backend "cais" (fp32, cais-manager's per-tensor scales, FIXED32 on the
# wire) and backend "cais" in bf16 (activations and gradients all-reduced
# in bf16, BLOCK16 on the wire), every all-reduce through cais-switch
# (examples/tp_testbed.sh does the runs). Writes bench/results/pytorch_tp.*:
#   pytorch_tp.txt    the comparison: losses, the largest relative loss
#                     difference of cais fp32 from gloo, the bf16 run's final
#                     loss against gloo's, time per step of every run, the
#                     runs' libcais counters
#   pytorch_tp.png    the loss curves and their relative difference
#   pytorch_tp-*.csv  step, loss, step time of each run
# Needs root.
#
#   bench/pytorch_tp.sh [--steps N] [--build DIR] [--results DIR] [--quick] [--help]
#
#   --steps N       steps of every run (default 200)
#   --build DIR     the meson build (default build/)
#   --results DIR   where the files go (default bench/results)
#   --quick         a smoke run: 20 steps, files into a temporary directory
#   --help          this text
# Acceptance (examples/tp_compare.py; the exit status): fp32 within 1e-3
# relative of gloo at every step; bf16's final loss within 1% of gloo's fp32.
set -euo pipefail

PROG=${0##*/}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STEPS=200
BUILD="$ROOT/build"
RESULTS="$ROOT/bench/results"
QUICK=0
usage() { sed -n '4,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case "$1" in
	--steps) STEPS=${2:?--steps needs a value}; shift 2 ;;
	--build) BUILD=${2:?--build needs a value}; shift 2 ;;
	--results) RESULTS=${2:?--results needs a value}; shift 2 ;;
	--quick) QUICK=1; STEPS=20; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "$PROG: unknown argument '$1'" >&2; echo "Try '$PROG --help'." >&2; exit 2 ;;
	esac
done
if [ $QUICK -eq 1 ]; then
	RESULTS=$(mktemp -d /tmp/cais-pytorch-tp.XXXXXX)
	trap 'rm -rf "$RESULTS"' EXIT
fi
mkdir -p "$RESULTS"
OUT=$(mktemp -d /tmp/cais-pytorch-tp-runs.XXXXXX)
rc=0
bash "$ROOT/examples/tp_testbed.sh" --steps "$STEPS" --build "$BUILD" --out "$OUT" \
	--png "$RESULTS/pytorch_tp.png" || rc=$?
for r in gloo cais cais-bf16; do
	[ -f "$OUT/$r.csv" ] && cp "$OUT/$r.csv" "$RESULTS/pytorch_tp-$r.csv"
done
if [ -f "$OUT/summary.txt" ]; then
	{
		echo "# bench/pytorch_tp.sh --steps $STEPS ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs)"
		cat "$OUT/summary.txt"
		grep -h '^cais: rank 0' "$OUT"/cais.h1.log "$OUT"/cais-bf16.h1.log 2>/dev/null || true
		cat "$OUT/gloo-bf16.txt" 2>/dev/null || true
	} >"$RESULTS/pytorch_tp.txt"
	echo "$PROG: wrote $RESULTS/pytorch_tp.txt, pytorch_tp.png, pytorch_tp-*.csv"
fi
if [ $rc -eq 0 ]; then rm -rf "$OUT"; else echo "$PROG: the runs' logs: $OUT"; fi
exit $rc
