//! Mapping the neighbours of a faulting page (event 3, mapping creation): Linux's fault-around
//! and FreeBSD's prefault, as `Policy::fault_around` chooses. Both map only pages that are
//! already resident (in the page cache, or in the entry's anonymous object) and have no mapping
//! yet; neither reads from storage. With a warm page cache (`PageCache::Warm`) every page of a
//! file is resident, and the model allocates its frame when it is first mapped or read.
//!
//! Why it matters: a native process's resident set counts these pages, so without them a
//! replayed program's footprint falls short of its real maximum RSS by the pages around the
//! file pages it touched (docs/replay.md, "cc's footprint"), and a run takes a minor fault for
//! each of them that the real kernel never takes.

use super::object::PageCache;
use super::pageq::Queue;
use super::{ObjKind, Os, Vma};
use crate::policy::FaultAround;
use crate::units::{AccessKind, Pfn, Pid, Prot};

/// Leaf page-table entries per table: `filemap_map_pages` never crosses one (x86-64
/// `PTRS_PER_PTE`, 512); a window never does unless it is larger.
const PTRS_PER_PTE: u64 = 512;

/// What fault-around and prefault did (the report's `memory.fault_around_bytes`).
#[derive(Clone, Debug, Default)]
pub struct AroundStats {
    /// Pages mapped beside a faulting page.
    pub mapped: u64,
    /// When set (the engine's incremental `--check`), the address ranges mapped around each
    /// fault are recorded in `touched` for the check of the event.
    pub track: bool,
    pub touched: Vec<(Pid, u64, u64)>,
}

impl Os {
    /// Maps the neighbours of page `vpn` of `v`, just faulted in by `pid` for an access,
    /// a read or fetch (`write` false) or a write, as the policy's `fault_around` says. Returns the cycles spent (one PTE write per
    /// page mapped). Runs out of memory quietly: a neighbour is an optimisation, not a need.
    pub(crate) fn fault_around(&mut self, pid: Pid, v: &Vma, vpn: u64, write: bool) -> u64 {
        let bs = self.base_shift();
        let start = v.start >> bs;
        let end = v.end >> bs;
        // Pages mapped, and the range of their page numbers `[lo, hi)`.
        let (mut mapped, mut lo, mut hi) = (0u64, vpn, vpn + 1);
        match self.policy.fault_around {
            FaultAround::Off => {}
            FaultAround::Window { bytes } => {
                // Linux do_read_fault -> do_fault_around: read (and fetch) faults of file
                // mappings only; do_cow_fault and do_shared_fault (writes) map one page.
                let pages = bytes >> bs;
                if write || pages <= 1 || !self.in_page_cache(v) {
                    return 0;
                }
                // A power of two no larger than a leaf table: the aligned window never crosses
                // one (`fault_around_bytes` is a power of two, checked by the policy parser).
                let pages = pages.min(PTRS_PER_PTE);
                let first = vpn & !(pages - 1);
                for n in first.max(start)..(first + pages).min(end) {
                    if n == vpn || self.has_mapping(pid, n) {
                        continue;
                    }
                    // filemap_map_pages maps what the page cache holds and skips the rest.
                    if let Some(pfn) = self.resident_page(pid, v, n) {
                        if self.enter_read_only(pid, v, n, pfn) {
                            (mapped, lo, hi) = (mapped + 1, lo.min(n), hi.max(n + 1));
                        }
                    }
                }
            }
            FaultAround::Spiral { behind, ahead } => {
                // vm_fault_prefault: -1, +1, -2, +2, ... up to max(behind, ahead) steps, offsets
                // past `ahead` or `behind` skipped, the entry's bounds skipped, a mapped page
                // skipped (pmap_is_prefaultable), the first page not resident ends it.
                let steps = 2 * behind.max(ahead) as u64;
                for i in 0..steps {
                    let d = (i >> 1) + 1;
                    let n = if i & 1 == 0 {
                        match vpn.checked_sub(d) {
                            Some(n) if d <= behind as u64 => n,
                            _ => continue,
                        }
                    } else {
                        if d > ahead as u64 {
                            continue;
                        }
                        vpn + d
                    };
                    if n < start || n >= end || self.has_mapping(pid, n) {
                        continue;
                    }
                    let Some(pfn) = self.resident_page(pid, v, n) else {
                        break;
                    };
                    if self.enter_read_only(pid, v, n, pfn) {
                        (mapped, lo, hi) = (mapped + 1, lo.min(n), hi.max(n + 1));
                    }
                }
            }
        }
        self.stats.around.mapped += mapped;
        if mapped > 0 && self.stats.around.track {
            self.stats.around.touched.push((pid, lo << bs, hi << bs));
        }
        mapped * self.machine.cost.pte_write_cycles
    }

    /// Whether `v`'s pages live in a page cache that `filemap_map_pages` serves: a file, or
    /// shared anonymous memory (shmem, whose `vm_ops` map pages the same way).
    fn in_page_cache(&self, v: &Vma) -> bool {
        matches!(self.obj(v.obj).kind, ObjKind::File { .. }) || !v.private()
    }

    fn has_mapping(&self, pid: Pid, vpn: u64) -> bool {
        self.procs
            .get(&pid.0)
            .is_some_and(|p| p.pmap.lookup(vpn).is_some())
    }

    /// The resident page that page `vpn` of `v` would map: the private copy in the entry's
    /// shadow, else the object's page (for a file: the page cache's, supplied by a warm cache
    /// if absent and inside the file). `None` if not resident (or memory ran out).
    fn resident_page(&mut self, pid: Pid, v: &Vma, vpn: u64) -> Option<Pfn> {
        let pindex = v.pgoff + (vpn - (v.start >> self.base_shift()));
        // Pages on the cache queue stay unmapped (they are free for the taking; FreeBSD's
        // prefault and Linux's fault-around skip pages not ready to map).
        let cached = |os: &Os, pfn: Pfn| os.pageq.queue_of(pfn) == Queue::Cache;
        if let Some(s) = v.shadow {
            if let Some(pfn) = self.obj(s).pages.get(pindex) {
                return (!cached(self, pfn)).then_some(pfn);
            }
            // The private copy is on swap or is a free cache page (vm/contig.rs): it is the
            // page this entry maps, not the object's below it. (Mapping the object's page for a
            // free cache page of the shadow showed the process stale data, and a later write
            // copied it into the shadow beside its cached copy: "both resident and a free cache
            // page", found by a property test.)
            if self.backing.on_swap(s, pindex) || self.is_free_cached(s, pindex) {
                return None;
            }
        }
        let o = self.obj(v.obj);
        if let Some(pfn) = o.pages.get(pindex) {
            return (!cached(self, pfn)).then_some(pfn);
        }
        // A warm page cache holds every page of a file that was not evicted. (A mapping never
        // passes its file's end: mmap and mremap grow the file to cover it.)
        if !matches!(o.kind, ObjKind::File { .. })
            || self.page_cache != PageCache::Warm
            || self.backing.evicted(v.obj, pindex)
            || self.is_free_cached(v.obj, pindex)
        {
            return None;
        }
        // An optional page: no page daemon run for it.
        self.pageout.no_reclaim = true;
        let pfn = self.alloc_frame(pid, v.obj, pindex, v);
        self.pageout.no_reclaim = false;
        let pfn = pfn.ok()?;
        self.obj_insert(v.obj, pindex, pfn);
        // A clean page from the page cache: its digest under dirty=hash (vm/dirty.rs).
        let c = self.digest_clean(pfn);
        self.stats.cycles_kernel += c;
        Some(pfn)
    }

    /// Enters `pfn` at `vpn` with the entry's protection less write (pmap_enter_quick; Linux
    /// maps a fault-around page without write too): a later write takes a protection fault,
    /// which copies a shared page or grants write to an exclusive one. False if a page table
    /// could not be had.
    fn enter_read_only(&mut self, pid: Pid, v: &Vma, vpn: u64, pfn: Pfn) -> bool {
        let prot = Prot(v.prot.0 & !Prot::WRITE.0);
        if !prot.allows(AccessKind::Read) && !prot.allows(AccessKind::Ifetch) {
            return false;
        }
        // Entering a page in a chunk with no page table allocates one, which may run the page
        // daemon: the page is held busy until the event ends (PG_BUSY, as the fault path and
        // fork hold theirs), else the scan may evict it and it would be mapped over a frame
        // its object no longer holds. (FreeBSD vm_fault_prefault enters pages with the object
        // locked through pmap_enter_quick, which never sleeps for a page-table page.)
        self.pageq.mark_busy(pfn);
        self.pmap_enter(pid, vpn, pfn, prot).is_ok()
    }
}
