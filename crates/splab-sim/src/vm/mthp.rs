//! Linux multi-size THP for anonymous memory (mTHP, Linux 6.8; transhuge.rst "multi-size THP",
//! `/sys/kernel/mm/transparent_hugepage/hugepages-<size>kB/enabled`), policy `mthp=16K+64K`.
//!
//! mm/memory.c `alloc_anon_folio`: when the PMD-sized THP was not taken (vm/thp.rs), a fault
//! takes the largest enabled order whose aligned block lies inside the map entry
//! (`thp_vma_suitable_order`) with no page mapped in it (`pte_range_none`), tries to allocate
//! it (free lists only: mTHP allocations do not compact here), and on failure counts
//! `anon_fault_fallback` for that size and tries the next order down, ending at one base page.
//! The whole block is zeroed and mapped with one base PTE per page (`set_ptes`), writable and
//! dirty.
//!
//! The sizes are enabled as `inherit`: they follow `enabled` and the map entry's advice, as
//! the PMD size does, and `prctl(PR_SET_THP_DISABLE)`.
//!
//! TLB reach: none. An mTHP is mapped by base PTEs, and the modelled machines have no PTE
//! coalescing (AMD's, from Zen, coalesces up to 4 contiguous 4KB entries; arm64's contiguous
//! bit needs 16): what an mTHP saves here is faults (one per block) and page-table work, at
//! the cost of zeroing pages the program may never touch.
//!
//! Not modelled: mTHP folios on the deferred split queue (a partly unmapped mTHP frees its
//! pages at once), mTHP for shmem/file memory, khugepaged collapsing into mTHP sizes, the
//! swap-out of whole mTHPs, and the 4KB zero page for read faults (a read fault allocates, as
//! elsewhere in the model).

use serde::Serialize;

use super::{Os, Vma};
use crate::error::Result;
use crate::units::{Order, Pid};

/// Per-size counters under the names of Linux's
/// `hugepages-<size>kB/stats/` (`memory.thp.mthp`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct MthpStats {
    /// The mTHP size in bytes.
    pub size: u64,
    /// `anon_fault_alloc`: blocks of this size allocated, zeroed and mapped at a fault.
    pub anon_fault_alloc: u64,
    /// `anon_fault_fallback`: faults that tried this size and found no free block.
    pub anon_fault_fallback: u64,
}

impl Os {
    /// `alloc_anon_folio` for the mTHP sizes: maps the block around `vpn` (object page
    /// `pindex`) of `pid` and returns the fault's cycles, or None for a base page.
    pub(crate) fn mthp_fault(
        &mut self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pindex: u64,
    ) -> Result<Option<u64>> {
        let Some(t) = self.policy.thp() else {
            return Ok(None);
        };
        if t.mthp.is_empty() || !self.thp_eligible(self.proc(pid)?, v) {
            return Ok(None);
        }
        let bs = self.base_shift();
        let mut sizes = t.mthp.clone();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        for size in sizes {
            let o = (size >> bs).trailing_zeros() as u8;
            let n = 1u64 << o;
            // thp_vma_suitable_order, pte_range_none.
            let Some(block) = self.empty_block(pid, v, vpn, pindex, n)? else {
                continue;
            };
            let head = block.0;
            self.pmap_prepare(pid, head, n)?;
            let Some(pfn) = self.phys.buddy.alloc(Order(o)) else {
                self.mthp_stat(size).anon_fault_fallback += 1;
                continue;
            };
            self.map_new_block(pid, v, block, pfn, n)?;
            let p = self.procs.get_mut(&pid.0).expect("mthp_fault: pid");
            for i in 0..n {
                p.pmap.touch(head + i, 0, v.prot.writable());
            }
            self.mthp_stat(size).anon_fault_alloc += 1;
            let c = &self.machine.cost;
            return Ok(Some(n * (c.zero_page_cycles + c.pte_write_cycles)));
        }
        Ok(None)
    }

    fn mthp_stat(&mut self, size: u64) -> &mut MthpStats {
        let v = &mut self.thp.stats.mthp;
        let i = match v.iter().position(|s| s.size == size) {
            Some(i) => i,
            None => {
                v.push(MthpStats {
                    size,
                    ..Default::default()
                });
                v.sort_unstable_by_key(|s| s.size);
                v.iter().position(|s| s.size == size).expect("pushed")
            }
        };
        &mut v[i]
    }
}
