//! Dirty superpages (seed 000 4.7 "Paging out dirty superpages", 6.7 "Dirty superpages"): what
//! a write-out writes, and msync.
//!
//! The hardware keeps one dirty bit per superpage (vm/pmap.rs keeps it in the head entry;
//! demotion copies it to every piece), so the OS must consider every base page of a dirty
//! superpage dirty. The policy's `dirty=` option (policy.rs `Dirty`) chooses what follows:
//! - `trap` (the presets' rule): a write to a clean superpage demotes it first (navarro: the
//!   dirty-bit trap, vm/fault.rs `clean_write_trap`; freebsd: the write-protect trick), so a
//!   dirty superpage has every base page written and nothing is written in vain;
//! - `whole` (6.7's "without demoting on writing"): the write sets the superpage's dirty bit
//!   and the superpage stays; its write-out writes every base page;
//! - `hash` (4.7, "inferring dirty base pages using hash digests"): as `whole`, but when a clean
//!   page arrives (read from disk, supplied by the page cache, read back from swap) its SHA-1
//!   digest is computed and recorded, and a write-out recomputes the digest of each page it
//!   would write and writes only those whose digest changed.
//!
//! Page contents are modelled exactly by a content version per frame, bumped by every write
//! the model makes to the base page (vm/fault.rs `finish_access`): a digest is the version it
//! was computed at, together with the page it belonged to, so "digest unchanged" is "not
//! written since". A frame reused for another page keeps its old digest, which names the old
//! page; a copy on write is made by a write, which moves the version on. (Only an unwritten
//! zero-filled page that lands in the same frame under a reused object id and the same index
//! could pass: it is skipped at write-out, and a fault on it, having no swap copy, zero-fills it
//! again, so nothing is lost.) To see every write, `hash` sends all writes through the slow access path
//! (`Tlb::last` is never left write-through); the other modes keep the fast path as it was.
//! Hashing costs `CostConfig::sha1_block_cycles` per 64-byte block (docs/constants.md 11).
//!
//! msync(MS_SYNC) (`Os::msync`, FreeBSD `vm_map_sync` -> `vm_object_page_clean`): the dirty pages
//! of the shared file mappings in the range are written to the file in clusters of contiguous
//! pages (`vm_object_page_collect_flush`, at most `vm_pageout_page_count` pages a write), their
//! dirty bits cleared through the page tables (`pmap_clear_modify`, TLB entries invalidated),
//! and the caller waits for the writes.

use std::collections::BTreeSet;

use super::pageq::F_DIRTY;
use super::pmap::Pmap;
use super::{ObjId, ObjKind, Os};
use crate::error::{Result, SimError};
use crate::hw::core::cause;
use crate::policy::Dirty;
use crate::units::{Pfn, Pid};

/// FreeBSD 4.x `vm_pageout_page_count` (`VM_PAGEOUT_PAGE_COUNT`, 16): the most pages
/// `vm_object_page_collect_flush` gathers into one write.
pub const FLUSH_CLUSTER_PAGES: u64 = 16;

/// The digest recorded for a frame's page: of which page, at which content version.
#[derive(Clone, Copy, Debug, Default)]
struct Digest {
    valid: bool,
    obj: u32,
    pindex: u64,
    version: u64,
}

/// What the dirty-superpage mechanism counted (the report's `memory.paging`).
#[derive(Clone, Debug, Default)]
pub struct DirtyStats {
    /// CPU cycles spent computing SHA-1 digests (`dirty=hash`), inside `time`.
    pub hash_cycles: u64,
    /// Base pages a write-out would have written (dirty bit or flag set): written because their
    /// digest changed, and found clean by it.
    pub hash_written: u64,
    pub hash_clean: u64,
    /// msync calls, and the base pages they wrote.
    pub msyncs: u64,
    pub msync_written: u64,
}

/// Content versions and digests, kept only under `dirty=hash`.
#[derive(Clone, Debug, Default)]
pub struct DirtyState {
    /// Whether contents are tracked (`dirty=hash`).
    pub track: bool,
    version: Vec<u64>,
    digest: Vec<Digest>,
    pub stats: DirtyStats,
}

impl DirtyState {
    pub fn new(mode: Dirty, frames: u64) -> DirtyState {
        let track = mode == Dirty::Hash;
        let n = if track { frames as usize } else { 0 };
        DirtyState {
            track,
            version: vec![0; n],
            digest: vec![Digest::default(); n],
            stats: DirtyStats::default(),
        }
    }

    /// The content version of frame `pfn` (for tests; 0 when contents are not tracked).
    pub fn version(&self, pfn: Pfn) -> u64 {
        self.version.get(pfn.0 as usize).copied().unwrap_or(0)
    }
}

impl Os {
    /// SHA-1 of one base page: its 64-byte blocks and the padding block.
    fn sha1_page_cycles(&self) -> u64 {
        (self.machine.base_size() / 64 + 1) * self.machine.cost.sha1_block_cycles
    }

    /// A data access went through the slow path under `dirty=hash`: a write changes the
    /// contents of the base page at `pa`; and `Tlb::last` is made to refuse writes, so that the
    /// next write comes back here.
    #[cold]
    #[inline(never)]
    pub(crate) fn track_access(&mut self, write: bool, pa: u64) {
        if write {
            let i = (pa >> self.base_shift()) as usize;
            self.dirty.version[i] += 1;
        }
        self.hw.tlb.last.write_ok = false;
    }

    /// A clean page arrived in `pfn` (read from its file or swap, or supplied by the page
    /// cache): under `dirty=hash` its digest is computed and recorded (seed 000 4.7, "when a
    /// clean memory page is read from disk, a cryptographic hash digest of its contents is
    /// computed and recorded"). Returns the CPU cycles, for the caller to charge.
    pub(crate) fn digest_clean(&mut self, pfn: Pfn) -> u64 {
        if !self.dirty.track {
            return 0;
        }
        self.record_digest(pfn);
        let c = self.sha1_page_cycles();
        self.dirty.stats.hash_cycles += c;
        c
    }

    fn record_digest(&mut self, pfn: Pfn) {
        let (obj, pindex) = self.pageq.owner(pfn).unwrap_or((ObjId(u32::MAX), u64::MAX));
        let i = pfn.0 as usize;
        self.dirty.digest[i] = Digest {
            valid: true,
            obj: obj.0,
            pindex,
            version: self.dirty.version[i],
        };
    }

    /// The write-out of a page considered dirty: whether it must be written, and the CPU cycles
    /// of deciding. Under `dirty=hash` the digest is recomputed and compared with the recorded
    /// one (seed 000 4.7); a page written gets the new digest (it is clean once written back).
    /// Otherwise every page considered dirty is written (one dirty bit per superpage).
    pub(crate) fn must_write(&mut self, pfn: Pfn) -> (bool, u64) {
        if !self.dirty.track {
            return (true, 0);
        }
        let c = self.sha1_page_cycles();
        self.dirty.stats.hash_cycles += c;
        let i = pfn.0 as usize;
        let d = self.dirty.digest[i];
        let unchanged = d.valid
            && d.version == self.dirty.version[i]
            && self.pageq.owner(pfn) == Some((ObjId(d.obj), d.pindex));
        if unchanged {
            self.dirty.stats.hash_clean += 1;
            return (false, c);
        }
        self.dirty.stats.hash_written += 1;
        self.record_digest(pfn);
        (true, c)
    }

    /// msync(`addr`, `len`, MS_SYNC) by `pid` (FreeBSD `vm_map_sync` -> `vm_object_page_clean`):
    /// writes the dirty pages of the shared file mappings in the range to their files and
    /// waits for the writes. A dirty superpage mapping overlapping the range is written whole
    /// (seed 000 4.7: one dirty bit), or under `dirty=hash` the base pages whose digest changed.
    /// Dirty bits are cleared in every mapping of those pages (TLB entries invalidated).
    /// Private and anonymous mappings have nothing to write. A range with unmapped pages is an
    /// error (ENOMEM).
    pub fn msync(&mut self, pid: Pid, addr: u64, len: u64) -> Result<()> {
        let (start, end) = self.check_range("msync", addr, len)?;
        let bs = self.base_shift();
        let p = self.proc(pid)?;
        let mut at = start;
        let mut ranges = Vec::new();
        for v in p.vmas.values() {
            if v.end <= start || v.start >= end {
                continue;
            }
            if v.start > at {
                break;
            }
            let (s, e) = (v.start.max(start), v.end.min(end));
            at = e;
            if !v.private() && matches!(self.obj(v.obj).kind, ObjKind::File { .. }) {
                let p0 = v.pgoff + ((s - v.start) >> bs);
                ranges.push((v.obj, p0, p0 + ((e - s) >> bs)));
            }
        }
        if at < end {
            return Err(SimError::InvalidEvent(format!(
                "msync: pid {} has no mapping at {at:#x} inside {addr:#x}+{len:#x} (ENOMEM)",
                pid.0
            )));
        }
        self.dirty.stats.msyncs += 1;
        let (mut cpu, mut io) = (0u64, 0u64);
        for (obj, p0, p1) in ranges {
            let (c, d) = self.clean_object_range(obj, p0, p1);
            cpu += c;
            io += d;
        }
        self.stats.cycles_kernel += cpu;
        self.stats.cycles_io += io;
        self.hw.core.serial(io, cause::IO);
        Ok(())
    }

    /// `vm_object_page_clean` of pages `[p0, p1)` of file object `obj`: returns (CPU cycles,
    /// device cycles).
    fn clean_object_range(&mut self, obj: ObjId, p0: u64, p1: u64) -> (u64, u64) {
        let bs = self.base_shift();
        // Every shared mapping of the object: (pid, first vpn, end vpn, page of the first vpn).
        let mut maps = Vec::new();
        for p in self.procs.values() {
            for v in p.vmas.values() {
                if v.obj == obj && !v.private() {
                    maps.push((p.pid, v.start >> bs, v.end >> bs, v.pgoff));
                }
            }
        }
        // The pages to write: those modified since written (flag), and every base page of each
        // dirty mapping overlapping the range (a superpage's one dirty bit covers all of it).
        let mut want: BTreeSet<u64> = self
            .obj(obj)
            .pages
            .range(p0, p1)
            .into_iter()
            .filter(|&(_, pfn)| self.pageq.flag(pfn, F_DIRTY))
            .map(|(pi, _)| pi)
            .collect();
        let mut heads = Vec::new();
        for &(pid, s, e, pgoff) in &maps {
            let lo = p0.max(pgoff);
            let hi = p1.min(pgoff + (e - s));
            if lo >= hi {
                continue;
            }
            let pm = &self.procs[&pid.0].pmap;
            let (mut vpn, vend) = (s + (lo - pgoff), s + (hi - pgoff));
            while vpn < vend {
                let Some(pte) = pm.lookup(vpn) else {
                    vpn += 1;
                    continue;
                };
                let order = self.orders[pte.size().0 as usize];
                let head = Pmap::head_of(vpn, order);
                let n = 1u64 << order;
                if pm.is_dirty(vpn, order) {
                    want.extend((head..head + n).map(|h| pgoff + (h - s)));
                    heads.push((pid, head, n));
                }
                vpn = head + n;
            }
        }
        let base = self.machine.base_size();
        let (mut cpu, mut io) = (0u64, 0u64);
        // Contiguous pages written go out together, up to FLUSH_CLUSTER_PAGES a write.
        let mut run = 0u64;
        let mut prev = u64::MAX;
        for pi in want {
            let Some(pfn) = self.obj(obj).pages.get(pi) else {
                continue;
            };
            let (write, c) = self.must_write(pfn);
            cpu += c;
            self.pageq.set_flag(pfn, F_DIRTY, false);
            if !write {
                continue;
            }
            if run > 0 && (pi != prev.wrapping_add(1) || run == FLUSH_CLUSTER_PAGES) {
                io += self.machine.io_cycles(run * base);
                run = 0;
            }
            run += 1;
            prev = pi;
            self.stats.io_write_bytes += base;
            self.dirty.stats.msync_written += 1;
        }
        if run > 0 {
            io += self.machine.io_cycles(run * base);
        }
        // pmap_clear_modify in every mapping that was dirty.
        let clear = self.machine.cost.pte_write_cycles + self.machine.cost.tlb_invalidate_cycles;
        for (pid, head, n) in heads {
            let p = self.procs.get_mut(&pid.0).expect("msync: pid");
            p.pmap.clear_dirty(head);
            self.hw
                .tlb
                .invalidate_range(pid.0, head << bs, (head + n) << bs);
            cpu += clear;
        }
        (cpu, io)
    }
}
