#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Build fuzz_pipeline with clang (if needed) and fuzz it for SECONDS on a
# copy of tests/fuzz/corpus, so the committed seeds are never modified.
#
#   tests/fuzz/run-fuzz.sh [SECONDS] [BUILD_DIR]
#
#   SECONDS    fuzzing time, default 60
#   BUILD_DIR  a clang build directory with -Dfuzz=enabled, default
#              build-fuzz at the top of the repository; created with
#              `CC=clang meson setup BUILD_DIR -Dfuzz=enabled` if missing
#
# Environment:
#   FUZZ_ARGS          extra libFuzzer flags (e.g. "-jobs=2 -workers=2")
#   FUZZ_WORK          where to put the corpus copy and findings (default: mktemp -d)
#   CAIS_FUZZ_VERBOSE=1     per input, what the model expected and what was sent
#
# Exit status: 0 when the run found nothing; 1 on any crash, sanitizer
# report, model violation, leak or timeout (the reproducer paths are
# printed; rerun one with `BUILD_DIR/tests/fuzz/fuzz_pipeline FILE`);
# 2 on a usage or build error.
#
# DPDK under the sanitizers: the target starts EAL itself with
#   --no-huge -m 512 --no-pci --no-shconf --no-telemetry -l 0
#   --file-prefix=cais-fuzz-PID
# (no hugepages, no devices, no shared files; 512 MB of anonymous memory
# because the switch's tensor hash table needs it). EAL runs under ASan,
# UBSan and LeakSanitizer without special options; the ASAN_OPTIONS below
# only make reports fatal and readable. EAL pins the main thread to CPU 0;
# the target restores the original CPU affinity right after rte_eal_init(),
# so parallel jobs do not share one CPU, and removes EAL's (empty) runtime
# directory /var/run/dpdk/cais-fuzz-PID at once, so crashes leave nothing.
set -eu

SECONDS_TO_RUN=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD_DIR=${2:-$top/build-fuzz}

case $SECONDS_TO_RUN in
'' | *[!0-9]*)
	echo "usage: $0 [SECONDS] [BUILD_DIR]" >&2
	exit 2
	;;
esac

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
	echo "== configuring $BUILD_DIR with clang"
	if ! CC=clang meson setup "$BUILD_DIR" "$top" -Dfuzz=enabled; then
		echo "meson setup failed (clang and libclang-rt-dev needed)" >&2
		exit 2
	fi
fi
if ! ninja -C "$BUILD_DIR" tests/fuzz/fuzz_pipeline; then
	echo "cannot build tests/fuzz/fuzz_pipeline in $BUILD_DIR" >&2
	echo "(it must be a clang build: CC=clang meson setup $BUILD_DIR -Dfuzz=enabled)" >&2
	exit 2
fi
fuzzer=$BUILD_DIR/tests/fuzz/fuzz_pipeline

work=${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/cais-fuzz.XXXXXX")}
mkdir -p "$work/corpus" "$work/artifacts"
cp "$here"/corpus/* "$work/corpus/"
echo "== fuzzing for ${SECONDS_TO_RUN}s; corpus copy and findings in $work"

ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS UBSAN_OPTIONS

status=0
# shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
"$fuzzer" \
	-max_total_time="$SECONDS_TO_RUN" \
	-max_len=16384 \
	-timeout=10 \
	-rss_limit_mb=4096 \
	-print_final_stats=1 \
	-artifact_prefix="$work/artifacts/" \
	${FUZZ_ARGS:-} \
	"$work/corpus" >"$work/fuzz.log" 2>&1 &
pid=$!
wait "$pid" || status=$?

grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::|^Done|ERROR|SUMMARY|fuzz_pipeline:' "$work/fuzz.log" || true

findings=$(find "$work/artifacts" -type f | sort)
if [ "$status" -ne 0 ] || [ -n "$findings" ]; then
	echo "== FAILED (libFuzzer exit status $status); log: $work/fuzz.log"
	for f in $findings; do
		echo "reproducer: $f"
		echo "  rerun: $fuzzer $f"
	done
	exit 1
fi
echo "== no findings; log: $work/fuzz.log"
