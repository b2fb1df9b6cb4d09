//! Map entries and placement (issue 10, defects 1 and 2 of the review): entries that become
//! alike again merge (FreeBSD vm_map_simplify_entry), and a file mapping's address is congruent
//! to its offset modulo the superpage size (FreeBSD pmap_align_superpage), so that both can be
//! promoted.

use splab_sim::engine::Engine;
use splab_sim::units::{MemOp, Pid, Prot};
use splab_sim::vm::{Advice, MapFlags, MmapReq};

mod common;

/// An engine with invariant checks after every event, and one process.
fn engine(machine: &str, policy: &str) -> (Engine, Pid) {
    common::engine(machine, policy, None)
}

fn map(e: &mut Engine, pid: Pid, len: u64, prot: Prot) -> u64 {
    e.mmap(
        pid,
        MmapReq {
            prot,
            ..MmapReq::anon(len)
        },
    )
    .unwrap()
}

/// Writes every base page of `[start, start + len)` in order.
fn write_pages(e: &mut Engine, pid: Pid, start: u64, len: u64) {
    let page = e.os.machine.base_size();
    e.access_run(pid, start, page as i64, len / page, MemOp::Store, 1)
        .unwrap();
}

fn entries(e: &Engine, pid: Pid) -> usize {
    e.os.proc(pid).unwrap().vmas.len()
}

const MB: u64 = 1 << 20;

/// mprotect(R) then mprotect(RW) of one page leaves one entry, and the region is promoted as if
/// nothing had happened.
#[test]
fn mprotect_and_back_merges_the_entry_again() {
    let (mut e, pid) = engine("alpha21264", "navarro");
    let a = map(&mut e, pid, 8 * MB, Prot::RW);
    let page = e.os.machine.base_size();
    e.mprotect(pid, a + 5 * page, page, Prot::READ).unwrap();
    assert_eq!(entries(&e, pid), 3, "mprotect of one page splits in three");
    e.mprotect(pid, a + 5 * page, page, Prot::RW).unwrap();
    assert_eq!(entries(&e, pid), 1, "the pieces are alike again");
    write_pages(&mut e, pid, a, 8 * MB);
    // Two fully populated 4MB reservations, each promoted to one 4MB superpage.
    assert_eq!(e.os.superpage_bytes(), 8 * MB);
}

/// Entries that differ do not merge: a different protection, or advice.
#[test]
fn unlike_neighbours_stay_apart() {
    let (mut e, pid) = engine("alpha21264", "navarro");
    let a = map(&mut e, pid, 8 * MB, Prot::RW);
    let page = e.os.machine.base_size();
    e.mprotect(pid, a, 4 * MB, Prot::READ).unwrap();
    assert_eq!(entries(&e, pid), 2);
    e.madvise(pid, a + 4 * MB, 2 * MB, Advice::NoHugePage)
        .unwrap();
    assert_eq!(entries(&e, pid), 3);
    // Same protection and advice again: the advised piece rejoins its right neighbour only
    // once both agree.
    e.madvise(pid, a + 6 * MB, 2 * MB, Advice::NoHugePage)
        .unwrap();
    assert_eq!(entries(&e, pid), 2);
    // Two separate mappings of the same protection are different objects: never merged.
    let b = map(&mut e, pid, 64 * page, Prot::RW);
    let c = map(&mut e, pid, 64 * page, Prot::RW);
    assert!(b.abs_diff(c) >= 64 * page);
    assert_eq!(entries(&e, pid), 4);
}

/// glibc grows a non-main malloc arena by mprotect-ing a PROT_NONE reservation read-write in
/// 132KB steps (HEAP_MAX_SIZE 64MB, grow_heap). The accessible part must stay one entry and get
/// the superpages one mapping of that size gets.
#[test]
fn arena_grown_by_mprotect_gets_the_superpages_of_one_mapping() {
    // 132KB on 4KB pages; the Alpha's pages are 8KB, so 17 of them.
    let step = 17 * 8192;
    let grown = 62 * MB / step * step;
    let run = |arena: bool| {
        let (mut e, pid) = engine("alpha21264", "navarro");
        let a = if arena {
            let a = map(&mut e, pid, 64 * MB, Prot::NONE);
            let mut top = 0;
            while top < grown {
                e.mprotect(pid, a, top + step, Prot::RW).unwrap();
                write_pages(&mut e, pid, a + top, step);
                top += step;
            }
            assert_eq!(entries(&e, pid), 2, "read-write part and PROT_NONE rest");
            a
        } else {
            let a = map(&mut e, pid, 64 * MB, Prot::RW);
            let mut top = 0;
            while top < grown {
                write_pages(&mut e, pid, a + top, step);
                top += step;
            }
            a
        };
        let _ = a;
        e.os.superpage_bytes()
    };
    let one = run(false);
    assert!(one >= 60 * MB, "one mapping: {one} superpage bytes");
    assert_eq!(run(true), one);
}

/// An 8MB file mapped from offset 8K: its address is congruent to 8K modulo 4MB, so the file's
/// second 4MB run, and every 512KB and 64KB run of the first that the mapping holds whole, are
/// promoted.
#[test]
fn file_mapping_is_placed_congruent_to_its_offset() {
    let (mut e, pid) = engine("alpha21264", "navarro");
    e.open_file(7, 8 * MB).unwrap();
    let off = 8 << 10;
    let len = 8 * MB - off;
    let a = e
        .mmap(
            pid,
            MmapReq {
                addr: 0,
                len,
                prot: Prot::READ,
                flags: MapFlags::FILE.with(MapFlags::SHARED),
                file: 7,
                offset: off,
            },
        )
        .unwrap();
    assert_eq!(a % (4 * MB), off, "address congruent to the offset");
    let page = e.os.machine.base_size();
    e.access_run(pid, a, page as i64, len / page, MemOp::Load, 1)
        .unwrap();
    // Superpages: the file's [4M, 8M) as one 4MB page, and [512K, 4M) as seven 512KB pages,
    // and [64K, 512K) as seven 64KB pages; [8K, 64K) stays in base pages.
    assert_eq!(e.os.superpage_bytes(), len - (64 << 10) + off);
}

/// The brk heap is an ordinary entry: split by mprotect and made alike again, it is one entry;
/// a stack entry (grows down) is never merged (FreeBSD's no-merge mask).
#[test]
fn heap_merges_again_and_a_stack_never_does() {
    let (mut e, pid) = engine("alpha21264", "navarro");
    let page = e.os.machine.base_size();
    let start = e.current_brk(pid).unwrap();
    e.brk(pid, start + 64 * page).unwrap();
    let heap_entries = |e: &Engine| {
        let p = e.os.proc(pid).unwrap();
        p.vmas.range(start..start + 64 * page).count()
    };
    assert_eq!(heap_entries(&e), 1);
    e.mprotect(pid, start + 8 * page, page, Prot::READ).unwrap();
    assert_eq!(heap_entries(&e), 3);
    e.mprotect(pid, start + 8 * page, page, Prot::RW).unwrap();
    assert_eq!(heap_entries(&e), 1, "the heap is whole again");
    // The heap still grows in place afterwards.
    e.brk(pid, start + 96 * page).unwrap();
    assert_eq!(
        e.os.proc(pid)
            .unwrap()
            .vmas
            .range(start..start + 96 * page)
            .count(),
        1
    );
    let s = e
        .mmap(
            pid,
            MmapReq {
                addr: 0,
                len: 32 * page,
                prot: Prot::RW,
                flags: MapFlags::STACK,
                file: 0,
                offset: 0,
            },
        )
        .unwrap();
    let before = entries(&e, pid);
    e.mprotect(pid, s + 4 * page, page, Prot::READ).unwrap();
    e.mprotect(pid, s + 4 * page, page, Prot::RW).unwrap();
    assert_eq!(entries(&e, pid), before + 2, "stack pieces stay apart");
}

/// An madvise over a range that spans a gap splits the entries at both ends and applies the
/// advice; the pieces on both sides of the gap are alike again and merge back.
#[test]
fn madvise_across_a_gap_leaves_each_mapping_whole() {
    let (mut e, pid) = engine("alpha21264", "navarro");
    let page = e.os.machine.base_size();
    let a = map(&mut e, pid, 64 * page, Prot::RW);
    let mid = map(&mut e, pid, 64 * page, Prot::RW);
    let b = map(&mut e, pid, 64 * page, Prot::RW);
    e.munmap(pid, mid, 64 * page).unwrap();
    let (lo, hi) = (a.min(b), a.max(b));
    assert!(hi > lo + 64 * page, "a gap between the two mappings");
    write_pages(&mut e, pid, lo, 64 * page);
    write_pages(&mut e, pid, hi, 64 * page);
    assert_eq!(entries(&e, pid), 2);
    // From the middle of the lower mapping to the middle of the upper one.
    e.madvise(
        pid,
        lo + 32 * page,
        hi + 32 * page - (lo + 32 * page),
        Advice::DontNeed,
    )
    .unwrap();
    assert_eq!(entries(&e, pid), 2, "both mappings whole again");
}
