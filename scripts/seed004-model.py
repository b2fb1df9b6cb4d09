#!/usr/bin/env python3
"""Seed 004 Figure 2 in the model: TLB misses of transpose built with base pages and with
superpages, against the matrix size, on core2-64 under linux-madvise (docs/seed004.md).

For each N, `splab cc` builds examples/seed004/transpose.c twice (-DN=N; --superpages base and
superpages: the same pass, forced, so only the allocator differs), `splab record` records each
run, and `splab run -m core2-64 -p linux-madvise` replays it. Prints a table (DTLB0 and DTLB1
misses, walks, the pass's own decision for the auto build) and draws the curves with
`splab plot --x-values`.

    python3 scripts/seed004-model.py --out /tmp/seed004 --figures docs/figures [--sizes 50:300:10] [--reps 10]

SPLAB names the binary (default target/release/splab). Needs clang-19, llvm-19-dev, valgrind.
"""

import argparse
import json
import os
import subprocess
import sys


def sh(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"seed004-model: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for binaries, traces, reports and figures")
    ap.add_argument("--sizes", default="50:300:10", help="N from:to:step (inclusive)")
    ap.add_argument("--reps", type=int, default=10, help="transpositions per run (-DREPS)")
    ap.add_argument("--machine", default="core2-64")
    ap.add_argument("--policy", default="linux-madvise")
    ap.add_argument("--figures", help="directory for the figures (default: --out)")
    args = ap.parse_args()
    splab = os.environ.get("SPLAB", "target/release/splab")
    lo, hi, step = (int(x) for x in args.sizes.split(":"))
    sizes = list(range(lo, hi + 1, step))
    os.makedirs(args.out, exist_ok=True)
    src = "examples/seed004/transpose.c"
    reports = {"base": [], "superpages": []}
    rows = []
    for i, n in enumerate(sizes):
        print(f"[{i + 1}/{len(sizes)}] N = {n}", file=sys.stderr, flush=True)
        auto = json.loads(
            open(
                compile_one(splab, src, n, args.reps, "auto", args.out, args.machine), encoding="utf-8"
            ).read()
        )
        row = {"n": n, "kb": n * n * 4 / 1024, "decision": auto.get("decision"), "spread": auto.get("spread_pages_total")}
        for build in ("base", "superpages"):
            rep = compile_one(splab, src, n, args.reps, build, args.out, args.machine)
            exe = rep[: -len(".superpages.json")]
            trace = f"{exe}.spt"
            sh([splab, "record", "-q", "-o", trace, "--", exe])
            js = f"{exe}.{args.machine}.json"
            sh([splab, "run", "-q", "-m", args.machine, "-p", args.policy, "-w", f"trace:path={trace}", "--json", js])
            r = json.load(open(js, encoding="utf-8"))
            lv = r["tlb"]["levels"]
            row[build] = (lv[0]["misses"], lv[1]["misses"], r["tlb"]["walks"], r["pages"] if "pages" in r else None)
            reports[build].append(js)
        rows.append(row)
    print(f"| N | matrix (KB) | pass (auto) spread pages: decision | DTLB0 misses base | superpages | DTLB1 misses base | superpages |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        b, s = r["base"], r["superpages"]
        print(f"| {r['n']} | {r['kb']:.1f} | {r['spread']:.1f}: {r['decision']} | {b[0]:,} | {s[0]:,} | {b[1]:,} | {s[1]:,} |")
    figs = args.figures or args.out
    os.makedirs(figs, exist_ok=True)
    xs = ",".join(str(n) for n in sizes)
    for lvl, name in ((0, "dtlb0"), (1, "dtlb1")):
        sh(
            [splab, "plot", *reports["base"], *reports["superpages"], "-y", f"tlb.levels.{lvl}.misses",
             "--x-values", xs, "--x-label", "N (N x N int matrix)", "--label", "base pages",
             "--label", "superpages (smalloc)", "--title",
             f"transpose on {args.machine} under {args.policy}: {name.upper()} misses (seed 004 Figure 2)",
             "-o", os.path.join(figs, f"seed004-figure2-{name}.svg")]
        )
    print(f"figures: {figs}/seed004-figure2-dtlb0.svg, {figs}/seed004-figure2-dtlb1.svg", file=sys.stderr)


def compile_one(splab, src, n, reps, decision, out, machine):
    exe = os.path.join(out, f"transpose-{n}-{decision}")
    rep = f"{exe}.superpages.json"
    sh([splab, "cc", "-q", "-m", machine, "--superpages", decision, src, "-o", exe, "--report", rep,
        "--", f"-DN={n}", f"-DREPS={reps}"])
    return rep


if __name__ == "__main__":
    main()
