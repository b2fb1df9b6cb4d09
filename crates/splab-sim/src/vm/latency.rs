//! The fault-latency histogram: every page fault's latency in cycles (what the fault handler
//! charged: trap, zeroing, copying, promotion, allocation stalls, and the I/O wait of a major
//! fault), kept in HDR-style log buckets so that millions of faults cost one array increment
//! each.
//!
//! Buckets: values below `2 * SUB` (64) each have their own bucket (exact); above, every power
//! of two [2^e, 2^(e+1)) is cut into `SUB` = 32 equal sub-buckets of width 2^(e-5). A quantile is
//! reported as the low edge of the bucket holding it (clamped to the maximum), so it is never
//! above the true value and below it by less than one bucket width: relative error under
//! 1/32 = 3.125%. The maximum is exact. Quantiles are nearest-rank: the value of the
//! `ceil(q * count)`-th smallest fault.

/// Sub-buckets per power of two (a power of two itself).
const SUB: u64 = 32;
const SUB_BITS: u64 = 5;

#[derive(Clone, Debug, Default)]
pub struct LatencyHistogram {
    buckets: Vec<u64>,
    /// Faults recorded.
    pub count: u64,
    /// The largest latency recorded, cycles (exact).
    pub max: u64,
}

impl LatencyHistogram {
    fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros() as u64; // >= SUB_BITS
        let mant = (v >> (exp - SUB_BITS)) & (SUB - 1);
        ((exp - SUB_BITS + 1) * SUB + mant) as usize
    }

    fn bucket_low(b: usize) -> u64 {
        let b = b as u64;
        if b < SUB {
            return b;
        }
        let exp = b / SUB + SUB_BITS - 1;
        (SUB + b % SUB) << (exp - SUB_BITS)
    }

    /// Records one fault of `cycles`.
    #[inline]
    pub fn record(&mut self, cycles: u64) {
        let b = Self::bucket(cycles);
        if b >= self.buckets.len() {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        self.count += 1;
        self.max = self.max.max(cycles);
    }

    /// The nearest-rank value at quantile `q` (0..=1), to the bucket's low edge; 0 when empty.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact() {
        let mut h = LatencyHistogram::default();
        for v in 1..=60u64 {
            h.record(v);
        }
        // Nearest rank: ceil(0.5 * 60) = 30th, ceil(0.95 * 60) = 57th, ceil(0.99 * 60) = 60th.
        assert_eq!(h.quantile(0.50), 30);
        assert_eq!(h.quantile(0.95), 57);
        assert_eq!(h.quantile(0.99), 60);
        assert_eq!(h.max, 60);
        assert_eq!(h.count, 60);
    }

    #[test]
    fn large_values_report_their_bucket_low_edge() {
        let mut h = LatencyHistogram::default();
        for v in 1..=100u64 {
            h.record(v);
        }
        // 50 < 64: exact. 95 is in [64, 128), buckets 2 wide: [94, 96). 99 is in [98, 100).
        assert_eq!(h.quantile(0.50), 50);
        assert_eq!(h.quantile(0.95), 94);
        assert_eq!(h.quantile(0.99), 98);
        assert_eq!(
            h.quantile(1.0),
            100,
            "the top bucket [100, 102) is clamped to the max"
        );
        assert_eq!(h.max, 100);
    }

    #[test]
    fn one_bucket_width_at_most_below_the_truth() {
        // 1,000,000 cycles: 2^19 <= v < 2^20, buckets 2^14 = 16384 wide; 1e6 = 61 * 16384 +
        // 576, so its bucket starts at 999,424.
        let mut h = LatencyHistogram::default();
        h.record(1_000_000);
        h.record(1_000_000);
        h.record(3);
        assert_eq!(h.quantile(0.5), 999_424);
        assert_eq!(h.quantile(0.1), 3);
        assert_eq!(h.max, 1_000_000);
        // Every bucket's low edge maps back to that bucket, and the next value up starts the
        // next bucket only at the edge.
        for v in [64u64, 65, 127, 128, 1 << 40, (1 << 40) + 12345, u64::MAX] {
            let b = LatencyHistogram::bucket(v);
            let low = LatencyHistogram::bucket_low(b);
            assert!(low <= v && LatencyHistogram::bucket(low) == b, "{v}");
            assert!((v - low) as f64 <= v as f64 / SUB as f64, "{v}: {low}");
        }
    }

    #[test]
    fn empty_is_zero() {
        let h = LatencyHistogram::default();
        assert_eq!((h.quantile(0.99), h.max, h.count), (0, 0, 0));
    }
}
