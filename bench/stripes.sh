#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/stripes.sh: one switch server against a session striped over two
# (docs/PROTOCOL.md E8) on the namespace testbed, same run, 4 ranks with two
# flows each: the slowest rank's median time per size and the ratio. The
# testbed and the cases are tests/integration/stripes_testbed.sh's; this runs
# its --bench mode. Options: --bytes LIST (default 1M,4M,16M), --iters N
# (default 10), --dtype f32|bf16 (bf16 goes as BLOCK16), and that script's
# --switch/--perf/--ctl/--testbed/--keep-logs. Needs root.
set -euo pipefail
case "${1:-}" in
-h | --help)
	sed -n '4,10p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac
exec bash "$(cd "$(dirname "$0")/.." && pwd)/tests/integration/stripes_testbed.sh" --bench "$@"
