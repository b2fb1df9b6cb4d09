//! A recorded placement (vm/placement.rs): queued frames back the next base-page faults in
//! order, a frame no longer free is skipped and counted, a frame beyond memory folds into it,
//! and under nested paging with 4KB host pages a chase over pages scattered one per 2MB range
//! makes more host-walk references than the same chase on contiguous frames (counts, exact
//! where the mechanism makes them exact).

use splab_sim::engine::{CheckMode, Engine};
use splab_sim::hw::Machine;
use splab_sim::policy::Policy;
use splab_sim::units::{Access, AccessKind, MemOp, Pid};
use splab_sim::vm::{Advice, MmapReq};

const PAGE: u64 = 4096;
const HUGE: u64 = 2 << 20;

fn engine(machine: &str, policy: &str, check: CheckMode) -> Engine {
    let m = Machine::from_spec(machine).unwrap();
    let mut p = Policy::from_spec(policy).unwrap();
    p.resolve(&m).unwrap();
    Engine::new(m, p, check, None)
}

/// A 2MB-aligned anonymous region of `pages` 4KB pages, MADV_NOHUGEPAGE.
fn region(e: &mut Engine, pid: Pid, pages: u64) -> u64 {
    let len = pages * PAGE + HUGE;
    let raw = e.mmap(pid, MmapReq::anon(len)).unwrap();
    e.madvise(pid, raw, len, Advice::NoHugePage).unwrap();
    raw.div_ceil(HUGE) * HUGE
}

fn frame_of(e: &Engine, pid: Pid, va: u64) -> u64 {
    e.os.proc(pid)
        .unwrap()
        .pmap
        .lookup(va / PAGE)
        .expect("a mapped page")
        .pfn()
        .0
}

#[test]
fn queued_frames_back_the_next_faults_in_order() {
    let mut e = engine("skylake:mem=1G", "linux-madvise", CheckMode::Full);
    let frames = (1u64 << 30) / PAGE;
    let pid = e.spawn().unwrap();
    let base = region(&mut e, pid, 8);
    // Page 0 takes a frame, which is then queued again for page 2: no longer free, skipped.
    e.access(pid, base, AccessKind::Write).unwrap();
    let taken = frame_of(&e, pid, base);
    let want = [70_001u64, 3 * 512 + 7, taken, 200_000, frames + 9, 131_071];
    // Queued in two calls: each returns what it added.
    assert_eq!(e.place_frames(want[..4].iter().copied()), 4);
    assert_eq!(e.place_frames(want[4..].iter().copied()), 2);
    assert_eq!(e.os.placement.queued(), 6);
    for i in 1..6 {
        e.access(pid, base + i * PAGE, AccessKind::Write).unwrap();
    }
    // Page 1: 70,001; page 2: 1,543; the taken frame skipped, so page 3: 200,000; page 4: the
    // frame beyond 1 GiB folded to 9; page 5: 131,071.
    let got: Vec<u64> = (1..6).map(|i| frame_of(&e, pid, base + i * PAGE)).collect();
    assert_eq!(got, vec![70_001, 3 * 512 + 7, 200_000, 9, 131_071]);
    assert_eq!(e.os.placement.placed, 5);
    assert_eq!(e.os.placement.unavailable, 1);
    assert_eq!(e.os.placement.queued(), 0);
    // The queue is empty: the next fault allocates as before (not one of the placed frames).
    e.access(pid, base + 6 * PAGE, AccessKind::Write).unwrap();
    let next = frame_of(&e, pid, base + 6 * PAGE);
    assert!(!got.contains(&next) && next != taken);
    assert_eq!(e.os.placement.placed, 5);
    e.final_check().unwrap();
}

/// One line per page, `pages` pages in a random order (a fixed permutation), chased `rounds`
/// times as a dependent chain; returns the host dimension's walk references.
fn chase_host_refs(placement: Option<Vec<u64>>, pages: u64) -> (u64, u64) {
    let mut e = engine("skylake:nested=4K,mem=8G", "linux-madvise", CheckMode::Off);
    let pid = e.spawn().unwrap();
    let base = region(&mut e, pid, pages);
    if let Some(p) = placement {
        assert_eq!(e.place_frames(p), pages as usize);
    }
    e.access_run(pid, base, PAGE as i64, pages, MemOp::Store, 1)
        .unwrap();
    let placed = e.os.placement.placed;
    // A full-period walk through the pages (odd multiplier mod a power of two).
    let order: Vec<u64> = (0..pages).map(|i| (i * 2_654_435_761) % pages).collect();
    let hops: Vec<Access> = (0..4)
        .flat_map(|_| order.iter())
        .map(|&i| Access::new(base + i * PAGE, MemOp::Load, 1, 1))
        .collect();
    let before = e.os.hw.walker.nested_stats().walk_refs_host;
    e.accesses(pid, &hops).unwrap();
    (
        e.os.hw.walker.nested_stats().walk_refs_host - before,
        placed,
    )
}

#[test]
fn scattered_frames_cost_more_host_walk_references() {
    let pages = 2048u64;
    // Contiguous frames (what a fresh machine hands out anyway), placed explicitly, against one
    // page per 2MB range (frame 512 * i + 5): each page's host translation then needs its own
    // host leaf table, which the host's paging-structure caches cannot hold for 2048 ranges.
    let contiguous: Vec<u64> = (0..pages).map(|i| (1 << 18) + i).collect();
    let scattered: Vec<u64> = (0..pages).map(|i| (1 << 18) + 512 * i + 5).collect();
    let (c, cp) = chase_host_refs(Some(contiguous), pages);
    let (s, sp) = chase_host_refs(Some(scattered), pages);
    assert_eq!((cp, sp), (pages, pages), "every page placed");
    assert!(s > c, "scattered {s} host references, contiguous {c}");
}
