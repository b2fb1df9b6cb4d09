//! The microbenchmarks of `splab calibrate` (x86-64 Linux): memory regions with explicit THP
//! advice, pointer chases, arithmetic chains, faults, zeroing and copying. Every measurement is
//! repeated; `Stat` keeps the samples and gives the low percentile and the spread.

use std::arch::asm;
use std::arch::x86_64::{__m128i, _mm_setzero_si128, _mm_sfence, _mm_stream_si128};
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use anyhow::{bail, Result};

pub const LINE: usize = 64;
pub const PAGE: usize = 4096;
pub const HUGE: usize = 2 << 20;

/// Context switches of this thread so far (voluntary and involuntary): a timed run during
/// which it changed was preempted, and is not a measurement of the machine.
pub fn switches() -> i64 {
    // SAFETY: getrusage writes the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut u);
        (u.ru_nvcsw + u.ru_nivcsw) as i64
    }
}

/// Runs `f` (which returns one timed sample) until `want` samples ran without a context
/// switch, or `4 * want + 8` tries; keeps the clean samples (all of them if fewer than 3 were
/// clean). The second value counts the runs discarded.
pub fn clean(want: usize, f: impl FnMut() -> f64) -> (Stat, usize) {
    clean_with(want, || {}, f)
}

/// `clean`, with `prep` run before each timed run and outside its context-switch window (a
/// sleep or a warm-up that may itself switch).
pub fn clean_with(
    want: usize,
    mut prep: impl FnMut(),
    mut f: impl FnMut() -> f64,
) -> (Stat, usize) {
    let mut good = Vec::new();
    let mut all = Vec::new();
    let mut tries = 0;
    while good.len() < want && tries < 4 * want + 8 {
        tries += 1;
        prep();
        let s0 = switches();
        let v = f();
        all.push(v);
        if switches() == s0 {
            good.push(v);
        }
    }
    let dropped = tries - good.len();
    if good.len() < 3 {
        (Stat::new(all), 0)
    } else {
        (Stat::new(good), dropped)
    }
}

/// Samples of several quantities taken in interleaved rounds, each round one sample of every
/// quantity, so that a slow phase of the machine falls on all of them alike; kept apart by
/// whether this thread was context-switched during the sample. `stats` follows `clean`'s rule:
/// the clean samples, or all of them if fewer than 3 were clean.
pub struct Interleaved {
    all: Vec<Vec<f64>>,
    /// Per quantity, per round: whether that run was context-switched (a sample is clean when
    /// it was not).
    switched: Vec<Vec<bool>>,
}

impl Interleaved {
    pub fn new(n: usize) -> Interleaved {
        Interleaved {
            all: vec![Vec::new(); n],
            switched: vec![Vec::new(); n],
        }
    }

    /// One round: `f(i)` for every quantity `i` in order.
    pub fn round(&mut self, mut f: impl FnMut(usize) -> f64) {
        for i in 0..self.all.len() {
            let s0 = switches();
            let v = f(i);
            self.all[i].push(v);
            self.switched[i].push(switches() != s0);
        }
    }

    /// Quantity `i` over quantity `j`, round by round, for the rounds in which neither run was
    /// context-switched (all rounds if fewer than 3 were): the median, its p10 and p90, and the
    /// rounds counted. Two quantities of one round run within milliseconds of each other, at one
    /// clock; their p10s, each the fastest of its own runs, may come from different moments of a
    /// clock that moves between turbo bins (docs/validation.md, "The L2 row and the pair line").
    pub fn ratio(&self, i: usize, j: usize) -> Option<(f64, f64, f64, usize)> {
        let (a, b) = (&self.all[i], &self.all[j]);
        let pairs = |clean: bool| -> Vec<f64> {
            (0..a.len().min(b.len()))
                .filter(|&r| {
                    !clean
                        || (self.switched[i].get(r) == Some(&false)
                            && self.switched[j].get(r) == Some(&false))
                })
                .filter(|&r| b[r] > 0.0)
                .map(|r| a[r] / b[r])
                .collect()
        };
        let mut v = pairs(true);
        if v.len() < 3 {
            v = pairs(false);
        }
        if v.is_empty() {
            return None;
        }
        let st = Stat::new(v);
        Some((st.pct(50.0), st.pct(10.0), st.pct(90.0), st.n()))
    }

    pub fn stats(self) -> Vec<Stat> {
        self.all
            .into_iter()
            .zip(self.switched)
            .map(|(a, sw)| {
                let c: Vec<f64> = a
                    .iter()
                    .zip(&sw)
                    .filter(|(_, &w)| !w)
                    .map(|(&v, _)| v)
                    .collect();
                Stat::new(if c.len() >= 3 { c } else { a })
            })
            .collect()
    }
}

/// Repeated samples of one quantity (lower is better: times, latencies).
#[derive(Clone, Debug)]
pub struct Stat {
    pub samples: Vec<f64>,
}

impl Stat {
    pub fn new(mut samples: Vec<f64>) -> Stat {
        samples.sort_by(|a, b| a.total_cmp(b));
        Stat { samples }
    }
    /// The p-th percentile (0..=100), nearest rank on the sorted samples.
    pub fn pct(&self, p: f64) -> f64 {
        let n = self.samples.len();
        let i = ((p / 100.0) * (n - 1) as f64).round() as usize;
        self.samples[i.min(n - 1)]
    }
    /// The estimate: the 10th percentile (a noisy machine only ever adds time).
    pub fn low(&self) -> f64 {
        self.pct(10.0)
    }
    /// (p90 - p10) / p50, in percent.
    pub fn spread(&self) -> f64 {
        let m = self.pct(50.0);
        if m <= 0.0 {
            return 0.0;
        }
        100.0 * (self.pct(90.0) - self.pct(10.0)) / m
    }
    pub fn n(&self) -> usize {
        self.samples.len()
    }
    /// "p10 of 7 runs, spread 3.1%".
    pub fn how(&self) -> String {
        format!("p10 of {} runs, spread {:.1}%", self.n(), self.spread())
    }
}

/// The share by which a value's samples over one calibration may spread before calibrate says it
/// moved: issue 8 asks two calibrations' parameters to agree within 10%, and a value whose
/// bursts (or passes) spread that much within one calibration can differ that much between two.
pub const MOVED_PCT: f64 = 10.0;

/// `name`'s samples over the calibration (bursts' estimates or passes' values), when their
/// spread ((p90 - p10) / p50, nearest rank) exceeds `MOVED_PCT`: "name lo-hi (spread%)", the
/// samples' extremes shown by `show`; None when they agree, or with fewer than 3 samples (no
/// spread to speak of).
pub fn moved(name: &str, samples: &[f64], show: impl Fn(f64) -> String) -> Option<String> {
    let v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 3 {
        return None;
    }
    let st = Stat::new(v);
    let spread = st.spread();
    (spread > MOVED_PCT).then(|| {
        let (lo, hi) = (show(st.samples[0]), show(st.samples[st.n() - 1]));
        format!("{name} {lo} to {hi} ({spread:.1}%)")
    })
}

/// Samples of one quantity taken in bursts spread over the whole calibration (a few runs each,
/// at eight or nine points between the other benchmarks), for quantities that the other
/// tenants' load moves in phases of seconds: the LLC's latency (the uncore is shared) and read
/// bandwidth (DRAM bandwidth is shared). Each burst's 10th percentile is that
/// phase's best case (preemption and queueing only add time); the estimate is the median of
/// the bursts' percentiles, the typical phase's best case, which neither one fast burst nor
/// one slow one moves. One block of back-to-back runs (until 2026-11-28) was one phase: in a
/// quiet pair of calibrations two minutes apart the stream read 17.4 and 19.5 GB/s (p10s of
/// 42 runs in 0.1 s each) and the LLC 149 and 134 cycles. `HugeFaults` uses the same rule.
#[derive(Clone, Debug, Default)]
pub struct Bursts {
    pub bursts: Vec<Stat>,
}

impl Bursts {
    /// Adds one burst's samples (an empty burst is left out).
    pub fn push(&mut self, s: Stat) {
        if s.n() > 0 {
            self.bursts.push(s);
        }
    }
    /// The bursts' 10th percentiles, sorted.
    pub fn lows(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self.bursts.iter().map(Stat::low).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v
    }
    /// The median of the bursts' 10th percentiles (the middle one; the upper middle of an even
    /// count); NaN without a burst.
    pub fn low(&self) -> f64 {
        let v = self.lows();
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    }
    /// (p90 - p10) / p50 of the bursts' 10th percentiles, in percent: the spread of the value.
    pub fn spread(&self) -> f64 {
        if self.bursts.is_empty() {
            return 0.0;
        }
        Stat::new(self.lows()).spread()
    }
    pub fn n(&self) -> usize {
        self.bursts.len()
    }
    /// Every burst's samples together.
    pub fn pooled(&self) -> Stat {
        Stat::new(
            self.bursts
                .iter()
                .flat_map(|b| b.samples.iter().copied())
                .collect(),
        )
    }
    /// "the median of 8 bursts' p10s (a, b, ...; their spread 3.1%; 56 runs, the largest
    /// spread within a burst 9.0%)", each burst's p10 shown by `show`, in time order.
    pub fn how(&self, show: impl Fn(f64) -> String) -> String {
        let runs: usize = self.bursts.iter().map(Stat::n).sum();
        let within = self.bursts.iter().map(Stat::spread).fold(0.0, f64::max);
        format!(
            "the median of {} bursts' p10s spread over the calibration ({}, in time order; their spread {:.1}%; {} runs, the largest spread within a burst {:.1}%)",
            self.n(),
            self.bursts
                .iter()
                .map(|b| show(b.low()))
                .collect::<Vec<_>>()
                .join(", "),
            self.spread(),
            runs,
            within
        )
    }
}

/// The core's clock over the whole calibration: bursts of dependent add chains (`add_chain`),
/// one at the clock benchmark and one at every spread site, each `runs` chains 10 ms apart
/// (each after an untimed warm-up chain). All of them back to back took 50 ms, and one burst of
/// another tenant's load in that window moved the median 10% (2.71 against 2.99 GHz in
/// back-to-back runs of calibrate). A burst's value is its median (preemption only slows a
/// chain, but this guest's clock also moves between turbo bins, 3.2 to 4.1 GHz, from minute to
/// minute: the median is the bin the core ran at in that second); the clock is the median of
/// the bursts' medians (`ns_per_cycle`), the bin it ran at over the calibration. One burst at
/// the start (until 2026-11-28 17:00) put 3.595 and 4.091 GHz in a quiet pair whose values in
/// nanoseconds agreed within 3.1% (docs/validation.md, "After the three merges").
#[derive(Clone, Debug)]
pub struct Clock {
    runs: usize,
    iters: u64,
    /// ns per add, each burst's clean runs, in time order.
    pub bursts: Vec<Stat>,
    /// Runs discarded (preempted) over all bursts.
    pub dropped: usize,
}

impl Clock {
    pub fn new(runs: usize, iters: u64) -> Clock {
        Clock {
            runs,
            iters,
            bursts: Vec::new(),
            dropped: 0,
        }
    }

    /// One burst of `runs` add chains, 10 ms apart.
    pub fn burst(&mut self) {
        let iters = self.iters;
        add_chain(iters);
        let (s, dropped) = spaced_runs(self.runs, iters, add_chain);
        self.dropped += dropped;
        self.push(s);
    }

    /// Adds one burst's samples, ns per add (an empty burst is left out).
    pub fn push(&mut self, s: Stat) {
        if s.n() > 0 {
            self.bursts.push(s);
        }
    }

    /// The bursts' medians, ns per add, in time order.
    pub fn medians(&self) -> Vec<f64> {
        self.bursts.iter().map(|b| b.pct(50.0)).collect()
    }

    /// ns per cycle: the median of the bursts' medians (the upper middle of an even count,
    /// the slower clock); NaN without a burst.
    pub fn ns_per_cycle(&self) -> f64 {
        if self.bursts.is_empty() {
            return f64::NAN;
        }
        Stat::new(self.medians()).pct(50.0)
    }

    /// GHz: 1 / `ns_per_cycle`.
    pub fn ghz(&self) -> f64 {
        1.0 / self.ns_per_cycle()
    }

    /// "the median of 10 bursts' medians spread over the calibration (3.61, 3.70, ... GHz in
    /// time order; fastest run 4.09 GHz, slowest 3.20; 630 runs, 2 preempted discarded)".
    pub fn how(&self) -> String {
        let all = Stat::new(
            self.bursts
                .iter()
                .flat_map(|b| b.samples.iter().copied())
                .collect(),
        );
        format!(
            "the median of {} bursts' medians spread over the calibration (one at its start, one at each spread site; \
             {} GHz in time order; their spread {:.1}%; fastest run {:.3} GHz, slowest {:.3}; {} runs, {} of {} each \
             10 ms apart, {} preempted runs discarded)",
            self.bursts.len(),
            self.medians()
                .iter()
                .map(|m| format!("{:.3}", 1.0 / m))
                .collect::<Vec<_>>()
                .join(", "),
            Stat::new(self.medians()).spread(),
            1.0 / all.pct(0.0),
            1.0 / all.pct(100.0),
            all.n(),
            self.bursts.len(),
            self.runs,
            self.dropped
        )
    }
}

/// `runs` clean runs of `f(iters)` (`clean_with`), each after a 10 ms sleep and an untimed
/// warm-up run: the clock benchmark's chains.
pub fn spaced_runs(runs: usize, iters: u64, f: fn(u64) -> f64) -> (Stat, usize) {
    clean_with(
        runs,
        || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            f(iters);
        },
        || f(iters),
    )
}

/// A count of cycles known in nanoseconds before the calibration's clock is (`Clock`: its last
/// burst is at the last spread site): written into a text as a marker, which `resolve_cycles`
/// replaces with the cycles at the clock once it is known. The precision is the format's
/// (`{:.1}`), 0 without one.
#[derive(Clone, Copy, Debug)]
pub struct Cyc(pub f64);

const CYC_OPEN: char = '\u{E000}';
const CYC_CLOSE: char = '\u{E001}';

impl std::fmt::Display for Cyc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{CYC_OPEN}{}:{}{CYC_CLOSE}",
            self.0,
            f.precision().unwrap_or(0)
        )
    }
}

/// `text` with every `Cyc` marker replaced by its nanoseconds times `ghz`, at its precision.
pub fn resolve_cycles(text: &str, ghz: f64) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(CYC_OPEN) {
        out.push_str(&rest[..i]);
        let after = &rest[i + CYC_OPEN.len_utf8()..];
        let Some(j) = after.find(CYC_CLOSE) else {
            bail!("calibrate: an unterminated cycle marker in {text:?}");
        };
        let body = &after[..j];
        let parsed = body
            .split_once(':')
            .and_then(|(ns, p)| Some((ns.parse::<f64>().ok()?, p.parse::<usize>().ok()?)));
        let Some((ns, prec)) = parsed else {
            bail!("calibrate: a malformed cycle marker {body:?}");
        };
        let _ = write!(out, "{:.*}", prec, ns * ghz);
        rest = &after[j + CYC_CLOSE.len_utf8()..];
    }
    if rest.contains(CYC_CLOSE) {
        bail!("calibrate: a cycle marker's end without its start in {text:?}");
    }
    out.push_str(rest);
    Ok(out)
}

/// Transparent huge page advice for a region.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Thp {
    /// MADV_NOHUGEPAGE: 4KB pages only.
    No,
    /// MADV_HUGEPAGE: 2MB pages where the kernel grants them.
    Huge,
}

/// An anonymous private mapping, 2MB-aligned, unmapped on drop.
pub struct Region {
    raw: *mut u8,
    raw_len: usize,
    pub base: *mut u8,
    pub len: usize,
}

impl Region {
    /// Maps `len` bytes (rounded up to 2MB) aligned to 2MB, with the advice, untouched.
    pub fn map(len: usize, thp: Thp) -> Result<Region> {
        let len = len.div_ceil(HUGE) * HUGE;
        let raw_len = len + HUGE;
        // SAFETY: an anonymous private mapping with no address hint.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                raw_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            bail!(
                "mmap of {} MiB failed: {}",
                raw_len >> 20,
                std::io::Error::last_os_error()
            );
        }
        let raw = raw as *mut u8;
        let base = (raw as usize).div_ceil(HUGE) * HUGE;
        let base = base as *mut u8;
        let advice = match thp {
            Thp::No => libc::MADV_NOHUGEPAGE,
            Thp::Huge => libc::MADV_HUGEPAGE,
        };
        // The whole mapping gets the advice, so that it stays one VMA (smaps reports it whole).
        // SAFETY: the range is the mapping just made.
        let rc = unsafe { libc::madvise(raw as *mut libc::c_void, raw_len, advice) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: unmapping the mapping just made.
            unsafe { libc::munmap(raw as *mut libc::c_void, raw_len) };
            bail!("madvise({advice}) failed: {e}");
        }
        Ok(Region {
            raw,
            raw_len,
            base,
            len,
        })
    }

    /// Writes one byte per 4KB page (faulting the region in).
    pub fn touch(&self) {
        for off in (0..self.len).step_by(PAGE) {
            // SAFETY: within the region.
            unsafe { self.base.add(off).write_volatile(1) };
        }
    }

    /// The frame numbers of the region's resident 4KB pages, in address order, from
    /// /proc/self/pagemap (bits 0-54; Linux Documentation/admin-guide/mm/pagemap.rst); pages not
    /// present are left out. None when the frames are not readable (Linux shows them only with
    /// CAP_SYS_ADMIN: all zero otherwise).
    pub fn frames(&self) -> Option<Vec<u64>> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open("/proc/self/pagemap").ok()?;
        let pages = self.len / PAGE;
        let mut buf = vec![0u8; pages * 8];
        f.read_exact_at(&mut buf, (self.base as usize / PAGE * 8) as u64)
            .ok()?;
        let frames: Vec<u64> = buf
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .filter(|e| e >> 63 == 1) // present
            .map(|e| e & ((1 << 55) - 1))
            .collect();
        if frames.is_empty() || frames.iter().all(|&f| f == 0) {
            return None;
        }
        Some(frames)
    }

    /// Splits the region's 2MB mappings into 4KB page-table entries, keeping the frames: each
    /// 2MB page is made read-only in its first 4KB and writable again (mprotect of part of a
    /// PMD-mapped THP splits the PMD, Linux mm/huge_memory.c __split_huge_pmd; the frames stay
    /// where they were), then the region is given MADV_NOHUGEPAGE so that khugepaged leaves it.
    /// The result: 4KB TLB entries over physically contiguous 2MB ranges.
    pub fn split_to_ptes(&self) -> Result<()> {
        for off in (0..self.len).step_by(HUGE) {
            for prot in [libc::PROT_READ, libc::PROT_READ | libc::PROT_WRITE] {
                // SAFETY: a page inside the region's mapping.
                let rc =
                    unsafe { libc::mprotect(self.base.add(off) as *mut libc::c_void, PAGE, prot) };
                if rc != 0 {
                    bail!("mprotect failed: {}", std::io::Error::last_os_error());
                }
            }
        }
        // SAFETY: the region's mapping.
        let rc = unsafe {
            libc::madvise(
                self.raw as *mut libc::c_void,
                self.raw_len,
                libc::MADV_NOHUGEPAGE,
            )
        };
        if rc != 0 {
            bail!("madvise failed: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// AnonHugePages of the VMA holding the region (/proc/self/smaps), in bytes, at most the
    /// region's length: what the kernel actually granted, never assumed.
    pub fn anon_huge_bytes(&self) -> u64 {
        let Ok(text) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        let addr = self.base as usize;
        let mut inside = false;
        for line in text.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = first.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a <= addr && addr < b;
                    continue;
                }
            }
            if inside {
                if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                    let kb: u64 = rest
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse()
                        .unwrap_or(0);
                    return (kb * 1024).min(self.len as u64);
                }
            }
        }
        0
    }
}

/// How many distinct 2MB-aligned physical ranges (in a guest: guest-physical) `frames`
/// (`Region::frames`) lie in. Under nested paging each such range is one entry of the host's
/// tables that a walk for the data's address reads, so this is the host-dimension footprint of
/// a walk-bound chase over those pages.
pub fn phys_2m_ranges(frames: &[u64]) -> usize {
    let mut ranges: Vec<u64> = frames
        .iter()
        .map(|&f| f >> (HUGE.trailing_zeros() - PAGE.trailing_zeros()))
        .collect();
    ranges.sort_unstable();
    ranges.dedup();
    ranges.len()
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`.
        unsafe { libc::munmap(self.raw as *mut libc::c_void, self.raw_len) };
    }
}

/// A small fast PRNG (xorshift64*), seeded per benchmark so that layouts repeat.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = if i < (1 << 31) {
                self.below(i + 1)
            } else {
                (self.next() % (i as u64 + 1)) as usize
            };
            v.swap(i, j);
        }
    }
}

/// Byte offsets of the nodes of a chase over `span` bytes: one line of each 128-byte pair (so
/// that the adjacent-line prefetcher brings nothing the chase uses; which of the two at random,
/// so that every cache set is used), all in one random order (so that no page sees two hops in
/// a row: the L2 streamer, which prefetches within a 4KB page, finds no stream).
pub fn random_lines(span: usize, rng: &mut Rng) -> Vec<usize> {
    let mut v: Vec<usize> = (0..span / 128)
        .map(|i| i * 128 + 64 * (rng.next() & 1) as usize)
        .collect();
    rng.shuffle(&mut v);
    v
}

/// Byte offsets of a chase with one node per page of `stride` bytes over `pages` pages, each at
/// a random line of its page (so that the lines spread over the cache's sets), pages in random
/// order.
pub fn per_page_nodes(pages: usize, stride: usize, rng: &mut Rng) -> Vec<usize> {
    let mut order: Vec<usize> = (0..pages).collect();
    rng.shuffle(&mut order);
    order
        .into_iter()
        .map(|p| p * stride + rng.below(stride / LINE) * LINE)
        .collect()
}

/// Byte offsets of `n` nodes 128 bytes apart, in random order: the same number of lines as a
/// per-page chase, packed (its control: data-cache latency without the translations).
pub fn packed_nodes(n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).map(|i| i * 128).collect();
    rng.shuffle(&mut v);
    v
}

/// Links `nodes` (byte offsets in `r`) into `k` cycles (consecutive slices), each node holding
/// the address of the next; returns each cycle's first node.
pub fn link(r: &Region, nodes: &[usize], k: usize) -> Vec<*const usize> {
    link_word(r, nodes, k, 0)
}

/// `link`, with the pointers in word `word` (0..8) of each node's line, each pointing at that
/// word of the next node: up to eight arrangements of the same lines live side by side, and a
/// chase from one's starts reads only its own word (one line per hop, as `link`'s).
pub fn link_word(r: &Region, nodes: &[usize], k: usize, word: usize) -> Vec<*const usize> {
    assert!(word < LINE / 8);
    let n = nodes.len();
    let k = k.clamp(1, n);
    let w = 8 * word;
    let mut starts = Vec::with_capacity(k);
    for c in 0..k {
        let (a, b) = (c * n / k, (c + 1) * n / k);
        for i in a..b {
            let next = if i + 1 < b { nodes[i + 1] } else { nodes[a] };
            assert!(nodes[i] % LINE + w + 8 <= LINE && next % LINE + w + 8 <= LINE);
            assert!(nodes[i] + w + 8 <= r.len && next + w + 8 <= r.len);
            // SAFETY: both offsets are inside the region, 8-byte aligned.
            unsafe {
                (r.base.add(nodes[i] + w) as *mut usize).write(r.base.add(next + w) as usize);
            }
        }
        // SAFETY: inside the region.
        starts.push(unsafe { r.base.add(nodes[a] + w) } as *const usize);
    }
    starts
}

/// `hops` dependent loads from `p`.
#[inline(never)]
pub fn chase1(mut p: *const usize, hops: usize) -> *const usize {
    for _ in 0..hops / 8 {
        // SAFETY: every node holds the address of another node of the same region.
        unsafe {
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
        }
    }
    p
}

/// `hops` dependent loads from `p`, each followed by a dependent chain of `spin` multiply-adds
/// on the loaded address, which the next load's address depends on in the processor too: the
/// chain's result is and-ed with zero and added to the address (no x86-64 core takes `and`
/// with an immediate zero as a zero idiom). A hop takes the load's latency plus the spin's, and
/// only the time between two visits of a line grows with `spin`. `scripts/cache-decay.c`'s
/// spin is ordered after the load for the compiler only (an empty `asm` with the result as an
/// input): the processor ran the next load during the spin, hiding up to a reorder buffer's
/// worth of it.
#[inline(never)]
pub fn chase_spin(mut p: *const usize, hops: usize, spin: usize) -> *const usize {
    for _ in 0..hops {
        // SAFETY: every node holds the address of another node of the same region; the spin
        // adds zero to it.
        unsafe {
            p = *p as *const usize;
            let mut x = p as usize;
            for _ in 0..spin {
                x = x.wrapping_mul(3).wrapping_add(1);
                asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags));
            }
            let mut a = p as usize;
            asm!(
                "and {x}, 0",
                "add {a}, {x}",
                a = inout(reg) a,
                x = inout(reg) x,
                options(nomem, nostack)
            );
            let _ = x;
            p = a as *const usize;
        }
    }
    p
}

/// This thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID): the wall time less the
/// time the guest's scheduler had it off the CPU.
pub fn thread_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// One round of `chase_spin` (`hops` hops of `spin`) from `p`, which is left where the round
/// stopped: its wall time and this thread's CPU time in it, nanoseconds.
pub fn time_spin_round(p: &mut *const usize, hops: usize, spin: usize) -> (f64, f64) {
    let c = thread_ns();
    let t = Instant::now();
    *p = black_box(chase_spin(*p, hops, spin));
    let wall = t.elapsed().as_secs_f64() * 1e9;
    (wall, thread_ns() - c)
}

/// `hops` rounds of K interleaved dependent chases (K independent loads in flight per round).
#[inline(never)]
fn chase_k<const K: usize>(starts: &mut [*const usize], hops: usize) -> usize {
    let mut p = [std::ptr::null::<usize>(); K];
    p.copy_from_slice(&starts[..K]);
    for _ in 0..hops {
        for q in p.iter_mut() {
            // SAFETY: as chase1.
            *q = unsafe { std::ptr::read_volatile(*q) } as *const usize;
        }
    }
    // Where each chase stopped: the next run goes on from there (a run from the same starts
    // would find the first nodes still in the caches).
    starts[..K].copy_from_slice(&p);
    p.iter().fold(0usize, |a, q| a ^ (*q as usize))
}

pub const KS: [usize; 10] = [1, 2, 4, 6, 8, 10, 12, 14, 16, 20];

/// K interleaved chases of `hops` hops each, from `starts`, left where they stopped; K one of
/// `KS`.
pub fn chase_many(starts: &mut [*const usize], hops: usize) -> usize {
    match starts.len() {
        1 => chase_k::<1>(starts, hops),
        2 => chase_k::<2>(starts, hops),
        4 => chase_k::<4>(starts, hops),
        6 => chase_k::<6>(starts, hops),
        8 => chase_k::<8>(starts, hops),
        10 => chase_k::<10>(starts, hops),
        12 => chase_k::<12>(starts, hops),
        14 => chase_k::<14>(starts, hops),
        16 => chase_k::<16>(starts, hops),
        20 => chase_k::<20>(starts, hops),
        24 => chase_k::<24>(starts, hops),
        32 => chase_k::<32>(starts, hops),
        k => panic!("chase_many: K={k} is in neither KS nor the MLP's Ks"),
    }
}

/// Nanoseconds per hop of a single chase from `start`: a warm-up of `warm` hops, then `reps`
/// timed runs of about `ms` milliseconds each.
pub fn time_chase(start: *const usize, warm: usize, reps: usize, ms: f64) -> Stat {
    let mut p = black_box(chase1(start, warm.max(8)));
    // Probes to size the runs (the fastest of three: a preempted probe would shorten them).
    let probe = 4096;
    let mut per = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        p = black_box(chase1(p, probe));
        per = per.min(t.elapsed().as_secs_f64() * 1e9 / probe as f64);
    }
    let hops = (((ms * 1e6) / per.max(0.1)) as usize).clamp(1 << 12, 1 << 28) & !7;
    clean(reps, || {
        let t = Instant::now();
        p = black_box(chase1(p, hops));
        t.elapsed().as_secs_f64() * 1e9 / hops as f64
    })
    .0
}

/// Nanoseconds per hop (all chains together) of K interleaved chases: `reps` clean runs of
/// about `ms` each.
pub fn time_chase_many(starts: &mut [*const usize], reps: usize, ms: f64) -> Stat {
    let probe = 2048;
    let mut per_round = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        black_box(chase_many(starts, probe));
        per_round = per_round.min(t.elapsed().as_secs_f64() * 1e9 / probe as f64);
    }
    let rounds = (((ms * 1e6) / per_round.max(0.1)) as usize).clamp(1 << 10, 1 << 26);
    clean(reps, || {
        let t = Instant::now();
        black_box(chase_many(starts, rounds));
        t.elapsed().as_secs_f64() * 1e9 / (rounds * starts.len()) as f64
    })
    .0
}

/// Nanoseconds per `add` of a chain of dependent register-register `add`s, 32 per loop
/// iteration (1 cycle each on every x86-64 core; an immediate add would not do: Golden Cove's
/// renamer folds chains of them). `imul_chain` is its cross-check.
pub fn add_chain(iters: u64) -> f64 {
    let t = Instant::now();
    let mut x: u64 = 1;
    let mut n = iters;
    // SAFETY: register-only arithmetic.
    unsafe {
        asm!(
            "2:",
            "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
            "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
            "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
            "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
            "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
            "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
            "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
            "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            n = inout(reg) n,
            one = in(reg) 1u64,
            options(nomem, nostack),
        );
    }
    let add = t.elapsed().as_secs_f64() * 1e9 / (iters * 32) as f64;
    black_box((x, n));
    add
}

/// Nanoseconds per `imul` of a chain of dependent `imul`s (3 cycles each).
pub fn imul_chain(iters: u64) -> f64 {
    let t = Instant::now();
    let mut y: u64 = 3;
    let mut n = iters / 3;
    // SAFETY: register-only arithmetic.
    unsafe {
        asm!(
            "2:",
            "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}",
            "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}",
            "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}",
            "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}",
            "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}",
            "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}",
            "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}",
            "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}", "imul {y}, {y}",
            "dec {n}",
            "jnz 2b",
            y = inout(reg) y,
            n = inout(reg) n,
            options(nomem, nostack),
        );
    }
    let imul = t.elapsed().as_secs_f64() * 1e9 / ((iters / 3) * 32) as f64;
    black_box((y, n));
    imul
}

/// First touch of every 4KB page of `r` (one store each, in order, back to back as a program
/// faults memory in), each fault timed on its own: the time-stamp counter is read after every
/// store (a fault's exception entry and return serialise, so no fence is needed, and the
/// reads cost a few ns against ~1 us), converted to nanoseconds by the run's own wall time.
/// One sample per page, in nanoseconds.
pub fn first_touch_each(r: &Region) -> Vec<f64> {
    let pages = r.len / PAGE;
    let mut ts = vec![0u64; pages + 1];
    let t = Instant::now();
    // SAFETY: rdtsc has no preconditions on x86-64.
    ts[0] = unsafe { std::arch::x86_64::_rdtsc() };
    for (i, slot) in ts[1..].iter_mut().enumerate() {
        // SAFETY: within the region.
        unsafe { r.base.add(i * PAGE).write_volatile(1) };
        // SAFETY: as above.
        *slot = unsafe { std::arch::x86_64::_rdtsc() };
    }
    let ns = t.elapsed().as_secs_f64() * 1e9;
    let ticks = (ts[pages] - ts[0]).max(1) as f64;
    ts.windows(2)
        .map(|w| (w[1] - w[0]) as f64 * ns / ticks)
        .collect()
}

/// Zeroes `len` bytes at `p` with non-temporal 16-byte stores, then a fence.
pub fn zero_nt(p: *mut u8, len: usize) {
    // SAFETY: the caller's range; 16-byte aligned (pages).
    unsafe {
        let z: __m128i = _mm_setzero_si128();
        let mut q = p as *mut __m128i;
        let end = p.add(len) as *mut __m128i;
        while q < end {
            _mm_stream_si128(q, z);
            _mm_stream_si128(q.add(1), z);
            _mm_stream_si128(q.add(2), z);
            _mm_stream_si128(q.add(3), z);
            q = q.add(4);
        }
        _mm_sfence();
    }
}

/// Copies `len` bytes with ordinary loads and non-temporal 16-byte stores, then a fence.
pub fn copy_nt(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller's ranges; 16-byte aligned (pages).
    unsafe {
        let mut d = dst as *mut __m128i;
        let mut s = src as *const __m128i;
        let end = dst.add(len) as *mut __m128i;
        while d < end {
            let a = std::ptr::read(s);
            let b = std::ptr::read(s.add(1));
            let c = std::ptr::read(s.add(2));
            let e = std::ptr::read(s.add(3));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
            d = d.add(4);
            s = s.add(4);
        }
        _mm_sfence();
    }
}

/// Sums `len` bytes as u64s with four accumulators (a sequential read stream).
#[inline(never)]
pub fn read_sum(p: *const u8, len: usize) -> u64 {
    // SAFETY: the caller's range, 8-byte aligned.
    let s = unsafe { std::slice::from_raw_parts(p as *const u64, len / 8) };
    let (mut a, mut b, mut c, mut d) = (0u64, 0u64, 0u64, 0u64);
    for q in s.chunks_exact(4) {
        a = a.wrapping_add(q[0]);
        b = b.wrapping_add(q[1]);
        c = c.wrapping_add(q[2]);
        d = d.wrapping_add(q[3]);
    }
    a ^ b ^ c ^ d
}

/// "1 MiB", "1.5 MiB", "24 KiB".
pub fn mib(b: usize) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    } else {
        format!("{} KiB", b >> 10)
    }
}

/// Hops to run before timing a chase over `foot` bytes of `nodes` nodes: twice round the cycle
/// up to 64 MiB (every line cached where it can be), 65536 beyond (the TLB and caches are cold
/// there anyway, and a full lap would take seconds).
pub fn warm_hops(foot: usize, nodes: usize) -> usize {
    if foot <= 64 << 20 {
        nodes * 2
    } else {
        1 << 16
    }
}

#[cfg(test)]
mod tests {
    use super::{resolve_cycles, Bursts, Clock, Cyc, Interleaved, Stat};

    #[test]
    fn interleaved_ratio_pairs_rounds_and_skips_switched_ones() {
        // Round by round 10/10, 40/10, 30/10, and a switched round 100/10: the median of the
        // clean rounds' ratios is 3 (1, 3, 4), where counting the switched one would give 4,
        // and the ratio of the p10s 1.
        let mut il = Interleaved {
            all: vec![vec![10.0, 40.0, 30.0, 100.0], vec![10.0; 4]],
            switched: vec![vec![false, false, false, true], vec![false; 4]],
        };
        assert_eq!(il.ratio(0, 1), Some((3.0, 1.0, 4.0, 3)));
        assert_eq!(il.ratio(1, 0).map(|r| r.3), Some(3));
        // Fewer than 3 clean rounds: every round counts.
        il.switched[1] = vec![true, true, false, false];
        assert_eq!(il.ratio(0, 1), Some((4.0, 1.0, 10.0, 4)));
        // No rounds, or none with a positive denominator: none.
        assert_eq!(Interleaved::new(2).ratio(0, 1), None);
        let zero = Interleaved {
            all: vec![vec![1.0; 3], vec![0.0; 3]],
            switched: vec![vec![false; 3]; 2],
        };
        assert_eq!(zero.ratio(0, 1), None);
        // Rounds of two instant quantities: each run is marked as switched or not (at most a
        // preemption or two in ten rounds), and the clean ones are the runs not switched.
        let mut il = Interleaved::new(2);
        for r in 0..10 {
            il.round(|i| (r * 2 + i) as f64 + 1.0);
        }
        assert_eq!(il.switched[0].len(), 10);
        let unswitched = il.switched[0].iter().filter(|&&s| !s).count();
        assert!(
            unswitched >= 8,
            "{unswitched} of 10 instant runs not switched"
        );
        assert_eq!(il.stats()[0].n(), unswitched);
        // `stats` keeps the clean samples (the switched 100 left out), or every sample when
        // fewer than 3 are clean.
        let il = Interleaved {
            all: vec![vec![10.0, 40.0, 30.0, 100.0], vec![5.0, 6.0, 7.0, 8.0]],
            switched: vec![
                vec![false, false, false, true],
                vec![true, true, false, false],
            ],
        };
        let st = il.stats();
        assert_eq!(st[0].samples, vec![10.0, 30.0, 40.0]);
        assert_eq!(st[1].samples, vec![5.0, 6.0, 7.0, 8.0]);
    }

    #[test]
    fn moved_names_a_value_whose_samples_spread_beyond_ten_percent() {
        use super::moved;
        let show = |x: f64| format!("{x:.0}");
        // a2's LLC bursts (cycles, 2026-11-28 21:24): p10 145, p50 158 (the upper middle), p90
        // 166 by nearest rank of eight: (166 - 145) / 158 = 13.3%.
        let llc = [166.0, 166.0, 158.0, 143.0, 145.0, 146.0, 158.0, 151.0];
        assert_eq!(
            moved("LLC latency", &llc, show).as_deref(),
            Some("LLC latency 143 to 166 (13.3%)")
        );
        // a1's (121-131): 3.2%, not moved; a spread of exactly 10% is not beyond it.
        let a1 = [126.6, 131.2, 121.4, 127.7, 127.4, 125.9, 123.7, 123.9];
        assert_eq!(moved("LLC latency", &a1, show), None);
        assert_eq!(moved("x", &[90.0, 100.0, 100.0], show), None);
        assert!(moved("x", &[89.0, 100.0, 100.0], show).is_some());
        // Too few samples, or non-finite ones (a pass that never crossed) left out.
        assert_eq!(moved("x", &[1.0, 2.0], show), None);
        assert_eq!(moved("x", &[1.0, f64::NAN, 2.0], show), None);
    }

    fn burst(v: &[f64]) -> Stat {
        Stat::new(v.to_vec())
    }

    #[test]
    fn bursts_give_the_median_of_their_low_percentiles() {
        let mut b = Bursts::default();
        assert!(b.low().is_nan(), "no burst, no value");
        // Five bursts of five runs: the p10 of five is the fastest run of each.
        b.push(burst(&[10.0, 11.0, 12.0, 13.0, 30.0]));
        b.push(burst(&[20.0, 21.0, 22.0, 23.0, 24.0])); // a slow phase
        b.push(burst(&[11.0, 12.0, 12.0, 14.0, 15.0]));
        b.push(burst(&[5.0, 6.0, 7.0, 8.0, 9.0])); // a fast phase
        b.push(burst(&[12.0, 12.0, 13.0, 13.0, 13.0]));
        b.push(Stat::new(Vec::new())); // left out
        assert_eq!(b.n(), 5);
        assert_eq!(b.lows(), vec![5.0, 10.0, 11.0, 12.0, 20.0]);
        // Neither the fast burst nor the slow one moves it; a p10 over all runs would be the
        // fast burst's.
        assert_eq!(b.low(), 11.0);
        let all = Stat::new(b.bursts.iter().flat_map(|s| s.samples.clone()).collect());
        assert!(all.low() < 10.0);
        // The spread is the bursts' p10s' (p90 - p10) / p50, nearest rank of five: (20 - 5) / 11.
        assert!(
            (b.spread() - 100.0 * 15.0 / 11.0).abs() < 1e-9,
            "{}",
            b.spread()
        );
        let how = b.how(|x| format!("{x:.0}"));
        assert!(
            how.starts_with("the median of 5 bursts' p10s spread over the calibration (10, 20, 11, 5, 12, in time order;"),
            "{how}"
        );
        assert!(how.contains("25 runs"), "{how}");
        // Pooled, the p10 (nearest rank 2 of 25) is one of the fast burst's runs.
        assert_eq!(b.pooled().n(), 25);
        assert_eq!(b.pooled().low(), 7.0);
    }

    #[test]
    fn the_clock_is_the_median_of_the_bursts_medians() {
        let mut c = Clock::new(5, 1000);
        assert!(c.ghz().is_nan(), "no burst, no clock");
        // Three bursts at 4, 3.2 and 4 GHz (ns per add), one slow run in the first: a burst's
        // value is its median, and the clock the median burst's, not one burst's or the pool's
        // fastest run.
        c.push(burst(&[0.25, 0.25, 0.25, 0.25, 0.5]));
        c.push(burst(&[0.3125; 5]));
        c.push(burst(&[0.25; 5]));
        c.push(Stat::new(Vec::new()));
        assert_eq!(c.bursts.len(), 3, "an empty burst is left out");
        assert_eq!(c.medians(), vec![0.25, 0.3125, 0.25]);
        assert_eq!(c.ns_per_cycle(), 0.25);
        assert_eq!(c.ghz(), 4.0);
        // With an even count, the upper middle: the slower clock.
        c.push(burst(&[0.3125; 5]));
        assert_eq!(c.ghz(), 3.2);
        let how = c.how();
        assert!(how.contains("4 bursts' medians"), "{how}");
        assert!(
            how.contains("4.000, 3.200, 4.000, 3.200 GHz in time order"),
            "{how}"
        );
        assert!(
            how.contains("fastest run 4.000 GHz, slowest 2.000"),
            "{how}"
        );
    }

    #[test]
    fn cycle_markers_become_cycles_at_the_clock_given() {
        let text = format!("a {:.1} b {} c {:.0} d", Cyc(10.0), Cyc(2.5), Cyc(-1.25));
        assert!(!text.contains("25.0"));
        assert_eq!(resolve_cycles(&text, 2.0).unwrap(), "a 20.0 b 5 c -2 d");
        assert_eq!(resolve_cycles(&text, 3.0).unwrap(), "a 30.0 b 8 c -4 d");
        assert_eq!(resolve_cycles("no marker", 3.0).unwrap(), "no marker");
        // A marker cut or garbled is an error, never a panic or a marker left in the file.
        let cut = &text[..text.find(':').unwrap()];
        assert!(resolve_cycles(cut, 2.0).is_err());
        assert!(resolve_cycles("x \u{E000}abc:1\u{E001}", 2.0).is_err());
        assert!(resolve_cycles("x \u{E001}", 2.0).is_err());
    }
}
