//! Linux THPs after part of them is unmapped: the deferred split queue and its shrinker
//! (mm/huge_memory.c `deferred_split_folio`, `deferred_split_scan`, `thp_underused`;
//! docs/reference-policies.md section 2, "Deallocation" and "Underused shrinker").
//!
//! A THP allocated at a fault or by a collapse is one folio: its base pages are freed together.
//! When a program unmaps part of it (munmap, MADV_DONTNEED / MADV_FREE of less than the whole
//! 2MB), `zap_pte_range` -> `folio_remove_rmap_ptes` finds the folio partially mapped and
//! `deferred_split_folio` queues it: the unmapped pages stay allocated (the folio holds them)
//! until the queue's shrinker splits the folio under memory pressure (`shrink_slab` from kswapd
//! or direct reclaim; here the page daemon's wake and `reclaim_for_alloc`). When the last page
//! of a folio is unmapped the whole folio is freed at once. A page of a folio freed any other way
//! (eviction, migration, a collapse replacing it) splits the folio first, as `split_folio` before
//! those paths in Linux, and the queued pages are freed with it.
//!
//! Underused THPs (Linux 6.12, `shrink_underused`): every THP is queued when it is created
//! (`deferred_split_folio(folio, false)` in `__do_huge_pmd_anonymous_page` and
//! `collapse_huge_page`); the shrinker splits a fully mapped one whose zero-filled base pages
//! number more than `max_ptes_none` and frees those pages (Linux remaps them to the shared zero
//! page; here they are unmapped, so a later read faults in a fresh page: the model has no 4KB
//! zero page). `thp_underused` returns false while `max_ptes_none` is 511, Linux's default, so
//! the check only runs, and the per-page "written since zeroed" bits are only kept, when a
//! policy lowers it. A page counts as filled once written through any mapping, or copied in by a
//! collapse.
//!
//! What is freed while the folio is queued is not free memory: the footprint
//! (`Os::footprint_bytes`) counts it.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::Os;
use crate::units::{Order, Pfn};

/// Deferred split counters, under /proc/vmstat's names (`memory.thp.split`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct SplitStats {
    /// `thp_deferred_split_page`: THPs queued because part of them was unmapped.
    pub deferred_split_page: u64,
    /// `thp_split_page`: THPs the shrinker split (partially mapped and underused ones).
    pub split_page: u64,
    /// `thp_underused_split_page`: fully mapped THPs split because they were underused.
    pub underused_split_page: u64,
    /// Base pages the queue held that splits freed.
    pub split_freed_pages: u64,
    /// Zero-filled base pages underused splits unmapped and freed.
    pub underused_freed_pages: u64,
    /// THPs whose last mapped page was unmapped: the whole THP freed at once.
    pub freed_whole: u64,
    /// Shrinker runs (`deferred_split_scan`), each under memory pressure.
    pub shrinker_runs: u64,
    /// Base pages the queue holds now (unmapped, not yet freed), and at most.
    pub queued_pages: u64,
    pub queued_peak_pages: u64,
}

/// One THP folio: a naturally aligned block of `1 << order` frames.
#[derive(Clone, Debug, Default)]
struct Folio {
    /// Frames of the block still held by an object.
    held: u32,
    /// Frames no object holds any more, kept until the folio is split or freed.
    deferred: Vec<u32>,
    /// On the queue (`_deferred_list`).
    queued: bool,
    /// `folio_test_partially_mapped`.
    partial: bool,
    /// Underused check only: base pages written since zeroed, or copied in (bit per page).
    filled: Vec<u64>,
}

/// The THP folios of the system and the deferred split queue.
#[derive(Clone, Debug, Default)]
pub struct DeferredSplit {
    /// By head frame.
    folios: FxHashMap<u64, Folio>,
    queue: VecDeque<u64>,
    /// Set while a range is being unmapped (munmap, DONTNEED): frees there are deferred.
    pub(crate) unmapping: bool,
    /// Whether writes mark pages filled (the underused check runs).
    pub(crate) track_filled: bool,
}

impl Os {
    /// The order of THP folios, if this policy makes any.
    fn folio_order(&self) -> Option<u8> {
        self.thp_class().map(|(_, o)| o)
    }

    /// Whether the underused check can ever split a folio: the policy's `shrink_underused`
    /// and a `max_ptes_none` below `HPAGE_PMD_NR - 1`.
    pub(crate) fn underused_enabled(&self) -> bool {
        let (Some(t), Some(o)) = (self.policy.thp(), self.folio_order()) else {
            return false;
        };
        let n = 1u64 << o;
        t.shrink_underused && self.max_ptes_none(n) < n - 1
    }

    /// khugepaged's `max_ptes_none` for a THP of `n` base pages (Linux's sysfs value, which
    /// `thp_underused` reads whether khugepaged runs or not; `n - 1` without khugepaged here).
    fn max_ptes_none(&self, n: u64) -> u64 {
        self.policy
            .khugepaged
            .as_ref()
            .map_or(n - 1, |k| k.limits(n).max_ptes_none)
    }

    /// A THP was allocated at `head` and every frame of it is held: it becomes a folio. `copied`:
    /// base pages (offsets) a collapse copied in, which count as filled.
    pub(crate) fn folio_new(&mut self, head: Pfn, copied: &[u32]) {
        let Some(o) = self.folio_order() else {
            return;
        };
        let n = 1u32 << o;
        let underused = self.underused_enabled();
        self.thp.split.track_filled = underused;
        let mut f = Folio {
            held: n,
            ..Folio::default()
        };
        if underused {
            f.filled = vec![0; (n as usize).div_ceil(64)];
            for &i in copied {
                f.filled[i as usize / 64] |= 1 << (i % 64);
            }
            // `deferred_split_folio(folio, false)`: queued to be checked, not partially mapped.
            f.queued = true;
            self.thp.split.queue.push_back(head.0);
        }
        self.thp.split.folios.insert(head.0, f);
    }

    /// A write reached frame `pfn` through the slow path: under the underused check, its page
    /// is filled. While its folio has zero pages, the one-entry fast path (`Tlb::last`) is made
    /// to refuse writes so that the next write to another of its pages comes back here (as
    /// vm/dirty.rs does): a cost paid only when the check is on.
    #[cold]
    #[inline(never)]
    pub(crate) fn note_filled(&mut self, pfn: u64) {
        let Some(o) = self.folio_order() else {
            return;
        };
        let head = pfn & !((1u64 << o) - 1);
        if let Some(f) = self.thp.split.folios.get_mut(&head) {
            let i = (pfn - head) as usize;
            if let Some(w) = f.filled.get_mut(i / 64) {
                *w |= 1 << (i % 64);
            }
            if f.filled.iter().any(|&w| w != u64::MAX) {
                self.hw.tlb.last.write_ok = false;
            }
        }
    }

    /// Deallocation of `pfn`, which no object holds any more: if it belongs to a folio, the
    /// folio decides. Returns true when the frame was dealt with (kept on the queue, or freed
    /// with its whole folio); false when the caller frees it as a single frame (after the
    /// folio, if any, was split).
    pub(crate) fn folio_release(&mut self, pfn: Pfn) -> bool {
        if self.thp.split.folios.is_empty() {
            return false;
        }
        let Some(o) = self.folio_order() else {
            return false;
        };
        let head = pfn.0 & !((1u64 << o) - 1);
        let unmapping = self.thp.split.unmapping;
        let Some(f) = self.thp.split.folios.get_mut(&head) else {
            return false;
        };
        if !unmapping {
            // Eviction, migration, a collapse: split first, then free this page alone.
            self.split_folio(head);
            return false;
        }
        f.held -= 1;
        if f.held == 0 {
            // The last mapped page: `folio_put` frees the whole folio, queued pages included.
            let f = self
                .thp
                .split
                .folios
                .remove(&head)
                .expect("folio_release: folio");
            self.thp.stats.split.queued_pages -= f.deferred.len() as u64;
            self.thp.stats.split.freed_whole += 1;
            self.free_extent(Pfn(head), Order(o));
            return true;
        }
        f.deferred.push((pfn.0 - head) as u32);
        self.thp.stats.split.queued_pages += 1;
        self.thp.stats.split.queued_peak_pages = self
            .thp
            .stats
            .split
            .queued_peak_pages
            .max(self.thp.stats.split.queued_pages);
        if !f.partial {
            // `deferred_split_folio(folio, true)`.
            f.partial = true;
            self.thp.stats.split.deferred_split_page += 1;
            if !f.queued {
                f.queued = true;
                self.thp.split.queue.push_back(head);
            }
        }
        true
    }

    /// `split_folio`: the folio at `head` becomes independent base pages; the pages the queue
    /// held are freed. Returns the cycles: `unmap_folio` and `remap_page` rewrite each mapped
    /// page's entry (two writes), one TLB shootdown.
    fn split_folio(&mut self, head: u64) -> u64 {
        let Some(f) = self.thp.split.folios.remove(&head) else {
            return 0;
        };
        for &i in &f.deferred {
            self.free_extent(Pfn(head + i as u64), Order(0));
        }
        let freed = f.deferred.len() as u64;
        self.thp.stats.split.queued_pages -= freed;
        self.thp.stats.split.split_freed_pages += freed;
        self.thp.stats.split.split_page += 1;
        let c = &self.machine.cost;
        2 * f.held as u64 * c.pte_write_cycles + c.tlb_invalidate_cycles
    }

    /// `deferred_split_scan`, run under memory pressure: splits every queued partially mapped
    /// folio, and every underused one; the other queued folios leave the queue. Returns (frames
    /// freed, cycles).
    pub(crate) fn deferred_split_scan(&mut self) -> (u64, u64) {
        if self.thp.split.queue.is_empty() {
            return (0, 0);
        }
        self.thp.stats.split.shrinker_runs += 1;
        let Some(o) = self.folio_order() else {
            return (0, 0);
        };
        let n = 1u64 << o;
        let max_none = self.max_ptes_none(n);
        let before = self.phys.buddy.free_frames;
        let mut cycles = 0;
        while let Some(head) = self.thp.split.queue.pop_front() {
            let Some(f) = self.thp.split.folios.get_mut(&head) else {
                continue; // freed whole since it was queued
            };
            f.queued = false;
            if f.partial {
                cycles += self.split_folio(head);
                continue;
            }
            // `thp_underused`: more zero-filled pages than max_ptes_none (never at 511).
            let zero: Vec<u64> = (0..n)
                .filter(|&i| {
                    f.filled
                        .get(i as usize / 64)
                        .is_some_and(|w| w >> (i % 64) & 1 == 0)
                })
                .collect();
            if max_none >= n - 1 || f.filled.is_empty() || zero.len() as u64 <= max_none {
                continue;
            }
            cycles += self.split_folio(head);
            self.thp.stats.split.underused_split_page += 1;
            cycles += self.free_zero_pages(head, &zero);
        }
        (self.phys.buddy.free_frames - before, cycles)
    }

    /// After an underused folio at `head` was split: unmaps its zero-filled pages (offsets
    /// `zero`) from every process and takes them from their objects, freeing them.
    fn free_zero_pages(&mut self, head: u64, zero: &[u64]) -> u64 {
        let rmap = self.rmap();
        let mut cycles = 0;
        for &i in zero {
            let pfn = Pfn(head + i);
            let Some((obj, pindex)) = self.pageq.owner(pfn) else {
                continue;
            };
            if self.phys.refs(pfn) != 1 {
                continue; // shared after a fork: Linux's split remaps only exclusive pages
            }
            let maps = self.mappings(&rmap, pfn);
            let (_, c) = self.unmap_all(&maps);
            cycles += c;
            if self.obj_remove(obj, pindex).is_some() {
                self.thp.stats.split.underused_freed_pages += 1;
            }
        }
        cycles
    }

    /// Invariants of the folios: each queued page is neither free nor held, each folio's held
    /// count is its frames held by objects, and the queue's page count is their sum.
    pub(crate) fn check_folios(&self) -> crate::error::Result<()> {
        let Some(o) = self.folio_order() else {
            return Ok(());
        };
        let n = 1u64 << o;
        let mut queued = 0u64;
        for (&head, f) in &self.thp.split.folios {
            let held = (head..head + n)
                .filter(|&p| self.phys.refs(Pfn(p)) > 0)
                .count() as u64;
            crate::ensure_inv!(
                held == f.held as u64 && held + f.deferred.len() as u64 == n,
                "THP folio at frame {head}: {} held by objects, {} counted, {} queued, of {n}",
                held,
                f.held,
                f.deferred.len()
            );
            for &i in &f.deferred {
                let p = Pfn(head + i as u64);
                crate::ensure_inv!(
                    !self.phys.buddy.is_free(p) && self.phys.refs(p) == 0,
                    "THP folio at frame {head}: queued page {} is free or held",
                    p.0
                );
            }
            queued += f.deferred.len() as u64;
        }
        crate::ensure_inv!(
            queued == self.thp.stats.split.queued_pages,
            "deferred split queue: {queued} pages queued, {} counted",
            self.thp.stats.split.queued_pages
        );
        Ok(())
    }
}
