//! The hardware model: TLB hierarchy, page-walk model, data caches and their prefetcher, the
//! out-of-order core, machines (the presets are built-in machine files) and cost constants.
//! Knows nothing of policies or of the OS's data structures.

pub mod cache;
pub mod core;
pub mod machine;
pub mod machine_file;
pub mod prefetch;
pub mod tlb;
pub mod walk;

pub use cache::Caches;
pub use core::Core;
pub use machine::{Machine, MACHINES};
pub use prefetch::Prefetcher;
pub use tlb::{Lookup, Tlb, Translation};
pub use walk::Walker;

/// The hardware state the OS model drives: one CPU's TLBs, walker, caches and core.
#[derive(Clone, Debug)]
pub struct Hw {
    pub tlb: Tlb,
    pub walker: Walker,
    pub caches: Caches,
    pub core: Core,
    /// The data prefetcher for individual accesses (hw/prefetch.rs).
    pub prefetcher: Prefetcher,
}

impl Hw {
    pub fn new(m: &Machine) -> Hw {
        let mut walker = Walker::new(&m.walk, m.base_shift());
        if let Some(n) = &m.nested {
            walker.set_nested(n, m.mem_bytes);
        }
        Hw {
            tlb: Tlb::new(&m.tlb, &m.page_shifts),
            walker,
            caches: Caches::new(&m.caches),
            core: Core::new(&m.core),
            prefetcher: Prefetcher::new(&m.prefetch),
        }
    }
}

/// Position of `key` in `s` (a TLB set, a walk-cache set).
#[inline]
pub fn find_key(s: &[u64], key: u64) -> Option<usize> {
    s.iter().position(|&k| k == key)
}

/// Position of the smallest value of `s` (the first one on ties), for LRU victims.
#[inline]
pub fn argmin(s: &[u64]) -> usize {
    let mut best = 0;
    let mut min = u64::MAX;
    for (i, &v) in s.iter().enumerate() {
        let lt = v < min;
        min = if lt { v } else { min };
        best = if lt { i } else { best };
    }
    best
}

/// Hints the host CPU to bring `r` into its cache. Affects only the simulator's speed, never a
/// modelled quantity.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults and reads nothing observable, and `r` is a
    // valid reference anyway. Measured: GUPS throughput (splab bench) depends on it.
    unsafe {
        std::arch::x86_64::_mm_prefetch(r as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// `prefetch` of a raw address, which need not point into a live object (a prefetch never
/// faults and reads nothing observable); lets callers skip bounds checks on hints.
#[inline(always)]
pub fn prefetch_ptr<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
