//! Machine presets: page sizes, TLB hierarchy, walk model, memory size and the cost model.
//!
//! Every constant cites its source. Where a value is not published (page-walk cache sizes, the
//! bookkeeping part of a page fault), the comment says so and gives where the value came from;
//! `docs/constants.md` collects them in one table.

use serde::Serialize;

use super::cache::{CacheLevelConfig, CachesConfig, Replacement};
use super::core::CoreConfig;
use super::tlb::{ArrayConfig, LevelConfig, TlbConfig, TlbReplacement};
use super::walk::WalkConfig;
use crate::error::{Result, SimError};
use crate::spec::Spec;

/// The storage device behind file-backed memory (and, later, swap).
#[derive(Clone, Debug, Serialize)]
pub struct StorageConfig {
    pub name: String,
    /// Latency of one random read request, in nanoseconds.
    pub read_latency_ns: u64,
    /// Sustained transfer rate, bytes per second.
    pub bytes_per_sec: u64,
    /// Size of the swap area on it (`swap=SIZE`; default twice the memory, the old BSD
    /// installers' rule of thumb; 0 = no swap).
    pub swap_bytes: u64,
}

/// Cycle costs of the OS operations the model charges.
#[derive(Clone, Debug, Serialize)]
pub struct CostConfig {
    /// Base cycles of one memory access that hits the L1 TLB (the workload's own work).
    pub access_cycles: u64,
    /// Trap into the kernel and return, plus the fault handler's bookkeeping, for one fault.
    pub fault_cycles: u64,
    /// Zeroing one base page, one page at a time (temporal stores).
    pub zero_page_cycles: u64,
    /// Zeroing a whole superpage in bulk, per base page (non-temporal bulk zeroing).
    pub zero_bulk_page_cycles: u64,
    /// Copying one base page (COW, migration, collapse).
    pub copy_page_cycles: u64,
    /// Writing one page-table entry (promotion / demotion / protection change).
    pub pte_write_cycles: u64,
    /// Invalidating one TLB entry (invlpg or the PALcode equivalent).
    pub tlb_invalidate_cycles: u64,
    /// The superpage bookkeeping (seed 000 4.8, 4.9), per operation. All measured as x86-64
    /// instructions of the operation written as FreeBSD writes it (`scripts/kernel-ops.c`,
    /// gcc 12 -O2, valgrind callgrind), charged at one instruction per cycle (an assumption;
    /// docs/constants.md 7), the same on every machine.
    /// One population-map level looked up or updated: a hash lookup of (object, index) and its
    /// somepop / fullpop counters (27.2 instructions).
    pub popmap_level_cycles: u64,
    /// A page marked populated in its reservation: bit, popcnt, free-extent counts of the sizes
    /// below, move to the list's tail (FreeBSD vm_reserv_populate; 146.3 instructions).
    pub reserv_populate_cycles: u64,
    /// A page marked unpopulated (vm_reserv_depopulate; 119.6 instructions).
    pub reserv_depopulate_cycles: u64,
    /// A new reservation: from the pool, its fields, a cleared 4MB popmap, its array slot
    /// (59.0 instructions).
    pub reserv_create_cycles: u64,
    /// One piece of a preempted or broken reservation: its population from the bitmap, then
    /// freed to a buddy list or re-reserved at a list head (seed 000 4.8; 58.0 instructions).
    pub reserv_piece_cycles: u64,
    /// SHA-1 over one 64-byte block, scalar integer code (a kernel does not use the vector
    /// registers), for seed 000 4.7's hash digests of base pages (`policy dirty=hash`). From
    /// OpenSSL's per-CPU cycles/byte of its hand-tuned SHA-1 (docs/constants.md 11).
    pub sha1_block_cycles: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub name: String,
    pub description: String,
    /// Byte shifts of the page sizes: `[base, superpages...]`, increasing.
    pub page_shifts: Vec<u8>,
    pub freq_hz: u64,
    pub mem_bytes: u64,
    /// Bits of user virtual address space (the 21264 implements 43; 32-bit paging 32).
    pub va_bits: u8,
    pub tlb: TlbConfig,
    pub walk: WalkConfig,
    /// Data caches (shared with page-table lines) and DRAM latency.
    pub caches: CachesConfig,
    /// The out-of-order core that overlaps misses.
    pub core: CoreConfig,
    /// Superpages are represented by replicating the PTE once per base page (Alpha, PA-RISC):
    /// promoting or demoting rewrites every base PTE (seed 000 6.1; seed 002 4).
    pub replicated_ptes: bool,
    pub cost: CostConfig,
    pub storage: StorageConfig,
}

pub const MACHINES: &[&str] = &["alpha21264", "pa8000", "core2", "skylake"];

impl Machine {
    pub fn base_shift(&self) -> u8 {
        self.page_shifts[0]
    }
    pub fn base_size(&self) -> u64 {
        1 << self.page_shifts[0]
    }
    /// Buddy order of size class `c`.
    pub fn order_of(&self, c: usize) -> u8 {
        self.page_shifts[c] - self.page_shifts[0]
    }
    pub fn max_order(&self) -> u8 {
        self.order_of(self.page_shifts.len() - 1)
    }
    pub fn page_sizes(&self) -> Vec<u64> {
        self.page_shifts.iter().map(|&s| 1u64 << s).collect()
    }
    pub fn frames(&self) -> u64 {
        self.mem_bytes >> self.base_shift()
    }
    pub fn ns_to_cycles(&self, ns: u64) -> u64 {
        (ns as u128 * self.freq_hz as u128 / 1_000_000_000) as u64
    }
    /// Cycles to read `bytes` from the storage device in one request.
    pub fn io_cycles(&self, bytes: u64) -> u64 {
        let ns = self.storage.read_latency_ns
            + (bytes as u128 * 1_000_000_000 / self.storage.bytes_per_sec.max(1) as u128) as u64;
        self.ns_to_cycles(ns)
    }

    /// Parses `NAME[:mem=SIZE]`.
    pub fn from_spec(text: &str) -> Result<Machine> {
        let mut spec = Spec::parse("machine", text)?;
        let mut m = match spec.name.as_str() {
            "alpha21264" => alpha21264(),
            "pa8000" => pa8000(),
            "core2" => core2(),
            "skylake" => skylake(),
            _ => return Err(spec.unknown_name(MACHINES)),
        };
        // At least one page of the largest size; at most 1TB (2^28 frames of 4KB).
        let min = 1u64 << m.page_shifts[m.page_shifts.len() - 1];
        let mem = spec.take_size("mem", m.mem_bytes, min, 1 << 40)?;
        if mem % (1u64 << m.page_shifts[m.page_shifts.len() - 1]) != 0 {
            return Err(SimError::BadInput(format!(
                "machine '{}': mem={} is not a multiple of the largest page size ({})",
                m.name,
                crate::units::fmt_size(mem),
                crate::units::fmt_size(1 << m.page_shifts[m.page_shifts.len() - 1])
            )));
        }
        m.mem_bytes = mem;
        m.storage.swap_bytes = spec.take_size("swap", 2 * mem, 0, 1 << 42)?;
        spec.finish()?;
        Ok(m)
    }
}

fn fa(sizes: &[u8], entries: u32) -> ArrayConfig {
    ArrayConfig {
        sizes: sizes.to_vec(),
        entries,
        ways: entries,
        replacement: TlbReplacement::Lru,
    }
}
fn cl(
    name: &str,
    size_bytes: u64,
    ways: u32,
    latency: u64,
    replacement: Replacement,
) -> CacheLevelConfig {
    CacheLevelConfig {
        name: name.into(),
        size_bytes,
        ways,
        latency,
        replacement,
    }
}
fn sa(sizes: &[u8], entries: u32, ways: u32) -> ArrayConfig {
    ArrayConfig {
        sizes: sizes.to_vec(),
        entries,
        ways,
        replacement: TlbReplacement::Lru,
    }
}
/// A fully associative array with round-robin allocation.
fn fa_round_robin(sizes: &[u8], entries: u32) -> ArrayConfig {
    ArrayConfig {
        replacement: TlbReplacement::RoundRobin,
        ..fa(sizes, entries)
    }
}

/// Compaq XP-1000, Alpha 21264 at 500 MHz, 512MB (seed 000 6.1).
pub fn alpha21264() -> Machine {
    let mhz = 500;
    Machine {
        name: "alpha21264".into(),
        description: "Compaq XP-1000: Alpha 21264 500 MHz, 8K pages + 64K/512K/4M, 128-entry FA DTLB, PALcode refill (seed 000 6.1)".into(),
        // seed 000 2.2 / 6.1: 8KB base pages, 64KB, 512KB and 4MB superpages.
        page_shifts: vec![13, 16, 19, 22],
        freq_hz: mhz * 1_000_000,
        mem_bytes: 512 << 20, // seed 000 6.1
        // 21264 HRM 2.1: 43-bit virtual addresses with 8KB pages
        va_bits: 43,
        tlb: TlbConfig {
            // seed 000 6.1: fully associative, 128 entries for data and 128 for instructions,
            // each entry any of the four page sizes (21264 Hardware Reference Manual 2.1.2.2).
            // 21264/EV68A HRM 2.1.1.3 (ITB) and 2.1.6.4 (DTB): 128 entries, fully associative,
            // "The allocation scheme is round-robin."
            // (https://manualsdump.com/en/manuals/compaq-ev68a/128831/33 and .../41)
            l1d: LevelConfig { name: "DTB".into(), arrays: vec![fa_round_robin(&[0, 1, 2, 3], 128)], hit_cycles: 0 },
            l1i: Some(LevelConfig { name: "ITB".into(), arrays: vec![fa_round_robin(&[0, 1, 2, 3], 128)], hit_cycles: 0 }),
            lower: vec![],
        },
        // seed 000 6.1: "software page tables, with firmware-based TLB loader"; one PTE load per
        // miss from the replicated, virtually mapped page table, whose leaf pages belong to the
        // OS's three-level table (8KB pages of 1024 8-byte entries: 21264 HRM 2.1, shifts 33 /
        // 23 / 13). Handler cost: see docs/constants.md.
        walk: WalkConfig::Software {
            // 21264 HRM Table 2-1: a DTB miss aborts the pipeline for 13 cycles; the PALcode body
            // besides its PTE load is not published: ~10 cycles assumed (docs/constants.md).
            handler_cycles: 13 + 10,
            level_shifts: vec![33, 23, 13],
            pte_refs: 1,
            pte_bytes: 8,
        },
        caches: CachesConfig {
            levels: vec![
                // seed 000 6.1 and 21264 HRM 2.1.5.2: 64KB 2-way Dcache with round-robin
                // replacement, 3-cycle load-to-use (HRM Table 2-4; docs/constants.md 6.1).
                cl("L1D", 64 << 10, 2, 3, Replacement::RoundRobin),
                // seed 000 6.1: 4MB direct-mapped external Bcache; HRM Table 2-4: 13 cycles
                // for a load that misses the Dcache and hits a 6-cycle Bcache.
                cl("Bcache", 4 << 20, 1, 13, Replacement::Plru),
            ],
            // XP-1000 DRAM latency not published: ~170ns = 85 cycles assumed (docs/constants.md).
            dram_latency: 85,
        },
        core: CoreConfig {
            // docs/constants.md 6.1: 80 in-flight instructions (HRM 2.1.1.1), 4-wide (Kessler,
            // IEEE Micro 1999), 8-entry miss address file (HRM 2.1.6.3).
            window: 80,
            width: 4,
            mshrs: 8,
            walkers: 1,
            // XP-1000 bandwidth not published: ~1GB/s assumed (docs/constants.md 6.1), 2 B/cycle.
            // The 21264 has no hardware prefetcher, but 8 misses of 64 bytes per 85 cycles
            // (6 B/cycle) exceed that bandwidth, so sequential runs are bandwidth-bound anyway.
            stream_bytes_per_cycle: 2.0,
        },
        replicated_ptes: true,
        // No published fault or bandwidth figures for the XP-1000 (docs/constants.md): zeroing
        // 8KB at an assumed ~1GB/s is 8us = 4000 cycles, copying twice that; the trap and
        // bookkeeping of a FreeBSD 4 fault assumed ~5us. PTE write: FreeBSD's Alpha pmap reaches
        // each PTE through pmap_lev1pte / lev2pte / lev3pte (pmap_protect) and rewrites it: 29
        // x86-64 instructions measured (scripts/kernel-ops.c, op_pte_rewrite), at one per cycle
        // (docs/constants.md 7). Superpage bookkeeping: see CostConfig.
        cost: CostConfig {
            access_cycles: 1,
            fault_cycles: 2_500,
            zero_page_cycles: 4_000,
            zero_bulk_page_cycles: 4_000,
            copy_page_cycles: 8_000,
            pte_write_cycles: 29,
            tlb_invalidate_cycles: 20,
            popmap_level_cycles: 27,
            reserv_populate_cycles: 146,
            reserv_depopulate_cycles: 120,
            reserv_create_cycles: 59,
            reserv_piece_cycles: 58,
            // OpenSSL crypto/sha/asm/sha1-alpha.pl: "On 21264 ... 8.7 cycles per processed byte":
            // 8.7 x 64 = 557 per block (hand-tuned; seed 000's 2002 kernel C would be slower).
            sha1_block_cycles: 557,
        },
        // 10k rpm SCSI disk of 2002: 3ms rotational latency (60s/10000/2) + ~5ms seek assumed,
        // ~30MB/s sequential assumed (docs/constants.md).
        storage: StorageConfig { name: "2002 SCSI disk".into(), read_latency_ns: 8_000_000, bytes_per_sec: 30_000_000, swap_bytes: 0 },
    }
}

/// HP 9000 Series 800 with a 180 MHz PA-8000 (seed 002 9).
pub fn pa8000() -> Machine {
    Machine {
        name: "pa8000".into(),
        description: "HP 9000/800: PA-8000 180 MHz, 4K pages + 16K..64M (x4), 96-entry FA unified TLB, 70-cycle software miss handler (seed 002 9)".into(),
        // seed 002 1: 4KB base, 16KB, 64KB, 256KB, 1MB, 4MB, 16MB, 64MB.
        page_shifts: vec![12, 14, 16, 18, 20, 22, 24, 26],
        freq_hz: 180_000_000,
        // seed 002 does not state the memory size; its largest footprint is ~213MB (Table 4),
        // run "under no-paging conditions": 1GB assumed.
        mem_bytes: 1 << 30,
        // 64-bit HP-UX; 48 bits are plenty for the workloads
        va_bits: 48,
        tlb: TlbConfig {
            // seed 002 9: "96 combined data and instruction TLB entries".
            l1d: LevelConfig { name: "TLB".into(), arrays: vec![fa(&[0, 1, 2, 3, 4, 5, 6, 7], 96)], hit_cycles: 0 },
            l1i: None,
            lower: vec![],
        },
        // seed 002 9, Table 2: "average miss handling overhead of 70 cycles for a PA-8000"; that
        // average already includes the hashed pdir access, so no separate reference is charged.
        // HP-UX's pdir is one hashed table allocated at boot, not per-process pages: no
        // page-table pages are modelled (level_shifts empty).
        walk: WalkConfig::Software {
            handler_cycles: 70,
            level_shifts: vec![],
            pte_refs: 0,
            pte_bytes: 16,
        },
        caches: CachesConfig {
            // PA-8000: no on-chip cache; off-chip 1MB direct-mapped data cache (docs/constants.md
            // 2), 3-cycle latency taken from the sibling PA-8600 (7-cpu.com).
            levels: vec![cl("Dcache", 1 << 20, 1, 3, Replacement::Plru)],
            // PA-8600 J6000 (7-cpu.com): ~220ns to RAM = 40 cycles at 180 MHz (sibling part,
            // docs/constants.md 6.2).
            dram_latency: 40,
        },
        core: CoreConfig {
            // docs/constants.md 6.2: 56-entry instruction reorder buffer and 4-wide insert
            // (Gaddis et al., ISSCC 1996); 6 outstanding misses (Runway bus: six pending
            // transactions; low confidence).
            window: 56,
            width: 4,
            mshrs: 6,
            walkers: 1,
            // ~500MB/s (docs/constants.md 6.2): 2.8 B/cycle at 180 MHz; no hardware prefetcher,
            // but 6 x 64 bytes per 40 cycles exceeds that bandwidth.
            stream_bytes_per_cycle: 2.8,
        },
        replicated_ptes: true,
        // Memory bandwidth ~500MB/s assumed (Runway bus peak 768MB/s, docs/constants.md):
        // zeroing 4KB ~8us = 1500 cycles at 180MHz, copying twice that. Fault trap and
        // bookkeeping ~8us assumed. PTE write: as the Alpha's (a per-page walk to the entry, 29
        // instructions; HP-UX's hashed pdir lookup is not measured, docs/constants.md 7).
        cost: CostConfig {
            access_cycles: 1,
            fault_cycles: 1_500,
            zero_page_cycles: 1_500,
            zero_bulk_page_cycles: 1_500,
            copy_page_cycles: 3_000,
            pte_write_cycles: 29,
            tlb_invalidate_cycles: 20,
            popmap_level_cycles: 27,
            reserv_populate_cycles: 146,
            reserv_depopulate_cycles: 120,
            reserv_create_cycles: 59,
            reserv_piece_cycles: 58,
            // No published SHA-1 rate for the PA-8000 (OpenSSL sha1-parisc.pl gives none): the
            // 21264's 8.7 cycles/byte assumed, a 4-wide out-of-order RISC of the same years.
            sha1_block_cycles: 557,
        },
        // 7200 rpm SCSI: 4.2ms rotation (derived) + ~8ms seek assumed; ~10MB/s assumed.
        storage: StorageConfig { name: "1998 SCSI disk".into(), read_latency_ns: 12_000_000, bytes_per_sec: 10_000_000, swap_bytes: 0 },
    }
}

/// Intel Core 2 Duo at 2.33 GHz (seed 004 5.1), 32-bit paging with 4MB large pages.
pub fn core2() -> Machine {
    Machine {
        name: "core2".into(),
        description: "Intel Core 2 Duo 2.33 GHz: 4K + 4M pages, 256-entry 4-way (4K) + 32-entry 4-way (4M) DTLB, 2-level walk (seed 004 5.1)".into(),
        page_shifts: vec![12, 22],
        freq_hz: 2_330_000_000,
        // seed 004 does not state the memory size: 2GB assumed.
        mem_bytes: 2 << 30,
        // 32-bit paging (Intel SDM vol. 3 4.3), the mode with 4MB pages
        va_bits: 32,
        tlb: TlbConfig {
            // seed 004 5.1: "a 4-way TLB with 256 entries for 4KB pages and a 4-way TLB with 32
            // entries for large pages".
            l1d: LevelConfig { name: "DTLB".into(), arrays: vec![sa(&[0], 256, 4), sa(&[1], 32, 4)], hit_cycles: 0 },
            l1i: None,
            lower: vec![],
        },
        // 32-bit non-PAE paging: page directory (VA >> 22) and page table (VA >> 12), 4-byte
        // entries (Intel SDM vol. 3 4.3). PDE cache size: see docs/constants.md.
        walk: WalkConfig::Radix {
            level_shifts: vec![22, 12],
            pwc_entries: vec![16],
            pte_bytes: 4,
        },
        caches: CachesConfig {
            levels: vec![
                // Optimization Reference Manual 2.1.4: 32KB 8-way L1D; 3 cycles (docs/constants.md).
                cl("L1D", 32 << 10, 8, 3, Replacement::Plru),
                // Shared 4MB 16-way L2, 14 cycles measured on a 65nm Core 2 (docs/constants.md).
                cl("L2", 4 << 20, 16, 14, Replacement::Plru),
            ],
            // DRAM ~75ns = 175 cycles beyond the L2 assumed (docs/constants.md).
            dram_latency: 14 + 175,
        },
        core: CoreConfig {
            // docs/constants.md 6.3: 96-entry ROB (Optimization Manual 2.4.3), 4-wide, 8 L1D
            // fill buffers (RealWorldTech), one page walk at a time.
            window: 96,
            width: 4,
            mshrs: 8,
            walkers: 1,
            // docs/constants.md 6.3: ~5GB/s sustained (< 6GiB/s measured on FSB1066, hexus):
            // 2.1 B/cycle at 2.33 GHz.
            stream_bytes_per_cycle: 2.1,
        },
        replicated_ptes: false,
        // Zeroing 4KB at ~4.5GB/s (hexus: < 6GiB/s measured on FSB1066) is ~0.9us = 2100
        // cycles; copying twice that. Fault trap + bookkeeping ~1.5us assumed. PTE write: the
        // entries of a table filled in a loop (Linux __split_huge_pmd_locked), 4.5 x86-64
        // instructions per entry measured (scripts/kernel-ops.c, op_pte_fill), at one per cycle.
        cost: CostConfig {
            access_cycles: 1,
            fault_cycles: 3_500,
            zero_page_cycles: 2_100,
            zero_bulk_page_cycles: 2_100,
            copy_page_cycles: 4_200,
            pte_write_cycles: 5,
            tlb_invalidate_cycles: 100,
            popmap_level_cycles: 27,
            reserv_populate_cycles: 146,
            reserv_depopulate_cycles: 120,
            reserv_create_cycles: 59,
            reserv_piece_cycles: 58,
            // OpenSSL crypto/sha/asm/sha1-x86_64.pl table, Core2, x86_64 (scalar): 6.70
            // cycles/byte, x 64 = 429 per block.
            sha1_block_cycles: 429,
        },
        // A 2007 7200 rpm SATA disk: 4.2ms rotation + ~8ms seek assumed, ~70MB/s assumed.
        storage: StorageConfig { name: "SATA disk".into(), read_latency_ns: 12_000_000, bytes_per_sec: 70_000_000, swap_bytes: 0 },
    }
}

/// Intel Xeon E3-1245 v6 (Kaby Lake, Skylake microarchitecture) at 3.7 GHz, 32GB, NVMe
/// (seed 003 4).
pub fn skylake() -> Machine {
    Machine {
        name: "skylake".into(),
        description: "Xeon E3-1245 v6 (Kaby Lake) 3.7 GHz: 4K + 2M + 1G pages, L1 DTLB 64/32/4 + 1536-entry STLB, 4-level walk with PWCs, 32GB, NVMe (seed 003 4)".into(),
        page_shifts: vec![12, 21, 30],
        freq_hz: 3_700_000_000,
        mem_bytes: 32 << 30, // seed 003 4: 32GB DDR4 2400
        // 4-level paging: 48-bit virtual addresses (Intel SDM vol. 3 4.5)
        va_bits: 48,
        tlb: TlbConfig {
            // Intel 64 and IA-32 Optimization Reference Manual, Table 2-5 (Skylake client):
            // DTLB 64 entries 4-way (4K), 32 entries 4-way (2M/4M), 4 entries FA (1G);
            // STLB 1536 entries 12-way shared by 4K and 2M, 16 entries 4-way for 1G.
            l1d: LevelConfig { name: "L1D".into(), arrays: vec![sa(&[0], 64, 4), sa(&[1], 32, 4), fa(&[2], 4)], hit_cycles: 0 },
            l1i: Some(LevelConfig { name: "L1I".into(), arrays: vec![sa(&[0], 128, 8), fa(&[1], 8)], hit_cycles: 0 }),
            // STLB hit: 9 cycles (7-cpu.com, Skylake: "L1 DTLB miss, L2 TLB hit").
            lower: vec![LevelConfig { name: "STLB".into(), arrays: vec![sa(&[0, 1], 1536, 12), sa(&[2], 16, 4)], hit_cycles: 9 }],
        },
        // 4-level radix (Intel SDM vol. 3 4.5), 8-byte entries; page-walk cache sizes are not
        // published by Intel: see docs/constants.md.
        walk: WalkConfig::Radix {
            level_shifts: vec![39, 30, 21, 12],
            pwc_entries: vec![2, 4, 32],
            pte_bytes: 8,
        },
        caches: CachesConfig {
            levels: vec![
                // 7-cpu.com Skylake and the Optimization Manual's cache table: 32KB 8-way L1D
                // 4 cycles, 256KB 4-way L2 12 cycles, 8MB 16-way L3 42 cycles (E3-1245 v6: 8MB).
                cl("L1D", 32 << 10, 8, 4, Replacement::Plru),
                cl("L2", 256 << 10, 4, 12, Replacement::Plru),
                cl("LLC", 8 << 20, 16, 42, Replacement::Nru),
            ],
            // 7-cpu.com Skylake: L3 latency + 51ns = 42 + 189 cycles at 3.7 GHz.
            dram_latency: 42 + 189,
        },
        core: CoreConfig {
            // docs/constants.md 6.4: 224-entry ROB, 4-wide rename/allocate, 10 L1D fill buffers
            // (measured by Lemire; 12 is also quoted), "two page walks in parallel" (Intel
            // Optimization Manual, Skylake).
            window: 224,
            width: 4,
            mshrs: 10,
            walkers: 2,
            // DDR4-2400 dual channel peak 38.4GB/s; single-core sustained ~18GB/s (scaled from
            // a 25.4GB/s single-thread reading on an i7-6700K; docs/constants.md 6.4): 4.9
            // B/cycle at 3.7 GHz. Low confidence.
            stream_bytes_per_cycle: 4.9,
        },
        replicated_ptes: false,
        // A 4KB anonymous fault takes ~1.2us on Linux (derived from seed 003 4 Obs. 1, see
        // docs/constants.md), of which ~0.16us is zeroing: trap + bookkeeping ~1.04us = 3850.
        // PTE write: as core2's (op_pte_fill, 4.5 instructions at one per cycle).
        cost: CostConfig {
            access_cycles: 1,
            fault_cycles: 3_850,
            // seed 003 Table 5, E3-1245v6: 2MB zeroed 4KB at a time (temporal) in 84us, i.e.
            // 164ns = 607 cycles per 4KB; bulk non-temporal 2MB in 71us, 139ns = 513 cycles.
            zero_page_cycles: 607,
            zero_bulk_page_cycles: 513,
            // Copy reads and writes: twice the 4KB zeroing time assumed.
            copy_page_cycles: 1_214,
            pte_write_cycles: 5,
            // Local INVLPG: not published; ~200 cycles assumed (docs/constants.md).
            tlb_invalidate_cycles: 200,
            popmap_level_cycles: 27,
            reserv_populate_cycles: 146,
            reserv_depopulate_cycles: 120,
            reserv_create_cycles: 59,
            reserv_piece_cycles: 58,
            // OpenSSL crypto/sha/asm/sha1-x86_64.pl lists no Skylake: Haswell's scalar 5.98
            // cycles/byte assumed (its predecessor core), x 64 = 383 per block.
            sha1_block_cycles: 383,
        },
        // Samsung 960 EVO 250GB class NVMe (seed 003 does not name its SSD): 14K IOPS at QD1
        // 4KB random read = 71us; 3.2GB/s sequential read (docs/constants.md).
        storage: StorageConfig { name: "NVMe SSD".into(), read_latency_ns: 71_000, bytes_per_sec: 3_200_000_000, swap_bytes: 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_consistent() {
        for name in MACHINES {
            let m = Machine::from_spec(name).unwrap();
            assert!(
                m.page_shifts.windows(2).all(|w| w[0] < w[1]),
                "{name}: page sizes increase"
            );
            assert_eq!(
                m.mem_bytes % (1 << m.page_shifts.last().unwrap()),
                0,
                "{name}"
            );
            for level in std::iter::once(&m.tlb.l1d).chain(m.tlb.lower.iter()) {
                for a in &level.arrays {
                    assert_eq!(a.entries % a.ways, 0, "{name} {}", level.name);
                    assert!(a.sizes.iter().all(|&s| (s as usize) < m.page_shifts.len()));
                }
            }
        }
    }

    #[test]
    fn bad_machine_specs() {
        let e = Machine::from_spec("vax").unwrap_err().to_string();
        assert!(e.contains("'vax'") && e.contains("skylake"), "{e}");
        assert!(Machine::from_spec("skylake:mem=3M").is_err());
        assert!(Machine::from_spec("skylake:memory=1G").is_err());
        assert_eq!(
            Machine::from_spec("skylake:mem=4G").unwrap().mem_bytes,
            4 << 30
        );
    }
}
