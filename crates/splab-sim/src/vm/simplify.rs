//! Map-entry merging: after an operation splits map entries and then makes the pieces alike
//! again (mprotect back to the old protection, or a PROT_NONE region made accessible piece by
//! piece, as glibc grows a non-main malloc arena in 132KB steps), adjacent compatible entries
//! become one again. Without it a region stays cut into entries no superpage can span, and is
//! never promoted (promotion requires the superpage to lie inside one entry, seed 000 4.9).
//!
//! The rule is FreeBSD's (sys/vm/vm_map.c, `vm_map_simplify_entry` and
//! `vm_map_mergeable_neighbors`): two entries merge when they are adjacent, map the same object
//! at contiguous offsets, and agree on everything else an entry carries (protection, flags,
//! copy-on-write shadow, advice); stack entries, which grow down, never merge (FreeBSD's
//! `MAP_ENTRY_GROWS_DOWN | MAP_ENTRY_GROWS_UP` are in its no-merge mask). The merged
//! entry's neighbour releases its references to the objects, as `vm_map_merged_neighbor_dispose`
//! does. FreeBSD simplifies after `vm_map_protect` and `vm_map_madvise`; so does splab.

use super::{MapFlags, Os, Vma};
use crate::error::Result;
use crate::units::Pid;

/// Whether `next` can be merged into `prev` (FreeBSD `vm_map_mergeable_neighbors`).
fn mergeable(prev: &Vma, next: &Vma, base_shift: u8) -> bool {
    // FreeBSD's no-merge mask has the grow-down (stack) entries; the brk heap is an ordinary
    // entry there (obreak extends it like any other), so `GROWABLE` alone does not stop a merge.
    prev.end == next.start
        && !prev.flags.has(MapFlags::STACK)
        && !next.flags.has(MapFlags::STACK)
        && prev.obj == next.obj
        && prev.pgoff + ((prev.end - prev.start) >> base_shift) == next.pgoff
        && prev.shadow == next.shadow
        && prev.needs_copy == next.needs_copy
        && prev.prot == next.prot
        && prev.flags == next.flags
        && prev.hugepage_advice == next.hugepage_advice
}

impl Os {
    /// Merges compatible neighbours among the map entries of `pid` that overlap
    /// `[start, end)`, and those entries with the entries just outside it.
    pub(crate) fn simplify_entries(&mut self, pid: Pid, start: u64, end: u64) -> Result<()> {
        let bs = self.base_shift();
        let p = self.proc(pid)?;
        // The entry ending at or containing `start`, else the first one after it.
        let mut cur = match p.vmas.range(..start).next_back() {
            Some((&s, v)) if v.end >= start => s,
            _ => match p.vmas.range(start..).next() {
                Some((&s, _)) => s,
                None => return Ok(()),
            },
        };
        loop {
            let p = self.proc_mut(pid)?;
            let prev = &p.vmas[&cur];
            if prev.start > end {
                break;
            }
            let next_start = prev.end;
            let Some(next) = p.vmas.get(&next_start) else {
                // A gap (or the end of the address space): continue from the next entry.
                match p.vmas.range(next_start..).next() {
                    Some((&s, _)) if s <= end => {
                        cur = s;
                        continue;
                    }
                    _ => break,
                }
            };
            if mergeable(prev, next, bs) {
                let next = p.vmas.remove(&next_start).expect("simplify: next entry");
                p.vmas.get_mut(&cur).expect("simplify: entry").end = next.end;
                // The neighbour's references go away with it; the merged entry keeps its own.
                if let Some(s) = next.shadow {
                    self.unref_object(s);
                }
                self.unref_object(next.obj);
            } else {
                cur = next_start;
            }
        }
        Ok(())
    }
}
