//! Reservations (seed 000 4.1, 4.3, 4.8; FreeBSD `vm_reserv.c`): contiguous, aligned extents of
//! frames set aside at fault time for a later superpage, with their population bitmaps and the
//! lists that order them for preemption. The VM (vm/reserve.rs) drives them; this module owns
//! the data and keeps it consistent. Callers: `Os` only.
//!
//! A reservation covers colour-adjusted page indices `[cbase, cbase + 2^order)` of one object and
//! frames `[pfn, pfn + 2^order)`, both aligned to `2^order`. Page `cbase + i` can only live in
//! frame `pfn + i`. Its states:
//! - partially populated (`0 < popcnt < 2^order`): on a list;
//! - fully populated: on no list (seed 000 4.8: "fully populated extents are not reinserted");
//! - empty: never kept; the whole extent goes back to the buddy allocator (FreeBSD
//!   `vm_reserv_free_page` at popcnt 0).
//!
//! Lists: with `ListScheme::MultiList` (seed 000 4.8), one list per page size except the
//! largest; a reservation is on the list of the largest free extent preempting it would yield.
//! A list is ordered by a position `key` that increases from head to tail, and is made of two
//! runs (`check_invariants` checks both):
//! - at the head, the reservations placed there (seed 000 4.8: the partially populated pieces
//!   of a preempted reservation; and a reservation a free moved to this list whose most recent
//!   allocation is not the newest on it, see `depopulate`), most recently placed first;
//! - then the others, sorted by the time of their most recent page allocation (key = that time
//!   + `SORTED_BASE`), least recent first: an allocation moves a reservation to the tail.
//!
//! The head is the one to preempt. With `ListScheme::Partpopq` (FreeBSD), one queue of partially
//! populated reservations, moved to the tail on every populate and depopulate.
//!
//! Cost bounds (seed 000 6.8: "most operations ... are either O(1) or O(S), where S is the number
//! of distinct superpage sizes; or in the case of preempting a reservation, O(S R), where R is the
//! ratio between consecutive sizes"). Here W is the bitmap words of one reservation (pages / 64,
//! 8 for a 4MB one on the Alpha): `populate` / `depopulate` are O(S) plus W for the size classes
//! of 64 pages or more; `create` O(S + W) (a cleared bitmap); `of_frame` O(S); `split` O(R + W);
//! `adopt` O(S W'), W' the piece's words; `unpopulated_runs` (a break) O(W + runs). No list is
//! ever searched: every list operation is O(1). `steps` counts the elementary steps (list links
//! updated, bitmap words and frame-map slots touched) so tests can hold these bounds.
//!
//! Frames of a reservation are never shared with another object (fork breaks the reservations of
//! the memory it makes copy-on-write), so "unpopulated" always means "free for this object".

pub mod popmap;

use serde::Serialize;

pub use crate::policy::ListScheme;
use crate::units::{ObjId, Pfn};

pub const NONE: u32 = u32::MAX;
pub const NO_LIST: u8 = u8::MAX;
/// List keys at or above this are `SORTED_BASE + last` (the sorted run); keys below it belong
/// to reservations placed at the head, each one less than the head it displaced.
const SORTED_BASE: u64 = 1 << 62;

#[derive(Clone, Debug, Default, Serialize)]
pub struct ReservStats {
    pub created: u64,
    /// Broken to satisfy an allocation (seed 000 4.3 preemption; FreeBSD reclaim).
    pub preempted: u64,
    /// Dissolved for another reason: emptied, or broken at fork.
    pub broken: u64,
    /// Times a reservation became fully populated.
    pub fully_populated: u64,
    /// Empty extents a preemption gave back to the buddy allocator.
    pub extents_freed: u64,
    /// Partially or fully populated extents a preemption kept as smaller reservations.
    pub extents_kept: u64,
    /// Superpages a fault mapped whole, its page resident in a fully populated reservation
    /// (FreeBSD `vm_fault_soft_fast` -> `pmap_enter_pde`, sysctl vm.pmap.pde.mappings;
    /// vm/softfast.rs). Not promotions: no base mappings were joined.
    pub mapped_at_fault: u64,
    /// seed 003 5.1, hybrid preparation (vm/prepare.rs): reservations whose remaining pages the
    /// fault reaching the threshold prepared (Sync-t), count.
    #[serde(skip_serializing_if = "is_zero")]
    pub prepared_sync: u64,
    /// Reservations whose remaining pages the Async-t daemon prepared, count.
    #[serde(skip_serializing_if = "is_zero")]
    pub prepared_async: u64,
    /// Pages either prepared (allocated and zeroed ahead of their first touch), count.
    #[serde(skip_serializing_if = "is_zero")]
    pub prepared_pages: u64,
    /// Superpages Sync-t's fault mapped right after preparing them, count.
    #[serde(skip_serializing_if = "is_zero")]
    pub mapped_at_preparation: u64,
    /// Superpages mapped (promoted, or at a soft fault) with mixed dirty state, which relaxed
    /// mapping allowed and FreeBSD's uniform rule would not (seed 003 5.1), count.
    #[serde(skip_serializing_if = "is_zero")]
    pub mapped_relaxed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Clone, Debug)]
pub struct Resv {
    pub obj: ObjId,
    /// First colour-adjusted page index covered; aligned to 2^order.
    pub cbase: u64,
    pub pfn: Pfn,
    /// Size class and buddy order.
    pub class: u8,
    pub order: u8,
    /// Population bitmap, one bit per base page (FreeBSD `popmap`).
    pub bits: Vec<u64>,
    pub popcnt: u64,
    /// `free_extents[c]`, c < class: aligned class-c pieces with no page populated.
    pub free_extents: Vec<u64>,
    /// Time (allocation sequence number) of the most recent populate.
    pub last: u64,
    pub list: u8,
    /// Position on its list: keys increase from head to tail (see the module comment).
    key: u64,
    prev: u32,
    next: u32,
}

impl Resv {
    #[inline]
    pub fn is_set(&self, i: u64) -> bool {
        self.bits[(i / 64) as usize] >> (i % 64) & 1 == 1
    }
    pub fn full(&self) -> bool {
        self.popcnt == 1 << self.order
    }
    /// No page populated in the aligned n-page range from `from` (n a power of two): one mask
    /// test below 64 pages, n / 64 words above.
    fn range_empty(&self, from: u64, n: u64) -> bool {
        range_empty(&self.bits, from, n)
    }
}

fn range_empty(bits: &[u64], from: u64, n: u64) -> bool {
    if n >= 64 {
        bits[(from / 64) as usize..((from + n) / 64) as usize]
            .iter()
            .all(|&w| w == 0)
    } else {
        (bits[(from / 64) as usize] >> (from % 64)) & ((1u64 << n) - 1) == 0
    }
}

/// The aligned n-page fields (n a power of two) among the first `len` bits of `bits` with no
/// bit set, in O(words x log n): below 64 pages each field is folded onto its lowest bit.
/// The length of the run of pages from `i` (below `n`) whose bit is `set`, stopping at `n`: one
/// step per word.
fn run_len(bits: &[u64], i: u64, n: u64, set: bool) -> u64 {
    let mut j = i;
    while j < n {
        let w = bits[(j / 64) as usize];
        // Ones where the run ends.
        let ends = if set { !w } else { w } >> (j % 64);
        if ends != 0 {
            j += ends.trailing_zeros() as u64;
            break;
        }
        j += 64 - j % 64;
    }
    j.min(n) - i
}

fn empty_fields(bits: &[u64], len: u64, n: u64) -> u64 {
    if n >= 64 {
        return bits
            .chunks((n / 64) as usize)
            .filter(|c| c.iter().all(|&w| w == 0))
            .count() as u64;
    }
    let lows = u64::MAX / ((1u64 << n) - 1); // bit 0 of every n-bit field
    let mut count = 0;
    for (k, &w) in bits.iter().enumerate() {
        let mut x = w;
        let mut s = 1;
        while s < n {
            x |= x >> s;
            s <<= 1;
        }
        let valid = len - 64 * k as u64;
        let in_range = if valid >= 64 {
            u64::MAX
        } else {
            (1u64 << valid) - 1
        };
        count += (lows & in_range & !x).count_ones() as u64;
    }
    count
}

/// A piece of a split reservation (`Reservs::split`): an aligned extent with its population.
#[derive(Clone, Debug)]
pub struct Piece {
    pub cbase: u64,
    pub pfn: Pfn,
    pub class: u8,
    /// Population bitmap of the piece, bit i = page `cbase + i`.
    pub bits: Vec<u64>,
    pub popcnt: u64,
}

/// What `Reservs::split` leaves: the object, the time of the reservation's most recent
/// allocation, and its pieces in address order.
#[derive(Clone, Debug)]
pub struct Split {
    pub obj: ObjId,
    pub last: u64,
    pub pieces: Vec<Piece>,
}

#[derive(Clone, Debug)]
pub struct Reservs {
    pub scheme: ListScheme,
    /// `orders[c]` for every size class of the machine.
    pub orders: Vec<u8>,
    slab: Vec<Option<Resv>>,
    free_ids: Vec<u32>,
    heads: Vec<u32>,
    tails: Vec<u32>,
    /// `slots[c][pfn >> orders[c]]`: the class-c reservation over that aligned extent, or NONE
    /// (FreeBSD finds a page's reservation by its address the same way, `vm_reserv_from_page`).
    /// A reservation occupies one slot, so creating and destroying one is O(1) and finding a
    /// frame's is O(S). `slots[0]` is empty: no reservation is one base page.
    slots: Vec<Vec<u32>>,
    clock: u64,
    pub stats: ReservStats,
    /// Elementary steps done so far: list links updated, bitmap words and frame-map slots
    /// touched, pieces made. Not reported; tests hold the per-operation bounds with it.
    pub steps: u64,
    /// Frames reserved for pages not yet populated (sum of `2^order - popcnt`), now and at
    /// their peak: memory the reservations hold that no page uses.
    pub unpopulated_frames: u64,
    pub unpopulated_peak_frames: u64,
}

impl Reservs {
    pub fn new(scheme: ListScheme, orders: &[u8], frames: u64) -> Reservs {
        let lists = match scheme {
            ListScheme::MultiList => orders.len() - 1,
            ListScheme::Partpopq => 1,
        };
        Reservs {
            scheme,
            orders: orders.to_vec(),
            slab: Vec::new(),
            free_ids: Vec::new(),
            heads: vec![NONE; lists],
            tails: vec![NONE; lists],
            slots: orders
                .iter()
                .enumerate()
                .map(|(c, &o)| {
                    if c == 0 {
                        Vec::new()
                    } else {
                        vec![NONE; frames.div_ceil(1 << o) as usize]
                    }
                })
                .collect(),
            clock: 0,
            stats: ReservStats::default(),
            steps: 0,
            unpopulated_frames: 0,
            unpopulated_peak_frames: 0,
        }
    }

    pub fn get(&self, id: u32) -> &Resv {
        self.slab[id as usize]
            .as_ref()
            .expect("Reservs::get: dangling id")
    }
    fn get_mut(&mut self, id: u32) -> &mut Resv {
        self.slab[id as usize]
            .as_mut()
            .expect("Reservs::get_mut: dangling id")
    }

    /// The reservation covering frame `pfn`, if any: one slot per size class, O(S).
    #[inline]
    pub fn of_frame(&self, pfn: Pfn) -> Option<u32> {
        (1..self.orders.len()).find_map(|c| {
            let r = self.slots[c][(pfn.0 >> self.orders[c]) as usize];
            (r != NONE).then_some(r)
        })
    }

    pub fn lists(&self) -> usize {
        self.heads.len()
    }

    /// Ids on list `l`, head first.
    pub fn list(&self, l: usize) -> Vec<u32> {
        let mut v = Vec::new();
        let mut r = self.heads[l];
        while r != NONE {
            v.push(r);
            r = self.get(r).next;
        }
        v
    }

    pub fn head(&self, l: usize) -> Option<u32> {
        (self.heads[l] != NONE).then_some(self.heads[l])
    }

    /// The tail of list `l`: the most recently changed reservation (FreeBSD's partpopq).
    pub fn tail(&self, l: usize) -> Option<u32> {
        (self.tails[l] != NONE).then_some(self.tails[l])
    }

    /// The reservation before `id` on its list (towards the head), if any.
    pub fn prev(&self, id: u32) -> Option<u32> {
        let p = self.get(id).prev;
        (p != NONE).then_some(p)
    }

    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.slab
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_some())
            .map(|(i, _)| i as u32)
    }

    /// The list a reservation belongs on, or NO_LIST when fully populated.
    fn list_for(&self, r: &Resv) -> u8 {
        if r.full() {
            return NO_LIST;
        }
        match self.scheme {
            ListScheme::Partpopq => 0,
            ListScheme::MultiList => (0..r.class)
                .rev()
                .find(|&c| r.free_extents[c as usize] > 0)
                .unwrap_or(0),
        }
    }

    /// Takes `id` off its list, if it is on one. O(1).
    fn unlink(&mut self, id: u32) {
        let (l, prev, next) = {
            let r = self.get(id);
            (r.list, r.prev, r.next)
        };
        if l == NO_LIST {
            return;
        }
        self.steps += 1;
        if prev != NONE {
            self.get_mut(prev).next = next;
        } else {
            self.heads[l as usize] = next;
        }
        if next != NONE {
            self.get_mut(next).prev = prev;
        } else {
            self.tails[l as usize] = prev;
        }
        let r = self.get_mut(id);
        r.list = NO_LIST;
        r.prev = NONE;
        r.next = NONE;
    }

    /// Links `id` (on no list) at the head or the tail of list `l` (nothing for NO_LIST), with
    /// the key that keeps the list's keys increasing: at the tail `SORTED_BASE + last` (the
    /// caller makes sure it exceeds the tail's), at the head one less than the head's. O(1).
    fn link(&mut self, id: u32, l: u8, at_head: bool) {
        if l == NO_LIST {
            return;
        }
        self.steps += 1;
        let li = l as usize;
        let (head, tail) = (self.heads[li], self.tails[li]);
        let key = if at_head {
            match head {
                NONE => SORTED_BASE - 1,
                h => self.get(h).key.min(SORTED_BASE) - 1,
            }
        } else {
            SORTED_BASE + self.get(id).last
        };
        {
            let r = self.get_mut(id);
            r.list = l;
            r.key = key;
            if at_head {
                r.prev = NONE;
                r.next = head;
            } else {
                r.prev = tail;
                r.next = NONE;
            }
        }
        if at_head {
            if head != NONE {
                self.get_mut(head).prev = id;
            } else {
                self.tails[li] = id;
            }
            self.heads[li] = id;
        } else {
            if tail != NONE {
                self.get_mut(tail).next = id;
            } else {
                self.heads[li] = id;
            }
            self.tails[li] = id;
        }
    }

    /// Puts `id` on the list its state calls for (tail, or head when `at_head`).
    fn requeue(&mut self, id: u32, at_head: bool) {
        self.unlink(id);
        let l = self.list_for(self.get(id));
        self.link(id, l, at_head);
    }

    /// Creates an empty reservation of class `class` over frames from `pfn` for object pages
    /// from `cbase`. The caller populates its first page next (an empty reservation is not kept).
    /// O(S + W): the free-extent counts and a cleared bitmap; one frame-map slot.
    pub fn create(&mut self, obj: ObjId, cbase: u64, pfn: Pfn, class: u8) -> u32 {
        let order = self.orders[class as usize];
        debug_assert!(
            pfn.is_aligned(crate::units::Order(order)) && cbase.is_multiple_of(1 << order),
            "Reservs::create: misaligned"
        );
        let free_extents = (0..class)
            .map(|c| 1u64 << (order - self.orders[c as usize]))
            .collect();
        let r = Resv {
            obj,
            cbase,
            pfn,
            class,
            order,
            bits: vec![0; (1usize << order).div_ceil(64)],
            popcnt: 0,
            free_extents,
            last: self.clock,
            list: NO_LIST,
            key: 0,
            prev: NONE,
            next: NONE,
        };
        self.steps += 1 + r.bits.len() as u64;
        let id = match self.free_ids.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(r);
                i
            }
            None => {
                self.slab.push(Some(r));
                self.slab.len() as u32 - 1
            }
        };
        let slot = &mut self.slots[class as usize][(pfn.0 >> order) as usize];
        debug_assert_eq!(*slot, NONE, "Reservs::create: extent already reserved");
        *slot = id;
        self.unpopulated_frames += 1 << order;
        self.stats.created += 1;
        id
    }

    /// Marks page `cindex` populated (an allocation): bitmap, counts, free extents, list position
    /// (the tail: seed 000 4.8 sorts by the most recent allocation). Returns true if the
    /// reservation became fully populated (it then leaves the lists). O(S), plus W for classes of
    /// 64 pages or more.
    pub fn populate(&mut self, id: u32, cindex: u64) -> bool {
        self.clock += 1;
        let clock = self.clock;
        let orders = &self.orders;
        let r = self.slab[id as usize]
            .as_mut()
            .expect("Reservs::populate: dangling id");
        let i = cindex - r.cbase;
        debug_assert!(
            i < 1 << r.order && !r.is_set(i),
            "Reservs::populate: slot {i} out of range or populated"
        );
        let mut steps = 0;
        for (c, &o) in orders.iter().enumerate().take(r.class as usize) {
            let n = 1u64 << o;
            let from = i & !(n - 1);
            steps += n.div_ceil(64);
            if r.range_empty(from, n) {
                r.free_extents[c] -= 1;
            }
        }
        self.steps += steps;
        r.bits[(i / 64) as usize] |= 1 << (i % 64);
        r.popcnt += 1;
        r.last = clock;
        let full = r.full();
        if full {
            self.stats.fully_populated += 1;
        }
        self.unpopulated_frames -= 1;
        // The peak is taken after the first page of a new reservation is populated (the
        // caller always populates it next), so it never counts a reservation with none.
        self.note_unpopulated_peak();
        self.requeue(id, false);
        full
    }

    /// Marks page `cindex` unpopulated. Returns the extent to give back to the buddy allocator if
    /// the reservation became empty (it is then destroyed; the caller clears the popmap pointer).
    /// O(S), plus W for classes of 64 pages or more.
    pub fn depopulate(&mut self, id: u32, cindex: u64) -> Option<(Pfn, u8)> {
        let orders = &self.orders;
        let scheme = self.scheme;
        let r = self.slab[id as usize]
            .as_mut()
            .expect("Reservs::depopulate: dangling id");
        let i = cindex - r.cbase;
        debug_assert!(r.is_set(i), "Reservs::depopulate: slot {i} not populated");
        r.bits[(i / 64) as usize] &= !(1 << (i % 64));
        r.popcnt -= 1;
        self.unpopulated_frames += 1;
        let mut steps = 0;
        for (c, &o) in orders.iter().enumerate().take(r.class as usize) {
            let n = 1u64 << o;
            steps += n.div_ceil(64);
            if r.range_empty(i & !(n - 1), n) {
                r.free_extents[c] += 1;
            }
        }
        self.steps += steps;
        if r.popcnt == 0 {
            let extent = (r.pfn, r.order);
            let _ = self.destroy(id);
            self.stats.broken += 1;
            return Some(extent);
        }
        // FreeBSD requeues at the tail on every change (vm_reserv_depopulate). seed 000 orders
        // by allocations only: a free that leaves the reservation on its list leaves it in place.
        let moved_lists = self.get(id).list != self.list_for(self.get(id));
        if scheme == ListScheme::Partpopq {
            self.requeue(id, false);
        } else if moved_lists {
            // A free that changes the list (the largest free extent grew, or the reservation
            // is no longer full): seed 000 4.8 keeps lists sorted by the most recent allocation
            // but says nothing of frees, and a sorted insert is a search (up to 400,000 steps
            // here once). In O(1): the tail if its most recent allocation is the newest on the
            // list (exact), else the head, as 4.8 places a preempted reservation's pieces: a
            // reservation whose owner frees its pages is taken for cold.
            self.unlink(id);
            let l = self.list_for(self.get(id));
            let newest = l == NO_LIST
                || match self.tails[l as usize] {
                    NONE => true,
                    t => SORTED_BASE + self.get(id).last > self.get(t).key,
                };
            self.link(id, l, !newest);
        }
        None
    }

    /// Removes a reservation and clears its frame-map slot (the caller frees the frames); returns
    /// it. O(1).
    fn destroy(&mut self, id: u32) -> Resv {
        self.unlink(id);
        let r = self.slab[id as usize]
            .take()
            .expect("Reservs::destroy: dangling id");
        self.unpopulated_frames -= (1u64 << r.order) - r.popcnt;
        self.slots[r.class as usize][(r.pfn.0 >> r.order) as usize] = NONE;
        self.steps += 1;
        self.free_ids.push(id);
        r
    }

    /// Breaks `id` into its aligned pieces of class `sub` (the next smaller size, seed 000 4.8),
    /// each with its slice of the bitmap and its population count; the reservation is gone, its
    /// frames unowned. The caller frees empty pieces, and re-reserves partial / full ones with
    /// `adopt`. O(R + W): R pieces, each cut from the bitmap by words or by one mask.
    pub fn split(&mut self, id: u32, sub: u8) -> Split {
        debug_assert!(
            sub < self.get(id).class,
            "Reservs::split: pieces must be smaller"
        );
        let r = self.destroy(id);
        let n = 1u64 << self.orders[sub as usize];
        let count = (1u64 << r.order) / n;
        let mut pieces = Vec::with_capacity(count as usize);
        for k in 0..count {
            let from = k * n;
            let bits: Vec<u64> = if n >= 64 {
                r.bits[(from / 64) as usize..((from + n) / 64) as usize].to_vec()
            } else {
                vec![(r.bits[(from / 64) as usize] >> (from % 64)) & ((1u64 << n) - 1)]
            };
            self.steps += 1 + bits.len() as u64;
            let popcnt = bits.iter().map(|w| w.count_ones() as u64).sum();
            pieces.push(Piece {
                cbase: r.cbase + from,
                pfn: Pfn(r.pfn.0 + from),
                class: sub,
                bits,
                popcnt,
            });
        }
        Split {
            obj: r.obj,
            last: r.last,
            pieces,
        }
    }

    /// Recreates a populated piece from a split as a reservation; partially populated ones go to
    /// the head of their list (seed 000 4.8: "inserted at the head"), full ones to no list.
    /// O(S W'): the free-extent counts from the piece's W' bitmap words.
    pub fn adopt(&mut self, obj: ObjId, piece: Piece, last: u64) -> u32 {
        debug_assert!(
            piece.popcnt > 0 && piece.class > 0,
            "Reservs::adopt: an empty or base-page piece"
        );
        let class = piece.class;
        let id = self.create(obj, piece.cbase, piece.pfn, class);
        self.stats.created -= 1; // a piece of an existing reservation, not a new one
        let free: Vec<u64> = (0..class as usize)
            .map(|c| {
                let len = 1u64 << self.orders[class as usize];
                empty_fields(&piece.bits, len, 1u64 << self.orders[c])
            })
            .collect();
        self.steps += class as u64 * piece.bits.len() as u64;
        let r = self.get_mut(id);
        r.bits = piece.bits;
        r.popcnt = piece.popcnt;
        r.last = last;
        r.free_extents = free;
        self.unpopulated_frames -= piece.popcnt;
        self.note_unpopulated_peak();
        self.requeue(id, true);
        id
    }

    #[inline]
    fn note_unpopulated_peak(&mut self) {
        self.unpopulated_peak_frames = self.unpopulated_peak_frames.max(self.unpopulated_frames);
    }

    /// Dissolves `id` entirely (FreeBSD `vm_reserv_break`): returns it for the caller to free its
    /// unpopulated frames (`unpopulated_runs`) and forget it. O(1).
    pub fn take(&mut self, id: u32) -> Resv {
        self.destroy(id)
    }

    /// The runs of unpopulated pages of `r`, as (offset, length), in address order: what a break
    /// gives back to the buddy allocator (FreeBSD vm_reserv_break frees runs the same way).
    /// O(W + runs).
    pub fn unpopulated_runs(&mut self, r: &Resv) -> Vec<(u64, u64)> {
        let n = 1u64 << r.order;
        let mut runs = Vec::new();
        let mut i = 0;
        while i < n {
            // Skip populated pages, then take the unpopulated run, a word at a time.
            i += run_len(&r.bits, i, n, true);
            if i >= n {
                break;
            }
            let len = run_len(&r.bits, i, n, false);
            runs.push((i, len));
            i += len;
        }
        self.steps += r.bits.len() as u64 + runs.len() as u64;
        runs
    }

    /// The checks of `check_invariants` that concern reservation `id` alone and cost
    /// O(its bitmap words + size classes): aligned, `popcnt` agrees with the bitmap, on the list it
    /// belongs on, and its first and last frames recorded as its own. For the incremental
    /// `--check`.
    pub fn check_one(&self, id: u32) -> Result<(), String> {
        if !matches!(self.slab.get(id as usize), Some(Some(_))) {
            return Err(format!("reservation {id}: dangling id"));
        }
        self.check_resv(id, false)
    }

    /// Reservation `id` on its own: aligned, `popcnt` agrees with the bitmap, on the list it
    /// belongs on, its frames recorded as its own; with `full`, also its free-extent counters and
    /// every frame (else only the first and last).
    fn check_resv(&self, id: u32, full: bool) -> Result<(), String> {
        let r = self.get(id);
        let n = 1u64 << r.order;
        if !r.pfn.is_aligned(crate::units::Order(r.order)) || !r.cbase.is_multiple_of(n) {
            return Err(format!("reservation {id}: misaligned"));
        }
        let ones: u64 = r.bits.iter().map(|w| w.count_ones() as u64).sum();
        if ones != r.popcnt || r.popcnt == 0 {
            return Err(format!(
                "reservation {id}: popcnt {} but {ones} bits set",
                r.popcnt
            ));
        }
        if full {
            for c in 0..r.class as usize {
                let m = 1u64 << self.orders[c];
                let free = (0..n / m).filter(|k| r.range_empty(k * m, m)).count() as u64;
                if free != r.free_extents[c] {
                    return Err(format!(
                        "reservation {id}: {free} free class-{c} extents, counter {}",
                        r.free_extents[c]
                    ));
                }
            }
        }
        if r.list != self.list_for(r) {
            return Err(format!(
                "reservation {id}: on list {} but belongs on {}",
                r.list,
                self.list_for(r)
            ));
        }
        if self.slots[r.class as usize][(r.pfn.0 >> r.order) as usize] != id {
            return Err(format!(
                "reservation {id}: its frame-map slot names another"
            ));
        }
        if full {
            // No reservation of another size overlaps it.
            for c in 1..self.orders.len() {
                let o = self.orders[c];
                if c == r.class as usize {
                    continue;
                }
                let from = r.pfn.0 >> o;
                let to = ((r.pfn.0 + n) >> o).max(from + 1);
                if let Some(k) =
                    (from..to).find(|&k| self.slots[c].get(k as usize).is_some_and(|&x| x != NONE))
                {
                    return Err(format!(
                        "reservation {id}: overlaps reservation {} of class {c}",
                        self.slots[c][k as usize]
                    ));
                }
            }
        }
        for f in [r.pfn.0, r.pfn.0 + n - 1] {
            if self.of_frame(Pfn(f)) != Some(id) {
                return Err(format!(
                    "reservation {id}: frame {f} not recorded as its own"
                ));
            }
        }
        Ok(())
    }

    pub fn check_invariants(&self) -> Result<(), String> {
        for id in self.ids() {
            self.check_resv(id, true)?;
        }
        let unpopulated: u64 = self
            .ids()
            .map(|id| (1u64 << self.get(id).order) - self.get(id).popcnt)
            .sum();
        if unpopulated != self.unpopulated_frames {
            return Err(format!(
                "reservations: {unpopulated} unpopulated reserved frames, counter {}",
                self.unpopulated_frames
            ));
        }
        let owned: u64 = (1..self.orders.len())
            .map(|c| {
                self.slots[c].iter().filter(|&&r| r != NONE).count() as u64 * (1 << self.orders[c])
            })
            .sum();
        let total: u64 = self.ids().map(|id| 1u64 << self.get(id).order).sum();
        if owned != total {
            return Err(format!(
                "reservations: {owned} frames marked owned but reservations cover {total}"
            ));
        }
        for l in 0..self.heads.len() {
            let ids = self.list(l);
            let mut prev = NONE;
            for &id in &ids {
                let r = self.get(id);
                if r.list as usize != l || r.prev != prev {
                    return Err(format!("reservation list {l}: broken links at {id}"));
                }
                // seed 000 4.8: head-placed reservations, then the rest sorted by their most
                // recent allocation (keys increase; a sorted key is that time).
                if self.scheme == ListScheme::MultiList {
                    if prev != NONE && self.get(prev).key >= r.key {
                        return Err(format!(
                            "reservation list {l}: {id} (key {:#x}) after {prev} (key {:#x}): out of order",
                            r.key,
                            self.get(prev).key
                        ));
                    }
                    if r.key >= SORTED_BASE && r.key != SORTED_BASE + r.last {
                        return Err(format!(
                            "reservation list {l}: {id} sorted by {} but last allocated at {}",
                            r.key - SORTED_BASE,
                            r.last
                        ));
                    }
                }
                prev = id;
            }
            if self.tails[l] != prev {
                return Err(format!(
                    "reservation list {l}: tail is not the last element"
                ));
            }
        }
        let listed: usize = (0..self.heads.len()).map(|l| self.list(l).len()).sum();
        let partial = self.ids().filter(|&id| !self.get(id).full()).count();
        if listed != partial {
            return Err(format!(
                "reservations: {partial} partially populated but {listed} listed"
            ));
        }
        Ok(())
    }

    /// A readable dump of the lists, for `--dump-reservations`.
    pub fn dump(&self, sizes: &[u64]) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let total = self.ids().count();
        let full = self.ids().filter(|&id| self.get(id).full()).count();
        let _ = writeln!(
            s,
            "reservations: {total} live ({full} fully populated, not listed)"
        );
        for l in 0..self.heads.len() {
            let ids = self.list(l);
            let name = match self.scheme {
                ListScheme::MultiList => format!("{} list", crate::units::fmt_size(sizes[l])),
                ListScheme::Partpopq => "partpopq".to_string(),
            };
            let _ = writeln!(
                s,
                "  {name}: {} reservations (head = least recently allocated)",
                ids.len()
            );
            for (k, &id) in ids.iter().enumerate() {
                if k == 20 {
                    let _ = writeln!(s, "    ... {} more", ids.len() - 20);
                    break;
                }
                let r = self.get(id);
                let _ = writeln!(
                    s,
                    "    #{id}: {} at frame {:#x}, object {} pages {:#x}.., {}/{} populated, last alloc {}",
                    crate::units::fmt_size(sizes[r.class as usize]),
                    r.pfn.0,
                    r.obj.0,
                    r.cbase,
                    r.popcnt,
                    1u64 << r.order,
                    r.last
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Alpha orders: 8K, 64K, 512K, 4M.
    fn alpha() -> Reservs {
        Reservs::new(ListScheme::MultiList, &[0, 3, 6, 9], 4096)
    }

    /// seed 000 4.8: one list per page size but the largest (8K, 64K, 512K on the Alpha);
    /// FreeBSD one queue.
    #[test]
    fn one_list_per_size_but_the_largest() {
        assert_eq!(alpha().lists(), 3);
        let q = Reservs::new(ListScheme::Partpopq, &[0, 3, 6, 9], 4096);
        assert_eq!(q.lists(), 1);
    }

    #[test]
    fn lists_follow_the_largest_free_extent() {
        let mut rs = alpha();
        let a = rs.create(ObjId(1), 0, Pfn(512), 3);
        rs.populate(a, 5);
        assert_eq!(
            rs.get(a).list,
            2,
            "a 4M reservation with one page yields 512K extents"
        );
        for k in 1..8 {
            rs.populate(a, k * 64);
        }
        assert_eq!(
            rs.get(a).list,
            1,
            "every 512K piece populated: 64K extents remain"
        );
        rs.check_invariants().unwrap();
        let split = rs.split(a, 2);
        assert_eq!((split.obj, split.pieces.len()), (ObjId(1), 8));
        assert_eq!(split.pieces[0].bits, vec![1 << 5]);
        assert_eq!(split.pieces[1].bits, vec![1]);
        for piece in split.pieces {
            rs.adopt(ObjId(1), piece, 0);
        }
        assert_eq!(rs.list(1).len(), 8);
        rs.check_invariants().unwrap();
    }

    #[test]
    fn depopulate_to_empty_returns_the_extent() {
        let mut rs = alpha();
        let a = rs.create(ObjId(1), 64, Pfn(64), 2);
        rs.populate(a, 64);
        rs.populate(a, 70);
        assert_eq!(rs.depopulate(a, 64), None);
        assert_eq!(rs.depopulate(a, 70), Some((Pfn(64), 6)));
        assert_eq!(rs.ids().count(), 0);
        assert_eq!(rs.of_frame(Pfn(64)), None);
        rs.check_invariants().unwrap();
    }

    /// seed 000 4.8: "fully populated extents are not reinserted into the reservation lists":
    /// the last page of a 64K reservation takes it off the 8K list, and it stays reserved.
    #[test]
    fn a_fully_populated_reservation_leaves_its_list() {
        let mut rs = alpha();
        let a = rs.create(ObjId(1), 8, Pfn(8), 1);
        for k in 8..15 {
            assert!(!rs.populate(a, k), "page {k} of 8..16: not full yet");
            assert!(!rs.get(a).full());
        }
        assert_eq!((rs.get(a).list, rs.head(0)), (0, Some(a)));
        assert!(rs.populate(a, 15), "the eighth page fills it");
        assert!(rs.get(a).full());
        assert_eq!((rs.get(a).list, rs.head(0)), (NO_LIST, None));
        assert_eq!(
            (rs.stats.fully_populated, rs.of_frame(Pfn(12))),
            (1, Some(a))
        );
        assert_eq!(rs.unpopulated_frames, 0);
        rs.check_invariants().unwrap();
        // A free makes it partial again: back on the 8K list.
        assert_eq!(rs.depopulate(a, 9), None);
        assert!(!rs.get(a).full());
        assert_eq!(rs.head(0), Some(a));
        rs.check_invariants().unwrap();
    }

    /// seed 000 4.8: a preempted reservation's partially populated piece goes to the head of its
    /// list, ahead of the run sorted by allocation time, even on an empty list and with the
    /// piece's real time of last allocation; a reservation emptied by frees is counted broken.
    #[test]
    fn a_piece_at_the_head_of_an_empty_list_stays_before_the_sorted_run() {
        let mut rs = alpha();
        let r = rs.create(ObjId(1), 0, Pfn(0), 2);
        rs.populate(r, 3);
        rs.populate(r, 9);
        let split = rs.split(r, 1);
        assert_eq!(split.last, 2);
        let mut kept = vec![];
        for piece in split.pieces.into_iter().filter(|p| p.popcnt > 0) {
            kept.push(rs.adopt(ObjId(1), piece, split.last));
            rs.check_invariants().unwrap();
        }
        assert_eq!(rs.list(0), vec![kept[1], kept[0]], "each at the head");
        // A reservation allocated since goes behind them.
        let b = rs.create(ObjId(2), 0, Pfn(64), 1);
        rs.populate(b, 0);
        assert_eq!(rs.list(0), vec![kept[1], kept[0], b]);
        assert_eq!(
            rs.stats.created, 2,
            "r and b: the pieces are not new reservations"
        );
        rs.check_invariants().unwrap();
        assert_eq!(rs.stats.broken, 0);
        assert_eq!(rs.depopulate(b, 0), Some((Pfn(64), 3)));
        assert_eq!(rs.stats.broken, 1);
        rs.check_invariants().unwrap();
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;

    /// seed 000 4.8: a reservation that changes lists on a free keeps the lists sorted by the
    /// time of the most recent allocation (review finding: it used to go to the tail).
    #[test]
    fn list_change_on_free_keeps_allocation_order() {
        let mut rs = Reservs::new(ListScheme::MultiList, &[0, 3, 6, 9], 4096);
        let a = rs.create(ObjId(1), 0, Pfn(0), 3);
        for k in 0..8 {
            rs.populate(a, k * 64); // every 512K piece touched: A on the 64K list
        }
        let b = rs.create(ObjId(2), 0, Pfn(512), 3);
        rs.populate(b, 0); // B allocated after A, on the 512K list
        assert_eq!((rs.get(a).list, rs.get(b).list), (1, 2));
        rs.depopulate(a, 64); // A can now yield a 512K extent: it joins B's list, before B
        assert_eq!(rs.list(2), vec![a, b]);
        rs.check_invariants().unwrap();
    }
}

/// Issue 10, defect 5: no operation searches a list, and create / split / break touch one
/// frame-map slot and the bitmap's words rather than every page (seed 000 6.8: O(1), O(S), or
/// O(S R) for a preemption).
#[cfg(test)]
mod bound_tests {
    use super::*;

    /// Alpha: 8K, 64K, 512K, 4M; W = 8 words for a 4M reservation.
    fn alpha(frames: u64) -> Reservs {
        Reservs::new(ListScheme::MultiList, &[0, 3, 6, 9], frames)
    }

    /// The steps `f` takes.
    fn steps<T>(rs: &mut Reservs, f: impl FnOnce(&mut Reservs) -> T) -> (T, u64) {
        let before = rs.steps;
        let t = f(rs);
        (t, rs.steps - before)
    }

    /// A free that moves a reservation onto a list of 10,000 costs the same as onto an empty
    /// one (it used to walk the list from its tail: one free took 400,000 steps).
    #[test]
    fn a_free_that_changes_lists_does_not_search_the_list() {
        let n = 10_000u64;
        let mut rs = alpha(64 * (n + 1));
        // A: a 512K reservation with a page in every 64K piece (the 8K list), allocated first.
        let a = rs.create(ObjId(0), 0, Pfn(0), 2);
        for k in 0..8 {
            rs.populate(a, k * 8);
        }
        assert_eq!(rs.get(a).list, 0);
        // Then 10,000 512K reservations of one page each: the 64K list.
        for k in 1..=n {
            let id = rs.create(ObjId(k as u32), 0, Pfn(64 * k), 2);
            rs.populate(id, 0);
        }
        assert_eq!(rs.list(1).len(), n as usize);
        // Freeing A's page in its second 64K piece frees a 64K extent: A joins the 64K list.
        let (_, s) = steps(&mut rs, |rs| rs.depopulate(a, 8));
        assert_eq!(rs.get(a).list, 1);
        assert_eq!(
            rs.head(1),
            Some(a),
            "older than the whole list: preempted first"
        );
        // Exactly: two size classes below 512K (one word each), unlink and link.
        assert_eq!(s, 2 + 2, "{s} steps for one free");
        rs.check_invariants().unwrap();
    }

    /// A free whose reservation was allocated after everything on the new list goes to the tail:
    /// the list stays sorted by the most recent allocation, as seed 000 4.8 has it.
    #[test]
    fn a_free_of_the_newest_reservation_keeps_it_at_the_tail() {
        let mut rs = alpha(64 * 3);
        let b = rs.create(ObjId(1), 0, Pfn(64), 2);
        rs.populate(b, 0); // 64K list
        let a = rs.create(ObjId(0), 0, Pfn(0), 2);
        for k in 0..8 {
            rs.populate(a, k * 8); // 8K list, allocated after B
        }
        rs.depopulate(a, 8);
        assert_eq!(rs.list(1), vec![b, a]);
        rs.check_invariants().unwrap();
    }

    /// Two pieces of one preempted reservation share its most recent allocation. Freed onto the
    /// same list one after the other, the first goes to the tail (newest there), the second
    /// cannot follow it with an equal key: it goes to the head (cargo-mutants: `>` -> `>=`).
    #[test]
    fn sibling_pieces_freed_onto_one_list_keep_keys_strict() {
        let mut rs = alpha(512);
        let r = rs.create(ObjId(1), 0, Pfn(0), 3);
        for k in 0..16 {
            rs.populate(r, k * 8); // every 64K of the first two 512K pieces
        }
        let split = rs.split(r, 2);
        let mut pieces = split.pieces.into_iter().filter(|p| p.popcnt > 0);
        let a = rs.adopt(ObjId(1), pieces.next().unwrap(), split.last);
        let b = rs.adopt(ObjId(1), pieces.next().unwrap(), split.last);
        assert_eq!((rs.get(a).list, rs.get(b).list), (0, 0));
        rs.depopulate(b, 64 + 8);
        rs.depopulate(a, 8);
        assert_eq!(rs.list(1), vec![a, b]);
        rs.check_invariants().unwrap();
    }

    /// An allocation moves a reservation to the tail in O(S) whatever the list's length, and
    /// creating a 4M reservation costs one slot and its 8 bitmap words, not its 512 frames.
    #[test]
    fn populate_and_create_are_bounded() {
        let mut rs = alpha(512 * 64);
        let ids: Vec<u32> = (0..64)
            .map(|k| {
                let (id, s) = steps(&mut rs, |rs| rs.create(ObjId(k), 0, Pfn(512 * k as u64), 3));
                // Exactly: one step and the 8 bitmap words cleared.
                assert_eq!(s, 1 + 8, "create: {s} steps");
                rs.populate(id, 0);
                id
            })
            .collect();
        let (_, s) = steps(&mut rs, |rs| rs.populate(ids[0], 1));
        assert_eq!(rs.list(2).last(), Some(&ids[0]));
        // Three size classes below 4M (the 512K one scans its 64-page piece: 1 word), unlink
        // and link.
        assert_eq!(s, 3 + 2, "populate: {s} steps");
        rs.check_invariants().unwrap();
    }

    /// Splitting a 4M reservation into its 8 pieces and adopting the populated ones: O(R + W),
    /// then O(S W') each, independent of how many pages are populated.
    #[test]
    fn split_and_adopt_are_bounded() {
        let mut rs = alpha(512);
        let a = rs.create(ObjId(1), 0, Pfn(0), 3);
        for i in (0..512).step_by(3) {
            rs.populate(a, i);
        }
        let (split, s) = steps(&mut rs, |rs| rs.split(a, 2));
        // Exactly: unlink, destroy, and per piece one step and its word.
        assert_eq!(s, 1 + 1 + 8 * 2, "split: {s} steps");
        assert_eq!(split.pieces.len(), 8);
        for p in &split.pieces {
            assert_eq!(
                p.popcnt,
                (p.cbase..p.cbase + 64).filter(|i| i % 3 == 0).count() as u64
            );
        }
        for p in split.pieces {
            let (_, s) = steps(&mut rs, |rs| rs.adopt(ObjId(1), p, 0));
            // create (1 + 1 word + slot), 2 classes x 1 word, link.
            // Exactly: create (1 + 1 word), 2 classes x 1 word, link (no unlink: on no list).
            assert_eq!(s, 2 + 2 + 1, "adopt: {s} steps");
        }
        rs.check_invariants().unwrap();
    }

    /// Adopting a piece of 8 bitmap words counts the free extents of its 3 smaller classes from
    /// its words: 3 x 8 steps, with create's 1 + 8 and the link.
    #[test]
    fn adopting_a_multiword_piece_is_counted_per_class_and_word() {
        let mut rs = Reservs::new(ListScheme::MultiList, &[0, 3, 6, 9, 12], 4096);
        let a = rs.create(ObjId(1), 0, Pfn(0), 4);
        rs.populate(a, 600);
        let split = rs.split(a, 3);
        let piece = split.pieces.into_iter().find(|p| p.popcnt > 0).unwrap();
        assert_eq!((piece.cbase, piece.bits.len()), (512, 8));
        let (id, s) = steps(&mut rs, |rs| rs.adopt(ObjId(1), piece, split.last));
        assert_eq!(s, (1 + 8) + 3 * 8 + 1, "adopt: {s} steps");
        assert_eq!(
            rs.get(id).list,
            2,
            "a 4M piece with one page yields 512K extents"
        );
        rs.check_invariants().unwrap();
    }

    /// A break finds the unpopulated runs a word at a time.
    #[test]
    fn unpopulated_runs_are_found_by_words() {
        let mut rs = alpha(512);
        let a = rs.create(ObjId(1), 0, Pfn(0), 3);
        for i in [0, 1, 63, 64, 200, 511] {
            rs.populate(a, i);
        }
        let r = rs.take(a);
        let (runs, s) = steps(&mut rs, |rs| rs.unpopulated_runs(&r));
        assert_eq!(runs, vec![(2, 61), (65, 135), (201, 310)]);
        assert_eq!(s, 8 + 3, "{s} steps");
        let mut rs = Reservs::new(ListScheme::MultiList, &[0, 3], 8);
        let b = rs.create(ObjId(1), 0, Pfn(0), 1);
        rs.populate(b, 3);
        let r = rs.take(b);
        assert_eq!(rs.unpopulated_runs(&r), vec![(0, 3), (4, 4)]);
    }

    /// The free-extent counts of an adopted piece, from its words, agree with a page-by-page
    /// count (sub-word fields folded, whole words, a piece shorter than a word).
    #[test]
    fn empty_fields_counts_like_a_page_scan() {
        let bits = [0x0000_00f0_0000_0101u64, 0, 0, 0];
        let scan = |len: u64, n: u64| {
            (0..len / n)
                .filter(|k| {
                    (k * n..(k + 1) * n).all(|i| bits[(i / 64) as usize] >> (i % 64) & 1 == 0)
                })
                .count() as u64
        };
        for (len, n) in [
            (256u64, 64u64),
            (256, 128),
            (128u64, 1u64),
            (128, 8),
            (128, 2),
            (128, 64),
            (64, 32),
            (16, 8),
            (8, 8),
            (128, 128),
        ] {
            assert_eq!(
                empty_fields(&bits[..len.div_ceil(64) as usize], len, n),
                scan(len, n),
                "len {len} n {n}"
            );
        }
    }

    /// The invariant check holds the list order: a key out of order, or a sorted key that is not
    /// the reservation's most recent allocation, is an error.
    #[test]
    fn the_check_catches_lists_out_of_order() {
        let mut rs = alpha(512 * 2);
        let a = rs.create(ObjId(1), 0, Pfn(0), 3);
        rs.populate(a, 0);
        let b = rs.create(ObjId(2), 0, Pfn(512), 3);
        rs.populate(b, 0);
        rs.check_invariants().unwrap();
        rs.get_mut(a).key += 10;
        rs.get_mut(a).last += 10;
        assert!(rs.check_invariants().unwrap_err().contains("out of order"));
        rs.get_mut(a).key = SORTED_BASE - 5;
        rs.check_invariants().unwrap();
        rs.get_mut(b).last -= 1;
        assert!(rs.check_invariants().unwrap_err().contains("sorted by"));
    }
}
