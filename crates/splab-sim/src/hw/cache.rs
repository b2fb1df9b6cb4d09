//! Data caches: L1D, L2 and LLC of one CPU, shared by data lines and page-table lines (a page
//! walker's loads go through the same caches as the program's: Intel's PAGE_WALKER_LOADS.DTLB_L1
//! / L2 / L3 / MEMORY events count walker loads served at each level). Knows nothing of the VM:
//! it is handed physical line numbers.
//!
//! Each level is set-associative, non-inclusive, filled on miss (a line that misses everywhere
//! is filled into every level; a hit at level k fills the levels above k). No back-invalidation.
//!
//! Replacement is per level (`Replacement`): tree pseudo-LRU, what Intel's L1D and L2 implement
//! (Abel & Reineke, "nanoBench", 2020, measured tree-PLRU on Skylake's L1 and L2; for two ways
//! it is exact LRU), or NRU, the closest simple policy to the adaptive quad-age policy of
//! Skylake's LLC that nanoBench found (docs/constants.md 6). A PLRU level whose ways are not a
//! power of two (the 12-way L1D of Intel's cores since Sunny Cove) is groups of tree-PLRU ways
//! under an exact LRU order of the groups (`plru_tables`); NRU serves the few counts whose state
//! would not fit 32 bits.
//!
//! A level may have a line lifetime (`Caches::set_lifetime`, the machine file's
//! `caches.levels[i].lifetime_ns`): a line whose last touch there (fill or hit) is older than the
//! lifetime counts as a miss and is refilled (counted in `CacheStats::expired`). It models a
//! shared host whose other tenants evict lines at a rate, whatever the program touched in
//! between: this project measured it on an AMD EPYC KVM guest (`scripts/cache-decay.c`, the same
//! lines chased in the same order with a spin between hops; docs/validation.md, "The 8-chase and
//! LLC rows: this host's caches forget with time"), where a line untouched for ~1.4 ms is still
//! an L3 hit and one untouched for 10 ms comes from DRAM. `splab calibrate` measures it. Without
//! a lifetime a level has no stamps and its access path is unchanged.
//!
//! The neighbours' evictions are gradual, not a threshold: the measured share of lines gone
//! rises over milliseconds (docs/calibrate.md, "The LLC: a lifetime, and cpuid's capacity").
//! A level may instead have that curve (`Caches::set_lifetime_curve`, the machine file's
//! `caches.levels[i].lifetime_curve_ns`): a hit on a line of age a is a miss with probability
//! F(a), the curve read linearly between its points, decided by a hash of the line and its
//! stamp (deterministic: the same run gives the same counts, and no global generator).
//!
//! Layout, for speed: a set's tags are 32-bit and contiguous (a 16-way set is one host line),
//! the PLRU/NRU state is one u32 per set in a separate vector. A tag is `(line >> set_bits) + 1`
//! (0 = invalid), which fits 32 bits for up to 2^37 lines (8TB) with 32+ sets.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One cache level.
#[derive(Clone, Debug, Serialize)]
pub struct CacheLevelConfig {
    pub name: String,
    pub size_bytes: u64,
    pub ways: u32,
    /// Load-to-use latency of a hit at this level, in core cycles.
    pub latency: u64,
    pub replacement: Replacement,
}

/// Replacement policy of a cache level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Replacement {
    /// Tree pseudo-LRU (power-of-two ways; exact LRU for 2 ways).
    Plru,
    /// Not-recently-used: one reference bit per way, cleared when all are set.
    Nru,
    /// Round robin: fills go to the ways in turn, hits change nothing (the 21264 Dcache).
    RoundRobin,
}

/// The data-cache hierarchy and memory behind it.
#[derive(Clone, Debug, Serialize)]
pub struct CachesConfig {
    /// Nearest first (L1D, L2, LLC); at most 3 levels.
    pub levels: Vec<CacheLevelConfig>,
    /// Load-to-use latency of a line from DRAM, in core cycles.
    pub dram_latency: u64,
}

pub const LINE_SHIFT: u32 = 6;

/// Where a reference was served: `0..levels` a cache level, `levels` = DRAM.
pub type Served = u8;

/// A level's replacement as its access path sees it (`Replacement` resolved against the ways).
const PLRU: u8 = 0;
const NRU: u8 = 1;
const ROUND_ROBIN: u8 = 2;

/// `Level::access` specialised for one associativity and replacement policy, chosen once.
type AccessFn = fn(&mut Level, u64) -> bool;

/// Sixteen tags on one 64-byte host line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct HostLine([u32; 16]);

#[derive(Clone, Debug)]
struct Level {
    set_mask: u64,
    set_bits: u32,
    sets: u64,
    ways: usize,
    /// Tags, `ways` per set (`tags`), in host-line-aligned blocks of 16: a set of up to 16
    /// ways (a power of two) is within one host line, in every clone too, and its address is
    /// the vector's plus the set's offset (with a separate offset to the first aligned tag, it
    /// took two more host instructions per level).
    tags: Vec<HostLine>,
    /// PLRU tree bits, NRU reference bits or the round-robin pointer, per set.
    repl: Vec<u32>,
    /// `PLRU` (power-of-two ways only), `NRU` or `ROUND_ROBIN`.
    policy: u8,
    access_fn: AccessFn,
    /// Tree PLRU: touching way w sets `repl = (repl & and[w]) | or[w]` (the bits on w's path
    /// pointed away from it), precomputed.
    plru_and: [u32; 32],
    plru_or: [u32; 32],
    /// Tree PLRU with at most 8 ways: for every tree state, its victim (low byte) and the
    /// state once the victim is filled (high byte), precomputed: a fill is one lookup.
    plru_fill: [u16; 128],
    latency: u64,
    hits: u64,
    misses: u64,
    /// Valid lines. Lines are never invalidated, so once every way of every set is valid
    /// (`valid == sets * ways`, then `full`) a miss need not look for an invalid way.
    valid: u64,
    full: bool,
    /// Line lifetime in the clock's ticks (`set_lifetime`); `u64::MAX`: lines never expire.
    lifetime: u64,
    /// With a lifetime: the clock at each line's last fill or hit, `ways` per set (as `tags`).
    /// Empty without one.
    stamps: Vec<u64>,
    /// With a lifetime: the core's clock, in ticks (`Core::set_clock` publishes it).
    clock: Option<Arc<AtomicU64>>,
    /// The untimed access function (`access_fn` of the ways and policy), which
    /// `access_timed` wraps.
    inner: AccessFn,
    /// Hits on lines older than the lifetime, counted as misses (and among `misses`).
    expired: u64,
    /// With a lifetime curve (`set_lifetime_curve`): its points in ticks, from a point (0, 0)
    /// on; empty without one (then `lifetime` decides).
    curve: Box<[CurvePoint]>,
    /// L2 (level 1) with the spatial prefetcher's pair fill (`Caches::set_pair_fill`): the
    /// hierarchy function is then `hier_pair`.
    pair: bool,
    /// The share of pair lines filled as most recently used (`Caches::set_pair_recent`).
    pair_recent: f64,
    /// Pair fills so far (each draws its own `unit_hash`).
    pair_fills: u64,
}

/// A point of a level's lifetime curve: from `age` (ticks) to the next point's, a line is gone
/// with probability `f + slope * (age' - age)`; the last point's slope is 0.
#[derive(Clone, Copy, Debug, PartialEq)]
struct CurvePoint {
    age: u64,
    f: f64,
    slope: f64,
}

/// The share of lines of age `age` (ticks) gone, F(age), on a curve from `set_lifetime_curve`
/// (its first point is at age 0): linear between points, the last point's value after it.
#[inline]
fn decayed(curve: &[CurvePoint], age: u64) -> f64 {
    let i = curve.partition_point(|p| p.age <= age);
    let p = &curve[i.max(1) - 1];
    p.f + p.slope * age.saturating_sub(p.age) as f64
}

/// A number in [0, 1) from a line and its stamp (splitmix64's finaliser over both): the draw
/// `access_timed` compares with F(age). The same line touched again gets a new stamp, so a
/// new draw; lines stamped at the same time get independent ones.
#[inline]
fn unit_hash(line: u64, stamp: u64) -> f64 {
    let mut x =
        line.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ stamp.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

impl Level {
    fn new(cfg: &CacheLevelConfig) -> Level {
        let ways = cfg.ways.clamp(1, 32) as usize;
        let lines = (cfg.size_bytes >> LINE_SHIFT).max(1);
        let sets = (lines / ways as u64).max(1);
        assert!(
            sets.is_power_of_two(),
            "cache {}: {} sets is not a power of two",
            cfg.name,
            sets
        );
        let n = sets as usize * ways;
        let tags = vec![HostLine([0; 16]); n.div_ceil(16)];
        let (and, or) = plru_tables(ways);
        let (mut plru_and, mut plru_or) = ([u32::MAX; 32], [0u32; 32]);
        plru_and[..ways].copy_from_slice(&and);
        plru_or[..ways].copy_from_slice(&or);
        let mut plru_fill = [0u16; 128];
        if ways <= 8 && plru_bits(ways) <= 7 {
            for (r, e) in plru_fill.iter_mut().enumerate() {
                let r = r as u32 & ((1 << plru_bits(ways)) - 1);
                let v = plru_walk(ways, r);
                let next = (r & plru_and[v]) | plru_or[v];
                *e = v as u16 | (next as u16) << 8;
            }
        }
        let policy = match cfg.replacement {
            // Any count of ways whose state fits (`plru_tables`; until 2026-11-28 powers of two
            // only, the rest NRU). Up to 8 ways the victim comes from `plru_fill`: 7 bits.
            Replacement::Plru if plru_bits(ways) <= if ways <= 8 { 7 } else { 32 } => PLRU,
            Replacement::Plru | Replacement::Nru => NRU,
            Replacement::RoundRobin => ROUND_ROBIN,
        };
        Level {
            plru_and,
            plru_or,
            plru_fill,
            set_mask: sets - 1,
            set_bits: sets.trailing_zeros(),
            sets,
            ways,
            tags,
            repl: vec![0; sets as usize],
            policy,
            access_fn: access_fn(ways, policy),
            inner: access_fn(ways, policy),
            latency: cfg.latency,
            hits: 0,
            misses: 0,
            valid: 0,
            full: false,
            lifetime: u64::MAX,
            stamps: Vec::new(),
            clock: None,
            expired: 0,
            curve: Box::new([]),
            pair: false,
            pair_recent: 0.0,
            pair_fills: 0,
        }
    }

    #[inline]
    fn locate(&self, line: u64) -> (usize, u32) {
        let set = (line & self.set_mask) as usize;
        let tag = ((line >> self.set_bits) as u32).wrapping_add(1);
        (set, tag)
    }

    #[inline]
    fn set(&self, set: usize) -> &[u32] {
        let b = set * self.ways;
        &self.tags()[b..b + self.ways]
    }

    /// The tags, `ways` per set, `16 * tags.len()` of them (at least `sets * ways`).
    #[inline(always)]
    fn tags(&self) -> &[u32] {
        // SAFETY: `HostLine` is `repr(C)` around `[u32; 16]` (no padding), so the vector's
        // lines are `16 * len` contiguous, initialised and aligned `u32`s, borrowed with it.
        unsafe {
            std::slice::from_raw_parts(self.tags.as_ptr() as *const u32, 16 * self.tags.len())
        }
    }

    /// Looks `line` up and, if absent, fills it (an invalid way, else the victim). Either way
    /// it becomes most recently used (round robin: hits change nothing). Returns whether it hit.
    #[inline(always)]
    fn access(&mut self, line: u64) -> bool {
        (self.access_fn)(self, line)
    }

    /// `access` for `W` ways (0: any number, read from `ways`) and replacement `P`.
    #[inline(always)]
    fn access_w<const W: usize, const P: u8>(&mut self, line: u64) -> bool {
        let ways = if W == 0 { self.ways } else { W };
        let (set, tag) = self.locate(line);
        let b = set * ways;
        debug_assert!(set < self.repl.len() && b + ways <= self.sets as usize * ways);
        // SAFETY: `set <= set_mask = sets - 1`, so `b + ways <= sets * ways`, at most the length
        // of `flat_mut(tags)`, and `set < sets`, the length of `repl` (below). Measured: the bounds
        // checks were a sixth of a level access (callgrind, skylake GUPS).
        let s = unsafe { flat_mut(&mut self.tags).get_unchecked_mut(b..b + ways) };
        let hits = if W == 0 {
            masks_any(s, tag)
        } else {
            masks::<W>(s, tag)
        };
        // SAFETY: `set < sets`, the length of `repl` (above).
        let r = unsafe { self.repl.get_unchecked_mut(set) };
        if hits != 0 {
            if P != ROUND_ROBIN {
                let w = hits.trailing_zeros() as usize;
                *r = touch::<W, P>(*r, w, ways, &self.plru_and, &self.plru_or);
            }
            return true;
        }
        let w = if P == ROUND_ROBIN {
            let w = *r as usize;
            *r = if w + 1 == ways { 0 } else { w as u32 + 1 };
            w
        } else {
            // Once the level is full no set has an invalid way (lines are never invalidated).
            let empties = if self.full {
                0
            } else if W == 0 {
                masks_any(s, 0)
            } else {
                masks::<W>(s, 0)
            };
            if empties != 0 {
                self.valid += 1;
                self.full = self.valid == self.sets * ways as u64;
                let w = empties.trailing_zeros() as usize;
                *r = touch::<W, P>(*r, w, ways, &self.plru_and, &self.plru_or);
                w
            } else if P == PLRU && ways <= 8 {
                // The victim and the state after its fill, from one table (`plru_fill`).
                let e = self.plru_fill[*r as usize & 127];
                *r = (e >> 8) as u32;
                (e & 0xff) as usize
            } else {
                let w = if P == PLRU {
                    plru_walk(ways, *r)
                } else {
                    // NRU: the first way whose reference bit is clear.
                    (!*r).trailing_zeros() as usize
                };
                *r = touch::<W, P>(*r, w, ways, &self.plru_and, &self.plru_or);
                w
            }
        };
        // Every victim is a way of the set (below `ways`): for a power-of-two `W` the mask
        // says so to the compiler, which then checks no bound.
        if W.is_power_of_two() {
            s[w & (W - 1)] = tag;
        } else {
            s[w] = tag;
        }
        false
    }

    /// `access` of a level with a lifetime (its `access_fn` then): the untimed lookup and fill,
    /// then the line's stamp. A hit on a line untouched for longer than the lifetime is a miss
    /// (the line was evicted by other tenants and is refilled, in the way it held, as most
    /// recently used: the replacement state is the hit's; for round robin a refill in place
    /// moves no pointer). With a lifetime curve instead, a hit on a line of age a is a miss
    /// when `unit_hash(line, its stamp) < F(a)`: the share F(a) of the lines of that age the
    /// neighbours evicted (scripts/cache-decay.c's measurement, done by `splab calibrate`).
    fn access_timed(&mut self, line: u64) -> bool {
        let now = self.clock.as_ref().map_or(0, |c| c.load(Ordering::Relaxed));
        let hit = (self.inner)(self, line);
        let (set, tag) = self.locate(line);
        let w = self
            .set(set)
            .iter()
            .position(|&t| t == tag)
            .expect("a line just accessed is in its set");
        let stamp = &mut self.stamps[set * self.ways + w];
        let (then, age) = (*stamp, now.saturating_sub(*stamp));
        *stamp = now;
        let gone = if self.curve.is_empty() {
            age > self.lifetime
        } else {
            hit && unit_hash(line, then) < decayed(&self.curve, age)
        };
        if hit && gone {
            self.expired += 1;
            return false;
        }
        hit
    }

    /// Puts `line` in its set, if absent, where the next miss there would go, leaving the
    /// replacement state as it was (an invalid way, else the victim: PLRU's or NRU's; round
    /// robin: nothing), so that the set's next fill evicts it unless a hit comes first and
    /// makes it recent. Counted as neither hit nor miss.
    fn contains(&self, line: u64) -> bool {
        let (set, tag) = self.locate(line);
        self.set(set).contains(&tag)
    }

    fn fill_victim(&mut self, line: u64) {
        let (set, tag) = self.locate(line);
        let ways = self.ways;
        let b = set * ways;
        let r = self.repl[set];
        let s = &mut flat_mut(&mut self.tags)[b..b + ways];
        if s.contains(&tag) {
            return;
        }
        let w = match s.iter().position(|&t| t == 0) {
            Some(w) => {
                self.valid += 1;
                self.full = self.valid == self.sets * ways as u64;
                w
            }
            None if self.policy == PLRU => plru_walk(ways, r),
            None if self.policy == NRU => ((!r).trailing_zeros() as usize).min(ways - 1),
            None => return,
        };
        s[w] = tag;
        if let Some(c) = &self.clock {
            self.stamps[b + w] = c.load(Ordering::Relaxed);
        }
    }

    #[inline(always)]
    fn prefetch(&self, line: u64) {
        self.prefetch_pair(line, line);
    }

    /// `prefetch` of two lines, the level's fields read once for both.
    #[inline(always)]
    fn prefetch_pair(&self, a: u64, b: u64) {
        let (mask, ways) = (self.set_mask, self.ways);
        let (tags, repl) = (self.tags.as_ptr() as *const u32, self.repl.as_ptr());
        for line in [a, b] {
            let set = (line & mask) as usize;
            super::prefetch_ptr(tags.wrapping_add(set * ways));
            super::prefetch_ptr(repl.wrapping_add(set));
        }
    }
}

/// `Level::tags`, mutable (a function of the vector alone, so that the level's other fields
/// stay free to borrow).
#[inline(always)]
fn flat_mut(v: &mut [HostLine]) -> &mut [u32] {
    // SAFETY: as in `Level::tags`, borrowed mutably with the vector.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u32, 16 * v.len()) }
}

/// The access function of a level of `ways` ways under `policy`.
fn access_fn(ways: usize, policy: u8) -> AccessFn {
    macro_rules! pick {
        ($($w:literal)*) => {
            match (ways, policy) {
                $(
                    ($w, PLRU) => Level::access_w::<$w, PLRU>,
                    ($w, NRU) => Level::access_w::<$w, NRU>,
                    ($w, _) => Level::access_w::<$w, ROUND_ROBIN>,
                )*
                (_, PLRU) => Level::access_w::<0, PLRU>,
                (_, NRU) => Level::access_w::<0, NRU>,
                (_, _) => Level::access_w::<0, ROUND_ROBIN>,
            }
        };
    }
    pick!(1 2 4 8 12 16)
}

/// `Caches::access` specialised for the levels' associativities and policies, chosen once: the
/// whole hierarchy is one call with each level's lookup inlined (a call per level cost a fifth
/// of a level access).
type HierFn = fn(&mut [Level], u64) -> Served;

/// One level of a specialised hierarchy: `access_w` and the level's counters.
#[inline(always)]
fn level_hit<const W: usize, const P: u8>(l: &mut Level, line: u64) -> bool {
    let hit = l.access_w::<W, P>(line);
    if hit {
        l.hits += 1;
    } else {
        l.misses += 1;
    }
    hit
}

fn hier1<const W0: usize, const P0: u8>(levels: &mut [Level], line: u64) -> Served {
    let [a] = levels else {
        unreachable!("hier1: one level")
    };
    if level_hit::<W0, P0>(a, line) {
        return 0;
    }
    1
}

fn hier2<const W0: usize, const P0: u8, const W1: usize, const P1: u8>(
    levels: &mut [Level],
    line: u64,
) -> Served {
    let [a, b] = levels else {
        unreachable!("hier2: two levels")
    };
    if level_hit::<W0, P0>(a, line) {
        return 0;
    }
    if level_hit::<W1, P1>(b, line) {
        return 1;
    }
    2
}

fn hier3<
    const W0: usize,
    const P0: u8,
    const W1: usize,
    const P1: u8,
    const W2: usize,
    const P2: u8,
>(
    levels: &mut [Level],
    line: u64,
) -> Served {
    let [a, b, c] = levels else {
        unreachable!("hier3: three levels")
    };
    if level_hit::<W0, P0>(a, line) {
        return 0;
    }
    if level_hit::<W1, P1>(b, line) {
        return 1;
    }
    if level_hit::<W2, P2>(c, line) {
        return 2;
    }
    3
}

/// Any hierarchy: a call per level through its `access_fn`.
/// `hier_any`, and then L2's pair fill for a reference served beyond L2 (`Caches::set_pair_fill`):
/// the other line of its 128-byte pair comes into L2 as its set's next victim
/// (`Level::fill_victim`), or, for the share `pair_recent` of the fills (a hash of the line and
/// the fill's count), as its most recent line. Counted as neither hit nor miss.
fn hier_pair(levels: &mut [Level], line: u64) -> Served {
    let s = hier_any(levels, line);
    if s >= 2 {
        let pair = line ^ 1;
        let l = &mut levels[1];
        l.pair_fills += 1;
        if l.pair_recent > 0.0 && unit_hash(pair, l.pair_fills) < l.pair_recent {
            if !l.contains(pair) {
                l.access(pair);
            }
        } else {
            l.fill_victim(pair);
        }
    }
    s
}

fn hier_any(levels: &mut [Level], line: u64) -> Served {
    // Each level is independent: looking up and filling on a miss in one pass is the same
    // as filling the levels above after the hit is found.
    for (k, l) in levels.iter_mut().enumerate() {
        if l.access(line) {
            l.hits += 1;
            return k as Served;
        }
        l.misses += 1;
    }
    levels.len() as Served
}

/// The hierarchy function of `levels`: specialised for the presets' shapes, else `hier_any`
/// (and always with a lifetime: `hier_any` calls each level's `access_fn`).
fn hier_fn(levels: &[Level]) -> HierFn {
    if levels.get(1).is_some_and(|l| l.pair) {
        return hier_pair;
    }
    if levels.iter().any(|l| !l.stamps.is_empty()) {
        return hier_any;
    }
    let shape: Vec<(usize, u8)> = levels.iter().map(|l| (l.ways, l.policy)).collect();
    match shape.as_slice() {
        // skylake
        [(8, PLRU), (4, PLRU), (16, NRU)] => hier3::<8, PLRU, 4, PLRU, 16, NRU>,
        // core2
        [(8, PLRU), (16, PLRU)] => hier2::<8, PLRU, 16, PLRU>,
        // alpha21264
        [(2, ROUND_ROBIN), (1, PLRU)] => hier2::<2, ROUND_ROBIN, 1, PLRU>,
        // pa8000
        [(1, PLRU)] => hier1::<1, PLRU>,
        _ => hier_any,
    }
}

/// The replacement state `r` after way `w` of a `ways`-way set (`W` if known) was used.
#[inline(always)]
fn touch<const W: usize, const P: u8>(
    r: u32,
    w: usize,
    ways: usize,
    and: &[u32; 32],
    or: &[u32; 32],
) -> u32 {
    if P == PLRU {
        (r & and[w & 31]) | or[w & 31]
    } else {
        let all = if ways >= 32 {
            u32::MAX
        } else {
            (1u32 << ways) - 1
        };
        let r = r | 1 << (w & 31);
        if r & all == all {
            1 << (w & 31)
        } else {
            r
        }
    }
}

/// The groups of a PLRU level: `ways = groups * per`, `per` the largest power of two dividing
/// `ways` (one group when `ways` is a power of two).
fn plru_groups(ways: usize) -> (usize, usize) {
    let per = 1 << ways.trailing_zeros();
    (ways / per, per)
}

/// Bits of a PLRU level's state: each group's tree (`per - 1` nodes) and, with several groups,
/// one order bit per pair of groups.
fn plru_bits(ways: usize) -> usize {
    let (g, per) = plru_groups(ways);
    g * (per - 1) + g * (g - 1) / 2
}

/// The order bit of groups `i < j` (set: `i` was used after `j`), above the groups' trees.
fn pair_bit(g: usize, per: usize, i: usize, j: usize) -> usize {
    debug_assert!(i < j && j < g);
    // Pairs (0,1), (0,2), .., (0,g-1), (1,2), ..: those before row i, then j's place in it.
    g * (per - 1) + i * (2 * g - i - 1) / 2 + (j - i - 1)
}

/// For PLRU over `ways` ways: per way, the masks that point every node on its path away from
/// it (`touch`: `r = (r & and[w]) | or[w]`). Node i of a tree has children 2i+1 and 2i+2; bit =
/// 1 means "the victim is on the right".
///
/// A power of two of ways is one tree (nanoBench's tree PLRU). Other counts are `groups` trees
/// of `per` ways (a power of two) under an exact LRU order of the groups, kept as one bit per
/// pair of groups, which a touch sets or clears like a tree's nodes: 12 ways are three 4-way
/// trees and 3 order bits. Until 2026-11-28 such a level fell back to NRU, which keeps a cyclic
/// chase's lines where LRU and tree PLRU evict them all: on the Intel guest the model's 12-way
/// L1D served 0.63 of a 768-line per-page chase's hops and 0.30 of a 1024-line one, where the
/// machine served 0.47 and 0.15 (LRU: 0.46 and 0.13; docs/validation.md, "The half-STLB row:
/// the 12-way L1D's replacement"); now 0.51 and 0.19. How a 12-way L1D splits its ways is not published: the
/// groups are an assumption; what was measured is the LRU-like eviction of a cycle.
fn plru_tables(ways: usize) -> (Vec<u32>, Vec<u32>) {
    let (g, per) = plru_groups(ways);
    let levels = per.trailing_zeros();
    let mut and = vec![u32::MAX; ways];
    let mut or = vec![0u32; ways];
    if plru_bits(ways) > 32 {
        return (and, or);
    }
    for w in 0..ways {
        let (grp, v) = (w / per, w % per);
        let base = grp * (per - 1);
        let mut node = 0usize;
        for l in (0..levels).rev() {
            let right = (v >> l) & 1 == 1;
            if right {
                and[w] &= !(1 << (base + node));
            } else {
                or[w] |= 1 << (base + node);
            }
            node = 2 * node + 1 + right as usize;
        }
        for other in 0..g {
            if other < grp {
                and[w] &= !(1 << pair_bit(g, per, other, grp));
            } else if other > grp {
                or[w] |= 1 << pair_bit(g, per, grp, other);
            }
        }
    }
    (and, or)
}

/// The PLRU victim of state `r` over `ways` ways: the least recently used group (the one every
/// other group was used after), then its tree's bits from the root.
fn plru_walk(ways: usize, r: u32) -> usize {
    let (g, per) = plru_groups(ways);
    let grp = (0..g)
        .find(|&k| {
            (0..g).all(|j| {
                j == k
                    || if j > k {
                        r >> pair_bit(g, per, k, j) & 1 == 0
                    } else {
                        r >> pair_bit(g, per, j, k) & 1 == 1
                    }
            })
        })
        .unwrap_or(0);
    let base = grp * (per - 1);
    let mut node = 0usize;
    let mut w = 0usize;
    for _ in 0..per.trailing_zeros() {
        let right = (r >> (base + node)) & 1 == 1;
        w = (w << 1) | right as usize;
        node = 2 * node + 1 + right as usize;
    }
    grp * per + w
}

/// Bit mask of the ways of a `W`-way set holding `tag` (0: the invalid ways).
#[inline(always)]
fn masks<const W: usize>(s: &[u32], tag: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if W == 4 {
        return masks_sse2_4(s, tag);
    }
    #[cfg(target_arch = "x86_64")]
    if W.is_multiple_of(4) {
        return masks_sse2::<W>(s, tag);
    }
    let s: &[u32; W] = s.try_into().expect("cache set of W ways");
    let mut hit = 0u32;
    for (i, &t) in s.iter().enumerate() {
        hit |= ((t == tag) as u32) << i;
    }
    hit
}

/// `masks` with SSE2 (part of x86-64's baseline): one compare per four ways, the compare
/// results narrowed to one byte per way and gathered by one move-mask per sixteen ways.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks_sse2<const W: usize>(s: &[u32], tag: u32) -> u32 {
    use std::arch::x86_64::*;
    let s: &[u32; W] = s.try_into().expect("cache set of W ways");
    // SAFETY: SSE2 is always available on x86_64; each load reads 4 u32 inside `s` (W is a
    // multiple of 4 and each load starts at 4i < W), unaligned loads are allowed.
    unsafe {
        let t = _mm_set1_epi32(tag as i32);
        let p = s.as_ptr() as *const __m128i;
        let q = |i: usize| {
            if 4 * i < W {
                _mm_cmpeq_epi32(_mm_loadu_si128(p.add(i)), t)
            } else {
                _mm_setzero_si128()
            }
        };
        let mut m = 0u32;
        for j in 0..W.div_ceil(16) {
            let lo = _mm_packs_epi32(q(4 * j), q(4 * j + 1));
            let hi = if 4 * j + 2 < W.div_ceil(4) {
                _mm_packs_epi32(q(4 * j + 2), q(4 * j + 3))
            } else {
                _mm_setzero_si128()
            };
            m |= (_mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u32) << (16 * j);
        }
        m
    }
}

/// `masks` of a 4-way set: one compare and the move-mask of its four 32-bit lanes (without
/// the narrowing `masks_sse2` needs for more ways: three host instructions a lookup).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks_sse2_4(s: &[u32], tag: u32) -> u32 {
    use std::arch::x86_64::*;
    let s: &[u32; 4] = s.try_into().expect("cache set of 4 ways");
    // SAFETY: SSE2 is always available on x86_64; the unaligned load reads the 4 u32 of `s`.
    unsafe {
        let c = _mm_cmpeq_epi32(
            _mm_loadu_si128(s.as_ptr() as *const __m128i),
            _mm_set1_epi32(tag as i32),
        );
        _mm_movemask_ps(_mm_castsi128_ps(c)) as u32
    }
}

#[inline]
fn masks_any(s: &[u32], tag: u32) -> u32 {
    let mut hit = 0u32;
    for (i, &t) in s.iter().enumerate() {
        hit |= ((t == tag) as u32) << i;
    }
    hit
}

/// Hit and miss counts of one cache level, for the report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CacheStats {
    pub name: String,
    pub hits: u64,
    pub misses: u64,
    /// Of `misses`, the lookups that found the line older than the level's lifetime (evicted
    /// by other tenants, `Caches::set_lifetime`). Absent from the report when zero (always,
    /// on a level without a lifetime).
    #[serde(skip_serializing_if = "is_zero")]
    pub expired: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// The data-cache hierarchy of one CPU.
#[derive(Clone, Debug)]
pub struct Caches {
    levels: Vec<Level>,
    names: Vec<String>,
    /// Latency of a reference served at each place (levels, then DRAM).
    latency: [u64; 4],
    /// The place (0..=3: L1, L2, LLC, DRAM) of each `Served` value (`place`).
    place: [u8; 4],
    /// `latency` as 16-bit values, if every one fits (`latencies16`).
    latency16: Option<[u16; 4]>,
    /// The levels `prefetch` hints: those whose state is too large to stay in the host's L1
    /// data cache. The sets of the others are hot anyway.
    prefetched: Vec<usize>,
    hier: HierFn,
}

/// `Caches::prefetch` skips levels whose tags and replacement state take at most this many host
/// bytes.
const PREFETCH_ABOVE: usize = 64 << 10;

impl Caches {
    pub fn new(cfg: &CachesConfig) -> Caches {
        assert!(cfg.levels.len() <= 3, "at most three cache levels");
        let levels: Vec<Level> = cfg.levels.iter().map(Level::new).collect();
        let mut latency = [cfg.dram_latency; 4];
        for (i, l) in levels.iter().enumerate() {
            latency[i] = l.latency;
        }
        let prefetched = (0..levels.len())
            .filter(|&i| 4 * (16 * levels[i].tags.len() + levels[i].repl.len()) > PREFETCH_ABOVE)
            .collect();
        let place = std::array::from_fn(|s| if s >= levels.len() { 3 } else { s as u8 });
        let latency16 = latency
            .iter()
            .all(|&l| l <= u16::MAX as u64)
            .then(|| latency.map(|l| l as u16));
        Caches {
            latency16,
            place,
            prefetched,
            hier: hier_fn(&levels),
            names: cfg.levels.iter().map(|l| l.name.clone()).collect(),
            levels,
            latency,
        }
    }

    /// The share `f` (0 to 1) of the pair fills (`set_pair_fill`) that land as their set's most
    /// recently used line, as a demand fill does, the rest as its next victim (a bimodal
    /// insertion: Qureshi et al., "Adaptive insertion policies for high performance caching",
    /// ISCA 2007). Which fills: a hash of the line and the fill's count (deterministic).
    pub fn set_pair_recent(&mut self, f: f64) {
        if let Some(l) = self.levels.get_mut(1) {
            l.pair_recent = f.clamp(0.0, 1.0);
        }
    }

    /// L2's spatial prefetcher: "strives to complete every cache line fetched to the L2 cache
    /// with the pair line that completes it to a 128-byte aligned chunk" (Intel 64 and IA-32
    /// Architectures Optimization Reference Manual, data prefetching, Sandy Bridge onward).
    /// On: a reference served beyond L2 also brings its pair line into L2, as the set's next
    /// victim (`Level::fill_victim`): where it lands the manual does not say; scripts/pair-knee.c
    /// and pair-fill.c measured on this project's Intel guest that filled pairs are there when
    /// nothing competes and take some L2 capacity, not a line's (docs/validation.md, "Does L2
    /// fill each missed line's 128-byte pair?").
    /// With it off (every preset) the hierarchy function has no pair path at all
    /// (`hier_fn`).
    pub fn set_pair_fill(&mut self, on: bool) {
        if let Some(l) = self.levels.get_mut(1) {
            l.pair = on;
        }
        self.hier = hier_fn(&self.levels);
    }

    /// Gives level `level` a line lifetime of `cycles` core cycles on `clock`, the core's clock
    /// in ticks of `ticks_per_cycle` (`Core::set_clock`; `Hw::new` links the two). A line whose
    /// last fill or hit there is older is a miss (`Level::access_timed`).
    pub fn set_lifetime(
        &mut self,
        level: usize,
        cycles: u64,
        clock: Arc<AtomicU64>,
        ticks_per_cycle: u64,
    ) {
        let l = &mut self.levels[level];
        l.lifetime = cycles.saturating_mul(ticks_per_cycle.max(1));
        l.stamps = vec![0; l.sets as usize * l.ways];
        l.clock = Some(clock);
        l.access_fn = Level::access_timed;
        self.hier = hier_fn(&self.levels);
    }

    /// Gives level `level`, which has a lifetime (`set_lifetime`, whose threshold it replaces;
    /// `u64::MAX` cycles for none), the measured lifetime curve `points`: (age in core cycles,
    /// share of lines gone), ages increasing, shares in [0, 1] non-decreasing (the machine
    /// file's checks). A hit on a line of age a is a miss with probability F(a): linear
    /// between the points; from (0, 0) to the first, since a line just touched is there and
    /// the benchmark's shortest round (0.2 ms) is its first point; the last point's share
    /// after it, since the longest round (25 ms) is all the benchmark saw.
    pub fn set_lifetime_curve(
        &mut self,
        level: usize,
        points: &[(u64, f64)],
        ticks_per_cycle: u64,
    ) {
        let l = &mut self.levels[level];
        assert!(
            !l.stamps.is_empty(),
            "a lifetime curve needs set_lifetime first"
        );
        let t = ticks_per_cycle.max(1);
        let mut pts: Vec<(u64, f64)> = Vec::with_capacity(points.len() + 1);
        if points.first().is_none_or(|p| p.0 > 0) {
            pts.push((0, 0.0));
        }
        pts.extend(points.iter().map(|&(a, f)| (a.saturating_mul(t), f)));
        l.curve = pts
            .iter()
            .enumerate()
            .map(|(i, &(age, f))| CurvePoint {
                age,
                f,
                slope: pts
                    .get(i + 1)
                    .map_or(0.0, |&(a, g)| (g - f) / a.saturating_sub(age).max(1) as f64),
            })
            .collect();
    }

    /// Points every level with a lifetime at `clock` (a cloned machine's own clock).
    pub fn relink_clock(&mut self, clock: &Arc<AtomicU64>) {
        for l in &mut self.levels {
            if l.clock.is_some() {
                l.clock = Some(clock.clone());
            }
        }
    }

    /// Whether any level has a line lifetime.
    pub fn timed(&self) -> bool {
        self.levels.iter().any(|l| !l.stamps.is_empty())
    }

    /// Number of cache levels; `Served` value `levels()` means DRAM.
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// The place a reference `access` served at `s` comes from: its level (0, 1, 2) or 3 for
    /// DRAM (`s == levels()`), as the reports' by-place counts index it. One load, where the
    /// compare with `levels()` took four host instructions.
    #[inline(always)]
    pub fn place(&self, s: Served) -> u8 {
        debug_assert!(s as usize <= self.levels.len());
        let k = self.place[s as usize & 3];
        debug_assert_eq!(
            k,
            if s as usize >= self.levels.len() {
                3
            } else {
                s
            }
        );
        k
    }

    /// The latencies of the four places (`latency` of 0..=3, DRAM's at 3), if each fits 16
    /// bits (every preset's): `hw::walk::add_priced` multiplies by them four at once.
    #[inline(always)]
    pub fn latencies16(&self) -> Option<&[u16; 4]> {
        self.latency16.as_ref()
    }

    /// Latency of a reference served at `s`.
    #[inline]
    pub fn latency(&self, s: Served) -> u64 {
        // `s` is a served level or a place (`place`, walk.rs's pricing), at most 3 either way
        // (`new`): the mask drops the bounds check.
        debug_assert!(s <= 3);
        self.latency[s as usize & 3]
    }

    /// References physical line `line`: returns where it was served (a level, or `levels()` for
    /// DRAM). The levels above that place are filled (non-inclusive, fill on miss).
    #[inline]
    pub fn access(&mut self, line: u64) -> Served {
        (self.hier)(&mut self.levels, line)
    }

    /// Recounts a reference `access` served at `s` (past level 1) as the level-1 hit it is when a
    /// prefetcher had brought the line there (hw/prefetch.rs): the lookups below level 1 were
    /// the prefetcher's, counted as neither hit nor miss. Out of line: kept off the access
    /// path of accesses no stream covers (its loop inlined there was register pressure).
    #[inline(never)]
    pub fn count_prefetched(&mut self, s: Served) {
        let s = s as usize;
        let below = s.min(self.levels.len());
        for l in &mut self.levels[1..below] {
            l.misses -= 1;
        }
        if let Some(l) = self.levels.get_mut(s) {
            l.hits -= 1;
        }
        self.levels[1].hits += 1;
    }

    /// Brings `line` into every level as a prefetcher would (counted as neither hit nor miss):
    /// down to the first level that has it.
    #[inline]
    pub fn stream_fill(&mut self, line: u64) {
        for l in self.levels.iter_mut() {
            if l.access(line) {
                break;
            }
        }
    }

    /// Hints the host to fetch the sets `line` maps to in the levels too large to stay in the
    /// host's L1 cache (no effect on the model).
    #[inline]
    pub fn prefetch(&self, line: u64) {
        for &i in &self.prefetched {
            // SAFETY: `prefetched` holds indices of `levels` (see `new`).
            unsafe { self.levels.get_unchecked(i) }.prefetch(line);
        }
    }

    /// `prefetch` of lines `a` and `b` (an access's data line and its leaf page-table entry's,
    /// in the batch loop's second stage): one pass over the levels, each level's fields read
    /// once (two calls of `prefetch` were about 44 host instructions per GUPS access).
    #[inline]
    pub fn prefetch_pair(&self, a: u64, b: u64) {
        for &i in &self.prefetched {
            // SAFETY: `prefetched` holds indices of `levels` (see `new`).
            unsafe { self.levels.get_unchecked(i) }.prefetch_pair(a, b);
        }
    }

    pub fn stats(&self) -> Vec<CacheStats> {
        self.levels
            .iter()
            .zip(&self.names)
            .map(|(l, n)| CacheStats {
                name: n.clone(),
                hits: l.hits,
                misses: l.misses,
                expired: l.expired,
            })
            .collect()
    }

    /// Checks that no set holds a tag twice, the count of valid lines, and that replacement state
    /// has no stray bits.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (l, name) in self.levels.iter().zip(&self.names) {
            // One pass over the sets (this runs after every event under the tests' full check,
            // and the LLC is the largest array): it counts the valid ways and keeps the first
            // set-level fault, which is reported after the counts' faults, as the checks are
            // ordered.
            // The replacement state's bits (round robin keeps a way number instead).
            let bits = if l.policy == PLRU {
                plru_bits(l.ways)
            } else {
                l.ways
            };
            let mut valid = 0u64;
            let mut fault: Option<String> = None;
            for set in 0..l.sets as usize {
                let s = l.set(set);
                let mut held = 0u64;
                for (i, &t) in s.iter().enumerate() {
                    if t != 0 {
                        held += 1;
                        // An OR of compares, which vectorises (`contains` on u32 does not).
                        let twice = s[i + 1..].iter().fold(false, |a, &u| a | (u == t));
                        if fault.is_none() && twice {
                            fault = Some(format!("cache {name}: set {set} holds a line twice"));
                        }
                    }
                }
                valid += held;
                let bad = if l.policy == ROUND_ROBIN {
                    l.repl[set] as usize >= l.ways
                } else {
                    bits < 32 && l.repl[set] >> bits != 0
                };
                if bad && fault.is_none() {
                    fault = Some(format!(
                        "cache {name}: set {set} has stray replacement bits"
                    ));
                }
            }
            if l.policy != ROUND_ROBIN && valid != l.valid {
                return Err(format!(
                    "cache {name}: {valid} valid lines, counted {}",
                    l.valid
                ));
            }
            if l.policy != ROUND_ROBIN && l.full != (l.valid == l.sets * l.ways as u64) {
                return Err(format!(
                    "cache {name}: full is {} with {} of {} lines valid",
                    l.full,
                    l.valid,
                    l.sets * l.ways as u64
                ));
            }
            if let Some(f) = fault {
                return Err(f);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(name: &str, lines: u64, ways: u32, latency: u64, r: Replacement) -> CacheLevelConfig {
        CacheLevelConfig {
            name: name.into(),
            size_bytes: lines << LINE_SHIFT,
            ways,
            latency,
            replacement: r,
        }
    }

    fn one(ways: u32, r: Replacement) -> Caches {
        Caches::new(&CachesConfig {
            levels: vec![level("L1", ways as u64, ways, 4, r)],
            dram_latency: 100,
        })
    }

    /// `check_invariants` finds each fault it looks for, names it as it should, and passes
    /// the states just inside its bounds: one set of four ways holding three lines (then
    /// four), under each replacement policy.
    #[test]
    fn check_invariants_names_each_fault_of_a_level() {
        for r in [Replacement::Plru, Replacement::Nru, Replacement::RoundRobin] {
            let mut c = one(4, r);
            for line in 0..3 {
                c.access(line);
            }
            c.check_invariants().unwrap();
            let err = |d: &Caches| d.check_invariants().unwrap_err();
            let first = c.levels[0].tags[0].0[0];
            // A line held twice (ways 0 and 1 both valid: the count is unchanged).
            let mut d = c.clone();
            d.levels[0].tags[0].0[1] = first;
            assert_eq!(err(&d), "cache L1: set 0 holds a line twice", "{r:?}");
            // Replacement state: the last value the policy can hold passes, the next does not.
            let bound = match r {
                Replacement::Plru => 1 << plru_bits(4),
                Replacement::Nru => 1 << 4,
                Replacement::RoundRobin => 4,
            };
            let mut d = c.clone();
            d.levels[0].repl[0] = bound - 1;
            d.check_invariants().unwrap();
            d.levels[0].repl[0] = bound;
            assert_eq!(
                err(&d),
                "cache L1: set 0 has stray replacement bits",
                "{r:?}"
            );
            if r == Replacement::RoundRobin {
                // Round robin keeps no count of valid lines (its fills need none).
                let mut d = c.clone();
                d.levels[0].valid += 1;
                d.check_invariants().unwrap();
                continue;
            }
            let mut d = c.clone();
            d.levels[0].valid += 1;
            assert_eq!(err(&d), "cache L1: 3 valid lines, counted 4", "{r:?}");
            // The error of `c` with its full flag set to `full`.
            let full_err = |c: &Caches, full: bool| {
                let mut d = c.clone();
                d.levels[0].full = full;
                err(&d)
            };
            let want = "cache L1: full is true with 3 of 4 lines valid";
            assert_eq!(full_err(&c, true), want, "{r:?}");
            // The counts' faults come before a set's, as the checks are ordered.
            let mut d = c.clone();
            d.levels[0].valid += 1;
            d.levels[0].tags[0].0[1] = first;
            assert_eq!(err(&d), "cache L1: 3 valid lines, counted 4", "{r:?}");
            // The fourth line fills the set: full, and the check agrees.
            c.access(3);
            assert!(c.levels[0].full, "{r:?}");
            c.check_invariants().unwrap();
            let want = "cache L1: full is false with 4 of 4 lines valid";
            assert_eq!(full_err(&c, false), want, "{r:?}");
        }
        // 32 ways of NRU: a reference bit per way fills the state's 32 bits, none is stray
        // (and no shift by 32 is tried).
        let mut c = one(32, Replacement::Nru);
        for line in 0..40 {
            c.access(line);
        }
        c.levels[0].repl[0] = u32::MAX;
        c.check_invariants().unwrap();
    }

    /// Two levels: a 2-line direct-mapped L1 and a 4-set, 2-way L2 (`replacement` `r`).
    fn l1_l2(r: Replacement, pair: bool) -> Caches {
        let mut c = Caches::new(&CachesConfig {
            levels: vec![
                level("L1", 2, 1, 4, Replacement::Plru),
                level("L2", 8, 2, 12, r),
            ],
            dram_latency: 100,
        });
        c.set_pair_fill(pair);
        c
    }

    #[test]
    fn a_miss_beyond_l2_brings_its_pair_line_into_l2() {
        for r in [Replacement::Plru, Replacement::Nru] {
            let mut on = l1_l2(r, true);
            let mut off = l1_l2(r, false);
            for c in [&mut on, &mut off] {
                assert_eq!(c.access(10), 2, "cold: DRAM");
            }
            // 11 = 10 ^ 1: the other line of its 128-byte pair, never referenced.
            assert_eq!(on.access(11), 1, "{r:?}: the pair line is in L2");
            assert_eq!(off.access(11), 2, "{r:?}: without the pair fill it is not");
            // Counted as neither hit nor miss: L2 saw one miss (10) and one hit (11).
            let l2 = &on.stats()[1];
            assert_eq!((l2.hits, l2.misses), (1, 1), "{r:?}");
        }
    }

    #[test]
    fn a_pair_line_is_its_sets_next_victim() {
        for r in [Replacement::Plru, Replacement::Nru] {
            let mut c = l1_l2(r, true);
            // L2 set 0 (lines 0, 4, 8, ...; the pair of 8 is 9, set 1). 0 and 4 fill set 0's
            // two ways; their pairs 1 and 5 fill set 1's.
            c.access(0);
            c.access(4);
            // 8 misses: evicts 0 (least recent) and brings 9 into set 1 as its victim, in
            // place of 1 (least recent there).
            assert_eq!(c.access(8), 2);
            // 13 (set 1) misses: it takes the victim's way, 9's, not 5's.
            assert_eq!(c.access(13), 2, "{r:?}");
            assert_eq!(c.access(5), 1, "{r:?}: 5, the recent line, stayed in L2");
            assert_eq!(c.access(9), 2, "{r:?}: the pair line went first");
        }
    }

    /// The pair of an odd line is the even one below it (line ^ 1); the level stays consistent
    /// (`check_invariants`: its count of valid ways) after pair fills into empty ways.
    #[test]
    fn an_odd_lines_pair_is_the_even_one_and_the_level_stays_consistent() {
        let mut c = l1_l2(Replacement::Plru, true);
        assert_eq!(c.access(11), 2, "cold: DRAM");
        assert_eq!(c.access(10), 1, "10 = 11 ^ 1 came with it");
        assert_eq!(c.access(12), 2);
        c.check_invariants().unwrap();
        assert_eq!(c.levels[1].valid, 4, "11, 10, 12 and 13");
        // Two more: six of the eight ways, not full (a pair fill keeps `full` true to the count).
        assert_eq!(c.access(14), 2);
        assert_eq!(c.levels[1].valid, 6);
        c.check_invariants().unwrap();
        assert_eq!(c.access(16), 2);
        assert_eq!(c.levels[1].valid, 8);
        c.check_invariants().unwrap();
    }

    /// A round-robin level has no victim a pair line could take without moving its pointer:
    /// a full set is left as it was.
    #[test]
    fn a_round_robin_level_takes_no_pair_line_into_a_full_set() {
        let mut c = Caches::new(&CachesConfig {
            levels: vec![
                level("L1", 1, 1, 4, Replacement::Plru),
                level("L2", 2, 2, 12, Replacement::RoundRobin),
            ],
            dram_latency: 100,
        });
        c.access(0);
        c.access(2);
        c.levels[1].fill_victim(9);
        assert!(!c.levels[1].contains(9));
        assert!(c.levels[1].contains(0) && c.levels[1].contains(2));
    }

    /// A pair line takes the way its set would evict next, which differs by policy: a 4-way
    /// set filled with 0, 2, 4, 6 and then 0 touched again evicts 4 under tree-PLRU and 2 under
    /// NRU (whose bits, cleared when 6 set the last one, hold 6 and 0).
    #[test]
    fn a_pair_line_takes_the_policys_victim_way() {
        for (r, gone) in [(Replacement::Plru, 4), (Replacement::Nru, 2)] {
            let mut c = Caches::new(&CachesConfig {
                levels: vec![
                    level("L1", 1, 1, 4, Replacement::Plru),
                    level("L2", 4, 4, 12, r),
                ],
                dram_latency: 100,
            });
            for l in [0, 2, 4, 6, 0] {
                c.access(l);
            }
            c.levels[1].fill_victim(9);
            let there: Vec<u64> = [0, 2, 4, 6, 9]
                .into_iter()
                .filter(|&l| c.levels[1].contains(l))
                .collect();
            let want: Vec<u64> = [0, 2, 4, 6, 9].into_iter().filter(|&l| l != gone).collect();
            assert_eq!(there, want, "{r:?}");
            c.check_invariants().unwrap();
        }
    }

    /// On a level with a lifetime, a pair line is stamped when it comes in: touched soon after,
    /// it is a hit, not a line as old as the clock.
    #[test]
    fn a_pair_line_on_a_timed_level_is_stamped_at_its_fill() {
        let mut c = l1_l2(Replacement::Plru, true);
        let clock = Arc::new(AtomicU64::new(0));
        c.set_lifetime(1, 500, clock.clone(), 1);
        clock.store(10_000, Ordering::Relaxed);
        // 17 (and its pair 16) first, so that 21 lands in the second way of its set.
        assert_eq!(c.access(17), 2);
        assert_eq!(c.access(20), 2, "cold: DRAM, 21 comes as its pair");
        clock.store(10_100, Ordering::Relaxed);
        assert_eq!(c.access(21), 1, "100 cycles old: an L2 hit");
        assert_eq!(c.stats()[1].expired, 0);
    }

    /// Filled as most recent, a pair line already in L2 is left alone: 0, the least recent of
    /// its set, stays the one evicted next. With a share of 0.5, about half of 400 pair fills
    /// land as most recent (`a_pair_line_is_its_sets_next_victim`'s references, moved by 16k
    /// lines each time so that each draws anew).
    #[test]
    fn a_pair_line_already_there_is_left_alone_and_half_land_recent() {
        let mut c = l1_l2(Replacement::Plru, false);
        c.access(0);
        c.access(4); // L2 set 0: 0 (least recent), 4
        c.set_pair_fill(true);
        c.set_pair_recent(1.0);
        assert_eq!(c.access(1), 2, "1 misses; its pair 0 is in L2 already");
        assert_eq!(c.access(8), 2, "set 0's next fill");
        assert!(!c.levels[1].contains(0), "0 was still the least recent");
        assert!(c.levels[1].contains(4));
        let mut recent = 0;
        for k in 0..400u64 {
            let o = 16 * k;
            let mut c = l1_l2(Replacement::Plru, true);
            c.set_pair_recent(0.5);
            c.access(o);
            c.access(o + 4);
            c.access(o + 8); // its pair o + 9 into set 1
            c.access(o + 13); // set 1's next fill
            if c.levels[1].contains(o + 9) {
                recent += 1;
            }
        }
        assert!((160..=240).contains(&recent), "{recent} of 400 as recent");
    }

    #[test]
    fn pair_recent_one_fills_the_pair_as_the_most_recent_line() {
        for r in [Replacement::Plru, Replacement::Nru] {
            // `a_pair_line_is_its_sets_next_victim`'s references, every pair fill most recent.
            let mut c = l1_l2(r, true);
            c.set_pair_recent(1.0);
            c.access(0);
            c.access(4);
            assert_eq!(c.access(8), 2);
            // 9 came in as most recent: 13 takes the other way, 5's.
            assert_eq!(c.access(13), 2, "{r:?}");
            assert_eq!(c.access(9), 1, "{r:?}: the pair line stayed");
            assert_eq!(c.access(5), 2, "{r:?}: 5 went first");
        }
    }

    #[test]
    fn tree_plru_is_not_lru() {
        let mut c = one(4, Replacement::Plru);
        for l in 0..4 {
            assert_eq!(c.access(l), 1, "cold miss");
        }
        for l in 0..3 {
            assert_eq!(c.access(l), 0);
        }
        // LRU would evict 3; tree PLRU's last touch (way 2, right half) points the root left,
        // and the left pair's last touch (way 1) points at way 0.
        assert_eq!(c.access(9), 1);
        assert_eq!(c.access(3), 0, "3 survives");
        assert_eq!(c.access(0), 1, "0 was the victim");
        c.check_invariants().unwrap();
    }

    /// Hits of `rounds` passes of a cycle over `n` lines of a one-set cache of `ways` ways,
    /// after one pass to fill it.
    fn cyclic_hits(ways: u32, r: Replacement, n: u64, rounds: usize) -> usize {
        let mut c = one(ways, r);
        for l in 0..n {
            c.access(l);
        }
        let mut hits = 0;
        for _ in 0..rounds {
            for l in 0..n {
                hits += (c.access(l) == 0) as usize;
            }
        }
        c.check_invariants().unwrap();
        hits
    }

    #[test]
    fn a_twelve_way_plru_set_evicts_a_cycle_beyond_its_ways_as_lru_does() {
        for ways in [3u32, 6, 12, 20, 24] {
            // A set's worth of lines: every access hits.
            assert_eq!(
                cyclic_hits(ways, Replacement::Plru, ways as u64, 10),
                10 * ways as usize
            );
        }
        // 13 to 16 lines (a cyclic chase just beyond the set): LRU hits none, these groups at
        // most a tenth (23, 10, 6, 3 hits), NRU (the fallback until 2026-11-28) 104, 71, 52, 56. Every victim is one of the
        // 12 ways (a 13th would index past the set and panic), no stray state bits.
        for n in 13..=16 {
            let plru = cyclic_hits(12, Replacement::Plru, n, 20);
            let nru = cyclic_hits(12, Replacement::Nru, n, 20);
            assert!(plru * 10 <= 20 * n as usize, "{n} lines: {plru} hits");
            assert!(nru > 2 * plru, "{n} lines: NRU {nru}, PLRU {plru}");
        }
        // Three ways are three groups of one: exact LRU (4 lines cycle: no hit).
        assert_eq!(cyclic_hits(3, Replacement::Plru, 4, 20), 0);
    }

    #[test]
    fn plru_state_bits_are_the_trees_nodes_and_one_per_pair_of_groups() {
        // One tree of `ways - 1` nodes for a power of two; 12 ways: three 4-way trees (3 nodes
        // each) and 3 order bits; 6: three 2-way trees and 3; 3: three single ways and 3; 20:
        // five 4-way trees and 10; 7: seven single ways and 21 (over `plru_fill`'s 7: NRU).
        for (ways, bits) in [
            (2, 1),
            (4, 3),
            (8, 7),
            (16, 15),
            (12, 12),
            (6, 6),
            (3, 3),
            (20, 25),
            (7, 21),
        ] {
            assert_eq!(plru_bits(ways), bits, "{ways} ways");
        }
        // The order bits follow the trees, one per pair, none shared, all below the count.
        for ways in [3, 6, 12, 20, 24] {
            let (g, per) = plru_groups(ways);
            let mut seen = std::collections::HashSet::new();
            for i in 0..g {
                for j in i + 1..g {
                    let b = pair_bit(g, per, i, j);
                    assert!(
                        (g * (per - 1)..plru_bits(ways)).contains(&b) && seen.insert(b),
                        "{ways} ways, pair ({i}, {j}): bit {b}"
                    );
                }
            }
            assert_eq!(seen.len(), g * (g - 1) / 2, "{ways} ways");
        }
    }

    #[test]
    fn the_plru_fill_table_is_the_walk_and_the_touch() {
        for ways in [1u32, 2, 4, 8] {
            let l = Level::new(&level("L", 4 * ways as u64, ways, 4, Replacement::Plru));
            for r in 0..1u32 << (ways - 1) {
                let v = plru_walk(ways as usize, r);
                let e = l.plru_fill[r as usize];
                assert_eq!((e & 0xff) as usize, v, "{ways} ways, state {r}");
                assert_eq!((e >> 8) as u32, (r & l.plru_and[v]) | l.plru_or[v]);
            }
        }
    }

    #[test]
    fn places_are_the_levels_then_dram() {
        for n in 1..=3usize {
            let mut c = Caches::new(&CachesConfig {
                levels: (0..n)
                    .map(|i| level("L", 64 << (2 * i), 4, 4 + i as u64, Replacement::Plru))
                    .collect(),
                dram_latency: 100,
            });
            for s in 0..=n as u8 {
                let rule = if s as usize >= c.levels() { 3 } else { s };
                assert_eq!(c.place(s), rule, "{n} levels, served at {s}");
            }
            // What `access` returns maps as the rule says: a cold line from DRAM, then L1.
            let cold = c.access(9);
            assert_eq!(c.place(cold), 3);
            let hit = c.access(9);
            assert_eq!(c.place(hit), 0);
        }
    }

    #[test]
    fn set_masks_are_the_general_compare() {
        // Every pattern of matching ways, with the tag, 0 (an invalid way) and others.
        for tag in [0u32, 1, 7, u32::MAX] {
            for pat in 0u32..1 << 16 {
                let s: Vec<u32> = (0..16)
                    .map(|i| match pat >> i & 1 {
                        1 => tag,
                        _ => tag.wrapping_add(1 + i),
                    })
                    .collect();
                assert_eq!(masks::<4>(&s[..4], tag), masks_any(&s[..4], tag));
                assert_eq!(masks::<8>(&s[..8], tag), masks_any(&s[..8], tag));
                assert_eq!(masks::<16>(&s, tag), masks_any(&s, tag));
            }
        }
    }

    #[test]
    fn two_way_plru_is_lru() {
        let mut c = one(2, Replacement::Plru);
        c.access(1);
        c.access(2);
        c.access(1);
        c.access(3); // evicts 2 (LRU)
        assert_eq!(c.access(1), 0);
        assert_eq!(c.access(2), 1);
    }

    #[test]
    fn nru_evicts_the_first_unreferenced_way() {
        let mut c = one(4, Replacement::Nru);
        for l in 0..4 {
            c.access(l); // the fourth reference clears the others' bits
        }
        assert_eq!(c.access(1), 0); // bits: 3, 1
        assert_eq!(c.access(7), 1); // evicts way 0 (line 0)
        assert_eq!(c.access(2), 0);
        assert_eq!(c.access(0), 1);
        c.check_invariants().unwrap();
    }

    #[test]
    fn repeated_plru_touches_keep_a_line_most_recent() {
        let mut c = one(4, Replacement::Plru);
        for l in 0..4 {
            c.access(l);
        }
        c.access(0);
        c.access(0); // touching twice must not undo the first touch
        assert_eq!(c.access(9), 1);
        assert_eq!(c.access(0), 0, "the most recently used line survives");
        assert_eq!(c.access(2), 1, "the tree pointed at way 2");
    }

    #[test]
    fn nru_keeps_referenced_ways() {
        let mut c = one(4, Replacement::Nru);
        for l in 0..4 {
            c.access(l); // the fourth fill sets every bit: only its own stays
        }
        c.access(0);
        c.access(1); // reference bits: 0, 1, 3
        assert_eq!(c.access(7), 1, "evicts the unreferenced way 2");
        assert_eq!(c.access(0), 0);
        assert_eq!(c.access(1), 0);
        assert_eq!(c.access(3), 0);
        assert_eq!(c.access(2), 1);
    }

    #[test]
    fn round_robin_sets_are_independent() {
        // 2 sets x 2 ways: even lines in set 0, odd lines in set 1.
        let mut c = Caches::new(&CachesConfig {
            levels: vec![level("L1", 4, 2, 3, Replacement::RoundRobin)],
            dram_latency: 100,
        });
        for l in 0..4 {
            assert_eq!(c.access(l), 1);
        }
        assert_eq!(c.access(4), 1); // set 0's turn: way 0 (line 0)
        assert_eq!(c.access(1), 0, "set 1 untouched");
        assert_eq!(c.access(3), 0);
        assert_eq!(c.access(2), 0);
        assert_eq!(c.access(0), 1);
        c.check_invariants().unwrap();
    }

    #[test]
    fn lines_of_one_set_are_told_apart_by_their_high_bits() {
        // 2 sets x 2 ways: lines 0, 2^31 and 2^32 + 2 all map to set 0.
        let mut c = Caches::new(&CachesConfig {
            levels: vec![level("L1", 4, 2, 4, Replacement::Plru)],
            dram_latency: 100,
        });
        assert_eq!(c.access(0), 1);
        assert_eq!(c.access(1 << 31), 1, "a different line, not a hit");
        assert_eq!(c.access(1), 1, "set 1 is separate");
        assert_eq!(c.access(0), 0);
        assert_eq!(c.access(1 << 31), 0);
        assert_eq!(c.access((1 << 32) + 2), 1);
        c.check_invariants().unwrap();
    }

    #[test]
    fn round_robin_ignores_hits() {
        let mut c = one(2, Replacement::RoundRobin);
        c.access(1);
        c.access(2);
        c.access(1); // a hit: LRU would now evict 2
        c.access(3); // round robin evicts way 0 (line 1)
        assert_eq!(c.access(2), 0);
        assert_eq!(c.access(1), 1);
        c.check_invariants().unwrap();
    }

    /// One 4-way level of 4 lines with a lifetime of 100 cycles at 2 ticks a cycle, and the
    /// clock it reads.
    fn timed(ways: u32, r: Replacement) -> (Caches, Arc<AtomicU64>) {
        let mut c = one(ways, r);
        let clock = Arc::new(AtomicU64::new(0));
        c.set_lifetime(0, 100, clock.clone(), 2);
        (c, clock)
    }

    #[test]
    fn a_line_older_than_the_lifetime_misses() {
        for r in [Replacement::Plru, Replacement::Nru, Replacement::RoundRobin] {
            let (mut c, clock) = timed(4, r);
            assert!(c.timed());
            let at = |c: &mut Caches, t: u64, line: u64| {
                clock.store(t, Ordering::Relaxed);
                c.access(line)
            };
            assert_eq!(at(&mut c, 0, 1), 1, "cold");
            assert_eq!(at(&mut c, 0, 2), 1, "cold");
            assert_eq!(at(&mut c, 150, 1), 0, "75 cycles old: a hit");
            assert_eq!(at(&mut c, 350, 1), 0, "exactly 100 cycles old: a hit");
            assert_eq!(at(&mut c, 552, 1), 1, "101 cycles old: expired");
            assert_eq!(at(&mut c, 560, 1), 0, "refilled at 552");
            assert_eq!(at(&mut c, 560, 2), 1, "280 cycles old: expired");
            assert_eq!(at(&mut c, 700, 2), 0, "refilled in place");
            let s = &c.stats()[0];
            assert_eq!((s.hits, s.misses, s.expired), (4, 4, 2), "{r:?}");
            c.check_invariants().unwrap();
        }
    }

    /// Each line's age is its own: touching one line of a set does not refresh another's.
    #[test]
    fn each_line_keeps_its_own_stamp() {
        for r in [Replacement::Plru, Replacement::Nru, Replacement::RoundRobin] {
            let (mut c, clock) = timed(4, r);
            let at = |c: &mut Caches, t: u64, line: u64| {
                clock.store(t, Ordering::Relaxed);
                c.access(line)
            };
            for line in 1..=3 {
                assert_eq!(at(&mut c, 0, line), 1, "cold");
            }
            assert_eq!(at(&mut c, 150, 3), 0, "75 cycles old: a hit");
            assert_eq!(
                at(&mut c, 250, 2),
                1,
                "125 cycles old: expired, 3's touch is not 2's"
            );
            assert_eq!(at(&mut c, 250, 3), 0, "50 cycles old: a hit");
            assert_eq!(c.stats()[0].expired, 1, "{r:?}");
        }
    }

    #[test]
    fn without_a_lifetime_lines_never_expire() {
        let mut c = one(4, Replacement::Nru);
        assert!(!c.timed());
        assert_eq!(c.access(1), 1);
        let clock = Arc::new(AtomicU64::new(0));
        // A clock that runs but is given to no level changes nothing.
        clock.store(u64::MAX / 2, Ordering::Relaxed);
        assert_eq!(c.access(1), 0);
        let s = &c.stats()[0];
        assert_eq!((s.hits, s.misses, s.expired), (1, 1, 0));
        // A timed level at time zero: nothing is older than the lifetime.
        let (mut t, _) = timed(4, Replacement::Plru);
        for _ in 0..3 {
            t.access(7);
        }
        assert_eq!((t.stats()[0].hits, t.stats()[0].expired), (2, 0));
    }

    #[test]
    fn an_expired_llc_line_comes_from_dram_and_fills_the_levels_above() {
        let mut c = Caches::new(&CachesConfig {
            levels: vec![
                level("L1", 2, 2, 4, Replacement::Plru),
                level("LLC", 64, 16, 40, Replacement::Nru),
            ],
            dram_latency: 200,
        });
        let clock = Arc::new(AtomicU64::new(0));
        c.set_lifetime(1, 1000, clock.clone(), 1);
        assert_eq!(c.access(5), 2);
        c.access(6);
        c.access(7); // L1 evicts 5; the LLC keeps it
        clock.store(1000, Ordering::Relaxed);
        assert_eq!(c.access(5), 1, "1000 cycles: an LLC hit");
        c.access(6);
        c.access(7);
        clock.store(2001, Ordering::Relaxed);
        assert_eq!(c.access(5), 2, "1001 cycles untouched in the LLC: DRAM");
        assert_eq!(c.access(5), 0, "filled into L1");
        // The L1 hit did not touch the LLC's stamp (a non-inclusive hierarchy): 6 and 7 were
        // stamped at 1000, 5 at its refill at 2001, and all three are older than 1000 at 3500.
        clock.store(3500, Ordering::Relaxed);
        assert_eq!(c.access(6), 2);
        assert_eq!(c.access(7), 2);
        assert_eq!(c.access(5), 2, "1499 cycles since its refill");
        let s = c.stats();
        assert_eq!((s[1].hits, s[1].misses, s[1].expired), (3, 7, 4));
        assert_eq!((s[0].hits, s[0].misses), (1, 10));
        c.check_invariants().unwrap();
    }

    /// A 16-way level of `lines` lines, timed at 2 ticks a cycle with no threshold, on the
    /// curve F = 0 to 100 cycles, 0.5 at 200 to 300, 1 from 400 on; and its clock.
    fn curved(lines: u64) -> (Caches, Arc<AtomicU64>) {
        let mut c = Caches::new(&CachesConfig {
            levels: vec![level("LLC", lines, 16, 40, Replacement::Nru)],
            dram_latency: 200,
        });
        let clock = Arc::new(AtomicU64::new(0));
        c.set_lifetime(0, u64::MAX, clock.clone(), 2);
        c.set_lifetime_curve(0, &[(100, 0.0), (200, 0.5), (300, 0.5), (400, 1.0)], 2);
        (c, clock)
    }

    #[test]
    fn the_curve_is_read_linearly_from_zero_and_held_after_its_last_point() {
        let (c, _) = curved(16);
        let f = |cycles: u64| decayed(&c.levels[0].curve, 2 * cycles);
        assert_eq!(c.levels[0].curve.len(), 5, "(0, 0) and the four points");
        for (age, want) in [
            (0, 0.0),
            (100, 0.0),
            (150, 0.25),
            (200, 0.5),
            (250, 0.5),
            (350, 0.75),
            (400, 1.0),
            (10_000, 1.0),
        ] {
            assert!((f(age) - want).abs() < 1e-12, "F({age}) = {}", f(age));
        }
        // A curve whose first point is above 0 starts from (0, 0), and one starting at age 0
        // gets no second point there.
        let mut d = one(4, Replacement::Nru);
        d.set_lifetime(0, u64::MAX, Arc::new(AtomicU64::new(0)), 1);
        d.set_lifetime_curve(0, &[(1000, 0.4), (3000, 0.6)], 1);
        let g = |d: &Caches, age: u64| decayed(&d.levels[0].curve, age);
        assert!((g(&d, 500) - 0.2).abs() < 1e-12 && (g(&d, 2000) - 0.5).abs() < 1e-12);
        assert!((g(&d, 99_999) - 0.6).abs() < 1e-12);
        d.set_lifetime_curve(0, &[(0, 0.1), (10, 0.2)], 1);
        assert_eq!(d.levels[0].curve.len(), 2);
        assert!((g(&d, 0) - 0.1).abs() < 1e-12 && (g(&d, 5) - 0.15).abs() < 1e-12);
    }

    /// 4096 lines, all stamped at once, touched again together at one age: none expire where
    /// F = 0, all where F = 1, and where F = 0.5 a share within 0.45-0.55 (2048 expected,
    /// binomial sd 32: the bounds are 6.4 sd away; deterministic anyway: 2059).
    #[test]
    fn a_curve_expires_the_share_of_lines_it_gives_at_each_age() {
        const N: u64 = 4096;
        let (mut c, clock) = curved(N);
        assert!(c.timed());
        let round = |c: &mut Caches, t: u64| {
            clock.store(t, Ordering::Relaxed);
            (0..N).filter(|&l| c.access(l) == 1).count() as u64
        };
        assert_eq!(round(&mut c, 0), N, "cold");
        assert_eq!(round(&mut c, 200), 0, "100 cycles old, F = 0: all hit");
        assert_eq!(round(&mut c, 400), 0, "100 cycles again");
        let half = round(&mut c, 900);
        assert!(
            (N * 45 / 100..=N * 55 / 100).contains(&half),
            "250 cycles old, F = 0.5: {half} of {N} expired"
        );
        assert_eq!(c.stats()[0].expired, half);
        assert_eq!(round(&mut c, 1700), N, "400 cycles old, F = 1: all expire");
        assert_eq!(round(&mut c, 21_700), N, "10,000 cycles: F stays 1");
        let s = &c.stats()[0];
        assert_eq!((s.expired, s.misses), (half + 2 * N, half + 3 * N));
        c.check_invariants().unwrap();
    }

    /// One line touched again and again at an age where F = 0.5: each touch is a new draw (its
    /// stamp is new), so about half of 4096 touches miss (0.45-0.55, as above; 1999).
    #[test]
    fn each_touch_of_a_line_draws_anew() {
        let (mut c, clock) = curved(16);
        let mut gone = 0;
        for i in 0..=4096u64 {
            clock.store(500 * i, Ordering::Relaxed);
            if c.access(3) == 1 {
                gone += 1;
            }
        }
        let expired = c.stats()[0].expired;
        assert_eq!(gone, expired + 1, "the first touch is cold");
        assert!((1843..=2253).contains(&expired), "{expired} of 4096");
    }

    /// The same references at the same times give the same counts, and a different curve
    /// different ones.
    #[test]
    fn a_curve_is_deterministic() {
        let run = |curve: &[(u64, f64)]| {
            let (mut c, clock) = curved(1024);
            c.set_lifetime_curve(0, curve, 2);
            let mut x = 12345u64;
            for t in 0..50_000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                clock.store(4 * t, Ordering::Relaxed);
                c.access((x >> 33) % 1500);
            }
            let s = &c.stats()[0];
            (s.hits, s.misses, s.expired)
        };
        let curve = [(500, 0.1), (2000, 0.9)];
        let a = run(&curve);
        assert_eq!(a, run(&curve));
        assert!(a.2 > 0 && a.0 > 0, "{a:?}");
        assert_ne!(a, run(&[(500, 0.2), (2000, 0.9)]));
    }

    /// A hierarchy of a preset's shape (skylake's: 8-way PLRU, 4-way PLRU, 16-way NRU) with
    /// every level timed goes through each level's timed access, not the shape's specialised
    /// path: a line untouched past every level's lifetime comes from DRAM.
    #[test]
    fn a_preset_shape_with_every_level_timed_is_timed() {
        let mut c = Caches::new(&CachesConfig {
            levels: vec![
                level("L1", 64, 8, 4, Replacement::Plru),
                level("L2", 64, 4, 12, Replacement::Plru),
                level("LLC", 256, 16, 40, Replacement::Nru),
            ],
            dram_latency: 200,
        });
        let clock = Arc::new(AtomicU64::new(0));
        for l in 0..3 {
            c.set_lifetime(l, u64::MAX, clock.clone(), 1);
            c.set_lifetime_curve(l, &[(10, 1.0)], 1);
        }
        assert_eq!(c.access(5), 3, "cold");
        assert_eq!(c.access(5), 0, "age 0: an L1 hit");
        clock.store(100, Ordering::Relaxed);
        assert_eq!(c.access(5), 3, "gone from every level");
        assert_eq!(c.stats().iter().map(|s| s.expired).sum::<u64>(), 3);
    }

    #[test]
    fn hierarchy_fills_the_levels_above() {
        let mut c = Caches::new(&CachesConfig {
            levels: vec![
                level("L1", 2, 2, 4, Replacement::Plru),
                level("L2", 12, 12, 12, Replacement::Nru),
            ],
            dram_latency: 200,
        });
        assert_eq!(c.access(5), 2);
        assert_eq!(c.latency(2), 200);
        c.access(6);
        c.access(7); // the 2-line L1 evicts 5; the L2 keeps it
        assert_eq!(c.access(5), 1);
        assert_eq!(c.latency(1), 12);
        assert_eq!(c.access(5), 0);
        c.stream_fill(40);
        assert_eq!(c.access(40), 0, "a streamed line is in L1");
        for l in 100..124 {
            c.access(l);
        }
        c.check_invariants().unwrap();
        let s = c.stats();
        assert_eq!(s[0].hits + s[0].misses, 30);
        assert_eq!(s[0].hits, 2); // the second 5 and the streamed 40
    }
}
