//! Fault-around (Linux do_fault_around) and prefault (FreeBSD vm_fault_prefault): which
//! neighbours of a faulting page are mapped with it, with exact counts, and the page cache's
//! warm and cold starts (`--page-cache`).

use splab_sim::engine::Engine;
use splab_sim::units::{AccessKind, Order, Pid, Prot};
use splab_sim::vm::object::PageCache;
use splab_sim::vm::{MapFlags, MmapReq};

mod common;

const PAGE: u64 = 4096;
/// A 64K- and 2M-aligned address for fixed mappings.
const AT: u64 = 0x4000_0000;

fn map_file(e: &mut Engine, pid: Pid, at: u64, pages: u64, prot: Prot, shared: bool) -> u64 {
    let mut flags = MapFlags::FILE.with(MapFlags::FIXED);
    if shared {
        flags = flags.with(MapFlags::SHARED);
    }
    e.mmap(
        pid,
        MmapReq {
            addr: at,
            len: pages * PAGE,
            prot,
            flags,
            file: 7,
            offset: 0,
        },
    )
    .unwrap()
}

fn read(e: &mut Engine, pid: Pid, page: u64) {
    e.access(pid, AT + page * PAGE, AccessKind::Read).unwrap();
}

fn around(e: &Engine) -> u64 {
    e.os.stats.around.mapped
}

fn faults(e: &Engine) -> u64 {
    e.os.stats.faults.total
}

fn engine(policy: &str, cache: PageCache) -> (Engine, Pid) {
    let (mut e, pid) = common::engine("skylake:mem=1G", policy, None);
    e.os.page_cache = cache;
    e.open_file(7, 64 * PAGE).unwrap();
    (e, pid)
}

/// Linux's 64K window on 4K pages: a read fault maps the 16 pages of its aligned window, and
/// reads inside the window take no further fault.
#[test]
fn window_maps_the_aligned_64k_around_a_read_fault() {
    let (mut e, pid) = engine("base", PageCache::Warm);
    // What the incremental --check is told the event touched (drained by the engine there).
    e.os.stats.around.track = true;
    map_file(&mut e, pid, AT, 64, Prot::READ, false);
    read(&mut e, pid, 5);
    assert_eq!((faults(&e), around(&e)), (1, 15));
    let t = &e.os.stats.around.touched;
    assert!(
        t.len() == 1 && t[0].0 == pid && t[0].1 <= AT && t[0].2 >= AT + 16 * PAGE,
        "the window's range is reported for the check: {t:x?}"
    );
    e.os.stats.around.track = false;
    for p in 0..16 {
        read(&mut e, pid, p);
    }
    assert_eq!(faults(&e), 1, "the window's pages are mapped");
    read(&mut e, pid, 16);
    assert_eq!((faults(&e), around(&e)), (2, 30));
    // A first read in the middle of a fresh mapping maps its own window only.
    map_file(&mut e, pid, AT + 128 * PAGE, 64, Prot::READ, false);
    read(&mut e, pid, 128 + 21);
    assert_eq!((faults(&e), around(&e)), (3, 45));
    for p in 16..32 {
        read(&mut e, pid, 128 + p);
    }
    assert_eq!(faults(&e), 3);
    read(&mut e, pid, 128 + 15);
    assert_eq!((faults(&e), around(&e)), (4, 60));
    e.munmap(pid, AT + 128 * PAGE, 64 * PAGE).unwrap();
    // Warm cache: no I/O, and the footprint is the 32 pages mapped (plus page tables).
    assert_eq!(e.os.stats.io_read_bytes, 0);
    assert_eq!(e.os.stats.faults.major, 0);
    assert_eq!(e.os.footprint_bytes(), 32 * PAGE);
}

/// The window is clipped to the map entry; writes and private anonymous memory get none.
#[test]
fn window_is_clipped_and_skips_writes_and_anonymous_memory() {
    let (mut e, pid) = engine("base", PageCache::Warm);
    // Three pages at a window's start: two neighbours.
    map_file(&mut e, pid, AT, 3, Prot::READ, false);
    read(&mut e, pid, 0);
    assert_eq!(around(&e), 2);
    // A shared writable mapping: a write fault maps one page (do_shared_fault).
    map_file(&mut e, pid, AT + 64 * PAGE, 16, Prot::RW, true);
    e.access(pid, AT + 64 * PAGE, AccessKind::Write).unwrap();
    assert_eq!(around(&e), 2);
    // A read there maps the rest of its window, read-only: writing one of them then takes a
    // protection fault that grants write.
    read(&mut e, pid, 64 + 1 + 4);
    assert_eq!(around(&e), 2 + 14);
    let f = e.os.stats.faults.protection;
    e.access(pid, AT + (64 + 9) * PAGE, AccessKind::Write)
        .unwrap();
    assert_eq!(e.os.stats.faults.protection, f + 1);
    // A window of one page is no window.
    let (mut one, p1) = engine("base:fault_around=4K", PageCache::Warm);
    map_file(&mut one, p1, AT, 64, Prot::READ, false);
    read(&mut one, p1, 5);
    assert_eq!(around(&one), 0);
    // Private anonymous memory: nothing around.
    let a = e.mmap(pid, MmapReq::anon(64 * PAGE)).unwrap();
    let before = around(&e);
    e.access(pid, a + 5 * PAGE, AccessKind::Read).unwrap();
    assert_eq!(around(&e), before);
}

/// A cold cache holds only what was read: the window maps those pages and no others, and
/// every first read is a major fault.
#[test]
fn cold_cache_maps_only_pages_read_before() {
    // One page per read (no read-ahead, vm/file.rs), so that the cache holds what was read.
    let (mut e, a) = engine("base:readahead=off", PageCache::Cold);
    map_file(&mut e, a, AT, 64, Prot::READ, false);
    read(&mut e, a, 5);
    read(&mut e, a, 6);
    assert_eq!(e.os.stats.faults.major, 2);
    assert_eq!(around(&e), 0, "nothing else is cached");
    let b = e.spawn().unwrap();
    map_file(&mut e, b, AT, 64, Prot::READ, false);
    read(&mut e, b, 6);
    assert_eq!(around(&e), 1, "page 5, cached by the first process");
    assert_eq!(
        e.os.stats.faults.major, 2,
        "page 6 is cached: a minor fault"
    );
    assert_eq!(e.os.stats.io_read_bytes, 2 * PAGE);
}

/// FreeBSD's spiral: -1, +1, -2, +2, ... up to 4 each way, skipping mapped pages, stopping at the
/// first page not resident.
#[test]
fn spiral_stops_at_the_first_page_not_resident() {
    let (mut e, a) = engine("base:prefault=4+4,readahead=off", PageCache::Cold);
    map_file(&mut e, a, AT, 64, Prot::READ, false);
    for p in [0, 1, 2, 4, 5] {
        read(&mut e, a, p);
    }
    // Process a reads in order, so each neighbour below is mapped already (skipped) and the one
    // above is not read yet (stop): reading 4 stops at 3 at once.
    assert_eq!(around(&e), 0);
    let b = e.spawn().unwrap();
    map_file(&mut e, b, AT, 64, Prot::READ, false);
    read(&mut e, b, 1);
    // 0 and 2 mapped; -1 is outside the entry (skipped); 3 is missing: stop before 4 and 5.
    assert_eq!(around(&e), 2);
    read(&mut e, b, 5);
    // 4 mapped; 6 missing: stop.
    assert_eq!(around(&e), 2 + 1);
    // Warm cache: every page resident, 8 neighbours.
    let (mut w, p) = engine("base:prefault=4+4", PageCache::Warm);
    map_file(&mut w, p, AT, 64, Prot::READ, false);
    read(&mut w, p, 10);
    assert_eq!(around(&w), 8);
    read(&mut w, p, 3);
    // 2, 4, 1, 5, 0 mapped; 6 mapped already; -1 outside; 7 mapped already.
    assert_eq!(around(&w), 8 + 5);
    assert_eq!(faults(&w), 2);
    // Asymmetric: 1 below, 3 above (FreeBSD passes the read-ahead's behind and ahead).
    let (mut a, p) = engine("base:prefault=1+3", PageCache::Warm);
    map_file(&mut a, p, AT, 64, Prot::READ, false);
    read(&mut a, p, 10);
    assert_eq!(around(&a), 4, "9, 11, 12, 13");
    for n in [9, 11, 12, 13] {
        read(&mut a, p, n);
    }
    assert_eq!(faults(&a), 1);
    read(&mut a, p, 8);
    assert_eq!(faults(&a), 2, "8 was beyond the one page below");
}

/// Prefault covers anonymous objects too: after fork, a superpage the parent promoted is not
/// copied into the child's page table, so the child's first read in it maps 4 + 4 resident
/// neighbours with it (navarro's default), and none with `prefault=off`.
#[test]
fn prefault_maps_resident_anonymous_pages_after_fork() {
    // Linux's window never maps private anonymous memory, resident or not.
    for (policy, want) in [
        ("navarro", 8),
        ("navarro:prefault=off", 0),
        ("navarro:fault_around=64K", 0),
    ] {
        let (mut e, pid) = common::engine("skylake:mem=1G", policy, None);
        let mb = 1u64 << 20;
        let a = e.mmap(pid, MmapReq::anon(4 * mb)).unwrap();
        for i in 0..(4 * mb / PAGE) {
            e.access(pid, a + i * PAGE, AccessKind::Write).unwrap();
        }
        assert_eq!(e.os.superpage_bytes(), 4 * mb, "{policy}: promoted");
        let child = e.fork(pid).unwrap();
        let before = (faults(&e), around(&e));
        e.access(child, a + 100 * PAGE, AccessKind::Read).unwrap();
        assert_eq!(
            (faults(&e) - before.0, around(&e) - before.1),
            (1, want),
            "{policy}"
        );
        for i in 96..=104 {
            e.access(child, a + i * PAGE, AccessKind::Read).unwrap();
        }
        assert_eq!(faults(&e) - before.0, 1 + 8 - want, "{policy}");
    }
}

/// Prefault holds the page it is about to map: entering a neighbour in a chunk the process has
/// no page table for allocates one, and with memory short that runs the page daemon, which must
/// not evict that very neighbour (it would stay mapped over a frame its object no longer holds).
/// Shared memory straddles an 8MB leaf-table boundary `b` on the Alpha; the parent writes the
/// pages on each side of it, the child (with a table for `b`'s chunk only) reads `b` with 2
/// frames free: the prefault of `b - 1` takes a table, the scan waits for it and evicts the
/// child's other page, not `b - 1`.
#[test]
fn prefault_keeps_its_page_while_a_page_table_is_allocated() {
    let page = 8192u64;
    let (mut e, parent) = common::engine("alpha21264:mem=16M", "base:prefault=4+4", None);
    let b = 0x10_0080_0000u64;
    let at = b - 4 * page;
    let flags = MapFlags::SHARED.with(MapFlags::FIXED);
    let req = MmapReq {
        addr: at,
        len: 68 * page,
        prot: Prot::RW,
        flags,
        file: 0,
        offset: 0,
    };
    e.mmap(parent, req).unwrap();
    let child = e.fork(parent).unwrap();
    e.access(parent, b - page, AccessKind::Write).unwrap();
    e.access(parent, b, AccessKind::Write).unwrap();
    // The child's table for b's chunk, through a page of its own far from b.
    e.access(child, b + 32 * page, AccessKind::Read).unwrap();
    assert_eq!(around(&e), 0);
    let pte = |e: &Engine, pid: Pid, va: u64| e.os.proc(pid).unwrap().pmap.lookup(va / page);
    let below = pte(&e, parent, b - page).unwrap().pfn();
    assert!(pte(&e, child, b - page).is_none());
    // The kernel takes all but 2 free frames: fewer than a table path may need.
    while e.os.phys.buddy.free_frames > 2 {
        e.os.phys.buddy.alloc(Order(0)).unwrap();
        e.os.phys.wired_frames += 1;
    }
    let cached = e.os.pageout.stats.cached;
    e.access(child, b, AccessKind::Read).unwrap();
    // b - 1 prefaulted (b + 1 is not resident: the spiral stops), over the frame its object
    // still holds; the child's page at b + 32 was the one evicted.
    assert_eq!(around(&e), 1);
    assert_eq!(pte(&e, child, b - page).map(|p| p.pfn()), Some(below));
    assert_eq!(pte(&e, parent, b - page).map(|p| p.pfn()), Some(below));
    assert!(pte(&e, child, b + 32 * page).is_none());
    assert_eq!(e.os.pageout.stats.cached, cached + 1);
    e.os.check_invariants().unwrap();
}

#[test]
fn policy_parameters_are_checked() {
    use splab_sim::policy::{FaultAround, Policy};
    assert_eq!(
        Policy::from_spec("base").unwrap().fault_around,
        FaultAround::Window { bytes: 65536 }
    );
    assert_eq!(
        Policy::from_spec("freebsd").unwrap().fault_around,
        FaultAround::Spiral {
            behind: 4,
            ahead: 4
        }
    );
    assert_eq!(
        Policy::from_spec("navarro:fault_around=128K")
            .unwrap()
            .fault_around,
        FaultAround::Window { bytes: 131072 }
    );
    assert_eq!(
        Policy::from_spec("base:fault_around=off")
            .unwrap()
            .fault_around,
        FaultAround::Off
    );
    for (bad, says) in [
        ("base:fault_around=48K", "power-of-two"),
        ("base:prefault=4", "behind+ahead"),
        ("base:prefault=4+x", "behind+ahead"),
        ("base:fault_around=64K,prefault=4+4", "not both"),
    ] {
        let e = Policy::from_spec(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}
