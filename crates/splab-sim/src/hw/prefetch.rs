//! The hardware data prefetcher for individual accesses: a stream detector in the manner of
//! Intel's L2 streamer (Optimization Reference Manual, "Data Prefetching" of the Sandy Bridge
//! microarchitecture, which later cores keep; the Core microarchitecture's "data prefetch logic"
//! before it). A sequential *run* event's lines are streamed by the access path directly
//! (`Os::access_run`); this is for the accesses that arrive one by one, as a recorded scan's
//! 8-byte loads do.
//!
//! The model (parameters in the machine file's `[prefetch]` table):
//! - The detector watches the L1 data misses (the L2 lookups), as the streamer does: an L1 hit
//!   never reaches it.
//! - It tracks up to `streams` regions of `region` bytes (4KB: the streamer never prefetches
//!   across a 4KB boundary, whatever the page size), one stream each, in a fixed array; a miss
//!   in an untracked region takes a tracker by second chance (CLOCK, an approximation of LRU
//!   in O(1) bit operations: Intel does not publish the streamer's replacement).
//! - A miss within `distance` lines of the region's previous miss, in the stream's direction
//!   (ascending or descending; the first such pair sets it), continues the stream; any other
//!   miss (a jump, a reversal) starts it afresh at that line.
//! - Once a stream has seen `trigger` misses, the prefetcher runs ahead of it: every later
//!   miss that continues it finds its line prefetched into L2 (`Prefetcher::miss` says so).
//!   The access path then serves that line at L2's latency, and a line that came from DRAM
//!   costs the machine's stream bandwidth (`Core::prefetched_line`) instead of DRAM's latency.
//!
//! Not modelled: the lines a stream prefetches but the program never touches (the overshoot at
//! a stream's end, the lines a stride skips: only demanded lines cost bandwidth), a second
//! (opposite-direction) stream in a region, instruction fetches, and the streamer's throttling
//! under load. Deterministic: no hashing, no randomness; a fixed array scanned in full.

use serde::Serialize;

use super::cache::LINE_SHIFT;

/// Prefetcher parameters of a machine (values and sources in the machine files).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct PrefetchConfig {
    /// Streams tracked at once; 0: the machine has no hardware data prefetcher.
    pub streams: u32,
    /// How far ahead of the demand miss the prefetcher runs, in lines: a miss further than
    /// this from the stream's previous one starts a new stream.
    pub distance: u32,
    /// Misses of a stream before its lines are prefetched (2: the second access confirms it).
    pub trigger: u32,
    /// Bytes of the aligned region a stream stays within (a power of two of at least a line).
    pub region_bytes: u64,
}

/// At most this many streams (the array is scanned whole: fixed work per miss; one bit each
/// in a `u32`).
pub const MAX_STREAMS: usize = 32;

/// The trackers of `regions` equal to `region`, as a bit mask (bit k: tracker k). On x86-64 in
/// eight 4-wide SSE2 compares packed into two byte masks (the scalar loop of 32 compares took
/// 58 of GUPS's 2,158 host instructions per update); the same mask either way.
#[inline(always)]
fn matches(regions: &[u32; MAX_STREAMS], region: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64; the eight unaligned 16-byte loads read exactly the 128
    // bytes of `regions`.
    unsafe {
        use std::arch::x86_64::*;
        let p = regions.as_ptr() as *const __m128i;
        let k = _mm_set1_epi32(region as i32);
        let eq = |i: usize| _mm_cmpeq_epi32(_mm_loadu_si128(p.add(i)), k);
        // Each compare gives 0 or -1 per lane; signed saturating packs keep them 0 or -1, in
        // order, down to one byte per tracker.
        let lo = _mm_packs_epi16(_mm_packs_epi32(eq(0), eq(1)), _mm_packs_epi32(eq(2), eq(3)));
        let hi = _mm_packs_epi16(_mm_packs_epi32(eq(4), eq(5)), _mm_packs_epi32(eq(6), eq(7)));
        (_mm_movemask_epi8(lo) as u32) | (_mm_movemask_epi8(hi) as u32) << 16
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u32;
        for k in 0..MAX_STREAMS {
            m |= ((regions[k] == region) as u32) << k;
        }
        m
    }
}

#[derive(Clone, Debug)]
pub struct Prefetcher {
    enabled: bool,
    /// Lines per region, as a shift.
    region_shift: u32,
    distance: u64,
    trigger: u32,
    /// Region number + 1 of each tracker (0: free, matches no region), truncated to 32 bits:
    /// exact for regions of 256 bytes or more within `machine_file::MAX_MEM` (1TB).
    regions: [u32; MAX_STREAMS],
    /// The trackers of the machine (`streams` low bits).
    active: u32,
    /// Second-chance replacement: a tracker's bit is set when it is used, and the hand passes
    /// over (and clears) set bits looking for a victim.
    used: u32,
    hand: u32,
    /// The tracker's previous miss (line number).
    last: [u64; MAX_STREAMS],
    /// Its direction: +1, -1, 0 = not yet known.
    dir: [i8; MAX_STREAMS],
    /// Misses its stream has seen (saturating).
    seen: [u32; MAX_STREAMS],
    /// The tracker of the previous miss.
    mru: usize,
    /// How many trackers hold a region of each value of the region's low byte (free trackers,
    /// region 0, are not counted): a zero proves that no tracker holds the missed region
    /// without the 32-way compare (`matches`). Speed only: under GUPS's random misses about
    /// seven in eight are settled by it, and the compare decides the rest as before.
    by_low: [u8; 256],
}

impl Prefetcher {
    pub fn new(cfg: &PrefetchConfig) -> Prefetcher {
        let n = (cfg.streams as usize).min(MAX_STREAMS);
        let lines = (cfg.region_bytes >> LINE_SHIFT).max(1);
        Prefetcher {
            enabled: n > 0,
            region_shift: lines.ilog2(),
            distance: cfg.distance as u64,
            trigger: cfg.trigger,
            regions: [0; MAX_STREAMS],
            active: if n >= 32 { u32::MAX } else { (1u32 << n) - 1 },
            used: 0,
            hand: 0,
            last: [0; MAX_STREAMS],
            dir: [0; MAX_STREAMS],
            seen: [0; MAX_STREAMS],
            mru: 0,
            by_low: [0; 256],
        }
    }

    /// Whether the machine has a prefetcher (the access path skips it otherwise).
    #[inline(always)]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// An L1 data miss at `line`: trains the detector and says whether a detected stream had
    /// already prefetched the line.
    #[inline]
    pub fn miss(&mut self, line: u64) -> bool {
        let region = ((line >> self.region_shift) as u32).wrapping_add(1);
        let mru = self.mru % MAX_STREAMS;
        if self.regions[mru] != region && self.by_low[region as u8 as usize] == 0 {
            // No tracker holds the region (the usual case under random misses), on a path
            // with no saved registers: the rest is out of line (`tracked`).
            self.start(region, line);
            return false;
        }
        self.tracked(region, line)
    }

    /// `miss` in a region some tracker may hold.
    #[inline(never)]
    fn tracked(&mut self, region: u32, line: u64) -> bool {
        let mru = self.mru % MAX_STREAMS;
        let i = if self.regions[mru] == region {
            mru
        } else {
            // The tracker of `region`: a mask of the matches (no branch per entry). `miss` came
            // here because some tracker's region shares its low byte.
            let m = matches(&self.regions, region) & self.active;
            if m == 0 {
                self.start(region, line);
                return false;
            }
            m.trailing_zeros() as usize
        };
        self.mru = i;
        self.used |= 1 << i;
        let d = line.wrapping_sub(self.last[i]) as i64;
        self.last[i] = line;
        let dir: i8 = if d > 0 { 1 } else { -1 };
        if d == 0 {
            // The same line again (it was evicted meanwhile): no step, no prefetch.
            return false;
        }
        if d.unsigned_abs() > self.distance || (self.dir[i] != 0 && self.dir[i] != dir) {
            self.dir[i] = 0;
            self.seen[i] = 1;
            return false;
        }
        self.dir[i] = dir;
        let covered = self.seen[i] >= self.trigger;
        self.seen[i] = self.seen[i].saturating_add(1);
        covered
    }

    /// A miss in a region no tracker holds: a tracker (`victim`) starts its stream there.
    #[inline]
    fn start(&mut self, region: u32, line: u64) {
        let v = self.victim();
        let old = self.regions[v];
        if old != 0 {
            self.by_low[old as u8 as usize] -= 1;
        }
        self.by_low[region as u8 as usize] += 1;
        self.regions[v] = region;
        self.last[v] = line;
        self.dir[v] = 0;
        self.seen[v] = 1;
        self.mru = v;
    }

    /// The tracker to reuse: the first at or after the hand whose use bit is clear (second
    /// chance; the bits passed over are cleared), the hand past it. Its own bit stays clear
    /// until the new stream's second miss: a region missed once (a random access) is the next
    /// victim, and a stream that continues at least once per turn of the hand is never one.
    #[inline]
    fn victim(&mut self) -> usize {
        let free = !self.used & self.active;
        let hand = self.hand % MAX_STREAMS as u32;
        if free >> hand & 1 != 0 {
            // The hand's own tracker is free: nothing is passed over (random misses, whose
            // trackers are never used twice, always take this way).
            self.hand = (hand + 1) % MAX_STREAMS as u32;
            return hand as usize;
        }
        self.victim_search(free)
    }

    /// `victim` when the hand's tracker is in use: the search past it.
    #[inline(never)]
    fn victim_search(&mut self, free: u32) -> usize {
        let mut free = free;
        if free == 0 {
            self.used = 0;
            free = self.active;
        }
        // The first free tracker at or after the hand, wrapping.
        let ahead = free & (u32::MAX << self.hand);
        let v = if ahead != 0 { ahead } else { free }.trailing_zeros();
        // Passed over: the bits from the hand up to v (when v wrapped, all from the hand and
        // all below v).
        let below_v = (1u32 << v) - 1;
        let from_hand = u32::MAX << self.hand;
        let passed = if v >= self.hand {
            from_hand & below_v
        } else {
            from_hand | below_v
        };
        self.used &= !(passed | 1 << v);
        self.hand = (v + 1) % MAX_STREAMS as u32;
        v as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skylake() -> Prefetcher {
        Prefetcher::new(&PrefetchConfig {
            streams: 32,
            distance: 20,
            trigger: 2,
            region_bytes: 4096,
        })
    }

    /// Which of `lines`' misses the prefetcher had covered.
    fn covered(p: &mut Prefetcher, lines: impl IntoIterator<Item = u64>) -> Vec<bool> {
        lines.into_iter().map(|l| p.miss(l)).collect()
    }

    #[test]
    fn the_match_mask_is_the_scalar_one() {
        let mut r = crate::rng::Rng::new(7);
        for _ in 0..2000 {
            let mut regions = [0u32; MAX_STREAMS];
            for x in regions.iter_mut() {
                // Few distinct values, so that several trackers match at once; the top bit set
                // in some (a signed compare would differ).
                *x = (r.next_u64() % 5) as u32
                    | if r.next_u64() & 1 == 0 {
                        0x8000_0000
                    } else {
                        0
                    };
            }
            let region = regions[(r.next_u64() % MAX_STREAMS as u64) as usize];
            let mut want = 0u32;
            for (k, &x) in regions.iter().enumerate() {
                want |= ((x == region) as u32) << k;
            }
            assert_eq!(matches(&regions, region), want);
            assert_eq!(matches(&regions, 7), 0);
        }
    }

    #[test]
    fn an_ascending_scan_is_prefetched_after_the_trigger_misses() {
        let mut p = skylake();
        let c = covered(&mut p, 64..128);
        assert_eq!(&c[..2], &[false, false]);
        assert!(c[2..].iter().all(|&x| x), "{c:?}");
    }

    #[test]
    fn a_descending_scan_is_prefetched_too() {
        let mut p = skylake();
        let c = covered(&mut p, (64..128).rev());
        assert_eq!(&c[..2], &[false, false]);
        assert!(c[2..].iter().all(|&x| x), "{c:?}");
    }

    #[test]
    fn crossing_a_4k_boundary_restarts_detection() {
        let mut p = skylake();
        // Lines 60..68 span two 4KB regions (64 lines each): the second starts afresh.
        let c = covered(&mut p, 60..68);
        assert_eq!(
            c,
            [false, false, true, true, false, false, true, true],
            "{c:?}"
        );
    }

    #[test]
    fn the_trigger_sets_how_many_misses_go_unprefetched() {
        let mut p = Prefetcher::new(&PrefetchConfig {
            trigger: 3,
            ..skylake_cfg()
        });
        let c = covered(&mut p, 0..6);
        assert_eq!(c, [false, false, false, true, true, true]);
    }

    fn skylake_cfg() -> PrefetchConfig {
        PrefetchConfig {
            streams: 32,
            distance: 20,
            trigger: 2,
            region_bytes: 4096,
        }
    }

    #[test]
    fn strides_within_the_distance_stream_and_beyond_it_do_not() {
        let mut p = skylake();
        // Every 20th line: within 20 lines ahead.
        assert_eq!(covered(&mut p, [0, 20, 40, 60]), [false, false, true, true]);
        let mut p = skylake();
        // Every 21st line (in an 8KB region, so that the region does not end it).
        let mut p2 = Prefetcher::new(&PrefetchConfig {
            region_bytes: 8192,
            ..skylake_cfg()
        });
        assert_eq!(covered(&mut p2, [0, 21, 42, 63, 84]), [false; 5]);
        assert_eq!(covered(&mut p, [0, 21, 42, 63]), [false; 4]);
    }

    #[test]
    fn a_reversal_or_a_repeat_is_not_prefetched() {
        let mut p = skylake();
        assert_eq!(
            covered(&mut p, [10, 11, 12, 11, 10, 9, 9, 8]),
            // 11 reverses (restart), 10 sets the new direction, 9 continues it; 9 again is no
            // step; 8 continues the descending stream.
            [false, false, true, false, false, true, false, true]
        );
    }

    #[test]
    fn random_misses_get_no_prefetches() {
        let mut p = skylake();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut hits = 0;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Lines of a 1GB table.
            hits += p.miss(x % (1 << 24)) as u32;
        }
        assert_eq!(hits, 0);
        // The low-byte counts are those of the trackers' regions.
        let mut want = [0u8; 256];
        for &r in p.regions.iter().filter(|&&r| r != 0) {
            want[r as u8 as usize] += 1;
        }
        assert_eq!(p.by_low, want);
    }

    #[test]
    fn interleaved_streams_are_tracked_up_to_the_stream_count() {
        // 4 interleaved ascending scans in 4 regions: with 4 trackers all are detected, with 3
        // (second chance) none is: each miss evicts the stream that is next.
        for (streams, want) in [(4, true), (3, false)] {
            let mut p = Prefetcher::new(&PrefetchConfig {
                streams,
                ..skylake_cfg()
            });
            let mut got = Vec::new();
            for k in 0..16u64 {
                for s in 0..4u64 {
                    got.push(p.miss(s * 64 + k));
                }
            }
            assert!(got[..8].iter().all(|&x| !x), "{got:?}");
            assert!(got[8..].iter().all(|&x| x == want), "{streams}: {got:?}");
        }
    }

    #[test]
    fn a_stream_survives_one_off_misses_between_its_own() {
        // 4 trackers; between two misses of an ascending scan, a miss to a region never seen
        // again. The scan keeps its tracker (its bit is set again before the hand returns).
        let mut p = Prefetcher::new(&PrefetchConfig {
            streams: 4,
            ..skylake_cfg()
        });
        let mut got = Vec::new();
        for k in 0..40u64 {
            got.push(p.miss(k));
            assert!(!p.miss((1000 + k) * 64), "a one-off region");
        }
        assert_eq!(&got[..2], &[false, false]);
        assert!(got[2..].iter().all(|&x| x), "{got:?}");
    }

    #[test]
    fn the_victim_is_the_first_unused_tracker_from_the_hand() {
        let mut p = Prefetcher::new(&PrefetchConfig {
            streams: 4,
            ..skylake_cfg()
        });
        // Regions 0..4 fill the trackers in order.
        for r in 0..4u64 {
            p.miss(r * 64);
        }
        assert_eq!(p.regions, {
            let mut a = [0u32; MAX_STREAMS];
            a[..4].copy_from_slice(&[1, 2, 3, 4]);
            a
        });
        // Regions 1 and 2 used again: a fifth region takes tracker 0 (region 0, unused).
        p.miss(64 + 1);
        p.miss(128 + 1);
        p.miss(4 * 64);
        assert_eq!(p.regions[..4], [5, 2, 3, 4]);
        // The hand is at 1; 1 and 2 are used (cleared as it passes), 3 is not: a sixth region
        // takes tracker 3, a seventh tracker 0 (the one-off fifth region), an eighth tracker 1
        // (its bit was cleared by the first pass).
        p.miss(5 * 64);
        assert_eq!(p.regions[..4], [5, 2, 3, 6]);
        p.miss(6 * 64);
        assert_eq!(p.regions[..4], [7, 2, 3, 6]);
        p.miss(7 * 64);
        assert_eq!(p.regions[..4], [7, 8, 3, 6]);
    }

    #[test]
    fn no_streams_means_no_prefetcher() {
        let p = Prefetcher::new(&PrefetchConfig::default());
        assert!(!p.enabled());
        assert!(skylake().enabled());
    }
}
