//! The fragmenter's mechanism: what Quicksilver's fragmentation tool leaves behind in one
//! physical superpage-sized block (seed 003 6 "Fragmentation"; Frag/frag/fragment_level.c;
//! docs/reference-policies.md 3). The tool touches a superpage-aligned virtual block under a
//! first-touch superpage allocation policy, so one free physical block backs it, then munmaps
//! all of it but its last 64KB: the block's other frames go back to the allocator and the 16
//! resident 4KB pages pin it. The driver (the loop, the target, the 60 s settle) is
//! workload/fragment.rs.
//!
//! The end state is entered directly rather than by faults, so that it is the same under every
//! policy (under `base` no fault takes a whole block) and costs the workload nothing: the
//! fragmenter's pages are ordinary resident, dirty, movable anonymous pages of a live process
//! (its object, page table and page queues), which the page daemon may age and evict, and
//! compaction may migrate; they are in no reservation.

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

#[cfg(test)]
mod tests {
    use crate::hw::Machine;
    use crate::policy::Policy;
    use crate::units::Pfn;
    use crate::vm::{MmapReq, Os};

    #[test]
    fn a_block_keeps_its_last_pages_and_frees_the_rest() {
        let m = Machine::from_spec("skylake:mem=1G").unwrap();
        let mut p = Policy::from_spec("base").unwrap();
        p.resolve(&m).unwrap();
        let mut os = Os::new(m, p);
        let pid = os.spawn().unwrap();
        let free = os.free_blocks(9);
        let va = os.mmap(pid, MmapReq::anon(4 << 20)).unwrap();
        let va = va.next_multiple_of(2 << 20);
        let pfn = os.fragment_block(pid, va, 9, 16).unwrap().unwrap();
        assert_eq!(os.free_blocks(9), free - 1, "one free 2MB block taken");
        for i in 0..512u64 {
            let held = os.phys.refs(Pfn(pfn.0 + i)) > 0;
            assert_eq!(held, i >= 496, "frame {i} of the block");
        }
        assert_eq!(os.phys.used_frames, 16);
        let pmap = &os.proc(pid).unwrap().pmap;
        assert_eq!(
            pmap.lookup((va >> 12) + 496).unwrap().pfn(),
            Pfn(pfn.0 + 496)
        );
        assert!(pmap.lookup((va >> 12) + 495).is_none());
        assert_eq!(os.stats.cycles_kernel, 0, "set-up work is not charged");
        os.check_invariants().unwrap();
    }
}
