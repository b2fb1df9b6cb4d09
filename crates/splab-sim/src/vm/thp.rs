//! Linux transparent huge pages at fault time (policy `AllocPolicy::Thp`: presets `linux`,
//! `linux-madvise`, `linux-4k`; docs/reference-policies.md section 2).
//!
//! `do_huge_pmd_anonymous_page` (mm/huge_memory.c): a fault on an anonymous private map entry
//! that THP is enabled for (`ThpPolicy::allowed`: `enabled=always`, or `madvise` and the entry
//! advised MADV_HUGEPAGE; never after MADV_NOHUGEPAGE), whose aligned THP-sized region lies
//! inside the entry with no page mapped in it (`pmd_none`), allocates a THP-sized block, zeroes
//! every base page of it and maps it with one entry: seed 003's coupling of allocation,
//! preparation and mapping creation (3.2, observation 1). If no free block of that size exists
//! the fault first does what `defrag` says (vm/compact.rs `alloc_huge`; its compaction stalls
//! the fault, seed 003 3.2), then counts `thp_fault_fallback` and takes the base-page path.
//!
//! The huge zero page (`use_zero_page`, Linux's default 1): a read fault in such a region maps,
//! instead, the one shared huge zero page read-only with one entry (`do_huge_pmd_anonymous_page`
//! -> `mm_get_huge_zero_folio` / 4.3's `get_huge_zero_page`, `set_huge_zero_page`). Its block
//! is allocated (and zeroed) at the first such fault and kept for the run, with the 4KB zero
//! page (`ZERO_PAGE`) that a split huge zero entry's PTEs map; both are kernel memory: wired,
//! held by no object, in no process's pages, counted once in the footprint
//! (`Os::zero_frames`). A write to it follows `zero_page_wp` (`huge_zero_wp`). A split (a
//! partial munmap or mprotect, or `zero_page_wp=split`) maps every base page of it to the 4KB
//! zero page (`__split_huge_zero_page_pmd`); a write to one of those allocates a zeroed page
//! (mm/memory.c `do_wp_page` -> `wp_page_copy` on the zero pfn). Unmapping frees nothing.
//!
//! Not modelled (each a knob of Linux's that stays at a value the model can say it has):
//! - direct reclaim for a THP (`defrag=always`): only compaction.
//! - the huge zero page's allocation from the free lists only (Linux's `GFP_TRANSHUGE` may
//!   compact), and its shrinker (`shrink_huge_zero_page_scan` frees it when no one maps it):
//!   once allocated it stays. The 4KB zero page of a base-page read fault (`do_anonymous_page`
//!   maps it for a read): a read fault outside a THP-eligible region allocates.
//!
//! mTHP sizes (`hugepages-<size>kB/enabled`) are vm/mthp.rs, tried when this PMD-sized path
//! was not taken.
//! A partially unmapped THP keeps its unmapped pages on the deferred split queue until memory
//! runs short (vm/deferred_split.rs). `prctl(PR_SET_THP_DISABLE)` (`Process::thp_disabled`)
//! turns THP off for a process and its children.
//!
//! Splitting (a partial munmap or mprotect, copy-on-write, eviction) is the generic demotion of
//! vm/reserve.rs (`demote_one`): a THP demotes straight to base pages, as `split_huge_pmd`.

use serde::Serialize;

use super::{ObjKind, Os, Process, Vma};
use crate::error::Result;
use crate::policy::ZeroPageWp;
use crate::units::{Order, Pfn, Pid, Prot, SizeClass};

/// THP counters, under /proc/vmstat's and khugepaged's sysfs names (`memory.thp`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ThpStats {
    /// `thp_fault_alloc`: THPs allocated, zeroed and mapped at a fault.
    pub fault_alloc: u64,
    /// `thp_fault_fallback`: faults in an eligible empty region that found no free THP-sized
    /// block, and took a base page.
    pub fault_fallback: u64,
    /// `thp_collapse_alloc`: THPs khugepaged allocated and collapsed a region into.
    pub collapse_alloc: u64,
    /// `thp_collapse_alloc_failed`: collapses that found no free THP-sized block.
    pub collapse_alloc_failed: u64,
    /// khugepaged's `full_scans`: passes over every eligible map entry of every process.
    pub full_scans: u64,
    /// khugepaged's `pages_collapsed`: regions collapsed (one THP each).
    pub pages_collapsed: u64,
    /// Regions MADV_COLLAPSE collapsed (vm/khugepaged.rs `madv_collapse`).
    pub madv_collapsed: u64,
    /// Base-page entries khugepaged's scans covered (its `pages_to_scan` budget spent).
    pub pages_scanned: u64,
    /// Regions khugepaged refused: more empty entries than `max_ptes_none`, ...
    pub scan_fail_none: u64,
    /// ... pages on swap (more than `max_ptes_swap`, or any: swap-in before a collapse is not
    /// modelled), ...
    pub scan_fail_swap: u64,
    /// ... more pages shared with another process than `max_ptes_shared`, ...
    pub scan_fail_shared: u64,
    /// ... no page referenced since the page daemon last cleared the bits (no young entry), ...
    pub scan_fail_referenced: u64,
    /// ... or for another reason: no writable entry, a frame in a reservation, a page busy.
    pub scan_fail_other: u64,
    /// Base pages copied into collapsed THPs, and base pages zeroed to fill them.
    pub collapse_copied: u64,
    pub collapse_zeroed: u64,
    /// `thp_zero_page_alloc`: huge zero pages allocated (at most one: it is kept).
    pub zero_page_alloc: u64,
    /// `thp_zero_page_alloc_failed`: read faults that found no free block for it (they count
    /// `thp_fault_fallback` too, and take a base page).
    pub zero_page_alloc_failed: u64,
    /// Huge zero page mappings made at read faults (one entry each; no Linux counter).
    pub zero_page_mapped: u64,
    /// Writes to a huge zero page mapping (no Linux counter): each either got a new THP
    /// (counted in `fault_alloc`) or split it (`zero_page_split`).
    pub zero_page_wp: u64,
    /// Huge zero page mappings split into 4KB zero-page entries (`__split_huge_zero_page_pmd`:
    /// at a write under `zero_page_wp=split` or when no THP was free, or at a partial unmap or
    /// mprotect).
    pub zero_page_split: u64,
    /// The deferred split queue and the underused shrinker (vm/deferred_split.rs).
    pub split: super::deferred_split::SplitStats,
    /// mTHP sizes that faults tried, smallest first (vm/mthp.rs); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mthp: Vec<super::mthp::MthpStats>,
}

/// The huge zero page's block and the 4KB zero page, once allocated (module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZeroPages {
    /// First frame of the huge zero page's block (`huge_zero_pfn`).
    pub huge: Pfn,
    /// Its order (the THP's).
    pub order: u8,
    /// The 4KB zero page (`zero_pfn`).
    pub base: Pfn,
}

/// THP state of the OS: counters and khugepaged's cursor.
#[derive(Clone, Debug, Default)]
pub struct ThpState {
    pub stats: ThpStats,
    /// The zero pages, from the first read fault that mapped the huge one.
    pub zero: Option<ZeroPages>,
    /// Where khugepaged's scan resumes: (pid, virtual page number).
    pub cursor: (u32, u64),
    /// THP folios and the deferred split queue (vm/deferred_split.rs).
    pub(crate) split: super::deferred_split::DeferredSplit,
}

impl Os {
    /// `prctl(PR_SET_THP_DISABLE, flag)` for `pid` (`PR_GET_THP_DISABLE` is
    /// `Process::thp_disabled`). THPs already mapped stay, as in Linux.
    pub fn set_thp_disable(&mut self, pid: Pid, disable: bool) -> Result<()> {
        self.proc(pid)?;
        self.procs.get_mut(&pid.0).expect("checked").thp_disabled = disable;
        Ok(())
    }

    /// The size class (and order) THP faults allocate and khugepaged collapses into, if the
    /// policy has THP or khugepaged.
    pub(crate) fn thp_class(&self) -> Option<(u8, u8)> {
        let c = match self.policy.thp() {
            Some(t) => t.class,
            None => self.policy.collapse_class()?,
        };
        Some((c, self.orders[c as usize]))
    }

    /// Whether map entry `v` of process `p` may hold THPs: THP not disabled for the process
    /// (`prctl(PR_SET_THP_DISABLE)`, Linux's MMF_DISABLE_THP), allowed by `enabled` and the
    /// entry's advice (beside reservations, khugepaged's, as `enabled=always`: any entry not
    /// advised MADV_NOHUGEPAGE), and anonymous private memory (shmem THP is Linux's
    /// `shmem_enabled`, never by default).
    pub(crate) fn thp_eligible(&self, p: &Process, v: &Vma) -> bool {
        let allowed = match self.policy.thp() {
            Some(t) => t.allowed(v.hugepage_advice),
            None => self.policy.collapse_class().is_some() && v.hugepage_advice != Some(false),
        };
        allowed
            && !p.thp_disabled
            && v.private()
            && v.shadow.is_none()
            && !v.needs_copy
            && matches!(self.obj(v.obj).kind, ObjKind::Anon)
    }

    /// The aligned block of `n` base pages around `vpn` (object page `pindex`), as (first vpn,
    /// first object page), if map entry `v` covers it and nothing is in it: no page mapped
    /// (`pmd_none`, or `pte_range_none` for an mTHP) and no object page, resident or on swap,
    /// that a large page would hide.
    pub(crate) fn empty_block(
        &self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pindex: u64,
        n: u64,
    ) -> Result<Option<(u64, u64)>> {
        let bs = self.base_shift();
        let head = vpn & !(n - 1);
        if head << bs < v.start || (head + n) << bs > v.end {
            return Ok(None);
        }
        let phead = pindex - (vpn - head);
        let o = self.obj(v.obj);
        let busy = self.proc(pid)?.pmap.count_valid(head, head + n) > 0
            || (phead..phead + n)
                .any(|i| o.pages.get(i).is_some() || self.backing.on_swap(v.obj, i));
        Ok((!busy).then_some((head, phead)))
    }

    /// A free block at `pfn` becomes object pages `phead..` of `v` mapped by base entries at
    /// `head..` of `pid`, zero-filled at one fault: a THP's or an mTHP's (vm/mthp.rs).
    pub(crate) fn map_new_block(
        &mut self,
        pid: Pid,
        v: &Vma,
        (head, phead): (u64, u64),
        pfn: Pfn,
        n: u64,
    ) -> Result<()> {
        self.note_allocation();
        for i in 0..n {
            self.obj_insert(v.obj, phead + i, Pfn(pfn.0 + i));
            self.pmap_enter(pid, head + i, Pfn(pfn.0 + i), v.prot)?;
        }
        self.stats.faults.zero_fill += 1;
        self.stats.zeroed_bytes += n << self.base_shift();
        Ok(())
    }

    /// Frames of the zero pages (the huge one's block and the 4KB one), once allocated: kernel
    /// memory counted once in the footprint, in no process's pages.
    pub fn zero_frames(&self) -> u64 {
        self.thp.zero.map_or(0, |z| (1u64 << z.order) + 1)
    }

    /// Whether `pfn` is a frame of the huge zero page (mm/huge_memory.c `is_huge_zero_pfn`).
    #[inline]
    pub(crate) fn is_huge_zero(&self, pfn: Pfn) -> bool {
        self.thp
            .zero
            .is_some_and(|z| pfn.0 >= z.huge.0 && pfn.0 < z.huge.0 + (1u64 << z.order))
    }

    /// Whether `pfn` is the 4KB zero page (include/linux/pgtable.h `is_zero_pfn`).
    #[inline]
    pub(crate) fn is_zero_pfn(&self, pfn: Pfn) -> bool {
        self.thp.zero.is_some_and(|z| pfn == z.base)
    }

    /// mm/huge_memory.c `mm_get_huge_zero_folio` (4.3: `get_huge_zero_page`): the huge zero
    /// page, allocated at the first call (an unmovable block of order `o` from the free lists,
    /// zeroed: `thp_zero_page_alloc`; none free: `thp_zero_page_alloc_failed`), with the 4KB
    /// zero page. Returns it and the cycles of zeroing it (only the first time).
    fn get_huge_zero_page(&mut self, o: u8) -> Option<(ZeroPages, u64)> {
        if let Some(z) = self.thp.zero {
            return Some((z, 0));
        }
        let n = 1u64 << o;
        let Some(huge) = self
            .phys
            .buddy
            .alloc_mt(Order(o), crate::phys::buddy::MT_UNMOVABLE)
        else {
            self.thp.stats.zero_page_alloc_failed += 1;
            return None;
        };
        let Ok(base) = self.alloc_kernel_frame() else {
            self.phys.buddy.free(huge, Order(o));
            self.thp.stats.zero_page_alloc_failed += 1;
            return None;
        };
        for i in 0..n {
            self.claim_frame(Pfn(huge.0 + i));
        }
        self.phys.wired_frames += n + 1;
        let z = ZeroPages {
            huge,
            order: o,
            base,
        };
        self.thp.zero = Some(z);
        self.thp.stats.zero_page_alloc += 1;
        self.stats.zeroed_bytes += n << self.base_shift();
        Some((z, n * self.machine.cost.huge_zero_page_cycles))
    }

    /// `do_huge_pmd_anonymous_page`: tries to allocate, zero and map the THP around `vpn`
    /// (object page `pindex`) of `pid`, or for a read fault under `use_zero_page` to map the
    /// huge zero page there. Returns the cycles of the mapping if it did (None: the fault takes
    /// the base-page path), and the cycles direct compaction stalled the fault either way
    /// (vm/compact.rs).
    pub(crate) fn thp_fault(
        &mut self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pindex: u64,
        write: bool,
    ) -> Result<(Option<u64>, u64)> {
        let Some((defrag, use_zero_page)) = self.policy.thp().map(|t| (t.defrag, t.use_zero_page))
        else {
            return Ok((None, 0));
        };
        let Some((c, o)) = self.thp_class() else {
            return Ok((None, 0));
        };
        if !self.thp_eligible(self.proc(pid)?, v) {
            return Ok((None, 0));
        }
        let n = 1u64 << o;
        let Some((head, phead)) = self.empty_block(pid, v, vpn, pindex, n)? else {
            return Ok((None, 0));
        };
        // The page-table pages first: allocating them may run the page daemon, which must not
        // find the new THP's pages half entered.
        self.pmap_prepare(pid, head, n)?;
        if !write && use_zero_page {
            // `transparent_hugepage_use_zero_page()` on a read fault: `set_huge_zero_page`
            // maps it with the map entry's protection less write (private: copy on write).
            let Some((z, zeroing)) = self.get_huge_zero_page(o) else {
                // `mm_get_huge_zero_folio` failed: THP_FAULT_FALLBACK, a base page.
                self.thp.stats.fault_fallback += 1;
                return Ok((None, 0));
            };
            let prot = Prot(v.prot.0 & !Prot::WRITE.0);
            for i in 0..n {
                self.pmap_enter(pid, head + i, Pfn(z.huge.0 + i), prot)?;
            }
            let p = self.procs.get_mut(&pid.0).expect("thp_fault: pid");
            p.pmap.promote(head, o, SizeClass(c));
            self.thp.stats.zero_page_mapped += 1;
            let writes = self.machine.superpage_entry_writes(n);
            return Ok((
                Some(zeroing + writes * self.machine.cost.pte_write_cycles),
                0,
            ));
        }
        // The free lists, then what `defrag` says for this entry (VM_HUGEPAGE: advised).
        let action = defrag.action(v.hugepage_advice == Some(true));
        let (got, stall) = self.alloc_huge(o, action);
        let Some(pfn) = got else {
            self.thp.stats.fault_fallback += 1;
            return Ok((None, stall));
        };
        self.map_new_block(pid, v, (head, phead), pfn, n)?;
        Ok((Some(self.thp_installed(pid, head, o, c, pfn)), stall))
    }

    /// The tail of a THP's installation at a fault (`__do_huge_pmd_anonymous_page`, and the
    /// huge zero page's write path): the entry becomes one superpage entry, made dirty at once
    /// (`pmd_mkdirty`), its frames a new folio; returns the cycles of clearing the page
    /// (`clear_huge_page` / `folio_zero_user` at `huge_zero_page_cycles`: 4KB at a time in
    /// Linux 4.3, in bulk on the 6.18 guest calibrate measured) and writing one PMD entry
    /// (every base entry where PTEs are replicated).
    fn thp_installed(&mut self, pid: Pid, head: u64, o: u8, c: u8, pfn: Pfn) -> u64 {
        let p = self.procs.get_mut(&pid.0).expect("thp_installed: pid");
        p.pmap.promote(head, o, SizeClass(c));
        p.pmap.touch(head, o, true);
        self.folio_new(pfn, &[]);
        self.thp.stats.fault_alloc += 1;
        let n = 1u64 << o;
        let writes = self.machine.superpage_entry_writes(n);
        n * self.machine.cost.huge_zero_page_cycles + writes * self.machine.cost.pte_write_cycles
    }

    /// A write to the huge zero page mapping around `vpn` (object page `pindex`) of `pid`:
    /// mm/huge_memory.c `do_huge_pmd_wp_page` on a huge zero PMD. Under `zero_page_wp=alloc`
    /// (Linux 4.3: its `alloc:` path; 6.13+: `do_huge_zero_wp_pmd`) a THP-eligible entry gets
    /// a new THP as a fault's (`defrag`; `thp_fault_alloc`), zeroed, mapped writable and dirty
    /// in place of it. Otherwise (`zero_page_wp=split`, Linux 5.8 to 6.12; or no block:
    /// `thp_fault_fallback`) nothing is mapped here and the caller splits the mapping into 4KB
    /// zero-page entries (`__split_huge_pmd`, vm/reserve.rs `demote_one`) and copies the
    /// written page (`do_wp_page`). Returns the cycles of the new mapping if a THP replaced it,
    /// and the cycles direct compaction stalled the fault either way.
    pub(crate) fn huge_zero_wp(
        &mut self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pindex: u64,
    ) -> Result<(Option<u64>, u64)> {
        self.thp.stats.zero_page_wp += 1;
        let (Some(t), Some((c, o))) = (self.policy.thp().cloned(), self.thp_class()) else {
            return Ok((None, 0));
        };
        if t.zero_page_wp != ZeroPageWp::Alloc || !self.thp_eligible(self.proc(pid)?, v) {
            return Ok((None, 0));
        }
        let n = 1u64 << o;
        let head = vpn & !(n - 1);
        let phead = pindex - (vpn - head);
        let action = t.defrag.action(v.hugepage_advice == Some(true));
        let (got, stall) = self.alloc_huge(o, action);
        let Some(pfn) = got else {
            self.thp.stats.fault_fallback += 1;
            return Ok((None, stall));
        };
        // The huge zero entry goes (`pmdp_huge_clear_flush`), the new THP takes its place in
        // the same page table: its pages become the object's, zero-filled.
        let bs = self.base_shift();
        self.note_allocation();
        self.procs
            .get_mut(&pid.0)
            .expect("huge_zero_wp: pid")
            .pmap
            .demote(head, o, SizeClass::BASE, 0);
        for i in 0..n {
            self.obj_insert(v.obj, phead + i, Pfn(pfn.0 + i));
            self.procs
                .get_mut(&pid.0)
                .expect("huge_zero_wp: pid")
                .pmap
                .replace(head + i, Pfn(pfn.0 + i), v.prot);
        }
        self.stats.faults.zero_fill += 1;
        self.stats.zeroed_bytes += n << bs;
        self.hw
            .tlb
            .invalidate_range(pid.0, head << bs, (head + n) << bs);
        // As a THP fault's, and the zero page's translation shot down.
        let cycles =
            self.thp_installed(pid, head, o, c, pfn) + self.machine.cost.tlb_invalidate_cycles;
        Ok((Some(cycles), stall))
    }
}
