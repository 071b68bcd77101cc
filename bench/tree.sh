#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/tree.sh: one switch against a tree of two leaves and a spine
# (docs/PROTOCOL.md E9) on the namespace testbed, same run, 8 ranks: the
# slowest rank's median time per size, the ratio and the time of the extra
# level. The testbed and the cases are tests/integration/tree_testbed.sh's;
# this runs its --bench mode. Options: --bytes LIST (default 1M,4M), --iters
# N (default 10), --dtype f32|bf16 (bf16 goes as BLOCK16), and that script's
# --switch/--perf/--ctl/--testbed/--keep-logs. Needs root.
set -euo pipefail
case "${1:-}" in
-h | --help)
	sed -n '4,11p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac
exec bash "$(cd "$(dirname "$0")/.." && pwd)/tests/integration/tree_testbed.sh" --bench "$@"
