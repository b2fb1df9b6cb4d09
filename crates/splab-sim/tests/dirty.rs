//! seed 000 4.7 "Paging out dirty superpages" and 6.7 "Dirty superpages": the policy option
//! `dirty=trap|whole|hash`, msync, and the `filedirty` workload (vm/dirty.rs).
//!
//! The scenario tests say `prefault=off` so that each page is entered by its own fault; the 6.7
//! acceptance runs the preset as it is. (With FreeBSD's 4 + 4 prefault the neighbours of a read
//! fault are entered read-only while the faulting page of a shared writable file mapping is
//! entered writable; promotion once refused such an extent, so a read scan promoted nothing.
//! A clean page's write permission no longer counts, as in FreeBSD's pmap_promote_pde.)

mod common;
use common::{engine, run};
use splab_sim::engine::Engine;
use splab_sim::units::{AccessKind, Pid, Prot};
use splab_sim::vm::{MapFlags, MmapReq};

const PAGE: u64 = 8192;
/// One base page (8K) through SHA-1 on the 21264: 128 blocks and the padding block, at 557
/// cycles a block (`sha1_block_cycles` in machines/alpha21264.toml).
const HASH_PAGE: u64 = 129 * 557;

fn shared_file(file: u32, len: u64) -> MmapReq {
    MmapReq {
        addr: 0,
        len,
        prot: Prot::RW,
        flags: MapFlags::FILE.with(MapFlags::SHARED),
        file,
        offset: 0,
    }
}

/// A 4MB file mapped shared on the 21264, every page read: one 4MB superpage.
fn promoted_file(policy: &str) -> (Engine, Pid, u64) {
    let (mut e, pid) = engine("alpha21264", policy, None);
    e.open_file(9, 4 << 20).unwrap();
    let f = e.mmap(pid, shared_file(9, 4 << 20)).unwrap();
    for i in 0..512 {
        e.access(pid, f + i * PAGE, AccessKind::Read).unwrap();
    }
    assert_eq!(e.os.stats.promotions[3], 1, "the 4MB superpage");
    assert_eq!(size_class(&e, pid, f), 3);
    (e, pid, f)
}

/// Demotions of 64K, 512K and 4M superpages.
fn demotions(r: &splab_sim::report::Report) -> Vec<u64> {
    r.pages
        .demotions_by_size
        .values()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

fn size_class(e: &Engine, pid: Pid, va: u64) -> u8 {
    e.os.procs[&pid.0].pmap.lookup(va / PAGE).unwrap().size().0
}

/// seed 000 6.7 on the 21264: a 100MB file read (25 4MB superpages), every 512th page written,
/// msync. Demoting on the write (the default) writes one base page per superpage; without
/// demoting, whole superpages: 512 times the I/O. The hash digests find the same 25 pages.
#[test]
fn filedirty_without_demotion_writes_512_times_the_bytes() {
    let w = "filedirty";
    let trap = run("alpha21264", "navarro", w);
    let whole = run("alpha21264", "navarro:dirty=whole", w);
    let hash = run("alpha21264", "navarro:dirty=hash", w);
    // The read scan promotes the whole 100MB file: 25 4MB superpages, prefault or not.
    for r in [&trap, &whole, &hash] {
        assert_eq!(r.pages.promotions_by_size["4M"].as_u64(), Some(25));
    }
    // ceil(100M / 8K / 512) = 25 pages written, one per superpage.
    assert_eq!(trap.memory.io_write_bytes, 25 * PAGE);
    assert_eq!(trap.memory.paging.msync_written, 25);
    assert_eq!(whole.memory.io_write_bytes, 100 << 20);
    assert_eq!(whole.memory.paging.msync_written, 12800);
    assert!(whole.memory.io_write_bytes >= 100 * trap.memory.io_write_bytes);
    assert_eq!(hash.memory.io_write_bytes, trap.memory.io_write_bytes);
    let pg = &hash.memory.paging;
    assert_eq!((pg.hash_written, pg.hash_clean), (25, 12800 - 25));
    // A digest of every page as it arrives from the (warm) page cache and again at msync.
    assert_eq!(pg.hash_cycles, 2 * 12800 * HASH_PAGE);
    for r in [&trap, &whole] {
        assert_eq!(r.memory.paging.hash_cycles, 0);
        assert_eq!(r.memory.io_read_bytes, 0);
    }
    // The default traps once per written superpage (and demotes it); the others take no trap.
    // (Demotion counts do not tell them apart: exit demotes every superpage incrementally down
    // to base pages, seed 000 6.6, which adds up to the same totals.)
    assert_eq!(trap.faults.protection, 25);
    assert_eq!(whole.faults.protection, 0);
    assert_eq!(hash.faults.protection, 0);
    assert_eq!(demotions(&trap), demotions(&whole));
    assert!(whole.time.cycles_total > trap.time.cycles_total);
}

/// The default (seed 000 4.7): the write traps and demotes down to the written base page, so
/// msync writes that page alone; once every base page is dirty the superpage comes back.
#[test]
fn trap_demotes_on_write_and_repromotes_once_all_pages_are_dirty() {
    let (mut e, pid, f) = promoted_file("navarro:prefault=off");
    e.access(pid, f + 3 * PAGE, AccessKind::Write).unwrap();
    assert_eq!(e.os.stats.demotions[1..], [1, 1, 1]);
    assert_eq!(size_class(&e, pid, f + 3 * PAGE), 0);
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, PAGE);
    for i in 0..512 {
        e.access(pid, f + i * PAGE, AccessKind::Write).unwrap();
    }
    assert_eq!(e.os.stats.promotions[3], 2, "repromoted to 4MB");
    assert_eq!(size_class(&e, pid, f), 3);
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, PAGE + (4 << 20));
    assert_eq!(e.os.dirty.stats.msync_written, 513);
    assert_eq!(e.os.dirty.stats.msyncs, 2);
}

/// `dirty=whole` (seed 000 6.7): the superpage stays, and its write-out writes all of it; once
/// written it is clean (a second msync writes nothing) until written again.
#[test]
fn whole_keeps_the_superpage_and_writes_it_entire() {
    let (mut e, pid, f) = promoted_file("navarro:prefault=off,dirty=whole");
    e.access(pid, f + 3 * PAGE, AccessKind::Write).unwrap();
    assert_eq!(e.os.stats.demotions[1..], [0, 0, 0]);
    assert_eq!(size_class(&e, pid, f + 3 * PAGE), 3);
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, 4 << 20);
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(
        e.os.stats.io_write_bytes,
        4 << 20,
        "clean after the write-out"
    );
    // msync of one page of a dirty superpage writes the superpage (one dirty bit).
    e.access(pid, f + 100 * PAGE, AccessKind::Write).unwrap();
    e.msync(pid, f + 500 * PAGE, PAGE).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, 8 << 20);
    assert_eq!(e.os.dirty.stats.hash_cycles, 0);
}

/// `dirty=hash` (seed 000 4.7): the superpage stays; at msync each base page's digest is
/// recomputed and only the modified pages are written.
#[test]
fn hash_writes_only_the_modified_base_pages() {
    let (mut e, pid, f) = promoted_file("navarro:prefault=off,dirty=hash");
    assert_eq!(
        e.os.dirty.stats.hash_cycles,
        512 * HASH_PAGE,
        "digests on arrival"
    );
    e.access(pid, f + 3 * PAGE, AccessKind::Write).unwrap();
    e.access(pid, f + 3 * PAGE + 8, AccessKind::Write).unwrap();
    assert_eq!(size_class(&e, pid, f + 3 * PAGE), 3);
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, PAGE);
    let d = &e.os.dirty.stats;
    assert_eq!((d.hash_written, d.hash_clean), (1, 511));
    assert_eq!(d.hash_cycles, 1024 * HASH_PAGE);
    // Writes through the now-clean superpage to two other pages, one of them twice.
    for i in [7, 300, 7] {
        e.access(pid, f + i * PAGE, AccessKind::Write).unwrap();
    }
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, 3 * PAGE);
    let d = &e.os.dirty.stats;
    assert_eq!((d.hash_written, d.hash_clean), (3, 1021));
    assert_eq!(d.hash_cycles, 1536 * HASH_PAGE);
    // Nothing dirty: nothing hashed, nothing written.
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(e.os.dirty.stats.hash_cycles, 1536 * HASH_PAGE);
    assert_eq!(e.os.stats.io_write_bytes, 3 * PAGE);
}

/// The page daemon evicts a dirty 64K superpage of a file (one base page written) under memory
/// pressure: `whole` writes all 8 base pages, `hash` and the default only the written one.
#[test]
fn page_daemon_writes_out_a_dirty_superpage_by_mode() {
    for (mode, written, clean) in [("", 1, 0), (",dirty=whole", 8, 0), (",dirty=hash", 1, 7)] {
        let policy = format!("navarro:prefault=off,sizes=64K{mode}");
        let (mut e, pid) = engine("alpha21264:mem=16M", &policy, Some(2 << 20));
        e.open_file(9, 8 * PAGE).unwrap();
        let f = e.mmap(pid, shared_file(9, 8 * PAGE)).unwrap();
        for i in 0..8 {
            e.access(pid, f + i * PAGE, AccessKind::Read).unwrap();
        }
        assert_eq!(e.os.stats.promotions[1], 1, "{policy}: the 64K superpage");
        e.access(pid, f, AccessKind::Write).unwrap();
        // Anonymous memory pushes every page of the file out.
        let a = e.mmap(pid, common::anon(5 << 20)).unwrap();
        for i in 0..(5 << 20) / PAGE {
            e.access(pid, a + i * PAGE, AccessKind::Write).unwrap();
        }
        let obj = e.os.files[&9].obj;
        assert_eq!(
            e.os.obj(obj).pages.range(0, 8).len(),
            0,
            "{policy}: all evicted"
        );
        assert_eq!(e.os.backing.stats.pageouts_file, written, "{policy}");
        assert_eq!(e.os.dirty.stats.hash_clean, clean, "{policy}");
    }
}

/// msync's bad input is an error, never a panic; private and anonymous memory has nothing to
/// write.
#[test]
fn msync_errors_and_mappings_without_a_file() {
    let (mut e, pid) = engine("alpha21264", "navarro:prefault=off,dirty=whole", None);
    let a = e.mmap(pid, common::anon(1 << 20)).unwrap();
    for i in 0..128 {
        e.access(pid, a + i * PAGE, AccessKind::Write).unwrap();
    }
    e.msync(pid, a, 1 << 20).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, 0);
    let err = e.msync(pid, a + 1, PAGE).unwrap_err().to_string();
    assert!(err.contains("msync") && err.contains("aligned"), "{err}");
    let err = e.msync(pid, a, 2 << 20).unwrap_err().to_string();
    assert!(err.contains("msync") && err.contains("no mapping"), "{err}");
    assert!(e.msync(Pid(77), a, PAGE).is_err());
    assert!(e.msync(pid, a, 0).is_err());
    assert_eq!(e.os.dirty.stats.msyncs, 1);
}

#[test]
fn filedirty_parameters() {
    use splab_sim::workload::parse;
    assert_eq!(
        parse("filedirty").unwrap().describe(),
        "filedirty:size=100M,every=512"
    );
    assert_eq!(
        parse("filedirty:size=4M,every=8").unwrap().describe(),
        "filedirty:size=4M,every=8"
    );
    for bad in ["filedirty:every=0", "filedirty:size=0", "filedirty:pages=3"] {
        assert!(parse(bad).is_err(), "{bad}");
    }
    // Small runs: size rounds up to base pages, the first page of every `every` is written.
    let r = run(
        "alpha21264",
        "navarro:prefault=off,dirty=whole",
        "filedirty:size=64K,every=3",
    );
    assert_eq!(r.accesses.writes, 3);
    assert_eq!(r.memory.io_write_bytes, 64 << 10, "one dirty 64K superpage");
}

/// What msync costs: the writes the caller waits for, contiguous pages in one request of at
/// most 16 (FreeBSD vm_object_page_collect_flush, vm_pageout_page_count), and the kernel work
/// of digests and of clearing each dirty mapping's bit (a PTE write and a TLB invalidation).
#[test]
fn msync_charges_clustered_writes_and_its_kernel_work() {
    let clear = 29 + 20; // the 21264's pte_write_cycles + tlb_invalidate_cycles
                         // trap: one base page, one request; its base mapping's dirty bit cleared.
    let (mut e, pid, f) = promoted_file("navarro:prefault=off");
    e.access(pid, f + 3 * PAGE, AccessKind::Write).unwrap();
    let (io, k) = (e.os.stats.cycles_io, e.os.stats.cycles_kernel);
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(e.os.stats.cycles_io - io, e.os.machine.io_cycles(PAGE));
    assert_eq!(e.os.stats.cycles_kernel - k, clear);
    // Nothing dirty any more: no request, no work.
    let (io, k) = (e.os.stats.cycles_io, e.os.stats.cycles_kernel);
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!((e.os.stats.cycles_io, e.os.stats.cycles_kernel), (io, k));

    // whole: 512 contiguous pages, 32 requests of 16.
    let (mut e, pid, f) = promoted_file("navarro:prefault=off,dirty=whole");
    e.access(pid, f, AccessKind::Write).unwrap();
    let (io, k) = (e.os.stats.cycles_io, e.os.stats.cycles_kernel);
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(
        e.os.stats.cycles_io - io,
        32 * e.os.machine.io_cycles(16 * PAGE)
    );
    assert_eq!(e.os.stats.cycles_kernel - k, clear);

    // hash: pages 7 and 8 in one request, 300 in another; 512 digests recomputed.
    let (mut e, pid, f) = promoted_file("navarro:prefault=off,dirty=hash");
    for i in [7, 8, 300, 7] {
        e.access(pid, f + i * PAGE, AccessKind::Write).unwrap();
    }
    // Every write moved its page's content version on.
    let version = |e: &Engine, i: u64| {
        let pfn = e.os.procs[&pid.0].pmap.lookup(f / PAGE + i).unwrap().pfn();
        e.os.dirty.version(pfn)
    };
    assert_eq!((version(&e, 7), version(&e, 8), version(&e, 9)), (2, 1, 0));
    let (io, k) = (e.os.stats.cycles_io, e.os.stats.cycles_kernel);
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(
        e.os.stats.cycles_io - io,
        e.os.machine.io_cycles(2 * PAGE) + e.os.machine.io_cycles(PAGE)
    );
    assert_eq!(e.os.stats.cycles_kernel - k, 512 * HASH_PAGE + clear);
    assert_eq!(e.os.dirty.stats.msync_written, 3);
}

/// msync covers only what it is given and stops at a hole between mappings (ENOMEM); a private
/// file mapping writes nothing to its file.
#[test]
fn msync_ranges_holes_and_private_mappings() {
    let (mut e, pid) = engine("alpha21264", "base", None);
    e.open_file(9, 64 * PAGE).unwrap();
    let f = e.mmap(pid, shared_file(9, 64 * PAGE)).unwrap();
    for i in [0, 10, 63] {
        e.access(pid, f + i * PAGE, AccessKind::Write).unwrap();
    }
    e.msync(pid, f + 10 * PAGE, PAGE).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, PAGE, "page 10 alone");
    e.msync(pid, f + 11 * PAGE, 53 * PAGE).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, 2 * PAGE, "then page 63");
    // Two mappings with a hole between them.
    e.munmap(pid, f + 20 * PAGE, PAGE).unwrap();
    let err = e.msync(pid, f, 64 * PAGE).unwrap_err().to_string();
    assert!(err.contains("no mapping"), "{err}");
    assert_eq!(
        e.os.stats.io_write_bytes,
        2 * PAGE,
        "nothing written on error"
    );
    e.msync(pid, f + 21 * PAGE, 43 * PAGE).unwrap();
    e.msync(pid, f, 20 * PAGE).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, 3 * PAGE, "page 0");
    // A private mapping's writes go to its own copies, never to the file.
    let mut req = shared_file(9, 64 * PAGE);
    req.flags = MapFlags::FILE;
    let p = e.mmap(pid, req).unwrap();
    e.access(pid, p + 5 * PAGE, AccessKind::Write).unwrap();
    e.msync(pid, p, 64 * PAGE).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, 3 * PAGE);
}

/// FreeBSD with `dirty=whole` keeps a written superpage (no write-protect trick) and writes it
/// out whole; with its default it demotes and writes the page.
#[test]
fn freebsd_dirty_whole_keeps_the_superpage() {
    for (policy, bytes) in [
        ("freebsd:prefault=off", 8192),
        ("freebsd:prefault=off,dirty=whole", 64 << 10),
    ] {
        let (mut e, pid) = engine("alpha21264", policy, None);
        e.open_file(9, 64 << 10).unwrap();
        let f = e.mmap(pid, shared_file(9, 64 << 10)).unwrap();
        for i in 0..8 {
            e.access(pid, f + i * PAGE, AccessKind::Read).unwrap();
        }
        assert_eq!(e.os.stats.promotions[1], 1, "{policy}");
        e.access(pid, f + PAGE, AccessKind::Write).unwrap();
        e.msync(pid, f, 64 << 10).unwrap();
        assert_eq!(e.os.stats.io_write_bytes, bytes, "{policy}");
    }
}

/// A private mapping of a file beside a shared one: msync cleans the file's pages through its
/// shared mappings alone (FreeBSD vm_map_sync skips entries that are not shared file mappings;
/// vm_object_page_clean looks at the object's pages and their shared mappings). An msync of the
/// private range writes nothing, though the shared mapping dirtied a page of the same file; an
/// msync of the shared range writes that page, never the page the private mapping wrote (its
/// own copy), even where the file's page is resident.
#[test]
fn msync_writes_through_shared_mappings_only() {
    let (mut e, pid) = engine("alpha21264", "base", None);
    e.open_file(9, 64 * PAGE).unwrap();
    let s = e.mmap(pid, shared_file(9, 64 * PAGE)).unwrap();
    let mut req = shared_file(9, 64 * PAGE);
    req.flags = MapFlags::FILE;
    let p = e.mmap(pid, req).unwrap();
    e.access(pid, s + 5 * PAGE, AccessKind::Read).unwrap();
    e.access(pid, p + 5 * PAGE, AccessKind::Write).unwrap();
    e.access(pid, s + 9 * PAGE, AccessKind::Write).unwrap();
    e.msync(pid, p, 64 * PAGE).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, 0, "a private range: nothing");
    e.msync(pid, s, 64 * PAGE).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, PAGE, "page 9 alone");
    assert_eq!(e.os.dirty.stats.msync_written, 1);
    assert_eq!(e.os.dirty.stats.msyncs, 2);
}

/// vm_object_page_clean looks at each shared mapping of the object only over the pages it maps:
/// a mapping of the file's first 8 pages, followed in the address space by another mapping of
/// the same file (pages 32..40) with a dirty page, contributes nothing beyond its own end. An
/// msync of the whole file writes that dirty page 32 alone, not page 8 (resident and clean)
/// that the first mapping's 9th page would be.
#[test]
fn msync_looks_at_each_mapping_over_its_own_pages() {
    let (mut e, pid) = engine("alpha21264", "base", None);
    e.open_file(9, 64 * PAGE).unwrap();
    let s = e.mmap(pid, shared_file(9, 64 * PAGE)).unwrap();
    let fixed = |addr: u64, len: u64, offset: u64| MmapReq {
        addr,
        len,
        prot: Prot::RW,
        flags: MapFlags::FILE.with(MapFlags::SHARED).with(MapFlags::FIXED),
        file: 9,
        offset,
    };
    let t = 1 << 30;
    assert_eq!(e.mmap(pid, fixed(t, 8 * PAGE, 0)).unwrap(), t);
    let x = t + 8 * PAGE;
    assert_eq!(e.mmap(pid, fixed(x, 8 * PAGE, 32 * PAGE)).unwrap(), x);
    e.access(pid, s + 8 * PAGE, AccessKind::Read).unwrap();
    e.access(pid, x, AccessKind::Write).unwrap();
    e.msync(pid, s, 64 * PAGE).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, PAGE, "page 32 alone");
    assert_eq!(e.os.dirty.stats.msync_written, 1);
}

/// pmap_clear_modify shoots down the translations of the mapping whose dirty bit it cleared,
/// and no others: a page of another mapping below the file's keeps its TLB entry through the
/// msync (its next access hits).
#[test]
fn msync_invalidates_only_the_cleared_mappings_translations() {
    let (mut e, pid, f) = promoted_file("navarro:prefault=off,dirty=whole");
    let mut req = common::anon(PAGE);
    req.addr = 16 << 20;
    req.flags = req.flags.with(MapFlags::FIXED);
    let a = e.mmap(pid, req).unwrap();
    assert!(a < f);
    e.access(pid, a, AccessKind::Write).unwrap();
    e.access(pid, f, AccessKind::Write).unwrap();
    e.msync(pid, f, 4 << 20).unwrap();
    assert_eq!(e.os.stats.io_write_bytes, 4 << 20);
    let misses = |e: &Engine| e.os.hw.tlb.stats().iter().map(|l| l.misses).sum::<u64>();
    let before = misses(&e);
    e.access(pid, a, AccessKind::Read).unwrap();
    assert_eq!(misses(&e), before, "a hit");
    // The superpage's own translation went: its next access misses.
    e.access(pid, f, AccessKind::Read).unwrap();
    assert!(misses(&e) > before);
}
