//! Benchmark 4b, a page walk's fixed cost (`walk.fixed_cycles`; docs/calibrate.md, issue 8):
//! what a 4KB walk costs natively beyond the STLB's lookup and the walk's references at the
//! cache levels that serve them (the walker's start, the TLB fill, the load's replay; neither
//! Intel nor AMD publishes it). `scripts/walk-isolation.c`'s method, in Rust:
//!
//! - walk: a dependent chain of loads, one per 4KB page of a region only read (MADV_NOHUGEPAGE:
//!   every page is the shared zero page, so every hop's data is the same line, an L1 hit), over
//!   `PAGES` pages (8x a 2048-entry STLB: every hop misses the STLB and walks), the pages in
//!   groups of 8 sharing one line of leaf entries, visited together in random order inside the
//!   group, groups in random order: 7 of 8 walks find their leaf entry's line in L1;
//! - control: the same loop, every load a random line of one touched page (L1 DTLB and L1 hits).
//!
//! The walk's hop less the control's is the STLB lookup plus the walk, natively. The model's
//! charge for the same (the last TLB level's `hit_cycles`, and the references the model's own
//! walker makes for the same pages in the same order on this file's caches and, on a guest, its
//! `[nested]` host dimension) is subtracted: what is left is the walk's fixed cost, the part no
//! reference explains. The same chase with the pages in one random order (leaf entries in L2)
//! is a cross-check written in the note, not used.

use std::time::Instant;

use anyhow::Result;
use splab_sim::hw::walk::{PtPath, Walker};
use splab_sim::hw::{Caches, Machine};

use super::bench::{self, Region, Rng, Thp};

/// Pages of the walk chase: 8x a 2048-entry STLB (the Intel guest's 1536 + 7, AMD's 2048), a
/// power of two for the loop's index mask.
pub const PAGES: usize = 16_384;
const PAGE: usize = 4096;
/// Hops of one timed run (about 2-5 ms at 10-20 ns a hop).
const HOPS: usize = 1 << 18;

/// The native side, in nanoseconds per hop (p10 of interleaved clean rounds).
pub struct Native {
    pub ctl_ns: f64,
    /// Leaf entries 7 of 8 in L1 (groups of 8).
    pub l1_ns: f64,
    /// Leaf entries in one random page order (in L2).
    pub l2_ns: f64,
    pub rounds: usize,
    pub spread: f64,
    /// The walk chase's offsets (page * 4096 + line * 64), groups of 8, and the random order.
    grouped: Vec<u32>,
    random: Vec<u32>,
}

/// One dependent chain: each load's address adds the value the one before read (always 0:
/// the zero page, or a page of zeros), so the loads cannot overlap.
#[inline(never)]
fn run(base: *const u8, off: &[u32], hops: usize) -> u64 {
    let mask = off.len() - 1;
    let mut v = 0u64;
    for i in 0..hops {
        // SAFETY: every offset is within the region (`measure`), and v is 0.
        v = unsafe {
            (base.add(off[i & mask] as usize + v as usize) as *const u64).read_volatile()
        };
    }
    v
}

fn time_ns(base: *const u8, off: &[u32]) -> f64 {
    let t = Instant::now();
    std::hint::black_box(run(base, off, HOPS));
    t.elapsed().as_secs_f64() * 1e9 / HOPS as f64
}

/// Runs the three chases in `rounds` interleaved rounds.
pub fn measure(rounds: usize) -> Result<Native> {
    let mut rng = Rng::new(48);
    let line = |rng: &mut Rng| (rng.below(64) * 64) as u32;
    // Walk chases over a region only read: every page the zero page.
    let z = Region::map(PAGES * PAGE, Thp::No)?;
    let mut sink = 0u64;
    for p in 0..PAGES {
        // SAFETY: within the region; a read fault maps the zero page.
        sink = sink.wrapping_add(unsafe { (z.base.add(p * PAGE) as *const u64).read_volatile() });
    }
    std::hint::black_box(sink);
    let mut groups: Vec<usize> = (0..PAGES / 8).collect();
    rng.shuffle(&mut groups);
    let mut grouped = Vec::with_capacity(PAGES);
    for g in groups {
        let mut inner: Vec<usize> = (0..8).collect();
        rng.shuffle(&mut inner);
        for j in inner {
            grouped.push(((g * 8 + j) * PAGE) as u32 + line(&mut rng));
        }
    }
    let mut pages: Vec<usize> = (0..PAGES).collect();
    rng.shuffle(&mut pages);
    let random: Vec<u32> = pages
        .iter()
        .map(|&p| (p * PAGE) as u32 + line(&mut rng))
        .collect();
    // The control: one touched page.
    let one = Region::map(PAGE, Thp::No)?;
    // SAFETY: zeroing the region's first page.
    unsafe { std::ptr::write_bytes(one.base, 0, PAGE) };
    let ctl: Vec<u32> = (0..PAGES).map(|_| line(&mut rng)).collect();
    let cases: [(*const u8, &[u32]); 3] = [(one.base, &ctl), (z.base, &grouped), (z.base, &random)];
    for &(b, o) in &cases {
        std::hint::black_box(run(b, o, 4 * PAGES));
    }
    let mut il = bench::Interleaved::new(3);
    for _ in 0..rounds {
        il.round(|i| time_ns(cases[i].0, cases[i].1));
    }
    let s = il.stats();
    Ok(Native {
        ctl_ns: s[0].low(),
        l1_ns: s[1].low(),
        l2_ns: s[2].low(),
        rounds,
        spread: s[1].spread().max(s[0].spread()),
        grouped,
        random,
    })
}

/// The model's cycles a hop for the walk chase `off` beyond the control (its STLB lookup and
/// its walk's references), on machine `m` with no fixed walk cost: the model's own walker and
/// caches on the same pages in the same order, every hop's data the one zero-page line.
fn model_charge(m: &Machine, off: &[u32]) -> f64 {
    let base_shift = m.base_shift();
    let mut walker = Walker::new(&m.walk, base_shift);
    if let Some(n) = &m.nested {
        walker.set_nested(n, m.mem_bytes);
    }
    let mut caches = Caches::new(&m.caches);
    let lookup = m.tlb.lower.last().map_or(0, |l| l.hit_cycles) as f64;
    // The region at 1 GiB (one 1GB and one 2MB-level entry per 2 MiB of it, as a region the
    // kernel placed does), its tables in frames 1-3 and 16.. (leaf tables in address order),
    // the zero page at frame 8.
    let va0 = 1u64 << 30;
    let zero = 8u64;
    let leaves = 16u64;
    let levels = m.walk.level_shifts().len();
    let mut cost = 0u64;
    let mut n = 0u64;
    for pass in 0..2 {
        for &o in off {
            let va = va0 + o as u64;
            let mut path: PtPath = [splab_sim::hw::walk::NO_TABLE; 4];
            for (l, p) in path.iter_mut().enumerate().take(levels) {
                *p = if l + 1 == levels {
                    leaves + (o as u64 >> 21)
                } else {
                    1 + l as u64
                };
            }
            let data_gpa = (zero << base_shift) + (o as u64 & 0xFFF);
            let w = if walker.is_nested() {
                walker.walk_nested(1, va, base_shift, &path, Some(data_gpa), &mut caches)
            } else {
                walker.walk(1, va, base_shift, &path, &mut caches)
            };
            caches.access(walker.host_line(data_gpa >> 6));
            if pass == 1 {
                cost += w.cycles() - w.fixed as u64;
                n += 1;
            }
        }
    }
    lookup + cost as f64 / n.max(1) as f64
}

/// `walk.fixed_cycles` for machine `m` (the calibrated file before the key) at `ghz`: the
/// native walk chase's cycles beyond the control less the model's charge for them, at least 0;
/// and the source note's sentence.
pub fn fixed_cycles(native: &Native, m: &Machine, ghz: f64) -> (u64, String) {
    let l1 = (native.l1_ns - native.ctl_ns) * ghz;
    let l2 = (native.l2_ns - native.ctl_ns) * ghz;
    let m1 = model_charge(m, &native.grouped);
    let m2 = model_charge(m, &native.random);
    let fixed = (l1 - m1).round().max(0.0) as u64;
    let note = format!(
        "fixed_cycles: a 4KB walk's cost beyond the STLB lookup and its references (not published; benchmark 4b, \
         calibrate/walkcost.rs): a dependent chase over {PAGES} zero-page 4KB pages (data always an L1 hit), leaf \
         entries 7 of 8 in L1, costs {l1:.1} cycles a hop beyond the same loop on one page ({:.2} / {:.2} ns, p10 of \
         {} interleaved rounds, spread {:.1}%), of which the model's STLB lookup and walk references on this file \
         make {m1:.1}: {fixed}. Cross-check, leaf entries in L2: {l2:.1} beyond, the model {m2:.1}, {:+.1}.",
        native.l1_ns,
        native.ctl_ns,
        native.rounds,
        native.spread,
        l2 - m2
    );
    (fixed, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's charge for the walk chase on skylake (native, L1 4 cycles, STLB 9): the
    /// lookup, then one leaf reference a walk below the PWC's 2MB-level hit (32 entries: the
    /// region's 32 2MB entries), 7 of 8 an L1 hit.
    #[test]
    fn the_model_charge_is_lookup_and_leaf_references() {
        let m = Machine::from_spec("skylake").unwrap();
        let mut off = Vec::new();
        for g in 0..PAGES / 8 {
            for j in 0..8 {
                off.push(((g * 8 + j) * PAGE) as u32);
            }
        }
        let c = model_charge(&m, &off);
        let l1 = m.caches.levels[0].latency as f64;
        let l2 = m.caches.levels[1].latency as f64;
        // Each group's first walk finds its line of leaf entries in L2 (the pass between loads
        // 128 KiB of them), except 3 of the 2048 lines the L1's tree PLRU keeps through it.
        let (groups, kept) = ((PAGES / 8) as f64, 3.0);
        let refs = 7.0 * groups * l1 + (groups - kept) * l2 + kept * l1;
        let want = 9.0 + refs / PAGES as f64;
        assert_eq!(c, want);
    }
}
