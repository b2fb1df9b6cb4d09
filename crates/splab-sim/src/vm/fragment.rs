//! What Quicksilver's fragmentation tool leaves in one superpage-sized physical block (seed 003
//! 6; Frag/frag/fragment_level.c): it touches a 2MB-aligned virtual block under a first-touch
//! superpage policy, so one free physical block backs it, then munmaps all but its last 64KB,
//! whose 16 resident 4KB pages pin the block. The driver is workload/fragment.rs.
//!
//! The end state is entered directly, not by faults, so that it is the same under every policy
//! (under `base` no fault takes a whole block) and costs the workload nothing. The pages are
//! ordinary resident, dirty, movable anonymous pages of a live process (object, page table,
//! page queues): the page daemon may evict them and compaction migrate them; no reservation
//! holds them.

use super::{ObjId, Os};
use crate::error::{Result, SimError};
use crate::units::{Order, Pfn, Pid};

/// The fragmenting process and the anonymous object all its pages belong to.
#[derive(Clone, Copy, Debug)]
pub struct Fragmenter {
    pub pid: Pid,
    pub obj: ObjId,
}

impl Os {
    /// Free aligned blocks of `2^order` frames in the buddy allocator: Linux's buddyinfo count
    /// of free 2MB blocks is order 9 plus 2 x order 10 (fragment_level.c).
    pub fn free_blocks(&self, order: u8) -> u64 {
        let b = &self.phys.buddy;
        (order..=b.max_order())
            .map(|o| b.free_blocks[o as usize] << (o - order))
            .sum()
    }

    /// Frames the fragmenter holds now (0 without one): set-up memory, not the workload's
    /// footprint.
    pub fn fragmenter_frames(&self) -> u64 {
        self.fragmenter.map_or(0, |f| {
            self.objects
                .get(f.obj.0 as usize)
                .and_then(|o| o.as_ref())
                .map_or(0, |o| o.pages.len)
        })
    }

    /// One block of the fragmenter at the block-aligned `va` of `pid`, mapped by one anonymous
    /// map entry: a free block of `2^order` frames is taken, its first `2^order - keep` frames
    /// are freed again, and its last `keep` frames become resident dirty pages at the last
    /// `keep` pages of the virtual block. The caller then munmaps the rest of the virtual block.
    /// Returns the block's first frame; None when no free block of `order` is left.
    pub fn fragment_block(
        &mut self,
        pid: Pid,
        va: u64,
        order: u8,
        keep: u64,
    ) -> Result<Option<Pfn>> {
        let n = 1u64 << order;
        if keep == 0 || keep > n {
            return Err(SimError::Invariant(format!(
                "fragment_block: keep {keep} of a {n}-page block"
            )));
        }
        let bs = self.base_shift();
        let tail = va + ((n - keep) << bs);
        let v = self.proc(pid)?.vma_at(tail).cloned().ok_or_else(|| {
            SimError::InvalidEvent(format!("fragment_block: nothing mapped at {tail:#x}"))
        })?;
        let Some(pfn) = self.phys.buddy.alloc(Order(order)) else {
            return Ok(None);
        };
        // The munmapped head goes back first, in aligned blocks, largest first, so that page
        // tables allocated below come from it rather than from another free block.
        let head = n - keep;
        let mut off = 0;
        while off < head {
            let o = (off.trailing_zeros().min(63) as u8)
                .min(order)
                .min(63 - (head - off).leading_zeros() as u8);
            self.free_extent(Pfn(pfn.0 + off), Order(o));
            off += 1 << o;
        }
        // The fragmenter's work is not the workload's: whatever entering its pages charges
        // (population maps, page-table pages) is taken back.
        let (kernel, resv) = (self.stats.cycles_kernel, self.stats.cycles_reservation);
        for i in head..n {
            let page = va + (i << bs);
            let pindex = v.pgoff + ((page - v.start) >> bs);
            let f = Pfn(pfn.0 + i);
            self.obj_insert(v.obj, pindex, f);
            self.pmap_enter(pid, page >> bs, f, v.prot)?;
            self.procs
                .get_mut(&pid.0)
                .expect("fragment_block: pid")
                .pmap
                .touch(page >> bs, 0, true);
        }
        self.stats.cycles_kernel = kernel;
        self.stats.cycles_reservation = resv;
        Ok(Some(pfn))
    }
}
