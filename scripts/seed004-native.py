#!/usr/bin/env python3
"""Measure pairs of native executables, standard pages against superpages (seed 004 5.1: "Each
benchmark trial consists of two executions of the application with a given data set. One
execution is configured to run with standard pages and the other utilizes superpages. ... Each
trial is repeated several times").

    python3 scripts/seed004-native.py --build --reps 7 --label transpose BASE_EXE SUPER_EXE [-- ARGS]
    python3 scripts/seed004-native.py --build --pairs pairs.json

BASE_EXE is the program on the C library's malloc; SUPER_EXE the same program whose allocations
go to smalloc (runtime/smalloc: an smalloc-linked build, or the same binary with
--super-preload libsmalloc.so). pairs.json is a list of objects
{"label": ..., "base": EXE, "super": EXE, "args": [...]} (args optional).

The two are run alternately (the order flips every repetition), R times each. The base run gets
SPLAB_THP_REPORT=1 and LD_PRELOAD=thpreport.so, the superpage run SMALLOC_REPORT=1 (and
thpreport too, for its whole-process Rss); stdout of the two must agree (the programs print
checksums). Printed: a markdown table of the medians and min-max of wall time, the
AnonHugePages each run reported at exit, and each run's peak RSS (thpreport's VmHWM line: the
footprint cost of superpages), medians over the runs. AnonHugePages is read at exit, after the
program's frees: glibc has returned its mmapped blocks by then, while smalloc keeps freed large
regions (up to 256MB per heap) and still sees them. This machine is typically a noisy shared
VM: keep R odd and read the spread.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(REPO, "target", "seed004")
THP_RE = re.compile(r"^thpreport: AnonHugePages (\d+) kB, Rss (\d+) kB$", re.M)
HWM_RE = re.compile(r"^thpreport: VmHWM (\d+) kB$", re.M)
SMALLOC_RE = re.compile(
    r"^smalloc: (superpage|base) heap: mapped (\d+) bytes in (\d+) regions, AnonHugePages (\d+) kB",
    re.M,
)


def die(msg):
    print(f"seed004-native: {msg}", file=sys.stderr)
    sys.exit(2)


def cc(args):
    cmd = ["cc", "-std=c11", "-O2", "-Wall", "-Wextra"] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{' '.join(cmd)} failed:\n{r.stderr}")


def smalloc_so():
    """libsmalloc.so as `splab cc` builds it (one build of the runtime, in splab's cache)."""
    splab = os.environ.get("SPLAB", os.path.join(REPO, "target", "release", "splab"))
    r = subprocess.run([splab, "cc", "--print-preload"], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{splab} cc --print-preload failed:\n{r.stderr}")
    return r.stdout.strip()


def build():
    """thpreport.so into target/seed004/, and libsmalloc.so from `splab cc --print-preload`."""
    os.makedirs(OUT_DIR, exist_ok=True)
    thp = os.path.join(OUT_DIR, "thpreport.so")
    cc(["-fPIC", "-shared", os.path.join(REPO, "runtime/thpreport/thpreport.c"), "-o", thp])
    so = smalloc_so()
    print(f"built {thp}; smalloc: {so}", file=sys.stderr)
    return thp, so


def run_once(exe, args, env_extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SMALLOC_") and k not in ("LD_PRELOAD", "SPLAB_THP_REPORT")}
    env.update(env_extra)
    t0 = time.perf_counter()
    r = subprocess.run([exe] + args, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    stdout, stderr = r.stdout, r.stderr
    if r.returncode != 0:
        die(f"{exe} {' '.join(args)} exited with status {r.returncode}:\n{stderr}")
    hwm = HWM_RE.findall(stderr)
    thp = THP_RE.findall(stderr)
    heaps = {m[0]: (int(m[1]), int(m[2]), int(m[3])) for m in SMALLOC_RE.findall(stderr)}
    return {
        "wall": wall,
        "maxrss_kb": int(hwm[-1]) if hwm else None,
        "stdout": stdout,
        "thp_kb": int(thp[-1][0]) if thp else None,
        "rss_kb": int(thp[-1][1]) if thp else None,
        "heaps": heaps,
    }


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def measure(pair, reps, thp_so, super_preload, base_preload, base_extra, super_extra):
    label, base, sup, args = pair["label"], pair["base"], pair["super"], pair.get("args", [])
    for exe in (base, sup):
        if not os.access(exe, os.X_OK):
            die(f"{label}: {exe} is not an executable file")
    bpre = [base_preload] if base_preload else []
    base_env = {"SPLAB_THP_REPORT": "1", "LD_PRELOAD": " ".join(bpre + [thp_so]), **base_extra}
    pre = [super_preload] if super_preload else []
    super_env = {"SMALLOC_REPORT": "1", "SPLAB_THP_REPORT": "1",
                 "LD_PRELOAD": " ".join(pre + [thp_so]), **super_extra}
    b, s = [], []
    for r in range(reps):
        order = [("b", base, base_env), ("s", sup, super_env)]
        if r % 2:
            order.reverse()
        for tag, exe, env in order:
            (b if tag == "b" else s).append(run_once(exe, args, env))
    if b[0]["stdout"] != s[0]["stdout"]:
        die(f"{label}: the two programs print different results:\n"
            f"base:  {b[0]['stdout'].strip()}\nsuper: {s[0]['stdout'].strip()}")
    if not s[0]["heaps"]:
        print(f"seed004-native: {label}: the superpage run printed no smalloc report "
              "(is it linked with smalloc, or given --super-preload?)", file=sys.stderr)
    bw = [x["wall"] for x in b]
    sw = [x["wall"] for x in s]
    sup_heap_kb = med([x["heaps"].get("superpage", (0, 0, None))[2] for x in s])
    return {
        "label": label,
        "base_s": statistics.median(bw), "base_min": min(bw), "base_max": max(bw),
        "super_s": statistics.median(sw), "super_min": min(sw), "super_max": max(sw),
        "base_ahp_kb": med([x["thp_kb"] for x in b]),
        "super_ahp_kb": med([x["thp_kb"] for x in s]),
        "super_heap_ahp_kb": sup_heap_kb,
        "base_rss_kb": med([x["rss_kb"] for x in b]),
        "super_rss_kb": med([x["rss_kb"] for x in s]),
        "base_maxrss_kb": med([x["maxrss_kb"] for x in b]),
        "super_maxrss_kb": med([x["maxrss_kb"] for x in s]),
    }


def fmt_kb(v):
    return "?" if v is None else f"{int(v)}"


def table(rows, reps):
    out = [
        f"| program | base median s | super median s | speedup | AnonHugePages base/super kB "
        f"| peak RSS base/super kB | spread (min-max s, {reps} runs each) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        speed = r["base_s"] / r["super_s"] if r["super_s"] > 0 else float("nan")
        ahp = f"{fmt_kb(r['base_ahp_kb'])} / {fmt_kb(r['super_ahp_kb'])}"
        if r["super_heap_ahp_kb"] is not None:
            ahp += f" (smalloc heap {fmt_kb(r['super_heap_ahp_kb'])})"
        out.append(
            f"| {r['label']} | {r['base_s']:.3f} | {r['super_s']:.3f} | {speed:.2f}x | {ahp} "
            f"| {fmt_kb(r['base_maxrss_kb'])} / {fmt_kb(r['super_maxrss_kb'])} "
            f"| base {r['base_min']:.3f}-{r['base_max']:.3f}, "
            f"super {r['super_min']:.3f}-{r['super_max']:.3f} |"
        )
    return "\n".join(out)


def main():
    argv = sys.argv[1:]
    prog_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, prog_args = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=7, help="runs of each executable (default 7)")
    p.add_argument("--label", help="the program's name in the table (default: BASE_EXE's)")
    p.add_argument("--pairs", help="a JSON list of {label, base, super, args} pairs")
    p.add_argument("--build", action="store_true",
                   help="build thpreport.so into target/seed004/ with cc (libsmalloc.so comes from splab cc --print-preload)")
    p.add_argument("--thpreport", help="path of thpreport.so (default target/seed004/thpreport.so)")
    p.add_argument("--super-preload", metavar="SO",
                   help="LD_PRELOAD this library in the superpage run (e.g. libsmalloc.so; "
                        "'smalloc' = the library `splab cc --print-preload` names)")
    p.add_argument("--base-preload", metavar="SO",
                   help="LD_PRELOAD this library in the base run too ('smalloc' as above; with "
                        "--base-env SMALLOC_MODE=base it isolates the page size from the "
                        "allocator)")
    p.add_argument("--base-env", action="append", default=[], metavar="K=V",
                   help="an environment variable for the base run (repeatable)")
    p.add_argument("--super-env", action="append", default=[], metavar="K=V",
                   help="an environment variable for the superpage run (repeatable)")
    p.add_argument("--json", help="also write the rows as JSON here")
    p.add_argument("base", nargs="?")
    p.add_argument("super", nargs="?")
    a = p.parse_args(argv)
    if a.reps < 1:
        die(f"--reps {a.reps}: must be at least 1")
    thp_so = a.thpreport or os.path.join(OUT_DIR, "thpreport.so")
    so = None
    if a.build:
        thp_built, so = build()
        thp_so = a.thpreport or thp_built
    if not os.path.exists(thp_so):
        die(f"{thp_so}: no thpreport.so (pass --build, or --thpreport PATH)")
    thp_so = os.path.abspath(thp_so)
    def preload(opt, v):
        if v == "smalloc":
            v = so or smalloc_so()
        if v:
            if not os.path.exists(v):
                die(f"{opt} {v}: no such file (pass --build)")
            v = os.path.abspath(v)
        return v

    def envs(opt, items):
        out = {}
        for kv in items:
            if "=" not in kv or kv.startswith("="):
                die(f"{opt} {kv!r}: expected NAME=VALUE")
            k, v = kv.split("=", 1)
            out[k] = v
        return out

    sp = preload("--super-preload", a.super_preload)
    bp = preload("--base-preload", a.base_preload)
    base_extra = envs("--base-env", a.base_env)
    super_extra = envs("--super-env", a.super_env)
    if a.pairs:
        if a.base or a.super or prog_args:
            die("give either --pairs FILE or BASE_EXE SUPER_EXE, not both")
        try:
            with open(a.pairs) as f:
                pairs = json.load(f)
        except (OSError, ValueError) as e:
            die(f"--pairs {a.pairs}: {e}")
        if not isinstance(pairs, list) or not all(
                isinstance(x, dict) and {"label", "base", "super"} <= set(x) for x in pairs):
            die(f"--pairs {a.pairs}: expected a list of {{label, base, super[, args]}} objects")
    else:
        if not (a.base and a.super):
            die("need BASE_EXE and SUPER_EXE (or --pairs FILE)")
        pairs = [{"label": a.label or os.path.basename(a.base), "base": a.base,
                  "super": a.super, "args": prog_args}]
    rows = []
    for pair in pairs:
        print(f"seed004-native: {pair['label']}: {a.reps} runs each ...", file=sys.stderr)
        rows.append(measure(pair, a.reps, thp_so, sp, bp, base_extra, super_extra))
    print(table(rows, a.reps))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
