//! Page-walk models: a hardware radix walker with page-walk caches (x86), or a software refill
//! handler with a fixed cost (Alpha PALcode, PA-RISC). Walk memory references go through a
//! modelled cache of page-table lines, so that walk cost grows with the page table's footprint.
//!
//! The walker does not read the page table (the VM does that); it is told the size class of the
//! translation found and charges the references a walk for that size makes.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct CacheConfig {
    /// Capacity in 64-byte lines.
    pub lines: u32,
    pub ways: u32,
    /// Cycles for a reference that hits.
    pub hit_cycles: u64,
    /// Cycles for a reference that misses (goes to DRAM).
    pub miss_cycles: u64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WalkConfig {
    /// A hardware radix walker. `level_shifts` are the VA shifts of each level's entries, root
    /// first (x86-64: 39, 30, 21, 12). A page size is mapped by the level whose shift equals its
    /// own. `pwc_entries[i]` is the size of the page-walk cache for non-leaf entries of level i
    /// (0 = none). `pte_bytes`: size of one entry.
    Radix {
        level_shifts: Vec<u8>,
        pwc_entries: Vec<u32>,
        pte_bytes: u32,
        cache: CacheConfig,
    },
    /// A software refill handler: `handler_cycles` per miss, plus `pte_refs` references to the
    /// (replicated, linear) page table through the cache.
    Software {
        handler_cycles: u64,
        pte_refs: u32,
        pte_bytes: u32,
        cache: CacheConfig,
    },
}

/// A set-associative LRU cache of 64-byte page-table lines. Each set keeps its tags in
/// most-recently-used order (move to front), so a set is one contiguous run of tags and needs no
/// separate LRU stamps: the last tag is the victim.
#[derive(Clone, Debug)]
pub struct LineCache {
    sets: u64,
    set_mask: Option<u64>,
    ways: usize,
    tags: Vec<u64>,
    hit_cycles: u64,
    miss_cycles: u64,
    pub hits: u64,
    pub misses: u64,
}

impl LineCache {
    pub fn new(cfg: &CacheConfig) -> LineCache {
        let ways = cfg.ways.max(1) as usize;
        let sets = (cfg.lines as u64 / ways as u64).max(1);
        LineCache {
            sets,
            set_mask: sets.is_power_of_two().then(|| sets - 1),
            ways,
            tags: vec![0; sets as usize * ways],
            hit_cycles: cfg.hit_cycles,
            miss_cycles: cfg.miss_cycles,
            hits: 0,
            misses: 0,
        }
    }

    #[inline]
    fn set_base(&self, line: u64) -> usize {
        // Mix the key so that consecutive lines of different tables spread over the sets.
        let h = line.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let set = match self.set_mask {
            Some(m) => (h >> 20) & m,
            None => (h >> 20) % self.sets,
        };
        set as usize * self.ways
    }

    /// Hints the host CPU to fetch the set `line` maps to (no effect on the model).
    #[inline]
    pub fn prefetch(&self, line: u64) {
        crate::hw::prefetch(&self.tags[self.set_base(line)]);
    }

    /// References one line; returns its latency. `line` must not be 0.
    #[inline]
    pub fn access(&mut self, line: u64) -> u64 {
        let base = self.set_base(line);
        let set = &mut self.tags[base..base + self.ways];
        match super::find_key(set, line) {
            Some(w) => {
                mtf_insert(set, w, line);
                self.hits += 1;
                self.hit_cycles
            }
            None => {
                let last = set.len() - 1;
                mtf_insert(set, last, line);
                self.misses += 1;
                self.miss_cycles
            }
        }
    }
}

/// A tiny fully associative LRU cache of upper-level paging-structure entries (a PWC), kept in
/// most-recently-used order.
#[derive(Clone, Debug)]
struct Pwc {
    keys: Vec<u64>,
}

impl Pwc {
    fn new(entries: u32) -> Pwc {
        Pwc {
            keys: vec![0; entries as usize],
        }
    }
    /// Looks `key` up; a hit becomes most recently used.
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match super::find_key(&self.keys, key) {
            Some(i) => {
                mtf_insert(&mut self.keys, i, key);
                true
            }
            None => false,
        }
    }
    /// Inserts `key`, known to be absent, as most recently used.
    #[inline]
    fn insert_absent(&mut self, key: u64) {
        let n = self.keys.len();
        if n > 0 {
            mtf_insert(&mut self.keys, n - 1, key);
        }
    }
    fn invalidate_asid(&mut self, asid: u32) {
        for k in &mut self.keys {
            if *k != 0 && ((*k >> 44) & 0xF_FFFF) as u32 == asid & 0xF_FFFF {
                *k = 0;
            }
        }
        // Keep the valid keys in front, in order.
        let mut valid: Vec<u64> = self.keys.iter().copied().filter(|&k| k != 0).collect();
        valid.resize(self.keys.len(), 0);
        self.keys = valid;
    }
}

/// Shifts `v[0..i]` up by one (dropping `v[i]`) and puts `x` in front: move-to-front for the
/// small arrays here (at most a few dozen entries), without a call to memmove.
#[inline(always)]
fn mtf_insert(v: &mut [u64], i: usize, x: u64) {
    let mut j = i;
    while j > 0 {
        v[j] = v[j - 1];
        j -= 1;
    }
    v[0] = x;
}

/// Outcome of a walk: references made and cycles.
#[derive(Clone, Copy, Debug, Default)]
pub struct WalkCost {
    pub refs: u32,
    pub cycles: u64,
}

#[derive(Clone, Debug)]
pub struct Walker {
    cfg: WalkConfig,
    base_shift: u8,
    pwcs: Vec<Pwc>,
    pub cache: LineCache,
    /// Walks answered by a page-walk cache at some level.
    pub pwc_hits: u64,
}

#[inline]
fn line_key(asid: u32, level: usize, entry_index: u64, per_line: u64) -> u64 {
    // Unique per (address space, level, line); never 0.
    (1u64 << 63)
        | ((asid as u64 & 0xF_FFFF) << 43)
        | ((level as u64 & 0x7) << 40)
        | ((entry_index / per_line) & 0xFF_FFFF_FFFF)
}

impl Walker {
    pub fn new(cfg: &WalkConfig, base_shift: u8) -> Walker {
        let (pwcs, cache) = match cfg {
            WalkConfig::Radix {
                pwc_entries, cache, ..
            } => (
                pwc_entries.iter().map(|&n| Pwc::new(n)).collect(),
                LineCache::new(cache),
            ),
            WalkConfig::Software { cache, .. } => (Vec::new(), LineCache::new(cache)),
        };
        Walker {
            cfg: cfg.clone(),
            base_shift,
            pwcs,
            cache,
            pwc_hits: 0,
        }
    }

    /// Charges a walk of `asid`'s page table for `va`, which is (or would be) mapped by a page
    /// of byte shift `leaf_shift`. For a fault (nothing mapped), pass the base page shift.
    pub fn walk(&mut self, asid: u32, va: u64, leaf_shift: u8) -> WalkCost {
        match &self.cfg {
            WalkConfig::Software {
                handler_cycles,
                pte_refs,
                pte_bytes,
                ..
            } => {
                let per_line = 64 / *pte_bytes as u64;
                let mut cycles = *handler_cycles;
                // A linear (virtually mapped) table: one entry per base page, replicated for
                // superpages (seed 000 6.1, seed 002 4), so the entry is found by the base page.
                for r in 0..*pte_refs {
                    cycles += self.cache.access(line_key(
                        asid,
                        r as usize,
                        va >> self.base_shift,
                        per_line,
                    ));
                }
                WalkCost {
                    refs: *pte_refs,
                    cycles,
                }
            }
            WalkConfig::Radix {
                level_shifts,
                pte_bytes,
                ..
            } => {
                let per_line = 64 / *pte_bytes as u64;
                let leaf = level_shifts
                    .iter()
                    .position(|&s| s == leaf_shift)
                    .unwrap_or(level_shifts.len() - 1);
                // The deepest non-leaf level whose entry a page-walk cache holds: the walk starts
                // below it (Intel SDM vol. 3 4.10.3, paging-structure caches).
                let mut start = 0;
                for lvl in (0..leaf).rev() {
                    let key = pwc_key(asid, lvl, va >> level_shifts[lvl]);
                    if self.pwcs.get_mut(lvl).is_some_and(|p| p.lookup(key)) {
                        start = lvl + 1;
                        self.pwc_hits += 1;
                        break;
                    }
                }
                let mut cycles = 0;
                for lvl in start..=leaf {
                    cycles +=
                        self.cache
                            .access(line_key(asid, lvl, va >> level_shifts[lvl], per_line));
                    if lvl < leaf {
                        // Levels below the PWC hit missed their caches above: insert them.
                        if let Some(p) = self.pwcs.get_mut(lvl) {
                            p.insert_absent(pwc_key(asid, lvl, va >> level_shifts[lvl]));
                        }
                    }
                }
                WalkCost {
                    refs: (leaf + 1 - start) as u32,
                    cycles,
                }
            }
        }
    }

    /// Hints the host CPU to fetch what a base-page walk of `va` will touch in the line cache.
    #[inline]
    pub fn prefetch(&self, asid: u32, va: u64) {
        match &self.cfg {
            WalkConfig::Radix {
                level_shifts,
                pte_bytes,
                ..
            } => {
                let per_line = 64 / *pte_bytes as u64;
                let n = level_shifts.len();
                for lvl in n.saturating_sub(2)..n {
                    self.cache
                        .prefetch(line_key(asid, lvl, va >> level_shifts[lvl], per_line));
                }
            }
            WalkConfig::Software {
                pte_refs,
                pte_bytes,
                ..
            } => {
                if *pte_refs > 0 {
                    self.cache.prefetch(line_key(
                        asid,
                        0,
                        va >> self.base_shift,
                        64 / *pte_bytes as u64,
                    ));
                }
            }
        }
    }

    /// Drops page-walk-cache entries of `asid` (process exit).
    pub fn invalidate_asid(&mut self, asid: u32) {
        for p in &mut self.pwcs {
            p.invalidate_asid(asid);
        }
    }
}

#[inline]
fn pwc_key(asid: u32, level: usize, index: u64) -> u64 {
    ((asid as u64 & 0xF_FFFF) << 44)
        | ((level as u64 & 0x7) << 40)
        | (index & 0xFF_FFFF_FFFF)
        | (1 << 43)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn radix() -> Walker {
        Walker::new(
            &WalkConfig::Radix {
                level_shifts: vec![39, 30, 21, 12],
                pwc_entries: vec![2, 4, 32],
                pte_bytes: 8,
                cache: CacheConfig {
                    lines: 1024,
                    ways: 8,
                    hit_cycles: 10,
                    miss_cycles: 100,
                },
            },
            12,
        )
    }

    #[test]
    fn radix_walk_refs_and_pwc() {
        let mut w = radix();
        // Cold: 4 references, all miss.
        let c = w.walk(1, 0x4000_0000, 12);
        assert_eq!((c.refs, c.cycles), (4, 400));
        // Same 2MB region: the PDE cache holds the PD entry, one reference (cached line).
        let c = w.walk(1, 0x4000_1000, 12);
        assert_eq!((c.refs, c.cycles), (1, 10));
        // A 2MB leaf in another 1GB region: PML4 cached, PDPT + PD refs.
        let c = w.walk(1, 0x8000_0000, 21);
        assert_eq!(c.refs, 2);
        // Another process shares nothing.
        assert_eq!(w.walk(2, 0x4000_1000, 12).refs, 4);
    }

    #[test]
    fn software_refill_is_fixed_cost_plus_pte_load() {
        let mut w = Walker::new(
            &WalkConfig::Software {
                handler_cycles: 70,
                pte_refs: 1,
                pte_bytes: 8,
                cache: CacheConfig {
                    lines: 16,
                    ways: 4,
                    hit_cycles: 5,
                    miss_cycles: 50,
                },
            },
            13,
        );
        assert_eq!(w.walk(1, 0x2000, 13).cycles, 120);
        assert_eq!(w.walk(1, 0x3000, 13).cycles, 75); // same line of PTEs
    }
}
