//! Pageblock skip bits (`PG_migrate_skip`, mm/compaction.c; used by vm/compact.rs): a bit per
//! pageblock that makes both compaction scanners pass the block over (`isolation_suitable`),
//! set where a scan found nothing worth coming back for and cleared only by
//! `__reset_isolation_suitable`. Two eras, by `Policy::pageblock_skip`:
//!
//! - `unisolated` (Linux 3.7 to 5.0; read in 4.3): `update_pageblock_skip` marks a block when a
//!   scanner's call scanned it to its end and isolated nothing in that call, and moves the cached
//!   scanner position to the first pfn of that call (the migrate scanner's up, the free
//!   scanner's down); nothing else moves the migrate scanner's cache. The reset clears every
//!   bit and puts the scanners back at the zone's ends; `compact_zone` runs it when
//!   `compaction_restarting` (the longest deferral used up), kswapd when it goes to sleep after
//!   the scanners of a compaction met (`compact_blockskip_flush`, set then and cleared when
//!   the allocation after a direct compaction succeeds).
//! - `scanned` (Linux 5.1 and later): the migrate scanner also marks a block as it starts
//!   isolating from it (`test_and_set_skip`), checks the bit only at a block's start, and the
//!   free scanner marks every block it scanned to the end, whatever it isolated. Only a
//!   direct compaction's meeting sets the flush flag, and every reset needs it. The reset keeps
//!   blocks a THP covers marked (`pageblock_skip_persistent`), clears a block only if a sample
//!   of every eighth page shows an LRU page (for the migrate scanner) or a free one (for the
//!   free scanner), and starts the scanners at the first and last blocks it cleared
//!   (`__reset_isolation_pfn`).
//!
//! Proactive compaction ignores the bits (`ignore_skip_hint`, `proactive_compact_node`).
//!
//! Not modelled: kswapd (not modelled at all), so the reset at its sleep never runs; in the runs
//! `--frag` measures no order-0 shortage would wake it, and a 4.3 THP fault never does
//! (`GFP_TRANSHUGE` has `__GFP_NO_KSWAPD`). The fast searches that consult the bits in 5.1+
//! (`fast_find_migrateblock`, `fast_isolate_freepages`) are not modelled either (vm/compact.rs).
//! The reset's own walk over the pageblocks is not charged.

use serde::Serialize;

use super::Os;
use crate::policy::PageblockSkip;
use crate::units::Pfn;

/// Skip-bit counters (`memory.compaction.pageblock_skip`; docs/report.schema.json).
#[derive(Clone, Debug, Default, Serialize)]
pub struct SkipStats {
    /// Pageblocks marked by the migrate scanner and by the free scanner.
    pub migrate_marked: u64,
    pub free_marked: u64,
    /// Pageblocks a scanner passed over for their bit (`isolation_suitable` false).
    pub migrate_passed: u64,
    pub free_passed: u64,
    /// Times the scanners met with the flush flag set (`compact_blockskip_flush`).
    pub flush_set: u64,
    /// `__reset_isolation_suitable` runs (from `compact_zone`, `compaction_restarting`), and
    /// the bits they cleared.
    pub resets: u64,
    pub cleared: u64,
}

/// The zone's skip bits and flags.
#[derive(Clone, Debug, Default)]
pub struct SkipBits {
    /// One bit per pageblock.
    words: Vec<u64>,
    /// `compact_blockskip_flush`.
    pub blockskip_flush: bool,
    /// `compact_init_migrate_pfn` (5.1+): where the reset started the migrate scanner; a
    /// compaction starting at or below it covers the whole zone.
    pub init_migrate: u64,
}

impl SkipBits {
    fn get(&self, block: u64) -> bool {
        self.words
            .get((block / 64) as usize)
            .is_some_and(|w| w >> (block % 64) & 1 == 1)
    }

    /// Sets the bit; true if it was clear.
    fn set(&mut self, block: u64) -> bool {
        let i = (block / 64) as usize;
        if self.words.len() <= i {
            self.words.resize(i + 1, 0);
        }
        let was = self.words[i] >> (block % 64) & 1 == 1;
        self.words[i] |= 1 << (block % 64);
        !was
    }

    /// Clears the bit; true if it was set.
    fn clear(&mut self, block: u64) -> bool {
        let was = self.get(block);
        if let Some(w) = self.words.get_mut((block / 64) as usize) {
            *w &= !(1 << (block % 64));
        }
        was
    }

    /// Pageblocks marked now.
    pub fn count(&self) -> u64 {
        self.words.iter().map(|w| w.count_ones() as u64).sum()
    }
}

impl Os {
    /// `get_pageblock_skip` of the pageblock of `pfn`.
    pub fn pageblock_skipped(&self, pfn: u64) -> bool {
        self.compact.skip.get(pfn >> self.hpage_order())
    }

    /// `isolation_suitable`: whether a scanner may scan the pageblock of `pfn` (always with the
    /// bits off or ignored).
    pub(crate) fn isolation_suitable(&self, ignore_skip_hint: bool, pfn: u64) -> bool {
        ignore_skip_hint
            || self.policy.pageblock_skip == PageblockSkip::Off
            || !self.pageblock_skipped(pfn)
    }

    /// `set_pageblock_skip` by the migrate (`migrate`) or the free scanner; counts a new mark.
    pub(crate) fn set_pageblock_skip(&mut self, pfn: u64, migrate: bool) {
        let block = pfn >> self.hpage_order();
        if self.compact.skip.set(block) {
            let st = &mut self.compact.stats.pageblock_skip;
            if migrate {
                st.migrate_marked += 1;
            } else {
                st.free_marked += 1;
            }
        }
    }

    /// A scanner passed a block over for its bit.
    pub(crate) fn count_skip_pass(&mut self, migrate: bool) {
        let st = &mut self.compact.stats.pageblock_skip;
        if migrate {
            st.migrate_passed += 1;
        } else {
            st.free_passed += 1;
        }
    }

    /// `__compact_finished` when the scanners met: Linux 4.3 sets `compact_blockskip_flush`
    /// unless kswapd compacts (the model has no kswapd: always); 5.1+ only for a direct
    /// compaction.
    pub(crate) fn skip_scanners_met(&mut self, direct: bool) {
        let set = match self.policy.pageblock_skip {
            PageblockSkip::Off => false,
            PageblockSkip::Unisolated => true,
            PageblockSkip::Scanned => direct,
        };
        if set {
            self.compact.skip.blockskip_flush = true;
            self.compact.stats.pageblock_skip.flush_set += 1;
        }
    }

    /// `compaction_restarting`: the order failed before and the longest deferral is used up.
    fn compaction_restarting(&self, order: u8) -> bool {
        let z = &self.compact;
        order >= z.order_failed
            && z.defer_shift == super::compact::COMPACT_MAX_DEFER_SHIFT
            && z.considered >= 1u64 << z.defer_shift
    }

    /// `compact_zone`'s reset before a compaction for `order` (not proactive): Linux 4.3
    /// clears every bit when `compaction_restarting` (mm/compaction.c `compact_zone`); 5.1+
    /// does the same test, and its reset then needs the flush flag.
    pub(crate) fn skip_reset_if_restarting(&mut self, order: u8) {
        if self.policy.pageblock_skip != PageblockSkip::Off && self.compaction_restarting(order) {
            self.reset_isolation_suitable();
        }
    }

    /// `__reset_isolation_suitable` as the era has it.
    pub(crate) fn reset_isolation_suitable(&mut self) {
        let pb = self.hpage_order();
        let frames = self.phys.frames();
        match self.policy.pageblock_skip {
            PageblockSkip::Off => {}
            PageblockSkip::Unisolated => {
                // Linux 4.3: clear every pageblock's bit, then `reset_cached_positions`.
                let z = &mut self.compact;
                z.skip.blockskip_flush = false;
                let n = z.skip.count();
                z.skip.words.clear();
                z.stats.pageblock_skip.resets += 1;
                z.stats.pageblock_skip.cleared += n;
                z.cached_migrate = [0, 0];
                z.cached_free = super::compact::pb_start(frames - 1, pb);
            }
            PageblockSkip::Scanned => self.reset_isolation_suitable_sampled(pb, frames),
        }
    }

    /// Linux 5.1+ `__reset_isolation_suitable`: only with `compact_blockskip_flush`; walks the
    /// zone from both ends at once, a block from the low end checked as a migration source
    /// and one from the high end as a target, and moves the cached scanners to the first
    /// source and the last target it cleared (or to where the walk ended if none).
    fn reset_isolation_suitable_sampled(&mut self, pb: u8, frames: u64) {
        if !self.compact.skip.blockskip_flush {
            return;
        }
        self.compact.skip.blockskip_flush = false;
        self.compact.stats.pageblock_skip.resets += 1;
        let rmap = self.rmap();
        let n = 1u64 << pb;
        let mut migrate_pfn = 0u64;
        let mut free_pfn = frames - 1;
        let (mut reset_migrate, mut reset_free) = (free_pfn, migrate_pfn);
        let (mut source_set, mut free_set) = (false, false);
        while migrate_pfn < free_pfn {
            if self.reset_isolation_pfn(&rmap, migrate_pfn, true, source_set, pb)
                && migrate_pfn < reset_migrate
            {
                source_set = true;
                reset_migrate = migrate_pfn;
                self.compact.skip.init_migrate = migrate_pfn;
                self.compact.cached_migrate = [migrate_pfn, migrate_pfn];
            }
            if self.reset_isolation_pfn(&rmap, free_pfn, free_set, true, pb)
                && free_pfn > reset_free
            {
                free_set = true;
                reset_free = free_pfn;
                self.compact.cached_free = free_pfn;
            }
            migrate_pfn += n;
            free_pfn = free_pfn.saturating_sub(n);
        }
        if reset_migrate >= reset_free {
            self.compact.cached_migrate = [migrate_pfn, migrate_pfn];
            self.compact.cached_free = free_pfn;
        }
    }

    /// Linux 5.1+ `__reset_isolation_pfn` for the pageblock of `pfn`: true if the block may be
    /// a scanner's starting point (its bit cleared, or already clear when both checks are
    /// asked).
    fn reset_isolation_pfn(
        &mut self,
        rmap: &rustc_hash::FxHashMap<u32, Vec<(crate::units::Pid, u64, u64, u64)>>,
        pfn: u64,
        check_source: bool,
        check_target: bool,
        pb: u8,
    ) -> bool {
        // `pageblock_skip_persistent`: a compound page of at least the pageblock's order.
        if self.compound_order_at(rmap, pfn).is_some_and(|o| o >= pb) {
            return false;
        }
        if check_source && check_target && !self.pageblock_skipped(pfn) {
            return true;
        }
        if !check_source && check_target && !self.movable_pageblock(pfn) {
            return false;
        }
        let start = super::compact::pb_start(pfn, pb);
        let end = (start + (1u64 << pb)).min(self.phys.frames());
        // Sampled every `1 << PAGE_ALLOC_COSTLY_ORDER` pages.
        let mut p = start;
        while p < end {
            let lru = check_source && self.lru_page(p);
            let buddy = check_target
                && self
                    .phys
                    .buddy
                    .free_block_of(Pfn(p))
                    .is_some_and(|(h, _)| h.0 == p);
            if lru || buddy {
                if self.compact.skip.clear(start >> pb) {
                    self.compact.stats.pageblock_skip.cleared += 1;
                }
                return true;
            }
            p += 8;
        }
        false
    }

    /// `PageLRU`: a user page some object holds.
    fn lru_page(&self, pfn: u64) -> bool {
        self.phys.refs(Pfn(pfn)) > 0 && !self.pageq.holders(Pfn(pfn)).is_empty()
    }
}
