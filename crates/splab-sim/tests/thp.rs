//! Linux THP (vm/thp.rs) and khugepaged (vm/khugepaged.rs): scenarios with exact counts, every
//! invariant checked after every event (`common::engine`).

mod common;

use common::{anon, engine, mapped, write};
use splab_sim::engine::Engine;
use splab_sim::units::AccessKind;
use splab_sim::vm::Advice;

const M: &str = "skylake:mem=1G";
const MB2: u64 = 2 << 20;
const PAGE: u64 = 4096;

/// Sleeps the machine `secs` simulated seconds: khugepaged wakes meanwhile.
fn idle(e: &mut Engine, secs: u64) {
    let until = e.clock() + secs * e.os.machine.freq_hz;
    e.idle_until(until).unwrap();
}

#[test]
fn a_first_touch_allocates_zeroes_and_maps_the_whole_2mb() {
    let (mut e, pid) = engine(M, "linux", None);
    // A 3MB mapping starts 2MB-aligned too (first fit from the top would put it 1MB off).
    let odd = e.mmap(pid, anon(3 << 20)).unwrap();
    assert_eq!(odd % MB2, 0);
    let base = e.mmap(pid, anon(8 << 20)).unwrap();
    assert_eq!(
        base % MB2,
        0,
        "Linux 6.7+ aligns a 2MB-or-larger anonymous mapping"
    );
    write(&mut e, pid, base + 5 * PAGE);
    let t = &e.os.thp.stats;
    assert_eq!((t.fault_alloc, t.fault_fallback), (1, 0));
    assert_eq!(mapped(&e, pid), (0, MB2));
    assert_eq!(e.os.stats.zeroed_bytes, MB2);
    // The rest of the region faults no more; each other 2MB region is one fault.
    write(&mut e, pid, base + MB2 - 8);
    for k in 1..4 {
        write(&mut e, pid, base + k * MB2);
    }
    assert_eq!(e.os.stats.faults.total, 4);
    assert_eq!(e.os.thp.stats.fault_alloc, 4);
    assert_eq!(mapped(&e, pid), (0, 4 * MB2));
}

#[test]
fn enabled_and_madvise_decide_which_regions_get_thps() {
    // madvise: only the advised mapping.
    let (mut e, pid) = engine(M, "linux-madvise", None);
    let a = e.mmap(pid, anon(4 << 20)).unwrap();
    let b = e.mmap(pid, anon(4 << 20)).unwrap();
    e.madvise(pid, b, 4 << 20, Advice::HugePage).unwrap();
    write(&mut e, pid, a);
    write(&mut e, pid, b);
    assert_eq!(e.os.thp.stats.fault_alloc, 1);
    assert_eq!(mapped(&e, pid), (PAGE, MB2));
    // always, but MADV_NOHUGEPAGE: none there.
    let (mut e, pid) = engine(M, "linux", None);
    let a = e.mmap(pid, anon(4 << 20)).unwrap();
    e.madvise(pid, a, 4 << 20, Advice::NoHugePage).unwrap();
    write(&mut e, pid, a);
    assert_eq!(e.os.thp.stats.fault_alloc, 0);
    // never.
    let (mut e, pid) = engine(M, "linux-4k", None);
    let a = e.mmap(pid, anon(4 << 20)).unwrap();
    e.madvise(pid, a, 4 << 20, Advice::HugePage).unwrap();
    write(&mut e, pid, a);
    assert_eq!(
        e.os.thp.stats.fault_alloc + e.os.thp.stats.fault_fallback,
        0
    );
    assert_eq!(mapped(&e, pid), (PAGE, 0));
}

#[test]
fn a_region_the_entry_does_not_cover_or_already_touched_takes_base_pages() {
    let (mut e, pid) = engine(M, "linux:khugepaged=off", None);
    // 3MB: the second 2MB region sticks out of the entry.
    let a = e.mmap(pid, anon(3 << 20)).unwrap();
    write(&mut e, pid, a + MB2);
    assert_eq!(e.os.thp.stats.fault_alloc, 0);
    assert_eq!(mapped(&e, pid), (PAGE, 0));
    // A partial munmap splits a THP: the rest stays mapped by base pages.
    write(&mut e, pid, a);
    assert_eq!(e.os.thp.stats.fault_alloc, 1);
    e.munmap(pid, a + PAGE, PAGE).unwrap();
    assert_eq!(e.os.stats.demotions[1], 1);
    assert_eq!(mapped(&e, pid), (MB2, 0));
    // A region with a page in it already (touched while advised NOHUGEPAGE) gets base pages.
    let b = e.mmap(pid, anon(MB2)).unwrap();
    e.madvise(pid, b, MB2, Advice::NoHugePage).unwrap();
    write(&mut e, pid, b);
    e.madvise(pid, b, MB2, Advice::HugePage).unwrap();
    write(&mut e, pid, b + 7 * PAGE);
    assert_eq!(
        e.os.thp.stats.fault_alloc, 1,
        "the region is not empty: a base page"
    );
    assert_eq!(mapped(&e, pid), (MB2 + 2 * PAGE, 0));
}

#[test]
fn no_free_2mb_block_falls_back_to_a_base_page() {
    // 1MB free: no 2MB block anywhere.
    let (mut e, pid) = engine(M, "linux:khugepaged=off,pagedaemon=off", Some(1 << 20));
    let a = e.mmap(pid, anon(4 << 20)).unwrap();
    write(&mut e, pid, a);
    let t = &e.os.thp.stats;
    assert_eq!((t.fault_alloc, t.fault_fallback), (0, 1));
    assert_eq!(mapped(&e, pid), (PAGE, 0));
}

#[test]
fn khugepaged_collapses_a_madvised_region_out_of_place() {
    let (mut e, pid) = engine(M, "linux-madvise", None);
    let a = e.mmap(pid, anon(4 << 20)).unwrap();
    // Ten base pages first (not advised yet), then the advice.
    for i in 0..10 {
        write(&mut e, pid, a + i * PAGE);
    }
    e.madvise(pid, a, 4 << 20, Advice::HugePage).unwrap();
    assert_eq!(mapped(&e, pid), (10 * PAGE, 0));
    let background = e.background_cycles;
    // One wake, at 10 s. The collapse's copies and zeroing are background work (the page
    // daemon's aging adds a little).
    idle(&mut e, 11);
    let c = &e.os.machine.cost;
    let work = 10 * c.copy_page_cycles + 502 * c.zero_page_cycles;
    let spent = e.background_cycles - background;
    assert!(
        spent >= work && spent < work + work / 10,
        "{spent} vs {work}"
    );
    let t = e.os.thp.stats.clone();
    assert_eq!(t.pages_collapsed, 1);
    assert_eq!(t.collapse_alloc, 1);
    assert_eq!((t.collapse_copied, t.collapse_zeroed), (10, 502));
    // The second region has no page: refused as too empty? No: max_ptes_none = 511 takes one
    // page at least; an all-empty region has 512 empty entries.
    assert_eq!(t.scan_fail_none, 1);
    assert_eq!(t.pages_scanned, 2 * 512);
    assert_eq!(t.full_scans, 1);
    assert_eq!(mapped(&e, pid), (0, MB2));
    assert_eq!(e.os.stats.copied_bytes, 10 * PAGE);
}

#[test]
fn khugepaged_refills_what_madv_dontneed_gave_back_unless_max_ptes_none_forbids() {
    // seed 003 Table 10's mechanism: a THP split by MADV_DONTNEED of all but one page is
    // collapsed again, bloating the footprint back to 2MB.
    for (policy, want_huge) in [("linux", true), ("linux:max_ptes_none=0", false)] {
        let (mut e, pid) = engine(M, policy, None);
        let a = e.mmap(pid, anon(MB2)).unwrap();
        write(&mut e, pid, a);
        e.madvise(pid, a + PAGE, MB2 - PAGE, Advice::DontNeed)
            .unwrap();
        assert_eq!(mapped(&e, pid), (PAGE, 0), "{policy}");
        // The THP stays whole on the deferred split queue: still 2MB of footprint.
        let s = &e.os.thp.stats.split;
        assert_eq!(
            (s.deferred_split_page, s.queued_pages),
            (1, 511),
            "{policy}"
        );
        assert_eq!(e.os.footprint_bytes(), MB2, "{policy}");
        idle(&mut e, 11);
        let t = &e.os.thp.stats;
        if want_huge {
            // The collapse frees the old page, splitting its folio: the queued pages go too.
            assert_eq!(
                (t.split.split_page, t.split.queued_pages),
                (1, 0),
                "{policy}"
            );
            assert_eq!((t.pages_collapsed, t.collapse_zeroed), (1, 511), "{policy}");
            assert_eq!(mapped(&e, pid), (0, MB2), "{policy}");
        } else {
            assert_eq!((t.pages_collapsed, t.scan_fail_none), (0, 1), "{policy}");
            assert_eq!(mapped(&e, pid), (PAGE, 0), "{policy}");
        }
    }
}

#[test]
fn khugepaged_refuses_shared_and_unreferenced_regions() {
    // After fork every page is shared (and write-protected): over max_ptes_shared = 0.
    let (mut e, pid) = engine(M, "linux:max_ptes_shared=0", None);
    let a = e.mmap(pid, anon(MB2)).unwrap();
    e.madvise(pid, a, MB2, Advice::NoHugePage).unwrap();
    for i in 0..4 {
        write(&mut e, pid, a + i * PAGE);
    }
    e.madvise(pid, a, MB2, Advice::HugePage).unwrap();
    let _child = e.fork(pid).unwrap();
    idle(&mut e, 11);
    let t = &e.os.thp.stats;
    // Parent's and child's regions.
    assert_eq!((t.pages_collapsed, t.scan_fail_shared), (0, 2));
    // No young entry (as after the page daemon cleared the accessed bits): not collapsed.
    let (mut e, pid) = engine(M, "linux", None);
    let a = e.mmap(pid, anon(MB2)).unwrap();
    e.madvise(pid, a, MB2, Advice::NoHugePage).unwrap();
    for i in 0..4 {
        write(&mut e, pid, a + i * PAGE);
    }
    e.madvise(pid, a, MB2, Advice::HugePage).unwrap();
    let vpn = a / PAGE;
    let p = e.os.procs.get_mut(&pid.0).unwrap();
    for i in 0..4 {
        assert_eq!(p.pmap.clear_bits(vpn + i, false), (true, true));
    }
    // As `ptep_clear_flush_young`: the cached translations go too, so a touch sets the bit.
    e.os.hw.tlb.invalidate_range(pid.0, a, a + 4 * PAGE);
    idle(&mut e, 11);
    let t = &e.os.thp.stats;
    assert_eq!((t.pages_collapsed, t.scan_fail_referenced), (0, 1));
    // Touched again: collapsed at the next wake.
    write(&mut e, pid, a + 2 * PAGE);
    idle(&mut e, 10);
    assert_eq!(e.os.thp.stats.pages_collapsed, 1);
    // A knob value that cannot be: more PTEs than a THP has.
    let m = splab_sim::hw::Machine::from_spec(M).unwrap();
    let mut p = splab_sim::policy::Policy::from_spec("linux:max_ptes_none=512").unwrap();
    let err = p.resolve(&m).unwrap_err().to_string();
    assert!(
        err.contains("max_ptes_none=512") && err.contains("at most 511"),
        "{err}"
    );
}

#[test]
fn khugepaged_sleeps_its_scan_interval_and_spends_its_budget() {
    // 64MB touched one page per 2MB region with THP off at fault (madvise, not advised), then
    // advised: 32 regions to collapse, 8 a wake (4096 entries), a wake every 10 s.
    let (mut e, pid) = engine(M, "linux-madvise", None);
    let a = e.mmap(pid, anon(64 << 20)).unwrap();
    for k in 0..32 {
        write(&mut e, pid, a + k * MB2);
    }
    e.madvise(pid, a, 64 << 20, Advice::HugePage).unwrap();
    idle(&mut e, 11);
    assert_eq!(e.os.thp.stats.pages_collapsed, 8);
    idle(&mut e, 10);
    assert_eq!(e.os.thp.stats.pages_collapsed, 16);
    idle(&mut e, 20);
    assert_eq!(e.os.thp.stats.pages_collapsed, 32);
    assert_eq!(mapped(&e, pid), (0, 64 << 20));
    // A faster scan: pages_to_scan=512 (one region a wake), every 100 ms.
    let (mut e, pid) = engine(
        M,
        "linux-madvise:pages_to_scan=512,scan_sleep_millisecs=100",
        None,
    );
    let a = e.mmap(pid, anon(8 << 20)).unwrap();
    for k in 0..4 {
        write(&mut e, pid, a + k * MB2);
    }
    e.madvise(pid, a, 8 << 20, Advice::HugePage).unwrap();
    idle(&mut e, 1); // wakes at 0.1, 0.2, 0.3, 0.4 s collapse one each
    assert_eq!(e.os.thp.stats.pages_collapsed, 4);
}

/// Issue 11 acceptance, seed 003 observation 1: sparse-touch over 30GB on skylake. Linux's
/// first-touch THPs make the footprint at least 100x and the time at least 5x that of
/// linux-4k (seed 003: 30GB vs 0.2GB, 1.4 s vs 0.06 s). The model: 30 GiB vs 60 MiB (512x, one
/// 2MB page against one 4KB page a touch), and every 2MB zeroed.
#[test]
fn sparse_touch_bloats_memory_and_time_under_linux() {
    let thp = common::run("skylake", "linux", "sparse-touch");
    let small = common::run("skylake", "linux-4k", "sparse-touch");
    assert_eq!(thp.memory.footprint_peak_bytes, 30 << 30);
    assert_eq!(small.memory.footprint_peak_bytes, 15_360 * PAGE);
    assert!(thp.memory.footprint_peak_bytes >= 100 * small.memory.footprint_peak_bytes);
    assert!(
        thp.time.cycles_total >= 5 * small.time.cycles_total,
        "{} vs {}",
        thp.time.cycles_total,
        small.time.cycles_total
    );
    assert_eq!(thp.memory.thp.fault_alloc, 15_360);
}

/// A mixed policy (issue 11): FreeBSD's reservations with khugepaged. A region whose faults
/// fell back to base pages (no free 2MB extent then) is collapsed once 2MB is free again; a
/// region a reservation covers is left to promotion.
#[test]
fn khugepaged_beside_reservations_collapses_only_what_fell_back() {
    // 3MB free: one 2MB extent and 1MB.
    let (mut e, a_pid) = engine(M, "freebsd:khugepaged=on,pagedaemon=off", Some(3 << 20));
    let a = e.mmap(a_pid, anon(MB2)).unwrap();
    write(&mut e, a_pid, a); // a reservation takes the 2MB extent
    assert_eq!(e.os.reserv.as_ref().unwrap().ids().count(), 1);
    let b_pid = e.spawn().unwrap();
    let b = e.mmap(b_pid, anon(MB2)).unwrap();
    for i in 0..4 {
        write(&mut e, b_pid, b + i * PAGE); // no free extent: base pages
    }
    idle(&mut e, 11);
    let t = e.os.thp.stats.clone();
    // A's region is reserved, B's finds no free 2MB block.
    assert_eq!((t.pages_collapsed, t.scan_fail_other), (0, 1), "{t:?}");
    assert_eq!(t.collapse_alloc_failed, 1);
    e.exit(a_pid).unwrap();
    idle(&mut e, 61); // alloc_sleep_millisecs after the failure
    let t = &e.os.thp.stats;
    assert_eq!(
        (t.pages_collapsed, t.collapse_copied, t.collapse_zeroed),
        (1, 4, 508)
    );
    assert_eq!(mapped(&e, b_pid), (0, MB2));
}

/// MADV_COLLAPSE (Linux 6.1): synchronous, whatever `enabled` says, without khugepaged's
/// limits or a referenced page; not where MADV_NOHUGEPAGE was given, and not a region with
/// nothing in it.
#[test]
fn madv_collapse_collapses_at_once_whatever_enabled_says() {
    let (mut e, pid) = engine(M, "linux-4k", None);
    let a = e.mmap(pid, anon(6 << 20)).unwrap();
    for i in 0..3 {
        write(&mut e, pid, a + i * PAGE); // region 1: 3 pages
    }
    write(&mut e, pid, a + 2 * MB2); // region 3: 1 page, then NOHUGEPAGE
    e.madvise(pid, a + 2 * MB2, MB2, Advice::NoHugePage)
        .unwrap();
    // No young entry needed: clear the accessed bits of region 1.
    let p = e.os.procs.get_mut(&pid.0).unwrap();
    for i in 0..3 {
        p.pmap.clear_bits(a / PAGE + i, false);
    }
    let kernel = e.os.stats.cycles_kernel;
    e.madvise(pid, a, 6 << 20, Advice::Collapse).unwrap();
    let t = &e.os.thp.stats;
    assert_eq!(t.madv_collapsed, 1, "{t:?}");
    assert_eq!((t.collapse_copied, t.collapse_zeroed), (3, 509));
    assert_eq!(t.pages_collapsed, 0, "khugepaged's counter");
    // Region 2 had nothing (no writable entry): refused.
    assert_eq!(t.scan_fail_other, 1);
    assert_eq!(mapped(&e, pid), (PAGE, MB2));
    // The caller paid: 3 copies and 509 zeroed pages at least.
    let c = &e.os.machine.cost;
    assert!(e.os.stats.cycles_kernel - kernel >= 3 * c.copy_page_cycles + 509 * c.zero_page_cycles);
    // Policies without THP ignore it.
    let (mut e, pid) = engine(M, "freebsd", None);
    let a = e.mmap(pid, anon(MB2)).unwrap();
    write(&mut e, pid, a);
    e.madvise(pid, a, MB2, Advice::Collapse).unwrap();
    assert_eq!(e.os.thp.stats.madv_collapsed, 0);
}

#[test]
fn the_shrinker_splits_underused_thps_and_frees_their_zero_pages_under_pressure() {
    // Linux 6.12 `thp_underused`: a THP with more zero-filled pages than max_ptes_none is split
    // by the deferred split shrinker and its zero pages freed; at 511 (the default) never.
    for (policy, want) in [
        ("linux:max_ptes_none=409,pagedaemon=off", true),
        ("linux:pagedaemon=off", false),
        (
            "linux:max_ptes_none=409,pagedaemon=off,shrink_underused=false",
            false,
        ),
    ] {
        let (mut e, pid) = engine(M, policy, Some(8 << 20));
        let a = e.mmap(pid, anon(6 << 20)).unwrap();
        // Two THPs with 10 pages written, one with 200 (312 zero: not underused).
        for (k, n) in [(0, 10), (1, 10), (2, 200)] {
            for i in 0..n {
                write(&mut e, pid, a + k * MB2 + i * PAGE);
            }
        }
        assert_eq!(e.os.thp.stats.fault_alloc, 3, "{policy}");
        let s = e.os.thp.stats.split.clone();
        assert_eq!((s.shrinker_runs, s.split_page), (0, 0), "{policy}");
        // Base pages until memory runs short: direct reclaim runs the shrinker.
        let b = e.mmap(pid, anon(8 << 20)).unwrap();
        e.madvise(pid, b, 8 << 20, Advice::NoHugePage).unwrap();
        let mut touched = 0;
        while touched < 2048 && e.access(pid, b + touched * PAGE, AccessKind::Write).is_ok() {
            touched += 1;
            if e.os.thp.stats.split.shrinker_runs > 0 {
                break;
            }
        }
        let s = e.os.thp.stats.split.clone();
        if want {
            assert_eq!(s.shrinker_runs, 1, "{policy}");
            assert_eq!((s.underused_split_page, s.split_page), (2, 2), "{policy}");
            assert_eq!(s.underused_freed_pages, 2 * 502, "{policy}");
            assert_eq!(
                mapped(&e, pid).1,
                MB2,
                "{policy}: the 200-page THP stays whole"
            );
        } else {
            assert_eq!(
                (s.underused_split_page, s.underused_freed_pages),
                (0, 0),
                "{policy}"
            );
            assert_eq!(mapped(&e, pid).1, 3 * MB2, "{policy}");
        }
    }
}

#[test]
fn memory_pressure_splits_a_partly_unmapped_thp_and_frees_what_was_unmapped() {
    let (mut e, pid) = engine(M, "linux:khugepaged=off,pagedaemon=off", Some(4 << 20));
    let a = e.mmap(pid, anon(MB2)).unwrap();
    write(&mut e, pid, a);
    e.madvise(pid, a + PAGE, MB2 - PAGE, Advice::DontNeed)
        .unwrap();
    assert_eq!(e.os.footprint_bytes(), MB2);
    // Base pages until an allocation finds memory short: direct reclaim runs the shrinker.
    let b = e.mmap(pid, anon(4 << 20)).unwrap();
    e.madvise(pid, b, 4 << 20, Advice::NoHugePage).unwrap();
    let mut touched = 0;
    while e.os.thp.stats.split.shrinker_runs == 0 && touched < 1024 {
        write(&mut e, pid, b + touched * PAGE);
        touched += 1;
    }
    let s = &e.os.thp.stats.split;
    assert_eq!(
        (s.shrinker_runs, s.split_page, s.split_freed_pages),
        (1, 1, 511)
    );
    assert_eq!(s.queued_pages, 0);
    assert!(
        touched > 256,
        "{touched}: the shrinker ran before memory was short"
    );
    assert_eq!(mapped(&e, pid), ((touched + 1) * PAGE, 0));
    assert_eq!(e.os.footprint_bytes(), (touched + 1) * PAGE);
}

#[test]
fn prctl_thp_disable_stops_thps_for_the_process_and_its_children() {
    let (mut e, pid) = engine(M, "linux", None);
    let a = e.mmap(pid, anon(8 << 20)).unwrap();
    write(&mut e, pid, a);
    assert_eq!(e.os.thp.stats.fault_alloc, 1);
    e.prctl_thp_disable(pid, true).unwrap();
    // The THP already mapped stays; new faults take base pages, no fallback counted.
    write(&mut e, pid, a + MB2);
    // A forked child inherits the flag.
    let child = e.fork(pid).unwrap();
    write(&mut e, child, a + 2 * MB2);
    let t = &e.os.thp.stats;
    assert_eq!((t.fault_alloc, t.fault_fallback), (1, 0));
    assert_eq!(mapped(&e, pid), (PAGE, MB2));
    // Neither khugepaged nor MADV_COLLAPSE collapses their regions.
    idle(&mut e, 11);
    e.madvise(pid, a, 8 << 20, Advice::Collapse).unwrap();
    let t = &e.os.thp.stats;
    assert_eq!((t.pages_collapsed, t.madv_collapsed), (0, 0));
    // Cleared: THPs again.
    e.prctl_thp_disable(pid, false).unwrap();
    write(&mut e, pid, a + 3 * MB2);
    assert_eq!(e.os.thp.stats.fault_alloc, 2);
    assert!(e
        .prctl_thp_disable(splab_sim::units::Pid(99), true)
        .is_err());
}

#[test]
fn mthp_sizes_take_the_largest_fitting_empty_block_and_fall_back_down() {
    // 1MB: no 2MB region fits, so the mTHP sizes are tried, 64KB first.
    let (mut e, pid) = engine(M, "linux:mthp=16K+64K,khugepaged=off", None);
    let a = e.mmap(pid, anon(1 << 20)).unwrap();
    write(&mut e, pid, a + 5 * PAGE);
    let t = &e.os.thp.stats;
    assert_eq!((t.fault_alloc, t.mthp.len()), (0, 1));
    assert_eq!((t.mthp[0].size, t.mthp[0].anon_fault_alloc), (64 << 10, 1));
    assert_eq!(
        mapped(&e, pid),
        (64 << 10, 0),
        "one fault maps 16 base pages"
    );
    assert_eq!(e.os.stats.faults.zero_fill, 1);
    // A page already mapped in the next 64KB: that block is not empty, a 16KB one is.
    let b = a + (64 << 10);
    e.madvise(pid, b, 64 << 10, Advice::NoHugePage).unwrap();
    write(&mut e, pid, b);
    e.madvise(pid, b, 64 << 10, Advice::HugePage).unwrap();
    write(&mut e, pid, b + 8 * PAGE);
    let t = &e.os.thp.stats;
    assert_eq!(
        t.mthp
            .iter()
            .map(|s| (s.size, s.anon_fault_alloc))
            .collect::<Vec<_>>(),
        [(16 << 10, 1), (64 << 10, 1)]
    );
    assert_eq!(mapped(&e, pid), ((64 + 4 + 16) << 10, 0));
    // prctl(PR_SET_THP_DISABLE) turns mTHPs off too.
    e.prctl_thp_disable(pid, true).unwrap();
    write(&mut e, pid, a + (512 << 10));
    assert_eq!(mapped(&e, pid), ((64 + 4 + 16 + 4) << 10, 0));
    // Under 64KB free: the 64KB size falls back, then 16KB is tried.
    let (mut e, pid) = engine(
        M,
        "linux:mthp=16K+64K,khugepaged=off,pagedaemon=off",
        Some(60 << 10),
    );
    let a = e.mmap(pid, anon(1 << 20)).unwrap();
    write(&mut e, pid, a);
    let t = &e.os.thp.stats;
    let stat = |size: u64| {
        t.mthp
            .iter()
            .find(|s| s.size == size)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        (
            stat(64 << 10).anon_fault_fallback,
            stat(64 << 10).anon_fault_alloc
        ),
        (1, 0)
    );
    assert_eq!(
        stat(16 << 10).anon_fault_fallback + stat(16 << 10).anon_fault_alloc,
        1
    );
}

#[test]
fn mthp_sizes_must_lie_between_four_base_pages_and_the_thp() {
    use splab_sim::hw::machine::Machine;
    use splab_sim::policy::Policy;
    let m = Machine::from_spec(M).unwrap();
    for bad in ["mthp=8K", "mthp=2M", "mthp=48K", "mthp=16K+16K"] {
        let mut p = Policy::from_spec(&format!("linux:{bad}")).unwrap();
        let err = p.resolve(&m).unwrap_err().to_string();
        assert!(err.contains("mthp"), "{bad}: {err}");
    }
    assert!(Policy::from_spec("linux:mthp=16Q").is_err());
    assert!(
        Policy::from_spec("freebsd:mthp=16K").is_err(),
        "mthp is THP's"
    );
}

#[test]
fn a_thp_fault_zeroes_at_the_machines_huge_page_rate() {
    // The same first touch on two machines that differ only in `huge_zero_page_cycles`: the
    // fault's cycles differ by 512 times the difference, and the 4KB rate is not used.
    let fault_cycles = |extra: u64| {
        let (mut e, pid) = engine(M, "linux", None);
        e.os.machine.cost.huge_zero_page_cycles += extra;
        let base = e.mmap(pid, anon(4 << 20)).unwrap();
        let before = e.clock();
        write(&mut e, pid, base);
        assert_eq!(e.os.thp.stats.fault_alloc, 1);
        e.clock() - before
    };
    assert_eq!(fault_cycles(100) - fault_cycles(0), 512 * 100);
    let (e, _) = engine(M, "linux", None);
    let c = &e.os.machine.cost;
    assert_eq!(
        c.huge_zero_page_cycles, c.zero_page_cycles,
        "skylake clears a THP 4KB at a time, as Linux 4.3 (seed 003 Table 5)"
    );
}

#[test]
fn an_mthp_fault_zeroes_its_block_and_maps_every_page_dirty() {
    // mm/memory.c alloc_anon_folio -> set_ptes: one fault zeroes the whole 64KB block at the
    // base-page rate and writes one base entry per page, each writable and dirty
    // (pte_mkdirty), so that every page of it is written out if evicted.
    let (mut e, pid) = engine(M, "linux:mthp=64K,khugepaged=off", None);
    let c = e.os.machine.cost.clone();
    assert!(!e.os.machine.replicated_ptes);
    let a = e.mmap(pid, anon(1 << 20)).unwrap();
    let before = e.os.stats.cycles_fault;
    write(&mut e, pid, a + 5 * PAGE);
    assert_eq!(
        e.os.stats.cycles_fault - before,
        c.fault_cycles + 16 * (c.zero_page_cycles + c.pte_write_cycles)
    );
    assert_eq!(e.os.thp.stats.mthp[0].anon_fault_alloc, 1);
    let pm = &e.os.procs[&pid.0].pmap;
    for i in 0..16 {
        assert!(pm.is_dirty(a / PAGE + i, 0), "page {i} of the mTHP");
    }
}

#[test]
fn a_region_with_pages_on_swap_takes_base_pages() {
    // mm/huge_memory.c do_huge_pmd_anonymous_page runs only on pmd_none: a page of the region
    // swapped out leaves a swap entry in its page table, so a later fault elsewhere in the
    // region takes a base page rather than a THP that would hide the swapped data.
    let (mut e, pid) = engine(M, "linux:khugepaged=off", Some(4 << 20));
    let a = e.mmap(pid, anon(MB2)).unwrap();
    e.madvise(pid, a, MB2, Advice::NoHugePage).unwrap();
    for i in 0..8 {
        write(&mut e, pid, a + i * PAGE);
    }
    let obj = e.os.procs[&pid.0].vma_at(a).unwrap().obj;
    // Other base pages until every page of the region is on swap and out of memory.
    let b = e.mmap(pid, anon(64 << 20)).unwrap();
    e.madvise(pid, b, 64 << 20, Advice::NoHugePage).unwrap();
    let gone = |e: &Engine| {
        (0..8).all(|i| e.os.backing.on_swap(obj, i) && e.os.obj(obj).pages.get(i).is_none())
    };
    let mut touched = 0;
    while !gone(&e) && touched < 16384 {
        write(&mut e, pid, b + touched * PAGE);
        touched += 1;
    }
    assert!(gone(&e), "the region's pages went to swap");
    assert_eq!(
        e.os.procs[&pid.0]
            .pmap
            .count_valid(a / PAGE, (a + MB2) / PAGE),
        0
    );
    e.madvise(pid, a, MB2, Advice::HugePage).unwrap();
    write(&mut e, pid, a + 300 * PAGE);
    // Not even tried: no fallback counted (a THP allocation was never attempted).
    let t = &e.os.thp.stats;
    assert_eq!((t.fault_alloc, t.fault_fallback), (0, 0), "a base page");
    assert_eq!(
        e.os.procs[&pid.0]
            .pmap
            .count_valid(a / PAGE, (a + MB2) / PAGE),
        1
    );
}

/// Writes base pages of a new mapping (advised MADV_NOHUGEPAGE) until direct reclaim has run
/// the deferred split shrinker once (the write that ran it fails if the shrinker freed nothing:
/// the page daemon is off).
fn press_until_the_shrinker_runs(e: &mut Engine, pid: splab_sim::units::Pid) {
    let b = e.mmap(pid, anon(8 << 20)).unwrap();
    e.madvise(pid, b, 8 << 20, Advice::NoHugePage).unwrap();
    let mut touched = 0;
    while e.os.thp.stats.split.shrinker_runs == 0
        && touched < 2048
        && e.access(pid, b + touched * PAGE, AccessKind::Write).is_ok()
    {
        touched += 1;
    }
    assert_eq!(e.os.thp.stats.split.shrinker_runs, 1);
}

#[test]
fn the_underused_shrinker_frees_only_zero_pages_no_other_process_maps() {
    // Linux 6.12 thp_underused and __split_huge_page's remap to the zero page: only a page
    // mapped by this process alone (exclusive) is dropped; after fork the child maps every
    // page of the THP too, so the split frees none of them.
    for (fork, freed) in [(false, 502), (true, 0)] {
        let policy = "linux:max_ptes_none=409,pagedaemon=off";
        let (mut e, pid) = engine(M, policy, Some(8 << 20));
        let a = e.mmap(pid, anon(MB2)).unwrap();
        for i in 0..10 {
            write(&mut e, pid, a + i * PAGE);
        }
        if fork {
            e.fork(pid).unwrap();
        }
        press_until_the_shrinker_runs(&mut e, pid);
        let s = &e.os.thp.stats.split;
        assert_eq!(
            (s.underused_split_page, s.underused_freed_pages),
            (1, freed),
            "fork: {fork}"
        );
    }
}

#[test]
fn pages_a_collapse_copied_count_as_filled_for_the_underused_check() {
    // mm/khugepaged.c collapse_huge_page queues the new THP (deferred_split_folio) and
    // thp_underused counts its zero-filled pages: the 200 pages MADV_COLLAPSE copied in are not
    // zero, so 312 zero pages (at most max_ptes_none = 409) leave it whole; with 10 copied
    // (502 zero) it is split.
    for (copied, split) in [(200, 0), (10, 1)] {
        let policy = "linux:max_ptes_none=409,pagedaemon=off";
        let (mut e, pid) = engine(M, policy, Some(8 << 20));
        let a = e.mmap(pid, anon(MB2)).unwrap();
        e.madvise(pid, a, MB2, Advice::NoHugePage).unwrap();
        for i in 0..copied {
            write(&mut e, pid, a + i * PAGE);
        }
        e.madvise(pid, a, MB2, Advice::HugePage).unwrap();
        e.madvise(pid, a, MB2, Advice::Collapse).unwrap();
        assert_eq!(e.os.thp.stats.madv_collapsed, 1, "{copied}");
        press_until_the_shrinker_runs(&mut e, pid);
        let s = &e.os.thp.stats.split;
        assert_eq!(s.underused_split_page, split, "{copied} copied");
    }
}
