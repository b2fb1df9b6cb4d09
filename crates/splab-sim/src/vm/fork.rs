//! fork, and the copy-on-write of private anonymous memory it sets up, in the two object models
//! splab's policies come from.
//!
//! Without reservations (Linux, and seed 000's baseline): the child gets its own copy of each
//! private anonymous object, holding the parent's frames (Linux's anon_vma shares the pages;
//! `copy_page_range` copies the PTEs read-only). A write copies the page into the writer's
//! object, or, once the frame has one holder left, only grants write.
//!
//! With reservations (seed 000 and FreeBSD, whose superpage system is built on FreeBSD's VM
//! objects): `vm_map_copy_entry` (sys/vm/vm_map.c) shares the object between the two entries and
//! marks both MAP_ENTRY_NEEDS_COPY. The first write through such an entry (`vm_map_lookup`)
//! puts a new, empty shadow object in front of the shared one (`vm_object_shadow`,
//! sys/vm/vm_object.c), unless the shared object has one reference left (the other process
//! exited or exec'd: the common fork-exec); reads keep mapping the shared pages read-only. A
//! write copies the page into the shadow, allocated like a first touch (seed 000 4.9's reserved
//! frame lookup in the shadow's population map), so the copies of a superpage-sized extent fill
//! a reservation and are promoted (seed 000 4.5). In the copy model they never are: the child's
//! copy object holds every page of the extent already, so no reservation can be made there.
//! When the shared object is left with one shadow over it (the other entry went), the shadow
//! absorbs it (`vm_object_collapse`): its pages not copied yet move into the shadow, the rest
//! are freed, and later writes only grant write.
//!
//! What is not modelled: a second shadow level (an entry that has a shadow is copied at fork,
//! as without reservations); FreeBSD's `vm_reserv_rename`, which moves a reservation with the
//! pages a collapse renames (here the shared object's reservations are broken first, so those
//! extents stay base pages); `vm_fault_cow`'s rename of a page whose object has one reference
//! instead of a copy (the collapse makes that case rare).

use std::collections::BTreeMap;

use super::object::{ObjId, ObjKind, VmObject};
use super::{Os, Vma};
use crate::error::Result;
use crate::units::{Pid, Prot};

/// What fork's copy-on-write did under reservations (not in the report: the faults it causes
/// are, as `faults.cow` and `copied_bytes`).
#[derive(Clone, Debug, Default)]
pub struct ForkStats {
    /// Entries that got a shadow object at their first write after fork (vm_object_shadow).
    pub shadows: u64,
    /// Shared objects absorbed by the one shadow left in front of them (vm_object_collapse),
    /// and the pages that moved into the shadow.
    pub collapses: u64,
    pub collapsed_pages: u64,
}

impl Os {
    /// fork: a child with a copy of the address space. Private anonymous memory becomes
    /// copy-on-write, shared (with reservations) or copied (without) as the module says; both
    /// page tables map the private pages read-only (Linux copy_page_range copies the PTEs of
    /// anonymous mappings; FreeBSD pmap_copy may, and vm_map_copy_entry write-protects the
    /// parent's).
    pub fn fork(&mut self, parent: Pid) -> Result<Pid> {
        let bs = self.base_shift();
        let vmas: Vec<Vma> = self.proc(parent)?.vmas.values().cloned().collect();
        let (brk_start, brk_end, thp_disabled) = {
            let p = self.proc(parent)?;
            (p.brk_start, p.brk_end, p.thp_disabled)
        };
        // FreeBSD's object model goes with its reservations: a copy written into a fresh shadow
        // object finds its extent unpopulated there, so it can be reserved and promoted.
        let share = self.reserv.is_some();
        let mut needs_copy = Vec::new();
        let child = self.spawn()?;
        self.procs
            .get_mut(&child.0)
            .expect("fork: child")
            .thp_disabled = thp_disabled;
        let mut child_vmas = BTreeMap::new();
        let mut child_ptes = Vec::new();
        let mut wp_ranges = Vec::new();
        for v in vmas {
            let mut cv = v.clone();
            // The child's copy of an object holds only the pages this map entry can reach (after
            // splits, several entries share one object).
            let first = v.pgoff;
            let last = v.pgoff + ((v.end - v.start) >> bs);
            let copy_obj = |os: &mut Os, id: ObjId| -> ObjId {
                // The frames become shared: they can no longer belong to a reservation.
                os.break_reservations_of(id);
                let src = os.obj(id);
                let mut o = VmObject::new(src.kind, src.size, src.growable);
                o.colour = src.colour;
                o.refs = 1;
                let pages = src.pages.range(first, last);
                let copy = os.new_object(o);
                for (pi, pfn) in pages {
                    // A cache page about to be shared is in use again.
                    os.page_reused(pfn);
                    os.obj_insert(copy, pi, pfn);
                }
                os.backing.copy_swap_range(id, copy, first, last);
                copy
            };
            let anon_private = v.private() && self.obj(v.obj).kind == ObjKind::Anon;
            if anon_private && share && v.shadow.is_none() {
                // FreeBSD vm_map_copy_entry: parent and child share the object, both entries
                // need a copy (MAP_ENTRY_NEEDS_COPY) and the object is no longer mapped once
                // (OBJ_ONEMAPPING cleared). Its reservations stay (nothing breaks them).
                let o = self.obj_mut(v.obj);
                o.refs += 1;
                o.one_mapping = false;
                cv.needs_copy = true;
                needs_copy.push(v.start);
            } else if anon_private {
                // One shadow level is modelled: an entry that has one already (a private
                // file mapping, or written after an earlier fork) is copied, as without
                // reservations.
                cv.obj = copy_obj(self, v.obj);
            } else {
                self.obj_mut(v.obj).refs += 1;
            }
            if let Some(s) = v.shadow {
                cv.shadow = Some(copy_obj(self, s));
            }
            if v.private() {
                // Copy the parent's present PTEs of private pages, read-only in both.
                let parent_pmap = &self.procs[&parent.0].pmap;
                let ro = Prot(v.prot.0 & !Prot::WRITE.0);
                let mut n = 0u64;
                // Only the page-table chunks that exist: a huge, sparsely touched mapping costs
                // its resident pages, not its size.
                for (vpn, pte) in parent_pmap.entries_in(v.start >> bs, v.end >> bs) {
                    if pte.size().is_base() {
                        child_ptes.push((vpn, pte.pfn(), Prot(pte.prot().0 & ro.0)));
                        n += 1;
                    }
                }
                self.stats.cycles_kernel += n * self.machine.cost.pte_write_cycles;
                if v.prot.writable() {
                    wp_ranges.push((v.start, v.end));
                }
            }
            child_vmas.insert(cv.start, cv);
        }
        let p = self.procs.get_mut(&parent.0).expect("fork: parent");
        for s in needs_copy {
            p.vmas.get_mut(&s).expect("fork: parent entry").needs_copy = true;
        }
        for (s, e) in wp_ranges {
            let p = self.procs.get_mut(&parent.0).expect("fork: parent");
            let n = p
                .pmap
                .protect(s >> bs, e >> bs, Prot(Prot::READ.0 | Prot::EXEC.0));
            if n > 0 {
                self.hw.tlb.invalidate_range(parent.0, s, e);
            }
            self.stats.cycles_kernel += n * self.machine.cost.pte_write_cycles;
        }
        // The child's map entries first, then its page-table entries. Entering them allocates
        // page-table pages; if memory runs out, fork fails as Linux's does (ENOMEM): the
        // half-built child is torn down, giving back what it took.
        let c = self.proc_mut(child)?;
        c.vmas = child_vmas;
        c.brk_start = brk_start;
        c.brk_end = brk_end;
        // The pages about to be mapped stay resident while page-table pages are allocated
        // (which may run the page daemon).
        for &(_, pfn, _) in &child_ptes {
            self.pageq.mark_busy(pfn);
        }
        for (vpn, pfn, prot) in child_ptes {
            if let Err(e) = self.pmap_enter(child, vpn, pfn, prot) {
                self.exit(child)?;
                return Err(e);
            }
        }
        Ok(child)
    }

    /// A write through an entry that needs a copy (FreeBSD vm_map_lookup): a shadow object in
    /// front of the shared one if it is still shared (vm_object_shadow), and the entry no
    /// longer needs a copy. Returns the entry as updated.
    pub(super) fn needs_copy_write(&mut self, pid: Pid, mut v: Vma) -> Vma {
        let src = self.obj(v.obj);
        if src.refs > 1 {
            let mut o = VmObject::new(ObjKind::Anon, src.size, src.growable);
            // vm_object_shadow: the shadow's colour is the source's (plus the entry's offset;
            // here the shadow is indexed as the source is, so the colour is the same).
            o.colour = src.colour;
            o.refs = 1;
            v.shadow = Some(self.new_object(o));
            self.fork.shadows += 1;
        }
        v.needs_copy = false;
        let e = self
            .procs
            .get_mut(&pid.0)
            .and_then(|p| p.vmas.get_mut(&v.start))
            .expect("needs_copy_write: entry");
        e.shadow = v.shadow;
        e.needs_copy = false;
        v
    }

    /// vm_object_collapse: `backing`, shared since a fork, lost a reference. If what is left
    /// is one shadow in front of it (every entry mapping it has that shadow, and nothing else
    /// holds the shadow), the shadow takes its pages: a page the shadow has (resident or on
    /// swap) wins, the others move into it, and pages no entry reaches are freed. The
    /// entries then map the shadow alone.
    pub(super) fn collapse_shadow(&mut self, backing: ObjId) {
        let bs = self.base_shift();
        let mut users = Vec::new();
        let mut shadow = None;
        for p in self.procs.values() {
            for v in p.vmas.values().filter(|v| v.obj == backing) {
                match (v.shadow, shadow) {
                    (None, _) => return, // mapped without a shadow: still in use as it is
                    (Some(s), None) => shadow = Some(s),
                    (Some(s), Some(t)) if s != t => return,
                    _ => {}
                }
                users.push((p.pid, v.start, v.pgoff, v.pgoff + ((v.end - v.start) >> bs)));
            }
        }
        let Some(s) = shadow else { return };
        if self.obj(s).refs as usize != users.len()
            || self.obj(backing).refs as usize != users.len()
        {
            return;
        }
        // The shared object's reservations are broken (FreeBSD renames those whose pages move,
        // vm_reserv_rename, and breaks the rest; the rename is not modelled).
        self.break_reservations_of(backing);
        let reached = |pi: u64| users.iter().any(|&(_, _, lo, hi)| pi >= lo && pi < hi);
        for (pi, pfn) in self.obj(backing).pages.all() {
            let shadowed = self.obj(s).pages.get(pi).is_some() || self.backing.on_swap(s, pi);
            if reached(pi) && !shadowed {
                // A reservation of the shadow over this page can never fill now (the page is
                // not its frame): broken, as the page daemon would break it later
                // (vm_reserv_reclaim; the model keeps a reservation's extent to its frames).
                let so = self.obj(s);
                let cindex = pi + so.colour;
                if let Some(id) = so.popmap.as_ref().and_then(|pm| pm.reservation_at(cindex)) {
                    self.break_resv(id);
                    self.reserv.as_mut().expect("reservations").stats.broken += 1;
                }
                // Held by both for a moment, so the frame and its page-queue state carry over.
                self.obj_insert(s, pi, pfn);
                self.fork.collapsed_pages += 1;
            }
            self.obj_remove(backing, pi);
        }
        let on_swap: Vec<u64> = users
            .iter()
            .flat_map(|&(_, _, lo, hi)| lo..hi)
            .filter(|&pi| self.backing.on_swap(backing, pi))
            .collect();
        for pi in on_swap {
            if self.obj(s).pages.get(pi).is_none() && !self.backing.on_swap(s, pi) {
                self.backing.copy_swap_range(backing, s, pi, pi + 1);
            }
        }
        let size = self.obj(backing).size;
        let o = self.obj_mut(s);
        o.size = o.size.max(size);
        for &(pid, start, _, _) in &users {
            let v = self
                .procs
                .get_mut(&pid.0)
                .and_then(|p| p.vmas.get_mut(&start))
                .expect("collapse_shadow: entry");
            v.obj = s;
            v.shadow = None;
        }
        self.fork.collapses += 1;
        // The entries' references are the shadow's now: the shared object goes.
        self.obj_mut(backing).refs = 1;
        self.unref_object(backing);
    }
}
