//! Page-walk models: a hardware radix walker with page-walk caches (x86), or a software refill
//! handler (Alpha PALcode, PA-RISC). Walk references are loads of page-table entries at their
//! physical addresses, served by the data caches (`Caches`) like any load, so that page-table
//! lines and data lines compete for the same sets.
//!
//! The walker does not read the page table (the VM does that). It is told the size of the
//! translation found and the frames of the page-table pages on the path (`PtPath`), and charges
//! the references a walk for that size makes.

use serde::Serialize;

use super::cache::{Caches, LINE_SHIFT};
use super::host_frames::{HostFrames, HostPlacement};

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WalkConfig {
    /// A hardware radix walker. `level_shifts` are the VA shifts of each level's entries, root
    /// first (x86-64: 39, 30, 21, 12). A page size is mapped by the level whose shift equals its
    /// own. `pwc_entries[i]` is the size of the page-walk cache for non-leaf entries of level i
    /// (0 = none). `pte_bytes`: size of one entry. `fixed_cycles`: what a walk costs beyond its
    /// references and the last TLB level's lookup (the walker's start, the TLB fill, the load's
    /// replay: not published by Intel or AMD; a machine file's `walk.fixed_cycles`, measured by
    /// `splab calibrate`'s walk-cost benchmark; 0 in the presets).
    Radix {
        level_shifts: Vec<u8>,
        pwc_entries: Vec<u32>,
        pte_bytes: u32,
        fixed_cycles: u64,
    },
    /// A software refill handler: `handler_cycles` per miss (the trap drains the window), plus
    /// `pte_refs` loads of the leaf entry of the base page (a linear, virtually mapped table with
    /// replicated entries: seed 000 6.1, seed 002 4). `level_shifts` describe the radix table the
    /// OS keeps (for page-table pages); empty when the OS keeps a hashed table allocated at boot.
    Software {
        handler_cycles: u64,
        level_shifts: Vec<u8>,
        pte_refs: u32,
        pte_bytes: u32,
    },
}

impl WalkConfig {
    /// Entry shifts of the page table's levels, root first (empty: no per-process tables).
    pub fn level_shifts(&self) -> &[u8] {
        match self {
            WalkConfig::Radix { level_shifts, .. } | WalkConfig::Software { level_shifts, .. } => {
                level_shifts
            }
        }
    }
    /// A hardware walk's fixed cycles beyond its references (0 for a software refill, whose
    /// `handler_cycles` are its fixed part).
    pub fn fixed_cycles(&self) -> u64 {
        match self {
            WalkConfig::Radix { fixed_cycles, .. } => *fixed_cycles,
            WalkConfig::Software { .. } => 0,
        }
    }
    pub fn pte_bytes(&self) -> u32 {
        match self {
            WalkConfig::Radix { pte_bytes, .. } | WalkConfig::Software { pte_bytes, .. } => {
                *pte_bytes
            }
        }
    }
}

/// A guest machine's second translation (virtualised, two-dimensional paging): the host's
/// tables (Intel EPT, SDM vol. 3 ch. 29; AMD nested paging, APM vol. 2 15.25) map
/// guest-physical to host-physical addresses. A machine with one is a guest (`nested=SIZE`, or a
/// machine file's `[nested]` table).
///
/// The host is not under memory pressure: it backs all of guest memory with pages of
/// `page_shift`, present. Where each host page lies is `placement`: scattered (the default, a
/// fixed pseudo-random bijection on host page numbers, hw/host_frames.rs), so that the lines the
/// guest sends to the caches (data, its page-table entries, its struct-page array) are indexed
/// by host-physical address as the hardware's are, or guest-physical g at host-physical g
/// (identity). Its tables are a radix tree over guest memory, laid out in host-physical memory
/// from the first frame above the host frames of guest memory (guest memory's end, or with
/// scattered placement the end of the range its frames are permuted in, `HostFrames::span`):
/// the root, then each level's tables in address order, as a hypervisor that built them at boot
/// would have them. Their lines never are a guest line, though they compete for the same cache
/// sets.
#[derive(Clone, Debug, Serialize)]
pub struct NestedConfig {
    /// Byte shift of the host page size (the smallest page a TLB entry may then hold).
    pub page_shift: u8,
    /// Entry shifts of the host's table levels, root first (EPT: 39, 30, 21, 12).
    pub level_shifts: Vec<u8>,
    /// Host paging-structure caches, one per host level above the leaf (Intel caches EPT
    /// paging-structure entries, SDM vol. 3 ch. 29; sizes unpublished: an assumption).
    pub pwc_entries: Vec<u32>,
    /// The nested TLB: guest-physical page -> host-physical translations of the guest's
    /// page-table pages (AMD's NTLB, Bhargava et al. ASPLOS'08; size an assumption).
    pub ntlb_entries: u32,
    /// Where the host's frames backing guest memory lie (hw/host_frames.rs).
    pub placement: HostPlacement,
}

impl NestedConfig {
    /// The host's frame placement for a guest of `mem_bytes`, as a function on lines (None:
    /// identity, guest-physical lines are host-physical).
    pub fn host_frames(&self, mem_bytes: u64) -> Option<HostFrames> {
        match self.placement {
            HostPlacement::Scattered => Some(HostFrames::new(self.page_shift, mem_bytes)),
            HostPlacement::Identity => None,
        }
    }
}

/// Native walks whose reference counts `Walker::pending` may hold (16-bit fields, at most 4
/// references a walk).
const PENDING_WALKS: u32 = 8192;

/// A walk's references counted as `reference` counts them (16 bits per place: L1, L2, LLC,
/// DRAM), per place: how many, and their cycles (each its place's latency, `Caches::latency`).
/// All four places, without branches: how many places a walk used is unpredictable.
#[inline(always)]
pub fn priced_counts(counts: u64, caches: &Caches) -> [(u32, u32); 4] {
    std::array::from_fn(|k| {
        let n = ((counts >> (16 * k)) & 0xFFFF) as u32;
        (n, n * caches.latency(k as u8) as u32)
    })
}

/// `priced_counts` added to `by_level` (each place's cycles), returning the references in
/// all. On x86-64, when every place's latency fits 16 bits (`Caches::latencies16`), the four
/// products at once (SSE2: a 16-bit multiply's low and high halves, interleaved into 32-bit
/// lanes) and the count by one multiply summing the fields; the same values as the loop over
/// `priced_counts` (`n * latency as u32`, at most 4 x 65,535), which runs otherwise.
#[inline(always)]
pub fn add_priced(counts: u64, caches: &Caches, by_level: &mut [u32; 4]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(lat) = caches.latencies16() {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86_64; the 8-byte load reads the four `u16`s of `lat`, the
        // 16-byte load and store the four `u32`s of `by_level` (unaligned access allowed).
        unsafe {
            let n = _mm_cvtsi64_si128(counts as i64);
            let l = _mm_loadl_epi64(lat.as_ptr().cast());
            let prod = _mm_unpacklo_epi16(_mm_mullo_epi16(n, l), _mm_mulhi_epu16(n, l));
            let p = by_level.as_mut_ptr().cast::<__m128i>();
            _mm_storeu_si128(p, _mm_add_epi32(_mm_loadu_si128(p), prod));
        }
        // The four 16-bit fields summed into the top one (each at most 4).
        return (counts.wrapping_mul(0x0001_0001_0001_0001) >> 48) as u32;
    }
    let mut refs = 0;
    for (k, (n, cycles)) in priced_counts(counts, caches).into_iter().enumerate() {
        by_level[k] += cycles;
        refs += n;
    }
    refs
}

/// Frames of the page-table pages on a walk's path, root first; `NO_TABLE` where the path ends.
pub type PtPath = [u64; 4];
pub const NO_TABLE: u64 = u64::MAX;

/// A small cache of upper-level paging-structure entries (a PWC): set-associative with at most
/// 4 ways and exact LRU inside a set. Intel does not publish the organisation
/// of its paging-structure caches (SDM vol. 3 4.10.3; docs/constants.md); 4-way sets like the
/// L1 DTLB's are an assumption, and caches of up to 4 entries are fully associative.
///
/// Host layout: per set, four keys (0 = invalid; `ABSENT` in the ways a set does not have,
/// which no key equals) compared without a loop, and the recency order as a permutation of way
/// numbers, one nibble each (nibble 0 the most recent). A fill takes the lowest invalid way,
/// else the least recent: what recency stamps with the first smallest stamp as victim (an
/// invalid way's stamp being 0) chose.
#[derive(Clone, Debug)]
struct Pwc {
    sets: Vec<PwcSet>,
    ways: usize,
    set_mask: u64,
}

#[derive(Clone, Copy, Debug)]
struct PwcSet {
    keys: [u64; 4],
    perm: u16,
}

/// The key of a way a set does not have: `pwc_key` never makes it (its level field would be 7).
const ABSENT: u64 = u64::MAX;

/// Ways of `keys` equal to `key`, as a bit mask.
#[inline(always)]
fn ways_equal(keys: &[u64; 4], key: u64) -> u32 {
    (keys[0] == key) as u32
        | ((keys[1] == key) as u32) << 1
        | ((keys[2] == key) as u32) << 2
        | ((keys[3] == key) as u32) << 3
}

/// The recency order `perm` (at most four ways: one `u16`) with way `w` moved to the front,
/// as the TLB's sets keep theirs.
#[inline(always)]
fn promote(perm: u16, w: usize) -> u16 {
    super::tlb::promote(perm as u64, w) as u16
}

impl Pwc {
    fn new(entries: u32) -> Pwc {
        let ways = (entries as usize).clamp(0, 4);
        let sets = (entries as usize).checked_div(ways).map_or(1, |s| s.max(1));
        assert!(
            sets.is_power_of_two(),
            "page-walk cache of {entries} entries: sets must be a power of two"
        );
        let identity = (0..ways).fold(0u16, |p, w| p | (w as u16) << (4 * w));
        let mut keys = [ABSENT; 4];
        keys[..ways].fill(0);
        Pwc {
            sets: vec![
                PwcSet {
                    keys,
                    perm: identity
                };
                sets
            ],
            ways,
            set_mask: sets as u64 - 1,
        }
    }

    #[inline(always)]
    fn set(&mut self, index: u64) -> &mut PwcSet {
        let i = (index & self.set_mask) as usize;
        debug_assert!(i < self.sets.len());
        // SAFETY: `sets.len() == set_mask + 1` (`new`), so `i` is in bounds.
        unsafe { self.sets.get_unchecked_mut(i) }
    }

    /// Looks up the entry of table index `index` (key `key`); a hit becomes most recently used.
    /// A cache of no entries holds only `ABSENT` keys, so it always misses.
    #[inline]
    fn lookup(&mut self, index: u64, key: u64) -> bool {
        let s = self.set(index);
        let m = ways_equal(&s.keys, key);
        let w = m.trailing_zeros() as usize;
        // Promoting the most recent way changes nothing (a run of walks under one PDPT entry).
        if m != 0 && (s.perm & 0xF) as usize != w {
            s.perm = promote(s.perm, w);
        }
        m != 0
    }

    /// Inserts `key`, known to be absent, replacing the lowest invalid way of its set, else
    /// the least recently used.
    #[inline]
    fn insert_absent(&mut self, index: u64, key: u64) {
        let ways = self.ways;
        if ways == 0 {
            return;
        }
        let s = self.set(index);
        let empty = ways_equal(&s.keys, 0);
        let w = if empty != 0 {
            empty.trailing_zeros() as usize
        } else {
            (s.perm >> (4 * (ways - 1))) as usize & 0xF
        };
        s.keys[w & 3] = key;
        s.perm = promote(s.perm, w);
    }

    fn invalidate_asid(&mut self, asid: u32) {
        for s in self.sets.iter_mut() {
            for k in s.keys.iter_mut() {
                if *k != 0 && *k != ABSENT && ((*k >> 44) & 0xF_FFFF) as u32 == asid & 0xF_FFFF {
                    *k = 0;
                }
            }
        }
    }
}

/// Outcome of a walk: references made, and their latency by the place that served them.
#[derive(Clone, Copy, Debug, Default)]
pub struct WalkCost {
    pub refs: u32,
    /// Cycles of the references served by L1, L2, LLC and DRAM (machines with fewer cache
    /// levels use the first ones and DRAM is always index 3).
    pub by_level: [u32; 4],
    /// References served by each place, same indices.
    pub refs_by_level: [u32; 4],
    /// Software refill handler cycles (0 for a hardware walker).
    pub handler: u64,
    /// A hardware walk's fixed cycles beyond its references (`WalkConfig::fixed_cycles`).
    pub fixed: u32,
    /// Of `refs`, the references to the host's tables (nested paging; 0 otherwise).
    pub refs_host: u32,
}

impl WalkCost {
    pub fn cycles(&self) -> u64 {
        self.handler + self.fixed as u64 + self.by_level.iter().map(|&c| c as u64).sum::<u64>()
    }
}

#[derive(Clone, Debug)]
pub struct Walker {
    base_shift: u8,
    /// log2 of entries per page-table page.
    entry_bits: u8,
    /// `(1 << entry_bits) - 1`, the mask of a table index (kept: three host instructions a
    /// walk reference).
    entry_mask: u64,
    /// From `cfg`, for the hot path: level shifts (root first), their number, entry size,
    /// and for a software refill its handler cycles and references.
    shifts: [u8; 4],
    levels: usize,
    /// The level that maps a page of each byte shift: the last level whose entries have that
    /// shift, else the last level.
    leaf_of: [u8; 64],
    pte_bytes: u64,
    software: Option<(u64, u32)>,
    /// A hardware walk's fixed cycles (`WalkConfig::fixed_cycles`).
    fixed: u32,
    pwcs: Vec<Pwc>,
    /// Walks answered by a page-walk cache at some level.
    pub pwc_hits: u64,
    /// Walk references served by L1, L2, LLC, DRAM (`refs_by_level()` adds `pending`).
    refs_by_level: [u64; 4],
    /// References of the native walks of `walk_counts` not yet in `refs_by_level`, counted as
    /// `reference` counts them (a 16-bit field per place), and how many more such walks may be
    /// added before the fields could overflow (a native walk makes at most 4 references).
    pending: u64,
    pending_left: u32,
    /// The host's dimension on a guest machine (None: native, and `walk` is all there is).
    /// Boxed, with its counters inside, so that a native walker is one pointer larger.
    nested: Option<Box<Nested>>,
}

/// Counters of the host dimension of two-dimensional walks (`tlb.nested` in reports).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct NestedStats {
    /// References to the host's tables (also counted in the walks' references).
    pub walk_refs_host: u64,
    /// Translations of a guest page-table page found in the nested TLB (no host walk).
    pub ntlb_hits: u64,
    /// Host walks started below the root by a host paging-structure-cache hit.
    pub host_pwc_hits: u64,
    /// The most references one walk made (guest and host together).
    pub walk_refs_max: u32,
    /// `walk_refs_host` by the place that served them: L1, L2, LLC, DRAM (the walker's
    /// `refs_by_level` holds both dimensions' references).
    pub walk_refs_host_by_level: [u64; 4],
}

/// The host dimension's state: its table layout, paging-structure caches and nested TLB.
#[derive(Clone, Debug)]
struct Nested {
    /// Host level shifts, root first, and the host leaf's level (the one mapping the host page).
    shifts: [u8; 4],
    leaf: usize,
    /// Host-physical frame of the first table of each level (`NestedConfig`'s layout).
    level_base: [u64; 4],
    pwcs: Vec<Pwc>,
    ntlb: Pwc,
    page_shift: u8,
    /// The host's frame placement of guest lines (None: identity).
    frames: Option<HostFrames>,
    stats: NestedStats,
}

impl Walker {
    pub fn new(cfg: &WalkConfig, base_shift: u8) -> Walker {
        let pwcs = match cfg {
            WalkConfig::Radix { pwc_entries, .. } => {
                pwc_entries.iter().map(|&n| Pwc::new(n)).collect()
            }
            WalkConfig::Software { .. } => Vec::new(),
        };
        let entries = (1u64 << base_shift) / cfg.pte_bytes().max(1) as u64;
        let mut shifts = [0u8; 4];
        for (i, &x) in cfg.level_shifts().iter().take(4).enumerate() {
            shifts[i] = x;
        }
        let levels = cfg.level_shifts().len().min(4);
        let mut leaf_of = [levels.saturating_sub(1) as u8; 64];
        for (i, &x) in shifts[..levels].iter().enumerate() {
            leaf_of[x as usize & 63] = i as u8;
        }
        Walker {
            leaf_of,
            base_shift,
            entry_bits: entries.trailing_zeros() as u8,
            entry_mask: (1u64 << entries.trailing_zeros()) - 1,
            shifts,
            levels: cfg.level_shifts().len().min(4),
            pte_bytes: cfg.pte_bytes() as u64,
            software: match cfg {
                WalkConfig::Software {
                    handler_cycles,
                    pte_refs,
                    ..
                } => Some((*handler_cycles, *pte_refs)),
                WalkConfig::Radix { .. } => None,
            },
            fixed: u32::try_from(cfg.fixed_cycles()).unwrap_or(u32::MAX),
            pwcs,
            pwc_hits: 0,
            refs_by_level: [0; 4],
            pending: 0,
            pending_left: PENDING_WALKS,
            nested: None,
        }
    }

    /// Makes this the walker of a guest of `mem_bytes` of memory: walks become two-dimensional
    /// (`walk_nested`). The host's tables start at the first frame above the host frames of
    /// guest memory, each level's in address order (`NestedConfig`).
    pub fn set_nested(&mut self, cfg: &NestedConfig, mem_bytes: u64) {
        let frames = cfg.host_frames(mem_bytes);
        let n = cfg.level_shifts.len().min(4);
        let mut shifts = [0u8; 4];
        shifts[..n].copy_from_slice(&cfg.level_shifts[..n]);
        let leaf = shifts[..n]
            .iter()
            .position(|&x| x == cfg.page_shift)
            .unwrap_or(n - 1);
        let mut level_base = [0u64; 4];
        // Above every guest line's host frame: with scattered placement, above the range the
        // frames are permuted in (guest lines never alias a host table's line).
        let mut next = frames.map_or(mem_bytes, |f| f.span()) >> self.base_shift;
        for lvl in 0..=leaf {
            level_base[lvl] = next;
            // Tables of this level: one per entry of the level above that covers guest memory.
            next += if lvl == 0 {
                1
            } else {
                mem_bytes.div_ceil(1u64 << shifts[lvl - 1]).max(1)
            };
        }
        self.nested = Some(Box::new(Nested {
            shifts,
            leaf,
            level_base,
            pwcs: cfg.pwc_entries[..leaf.min(cfg.pwc_entries.len())]
                .iter()
                .map(|&e| Pwc::new(e))
                .collect(),
            ntlb: Pwc::new(cfg.ntlb_entries),
            page_shift: cfg.page_shift,
            frames,
            stats: NestedStats::default(),
        }));
    }

    /// Walk references served by L1, L2, LLC, DRAM (the report's `walk_refs_by_level`).
    pub fn refs_by_level(&self) -> [u64; 4] {
        let mut r = self.refs_by_level;
        for (k, x) in r.iter_mut().enumerate() {
            *x += (self.pending >> (16 * k)) & 0xFFFF;
        }
        r
    }

    /// Moves `pending` into `refs_by_level`.
    #[cold]
    #[inline(never)]
    fn fold_pending(&mut self) {
        self.refs_by_level = self.refs_by_level();
        self.pending = 0;
        self.pending_left = PENDING_WALKS;
    }

    /// The host dimension's counters (all 0 on a native machine).
    pub fn nested_stats(&self) -> NestedStats {
        self.nested
            .as_ref()
            .map_or(NestedStats::default(), |n| n.stats)
    }

    /// Whether walks are two-dimensional (a guest machine).
    #[inline]
    pub fn is_nested(&self) -> bool {
        self.nested.is_some()
    }

    /// What every hardware walk costs beyond its references, charged once per walk (a walk that
    /// finds no mapping included: it started and ran to the entry that was not present).
    #[inline(always)]
    pub fn fixed_cycles(&self) -> u32 {
        self.fixed
    }

    /// Whether misses trap to software (which drains the core's window).
    pub fn is_software(&self) -> bool {
        self.software.is_some()
    }

    /// Physical line of the entry for `va` in the table of level `lvl` held in frame `frame`.
    #[inline]
    fn entry_line(&self, frame: u64, lvl_shift: u8, va: u64) -> u64 {
        debug_assert_eq!(self.entry_mask, (1u64 << self.entry_bits) - 1);
        let index = (va >> lvl_shift) & self.entry_mask;
        ((frame << self.base_shift) + index * self.pte_bytes) >> LINE_SHIFT
    }

    /// One walk reference: counted, in `counts`, in the 16-bit field of the place that served
    /// it (L1, L2, LLC, DRAM = field 3). Counting in a register and pricing at the end (`tally`)
    /// avoids a read-modify-write of an array at a varying index per reference, which stalled
    /// the host on store forwarding when the array was read back whole.
    #[inline]
    fn reference(caches: &mut Caches, line: u64, counts: &mut u64) {
        let s = caches.access(line);
        let k = caches.place(s) as u64;
        *counts += 1 << (16 * k);
    }

    /// The cost of the references counted in `counts` (see `reference`): each place's count
    /// times its latency (every reference served at place k has the same latency: the level's,
    /// or DRAM's for field 3), added to `cost` and to the walker's totals.
    #[inline]
    fn tally(&mut self, caches: &Caches, counts: u64, cost: &mut WalkCost) {
        for (k, (n, cycles)) in priced_counts(counts, caches).into_iter().enumerate() {
            cost.by_level[k] += cycles;
            cost.refs_by_level[k] += n;
            self.refs_by_level[k] += n as u64;
            cost.refs += n;
        }
    }

    /// Walks `asid`'s page table for `va`, which is (or would be) mapped by a page of byte shift
    /// `leaf_shift`; `path` holds the frames of the tables on the way. For a fault (nothing
    /// mapped), pass the base page shift: the walk stops at the first level with no table.
    #[inline(always)]
    pub fn walk(
        &mut self,
        asid: u32,
        va: u64,
        leaf_shift: u8,
        path: &PtPath,
        caches: &mut Caches,
    ) -> WalkCost {
        let mut cost = WalkCost::default();
        let n = self.levels;
        if let Some((handler, refs)) = self.software {
            cost.handler = handler;
            // The replicated entry of the base page, in the leaf table.
            if n > 0 {
                let frame = path[n - 1];
                if frame != NO_TABLE {
                    let line = self.entry_line(frame, self.shifts[n - 1], va);
                    let mut counts = 0;
                    for _ in 0..refs {
                        Self::reference(caches, line, &mut counts);
                    }
                    self.tally(caches, counts, &mut cost);
                }
            }
            return cost;
        }
        let counts = self.radix_refs(asid, va, leaf_shift, path, caches);
        self.tally(caches, counts, &mut cost);
        cost.fixed = self.fixed;
        cost
    }

    /// `walk` for a hardware radix walker on a native machine (`!is_software()`,
    /// `!is_nested()`), returning its references counted as `reference` counts them (16 bits
    /// per place: L1, L2, LLC, DRAM) instead of priced: each costs its place's latency
    /// (`Caches::latency`), as `tally` prices them. Counted in the walker's totals too.
    #[inline(always)]
    pub fn walk_counts(
        &mut self,
        asid: u32,
        va: u64,
        leaf_shift: u8,
        path: &PtPath,
        caches: &mut Caches,
    ) -> u64 {
        debug_assert!(self.software.is_none() && self.nested.is_none());
        let counts = self.radix_refs(asid, va, leaf_shift, path, caches);
        self.pending += counts;
        self.pending_left -= 1;
        if self.pending_left == 0 {
            self.fold_pending();
        }
        counts
    }

    /// The references of a radix walk (see `walk`), counted as `reference` counts them.
    #[inline(always)]
    fn radix_refs(
        &mut self,
        asid: u32,
        va: u64,
        leaf_shift: u8,
        path: &PtPath,
        caches: &mut Caches,
    ) -> u64 {
        let shifts = self.shifts;
        let (leaf, start) = self.guest_start(asid, va, leaf_shift);
        let mut counts = 0;
        debug_assert!(leaf < 4);
        for lvl in start..=leaf {
            // `leaf` is at most 3 (`guest_start`): `lvl & 3` is `lvl`, without bounds checks.
            let frame = path[lvl & 3];
            if frame == NO_TABLE {
                break; // no table here: the entry above was not present
            }
            let line = self.entry_line(frame, shifts[lvl & 3], va);
            Self::reference(caches, line, &mut counts);
            if lvl < leaf && lvl < self.pwcs.len() {
                // Levels below the PWC hit missed their caches above: insert them.
                let index = va >> shifts[lvl & 3];
                self.pwcs[lvl].insert_absent(index, pwc_key(asid, lvl, index));
            }
        }
        counts
    }

    /// The leaf level of a `leaf_shift` mapping, and the level a walk starts at: below the
    /// deepest non-leaf level whose entry a page-walk cache holds (Intel SDM vol. 3 4.10.3,
    /// paging-structure caches). Shared by the native and the two-dimensional walk.
    #[inline(always)]
    fn guest_start(&mut self, asid: u32, va: u64, leaf_shift: u8) -> (usize, usize) {
        let leaf = if leaf_shift < 64 {
            self.leaf_of[leaf_shift as usize] as usize
        } else {
            self.levels - 1
        };
        // `leaf` is below `levels`, at most 4 (`new`): `lvl & 3` is `lvl` (no bounds check).
        debug_assert!(leaf < 4);
        for lvl in (0..leaf.min(self.pwcs.len())).rev() {
            let index = va >> self.shifts[lvl & 3];
            if self.pwcs[lvl].lookup(index, pwc_key(asid, lvl, index)) {
                self.pwc_hits += 1;
                return (leaf, lvl + 1);
            }
        }
        (leaf, 0)
    }

    /// A two-dimensional walk (Bhargava et al. ASPLOS'08, Figures 2 and 3; Intel SDM vol. 3
    /// ch. 29, AMD APM vol. 2 15.25): the guest walk of `walk`, in which each guest page-table
    /// page's guest-physical address is first translated by the host (the nested TLB, else a
    /// host walk of its levels), and, when the guest walk found a mapping, the data's
    /// guest-physical address `data_gpa` by one more host walk. When every walk-cache lookup
    /// misses, 4 guest and 4 host levels make 4 x (4 + 1) + 4 = 24 references (cold caches alone
    /// do not: the host's first walk fills caches its later ones in the same walk hit). A guest page-walk-cache hit skips
    /// the guest levels above it and their host walks, and the host's translation of the next
    /// guest table too (Intel's combined paging-structure-cache entries hold that table's
    /// host-physical address: SDM vol. 3C 28.3.1, combined mappings).
    pub fn walk_nested(
        &mut self,
        asid: u32,
        va: u64,
        leaf_shift: u8,
        path: &PtPath,
        data_gpa: Option<u64>,
        caches: &mut Caches,
    ) -> WalkCost {
        let mut cost = WalkCost::default();
        let mut nested = self.nested.take().expect("walk_nested on a native machine");
        let shifts = self.shifts;
        let (leaf, start) = self.guest_start(asid, va, leaf_shift);
        let mut counts = 0;
        // The host's references, counted apart (as `reference` counts them) and added to
        // `counts` at the end.
        let mut hcounts = 0;
        let mut host = 0u32;
        for lvl in start..=leaf {
            let frame = path[lvl];
            if frame == NO_TABLE {
                break;
            }
            // The guest table's guest-physical page, translated by the host; except the first
            // table after a guest page-walk-cache hit, whose host-physical address the hit
            // entry holds (a combined paging-structure-cache entry maps the upper portion of
            // a linear address to the physical address of the paging structure that
            // translates it: Intel SDM vol. 3C 28.3.1, "combined mappings").
            if lvl > start || start == 0 {
                let gpa = frame << self.base_shift;
                let gpage = gpa >> nested.page_shift;
                let key = pwc_key(0, 0, gpage);
                if nested.ntlb.lookup(gpage, key) {
                    nested.stats.ntlb_hits += 1;
                } else {
                    host += self.host_walk(&mut nested, gpa, caches, &mut hcounts);
                    nested.ntlb.insert_absent(gpage, key);
                }
            }
            // The guest entry's line is guest-physical: the caches see its host frame.
            let line = self.entry_line(frame, shifts[lvl], va);
            let line = nested.frames.map_or(line, |f| f.line(line));
            Self::reference(caches, line, &mut counts);
            if lvl < leaf && lvl < self.pwcs.len() {
                let index = va >> shifts[lvl & 3];
                self.pwcs[lvl].insert_absent(index, pwc_key(asid, lvl, index));
            }
        }
        if let Some(g) = data_gpa {
            host += self.host_walk(&mut nested, g, caches, &mut hcounts);
        }
        for (k, n) in nested.stats.walk_refs_host_by_level.iter_mut().enumerate() {
            *n += (hcounts >> (16 * k)) & 0xFFFF;
        }
        counts += hcounts;
        self.tally(caches, counts, &mut cost);
        // One walk, one fixed cost: the host's walks inside it are its references.
        cost.fixed = self.fixed;
        cost.refs_host = host;
        nested.stats.walk_refs_host += host as u64;
        nested.stats.walk_refs_max = nested.stats.walk_refs_max.max(cost.refs);
        self.nested = Some(nested);
        cost
    }

    /// The host's walk for guest-physical address `gpa`, below its deepest paging-structure
    /// cache hit; its references are counted in `counts` (see `reference`). Returns how many.
    fn host_walk(
        &mut self,
        h: &mut Nested,
        gpa: u64,
        caches: &mut Caches,
        counts: &mut u64,
    ) -> u32 {
        let mut start = 0;
        for lvl in (0..h.leaf.min(h.pwcs.len())).rev() {
            let index = gpa >> h.shifts[lvl];
            if h.pwcs[lvl].lookup(index, pwc_key(0, lvl, index)) {
                start = lvl + 1;
                h.stats.host_pwc_hits += 1;
                break;
            }
        }
        for lvl in start..=h.leaf {
            let table = if lvl == 0 {
                0
            } else {
                gpa >> h.shifts[lvl - 1]
            };
            let line = self.entry_line(h.level_base[lvl] + table, h.shifts[lvl], gpa);
            Self::reference(caches, line, counts);
            if lvl < h.leaf && lvl < h.pwcs.len() {
                let index = gpa >> h.shifts[lvl];
                h.pwcs[lvl].insert_absent(index, pwc_key(0, lvl, index));
            }
        }
        (h.leaf + 1 - start) as u32
    }

    /// Hints the host to fetch the cache sets of the leaf entry of `va` (no effect on the model).
    #[inline]
    pub fn prefetch(&self, va: u64, path: &PtPath, caches: &Caches) {
        if let Some(line) = self.leaf_line(va, path) {
            caches.prefetch(line);
        }
    }

    /// The line the caches see for the leaf (base-page) entry of `va` in the tables of `path`,
    /// if there is one: what `prefetch` hints.
    #[inline(always)]
    pub fn leaf_line(&self, va: u64, path: &PtPath) -> Option<u64> {
        // `levels` is at most 4 (`new`); with none, the wrapped index fails the one test.
        let i = self.levels.wrapping_sub(1);
        if i < path.len() {
            let leaf = path[i];
            if leaf != NO_TABLE {
                let line = self.entry_line(leaf, self.shifts[i], va);
                return Some(self.host_line(line));
            }
        }
        None
    }

    /// The line the caches see for guest-physical line `line`: its host frame's on a guest
    /// with scattered host placement, else itself.
    #[inline(always)]
    pub fn host_line(&self, line: u64) -> u64 {
        match &self.nested {
            Some(n) => n.frames.map_or(line, |f| f.line(line)),
            None => line,
        }
    }

    /// Drops page-walk-cache entries of `asid` (process exit, page-table pages freed).
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
    use crate::hw::cache::{CacheLevelConfig, CachesConfig};

    fn caches() -> Caches {
        Caches::new(&CachesConfig {
            levels: vec![CacheLevelConfig {
                name: "L1".into(),
                size_bytes: 64 << 10,
                ways: 8,
                latency: 10,
                replacement: crate::hw::cache::Replacement::Plru,
            }],
            dram_latency: 100,
        })
    }

    #[test]
    fn add_priced_is_the_loop_over_priced_counts() {
        let level = |latency| CacheLevelConfig {
            name: "L".into(),
            size_bytes: 64 << 10,
            ways: 8,
            latency,
            replacement: crate::hw::cache::Replacement::Plru,
        };
        for (l1, dram) in [(4, 100), (10, 65_535), (3, 65_536), (70_000, 1 << 40)] {
            for n in 1..=3 {
                let c = Caches::new(&CachesConfig {
                    levels: (0..n).map(|i| level(l1 + 7 * i)).collect(),
                    dram_latency: dram,
                });
                assert_eq!(c.latencies16().is_some(), dram < 65_536 && l1 < 65_536);
                // Every count of up to 4 references a place.
                for f in 0..5u64.pow(4) {
                    let counts = (0..4).fold(0, |x, k| x | (f / 5u64.pow(k) % 5) << (16 * k));
                    let (mut a, mut b) = ([1u32, 2, 3, 4], [1u32, 2, 3, 4]);
                    let ra = add_priced(counts, &c, &mut a);
                    let mut rb = 0;
                    for (k, (n, cycles)) in priced_counts(counts, &c).into_iter().enumerate() {
                        b[k] += cycles;
                        rb += n;
                    }
                    assert_eq!((ra, a), (rb, b), "counts {counts:#x}");
                }
            }
        }
    }

    fn radix() -> Walker {
        Walker::new(
            &WalkConfig::Radix {
                level_shifts: vec![39, 30, 21, 12],
                pwc_entries: vec![2, 4, 32],
                pte_bytes: 8,
                fixed_cycles: 0,
            },
            12,
        )
    }

    #[test]
    fn radix_walk_refs_and_pwc() {
        let mut w = radix();
        let mut c = caches();
        let path = [1, 2, 3, 4];
        // Cold: 4 references, all from DRAM.
        let r = w.walk(1, 0x4000_0000, 12, &path, &mut c);
        assert_eq!((r.refs, r.cycles()), (4, 400));
        assert_eq!(r.refs_by_level, [0, 0, 0, 4]);
        // Same 2MB region: the PDE cache holds the PD entry; one reference, a cached line.
        let r = w.walk(1, 0x4000_1000, 12, &path, &mut c);
        assert_eq!((r.refs, r.cycles()), (1, 10));
        // A 2MB leaf in another 1GB region: PML4 cached, PDPT + PD refs.
        let r = w.walk(1, 0x8000_0000, 21, &[1, 2, 5, NO_TABLE], &mut c);
        assert_eq!(r.refs, 2);
        // Another process shares no walk-cache entries.
        assert_eq!(w.walk(2, 0x4000_1000, 12, &[7, 8, 9, 10], &mut c).refs, 4);
        // A walk with no leaf table stops at the missing level.
        assert_eq!(
            w.walk(3, 0x1000, 12, &[11, 12, NO_TABLE, NO_TABLE], &mut c)
                .refs,
            2
        );
    }

    #[test]
    fn entry_lines_follow_the_table_frames() {
        let mut w = radix();
        let mut c = caches();
        // Two leaf entries in one 64-byte line (8 entries a line) share it.
        let path = [1, 2, 3, 4];
        w.walk(1, 0x1000, 12, &path, &mut c);
        w.invalidate_asid(1);
        let r = w.walk(1, 0x2000, 12, &path, &mut c);
        assert_eq!(r.refs_by_level, [4, 0, 0, 0]);
        // A different leaf frame is a different line.
        w.invalidate_asid(1);
        let r = w.walk(1, 0x2000, 12, &[1, 2, 3, 9], &mut c);
        assert_eq!(r.refs_by_level, [3, 0, 0, 1]);
    }

    fn nested(page_shift: u8, pwc: Vec<u32>, ntlb: u32) -> Walker {
        let mut w = radix();
        w.set_nested(
            &NestedConfig {
                page_shift,
                level_shifts: vec![39, 30, 21, 12],
                pwc_entries: pwc,
                ntlb_entries: ntlb,
                placement: HostPlacement::Identity,
            },
            1 << 30,
        );
        w
    }

    /// Bhargava et al. ASPLOS'08 Figure 3: with no walk caching, a 4 + 4 level walk makes
    /// 4 x (4 + 1) + 4 = 24 references, 20 of them to the host's tables.
    #[test]
    fn uncached_two_dimensional_walk_is_24_references() {
        let mut w = nested(12, vec![0, 0, 0], 0);
        let mut c = caches();
        let r = w.walk_nested(1, 0x4000_0000, 12, &[1, 2, 3, 4], Some(0x5000), &mut c);
        assert_eq!((r.refs, r.refs_host), (24, 20));
        assert_eq!(w.nested_stats().walk_refs_max, 24);
        // By place: the host's five walks (four guest tables' frames, 1 to 4, and the data's,
        // 5) read the same root, PDPT and PD lines, and their leaf entries share one line (8
        // entries a line): the first walk's 4 from DRAM, the other 16 L1 hits. The guest's
        // entries lie in four tables: 4 more from DRAM.
        assert_eq!(w.nested_stats().walk_refs_host_by_level, [16, 0, 0, 4]);
        assert_eq!(r.refs_by_level, [16, 0, 0, 8]);
    }

    /// The walk caches of both dimensions. Cold, the first host walk is four references; the
    /// guest's other tables and the data lie in the same 2MB of guest-physical memory, so the
    /// host's PDE cache answers their host walks with one: 4 guest + 4 + 3 x 1 + 1 host = 12.
    #[test]
    fn walk_caches_of_both_dimensions() {
        let mut w = nested(12, vec![2, 4, 32], 16);
        let mut c = caches();
        let path = [1, 2, 3, 4];
        let r = w.walk_nested(1, 0x4000_0000, 12, &path, Some(0x5000), &mut c);
        assert_eq!((r.refs, r.refs_host), (12, 8));
        assert_eq!(w.nested_stats().host_pwc_hits, 4);
        // The next page of the same 2MB region: the guest PDE cache skips three guest levels
        // (and their host walks), and its entry holds the leaf table's host-physical address
        // (a combined mapping), so the nested TLB is not asked for that table's page; the host's
        // PDE cache has the data's 2MB: one guest and one host reference.
        let r = w.walk_nested(1, 0x4000_1000, 12, &path, Some(0x6000), &mut c);
        assert_eq!((r.refs, r.refs_host), (2, 1));
        assert_eq!(w.nested_stats().ntlb_hits, 0);
        // A walk that finds nothing mapped makes no host walk for data.
        let r = w.walk_nested(
            2,
            0x1000,
            12,
            &[9, NO_TABLE, NO_TABLE, NO_TABLE],
            None,
            &mut c,
        );
        assert_eq!((r.refs, r.refs_host), (2, 1));
        assert_eq!(w.nested_stats().walk_refs_host, 10);
        assert_eq!(w.nested_stats().walk_refs_max, 12);
    }

    /// A hit one level higher (the guest PDPTE cache: another 2MB of the same 1GB) skips the
    /// host's translation of the table it names (the PD, a combined mapping) but not of the
    /// table below it: the leaf table's page comes from the nested TLB, which the first walk
    /// filled, and the data's from the host's PDE cache.
    #[test]
    fn a_higher_guest_pwc_hit_still_translates_the_tables_below_it() {
        let mut w = nested(12, vec![2, 4, 32], 16);
        let mut c = caches();
        let path = [1, 2, 3, 4];
        w.walk_nested(1, 0x4000_0000, 12, &path, Some(0x5000), &mut c);
        assert_eq!(w.nested_stats().ntlb_hits, 0);
        let r = w.walk_nested(1, 0x4020_0000, 12, &path, Some(0x5000), &mut c);
        // Guest: the PD's and the PT's entries; host: the data's leaf entry only.
        assert_eq!((r.refs, r.refs_host), (3, 1));
        assert_eq!(w.nested_stats().ntlb_hits, 1);
    }

    /// A guest page-walk-cache hit gives the next guest table's host-physical address (SDM vol.
    /// 3C 28.3.1, combined paging-structure-cache entries): with no nested TLB at all, the walk
    /// of the next page of a 2MB region makes no host walk for its leaf table, only the data's.
    #[test]
    fn a_guest_pwc_hit_skips_the_next_tables_host_walk() {
        let mut w = nested(12, vec![2, 4, 32], 0);
        let mut c = caches();
        let path = [1, 2, 3, 4];
        w.walk_nested(1, 0x4000_0000, 12, &path, Some(0x5000), &mut c);
        let before = w.nested_stats().walk_refs_host;
        // The data 1 GiB away: its host walk hits only the root's cache (3 references); the
        // leaf table's host walk, were it made, would add one (its 2MB in the host's PDE cache).
        let r = w.walk_nested(1, 0x4000_1000, 12, &path, Some(0x4000_0000), &mut c);
        assert_eq!(r.refs, 1 + r.refs_host);
        assert_eq!(r.refs_host, 3);
        assert_eq!(w.nested_stats().walk_refs_host, before + 3);
        assert_eq!(w.nested_stats().ntlb_hits, 0);
    }

    /// Host and guest superpages shorten their own dimension: a 2MB host page ends each host
    /// walk a level early (4 x (3 + 1) + 3 = 19), a 2MB guest page ends the guest walk early
    /// (3 x (4 + 1) + 4 = 19), both: 3 x (3 + 1) + 3 = 15. Without caches every walk is cold.
    #[test]
    fn superpages_shorten_their_dimension() {
        for (host, guest, refs) in [(12, 12, 24), (21, 12, 19), (12, 21, 19), (21, 21, 15)] {
            let mut w = nested(host, vec![0, 0, 0], 0);
            let mut c = caches();
            let path = [1, 2, 3, if guest == 12 { 4 } else { NO_TABLE }];
            let r = w.walk_nested(1, 0x4000_0000, guest, &path, Some(0x20_0000), &mut c);
            assert_eq!(r.refs, refs, "host {host} guest {guest}");
        }
    }

    /// The host's tables lie above guest memory, one level after another, and their lines
    /// are never a guest frame's.
    #[test]
    fn host_tables_lie_above_guest_memory() {
        let w = nested(12, vec![2, 4, 32], 16);
        let h = w.nested.as_ref().unwrap();
        // 1GB of guest memory in 4KB frames: the root at frame 2^18, one PDPT, one PD, 512 PTs.
        assert_eq!(
            &h.level_base,
            &[1 << 18, (1 << 18) + 1, (1 << 18) + 2, (1 << 18) + 3]
        );
        assert_eq!(h.leaf, 3);
    }

    /// With scattered host placement the host's tables lie above the range guest frames are
    /// permuted in (the next power of two of guest memory's host pages), so a guest line never
    /// is a host table's; the guest's entry lines go to their host frames, the host's do not.
    #[test]
    fn scattered_placement_keeps_host_tables_above_guest_lines() {
        let mut w = radix();
        let cfg = |placement| NestedConfig {
            page_shift: 12,
            level_shifts: vec![39, 30, 21, 12],
            pwc_entries: vec![0, 0, 0],
            ntlb_entries: 0,
            placement,
        };
        // 1.5GB of guest memory: identity tables at frame 1.5G / 4K, scattered ones at 2G / 4K.
        let mem = 3 << 29;
        w.set_nested(&cfg(HostPlacement::Identity), mem);
        assert_eq!(w.nested.as_ref().unwrap().level_base[0], mem >> 12);
        w.set_nested(&cfg(HostPlacement::Scattered), mem);
        let h = w.nested.as_ref().unwrap();
        assert_eq!(h.level_base[0], 1 << 19);
        let f = h.frames.unwrap();
        assert_eq!(f.span(), 1 << 31);
        let top = (mem >> 12) * 64;
        assert!((0..top).step_by(61).all(|l| f.line(l) < 1 << 25));
        assert_eq!(w.host_line(5), f.line(5));
        assert_ne!(f.line(64 * 9), 64 * 9, "frame 9 moves");
        // A guest entry's line goes to its host frame: the walk touches the placed line.
        let mut c = caches();
        let path = [9, 10, 11, 12];
        let r = w.walk_nested(1, 0x4000_0000, 12, &path, None, &mut c);
        assert_eq!((r.refs, r.refs_host), (20, 16));
        let leaf = w.entry_line(12, 12, 0x4000_0000);
        assert_eq!(c.access(f.line(leaf)), 0, "the placed line is in L1");
        // A native walker's lines are its own.
        assert_eq!(radix().host_line(64 * 9), 64 * 9);
    }

    /// A hardware walk costs exactly its references at their places' latencies plus the
    /// walker's fixed cycles, once a walk: native (4 DRAM references, then 1 L1 reference below
    /// the PWC hit) and two-dimensional (24 references, one fixed cost).
    #[test]
    fn a_walk_costs_its_references_and_the_fixed_cycles_once() {
        let cfg = |fixed| WalkConfig::Radix {
            level_shifts: vec![39, 30, 21, 12],
            pwc_entries: vec![2, 4, 32],
            pte_bytes: 8,
            fixed_cycles: fixed,
        };
        let mut w = Walker::new(&cfg(13), 12);
        assert_eq!(w.fixed_cycles(), 13);
        let mut c = caches();
        let path = [1, 2, 3, 4];
        let r = w.walk(1, 0x1000, 12, &path, &mut c);
        assert_eq!((r.refs, r.fixed, r.cycles()), (4, 13, 413));
        let r = w.walk(1, 0x2000, 12, &path, &mut c);
        assert_eq!((r.refs, r.cycles()), (1, 10 + 13));
        // Without the key: the references alone.
        let mut w0 = Walker::new(&cfg(0), 12);
        let r = w0.walk(1, 0x1000, 12, &path, &mut caches());
        assert_eq!(r.cycles(), 400);
        // A software refill's fixed part is its handler.
        let sw = WalkConfig::Software {
            handler_cycles: 70,
            level_shifts: vec![],
            pte_refs: 1,
            pte_bytes: 8,
        };
        assert_eq!(sw.fixed_cycles(), 0);
        // Two-dimensional: 24 uncached references (fresh caches: the same walk with and without
        // the key), one fixed cost.
        let walk_2d = |fixed| {
            let mut n = Walker::new(&cfg(fixed), 12);
            n.set_nested(
                &NestedConfig {
                    page_shift: 12,
                    level_shifts: vec![39, 30, 21, 12],
                    pwc_entries: vec![0, 0, 0],
                    ntlb_entries: 0,
                    placement: HostPlacement::Identity,
                },
                1 << 30,
            );
            n.walk_nested(1, 0x1000, 12, &path, Some(0x5000), &mut caches())
        };
        let (r0, r) = (walk_2d(0), walk_2d(13));
        assert_eq!((r0.refs, r.refs, r0.fixed, r.fixed), (24, 24, 0, 13));
        assert_eq!(r.cycles(), r0.cycles() + 13);
    }

    #[test]
    fn software_refill_is_handler_plus_pte_load() {
        let mut w = Walker::new(
            &WalkConfig::Software {
                handler_cycles: 70,
                level_shifts: vec![33, 23, 13],
                pte_refs: 1,
                pte_bytes: 8,
            },
            13,
        );
        let mut c = caches();
        let path = [1, 2, 3, NO_TABLE];
        assert_eq!(w.walk(1, 0x2000, 13, &path, &mut c).cycles(), 170);
        assert_eq!(w.walk(1, 0x4000, 13, &path, &mut c).cycles(), 80); // same line of PTEs
        assert!(w.is_software());
    }
}
