//! Backing store for evicted pages: the swap device for anonymous memory (FreeBSD swap_pager)
//! and the files themselves for the page cache (vnode_pager). The VM asks it whether a page that
//! is not resident has contents somewhere (then a fault reads it back: a major fault) or is new
//! (zero-filled, or for a file under a warm page cache, cached since the run began).
//!
//! What is kept: for each anonymous object, the page indices with a copy on swap; for each file
//! object, the page indices evicted from the page cache. A swap copy stays after the page is read
//! back (FreeBSD keeps the swap block while the page is clean), so evicting it again while clean
//! writes nothing. Swap slots are not shared: fork copies the parent's entries for the child,
//! counting two slots where FreeBSD's shared swap block is one (`swap_slots` may overstate).
//!
//! I/O requests are one page each: neither write clustering (FreeBSD vm_pageout_clean gathers up
//! to 16 contiguous dirty pages) nor swap read-ahead is modelled yet, so paging I/O is charged
//! its latency per page (an upper bound on its time).

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use crate::units::ObjId;

/// Paging I/O counters (the report's `memory.paging`).
#[derive(Clone, Debug, Default)]
pub struct SwapStats {
    /// Pages written to swap / to their file.
    pub pageouts_swap: u64,
    pub pageouts_file: u64,
    /// Pages read back from swap / from their file after an eviction.
    pub pageins_swap: u64,
    pub pageins_file: u64,
    /// Swap slots in use, and the peak.
    pub swap_slots: u64,
    pub swap_peak_slots: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Backing {
    /// Swap slots the device has (pages).
    pub swap_limit: u64,
    swap: FxHashMap<u32, BTreeSet<u64>>,
    evicted: FxHashMap<u32, BTreeSet<u64>>,
    pub stats: SwapStats,
}

impl Backing {
    /// A backing store whose swap area holds `swap_limit` pages.
    pub fn new(swap_limit: u64) -> Backing {
        Backing {
            swap_limit,
            ..Default::default()
        }
    }

    /// Whether anonymous page `pindex` of `obj` has a copy on swap.
    pub fn on_swap(&self, obj: ObjId, pindex: u64) -> bool {
        self.swap.get(&obj.0).is_some_and(|s| s.contains(&pindex))
    }

    /// Whether any page of `obj` has a copy on swap.
    pub fn has_swap(&self, obj: ObjId) -> bool {
        self.swap.contains_key(&obj.0)
    }

    /// Gives page `pindex` of `obj` a swap slot (if it has none); false if the swap area is
    /// full.
    pub fn add_swap(&mut self, obj: ObjId, pindex: u64) -> bool {
        if self.on_swap(obj, pindex) {
            return true;
        }
        if self.stats.swap_slots >= self.swap_limit {
            return false;
        }
        self.swap.entry(obj.0).or_default().insert(pindex);
        self.stats.swap_slots += 1;
        self.stats.swap_peak_slots = self.stats.swap_peak_slots.max(self.stats.swap_slots);
        true
    }

    /// Frees the swap slots of pages `[first, last)` of `obj` (their mapping went away).
    pub fn free_swap_range(&mut self, obj: ObjId, first: u64, last: u64) {
        let Some(s) = self.swap.get_mut(&obj.0) else {
            return;
        };
        let gone: Vec<u64> = s.range(first..last).copied().collect();
        for p in &gone {
            s.remove(p);
        }
        self.stats.swap_slots -= gone.len() as u64;
        if s.is_empty() {
            self.swap.remove(&obj.0);
        }
    }

    /// An object is destroyed: its swap slots are freed.
    pub fn drop_object(&mut self, obj: ObjId) {
        if let Some(s) = self.swap.remove(&obj.0) {
            self.stats.swap_slots -= s.len() as u64;
        }
        self.evicted.remove(&obj.0);
    }

    /// Fork: `to` gets a copy of `from`'s swap entries for pages `[first, last)`.
    pub fn copy_swap_range(&mut self, from: ObjId, to: ObjId, first: u64, last: u64) {
        let pages: Vec<u64> = match self.swap.get(&from.0) {
            Some(s) => s.range(first..last).copied().collect(),
            None => return,
        };
        // Fork shares the slots in FreeBSD; here each copy takes one, past the limit if need
        // be (the limit bounds what the page daemon writes, not what fork copies).
        for p in pages {
            if self.swap.entry(to.0).or_default().insert(p) {
                self.stats.swap_slots += 1;
            }
        }
        self.stats.swap_peak_slots = self.stats.swap_peak_slots.max(self.stats.swap_slots);
    }

    /// Whether file page `pindex` of `obj` was evicted from the page cache (so a use reads it).
    pub fn evicted(&self, obj: ObjId, pindex: u64) -> bool {
        self.evicted
            .get(&obj.0)
            .is_some_and(|s| s.contains(&pindex))
    }

    pub fn set_evicted(&mut self, obj: ObjId, pindex: u64, on: bool) {
        if on {
            self.evicted.entry(obj.0).or_default().insert(pindex);
        } else if let Some(s) = self.evicted.get_mut(&obj.0) {
            s.remove(&pindex);
            if s.is_empty() {
                self.evicted.remove(&obj.0);
            }
        }
    }

    /// The slot count matches the entries.
    pub fn check_invariants(&self) -> Result<(), String> {
        let n: u64 = self.swap.values().map(|s| s.len() as u64).sum();
        if n != self.stats.swap_slots {
            return Err(format!(
                "swap: {n} slots held but swap_slots = {}",
                self.stats.swap_slots
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_and_freed_by_range() {
        let mut b = Backing::new(4);
        for p in [1, 5, 9] {
            assert!(b.add_swap(ObjId(3), p));
        }
        assert!(b.add_swap(ObjId(3), 5), "a page with a slot keeps it");
        assert!(b.add_swap(ObjId(3), 6));
        assert!(!b.add_swap(ObjId(3), 7), "the swap area is full");
        b.free_swap_range(ObjId(3), 6, 7);
        assert_eq!(b.stats.swap_slots, 3);
        b.free_swap_range(ObjId(3), 2, 9);
        assert!(b.on_swap(ObjId(3), 1) && !b.on_swap(ObjId(3), 5) && b.on_swap(ObjId(3), 9));
        b.copy_swap_range(ObjId(3), ObjId(4), 0, 100);
        assert_eq!(b.stats.swap_slots, 4);
        assert_eq!(b.stats.swap_peak_slots, 4);
        b.swap_limit = 8;
        assert!(b.add_swap(ObjId(5), 0));
        b.drop_object(ObjId(3));
        assert_eq!(b.stats.swap_slots, 3);
        b.check_invariants().unwrap();
        b.stats.swap_slots = 7;
        assert!(b.check_invariants().unwrap_err().contains("7"));
    }

    #[test]
    fn evicted_file_pages_are_remembered_until_read() {
        let mut b = Backing::new(0);
        assert!(!b.evicted(ObjId(1), 3));
        b.set_evicted(ObjId(1), 3, true);
        assert!(b.evicted(ObjId(1), 3) && !b.evicted(ObjId(1), 4) && !b.evicted(ObjId(2), 3));
        b.set_evicted(ObjId(1), 3, false);
        assert!(!b.evicted(ObjId(1), 3));
        b.set_evicted(ObjId(1), 3, true);
        b.drop_object(ObjId(1));
        assert!(!b.evicted(ObjId(1), 3));
    }
}
