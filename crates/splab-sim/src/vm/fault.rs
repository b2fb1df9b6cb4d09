//! The access path (TLB, walk, fault) and the page-fault handler.
//!
//! Hot path contract: an access that hits the entry the previous data access used touches
//! nothing but two counters (`Tlb::last`); any TLB invalidation clears that record.

use super::pmap::Walked;
use super::{ObjId, ObjKind, Os, Vma};
use crate::error::{Result, SimError};
use crate::hw::{Lookup, Translation};
use crate::units::{AccessKind, Pfn, Pid, Prot};

/// Access and translation counters (the `accesses` and `tlb` report sections).
#[derive(Clone, Debug, Default)]
pub struct AccessStats {
    pub total: u64,
    pub reads: u64,
    pub writes: u64,
    pub ifetch: u64,
    /// Accesses that missed every TLB level.
    pub walks: u64,
    /// Page-table memory references made by walks.
    pub walk_refs: u64,
    /// Writes that found a clean TLB entry and had the walker set the dirty bit.
    pub dirty_assists: u64,
    /// Cycles of the accesses themselves (`access_cycles` each).
    pub cycles_access: u64,
    /// Cycles of TLB lower-level hits and walks.
    pub cycles_tlb: u64,
}

impl AccessStats {
    #[inline]
    fn count(&mut self, kind: AccessKind, n: u64) {
        self.total += n;
        match kind {
            AccessKind::Read => self.reads += n,
            AccessKind::Write => self.writes += n,
            AccessKind::Ifetch => self.ifetch += n,
        }
    }
}

/// What a fault did, for latency accounting.
struct FaultCost {
    cycles: u64,
    io: u64,
}

impl Os {
    /// One access by `pid` at `va`.
    #[inline]
    pub fn access(&mut self, pid: Pid, va: u64, kind: AccessKind) -> Result<()> {
        let last = &self.hw.tlb.last;
        if kind != AccessKind::Ifetch
            && last.asid == pid.0
            && va >= last.start
            && va < last.end
            && (kind == AccessKind::Read || last.write_ok)
        {
            self.hw.tlb.count_last_hits(1);
            self.acc.count(kind, 1);
            self.acc.cycles_access += self.machine.cost.access_cycles;
            return Ok(());
        }
        self.access_slow(pid, va, kind)
    }

    /// Hints the host CPU to fetch what an access of `va` by `pid` will need if it misses the
    /// TLB: its page-table entry and the walk-cache sets of its walk. Speed only.
    #[inline]
    pub fn prefetch(&self, pid: Pid, va: u64) {
        if let Some(p) = self.procs.get(&pid.0) {
            p.pmap.prefetch(va >> self.base_shift());
        }
        self.hw.walker.prefetch(pid.0, va);
    }

    /// A batch of accesses of one kind, with prefetching a few accesses ahead.
    pub fn accesses(&mut self, pid: Pid, vas: &[u64], kind: AccessKind) -> Result<()> {
        const AHEAD: usize = 8;
        for (i, &va) in vas.iter().enumerate() {
            if let Some(&next) = vas.get(i + AHEAD) {
                self.prefetch(pid, next);
            }
            self.access(pid, va, kind)?;
        }
        Ok(())
    }

    /// `count` accesses at `va, va + stride, ...`: consecutive accesses inside the page of the
    /// last TLB hit are counted in one step (they are L1 hits on the MRU entry, which change no
    /// LRU state), so a sequential scan costs one lookup per page.
    pub fn access_run(
        &mut self,
        pid: Pid,
        va: u64,
        stride: i64,
        count: u64,
        kind: AccessKind,
    ) -> Result<()> {
        let mut va = va;
        let mut left = count;
        while left > 0 {
            self.access(pid, va, kind)?;
            left -= 1;
            let last = self.hw.tlb.last;
            if left > 0
                && kind != AccessKind::Ifetch
                && stride != 0
                && last.asid == pid.0
                && (kind == AccessKind::Read || last.write_ok)
                && va >= last.start
                && va < last.end
            {
                // How many more accesses of the run stay inside [last.start, last.end)?
                let room = if stride > 0 {
                    (last.end - 1 - va) / stride as u64
                } else {
                    (va - last.start) / stride.unsigned_abs()
                };
                let n = room.min(left);
                if n > 0 {
                    self.hw.tlb.count_last_hits(n);
                    self.acc.count(kind, n);
                    self.acc.cycles_access += n * self.machine.cost.access_cycles;
                    left -= n;
                    va = va.wrapping_add((stride * n as i64) as u64);
                }
            }
            va = va.wrapping_add(stride as u64);
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn access_slow(&mut self, pid: Pid, va: u64, kind: AccessKind) -> Result<()> {
        self.acc.count(kind, 1);
        self.acc.cycles_access += self.machine.cost.access_cycles;
        let write = kind == AccessKind::Write;
        let ifetch = kind == AccessKind::Ifetch;
        let bs = self.base_shift();
        let trap = write && self.demotes_clean_superpage_on_write();
        let mut walked = false;
        // At most: a miss, a fault, a retry that may fault once more for copy-on-write.
        for _ in 0..4 {
            match self.hw.tlb.lookup(pid.0, va, ifetch) {
                Lookup::Hit { t, cycles, .. } => {
                    self.acc.cycles_tlb += cycles;
                    if write && !t.writable {
                        // A write through a read-only entry: protection fault (COW or upgrade).
                        self.hw.tlb.invalidate_range(pid.0, va, va + 1);
                        self.fault(pid, va, kind)?;
                        continue;
                    }
                    if write && !t.dirty {
                        if trap && !t.size.is_base() {
                            self.clean_write_trap(pid, va);
                            continue;
                        }
                        let order = self.orders[t.size.0 as usize];
                        self.procs.get_mut(&pid.0).expect("access: pid").pmap.touch(
                            va >> bs,
                            order,
                            true,
                        );
                        self.hw.tlb.mark_dirty(pid.0, va, t);
                        self.acc.dirty_assists += 1;
                        if trap {
                            self.after_dirtied(pid, va);
                        }
                    }
                    return Ok(());
                }
                Lookup::Miss { cycles } => {
                    self.acc.cycles_tlb += cycles;
                    if !walked {
                        self.acc.walks += 1;
                        walked = true;
                    }
                    let p = self.procs.get_mut(&pid.0).ok_or_else(|| {
                        SimError::InvalidEvent(format!("access by unknown pid {}", pid.0))
                    })?;
                    let vpn = va >> bs;
                    let need = match kind {
                        AccessKind::Read => Prot::READ,
                        AccessKind::Write => Prot::WRITE,
                        AccessKind::Ifetch => Prot::EXEC,
                    };
                    let found = p.pmap.walk_touch(vpn, need, write, trap, &self.orders);
                    // A walk that finds no usable entry still walks (at base-page depth, or to
                    // the entry it finds) before the fault.
                    let leaf = match found {
                        Walked::Mapped { entry, .. } | Walked::CleanSuperpageWrite(entry) => {
                            self.machine.page_shifts[entry.size().0 as usize]
                        }
                        Walked::Unusable => p
                            .pmap
                            .lookup(vpn)
                            .map(|e| self.machine.page_shifts[e.size().0 as usize])
                            .unwrap_or(bs),
                    };
                    let w = self.hw.walker.walk(pid.0, va, leaf);
                    self.acc.walk_refs += w.refs as u64;
                    self.acc.cycles_tlb += w.cycles;
                    match found {
                        Walked::Mapped {
                            entry,
                            head,
                            became_dirty,
                        } => {
                            let t = Translation {
                                pfn: head.pfn(),
                                size: entry.size(),
                                writable: entry.prot().writable(),
                                dirty: head.dirty(),
                            };
                            self.hw.tlb.fill(pid.0, va, t, ifetch);
                            if became_dirty && trap {
                                self.after_dirtied(pid, va);
                            }
                            return Ok(());
                        }
                        Walked::CleanSuperpageWrite(_) => self.clean_write_trap(pid, va),
                        Walked::Unusable => self.fault(pid, va, kind)?,
                    }
                }
            }
        }
        Err(SimError::Invariant(format!(
            "access by pid {} at {va:#x} did not resolve after repeated faults",
            pid.0
        )))
    }

    /// The page-fault handler: resolves a fault on `va` or reports a segmentation fault.
    fn fault(&mut self, pid: Pid, va: u64, kind: AccessKind) -> Result<()> {
        let bs = self.base_shift();
        let p = self
            .procs
            .get(&pid.0)
            .ok_or_else(|| SimError::InvalidEvent(format!("fault by unknown pid {}", pid.0)))?;
        let kind_name = match kind {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
            AccessKind::Ifetch => "instruction fetch",
        };
        let Some(v) = p.vma_at(va).cloned() else {
            return Err(SimError::Segfault {
                pid: pid.0,
                va,
                kind: kind_name,
                why: "no mapping at this address".into(),
            });
        };
        if !v.prot.allows(kind) {
            return Err(SimError::Segfault {
                pid: pid.0,
                va,
                kind: kind_name,
                why: format!("mapping is {}", v.prot),
            });
        }
        let vpn = va >> bs;
        let pindex = v.pgoff + ((va - v.start) >> bs);
        let write = kind == AccessKind::Write;
        let mut present = p.pmap.lookup(vpn);
        if let Some(e) = present.filter(|e| !e.size().is_base()) {
            if !write {
                // Read or fetch permission granted back lazily to a superpage (after mprotect
                // took it away): grant it on the whole superpage, which lies inside this map
                // entry, rather than demote (FreeBSD and Linux keep the superpage mapping).
                let order = self.orders[e.size().0 as usize];
                let head = vpn & !((1u64 << order) - 1);
                let grant = Prot(e.prot().0 | (v.prot.0 & (Prot::READ.0 | Prot::EXEC.0)));
                let bs = self.base_shift();
                self.procs
                    .get_mut(&pid.0)
                    .expect("fault: pid")
                    .pmap
                    .set_prot_run(head, 1 << order, grant);
                self.hw
                    .tlb
                    .invalidate_range(pid.0, head << bs, (head + (1 << order)) << bs);
                self.stats.faults.protection += 1;
                let writes = if self.machine.replicated_ptes {
                    1u64 << order
                } else {
                    1
                };
                self.finish_fault(FaultCost {
                    cycles: writes * self.machine.cost.pte_write_cycles,
                    io: 0,
                });
                return Ok(());
            }
            // A write: copy-on-write or write permission for one page of it: demote first.
            self.demote_to_base(pid, va);
            present = self.procs.get(&pid.0).and_then(|p| p.pmap.lookup(vpn));
        }
        let cost = match present {
            Some(pte) if write && !pte.prot().writable() => {
                self.write_fault_present(pid, &v, vpn, pindex, pte.pfn())?
            }
            Some(pte) => {
                // Read or fetch permission the map entry has but the entry lacks (taken away by
                // an earlier mprotect, granted back lazily): grant it, leaving write as it is.
                let grant = Prot(pte.prot().0 | (v.prot.0 & (Prot::READ.0 | Prot::EXEC.0)));
                self.set_pte_prot(pid, vpn, grant);
                self.stats.faults.protection += 1;
                FaultCost {
                    cycles: self.machine.cost.pte_write_cycles,
                    io: 0,
                }
            }
            None => self.fault_absent(pid, &v, vpn, pindex, write)?,
        };
        self.finish_fault(cost);
        Ok(())
    }

    /// Counts a resolved fault and its latency.
    fn finish_fault(&mut self, cost: FaultCost) {
        let c = self.machine.cost.fault_cycles + cost.cycles;
        self.stats.faults.total += 1;
        if cost.io > 0 {
            self.stats.faults.major += 1;
        } else {
            self.stats.faults.minor += 1;
        }
        self.stats.cycles_fault += c;
        self.stats.cycles_io += cost.io;
        let ns = (c + cost.io) as u128 * 1_000_000_000 / self.machine.freq_hz as u128;
        self.stats.fault_latency.record(ns as u64);
    }

    /// A write to a present, write-protected private page: copy it if another object holds the
    /// frame or it belongs to a file, else just grant write permission.
    fn write_fault_present(
        &mut self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pindex: u64,
        pfn: Pfn,
    ) -> Result<FaultCost> {
        let pte_write = self.machine.cost.pte_write_cycles;
        if !v.private() {
            // A shared mapping whose write permission was taken away (mprotect, or FreeBSD's
            // write-protect-clean trick): grant it. The access is a write, so the page is dirty
            // now, which may complete a promotable extent.
            self.set_pte_prot(pid, vpn, v.prot);
            self.procs
                .get_mut(&pid.0)
                .expect("fault: pid")
                .pmap
                .touch(vpn, 0, true);
            self.stats.faults.protection += 1;
            let promo = self.try_promote(pid, v, vpn);
            return Ok(FaultCost {
                cycles: pte_write + promo,
                io: 0,
            });
        }
        let (layer, in_file) = match v.shadow {
            Some(s) if self.obj(s).pages.get(pindex).is_some() => (s, false),
            Some(s) => (s, true),
            None => (v.obj, false),
        };
        if !in_file && self.phys.refs(pfn) == 1 {
            // Exclusive: grant write. The access is a write, so the page is dirty now (FreeBSD
            // pmap_enter of a write fault), which may complete a promotable extent.
            self.set_pte_prot(pid, vpn, v.prot);
            self.procs
                .get_mut(&pid.0)
                .expect("fault: pid")
                .pmap
                .touch(vpn, 0, true);
            self.stats.faults.protection += 1;
            let promo = self.try_promote(pid, v, vpn);
            return Ok(FaultCost {
                cycles: pte_write + promo,
                io: 0,
            });
        }
        let copy_cycles = self.machine.cost.copy_page_cycles;
        let new = self.cow_copy(pid, layer, pindex, v)?;
        let va = vpn << self.base_shift();
        let p = self.procs.get_mut(&pid.0).expect("cow: pid");
        p.pmap.replace(vpn, new, v.prot);
        self.hw.tlb.invalidate_range(pid.0, va, va + 1);
        Ok(FaultCost {
            cycles: copy_cycles + self.machine.cost.tlb_invalidate_cycles,
            io: 0,
        })
    }

    /// Copy-on-write: page `pindex` of `layer` becomes a private copy in a new frame, replacing
    /// the page `layer` held (if any). The frame is allocated before the old page is let go, so
    /// running out of memory changes nothing. Counts the copy; the caller charges its cycles.
    fn cow_copy(&mut self, pid: Pid, layer: ObjId, pindex: u64, v: &Vma) -> Result<Pfn> {
        let new = self.alloc_frame(pid, layer, pindex, v)?;
        self.obj_remove(layer, pindex);
        self.obj_insert(layer, pindex, new);
        self.stats.faults.cow += 1;
        self.stats.copied_bytes += self.machine.base_size();
        Ok(new)
    }

    fn set_pte_prot(&mut self, pid: Pid, vpn: u64, prot: Prot) {
        let va = vpn << self.base_shift();
        self.procs
            .get_mut(&pid.0)
            .expect("set_pte_prot: pid")
            .pmap
            .set_prot(vpn, prot);
        self.hw.tlb.invalidate_range(pid.0, va, va + 1);
    }

    /// A fault on a page with no mapping: find the page in the object (chain), or make it.
    fn fault_absent(
        &mut self,
        pid: Pid,
        v: &Vma,
        vpn: u64,
        pindex: u64,
        write: bool,
    ) -> Result<FaultCost> {
        let base = self.machine.base_size();
        let mut cost = FaultCost { cycles: 0, io: 0 };
        // Which object supplies the page, and is it ours to write?
        let (pfn, exclusive) = if let Some(s) = v.shadow {
            if let Some(pfn) = self.obj(s).pages.get(pindex) {
                (pfn, self.phys.refs(pfn) == 1)
            } else {
                let pfn = self.file_page(pid, v.obj, pindex, v, &mut cost)?;
                if write {
                    // Private write to a file page: copy it into the shadow at once.
                    let new = self.cow_copy(pid, s, pindex, v)?;
                    cost.cycles += self.machine.cost.copy_page_cycles;
                    (new, true)
                } else {
                    (pfn, false)
                }
            }
        } else if let ObjKind::File { .. } = self.obj(v.obj).kind {
            (self.file_page(pid, v.obj, pindex, v, &mut cost)?, true)
        } else if let Some(pfn) = self.obj(v.obj).pages.get(pindex) {
            // Present in the object (shared memory, or a copy-on-write page after fork).
            if write && v.private() && self.phys.refs(pfn) > 1 {
                let new = self.cow_copy(pid, v.obj, pindex, v)?;
                cost.cycles += self.machine.cost.copy_page_cycles;
                (new, true)
            } else {
                (pfn, !v.private() || self.phys.refs(pfn) == 1)
            }
        } else {
            // Zero-fill (event 2, preparation: one base page zeroed at fault time).
            let pfn = self.alloc_frame(pid, v.obj, pindex, v)?;
            self.obj_insert(v.obj, pindex, pfn);
            self.stats.faults.zero_fill += 1;
            self.stats.zeroed_bytes += base;
            cost.cycles += self.machine.cost.zero_page_cycles;
            (pfn, true)
        };
        let prot = if exclusive || !v.prot.writable() {
            v.prot
        } else {
            Prot(v.prot.0 & !Prot::WRITE.0)
        };
        let p = self.procs.get_mut(&pid.0).expect("fault: pid");
        p.pmap.enter(vpn, pfn, prot);
        if write && prot.writable() {
            // The faulting write dirties the page as it is entered (FreeBSD pmap_enter sets
            // PG_M for a write fault; the retried access would set it anyway).
            p.pmap.touch(vpn, 0, true);
        }
        cost.cycles += self.machine.cost.pte_write_cycles;
        // Event 3, mapping creation: promote if the page completed a superpage-sized extent.
        cost.cycles += self.try_promote(pid, v, vpn);
        Ok(cost)
    }

    /// The page `pindex` of file object `obj`, read from storage into the page cache if absent.
    fn file_page(
        &mut self,
        pid: Pid,
        obj: ObjId,
        pindex: u64,
        v: &Vma,
        cost: &mut FaultCost,
    ) -> Result<Pfn> {
        if let Some(pfn) = self.obj(obj).pages.get(pindex) {
            return Ok(pfn);
        }
        let pfn = self.alloc_frame(pid, obj, pindex, v)?;
        self.obj_insert(obj, pindex, pfn);
        let base = self.machine.base_size();
        self.stats.io_read_bytes += base;
        cost.io += self.machine.io_cycles(base);
        Ok(pfn)
    }

    /// seed 000 4.7: a write trapped on a clean superpage (the Alpha's dirty-bit emulation): the
    /// superpage is demoted incrementally down to the written base page; the retried access
    /// then dirties that page only. Counted as a protection fault.
    fn clean_write_trap(&mut self, pid: Pid, va: u64) {
        self.demote_to_base(pid, va);
        self.stats.faults.protection += 1;
        self.finish_fault(FaultCost { cycles: 0, io: 0 });
    }

    /// A base page was dirtied under a policy that traps dirtying (seed 000 4.7): the extent
    /// around it may now be uniformly dirty and promotable ("repromote later if all the base
    /// pages are dirtied").
    fn after_dirtied(&mut self, pid: Pid, va: u64) {
        let Some(v) = self.procs.get(&pid.0).and_then(|p| p.vma_at(va)).cloned() else {
            return;
        };
        let c = self.try_promote(pid, &v, va >> self.base_shift());
        self.stats.cycles_kernel += c;
    }
}
