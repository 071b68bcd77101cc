#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The committed parity vectors are exactly what the cais-switch pipeline
# makes now: regenerate them into a temporary directory and compare.
#
#   test_vectors.sh GEN_VECTORS VECTOR_DIR
set -uo pipefail

GEN=$1
DIR=$2
TMP=$(mktemp -d /tmp/cais-vectors.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

"$GEN" --out "$TMP" || {
	echo "test_vectors: gen_vectors failed"
	exit 1
}
if ! diff -ru "$DIR" "$TMP" >"$TMP.diff" 2>&1; then
	head -n 60 "$TMP.diff"
	rm -f "$TMP.diff"
	echo "test_vectors: the committed vectors in $DIR differ from what the pipeline makes now."
	echo "If the change is deliberate: $GEN --out $DIR (and check the P4 program still agrees)."
	exit 1
fi
rm -f "$TMP.diff"
echo "test_vectors: $(ls "$DIR"/*.txt | wc -l) vector files up to date"
