//! The incremental invariant check: after one event, the invariants of `Os::check_invariants`
//! restricted to what that event touched. Called by the engine under `--check` (the default
//! `incremental` mode), which runs the full check every `engine::FULL_CHECK_EVERY` events, after
//! any event that may have changed state anywhere (fork, a daemon), and at the end.
//!
//! Why: the full check walks every frame, cache set and reservation of the machine, O(memory):
//! 18ms per event on a 32GB machine, so `--check` on a 65,536-page scan took over an hour. What
//! one event can break is what it touched, which the engine and the buddy allocator record:
//! - the address ranges of the processes it named (`Touched`);
//! - the frames whose state changed: buddy blocks handed out or freed and frames whose hold
//!   count changed (`Buddy::take_touched`), and through them the reservations owning them.
//!
//! What it checks, per event: the buddy counters (O(orders)); around each touched frame, its
//! free block's alignment, links and coalescing, that a free frame is held by no object and
//! owned by no reservation, and that a reserved frame's slot agrees with its object; each touched
//! reservation's own counters, list and population-map node; each touched process's map entries;
//! every mapping in the touched ranges (superpage runs, backing frame, permission); and the TLB
//! entries that overlap the touched ranges against the page tables (any other entry only needs a
//! live process). What it leaves to the full check at the
//! stride: the caches (their sets are not recorded), page-table pages, object reference counts,
//! per-frame hold counts against the objects' page maps, population-map recounts, and the
//! global frame accounting.

use rustc_hash::FxHashSet;

use super::pmap::{Pmap, Pte};
use super::{Os, Process, Vma};
use crate::error::{Result, SimError};
use crate::hw::Translation;
use crate::units::{Order, Pfn, Pid};

/// What one event touched, as the engine saw it.
#[derive(Clone, Debug, Default)]
pub struct Touched {
    /// Half-open virtual address ranges `[start, end)` of processes.
    pub ranges: Vec<(Pid, u64, u64)>,
    /// The event may have changed state anywhere (fork, a daemon): only the full check will do.
    pub everything: bool,
}

impl Touched {
    pub fn clear(&mut self) {
        self.ranges.clear();
        self.everything = false;
    }
}

/// Above this many pages a range's mappings are found by visiting the page table's chunks
/// rather than looking each page up.
const LOOKUP_PAGES: u64 = 4096;

impl Os {
    /// Checks the invariants around what one event touched: the ranges in `t` and the blocks
    /// in `frames` (from `Buddy::take_touched`). Contract: every violation it reports is one
    /// `check_invariants` reports too; it misses what lies outside the touched state.
    pub fn check_touched(&self, t: &Touched, frames: &[(Pfn, Order)]) -> Result<()> {
        let inv = SimError::Invariant;
        let f = &self.phys;
        f.buddy.check_counters().map_err(inv)?;
        let mut blocks = frames.to_vec();
        blocks.sort_unstable_by_key(|&(p, o)| (p.0, o.0));
        blocks.dedup();
        let mut resvs: Vec<u32> = Vec::new();
        for &(pfn, order) in &blocks {
            let end = (pfn.0 + order.pages()).min(f.frames());
            let mut g = pfn.0;
            while g < end {
                match f.buddy.check_frame(Pfn(g)).map_err(inv)? {
                    Some((head, o)) => {
                        let stop = (head.0 + o.pages()).min(end);
                        for h in g..stop {
                            crate::ensure_inv!(
                                f.refs(Pfn(h)) == 0,
                                "phys: frame {h} is both free and held by an object"
                            );
                            if let Some(rs) = &self.reserv {
                                crate::ensure_inv!(
                                    rs.of_frame(Pfn(h)).is_none(),
                                    "reservation {}: frame {h} is free",
                                    rs.of_frame(Pfn(h)).unwrap_or(0)
                                );
                            }
                        }
                        g = stop;
                    }
                    None => {
                        if let Some(id) = self.reserv.as_ref().and_then(|rs| rs.of_frame(Pfn(g))) {
                            self.check_reserved_frame(id, Pfn(g))?;
                            if resvs.last() != Some(&id) {
                                resvs.push(id);
                            }
                        }
                        g += 1;
                    }
                }
            }
        }
        crate::ensure_inv!(
            f.buddy.free_frames + f.wired_frames + f.used_frames <= f.frames(),
            "frames: {} free + {} wired + {} in use exceed memory ({})",
            f.buddy.free_frames,
            f.wired_frames,
            f.used_frames,
            f.frames()
        );
        resvs.sort_unstable();
        resvs.dedup();
        for id in resvs {
            self.check_reservation_node(id)?;
        }
        let bs = self.base_shift();
        let mut procs_seen = FxHashSet::default();
        for &(pid, start, end) in &t.ranges {
            let Some(p) = self.procs.get(&pid.0) else {
                continue; // exited: the TLB check below finds any entry left behind
            };
            if procs_seen.insert(pid.0) {
                self.check_map_entries(p)?;
            }
            let (first, last) = (
                start >> bs,
                end.div_ceil(1 << bs).max(first_plus(start >> bs)),
            );
            if last - first <= LOOKUP_PAGES {
                for vpn in first..last {
                    if let Some(pte) = p.pmap.lookup(vpn) {
                        self.check_mapping(p, vpn, pte)?;
                    }
                }
            } else {
                for (vpn, pte) in p.pmap.entries_in(first, last) {
                    self.check_mapping(p, vpn, pte)?;
                }
            }
        }
        self.check_tlb_touched(&t.ranges)
    }

    /// The TLB's structure, and its entries for the touched ranges against the page tables
    /// (`check_tlb_entries` restricted: an entry elsewhere needs only a live process).
    fn check_tlb_touched(&self, ranges: &[(Pid, u64, u64)]) -> Result<()> {
        let mut rs: Vec<(u32, u64, u64)> = ranges.iter().map(|&(p, s, e)| (p.0, s, e)).collect();
        rs.sort_unstable();
        let mut merged: Vec<(u32, u64, u64)> = Vec::with_capacity(rs.len());
        for r in rs {
            match merged.last_mut() {
                Some(m) if m.0 == r.0 && r.1 <= m.2 => m.2 = m.2.max(r.2),
                _ => merged.push(r),
            }
        }
        let bs = self.base_shift();
        let mut proc_of: Option<(u32, &Process)> = None;
        for (asid, va, t) in self.hw.tlb.entries() {
            let p = match proc_of {
                Some((a, p)) if a == asid => p,
                _ => {
                    let p = self.procs.get(&asid).ok_or_else(|| {
                        SimError::Invariant(format!("TLB entry for {va:#x} of dead pid {asid}"))
                    })?;
                    proc_of = Some((asid, p));
                    p
                }
            };
            let size = 1u64 << self.machine.page_shifts[t.size.0 as usize];
            let i = merged.partition_point(|m| (m.0, m.2) <= (asid, va));
            if i == merged.len() || merged[i].0 != asid || merged[i].1 >= va.saturating_add(size) {
                continue;
            }
            check_tlb_entry(p, asid, va, &t, bs, self.host_class)?;
        }
        Ok(())
    }

    /// Reservation `id`'s slot for frame `pfn` agrees with its object and the frame's holds.
    fn check_reserved_frame(&self, id: u32, pfn: Pfn) -> Result<()> {
        let Some(rs) = &self.reserv else {
            return Ok(());
        };
        rs.check_one(id).map_err(SimError::Invariant)?;
        let r = rs.get(id);
        let o = self.resv_object(id, r)?;
        self.check_reserved_slot(id, r, o, pfn.0 - r.pfn.0)?;
        Ok(())
    }

    /// Reservation `id`'s object exists and its population map points to it.
    fn check_reservation_node(&self, id: u32) -> Result<()> {
        let Some(rs) = &self.reserv else {
            return Ok(());
        };
        let r = rs.get(id);
        let pm = self
            .objects
            .get(r.obj.0 as usize)
            .and_then(|o| o.as_ref())
            .and_then(|o| o.popmap.as_ref());
        crate::ensure_inv!(
            pm.and_then(|pm| pm.node(r.class as usize, r.cbase))
                .map(|n| n.resv)
                == Some(id),
            "reservation {id}: population map does not point to it"
        );
        Ok(())
    }

    /// A process's map entries are page-aligned, non-empty, disjoint and keyed by their start.
    pub(crate) fn check_map_entries(&self, p: &Process) -> Result<()> {
        let bs = self.base_shift();
        let mut prev_end = 0;
        for (&s, v) in &p.vmas {
            crate::ensure_inv!(
                s == v.start && v.start < v.end && v.start >= prev_end,
                "pid {}: map entries overlap or are empty at {s:#x}",
                p.pid.0
            );
            crate::ensure_inv!(
                v.start % (1 << bs) == 0 && v.end % (1 << bs) == 0,
                "pid {}: map entry {s:#x} not page aligned",
                p.pid.0
            );
            prev_end = v.end;
        }
        Ok(())
    }

    /// A mapping of a zero page (vm/thp.rs): the huge zero page by a THP-sized entry, the 4KB
    /// one by a base entry; read-only, in a private entry whose object has no page there (a
    /// page hidden under it would be lost), and the frames allocated (never freed while
    /// mapped) and held by no object.
    /// `backing` is the object page at the entry's place (check_mapping looked it up).
    fn check_zero_mapping(
        &self,
        p: &Process,
        v: &Vma,
        va: u64,
        backing: Option<Pfn>,
        pte: Pte,
    ) -> Result<()> {
        let z = self.thp.zero.expect("a zero frame is one once allocated");
        let huge = self.is_huge_zero(pte.pfn());
        let size_ok = if huge {
            self.orders[pte.size().0 as usize] == z.order
        } else {
            pte.size().is_base()
        };
        crate::ensure_inv!(
            size_ok,
            "pid {}: page {va:#x} maps the {} zero page by an entry of size class {}",
            p.pid.0,
            if huge { "huge" } else { "4KB" },
            pte.size().0
        );
        crate::ensure_inv!(
            !pte.prot().writable() && v.private(),
            "pid {}: page {va:#x} maps a zero page writable ({}) or in a shared entry",
            p.pid.0,
            pte.prot()
        );
        crate::ensure_inv!(
            backing.is_none(),
            "pid {}: page {va:#x} maps a zero page over object page {:?}",
            p.pid.0,
            backing
        );
        crate::ensure_inv!(
            self.phys.refs(pte.pfn()) == 0 && !self.phys.buddy.is_free(pte.pfn()),
            "pid {}: page {va:#x} maps zero frame {}, which is free or held by an object",
            p.pid.0,
            pte.pfn().0
        );
        Ok(())
    }

    /// One page-table entry: part of a well-formed superpage run if large, inside a map entry,
    /// backed by its object's frame (held, not free), with no more permission than the entry.
    pub(crate) fn check_mapping(&self, p: &Process, vpn: u64, pte: Pte) -> Result<()> {
        let bs = self.base_shift();
        let va = vpn << bs;
        let c = pte.size().0 as usize;
        crate::ensure_inv!(
            c < self.orders.len(),
            "pid {}: pmap: vpn {vpn:#x} has size class {c}, machine has {}",
            p.pid.0,
            self.orders.len()
        );
        if c > 0 {
            let o = self.orders[c];
            let head = Pmap::head_of(vpn, o);
            let hp = p.pmap.lookup(head).ok_or_else(|| {
                SimError::Invariant(format!(
                    "pid {}: pmap: superpage at {vpn:#x} has no head entry",
                    p.pid.0
                ))
            })?;
            crate::ensure_inv!(
                hp.size() == pte.size() && hp.prot() == pte.prot(),
                "pid {}: pmap: superpage at {head:#x} has entries of mixed size or protection",
                p.pid.0
            );
            crate::ensure_inv!(
                hp.pfn().is_aligned(Order(o)) && pte.pfn().0 == hp.pfn().0 + (vpn - head),
                "pid {}: pmap: superpage at {head:#x} maps non-contiguous or misaligned frames",
                p.pid.0
            );
        }
        let v = p.vma_at(va).ok_or_else(|| {
            SimError::Invariant(format!(
                "pid {}: page {va:#x} mapped outside any map entry",
                p.pid.0
            ))
        })?;
        let pi = v.pgoff + ((va - v.start) >> bs);
        crate::ensure_inv!(
            pte.prot().0 & !v.prot.0 == 0,
            "pid {}: page {va:#x} has more permission ({}) than its map entry ({})",
            p.pid.0,
            pte.prot(),
            v.prot
        );
        let own = v.shadow.and_then(|s| self.obj(s).pages.get(pi));
        let backing = own.or_else(|| self.obj(v.obj).pages.get(pi));
        // Copy-on-write (vm/fork.rs): a private page of the object under a shadow, or of one a
        // needs-copy entry shares with another, is mapped read-only; a write copies it.
        crate::ensure_inv!(
            !pte.prot().writable()
                || !v.private()
                || own.is_some()
                || !(v.shadow.is_some() || (v.needs_copy && self.obj(v.obj).refs > 1)),
            "pid {}: page {va:#x} is writable but its object is shared copy-on-write",
            p.pid.0
        );
        if self.is_huge_zero(pte.pfn()) || self.is_zero_pfn(pte.pfn()) {
            return self.check_zero_mapping(p, v, va, backing, pte);
        }
        crate::ensure_inv!(
            backing == Some(pte.pfn()),
            "pid {}: page {va:#x} maps frame {} but its object holds {:?}",
            p.pid.0,
            pte.pfn().0,
            backing
        );
        crate::ensure_inv!(
            self.phys.refs(pte.pfn()) > 0 && !self.phys.buddy.is_free(pte.pfn()),
            "pid {}: page {va:#x} maps frame {}, which is free or held by no object",
            p.pid.0,
            pte.pfn().0
        );
        Ok(())
    }

    /// The compaction state is consistent: scanner positions inside memory, deferral within
    /// its bounds, no kcompactd request without kcompactd.
    pub(crate) fn check_compaction(&self) -> std::result::Result<(), String> {
        let z = &self.compact;
        let frames = self.phys.frames();
        if z.cached_migrate
            .iter()
            .any(|&p| p > frames + (1u64 << self.hpage_order()))
        {
            return Err(format!(
                "compaction: cached migrate scanner {:?} beyond memory",
                z.cached_migrate
            ));
        }
        if z.cached_free != u64::MAX && z.cached_free >= frames {
            return Err(format!(
                "compaction: cached free scanner {} beyond memory",
                z.cached_free
            ));
        }
        if z.defer_shift > super::compact::COMPACT_MAX_DEFER_SHIFT
            || z.considered > 1u64 << z.defer_shift
        {
            return Err(format!(
                "compaction: deferral {} of {} beyond its limit",
                z.considered, z.defer_shift
            ));
        }
        if self.policy.kcompactd.is_none() && (z.kcompactd_order > 0 || z.kcompactd_woken) {
            return Err("compaction: a kcompactd request without kcompactd".into());
        }
        // Skip bits (vm/compact_skip.rs): none without them, none beyond memory, and the
        // counters agree with the bits set.
        let marked = z.skip.count();
        let blocks = frames.div_ceil(1u64 << self.hpage_order());
        let s = &z.stats.pageblock_skip;
        if self.policy.pageblock_skip == crate::policy::PageblockSkip::Off
            && (marked > 0 || z.skip.blockskip_flush)
        {
            return Err(format!(
                "compaction: {marked} skip bits with pageblock_skip=off"
            ));
        }
        if marked > blocks || marked != s.migrate_marked + s.free_marked - s.cleared {
            return Err(format!(
                "compaction: {marked} skip bits set of {blocks} pageblocks, counters {s:?}"
            ));
        }
        Ok(())
    }

    /// TLB entries never translate what the page table does not.
    pub(crate) fn check_tlb_entries(&self) -> Result<()> {
        let bs = self.base_shift();
        for (asid, va, t) in self.hw.tlb.entries() {
            let p = self.procs.get(&asid).ok_or_else(|| {
                SimError::Invariant(format!("TLB entry for {va:#x} of dead pid {asid}"))
            })?;
            check_tlb_entry(p, asid, va, &t, bs, self.host_class)?;
        }
        Ok(())
    }
}

/// One TLB entry of process `p` against its page table: mapped there, at the same size and
/// frame, and writable only if the page table allows writes. On a guest machine an entry holds
/// at most the host's page (`host_class`; `u8::MAX` native): a larger guest page's entries are
/// pieces of it, each the frame of its own first page (`Os::splinter`).
fn check_tlb_entry(
    p: &Process,
    asid: u32,
    va: u64,
    t: &Translation,
    bs: u8,
    host_class: u8,
) -> Result<()> {
    let pte = p.pmap.lookup(va >> bs).ok_or_else(|| {
        SimError::Invariant(format!(
            "TLB translates {va:#x} of pid {asid}, the page table does not"
        ))
    })?;
    crate::ensure_inv!(
        pte.size().0.min(host_class) == t.size.0 && pte.pfn() == t.pfn,
        "TLB entry for {va:#x} of pid {asid} disagrees with the page table"
    );
    crate::ensure_inv!(
        !t.writable || pte.prot().writable(),
        "TLB entry for {va:#x} of pid {asid} allows writes the page table does not"
    );
    Ok(())
}

/// At least one page: an empty range still names the page it starts in.
fn first_plus(vpn: u64) -> u64 {
    vpn.saturating_add(1)
}

#[cfg(test)]
mod tests {
    //! Does the incremental check catch corruption of what an event touched at that event, and
    //! corruption elsewhere at the next full check? Each test breaks one invariant the way a
    //! bug would (through the model's own calls where it can) and looks for the report.

    use crate::engine::{CheckMode, Engine, FULL_CHECK_EVERY};
    use crate::hw::Machine;
    use crate::policy::Policy;
    use crate::units::{AccessKind, Pfn, Pid, Prot};
    use crate::vm::MmapReq;
    use crate::SimError;

    fn engine(policy: &str) -> (Engine, Pid, u64) {
        let m = Machine::from_spec("skylake:mem=1G").unwrap();
        let mut p = Policy::from_spec(policy).unwrap();
        p.resolve(&m).unwrap();
        let mut e = Engine::new(m, p, CheckMode::Incremental, None);
        let pid = e.spawn().unwrap();
        let base = e.mmap(pid, MmapReq::anon(8 << 20)).unwrap();
        (e, pid, base)
    }

    /// The error of `r`, which must be an invariant violation mentioning `what`.
    fn expect_violation(r: crate::Result<()>, what: &str) -> String {
        match r {
            Err(SimError::Invariant(m)) => {
                assert!(m.contains(what), "expected '{what}', got: {m}");
                m
            }
            other => panic!("expected an invariant violation '{what}', got {other:?}"),
        }
    }

    #[test]
    fn clean_runs_pass_and_full_checks_come_at_the_stride() {
        for policy in ["base", "navarro", "freebsd"] {
            let (mut e, pid, base) = engine(policy);
            for i in 0..2 * FULL_CHECK_EVERY {
                let va = base + (i * 4096 * 7) % (8 << 20);
                e.access(pid, va, AccessKind::Write).unwrap();
            }
            e.munmap(pid, base, 4 << 20).unwrap();
            e.exit(pid).unwrap();
            e.final_check().unwrap();
            // Two at the stride and the final one: the rest were incremental.
            assert_eq!(e.full_checks, 3, "{policy}");
        }
    }

    #[test]
    fn extra_permission_on_a_touched_page_is_caught_at_once() {
        let (mut e, pid, base) = engine("base");
        e.access(pid, base, AccessKind::Write).unwrap();
        e.mprotect(pid, base, 4096, Prot::READ).unwrap();
        let full = e.full_checks;
        let p = e.os.procs.get_mut(&pid.0).unwrap();
        p.pmap.set_prot(base >> 12, Prot::RW);
        let r = e.access(pid, base, AccessKind::Read);
        let m = expect_violation(r, "more permission");
        assert!(m.starts_with("after event "), "{m}");
        assert_eq!(e.full_checks, full, "caught by the incremental check");
    }

    #[test]
    fn a_wrong_frame_in_a_touched_page_is_caught_at_once() {
        let (mut e, pid, base) = engine("navarro");
        e.access(pid, base, AccessKind::Write).unwrap();
        e.access(pid, base + 4096, AccessKind::Write).unwrap();
        let other = e.os.procs[&pid.0]
            .pmap
            .lookup((base >> 12) + 1)
            .unwrap()
            .pfn();
        let p = e.os.procs.get_mut(&pid.0).unwrap();
        p.pmap.replace(base >> 12, other, Prot::RW);
        expect_violation(e.access(pid, base, AccessKind::Read), "its object holds");
    }

    #[test]
    fn a_stale_tlb_entry_for_a_touched_page_is_caught_at_once() {
        let (mut e, pid, base) = engine("base");
        e.access(pid, base, AccessKind::Write).unwrap();
        let mut t =
            e.os.hw
                .tlb
                .entries()
                .into_iter()
                .find(|&(a, va, _)| a == pid.0 && va == base)
                .expect("the access filled the TLB")
                .2;
        t.pfn = Pfn(t.pfn.0 + 1);
        e.os.hw.tlb.invalidate_range(pid.0, base, base + 4096);
        e.os.hw.tlb.fill(pid.0, base, t, false);
        expect_violation(
            e.access(pid, base + 8, AccessKind::Read),
            "disagrees with the page table",
        );
    }

    #[test]
    fn a_free_frame_held_by_an_object_is_caught_at_once() {
        let (mut e, pid, base) = engine("base");
        e.access(pid, base, AccessKind::Write).unwrap();
        let free = e.os.phys.buddy.alloc(crate::units::Order(0)).unwrap();
        e.os.phys.buddy.free(free, crate::units::Order(0));
        e.os.phys.hold(free); // a bug: holds a frame the allocator still has
        expect_violation(e.access(pid, base, AccessKind::Read), "both free and held");
    }

    #[test]
    fn a_broken_free_list_link_at_a_touched_block_is_caught_at_once() {
        let (mut e, pid, base) = engine("base");
        e.access(pid, base, AccessKind::Write).unwrap();
        // A bug frees a frame and breaks the back link of the block it lands in.
        let pfn = e.os.phys.buddy.alloc(crate::units::Order(0)).unwrap();
        e.os.phys.buddy.free(pfn, crate::units::Order(0));
        let (h, _) = e.os.phys.buddy.free_block_of(pfn).unwrap();
        e.os.phys.buddy.corrupt_prev(h, Pfn(h.0 ^ 1));
        expect_violation(e.access(pid, base + 4096, AccessKind::Read), "buddy");
    }

    #[test]
    fn corruption_of_untouched_state_is_caught_by_the_next_full_check() {
        let (mut e, pid, base) = engine("base");
        e.access(pid, base, AccessKind::Write).unwrap();
        e.mprotect(pid, base, 4096, Prot::READ).unwrap();
        let p = e.os.procs.get_mut(&pid.0).unwrap();
        p.pmap.set_prot(base >> 12, Prot::RW);
        // Events elsewhere do not see it ...
        let far = base + (4 << 20);
        let mut caught = None;
        for _ in 0..FULL_CHECK_EVERY {
            if let Err(err) = e.access(pid, far, AccessKind::Write) {
                caught = Some(err);
                break;
            }
        }
        // ... until the full check at the stride.
        let m = expect_violation(caught.map_or(Ok(()), Err), "more permission");
        assert_eq!(e.events % FULL_CHECK_EVERY, 0, "{m}");
    }
}
