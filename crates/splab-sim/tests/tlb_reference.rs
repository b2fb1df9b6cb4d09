//! Differential test of the TLB model against a reference: the implementation of
//! `crates/splab-sim/src/hw/tlb.rs` as of commit 023bfd6 (tags, stamps and data in separate
//! vectors, LRU by argmin over stamps, a hash index for arrays of more than 16 ways), copied
//! verbatim below apart from (a) sharing the public types (`Translation`, `Lookup`, `LastHit`,
//! `LevelStats`, the configs) with the crate, (b) local copies of `find_key` and `argmin`, and
//! (c) coverage counters (evictions per array, probe or scan invalidations), which change no
//! state the model exposes.
//!
//! Both are driven with long random operation sequences on every machine preset's TLB and on
//! a few odd configurations (sets that are not a power of two, 1-way, 6-way, 16-way, more than
//! 16 ways with several sets, sizes held by two arrays or by none of a level), and must agree
//! exactly after every step: the result of every lookup, `last`, `stats()`, `entries()` (same
//! order) and `check_invariants()`.

mod reference {
    #![allow(dead_code)]
    use rustc_hash::FxHashMap;
    use splab_sim::hw::tlb::{
        ArrayConfig, LastHit, LevelConfig, LevelStats, Lookup, TlbConfig, TlbReplacement,
        Translation,
    };
    use splab_sim::units::SizeClass;

    /// Position of `key` in `s` (a copy of `splab_sim::hw::find_key` at 023bfd6).
    #[inline]
    pub fn find_key(s: &[u64], key: u64) -> Option<usize> {
        s.iter().position(|&k| k == key)
    }

    /// Position of the smallest value of `s`, the first on ties (`splab_sim::hw::argmin`).
    #[inline]
    pub fn argmin(s: &[u64]) -> usize {
        let mut best = 0;
        let mut min = u64::MAX;
        for (i, &v) in s.iter().enumerate() {
            let lt = v < min;
            min = if lt { v } else { min };
            best = if lt { i } else { best };
        }
        best
    }

    const INVALID: u64 = 0;

    #[derive(Clone, Debug)]
    struct Array {
        sizes: Vec<(SizeClass, u8)>, // (class, page shift)
        sets: u64,
        /// `sets - 1` when `sets` is a power of two (every preset), so the set index is a mask.
        set_mask: Option<u64>,
        ways: usize,
        tags: Vec<u64>,
        stamps: Vec<u64>,
        data: Vec<Translation>,
        clock: u64,
        valid: u32,
        /// Valid entries per size of `sizes`: a lookup skips the sizes with none.
        valid_by_size: Vec<u32>,
        /// Index in `sizes` of each size class (255 = not held).
        size_index: [u8; 16],
        index: Option<FxHashMap<u64, u32>>,
        /// Coverage counters (test only; not part of the copied model's state).
        pub cov: Cov,
        touch_on_hit: bool,
    }

    /// What the random operations reached in one array (test only).
    #[derive(Clone, Debug, Default)]
    pub struct Cov {
        pub hits: u64,
        pub inserts: u64,
        pub evictions: u64,
        pub probe_invalidations: u64,
        pub scan_invalidations: u64,
        pub invalidated: u64,
    }

    #[inline]
    fn make_tag(asid: u32, vpn_at_size: u64, class: SizeClass) -> u64 {
        // 40 bits of page number, 4 of size class, 19 of asid, top bit set so no tag is INVALID.
        (1u64 << 63)
            | ((asid as u64 & 0x7_FFFF) << 44)
            | ((class.0 as u64 & 0xF) << 40)
            | (vpn_at_size & 0xFF_FFFF_FFFF)
    }

    #[inline]
    fn tag_asid(tag: u64) -> u32 {
        ((tag >> 44) & 0x7_FFFF) as u32
    }

    impl Array {
        fn new(cfg: &ArrayConfig, shifts: &[u8]) -> Array {
            let ways = cfg.ways.max(1) as usize;
            let sets = (cfg.entries as u64 / ways as u64).max(1);
            let n = (sets as usize) * ways;
            Array {
                sizes: cfg
                    .sizes
                    .iter()
                    .map(|&c| (SizeClass(c), shifts[c as usize]))
                    .collect(),
                sets,
                set_mask: sets.is_power_of_two().then(|| sets - 1),
                ways,
                tags: vec![INVALID; n],
                stamps: vec![0; n],
                data: vec![Translation::default(); n],
                clock: 0,
                valid: 0,
                valid_by_size: vec![0; cfg.sizes.len()],
                size_index: {
                    let mut t = [u8::MAX; 16];
                    for (i, &c) in cfg.sizes.iter().enumerate() {
                        t[c as usize & 0xF] = i as u8;
                    }
                    t
                },
                index: if ways > 16 {
                    Some(FxHashMap::default())
                } else {
                    None
                },
                cov: Cov::default(),
                touch_on_hit: cfg.replacement == TlbReplacement::Lru,
            }
        }

        #[inline]
        fn set_of(&self, vpn_at_size: u64) -> usize {
            let set = match self.set_mask {
                Some(m) => vpn_at_size & m,
                None => vpn_at_size % self.sets,
            };
            set as usize * self.ways
        }

        #[inline]
        fn find(&self, tag: u64, base: usize) -> Option<usize> {
            if let Some(ix) = &self.index {
                return ix.get(&tag).map(|&w| base + w as usize);
            }
            find_key(&self.tags[base..base + self.ways], tag).map(|w| base + w)
        }

        /// Looks `va` up at every size this array holds; on a hit makes the entry MRU.
        #[inline]
        fn lookup(&mut self, asid: u32, va: u64) -> Option<usize> {
            if self.valid == 0 {
                return None;
            }
            for i in 0..self.sizes.len() {
                if self.valid_by_size[i] == 0 {
                    continue;
                }
                let (class, shift) = self.sizes[i];
                let vpn = va >> shift;
                let base = self.set_of(vpn);
                if let Some(slot) = self.find(make_tag(asid, vpn, class), base) {
                    if self.touch_on_hit {
                        self.clock += 1;
                        self.stamps[slot] = self.clock;
                    }
                    self.cov.hits += 1;
                    return Some(slot);
                }
            }
            None
        }

        fn holds(&self, class: SizeClass) -> Option<u8> {
            self.sizes
                .iter()
                .find(|(c, _)| *c == class)
                .map(|&(_, s)| s)
        }

        /// Inserts a translation as MRU, evicting the LRU way of its set if needed. `absent`: the
        /// caller knows the translation is not in this array (it just missed here).
        fn insert(&mut self, asid: u32, va: u64, shift: u8, t: Translation, absent: bool) {
            let vpn = va >> shift;
            let base = self.set_of(vpn);
            let tag = make_tag(asid, vpn, t.size);
            let found = if absent { None } else { self.find(tag, base) };
            debug_assert!(
                !absent || self.find(tag, base).is_none(),
                "Array::insert: translation said absent is present"
            );
            let (slot, new_entry) = match found {
                Some(s) => (s, false),
                None => {
                    // An invalid way if there is one, else the least recently used.
                    let full = self.valid as usize == self.tags.len();
                    let free = if full {
                        None
                    } else {
                        find_key(&self.tags[base..base + self.ways], INVALID)
                    };
                    let victim =
                        base + free.unwrap_or_else(|| argmin(&self.stamps[base..base + self.ways]));
                    self.cov.inserts += 1;
                    if self.tags[victim] == INVALID {
                        self.valid += 1;
                    } else {
                        self.cov.evictions += 1;
                        let old = self.size_idx(self.tags[victim]);
                        self.valid_by_size[old] -= 1;
                        if let Some(ix) = &mut self.index {
                            ix.remove(&self.tags[victim]);
                        }
                    }
                    let new = self.size_idx(tag);
                    self.valid_by_size[new] += 1;
                    self.tags[victim] = tag;
                    if let Some(ix) = &mut self.index {
                        ix.insert(tag, (victim - base) as u32);
                    }
                    (victim, true)
                }
            };
            // LRU: every use stamps the entry; round robin: only its fill (FIFO order).
            if new_entry || self.touch_on_hit {
                self.clock += 1;
                self.stamps[slot] = self.clock;
            }
            self.data[slot] = t;
        }

        fn invalidate_slot(&mut self, slot: usize) {
            if self.tags[slot] != INVALID {
                if let Some(ix) = &mut self.index {
                    ix.remove(&self.tags[slot]);
                }
                let i = self.size_idx(self.tags[slot]);
                self.valid_by_size[i] -= 1;
                self.tags[slot] = INVALID;
                self.valid -= 1;
                self.cov.invalidated += 1;
            }
        }

        /// Index in `sizes` of a valid tag's size class.
        #[inline]
        fn size_idx(&self, tag: u64) -> usize {
            self.size_index[((tag >> 40) & 0xF) as usize] as usize
        }

        /// Invalidates every entry of `asid` overlapping `[start, end)`.
        fn invalidate_range(&mut self, asid: u32, start: u64, end: u64) {
            if self.valid == 0 {
                return;
            }
            // Probe page by page when the range is small, else scan the whole array.
            let mut probes = 0u64;
            for &(_, shift) in &self.sizes {
                probes += ((end - 1) >> shift) - (start >> shift) + 1;
            }
            if probes <= self.tags.len() as u64 {
                self.cov.probe_invalidations += 1;
                for i in 0..self.sizes.len() {
                    let (class, shift) = self.sizes[i];
                    for vpn in (start >> shift)..=((end - 1) >> shift) {
                        let base = self.set_of(vpn);
                        if let Some(slot) = self.find(make_tag(asid, vpn, class), base) {
                            self.invalidate_slot(slot);
                        }
                    }
                }
            } else {
                self.cov.scan_invalidations += 1;
                for slot in 0..self.tags.len() {
                    let tag = self.tags[slot];
                    if tag == INVALID || tag_asid(tag) != (asid & 0x7_FFFF) {
                        continue;
                    }
                    let class = ((tag >> 40) & 0xF) as u8;
                    let shift = self
                        .sizes
                        .iter()
                        .find(|(c, _)| c.0 == class)
                        .map(|&(_, s)| s)
                        .unwrap_or(0);
                    let page_start = (tag & 0xFF_FFFF_FFFF) << shift;
                    let page_end = page_start + (1u64 << shift);
                    if page_start < end && start < page_end {
                        self.invalidate_slot(slot);
                    }
                }
            }
        }

        fn invalidate_asid(&mut self, asid: u32) {
            for slot in 0..self.tags.len() {
                if self.tags[slot] != INVALID && tag_asid(self.tags[slot]) == (asid & 0x7_FFFF) {
                    self.invalidate_slot(slot);
                }
            }
        }
    }

    #[derive(Clone, Debug)]
    struct Level {
        arrays: Vec<Array>,
        hit_cycles: u64,
        stats: LevelStats,
    }

    impl Level {
        fn new(cfg: &LevelConfig, shifts: &[u8]) -> Level {
            Level {
                arrays: cfg.arrays.iter().map(|a| Array::new(a, shifts)).collect(),
                hit_cycles: cfg.hit_cycles,
                stats: LevelStats {
                    name: cfg.name.clone(),
                    hits: 0,
                    misses: 0,
                },
            }
        }

        #[inline]
        fn lookup(&mut self, asid: u32, va: u64) -> Option<(usize, usize)> {
            for a in 0..self.arrays.len() {
                if let Some(slot) = self.arrays[a].lookup(asid, va) {
                    return Some((a, slot));
                }
            }
            None
        }

        fn insert(&mut self, asid: u32, va: u64, t: Translation, absent: bool) {
            for a in &mut self.arrays {
                if let Some(shift) = a.holds(t.size) {
                    a.insert(asid, va, shift, t, absent);
                    return;
                }
            }
        }
    }

    /// The whole TLB hierarchy of one CPU.
    #[derive(Clone, Debug)]
    pub struct Tlb {
        l1d: Level,
        l1i: Option<Level>,
        lower: Vec<Level>,
        shifts: Vec<u8>,
        pub last: LastHit,
    }

    impl Tlb {
        /// `shifts[i]` is the byte shift of size class `i`.
        pub fn new(cfg: &TlbConfig, shifts: &[u8]) -> Tlb {
            Tlb {
                l1d: Level::new(&cfg.l1d, shifts),
                l1i: cfg.l1i.as_ref().map(|l| Level::new(l, shifts)),
                lower: cfg.lower.iter().map(|l| Level::new(l, shifts)).collect(),
                shifts: shifts.to_vec(),
                last: LastHit::default(),
            }
        }

        fn first_mut(&mut self, ifetch: bool) -> &mut Level {
            if ifetch {
                if let Some(l) = self.l1i.as_mut() {
                    return l;
                }
            }
            &mut self.l1d
        }

        /// Counts `n` L1 hits on the entry recorded in `last` (the fast path).
        #[inline]
        pub fn count_last_hits(&mut self, n: u64) {
            self.l1d.stats.hits += n;
        }

        /// Looks up `va`; on a hit at a lower level the translation is filled into the levels above.
        pub fn lookup(&mut self, asid: u32, va: u64, ifetch: bool) -> Lookup {
            let mut cycles = 0;
            let first = self.first_mut(ifetch);
            if let Some((a, slot)) = first.lookup(asid, va) {
                first.stats.hits += 1;
                let t = first.arrays[a].data[slot];
                let hit_cycles = first.hit_cycles;
                if !ifetch {
                    self.set_last(asid, va, t);
                }
                return Lookup::Hit {
                    level: 0,
                    t,
                    cycles: hit_cycles,
                };
            }
            first.stats.misses += 1;
            for i in 0..self.lower.len() {
                let lvl = &mut self.lower[i];
                if let Some((a, slot)) = lvl.lookup(asid, va) {
                    lvl.stats.hits += 1;
                    let t = lvl.arrays[a].data[slot];
                    cycles += lvl.hit_cycles;
                    for j in 0..i {
                        self.lower[j].insert(asid, va, t, true);
                    }
                    self.first_mut(ifetch).insert(asid, va, t, true);
                    if !ifetch {
                        self.set_last(asid, va, t);
                    }
                    return Lookup::Hit {
                        level: i + 1,
                        t,
                        cycles,
                    };
                }
                lvl.stats.misses += 1;
            }
            // A miss pays the last level's lookup (the model's rule since 2026-11-27).
            cycles = match self.lower.last() {
                Some(l) => l.hit_cycles,
                None => self.first_mut(ifetch).hit_cycles,
            };
            Lookup::Miss { cycles }
        }

        #[inline]
        fn set_last(&mut self, asid: u32, va: u64, t: Translation) {
            let shift = self.shifts[t.size.0 as usize];
            let start = va >> shift << shift;
            self.last = LastHit {
                asid,
                start,
                end: start + (1u64 << shift),
                write_ok: t.writable && t.dirty,
            };
        }

        /// Fills a walked translation into every level that holds its size. Precondition: the
        /// lookup of `va` just missed every level (so the translation is in none).
        pub fn fill(&mut self, asid: u32, va: u64, t: Translation, ifetch: bool) {
            for l in &mut self.lower {
                l.insert(asid, va, t, true);
            }
            self.first_mut(ifetch).insert(asid, va, t, true);
            if !ifetch {
                self.set_last(asid, va, t);
            }
        }

        /// Marks the (already present) entry for `va` dirty in every level, after an A/D assist.
        pub fn mark_dirty(&mut self, asid: u32, va: u64, t: Translation) {
            let dirty = Translation { dirty: true, ..t };
            for l in std::iter::once(&mut self.l1d)
                .chain(self.l1i.iter_mut())
                .chain(self.lower.iter_mut())
            {
                for a in &mut l.arrays {
                    if let Some(shift) = a.holds(t.size) {
                        let vpn = va >> shift;
                        let base = a.set_of(vpn);
                        if let Some(slot) = a.find(make_tag(asid, vpn, t.size), base) {
                            a.data[slot] = dirty;
                        }
                    }
                }
            }
            self.set_last(asid, va, dirty);
        }

        /// Invalidates every entry of `asid` that overlaps `[start, end)` (a shootdown / invlpg).
        pub fn invalidate_range(&mut self, asid: u32, start: u64, end: u64) {
            self.last = LastHit::default();
            if start >= end {
                return;
            }
            for l in std::iter::once(&mut self.l1d)
                .chain(self.l1i.iter_mut())
                .chain(self.lower.iter_mut())
            {
                for a in &mut l.arrays {
                    a.invalidate_range(asid, start, end);
                }
            }
        }

        /// Invalidates every entry of `asid` (process exit / exec).
        pub fn invalidate_asid(&mut self, asid: u32) {
            self.last = LastHit::default();
            for l in std::iter::once(&mut self.l1d)
                .chain(self.l1i.iter_mut())
                .chain(self.lower.iter_mut())
            {
                for a in &mut l.arrays {
                    a.invalidate_asid(asid);
                }
            }
        }

        /// Every valid entry: (asid, virtual start address, translation), for invariant checks.
        pub fn entries(&self) -> Vec<(u32, u64, Translation)> {
            let mut out = Vec::new();
            for l in std::iter::once(&self.l1d)
                .chain(self.l1i.iter())
                .chain(self.lower.iter())
            {
                for a in &l.arrays {
                    for slot in 0..a.tags.len() {
                        let tag = a.tags[slot];
                        if tag != INVALID {
                            let t = a.data[slot];
                            let shift = self.shifts[t.size.0 as usize];
                            out.push((tag_asid(tag), (tag & 0xFF_FFFF_FFFF) << shift, t));
                        }
                    }
                }
            }
            out
        }

        /// Checks the structure itself: valid counts, index consistency, tags in the right set.
        pub fn check_invariants(&self) -> Result<(), String> {
            for l in std::iter::once(&self.l1d)
                .chain(self.l1i.iter())
                .chain(self.lower.iter())
            {
                for (ai, a) in l.arrays.iter().enumerate() {
                    let valid = a.tags.iter().filter(|&&t| t != INVALID).count() as u32;
                    let by_size: u32 = a.valid_by_size.iter().sum();
                    if by_size != valid {
                        return Err(format!(
                            "tlb {} array {ai}: per-size counts sum to {by_size}, {valid} valid",
                            l.stats.name
                        ));
                    }
                    if valid != a.valid {
                        return Err(format!(
                            "tlb {} array {ai}: valid count {} but {} valid tags",
                            l.stats.name, a.valid, valid
                        ));
                    }
                    if let Some(ix) = &a.index {
                        if ix.len() as u32 != valid {
                            return Err(format!(
                                "tlb {} array {ai}: index has {} entries, {} valid",
                                l.stats.name,
                                ix.len(),
                                valid
                            ));
                        }
                    }
                    for slot in 0..a.tags.len() {
                        let tag = a.tags[slot];
                        if tag == INVALID {
                            continue;
                        }
                        let class = ((tag >> 40) & 0xF) as u8;
                        if a.data[slot].size.0 != class || a.holds(SizeClass(class)).is_none() {
                            return Err(format!("tlb {} array {ai}: entry of size class {class} in an array that does not hold it", l.stats.name));
                        }
                        if a.set_of(tag & 0xFF_FFFF_FFFF) != slot / a.ways * a.ways {
                            return Err(format!(
                                "tlb {} array {ai}: entry in the wrong set",
                                l.stats.name
                            ));
                        }
                    }
                }
            }
            Ok(())
        }

        /// Coverage counters of every array: (level name, array index, counters).
        pub fn coverage(&self) -> Vec<(String, usize, Cov)> {
            std::iter::once(&self.l1d)
                .chain(self.l1i.iter())
                .chain(self.lower.iter())
                .flat_map(|l| {
                    l.arrays
                        .iter()
                        .enumerate()
                        .map(|(i, a)| (l.stats.name.clone(), i, a.cov.clone()))
                })
                .collect()
        }

        /// Per-level statistics in report order (L1D, L1I if any, lower levels).
        pub fn stats(&self) -> Vec<LevelStats> {
            std::iter::once(&self.l1d)
                .chain(self.l1i.iter())
                .chain(self.lower.iter())
                .map(|l| l.stats.clone())
                .collect()
        }
    }
}

use std::collections::HashMap;

use splab_sim::hw::tlb::{
    ArrayConfig, LastHit, LevelConfig, Lookup, Tlb, TlbConfig, TlbReplacement, Translation,
};
use splab_sim::hw::Machine;
use splab_sim::rng::Rng;
use splab_sim::units::{Pfn, SizeClass};

fn same_lookup(a: &Lookup, b: &Lookup) -> bool {
    match (a, b) {
        (
            Lookup::Hit {
                level: l1,
                t: t1,
                cycles: c1,
            },
            Lookup::Hit {
                level: l2,
                t: t2,
                cycles: c2,
            },
        ) => l1 == l2 && t1 == t2 && c1 == c2,
        (Lookup::Miss { cycles: c1 }, Lookup::Miss { cycles: c2 }) => c1 == c2,
        _ => false,
    }
}

fn same_last(a: &LastHit, b: &LastHit) -> bool {
    (a.asid, a.start, a.end, a.write_ok) == (b.asid, b.start, b.end, b.write_ok)
}

/// What a run reached, beyond the per-array counters of the reference.
#[derive(Debug, Default)]
struct Reached {
    lookups: u64,
    hits_by_level: Vec<u64>,
    superpage_hits: u64,
    fills: u64,
    mark_dirty: u64,
    invalidate_range: u64,
    invalidate_asid: u64,
}

/// The random operation generator: a skewed working set per address space whose size changes
/// in phases, page sizes per region that change now and then (with or without the shootdown a
/// VM would do), several address spaces (one aliasing asid 1 in the 19 tag bits).
struct Gen {
    rng: Rng,
    shifts: Vec<u8>,
    /// Size class per (asid, region of the second page size).
    class_of: HashMap<(u32, u64), u8>,
    recent: Vec<(u32, u64)>,
    ws: u64,
    skew: u32,
    phase_left: u64,
    generation: u64,
}

const ASIDS: [u32; 9] = [1, 2, 3, 4, 5, 9, 12, 77, 1 + (1 << 19)];

impl Gen {
    fn new(seed: u64, shifts: &[u8]) -> Gen {
        Gen {
            rng: Rng::new(seed),
            shifts: shifts.to_vec(),
            class_of: HashMap::new(),
            recent: Vec::new(),
            ws: 64,
            skew: 2,
            phase_left: 0,
            generation: 0,
        }
    }

    fn chance(&mut self, per_10k: u64) -> bool {
        self.rng.below(10_000) < per_10k
    }

    fn asid(&mut self) -> u32 {
        let r = self.rng.below(100);
        match r {
            0..=54 => 1,
            55..=74 => 2,
            75..=84 => 3,
            85..=91 => 4,
            _ => ASIDS[4 + self.rng.below(5) as usize],
        }
    }

    /// A virtual address of `asid`: mostly from the skewed working set, sometimes anywhere.
    fn va(&mut self, asid: u32, ifetch: bool) -> u64 {
        if self.phase_left == 0 {
            const WS: [u64; 8] = [4, 24, 100, 700, 2_500, 12_000, 60_000, 400_000];
            self.ws = WS[self.rng.below(WS.len() as u64) as usize];
            self.skew = 1 + self.rng.below(4) as u32;
            self.phase_left = 300 + self.rng.below(6_000);
        }
        self.phase_left -= 1;
        let a = (asid & 0x7_FFFF) as u64;
        let base = ((a % 7) << 44) + (1 << 40) + if ifetch { 1 << 43 } else { 0 };
        let bs = self.shifts[0];
        if self.chance(300) {
            return base + (self.rng.below(1 << 38) & !7);
        }
        let ws = if ifetch { self.ws / 8 + 4 } else { self.ws };
        let u = (self.rng.below(1 << 30) as f64) / (1u64 << 30) as f64;
        let p = (u.powi(self.skew as i32) * ws as f64) as u64;
        base + (p << bs) + (self.rng.below(1 << bs) & !7)
    }

    fn class(&mut self, asid: u32, va: u64) -> u8 {
        let n = self.shifts.len() as u64;
        let key = (asid & 0x7_FFFF, va >> self.shifts[1.min(n as usize - 1)]);
        if let Some(&c) = self.class_of.get(&key) {
            return c;
        }
        let r = self.rng.below(100);
        let c = if r < 65 || n == 1 {
            0
        } else if r < 88 {
            1
        } else {
            (1 + self.rng.below(n - 1)) as u8
        };
        self.class_of.insert(key, c);
        c
    }

    fn translation(&mut self, asid: u32, va: u64, class: u8) -> Translation {
        let vpn = va >> self.shifts[class as usize];
        let mut h = (asid as u64 ^ vpn.rotate_left(17) ^ self.generation.rotate_left(40))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^= h >> 29;
        let pfn = if h.is_multiple_of(97) {
            u64::MAX - (h & 0xFFFF) // frames beyond any packing of a real machine's
        } else {
            h & 0xFF_FFFF_FFFF
        };
        Translation {
            pfn: Pfn(pfn),
            size: SizeClass(class),
            writable: h >> 60 != 0,
            dirty: (h >> 50) & 1 == 1,
        }
    }

    fn range(&mut self, large: bool) -> (u32, u64, u64) {
        let (asid, va) = if !self.recent.is_empty() && self.chance(8_000) {
            self.recent[self.rng.below(self.recent.len() as u64) as usize]
        } else {
            let a = self.asid();
            {
                let ifetch = self.chance(1_500);
                (a, self.va(a, ifetch))
            }
        };
        let len = if large {
            const L: [u64; 5] = [1 << 26, 1 << 30, 3 << 30, 1 << 40, 1 << 46];
            L[self.rng.below(5) as usize]
        } else {
            const L: [u64; 8] = [
                0,
                1,
                4096,
                8192,
                3 << 12,
                1 << 16,
                1 << 21,
                (1 << 21) + 4096,
            ];
            // Mostly a few pages (invlpg), sometimes a 2MB region.
            let n = if self.chance(2_000) { 8 } else { 6 };
            L[self.rng.below(n) as usize]
        };
        // The start: the address itself, a page boundary, or one byte either side of one (the
        // edges of the overlap test); the end likewise.
        let shift = self.shifts[self.rng.below(self.shifts.len() as u64) as usize];
        let aligned = va & !((1u64 << shift) - 1);
        let start = match self.rng.below(6) {
            0 | 1 => va,
            2 | 3 => aligned,
            4 => aligned.saturating_sub(1),
            _ => aligned + 1,
        };
        let end = match self.rng.below(4) {
            0 => {
                let e = start.saturating_add(len);
                (e & !((1u64 << shift) - 1)).max(start)
            }
            1 => start.saturating_add(len).saturating_sub(1),
            _ => start.saturating_add(len),
        };
        (asid, start, end)
    }
}

fn check_same(step: u64, what: &str, new: &Tlb, old: &reference::Tlb, check_entries: bool) {
    assert!(
        same_last(&new.last, &old.last),
        "step {step} ({what}): last differs: {:?} vs reference {:?}",
        new.last,
        old.last
    );
    let (sn, so) = (new.stats(), old.stats());
    assert_eq!(sn.len(), so.len());
    for (a, b) in sn.iter().zip(&so) {
        assert_eq!(
            (&a.name, a.hits, a.misses),
            (&b.name, b.hits, b.misses),
            "step {step} ({what}): stats differ"
        );
    }
    if check_entries {
        let (en, eo) = (new.entries(), old.entries());
        if en != eo {
            let mut sn = en.clone();
            let mut so = eo.clone();
            let key = |e: &(u32, u64, Translation)| {
                (e.0, e.1, e.2.pfn, e.2.size, e.2.writable, e.2.dirty)
            };
            sn.sort_by_key(key);
            so.sort_by_key(key);
            if sn == so {
                panic!("step {step} ({what}): entries() hold the same set in another order");
            }
            let only_new: Vec<_> = sn.iter().filter(|e| !so.contains(e)).collect();
            let only_old: Vec<_> = so.iter().filter(|e| !sn.contains(e)).collect();
            panic!(
                "step {step} ({what}): entries differ: only in new {only_new:x?}, only in reference {only_old:x?}"
            );
        }
        // The structure's own invariants (hints, LRU orders, indexes): every 8 steps, which
        // halves the test's time; a broken structure shows in the comparisons anyway.
        if step.is_multiple_of(8) {
            new.check_invariants()
                .unwrap_or_else(|e| panic!("step {step} ({what}): {e}"));
        }
    }
}

/// Per array: (level name, array index, what it reached).
type Coverage = Vec<(String, usize, reference::Cov)>;

/// Drives the model and the reference with `steps` random operations; returns what was reached.
fn drive(cfg: &TlbConfig, shifts: &[u8], steps: u64, seed: u64) -> (Reached, Coverage) {
    let mut new = Tlb::new(cfg, shifts);
    let mut old = reference::Tlb::new(cfg, shifts);
    let mut g = Gen::new(seed, shifts);
    let mut r = Reached {
        // Lookup levels: 0 = the first level (L1D, or L1I for fetches), then the lower levels.
        hits_by_level: vec![0; 1 + cfg.lower.len()],
        ..Reached::default()
    };
    let full_every = std::env::var("TLB_DIFF_FULL_EVERY")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1u64);
    for step in 0..steps {
        let check_entries = step % full_every == 0;
        let op = g.rng.below(10_000);
        if op < 9_500 {
            // A lookup, then what the access path would do with its result.
            let asid = g.asid();
            let ifetch = g.chance(1_200);
            let va = g.va(asid, ifetch);
            // A host hint: must change nothing (checked by the comparisons below).
            new.prefetch(asid, va);
            let ln = new.lookup(asid, va, ifetch);
            let lo = old.lookup(asid, va, ifetch);
            assert!(
                same_lookup(&ln, &lo),
                "step {step}: lookup({asid}, {va:#x}, {ifetch}) = {ln:?}, reference {lo:?}"
            );
            r.lookups += 1;
            check_same(step, "lookup", &new, &old, check_entries);
            g.recent.push((asid, va));
            if g.recent.len() > 64 {
                g.recent.swap_remove(g.rng.below(64) as usize);
            }
            match lo {
                Lookup::Hit { level, t, .. } => {
                    r.hits_by_level[level] += 1;
                    if t.size.0 > 0 {
                        r.superpage_hits += 1;
                    }
                    let write = !ifetch && g.chance(5_000);
                    if write && !t.writable {
                        new.invalidate_range(asid, va, va + 1);
                        old.invalidate_range(asid, va, va + 1);
                        r.invalidate_range += 1;
                        check_same(step, "write-protect shootdown", &new, &old, check_entries);
                    } else if write && !t.dirty {
                        // Sometimes with another frame or permission than the entry's: the
                        // entry takes the caller's translation, as before.
                        let t2 = if g.chance(500) {
                            Translation {
                                pfn: Pfn(t.pfn.0 ^ 0x55),
                                writable: !t.writable,
                                ..t
                            }
                        } else {
                            t
                        };
                        new.mark_dirty(asid, va, t2);
                        old.mark_dirty(asid, va, t2);
                        r.mark_dirty += 1;
                        check_same(step, "mark_dirty", &new, &old, check_entries);
                    }
                }
                Lookup::Miss { .. } => {
                    if g.chance(9_600) {
                        let c = g.class(asid, va);
                        let t = g.translation(asid, va, c);
                        new.fill(asid, va, t, ifetch);
                        old.fill(asid, va, t, ifetch);
                        r.fills += 1;
                        check_same(step, "fill", &new, &old, check_entries);
                    }
                }
            }
        } else if op < 9_700 {
            let (asid, s, e) = g.range(false);
            new.invalidate_range(asid, s, e);
            old.invalidate_range(asid, s, e);
            r.invalidate_range += 1;
            check_same(step, "invalidate_range (small)", &new, &old, check_entries);
        } else if op < 9_705 {
            let (asid, s, e) = g.range(true);
            new.invalidate_range(asid, s, e);
            old.invalidate_range(asid, s, e);
            r.invalidate_range += 1;
            check_same(step, "invalidate_range (large)", &new, &old, check_entries);
        } else if op < 9_707 {
            let asid = ASIDS[g.rng.below(ASIDS.len() as u64) as usize];
            new.invalidate_asid(asid);
            old.invalidate_asid(asid);
            r.invalidate_asid += 1;
            check_same(step, "invalidate_asid", &new, &old, check_entries);
        } else if op < 9_825 {
            let n = g.rng.below(100);
            new.count_last_hits(n);
            old.count_last_hits(n);
            check_same(step, "count_last_hits", &new, &old, check_entries);
        } else if op < 9_850 {
            // mark_dirty of an address that may hold no entry, or one of another size.
            let asid = g.asid();
            let va = g.va(asid, false);
            let c = g.rng.below(shifts.len() as u64) as u8;
            let t = g.translation(asid, va, c);
            new.mark_dirty(asid, va, t);
            old.mark_dirty(asid, va, t);
            r.mark_dirty += 1;
            check_same(step, "mark_dirty (any)", &new, &old, check_entries);
        } else {
            // The page size of a recently used region changes (a promotion or demotion),
            // usually with the shootdown the VM does, sometimes without: then entries of two
            // sizes may cover one address.
            if let Some(&(asid, va)) = g.recent.last() {
                let n = shifts.len();
                let key = (asid & 0x7_FFFF, va >> shifts[1.min(n - 1)]);
                let c = g.rng.below(n as u64) as u8;
                let was = g.class_of.insert(key, c).unwrap_or(0);
                g.generation += 1;
                if g.chance(7_000) {
                    let top = shifts[c.max(was) as usize];
                    let s = va >> top << top;
                    new.invalidate_range(asid, s, s + (1 << top));
                    old.invalidate_range(asid, s, s + (1 << top));
                    r.invalidate_range += 1;
                    check_same(step, "re-map shootdown", &new, &old, check_entries);
                }
            }
        }
    }
    check_same(steps, "end", &new, &old, true);
    new.check_invariants().unwrap();
    old.check_invariants().unwrap();
    (r, old.coverage())
}

fn steps() -> u64 {
    std::env::var("TLB_DIFF_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150_000)
}

/// Runs `drive` on a few seeds and asserts that every array saw hits, insertions, evictions and
/// invalidations (both the probing and the scanning path of the range invalidation somewhere),
/// and that lower levels and superpage entries hit.
fn differential(name: &str, cfg: &TlbConfig, shifts: &[u8]) {
    let mut total: Option<(Reached, Coverage)> = None;
    for seed in 0..3u64 {
        let (r, cov) = drive(cfg, shifts, steps(), 0x7EB0 + seed);
        total = Some(match total {
            None => (r, cov),
            Some((mut t, mut tc)) => {
                t.lookups += r.lookups;
                for (a, b) in t.hits_by_level.iter_mut().zip(&r.hits_by_level) {
                    *a += b;
                }
                t.superpage_hits += r.superpage_hits;
                t.fills += r.fills;
                t.mark_dirty += r.mark_dirty;
                t.invalidate_range += r.invalidate_range;
                t.invalidate_asid += r.invalidate_asid;
                for (a, b) in tc.iter_mut().zip(&cov) {
                    a.2.hits += b.2.hits;
                    a.2.inserts += b.2.inserts;
                    a.2.evictions += b.2.evictions;
                    a.2.probe_invalidations += b.2.probe_invalidations;
                    a.2.scan_invalidations += b.2.scan_invalidations;
                    a.2.invalidated += b.2.invalidated;
                }
                (t, tc)
            }
        });
    }
    let (r, cov) = total.unwrap();
    eprintln!("{name}: {r:?}");
    for (level, i, c) in &cov {
        eprintln!("  {level} array {i}: {c:?}");
        assert!(
            c.hits > 0 && c.inserts > 0 && c.evictions > 0 && c.invalidated > 0,
            "{name}: {level} array {i} not fully exercised: {c:?}"
        );
    }
    assert!(
        cov.iter().any(|c| c.2.probe_invalidations > 0),
        "{name}: no probing invalidation"
    );
    assert!(
        cov.iter().any(|c| c.2.scan_invalidations > 0),
        "{name}: no scanning invalidation"
    );
    for (l, &h) in r.hits_by_level.iter().enumerate() {
        // Level 0 is the first level (L1D or L1I); the rest are lower levels.
        if l < cfg.lower.len() + 1 {
            assert!(h > 0, "{name}: no hit at level {l}: {r:?}");
        }
    }
    assert!(
        r.superpage_hits > 0 && r.mark_dirty > 0 && r.invalidate_asid > 0,
        "{name}: {r:?}"
    );
}

#[test]
fn alpha21264_matches_reference() {
    let m = Machine::from_spec("alpha21264").unwrap();
    differential("alpha21264", &m.tlb, &m.page_shifts);
}

#[test]
fn pa8000_matches_reference() {
    let m = Machine::from_spec("pa8000").unwrap();
    differential("pa8000", &m.tlb, &m.page_shifts);
}

#[test]
fn core2_matches_reference() {
    let m = Machine::from_spec("core2").unwrap();
    differential("core2", &m.tlb, &m.page_shifts);
}

#[test]
fn skylake_matches_reference() {
    let m = Machine::from_spec("skylake").unwrap();
    differential("skylake", &m.tlb, &m.page_shifts);
}

fn arr(sizes: &[u8], entries: u32, ways: u32) -> ArrayConfig {
    ArrayConfig {
        sizes: sizes.to_vec(),
        entries,
        ways,
        replacement: TlbReplacement::Lru,
    }
}

/// Odd shapes no preset has: sets that are not a power of two (6, 25), 1-way, 3-way, 6-way,
/// 16-way, 32 ways in 2 sets (the hashed path with more than one set), a size held by two
/// arrays of a level (inserts go to the first), a size held by no array of a level, and two
/// lower levels. Round robin (FIFO) replacement on a set-associative array and on the hashed
/// path (32 ways in 2 sets).
#[test]
fn odd_shapes_match_reference() {
    let rr = |a: ArrayConfig| ArrayConfig {
        replacement: TlbReplacement::RoundRobin,
        ..a
    };
    let cfg = TlbConfig {
        l1d: LevelConfig {
            name: "L1D".into(),
            arrays: vec![
                rr(arr(&[0, 1], 24, 4)),
                arr(&[1, 2], 20, 20),
                arr(&[3], 6, 3),
            ],
            hit_cycles: 1,
        },
        l1i: Some(LevelConfig {
            name: "L1I".into(),
            arrays: vec![arr(&[0], 6, 1), arr(&[1, 2, 3], 4, 4)],
            hit_cycles: 0,
        }),
        lower: vec![
            LevelConfig {
                name: "L2".into(),
                arrays: vec![arr(&[0, 1, 2], 96, 6), rr(arr(&[0, 3], 64, 32))],
                hit_cycles: 5,
            },
            LevelConfig {
                name: "L3".into(),
                arrays: vec![arr(&[0, 1], 400, 16)],
                hit_cycles: 20,
            },
        ],
    };
    differential("odd", &cfg, &[12, 16, 21, 26]);
}
