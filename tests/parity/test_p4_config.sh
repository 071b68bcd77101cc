#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# scripts/cais-p4-config: the JSON requests of cais-switch --config as
# simple_switch_CLI commands for dataplane/p4/cais.p4.
#
#   test_p4_config.sh CONVERTER PARITY_DIR
#
# 1. p4-config.json (dataplane/example-config.json in the P4 profile, plus
#    every other command) gives exactly p4-config.expected
# 2. the parity vectors' configs convert
# 3. requests outside the P4 profile or malformed are refused with the
#    request's number and the field, like cais-switch --config
# 4. --help
set -uo pipefail

CONV=$1
DIR=$2
ROOT=$(cd "$DIR/../.." && pwd)
TMP=$(mktemp -d /tmp/cais-p4cfg.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FAILS=0

fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

L2="--l2 02:ca:15:01:00:01=0 --l2 02:ca:15:01:00:02=1 --l2 02:ca:15:01:00:03=2 --l2 02:ca:15:01:00:04=3"
# shellcheck disable=SC2086
if python3 "$CONV" --agg-ip 198.18.1.254 --agg-mac 02:ca:15:01:00:fe --ports 4 $L2 \
	"$DIR/p4-config.json" >"$TMP/out.txt"; then
	diff -u "$DIR/p4-config.expected" "$TMP/out.txt" || fail "p4-config.json: output differs"
else
	fail "p4-config.json refused"
fi

for cfg in "$DIR"/vectors/*.json; do
	python3 "$CONV" --agg-ip 10.0.0.254 --agg-mac 02:aa:00:00:00:fe --ports 4 \
		--l2 02:00:00:00:00:01=0 "$cfg" >"$TMP/v.txt" || fail "$cfg refused"
	grep -q '^table_add CaisIngress.tensor_tbl' "$TMP/v.txt" || fail "$cfg: no tensor entries"
done

refused() { # expected-message json
	printf '%s\n' "$2" >"$TMP/bad.json"
	if python3 "$CONV" "$TMP/bad.json" >"$TMP/bad.out" 2>"$TMP/bad.err"; then
		fail "accepted: $2"
	elif ! grep -qF "$1" "$TMP/bad.err"; then
		fail "refusal of $2 does not say '$1': $(cat "$TMP/bad.err")"
	fi
}
M='"members": [{"rank": 0, "mac": "02:00:00:00:00:01", "ip": "10.0.0.1", "port": 1}]'
refused "request #1 (session.add): EINVAL: field 'elems_per_packet': 2048, the P4 profile" \
	"$(cat "$ROOT/dataplane/example-config.json")"
refused "field 'slots': 256, the P4 profile" \
	"[{\"cmd\": \"session.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"n\": 1, \"slots\": 256, \"elems_per_packet\": 64, $M}}]"
refused "field 'slots' must be a power of two" \
	"[{\"cmd\": \"session.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"n\": 1, \"slots\": 6, \"elems_per_packet\": 64, $M}}]"
refused "request #2 (session.add): EEXIST" \
	"[{\"cmd\": \"session.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"n\": 1, \"slots\": 4, \"elems_per_packet\": 64, $M}},
	  {\"cmd\": \"session.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"n\": 1, \"slots\": 4, \"elems_per_packet\": 64, $M}}]"
refused "ENOSPC" \
	"[{\"cmd\": \"thresholds.set\", \"args\": {\"slot_usage\": 0.001}},
	  {\"cmd\": \"session.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"n\": 1, \"slots\": 4, \"elems_per_packet\": 64, $M}}]"
refused "request #1 (tensor.add): ENOENT: no session 1/1" \
	'[{"cmd": "tensor.add", "args": {"tenant": 1, "session": 1, "tensor": 1, "op": "sum", "scale": 1}}]'
refused "unknown field 'bogus'" '[{"cmd": "mode.set", "args": {"mode": "compute", "bogus": 1}}]'
refused "field 'ttl_ms' must be an integer" '[{"cmd": "lease", "args": {"ttl_ms": 1.5}}]'
refused "unknown command 'table.add'" '[{"cmd": "table.add"}]'
refused "duplicate object key" '[{"cmd": "ping", "cmd": "ping"}]'

python3 "$CONV" --help >"$TMP/help.txt" && grep -q -- "--l2 MAC=PORT" "$TMP/help.txt" ||
	fail "--help"

if [ "$FAILS" -ne 0 ]; then
	echo "test_p4_config: $FAILS failure(s)"
	exit 1
fi
echo "test_p4_config: ok"
