#!/usr/bin/env python3
"""Steady-state cycles per unit of work, by the difference method of docs/timing.md.

Runs splab twice on workloads that differ only in length (WORKLOAD with {n} replaced by N and
by 2N) and prints, per policy, (cycles(2N) - cycles(N)) / N, the walk cycles per unit the same
way, and the speedup of every policy over the first. Set-up and first-touch faults cancel.

    python3 scripts/steady.py -m skylake -p base,freebsd -w 'gups:size=8G,updates={n}' -n 20M

N takes K/M/G (decimal). SPLAB names the binary (default target/release/splab).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def count(text):
    mult = {"K": 10**3, "M": 10**6, "G": 10**9}
    if text[-1].upper() in mult:
        return int(float(text[:-1]) * mult[text[-1].upper()])
    return int(text)


def run(splab, machine, policy, workload):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        subprocess.run(
            [splab, "run", "-m", machine, "-p", policy, "-w", workload, "--json", path],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--machine", required=True)
    ap.add_argument("-p", "--policies", required=True, help="comma-separated")
    ap.add_argument("-w", "--workload", required=True, help="with {n} where the length goes")
    ap.add_argument("-n", required=True, help="units of the short run (the long run does 2N)")
    a = ap.parse_args()
    if "{n}" not in a.workload:
        sys.exit("steady.py: the workload needs {n} where its length goes")
    splab = os.environ.get("SPLAB", "target/release/splab")
    n = count(a.n)
    rows = []
    for p in a.policies.split(","):
        short = run(splab, a.machine, p, a.workload.format(n=n))
        long = run(splab, a.machine, p, a.workload.format(n=2 * n))
        d = lambda f: (f(long) - f(short)) / n
        cyc = d(lambda r: r["time"]["cycles_total"])
        tlb = d(lambda r: r["time"]["cycles_tlb"])
        rows.append((p, cyc, tlb))
    print(f"{a.workload.format(n='N')} on {a.machine}, N = {n:,}: steady-state cycles per unit")
    print(f"  {'policy':<24} {'cycles':>10} {'walk+TLB':>10} {'walk share':>11} {'speedup':>8}")
    for p, cyc, tlb in rows:
        share = tlb / cyc if cyc else 0.0
        print(f"  {p:<24} {cyc:>10.2f} {tlb:>10.2f} {100 * share:>10.1f}% {rows[0][1] / cyc:>7.2f}x")


if __name__ == "__main__":
    main()
