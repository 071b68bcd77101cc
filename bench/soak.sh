#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/soak.sh: a long run of small in-network all-reduces under loss, every
# dtype, op and wire, every element checked (bench/README.md "Soak"). One
# testbed of N hosts, cais-switch with L data lcores dropping P% of what it
# receives (--rx-loss, ARP spared), each host dropping P% of its IP input
# (nftables); then, until M minutes have passed, cais-allreduce-perf on every
# host, one run per (dtype, op, wire) in turn: f32, bf16 and f16 with sum,
# avg, max and min over FIXED32 and BLOCK16, i32 with the four ops over
# FIXED32; every doubling from 4 B to 64 KiB, K timed iterations each after
# one warm-up, --path auto --threshold 0 (in-network, the ring when the
# library gives up on the switch), --check. Each run continues the seqs of
# the one before. A line per run; at the end, the totals: collectives, those
# that stayed in-network and the fallbacks by reason (SILENT: the switch
# judged silent), retransmitted DATA against all DATA sent, wrong elements,
# the time per collective by size, the library's p99 of every (run, host)
# with the kind of collective behind those above 100 ms, and the switch's
# counters. Stops at the first rank that fails, hangs (a run bounded at
# 300 s) or gets a wrong element, and keeps the logs.
#
#   bench/soak.sh [--minutes M] [--ranks N] [--loss P] [--lcores L] [--iters K]
#                 [--build DIR] [--out DIR]
#                            (default 40, 4, 5, 1, 10, build/; needs root)
#   --out DIR: every run's logs and summary.txt kept there (default: a
#              temporary directory, removed unless a run failed)
set -euo pipefail
# shellcheck disable=SC2034 # scripts/lib/cli.sh's messages name it
PROG=soak.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../scripts/lib/switch.sh
. "$ROOT/scripts/lib/switch.sh"
# shellcheck source=../scripts/lib/cli.sh
. "$ROOT/scripts/lib/cli.sh"
MINUTES=40 N=4 LOSS=5 LCORES=1 ITERS=10 BUILD="$ROOT/build" OUT=""

while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) cli_help 4 26 && exit 0 ;;
	--minutes) MINUTES=${2:-} && shift ;;
	--ranks) N=${2:-} && shift ;;
	--loss) LOSS=${2:-} && shift ;;
	--lcores) LCORES=${2:-} && shift ;;
	--iters) ITERS=${2:-} && shift ;;
	--build) BUILD=${2:-} && shift ;;
	--out) OUT=${2:-} && shift ;;
	*) cli_unknown "$1" ;;
	esac
	shift
done
[[ "$MINUTES" =~ ^[0-9]{1,3}$ ]] && [ "$MINUTES" -ge 1 ] || die "--minutes '$MINUTES': 1..999"
[[ "$N" =~ ^[0-9]{1,2}$ ]] && [ "$N" -ge 2 ] && [ "$N" -le 16 ] || die "--ranks '$N': 2..16"
[[ "$LOSS" =~ ^[0-9]{1,2}$ ]] && [ "$LOSS" -le 25 ] || die "--loss '$LOSS': a percentage, 0..25"
[[ "$LCORES" =~ ^[0-9]{1,2}$ ]] && [ "$LCORES" -ge 1 ] || die "--lcores '$LCORES': 1 or more"
[ "$LCORES" -le "$(nproc)" ] || die "--lcores $LCORES: this machine has $(nproc) CPUs"
[[ "$ITERS" =~ ^[0-9]{1,3}$ ]] && [ "$ITERS" -ge 1 ] || die "--iters '$ITERS': 1..999"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
[ "$LOSS" -eq 0 ] || command -v nft >/dev/null || die "--loss needs nft (nftables)"
command -v /usr/bin/python3 >/dev/null || die "needs /usr/bin/python3 (the totals)"
SWITCH="$BUILD/dataplane/cais-switch" PERF="$BUILD/agent/cais-allreduce-perf"
CTL="$BUILD/control/cais-ctl"
[ -x "$SWITCH" ] && [ -x "$PERF" ] && [ -x "$CTL" ] ||
	die "no cais-switch, cais-allreduce-perf or cais-ctl in $BUILD (meson compile -C $BUILD)"

NAME="sk$((RANDOM % 9000 + 1000))"
CTL_ADDR="127.0.0.1:$((20000 + (RANDOM * 32768 + RANDOM + $$) % 30000))"
if [ -n "$OUT" ]; then
	mkdir -p "$OUT" || die "--out $OUT: cannot create it"
	WORK=$(cd "$OUT" && pwd) KEEP=1
else
	WORK=$(mktemp -d /tmp/cais-soak.XXXXXX) KEEP=0
fi
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -z "${CB_SW_PID:-}" ] || cb_switch_stop 5 >/dev/null 2>&1 || true
	bash "$ROOT/scripts/testbed.sh" down --name "$NAME" >/dev/null 2>&1 || true
	if [ "$KEEP" -eq 0 ]; then rm -rf "$WORK"; else echo "$PROG: logs in $WORK"; fi
}
trap cleanup EXIT
say() { echo "[soak $(date +%T)] $*"; }

# (dtype op wire tensor): the session's tensors 1-2 sum, 3-4 max, 5-6 min,
# odd FIXED32, even BLOCK16; avg is summed by the switch
RUNS=()
for dt in f32 bf16 f16 i32; do
	for op in sum avg max min; do
		case $op in sum | avg) t=1 ;; max) t=3 ;; min) t=5 ;; esac
		RUNS+=("$dt $op fixed32 $t")
		[ "$dt" = i32 ] || RUNS+=("$dt $op block16 $((t + 1))")
	done
done

say "$N hosts, cais-switch with $LCORES lcore(s), $LOSS% loss both ways, $MINUTES minutes;" \
	"${#RUNS[@]} runs a round (dtype x op x wire), 4 B..64 KiB, $ITERS iterations a size"
bash "$ROOT/scripts/testbed.sh" up --name "$NAME" --hosts "$N" --mtu 9000 >"$WORK/testbed.log" 2>&1 ||
	{ cat "$WORK/testbed.log" >&2; die "testbed up"; }
eval "$(bash "$ROOT/scripts/testbed.sh" env --name "$NAME")"
cb_host_loss "$N" "$LOSS" || die "the hosts' loss rules"
cb_members "$N" 47000
{
	echo "["
	echo "  {\"cmd\": \"session.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"n\": $N, \"slots\": 64,"
	echo "    \"elems_per_packet\": 2048, \"loss_hints\": 1, \"members\": [$CB_MEMBERS]}},"
	t=0
	for op in sum max min; do
		echo "  {\"cmd\": \"tensor.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"tensor\": $((t + 1)), \"op\": \"$op\", \"scale\": 1024}},"
		sep=,
		[ "$op" = min ] && sep=
		echo "  {\"cmd\": \"tensor.add\", \"args\": {\"tenant\": 1, \"session\": 1, \"tensor\": $((t + 2)), \"op\": \"$op\", \"scale\": 16777216, \"wire\": \"block16\"}}$sep"
		t=$((t + 2))
	done
	echo "]"
} >"$WORK/config.json"
SW_LOSS=()
[ "$LOSS" -eq 0 ] || SW_LOSS=(--rx-loss "$LOSS")
CB_SW_LCORES=$LCORES cb_switch_start "$SWITCH" "$NAME" "$WORK/switch.log" "$N" --stats-period 0 \
	--ctl "$CTL_ADDR" --config "$WORK/config.json" "${SW_LOSS[@]}" || die "cais-switch did not start"

# One run on every host: RUN's settings from seq $SEQ; its logs run-K.hI.log.
# @return 0 every rank passed, 1 not (a rank failed, hung or got a wrong element)
one_run() {
	local k=$1 dt=$2 op=$3 wire=$4 tensor=$5 i rc ok=0
	PIDS=()
	for ((i = 1; i <= N; i++)); do
		timeout -k 5 300 ip netns exec "$(eval "echo \$TB_NS_$i")" "$PERF" --rank $((i - 1)) \
			--world "$N" --switch "$TB_AGG_IP" --peers "$CB_PEERS" --slots 64 --elems 2048 \
			--dtype "$dt" --op "$op" --wire "$wire" --tensor "$tensor" --scale 1024 \
			--min-bytes 4 --max-bytes 64K --iters "$ITERS" --warmup 1 --check \
			--path auto --threshold 0 --first-seq "$SEQ" >"$WORK/run-$k.h$i.log" 2>&1 &
		PIDS+=($!)
	done
	for ((i = 1; i <= N; i++)); do
		rc=0
		wait "${PIDS[$((i - 1))]}" || rc=$?
		[ "$rc" -eq 0 ] || {
			ok=1
			echo "---- run $k ($dt $op $wire), host $i failed (status $rc; 124: hung):" >&2
			grep -v '^#' "$WORK/run-$k.h$i.log" | tail -n 5 >&2
		}
	done
	PIDS=()
	return $ok
}

# a summary field of a log: field LOG NAME
field() {
	awk -v k="$2" '$1 == "#" && $2 == "summary" {
		for (f = 3; f <= NF; f++) { split($f, kv, "="); if (kv[1] == k) print kv[2] } }' "$1"
}

SEQ=0 K=0 FAILED=0
END=$(($(date +%s) + MINUTES * 60))
T0=$(date +%s)
while [ "$(date +%s)" -lt "$END" ]; do
	r=${RUNS[$((K % ${#RUNS[@]}))]}
	# shellcheck disable=SC2086 # the run's four words
	set -- $r
	t1=$(date +%s%N)
	if ! one_run "$K" "$@"; then
		FAILED=1
		break
	fi
	next=$(field "$WORK/run-$K.h1.log" next_seq)
	for ((i = 2; i <= N; i++)); do
		[ "$(field "$WORK/run-$K.h$i.log" next_seq)" = "$next" ] || {
			echo "run $K: the ranks end at different seqs" >&2
			FAILED=1
		}
	done
	[ "$FAILED" -eq 0 ] || break
	SEQ=$next
	say "run $((K + 1)) (round $((K / ${#RUNS[@]} + 1))): $r:" \
		"$(field "$WORK/run-$K.h1.log" collectives) collectives," \
		"in-network $(field "$WORK/run-$K.h1.log" in_network)," \
		"fallbacks $(field "$WORK/run-$K.h1.log" fallbacks)," \
		"retransmitted DATA $(for ((i = 1; i <= N; i++)); do field "$WORK/run-$K.h$i.log" retx; done |
			awk '{ s += $1 } END { print s + 0 }')," \
		"wrong $(field "$WORK/run-$K.h1.log" wrong)" \
		"($(awk -v a="$t1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }') s)"
	K=$((K + 1))
done
[ "$FAILED" -eq 0 ] || KEEP=1

"$CTL" -s "$CTL_ADDR" -j stats.get >"$WORK/switch-stats.json" 2>/dev/null || echo '{}' >"$WORK/switch-stats.json"
/usr/bin/python3 - "$WORK" "$N" "$K" "$(($(date +%s) - T0))" "$LOSS" >"$WORK/summary.txt" <<'PY'
import glob, json, os, re, statistics, sys

work, n, runs, wall, loss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
coll = innet = retx = chunks = wrong = checked = 0
fb = {}
sizes = {}  # bytes -> (medians of rank 0, its slowest)
p99s = []  # (the library's p99 of a run on a host, us; run; host): untimed collectives too
tails = {}  # p99s above 100 ms by the slowest of: "timed", "warm-up", "closing", "none"
for k in range(runs):
    for i in range(1, n + 1):
        text = open(os.path.join(work, f"run-{k}.h{i}.log")).read()
        s = dict(kv.split("=", 1) for kv in re.search(r"^# summary (.*)$", text, re.M).group(1).split())
        m = re.search(r"^# metrics: .* chunks (\d+) retransmitted (\d+)", text, re.M)
        q = re.search(r"^# metrics: .* p99 (\d+) us", text, re.M)
        if q:
            p99 = int(q.group(1))
            p99s.append((p99, k + 1, i))
            if p99 > 100000:
                # which collective of the run it was, by the slowest of each kind;
                # the p99 is a histogram bucket's bound, so half of it is a match
                timed = max((float(w[11]) for w in map(str.split, text.splitlines())
                             if len(w) >= 12 and not w[0].startswith("#")), default=0)
                kinds = {"timed": timed, "warm-up": 1000 * float(s.get("warmup_max_ms", 0)),
                         "closing": 1000 * float(s.get("closing_ms", 0))}
                kind = max(kinds, key=kinds.get)
                kind = kind if kinds[kind] >= p99 / 2 else "none"
                if kind == "warm-up":
                    kind += f" of {s.get('warmup_max_bytes', '?')} B"
                tails[kind] = tails.get(kind, 0) + 1
        retx += int(s["retx"])
        chunks += int(m.group(1)) if m else 0
        wrong += int(s.get("wrong", 0))
        checked += int(s.get("checked", 0))
        if s["fallbacks"] != "none":
            for f in s["fallbacks"].split(","):
                name, c = f.split(":")
                fb[name] = fb.get(name, 0) + int(c)
        if i == 1:
            coll += int(s["collectives"])
            innet += int(s["in_network"])
            for line in text.splitlines():
                w = line.split()
                if line.startswith("#") or len(w) < 12:
                    continue
                med, slow = sizes.setdefault(int(w[0]), ([], []))
                med.append(float(w[5]))
                slow.append(float(w[11]))
print(f"{runs} runs in {wall} s, {loss}% loss both ways, {n} ranks")
print(f"collectives (rank 0, warm-ups included): {coll}, in-network {innet}"
      f" ({100.0 * innet / max(coll, 1):.2f}%)")
print("fallbacks (all ranks):", ", ".join(f"{k} {v}" for k, v in sorted(fb.items())) or "none")
print(f"DATA retransmitted (all ranks): {retx}, {100.0 * retx / max(chunks, 1):.2f}% of the {chunks} chunks sent")
print(f"elements checked (all ranks): {checked}, wrong: {wrong}")
print("time per collective by size, rank 0 (ms): median of the runs' medians / the slowest iteration"
      " / each run's slowest iteration: median, p90 (where a loss's repair shows)")
for b in sorted(sizes):
    med, slow = sizes[b]
    p90 = sorted(slow)[9 * len(slow) // 10]  # nearest rank; an index below len for any len
    print(f"  {b:>6} B  {statistics.median(med) / 1000:8.2f}  /  {max(slow) / 1000:8.1f}"
          f"  /  {statistics.median(slow) / 1000:7.2f} {p90 / 1000:7.2f}   ({len(med)} runs)")
if p99s:
    # the library's p99 counts every collective of a run: warm-ups, its error
    # checks on the ring and the closing one too, which the lines above do not
    worst = max(p99s)
    print(f"the library's p99 of a run (every collective, untimed ones too): median"
          f" {statistics.median(v for v, _, _ in p99s) / 1000:.2f} ms, above 100 ms in"
          f" {sum(1 for v, _, _ in p99s if v > 100000)} of {len(p99s)} (run, host),"
          f" worst {worst[0] / 1000:.1f} ms (run {worst[1]}, host {worst[2]})")
    if tails:
        print("  those above 100 ms, by their run's slowest collective: "
              + ", ".join(f"{k} {v}" for k, v in sorted(tails.items(), key=lambda kv: -kv[1]))
              + " (none: not a timed iteration, a warm-up or the closing collective)")
try:
    st = json.load(open(os.path.join(work, "switch-stats.json")))
    ss = st.get("sessions", [])
    keys = ("data_rx", "rounds", "results_tx", "retx", "resends", "duplicates", "stale", "abandoned")
    tot = {k: sum(x.get(k, 0) for x in ss) for k in keys if any(k in x for x in ss)}
    for k in ("acks", "acks_limited", "nacks", "queries", "idle_s"):
        if k in st:
            tot[k] = round(st[k], 1) if isinstance(st[k], float) else st[k]
    print("switch:", ", ".join(f"{k} {v}" for k, v in tot.items()) or "no counters")
except (OSError, ValueError) as e:
    print("switch: no counters:", e)
PY
say "totals:"
sed 's/^/    /' "$WORK/summary.txt"
[ "$FAILED" -eq 0 ] || die "a run failed (logs in $WORK)"
say "PASS"
