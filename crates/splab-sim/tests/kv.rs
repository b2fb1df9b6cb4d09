//! The `kv` workload and its jemalloc model (workload/jemalloc.rs, workload/kv.rs): the
//! allocator's exact behaviour against a recording fake OS, then whole runs of seed 003's
//! Del-70 shape (Table 10) and the per-request latency.

mod common;

use splab_sim::workload::jemalloc::*;
use splab_sim::Result;

/// Records the calls; mmap hands out addresses upward from 1 GiB + `skew`.
#[derive(Default)]
struct Fake {
    next: u64,
    log: Vec<String>,
    purged: Vec<(u64, u64)>,
    unmapped: Vec<(u64, u64)>,
}
impl Sys for Fake {
    fn mmap(&mut self, len: u64) -> Result<u64> {
        let a = (1 << 30) + self.next;
        self.next += len;
        self.log.push(format!("mmap {len}"));
        Ok(a)
    }
    fn munmap(&mut self, addr: u64, len: u64) -> Result<()> {
        self.unmapped.push((addr, len));
        Ok(())
    }
    fn purge(&mut self, addr: u64, len: u64) -> Result<()> {
        self.purged.push((addr, len));
        Ok(())
    }
    fn touch(&mut self, _: u64) -> Result<()> {
        Ok(())
    }
}

#[test]
fn size_classes_round_as_jemalloc_4() {
    let cases = [
        (0, 8),
        (1, 8),
        (9, 16),
        (17, 32),
        (49, 64),
        (65, 80),
        (129, 160),
        (4096, 4096),
        (4102, 5120),
        (8198, 10240),
        (14336, 14336),
        (14337, 16384),
        (16385, 20480),
        (1792 << 10, 1792 << 10),
        ((1792 << 10) + 1, 2 << 20),
        ((2 << 20) + 1, 2560 << 10),
    ];
    for (req, class) in cases {
        assert_eq!(size_class(req), class, "size_class({req})");
    }
    // The small classes of the 4.x man page: 36 of them (8 ... 14 KiB).
    let a = Arena::new(false, 1);
    assert_eq!(a.small_classes(), 36);
    assert_eq!(run_geometry(10240), (5, 2));
    assert_eq!(run_geometry(5120), (5, 4));
    assert_eq!(run_geometry(32), (1, 128));
    assert_eq!(run_geometry(14336), (7, 2));
}

#[test]
fn runs_are_carved_from_aligned_chunks() {
    let mut a = Arena::new(false, 1);
    let mut s = Fake {
        next: PAGE, // misaligned: the slow path trims
        ..Fake::default()
    };
    let p = a.alloc(&mut s, 8198).unwrap();
    assert_eq!(s.log, ["mmap 2097152", "mmap 4190208"]);
    let chunk = p & !(CHUNK - 1);
    assert_eq!(
        p,
        chunk + MAP_BIAS * PAGE,
        "the first run starts after the header"
    );
    let q = a.alloc(&mut s, 8198).unwrap();
    assert_eq!(q, p + 10240, "second region of the same 5-page run");
    let r = a.alloc(&mut s, 10000).unwrap();
    assert_eq!(r, p + 5 * PAGE, "a new run after the first");
    assert_eq!(a.nactive, 10);
    // A large allocation: 16 KiB + large_pad = 5 pages, after the two runs.
    let l = a.alloc(&mut s, 16 << 10).unwrap();
    assert_eq!(l & !(PAGE - 1), p + 10 * PAGE);
    assert_eq!(a.nactive, 15);
    // 99 more 10 KiB runs (198 regions) fill the chunk's 499 pages but 4: a new chunk.
    for _ in 0..198 {
        a.alloc(&mut s, 8198).unwrap();
    }
    assert_eq!(a.stats.chunks_mapped, 2);
    assert_eq!(a.nactive, 15 + 99 * 5);
}

#[test]
fn purge_issues_dontneed_of_exactly_the_freed_runs() {
    let mut a = Arena::new(true, 1);
    let mut s = Fake::default();
    // 20 chunks of 10 KiB objects: 99 runs (198 objects) a chunk.
    let ptrs: Vec<u64> = (0..198 * 20)
        .map(|_| a.alloc(&mut s, 8198).unwrap())
        .collect();
    assert_eq!(a.stats.chunks_mapped, 20);
    assert_eq!(a.nactive, 20 * 99 * 5);
    // Free both regions of every second run of the first 10 chunks: 495 runs, 2,475 dirty
    // pages, under the threshold max(nactive / 8, 512) until it is crossed.
    let mut freed = Vec::new();
    for (i, p) in ptrs.iter().enumerate().take(198 * 10) {
        if (i / 2) % 2 == 0 {
            a.free(&mut s, *p).unwrap();
            if i % 2 == 1 {
                freed.push(ptrs[i - 1]);
            }
        }
    }
    let active = 20 * 99 * 5 - 5 * freed.len() as u64;
    assert_eq!(freed.len(), 495);
    assert_eq!(a.nactive, active);
    // Every purge was of a run freed, whole, oldest first, and the dirty pages left are at
    // most the threshold.
    assert!(!s.purged.is_empty());
    for (k, &(addr, len)) in s.purged.iter().enumerate() {
        assert_eq!(addr, freed[k], "purge {k} in freeing order");
        assert_eq!(len, 5 * PAGE);
    }
    eprintln!("PURGES {} ndirty {}", s.purged.len(), a.ndirty);
    assert_eq!(a.ndirty, 5 * freed.len() as u64 - 5 * s.purged.len() as u64);
    assert!(a.ndirty <= (active >> 3).max(512) && a.ndirty + 5 > (active >> 3).max(512));
    assert_eq!(a.stats.bytes_purged, s.purged.len() as u64 * 5 * PAGE);
    assert!(s.unmapped.is_empty());
}

#[test]
fn empty_chunks_are_unmapped_or_retained() {
    for munmap in [true, false] {
        let mut a = Arena::new(munmap, 1);
        let mut s = Fake::default();
        let ptrs: Vec<u64> = (0..198 * 4)
            .map(|_| a.alloc(&mut s, 8198).unwrap())
            .collect();
        let chunks: Vec<u64> = (0..4).map(|c| ptrs[198 * c] & !(CHUNK - 1)).collect();
        for p in &ptrs {
            a.free(&mut s, *p).unwrap();
        }
        // Chunk 0's 99 freed runs coalesce into one dirty run of 495 pages; freeing chunk
        // 1's runs crosses max(nactive >> 3, 512) = 512 dirty pages at its fourth run: the
        // oldest entry, chunk 0's run, is purged, made clean it coalesces with the chunk's
        // 4 clean tail pages and the chunk becomes the spare. The same happens to chunk 1
        // and chunk 2 (each new spare sends the old one to the chunk cache, dirty again,
        // where the next purge deallocates it); chunk 3's last 91 runs stay dirty (455
        // pages, under 512).
        let run0 = |c: u64| c + MAP_BIAS * PAGE;
        assert_eq!(a.spare(), Some(chunks[2]));
        assert_eq!(
            s.purged[..2],
            [(run0(chunks[0]), 495 * PAGE), (run0(chunks[1]), 495 * PAGE)]
        );
        assert_eq!(a.ndirty, 455);
        if munmap {
            assert_eq!(s.unmapped, [(chunks[0], CHUNK), (chunks[1], CHUNK)]);
            assert_eq!(a.stats.chunks_unmapped, 2);
            assert_eq!(a.mapped_bytes(), 2 * CHUNK);
        } else {
            assert!(s.unmapped.is_empty());
            assert!(s.purged.contains(&(chunks[0], CHUNK)));
            assert!(s.purged.contains(&(chunks[1], CHUNK)));
            assert_eq!(a.retained_bytes(), 2 * CHUNK);
            assert_eq!(a.mapped_bytes(), 4 * CHUNK);
        }
        assert_eq!(a.nactive, 0);
    }
}

#[test]
fn huge_allocations_are_chunks_and_recycled() {
    let mut a = Arena::new(false, 1);
    let mut s = Fake::default();
    let h = a.alloc(&mut s, 3 << 20).unwrap();
    assert_eq!(h % CHUNK, 0);
    assert_eq!(a.stats.chunks_mapped, 2);
    assert_eq!(a.nactive, (3 << 20) / PAGE);
    a.free(&mut s, h).unwrap();
    // 1,024 cached pages > 512: purged whole and retained; then reused without mmap.
    assert_eq!(s.purged, [(h, 4 << 20)]);
    let h2 = a.alloc(&mut s, 4 << 20).unwrap();
    assert_eq!(h2, h);
    assert_eq!(a.stats.chunks_mapped, 2);
}

/// A small Del-70: Linux's khugepaged collapses the 2MB regions the deletions emptied in part
/// (max_ptes_none 511), so Linux ends with more memory than Linux with 4KB pages; FreeBSD's
/// reservations only promote fully populated ones, so it stays with 4KB's footprint (seed 003
/// Table 10: 11.6 GB, Linux 19.8 GB, FreeBSD 11.7 GB).
#[test]
fn del70_khugepaged_rebloats_linux_only() {
    let w = "kv:phase=del:70,objects=20K";
    let end = |p: &str| {
        let r = common::run("skylake", p, w);
        (r.memory.footprint_end_bytes, r)
    };
    let (base, r4k) = end("linux-4k");
    let (linux, rl) = end("linux");
    let (freebsd, _) = end("freebsd");
    assert_eq!(r4k.memory.thp.pages_collapsed, 0);
    assert!(
        rl.memory.thp.pages_collapsed > 0,
        "khugepaged collapsed nothing"
    );
    let ws = rl.workload_stats.as_ref().unwrap();
    // The purged pages never left: they waited with their THPs on the deferred split queue
    // (no memory pressure ran the shrinker), so the footprint after the deletes is already
    // Linux's end one; khugepaged's collapses then filled every one of them with zeroes in a
    // new 2MB page, freeing the old.
    let purged = ws["heap"]["purged_bytes"].as_u64().unwrap() / 4096;
    assert_eq!(ws["footprint_after_phase_bytes"].as_u64().unwrap(), linux);
    let split = &rl.memory.thp.split;
    assert_eq!(
        (split.queued_peak_pages, split.split_freed_pages),
        (purged, purged)
    );
    assert_eq!((split.shrinker_runs, split.queued_pages), (0, 0));
    assert_eq!(rl.memory.thp.collapse_zeroed, purged);
    assert!(linux > base, "linux {linux} vs linux-4k {base}");
    assert!(
        (freebsd as f64) <= 1.05 * base as f64,
        "freebsd {freebsd} vs linux-4k {base}"
    );
}

/// Redis's `_dictExpandIfNeeded`: the bucket table doubles to the power of two at or above
/// twice the keys once the keys reach its size, from `DICT_HT_INITIAL_SIZE` 4, and deleting keys
/// does not shrink it here (no `tryResizeHashTables`); the chains stay short.
#[test]
fn the_dictionary_grows_at_its_size_and_not_on_deletes() {
    let dict = |w: &str| {
        let r = common::run("skylake", "linux-4k", w);
        let d = r.workload_stats.unwrap()["dict"].clone();
        let n = |k: &str| d[k].as_u64().unwrap();
        (n("buckets"), n("keys"), n("longest_chain"))
    };
    // 4 keys fit the initial table; the fifth SET finds used == size and expands to 8.
    assert_eq!(dict("kv:objects=4,idle=0").0, 4);
    assert_eq!(dict("kv:objects=5,idle=0").0, 8);
    // 512 keys reached, 1024 buckets; 1000 keys stay there.
    let (buckets, keys, longest) = dict("kv:objects=1000,size=64,idle=0");
    assert_eq!((buckets, keys), (1024, 1000));
    assert!((1..16).contains(&longest), "longest chain {longest}");
    let (buckets, keys, _) = dict("kv:phase=del:70,objects=1000,size=64,idle=0");
    assert_eq!((buckets, keys), (1024, 300));
}

/// Every request is counted once: the inserts, then the deletes (or the gets and sets).
#[test]
fn request_latency_counts_every_request() {
    let r = common::run("skylake", "linux-4k", "kv:phase=del:70,objects=1000,idle=0");
    let l = r.time.request_latency.as_ref().unwrap();
    assert_eq!(l.count, 1000 + 700);
    assert!(l.cycles.p50 > 0 && l.cycles.p50 <= l.cycles.p99 && l.cycles.p99 <= l.cycles.max);
    let r = common::run(
        "skylake",
        "linux",
        "kv:phase=warm,objects=500,ops=300,idle=0",
    );
    assert_eq!(r.time.request_latency.unwrap().count, 800);
    // web marks its measured requests (not the warm-up's).
    let r = common::run("skylake", "linux", "web:files=200,warmup=50,requests=300");
    assert_eq!(r.time.request_latency.unwrap().count, 300);
    let r = common::run("skylake", "linux", "gups:size=1M,updates=1000");
    assert!(r.time.request_latency.is_none());
}

/// The phases run under --check=incremental (the invariants of what each event touched), on a
/// small machine.
#[test]
fn phases_keep_invariants() {
    for w in [
        "kv:phase=cold,objects=200,size=3K,idle=20",
        "kv:phase=range:256..1M,objects=20,idle=20",
        "kv:phase=del:50,objects=400,idle=30,jemalloc=freebsd",
    ] {
        for p in ["linux", "freebsd"] {
            splab_sim::run(&splab_sim::RunSpec {
                machine: "skylake:mem=1G".into(),
                policy: p.into(),
                workload: w.into(),
                seed: 1,
                check: splab_sim::engine::CheckMode::Incremental,
                free_bytes: None,
                page_cache: Default::default(),
                dump_reservations: false,
            })
            .unwrap_or_else(|e| panic!("{w} with {p}: {e}"));
        }
    }
}

#[test]
fn bad_parameters_name_the_parameter() {
    for (w, key) in [
        ("kv:phase=del:170", "'phase'"),
        ("kv:phase=del", "'phase'"),
        ("kv:phase=range:2K..1K", "'phase'"),
        ("kv:phase=hot", "'phase'"),
        ("kv:objects=0", "'objects'"),
        ("kv:size=0", "'size'"),
        ("kv:idle=soon", "'idle'"),
        ("kv:jemalloc=glibc", "'jemalloc'"),
        ("kv:objects=1G,size=1G", "'objects'"),
        ("kv:bogus=1", "'bogus'"),
    ] {
        let e = splab_sim::workload::parse(w).err().unwrap().to_string();
        assert!(e.contains(key), "{w}: {e}");
    }
    // More than the machine holds: an error at the start of the run, not a host allocation.
    let e = common::try_run("skylake:mem=1G", "linux", "kv:objects=200M,size=1")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("'objects'"), "{e}");
}
