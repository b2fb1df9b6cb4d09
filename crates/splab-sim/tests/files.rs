//! Files and I/O (vm/file.rs): read / write / fsync on the page cache, the clustered read-ahead
//! of FreeBSD's `cluster_read` and `vm_fault`, and seed 000 5.1 (3)'s deactivation at close, with
//! exact counts. skylake: 4KB pages, so `MAXPHYS` (128KB) is a cluster of 32 pages.

use splab_sim::engine::Engine;
use splab_sim::units::{AccessKind, Pfn, Pid, Prot};
use splab_sim::vm::object::PageCache;
use splab_sim::vm::pageq::Queue;
use splab_sim::vm::{MapFlags, MmapReq};

mod common;

const PAGE: u64 = 4096;
const FILE: u32 = 7;

/// An engine with a 1MB buffer mapped in its process, its cache `cache`.
fn engine(policy: &str, cache: PageCache) -> (Engine, Pid, u64) {
    let (mut e, pid) = common::engine("skylake:mem=1G", policy, None);
    e.os.page_cache = cache;
    let buf = e.mmap(pid, common::anon(1 << 20)).unwrap();
    (e, pid, buf)
}

fn requests(e: &Engine) -> u64 {
    e.os.stats.io_read_requests
}

fn read_bytes(e: &Engine) -> u64 {
    e.os.stats.io_read_bytes
}

/// The frame holding page `p` of `file`.
fn frame(e: &Engine, file: u32, p: u64) -> Option<Pfn> {
    let obj = e.os.file_object(file).unwrap();
    e.os.obj(obj).pages.get(p)
}

fn queue(e: &Engine, file: u32, p: u64) -> Queue {
    e.os.pageq
        .queue_of(frame(e, file, p).expect("page resident"))
}

/// A 256-page file read 4KB at a time from a cold cache. `cluster_read`: the first read is one
/// page (its block) plus the read-ahead of `seqcount` = 2 blocks, which reads a whole cluster
/// of 32 pages (1..=32) and marks its last page; each read of a marked page starts the next
/// cluster (33..=64, ..., 225..=255, the last 31 pages). 9 requests, every byte once.
#[test]
fn sequential_reads_of_a_cold_file_take_one_request_per_cluster() {
    let (mut e, pid, buf) = engine("base", PageCache::Cold);
    e.open(pid, FILE, 256 * PAGE).unwrap();
    for p in 0..256 {
        assert_eq!(e.read(pid, FILE, p * PAGE, PAGE, buf).unwrap(), PAGE);
        if p == 0 {
            assert_eq!(requests(&e), 2, "the page, then read-ahead of 1..=32");
            assert_eq!(read_bytes(&e), 33 * PAGE);
        }
        if p == 32 {
            assert_eq!(requests(&e), 3, "the mark on 32 reads 33..=64");
        }
    }
    assert_eq!(requests(&e), 9);
    assert_eq!(read_bytes(&e), 256 * PAGE);
    assert_eq!(e.os.fileio.stats.readahead_pages, 255);
    assert_eq!(e.os.fileio.stats.read_bytes, 256 * PAGE);
    // Each request waits its latency once and its bytes at the device's bandwidth.
    let m = &e.os.machine;
    let want = m.io_cycles(PAGE) + 7 * m.io_cycles(32 * PAGE) + m.io_cycles(31 * PAGE);
    assert_eq!(e.os.stats.cycles_io, want);
    // Read again from the start (sequential: offset 0): all cached, no I/O.
    for p in 0..256 {
        e.read(pid, FILE, p * PAGE, PAGE, buf).unwrap();
    }
    assert_eq!(requests(&e), 9);
    assert_eq!(read_bytes(&e), 256 * PAGE);
    // The read-ahead does not change with the policy's superpages.
    let (mut n, q, nb) = engine("navarro", PageCache::Cold);
    n.open(q, FILE, 256 * PAGE).unwrap();
    for p in 0..256 {
        n.read(q, FILE, p * PAGE, PAGE, nb).unwrap();
    }
    assert_eq!(requests(&n), 9);
}

/// `readahead=off`: one request per page.
#[test]
fn without_read_ahead_every_page_is_a_request() {
    let (mut e, pid, buf) = engine("base:readahead=off", PageCache::Cold);
    e.open(pid, FILE, 40 * PAGE).unwrap();
    for p in 0..40 {
        e.read(pid, FILE, p * PAGE, PAGE, buf).unwrap();
    }
    assert_eq!(requests(&e), 40);
    assert_eq!(read_bytes(&e), 40 * PAGE);
    assert_eq!(e.os.fileio.stats.readahead_pages, 0);
}

/// One large read is one cluster of the request (up to MAXPHYS), with marks on its second and
/// last pages; seqcount is 1 + 64KB / 16KB = 5. Consuming the blocks, the mark on 1 marks 5
/// (read-ahead window 5), 5 marks 9, 9 marks 13, and 13 finds 16 not cached: a read-ahead
/// cluster of 32 (16..=47). The next read (seqcount 17, window 8) walks the marks 19, 26, 33,
/// 40, 47 and at 47 reads 48..=79.
#[test]
fn a_large_read_is_one_cluster_and_its_marks_drive_read_ahead() {
    let (mut e, pid, buf) = engine("base", PageCache::Cold);
    e.open(pid, FILE, 256 * PAGE).unwrap();
    assert_eq!(e.read(pid, FILE, 0, 16 * PAGE, buf).unwrap(), 16 * PAGE);
    assert_eq!((requests(&e), read_bytes(&e)), (2, 48 * PAGE));
    e.read(pid, FILE, 16 * PAGE, 48 * PAGE, buf).unwrap();
    assert_eq!((requests(&e), read_bytes(&e)), (3, 80 * PAGE));
    assert_eq!(e.os.fileio.stats.readahead_pages, 64);
}

/// Reads that are not sequential get no read-ahead (`sequential_heuristic` drops seqcount to
/// 0); a random 64KB read is one request of 16 pages.
#[test]
fn random_reads_get_no_read_ahead() {
    let (mut e, pid, buf) = engine("base", PageCache::Cold);
    e.open(pid, FILE, 256 * PAGE).unwrap();
    e.read(pid, FILE, 50 * PAGE, PAGE, buf).unwrap();
    assert_eq!((requests(&e), read_bytes(&e)), (1, PAGE));
    e.read(pid, FILE, 80 * PAGE, 16 * PAGE, buf).unwrap();
    assert_eq!((requests(&e), read_bytes(&e)), (2, 17 * PAGE));
    assert_eq!(e.os.fileio.stats.readahead_pages, 0);
}

/// The file's last block is read alone (ffs_read's bread), and a read is cut at the end.
#[test]
fn the_last_block_is_read_alone_and_reads_stop_at_the_end() {
    let (mut e, pid, buf) = engine("base", PageCache::Cold);
    e.open(pid, FILE, 10 * PAGE + 100).unwrap();
    assert_eq!(e.read(pid, FILE, 10 * PAGE, PAGE, buf).unwrap(), 100);
    assert_eq!((requests(&e), read_bytes(&e)), (1, PAGE));
}

/// A warm cache holds every page of a file that exists at the start: reads cost no I/O but
/// bring the pages into frames.
#[test]
fn a_warm_cache_reads_without_io() {
    let (mut e, pid, buf) = engine("base", PageCache::Warm);
    e.open(pid, FILE, 64 * PAGE).unwrap();
    let used = e.os.phys.used_frames;
    e.read(pid, FILE, 0, 64 * PAGE, buf).unwrap();
    assert_eq!(requests(&e), 0);
    assert!(e.os.phys.used_frames - used >= 64);
    assert!(frame(&e, FILE, 63).is_some());
}

/// A file the program wrote is read back from the cache, even with a cold cache; a write past
/// the end grows the file; writing whole pages reads nothing.
#[test]
fn a_written_file_is_read_back_without_io() {
    let (mut e, pid, buf) = engine("base", PageCache::Cold);
    e.open(pid, 9, 0).unwrap();
    for p in 0..16 {
        e.write(pid, 9, p * PAGE, PAGE, buf).unwrap();
    }
    // A partial write of a new page past the end reads nothing either.
    e.write(pid, 9, 16 * PAGE, 100, buf).unwrap();
    assert_eq!(e.os.files[&9].size, 16 * PAGE + 100);
    for p in 0..17 {
        e.read(pid, 9, p * PAGE, PAGE, buf).unwrap();
    }
    assert_eq!(requests(&e), 0);
    assert_eq!(read_bytes(&e), 0);
    assert_eq!(e.os.fileio.stats.written_bytes, 16 * PAGE + 100);
}

/// A partial write of a page with contents on storage reads it first (ffs_balloc, BA_CLRBUF):
/// one request of one page; a whole-page write reads nothing.
#[test]
fn a_partial_write_of_a_stored_page_reads_it_first() {
    let (mut e, pid, buf) = engine("base", PageCache::Cold);
    e.open(pid, FILE, 8 * PAGE).unwrap();
    e.write(pid, FILE, 2 * PAGE, PAGE, buf).unwrap();
    assert_eq!(requests(&e), 0);
    e.write(pid, FILE, 3 * PAGE + 10, 20, buf).unwrap();
    assert_eq!((requests(&e), read_bytes(&e)), (1, PAGE));
    // A partial write of the page just past the end: a new page, nothing to read.
    e.write(pid, FILE, 8 * PAGE + 10, 20, buf).unwrap();
    assert_eq!(requests(&e), 1);
    // Both pages are dirty in the cache.
    let f = splab_sim::vm::pageq::F_DIRTY;
    assert!(e.os.pageq.flag(frame(&e, FILE, 2).unwrap(), f));
    assert!(e.os.pageq.flag(frame(&e, FILE, 3).unwrap(), f));
}

/// fsync writes exactly the dirty pages, contiguous ones clustered up to 32 pages a request,
/// and leaves them clean.
#[test]
fn fsync_writes_exactly_the_dirty_pages() {
    let (mut e, pid, buf) = engine("base", PageCache::Warm);
    e.open(pid, FILE, 256 * PAGE).unwrap();
    e.write(pid, FILE, 0, 4 * PAGE, buf).unwrap(); // 0..=3
    e.write(pid, FILE, 10 * PAGE, 2 * PAGE, buf).unwrap(); // 10, 11
    e.write(pid, FILE, 100 * PAGE + 7, 1, buf).unwrap(); // 100
    e.write(pid, FILE, 150 * PAGE, 40 * PAGE, buf).unwrap(); // 150..=189: 32 + 8
    e.read(pid, FILE, 50 * PAGE, 4 * PAGE, buf).unwrap(); // clean pages
    assert_eq!(e.os.stats.io_write_requests, 0, "writes are delayed");
    assert_eq!(e.fsync(pid, FILE).unwrap(), 4 + 2 + 1 + 40);
    assert_eq!(e.os.stats.io_write_requests, 5);
    assert_eq!(e.os.stats.io_write_bytes, 47 * PAGE);
    assert_eq!(e.fsync(pid, FILE).unwrap(), 0, "clean now");
    assert_eq!(e.os.stats.io_write_requests, 5);
    // Closing writes nothing.
    e.write(pid, FILE, 0, PAGE, buf).unwrap();
    e.close(pid, FILE).unwrap();
    assert_eq!(e.os.stats.io_write_requests, 5);
    assert_eq!(e.os.fileio.stats.fsyncs, 2);
}

/// seed 000 5.1 (3): when the last process closes a file, its clean pages go to the inactive
/// queue (navarro); a dirty page stays active; base keeps them active (FreeBSD).
#[test]
fn close_moves_clean_pages_to_the_inactive_queue() {
    for (policy, moved) in [
        ("navarro", true),
        ("base", false),
        ("base:close_deactivate=on", true),
    ] {
        let (mut e, pid, buf) = engine(policy, PageCache::Warm);
        e.open(pid, FILE, 8 * PAGE).unwrap();
        e.read(pid, FILE, 0, 8 * PAGE, buf).unwrap();
        e.write(pid, FILE, 7 * PAGE, PAGE, buf).unwrap();
        // A second process has it open: nothing moves at the first close.
        let other = e.spawn().unwrap();
        e.open(other, FILE, 8 * PAGE).unwrap();
        e.close(pid, FILE).unwrap();
        assert_eq!(queue(&e, FILE, 0), Queue::Active, "{policy}");
        e.close(other, FILE).unwrap();
        let want = if moved {
            Queue::Inactive
        } else {
            Queue::Active
        };
        for p in 0..7 {
            assert_eq!(queue(&e, FILE, p), want, "{policy}: page {p}");
        }
        assert_eq!(queue(&e, FILE, 7), Queue::Active, "{policy}: dirty page 7");
        assert_eq!(
            e.os.fileio.stats.deactivated_pages,
            if moved { 7 } else { 0 },
            "{policy}"
        );
    }
}

/// A file still mapped is in use: its pages move only when the last mapping goes, and exit
/// closes what a process left open.
#[test]
fn a_mapped_file_is_deactivated_when_its_last_mapping_goes() {
    let (mut e, pid, _) = engine("navarro", PageCache::Warm);
    e.open(pid, FILE, 8 * PAGE).unwrap();
    let a = e
        .mmap(
            pid,
            MmapReq {
                addr: 0,
                len: 8 * PAGE,
                prot: Prot::READ,
                flags: MapFlags::FILE,
                file: FILE,
                offset: 0,
            },
        )
        .unwrap();
    e.access(pid, a, AccessKind::Read).unwrap();
    e.close(pid, FILE).unwrap();
    assert_eq!(queue(&e, FILE, 0), Queue::Active, "still mapped");
    e.munmap(pid, a, 8 * PAGE).unwrap();
    assert_eq!(queue(&e, FILE, 0), Queue::Inactive);
    // Exit closes open files.
    let q = e.spawn().unwrap();
    e.open(q, 11, 4 * PAGE).unwrap();
    let b = e.mmap(q, common::anon(PAGE)).unwrap();
    e.read(q, 11, 0, PAGE, b).unwrap();
    assert_eq!(queue(&e, 11, 0), Queue::Active);
    e.exit(q).unwrap();
    assert_eq!(e.os.fileio.open_count(11), 0);
    assert_eq!(queue(&e, 11, 0), Queue::Inactive);
}

fn map_file(e: &mut Engine, pid: Pid, pages: u64) -> u64 {
    e.mmap(
        pid,
        MmapReq {
            addr: 0,
            len: pages * PAGE,
            prot: Prot::READ,
            flags: MapFlags::FILE,
            file: FILE,
            offset: 0,
        },
    )
    .unwrap()
}

/// vm_fault's read-behind (7) and read-ahead (8) around a fault on a cold file mapping, in one
/// request, clipped by the map entry and by pages already cached; the extra pages wait on the
/// inactive queue.
#[test]
fn a_fault_reads_behind_and_ahead_in_one_request() {
    let (mut e, pid, _) = engine("base:fault_around=off", PageCache::Cold);
    e.open_file(FILE, 64 * PAGE).unwrap();
    let a = map_file(&mut e, pid, 64);
    e.access(pid, a + 20 * PAGE, AccessKind::Read).unwrap();
    assert_eq!((requests(&e), read_bytes(&e)), (1, 16 * PAGE), "13..=28");
    assert_eq!(e.os.stats.faults.major, 1);
    assert_eq!(queue(&e, FILE, 20), Queue::Active);
    assert_eq!(queue(&e, FILE, 13), Queue::Inactive);
    assert_eq!(queue(&e, FILE, 28), Queue::Inactive);
    assert!(frame(&e, FILE, 12).is_none() && frame(&e, FILE, 29).is_none());
    // Page 29: 28 is cached, so no read-behind; 30..=37 ahead.
    e.access(pid, a + 29 * PAGE, AccessKind::Read).unwrap();
    assert_eq!((requests(&e), read_bytes(&e)), (2, 25 * PAGE));
    // Pages read ahead fault without I/O (minor faults).
    e.access(pid, a + 25 * PAGE, AccessKind::Read).unwrap();
    assert_eq!(requests(&e), 2);
    assert_eq!(e.os.stats.faults.major, 2);
    // The entry's ends clip: page 0 reads 0..=8; page 63 reads 56..=63.
    e.access(pid, a, AccessKind::Read).unwrap();
    assert_eq!(read_bytes(&e), 34 * PAGE);
    e.access(pid, a + 63 * PAGE, AccessKind::Read).unwrap();
    assert_eq!((requests(&e), read_bytes(&e)), (4, 42 * PAGE));
    assert_eq!(e.os.fileio.stats.readahead_pages, 42 - 4);
}

/// Bad input is an error naming the problem, never a panic.
#[test]
fn bad_file_events_are_clear_errors() {
    let (mut e, pid, buf) = engine("base", PageCache::Warm);
    let err = |r: Result<u64, splab_sim::SimError>| r.unwrap_err().to_string();
    let m = err(e.read(pid, 99, 0, PAGE, buf));
    assert!(m.contains("unknown file 99"), "{m}");
    e.open(pid, FILE, 4 * PAGE).unwrap();
    let m = err(e.read(pid, FILE, 0, 0, buf));
    assert!(m.contains("zero length"), "{m}");
    let m = err(e.read(pid, FILE, 4 * PAGE, PAGE, buf));
    assert!(m.contains("past the end"), "{m}");
    e.close(pid, FILE).unwrap();
    let m = err(e.read(pid, FILE, 0, PAGE, buf));
    assert!(m.contains("no open file 7"), "{m}");
    let m = e.write(pid, FILE, 0, PAGE, buf).unwrap_err().to_string();
    assert!(m.contains("no open file 7"), "{m}");
    let m = e.close(pid, FILE).unwrap_err().to_string();
    assert!(m.contains("no open file 7"), "{m}");
    let m = err(e.fsync(pid, FILE));
    assert!(m.contains("no open file 7"), "{m}");
    let m = e.open(Pid(42), FILE, 0).unwrap_err().to_string();
    assert!(m.contains("pid 42"), "{m}");
    e.open(pid, FILE, 4 * PAGE).unwrap();
    let m = e
        .write(pid, FILE, u64::MAX - 10, 100, buf)
        .unwrap_err()
        .to_string();
    assert!(m.contains("overflows"), "{m}");
}

/// The web server (workload/web.rs): under navarro its files' clean pages are inactive once it
/// has exited (5.1 (3)); under freebsd the pages it used last stay active. Its requests reach
/// the file set's Zipf head: fewer files requested than requests.
#[test]
fn web_server_leaves_its_pages_inactive_under_navarro_only() {
    let w = "web:requests=3000,files=2000,maps=100";
    let stats = |policy: &str| {
        let r = common::run("alpha21264:mem=256M", policy, w);
        let s = r.workload_stats.expect("web stats");
        (r.memory.files.opens, s)
    };
    let (opens, n) = stats("navarro");
    assert_eq!(n["pages_after_exit"]["active"], 0);
    assert!(n["pages_after_exit"]["inactive"].as_u64().unwrap() > 0);
    assert!(
        n["pages_before_exit"]["inactive"].as_u64().unwrap() > 0,
        "{n}"
    );
    let files = n["files_requested"].as_u64().unwrap();
    assert!(files < 3000 && files > 100, "{files}");
    // Each file is opened when it enters the map cache: at least once per file requested.
    assert!(opens >= files, "{opens} {files}");
    let (_, f) = stats("freebsd");
    assert!(f["pages_after_exit"]["active"].as_u64().unwrap() > 0, "{f}");
    let lat = &n["request_latency_ns"];
    assert!(lat["p50"].as_u64().unwrap() <= lat["p99"].as_u64().unwrap());
    // read() mode: every request opens, reads and closes its file.
    let r = common::run(
        "alpha21264:mem=256M",
        "navarro",
        "web:requests=500,files=200,mode=read",
    );
    assert_eq!(r.memory.files.opens, 500);
    assert_eq!(r.memory.files.reads, 500);
    assert_eq!(r.memory.files.closes, 500);
    let e = common::try_run("alpha21264", "navarro", "web:zipf=abc")
        .unwrap_err()
        .to_string();
    assert!(e.contains("zipf='abc'") && e.contains("0.75"), "{e}");
}

/// `warmup=`: the measured_* stats cover the requests after the warm-up only, the others every
/// request (the stats had only the whole run's bytes and files beside `warmup_requests`, read
/// as the measured requests').
#[test]
fn web_stats_tell_the_measured_requests_from_the_warm_up() {
    let stats = |w: &str| {
        common::run("alpha21264:mem=256M", "navarro", w)
            .workload_stats
            .expect("web stats")
    };
    let n = |s: &serde_json::Value, k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}"));
    let all = stats("web:requests=600,files=2000,maps=100");
    let half = stats("web:warmup=300,requests=300,files=2000,maps=100");
    // Without warm-up the measured requests are all of them.
    assert_eq!(n(&all, "measured_served_bytes"), n(&all, "served_bytes"));
    assert_eq!(
        n(&all, "measured_files_requested"),
        n(&all, "files_requested")
    );
    // The same 600 requests (one seed): the whole run's counts are the same either way...
    assert_eq!(n(&half, "served_bytes"), n(&all, "served_bytes"));
    assert_eq!(n(&half, "files_requested"), n(&all, "files_requested"));
    // ...and the measured ones are the last 300's.
    assert!(
        n(&half, "measured_served_bytes") < n(&half, "served_bytes"),
        "{half}"
    );
    assert!(
        n(&half, "measured_files_requested") < n(&half, "files_requested"),
        "{half}"
    );
    assert!(n(&half, "measured_files_requested") > 0, "{half}");
}

/// The policy knobs parse as `name:key=value`, with errors naming the key and the choices.
#[test]
fn file_policy_knobs_parse() {
    use splab_sim::policy::Policy;
    assert!(!Policy::from_spec("base:readahead=off").unwrap().readahead);
    assert!(Policy::from_spec("base").unwrap().readahead);
    assert!(Policy::from_spec("navarro").unwrap().close_deactivate);
    assert!(!Policy::from_spec("freebsd").unwrap().close_deactivate);
    assert!(
        !Policy::from_spec("navarro:close_deactivate=off")
            .unwrap()
            .close_deactivate
    );
    let e = Policy::from_spec("base:readahead=maybe")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("readahead") && e.contains("maybe") && e.contains("true or false"),
        "{e}"
    );
}

/// Under memory pressure the page daemon writes a written file's dirty pages to the file and
/// evicts them; reading the file back then reads what was evicted, and only that (every
/// invariant checked after every event).
#[test]
fn written_pages_evicted_under_pressure_are_read_back_from_storage() {
    let (mut e, pid) = common::engine("skylake:mem=1G", "base", Some(16 << 20));
    e.os.page_cache = PageCache::Warm;
    let buf = e.mmap(pid, common::anon(1 << 20)).unwrap();
    e.open(pid, 9, 0).unwrap();
    let pages = (48 << 20) / PAGE;
    for p in 0..pages / 16 {
        e.write(pid, 9, p * 16 * PAGE, 16 * PAGE, buf).unwrap();
    }
    let laundered = e.os.backing.stats.pageouts_file;
    assert!(laundered > 0, "the daemon wrote dirty file pages");
    assert_eq!(
        e.os.stats.io_write_requests, laundered,
        "one page a request"
    );
    assert_eq!(requests(&e), 0, "nothing read while writing whole pages");
    let obj = e.os.file_object(9).unwrap();
    let evicted = (0..pages)
        .filter(|&p| e.os.obj(obj).pages.get(p).is_none())
        .count() as u64;
    assert!(evicted > 0);
    for p in 0..pages / 16 {
        e.read(pid, 9, p * 16 * PAGE, 16 * PAGE, buf).unwrap();
    }
    assert!(requests(&e) > 0);
    // Every evicted page is read back once (later reads may evict and re-read more).
    assert!(e.os.backing.stats.pageins_file >= evicted);
    assert_eq!(read_bytes(&e), e.os.backing.stats.pageins_file * PAGE);
}

/// A forked child shares its parent's open files: it can read them, and the file stays in use
/// until both have closed it.
#[test]
fn a_forked_child_inherits_open_files() {
    let (mut e, pid, buf) = engine("navarro", PageCache::Warm);
    e.open(pid, FILE, 4 * PAGE).unwrap();
    e.open(pid, 11, 4 * PAGE).unwrap();
    e.close(pid, 11).unwrap();
    e.read(pid, FILE, 0, PAGE, buf).unwrap();
    let child = e.fork(pid).unwrap();
    assert_eq!(e.os.fileio.open_count(FILE), 2);
    assert!(e.os.fileio.is_open(child, FILE) && !e.os.fileio.is_open(child, 11));
    e.read(child, FILE, PAGE, PAGE, buf).unwrap();
    e.close(pid, FILE).unwrap();
    assert_eq!(queue(&e, FILE, 0), Queue::Active, "the child has it open");
    e.exit(child).unwrap();
    assert_eq!(queue(&e, FILE, 0), Queue::Inactive);
}

/// The map entry bounds the read-behind and read-ahead, not only the file: a mapping of pages
/// 8..=23 of a 64-page file reads 8..=16 for a fault on its first page and 17..=23 for one on
/// its last.
#[test]
fn fault_read_ahead_stays_inside_the_map_entry() {
    let (mut e, pid, _) = engine("base:fault_around=off", PageCache::Cold);
    e.open_file(FILE, 64 * PAGE).unwrap();
    let a = e
        .mmap(
            pid,
            MmapReq {
                addr: 0,
                len: 16 * PAGE,
                prot: Prot::READ,
                flags: MapFlags::FILE,
                file: FILE,
                offset: 8 * PAGE,
            },
        )
        .unwrap();
    e.access(pid, a, AccessKind::Read).unwrap();
    assert_eq!((requests(&e), read_bytes(&e)), (1, 9 * PAGE));
    assert!(frame(&e, FILE, 7).is_none() && frame(&e, FILE, 16).is_some());
    e.access(pid, a + 15 * PAGE, AccessKind::Read).unwrap();
    assert_eq!((requests(&e), read_bytes(&e)), (2, 16 * PAGE));
    assert!(frame(&e, FILE, 24).is_none());
}

/// The kernel's copy costs the machine's page-copy time per page of data moved: read(),
/// write() and a send to a socket.
#[test]
fn the_copy_is_charged_per_page() {
    let (mut e, pid, buf) = engine("base", PageCache::Warm);
    e.open(pid, FILE, 64 * PAGE).unwrap();
    // The buffer is mapped already, so the copies are the only kernel work.
    e.write(pid, FILE, 0, 8 * PAGE, buf).unwrap();
    let copy = e.os.machine.cost.copy_page_cycles;
    let k0 = e.os.stats.cycles_kernel;
    e.read(pid, FILE, 0, 3 * PAGE + 1, buf).unwrap();
    assert_eq!(e.os.stats.cycles_kernel - k0, 4 * copy);
    e.send(pid, buf, 100).unwrap();
    assert_eq!(e.os.stats.cycles_kernel - k0, 5 * copy);
    e.write(pid, FILE, PAGE, 2 * PAGE, buf).unwrap();
    assert_eq!(e.os.stats.cycles_kernel - k0, 7 * copy);
}
