//! Buddy allocator of physical frames: free lists per order, O(1) allocate and free (plus the
//! split / coalesce loop, bounded by the largest order), eager coalescing (seed 000 4.4).
//!
//! Representation: every free block is an aligned run of `2^order` frames whose first frame (its
//! head) records the order in `head_order`; heads are linked into per-order doubly linked lists
//! through `next` / `prev` (frame-indexed, so no allocation on the hot path). Any other frame has
//! `head_order == NOT_HEAD`.
//!
//! Invariants (checked by `check_invariants`):
//! - free blocks are aligned to their size, disjoint, and each is on exactly the list of its order;
//! - coalescing is eager: no free block has a free buddy of the same order;
//! - `free_frames` equals the sum of the sizes of the free blocks; `free_blocks[o]` the list lengths.
//!
//! Allocation order: lists are LIFO (a freed block is the next one handed out), like FreeBSD's
//! vm_phys free queues for recently freed pages. Deterministic by construction.
//!
//! Cache pages (seed 000 5.1 (1)): a frame freed with `free_tail`, or marked with `mark_cached`
//! before `free`, still holds a cache page's contents. A free block holding any such frame goes
//! to the tail of its list ("coalesced regions are placed at the tail of their respective lists,
//! so that subsequent allocations tend to respect the A-LRU order"), so every list holds its
//! blocks without cache pages first. An allocation takes a block without cache pages, of any
//! order large enough, before one with them: FreeBSD 4's `vm_page_alloc` takes a page from the
//! free queue, and from the cache queue (its oldest page) only when the free queue is at its
//! reserve, and 5.1 (1) keeps "the contents of a cache page ... as long as possible". (FreeBSD's
//! reserve, `v_free_reserved`, a few dozen pages kept for the kernel, is not modelled: free
//! blocks go first until there are none.)
//!
//! Mobility grouping (Linux's pageblock migratetypes; off unless `enable_grouping`): memory is
//! divided into pageblocks of `2^pageblock_order` frames, each with a migratetype, MOVABLE at
//! boot (Linux `memmap_init_zone`); every free block is on the list of its order and of a
//! migratetype (`head_mt`), and every request names one. Read in Linux 4.13's mm/page_alloc.c
//! (torvalds/linux as stored; the 4.3 rules are the same where noted):
//! - `__rmqueue_smallest`: the smallest free block on the request's own lists, split, the
//!   halves going back on the request's lists (`expand`);
//! - else `__rmqueue_fallback`: from the largest order down to the request's, the first free
//!   block on another migratetype's list (`fallbacks[]`: UNMOVABLE falls back to MOVABLE and
//!   MOVABLE to UNMOVABLE; RECLAIMABLE is not modelled, nothing here is reclaimable slab).
//!   If `can_steal_fallback` (order at least half a pageblock, or an UNMOVABLE request) it is
//!   stolen (`steal_suitable_fallback`): a block of at least a pageblock converts its
//!   pageblocks (`change_pageblock_range`); a smaller one moves every free block of its
//!   pageblock to the request's lists (`move_freepages_block`) and converts the pageblock if
//!   that was at least half of it. The block is then split onto the request's lists (4.3's
//!   `expand(.., start_migratetype)`);
//! - `__free_one_page`: a freed block goes on the lists of its pageblock's migratetype
//!   (`get_pfnblock_migratetype`), which the pageblock keeps while free.
//!
//! Not modelled: MIGRATE_RESERVE (Linux 4.3 had it; 4.4 removed it), MIGRATE_HIGHATOMIC
//! (4.4+), CMA, isolation, per-CPU lists, ALLOC_NOFRAGMENT (5.0+, other zones first), and
//! 4.13's `steal_suitable_fallback` counting movable pages in the pageblock (4.12+; 4.3 counts
//! only free ones, as here).

use crate::units::{Order, Pfn};

const NIL: u32 = u32::MAX;
const NOT_HEAD: u8 = u8::MAX;

/// Linux's `MIGRATE_UNMOVABLE` (include/linux/mmzone.h `enum migratetype`): kernel frames,
/// page tables.
pub const MT_UNMOVABLE: u8 = 0;
/// `MIGRATE_MOVABLE`: user pages, the page cache; every request when grouping is off.
pub const MT_MOVABLE: u8 = 1;
/// Migratetypes modelled (lists per order).
const NMT: usize = 2;

/// The list index of order `o`, migratetype `mt`.
#[inline]
fn li(o: u8, mt: u8) -> usize {
    o as usize * NMT + mt as usize
}

#[derive(Clone, Debug)]
pub struct Buddy {
    frames: u64,
    max_order: u8,
    head_order: Vec<u8>,
    next: Vec<u32>,
    prev: Vec<u32>,
    /// List heads and tails per (order, migratetype): `li`.
    heads: Vec<u32>,
    tails: Vec<u32>,
    /// The migratetype list a free block is on, at its head frame.
    head_mt: Vec<u8>,
    /// `pageblock_order` when mobility grouping is on.
    pageblock_order: Option<u8>,
    /// Linux's largest buddy order (`MAX_ORDER - 1`), the largest chunk a fallback steals.
    fallback_max_order: u8,
    /// Each pageblock's migratetype (empty when grouping is off).
    pb_mt: Vec<u8>,
    /// `__rmqueue_fallback` allocations (from another migratetype's list), and pageblocks
    /// whose migratetype they changed.
    pub fallbacks: u64,
    pub pageblocks_converted: u64,
    /// Number of blocks on each order's lists (all migratetypes).
    pub free_blocks: Vec<u64>,
    pub free_frames: u64,
    /// Blocks (head, order) handed out or freed, and frames whose hold count changed, since the
    /// last `take_touched`; `None` unless an incremental `--check` asked for them. Debugging
    /// aid only: nothing in the model reads it.
    touched: Option<Vec<(u32, u8)>>,
    /// One bit per frame: a free frame that still holds a cache page (module doc).
    cached: Vec<u64>,
    /// Frames with their `cached` bit set.
    pub cached_frames: u64,
    /// Allocations that split a larger block without cache pages rather than take a smaller
    /// one holding some (the free-before-cache rule decided them).
    pub cache_passed: u64,
}

impl Buddy {
    /// A buddy allocator over `frames` frames, all free, with blocks up to `max_order`.
    /// `frames` must be a multiple of `2^max_order` and fit in 32 bits.
    pub fn new(frames: u64, max_order: u8) -> Buddy {
        assert!(
            frames < NIL as u64,
            "Buddy::new: {frames} frames do not fit 32-bit frame numbers"
        );
        assert!(
            frames.is_multiple_of(1 << max_order),
            "Buddy::new: frames not a multiple of the largest block"
        );
        let n = frames as usize;
        let mut b = Buddy {
            frames,
            max_order,
            head_order: vec![NOT_HEAD; n],
            next: vec![NIL; n],
            prev: vec![NIL; n],
            heads: vec![NIL; (max_order as usize + 1) * NMT],
            tails: vec![NIL; (max_order as usize + 1) * NMT],
            head_mt: vec![MT_MOVABLE; n],
            pageblock_order: None,
            fallback_max_order: max_order,
            pb_mt: Vec::new(),
            fallbacks: 0,
            pageblocks_converted: 0,
            free_blocks: vec![0; max_order as usize + 1],
            free_frames: 0,
            touched: None,
            cached: vec![0; n.div_ceil(64)],
            cached_frames: 0,
            cache_passed: 0,
        };
        // Insert in decreasing address order so that, LIFO, the lowest block is handed out first.
        let step = 1u64 << max_order;
        let mut pfn = frames;
        while pfn >= step {
            pfn -= step;
            b.push(pfn as u32, max_order, MT_MOVABLE);
        }
        b
    }

    /// Turns mobility grouping on with pageblocks of `2^pageblock_order` frames (at most the
    /// largest order), all MOVABLE, and Linux's largest order `linux_max_order` (the largest
    /// chunk `__rmqueue_fallback` can find). Every free block is already on a MOVABLE list
    /// (grouping off uses only those), so it can be turned on at any time.
    pub fn enable_grouping(&mut self, pageblock_order: u8, linux_max_order: u8) {
        let pb = pageblock_order.min(self.max_order);
        self.pageblock_order = Some(pb);
        self.fallback_max_order = linux_max_order.clamp(pb, self.max_order);
        self.pb_mt = vec![MT_MOVABLE; (self.frames >> pb) as usize];
    }

    /// `pageblock_order` if grouping is on.
    pub fn pageblock_order(&self) -> Option<u8> {
        self.pageblock_order
    }

    /// `get_pageblock_migratetype` of the frame's pageblock (MOVABLE when grouping is off).
    #[inline]
    pub fn pageblock_mt(&self, pfn: Pfn) -> u8 {
        match self.pageblock_order {
            Some(pb) => self.pb_mt[(pfn.0 >> pb) as usize],
            None => MT_MOVABLE,
        }
    }

    /// Pageblocks of each migratetype, [UNMOVABLE, MOVABLE] (all MOVABLE when grouping is off,
    /// counted in pageblocks of the largest order then).
    pub fn pageblock_counts(&self) -> [u64; NMT] {
        let mut c = [0u64; NMT];
        if self.pageblock_order.is_none() {
            c[MT_MOVABLE as usize] = self.frames >> self.max_order;
        }
        for &m in &self.pb_mt {
            c[m as usize] += 1;
        }
        c
    }

    /// Free frames on the lists of migratetype `mt`.
    pub fn free_frames_mt(&self, mt: u8) -> u64 {
        let mut n = 0;
        for o in 0..=self.max_order {
            let mut p = self.heads[li(o, mt)];
            while p != NIL {
                n += 1u64 << o;
                p = self.next[p as usize];
            }
        }
        n
    }

    /// The migratetype a request is served as: its own with grouping, else MOVABLE.
    #[inline]
    fn req_mt(&self, mt: u8) -> u8 {
        if self.pageblock_order.is_some() {
            mt
        } else {
            MT_MOVABLE
        }
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }
    pub fn max_order(&self) -> u8 {
        self.max_order
    }

    /// Starts (or stops) recording the blocks and frames each event touches, for the
    /// incremental check (`Os::check_touched`).
    pub fn track_touched(&mut self, on: bool) {
        self.touched = on.then(Vec::new);
    }

    /// Records that `[pfn, pfn + 2^order)` changed state, when tracking.
    #[inline]
    pub fn note_touched(&mut self, pfn: u64, order: u8) {
        if let Some(t) = &mut self.touched {
            t.push((pfn as u32, order));
        }
    }

    /// The blocks recorded since the last call (empty when not tracking).
    pub fn take_touched(&mut self) -> Vec<(Pfn, Order)> {
        match &mut self.touched {
            Some(t) => t
                .drain(..)
                .map(|(p, o)| (Pfn(p as u64), Order(o)))
                .collect(),
            None => Vec::new(),
        }
    }

    #[inline]
    fn push(&mut self, pfn: u32, order: u8, mt: u8) {
        let o = li(order, mt);
        self.head_mt[pfn as usize] = mt;
        let head = self.heads[o];
        self.next[pfn as usize] = head;
        self.prev[pfn as usize] = NIL;
        if head != NIL {
            self.prev[head as usize] = pfn;
        } else {
            self.tails[o] = pfn;
        }
        self.heads[o] = pfn;
        self.head_order[pfn as usize] = order;
        self.free_blocks[order as usize] += 1;
        self.free_frames += 1 << order;
    }

    /// Puts a free block on its list: at the tail if it holds a cache page, else at the head.
    #[inline]
    fn place(&mut self, pfn: u32, order: u8, mt: u8) {
        if self.holds_cache(pfn as u64, order) {
            self.push_tail(pfn, order, mt);
        } else {
            self.push(pfn, order, mt);
        }
    }

    /// Whether any frame of the aligned block `[pfn, pfn + 2^order)` holds a cache page.
    #[inline]
    pub fn holds_cache(&self, pfn: u64, order: u8) -> bool {
        if self.cached_frames == 0 {
            return false;
        }
        let n = 1u64 << order;
        if n < 64 {
            let mask = ((1u64 << n) - 1) << (pfn % 64);
            self.cached[(pfn / 64) as usize] & mask != 0
        } else {
            let w = (pfn / 64) as usize;
            self.cached[w..w + (n / 64) as usize]
                .iter()
                .any(|&x| x != 0)
        }
    }

    /// Clears the cache bits of the aligned block `[pfn, pfn + 2^order)`: it is being
    /// allocated, and whatever cache pages it held are the allocator's caller's to drop.
    fn clear_cached(&mut self, pfn: u64, order: u8) {
        if self.cached_frames == 0 {
            return;
        }
        let n = 1u64 << order;
        let (w, words) = ((pfn / 64) as usize, (n / 64).max(1) as usize);
        let mask = if n < 64 {
            ((1u64 << n) - 1) << (pfn % 64)
        } else {
            u64::MAX
        };
        for x in &mut self.cached[w..w + words] {
            self.cached_frames -= (*x & mask).count_ones() as u64;
            *x &= !mask;
        }
    }

    /// Marks the allocated frame `pfn` as holding a cache page, before it is freed (`free`), so
    /// its block is placed and allocated as one that does (module doc).
    pub fn mark_cached(&mut self, pfn: Pfn) {
        let (w, b) = ((pfn.0 / 64) as usize, pfn.0 % 64);
        if self.cached[w] & (1 << b) == 0 {
            self.cached[w] |= 1 << b;
            self.cached_frames += 1;
        }
    }

    /// As `push`, at the tail of the list.
    fn push_tail(&mut self, pfn: u32, order: u8, mt: u8) {
        let o = li(order, mt);
        self.head_mt[pfn as usize] = mt;
        let tail = self.tails[o];
        self.prev[pfn as usize] = tail;
        self.next[pfn as usize] = NIL;
        if tail != NIL {
            self.next[tail as usize] = pfn;
        } else {
            self.heads[o] = pfn;
        }
        self.tails[o] = pfn;
        self.head_order[pfn as usize] = order;
        self.free_blocks[order as usize] += 1;
        self.free_frames += 1 << order;
    }

    #[inline]
    fn unlink(&mut self, pfn: u32) {
        let order = self.head_order[pfn as usize];
        debug_assert!(
            order != NOT_HEAD,
            "Buddy::unlink: {pfn} is not a free block"
        );
        let l = li(order, self.head_mt[pfn as usize]);
        let (n, p) = (self.next[pfn as usize], self.prev[pfn as usize]);
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            self.heads[l] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        } else {
            self.tails[l] = p;
        }
        self.head_order[pfn as usize] = NOT_HEAD;
        self.free_blocks[order as usize] -= 1;
        self.free_frames -= 1 << order;
    }

    /// Allocates an aligned block of `2^order` frames for a MOVABLE request: `alloc_mt`.
    pub fn alloc(&mut self, order: Order) -> Option<Pfn> {
        self.alloc_mt(order, MT_MOVABLE)
    }

    /// Allocates an aligned block of `2^order` frames for a request of migratetype `mt`;
    /// `None` if no free block is large enough. From the request's own lists (module doc), the
    /// smallest block that holds no cache page, else the smallest block (whose cache pages are
    /// then given up, oldest first); else, with grouping, from another migratetype's
    /// (`__rmqueue_fallback`).
    pub fn alloc_mt(&mut self, order: Order, mt: u8) -> Option<Pfn> {
        let want = order.0;
        if want > self.max_order {
            return None;
        }
        let mt = self.req_mt(mt);
        let Some(smallest) = (want..=self.max_order).find(|&o| self.heads[li(o, mt)] != NIL) else {
            return self.rmqueue_fallback(want, mt);
        };
        // A list's first block holds a cache page only if all of the list's blocks do.
        let mut o = if self.cached_frames == 0 {
            smallest
        } else {
            (smallest..=self.max_order)
                .find(|&o| {
                    let h = self.heads[li(o, mt)];
                    h != NIL && !self.holds_cache(h as u64, o)
                })
                .unwrap_or(smallest)
        };
        self.cache_passed += (o != smallest) as u64;
        let pfn = self.heads[li(o, mt)];
        self.note_touched(pfn as u64, want);
        self.unlink(pfn);
        // Split: keep the lower half, free the upper halves.
        while o > want {
            o -= 1;
            self.place(pfn + (1 << o), o, mt);
        }
        self.clear_cached(pfn as u64, want);
        Some(Pfn(pfn as u64))
    }

    /// Linux 4.3 mm/page_alloc.c `__rmqueue_fallback` (module doc): the first free block of
    /// the other migratetype, largest order first, stolen if `can_steal_fallback`, split onto
    /// the request's lists. None without grouping or when nothing is free.
    fn rmqueue_fallback(&mut self, want: u8, start: u8) -> Option<Pfn> {
        let pb = self.pageblock_order?;
        let other = if start == MT_MOVABLE {
            MT_UNMOVABLE
        } else {
            MT_MOVABLE
        };
        let mut cur = (want..=self.max_order)
            .rev()
            .find(|&o| self.heads[li(o, other)] != NIL)?;
        let pfn = self.heads[li(cur, other)];
        self.fallbacks += 1;
        // Linux's largest free block is of order MAX_ORDER - 1 (`fallback_max_order`); this
        // allocator keeps larger ones for larger superpages. A larger block is taken as Linux
        // would have it, in blocks of that order: the first one is the chunk stolen, the others
        // stay free on the other migratetype's lists.
        if cur > self.fallback_max_order {
            self.unlink(pfn);
            while cur > self.fallback_max_order {
                cur -= 1;
                self.place(pfn + (1 << cur), cur, other);
            }
            self.push(pfn, cur, other);
        }
        // `can_steal_fallback`.
        if want >= pb / 2 || start == MT_UNMOVABLE {
            self.steal_suitable_fallback(pfn as u64, cur, start, pb);
        }
        self.note_touched(pfn as u64, want);
        self.unlink(pfn);
        let mut o = cur;
        while o > want {
            o -= 1;
            self.place(pfn + (1 << o), o, start);
        }
        self.clear_cached(pfn as u64, want);
        Some(Pfn(pfn as u64))
    }

    /// Linux 4.3 `steal_suitable_fallback` for the free block at `pfn` of `order`.
    fn steal_suitable_fallback(&mut self, pfn: u64, order: u8, start: u8, pb: u8) {
        if order >= pb {
            // `change_pageblock_range`.
            for b in (pfn >> pb)..((pfn + (1u64 << order)) >> pb) {
                self.set_pageblock(b, start);
            }
            return;
        }
        // `move_freepages_block`: every free block of the pageblock to the request's lists.
        let first = pfn & !((1u64 << pb) - 1);
        let mut moved = 0u64;
        let mut f = first;
        while f < first + (1u64 << pb) {
            let o = self.head_order[f as usize];
            if o == NOT_HEAD {
                f += 1;
                continue;
            }
            if self.head_mt[f as usize] != start {
                self.unlink(f as u32);
                self.push(f as u32, o, start);
            }
            moved += 1u64 << o;
            f += 1u64 << o;
        }
        if moved >= 1u64 << (pb - 1) {
            self.set_pageblock(first >> pb, start);
        }
    }

    fn set_pageblock(&mut self, block: u64, mt: u8) {
        let m = &mut self.pb_mt[block as usize];
        if *m != mt {
            *m = mt;
            self.pageblocks_converted += 1;
        }
    }

    /// Frees the aligned block `[pfn, pfn + 2^order)`, coalescing with free buddies.
    /// Precondition: the block is allocated (no frame of it is free).
    /// The block goes on the lists of its pageblock's migratetype (Linux `__free_one_page`).
    pub fn free(&mut self, pfn: Pfn, order: Order) {
        let mt = self.pageblock_mt(pfn);
        let (p, o) = self.coalesce(pfn, order);
        self.place(p, o, mt);
    }

    /// Frees as `free` a block of frames that hold cache pages (seed 000 5.1 (1)): the block it
    /// coalesces into goes to the tail of its list.
    pub fn free_tail(&mut self, pfn: Pfn, order: Order) {
        for f in pfn.0..pfn.0 + order.pages() {
            self.mark_cached(Pfn(f));
        }
        self.free(pfn, order);
    }

    /// Unlinks the free buddies `[pfn, pfn + 2^order)` coalesces with; returns the merged block.
    fn coalesce(&mut self, pfn: Pfn, order: Order) -> (u32, u8) {
        debug_assert!(
            pfn.is_aligned(order),
            "Buddy::free: {pfn:?} not aligned to order {}",
            order.0
        );
        debug_assert!(
            pfn.0 + order.pages() <= self.frames,
            "Buddy::free: {pfn:?} beyond memory"
        );
        self.note_touched(pfn.0, order.0);
        let mut p = pfn.0 as u32;
        let mut o = order.0;
        while o < self.max_order {
            let buddy = p ^ (1 << o);
            if self.head_order[buddy as usize] != o {
                break;
            }
            self.unlink(buddy);
            p &= !(1 << o);
            o += 1;
        }
        (p, o)
    }

    /// The free block containing `pfn`, as (head, order), if `pfn` is free.
    pub fn free_block_of(&self, pfn: Pfn) -> Option<(Pfn, Order)> {
        for o in 0..=self.max_order {
            let head = pfn.0 & !((1u64 << o) - 1);
            let ho = self.head_order[head as usize];
            if ho != NOT_HEAD && ho >= o {
                return Some((Pfn(head), Order(ho)));
            }
        }
        None
    }

    pub fn is_free(&self, pfn: Pfn) -> bool {
        self.free_block_of(pfn).is_some()
    }

    /// Whether any of the `n` frames from `pfn` is free: a free block overlapping them either
    /// holds `pfn` or has its head among them (blocks are contiguous). One lookup and a scan
    /// of `n` bytes, where `is_free` on each frame walks the orders `n` times (the invariant
    /// check of the huge zero page runs after every event of the tests' full check).
    pub fn any_free(&self, pfn: Pfn, n: u64) -> bool {
        let end = (pfn.0 + n).min(self.frames);
        self.is_free(pfn)
            || self.head_order[pfn.0.min(end) as usize..end as usize]
                .iter()
                .any(|&h| h != NOT_HEAD)
    }

    /// Allocates the specific aligned block `[pfn, pfn + 2^order)`, which must lie inside one
    /// free block; returns false (and changes nothing) otherwise. O(max_order).
    pub fn alloc_at(&mut self, pfn: Pfn, order: Order) -> bool {
        if !pfn.is_aligned(order) || pfn.0 + order.pages() > self.frames {
            return false;
        }
        let Some((head, horder)) = self.free_block_of(pfn) else {
            return false;
        };
        if horder.0 < order.0 {
            return false;
        }
        self.note_touched(pfn.0, order.0);
        let mt = self.head_mt[head.0 as usize];
        self.unlink(head.0 as u32);
        // Split the block down towards `pfn`, freeing the halves that do not contain it (onto
        // the block's migratetype's lists, as `expand`).
        let mut base = head.0;
        let mut o = horder.0;
        while o > order.0 {
            o -= 1;
            let half = 1u64 << o;
            if pfn.0 >= base + half {
                self.place(base as u32, o, mt);
                base += half;
            } else {
                self.place((base + half) as u32, o, mt);
            }
        }
        debug_assert_eq!(base, pfn.0);
        self.clear_cached(pfn.0, order.0);
        true
    }

    /// Allocates the highest-addressed aligned block of `2^order` frames that is free (the top
    /// of the highest free block that can hold it); `None` if none is. O(free blocks of orders
    /// >= `order`): for rare allocations only (the wired pool, seed 000 5.2).
    pub fn alloc_high(&mut self, order: Order) -> Option<Pfn> {
        let mut best: Option<u64> = None;
        for o in order.0..=self.max_order {
            for mt in 0..NMT as u8 {
                let mut p = self.heads[li(o, mt)];
                while p != NIL {
                    let top = p as u64 + (1u64 << o) - order.pages();
                    best = Some(best.map_or(top, |b: u64| b.max(top)));
                    p = self.next[p as usize];
                }
            }
        }
        let pfn = Pfn(best?);
        let ok = self.alloc_at(pfn, order);
        debug_assert!(ok);
        Some(pfn)
    }

    /// Largest order with a free block, if any.
    pub fn largest_free_order(&self) -> Option<u8> {
        (0..=self.max_order)
            .rev()
            .find(|&o| self.free_blocks[o as usize] > 0)
    }

    /// Calls `f(head, order)` for every free block (list order, then by order).
    pub fn for_each_free_block(&self, mut f: impl FnMut(Pfn, Order)) {
        for o in 0..=self.max_order {
            for mt in 0..NMT as u8 {
                let mut p = self.heads[li(o, mt)];
                while p != NIL {
                    f(Pfn(p as u64), Order(o));
                    p = self.next[p as usize];
                }
            }
        }
    }

    /// Seed 000 6.5's contiguity metric, generalised: each free base page scores the number of
    /// superpage orders (of `orders`) whose aligned region around it is entirely free; the sum is
    /// normalised to the score of all-free memory. With eager coalescing, a fully free aligned
    /// region of order k is always inside one free block of order >= k, so blocks suffice.
    pub fn contiguity(&self, orders: &[u8]) -> f64 {
        if orders.is_empty() || self.frames == 0 {
            return 0.0;
        }
        let mut score: u128 = 0;
        for o in 0..=self.max_order {
            let points = orders.iter().filter(|&&k| k <= o).count() as u128;
            score += self.free_blocks[o as usize] as u128 * (1u128 << o) * points;
        }
        score as f64 / (self.frames as u128 * orders.len() as u128) as f64
    }

    /// The checks of `check_invariants` that cost O(orders): the counters agree with each other
    /// and every list head has no predecessor.
    pub fn check_counters(&self) -> Result<(), String> {
        let mut total = 0u64;
        for o in 0..=self.max_order {
            total += self.free_blocks[o as usize] << o;
            let hs: Vec<u32> = (0..NMT as u8).map(|mt| self.heads[li(o, mt)]).collect();
            if hs.iter().all(|&h| h == NIL) != (self.free_blocks[o as usize] == 0) {
                return Err(format!(
                    "buddy: order-{o} list heads {hs:?} but counter says {} blocks",
                    self.free_blocks[o as usize]
                ));
            }
            for (mt, &h) in hs.iter().enumerate() {
                if h != NIL
                    && (self.prev[h as usize] != NIL
                        || self.head_order[h as usize] != o
                        || self.head_mt[h as usize] as usize != mt)
                {
                    return Err(format!(
                        "buddy: head {h} of the order-{o} migratetype-{mt} list is not a head"
                    ));
                }
            }
        }
        if total != self.free_frames {
            return Err(format!(
                "buddy: block counters give {total} free frames, counter {}",
                self.free_frames
            ));
        }
        Ok(())
    }

    /// The checks of `check_invariants` around one frame, in O(orders): if it is free, its
    /// block is aligned, linked both ways on the list of its order, holds no other block head,
    /// and is not coalescable with its buddy. Returns the block, if the frame is free.
    pub fn check_frame(&self, pfn: Pfn) -> Result<Option<(Pfn, Order)>, String> {
        if pfn.0 >= self.frames {
            return Err(format!("buddy: frame {} beyond memory", pfn.0));
        }
        let Some((head, o)) = self.free_block_of(pfn) else {
            if self.cached[(pfn.0 / 64) as usize] & (1 << (pfn.0 % 64)) != 0 {
                return Err(format!(
                    "buddy: frame {} is allocated but marked as a free cache page",
                    pfn.0
                ));
            }
            return Ok(None);
        };
        let (h, o8) = (head.0 as usize, o.0);
        if head.0 + (1 << o8) > self.frames {
            return Err(format!(
                "buddy: block {} of order {o8} out of range",
                head.0
            ));
        }
        if pfn != head && self.head_order[pfn.0 as usize] != NOT_HEAD {
            return Err(format!("buddy: frame {} in two free blocks", pfn.0));
        }
        let (p, n) = (self.prev[h], self.next[h]);
        let mt = self.head_mt[h];
        if mt as usize >= NMT || (self.pageblock_order.is_none() && mt != MT_MOVABLE) {
            return Err(format!(
                "buddy: block {} on the lists of migratetype {mt}",
                head.0
            ));
        }
        let linked_in = if p == NIL {
            self.heads[li(o8, mt)] == head.0 as u32
        } else {
            self.next[p as usize] == head.0 as u32
                && self.head_order[p as usize] == o8
                && self.head_mt[p as usize] == mt
        };
        let linked_out = n == NIL
            || (self.prev[n as usize] == head.0 as u32
                && self.head_order[n as usize] == o8
                && self.head_mt[n as usize] == mt);
        if !linked_in || !linked_out {
            return Err(format!(
                "buddy: broken links at block {} of order {o8}",
                head.0
            ));
        }
        if o8 < self.max_order && self.head_order[h ^ (1 << o8)] == o8 {
            return Err(format!(
                "buddy: blocks {} and {} of order {o8} are free but not coalesced",
                head.0,
                head.0 ^ (1 << o8)
            ));
        }
        Ok(Some((head, o)))
    }

    /// Test hook: points the back link of block head `pfn` at `to`, as a list bug would.
    #[cfg(test)]
    pub(crate) fn corrupt_prev(&mut self, pfn: Pfn, to: Pfn) {
        self.prev[pfn.0 as usize] = to.0 as u32;
    }

    pub fn check_invariants(&self) -> Result<(), String> {
        let mut seen = vec![false; self.frames as usize];
        let mut total = 0u64;
        if let Some(pb) = self.pageblock_order {
            if self.pb_mt.len() as u64 != self.frames >> pb
                || self.pb_mt.iter().any(|&m| m as usize >= NMT)
            {
                return Err("buddy: pageblock migratetypes malformed".into());
            }
        }
        for o in 0..=self.max_order {
            let mut count = 0u64;
            for mt in 0..NMT as u8 {
                let l = li(o, mt);
                if self.pageblock_order.is_none() && mt != MT_MOVABLE && self.heads[l] != NIL {
                    return Err(format!(
                        "buddy: migratetype-{mt} order-{o} list not empty without grouping"
                    ));
                }
                let mut p = self.heads[l];
                let mut prev = NIL;
                let mut cache_seen = false;
                while p != NIL {
                    let pfn = p as u64;
                    let holds = self.holds_cache(pfn, o);
                    if cache_seen && !holds {
                        return Err(format!(
                            "buddy: block {pfn} of order {o} holds no cache page but follows one that does on its list"
                        ));
                    }
                    cache_seen |= holds;
                    if self.head_order[p as usize] != o || self.head_mt[p as usize] != mt {
                        return Err(format!(
                            "buddy: block {pfn} on the order-{o} migratetype-{mt} list records order {} migratetype {}",
                            self.head_order[p as usize], self.head_mt[p as usize]
                        ));
                    }
                    if self.prev[p as usize] != prev {
                        return Err(format!("buddy: broken back link at {pfn}"));
                    }
                    if pfn & ((1 << o) - 1) != 0 || pfn + (1 << o) > self.frames {
                        return Err(format!(
                            "buddy: block {pfn} of order {o} misaligned or out of range"
                        ));
                    }
                    let block = &mut seen[pfn as usize..(pfn + (1 << o)) as usize];
                    if let Some(i) = block.iter().position(|&s| s) {
                        let f = pfn + i as u64;
                        return Err(format!("buddy: frame {f} in two free blocks"));
                    }
                    block.fill(true);
                    if o < self.max_order {
                        let buddy = pfn ^ (1 << o);
                        if self.head_order[buddy as usize] == o {
                            return Err(format!("buddy: blocks {pfn} and {buddy} of order {o} are free but not coalesced"));
                        }
                    }
                    count += 1;
                    total += 1 << o;
                    prev = p;
                    p = self.next[p as usize];
                    if count > self.frames {
                        return Err(format!("buddy: cycle in the order-{o} list"));
                    }
                }
                if prev != self.tails[l] {
                    return Err(format!(
                        "buddy: the order-{o} migratetype-{mt} list's tail is wrong"
                    ));
                }
            }
            if count != self.free_blocks[o as usize] {
                return Err(format!(
                    "buddy: order {o} lists have {count} blocks, counter says {}",
                    self.free_blocks[o as usize]
                ));
            }
        }
        let marked: u64 = self.cached.iter().map(|w| w.count_ones() as u64).sum();
        if marked != self.cached_frames {
            return Err(format!(
                "buddy: {marked} frames marked as cache pages, counter {}",
                self.cached_frames
            ));
        }
        for (w, &bits) in self.cached.iter().enumerate() {
            let mut b = bits;
            while b != 0 {
                let f = w * 64 + b.trailing_zeros() as usize;
                if !seen.get(f).copied().unwrap_or(false) {
                    return Err(format!(
                        "buddy: frame {f} is marked as a free cache page but is not free"
                    ));
                }
                b &= b - 1;
            }
        }
        let heads = super::count_unlike(&self.head_order, NOT_HEAD);
        let listed: u64 = self.free_blocks.iter().sum();
        if heads != listed {
            return Err(format!(
                "buddy: {heads} frames marked as block heads but {listed} blocks listed"
            ));
        }
        if total != self.free_frames {
            return Err(format!(
                "buddy: free frames {total} but counter {}",
                self.free_frames
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// 2048 frames, blocks up to order 10, grouped in pageblocks of order 9 (four of them).
    fn grouped() -> Buddy {
        let mut b = Buddy::new(2048, 10);
        b.enable_grouping(9, 10);
        b
    }

    #[test]
    fn an_unmovable_request_steals_the_largest_movable_block_and_converts_its_pageblocks() {
        let mut b = grouped();
        assert_eq!(b.pageblock_counts(), [0, 4]);
        // No UNMOVABLE free list has a block: `__rmqueue_fallback` takes an order-10 block
        // (the lowest, LIFO) and `change_pageblock_range` converts both its pageblocks.
        assert_eq!(b.alloc_mt(Order(0), MT_UNMOVABLE), Some(Pfn(0)));
        assert_eq!((b.fallbacks, b.pageblocks_converted), (1, 2));
        assert_eq!(b.pageblock_counts(), [2, 2]);
        assert_eq!(b.free_frames_mt(MT_UNMOVABLE), 1023);
        // The next ones come from the UNMOVABLE lists the split filled: no fallback.
        assert_eq!(b.alloc_mt(Order(0), MT_UNMOVABLE), Some(Pfn(1)));
        assert_eq!(b.fallbacks, 1);
        // A MOVABLE request is served from the MOVABLE pageblocks.
        assert_eq!(b.alloc(Order(0)).map(|p| p.0 >= 1024), Some(true));
        b.check_invariants().unwrap();
    }

    #[test]
    fn a_freed_pageblock_keeps_its_migratetype() {
        let mut b = grouped();
        let u = b.alloc_mt(Order(0), MT_UNMOVABLE).unwrap();
        b.free(u, Order(0));
        // All free again and coalesced, but on the UNMOVABLE lists: the pageblocks stay
        // UNMOVABLE.
        assert_eq!(b.free_frames, 2048);
        assert_eq!(b.free_frames_mt(MT_UNMOVABLE), 1024);
        assert_eq!(b.pageblock_counts(), [2, 2]);
        assert_eq!(b.pageblock_mt(Pfn(0)), MT_UNMOVABLE);
        // A MOVABLE order-9 request takes a MOVABLE block first...
        assert_eq!(b.alloc(Order(9)).map(|p| p.0 >= 1024), Some(true));
        assert_eq!(b.alloc(Order(9)).map(|p| p.0 >= 1024), Some(true));
        assert_eq!(b.fallbacks, 1);
        // ...then falls back to the UNMOVABLE one and, a pageblock or more, converts it back.
        assert_eq!(b.alloc(Order(9)), Some(Pfn(0)));
        assert_eq!((b.fallbacks, b.pageblocks_converted), (2, 4));
        assert_eq!(b.pageblock_counts(), [0, 4]);
        b.check_invariants().unwrap();
    }

    #[test]
    fn a_small_steal_converts_the_pageblock_only_if_half_of_it_is_free() {
        for (freed, converts) in [(256u64, true), (255, false)] {
            let mut b = grouped();
            let blocks: Vec<Pfn> = (0..4).map(|_| b.alloc(Order(9)).unwrap()).collect();
            assert_eq!(b.free_frames, 0);
            // Free `freed` frames of the first pageblock, one by one.
            for f in 0..freed {
                b.free(Pfn(blocks[0].0 + f), Order(0));
            }
            assert_eq!(b.free_frames_mt(MT_MOVABLE), freed);
            // The UNMOVABLE request's fallback moves every free frame of that pageblock to the
            // UNMOVABLE lists (`move_freepages_block`), converting it only at half or more.
            let u = b.alloc_mt(Order(0), MT_UNMOVABLE).unwrap();
            assert_eq!(u.0 >> 9, blocks[0].0 >> 9);
            assert_eq!(b.free_frames_mt(MT_UNMOVABLE), freed - 1);
            assert_eq!(b.free_frames_mt(MT_MOVABLE), 0);
            assert_eq!(b.pageblock_mt(u) == MT_UNMOVABLE, converts, "freed {freed}");
            assert_eq!(b.pageblocks_converted, converts as u64);
            b.check_invariants().unwrap();
        }
    }

    #[test]
    fn a_small_movable_fallback_takes_pages_without_stealing() {
        let mut b = grouped();
        // Two UNMOVABLE pageblocks (0, 1), two MOVABLE (2, 3), the MOVABLE ones allocated.
        let u = b.alloc_mt(Order(0), MT_UNMOVABLE).unwrap();
        assert!(b.alloc(Order(10)).is_some());
        assert_eq!(b.free_frames_mt(MT_MOVABLE), 0);
        // An order-0 MOVABLE request under half a pageblock (`can_steal_fallback` false for
        // MOVABLE) takes from the largest UNMOVABLE block and changes no pageblock.
        let m = b.alloc(Order(0)).unwrap();
        assert!(m.0 < 1024 && m != u);
        assert_eq!((b.fallbacks, b.pageblocks_converted), (2, 2));
        assert_eq!(b.pageblock_counts(), [2, 2]);
        b.check_invariants().unwrap();
    }

    #[test]
    fn without_grouping_every_block_is_on_the_movable_lists() {
        let mut b = Buddy::new(2048, 10);
        assert_eq!(b.alloc_mt(Order(0), MT_UNMOVABLE), Some(Pfn(0)));
        assert_eq!((b.fallbacks, b.pageblocks_converted), (0, 0));
        assert_eq!(b.free_frames_mt(MT_UNMOVABLE), 0);
        assert_eq!(b.free_frames_mt(MT_MOVABLE), 2047);
        assert_eq!(b.pageblock_mt(Pfn(0)), MT_MOVABLE);
        b.check_invariants().unwrap();
    }

    #[test]
    fn split_and_coalesce() {
        let mut b = Buddy::new(16, 3);
        assert_eq!(b.free_blocks[3], 2);
        let a = b.alloc(Order(0)).unwrap();
        assert_eq!(a, Pfn(0));
        assert_eq!(
            (
                b.free_blocks[0],
                b.free_blocks[1],
                b.free_blocks[2],
                b.free_blocks[3]
            ),
            (1, 1, 1, 1)
        );
        b.check_invariants().unwrap();
        b.free(a, Order(0));
        assert_eq!((b.free_blocks[0], b.free_blocks[3]), (0, 2));
        b.check_invariants().unwrap();
    }

    #[test]
    fn any_free_agrees_with_is_free_on_every_range() {
        // 64 frames, max order 4: a whole free block before a range, blocks inside it, and a
        // range with no free frame; every range compared with a frame-by-frame answer.
        let mut b = Buddy::new(64, 4);
        for (p, o) in [(0, 3), (9, 0), (12, 2), (16, 4), (40, 1), (48, 3)] {
            assert!(b.alloc_at(Pfn(p), Order(o)));
        }
        let mut seen = (0, 0);
        for p in 0..64 {
            for n in 1..=64 - p {
                let want = (p..p + n).any(|f| b.is_free(Pfn(f)));
                assert_eq!(b.any_free(Pfn(p), n), want, "frames {p}..{}", p + n);
                if want {
                    seen.0 += 1;
                } else {
                    seen.1 += 1;
                }
            }
        }
        assert!(seen.0 > 0 && seen.1 > 0, "both answers reached: {seen:?}");
    }

    #[test]
    fn alloc_at_specific_block() {
        let mut b = Buddy::new(16, 3);
        assert!(b.alloc_at(Pfn(5), Order(0)));
        assert!(!b.is_free(Pfn(5)));
        assert!(b.is_free(Pfn(4)) && b.is_free(Pfn(6)) && b.is_free(Pfn(0)));
        assert!(!b.alloc_at(Pfn(5), Order(0)));
        assert!(!b.alloc_at(Pfn(4), Order(1)));
        b.check_invariants().unwrap();
        assert_eq!(b.free_frames, 15);
        b.free(Pfn(5), Order(0));
        assert_eq!(b.free_blocks[3], 2);
    }

    /// seed 000 5.1 (1): a block freed with `free_tail` is handed out after the other blocks
    /// of its order; `free` puts a block first.
    #[test]
    fn tail_blocks_are_allocated_last() {
        let mut b = Buddy::new(16, 4);
        let frames: Vec<Pfn> = (0..16).map(|_| b.alloc(Order(0)).unwrap()).collect();
        // Free three lone frames (no buddies free): 2 at the tail, then 6 and 10 at the head.
        b.free_tail(frames[2], Order(0));
        b.free(frames[6], Order(0));
        b.free(frames[10], Order(0));
        b.check_invariants().unwrap();
        assert_eq!(b.alloc(Order(0)), Some(frames[10]));
        assert_eq!(b.alloc(Order(0)), Some(frames[6]));
        assert_eq!(b.alloc(Order(0)), Some(frames[2]));
        // A tail block coalesces like any other.
        b.free_tail(Pfn(4), Order(0));
        b.free_tail(Pfn(5), Order(0));
        assert_eq!(b.free_block_of(Pfn(4)), Some((Pfn(4), Order(1))));
        b.check_invariants().unwrap();
    }

    /// The wired pool's block comes from the top of the highest free block.
    #[test]
    fn free_blocks_of_any_order_go_before_cache_pages() {
        let mut b = Buddy::new(16, 4);
        let frames: Vec<Pfn> = (0..16).map(|_| b.alloc(Order(0)).unwrap()).collect();
        b.free_tail(frames[2], Order(0)); // a cache page, alone on the order-0 list
        for &f in &frames[8..12] {
            b.free(f, Order(0)); // coalesce into one free order-2 block
        }
        assert_eq!(b.free_block_of(Pfn(8)), Some((Pfn(8), Order(2))));
        assert_eq!(b.cached_frames, 1);
        b.check_invariants().unwrap();
        // FreeBSD vm_page_alloc: the free block is split before the cache page is taken.
        for want in [8, 9, 10, 11] {
            assert_eq!(b.alloc(Order(0)), Some(Pfn(want)));
            b.check_invariants().unwrap();
        }
        // The first and third passed the cache page over for a larger block (order 2, then
        // the order-1 half); the others found a free block on the order-0 list itself.
        assert_eq!(b.cache_passed, 2);
        assert_eq!(b.cached_frames, 1);
        // Nothing free is left: now the cache page goes, and its mark with it.
        assert_eq!(b.alloc(Order(0)), Some(Pfn(2)));
        assert_eq!(b.cached_frames, 0);
        assert_eq!(b.alloc(Order(0)), None);
        b.check_invariants().unwrap();
    }

    #[test]
    fn a_block_with_a_cache_page_goes_to_the_tail_and_keeps_its_mark_when_split() {
        let mut b = Buddy::new(16, 4);
        let frames: Vec<Pfn> = (0..16).map(|_| b.alloc(Order(0)).unwrap()).collect();
        // A free frame coalesces with a cache page: the pair holds one, so it goes to the tail.
        b.mark_cached(frames[5]);
        b.free(frames[5], Order(0));
        b.free(frames[4], Order(0));
        // A pair with no cache page goes to the head.
        b.free(frames[12], Order(0));
        b.free(frames[13], Order(0));
        b.check_invariants().unwrap();
        assert!(b.holds_cache(4, 1) && !b.holds_cache(12, 1));
        assert_eq!(b.alloc(Order(1)), Some(Pfn(12)));
        // Splitting the marked pair for one frame: the free half (4) goes first, and the half
        // holding the cache page keeps its mark.
        assert_eq!(b.alloc(Order(0)), Some(Pfn(4)));
        assert!(b.holds_cache(5, 0));
        assert_eq!(b.cached_frames, 1);
        // alloc_at (a cache page taken back) clears the mark.
        assert!(b.alloc_at(Pfn(5), Order(0)));
        assert_eq!(b.cached_frames, 0);
        b.check_invariants().unwrap();
    }

    #[test]
    fn cache_marks_in_large_blocks_are_seen_placed_and_cleared() {
        // Blocks of 64 frames and more: the marks are whole words.
        let mut b = Buddy::new(1024, 8);
        assert_eq!(
            b.alloc(Order(8)),
            Some(Pfn(0)),
            "the largest order is allocatable"
        );
        let big: Vec<Pfn> = (0..3).map(|_| b.alloc(Order(8)).unwrap()).collect();
        // A cache page in the middle of block 256..512, freed whole.
        b.mark_cached(Pfn(300));
        b.mark_cached(Pfn(300)); // marking twice counts once
        assert_eq!(b.cached_frames, 1);
        b.free(big[0], Order(8));
        assert!(b.holds_cache(256, 8) && b.holds_cache(256 + 32, 5));
        assert!(!b.holds_cache(256, 5) && !b.holds_cache(256 + 64, 6));
        b.free(big[2], Order(8)); // 768..1024, no cache page
        assert!(!b.holds_cache(768, 8));
        b.check_invariants().unwrap();
        // A 64-frame block: the free block goes first, split from 768..1024.
        assert_eq!(b.alloc(Order(6)), Some(Pfn(768)));
        assert_eq!(b.cache_passed, 0);
        // Exactly 64 frames holding the cache page: its mark goes with the allocation.
        assert!(b.alloc_at(Pfn(256), Order(6)));
        assert_eq!(b.cached_frames, 0, "256..320 held frame 300");
        b.check_invariants().unwrap();
    }

    #[test]
    fn a_cache_mark_on_an_allocated_frame_is_an_invariant_violation() {
        let mut b = Buddy::new(256, 4);
        let f = (0..100).map(|_| b.alloc(Order(0)).unwrap()).last().unwrap();
        assert_eq!(f, Pfn(99), "a frame past the first word of marks");
        b.check_invariants().unwrap();
        b.mark_cached(f);
        let err = b.check_invariants().unwrap_err();
        assert!(err.contains("marked as a free cache page"), "{err}");
        let err = b.check_frame(f).unwrap_err();
        assert!(err.contains("allocated but marked"), "{err}");
    }

    #[test]
    fn alloc_high_takes_the_highest_block() {
        let mut b = Buddy::new(64, 4);
        assert_eq!(b.alloc_high(Order(2)), Some(Pfn(60)));
        assert_eq!(b.alloc_high(Order(2)), Some(Pfn(56)));
        assert_eq!(b.alloc_high(Order(4)), Some(Pfn(32)));
        b.check_invariants().unwrap();
        assert_eq!(b.free_frames, 64 - 4 - 4 - 16);
        let mut small = Buddy::new(4, 2);
        assert_eq!(small.alloc_high(Order(3)), None);
    }

    #[test]
    fn contiguity_metric() {
        let mut b = Buddy::new(64, 4);
        assert!((b.contiguity(&[1, 3]) - 1.0).abs() < 1e-12);
        b.alloc(Order(0)).unwrap(); // breaks one 8-page region and one 2-page region
                                    // 63 free pages: 62 in free 2-page regions (1 point), 56 of them in free 8-page regions.
        let expect = (62.0 + 56.0) / (64.0 * 2.0);
        assert!((b.contiguity(&[1, 3]) - expect).abs() < 1e-12);
    }

    #[test]
    fn random_alloc_free_keeps_invariants() {
        let mut rng = Rng::new(7);
        let mut b = Buddy::new(1024, 6);
        let mut held: Vec<(Pfn, Order)> = Vec::new();
        let mut reach = (0u64, 0u64);
        for step in 0..5000 {
            if rng.below(2) == 0 || held.is_empty() {
                let o = Order(rng.below(5) as u8);
                if let Some(p) = b.alloc(o) {
                    assert!(p.is_aligned(o));
                    held.push((p, o));
                }
            } else {
                let i = rng.below(held.len() as u64) as usize;
                let (p, o) = held.swap_remove(i);
                // A third of the frees are cache pages (seed 000 5.1 (1)).
                if rng.below(3) == 0 {
                    b.free_tail(p, o);
                    reach.0 += 1;
                } else {
                    b.free(p, o);
                }
            }
            if b.cached_frames > 0 && b.free_frames > b.cached_frames {
                reach.1 += 1; // free and cache blocks side by side: the order rule matters
            }
            if step % 97 == 0 {
                b.check_invariants().unwrap();
            }
        }
        assert!(reach.0 > 500 && reach.1 > 1000, "reach {reach:?}");
        for (p, o) in held.drain(..) {
            b.free(p, o);
        }
        b.check_invariants().unwrap();
        assert_eq!(b.free_blocks[6], 16);
    }
}
