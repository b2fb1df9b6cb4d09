//! The hardware model: TLB hierarchy, page-walk model, machine presets and cost constants.
//! Knows nothing of policies or of the OS's data structures.

pub mod machine;
pub mod tlb;
pub mod walk;

pub use machine::{Machine, MACHINES};
pub use tlb::{Lookup, Tlb, Translation};
pub use walk::Walker;

/// The hardware state the OS model drives: one CPU's TLBs and walker.
#[derive(Clone, Debug)]
pub struct Hw {
    pub tlb: Tlb,
    pub walker: Walker,
}

impl Hw {
    pub fn new(m: &Machine) -> Hw {
        Hw {
            tlb: Tlb::new(&m.tlb, &m.page_shifts),
            walker: Walker::new(&m.walk, m.base_shift()),
        }
    }
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
