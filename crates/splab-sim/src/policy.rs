//! Policies: the decisions of a superpage design, organised by seed 003's five events of a
//! superpage's life (physical allocation, preparation, mapping creation, mapping destruction,
//! deallocation), plus mmap placement and daemons. A policy is a value; the named designs are
//! presets. Mechanisms (vm, phys, reservations) never read a policy's name, only its options.
//! A policy is also data: `file.rs` writes and reads it as TOML, one table per event
//! (`splab policy show`, `-p file:PATH.toml`).
//!
//! Contract: every field has a default that means "what a base-pages-only OS does", so a new
//! design is one preset, or one new option at one event.

use serde::Serialize;

use crate::error::{Result, SimError};
use crate::hw::Machine;
use crate::spec::Spec;
use crate::units::fmt_size;

mod file;
pub use file::presets_table;

/// Event 1, physical allocation: what the fault handler asks of physical memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AllocPolicy {
    /// One base page per fault from the buddy allocator.
    BasePage,
    /// Reservation-based allocation (seed 000 4.1; FreeBSD vm_reserv).
    Reserve(ReservPolicy),
    /// Linux transparent huge pages (mm/huge_memory.c `do_huge_pmd_anonymous_page`): a fault on
    /// an anonymous private map entry that THP is enabled for, whose aligned superpage-sized
    /// region lies inside the entry with nothing mapped in it yet, allocates, zeroes and maps
    /// the whole superpage at once (allocation, preparation and mapping coupled: seed 003
    /// section 3.2); otherwise, or when no free block of that size exists, one base page.
    Thp(ThpPolicy),
    /// HP-UX's multiple page sizes (seed 002): a zero-fill fault picks a page size from the
    /// region's page-size hint (6), lowered while free memory is under four times it and to
    /// the largest aligned page that fits the region with nothing in it (7.1), allocates it
    /// without waiting and zeroes and maps the whole large page at once; if the allocation
    /// fails, one base page (6). No promotion ever (2.3, 6); demotion one size at a time (5).
    Hint(HintPolicy),
}

/// HP-UX's page-size hints (seed 002 6; `physical_allocation.kind = "hint"`, vm/pagesize.rs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HintPolicy {
    /// The chatr method: the data page-size hint in bytes (`chatr +pd`, seed 002 6, and the
    /// hints of its experiments, 9). None: the transparent method, a hint from the region's size
    /// bounded by `vps_pagesize` and `vps_ceiling`.
    pub hint: Option<u64>,
    /// `vps_pagesize`: the least page size transparent selection picks (HP-UX's default 4 KB,
    /// vps_pagesize(5)).
    pub vps_pagesize: u64,
    /// `vps_ceiling`: the largest page size transparent selection picks (HP-UX's default 16 KB,
    /// docs.hp.com KCParms vps_ceiling; "if the value is not a legitimate page size, the
    /// kernel uses the next lower valid value").
    pub vps_ceiling: u64,
    /// seed 002 6's heap growth-rate adjustment: with a chatr hint, the heap grows to the next
    /// boundary of the hint's page at each brk (vm/pagesize.rs `heap_top`), so that a heap grown
    /// in small steps still gets large pages. `heap_growth=on|off`.
    pub heap_growth: bool,
}

/// HP-UX's default `vps_pagesize` (vps_pagesize(5): 4 KB) and `vps_ceiling` (16 KB).
pub const HPUX_VPS_PAGESIZE: u64 = 4 << 10;
pub const HPUX_VPS_CEILING: u64 = 16 << 10;

/// Linux's `/sys/kernel/mm/transparent_hugepage/enabled` (transhuge.rst).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThpEnabled {
    /// Every eligible anonymous map entry, unless madvise(MADV_NOHUGEPAGE).
    Always,
    /// Only map entries advised with madvise(MADV_HUGEPAGE).
    Madvise,
    /// None.
    Never,
}

/// Linux's `transparent_hugepage/defrag` (mm/huge_memory.c `vma_thp_gfp_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThpDefrag {
    /// Direct compaction (`__GFP_NORETRY` unless advised MADV_HUGEPAGE).
    Always,
    /// Wake kcompactd and fail at once.
    Defer,
    /// Direct compaction if advised, else as `defer` / as `never`.
    DeferMadvise,
    Madvise,
    /// Free lists only.
    Never,
}

/// What a write to a huge zero page mapping does (vm/thp.rs `huge_zero_wp`): the two eras of
/// mm/huge_memory.c `do_huge_pmd_wp_page` on a huge zero PMD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ZeroPageWp {
    /// Replace it by a new THP, allocated as a fault's (`defrag`), zeroed and mapped writable;
    /// if none is free, split it and copy the one page: Linux up to 5.7 (`do_huge_pmd_wp_page`
    /// going to its `alloc:` path; Linux 4.3 included) and again from 6.13
    /// (`do_huge_zero_wp_pmd`).
    Alloc,
    /// Split it into PTEs of the 4KB zero page and copy the one page: Linux 5.8 to 6.12 ("thp:
    /// change CoW semantics for anon-THP": `do_huge_pmd_wp_page` goes to `fallback:`).
    Split,
}

/// Linux's pageblock skip bits for compaction (`PG_migrate_skip`, vm/compact_skip.rs), by kernel
/// era.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PageblockSkip {
    /// None: both scanners scan every pageblock every time.
    Off,
    /// Linux 3.7 to 5.0 (as in 4.3): a block is marked when a scan to its end isolated
    /// nothing; the reset clears every bit.
    Unisolated,
    /// Linux 5.1+: the migrate scanner also marks a block it isolates from, the free scanner
    /// every block it scans to the end; the reset keeps THP blocks and samples the others.
    Scanned,
}

pub const PAGEBLOCK_SKIP: &[(&str, PageblockSkip)] = &[
    ("off", PageblockSkip::Off),
    ("unisolated", PageblockSkip::Unisolated),
    ("scanned", PageblockSkip::Scanned),
];

/// What a THP allocation that found no free block does (vm/compact.rs `alloc_huge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefragAction {
    Direct { noretry: bool },
    Wake,
    Fail,
}

impl ThpDefrag {
    /// `vma_thp_gfp_mask` for an entry advised MADV_HUGEPAGE (`madvised`) or not.
    pub fn action(self, madvised: bool) -> DefragAction {
        use DefragAction::*;
        match (self, madvised) {
            (ThpDefrag::Always, m) => Direct { noretry: !m },
            (ThpDefrag::DeferMadvise | ThpDefrag::Madvise, true) => Direct { noretry: false },
            (ThpDefrag::Defer | ThpDefrag::DeferMadvise, _) => Wake,
            (ThpDefrag::Madvise | ThpDefrag::Never, _) => Fail,
        }
    }
}

/// Linux THP's options (event 1, `physical_allocation.kind = "thp"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThpPolicy {
    pub enabled: ThpEnabled,
    /// `defrag`: compaction when a THP fault finds no free block.
    pub defrag: ThpDefrag,
    /// Linux 6.12's `transparent_hugepage/shrink_underused` (default 1): every THP is queued
    /// for the deferred split shrinker, which splits one whose zero-filled base pages exceed
    /// khugepaged's `max_ptes_none` (never at its default 511; vm/deferred_split.rs).
    pub shrink_underused: bool,
    /// `transparent_hugepage/use_zero_page` (default 1): a read fault in an empty eligible
    /// region maps the one shared huge zero page read-only (vm/thp.rs).
    pub use_zero_page: bool,
    /// What a write to a huge zero page mapping does (`ZeroPageWp`).
    pub zero_page_wp: ZeroPageWp,
    /// mTHP sizes in bytes (Linux 6.8 `hugepages-<size>kB/enabled` = `inherit`: as `enabled`
    /// says), anonymous only, between 4 base pages and the THP size (vm/mthp.rs); empty: none,
    /// Linux's default.
    pub mthp: Vec<u64>,
    /// Size class of a THP, set by `Policy::resolve`: the machine's smallest superpage (the PMD
    /// size, 2MB, on x86-64). Not part of the file.
    pub class: u8,
}

impl ThpPolicy {
    /// Whether THP is allowed in a map entry with this madvise state (`hugepage_advice`:
    /// Some(true) after MADV_HUGEPAGE, Some(false) after MADV_NOHUGEPAGE); Linux
    /// `hugepage_global_always` / `hugepage_global_enabled` with `VM_HUGEPAGE` / `VM_NOHUGEPAGE`.
    pub fn allowed(&self, advice: Option<bool>) -> bool {
        match (self.enabled, advice) {
            (_, Some(false)) | (ThpEnabled::Never, _) => false,
            (ThpEnabled::Always, _) => true,
            (ThpEnabled::Madvise, a) => a == Some(true),
        }
    }
}

/// khugepaged (mm/khugepaged.c) and its knobs under
/// `/sys/kernel/mm/transparent_hugepage/khugepaged/`, with Linux's defaults
/// (docs/reference-policies.md section 2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Khugepaged {
    /// PTEs scanned per wake (`pages_to_scan`); None: Linux's `HPAGE_PMD_NR * 8` (4096).
    pub pages_to_scan: Option<u64>,
    /// Sleep between wakes, ms (`scan_sleep_millisecs`, 10000).
    pub scan_sleep_ms: u64,
    /// Sleep after a failed superpage allocation, ms (`alloc_sleep_millisecs`, 60000).
    pub alloc_sleep_ms: u64,
    /// Empty PTEs a region may have and still be collapsed (`max_ptes_none`); None:
    /// `HPAGE_PMD_NR - 1` (511).
    pub max_ptes_none: Option<u64>,
    /// PTEs on swap a region may have (`max_ptes_swap`); None: `HPAGE_PMD_NR / 8` (64).
    pub max_ptes_swap: Option<u64>,
    /// PTEs of pages shared with another process (`max_ptes_shared`); None: `HPAGE_PMD_NR /
    /// 2` (256).
    pub max_ptes_shared: Option<u64>,
}

/// kcompactd (mm/compaction.c; daemon/kcompactd.rs): woken by THP faults under `defrag=defer`
/// and proactive compaction every 500 ms (`vm.compaction_proactiveness`, Linux's default 20;
/// 0: no proactive compaction).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kcompactd {
    pub proactiveness: u64,
}

/// khugepaged's limits for a THP of `n` base pages: (pages_to_scan, max_ptes_none,
/// max_ptes_swap, max_ptes_shared), Linux's defaults where the policy leaves them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KhugepagedLimits {
    pub pages_to_scan: u64,
    pub max_ptes_none: u64,
    pub max_ptes_swap: u64,
    pub max_ptes_shared: u64,
}

impl Khugepaged {
    /// Linux's defaults (mm/khugepaged.c: `khugepaged_pages_to_scan = HPAGE_PMD_NR * 8`,
    /// `khugepaged_scan_sleep_millisecs = 10000`, `khugepaged_alloc_sleep_millisecs = 60000`,
    /// `khugepaged_max_ptes_none = HPAGE_PMD_NR - 1`, `khugepaged_max_ptes_swap = HPAGE_PMD_NR
    /// / 8`, `khugepaged_max_ptes_shared = HPAGE_PMD_NR / 2`): the ones relative to the THP's
    /// size stay None until `limits` knows it.
    pub fn linux() -> Khugepaged {
        Khugepaged {
            pages_to_scan: None,
            scan_sleep_ms: 10_000,
            alloc_sleep_ms: 60_000,
            max_ptes_none: None,
            max_ptes_swap: None,
            max_ptes_shared: None,
        }
    }

    /// The limits for THPs of `n` base pages (`HPAGE_PMD_NR`).
    pub fn limits(&self, n: u64) -> KhugepagedLimits {
        KhugepagedLimits {
            pages_to_scan: self.pages_to_scan.unwrap_or(n * 8),
            max_ptes_none: self.max_ptes_none.unwrap_or(n - 1),
            max_ptes_swap: self.max_ptes_swap.unwrap_or(n / 8),
            max_ptes_shared: self.max_ptes_shared.unwrap_or(n / 2),
        }
    }
}

/// How the preferred reservation size is chosen at a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PreferredSize {
    /// seed 000 4.2: fixed-size objects get the largest aligned superpage that contains the page,
    /// overlaps nothing and does not pass the object's end; growable objects (heap, stack) may
    /// pass the end but are capped at the object's current size.
    Navarro,
    /// FreeBSD vm_reserv_alloc_page: the one reservation size; named objects must not pass their
    /// end, anonymous objects may (they are expected to grow), with no cap.
    FreeBsd,
}

/// What to do when no free extent of the wanted size exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shortage {
    /// seed 000 4.3 + 4.8: preempt the least recently allocated reservation that can yield the
    /// size (its list, then larger lists), else try the next smaller size.
    Preempt,
    /// FreeBSD: fall back to a base page; when even that fails, break the head of partpopq
    /// (vm_reserv_reclaim_inactive) and retry.
    FallbackThenReclaim,
}

/// What a write to a clean superpage does (seed 000 4.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CleanWrite {
    /// The dirty-bit trap demotes the superpage (incrementally) so only the written base page
    /// becomes dirty; repromotion when all are dirty (seed 000 4.7, Alpha dirty-bit emulation).
    DemoteOnTrap,
    /// FreeBSD pmap_promote_pde: clean writable PTEs are write-protected before promotion; an
    /// all-clean run becomes a read-only superpage, whose first write faults and demotes.
    WriteProtect,
    /// seed 000 6.7, "without demoting on writing": the write sets the superpage's one dirty
    /// bit and the superpage stays; its write-out writes every base page of it (4.7), or, with
    /// `Dirty::Hash`, the ones whose digest changed. Set by `dirty=whole|hash`.
    MarkDirty,
}

/// What a write to a clean superpage and the write-out of a dirty one do (seed 000 4.7, 6.7).
/// `dirty=` on a reserving policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dirty {
    /// The preset's clean-write rule (`CleanWrite`): seed 000 demotes on the dirty-bit trap,
    /// FreeBSD write-protects clean superpages. `dirty=trap`, the default.
    Trap,
    /// seed 000 6.7's alternative: a write marks the whole superpage dirty and keeps it; its
    /// write-out writes every base page (the OS has one dirty bit per superpage, 4.7).
    /// `dirty=whole`.
    Whole,
    /// seed 000 4.7, "inferring dirty base pages using hash digests": as `Whole`, but at
    /// write-out each base page's SHA-1 digest is recomputed and compared with the one recorded
    /// when it was clean, and only modified base pages are written (vm/dirty.rs). `dirty=hash`.
    Hash,
}

/// Whether promotion maps superpages (event 3). `promote=` on a reserving policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Promote {
    /// Promote incrementally (seed 000 4.5): `promote=yes`, the default.
    Yes,
    /// seed 000 6.6, "Overhead in practice": everything as with `Yes` (reservations, population
    /// maps, preemption, the promotion decisions and their PTE writes) but the mappings stay base
    /// pages: "factor out the benefit of superpages by simply not promoting them. We preserve the
    /// promotion overhead by writing the new superpage size into some unused portion of the page
    /// table entries." No TLB invalidation, no demotion, no superpage. `promote=overhead`.
    Overhead,
    /// Reserve but never try to promote: the reservations' cost alone. `promote=no`.
    No,
}

/// How partially populated reservations are kept for preemption (a policy choice, read by the
/// reservation layer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ListScheme {
    /// seed 000 4.8: one list per size but the largest, keyed by the largest yieldable extent.
    MultiList,
    /// FreeBSD: one LRU queue of partially populated reservations.
    Partpopq,
}

/// Options of reservation-based allocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReservPolicy {
    /// Superpage sizes in bytes reservations (and promotions) may use; empty = every superpage
    /// size of the machine. Resolved to `classes` against the machine.
    pub sizes: Vec<u64>,
    /// Size classes allowed, increasing (filled by `Policy::resolve`).
    pub classes: Vec<u8>,
    pub preferred: PreferredSize,
    pub lists: ListScheme,
    pub shortage: Shortage,
    pub clean_write: CleanWrite,
    /// Unmapping a superpage demotes it incrementally first, down to base pages (seed 000 6.6:
    /// the adversary's PTEs are "traversed six times: once per each of the three incremental
    /// promotions, and once per each of the three incremental demotions"). FreeBSD removes a
    /// whole 2MB mapping at once (pmap_remove_pde).
    pub unmap_demotes: bool,
    /// Whether promotion maps superpages, or only pays for it (seed 000 6.6's overhead mode).
    pub promote: Promote,
    /// Clean-superpage writes and dirty write-out (seed 000 4.7, 6.7).
    pub dirty: Dirty,
    /// A fault on a resident page of a fully populated reservation maps the whole superpage at
    /// once (FreeBSD 11+ `vm_fault_soft_fast`, vm/softfast.rs), read-only where the entry
    /// gives no write (a copy-on-write or fork-shared entry), writable only when every page is
    /// dirty; else the base page, then incremental promotion once every page is mapped (seed
    /// 000's FreeBSD 4.x). `map_full_reservation=on|off`.
    pub map_full_reservation: bool,
    /// seed 003 5.1, "relaxed superpage mapping creation" (Quicksilver): an anonymous superpage
    /// is mapped once fully prepared whatever its pages' dirty state, by promotion, at a soft
    /// fault (vm/softfast.rs) and right after Sync-t's preparation (vm/prepare.rs); a mixed
    /// extent is mapped writable and dirty. Off: FreeBSD's uniform rule. File-backed memory
    /// keeps the uniform rule (the model's promotion does not look at accessed bits, the part
    /// Quicksilver relaxes for files). `relaxed_mapping=on|off`.
    pub relaxed_mapping: bool,
}

/// Event 2, preparation: how a new page's contents are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PrepPolicy {
    /// Zero (or read) each base page when it is faulted in.
    PerPage,
    /// seed 003 5.1, "hybrid physical superpage preparation" (Quicksilver; vm/prepare.rs): each
    /// base page zeroed at its fault until an anonymous reservation has `t` pages populated
    /// (counting the faulting one), then the rest of it at once: by the fault handler in bulk
    /// (`Sync`, Sync-t) or by a daemon 4KB at a time (`Async`, Async-t; daemon/quicksilver.rs).
    /// t = 0 and 1 both prepare everything at the first fault (the paper's Sync-1, the code's
    /// Sync-0: docs/reference-policies.md 3). Only with reservations.
    Threshold { t: u32, mode: PrepMode },
}

/// Who prepares the rest of a reservation past the threshold (seed 003 5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PrepMode {
    /// The fault that reaches the threshold, with bulk non-temporal zeroing, and it maps the
    /// superpage at once (Sync-t).
    Sync,
    /// A daemon waking every second, zeroing 4KB at a time; the superpage is mapped at the next
    /// soft fault or promotion (Async-t).
    Async,
}

pub const PREP_MODE: &[(&str, PrepMode)] = &[("sync", PrepMode::Sync), ("async", PrepMode::Async)];

impl PrepPolicy {
    /// The threshold and mode of hybrid preparation, if this policy has it.
    pub fn threshold(self) -> Option<(u32, PrepMode)> {
        match self {
            PrepPolicy::PerPage => None,
            PrepPolicy::Threshold { t, mode } => Some((t, mode)),
        }
    }
}

/// Event 3, mapping creation: which resident neighbours of a faulting page are mapped with it,
/// so that touching them later costs no fault. Mapped pages count in the footprint like any
/// other; nothing is read from storage for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultAround {
    /// Only the faulting page.
    Off,
    /// Linux `do_fault_around` (mm/memory.c): a read fault on a file mapping also maps the pages
    /// of the naturally aligned window of `bytes` around the address (`fault_around_bytes`,
    /// 65536 by default) that are in the page cache and not mapped yet, clipped to the map
    /// entry, the leaf page table and the file's end (`filemap_map_pages`). Write faults and
    /// anonymous memory get none.
    Window { bytes: u64 },
    /// FreeBSD `vm_fault_prefault` (and 4.x `pmap_prefault`, `PFBAK` 4 and `PFFOR` 4 in
    /// vm_fault.c / pmap.c): after a fault, the resident pages of the entry's object chain up to
    /// `behind` pages below and `ahead` above, in an outward spiral (-1, +1, -2, +2, ...) that
    /// stops at the first page not resident, skipping pages already mapped; entered read/execute
    /// only (`pmap_enter_quick`). Any object, anonymous ones included.
    Spiral { behind: u32, ahead: u32 },
}

/// Quicksilver's preset threshold: seed 003 7.3, Sync-64 for long-running servers (the
/// scripts use t = 64 or 0: docs/reference-policies.md 3).
pub const QUICKSILVER_T: u32 = 64;
/// The largest threshold a spec or file may give before the machine is known (`resolve` then
/// holds it to the pages of the machine's largest superpage): 2^20, 4GB of 4KB pages.
pub const MAX_THRESHOLD: u32 = 1 << 20;

/// Linux's `fault_around_bytes` default (mm/memory.c, 64 KiB).
pub const LINUX_FAULT_AROUND_BYTES: u64 = 65536;
/// FreeBSD's `PFBAK` and `PFFOR` (sys/vm/vm_fault.c; the same in 4.x's per-arch pmap.c).
pub const FREEBSD_PREFAULT: (u32, u32) = (4, 4);

/// Where mmap places mappings that do not fix their address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Base-page aligned, first fit from the top (Linux `arch_get_unmapped_area_topdown`).
    BasePage,
    /// Aligned to the largest superpage not larger than the mapping (seed 000 5.3).
    SuperpageAligned,
}

/// Contiguity-aware page replacement (seed 000 5.1), a choice of the page daemon's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Contiguity {
    /// FreeBSD 4.x: cache pages sit on their own queue, outside the buddy allocator, and are
    /// freed one at a time when an allocation finds no free frame (`vm_page_select_cache`).
    Off,
    /// seed 000 5.1 (1), Figure 4's "cache" scheme: cache pages count as available and are
    /// coalesced with the free pages in the buddy allocator, at the tail of the free lists; their
    /// contents are kept until the frame is reused, and a referenced cache page is taken back
    /// (preempting the reservation it sits in). `contiguity=cache`.
    Cache,
    /// seed 000 5.1 (1)-(2), Figure 4's "daemon" scheme: as `Cache`, and the page daemon also
    /// wakes when an allocation of the preferred size fails, moving to the cache only the
    /// inactive pages whose aligned regions that restores. `contiguity=daemon`.
    Daemon,
}

impl Contiguity {
    /// Whether cache pages live in the buddy allocator.
    pub fn cache_in_buddy(self) -> bool {
        self != Contiguity::Off
    }
}

/// Where the kernel's wired pages (page-table pages) are placed (seed 000 5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WiredPlacement {
    /// Wherever the buddy allocator hands out a base page, as FreeBSD does.
    Scattered,
    /// seed 000 5.2: "pools of contiguous physical memory": wired pages come from pools of the
    /// largest superpage size taken from the top of memory.
    Clustered,
}

/// The words naming each option's choices, in policy specs (`promote=overhead`), policy
/// files and `splab list policies`: one table per option, so the three never disagree.
pub const PROMOTE: &[(&str, Promote)] = &[
    ("yes", Promote::Yes),
    ("overhead", Promote::Overhead),
    ("no", Promote::No),
];
pub const DIRTY: &[(&str, Dirty)] = &[
    ("trap", Dirty::Trap),
    ("whole", Dirty::Whole),
    ("hash", Dirty::Hash),
];
pub const CONTIGUITY: &[(&str, Contiguity)] = &[
    ("off", Contiguity::Off),
    ("cache", Contiguity::Cache),
    ("daemon", Contiguity::Daemon),
];
pub const WIRED: &[(&str, WiredPlacement)] = &[
    ("scattered", WiredPlacement::Scattered),
    ("clustered", WiredPlacement::Clustered),
];
pub const PREFERRED: &[(&str, PreferredSize)] = &[
    ("navarro", PreferredSize::Navarro),
    ("freebsd", PreferredSize::FreeBsd),
];
pub const LISTS: &[(&str, ListScheme)] = &[
    ("multi_list", ListScheme::MultiList),
    ("partpopq", ListScheme::Partpopq),
];
pub const SHORTAGE: &[(&str, Shortage)] = &[
    ("preempt", Shortage::Preempt),
    ("fallback_then_reclaim", Shortage::FallbackThenReclaim),
];
pub const CLEAN_WRITE: &[(&str, CleanWrite)] = &[
    ("demote_on_trap", CleanWrite::DemoteOnTrap),
    ("write_protect", CleanWrite::WriteProtect),
    ("mark_dirty", CleanWrite::MarkDirty),
];
pub const PLACEMENT: &[(&str, Placement)] = &[
    ("base_page", Placement::BasePage),
    ("superpage_aligned", Placement::SuperpageAligned),
];
pub const THP_ENABLED: &[(&str, ThpEnabled)] = &[
    ("always", ThpEnabled::Always),
    ("madvise", ThpEnabled::Madvise),
    ("never", ThpEnabled::Never),
];
pub const ZERO_PAGE_WP: &[(&str, ZeroPageWp)] =
    &[("alloc", ZeroPageWp::Alloc), ("split", ZeroPageWp::Split)];
pub const THP_DEFRAG: &[(&str, ThpDefrag)] = &[
    ("always", ThpDefrag::Always),
    ("defer", ThpDefrag::Defer),
    ("defer+madvise", ThpDefrag::DeferMadvise),
    ("madvise", ThpDefrag::Madvise),
    ("never", ThpDefrag::Never),
];

/// The choice a word names in `table`.
pub fn word<T: Copy>(table: &[(&str, T)], w: &str) -> Option<T> {
    table.iter().find(|(n, _)| *n == w).map(|(_, v)| *v)
}

/// The word naming `v` in `table` (every table lists every choice: `words_are_complete`).
pub fn word_of<T: Copy + PartialEq>(table: &[(&'static str, T)], v: T) -> &'static str {
    table
        .iter()
        .find(|(_, x)| *x == v)
        .map(|(n, _)| *n)
        .expect("a word for every choice")
}

/// The first value `v` lists twice.
fn repeated(v: &[u64]) -> Option<u64> {
    v.iter()
        .enumerate()
        .find_map(|(i, b)| v[..i].contains(b).then_some(*b))
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// What reports and error messages call the policy: the spec as given for a preset
    /// (`navarro:sizes=64K+4M`), a policy file's `name` key. Mechanisms never read it.
    pub name: String,
    pub alloc: AllocPolicy,
    pub prep: PrepPolicy,
    pub placement: Placement,
    /// Mapping neighbours of a faulting page (`fault_around=` and `prefault=` parameters).
    pub fault_around: FaultAround,
    /// Whether the page daemon (vm/pageout.rs, daemon/pagedaemon.rs) runs: evicting pages when
    /// memory is short (`pagedaemon=off`: memory running out is an error, for studying the
    /// allocator alone).
    pub pagedaemon: bool,
    /// Contiguity-aware replacement (seed 000 5.1): `contiguity=off|cache|daemon`.
    pub contiguity: Contiguity,
    /// Wired page placement (seed 000 5.2): `wired=scattered|clustered`.
    pub wired: WiredPlacement,
    /// Linux's grouping of pages by mobility (`page_group_by_mobility_disabled` = 0; phys/buddy.rs
    /// module doc): kernel frames are UNMOVABLE requests, user pages MOVABLE, each served from
    /// pageblocks of its migratetype, falling back and stealing as `__rmqueue_fallback`; and
    /// asynchronous compaction migrates from, and into, MOVABLE pageblocks only (vm/compact.rs).
    /// `mobility=on|off`. On in the Linux presets that compact; off elsewhere (FreeBSD has no
    /// migratetypes) and in `linux-4k`, whose only allocations are single pages, so that its
    /// results are those it had before grouping was modelled.
    pub mobility_grouping: bool,
    /// Compaction's pageblock skip bits by era (`pageblock_skip=off|unisolated|scanned`;
    /// vm/compact_skip.rs): `scanned` (Linux 5.1+) in the Linux presets, `unisolated` in
    /// `linux-4.3`, off elsewhere.
    pub pageblock_skip: PageblockSkip,
    /// Asynchronous direct compaction gives a block up at its first page it cannot isolate
    /// (mm/compaction.c `isolate_migratepages_block`'s `skip_on_failure`: not in 4.3's, added
    /// later, 4.6). `skip_on_failure=0|1`; on except in `linux-4.3`.
    pub skip_on_failure: bool,
    /// Clustered read-ahead on file page-in (vm/file.rs): FreeBSD's read-behind / read-ahead
    /// around a faulting page and `cluster_read`'s sequential read-ahead for read().
    /// `readahead=off`: one base page per read request, as before issue 10.
    pub readahead: bool,
    /// seed 000 5.1 (3): the clean pages of a file move to the inactive queue as soon as no
    /// process has it open or mapped (`close_deactivate=on`; "this differs from the current
    /// behaviour of FreeBSD", so only `navarro` has it by default).
    pub close_deactivate: bool,
    /// khugepaged (daemon/khugepaged.rs), if it runs: only with THP allocation.
    pub khugepaged: Option<Khugepaged>,
    /// kcompactd (daemon/kcompactd.rs), if it runs: not with base pages.
    pub kcompactd: Option<Kcompactd>,
    /// Where the policy was read from, for `resolve`'s errors; not part of its value.
    #[serde(skip)]
    pub origin: Origin,
}

/// The policy file a policy was read from (`-p file:PATH.toml`) and the lines of the keys that
/// `Policy::resolve` checks against the machine, so that its errors name the file, the line
/// and the key as the file reader's do. Empty for a preset, and for a key a parameter on the
/// command line replaced (the error then names the policy as given). Metadata only: two
/// policies that decide alike are equal wherever they came from, so `PartialEq` ignores it.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    pub file: Option<String>,
    /// `(dotted key, line)`, e.g. `("physical_allocation.sizes", 8)`.
    pub lines: Vec<(&'static str, usize)>,
}

impl PartialEq for Origin {
    fn eq(&self, _: &Origin) -> bool {
        true
    }
}

impl Eq for Origin {}

impl Origin {
    /// Where `key` was set: "policy file 'PATH', line N: KEY" if the file set it, else
    /// "policy 'NAME'".
    fn at(&self, name: &str, key: &str) -> String {
        match (&self.file, self.lines.iter().find(|(k, _)| *k == key)) {
            (Some(f), Some((k, line))) => format!("policy file '{f}', line {line}: {k}"),
            _ => format!("policy '{name}'"),
        }
    }
}

/// Names accepted by `Policy::from_spec`, with one-line descriptions for `splab list`.
pub const POLICIES: &[(&str, &str)] = &[
    (
        "base",
        "base pages only, no superpages (the baseline); maps around file read faults as Linux does (fault_around=64K; off, or prefault=4+4 for FreeBSD's); every policy: readahead=off (one page per read request), close_deactivate=on|off",
    ),
    (
        "navarro",
        "seed 000: multi-size reservations, population maps, preemption (multi-list), incremental promotion, demotion; sizes=64K+4M restricts the superpage sizes; promote=overhead reserves and pays for promotion but maps base pages (6.6), promote=no never promotes; prefault=4+4 as FreeBSD; contiguity=daemon (5.1, default) | cache | off; wired=scattered (default) | clustered (5.2); close_deactivate: a file no process has open or mapped has its clean pages moved to the inactive queue (5.1 (3)); dirty=trap|whole|hash: a write to a clean superpage demotes it (4.7, the default), or marks it dirty and it is written out whole (6.7), or written out per base page whose SHA-1 digest changed (4.7); map_full_reservation=on maps a full reservation's superpage at a fault on its resident page (FreeBSD 11+, off in seed 000)",
    ),
    (
        "linux",
        "Linux THP, enabled=always: a first-touch fault on an empty aligned 2MB region of an anonymous mapping allocates, zeroes and maps the 2MB page at once, else a 4KB page; khugepaged collapses regions out of place (pages_to_scan=4096, scan_sleep_millisecs=10000, alloc_sleep_millisecs=60000, max_ptes_none=511, max_ptes_swap=64, max_ptes_shared=256; khugepaged=off); enabled=always|madvise|never; defrag=always (seed 003 3.2: direct compaction when no 2MB block is free)|defer|defer+madvise|madvise|never; use_zero_page=1 (a read fault maps the shared huge zero page read-only; 0 = allocate as a write does); zero_page_wp=alloc (a write to it maps a new THP, Linux 4.3 and 6.13+)|split (4KB zero-page entries, Linux 5.8 to 6.12); kcompactd (compaction_proactiveness=20, 0 = off; kcompactd=off); anonymous mmaps of 2MB or more 2MB-aligned (Linux 6.7+); fault_around=64K",
    ),
    (
        "linux-4.3",
        "Linux 4.3 as seed 003 measured it: enabled=always, defrag=always, no proactive compaction (compaction_proactiveness=0, Linux 5.9+), no shrink_underused (Linux 6.12), anonymous mmaps not 2MB-aligned (Linux 6.7+); 4.3's compaction: pageblock_skip=unisolated (5.1+: scanned), skip_on_failure=0 (4.6+); the other parameters as linux",
    ),
    (
        "linux-madvise",
        "Linux THP with enabled=madvise and defrag=madvise (modern Linux's defaults): only mappings advised MADV_HUGEPAGE get THPs (at fault, compacting if need be, and from khugepaged); the other parameters as linux",
    ),
    (
        "linux-4k",
        "Linux with THP disabled (enabled=never): 4KB pages only, khugepaged finds nothing to do; the other parameters as linux",
    ),
    (
        "freebsd",
        "FreeBSD amd64: one reservation level (the smallest superpage, 2MB on x86-64), partpopq, write-protect-clean promotion, a fault on a resident page of a full reservation maps the whole superpage (vm_fault_soft_fast; map_full_reservation=off: the base page), deferred deallocation, reclaim_inactive, prefault=4+4; promote=, dirty=, contiguity= (default off) and wired= as navarro; khugepaged=on (either reserving policy) adds Linux's khugepaged beside the reservations, collapsing the regions that fell back to base pages",
    ),
    (
        "hpux",
        "HP-UX multiple page sizes (seed 002): at a zero-fill fault, the page size of the region's hint lowered while free memory is under 4x it and to the largest aligned page that fits the map entry with nothing mapped in it, allocated without waiting (none free: a base page), zeroed and mapped whole; never promoted, demoted one size at a time; hint=SIZE is chatr's (e.g. hint=4M), hint=transparent (the default) picks the largest page size not above the region's size between vps_pagesize=4K and vps_ceiling=16K (HP-UX's defaults: no large pages on a machine without a 16KB page); heap_growth=on: with a chatr hint, brk grows the heap to the hint page's next boundary (6's heap growth-rate adjustment; off: to the next base page); fault_around=off",
    ),
    (
        "quicksilver",
        "seed 003's Quicksilver (Sync-64): freebsd with hybrid preparation, prep=sync (the fault reaching t populated pages of an anonymous reservation zeroes the rest in bulk and maps the superpage, 5.1)|async (a daemon every 1 s zeroes the rest 4KB at a time; mapped at the next soft fault)|per_page, t=64 (0 or 1: all at the first fault, the paper's Sync-1; a reservation with t pages or fewer, as the alpha21264's 8-page ones, fills up first and is prepared per page), and relaxed_mapping=on (anonymous superpages mapped once fully prepared, mixed dirty state or not; relaxed_mapping=off: FreeBSD's uniform rule); every other parameter as freebsd; prep=, t= and relaxed_mapping= work on any reserving policy; no evacuation daemon",
    ),
];

impl Policy {
    pub fn base() -> Policy {
        Policy {
            name: "base".into(),
            alloc: AllocPolicy::BasePage,
            prep: PrepPolicy::PerPage,
            placement: Placement::BasePage,
            // The replayed programs are Linux ones, measured on Linux: the baseline maps around
            // file faults as Linux does.
            fault_around: FaultAround::Window {
                bytes: LINUX_FAULT_AROUND_BYTES,
            },
            pagedaemon: true,
            contiguity: Contiguity::Off,
            wired: WiredPlacement::Scattered,
            readahead: true,
            close_deactivate: false,
            khugepaged: None,
            kcompactd: None,
            mobility_grouping: false,
            pageblock_skip: PageblockSkip::Off,
            skip_on_failure: true,
            origin: Origin::default(),
        }
    }

    /// Linux with THP `enabled` (presets `linux`, `linux-madvise`, `linux-4k`).
    fn linux(name: &str, enabled: ThpEnabled) -> Policy {
        Policy {
            name: name.into(),
            // seed 003 3.2: "if allocation fails and defragmentation is enabled (the default),
            // it immediately does memory compaction": `defrag=always`. Modern Linux's default
            // is `madvise` (docs/reference-policies.md section 2): `linux:defrag=madvise`.
            alloc: AllocPolicy::Thp(ThpPolicy {
                enabled,
                defrag: ThpDefrag::Always,
                shrink_underused: true,
                // mm/huge_memory.c: `TRANSPARENT_HUGEPAGE_USE_ZERO_PAGE_FLAG` is set by
                // default; a write to it allocates a THP in 4.3 and again from 6.13.
                use_zero_page: true,
                zero_page_wp: ZeroPageWp::Alloc,
                mthp: Vec::new(),
                class: 0,
            }),
            // mm/mmap.c `__get_unmapped_area` -> `thp_get_unmapped_area`: anonymous mappings
            // of at least the PMD size start PMD-aligned (Linux 6.7+).
            placement: Placement::SuperpageAligned,
            khugepaged: Some(Khugepaged::linux()),
            // mm/compaction.c `sysctl_compaction_proactiveness = 20`.
            kcompactd: Some(Kcompactd { proactiveness: 20 }),
            // mm/page_alloc.c `build_all_zonelists`: grouping is disabled only when memory is
            // under `pageblock_nr_pages * MIGRATE_TYPES` pages per node, never on machines here.
            mobility_grouping: enabled != ThpEnabled::Never,
            // mm/compaction.c since 5.1: `test_and_set_skip`, `__reset_isolation_pfn`.
            pageblock_skip: PageblockSkip::Scanned,
            ..Policy::base()
        }
    }

    /// Parses a policy spec: a preset with parameters (`navarro:sizes=64K+4M,promote=no`), or
    /// a policy file with optional parameters on top (`file:PATH.toml[:key=value,...]`; README
    /// "Policies as files"). The result is not yet bound to a machine (`resolve`).
    pub fn from_spec(text: &str) -> Result<Policy> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("file:") {
            return file::load(text, rest);
        }
        let mut spec = Spec::parse("policy", text)?;
        let mut p = Policy::preset(&spec.name)?;
        p.set_params(&spec.name.clone(), &mut spec)?;
        p.name = text.to_string();
        spec.finish()?;
        Ok(p)
    }

    /// A preset by its name, without parameters.
    pub fn preset(name: &str) -> Result<Policy> {
        let names: Vec<&str> = POLICIES.iter().map(|p| p.0).collect();
        Ok(match name {
            "base" => Policy::base(),
            "linux" => Policy::linux(name, ThpEnabled::Always),
            "linux-madvise" => {
                // Modern Linux's defaults: enabled=madvise, defrag=madvise (transhuge.rst). An
                // advised entry compacts as under `always`; the others get no THP at faults.
                let mut p = Policy::linux(name, ThpEnabled::Madvise);
                if let AllocPolicy::Thp(t) = &mut p.alloc {
                    t.defrag = ThpDefrag::Madvise;
                }
                p
            }
            "linux-4k" => Policy::linux(name, ThpEnabled::Never),
            "linux-4.3" => {
                // The kernel seed 003 measured (its "Platforms": "Linux version 4.3 was used"), without the three
                // later mechanisms the `linux` preset has: proactive compaction (5.9, kcompactd
                // then runs only when woken, `compaction_proactiveness` 0), the shrinker's split
                // of underused THPs (6.12), and PMD-aligned anonymous mappings (6.7: before it
                // `arch_get_unmapped_area_topdown` placed them at base-page alignment).
                let mut p = Policy::linux(name, ThpEnabled::Always);
                if let AllocPolicy::Thp(t) = &mut p.alloc {
                    t.shrink_underused = false;
                }
                p.kcompactd = Some(Kcompactd { proactiveness: 0 });
                p.placement = Placement::BasePage;
                // Linux 4.3 mm/compaction.c: `update_pageblock_skip` only where nothing was
                // isolated, and no `skip_on_failure` in `isolate_migratepages_block`.
                p.pageblock_skip = PageblockSkip::Unisolated;
                p.skip_on_failure = false;
                p
            }
            "navarro" => Policy {
                name: "navarro".into(),
                alloc: AllocPolicy::Reserve(ReservPolicy {
                    sizes: Vec::new(),
                    classes: Vec::new(),
                    preferred: PreferredSize::Navarro,
                    lists: ListScheme::MultiList,
                    shortage: Shortage::Preempt,
                    clean_write: CleanWrite::DemoteOnTrap,
                    unmap_demotes: true,
                    promote: Promote::Yes,
                    dirty: Dirty::Trap,
                    // seed 000 4.5: FreeBSD 4.3 had no vm_fault_soft_fast; a page is mapped
                    // alone and promoted when its extent is fully mapped.
                    map_full_reservation: false,
                    relaxed_mapping: false,
                }),
                prep: PrepPolicy::PerPage,
                placement: Placement::SuperpageAligned,
                // seed 000 runs on FreeBSD 4.3, whose pmap_prefault maps 4 + 4 neighbours.
                fault_around: prefault_default(),
                pagedaemon: true,
                // seed 000 5.1: the paper's page daemon is the "daemon" scheme of Figure 4.
                // Its wired page clustering (5.2) is `wired=clustered`, not the default:
                // the pool moves page-table pages, and with them the cache behaviour of
                // every walk, so the default keeps today's placement (README, "Seed 000
                // 6.5").
                contiguity: Contiguity::Daemon,
                wired: WiredPlacement::Scattered,
                readahead: true,
                // seed 000 5.1 (3).
                close_deactivate: true,
                khugepaged: None,
                kcompactd: None,
                mobility_grouping: false,
                pageblock_skip: PageblockSkip::Off,
                skip_on_failure: true,
                origin: Origin::default(),
            },
            "freebsd" => Policy {
                name: "freebsd".into(),
                alloc: AllocPolicy::Reserve(ReservPolicy {
                    sizes: Vec::new(),
                    classes: Vec::new(),
                    preferred: PreferredSize::FreeBsd,
                    lists: ListScheme::Partpopq,
                    shortage: Shortage::FallbackThenReclaim,
                    clean_write: CleanWrite::WriteProtect,
                    unmap_demotes: false,
                    promote: Promote::Yes,
                    dirty: Dirty::Trap,
                    // sys/vm/vm_fault.c `vm_fault_soft_fast` (FreeBSD 11 and later).
                    map_full_reservation: true,
                    relaxed_mapping: false,
                }),
                prep: PrepPolicy::PerPage,
                placement: Placement::SuperpageAligned,
                fault_around: prefault_default(),
                pagedaemon: true,
                contiguity: Contiguity::Off,
                wired: WiredPlacement::Scattered,
                readahead: true,
                close_deactivate: false,
                khugepaged: None,
                kcompactd: None,
                mobility_grouping: false,
                pageblock_skip: PageblockSkip::Off,
                skip_on_failure: true,
                origin: Origin::default(),
            },
            "hpux" => Policy {
                name: "hpux".into(),
                // seed 002 6: the transparent method with HP-UX's default tunables; chatr's
                // hint is `hint=SIZE` (what 9's experiments set).
                alloc: AllocPolicy::Hint(HintPolicy {
                    hint: None,
                    vps_pagesize: HPUX_VPS_PAGESIZE,
                    vps_ceiling: HPUX_VPS_CEILING,
                    heap_growth: true,
                }),
                // seed 002 describes no fault-around and no mmap alignment for large pages:
                // neither is assumed.
                fault_around: FaultAround::Off,
                ..Policy::base()
            },
            "quicksilver" => {
                // seed 003 5: Quicksilver "is built upon FreeBSD's reservation-based superpage
                // management": the freebsd preset with hybrid preparation and relaxed mapping.
                // Sync-64: 7.3, "Sync-64 ... is more preferable for long-running servers".
                // The evacuation daemon (5.2, "preemptive deallocation") is not modelled
                // (docs/quicksilver.md).
                let mut p = Policy::preset("freebsd")?;
                p.name = name.into();
                p.prep = PrepPolicy::Threshold {
                    t: QUICKSILVER_T,
                    mode: PrepMode::Sync,
                };
                if let AllocPolicy::Reserve(r) = &mut p.alloc {
                    r.relaxed_mapping = true;
                }
                p
            }
            _ => {
                return Err(SimError::BadInput(format!(
                    "unknown policy '{name}' (valid: {}; or file:PATH.toml)",
                    names.join(", ")
                )))
            }
        })
    }

    /// Applies `key=value` parameters to a preset's or a file's policy; `name` is what error
    /// messages call it. Keys the policy does not take are left in `spec` for `finish`.
    fn set_params(&mut self, name: &str, spec: &mut Spec) -> Result<()> {
        let p = self;
        if let AllocPolicy::Reserve(r) = &mut p.alloc {
            // Only seed 000's preferred-size rule chooses among sizes; FreeBSD has one level.
            if r.preferred == PreferredSize::Navarro {
                if let Some(list) = spec.take_str("sizes") {
                    r.sizes = list
                        .split('+')
                        .map(|t| {
                            crate::spec::parse_size(t).filter(|&b| b > 0).ok_or_else(|| {
                                SimError::BadInput(format!("policy '{name}': bad size '{t}' in sizes='{list}': expected sizes joined by '+', e.g. sizes=64K+4M"))
                            })
                        })
                        .collect::<Result<Vec<u64>>>()?;
                    if let Some(d) = repeated(&r.sizes) {
                        return Err(SimError::BadInput(format!(
                            "policy '{name}': size {} is given twice in sizes; list each size once, e.g. sizes=64K+4M",
                            fmt_size(d)
                        )));
                    }
                }
            }
            if let Some(v) = spec.take_str("promote") {
                r.promote = word(PROMOTE, &v).ok_or_else(|| SimError::BadInput(format!(
                    "policy '{name}': bad promote='{v}': expected yes, overhead (seed 000 6.6: reserve and pay for promotion, map base pages only) or no (reserve, never promote)"
                )))?;
            }
            r.map_full_reservation =
                spec.take_bool("map_full_reservation", r.map_full_reservation)?;
            r.relaxed_mapping = spec.take_bool("relaxed_mapping", r.relaxed_mapping)?;
            // seed 003 5.1: hybrid preparation, `prep=per_page|sync|async` and its `t=N`.
            if let Some(v) = spec.take_str("prep") {
                let t = p.prep.threshold().map_or(QUICKSILVER_T, |(t, _)| t);
                p.prep = match (v.as_str(), word(PREP_MODE, &v)) {
                    ("per_page", _) => PrepPolicy::PerPage,
                    (_, Some(mode)) => PrepPolicy::Threshold { t, mode },
                    _ => return Err(SimError::BadInput(format!(
                        "policy '{name}': bad prep='{v}': expected per_page (zero each page at its fault), sync (seed 003 Sync-t: the fault reaching t pages prepares and maps the rest) or async (Async-t: a daemon prepares it every second)"
                    ))),
                };
            }
            match p.prep {
                PrepPolicy::Threshold { ref mut t, .. } => {
                    *t = spec.take_count("t", *t as u64, 0, MAX_THRESHOLD as u64)? as u32;
                }
                PrepPolicy::PerPage => {
                    if spec.take_str("t").is_some() {
                        return Err(SimError::BadInput(format!(
                            "policy '{name}': t is the threshold of hybrid preparation, and this policy prepares per page: give prep=sync or prep=async with it, or leave it out"
                        )));
                    }
                }
            }
            if let Some(v) = spec.take_str("dirty") {
                r.dirty = word(DIRTY, &v).ok_or_else(|| SimError::BadInput(format!(
                    "policy '{name}': bad dirty='{v}': expected trap (the preset's clean-write rule: demote on the dirty-bit trap, seed 000 4.7), whole (6.7: mark the superpage dirty, write it out whole) or hash (4.7: write out only base pages whose SHA-1 digest changed)"
                )))?;
                if r.dirty != Dirty::Trap {
                    r.clean_write = CleanWrite::MarkDirty;
                } else if r.clean_write == CleanWrite::MarkDirty {
                    // Only a file can say mark_dirty; which trap rule it means is not known.
                    return Err(SimError::BadInput(format!(
                        "policy '{name}': dirty=trap needs the clean-write rule the trap follows, and this policy's mapping_destruction.clean_write is mark_dirty: set clean_write (demote_on_trap or write_protect) and dirty in the file instead"
                    )));
                }
            }
        }
        if let AllocPolicy::Thp(t) = &mut p.alloc {
            if let Some(v) = spec.take_str("enabled") {
                t.enabled = word(THP_ENABLED, &v).ok_or_else(|| {
                    SimError::BadInput(format!(
                        "policy '{name}': bad enabled='{v}': expected always, madvise or never (Linux's transparent_hugepage/enabled)"
                    ))
                })?;
            }
            if let Some(v) = spec.take_str("defrag") {
                t.defrag = word(THP_DEFRAG, &v).ok_or_else(|| {
                    SimError::BadInput(format!(
                        "policy '{name}': bad defrag='{v}': expected always, defer, defer+madvise, madvise or never (Linux's transparent_hugepage/defrag)"
                    ))
                })?;
            }
            t.shrink_underused = spec.take_bool("shrink_underused", t.shrink_underused)?;
            t.use_zero_page = spec.take_bool("use_zero_page", t.use_zero_page)?;
            if let Some(v) = spec.take_str("zero_page_wp") {
                t.zero_page_wp = word(ZERO_PAGE_WP, &v).ok_or_else(|| {
                    SimError::BadInput(format!(
                        "policy '{name}': bad zero_page_wp='{v}': expected alloc (a write to the huge zero page maps a new THP: Linux 4.3, and 6.13+) or split (split it into 4KB zero-page entries: Linux 5.8 to 6.12)"
                    ))
                })?;
            }
            if let Some(list) = spec.take_str("mthp") {
                t.mthp = if list == "none" {
                    Vec::new()
                } else {
                    list.split('+')
                        .map(|s| {
                            crate::spec::parse_size(s).filter(|&b| b > 0).ok_or_else(|| {
                                SimError::BadInput(format!("policy '{name}': bad size '{s}' in mthp='{list}': expected mTHP sizes joined by '+', e.g. mthp=16K+64K, or none"))
                            })
                        })
                        .collect::<Result<Vec<u64>>>()?
                };
            }
        }
        if let AllocPolicy::Hint(h) = &mut p.alloc {
            if let Some(v) = spec.take_str("hint") {
                h.hint = if v == "transparent" {
                    None
                } else {
                    Some(crate::spec::parse_size(&v).filter(|&b| b > 0).ok_or_else(|| {
                        SimError::BadInput(format!("policy '{name}': bad hint='{v}': expected a page size such as 4M (chatr +pd), or transparent (a hint from the region's size, between vps_pagesize and vps_ceiling)"))
                    })?)
                };
            }
            for (key, field) in [
                ("vps_pagesize", &mut h.vps_pagesize),
                ("vps_ceiling", &mut h.vps_ceiling),
            ] {
                if let Some(v) = spec.take_str(key) {
                    *field = crate::spec::parse_size(&v)
                        .filter(|&b| b > 0)
                        .ok_or_else(|| {
                            SimError::BadInput(format!(
                                "policy '{name}': bad {key}='{v}': expected a size such as 16K"
                            ))
                        })?;
                }
            }
            h.heap_growth = spec.take_bool("heap_growth", h.heap_growth)?;
            check_vps(name, h)?;
        }
        // kcompactd with superpages (it compacts memory for THPs and khugepaged's collapses).
        if !matches!(p.alloc, AllocPolicy::BasePage | AllocPolicy::Hint(_)) {
            if spec.take_bool("kcompactd", p.kcompactd.is_some())? {
                let k = p.kcompactd.get_or_insert(Kcompactd { proactiveness: 20 });
                k.proactiveness =
                    spec.take_count("compaction_proactiveness", k.proactiveness, 0, 100)?;
            } else {
                // Taken so that a value given with kcompactd off is refused as that, not as
                // "unknown parameter" with a list of valid ones that leaves it out.
                if spec.take_str("compaction_proactiveness").is_some() {
                    return Err(SimError::BadInput(format!(
                        "policy '{name}': compaction_proactiveness is kcompactd's, and kcompactd is off: give kcompactd=true with it, or leave it out"
                    )));
                }
                p.kcompactd = None;
            }
        }
        // khugepaged with THP, or beside reservations (a mixed policy: it collapses the regions
        // no reservation covers, where faults fell back to base pages).
        if !matches!(p.alloc, AllocPolicy::BasePage | AllocPolicy::Hint(_)) {
            let on = spec.take_bool("khugepaged", p.khugepaged.is_some())?;
            if !on {
                for key in [
                    "scan_sleep_millisecs",
                    "alloc_sleep_millisecs",
                    "pages_to_scan",
                    "max_ptes_none",
                    "max_ptes_swap",
                    "max_ptes_shared",
                ] {
                    if spec.take_str(key).is_some() {
                        return Err(SimError::BadInput(format!(
                            "policy '{name}': {key} is khugepaged's, and khugepaged is off: give khugepaged=true with it, or leave it out"
                        )));
                    }
                }
                p.khugepaged = None;
            } else {
                let k = p.khugepaged.get_or_insert_with(Khugepaged::linux);
                k.scan_sleep_ms =
                    spec.take_count("scan_sleep_millisecs", k.scan_sleep_ms, 0, 1 << 32)?;
                k.alloc_sleep_ms =
                    spec.take_count("alloc_sleep_millisecs", k.alloc_sleep_ms, 0, 1 << 32)?;
                for (key, min, field) in [
                    ("pages_to_scan", 1, &mut k.pages_to_scan),
                    ("max_ptes_none", 0, &mut k.max_ptes_none),
                    ("max_ptes_swap", 0, &mut k.max_ptes_swap),
                    ("max_ptes_shared", 0, &mut k.max_ptes_shared),
                ] {
                    match spec.take_str(key).as_deref() {
                        None => {}
                        Some("default") => *field = None,
                        Some(v) => {
                            *field = Some(
                                crate::spec::parse_count(v)
                                    .filter(|&n| (min..=1 << 32).contains(&n))
                                    .ok_or_else(|| {
                                        SimError::BadInput(format!(
                                            "policy '{name}': bad {key}='{v}': expected a count from {min}, or 'default' (Linux's, relative to the THP size)"
                                        ))
                                    })?,
                            );
                        }
                    }
                }
            }
        }
        match (spec.take_str("fault_around"), spec.take_str("prefault")) {
            (Some(_), Some(_)) => {
                return Err(SimError::BadInput(format!(
                    "policy '{name}': give fault_around= (Linux's window) or prefault= (FreeBSD's spiral), not both"
                )))
            }
            (Some(v), None) => p.fault_around = parse_fault_around(name, &v)?,
            (None, Some(v)) => p.fault_around = parse_prefault(name, &v)?,
            (None, None) => {}
        }
        p.pagedaemon = spec.take_bool("pagedaemon", p.pagedaemon)?;
        if let Some(v) = spec.take_str("contiguity") {
            p.contiguity = word(CONTIGUITY, &v).ok_or_else(|| SimError::BadInput(format!(
                "policy '{name}': bad contiguity='{v}': expected off (FreeBSD's cache queue), cache (cache pages coalesced in the buddy allocator, seed 000 5.1 (1)) or daemon (also restore contiguity when a preferred-size allocation fails, 5.1 (2))"
            )))?;
        }
        if let Some(v) = spec.take_str("wired") {
            p.wired = word(WIRED, &v).ok_or_else(|| {
                SimError::BadInput(format!(
                    "policy '{name}': bad wired='{v}': expected scattered or clustered (seed 000 5.2)"
                ))
            })?;
        }
        p.readahead = spec.take_bool("readahead", p.readahead)?;
        p.close_deactivate = spec.take_bool("close_deactivate", p.close_deactivate)?;
        p.mobility_grouping = spec.take_bool("mobility", p.mobility_grouping)?;
        if let Some(v) = spec.take_str("pageblock_skip") {
            p.pageblock_skip = word(PAGEBLOCK_SKIP, &v).ok_or_else(|| SimError::BadInput(format!(
                "policy '{name}': bad pageblock_skip='{v}': expected off, unisolated (Linux 3.7 to 5.0: a block is marked when a scan isolated nothing from it) or scanned (Linux 5.1+)"
            )))?;
        }
        p.skip_on_failure = spec.take_bool("skip_on_failure", p.skip_on_failure)?;
        Ok(())
    }

    /// The policy as a TOML document organised by the five events (module `file`): `-p
    /// file:PATH` of it gives this value again (`splab policy show`).
    pub fn to_toml(&self) -> String {
        file::to_toml(self)
    }

    /// Reads a policy file's text; `origin` names it in error messages. Without a `name` key
    /// the policy is called `origin`.
    pub fn from_toml(text: &str, origin: &str) -> Result<Policy> {
        file::from_toml(text, origin)
    }

    /// The reservation options, if this policy reserves.
    pub fn reserv(&self) -> Option<&ReservPolicy> {
        match &self.alloc {
            AllocPolicy::Reserve(r) => Some(r),
            AllocPolicy::BasePage | AllocPolicy::Thp(_) | AllocPolicy::Hint(_) => None,
        }
    }

    /// HP-UX's page-size hint options, if this policy allocates by hint.
    pub fn hint(&self) -> Option<&HintPolicy> {
        match &self.alloc {
            AllocPolicy::Hint(h) => Some(h),
            _ => None,
        }
    }

    /// The size class khugepaged collapses regions into: the THP's, or beside reservations
    /// the smallest superpage (FreeBSD's one level); None without khugepaged.
    pub fn collapse_class(&self) -> Option<u8> {
        self.khugepaged.as_ref()?;
        match &self.alloc {
            AllocPolicy::Thp(t) => Some(t.class),
            AllocPolicy::Reserve(_) => Some(1),
            AllocPolicy::BasePage | AllocPolicy::Hint(_) => None,
        }
    }

    /// The THP options, if this policy allocates transparent huge pages.
    pub fn thp(&self) -> Option<&ThpPolicy> {
        match &self.alloc {
            AllocPolicy::Thp(t) => Some(t),
            _ => None,
        }
    }

    /// Binds the policy to a machine: superpage sizes become size classes. Errors name a size
    /// the machine does not have.
    pub fn resolve(&mut self, m: &Machine) -> Result<()> {
        let name = self.name.clone();
        // "policy 'NAME'", or the file, line and key that set what is checked.
        let at = |key: &str| self.origin.at(&name, key);
        let (kind_at, mthp_at, sizes_at, around_at) = (
            at("physical_allocation.kind"),
            at("physical_allocation.mthp"),
            at("physical_allocation.sizes"),
            at("mapping_creation.fault_around"),
        );
        let ptes_at = |key: &str| match key {
            "max_ptes_none" => at("daemons.khugepaged.max_ptes_none"),
            "max_ptes_swap" => at("daemons.khugepaged.max_ptes_swap"),
            _ => at("daemons.khugepaged.max_ptes_shared"),
        };
        if let FaultAround::Window { bytes } = self.fault_around {
            // mm/memory.c `fault_around_bytes_set`: more than PTRS_PER_PTE (512) pages is
            // -EINVAL; less than a page is taken as one page, which maps no neighbour
            // (`should_fault_around`): refused here rather than read as "off" without a word.
            let (base, max) = (m.base_size(), 512 * m.base_size());
            if bytes < base || bytes > max {
                return Err(SimError::BadInput(format!(
                    "{around_at}: fault_around={} on machine '{}': Linux's fault_around_bytes is \
                     from one base page ({}, which maps no neighbour) to 512 pages ({}); give \
                     a power of two in that range, or off",
                    fmt_size(bytes),
                    m.name,
                    fmt_size(base),
                    fmt_size(max)
                )));
            }
        }
        if let AllocPolicy::Thp(t) = &mut self.alloc {
            if m.page_shifts.len() < 2 {
                return Err(SimError::BadInput(format!(
                    "{kind_at}: machine '{}' has no superpage sizes for THP",
                    m.name
                )));
            }
            t.class = 1;
            // mm/huge_memory.c THP_ORDERS_ALL_ANON: orders 2 .. PMD order - 1 (order 1 is
            // never anonymous).
            let (base, thp) = (m.base_size(), 1u64 << m.page_shifts[1]);
            for &b in &t.mthp {
                if !b.is_power_of_two() || b < 4 * base || b >= thp {
                    return Err(SimError::BadInput(format!(
                        "{mthp_at}: mthp size {} on machine '{}': an mTHP is a power of two from {} (4 base pages) to below the THP size {}",
                        fmt_size(b), m.name, fmt_size(4 * base), fmt_size(thp)
                    )));
                }
            }
            if let Some(d) = repeated(&t.mthp) {
                return Err(SimError::BadInput(format!(
                    "{mthp_at}: mthp size {} is given twice",
                    fmt_size(d)
                )));
            }
        }
        if self.khugepaged.is_some() && m.page_shifts.len() >= 2 {
            let pages = 1u64 << m.order_of(1);
            if let Some(k) = &self.khugepaged {
                for (key, v) in [
                    ("max_ptes_none", k.max_ptes_none),
                    ("max_ptes_swap", k.max_ptes_swap),
                    ("max_ptes_shared", k.max_ptes_shared),
                ] {
                    let Some(v) = v else { continue };
                    if v >= pages {
                        return Err(SimError::BadInput(format!(
                            "{}: {key}={v}: a THP on {} has {pages} base pages, so at most {}",
                            ptes_at(key),
                            m.name,
                            pages - 1
                        )));
                    }
                }
            }
        }
        if let AllocPolicy::Reserve(r) = &mut self.alloc {
            let sizes = m.page_sizes();
            if m.page_shifts.len() < 2 {
                return Err(SimError::BadInput(format!(
                    "{kind_at}: machine '{}' has no superpage sizes",
                    m.name
                )));
            }
            r.classes = match r.preferred {
                // FreeBSD amd64 has one reservation level, VM_LEVEL_0_ORDER = 9 (2MB): the
                // machine's smallest superpage size.
                PreferredSize::FreeBsd => vec![1],
                PreferredSize::Navarro if r.sizes.is_empty() => (1..sizes.len() as u8).collect(),
                PreferredSize::Navarro => {
                    let mut cs = Vec::new();
                    for &b in &r.sizes {
                        match sizes.iter().skip(1).position(|&s| s == b) {
                            Some(i) => cs.push(i as u8 + 1),
                            None => {
                                let valid: Vec<String> =
                                    sizes[1..].iter().map(|&s| fmt_size(s)).collect();
                                return Err(SimError::BadInput(format!(
                                    "{sizes_at}: size {} is not a superpage size of {} (valid: {})",
                                    fmt_size(b),
                                    m.name,
                                    valid.join(", ")
                                )));
                            }
                        }
                    }
                    cs.sort_unstable();
                    cs.dedup();
                    cs
                }
            };
        }
        if let Some((t, _)) = self.prep.threshold() {
            let prep_at = at("preparation.threshold");
            if self.reserv().is_none() {
                return Err(SimError::BadInput(format!(
                    "{prep_at}: hybrid preparation (seed 003 5.1) prepares the rest of a reservation: it needs physical_allocation.kind = \"reserve\""
                )));
            }
            // A threshold no superpage of the machine could reach is a mistake. One above the
            // policy's own reservations is not: they fill up before reaching it, so they are
            // prepared per page (the `quicksilver` preset's t = 64 on the alpha21264's 8-page
            // 64KB reservations), which lets a preset run on every machine.
            let pages = 1u64 << m.max_order();
            if t as u64 > pages {
                return Err(SimError::BadInput(format!(
                    "{prep_at}: threshold t={t} on machine '{}': its largest superpage has {pages} base pages, so t is at most {pages}",
                    m.name
                )));
            }
        }
        Ok(())
    }
}

/// `vps_pagesize` may not exceed `vps_ceiling` (the transparent method's range would be empty).
pub(crate) fn check_vps(name: &str, h: &HintPolicy) -> Result<()> {
    if h.vps_pagesize > h.vps_ceiling {
        return Err(SimError::BadInput(format!(
            "policy '{name}': vps_pagesize={} is above vps_ceiling={}: the least page size transparent selection picks must not exceed the largest",
            fmt_size(h.vps_pagesize),
            fmt_size(h.vps_ceiling)
        )));
    }
    Ok(())
}

fn prefault_default() -> FaultAround {
    FaultAround::Spiral {
        behind: FREEBSD_PREFAULT.0,
        ahead: FREEBSD_PREFAULT.1,
    }
}

/// `fault_around=SIZE|off`: Linux's window, a power of two of at least one page.
fn parse_fault_around(name: &str, v: &str) -> Result<FaultAround> {
    if v == "off" || v == "0" {
        return Ok(FaultAround::Off);
    }
    match crate::spec::parse_size(v) {
        Some(b) if b.is_power_of_two() => Ok(FaultAround::Window { bytes: b }),
        _ => Err(SimError::BadInput(format!(
            "policy '{name}': bad fault_around='{v}': expected 'off' or a power-of-two size such as 64K (Linux's fault_around_bytes)"
        ))),
    }
}

/// `prefault=BEHIND+AHEAD|off`: FreeBSD's spiral, in pages.
fn parse_prefault(name: &str, v: &str) -> Result<FaultAround> {
    if v == "off" || v == "0" {
        return Ok(FaultAround::Off);
    }
    let bad = || {
        SimError::BadInput(format!(
            "policy '{name}': bad prefault='{v}': expected 'off' or pages behind+ahead such as 4+4 (FreeBSD's PFBAK+PFFOR)"
        ))
    };
    let (b, a) = v.split_once('+').ok_or_else(bad)?;
    let b: u32 = b.trim().parse().map_err(|_| bad())?;
    let a: u32 = a.trim().parse().map_err(|_| bad())?;
    if b > 512 || a > 512 {
        return Err(bad());
    }
    Ok(FaultAround::Spiral {
        behind: b,
        ahead: a,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn khugepaged_limits_default_to_linux_relative_to_the_thp_size() {
        let k = Khugepaged::linux();
        let l = |n| {
            let x = k.limits(n);
            (
                x.pages_to_scan,
                x.max_ptes_none,
                x.max_ptes_swap,
                x.max_ptes_shared,
            )
        };
        // mm/khugepaged.c: HPAGE_PMD_NR * 8, HPAGE_PMD_NR - 1, / 8, / 2.
        assert_eq!(l(512), (4096, 511, 64, 256));
        assert_eq!(l(8), (64, 7, 1, 4));
        let mut k = k.clone();
        k.max_ptes_swap = Some(3);
        k.pages_to_scan = Some(100);
        assert_eq!(k.limits(512).max_ptes_swap, 3);
        assert_eq!(k.limits(512).pages_to_scan, 100);
        assert_eq!((k.scan_sleep_ms, k.alloc_sleep_ms), (10_000, 60_000));
    }

    /// Linux's fault_around_bytes is one page to PTRS_PER_PTE pages (mm/memory.c
    /// `fault_around_bytes_set`): `fault_around=1` was taken as a 1-byte window, mapping
    /// nothing, and 4M was cut to 2M without a word.
    #[test]
    fn fault_around_is_one_page_to_a_page_table() {
        let sky = crate::hw::Machine::from_spec("skylake").unwrap();
        let alpha = crate::hw::Machine::from_spec("alpha21264").unwrap();
        for (spec, m, ok) in [
            ("base:fault_around=1", &sky, false),
            ("base:fault_around=2K", &sky, false),
            ("base:fault_around=4K", &sky, true),
            ("base:fault_around=2M", &sky, true),
            ("base:fault_around=4M", &sky, false),
            ("linux:fault_around=4K", &alpha, false),
            ("base:fault_around=8K", &alpha, true),
            ("base:fault_around=4M", &alpha, true),
            ("base:fault_around=off", &sky, true),
        ] {
            let mut p = Policy::from_spec(spec).unwrap();
            match p.resolve(m) {
                Ok(()) => assert!(ok, "{spec} on {} accepted", m.name),
                Err(e) => {
                    let e = e.to_string();
                    assert!(!ok, "{spec} on {}: {e}", m.name);
                    assert!(
                        e.starts_with(&format!("policy '{spec}': fault_around="))
                            && e.contains(&m.name)
                            && e.contains("512 pages"),
                        "{e}"
                    );
                }
            }
        }
    }

    #[test]
    fn no_preset_description_repeats_a_clause() {
        // `splab list policies` prints these; a clause said twice is an editing slip.
        for (name, about) in POLICIES {
            let clauses: Vec<&str> = about.split("; ").map(str::trim).collect();
            for (i, c) in clauses.iter().enumerate() {
                assert!(
                    !clauses[..i].contains(c),
                    "{name}: '{c}' is said twice: {about}"
                );
            }
        }
    }

    #[test]
    fn parse_policies() {
        assert_eq!(
            Policy::from_spec("base").unwrap().alloc,
            AllocPolicy::BasePage
        );
        for name in ["base", "navarro", "freebsd"] {
            assert!(
                POLICIES.iter().any(|p| p.0 == name),
                "{name} missing from POLICIES"
            );
            Policy::from_spec(name).unwrap();
        }
        let e = Policy::from_spec("solaris").unwrap_err().to_string();
        assert!(e.contains("'solaris'") && e.contains("base"), "{e}");
        assert!(Policy::from_spec("base:x=1").is_err());
        let m = crate::hw::Machine::from_spec("alpha21264").unwrap();
        let mut p = Policy::from_spec("navarro:sizes=4M+64K").unwrap();
        p.resolve(&m).unwrap();
        assert_eq!(p.reserv().unwrap().classes, vec![1, 3]);
        let mut p = Policy::from_spec("navarro:sizes=2M").unwrap();
        let e = p.resolve(&m).unwrap_err().to_string();
        assert!(e.contains("2M") && e.contains("64K, 512K, 4M"), "{e}");
        assert!(Policy::from_spec("navarro:sizes=64K+x").is_err());
        // A repeated size is a typo, not a request: refused with the size named.
        let e = Policy::from_spec("navarro:sizes=64K+64K")
            .unwrap_err()
            .to_string();
        assert!(e.contains("64K") && e.contains("twice"), "{e}");
        let mut p = Policy::from_spec("navarro").unwrap();
        p.resolve(&crate::hw::Machine::from_spec("skylake").unwrap())
            .unwrap();
        assert_eq!(p.reserv().unwrap().classes, vec![1, 2]);
        // seed 000 6.6's overhead mode, on any reserving policy.
        for (v, want) in [
            ("yes", Promote::Yes),
            ("overhead", Promote::Overhead),
            ("no", Promote::No),
        ] {
            let p = Policy::from_spec(&format!("freebsd:promote={v}")).unwrap();
            assert_eq!(p.reserv().unwrap().promote, want);
        }
        assert_eq!(
            Policy::from_spec("navarro")
                .unwrap()
                .reserv()
                .unwrap()
                .promote,
            Promote::Yes
        );
        let e = Policy::from_spec("navarro:promote=never")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'never'") && e.contains("overhead"), "{e}");
        assert!(Policy::from_spec("base:promote=no").is_err());
        // seed 000 4.7 / 6.7: dirty= on any reserving policy; whole and hash keep the superpage.
        for (v, want, cw) in [
            ("trap", Dirty::Trap, CleanWrite::DemoteOnTrap),
            ("whole", Dirty::Whole, CleanWrite::MarkDirty),
            ("hash", Dirty::Hash, CleanWrite::MarkDirty),
        ] {
            let p = Policy::from_spec(&format!("navarro:dirty={v}")).unwrap();
            assert_eq!(
                (p.reserv().unwrap().dirty, p.reserv().unwrap().clean_write),
                (want, cw)
            );
        }
        let p = Policy::from_spec("freebsd:dirty=whole").unwrap();
        assert_eq!(p.reserv().unwrap().clean_write, CleanWrite::MarkDirty);
        let p = Policy::from_spec("freebsd").unwrap();
        assert_eq!(
            (p.reserv().unwrap().dirty, p.reserv().unwrap().clean_write),
            (Dirty::Trap, CleanWrite::WriteProtect)
        );
        let e = Policy::from_spec("navarro:dirty=sha1")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'sha1'") && e.contains("whole") && e.contains("hash"),
            "{e}"
        );
        assert!(Policy::from_spec("base:dirty=whole").is_err());
        // A daemon's parameter with the daemon turned off: said so, where it was reported as
        // an unknown parameter, listed as valid nowhere in the message.
        for (spec, key, daemon) in [
            (
                "linux:kcompactd=false,compaction_proactiveness=50",
                "compaction_proactiveness",
                "kcompactd",
            ),
            (
                "linux:khugepaged=false,max_ptes_none=5",
                "max_ptes_none",
                "khugepaged",
            ),
            (
                "navarro:scan_sleep_millisecs=100",
                "scan_sleep_millisecs",
                "khugepaged",
            ),
        ] {
            let e = Policy::from_spec(spec).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{key} is {daemon}'s, and {daemon} is off"))
                    && !e.contains("unknown parameter"),
                "{spec}: {e}"
            );
        }
        Policy::from_spec("navarro:khugepaged=true,scan_sleep_millisecs=100").unwrap();
    }
}
