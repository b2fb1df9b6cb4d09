//! The hardware data prefetcher for individual accesses (hw/prefetch.rs) on the access path: a
//! replayed scan (8-byte loads one by one, as a recorded trace has them) gets a detected
//! stream's lines as prefetches, restarting at every 4KB boundary; a machine without a
//! prefetcher gives every line a demand miss; and the estimated time of a streaming replay
//! follows the stream bandwidth rather than DRAM's latency.

use splab_sim::engine::Engine;
use splab_sim::hw::prefetch::PrefetchConfig;
use splab_sim::hw::Prefetcher;
use splab_sim::units::{Access, MemOp, Pid};

mod common;

/// An engine with one process, without invariant checks after every event (a check per access
/// of a multi-megabyte scan would take minutes; the other tests check the access path).
fn engine(machine: &str, policy: &str) -> (Engine, Pid) {
    common::engine_with(machine, policy, false, None)
}

/// Loads every 8-byte word of `[va, va + len)` one access at a time, two instructions each.
fn replay_scan(e: &mut Engine, pid: Pid, va: u64, len: u64) {
    for w in (va..va + len).step_by(8) {
        e.access_op(pid, Access::new(w, MemOp::Load, 0, 2)).unwrap();
    }
}

/// (streamed lines, data references served by DRAM) of a fresh first-touch scan of `len`
/// bytes on `machine` (base pages only).
fn scan(machine: &str, len: u64) -> (u64, u64, Engine) {
    let (mut e, pid) = engine(machine, "base");
    let va = e.mmap(pid, common::anon(len)).unwrap();
    replay_scan(&mut e, pid, va, len);
    let acc = &e.os.acc;
    (acc.streamed_lines, acc.data_by_level[3], e)
}

#[test]
fn a_replayed_scan_is_prefetched_after_two_misses_in_each_4k_page() {
    // skylake: 4KB pages of 64 lines; the first touch of each faults, then its line 0 and
    // line 1 are demand misses (the stream's two trigger misses) and lines 2..63 come from
    // the streamer. The next 4KB page starts a new stream: two more demand misses.
    let pages = 4;
    let (streamed, dram, e) = scan("skylake", pages * 4096);
    assert_eq!(streamed, pages * 62);
    assert_eq!(dram, pages * 2);
    // The prefetched lines are L2 hits in the cache statistics, not misses.
    let l2 = &e.os.hw.caches.stats()[1];
    assert_eq!(l2.hits, pages * 62, "{l2:?}");
}

#[test]
fn superpages_do_not_carry_a_stream_across_4k() {
    // With a 2MB page the scan is one page, but the streamer still stops at every 4KB.
    let (mut e, pid) = engine("skylake", "linux");
    let len = 4u64 << 20;
    let va = e.mmap(pid, common::anon(len)).unwrap();
    let start = va.next_multiple_of(2 << 20);
    replay_scan(&mut e, pid, start, 16 * 4096);
    // One 2MB page: at most a couple of walks where 4KB pages would need 16.
    assert!(e.os.acc.walks <= 2, "{} walks", e.os.acc.walks);
    assert_eq!(e.os.acc.streamed_lines, 16 * 62);
    assert_eq!(e.os.acc.data_by_level[3], 16 * 2);
}

#[test]
fn a_machine_without_a_prefetcher_misses_on_every_line() {
    // alpha21264: no hardware data prefetcher; 8KB pages of 128 lines, every one a demand miss.
    let pages = 2;
    let (streamed, dram, _) = scan("alpha21264", pages * 8192);
    assert_eq!(streamed, 0);
    assert_eq!(dram, pages * 128);
}

/// Cycles of a 16 MiB replayed scan on skylake, with the machine's prefetcher or none.
fn scan_cycles(prefetch: bool) -> (u64, u64) {
    let (mut e, pid) = engine("skylake", "base");
    if !prefetch {
        e.os.hw.prefetcher = Prefetcher::new(&PrefetchConfig::default());
    }
    let len = 16u64 << 20;
    let va = e.mmap(pid, common::anon(len)).unwrap();
    // Fault everything in first (one store a page, a run: its lines are streamed, not counted
    // here), then time the scan alone.
    e.access_run(pid, va, 4096, len / 4096, MemOp::Store, 1)
        .unwrap();
    let (t0, s0) = (e.clock(), e.os.acc.streamed_lines);
    replay_scan(&mut e, pid, va, len);
    (e.clock() - t0, e.os.acc.streamed_lines - s0)
}

#[test]
fn a_streaming_replay_is_timed_by_the_stream_bandwidth() {
    let (with, streamed) = scan_cycles(true);
    let (without, none) = scan_cycles(false);
    assert_eq!(none, 0);
    let lines = (16u64 << 20) / 64;
    // 62 of 64 lines of each 4KB page streamed.
    assert_eq!(streamed, lines / 64 * 62);
    // skylake streams a line per 64 / 4.9 = 13.1 cycles: the scan cannot beat that for the
    // streamed lines, and with the prefetcher it is within 25% of it.
    let bound = streamed as f64 * 64.0 / 4.9;
    eprintln!("16 MiB replayed scan: {with} cycles with the prefetcher, {without} without, bound {bound:.0}");
    assert!(
        with as f64 >= bound,
        "{with} cycles, bandwidth bound {bound}"
    );
    assert!(
        with as f64 <= 1.25 * bound,
        "{with} cycles, bandwidth bound {bound}"
    );
    // Without it, every line waits for DRAM (at most 10 in flight): much slower.
    assert!(
        without as f64 > 1.5 * with as f64,
        "without {without}, with {with}"
    );
}
