//! A recorded placement: the frames a real kernel gave a native run's pages, handed to the
//! model's next base-page allocations in the same order, so that a prediction sees the physical
//! layout the hardware saw.
//!
//! Why: the model's machine starts empty and its buddy allocator hands out frames in address
//! order, so a region of 4KB pages lies in as few 2MB ranges as it can. A long-running Linux
//! guest's free lists are scattered: a fresh 64 MiB MADV_NOHUGEPAGE region lay in 1,300-2,500
//! distinct 2MB guest-physical ranges here (/proc/self/pagemap, docs/validation.md "Walks").
//! Under nested paging with 4KB host pages each such range is its own host page-table page,
//! so a walk-bound chase's host walks read ~2,000 pages of host entries instead of 32; in the
//! physically indexed caches the data's sets differ too. That is an allocator state, not a
//! hardware parameter: `splab validate` reads each 4KB benchmark's frames and places the
//! model's pages on them (`Engine::place_frames`) rather than assume the fresh machine's order.
//!
//! Mechanism: a queue of frames. An allocation of one base frame without a reservation (the
//! path Linux's and the base policies' faults take, `alloc_frame`) takes the queue's next frame
//! that is still free (`Buddy::alloc_at`, as Linux takes a specific page off the buddy lists);
//! one that is not (a page-table page or another allocation took it meanwhile) is skipped and
//! counted. When the queue is empty allocation is as before. Page-table and kernel pages do not
//! take from the queue (they come from `alloc_kernel_frame`): the native run's page tables lie
//! wherever its kernel put them, which pagemap does not show.

use std::collections::VecDeque;

use super::Os;
use crate::units::{Order, Pfn};

/// Frames queued for the next base-page allocations, and what became of them.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    queue: VecDeque<Pfn>,
    /// Allocations that took a queued frame.
    pub placed: u64,
    /// Queued frames that were no longer free when their turn came (skipped).
    pub unavailable: u64,
}

impl Placement {
    /// Frames still queued.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

impl Os {
    /// Queues `pfns` (in allocation order) for the next base-page allocations. A frame number
    /// beyond this machine's memory is folded into it (modulo the frame count, which is a
    /// multiple of every superpage size, so a frame keeps its offset in its 2MB range): a real
    /// guest's physical address space may have holes (the PCI hole below 4 GiB) that put its
    /// frames above its memory size. Returns how many were queued.
    pub fn place_frames(&mut self, pfns: impl IntoIterator<Item = u64>) -> usize {
        let frames = self.phys.buddy.frames();
        let before = self.placement.queue.len();
        self.placement
            .queue
            .extend(pfns.into_iter().map(|p| Pfn(p % frames)));
        self.placement.queue.len() - before
    }

    /// The next queued frame that is still free, allocated; None when the queue is empty or
    /// holds no free frame.
    pub(crate) fn take_placed(&mut self) -> Option<Pfn> {
        while let Some(pfn) = self.placement.queue.pop_front() {
            if self.phys.buddy.alloc_at(pfn, Order(0)) {
                self.placement.placed += 1;
                return Some(pfn);
            }
            self.placement.unavailable += 1;
        }
        None
    }
}
