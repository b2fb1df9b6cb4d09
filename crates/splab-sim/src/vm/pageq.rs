//! The page queues (seed 000 5.1; FreeBSD 4.x `vm_page.c` / `vm_pageq.c`): every frame an object
//! holds is on exactly one of three queues, each in approximate LRU order (head = oldest):
//! - active: recently referenced, aged by `act_count`;
//! - inactive: not referenced for a while, still mapped, candidates for eviction;
//! - cache: clean and unmapped, contents kept but available for allocation.
//!
//! The queues also hold the reverse map the page daemon needs: which object page a frame holds
//! (FreeBSD's `vm_page` knows its `object` and `pindex`). A frame held by several objects (after
//! fork, until copy-on-write separates them) keeps its other holders in a side table; the page
//! daemon leaves such frames alone (FreeBSD would unmap them from every pmap through pv lists;
//! splab does not model shared anonymous eviction, and says so).
//!
//! Storage is per frame and indexed directly: links, queue, activity count and flags in dense
//! vectors. The vectors are allocated zeroed at full size; the host touches only the pages of
//! frames that are ever used.
//!
//! Callers: `Os::obj_insert` / `obj_remove` (vm/reserve.rs) keep membership and the reverse map;
//! the page daemon (vm/pageout.rs) moves pages between queues.

use rustc_hash::FxHashMap;

use crate::units::{ObjId, Pfn};

const NIL: u32 = u32::MAX;

/// A page queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Queue {
    None = 0,
    Active = 1,
    Inactive = 2,
    Cache = 3,
}

impl Queue {
    fn from_u8(v: u8) -> Queue {
        match v {
            1 => Queue::Active,
            2 => Queue::Inactive,
            3 => Queue::Cache,
            _ => Queue::None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Queue::None => "none",
            Queue::Active => "active",
            Queue::Inactive => "inactive",
            Queue::Cache => "cache",
        }
    }
}

// FreeBSD 4.x vm_page.h: activity counts of the active queue's aging.
/// `ACT_INIT`: the activity of a newly activated page.
pub const ACT_INIT: u8 = 5;
/// `ACT_ADVANCE`: added when a scan finds the page referenced.
pub const ACT_ADVANCE: u8 = 3;
/// `ACT_DECLINE`: subtracted when a scan finds it unreferenced.
pub const ACT_DECLINE: u8 = 1;
/// `ACT_MAX`: the cap.
pub const ACT_MAX: u8 = 64;

/// Frame flag: the page was modified since it was last written to its backing store, as seen
/// when its mappings went away (FreeBSD `m->dirty`, set from the pmap's modified bits).
pub const F_DIRTY: u8 = 1;
/// Frame flag: busy in the fault being handled (FreeBSD `PG_BUSY`); the page daemon skips it.
pub const F_BUSY: u8 = 2;

#[derive(Clone, Debug)]
pub struct PageQueues {
    prev: Vec<u32>,
    next: Vec<u32>,
    queue: Vec<u8>,
    act: Vec<u8>,
    flags: Vec<u8>,
    /// The object page a held frame holds (its first holder).
    owner_obj: Vec<u32>,
    owner_pindex: Vec<u64>,
    /// Further holders of shared frames.
    extra: FxHashMap<u32, Vec<(ObjId, u64)>>,
    head: [u32; 4],
    tail: [u32; 4],
    count: [u64; 4],
    busy: Vec<u32>,
}

impl PageQueues {
    pub fn new(frames: u64) -> PageQueues {
        let n = frames as usize;
        PageQueues {
            // Links are meaningful only on a queue; zero-filled vectors cost nothing until used.
            prev: vec![0; n],
            next: vec![0; n],
            queue: vec![0; n],
            act: vec![0; n],
            flags: vec![0; n],
            owner_obj: vec![0; n],
            owner_pindex: vec![0; n],
            extra: FxHashMap::default(),
            head: [NIL; 4],
            tail: [NIL; 4],
            count: [0; 4],
            busy: Vec::new(),
        }
    }

    #[inline]
    pub fn queue_of(&self, pfn: Pfn) -> Queue {
        Queue::from_u8(self.queue[pfn.0 as usize])
    }
    pub fn count(&self, q: Queue) -> u64 {
        self.count[q as usize]
    }
    pub fn head(&self, q: Queue) -> Option<Pfn> {
        let h = self.head[q as usize];
        (h != NIL).then_some(Pfn(h as u64))
    }
    /// The frame after `pfn` on its queue.
    pub fn next_of(&self, pfn: Pfn) -> Option<Pfn> {
        let n = self.next[pfn.0 as usize];
        (n != NIL).then_some(Pfn(n as u64))
    }
    pub fn act(&self, pfn: Pfn) -> u8 {
        self.act[pfn.0 as usize]
    }
    pub fn set_act(&mut self, pfn: Pfn, a: u8) {
        self.act[pfn.0 as usize] = a.min(ACT_MAX);
    }
    /// A scan found the page referenced: its activity rises by `ACT_ADVANCE` (at most
    /// `ACT_MAX`) and it goes to the tail of the active queue.
    pub fn advance(&mut self, pfn: Pfn) {
        let a = self.act(pfn).saturating_add(ACT_ADVANCE);
        self.set_act(pfn, a);
        self.move_to(pfn, Queue::Active);
    }
    /// A scan found the page unreferenced: its activity falls by `ACT_DECLINE`; returns it.
    pub fn decline(&mut self, pfn: Pfn) -> u8 {
        let a = self.act(pfn).saturating_sub(ACT_DECLINE);
        self.set_act(pfn, a);
        a
    }
    #[inline]
    pub fn flag(&self, pfn: Pfn, f: u8) -> bool {
        self.flags[pfn.0 as usize] & f != 0
    }
    pub fn set_flag(&mut self, pfn: Pfn, f: u8, on: bool) {
        let s = &mut self.flags[pfn.0 as usize];
        if on {
            *s |= f;
        } else {
            *s &= !f;
        }
    }
    /// The object page `pfn` holds, if it is held by exactly one object.
    pub fn owner(&self, pfn: Pfn) -> Option<(ObjId, u64)> {
        let i = pfn.0 as usize;
        (self.queue[i] != 0 && !self.extra.contains_key(&(i as u32)))
            .then(|| (ObjId(self.owner_obj[i]), self.owner_pindex[i]))
    }
    pub fn shared(&self, pfn: Pfn) -> bool {
        self.extra.contains_key(&(pfn.0 as u32))
    }

    fn unlink(&mut self, i: u32) {
        let q = self.queue[i as usize] as usize;
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        if p == NIL {
            self.head[q] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail[q] = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.count[q] -= 1;
        self.queue[i as usize] = 0;
    }

    fn link_tail(&mut self, i: u32, q: Queue) {
        let qi = q as usize;
        let t = self.tail[qi];
        self.prev[i as usize] = t;
        self.next[i as usize] = NIL;
        if t == NIL {
            self.head[qi] = i;
        } else {
            self.next[t as usize] = i;
        }
        self.tail[qi] = i;
        self.count[qi] += 1;
        self.queue[i as usize] = q as u8;
    }

    /// Moves a held frame to the tail of queue `q` (also when it is on `q` already: requeue).
    pub fn move_to(&mut self, pfn: Pfn, q: Queue) {
        let i = pfn.0 as u32;
        debug_assert!(
            self.queue[i as usize] != 0,
            "PageQueues::move_to: frame not held"
        );
        self.unlink(i);
        self.link_tail(i, q);
    }

    /// An object page came to hold `pfn`. The first holder puts the frame on the active queue
    /// (FreeBSD vm_fault activates the faulted page, `act_count = ACT_INIT`) and marks it busy
    /// until the fault that brought it in is over.
    pub fn held(&mut self, pfn: Pfn, obj: ObjId, pindex: u64, first: bool) {
        let i = pfn.0 as usize;
        if first {
            self.owner_obj[i] = obj.0;
            self.owner_pindex[i] = pindex;
            self.flags[i] = 0;
            self.act[i] = ACT_INIT;
            self.link_tail(i as u32, Queue::Active);
            self.flags[i] |= F_BUSY;
            self.busy.push(i as u32);
        } else {
            self.extra.entry(i as u32).or_default().push((obj, pindex));
        }
    }

    /// Object page (obj, pindex) let go of `pfn`; `last`: no object holds it any more.
    pub fn released(&mut self, pfn: Pfn, obj: ObjId, pindex: u64, last: bool) {
        let i = pfn.0 as usize;
        if last {
            debug_assert!(!self.extra.contains_key(&(i as u32)));
            self.unlink(i as u32);
            self.flags[i] = 0;
            return;
        }
        let key = i as u32;
        let Some(ex) = self.extra.get_mut(&key) else {
            debug_assert!(false, "PageQueues::released: frame {i} has one holder");
            return;
        };
        if self.owner_obj[i] == obj.0 && self.owner_pindex[i] == pindex {
            let (o, p) = ex.pop().expect("extra holders");
            self.owner_obj[i] = o.0;
            self.owner_pindex[i] = p;
        } else if let Some(k) = ex.iter().position(|&(o, p)| o == obj && p == pindex) {
            ex.swap_remove(k);
        }
        if ex.is_empty() {
            self.extra.remove(&key);
        }
    }

    /// Every holder of `pfn`: (object, page index).
    pub fn holders(&self, pfn: Pfn) -> Vec<(ObjId, u64)> {
        let i = pfn.0 as usize;
        if self.queue[i] == 0 {
            return Vec::new();
        }
        let mut v = vec![(ObjId(self.owner_obj[i]), self.owner_pindex[i])];
        if let Some(ex) = self.extra.get(&(i as u32)) {
            v.extend_from_slice(ex);
        }
        v
    }

    /// Marks a held frame busy until the end of the current fault or event (a page the VM
    /// holds on to across an allocation, which may run the page daemon).
    pub fn mark_busy(&mut self, pfn: Pfn) {
        let i = pfn.0 as usize;
        if self.queue[i] != 0 && self.flags[i] & F_BUSY == 0 {
            self.flags[i] |= F_BUSY;
            self.busy.push(i as u32);
        }
    }

    /// Ends the busy state of the pages brought in by the fault just handled.
    pub fn unbusy_all(&mut self) {
        for i in self.busy.drain(..) {
            self.flags[i as usize] &= !F_BUSY;
        }
    }

    /// The frames on queue `q`, head first (for checks and tests).
    pub fn list(&self, q: Queue) -> Vec<Pfn> {
        let mut out = Vec::new();
        let mut i = self.head[q as usize];
        while i != NIL {
            out.push(Pfn(i as u64));
            i = self.next[i as usize];
        }
        out
    }

    /// The links are consistent, the counts right, and every frame on a queue is held.
    /// `held(pfn)`: the frame's holder count from physical memory.
    pub fn check_invariants(&self, held: impl Fn(Pfn) -> u32) -> Result<(), String> {
        let mut on = 0u64;
        for q in [Queue::Active, Queue::Inactive, Queue::Cache] {
            let mut n = 0u64;
            let mut prev = NIL;
            let mut i = self.head[q as usize];
            while i != NIL {
                if self.queue[i as usize] != q as u8 {
                    return Err(format!(
                        "pageq: frame {i} is linked on the {} queue but marked {}",
                        q.name(),
                        Queue::from_u8(self.queue[i as usize]).name()
                    ));
                }
                if self.prev[i as usize] != prev {
                    return Err(format!("pageq: frame {i}: broken back link"));
                }
                // A cache page whose frame went back to the allocator (vm/contig.rs) is held
                // by nothing; every other queued frame is held.
                if held(Pfn(i as u64)) == 0 && q != Queue::Cache {
                    return Err(format!(
                        "pageq: frame {i} is on the {} queue but no object holds it",
                        q.name()
                    ));
                }
                n += 1;
                if n > self.queue.len() as u64 {
                    return Err(format!("pageq: the {} queue has a cycle", q.name()));
                }
                prev = i;
                i = self.next[i as usize];
            }
            if prev != self.tail[q as usize] {
                return Err(format!("pageq: the {} queue's tail is wrong", q.name()));
            }
            if n != self.count[q as usize] {
                return Err(format!(
                    "pageq: the {} queue holds {n} frames but counts {}",
                    q.name(),
                    self.count[q as usize]
                ));
            }
            on += n;
        }
        let marked = crate::phys::count_unlike(&self.queue, 0);
        if marked != on {
            return Err(format!(
                "pageq: {marked} frames marked on a queue but {on} linked"
            ));
        }
        Ok(())
    }

    /// A cache page whose frame is free (vm/contig.rs) leaves the cache queue: its frame is
    /// reused, or its page is forgotten or reactivated.
    pub fn drop_free_cached(&mut self, pfn: Pfn) {
        let i = pfn.0 as usize;
        debug_assert_eq!(self.queue[i], Queue::Cache as u8);
        self.unlink(i as u32);
        self.flags[i] = 0;
    }

    /// Frames on some queue.
    pub fn total(&self) -> u64 {
        self.count[1] + self.count[2] + self.count[3]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_move_and_count() {
        let mut q = PageQueues::new(16);
        q.held(Pfn(3), ObjId(1), 10, true);
        q.held(Pfn(5), ObjId(1), 11, true);
        q.held(Pfn(7), ObjId(2), 0, true);
        assert_eq!(q.list(Queue::Active), vec![Pfn(3), Pfn(5), Pfn(7)]);
        q.move_to(Pfn(3), Queue::Inactive);
        q.move_to(Pfn(5), Queue::Active);
        assert_eq!(q.list(Queue::Active), vec![Pfn(7), Pfn(5)]);
        assert_eq!(q.list(Queue::Inactive), vec![Pfn(3)]);
        assert_eq!(q.owner(Pfn(3)), Some((ObjId(1), 10)));
        let held = |p: Pfn| u32::from([3, 5, 7].contains(&p.0));
        q.check_invariants(held).unwrap();
        q.released(Pfn(5), ObjId(1), 11, true);
        assert_eq!(q.count(Queue::Active), 1);
        assert_eq!(q.queue_of(Pfn(5)), Queue::None);
    }

    #[test]
    fn queue_of_next_of_and_activity() {
        let mut q = PageQueues::new(8);
        for p in [1, 2, 3] {
            q.held(Pfn(p), ObjId(0), p, true);
        }
        q.move_to(Pfn(2), Queue::Inactive);
        q.move_to(Pfn(3), Queue::Cache);
        assert_eq!(q.queue_of(Pfn(1)), Queue::Active);
        assert_eq!(q.queue_of(Pfn(2)), Queue::Inactive);
        assert_eq!(q.queue_of(Pfn(3)), Queue::Cache);
        assert_eq!(q.queue_of(Pfn(4)), Queue::None);
        assert_eq!(
            [Queue::Active, Queue::Inactive, Queue::Cache].map(Queue::name),
            ["active", "inactive", "cache"]
        );
        q.move_to(Pfn(2), Queue::Active);
        assert_eq!(q.head(Queue::Active), Some(Pfn(1)));
        assert_eq!(q.next_of(Pfn(1)), Some(Pfn(2)));
        assert_eq!(q.next_of(Pfn(2)), None);
        assert_eq!(q.act(Pfn(1)), ACT_INIT);
        q.set_act(Pfn(1), 200);
        assert_eq!(q.act(Pfn(1)), ACT_MAX);
        q.set_act(Pfn(1), 7);
        assert_eq!(q.act(Pfn(1)), 7);
        // Referenced: up by ACT_ADVANCE, capped, to the active tail; unreferenced: down by one.
        q.advance(Pfn(1));
        assert_eq!(q.act(Pfn(1)), 7 + ACT_ADVANCE);
        assert_eq!(q.list(Queue::Active).last(), Some(&Pfn(1)));
        q.set_act(Pfn(1), ACT_MAX - 1);
        q.advance(Pfn(1));
        assert_eq!(q.act(Pfn(1)), ACT_MAX);
        assert_eq!(q.decline(Pfn(1)), ACT_MAX - ACT_DECLINE);
        q.set_act(Pfn(1), 0);
        assert_eq!(q.decline(Pfn(1)), 0);
    }

    #[test]
    fn flags_set_and_clear_one_bit() {
        let mut q = PageQueues::new(4);
        q.held(Pfn(1), ObjId(0), 0, true);
        q.unbusy_all();
        q.set_flag(Pfn(1), F_DIRTY, true);
        assert!(q.flag(Pfn(1), F_DIRTY) && !q.flag(Pfn(1), F_BUSY));
        q.set_flag(Pfn(1), F_BUSY, true);
        q.set_flag(Pfn(1), F_DIRTY, false);
        assert!(!q.flag(Pfn(1), F_DIRTY) && q.flag(Pfn(1), F_BUSY));
    }

    #[test]
    fn mark_busy_marks_held_frames_once() {
        let mut q = PageQueues::new(4);
        q.held(Pfn(1), ObjId(0), 0, true);
        q.unbusy_all();
        q.mark_busy(Pfn(1));
        q.mark_busy(Pfn(1));
        q.mark_busy(Pfn(2)); // not held: nothing to mark
        assert!(q.flag(Pfn(1), F_BUSY) && !q.flag(Pfn(2), F_BUSY));
        assert_eq!(q.busy, vec![1]);
        q.unbusy_all();
        assert!(!q.flag(Pfn(1), F_BUSY));
    }

    #[test]
    fn check_invariants_catches_broken_queues() {
        let mut q = PageQueues::new(8);
        q.held(Pfn(1), ObjId(0), 0, true);
        q.held(Pfn(2), ObjId(0), 1, true);
        let held = |p: Pfn| u32::from(p.0 == 1 || p.0 == 2);
        q.check_invariants(held).unwrap();
        let e = q
            .check_invariants(|p: Pfn| u32::from(p.0 == 1))
            .unwrap_err();
        assert!(e.contains("no object holds it"), "{e}");
        let mut bad = q.clone();
        bad.count[Queue::Active as usize] = 3;
        assert!(bad.check_invariants(held).unwrap_err().contains("counts 3"));
        let mut bad = q.clone();
        bad.queue[5] = Queue::Cache as u8;
        assert!(bad
            .check_invariants(held)
            .unwrap_err()
            .contains("marked on a queue"));
        let mut bad = q.clone();
        bad.prev[2] = NIL;
        assert!(bad
            .check_invariants(held)
            .unwrap_err()
            .contains("back link"));
        let mut bad = q;
        bad.queue[2] = Queue::Inactive as u8;
        assert!(bad
            .check_invariants(held)
            .unwrap_err()
            .contains("marked inactive"));
    }

    #[test]
    fn shared_frames_keep_their_other_holders() {
        let mut q = PageQueues::new(8);
        q.held(Pfn(2), ObjId(1), 4, true);
        q.held(Pfn(2), ObjId(9), 4, false);
        assert!(q.shared(Pfn(2)) && q.owner(Pfn(2)).is_none());
        q.held(Pfn(2), ObjId(5), 4, false);
        // A holder that is not the owner goes: the owner stays.
        q.released(Pfn(2), ObjId(5), 4, false);
        assert_eq!(q.holders(Pfn(2)), vec![(ObjId(1), 4), (ObjId(9), 4)]);
        // The first holder goes: the other becomes the owner.
        q.released(Pfn(2), ObjId(1), 4, false);
        assert_eq!(q.owner(Pfn(2)), Some((ObjId(9), 4)));
        assert_eq!(q.holders(Pfn(2)), vec![(ObjId(9), 4)]);
    }

    #[test]
    fn busy_pages_are_released_by_unbusy() {
        let mut q = PageQueues::new(4);
        q.held(Pfn(1), ObjId(0), 0, true);
        assert!(q.flag(Pfn(1), F_BUSY));
        q.unbusy_all();
        assert!(!q.flag(Pfn(1), F_BUSY));
    }
}
