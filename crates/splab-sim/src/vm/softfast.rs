//! Event 3, mapping creation at a fault: a superpage mapped whole because the faulting page is
//! resident in a fully populated reservation (FreeBSD 11+ sys/vm/vm_fault.c
//! `vm_fault_soft_fast`; policy key `map_full_reservation`, on in `freebsd`).
//!
//! Without it a process that maps pages another mapping populated (a file in the page cache, a
//! child reading the memory it shares with its parent since fork, a second mapping of shared
//! memory) maps them one base page a fault (plus prefault's neighbours), and promotes only
//! when every page of the extent is mapped (seed 000 4.5, `try_promote`). FreeBSD's fast path
//! maps the superpage at the first fault instead, when (`vm_fault_soft_fast`):
//! - the page is resident and valid in the entry's first object (`fs->first_object`: no
//!   walk down a shadow chain);
//! - its reservation is fully populated (`vm_reserv_to_superpage`);
//! - the superpage-aligned range around the address lies inside the map entry, and the
//!   address and the frame agree modulo the superpage size;
//! - the entry is not wired (the model has no wiring of user memory);
//! - if the protection the lookup grants includes write, every page of it is dirty
//!   (`vm_page_ps_test(PS_ALL_DIRTY)`), and the mapping is entered dirty ("preset the
//!   modified bit"); a read-only grant (an entry that still needs a copy) needs only valid
//!   pages.
//!
//! `pmap_enter` with `psind` 1 (`pmap_enter_pde`) then writes one PDE (every base PTE where PTEs
//! are replicated, seed 000 6.1), removing any base mappings of the range first (a TLB
//! invalidation if there were some), and no prefault follows. A miss on any condition falls
//! back to the ordinary fault path.
//!
//! The model's first object: a private file mapping's shadow object exists from mmap on, where
//! FreeBSD creates it at the entry's first write fault (`vm_map_lookup` on a NEEDS_COPY entry);
//! so a shadow holding no page, resident or on swap, counts as not created yet, and the file
//! object is the first object, read-only. A shadow in front of memory shared since fork
//! (vm/fork.rs) is always a real one.

use super::pageq::F_DIRTY;
use super::{ObjKind, Os, Vma};
use crate::error::Result;
use crate::policy::Promote;
use crate::units::{Pfn, Pid, Prot, SizeClass};

impl Os {
    /// `vm_fault_soft_fast` for a fault by `pid` on the unmapped page `vpn` (object page
    /// `pindex`) of entry `v`: if the conditions hold, maps the largest fully populated
    /// superpage around it and returns the fault's cycles beyond the handler's base cost.
    pub(crate) fn soft_fast(
        &mut self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pindex: u64,
        write: bool,
    ) -> Result<Option<u64>> {
        let Some(rp) = self.policy.reserv() else {
            return Ok(None);
        };
        if !rp.map_full_reservation || rp.promote != Promote::Yes {
            return Ok(None);
        }
        let no_write = Prot(v.prot.0 & !Prot::WRITE.0);
        // The first object and the protection `vm_map_lookup` grants.
        let (first, prot) = match v.shadow {
            Some(s) if self.obj(s).pages.get(pindex).is_some() => (s, v.prot),
            Some(s) => {
                let unshadowed = matches!(self.obj(v.obj).kind, ObjKind::File { .. })
                    && self.obj(s).pages.len == 0
                    && !self.backing.has_swap(s);
                if write || !unshadowed {
                    return Ok(None);
                }
                (v.obj, no_write)
            }
            None if v.needs_copy => (v.obj, no_write),
            None => (v.obj, v.prot),
        };
        let Some(pfn) = self.obj(first).pages.get(pindex) else {
            return Ok(None);
        };
        let Some(id) = self.reserv.as_ref().and_then(|rs| rs.of_frame(pfn)) else {
            return Ok(None);
        };
        let rclass = self.reserv.as_ref().expect("reservations").get(id).class;
        let bs = self.base_shift();
        let cindex = pindex + self.obj(first).colour;
        // The largest allowed class whose extent around the page passes every test.
        let mut best = None;
        for &c in rp.classes.iter().filter(|&&c| c <= rclass) {
            let o = self.orders[c as usize];
            let n = 1u64 << o;
            let full = self
                .obj(first)
                .popmap
                .as_ref()
                .is_some_and(|pm| pm.full(c as usize, cindex));
            let head = vpn & !(n - 1);
            if !full
                || vpn % n != pfn.0 % n
                || head << bs < v.start
                || (head + n) << bs > v.end
                || !self.extent_resident(
                    pid,
                    first,
                    head,
                    pindex - (vpn - head),
                    Pfn(pfn.0 - (vpn - head)),
                    n,
                )
            {
                break; // a larger extent contains this one
            }
            best = Some((c, o, head));
        }
        let Some((c, o, head)) = best else {
            return Ok(None);
        };
        let n = 1u64 << o;
        let fpfn = Pfn(pfn.0 - (vpn - head));
        if prot.writable() && !self.extent_dirty(fpfn, n) {
            // seed 003 5.1, relaxed mapping: an anonymous superpage is mapped whatever its
            // pages' dirty state (Async-t's superpages appear here), entered dirty as below.
            if !(rp.relaxed_mapping && self.obj(first).kind == ObjKind::Anon) {
                return Ok(None);
            }
            self.reserv
                .as_mut()
                .expect("reservations")
                .stats
                .mapped_relaxed += 1;
        }
        let cycles = self.enter_superpage(pid, head, fpfn, c, prot, prot.writable())?;
        self.reserv
            .as_mut()
            .expect("reservations")
            .stats
            .mapped_at_fault += 1;
        Ok(Some(cycles))
    }

    /// `pmap_enter` with `psind` 1 (`pmap_enter_pde`): maps `[head, head + n)` of `pid` to the
    /// aligned frames from `fpfn` as one superpage of class `c` with `prot`, entered dirty if
    /// `dirty` (and if any base mapping it replaces was); returns the cycles (entry writes, and
    /// a TLB invalidation if base mappings were replaced). The caller has checked the extent
    /// (`extent_resident`). Shared by `soft_fast` and Sync-t (vm/prepare.rs).
    pub(crate) fn enter_superpage(
        &mut self,
        pid: Pid,
        head: u64,
        fpfn: Pfn,
        c: u8,
        prot: Prot,
        dirty: bool,
    ) -> Result<u64> {
        let o = self.orders[c as usize];
        let n = 1u64 << o;
        let bs = self.base_shift();
        // The pages stay busy (FreeBSD busies the first object), so that a page daemon run by
        // the page-table allocation below leaves them in the object.
        for i in 0..n {
            self.pageq.mark_busy(Pfn(fpfn.0 + i));
        }
        // `pmap_enter_pde`: the base mappings of the range go (one invalidation), the
        // superpage entry comes in its place. The model's page table keeps its entries in the
        // chunk of a leaf table page, so one is attached where none was; FreeBSD's PDE needs
        // none (a promotion keeps it, `pmap_insert_pt_page`): page_table_bytes may count one
        // 4KB page more per superpage so mapped.
        self.pmap_prepare(pid, head, n)?;
        let mut had_base = false;
        {
            let p = self.procs.get_mut(&pid.0).expect("soft_fast: pid");
            for i in 0..n {
                if p.pmap.lookup(head + i).is_some() {
                    had_base = true;
                } else {
                    p.pmap.enter(head + i, Pfn(fpfn.0 + i), prot);
                }
            }
            p.pmap.set_prot_run(head, n, prot);
            p.pmap.promote(head, o, SizeClass(c));
            p.pmap.touch(head, o, dirty);
        }
        for i in 0..n {
            self.page_reused(Pfn(fpfn.0 + i));
        }
        let writes = self.machine.superpage_entry_writes(n);
        let mut cycles = writes * self.machine.cost.pte_write_cycles;
        if had_base {
            self.hw
                .tlb
                .invalidate_range(pid.0, head << bs, (head + n) << bs);
            cycles += self.machine.cost.tlb_invalidate_cycles;
        }
        Ok(cycles)
    }

    /// Whether pages `[hp, hp + n)` of `obj` are resident in the consecutive frames from
    /// `first` (aligned to `n`), each held by this object alone, and whatever `pid` maps in
    /// `[head, head + n)` already maps them.
    pub(crate) fn extent_resident(
        &self,
        pid: Pid,
        obj: super::ObjId,
        head: u64,
        hp: u64,
        first: Pfn,
        n: u64,
    ) -> bool {
        if !first.0.is_multiple_of(n) {
            return false;
        }
        let pmap = &self.procs[&pid.0].pmap;
        (0..n).all(|i| {
            let f = Pfn(first.0 + i);
            self.obj(obj).pages.get(hp + i) == Some(f)
                && self.phys.refs(f) == 1
                && pmap.lookup(head + i).is_none_or(|e| e.pfn() == f)
        })
    }

    /// `vm_page_ps_test(PS_ALL_DIRTY)`: every page of the extent modified. FreeBSD reads the
    /// page's dirty field, which its write faults set and pmap harvests update; the model's
    /// page flag (set when a dirty mapping goes away) or a dirty mapping stands for it.
    fn extent_dirty(&self, first: Pfn, n: u64) -> bool {
        let rmap = self.rmap();
        (0..n).all(|i| {
            let f = Pfn(first.0 + i);
            self.pageq.flag(f, F_DIRTY) || self.test_dirty(&self.mappings(&rmap, f), f)
        })
    }
}
