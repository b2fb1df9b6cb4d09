#!/usr/bin/env bash
# Every figure of docs/timing.md, in order. Runs are deterministic: the same build prints the
# same numbers. Takes ~15 minutes on this project's 2-core machine (release build first).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
export SPLAB=target/release/splab
steady=scripts/steady.py

echo "== GUPS, 2MB vs 4KB pages on skylake (seed 003 Table 8 analogue)"
for form in hpcc dis; do
  for size in 256M 1G 4G 8G; do
    python3 $steady -m skylake -p base,freebsd -w "gups:size=$size,form=$form,updates={n}" -n 20M
  done
done

echo "== seq: a sequential read pass"
python3 $steady -m skylake -p base,freebsd -w 'seq:size=1G,passes={n}' -n 1

echo "== chase: one chain and sixteen"
for k in 1 16; do
  python3 $steady -m skylake -p base,freebsd -w "chase:size=1G,chains=$k,hops={n}" -n 2M
done

echo "== seed 000 Table 1 on alpha21264"
for w in matrix:n=1000 tree; do
  $SPLAB compare -m alpha21264 -p base,navarro -w $w
done
