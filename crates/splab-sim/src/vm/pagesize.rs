//! HP-UX's multiple page sizes (seed 002, Subramanian et al., USENIX 1998; policy
//! `AllocPolicy::Hint`, preset `hpux`): large pages are created at fault-service time only, from
//! a page-size hint, and never by promotion.
//!
//! The fault path (seed 002 7.1, "the pagesize selection interface" and "the vfd-fill
//! interface"), on a zero-fill fault of anonymous memory:
//! 1. The region's hint (6): chatr's (`hint=SIZE`, what 9's experiments set), or the transparent
//!    method's, computed from the region's size and bounded by the tunables `vps_pagesize` and
//!    `vps_ceiling`; a size the machine lacks is taken as the next lower one (vps_ceiling(5):
//!    "the kernel uses the next lower valid value").
//! 2. The hint is lowered while the available physical memory is less than four times the page
//!    size (7.1: "We would rather allocate a 1MB page and not a 4MB page, when 5MB of memory is
//!    available").
//! 3. From that size down, the first page size whose aligned virtual page around the faulting
//!    page lies inside the map entry with nothing mapped or resident in it (Figure 4: "a large
//!    page must meet alignment restrictions, and other conditions"; the figure itself is not in
//!    the text we have, so "nothing in it" is this model's reading: a large page is zero-filled
//!    whole, and HP-UX has no gather of pages already there, 2.3).
//! 4. The allocation is made with the no-wait option (7.1): if no free block of that size
//!    exists, the fault takes a base page (6: "if a large page allocation fails, the fault-path
//!    reverts to using a 4KB pagesize mapping"); nothing compacts or waits.
//! 5. The large page is zeroed by looping over its base pages (3.2's replication: "VM operations
//!    on a large pagesize ... are carried out by looping over the 4KB-based constituent VM data
//!    structures"; Figure 5), at the machine's per-page zeroing cost, and mapped at once with the
//!    machine's superpage entry (the replicated PTEs of section 4 where the machine replicates).
//!
//! Demotion goes one page size down (5: "breaking a large page mapping such as 64KB into
//! smaller pagesize mappings such as 16KB"; vm/reserve.rs `demote_target`).
//!
//! The heap growth-rate adjustment (6: "we track pregions/regions that grow to a large size in
//! small increments, and increase their growth rate so that large page mappings can be created
//! at fault-service time"; `heap_growth`): with a chatr hint, brk ends the heap's map entry at
//! the break rounded up to the hint's page (`heap_top`), so the program's break stays where it
//! asked and the kernel's heap is at most one hinted page longer (9: "the wasted heap
//! allocation can be at most the chatr pagesize for program data"). The paper's rule is
//! "determined by the prior history of break requests, and the data pagesize hint"; the history
//! part is not published, so every growth is rounded (this model's reading).
//!
//! Not modelled (each said where the report would differ): large pages for file page-in (7.2)
//! and for copy-on-write (7.3): those faults take base pages here; the page daemon pushing a large page whole (8): the model's page
//! daemon demotes towards the victim as for every policy (seed 000 4.6); the cached and
//! uncached subpools and lazy coalescing of the allocator (5): one buddy allocator.

use serde::Serialize;

use super::{ObjKind, Os, Vma};
use crate::error::Result;
use crate::units::{Order, Pid, SizeClass};

/// Large pages of one size made at faults (`memory.pagesize.sizes`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct SizeStats {
    /// The page size in bytes.
    pub size: u64,
    /// Large pages of this size allocated, zeroed and mapped at a fault.
    pub allocated: u64,
    /// Faults whose no-wait allocation of this size found no free block (they took a base
    /// page).
    pub failed: u64,
}

/// The page-size selection's counters (`memory.pagesize`; only under a hint policy).
#[derive(Clone, Debug, Default, Serialize)]
pub struct PagesizeStats {
    /// Per superpage size of the machine, smallest first.
    pub sizes: Vec<SizeStats>,
    /// Faults whose hint was lowered because free memory was under four times it (7.1).
    pub lowered_for_memory: u64,
    /// Faults that took a smaller page than the (memory-adjusted) hint because the hinted
    /// page did not fit the map entry or had pages in it (Figure 4).
    pub lowered_to_fit: u64,
}

impl Os {
    /// seed 002 6, heap growth-rate adjustment: where the map entry of a heap starting at
    /// `start` ends for a program break at `end`: the next boundary of the hinted page under a
    /// chatr hint with `heap_growth`, else of the base page. An empty heap has no entry: its
    /// start, page-aligned.
    pub fn heap_top(&self, start: u64, end: u64) -> u64 {
        if end <= start {
            let bs = self.machine.base_size();
            return end.div_ceil(bs) * bs;
        }
        let grain = match self.policy.hint() {
            Some(h) if h.heap_growth => h.hint.map_or(self.machine.base_size(), |b| {
                self.machine.page_sizes()[self.class_at_most(b)]
            }),
            _ => self.machine.base_size(),
        };
        end.div_ceil(grain) * grain
    }

    /// seed 002 7.1: the page size for a zero-fill fault at `vpn` (object page `pindex`) of map
    /// entry `v`: allocates, zeroes and maps a large page and returns the fault's cycles, or
    /// None for a base page.
    pub(crate) fn hint_fault(
        &mut self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pindex: u64,
        write: bool,
    ) -> Result<Option<u64>> {
        let Some(h) = self.policy.hint() else {
            return Ok(None);
        };
        // Zero-filled memory (7: "faults on uninitialized data, heap, and stack segments are
        // serviced using zero-filled memory"); a read through an entry that still shares its
        // object since fork fills the shared object, a base page as elsewhere.
        if v.shadow.is_some() || v.needs_copy || !matches!(self.obj(v.obj).kind, ObjKind::Anon) {
            return Ok(None);
        }
        let sizes = self.machine.page_sizes();
        // seed 002 6: chatr's hint, or the transparent method's: the largest page size not above
        // the region's size (the rule is "based on the region size"; which size exactly is not
        // published: this model's reading), bounded by the tunables.
        let hinted = match h.hint {
            Some(b) => b,
            None => {
                let region = sizes[self.class_at_most(v.end - v.start)];
                region.clamp(h.vps_pagesize, h.vps_ceiling)
            }
        };
        let mut c = self.class_at_most(hinted);
        if c == 0 {
            return Ok(None);
        }
        // 7.1: "lowers it if the available physical memory is less than 4 times the pagesize".
        let avail = self.available_frames() << self.base_shift();
        let asked = c;
        while c > 0 && avail < 4 * sizes[c] {
            c -= 1;
        }
        if c < asked {
            self.pagesize.lowered_for_memory += 1;
        }
        let hint_c = c;
        // Figure 4: from the adjusted hint down, the first page size whose aligned page fits.
        let block = loop {
            if c == 0 {
                if hint_c > 0 {
                    self.pagesize.lowered_to_fit += 1;
                }
                return Ok(None);
            }
            let n = 1u64 << self.orders[c];
            if let Some(b) = self.empty_block(pid, v, vpn, pindex, n)? {
                break b;
            }
            c -= 1;
        };
        if c < hint_c {
            self.pagesize.lowered_to_fit += 1;
        }
        let o = self.orders[c];
        let n = 1u64 << o;
        let head = block.0;
        // The page-table pages first: allocating them may run the page daemon, which must not
        // find the large page half entered.
        self.pmap_prepare(pid, head, n)?;
        // 7.1: "an allocation request for a large page with the no-wait option".
        let Some(pfn) = self.phys.buddy.alloc(Order(o)) else {
            self.size_stats(c).failed += 1;
            return Ok(None);
        };
        self.map_new_block(pid, v, block, pfn, n)?;
        let p = self.procs.get_mut(&pid.0).expect("hint_fault: pid");
        p.pmap.promote(head, o, SizeClass(c as u8));
        p.pmap.touch(head, o, write);
        self.size_stats(c).allocated += 1;
        let cost = &self.machine.cost;
        let writes = self.machine.superpage_entry_writes(n);
        Ok(Some(
            n * cost.zero_page_cycles + writes * cost.pte_write_cycles,
        ))
    }

    /// The counters of size class `c` (a superpage size of the machine).
    fn size_stats(&mut self, c: usize) -> &mut SizeStats {
        if self.pagesize.sizes.is_empty() {
            self.pagesize.sizes = self.zero_size_stats();
        }
        &mut self.pagesize.sizes[c - 1]
    }

    /// The size class of the largest page size of the machine not above `b` bytes (the base
    /// page's, 0, if none): "the next lower valid value" (vps_ceiling(5)).
    fn class_at_most(&self, b: u64) -> usize {
        self.machine
            .page_sizes()
            .iter()
            .rposition(|&s| s <= b)
            .unwrap_or(0)
    }

    /// One row of zero counts per superpage size of the machine.
    fn zero_size_stats(&self) -> Vec<SizeStats> {
        self.machine.page_sizes()[1..]
            .iter()
            .map(|&size| SizeStats {
                size,
                ..Default::default()
            })
            .collect()
    }

    /// The counters for the report: one row per superpage size of the machine.
    pub fn pagesize_stats(&self) -> PagesizeStats {
        let mut st = self.pagesize.clone();
        if st.sizes.is_empty() {
            st.sizes = self.zero_size_stats();
        }
        st
    }
}
