//! The benchmarks in order, what is derived from them, and the machine file they make.

use std::arch::x86_64::{__cpuid, __cpuid_count};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::Instant;

use anyhow::Result;

use super::bench::{self, mib, Cyc, Region, Rng, Stat, Thp, HUGE, KS, LINE, PAGE};
use super::pairfill::FILLS_AT;
use super::CalibrateArgs;

/// Sizes and repeats of one run.
struct Plan {
    quick: bool,
    reps: usize,
    /// Milliseconds per timed run.
    ms: f64,
    /// Bytes touched by the DRAM chase (twice that is mapped: one line per 128 bytes).
    dram_footprint: usize,
    /// 4KB pages of the 4KB-page region (TLB sweep and concurrent walks).
    pages_4k: usize,
    /// Largest 2MB-stride chase, in pages.
    pages_2m: usize,
}

struct Progress {
    quiet: bool,
    tty: bool,
    step: usize,
    total: usize,
    t0: Instant,
    /// The clock of the bursts so far, at which the cycles (`bench::Cyc`) in a progress line
    /// are shown; the file's are converted at the clock over all of them.
    ghz: f64,
}

impl Progress {
    fn start(&mut self, what: &str) {
        self.step += 1;
        if !self.quiet && self.tty {
            eprint!(
                "\r[{}/{} {:3.0}%] {what} ...",
                self.step,
                self.total,
                100.0 * (self.step - 1) as f64 / self.total as f64
            );
        }
    }
    fn done(&mut self, what: &str, result: &str) {
        let result = bench::resolve_cycles(result, self.ghz).unwrap_or_else(|_| result.to_string());
        if !self.quiet {
            if self.tty {
                eprint!("\r\x1b[K");
            }
            eprintln!(
                "[{}/{}] {what}: {result} ({:.1}s)",
                self.step,
                self.total,
                self.t0.elapsed().as_secs_f64()
            );
        }
    }
}

/// A cache level's latency: in the core's cycles where it was counted against add chains timed
/// in the same rounds (L1), else in ns, converted at the calibration's clock once it is known
/// (`bench::Clock`).
#[derive(Clone, Copy, Debug)]
enum Latency {
    Cycles(f64),
    Ns(f64),
}

impl Latency {
    fn cycles(self, ghz: f64) -> f64 {
        match self {
            Latency::Cycles(c) => c,
            Latency::Ns(ns) => ns * ghz,
        }
    }
    fn ns(self, ghz: f64) -> f64 {
        match self {
            Latency::Cycles(c) => c / ghz,
            Latency::Ns(ns) => ns,
        }
    }
    /// The cycles to one decimal (a `Cyc` marker for a time).
    fn text(self) -> String {
        match self {
            Latency::Cycles(c) => format!("{c:.1}"),
            Latency::Ns(ns) => format!("{:.1}", Cyc(ns)),
        }
    }
}

/// How a cache level's latency is counted (`latency_rule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LatencyRule {
    /// In the core's cycles, over the add chains timed in the same rounds: L1 (a whole number).
    AddChains,
    /// The hop's ns, converted at the calibration's clock (`freq_hz`), the one clock the model
    /// prices a hit at: every other level, L2 included since 2026-11-29 (docs/validation.md,
    /// "L2 at the file's clock").
    FileClock,
}

/// The rule for cache level `i` (0 = L1); `core_clocked`: the level is read on the interleaved
/// part of the latency curve with add chains in its rounds.
fn latency_rule(i: usize, core_clocked: bool) -> LatencyRule {
    if i == 0 && core_clocked {
        LatencyRule::AddChains
    } else {
        LatencyRule::FileClock
    }
}

/// A TOML basic string.
fn q(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push(' '),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A size as the machine file writes it (K/M/G).
fn sz(b: u64) -> String {
    for (s, u) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if b >= 1 << s && b.is_multiple_of(1 << s) {
            return format!("{}{u}", b >> s);
        }
    }
    format!("{b}")
}

struct CacheLevel {
    level: u32,
    ways: u32,
    sets: u32,
    line: u32,
}

struct Cpu {
    brand: String,
    /// cpuid leaf 0's vendor string ("GenuineIntel", "AuthenticAMD").
    vendor: String,
    guest: bool,
    hypervisor: String,
    caches: Vec<CacheLevel>,
    /// The cpuid leaf `caches` came from ("leaf 4", "leaf 0x8000001D").
    cache_leaf: &'static str,
    /// cpuid leaf 0x18 subleaves with a valid type, as (type, level, page-size bits, ways,
    /// sets): empty when the hypervisor zeroes the leaf.
    tlb_leaf: Vec<(u32, u32, u32, u32, u32)>,
    /// AMD's TLB leaves 0x80000005 and 0x80000006 (EAX, EBX of each), decoded: `None` where
    /// they list no data TLB (Intel reserves them; a hypervisor may zero them).
    amd_tlb: Option<AmdTlb>,
    page_1g: bool,
}

/// One TLB array as a cpuid leaf lists it: entries and ways (`ways == entries`: fully
/// associative).
#[derive(Clone, Copy, Debug, PartialEq)]
struct TlbArray {
    entries: u32,
    ways: u32,
}

/// The data TLBs AMD's cpuid lists (AMD64 APM vol. 3, "CPUID Fn8000_0005 L1 Cache and TLB
/// Information" and "Fn8000_0006 L2 Cache and TLB and L3 Cache Information"). Each is `None`
/// where its size or associativity field is zero or its associativity code is reserved.
#[derive(Clone, Copy, Debug, PartialEq)]
struct AmdTlb {
    l1_4k: Option<TlbArray>,
    l1_2m: Option<TlbArray>,
    l2_4k: Option<TlbArray>,
    l2_2m: Option<TlbArray>,
}

/// Fn8000_0005's associativity fields are a count of ways, 0xFF for fully associative.
fn amd_l1_array(assoc: u32, entries: u32) -> Option<TlbArray> {
    match (assoc, entries) {
        (0, _) | (_, 0) => None,
        (0xff, e) => Some(TlbArray {
            entries: e,
            ways: e,
        }),
        (w, e) if e % w == 0 => Some(TlbArray {
            entries: e,
            ways: w,
        }),
        _ => None,
    }
}

/// Fn8000_0006's associativity fields are a 4-bit code (the APM's table; Linux's `assocs[]`
/// in arch/x86/kernel/cpu/cacheinfo.c decodes the same): 1, 2, 3, 4, 6 = 8, 8 = 16, 0xA = 32,
/// 0xB = 48, 0xC = 64, 0xD = 96, 0xE = 128 ways, 0xF fully associative, 5 = 6 ways; 0 is
/// disabled, 7 and 9 are reserved (9: "see Fn8000_001D", for caches only).
fn amd_l2_array(code: u32, entries: u32) -> Option<TlbArray> {
    let ways = match code {
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5 => 6,
        6 => 8,
        8 => 16,
        0xa => 32,
        0xb => 48,
        0xc => 64,
        0xd => 96,
        0xe => 128,
        0xf => entries,
        _ => return None,
    };
    (entries > 0 && entries.is_multiple_of(ways)).then_some(TlbArray { entries, ways })
}

/// Decodes the data-TLB fields of Fn8000_0005 (EAX: 2MB/4MB pages, EBX: 4KB pages; bits 31:24
/// ways, 23:16 entries) and Fn8000_0006 (EAX: 2MB/4MB, EBX: 4KB; bits 31:28 ways code, 27:16
/// entries). `None` when neither level lists a 4KB data TLB.
fn amd_tlb_decode(l1: (u32, u32), l2: (u32, u32)) -> Option<AmdTlb> {
    let f1 = |r: u32| amd_l1_array(r >> 24, (r >> 16) & 0xff);
    let f2 = |r: u32| amd_l2_array(r >> 28, (r >> 16) & 0xfff);
    let t = AmdTlb {
        l1_4k: f1(l1.1),
        l1_2m: f1(l1.0),
        l2_4k: f2(l2.1),
        l2_2m: f2(l2.0),
    };
    (t.l1_4k.is_some() && t.l2_4k.is_some()).then_some(t)
}

#[allow(unused_unsafe)]
fn cpu() -> Cpu {
    // SAFETY: cpuid exists on every x86-64 processor; leaves above the maximum return zeros
    // or the highest leaf's values, which are checked against the maximum below.
    unsafe {
        let max = __cpuid(0).eax;
        let vendor: String = {
            let r = __cpuid(0);
            [r.ebx, r.edx, r.ecx]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .filter(|&b| b != 0)
                .map(|b| b as char)
                .collect()
        };
        let ext = __cpuid(0x8000_0000).eax;
        let mut brand = String::new();
        if ext >= 0x8000_0004 {
            for l in 0x8000_0002..=0x8000_0004u32 {
                let r = __cpuid(l);
                for w in [r.eax, r.ebx, r.ecx, r.edx] {
                    brand.extend(w.to_le_bytes().iter().map(|&b| b as char));
                }
            }
        }
        let brand = brand
            .trim_matches(|c: char| c == '\0' || c.is_whitespace())
            .to_string();
        let guest = (__cpuid(1).ecx >> 31) & 1 == 1;
        let mut hypervisor = String::new();
        if guest {
            let r = __cpuid(0x4000_0000);
            for w in [r.ebx, r.ecx, r.edx] {
                hypervisor.extend(
                    w.to_le_bytes()
                        .iter()
                        .filter(|&&b| b != 0)
                        .map(|&b| b as char),
                );
            }
        }
        // Deterministic cache parameters: Intel's leaf 4; AMD's leaf 0x8000001D has the same
        // layout (AMD64 APM vol. 3, "CPUID Fn8000_001D Cache Topology Information", present
        // with TopologyExtensions, Fn8000_0001 ECX bit 22), where AMD's leaf 4 is reserved
        // (zeros).
        let mut caches = if max >= 4 { cache_leaf(4) } else { Vec::new() };
        let mut leaf = "leaf 4";
        let topoext = ext >= 0x8000_0001 && (__cpuid(0x8000_0001).ecx >> 22) & 1 == 1;
        if caches.is_empty() && topoext && ext >= 0x8000_001D {
            caches = cache_leaf(0x8000_001D);
            leaf = "leaf 0x8000001D";
        }
        let mut tlb_leaf = Vec::new();
        if max >= 0x18 {
            let n = __cpuid_count(0x18, 0).eax;
            for i in 0..=n.min(32) {
                let r = __cpuid_count(0x18, i);
                let kind = r.edx & 31;
                if kind != 0 {
                    tlb_leaf.push((kind, (r.edx >> 5) & 7, r.ebx & 15, r.ebx >> 16, r.ecx));
                }
            }
        }
        let page_1g = ext >= 0x8000_0001 && (__cpuid(0x8000_0001).edx >> 26) & 1 == 1;
        let amd_tlb = if ext >= 0x8000_0006 {
            let (a, b) = (__cpuid(0x8000_0005), __cpuid(0x8000_0006));
            amd_tlb_decode((a.eax, a.ebx), (b.eax, b.ebx))
        } else {
            None
        };
        Cpu {
            brand,
            vendor,
            guest,
            hypervisor,
            caches,
            cache_leaf: leaf,
            tlb_leaf,
            amd_tlb,
            page_1g,
        }
    }
}

/// The data and unified caches a deterministic-cache-parameters leaf lists (Intel leaf 4, AMD
/// leaf 0x8000001D: EAX type 4:0 and level 7:5, EBX line size 11:0 and ways 31:22, ECX sets,
/// each minus one), one subleaf per cache until type 0.
#[allow(unused_unsafe)]
fn cache_leaf(leaf: u32) -> Vec<CacheLevel> {
    let mut caches = Vec::new();
    for i in 0..16 {
        // SAFETY: the caller checked that the leaf exists (cpuid exists on every x86-64).
        let r = unsafe { __cpuid_count(leaf, i) };
        let kind = r.eax & 31;
        if kind == 0 {
            break;
        }
        // Data (1) and unified (3) caches.
        if kind == 1 || kind == 3 {
            caches.push(CacheLevel {
                level: (r.eax >> 5) & 7,
                ways: (r.ebx >> 22) + 1,
                sets: r.ecx + 1,
                line: (r.ebx & 0xfff) + 1,
            });
        }
    }
    caches
}

/// The TLB sweep's page counts: 2^k and 1.5 x 2^k, from 8 to `max`.
fn sweep_points(max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut p = 8;
    while p <= max {
        v.push(p);
        if p + p / 2 <= max {
            v.push(p + p / 2);
        }
        p *= 2;
    }
    v
}

/// The first point after which `o` (by `points`) rises above `threshold`: the previous point.
fn knee(points: &[usize], o: &[f64], from: usize, threshold: f64) -> Option<usize> {
    (1..points.len())
        .find(|&i| points[i] > from && o[i] > threshold)
        .map(|i| points[i - 1])
}

pub fn calibrate(args: &CalibrateArgs) -> Result<String> {
    let plan = if args.quick {
        Plan {
            quick: true,
            reps: 7,
            ms: 2.0,
            dram_footprint: 512 << 20,
            pages_4k: 131_072,
            pages_2m: 128,
        }
    } else {
        Plan {
            quick: false,
            reps: 21,
            ms: 3.0,
            dram_footprint: 1 << 30,
            pages_4k: 262_144,
            pages_2m: 256,
        }
    };
    let started = Instant::now();
    let mut pr = Progress {
        quiet: args.quiet,
        tty: std::io::stderr().is_terminal(),
        step: 0,
        total: 15,
        t0: started,
        ghz: f64::NAN,
    };
    let reps = plan.reps;

    // Free page reporting off for the whole calibration (reporting.rs): held until this
    // function returns.
    let leave = args.leave_reporting.then_some("--leave-reporting");
    let reporting = super::reporting::hold(leave, &mut |what| {
        if !args.quiet {
            eprintln!("{what} ...");
        }
    });
    if !args.quiet {
        eprintln!("{}", reporting.describe());
    }

    // 1. cpuid.
    pr.start("cpuid");
    let cpu = cpu();
    if cpu.caches.is_empty() {
        anyhow::bail!(
            "cpuid lists no data caches (neither Intel's leaf 4 nor AMD's leaf 0x8000001D; \
             processor {:?}): the cache geometry cannot be read, so no machine file was written",
            cpu.brand
        );
    }
    let guest_text = if cpu.guest {
        format!(
            "a guest (cpuid leaf 1 ECX bit 31; hypervisor {:?})",
            cpu.hypervisor
        )
    } else {
        "not a guest (cpuid leaf 1 ECX bit 31 clear)".to_string()
    };
    pr.done(
        "cpuid",
        &format!(
            "{}; {}; caches {}; leaf 0x18 {}",
            cpu.brand,
            guest_text,
            cpu.caches
                .iter()
                .map(|c| format!(
                    "L{} {} {}-way",
                    c.level,
                    mib((c.ways * c.sets * c.line) as usize),
                    c.ways
                ))
                .collect::<Vec<_>>()
                .join(", "),
            if cpu.tlb_leaf.is_empty() {
                "zeroed".to_string()
            } else {
                format!("{} TLB entries listed", cpu.tlb_leaf.len())
            }
        ),
    );

    // 2. Clock: dependent add and imul chains.
    pr.start("clock");
    let iters = 20_000;
    // The clock's first burst (`bench::Clock`), and its cross-check, dependent imuls, once.
    // The others run at the spread sites: every time below is converted to cycles after the
    // last (`bench::Cyc`), at the median of the bursts' medians. Decisions taken during the run
    // in cycles (the TLB sweep's knees, the host page test) use the clock of the bursts so far.
    let mut clock = bench::Clock::new(3 * reps, iters);
    clock.burst();
    let first = clock.bursts[0].clone();
    bench::imul_chain(iters);
    let (imul, _) = bench::spaced_runs(3 * reps, iters, bench::imul_chain);
    let imul = bench::Stat::new(imul.samples.iter().map(|x| x / 3.0).collect());
    let ghz_first = 1.0 / first.pct(50.0);
    let ghz_imul = 1.0 / imul.pct(50.0);
    let imul_text = format!(
        "cross-check at the first burst: dependent imuls (3 cycles each) give {ghz_imul:.3} GHz (median of {} runs, \
         spread {:.1}%) where its adds gave {ghz_first:.3} (median of {} runs, spread {:.1}%)",
        imul.n(),
        imul.spread(),
        first.n(),
        first.spread()
    );
    pr.ghz = ghz_first;
    pr.done(
        "clock",
        &format!(
            "first burst {ghz_first:.3} GHz from adds, {ghz_imul:.3} GHz from imuls (medians of {} runs, spread {:.1}%; {} preempted runs discarded); \
             the clock is the median over this and one burst at each spread site",
            first.n(),
            first.spread(),
            clock.dropped
        ),
    );
    // The 4KB faults (benchmark 10) run in FAULT_BURSTS bursts, here and between the
    // benchmarks up to 10 (`spread_site`), so that a slow phase of the machine (about a second
    // of other tenants' faults and memory traffic) cannot cover them all. Three bursts until
    // 2026-11-28 13:30: the 2MB first touch, the median of their p10s, still moved 12.7%
    // (huge_zero_page_cycles 662 / 578) in a quiet pair; a median of eight is moved by no
    // three slow bursts.
    let fault_reps = (2 * reps).div_ceil(FAULT_BURSTS);
    let mut fault_runs = FaultRuns::default();
    // Zeroing and copying (benchmark 11) the same way, beside the faults'.
    let zlen = if plan.quick { 256 << 20 } else { 512 << 20 };
    let mut zc = ZeroCopyRuns::new(zlen)?;
    // The LLC's latency and the read stream get bursts at the same points once their memory is
    // set up (`Spread`); the line lifetime's passes too (3b).
    let mut spread = Spread::new(reps.div_ceil(3), plan.ms, clock);
    let mut life_runs: Option<LifetimeRuns> = None;
    // One spread site between two benchmarks: every burst above takes its turn (the same
    // five states each time; the last site, at benchmark 11, has no fault burst).
    macro_rules! spread_site {
        () => {
            spread_site(
                &mut life_runs,
                Some(&mut fault_runs),
                &mut zc,
                &mut spread,
                fault_reps,
            )?;
            pr.ghz = spread.clock.ghz();
        };
    }
    spread_site!();

    // 3. Data-cache latency plateaus: chases over growing footprints (THP memory).
    pr.start("cache latency plateaus");
    let span = 2 * plan.dram_footprint;
    let big = Region::map(span, Thp::Huge)?;
    big.touch();
    let big_thp = big.anon_huge_bytes();
    let mut rng = Rng::new(1);
    // L2's size (cpuid), for the footprints and probes sized by it below.
    let l2_bytes = cpu
        .caches
        .get(1)
        .map(|c| (c.ways * c.sets * c.line) as usize);
    let foots = sweep_footprints(plan.dram_footprint, l2_bytes);
    // The footprints up to twice L2 (L1, L2 and the LLC's latency point) are interleaved: each
    // in its own part of the region, all linked first, then every round times each once, so
    // that a slow phase of the machine falls on all of them alike. One at a time (until
    // 2026-11-27), one run of a quiet batch read 25 cycles at L2's point against 22-24: its 1 to
    // 2 MiB points (25, 43, 81 cycles against 22, 27, 48) were all taken in the same few
    // seconds. The larger ones stay one at a time, each in steady state: interleaved, the LLC's
    // knee moved down (6 MiB read 308 and 172 cycles, as its 3 ms runs began on lines the
    // footprint before had evicted, against 110-122 one at a time in the same minutes).
    let small: Vec<usize> = foots
        .iter()
        .copied()
        .filter(|&f| f <= 2 * l2_bytes.unwrap_or(2 << 20))
        .collect();
    let mut placed = Vec::new();
    let mut off = 0usize;
    for &f in &small {
        if off + 2 * f > big.len {
            break;
        }
        let nodes: Vec<usize> = bench::random_lines(2 * f, &mut rng)
            .into_iter()
            .map(|o| o + off)
            .collect();
        let starts = bench::link(&big, &nodes, 1);
        placed.push((f, starts[0], bench::warm_hops(f, nodes.len())));
        off += (2 * f).next_multiple_of(HUGE);
    }
    // Each round also times an add chain (the last quantity): the core's clock in the same
    // rounds, so that the core-clocked levels (L1, L2) are counted in its cycles. Converted at
    // the calibration's median clock instead (until 2026-11-27 14:15), a pair on the AMD guest
    // read L1 4 and 5 cycles: 1.41 ns in a phase at a lower turbo bin, where validate's row
    // measured 1.25 ns = 4.0 cycles minutes later, so every L1-bound row read +21-25%.
    let mut psamples = bench::Interleaved::new(placed.len() + 1);
    for _ in 0..reps {
        psamples.round(|i| match placed.get(i) {
            Some(&(_, start, warm)) => bench::time_chase(start, warm, 1, plan.ms).samples[0],
            None => bench::add_chain(iters),
        });
    }
    // Each interleaved point's hop over the L1 point's hop in the same round (L2's latency
    // below is counted in L1 hits, an integer number of cycles).
    let l1_point = cpu
        .caches
        .first()
        .map(|c| (c.ways * c.sets * c.line) as usize / 2)
        .and_then(|half| placed.iter().rposition(|p| p.0 <= half));
    let ratio_to_l1: Vec<Option<(f64, f64, f64, usize)>> = (0..placed.len())
        .map(|i| l1_point.and_then(|j| psamples.ratio(i, j)))
        .collect();
    let mut pstats = psamples.stats();
    let local_add = pstats.pop().expect("the add chain's samples");
    let mut curve: Vec<(usize, Stat)> = placed.iter().map(|p| p.0).zip(pstats).collect();
    let mut dram_nodes = Vec::new();
    for &foot in foots.iter().skip(curve.len()) {
        let nodes = bench::random_lines(2 * foot, &mut rng);
        let starts = bench::link(&big, &nodes, 1);
        let s = bench::time_chase(
            starts[0],
            bench::warm_hops(foot, nodes.len()),
            reps,
            plan.ms,
        );
        if foot == plan.dram_footprint {
            dram_nodes = nodes;
        }
        curve.push((foot, s));
    }
    if dram_nodes.is_empty() {
        // The DRAM footprint among the interleaved ones (not with this module's plans).
        dram_nodes = bench::random_lines(2 * plan.dram_footprint, &mut rng);
    }
    let at = |f: usize| -> &Stat {
        let i = curve.iter().rposition(|(x, _)| *x <= f).unwrap_or(0);
        &curve[i].1
    };
    let at_foot = |f: usize| -> usize {
        curve
            .iter()
            .map(|(x, _)| *x)
            .rfind(|&x| x <= f)
            .unwrap_or(curve[0].0)
    };
    let curve_text = curve
        .iter()
        .map(|(f, s)| format!("{} {:.0}", mib(*f), Cyc(s.low())))
        .collect::<Vec<_>>()
        .join(", ");
    pr.done(
        "cache latency plateaus",
        &format!(
            "cycles per hop by footprint: {curve_text} (THP granted {} of {})",
            mib(big_thp as usize),
            mib(big.len)
        ),
    );

    // Cache levels from cpuid (leaf 4 or 0x8000001D), latency from the plateau at half of each level.
    let mut levels: Vec<(String, u64, u32, Latency, String)> = Vec::new(); // name, size, ways, latency, source
                                                                           // The last level's latency footprint, its latency sentence and ns on the curve.
    let mut llc_point: Option<(usize, String, f64)> = None;
    let data_caches: Vec<&CacheLevel> = cpu.caches.iter().take(3).collect();
    let nlev = data_caches.len();
    for (i, c) in data_caches.iter().enumerate() {
        let size = c.ways as u64 * c.sets as u64 * c.line as u64;
        let pow_sets = if c.sets.is_power_of_two() {
            c.sets
        } else {
            // Nearest power of two (log scale): the model indexes sets with bits.
            let lo = 1u32 << (31 - c.sets.leading_zeros());
            if (c.sets as f64 / lo as f64) < ((2 * lo) as f64 / c.sets as f64) {
                lo
            } else {
                2 * lo
            }
        };
        let msize = c.ways as u64 * pow_sets as u64 * 64;
        // The footprint: half of L1; for L2 `l2_footprint` (4x L1); 1.5x the level below for
        // the last level (its capacity is measured below: a shared LLC is rarely all ours).
        let f = if i + 1 == nlev && i > 0 {
            let below = data_caches[i - 1];
            3 * (below.ways * below.sets * below.line) as usize / 2
        } else if i == 1 {
            let l1 = data_caches[0];
            l2_footprint((l1.ways * l1.sets * l1.line) as usize, size as usize)
        } else {
            (size / 2) as usize
        };
        let f = at_foot(f);
        let s = at(f);
        let name = if i + 1 == nlev && i > 0 {
            "LLC".to_string()
        } else {
            format!("L{}{}", c.level, if c.level == 1 { "D" } else { "" })
        };
        let geo = if pow_sets == c.sets {
            format!(
                "cpuid {}: {} {}-way, {} sets of {}-byte lines",
                cpu.cache_leaf,
                mib(size as usize),
                c.ways,
                c.sets,
                c.line
            )
        } else {
            format!(
                "cpuid {}: {} {}-way, {} sets of {}-byte lines; the model needs a power-of-two \
                 number of sets: {} sets ({})",
                cpu.cache_leaf,
                mib(size as usize),
                c.ways,
                c.sets,
                c.line,
                pow_sets,
                mib(msize as usize)
            )
        };
        // L1 runs at the core's clock and is a whole number of its cycles: its chase's p10 over
        // the p10 of the add chains timed in the same rounds. Every other level, L2 included
        // (since 2026-11-29 06:30), is its hop's ns at the calibration's clock (`freq_hz`), as
        // the last level's and DRAM's: the model prices a hit at that one clock, so the file's
        // cycles must give back the ns measured. L2 counted in L1 hits (its hop over the L1
        // point's in the same round, times L1's cycles; 2026-11-28 21:20 to 2026-11-29) read
        // 14.3-15.9 cycles in 17 calibrations of 2026-11-28/29 where the hop's ns at `freq_hz`
        // read 15.4-16.9 (16 in most), the 16 cycles scripts/l2-interleaved.c counts natively
        // in every run: the L1 point in calibrate's rounds runs slower than at the file's clock
        // (1.35 ns a hop, where validate's L1 row reads 1.20 at 4.19 GHz, 5 cycles), so the
        // ratio put L2 at 14 where validate's L2 row measured 16.4-17.9 cycles at `freq_hz`
        // (-18.6% and -22.0% misses; docs/validation.md, "L2 at the file's clock"). The two
        // other readings stay in the source text as cross-checks.
        let core_clocked = i < 2 && i + 1 < nlev && f <= small.last().copied().unwrap_or(0);
        let in_l1_hits = match (i, levels.first().map(|l| l.3)) {
            (1, Some(Latency::Cycles(l1c))) if core_clocked && l1c.round() >= 1.0 => placed
                .iter()
                .position(|p| p.0 == f)
                .and_then(|k| ratio_to_l1[k])
                .map(|r| (l1c.round(), r)),
            _ => None,
        };
        let rule = latency_rule(i, core_clocked);
        let (lat, how_counted) = if rule == LatencyRule::AddChains {
            (
                Latency::Cycles(s.low() / local_add.low()),
                format!(
                    "counted in the core's cycles: over the p10 of the add chains timed in the same rounds ({} ns an add, {})",
                    fmt3(local_add.low()),
                    local_add.how()
                ),
            )
        } else if core_clocked {
            let l1_text = in_l1_hits.map_or(String::new(), |(l1c, (med, p10, p90, n))| {
                format!(
                    "; counted in L1 hits (the median over {n} rounds of this chase's hop over the L1 point's in the same round, {med:.3}, p10 {p10:.3}, p90 {p90:.3}, times L1's {l1c:.0} cycles) it reads {:.1}",
                    l1c * med
                )
            });
            (
                Latency::Ns(s.low()),
                format!(
                    "at the calibration's clock (freq_hz), the clock the model prices a hit at{l1_text}; over the p10 of the add chains timed in the same rounds ({} ns an add) {:.1}: both count the cycles of the clock these rounds ran at, which is not the file's",
                    fmt3(local_add.low()),
                    s.low() / local_add.low()
                ),
            )
        } else {
            (
                Latency::Ns(s.low()),
                "at the calibration's clock (freq_hz)".to_string(),
            )
        };
        let lat_text = format!(
            "Latency: calibrate: chase over {} (one line of each 128 B pair, random order, THP memory), \
             {:.2} ns = {} cycles {how_counted}, {}.",
            mib(f),
            s.low(),
            lat.text(),
            s.how()
        );
        let src =
            format!("{geo}. {lat_text} Replacement: assumed (not measurable here), skylake's.");
        if i + 1 == nlev && i > 0 {
            // The last level's latency is measured again in bursts over the calibration
            // (`Spread`), and this sentence replaced at the end.
            llc_point = Some((f, lat_text, s.low()));
        }
        levels.push((name, msize, c.ways, lat, src));
    }
    // DRAM: the plateau from 4x to 32x the LLC's capacity (further on, the latency grows with
    // the translations: the model adds its own walks).
    let plateau_of = |llc_eff: usize| -> Vec<&(usize, Stat)> {
        let p: Vec<&(usize, Stat)> = curve
            .iter()
            .filter(|(f, _)| *f >= 4 * llc_eff && *f <= 32 * llc_eff)
            .collect();
        if p.is_empty() {
            vec![curve.last().unwrap()]
        } else {
            p
        }
    };
    // The median of the points' low percentiles, and that point's samples.
    fn median_low<'a>(p: &[&'a (usize, Stat)]) -> (f64, &'a Stat) {
        let mut v: Vec<(f64, &Stat)> = p.iter().map(|(_, s)| (s.low(), s)).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v[v.len() / 2]
    }
    // cpuid's geometry of every level (the model's power-of-two sets), before the LLC's share
    // replaces its capacity below (and comes back when a line lifetime is measured).
    let cpuid_geometry: Vec<(u64, u32)> = levels.iter().map(|l| (l.1, l.2)).collect();
    let mut share_note = String::new();
    let mut llc_eff = plan.dram_footprint / 8;
    // The last level's capacity that is ours: the largest footprint, from its latency's
    // footprint on, still closer to its latency than to DRAM's. A shared LLC (other tenants,
    // cache allocation technology in a cloud guest) can be far smaller than cpuid's. DRAM's
    // latency for "half way": first the median from 16x the level below to a quarter of the
    // largest footprint (the largest itself carries this machine's own walks, and under load
    // reached 647 and 1,195 cycles against a 400-cycle plateau, putting "half way" at 16 to
    // 512 MiB), then the plateau the first pass's capacity gives.
    if nlev >= 2 {
        let li = nlev - 1;
        let c = data_caches[li];
        let cpuid_size = c.ways as usize * c.sets as usize * c.line as usize;
        let b = data_caches[li - 1];
        let from = at_foot(3 * (b.ways * b.sets * b.line) as usize / 2);
        let far: Vec<&(usize, Stat)> = curve
            .iter()
            .filter(|(f, _)| {
                *f >= 16 * (b.ways * b.sets * b.line) as usize && *f <= plan.dram_footprint / 4
            })
            .collect();
        // In ns: the same decisions as in cycles at any one clock.
        let mut dram_guess = if far.is_empty() {
            at(plan.dram_footprint).low()
        } else {
            median_low(&far).0
        };
        let mut eff = from;
        let mut half = 0.0;
        for _pass in 0..2 {
            half = (levels[li].3.ns(spread.clock.ghz()) + dram_guess) / 2.0;
            eff = curve
                .iter()
                .filter(|(f, _)| *f >= from)
                .take_while(|(_, s)| s.low() <= half)
                .map(|(f, _)| *f)
                .last()
                .unwrap_or(from);
            dram_guess = median_low(&plateau_of(eff)).0;
        }
        llc_eff = eff;
        // The share: where the latency crosses half way, between the last footprint within
        // half way and the next one. The sweep's points there are 1.5x to 2x apart and the
        // knee often falls on one of them (at 8 MiB: 118, 219 and 245 cycles in three runs of
        // one quiet hour), so a line between two points moved the share 8.3 -> 10.3 MiB. The
        // bracket is measured again, ends included, at REFINE_STEPS + 1 evenly spaced
        // footprints (the same chase, repeats and statistics), and the share is the first
        // crossing on that finer curve.
        // If the knee has moved out of the bracket by then (its first point is already above
        // half way, or its last still below: the share moves with the other tenants, 7 to 8
        // MiB within minutes here), the neighbouring bracket is measured the same way, once.
        let mut lo = eff;
        let mut hi = curve.iter().map(|(f, _)| *f).find(|&f| f > eff);
        let mut share = eff as f64;
        let mut fine_text = String::from("none: the sweep's last footprint");
        for _attempt in 0..2 {
            let Some(fb) = hi else { break };
            let mut fine = Vec::new();
            for k in 0..=REFINE_STEPS {
                let f = (lo + (fb - lo) * k / REFINE_STEPS) & !4095;
                let nodes = bench::random_lines(2 * f, &mut rng);
                let starts = bench::link(&big, &nodes, 1);
                let s =
                    bench::time_chase(starts[0], bench::warm_hops(f, nodes.len()), reps, plan.ms);
                fine.push((f as f64, s.low()));
            }
            fine_text = fine
                .iter()
                .map(|(f, c)| format!("{} {:.0}", mib(*f as usize), Cyc(*c)))
                .collect::<Vec<_>>()
                .join(", ");
            share = first_crossing(&fine, half);
            let below = curve
                .iter()
                .map(|(f, _)| *f)
                .rfind(|&f| f < lo && f >= from);
            let above = curve.iter().map(|(f, _)| *f).find(|&f| f > fb);
            match (below, above) {
                (Some(b), _) if fine[0].1 > half => {
                    hi = Some(lo);
                    lo = b;
                }
                (_, Some(a)) if fine.last().is_some_and(|p| p.1 <= half) => {
                    lo = fb;
                    hi = Some(a);
                }
                _ => break,
            }
        }
        share_note = format!(
            "{} (half way to DRAM, {:.0} cycles, on the footprint curve)",
            mib(share as usize),
            Cyc(half)
        );
        if share * 2.0 <= cpuid_size as f64 {
            let (sets, ways) = share_geometry(share, c.ways);
            let size = (sets * ways as usize * 64) as u64;
            levels[li].1 = size;
            levels[li].2 = ways;
            levels[li].4 += &format!(
                " Capacity: the chases' latency crosses half way to DRAM's ({:.0} cycles) at {} (first crossing, \
                 linearly between neighbours, of the bracket from {} to the next footprint of the latency curve in \
                 caches.source (or a neighbouring one, if the knee had moved there) measured again at {} footprints, p10 of {} runs each, cycles per hop: {}), so the \
                 model gets {} ({} sets of {} ways: the fewest \
                 power-of-two sets whose {} ways hold it, and the share in ways of those sets, so that a share \
                 between two sizes is not rounded to a power of two), not cpuid's {}: the share of the LLC this \
                 machine gets.",
                Cyc(half),
                mib(share as usize),
                mib(lo),
                REFINE_STEPS + 1,
                reps,
                fine_text,
                mib(size as usize),
                sets,
                ways,
                c.ways,
                mib(cpuid_size)
            );
        }
    }
    let plateau = plateau_of(llc_eff);
    let (dram_ns, dram_stat) = median_low(&plateau);
    // Every plateau point (footprint, its p10 ns): `fit_latency` replays each chase on
    // the model and the file takes the median of the per-point fits (`median_fit`).
    let dram_fit_points: Vec<(usize, f64)> = plateau.iter().map(|p| (p.0, p.1.low())).collect();
    // The measured hop; in cycles (`dram_cycles`) once the clock is known, and the file's
    // `dram_latency` is fitted to it at the end, once the TLBs, walk and [nested] tables the
    // model's prediction needs are written.
    let caches_src = format!(
        "calibrate: DRAM latency, the median of the chases' p10 over footprints {} to {} (4x to 32x the LLC's \
         capacity; one line of each 128 B pair, random order, THP memory: AnonHugePages {} of {}): {:.1} ns = {:.0} cycles \
         a hop (that point's {}). {DRAM_FIT_MARK} The latency curve (cycles per hop by footprint; \
         every point beyond the STLB's reach also carries that chase's translations): {curve_text}",
        mib(plateau[0].0),
        mib(plateau.last().unwrap().0),
        mib(big_thp as usize),
        mib(big.len),
        dram_ns,
        Cyc(dram_ns),
        dram_stat.how()
    );

    // The bursts of the LLC's latency and of the read stream (benchmark 9) from here on
    // (`Spread`): the LLC's point in its own region, linked once; the stream over `big`, which
    // is held until the last burst.
    if let Some((f, _, _)) = &llc_point {
        spread.set_llc(*f, &mut Rng::new(3))?;
    }
    spread.set_stream(&big, plan.dram_footprint);

    // 3b. The LLC's line lifetime: how long an untouched line stays in it on this host. Its
    // first pass here, the others between the benchmarks below (`LifetimeRuns`), the fit after
    // the last.
    let llc_lat_ns = levels.last().map_or(0.0, |l| l.3.ns(spread.clock.ghz()));
    if nlev >= 2 {
        pr.start("LLC line lifetime");
        let li = nlev - 1;
        // The LLC latency point's footprint (1.5x L2, a point of the latency curve: 768 KiB of
        // lines on the AMD guest since 2026-11-28, 512 KiB before, when the curve had no 768
        // KiB point): mostly L2 misses in a random cycle, within any share of the LLC measured
        // on these guests (2 MiB and up; at twice L2 the spin-free round itself missed, 297
        // cycles a hop, in a run at load average 3.5).
        let below = data_caches[li - 1];
        let foot = at_foot(3 * (below.ways * below.sets * below.line) as usize / 2);
        let t = Instant::now();
        let mut lr = LifetimeRuns::new(foot, reps)?;
        lr.pass();
        let first = lr.finish(llc_lat_ns, dram_ns)?;
        let ms = |x: Option<f64>| x.map_or("never".to_string(), |v| format!("{:.2} ms", v / 1e6));
        pr.done(
            "LLC line lifetime",
            &format!(
                "pass 1 of {LIFETIME_PASSES} ({:.1} s; the others run between the benchmarks below, the lifetime is fitted over all after the last): {}; median hop cycles by round time: {}",
                t.elapsed().as_secs_f64(),
                ms(first.ns),
                first
                    .curve
                    .iter()
                    .map(|(t, h, _)| format!("{:.1} ms {:.0}", t / 1e6, Cyc(*h)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        life_runs = Some(lr);
    }

    // 4. TLB sweep: one line per 4KB page over growing page counts, against packed controls.
    pr.start("TLB sweep (4KB pages)");
    let r4k = Region::map(plan.pages_4k * PAGE, Thp::No)?;
    r4k.touch();
    let ctrl = Region::map(16 << 20, Thp::Huge)?;
    ctrl.touch();
    let tlb_max = 32_768.min(plan.pages_4k);
    let points = sweep_points(tlb_max);
    let mut tlb_s: Vec<Vec<f64>> = vec![Vec::new(); points.len()];
    let mut ctl_s: Vec<Vec<f64>> = vec![Vec::new(); points.len()];
    let treps = reps;
    for rep in 0..treps {
        let mut rng = Rng::new(100 + rep as u64);
        for (i, &n) in points.iter().enumerate() {
            let nodes = bench::per_page_nodes(n, PAGE, &mut rng);
            let st = bench::link(&r4k, &nodes, 1);
            let s = bench::time_chase(st[0], 4 * n, 1, plan.ms / 2.0);
            tlb_s[i].push(s.samples[0]);
            let nodes = bench::packed_nodes(n, &mut rng);
            let st = bench::link(&ctrl, &nodes, 1);
            let s = bench::time_chase(st[0], 4 * n, 1, plan.ms / 2.0);
            ctl_s[i].push(s.samples[0]);
        }
    }
    let tlb_stats: Vec<Stat> = tlb_s.into_iter().map(Stat::new).collect();
    let ctl_stats: Vec<Stat> = ctl_s.into_iter().map(Stat::new).collect();
    // The extra time by pages, ns (the file's cycles are converted at the end, `bench::Cyc`);
    // the knees below are found in cycles at the clock of the bursts so far (`g`), as their
    // thresholds are in cycles.
    let g = spread.clock.ghz();
    let over_ns: Vec<f64> = (0..points.len())
        .map(|i| tlb_stats[i].low() - ctl_stats[i].low())
        .collect();
    let over: Vec<f64> = over_ns.iter().map(|o| o * g).collect();
    let base = over[..points.iter().filter(|&&p| p <= 32).count().max(1)]
        .iter()
        .cloned()
        .fold(f64::INFINITY, f64::min);
    let l1_reach = knee(&points, &over, 0, base + 2.0).unwrap_or(64);
    let stlb_probe = points
        .iter()
        .position(|&p| p >= 4 * l1_reach)
        .unwrap_or(points.len() / 2);
    let median = |v: &mut Vec<f64>| -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        if v.is_empty() {
            0.0
        } else {
            v[v.len() / 2]
        }
    };
    // The STLB hit: the median extra cycles from 2x to 8x the L1 reach.
    let stlb_hit = median(
        &mut points
            .iter()
            .zip(&over)
            .filter(|(p, _)| **p >= 2 * l1_reach && **p <= 8 * l1_reach)
            .map(|(_, o)| *o)
            .collect(),
    )
    .max(0.0);
    // The walk level just past the STLB: the first point well above the hit level, with the
    // two after it (further on, the page tables themselves fall out of the caches).
    let walk_at = (stlb_probe..points.len())
        .find(|&i| over[i] > 4.0 * stlb_hit + 16.0)
        .unwrap_or(points.len() - 1);
    let walk_level = median(&mut over[walk_at..(walk_at + 3).min(points.len())].to_vec());
    let stlb_halfway = knee(
        &points,
        &over,
        points[stlb_probe],
        (stlb_hit + walk_level) / 2.0,
    )
    .unwrap_or(tlb_max);
    // The capacity: the set-overflow fit (`stlb_capacity_fit`) over the points from 2x the L1
    // reach to two past the walk level's first; the halfway knee when no candidate fits.
    let fit_hi = points[(walk_at + 2).min(points.len() - 1)];
    let (stlb_reach, stlb_fit_sse) = stlb_capacity_fit(
        &points,
        &over,
        stlb_hit,
        walk_level,
        2 * l1_reach,
        fit_hi,
        points[stlb_probe],
    )
    .unwrap_or((stlb_halfway, f64::NAN));
    // The values the file gets, in ns until the clock is known.
    let (stlb_hit_ns, walk_level_ns) = (stlb_hit / g, walk_level / g);
    let walk_over = Cyc(*over_ns.last().unwrap());
    let sweep_text = points
        .iter()
        .zip(&over_ns)
        .map(|(p, o)| format!("{p} {:.1}", Cyc(*o)))
        .collect::<Vec<_>>()
        .join(", ");
    pr.done(
        "TLB sweep (4KB pages)",
        &format!(
            "L1 reach {l1_reach} pages, STLB hit +{:.1} cycles, STLB reach {stlb_reach} pages, \
             walks beyond it +{:.1} cycles (+{walk_over:.1} at {tlb_max} pages). Extra cycles by pages: {sweep_text}",
            Cyc(stlb_hit_ns),
            Cyc(walk_level_ns)
        ),
    );
    // 4b. The walk's fixed cost, within the sweep's step (calibrate/walkcost.rs; the model's
    // charge is subtracted once the file is written).
    let walk_native = super::walkcost::measure(treps.max(9))?;
    let tlb_spread = tlb_stats.iter().map(|s| s.spread()).fold(0.0, f64::max);
    // The STLB's 4KB capacity the probes below are sized by: cpuid's where AMD lists it, else
    // the sweep's knee. The knee lies below the capacity (random pages overflow some sets
    // first) and moved between 1024 and 2048 pages on the AMD guest, which put the host-page
    // probe at 2048 or 2304 pages, at or just past a 2048-entry STLB, where many of its hops hit.
    let stlb_pages = cpu
        .amd_tlb
        .and_then(|t| t.l2_4k)
        .map_or(stlb_reach, |a| a.entries as usize);

    // A spread site (`spread_site`): the line lifetime's next pass and a burst of each of the
    // spread benchmarks.
    spread_site!();
    // 5. 2MB-stride chases on THP memory.
    pr.start("TLB sweep (2MB pages)");
    let r2m = Region::map(plan.pages_2m * HUGE, Thp::Huge)?;
    r2m.touch();
    let r2m_thp = r2m.anon_huge_bytes();
    let points2: Vec<usize> = sweep_points(plan.pages_2m);
    let mut s2: Vec<Vec<f64>> = vec![Vec::new(); points2.len()];
    for rep in 0..treps {
        let mut rng = Rng::new(200 + rep as u64);
        for (i, &n) in points2.iter().enumerate() {
            let nodes = bench::per_page_nodes(n, HUGE, &mut rng);
            let st = bench::link(&r2m, &nodes, 1);
            let s = bench::time_chase(st[0], 4 * n, 1, plan.ms / 2.0);
            s2[i].push(s.samples[0]);
        }
    }
    let s2: Vec<Stat> = s2.into_iter().map(Stat::new).collect();
    let over2_ns: Vec<f64> = points2
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let j = points.iter().position(|x| x == p).unwrap_or(0);
            s2[i].low() - ctl_stats[j].low()
        })
        .collect();
    // The knee in cycles at the clock so far, as the 4KB sweep's.
    let g = spread.clock.ghz();
    let over2: Vec<f64> = over2_ns.iter().map(|o| o * g).collect();
    let base2 = over2[0];
    let l1_reach_2m = knee(&points2, &over2, 0, base2 + 2.0);
    let sweep2_text = points2
        .iter()
        .zip(&over2_ns)
        .map(|(p, o)| format!("{p} {:.1}", Cyc(*o)))
        .collect::<Vec<_>>()
        .join(", ");
    pr.done(
        "TLB sweep (2MB pages)",
        &format!(
            "THP granted {} of {}; first rise after {} pages; extra cycles by pages: {sweep2_text}",
            mib(r2m_thp as usize),
            mib(r2m.len),
            l1_reach_2m.map_or("no".into(), |p| p.to_string())
        ),
    );

    spread_site!();
    // 6. Host page size: a 4KB-stride chase beyond the 4KB STLB reach, THP memory against 4KB
    // memory, each less a packed control. At twice the STLB's reach (4096 pages here): its lines
    // (256 KiB) and the control's (128 B apart: 512 KiB) stay well within L2, so that the
    // control costs an L2 hit and what the chases add is translation alone. At 16384 pages
    // (until 2026-11-27) the control's lines spanned 2 MiB, L2's size, and missed L2 (52-61
    // cycles a hop against 18 at 4096, this guest): it cost as much as the THP chase's walks,
    // which read as "no walks: 2MB host pages" on a host that backs this guest with 4KB pages
    // (docs/validation.md, "Runs of 2026-11-27 08:00").
    pr.start("host page size");
    let probe_pages = (2 * stlb_pages)
        .min(l2_bytes.unwrap_or(1 << 20) / 256)
        .max(stlb_pages + stlb_pages / 2)
        .min(plan.pages_4k)
        .min(plan.pages_2m * 512);
    let (mut a4, mut a2, mut ac) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..treps {
        let mut rng = Rng::new(300 + rep as u64);
        let nodes = bench::per_page_nodes(probe_pages, PAGE, &mut rng);
        let st = bench::link(&r4k, &nodes, 1);
        a4.push(bench::time_chase(st[0], 2 * probe_pages, 1, plan.ms).samples[0]);
        let st = bench::link(&r2m, &nodes, 1);
        a2.push(bench::time_chase(st[0], 2 * probe_pages, 1, plan.ms).samples[0]);
        let nodes = bench::packed_nodes(probe_pages, &mut rng);
        let st = bench::link(&ctrl, &nodes, 1);
        ac.push(bench::time_chase(st[0], 2 * probe_pages, 1, plan.ms).samples[0]);
    }
    let (a4, a2, ac) = (Stat::new(a4), Stat::new(a2), Stat::new(ac));
    // Decided in cycles at the clock so far (`g`, as the TLB sweep's knees); written in ns
    // until the clock is known.
    let g = spread.clock.ghz();
    let (o4_ns, o2_ns) = (a4.low() - ac.low(), a2.low() - ac.low());
    let (o4, o2) = (o4_ns * g, o2_ns * g);
    let stlb_hit = stlb_hit_ns * g;
    let thp_ok = r2m_thp as usize >= probe_pages * PAGE;
    // With 2MB (or larger) host pages the THP chase needs one TLB entry per 2MB guest page (8
    // here): at most an STLB hit a hop over its control. With 4KB host pages its entries are
    // 4KB (the smaller of the guest's and the host's page), beyond the STLB: a two-dimensional
    // walk a hop, less only the guest's leaf level (o2 = 32 against o4 = 58 cycles here). So
    // more than twice the STLB hit's cycles is walks.
    let splintered = thp_ok && o4 > 3.0 && o2 > 2.0 * stlb_hit.max(3.0);
    let host_page = if !thp_ok {
        format!(
            "unknown: the kernel granted only {} of THP for the probe",
            mib(r2m_thp as usize)
        )
    } else if splintered {
        "4KB: 2MB guest pages give no TLB-reach gain (the host backs them with 4KB pages: splintered)".to_string()
    } else {
        "2MB or larger: 2MB guest pages extend the TLB reach".to_string()
    };
    let host_evidence = format!(
        "a chase with one line per 4KB page over {} ({probe_pages} pages, beyond the 4KB STLB reach) costs \
         +{:.1} cycles per hop over its packed control on 4KB pages ({}) and +{:.1} on THP memory \
         (AnonHugePages {} of {}, {}); the 2MB-stride chase's extra cycles by pages: {sweep2_text}",
        mib(probe_pages * PAGE),
        Cyc(o4_ns),
        a4.how(),
        Cyc(o2_ns),
        mib(r2m_thp as usize),
        mib(r2m.len),
        a2.how()
    );
    let guest_line = if cpu.guest {
        format!("{guest_text}; host page size {host_page}")
    } else {
        format!("{guest_text}; 2MB pages: {host_page}")
    };
    pr.done(
        "host page size",
        &format!("{guest_line}. Evidence: {host_evidence}"),
    );

    // 7. Memory-level parallelism: K interleaved chases over the DRAM footprint.
    spread_site!();
    pr.start("memory-level parallelism");
    // Interleaved, as the concurrent walks below: every round runs each K once, so that a slow
    // phase of the machine falls on all K alike. With each K's repeats back to back (until
    // 2026-11-27), one run's K=4 came out 1.31x K=1's (p10 of its 15 runs, all slow) between
    // 1.85x at K=2 and 5.69x at K=6, and the knee 26.1 against 13 in four other runs of that
    // batch. The eight arrangements of K chains are linked once, side by side in the nodes'
    // lines (`link_word`: relinking 8M nodes for every K of every round took 44 s).
    let mreps = if plan.quick { 5 } else { 15 };
    let mut mstarts: Vec<Vec<*const usize>> = MLP_KS
        .iter()
        .enumerate()
        .map(|(w, &k)| bench::link_word(&big, &dram_nodes, k, w))
        .collect();
    let mut msamples = bench::Interleaved::new(MLP_KS.len());
    for _ in 0..mreps {
        msamples.round(|i| bench::time_chase_many(&mut mstarts[i], 1, plan.ms).samples[0]);
    }
    let mlp_rows: Vec<(usize, Stat)> = MLP_KS.iter().copied().zip(msamples.stats()).collect();
    let lat1 = mlp_rows[0].1.low();
    let mlp_knee = concurrency_knee(&mlp_rows);
    let mlp_best = mlp_rows
        .iter()
        .map(|(_, s)| lat1 / s.low())
        .fold(1.0, f64::max);
    let mshrs = (mlp_knee.round() as u32).clamp(1, 32);
    let mlp_text = mlp_rows
        .iter()
        .map(|(k, s)| format!("K={k} {:.2}x", lat1 / s.low()))
        .collect::<Vec<_>>()
        .join(", ");
    let mlp_spread = mlp_rows.iter().map(|(_, s)| s.spread()).fold(0.0, f64::max);
    let per_miss: Vec<(usize, f64)> = mlp_rows
        .iter()
        .map(|(k, s)| (*k, *k as f64 * s.low()))
        .collect();
    let loaded = loaded_latency_fit(&per_miss, mlp_knee);
    let loaded_ns = loaded.slope;
    let per_miss_text = per_miss
        .iter()
        .map(|(k, ns)| format!("K={k} {ns:.0}"))
        .collect::<Vec<_>>()
        .join(", ");
    pr.done(
        "memory-level parallelism",
        &format!(
            "best speedup {mlp_best:.1}x K=1's, knee at K={mlp_knee:.1}; speedup by K: {mlp_text}; \
             loaded latency {loaded_ns:.2} ns a miss per other miss in flight (K from 2; K=1 {:.1} ns below the line) \
             (ns a miss by K: {per_miss_text})",
            loaded.step
        ),
    );

    spread_site!();
    // 7b. The store buffer (calibrate/storebuf.rs): two chases through the same DRAM nodes,
    // relinked in word 0 (the arrangements above are done with), with K stores after each hop.
    pr.start("store buffer");
    let sb_starts = bench::link_word(&big, &dram_nodes, 2, 0);
    drop(dram_nodes);
    let sb_reps = if plan.quick { 5 } else { 11 };
    let sbuf = super::storebuf::measure(sb_starts[0], sb_starts[1], sb_reps, plan.ms / 2.0);
    let sb_text = sbuf
        .rows
        .iter()
        .filter(|(k, _)| k % 8 == 0 || sbuf.entries.is_some_and(|e| k.abs_diff(e as usize) <= 4))
        .map(|(k, s)| format!("K={k} {:.0}", s.low()))
        .collect::<Vec<_>>()
        .join(", ");
    let sb_spread = sbuf
        .rows
        .iter()
        .map(|(_, s)| s.spread())
        .fold(0.0, f64::max);
    pr.done(
        "store buffer",
        &match sbuf.entries {
            Some(n) => format!("{n} entries (ns a step by K: {sb_text})"),
            None => format!("no knee up to K=128, left unbounded (ns a step by K: {sb_text})"),
        },
    );

    // 7c. Whether L2 fills each line's 128-byte pair (calibrate/pairfill.rs): the buddies of a
    // chase's lines, timed after it, against the same buddies cold and from L2.
    pr.start("L2 pair lines");
    let pairs = super::pairfill::measure(if plan.quick { 5 } else { 11 })?;
    let pairs_text = pairs.text(|ns| format!("{ns:.1} ns"));
    pr.done(
        "L2 pair lines",
        &format!(
            "{} ({pairs_text})",
            if pairs.fills() {
                "filled"
            } else {
                "not filled"
            }
        ),
    );

    spread_site!();
    // 8. Concurrent page walks: K interleaved chases, one line per 4KB page, beyond the STLB,
    // over few enough pages that their lines (and the leaf entries) stay in L2: each hop
    // walks, and its data hits L2, so the chains' overlap is bounded by the walkers, not by
    // the fill buffers (over 1 GiB every hop also missed to DRAM, and the knee was the data's
    // parallelism: 10-11, an upper bound).
    pr.start("concurrent page walks");
    let mut rng = Rng::new(400);
    let l2_lines = data_caches
        .get(1)
        .map_or(16_384, |c| (c.ways * c.sets) as usize);
    let walk_pages = (8 * stlb_pages)
        .min(l2_lines / 2)
        .max(2 * stlb_pages)
        .min(plan.pages_4k);
    // The pages' frames: 64 (or more) contiguous 4KB pages of each 2MB piece of a THP region
    // split into 4KB entries (`Region::split_to_ptes`: the frames stay), so that the chase's
    // data lies in a fixed number of 2MB guest-physical ranges (walk_pages / 64), whatever the
    // guest's allocator hands out that day. Under nested paging each range is a host-table
    // entry every walk ends with, so that number sets the walk's host part. On 4KB faults'
    // frames (until 2026-11-27) the chase's 16384 pages lay in 1,100-2,300 ranges from run to
    // run, its lone walk took 45 to 100 cycles and the walks in flight came out 2.2 to 4.1 in
    // one hour; on this layout 2.7-2.9 (docs/calibrate.md). 64 contiguous pages keep the leaf
    // entries as dense as contiguous pages' (8 per 64-byte line). Without the THP granted for
    // it, the 4KB region as before.
    let ranges = r2m.len / HUGE;
    let per_range = 64.max(walk_pages.div_ceil(ranges.max(1)));
    let fixed =
        r2m_thp as usize >= r2m.len && per_range * PAGE <= HUGE && r2m.split_to_ptes().is_ok();
    let walk_pages = if fixed {
        walk_pages.min(ranges * per_range)
    } else {
        walk_pages
    };
    let walk_ranges = walk_pages.div_ceil(per_range);
    let page_nodes = bench::per_page_nodes(walk_pages, PAGE, &mut rng);
    // The chase's nodes on the fixed layout: a page moves by whole multiples of 256 KiB, so each
    // line keeps its L2 set.
    let walk_nodes: Vec<usize> = if fixed {
        page_nodes
            .iter()
            .map(|&o| {
                let (p, line) = (o / PAGE, o % PAGE);
                (p / per_range) * HUGE + (p % per_range) * PAGE + line
            })
            .collect()
    } else {
        page_nodes.clone()
    };
    let walk_region = if fixed { &r2m } else { &r4k };
    // The control's nodes: page p's line becomes line p of the region's start.
    let packed_nodes: Vec<usize> = page_nodes.iter().map(|&o| o / PAGE * LINE).collect();
    // Interleaved: every repeat runs each K once, and the control, so that a slow phase of the
    // machine (this guest's chases ran 2-5x slower for tenths of a second at a time under the
    // other vCPU's builds) falls on all of them alike, not on one K's block of repeats. The
    // control is as many lines in the same order, packed side by side (every line of
    // walk_pages / 64 4KB pages: within the L1 DTLB's reach or the STLB's, all of L2's sets
    // alike, so it hits L2 as the chase does): the lone 4KB hop less it is the walk alone.
    // History: until 2026-11-27 08:00 the lines were packed 128 B apart, filling half of L2's
    // sets, so the control missed L2 where the chase did not (it moved 42-55 cycles between
    // runs); then it was the same nodes on THP memory, whose translations hit the TLB only
    // where the host backs 2MB guest pages with 2MB pages. On a host that splinters them (4KB
    // host pages, found on both guests here) that control walked too, so the walk came out
    // short: 21% of a lone hop on the AMD EPYC guest of 2026-11-27 10:20, 1.55 walks in flight,
    // 2 walkers, where validate's 8 walking chases ran at 10.4 ns a hop against 33.3 predicted.
    let wreps = if plan.quick { 9 } else { 31 };
    let mut wsamples: Vec<Vec<f64>> = vec![Vec::new(); KS.len()];
    let mut csamples = Vec::new();
    for _ in 0..wreps {
        for (i, &k) in KS.iter().enumerate() {
            let mut starts = bench::link(walk_region, &walk_nodes, k);
            let s = bench::time_chase_many(&mut starts, 1, plan.ms);
            wsamples[i].push(s.samples[0]);
        }
        let st = bench::link(&r4k, &packed_nodes, 1);
        let s = bench::time_chase(st[0], walk_pages, 1, plan.ms);
        csamples.push(s.samples[0]);
    }
    let walk_rows: Vec<(usize, Stat)> = KS
        .iter()
        .zip(wsamples)
        .map(|(&k, v)| (k, Stat::new(v)))
        .collect();
    let ctrl = Stat::new(csamples);
    let wlat1 = walk_rows[0].1.low();
    let walk_knee = concurrency_knee(&walk_rows);
    let walk_best = walk_rows
        .iter()
        .map(|(_, s)| wlat1 / s.low())
        .fold(1.0, f64::max);
    let we = walkers_estimate(&walk_rows, &ctrl);
    let walk_share = (we.walk / wlat1).clamp(0.0, 1.0);
    let walkers_est = we.occupancy;
    let walkers = we.walkers;
    let walk_text = walk_rows
        .iter()
        .map(|(k, s)| format!("K={k} {:.2}x", wlat1 / s.low()))
        .collect::<Vec<_>>()
        .join(", ");
    let walk_spread = walk_rows
        .iter()
        .map(|(_, s)| s.spread())
        .fold(0.0, f64::max);
    pr.done(
        "concurrent page walks",
        &format!(
            "a lone hop {:.0} cycles of which the walk {:.0}% (against as many lines packed side by side), fastest {:.1} cycles a hop \
             (best speedup {walk_best:.1}x, knee at K={walk_knee:.1}): {walkers_est:.2} walks in flight, {walkers} walkers; speedup by K: {walk_text}",
            Cyc(wlat1),
            100.0 * walk_share,
            Cyc(we.sat)
        ),
    );
    drop(r4k);

    spread_site!();
    // 9. Sequential read bandwidth: its bursts (`Spread::stream_burst`) run at every spread
    // site since benchmark 3, the one just above included; the value is their median p10, taken
    // after the last (benchmark 11).
    pr.start("read stream");
    pr.done(
        "read stream",
        &format!(
            "{:.1} GB/s so far ({}; the value is taken after the last burst)",
            1.0 / spread.stream.low(),
            spread.stream.how(|ns| format!("{:.1} GB/s", 1.0 / ns))
        ),
    );

    // 10. Faults: first touch of fresh memory, 4KB pages and 2MB THPs. The 4KB runs:
    // FAULT_BURSTS bursts (`fault_burst`, at the spread sites) of fresh 8 MiB regions back to back, every fault timed on its
    // own; fault_cycles is the 10th percentile of the runs' mean fault less zero_page_cycles
    // (benchmark 11), the zeroing the model charges beside it (`fault_estimate`). Until
    // 2026-11-27 it was the median of per-run differences, a run's mean fault less a cold
    // memset of as many pages timed right after it, all in one burst: a slow phase covered the
    // burst (run means of one process 1.1 or 2.2x apart), the memset, cold and DRAM-bound,
    // moved on its own (1,250 or 1,730 cycles in runs minutes apart), and two runs gave 2293
    // and 1851 (21%). Runs 10 ms apart, tried, found the frames gone cold (one fault's p10
    // 1.01-1.24 us against 0.87-0.91 back to back). Since 2026-11-28 every run's frames are
    // cold on purpose (`fault_burst`): a program's first touch of fresh memory finds them so.
    pr.start("faults");
    spread_site!();
    let f4 = Stat::new(std::mem::take(&mut fault_runs.means));
    let f4_one = Stat::new(std::mem::take(&mut fault_runs.each));
    let f2 = HugeFaults::new(std::mem::take(&mut fault_runs.huge));
    let f2_granted = fault_runs.huge_granted;
    fault_runs.ev = None;
    pr.done(
        "faults",
        &format!(
            "4KB first touch: a run's mean fault {:.2} us ({}, {} bursts); single faults (all {}): p10 {:.2}, median {:.2}, p90 {:.2} us; \
             2MB THP first touch {:.1} us ({}, the same bursts), THP granted {} of {}",
            f4.low() / 1e3,
            f4.how(),
            fault_runs.runs,
            f4_one.n(),
            f4_one.low() / 1e3,
            f4_one.pct(50.0) / 1e3,
            f4_one.pct(90.0) / 1e3,
            f2.low() / 1e3,
            f2.how(),
            mib(f2_granted.0 as usize),
            mib(f2_granted.1 as usize)
        ),
    );

    // 11. Zeroing and copying, 4KB and 2MB, temporal and non-temporal, over a 512 MiB
    // rotation so that each target starts cold: the last spread site (no faults: theirs are
    // taken), then the values.
    pr.start("zero and copy");
    spread_site(&mut life_runs, None, &mut zc, &mut spread, fault_reps)?;
    // The clock, now that its last burst ran: every time from here on, and every `Cyc` in the
    // file (`bench::resolve_cycles`), is converted at it.
    let clock = spread.clock.clone();
    let ghz = clock.ghz();
    pr.ghz = ghz;
    let cyc = |ns: f64| ns * ghz;
    let freq_hz = (ghz * 1e9 / 1e6).round() as u64 * 1_000_000;
    let clock_src = format!(
        "calibrate: clock, a chain of dependent register adds (1 cycle each), {} ns per add = {ghz:.3} GHz, {}; {imul_text}",
        fmt3(clock.ns_per_cycle()),
        clock.how()
    );
    if !args.quiet {
        eprintln!("calibrate: clock {ghz:.3} GHz, {}", clock.how());
    }
    let dram_cycles = cyc(dram_ns).round() as u64;
    let stlb_cycles = cyc(stlb_hit_ns).round().max(1.0) as u64;
    let (stlb_hit, walk_level) = (Cyc(stlb_hit_ns), Cyc(walk_level_ns));
    let [z4t, z2t, z2n, z4n, c4t, c2n] = zc.stats();
    let per4 = |s: &bench::Bursts| cyc(s.pooled().low());
    let per4_how = |s: &bench::Bursts| {
        format!(
            "{}; the bursts' own p10s in time order: {}",
            s.pooled().how(),
            s.bursts
                .iter()
                .map(|b| format!("{:.0}", cyc(b.low())))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    pr.done(
        "zero and copy",
        &format!(
            "cycles per 4KB: zero 4KB temporal {:.0}, 4KB non-temporal {:.0}, 2MB temporal {:.0}, \
             2MB non-temporal {:.0}; copy 4KB temporal {:.0}, 2MB non-temporal {:.0}",
            per4(&z4t),
            per4(&z4n),
            per4(&z2t),
            per4(&z2n),
            per4(&c4t),
            per4(&c2n)
        ),
    );

    // The spread benchmarks' values, after their last bursts: the read stream (benchmark 9)
    // and the LLC's latency.
    let stream = std::mem::take(&mut spread.stream);
    let stream_how = stream.how(|ns| format!("{:.1} GB/s", 1.0 / ns));
    let bpc = 1.0 / cyc(stream.low());
    spread.stream_src = None;
    drop(big);
    // The LLC's latency: the median of its bursts' p10s (`bench::Bursts`: the uncore and its
    // queues are shared, and the latency moves with the other tenants' load in phases of
    // seconds: 149 and 134 cycles in a quiet pair of calibrations two minutes apart, each the
    // p10 of one block of runs within 1.5 s), in place of the latency curve's point (kept in
    // the note). The hop of a chase is a best case per burst (noise only adds time); the
    // median over the bursts is the typical phase's, which validate's LLC row, timed at another
    // moment, meets.
    let mut llc_fit_foot = None;
    if let Some((f, old_text, curve_ns)) = llc_point.take() {
        llc_fit_foot = Some(f);
        let li = nlev - 1;
        // The latency's sentence: the bursts', or the curve point's as it was without them.
        let text = if spread.llc.n() > 0 {
            let ns = spread.llc.low();
            levels[li].3 = Latency::Ns(ns);
            format!(
                "Latency: calibrate: chase over {} (one line of each 128 B pair, random order, THP memory, its own \
                 region), {ns:.2} ns = {:.1} cycles at the calibration's clock (freq_hz), {}, cycles per hop \
                 (the latency curve's point, interleaved with the smaller footprints: {:.1} cycles).",
                mib(f),
                cyc(ns),
                spread.llc.how(|ns| format!("{:.1}", cyc(ns))),
                cyc(curve_ns)
            )
        } else {
            old_text.clone()
        };
        anyhow::ensure!(
            levels[li].4.matches(&old_text).count() == 1,
            "calibrate: the LLC's source no longer holds its latency sentence to replace"
        );
        // The fit's sentence comes after the latency's (`LLC_FIT_MARK`).
        levels[li].4 = levels[li]
            .4
            .replacen(&old_text, &format!("{text} {LLC_FIT_MARK}"), 1);
    }
    let llc_lat_ns = levels.last().map_or(0.0, |l| l.3.ns(ghz));
    // The LLC's latency is fitted through the model at the end (`fit_latency`), as DRAM's.
    let llc_fit = llc_fit_foot.map(|f| (f, llc_lat_ns));

    // The values sampled over the whole calibration whose samples spread beyond
    // `bench::MOVED_PCT` (the host moved them within this run, so a second calibration may
    // differ by as much): named in the file's header and at the end. On the Intel guest the
    // LLC's bursts read 143-166 cycles in one calibration and 121-131 in the one before
    // (2026-11-28 21:21-21:27): its state follows the host's other tenants (docs/validation.md,
    // "The LLC's latency moves with the LLC's state").
    // Each on the samples its source note's "their spread" is taken over (the clock's burst
    // medians and the stream's burst p10s in ns), so the two percentages agree; shown in the
    // file's units.
    let mut moved: Vec<String> = Vec::new();
    moved.extend(bench::moved("the clock", &clock.medians(), |ns| {
        format!("{:.3} GHz", 1.0 / ns)
    }));
    moved.extend(bench::moved(
        "the LLC's latency",
        &spread.llc.lows(),
        |ns| format!("{:.0} cycles", cyc(ns)),
    ));
    moved.extend(bench::moved("the read stream", &stream.lows(), |ns| {
        format!("{:.1} GB/s", 1.0 / ns)
    }));

    // 3b, the end: the line lifetime over every pass (`LifetimeRuns`).
    let mut lifetime_ns: Option<u64> = None;
    let mut lifetime_curve: Vec<(u64, f64)> = Vec::new();
    if let Some(mut lr) = life_runs.take() {
        let li = nlev - 1;
        while lr.passes < LIFETIME_PASSES {
            lr.pass();
        }
        let lt = lr.finish(llc_lat_ns, dram_ns)?;
        // The curve at the benchmark's aimed round times, the same ages in every calibration
        // (`fixed_age_curve`). All of them: an age below a pass's shortest round (the
        // spin-free round, 1.7 to 2.2 ms on the Intel guest) takes that round's share, and a
        // grid cut at the shortest round would drop or keep the 2 ms point from run to run.
        let ages: Vec<f64> = DECAY_ROUNDS_MS.iter().map(|ms| ms * 1e6).collect();
        let life_fixed = fixed_age_curve(&lt.pass_fits, &ages, lt.base_age, dram_ns);
        let fixed_text = life_fixed
            .iter()
            .map(|p| {
                format!(
                    "{:.0} ms {:.3} (median {:.3}, spread {:.3}, to {})",
                    p.age / 1e6,
                    p.share,
                    p.median,
                    p.spread,
                    p.resolution
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let ms = |x: Option<f64>| x.map_or("never".to_string(), |v| format!("{:.2} ms", v / 1e6));
        let crossed: Vec<f64> = lt.by_pass.iter().flatten().copied().collect();
        moved.extend(bench::moved(
            "the LLC line lifetime (its passes)",
            &crossed,
            |v| format!("{:.2} ms", v / 1e6),
        ));
        let by_pass = lt
            .by_pass
            .iter()
            .map(|&x| ms(x))
            .collect::<Vec<_>>()
            .join(", ");
        let curve_text = lt
            .curve
            .iter()
            .zip(&lt.raw)
            .map(|((t, h, _), r)| format!("{:.2} ms {:.0} [{:.0}]", t / 1e6, cyc(*h), cyc(*r)))
            .collect::<Vec<_>>()
            .join(", ");
        let how = format!(
            "calibrate: line lifetime, one chase over {} of lines ({} lines, one of each 128 B pair, THP memory, one fixed random cycle) with a dependent spin after every hop (scripts/cache-decay.c's method, the spin's result in the next load's address), spins aimed at round times from 0.5 to 64 ms, each less a one-line chase with the same spin just before it, hops timed in this thread's CPU time and round times (the lines' ages) in wall time; {} passes spread over the calibration (after the latency curve, then one between each two benchmarks after it, at the spread sites), each running every spin as one block of {} consecutive rounds, spins in rising order, the block's first rounds (the way from the state the benchmark or block before left, up to {} here) cut by MSER and {} or more kept per spin over the passes (round times' spread up to {:.1}%). Every kept round of a pass is a point (its wall time, its hop) of one non-decreasing median fit by age (a round's time is its spin's and its misses', so the rounds of one spin do not share an age); over every pass's rounds, by spin, median round time, median fitted cycles per hop and [median measured]: {curve_text}. The lifetime is the median of the passes' own crossings (each pass's rounds alone, fitted so, crossing half way from its own fitted hop at the age of the LLC latency chase's lines ({:.2} ms: its {} lines at the LLC's latency, {:.0} cycles; by pass {}; the shares below are measured from it too, `pass_base`) to DRAM's ({} cycles) linearly between its spins' points: {by_pass}; their spread is the neighbours' eviction moving within the calibration, and each pass's own noise): {}; one fit over every pass's rounds crosses at {} (a pass is one sample of the neighbours' eviction, its rounds share one phase of theirs, so the median over passes, which one unusual pass does not move) (medians, not the 10th percentile of the hops: they are differences of a round and a spin timed apart, whose noise at 25 ms rounds, 90% spin, reached minus 1,000 cycles a hop in the p10; and the neighbours' evictions are what is measured here)",
            mib(lt.lines * LINE),
            lt.lines,
            lt.passes,
            lt.rounds,
            lt.cut,
            lt.reps,
            lt.spread,
            lt.base_age / 1e6,
            lt.lines,
            cyc(lt.llc_ns),
            lt.bases
                .iter()
                .map(|&b| format!("{:.0}", cyc(b)))
                .collect::<Vec<_>>()
                .join(", "),
            dram_cycles,
            ms(lt.ns),
            ms(lt.pooled)
        );
        lifetime_ns = lt.ns.map(|v| v.round().max(1.0) as u64);
        if lifetime_ns.is_some() && !args.no_lifetime_curve {
            // The whole curve too (unless --no-lifetime-curve), which the model reads as the
            // share of lines of each age gone (`lifetime_curve_ns`): the machine's eviction is
            // gradual, a threshold at the half-way point put gups 16 MiB's 2.4 ms revisits all
            // on the hit side (docs/validation.md, "Gradual expiry"). By default since its short
            // ages read the LLC (docs/calibrate.md, "The spin-free round"). Only with a
            // lifetime: a machine of one's own gets no curve of its noise.
            lifetime_curve = life_fixed
                .iter()
                .map(|p| (p.age.round() as u64, p.share))
                .collect();
        }
        if lifetime_ns.is_some() {
            // With the lifetime modelled, the LLC is cpuid's size: the footprint knee is where a
            // one-chain chase's round reaches the lifetime (docs/calibrate.md), not a capacity.
            let curve_note = format!(
                "lifetime_curve_ns is the curve at fixed ages, the aimed round times (0.5 to 64 ms; an age below a pass's shortest round takes that round's share, as one beyond its longest takes the longest's): at each, the median over the passes of each pass's fit's share of the way from its own hop at the LLC latency chase's age (above) to DRAM's (clamped to [0, 1]; a pass's fit read linearly between its spins' points, its first value below them and its last beyond), written to the decimal unit the passes' spread there (p90 - p10 of their shares) reaches, from 0.001 to 0.1, and never below the share at a younger age; the model reads it as the share of lines of that age the neighbours evicted, in place of lifetime_ns's threshold (docs/calibrate.md). By age: share (median, spread, unit): {fixed_text}."
            );
            let (size, ways) = cpuid_geometry[li];
            levels[li].1 = size;
            levels[li].2 = ways;
            levels[li].4 = format!(
                "{} Line lifetime: {how}. {} Capacity: cpuid's (the model needs power-of-two sets), not the share the footprint curve shows, {share_note}: with the lifetime modelled, that knee is where a one-chain chase's round time reaches the lifetime, and it moved 2-5.5 MiB between runs (docs/calibrate.md, \"The LLC: a lifetime, and cpuid's capacity\").",
                levels[li]
                    .4
                    .split(" Capacity: ")
                    .next()
                    .unwrap_or_default(),
                if lifetime_curve.is_empty() {
                    "The whole fit (lifetime_curve_ns, gradual expiry) was left out (--no-lifetime-curve): the model reads lifetime_ns's threshold."
                } else {
                    &curve_note
                }
            );
        } else {
            levels[li].4 +=
                &format!(" Line lifetime: none found (lines outlived the longest round): {how}.");
        }
        if !args.quiet {
            eprintln!(
                "LLC line lifetime over {} passes: {} (each pass alone: {by_pass})",
                lt.passes,
                ms(lt.ns)
            );
        }
    }

    // Derived costs.
    let zero_page = per4(&z4t).round().max(1.0) as u64;
    let zero_bulk = per4(&z2n).round().max(1.0) as u64;
    let copy_page = per4(&c4t).round().max(1.0) as u64;
    // A THP fault zeroes 2MB at whatever rate this kernel clears a huge page (4KB at a time
    // in Linux 4.3, in bulk in 6.x): what is left of the measured 2MB first touch once the
    // fault's own cycles are taken out, per 4KB. Without a granted THP, the 4KB rate.
    let fault_f = fault_estimate(&f4, zero_page as f64, ghz);
    let huge_zero = if f2_granted.0 > 0 {
        ((cyc(f2.low()) - fault_f) / 512.0).round().max(1.0) as u64
    } else {
        zero_page
    };
    let fault_total = cyc(f4.low());
    let fault = fault_f.round() as u64;

    // Assemble the file.
    let skylake = splab_sim::hw::Machine::from_spec("skylake")?;
    let mem_total = splab_sim::host::meminfo_kb("MemTotal:").unwrap_or(4 << 20) * 1024;
    let largest: u64 = if cpu.page_1g { 1 << 30 } else { 2 << 20 };
    let mem = (mem_total / largest).max(1) * largest;
    let la57 = std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| {
            t.lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|w| w == "la57"))
        })
        .unwrap_or(false);
    let va_bits = if la57 { 57 } else { 48 };
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let elapsed = started.elapsed().as_secs_f64();

    let tlb_leaf_text = if cpu.tlb_leaf.is_empty() {
        "cpuid leaf 0x18 is zeroed (by the hypervisor): geometry from the chases, ways assumed"
            .to_string()
    } else {
        format!(
            "cpuid leaf 0x18 lists {:?} (type, level, page-size bits, ways, sets)",
            cpu.tlb_leaf
        )
    };
    // The geometry: AMD's TLB leaves where they list the data TLBs (the sweep's knees are then a
    // cross-check), else the sweep's knees with assumed ways. From the sweep alone the STLB's
    // knee moved between page counts 1024, 1536 and 2048 from run to run on the AMD guest of
    // 2026-11-27 (its TLB is set associative: random pages overflow some sets before all of
    // them fill), where Fn8000_0006 lists 2048 entries, 8 ways.
    let amd = cpu.amd_tlb;
    let fully = |a: TlbArray| {
        if a.ways == a.entries {
            "fully associative".to_string()
        } else {
            format!("{} ways", a.ways)
        }
    };
    let measured_l1 =
        format!("the last page count before the extra cycles rise: {l1_reach} (extra cycles by pages: {sweep_text})");
    let (l1_entries, l1_ways, l1_4k_src) = match amd.and_then(|t| t.l1_4k) {
        Some(a) => (
            a.entries,
            a.ways,
            format!(
                "4KB: {} entries, {} (cpuid Fn8000_0005 EBX); the sweep's cross-check, {measured_l1}",
                a.entries,
                fully(a)
            ),
        ),
        None => {
            let e = l1_reach as u32;
            (
                e,
                assumed_ways(e, &[4, 8, 2]),
                format!("4KB: {e} entries, {measured_l1}; ways (the first of 4, 8, 2 dividing the entries): assumed (not measurable here; {tlb_leaf_text})"),
            )
        }
    };
    let (l1_2m_entries, l1_2m_ways, l1_2m_src) = match (
        amd.and_then(|t| t.l1_2m),
        splintered || !thp_ok,
        l1_reach_2m,
    ) {
        (Some(a), _, _) => (
            a.entries,
            a.ways,
            format!(
                "2MB: {} entries, {} (cpuid Fn8000_0005 EAX; the 2MB-stride chase's extra cycles by pages: {sweep2_text})",
                a.entries,
                fully(a)
            ),
        ),
        (None, false, Some(n)) => (
            n as u32,
            assumed_ways(n as u32, &[4, 8, 2]),
            format!("2MB: {n} entries, the first rise of the 2MB-stride chase ({sweep2_text}); ways assumed as for 4KB"),
        ),
        _ => (
            32,
            4,
            "2MB: 32 entries, 4 ways assumed (not measurable here: 2MB pages are splintered by the host), skylake's".to_string(),
        ),
    };
    let measured_stlb = format!(
        "the sweep's capacity fit: {stlb_reach} entries, of the sweep's page counts the one whose set-associative \
         LRU array (ways as below) makes the share of a random cyclic chase's pages that miss (those whose set holds \
         more pages than ways) closest to the measured share, (extra - hit) / (walk level - hit), least squares, \
         {stlb_fit_sse:.3}; the last page count before the extra cycles rise halfway to the walk level, the rule \
         until 2026-11-29, {stlb_halfway} (+{walk_level:.1} cycles; +{walk_over:.1} at {tlb_max} pages)"
    );
    // The STLB's arrays: (sizes, entries, ways).
    let (stlb_arrays, stlb_geo_src): (Vec<(&str, u32, u32)>, String) =
        match amd.and_then(|t| t.l2_4k.map(|a| (a, t.l2_2m))) {
            Some((a, Some(b))) if b.entries == a.entries => (
                vec![("\"4K\", \"2M\"", a.entries, a.ways)],
                format!(
                    "cpuid Fn8000_0006 lists {} entries, {} for 4KB (EBX) and {} entries, {} for 2MB (EAX): taken as one \
                     array of the 4KB field's geometry holding both sizes (assumed: the leaf does not say whether the two \
                     share their entries, nor can the sweep); cross-check, {measured_stlb}",
                    a.entries,
                    fully(a),
                    b.entries,
                    fully(b)
                ),
            ),
            Some((a, b)) => (
                match b {
                    Some(b) => vec![("\"4K\"", a.entries, a.ways), ("\"2M\"", b.entries, b.ways)],
                    None => vec![("\"4K\", \"2M\"", a.entries, a.ways)],
                },
                format!(
                    "cpuid Fn8000_0006: 4KB {} entries, {} (EBX); 2MB {} (EAX){}; cross-check, {measured_stlb}",
                    a.entries,
                    fully(a),
                    b.map_or("not listed".to_string(), |b| format!("{} entries, {}", b.entries, fully(b))),
                    if b.is_none() { ": 2MB pages share the 4KB array (assumed)" } else { "" }
                ),
            ),
            None => {
                let e = stlb_reach as u32;
                let w = stlb_ways(e as usize) as u32;
                (
                    vec![("\"4K\", \"2M\"", e, w)],
                    format!(
                        "{e} entries for 4KB and 2MB, {measured_stlb}; ways ({w}: the first of 16, 12, 8, 4 dividing the \
                         entries): assumed (not measurable here; {tlb_leaf_text})"
                    ),
                )
            }
        };
    let guest_desc = if cpu.guest {
        format!(
            "a {} guest, host page {}",
            cpu.hypervisor
                .trim_end_matches(|c: char| !c.is_alphanumeric()),
            if !thp_ok {
                "unknown"
            } else if splintered {
                "4KB (2MB guest pages are splintered)"
            } else {
                "2MB or larger"
            }
        )
    } else {
        "not a guest".to_string()
    };

    let mut t = String::new();
    let w = &mut t;
    let _ = writeln!(
        w,
        "# splab machine file written by `splab calibrate{}` on {date} in {elapsed:.0} s (docs/calibrate.md).\n\
         # Each table's `source` names the benchmark and the spread ((p90 - p10) / p50 of its repeats) of every\n\
         # value; values the benchmarks cannot measure are skylake's, marked \"assumed (not measurable here)\".\n\
         # Measured with {}.\n",
        if plan.quick { " --quick" } else { "" },
        reporting.describe()
    );
    let moved = moved.join("; ");
    if !moved.is_empty() {
        let _ = writeln!(
            w,
            "# Moved over this calibration by more than {:.0}% ((p90 - p10) / p50 of its bursts or passes; a second\n\
             # calibration may differ by as much): {moved}.\n",
            bench::MOVED_PCT,
        );
    }
    let _ = writeln!(w, "name = {}", q(&args.name));
    let _ = writeln!(
        w,
        "description = {}",
        q(&format!(
            "{} at {:.2} GHz, measured by splab calibrate ({date}): {guest_desc}; {} {}-way data caches",
            cpu.brand,
            ghz,
            levels.iter().map(|l| format!("{} {}", l.0, sz(l.1))).collect::<Vec<_>>().join(", "),
            levels.iter().map(|l| l.2.to_string()).collect::<Vec<_>>().join("/")
        ))
    );
    let _ = writeln!(
        w,
        "source = {}",
        q(&format!(
            "{clock_src}. Guest: {guest_line}. Evidence: {host_evidence}. mem: MemTotal of /proc/meminfo \
             ({} MiB) rounded down to the largest page. va_bits: {} (4-level paging unless /proc/cpuinfo lists la57). \
             page_sizes: 4KB, 2MB{} (cpuid 0x80000001 EDX bit 26 for 1GB). replicated_ptes: an x86 superpage is one entry.",
            mem_total >> 20,
            va_bits,
            if cpu.page_1g { ", 1GB" } else { "" }
        ))
    );
    let _ = writeln!(w, "freq_hz = {freq_hz}");
    let _ = writeln!(w, "mem = {}", q(&sz(mem)));
    let _ = writeln!(w, "va_bits = {va_bits}");
    let _ = writeln!(
        w,
        "page_sizes = [\"4K\", \"2M\"{}]",
        if cpu.page_1g { ", \"1G\"" } else { "" }
    );
    let _ = writeln!(w, "replicated_ptes = false\n");

    let _ = writeln!(w, "[tlb.l1d]\nname = \"L1D\"");
    let _ = writeln!(
        w,
        "source = {}",
        q(&format!(
            "calibrate: TLB sweep, chases with one line per 4KB page (MADV_NOHUGEPAGE) over 8 to {tlb_max} pages, each \
             less its packed control (the same number of lines 128 B apart, THP memory), p10 of {treps} interleaved runs, \
             largest spread {tlb_spread:.1}%. {l1_4k_src}. {l1_2m_src}. 1GB: assumed (not measurable here), skylake's 4. \
             An L1 hit costs no extra cycles."
        ))
    );
    let _ = writeln!(w, "hit_cycles = 0\narrays = [");
    let _ = writeln!(
        w,
        "    {{ sizes = [\"4K\"], entries = {l1_entries}, ways = {l1_ways}, replacement = \"lru\" }},"
    );
    let _ = writeln!(
        w,
        "    {{ sizes = [\"2M\"], entries = {l1_2m_entries}, ways = {l1_2m_ways}, replacement = \"lru\" }},"
    );
    if cpu.page_1g {
        let _ = writeln!(
            w,
            "    {{ sizes = [\"1G\"], entries = 4, ways = 4, replacement = \"lru\" }},"
        );
    }
    let _ = writeln!(w, "]\n");
    let _ = writeln!(w, "[[tlb.lower]]\nname = \"STLB\"");
    let _ = writeln!(
        w,
        "source = {}",
        q(&format!(
            "calibrate: TLB sweep (as tlb.l1d), p10 of {treps} runs, largest spread {tlb_spread:.1}%. Geometry: {stlb_geo_src}. \
             Hit +{stlb_hit:.1} cycles, the median extra cycles from {} to {} pages (2x to 8x the L1 reach). The 1GB \
             array (skylake's 16 x 4-way): assumed (not measurable here).",
            2 * l1_reach,
            8 * l1_reach
        ))
    );
    let _ = writeln!(w, "hit_cycles = {stlb_cycles}\narrays = [");
    for (sizes, entries, ways) in &stlb_arrays {
        let _ = writeln!(
            w,
            "    {{ sizes = [{sizes}], entries = {entries}, ways = {ways}, replacement = \"lru\" }},"
        );
    }
    if cpu.page_1g {
        let _ = writeln!(
            w,
            "    {{ sizes = [\"1G\"], entries = 16, ways = 4, replacement = \"lru\" }},"
        );
    }
    let _ = writeln!(w, "]\n");

    let _ = writeln!(w, "[walk]\nkind = \"radix\"");
    let _ = writeln!(
        w,
        "source = {}",
        q(&format!(
            "{va_bits}-bit {}-level radix, 8-byte entries (Intel SDM vol. 3 4.5). Page-walk cache sizes: assumed (not \
             measurable here), skylake's. The TLB sweep's chases just beyond the STLB's reach walk for +{walk_level:.1} \
             cycles per hop, +{walk_over:.1} at {tlb_max} pages (p10 of {treps} runs){}. {WALK_FIXED_MARK}",
            if va_bits == 57 { 5 } else { 4 },
            if cpu.guest && thp_ok {
                ", a two-dimensional walk in this guest: the host's part is the [nested] table below"
            } else if cpu.guest {
                ", a two-dimensional walk in this guest: the model walks the guest's table only (the host's page size is unknown)"
            } else {
                ""
            }
        ))
    );
    if va_bits == 57 {
        let _ = writeln!(
            w,
            "level_sizes = [\"256T\", \"512G\", \"1G\", \"2M\", \"4K\"]"
        );
    } else {
        let _ = writeln!(w, "level_sizes = [\"512G\", \"1G\", \"2M\", \"4K\"]");
    }
    let _ = writeln!(
        w,
        "pwc_entries = [{}]\npte_bytes = 8\n{WALK_FIXED_RAW}\n",
        if va_bits == 57 {
            "2, 2, 4, 32"
        } else {
            "2, 4, 32"
        }
    );

    let _ = writeln!(
        w,
        "[caches]\nsource = {}\ndram_latency = {dram_cycles}\n",
        q(&caches_src)
    );
    for (name, size, ways, lat, src) in &levels {
        let lat = lat.cycles(ghz).round().max(1.0) as u64;
        let life = match lifetime_ns {
            Some(ns) if name == "LLC" => format!("lifetime_ns = {ns}\n"),
            _ => String::new(),
        };
        let life = if name == "LLC" && lifetime_ns.is_some() && !lifetime_curve.is_empty() {
            format!(
                "{life}lifetime_curve_ns = [\n{}]\n",
                lifetime_curve
                    .iter()
                    .map(|(t, f)| format!("    [{t}, {f:.3}],\n"))
                    .collect::<String>()
            )
        } else {
            life
        };
        let _ = writeln!(
            w,
            "[[caches.levels]]\nname = {}\nsource = {}\nsize = {}\nways = {ways}\nlatency = {lat}\nreplacement = {}\n{life}",
            q(name),
            q(src),
            q(&sz(*size)),
            q(if name == "LLC" { "nru" } else { "plru" })
        );
    }

    let sc = &skylake.core;
    let _ = writeln!(w, "[core]");
    let _ = writeln!(
        w,
        "source = {}",
        q(&format!(
            "mshrs: calibrate: memory-level parallelism, K interleaved dependent chases over {} (THP memory), \
             the knee of the speedup curve (its best, {mlp_best:.1}x K=1's, over the slope of its rise at K <= 4) at K={mlp_knee:.1}, p10 of {mreps} runs per K, largest spread \
             {mlp_spread:.1}%; speedup by K: {mlp_text}. walkers: calibrate: concurrent walks, K interleaved chases with \
             one line per 4KB page over {} ({} pages, beyond the STLB, their lines within L2; {}), {wreps} interleaved repeats of every K and \
             of a control (the same lines, in the same L2 sets, on THP memory, whose translations hit: {:.1} cycles a hop), p10 of each, largest spread {walk_spread:.1}% \
             (control {:.1}%). Little's law at saturation: the walk alone ({:.1} cycles, the lone 4KB hop's {:.1} less the control's; \
             {:.0}% of the hop) over the fastest time per hop of any K ({:.1} cycles; best speedup {walk_best:.1}x, knee at K={walk_knee:.1}) \
             = {walkers_est:.2} walks in flight on average, which no fewer than {walkers} walkers can carry (the smallest whole \
             number at least that; a walk under load takes no less than alone, so this is a lower bound, at most 8); \
             speedup by K: {walk_text}. loaded_cycles_per_miss: calibrate: the same memory-level-parallelism chases, \
             the least-squares slope of the time a miss takes (K x the hop) over K, for the K from 2 up to the knee \
             (each miss starts with K - 1 others in flight): {loaded_ns:.2} ns = {:.1} cycles per other miss in flight; \
             K=1 is not fitted: the lone chase's miss lies {:.1} ns below that line, a step a miss pays once anything runs \
             beside it (natively as large with a partner chain that takes no miss beyond L2, scripts/mlp-partner.c), \
             not a wait per miss in flight, which the slope from K=1 spread over every miss in flight; \
             ns a miss by K: {per_miss_text}. stream_bytes_per_cycle: calibrate: read stream, a \
             sequential sum of 32 MiB pieces of {}, {:.1} GB/s, {}. store_buffer: calibrate: {}. window and width: assumed (not measurable here), skylake's.",
            mib(plan.dram_footprint),
            mib(walk_pages * PAGE),
            walk_pages,
            if fixed {
                format!(
                    "{per_range} contiguous pages in each of {walk_ranges} 2MB pieces of a THP region split into 4KB entries: \
                     a fixed guest-physical footprint of {walk_ranges} 2MB ranges"
                )
            } else {
                "4KB pages as faulted in (the THP region for a fixed layout was not granted)".to_string()
            },
            cyc(ctrl.low()),
            ctrl.spread(),
            cyc(we.walk),
            cyc(wlat1),
            100.0 * walk_share,
            cyc(we.sat),
            cyc(loaded_ns),
            loaded.step,
            mib(plan.dram_footprint),
            1.0 / stream.low(),
            stream_how,
            match sbuf.entries {
                Some(n) => format!(
                    "two interleaved dependent chases over {} (THP memory), each hop followed by K \
                     stores that hit L1; the step (two hops) stays near one miss ({:.0} ns) while the \
                     K stores after a hop fit in the store buffer and nears two ({:.0} ns) once they \
                     do not: {n} entries, the largest K under half way; p10 of {sb_reps} interleaved \
                     rounds per K, largest spread {sb_spread:.1}%; ns a step by K: {sb_text}. On a core \
                     whose sibling hyperthread runs, this is the share the thread gets",
                    mib(plan.dram_footprint),
                    sbuf.low,
                    sbuf.high
                ),
                None => format!(
                    "no knee: the step with K stores after each hop of two chases never doubled up \
                     to K=128 (plateaus {:.0} and {:.0} ns), so the key is left out (unbounded); \
                     ns a step by K: {sb_text}",
                    sbuf.low, sbuf.high
                ),
            }
        ))
    );
    let _ = writeln!(
        w,
        "window = {}\nwidth = {}\nmshrs = {mshrs}\nwalkers = {walkers}\nstream_bytes_per_cycle = {:.2}\nloaded_cycles_per_miss = {:.1}\n{}",
        sc.window,
        sc.width,
        bpc,
        cyc(loaded_ns),
        sbuf.entries
            .map(|n| format!("store_buffer = {n}\n"))
            .unwrap_or_default()
    );

    let sp = &skylake.prefetch;
    let pair_lines = pairs.fills();
    // What the probe did and read, for the note either way.
    let pair_method = format!(
        "calibrate: L2 pair lines, the buddies (the other line of each 128-byte pair) of a chase's lines, timed in one \
         pass after four passes of the chase, against the same buddies cold (after a 16 MiB flush) and from L2 (chased \
         twice just before), medians of {} rounds, cpuid vendor {}: {pairs_text}.",
        pairs.points[0].warm.n(),
        cpu.vendor
    );
    let _ = writeln!(w, "[prefetch]");
    let _ = writeln!(
        w,
        "source = {}",
        q(&format!(
            "assumed (not measurable here): skylake's, from the Intel Optimization Reference Manual's L2 streamer \
             (Sandy Bridge 'Data Prefetching', kept by later cores): {} streams, {} lines ahead, within a {}-byte \
             (4K) page; trigger {} assumed (the Core microarchitecture's data prefetch logic). See skylake's machine file.{}",
            sp.streams, sp.distance, sp.region_bytes, sp.trigger,
            if pair_lines {
                format!(
                    " pair_lines: {pair_method} The largest chase's buddies are in L2 at a share of at least {FILLS_AT}, \
                     so its L2 completes every line it fetches with the other of its 128-byte pair (Intel's L2 spatial \
                     prefetcher: the Optimization Reference Manual, data prefetching); filled as its set's next victim, \
                     where pair-fill.c and pair-knee.c found it on this project's first Intel guest (docs/validation.md, \
                     \"The scattered TLB row: L2's pair lines\"); pair_recent (a share inserted as recent) not written: \
                     not measured stably."
                )
            } else {
                format!(
                    " pair_lines not written (false): {pair_method} The largest chase's buddies are in L2 at a share below \
                     {FILLS_AT}: this L2 does not complete the lines it fetches with their 128-byte pairs (Intel's L2 \
                     spatial prefetcher, the Optimization Reference Manual, data prefetching, is off or does not reach L2 \
                     here; docs/validation.md, \"Pair lines measured, not assumed\")."
                )
            }
        ))
    );
    let _ = writeln!(
        w,
        "streams = {}\ndistance = {}\ntrigger = {}\nregion = {}\n{}",
        sp.streams,
        sp.distance,
        sp.trigger,
        sp.region_bytes,
        if pair_lines {
            // L2's spatial prefetcher (docs/validation.md, "The scattered TLB row: L2's pair
            // lines"); the share of its fills inserted as recent (`pair_recent`) stays 0: its fit
            // moved 0.25-0.45 within 30 minutes on the Intel guest.
            "pair_lines = true\n"
        } else {
            ""
        }
    );

    let c = &skylake.cost;
    let _ = writeln!(w, "[cost]");
    let _ = writeln!(
        w,
        "source = {}",
        q(&format!(
            "calibrate: faults, first touch of fresh MADV_NOHUGEPAGE memory (8 MiB regions, one store per 4KB page, \
             runs in {} bursts over the calibration, each run's frames cold (one load per line of twice the largest cache before it), each fault timed on its own by the time-stamp counter): a run's \
             mean fault {:.0} cycles ({}); single faults, {} of them: p10 {:.0}, median {:.0} (spread {:.1}%); \
             fault_cycles: the runs' p10 less zero_page_cycles ({zero_page}, the zeroing the model charges beside it). A 2MB THP fault (MADV_HUGEPAGE, 8 MiB regions in the same bursts, AnonHugePages {} of {} granted): \
             {:.0} cycles ({}), less fault_cycles, per 4KB: huge_zero_page_cycles (the rate this kernel clears a \
             huge page at a fault{}). calibrate: zero and copy, 4 cold 2MB chunks per run from a {} rotation, \
             cycles per 4KB: zero_page_cycles, memset 4KB at a time ({}); zero_bulk_page_cycles, 2MB with \
             non-temporal stores ({}); also 2MB temporal {:.0} ({}) and 4KB non-temporal {:.0} ({}); \
             copy_page_cycles, memcpy 4KB at a time ({}); 2MB with non-temporal stores {:.0} ({}). \
             access_cycles, pte_write_cycles, tlb_invalidate_cycles, popmap/reserv_* and sha1_block_cycles: assumed \
             (not measurable here), skylake's. Faults, zeroing and copying measured with {}.",
            fault_runs.runs,
            fault_total,
            f4.how(),
            f4_one.n(),
            cyc(f4_one.low()),
            cyc(f4_one.pct(50.0)),
            f4_one.spread(),
            mib(f2_granted.0 as usize),
            mib(f2_granted.1 as usize),
            cyc(f2.low()),
            f2.how(),
            if f2_granted.0 > 0 {
                ""
            } else {
                "; no THP was granted, so the 4KB rate, zero_page_cycles"
            },
            mib(zlen),
            per4_how(&z4t),
            per4_how(&z2n),
            per4(&z2t),
            per4_how(&z2t),
            per4(&z4n),
            per4_how(&z4n),
            per4_how(&c4t),
            per4(&c2n),
            per4_how(&c2n),
            reporting.describe()
        ))
    );
    let _ = writeln!(
        w,
        "access_cycles = {}\nfault_cycles = {fault}\nzero_page_cycles = {zero_page}\nzero_bulk_page_cycles = {zero_bulk}\n\
         huge_zero_page_cycles = {huge_zero}\ncopy_page_cycles = {copy_page}\npte_write_cycles = {}\ntlb_invalidate_cycles = {}\npopmap_level_cycles = {}\n\
         reserv_populate_cycles = {}\nreserv_depopulate_cycles = {}\nreserv_create_cycles = {}\nreserv_piece_cycles = {}\n\
         sha1_block_cycles = {}\n",
        c.access_cycles,
        c.pte_write_cycles,
        c.tlb_invalidate_cycles,
        c.popmap_level_cycles,
        c.reserv_populate_cycles,
        c.reserv_depopulate_cycles,
        c.reserv_create_cycles,
        c.reserv_piece_cycles,
        c.sha1_block_cycles
    );
    let st = &skylake.storage;
    let _ = writeln!(
        w,
        "[storage]\nname = {}\nsource = \"assumed (not measurable here): skylake's storage (calibrate does not measure storage)\"\n\
         read_latency_ns = {}\nbytes_per_sec = {}\nswap = \"2x\"",
        q(&st.name),
        st.read_latency_ns,
        st.bytes_per_sec
    );
    // A guest whose host page size was found: its TLB misses are two-dimensional walks, which
    // the model makes when the file says so. Not double counted where the host's pages are
    // 2MB: every latency above was measured on memory whose translations hit the TLB (THP
    // chases within the 2MB reach, the 4KB sweep less its packed control). With 4KB host pages
    // L1's and L2's still are (their footprints are within the L1 DTLB's 4KB reach); the
    // LLC's (768 4KB entries here: STLB hits) and DRAM's (walks) hold some translation that
    // the model adds again (docs/validation.md, "Runs of 2026-11-27 08:00").
    if cpu.guest && thp_ok {
        let host = if splintered { "4K" } else { "2M" };
        let _ = writeln!(
            w,
            "\n[nested]\nsource = {}\npage_size = \"{host}\"\nhost_placement = \"scattered\"\nlevel_sizes = [{}]\npwc_entries = [{}]\nntlb_entries = {}",
            q(&format!(
                "calibrate: host page size (hypervisor {:?}): {host_page}. Evidence: {host_evidence}. {} Levels: EPT's, as the \
                 guest's (Intel SDM vol. 3 ch. 29); paging-structure caches and the nested TLB: assumed (not \
                 measurable here; unpublished), the guest's page-walk-cache sizes and splab's default {}-entry nested TLB. \
                 host_placement: scattered, assumed (not measurable from inside the guest): the caches are indexed by \
                 host-physical address (Intel SDM vol. 3 ch. 29, AMD APM vol. 2 15.25), and the host allocates the \
                 frames backing guest memory on demand (KVM: EPT violation -> get_user_pages) from its buddy \
                 allocator's free lists, so each host page of guest memory lies at a host frame unrelated to its \
                 guest address (the model: a fixed pseudo-random bijection on host page numbers, hw/host_frames.rs).",
                cpu.hypervisor,
                if splintered {
                    "The LLC's and DRAM's latencies, read on THP memory, hold STLB hits and walks (4KB entries beyond the L1 DTLB's and the STLB's reach)."
                } else {
                    "2MB is the least the evidence allows (1GB host pages cannot be told apart without 1GB guest pages)."
                },
                splab_sim::hw::machine::DEFAULT_NTLB_ENTRIES
            )),
            if va_bits == 57 {
                "\"256T\", \"512G\", \"1G\", \"2M\", \"4K\""
            } else {
                "\"512G\", \"1G\", \"2M\", \"4K\""
            },
            if va_bits == 57 { "2, 2, 4, 32" } else { "2, 4, 32" },
            splab_sim::hw::machine::DEFAULT_NTLB_ENTRIES
        );
    }

    // The DRAM latency the model needs: the hop time measured above holds the chase's own
    // translations (its 2 x footprint of pages is far beyond the STLB's reach; on a guest with
    // 4KB host pages, 2MB guest pages get 4KB TLB entries and two-dimensional walks), and the
    // model adds its own walks to `dram_latency`. Written raw (until 2026-11-28), the walk was
    // counted twice (docs/validation.md, "DRAM latency: fitted through the model").
    // The walk's fixed cost, before the DRAM fit (whose chase walks): benchmark 4b less the
    // model's charge on this file (calibrate/walkcost.rs).
    let m_walk = splab_sim::hw::machine_file::parse(&t, "the calibrated machine file")?.machine;
    let (walk_fixed, walk_note) = super::walkcost::fixed_cycles(&walk_native, &m_walk, ghz);
    let t = fill_in(
        &t,
        "[walk]",
        WALK_FIXED_RAW,
        &format!("fixed_cycles = {walk_fixed}"),
        WALK_FIXED_MARK,
        &walk_note.replace('\\', "\\\\").replace('"', "\\\""),
    )?;
    pr.start("LLC and DRAM latency fits (the model's predictions of their chases)");
    let t = bench::resolve_cycles(&t, ghz)?;
    // The LLC's latency first (2026-11-29): the written value was the LLC chase's hop, which
    // holds that chase's own STLB hits (its 2 x footprint of THP memory is 4KB TLB entries on a
    // host that splinters THP, beyond the L1 DTLB's reach) and its L2 hits, and the model added
    // its STLB hits again: validate's LLC row read about 3.5% (3.4 cycles a hop) above the
    // latency written. Now the latency at which the model's prediction of that chase (validate's
    // LLC row's) equals the measured hop, as dram_latency below, which is fitted on the file
    // with it.
    let (t, llc_fitted) = match llc_fit {
        Some((foot, ns)) => {
            let m = splab_sim::hw::machine_file::parse(&t, "the calibrated machine file")?.machine;
            let hz = m.freq_hz as f64;
            let li = m.caches.levels.len() - 1;
            let nodes = bench::random_lines(2 * foot, &mut Rng::new(6));
            let fit = fit_latency("the LLC's latency", cyc(ns), |d| {
                let mut m = m.clone();
                m.caches.levels[li].latency = d;
                Ok(crate::validate::patterns::latency_chase(m, foot, &nodes)? * hz / 1e9)
            })?;
            let note = format!(
                "The file's latency is fitted, not the hop: the model's prediction of that chase (the same pattern on this \
                 file's machine, validate's code) equals the measured {:.1} cycles a hop at latency = {} ({:.1} predicted); \
                 at the hop itself it predicted {:.1} (the model's own share: its translations and L2 hits). Secant steps \
                 (latency, predicted): {}.",
                fit.measured,
                fit.latency,
                fit.predicted,
                fit.at_raw,
                fit.steps_text()
            );
            pr.done(
                "LLC latency fit",
                &format!("{} cycles (the hop {:.0})", fit.latency, fit.measured),
            );
            let t = fill_in_level(
                &t,
                "LLC",
                &format!("latency = {}", fit.latency),
                LLC_FIT_MARK,
                &note,
            )?;
            (t, Some(fit.latency))
        }
        None => (t, None),
    };
    let parsed = splab_sim::hw::machine_file::parse(&t, "the calibrated machine file")?;
    let m0 = parsed.machine;
    let hz = m0.freq_hz as f64;
    // One secant fit per plateau point, each against that point's own measured hop, and the
    // median of their latencies (2026-11-29): the fit at the median point alone gave 307 and 447
    // in two calibrations 3 minutes apart on a Firecracker guest, because the median point fell
    // at 128 MiB in one and 16 MiB in the other, and at 16 MiB the model keeps lines of the
    // chase's previous round in the LLC (its round, ~18 ms, is below the line lifetime) that
    // the native LLC has lost (lines touched once: docs/validation.md, "Lines touched once"):
    // the fit there raised dram_latency to make up for hits the model has and the machine has
    // not. The median over the points is not moved by one such point.
    let mut fits = Vec::with_capacity(dram_fit_points.len());
    for &(foot, ns) in &dram_fit_points {
        let nodes = bench::random_lines(2 * foot, &mut Rng::new(5));
        let fit = fit_latency("dram_latency", cyc(ns), |d| {
            let mut m = m0.clone();
            m.caches.dram_latency = d;
            Ok(crate::validate::patterns::latency_chase(m, foot, &nodes)? * hz / 1e9)
        })?;
        fits.push((foot, fit));
    }
    let dram_fitted = median_fit(&fits.iter().map(|f| f.1.latency).collect::<Vec<_>>());
    pr.done(
        "DRAM latency fit",
        &format!(
            "{dram_fitted} cycles (the median hop {dram_cycles}; by footprint, fitted: {})",
            fits.iter()
                .map(|(f, x)| format!("{} {}", mib(*f), x.latency))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let fit_note = format!(
        "dram_latency is fitted, not the hop: at each footprint of the plateau the model's prediction of that \
         chase (the same pattern on this file's machine, validate's code) is brought to the measured hop by secant \
         steps on dram_latency, and the file takes the median of those latencies (one point whose model keeps lines \
         in the LLC that the machine lost, as at the plateau's small end, moves it little). By footprint: measured \
         cycles a hop, fitted dram_latency (predicted there), the model's hop at dram_latency = the measured hop \
         (its own share beyond dram_latency: its translations, less its LLC hits), secant steps: {}.",
        fits.iter()
            .map(|(f, x)| format!(
                "{} {:.1}, {} ({:.1}), {:.1} ({:+.1}), [{}]",
                mib(*f),
                x.measured,
                x.latency,
                x.predicted,
                x.at_raw,
                x.at_raw - x.measured.round(),
                x.steps_text()
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let t = fill_in(
        &t,
        "[caches]",
        &format!("dram_latency = {dram_cycles}"),
        &format!("dram_latency = {dram_fitted}"),
        DRAM_FIT_MARK,
        &fit_note,
    )?;
    eprintln!(
        "calibrate: {guest_line}\ncalibrate: {:.3} GHz; {}; DRAM {dram_fitted} (hop {dram_cycles}); TLB L1 {l1_entries}, STLB {} \
         (+{stlb_cycles}; {}); mshrs {mshrs}, walkers {walkers}; fault {fault}, zero {zero_page}/{zero_bulk}, copy {copy_page}; \
         {elapsed:.0} s",
        ghz,
        levels
            .iter()
            .map(|l| {
                let hop = l.3.cycles(ghz).round().max(1.0);
                match llc_fitted {
                    Some(f) if l.0 == "LLC" => format!("{} {} {f} (hop {hop:.0})", l.0, sz(l.1)),
                    _ => format!("{} {} {hop:.0}", l.0, sz(l.1)),
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        stlb_arrays[0].1,
        if amd.is_some() {
            "TLB geometry from cpuid Fn8000_0005/6"
        } else {
            "TLB geometry from the sweep"
        }
    );
    // A host whose other tenants held the LLC through the bursts (2026-11-29 12:45, the
    // Firecracker guest: bursts of 144-366 cycles, fitted 342 against DRAM's 309) leaves a file
    // whose LLC is no faster than DRAM: what was measured, said so.
    if let Some(l) = llc_fitted.filter(|&l| l >= dram_fitted) {
        eprintln!(
            "calibrate: the LLC's latency ({l} cycles) is not below DRAM's ({dram_fitted}): its chase ran at DRAM's \
             speed, the host's other tenants holding the LLC during this calibration; the file keeps what was measured, \
             and a calibration in a quieter phase will differ"
        );
    }
    if !moved.is_empty() {
        eprintln!(
            "calibrate: moved within this calibration by more than {:.0}% (the host's phases; a second calibration may \
             differ by as much): {moved}",
            bench::MOVED_PCT,
        );
    }
    Ok(t)
}

/// The K of K interleaved chases where the time per hop stops dropping: the smallest K whose
/// speedup over K=1 is within 10% of the best speedup of any K (one noisy K cannot stop the
/// search early, as a first-K-that-gains-little rule would).
/// The concurrency a K-chains curve shows: where its linear rise meets its plateau, the best
/// speedup over the slope of the rise (least squares through the origin over K <= 4, where
/// each chain still adds its own misses). A first K within some share of the best, which this
/// replaced, jumped between neighbouring K on a steep curve (walkers 6 or 8, mshrs 14 in three
/// runs that agree on the curve); the knee moves with the curve, not with the sampling of K.
fn concurrency_knee(rows: &[(usize, Stat)]) -> f64 {
    let t1 = rows[0].1.low();
    let best = rows.iter().map(|(_, s)| t1 / s.low()).fold(1.0, f64::max);
    let (mut num, mut den) = (0.0, 0.0);
    for (k, s) in rows.iter().filter(|(k, _)| *k <= 4) {
        let k = *k as f64;
        num += k * (t1 / s.low());
        den += k * k;
    }
    let slope = if den > 0.0 { num / den } else { 1.0 };
    (best / slope).max(1.0)
}

/// The 4KB first-touch faults, one burst: `runs` fresh 8 MiB MADV_NOHUGEPAGE regions back to
/// back (each refaults the frames the one before freed, as a program that frees and faults
/// again does), every fault timed on its own. Adds each clean run's mean fault (ns) to
/// `means` and every fault to `each`.
///
/// The 2MB THP first touches run in the same bursts, beside the 4KB ones: `huge` gets each
/// burst's clean runs' time per 2MB fault granted (ns), `huge_granted` the bytes granted and
/// asked for. (Until 2026-11-27 they were one block of 42 runs at benchmark 10, and a slow
/// phase there moved `huge_zero_page_cycles` from 491 to 793 between two runs of a pair, where
/// every 4KB cost, taken in bursts, stayed within 4.7%.)
#[derive(Default)]
struct FaultRuns {
    /// The eviction buffer read before every run (`fault_burst`): made once, on the first
    /// burst, and kept to the end of the faults (until 2026-11-28 17:00 each of the eight bursts
    /// made its own: 960 MiB here, allocated, written and freed eight times). Mapped, it is
    /// this process's memory through benchmarks 3 to 10, dropped after the last fault burst.
    ev: Option<crate::validate::heldout::Evictor>,
    means: Vec<f64>,
    each: Vec<f64>,
    huge: Vec<Stat>,
    huge_granted: (u64, u64),
    runs: usize,
}

/// The 2MB first touch: the median of the bursts' 10th percentiles. Clearing 2MB is bound by
/// memory bandwidth, which the other tenants share: on the AMD guest of 2026-11-27 one burst in
/// a quiet phase ran 2.4x faster than the others (p10 over all runs 73 us, against 172-187 us
/// in three other calibrations minutes apart), and a p10 over every run, as the 4KB faults'
/// (latency-bound and steady: 1.7%), took that burst's. The median of the bursts' p10s (three
/// until 2026-11-28 14:00, eight in calibrate since) takes the middle phase and is moved by
/// neither one fast nor one slow burst. Known since: in calibrate the bursts after the first
/// read 1.5-3x its time once the calibration's other regions (4 GiB) are mapped (not the host's
/// faults: backing 6 GiB instead of 4 changed nothing), and the median of eight lands on them,
/// where validate's row, in a process of its own, meets the first burst's time
/// (docs/validation.md, "Calibrating twice: estimators spread over the run").
pub(crate) struct HugeFaults {
    ns: f64,
    how: String,
}

impl HugeFaults {
    pub(crate) fn new(bursts: Vec<Stat>) -> HugeFaults {
        let mut lows: Vec<f64> = bursts
            .iter()
            .filter(|b| b.n() > 0)
            .map(|b| b.low())
            .collect();
        lows.sort_by(|a, b| a.total_cmp(b));
        let ns = lows.get(lows.len() / 2).copied().unwrap_or(f64::NAN);
        let runs: usize = bursts.iter().map(|b| b.n()).sum();
        let how = format!(
            "median of {} bursts' p10s ({}; {} runs)",
            lows.len(),
            lows.iter()
                .map(|l| format!("{:.1} us", l / 1e3))
                .collect::<Vec<_>>()
                .join(", "),
            runs
        );
        HugeFaults { ns, how }
    }
    pub(crate) fn low(&self) -> f64 {
        self.ns
    }
    pub(crate) fn how(&self) -> String {
        self.how.clone()
    }
}

fn fault_burst(runs: usize, acc: &mut FaultRuns) -> Result<()> {
    // Cold frames: every run after one load per line of twice the largest cache (outside the
    // timed part). Back to back, a run got the frames the run before freed (the allocator's
    // free lists are last in, first out) with their lines still in this guest's L3, and a first
    // touch of cached frames costs a third of one of cold frames (a THP 81-90 against 252-275
    // us; a 4KB page 0.93 against 1.33-1.53 us: docs/validation.md, "seq 16 MiB: warm frames").
    // The model's faults are a program's first touches of fresh memory: cold frames.
    let ev = acc
        .ev
        .get_or_insert_with(crate::validate::heldout::Evictor::native);
    let mut fail = None;
    let (st2, _) = bench::clean_with(
        runs,
        || ev.touch(),
        || match Region::map(8 << 20, Thp::Huge) {
            Ok(r) => {
                let t = Instant::now();
                for off in (0..r.len).step_by(HUGE) {
                    // SAFETY: inside the region.
                    unsafe { r.base.add(off).write_volatile(1) };
                }
                let el = t.elapsed().as_secs_f64() * 1e9;
                let got = r.anon_huge_bytes();
                acc.huge_granted.0 += got;
                acc.huge_granted.1 += r.len as u64;
                // Per 2MB fault, counting only what was granted.
                el / ((got as usize / HUGE).max(1)) as f64
            }
            Err(e) => {
                fail = Some(e);
                f64::NAN
            }
        },
    );
    if let Some(e) = fail {
        return Err(e);
    }
    acc.huge.push(st2);
    let mut each = Vec::new();
    let (st, _) = bench::clean_with(
        runs,
        || ev.touch(),
        || match Region::map(8 << 20, Thp::No) {
            Ok(r) => {
                let e = bench::first_touch_each(&r);
                let mean = e.iter().sum::<f64>() / e.len().max(1) as f64;
                // Every fault is kept, a preempted run's too: the preemption is one fault's tail.
                each.extend(e);
                mean
            }
            Err(e) => {
                fail = Some(e);
                f64::NAN
            }
        },
    );
    if let Some(e) = fail {
        return Err(e);
    }
    acc.means.extend(st.samples);
    acc.each.extend(each);
    acc.runs += 1;
    Ok(())
}

/// Zeroing and copying samples, ns per 4KB, by kind (4KB temporal zero, 2MB temporal zero, 2MB
/// non-temporal zero, 4KB non-temporal zero, 4KB temporal copy, 2MB non-temporal copy): one
/// sample is 4 cold 2MB chunks of a rotation through `zr`. Taken in bursts spread over the
/// calibration, the kinds interleaved within a burst: in one batch of five calibrations here
/// (2026-11-27 07:20 UTC), when each kind ran its 42 samples back to back, a slow phase of the
/// machine covered a whole kind's block and moved copy_page_cycles 1,468-1,554 to 1,935 in two
/// runs (p10 of 42 samples, all slow) and zero_bulk_page_cycles 484-541 to 591 in one.
///
/// The value of each kind is the p10 of every sample of every burst (`Bursts::pooled`): zeroing
/// or copying a page is the machine's own cost, which the model charges every page alike, and
/// the other tenants' use of the memory bandwidth only adds time. The bursts' own p10s are
/// kept for the note: in three calibrations on a busy host (2026-11-28 13:57-14:03) the first
/// burst, before the calibration's other regions (4 GiB) were mapped, was the fastest of nine
/// in each (zero 4KB 1,687-1,725 cycles against 1,700-2,600 later; 2MB non-temporal 652-691
/// against 625-1,450), and the median of the bursts' p10s, tried, moved 19-48% between runs.
struct ZeroCopyRuns {
    zr: Region,
    src: Region,
    rot: usize,
    samples: [bench::Bursts; 6],
}

impl ZeroCopyRuns {
    fn new(zlen: usize) -> Result<ZeroCopyRuns> {
        let zr = Region::map(zlen, Thp::Huge)?;
        zr.touch();
        let src = Region::map(HUGE, Thp::Huge)?;
        src.touch();
        Ok(ZeroCopyRuns {
            zr,
            src,
            rot: 0,
            samples: Default::default(),
        })
    }

    /// One burst of `rounds` rounds, each one sample of every kind (`bench::Interleaved`).
    fn burst(&mut self, rounds: usize) {
        let chunks = self.zr.len / HUGE;
        let (zr, s, rot) = (self.zr.base, self.src.base as *const u8, &mut self.rot);
        // The rotation read once, untimed, before each burst: the chunks' data is still cold
        // when a burst reaches them (512 MiB read before, far beyond the LLC's share), but their
        // page-table entries (the host's 4KB ones under this guest's THP) were recently used,
        // as they were in the first burst just after the region was touched, the fastest of
        // nine in each calibration of 13:57-14:03 (see the struct's note). The model charges
        // translations itself; the stream's bursts read 7.9-12.9 GB/s without this and
        // 16.1-17.6 with it.
        bench::read_sum(zr, chunks * HUGE);
        let mut samples = bench::Interleaved::new(6);
        for _ in 0..rounds {
            samples.round(|kind| {
                let t = Instant::now();
                for _ in 0..4 {
                    // SAFETY: inside the region.
                    let p = unsafe { zr.add((*rot % chunks) * HUGE) };
                    *rot += 1;
                    zero_copy_op(kind, p, s);
                }
                t.elapsed().as_secs_f64() * 1e9 / (4.0 * 512.0)
            });
        }
        for (k, st) in samples.stats().into_iter().enumerate() {
            self.samples[k].push(st);
        }
    }

    fn stats(self) -> [bench::Bursts; 6] {
        self.samples
    }
}

/// One 2MB chunk `p` zeroed or copied (from `s`, 2MB) as `ZeroCopyRuns`' kind says.
fn zero_copy_op(kind: usize, p: *mut u8, s: *const u8) {
    match kind {
        0 => {
            for o in (0..HUGE).step_by(PAGE) {
                // SAFETY: inside the chunk.
                unsafe { std::ptr::write_bytes(p.add(o), 0, PAGE) };
                std::hint::black_box(p);
            }
        }
        1 => {
            // SAFETY: inside the chunk.
            unsafe { std::ptr::write_bytes(p, 0, HUGE) };
            std::hint::black_box(p);
        }
        2 => bench::zero_nt(p, HUGE),
        3 => {
            for o in (0..HUGE).step_by(PAGE) {
                // SAFETY: inside the chunk.
                bench::zero_nt(unsafe { p.add(o) }, PAGE);
            }
        }
        4 => {
            for o in (0..HUGE).step_by(PAGE) {
                // SAFETY: both inside their regions.
                unsafe { std::ptr::copy_nonoverlapping(s.add(o), p.add(o), PAGE) };
                std::hint::black_box(p);
            }
        }
        _ => bench::copy_nt(p, s, HUGE),
    }
}

/// Bursts of the 4KB and 2MB faults (`fault_burst`) over the calibration: one at the start
/// and one at each of the spread sites up to benchmark 10 (`spread_site`).
const FAULT_BURSTS: usize = 8;

/// The benchmarks that run in bursts at the spread sites besides the faults, the zeroing and
/// the line lifetime (`bench::Bursts` says why): the LLC's latency, the read stream and the
/// clock (`bench::Clock`).
struct Spread {
    /// Clean runs per burst, and milliseconds per timed chase run.
    runs: usize,
    ms: f64,
    /// The LLC latency point's chase: its own region (lines as the latency curve's point: one
    /// of each 128-byte pair, random order, THP memory), its start and its warm-up hops.
    llc_chase: Option<(Region, *const usize, usize)>,
    llc: bench::Bursts,
    /// The stream's memory (`big`, held by `calibrate` until the last burst) and its pieces.
    stream_src: Option<(*const u8, usize)>,
    stream_next: usize,
    /// ns per byte.
    stream: bench::Bursts,
    /// The core's clock: its first burst at benchmark 2, one more at every site.
    clock: bench::Clock,
}

/// The read stream's piece: 32 MiB, read from a rotation over the DRAM footprint so that each
/// piece starts cold.
const STREAM_PIECE: usize = 32 << 20;

impl Spread {
    fn new(runs: usize, ms: f64, clock: bench::Clock) -> Spread {
        Spread {
            clock,
            runs: runs.max(3),
            ms,
            llc_chase: None,
            llc: bench::Bursts::default(),
            stream_src: None,
            stream_next: 0,
            stream: bench::Bursts::default(),
        }
    }

    /// The LLC latency point's chase over `foot` bytes of lines, linked once.
    fn set_llc(&mut self, foot: usize, rng: &mut Rng) -> Result<()> {
        let r = Region::map(2 * foot, Thp::Huge)?;
        r.touch();
        let nodes = bench::random_lines(2 * foot, rng);
        let start = bench::link(&r, &nodes, 1)[0];
        let warm = bench::warm_hops(foot, nodes.len());
        self.llc_chase = Some((r, start, warm));
        Ok(())
    }

    /// The stream reads `len` bytes of `big` (which must outlive the bursts) in pieces.
    fn set_stream(&mut self, big: &Region, len: usize) {
        let pieces = len.min(big.len) / STREAM_PIECE;
        if pieces > 0 {
            // The pages' first reads, once, before any burst (as the one block did).
            bench::read_sum(big.base, pieces * STREAM_PIECE);
            self.stream_src = Some((big.base, pieces));
        }
    }

    fn llc_burst(&mut self) {
        if let Some((_, start, warm)) = &self.llc_chase {
            let s = bench::time_chase(*start, *warm, self.runs, self.ms);
            self.llc.push(s);
        }
    }

    fn stream_burst(&mut self) {
        let Some((base, pieces)) = self.stream_src else {
            return;
        };
        // The whole rotation read once, untimed, before each burst, as before the one block
        // of runs (until 2026-11-28 13:30) and as validate's stream row reads freshly touched
        // memory: the model charges the stream's translations itself (its walks over the host's
        // 4KB pages), so the bandwidth it needs is the read with their page-table entries
        // recently used. Without it, bursts after other benchmarks read 7.9-12.9 GB/s in three
        // calibrations at 13:57-14:03 where validate's row read 17.8 GB/s at 14:13.
        bench::read_sum(base, pieces * STREAM_PIECE);
        let next = &mut self.stream_next;
        let (s, _) = bench::clean(self.runs, || {
            // SAFETY: inside the region `set_stream` was given, which outlives the bursts.
            let p = unsafe { base.add((*next % pieces) * STREAM_PIECE) };
            *next += 1;
            let t = Instant::now();
            std::hint::black_box(bench::read_sum(p, STREAM_PIECE));
            t.elapsed().as_secs_f64() * 1e9 / STREAM_PIECE as f64 // ns per byte
        });
        self.stream.push(s);
    }
}

/// A spread site: the line lifetime's next pass, a burst of the faults (`None` once their
/// values are taken), of the zeroing and copying (`runs` rounds), of the LLC's latency, of
/// the read stream and of the clock. The sites lie between the benchmarks, so that each of these quantities is
/// sampled over the whole calibration and no slow phase of the host falls on one of them only.
fn spread_site(
    life: &mut Option<LifetimeRuns>,
    faults: Option<&mut FaultRuns>,
    zc: &mut ZeroCopyRuns,
    sp: &mut Spread,
    runs: usize,
) -> Result<()> {
    if let Some(lr) = life.as_mut() {
        lr.pass();
    }
    if let Some(f) = faults {
        fault_burst(runs, f)?;
    }
    zc.burst(runs);
    sp.llc_burst();
    sp.stream_burst();
    sp.clock.burst();
    Ok(())
}

/// Where `calibrate` puts the DRAM fit's sentence in `[caches]`'s source, until the fit is done.
const DRAM_FIT_MARK: &str = "@DRAM_FIT@";

/// Where `calibrate` puts the walk cost's sentence in `[walk]`'s source, and the key's line it
/// writes, until benchmark 4b's value is known (it needs the model on the file written so far,
/// calibrate/walkcost.rs); 0 is what the model charges without the key, and `model_charge`
/// leaves the fixed cost out anyway.
const WALK_FIXED_MARK: &str = "@WALK_FIXED@";
const WALK_FIXED_RAW: &str = "fixed_cycles = 0";

/// The calibrated file `t` with its one line `raw` (of `table`) replaced by `line` and its one
/// `mark` by `note`: a value and its source's sentence known only once the file is written.
/// Patched in place, so a format change that lost either spot is an error here; otherwise the
/// file would keep the raw value (or the mark) without a word.
fn fill_in(t: &str, table: &str, raw: &str, line: &str, mark: &str, note: &str) -> Result<String> {
    let raw = format!("\n{raw}\n");
    anyhow::ensure!(
        t.matches(&raw).count() == 1 && t.matches(mark).count() == 1,
        "calibrate: the machine file's {table} no longer has one `{}` line and one {mark} mark to patch",
        raw.trim()
    );
    Ok(t.replacen(&raw, &format!("\n{line}\n"), 1)
        .replacen(mark, note, 1))
}

/// Where `calibrate` puts the LLC latency fit's sentence in the LLC's source, until the fit is
/// done.
const LLC_FIT_MARK: &str = "@LLC_FIT@";

/// `fill_in` for the `[[caches.levels]]` table named `level`: its `latency = ...` line replaced
/// by `line`, and its one `mark` by `note`.
fn fill_in_level(t: &str, level: &str, line: &str, mark: &str, note: &str) -> Result<String> {
    let name = format!("\nname = \"{level}\"\n");
    anyhow::ensure!(
        t.matches(&name).count() == 1 && t.matches(mark).count() == 1,
        "calibrate: the machine file has no one {level} level with one {mark} mark to patch"
    );
    let at = t.find(&name).expect("counted") + name.len();
    let Some(off) = t[at..].find("\nlatency = ") else {
        anyhow::bail!("calibrate: the machine file's {level} level has no latency line to patch");
    };
    let start = at + off + 1;
    let end = start + t[start..].find('\n').unwrap_or(t.len() - start);
    Ok(format!("{}{line}{}", &t[..start], &t[end..]).replacen(mark, note, 1))
}

/// `fit_latency`'s result, in core cycles.
struct LatencyFit {
    /// The measured hop.
    measured: f64,
    /// The fitted `dram_latency` and the model's hop at it.
    latency: u64,
    predicted: f64,
    /// The model's hop at `dram_latency` = the measured hop rounded (what was written until
    /// 2026-11-28).
    at_raw: f64,
    /// Every (latency, predicted hop) tried, in order.
    steps: Vec<(u64, f64)>,
}

impl LatencyFit {
    /// The secant steps for a source note: "355 404.8, 305 353.1, 307 355.2".
    fn steps_text(&self) -> String {
        self.steps
            .iter()
            .map(|(d, p)| format!("{d} {p:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The latency (`what`: `dram_latency`, or the LLC's) at which the model's hop of the calibration
/// chase (`predict`, cycles a hop, rising with the latency: every hop served there pays it once,
/// and a walk's reads served there pay it too) equals the `measured` hop: secant steps from the measured value
/// (a slope of 1 assumed for the first step), at most 8 predictions, stopping when the whole
/// cycle nearest the root is reached; the latency whose prediction came closest, at least 1.
fn fit_latency(
    what: &str,
    measured: f64,
    mut predict: impl FnMut(u64) -> Result<f64>,
) -> Result<LatencyFit> {
    let d0 = measured.round().max(1.0) as u64;
    let p0 = predict(d0)?;
    let mut steps = vec![(d0, p0)];
    let (mut da, mut pa) = (d0, p0);
    let mut db = (d0 as f64 - (p0 - measured)).round().max(1.0) as u64;
    while steps.len() < 8 && db != da {
        let pb = predict(db)?;
        steps.push((db, pb));
        let slope = (pb - pa) / (db as f64 - da as f64);
        if slope <= 0.0 {
            anyhow::bail!(
                "calibrate: the model's chase does not rise with {what} ({da} -> {pa:.1}, {db} -> {pb:.1} cycles)"
            );
        }
        let next = (db as f64 + (measured - pb) / slope).round().max(1.0) as u64;
        (da, pa) = (db, pb);
        if steps.iter().any(|s| s.0 == next) {
            break;
        }
        db = next;
    }
    let best = *steps
        .iter()
        .min_by(|a, b| (a.1 - measured).abs().total_cmp(&(b.1 - measured).abs()))
        .expect("one prediction at least");
    Ok(LatencyFit {
        measured,
        latency: best.0,
        predicted: best.1,
        at_raw: p0,
        steps,
    })
}

/// The file's `dram_latency` from the per-footprint fits: their median (the mean of the
/// middle two, rounded, for an even count); 1 for none.
fn median_fit(fits: &[u64]) -> u64 {
    let mut v = fits.to_vec();
    v.sort_unstable();
    match v.len() {
        0 => 1,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]).div_ceil(2),
    }
}

/// fault_cycles from the 4KB first-touch runs (`run_means`: each clean run's mean fault, ns,
/// from bursts spread over the whole calibration): the 10th percentile of the runs (noise only
/// adds time, and a slow phase of the machine slows whole runs), less the model's zeroing
/// cost (`zero_cycles`) charged beside it, in cycles at `ghz`, at least 1. A run's mean, not
/// a single fault's percentile: the model charges every fault the same, so it needs what a
/// fault costs on average (the per-cpu list refills, the LRU batch drains), which single
/// faults' p10 (0.87 against a mean of 1.00 us) leaves out: validate's first-touch row,
/// which times runs, missed by -19.6% with it.
fn fault_estimate(run_means: &Stat, zero_cycles: f64, ghz: f64) -> f64 {
    (run_means.low() * ghz - zero_cycles).max(1.0)
}

/// The footprint L2's latency is read at (and validate's L2 row runs at): 4x L1, twice L1's
/// lines (one line of each 128-byte pair), so that the cyclic chase misses L1 on every hop, and
/// no more, so that its 4KB pages stay within the L1 DTLB's reach wherever the host backs THP
/// memory with 4KB pages (the chase's 2MB pages are then 4KB TLB entries); at most half of L2.
/// L2's latency at half its size (1 MiB, until 2026-11-27 08:00) held STLB hits on such a host:
/// its 256 pages' entries overflow the L1 DTLB, and a chase over them cost 20.4 cycles a hop
/// against 16.2 for the same lines visited page by page (scripts/l2-latency-pages.c), which the
/// model, splintering those entries too, then charged twice. Capped at 256 KiB after that, it
/// still did on the AMD EPYC guest of 2026-11-27 10:20, whose L1 DTLB has 64 entries: 256 KiB
/// is 64 pages, and the curve read 12-13 cycles at 64-128 KiB against 18 at 256 KiB.
///
/// Rounded down to a power of two (since 2026-11-28): the latency curve has points at the
/// powers of two (`sweep_footprints`), and calibrate reads L2 at the curve's point at or below
/// this footprint, while validate's L2 row ran at the footprint itself. With a 48 KiB L1 that
/// was 128 KiB read and 192 KiB checked: 384 KiB of THP memory, 96 4KB entries under 4KB host
/// pages, the L1 DTLB's whole reach, where the native chase paid +1.3 to +1.6 cycles a hop over
/// 128 KiB (14.9 to 16.6 cycles at 3.5 GHz, three runs of scripts/l2-footprint-clock.c; docs/validation.md,
/// "The L2 row") and the model, whose LRU L1 DTLB holds 96 contiguous pages exactly, nothing.
pub fn l2_footprint(l1_bytes: usize, l2_bytes: usize) -> usize {
    let f = (4 * l1_bytes).min(l2_bytes / 2).max(1);
    1 << (usize::BITS - 1 - f.leading_zeros())
}

/// What the concurrent-walks benchmark gives.
#[derive(Clone, Copy, Debug, PartialEq)]
struct WalkEstimate {
    /// The walk alone: the lone (K=1) 4KB hop less the control's (same lines, no walk), ns.
    walk: f64,
    /// The fastest time per hop of any K (all chains together), ns: saturation.
    sat: f64,
    /// Walks in flight on average at saturation (Little's law): walk / sat.
    occupancy: f64,
    /// The fewest walkers that carry that occupancy: its ceiling, 1..=8 (the model's cap).
    walkers: u32,
}

/// Concurrent page walks from K interleaved chases whose every hop walks (`rows`: K and the
/// time per hop, all chains together; K=1 first) and a control of the same lines whose
/// translations hit (`ctrl`, one chase). At saturation one hop ends every `sat`, and each
/// holds a walker for its walk, so `walk / sat` walks are in flight on average (Little's law)
/// and the walkers are at least that many: a walk under load (queued behind the others'
/// page-table reads) takes no less than alone, so the lone walk makes it a lower bound, and
/// its ceiling the fewest walkers the measurement allows. A count rounded to the nearest
/// whole number, which this replaced, flipped 3/4 (2.7 and 3.6) on an occupancy that sits
/// between them. Every time is the 10th percentile of its repeats (noise only adds time).
fn walkers_estimate(rows: &[(usize, Stat)], ctrl: &Stat) -> WalkEstimate {
    let t1 = rows[0].1.low();
    let walk = (t1 - ctrl.low()).max(0.0);
    let sat = rows
        .iter()
        .map(|(_, s)| s.low())
        .fold(f64::INFINITY, f64::min)
        .max(1e-9);
    let occupancy = walk / sat;
    // A hair below a whole number is that number (1e-6: float error, not measurement).
    let walkers = ((occupancy - 1e-6).ceil() as i64).clamp(1, 8) as u32;
    WalkEstimate {
        walk,
        sat,
        occupancy,
        walkers,
    }
}

fn fmt3(x: f64) -> String {
    format!("{x:.4}")
}

/// The latency curve's footprints (bytes of lines), 16 KiB to `max`: powers of two, with 1.5x
/// points too from 1 to 64 MiB (where the caches end: the LLC's share may be a few MB), and
/// 1.5x L2 itself, where the LLC's latency is read and `splab validate`'s LLC row measures
/// (validate/patterns.rs: `l2 * 3 / 2`). On an L2 of 512 KiB (AMD Zen 3) the powers of two
/// have no 768 KiB point, and until 2026-11-28 the LLC's latency came from the point at or
/// below it, 512 KiB: L2's own size, whose random chase hits L2 on part of its hops (L2's
/// 8192 lines hold about half of 8192 random ones whose sets overflow unevenly). That share
/// is a likely cause of a quiet pair on the AMD guest reading the LLC at 50 and 43 cycles
/// (docs/validation.md, "A quiet pair after the merges"); not measured since, the session's
/// guest being Intel, where 1.5x L2 (3 MiB) was a point already.
pub fn sweep_footprints(max: usize, l2: Option<usize>) -> Vec<usize> {
    let mut foots = Vec::new();
    let mut foot = 16 << 10;
    while foot <= max {
        foots.push(foot);
        foot = if foot.is_power_of_two() && (1 << 20..64 << 20).contains(&foot) {
            foot + foot / 2
        } else {
            (foot + 1).next_power_of_two()
        };
    }
    if let Some(l2) = l2 {
        let f = 3 * l2 / 2;
        if f <= max && !foots.contains(&f) {
            foots.push(f);
            foots.sort_unstable();
        }
    }
    foots
}

/// The memory-level-parallelism benchmark's K: eight, one per word of a line
/// (`bench::link_word`), from 1 to the model's cap of 32 fill buffers. Until 2026-11-27 they
/// ended at 20, and on the AMD EPYC guest (Zen 3) the speedup was still rising there (17.8x
/// to 20.6x at K=20 against 14.4x to 17.9x at K=16, three runs), so the knee was the last K
/// give or take the slope's noise: `mshrs` 17, 20, 20, 22. K <= 4, which the slope is fitted
/// over, are kept.
const MLP_KS: [usize; 8] = [1, 2, 4, 8, 12, 16, 24, 32];

/// The ways `calibrate` assumes for a TLB array of `entries` found by a sweep: the first of
/// `pref` that divides them, else 1.
fn assumed_ways(entries: u32, pref: &[u32]) -> u32 {
    pref.iter()
        .copied()
        .find(|w| entries.is_multiple_of(*w))
        .unwrap_or(1)
}

/// The STLB's assumed ways (`assumed_ways` of 16, 12, 8, 4, 2): the ways the capacity fit
/// (`stlb_capacity_fit`) tries each candidate with and the file is written with.
pub fn stlb_ways(entries: usize) -> usize {
    assumed_ways(entries as u32, &[16, 12, 8, 4, 2]) as usize
}

/// The share of the pages of a random cyclic chase over `pages` pages that miss a
/// set-associative LRU array of `entries` entries and `ways` ways: a page misses on every lap
/// when its set holds more pages than ways (each of those pages is evicted before its turn
/// comes again), so the share is the chance that at least `ways` of the other pages fall in its
/// set: Binomial(pages - 1, ways / entries) >= ways.
pub fn set_overflow_share(pages: usize, entries: usize, ways: usize) -> f64 {
    if pages <= ways {
        return 0.0;
    }
    let sets = (entries / ways.max(1)).max(1);
    if sets == 1 {
        return if pages > entries { 1.0 } else { 0.0 };
    }
    let n = (pages - 1) as f64;
    let p = 1.0 / sets as f64;
    // P(X < ways) by the pmf's recurrence from P(X = 0) = (1 - p)^n.
    let mut pmf = (n * (1.0 - p).ln()).exp();
    let mut below = 0.0;
    for k in 0..ways {
        below += pmf;
        pmf *= (n - k as f64) / (k as f64 + 1.0) * p / (1.0 - p);
    }
    (1.0 - below).clamp(0.0, 1.0)
}

/// The STLB's capacity from the 4KB sweep (`points` page counts, `over` extra cycles a hop over
/// the packed control): each page count from `from` to `hi` is a candidate capacity, with the
/// ways `stlb_ways` assumes, and the one whose `set_overflow_share` curve is closest (least
/// squares) to the measured share of missing pages, (over - `hit`) / (`walk` - `hit`) clamped
/// to 0..1, at the points from `lo` to `hi`, wins; returns it and its sum of squares. A TLB of
/// random pages misses on about half of them at its capacity (a page's set then holds on
/// average ways - 1 others), so the rule it replaces, the last point below half way, flipped
/// between the capacity and the point before it: 2048 and 1536 on this guest (2026-11-29 e1 and
/// e2), 1024 to 2048 on the AMD guest. None when the plateaus are not apart.
pub fn stlb_capacity_fit(
    points: &[usize],
    over: &[f64],
    hit: f64,
    walk: f64,
    lo: usize,
    hi: usize,
    from: usize,
) -> Option<(usize, f64)> {
    if !(walk - hit > 1.0) {
        return None;
    }
    let measured: Vec<(usize, f64)> = points
        .iter()
        .zip(over)
        .filter(|(p, _)| (lo..=hi).contains(*p))
        .map(|(&p, &o)| (p, ((o - hit) / (walk - hit)).clamp(0.0, 1.0)))
        .collect();
    points
        .iter()
        .copied()
        .filter(|&c| c >= from && c <= hi)
        .map(|c| {
            let w = stlb_ways(c);
            let sse: f64 = measured
                .iter()
                .map(|&(p, m)| (set_overflow_share(p, c, w) - m).powi(2))
                .sum();
            (c, sse)
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The loaded latency read from the memory-level-parallelism benchmark (`loaded_latency_fit`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadedFit {
    /// ns a miss takes longer for each other miss in flight: the least-squares slope over the K
    /// from 2 to the knee.
    pub slope: f64,
    /// ns by which the lone chase's miss (K=1) lies below that line extrapolated to K=1: a cost
    /// a miss pays once anything runs beside it, left out of the slope (0 without a K=1 point
    /// or a slope).
    pub step: f64,
}

/// Loaded latency from the memory-level-parallelism benchmark: `per_miss` holds (K, the time a
/// miss takes with K interleaved chases, K x the hop); below the fill buffers' limit every
/// chase has one miss in flight, so a miss starts with K - 1 others in flight, and the
/// least-squares slope of that time over K is what each of them adds (Little's law; the
/// memory system's queueing under this core's own misses). Fitted over the K from 2 up to
/// `knee` (beyond it the misses wait for a fill buffer, which `mshrs` models); 0 when the time
/// does not rise, or with fewer than two such K.
///
/// K=1 is left out: the lone chase's miss is 13-22 ns faster than a miss with a chain that
/// misses L1 beside it, and that step is not a wait per miss in flight. Natively (scripts/mlp-partner.c,
/// 2026-11-29 05:24-05:26, p10 of 15 interleaved rounds, three passes each) a 1 GiB chase's
/// hop of 183-186 ns rose to 197-200 with a second such chase beside it (calibrate's K=2), to
/// 202-209 with a partner chain whose hops walk but hit L2 (no miss beyond L2 at all), to
/// 201-207 with one served by the LLC without walks, and to 188-191 with one of L1 hits; one
/// partner hop a round (+18-19 ns) or four (+20-22), about the same rise (at 256 MiB too:
/// walk +20, LLC +14-19, L1 +5-9, where the second DRAM chase's step is smaller, +4-11, and
/// mlp-load.c's +1-3). From K=2 on, the time rises by 1.1-2.0 ns a miss for each added chase
/// (scripts/mlp-step.c, calibrate's arrangement and timing, 1024 MiB, three passes: 191-197,
/// 199-201, 200-202, 209-212 ns at K = 2, 4, 8, 12, slopes 1.77, 1.15, 1.40 over those K and
/// 2.25, 1.75, 2.00 with K=1's 183-184 ns; ten more passes 1.11-1.99), as mlp-load.c's rise
/// from K=2 to K=12 (1.1-1.6). The slope over K from 1 (until 2026-11-29)
/// spread the step over every miss in flight: it read 5.3 and 6.8 cycles in a pair of
/// calibrations whose curves differed mostly at K=1.
pub fn loaded_latency_fit(per_miss: &[(usize, f64)], knee: f64) -> LoadedFit {
    let none = LoadedFit {
        slope: 0.0,
        step: 0.0,
    };
    let pts: Vec<(f64, f64)> = per_miss
        .iter()
        .filter(|(k, _)| *k >= 2 && *k as f64 <= knee)
        .map(|&(k, t)| (k as f64, t))
        .collect();
    if pts.len() < 2 {
        return none;
    }
    // The slope sum((x - mean x) y) / sum((x - mean x) x): the same as with both centred.
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * p.0).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * p.1).sum();
    if sxx <= 0.0 || sxy <= 0.0 {
        return none;
    }
    let slope = sxy / sxx;
    let step = per_miss
        .iter()
        .find(|(k, _)| *k == 1)
        .map_or(0.0, |&(_, t1)| my + slope * (1.0 - mx) - t1);
    LoadedFit { slope, step }
}

/// Intervals the LLC share's bracket is split into when it is measured again.
const REFINE_STEPS: usize = 8;

/// Where a latency curve (footprint, cycles; footprints rising) first rises above `half`:
/// linearly between that point and the one before it; the first footprint if the curve starts
/// above, the last if it never crosses.
pub fn first_crossing(curve: &[(f64, f64)], half: f64) -> f64 {
    match curve.iter().position(|&(_, c)| c > half) {
        None => curve.last().map_or(0.0, |p| p.0),
        Some(0) => curve[0].0,
        Some(i) => {
            let ((fa, la), (fb, lb)) = (curve[i - 1], curve[i]);
            fa + (fb - fa) * ((half - la) / (lb - la)).clamp(0.0, 1.0)
        }
    }
}

/// Where a decay curve (round time, hop latency; round times rising) crosses `half`, on its
/// non-decreasing least-squares fit (`isotonic`: a line only gets older with the round, so a
/// point below one before it is noise, pooled with it; a first-crossing rule with one point of
/// confirmation read "never" in a run whose 12.4 ms point was above half way and 16.1 ms point
/// below): at the first fitted point above `half`, linearly between it and the one before; the
/// first round time if the fit starts above; None if it never crosses (lines outlive the
/// longest round measured).
pub fn lifetime_crossing(curve: &[(f64, f64)], half: f64) -> Option<f64> {
    let fit = isotonic(&curve.iter().map(|p| p.1).collect::<Vec<_>>());
    let i = fit.iter().position(|&h| h > half)?;
    if i == 0 {
        return Some(curve[0].0);
    }
    let ((ta, ha), (tb, hb)) = ((curve[i - 1].0, fit[i - 1]), (curve[i].0, fit[i]));
    Some(ta + (tb - ta) * ((half - ha) / (hb - ha)).clamp(0.0, 1.0))
}

/// The non-decreasing least-squares fit of `y` (pool adjacent violators: a value below the
/// one before it is averaged with it, and so on back).
pub fn isotonic(y: &[f64]) -> Vec<f64> {
    let mut blocks: Vec<(f64, usize)> = Vec::new();
    for &v in y {
        blocks.push((v, 1));
        while blocks.len() >= 2 && blocks[blocks.len() - 2].0 > blocks[blocks.len() - 1].0 {
            let (b, nb) = blocks.pop().unwrap();
            let (a, na) = blocks.pop().unwrap();
            blocks.push(((a * na as f64 + b * nb as f64) / (na + nb) as f64, na + nb));
        }
    }
    blocks
        .into_iter()
        .flat_map(|(m, n)| std::iter::repeat_n(m, n))
        .collect()
}

/// The non-decreasing least-absolute-deviations fit of `y` (pool adjacent violators with
/// medians: a block whose median is below the one before it is merged with it, and so on back;
/// the pooled medians are an L1 isotonic fit, Robertson, Wright and Dykstra, "Order Restricted
/// Statistical Inference", 1988). The median of an even block is the mean of its middle two.
pub fn isotonic_median(y: &[f64]) -> Vec<f64> {
    let med = |v: &mut Vec<f64>| -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let mut blocks: Vec<(f64, Vec<f64>)> = Vec::new();
    for &v in y {
        blocks.push((v, vec![v]));
        while blocks.len() >= 2 && blocks[blocks.len() - 2].0 > blocks[blocks.len() - 1].0 {
            let (_, b) = blocks.pop().unwrap();
            let (_, mut a) = blocks.pop().unwrap();
            a.extend(b);
            let m = med(&mut a);
            blocks.push((m, a));
        }
    }
    blocks
        .into_iter()
        .flat_map(|(m, v)| std::iter::repeat_n(m, v.len()))
        .collect()
}

/// MSER's truncation point of a series that starts in a transient (White, "An effective
/// truncation heuristic for bias reduction in simulation output", Simulation 69(6), 1997): the
/// `d` in 0..=n/2 that minimises the squared standard error of the mean of what is left,
/// sum((x[i] - mean)^2 for i >= d) / (n - d)^2. Cutting rounds still on their way from another
/// state lowers it (they lie far from the rest); cutting rounds of the steady state raises it
/// (fewer left). At most half the series, as is usual with the rule (the second half is then
/// the steady state's sample).
pub fn mser_cut(x: &[f64]) -> usize {
    let n = x.len();
    let mut best = (f64::INFINITY, 0);
    for d in 0..=n / 2 {
        let rest = &x[d..];
        if rest.is_empty() {
            break;
        }
        let m = rest.len() as f64;
        let mean = rest.iter().sum::<f64>() / m;
        let z = rest.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (m * m);
        if z < best.0 {
            best = (z, d);
        }
    }
    best.1
}

/// Round times (ms) the line-lifetime benchmark aims its spins at, after the spin-free round.
/// To 64 ms since 2026-11-28 (24 ms before): on an Intel Xeon KVM guest (480 MiB L3, 2 MiB
/// L2) three calibrations' curves read 150-230 cycles a hop up to 16 ms and then, at the 24 ms
/// aim (rounds of 22.4, 24.7 and 32.9 ms, as the hops missed more), 220, 302 and 581 against
/// half way at 362-385: "never", "never" and 24.5 ms. Whether a lifetime was found, and with
/// it the LLC's capacity (cpuid's 512 MiB or the 11-12 MiB share), hung on the last point's
/// own length; the crossing has to lie inside the measured ages to be read.
const DECAY_ROUNDS_MS: [f64; 14] = [
    0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0,
];

/// What the line-lifetime benchmark found.
struct Lifetime {
    /// The round time (ns) where the fit crosses half way from the LLC's latency to DRAM's;
    /// None if it never did.
    ns: Option<f64>,
    /// (median round time ns, median fitted hop ns, spin) per point.
    curve: Vec<(f64, f64, usize)>,
    /// The median measured hop (ns) per point, before the fit.
    raw: Vec<f64>,
    lines: usize,
    llc_ns: f64,
    /// The age of the LLC latency chase's lines (its round: `lines` hops at `llc_ns`), ns: where
    /// each pass's own hop is the base of its shares and its half way (`pass_base`).
    base_age: f64,
    /// Each pass's base: its fit read at `base_age`, ns.
    bases: Vec<f64>,
    /// The fewest rounds a point kept.
    reps: usize,
    /// The rounds each point ran in each pass.
    rounds: usize,
    /// The passes.
    passes: usize,
    /// The most rounds MSER cut from a point's block.
    cut: usize,
    /// The largest (p90 - p10) / p50 of the points' round times, percent.
    spread: f64,
    /// Each pass's own crossing (the same fit over that pass's rounds alone), ns; None where
    /// a pass never crossed.
    by_pass: Vec<Option<f64>>,
    /// The crossing of one fit over every pass's rounds (the lifetime until 2026-11-28 13:30;
    /// now `ns` is the median of `by_pass`, `median_crossing`), ns.
    pooled: Option<f64>,
    /// Each pass's fit: (median round time ns, median fitted hop ns) by spin.
    pass_fits: Vec<Vec<(f64, f64)>>,
}

/// Passes of the line-lifetime benchmark: the first where benchmark 3b ran until 2026-11-28,
/// the others between later benchmarks, so that its rounds are spread over the calibration.
/// Nine since 2026-11-28 13:30 (five before): the lifetime and the curve are medians over the
/// passes (`median_crossing`), and a median of nine is moved by no four passes in an unusual
/// phase of the neighbours; each pass takes ~6 s on the Intel guest.
pub const LIFETIME_PASSES: usize = 9;

/// The line-lifetime benchmark (`scripts/cache-decay.c`'s method, docs/validation.md "this
/// host's caches forget with time"), run in passes spread over the calibration (`pass`) and
/// fitted once after the last (`finish`): one chase over `foot` bytes of lines (one of each
/// 128-byte pair, THP memory, one fixed random cycle: L2 misses that hit the LLC), with a
/// dependent spin after every hop (`bench::chase_spin`), at spins aimed at round times from 0.5
/// to 64 ms: the same lines in the same order, only the time between two visits of a line
/// grows. A line's age at its visit is the round time. In each pass every spin runs one block
/// of consecutive rounds (spins in rising order), each round after a one-line chase with the
/// same spin (the spin's own cost, and the L1 hit) and one without; the hop's latency is the
/// round's per hop less the one-line chase's, plus the one-line chase's without spin
/// (differences taken round by round: the clock moves between turbo bins, and at 24 ms a round
/// is 90% spin). The block's first rounds, still on their way from the state the block before
/// left (`mser_cut`), are cut.
///
/// Why passes (since 2026-11-28 11:00): until then every spin ran one block of 2 x reps rounds
/// at one moment (0.1-1 s), all blocks within ~4 s, and the middle of the curve is the
/// neighbours' eviction of those seconds: at a 2.5-3.5 ms round the same chase read 27 to 129
/// ns a hop in blocks 6 s apart (docs/calibrate.md, "The spin-free round"), so a quiet pair of
/// calibrations read `lifetime_ns` 3.61 / 3.24 ms and the curve's shares at 1.8-5 ms 0.325 /
/// 0.156. Pooled over passes tens of seconds apart, each point is the neighbours' median over
/// the calibration, not one moment's.
struct LifetimeRuns {
    /// The chase's memory, held until the last pass (`p` and `o` point into it).
    _region: Region,
    p: *const usize,
    o: *const usize,
    lines: usize,
    per_spin: f64,
    spins: Vec<usize>,
    /// Rounds per block.
    block: usize,
    /// Kept rounds per spin: (wall ns, hop ns, pass).
    kept: Vec<Vec<(f64, f64, usize)>>,
    cut: usize,
    passes: usize,
}

impl LifetimeRuns {
    /// Maps and links the chase, and aims the spins (the spin's rate and the spin-free hop
    /// from probes: the fastest of three).
    fn new(foot: usize, block: usize) -> Result<LifetimeRuns> {
        let r = Region::map(2 * foot + HUGE, Thp::Huge)?;
        r.touch();
        let mut rng = Rng::new(7);
        let nodes = bench::random_lines(2 * foot, &mut rng);
        let lines = nodes.len();
        let mut p = bench::link(&r, &nodes, 1)[0];
        // The one-line chase: a line past the nodes that points at itself.
        // SAFETY: 2 * foot + LINE is inside the region (2 * foot + HUGE mapped).
        let one = unsafe {
            let q = r.base.add(2 * foot) as *mut usize;
            *q = q as usize;
            q as *const usize
        };
        let mut o = one;
        let probe = 1000;
        let per_spin = (0..3)
            .map(|_| bench::time_spin_round(&mut o, probe, 1024).1 / (probe * 1024) as f64)
            .fold(f64::INFINITY, f64::min)
            .max(0.01);
        bench::time_spin_round(&mut p, lines, 0);
        let hop0 = (0..3)
            .map(|_| bench::time_spin_round(&mut p, lines, 0).1 / lines as f64)
            .fold(f64::INFINITY, f64::min);
        let mut spins = vec![0usize];
        for ms in DECAY_ROUNDS_MS {
            let s = ((ms * 1e6 / lines as f64 - hop0) / per_spin).max(1.0) as usize;
            if s > *spins.last().unwrap() {
                spins.push(s);
            }
        }
        let n = spins.len();
        Ok(LifetimeRuns {
            _region: r,
            p,
            o,
            lines,
            per_spin,
            spins,
            block,
            kept: vec![Vec::new(); n],
            cut: 0,
            passes: 0,
        })
    }

    /// One pass: every spin's block, spins in rising order.
    fn pass(&mut self) {
        let pass = self.passes;
        self.passes += 1;
        let lines = self.lines;
        let per_spin = self.per_spin;
        // The one-line chase runs about 0.2 ms (at least 64 hops).
        let alone_hops =
            |spin: usize| ((2e5 / (2.0 + spin as f64 * per_spin)) as usize).clamp(64, lines);
        // Four spin-free rounds first, untimed, as the first pass's probes were: the benchmark
        // before this pass left the lines in DRAM (and their translations out of the TLBs).
        for _ in 0..4 {
            bench::time_spin_round(&mut self.p, lines, 0);
        }
        // Each spin runs as one block of consecutive rounds, spins in rising order, and the
        // block's first rounds are cut by MSER (`mser_cut`): a round does not read the hop at
        // its age alone but also what the rounds before it left in the LLC. After a colder
        // state (the lines older), the spin-free round took 3 to 7 rounds to come down from
        // DRAM's ~125 ns a hop to the LLC's ~17 ns, and at 0.5-1.2 ms rounds 6 to over 30;
        // after a warmer one, 3 ms rounds rose over 3 to 10 (scripts/lifetime-warmup.c,
        // docs/calibrate.md "The spin-free round"). Rising order makes every block start from a
        // warmer state than its own, the shorter transient. Every round is kept but the cut
        // ones: a round of 24 ms under load is nearly always context-switched (at load average
        // 3.5 the 24 ms point kept no clean round of 50 tries), so the hop is timed in this
        // thread's CPU time, which leaves out the time it was off the CPU, and the line's age
        // is the round's wall time, which includes it (the neighbours evict meanwhile).
        for (i, &spin) in self.spins.iter().enumerate() {
            let mut walls = Vec::with_capacity(self.block);
            let mut hops = Vec::with_capacity(self.block);
            for _ in 0..self.block {
                let ah = alone_hops(0);
                let a0 = bench::time_spin_round(&mut self.o, ah, 0).1 / ah as f64;
                let ah = alone_hops(spin);
                let a = bench::time_spin_round(&mut self.o, ah, spin).1 / ah as f64;
                let (wall, cpu) = bench::time_spin_round(&mut self.p, lines, spin);
                walls.push(wall);
                hops.push(cpu / lines as f64 - a + a0);
            }
            let d = mser_cut(&hops);
            self.cut = self.cut.max(d);
            self.kept[i].extend(
                walls[d..]
                    .iter()
                    .zip(&hops[d..])
                    .map(|(&w, &h)| (w, h, pass)),
            );
        }
    }

    /// The fit over every pass's kept rounds, and each pass's own crossing: where the fit by
    /// age crosses half way from its own hop at the LLC latency chase's age (`pass_base`) to
    /// `dram_ns`.
    fn finish(&self, llc_ns: f64, dram_ns: f64) -> Result<Lifetime> {
        let base_age = self.lines as f64 * llc_ns;
        let obs: Vec<(f64, f64, usize)> = self
            .kept
            .iter()
            .enumerate()
            .filter(|(_, k)| k.len() >= 3)
            .flat_map(|(i, k)| k.iter().map(move |&(w, h, _)| (w, h, i)))
            .collect();
        let points = decay_points(&obs);
        anyhow::ensure!(
            points.len() >= 2,
            "the line-lifetime chase has fewer than two points"
        );
        let mut pass_fits = Vec::new();
        let mut bases = Vec::new();
        let by_pass: Vec<Option<f64>> = (0..self.passes)
            .map(|pass| {
                let o: Vec<(f64, f64, usize)> = self
                    .kept
                    .iter()
                    .enumerate()
                    .flat_map(|(i, k)| {
                        k.iter()
                            .filter(move |r| r.2 == pass)
                            .map(move |&(w, h, _)| (w, h, i))
                    })
                    .collect();
                let pts = decay_points(&o);
                let med: Vec<(f64, f64)> = pts.iter().map(|p| (p.1, p.2)).collect();
                let c = pass_crossing(&med, base_age, dram_ns).map(|(base, c)| {
                    bases.push(base);
                    c
                });
                pass_fits.push(med);
                c.flatten()
            })
            .collect();
        let mut spread: f64 = 0.0;
        for k in &self.kept {
            if k.len() >= 3 {
                spread = spread.max(Stat::new(k.iter().map(|r| r.0).collect()).spread());
            }
        }
        let med: Vec<(f64, f64)> = points.iter().map(|p| (p.1, p.2)).collect();
        Ok(Lifetime {
            ns: median_crossing(&by_pass),
            pooled: pass_crossing(&med, base_age, dram_ns).and_then(|(_, c)| c),
            pass_fits,
            curve: points.iter().map(|p| (p.1, p.2, self.spins[p.0])).collect(),
            raw: points.iter().map(|p| p.3).collect(),
            lines: self.lines,
            llc_ns,
            base_age,
            bases,
            reps: self.kept.iter().map(Vec::len).min().unwrap_or(0),
            rounds: self.block,
            passes: self.passes,
            cut: self.cut,
            spread,
            by_pass,
        })
    }
}

/// The decay curve's points from rounds `obs` (wall time ns, hop ns, point): every round is a
/// point (its age, its hop) of one non-decreasing median fit by age, and each point (a spin)
/// gives (point, its rounds' median age, their median fitted hop, their median measured hop),
/// points in order. Why by the rounds' own ages: at one spin a round's time is the spin's plus
/// its misses', so a block whose lines missed more ran longer rounds, its lines older (at a
/// spin aimed at 1.5 ms, six blocks 5 s apart ran 1.46 to 2.50 ms rounds at 21 to 123 ns a
/// hop, on one rising curve of hop by age; scripts/lifetime-warmup.c). Why medians
/// (`isotonic_median`): the hops' noise reaches +-1,000 cycles at 24 ms, which a mean would
/// take in.
pub fn decay_points(obs: &[(f64, f64, usize)]) -> Vec<(usize, f64, f64, f64)> {
    let mut obs = obs.to_vec();
    obs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let fit = isotonic_median(&obs.iter().map(|o| o.1).collect::<Vec<_>>());
    let n = obs.iter().map(|o| o.2 + 1).max().unwrap_or(0);
    let mut ages: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut fitted: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut raw: Vec<Vec<f64>> = vec![Vec::new(); n];
    for (o, f) in obs.iter().zip(fit) {
        ages[o.2].push(o.0);
        fitted[o.2].push(f);
        raw[o.2].push(o.1);
    }
    (0..n)
        .filter(|&i| !ages[i].is_empty())
        .map(|i| {
            (
                i,
                Stat::new(ages[i].clone()).pct(50.0),
                Stat::new(fitted[i].clone()).pct(50.0),
                Stat::new(raw[i].clone()).pct(50.0),
            )
        })
        .collect()
}

/// The model's geometry for an LLC share of `share` bytes on a cache of `cpuid_ways` ways: the
/// fewest sets, a power of two (the cache model indexes sets by address bits), whose
/// `cpuid_ways` ways hold the share, and the share in ways of those sets (at least 1, at most
/// `cpuid_ways`). The sets hold at most twice the share in `cpuid_ways` ways, so a way is at
/// most 2/`cpuid_ways` of the share (10% on a 20-way LLC) and the model's size is within half a
/// way of it, where rounding the number of sets to a power of two moved it by up to 2x (a 6-8
/// MiB share became 5 or 10 MiB). Intel's LLC is not a power-of-two set count either (cpuid
/// leaf 4 here: 212,992 sets, hashed over slices), so only the capacity and ways are kept.
pub fn share_geometry(share: f64, cpuid_ways: u32) -> (usize, u32) {
    let ways_max = cpuid_ways.max(1);
    let lines = (share / 64.0).max(1.0);
    let sets = ((lines / ways_max as f64).ceil() as usize).next_power_of_two();
    let ways = (lines / sets as f64).round().clamp(1.0, ways_max as f64) as u32;
    (sets, ways)
}

/// The lifetime over passes: the median of the passes' own crossings (`lifetime_crossing` of
/// each pass's fit; a pass that never crossed counts as longer than any), the upper middle of
/// an even count; None without passes or when the middle pass never crossed. Why the median
/// over passes, not the crossing of one fit over every pass's rounds (until 2026-11-28 13:30):
/// a pass is one sample of the neighbours' eviction (its rounds, within ~6 s, share one phase
/// of theirs, so they are not independent samples), and the pooled fit followed one unusual
/// pass: in a quiet pair the passes read 30.45, 31.40, 40.45, 31.66, 34.82 and 30.00, 29.10,
/// 34.93, 30.43, 30.35 ms, the pooled fits 33.74 and 30.49 ms (9.6% apart), the passes'
/// medians 31.66 and 30.35 (4.1%). The median of monotone curves at each age
/// (`fixed_age_curve`) crosses half way at the median of their crossings, so the curve the
/// model reads and this value agree.
pub fn median_crossing(by_pass: &[Option<f64>]) -> Option<f64> {
    let mut v = by_pass.to_vec();
    v.sort_by(|a, b| match (a, b) {
        (Some(x), Some(y)) => x.total_cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    v.get(v.len() / 2).copied().flatten()
}

/// The decimal unit a share is written to when its passes spread over `spread` (p90 - p10 of
/// the passes' shares at that age, in share units): the largest power of ten not above the
/// spread, from 0.001 (the file's three decimals) to 0.1 (one decimal at least). A digit finer
/// than the spread is noise: two calibrations' shares of 0.001 and 0.004 at 2-4 ms, where the
/// passes spread over 0.01 or more, read as 75% apart.
pub fn share_resolution(spread: f64) -> f64 {
    if !(spread > 0.001) {
        return 0.001;
    }
    10f64.powf(spread.log10().floor()).clamp(0.001, 0.1)
}

/// One point of the lifetime curve at a fixed age (`fixed_age_curve`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AgePoint {
    /// The age, ns.
    pub age: f64,
    /// The median over passes of their shares at this age.
    pub median: f64,
    /// p90 - p10 of the passes' shares at this age.
    pub spread: f64,
    /// The unit the share is written to (`share_resolution`).
    pub resolution: f64,
    /// The written share: the median rounded to the resolution, then the largest of it and the
    /// shares at younger ages (a line only gets older; rounding at different units could
    /// otherwise step down, which the machine file rejects).
    pub share: f64,
}

/// A pass's points (round time ns, hop ns) sorted by age and made non-decreasing (`isotonic`: a
/// line only gets older with the round).
fn pass_fit(p: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut p = p.to_vec();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    let fit = isotonic(&p.iter().map(|q| q.1).collect::<Vec<_>>());
    p.iter().zip(fit).map(|(q, h)| (q.0, h)).collect()
}

/// A fitted pass (`pass_fit`) read at age `t`: linearly between its points, its first value
/// below them and its last beyond (as the model reads a curve beyond its last point).
fn fit_at(p: &[(f64, f64)], t: f64) -> f64 {
    let i = p.partition_point(|q| q.0 <= t);
    if i == 0 {
        return p[0].1;
    }
    if i == p.len() {
        return p[i - 1].1;
    }
    // p[i - 1].0 <= t < p[i].0 (`partition_point`), so tb > ta.
    let ((ta, ha), (tb, hb)) = (p[i - 1], p[i]);
    ha + (hb - ha) * (t - ta) / (tb - ta)
}

/// A pass's base: its own fitted hop at `base_age`, the age of the LLC latency chase's lines
/// (that chase's round: its lines at the LLC's latency, ~1.8 ms on the Intel guest, where the
/// passes' spin-free round is 1.7-2.2 ms). The shares and the half way of a pass are measured
/// from it, not from the LLC's latency itself, because the latency is the p10 of a tight chase
/// of lines of that same age: whatever the neighbours evict by then is in it already, and a
/// share measured from it would count again the gap between two statistics (the passes keep
/// medians) of two regions timed at other moments. Until 2026-11-29 the shares were measured
/// from the LLC's latency: in a1 (2026-11-28 21:21) the passes' spin-free rounds read 140
/// cycles against the bursts' 127, the shares up to 2 ms read 0.027 (13 cycles of DRAM a hop)
/// and validate's LLC row was predicted +11.8% over a measured hop equal to the latency; in a2,
/// whose bursts read 158, the same shares read 0: the pair's ten near-zero shares apart
/// (docs/validation.md, "The LLC's latency moves with the LLC's state"). Empty: NaN.
pub fn pass_base(points: &[(f64, f64)], base_age: f64) -> f64 {
    if points.is_empty() {
        return f64::NAN;
    }
    fit_at(&pass_fit(points), base_age)
}

/// A pass's (or the pooled fit's) base (`pass_base`) and its crossing (`lifetime_crossing`) of
/// half way from that base to `dram`; None without points.
pub fn pass_crossing(
    points: &[(f64, f64)],
    base_age: f64,
    dram: f64,
) -> Option<(f64, Option<f64>)> {
    if points.is_empty() {
        return None;
    }
    let base = pass_base(points, base_age);
    Some((base, lifetime_crossing(points, (base + dram) / 2.0)))
}

/// The lifetime curve the model reads, at fixed `ages` (ns, rising): each pass's curve
/// (`passes`: (median round time ns, median fitted hop ns) by spin, as `decay_points` gives for
/// that pass's rounds alone) made non-decreasing (`pass_fit`) and read at each age (`fit_at`),
/// as a share of the way from the pass's own hop at `base_age` (`pass_base`) to `dram`,
/// clamped to [0, 1]; the median over the passes at each age, written to the resolution of
/// the passes' spread there (`AgePoint`). Why fixed ages: each point's age was the median
/// round time of a spin, which moves with the LLC's latency and the misses (1.85 against 1.70
/// ms for the spin-free round, 72.8 against 63.8 ms for the longest, in a quiet pair), so two
/// calibrations' curves were compared at different ages and their ages differed by up to 12%;
/// at the same ages only the shares can differ. Why the median over passes: see
/// `median_crossing`. A pass whose base is not below `dram` has no way to go and is left out;
/// empty when no pass is left.
pub fn fixed_age_curve(
    passes: &[Vec<(f64, f64)>],
    ages: &[f64],
    base_age: f64,
    dram: f64,
) -> Vec<AgePoint> {
    let passes: Vec<(Vec<(f64, f64)>, f64)> = passes
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| {
            let f = pass_fit(p);
            let base = fit_at(&f, base_age);
            (f, base)
        })
        .filter(|(_, base)| dram > *base)
        .collect();
    if passes.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<AgePoint> = Vec::new();
    for &age in ages {
        let shares = Stat::new(
            passes
                .iter()
                .map(|(p, base)| ((fit_at(p, age) - base) / (dram - base)).clamp(0.0, 1.0))
                .collect(),
        );
        let median = shares.pct(50.0);
        let spread = shares.pct(90.0) - shares.pct(10.0);
        let resolution = share_resolution(spread);
        let rounded = ((median / resolution).round() * resolution).clamp(0.0, 1.0);
        // Three decimals, as the file writes them (a tenth rounded is 0.30000000000000004).
        let rounded = (rounded * 1000.0).round() / 1000.0;
        let share = out.last().map_or(rounded, |p| rounded.max(p.share));
        out.push(AgePoint {
            age,
            median,
            spread,
            resolution,
            share,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{
        amd_l2_array, amd_tlb_decode, decay_points, fault_estimate, fill_in, fill_in_level,
        first_crossing, fit_latency, fixed_age_curve, isotonic, isotonic_median, l2_footprint,
        latency_rule, lifetime_crossing, loaded_latency_fit, median_crossing, median_fit, mser_cut,
        pass_base, pass_crossing, set_overflow_share, share_geometry, share_resolution,
        stlb_capacity_fit, stlb_ways, sweep_footprints, walkers_estimate, AmdTlb, LatencyRule,
        TlbArray, WALK_FIXED_MARK, WALK_FIXED_RAW,
    };
    use crate::calibrate::bench::{Rng, Stat};

    #[test]
    fn l2_is_read_and_checked_at_a_point_of_the_curve() {
        // Intel's 48 KiB L1D and 2 MiB L2: 4x L1 is 192 KiB, between the curve's 128 and 256
        // KiB points; calibrate read 128 KiB and validate checked 192 KiB until 2026-11-28.
        assert_eq!(l2_footprint(48 << 10, 2 << 20), 128 << 10);
        // AMD Zen 3 (32 KiB, 512 KiB) and skylake (32 KiB, 256 KiB): 128 KiB, as before.
        assert_eq!(l2_footprint(32 << 10, 512 << 10), 128 << 10);
        assert_eq!(l2_footprint(32 << 10, 256 << 10), 128 << 10);
        // Half of a small L2.
        assert_eq!(l2_footprint(64 << 10, 192 << 10), 64 << 10);
        for (l1, l2) in [
            (48 << 10, 2 << 20),
            (32 << 10, 512 << 10),
            (80 << 10, 5 << 19),
        ] {
            let f = l2_footprint(l1, l2);
            assert!(
                sweep_footprints(1 << 30, Some(l2)).contains(&f),
                "{l1} {l2}: {f}"
            );
        }
    }

    #[test]
    fn the_sweep_has_a_point_at_one_and_a_half_l2() {
        // AMD Zen 3's 512 KiB L2: 768 KiB added between 512 KiB and 1 MiB, once.
        let f = sweep_footprints(1 << 30, Some(512 << 10));
        let i = f.iter().position(|&x| x == 768 << 10).expect("768 KiB");
        assert_eq!((f[i - 1], f[i + 1]), (512 << 10, 1 << 20));
        assert!(f.windows(2).all(|w| w[0] < w[1]));
        // An Intel 2 MiB L2: 3 MiB is a 1.5x point already, not repeated; the same sweep as
        // without an L2.
        let g = sweep_footprints(1 << 30, Some(2 << 20));
        assert_eq!(g, sweep_footprints(1 << 30, None));
        assert_eq!(g.iter().filter(|&&x| x == 3 << 20).count(), 1);
        // Nothing past the largest footprint.
        assert!(!sweep_footprints(512 << 10, Some(512 << 10)).contains(&(768 << 10)));
    }

    /// Synthetic rounds of the line-lifetime benchmark: LLC 15 ns, DRAM 150 ns, a share of the
    /// lines gone at age a of 1 / (1 + exp(-(a - m) / (m / 4))), m the pass's own half-way age
    /// (the neighbours' eviction moving between passes), 21 rounds per spin, the round's age
    /// jittered +-5%, the hop +-20 ns of noise and one round in ten off by +-1,000 ns (the
    /// differences of a round and a spin timed apart). Returns (age ns, hop ns, point, pass).
    fn decay_rounds(mids_ms: &[f64], seed: u64) -> Vec<(f64, f64, usize, usize)> {
        let aims = [
            0.2, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0,
        ];
        let mut rng = Rng::new(seed);
        let mut u = || (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        let mut out = Vec::new();
        for (pass, &m) in mids_ms.iter().enumerate() {
            for (i, &aim) in aims.iter().enumerate() {
                for _ in 0..21 {
                    let age = aim * (0.95 + 0.1 * u());
                    let f = 1.0 / (1.0 + (-(age - m) / (m / 4.0)).exp());
                    let mut hop = 15.0 + 135.0 * f + 40.0 * (u() - 0.5);
                    if u() < 0.1 {
                        hop += if u() < 0.5 { -1000.0 } else { 1000.0 };
                    }
                    out.push((age * 1e6, hop, i, pass));
                }
            }
        }
        out
    }

    #[test]
    fn rounds_pooled_over_passes_cross_where_the_passes_centre() {
        let half = (15.0 + 150.0) / 2.0;
        let crossing = |rounds: &[(f64, f64, usize, usize)]| -> f64 {
            let obs: Vec<(f64, f64, usize)> = rounds.iter().map(|r| (r.0, r.1, r.2)).collect();
            let pts = decay_points(&obs);
            let med: Vec<(f64, f64)> = pts.iter().map(|p| (p.1, p.2)).collect();
            lifetime_crossing(&med, half).unwrap() / 1e6
        };
        // One pass at m = 3 ms: its crossing is m, within the 1-ms-apart points' resolution
        // (linear between points on an S-curve) and the noise.
        let one = decay_rounds(&[3.0], 1);
        let t = crossing(&one);
        assert!((t - 3.0).abs() < 0.3, "one pass: {t} ms");
        // The points come back in order, each with its rounds' median age (the aims) and a
        // median measured hop the outliers do not move: the spin-free point reads the LLC.
        let obs: Vec<(f64, f64, usize)> = one.iter().map(|r| (r.0, r.1, r.2)).collect();
        let pts = decay_points(&obs);
        assert_eq!(pts.len(), 12);
        assert!(pts.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        assert!((pts[0].1 / 1e6 - 0.2).abs() < 0.01, "{:?}", pts[0]);
        assert!((pts[0].3 - 15.0).abs() < 10.0, "{:?}", pts[0]);
        assert!((pts[11].2 - 150.0).abs() < 10.0, "{:?}", pts[11]);
        // Five passes whose neighbours put half way at 2.1 to 3.9 ms: each pass alone reads
        // its own (the spread the source note reports), the pooled fit the middle one's.
        let mids = [2.1, 3.9, 3.0, 2.55, 3.45];
        let all = decay_rounds(&mids, 2);
        for (pass, &m) in mids.iter().enumerate() {
            let mine: Vec<_> = all.iter().copied().filter(|r| r.3 == pass).collect();
            let t = crossing(&mine);
            assert!(
                (t - m).abs() < 0.1 * m + 0.2,
                "pass {pass}: {t} ms against {m}"
            );
        }
        let t = crossing(&all);
        assert!((t - 3.0).abs() < 0.3, "pooled: {t} ms");
        // Two calibrations that each see five such passes in another order and other noise
        // agree within 10% where single passes of them were 2.1 and 3.9 ms (60% apart).
        let other = decay_rounds(&[3.45, 2.55, 3.9, 2.1, 3.0], 3);
        let u = crossing(&other);
        assert!(
            (t - u).abs() / t.max(u) < 0.1,
            "two pooled runs: {t} and {u} ms"
        );
    }

    /// A synthetic model hop: a walk share that itself pays part of the DRAM latency (slope
    /// 1.3) plus a fixed 90 cycles; the measured hop 444 must come back within one latency
    /// cycle's worth (1.3 cycles), and the latency must be the root, not the raw hop.
    /// The walk's key and sentence, filled in once benchmark 4b's value is known: the raw line
    /// replaced in place, the mark by the (escaped) note; a file without either is an error.
    #[test]
    fn fill_in_writes_the_walks_key_and_note() {
        let text = format!(
            "a = 1\n\n[walk]\nkind = \"radix\"\nsource = \"4-level. {WALK_FIXED_MARK}\"\nlevel_sizes = []\npwc_entries = [2, 4, 32]\npte_bytes = 8\n{WALK_FIXED_RAW}\n\n[caches]\n"
        );
        let p = fill_in(
            &text,
            "[walk]",
            WALK_FIXED_RAW,
            "fixed_cycles = 11",
            WALK_FIXED_MARK,
            "fixed: \\\"x\\\".",
        )
        .unwrap();
        assert_eq!(
            p,
            "a = 1\n\n[walk]\nkind = \"radix\"\nsource = \"4-level. fixed: \\\"x\\\".\"\nlevel_sizes = []\npwc_entries = [2, 4, 32]\npte_bytes = 8\nfixed_cycles = 11\n\n[caches]\n"
        );
        assert!(fill_in(
            "[caches]\n",
            "[walk]",
            WALK_FIXED_RAW,
            "x",
            WALK_FIXED_MARK,
            ""
        )
        .is_err());
        // Twice the raw line: which to replace is not known.
        let twice = format!("{text}{WALK_FIXED_RAW}\n");
        assert!(fill_in(&twice, "[walk]", WALK_FIXED_RAW, "x", WALK_FIXED_MARK, "").is_err());
    }

    #[test]
    fn the_dram_fit_reproduces_the_measured_hop() {
        let model = |d: u64| 1.3 * d as f64 + 90.0;
        let f = fit_latency("dram_latency", 444.0, |d| Ok(model(d))).unwrap();
        assert!(
            (f.predicted - 444.0).abs() <= 1.3,
            "{} -> {}",
            f.latency,
            f.predicted
        );
        assert_eq!(f.latency, 272, "root of 1.3 d + 90 = 444");
        assert_eq!(f.at_raw, model(444));
        // A nonlinear one (the walks' share shrinks as the latency grows).
        let curved = |d: u64| d as f64 + 3000.0 / (d as f64).sqrt();
        let g = fit_latency("dram_latency", 500.0, |d| Ok(curved(d))).unwrap();
        assert!((curved(g.latency) - 500.0).abs() <= 1.0, "{}", g.latency);
        // A model that does not rise with the latency is an error, not a fit.
        assert!(fit_latency("dram_latency", 444.0, |_| Ok(600.0)).is_err());
    }

    /// The secant's steps, exactly: on a linear model the first guess is the raw hop less the
    /// model's excess there, the second lands on the root, and a repeated point stops it; a
    /// model already right at the raw hop takes one step; a jagged one stops at eight steps and
    /// keeps the step closest to the measurement, not the last.
    /// The LLC's latency line is patched in its own level's table, not another level's with the
    /// same value, and the mark replaced; a missing level, mark or line is an error.
    #[test]
    fn fill_in_level_patches_the_named_levels_latency() {
        let t = "[[caches.levels]]\nname = \"L2\"\nsource = \"x\"\nlatency = 90\n\n[[caches.levels]]\nname = \"LLC\"\nsource = \"y @M@\"\nsize = \"8M\"\nlatency = 90\nreplacement = \"nru\"\n";
        let out = fill_in_level(t, "LLC", "latency = 84", "@M@", "fitted").unwrap();
        assert_eq!(
            out,
            "[[caches.levels]]\nname = \"L2\"\nsource = \"x\"\nlatency = 90\n\n[[caches.levels]]\nname = \"LLC\"\nsource = \"y fitted\"\nsize = \"8M\"\nlatency = 84\nreplacement = \"nru\"\n"
        );
        assert!(fill_in_level(t, "L3", "latency = 84", "@M@", "n").is_err());
        assert!(fill_in_level(t, "LLC", "latency = 84", "@N@", "n").is_err());
        let no_line = "[[caches.levels]]\nname = \"LLC\"\nsource = \"@M@\"\n";
        assert!(fill_in_level(no_line, "LLC", "latency = 84", "@M@", "n").is_err());
        let at_end = "\nname = \"LLC\"\nsource = \"@M@\"\nlatency = 90";
        assert_eq!(
            fill_in_level(at_end, "LLC", "latency = 84", "@M@", "n").unwrap(),
            "\nname = \"LLC\"\nsource = \"n\"\nlatency = 84"
        );
    }

    /// The per-footprint fits' median: the middle one, the rounded-up mean of the middle two,
    /// and one high point (the plateau's small end, where the model keeps lines the machine
    /// lost) moving it only to its neighbour.
    #[test]
    fn dram_latency_is_the_median_of_the_footprints_fits() {
        assert_eq!(median_fit(&[]), 1);
        assert_eq!(median_fit(&[310]), 310);
        assert_eq!(median_fit(&[447, 305, 309]), 309);
        assert_eq!(median_fit(&[300, 310]), 305);
        assert_eq!(median_fit(&[300, 311]), 306);
        assert_eq!(median_fit(&[447, 300, 304, 306, 308, 312]), 307);
        assert_eq!(median_fit(&[300, 304, 306, 308, 312, 313]), 307);
    }

    #[test]
    fn the_dram_fit_steps_are_the_secants() {
        let f = fit_latency("dram_latency", 444.0, |d| Ok(1.3 * d as f64 + 90.0)).unwrap();
        let at: Vec<u64> = f.steps.iter().map(|s| s.0).collect();
        // 444 -> 667.2, excess 223.2: next 221 (377.3), slope 1.3: 272 (443.6), then 272 again.
        assert_eq!(at, vec![444, 221, 272]);
        let exact = fit_latency("dram_latency", 444.0, |d| Ok(d as f64)).unwrap();
        assert_eq!((exact.steps.len(), exact.latency), (1, 444));
        // A slowly converging model (100 ln d): the cap stops it at eight steps, and the
        // answer is the step closest to the measurement (97 -> 457.5).
        let slow = |d: u64| 100.0 * (d as f64).ln();
        let g = fit_latency("dram_latency", 444.0, |d| Ok(slow(d))).unwrap();
        let at: Vec<u64> = g.steps.iter().map(|s| s.0).collect();
        assert_eq!(at, vec![444, 278, 1, 220, 181, 29, 118, 97]);
        let best = g
            .steps
            .iter()
            .map(|s| (s.1 - 444.0).abs())
            .fold(f64::INFINITY, f64::min);
        assert_eq!((g.predicted - 444.0).abs(), best, "{:?}", g.steps);
        assert_eq!((g.latency, g.predicted), (97, slow(97)));
        // A staircase (d + 10 per 20 cycles of d): the secant steps around the root and stops
        // on a repeated point after a step (300 -> 450) worse than the one before it (299 ->
        // 439): the answer is 299, not the last step.
        let stairs = |d: u64| (d + 10 * (d / 20)) as f64;
        let h = fit_latency("dram_latency", 444.0, |d| Ok(stairs(d))).unwrap();
        let at: Vec<u64> = h.steps.iter().map(|s| s.0).collect();
        assert_eq!(at, vec![444, 224, 297, 302, 299, 300]);
        assert_eq!((h.latency, h.predicted), (299, 439.0));
    }

    #[test]
    fn the_median_fit_pools_violators_by_their_median() {
        // A rise with one outlier low (a round's spin timed apart: -1,000 cycles happened):
        // pooled with the point before it, by the median of the two, not dragged to their mean.
        assert_eq!(
            isotonic_median(&[10.0, 50.0, -1000.0, 60.0, 70.0]),
            vec![10.0, 10.0, 10.0, 60.0, 70.0]
        );
        assert_eq!(
            isotonic_median(&[1.0, 5.0, 4.0, 3.0, 6.0]),
            vec![1.0, 4.0, 4.0, 4.0, 6.0]
        );
        let up = [1.0, 2.0, 2.0, 3.0];
        assert_eq!(isotonic_median(&up), up.to_vec());
        assert!(isotonic_median(&[]).is_empty());
    }

    #[test]
    fn mser_cuts_the_transient_from_another_state_and_no_more_than_half() {
        // The spin-free round after a 30 ms idle (scripts/lifetime-warmup.c, ns a hop): DRAM's
        // 125 coming down to the LLC's ~17 over six rounds, then the steady state.
        let steady = [17.0, 19.0, 16.0, 18.0, 17.5, 16.5];
        let mut x = vec![125.0, 99.0, 74.0, 55.0, 38.0, 27.0];
        for _ in 0..6 {
            x.extend_from_slice(&steady);
        }
        assert_eq!(mser_cut(&x), 6);
        // Rising from a warmer state (the block before had younger lines): the same.
        let mut x = vec![20.0, 45.0, 70.0, 90.0];
        for _ in 0..5 {
            x.extend_from_slice(&[105.0, 110.0, 100.0, 115.0]);
        }
        assert_eq!(mser_cut(&x), 4);
        // A steady series loses nothing; a series that never settles at most half.
        assert_eq!(mser_cut(&[5.0; 10]), 0);
        let ramp: Vec<f64> = (0..20).map(f64::from).collect();
        assert!(mser_cut(&ramp) <= 10);
        assert_eq!(mser_cut(&[]), 0);
    }

    /// The STLB's capacity is the set-overflow fit, not the halfway knee: e1's and e2's sweeps
    /// (2026-11-29 02:33 and 02:53, this guest; the halfway rule read 2048 and 1536) both fit
    /// 2048 entries (16 ways); a curve made from a 1536-entry, 16-way array fits 1536; the share
    /// at capacity is about half, and a one-set array is a step.
    #[test]
    fn the_stlb_capacity_is_the_set_overflow_fit_of_the_sweep() {
        let points = [
            8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072,
            4096, 6144, 8192,
        ];
        let e1 = [
            0.0, -0.0, 0.1, -0.0, -0.0, 0.0, 0.0, 0.0, 7.0, 7.1, 7.0, 7.0, -2.6, 2.0, 6.2, 12.1,
            27.6, 49.9, 51.9, 52.7, 53.4,
        ];
        let e2 = [
            0.1, 0.1, 0.1, 0.1, 0.1, 0.2, -0.0, 0.2, 6.9, 6.9, 7.6, 8.0, -1.4, 4.5, 9.6, 15.6,
            39.4, 59.6, 59.4, 58.7, 59.5,
        ];
        for (over, hit, walk) in [(&e1, 7.0, 51.9), (&e2, 6.9, 59.4)] {
            let (c, sse) = stlb_capacity_fit(&points, over, hit, walk, 192, 6144, 384).unwrap();
            assert_eq!(c, 2048, "sse {sse}");
        }
        let made: Vec<f64> = points
            .iter()
            .map(|&p| 5.0 + 40.0 * set_overflow_share(p, 1536, 16))
            .collect();
        let (c, sse) = stlb_capacity_fit(&points, &made, 5.0, 45.0, 192, 6144, 384).unwrap();
        assert_eq!(c, 1536);
        assert!(sse < 1e-12, "{sse}");
        let half = set_overflow_share(2048, 2048, 16);
        assert!((0.45..0.6).contains(&half), "{half}");
        assert!(set_overflow_share(1024, 2048, 16) < 0.02);
        assert!(set_overflow_share(4096, 2048, 16) > 0.99);
        assert_eq!(set_overflow_share(64, 64, 64), 0.0);
        assert_eq!(set_overflow_share(65, 64, 64), 1.0);
        assert_eq!((stlb_ways(1536), stlb_ways(1000), stlb_ways(6)), (16, 8, 2));
        assert!(stlb_capacity_fit(&points, &e1, 7.0, 7.5, 192, 6144, 384).is_none());
        // Only the counts from `from` to `hi` are candidates.
        let only = stlb_capacity_fit(&points, &e1, 7.0, 51.9, 192, 6144, 3072).unwrap();
        assert_eq!(only.0, 3072);
        let below = stlb_capacity_fit(&points, &e1, 7.0, 51.9, 192, 1536, 384).unwrap();
        assert_eq!(below.0, 1536);
        // Plateaus one cycle apart are not apart.
        assert!(stlb_capacity_fit(&points, &e1, 7.0, 8.0, 192, 6144, 384).is_none());
    }

    #[test]
    fn the_lifetime_is_the_half_way_crossing_of_the_decay_curves_monotone_fit() {
        // (round time ms, hop ns): an LLC hit at 15 ns, DRAM at 150; half way 82.5.
        let ms = |v: &[(f64, f64)]| v.iter().map(|&(t, h)| (t * 1e6, h)).collect::<Vec<_>>();
        // The documented runs' shape (docs/validation.md): hits to 1.4 ms, 45 at 3 ms, 100 at
        // 6 ms, 150 from 10 ms: crosses between 3 and 6 ms, at 3 + 3 * 37.5 / 55 ms.
        let c = ms(&[
            (0.25, 14.0),
            (1.0, 15.0),
            (1.4, 16.0),
            (3.0, 45.0),
            (6.0, 100.0),
            (10.0, 150.0),
        ]);
        let t = lifetime_crossing(&c, 82.5).unwrap();
        assert!((t - (3.0 + 3.0 * 37.5 / 55.0) * 1e6).abs() < 1.0, "{t}");
        // A point above half way with the next below is noise, pooled with it (the fit reads
        // 15, 55, 55, 60, 140): the crossing is between 4 and 8 ms.
        let c = ms(&[
            (0.5, 15.0),
            (1.0, 90.0),
            (2.0, 20.0),
            (4.0, 60.0),
            (8.0, 140.0),
        ]);
        let t = lifetime_crossing(&c, 82.5).unwrap();
        assert!((t - (4.0 + 4.0 * 22.5 / 80.0) * 1e6).abs() < 1.0, "{t}");
        // The run that read "never" with a confirmation rule: 149 at 8.3 ms, 341 at 12.4, 177
        // at 16.1 pool to 259 from 12.4 ms on; half way 249 is crossed at 8.3 + 4.1 * 100 / 110.
        let c = ms(&[(4.1, 100.0), (8.3, 149.0), (12.4, 341.0), (16.1, 177.0)]);
        let t = lifetime_crossing(&c, 249.0).unwrap();
        assert!((t - (8.3 + 4.1 * 100.0 / 110.0) * 1e6).abs() < 1.0, "{t}");
        assert_eq!(
            isotonic(&[1.0, 4.0, 2.0, 0.0, 5.0]),
            vec![1.0, 2.0, 2.0, 2.0, 5.0]
        );
        // A crossing at the last point.
        let c = ms(&[(0.5, 15.0), (8.0, 20.0), (16.0, 150.0)]);
        let t = lifetime_crossing(&c, 82.5).unwrap();
        assert!((t - (8.0 + 8.0 * 62.5 / 130.0) * 1e6).abs() < 1.0, "{t}");
        // Never above half way: no lifetime (a machine of one's own); above from the start:
        // the first round time.
        assert_eq!(
            lifetime_crossing(&ms(&[(0.5, 15.0), (24.0, 40.0)]), 82.5),
            None
        );
        assert_eq!(
            lifetime_crossing(&ms(&[(0.5, 95.0), (24.0, 140.0)]), 82.5),
            Some(0.5e6)
        );
        assert_eq!(lifetime_crossing(&[], 82.5), None);
    }

    /// Only L1 is counted against the add chains; L2 (core-clocked too) is its ns at the file's
    /// clock, as the last level's: counted in the rounds' own cycles it read 14-15 where
    /// validate's row measured 16.4-18.2 at `freq_hz`.
    #[test]
    fn only_l1_is_counted_in_the_cores_cycles() {
        assert_eq!(latency_rule(0, true), LatencyRule::AddChains);
        assert_eq!(latency_rule(1, true), LatencyRule::FileClock);
        assert_eq!(latency_rule(0, false), LatencyRule::FileClock);
        assert_eq!(latency_rule(2, false), LatencyRule::FileClock);
    }

    /// The loaded latency is the slope of a miss's time over K from 2 up to the knee: a line of
    /// slope 10 ns over K = 1, 2, 4, 8 reads 10 whatever lies beyond the knee, with no step; a
    /// falling time reads 0; one point from K=2 below the knee gives no slope.
    #[test]
    fn the_loaded_latency_is_the_slope_of_a_misss_time_over_k_from_2_below_the_knee() {
        let line = [(1, 100.0), (2, 110.0), (4, 130.0), (8, 170.0), (16, 900.0)];
        let f = loaded_latency_fit(&line, 10.0);
        assert!(
            (f.slope - 10.0).abs() < 1e-9 && f.step.abs() < 1e-9,
            "{f:?}"
        );
        assert!((loaded_latency_fit(&line, 20.0).slope - 10.0).abs() > 1.0);
        let falling = [(1, 100.0), (2, 90.0), (4, 80.0)];
        assert_eq!(loaded_latency_fit(&falling, 16.0).slope, 0.0);
        // K=2 alone is no slope (K=1 is not a point of it); K = 2 and 4 are.
        assert_eq!(loaded_latency_fit(&line, 2.0).slope, 0.0);
        assert_eq!(loaded_latency_fit(&line, 3.0).slope, 0.0);
        assert!((loaded_latency_fit(&line, 4.0).slope - 10.0).abs() < 1e-9);
    }

    /// K=1 is not a point of the slope: a curve that steps up from K=1 to K=2 and rises 2 ns a
    /// miss from there reads 2 with the step (the line's 118 ns at K=1, less K=1's 100) apart;
    /// fitted from K=1 (the rule until 2026-11-29) it read 3.7. And calibrate's arrangement
    /// natively (scripts/mlp-step.c 1024 pair shared, 2026-11-29 05:20, a pass: ns a miss
    /// 183.7, 196.8, 199.2, 200.6, 209.2, 225.2 at K = 1, 2, 4, 8, 12, 16, knee 13): 1.15 ns a
    /// miss and a step of 11.4 ns, where the slope from K=1 read 1.75.
    #[test]
    fn the_lone_chases_step_is_not_in_the_loaded_latency() {
        let stepped = [(1, 100.0), (2, 120.0), (4, 124.0), (8, 132.0), (16, 400.0)];
        let f = loaded_latency_fit(&stepped, 10.0);
        assert!((f.slope - 2.0).abs() < 1e-9, "{f:?}");
        assert!((f.step - 18.0).abs() < 1e-9, "{f:?}");
        let native = [
            (1, 183.7),
            (2, 196.8),
            (4, 199.2),
            (8, 200.6),
            (12, 209.2),
            (16, 225.2),
        ];
        let f = loaded_latency_fit(&native, 13.0);
        assert!((f.slope - 1.15).abs() < 0.01, "{f:?}");
        assert!((f.step - 11.4).abs() < 0.05, "{f:?}");
        // Without a K=1 point: the same slope, no step.
        let f2 = loaded_latency_fit(&native[1..], 13.0);
        assert_eq!(f2.slope, f.slope);
        assert_eq!(f2.step, 0.0);
    }

    #[test]
    // A measured age of 3.14 ms, not an approximation of pi.
    #[allow(clippy::approx_constant)]
    fn the_lifetime_curve_is_the_fits_share_of_the_way_to_dram_from_its_own_base() {
        // The 2026-11-27 20:04 run's curve (ms, cycles at 1 cycle a ns): DRAM 470, as one pass
        // read at its own ages (one pass: no spread, so three decimals); the LLC latency
        // chase's lines 0.1 ms old, younger than the pass's first point, so its base is that
        // point's fitted hop.
        let c: Vec<(f64, f64)> = [
            (0.22, 88.0),
            (0.47, 59.0),
            (1.02, 58.0),
            (1.49, 39.0),
            (2.04, 66.0),
            (3.14, 85.0),
            (4.32, 158.0),
            (6.58, 253.0),
            (8.83, 331.0),
            (13.00, 462.0),
            (17.21, 454.0),
            (25.15, 498.0),
        ]
        .iter()
        .map(|&(t, h)| (t * 1e6, h))
        .collect();
        let ages: Vec<f64> = c.iter().map(|p| p.0).collect();
        let f = fixed_age_curve(std::slice::from_ref(&c), &ages, 0.1e6, 470.0);
        // The first four pool to 61, the base (0); then (h - 61) / 409: 66 0.012, 85 0.059,
        // 158 0.237, 253 0.469, 331 0.66; 462 and 454 pool to 458 (0.971); 498 clamps to 1.
        // (From the LLC's latency, 51, as until 2026-11-29, the first four read 0.024.)
        let want = [
            0.0, 0.0, 0.0, 0.0, 0.012, 0.059, 0.237, 0.469, 0.66, 0.971, 0.971, 1.0,
        ];
        assert_eq!(f.iter().map(|p| p.share).collect::<Vec<_>>(), want);
        assert!(f.iter().all(|p| p.spread == 0.0 && p.resolution == 0.001));
        assert_eq!(f.iter().map(|p| p.age).collect::<Vec<_>>(), ages);
        // Between its points a pass is read linearly, beyond them flat: half way from 4.32 ms
        // (158) to 6.58 ms (253) is 205.5 = 0.353; before the first, the first's value; after
        // the last, the last's.
        let g = fixed_age_curve(
            std::slice::from_ref(&c),
            &[0.1e6, 5.45e6, 40e6],
            0.1e6,
            470.0,
        );
        assert_eq!(
            g.iter().map(|p| p.share).collect::<Vec<_>>(),
            [0.0, 0.353, 1.0]
        );
        // The base is read at the chase's age: at 4.32 ms it is 158, every younger age reads
        // 0, and 6.58 ms (253) reads 95 / 312 = 0.304.
        let h = fixed_age_curve(
            std::slice::from_ref(&c),
            &[2.04e6, 4.32e6, 6.58e6],
            4.32e6,
            470.0,
        );
        assert_eq!(
            h.iter().map(|p| p.share).collect::<Vec<_>>(),
            [0.0, 0.0, 0.304]
        );
        assert_eq!(pass_base(&c, 4.32e6), 158.0);
        assert_eq!(pass_base(&c, 0.1e6), 61.0);
        assert!(pass_base(&[], 0.1e6).is_nan());
        // No curve without a gap to DRAM, nor without a pass.
        assert!(fixed_age_curve(&[c], &ages, 0.1e6, 61.0).is_empty());
        assert!(fixed_age_curve(&[], &ages, 0.1e6, 470.0).is_empty());
    }

    #[test]
    fn a_pass_whose_young_hop_sits_above_the_llc_latency_reads_no_young_share() {
        // a1 (2026-11-28 21:21, cycles at 1 a ns): the bursts put the LLC at 127, the passes'
        // spin-free rounds read 140, DRAM 619. Two passes, one offset by 10 cycles at every age
        // (the LLC's state in its phase): both read 0 up to the chase's age and the same share
        // at its rising part within the offset's scaling.
        let pass = |off: f64| -> Vec<(f64, f64)> {
            [
                (1.88, 140.0),
                (2.91, 143.0),
                (7.78, 155.0),
                (17.12, 293.0),
                (67.26, 617.0),
            ]
            .iter()
            .map(|&(t, h)| (t * 1e6, h + off))
            .collect()
        };
        let ages = [1.0e6, 2.0e6, 17.12e6];
        let f = fixed_age_curve(&[pass(0.0)], &ages, 1.7e6, 619.0);
        assert_eq!(f[0].share, 0.0);
        assert_eq!(f[0].median, 0.0);
        // (293 - 140) / 479 = 0.319.
        assert!((f[2].median - 153.0 / 479.0).abs() < 1e-12, "{f:?}");
        let g = fixed_age_curve(&[pass(10.0)], &ages, 1.7e6, 619.0);
        assert_eq!(g[0].median, 0.0);
        assert!((g[2].median - 153.0 / 469.0).abs() < 1e-12, "{g:?}");
        // Its half way is (140 + 619) / 2 = 379.5, between 17.12 ms (293) and 67.26 ms (617):
        // 17.12 + 50.14 * 86.5 / 324 ms; from the LLC's latency (127) it was 373.
        let (base, c) = pass_crossing(&pass(0.0), 1.7e6, 619.0).unwrap();
        assert_eq!(base, 140.0);
        let want = 17.12e6 + 50.14e6 * 86.5 / 324.0;
        assert!((c.unwrap() - want).abs() < 1.0, "{c:?} against {want}");
        assert_eq!(pass_crossing(&[], 1.7e6, 619.0), None);
        // A pass that never gets half way has a base and no crossing.
        assert_eq!(
            pass_crossing(&pass(0.0)[..3], 1.7e6, 619.0),
            Some((140.0, None))
        );
    }

    /// Nine passes of one eviction curve (LLC 100 ns, DRAM 500 ns: share (h - 100) / 400),
    /// each pass's rising part between `lo` and `hi` ms, measured at ages of its own.
    fn pass_curve(lo: f64, hi: f64, jitter: f64) -> Vec<(f64, f64)> {
        [1.9, 3.0, 5.0, 9.0, 14.0, 20.0, 28.0, 40.0, 60.0, 70.0]
            .iter()
            .map(|&ms: &f64| {
                let t = ms * (1.0 + jitter);
                let f = ((t - lo) / (hi - lo)).clamp(0.0, 1.0);
                (t * 1e6, 100.0 + 400.0 * f)
            })
            .collect()
    }

    #[test]
    fn the_lifetime_is_the_median_of_the_passes_crossings() {
        // The quiet pair of 2026-11-28 12:09: one pass at 40.45 ms moved the pooled fit to
        // 33.74 ms; the median is the middle pass.
        let a = [
            Some(30.45),
            Some(31.40),
            Some(40.45),
            Some(31.66),
            Some(34.82),
        ];
        assert_eq!(median_crossing(&a), Some(31.66));
        let b = [
            Some(30.00),
            Some(29.10),
            Some(34.93),
            Some(30.43),
            Some(30.35),
        ];
        assert_eq!(median_crossing(&b), Some(30.35));
        // A pass that never crossed counts as longer than any: the median is "never" only
        // when the middle pass never crossed.
        assert_eq!(median_crossing(&[None, Some(2.0), Some(1.0)]), Some(2.0));
        assert_eq!(median_crossing(&[None, None, Some(1.0)]), None);
        assert_eq!(median_crossing(&[]), None);
    }

    #[test]
    fn a_share_is_written_to_the_unit_of_its_passes_spread() {
        assert_eq!(share_resolution(0.0), 0.001);
        assert_eq!(share_resolution(0.0008), 0.001);
        assert_eq!(share_resolution(0.004), 0.001);
        assert_eq!(share_resolution(0.02), 0.01);
        assert_eq!(share_resolution(0.099), 0.01);
        assert_eq!(share_resolution(0.6), 0.1);
        assert_eq!(share_resolution(1.0), 0.1);
        assert_eq!(share_resolution(f64::NAN), 0.001);
    }

    #[test]
    fn the_fixed_age_curve_is_the_passes_median_and_one_odd_pass_does_not_move_it() {
        let ages: Vec<f64> = [2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0, 64.0]
            .iter()
            .map(|ms| ms * 1e6)
            .collect();
        // Nine passes whose rising part (20 to 40 ms) sits at slightly different ages, each
        // measured at ages of its own (jitter), and three odd ones (one much later, two earlier).
        let mut passes: Vec<Vec<(f64, f64)>> = (0..6)
            .map(|i| pass_curve(20.0, 40.0, 0.01 * i as f64 - 0.02))
            .collect();
        passes.push(pass_curve(40.0, 60.0, 0.0));
        passes.push(pass_curve(8.0, 28.0, 0.0));
        passes.push(pass_curve(10.0, 30.0, 0.0));
        // The LLC latency chase's lines 1.7 ms old: every pass's base is its young 100.
        let f = fixed_age_curve(&passes, &ages, 1.7e6, 500.0);
        assert_eq!(f.iter().map(|p| p.age).collect::<Vec<_>>(), ages);
        // At 32 ms the typical passes read 0.57-0.63: the median is one of them, whatever the
        // odd passes read (0.0 late, 1.0 and 1.0 early).
        let p32 = f[5];
        assert!((0.55..=0.65).contains(&p32.median), "{p32:?}");
        // Their spread there is wide, so the share is written to one decimal.
        assert_eq!(p32.resolution, 0.1);
        assert_eq!(p32.share, 0.6);
        // Shares near nothing whose passes spread over more are written as nothing: at 16 ms
        // the median is 0 (six passes at 0) and the spread 0.3 or more.
        assert_eq!(f[3].share, 0.0);
        // The written curve never steps down, and is 1 by 64 ms.
        assert!(f.windows(2).all(|w| w[0].share <= w[1].share), "{f:?}");
        assert_eq!(f.last().unwrap().share, 1.0);
        // The median curve crosses half way where the median pass does.
        let crossings: Vec<Option<f64>> =
            passes.iter().map(|p| lifetime_crossing(p, 300.0)).collect();
        let m = median_crossing(&crossings).unwrap();
        let at = |t: f64| fixed_age_curve(&passes, &[t], 1.7e6, 500.0)[0].median;
        assert!(
            at(m * 0.97) < 0.5 && at(m * 1.03) > 0.5,
            "median crossing {m}"
        );
    }

    #[test]
    fn amd_tlb_leaves_decode_as_the_epyc_guest_lists_them() {
        // The AMD EPYC (family 25 model 1) guest of 2026-11-27: Fn8000_0005 EAX = EBX =
        // 0xff40ff40, Fn8000_0006 EAX = 0x48002200, EBX = 0x68004200.
        let t = amd_tlb_decode((0xff40_ff40, 0xff40_ff40), (0x4800_2200, 0x6800_4200));
        let a = |entries, ways| Some(TlbArray { entries, ways });
        assert_eq!(
            t,
            Some(AmdTlb {
                l1_4k: a(64, 64),
                l1_2m: a(64, 64),
                l2_4k: a(2048, 8),
                l2_2m: a(2048, 4),
            })
        );
        // Intel reserves both leaves (zeros): no geometry, the sweep's is used.
        assert_eq!(amd_tlb_decode((0, 0), (0, 0)), None);
        // An L1 listed without an L2 is not enough either.
        assert_eq!(amd_tlb_decode((0, 0xff40_ff40), (0, 0)), None);
        // A 4-way L1 of 32 entries.
        let t = amd_tlb_decode((0, 0x0420_0000), (0, 0x6800_0000)).unwrap();
        assert_eq!(t.l1_4k, a(32, 4));
        assert_eq!(t.l1_2m, None);
        // Ways that do not divide the entries (3 ways of 64) are not a geometry.
        let t = amd_tlb_decode((0x0340_0000, 0x0440_0000), (0, 0x6800_0000)).unwrap();
        assert_eq!((t.l1_4k, t.l1_2m), (a(64, 4), None));
    }

    #[test]
    fn amd_l2_associativity_codes() {
        let ways = |code| amd_l2_array(code, 3072).map(|a| a.ways);
        let table = [
            (0, None),
            (1, Some(1)),
            (2, Some(2)),
            (3, Some(3)),
            (4, Some(4)),
            (5, Some(6)),
            (6, Some(8)),
            (7, None),
            (8, Some(16)),
            (9, None),
            (0xa, Some(32)),
            (0xb, Some(48)),
            (0xc, Some(64)),
            (0xd, Some(96)),
            (0xe, Some(128)),
            (0xf, Some(3072)),
        ];
        for (code, w) in table {
            assert_eq!(ways(code), w, "code {code:#x}");
        }
        // Entries that are not whole sets of the ways are not a geometry.
        assert_eq!(amd_l2_array(6, 100), None);
        assert_eq!(amd_l2_array(6, 0), None);
    }

    #[test]
    fn the_llc_share_is_the_first_crossing_of_the_refined_curve() {
        let mb = |x: f64| x * 1048576.0;
        // Rising through 250 between 9 and 9.5 MiB (150 and 350): a quarter of the way.
        let c = [
            (mb(8.0), 120.0),
            (mb(8.5), 130.0),
            (mb(9.0), 150.0),
            (mb(9.5), 350.0),
            (mb(10.0), 400.0),
        ];
        assert_eq!(first_crossing(&c, 250.0), mb(9.25));
        // A noisy dip after the crossing does not move it.
        let c = [
            (mb(8.0), 120.0),
            (mb(8.5), 300.0),
            (mb(9.0), 200.0),
            (mb(9.5), 380.0),
        ];
        assert_eq!(
            first_crossing(&c, 250.0),
            mb(8.0) + mb(0.5) * (130.0 / 180.0)
        );
        // Above from the start, and never above.
        assert_eq!(first_crossing(&c, 100.0), mb(8.0));
        assert_eq!(first_crossing(&c, 500.0), mb(9.5));
        assert_eq!(first_crossing(&[], 1.0), 0.0);
    }

    /// Per-hop times of K chains on a machine with `w` walkers: a lone hop is `c` of data and
    /// `walk` of walk; K chains overlap freely until the walkers saturate, where a walk under
    /// load takes `load` times its lone time. `reps` repeats, each with up to 5% noise, and
    /// `slow` of them (whole repeats, as a slow phase of the machine) 3x slower.
    fn curve(
        w: f64,
        c: f64,
        walk: f64,
        load: f64,
        reps: usize,
        slow: f64,
        rng: &mut Rng,
    ) -> (Vec<(usize, Stat)>, Stat) {
        let ks = [1usize, 2, 4, 6, 8, 10, 12, 14, 16, 20];
        let mut rows: Vec<Vec<f64>> = vec![Vec::new(); ks.len()];
        let mut ctrl = Vec::new();
        for _ in 0..reps {
            let phase = if (rng.below(1000) as f64) < slow * 1000.0 {
                3.0
            } else {
                1.0
            };
            let mut noise = || phase * (1.0 + 0.05 * rng.below(1000) as f64 / 1000.0);
            for (i, &k) in ks.iter().enumerate() {
                let lone = (c + walk) / k as f64;
                let t = if k == 1 {
                    c + walk
                } else {
                    lone.max(walk * load / w)
                };
                rows[i].push(t * noise());
            }
            ctrl.push(c * noise());
        }
        (
            ks.iter()
                .zip(rows)
                .map(|(&k, v)| (k, Stat::new(v)))
                .collect(),
            Stat::new(ctrl),
        )
    }

    #[test]
    fn walkers_are_the_fewest_that_carry_the_walks_in_flight() {
        let mut rng = Rng::new(7);
        // Exact while a loaded walk takes less than w / (w - 1) of a lone one (6 walkers: 1.2x)
        // and measurably more than one (at exactly a whole occupancy the noise decides).
        for w in [2u32, 3, 4, 6] {
            for load in [1.04, 1.08, 1.15] {
                for slow in [0.0, 0.4] {
                    let (rows, ctrl) = curve(w as f64, 56.0, 80.0, load, 31, slow, &mut rng);
                    let e = walkers_estimate(&rows, &ctrl);
                    assert_eq!(
                        e.walkers, w,
                        "{w} walkers, walks {load}x slower under load, {slow} slow: {e:?}"
                    );
                    // The occupancy is what Little's law gives: w / load, within the noise.
                    assert!(
                        (e.occupancy - w as f64 / load).abs() < 0.08 * w as f64,
                        "{e:?}"
                    );
                }
            }
        }
        // Beyond that, a lower bound: never more walkers than there are.
        let (rows, ctrl) = curve(6.0, 56.0, 80.0, 1.3, 31, 0.4, &mut rng);
        assert_eq!(walkers_estimate(&rows, &ctrl).walkers, 5);
        // A rounded count would flip between 3 and 4 walkers as the load moves 4 walkers'
        // occupancy across 3.5; the ceiling stays at 4.
        for load in [1.12, 1.18] {
            let (rows, ctrl) = curve(4.0, 56.0, 80.0, load, 31, 0.4, &mut rng);
            let e = walkers_estimate(&rows, &ctrl);
            assert!((3.3..3.7).contains(&e.occupancy), "{e:?}");
            assert_eq!(e.walkers, 4, "{e:?}");
        }
        // A walk as cheap as the hop's data, or none: one walker at least, never more than 8.
        let (rows, ctrl) = curve(16.0, 56.0, 80.0, 1.0, 31, 0.0, &mut rng);
        assert_eq!(walkers_estimate(&rows, &ctrl).walkers, 8);
        let (rows, ctrl) = curve(4.0, 56.0, 0.0, 1.0, 31, 0.0, &mut rng);
        assert_eq!(walkers_estimate(&rows, &ctrl).walkers, 1);
    }

    #[test]
    fn fault_cycles_is_a_quiet_runs_mean_fault_less_the_zeroing() {
        // Three bursts of 14 runs of 2048 faults: 1000 ns each (+-3%), every 64th 5 us (a
        // per-cpu list refill: part of what a fault costs on average, 1062.5 ns), and a slow
        // phase of the machine over two whole bursts, 1.1-2.2x slower: the quiet runs' mean
        // fault is 3187.5 cycles at 3 GHz, less 1250 of zeroing.
        let mut rng = Rng::new(3);
        let mut means = Vec::new();
        let mut each = Vec::new();
        for burst in 0..3 {
            for _ in 0..14 {
                let phase = if burst < 2 {
                    1.1 + rng.below(1000) as f64 / 1000.0 * 1.1
                } else {
                    1.0
                };
                let mut sum = 0.0;
                for i in 0..2048 {
                    let base = if i % 64 == 63 { 5000.0 } else { 1000.0 };
                    let t = base * phase * (0.97 + 0.06 * rng.below(1000) as f64 / 1000.0);
                    sum += t;
                    each.push(t);
                }
                means.push(sum / 2048.0);
            }
        }
        let f = fault_estimate(&Stat::new(means.clone()), 1250.0, 3.0);
        assert!((f - 1937.5).abs() < 0.03 * 1937.5, "{f}");
        // The runs' median, which the slow bursts move, would not be; nor single faults' p10,
        // which leaves out the refills.
        let median = Stat::new(means).pct(50.0) * 3.0 - 1250.0;
        assert!((median - 1937.5).abs() > 0.1 * 1937.5, "{median}");
        let single = Stat::new(each).low() * 3.0 - 1250.0;
        assert!((single - 1937.5).abs() > 0.08 * 1937.5, "{single}");
        // Never below one cycle.
        assert_eq!(fault_estimate(&Stat::new(vec![100.0; 5]), 1250.0, 3.0), 1.0);
    }

    #[test]
    fn llc_share_is_kept_in_ways_not_rounded_to_a_power_of_two_of_sets() {
        // 6 MiB and 8 MiB on a 20-way LLC: 8192 sets (20 ways of them, 10 MiB, hold both),
        // 12 and 16 ways: the model's sizes are the shares, not 5 and 10 MiB.
        assert_eq!(share_geometry(6.0 * 1048576.0, 20), (8192, 12));
        assert_eq!(share_geometry(8.0 * 1048576.0, 20), (8192, 16));
        // Just above what 4096 sets of 20 ways hold (5 MiB): 8192 sets of 10 ways (5 MiB, -3.8%).
        assert_eq!(share_geometry(5.2 * 1048576.0, 20), (8192, 10));
        // Exactly 5 MiB: 4096 sets, all 20 ways.
        assert_eq!(share_geometry(5.0 * 1048576.0, 20), (4096, 20));
        // Every share's size is within half a way of it, and the ways within 1..=cpuid's.
        for kib in (64..65536).step_by(97) {
            let share = kib as f64 * 1024.0;
            let (sets, ways) = share_geometry(share, 20);
            assert!(sets.is_power_of_two() && (1..=20).contains(&ways), "{kib}");
            let size = (sets * ways as usize * 64) as f64;
            assert!(
                (size - share).abs() <= sets as f64 * 32.0 + 1.0,
                "{kib}: {size}"
            );
            assert!((size - share).abs() / share <= 0.1, "{kib}: {size}");
        }
        // A tiny share: one set's line at least; one way.
        assert_eq!(share_geometry(10.0, 16), (1, 1));
    }
}
