//! The superpage mechanisms in the VM: object page bookkeeping (population maps, reservations),
//! physical allocation with reservations and preemption (event 1), deallocation (event 5),
//! promotion (event 3) and demotion (event 4). Policies choose among options; nothing here reads
//! a policy's name.
//!
//! Entry points for the rest of the VM: `obj_insert` / `obj_remove` (every change of an object's
//! resident pages goes through them), `alloc_frame`, `free_frame`, `try_promote`,
//! `demote_to_base`, `demote_edges`, `break_reservations_of`, `check_reservations`.

use super::{ObjId, ObjKind, Os, Vma};
use crate::error::{Result, SimError};
use crate::policy::{AllocPolicy, CleanWrite, PreferredSize, Promote, ReservPolicy, Shortage};
use crate::reserv::popmap::NO_RESV;
use crate::units::{Order, Pfn, Pid, Prot, SizeClass};

impl Os {
    // ---- object page bookkeeping ----

    /// Page `pindex` of `obj` is now frame `pfn` (it had no page): the object holds the frame,
    /// the population map counts it, and its reservation (if the frame has one) records it.
    pub(crate) fn obj_insert(&mut self, obj: ObjId, pindex: u64, pfn: Pfn) {
        // A free cache page's old contents go when its frame is reused (seed 000 5.1 (1)).
        self.claim_frame(pfn);
        self.phys.hold(pfn);
        let first = self.phys.refs(pfn) == 1;
        self.pageq.held(pfn, obj, pindex, first);
        let o = self.objects[obj.0 as usize]
            .as_mut()
            .expect("obj_insert: object");
        let old = o.pages.insert(pindex, pfn);
        debug_assert!(
            old.is_none(),
            "obj_insert: page {pindex} of object {} already resident",
            obj.0
        );
        let cindex = pindex + o.colour;
        let cost = &self.machine.cost;
        let mut cycles = 0;
        if let Some(pm) = o.popmap.as_mut() {
            cycles += pm.populate(cindex) * cost.popmap_level_cycles;
        }
        if let Some(rs) = self.reserv.as_mut() {
            if let Some(id) = rs.of_frame(pfn) {
                rs.populate(id, cindex);
                cycles += cost.reserv_populate_cycles;
            }
        }
        self.charge_reservation(cycles);
    }

    /// Charges superpage bookkeeping (reservations, population maps: seed 000 4.8, 4.9) as
    /// kernel work, at the per-operation costs of `CostConfig`.
    #[inline]
    fn charge_reservation(&mut self, cycles: u64) {
        self.stats.cycles_kernel += cycles;
        self.stats.cycles_reservation += cycles;
    }

    /// Removes page `pindex` from `obj`; the frame is released, and freed (event 5) when no
    /// object holds it any more. Returns the frame.
    pub(crate) fn obj_remove(&mut self, obj: ObjId, pindex: u64) -> Option<Pfn> {
        let (pfn, last) = self.obj_detach(obj, pindex)?;
        self.pageq.released(pfn, obj, pindex, last);
        if last {
            self.free_frame(pfn);
        }
        Some(pfn)
    }

    /// Takes page `pindex` out of `obj` and its population map and releases the frame; the
    /// page queues and deallocation are the caller's. Returns the frame and whether no object
    /// holds it any more.
    pub(crate) fn obj_detach(&mut self, obj: ObjId, pindex: u64) -> Option<(Pfn, bool)> {
        let o = self.objects[obj.0 as usize]
            .as_mut()
            .expect("obj_remove: object");
        let pfn = o.pages.remove(pindex)?;
        let cindex = pindex + o.colour;
        if let Some(pm) = o.popmap.as_mut() {
            let levels = pm.depopulate(cindex);
            self.charge_reservation(levels * self.machine.cost.popmap_level_cycles);
        }
        let last = self.phys.release(pfn);
        Some((pfn, last))
    }

    /// Event 5, deallocation: a frame no object holds any more. A frame of a reservation stays
    /// reserved until the whole reservation is empty, and then the extent goes back to the buddy
    /// allocator at once (FreeBSD vm_reserv_free_page: deferred deallocation).
    /// A cache page keeping its contents (seed 000 5.1 (1)) is freed here too: its block goes
    /// to the tail of its free list (`free_extent`).
    pub(crate) fn free_frame(&mut self, pfn: Pfn) {
        if let Some(rs) = self.reserv.as_mut() {
            if let Some(id) = rs.of_frame(pfn) {
                let r = rs.get(id);
                let (obj, class, cbase) = (r.obj, r.class, r.cbase);
                let cindex = cbase + (pfn.0 - r.pfn.0);
                let emptied = rs.depopulate(id, cindex);
                self.charge_reservation(self.machine.cost.reserv_depopulate_cycles);
                if let Some((ext, order)) = emptied {
                    self.set_popmap_resv(obj, class, cbase, NO_RESV);
                    self.free_extent(ext, Order(order));
                }
                return;
            }
        }
        if self.folio_release(pfn) {
            return; // kept on the deferred split queue, or freed with its THP
        }
        self.free_extent(pfn, Order(0));
    }

    /// Points (or unpoints) the population-map node of a reservation: one level updated.
    fn set_popmap_resv(&mut self, obj: ObjId, class: u8, cbase: u64, id: u32) {
        if let Some(pm) = self.objects[obj.0 as usize]
            .as_mut()
            .and_then(|o| o.popmap.as_mut())
        {
            pm.set_resv(class as usize, cbase, id);
            self.charge_reservation(self.machine.cost.popmap_level_cycles);
        }
    }

    fn reserv_policy(&self) -> Option<ReservPolicy> {
        self.policy.reserv().cloned()
    }

    /// The out-of-memory error: where the frames are, and what would give the run more.
    fn oom(&self) -> SimError {
        let size = |frames: u64| crate::report::human(frames << self.base_shift());
        let total = self.phys.frames();
        let pt = self.stats.pt.pages;
        // Wired as the run goes: page tables, u-areas and the wired pool's spare frames.
        let kernel = pt
            + self.stats.kmem.uarea_pages
            + self.stats.kmem.vnode_zone_pages
            + self.contig.pool_frames()
            + self.zero_frames();
        let setup = self.phys.wired_frames.saturating_sub(kernel);
        let used = self.phys.used_frames;
        let free = self.phys.buddy.free_frames;
        let reserved = total.saturating_sub(free + used + self.phys.wired_frames);
        let advice = if setup > 0 {
            // `--free` wired the rest of memory at set-up: that, not the machine, is the limit.
            format!(
                "the run was given only {} free (--free); raise --free (up to the machine's {}) or drop it",
                size(total - setup),
                crate::units::fmt_size(self.machine.mem_bytes)
            )
        } else {
            format!(
                "give the machine more memory (e.g. -m {}:mem=...)",
                self.machine.name
            )
        };
        // The page daemon evicts what it can; what is left is dirty anonymous memory with no
        // swap to go to, pages shared after fork, and wired pages.
        let swap = &self.backing;
        let advice = if swap.stats.swap_slots >= swap.swap_limit {
            format!(
                "{advice}, or give it more swap (swap=SIZE; {} of {} in use)",
                size(swap.stats.swap_slots),
                size(swap.swap_limit)
            )
        } else {
            advice
        };
        SimError::OutOfMemory(format!(
            "no frame of the {} of modelled memory is free or reclaimable: {} hold pages, {} are reserved for pages not yet touched, {} hold page tables and other kernel memory, {} are wired at set-up; {advice}",
            crate::units::fmt_size(self.machine.mem_bytes),
            size(used),
            size(reserved),
            size(kernel),
            size(setup),
        ))
    }

    /// A frame for the kernel itself (a page-table page): from the buddy allocator, else
    /// reclaimed from reservations by the policy's shortage rule, as a base-page allocation
    /// would be. The caller wires it.
    /// Before allocating up to `n` kernel frames whose callers cannot let the page daemon run
    /// in the middle (page-table pages, entered under a path being built): makes them free
    /// first, running the page daemon's reclaim if needed.
    pub(crate) fn make_frames_free(&mut self, n: u64) {
        // Frames reserved for untouched pages count: the kernel allocation preempts them.
        while self.free_or_reserved_frames() < n
            && !self.pageout.no_reclaim
            && self.reclaim_for_alloc()
        {}
    }

    pub(crate) fn alloc_kernel_frame(&mut self) -> Result<Pfn> {
        if let Some(pfn) = self.alloc_wired_frame() {
            return Ok(pfn);
        }
        let pfn = match self.reserv_policy() {
            Some(rp) => self.alloc_extent(0, &rp).ok_or_else(|| self.oom()),
            // A kernel frame (page table, u-area) is an UNMOVABLE request (`GFP_KERNEL`).
            None => self
                .phys
                .buddy
                .alloc_mt(Order(0), crate::phys::buddy::MT_UNMOVABLE)
                .ok_or_else(|| self.oom()),
        }?;
        self.claim_frame(pfn);
        Ok(pfn)
    }

    // ---- event 1: physical allocation ----

    /// A frame for page `pindex` of `obj`, faulted by `pid`. With reservations: the page's
    /// reserved frame if it has one (seed 000 4.1), else a new reservation of the preferred size
    /// (4.2), obtained from the buddy allocator or by preemption (4.3, 4.8), falling to smaller
    /// sizes down to a base page. The caller then `obj_insert`s the page.
    /// When nothing is free, the page daemon's reclaim runs while the access waits
    /// (vm/pageout.rs); out of memory only when it finds nothing to evict.
    pub(crate) fn alloc_frame(
        &mut self,
        pid: Pid,
        obj: ObjId,
        pindex: u64,
        v: &Vma,
    ) -> Result<Pfn> {
        loop {
            // Nothing free and nothing reserved: the attempt would fail (and build the
            // out-of-memory message for nothing), so reclaim first.
            if self.free_or_reserved_frames() == 0
                && !self.pageout.no_reclaim
                && self.reclaim_for_alloc()
            {
                continue;
            }
            match self.alloc_frame_once(pid, obj, pindex, v) {
                Ok(pfn) => {
                    self.note_allocation();
                    return Ok(pfn);
                }
                Err(SimError::OutOfMemory(m)) => {
                    if self.pageout.no_reclaim || !self.reclaim_for_alloc() {
                        return Err(SimError::OutOfMemory(m));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn alloc_frame_once(&mut self, _pid: Pid, obj: ObjId, pindex: u64, _v: &Vma) -> Result<Pfn> {
        let Some(rp) = self.reserv_policy() else {
            // A recorded placement's next frame first (vm/placement.rs).
            if let Some(pfn) = self.take_placed() {
                return Ok(pfn);
            }
            return self.phys.buddy.alloc(Order(0)).ok_or_else(|| self.oom());
        };
        let o = self.obj(obj);
        let cindex = pindex + o.colour;
        let pm = o
            .popmap
            .as_ref()
            .expect("alloc_frame: object without population map");
        // seed 000 4.9, reserved frame lookup: from the root down to the reservation's node.
        let (found, levels) = pm.reservation_at_counted(cindex);
        self.charge_reservation(levels * self.machine.cost.popmap_level_cycles);
        if let Some(id) = found {
            let r = self
                .reserv
                .as_ref()
                .expect("alloc_frame: reservations")
                .get(id);
            let i = cindex - r.cbase;
            if r.is_set(i) {
                return Err(SimError::Invariant(format!("alloc_frame: page {pindex} of object {} is reserved and populated but not resident", obj.0)));
            }
            return Ok(Pfn(r.pfn.0 + i));
        }
        let preferred = self.preferred_class(obj, cindex, &rp);
        // seed 000 5.1 (2): "the criterion for low contiguity is the failure to allocate a
        // contiguous region of the preferred size".
        if preferred > 0
            && self
                .phys
                .buddy
                .largest_free_order()
                .is_none_or(|o| o < self.orders[preferred as usize])
        {
            self.note_preferred_failure(preferred);
        }
        let candidates: Vec<u8> = rp
            .classes
            .iter()
            .copied()
            .filter(|&c| c <= preferred)
            .rev()
            .chain(std::iter::once(0))
            .collect();
        for c in candidates {
            if let Some(pfn) = self.alloc_extent(c, &rp) {
                if c == 0 {
                    return Ok(pfn);
                }
                let n = 1u64 << self.orders[c as usize];
                let cbase = cindex & !(n - 1);
                let id = self
                    .reserv
                    .as_mut()
                    .expect("reservations")
                    .create(obj, cbase, pfn, c);
                self.charge_reservation(self.machine.cost.reserv_create_cycles);
                self.set_popmap_resv(obj, c, cbase, id);
                return Ok(Pfn(pfn.0 + (cindex - cbase)));
            }
        }
        Err(self.oom())
    }

    /// seed 000 4.2 (or FreeBSD's rule): the largest allowed size class whose aligned region
    /// around `cindex` has no populated page (hence no reservation: 4.9 overlap avoidance) and
    /// fits the object; 0 if none.
    fn preferred_class(&self, obj: ObjId, cindex: u64, rp: &ReservPolicy) -> u8 {
        let o = self.obj(obj);
        let pm = o.popmap.as_ref().expect("preferred_class: popmap");
        for &c in rp.classes.iter().rev() {
            let n = 1u64 << self.orders[c as usize];
            let base = cindex & !(n - 1);
            if base < o.colour {
                continue; // the region would start before the object (FreeBSD: pindex < index)
            }
            let end = base - o.colour + n;
            let fits = match rp.preferred {
                PreferredSize::Navarro if o.growable => n <= o.size,
                PreferredSize::Navarro => end <= o.size,
                PreferredSize::FreeBsd => matches!(o.kind, ObjKind::Anon) || end <= o.size,
            };
            if fits && pm.empty(c as usize, cindex) {
                return c;
            }
        }
        0
    }

    /// An aligned free extent of class `c`: from the buddy allocator, else by the policy's
    /// shortage rule.
    fn alloc_extent(&mut self, c: u8, rp: &ReservPolicy) -> Option<Pfn> {
        let order = Order(self.orders[c as usize]);
        loop {
            if let Some(p) = self.phys.buddy.alloc(order) {
                return Some(p);
            }
            let rs = self.reserv.as_ref()?;
            match rp.shortage {
                // seed 000 4.8: the head of the class-c list (least recently allocated), then
                // the lists of larger extents.
                Shortage::Preempt => {
                    let id = (c as usize..rs.lists()).find_map(|l| rs.head(l))?;
                    self.preempt(id, rp);
                }
                // FreeBSD: a reservation size that is not free fails at once (the caller falls
                // back to a base page); a base page that is not free breaks the head of
                // partpopq (vm_reserv_reclaim_inactive).
                Shortage::FallbackThenReclaim => {
                    if c != 0 {
                        return None;
                    }
                    let id = rs.head(0)?;
                    self.break_resv(id);
                    self.reserv.as_mut().expect("reservations").stats.preempted += 1;
                }
            }
        }
    }

    /// seed 000 4.8: breaks a reservation into extents of the next smaller allowed size: empty
    /// ones go to the buddy allocator, partially populated ones to the head of their list, full
    /// ones stay reserved (for promotion) off the lists.
    pub(crate) fn preempt(&mut self, id: u32, rp: &ReservPolicy) {
        let rs = self.reserv.as_mut().expect("preempt: reservations");
        let (class, cbase) = (rs.get(id).class, rs.get(id).cbase);
        let sub = rp
            .classes
            .iter()
            .copied()
            .filter(|&c| c < class)
            .max()
            .unwrap_or(0);
        let split = rs.split(id, sub);
        rs.stats.preempted += 1;
        let obj = split.obj;
        self.set_popmap_resv(obj, class, cbase, NO_RESV);
        let sub_order = Order(self.orders[sub as usize]);
        // seed 000 6.8: a preemption is O(S R); each of the R pieces is freed or re-reserved.
        self.charge_reservation(split.pieces.len() as u64 * self.machine.cost.reserv_piece_cycles);
        for piece in split.pieces {
            if piece.popcnt == 0 {
                self.free_extent(piece.pfn, sub_order);
                self.reserv
                    .as_mut()
                    .expect("reservations")
                    .stats
                    .extents_freed += 1;
            } else if piece.class > 0 {
                let (pclass, pcbase) = (piece.class, piece.cbase);
                let rs = self.reserv.as_mut().expect("reservations");
                let nid = rs.adopt(obj, piece, split.last);
                rs.stats.extents_kept += 1;
                self.set_popmap_resv(obj, pclass, pcbase, nid);
            }
        }
    }

    /// FreeBSD vm_reserv_break: dissolves a reservation; its unpopulated frames go back to the
    /// buddy allocator (which coalesces them into maximal runs), its populated pages stay as
    /// ordinary pages. Each run of unpopulated frames is freed as its aligned blocks, largest
    /// first, in address order (the buddy allocator ends as if they were freed one by one).
    pub(crate) fn break_resv(&mut self, id: u32) {
        let rs = self.reserv.as_mut().expect("break_resv: reservations");
        let r = rs.take(id);
        let runs = rs.unpopulated_runs(&r);
        // Each run of unpopulated frames costs what a freed piece of a preemption does.
        self.charge_reservation(runs.len() as u64 * self.machine.cost.reserv_piece_cycles);
        self.set_popmap_resv(r.obj, r.class, r.cbase, NO_RESV);
        for (start, len) in runs {
            let (mut p, end) = (r.pfn.0 + start, r.pfn.0 + start + len);
            while p < end {
                let o = p.trailing_zeros().min((end - p).ilog2()) as u8;
                self.free_extent(Pfn(p), Order(o));
                p += 1 << o;
            }
        }
    }

    /// Breaks every reservation of `obj` (before fork shares its frames copy-on-write, since a
    /// reservation's frames must belong to its object alone).
    pub(crate) fn break_reservations_of(&mut self, obj: ObjId) {
        let ids: Vec<u32> = match self.obj(obj).popmap.as_ref() {
            Some(pm) => pm.reservations().into_iter().map(|(_, _, id)| id).collect(),
            None => return,
        };
        for id in ids {
            self.break_resv(id);
            self.reserv.as_mut().expect("reservations").stats.broken += 1;
        }
    }

    // ---- event 3: mapping creation (promotion) ----

    /// seed 000 4.5: after page `vpn` of `pid` was populated or dirtied, promote incrementally:
    /// each allowed extent around it inside its reservation that is fully populated, with pages
    /// mapped with uniform protection and dirty state (4.9), smallest first, then the next size
    /// when that one is full too. Returns the cycles spent.
    pub(crate) fn try_promote(&mut self, pid: Pid, v: &Vma, vpn: u64) -> u64 {
        let Some(rp) = self.reserv_policy() else {
            return 0;
        };
        if rp.promote == Promote::No {
            return 0;
        }
        let Some(p) = self.procs.get(&pid.0) else {
            return 0;
        };
        let Some(pte) = p.pmap.lookup(vpn) else {
            return 0;
        };
        let bs = self.base_shift();
        // The object (layer) holding the page, and the page's colour-adjusted index in it.
        let pindex = v.pgoff + (((vpn << bs) - v.start) >> bs);
        let obj = match v.shadow {
            Some(s) if self.obj(s).pages.get(pindex).is_some() => s,
            _ => v.obj,
        };
        if self.obj(obj).pages.get(pindex) != Some(pte.pfn()) {
            return 0;
        }
        let cindex = pindex + self.obj(obj).colour;
        // seed 000 4.9: promotion is attempted only inside a reservation ("the first node ...
        // that is fully populated and has an associated reservation"), up to its size; FreeBSD
        // likewise promotes only a fully populated reservation (vm_reserv_level_iffullpop).
        // Base pages that happen to be contiguous are not promoted.
        let Some(id) = self.reserv.as_ref().and_then(|rs| rs.of_frame(pte.pfn())) else {
            return 0;
        };
        let rclass = self.reserv.as_ref().expect("reservations").get(id).class;
        let mut cycles = 0;
        let current = pte.size().0;
        for &c in rp.classes.iter().filter(|&&c| c <= rclass && c > current) {
            let o = self.orders[c as usize];
            let n = 1u64 << o;
            let full = self
                .obj(obj)
                .popmap
                .as_ref()
                .is_some_and(|pm| pm.full(c as usize, cindex));
            // The virtual extent must line up with the physical one and lie inside the entry.
            let head = vpn & !(n - 1);
            if !full || vpn % n != cindex % n || head << bs < v.start || (head + n) << bs > v.end {
                break; // a larger extent contains this one: it cannot be promotable either
            }
            // seed 003 5.1: relaxed mapping for anonymous memory.
            let relaxed = rp.relaxed_mapping && self.obj(obj).kind == ObjKind::Anon;
            match self.promote_if_uniform(pid, head, vpn - head, c, &rp, relaxed) {
                Some(k) => cycles += k,
                None => break,
            }
        }
        cycles
    }

    /// Checks the mapping conditions of a promotion of `[head, head + 2^order)` to class `c` and
    /// promotes. seed 000 4.9: "uniform protection attributes and dirty bits"; FreeBSD
    /// pmap_promote_pde with the write-protect-clean trick.
    /// The scan starts at offset `from` (the page that triggered the attempt): in a run being
    /// dirtied in order, the first mismatch is then found at once.
    /// `relaxed` (seed 003 5.1, Quicksilver's relaxed mapping, for anonymous memory): the dirty
    /// state need not be uniform; a mixed run becomes a writable, dirty superpage (counted in
    /// `mapped_relaxed`).
    fn promote_if_uniform(
        &mut self,
        pid: Pid,
        head: u64,
        from: u64,
        c: u8,
        rp: &ReservPolicy,
        relaxed: bool,
    ) -> Option<u64> {
        let o = self.orders[c as usize];
        let n = 1u64 << o;
        let bs = self.base_shift();
        let orders = self.orders.clone();
        let p = self.procs.get(&pid.0)?;
        let first = p.pmap.lookup(head)?;
        if !first.pfn().is_aligned(Order(o)) {
            return None;
        }
        let mut prot = None;
        // Pages entered writable, and whether all were: a clean page's write permission is not
        // part of its protection for promotion. FreeBSD pmap_promote_pde write-protects a clean
        // writable PTE before comparing it; on seed 000's Alpha a clean page is write-trapped
        // (fault-on-write) anyway. So the faulting page of a read fault (entered writable) and
        // its prefaulted neighbours (entered read-only, pmap_enter_quick) can form a superpage.
        let (mut any_w, mut all_w) = (false, true);
        // How many of the pages are entered writable: the PTEs a write-protection rewrites.
        let mut writable = 0u64;
        let (mut dirty, mut clean) = (0u64, 0u64);
        // Only the write-protect trick needs to see every page of a mixed run.
        let stop_at_mix = rp.clean_write != CleanWrite::WriteProtect && !relaxed;
        for k in 0..n {
            let i = (from + k) % n;
            let e = p.pmap.lookup(head + i)?;
            // Contiguous frames held by this object alone (a frame shared copy-on-write after
            // fork cannot be part of a superpage of one process).
            if e.pfn().0 != first.pfn().0 + i || self.phys.refs(e.pfn()) != 1 {
                return None;
            }
            let w = e.prot().writable();
            let rest = Prot(e.prot().0 & !Prot::WRITE.0);
            if *prot.get_or_insert(rest) != rest {
                return None;
            }
            (any_w, all_w) = (any_w || w, all_w && w);
            writable += w as u64;
            let is_dirty = p.pmap.is_dirty(head + i, orders[e.size().0 as usize]);
            if is_dirty {
                dirty += 1;
            } else {
                clean += 1;
            }
            if stop_at_mix && dirty > 0 && clean > 0 {
                return None;
            }
        }
        // The run lies in one map entry (try_promote), so a page entered read-only beside
        // writable ones was a prefault of a writable mapping, or clean: it may be written.
        let mut prot = prot?;
        // What FreeBSD's uniform rule refuses and relaxed mapping maps.
        let mut nonuniform = dirty > 0 && clean > 0;
        if any_w {
            prot = Prot(prot.0 | Prot::WRITE.0);
            if !all_w && dirty > 0 {
                if !relaxed {
                    return None; // a dirty read-only page beside writable ones: not uniform
                }
                nonuniform = true;
            }
        }
        let mut cycles = 0;
        // seed 000 6.6's overhead mode: the mappings are left alone.
        let overhead = rp.promote == Promote::Overhead;
        if dirty > 0 && clean > 0 && !relaxed {
            if rp.clean_write == CleanWrite::WriteProtect && prot.writable() && !overhead {
                // FreeBSD pmap_promote_pde: a PTE that is writable and clean loses its write
                // permission (one atomic write), so that its next write faults and retries; a
                // PTE already read-only (a prefault's, pmap_enter_quick) is not written. Here
                // every page is writable (a read-only one beside a dirty one returned above), so
                // the clean pages are exactly the writable clean ones.
                let ro = Prot(prot.0 & !Prot::WRITE.0);
                let p = self.procs.get_mut(&pid.0)?;
                let mut changed = 0;
                for vpn in head..head + n {
                    if !p.pmap.is_dirty(vpn, 0)
                        && p.pmap.lookup(vpn).is_some_and(|e| e.size().is_base())
                    {
                        p.pmap.set_prot(vpn, ro);
                        // FreeBSD invalidates nothing here: on x86 a write through a TLB entry
                        // whose dirty bit is clear re-reads the PTE to set it and faults on
                        // the cleared write permission. The model's dirty-bit assist
                        // (vm/fault.rs `write_hit_retries`) trusts the TLB entry's permission
                        // instead, so the stale writable entry must go, or the next write would
                        // dirty a read-only page without a fault. Only the entries written
                        // here (the dirty pages' entries stay valid), and not charged: the real
                        // kernel issues no invalidation; the retried write's walk is the cost
                        // of the hardware's re-read.
                        self.hw
                            .tlb
                            .invalidate_range(pid.0, vpn << bs, (vpn + 1) << bs);
                        changed += 1;
                    }
                }
                self.stats.cycles_kernel += changed * self.machine.cost.pte_write_cycles;
            }
            return None;
        }
        // Replicated PTEs: every base PTE is rewritten (seed 000 6.1); x86: one PDE.
        let writes = self.machine.superpage_entry_writes(n);
        if relaxed && nonuniform {
            self.reserv
                .as_mut()
                .expect("reservations")
                .stats
                .mapped_relaxed += 1;
        }
        if dirty == 0 && clean > 0 && rp.clean_write == CleanWrite::WriteProtect && prot.writable()
        {
            // All clean: a read-only superpage (its first write faults and demotes).
            prot = Prot(prot.0 & !Prot::WRITE.0);
            // FreeBSD pmap_promote_pde write-protects each writable clean PTE (one write each)
            // before comparing them, so that no write can set a dirty bit between the check
            // and the PDE write; then it writes the one PDE. With replicated PTEs (seed 000
            // 6.1) the promotion rewrites every base PTE anyway, and those writes carry the
            // superpage's read-only protection; the separate pass guards against a hardware
            // dirty bit, which the Alpha does not have (a clean page is fault-on-write, its
            // write traps to the kernel holding the pmap). So the protection is charged only
            // on a radix table, one write per writable PTE.
            if !self.machine.replicated_ptes {
                cycles += writable * self.machine.cost.pte_write_cycles;
            }
            if !overhead {
                let p = self.procs.get_mut(&pid.0)?;
                p.pmap.protect(head, head + n, prot);
            }
        } else if any_w && !all_w && !overhead {
            // All clean, some entered read-only by prefault: the superpage is writable (its
            // first write takes the clean-superpage trap, seed 000 4.7, or marks it dirty).
            // No write of its own: with replicated PTEs the protection goes into the n
            // rewrites of the promotion (`writes`); on a radix table the PDE carries it and
            // the base PTEs stay as they are in the page-table page kept for a demotion, which
            // refills them from the PDE (FreeBSD pmap_demote_pde, pmap_fill_ptp).
            let p = self.procs.get_mut(&pid.0)?;
            p.pmap.set_prot_run(head, n, prot);
        }
        if overhead {
            // seed 000 6.6: "writing the new superpage size into some unused portion of the
            // page table entries": the writes, no new mapping, nothing to invalidate.
            cycles += writes * self.machine.cost.pte_write_cycles;
            self.stats.cycles_promotion += cycles;
            return Some(cycles);
        }
        let p = self.procs.get_mut(&pid.0)?;
        p.pmap.promote(head, o, SizeClass(c));
        self.hw
            .tlb
            .invalidate_range(pid.0, head << bs, (head + n) << bs);
        self.stats.promotions[c as usize] += 1;
        cycles +=
            writes * self.machine.cost.pte_write_cycles + self.machine.cost.tlb_invalidate_cycles;
        self.stats.cycles_promotion += cycles;
        Some(cycles)
    }

    // ---- event 4: mapping destruction (demotion) ----

    /// The next smaller size a superpage of class `c` demotes to: the largest allowed smaller
    /// class, or the base page.
    fn demote_target(&self, c: u8) -> u8 {
        match &self.policy.alloc {
            AllocPolicy::Reserve(rp) => rp
                .classes
                .iter()
                .copied()
                .filter(|&k| k < c)
                .max()
                .unwrap_or(0),
            // Linux THP: split_huge_pmd maps the base pages.
            AllocPolicy::BasePage | AllocPolicy::Thp(_) => 0,
            // seed 002 5: "breaking a large page mapping such as 64KB into smaller pagesize
            // mappings such as 16KB": the next smaller page size of the machine.
            AllocPolicy::Hint(_) => c - 1,
        }
    }

    /// Demotes the superpage mapping `vpn` of `pid` one step. Returns false if `vpn` is a base page.
    fn demote_one(&mut self, pid: Pid, vpn: u64) -> bool {
        let bs = self.base_shift();
        let Some(p) = self.procs.get(&pid.0) else {
            return false;
        };
        let Some(e) = p.pmap.lookup(vpn) else {
            return false;
        };
        let c = e.size().0;
        if c == 0 {
            return false;
        }
        let to = self.demote_target(c);
        let o = self.orders[c as usize];
        let head = vpn & !((1u64 << o) - 1);
        let p = self.procs.get_mut(&pid.0).expect("demote_one: pid");
        p.pmap
            .demote(head, o, SizeClass(to), self.orders[to as usize]);
        if self.is_huge_zero(e.pfn()) {
            // mm/huge_memory.c `__split_huge_zero_page_pmd`: every base page of a huge zero
            // mapping now maps the 4KB zero page, read-only (vm/thp.rs).
            let zero = self.thp.zero.expect("huge zero page").base;
            let p = self.procs.get_mut(&pid.0).expect("demote_one: pid");
            for i in 0..1u64 << o {
                p.pmap.replace(head + i, zero, e.prot());
            }
            self.thp.stats.zero_page_split += 1;
        }
        self.hw
            .tlb
            .invalidate_range(pid.0, head << bs, (head + (1 << o)) << bs);
        self.stats.demotions[c as usize] += 1;
        // Replicated PTEs rewrite every base entry; a radix table fills the entries of the new
        // lower-level table page.
        let writes = 1u64 << (o - self.orders[to as usize]).min(o);
        let writes = if self.machine.replicated_ptes {
            1u64 << o
        } else {
            writes
        };
        let c =
            writes * self.machine.cost.pte_write_cycles + self.machine.cost.tlb_invalidate_cycles;
        self.stats.cycles_kernel += c;
        self.stats.cycles_demotion += c;
        true
    }

    /// Before `[start, end)` (base page numbers) of `pid` is unmapped: under a policy whose
    /// unmapping demotes (seed 000 6.6), every superpage in it is demoted incrementally to base
    /// pages, each step counted and charged.
    pub(crate) fn demote_for_unmap(&mut self, pid: Pid, start: u64, end: u64) {
        if !matches!(&self.policy.alloc, AllocPolicy::Reserve(rp) if rp.unmap_demotes) {
            return;
        }
        let Some(p) = self.procs.get(&pid.0) else {
            return;
        };
        let mut heads = p.pmap.superpage_heads(start, end, &self.orders);
        while let Some(head) = heads.pop() {
            let Some(e) = self.procs.get(&pid.0).and_then(|p| p.pmap.lookup(head)) else {
                continue;
            };
            let c = e.size().0;
            if c == 0 || !self.demote_one(pid, head) {
                continue;
            }
            // The pieces, if still superpages, are demoted in turn.
            let to = self.demote_target(c);
            if to > 0 {
                let step = 1u64 << self.orders[to as usize];
                let n = 1u64 << self.orders[c as usize];
                heads.extend((0..n / step).map(|k| head + k * step));
            }
        }
    }

    /// seed 000 4.6: demotes incrementally until `va` is mapped by a base page: the superpage is
    /// demoted to the next smaller size, then the one containing `va`, and so on.
    pub(crate) fn demote_to_base(&mut self, pid: Pid, va: u64) {
        let vpn = va >> self.base_shift();
        while self.demote_one(pid, vpn) {}
    }

    /// Before a map entry is split at `start` and `end` (munmap, mprotect, madvise of part of
    /// it): demotes incrementally until no superpage crosses either boundary.
    pub(crate) fn demote_edges(&mut self, pid: Pid, start: u64, end: u64) {
        let bs = self.base_shift();
        for b in [start, end] {
            let vpn = b >> bs;
            while let Some(e) = self.procs.get(&pid.0).and_then(|p| p.pmap.lookup(vpn)) {
                let c = e.size().0;
                if c == 0 || vpn.is_multiple_of(1u64 << self.orders[c as usize]) {
                    break;
                }
                self.demote_one(pid, vpn);
            }
        }
    }

    /// What a write to a clean superpage does under this policy (seed 000 4.7).
    #[inline]
    pub(crate) fn demotes_clean_superpage_on_write(&self) -> bool {
        demotes_clean_superpage_on_write(&self.policy)
    }

    // ---- invariants and dumps ----

    /// The object reservation `id` belongs to; an invariant error if it is gone.
    pub(crate) fn resv_object(&self, id: u32, r: &crate::reserv::Resv) -> Result<&super::VmObject> {
        self.objects
            .get(r.obj.0 as usize)
            .and_then(|o| o.as_ref())
            .ok_or_else(|| {
                SimError::Invariant(format!("reservation {id}: its object {} is gone", r.obj.0))
            })
    }

    /// Slot `i` of reservation `id` (over object `o`) agrees with the object and the frame's
    /// holds: populated, the object holds the frame and nothing else does; unpopulated, the
    /// object has no page there and the frame is neither held nor free. Returns whether the
    /// slot is populated.
    pub(crate) fn check_reserved_slot(
        &self,
        id: u32,
        r: &crate::reserv::Resv,
        o: &super::VmObject,
        i: u64,
    ) -> Result<bool> {
        let pfn = Pfn(r.pfn.0 + i);
        let cindex = r.cbase + i;
        let resident = cindex.checked_sub(o.colour).and_then(|pi| o.pages.get(pi));
        if r.is_set(i) {
            crate::ensure_inv!(
                resident == Some(pfn),
                "reservation {id}: slot {i} populated but the object holds {resident:?}"
            );
            crate::ensure_inv!(
                self.phys.refs(pfn) == 1,
                "reservation {id}: frame {} shared ({} holders)",
                pfn.0,
                self.phys.refs(pfn)
            );
        } else {
            crate::ensure_inv!(
                resident.is_none(),
                "reservation {id}: slot {i} unpopulated but the object has the page"
            );
            crate::ensure_inv!(
                self.phys.refs(pfn) == 0 && !self.phys.buddy.is_free(pfn),
                "reservation {id}: unpopulated frame {} is held or free",
                pfn.0
            );
        }
        Ok(r.is_set(i))
    }

    /// Reservations agree with objects, population maps and physical memory; every frame is
    /// free, wired, held by an object, or reserved and unpopulated, exactly once.
    pub(crate) fn check_reservations(&self) -> Result<()> {
        let inv = SimError::Invariant;
        let mut reserved_unpopulated = 0u64;
        if let Some(rs) = &self.reserv {
            rs.check_invariants().map_err(inv)?;
            for id in rs.ids() {
                let r = rs.get(id);
                let o = self.resv_object(id, r)?;
                let pm = o.popmap.as_ref().ok_or_else(|| {
                    inv(format!("reservation {id}: object without population map"))
                })?;
                crate::ensure_inv!(
                    pm.node(r.class as usize, r.cbase).map(|n| n.resv) == Some(id),
                    "reservation {id}: population map does not point to it"
                );
                for i in 0..1u64 << r.order {
                    if !self.check_reserved_slot(id, r, o, i)? {
                        reserved_unpopulated += 1;
                    }
                }
            }
        }
        for (i, o) in self.objects.iter().enumerate() {
            let Some(o) = o else { continue };
            if let Some(pm) = &o.popmap {
                let populated: Vec<u64> = o
                    .pages
                    .all()
                    .into_iter()
                    .map(|(pi, _)| pi + o.colour)
                    .collect();
                pm.check(&populated)
                    .map_err(|e| inv(format!("object {i}: {e}")))?;
                for (c, k, id) in pm.reservations() {
                    let rs = self.reserv.as_ref().ok_or_else(|| {
                        inv("population map points to a reservation, none exist".into())
                    })?;
                    crate::ensure_inv!(
                        rs.ids().any(|x| x == id),
                        "object {i}: population map points to dead reservation {id}"
                    );
                    let r = rs.get(id);
                    crate::ensure_inv!(
                        r.obj.0 as usize == i && r.class as usize == c && r.cbase >> r.order == k,
                        "object {i}: population map points to reservation {id} of another place"
                    );
                }
            }
        }
        let f = &self.phys;
        // Pages of THPs unmapped but kept whole on the deferred split queue are none of these.
        let queued = self.thp.stats.split.queued_pages;
        let sum =
            f.buddy.free_frames + f.wired_frames + f.used_frames + reserved_unpopulated + queued;
        crate::ensure_inv!(
            sum == f.frames(),
            "frames: {} free + {} wired + {} in use + {reserved_unpopulated} reserved + {queued} queued for deferred split = {sum}, memory has {}",
            f.buddy.free_frames,
            f.wired_frames,
            f.used_frames,
            f.frames()
        );
        Ok(())
    }

    /// The reservation lists, for `--dump-reservations`.
    pub fn dump_reservations(&self) -> String {
        match &self.reserv {
            Some(rs) => rs.dump(&self.machine.page_sizes()),
            None => "reservations: none (this policy does not reserve)\n".into(),
        }
    }
}

/// Whether `policy` demotes a clean superpage on its first write (seed 000 4.7: the OS traps
/// the write), as `Os::demotes_clean_superpage_on_write`; a function of the policy alone, for
/// callers that hold another part of `Os` borrowed.
pub(crate) fn demotes_clean_superpage_on_write(policy: &crate::policy::Policy) -> bool {
    matches!(&policy.alloc, AllocPolicy::Reserve(rp) if rp.clean_write == CleanWrite::DemoteOnTrap)
}
