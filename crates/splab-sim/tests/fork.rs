//! Scenario tests of fork's copy-on-write in the two object models of vm/fork.rs: FreeBSD's,
//! under the policies with reservations (the object shared by needs-copy entries, a shadow
//! object at an entry's first write, the collapse when one shadow is left), and the copy model
//! of the others (Linux, base). Every test runs with the invariant checks after each event,
//! which include "a page shared copy-on-write is mapped read-only".

mod common;

use splab_sim::engine::Engine;
use splab_sim::units::{AccessKind, Pid};
use splab_sim::vm::Vma;

const EXTENT: u64 = 2 << 20; // a 2MB superpage of skylake
const PAGE: u64 = 4096;

fn vma(e: &Engine, pid: Pid, va: u64) -> Vma {
    e.os.proc(pid).unwrap().vma_at(va).unwrap().clone()
}

fn read(e: &mut Engine, pid: Pid, va: u64) {
    e.access(pid, va, AccessKind::Read).unwrap();
}

/// Writes pages `0..n` of the region at `a`.
fn write_pages(e: &mut Engine, pid: Pid, a: u64, n: u64) {
    write_pages_of(e, pid, a, n, PAGE);
}

/// Writes pages `0..n` of `page` bytes of the region at `a`.
fn write_pages_of(e: &mut Engine, pid: Pid, a: u64, n: u64, page: u64) {
    for i in 0..n {
        common::write(e, pid, a + i * page);
    }
}

/// A `navarro` process with a 2MB region whose first 8 pages are written.
fn eight_pages_written() -> (Engine, Pid, u64) {
    let (mut e, parent) = common::engine("skylake", "navarro", None);
    let a = e.mmap(parent, common::anon(EXTENT)).unwrap();
    write_pages(&mut e, parent, a, 8);
    (e, parent, a)
}

/// A process with one 2MB-aligned anonymous extent, every page written: a 2MB superpage.
fn promoted_extent(policy: &str) -> (Engine, Pid, u64) {
    let (mut e, pid) = common::engine("skylake", policy, None);
    let a = e.mmap(pid, common::anon(EXTENT)).unwrap();
    assert_eq!(a % EXTENT, 0);
    for i in 0..EXTENT / PAGE {
        common::write(&mut e, pid, a + i * PAGE);
    }
    assert_eq!(common::mapped(&e, pid), (0, EXTENT), "{policy}");
    (e, pid, a)
}

/// seed 000 4.5 and 4.9 in FreeBSD's object model: the copies a process makes of a whole
/// extent after fork land in its shadow object, fill a reservation there and are promoted, in
/// the child and in the parent. (In the copy model the child's object held every page of the
/// extent already, so no reservation could be made and the copies stayed base pages.) The
/// child's exit leaves the parent's shadow alone over the shared object, which it absorbs:
/// every shared page was copied, so none moves.
#[test]
fn copies_of_a_whole_extent_after_fork_are_promoted() {
    for policy in ["navarro", "freebsd"] {
        let (mut e, parent, a) = promoted_extent(policy);
        let child = e.fork(parent).unwrap();
        assert!(vma(&e, parent, a).needs_copy && vma(&e, child, a).needs_copy);
        assert_eq!(vma(&e, parent, a).obj, vma(&e, child, a).obj, "{policy}");
        let cow = e.os.stats.faults.cow;
        for i in 0..EXTENT / PAGE {
            common::write(&mut e, child, a + i * PAGE);
        }
        assert_eq!(e.os.stats.faults.cow - cow, 512, "{policy}");
        assert_eq!(common::mapped(&e, child), (0, EXTENT), "{policy}: child");
        assert_eq!(e.os.fork.shadows, 1, "{policy}");
        let cv = vma(&e, child, a);
        assert!(cv.shadow.is_some() && !cv.needs_copy, "{policy}");
        // The parent still maps the shared frames (read-only), not the child's copies.
        assert_ne!(
            common::pfn_of(&e, parent, a),
            common::pfn_of(&e, child, a),
            "{policy}"
        );
        for i in 0..EXTENT / PAGE {
            common::write(&mut e, parent, a + i * PAGE);
        }
        assert_eq!(e.os.stats.faults.cow - cow, 1024, "{policy}");
        assert_eq!(common::mapped(&e, parent), (0, EXTENT), "{policy}: parent");
        assert_eq!(e.os.fork.shadows, 2, "{policy}");
        e.exit(child).unwrap();
        assert_eq!(
            (e.os.fork.collapses, e.os.fork.collapsed_pages),
            (1, 0),
            "{policy}"
        );
        let pv = vma(&e, parent, a);
        assert!(pv.shadow.is_none() && !pv.needs_copy, "{policy}");
        assert_eq!(e.os.obj(pv.obj).pages.len, 512, "{policy}");
        // The shared object's frames went back: the parent's 512 pages are all that is left.
        assert_eq!(e.os.footprint_frames(), 512, "{policy}");
    }
}

/// FreeBSD vm_object_shadow returns at once for an object with one reference left: after
/// fork and the child's exec, the parent's writes copy nothing and make no shadow; each only
/// grants write back.
#[test]
fn after_fork_and_exec_writes_only_grant_write() {
    let (mut e, parent, a) = promoted_extent("navarro");
    let child = e.fork(parent).unwrap();
    e.exec(child).unwrap();
    let (cow, protection) = (e.os.stats.faults.cow, e.os.stats.faults.protection);
    for i in 0..4 {
        common::write(&mut e, parent, a + i * PAGE);
    }
    assert_eq!(e.os.stats.faults.cow, cow);
    assert_eq!(e.os.stats.faults.protection - protection, 4);
    assert_eq!(e.os.fork.shadows, 0);
    let v = vma(&e, parent, a);
    assert!(v.shadow.is_none() && !v.needs_copy);
}

/// Reads after fork share the pages read-only, and a read of a page neither process had
/// touched zero-fills it into the shared object (FreeBSD's first object until a write shadows
/// the entry), so the other process reads the same frame. A write then copies it.
#[test]
fn reads_after_fork_share_pages_until_written() {
    let (mut e, parent) = common::engine("skylake", "navarro", None);
    let a = e.mmap(parent, common::anon(EXTENT)).unwrap();
    common::write(&mut e, parent, a);
    let child = e.fork(parent).unwrap();
    let page = a + 10 * PAGE;
    read(&mut e, child, page);
    read(&mut e, parent, page);
    let shared = common::pfn_of(&e, child, page).unwrap();
    assert_eq!(common::pfn_of(&e, parent, page), Some(shared));
    assert_eq!(
        e.os.stats.faults.zero_fill, 2,
        "page 0 before fork, page 10 after"
    );
    for pid in [parent, child] {
        let pte = e.os.proc(pid).unwrap().pmap.lookup(page / PAGE).unwrap();
        assert!(!pte.prot().writable());
    }
    common::write(&mut e, parent, page);
    assert_eq!(e.os.stats.faults.cow, 1);
    assert_ne!(common::pfn_of(&e, parent, page), Some(shared));
    assert_eq!(common::pfn_of(&e, child, page), Some(shared));
}

/// Unmapping a shared range in one process leaves the pages to the other (FreeBSD frees an
/// unmapped range's pages only of an object with one mapping, OBJ_ONEMAPPING), and the exit of
/// the last process frees them.
#[test]
fn unmapping_a_shared_range_leaves_the_pages_to_the_other_process() {
    let (mut e, parent, a) = eight_pages_written();
    let before: Vec<_> = (0..8)
        .map(|i| common::pfn_of(&e, parent, a + i * PAGE))
        .collect();
    let child = e.fork(parent).unwrap();
    e.munmap(child, a, EXTENT).unwrap();
    assert_eq!(e.os.obj(vma(&e, parent, a).obj).pages.len, 8);
    // The parent is the object's only user again: its writes copy nothing.
    write_pages(&mut e, parent, a, 8);
    assert_eq!(e.os.stats.faults.cow, 0);
    let after: Vec<_> = (0..8)
        .map(|i| common::pfn_of(&e, parent, a + i * PAGE))
        .collect();
    assert_eq!(before, after);
    e.exit(child).unwrap();
    e.exit(parent).unwrap();
    assert_eq!(e.os.footprint_frames(), 0);
}

/// A collapse moves the shared pages the shadow does not have into it, keeping their frames,
/// and later writes to them only grant write.
#[test]
fn a_collapse_moves_the_pages_not_copied_into_the_shadow() {
    let (mut e, parent, a) = eight_pages_written();
    let child = e.fork(parent).unwrap();
    common::write(&mut e, parent, a); // the parent's shadow, with its copy of page 0
    let frame7 = common::pfn_of(&e, parent, a + 7 * PAGE);
    e.exit(child).unwrap();
    assert_eq!((e.os.fork.collapses, e.os.fork.collapsed_pages), (1, 7));
    let v = vma(&e, parent, a);
    assert!(v.shadow.is_none());
    assert_eq!(e.os.obj(v.obj).pages.get(7), frame7);
    let cow = e.os.stats.faults.cow;
    common::write(&mut e, parent, a + 7 * PAGE);
    assert_eq!(e.os.stats.faults.cow, cow);
    assert_eq!(common::pfn_of(&e, parent, a + 7 * PAGE), frame7);
    assert_eq!(e.os.footprint_frames(), 8);
}

/// Without reservations the copy model stands: the child gets its own object holding the
/// parent's frames, no entry needs a copy, and no shadow is ever made.
#[test]
fn without_reservations_fork_copies_the_object() {
    for policy in ["base", "linux"] {
        let (mut e, parent) = common::engine("skylake", policy, None);
        let a = e.mmap(parent, common::anon(EXTENT)).unwrap();
        common::write(&mut e, parent, a);
        let child = e.fork(parent).unwrap();
        let (pv, cv) = (vma(&e, parent, a), vma(&e, child, a));
        assert_ne!(pv.obj, cv.obj, "{policy}");
        assert!(!pv.needs_copy && !cv.needs_copy, "{policy}");
        common::write(&mut e, child, a);
        common::write(&mut e, parent, a + PAGE);
        assert_eq!(e.os.fork.shadows, 0, "{policy}");
        assert!(vma(&e, child, a).shadow.is_none(), "{policy}");
    }
}

/// A 16MB Alpha with swap where a process wrote 4MB, forked, and then wrote 10MB more, so that
/// the page daemon paged out some of the pages it shares with its child.
struct Paged {
    e: Engine,
    parent: Pid,
    child: Pid,
    /// The shared region, the Alpha's page size, the shared object, and its pages paged out.
    a: u64,
    page: u64,
    shared: splab_sim::vm::object::ObjId,
    out: Vec<u64>,
}

fn shared_pages_paged_out() -> Paged {
    let (mut e, parent) = common::engine("alpha21264:mem=16M,swap=8M", "navarro", Some(12 << 20));
    let page = 8192;
    let a = e.mmap(parent, common::anon(4 << 20)).unwrap();
    write_pages_of(&mut e, parent, a, (4 << 20) / page, page);
    let child = e.fork(parent).unwrap();
    let shared = vma(&e, parent, a).obj;
    // The parent's other memory pushes the shared pages out.
    let b = e.mmap(parent, common::anon(10 << 20)).unwrap();
    write_pages_of(&mut e, parent, b, (10 << 20) / page, page);
    let out = (0..(4 << 20) / page)
        .filter(|&pi| e.os.backing.on_swap(shared, pi) && e.os.obj(shared).pages.get(pi).is_none())
        .collect();
    Paged {
        e,
        parent,
        child,
        a,
        page,
        shared,
        out,
    }
}

/// The page daemon evicts pages of an object shared since fork from both processes (one
/// object holds each frame, and the reverse map finds both entries), and the page read back
/// from swap is shared again.
#[test]
fn pages_shared_since_fork_are_paged_out_and_shared_again() {
    let Paged {
        mut e,
        parent,
        child,
        a,
        page,
        shared,
        out,
    } = shared_pages_paged_out();
    assert!(!out.is_empty(), "no shared page was paged out");
    let va = a + out[0] * page;
    for pid in [parent, child] {
        assert_eq!(common::pfn_of(&e, pid, va), None);
    }
    read(&mut e, child, va);
    read(&mut e, parent, va);
    let back = e.os.obj(shared).pages.get(out[0]);
    assert!(back.is_some());
    let pfn_of = |pid| {
        e.os.proc(pid)
            .unwrap()
            .pmap
            .lookup(va / page)
            .map(|p| p.pfn())
    };
    assert_eq!(pfn_of(parent), back);
    assert_eq!(pfn_of(child), back);
}

/// A shared anonymous mapping stays shared across fork, in either model: the child's write
/// goes to the parent's frame (no copy), and the child's exit leaves the parent's pages.
#[test]
fn a_shared_mapping_stays_shared_across_fork() {
    use splab_sim::vm::{MapFlags, MmapReq};
    for policy in ["navarro", "base"] {
        let (mut e, parent) = common::engine("skylake", policy, None);
        let req = MmapReq {
            flags: MapFlags::SHARED,
            ..common::anon(EXTENT)
        };
        let a = e.mmap(parent, req).unwrap();
        common::write(&mut e, parent, a);
        let child = e.fork(parent).unwrap();
        assert!(!vma(&e, child, a).needs_copy, "{policy}");
        common::write(&mut e, child, a);
        assert_eq!(e.os.stats.faults.cow, 0, "{policy}");
        assert_eq!(
            common::pfn_of(&e, child, a),
            common::pfn_of(&e, parent, a),
            "{policy}"
        );
        e.exit(child).unwrap();
        assert_eq!(e.os.obj(vma(&e, parent, a).obj).refs, 1, "{policy}");
        common::write(&mut e, parent, a + PAGE);
        assert_eq!(e.os.obj(vma(&e, parent, a).obj).pages.len, 2, "{policy}");
    }
}

/// A collapse takes only the pages the surviving entries reach: pages of the shared object
/// that the writer unmapped (kept for the other process, the object being shared) are freed
/// with it, not moved into the shadow.
#[test]
fn a_collapse_frees_the_pages_no_entry_reaches() {
    let (mut e, parent, a) = eight_pages_written();
    let child = e.fork(parent).unwrap();
    common::write(&mut e, parent, a); // the parent's shadow, with its copy of page 0
    e.munmap(parent, a + 4 * PAGE, EXTENT - 4 * PAGE).unwrap();
    e.exit(child).unwrap();
    // Pages 1-3 move; page 0 is the shadow's copy; pages 4-7 go.
    assert_eq!((e.os.fork.collapses, e.os.fork.collapsed_pages), (1, 3));
    assert_eq!(e.os.obj(vma(&e, parent, a).obj).pages.len, 4);
    assert_eq!(e.os.footprint_frames(), 4);
}

/// A shadow shared by the pieces of a split entry (mprotect cut it in three after its first
/// write) still absorbs the shared object when the other process exits: every entry mapping
/// the object has that one shadow.
#[test]
fn a_shadow_shared_by_split_entries_collapses() {
    let (mut e, parent, a) = eight_pages_written();
    let child = e.fork(parent).unwrap();
    common::write(&mut e, parent, a);
    e.mprotect(parent, a + 2 * PAGE, PAGE, splab_sim::units::Prot::READ)
        .unwrap();
    let shadows: Vec<_> = [a, a + 2 * PAGE, a + 3 * PAGE]
        .iter()
        .map(|&va| vma(&e, parent, va).shadow)
        .collect();
    assert!(shadows[0].is_some() && shadows.iter().all(|&s| s == shadows[0]));
    e.exit(child).unwrap();
    assert_eq!((e.os.fork.collapses, e.os.fork.collapsed_pages), (1, 7));
    for va in [a, a + 2 * PAGE, a + 3 * PAGE] {
        let v = vma(&e, parent, va);
        assert_eq!((v.obj, v.shadow), (shadows[0].unwrap(), None));
    }
}

/// A collapse keeps the shared object's pages that are on swap: their slots move to the
/// shadow, so the survivor reads them back (a major fault) rather than a zero page. The
/// shadow's reservation over the moved resident pages is broken (it could never fill).
#[test]
fn a_collapse_keeps_the_shared_pages_on_swap() {
    let Paged {
        mut e,
        parent,
        child,
        a,
        page,
        out,
        ..
    } = shared_pages_paged_out();
    assert!(out.len() >= 2, "{out:?}");
    // The parent's write gives it a shadow, with a reservation for its copy.
    common::write(&mut e, parent, a + out[0] * page);
    let broken = e.os.reserv.as_ref().unwrap().stats.broken;
    e.exit(child).unwrap();
    assert_eq!(e.os.fork.collapses, 1);
    assert!(e.os.reserv.as_ref().unwrap().stats.broken > broken);
    let (major, zero) = (e.os.stats.faults.major, e.os.stats.faults.zero_fill);
    read(&mut e, parent, a + out[1] * page);
    assert_eq!(e.os.stats.faults.major, major + 1);
    assert_eq!(e.os.stats.faults.zero_fill, zero);
}
