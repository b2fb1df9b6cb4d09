#!/usr/bin/env python3
"""The check_drain step's time in a trace written by scripts/drain-trace.sh.

For frag-fault's own events: from each `mm_compaction_migratepages` (compact_zone, right after
`migrate_pages`) to the next `mm_compaction_finished` (the loop's next `compact_finished`) is
the drain, when the migrate scanner left the block, or nothing. Prints every such gap (n,
median, p10, p90 in us), the time per page inside `migrate_pages`, the stalls' length
(`mm_compaction_try_to_compact_pages` to `mm_compaction_end`), and the gaps over 2 us (the
drains) by the pages migrated since the previous one: n, median us.
"""
import collections
import re
import statistics
import sys


def summary(a):
    if len(a) < 2:
        return a
    d = statistics.quantiles(a, n=10)
    return (len(a), round(statistics.median(a), 1), round(d[0], 1), round(d[-1], 1))


ev = []
for line in open(sys.argv[1]):
    if line.startswith("#") or not line.split() or "frag-fault" not in line.split()[0]:
        continue
    m = re.search(r"\s(\d+\.\d+): (\w+):", line)
    if m:
        ev.append((float(m.group(1)), m.group(2), line))
gaps, per_page, stalls = [], [], []
by_pages = collections.defaultdict(list)
pending = start = mstart = None
since = 0
for t, name, line in ev:
    if name == "mm_compaction_try_to_compact_pages":
        start = t
    elif name == "mm_migrate_pages_start":
        mstart = t
    elif name == "mm_migrate_pages" and mstart is not None:
        k = int(re.search(r"nr_succeeded=(\d+)", line).group(1))
        if k:
            per_page.append((t - mstart) * 1e6 / k)
    elif name == "mm_compaction_migratepages":
        pending = t
        since += int(re.search(r"nr_migrated=(\d+)", line).group(1))
    elif name == "mm_compaction_finished" and pending is not None:
        g = (t - pending) * 1e6
        pending = None
        gaps.append(g)
        if g > 2:
            by_pages[since].append(g)
            since = 0
    elif name == "mm_compaction_end":
        # A run that ends after its last migration (a captured or found page) has no gap.
        if start is not None:
            stalls.append((t - start) * 1e6)
        start = pending = None
        since = 0
print("migratepages -> next finished, us (n, median, p10, p90):", summary(gaps))
print("inside migrate_pages, us a page:", summary(per_page))
print("stalls, us:", summary(stalls))
print("drains (gaps over 2 us) by pages migrated since the last: pages n median-us")
for k in sorted(by_pages):
    if len(by_pages[k]) >= 5:
        print(k, len(by_pages[k]), round(statistics.median(by_pages[k]), 1))
