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
# 3. requests outside the P4 profile (several flows per member, E7) or
#    malformed, and members cais-switch refuses (E5), are refused with the
#    request's number and the field, like cais-switch --config; a BLOCK16
#    tensor is installed as FIXED32 with a note (E4)
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

refused() { # expected-message json [converter options]
	local want=$1 json=$2
	shift 2
	printf '%s\n' "$json" >"$TMP/bad.json"
	if python3 "$CONV" "$@" "$TMP/bad.json" >"$TMP/bad.out" 2>"$TMP/bad.err"; then
		fail "accepted: $json"
	elif ! grep -qF "$want" "$TMP/bad.err"; then
		fail "refusal of $json does not say '$want': $(cat "$TMP/bad.err")"
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
S1='{"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": 1, "slots": 4, "elems_per_packet": 64, '
# a BLOCK16 tensor: installed as FIXED32, with a note (its BLOCK16 DATA gets BAD_DTYPE, E4)
printf '%s\n' "[$S1 $M}}, {\"cmd\": \"tensor.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"tensor\": 7, \"op\": \"max\", \"scale\": 1, \"wire\": \"block16\"}}]" >"$TMP/b16.json"
if python3 "$CONV" "$TMP/b16.json" >"$TMP/b16.out" 2>"$TMP/b16.err"; then
	grep -qx 'table_add CaisIngress.tensor_tbl CaisIngress.set_tensor 1 1 7 => 2' "$TMP/b16.out" ||
		fail "block16 tensor: no FIXED32 tensor entry: $(cat "$TMP/b16.out")"
	grep -q '^# note: tensor 1/1/7: wire block16 is not in the P4 profile: installed as FIXED32; its BLOCK16 DATA gets REJECT BAD_DTYPE' "$TMP/b16.out" ||
		fail "block16 tensor: no note"
else
	fail "block16 tensor refused: $(cat "$TMP/b16.err")"
fi
refused "field 'wire' must be fixed32 or block16" \
	"[$S1 $M}}, {\"cmd\": \"tensor.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"tensor\": 1, \"op\": \"sum\", \"scale\": 1, \"wire\": \"fp8\"}}]"
refused "members[0]: field 'switch_port' 4: the switch has ports 0..3" \
	"[$S1 \"members\": [{\"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": \"10.0.0.1\", \"port\": 1, \"switch_port\": 4}]}}]" --ports 4
refused "members[0]: field 'ip' is the aggregator's address" \
	"[$S1 \"members\": [{\"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": \"10.0.0.254\", \"port\": 1}]}}]" \
	--agg-ip 10.0.0.254 --agg-mac 02:aa:00:00:00:fe
refused "members[0]: field 'mac' is the aggregator's MAC" \
	"[$S1 \"members\": [{\"rank\": 0, \"mac\": \"02:aa:00:00:00:fe\", \"ip\": \"10.0.0.1\", \"port\": 1}]}}]" \
	--agg-ip 10.0.0.254 --agg-mac 02:aa:00:00:00:fe
refused "members[0]: field 'mac' is not a unicast MAC (nor all-zero)" \
	"[$S1 \"members\": [{\"rank\": 0, \"mac\": \"00:00:00:00:00:00\", \"ip\": \"10.0.0.1\", \"port\": 1}]}}]"
refused "members[0]: field 'ip' 127.0.0.1 is not a host's unicast address" \
	"[$S1 \"members\": [{\"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": \"127.0.0.1\", \"port\": 1}]}}]"
refused "members: ranks 0 and 1 have the same 'ip' and 'port'" \
	'[{"cmd": "session.add", "args": {"tenant": 1, "session": 1, "n": 2, "slots": 4, "elems_per_packet": 64, "members": [{"rank": 0, "mac": "02:00:00:00:00:01", "ip": "10.0.0.1", "port": 1}, {"rank": 1, "mac": "02:00:00:00:00:02", "ip": "10.0.0.1", "port": 1}]}}]'
refused "members[0]: field 'ports' 2: several flows per rank (E7) are not in the P4 profile" \
	"[$S1 \"members\": [{\"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": \"10.0.0.1\", \"port\": 1, \"ports\": 2}]}}]"
refused "members[0]: field 'ports' must be a power of two in [1, 16] that divides 'slots'" \
	"[$S1 \"members\": [{\"rank\": 0, \"mac\": \"02:00:00:00:00:01\", \"ip\": \"10.0.0.1\", \"port\": 1, \"ports\": 3}]}}]"
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
