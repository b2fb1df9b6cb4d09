//! mremap: resize a mapping in place, or move it with its pages (Linux `mm/mremap.c`).
//!
//! Who calls it: the trace replayer (`workload/trace.rs`), through `Engine::mremap`; real
//! programs reach it through glibc's `realloc` of large (mmapped) blocks.
//!
//! What it models, following Linux:
//! - **Shrink** (`new_len < old_len`): the tail is unmapped, as `munmap` does.
//! - **Grow in place** (`new_addr == old_addr`): the last map entry of the range is extended when
//!   nothing else can reach the object pages it gains (an anonymous object referenced by that
//!   entry alone, or a file whose private shadow only it uses); otherwise the tail is a new map
//!   entry of the same kind (same protection and flags; the following file pages for a file
//!   mapping). Either way the tail is "like fresh memory of the same mapping".
//! - **Move** (`new_addr != old_addr`): each map entry of the range moves to the new address
//!   *with its object and page offset* (the object keeps its pages; no copy, no fault later),
//!   and its page-table entries move with it (`move_page_tables`): removed at the old address
//!   (with the TLB shootdown) without releasing the pages, and entered at the new one with the
//!   same frames, protection (so copy-on-write state survives), accessed and dirty bits. A
//!   superpage mapping stays a superpage when the move keeps it aligned and it lies wholly in
//!   the range (Linux's `move_huge_pmd`); otherwise it is re-entered as base pages and counted
//!   as a demotion. Whatever was mapped at the destination is unmapped first (MREMAP_FIXED).
//!
//! Every invariant of `Os::check_invariants` holds after each case (tests below, and the
//! replay tests run with `--check`).

use super::{MapFlags, MmapReq, ObjKind, Os, Pmap, Pte};
use crate::error::{Result, SimError};
use crate::units::{Pid, SizeClass};

impl Os {
    /// mremap: `[old_addr, old_addr + old_len)` of `pid` now lies at `new_addr` with `new_len`
    /// bytes (both lengths rounded up to base pages), contents kept. Returns `new_addr`.
    /// Overlapping source and destination ranges are accepted (Linux refuses them; a trace
    /// never has them).
    pub fn mremap(
        &mut self,
        pid: Pid,
        old_addr: u64,
        old_len: u64,
        new_addr: u64,
        new_len: u64,
    ) -> Result<u64> {
        if old_len == 0 {
            return Err(SimError::InvalidEvent(format!(
                "mremap: old length 0 at {old_addr:#x} (duplicating a shared mapping is not modelled)"
            )));
        }
        let (old_start, old_end) = self.check_range("mremap", old_addr, old_len)?;
        let (new_start, new_end) = self.check_range("mremap", new_addr, new_len)?;
        self.proc(pid)?;
        let old_size = old_end - old_start;
        let new_size = new_end - new_start;
        if new_start == old_start {
            if new_end < old_end {
                self.munmap(pid, new_end, old_end - new_end)?;
            } else if new_end > old_end {
                self.mremap_grow(pid, old_end, new_end)?;
            }
            return Ok(new_start);
        }
        let keep = old_size.min(new_size);
        if old_size > keep {
            self.munmap(pid, old_start + keep, old_size - keep)?;
        }
        self.mremap_move(pid, old_start, old_start + keep, new_start)?;
        if new_size > keep {
            self.mremap_grow(pid, new_start + keep, new_end)?;
        }
        Ok(new_start)
    }

    /// Moves the map entries of `[start, end)` and their page-table entries to `dst`.
    fn mremap_move(&mut self, pid: Pid, start: u64, end: u64, dst: u64) -> Result<()> {
        let shift = self.base_shift();
        let (svpn, evpn) = (start >> shift, end >> shift);
        let delta = (dst >> shift).wrapping_sub(svpn);
        // 1. Split the entries at the range's ends (which demotes superpages straddling them),
        //    then note the page-table entries to move.
        let starts = self.isolate(pid, start, end)?;
        let ptes: Vec<(u64, Pte)> = {
            // Only the page-table chunks that exist (a sparse mapping costs its resident pages).
            self.proc(pid)?.pmap.entries_in(svpn, evpn)
        };
        // 2. Detach the map entries: page-table entries and TLB entries go, pages stay with the
        //    objects (the entries keep their object references: they are moved, not dropped).
        let mut moved = Vec::new();
        for vs in starts {
            self.unmap_range(pid, vs, false)?;
            let v = self.proc_mut(pid)?.vmas.remove(&vs).expect("mremap: vma");
            moved.push(v);
        }
        // 3. Clear the destination (MREMAP_FIXED unmaps whatever is there).
        self.munmap(pid, dst, end - start)?;
        // 4. Re-insert the entries at the new address, same object and page offset.
        let p = self.proc_mut(pid)?;
        for mut v in moved {
            v.start = v.start - start + dst;
            v.end = v.end - start + dst;
            p.vmas.insert(v.start, v);
        }
        // 5. Move the page-table entries. The pages are unmapped until then: busy, so that a
        //    page-table allocation that runs the page daemon cannot evict them.
        for &(_, pte) in &ptes {
            self.pageq.mark_busy(pte.pfn());
        }
        let mut promote = Vec::new();
        let mut broken = vec![0u64; self.orders.len()];
        let orders = self.orders.clone();
        // A superpage keeps one accessed and one dirty bit, in its head entry: every base page
        // of it inherits them (seed 000 4.7), whether it is re-promoted or comes back as base
        // pages.
        let mut head_bits = rustc_hash::FxHashMap::default();
        for &(vpn, pte) in &ptes {
            let c = pte.size().0 as usize;
            if c > 0 && vpn == Pmap::head_of(vpn, orders[c]) {
                head_bits.insert(vpn, (pte.accessed(), pte.dirty()));
            }
        }
        for &(vpn, pte) in &ptes {
            let nv = vpn.wrapping_add(delta);
            let c = pte.size().0 as usize;
            // A huge zero mapping that cannot move whole is split (mm/mremap.c
            // `move_page_tables` -> `split_huge_pmd` -> `__split_huge_zero_page_pmd`): its base
            // pages map the 4KB zero page (vm/thp.rs).
            let split_zero =
                c > 0 && delta & ((1u64 << orders[c]) - 1) != 0 && self.is_huge_zero(pte.pfn());
            let pfn = match self.thp.zero {
                Some(z) if split_zero => {
                    if vpn == Pmap::head_of(vpn, orders[c]) {
                        self.thp.stats.zero_page_split += 1;
                    }
                    z.base
                }
                _ => pte.pfn(),
            };
            self.pmap_enter(pid, nv, pfn, pte.prot())?;
            let p = self.procs.get_mut(&pid.0).expect("mremap: pid");
            let c = pte.size().0 as usize;
            let (accessed, dirty) = if c > 0 {
                head_bits
                    .get(&Pmap::head_of(vpn, orders[c]))
                    .copied()
                    .unwrap_or((false, false))
            } else {
                (pte.accessed(), pte.dirty())
            };
            if accessed || dirty {
                p.pmap.touch(nv, 0, dirty);
            }
            let c = pte.size().0 as usize;
            if c > 0 {
                let order = orders[c];
                let head = Pmap::head_of(vpn, order);
                let n = 1u64 << order;
                // (Superpages lie wholly inside the range: `isolate` demoted those across its
                // ends.)
                if vpn == head {
                    if delta & (n - 1) == 0 {
                        promote.push((nv, order, SizeClass(c as u8)));
                    } else {
                        broken[c] += 1;
                    }
                }
            }
        }
        let p = self.procs.get_mut(&pid.0).expect("mremap: pid");
        for (head, order, size) in promote {
            p.pmap.promote(head, order, size);
        }
        for (c, n) in broken.into_iter().enumerate() {
            if let Some(d) = self.stats.demotions.get_mut(c) {
                *d += n;
            }
        }
        self.stats.cycles_kernel += ptes.len() as u64 * self.machine.cost.pte_write_cycles;
        Ok(())
    }

    /// Grows the mapping that ends at `old_end` up to `new_end` (the tail is fresh memory of
    /// the same mapping).
    fn mremap_grow(&mut self, pid: Pid, old_end: u64, new_end: u64) -> Result<()> {
        let shift = self.base_shift();
        // The tail was free in the traced program; anything the model has there goes.
        self.munmap(pid, old_end, new_end - old_end)?;
        let last = self
            .proc(pid)?
            .vmas
            .range(..old_end)
            .next_back()
            .map(|(_, v)| v.clone())
            .filter(|v| v.end == old_end)
            .ok_or_else(|| {
                SimError::InvalidEvent(format!(
                    "mremap: nothing is mapped just below {old_end:#x} in pid {} to grow",
                    pid.0
                ))
            })?;
        let pages = (new_end - last.start) >> shift;
        let need = last.pgoff + pages;
        let file = match self.obj(last.obj).kind {
            ObjKind::File { file } => Some(file),
            ObjKind::Anon => None,
        };
        let alone = match file {
            None => self.obj(last.obj).refs == 1 && last.shadow.is_none(),
            Some(_) => last.shadow.is_none_or(|s| self.obj(s).refs == 1),
        };
        if !alone {
            let tail_pgoff = last.pgoff + ((old_end - last.start) >> shift);
            let req = MmapReq {
                addr: old_end,
                len: new_end - old_end,
                prot: last.prot,
                flags: last.flags.with(MapFlags::FIXED),
                file: file.unwrap_or(0),
                offset: if file.is_some() {
                    tail_pgoff << shift
                } else {
                    0
                },
            };
            self.mmap(pid, req)?;
            return Ok(());
        }
        if let Some(f) = file {
            let bytes = need << shift;
            if self.files.get(&f).is_none_or(|e| e.size < bytes) {
                self.open_file(f, bytes);
            }
        }
        let o = self.obj_mut(last.obj);
        o.size = o.size.max(need);
        if let Some(s) = last.shadow {
            let o = self.obj_mut(s);
            o.size = o.size.max(need);
        }
        self.proc_mut(pid)?
            .vmas
            .get_mut(&last.start)
            .expect("mremap: last vma")
            .end = new_end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Machine;
    use crate::policy::Policy;
    use crate::units::{AccessKind, Prot};

    const PAGE: u64 = 4096;

    fn os() -> Os {
        Os::new(
            Machine::from_spec("skylake:mem=1G").unwrap(),
            Policy::base(),
        )
    }

    fn map(os: &mut Os, pid: Pid, addr: u64, len: u64, prot: Prot, flags: MapFlags) {
        let req = MmapReq {
            addr,
            len,
            prot,
            flags: flags.with(MapFlags::FIXED),
            file: 7,
            offset: 0,
        };
        os.mmap(pid, req).unwrap();
    }

    fn write_all(os: &mut Os, pid: Pid, addr: u64, len: u64) {
        for va in (addr..addr + len).step_by(PAGE as usize) {
            os.access(pid, va, AccessKind::Write).unwrap();
        }
    }

    fn faults(os: &Os) -> u64 {
        os.stats.faults.total
    }

    #[test]
    fn move_keeps_pages_and_ptes() {
        let mut os = os();
        let pid = os.spawn().unwrap();
        let (a, b) = (0x10_0000_0000u64, 0x20_0000_0000u64);
        map(&mut os, pid, a, 64 * PAGE, Prot::RW, MapFlags::ANON);
        write_all(&mut os, pid, a, 64 * PAGE);
        let used = os.phys.used_frames;
        let f = faults(&os);
        assert_eq!(os.mremap(pid, a, 64 * PAGE, b, 64 * PAGE).unwrap(), b);
        os.check_invariants().unwrap();
        assert_eq!(os.phys.used_frames, used, "no page released or copied");
        assert!(os.proc(pid).unwrap().vma_at(a).is_none());
        assert_eq!(
            os.proc(pid)
                .unwrap()
                .pmap
                .count_valid(b >> 12, (b >> 12) + 64),
            64
        );
        write_all(&mut os, pid, b, 64 * PAGE);
        assert_eq!(faults(&os), f, "the moved page-table entries need no fault");
        // The old range is unmapped: touching it is a segmentation fault.
        assert!(os.access(pid, a, AccessKind::Read).is_err());
        os.check_invariants().unwrap();
    }

    #[test]
    fn shrink_grow_in_place_and_move_with_growth() {
        let mut os = os();
        let pid = os.spawn().unwrap();
        let a = 0x10_0000_0000u64;
        map(&mut os, pid, a, 16 * PAGE, Prot::RW, MapFlags::ANON);
        write_all(&mut os, pid, a, 16 * PAGE);
        os.mremap(pid, a, 16 * PAGE, a, 8 * PAGE).unwrap();
        os.check_invariants().unwrap();
        assert_eq!(os.phys.used_frames, 8, "the cut tail's pages are released");
        os.mremap(pid, a, 8 * PAGE, a, 32 * PAGE).unwrap();
        os.check_invariants().unwrap();
        assert_eq!(
            os.proc(pid).unwrap().vmas.len(),
            1,
            "grown in place, one entry"
        );
        let zf = os.stats.faults.zero_fill;
        write_all(&mut os, pid, a, 32 * PAGE);
        assert_eq!(
            os.stats.faults.zero_fill - zf,
            24,
            "the tail is fresh memory"
        );
        // Move and grow at once (realloc of a big block).
        let b = 0x30_0000_0000u64;
        os.mremap(pid, a, 32 * PAGE, b, 40 * PAGE).unwrap();
        os.check_invariants().unwrap();
        assert_eq!(os.phys.used_frames, 32);
        write_all(&mut os, pid, b, 40 * PAGE);
        assert_eq!(os.phys.used_frames, 40);
        os.check_invariants().unwrap();
        // Move and shrink.
        os.mremap(pid, b, 40 * PAGE, a, 4 * PAGE).unwrap();
        os.check_invariants().unwrap();
        assert_eq!(os.phys.used_frames, 4);
        os.exit(pid).unwrap();
        os.check_invariants().unwrap();
        assert_eq!(os.phys.used_frames, 0);
    }

    #[test]
    fn move_over_existing_mapping_and_split_entries() {
        let mut os = os();
        let pid = os.spawn().unwrap();
        let (a, b) = (0x10_0000_0000u64, 0x10_0001_0000u64);
        map(&mut os, pid, a, 16 * PAGE, Prot::RW, MapFlags::ANON);
        map(&mut os, pid, b, 16 * PAGE, Prot::RW, MapFlags::ANON);
        write_all(&mut os, pid, a, 16 * PAGE);
        write_all(&mut os, pid, b, 16 * PAGE);
        // Split the source into three entries of different protections.
        os.mprotect(pid, a + 4 * PAGE, 4 * PAGE, Prot::READ)
            .unwrap();
        os.mremap(pid, a, 16 * PAGE, b + 8 * PAGE, 16 * PAGE)
            .unwrap();
        os.check_invariants().unwrap();
        // b's upper half was replaced: 8 of its pages are gone.
        assert_eq!(os.phys.used_frames, 16 + 8);
        let p = os.proc(pid).unwrap();
        assert_eq!(p.vma_at(b + 12 * PAGE).unwrap().prot, Prot::READ);
        assert_eq!(p.vma_at(b + 16 * PAGE).unwrap().prot, Prot::RW);
        // Overlapping move (down by 4 pages).
        os.mremap(pid, b + 8 * PAGE, 16 * PAGE, b + 4 * PAGE, 16 * PAGE)
            .unwrap();
        os.check_invariants().unwrap();
        assert_eq!(os.phys.used_frames, 16 + 4);
    }

    #[test]
    fn move_after_fork_keeps_copy_on_write() {
        let mut os = os();
        let parent = os.spawn().unwrap();
        let (a, b) = (0x10_0000_0000u64, 0x20_0000_0000u64);
        map(&mut os, parent, a, 8 * PAGE, Prot::RW, MapFlags::ANON);
        write_all(&mut os, parent, a, 8 * PAGE);
        let child = os.fork(parent).unwrap();
        os.mremap(child, a, 8 * PAGE, b, 8 * PAGE).unwrap();
        os.check_invariants().unwrap();
        assert_eq!(os.phys.used_frames, 8, "still shared");
        write_all(&mut os, child, b, 8 * PAGE);
        assert_eq!(
            os.stats.faults.cow, 8,
            "the moved entries are still copy-on-write"
        );
        os.check_invariants().unwrap();
        // The parent grows its (shared-frame) mapping in place.
        os.mremap(parent, a, 8 * PAGE, a, 12 * PAGE).unwrap();
        write_all(&mut os, parent, a, 12 * PAGE);
        os.check_invariants().unwrap();
    }

    #[test]
    fn file_mappings_move_and_grow() {
        let mut os = os();
        let pid = os.spawn().unwrap();
        os.open_file(7, 8 * PAGE);
        let (a, b) = (0x10_0000_0000u64, 0x20_0000_0000u64);
        map(&mut os, pid, a, 8 * PAGE, Prot::RW, MapFlags::FILE);
        for va in (a..a + 8 * PAGE).step_by(PAGE as usize) {
            os.access(pid, va, AccessKind::Read).unwrap();
        }
        os.access(pid, a, AccessKind::Write).unwrap(); // one private copy in the shadow
        os.mremap(pid, a, 8 * PAGE, b, 16 * PAGE).unwrap();
        os.check_invariants().unwrap();
        assert!(
            os.files[&7].size >= 16 * PAGE,
            "the file grows with the mapping"
        );
        let io = os.stats.io_read_bytes;
        for va in (b..b + 8 * PAGE).step_by(PAGE as usize) {
            os.access(pid, va, AccessKind::Read).unwrap();
        }
        assert_eq!(os.stats.io_read_bytes, io, "moved pages need no I/O");
        for va in (b..b + 16 * PAGE).step_by(PAGE as usize) {
            os.access(pid, va, AccessKind::Write).unwrap();
        }
        os.check_invariants().unwrap();
        // A shared file mapping grown in place.
        let c = 0x30_0000_0000u64;
        map(
            &mut os,
            pid,
            c,
            4 * PAGE,
            Prot::RW,
            MapFlags::FILE.with(MapFlags::SHARED),
        );
        os.mremap(pid, c, 4 * PAGE, c, 6 * PAGE).unwrap();
        write_all(&mut os, pid, c, 6 * PAGE);
        os.check_invariants().unwrap();
        os.exit(pid).unwrap();
        os.check_invariants().unwrap();
    }

    /// With a superpage policy: a move that keeps 2MB alignment keeps the superpages; one that
    /// does not re-enters their pages as base pages (a demotion each).
    #[test]
    fn superpages_move_when_aligned_and_are_demoted_otherwise() {
        // Through RunSpec::prepare, which binds the policy to the machine.
        let spec = crate::RunSpec {
            machine: "skylake:mem=1G".into(),
            policy: "navarro".into(),
            workload: "seq".into(),
            seed: 1,
            check: true.into(),
            free_bytes: None,
            page_cache: Default::default(),
            dump_reservations: false,
        };
        let Ok(prep) = spec.prepare() else {
            return; // no superpage policy in this build
        };
        let mut os = Os::new(prep.machine, prep.policy);
        let pid = os.spawn().unwrap();
        let mb2 = 2u64 << 20;
        let (a, b, c) = (0x10_0000_0000u64, 0x20_0000_0000u64, 0x30_0000_1000u64);
        map(&mut os, pid, a, 2 * mb2, Prot::RW, MapFlags::ANON);
        write_all(&mut os, pid, a, 2 * mb2);
        let sp = |os: &Os| os.proc(pid).unwrap().pmap.counts[1];
        if sp(&os) == 0 {
            return; // the policy did not promote (not this test's subject)
        }
        assert_eq!(sp(&os), 1024, "both 2MB pages are superpages");
        os.check_invariants().unwrap();
        os.mremap(pid, a, 2 * mb2, b, 2 * mb2).unwrap();
        os.check_invariants().unwrap();
        assert_eq!(sp(&os), 1024, "an aligned move keeps them");
        let d = os.stats.demotions[1];
        os.mremap(pid, b, 2 * mb2, c, 2 * mb2).unwrap();
        os.check_invariants().unwrap();
        assert_eq!(sp(&os), 0, "a misaligned move cannot");
        assert_eq!(os.stats.demotions[1] - d, 2);
        let f = os.stats.faults.total;
        write_all(&mut os, pid, c, 2 * mb2);
        assert_eq!(os.stats.faults.total, f, "every page still mapped");
        // Moving half of a superpage: the rest stays behind, as base pages.
        map(&mut os, pid, a, mb2, Prot::RW, MapFlags::ANON);
        write_all(&mut os, pid, a, mb2);
        let before = sp(&os);
        os.mremap(pid, a + mb2 / 2, mb2 / 2, b, mb2 / 2).unwrap();
        os.check_invariants().unwrap();
        assert!(sp(&os) <= before);
        write_all(&mut os, pid, a, mb2 / 2);
        write_all(&mut os, pid, b, mb2 / 2);
        assert_eq!(
            os.stats.faults.total,
            f + 512,
            "only the new mapping's first touches"
        );
        os.exit(pid).unwrap();
        os.check_invariants().unwrap();
    }

    #[test]
    fn errors_are_invalid_events() {
        let mut os = os();
        let pid = os.spawn().unwrap();
        assert!(os.mremap(pid, 0x1001, PAGE, 0x2000, PAGE).is_err());
        assert!(os.mremap(pid, 0x1000, 0, 0x2000, PAGE).is_err());
        // Growing a range with nothing mapped below its end.
        assert!(os.mremap(pid, 0x1000, PAGE, 0x1000, 2 * PAGE).is_err());
        os.check_invariants().unwrap();
    }
}
