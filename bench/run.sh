#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run.sh: every benchmark of bench/, one after the other, with progress:
#   1. the switch's pipeline on one lcore against io forwarding and the add
#      kernel (bench_pipeline)
#   2. end to end on the testbed: in-network, the agent's ring, MPI_Allreduce
#      (e2e.sh; needs root)
#   3. the agent's conversions against memcpy (bench_quant)
#   4. the numerics of the in-network path (bench_numerics)
#   5. only when asked for (--only soak: 40 minutes) or in --quick (1 minute):
#      small all-reduces of every dtype, op and wire under 5% loss (soak.sh)
# Each prints its testpmd-like table and writes CSV into the output folder;
# gnuplot draws a PNG of each. Under 10 minutes on a 2-core machine;
# --quick is the CI smoke run (checks that every benchmark works and is
# right, never a speed).
set -euo pipefail

PROG=${0##*/}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build"
OUT="$ROOT/bench/results"
QUICK=0
DEPS=1
ONLY="pipeline,e2e,quant,numerics"
ALL="$ONLY,soak"
only_set=0

usage() {
	cat <<EOF
Usage: $PROG [--quick] [--build DIR] [--out DIR] [--only LIST] [--no-deps] [--help]

Runs the benchmarks of bench/ (as root: the end-to-end one builds network
namespaces): installs what is missing (scripts/install-deps.sh --bench),
builds into DIR with benchmarks enabled, then runs, in order,
  pipeline  bench_pipeline: cais-switch's pipeline on one lcore vs io
            forwarding and the bare add kernel, E = 64..2048, n = 2..16
            (the smoke run also with the packets from memory, --cold, and
            on two lcores, --lcores 1,2)
  e2e       bench/e2e.sh: in-network vs the agent's ring vs OpenMPI
            MPI_Allreduce on the testbed, 128 KiB..64 MiB, 4 and 8 ranks
  quant     bench_quant: the agent's conversions vs memcpy
  numerics  bench_numerics: error and bias of the in-network path
and writes OUT/NAME.csv, OUT/NAME.txt (the table) and OUT/NAME.png (gnuplot).
Not in the default list, as it takes 40 minutes:
  soak      bench/soak.sh: all-reduces of 4 B..64 KiB, every dtype, op and
            wire, under 5% loss both ways, every element checked, on 4 ranks
            of the testbed (its lines and totals in OUT/soak.txt; the runs'
            logs, some 50 MB, are kept only when a run fails)

  --quick       smoke run for CI: small sizes, short times; checks that every
                benchmark runs and its results are right, not a speed
                (default output then: a temporary folder, removed after);
                e2e also runs with the switch on two lcores (e2e-lcores),
                and soak runs too, for 1 minute
  --build DIR   meson build directory (default build/)
  --out DIR     where CSV, tables and plots go (default bench/results/)
  --only LIST   a comma-separated subset of: $ALL
  --no-deps     skip scripts/install-deps.sh
  --help        this text

bench/README.md explains every figure and has this machine's numbers.
EOF
}

out_set=0
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1; shift ;;
	--no-deps) DEPS=0; shift ;;
	--build | --out | --only)
		[ $# -ge 2 ] || { echo "$PROG: $1 needs a value" >&2; exit 2; }
		case "$1" in
		--build) BUILD=$2 ;;
		--out) OUT=$2; out_set=1 ;;
		--only) ONLY=$2 only_set=1 ;;
		esac
		shift 2
		;;
	-h | --help) usage; exit 0 ;;
	*) echo "$PROG: unknown argument '$1'; try --help" >&2; exit 2 ;;
	esac
done
[[ "$ONLY" =~ ^(pipeline|e2e|quant|numerics|soak)(,(pipeline|e2e|quant|numerics|soak))*$ ]] ||
	{ echo "$PROG: --only '$ONLY': a list from ${ALL//,/, }" >&2; exit 2; }
[ $QUICK -eq 0 ] || [ $only_set -eq 1 ] || ONLY=$ALL
want() { [[ ",$ONLY," == *",$1,"* ]]; }

T0=$SECONDS
say() { printf '[bench %4d s] %s\n' $((SECONDS - T0)) "$*"; }

TMP_OUT=""
if [ $QUICK -eq 1 ] && [ $out_set -eq 0 ]; then
	TMP_OUT=$(mktemp -d /tmp/cais-bench.XXXXXX)
	OUT=$TMP_OUT
	trap 'rm -rf "$TMP_OUT"' EXIT
fi
mkdir -p "$OUT"

if [ $DEPS -eq 1 ]; then
	say "dependencies: scripts/install-deps.sh --bench"
	bash "$ROOT/scripts/install-deps.sh" --bench
fi
say "build: $BUILD (benchmarks enabled)"
if [ -f "$BUILD/build.ninja" ]; then
	meson configure "$BUILD" -Dbenchmarks=enabled >/dev/null
else
	meson setup "$BUILD" "$ROOT" -Dbenchmarks=enabled >/dev/null
fi
meson compile -C "$BUILD" >"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; exit 1; }

declare -a names=() results=() times=()
failed=0
# bench NAME COMMAND...: the table on the terminal and in OUT/NAME.txt
bench() {
	local name=$1 t=$SECONDS rc=0
	shift
	say "$name: $*"
	"$@" 2>&1 | tee "$OUT/$name.txt" || rc=$? # pipefail: the benchmark's status
	names+=("$name")
	times+=("$((SECONDS - t))")
	if [ $rc -eq 0 ]; then results+=("ok"); else results+=("FAILED ($rc)"); failed=1; fi
	if [ $rc -eq 0 ] && command -v gnuplot >/dev/null && [ -s "$OUT/$name.csv" ]; then
		gnuplot -e "in='$OUT/$name.csv'; out='$OUT/$name.png'" "$ROOT/bench/plot/$name.gp" ||
			{ results[-1]="plot FAILED"; failed=1; }
	fi
}

q=()
[ $QUICK -eq 1 ] && q=(--quick)
if want pipeline; then
	if [ -x "$BUILD/bench/bench_pipeline" ]; then
		bench pipeline "$BUILD/bench/bench_pipeline" "${q[@]}" --csv "$OUT/pipeline.csv"
		# the smoke run also takes the packets from memory (--cold: x86 only)
		if [ $QUICK -eq 1 ] && [ "$(uname -m)" = x86_64 ]; then
			bench pipeline-cold "$BUILD/bench/bench_pipeline" --quick --cold
		fi
		# and the scaling table (two lcores, handoffs, the machine's own scaling)
		if [ $QUICK -eq 1 ]; then
			if [ "$(nproc)" -ge 2 ]; then
				bench pipeline-lcores "$BUILD/bench/bench_pipeline" --quick --lcores 1,2
			else
				say "pipeline-lcores: not run: one CPU, and --lcores 1,2 needs two"
				names+=(pipeline-lcores) results+=("not run (1 CPU)") times+=(0)
			fi
		fi
	else
		say "pipeline: no $BUILD/bench/bench_pipeline (libdpdk missing at configure time)"
		names+=(pipeline) results+=("FAILED (not built)") times+=(0)
		failed=1
	fi
fi
want e2e && bench e2e bash "$ROOT/bench/e2e.sh" "${q[@]}" --build "$BUILD" --csv "$OUT/e2e.csv"
# the smoke run also takes the switch with two lcores: handoffs between lcores, end to end
if want e2e && [ $QUICK -eq 1 ]; then
	if [ "$(nproc)" -ge 2 ]; then
		bench e2e-lcores bash "$ROOT/bench/e2e.sh" --quick --lcores 2 --no-mpi --no-gloo --build "$BUILD"
	else
		say "e2e-lcores: not run: one CPU, and --lcores 2 needs two"
		names+=(e2e-lcores) results+=("not run (1 CPU)") times+=(0)
	fi
fi
want quant && bench quant "$BUILD/bench/bench_quant" "${q[@]}" --csv "$OUT/quant.csv"
want numerics && bench numerics "$BUILD/bench/bench_numerics" "${q[@]}" --csv "$OUT/numerics.csv"
if want soak; then
	if [ $QUICK -eq 1 ]; then
		bench soak bash "$ROOT/bench/soak.sh" --minutes 1 --iters 2 --build "$BUILD"
	else
		bench soak bash "$ROOT/bench/soak.sh" --build "$BUILD"
	fi
fi

echo
say "summary (CSV, tables and plots in $OUT)"
for i in "${!names[@]}"; do
	printf '  %-16s %-16s %4ss\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
done
exit $failed
