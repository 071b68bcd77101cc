#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run): installs what is missing,
# builds, runs the unit and integration tests, the unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, and the fuzzer for a bounded
# time. Run as root on Debian 12 (the integration tests build network
# namespaces). Exit status 0 only if every stage passed.
set -uo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--fuzz-seconds N] [--no-install] [--help]

Stages: install dependencies, build (build/), meson test (unit + integration),
every benchmark's smoke run (bench/run.sh --quick: they work and are right; no
speed is checked), unit tests under ASan/UBSan (build-asan/), libFuzzer targets
for N seconds in all, shared by the targets (build-fuzz/, default 90). A summary with each stage's time comes at the end.
USAGE
}

fuzz_seconds=90
install=1
while [ $# -gt 0 ]; do
	case "$1" in
	--fuzz-seconds) fuzz_seconds="${2:?--fuzz-seconds needs a value}"; shift 2 ;;
	--no-install) install=0; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run-tests: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

cd "$(dirname "$0")/.." || exit 1
declare -a names=() results=() times=()
failed=0

# each stage's output also goes to LOGS/N.log: a failed stage's last lines
# are printed again after the summary (the end of a long log is what CI keeps)
LOGS=$(mktemp -d /tmp/cais-run-tests.XXXXXX)
stage() {
	local name="$1"; shift
	local t0=$SECONDS rc
	echo
	echo "=== run-tests: $name ==="
	"$@" 2>&1 | tee "$LOGS/${#names[@]}.log"
	rc=${PIPESTATUS[0]}
	names+=("$name")
	times+=("$((SECONDS - t0))")
	if [ $rc -eq 0 ]; then results+=("ok"); else results+=("FAILED ($rc)"); failed=1; fi
	return $rc
}

setup_build() { # dir [meson options...]
	local dir="$1"; shift
	if [ -f "$dir/build.ninja" ]; then
		meson setup --reconfigure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@"
	fi && meson compile -C "$dir"
}

if [ $install -eq 1 ]; then
	stage "install dependencies" ./scripts/install-deps.sh --fuzz --bench --python || exit 1
fi
stage "build" setup_build build -Dtests=enabled || exit 1
stage "unit and integration tests" meson test -C build --print-errorlogs --num-processes 1
stage "benchmarks, smoke run (--quick)" bench/run.sh --quick --no-deps --build build
stage "build with ASan/UBSan" setup_build build-asan -Dtests=enabled -Dfuzz=disabled \
	-Db_sanitize=address,undefined -Db_lundef=false &&
	stage "unit tests under ASan/UBSan" env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C build-asan --suite unit --print-errorlogs --num-processes 1
if [ -x tests/fuzz/run-fuzz.sh ]; then
	stage "fuzzing (${fuzz_seconds}s)" tests/fuzz/run-fuzz.sh "$fuzz_seconds" build-fuzz
fi

echo
echo "=== run-tests: summary ==="
for i in "${!names[@]}"; do
	printf '  %-32s %-12s %4ss\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
done
for i in "${!names[@]}"; do
	[ "${results[$i]}" = ok ] && continue
	echo
	echo "=== run-tests: the last 100 lines of '${names[$i]}' (whole: $LOGS/$i.log) ==="
	tail -n 100 "$LOGS/$i.log"
done
[ $failed -eq 1 ] || rm -rf "$LOGS"
exit $failed
