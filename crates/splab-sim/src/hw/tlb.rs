//! TLB hierarchy: levels of set-associative (or fully associative) LRU arrays, each holding one or
//! several page sizes. Knows nothing of policies; the page table is the VM's.
//!
//! An entry is keyed by (asid, virtual page number at its size, size class) and carries the
//! frame it translates to and two permission bits: writable and dirty. A write that hits a clean
//! entry has the dirty bit set by the walker (an "A/D assist" on x86) and the entry updated.
//!
//! Replacement is exact LRU: a way that is invalid (the lowest-numbered one) if the set has one,
//! else the least recently looked up or filled.
//!
//! Host layout (speed only; `tests/tlb_reference.rs` checks it against the stamp-based model it
//! replaced, operation by operation). An array of at most 16 ways keeps each set in 64-byte host
//! lines: a header line holding a 16-bit hint of each way's tag (compared all at once), one
//! flags byte per way (valid, writable, dirty, size: a fill writes one byte, and one move-mask
//! gives the valid ways) and the LRU order as a permutation of 4-bit way numbers in one word;
//! then one line per four ways with their tags and frames. A lookup that
//! misses reads the header line only; a hit or a fill one more. Arrays of more than 16 ways (the
//! Alpha's and the PA-8000's fully associative TLBs) keep a hash index from tag to slot, chained
//! through the slots, and the recency order as an intrusive doubly linked list per set.

use serde::{Deserialize, Serialize};

use crate::units::{Pfn, SizeClass};

/// One array of a TLB level.
#[derive(Clone, Debug, Serialize)]
pub struct ArrayConfig {
    /// Size classes this array holds (indices into the machine's page sizes).
    pub sizes: Vec<u8>,
    pub entries: u32,
    /// Ways per set; `ways == entries` is fully associative.
    pub ways: u32,
    /// Which entry a fill replaces.
    pub replacement: TlbReplacement,
}

/// Replacement policy of a TLB array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlbReplacement {
    /// Least recently used.
    Lru,
    /// Round-robin allocation: entries are replaced in the order they were filled, and a hit
    /// changes nothing (the Alpha 21264's ITB and DTB). Modelled as FIFO: an invalid entry is
    /// filled first, where the hardware's pointer would move on regardless; the two differ only
    /// after a single-entry invalidation.
    RoundRobin,
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

#[inline]
fn make_tag(asid: u32, vpn_at_size: u64, class: SizeClass) -> u64 {
    // 40 bits of page number, 4 of size class, 19 of asid, top bit set so no tag is INVALID.
    (1u64 << 63)
        | ((asid as u64 & 0x7_FFFF) << 44)
        | ((class.0 as u64 & 0xF) << 40)
        | (vpn_at_size & 0xFF_FFFF_FFFF)
}

/// The asid bits of a tag: `make_tag(asid, v, c) == asid_bits(asid) | make_tag(0, v, c)`.
#[inline(always)]
fn asid_bits(asid: u32) -> u64 {
    (asid as u64 & 0x7_FFFF) << 44
}

/// The page-number bits of a tag.
const VPN_MASK: u64 = 0xFF_FFFF_FFFF;

#[inline]
fn tag_asid(tag: u64) -> u32 {
    ((tag >> 44) & 0x7_FFFF) as u32
}

#[inline]
fn tag_class(tag: u64) -> u8 {
    ((tag >> 40) & 0xF) as u8
}

#[inline]
fn tag_vpn(tag: u64) -> u64 {
    tag & 0xFF_FFFF_FFFF
}

/// The sizes an array holds, with its count of valid entries of each: a lookup skips the sizes
/// with none.
#[derive(Clone, Debug)]
struct Sizes {
    n: usize,
    class: [SizeClass; 16],
    shift: [u8; 16],
    /// Valid entries per index of `class`.
    valid: [u32; 16],
    /// Index in `class` of each size class (255 = not held); the last one if listed twice.
    index: [u8; 16],
    /// Bit i set iff `valid[i] > 0`: the sizes a lookup probes.
    live: u32,
    /// In an LRU array that takes the specialised path (`Array::small_pow2`), the index of the
    /// one size with entries when `live` has one bit; else `u8::MAX`.
    one: u8,
    /// The array is LRU and `small_pow2`: `one` is kept.
    keep_one: bool,
    /// The bits of a tag of size index i other than its asid and page number (`make_tag`).
    tag_hi: [u64; 16],
}

impl Sizes {
    fn new(sizes: &[u8], shifts: &[u8], keep_one: bool) -> Sizes {
        assert!(sizes.len() <= 16, "a TLB array holds at most 16 page sizes");
        let mut s = Sizes {
            n: sizes.len(),
            class: [SizeClass(0); 16],
            shift: [0; 16],
            valid: [0; 16],
            index: [u8::MAX; 16],
            live: 0,
            one: u8::MAX,
            keep_one,
            tag_hi: [0; 16],
        };
        for (i, &c) in sizes.iter().enumerate() {
            s.class[i] = SizeClass(c);
            s.tag_hi[i] = make_tag(0, 0, SizeClass(c));
            s.shift[i] = shifts[c as usize];
            s.index[c as usize & 0xF] = i as u8;
        }
        s
    }

    /// One more valid entry of size index `i`.
    #[inline(always)]
    fn inc(&mut self, i: usize) {
        self.valid[i & 15] += 1;
        if self.valid[i & 15] == 1 {
            self.set_live(self.live | 1 << (i & 15));
        }
    }

    /// One valid entry of size index `i` fewer.
    #[inline(always)]
    fn dec(&mut self, i: usize) {
        self.valid[i & 15] -= 1;
        if self.valid[i & 15] == 0 {
            self.set_live(self.live & !(1 << (i & 15)));
        }
    }

    /// A size gained its first entry or lost its last: `live` and `one` anew. Out of line:
    /// rare, and `inc` and `dec` are inlined into every fill of the access path.
    #[cold]
    #[inline(never)]
    fn set_live(&mut self, live: u32) {
        self.live = live;
        self.one = self.one_of(live);
    }

    /// `one` for these `live` sizes.
    #[inline(always)]
    fn one_of(&self, live: u32) -> u8 {
        if self.keep_one && live.is_power_of_two() {
            live.trailing_zeros() as u8
        } else {
            u8::MAX
        }
    }

    /// Page shift of `class` if held (the first listing).
    #[inline]
    fn holds(&self, class: SizeClass) -> Option<u8> {
        (0..self.n)
            .find(|&i| self.class[i] == class)
            .map(|i| self.shift[i])
    }

    /// Index in `class` of a valid tag's size class.
    #[inline]
    fn idx(&self, tag: u64) -> usize {
        self.index[tag_class(tag) as usize] as usize
    }

    /// Page shift of a valid tag (0 if its class is not held, which `check_invariants` reports).
    #[inline]
    fn shift_of(&self, tag: u64) -> u8 {
        let c = tag_class(tag);
        (0..self.n)
            .find(|&i| self.class[i].0 == c)
            .map(|i| self.shift[i])
            .unwrap_or(0)
    }
}

/// A set of at most 16 ways, in 64-byte host lines: a header line, then one line per four ways
/// (lines of ways a set does not have are never touched).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Set {
    /// The 16-bit tag hints of ways 0..16 (stale in invalid ways).
    hint: [u16; 16],
    /// Per way: `VALID`, `WRITABLE`, `DIRTY`, and the index in the array's sizes of the way's
    /// size class (bits `SIZE_SHIFT..`). One byte per way, so a fill writes its way's byte
    /// and one vector move-mask gives the valid ways.
    flags: [u8; 16],
    /// The LRU order: way numbers by recency, one nibble each, nibble 0 the most recent.
    perm: u64,
    _pad: u64,
    /// Group `g`: the tags of ways 4g..4g+4 in words 0..4, their frames in words 4..8.
    g: [[u64; 8]; 4],
}

const VALID: u8 = 0x80;
const WRITABLE: u8 = 1;
const DIRTY: u8 = 2;
const SIZE_SHIFT: u32 = 2;

/// The flags byte of a valid way holding a translation with these permissions, of size index
/// `size`.
#[inline(always)]
fn flags_of(t: &Translation, size: usize) -> u8 {
    VALID
        | ((t.writable as u8) * WRITABLE)
        | ((t.dirty as u8) * DIRTY)
        | ((size as u8) << SIZE_SHIFT)
}

/// A 16-bit digest of a tag, kept per way so that one vector compare finds the candidate ways:
/// page-number bits 4..20. The ways of a set share their page numbers' low bits (the set index,
/// at most 7 bits on the presets), so two pages of a set less than 2^20 pages apart never share
/// a hint; pages further apart, or of other asids or sizes, may, which costs a tag compare and
/// changes nothing else (speed only). Two host instructions where a multiplicative hash took
/// five, computed two or three times per GUPS update.
#[inline(always)]
fn hint(tag: u64) -> u16 {
    (tag >> 4) as u16
}

/// Ways whose hint equals `x`, as a bit mask (ways 0..16).
#[inline(always)]
fn hint_matches(s: &Set, x: u16) -> u32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64. `hint` starts a 64-byte aligned `Set`, so the two
    // aligned 16-byte loads read its 32 bytes.
    unsafe {
        use std::arch::x86_64::*;
        let p = s.hint.as_ptr() as *const __m128i;
        let k = _mm_set1_epi16(x as i16);
        let a = _mm_cmpeq_epi16(_mm_load_si128(p), k);
        let b = _mm_cmpeq_epi16(_mm_load_si128(p.add(1)), k);
        _mm_movemask_epi8(_mm_packs_epi16(a, b)) as u32
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0;
        for w in 0..16 {
            if s.hint[w] == x {
                m |= 1 << w;
            }
        }
        m
    }
}

/// The valid ways of `s`, as a bit mask.
#[inline(always)]
fn valid_mask(s: &Set) -> u32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64. `flags` sits at byte 32 of a 64-byte aligned `Set`, so
    // the aligned 16-byte load reads exactly its 16 bytes; `VALID` is each byte's top bit.
    unsafe {
        use std::arch::x86_64::*;
        _mm_movemask_epi8(_mm_load_si128(s.flags.as_ptr() as *const __m128i)) as u32
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0;
        for w in 0..16 {
            if s.flags[w] & VALID != 0 {
                m |= 1 << w;
            }
        }
        m
    }
}

const NIBBLES: u64 = 0x1111_1111_1111_1111;

/// The LRU order `perm` (way numbers by recency, nibble 0 the most recent) with way `w` moved to
/// the front.
/// The page-walk caches (walk.rs) keep their order the same way, in a `u16`.
#[inline(always)]
pub(crate) fn promote(perm: u64, w: usize) -> u64 {
    // Nibble k of `x` is zero iff nibble k of `perm` is `w`. The lowest zero nibble of `x` is
    // the lowest flagged by the borrow trick below (a nibble above a zero one may be flagged
    // too, by the borrow, but never one below it): `w` is among the first `ways` nibbles,
    // below any unused (zero) one.
    let x = perm ^ (NIBBLES * w as u64);
    let zero = x.wrapping_sub(NIBBLES) & !x & (NIBBLES << 3);
    // Bit 4k + 3 for w's nibble k; `upto` covers nibbles 0..=k (all 64 bits when k = 15).
    let top = zero & zero.wrapping_neg();
    let upto = (top << 1).wrapping_sub(1);
    // Nibbles 0..k move up one, `w` goes to nibble 0, nibbles above k stay.
    (perm & !upto) | ((perm << 4) & upto) | w as u64
}

/// `Small::fill` filled an invalid way (size indexes are below 16).
const NO_EVICTION: usize = 16;

/// Arrays of at most 16 ways (see `Set`).
#[derive(Clone, Debug)]
struct Small {
    sets: Vec<Set>,
    /// Bit shift of the least recently used way's nibble in the LRU order.
    lru_shift: u32,
    /// The nibbles of the LRU order in use.
    perm_mask: u64,
    /// Bits 0..ways.
    way_mask: u32,
    /// Host lines per set: the header and one per four ways.
    lines: usize,
}

impl Small {
    fn new(sets: usize, ways: usize) -> Small {
        let perm = (0..ways).fold(0u64, |p, w| p | (w as u64) << (4 * w));
        let set = Set {
            hint: [0; 16],
            flags: [0; 16],
            perm,
            _pad: 0,
            g: [[INVALID; 8]; 4],
        };
        Small {
            sets: vec![set; sets],
            lru_shift: 4 * (ways as u32 - 1),
            perm_mask: u64::MAX >> (64 - 4 * ways),
            way_mask: ((1u64 << ways) - 1) as u32,
            lines: 1 + ways.div_ceil(4),
        }
    }

    /// Set `set`, which every caller takes from `Array::set_of` (or a loop over the sets).
    #[inline(always)]
    fn set(&self, set: usize) -> &Set {
        debug_assert!(set < self.sets.len());
        // SAFETY: `set_of` is below the set count (a mask of a power of two less one, or a
        // remainder), and `sets` has that many sets.
        unsafe { self.sets.get_unchecked(set) }
    }

    /// As `set`, mutably.
    #[inline(always)]
    fn set_mut(&mut self, set: usize) -> &mut Set {
        debug_assert!(set < self.sets.len());
        // SAFETY: as in `set`.
        unsafe { self.sets.get_unchecked_mut(set) }
    }

    #[inline(always)]
    fn tag(&self, set: usize, w: usize) -> u64 {
        self.sets[set].g[(w >> 2) & 3][w & 3]
    }

    #[inline(always)]
    fn valid_bits(&self, set: usize) -> u32 {
        valid_mask(&self.sets[set])
    }

    /// The way of `set` holding `tag`.
    #[inline(always)]
    fn find(&self, set: usize, tag: u64) -> Option<usize> {
        let s = self.set(set);
        let mut m = hint_matches(s, hint(tag)) & valid_mask(s);
        while m != 0 {
            let w = m.trailing_zeros() as usize;
            if s.g[(w >> 2) & 3][w & 3] == tag {
                return Some(w);
            }
            m &= m - 1;
        }
        None
    }

    #[inline(always)]
    fn touch(&mut self, set: usize, w: usize) {
        let p = &mut self.set_mut(set).perm;
        // Promoting the most recent way changes nothing.
        if (*p & 0xF) as usize != w {
            *p = promote(*p, w);
        }
    }

    #[inline(always)]
    fn translation(&self, set: usize, w: usize, size: SizeClass) -> Translation {
        let s = self.set(set);
        let f = s.flags[w & 15];
        Translation {
            pfn: Pfn(s.g[(w >> 2) & 3][4 + (w & 3)]),
            size,
            writable: f & WRITABLE != 0,
            dirty: f & DIRTY != 0,
        }
    }

    #[inline(always)]
    fn set_data(&mut self, set: usize, w: usize, t: Translation) {
        let s = &mut self.sets[set];
        s.g[(w >> 2) & 3][4 + (w & 3)] = t.pfn.0;
        let f = &mut s.flags[w & 15];
        *f = (*f & !(WRITABLE | DIRTY))
            | ((t.writable as u8) * WRITABLE)
            | ((t.dirty as u8) * DIRTY);
    }

    /// Index in the array's sizes of valid way `w`'s size class.
    #[inline(always)]
    fn size_idx(&self, set: usize, w: usize) -> usize {
        (self.sets[set].flags[w & 15] >> SIZE_SHIFT & 0xF) as usize
    }

    /// Fills a way of `set` with `tag` (of size index `size`) translating to `t`, as the most
    /// recently used, and returns the size index of the entry it evicted, or `NO_EVICTION`:
    /// the lowest invalid way, else the least recently used.
    #[inline(always)]
    fn fill(&mut self, set: usize, tag: u64, h: u16, size: usize, t: Translation) -> usize {
        debug_assert_eq!(h, hint(tag));
        let way_mask = self.way_mask;
        let (lru_shift, perm_mask) = (self.lru_shift, self.perm_mask);
        let s = self.set_mut(set);
        let free = !valid_mask(s) & way_mask;
        let perm = s.perm;
        let (w, evicted) = if free != 0 {
            let w = free.trailing_zeros() as usize;
            s.perm = promote(perm, w);
            (w, NO_EVICTION)
        } else {
            // The LRU way is the last nibble: rotate it to the front.
            let w = (perm >> lru_shift) as usize & 0xF;
            s.perm = ((perm << 4) | w as u64) & perm_mask;
            (w, (s.flags[w] >> SIZE_SHIFT & 0xF) as usize)
        };
        s.flags[w & 15] = flags_of(&t, size);
        s.hint[w & 15] = h;
        let (g, k) = ((w >> 2) & 3, w & 3);
        s.g[g][k] = tag;
        s.g[g][4 + k] = t.pfn.0;
        evicted
    }

    #[inline(always)]
    fn clear(&mut self, set: usize, w: usize) {
        let s = &mut self.sets[set];
        s.g[(w >> 2) & 3][w & 3] = INVALID;
        s.flags[w & 15] = 0;
    }

    /// Host bytes of the lines in use.
    fn footprint(&self) -> usize {
        self.sets.len() * self.lines * 64
    }
}

/// One way of an array of more than 16 ways.
#[derive(Clone, Copy, Debug)]
struct Slot {
    tag: u64,
    pfn: u64,
    writable: bool,
    dirty: bool,
}

/// Arrays of more than 16 ways (the fully associative TLBs of the Alpha and the PA-8000).
///
/// A hash index from tag to slot, chained through the slots: `chain` holds, at `i < n`, the slot
/// after slot `i` in its bucket and at `n + b` the first slot of bucket `b`; the value `n` ends
/// a chain. `back[i]` is the position in `chain` that names slot `i` (`back[n]` absorbs writes).
/// Buckets are at least twice as many as slots, so chains are short; the index affects nothing
/// but speed. The recency order of each set is a circular doubly linked list through `prev` and
/// `next`, whose node `n + set` is the set's sentinel: `next` of it is the most recently used
/// slot, `prev` the least. With the sentinels no unlinking needs a branch.
#[derive(Clone, Debug)]
struct Big {
    slots: Vec<Slot>,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// One bit per slot: valid.
    valid: Vec<u64>,
    chain: Vec<u32>,
    back: Vec<u32>,
    bucket_shift: u32,
    /// Slots in the index.
    indexed: usize,
}

impl Big {
    fn new(sets: usize, ways: usize) -> Big {
        let n = sets * ways;
        let buckets = (2 * n).next_power_of_two().max(2);
        // Empty lists: each sentinel points to itself.
        let ring: Vec<u32> = (0..n + sets).map(|i| i as u32).collect();
        Big {
            slots: vec![
                Slot {
                    tag: INVALID,
                    pfn: 0,
                    writable: false,
                    dirty: false,
                };
                n
            ],
            prev: ring.clone(),
            next: ring,
            valid: vec![0; n.div_ceil(64)],
            chain: vec![n as u32; n + buckets],
            back: vec![0; n + 1],
            bucket_shift: 64 - buckets.trailing_zeros(),
            indexed: 0,
        }
    }

    /// Position in `chain` of the first slot of `tag`'s bucket.
    #[inline(always)]
    fn bucket(&self, tag: u64) -> usize {
        self.slots.len()
            + ((tag ^ (tag >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.bucket_shift)
                as usize
    }

    /// The slot holding `tag`.
    #[inline]
    fn get(&self, tag: u64) -> Option<usize> {
        let end = self.slots.len() as u32;
        let mut s = self.chain[self.bucket(tag)];
        while s != end {
            if self.slots[s as usize].tag == tag {
                return Some(s as usize);
            }
            s = self.chain[s as usize];
        }
        None
    }

    /// Puts `tag` in `slot` (invalid) and indexes it.
    #[inline]
    fn set_tag(&mut self, slot: usize, tag: u64) {
        let h = self.bucket(tag);
        let first = self.chain[h];
        self.slots[slot].tag = tag;
        self.chain[slot] = first;
        self.back[first as usize] = slot as u32;
        self.chain[h] = slot as u32;
        self.back[slot] = h as u32;
        self.indexed += 1;
    }

    /// Removes valid `slot` from the index.
    #[inline]
    fn unindex(&mut self, slot: usize) {
        let (at, after) = (self.back[slot], self.chain[slot]);
        self.chain[at as usize] = after;
        self.back[after as usize] = at;
        self.indexed -= 1;
    }

    #[inline]
    fn is_valid(&self, slot: usize) -> bool {
        self.valid[slot / 64] >> (slot % 64) & 1 != 0
    }

    /// The sentinel of `set`'s recency list.
    #[inline(always)]
    fn sentinel(&self, set: usize) -> usize {
        self.slots.len() + set
    }

    #[inline(always)]
    fn unlink(&mut self, slot: usize) {
        let (p, n) = (self.prev[slot], self.next[slot]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
    }

    #[inline(always)]
    fn push_front(&mut self, set: usize, slot: usize) {
        let h = self.sentinel(set);
        let first = self.next[h];
        self.next[slot] = first;
        self.prev[slot] = h as u32;
        self.prev[first as usize] = slot as u32;
        self.next[h] = slot as u32;
    }

    /// Makes valid `slot` the most recently used of its set.
    #[inline]
    fn touch(&mut self, set: usize, slot: usize) {
        self.unlink(slot);
        self.push_front(set, slot);
    }

    /// The least recently used slot of `set` (which has a valid one).
    #[inline]
    fn lru(&self, set: usize) -> usize {
        self.prev[self.sentinel(set)] as usize
    }

    /// The lowest invalid slot in `[from, to)`.
    fn first_free(&self, from: usize, to: usize) -> Option<usize> {
        let mut i = from;
        while i < to {
            let word = !self.valid[i / 64] >> (i % 64);
            if word != 0 {
                let f = i + word.trailing_zeros() as usize;
                return (f < to).then_some(f);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }

    #[inline]
    fn translation(&self, slot: usize, size: SizeClass) -> Translation {
        let s = &self.slots[slot];
        Translation {
            pfn: Pfn(s.pfn),
            size,
            writable: s.writable,
            dirty: s.dirty,
        }
    }

    #[inline]
    fn set_data(&mut self, slot: usize, t: Translation) {
        let s = &mut self.slots[slot];
        s.pfn = t.pfn.0;
        s.writable = t.writable;
        s.dirty = t.dirty;
    }

    fn clear(&mut self, slot: usize) {
        self.unindex(slot);
        self.unlink(slot);
        self.slots[slot].tag = INVALID;
        self.valid[slot / 64] &= !(1 << (slot % 64));
    }

    /// Checks the index and the recency lists against the valid slots.
    fn check(&self, sets: usize, ways: usize) -> Result<(), String> {
        let n = self.slots.len();
        let valid = (0..n).filter(|&i| self.is_valid(i)).count();
        if self.indexed != valid {
            return Err(format!("index has {} entries, {valid} valid", self.indexed));
        }
        for i in (0..n).filter(|&i| self.is_valid(i)) {
            if self.chain[self.back[i] as usize] != i as u32 {
                return Err(format!("slot {i}: index back link broken"));
            }
        }
        for set in 0..sets {
            let h = self.sentinel(set) as u32;
            let (mut count, mut prev, mut cur) = (0usize, h, self.next[h as usize]);
            while cur != h {
                let c = cur as usize;
                if c / ways != set || !self.is_valid(c) || self.prev[c] != prev {
                    return Err(format!("set {set}: recency list broken at slot {cur}"));
                }
                count += 1;
                if count > ways {
                    return Err(format!("set {set}: recency list has a cycle"));
                }
                prev = cur;
                cur = self.next[c];
            }
            let in_set = (set * ways..(set + 1) * ways)
                .filter(|&i| self.is_valid(i))
                .count();
            if self.prev[h as usize] != prev || count != in_set {
                return Err(format!(
                    "set {set}: recency list of {count} slots, {in_set} valid"
                ));
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
enum Store {
    Small(Small),
    Big(Big),
}

#[derive(Clone, Debug)]
struct Array {
    sizes: Sizes,
    /// Hits and refills make an entry most recently used (LRU); not under round robin.
    touch_on_hit: bool,
    sets: u64,
    /// `sets - 1` when `sets` is a power of two (every preset), so the set index is a mask;
    /// else 0 and `set_of` divides.
    set_mask: u64,
    sets_pow2: bool,
    /// A `Store::Small` with a power-of-two set count (every preset's array of at most 16
    /// ways): lookups and fills take the specialised path.
    small_pow2: bool,
    ways: usize,
    /// Valid entries, and all entries (`sets * ways`).
    valid: u32,
    total: u32,
    store: Store,
}

impl Array {
    fn new(cfg: &ArrayConfig, shifts: &[u8]) -> Array {
        let ways = cfg.ways.max(1) as usize;
        let sets = (cfg.entries as u64 / ways as u64).max(1);
        Array {
            sizes: Sizes::new(
                &cfg.sizes,
                shifts,
                ways <= 16 && sets.is_power_of_two() && cfg.replacement == TlbReplacement::Lru,
            ),
            touch_on_hit: cfg.replacement == TlbReplacement::Lru,
            sets,
            set_mask: if sets.is_power_of_two() { sets - 1 } else { 0 },
            sets_pow2: sets.is_power_of_two(),
            small_pow2: ways <= 16 && sets.is_power_of_two(),
            ways,
            valid: 0,
            total: (sets as usize * ways) as u32,
            store: if ways <= 16 {
                Store::Small(Small::new(sets as usize, ways))
            } else {
                Store::Big(Big::new(sets as usize, ways))
            },
        }
    }

    #[inline(always)]
    fn set_of(&self, vpn_at_size: u64) -> usize {
        (if self.sets_pow2 {
            vpn_at_size & self.set_mask
        } else {
            vpn_at_size % self.sets
        }) as usize
    }

    /// The slot (`set * ways + way`) holding `tag`, whose page number is `vpn`.
    #[inline(always)]
    fn find(&self, tag: u64, vpn: u64) -> Option<usize> {
        let set = self.set_of(vpn);
        match &self.store {
            Store::Small(s) => s.find(set, tag).map(|w| set * self.ways + w),
            Store::Big(b) => b.get(tag),
        }
    }

    /// The store of a `small_pow2` array.
    #[inline(always)]
    fn small(&self) -> &Small {
        debug_assert!(self.small_pow2);
        match &self.store {
            Store::Small(s) => s,
            // SAFETY: `small_pow2` implies `Store::Small` (`Array::new`).
            Store::Big(_) => unsafe { std::hint::unreachable_unchecked() },
        }
    }

    /// As `small`, mutably.
    #[inline(always)]
    fn small_mut(&mut self) -> &mut Small {
        debug_assert!(self.small_pow2);
        match &mut self.store {
            Store::Small(s) => s,
            // SAFETY: `small_pow2` implies `Store::Small` (`Array::new`).
            Store::Big(_) => unsafe { std::hint::unreachable_unchecked() },
        }
    }

    /// Looks `va` up at every size this array holds; on a hit makes the entry MRU.
    #[inline(always)]
    fn lookup(&mut self, asid: u32, va: u64) -> Option<Translation> {
        if self.sizes.one != u8::MAX {
            // One size with entries (the 4KB one under base pages) of an LRU `small_pow2` array
            // (the only ones keeping `one`): the probe of the loop below, once.
            let i = self.sizes.one as usize & 15;
            let (mask, sizes) = (self.set_mask, &self.sizes);
            let vpn = va >> sizes.shift[i];
            let tag = sizes.tag_hi[i] | asid_bits(asid) | (vpn & VPN_MASK);
            let set = (vpn & mask) as usize;
            let s = match &mut self.store {
                Store::Small(s) => s,
                // SAFETY: `one` is kept only under `small_pow2`, which implies `Store::Small`
                // (`Array::new`).
                Store::Big(_) => unsafe { std::hint::unreachable_unchecked() },
            };
            let w = s.find(set, tag)?;
            s.touch(set, w);
            return Some(s.translation(set, w, sizes.class[i]));
        }
        // The sizes with valid entries, in order.
        let mut live = self.sizes.live;
        if live == 0 {
            return None;
        }
        if self.small_pow2 {
            // As below, with the set a mask and the store known.
            let (mask, touch, ab) = (self.set_mask, self.touch_on_hit, asid_bits(asid));
            let sizes = &self.sizes;
            let s = match &mut self.store {
                Store::Small(s) => s,
                // SAFETY: `small_pow2` implies `Store::Small` (`Array::new`).
                Store::Big(_) => unsafe { std::hint::unreachable_unchecked() },
            };
            // `live` is not 0: test it after each probe only.
            loop {
                let i = live.trailing_zeros() as usize & 15;
                live &= live - 1;
                let vpn = va >> sizes.shift[i];
                let tag = sizes.tag_hi[i] | ab | (vpn & VPN_MASK);
                let set = (vpn & mask) as usize;
                if let Some(w) = s.find(set, tag) {
                    if touch {
                        s.touch(set, w);
                    }
                    return Some(s.translation(set, w, sizes.class[i]));
                }
                if live == 0 {
                    return None;
                }
            }
        }
        self.lookup_general(live, asid, va)
    }

    /// `lookup` of an array of more than 16 ways or a set count not a power of two.
    #[inline(never)]
    fn lookup_general(&mut self, mut live: u32, asid: u32, va: u64) -> Option<Translation> {
        while live != 0 {
            let i = live.trailing_zeros() as usize & 15;
            live &= live - 1;
            let class = self.sizes.class[i];
            let vpn = va >> self.sizes.shift[i];
            let tag = make_tag(asid, vpn, class);
            let set = self.set_of(vpn);
            match &mut self.store {
                Store::Small(s) => {
                    if let Some(w) = s.find(set, tag) {
                        if self.touch_on_hit {
                            s.touch(set, w);
                        }
                        return Some(s.translation(set, w, class));
                    }
                }
                Store::Big(b) => {
                    if let Some(slot) = b.get(tag) {
                        if self.touch_on_hit {
                            b.touch(set, slot);
                        }
                        return Some(b.translation(slot, class));
                    }
                }
            }
        }
        None
    }

    /// Hints the host to fetch the first line a lookup of `va` reads at each size: a set's
    /// header line, or a hash bucket.
    #[inline(always)]
    fn prefetch(&self, asid: u32, va: u64) {
        if self.sizes.one != u8::MAX {
            // One size with entries in a `small_pow2` array (the only ones keeping `one`):
            // the loop below, once.
            let i = self.sizes.one as usize & 15;
            let set = (va >> self.sizes.shift[i]) & self.set_mask;
            super::prefetch_ptr(self.small().sets.as_ptr().wrapping_add(set as usize));
            return;
        }
        let mut live = self.sizes.live;
        if self.small_pow2 {
            let s = self.small();
            while live != 0 {
                let i = live.trailing_zeros() as usize & 15;
                live &= live - 1;
                let set = (va >> self.sizes.shift[i]) & self.set_mask;
                super::prefetch_ptr(s.sets.as_ptr().wrapping_add(set as usize));
            }
            return;
        }
        while live != 0 {
            let i = live.trailing_zeros() as usize & 15;
            live &= live - 1;
            let vpn = va >> self.sizes.shift[i];
            match &self.store {
                Store::Small(s) => {
                    super::prefetch_ptr(s.sets.as_ptr().wrapping_add(self.set_of(vpn)))
                }
                Store::Big(b) => {
                    let tag = make_tag(asid, vpn, self.sizes.class[i]);
                    super::prefetch(&b.chain[b.bucket(tag)]);
                }
            }
        }
    }

    /// Host bytes of the structure.
    fn footprint(&self) -> usize {
        match &self.store {
            Store::Small(s) => s.footprint(),
            Store::Big(b) => {
                b.slots.len() * std::mem::size_of::<Slot>()
                    + (b.prev.len() + b.next.len() + b.chain.len() + b.back.len()) * 4
            }
        }
    }

    /// `insert` of a translation absent from this array, given its page number `vpn` (at
    /// `shift`), its `tag` and the tag's hint `h` (`Tlb::fill` computes them once for every
    /// level: they depend on the size class only).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn insert_absent(
        &mut self,
        asid: u32,
        va: u64,
        shift: u8,
        t: Translation,
        vpn: u64,
        tag: u64,
        h: u16,
    ) {
        debug_assert_eq!(
            (vpn, tag, h),
            (va >> shift, make_tag(asid, va >> shift, t.size), hint(tag))
        );
        if !self.small_pow2 {
            self.insert_any(asid, va, shift, t, true);
            return;
        }
        debug_assert!(
            self.find(tag, vpn).is_none(),
            "Array::insert_absent: translation said absent is present"
        );
        // The fill of `insert`, with the set a mask and the store known.
        let set = (vpn & self.set_mask) as usize;
        let new = self.sizes.index[t.size.0 as usize & 0xF] as usize;
        let old = self.small_mut().fill(set, tag, h, new, t);
        self.count_fill(old, new);
    }

    /// The counts after a fill of size index `new` that evicted `old` (`NO_EVICTION`: a free
    /// way): an entry of the same size replaced leaves them as they are (one test in the
    /// common case, and the host skips a read-modify-write chain through them).
    #[inline(always)]
    fn count_fill(&mut self, old: usize, new: usize) {
        if old != new {
            if old == NO_EVICTION {
                self.valid += 1;
            } else {
                self.sizes.dec(old);
            }
            self.sizes.inc(new);
        }
    }

    /// Inserts a translation as MRU, evicting the LRU way of its set if needed. `absent`: the
    /// caller knows the translation is not in this array (it just missed here).
    #[inline(always)]
    fn insert(&mut self, asid: u32, va: u64, shift: u8, t: Translation, absent: bool) {
        if absent && self.small_pow2 {
            let vpn = va >> shift;
            let tag = make_tag(asid, vpn, t.size);
            self.insert_absent(asid, va, shift, t, vpn, tag, hint(tag));
            return;
        }
        self.insert_any(asid, va, shift, t, absent);
    }

    /// `insert` of a translation that may be present, or into an array that is not
    /// `small_pow2` (more than 16 ways, or a set count not a power of two). Out of line and
    /// cold: the access path inserts absent translations into the presets' `small_pow2`
    /// arrays, and the general paths (the hashed store's) inlined there were register
    /// pressure.
    #[cold]
    #[inline(never)]
    fn insert_any(&mut self, asid: u32, va: u64, shift: u8, t: Translation, absent: bool) {
        let vpn = va >> shift;
        let tag = make_tag(asid, vpn, t.size);
        debug_assert!(
            !absent || self.find(tag, vpn).is_none(),
            "Array::insert: translation said absent is present"
        );
        let set = self.set_of(vpn);
        let found = if absent { None } else { self.find(tag, vpn) };
        let new = self.sizes.idx(tag);
        match &mut self.store {
            Store::Small(s) => {
                let w = match found {
                    Some(slot) => {
                        let w = slot - set * self.ways;
                        if self.touch_on_hit {
                            s.touch(set, w);
                        }
                        w
                    }
                    None => {
                        let old = s.fill(set, tag, hint(tag), new, t);
                        self.count_fill(old, new);
                        return;
                    }
                };
                s.set_data(set, w, t);
            }
            Store::Big(b) => {
                let slot = match found {
                    Some(slot) => {
                        if self.touch_on_hit {
                            b.touch(set, slot);
                        }
                        slot
                    }
                    None => {
                        let from = set * self.ways;
                        let free = if self.valid == self.total {
                            None
                        } else {
                            b.first_free(from, from + self.ways)
                        };
                        let slot = match free {
                            Some(f) => {
                                self.valid += 1;
                                b.valid[f / 64] |= 1 << (f % 64);
                                f
                            }
                            None => {
                                let v = b.lru(set);
                                let old = b.slots[v].tag;
                                self.sizes.dec(self.sizes.idx(old));
                                b.unindex(v);
                                b.unlink(v);
                                v
                            }
                        };
                        self.sizes.inc(new);
                        b.set_tag(slot, tag);
                        b.push_front(set, slot);
                        slot
                    }
                };
                b.set_data(slot, t);
            }
        }
    }

    /// Sets the data of the entry for `va` at `shift` and `t.size`, if present; no LRU change.
    fn update(&mut self, asid: u32, va: u64, shift: u8, t: Translation) {
        let vpn = va >> shift;
        if let Some(slot) = self.find(make_tag(asid, vpn, t.size), vpn) {
            match &mut self.store {
                Store::Small(s) => {
                    let (set, w) = (slot / self.ways, slot % self.ways);
                    s.set_data(set, w, t);
                }
                Store::Big(b) => b.set_data(slot, t),
            }
        }
    }

    /// Calls `f(slot, tag, translation)` for every valid entry, in slot order
    /// (`slot = set * ways + way`).
    fn for_each(&self, mut f: impl FnMut(usize, u64, Translation)) {
        match &self.store {
            Store::Small(s) => {
                for set in 0..self.sets as usize {
                    let mut m = s.valid_bits(set);
                    while m != 0 {
                        let w = m.trailing_zeros() as usize;
                        let tag = s.tag(set, w);
                        f(
                            set * self.ways + w,
                            tag,
                            s.translation(set, w, SizeClass(tag_class(tag))),
                        );
                        m &= m - 1;
                    }
                }
            }
            Store::Big(b) => {
                for (i, &word) in b.valid.iter().enumerate() {
                    let mut m = word;
                    while m != 0 {
                        let slot = i * 64 + m.trailing_zeros() as usize;
                        let tag = b.slots[slot].tag;
                        f(slot, tag, b.translation(slot, SizeClass(tag_class(tag))));
                        m &= m - 1;
                    }
                }
            }
        }
    }

    /// Invalidates the entry in `slot` (valid).
    fn invalidate_slot(&mut self, slot: usize) {
        let set = slot / self.ways;
        let tag = match &mut self.store {
            Store::Small(s) => {
                let w = slot % self.ways;
                let tag = s.tag(set, w);
                s.clear(set, w);
                tag
            }
            Store::Big(b) => {
                let tag = b.slots[slot].tag;
                b.clear(slot);
                tag
            }
        };
        self.sizes.dec(self.sizes.idx(tag));
        self.valid -= 1;
    }

    /// Invalidates every valid entry whose tag satisfies `pred`.
    fn invalidate_where(&mut self, pred: impl Fn(u64, &Sizes) -> bool) {
        let Array {
            sizes,
            sets,
            valid,
            store,
            ..
        } = self;
        match store {
            Store::Small(s) => {
                for set in 0..*sets as usize {
                    let mut m = s.valid_bits(set);
                    while m != 0 {
                        let w = m.trailing_zeros() as usize;
                        m &= m - 1;
                        let tag = s.tag(set, w);
                        if pred(tag, sizes) {
                            s.clear(set, w);
                            sizes.dec(sizes.idx(tag));
                            *valid -= 1;
                        }
                    }
                }
            }
            Store::Big(b) => {
                for i in 0..b.valid.len() {
                    let mut m = b.valid[i];
                    while m != 0 {
                        let slot = i * 64 + m.trailing_zeros() as usize;
                        m &= m - 1;
                        let tag = b.slots[slot].tag;
                        if pred(tag, sizes) {
                            b.clear(slot);
                            sizes.dec(sizes.idx(tag));
                            *valid -= 1;
                        }
                    }
                }
            }
        }
    }

    /// Invalidates every entry of `asid` overlapping `[start, end)`.
    fn invalidate_range(&mut self, asid: u32, start: u64, end: u64) {
        if self.valid == 0 {
            return;
        }
        // Probe page by page when the range is small, else scan the whole array.
        let mut probes = 0u64;
        for i in 0..self.sizes.n {
            let shift = self.sizes.shift[i];
            probes += ((end - 1) >> shift) - (start >> shift) + 1;
        }
        if probes <= self.total as u64 {
            for i in 0..self.sizes.n {
                let (class, shift) = (self.sizes.class[i], self.sizes.shift[i]);
                for vpn in (start >> shift)..=((end - 1) >> shift) {
                    if let Some(slot) = self.find(make_tag(asid, vpn, class), vpn) {
                        self.invalidate_slot(slot);
                    }
                }
            }
        } else {
            let asid = asid & 0x7_FFFF;
            self.invalidate_where(|tag, sizes| {
                if tag_asid(tag) != asid {
                    return false;
                }
                let shift = sizes.shift_of(tag);
                let page_start = tag_vpn(tag) << shift;
                let page_end = page_start + (1u64 << shift);
                page_start < end && start < page_end
            });
        }
    }

    fn invalidate_asid(&mut self, asid: u32) {
        if self.valid == 0 {
            return;
        }
        let asid = asid & 0x7_FFFF;
        self.invalidate_where(|tag, _| tag_asid(tag) == asid);
    }

    /// Checks counts, the set of every tag, the hints, the LRU order and the index.
    fn check(&self) -> Result<(), String> {
        let invalid_tags = match &self.store {
            Store::Small(s) => (0..self.sets as usize).any(|set| {
                let free = !s.valid_bits(set) & s.way_mask;
                (0..self.ways).any(|w| free >> w & 1 != 0 && s.tag(set, w) != INVALID)
            }),
            Store::Big(b) => {
                (0..self.total as usize).any(|i| !b.is_valid(i) && b.slots[i].tag != INVALID)
            }
        };
        if invalid_tags {
            return Err("an invalid way holds a tag".into());
        }
        let mut valid = 0u32;
        let mut by_size = [0u32; 16];
        let mut err = None;
        self.for_each(|slot, tag, t| {
            if err.is_some() {
                return;
            }
            valid += 1;
            let class = tag_class(tag);
            if tag & (1 << 63) == 0 || t.size.0 != class {
                err = Some(format!("slot {slot}: bad tag {tag:#x}"));
            } else if self.sizes.holds(SizeClass(class)).is_none() {
                err = Some(format!(
                    "entry of size class {class} in an array that does not hold it"
                ));
            } else if self.set_of(tag_vpn(tag)) != slot / self.ways {
                err = Some("entry in the wrong set".into());
            } else {
                by_size[self.sizes.idx(tag)] += 1;
                let ok = match &self.store {
                    Store::Small(s) => {
                        let (set, w) = (slot / self.ways, slot % self.ways);
                        s.sets[set].hint[w] == hint(tag)
                            && s.size_idx(set, w) == self.sizes.idx(tag)
                    }
                    Store::Big(b) => b.get(tag) == Some(slot),
                };
                if !ok {
                    err = Some(format!("slot {slot}: stale hint or index"));
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        if valid != self.valid {
            return Err(format!("valid count {} but {valid} valid tags", self.valid));
        }
        let live = (0..16).fold(0u32, |m, i| m | ((self.sizes.valid[i] > 0) as u32) << i);
        if live != self.sizes.live {
            return Err(format!(
                "live sizes {:#x}, counted {live:#x}",
                self.sizes.live
            ));
        }
        if self.sizes.one != self.sizes.one_of(live) {
            return Err(format!("one size {} of live {live:#x}", self.sizes.one));
        }
        if by_size[..self.sizes.n] != self.sizes.valid[..self.sizes.n]
            || self.sizes.valid[self.sizes.n..].iter().any(|&v| v != 0)
        {
            return Err(format!(
                "per-size counts {:?}, recounted {:?}",
                &self.sizes.valid[..self.sizes.n],
                &by_size[..self.sizes.n]
            ));
        }
        match &self.store {
            Store::Small(s) => {
                for set in 0..self.sets as usize {
                    let perm = s.sets[set].perm;
                    let mut seen = 0u32;
                    for k in 0..16 {
                        let w = (perm >> (4 * k)) & 0xF;
                        if k < self.ways {
                            seen |= 1 << w;
                        } else if w != 0 {
                            return Err(format!("set {set}: LRU order {perm:#x} has extra ways"));
                        }
                    }
                    if seen != s.way_mask {
                        return Err(format!("set {set}: LRU order {perm:#x} is no permutation"));
                    }
                }
            }
            Store::Big(b) => {
                b.check(self.sets as usize, self.ways)?;
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
struct Level {
    arrays: Vec<Array>,
    hit_cycles: u64,
    stats: LevelStats,
    /// For each size class, the first array holding it and its page shift (255 = none). One
    /// entry per `u8` (classes from 16 on are held by none), so a fill indexes it unchecked.
    insert_to: [(u8, u8); 256],
    /// Bit a set once array a has been filled (never cleared): a superset of the arrays with
    /// valid entries, so a lookup skips the others without visiting them (on skylake under
    /// base pages, two of the L1 DTLB's three arrays and one of the STLB's two are empty: the
    /// loop over every array was about 30 host instructions per GUPS update).
    filled: u64,
    /// The index of the one array filled when `filled` has one bit, else `u8::MAX`.
    single: u8,
}

impl Level {
    fn new(cfg: &LevelConfig, shifts: &[u8]) -> Level {
        let arrays: Vec<Array> = cfg.arrays.iter().map(|a| Array::new(a, shifts)).collect();
        let mut insert_to = [(u8::MAX, 0); 256];
        for (c, slot) in insert_to.iter_mut().enumerate().take(16) {
            if let Some((a, shift)) = arrays
                .iter()
                .enumerate()
                .find_map(|(i, a)| a.sizes.holds(SizeClass(c as u8)).map(|s| (i, s)))
            {
                *slot = (a as u8, shift);
            }
        }
        assert!(arrays.len() <= 64, "a TLB level has at most 64 arrays");
        Level {
            arrays,
            filled: 0,
            single: u8::MAX,
            hit_cycles: cfg.hit_cycles,
            stats: LevelStats {
                name: cfg.name.clone(),
                hits: 0,
                misses: 0,
            },
            insert_to,
        }
    }

    #[inline(always)]
    fn lookup(&mut self, asid: u32, va: u64) -> Option<Translation> {
        // One array ever filled (on skylake under base pages, the L1 DTLB's 4KB array and the
        // STLB's 4K/2M one): the loop below visits it alone, without the loop.
        let a = self.single;
        if a != u8::MAX {
            debug_assert_eq!(self.filled, 1 << a);
            // SAFETY: as below; `single` is a bit of `filled` (`mark_filled`).
            return unsafe { self.arrays.get_unchecked_mut(a as usize) }.lookup(asid, va);
        }
        // The arrays ever filled, in order (the others are empty).
        let mut m = self.filled;
        while m != 0 {
            let a = m.trailing_zeros() as usize;
            m &= m - 1;
            debug_assert!(a < self.arrays.len());
            // SAFETY: `insert` and `insert_absent` set only bits of indexes of `arrays`.
            if let Some(t) = unsafe { self.arrays.get_unchecked_mut(a) }.lookup(asid, va) {
                return Some(t);
            }
        }
        None
    }

    /// Marks array `a` filled (and `single`).
    #[inline(always)]
    fn mark_filled(&mut self, a: u8) {
        if self.filled >> a & 1 == 0 {
            self.filled |= 1 << a;
            self.single = if self.filled.is_power_of_two() {
                a
            } else {
                u8::MAX
            };
        }
    }

    #[inline(always)]
    fn insert(&mut self, asid: u32, va: u64, t: Translation, absent: bool) {
        let (a, shift) = self.insert_to[t.size.0 as usize];
        if a != u8::MAX {
            debug_assert!((a as usize) < self.arrays.len());
            self.mark_filled(a);
            // SAFETY: `new` puts in `insert_to` only indexes of `arrays` (or `u8::MAX`).
            unsafe { self.arrays.get_unchecked_mut(a as usize) }.insert(asid, va, shift, t, absent);
        }
    }

    /// `insert` of a translation absent from the level, with its page number, tag and hint
    /// (`Array::insert_absent`).
    #[inline(always)]
    fn insert_absent(&mut self, asid: u32, va: u64, t: Translation, vpn: u64, tag: u64, h: u16) {
        let (a, shift) = self.insert_to[t.size.0 as usize];
        if a != u8::MAX {
            debug_assert!((a as usize) < self.arrays.len());
            self.mark_filled(a);
            // SAFETY: as in `insert`.
            unsafe { self.arrays.get_unchecked_mut(a as usize) }
                .insert_absent(asid, va, shift, t, vpn, tag, h);
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
    /// Missed every level; the caller walks and then calls `fill`. `cycles`: the lookup of the
    /// last level searched (its `hit_cycles`): a miss is known when that lookup ends, and only
    /// then does the walk start (the walker is engaged by a miss in every level: Intel's
    /// DTLB_LOAD_MISSES.MISS_CAUSES_A_WALK, "misses in all TLB levels that cause a page walk").
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

/// `Tlb::prefetch` skips arrays of at most this many host bytes.
const PREFETCH_ABOVE: usize = 16 << 10;

/// The whole TLB hierarchy of one CPU.
#[derive(Clone, Debug)]
pub struct Tlb {
    l1d: Level,
    l1i: Option<Level>,
    lower: Vec<Level>,
    shifts: Vec<u8>,
    /// The arrays `prefetch` hints, as (level: 0 L1D, 1 L1I, 2.. lower; array index): those
    /// too large to stay in the host's L1 data cache. Prefetching the small ones (the L1 TLBs,
    /// the fully associative ones) cost more than it saved (skylake GUPS).
    prefetched: Vec<(u8, u8)>,
    /// The index in the one lower level of the one array `prefetched` lists, when that is all
    /// it lists (every preset: the STLB's 4K/2M array), else `u8::MAX`: `prefetch` hints it
    /// without the loop and the match over levels (about ten host instructions a GUPS access).
    prefetch_lower: u8,
    pub last: LastHit,
}

impl Tlb {
    /// `shifts[i]` is the byte shift of size class `i`.
    pub fn new(cfg: &TlbConfig, shifts: &[u8]) -> Tlb {
        let mut t = Tlb {
            l1d: Level::new(&cfg.l1d, shifts),
            l1i: cfg.l1i.as_ref().map(|l| Level::new(l, shifts)),
            lower: cfg.lower.iter().map(|l| Level::new(l, shifts)).collect(),
            shifts: shifts.to_vec(),
            prefetched: Vec::new(),
            prefetch_lower: u8::MAX,
            last: LastHit::default(),
        };
        let levels = std::iter::once(Some(&t.l1d))
            .chain(std::iter::once(t.l1i.as_ref()))
            .chain(t.lower.iter().map(Some));
        for (li, l) in levels.enumerate() {
            for (ai, a) in l.iter().flat_map(|l| l.arrays.iter().enumerate()) {
                if a.footprint() > PREFETCH_ABOVE {
                    t.prefetched.push((li as u8, ai as u8));
                }
            }
        }
        if let ([(2, a)], 1) = (t.prefetched.as_slice(), t.lower.len()) {
            t.prefetch_lower = *a;
        }
        t
    }

    #[inline(always)]
    fn first_mut(&mut self, ifetch: bool) -> &mut Level {
        if ifetch {
            if let Some(l) = self.l1i.as_mut() {
                return l;
            }
        }
        &mut self.l1d
    }

    fn levels(&self) -> impl Iterator<Item = &Level> {
        std::iter::once(&self.l1d)
            .chain(self.l1i.iter())
            .chain(self.lower.iter())
    }

    fn levels_mut(&mut self) -> impl Iterator<Item = &mut Level> {
        std::iter::once(&mut self.l1d)
            .chain(self.l1i.iter_mut())
            .chain(self.lower.iter_mut())
    }

    /// Counts `n` L1 hits on the entry recorded in `last` (the fast path).
    #[inline]
    pub fn count_last_hits(&mut self, n: u64) {
        self.l1d.stats.hits += n;
    }

    /// Hints the host CPU to fetch what a lookup of `va` reads first, at every size with
    /// entries, in every array too large to stay in the host's L1 cache (on the presets, the
    /// STLB's 4K/2M array): the set's header line, or the hash bucket. The sets of the other
    /// arrays are hot anyway. Speed only: changes no modelled state.
    #[inline]
    pub fn prefetch(&self, asid: u32, va: u64) {
        let a = self.prefetch_lower;
        if a != u8::MAX {
            if let [l] = self.lower.as_slice() {
                debug_assert!((a as usize) < l.arrays.len());
                // SAFETY: `new` sets `prefetch_lower` only to an array index of the one lower
                // level (from `prefetched`), and levels' arrays never change in number.
                unsafe { l.arrays.get_unchecked(a as usize) }.prefetch(asid, va);
                return;
            }
        }
        for &(l, a) in &self.prefetched {
            let level = match l {
                0 => &self.l1d,
                1 => self
                    .l1i
                    .as_ref()
                    .expect("Tlb::prefetch: an L1I array without an L1I"),
                // SAFETY: `new` lists only levels and arrays that exist.
                i => unsafe { self.lower.get_unchecked(i as usize - 2) },
            };
            // SAFETY: as above.
            unsafe { level.arrays.get_unchecked(a as usize) }.prefetch(asid, va);
        }
    }

    /// Looks up `va`; on a hit at a lower level the translation is filled into the levels above.
    #[inline(always)]
    pub fn lookup(&mut self, asid: u32, va: u64, ifetch: bool) -> Lookup {
        let first = self.first_mut(ifetch);
        if let Some(t) = first.lookup(asid, va) {
            first.stats.hits += 1;
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
        if let [lvl] = self.lower.as_mut_slice() {
            // The presets' one lower level (the STLB): the loop below without its control and
            // the fill of the levels between (none), which were a dozen host instructions.
            if let Some(t) = lvl.lookup(asid, va) {
                lvl.stats.hits += 1;
                let cycles = lvl.hit_cycles;
                self.first_mut(ifetch).insert(asid, va, t, true);
                if !ifetch {
                    self.set_last(asid, va, t);
                }
                return Lookup::Hit {
                    level: 1,
                    t,
                    cycles,
                };
            }
            lvl.stats.misses += 1;
            return Lookup::Miss {
                cycles: lvl.hit_cycles,
            };
        }
        self.lookup_lower(asid, va, ifetch)
    }

    /// `lookup` past the first level, with other than one lower level. Out of line: the presets
    /// have one, and this loop inlined into the access path was register pressure there.
    #[cold]
    #[inline(never)]
    fn lookup_lower(&mut self, asid: u32, va: u64, ifetch: bool) -> Lookup {
        for i in 0..self.lower.len() {
            let lvl = &mut self.lower[i];
            if let Some(t) = lvl.lookup(asid, va) {
                lvl.stats.hits += 1;
                let cycles = lvl.hit_cycles;
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
        // The last level searched: the lowest, or the first when there is no other.
        let cycles = match self.lower.last() {
            Some(l) => l.hit_cycles,
            None => self.first_mut(ifetch).hit_cycles,
        };
        Lookup::Miss { cycles }
    }

    #[inline]
    fn set_last(&mut self, asid: u32, va: u64, t: Translation) {
        self.set_last_at(asid, va, t, self.shifts[t.size.0 as usize]);
    }

    /// `set_last`, given the page shift of `t.size`.
    #[inline(always)]
    fn set_last_at(&mut self, asid: u32, va: u64, t: Translation, shift: u8) {
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
    #[inline(always)]
    pub fn fill(&mut self, asid: u32, va: u64, t: Translation, ifetch: bool) {
        // The page number, the tag and its hint are the same in every array holding the size
        // (a size's shift is the machine's): computed once.
        if let Some(&shift) = self.shifts.get(t.size.0 as usize) {
            let vpn = va >> shift;
            let tag = make_tag(asid, vpn, t.size);
            let h = hint(tag);
            if let [l] = self.lower.as_mut_slice() {
                // The presets' one lower level, without the loop.
                l.insert_absent(asid, va, t, vpn, tag, h);
            } else {
                self.fill_lower(asid, va, t, vpn, tag, h);
            }
            self.first_mut(ifetch)
                .insert_absent(asid, va, t, vpn, tag, h);
            if !ifetch {
                self.set_last_at(asid, va, t, shift);
            }
            return;
        }
        self.fill_any(asid, va, t, ifetch);
    }

    /// `fill`'s inserts into the lower levels when there are other than one. Out of line, as
    /// `lookup_lower`.
    #[cold]
    #[inline(never)]
    fn fill_lower(&mut self, asid: u32, va: u64, t: Translation, vpn: u64, tag: u64, h: u16) {
        for l in &mut self.lower {
            l.insert_absent(asid, va, t, vpn, tag, h);
        }
    }

    /// `fill` of a size class with no page shift. Out of line: kept out of the access path.
    #[cold]
    #[inline(never)]
    fn fill_any(&mut self, asid: u32, va: u64, t: Translation, ifetch: bool) {
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
        for l in self.levels_mut() {
            for a in &mut l.arrays {
                if let Some(shift) = a.sizes.holds(t.size) {
                    a.update(asid, va, shift, dirty);
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
        for l in self.levels_mut() {
            for a in &mut l.arrays {
                a.invalidate_range(asid, start, end);
            }
        }
    }

    /// Invalidates every entry of `asid` (process exit / exec).
    pub fn invalidate_asid(&mut self, asid: u32) {
        self.last = LastHit::default();
        for l in self.levels_mut() {
            for a in &mut l.arrays {
                a.invalidate_asid(asid);
            }
        }
    }

    /// Every valid entry: (asid, virtual start address, translation), for invariant checks.
    pub fn entries(&self) -> Vec<(u32, u64, Translation)> {
        let mut out = Vec::new();
        for l in self.levels() {
            for a in &l.arrays {
                a.for_each(|_, tag, t| {
                    let shift = self.shifts[t.size.0 as usize];
                    out.push((tag_asid(tag), tag_vpn(tag) << shift, t));
                });
            }
        }
        out
    }

    /// Checks the structure itself: valid counts, tags in the right set, the LRU orders and
    /// the indexes.
    pub fn check_invariants(&self) -> Result<(), String> {
        for l in self.levels() {
            for (ai, a) in l.arrays.iter().enumerate() {
                a.check()
                    .map_err(|e| format!("tlb {} array {ai}: {e}", l.stats.name))?;
                if a.valid > 0 && l.filled >> ai & 1 == 0 {
                    return Err(format!(
                        "tlb {} array {ai}: entries but not filled",
                        l.stats.name
                    ));
                }
            }
            let single = if l.filled.is_power_of_two() {
                l.filled.trailing_zeros() as u8
            } else {
                u8::MAX
            };
            if l.single != single {
                return Err(format!(
                    "tlb {}: single array {} but filled {:#x}",
                    l.stats.name, l.single, l.filled
                ));
            }
        }
        Ok(())
    }

    /// Per-level statistics in report order (L1D, L1I if any, lower levels).
    pub fn stats(&self) -> Vec<LevelStats> {
        self.levels().map(|l| l.stats.clone()).collect()
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
                    replacement: TlbReplacement::Lru,
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
                            replacement: TlbReplacement::Lru,
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

    /// The shift-based `promote` it replaced, as a reference.
    fn promote_reference(perm: u64, w: usize) -> u64 {
        let x = perm ^ (NIBBLES * w as u64);
        let y = x | (x >> 1);
        let y = y | (y >> 2);
        let at = (!y & NIBBLES).trailing_zeros();
        let below = (1u64 << at) - 1;
        let upto = below | (0xF << at);
        (perm & !upto) | ((perm & below) << 4) | w as u64
    }

    #[test]
    fn promote_matches_reference() {
        // Random permutations of 1..=16 ways (unused nibbles zero), every way promoted.
        let mut r = 0x2545_F491_4F6C_DD1Du64;
        for ways in 1..=16usize {
            for _ in 0..2000 {
                let mut order: Vec<u64> = (0..ways as u64).collect();
                for i in (1..ways).rev() {
                    r ^= r << 13;
                    r ^= r >> 7;
                    r ^= r << 17;
                    order.swap(i, (r % (i as u64 + 1)) as usize);
                }
                let perm = order
                    .iter()
                    .enumerate()
                    .fold(0u64, |p, (k, &v)| p | v << (4 * k));
                for w in 0..ways {
                    assert_eq!(
                        promote(perm, w),
                        promote_reference(perm, w),
                        "{perm:#x} {w}"
                    );
                }
            }
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

    /// A machine file may give a set count that is not a power of two (e.g. 1536 entries in 8
    /// ways, 192 sets): the set is the page number modulo the sets, so pages a multiple of
    /// the set count apart compete for one set and the others do not. Both stores (up to 16
    /// ways, and more).
    #[test]
    fn sets_that_are_not_a_power_of_two_index_by_modulo() {
        for ways in [2u32, 20] {
            let sets = 3u64;
            let mut tlb = Tlb::new(&cfg((3 * ways, ways), None), &[12, 21]);
            // Fill set 0 (pages 0, 3, 6, ...), and one page of each other set.
            for i in 0..ways as u64 {
                tlb.fill(1, (i * sets) << 12, t(i, 0), false);
            }
            tlb.fill(1, 1 << 12, t(100, 0), false);
            tlb.fill(1, 2 << 12, t(101, 0), false);
            // One more page of set 0 evicts its LRU (page 0) only.
            tlb.fill(1, (ways as u64 * sets) << 12, t(99, 0), false);
            let hit =
                |tlb: &mut Tlb, p: u64| matches!(tlb.lookup(1, p << 12, false), Lookup::Hit { .. });
            assert!(!hit(&mut tlb, 0), "{ways} ways: page 0 should be evicted");
            for p in [1, 2, 3, ways as u64 * sets] {
                assert!(hit(&mut tlb, p), "{ways} ways: page {p} should hit");
            }
            tlb.check_invariants().unwrap();
        }
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

    /// A miss in every level pays the lowest level's lookup before its walk (7 cycles here,
    /// the STLB hit's); with one level, that level's (0). Exact: one lookup per miss.
    #[test]
    fn a_miss_pays_the_last_lookup() {
        let mut tlb = Tlb::new(&cfg((1, 1), Some((64, 4))), &[12, 21]);
        let mut misses = 0;
        let mut cycles = 0;
        for p in 0..100u64 {
            if let Lookup::Miss { cycles: c } = tlb.lookup(1, p << 12, false) {
                misses += 1;
                cycles += c;
                tlb.fill(1, p << 12, t(p, 0), false);
            }
        }
        assert_eq!((misses, cycles), (100, 700));
        let mut one = Tlb::new(&cfg((4, 4), None), &[12, 21]);
        assert!(matches!(
            one.lookup(1, 0, false),
            Lookup::Miss { cycles: 0 }
        ));
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

    /// Split first-level arrays (4KB and 2MB apart, as skylake's L1 DTLB) and an L1 ITLB: a
    /// lookup visits only the arrays ever filled (`Level::filled`), so every way into an array
    /// must mark it: a walk's fill (`insert_absent`), and an STLB hit's refill (`insert`) of a
    /// 2MB page whose first translation came by an instruction fetch (the L1 ITLB and the STLB
    /// only). The one-lower-level path counts the STLB's misses and keeps the data side's
    /// last hit (`Tlb::last`) to data translations.
    #[test]
    fn every_fill_of_a_split_first_level_is_found_again() {
        let arr = |sizes: Vec<u8>, entries, ways| ArrayConfig {
            sizes,
            entries,
            ways,
            replacement: TlbReplacement::Lru,
        };
        let level = |name: &str, arrays, hit_cycles| LevelConfig {
            name: name.into(),
            arrays,
            hit_cycles,
        };
        let c = TlbConfig {
            l1d: level("L1D", vec![arr(vec![0], 16, 4), arr(vec![1], 8, 4)], 0),
            l1i: Some(level("L1I", vec![arr(vec![0, 1], 16, 4)], 0)),
            lower: vec![level("L2", vec![arr(vec![0, 1], 64, 4)], 7)],
        };
        let mut tlb = Tlb::new(&c, &[12, 21]);
        let lvl = |l: Lookup| match l {
            Lookup::Hit { level, .. } => Some(level),
            Lookup::Miss { .. } => None,
        };
        // A 4KB data page: its walk's fill marks the L1D's 4KB array (index 0).
        assert_eq!(lvl(tlb.lookup(1, 0x1000, false)), None);
        tlb.fill(1, 0x1000, t(1, 0), false);
        assert_eq!(lvl(tlb.lookup(1, 0x1000, false)), Some(0));
        // Another 4KB data page, then an instruction fetch from the first: an STLB hit, which
        // leaves the data side's last hit where it was.
        tlb.lookup(1, 0x5000, false);
        tlb.fill(1, 0x5000, t(5, 0), false);
        assert_eq!(lvl(tlb.lookup(1, 0x5000, false)), Some(0));
        assert_eq!((tlb.last.start, tlb.last.end), (0x5000, 0x6000));
        assert_eq!(lvl(tlb.lookup(1, 0x1000, true)), Some(1));
        assert_eq!((tlb.last.start, tlb.last.end), (0x5000, 0x6000));
        // A 2MB page first fetched as code: in the L1 ITLB and the STLB, not the L1 DTLB.
        assert_eq!(lvl(tlb.lookup(1, 0x40_0000, true)), None);
        tlb.fill(1, 0x40_0000, t(0x200, 1), true);
        assert_eq!(lvl(tlb.lookup(1, 0x40_0000, true)), Some(0));
        // Data on the code's 2MB page: an STLB hit, whose refill (`insert`) marks the L1D's
        // 2MB array (index 1); the next data access finds it there.
        assert_eq!(lvl(tlb.lookup(1, 0x40_1000, false)), Some(1));
        assert_eq!((tlb.last.start, tlb.last.end), (0x40_0000, 0x60_0000));
        assert_eq!(lvl(tlb.lookup(1, 0x40_2000, false)), Some(0));
        // A 2MB data page walked and filled: found in the L1D's 2MB array.
        assert_eq!(lvl(tlb.lookup(1, 0x80_0000, false)), None);
        tlb.fill(1, 0x80_0000, t(0x400, 1), false);
        assert_eq!(lvl(tlb.lookup(1, 0x80_0000, false)), Some(0));
        // The STLB: misses of 0x1000, 0x5000, 0x40_0000 (ifetch) and 0x80_0000; hits of
        // 0x1000 (ifetch) and 0x40_1000 (data).
        let s = tlb.stats();
        assert_eq!((s[2].hits, s[2].misses), (2, 4));
    }

    #[test]
    fn hint_collisions_are_not_hits() {
        // Two pages of one set whose tags have the same 16-bit hint: only the one filled hits.
        let mut tlb = Tlb::new(&cfg((64, 4), None), &[12, 21]);
        let tag = |vpn: u64| make_tag(1, vpn, SizeClass(0));
        let a = 3u64;
        let b = (1..1u64 << 24)
            .map(|k| a + 16 * k)
            .find(|&v| hint(tag(v)) == hint(tag(a)))
            .expect("a colliding page");
        tlb.fill(1, a << 12, t(7, 0), false);
        assert!(matches!(tlb.lookup(1, b << 12, false), Lookup::Miss { .. }));
        tlb.fill(1, b << 12, t(9, 0), false);
        match (tlb.lookup(1, a << 12, false), tlb.lookup(1, b << 12, false)) {
            (Lookup::Hit { t: ta, .. }, Lookup::Hit { t: tb, .. }) => {
                assert_eq!((ta.pfn, tb.pfn), (Pfn(7), Pfn(9)))
            }
            other => panic!("{other:?}"),
        }
        tlb.invalidate_range(1, b << 12, (b + 1) << 12);
        assert!(matches!(tlb.lookup(1, b << 12, false), Lookup::Miss { .. }));
        assert!(matches!(tlb.lookup(1, a << 12, false), Lookup::Hit { .. }));
        tlb.check_invariants().unwrap();
    }

    #[test]
    fn prefetch_reads_only() {
        // A 2-set 1024-way array and a 12-way one, both large enough to be prefetched.
        let mut tlb = Tlb::new(&cfg((2048, 1024), Some((1536, 12))), &[12, 21]);
        assert_eq!(tlb.prefetched, vec![(0, 0), (2, 0)]);
        for p in 0..3000u64 {
            tlb.prefetch(1, p << 12);
            if matches!(tlb.lookup(1, p << 12, false), Lookup::Miss { .. }) {
                tlb.fill(1, p << 12, t(p, (p % 7 == 0) as u8), false);
            }
        }
        let (entries, last) = (tlb.entries(), tlb.last);
        for p in 0..5000u64 {
            tlb.prefetch(p as u32 % 3, p.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16);
        }
        assert_eq!(tlb.entries(), entries);
        assert_eq!((tlb.last.start, tlb.last.end), (last.start, last.end));
        tlb.check_invariants().unwrap();
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
