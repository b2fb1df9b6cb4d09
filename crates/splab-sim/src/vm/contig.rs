//! Contiguity-aware page replacement (seed 000 5.1) and wired page clustering (5.2).
//!
//! With `contiguity=cache` or `daemon` (policy `Contiguity`), a page the page daemon moves to
//! the cache queue gives its frame back at once: to the buddy allocator, at the tail of the free
//! list of the block it coalesces into, or to its reservation as an unpopulated frame. Its
//! contents stay, and the cache queue and `cached` remember which object page they are, until
//! either
//! - the frame gets a new owner (`claim_frame`, from `obj_insert` and kernel allocations): the
//!   old contents are gone, and the object page is back on its backing store (swap or file); or
//! - the object page is faulted on (`reactivate_cached`): the frame is taken back from the free
//!   list or from the reservation it sits in, which is preempted (5.1 (1)), and the page is
//!   active again with no I/O.
//!
//! With `contiguity=daemon`, an allocation that finds no free extent of the preferred size
//! (`note_preferred_failure`) wakes the page daemon, which then (`contig_scan`) walks the
//! inactive queue and moves to the cache only the pages whose aligned region of a failed size
//! would then be entirely available, until it has restored as many regions as allocations
//! failed since it last ran (5.1 (2)). Pages of closed files are deactivated by the file layer
//! (5.1 (3)).
//!
//! `wired=clustered` (5.2) takes the kernel's page-table pages from pools of contiguous memory
//! taken from the top of physical memory, instead of wherever the buddy allocator's lists say.

use std::collections::{BTreeMap, HashMap};

use super::pageq::{Queue, F_BUSY};
use super::{ObjId, ObjKind, Os};
use crate::error::{Result, SimError};
use crate::policy::{Contiguity, Shortage, WiredPlacement};
use crate::units::{Order, Pfn};

/// State of contiguity-aware replacement and of the wired pool.
#[derive(Clone, Debug, Default)]
pub struct ContigState {
    /// Cache pages whose frames are free (in the buddy allocator, or reserved and unpopulated)
    /// but keep their contents: (object, page index) -> frame.
    cached: BTreeMap<(u32, u64), Pfn>,
    /// Allocations of each size class that found no free extent of their preferred size since
    /// the page daemon last restored contiguity (5.1 (2)).
    pub failed: Vec<u64>,
    /// Frames of the wired pool not in use (5.2), most recently freed last.
    pool: Vec<Pfn>,
    pub stats: ContigStats,
}

/// Counters of contiguity-aware replacement, for the report (`memory.contiguity`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ContigStats {
    /// Cache pages whose frames went back to the buddy allocator or their reservation.
    pub cache_freed: u64,
    /// Cache pages referenced again and taken back (no I/O).
    pub cache_reactivated: u64,
    /// ... of which sat in a reservation, which was preempted to give the frame back.
    pub reactivation_preemptions: u64,
    /// Cache pages whose frames were reused for something else (contents dropped).
    pub cache_dropped: u64,
    /// Allocations that found no free extent of their preferred size.
    pub preferred_failures: u64,
    /// Contiguity restorations the page daemon ran (5.1 (2)).
    pub restore_runs: u64,
    /// Aligned regions the restorations chose to free.
    pub regions_targeted: u64,
    /// ... and made entirely available.
    pub regions_restored: u64,
    /// Inactive pages they moved to the cache (written out first when dirty).
    pub pages_cached: u64,
    /// Pools of contiguous memory taken for wired pages (5.2).
    pub wired_pools: u64,
}

impl ContigState {
    /// Cache pages whose frames are free.
    pub fn cached_free(&self) -> u64 {
        self.cached.len() as u64
    }

    /// Frames of the wired pool not in use (counted as wired).
    pub fn pool_frames(&self) -> u64 {
        self.pool.len() as u64
    }
}

impl Os {
    /// seed 000 5.1 (1): the page daemon moved `pfn` (clean, unmapped, one holder) to the cache
    /// queue: its frame goes back to the allocator at once, its contents stay until reused.
    pub(crate) fn cache_free(&mut self, pfn: Pfn) {
        let (obj, pindex) = self
            .pageq
            .owner(pfn)
            .expect("cache_free: a cache page has one holder");
        let detached = self.obj_detach(obj, pindex);
        debug_assert_eq!(detached, Some((pfn, true)));
        self.free_frame(pfn);
        self.contig.cached.insert((obj.0, pindex), pfn);
        self.contig.stats.cache_freed += 1;
    }

    /// Gives the aligned extent `[pfn, pfn + 2^order)` (no object holds any of it) back to the
    /// buddy allocator, marking its frames that hold cache pages (5.1 (1)): the block goes to
    /// the tail of its list, and allocations take blocks without cache pages first
    /// (phys/buddy.rs).
    pub(crate) fn free_extent(&mut self, pfn: Pfn, order: Order) {
        if self.pageq.count(Queue::Cache) > 0 {
            for f in (pfn.0..pfn.0 + order.pages()).map(Pfn) {
                if self.pageq.queue_of(f) == Queue::Cache && self.phys.refs(f) == 0 {
                    self.phys.buddy.mark_cached(f);
                }
            }
        }
        self.phys.buddy.free(pfn, order);
    }

    /// `pfn` is about to get a new owner: if it is a free cache page, its old contents are
    /// dropped (the object page is on its backing store again, as after FreeBSD's
    /// `vm_page_free` of a cache page).
    #[inline]
    pub(crate) fn claim_frame(&mut self, pfn: Pfn) {
        if self.contig.cached.is_empty() || self.pageq.queue_of(pfn) != Queue::Cache {
            return;
        }
        if self.phys.refs(pfn) != 0 {
            return; // a cache page still held (contiguity=off)
        }
        let (obj, pindex) = self
            .pageq
            .owner(pfn)
            .expect("claim_frame: cache page without owner");
        self.contig.cached.remove(&(obj.0, pindex));
        self.forget_cache_page(obj, pindex, pfn);
        self.contig.stats.cache_dropped += 1;
    }

    fn forget_cache_page(&mut self, obj: ObjId, pindex: u64, pfn: Pfn) {
        if let Some(o) = self.objects.get(obj.0 as usize).and_then(|o| o.as_ref()) {
            if matches!(o.kind, ObjKind::File { .. }) {
                self.backing.set_evicted(obj, pindex, true);
            }
        }
        self.pageq.drop_free_cached(pfn);
    }

    /// seed 000 5.1 (1): page `pindex` of `obj` is faulted on: if it is a free cache page, its
    /// frame is taken back (from the buddy allocator, or from the reservation it sits in, which
    /// is preempted) and the page is resident and active again. True if it was.
    pub(crate) fn reactivate_cached(&mut self, obj: ObjId, pindex: u64) -> Result<bool> {
        if self.contig.cached.is_empty() {
            return Ok(false);
        }
        let Some(pfn) = self.contig.cached.remove(&(obj.0, pindex)) else {
            return Ok(false);
        };
        self.pageq.drop_free_cached(pfn);
        // The reservation that now covers the page in its object, if any.
        let cindex = pindex + self.obj(obj).colour;
        let covering = |os: &Os| {
            os.obj(obj)
                .popmap
                .as_ref()
                .and_then(|pm| pm.reservation_at_counted(cindex).0)
        };
        let holder = self.reserv.as_ref().and_then(|rs| rs.of_frame(pfn));
        let own_slot = holder.is_some() && holder == covering(self) && {
            let r = self
                .reserv
                .as_ref()
                .expect("reservations")
                .get(holder.unwrap_or(0));
            r.pfn.0 + (cindex - r.cbase) == pfn.0
        };
        if own_slot {
            // The frame is still the page's own reserved frame: it is simply populated again.
            self.obj_insert(obj, pindex, pfn);
            self.contig.stats.cache_reactivated += 1;
            self.pageout.stats.reactivated += 1;
            return Ok(true);
        }
        // Otherwise the reservation the frame sits in is preempted (5.1 (1)), and so is one
        // made since for the page's own place, which the old frame is not part of.
        let mut preempted = false;
        let rp = self.policy.reserv().cloned();
        while let Some(id) = self
            .reserv
            .as_ref()
            .and_then(|rs| rs.of_frame(pfn))
            .or_else(|| covering(self))
        {
            let rp = rp
                .as_ref()
                .expect("a reservation implies a reserving policy");
            match rp.shortage {
                Shortage::Preempt => self.preempt(id, rp),
                Shortage::FallbackThenReclaim => {
                    self.break_resv(id);
                    self.reserv.as_mut().expect("reservations").stats.preempted += 1;
                }
            }
            preempted = true;
        }
        if preempted {
            self.contig.stats.reactivation_preemptions += 1;
        }
        if !self.phys.buddy.alloc_at(pfn, Order(0)) {
            return Err(SimError::Invariant(format!(
                "contig: cache page {pindex} of object {} has frame {} which is neither free nor reserved",
                obj.0, pfn.0
            )));
        }
        self.obj_insert(obj, pindex, pfn);
        self.contig.stats.cache_reactivated += 1;
        self.pageout.stats.reactivated += 1;
        Ok(true)
    }

    /// Whether page `pindex` of `obj` is a cache page whose frame is free (not resident, but
    /// its contents are at hand).
    pub(crate) fn is_free_cached(&self, obj: ObjId, pindex: u64) -> bool {
        !self.contig.cached.is_empty() && self.contig.cached.contains_key(&(obj.0, pindex))
    }

    /// The free cache pages of `obj` with page index in `[first, last)` are forgotten (the
    /// object range is gone); their frames stay free.
    pub(crate) fn forget_cached_range(&mut self, obj: ObjId, first: u64, last: u64) {
        if self.contig.cached.is_empty() {
            return;
        }
        let gone: Vec<((u32, u64), Pfn)> = self
            .contig
            .cached
            .range((obj.0, first)..(obj.0, last))
            .map(|(&k, &p)| (k, p))
            .collect();
        for (k, pfn) in gone {
            self.contig.cached.remove(&k);
            self.pageq.drop_free_cached(pfn);
        }
    }

    /// An allocation for size class `c` (> 0) found no free extent of that size.
    pub(crate) fn note_preferred_failure(&mut self, c: u8) {
        self.contig.stats.preferred_failures += 1;
        if self.policy.contiguity == Contiguity::Daemon && self.policy.pagedaemon {
            let n = self.orders.len();
            if self.contig.failed.len() < n {
                self.contig.failed.resize(n, 0);
            }
            self.contig.failed[c as usize] += 1;
            self.pageout.wanted = true;
        }
    }

    /// Whether allocations failed for want of contiguity since the last restoration.
    pub fn contiguity_wanted(&self) -> bool {
        self.contig.failed.iter().any(|&n| n > 0)
    }

    /// seed 000 5.1 (2): restore the contiguity the failed allocations needed. Walks the
    /// inactive queue once and moves to the cache only pages whose aligned region of a failed
    /// size would then hold no frame that is wired, active, busy or shared; stops when as many
    /// regions were chosen, and emptied of inactive pages, as allocations failed. Referenced
    /// pages are reactivated as in any scan; dirty ones are written out first. Returns (CPU
    /// cycles, I/O cycles).
    pub(crate) fn contig_scan(&mut self) -> (u64, u64) {
        let failed = std::mem::take(&mut self.contig.failed);
        if failed.iter().all(|&n| n == 0) {
            return (0, 0);
        }
        self.pageout.ran = true;
        self.contig.stats.restore_runs += 1;
        // Largest sizes first: a region of a larger size also serves the smaller ones.
        let mut goals: Vec<(u8, u64)> = failed
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(c, &n)| (self.orders[c], n))
            .collect();
        goals.sort_unstable_by_key(|g| std::cmp::Reverse(g.0));
        let rmap = self.rmap();
        let (mut cycles, mut io) = (0u64, 0u64);
        // Regions judged so far, by (order, head): chosen, with the inactive pages still to
        // move, or rejected.
        let mut verdict: HashMap<(u8, u64), Option<u64>> = HashMap::new();
        // Per goal: regions chosen (and not given up), and regions made whole.
        let mut chosen = vec![0u64; goals.len()];
        let mut done = vec![0u64; goals.len()];
        let mut pcount = self.pageq.count(Queue::Inactive);
        let mut next = self.pageq.head(Queue::Inactive);
        while let Some(pfn) = next {
            // The goal is met when as many regions as allocations failed are whole.
            if pcount == 0 || goals.iter().zip(&done).all(|(g, &d)| d >= g.1) {
                break;
            }
            pcount -= 1;
            next = self.pageq.next_of(pfn);
            if self.pageq.flag(pfn, F_BUSY) || self.pageq.shared(pfn) {
                continue;
            }
            // The first failed size whose region around this page is, or can be, chosen.
            let mut region = None;
            for (gi, &(order, want)) in goals.iter().enumerate() {
                let key = (order, pfn.0 & !((1u64 << order) - 1));
                let v = match verdict.get(&key) {
                    Some(&v) => v,
                    None => {
                        let v = if chosen[gi] < want {
                            self.region_recoverable(key.1, order)
                        } else {
                            None
                        };
                        if v.is_some() {
                            chosen[gi] += 1;
                            self.contig.stats.regions_targeted += 1;
                        }
                        verdict.insert(key, v);
                        v
                    }
                };
                if v.is_some() {
                    region = Some((gi, key));
                    break;
                }
            }
            let Some((gi, key)) = region else {
                continue;
            };
            self.pageout.stats.visited += 1;
            let maps = self.mappings(&rmap, pfn);
            let (refd, c) = self.test_referenced(&maps, true);
            cycles += c;
            let dirty = !refd && self.test_dirty(&maps, pfn);
            if refd || (dirty && !self.can_launder(pfn)) {
                // Referenced after all (A-LRU keeps it), or dirty with no swap left: the region
                // stays partly in use; another may be chosen instead.
                if refd {
                    self.pageq.set_act(pfn, super::pageq::ACT_INIT);
                    self.pageq.move_to(pfn, Queue::Active);
                    self.pageout.stats.activated += 1;
                }
                verdict.insert(key, None);
                chosen[gi] -= 1;
                continue;
            }
            // Only the daemon scheme restores, and its cache pages live in the buddy allocator.
            let (c, d) = self.move_to_cache(pfn, &maps);
            cycles += c;
            io += d;
            self.contig.stats.pages_cached += 1;
            let left = verdict
                .get_mut(&key)
                .and_then(|v| v.as_mut())
                .expect("a chosen region");
            *left -= 1;
            if *left == 0 {
                done[gi] += 1;
                self.contig.stats.regions_restored += 1;
            }
        }
        (cycles, io)
    }

    /// Whether every frame of the aligned region `[head, head + 2^order)` is free, reserved and
    /// unpopulated, a free cache page, or an inactive page the daemon may move (one holder, not
    /// busy): no wired, active or shared frame.
    /// Returns the number of inactive pages in it (to be moved), or None.
    fn region_recoverable(&self, head: u64, order: u8) -> Option<u64> {
        let end = (head + (1u64 << order)).min(self.phys.frames());
        let mut inactive = 0;
        let mut f = head;
        while f < end {
            let pfn = Pfn(f);
            if let Some((h, o)) = self.phys.buddy.free_block_of(pfn) {
                f = h.0 + o.pages();
                continue;
            }
            let ok = match self.pageq.queue_of(pfn) {
                Queue::Inactive => {
                    inactive += 1;
                    !self.pageq.flag(pfn, F_BUSY) && !self.pageq.shared(pfn)
                }
                Queue::Cache => true,
                Queue::Active => false,
                // Not held: reserved for a page not yet touched, or wired.
                Queue::None => self
                    .reserv
                    .as_ref()
                    .is_some_and(|rs| rs.of_frame(pfn).is_some()),
            };
            if !ok {
                return None;
            }
            f += 1;
        }
        Some(inactive)
    }

    // ---- seed 000 5.2: wired page clustering ----

    /// A frame for the kernel's own use (a page-table page), not yet counted as wired. With
    /// `wired=clustered`, from the wired pool, refilled with the largest contiguous block it
    /// can have from the top of memory.
    pub(crate) fn alloc_wired_frame(&mut self) -> Option<Pfn> {
        if self.policy.wired != WiredPlacement::Clustered {
            return None;
        }
        if self.contig.pool.is_empty() {
            let want = self.wired_pool_order();
            let block = (0..=want)
                .rev()
                .find_map(|o| self.phys.buddy.alloc_high(Order(o)).map(|p| (p, o)))?;
            let (p, o) = block;
            self.contig.stats.wired_pools += 1;
            // Handed out from the lowest frame up, so a pool fills densely.
            for f in (p.0..p.0 + (1u64 << o)).rev() {
                self.claim_frame(Pfn(f));
                self.contig.pool.push(Pfn(f));
            }
            self.phys.wired_frames += 1 << o;
        }
        let pfn = self.contig.pool.pop()?;
        self.phys.wired_frames -= 1;
        Some(pfn)
    }

    /// Gives back a kernel frame not counted as wired (a page-table page freed, or one
    /// allocated and not used).
    pub(crate) fn free_kernel_frame(&mut self, pfn: Pfn) {
        if self.policy.wired == WiredPlacement::Clustered {
            self.contig.pool.push(pfn);
            self.phys.wired_frames += 1;
        } else {
            self.phys.buddy.free(pfn, Order(0));
        }
    }

    /// Pool size: the largest superpage order whose size is at most 1/64 of memory, else the
    /// smallest superpage (an assumption: the paper gives no size; docs/constants.md).
    fn wired_pool_order(&self) -> u8 {
        let frames = self.phys.frames();
        let max = self.phys.buddy.max_order();
        let fits: Vec<u8> = self.orders[1..]
            .iter()
            .copied()
            .filter(|&o| o <= max)
            .collect();
        fits.iter()
            .copied()
            .filter(|&o| (1u64 << o) * 64 <= frames)
            .max()
            .or_else(|| fits.first().copied())
            .unwrap_or(0)
    }

    /// Free cache pages are on the cache queue, held by no object, free or reserved, and not
    /// resident in their object.
    pub(crate) fn check_contig(&self) -> Result<()> {
        for (&(obj, pindex), &pfn) in &self.contig.cached {
            crate::ensure_inv!(
                self.pageq.queue_of(pfn) == Queue::Cache
                    && self.pageq.owner(pfn) == Some((ObjId(obj), pindex)),
                "contig: free cache page {pindex} of object {obj} (frame {}) is not on the cache queue as that page",
                pfn.0
            );
            crate::ensure_inv!(
                self.phys.refs(pfn) == 0,
                "contig: free cache page at frame {} is held",
                pfn.0
            );
            let reserved = self
                .reserv
                .as_ref()
                .is_some_and(|rs| rs.of_frame(pfn).is_some());
            crate::ensure_inv!(
                reserved || self.phys.buddy.is_free(pfn),
                "contig: free cache page at frame {} is neither free nor reserved",
                pfn.0
            );
            let resident = self.objects[obj as usize]
                .as_ref()
                .is_some_and(|o| o.pages.get(pindex).is_some());
            crate::ensure_inv!(
                !resident,
                "contig: page {pindex} of object {obj} is both resident and a free cache page"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::hw::Machine;
    use crate::policy::Policy;
    use crate::units::{AccessKind, Pid};
    use crate::vm::MmapReq;

    const PAGE: u64 = 8192;

    /// An engine on the Alpha with only `free` bytes free, and one process.
    fn setup(policy: &str, free: u64) -> (Engine, Pid) {
        let m = Machine::from_spec("alpha21264:mem=16M").unwrap();
        let mut p = Policy::from_spec(policy).unwrap();
        p.resolve(&m).unwrap();
        let mut e = Engine::new(m, p, true, Some(free));
        let pid = e.spawn().unwrap();
        (e, pid)
    }

    fn map(e: &mut Engine, pid: Pid, len: u64) -> u64 {
        // Through the OS, not the engine: no daemon runs after it.
        e.os.mmap(pid, MmapReq::anon(len)).unwrap()
    }

    /// The frame holding the page at `va` (through its object: superpages included).
    fn frame(e: &Engine, pid: Pid, va: u64) -> Pfn {
        let v = e.os.proc(pid).unwrap().vma_at(va).unwrap().clone();
        let pindex = v.pgoff + (va - v.start) / PAGE;
        e.os.obj(v.obj).pages.get(pindex).unwrap()
    }

    /// What the page daemon does to a clean inactive page it moves to the cache.
    fn evict(os: &mut Os, pfn: Pfn) {
        let rmap = os.rmap();
        let maps = os.mappings(&rmap, pfn);
        let (dirty, _) = os.unmap_all(&maps);
        assert!(!dirty, "evict: the page must be clean");
        os.pageq.move_to(pfn, Queue::Cache);
        os.cache_free(pfn);
    }

    /// seed 000 5.1 (1): a cache page's frame is free at once (coalesced in the buddy
    /// allocator) yet keeps its contents: touched again, it comes back, the same frame, with no
    /// zero-fill and no I/O.
    #[test]
    fn a_cache_page_is_free_and_comes_back_without_io() {
        let (mut e, pid) = setup("base:contiguity=cache,pagedaemon=off", 1 << 20);
        // Two pages, so that the page tables stay when one is unmapped.
        let a = map(&mut e, pid, 2 * PAGE);
        e.access(pid, a, AccessKind::Read).unwrap(); // a zero page, clean
        e.access(pid, a + PAGE, AccessKind::Read).unwrap();
        let pfn = frame(&e, pid, a);
        let free = e.os.phys.buddy.free_frames;
        evict(&mut e.os, pfn);
        assert!(e.os.phys.buddy.is_free(pfn));
        assert_eq!(e.os.phys.buddy.free_frames, free + 1);
        assert_eq!(e.os.available_frames(), free + 1, "counted once, as free");
        assert_eq!(e.os.contig.cached_free(), 1);
        assert_eq!(e.os.contig.stats.cache_freed, 1);
        let obj = e.os.proc(pid).unwrap().vma_at(a).unwrap().obj;
        assert!(e.os.is_free_cached(obj, 0) && !e.os.is_free_cached(obj, 1));
        e.os.check_invariants().unwrap();
        let zero_fills = e.os.stats.faults.zero_fill;
        e.access(pid, a, AccessKind::Read).unwrap();
        assert_eq!(frame(&e, pid, a), pfn);
        assert_eq!(e.os.stats.faults.zero_fill, zero_fills, "contents reused");
        assert_eq!((e.os.stats.io_read_bytes, e.os.stats.faults.major), (0, 0));
        assert_eq!(e.os.contig.stats.cache_reactivated, 1);
        assert_eq!(e.os.pageout.stats.reactivated, 1);
        assert_eq!(e.os.contig.cached_free(), 0);
        assert_eq!(e.os.pageq.queue_of(pfn), Queue::Active);
        assert_eq!(e.os.phys.buddy.free_frames, free);
    }

    /// A file page read with read() whose frame went back to the allocator is taken back by
    /// the next read(), with no I/O (the page cache path, vm/file.rs `cache_insert`).
    #[test]
    fn read_takes_back_a_cached_file_page() {
        let (mut e, pid) = setup(
            "base:contiguity=cache,pagedaemon=off,readahead=off",
            1 << 20,
        );
        e.os.page_cache = crate::vm::object::PageCache::Cold;
        let buf = map(&mut e, pid, 2 * PAGE);
        e.open(pid, 7, 2 * PAGE).unwrap();
        e.read(pid, 7, 0, 2 * PAGE, buf).unwrap();
        let read = e.os.stats.io_read_bytes;
        assert_eq!(read, 2 * PAGE);
        let obj = e.os.file_object(7).unwrap();
        let pfn = e.os.obj(obj).pages.get(0).unwrap();
        e.os.pageq.move_to(pfn, Queue::Cache);
        e.os.cache_free(pfn);
        assert!(e.os.phys.buddy.is_free(pfn));
        e.read(pid, 7, 0, PAGE, buf).unwrap();
        assert_eq!(e.os.stats.io_read_bytes, read, "no I/O");
        assert_eq!(e.os.obj(obj).pages.get(0), Some(pfn));
        assert_eq!(e.os.contig.stats.cache_reactivated, 1);
        e.os.check_invariants().unwrap();
    }

    /// Unmapping the range forgets its cache pages (their frames stay free).
    #[test]
    fn munmap_forgets_cache_pages() {
        let (mut e, pid) = setup("base:contiguity=cache,pagedaemon=off", 1 << 20);
        let a = map(&mut e, pid, 2 * PAGE);
        e.access(pid, a, AccessKind::Read).unwrap();
        e.access(pid, a + PAGE, AccessKind::Read).unwrap();
        let pfn = frame(&e, pid, a);
        evict(&mut e.os, pfn);
        assert_eq!(e.os.contig.cached_free(), 1);
        e.munmap(pid, a, 2 * PAGE).unwrap();
        assert_eq!(e.os.contig.cached_free(), 0);
        assert_eq!(e.os.pageq.queue_of(pfn), Queue::None);
        assert!(e.os.phys.buddy.is_free(pfn));
        e.os.check_invariants().unwrap();
    }

    /// A cache page's frame handed to another page loses its contents: the old page, touched
    /// again, is made anew (a zero page here), not reactivated.
    #[test]
    fn a_reused_cache_frame_drops_its_page() {
        let (mut e, pid) = setup("base:contiguity=cache,pagedaemon=off", 16 * PAGE);
        let a = map(&mut e, pid, 2 * PAGE);
        e.access(pid, a, AccessKind::Read).unwrap();
        e.access(pid, a + PAGE, AccessKind::Read).unwrap();
        let pfn = frame(&e, pid, a);
        evict(&mut e.os, pfn);
        let b = map(&mut e, pid, 64 * PAGE);
        let mut i = 0;
        while e.os.contig.stats.cache_dropped == 0 {
            e.access(pid, b + i * PAGE, AccessKind::Write).unwrap();
            i += 1;
        }
        assert_eq!(
            frame(&e, pid, b + (i - 1) * PAGE),
            pfn,
            "the cache frame was reused"
        );
        assert_eq!(e.os.contig.cached_free(), 0);
        assert_eq!(e.os.pageq.owner(pfn).map(|o| o.1), Some(i - 1));
        e.os.check_invariants().unwrap();
        e.munmap(pid, b, 64 * PAGE).unwrap();
        let zero_fills = e.os.stats.faults.zero_fill;
        e.access(pid, a, AccessKind::Read).unwrap();
        assert_eq!(e.os.stats.faults.zero_fill, zero_fills + 1);
        assert_eq!(e.os.contig.stats.cache_reactivated, 0);
    }

    /// seed 000 5.1 (1): "If a cache page is referenced, then it is removed from the buddy list
    /// or the reservation; in the latter case, the reservation is preempted."
    #[test]
    fn reactivating_a_cache_page_preempts_the_reservation_it_sits_in() {
        // Two 64KB extents free; the page tables break the first: one is left for A's
        // reservation, then B's over the same frames.
        let (mut e, pid) = setup("navarro:contiguity=cache,pagedaemon=off", 16 * PAGE);
        let a = map(&mut e, pid, 8 * PAGE);
        e.access(pid, a, AccessKind::Read).unwrap();
        let pfn = frame(&e, pid, a);
        assert_eq!(e.os.reserv.as_ref().unwrap().ids().count(), 1);
        evict(&mut e.os, pfn);
        // A's reservation emptied: the extent is free again, the cache page in it.
        assert_eq!(e.os.reserv.as_ref().unwrap().ids().count(), 0);
        let b = map(&mut e, pid, 8 * PAGE);
        e.access(pid, b + PAGE, AccessKind::Read).unwrap();
        let rs = e.os.reserv.as_ref().unwrap();
        assert_eq!(
            rs.of_frame(pfn).map(|id| rs.get(id).obj),
            e.os.proc(pid).unwrap().vma_at(b).map(|v| v.obj)
        );
        let preempted = rs.stats.preempted;
        e.access(pid, a, AccessKind::Read).unwrap();
        assert_eq!(
            frame(&e, pid, a),
            pfn,
            "the cache page came back in its frame"
        );
        assert_eq!(e.os.contig.stats.reactivation_preemptions, 1);
        assert_eq!(e.os.contig.stats.cache_reactivated, 1);
        let rs = e.os.reserv.as_ref().unwrap();
        assert!(rs.stats.preempted > preempted);
        assert!(rs.of_frame(pfn).is_none());
        assert_eq!(e.os.stats.io_read_bytes, 0);
    }

    /// FreeBSD's reservations are broken (vm_reserv_break), not split, to give the frame back:
    /// one preemption counted.
    #[test]
    fn reactivation_breaks_a_freebsd_reservation() {
        let (mut e, pid) = setup("freebsd:contiguity=cache,pagedaemon=off", 16 * PAGE);
        let a = map(&mut e, pid, 8 * PAGE);
        e.access(pid, a, AccessKind::Read).unwrap();
        let pfn = frame(&e, pid, a);
        evict(&mut e.os, pfn);
        let b = map(&mut e, pid, 8 * PAGE);
        e.access(pid, b + PAGE, AccessKind::Read).unwrap();
        assert!(e.os.reserv.as_ref().unwrap().of_frame(pfn).is_some());
        let preempted = e.os.reserv.as_ref().unwrap().stats.preempted;
        e.access(pid, a, AccessKind::Read).unwrap();
        assert_eq!(frame(&e, pid, a), pfn);
        assert_eq!(e.os.reserv.as_ref().unwrap().stats.preempted, preempted + 1);
        assert_eq!(e.os.contig.stats.reactivation_preemptions, 1);
        e.os.check_invariants().unwrap();
    }

    /// A cache page that sits in its own page's reservation (other pages of the extent still
    /// populated) is simply populated again: nothing is preempted.
    #[test]
    fn a_cache_page_in_its_own_reservation_is_repopulated() {
        let (mut e, pid) = setup("navarro:contiguity=cache,pagedaemon=off", 1 << 20);
        let a = map(&mut e, pid, 8 * PAGE);
        e.access(pid, a, AccessKind::Read).unwrap();
        e.access(pid, a + PAGE, AccessKind::Read).unwrap();
        // The second page (not the reservation's first frame), so its slot is not the head's.
        let b = a + PAGE;
        let pfn = frame(&e, pid, b);
        evict(&mut e.os, pfn);
        assert!(e.os.reserv.as_ref().unwrap().of_frame(pfn).is_some());
        assert!(!e.os.phys.buddy.is_free(pfn), "reserved, not free");
        e.access(pid, b, AccessKind::Read).unwrap();
        assert_eq!(frame(&e, pid, b), pfn);
        assert_eq!(e.os.contig.stats.cache_reactivated, 1);
        assert_eq!(e.os.contig.stats.reactivation_preemptions, 0);
        assert_eq!(e.os.reserv.as_ref().unwrap().stats.preempted, 0);
    }

    /// seed 000 5.1 (2): an allocation that finds no free region of its preferred size wakes
    /// the daemon, which caches only inactive pages of as many regions as allocations failed,
    /// leaving the other inactive pages alone; the region is then free and whole.
    #[test]
    fn restoring_contiguity_frees_one_region_per_failed_allocation() {
        // 25 frames free: the page tables take three, A's two 64KB reservations 16, and no
        // 64KB extent is left.
        let (mut e, pid) = setup("navarro:contiguity=daemon", 25 * PAGE);
        let a = map(&mut e, pid, 16 * PAGE);
        for i in 0..16 {
            e.os.access(pid, a + i * PAGE, AccessKind::Read).unwrap();
        }
        // Every page inactive and unreferenced (as after the daemon's aging).
        let rmap = e.os.rmap();
        let pages: Vec<Pfn> = (0..16).map(|i| frame(&e, pid, a + i * PAGE)).collect();
        for &p in &pages {
            let maps = e.os.mappings(&rmap, p);
            e.os.test_referenced(&maps, false);
            e.os.pageq.move_to(p, Queue::Inactive);
        }
        // A's first region holds 8 inactive pages; the region of the u-area and page tables
        // does not qualify (wired frames).
        let head = pages[0].0 & !7;
        assert_eq!(e.os.region_recoverable(head, 3), Some(8));
        let pt = e.os.proc(pid).unwrap().pt.frames()[0].0 & !7;
        assert_eq!(
            e.os.region_recoverable(pt, 3),
            None,
            "a page-table page is wired"
        );
        assert!(!e.os.contiguity_wanted());
        e.os.contig.failed = vec![0; 4];
        assert!(!e.os.contiguity_wanted(), "zero failures want nothing");
        let b = map(&mut e, pid, 8 * PAGE);
        e.os.access(pid, b, AccessKind::Read).unwrap();
        assert_eq!(e.os.contig.stats.preferred_failures, 1);
        assert!(e.os.contiguity_wanted() && e.os.pageout.wanted);
        e.os.contig_scan();
        let st = &e.os.contig.stats;
        assert_eq!(
            (
                st.restore_runs,
                st.regions_targeted,
                st.regions_restored,
                st.pages_cached
            ),
            (1, 1, 1, 8)
        );
        assert!(!e.os.contiguity_wanted());
        // One whole 64KB region is free; the other region's pages are untouched.
        assert_eq!(
            e.os.phys.buddy.free_block_of(Pfn(head)).map(|(_, o)| o.0),
            Some(3)
        );
        let inactive = pages
            .iter()
            .filter(|&&p| e.os.pageq.queue_of(p) == Queue::Inactive);
        assert_eq!(inactive.count(), 8);
        e.os.check_invariants().unwrap();
    }

    /// With `contiguity=cache` a failed preferred-size allocation is counted but wakes nothing.
    #[test]
    fn the_cache_scheme_does_not_restore() {
        let (mut e, pid) = setup("navarro:contiguity=cache", 16 * PAGE);
        let a = map(&mut e, pid, 8 * PAGE);
        e.os.access(pid, a, AccessKind::Read).unwrap();
        let mut blocks = Vec::new();
        e.os.phys
            .buddy
            .for_each_free_block(|p, o| blocks.push((p.0, o.0)));
        eprintln!("free blocks {blocks:?}");
        let b = map(&mut e, pid, 8 * PAGE);
        e.os.access(pid, b, AccessKind::Read).unwrap();
        assert_eq!(e.os.contig.stats.preferred_failures, 1);
        assert!(!e.os.contiguity_wanted());
        // Nothing failed under the daemon's rule: a restoration is a no-op.
        assert_eq!(e.os.contig_scan(), (0, 0));
        assert_eq!(e.os.contig.stats.restore_runs, 0);
    }

    /// seed 000 5.2: clustered wired pages come from one pool at the top of the free memory;
    /// scattered ones from wherever the free lists say.
    #[test]
    fn clustered_page_tables_share_a_pool_at_the_top() {
        let (mut e, pid) = setup("base:wired=clustered,pagedaemon=off", 4 << 20);
        // Mappings far apart need page tables of their own.
        let mut frames = Vec::new();
        for _ in 0..4 {
            let a = map(&mut e, pid, 64 << 20);
            e.access(pid, a, AccessKind::Read).unwrap();
            frames.push(a);
        }
        assert_eq!(e.os.contig.stats.wired_pools, 1);
        let pt: Vec<u64> =
            e.os.proc(pid)
                .unwrap()
                .pt
                .frames()
                .iter()
                .map(|p| p.0)
                .collect();
        assert!(pt.len() >= 4);
        // 16MB/64 = 256KB: the pool is one 64KB (8-frame) block at the top of the 4MB free.
        let top = (4u64 << 20) / PAGE;
        assert!(pt.iter().all(|&f| f >= top - 8 && f < top), "{pt:?}");
        e.os.check_invariants().unwrap();
    }
}
