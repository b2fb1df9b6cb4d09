//! The access path (TLB, walk, fault) and the page-fault handler.
//!
//! Hot path contract: an access that hits the entry the previous data access used does no TLB
//! lookup (`Tlb::last`, with the page's physical offset in `Os::pa_delta`): it is counted and
//! goes to the data caches and the core. Any TLB invalidation clears that record.

use super::pmap::Walked;
use super::{ObjId, ObjKind, Os, Vma};
use crate::error::{Result, SimError};
use crate::hw::cache::LINE_SHIFT;
use crate::hw::core::{cause, Trip};
use crate::hw::walk::{add_priced, NO_TABLE};
use crate::hw::{Lookup, Translation};
use crate::units::{Access, AccessKind, MemOp, Pfn, Pid, Prot};

/// Access and translation counters (the `accesses` and `tlb` report sections).
#[derive(Clone, Debug, Default)]
pub struct AccessStats {
    pub total: u64,
    pub reads: u64,
    pub writes: u64,
    pub ifetch: u64,
    /// Read-modify-write accesses (counted in `writes` too).
    pub rmw: u64,
    /// Accesses with a dependence on an earlier load (`dep` > 0).
    pub dependent: u64,
    /// Instructions of the accesses (`ipa` summed, streamed runs included).
    pub instructions: u64,
    /// Accesses that missed every TLB level.
    pub walks: u64,
    /// Page-table memory references made by walks.
    pub walk_refs: u64,
    /// Writes that found a clean TLB entry and had the walker set the dirty bit.
    pub dirty_assists: u64,
    /// Data references served by L1, L2, LLC, DRAM (streamed lines not included).
    pub data_by_level: [u64; 4],
    /// Lines brought in from DRAM by the stream prefetcher: a sequential run's, and those a
    /// stream the hardware prefetcher detected among individual accesses fetched ahead of them
    /// (hw/prefetch.rs; those are not in `data_by_level`, whose L2 count has the ones it
    /// fetched from the LLC).
    pub streamed_lines: u64,
}

impl AccessStats {
    #[inline]
    fn count(&mut self, a: &Access, n: u64) {
        self.total += n;
        self.instructions += n * a.ipa as u64;
        match a.op {
            MemOp::Load => self.reads += n,
            MemOp::Store => self.writes += n,
            MemOp::Rmw => {
                self.writes += n;
                self.rmw += n;
            }
            MemOp::Ifetch => self.ifetch += n,
        }
        if a.dep > 0 {
            self.dependent += n;
        }
    }
}

/// What a fault did, for latency accounting.
struct FaultCost {
    cycles: u64,
    io: u64,
}

impl Os {
    /// One independent, one-instruction access by `pid` at `va`.
    #[inline]
    pub fn access(&mut self, pid: Pid, va: u64, kind: AccessKind) -> Result<()> {
        self.access_op(pid, Access::plain(va, kind))
    }

    /// One access by `pid`: translation (TLB, walk, fault), data (caches), timing (core).
    #[inline]
    pub fn access_op(&mut self, pid: Pid, a: Access) -> Result<()> {
        if self.last_hit(pid, &a) {
            return Ok(());
        }
        self.access_slow(pid, a)
    }

    /// The fast path of `access_op` and `access_op_batch`: an access (not an instruction
    /// fetch) inside the page of the last TLB hit, allowed by its rights, is an L1 TLB hit on
    /// the MRU entry; counts it and makes its data reference. False: the caller translates.
    #[inline(always)]
    fn last_hit(&mut self, pid: Pid, a: &Access) -> bool {
        match self.last_hit_pa(pid, a) {
            Some(pa) => {
                self.data(a, pa, &mut Trip::default());
                true
            }
            None => false,
        }
    }

    /// `last_hit` without the data reference: the access's (host-)physical address if it is
    /// a hit on the MRU entry (counted), else None.
    #[inline(always)]
    fn last_hit_pa(&mut self, pid: Pid, a: &Access) -> Option<u64> {
        let kind = a.op.kind();
        let last = &self.hw.tlb.last;
        if kind != AccessKind::Ifetch
            && last.asid == pid.0
            && a.va >= last.start
            && a.va < last.end
            && (kind == AccessKind::Read || last.write_ok)
        {
            self.hw.tlb.count_last_hits(1);
            self.acc.count(a, 1);
            return Some(a.va.wrapping_add(self.pa_delta));
        }
        None
    }

    /// The data reference of an access at physical address `pa` (host-physical on a guest:
    /// `host_addr`), then its timing.
    #[inline]
    fn data(&mut self, a: &Access, pa: u64, trip: &mut Trip) {
        self.data_inline(a, pa, trip)
    }

    /// `data`, inlined into the batch loop (`access_op_batch`), where its one call serves the
    /// MRU hit and the miss path alike: as a call (the compiler kept it out of line, with two
    /// callers there) its saved registers, and the `Trip` it forced into memory, were about
    /// 25 host instructions per GUPS access.
    #[inline(always)]
    fn data_inline(&mut self, a: &Access, pa: u64, trip: &mut Trip) {
        let line = pa >> LINE_SHIFT;
        if self.streaming {
            self.data_streamed(line, trip);
        } else {
            let s = self.hw.caches.access(line);
            let levels = self.hw.caches.levels();
            let mut prefetched = false;
            if s >= 1 && self.hw.prefetcher.enabled() && a.op != MemOp::Ifetch {
                if s == 1 {
                    // An L2 hit trains the detector too (it watches L1 misses); it is an L2
                    // hit either way.
                    self.hw.prefetcher.miss(line);
                } else {
                    prefetched = self.prefetched(line, s, levels, trip);
                }
            }
            if !prefetched {
                let k = self.hw.caches.place(s);
                // `place` is 0..=3: the mask drops the bounds check.
                self.acc.data_by_level[k as usize & 3] += 1;
                trip.served = k;
                trip.latency = self.hw.caches.latency(s);
            }
        }
        trip.line = line;
        // The one call of the core's timing (inlined here).
        self.hw.core.access(a.op, a.ipa as u64, a.dep as u64, trip);
    }

    /// `data` of a sequential run's first access to a page (`access_run`): its line comes from
    /// the stream prefetcher: bandwidth, no latency. Out of line: once a page, and kept out of
    /// the batch loop's register allocation.
    #[cold]
    #[inline(never)]
    fn data_streamed(&mut self, line: u64, trip: &mut Trip) {
        self.hw.caches.stream_fill(line);
        self.hw.core.stream(0, 1);
        self.acc.streamed_lines += 1;
        trip.served = 0;
        trip.latency = self.hw.caches.latency(0);
    }

    /// An L1 miss at `line` that the caches served at `s` (beyond L2): if the hardware
    /// prefetcher (hw/prefetch.rs) had a stream ahead of it, the line is in L2 already: the
    /// access is served there (an L2 hit in the cache counts), and a line from DRAM costs the
    /// stream bandwidth (`Core::prefetched_line`) and counts as streamed. Fills `trip`'s
    /// `served` and `latency` then. Inlined: under GUPS nearly every access comes here, and
    /// out of line (as the batch loop grew) its call cost a dozen host instructions.
    #[inline(always)]
    fn prefetched(&mut self, line: u64, s: u8, levels: usize, trip: &mut Trip) -> bool {
        if !self.hw.prefetcher.miss(line) {
            return false;
        }
        self.hw.caches.count_prefetched(s);
        if s as usize >= levels {
            self.hw.core.prefetched_line();
            self.acc.streamed_lines += 1;
        } else {
            self.acc.data_by_level[1] += 1;
        }
        trip.served = 1;
        trip.latency = self.hw.caches.latency(1);
        true
    }

    /// Records the physical offset of the translation just entered in `Tlb::last`: to the
    /// page's host frame on a guest with scattered host placement (the entry's page lies within
    /// one host page, `host_class`, so one offset holds for all of it). `shift`: the page
    /// shift of `t.size`.
    #[inline]
    fn note_last(&mut self, va: u64, t: &Translation, shift: u8) {
        let start = va >> shift << shift;
        let pa = self.host_addr(t.pfn.0 << self.base_shift());
        self.pa_delta = pa.wrapping_sub(start);
    }

    /// The address the caches see for guest-physical (or native physical) address `pa`: its
    /// host frame's on a guest with scattered host placement (hw/host_frames.rs), else itself.
    #[inline(always)]
    pub(crate) fn host_addr(&self, pa: u64) -> u64 {
        match &self.host_frames {
            Some(h) => h.addr(pa),
            None => pa,
        }
    }

    /// A batch of accesses. The host prefetches, for an access a few ahead, its page-table entry
    /// and the TLB sets its lookup reads (stage one), and then, nearer, the cache-model sets of
    /// its data line (if the page is mapped) and of its leaf page-table entry's line (stage
    /// two, which reads the entry stage one fetched): GUPS-like batches are bound by host cache
    /// misses on the model's structures. Speed only: results are unchanged.
    pub fn accesses(&mut self, pid: Pid, batch: &[Access]) -> Result<()> {
        const FAR: usize = 12;
        const NEAR: usize = 5;
        let bs = self.base_shift();
        for (i, a) in batch.iter().enumerate() {
            if let Some(p) = self.procs.get(&pid.0) {
                if let Some(f) = batch.get(i + FAR) {
                    p.pmap.prefetch(f.va >> bs);
                    self.hw.tlb.prefetch(pid.0, f.va);
                }
                if let Some(n) = batch.get(i + NEAR) {
                    if let Some((pte, path)) = p.pmap.peek(n.va >> bs) {
                        let pa = (pte.pfn().0 << bs) | (n.va & ((1u64 << bs) - 1));
                        let data = self.host_addr(pa) >> LINE_SHIFT;
                        // The data line's sets and the leaf entry's (if it has a table), in one
                        // pass over the cache levels.
                        let leaf = self.hw.walker.leaf_line(n.va, path).unwrap_or(data);
                        self.hw.caches.prefetch_pair(data, leaf);
                    }
                }
            }
            self.access_op_batch(pid, *a)?;
        }
        Ok(())
    }

    /// `access_op` for `accesses`, with the TLB-miss path and the data reference inlined into
    /// the batch loop: the MRU hit and a translation the miss path finds meet at one
    /// `data_inline`.
    #[inline(always)]
    fn access_op_batch(&mut self, pid: Pid, a: Access) -> Result<()> {
        if a.op == MemOp::Ifetch {
            // Never an MRU hit (`last_hit_pa`): the miss path, out of line (`access_slow` is
            // this path's translation and data reference, as a call). Past this test the
            // inlined path below knows its access is data, and drops the instruction-fetch
            // cases of the TLB's level choice, the MRU record and the core (with
            // `Array::prefetch` inlined: 43 host instructions a GUPS access, 1,205.9 -> 1,162.4).
            return self.access_slow(pid, a);
        }
        let mut trip = Trip::default();
        let pa = match self.last_hit_pa(pid, &a) {
            Some(pa) => pa,
            None => match self.translate_miss(pid, a, &mut trip)? {
                Some(pa) => pa,
                None => return Ok(()),
            },
        };
        self.data_inline(&a, pa, &mut trip);
        Ok(())
    }

    /// `count` independent accesses at `va, va + stride, ...`, each with `ipa` instructions: a
    /// sequential run. Consecutive accesses inside the page of the last TLB hit are counted in
    /// one step (they are L1 TLB hits on the MRU entry, which change no LRU state), and their
    /// lines come from the stream prefetcher at the machine's bandwidth, so a scan costs one
    /// TLB lookup per page. After the run's first page the stream continues across pages.
    pub fn access_run(
        &mut self,
        pid: Pid,
        va: u64,
        stride: i64,
        count: u64,
        op: MemOp,
        ipa: u16,
    ) -> Result<()> {
        let kind = op.kind();
        let a0 = Access::new(va, op, 0, ipa);
        let mut va = va;
        let mut left = count;
        let mut first = true;
        while left > 0 {
            self.streaming = !first;
            let r = self.access_op(pid, Access { va, ..a0 });
            self.streaming = false;
            r?;
            first = false;
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
                    self.acc.count(&a0, n);
                    let end = va.wrapping_add((stride * n as i64) as u64);
                    let (l0, l1) = (
                        va.wrapping_add(self.pa_delta) >> LINE_SHIFT,
                        end.wrapping_add(self.pa_delta) >> LINE_SHIFT,
                    );
                    let lines = l0.abs_diff(l1).min(n);
                    // Lines advance by the stride's lines, or by one for strides within a line.
                    let every = if stride.unsigned_abs() >= 1 << LINE_SHIFT {
                        stride >> LINE_SHIFT
                    } else {
                        stride.signum()
                    };
                    let mut l = l0;
                    for _ in 0..lines {
                        l = l.wrapping_add(every as u64);
                        self.hw.caches.stream_fill(l);
                    }
                    self.acc.streamed_lines += lines;
                    self.hw.core.stream(n * ipa as u64, lines);
                    left -= n;
                    va = end;
                }
            }
            va = va.wrapping_add(stride as u64);
        }
        Ok(())
    }

    // Not `#[cold]`: under random access (GUPS) most accesses come here, and a cold caller gets
    // less inlined into it. The first lookup and walk are straight-line; a fault, a protection
    // fault or an A/D assist continues in `access_retry`, out of line (a loop here had the
    // compiler hoist and spill loop invariants on every call).
    #[inline(never)]
    fn access_slow(&mut self, pid: Pid, a: Access) -> Result<()> {
        self.access_miss(pid, a)
    }

    /// `access_slow`'s body.
    #[inline(always)]
    fn access_miss(&mut self, pid: Pid, a: Access) -> Result<()> {
        let mut trip = Trip::default();
        if let Some(pa) = self.translate_miss(pid, a, &mut trip)? {
            self.data(&a, pa, &mut trip);
        }
        Ok(())
    }

    /// The translation of an access that is not an MRU hit (`last_hit_pa`), into `trip`: the
    /// (host-)physical address its data reference is to go to (`data`, the caller's), or None
    /// if a slow path (a fault, a protection fault, an A/D assist) completed the access.
    /// Inlined into the batch loop (`access_op_batch`).
    #[inline(always)]
    fn translate_miss(&mut self, pid: Pid, a: Access, trip: &mut Trip) -> Result<Option<u64>> {
        self.acc.count(&a, 1);
        let ifetch = a.op == MemOp::Ifetch;
        match self.hw.tlb.lookup(pid.0, a.va, ifetch) {
            Lookup::Hit { t, cycles, .. } => {
                trip.tlb_cycles += cycles;
                if a.op.kind() == AccessKind::Write && !(t.writable && t.dirty) {
                    self.write_hit_slow(pid, a, t, *trip)?;
                    return Ok(None);
                }
                Ok(Some(self.translated(&a, &t)))
            }
            Lookup::Miss { cycles } => {
                trip.tlb_cycles += cycles;
                self.acc.walks += 1;
                match self.walk_miss(pid, &a, trip)? {
                    Some(t) => Ok(Some(self.translated(&a, &t))),
                    None => {
                        self.access_retry(pid, a, *trip, true, 3)?;
                        Ok(None)
                    }
                }
            }
        }
    }

    /// `access_slow`'s write that hit an entry not both writable and dirty: the protection
    /// fault or A/D assist (`write_hit_retries`), then the data, or the lookup again.
    #[cold]
    #[inline(never)]
    fn write_hit_slow(
        &mut self,
        pid: Pid,
        a: Access,
        t: Translation,
        mut trip: Trip,
    ) -> Result<()> {
        let trap = self.demotes_clean_superpage_on_write();
        if self.write_hit_retries(pid, a.va, t, trap)? {
            return self.access_retry(pid, a, trip, false, 3);
        }
        self.finish_access(&a, &t, &mut trip);
        Ok(())
    }

    /// The rest of `access_slow` after a first attempt that faulted (or must look up again):
    /// `tries` more lookups, at most (a miss, a fault, a retry that may fault once more for
    /// copy-on-write: four in all). `walked`: the access walked already (walks are counted
    /// once per access).
    #[cold]
    #[inline(never)]
    fn access_retry(
        &mut self,
        pid: Pid,
        a: Access,
        mut trip: Trip,
        mut walked: bool,
        tries: u32,
    ) -> Result<()> {
        let va = a.va;
        let write = a.op.kind() == AccessKind::Write;
        let ifetch = a.op == MemOp::Ifetch;
        let trap = write && self.demotes_clean_superpage_on_write();
        for _ in 0..tries {
            match self.hw.tlb.lookup(pid.0, va, ifetch) {
                Lookup::Hit { t, cycles, .. } => {
                    trip.tlb_cycles += cycles;
                    if write
                        && !(t.writable && t.dirty)
                        && self.write_hit_retries(pid, va, t, trap)?
                    {
                        continue;
                    }
                    self.finish_access(&a, &t, &mut trip);
                    return Ok(());
                }
                Lookup::Miss { cycles } => {
                    trip.tlb_cycles += cycles;
                    if !walked {
                        self.acc.walks += 1;
                        walked = true;
                    }
                    if let Some(t) = self.walk_miss_cold(pid, &a, &mut trip)? {
                        self.finish_access(&a, &t, &mut trip);
                        return Ok(());
                    }
                }
            }
        }
        Err(SimError::Invariant(format!(
            "access by pid {} at {va:#x} did not resolve after repeated faults",
            pid.0
        )))
    }

    /// `walk_miss` for `access_retry`, not inlined there.
    #[cold]
    #[inline(never)]
    fn walk_miss_cold(
        &mut self,
        pid: Pid,
        a: &Access,
        trip: &mut Trip,
    ) -> Result<Option<Translation>> {
        self.walk_miss(pid, a, trip)
    }

    /// A lookup of `a` that missed every TLB level: the page-table lookup, the walk, and the
    /// fill of the translation found (returned), or the fault (or clean-superpage trap) that
    /// must run before the access looks the TLB up again (`None`).
    #[inline(always)]
    fn walk_miss(&mut self, pid: Pid, a: &Access, trip: &mut Trip) -> Result<Option<Translation>> {
        let kind = a.op.kind();
        let va = a.va;
        let write = kind == AccessKind::Write;
        let ifetch = kind == AccessKind::Ifetch;
        let bs = self.base_shift();
        let p = self
            .procs
            .get_mut(&pid.0)
            .ok_or_else(|| SimError::InvalidEvent(format!("access by unknown pid {}", pid.0)))?;
        let vpn = va >> bs;
        let need = match kind {
            AccessKind::Read => Prot::READ,
            AccessKind::Write => Prot::WRITE,
            AccessKind::Ifetch => Prot::EXEC,
        };
        // Whether the OS traps a write to a clean superpage (asked only for superpages).
        let policy = &self.policy;
        let trap = || super::reserve::demotes_clean_superpage_on_write(policy);
        let (found, mut path) = p.pmap.walk_touch(vpn, need, write, trap, &self.orders);
        // A walk that finds no usable entry still walks (at base-page depth, or to
        // the entry it finds) before the fault.
        let leaf = match found {
            Walked::Mapped { entry, .. } | Walked::CleanSuperpageWrite(entry) => {
                self.shift_of(entry.size())
            }
            Walked::Unusable => self.unusable_leaf(pid, vpn),
        };
        if path[0] == NO_TABLE {
            path = self.pt_partial_path(pid, vpn);
        }
        if self.hw.walker.is_nested() || self.hw.walker.is_software() {
            // By value: a pointer to `trip` passed out of line would keep it in memory on the
            // native path too.
            *trip = self.walk_priced(pid, va, leaf, &path, &found, *trip);
        } else {
            // A native hardware walk: its references by the place that served them, each
            // costing that place's latency (what `Walker::walk` prices, without its record).
            let counts = self
                .hw
                .walker
                .walk_counts(pid.0, va, leaf, &path, &mut self.hw.caches);
            let refs = add_priced(counts, &self.hw.caches, &mut trip.walk_by_level);
            self.acc.walk_refs += refs as u64;
            trip.walk_fixed += self.hw.walker.fixed_cycles();
            trip.walked = true;
        }
        match found {
            Walked::Mapped {
                entry,
                head,
                became_dirty,
            } => {
                let mut t = Translation {
                    pfn: head.pfn(),
                    size: entry.size(),
                    writable: entry.prot().writable(),
                    dirty: head.dirty(),
                };
                if t.size.0 > self.host_class {
                    t = self.splinter(va, t);
                }
                self.hw.tlb.fill(pid.0, va, t, ifetch);
                // `became_dirty` implies a write.
                if became_dirty && self.demotes_clean_superpage_on_write() {
                    self.after_dirtied(pid, va);
                }
                Ok(Some(t))
            }
            Walked::CleanSuperpageWrite(_) => {
                self.clean_write_trap(pid, va);
                Ok(None)
            }
            Walked::Unusable => {
                self.fault(pid, va, kind)?;
                Ok(None)
            }
        }
    }

    /// A write that hit a TLB entry not both writable and dirty: through a read-only entry, a
    /// protection fault (COW or upgrade); through a clean one, the walker's A/D assist (or the
    /// OS's trap on a clean superpage). Returns whether the access must look the TLB up again.
    /// Out of line: rare, and kept out of the miss path's register allocation.
    #[cold]
    #[inline(never)]
    fn write_hit_retries(&mut self, pid: Pid, va: u64, t: Translation, trap: bool) -> Result<bool> {
        let bs = self.base_shift();
        if !t.writable {
            self.hw.tlb.invalidate_range(pid.0, va, va + 1);
            self.fault(pid, va, AccessKind::Write)?;
            return Ok(true);
        }
        // The guest page's size: a splintered entry's is the page table's.
        let size = if t.size.0 == self.host_class {
            self.procs
                .get(&pid.0)
                .and_then(|p| p.pmap.lookup(va >> bs))
                .map_or(t.size, |e| e.size())
        } else {
            t.size
        };
        if trap && !size.is_base() {
            self.clean_write_trap(pid, va);
            return Ok(true);
        }
        let order = self.orders[size.0 as usize];
        self.procs
            .get_mut(&pid.0)
            .expect("access: pid")
            .pmap
            .touch(va >> bs, order, true);
        self.hw.tlb.mark_dirty(pid.0, va, t);
        self.acc.dirty_assists += 1;
        if trap {
            self.after_dirtied(pid, va);
        }
        Ok(false)
    }

    /// The byte shift a walk that found no usable entry for `vpn` walks to: the entry's size
    /// if there is one (without the permission), else the base page's.
    #[cold]
    #[inline(never)]
    fn unusable_leaf(&self, pid: Pid, vpn: u64) -> u8 {
        self.procs
            .get(&pid.0)
            .and_then(|p| p.pmap.lookup(vpn))
            .map(|e| self.machine.page_shifts[e.size().0 as usize])
            .unwrap_or(self.base_shift())
    }

    /// A walk of a guest (two-dimensional) or by a software refill handler, priced by the
    /// walker, into `trip`. Out of line: the native hardware walk is `walk_miss`'s own.
    #[cold]
    #[inline(never)]
    fn walk_priced(
        &mut self,
        pid: Pid,
        va: u64,
        leaf: u8,
        path: &crate::hw::walk::PtPath,
        found: &Walked,
        mut trip: Trip,
    ) -> Trip {
        let bs = self.base_shift();
        let w = if self.hw.walker.is_nested() {
            let data_gpa = match *found {
                Walked::Mapped { head, .. } => {
                    Some((head.pfn().0 << bs) + (va & ((1u64 << leaf) - 1)))
                }
                _ => None,
            };
            self.walk_2d(pid, va, leaf, path, data_gpa)
        } else {
            self.hw
                .walker
                .walk(pid.0, va, leaf, path, &mut self.hw.caches)
        };
        self.acc.walk_refs += w.refs as u64;
        for k in 0..4 {
            trip.walk_by_level[k] += w.by_level[k];
        }
        if self.hw.walker.is_software() {
            trip.refill_cycles += w.handler;
        } else {
            trip.walk_fixed += w.fixed;
            trip.walked = true;
        }
        trip
    }

    /// A guest's walk: two-dimensional, and a mapping found needs the host's translation of the
    /// data's guest-physical address `data_gpa` too. Out of line, so that the native miss path
    /// around it stays as it was.
    #[cold]
    #[inline(never)]
    fn walk_2d(
        &mut self,
        pid: Pid,
        va: u64,
        leaf: u8,
        path: &crate::hw::walk::PtPath,
        data_gpa: Option<u64>,
    ) -> crate::hw::walk::WalkCost {
        self.hw
            .walker
            .walk_nested(pid.0, va, leaf, path, data_gpa, &mut self.hw.caches)
    }

    /// A guest page larger than the host's (nested paging), as the TLB holds it: the host page
    /// of it that holds `va` (Bhargava et al. ASPLOS'08: a TLB entry maps the smaller of the
    /// guest and host pages, so a guest superpage on smaller host pages is splintered, saving
    /// guest walk levels but no TLB reach). Its frame is that piece's first.
    #[cold]
    #[inline(never)]
    fn splinter(&self, va: u64, t: Translation) -> Translation {
        let bs = self.base_shift();
        let guest = self.orders[t.size.0 as usize];
        let host = self.orders[self.host_class as usize];
        let vpn = va >> bs;
        let offset = (vpn & ((1u64 << guest) - 1)) >> host << host;
        Translation {
            pfn: Pfn(t.pfn.0 + offset),
            size: crate::units::SizeClass(self.host_class),
            ..t
        }
    }

    /// The access is translated by `t`: its data reference and timing.
    #[inline(always)]
    fn finish_access(&mut self, a: &Access, t: &Translation, trip: &mut Trip) {
        let pa = self.translated(a, t);
        self.data(a, pa, trip);
    }

    /// The access is translated by `t`: the MRU record and the dirty and filled tracking;
    /// returns the address the caches see for its data (`finish_access` makes the reference).
    #[inline(always)]
    fn translated(&mut self, a: &Access, t: &Translation) -> u64 {
        let shift = self.shift_of(t.size);
        let pa = (t.pfn.0 << self.base_shift()) + (a.va & ((1u64 << shift) - 1));
        if a.op != MemOp::Ifetch {
            self.note_last(a.va, t, shift);
            if self.dirty.track {
                // dirty=hash: the write changes the page's contents (vm/dirty.rs).
                self.track_access(a.op.kind() == AccessKind::Write, pa);
            }
            if self.thp.split.track_filled && a.op.kind() == AccessKind::Write {
                // The underused THP check (vm/deferred_split.rs): the page is no longer zero.
                self.note_filled(pa >> self.base_shift());
            }
        }
        // The caches are indexed by host-physical address.
        self.host_addr(pa)
    }

    /// The page-fault handler: resolves a fault on `va` or reports a segmentation fault.
    fn fault(&mut self, pid: Pid, va: u64, kind: AccessKind) -> Result<()> {
        // Pages an earlier fault held busy are free for the page daemon again.
        self.pageq.unbusy_all();
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
        // A write through an entry sharing its object since fork (vm/fork.rs).
        let v = if write && v.needs_copy {
            self.needs_copy_write(pid, v)
        } else {
            v
        };
        // Direct compaction's cycles of a write to the huge zero page that got no THP.
        let mut zero_stall = 0;
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
                let writes = self.machine.superpage_entry_writes(1 << order);
                self.finish_fault(FaultCost {
                    cycles: writes * self.machine.cost.pte_write_cycles,
                    io: 0,
                });
                return Ok(());
            }
            if self.is_huge_zero(e.pfn()) {
                // A write to the huge zero page: a new THP, or a split (vm/thp.rs).
                let (done, stall) = self.huge_zero_wp(pid, &v, vpn, pindex)?;
                if let Some(cycles) = done {
                    self.finish_fault(FaultCost {
                        cycles: cycles + stall,
                        io: 0,
                    });
                    return Ok(());
                }
                zero_stall = stall;
            }
            // A write: copy-on-write or write permission for one page of it: demote first.
            self.demote_to_base(pid, va);
            present = self.procs.get(&pid.0).and_then(|p| p.pmap.lookup(vpn));
        }
        let mut cost = match present {
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
        cost.cycles += zero_stall;
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
        // A fault traps: the window drains, then the handler and the I/O wait run serially.
        self.hw.core.serial(c, cause::FAULT);
        self.hw.core.serial(cost.io, cause::IO);
        self.stats.fault_latency.record(c + cost.io);
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
        if self.is_zero_pfn(pfn) {
            // The 4KB zero page (a split huge zero mapping's, vm/thp.rs): mm/memory.c
            // `do_wp_page` -> `wp_page_copy` copies nothing from it: a new zeroed page.
            let mut cost = FaultCost { cycles: 0, io: 0 };
            let new = self.zero_fill(pid, v.obj, pindex, v, &mut cost)?;
            let va = vpn << self.base_shift();
            let p = self.procs.get_mut(&pid.0).expect("fault: pid");
            p.pmap.replace(vpn, new, v.prot);
            p.pmap.touch(vpn, 0, true);
            self.hw.tlb.invalidate_range(pid.0, va, va + 1);
            cost.cycles += self.machine.cost.tlb_invalidate_cycles;
            return Ok(cost);
        }
        // The page stays in use while a copy may allocate (and the page daemon run).
        self.pageq.mark_busy(pfn);
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
        // Entered for a write: dirty (FreeBSD pmap_enter sets PG_M), and the copy may complete
        // a promotable extent of the layer it went to (pmap_enter tries pmap_promote_pde after
        // a copy-on-write as after any entry).
        p.pmap.touch(vpn, 0, true);
        self.hw.tlb.invalidate_range(pid.0, va, va + 1);
        let promo = self.try_promote(pid, v, vpn);
        Ok(FaultCost {
            cycles: copy_cycles + self.machine.cost.tlb_invalidate_cycles + pte_write + promo,
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
        let mut cost = FaultCost { cycles: 0, io: 0 };
        // seed 000 5.1 (1): a cache page whose frame was free is taken back first.
        if let Some(s) = v.shadow {
            self.reactivate_cached(s, pindex)?;
        }
        self.reactivate_cached(v.obj, pindex)?;
        // Event 3 at once: a resident page of a full reservation (vm/softfast.rs).
        if let Some(cycles) = self.soft_fast(pid, v, vpn, pindex, write)? {
            return Ok(FaultCost { cycles, io: 0 });
        }
        // A new anonymous page of the entry's own object: Sync-t may prepare the rest of its
        // reservation (vm/prepare.rs).
        let mut fresh_anon = false;
        // Which object supplies the page, and is it ours to write?
        let (pfn, exclusive) = if let Some(s) = v.shadow {
            if let Some(pfn) = self.obj(s).pages.get(pindex) {
                self.page_reused(pfn);
                (pfn, self.phys.refs(pfn) == 1)
            } else if self.backing.on_swap(s, pindex) {
                // The private copy was paged out: read it back.
                (self.swap_in(pid, s, pindex, v, &mut cost)?, true)
            } else if self.obj(v.obj).kind == ObjKind::Anon {
                // A shadow in front of an object shared since fork (vm/fork.rs): the shared
                // page, copied into the shadow by a write; else a zero page in the shadow
                // (FreeBSD vm_fault zero-fills in the first object of the chain).
                let shared = match self.obj(v.obj).pages.get(pindex) {
                    Some(pfn) => {
                        self.page_reused(pfn);
                        self.pageq.mark_busy(pfn);
                        Some(pfn)
                    }
                    None if self.backing.on_swap(v.obj, pindex) => {
                        Some(self.swap_in(pid, v.obj, pindex, v, &mut cost)?)
                    }
                    None => None,
                };
                match shared {
                    Some(pfn) if !write => (pfn, false),
                    Some(_) => {
                        let new = self.cow_copy(pid, s, pindex, v)?;
                        cost.cycles += self.machine.cost.copy_page_cycles;
                        (new, true)
                    }
                    None => (self.zero_fill(pid, s, pindex, v, &mut cost)?, true),
                }
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
            self.page_reused(pfn);
            self.pageq.mark_busy(pfn);
            if write && v.private() && self.phys.refs(pfn) > 1 {
                let new = self.cow_copy(pid, v.obj, pindex, v)?;
                cost.cycles += self.machine.cost.copy_page_cycles;
                (new, true)
            } else {
                // Through an entry that needs a copy the page is shared with another process
                // (vm/fork.rs): read-only until written.
                (
                    pfn,
                    !v.private() || (self.phys.refs(pfn) == 1 && !v.needs_copy),
                )
            }
        } else if self.backing.on_swap(v.obj, pindex) {
            (
                self.swap_in(pid, v.obj, pindex, v, &mut cost)?,
                !v.needs_copy,
            )
        } else {
            // Linux THP: the whole superpage allocated, zeroed and mapped at once (vm/thp.rs).
            // Direct compaction's cycles (vm/compact.rs) are the fault's, THP or fallback.
            let (thp, stall) = self.thp_fault(pid, v, vpn, pindex, write)?;
            cost.cycles += stall;
            if let Some(cycles) = thp {
                return Ok(FaultCost {
                    cycles: cost.cycles + cycles,
                    io: 0,
                });
            }
            // mTHP sizes below it (vm/mthp.rs).
            if let Some(cycles) = self.mthp_fault(pid, v, vpn, pindex)? {
                return Ok(FaultCost {
                    cycles: cost.cycles + cycles,
                    io: 0,
                });
            }
            // HP-UX: a large page of the hinted size at the fault (vm/pagesize.rs).
            if let Some(cycles) = self.hint_fault(pid, v, vpn, pindex, write)? {
                return Ok(FaultCost {
                    cycles: cost.cycles + cycles,
                    io: 0,
                });
            }
            // Zero-fill (event 2, preparation: one base page zeroed at fault time). A read
            // through an entry that needs a copy fills the shared object (FreeBSD's first
            // object until a write shadows it), read-only.
            fresh_anon = true;
            (
                self.zero_fill(pid, v.obj, pindex, v, &mut cost)?,
                !v.needs_copy,
            )
        };
        let prot = if exclusive || !v.prot.writable() {
            v.prot
        } else {
            Prot(v.prot.0 & !Prot::WRITE.0)
        };
        if fresh_anon {
            // Event 2 past the threshold (seed 003 5.1, Sync-t), and with relaxed mapping
            // event 3 at once: the fault is done if the superpage is mapped.
            let (cycles, mapped) = self.sync_prepare(pid, v, vpn, pfn, prot, write)?;
            cost.cycles += cycles;
            if mapped {
                return Ok(cost);
            }
        }
        self.pmap_enter(pid, vpn, pfn, prot)?;
        let p = self.procs.get_mut(&pid.0).expect("fault: pid");
        if write && prot.writable() {
            // The faulting write dirties the page as it is entered (FreeBSD pmap_enter sets
            // PG_M for a write fault; the retried access would set it anyway).
            p.pmap.touch(vpn, 0, true);
        }
        cost.cycles += self.machine.cost.pte_write_cycles;
        // Event 3, mapping creation: the resident neighbours (fault-around / prefault), then
        // promotion if the page completed a superpage-sized extent.
        cost.cycles += self.fault_around(pid, v, vpn, write);
        cost.cycles += self.try_promote(pid, v, vpn);
        Ok(cost)
    }

    /// Event 2, preparation: a new page `pindex` of `obj`, one base page zeroed at fault time
    /// (FreeBSD vm_fault zero-fills in the first object of the chain), counted, its cycles
    /// added to `cost`.
    fn zero_fill(
        &mut self,
        pid: Pid,
        obj: ObjId,
        pindex: u64,
        v: &Vma,
        cost: &mut FaultCost,
    ) -> Result<Pfn> {
        let pfn = self.alloc_frame(pid, obj, pindex, v)?;
        self.obj_insert(obj, pindex, pfn);
        self.stats.faults.zero_fill += 1;
        self.stats.zeroed_bytes += self.machine.base_size();
        cost.cycles += self.machine.cost.zero_page_cycles;
        Ok(pfn)
    }

    /// The page `pindex` of file object `obj`: from the page cache, else read from storage into
    /// it (a cold cache), or supplied by a warm cache without I/O.
    fn file_page(
        &mut self,
        pid: Pid,
        obj: ObjId,
        pindex: u64,
        v: &Vma,
        cost: &mut FaultCost,
    ) -> Result<Pfn> {
        self.reactivate_cached(obj, pindex)?;
        if let Some(pfn) = self.obj(obj).pages.get(pindex) {
            self.page_reused(pfn);
            self.pageq.mark_busy(pfn);
            return Ok(pfn);
        }
        // A page the page daemon evicted is read again, warm cache or not; a cold cache reads
        // the file's data at first use. With its read-behind and read-ahead (vm/file.rs).
        if self.page_needs_io(obj, pindex) {
            let va = v.start + ((pindex - v.pgoff) << self.base_shift());
            cost.io += self.fault_readahead(pid, obj, pindex, va, v)?;
            return Ok(self.obj(obj).pages.get(pindex).expect("file_page: read"));
        }
        let pfn = self.alloc_frame(pid, obj, pindex, v)?;
        self.obj_insert(obj, pindex, pfn);
        // A clean page: its digest under dirty=hash (seed 000 4.7; vm/dirty.rs). Pages read
        // from storage get theirs in vm/file.rs `cache_insert`.
        cost.cycles += self.digest_clean(pfn);
        Ok(pfn)
    }

    /// One base page read from the storage device into a fault's cost (a major fault).
    fn read_page(&mut self, cost: &mut FaultCost) {
        let base = self.machine.base_size();
        self.stats.io_read_bytes += base;
        self.stats.io_read_requests += 1;
        cost.io += self.machine.io_cycles(base);
    }

    /// Anonymous page `pindex` of `obj` is on swap: a frame for it, read back from the swap
    /// device (a major fault). Its swap copy stays, so it is clean until written.
    fn swap_in(
        &mut self,
        pid: Pid,
        obj: ObjId,
        pindex: u64,
        v: &Vma,
        cost: &mut FaultCost,
    ) -> Result<Pfn> {
        let pfn = self.alloc_frame(pid, obj, pindex, v)?;
        self.obj_insert(obj, pindex, pfn);
        self.backing.stats.pageins_swap += 1;
        self.read_page(cost);
        cost.cycles += self.digest_clean(pfn);
        Ok(pfn)
    }

    /// seed 000 4.7: a write trapped on a clean superpage (the Alpha's dirty-bit emulation): the
    /// superpage is demoted incrementally down to the written base page; the retried access
    /// then dirties that page only. Counted as a protection fault.
    // Out of line: rare (only under a policy that traps writes to clean superpages), so
    // `access_slow`'s hot code need not carry the demotion.
    #[cold]
    #[inline(never)]
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
