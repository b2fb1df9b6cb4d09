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

/// A latency histogram with 32 sub-buckets per power of two (relative error under 3.2%).
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    buckets: Vec<u64>,
    pub count: u64,
    pub max: u64,
}

const SUB: u64 = 32;

impl Histogram {
    fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros() as u64; // >= 5
        let mant = (v >> (exp - 5)) & (SUB - 1);
        ((exp - 4) * SUB + mant) as usize
    }

    fn bucket_low(b: usize) -> u64 {
        let b = b as u64;
        if b < SUB {
            return b;
        }
        let exp = b / SUB + 4;
        let mant = b % SUB;
        (SUB + mant) << (exp - 5)
    }

    pub fn record(&mut self, v: u64) {
        let b = Self::bucket(v);
        if b >= self.buckets.len() {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        self.count += 1;
        self.max = self.max.max(v);
    }

    /// The value at quantile `q` (0..1): the low edge of its bucket, or the max for the top.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (b, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::bucket_low(b).min(self.max);
            }
        }
        self.max
    }
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
    pub fault_latency: Histogram,
    /// Page-table pages (wired frames).
    pub pt: super::ptpages::PtStats,
    /// Per-process wired kernel memory (vm/kmem.rs).
    pub kmem: super::kmem::KmemStats,
    /// Pages mapped by fault-around or prefault.
    pub around: super::faultaround::AroundStats,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 100);
        }
        let p50 = h.quantile(0.5);
        assert!((48_000..=50_000).contains(&p50), "{p50}");
        assert_eq!(h.max, 100_000);
        assert!(h.quantile(1.0) <= 100_000 && h.quantile(1.0) >= 96_000);
        let mut one = Histogram::default();
        one.record(7);
        assert_eq!(one.quantile(0.99), 7);
    }
}
