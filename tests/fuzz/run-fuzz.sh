#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Build the libFuzzer targets with clang (if needed) and fuzz them in turn,
# SECONDS split between them, each on a copy of its seed corpus, so the
# committed seeds are never modified.
#
#   tests/fuzz/run-fuzz.sh [SECONDS] [BUILD_DIR] [TARGET...]
#
#   SECONDS    total fuzzing time, default 60, shared equally by the targets
#   BUILD_DIR  a clang build directory with -Dfuzz=enabled, default
#              build-fuzz at the top of the repository; created with
#              `CC=clang meson setup BUILD_DIR -Dfuzz=enabled` if missing
#   TARGET     fuzz_pipeline (the dataplane, seeds tests/fuzz/corpus),
#              fuzz_ctl (the control request path, seeds tests/fuzz/corpus_ctl),
#              fuzz_quant (the agent's conversions, scalar against AVX2 and
#              AVX-512, seeds tests/fuzz/corpus_quant); default all three
#              (fuzz_pipeline is left out, with a note, when the build has
#              none: no DPDK)
#
# Environment:
#   FUZZ_ARGS          extra libFuzzer flags (e.g. "-jobs=2 -workers=2")
#   FUZZ_WORK          where to put the corpus copies and findings (default:
#                      mktemp -d); one folder per target inside
#   CAIS_FUZZ_VERBOSE=1     per input, what the model expected and what was sent
#
# Exit status: 0 when the run found nothing; 1 on any crash, sanitizer
# report, model violation, leak or timeout in any target (the reproducer
# paths are printed; rerun one with `BUILD_DIR/tests/fuzz/TARGET FILE`);
# 2 on a usage or build error.
#
# DPDK under the sanitizers (fuzz_pipeline): the target starts EAL itself with
#   --no-huge -m 512 --no-pci --no-shconf --no-telemetry -l 0
#   --file-prefix=cais-fuzz-PID
# (no hugepages, no devices, no shared files; 512 MB of anonymous memory
# because the switch's tensor hash table needs it). EAL runs under ASan,
# UBSan and LeakSanitizer without special options; the ASAN_OPTIONS below
# only make reports fatal and readable. EAL pins the main thread to CPU 0;
# the target restores the original CPU affinity right after rte_eal_init(),
# so parallel jobs do not share one CPU, and removes EAL's (empty) runtime
# directory /var/run/dpdk/cais-fuzz-PID at once, so crashes leave nothing.
# fuzz_ctl needs no DPDK.
set -eu

usage() {
	echo "usage: $0 [SECONDS] [BUILD_DIR] [fuzz_pipeline|fuzz_ctl|fuzz_quant ...]" >&2
	exit 2
}

SECONDS_TO_RUN=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD_DIR=${2:-$top/build-fuzz}
if [ $# -gt 2 ]; then
	shift 2
	targets=$*
	explicit=1
else
	targets="fuzz_pipeline fuzz_ctl fuzz_quant"
	explicit=0
fi

case $SECONDS_TO_RUN in
'' | *[!0-9]*) usage ;;
esac
for t in $targets; do
	case $t in
	fuzz_pipeline | fuzz_ctl | fuzz_quant) ;;
	*) usage ;;
	esac
done

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
	echo "== configuring $BUILD_DIR with clang"
	if ! CC=clang meson setup "$BUILD_DIR" "$top" -Dfuzz=enabled; then
		echo "meson setup failed (clang and libclang-rt-dev needed)" >&2
		exit 2
	fi
fi

# A default target the build does not define (fuzz_pipeline without DPDK) is
# left out; a named one must build.
build_targets=""
for t in $targets; do
	if [ "$explicit" = 0 ] && ! ninja -C "$BUILD_DIR" -t query "tests/fuzz/$t" >/dev/null 2>&1; then
		echo "== $t is not part of $BUILD_DIR (no DPDK?): not fuzzed"
		continue
	fi
	build_targets="$build_targets $t"
done
targets=$build_targets
if [ -z "$targets" ]; then
	echo "no fuzz target in $BUILD_DIR" >&2
	exit 2
fi
# shellcheck disable=SC2046 # one path per target
if ! ninja -C "$BUILD_DIR" $(for t in $targets; do echo "tests/fuzz/$t"; done); then
	echo "cannot build$targets in $BUILD_DIR" >&2
	echo "(it must be a clang build: CC=clang meson setup $BUILD_DIR -Dfuzz=enabled)" >&2
	exit 2
fi

# SECONDS shared equally, at least 1 s each; the remainder goes to the first.
n=0
for t in $targets; do n=$((n + 1)); done
each=$((SECONDS_TO_RUN / n))
extra=$((SECONDS_TO_RUN - each * n))
[ "$each" -ge 1 ] || { each=1; extra=0; }

work=${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/cais-fuzz.XXXXXX")}
mkdir -p "$work"
echo "== fuzzing$targets for ${SECONDS_TO_RUN}s in all; corpus copies and findings in $work"

ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS UBSAN_OPTIONS

failed=0
for t in $targets; do
	case $t in
	fuzz_pipeline)
		seeds=$here/corpus
		max_len=16384
		;;
	fuzz_ctl)
		seeds=$here/corpus_ctl
		max_len=32768
		;;
	fuzz_quant)
		seeds=$here/corpus_quant
		max_len=32800 # the header and 2 x 4096 elements of 4 bytes
		;;
	esac
	secs=$((each + extra))
	extra=0
	fuzzer=$BUILD_DIR/tests/fuzz/$t
	tw=$work/$t
	mkdir -p "$tw/corpus" "$tw/artifacts"
	cp "$seeds"/* "$tw/corpus/"
	echo "== $t: ${secs}s, seeds from $seeds"

	status=0
	# shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
	"$fuzzer" \
		-max_total_time="$secs" \
		-max_len="$max_len" \
		-timeout=10 \
		-rss_limit_mb=4096 \
		-print_final_stats=1 \
		-artifact_prefix="$tw/artifacts/" \
		${FUZZ_ARGS:-} \
		"$tw/corpus" >"$tw/fuzz.log" 2>&1 &
	pid=$!
	wait "$pid" || status=$?

	grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::|^Done|ERROR|SUMMARY|$t:" "$tw/fuzz.log" || true

	findings=$(find "$tw/artifacts" -type f | sort)
	if [ "$status" -ne 0 ] || [ -n "$findings" ]; then
		echo "== $t FAILED (libFuzzer exit status $status); log: $tw/fuzz.log"
		for f in $findings; do
			echo "reproducer: $f"
			echo "  rerun: $fuzzer $f"
		done
		failed=1
	else
		echo "== $t: no findings; log: $tw/fuzz.log"
	fi
done
exit "$failed"
