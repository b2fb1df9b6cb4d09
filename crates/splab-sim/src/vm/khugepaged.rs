//! khugepaged's scan and collapse (mm/khugepaged.c; docs/reference-policies.md section 2), run
//! by daemon/khugepaged.rs on the simulated clock.
//!
//! A wake (`khugepaged_do_scan`) spends `pages_to_scan` base entries of budget, one aligned
//! THP-sized region at a time, round robin over the processes' map entries that may hold THPs
//! (`Os::thp_eligible`) from where the last wake stopped; each region costs a whole region of
//! budget (`khugepaged_scan_mm_slot` adds `HPAGE_PMD_NR` per PMD). A region already mapped by a
//! THP (or by the huge zero page) is passed over. Otherwise (`hpage_collapse_scan_pmd`) it is refused when more of its
//! entries are empty (or map the 4KB zero page) than `max_ptes_none`, any page is on swap (more than `max_ptes_swap` in
//! Linux, which swaps the others in first: not modelled), more pages are shared with another
//! process than `max_ptes_shared`, no entry is young (accessed), or none is writable; then
//! (`collapse_huge_page`) out of place: a THP-sized block is allocated (on failure the daemon
//! sleeps `alloc_sleep_millisecs`), the present pages are copied into it and the empty ones
//! zeroed, the old pages are freed, and the region is mapped by one entry, dirty.
//!
//! With `max_ptes_none = 511` a region with one page touched is collapsed: this is what
//! re-bloats memory a program gave back with MADV_DONTNEED (seed 003 Table 10). Scanning itself
//! costs no cycles here (no source for its per-entry cost); copies, zeroing, the entry write
//! and the TLB shootdown are charged, to the background account.

use super::thp::ThpStats;
use super::{Os, Vma};
use crate::policy::{DefragAction, KhugepagedLimits};
use crate::units::{Pfn, Pid, SizeClass};

/// What scanning one region came to.
enum Outcome {
    /// Collapsed, at this many cycles.
    Collapsed(u64),
    /// Not collapsed (counted in `ThpStats` by reason), or already a THP.
    Passed,
    /// No free THP-sized block, after this many cycles of compaction: the daemon sleeps
    /// `alloc_sleep_millisecs`.
    AllocFailed(u64),
}

impl Os {
    /// One wake of khugepaged. Returns the cycles of its collapses and whether an allocation
    /// failed (then it sleeps `alloc_sleep_millisecs` rather than `scan_sleep_millisecs`).
    pub(crate) fn khugepaged_scan(&mut self) -> (u64, bool) {
        let Some(k) = self.policy.khugepaged.clone() else {
            return (0, false);
        };
        let Some((_, o)) = self.thp_class() else {
            return (0, false);
        };
        let n = 1u64 << o;
        let k = k.limits(n);
        let mut budget = k.pages_to_scan;
        let mut cycles = 0;
        // `khugepaged_do_scan`'s `pass_through_head`: a wake passes the head of the list at
        // most once more after it starts (a wake that starts there makes one pass at most).
        let mut through_head = 0;
        while budget > 0 {
            if self.thp.cursor == (0, 0) {
                through_head += 1;
                if through_head > 1 {
                    break;
                }
            }
            let Some((pid, head, v)) = self.next_thp_region(self.thp.cursor) else {
                // The end of the last process: a full scan, if this pass found any region.
                if self.thp.cursor != (0, 0) {
                    self.thp.stats.full_scans += 1;
                }
                self.thp.cursor = (0, 0);
                continue;
            };
            budget = budget.saturating_sub(n);
            self.thp.stats.pages_scanned += n;
            self.thp.cursor = (pid.0, head + n);
            match self.collapse_region(pid, head, &v, Some(&k)) {
                Outcome::Collapsed(c) => cycles += c,
                Outcome::Passed => {}
                Outcome::AllocFailed(c) => return (cycles + c, true),
            }
        }
        (cycles, false)
    }

    /// The first THP-sized aligned region at or after `from` = (pid, vpn) inside a map entry
    /// that may hold THPs, in (pid, address) order.
    fn next_thp_region(&self, from: (u32, u64)) -> Option<(Pid, u64, Vma)> {
        let (_, o) = self.thp_class()?;
        let n = 1u64 << o;
        let bs = self.base_shift();
        for p in self.procs.values().filter(|p| p.pid.0 >= from.0) {
            let lo = if p.pid.0 == from.0 { from.1 } else { 0 };
            for v in p.vmas.values() {
                if (v.end >> bs) <= lo || !self.thp_eligible(p, v) {
                    continue;
                }
                let head = ((v.start >> bs).max(lo) + n - 1) & !(n - 1);
                if (head + n) << bs <= v.end {
                    return Some((p.pid, head, v.clone()));
                }
            }
        }
        None
    }

    /// MADV_COLLAPSE (Linux 6.1, `madvise_collapse`): a synchronous collapse of every aligned
    /// THP-sized region of `[start, end)` (base page numbers) inside the map entries that lie
    /// there, at the caller's expense, whatever `enabled` says but not where MADV_NOHUGEPAGE
    /// was given: no `max_ptes_*` limits and no referenced page needed. Returns the cycles,
    /// charged to the caller as kernel work.
    pub(crate) fn madv_collapse(&mut self, pid: Pid, start: u64, end: u64) -> u64 {
        let Some((_, o)) = self.thp_class() else {
            return 0;
        };
        let n = 1u64 << o;
        let bs = self.base_shift();
        let Some(p) = self.procs.get(&pid.0).filter(|p| !p.thp_disabled) else {
            return 0; // no process, or THP disabled for it by prctl
        };
        let mut regions = Vec::new();
        for v in p.vmas.values() {
            let (lo, hi) = ((v.start >> bs).max(start), (v.end >> bs).min(end));
            if lo >= hi || v.hugepage_advice == Some(false) {
                continue;
            }
            let mut head = (lo + n - 1) & !(n - 1);
            while head + n <= hi {
                regions.push((head, v.clone()));
                head += n;
            }
        }
        let mut cycles = 0;
        for (head, v) in regions {
            match self.collapse_region(pid, head, &v, None) {
                Outcome::Collapsed(c) => {
                    cycles += c;
                    self.thp.stats.madv_collapsed += 1;
                }
                Outcome::AllocFailed(c) => cycles += c,
                Outcome::Passed => {}
            }
        }
        cycles
    }

    /// `hpage_collapse_scan_pmd` and `collapse_huge_page` on the region at `head` of `pid`:
    /// khugepaged's with its `limits`, MADV_COLLAPSE's with None (no `max_ptes_none` or
    /// `max_ptes_shared`, no referenced page needed: `cc->is_khugepaged` false).
    fn collapse_region(
        &mut self,
        pid: Pid,
        head: u64,
        v: &Vma,
        limits: Option<&KhugepagedLimits>,
    ) -> Outcome {
        if limits.is_none() && !(v.private() && v.shadow.is_none() && !v.needs_copy) {
            return Outcome::Passed; // MADV_COLLAPSE: anonymous private memory only, here
        }
        let (c, o) = self.thp_class().expect("khugepaged: THP policy");
        let n = 1u64 << o;
        let bs = self.base_shift();
        let ph = v.pgoff + (((head << bs) - v.start) >> bs);
        let obj = v.obj;
        let Some(p) = self.procs.get(&pid.0) else {
            return Outcome::Passed;
        };
        if p.pmap.lookup(head).is_some_and(|e| e.size().0 == c) {
            return Outcome::Passed; // SCAN_PMD_MAPPED
        }
        let (mut none, mut swap, mut shared, mut young, mut writable) =
            (0u64, 0u64, 0u64, 0u64, false);
        let mut other = false;
        for i in 0..n {
            let resident = self.obj(obj).pages.get(ph + i);
            match p.pmap.lookup(head + i) {
                None if resident.is_some() => other = true, // resident, not mapped
                None if self.backing.on_swap(obj, ph + i) => swap += 1,
                None => none += 1,
                // `hpage_collapse_scan_pmd`: an entry of the 4KB zero page counts as none
                // (`pte_none(pteval) || is_zero_pfn(pte_pfn(pteval))`).
                Some(e) if e.size().is_base() && self.is_zero_pfn(e.pfn()) => none += 1,
                Some(e) => {
                    if !e.size().is_base() || resident != Some(e.pfn()) {
                        other = true; // another superpage, or not this object's page
                        continue;
                    }
                    if self.phys.refs(e.pfn()) > 1 {
                        shared += 1;
                    }
                    young += e.accessed() as u64;
                    writable |= e.prot().writable();
                    other |= self
                        .reserv
                        .as_ref()
                        .is_some_and(|rs| rs.of_frame(e.pfn()).is_some());
                }
            }
        }
        let st: &mut ThpStats = &mut self.thp.stats;
        let k = limits.copied().unwrap_or(KhugepagedLimits {
            pages_to_scan: 0,
            max_ptes_none: n,
            max_ptes_swap: 0,
            max_ptes_shared: n,
        });
        if none > k.max_ptes_none {
            st.scan_fail_none += 1;
            return Outcome::Passed;
        }
        // Over `max_ptes_swap` Linux refuses; under it, it swaps the pages in first, which the
        // model does not: any page on swap refuses the region.
        if swap > k.max_ptes_swap || swap > 0 {
            st.scan_fail_swap += 1;
            return Outcome::Passed;
        }
        if shared > k.max_ptes_shared {
            st.scan_fail_shared += 1;
            return Outcome::Passed;
        }
        if other || !writable {
            st.scan_fail_other += 1;
            return Outcome::Passed;
        }
        if young == 0 && limits.is_some() {
            st.scan_fail_referenced += 1;
            return Outcome::Passed;
        }
        // Page-table pages cannot be missing where a page is mapped, but a region of more than
        // one chunk may lack some: attach them before the block is taken.
        if self.pmap_prepare(pid, head, n).is_err() {
            self.thp.stats.scan_fail_other += 1;
            return Outcome::Passed;
        }
        // khugepaged's `defrag=1` default and MADV_COLLAPSE both allocate with
        // `GFP_TRANSHUGE`: direct compaction, synchronous-light after an asynchronous pass
        // (vm/compact.rs `alloc_huge`).
        let (got, compaction) = self.alloc_huge(o, DefragAction::Direct { noretry: false });
        let Some(new) = got else {
            self.thp.stats.collapse_alloc_failed += 1;
            return Outcome::AllocFailed(compaction);
        };
        self.note_allocation();
        self.thp.stats.collapse_alloc += 1;
        let (mut copied, mut zeroed) = (0u64, 0u64);
        let mut copied_at = Vec::new();
        for i in 0..n {
            let to = Pfn(new.0 + i);
            if self.obj(obj).pages.get(ph + i).is_some() {
                self.obj_remove(obj, ph + i);
                self.obj_insert(obj, ph + i, to);
                self.procs
                    .get_mut(&pid.0)
                    .expect("khugepaged: pid")
                    .pmap
                    .replace(head + i, to, v.prot);
                copied += 1;
                copied_at.push(i as u32);
            } else {
                self.obj_insert(obj, ph + i, to);
                let p = self.procs.get_mut(&pid.0).expect("khugepaged: pid");
                if p.pmap.lookup(head + i).is_some() {
                    // A 4KB zero page entry (`__collapse_huge_page_copy` clears the page).
                    p.pmap.replace(head + i, to, v.prot);
                } else {
                    self.pmap_enter(pid, head + i, to, v.prot)
                        .expect("khugepaged: page tables attached above");
                }
                zeroed += 1;
            }
        }
        let p = self.procs.get_mut(&pid.0).expect("khugepaged: pid");
        p.pmap.promote(head, o, SizeClass(c));
        p.pmap.touch(head, o, true);
        self.folio_new(new, &copied_at);
        self.hw
            .tlb
            .invalidate_range(pid.0, head << bs, (head + n) << bs);
        let st = &mut self.thp.stats;
        st.pages_collapsed += limits.is_some() as u64;
        st.collapse_copied += copied;
        st.collapse_zeroed += zeroed;
        self.stats.zeroed_bytes += zeroed * self.machine.base_size();
        self.stats.copied_bytes += copied * self.machine.base_size();
        let cost = &self.machine.cost;
        let writes = self.machine.superpage_entry_writes(n);
        Outcome::Collapsed(
            compaction
                + copied * cost.copy_page_cycles
                + zeroed * cost.zero_page_cycles
                + writes * cost.pte_write_cycles
                + cost.tlb_invalidate_cycles,
        )
    }
}
