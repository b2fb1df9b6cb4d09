#!/usr/bin/env python3
"""onemib-runs.py: many interleaved native runs of a held-out case, as `splab validate` runs them,
and what its statistic makes of them (docs/validation.md, "The 1 MiB rows"). Not part of the build.

    cc -O2 -fno-tree-vectorize -o /tmp/heldout crates/splab/src/validate/heldout.c
    flock -x /tmp/splab-quiet.lock python3 scripts/onemib-runs.py /tmp/heldout seq 1048576 200 > seq.txt
    python3 scripts/onemib-runs.py --analyse seq.txt

The first form runs PAIRS pairs (4k then 2m, work 0.5, validate's full plan) after one warm-up
run and prints one line a run: start time (ms since the first run), mode, and heldout's own
line. The second reads such a file and prints, per mode, the whole-run, setup and kernel times
(p10/p50/p90, ms, all runs and the runs without a context switch); the share of runs in the
fast phase (kernel time below 1.25 x the mode's p10) per mode; the paired ratio 4k/2m of the
whole-run times; and, over every window of 5 consecutive pairs (validate's 5 runs a mode), the
distribution of the speedup validate's statistic gave (p10 of each mode's clean runs, apart)
and of paired statistics: the ratio of the pair with the least 4k+2m time, the median of the
pairs' ratios, and the median over 5 consecutive pairs with no context switch in either run
(what validate takes since 2026-11-28).
"""
import subprocess
import sys
import time


def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, round(p * (len(v) - 1)))]


def qs(v):
    return f"p10 {q(v, .1):.3f} p50 {q(v, .5):.3f} p90 {q(v, .9):.3f}"


def run(prog, kind, size, pairs, work):
    subprocess.run([prog, kind, size, "4k", work], capture_output=True, check=True)
    t0 = time.monotonic()
    for _ in range(pairs):
        for m in ("4k", "2m"):
            t = (time.monotonic() - t0) * 1e3
            out = subprocess.run([prog, kind, size, m, work], capture_output=True, text=True, check=True)
            line = next(l for l in out.stdout.splitlines() if l.startswith("heldout "))
            print(f"{t:.1f} {m} {line}", flush=True)


def parse(path):
    runs = []
    for line in open(path):
        f = line.split()
        if len(f) < 4 or f[2] != "heldout":
            continue
        d = {k: int(v) for k, v in (kv.split("=") for kv in f[3:])}
        d["t"], d["mode"] = float(f[0]), f[1]
        runs.append(d)
    return runs


def p10_clean(rs):
    clean = [r["ns"] for r in rs if r["switches"] == 0]
    return q(clean if len(clean) >= 2 else [r["ns"] for r in rs], 0.1)


def analyse(path):
    runs = parse(path)
    by = {m: [r for r in runs if r["mode"] == m] for m in ("4k", "2m")}
    for m, rs in by.items():
        for label, sel in (("all", rs), ("clean", [r for r in rs if r["switches"] == 0])):
            if not sel:
                continue
            print(f"{m} {label:5} n={len(sel):3}: whole {qs([r['ns'] / 1e6 for r in sel])} | "
                  f"setup {qs([r['setup_ns'] / 1e6 for r in sel])} | kernel {qs([r['kernel_ns'] / 1e6 for r in sel])}")
    floor = min(q([r["kernel_ns"] for r in rs], 0.1) for rs in by.values())
    for m, rs in by.items():
        fast = sum(r["kernel_ns"] < 1.25 * floor for r in rs)
        print(f"{m}: {fast} of {len(rs)} runs in the fast phase (kernel < 1.25 x {floor / 1e6:.3f} ms)")
    pairs = [(a, b) for a, b in zip(runs[0::2], runs[1::2]) if a["mode"] == "4k" and b["mode"] == "2m"]
    print(f"paired 4k/2m whole-run ratio, {len(pairs)} pairs: {qs([a['ns'] / b['ns'] for a, b in pairs])}")
    both = [a["ns"] / b["ns"] for a, b in pairs if a["kernel_ns"] < 1.25 * floor and b["kernel_ns"] < 1.25 * floor]
    if both:
        print(f"  pairs with both runs fast ({len(both)}): {qs(both)}")
    w = 5
    sep, least, med = [], [], []
    for i in range(len(pairs) - w + 1):
        win = pairs[i:i + w]
        sep.append(p10_clean([a for a, _ in win]) / p10_clean([b for _, b in win]))
        a, b = min(win, key=lambda p: p[0]["ns"] + p[1]["ns"])
        least.append(a["ns"] / b["ns"])
        med.append(q([a["ns"] / b["ns"] for a, b in win], 0.5))
    # validate's paired statistic: the median ratio of 5 consecutive pairs with no context switch
    clean = [(a, b) for a, b in pairs if a["switches"] == 0 and b["switches"] == 0]
    cmed = [q([a["ns"] / b["ns"] for a, b in clean[i:i + w]], 0.5) for i in range(len(clean) - w + 1)]
    for name, v in (("p10 of each mode (validate)", sep), ("ratio of the least pair", least),
                    ("median of pair ratios", med), ("the same, clean pairs", cmed)):
        if not v:
            continue
        lo = sum(x < 0.9 for x in v)
        print(f"windows of {w} pairs ({len(v)}), {name:28}: p2 {q(v, .02):.3f} {qs(v)} p98 {q(v, .98):.3f}; "
              f"below 0.9: {lo}")


if __name__ == "__main__":
    if sys.argv[1] == "--analyse":
        analyse(sys.argv[2])
    else:
        run(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "0.5")
