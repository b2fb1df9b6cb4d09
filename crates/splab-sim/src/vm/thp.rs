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
//! Not modelled (each a knob of Linux's that stays at a value the model can say it has):
//! - direct reclaim for a THP (`defrag=always`): only compaction.
//! - `use_zero_page`: a read fault allocates as a write does (Linux's `use_zero_page=0`); the
//!   huge zero page is not modelled.
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
use crate::units::{Pfn, Pid, SizeClass};

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
    /// The deferred split queue and the underused shrinker (vm/deferred_split.rs).
    pub split: super::deferred_split::SplitStats,
    /// mTHP sizes that faults tried, smallest first (vm/mthp.rs); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mthp: Vec<super::mthp::MthpStats>,
}

/// THP state of the OS: counters and khugepaged's cursor.
#[derive(Clone, Debug, Default)]
pub struct ThpState {
    pub stats: ThpStats,
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

    /// `do_huge_pmd_anonymous_page`: tries to allocate, zero and map the THP around `vpn`
    /// (object page `pindex`) of `pid`. Returns the cycles of the mapping if it did (None: the
    /// fault takes the base-page path), and the cycles direct compaction stalled the fault
    /// either way (vm/compact.rs).
    pub(crate) fn thp_fault(
        &mut self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pindex: u64,
    ) -> Result<(Option<u64>, u64)> {
        let Some(defrag) = self.policy.thp().map(|t| t.defrag) else {
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
        // The free lists, then what `defrag` says for this entry (VM_HUGEPAGE: advised).
        let action = defrag.action(v.hugepage_advice == Some(true));
        let (got, stall) = self.alloc_huge(o, action);
        let Some(pfn) = got else {
            self.thp.stats.fault_fallback += 1;
            return Ok((None, stall));
        };
        self.map_new_block(pid, v, (head, phead), pfn, n)?;
        let p = self.procs.get_mut(&pid.0).expect("thp_fault: pid");
        p.pmap.promote(head, o, SizeClass(c));
        // The PMD is made dirty at once (`pmd_mkdirty` in `__do_huge_pmd_anonymous_page`).
        p.pmap.touch(head, o, true);
        self.folio_new(pfn, &[]);
        self.thp.stats.fault_alloc += 1;
        // `clear_huge_page` zeroes the new page at the machine's rate for a superpage cleared
        // at a fault (`huge_zero_page_cycles`: 4KB at a time in Linux 4.3, in bulk on the 6.18
        // guest calibrate measured); one PMD entry (every base entry where PTEs are replicated).
        let writes = if self.machine.replicated_ptes { n } else { 1 };
        let cycles = n * self.machine.cost.huge_zero_page_cycles
            + writes * self.machine.cost.pte_write_cycles;
        Ok((Some(cycles), stall))
    }
}
