//! The page daemon and the backing store (seed 000 4.6 and 5.1; FreeBSD vm_pageout.c): memory
//! twice the machine's completes by paging, clean pages are dropped without I/O, dirty ones are
//! written once, evicting a page of a superpage demotes it incrementally, and without swap (or
//! without the daemon) memory running out is still an error that says why.

mod common;

use common::{anon, engine, run, try_run};
use splab_sim::units::{AccessKind, Prot};
use splab_sim::vm::{MapFlags, MmapReq};
use splab_sim::{RunSpec, SimError};

/// Issue 10 acceptance: a workload whose footprint is twice physical memory completes,
/// swapping, with page-outs counted and every invariant checked after every event.
#[test]
fn twice_memory_completes_by_swapping_with_every_invariant() {
    let r = splab_sim::run(&RunSpec {
        machine: "alpha21264:mem=32M".into(),
        policy: "navarro".into(),
        workload: "stride:size=64M,stride=8K,op=write,passes=2".into(),
        seed: 1,
        check: true.into(),
        free_bytes: None,
        page_cache: Default::default(),
        dump_reservations: false,
    })
    .unwrap();
    let pg = &r.memory.paging;
    let page = 8192;
    assert!(pg.pageouts_swap > 0 && pg.pageins_swap > 0, "{pg:?}");
    // Every page written out and read back is counted as I/O, and nothing else is.
    assert_eq!(
        r.memory.io_write_bytes,
        (pg.pageouts_swap + pg.pageouts_file) * page
    );
    assert_eq!(
        r.memory.io_read_bytes,
        (pg.pageins_swap + pg.pageins_file) * page
    );
    // The second pass reads back what the first wrote out; never more than is on swap.
    assert!(pg.pageins_swap <= pg.pageouts_swap, "{pg:?}");
    assert!(pg.swap_peak_bytes <= pg.swap_bytes && pg.swap_peak_bytes > 0);
    assert!(r.memory.footprint_peak_bytes <= 32 << 20);
    assert_eq!(r.faults.major, pg.pageins_swap);
    // Superpages were built and, to evict their pages, demoted.
    assert!(pg.evict_demotions > 0, "{pg:?}");
}

/// Pages only read (zero pages never written) are clean: the daemon drops them without
/// writing, and a later touch zero-fills again rather than reading anything.
#[test]
fn clean_pages_are_dropped_without_io() {
    let r = run(
        "alpha21264:mem=32M",
        "base",
        "stride:size=64M,stride=8K,op=read,rounds=2",
    );
    let pg = &r.memory.paging;
    assert!(pg.cached > 0 && pg.freed > 0, "{pg:?}");
    assert_eq!((pg.laundered, pg.pageouts_swap, pg.pageins_swap), (0, 0, 0));
    assert_eq!((r.memory.io_write_bytes, r.memory.io_read_bytes), (0, 0));
    // Both rounds zero-fill every page: 8192 pages each.
    assert_eq!(r.faults.zero_fill, 2 * 8192);
}

/// A dirty page is written out once; read back and evicted again while clean, it keeps its
/// swap copy and costs no second write (FreeBSD keeps the swap block of a clean page).
#[test]
fn a_clean_page_with_a_swap_copy_is_not_written_again() {
    let (mut e, pid) = engine("alpha21264:mem=16M", "base", Some(1 << 20));
    let page = 8192u64;
    let a = e.mmap(pid, anon(4 << 20)).unwrap();
    let n = (4 << 20) / page;
    // Write every page: most of them must go to swap to make room.
    for i in 0..n {
        e.access(pid, a + i * page, AccessKind::Write).unwrap();
    }
    let out1 = e.os.backing.stats.pageouts_swap;
    assert!(out1 > 0);
    // Read every page back (swap-in), twice over: the second pass evicts clean copies.
    for _ in 0..2 {
        for i in 0..n {
            e.access(pid, a + i * page, AccessKind::Read).unwrap();
        }
    }
    // Pages still resident after the writes go out during the reads (dirty, once); pages read
    // back from swap are clean and go without a write: at most one write per page.
    let st = &e.os.backing.stats;
    assert!(st.pageins_swap > 0);
    assert!(st.pageouts_swap >= out1 && st.pageouts_swap <= n, "{st:?}");
    assert_eq!(st.swap_slots, st.pageouts_swap, "one slot per page written");
    assert!(
        e.os.pageout.stats.cached > st.pageouts_swap,
        "clean copies were evicted without writing"
    );
    e.os.check_invariants().unwrap();
}

/// The approximate LRU keeps a page that is used all along while pages used once go.
#[test]
fn a_page_in_use_survives_a_scan_of_pages_used_once() {
    let (mut e, pid) = engine("alpha21264:mem=16M", "base", Some(1 << 20));
    let page = 8192u64;
    let a = e.mmap(pid, anon(4 << 20)).unwrap();
    let n = (4 << 20) / page;
    for i in 1..n {
        e.access(pid, a + i * page, AccessKind::Write).unwrap();
        // The hot page: touched between every two others (a TLB hit would set no bit, so
        // touch it through a fresh mapping walk by flushing its TLB entry).
        e.os.hw.tlb.invalidate_range(pid.0, a, a + page);
        e.access(pid, a, AccessKind::Write).unwrap();
    }
    let pg = &e.os.pageout.stats;
    assert!(pg.cached > 0, "{pg:?}");
    // Pages used once are never used again, so any page read back from swap is the hot one,
    // evicted although in use.
    assert_eq!(
        e.os.backing.stats.pageins_swap, 0,
        "the hot page was evicted"
    );
    assert!(
        e.os.proc(pid).unwrap().pmap.lookup(a / page + 1).is_none(),
        "the first page used once is still mapped"
    );
}

/// seed 000 4.6: evicting a base page of a superpage demotes it incrementally: the rest of it
/// stays mapped by the next smaller superpages.
#[test]
fn evicting_a_page_of_a_superpage_demotes_it_incrementally() {
    let r = run(
        "alpha21264:mem=32M",
        "navarro",
        "stride:size=48M,stride=8K,op=write,rounds=1",
    );
    let pg = &r.memory.paging;
    assert!(pg.evict_demotions > 0, "{pg:?}");
    let d = &r.pages.demotions_by_size;
    // A 4MB superpage demoted goes to 512KB pieces, one of which to 64KB pieces: more
    // 64KB demotions than 4MB ones would mean whole superpages were torn down.
    let (d64, d512, d4m) = (
        d["64K"].as_u64().unwrap(),
        d["512K"].as_u64().unwrap(),
        d["4M"].as_u64().unwrap(),
    );
    assert!(d4m > 0 && d512 >= d4m && d64 >= d512, "{d:?}");
    assert!(r.pages.promotions_by_size["4M"].as_u64().unwrap() > 0);
}

/// Without swap, dirty anonymous memory cannot be evicted: out of memory names the swap.
#[test]
fn without_swap_dirty_memory_runs_out_and_says_so() {
    // Random updates: a scan that writes more than memory and swap is refused before it runs.
    let w = "gups:size=64M,updates=100K";
    let e = try_run("alpha21264:mem=32M,swap=0", "base", w).unwrap_err();
    assert!(matches!(e, SimError::OutOfMemory(_)), "{e}");
    assert!(e.to_string().contains("swap=SIZE"), "{e}");
    // With swap the same run completes.
    let r = run("alpha21264:mem=32M", "base", w);
    assert!(r.memory.paging.pageouts_swap > 0);
}

/// `pagedaemon=off` keeps the allocator alone: memory running out is an error, swap or not.
#[test]
fn without_the_page_daemon_memory_runs_out() {
    let e = try_run(
        "alpha21264:mem=32M",
        "base:pagedaemon=off",
        "seq:size=64M,op=write",
    )
    .unwrap_err();
    assert!(matches!(e, SimError::OutOfMemory(_)), "{e}");
    let bad = try_run("alpha21264", "base:pagedaemon=maybe", "seq:size=1M").unwrap_err();
    assert!(bad.to_string().contains("pagedaemon"), "{bad}");
}

/// With plenty of memory the daemon does nothing at all (no scan, no bit cleared): reports of
/// runs that fit are those of a machine without it.
#[test]
fn with_memory_to_spare_the_daemon_stays_asleep() {
    let on = run("skylake:mem=1G", "navarro", "gups:size=64M,updates=200K");
    let off = run(
        "skylake:mem=1G",
        "navarro:pagedaemon=off",
        "gups:size=64M,updates=200K",
    );
    let pg = &on.memory.paging;
    assert_eq!(pg.daemon_scans + pg.sync_scans + pg.pages_visited, 0);
    assert_eq!(on.time.cycles_total, off.time.cycles_total);
    assert_eq!(on.tlb.walks, off.tlb.walks);
}

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

/// File pages go back to their file, not to swap, and an evicted page is read again even from
/// a warm page cache; a clean one is dropped and read again without being written.
#[test]
fn file_pages_are_written_back_and_read_again() {
    let (mut e, pid) = engine("alpha21264:mem=16M", "base", Some(2 << 20));
    let page = 8192u64;
    let n = (8 << 20) / page;
    e.os.open_file(7, n * page);
    let a = e.mmap(pid, shared_file(7, n * page)).unwrap();
    for i in 0..n {
        e.access(pid, a + i * page, AccessKind::Write).unwrap();
    }
    let out = e.os.backing.stats.pageouts_file;
    assert!(out > 0, "dirty file pages were written back");
    assert_eq!(e.os.backing.stats.pageouts_swap, 0);
    assert_eq!(
        e.os.stats.io_read_bytes, 0,
        "a warm cache reads nothing new"
    );
    for i in 0..n {
        e.access(pid, a + i * page, AccessKind::Read).unwrap();
    }
    let st = &e.os.backing.stats;
    assert!(st.pageins_file > 0);
    assert_eq!(e.os.stats.io_read_bytes, st.pageins_file * page);
    assert!(
        st.pageouts_file <= n,
        "each page written back at most once: {st:?}"
    );
}

/// A page dirtied through a mapping that is then removed stays dirty in its object (FreeBSD
/// moves the pmap's modified bit into the page): the daemon writes it back when it evicts it.
#[test]
fn dirty_pages_of_an_unmapped_file_are_written_back() {
    let (mut e, pid) = engine("alpha21264:mem=16M", "base", Some(2 << 20));
    let page = 8192u64;
    e.os.open_file(3, 1 << 20);
    let f = e.mmap(pid, shared_file(3, 1 << 20)).unwrap();
    for i in 0..(1 << 20) / page {
        e.access(pid, f + i * page, AccessKind::Write).unwrap();
    }
    e.munmap(pid, f, 1 << 20).unwrap();
    // Anonymous memory pushes the file's pages out.
    let a = e.mmap(pid, anon(3 << 20)).unwrap();
    for i in 0..(3 << 20) / page {
        e.access(pid, a + i * page, AccessKind::Write).unwrap();
    }
    assert!(
        e.os.backing.stats.pageouts_file > 0,
        "{:?}",
        e.os.backing.stats
    );
}

/// The daemon wakes by itself (not only when an allocation waits) once free memory falls below
/// FreeBSD's wake level, and not before.
#[test]
fn the_daemon_wakes_when_memory_gets_short_and_not_before() {
    let below = run("skylake:mem=1G", "base", "seq:size=900M,op=write");
    assert_eq!(
        below.memory.paging.daemon_scans, 0,
        "{:?}",
        below.memory.paging
    );
    let above = run("skylake:mem=1G", "base", "seq:size=1000M,op=write");
    assert!(
        above.memory.paging.daemon_scans > 0,
        "{:?}",
        above.memory.paging
    );
}

/// seed 000 4.6: under pressure, a scan that clears a superpage's reference bit demotes it;
/// once every base page of it has been referenced again it is promoted again.
#[test]
fn speculative_demotion_then_repromotion() {
    let (mut e, pid) = engine("alpha21264:mem=16M", "navarro", Some(2 << 20));
    let page = 8192u64;
    let hot = e.mmap(pid, anon(64 << 10)).unwrap();
    let touch_hot = |e: &mut splab_sim::engine::Engine| {
        for i in 0..8 {
            e.os.hw
                .tlb
                .invalidate_range(pid.0, hot + i * page, hot + (i + 1) * page);
            e.access(pid, hot + i * page, AccessKind::Write).unwrap();
        }
    };
    touch_hot(&mut e);
    assert_eq!(
        e.os.stats.promotions[1], 1,
        "the 64KB region is a superpage"
    );
    let a = e.mmap(pid, anon(4 << 20)).unwrap();
    for i in 0..(4 << 20) / page {
        e.access(pid, a + i * page, AccessKind::Write).unwrap();
        if i % 16 == 0 {
            touch_hot(&mut e);
        }
    }
    let pg = &e.os.pageout.stats;
    assert!(pg.speculative_demotions > 0, "{pg:?}");
    assert!(pg.repromotions > 0, "{pg:?}");
}
