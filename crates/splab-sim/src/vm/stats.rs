//! Counters of the VM subsystem, named like the real systems' counters.

use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct FaultStats {
    pub total: u64,
    /// Resolved without I/O.
    pub minor: u64,
    /// Needed I/O (file page-in).
    pub major: u64,
    /// A new zero-filled page.
    pub zero_fill: u64,
    /// Copy-on-write: a private copy of a shared or file page.
    pub cow: u64,
    /// Resolved by changing a mapping's protection only (write-enable of an exclusive page).
    pub protection: u64,
}

#[derive(Clone, Debug, Default)]
pub struct VmStats {
    pub faults: FaultStats,
    pub zeroed_bytes: u64,
    pub copied_bytes: u64,
    pub io_read_bytes: u64,
    pub io_write_bytes: u64,
    /// Requests to the storage device (one per clustered read or write, vm/file.rs), so that
    /// `io_read_bytes / io_read_requests` is the mean request size.
    pub io_read_requests: u64,
    pub io_write_requests: u64,
    /// Promotions and demotions, indexed by the size class created / destroyed.
    pub promotions: Vec<u64>,
    pub demotions: Vec<u64>,
    /// Peak bytes mapped by each size class, over all processes.
    pub mapped_peak: Vec<u64>,
    pub footprint_peak_frames: u64,
    /// Peak bytes mapped by superpages of any size at one time, over all processes.
    pub superpage_peak_bytes: u64,
    pub cycles_fault: u64,
    pub cycles_io: u64,
    /// Kernel work outside faults: munmap, mprotect, fork, promotions outside the fault path.
    pub cycles_kernel: u64,
    /// Of the cycles above (fault and kernel): spent promoting, and demoting (PTE rewrites and
    /// TLB invalidations; with replicated PTEs one write per base page, seed 000 6.1).
    pub cycles_promotion: u64,
    pub cycles_demotion: u64,
    /// Of `cycles_kernel`: superpage bookkeeping, i.e. reservations and population maps (seed
    /// 000 4.8, 4.9; costs in `CostConfig`).
    pub cycles_reservation: u64,
    /// Every fault's latency in cycles, handler and I/O wait (vm/latency.rs).
    pub fault_latency: super::latency::LatencyHistogram,
    /// Page-table pages (wired frames).
    pub pt: super::ptpages::PtStats,
    /// Per-process wired kernel memory (vm/kmem.rs).
    pub kmem: super::kmem::KmemStats,
    /// Pages mapped by fault-around or prefault.
    pub around: super::faultaround::AroundStats,
}
