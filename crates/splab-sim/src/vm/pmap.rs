//! pmap: one process's page table, holding mappings of mixed page sizes, with accessed and dirty
//! bits, and the enter / remove / protect / promote / demote operations.
//!
//! Representation: one packed entry per base page, in chunks of 512 base pages found through a
//! two-level radix index (`ChunkMap`: no hashing on the access path). A superpage mapping is recorded in every base
//! entry it covers, each with its own frame number and the superpage's size class: this is the
//! replicated-PTE layout of the Alpha and PA-RISC (seed 000 6.1, seed 002 4) and, for x86, an
//! expanded view of one PDE. How much a promotion *costs* is decided by the machine (one PTE per
//! base page when replicated, one entry otherwise), not by this layout.
//!
//! Accessed and dirty bits of a superpage live in the entry of its first base page (the hardware
//! keeps one pair per superpage, seed 000 2.2); demotion copies them to every base entry.
//!
//! Invariants (`check_invariants`): every valid entry of size class c > 0 lies in an aligned run
//! of entries of class c whose frames are consecutive and start aligned; `counts[c]` is the
//! number of valid base entries of class c.

use crate::hw::walk::{PtPath, NO_TABLE};
use crate::units::{Pfn, Prot, SizeClass};

pub const CHUNK_SHIFT: u32 = 9;
const CHUNK: usize = 1 << CHUNK_SHIFT;

const VALID: u64 = 1;
const PROT_SHIFT: u32 = 1; // bits 1..3
const DIRTY: u64 = 1 << 4;
const ACCESSED: u64 = 1 << 5;
const SIZE_SHIFT: u32 = 8; // bits 8..11
const PFN_SHIFT: u32 = 16;

/// A decoded page-table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pte(u64);

impl Pte {
    #[inline]
    pub fn new(pfn: Pfn, prot: Prot, size: SizeClass) -> Pte {
        Pte(VALID
            | ((prot.0 as u64) << PROT_SHIFT)
            | ((size.0 as u64) << SIZE_SHIFT)
            | (pfn.0 << PFN_SHIFT))
    }
    #[inline]
    pub fn valid(self) -> bool {
        self.0 & VALID != 0
    }
    #[inline]
    pub fn pfn(self) -> Pfn {
        Pfn(self.0 >> PFN_SHIFT)
    }
    #[inline]
    pub fn prot(self) -> Prot {
        Prot(((self.0 >> PROT_SHIFT) & 7) as u8)
    }
    #[inline]
    pub fn size(self) -> SizeClass {
        SizeClass(((self.0 >> SIZE_SHIFT) & 0xF) as u8)
    }
    #[inline]
    pub fn dirty(self) -> bool {
        self.0 & DIRTY != 0
    }
    #[inline]
    pub fn accessed(self) -> bool {
        self.0 & ACCESSED != 0
    }
    #[inline]
    fn with_prot(self, p: Prot) -> Pte {
        Pte((self.0 & !(7 << PROT_SHIFT)) | ((p.0 as u64) << PROT_SHIFT))
    }
    #[inline]
    fn with_size(self, s: SizeClass) -> Pte {
        Pte((self.0 & !(0xF << SIZE_SHIFT)) | ((s.0 as u64) << SIZE_SHIFT))
    }
}

/// One leaf run of 512 base entries, with the frames of the page-table pages on its path
/// (`crate::vm::ptpages`): the walker reads its entries at those physical addresses.
#[derive(Clone, Debug)]
pub struct ChunkData {
    e: [u64; CHUNK],
    pub path: PtPath,
}

impl std::ops::Deref for ChunkData {
    type Target = [u64; CHUNK];
    #[inline]
    fn deref(&self) -> &[u64; CHUNK] {
        &self.e
    }
}

impl std::ops::DerefMut for ChunkData {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u64; CHUNK] {
        &mut self.e
    }
}

type Chunk = ChunkData;

fn new_chunk(path: PtPath) -> Chunk {
    ChunkData {
        e: [0u64; CHUNK],
        path,
    }
}

/// Chunk keys (`vpn >> CHUNK_SHIFT`) per leaf of the index.
const LEAF_BITS: u32 = 13;
const LEAF: usize = 1 << LEAF_BITS;

/// The chunks of a page table by key, found by direct indexing: a top table of leaves by
/// `key >> LEAF_BITS`, each leaf holding `position + 1` in `slab` of its keys (0 = absent). The
/// chunks live densely in `slab` (a removal moves the last one into the hole), so iteration is
/// a slice walk; its order is not meaningful (neither was the hash map's it replaced).
#[derive(Clone, Debug, Default)]
struct ChunkMap {
    top: Vec<Option<Box<[u32; LEAF]>>>,
    slab: Vec<ChunkData>,
    keys: Vec<u64>,
}

impl ChunkMap {
    /// Position in `slab` of `key`'s chunk.
    #[inline(always)]
    fn pos(&self, key: u64) -> Option<usize> {
        let leaf = self.top.get((key >> LEAF_BITS) as usize)?.as_ref()?;
        let i = leaf[(key as usize) & (LEAF - 1)];
        (i != 0).then(|| i as usize - 1)
    }
    #[inline(always)]
    fn get(&self, key: &u64) -> Option<&ChunkData> {
        // SAFETY: positions in the index are always < slab.len() (insert and remove keep them).
        self.pos(*key)
            .map(|i| unsafe { self.slab.get_unchecked(i) })
    }
    #[inline(always)]
    fn get_mut(&mut self, key: &u64) -> Option<&mut ChunkData> {
        let i = self.pos(*key)?;
        // SAFETY: as in `get`.
        Some(unsafe { self.slab.get_unchecked_mut(i) })
    }
    fn contains_key(&self, key: &u64) -> bool {
        self.pos(*key).is_some()
    }
    fn leaf_mut(&mut self, key: u64) -> &mut u32 {
        let t = (key >> LEAF_BITS) as usize;
        if t >= self.top.len() {
            self.top.resize(t + 1, None);
        }
        let leaf = self.top[t].get_or_insert_with(|| Box::new([0u32; LEAF]));
        &mut leaf[(key as usize) & (LEAF - 1)]
    }
    /// Inserts `c` as `key`'s chunk; returns the chunk it replaced, if any.
    fn insert(&mut self, key: u64, c: ChunkData) -> Option<ChunkData> {
        if let Some(i) = self.pos(key) {
            return Some(std::mem::replace(&mut self.slab[i], c));
        }
        self.slab.push(c);
        self.keys.push(key);
        let n = self.slab.len() as u32;
        *self.leaf_mut(key) = n;
        None
    }
    /// `key`'s chunk, created by `f` if absent.
    #[inline]
    fn get_or_insert_with(&mut self, key: u64, f: impl FnOnce() -> ChunkData) -> &mut ChunkData {
        let i = match self.pos(key) {
            Some(i) => i,
            None => self.insert_new(key, f),
        };
        &mut self.slab[i]
    }
    /// `get_or_insert_with`'s insertion, out of line: the new chunk (4 KB) is built on the
    /// stack, and inlined into the access path it gave that hot function a multi-page frame
    /// probed on every call.
    #[cold]
    #[inline(never)]
    fn insert_new(&mut self, key: u64, f: impl FnOnce() -> ChunkData) -> usize {
        self.insert(key, f());
        self.slab.len() - 1
    }
    fn remove(&mut self, key: &u64) -> Option<ChunkData> {
        let i = self.pos(*key)?;
        *self.leaf_mut(*key) = 0;
        let last = self.slab.len() - 1;
        if i != last {
            let moved = self.keys[last];
            *self.leaf_mut(moved) = i as u32 + 1;
        }
        self.keys.swap_remove(i);
        Some(self.slab.swap_remove(i))
    }
    fn keys(&self) -> impl Iterator<Item = &u64> + '_ {
        self.keys.iter()
    }
    fn iter(&self) -> impl Iterator<Item = (&u64, &ChunkData)> + '_ {
        self.keys.iter().zip(self.slab.iter())
    }
}

impl<'a> IntoIterator for &'a ChunkMap {
    type Item = (&'a u64, &'a ChunkData);
    type IntoIter = std::iter::Zip<std::slice::Iter<'a, u64>, std::slice::Iter<'a, ChunkData>>;
    fn into_iter(self) -> Self::IntoIter {
        self.keys.iter().zip(self.slab.iter())
    }
}

/// What a walk found (`Pmap::walk_touch`).
#[derive(Clone, Copy, Debug)]
pub enum Walked {
    /// A usable mapping: the entry, its (super)page's head entry after the update, and whether
    /// this access made it dirty.
    Mapped {
        entry: Pte,
        head: Pte,
        became_dirty: bool,
    },
    /// A write to a clean superpage, left untouched for the OS to demote.
    CleanSuperpageWrite(Pte),
    /// Not mapped, or not with the needed permission: a fault.
    Unusable,
}

/// A removed mapping: base page number and the frame it mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Removed {
    pub vpn: u64,
    pub pfn: Pfn,
    pub dirty: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Pmap {
    chunks: ChunkMap,
    /// Valid base entries per size class.
    pub counts: [u64; 16],
    /// Keys of the chunks that `remove` emptied and dropped, for the OS to release their
    /// page-table pages (`Os::pt_reap`).
    pub freed: Vec<u64>,
}

impl Pmap {
    pub fn new() -> Pmap {
        Pmap::default()
    }

    #[inline]
    fn slot(&self, vpn: u64) -> Option<u64> {
        self.chunks
            .get(&(vpn >> CHUNK_SHIFT))
            .map(|c| c[(vpn as usize) & (CHUNK - 1)])
    }

    #[inline]
    fn slot_mut(&mut self, vpn: u64) -> &mut u64 {
        let c = self
            .chunks
            .get_or_insert_with(vpn >> CHUNK_SHIFT, || new_chunk([NO_TABLE; 4]));
        &mut c[(vpn as usize) & (CHUNK - 1)]
    }

    /// Hints the host CPU to fetch the entry of `vpn` and its chunk's page-table path, which
    /// lies on another host line (no effect on the model).
    #[inline]
    pub fn prefetch(&self, vpn: u64) {
        if let Some(c) = self.chunks.get(&(vpn >> CHUNK_SHIFT)) {
            crate::hw::prefetch(&c[(vpn as usize) & (CHUNK - 1)]);
            crate::hw::prefetch(&c.path);
        }
    }

    /// The valid entry of `vpn` and the page-table path of its chunk, if any.
    #[inline]
    pub fn peek(&self, vpn: u64) -> Option<(Pte, &PtPath)> {
        let c = self.chunks.get(&(vpn >> CHUNK_SHIFT))?;
        let p = Pte(c[(vpn as usize) & (CHUNK - 1)]);
        p.valid().then_some((p, &c.path))
    }

    /// Whether the chunk holding `vpn`'s entry exists (its page-table pages are allocated).
    #[inline]
    pub fn has_chunk(&self, vpn: u64) -> bool {
        self.chunks.contains_key(&(vpn >> CHUNK_SHIFT))
    }

    /// Creates the empty chunk holding `vpn`, whose page-table pages are `path`.
    /// Precondition: it does not exist.
    pub fn add_chunk(&mut self, vpn: u64, path: PtPath) {
        let old = self.chunks.insert(vpn >> CHUNK_SHIFT, new_chunk(path));
        debug_assert!(old.is_none(), "Pmap::add_chunk: chunk exists");
    }

    /// The page-table path of `vpn`'s chunk (all `NO_TABLE` if it has none).
    #[inline]
    pub fn path(&self, vpn: u64) -> PtPath {
        self.chunks
            .get(&(vpn >> CHUNK_SHIFT))
            .map(|c| c.path)
            .unwrap_or([NO_TABLE; 4])
    }

    /// Keys (vpn >> CHUNK_SHIFT) of the chunks that exist.
    pub fn chunk_keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks.keys().copied()
    }

    /// The entry mapping base page `vpn`, if valid.
    #[inline]
    pub fn lookup(&self, vpn: u64) -> Option<Pte> {
        self.slot(vpn).map(Pte).filter(|p| p.valid())
    }

    /// Base page number of the first page of the superpage containing `vpn` (itself for a base page).
    #[inline]
    pub fn head_of(vpn: u64, order: u8) -> u64 {
        vpn & !((1u64 << order) - 1)
    }

    /// Enters a base-page mapping. Precondition: `vpn` is not mapped.
    pub fn enter(&mut self, vpn: u64, pfn: Pfn, prot: Prot) {
        let s = self.slot_mut(vpn);
        debug_assert!(*s & VALID == 0, "Pmap::enter: vpn {vpn:#x} already mapped");
        *s = Pte::new(pfn, prot, SizeClass::BASE).0;
        self.counts[0] += 1;
    }

    /// Sets the accessed bit (and the dirty bit if `write`) of the page or superpage mapping
    /// `vpn`; `order` is the order of its size class.
    #[inline]
    pub fn touch(&mut self, vpn: u64, order: u8, write: bool) {
        let head = Self::head_of(vpn, order);
        let s = self.slot_mut(head);
        *s |= ACCESSED | if write { DIRTY } else { 0 };
    }

    /// On a TLB miss: finds the entry of `vpn`; if it is valid and its permissions include
    /// `need`, sets the accessed (and, for a write, dirty) bit of its (super)page. If
    /// `trap_clean_super()`, a write to a clean superpage is not marked but reported (seed 000
    /// 4.7: the OS demotes it); it is asked only then. `orders[c]` is the order of size class c.
    #[inline(always)]
    pub fn walk_touch(
        &mut self,
        vpn: u64,
        need: Prot,
        write: bool,
        trap_clean_super: impl FnOnce() -> bool,
        orders: &[u8],
    ) -> (Walked, PtPath) {
        let Some(c) = self.chunks.get_mut(&(vpn >> CHUNK_SHIFT)) else {
            return (Walked::Unusable, [NO_TABLE; 4]);
        };
        let path = c.path;
        let s = &mut c[(vpn as usize) & (CHUNK - 1)];
        let p = Pte(*s);
        if !p.valid() || p.prot().0 & need.0 != need.0 {
            return (Walked::Unusable, path);
        }
        let bits = ACCESSED | if write { DIRTY } else { 0 };
        if p.size().is_base() {
            let became_dirty = write && *s & DIRTY == 0;
            *s |= bits;
            return (
                Walked::Mapped {
                    entry: p,
                    head: Pte(*s),
                    became_dirty,
                },
                path,
            );
        }
        let head = Self::head_of(vpn, orders[p.size().0 as usize]);
        let hs = self.slot_mut(head);
        if write && *hs & DIRTY == 0 && trap_clean_super() {
            return (Walked::CleanSuperpageWrite(p), path);
        }
        let became_dirty = write && *hs & DIRTY == 0;
        *hs |= bits;
        (
            Walked::Mapped {
                entry: p,
                head: Pte(*hs),
                became_dirty,
            },
            path,
        )
    }

    /// Whether the mapping of `vpn` (head entry for a superpage) is dirty.
    pub fn is_dirty(&self, vpn: u64, order: u8) -> bool {
        self.lookup(Self::head_of(vpn, order))
            .is_some_and(|p| p.dirty())
    }

    /// Removes every mapping of base pages `[start, end)`. Superpages partly inside the range
    /// must have been demoted first. Calls `f` for each removed entry.
    pub fn remove(&mut self, start: u64, end: u64, mut f: impl FnMut(Removed)) {
        let mut vpn = start;
        while vpn < end {
            let key = vpn >> CHUNK_SHIFT;
            let chunk_end = ((key + 1) << CHUNK_SHIFT).min(end);
            if let Some(c) = self.chunks.get_mut(&key) {
                for v in vpn..chunk_end {
                    let s = &mut c[(v as usize) & (CHUNK - 1)];
                    if *s & VALID != 0 {
                        let p = Pte(*s);
                        let head_dirty = p.dirty();
                        self.counts[p.size().0 as usize] -= 1;
                        *s = 0;
                        f(Removed {
                            vpn: v,
                            pfn: p.pfn(),
                            dirty: head_dirty,
                        });
                    }
                }
                if c.iter().all(|&s| s == 0) {
                    self.chunks.remove(&key);
                    self.freed.push(key);
                }
            }
            vpn = chunk_end;
        }
    }

    /// Restricts every valid entry in `[start, end)` to `prot` (entries keep only the
    /// permissions both allow). Returns how many entries changed.
    pub fn protect(&mut self, start: u64, end: u64, prot: Prot) -> u64 {
        let mut changed = 0;
        self.for_each_valid_mut(start, end, |s| {
            let p = Pte(*s);
            let np = Prot(p.prot().0 & prot.0);
            if np != p.prot() {
                *s = p.with_prot(np).0;
                changed += 1;
            }
        });
        changed
    }

    /// Sets the hardware permission of the single entry `vpn` (e.g. write-enable after COW).
    pub fn set_prot(&mut self, vpn: u64, prot: Prot) {
        let s = self.slot_mut(vpn);
        *s = Pte(*s).with_prot(prot).0;
    }

    /// Sets the hardware permission of the `n` entries from `head` (a whole superpage).
    pub fn set_prot_run(&mut self, head: u64, n: u64, prot: Prot) {
        self.for_each_valid_mut(head, head + n, |s| *s = Pte(*s).with_prot(prot).0);
    }

    /// Replaces the frame of base entry `vpn` (copy-on-write), keeping size class and bits
    /// except dirty, which is cleared.
    pub fn replace(&mut self, vpn: u64, pfn: Pfn, prot: Prot) {
        let s = self.slot_mut(vpn);
        let p = Pte(*s);
        debug_assert!(
            p.valid() && p.size().is_base(),
            "Pmap::replace: vpn {vpn:#x} not a valid base entry"
        );
        *s = Pte::new(pfn, prot, p.size()).0 | (p.0 & ACCESSED);
    }

    /// Points base entry `vpn` at frame `pfn`, keeping its permission, size and accessed and
    /// dirty bits (page migration, vm/compact.rs: `remove_migration_pte` restores them).
    pub fn migrate(&mut self, vpn: u64, pfn: Pfn) {
        let s = self.slot_mut(vpn);
        debug_assert!(
            Pte(*s).valid() && Pte(*s).size().is_base(),
            "Pmap::migrate: vpn {vpn:#x} not a valid base entry"
        );
        *s = (*s & ((1u64 << PFN_SHIFT) - 1)) | (pfn.0 << PFN_SHIFT);
    }

    fn for_each_valid_mut(&mut self, start: u64, end: u64, mut f: impl FnMut(&mut u64)) {
        let mut vpn = start;
        while vpn < end {
            let key = vpn >> CHUNK_SHIFT;
            let chunk_end = ((key + 1) << CHUNK_SHIFT).min(end);
            if let Some(c) = self.chunks.get_mut(&key) {
                for v in vpn..chunk_end {
                    let s = &mut c[(v as usize) & (CHUNK - 1)];
                    if *s & VALID != 0 {
                        f(s);
                    }
                }
            }
            vpn = chunk_end;
        }
    }

    /// Makes the aligned run `[head, head + 2^order)` one mapping of size class `size`.
    /// Preconditions: every entry is valid, frames are consecutive from an aligned frame, and
    /// protections agree. The dirty / accessed bits of the run are OR-ed into the head entry.
    pub fn promote(&mut self, head: u64, order: u8, size: SizeClass) {
        let n = 1u64 << order;
        let mut bits = 0;
        let mut first = None;
        self.for_each_valid_mut(head, head + n, |s| {
            bits |= *s & (DIRTY | ACCESSED);
            first.get_or_insert(*s);
        });
        let counts = &mut self.counts;
        let mut v = head;
        while v < head + n {
            let key = v >> CHUNK_SHIFT;
            let c = self
                .chunks
                .get_mut(&key)
                .expect("Pmap::promote: run not mapped");
            let stop = ((key + 1) << CHUNK_SHIFT).min(head + n);
            for vv in v..stop {
                let s = &mut c[(vv as usize) & (CHUNK - 1)];
                let p = Pte(*s);
                debug_assert!(p.valid(), "Pmap::promote: vpn {vv:#x} not mapped");
                counts[p.size().0 as usize] -= 1;
                counts[size.0 as usize] += 1;
                *s =
                    (p.with_size(size).0 & !(DIRTY | ACCESSED)) | if vv == head { bits } else { 0 };
            }
            v = stop;
        }
    }

    /// Splits the superpage at `head` (of order `order`) into mappings of class `to` (order
    /// `to_order`); each new head inherits the old accessed and dirty bits (seed 000 4.7: with
    /// one dirty bit, every base page of a dirty superpage must be considered dirty).
    pub fn demote(&mut self, head: u64, order: u8, to: SizeClass, to_order: u8) {
        let n = 1u64 << order;
        let bits = self.slot(head).unwrap_or(0) & (DIRTY | ACCESSED);
        let counts = &mut self.counts;
        let mut v = head;
        while v < head + n {
            let key = v >> CHUNK_SHIFT;
            let c = self
                .chunks
                .get_mut(&key)
                .expect("Pmap::demote: run not mapped");
            let stop = ((key + 1) << CHUNK_SHIFT).min(head + n);
            for vv in v..stop {
                let s = &mut c[(vv as usize) & (CHUNK - 1)];
                let p = Pte(*s);
                counts[p.size().0 as usize] -= 1;
                counts[to.0 as usize] += 1;
                let is_head = vv & ((1u64 << to_order) - 1) == 0;
                *s = (p.with_size(to).0 & !(DIRTY | ACCESSED)) | if is_head { bits } else { 0 };
            }
            v = stop;
        }
    }

    /// Clears the accessed bit (with `dirty`, also the dirty bit) of the entry at `head` (the
    /// first page of a superpage, or a base page); returns the bits as they were (accessed,
    /// dirty). The page daemon's `pmap_ts_referenced` and `pmap_clear_modify`.
    pub fn clear_bits(&mut self, head: u64, dirty: bool) -> (bool, bool) {
        let Some(s) = self.chunks.get_mut(&(head >> CHUNK_SHIFT)) else {
            return (false, false);
        };
        let s = &mut s[(head as usize) & (CHUNK - 1)];
        let was = (*s & ACCESSED != 0, *s & DIRTY != 0);
        *s &= !(ACCESSED | if dirty { DIRTY } else { 0 });
        was
    }

    /// Clears only the dirty bit of the entry at `head` (the first page of a superpage, or a base
    /// page); returns whether it was set. FreeBSD `pmap_clear_modify` as msync's page cleaning
    /// uses it (vm_object_page_clean), which leaves the reference bit alone.
    pub fn clear_dirty(&mut self, head: u64) -> bool {
        let Some(c) = self.chunks.get_mut(&(head >> CHUNK_SHIFT)) else {
            return false;
        };
        let s = &mut c[(head as usize) & (CHUNK - 1)];
        let was = *s & VALID != 0 && *s & DIRTY != 0;
        *s &= !DIRTY;
        was
    }

    /// Every valid entry as (vpn, pte), in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (u64, Pte)> + '_ {
        self.chunks.iter().flat_map(|(&k, c)| {
            c.iter()
                .enumerate()
                .filter(|(_, &s)| s & VALID != 0)
                .map(move |(i, &s)| ((k << CHUNK_SHIFT) | i as u64, Pte(s)))
        })
    }

    /// Head entries of the superpages in `[start, end)`, in increasing order, visiting only the
    /// chunks that exist.
    pub fn superpage_heads(&self, start: u64, end: u64, orders: &[u8]) -> Vec<u64> {
        self.entries_in(start, end)
            .into_iter()
            .filter(|&(vpn, p)| {
                !p.size().is_base() && vpn == Self::head_of(vpn, orders[p.size().0 as usize])
            })
            .map(|(vpn, _)| vpn)
            .collect()
    }

    /// Valid entries in `[start, end)` as (vpn, entry), visiting only the chunks that exist, in
    /// increasing order.
    pub fn entries_in(&self, start: u64, end: u64) -> Vec<(u64, Pte)> {
        let mut out = Vec::new();
        let (first, last) = (start >> CHUNK_SHIFT, (end.max(1) - 1) >> CHUNK_SHIFT);
        for (&k, c) in &self.chunks {
            if k < first || k > last {
                continue;
            }
            for (i, &s) in c.iter().enumerate() {
                let vpn = (k << CHUNK_SHIFT) | i as u64;
                if s & VALID != 0 && vpn >= start && vpn < end {
                    out.push((vpn, Pte(s)));
                }
            }
        }
        out.sort_unstable_by_key(|e| e.0);
        out
    }

    /// Valid base entries in `[start, end)`.
    pub fn count_valid(&self, start: u64, end: u64) -> u64 {
        let mut n = 0;
        let mut vpn = start;
        while vpn < end {
            let key = vpn >> CHUNK_SHIFT;
            let chunk_end = ((key + 1) << CHUNK_SHIFT).min(end);
            if let Some(c) = self.chunks.get(&key) {
                n += (vpn..chunk_end)
                    .filter(|&v| c[(v as usize) & (CHUNK - 1)] & VALID != 0)
                    .count() as u64;
            }
            vpn = chunk_end;
        }
        n
    }

    /// `orders[c]` is the buddy order of size class c.
    pub fn check_invariants(&self, orders: &[u8]) -> Result<(), String> {
        let mut counts = [0u64; 16];
        for (vpn, p) in self.entries() {
            let c = p.size().0 as usize;
            counts[c] += 1;
            if c >= orders.len() {
                return Err(format!(
                    "pmap: vpn {vpn:#x} has size class {c}, machine has {}",
                    orders.len()
                ));
            }
            if c > 0 {
                let o = orders[c];
                let head = Self::head_of(vpn, o);
                let hp = self
                    .lookup(head)
                    .ok_or_else(|| format!("pmap: superpage at {vpn:#x} has no head entry"))?;
                if hp.size() != p.size() || hp.prot() != p.prot() {
                    return Err(format!(
                        "pmap: superpage at {head:#x} has entries of mixed size or protection"
                    ));
                }
                if !hp.pfn().is_aligned(crate::units::Order(o))
                    || p.pfn().0 != hp.pfn().0 + (vpn - head)
                {
                    return Err(format!(
                        "pmap: superpage at {head:#x} maps non-contiguous or misaligned frames"
                    ));
                }
            }
        }
        if counts != self.counts {
            return Err(format!(
                "pmap: counts {:?} but entries give {:?}",
                &self.counts[..orders.len()],
                &counts[..orders.len()]
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enter_promote_demote_remove() {
        let mut pm = Pmap::new();
        for i in 0..16 {
            pm.enter(0x100 + i, Pfn(0x200 + i), Prot::RW);
        }
        pm.touch(0x105, 0, true);
        pm.promote(0x100, 4, SizeClass(1));
        assert_eq!(pm.counts[1], 16);
        assert!(pm.is_dirty(0x10F, 4));
        pm.check_invariants(&[0, 4]).unwrap();
        pm.demote(0x100, 4, SizeClass(0), 0);
        assert_eq!(pm.counts[0], 16);
        assert!(
            (0x100..0x110).all(|v| pm.lookup(v).unwrap().dirty()),
            "demotion spreads the dirty bit"
        );
        let mut removed = Vec::new();
        pm.remove(0x104, 0x108, |r| removed.push(r.pfn.0));
        assert_eq!(removed, vec![0x204, 0x205, 0x206, 0x207]);
        assert_eq!(pm.count_valid(0, 0x1000), 12);
        assert_eq!(pm.protect(0x100, 0x110, Prot::READ), 12);
        pm.check_invariants(&[0, 4]).unwrap();
    }
}
