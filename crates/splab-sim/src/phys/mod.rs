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
                if let Some(f) = (p.0..p.0 + o.pages()).find(|&f| self.refs[f as usize] != 0) {
                    bad = Some(f);
                }
            }
        });
        if let Some(f) = bad {
            return Err(format!(
                "phys: frame {f} is both free and held by an object"
            ));
        }
        let used = self.refs.iter().filter(|&&r| r > 0).count() as u64;
        if used != self.used_frames {
            return Err(format!(
                "phys: {used} frames held but used_frames = {}",
                self.used_frames
            ));
        }
        Ok(())
    }
}
