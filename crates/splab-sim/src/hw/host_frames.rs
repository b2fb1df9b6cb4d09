//! Where a guest's memory lies in the host's: the host's frame placement under nested paging.
//!
//! A guest's physical address is not the host's. The data caches are physically indexed by
//! host-physical address (Intel SDM vol. 3 ch. 29, EPT: the guest-physical address is
//! translated before the access; AMD APM vol. 2 15.25, nested paging), and a host allocates the
//! frames backing guest memory on demand, at the guest's first touch of each host page (KVM: an
//! EPT violation or nested page fault -> `get_user_pages` on the VM's anonymous memory), from
//! its buddy allocator's free lists, whose order after some uptime has nothing to do with the
//! guest's addresses. Each host page of guest memory (the `[nested]` page size) is one block of
//! host-physical memory; where it lies is unrelated to where its neighbours do. So lines that
//! share a cache set by their guest-physical addresses (a 2MB guest page's lines at a stride of
//! the LLC's set span) need not share one on the host, when the host page is smaller than the
//! set span (4KB host pages under a 2MB LLC set span): docs/validation.md, "Host frame
//! placement".
//!
//! The model (`HostPlacement::Scattered`): a fixed, deterministic pseudo-random bijection on
//! host page numbers, the offset within the host page kept. It permutes the low `bits` bits of
//! the host page number (2^bits host pages cover guest memory) and keeps the bits above, so
//! guest memory stays within its first 2^bits host pages, which the host's own tables
//! (hw/walk.rs `set_nested`) lie above, and a line beyond (the kernel's struct-page array,
//! vm/memmap.rs) stays beyond. `Identity` keeps guest-physical g at host-physical g.

use serde::{Deserialize, Serialize};

use super::cache::LINE_SHIFT;

/// How the host places the frames that back guest memory (a machine file's
/// `nested.host_placement`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostPlacement {
    /// Each host page of guest memory at a host frame unrelated to its guest address
    /// (`HostFrames`): a host that allocated its backing on demand.
    #[default]
    Scattered,
    /// Guest-physical g at host-physical g: contiguous backing in guest order.
    Identity,
}

impl HostPlacement {
    pub fn name(self) -> &'static str {
        match self {
            HostPlacement::Scattered => "scattered",
            HostPlacement::Identity => "identity",
        }
    }
}

/// The scattered placement as a function on lines (see the module's note): a few ALU ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostFrames {
    /// Lines per host page, as a shift (host page shift less `LINE_SHIFT`).
    line_shift: u8,
    /// Host page numbers below 2^bits are permuted among themselves; `mask` = 2^bits - 1.
    bits: u8,
    mask: u64,
    /// The xorshift steps' shift (at least 1).
    shift: u8,
}

/// Odd multipliers of the mixing steps (invertible mod any power of two): the 64-bit golden
/// ratio and splitmix64's second constant.
const M1: u64 = 0x9e37_79b9_7f4a_7c15;
const M2: u64 = 0x94d0_49bb_1331_11eb;

impl HostFrames {
    /// The placement of a guest of `mem_bytes` on host pages of byte shift `page_shift`.
    pub fn new(page_shift: u8, mem_bytes: u64) -> HostFrames {
        assert!(page_shift >= LINE_SHIFT as u8 && page_shift < 64);
        let pages = mem_bytes.div_ceil(1u64 << page_shift).max(1);
        let bits = pages.next_power_of_two().trailing_zeros() as u8;
        HostFrames {
            line_shift: page_shift - LINE_SHIFT as u8,
            bits,
            mask: (1u64 << bits) - 1,
            shift: bits.div_ceil(2).max(1),
        }
    }

    /// Host page numbers below 2^bits are the ones permuted: bytes below `span()` hold all of
    /// guest memory.
    pub fn span(&self) -> u64 {
        1u64 << (self.bits + self.line_shift + LINE_SHIFT as u8)
    }

    /// The host page that backs guest host-page number `page`: xorshift and multiply-by-odd
    /// steps mod 2^bits, each a bijection (x ^ x >> s, s >= 1, keeps the top s bits and so
    /// can be undone from the top down; an odd multiplier has an inverse mod 2^bits); ending
    /// on a xorshift, so the low bits (the cache set) depend on all the bits.
    #[inline(always)]
    pub fn page(&self, page: u64) -> u64 {
        let (m, s) = (self.mask, self.shift);
        let mut x = page & m;
        x ^= x >> s;
        x = x.wrapping_mul(M1) & m;
        x ^= x >> s;
        x = x.wrapping_mul(M2) & m;
        x ^= x >> s;
        (page & !m) | x
    }

    /// The host-physical line of guest-physical line `line`.
    #[inline(always)]
    pub fn line(&self, line: u64) -> u64 {
        let sh = self.line_shift;
        (self.page(line >> sh) << sh) | (line & ((1u64 << sh) - 1))
    }

    /// The host-physical address of guest-physical address `pa`.
    #[inline(always)]
    pub fn addr(&self, pa: u64) -> u64 {
        (self.line(pa >> LINE_SHIFT) << LINE_SHIFT) | (pa & ((1u64 << LINE_SHIFT) - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exhaustively for small ranges: every host page number below 2^bits has exactly one
    /// preimage, and numbers at or above 2^bits keep their block.
    #[test]
    fn the_placement_is_a_bijection_on_its_range() {
        for bits in 0..=14u8 {
            let h = HostFrames::new(12, 4096u64 << bits);
            assert_eq!(h.span(), 4096u64 << bits);
            let n = 1u64 << bits;
            let mut seen = vec![false; n as usize];
            for p in 0..n {
                let q = h.page(p);
                assert!(q < n, "bits {bits}: {p} -> {q}");
                assert!(!seen[q as usize], "bits {bits}: {q} twice");
                seen[q as usize] = true;
                // A page in another block of 2^bits lands in that block.
                let hi = 5 * n + p;
                assert_eq!(h.page(hi), 5 * n + q);
            }
        }
        // Guest memory not a power of two of host pages: the range is the next power of two.
        assert_eq!(HostFrames::new(12, 23 << 30).span(), 32 << 30);
        assert_eq!(HostFrames::new(21, 3 << 20).span(), 4 << 20);
    }

    /// The placement is fixed: the same guest page lands on the same host page in every run and
    /// every build (results of a guest machine depend on it). Values of this implementation,
    /// for this machine's 23 GiB guest on 4KB host pages and a 1 GiB one on 2MB host pages.
    #[test]
    fn the_placement_is_fixed() {
        let h = HostFrames::new(12, 23 << 30);
        let got: Vec<u64> = [0, 1, 2, 512, 6_029_311].map(|p| h.page(p)).to_vec();
        assert_eq!(got, [0, 7_510_607, 2_467_565, 3_763_136, 3_181_424]);
        let h = HostFrames::new(21, 1 << 30);
        let got: Vec<u64> = [0, 1, 2, 511].map(|p| h.page(p)).to_vec();
        assert_eq!(got, [0, 69, 122, 302]);
    }

    /// The offset within the host page is kept (a 4KB host page's 64 lines stay together, a
    /// 2MB one's 32768), and pages do move: not the identity.
    #[test]
    fn the_placement_keeps_the_offset_within_the_host_page() {
        for page_shift in [12u8, 21] {
            let h = HostFrames::new(page_shift, 1 << 30);
            let lines = 1u64 << (page_shift - LINE_SHIFT as u8);
            let mut moved = 0;
            for p in 0..(1u64 << (30 - page_shift)) {
                let first = h.line(p * lines);
                assert_eq!(first % lines, 0);
                assert_eq!(first / lines, h.page(p));
                for off in [1, lines / 2, lines - 1] {
                    assert_eq!(h.line(p * lines + off), first + off);
                    let pa = ((p * lines + off) << LINE_SHIFT) + 17;
                    assert_eq!(h.addr(pa), ((first + off) << LINE_SHIFT) + 17);
                }
                moved += (h.page(p) != p) as u32;
            }
            assert!(moved as u64 > (1u64 << (30 - page_shift)) / 2, "{moved}");
        }
    }

    /// The 512 4KB pages of a 2MB guest page land on many different 2MB-aligned set groups:
    /// the low 9 bits of their host page numbers (which, with the line's offset, pick a set of
    /// a 2MB-span LLC) take most of their 512 values.
    #[test]
    fn a_guest_superpage_spreads_over_the_low_host_page_bits() {
        let h = HostFrames::new(12, 23 << 30);
        for g in [0u64, 1, 77, 4000] {
            let mut low = std::collections::HashSet::new();
            for i in 0..512 {
                low.insert(h.page(g * 512 + i) & 511);
            }
            assert!(low.len() > 300, "2MB page {g}: {} of 512", low.len());
        }
    }
}
