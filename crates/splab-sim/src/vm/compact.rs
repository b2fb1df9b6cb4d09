//! Linux memory compaction (mm/compaction.c; docs/reference-policies.md section 2): page
//! migration that makes free THP-sized blocks. Used by THP faults as `defrag` says (vm/thp.rs),
//! by khugepaged's and MADV_COLLAPSE's allocations (vm/khugepaged.rs), and by kcompactd
//! (daemon/kcompactd.rs).
//!
//! `compact_zone`: a migrate scanner walks pageblocks up from the low end isolating movable
//! pages (at most `COMPACT_CLUSTER_MAX` at a time), a free scanner walks down from the high end
//! isolating free pages; each page is copied to a free one and every mapping of it rewritten,
//! until a free block of the order exists (`compact_finished`) or the scanners meet. Positions
//! are cached between runs and reset when the scanners meet. No run when free memory is under
//! the low watermark plus twice the request or the failure is not fragmentation's
//! (`compaction_suitable`), nor while deferred after failures (`defer_compaction`).
//! With `Policy::skip_on_failure` (not in 4.3; 4.6), asynchronous direct compaction
//! gives a block up at its first page it cannot isolate (`skip_on_failure`); synchronous-light
//! (kcompactd, khugepaged, MADV_HUGEPAGE) migrates what it can.
//!
//! Pageblock skip bits and the cached-position rules of their era are vm/compact_skip.rs
//! (`Policy::pageblock_skip`); with them off the scanners' positions follow Linux 5.x's
//! `update_cached_migrate` and every pageblock is scanned.
//!
//! Movable: a page some object holds, not busy in the current fault. Unmovable: frames no
//! object holds (page tables, u-areas, kernel and wired frames), reservations' frames, and
//! pages a superpage maps (THP migration is not modelled).
//!
//! Costs (hw/machine.rs `CostConfig`): `copy_page_cycles` per page and the rest of
//! `migrate_pages`' work on it (the machine's `migrate_page_kernel_ns`, a measured time each
//! preset's `[cost]` source gives), `pte_write_cycles` +
//! `tlb_invalidate_cycles` per mapping rewritten; and each pfn the scanners visit (a free chunk
//! passed over by its order is one visit, as in Linux's loops): `MIGRATE_SCAN_VISIT_CYCLES` and
//! `FREE_SCAN_VISIT_CYCLES`, measured (docs/constants.md section 7); and each `check_drain`
//! drain of the per-CPU pagevecs and free lists after the migrate scanner leaves a block it
//! migrated from (`DRAIN_CYCLES`, its fixed part, measured the same way).
//!
//! Mobility grouping (`Policy::mobility_grouping`, phys/buddy.rs): asynchronous compaction
//! migrates only from MOVABLE pageblocks, and every compaction only into free pages of MOVABLE
//! ones (Linux 4.3 `isolate_migratepages`, `suitable_migration_target`). A free block of a
//! pageblock or more in any pageblock still ends it (`__compact_finished`; for an order under
//! the pageblock's Linux wants it on the MOVABLE lists, not modelled).
//!
//! Each pfn visit that reads a `struct page` also loads its line through the caches
//! (vm/memmap.rs): a cold one costs its miss. The migrate scanner's looks at a pageblock's skip
//! bit or migratetype read the pageblock bitmap, not a struct page, and are not loads here.
//!
//! Not modelled: the fast searches
//! (`fast_find_migrateblock`, `fast_isolate_freepages`), per-CPU lists (a migrated page's
//! frame is freed to the buddy lists at once; `check_drain` is charged), lock contention,
//! direct reclaim, several zones. Under `dirty=hash` a migrated page's digest stays with the
//! old frame: its next write-out is not skipped (conservative).

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::pageq::{F_BUSY, F_DIRTY};
use super::Os;
use crate::policy::{DefragAction, PageblockSkip};
use crate::units::{Order, Pfn, Pid};

/// `COMPACT_CLUSTER_MAX` (= `SWAP_CLUSTER_MAX`, include/linux/swap.h): pages isolated per batch.
pub const COMPACT_CLUSTER_MAX: usize = 32;
/// `COMPACT_MAX_DEFER_SHIFT`: compaction is skipped at most 1 << 6 times after failures.
pub const COMPACT_MAX_DEFER_SHIFT: u32 = 6;
/// `HPAGE_FRAG_CHECK_INTERVAL_MSEC`: kcompactd's proactive check interval.
pub const FRAG_CHECK_INTERVAL_MS: u64 = 500;
/// Cycles per pfn the migrate scanner visits: Linux 4.3 mm/compaction.c
/// `isolate_migratepages_block`'s loop body (the abort check every `SWAP_CLUSTER_MAX` pfns,
/// `PageBuddy` with the skip of a free chunk by its order, `PageLRU`, `PageCompound`, the
/// `page_count` / `page_mapcount` test) over 64-byte struct pages: 24.1 x86-64 instructions a
/// visit (scripts/kernel-ops.c `op_migrate_scan`, callgrind, on the pageblocks `--frag` leaves),
/// at docs/constants.md 7's one instruction a cycle. Isolation itself (the lru lock,
/// `__isolate_lru_page`) is not in it.
pub const MIGRATE_SCAN_VISIT_CYCLES: u64 = 24;
/// Cycles per pfn the free scanner visits: `isolate_freepages_block`'s loop body (the abort
/// check and `PageBuddy`; a free chunk is taken and passed over): 14.6 instructions a visit
/// (`op_free_scan`, as above).
pub const FREE_SCAN_VISIT_CYCLES: u64 = 15;
/// Cycles of one drain of `compact_zone`'s `check_drain` step (Linux 4.3 mm/compaction.c:
/// once the migrate scanner has left the order-aligned block it last migrated from,
/// `lru_add_drain_cpu` and `drain_local_pages`, so that the pages migration freed, held by
/// the per-CPU LRU pagevec and the per-CPU free lists, reach the buddy lists and merge): the
/// fixed part, 130 x86-64 instructions (scripts/kernel-ops.c `op_drain_2_8` /
/// `op_drain_4_16`, callgrind: 300 and 470 instructions a call, 2 x 300 - 470), at docs/
/// constants.md 7's one instruction a cycle; the same on this host, warm, 63-119 TSC cycles
/// (three runs). The per-page part (each freed page onto and off the LRU, to the per-CPU list
/// and into the buddy lists) is work every migrated page does whether a drain or a full
/// pagevec or per-CPU list frees it, and is inside the machine's `migrate_page_kernel_ns`,
/// whose measurements (`compact_memory`, order -1, or `move_pages`: no `check_drain`) freed
/// their pages that way.
pub const DRAIN_CYCLES: u64 = 130;
/// `PAGE_ALLOC_COSTLY_ORDER` (include/linux/mmzone.h).
const COSTLY_ORDER: u8 = 3;
/// `sysctl_extfrag_threshold` (mm/compaction.c).
const EXTFRAG_THRESHOLD: i64 = 500;
/// `watermark_scale_factor` (mm/page_alloc.c), in 1/10000 of memory.
const WATERMARK_SCALE_FACTOR: u64 = 10;

/// Compaction counters under /proc/vmstat's names (`memory.compaction`; described in
/// docs/report.schema.json). Pages are base pages.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CompactStats {
    /// Direct compactions waited for (a deferred one included, as `__alloc_pages_direct_compact`
    /// counts it), and whether the allocation then found a block.
    pub compact_stall: u64,
    pub compact_success: u64,
    pub compact_fail: u64,
    pub compact_migrate_scanned: u64,
    pub compact_free_scanned: u64,
    pub compact_isolated: u64,
    /// Pfns the two scanners visited (a free chunk passed over by its order, or a superpage,
    /// is one visit), each charged `MIGRATE_SCAN_VISIT_CYCLES` / `FREE_SCAN_VISIT_CYCLES`.
    pub compact_migrate_visits: u64,
    pub compact_free_visits: u64,
    pub pgmigrate_success: u64,
    /// `check_drain`'s drains of the per-CPU pagevecs and free lists (Linux 4.3
    /// `compact_zone`), each charged `DRAIN_CYCLES`.
    pub compact_drains: u64,
    /// kcompactd's on-demand runs and its share of the scanned pages.
    pub compact_daemon_wake: u64,
    pub compact_daemon_migrate_scanned: u64,
    pub compact_daemon_free_scanned: u64,
    /// Direct compactions not run: deferred (`compaction_deferred`), or not suitable.
    pub deferred: u64,
    pub skipped: u64,
    /// kcompactd's proactive runs, and those after which the score had not gone down.
    pub proactive_runs: u64,
    pub proactive_no_progress: u64,
    /// Cycles of direct compaction (in the allocating fault's, MADV_COLLAPSE's or khugepaged's)
    /// and of kcompactd (background).
    pub direct_cycles: u64,
    pub daemon_cycles: u64,
    /// Pageblock skip bits (vm/compact_skip.rs).
    pub pageblock_skip: super::compact_skip::SkipStats,
    /// The scanners' struct-page reads through the caches (vm/memmap.rs); absent when the
    /// scanners visited nothing.
    #[serde(skip_serializing_if = "super::memmap::MemmapStats::is_empty")]
    pub memmap: super::memmap::MemmapStats,
}

/// The zone's compaction state (`struct zone`'s compact_* fields) and kcompactd's requests.
#[derive(Clone, Debug)]
pub struct CompactState {
    pub stats: CompactStats,
    /// `compact_cached_migrate_pfn[async, sync]` and `compact_cached_free_pfn`.
    pub(crate) cached_migrate: [u64; 2],
    pub(crate) cached_free: u64,
    /// `compact_considered`, `compact_defer_shift`, `compact_order_failed`.
    pub(crate) considered: u64,
    pub(crate) defer_shift: u32,
    pub(crate) order_failed: u8,
    /// Pageblock skip bits (vm/compact_skip.rs).
    pub(crate) skip: super::compact_skip::SkipBits,
    /// `kcompactd_max_order` (0: no request), and whether `wakeup_kcompactd` woke it.
    pub kcompactd_order: u8,
    pub kcompactd_woken: bool,
    /// Frames the page allocator managed at boot (Linux sizes its watermarks from them); 0
    /// until the engine sets it (then all of memory).
    pub managed: u64,
    /// Pages moved since the engine last looked (the incremental check then checks all).
    pub ran: bool,
}

impl Default for CompactState {
    fn default() -> Self {
        CompactState {
            stats: CompactStats::default(),
            cached_migrate: [0, 0],
            // Out of range: `compact_zone` resets it to the last pageblock.
            cached_free: u64::MAX,
            considered: 0,
            defer_shift: 0,
            order_failed: 0,
            skip: Default::default(),
            kcompactd_order: 0,
            kcompactd_woken: false,
            managed: 0,
            ran: false,
        }
    }
}

/// `enum migrate_mode`: asynchronous or synchronous-light.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Async,
    SyncLight,
}

/// `enum compact_result`, the outcomes the model has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactResult {
    Skipped,
    Deferred,
    Continue,
    Complete,
    PartialSkipped,
    Contended,
    Success,
}

/// `struct compact_control`.
struct Cc {
    /// None: not for an allocation (proactive compaction's `order = -1`).
    order: Option<u8>,
    mode: Mode,
    direct: bool,
    whole_zone: bool,
    proactive: bool,
    /// `ignore_skip_hint` (proactive compaction's).
    ignore_skip_hint: bool,
    migrate_pfn: u64,
    free_pfn: u64,
    migratepages: Vec<Pfn>,
    freepages: Vec<Pfn>,
    finish_pageblock: bool,
    migrate_scanned: u64,
    free_scanned: u64,
    migrate_visits: u64,
    free_visits: u64,
    cycles: u64,
}

/// What the migrate scanner finds at a frame.
enum Frame {
    /// Free, in a free block that ends at this frame.
    Free(u64),
    Movable,
    /// Mapped by a superpage whose block starts at this frame and has this order.
    Compound(u64, u8),
    Unmovable,
}

type Rmap = FxHashMap<u32, Vec<(Pid, u64, u64, u64)>>;

impl Os {
    /// `COMPACTION_HPAGE_ORDER` and `pageblock_order`: the THP's order (the smallest
    /// superpage's without THP), at most the buddy allocator's largest.
    pub(crate) fn hpage_order(&self) -> u8 {
        let o = self
            .thp_class()
            .map(|(_, o)| o)
            .or_else(|| self.orders.get(1).copied())
            .unwrap_or(0);
        o.min(self.phys.buddy.max_order())
    }

    /// The zone's (min, low, high) watermarks in frames: mm/page_alloc.c
    /// `calculate_min_free_kbytes` (`int_sqrt(lowmem_kbytes * 16)`, clamped to 128..262144)
    /// and `__setup_per_zone_wmarks` (low and high a quarter of min, or
    /// `watermark_scale_factor`/10000 of memory, apart).
    pub fn watermarks(&self) -> (u64, u64, u64) {
        let managed = if self.compact.managed > 0 {
            self.compact.managed
        } else {
            self.phys.frames()
        };
        let kb = (self.machine.base_size() >> 10).max(1);
        let min_free_kb = isqrt(managed * kb * 16).clamp(128, 262_144);
        let min = min_free_kb / kb;
        let tmp = (min / 4).max(managed * WATERMARK_SCALE_FACTOR / 10_000);
        (min, min + tmp, min + 2 * tmp)
    }

    /// `zone_watermark_ok`: after an allocation of `order`, more than `mark` frames stay free,
    /// and a free block of that order exists.
    fn watermark_ok(&self, order: u8, mark: u64) -> bool {
        let free = self.phys.buddy.free_frames;
        free.saturating_sub((1u64 << order) - 1) > mark
            && self
                .phys
                .buddy
                .largest_free_order()
                .is_some_and(|o| o >= order)
    }

    /// mm/vmstat.c `fill_contig_page_info`: (free blocks, free pages, free blocks of `order`).
    fn contig_info(&self, order: u8) -> (u64, u64, u64) {
        let b = &self.phys.buddy;
        let (mut blocks, mut pages) = (0, 0);
        for (o, &n) in b.free_blocks.iter().enumerate() {
            blocks += n;
            pages += n << o;
        }
        (blocks, pages, self.free_blocks(order))
    }

    /// mm/vmstat.c `__fragmentation_index`: -1000 if a block of `order` is free, else towards 0
    /// when a failure is for lack of memory, towards 1000 when for fragmentation.
    pub fn fragmentation_index(&self, order: u8) -> i64 {
        let (blocks, pages, suitable) = self.contig_info(order);
        if blocks == 0 {
            return 0;
        }
        if suitable > 0 {
            return -1000;
        }
        1000 - ((1000 + pages * 1000 / (1u64 << order)) / blocks) as i64
    }

    /// mm/compaction.c `fragmentation_score_node` (one zone: `fragmentation_score_zone_weighted`
    /// of `extfrag_for_order` at `COMPACTION_HPAGE_ORDER`): the percentage of free memory not
    /// in free blocks of the THP's order, scaled by present / (present + 1).
    pub fn fragmentation_score(&self) -> u64 {
        let o = self.hpage_order();
        let (_, pages, suitable) = self.contig_info(o);
        let zone = ((pages - (suitable << o)) * 100)
            .checked_div(pages)
            .unwrap_or(0);
        let present = self.phys.frames();
        present * zone / (present + 1)
    }

    /// `fragmentation_score_wmark`: the low mark (proactive compaction stops under it) and the
    /// high one (it starts over it).
    fn score_wmarks(&self) -> (u64, u64) {
        let p = self
            .policy
            .kcompactd
            .as_ref()
            .map_or(0, |k| k.proactiveness);
        let low = 100u64.saturating_sub(p).max(5);
        (low, (low + 10).min(100))
    }

    /// `should_proactive_compact_node` (kswapd is not modelled: never running).
    pub fn should_proactive_compact(&self) -> bool {
        let p = self
            .policy
            .kcompactd
            .as_ref()
            .map_or(0, |k| k.proactiveness);
        p > 0 && self.fragmentation_score() > self.score_wmarks().1
    }

    /// `compaction_suitable`: free memory above the low watermark plus `compact_gap` (twice the
    /// request), and for costly orders a failure due to fragmentation (index over
    /// `sysctl_extfrag_threshold`).
    fn compaction_suitable(&self, order: u8) -> bool {
        let (_, low, _) = self.watermarks();
        let mark = if order > COSTLY_ORDER {
            low
        } else {
            self.watermarks().0
        };
        if self.phys.buddy.free_frames <= mark + (2u64 << order) {
            return false;
        }
        if order > COSTLY_ORDER {
            let fi = self.fragmentation_index(order);
            if (0..=EXTFRAG_THRESHOLD).contains(&fi) {
                return false;
            }
        }
        true
    }

    /// `compaction_deferred`: whether this attempt is skipped (counting it).
    fn compaction_deferred(&mut self, order: u8) -> bool {
        let z = &mut self.compact;
        if order < z.order_failed {
            return false;
        }
        let limit = 1u64 << z.defer_shift;
        z.considered += 1;
        if z.considered >= limit {
            z.considered = limit;
            return false;
        }
        true
    }

    /// `defer_compaction`: after a failure, skip the next 1 << shift attempts.
    fn defer_compaction(&mut self, order: u8) {
        let z = &mut self.compact;
        z.considered = 0;
        z.defer_shift = (z.defer_shift + 1).min(COMPACT_MAX_DEFER_SHIFT);
        z.order_failed = z.order_failed.min(order);
    }

    /// `compaction_defer_reset`.
    fn compaction_defer_reset(&mut self, order: u8, alloc_success: bool) {
        let z = &mut self.compact;
        if alloc_success {
            z.considered = 0;
            z.defer_shift = 0;
        }
        if order >= z.order_failed {
            z.order_failed = order + 1;
        }
    }

    /// An allocation of an aligned block of `order` (a THP, or khugepaged's / MADV_COLLAPSE's
    /// target) as the page allocator makes it with the gfp mask `action` stands for
    /// (`vma_thp_gfp_mask`): the free lists, then (`__alloc_pages_slowpath`, a costly order)
    /// direct compaction, asynchronous first (`INIT_COMPACT_PRIORITY`); under `__GFP_NORETRY`
    /// nothing more after a skipped or deferred one, else a second one (after direct reclaim,
    /// not modelled), asynchronous again under NORETRY, else synchronous-light
    /// (`DEF_COMPACT_PRIORITY`); then failure (costly orders are not retried). `Wake` wakes
    /// kcompactd and fails. Returns the block and the cycles compaction took.
    pub(crate) fn alloc_huge(&mut self, order: u8, action: DefragAction) -> (Option<Pfn>, u64) {
        if let Some(p) = self.phys.buddy.alloc(Order(order)) {
            return (Some(p), 0);
        }
        match action {
            DefragAction::Fail => (None, 0),
            DefragAction::Wake => {
                self.wakeup_kcompactd(order);
                (None, 0)
            }
            DefragAction::Direct { noretry } => {
                let (p, r, c) = self.direct_compact(order, Mode::Async);
                if p.is_some()
                    || (noretry && matches!(r, CompactResult::Skipped | CompactResult::Deferred))
                {
                    return (p, c);
                }
                let mode = if noretry {
                    Mode::Async
                } else {
                    Mode::SyncLight
                };
                let (p, _, c2) = self.direct_compact(order, mode);
                (p, c + c2)
            }
        }
    }

    /// `__alloc_pages_direct_compact` with `try_to_compact_pages` on the one zone: returns the
    /// block allocated after compaction, the result, and the cycles.
    fn direct_compact(&mut self, order: u8, mode: Mode) -> (Option<Pfn>, CompactResult, u64) {
        let (r, c) = if self.compaction_deferred(order) {
            self.compact.stats.deferred += 1;
            (CompactResult::Deferred, 0)
        } else {
            let (r, c) = self.compact_zone(Some(order), mode, true, false);
            if r == CompactResult::Success {
                self.compaction_defer_reset(order, false);
            } else if mode != Mode::Async
                && matches!(r, CompactResult::Complete | CompactResult::PartialSkipped)
            {
                self.defer_compaction(order);
            }
            (r, c)
        };
        self.compact.stats.direct_cycles += c;
        if r == CompactResult::Skipped {
            self.compact.stats.skipped += 1;
            return (None, r, c);
        }
        self.compact.stats.compact_stall += 1;
        let p = self.phys.buddy.alloc(Order(order));
        if p.is_some() {
            // Linux 4.3 mm/page_alloc.c `__alloc_pages_direct_compact`: the allocation
            // succeeded, so the skip bits are not flushed.
            self.compact.skip.blockskip_flush = false;
            self.compaction_defer_reset(order, true);
            self.compact.stats.compact_success += 1;
        } else {
            self.compact.stats.compact_fail += 1;
        }
        (p, r, c)
    }

    /// `wakeup_kcompactd`: records the order and wakes kcompactd if compaction could help now
    /// (`kcompactd_node_suitable`); otherwise it does the work at its next timeout.
    pub(crate) fn wakeup_kcompactd(&mut self, order: u8) {
        if order == 0 || self.policy.kcompactd.is_none() {
            return;
        }
        self.compact.kcompactd_order = self.compact.kcompactd_order.max(order);
        let (min, _, _) = self.watermarks();
        if !self.watermark_ok(order, min) && self.compaction_suitable(order) {
            self.compact.kcompactd_woken = true;
        }
    }

    /// `kcompactd_do_work`: synchronous-light compaction for the requested order unless
    /// deferred, already satisfiable or not suitable. Returns its cycles.
    pub(crate) fn kcompactd_do_work(&mut self) -> u64 {
        let order = self.compact.kcompactd_order;
        self.compact.kcompactd_order = 0;
        self.compact.kcompactd_woken = false;
        self.compact.stats.compact_daemon_wake += 1;
        let (min, _, _) = self.watermarks();
        if self.compaction_deferred(order)
            || self.watermark_ok(order, min)
            || !self.compaction_suitable(order)
        {
            return 0;
        }
        let (r, c) = self.compact_zone(Some(order), Mode::SyncLight, false, false);
        if r == CompactResult::Success {
            self.compaction_defer_reset(order, false);
        } else if matches!(r, CompactResult::Complete | CompactResult::PartialSkipped) {
            self.defer_compaction(order);
        }
        self.compact.stats.daemon_cycles += c;
        c
    }

    /// `proactive_compact_node`: synchronous-light compaction of the whole zone until the
    /// fragmentation score is under the low mark or the scanners meet. Returns the cycles and
    /// whether the score went down (else kcompactd waits 64 intervals).
    pub(crate) fn proactive_compact(&mut self) -> (u64, bool) {
        let before = self.fragmentation_score();
        self.compact.stats.proactive_runs += 1;
        let (_, c) = self.compact_zone(None, Mode::SyncLight, false, true);
        self.compact.stats.daemon_cycles += c;
        let progress = self.fragmentation_score() < before;
        self.compact.stats.proactive_no_progress += !progress as u64;
        (c, progress)
    }

    /// `compact_zone` (with `compact_zone_order`'s control): one run of the two scanners.
    /// `order` None: proactive compaction (`order = -1`, the whole zone). Returns the result
    /// and the cycles of the migrations.
    fn compact_zone(
        &mut self,
        order: Option<u8>,
        mode: Mode,
        direct: bool,
        proactive: bool,
    ) -> (CompactResult, u64) {
        if let Some(o) = order {
            // Allocation can already succeed (the slow path's ALLOC_WMARK_MIN).
            if self.watermark_ok(o, self.watermarks().0) {
                return (CompactResult::Success, 0);
            }
            if !self.compaction_suitable(o) {
                return (CompactResult::Skipped, 0);
            }
            // Linux 4.3 mm/compaction.c `compact_zone`: clear the skip bits when compaction
            // restarts after the longest deferral.
            self.skip_reset_if_restarting(o);
        }
        let era = self.policy.pageblock_skip;
        let pb = self.hpage_order();
        let frames = self.phys.frames();
        let last_block = pb_start(frames - 1, pb);
        let sync = (mode != Mode::Async) as usize;
        let z = &mut self.compact;
        if z.cached_free >= frames {
            z.cached_free = last_block;
        }
        let mut cc = Cc {
            order,
            mode,
            direct,
            whole_zone: proactive,
            proactive,
            ignore_skip_hint: proactive,
            migrate_pfn: 0,
            free_pfn: last_block,
            migratepages: Vec::new(),
            freepages: Vec::new(),
            finish_pageblock: false,
            migrate_scanned: 0,
            free_scanned: 0,
            migrate_visits: 0,
            free_visits: 0,
            cycles: 0,
        };
        if !proactive {
            cc.migrate_pfn = z.cached_migrate[sync];
            cc.free_pfn = z.cached_free;
            // `compact_init_migrate_pfn`: the zone's start unless a 5.1+ reset moved it.
            cc.whole_zone = cc.migrate_pfn <= z.skip.init_migrate;
        }
        // Keeping the async cache in step with the sync one while nothing is isolated
        // (`update_cached`) is a later kernel's; 4.3 has only `update_pageblock_skip`'s updates.
        let mut update_cached = era != PageblockSkip::Unisolated
            && !sync_of(mode)
            && z.cached_migrate[0] == z.cached_migrate[1];
        let rmap = self.rmap();
        let mut last_migrated: Option<u64> = None;
        // Linux 4.3 `compact_zone`'s `last_migrated_pfn`: where the first isolation since the
        // last drain started (its 0, "none", is None here: the model's zone starts at pfn 0).
        let mut last_migrated_pfn: Option<u64> = None;
        let ret = loop {
            let r = self.compact_finished(&mut cc, pb);
            if r != CompactResult::Continue {
                break r;
            }
            let start = cc.migrate_pfn;
            // `finish_pageblock` (a later kernel's rescan of a block migrated from) is not in
            // 4.3's `compact_zone`.
            cc.finish_pageblock = era != PageblockSkip::Unisolated
                && last_migrated.is_some_and(|l| pb_start(l, pb) == pb_start(start, pb));
            if !self.isolate_migratepages(&mut cc, &rmap, pb) {
                if update_cached {
                    self.compact.cached_migrate[1] = self.compact.cached_migrate[0];
                }
                // ISOLATE_NONE jumps to the drain check too: an earlier batch's pages may wait.
                self.check_drain(&mut cc, &mut last_migrated_pfn);
                continue;
            }
            update_cached = false;
            last_migrated = Some(pb_start(cc.migrate_pfn - 1, pb));
            // `migrate_pages` with `compaction_alloc`: -ENOMEM when no free page is left.
            let pages = std::mem::take(&mut cc.migratepages);
            let mut enomem = false;
            for old in pages {
                if cc.freepages.is_empty() {
                    self.isolate_freepages(&mut cc, pb);
                }
                let Some(new) = cc.freepages.pop() else {
                    enomem = true; // the rest are put back
                    break;
                };
                cc.cycles += self.migrate_page(&rmap, old, new);
            }
            if enomem && cc.free_pfn >> pb > cc.migrate_pfn >> pb {
                break CompactResult::Contended;
            }
            // Linux 4.3 `compact_zone`: the pfn this iteration's isolation started from,
            // unless one is already waiting for a drain.
            last_migrated_pfn.get_or_insert(start);
            self.check_drain(&mut cc, &mut last_migrated_pfn);
        };
        // `release_freepages`: the unused free pages go back; the cached free scanner position
        // moves up to the highest of them ("only go back, not forward").
        if let Some(high) = cc.freepages.iter().map(|p| p.0).max() {
            let h = pb_start(high, pb);
            if h > self.compact.cached_free {
                self.compact.cached_free = h;
            }
        }
        for p in std::mem::take(&mut cc.freepages) {
            self.free_extent(p, Order(0));
        }
        // The scanners' own work (Linux 4.3 `isolate_migratepages_block`,
        // `isolate_freepages_block`): per pfn visited.
        cc.cycles +=
            cc.migrate_visits * MIGRATE_SCAN_VISIT_CYCLES + cc.free_visits * FREE_SCAN_VISIT_CYCLES;
        let st = &mut self.compact.stats;
        st.compact_migrate_visits += cc.migrate_visits;
        st.compact_free_visits += cc.free_visits;
        st.compact_migrate_scanned += cc.migrate_scanned;
        st.compact_free_scanned += cc.free_scanned;
        if !cc.direct {
            st.compact_daemon_migrate_scanned += cc.migrate_scanned;
            st.compact_daemon_free_scanned += cc.free_scanned;
        }
        (ret, cc.cycles)
    }

    /// Linux 4.3 mm/compaction.c `compact_zone`: `check_drain`. For an allocation's order, once
    /// the migrate scanner has left the order-aligned block holding `last_migrated_pfn`,
    /// `lru_add_drain_cpu` + `drain_local_pages` put the pages migration freed into the buddy
    /// lists, so that they merge before `compact_finished` looks: `DRAIN_CYCLES`. Here a
    /// migrated page's frame is freed into the buddy lists at once (per-CPU lists are not
    /// modelled), which is what the drain makes of it before the next `compact_finished`.
    /// Without the drain that check would run first only while the scanner is still inside
    /// the block, where "always finish scanning a pageblock" holds it back for the pageblock
    /// order THP requests use.
    fn check_drain(&mut self, cc: &mut Cc, last_migrated_pfn: &mut Option<u64>) {
        let (Some(order), Some(last)) = (cc.order, *last_migrated_pfn) else {
            return;
        };
        // `block_start_pfn(cc->migrate_pfn, cc->order)`.
        if order > 0 && last < blk_start(cc.migrate_pfn, order) {
            cc.cycles += DRAIN_CYCLES;
            self.compact.stats.compact_drains += 1;
            // Nothing to drain until pages are migrated again.
            *last_migrated_pfn = None;
        }
    }

    /// `__compact_finished`.
    fn compact_finished(&mut self, cc: &mut Cc, pb: u8) -> CompactResult {
        if cc.free_pfn >> pb <= cc.migrate_pfn >> pb {
            // `reset_cached_positions`: the next run starts anew.
            let z = &mut self.compact;
            z.cached_migrate = [0, 0];
            z.cached_free = pb_start(self.phys.frames() - 1, pb);
            // "Mark that the PG_migrate_skip information should be cleared".
            self.skip_scanners_met(cc.direct);
            return if cc.whole_zone {
                CompactResult::Complete
            } else {
                CompactResult::PartialSkipped
            };
        }
        if cc.proactive {
            return if self.fragmentation_score() > self.score_wmarks().0 {
                CompactResult::Continue
            } else {
                CompactResult::Success
            };
        }
        let Some(order) = cc.order else {
            return CompactResult::Continue;
        };
        // Always finish scanning a pageblock.
        if cc.migrate_pfn & ((1u64 << pb) - 1) != 0 {
            return CompactResult::Continue;
        }
        if self
            .phys
            .buddy
            .largest_free_order()
            .is_some_and(|o| o >= order)
        {
            return CompactResult::Success;
        }
        CompactResult::Continue
    }

    /// `isolate_migratepages`: isolates from the first pageblock at the migrate scanner below
    /// the free scanner (one block, or `COMPACT_CLUSTER_MAX` pages of it). True if it isolated
    /// any page.
    fn isolate_migratepages(&mut self, cc: &mut Cc, rmap: &Rmap, pb: u8) -> bool {
        let mut low = cc.migrate_pfn;
        let mut end = pb_end(low, pb);
        let era = self.policy.pageblock_skip;
        while end <= cc.free_pfn {
            // Linux 4.3 mm/compaction.c `isolate_migratepages`: "If isolation recently
            // failed, do not retry" (`isolation_suitable`, at any pfn the scanner resumes
            // at); 5.1+ looks only at a block's start.
            let look = match era {
                PageblockSkip::Off => false,
                PageblockSkip::Unisolated => true,
                PageblockSkip::Scanned => low & ((1u64 << pb) - 1) == 0,
            };
            if look && !self.isolation_suitable(cc.ignore_skip_hint, low) {
                cc.migrate_visits += 1;
                self.count_skip_pass(true);
            } else if cc.mode == Mode::Async && !self.movable_block(low) {
                // Asynchronous compaction passes over pageblocks that are not MOVABLE
                // (`migrate_async_suitable`; modern kernels' `suitable_migration_source` does
                // the same for a movable request in asynchronous direct compaction, the only
                // asynchronous compaction here). One look at each.
                cc.migrate_visits += 1;
            } else {
                break;
            }
            low = end;
            end = pb_end(low, pb);
        }
        cc.migrate_pfn = low;
        if end <= cc.free_pfn {
            self.isolate_migratepages_block(cc, rmap, low, end, pb);
        }
        !cc.migratepages.is_empty()
    }

    /// `isolate_migratepages_block` over `[low, end)`, within one pageblock.
    fn isolate_migratepages_block(&mut self, cc: &mut Cc, rmap: &Rmap, low: u64, end: u64, pb: u8) {
        // `skip_on_failure`: Linux 4.6+ (4.3's `isolate_migratepages_block` has no such
        // case: it isolates every movable page of the block).
        let skip_on_failure = self.policy.skip_on_failure && cc.direct && cc.mode == Mode::Async;
        let era = self.policy.pageblock_skip;
        // `valid_page` in 5.1+: the block's first page, when the scan starts there (a scan
        // resumed inside the block neither checks nor marks); `skip_updated`: marked already.
        let valid = low & ((1u64 << pb) - 1) == 0;
        let mut skip_updated = false;
        // The request's order-aligned block (the pageblock's, for a THP).
        let ord = cc.order.unwrap_or(pb);
        let mut next_skip = if skip_on_failure {
            blk_end(low, ord)
        } else {
            0
        };
        let (mut scanned, mut isolated) = (0u64, 0u64);
        let mut f = low;
        while f < end {
            if skip_on_failure && f >= next_skip {
                if isolated > 0 {
                    break;
                }
                next_skip = blk_end(f, ord);
            }
            scanned += 1;
            cc.migrate_visits += 1;
            cc.cycles += self.memmap_read(f);
            let failed = match self.classify(rmap, Pfn(f)) {
                Frame::Free(block_end) => {
                    let to = block_end.min(end);
                    scanned += to - f - 1;
                    f = to;
                    continue;
                }
                Frame::Movable => {
                    // Linux 5.1+ `test_and_set_skip` as the lru lock is first taken for the
                    // block: mark it now (it was checked clear), "so other compaction instances
                    // do not scan the same block".
                    if era == PageblockSkip::Scanned
                        && valid
                        && !skip_updated
                        && !cc.ignore_skip_hint
                    {
                        skip_updated = true;
                        self.set_pageblock_skip(low, true);
                    }
                    cc.migratepages.push(Pfn(f));
                    isolated += 1;
                    if cc.migratepages.len() >= COMPACT_CLUSTER_MAX && !cc.finish_pageblock {
                        f += 1;
                        break;
                    }
                    false
                }
                Frame::Compound(head, o) => {
                    let to = (head + (1u64 << o)).min(end);
                    scanned += to - f - 1;
                    f = to - 1;
                    true
                }
                Frame::Unmovable => true,
            };
            if failed && skip_on_failure {
                // "We cannot form the cc->order buddy page anyway": put the isolated pages
                // back and skip to the end of the order-aligned block.
                cc.migratepages.clear();
                isolated = 0;
                if f < next_skip {
                    f = next_skip - 1;
                    next_skip += 1u64 << ord;
                }
            }
            f += 1;
        }
        let f = f.min(end);
        if era == PageblockSkip::Unisolated {
            // Linux 4.3 `update_pageblock_skip` (migrate scanner): a call that scanned to the
            // block's end and isolated nothing marks it and moves the cached position up to its
            // first pfn (`valid_page`); nothing else moves it.
            if f == end && isolated == 0 && !cc.ignore_skip_hint {
                self.set_pageblock_skip(low, true);
                let z = &mut self.compact;
                z.cached_migrate[0] = z.cached_migrate[0].max(low);
                if cc.mode != Mode::Async {
                    z.cached_migrate[1] = z.cached_migrate[1].max(low);
                }
            }
        } else if f == end && (isolated == 0 || cc.finish_pageblock) {
            // Linux 5.1+: mark the block if `test_and_set_skip` did not.
            if era == PageblockSkip::Scanned && valid && !skip_updated && !cc.ignore_skip_hint {
                self.set_pageblock_skip(low, true);
            }
            // `update_cached_migrate` (its `pageblock_end_pfn` of an aligned pfn is the next
            // block's end).
            let p = pb_end(f, pb);
            let z = &mut self.compact;
            z.cached_migrate[0] = z.cached_migrate[0].max(p);
            if cc.mode != Mode::Async {
                z.cached_migrate[1] = z.cached_migrate[1].max(p);
            }
        }
        cc.migrate_scanned += scanned;
        self.compact.stats.compact_isolated += isolated;
        cc.migrate_pfn = f;
    }

    /// Whether the pageblock of `pfn` is MOVABLE (always, without mobility grouping).
    fn movable_block(&self, pfn: u64) -> bool {
        self.phys.buddy.pageblock_mt(Pfn(pfn)) == crate::phys::buddy::MT_MOVABLE
    }

    /// `movable_block` for vm/compact_skip.rs (`get_pageblock_migratetype` is MOVABLE).
    pub(crate) fn movable_pageblock(&self, pfn: u64) -> bool {
        self.movable_block(pfn)
    }

    /// The order of the superpage mapping frame `pfn`, if one does (`PageCompound`).
    pub(crate) fn compound_order_at(&self, rmap: &Rmap, pfn: u64) -> Option<u8> {
        match self.classify(rmap, Pfn(pfn)) {
            Frame::Compound(_, o) => Some(o),
            _ => None,
        }
    }

    /// What the migrate scanner makes of frame `pfn`.
    fn classify(&self, rmap: &Rmap, pfn: Pfn) -> Frame {
        if let Some((h, o)) = self.phys.buddy.free_block_of(pfn) {
            // Skipped whole. (Linux meets a block at its head; frees here coalesce at once, so
            // the scanner may resume inside one.)
            return Frame::Free(h.0 + o.pages());
        }
        if self.phys.refs(pfn) == 0
            || self.pageq.flag(pfn, F_BUSY)
            || self
                .reserv
                .as_ref()
                .is_some_and(|rs| rs.of_frame(pfn).is_some())
        {
            return Frame::Unmovable;
        }
        for (obj, pindex) in self.pageq.holders(pfn) {
            for (pid, vpn) in self.page_maps(rmap, obj, pindex, pfn) {
                let pte = self.procs[&pid.0]
                    .pmap
                    .lookup(vpn)
                    .expect("page_maps: mapped");
                if !pte.size().is_base() {
                    let o = self.orders[pte.size().0 as usize];
                    return Frame::Compound(pfn.0 & !((1u64 << o) - 1), o);
                }
            }
        }
        Frame::Movable
    }

    /// `isolate_freepages`: walks pageblocks down from the free scanner, above the migrate
    /// scanner's block, isolating free blocks whole (split into base pages) until there are
    /// as many as pages to migrate. A pageblock that is one free block of at least the
    /// pageblock's order is passed over (`suitable_migration_target`), and isolation stops
    /// when it would take free memory under the min watermark (`__isolate_free_page`).
    fn isolate_freepages(&mut self, cc: &mut Cc, pb: u8) {
        let want = cc.migratepages.len().max(1);
        let low = pb_end(cc.migrate_pfn, pb);
        let mut start = cc.free_pfn;
        let mut block = pb_start(start, pb);
        let (min, _, _) = self.watermarks();
        while block >= low {
            let end = block + (1u64 << pb);
            // Linux 4.3 `suitable_migration_target`: not a free block of a pageblock or more,
            // and a MOVABLE pageblock (`migrate_async_suitable`, whatever the mode; so in
            // modern kernels, `is_migrate_movable`).
            let target = !self
                .phys
                .buddy
                .free_block_of(Pfn(block))
                .is_some_and(|(h, o)| h.0 == block && o.0 >= pb)
                && self.movable_block(block);
            let era = self.policy.pageblock_skip;
            if !target {
                // `suitable_migration_target` looked at the block's first page.
                cc.free_visits += 1;
                cc.cycles += self.memmap_read(block);
            } else if !self.isolation_suitable(cc.ignore_skip_hint, block) {
                // "If isolation recently failed, do not retry" (the same look, after
                // `suitable_migration_target` read the page).
                cc.free_visits += 1;
                cc.cycles += self.memmap_read(block);
                self.count_skip_pass(false);
            } else {
                let mut f = start;
                let mut got = 0u64;
                let mut stopped = false;
                while f < end {
                    cc.free_scanned += 1;
                    cc.free_visits += 1;
                    cc.cycles += self.memmap_read(f);
                    match self.phys.buddy.free_block_of(Pfn(f)) {
                        Some((h, o)) if h.0 == f => {
                            let n = 1u64 << o.0;
                            if self.phys.buddy.free_frames < min + n + 1 {
                                stopped = true;
                                break;
                            }
                            let ok = self.phys.buddy.alloc_at(h, o);
                            debug_assert!(ok, "isolate_freepages: a free block");
                            cc.freepages.extend((f..f + n).rev().map(Pfn));
                            cc.free_scanned += n - 1;
                            got += n;
                            self.compact.stats.compact_isolated += n;
                            f += n;
                            if cc.freepages.len() >= want {
                                break;
                            }
                        }
                        _ => f += 1,
                    }
                }
                let first = start;
                start = f;
                if f >= end && era == PageblockSkip::Unisolated {
                    // Linux 4.3 `update_pageblock_skip` (free scanner): a call that scanned to
                    // the block's end and isolated nothing marks it, and the cached position
                    // moves down to the call's first pfn (`valid_page`).
                    if got == 0 && !cc.ignore_skip_hint {
                        self.set_pageblock_skip(block, false);
                        if first < self.compact.cached_free {
                            self.compact.cached_free = first;
                        }
                    }
                } else if f >= end {
                    // Linux 5.1+ `update_pageblock_skip`: every block scanned to its end is
                    // marked, and the cached position moves below it.
                    if era == PageblockSkip::Scanned && !cc.ignore_skip_hint {
                        self.set_pageblock_skip(block, false);
                    }
                    let below = block.saturating_sub(1u64 << pb);
                    if below < self.compact.cached_free {
                        self.compact.cached_free = below;
                    }
                }
                if cc.freepages.len() >= want {
                    if start >= end {
                        start = block.saturating_sub(1u64 << pb);
                    }
                    break;
                }
                if stopped {
                    break;
                }
            }
            match block.checked_sub(1u64 << pb) {
                Some(b) => {
                    block = b;
                    start = b;
                }
                None => break,
            }
        }
        cc.free_pfn = start;
    }

    /// `migrate_folio` of one isolated page into the free page `new`: every holder's object
    /// page and every mapping move to `new` (protection, accessed and dirty bits kept, the TLB
    /// entry shot down), the page keeps its queue, activity and dirty flag, and `old` is freed.
    /// Returns the cycles: the kernel's work around the copy (the machine's
    /// `migrate_page_kernel_ns`), one page copy, and a PTE write and TLB invalidation per
    /// mapping.
    fn migrate_page(&mut self, rmap: &Rmap, old: Pfn, new: Pfn) -> u64 {
        let holders = self.pageq.holders(old);
        let queue = self.pageq.queue_of(old);
        let act = self.pageq.act(old);
        let dirty = self.pageq.flag(old, F_DIRTY);
        let mut maps = Vec::new();
        for &(obj, pindex) in &holders {
            maps.extend(self.page_maps(rmap, obj, pindex, old));
        }
        for &(obj, pindex) in &holders {
            self.obj_remove(obj, pindex);
            self.obj_insert(obj, pindex, new);
        }
        self.pageq.move_to(new, queue);
        self.pageq.set_act(new, act);
        self.pageq.set_flag(new, F_DIRTY, dirty);
        self.pageq.set_flag(new, F_BUSY, false);
        let bs = self.base_shift();
        for &(pid, vpn) in &maps {
            let p = self.procs.get_mut(&pid.0).expect("migrate_page: pid");
            p.pmap.migrate(vpn, new);
            self.hw
                .tlb
                .invalidate_range(pid.0, vpn << bs, (vpn + 1) << bs);
        }
        self.compact.stats.pgmigrate_success += 1;
        self.compact.ran = true;
        let cost = &self.machine.cost;
        self.machine.ns_to_cycles(cost.migrate_page_kernel_ns)
            + cost.copy_page_cycles
            + maps.len() as u64 * (cost.pte_write_cycles + cost.tlb_invalidate_cycles)
    }
}

fn sync_of(m: Mode) -> bool {
    m != Mode::Async
}

/// `pageblock_start_pfn`.
pub(super) fn pb_start(pfn: u64, pb: u8) -> u64 {
    pfn & !((1u64 << pb) - 1)
}

/// `pageblock_end_pfn`: `ALIGN(pfn + 1, pageblock_nr_pages)`.
fn pb_end(pfn: u64, pb: u8) -> u64 {
    blk_end(pfn, pb)
}

/// `block_start_pfn(pfn, order)`: `round_down(pfn, 1 << order)`.
fn blk_start(pfn: u64, order: u8) -> u64 {
    pfn & !((1u64 << order) - 1)
}

/// `block_end_pfn(pfn, order)`: `ALIGN(pfn + 1, 1 << order)`.
fn blk_end(pfn: u64, order: u8) -> u64 {
    (pfn + 1 + (1u64 << order) - 1) & !((1u64 << order) - 1)
}

/// `int_sqrt`.
fn isqrt(n: u64) -> u64 {
    let mut r = (n as f64).sqrt() as u64;
    while r * r > n {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= n {
        r += 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::blk_start;

    /// `block_start_pfn` rounds down to the order's block, whichever bits the pfn has: the
    /// drain's test compares against it (a pfn inside a block starting at an even multiple of
    /// 512 stays in it).
    #[test]
    fn blk_start_rounds_down_to_the_order_block() {
        assert_eq!(blk_start(1056, 9), 1024);
        assert_eq!(blk_start(544, 9), 512);
        assert_eq!(blk_start(1023, 9), 512);
        assert_eq!(blk_start(1536, 9), 1536);
        assert_eq!(blk_start(7, 2), 4);
    }
}
