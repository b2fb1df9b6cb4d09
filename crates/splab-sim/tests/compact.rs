//! Linux memory compaction (vm/compact.rs), THP `defrag` (vm/thp.rs) and kcompactd
//! (daemon/kcompactd.rs): scenarios on a memory of 2MB pageblocks each holding a few movable
//! pages, with exact counts; every invariant checked after every event (`common::engine`).
//! The scenarios of the mechanics run with `mobility=off` (every pageblock alike); those of
//! mobility grouping (pageblock migratetypes, phys/buddy.rs) at the end with it on.

mod common;

use common::{anon, engine, mapped, pfn_of};
use splab_sim::engine::Engine;
use splab_sim::phys::buddy::{MT_MOVABLE, MT_UNMOVABLE};
use splab_sim::units::{AccessKind, Pfn, Pid};
use splab_sim::vm::compact::{
    CompactStats, DRAIN_CYCLES, FREE_SCAN_VISIT_CYCLES, MIGRATE_SCAN_VISIT_CYCLES,
};
use splab_sim::vm::Advice;

const M: &str = "skylake:mem=1G";
/// Free memory: eight 2MB pageblocks, frames 0..4096 (the rest is wired at the top).
const FREE: u64 = 16 << 20;
const MB2: u64 = 2 << 20;
const PAGE: u64 = 4096;
/// Frames of a pageblock (a THP).
const PB: u64 = 512;
/// Movable pages left in each pageblock but the first.
const K: u64 = 4;

fn write(e: &mut Engine, pid: Pid, va: u64) {
    e.access(pid, va, AccessKind::Write).unwrap();
}

fn idle_ms(e: &mut Engine, ms: u64) {
    let until = e.clock() + ms * e.os.machine.freq_hz / 1000;
    e.idle_until(until).unwrap();
}

/// Writes the 4KB pages of the mapping at `a` in order until no frame is free; returns the first
/// address not written.
fn fill_until_full(e: &mut Engine, pid: Pid, a: u64) -> u64 {
    let mut va = a;
    while e.os.phys.buddy.free_frames > 0 {
        if pfn_of(e, pid, va).is_none() {
            write(e, pid, va);
        }
        va += PAGE;
    }
    va
}

/// `policy` on 16MB of free memory filled with one process's base pages, then freed but for
/// the first `K` frames of every pageblock after the first. `tables_first`: every chunk's
/// page tables are made first, in the first pageblock (with the process's other frames no
/// object holds: unmovable), and three pages freed there last take the next page tables; the
/// seven other pageblocks then hold `K` movable pages each. Else a page-table page lands in
/// every pageblock. No 2MB block is free.
fn setup(policy: &str, tables_first: bool) -> (Engine, Pid) {
    setup_k(policy, tables_first, K)
}

/// `setup` with `k` movable pages left in every pageblock after the first.
fn setup_k(policy: &str, tables_first: bool, k: u64) -> (Engine, Pid) {
    let (mut e, pid) = engine(M, policy, Some(FREE));
    let a = e.mmap(pid, anon(FREE)).unwrap();
    e.madvise(pid, a, FREE, Advice::NoHugePage).unwrap();
    for c in 0..FREE / MB2 * tables_first as u64 {
        write(&mut e, pid, a + c * MB2);
    }
    let va = fill_until_full(&mut e, pid, a);
    for p in (a..va).step_by(PAGE as usize) {
        let f = pfn_of(&e, pid, p).unwrap().0;
        if f >= PB && f % PB >= k {
            e.madvise(pid, p, PAGE, Advice::DontNeed).unwrap();
        }
    }
    if tables_first {
        for c in 1..4 {
            e.madvise(pid, a + c * MB2, PAGE, Advice::DontNeed).unwrap();
        }
        assert_eq!(e.os.phys.buddy.free_frames, 7 * (PB - k) + 3);
    }
    assert_eq!(e.os.phys.buddy.largest_free_order(), Some(8));
    (e, pid)
}

fn fragmented(policy: &str) -> (Engine, Pid) {
    setup(policy, true)
}

/// One write to a fresh 2MB-aligned anonymous region: the THP fault.
fn thp_fault(e: &mut Engine, pid: Pid) -> u64 {
    let b = e.mmap(pid, anon(MB2)).unwrap();
    assert_eq!(b % MB2, 0);
    write(e, pid, b);
    b
}

/// Base pages of `pid` in the first pageblock (its other frames there are unmovable).
fn movable_in_first_block(e: &Engine, pid: Pid) -> u64 {
    let p = e.os.proc(pid).unwrap();
    p.pmap.entries().filter(|(_, pte)| pte.pfn().0 < PB).count() as u64
}

/// The cycles of migrating `n` pages mapped once: the kernel's measured work around the copy, a
/// copy, a PTE rewrite and a TLB invalidation each.
fn migration_cycles(e: &Engine, n: u64) -> u64 {
    let c = &e.os.machine.cost;
    n * (e.os.machine.ns_to_cycles(c.migrate_page_kernel_ns)
        + c.copy_page_cycles
        + c.pte_write_cycles
        + c.tlb_invalidate_cycles)
}

/// The cycles of the scanners' visits (vm/compact.rs, measured per pfn visited), and their
/// struct-page reads' misses (vm/memmap.rs), which must be each read's latency beyond L1 by
/// where it was served.
fn scan_cycles(e: &Engine, c: &CompactStats) -> u64 {
    let caches = &e.os.hw.caches;
    let lat = |k: usize| caches.latency(k.min(caches.levels()) as u8) - caches.latency(0);
    let r = &c.memmap.reads_by_level;
    assert_eq!(
        c.memmap.stall_cycles,
        (1..4).map(|k| r[k] * lat(k)).sum::<u64>(),
        "struct-page reads priced by where they were served"
    );
    c.compact_migrate_visits * MIGRATE_SCAN_VISIT_CYCLES
        + c.compact_free_visits * FREE_SCAN_VISIT_CYCLES
        + c.memmap.stall_cycles
}

/// `defrag=always` (the `linux` preset): the THP fault compacts asynchronously. The migrate
/// scanner gives up the first pageblock at its first unmovable frame, isolates the `K` pages of
/// the second, and the free scanner takes free frames from the top pageblock of free memory
/// (after passing over the wired memory above it, frame by frame: `mobility=off`, so no
/// pageblock is passed over by its migratetype). The second pageblock is then free: the THP, and the stall is in the fault.
#[test]
fn defrag_always_compacts_at_the_fault_and_maps_the_thp() {
    let (mut e, pid) = fragmented("linux:khugepaged=off,kcompactd=off,pagedaemon=off,mobility=off");
    let fault_cycles = e.os.stats.cycles_fault;
    let lat_max = e.os.stats.fault_latency.max;
    let b = thp_fault(&mut e, pid);
    let c = e.os.compact.stats.clone();
    assert_eq!(
        (c.compact_stall, c.compact_success, c.compact_fail),
        (1, 1, 0)
    );
    assert_eq!(c.pgmigrate_success, K);
    assert_eq!(c.compact_isolated, 2 * K, "K pages and one free block of K");
    assert_eq!(c.compact_migrate_scanned, 1 + PB);
    let wired = (1 << 30) / PAGE - FREE / PAGE;
    assert_eq!(c.compact_free_scanned, wired + 2 * K);
    // Visits: the first pageblock's first frame; the second's K pages and the free chunks
    // above them, one visit each (orders 2..8 for K = 4, as the buddy allocator coalesced
    // them). The free scanner visits every wired frame (no migratetypes), then the top
    // pageblock's K pages and takes the free chunk of K after them.
    assert_eq!(K, 4);
    assert_eq!(c.compact_migrate_visits, 1 + K + 7);
    assert_eq!(c.compact_free_visits, wired + K + 1);
    // Every one of these visits read its pfn's struct page (vm/memmap.rs), none of them warm:
    // the kernel had not read a struct page before. The wired frames are consecutive, so
    // the prefetcher streams all but the first `trigger` of each 4KB of struct pages (64).
    let r = c.memmap.reads_by_level;
    assert_eq!(r.iter().sum::<u64>(), 1 + K + 7 + wired + K + 1);
    assert_eq!(r[0], 0, "no struct page read twice");
    assert!(c.memmap.prefetched > wired / 2, "{:?}", c.memmap);
    assert_eq!(e.os.thp.stats.fault_alloc, 1);
    assert_eq!(pfn_of(&e, pid, b), Some(Pfn(PB)));
    // The migrated pages moved to the top pageblock, still mapped where they were.
    let p = e.os.proc(pid).unwrap();
    let mut moved: Vec<u64> = p
        .pmap
        .entries()
        .filter(|(_, pte)| pte.size().is_base() && pte.pfn().0 / PB == 7)
        .map(|(_, pte)| pte.pfn().0)
        .collect();
    moved.sort();
    assert_eq!(moved, (7 * PB..7 * PB + 2 * K).collect::<Vec<_>>());
    // Once the migrate scanner left the second pageblock (the order-9 block it migrated from)
    // `check_drain` drained the per-CPU lists, once: the first pageblock, given up, had nothing
    // migrated from it.
    assert_eq!(c.compact_drains, 1);
    // The fault paid the migrations: its latency holds them beside the zeroing.
    let m = &e.os.machine.cost;
    assert_eq!(
        c.direct_cycles,
        migration_cycles(&e, K) + scan_cycles(&e, &c) + DRAIN_CYCLES
    );
    let fault = m.fault_cycles + c.direct_cycles + PB * m.zero_page_cycles + m.pte_write_cycles;
    assert_eq!(e.os.stats.cycles_fault - fault_cycles, fault);
    // The latency histogram is in cycles (vm/latency.rs).
    assert!(lat_max < fault && e.os.stats.fault_latency.max == fault);
}

/// Linux 4.3 `compact_zone`'s `check_drain`: one drain per order-aligned block migrated from,
/// once the migrate scanner has left it, not one per batch. With 40 movable pages in the second
/// pageblock the first batch stops at `COMPACT_CLUSTER_MAX` (32) inside it, no drain; the second
/// takes the other 8 and leaves the block: one drain. With exactly 32 the batch ends inside the
/// block too; the next isolation finds nothing (ISOLATE_NONE, which jumps to the check) and the
/// scanner, now past the block, drains there: still one.
#[test]
fn check_drain_drains_once_per_block_migrated_from() {
    for k in [40, 32] {
        let (mut e, pid) = setup_k(
            "linux:khugepaged=off,kcompactd=off,pagedaemon=off,mobility=off",
            true,
            k,
        );
        let b = thp_fault(&mut e, pid);
        let c = e.os.compact.stats.clone();
        assert_eq!((c.compact_stall, c.compact_success), (1, 1), "k {k}");
        assert_eq!(pfn_of(&e, pid, b), Some(Pfn(PB)), "k {k}");
        assert_eq!(c.pgmigrate_success, k, "k {k}");
        assert_eq!(c.compact_drains, 1, "k {k}");
        assert_eq!(
            c.direct_cycles,
            migration_cycles(&e, k) + scan_cycles(&e, &c) + DRAIN_CYCLES,
            "k {k}"
        );
    }
}

/// With an unmovable frame (a page-table page) in every pageblock, no compaction can free one:
/// asynchronous compaction gives each pageblock up at that frame and migrates nothing, twice
/// (`__GFP_NORETRY` retries asynchronously), and the fault falls back to a base page. An entry
/// advised MADV_HUGEPAGE compacts synchronously the second time, migrating what it can in vain;
/// compaction is then deferred, and the next such fault skips its first attempt. Skip bits
/// off: with 5.1+'s (the preset's) the asynchronous compactions mark every pageblock and the
/// synchronous one passes them all over (`compaction_restarting_resets_the_skip_bits`).
#[test]
fn an_unmovable_frame_in_every_pageblock_defeats_compaction() {
    let (mut e, pid) = setup(
        "linux:khugepaged=off,kcompactd=off,pagedaemon=off,mobility=off,pageblock_skip=off",
        false,
    );
    thp_fault(&mut e, pid);
    let c = e.os.compact.stats.clone();
    assert_eq!(
        (
            c.compact_stall,
            c.compact_success,
            c.compact_fail,
            c.pgmigrate_success
        ),
        (2, 0, 2, 0)
    );
    assert_eq!(c.deferred, 0, "asynchronous failures do not defer");
    assert_eq!(e.os.thp.stats.fault_fallback, 1);
    let b = e.mmap(pid, anon(MB2)).unwrap();
    e.madvise(pid, b, MB2, Advice::HugePage).unwrap();
    write(&mut e, pid, b);
    let c = e.os.compact.stats.clone();
    assert_eq!((c.compact_stall, c.compact_fail), (4, 4));
    assert!(c.pgmigrate_success > 0);
    let b = e.mmap(pid, anon(MB2)).unwrap();
    e.madvise(pid, b, MB2, Advice::HugePage).unwrap();
    write(&mut e, pid, b);
    let c = e.os.compact.stats.clone();
    assert_eq!((c.compact_stall, c.compact_fail, c.deferred), (6, 6, 1));
    assert_eq!(e.os.thp.stats.fault_fallback, 3);
    assert_eq!(e.os.thp.stats.fault_alloc, 0);
}

/// `defrag=defer`: the fault wakes kcompactd and falls back at once, without a stall;
/// kcompactd compacts synchronously after the event (the first pageblock's movable pages too,
/// in vain, then the second's), and the next THP fault finds the free block.
#[test]
fn defer_wakes_kcompactd_and_falls_back_at_once() {
    let (mut e, pid) = fragmented(
        "linux:defrag=defer,compaction_proactiveness=0,khugepaged=off,pagedaemon=off,mobility=off",
    );
    let fault_cycles = e.os.stats.cycles_fault;
    let background = e.background_cycles;
    let b = e.mmap(pid, anon(MB2)).unwrap();
    let first = movable_in_first_block(&e, pid) + 1; // the fallback page lands there too
    write(&mut e, pid, b);
    let m = &e.os.machine.cost;
    assert_eq!(
        e.os.stats.cycles_fault - fault_cycles,
        m.fault_cycles + m.zero_page_cycles + m.pte_write_cycles,
        "no stall"
    );
    let c = e.os.compact.stats.clone();
    assert_eq!(e.os.thp.stats.fault_fallback, 1);
    assert_eq!((c.compact_stall, c.compact_daemon_wake), (0, 1));
    assert_eq!(c.pgmigrate_success, first + K);
    assert_eq!(c.compact_daemon_migrate_scanned, c.compact_migrate_scanned);
    assert!(c.compact_migrate_visits > 0 && c.compact_free_visits > 0);
    // A drain after each of the two pageblocks migrated from (kcompactd compacts for the
    // fault's order, 9: `check_drain` runs).
    assert_eq!(c.compact_drains, 2);
    let daemon = migration_cycles(&e, first + K) + scan_cycles(&e, &c) + 2 * DRAIN_CYCLES;
    assert_eq!(e.background_cycles - background, daemon);
    assert_eq!(c.daemon_cycles, daemon);
    thp_fault(&mut e, pid);
    assert_eq!(e.os.thp.stats.fault_alloc, 1);
    assert_eq!(e.os.compact.stats.compact_stall, 0);
}

/// `defrag=never`, and `madvise` for an entry not advised: free lists only.
#[test]
fn never_and_unadvised_madvise_fall_back_without_compaction() {
    for defrag in ["never", "madvise"] {
        let (mut e, pid) = fragmented(&format!(
            "linux:defrag={defrag},khugepaged=off,compaction_proactiveness=0,pagedaemon=off,mobility=off"
        ));
        thp_fault(&mut e, pid);
        let c = &e.os.compact.stats;
        assert_eq!(e.os.thp.stats.fault_fallback, 1, "{defrag}");
        assert_eq!(
            c.compact_stall + c.compact_daemon_wake + c.compact_migrate_scanned,
            0,
            "{defrag}"
        );
    }
}

/// A write to the huge zero page (`zero_page_wp=alloc`, mm/huge_memory.c `do_huge_pmd_wp_page`)
/// allocates its THP with the region's own `defrag` action (`vma_thp_gfp_mask`): under
/// `defrag=madvise` a region advised MADV_HUGEPAGE compacts at the write and gets its THP, an
/// unadvised one falls back without compaction. The zero page is mapped while 2MB blocks are
/// free; then the rest of memory is filled with base pages and freed but for `K` in each
/// pageblock, so that the write finds no free 2MB block.
#[test]
fn a_write_to_the_huge_zero_page_compacts_by_the_regions_advice() {
    for advised in [false, true] {
        let (mut e, pid) = engine(
            M,
            "linux:defrag=madvise,khugepaged=off,compaction_proactiveness=0,pagedaemon=off,mobility=off",
            Some(FREE),
        );
        let r = e.mmap(pid, anon(MB2)).unwrap();
        assert_eq!(r % MB2, 0);
        if advised {
            e.madvise(pid, r, MB2, Advice::HugePage).unwrap();
        }
        e.access(pid, r, AccessKind::Read).unwrap();
        assert_eq!(e.os.thp.stats.zero_page_mapped, 1, "advised {advised}");
        let rest = e.os.phys.buddy.free_frames * PAGE;
        let a = e.mmap(pid, anon(rest)).unwrap();
        e.madvise(pid, a, rest, Advice::NoHugePage).unwrap();
        // Page tables first, so that most pageblocks hold only movable pages.
        for c in 0..rest / MB2 {
            write(&mut e, pid, a + c * MB2);
        }
        let va = fill_until_full(&mut e, pid, a);
        for p in (a..va).step_by(PAGE as usize) {
            if pfn_of(&e, pid, p).unwrap().0 % PB >= K {
                e.madvise(pid, p, PAGE, Advice::DontNeed).unwrap();
            }
        }
        assert!(e.os.phys.buddy.largest_free_order() < Some(9));
        write(&mut e, pid, r);
        let (c, t) = (&e.os.compact.stats, &e.os.thp.stats);
        assert_eq!(t.zero_page_wp, 1, "advised {advised}");
        if advised {
            assert_eq!((c.compact_stall, c.compact_success), (1, 1));
            assert_eq!((t.fault_alloc, t.fault_fallback), (1, 0));
            assert_eq!(mapped(&e, pid).1, MB2);
        } else {
            assert_eq!(c.compact_stall + c.compact_daemon_wake, 0);
            assert_eq!((t.fault_alloc, t.fault_fallback), (0, 1));
            assert_eq!(mapped(&e, pid).1, 0);
        }
    }
}

/// Proactive compaction (`compaction_proactiveness=20`): at its 500 ms check the fragmentation
/// score is 99 (no free memory in 2MB blocks; scores are scaled by present / (present + 1)),
/// over 90; kcompactd compacts the whole zone until the score is 80 or less: the first
/// pageblock's movable pages in vain, then two pageblocks freed (1024 of the 3,559 free
/// frames: score 70).
/// With proactiveness 0 it never runs.
#[test]
fn proactive_compaction_runs_over_the_score_and_not_at_proactiveness_0() {
    let (mut e, pid) = fragmented("linux:khugepaged=off,pagedaemon=off,mobility=off");
    assert_eq!(e.os.compact.stats.proactive_runs, 0, "set-up under 500 ms");
    assert_eq!(e.os.fragmentation_score(), 99);
    let first = movable_in_first_block(&e, pid);
    idle_ms(&mut e, 500);
    let c = e.os.compact.stats.clone();
    assert_eq!((c.proactive_runs, c.proactive_no_progress), (1, 0));
    assert_eq!(c.pgmigrate_success, first + 2 * K);
    // Proactive compaction has no order (`order = -1`): `check_drain` never drains.
    assert_eq!(c.compact_drains, 0);
    assert_eq!(e.os.fragmentation_score(), 70);
    assert_eq!(c.compact_stall + c.compact_daemon_wake, 0);
    // Under the high mark: the next checks do nothing.
    idle_ms(&mut e, 2000);
    assert_eq!(e.os.compact.stats.proactive_runs, 1);

    let (mut e, _) =
        fragmented("linux:khugepaged=off,pagedaemon=off,compaction_proactiveness=0,mobility=off");
    idle_ms(&mut e, 2000);
    let c = &e.os.compact.stats;
    assert_eq!(c.proactive_runs + c.pgmigrate_success, 0);
}

/// MADV_COLLAPSE compacts for its THP (`GFP_TRANSHUGE`), even with THP off at faults, and the
/// caller pays.
#[test]
fn madv_collapse_compacts_for_its_thp() {
    let (mut e, pid) = fragmented("linux-4k:khugepaged=off,kcompactd=off,pagedaemon=off");
    let b = e.mmap(pid, anon(MB2)).unwrap();
    write(&mut e, pid, b);
    write(&mut e, pid, b + PAGE);
    let kernel = e.os.stats.cycles_kernel;
    e.madvise(pid, b, MB2, Advice::Collapse).unwrap();
    let c = e.os.compact.stats.clone();
    assert_eq!((c.compact_stall, c.compact_success), (1, 1));
    assert_eq!(c.pgmigrate_success, K);
    let t = &e.os.thp.stats;
    assert_eq!(
        (t.madv_collapsed, t.collapse_copied, t.collapse_zeroed),
        (1, 2, PB - 2)
    );
    assert_eq!(pfn_of(&e, pid, b), Some(Pfn(PB)));
    let m = &e.os.machine.cost;
    assert!(
        e.os.stats.cycles_kernel - kernel
            >= migration_cycles(&e, K) + 2 * m.copy_page_cycles + (PB - 2) * m.zero_page_cycles
    );
}

/// Mobility grouping on (the `linux` preset's default). The first page-table page of
/// `setup(.., true)` is an UNMOVABLE request with no UNMOVABLE free block: `__rmqueue_fallback`
/// steals the lowest 4MB block and converts pageblocks 0 and 1 to UNMOVABLE; the page tables
/// and then, once the MOVABLE pageblocks are full, base pages fill them. Pageblock 1 keeps `K`
/// movable pages like the others, but the THP fault's asynchronous compaction passes it over
/// (`migrate_async_suitable`) with pageblock 0, and empties pageblock 2 instead; the free
/// scanner takes its target pages from MOVABLE pageblocks only.
#[test]
fn async_compaction_passes_over_unmovable_pageblocks() {
    let (mut e, pid) = fragmented("linux:khugepaged=off,kcompactd=off,pagedaemon=off");
    let b = &e.os.phys.buddy;
    assert_eq!(b.pageblock_mt(Pfn(0)), MT_UNMOVABLE);
    assert_eq!(b.pageblock_mt(Pfn(PB)), MT_UNMOVABLE);
    assert!((2..8).all(|k| b.pageblock_mt(Pfn(k * PB)) == MT_MOVABLE));
    let held = |e: &Engine, k: u64| {
        (k * PB..(k + 1) * PB)
            .filter(|&f| e.os.phys.refs(Pfn(f)) > 0)
            .count() as u64
    };
    assert_eq!(held(&e, 1), K, "pageblock 1 holds K movable pages");
    let in_2 = held(&e, 2);
    assert!(in_2 > 0);
    let va = thp_fault(&mut e, pid);
    let c = e.os.compact.stats.clone();
    assert_eq!(
        (c.compact_stall, c.compact_success, c.compact_fail),
        (1, 1, 0)
    );
    // The THP is pageblock 2, emptied of its pages; pageblock 1's were not touched.
    assert_eq!(pfn_of(&e, pid, va), Some(Pfn(2 * PB)));
    assert_eq!(c.pgmigrate_success, in_2);
    assert_eq!(held(&e, 1), K);
    // The migrate scanner scanned pageblock 2 only.
    assert_eq!(c.compact_migrate_scanned, PB);
}

/// The same memory without asynchronous compaction's restriction: synchronous-light compaction
/// (MADV_HUGEPAGE under `defrag=madvise`: not __GFP_NORETRY) migrates from any pageblock, but
/// only into MOVABLE ones.
#[test]
fn without_grouping_the_same_fault_empties_pageblock_1() {
    let (mut e, pid) = fragmented("linux:khugepaged=off,kcompactd=off,pagedaemon=off,mobility=off");
    let va = thp_fault(&mut e, pid);
    assert_eq!(pfn_of(&e, pid, va), Some(Pfn(PB)));
}

// Pageblock skip bits (vm/compact_skip.rs), by era.

/// The skip counters (marked by the migrate and free scanners, passed over by each).
fn skip_counts(e: &Engine) -> (u64, u64, u64, u64) {
    let s = &e.os.compact.stats.pageblock_skip;
    (
        s.migrate_marked,
        s.free_marked,
        s.migrate_passed,
        s.free_passed,
    )
}

/// Three THP faults on the fragmented memory, asynchronous direct compaction giving a block up
/// at its first unmovable frame (`skip_on_failure`): each fault's compaction empties the next
/// pageblock (1, 2, 3) and maps its THP there. What the migrate scanner marks and passes over
/// differs by era:
/// - `unisolated` (Linux 4.3's `update_pageblock_skip`): a block a scan isolated nothing from
///   is marked and the cached position moves to its start: pageblock 0 (page tables) at the
///   first fault, 1 and 2 (THPs by then) at the second and third, which pass over 0, then 1:
///   3 marked, 2 passed.
/// - `scanned` (5.1+): also the blocks it isolates from (1, 2, 3, `test_and_set_skip`); the
///   cached position, moved by `update_cached_migrate` after pageblock 0 to the end of the
///   block after the aligned pfn it is given (`pageblock_end_pfn` of 512 is 1024), makes the
///   second fault start at pageblock 2 and the third pass over 2: 4 marked, 1 passed.
/// - `off`: none.
///
/// The free scanner starts at the top of memory and scans the 504 wired pageblocks above the
/// free ones frame by frame (`mobility=off`), isolating nothing: both eras mark them all at
/// the first fault. In 4.3 its cached position moves to the start of the last of them, so the
/// next two faults pass that one over; in 5.1+ below it. It takes its free pages from
/// pageblock 7 without scanning it to its end.
#[test]
fn skip_bits_mark_and_pass_blocks_by_era() {
    for (era, want) in [
        ("unisolated", (3, 504, 2, 2)),
        ("scanned", (4, 504, 1, 0)),
        ("off", (0, 0, 0, 0)),
    ] {
        let (mut e, pid) = fragmented(&format!(
            "linux:khugepaged=off,kcompactd=off,pagedaemon=off,mobility=off,pageblock_skip={era}"
        ));
        let mut blocks = Vec::new();
        for _ in 0..3 {
            let b = thp_fault(&mut e, pid);
            blocks.push(pfn_of(&e, pid, b).unwrap().0 / PB);
        }
        assert_eq!(blocks, [1, 2, 3], "{era}");
        let c = &e.os.compact.stats;
        assert_eq!((c.compact_stall, c.compact_success), (3, 3), "{era}");
        assert_eq!(skip_counts(&e), want, "{era}");
        let marked: Vec<u64> = (0..8).filter(|&b| e.os.pageblock_skipped(b * PB)).collect();
        assert_eq!(e.os.pageblock_skipped(8 * PB), era != "off");
        let want_marked: &[u64] = match era {
            "unisolated" => &[0, 1, 2],
            "scanned" => &[0, 1, 2, 3],
            _ => &[],
        };
        assert_eq!(marked, want_marked, "{era}");
    }
}

/// Linux 4.3 (`linux-4.3`: no `skip_on_failure`): the first fault's compaction migrates the
/// first pageblock's movable pages in vain (its page tables stay) and isolates from it, so
/// marks nothing there; the second fault's scan of it finds only page tables and marks it.
#[test]
fn linux_4_3_marks_a_block_once_its_movable_pages_are_gone() {
    let (mut e, pid) =
        fragmented("linux-4.3:khugepaged=off,kcompactd=off,pagedaemon=off,mobility=off");
    let moved = movable_in_first_block(&e, pid);
    let b = thp_fault(&mut e, pid);
    assert_eq!(pfn_of(&e, pid, b).unwrap().0 / PB, 1);
    assert_eq!(movable_in_first_block(&e, pid), 0);
    assert_eq!(e.os.compact.stats.pgmigrate_success, moved + K);
    assert!(!e.os.pageblock_skipped(0));
    let b = thp_fault(&mut e, pid);
    assert_eq!(pfn_of(&e, pid, b).unwrap().0 / PB, 2);
    assert!(e.os.pageblock_skipped(0) && e.os.pageblock_skipped(PB));
    // Pageblocks 0 and 1 (the first THP's) by the migrate scanner; the 504 wired ones by the
    // free scanner at the first fault, the lowest of which the second passes over.
    assert_eq!(skip_counts(&e), (2, 504, 0, 1));
}

/// With an unmovable frame in every pageblock, MADV_HUGEPAGE faults (asynchronous, then
/// synchronous compaction, which defers after failing) until compaction restarts after the
/// longest deferral (`compaction_restarting`): then `compact_zone` resets the skip bits. Linux
/// 4.3 clears every bit; 5.1+ only with `compact_blockskip_flush` (set as a direct
/// compaction's scanners met, the allocation then failing) and only blocks a sample shows an
/// LRU or free page in. Both take 64 faults (120 attempts deferred on the way) and the
/// scanners met 8 times. 4.3 clears all 510 bits set (7 by the migrate scanner, the rest by the
/// free scanner, mostly over the wired pageblocks); 5.1+ only the 8 pageblocks of free memory
/// (each holds pages) of its 512: the wired ones keep theirs.
#[test]
fn compaction_restarting_resets_the_skip_bits() {
    for (era, want) in [("unisolated", (510, 510)), ("scanned", (512, 8))] {
        let (mut e, pid) = setup(
            &format!("linux:khugepaged=off,kcompactd=off,pagedaemon=off,mobility=off,pageblock_skip={era}"),
            false,
        );
        let mut faults = 0;
        let mut before = 0;
        while e.os.compact.stats.pageblock_skip.resets == 0 && faults < 400 {
            let s = &e.os.compact.stats.pageblock_skip;
            before = s.migrate_marked + s.free_marked - s.cleared;
            let b = e.mmap(pid, anon(MB2)).unwrap();
            e.madvise(pid, b, MB2, Advice::HugePage).unwrap();
            write(&mut e, pid, b);
            faults += 1;
        }
        let s = e.os.compact.stats.pageblock_skip.clone();
        assert_eq!(
            (faults, s.resets, s.flush_set, e.os.compact.stats.deferred),
            (64, 1, 8, 120),
            "{era}"
        );
        assert_eq!((before, s.cleared), want, "{era}");
        assert_eq!(e.os.thp.stats.fault_fallback, 64);
    }
}

/// Proactive compaction ignores the skip bits (Linux 5.9 mm/compaction.c
/// `proactive_compact_node`: `.ignore_skip_hint = true`; `isolation_suitable` is then always
/// true). The THP fault's direct compaction marks pageblocks 0 (page tables) and 1 (emptied,
/// now the THP) and the 504 wired ones; kcompactd's proactive run at 500 ms then scans
/// pageblocks 0 to 3 whatever their bits (0's movable pages in vain, 1 the THP, 2 and 3
/// emptied of their `K` pages each), passes none over and marks none.
#[test]
fn proactive_compaction_ignores_the_skip_bits() {
    let (mut e, pid) = fragmented("linux:khugepaged=off,pagedaemon=off,mobility=off");
    let b = thp_fault(&mut e, pid);
    assert_eq!(pfn_of(&e, pid, b), Some(Pfn(PB)));
    assert_eq!(skip_counts(&e), (2, 504, 0, 0));
    assert!(e.os.pageblock_skipped(0) && e.os.pageblock_skipped(PB));
    let first = movable_in_first_block(&e, pid);
    let before = e.os.compact.stats.clone();
    idle_ms(&mut e, 500);
    let c = &e.os.compact.stats;
    assert_eq!(c.proactive_runs, 1);
    assert_eq!(
        c.compact_migrate_scanned - before.compact_migrate_scanned,
        4 * PB
    );
    assert_eq!(
        c.pgmigrate_success - before.pgmigrate_success,
        first + 2 * K
    );
    assert_eq!(
        skip_counts(&e),
        (2, 504, 0, 0),
        "none passed over, none marked"
    );
}

/// A 32MB core2-64 (16 2MB pageblocks, nothing wired: the top half of the zone, which the
/// 5.1+ reset walks down from the top, is free memory too). THPs are faulted into pageblocks
/// 1 to 15 (the page tables go to pageblock 0), those of 2 to 14 unmapped; base pages then
/// fill memory, and all are freed but: none in pageblock 0 (its page tables and the process's
/// other frames stay: no LRU page), the odd frames' pages of pageblock 14 (its free memory is
/// 256 single free pages), and the first `K` frames' pages of the others. A page-table page
/// lands in pageblocks 3 to 14 with the fill.
fn setup_reset_5_1(policy: &str) -> (Engine, Pid) {
    let (mut e, pid) = engine("core2-64:mem=32M", policy, None);
    let mut thps = Vec::new();
    for _ in 1..16 {
        let b = thp_fault(&mut e, pid);
        thps.push((b, pfn_of(&e, pid, b).unwrap().0 / PB));
    }
    assert_eq!(
        thps.iter().map(|t| t.1).collect::<Vec<_>>(),
        (1..16).collect::<Vec<_>>()
    );
    for &(b, _) in &thps[1..14] {
        e.munmap(pid, b, MB2).unwrap();
    }
    let a = e.mmap(pid, anon(2 * FREE)).unwrap();
    e.madvise(pid, a, 2 * FREE, Advice::NoHugePage).unwrap();
    let va = fill_until_full(&mut e, pid, a);
    for p in (a..va).step_by(PAGE as usize) {
        let f = pfn_of(&e, pid, p).unwrap().0;
        let free = match (f / PB, f % PB) {
            (0, _) => true,
            (14, off) => off % 2 == 0,
            (_, off) => off >= K,
        };
        if free {
            e.madvise(pid, p, PAGE, Advice::DontNeed).unwrap();
        }
    }
    (e, pid)
}

/// Linux 5.1+ `__reset_isolation_suitable` and `__reset_isolation_pfn` (mm/compaction.c), on
/// `setup_reset_5_1`'s memory. The first fault's compaction empties pageblock 2 for its THP;
/// every later one fails (a page-table page in pageblocks 3 to 14), and MADV_HUGEPAGE faults
/// go on until the 65th, whose synchronous compaction (`compaction_restarting`) resets the
/// bits, all 16 set by then. The walk takes a pageblock from each end at a time:
/// - 0 (no LRU page: not a source) and 15 (the THP: `pageblock_skip_persistent`) first,
///   neither cleared; then 1 (a THP, kept) and 14, the first target: a sample every eighth
///   page meets a free page's head (`PageBuddy`, offset 8); the free scanner restarts there;
/// - 2 (the first fault's THP, kept) and 13 (both checks from now on: an LRU page);
/// - 3, the first source (its LRU pages): the migrate scanner restarts there, not at a later
///   source; then 4 to 7 and 12 down to 8.
///
/// 12 bits cleared; 0, 1, 2 and 15 keep theirs. The compaction after the reset scans
/// pageblocks 3 to 12 (marking them again) and, from the last frame of 14 (the pfn the walk
/// tested) down, takes its free pages; it passes no pageblock over for its bit.
#[test]
fn linux_5_1_reset_keeps_thp_blocks_and_starts_the_scanners_at_the_blocks_it_cleared() {
    let (mut e, pid) = setup_reset_5_1(
        "linux:khugepaged=off,kcompactd=off,pagedaemon=off,mobility=off,pageblock_skip=scanned",
    );
    let marked = |e: &Engine| -> Vec<u64> {
        (0..16)
            .filter(|&b| e.os.pageblock_skipped(b * PB))
            .collect()
    };
    let mut faults = 0;
    let mut before = e.os.compact.stats.clone();
    let mut marked_before = Vec::new();
    while e.os.compact.stats.pageblock_skip.resets == 0 && faults < 400 {
        let b = e.mmap(pid, anon(MB2)).unwrap();
        e.madvise(pid, b, MB2, Advice::HugePage).unwrap();
        before = e.os.compact.stats.clone();
        marked_before = marked(&e);
        write(&mut e, pid, b);
        faults += 1;
    }
    let c = e.os.compact.stats.clone();
    assert_eq!(
        (faults, c.compact_success, c.pageblock_skip.resets),
        (65, 1, 1)
    );
    assert_eq!(marked_before, (0..16).collect::<Vec<_>>());
    let (s, s0) = (&c.pageblock_skip, &before.pageblock_skip);
    assert_eq!(s.cleared - s0.cleared, 12);
    assert_eq!(
        marked(&e),
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15]
    );
    assert_eq!(
        (
            s.migrate_passed - s0.migrate_passed,
            s.free_passed - s0.free_passed
        ),
        (0, 0)
    );
    assert_eq!(
        c.compact_migrate_scanned - before.compact_migrate_scanned,
        10 * PB
    );
    assert_eq!(c.compact_free_scanned - before.compact_free_scanned, 65);
}
