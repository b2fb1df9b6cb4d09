#!/bin/sh
# drain-trace.sh: the THP faults of scripts/frag-fault.c at --frag 50 traced on this host's own
# kernel, to time compact_zone's check_drain (the drain of the per-CPU LRU batches and free
# lists once the migrate scanner leaves a block it migrated from) with the per-CPU free lists
# at a given size (docs/constants.md section 7, docs/linux-thp.md). Not part of the build.
# Needs root; puts the sysctl and the tracing state back as it found them.
#
#   cc -O2 -o /tmp/frag-fault scripts/frag-fault.c
#   flock -x /tmp/splab-quiet.lock sh scripts/drain-trace.sh 0 /tmp/dtr/f0
#   flock -x /tmp/splab-quiet.lock sh scripts/drain-trace.sh 10000 /tmp/dtr/f10000
#   python3 scripts/drain-gap.py /tmp/dtr/f0.trace; python3 scripts/drain-gap.py /tmp/dtr/f10000.trace
#
# FRACTION is written to /proc/sys/vm/percpu_pagelist_high_fraction for the run (0: the
# kernel's default sizing; 10000: `high` = the zone's pages / 10000 / CPUs, 269 for this host's
# Normal zone, near Linux 4.3's 186). OUT.high gets /proc/zoneinfo's `high:` lines, OUT.run
# frag-fault's output, OUT.trace the trace of the whole run (compaction and migration events).
T=/sys/kernel/tracing
F=$1
OUT=$2
EV="compaction/mm_compaction_finished compaction/mm_compaction_migratepages
compaction/mm_compaction_try_to_compact_pages compaction/mm_compaction_end
migrate/mm_migrate_pages_start migrate/mm_migrate_pages"
old=$(cat /proc/sys/vm/percpu_pagelist_high_fraction)
oldbuf=$(cat $T/buffer_size_kb)
oldon=$(cat $T/tracing_on)
echo "$F" > /proc/sys/vm/percpu_pagelist_high_fraction
grep -A12 pagesets /proc/zoneinfo | grep -E "high:" | tr -s ' ' > "$OUT.high"
echo 0 > $T/tracing_on
echo 65536 > $T/buffer_size_kb
echo > $T/trace
for e in $EV; do echo 1 > $T/events/$e/enable; done
echo 1 > $T/tracing_on
/tmp/frag-fault 50 1024 always noreport > "$OUT.run" 2>&1
echo 0 > $T/tracing_on
cat $T/trace > "$OUT.trace"
for e in $EV; do echo 0 > $T/events/$e/enable; done
echo > $T/trace
echo "$oldbuf" > $T/buffer_size_kb
echo "$oldon" > $T/tracing_on
echo "$old" > /proc/sys/vm/percpu_pagelist_high_fraction
