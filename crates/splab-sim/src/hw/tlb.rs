//! TLB hierarchy: levels of set-associative (or fully associative) LRU arrays, each holding one or
//! several page sizes. Knows nothing of policies; the page table is the VM's.
//!
//! An entry is keyed by (asid, virtual page number at its size, size class) and carries the
//! frame it translates to and two permission bits: writable and dirty. A write that hits a clean
//! entry has the dirty bit set by the walker (an "A/D assist" on x86) and the entry updated.
//!
//! LRU is kept with per-way stamps. Arrays with more than 16 ways (the Alpha's 128-entry fully
//! associative TLB) also keep a hash index from tag to way, so a lookup is not a 128-way scan.

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::units::{Pfn, SizeClass};

/// One array of a TLB level.
#[derive(Clone, Debug, Serialize)]
pub struct ArrayConfig {
    /// Size classes this array holds (indices into the machine's page sizes).
    pub sizes: Vec<u8>,
    pub entries: u32,
    /// Ways per set; `ways == entries` is fully associative.
    pub ways: u32,
}

/// One level of the hierarchy (e.g. L1 DTLB, or the shared STLB).
#[derive(Clone, Debug, Serialize)]
pub struct LevelConfig {
    pub name: String,
    pub arrays: Vec<ArrayConfig>,
    /// Extra cycles charged to an access that hits at this level.
    pub hit_cycles: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TlbConfig {
    /// First level for data accesses.
    pub l1d: LevelConfig,
    /// First level for instruction fetches; `None` = ifetch uses `l1d`.
    pub l1i: Option<LevelConfig>,
    /// Levels shared by data and instructions, nearest first.
    pub lower: Vec<LevelConfig>,
}

/// What a TLB entry translates to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Translation {
    /// The frame of the first base page of the (super)page.
    pub pfn: Pfn,
    pub size: SizeClass,
    pub writable: bool,
    pub dirty: bool,
}

/// Hit/miss counters of one level, in report order.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LevelStats {
    pub name: String,
    pub hits: u64,
    pub misses: u64,
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
        super::find_key(&self.tags[base..base + self.ways], tag).map(|w| base + w)
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
                self.clock += 1;
                self.stamps[slot] = self.clock;
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
        let slot = match found {
            Some(s) => s,
            None => {
                // An invalid way if there is one, else the least recently used.
                let full = self.valid as usize == self.tags.len();
                let free = if full {
                    None
                } else {
                    super::find_key(&self.tags[base..base + self.ways], INVALID)
                };
                let victim = base
                    + free.unwrap_or_else(|| super::argmin(&self.stamps[base..base + self.ways]));
                if self.tags[victim] == INVALID {
                    self.valid += 1;
                } else {
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
                victim
            }
        };
        self.clock += 1;
        self.stamps[slot] = self.clock;
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

/// Result of a TLB lookup.
#[derive(Clone, Copy, Debug)]
pub enum Lookup {
    /// Hit at level `level` (0 = first); cycles to charge.
    Hit {
        level: usize,
        t: Translation,
        cycles: u64,
    },
    /// Missed every level; the caller walks and then calls `fill`. Cycles of the misses so far.
    Miss { cycles: u64 },
}

/// The range of virtual addresses, with its permissions, that the last data lookup hit or
/// filled. An access inside it is an L1 hit on the MRU entry, which changes no LRU state: the
/// engine counts it without a lookup. Any invalidation clears it.
#[derive(Clone, Copy, Debug, Default)]
pub struct LastHit {
    pub asid: u32,
    pub start: u64,
    pub end: u64,
    /// Writes may go through without a fault or an A/D assist.
    pub write_ok: bool,
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

    /// Per-level statistics in report order (L1D, L1I if any, lower levels).
    pub fn stats(&self) -> Vec<LevelStats> {
        std::iter::once(&self.l1d)
            .chain(self.l1i.iter())
            .chain(self.lower.iter())
            .map(|l| l.stats.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(l1: (u32, u32), l2: Option<(u32, u32)>) -> TlbConfig {
        TlbConfig {
            l1d: LevelConfig {
                name: "L1".into(),
                arrays: vec![ArrayConfig {
                    sizes: vec![0, 1],
                    entries: l1.0,
                    ways: l1.1,
                }],
                hit_cycles: 0,
            },
            l1i: None,
            lower: l2
                .map(|(e, w)| {
                    vec![LevelConfig {
                        name: "L2".into(),
                        arrays: vec![ArrayConfig {
                            sizes: vec![0, 1],
                            entries: e,
                            ways: w,
                        }],
                        hit_cycles: 7,
                    }]
                })
                .unwrap_or_default(),
        }
    }

    fn t(pfn: u64, size: u8) -> Translation {
        Translation {
            pfn: Pfn(pfn),
            size: SizeClass(size),
            writable: true,
            dirty: true,
        }
    }

    #[test]
    fn lru_in_fully_associative_array() {
        let mut tlb = Tlb::new(&cfg((4, 4), None), &[12, 21]);
        for p in 0..4u64 {
            assert!(matches!(tlb.lookup(1, p << 12, false), Lookup::Miss { .. }));
            tlb.fill(1, p << 12, t(p, 0), false);
        }
        // Touch page 0 so page 1 becomes LRU, then insert page 4: page 1 is evicted.
        assert!(matches!(
            tlb.lookup(1, 0, false),
            Lookup::Hit { level: 0, .. }
        ));
        tlb.fill(1, 4 << 12, t(4, 0), false);
        assert!(matches!(tlb.lookup(1, 1 << 12, false), Lookup::Miss { .. }));
        assert!(matches!(tlb.lookup(1, 2 << 12, false), Lookup::Hit { .. }));
        tlb.check_invariants().unwrap();
    }

    #[test]
    fn superpage_entry_covers_its_range_and_asids_are_separate() {
        let mut tlb = Tlb::new(&cfg((8, 8), Some((64, 4))), &[12, 21]);
        tlb.fill(1, 0x20_0000, t(512, 1), false);
        assert!(matches!(
            tlb.lookup(1, 0x3F_F000, false),
            Lookup::Hit { level: 0, .. }
        ));
        assert!(matches!(
            tlb.lookup(2, 0x20_0000, false),
            Lookup::Miss { .. }
        ));
        tlb.invalidate_range(1, 0x30_0000, 0x30_1000);
        assert!(matches!(
            tlb.lookup(1, 0x20_0000, false),
            Lookup::Miss { .. }
        ));
        tlb.check_invariants().unwrap();
    }

    #[test]
    fn lower_level_hit_refills_first_level() {
        let mut tlb = Tlb::new(&cfg((1, 1), Some((64, 4))), &[12, 21]);
        tlb.fill(1, 0x1000, t(1, 0), false);
        tlb.fill(1, 0x2000, t(2, 0), false); // evicts 0x1000 from the 1-entry L1
        match tlb.lookup(1, 0x1000, false) {
            Lookup::Hit {
                level: 1,
                cycles: 7,
                ..
            } => {}
            other => panic!("expected an L2 hit, got {other:?}"),
        }
        assert!(matches!(
            tlb.lookup(1, 0x1000, false),
            Lookup::Hit { level: 0, .. }
        ));
        let s = tlb.stats();
        assert_eq!(
            (s[0].hits, s[0].misses, s[1].hits, s[1].misses),
            (1, 1, 1, 0)
        );
    }

    #[test]
    fn big_fully_associative_array_uses_index() {
        let mut tlb = Tlb::new(&cfg((128, 128), None), &[13, 16]);
        for p in 0..300u64 {
            tlb.fill(1, p << 13, t(p, 0), false);
        }
        tlb.check_invariants().unwrap();
        // The last 128 are present, the earlier ones evicted in LRU order.
        assert!(matches!(
            tlb.lookup(1, 299 << 13, false),
            Lookup::Hit { .. }
        ));
        assert!(matches!(
            tlb.lookup(1, 172 << 13, false),
            Lookup::Hit { .. }
        ));
        assert!(matches!(
            tlb.lookup(1, 171 << 13, false),
            Lookup::Miss { .. }
        ));
        tlb.invalidate_asid(1);
        assert_eq!(tlb.entries().len(), 0);
        tlb.check_invariants().unwrap();
    }
}
