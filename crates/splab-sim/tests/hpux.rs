//! HP-UX's multiple page sizes (seed 002; vm/pagesize.rs, policy `hpux`): scenarios with exact
//! counts, every invariant checked after every event (`common::engine`).

mod common;

use common::{engine, mapped, write};
use splab_sim::engine::Engine;
use splab_sim::units::Pid;
use splab_sim::vm::{Advice, MapFlags, MmapReq};

/// The Alpha 21264: base 8KB, superpages 64KB, 512KB, 4MB.
const ALPHA: &str = "alpha21264:mem=256M";
const K: u64 = 1 << 10;
const M: u64 = 1 << 20;
const PAGE: u64 = 8 * K;
/// A 4MB-aligned address for fixed mappings.
const A: u64 = 0x4000_0000;

/// A private anonymous read-write mapping of `len` bytes at exactly `addr`.
fn anon_at(e: &mut Engine, pid: Pid, addr: u64, len: u64) {
    let mut req = MmapReq::anon(len);
    req.addr = addr;
    req.flags = req.flags.with(MapFlags::FIXED);
    assert_eq!(e.mmap(pid, req).unwrap(), addr);
}

/// (allocated, failed) large pages of `size` at faults.
fn at_faults(e: &Engine, size: u64) -> (u64, u64) {
    let st = e.os.pagesize_stats();
    let s = st.sizes.iter().find(|s| s.size == size).expect("a size");
    (s.allocated, s.failed)
}

#[test]
fn a_chatr_hint_maps_the_hinted_page_at_the_first_fault_zeroed_whole() {
    let (mut e, pid) = engine(ALPHA, "hpux:hint=4M", None);
    anon_at(&mut e, pid, A, 8 * M);
    write(&mut e, pid, A + 5 * PAGE);
    assert_eq!(at_faults(&e, 4 * M), (1, 0));
    assert_eq!(mapped(&e, pid), (0, 4 * M));
    assert_eq!(e.os.stats.zeroed_bytes, 4 * M);
    // No more faults in it; the second 4MB is one more.
    write(&mut e, pid, A + 4 * M - 8);
    write(&mut e, pid, A + 4 * M + PAGE);
    assert_eq!(e.os.stats.faults.total, 2);
    assert_eq!(at_faults(&e, 4 * M), (2, 0));
    assert_eq!(mapped(&e, pid), (0, 8 * M));
    // Never promoted, never lowered.
    assert!(e.os.stats.promotions.iter().all(|&n| n == 0));
    let st = e.os.pagesize_stats();
    assert_eq!((st.lowered_for_memory, st.lowered_to_fit), (0, 0));
    // A hint between sizes is the next lower size (1M -> 512KB).
    let (mut e, pid) = engine(ALPHA, "hpux:hint=1M", None);
    anon_at(&mut e, pid, A, 8 * M);
    write(&mut e, pid, A);
    assert_eq!(at_faults(&e, 512 * K), (1, 0));
    assert_eq!(mapped(&e, pid), (0, 512 * K));
}

#[test]
fn the_page_is_lowered_to_the_largest_aligned_one_inside_the_entry() {
    let (mut e, pid) = engine(ALPHA, "hpux:hint=4M", None);
    // [A, A + 4M - 64K): no 4MB page fits; 512KB pages do up to A + 3.5M, then 64KB pages.
    anon_at(&mut e, pid, A, 4 * M - 64 * K);
    write(&mut e, pid, A);
    assert_eq!(at_faults(&e, 512 * K), (1, 0));
    write(&mut e, pid, A + 3 * M + 512 * K + PAGE);
    assert_eq!(at_faults(&e, 64 * K), (1, 0));
    // The last 64KB before the entry's end: a 64KB page too. Every fault here was lowered.
    write(&mut e, pid, A + 4 * M - 128 * K);
    assert_eq!(at_faults(&e, 64 * K), (2, 0));
    assert_eq!(at_faults(&e, 4 * M), (0, 0));
    assert_eq!(e.os.pagesize_stats().lowered_to_fit, 3);
    assert_eq!(mapped(&e, pid), (0, 512 * K + 2 * 64 * K));
    // An entry smaller than any large page aligned in it: a base page, counted as lowered.
    anon_at(&mut e, pid, A + 8 * M + PAGE, 48 * K);
    write(&mut e, pid, A + 8 * M + PAGE);
    assert_eq!(e.os.pagesize_stats().lowered_to_fit, 4);
    assert_eq!(mapped(&e, pid), (PAGE, 512 * K + 2 * 64 * K));
}

#[test]
fn a_partial_dontneed_demotes_one_size_and_a_refault_takes_the_page_that_is_empty() {
    let (mut e, pid) = engine(ALPHA, "hpux:hint=4M", None);
    anon_at(&mut e, pid, A, 4 * M);
    write(&mut e, pid, A);
    assert_eq!(mapped(&e, pid), (0, 4 * M));
    // seed 002 5: a 4MB mapping is broken into 512KB mappings, not base pages.
    e.madvise(pid, A + M, 512 * K, Advice::DontNeed).unwrap();
    let d = &e.os.stats.demotions;
    let c4m =
        e.os.machine
            .page_sizes()
            .iter()
            .position(|&s| s == 4 * M)
            .unwrap();
    assert_eq!(d[c4m], 1, "{d:?}");
    assert_eq!(d.iter().sum::<u64>(), 1, "one step only: {d:?}");
    assert_eq!(mapped(&e, pid), (0, 4 * M - 512 * K));
    // The 4MB page around it is not empty: the 512KB page is.
    write(&mut e, pid, A + M + PAGE);
    assert_eq!(at_faults(&e, 512 * K), (1, 0));
    assert_eq!(at_faults(&e, 4 * M), (1, 0));
    assert_eq!(e.os.pagesize_stats().lowered_to_fit, 1);
    assert_eq!(mapped(&e, pid), (0, 4 * M));
}

#[test]
fn the_hint_is_lowered_while_free_memory_is_under_four_times_the_page() {
    // 12MB free: under 4 x 4MB, at least 4 x 512KB.
    let (mut e, pid) = engine(ALPHA, "hpux:hint=4M", Some(12 * M));
    anon_at(&mut e, pid, A, 8 * M);
    write(&mut e, pid, A);
    assert_eq!(at_faults(&e, 4 * M), (0, 0));
    assert_eq!(at_faults(&e, 512 * K), (1, 0));
    let st = e.os.pagesize_stats();
    assert_eq!((st.lowered_for_memory, st.lowered_to_fit), (1, 0));
    // 1MB free: under 4 x 512KB, at least 4 x 64KB: a 64KB page.
    let (mut e, pid) = engine(ALPHA, "hpux:hint=4M", Some(M));
    anon_at(&mut e, pid, A, 8 * M);
    write(&mut e, pid, A);
    assert_eq!(at_faults(&e, 64 * K), (1, 0));
    assert_eq!(e.os.pagesize_stats().lowered_for_memory, 1);
    // 192KB free: under 4 x 64KB, a base page, lowered for memory and not counted to fit.
    let (mut e, pid) = engine(ALPHA, "hpux:hint=4M", Some(192 * K));
    anon_at(&mut e, pid, A, 8 * M);
    write(&mut e, pid, A);
    assert_eq!(mapped(&e, pid), (PAGE, 0));
    let st = e.os.pagesize_stats();
    assert_eq!((st.lowered_for_memory, st.lowered_to_fit), (1, 0));
}

#[test]
fn a_failed_no_wait_allocation_takes_a_base_page_not_a_smaller_large_page() {
    let (mut e, pid) = engine("alpha21264:mem=64M", "hpux:hint=4M", None);
    // 64KB entries, each a 64KB page; every other one unmapped again, so that memory is half
    // free but no free block is larger than 64KB.
    let n = 64 * M / (64 * K);
    let base = A + 64 * M;
    let mut made = 0;
    for i in 0..n {
        anon_at(&mut e, pid, base + i * 128 * K, 64 * K);
        if e.access(pid, base + i * 128 * K, splab_sim::units::AccessKind::Write)
            .is_err()
        {
            break;
        }
        made += 1;
        if at_faults(&e, 64 * K).0 < made {
            break;
        }
    }
    for i in (0..made).step_by(2) {
        e.munmap(pid, base + i * 128 * K, 64 * K).unwrap();
    }
    let b = &e.os.phys.buddy;
    let o512 = e.os.machine.order_of(2);
    assert!(
        (o512..=b.max_order()).all(|o| b.free_blocks[o as usize] == 0),
        "no free 512KB block left"
    );
    assert!(
        e.os.available_frames() * PAGE >= 16 * M,
        "enough memory not to lower the hint"
    );
    anon_at(&mut e, pid, A, 4 * M);
    write(&mut e, pid, A);
    assert_eq!(at_faults(&e, 4 * M).1, 1, "the 4MB allocation failed");
    assert_eq!(
        at_faults(&e, 512 * K),
        (0, 0),
        "no smaller large page tried"
    );
    let p = e.os.proc(pid).unwrap();
    assert!(p.pmap.lookup(A / PAGE).unwrap().size().is_base());
}

#[test]
fn the_transparent_method_bounds_the_regions_size_by_vps_pagesize_and_vps_ceiling() {
    let sky = "skylake:mem=1G";
    let mb2 = 2 * M;
    let base = 0x4000_0000;
    // HP-UX's defaults: vps_ceiling 16KB, which skylake lacks: the next lower, a base page.
    let (mut e, pid) = engine(sky, "hpux", None);
    anon_at(&mut e, pid, base, 8 * M);
    write(&mut e, pid, base);
    assert_eq!(mapped(&e, pid), (4096, 0));
    // vps_ceiling=2M: an 8MB region gets 2MB pages, a 1MB region base pages (its size's page).
    let (mut e, pid) = engine(sky, "hpux:vps_ceiling=2M", None);
    anon_at(&mut e, pid, base, 8 * M);
    write(&mut e, pid, base);
    assert_eq!(mapped(&e, pid), (0, mb2));
    anon_at(&mut e, pid, base + 16 * M, M);
    write(&mut e, pid, base + 16 * M);
    assert_eq!(mapped(&e, pid), (4096, mb2));
    assert_eq!(e.os.pagesize_stats().lowered_to_fit, 0);
    // vps_pagesize=2M raises the 1MB region's hint to 2MB, which does not fit it.
    let (mut e, pid) = engine(sky, "hpux:vps_pagesize=2M,vps_ceiling=2M", None);
    anon_at(&mut e, pid, base, M);
    write(&mut e, pid, base);
    assert_eq!(mapped(&e, pid), (4096, 0));
    assert_eq!(e.os.pagesize_stats().lowered_to_fit, 1);
}

#[test]
fn bad_hint_parameters_are_refused_with_the_key() {
    use splab_sim::policy::Policy;
    for (spec, needle) in [
        ("hpux:hint=big", "hint='big'"),
        ("hpux:vps_ceiling=0", "vps_ceiling='0'"),
        (
            "hpux:vps_pagesize=64K,vps_ceiling=16K",
            "vps_pagesize=64K is above vps_ceiling=16K",
        ),
        ("hpux:khugepaged=true", "khugepaged"),
    ] {
        let err = Policy::from_spec(spec).unwrap_err().to_string();
        assert!(err.contains(needle), "{spec}: {err}");
    }
}

#[test]
fn the_heap_grown_in_small_steps_ends_at_the_hinted_pages_boundary() {
    // seed 002 6: a heap grown by brk in 128KB steps (glibc's M_TOP_PAD) still gets 4MB pages.
    for (policy, top_of_first, page) in [
        ("hpux:hint=4M", 4 * M, 4 * M),
        ("hpux:hint=4M,heap_growth=off", 128 * K, 64 * K),
    ] {
        let (mut e, pid) = engine(ALPHA, policy, None);
        let start = e.current_brk(pid).unwrap();
        assert_eq!(start % (4 * M), 0);
        assert_eq!(
            e.brk(pid, start + 128 * K).unwrap(),
            start + 128 * K,
            "{policy}"
        );
        // The program's break is where it asked; the heap's entry ends further.
        assert_eq!(e.current_brk(pid).unwrap(), start + 128 * K);
        let v = e.os.proc(pid).unwrap().vma_at(start).cloned().unwrap();
        assert_eq!(v.end, start + top_of_first, "{policy}");
        write(&mut e, pid, start);
        assert_eq!(mapped(&e, pid), (0, page), "{policy}");
        // Growth inside the entry moves the break only; past it, the entry grows by a page.
        assert_eq!(e.brk(pid, start + 3 * M).unwrap(), start + 3 * M);
        assert_eq!(e.brk(pid, start + 4 * M + 8).unwrap(), start + 4 * M + 8);
        let v = e.os.proc(pid).unwrap().vma_at(start).cloned().unwrap();
        let want = if page == 4 * M { 8 * M } else { 4 * M + PAGE };
        assert_eq!(v.end, start + want, "{policy}");
        // Shrinking gives the tail back down to the boundary above the break.
        e.brk(pid, start + 5 * K).unwrap();
        let v = e.os.proc(pid).unwrap().vma_at(start).cloned().unwrap();
        let want = if page == 4 * M { 4 * M } else { PAGE };
        assert_eq!(v.end, start + want, "{policy}");
    }
}
