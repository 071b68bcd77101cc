# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
#
# Sourced by the bench scripts whose --help is their header comment
# (bench/loss_tcp.sh, bench/ring_loss.sh). The caller sets PROG.
#
#   cli_help FIRST LAST   -> the caller's lines FIRST..LAST, '# ' taken off
#   die MSG...            -> "PROG: MSG" on stderr, exit 1
#   cli_unknown ARG       -> "PROG: unknown argument 'ARG'" and the --help
#                            hint on stderr, exit 2

cli_help() {
	sed -n "$1,$2p" "$0" | sed 's/^# \{0,1\}//'
}

die() {
	echo "$PROG: $*" >&2
	exit 1
}

cli_unknown() {
	echo "$PROG: unknown argument '$1'" >&2
	echo "Try '$PROG --help'." >&2
	exit 2
}
