//! The page daemon's mechanism (seed 000 5.1; FreeBSD 4.x `vm_pageout.c`): keeps enough memory available by
//! moving pages down the queues of vm/pageq.rs - active to inactive when unreferenced, inactive
//! to cache when still unreferenced (writing dirty ones to swap or their file first) - and by
//! freeing cache pages when an allocation needs a frame.
//!
//! Reference and dirty information comes from the accessed and dirty bits that the modelled page
//! walker sets (vm/pmap.rs `walk_touch`); clearing one invalidates the TLB entry so the next use
//! walks and sets it again (FreeBSD `pmap_ts_referenced` / `pmap_clear_modify` invalidate).
//!
//! Superpages (seed 000 4.6): evicting a base page of a superpage demotes it incrementally down to
//! the victim first; when a scan clears the reference bit of a superpage while memory is short,
//! the superpage is demoted the same way (speculative demotion, p = 1 as in the paper), and it
//! is promoted again once every base page of its smallest extent has been referenced.
//!
//! When it runs: as a `Daemon` on the simulated clock (daemon/pagedaemon.rs), woken when an allocation
//! leaves less than FreeBSD's `v_free_reserved + v_cache_min` available (`vm_paging_needed`,
//! `pagedaemon_wakeup`) and otherwise every `STATS_INTERVAL_S` for the active queue's aging
//! (`vm_pageout_page_stats`). The engine runs daemons between events, so the daemon interleaves
//! with a workload at the granularity of one event: a batch of at most 4096 accesses or a
//! sequential piece of at most 2^20 (engine.rs). An allocation that finds nothing free in
//! between does not fail: the faulting access waits while a scan runs synchronously (FreeBSD's
//! `VM_WAIT`), and that scan's work and write-out time are charged to it.
//!
//! Not modelled yet (issue 10): the contiguity-aware changes of 5.1 (1)-(3), write clustering,
//! swap read-ahead, frames shared after fork (never evicted), and Linux's kswapd.

use rustc_hash::FxHashMap;

use super::pageq::{Queue, ACT_INIT, ACT_MAX, F_BUSY, F_DIRTY};
use super::{ObjId, ObjKind, Os};
use crate::units::{Pfn, Pid};

/// FreeBSD `vm_pageout_stats_interval`: seconds between scans of the active queue when no
/// memory is needed.
pub const STATS_INTERVAL_S: u64 = 5;
/// FreeBSD `vm_pageout_full_stats_interval` (4 x the stats interval): every this many seconds
/// the stats scan covers the whole active queue instead of a portion.
pub const FULL_STATS_INTERVAL_S: u64 = 4 * STATS_INTERVAL_S;
/// FreeBSD's `MAXBSIZE` (64 KiB), from which `v_pageout_free_min` is derived.
const MAXBSIZE: u64 = 65536;
/// FreeBSD `VM_PAGEOUT_PAGE_COUNT` (16; 8 below 2000 pages): the pageout cluster size, part of
/// `v_free_reserved`.
const PAGEOUT_PAGE_COUNT: u64 = 16;

/// The paging thresholds, in frames, computed as FreeBSD 4.x `vm_pageout()` and
/// `vm_pageout_free_page_calc()` do from the page count and the free count at boot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets {
    pub free_min: u64,
    pub free_reserved: u64,
    pub free_target: u64,
    pub cache_min: u64,
    pub cache_max: u64,
    pub inactive_target: u64,
}

impl Targets {
    pub fn freebsd(pages: u64, free_at_boot: u64, page_size: u64) -> Targets {
        let mut free_min = if pages > 1024 {
            4 + (pages - 1024) / 200
        } else {
            4
        };
        let interrupt_free_min = 2;
        let pageout_free_min = (2 * MAXBSIZE) / page_size + interrupt_free_min;
        let page_count = if pages < 2000 { 8 } else { PAGEOUT_PAGE_COUNT };
        let free_reserved = page_count + pageout_free_min + pages / 768;
        free_min += free_reserved;
        let free_target = if free_at_boot > 6144 {
            4 * free_min + free_reserved
        } else {
            2 * free_min + free_reserved
        };
        let (cache_min, cache_max, inactive_target) = if free_at_boot > 2048 {
            (free_target, 2 * free_target, 3 * free_target / 2)
        } else {
            (0, 0, free_at_boot / 4)
        };
        Targets {
            free_min,
            free_reserved,
            free_target,
            cache_min,
            cache_max,
            inactive_target: inactive_target.min(free_at_boot / 3),
        }
    }
}

/// What the page daemon did (the report's `memory.pageout`).
#[derive(Clone, Debug, Default)]
pub struct PageoutStats {
    /// Daemon runs that scanned for a shortage, and synchronous scans by a waiting allocation.
    pub scans: u64,
    pub sync_scans: u64,
    /// Periodic scans of the active queue.
    pub stats_scans: u64,
    /// Pages visited by all scans.
    pub visited: u64,
    pub activated: u64,
    /// Active pages found unreferenced whose activity count declined.
    pub aged: u64,
    pub deactivated: u64,
    /// Pages moved to the cache queue (clean, unmapped).
    pub cached: u64,
    /// Dirty pages written out (to swap or their file) before caching.
    pub laundered: u64,
    /// Cache pages freed for an allocation.
    pub freed: u64,
    /// Dirty anonymous pages kept because the swap area was full.
    pub swap_full: u64,
    /// Cache pages found by a fault and reused (reactivated) instead of read again.
    pub reactivated: u64,
    /// seed 000 4.6: demotions to evict a base page of a superpage, speculative demotions of a
    /// superpage whose reference bit a scan cleared, and repromotions after those.
    pub evict_demotions: u64,
    pub speculative_demotions: u64,
    pub repromotions: u64,
    /// CPU cycles of the daemon's own runs (charged to the background account) and cycles the
    /// application waited in synchronous scans (CPU and write-out).
    pub daemon_cycles: u64,
    pub stall_cycles: u64,
}

/// The page daemon's state inside the OS.
#[derive(Clone, Debug, Default)]
pub struct Pageout {
    pub targets: Targets,
    pub stats: PageoutStats,
    /// `vm_pages_needed`: an allocation found memory short.
    pub wanted: bool,
    /// Pass number of the current shortage (the first pass gives dirty pages a second chance).
    pub(crate) pass: u32,
    /// Seconds since the last full stats scan.
    pub(crate) full_interval: u64,
    /// Set when a scan ran; the engine's incremental check then checks everything.
    pub ran: bool,
    /// Set while an allocation must not run the page daemon (an optional one, such as a
    /// fault-around page: it fails quietly instead).
    pub no_reclaim: bool,
}

/// Where an object's pages are mapped: (pid, first vpn, end vpn, object page of the first vpn).
type Rmap = FxHashMap<u32, Vec<(Pid, u64, u64, u64)>>;

impl Os {
    /// Frames an allocation can have without the page daemon: free, reserved for pages not
    /// yet touched (FreeBSD counts a reservation's unpopulated pages in `v_free_count`; the
    /// allocator preempts them before it waits), and cache.
    pub fn available_frames(&self) -> u64 {
        if self.policy.contiguity.cache_in_buddy() {
            // seed 000 5.1 (1): cache pages are free frames already.
            return self.free_or_reserved_frames();
        }
        self.free_or_reserved_frames() + self.pageq.count(Queue::Cache)
    }

    /// Frames free in the buddy allocator or reserved for pages not yet touched.
    pub(crate) fn free_or_reserved_frames(&self) -> u64 {
        let reserved = self.reserv.as_ref().map_or(0, |r| r.unpopulated_frames);
        self.phys.buddy.free_frames + reserved
    }

    /// FreeBSD `vm_paging_needed`: free + cache below `v_free_reserved + v_cache_min`.
    pub fn paging_needed(&self) -> bool {
        let t = &self.pageout.targets;
        self.available_frames() < t.free_reserved + t.cache_min
    }

    /// FreeBSD `vm_paging_target`: frames to make available to reach the targets (may be <= 0).
    pub fn paging_target(&self) -> i64 {
        let t = &self.pageout.targets;
        (t.free_target + t.cache_min) as i64 - self.available_frames() as i64
    }

    /// After an allocation: wake the daemon if memory is getting short.
    #[inline]
    pub(crate) fn note_allocation(&mut self) {
        if !self.pageout.wanted && self.policy.pagedaemon && self.paging_needed() {
            self.pageout.wanted = true;
        }
    }

    /// The reverse map of every process's map entries, by object.
    pub(crate) fn rmap(&self) -> Rmap {
        let bs = self.base_shift();
        let mut m: Rmap = FxHashMap::default();
        for p in self.procs.values() {
            for v in p.vmas.values() {
                let e = (p.pid, v.start >> bs, v.end >> bs, v.pgoff);
                m.entry(v.obj.0).or_default().push(e);
                if let Some(s) = v.shadow {
                    m.entry(s.0).or_default().push(e);
                }
            }
        }
        m
    }

    /// The (pid, vpn) of every page-table entry that maps frame `pfn` (none for a frame held by
    /// several objects, which scans leave alone). A scan finds them once per page visited and
    /// hands them to the steps below; demotion keeps them valid.
    pub(crate) fn mappings(&self, rmap: &Rmap, pfn: Pfn) -> Vec<(Pid, u64)> {
        match self.pageq.owner(pfn) {
            Some((obj, pindex)) => self.page_maps(rmap, obj, pindex, pfn),
            None => Vec::new(),
        }
    }

    /// The (pid, vpn) of every base or superpage entry that maps object page (obj, pindex) at
    /// frame `pfn`.
    pub(crate) fn page_maps(
        &self,
        rmap: &Rmap,
        obj: ObjId,
        pindex: u64,
        pfn: Pfn,
    ) -> Vec<(Pid, u64)> {
        let mut out = Vec::new();
        for &(pid, s, e, pgoff) in rmap.get(&obj.0).map_or(&[][..], |v| &v[..]) {
            if pindex < pgoff || pindex - pgoff >= e - s {
                continue;
            }
            let vpn = s + (pindex - pgoff);
            let maps = self
                .procs
                .get(&pid.0)
                .and_then(|p| p.pmap.lookup(vpn))
                .is_some_and(|pte| pte.pfn() == pfn);
            if maps {
                out.push((pid, vpn));
            }
        }
        out
    }

    /// `pmap_ts_referenced`: whether any mapping of `pfn` was referenced since the last look;
    /// clears the bits it found (invalidating the TLB entries). A referenced superpage is
    /// demoted towards the page when `demote` (seed 000 4.6, speculative demotion). Returns
    /// (referenced, cycles).
    pub(crate) fn test_referenced(&mut self, maps: &[(Pid, u64)], demote: bool) -> (bool, u64) {
        let bs = self.base_shift();
        let clear = self.machine.cost.pte_write_cycles + self.machine.cost.tlb_invalidate_cycles;
        let mut refd = false;
        let mut cycles = 0;
        for &(pid, vpn) in maps {
            let p = self.procs.get_mut(&pid.0).expect("test_referenced: pid");
            let Some(pte) = p.pmap.lookup(vpn) else {
                continue;
            };
            let order = self.orders[pte.size().0 as usize];
            let head = vpn & !((1u64 << order) - 1);
            let (a, _) = p.pmap.clear_bits(head, false);
            if !a {
                continue;
            }
            refd = true;
            self.hw
                .tlb
                .invalidate_range(pid.0, head << bs, (head + (1 << order)) << bs);
            cycles += clear;
            if demote && order > 0 {
                self.demote_to_base(pid, vpn << bs);
                self.pageout.stats.speculative_demotions += 1;
            }
        }
        (refd, cycles)
    }

    /// seed 000 4.6, "incremental repromotions occur when all the base pages of a demoted
    /// superpage are being referenced": after a scan found a base page referenced through
    /// `maps`, promote around each mapping whose smallest superpage extent is all base pages,
    /// all referenced (the promotion itself checks population, protection and dirty state).
    fn repromote(&mut self, maps: &[(Pid, u64)]) -> u64 {
        if self.orders.len() < 2 || self.reserv.is_none() {
            return 0;
        }
        let n = 1u64 << self.orders[1];
        let mut cycles = 0;
        for &(pid, vpn) in maps {
            let head = vpn & !(n - 1);
            let p = &self.procs[&pid.0];
            // The page itself was just found referenced (its bit is cleared by now).
            let all = (head..head + n).all(|v| {
                p.pmap
                    .lookup(v)
                    .is_some_and(|e| e.size().is_base() && (v == vpn || e.accessed()))
            });
            if !all {
                continue;
            }
            let Some(v) = p.vma_at(vpn << self.base_shift()).cloned() else {
                continue;
            };
            let before: u64 = self.stats.promotions.iter().sum();
            cycles += self.try_promote(pid, &v, vpn);
            if self.stats.promotions.iter().sum::<u64>() > before {
                self.pageout.stats.repromotions += 1;
            }
        }
        cycles
    }

    /// Removes the mappings `maps` of a page (demoting superpages around it first, seed 000
    /// 4.6); returns (dirty, cycles): whether a mapping had modified the page.
    pub(crate) fn unmap_all(&mut self, maps: &[(Pid, u64)]) -> (bool, u64) {
        let bs = self.base_shift();
        let remove = self.machine.cost.pte_write_cycles + self.machine.cost.tlb_invalidate_cycles;
        let mut dirty = false;
        let mut cycles = 0;
        for &(pid, vpn) in maps {
            let in_superpage = self
                .procs
                .get(&pid.0)
                .and_then(|p| p.pmap.lookup(vpn))
                .is_some_and(|e| !e.size().is_base());
            if in_superpage {
                // Incrementally, down to the victim (demote_to_base steps one size at a time).
                let before = self.stats.cycles_demotion;
                self.demote_to_base(pid, vpn << bs);
                self.pageout.stats.evict_demotions += 1;
                cycles += self.stats.cycles_demotion - before;
            }
            let p = self.procs.get_mut(&pid.0).expect("unmap_all: pid");
            p.pmap.remove(vpn, vpn + 1, |r| dirty |= r.dirty);
            self.pt_reap(pid);
            self.hw
                .tlb
                .invalidate_range(pid.0, vpn << bs, (vpn + 1) << bs);
            cycles += remove;
        }
        (dirty, cycles)
    }

    /// Whether `pfn` was modified since written out: its flag, or a dirty mapping in `maps`.
    pub(crate) fn test_dirty(&self, maps: &[(Pid, u64)], pfn: Pfn) -> bool {
        if self.pageq.flag(pfn, F_DIRTY) {
            return true;
        }
        maps.iter().any(|&(pid, vpn)| {
            let p = &self.procs[&pid.0];
            p.pmap.lookup(vpn).is_some_and(|e| {
                let order = self.orders[e.size().0 as usize];
                p.pmap.is_dirty(vpn, order)
            })
        })
    }

    /// Whether a dirty page can be written out: a file page always, an anonymous one if it has
    /// a swap slot or one is free.
    pub(crate) fn can_launder(&self, pfn: Pfn) -> bool {
        let Some((obj, pindex)) = self.pageq.owner(pfn) else {
            return false;
        };
        match self.obj(obj).kind {
            ObjKind::Anon => {
                self.backing.on_swap(obj, pindex)
                    || self.backing.stats.swap_slots < self.backing.swap_limit
            }
            ObjKind::File { .. } => true,
        }
    }

    /// Writes a page out (`vm_pageout_clean`): an anonymous page to swap, a file page to its
    /// file. Returns (CPU cycles, device time of the write). Precondition: `can_launder`.
    /// Under `dirty=hash` a page whose digest is unchanged is clean and not written (seed 000
    /// 4.7, vm/dirty.rs `must_write`).
    pub(crate) fn launder(&mut self, pfn: Pfn) -> (u64, u64) {
        let (obj, pindex) = self.pageq.owner(pfn).expect("launder: owned page");
        let base = self.machine.base_size();
        let (write, hash) = self.must_write(pfn);
        if !write {
            self.pageq.set_flag(pfn, F_DIRTY, false);
            return (hash, 0);
        }
        match self.obj(obj).kind {
            ObjKind::Anon => {
                let ok = self.backing.add_swap(obj, pindex);
                debug_assert!(ok, "launder: no swap slot");
                self.backing.stats.pageouts_swap += 1;
            }
            ObjKind::File { .. } => self.backing.stats.pageouts_file += 1,
        }
        self.stats.io_write_bytes += base;
        self.stats.io_write_requests += 1;
        self.pageq.set_flag(pfn, F_DIRTY, false);
        self.pageout.stats.laundered += 1;
        (hash, self.machine.io_cycles(base))
    }

    /// Moves an unreferenced inactive page to the cache queue: unmaps it (demoting the
    /// superpages it is part of), writes it out first if it is dirty, and, when cache pages live
    /// in the buddy allocator (vm/contig.rs), gives its frame back at once. Returns (CPU cycles,
    /// device time). Precondition: a dirty page `can_launder`.
    pub(crate) fn move_to_cache(&mut self, pfn: Pfn, maps: &[(Pid, u64)]) -> (u64, u64) {
        let (dirty, mut cycles) = self.unmap_all(maps);
        let mut io = 0;
        if dirty || self.pageq.flag(pfn, F_DIRTY) {
            let (c, d) = self.launder(pfn);
            cycles += c;
            io += d;
        }
        self.pageq.set_flag(pfn, SECOND_CHANCE, false);
        self.pageq.move_to(pfn, Queue::Cache);
        self.pageout.stats.cached += 1;
        if self.policy.contiguity.cache_in_buddy() {
            self.cache_free(pfn);
        }
        (cycles, io)
    }

    /// Frees the oldest cache page for an allocation (`vm_page_alloc` taking from the cache
    /// queue); false if the cache is empty.
    pub(crate) fn free_cache_page(&mut self) -> bool {
        if self.policy.contiguity.cache_in_buddy() {
            // Cache pages are free already (vm/contig.rs).
            return false;
        }
        let Some(pfn) = self.pageq.head(Queue::Cache) else {
            return false;
        };
        // Cache pages have one holder (fork reactivates a cache page before sharing it).
        for (obj, pindex) in self.pageq.holders(pfn) {
            if matches!(self.obj(obj).kind, ObjKind::File { .. }) {
                self.backing.set_evicted(obj, pindex, true);
            }
            self.obj_remove(obj, pindex);
        }
        self.pageout.stats.freed += 1;
        true
    }

    /// A fault found `pfn` resident in its object: a cache page is reactivated and reused.
    pub(crate) fn page_reused(&mut self, pfn: Pfn) {
        if self.pageq.queue_of(pfn) == Queue::Cache {
            self.pageq.move_to(pfn, Queue::Active);
            self.pageq.set_act(pfn, ACT_INIT);
            self.pageout.stats.reactivated += 1;
        }
    }

    /// Whether a scan may consider `pfn`: held by one object, not busy in a fault.
    fn scannable(&self, pfn: Pfn) -> bool {
        !self.pageq.flag(pfn, F_BUSY) && !self.pageq.shared(pfn)
    }

    /// `vm_pageout_scan`: inactive pages to the cache (laundering dirty ones; the first pass
    /// gives a dirty page a second chance, as FreeBSD's `PG_WINATCFLS`), then active pages to
    /// inactive until the inactive target is met. `need`: frames wanted beyond the targets (a
    /// waiting allocation). Returns (CPU cycles, write-out device cycles).
    pub(crate) fn pageout_scan(&mut self, need: u64) -> (u64, u64) {
        self.pageout.ran = true;
        let rmap = self.rmap();
        let pass = self.pageout.pass;
        let mut cycles = 0u64;
        let mut io = 0u64;
        let mut shortage = self.paging_target().max(need as i64);
        // The inactive queue, oldest first.
        let mut maxscan = self.pageq.count(Queue::Inactive);
        let mut next = self.pageq.head(Queue::Inactive);
        while let Some(pfn) = next {
            if maxscan == 0 || shortage <= 0 {
                break;
            }
            maxscan -= 1;
            next = self.pageq.next_of(pfn);
            self.pageout.stats.visited += 1;
            if !self.scannable(pfn) {
                continue;
            }
            let maps = self.mappings(&rmap, pfn);
            let (refd, c) = self.test_referenced(&maps, true);
            cycles += c;
            if refd {
                self.pageq.advance(pfn);
                self.pageout.stats.activated += 1;
                continue;
            }
            let dirty = self.test_dirty(&maps, pfn);
            if dirty && !self.can_launder(pfn) {
                // No swap space left (FreeBSD swap_pager_full): the page stays in memory.
                self.pageq.set_act(pfn, ACT_INIT);
                self.pageq.move_to(pfn, Queue::Active);
                self.pageout.stats.activated += 1;
                self.pageout.stats.swap_full += 1;
                continue;
            }
            if pass == 0 && dirty && !self.pageq.flag(pfn, SECOND_CHANCE) {
                self.pageq.set_flag(pfn, SECOND_CHANCE, true);
                self.pageq.move_to(pfn, Queue::Inactive);
                continue;
            }
            let (c, d) = self.move_to_cache(pfn, &maps);
            cycles += c;
            io += d;
            shortage -= 1;
        }
        // The active queue: age pages, deactivate those whose activity reaches zero.
        let t = self.pageout.targets.inactive_target as i64;
        let mut shortage = self.paging_target() + (t - self.pageq.count(Queue::Inactive) as i64);
        let mut pcount = self.pageq.count(Queue::Active);
        let mut next = self.pageq.head(Queue::Active);
        while let Some(pfn) = next {
            if pcount == 0 || shortage <= 0 {
                break;
            }
            pcount -= 1;
            next = self.pageq.next_of(pfn);
            self.pageout.stats.visited += 1;
            if !self.scannable(pfn) {
                self.pageq.move_to(pfn, Queue::Active);
                continue;
            }
            let maps = self.mappings(&rmap, pfn);
            let (refd, c) = self.test_referenced(&maps, true);
            cycles += c;
            if refd {
                self.pageq.advance(pfn);
                cycles += self.repromote(&maps);
                continue;
            }
            let a = self.pageq.decline(pfn);
            self.pageout.stats.aged += 1;
            if a == 0 {
                self.pageq.move_to(pfn, Queue::Inactive);
                self.pageout.stats.deactivated += 1;
                shortage -= 1;
            } else {
                self.pageq.move_to(pfn, Queue::Active);
            }
        }
        (cycles, io)
    }

    /// `vm_pageout_page_stats`: with no shortage, every stats interval, ages a portion of the
    /// active queue (all of it every full interval), deactivating pages whose activity reached
    /// zero, when free + inactive + cache is below its target. Returns CPU cycles.
    pub(crate) fn page_stats(&mut self) -> u64 {
        let t = self.pageout.targets.clone();
        let have = self.available_frames() + self.pageq.count(Queue::Inactive);
        if have >= t.inactive_target + t.cache_max + t.free_min {
            return 0;
        }
        self.pageout.ran = true;
        self.pageout.stats.stats_scans += 1;
        let active = self.pageq.count(Queue::Active);
        self.pageout.full_interval += STATS_INTERVAL_S;
        let mut pcount = active;
        if self.pageout.full_interval < FULL_STATS_INTERVAL_S {
            // vm_pageout_stats_max (= v_free_target) scaled by the active share of memory.
            let portion = t.free_target * active / self.phys.frames().max(1);
            pcount = pcount.min(portion);
        } else {
            self.pageout.full_interval = 0;
        }
        let rmap = self.rmap();
        let mut cycles = 0;
        let mut next = self.pageq.head(Queue::Active);
        while let Some(pfn) = next {
            if pcount == 0 {
                break;
            }
            pcount -= 1;
            next = self.pageq.next_of(pfn);
            self.pageout.stats.visited += 1;
            if !self.scannable(pfn) {
                continue;
            }
            let maps = self.mappings(&rmap, pfn);
            let (refd, c) = self.test_referenced(&maps, false);
            cycles += c;
            if refd {
                self.pageq.advance(pfn);
            } else if self.pageq.act(pfn) == 0 {
                self.pageq.move_to(pfn, Queue::Inactive);
                self.pageout.stats.deactivated += 1;
            } else {
                self.pageq.decline(pfn);
                self.pageq.move_to(pfn, Queue::Active);
            }
        }
        cycles
    }

    /// An allocation found no free frame: free a cache page, else run scans while the
    /// allocating access waits (their CPU time is charged to it as kernel time, the writes it
    /// waits for as I/O).
    /// False when nothing could be made available (every page is wired, shared or busy).
    pub(crate) fn reclaim_for_alloc(&mut self) -> bool {
        // `shrink_slab` in direct reclaim: the deferred split shrinker frees the pages of
        // partly unmapped THPs first (vm/deferred_split.rs).
        let (freed, c) = self.deferred_split_scan();
        self.stats.cycles_kernel += c;
        if freed > 0 {
            return true;
        }
        if !self.policy.pagedaemon {
            return false;
        }
        if self.free_cache_page() {
            return true;
        }
        // The waiting thread's scans launder at once (passes after the first), and go on until
        // one makes a page available or changes nothing (then memory is really exhausted).
        self.pageout.pass = self.pageout.pass.max(1);
        // A page's activity reaches zero within ACT_MAX unreferenced passes; passes beyond
        // that which still cache nothing (every page referenced each time, or dirty with no
        // swap left) mean memory is exhausted.
        let mut fruitless = 0u32;
        loop {
            let cached = self.pageout.stats.cached;
            let (c, io) = self.pageout_scan(self.pageout.targets.free_reserved.max(1));
            self.pageout.stats.sync_scans += 1;
            self.pageout.stats.stall_cycles += c + io;
            // The scan's work is kernel time; the wait for its writes is I/O time.
            self.stats.cycles_kernel += c;
            self.stats.cycles_io += io;
            self.hw.core.serial(io, crate::hw::core::cause::IO);
            if self.free_cache_page() {
                return true;
            }
            if self.policy.contiguity.cache_in_buddy() && self.pageout.stats.cached > cached {
                return true;
            }
            if self.pageout.stats.cached == cached {
                fruitless += 1;
                if fruitless > ACT_MAX as u32 + 2 {
                    return false;
                }
            }
        }
    }
}

impl Os {
    /// The page queues hold exactly the frames objects hold, each object page is among its
    /// frame's holders, cache pages are unmapped, and the swap slots are counted right.
    pub(crate) fn check_pageq(&self) -> crate::error::Result<()> {
        use crate::error::SimError;
        let inv = SimError::Invariant;
        self.pageq
            .check_invariants(|p| self.phys.refs(p))
            .map_err(inv)?;
        self.check_contig()?;
        self.backing
            .check_invariants()
            .map_err(SimError::Invariant)?;
        crate::ensure_inv!(
            self.pageq.total() == self.phys.used_frames + self.contig.cached_free(),
            "pageq: {} frames on the queues but {} held by objects and {} free cache pages",
            self.pageq.total(),
            self.phys.used_frames,
            self.contig.cached_free()
        );
        for (i, o) in self.objects.iter().enumerate() {
            let Some(o) = o else { continue };
            for (pi, pfn) in o.pages.all() {
                crate::ensure_inv!(
                    self.pageq.holders(pfn).contains(&(ObjId(i as u32), pi)),
                    "pageq: page {pi} of object {i} is frame {} whose holders are {:?}",
                    pfn.0,
                    self.pageq.holders(pfn)
                );
            }
        }
        for p in self.procs.values() {
            for (vpn, pte) in p.pmap.entries() {
                crate::ensure_inv!(
                    self.pageq.queue_of(pte.pfn()) != Queue::Cache,
                    "pageq: pid {} maps page {vpn:#x} to frame {}, which is on the cache queue",
                    p.pid.0,
                    pte.pfn().0
                );
            }
        }
        Ok(())
    }
}

/// Frame flag: a dirty inactive page was skipped once by a first pass (FreeBSD `PG_WINATCFLS`).
const SECOND_CHANCE: u8 = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freebsd_targets_for_1gb_of_4k_pages() {
        // 262144 pages: free_min 4 + 261120/200 = 1309, free_reserved 16 + (32 + 2) + 341 = 391.
        let t = Targets::freebsd(262144, 262144, 4096);
        assert_eq!(t.free_reserved, 391);
        assert_eq!(t.free_min, 1309 + 391);
        assert_eq!(t.free_target, 4 * 1700 + 391);
        assert_eq!(t.cache_min, t.free_target);
        assert_eq!(t.inactive_target, 3 * t.free_target / 2);
    }

    #[test]
    fn targets_switch_at_freebsds_boundaries() {
        let ps = 4096;
        // v_free_target: 2x v_free_min up to 6144 free pages, 4x above.
        let t = Targets::freebsd(6144, 6144, ps);
        assert_eq!(t.free_target, 2 * t.free_min + t.free_reserved);
        let t = Targets::freebsd(6145, 6145, ps);
        assert_eq!(t.free_target, 4 * t.free_min + t.free_reserved);
        // The cache target exists above 2048 free pages.
        assert_eq!(Targets::freebsd(2048, 2048, ps).cache_min, 0);
        let t = Targets::freebsd(2049, 2049, ps);
        assert_eq!(
            (t.cache_min, t.cache_max),
            (t.free_target, 2 * t.free_target)
        );
        // The pageout cluster is 8 pages below 2000 pages, 16 from there.
        let r = |pages| Targets::freebsd(pages, pages, ps).free_reserved;
        assert_eq!(r(1999), 8 + 34 + 1999 / 768);
        assert_eq!(r(2000), 16 + 34 + 2000 / 768);
        // Pages beyond 1024 add one to v_free_min per 200.
        let t = Targets::freebsd(1224, 1224, ps);
        assert_eq!(t.free_min, 5 + t.free_reserved);
        assert_eq!(FULL_STATS_INTERVAL_S, 20);
    }

    /// `vm_paging_needed` is strict: memory is short when free + cache falls below
    /// `v_free_reserved + v_cache_min`, and the target is what it takes to reach
    /// `v_free_target + v_cache_min`.
    #[test]
    fn paging_is_needed_below_the_wake_level() {
        use crate::hw::Machine;
        use crate::policy::Policy;
        use crate::units::Order;
        let m = Machine::from_spec("skylake:mem=1G").unwrap();
        let mut p = Policy::from_spec("base").unwrap();
        p.resolve(&m).unwrap();
        let mut os = Os::new(m, p);
        let t = os.pageout.targets.clone();
        let wake = t.free_reserved + t.cache_min;
        let free = os.phys.buddy.free_frames;
        for _ in 0..free - wake {
            os.phys.buddy.alloc(Order(0)).unwrap();
        }
        assert!(!os.paging_needed());
        let goal = (t.free_target + t.cache_min) as i64;
        assert_eq!(os.paging_target(), goal - wake as i64);
        os.phys.buddy.alloc(Order(0)).unwrap();
        assert!(os.paging_needed());
        assert_eq!(os.paging_target(), goal - wake as i64 + 1);
    }

    #[test]
    fn small_machines_have_no_cache_target() {
        let t = Targets::freebsd(1500, 1500, 8192);
        assert_eq!(t.cache_min, 0);
        assert_eq!(t.inactive_target, 1500 / 4);
        assert_eq!(t.free_reserved, 8 + (16 + 2) + 1);
    }
}
