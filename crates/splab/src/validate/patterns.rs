//! Part 1 of `splab validate`: the calibration benchmarks' access patterns, run natively again
//! (with calibrate's own code, `calibrate::bench`) and replayed on the model, access for access.
//!
//! The model sees the very node offsets the native chase follows (same region size, same page
//! size advice, same order, same number of chains), through the engine's API: a process maps
//! the region, advises it, faults it in with one store per 4KB page, warms up, and the cycles of
//! the timed hops (the engine's clock before and after) are the prediction. Native times are
//! calibrate's: the 10th percentile of clean (not preempted) runs.

use std::time::Instant;

use anyhow::Result;
use splab_sim::engine::{CheckMode, Engine};
use splab_sim::hw::Machine;
use splab_sim::policy::Policy;
use splab_sim::units::{Access, MemOp, Pid};
use splab_sim::vm::{Advice, MmapReq};

use super::{Plan, Progress};
use crate::calibrate::bench::{self, Region, Rng, Stat, Thp, HUGE, PAGE};

/// One benchmark: what it measures, the native time and the model's, per unit.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub benchmark: String,
    /// "ns/hop", "ns/page", "ns/2MB page", "ns/KiB".
    pub unit: String,
    pub measured: f64,
    pub predicted: f64,
    /// (predicted - measured) / measured, percent.
    pub error_pct: f64,
    /// How the measured value was taken ("p10 of 21 runs, spread 2.0%").
    pub how: String,
    /// AnonHugePages of the native region over its length (THP memory), percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thp_granted_pct: Option<f64>,
    /// Distinct 2MB-aligned (guest-)physical ranges holding the native region's 4KB pages
    /// (`bench::phys_2m_ranges` of the frames the model is placed on): under nested paging, the
    /// host-table entries its walks read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phys_2m_ranges: Option<usize>,
}

impl Row {
    fn new(benchmark: String, unit: &str, measured: &Stat, predicted: f64) -> Row {
        Row::measured(benchmark, unit, measured.low(), measured.how(), predicted)
    }
    fn measured(benchmark: String, unit: &str, m: f64, how: String, predicted: f64) -> Row {
        Row {
            benchmark,
            unit: unit.into(),
            measured: m,
            predicted,
            error_pct: super::error_pct(m, predicted),
            how,
            thp_granted_pct: None,
            phys_2m_ranges: None,
        }
    }
}

/// A model process with one advised region, faulted in.
struct Model {
    e: Engine,
    pid: Pid,
    base: u64,
    ns_per_cycle: f64,
}

impl Model {
    /// `frames`: the native region's frames, in address order (`Region::frames`), for the
    /// model's pages to lie on (vm/placement.rs); None: the fresh machine's own order.
    fn new(
        machine: &str,
        len: usize,
        thp: Thp,
        touch: bool,
        frames: Option<&[u64]>,
    ) -> Result<Model> {
        Model::with_machine(Machine::from_spec(machine)?, len, thp, touch, frames)
    }

    /// As `new`, on a machine already built (calibrate's fit of `dram_latency`).
    fn with_machine(
        m: Machine,
        len: usize,
        thp: Thp,
        touch: bool,
        frames: Option<&[u64]>,
    ) -> Result<Model> {
        let ns_per_cycle = 1e9 / m.freq_hz as f64;
        let mut p = Policy::from_spec("linux-madvise")?;
        p.resolve(&m)?;
        let mut e = Engine::new(m, p, CheckMode::Off, None);
        let pid = e.spawn()?;
        let len = len.div_ceil(HUGE) * HUGE;
        let raw_len = (len + HUGE) as u64;
        let raw = e.mmap(pid, MmapReq::anon(raw_len))?;
        let advice = match thp {
            Thp::No => Advice::NoHugePage,
            Thp::Huge => Advice::HugePage,
        };
        e.madvise(pid, raw, raw_len, advice)?;
        let base = raw.div_ceil(HUGE as u64) * HUGE as u64;
        if let Some(f) = frames {
            e.place_frames(f.iter().copied());
        }
        if touch {
            e.access_run(pid, base, PAGE as i64, (len / PAGE) as u64, MemOp::Store, 1)?;
        }
        Ok(Model {
            e,
            pid,
            base,
            ns_per_cycle,
        })
    }

    /// Nanoseconds per hop of `k` interleaved chases over `nodes` (cut into `k` cycles as
    /// `bench::link` cuts them): `warm` rounds, then `rounds` timed rounds.
    fn chase(
        &mut self,
        nodes: &[usize],
        k: usize,
        warm: usize,
        rounds: usize,
        ipa: u16,
    ) -> Result<f64> {
        let n = nodes.len();
        let k = k.clamp(1, n);
        let bounds: Vec<(usize, usize)> = (0..k).map(|c| (c * n / k, (c + 1) * n / k)).collect();
        let mut pos: Vec<usize> = bounds.iter().map(|b| b.0).collect();
        let mut buf = Vec::with_capacity(4096);
        let mut first = true;
        let mut go = |m: &mut Model, rounds: usize| -> Result<()> {
            let mut left = rounds;
            while left > 0 {
                let r = left.min((4096 / k).max(1));
                buf.clear();
                for _ in 0..r {
                    for c in 0..k {
                        let dep = if first { 0 } else { k as u16 };
                        buf.push(Access::new(
                            m.base + nodes[pos[c]] as u64,
                            MemOp::Load,
                            dep,
                            ipa,
                        ));
                        pos[c] = if pos[c] + 1 < bounds[c].1 {
                            pos[c] + 1
                        } else {
                            bounds[c].0
                        };
                    }
                    first = false;
                }
                m.e.accesses(m.pid, &buf)?;
                left -= r;
            }
            Ok(())
        };
        go(self, warm.max(1))?;
        let c0 = self.e.clock();
        go(self, rounds)?;
        let c1 = self.e.clock();
        Ok((c1 - c0) as f64 * self.ns_per_cycle / (rounds * k) as f64)
    }
}

/// The model's warm-up and timed rounds for a chase of `n` nodes: every node at least once
/// when that is affordable (cache-sized chases), else enough to reach the steady state.
fn model_rounds(n: usize, k: usize) -> (usize, usize) {
    let per_chain = n / k.max(1);
    (
        (2 * per_chain).clamp(1 << 12, 1 << 18),
        per_chain.clamp(1 << 14, 1 << 17),
    )
}

/// The model's nanoseconds per hop of calibrate's latency chase: one dependent chase over
/// `nodes` (`bench::random_lines(2 * foot, _)`: one line of each 128-byte pair of a 2 x `foot`
/// region, random order) on MADV_HUGEPAGE memory faulted in first. The "latency" rows below
/// and calibrate's fit of `dram_latency` (calibrate/measure.rs, `fit_dram_latency`) both
/// predict with it.
pub(crate) fn latency_chase(m: Machine, foot: usize, nodes: &[usize]) -> Result<f64> {
    let mut model = Model::with_machine(m, 2 * foot, Thp::Huge, true, None)?;
    let (w, r) = model_rounds(nodes.len(), 1);
    model.chase(nodes, 1, w, r, 1)
}

pub fn run(machine: &str, plan: &Plan, pr: &mut Progress) -> Result<Vec<Row>> {
    let m = Machine::from_spec(machine)?;
    let levels = &m.caches.levels;
    let size = |i: usize| levels.get(i).map(|l| l.size_bytes as usize);
    let l1 = size(0).unwrap_or(32 << 10);
    let l2 = size(1).unwrap_or(1 << 20);
    let llc = size(2).unwrap_or(l2 * 4);
    let mut rows = Vec::new();
    let reps = plan.reps;
    let ms = plan.ms;

    // Latency plateaus: calibrate's chases (one line of each 128-byte pair, random order, THP
    // memory) at the footprints calibrate read each level's latency from.
    let dram_foot = plan.dram_footprint;
    let big = Region::map(2 * dram_foot, Thp::Huge)?;
    big.touch();
    let big_thp = 100.0 * big.anon_huge_bytes() as f64 / big.len as f64;
    let mut rng = Rng::new(11);
    let l2_foot = crate::calibrate::l2_footprint(l1, l2);
    let mut cases: Vec<(String, usize)> = vec![
        (
            format!("latency L1D ({} footprint)", super::mib(l1 / 2)),
            l1 / 2,
        ),
        (
            format!("latency L2 ({} footprint)", super::mib(l2_foot)),
            l2_foot,
        ),
    ];
    if levels.len() >= 3 {
        let f = (l2 * 3 / 2).min(llc / 2).max(l2 / 2 + 4096);
        cases.push((format!("latency LLC ({} footprint)", super::mib(f)), f));
    }
    cases.push((
        format!("latency DRAM ({} footprint)", super::mib(dram_foot)),
        dram_foot,
    ));
    for (name, foot) in cases {
        pr.start(&name);
        let nodes = bench::random_lines(2 * foot, &mut rng);
        let starts = bench::link(&big, &nodes, 1);
        let s = bench::time_chase(starts[0], bench::warm_hops(foot, nodes.len()), reps, ms);
        let p = latency_chase(m.clone(), foot, &nodes)?;
        let mut row = Row::new(name, "ns/hop", &s, p);
        row.thp_granted_pct = Some(big_thp);
        pr.row(&row);
        rows.push(row);
    }

    // Memory-level parallelism: K interleaved chases over the DRAM footprint.
    let nodes = bench::random_lines(2 * dram_foot, &mut rng);
    for k in [4usize, 14] {
        let name = format!("MLP: {k} chases ({})", super::mib(dram_foot));
        pr.start(&name);
        let mut starts = bench::link(&big, &nodes, k);
        bench::chase_many(&mut starts, 1 << 12);
        let s = bench::time_chase_many(&mut starts, reps, ms);
        let mut model = Model::new(machine, 2 * dram_foot, Thp::Huge, true, None)?;
        let (w, r) = model_rounds(nodes.len(), k);
        let p = model.chase(&nodes, k, w.min(1 << 15), r.min(1 << 15), 2)?;
        let mut row = Row::new(name, "ns/hop", &s, p);
        row.thp_granted_pct = Some(big_thp);
        pr.row(&row);
        rows.push(row);
    }
    drop(big);

    // TLB sweeps: one line per 4KB page (MADV_NOHUGEPAGE) at half the L1 DTLB's reach and
    // half the STLB's (as calibrate reads a level's latency at half its size: the boundary
    // itself is where misses start, calibrate's knee), and at 8x the STLB's reach (every hop
    // walks); one line per 2MB page (THP) at half the L1 DTLB's 2MB reach.
    let reach = |level: &splab_sim::hw::tlb::LevelConfig, class: u8| -> Option<usize> {
        level
            .arrays
            .iter()
            .find(|a| a.sizes.contains(&class))
            .map(|a| a.entries as usize)
    };
    let l1_4k = reach(&m.tlb.l1d, 0).unwrap_or(64);
    let stlb_4k = m.tlb.lower.last().and_then(|l| reach(l, 0)).unwrap_or(1536);
    let l1_2m = reach(&m.tlb.l1d, 1).unwrap_or(32);
    for pages in [l1_4k / 2, stlb_4k / 2, stlb_4k * 8] {
        let name = format!("TLB: 1 line per 4KB page, {pages} pages");
        pr.start(&name);
        let r4 = Region::map(pages * PAGE, Thp::No)?;
        r4.touch();
        let frames = r4.frames();
        let nodes = bench::per_page_nodes(pages, PAGE, &mut rng);
        let starts = bench::link(&r4, &nodes, 1);
        let s = bench::time_chase(starts[0], nodes.len() * 2, reps, ms);
        let mut model = Model::new(machine, pages * PAGE, Thp::No, true, frames.as_deref())?;
        let (w, r) = model_rounds(nodes.len(), 1);
        let p = model.chase(&nodes, 1, w, r, 1)?;
        let mut row = Row::new(name, "ns/hop", &s, p);
        row.phys_2m_ranges = frames.as_deref().map(bench::phys_2m_ranges);
        pr.row(&row);
        rows.push(row);
        if pages != stlb_4k * 8 {
            continue;
        }
        drop(r4);
        // The same chase on the same number of 4KB TLB entries whose frames are contiguous
        // (THP memory split into 4KB entries), where a long-running guest's free lists scatter
        // a 4KB region's frames over thousands of 2MB guest-physical ranges, each a page of the
        // host's tables that the walks read (docs/validation.md, "Walks"). The model's pages
        // lie on each region's own frames.
        let name = format!("TLB: 1 line per 4KB page, {pages} pages, contiguous frames");
        pr.start(&name);
        let rc = Region::map(pages * PAGE, Thp::Huge)?;
        rc.touch();
        rc.split_to_ptes()?;
        let frames = rc.frames();
        let starts = bench::link(&rc, &nodes, 1);
        let s = bench::time_chase(starts[0], nodes.len() * 2, reps, ms);
        let mut model = Model::new(machine, pages * PAGE, Thp::No, true, frames.as_deref())?;
        let (w, r) = model_rounds(nodes.len(), 1);
        let p = model.chase(&nodes, 1, w, r, 1)?;
        let mut row = Row::new(name, "ns/hop", &s, p);
        row.thp_granted_pct = Some(100.0 * rc.anon_huge_bytes() as f64 / rc.len as f64);
        row.phys_2m_ranges = frames.as_deref().map(bench::phys_2m_ranges);
        pr.row(&row);
        rows.push(row);
    }
    {
        let pages = (l1_2m / 2).max(1);
        let name = format!("TLB: 1 line per 2MB page, {pages} pages");
        pr.start(&name);
        let r2 = Region::map(pages * HUGE, Thp::Huge)?;
        r2.touch();
        let thp = 100.0 * r2.anon_huge_bytes() as f64 / r2.len as f64;
        let nodes = bench::per_page_nodes(pages, HUGE, &mut rng);
        let starts = bench::link(&r2, &nodes, 1);
        let s = bench::time_chase(starts[0], nodes.len() * 64, reps, ms);
        let mut model = Model::new(machine, pages * HUGE, Thp::Huge, true, None)?;
        let p = model.chase(&nodes, 1, 1 << 12, 1 << 14, 1)?;
        let mut row = Row::new(name, "ns/hop", &s, p);
        row.thp_granted_pct = Some(thp);
        pr.row(&row);
        rows.push(row);
    }

    // Concurrent walks: 8 chases, one line per 4KB page, far beyond the STLB.
    {
        let pages = plan.walk_pages;
        let k = 8;
        let name = format!("walks: {k} chases, 1 line per 4KB page, {pages} pages");
        pr.start(&name);
        let r4 = Region::map(pages * PAGE, Thp::No)?;
        r4.touch();
        let frames = r4.frames();
        let nodes = bench::per_page_nodes(pages, PAGE, &mut rng);
        let mut starts = bench::link(&r4, &nodes, k);
        bench::chase_many(&mut starts, 1 << 12);
        let s = bench::time_chase_many(&mut starts, reps, ms);
        let mut model = Model::new(machine, pages * PAGE, Thp::No, true, frames.as_deref())?;
        let p = model.chase(&nodes, k, 1 << 14, 1 << 14, 2)?;
        let mut row = Row::new(name, "ns/hop", &s, p);
        row.phys_2m_ranges = frames.as_deref().map(bench::phys_2m_ranges);
        pr.row(&row);
        rows.push(row);
    }

    // Read stream: sums over 32 MiB pieces of THP memory.
    {
        let len = 4 * (32usize << 20);
        let name = "stream: read 32 MiB pieces".to_string();
        pr.start(&name);
        let r = Region::map(len, Thp::Huge)?;
        r.touch();
        let thp = 100.0 * r.anon_huge_bytes() as f64 / r.len as f64;
        let piece = 32usize << 20;
        let mut i = 0;
        let (s, _) = bench::clean(reps, || {
            let off = (i % 4) * piece;
            i += 1;
            let t = Instant::now();
            // SAFETY: within the region.
            std::hint::black_box(bench::read_sum(unsafe { r.base.add(off) }, piece));
            t.elapsed().as_secs_f64() * 1e9 / (piece >> 10) as f64
        });
        let mut model = Model::new(machine, len, Thp::Huge, true, None)?;
        let mut pred = Vec::new();
        for j in 0..4u64 {
            let c0 = model.e.clock();
            model.e.access_run(
                model.pid,
                model.base + j * piece as u64,
                8,
                (piece / 8) as u64,
                MemOp::Load,
                2,
            )?;
            pred.push((model.e.clock() - c0) as f64 * model.ns_per_cycle / (piece >> 10) as f64);
        }
        let p = pred[1..].iter().sum::<f64>() / 3.0;
        let mut row = Row::new(name, "ns/KiB", &s, p);
        row.thp_granted_pct = Some(thp);
        pr.row(&row);
        rows.push(row);
    }

    // Faults: first touch of a fresh region, per 4KB page (MADV_NOHUGEPAGE) and per 2MB page
    // (MADV_HUGEPAGE; per THP actually granted).
    for thp in [Thp::No, Thp::Huge] {
        let len = 8usize << 20;
        let (name, unit, per) = match thp {
            Thp::No => ("fault: first touch, 4KB page", "ns/page", PAGE),
            Thp::Huge => ("fault: first touch, 2MB page", "ns/2MB page", HUGE),
        };
        pr.start(name);
        let mut granted = Vec::new();
        // Cold frames, as calibrate's faults (`fault_burst`): twice the largest cache read
        // before every run, so that no run reuses frames still cached from the run before.
        let ev = crate::validate::heldout::Evictor::native();
        let mut burst = || {
            bench::clean_with(
                reps,
                || ev.touch(),
                || {
                    let r = Region::map(len, thp).expect("mmap of 8 MiB");
                    let t = Instant::now();
                    r.touch();
                    let ns = t.elapsed().as_secs_f64() * 1e9;
                    let huge = r.anon_huge_bytes();
                    granted.push(100.0 * huge as f64 / len as f64);
                    let units = match thp {
                        Thp::No => len / PAGE,
                        Thp::Huge => (huge as usize / HUGE).max(1),
                    };
                    ns / units as f64
                },
            )
            .0
        };
        // The statistic calibrate took for the parameter each row tests: the 4KB faults' p10
        // (latency-bound, steady), and for the 2MB fault, bound by the memory bandwidth the
        // other tenants share, the median of three bursts' p10s, the bursts seconds apart
        // (calibrate's `HugeFaults`). One burst's p10 took a fast phase's 139 us where
        // calibrate's median was 169 (docs/validation.md, "After the merge of hit-under-miss").
        let (m, how) = match thp {
            Thp::No => {
                let s = burst();
                (s.low(), s.how())
            }
            Thp::Huge => {
                let mut bursts = Vec::new();
                for i in 0..3 {
                    if i > 0 {
                        std::thread::sleep(plan.fault_gap);
                    }
                    bursts.push(burst());
                }
                let h = crate::calibrate::HugeFaults::new(bursts);
                (h.low(), h.how())
            }
        };
        let mut model = Model::new(machine, len, thp, false, None)?;
        let c0 = model.e.clock();
        model.e.access_run(
            model.pid,
            model.base,
            PAGE as i64,
            (len / PAGE) as u64,
            MemOp::Store,
            1,
        )?;
        let p = (model.e.clock() - c0) as f64 * model.ns_per_cycle / (len / per) as f64;
        let mut row = Row::measured(name.to_string(), unit, m, how, p);
        if thp == Thp::Huge {
            row.thp_granted_pct = Some(granted.iter().cloned().fold(f64::INFINITY, f64::min));
        }
        pr.row(&row);
        rows.push(row);
    }
    Ok(rows)
}
