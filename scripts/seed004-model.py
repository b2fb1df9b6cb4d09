#!/usr/bin/env python3
"""Seed 004 Figure 2 in the model: TLB misses of transpose built with base pages and with
superpages, against the matrix size, on core2-64 under linux-madvise (docs/seed004.md).

Then the same for stride (seed 004 Figure 5's average reduction) and the gzip-like window over
growing inputs (Figure 4), and a Figure 5 table: each program's TLB-miss reduction.

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
            row[build] = (lv[0]["misses"], lv[1]["misses"], r["tlb"]["walks"], None, r["time"]["seconds"])
            reports[build].append(js)
        rows.append(row)
    print(f"| N | matrix (KB) | pass (auto) spread pages: decision | DTLB0 misses base | superpages | DTLB1 misses base | superpages | est. time base s | superpages s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        b, s = r["base"], r["superpages"]
        print(f"| {r['n']} | {r['kb']:.1f} | {r['spread']:.1f}: {r['decision']} | {b[0]:,} | {s[0]:,} | {b[1]:,} | {s[1]:,} | {b[4]:.4f} | {s[4]:.4f} |")
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
    # Figure 4 (gzip over input sizes) and Figure 5 (reduction per program).
    others = [("window", "window.c", [], [str(mb)], f"window {mb}MB") for mb in (1, 2, 4, 8)]
    others.append(("stride", "stride.c", ["-DSIZE_MB=64", "-DREPS=1"], [], "stride 64MB"))
    fig5 = [("transpose 300x300", rows[-1]["base"], rows[-1]["superpages"])] if rows and rows[-1]["n"] == 300 else []
    print()
    print("| program | pass (auto) | DTLB0 misses base | superpages | reduction | DTLB1 misses base | superpages | reduction | est. time base s | superpages s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for tag, src2, defines, run_args, label in others:
        print(f"[{label}]", file=sys.stderr, flush=True)
        res = {}
        for build in ("auto", "base", "superpages"):
            exe = os.path.join(args.out, f"{tag}-{'-'.join(run_args) or 'd'}-{build}")
            rep = f"{exe}.superpages.json"
            sh([splab, "cc", "-q", "-m", args.machine, "--superpages", build, f"examples/seed004/{src2}",
                "-o", exe, "--report", rep, "--", *defines])
            if build == "auto":
                res["auto"] = json.load(open(rep, encoding="utf-8"))["decision"]
                continue
            trace = f"{exe}.spt"
            sh([splab, "record", "-q", "-o", trace, "--", exe, *run_args])
            js = f"{exe}.{args.machine}.json"
            sh([splab, "run", "-q", "-m", args.machine, "-p", args.policy, "-w", f"trace:path={trace}", "--json", js])
            r = json.load(open(js, encoding="utf-8"))
            lv = r["tlb"]["levels"]
            res[build] = (lv[0]["misses"], lv[1]["misses"], r["tlb"]["walks"], r["time"]["seconds"])
        b, sp = res["base"], res["superpages"]
        print(f"| {label} | {res['auto']} | {b[0]:,} | {sp[0]:,} | {red(b[0], sp[0])} | {b[1]:,} | {sp[1]:,} | {red(b[1], sp[1])} | {b[3]:.4f} | {sp[3]:.4f} |")
    for label, b, sp in fig5:
        print(f"| {label} | superpages | {b[0]:,} | {sp[0]:,} | {red(b[0], sp[0])} | {b[1]:,} | {sp[1]:,} | {red(b[1], sp[1])} | {b[4]:.4f} | {sp[4]:.4f} |")
    print(f"figures: {figs}/seed004-figure2-dtlb0.svg, {figs}/seed004-figure2-dtlb1.svg", file=sys.stderr)


def red(x, y):
    """The reduction from x to y, in percent."""
    return f"{100 * (x - y) / x:.1f}%" if x else "-"


def compile_one(splab, src, n, reps, decision, out, machine):
    exe = os.path.join(out, f"transpose-{n}-{decision}")
    rep = f"{exe}.superpages.json"
    sh([splab, "cc", "-q", "-m", machine, "--superpages", decision, src, "-o", exe, "--report", rep,
        "--", f"-DN={n}", f"-DREPS={reps}"])
    return rep


if __name__ == "__main__":
    main()
