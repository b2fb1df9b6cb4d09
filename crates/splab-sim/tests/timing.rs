//! Timing scenarios: what the out-of-order core model (hw/core.rs) must make of the workloads
//! that expose its mechanisms. Steady-state times are measured as docs/timing.md does: the
//! difference of two runs that differ only in length, so set-up and first-touch faults cancel.

use splab_sim::report::Report;

mod common;
use common::run;

/// Cycles per unit of the steady state: (cycles of `long` - cycles of `short`) / `units`.
fn steady(machine: &str, policy: &str, short: &str, long: &str, units: u64) -> f64 {
    let a = run(machine, policy, short).time.cycles_total;
    let b = run(machine, policy, long).time.cycles_total;
    (b - a) as f64 / units as f64
}

/// The breakdown attributes every cycle: its parts sum to the total.
#[test]
fn breakdown_sums_to_the_total() {
    for (m, w) in [
        ("skylake", "gups:size=64M,updates=200K"),
        ("alpha21264", "matrix:n=300"),
        ("core2", "chase:size=8M,chains=4,hops=50K"),
        ("pa8000", "seq:size=16M,op=rw"),
    ] {
        for p in ["base", "navarro"] {
            let r = run(m, p, w);
            let b = &r.time.breakdown;
            let sum = |m: &serde_json::Map<String, serde_json::Value>| {
                m.values().map(|v| v.as_u64().unwrap()).sum::<u64>()
            };
            let total =
                b.compute + b.tlb_hit + sum(&b.walk) + sum(&b.data) + b.fault + b.io + b.kernel;
            assert_eq!(total, r.time.cycles_total, "{w} on {m} with {p}: {b:?}");
            assert_eq!(r.time.cycles_tlb, b.tlb_hit + sum(&b.walk));
        }
    }
}

/// One chain: every hop waits for the one before (a DRAM latency and its walk). Sixteen
/// chains: sixteen hops in flight, bounded by the ten fill buffers of skylake, so a hop costs
/// about a tenth (a little more than a tenth of the one-chain time, which also pays walks).
#[test]
fn chase_chains_overlap_up_to_the_fill_buffers() {
    let hop = |k: u32| {
        steady(
            "skylake",
            "base",
            &format!("chase:size=64M,chains={k},hops=200K"),
            &format!("chase:size=64M,chains={k},hops=400K"),
            200_000,
        )
    };
    let (one, sixteen) = (hop(1), hop(16));
    let dram = 42.0 + 189.0;
    assert!(
        one >= dram,
        "one chain: {one} cycles per hop, below the DRAM latency"
    );
    let m = 10.0;
    let ratio = one / sixteen;
    assert!(
        ratio >= 0.7 * m && ratio <= 1.5 * m,
        "one chain {one}, sixteen {sixteen} cycles per hop: ratio {ratio}, M = {m}"
    );
}

/// A chain over 2MB pages saves the walk and nothing else: the saving per hop is the walk
/// part of the base-page hop.
#[test]
fn chase_with_superpages_gains_the_walk_share_only() {
    let per = |p: &str| {
        let a = run("skylake", p, "chase:size=64M,chains=1,hops=200K");
        let b = run("skylake", p, "chase:size=64M,chains=1,hops=400K");
        let d = |f: fn(&Report) -> u64| (f(&b) - f(&a)) as f64 / 200_000.0;
        (d(|r| r.time.cycles_total), d(|r| r.time.cycles_tlb))
    };
    let (base, base_walk) = per("base");
    let (sp, sp_walk) = per("freebsd");
    assert!(
        base_walk > 10.0,
        "base pages walk: {base_walk} cycles per hop"
    );
    assert!(
        sp_walk < 0.1 * base_walk,
        "2MB pages: {sp_walk} walk cycles per hop"
    );
    let saved = base - sp;
    assert!(
        (saved - (base_walk - sp_walk)).abs() <= 0.1 * base_walk,
        "saved {saved} cycles per hop, the walk share was {base_walk}"
    );
}

/// A sequential scan is bound by memory bandwidth; superpages save only its few walks.
#[test]
fn seq_gains_under_ten_percent_from_superpages() {
    let pass = |p: &str| {
        steady(
            "skylake",
            p,
            "seq:size=256M,passes=1",
            "seq:size=256M,passes=2",
            1,
        )
    };
    let (base, sp) = (pass("base"), pass("freebsd"));
    let speedup = base / sp;
    assert!(
        (1.0..1.1).contains(&speedup),
        "seq speedup {speedup} ({base} vs {sp} cycles per pass)"
    );
}

/// GUPS gains more from 2MB pages as the table outgrows what the caches hold of its page
/// table (seed 003 Table 8's shape; docs/timing.md has the full curve to 8GB).
#[test]
fn gups_superpage_gain_grows_with_the_table() {
    // Enough updates that nearly every page was touched before the measured half (1GB has
    // 262,144 pages: 8M updates touch each ~30 times).
    let gain = |size: &str, n: &str| {
        let n1: u64 = n.trim_end_matches('M').parse::<u64>().unwrap() * 1_000_000;
        let per = |p: &str| {
            steady(
                "skylake",
                p,
                &format!("gups:size={size},updates={n1}"),
                &format!("gups:size={size},updates={}", 2 * n1),
                n1,
            )
        };
        per("base") / per("freebsd")
    };
    let (small, large) = (gain("64M", "1M"), gain("1G", "8M"));
    assert!(small >= 0.95, "64MB table: {small}");
    assert!(large > small * 1.1, "1GB table gains {large}, 64MB {small}");
}

/// A software-refilled TLB (the Alpha's PALcode) drains the window on every miss, so the
/// misses of a base-page run cannot overlap: the same data misses cost more time than with
/// superpages, where nothing traps.
#[test]
fn software_refill_serialises_misses() {
    let base = run("alpha21264", "base", "matrix:n=500");
    let sp = run("alpha21264", "navarro", "matrix:n=500");
    let dram = |r: &Report| r.time.breakdown.data["DRAM"].as_u64().unwrap();
    let misses = |r: &Report| r.caches.data_by_level["DRAM"].as_u64().unwrap();
    // About as many data misses either way...
    let (mb, ms) = (misses(&base) as f64, misses(&sp) as f64);
    assert!(
        (mb - ms).abs() <= 0.1 * mb,
        "{mb} vs {ms} DRAM data references"
    );
    // ...but with base pages they are exposed one at a time.
    assert!(
        dram(&base) as f64 > 2.0 * dram(&sp) as f64,
        "{} vs {}",
        dram(&base),
        dram(&sp)
    );
}
