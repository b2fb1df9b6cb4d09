//! calibrate benchmark 7c: does this machine's L2 fill the other line of each line's 128-byte
//! pair (`prefetch.pair_lines`)?
//!
//! Intel's Optimization Reference Manual (data prefetching, Sandy Bridge onward) says its L2
//! spatial prefetcher "strives to complete every cache line fetched to the L2 cache with the
//! pair line that completes it to a 128-byte aligned chunk". Whether it does on a given machine
//! is another matter: a firmware setting ("adjacent cache line prefetch") turns it off, and a
//! cloud host may set it either way. Until 2026-11-29 calibrate wrote `pair_lines = true` for
//! every Intel processor (cpuid vendor), from scripts/pair-fill.c on one Intel guest; on the
//! next (a Firecracker guest, 2.9 GHz, a 300 MiB L3) the same probe found the pair lines of a
//! 256 or 512 KiB chase not in L2, and validate's scattered TLB row read +13% with the rule and
//! +2% without it (docs/validation.md, "Pair lines measured, not assumed").
//!
//! The probe is scripts/pair-fill.c's second test: N lines (one of each 128-byte pair, which
//! line at random) and their buddies (line ^ 64 bytes) linked into two cycles of one THP
//! region; a chase over 16 MiB elsewhere flushes L2; then the first cycle is chased four times
//! ("warm") or not ("cold"), and one pass over the buddy cycle is timed. No load touched a
//! buddy since the flush, so it is an L2 hit only if something filled it there. A control times
//! the buddy cycle right after chasing it twice (L2 hits). The buddies' share in L2 is where the
//! warm pass's median lies between the cold pass's (0) and the control's (1).

use std::time::Instant;

use anyhow::Result;

use super::bench::{self, Region, Rng, Stat, Thp, LINE};

/// The N of the probe, in lines: 128, 256 and 512 KiB of lines (and as many buddies), all well
/// inside any L2 of this decade (1-2 MiB) together.
pub const LINES: [usize; 3] = [2048, 4096, 8192];

/// The flush chase's footprint: every line of 16 MiB, 8x a 2 MiB L2.
const FLUSH_BYTES: usize = 16 << 20;

/// The region: the pairs from 0 (at most 1 MiB), the flush from 32 MiB.
const REGION_BYTES: usize = 64 << 20;
const FLUSH_AT: usize = 32 << 20;

/// The share at or above which the file says the pair lines are filled (the largest N's).
pub const FILLS_AT: f64 = 0.5;

/// One N: its passes' times, ns a hop.
pub struct Point {
    pub lines: usize,
    pub warm: Stat,
    pub cold: Stat,
    pub l2: Stat,
}

impl Point {
    /// The buddies' share in L2 after the warm chase: the warm pass's median between the cold
    /// pass's (0) and the L2 control's (1), clamped to [0, 1].
    pub fn share(&self) -> f64 {
        share(self.warm.pct(50.0), self.cold.pct(50.0), self.l2.pct(50.0))
    }
}

/// `warm` between `cold` (share 0) and `l2` (share 1), clamped; 0 when the two ends do not
/// differ (nothing to tell).
pub fn share(warm: f64, cold: f64, l2: f64) -> f64 {
    if cold - l2 <= 0.0 {
        return 0.0;
    }
    ((cold - warm) / (cold - l2)).clamp(0.0, 1.0)
}

pub struct PairFill {
    pub points: Vec<Point>,
}

impl PairFill {
    /// Whether the file fills pair lines: the largest N's share at least `FILLS_AT` (the
    /// largest: the model's rows that pair lines change, the TLB rows, touch 1 MiB and more of
    /// lines, and a machine may fill a small set's pairs and not a large one's; the smaller Ns
    /// are in the source note).
    pub fn fills(&self) -> bool {
        self.points.last().is_some_and(|p| p.share() >= FILLS_AT)
    }

    /// "128 KiB: buddies after the warm chase 76 ns, cold 280, L2 control 16, share 0.80; ...".
    pub fn text(&self, show: impl Fn(f64) -> String) -> String {
        self.points
            .iter()
            .map(|p| {
                format!(
                    "{}: {} after the warm chase, cold {}, L2 control {}, share {:.2}",
                    bench::mib(p.lines * LINE),
                    show(p.warm.pct(50.0)),
                    show(p.cold.pct(50.0)),
                    show(p.l2.pct(50.0)),
                    p.share()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// ns a hop of one pass of `n` hops from `p`.
fn pass(p: *const usize, n: usize) -> f64 {
    let t = Instant::now();
    let q = bench::chase1(p, n);
    let ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
    std::hint::black_box(q);
    ns
}

/// The probe, `rounds` rounds at each N (fresh random pairs every round).
pub fn measure(rounds: usize) -> Result<PairFill> {
    let r = Region::map(REGION_BYTES, Thp::Huge)?;
    r.touch();
    let mut rng = Rng::new(17);
    let flush: Vec<usize> = {
        let mut v: Vec<usize> = (0..FLUSH_BYTES / LINE)
            .map(|i| FLUSH_AT + i * LINE)
            .collect();
        rng.shuffle(&mut v);
        v
    };
    let flush_start = bench::link(&r, &flush, 1)[0];
    let mut points = Vec::with_capacity(LINES.len());
    for n in LINES {
        let (mut warm, mut cold, mut l2) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            for warmed in [true, false] {
                let mut a: Vec<usize> = (0..n)
                    .map(|i| i * 2 * LINE + LINE * (rng.next() & 1) as usize)
                    .collect();
                let mut b: Vec<usize> = a.iter().map(|&l| l ^ LINE).collect();
                rng.shuffle(&mut a);
                rng.shuffle(&mut b);
                let sa = bench::link(&r, &a, 1)[0];
                let sb = bench::link(&r, &b, 1)[0];
                std::hint::black_box(bench::chase1(flush_start, flush.len()));
                if warmed {
                    std::hint::black_box(bench::chase1(sa, 4 * n));
                    warm.push(pass(sb, n));
                } else {
                    cold.push(pass(sb, n));
                    // The control on the same buddies: chased twice, then timed.
                    std::hint::black_box(bench::chase1(sb, 2 * n));
                    l2.push(pass(sb, n));
                }
            }
        }
        points.push(Point {
            lines: n,
            warm: Stat::new(warm),
            cold: Stat::new(cold),
            l2: Stat::new(l2),
        });
    }
    Ok(PairFill { points })
}

#[cfg(test)]
mod tests {
    use super::{share, PairFill, Point, FILLS_AT};
    use crate::calibrate::bench::Stat;

    fn point(lines: usize, warm: f64, cold: f64, l2: f64) -> Point {
        Point {
            lines,
            warm: Stat::new(vec![warm; 3]),
            cold: Stat::new(vec![cold; 3]),
            l2: Stat::new(vec![l2; 3]),
        }
    }

    /// The two Intel guests' medians (cycles; scripts/pair-fill.c): the first's buddies mostly
    /// in L2 at every N, the second's only at 128 KiB.
    #[test]
    fn the_share_is_the_warm_pass_between_cold_and_l2() {
        assert!((share(104.0, 449.0, 20.4) - 0.805).abs() < 0.001);
        assert!((share(337.0, 353.4, 20.5) - 0.049).abs() < 0.001);
        assert_eq!(share(500.0, 400.0, 20.0), 0.0);
        assert_eq!(share(10.0, 400.0, 20.0), 1.0);
        assert_eq!(share(10.0, 20.0, 20.0), 0.0);
        assert_eq!(share(10.0, 10.0, 20.0), 0.0);
        let first = PairFill {
            points: vec![
                point(2048, 57.7, 375.0, 16.0),
                point(4096, 74.5, 431.0, 17.8),
                point(8192, 104.0, 449.0, 20.4),
            ],
        };
        assert!(first.fills());
        let second = PairFill {
            points: vec![
                point(2048, 76.3, 279.5, 16.0),
                point(4096, 291.6, 330.1, 17.9),
                point(8192, 342.1, 337.5, 20.5),
            ],
        };
        assert!(!second.fills());
        // The largest N decides, at FILLS_AT exactly too.
        let edge = PairFill {
            points: vec![
                point(2048, 300.0, 300.0, 20.0),
                point(8192, 300.0 - FILLS_AT * 280.0, 300.0, 20.0),
            ],
        };
        assert!(edge.fills());
        let below = PairFill {
            points: vec![
                point(2048, 20.0, 300.0, 20.0),
                point(8192, 300.0 - 0.49 * 280.0, 300.0, 20.0),
            ],
        };
        assert!(!below.fills());
        assert!(!PairFill { points: vec![] }.fills());
        assert!(first
            .text(|v| format!("{v:.0}"))
            .contains("512 KiB: 104 after the warm chase, cold 449, L2 control 20, share 0.80"));
    }
}
