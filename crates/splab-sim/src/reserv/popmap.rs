//! Population map (seed 000 4.9): per memory object, a radix tree with one level per page size.
//! A node at level c stands for one aligned region of size class c of the object; it counts its
//! children (regions of class c-1, or base pages at level 1) with at least one page populated
//! (`somepop`) and fully populated (`fullpop`), and points to the reservation of exactly its size
//! if there is one. The absence of a node means both counters are zero.
//!
//! Nodes are found through a hash of (level, region index) per object, which is the paper's hash
//! of (object, page index) with the object implicit. Counters propagate upward only when
//! `somepop` goes 0 <-> 1 or `fullpop` reaches / leaves the ratio between consecutive sizes.
//!
//! Indices are "colour-adjusted" page indices (`cindex = pindex + colour`), so that regions line
//! up with virtual superpage boundaries (FreeBSD's object colour).
//!
//! Uses: reserved-frame lookup (`reservation_at`), overlap avoidance (`empty`), promotion
//! decisions (`full`), preemption (`empty` / `full` of the pieces).

use rustc_hash::FxHashMap;

pub const NO_RESV: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    pub somepop: u32,
    pub fullpop: u32,
    pub resv: u32,
}

#[derive(Clone, Debug)]
pub struct PopMap {
    /// `orders[c]`: buddy order of size class c (orders[0] = 0).
    orders: Vec<u8>,
    /// `levels[c]` for c >= 1; `levels[0]` is unused (leaves are the object's pages).
    levels: Vec<FxHashMap<u64, Node>>,
}

impl PopMap {
    pub fn new(orders: &[u8]) -> PopMap {
        PopMap {
            orders: orders.to_vec(),
            levels: vec![FxHashMap::default(); orders.len()],
        }
    }

    #[inline]
    fn ratio(&self, c: usize) -> u32 {
        1 << (self.orders[c] - self.orders[c - 1])
    }

    pub fn node(&self, c: usize, cindex: u64) -> Option<&Node> {
        self.levels[c].get(&(cindex >> self.orders[c]))
    }

    /// Base page `cindex` became populated (it was not). Returns the levels updated (from 1 to
    /// S: the change propagates upward only on a transition).
    pub fn populate(&mut self, cindex: u64) -> u64 {
        let (mut some, mut full) = (true, true);
        let mut levels = 0;
        for c in 1..self.orders.len() {
            levels += 1;
            let ratio = self.ratio(c);
            let n = self.levels[c]
                .entry(cindex >> self.orders[c])
                .or_insert(Node {
                    somepop: 0,
                    fullpop: 0,
                    resv: NO_RESV,
                });
            if some {
                n.somepop += 1;
                some = n.somepop == 1;
            }
            if full {
                n.fullpop += 1;
                full = n.fullpop == ratio;
            }
            if !some && !full {
                break;
            }
        }
        levels
    }

    /// Base page `cindex` became unpopulated (it was populated). Returns the levels updated.
    pub fn depopulate(&mut self, cindex: u64) -> u64 {
        let (mut empty, mut was_full) = (true, true);
        let mut levels = 0;
        for c in 1..self.orders.len() {
            levels += 1;
            let ratio = self.ratio(c);
            let key = cindex >> self.orders[c];
            let n = self.levels[c]
                .get_mut(&key)
                .expect("PopMap::depopulate: page was not populated");
            if was_full {
                was_full = n.fullpop == ratio;
                n.fullpop -= 1;
            }
            if empty {
                n.somepop -= 1;
                empty = n.somepop == 0;
            }
            if n.somepop == 0 && n.resv == NO_RESV {
                self.levels[c].remove(&key);
            }
            if !empty && !was_full {
                break;
            }
        }
        levels
    }

    /// No page populated in the class-c region containing `cindex` (c >= 1).
    #[inline]
    pub fn empty(&self, c: usize, cindex: u64) -> bool {
        self.node(c, cindex).is_none_or(|n| n.somepop == 0)
    }

    /// Every page of the class-c region containing `cindex` is populated (c >= 1).
    #[inline]
    pub fn full(&self, c: usize, cindex: u64) -> bool {
        self.node(c, cindex)
            .is_some_and(|n| n.fullpop == self.ratio(c))
    }

    /// The reservation covering `cindex`, if any: the node on the path from the root that points
    /// to one (seed 000 4.9, "reserved frame lookup").
    #[inline]
    pub fn reservation_at(&self, cindex: u64) -> Option<u32> {
        self.reservation_at_counted(cindex).0
    }

    /// `reservation_at`, and the levels it looked up (from the root down to the node found).
    #[inline]
    pub fn reservation_at_counted(&self, cindex: u64) -> (Option<u32>, u64) {
        let mut levels = 0;
        let r = (1..self.orders.len()).rev().find_map(|c| {
            levels += 1;
            self.node(c, cindex)
                .map(|n| n.resv)
                .filter(|&r| r != NO_RESV)
        });
        (r, levels)
    }

    /// Points the class-c node of `cindex` to reservation `r` (or clears it with NO_RESV).
    pub fn set_resv(&mut self, c: usize, cindex: u64, r: u32) {
        let key = cindex >> self.orders[c];
        if r == NO_RESV {
            if let Some(n) = self.levels[c].get_mut(&key) {
                n.resv = NO_RESV;
                if n.somepop == 0 {
                    self.levels[c].remove(&key);
                }
            }
        } else {
            self.levels[c]
                .entry(key)
                .or_insert(Node {
                    somepop: 0,
                    fullpop: 0,
                    resv: NO_RESV,
                })
                .resv = r;
        }
    }

    /// Every node with a reservation pointer: (class, region index, reservation).
    pub fn reservations(&self) -> Vec<(usize, u64, u32)> {
        let mut v = Vec::new();
        for c in 1..self.levels.len() {
            for (&k, n) in &self.levels[c] {
                if n.resv != NO_RESV {
                    v.push((c, k, n.resv));
                }
            }
        }
        v.sort_unstable();
        v
    }

    /// Recomputes every counter from the populated pages and compares.
    pub fn check(&self, populated: &[u64]) -> Result<(), String> {
        let mut want = PopMap::new(&self.orders);
        for &p in populated {
            want.populate(p);
        }
        for c in 1..self.levels.len() {
            for (&k, n) in &self.levels[c] {
                let w = want.levels[c].get(&k).copied().unwrap_or(Node {
                    somepop: 0,
                    fullpop: 0,
                    resv: NO_RESV,
                });
                if (n.somepop, n.fullpop) != (w.somepop, w.fullpop) {
                    return Err(format!("popmap: level {c} region {k:#x} has (somepop, fullpop) = ({}, {}) but its pages give ({}, {})", n.somepop, n.fullpop, w.somepop, w.fullpop));
                }
                if n.somepop == 0 && n.resv == NO_RESV {
                    return Err(format!(
                        "popmap: empty node kept at level {c} region {k:#x}"
                    ));
                }
            }
            for (&k, w) in &want.levels[c] {
                if w.somepop > 0 && !self.levels[c].contains_key(&k) {
                    return Err(format!(
                        "popmap: level {c} region {k:#x} is populated but has no node"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Alpha-like: 8 pages per 64K, 8 x 64K per 512K.
    #[test]
    fn counters_propagate_on_transitions_only() {
        let mut m = PopMap::new(&[0, 3, 6]);
        for p in 0..8 {
            m.populate(p);
        }
        assert!(m.full(1, 0) && !m.full(2, 0));
        assert_eq!(
            *m.node(2, 0).unwrap(),
            Node {
                somepop: 1,
                fullpop: 1,
                resv: NO_RESV
            }
        );
        m.populate(9);
        assert_eq!(m.node(2, 0).unwrap().somepop, 2);
        assert!(m.empty(1, 16) && !m.empty(1, 9));
        m.depopulate(3);
        assert_eq!(
            *m.node(2, 0).unwrap(),
            Node {
                somepop: 2,
                fullpop: 0,
                resv: NO_RESV
            }
        );
        m.check(&[0, 1, 2, 4, 5, 6, 7, 9]).unwrap();
        m.set_resv(2, 0, 7);
        assert_eq!(m.reservation_at(40), Some(7));
        assert_eq!(m.reservation_at(64), None);
        for p in [0, 1, 2, 4, 5, 6, 7, 9] {
            m.depopulate(p);
        }
        assert!(m.empty(2, 0));
        assert_eq!(
            m.reservation_at(0),
            Some(7),
            "a reservation node outlives its population"
        );
        m.set_resv(2, 0, NO_RESV);
        m.check(&[]).unwrap();
    }

    fn node_of(m: &PopMap, c: usize, cindex: u64) -> (u32, u32, u32) {
        let n = m.node(c, cindex).expect("node");
        (n.somepop, n.fullpop, n.resv)
    }

    /// seed 000 4.9: a level is updated only when the one below changes state (somepop 0 -> 1,
    /// or fullpop reaches the ratio); the levels counted are what the bookkeeping is charged.
    #[test]
    fn populate_counts_the_levels_it_updates() {
        let mut m = PopMap::new(&[0, 3, 6]);
        // First page of an empty map: level 1 goes 0 -> 1 page, so level 2 goes 0 -> 1 child.
        assert_eq!(m.populate(9), 2);
        assert_eq!(node_of(&m, 1, 9), (1, 1, NO_RESV));
        assert_eq!(node_of(&m, 2, 9), (1, 0, NO_RESV));
        // A second page of the same 64K region: no transition, level 1 only.
        assert_eq!(m.populate(10), 1);
        assert_eq!(node_of(&m, 1, 9), (2, 2, NO_RESV));
        for p in [8, 11, 12, 13, 14] {
            assert_eq!(m.populate(p), 1);
        }
        // The last page fills the region: level 2 counts one full child.
        assert_eq!(m.populate(15), 2);
        assert!(m.full(1, 8) && !m.full(2, 8) && !m.full(1, 0));
        assert_eq!(node_of(&m, 1, 15), (8, 8, NO_RESV));
        assert_eq!(node_of(&m, 2, 15), (1, 1, NO_RESV));
        // The other seven 64K regions filled: the 512K region is full (ratio 8, not 512).
        for p in (0..64).filter(|p| !(8..16).contains(p)) {
            m.populate(p);
        }
        assert!(m.full(2, 63) && m.full(1, 0));
        assert_eq!(node_of(&m, 2, 0), (8, 8, NO_RESV));
        assert!(m.empty(2, 64) && !m.full(2, 64) && m.node(1, 64).is_none());
        // Region indices of a higher page: 100 is 64K region 12, 512K region 1.
        assert_eq!(m.populate(100), 2);
        assert_eq!(m.levels[1].get(&12).map(|n| n.somepop), Some(1));
        assert_eq!(m.levels[2].get(&1).map(|n| n.somepop), Some(1));
        assert!(!m.empty(1, 96) && m.empty(1, 104) && !m.empty(2, 127));
        m.check(&(0..64).chain([100]).collect::<Vec<_>>()).unwrap();
    }

    /// seed 000 4.9: depopulation undoes the same transitions: a level below that leaves full or
    /// becomes empty changes the level above, and a node with nothing populated and no
    /// reservation is dropped.
    #[test]
    fn depopulate_counts_the_levels_it_updates() {
        let mut m = PopMap::new(&[0, 3, 6]);
        for p in 0..16 {
            m.populate(p);
        }
        // Page 3 leaves a full 64K region: level 2 loses a full child, keeps a populated one.
        assert_eq!(m.depopulate(3), 2);
        assert_eq!(node_of(&m, 1, 0), (7, 7, NO_RESV));
        assert_eq!(node_of(&m, 2, 0), (2, 1, NO_RESV));
        // Another page of it: no transition.
        assert_eq!(m.depopulate(4), 1);
        assert_eq!(node_of(&m, 1, 0), (6, 6, NO_RESV));
        assert_eq!(node_of(&m, 2, 0), (2, 1, NO_RESV));
        // Region 0 emptied: its node goes, level 2 loses a populated child.
        for p in [0, 1, 2, 5, 6] {
            assert_eq!(m.depopulate(p), 1);
        }
        assert_eq!(m.depopulate(7), 2);
        assert!(m.node(1, 0).is_none() && m.empty(1, 0));
        assert_eq!(node_of(&m, 2, 0), (1, 1, NO_RESV));
        m.check(&(8..16).collect::<Vec<_>>()).unwrap();
        // Page 15 leaves region 1 full but populated: one full child less at level 2.
        assert_eq!(m.depopulate(15), 2);
        assert_eq!(node_of(&m, 2, 0), (1, 0, NO_RESV));
        for p in 8..14 {
            assert_eq!(m.depopulate(p), 1);
        }
        // The last page: both levels emptied, both nodes dropped.
        assert_eq!(m.depopulate(14), 2);
        assert!(m.levels[1].is_empty() && m.levels[2].is_empty());
        m.check(&[]).unwrap();
    }

    /// seed 000 4.9, reserved frame lookup: from the root down, the first node pointing to a
    /// reservation; the levels looked up are charged.
    #[test]
    fn reservation_lookup_walks_from_the_root() {
        let mut m = PopMap::new(&[0, 3, 6]);
        assert_eq!(m.reservation_at_counted(70), (None, 2));
        // A 64K reservation over pages 72..80: two levels looked up.
        m.set_resv(1, 72, 5);
        assert_eq!(m.reservation_at_counted(75), (Some(5), 2));
        assert_eq!(m.reservation_at_counted(71), (None, 2));
        assert_eq!(m.reservation_at(79), Some(5));
        assert_eq!(node_of(&m, 1, 72), (0, 0, 5));
        // A populated node without reservation is passed over.
        m.populate(130);
        assert_eq!(m.reservation_at_counted(130), (None, 2));
        // A 512K reservation over 128..192: found at the root, one level.
        m.set_resv(2, 128, 9);
        assert_eq!(m.reservation_at_counted(130), (Some(9), 1));
        assert_eq!(m.reservation_at(191), Some(9));
        assert_eq!(m.reservation_at(192), None);
        assert_eq!(m.reservations(), vec![(1, 9, 5), (2, 2, 9)]);
        // A reservation-only node is not an error of the check.
        m.check(&[130]).unwrap();
        // Cleared on a populated node: the node stays with its counters.
        m.set_resv(2, 130, NO_RESV);
        assert_eq!(node_of(&m, 2, 130), (1, 0, NO_RESV));
        assert_eq!(m.reservation_at(130), None);
        // Cleared on an unpopulated node: the node goes.
        m.set_resv(1, 72, NO_RESV);
        assert!(m.node(1, 72).is_none());
        assert_eq!(m.reservations(), vec![]);
        m.check(&[130]).unwrap();
    }

    /// The check finds each fault it names: a wrong counter, an empty node kept, a populated
    /// region with no node.
    #[test]
    fn the_check_finds_wrong_counters_and_nodes() {
        let mut m = PopMap::new(&[0, 3, 6]);
        for p in [1, 2, 20] {
            m.populate(p);
        }
        m.check(&[1, 2, 20]).unwrap();
        let mut bad = m.clone();
        bad.levels[1].get_mut(&0).unwrap().somepop = 3;
        assert!(bad.check(&[1, 2, 20]).unwrap_err().contains("(3, 2)"));
        let mut bad = m.clone();
        bad.levels[2].get_mut(&0).unwrap().fullpop = 1;
        assert!(bad.check(&[1, 2, 20]).is_err());
        let mut bad = m.clone();
        bad.levels[1].insert(
            5,
            Node {
                somepop: 0,
                fullpop: 0,
                resv: NO_RESV,
            },
        );
        assert!(bad.check(&[1, 2, 20]).unwrap_err().contains("empty node"));
        let mut bad = m.clone();
        bad.levels[1].remove(&2);
        assert!(bad.check(&[1, 2, 20]).unwrap_err().contains("has no node"));
    }
}
