//! Physical memory: the frames, the buddy allocator that hands them out, and per-frame use
//! counts. Callers: the VM's fault handler and page freeing (through the policy's allocation and
//! deallocation choices), and set-up (`wire_clustered`).
//!
//! A frame is in exactly one of these states:
//! - free: inside a free buddy block, `refs == 0`;
//! - wired: allocated at set-up for the (modelled) kernel, counted in `wired_frames`;
//! - in use: held by one or more memory objects, `refs >= 1` (more than one after fork, until
//!   copy-on-write separates them);
//! - reserved: allocated from the buddy allocator by a reservation but not yet populated
//!   (`refs == 0`; the reservation module owns it).

pub mod buddy;

use crate::units::{Order, Pfn};
pub use buddy::Buddy;

#[derive(Clone, Debug)]
pub struct PhysMem {
    pub buddy: Buddy,
    /// Memory objects holding each frame (0 = none).
    refs: Vec<u32>,
    pub wired_frames: u64,
    /// Frames with `refs >= 1`: the footprint of all processes and the page cache.
    pub used_frames: u64,
}

impl PhysMem {
    pub fn new(frames: u64, max_order: u8) -> PhysMem {
        PhysMem {
            buddy: Buddy::new(frames, max_order),
            refs: vec![0; frames as usize],
            wired_frames: 0,
            used_frames: 0,
        }
    }

    pub fn frames(&self) -> u64 {
        self.buddy.frames()
    }

    #[inline]
    pub fn refs(&self, pfn: Pfn) -> u32 {
        self.refs[pfn.0 as usize]
    }

    /// A frame becomes held by one more object.
    #[inline]
    pub fn hold(&mut self, pfn: Pfn) {
        self.buddy.note_touched(pfn.0, 0);
        let r = &mut self.refs[pfn.0 as usize];
        if *r == 0 {
            self.used_frames += 1;
        }
        *r += 1;
    }

    /// A frame is released by one object; returns true when no object holds it any more (the
    /// caller then hands it back through the deallocation policy).
    #[inline]
    pub fn release(&mut self, pfn: Pfn) -> bool {
        self.buddy.note_touched(pfn.0, 0);
        let r = &mut self.refs[pfn.0 as usize];
        debug_assert!(*r > 0, "PhysMem::release: frame {} is not held", pfn.0);
        *r -= 1;
        if *r == 0 {
            self.used_frames -= 1;
            true
        } else {
            false
        }
    }

    /// Wires all but `free_bytes` of memory, clustered at the top of physical memory (seed 000
    /// 5.2: wired pages clustered so they fragment as little as possible), leaving the low
    /// `free_bytes` free and contiguous.
    pub fn wire_clustered(&mut self, free_frames: u64) {
        let max = self.buddy.max_order();
        let mut pfn = free_frames.min(self.frames());
        while pfn < self.frames() {
            // The largest aligned block starting at pfn that fits.
            let mut o = max;
            while o > 0 && (pfn & ((1 << o) - 1) != 0 || pfn + (1 << o) > self.frames()) {
                o -= 1;
            }
            let ok = self.buddy.alloc_at(Pfn(pfn), Order(o));
            debug_assert!(ok, "wire_clustered: block {pfn} order {o} not free");
            self.wired_frames += 1 << o;
            pfn += 1 << o;
        }
    }

    /// Checks the buddy allocator and that no free frame is held by an object.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.buddy.check_invariants()?;
        let mut bad = None;
        self.buddy.for_each_free_block(|p, o| {
            if bad.is_none() {
                let block = &self.refs[p.0 as usize..(p.0 + o.pages()) as usize];
                // An OR over the block (it vectorises; this runs after every event under the
                // tests' full check), then the frame itself only when one is held.
                if block.iter().fold(0, |a, &r| a | r) != 0 {
                    bad = block.iter().position(|&r| r != 0).map(|i| p.0 + i as u64);
                }
            }
        });
        if let Some(f) = bad {
            return Err(format!(
                "phys: frame {f} is both free and held by an object"
            ));
        }
        let used = count_unlike(&self.refs, 0);
        if used != self.used_frames {
            return Err(format!(
                "phys: {used} frames held but used_frames = {}",
                self.used_frames
            ));
        }
        Ok(())
    }
}

/// The elements of `v` unlike `x`. The invariant checks count whole per-frame arrays with it
/// after every event of the tests' full check: counted in byte lanes, chunks of 255 (at most
/// 255 in a lane, wrapping adds: no overflow check stops the vectorising), it runs several
/// times faster than a filtered count in the test profile.
pub fn count_unlike<T: Copy + PartialEq>(v: &[T], x: T) -> u64 {
    v.chunks(255)
        .map(|c| c.iter().fold(0u8, |a, &e| a.wrapping_add((e != x) as u8)) as u64)
        .fold(0u64, u64::wrapping_add)
}

#[cfg(test)]
mod tests {
    use super::count_unlike;

    #[test]
    fn count_unlike_counts_across_its_chunks() {
        // 700 elements: chunks of 255, 255 and 190; every third unlike 0, and a run of 300
        // unlike elements that fills a whole chunk's byte lanes.
        let mut v: Vec<u32> = (0..700).map(|i| u32::from(i % 3 == 0)).collect();
        assert_eq!(count_unlike(&v, 0), 234);
        assert_eq!(count_unlike(&v, 1), 466);
        v[200..500].fill(7);
        let expect = v.iter().filter(|&&e| e != 0).count() as u64;
        assert_eq!(count_unlike(&v, 0), expect);
        assert_eq!(count_unlike::<u8>(&[], 0), 0);
    }
}
