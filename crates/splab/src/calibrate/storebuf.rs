//! calibrate benchmark 7b: the store buffer's entries, as this thread sees them (a core whose
//! sibling hyperthread is busy may partition its store queue between the two: AMD's Zen
//! partitions it statically, Software Optimization Guide for family 17h, 2.17).
//!
//! Two independent dependent chases over DRAM-sized memory, interleaved: a hop of chase A, K
//! stores that hit L1, a hop of chase B, K stores, and so on (the method of Henry Wong's
//! reorder-buffer and store-buffer size measurements: two long-latency loads separated by
//! fillers of one kind). A store retires only after the older hop's load completes, and
//! keeps its entry until it commits after retiring; so while K stores fit in the store buffer
//! the other chase's hop dispatches behind them and the two misses overlap (about one miss a
//! step), and once they do not, each hop waits for the other's (two misses a step). The
//! buffer's size is the largest K still on the low plateau. The model has the same knee at the
//! same K (hw/core.rs, `the_store_buffer_benchmark_knees_at_the_buffer_size`).

use std::time::Instant;

use super::bench::{self, Stat};

/// The fillers tried: every 2 up to 64, then every 8 up to 128 (the reorder buffer, 224-512
/// entries on the cores of this decade, holds two hops and 2 x 128 stores only at its upper
/// end, so K stays below where the window itself would bind).
pub const KS: [usize; 37] = [
    8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54,
    56, 58, 60, 62, 64, 72, 80, 88, 96, 104, 112, 120, 128,
];

/// One step function per K: `steps` steps of (hop A, K stores, hop B, K stores). The stores
/// write `i` to 8-byte slots `buf[0..K]` and `buf[512..512 + K]` (two 4 KiB halves, L1
/// resident); they depend on nothing the hops load.
type StepFn = fn(*const usize, *const usize, *mut u64, usize) -> (*const usize, *const usize);

/// K stores of `v` to the 8-byte slots from `buf`: straight-line `mov`s (a loop's own
/// instructions would take window slots).
macro_rules! stores {
    ($k:literal, $buf:expr, $v:expr) => {
        std::arch::asm!(
            ".set sp_sbi, 0",
            concat!(".rept ", $k),
            "mov qword ptr [{buf} + sp_sbi*8], {v}",
            ".set sp_sbi, sp_sbi + 1",
            ".endr",
            buf = in(reg) $buf,
            v = in(reg) $v,
            options(nostack, preserves_flags),
        )
    };
}

macro_rules! step_fns {
    ($($k:literal)*) => {
        [$({
            #[inline(never)]
            fn f(
                mut a: *const usize,
                mut b: *const usize,
                buf: *mut u64,
                steps: usize,
            ) -> (*const usize, *const usize) {
                for i in 0..steps {
                    // SAFETY: `a` and `b` are nodes of cycles `bench::link_word` built (each
                    // holds the address of the next); `buf` is 8 KiB, and the stores write
                    // its first K words of each 4 KiB half (K <= 128).
                    unsafe {
                        a = *a as *const usize;
                        stores!($k, buf, i);
                        b = *b as *const usize;
                        stores!($k, buf.add(512), i);
                    }
                }
                (a, b)
            }
            f as StepFn
        }),*]
    };
}

const STEPS: [StepFn; 37] = step_fns!(
    8 10 12 14 16 18 20 22 24 26 28 30 32 34 36 38 40 42 44 46 48 50 52 54 56 58 60 62 64
    72 80 88 96 104 112 120 128
);

/// What benchmark 7b found.
pub struct StoreBuffer {
    /// Nanoseconds per step (two hops) by K: the p10 of the rounds.
    pub rows: Vec<(usize, Stat)>,
    /// The entries: the largest K whose step stays under half way from the low plateau to
    /// the high one; None when the step never doubles (no knee up to the largest K).
    pub entries: Option<u32>,
    /// The plateaus (ns a step): the median of the first three Ks' p10s, of the last three's.
    pub low: f64,
    pub high: f64,
}

/// Runs benchmark 7b over two chases `a` and `b` (independent cycles through DRAM-sized
/// memory), `reps` interleaved rounds of every K, each round of a K about `ms` milliseconds.
pub fn measure(mut a: *const usize, mut b: *const usize, reps: usize, ms: f64) -> StoreBuffer {
    let mut buf = vec![0u64; 1024];
    let p = buf.as_mut_ptr();
    // Steps per round, from a probe of the smallest K (the fastest step).
    let probe = 512;
    let mut per_step = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        (a, b) = STEPS[0](a, b, p, probe);
        per_step = per_step.min(t.elapsed().as_secs_f64() * 1e9 / probe as f64);
    }
    let steps = (((ms * 1e6) / per_step.max(1.0)) as usize).clamp(256, 1 << 20);
    let mut samples = bench::Interleaved::new(KS.len());
    for _ in 0..reps {
        samples.round(|i| {
            // A warm-up of a tenth, then the timed steps.
            (a, b) = STEPS[i](a, b, p, steps / 10 + 1);
            let t = Instant::now();
            (a, b) = STEPS[i](a, b, p, steps);
            t.elapsed().as_secs_f64() * 1e9 / steps as f64
        });
    }
    std::hint::black_box((a, b, &buf));
    let rows: Vec<(usize, Stat)> = KS.iter().copied().zip(samples.stats()).collect();
    let (entries, low, high) = knee(&rows.iter().map(|(k, s)| (*k, s.low())).collect::<Vec<_>>());
    StoreBuffer {
        rows,
        entries,
        low,
        high,
    }
}

/// The knee of (K, ns a step) points, K increasing: (the largest K whose time is under half
/// way from the low plateau to the high one, the plateaus; None if that is the last K). The plateaus are the medians of
/// the first and of the last three points; no knee (None) when the high one is under 1.5x the
/// low one (two misses a step are about twice one: the step never doubled).
pub fn knee(points: &[(usize, f64)]) -> (Option<u32>, f64, f64) {
    let median3 = |v: &[(usize, f64)]| {
        let mut t: Vec<f64> = v.iter().map(|p| p.1).collect();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    if points.len() < 6 {
        return (None, f64::NAN, f64::NAN);
    }
    let low = median3(&points[..3]);
    let high = median3(&points[points.len() - 3..]);
    if !(high >= 1.5 * low) {
        return (None, low, high);
    }
    let half = (low + high) / 2.0;
    // The first point from which every point is past half way; the buffer holds the K before
    // it. Not the first point past half way: when the thread's share of the buffer changes
    // during the benchmark (the sibling hyperthread starts or stops), a K between the two
    // shares reads high in one round and low in another, and the p10 keeps the low one.
    let last_low = points.iter().rposition(|p| p.1 <= half);
    let entries = match last_low {
        Some(i) if i + 1 < points.len() => Some(points[i].0 as u32),
        _ => None,
    };
    (entries, low, high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knee_is_the_last_k_on_the_low_plateau() {
        // This guest on 2026-11-28 (scripts' prototype): ~155 ns a step up to K = 24, ~320
        // from 32.
        let pts: Vec<(usize, f64)> = [
            (16, 153.0),
            (20, 158.0),
            (24, 168.0),
            (28, 170.0),
            (30, 300.0),
            (32, 317.0),
            (40, 325.0),
            (48, 330.0),
        ]
        .into_iter()
        .collect();
        let (e, low, high) = knee(&pts);
        assert_eq!(e, Some(28));
        assert_eq!((low, high), (158.0, 325.0));
        // The calibrate run of 01:33 (the other vCPU busy at times): high at 32 and 34, low
        // again up to 64, high from 72 on: the buffer is 64, shared in halves at times.
        let pts: Vec<(usize, f64)> = [
            (8, 208.0),
            (16, 199.0),
            (24, 232.0),
            (30, 233.0),
            (32, 368.0),
            (34, 308.0),
            (40, 245.0),
            (56, 244.0),
            (64, 337.0),
            (72, 496.0),
            (80, 448.0),
            (96, 476.0),
            (128, 478.0),
        ]
        .into_iter()
        .collect();
        assert_eq!(knee(&pts).0, Some(64));
    }

    #[test]
    fn no_knee_when_the_step_never_doubles() {
        let pts: Vec<(usize, f64)> = (0..10).map(|i| (8 + 4 * i, 150.0 + i as f64)).collect();
        assert_eq!(knee(&pts).0, None);
        // High from the first point: the buffer is under the smallest K (or the step never
        // doubled); low to the last: over the largest.
        let pts: Vec<(usize, f64)> = (0..10).map(|i| (8 + 4 * i, 300.0)).collect();
        assert_eq!(knee(&pts).0, None);
        let pts: Vec<(usize, f64)> = (0..10)
            .map(|i| (8 + 4 * i, if i < 3 { 150.0 } else { 400.0 }))
            .collect();
        assert_eq!(knee(&pts).0, Some(16));
        assert_eq!(knee(&pts[..4]).0, None);
    }

    /// The step functions run and the stores land where they should.
    #[test]
    fn the_step_functions_write_k_words_of_each_half() {
        // Two one-node cycles (each node points at itself).
        let mut nodes = [0usize; 2];
        let base = nodes.as_mut_ptr();
        // SAFETY: both indices are inside `nodes`.
        let (a, b) = unsafe { (base, base.add(1)) };
        // SAFETY: as above; each node holds its own address.
        unsafe {
            *a = a as usize;
            *b = b as usize;
        }
        let (a, b) = (a as *const usize, b as *const usize);
        for (i, &k) in KS.iter().enumerate() {
            let mut buf = vec![u64::MAX; 1024];
            let (a2, b2) = STEPS[i](a, b, buf.as_mut_ptr(), 3);
            assert_eq!((a2, b2), (a, b));
            assert!(buf[..k].iter().all(|&x| x == 2), "K={k}");
            assert!(buf[k..512].iter().all(|&x| x == u64::MAX), "K={k}");
            assert!(buf[512..512 + k].iter().all(|&x| x == 2), "K={k}");
            assert!(buf[512 + k..].iter().all(|&x| x == u64::MAX), "K={k}");
        }
    }
}
