#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Compare tp_gpt.py's loss curves step by step: backend cais against gloo.

  tp_compare.py --gloo gloo.csv --cais cais.csv [--bf16 cais-bf16.csv] [--steps N]
                [--tol 1e-3] [--bf16-tol 0.01] [--png FILE] [--logs DIR]

Checks (each printed with its figure, PASS or FAIL):
  fp32   |loss_cais - loss_gloo| / |loss_gloo| <= --tol at every step, and
         both runs have --steps steps
  bf16   |final_bf16 - final_gloo| / |final_gloo| <= --bf16-tol (the bf16 run
         against the fp32 run through gloo)
  in-network  with --logs: each cais run took the switch for at least
         --min-in-network of its all-reduces (libcais's counters, in its
         result line), so the comparison is of the switch's sums, every one
         of them as FIXED32 (fp32) or BLOCK16 (bf16) on the wire
Prints the time per step of every run (median and mean, steps 5 and later). --png draws the
curves and the relative difference with gnuplot. Exit status 0 when every
check passed, 1 otherwise, 2 on bad arguments.
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def load(path):
    steps, loss, secs = [], [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            steps.append(int(row["step"]))
            loss.append(float(row["loss"]))
            secs.append(float(row["seconds"]))
    return steps, loss, secs


def timing(secs):
    s = secs[5:] if len(secs) > 5 else secs
    return statistics.median(s) * 1e3, statistics.mean(s) * 1e3


def result_line(logs, label):
    p = os.path.join(logs, "%s.h1.log" % label)
    try:
        with open(p) as f:
            for line in f:
                if line.startswith("tp_gpt: result "):
                    return json.loads(line[len("tp_gpt: result "):])
    except OSError:
        pass
    return None


def draw(png, runs, diff, diff_bf16):
    gp = shutil.which("gnuplot")
    if not gp:
        print("tp_compare: no gnuplot: no %s" % png)
        return False
    d = tempfile.mkdtemp(prefix="tp-plot.")
    files = {}
    for label, (steps, loss, _) in runs.items():
        files[label] = os.path.join(d, label + ".dat")
        with open(files[label], "w") as f:
            for s, v in zip(steps, loss):
                f.write("%d %.9g\n" % (s, v))
    dfile = os.path.join(d, "diff.dat")
    with open(dfile, "w") as f:
        for s, v in diff:
            f.write("%d %.9g\n" % (s, max(v, 1e-9)))
    bfile = os.path.join(d, "diffbf16.dat")
    with open(bfile, "w") as f:
        for s, v in diff_bf16:
            f.write("%d %.9g\n" % (s, max(v, 1e-9)))
    style = {"gloo": "lc rgb '#1f77b4' lw 3", "cais": "lc rgb '#d62728' lw 1.5 dt 2",
             "cais-bf16": "lc rgb '#2ca02c' lw 1.5"}
    title = {"gloo": "gloo, fp32", "cais": "cais, fp32 (FIXED32, manager's scales)",
             "cais-bf16": "cais, bf16 (BLOCK16)"}
    order = [k for k in ("gloo", "cais-bf16", "cais") if k in runs]  # cais fp32 on top
    plots = ", ".join("'%s' using 1:2 with lines %s title \"%s\"" %
                      (files[k], style.get(k, ""), title.get(k, k)) for k in order)
    dplots = []
    if diff:
        dplots.append("'%s' using 1:2 with lines lc rgb '#d62728' title \"cais fp32 vs gloo\"" %
                      dfile)
    if diff_bf16:
        dplots.append("'%s' using 1:2 with lines lc rgb '#2ca02c' title \"cais bf16 vs gloo fp32\"" %
                      bfile)
    dplots.append("1e-3 with lines dt 3 lc rgb 'black' title \"fp32 bound (1e-3 every step)\"")
    if diff_bf16:
        dplots.append("1e-2 with lines dt 4 lc rgb 'gray40' title \"bf16 bound (1e-2, final step)\"")
    script = """
set terminal pngcairo size 1100,460 font ',10' noenhanced
set output '%s'
set multiplot layout 1,2 title "tp_gpt.py on 4 ranks of the testbed (tensor parallel, Megatron-style)"
set xlabel 'step'
set ylabel 'loss'
set grid
set key top right
plot %s
set logscale y
set yrange [1e-9:1]
set ylabel '|loss - loss(gloo)| / loss(gloo)  (1e-9: equal)'
set key top left
set format y '%%.0e'
plot %s
unset multiplot
""" % (png, plots, ", ".join(dplots))
    try:
        r = subprocess.run([gp], input=script.encode(), capture_output=True, timeout=60)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if r.returncode != 0:
        print("tp_compare: gnuplot failed: %s" % r.stderr.decode()[-500:])
        return False
    print("tp_compare: drew %s" % png)
    return True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--gloo", help="the gloo fp32 run's CSV")
    p.add_argument("--cais", help="the cais fp32 run's CSV")
    p.add_argument("--bf16", help="the cais bf16 run's CSV")
    p.add_argument("--steps", type=int, default=0, help="steps every run must have")
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--bf16-tol", type=float, default=0.01)
    p.add_argument("--png")
    p.add_argument("--logs", help="the directory of the runs' logs (their result lines)")
    p.add_argument("--min-in-network", type=float, default=0.9,
                   help="with --logs: the cais runs' share of all-reduces that went "
                        "in-network, at least (default 0.9)")
    a = p.parse_args(argv)
    runs = {}
    for label, path in (("gloo", a.gloo), ("cais", a.cais), ("cais-bf16", a.bf16)):
        if path:
            try:
                runs[label] = load(path)
            except (OSError, KeyError, ValueError) as e:
                print("tp_compare: %s: %s" % (path, e))
                return 1
    if not runs:
        p.error("nothing to compare (--gloo, --cais, --bf16)")
    ok = True
    print("%-10s %6s %12s %12s %14s %12s" % ("run", "steps", "first loss", "final loss",
                                           "step ms (med)", "(mean)"))
    for label, (steps, loss, secs) in runs.items():
        med, mean = timing(secs)
        print("%-10s %6d %12.6f %12.6f %14.1f %12.1f" % (label, len(steps), loss[0], loss[-1],
                                                       med, mean))
        if a.steps and len(steps) < a.steps:
            print("FAIL: %s has %d steps, not %d" % (label, len(steps), a.steps))
            ok = False
    diff, diff_bf16 = [], []
    if "gloo" in runs and "cais" in runs:
        g, c = runs["gloo"][1], runs["cais"][1]
        n = min(len(g), len(c))
        diff = [(i, abs(c[i] - g[i]) / abs(g[i])) for i in range(n)]
        worst = max(diff, key=lambda x: x[1])
        last = diff[-1][1]
        good = worst[1] <= a.tol and n > 0
        print("%s: fp32, cais vs gloo: largest relative loss difference %.3g at step %d "
              "(final %.3g) over %d steps; bound %g" %
              ("PASS" if good else "FAIL", worst[1], worst[0], last, n, a.tol))
        ok &= good
    if "gloo" in runs and "cais-bf16" in runs:
        g, b = runs["gloo"][1], runs["cais-bf16"][1]
        n = min(len(g), len(b))
        diff_bf16 = [(i, abs(b[i] - g[i]) / abs(g[i])) for i in range(n)]
        if len(b) == len(g):
            rel = abs(b[-1] - g[-1]) / abs(g[-1])
            good = rel <= a.bf16_tol
            print("%s: bf16 (cais, BLOCK16) final loss %.6f vs gloo fp32 %.6f: relative "
                  "difference %.3g; bound %g" % ("PASS" if good else "FAIL", b[-1], g[-1], rel,
                                                a.bf16_tol))
        else:
            good = False
            print("FAIL: bf16 and gloo runs have %d and %d steps" % (len(b), len(g)))
        ok &= good
    if "gloo" in runs and "cais" in runs:
        mg, mc = timing(runs["gloo"][2])[0], timing(runs["cais"][2])[0]
        print("time per step (median): gloo %.1f ms, cais fp32 %.1f ms (%.2fx gloo's)" %
              (mg, mc, mc / mg))
    if a.logs:
        for label in runs:
            if label == "gloo":
                continue
            r = result_line(a.logs, label)
            if not r or "cais" not in r:
                print("FAIL: %s: no result line with libcais's counters in %s" % (label, a.logs))
                ok = False
                continue
            m = r["cais"]
            frac = m["in_network"] / max(1, m["collectives"])
            good = frac >= a.min_in_network
            want = "block16" if label == "cais-bf16" else "fixed32"
            wires = m.get("in_network_wire", {})
            if wires.get(want, 0) != m["in_network"]:
                print("FAIL: %s: in-network all-reduces by wire type %s, not all %s" %
                      (label, wires, want))
                good = False
            print("%s: %s: %d of %d all-reduces in-network (%.1f%%; bound %.0f%%), fallbacks %s"
                  % ("PASS" if good else "FAIL", label, m["in_network"], m["collectives"],
                     100 * frac, 100 * a.min_in_network, m["fallback"] or "none") +
                  "; wire %s" % (", ".join("%s %d" % kv for kv in sorted(wires.items())) or "-"))
            print("    libcais: %s" % json.dumps(m, sort_keys=True))
            ok &= good
    if a.png:
        draw(a.png, runs, diff, diff_bf16)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
