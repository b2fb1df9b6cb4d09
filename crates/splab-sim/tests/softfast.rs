//! Scenario tests of vm/softfast.rs, FreeBSD's `vm_fault_soft_fast`: a fault on a resident page
//! of a fully populated reservation maps the whole superpage at once (policy key
//! `map_full_reservation`, on in `freebsd`). Exact counts on skylake (4KB pages, 2MB
//! superpages, prefault 4+4), invariant checks after every event.

mod common;

use splab_sim::engine::Engine;
use splab_sim::units::{AccessKind, Pid, Prot};
use splab_sim::vm::object::PageCache;
use splab_sim::vm::{MapFlags, MmapReq};

const EXTENT: u64 = 2 << 20;
const PAGE: u64 = 4096;
const PAGES: u64 = EXTENT / PAGE;
const FILE: u32 = 3;

fn read(e: &mut Engine, pid: Pid, va: u64) {
    e.access(pid, va, AccessKind::Read).unwrap();
}

fn faults(e: &Engine) -> u64 {
    e.os.stats.faults.total
}

fn mapped_at_fault(e: &Engine) -> u64 {
    e.os.reserv.as_ref().unwrap().stats.mapped_at_fault
}

/// (protection, size class, dirty bit) of the entry mapping `va`.
fn pte(e: &Engine, pid: Pid, va: u64) -> (Prot, u8, bool) {
    let p = e.os.proc(pid).unwrap().pmap.lookup(va / PAGE).unwrap();
    (p.prot(), p.size().0, p.dirty())
}

/// A process whose 2MB-aligned region at `a` (`flags`: private or shared anonymous) had every
/// page written (`write`) or read, so its reservation is full and the extent promoted.
fn populated(policy: &str, flags: MapFlags, write: bool) -> (Engine, Pid, u64) {
    let (mut e, pid) = common::engine("skylake:mem=1G", policy, None);
    let mut req = common::anon(EXTENT);
    req.flags = flags;
    let a = e.mmap(pid, req).unwrap();
    assert_eq!(a % EXTENT, 0);
    let kind = if write {
        AccessKind::Write
    } else {
        AccessKind::Read
    };
    for i in 0..PAGES {
        e.access(pid, a + i * PAGE, kind).unwrap();
    }
    assert_eq!(common::mapped(&e, pid), (0, EXTENT), "{policy}");
    (e, pid, a)
}

/// After fork the child's first read of the shared extent maps the parent's superpage
/// read-only at once (the entry still needs a copy: the lookup grants no write, so only valid
/// pages are asked for), and no other read of the extent faults. Its first write then demotes
/// it and copies one page into the child's shadow (FreeBSD's 4KB pmap_enter in a 2MB mapping
/// demotes it).
#[test]
fn a_child_maps_the_shared_superpage_at_its_first_read() {
    let (mut e, parent, a) = populated("freebsd", MapFlags::ANON, true);
    let child = e.fork(parent).unwrap();
    let f = faults(&e);
    read(&mut e, child, a + 100 * PAGE);
    assert_eq!(faults(&e) - f, 1);
    assert_eq!(mapped_at_fault(&e), 1);
    assert_eq!(common::mapped(&e, child), (0, EXTENT));
    let (prot, class, _) = pte(&e, child, a);
    assert_eq!((prot.writable(), class), (false, 1));
    assert_eq!(
        common::pfn_of(&e, child, a + 7 * PAGE),
        common::pfn_of(&e, parent, a + 7 * PAGE),
        "the parent's frames"
    );
    for i in 0..PAGES {
        read(&mut e, child, a + i * PAGE);
    }
    assert_eq!(faults(&e) - f, 1, "every other read hits the superpage");
    let cow = e.os.stats.faults.cow;
    common::write(&mut e, child, a + 5 * PAGE);
    assert_eq!(e.os.stats.faults.cow - cow, 1);
    assert_eq!(
        common::mapped(&e, child),
        (EXTENT, 0),
        "demoted, one page copied"
    );
    assert_ne!(
        common::pfn_of(&e, child, a + 5 * PAGE),
        common::pfn_of(&e, parent, a + 5 * PAGE)
    );
    assert_eq!(mapped_at_fault(&e), 1);
}

/// The same reads with `map_full_reservation=off` (seed 000's FreeBSD 4.x): each fault maps its
/// page and prefault's resident neighbours ahead (those behind are mapped already when reading
/// upward), five pages a fault, so 512 pages take ceil(512 / 5) = 103 faults; the last one
/// completes the extent and promotes it (pmap_promote_pde after the entry).
#[test]
fn without_it_the_child_maps_base_pages_until_the_extent_is_full() {
    let (mut e, parent, a) = populated("freebsd:map_full_reservation=off", MapFlags::ANON, true);
    let child = e.fork(parent).unwrap();
    let (f, promotions) = (faults(&e), e.os.stats.promotions[1]);
    read(&mut e, child, a);
    assert_eq!(common::mapped(&e, child), (5 * PAGE, 0));
    for i in 1..PAGES {
        read(&mut e, child, a + i * PAGE);
    }
    assert_eq!(faults(&e) - f, 103);
    assert_eq!(mapped_at_fault(&e), 0);
    assert_eq!(e.os.stats.promotions[1] - promotions, 1);
    assert_eq!(common::mapped(&e, child), (0, EXTENT));
}

/// A shared mapping's lookup grants write, so `vm_page_ps_test(PS_ALL_DIRTY)` decides: pages
/// the parent wrote are all dirty, and the child's first read maps the superpage writable with
/// its modified bit preset; pages the parent only read (zero-filled, clean) are not, and the
/// child's read maps base pages.
#[test]
fn a_writable_grant_needs_every_page_dirty() {
    let shared = MapFlags(MapFlags::ANON.0 | MapFlags::SHARED.0);
    let (mut e, parent, a) = populated("freebsd", shared, true);
    let child = e.fork(parent).unwrap();
    let f = faults(&e);
    read(&mut e, child, a + 9 * PAGE);
    assert_eq!(faults(&e) - f, 1);
    assert_eq!(mapped_at_fault(&e), 1);
    assert_eq!(pte(&e, child, a), (Prot::RW, 1, true));

    let (mut e, parent, a) = populated("freebsd", shared, false);
    let child = e.fork(parent).unwrap();
    read(&mut e, child, a + 9 * PAGE);
    assert_eq!(mapped_at_fault(&e), 0);
    assert_eq!(pte(&e, child, a + 9 * PAGE).1, 0, "a base page");
    assert_eq!(common::mapped(&e, child).1, 0);
}

/// A process that read a 2MB file into the page cache with read(2) (filling a reservation of
/// its object) and then mapped the file private, `prot`, at `a` (2MB-aligned); the bytes read
/// from storage so far.
fn cached_file_mapping(policy: &str, prot: Prot) -> (Engine, Pid, u64, u64) {
    let (mut e, pid) = common::engine("skylake:mem=1G", policy, None);
    e.os.page_cache = PageCache::Cold;
    let buf = e.mmap(pid, common::anon(EXTENT)).unwrap();
    e.open(pid, FILE, EXTENT).unwrap();
    assert_eq!(e.read(pid, FILE, 0, EXTENT, buf).unwrap(), EXTENT);
    let io = e.os.stats.io_read_bytes;
    let req = MmapReq {
        addr: 0,
        len: EXTENT,
        prot,
        flags: MapFlags::FILE,
        file: FILE,
        offset: 0,
    };
    let a = e.mmap(pid, req).unwrap();
    assert_eq!(a % EXTENT, 0);
    (e, pid, a, io)
}

/// A private read-only mapping of a cached file faults once and maps the superpage read-only
/// (the entry's first object is the file's until a write shadows it), with no I/O.
#[test]
fn a_mapping_of_a_cached_file_maps_its_superpage_at_the_first_fault() {
    for (policy, want_super) in [
        ("freebsd", 1),
        // Off: prefault maps the page and its 4 + 4 resident neighbours.
        ("freebsd:map_full_reservation=off", 0),
    ] {
        let (mut e, pid, a, io) = cached_file_mapping(policy, Prot::READ);
        let f = faults(&e);
        read(&mut e, pid, a + 300 * PAGE);
        assert_eq!(faults(&e) - f, 1, "{policy}");
        assert_eq!(mapped_at_fault(&e), want_super, "{policy}");
        assert_eq!(
            e.os.stats.io_read_bytes, io,
            "{policy}: the page cache had it"
        );
        let (prot, class, _) = pte(&e, pid, a + 300 * PAGE);
        assert_eq!((prot, class), (Prot::READ, want_super as u8), "{policy}");
    }
}

/// A write through a private file mapping shadows its entry (FreeBSD `vm_map_lookup` on a
/// NEEDS_COPY entry): the shadow is the first object from then on, and a read of a page that is
/// only in the file misses it there, so the fast path does not apply and the read maps a base
/// page of the file, read-only.
#[test]
fn after_a_private_write_the_shadow_is_the_first_object() {
    let (mut e, pid, a, _) = cached_file_mapping("freebsd", Prot::RW);
    let cow = e.os.stats.faults.cow;
    common::write(&mut e, pid, a);
    assert_eq!(e.os.stats.faults.cow - cow, 1, "the write copies page 0");
    assert_eq!(
        mapped_at_fault(&e),
        0,
        "a write fault never takes the fast path here"
    );
    read(&mut e, pid, a + 300 * PAGE);
    assert_eq!(mapped_at_fault(&e), 0);
    assert_eq!(pte(&e, pid, a + 300 * PAGE), (Prot::READ, 0, false));
}

/// The shadow a private write made is the first object for every page of the entry, not only
/// for the extent written: with a 4MB file mapped, a write in the first 2MB and a read in the
/// second, whose reservation in the file object is full, the read maps a base page.
#[test]
fn a_shadow_is_the_first_object_for_the_whole_entry() {
    let (mut e, pid) = common::engine("skylake:mem=1G", "freebsd", None);
    e.os.page_cache = PageCache::Cold;
    let buf = e.mmap(pid, common::anon(2 * EXTENT)).unwrap();
    e.open(pid, FILE, 2 * EXTENT).unwrap();
    e.read(pid, FILE, 0, 2 * EXTENT, buf).unwrap();
    let req = MmapReq {
        addr: 0,
        len: 2 * EXTENT,
        prot: Prot::RW,
        flags: MapFlags::FILE,
        file: FILE,
        offset: 0,
    };
    let a = e.mmap(pid, req).unwrap();
    assert_eq!(a % EXTENT, 0);
    common::write(&mut e, pid, a);
    read(&mut e, pid, a + EXTENT + 300 * PAGE);
    assert_eq!(mapped_at_fault(&e), 0);
    assert_eq!(
        pte(&e, pid, a + EXTENT + 300 * PAGE),
        (Prot::READ, 0, false)
    );
    // Without a write, a read through such a mapping maps the file's superpage, read-only.
    let (mut e, pid, a, _) = cached_file_mapping("freebsd", Prot::RW);
    read(&mut e, pid, a + 300 * PAGE);
    assert_eq!(mapped_at_fault(&e), 1);
    assert_eq!(pte(&e, pid, a + 300 * PAGE), (Prot::READ, 1, false));
}

/// The superpage must lie inside the map entry (`vm_fault_soft_fast`'s rounddown / roundup
/// tests): a cached file's full extent mapped by an entry that starts one page into it, or ends
/// one page short of it, is mapped a base page at a time; by an entry that covers it, at once.
#[test]
fn the_superpage_must_lie_inside_the_entry() {
    for (skip, len, want) in [
        (PAGE, EXTENT - PAGE, 0),
        (0, EXTENT - PAGE, 0),
        (0, EXTENT, 1),
    ] {
        let (mut e, pid) = common::engine("skylake:mem=1G", "freebsd", None);
        e.os.page_cache = PageCache::Cold;
        let buf = e.mmap(pid, common::anon(2 * EXTENT)).unwrap();
        e.open(pid, FILE, EXTENT).unwrap();
        e.read(pid, FILE, 0, EXTENT, buf).unwrap();
        // A 2MB-aligned address inside a 4MB reservation of address space.
        let room = e.mmap(pid, common::anon(2 * EXTENT)).unwrap();
        let base = room.next_multiple_of(EXTENT);
        let req = MmapReq {
            addr: base + skip,
            len,
            prot: Prot::READ,
            flags: MapFlags::FILE.with(MapFlags::FIXED),
            file: FILE,
            offset: skip,
        };
        let a = e.mmap(pid, req).unwrap();
        assert_eq!(a, base + skip);
        let va = base + 300 * PAGE;
        read(&mut e, pid, va);
        assert_eq!(mapped_at_fault(&e), want, "skip {skip}, len {len}");
        assert_eq!(
            pte(&e, pid, va),
            (Prot::READ, want as u8, false),
            "skip {skip}"
        );
    }
}

/// Base mappings already in the range are replaced (`pmap_enter_pde` removes them, one TLB
/// invalidation): a child maps base pages of a shared extent while its reservation is not yet
/// full, the parent completes it, and the child's next fault there maps the superpage, charged
/// one PDE write and one invalidation beyond the handler.
#[test]
fn base_mappings_in_the_range_are_replaced() {
    let shared = MapFlags(MapFlags::ANON.0 | MapFlags::SHARED.0);
    let (mut e, parent) = common::engine("skylake:mem=1G", "freebsd", None);
    let mut req = common::anon(EXTENT);
    req.flags = shared;
    let a = e.mmap(parent, req).unwrap();
    for i in 0..PAGES - 1 {
        common::write(&mut e, parent, a + i * PAGE);
    }
    let child = e.fork(parent).unwrap();
    read(&mut e, child, a);
    assert_eq!(mapped_at_fault(&e), 0, "the reservation is not full yet");
    assert_eq!(
        common::mapped(&e, child),
        (5 * PAGE, 0),
        "the page and 4 ahead"
    );
    common::write(&mut e, parent, a + (PAGES - 1) * PAGE);
    let (f, fault_cycles) = (faults(&e), e.os.stats.cycles_fault);
    read(&mut e, child, a + 200 * PAGE);
    assert_eq!(faults(&e) - f, 1);
    assert_eq!(mapped_at_fault(&e), 1);
    assert_eq!(common::mapped(&e, child), (0, EXTENT));
    assert_eq!(pte(&e, child, a), (Prot::RW, 1, true));
    let c = &e.os.machine.cost;
    assert_eq!(
        e.os.stats.cycles_fault - fault_cycles,
        c.fault_cycles + c.pte_write_cycles + c.tlb_invalidate_cycles
    );
}
