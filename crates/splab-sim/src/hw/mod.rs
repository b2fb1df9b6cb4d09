//! The hardware model: TLB hierarchy, page-walk model, data caches and their prefetcher, the
//! out-of-order core, machines (the presets are built-in machine files) and cost constants.
//! Knows nothing of policies or of the OS's data structures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub mod cache;
pub mod core;
pub mod host_frames;
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
#[derive(Debug)]
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
        let mut caches = Caches::new(&m.caches);
        caches.set_pair_fill(m.pair_lines);
        caches.set_pair_recent(m.pair_recent);
        let mut core = Core::new(&m.core);
        let curve = |level: usize| {
            m.cache_lifetime_curves
                .get(level)
                .map_or(&[][..], |c| &c[..])
        };
        if m.cache_lifetimes.iter().any(Option::is_some) || !m.cache_lifetime_curves.is_empty() {
            // The caches' line lifetimes run on the core's dispatch clock, which the core
            // publishes (`Core::set_clock`) only when some level has one.
            let clock = Arc::new(AtomicU64::new(0));
            core.set_clock(clock.clone());
            for level in 0..m.caches.levels.len() {
                let life = m.cache_lifetimes.get(level).copied().flatten();
                if life.is_none() && curve(level).is_empty() {
                    continue;
                }
                // A curve replaces the threshold (`u64::MAX`: none without `lifetime_ns`).
                let t = core.ticks_per_cycle();
                caches.set_lifetime(level, life.unwrap_or(u64::MAX), clock.clone(), t);
                if !curve(level).is_empty() {
                    caches.set_lifetime_curve(level, curve(level), t);
                }
            }
        }
        Hw {
            tlb: Tlb::new(&m.tlb, &m.page_shifts),
            walker,
            caches,
            core,
            prefetcher: Prefetcher::new(&m.prefetch),
        }
    }
}

impl Clone for Hw {
    /// A field-by-field clone, except that a clone whose caches have line lifetimes gets a
    /// clock of its own (its core's and its caches', not the original's).
    fn clone(&self) -> Hw {
        let mut h = Hw {
            tlb: self.tlb.clone(),
            walker: self.walker.clone(),
            caches: self.caches.clone(),
            core: self.core.clone(),
            prefetcher: self.prefetcher.clone(),
        };
        if let Some(c) = self.core.clock() {
            let clock = Arc::new(AtomicU64::new(c.load(Ordering::Relaxed)));
            h.core.set_clock(clock.clone());
            h.caches.relink_clock(&clock);
        }
        h
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A lifetime curve alone (no `lifetime_ns`) times its level: from a share of 1 at every
    /// age on, a line untouched for a cycle is gone.
    #[test]
    fn a_lifetime_curve_alone_times_its_level() {
        let text = machine_file::built_in("skylake").unwrap().replacen(
            "latency = 4\n",
            "latency = 4\nlifetime_curve_ns = [[1, 1.0]]\n",
            1,
        );
        let m = machine_file::parse(&text, "t.toml").unwrap().machine;
        assert!(m.cache_lifetimes.is_empty());
        let mut h = Hw::new(&m);
        assert!(h.caches.timed());
        assert_eq!(h.caches.access(5), 3, "cold: DRAM");
        assert_eq!(h.caches.access(5), 0, "age 0: an L1 hit");
        h.core.clock().unwrap().store(1 << 20, Ordering::Relaxed);
        assert_eq!(h.caches.access(5), 1, "gone from L1: from L2");
        assert_eq!(h.caches.stats()[0].expired, 1);
    }

    #[test]
    fn a_clone_with_line_lifetimes_runs_on_its_own_clock() {
        let text = machine_file::built_in("skylake").unwrap().replacen(
            "latency = 42\n",
            "latency = 42\nlifetime_ns = 1000000\n",
            1,
        );
        let m = machine_file::parse(&text, "t.toml").unwrap().machine;
        let h = Hw::new(&m);
        assert!(h.caches.timed());
        let c = h.clone();
        let (a, b) = (h.core.clock().unwrap(), c.core.clock().unwrap());
        assert!(
            !Arc::ptr_eq(a, b),
            "a clone shares no clock with the original"
        );
        // And its caches read its clock: the original's running far ahead expires nothing
        // in the clone (a lifetime on L1 here, so one access reaches the timed level).
        let text = machine_file::built_in("skylake").unwrap().replacen(
            "latency = 4\n",
            "latency = 4\nlifetime_ns = 1000\n",
            1,
        );
        let m = machine_file::parse(&text, "l1.toml").unwrap().machine;
        let mut h = Hw::new(&m);
        assert_eq!(h.caches.access(5), 3, "cold: DRAM");
        let mut c = h.clone();
        h.core
            .clock()
            .unwrap()
            .store(u64::MAX / 2, Ordering::Relaxed);
        assert_eq!(
            c.caches.access(5),
            0,
            "the clone's clock has not moved: an L1 hit"
        );
        assert_eq!(
            h.caches.access(5),
            1,
            "the original's L1 line expired: from L2"
        );
        let plain = Hw::new(
            &machine_file::parse(machine_file::built_in("skylake").unwrap(), "s")
                .unwrap()
                .machine,
        );
        assert!(plain.core.clock().is_none() && !plain.caches.timed());
    }
}
