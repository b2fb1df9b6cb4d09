//! Event 2, preparation past a threshold: seed 003 5.1's "hybrid physical superpage
//! preparation" (Quicksilver; docs/reference-policies.md 3, docs/quicksilver.md). Policy
//! `PrepPolicy::Threshold { t, mode }`, with reservations only. Callers: the fault handler
//! (`sync_prepare`, vm/fault.rs) and the Async-t daemon (`async_prepare_pass`,
//! daemon/quicksilver.rs).
//!
//! A reservation is prepared incrementally, one zeroed base page a fault, until `t` of its
//! pages are populated (counting the faulting one); then the rest of it is prepared at once:
//! - Sync-t (seed 003 5.2): by the fault handler that reached the threshold, "zeroed using the
//!   largest bulk size possible" with non-temporal stores (the machine's
//!   `zero_bulk_page_cycles`, seed 003 Table 5's 2MB non-temporal bulk row, docs/constants.md),
//!   and, with relaxed mapping, the handler "can create a superpage mapping immediately after
//!   zeroing is complete" (`enter_superpage`, vm/softfast.rs);
//! - Async-t: a daemon that "periodically scans the linked list of partially populated
//!   physical reservations and starts zero-filling from the most active ones" (partpopq from
//!   its tail), "4KB pages are zeroed individually", and the superpage mapping appears "at the
//!   first soft page fault after all pages have been zeroed" (vm/softfast.rs) or at promotion.
//!
//! Eligible reservations (reference-policies.md 3: "anonymous, no backing object"): of an
//! anonymous object reached through one map entry (not shared since fork, vm/fork.rs) and no
//! entry's shadow; and here also wholly inside the object (FreeBSD lets an anonymous
//! reservation pass the object's end, expecting growth; the model prepares no page past it),
//! with no page of it on swap (zero-filling a swapped-out page would lose it). Prepared pages
//! are populated exactly as faulted ones (`obj_insert`), clean and unmapped.
//!
//! Counters: `reservations.prepared_sync`, `prepared_async`, `prepared_pages`,
//! `mapped_at_preparation` (`ReservStats`). Preparation never allocates: the frames are the
//! reservation's already.

use super::{ObjId, ObjKind, Os, Vma};
use crate::error::Result;
use crate::policy::{PrepMode, Promote};
use crate::units::{Pfn, Pid, Prot};

/// reference-policies.md 3: Async-t prepares "up to 200000 reservations per pass".
pub const ASYNC_MAX_PER_PASS: u64 = 200_000;
/// reference-policies.md 3: the Async-t thread "wakes every 1 s".
pub const ASYNC_PERIOD_MS: u64 = 1000;

impl Os {
    /// Sync-t at the zero-fill fault by `pid` on page `vpn` (of `v`'s anonymous object, no
    /// shadow), just populated in frame `pfn`, to be entered with `prot`;
    /// `write` for a write fault. If the policy is Sync-t and the frame's reservation has
    /// reached the threshold and is eligible (module comment), populates and zeroes every
    /// other page of it, and with relaxed mapping maps the whole reservation as one superpage.
    /// Returns the cycles spent and whether the superpage is mapped (then the fault is done:
    /// the faulting page is mapped inside it).
    pub(crate) fn sync_prepare(
        &mut self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pfn: Pfn,
        prot: Prot,
        write: bool,
    ) -> Result<(u64, bool)> {
        let Some((t, PrepMode::Sync)) = self.policy.prep.threshold() else {
            return Ok((0, false));
        };
        // The caller's page is in the entry's own object: no shadow. An entry that needs a
        // copy shares that object since fork, which `threshold_reached` refuses (not
        // `one_mapping`).
        debug_assert!(v.shadow.is_none(), "sync_prepare: an entry with a shadow");
        let obj = v.obj;
        let Some((id, hp, n)) = self.threshold_reached(obj, pfn, t) else {
            return Ok((0, false));
        };
        let bs = self.base_shift();
        let pindex = v.pgoff + (((vpn << bs) - v.start) >> bs);
        let cindex = pindex + self.obj(obj).colour;
        let (rpfn, rcbase, class) = {
            let r = self.reserv.as_ref().expect("reservations").get(id);
            (r.pfn, r.cbase, r.class)
        };
        let head = vpn - (cindex - rcbase);
        // The superpage would lie inside the map entry, virtual and physical extents aligned
        // alike (vm_fault_soft_fast's conditions): otherwise prepare nothing, as a Sync-t fault
        // whose mapping cannot follow gains nothing from bulk preparation.
        if !head.is_multiple_of(n) || head << bs < v.start || (head + n) << bs > v.end {
            return Ok((0, false));
        }
        let pages = self.prepare_rest(id, obj, hp);
        let mut cycles = pages * self.machine.cost.zero_bulk_page_cycles;
        let rs = self.reserv.as_mut().expect("reservations");
        rs.stats.prepared_sync += 1;
        rs.stats.prepared_pages += pages;
        let Some(rp) = self.policy.reserv() else {
            return Ok((cycles, false));
        };
        // seed 003 5.2: "This allows a superpage mapping to be created immediately after
        // Sync-t completes the zero-filling (these pages are clean)": only with relaxed
        // mapping; otherwise FreeBSD's rules map it later (soft fault, promotion).
        if !rp.relaxed_mapping
            || rp.promote != Promote::Yes
            || !rp.classes.contains(&class)
            || !self.extent_resident(pid, obj, head, hp, rpfn, n)
        {
            return Ok((cycles, false));
        }
        cycles += self.enter_superpage(pid, head, rpfn, class, prot, write)?;
        self.reserv
            .as_mut()
            .expect("reservations")
            .stats
            .mapped_at_preparation += 1;
        Ok((cycles, true))
    }

    /// One pass of the Async-t daemon (daemon/quicksilver.rs): walks each list of partially
    /// populated reservations from its tail (the most recently changed, FreeBSD's partpopq)
    /// and prepares every eligible one with at least `t` pages populated, up to
    /// `ASYNC_MAX_PER_PASS`, zeroing 4KB at a time. Returns the cycles (background work).
    pub(crate) fn async_prepare_pass(&mut self) -> u64 {
        let Some((t, PrepMode::Async)) = self.policy.prep.threshold() else {
            return 0;
        };
        let Some(rs) = self.reserv.as_ref() else {
            return 0;
        };
        // Objects some entry has as its shadow: they have a backing object.
        let shadows: Vec<ObjId> = self
            .procs
            .values()
            .flat_map(|p| p.vmas.values().filter_map(|v| v.shadow))
            .collect();
        let mut todo = Vec::new();
        'lists: for l in 0..rs.lists() {
            let mut at = rs.tail(l);
            while let Some(id) = at {
                if todo.len() as u64 >= ASYNC_MAX_PER_PASS {
                    break 'lists;
                }
                let r = rs.get(id);
                if r.popcnt >= t as u64 && !shadows.contains(&r.obj) {
                    todo.push((id, r.obj, r.pfn));
                }
                at = rs.prev(id);
            }
        }
        let mut cycles = 0;
        for (id, obj, rpfn) in todo {
            // `threshold_reached` checks the object; the reservation is the one just listed.
            let Some((got, hp, _)) = self.threshold_reached(obj, rpfn, t) else {
                continue;
            };
            debug_assert_eq!(got, id, "async_prepare_pass: reservation moved");
            let pages = self.prepare_rest(id, obj, hp);
            // seed 003 5.2: "When using Async-t, 4KB pages are zeroed individually": the
            // machine's 4KB zeroing cost (its Table 5 non-temporal 4KB row, 92 us a 2MB page
            // against 84 us temporal, is not a machine cost; the temporal one stands for it).
            cycles += pages * self.machine.cost.zero_page_cycles;
            let rs = self.reserv.as_mut().expect("reservations");
            rs.stats.prepared_async += 1;
            rs.stats.prepared_pages += pages;
        }
        cycles
    }

    /// The reservation of frame `pfn` of `obj` if it is partially populated with at least `t`
    /// pages (t = 0 counts as 1) and eligible for hybrid preparation (module comment): its
    /// id, the object page index of its first page, and its pages.
    fn threshold_reached(&self, obj: ObjId, pfn: Pfn, t: u32) -> Option<(u32, u64, u64)> {
        let o = self.obj(obj);
        if o.kind != ObjKind::Anon || !o.one_mapping {
            return None;
        }
        let rs = self.reserv.as_ref()?;
        let id = rs.of_frame(pfn)?;
        let r = rs.get(id);
        let n = 1u64 << r.order;
        if r.full() || r.popcnt < (t as u64).max(1) || r.cbase < o.colour {
            return None;
        }
        let hp = r.cbase - o.colour;
        if hp + n > o.size || (0..n).any(|i| !r.is_set(i) && self.backing.on_swap(obj, hp + i)) {
            return None;
        }
        Some((id, hp, n))
    }

    /// Populates every unpopulated page of reservation `id` (of `obj`, first page `hp`) with
    /// its reserved frame, as a zero-fill fault would (`obj_insert`); counts the bytes zeroed.
    /// Returns the pages prepared; the caller charges their zeroing.
    fn prepare_rest(&mut self, id: u32, obj: ObjId, hp: u64) -> u64 {
        let (rpfn, free): (Pfn, Vec<u64>) = {
            let r = self.reserv.as_ref().expect("reservations").get(id);
            (
                r.pfn,
                (0..1u64 << r.order).filter(|&i| !r.is_set(i)).collect(),
            )
        };
        for &i in &free {
            self.obj_insert(obj, hp + i, Pfn(rpfn.0 + i));
        }
        let pages = free.len() as u64;
        self.stats.zeroed_bytes += pages * self.machine.base_size();
        pages
    }
}
