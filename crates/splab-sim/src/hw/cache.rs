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
//! Skylake's LLC that nanoBench found (docs/constants.md 6). NRU also serves any level whose
//! associativity is not a power of two.
//!
//! Layout, for speed: a set's tags are 32-bit and contiguous (a 16-way set is one host line),
//! the PLRU/NRU state is one u32 per set in a separate vector. A tag is `(line >> set_bits) + 1`
//! (0 = invalid), which fits 32 bits for up to 2^37 lines (8TB) with 32+ sets.

use serde::Serialize;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
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

#[derive(Clone, Debug)]
struct Level {
    set_mask: u64,
    set_bits: u32,
    sets: u64,
    ways: usize,
    /// Tags, `ways` per set; `tags[off..]` starts on a 64-byte host line, so a set of up to 16
    /// ways is one host line.
    tags: Vec<u32>,
    off: usize,
    /// PLRU tree bits or NRU reference bits, per set.
    repl: Vec<u32>,
    plru: bool,
    round_robin: bool,
    /// Tree PLRU: touching way w sets `repl = (repl & and[w]) | or[w]` (the bits on w's path
    /// pointed away from it), precomputed.
    plru_and: Vec<u32>,
    plru_or: Vec<u32>,
    /// Tree PLRU with at most 8 ways: the victim of every tree state, precomputed.
    plru_victim: Vec<u8>,
    latency: u64,
    hits: u64,
    misses: u64,
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
        let tags = vec![0u32; n + 16];
        let misalign = (tags.as_ptr() as usize) % 64;
        let off = if misalign == 0 {
            0
        } else {
            (64 - misalign) / 4
        };
        let (plru_and, plru_or) = plru_tables(ways);
        let plru_victim = if ways.is_power_of_two() && ways <= 8 {
            (0..1u32 << (ways - 1))
                .map(|r| plru_walk(ways, r) as u8)
                .collect()
        } else {
            Vec::new()
        };
        Level {
            plru_and,
            plru_or,
            plru_victim,
            set_mask: sets - 1,
            set_bits: sets.trailing_zeros(),
            sets,
            ways,
            tags,
            off,
            repl: vec![0; sets as usize],
            plru: cfg.replacement == Replacement::Plru && ways.is_power_of_two(),
            round_robin: cfg.replacement == Replacement::RoundRobin,
            latency: cfg.latency,
            hits: 0,
            misses: 0,
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
        let b = self.off + set * self.ways;
        &self.tags[b..b + self.ways]
    }

    /// Looks `line` up and, if absent, fills it (an invalid way, else the victim). Either way
    /// it becomes most recently used. Returns whether it hit.
    #[inline(always)]
    fn access(&mut self, line: u64) -> bool {
        let (set, tag) = self.locate(line);
        let s = self.set(set);
        let (hits, empties) = match self.ways {
            1 => masks::<1>(s, tag),
            2 => masks::<2>(s, tag),
            4 => masks::<4>(s, tag),
            8 => masks::<8>(s, tag),
            12 => masks::<12>(s, tag),
            16 => masks::<16>(s, tag),
            _ => masks_any(s, tag),
        };
        let hit = if hits != 0 {
            hits.trailing_zeros() as usize
        } else {
            usize::MAX
        };
        let empty = if empties != 0 {
            empties.trailing_zeros() as usize
        } else {
            usize::MAX
        };
        if hit != usize::MAX {
            if !self.round_robin {
                self.touch(set, hit);
            }
            return true;
        }
        if self.round_robin {
            let w = self.repl[set] as usize;
            self.tags[self.off + set * self.ways + w] = tag;
            self.repl[set] = if w + 1 == self.ways { 0 } else { w as u32 + 1 };
            return false;
        }
        let w = if empty != usize::MAX {
            empty
        } else {
            self.victim(set)
        };
        self.tags[self.off + set * self.ways + w] = tag;
        self.touch(set, w);
        false
    }

    /// Marks way `w` of `set` most recently used.
    #[inline]
    fn touch(&mut self, set: usize, w: usize) {
        let r = &mut self.repl[set];
        if self.plru {
            *r = (*r & self.plru_and[w]) | self.plru_or[w];
        } else {
            *r |= 1 << w;
            let all = if self.ways == 32 {
                u32::MAX
            } else {
                (1u32 << self.ways) - 1
            };
            if *r & all == all {
                *r = 1 << w;
            }
        }
    }

    #[inline]
    fn victim(&self, set: usize) -> usize {
        let r = self.repl[set];
        if self.plru {
            match self.plru_victim.get(r as usize) {
                Some(&w) => w as usize,
                None => plru_walk(self.ways, r),
            }
        } else {
            // The first way whose reference bit is clear.
            (!r).trailing_zeros() as usize
        }
    }

    #[inline]
    fn prefetch(&self, line: u64) {
        let (set, _) = self.locate(line);
        super::prefetch(&self.tags[self.off + set * self.ways]);
        super::prefetch(&self.repl[set]);
    }
}

/// For tree PLRU over `ways` ways (a power of two): per way, the masks that point every node
/// on its path away from it. Node i has children 2i+1 and 2i+2; bit = 1 means "the victim is
/// on the right".
fn plru_tables(ways: usize) -> (Vec<u32>, Vec<u32>) {
    let levels = ways.trailing_zeros();
    let mut and = vec![u32::MAX; ways];
    let mut or = vec![0u32; ways];
    if !ways.is_power_of_two() {
        return (and, or);
    }
    for w in 0..ways {
        let mut node = 0usize;
        for l in (0..levels).rev() {
            let right = (w >> l) & 1 == 1;
            if right {
                and[w] &= !(1 << node);
            } else {
                or[w] |= 1 << node;
            }
            node = 2 * node + 1 + right as usize;
        }
    }
    (and, or)
}

/// The tree-PLRU victim of state `r` over `ways` ways: follow the bits from the root.
fn plru_walk(ways: usize, r: u32) -> usize {
    let levels = ways.trailing_zeros();
    let mut node = 0usize;
    let mut w = 0usize;
    for _ in 0..levels {
        let right = (r >> node) & 1 == 1;
        w = (w << 1) | right as usize;
        node = 2 * node + 1 + right as usize;
    }
    w
}

/// Bit masks of the ways of a `W`-way set holding `tag`, and of the invalid ways.
#[inline(always)]
fn masks<const W: usize>(s: &[u32], tag: u32) -> (u32, u32) {
    #[cfg(target_arch = "x86_64")]
    if W % 4 == 0 {
        return masks_sse2(s, tag);
    }
    let s: &[u32; W] = s.try_into().expect("cache set of W ways");
    let mut hit = 0u32;
    let mut empty = 0u32;
    for (i, &t) in s.iter().enumerate() {
        hit |= ((t == tag) as u32) << i;
        empty |= ((t == 0) as u32) << i;
    }
    (hit, empty)
}

/// `masks` four ways at a time with SSE2 (part of x86-64's baseline): one compare and one
/// move-mask per four ways.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks_sse2(s: &[u32], tag: u32) -> (u32, u32) {
    use std::arch::x86_64::*;
    let mut hit = 0u32;
    let mut empty = 0u32;
    // SAFETY: SSE2 is always available on x86_64; each load reads 4 u32 inside `s` (the
    // chunks are exact), unaligned loads are allowed.
    unsafe {
        let t = _mm_set1_epi32(tag as i32);
        let z = _mm_setzero_si128();
        for (i, c) in s.chunks_exact(4).enumerate() {
            let v = _mm_loadu_si128(c.as_ptr() as *const __m128i);
            let h = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, t))) as u32;
            let e = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, z))) as u32;
            hit |= h << (4 * i);
            empty |= e << (4 * i);
        }
    }
    (hit, empty)
}

#[inline]
fn masks_any(s: &[u32], tag: u32) -> (u32, u32) {
    let mut hit = 0u32;
    let mut empty = 0u32;
    for (i, &t) in s.iter().enumerate() {
        hit |= ((t == tag) as u32) << i;
        empty |= ((t == 0) as u32) << i;
    }
    (hit, empty)
}

/// Hit and miss counts of one cache level, for the report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CacheStats {
    pub name: String,
    pub hits: u64,
    pub misses: u64,
}

/// The data-cache hierarchy of one CPU.
#[derive(Clone, Debug)]
pub struct Caches {
    levels: Vec<Level>,
    names: Vec<String>,
    dram_latency: u64,
    /// Latency of a reference served at each place (levels, then DRAM).
    latency: [u64; 4],
}

impl Caches {
    pub fn new(cfg: &CachesConfig) -> Caches {
        assert!(cfg.levels.len() <= 3, "at most three cache levels");
        let levels: Vec<Level> = cfg.levels.iter().map(Level::new).collect();
        let mut latency = [cfg.dram_latency; 4];
        for (i, l) in levels.iter().enumerate() {
            latency[i] = l.latency;
        }
        Caches {
            names: cfg.levels.iter().map(|l| l.name.clone()).collect(),
            levels,
            dram_latency: cfg.dram_latency,
            latency,
        }
    }

    /// Number of cache levels; `Served` value `levels()` means DRAM.
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Latency of a reference served at `s`.
    #[inline]
    pub fn latency(&self, s: Served) -> u64 {
        self.latency[s as usize]
    }

    pub fn dram_latency(&self) -> u64 {
        self.dram_latency
    }

    /// References physical line `line`: returns where it was served (a level, or `levels()` for
    /// DRAM). The levels above that place are filled (non-inclusive, fill on miss).
    #[inline]
    pub fn access(&mut self, line: u64) -> Served {
        let n = self.levels.len();
        let mut k = 0;
        while k < n {
            // Each level is independent: looking up and filling on a miss in one pass is the
            // same as filling the levels above after the hit is found.
            if self.levels[k].access(line) {
                self.levels[k].hits += 1;
                break;
            }
            self.levels[k].misses += 1;
            k += 1;
        }
        k as Served
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

    /// Hints the host to fetch the sets `line` maps to (no effect on the model).
    #[inline]
    pub fn prefetch(&self, line: u64) {
        for l in &self.levels {
            l.prefetch(line);
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
            })
            .collect()
    }

    /// Checks that no set holds a tag twice and replacement state has no stray bits.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (l, name) in self.levels.iter().zip(&self.names) {
            for set in 0..l.sets as usize {
                let s = l.set(set);
                for (i, &t) in s.iter().enumerate() {
                    if t != 0 && s[i + 1..].contains(&t) {
                        return Err(format!("cache {name}: set {set} holds a line twice"));
                    }
                }
                let bad = if l.round_robin {
                    l.repl[set] as usize >= l.ways
                } else {
                    let bits = if l.plru { l.ways - 1 } else { l.ways };
                    bits < 32 && l.repl[set] >> bits != 0
                };
                if bad {
                    return Err(format!(
                        "cache {name}: set {set} has stray replacement bits"
                    ));
                }
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
