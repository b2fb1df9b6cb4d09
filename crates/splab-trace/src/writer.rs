//! `TraceWriter`: events in, a .spt file out, block by block (constant memory).
//!
//! Who calls it: `record` (the capture converter), the importers, and any workload that wants to
//! save its event stream. Consecutive accesses of one pid, kind, size, dep and ipa at a constant
//! stride are folded into runs here, whoever the caller is, so that a sequential scan costs
//! almost nothing.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use crate::error::TraceError;
use crate::event::*;
use crate::format::*;

/// The writer keeps at most this many live regions for the trailer's region table.
pub const MAX_REGIONS: usize = 100_000;

/// zstd level used unless told otherwise: level 3 compresses the delta-encoded events to well
/// under half of level 1's size at about the same speed on this data (docs/trace-format.md).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

#[derive(Clone, Copy, Debug)]
struct Run {
    pid: Pid,
    first: u64,
    last: u64,
    stride: i64,
    count: u64,
    kind: AccessKind,
    size: u32,
    dep: u16,
    ipa: u16,
}

/// Per-process bookkeeping for the trailer.
#[derive(Default)]
struct ProcState {
    info: ProcessInfo,
    /// Live mappings by start address (the region table).
    maps: BTreeMap<u64, Region>,
    heap_start: Option<u64>,
    heap_end: u64,
}

/// What [`TraceWriter::finish`] returns.
pub struct Finished<W> {
    pub trailer: Trailer,
    /// The size of the whole trace file.
    pub file_bytes: u64,
    pub out: W,
}

/// Streams events into a trace file. Call [`TraceWriter::finish`] at the end: a trace without
/// its trailer reads as truncated.
pub struct TraceWriter<W: Write> {
    out: W,
    offset: u64,
    enc: BlockEncoder,
    run: Option<Run>,
    zstd: zstd::bulk::Compressor<'static>,
    comp: Vec<u8>,
    trailer: Trailer,
    procs: HashMap<Pid, ProcState>,
    proc_order: Vec<Pid>,
    files: Vec<FileInfo>,
    n_regions: usize,
    /// Accesses of `acc_pid` not yet added to its ProcessInfo.
    acc_pid: Option<Pid>,
    acc_count: u64,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the magic, version and header. `zstd_level`: 1..=19 (3 is a good default).
    pub fn new(mut out: W, header: &TraceHeader, zstd_level: i32) -> Result<Self, TraceError> {
        let h = header.encode();
        let mut pre = Vec::with_capacity(h.len() + 18);
        pre.extend_from_slice(MAGIC);
        pre.extend_from_slice(&VERSION.to_le_bytes());
        pre.extend_from_slice(&(h.len() as u32).to_le_bytes());
        pre.extend_from_slice(&h);
        pre.extend_from_slice(&crc32fast::hash(&h).to_le_bytes());
        out.write_all(&pre).map_err(|e| TraceError::io(0, e))?;
        let zstd = zstd::bulk::Compressor::new(zstd_level).map_err(|e| TraceError::io(0, e))?;
        let mut w = TraceWriter {
            out,
            offset: pre.len() as u64,
            enc: BlockEncoder::default(),
            run: None,
            zstd,
            comp: Vec::new(),
            trailer: Trailer::default(),
            procs: HashMap::new(),
            proc_order: Vec::new(),
            files: Vec::new(),
            n_regions: 0,
            acc_pid: None,
            acc_count: 0,
        };
        w.enc.buf.reserve(TARGET_BLOCK_RAW + 1024);
        for p in &header.processes {
            w.proc_mut(p.pid).info.parent = p.parent;
        }
        Ok(w)
    }

    /// Bytes written so far (the file's size if it ended here, less the unwritten block).
    pub fn bytes_written(&self) -> u64 {
        self.offset
    }

    /// Events accepted so far (each access counted).
    pub fn events(&self) -> u64 {
        self.trailer.events + self.run.map_or(0, |r| r.count)
    }

    /// Accesses accepted so far.
    pub fn accesses(&self) -> u64 {
        self.trailer.accesses + self.run.map_or(0, |r| r.count)
    }

    /// Processes seen so far.
    pub fn processes(&self) -> usize {
        self.procs.len()
    }

    fn proc_mut(&mut self, pid: Pid) -> &mut ProcState {
        if !self.procs.contains_key(&pid) {
            self.proc_order.push(pid);
        }
        self.procs.entry(pid).or_insert_with(|| ProcState {
            info: ProcessInfo {
                pid,
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// One access with no dependence and instruction information: `dep` 0, `ipa` 1 (see
    /// [`TraceWriter::access_with`]).
    #[inline]
    pub fn access(
        &mut self,
        pid: Pid,
        va: Vaddr,
        kind: AccessKind,
        size: u32,
    ) -> Result<(), TraceError> {
        self.access_run_with(pid, va, kind, size, 0, 1, 0, 1)
    }

    /// One access with its `dep` (distance in accesses of `pid` back to the load its address
    /// derives from, 0 for none) and `ipa` (instructions since `pid`'s previous access, this
    /// one's included). A `dep` beyond [`DEP_CAP`] is written as 0 (no dependence); give an
    /// `ipa` beyond [`IPA_CAP`] as `IPA_CAP`.
    #[inline]
    pub fn access_with(
        &mut self,
        pid: Pid,
        va: Vaddr,
        kind: AccessKind,
        size: u32,
        dep: u16,
        ipa: u16,
    ) -> Result<(), TraceError> {
        self.access_run_with(pid, va, kind, size, dep, ipa, 0, 1)
    }

    /// `count` accesses at `va`, `va + stride`, `va + 2 * stride`, ... (`count` 0 is a no-op),
    /// with `dep` 0 and `ipa` 1.
    #[inline]
    pub fn access_run(
        &mut self,
        pid: Pid,
        va: Vaddr,
        kind: AccessKind,
        size: u32,
        stride: i64,
        count: u64,
    ) -> Result<(), TraceError> {
        self.access_run_with(pid, va, kind, size, 0, 1, stride, count)
    }

    /// `count` accesses at `va`, `va + stride`, `va + 2 * stride`, ... (`count` 0 is a no-op),
    /// each with this `dep` and `ipa`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn access_run_with(
        &mut self,
        pid: Pid,
        va: Vaddr,
        kind: AccessKind,
        size: u32,
        dep: u16,
        ipa: u16,
        stride: i64,
        count: u64,
    ) -> Result<(), TraceError> {
        if count == 0 {
            return Ok(());
        }
        let dep = if dep > DEP_CAP { 0 } else { dep };
        if let Some(r) = &mut self.run {
            if r.pid == pid && r.kind == kind && r.size == size && r.dep == dep && r.ipa == ipa {
                let d = va.0.wrapping_sub(r.last) as i64;
                if (r.count == 1 || d == r.stride) && (count == 1 || stride == d) {
                    r.stride = d;
                    r.count += count;
                    r.last = va.0.wrapping_add((count - 1).wrapping_mul(stride as u64));
                    if r.count < MAX_BLOCK_EVENTS / 4 {
                        return Ok(());
                    }
                    return self.flush_run();
                }
            }
            self.flush_run()?;
        }
        self.run = Some(Run {
            pid,
            first: va.0,
            last: va.0.wrapping_add((count - 1).wrapping_mul(stride as u64)),
            stride,
            count,
            kind,
            size,
            dep,
            ipa,
        });
        Ok(())
    }

    fn fold_proc_counts(&mut self) {
        if let Some(pid) = self.acc_pid.take() {
            let n = std::mem::take(&mut self.acc_count);
            let p = self.proc_mut(pid);
            p.info.events += n;
            p.info.accesses += n;
        }
    }

    fn flush_run(&mut self) -> Result<(), TraceError> {
        let Some(r) = self.run.take() else {
            return Ok(());
        };
        self.enc.access_run(
            r.pid, r.first, r.kind, r.size, r.dep, r.ipa, r.stride, r.count,
        );
        let t = &mut self.trailer;
        t.events += r.count;
        t.accesses += r.count;
        match r.kind {
            AccessKind::Read => t.reads += r.count,
            AccessKind::Write => t.writes += r.count,
            AccessKind::Ifetch => t.ifetches += r.count,
            AccessKind::Rmw => t.rmws += r.count,
        }
        t.instructions = t
            .instructions
            .saturating_add(r.count.saturating_mul(r.ipa as u64));
        if r.dep != 0 {
            t.dependent += r.count;
        }
        // Per-process counts are kept for the last pid seen and folded in when it changes
        // (a hash lookup per run would cost more than encoding it).
        if self.acc_pid != Some(r.pid) {
            self.fold_proc_counts();
            self.acc_pid = Some(r.pid);
        }
        self.acc_count += r.count;
        self.maybe_close_block()
    }

    #[inline]
    fn maybe_close_block(&mut self) -> Result<(), TraceError> {
        if self.enc.buf.len() >= TARGET_BLOCK_RAW || self.enc.events >= MAX_BLOCK_EVENTS / 2 {
            self.close_block()?;
        }
        Ok(())
    }

    fn close_block(&mut self) -> Result<(), TraceError> {
        if self.enc.events == 0 {
            return Ok(());
        }
        let raw = &self.enc.buf;
        self.comp.clear();
        self.comp
            .reserve(zstd::zstd_safe::compress_bound(raw.len()));
        self.zstd
            .compress_to_buffer(raw.as_slice(), &mut self.comp)
            .map_err(|e| TraceError::io(self.offset, e))?;
        let mut hdr = [0u8; 17];
        hdr[0] = FRAME_BLOCK;
        hdr[1..5].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        hdr[5..9].copy_from_slice(&(self.comp.len() as u32).to_le_bytes());
        hdr[9..13].copy_from_slice(&(self.enc.events as u32).to_le_bytes());
        hdr[13..17].copy_from_slice(&crc32fast::hash(&self.comp).to_le_bytes());
        self.out
            .write_all(&hdr)
            .map_err(|e| TraceError::io(self.offset, e))?;
        self.out
            .write_all(&self.comp)
            .map_err(|e| TraceError::io(self.offset, e))?;
        self.offset += hdr.len() as u64 + self.comp.len() as u64;
        self.trailer.blocks += 1;
        self.enc.clear();
        Ok(())
    }

    /// Any event. Accesses may be folded into a run with the ones before them.
    pub fn write(&mut self, ev: &TraceEvent) -> Result<(), TraceError> {
        if let TraceEvent::Access {
            pid,
            va,
            kind,
            size,
            dep,
            ipa,
        } = ev
        {
            return self.access_with(*pid, *va, *kind, *size, *dep, *ipa);
        }
        if let TraceEvent::FileOpen { file, .. } = ev {
            if file.0 == 0 {
                return Err(TraceError::Unencodable("file id 0 is reserved".into()));
            }
        }
        self.flush_run()?;
        self.enc.other(ev);
        self.trailer.events += 1;
        self.track(ev);
        self.maybe_close_block()
    }

    /// Keeps the process, region and file tables of the trailer up to date.
    fn track(&mut self, ev: &TraceEvent) {
        use TraceEvent::*;
        if let Some(pid) = ev.pid() {
            self.proc_mut(pid).info.events += 1;
        }
        match ev {
            Mmap {
                pid,
                addr,
                len,
                prot,
                flags,
                file,
                ..
            } => {
                if flags.contains(MmapFlags::MORECORE) {
                    self.trailer.morecore_mmaps += 1;
                }
                let r = Region {
                    pid: *pid,
                    start: *addr,
                    len: *len,
                    prot: *prot,
                    flags: *flags,
                    file: *file,
                    heap: false,
                };
                self.carve(*pid, addr.0, addr.0.saturating_add(*len));
                self.insert_region(r);
            }
            Munmap { pid, addr, len } => self.carve(*pid, addr.0, addr.0.saturating_add(*len)),
            Mremap {
                pid,
                old_addr,
                old_len,
                new_addr,
                new_len,
            } => {
                let old = self.procs.get(pid).and_then(|p| {
                    p.maps
                        .range(..=old_addr.0)
                        .next_back()
                        .map(|(_, r)| r.clone())
                });
                self.carve(*pid, old_addr.0, old_addr.0.saturating_add(*old_len));
                if let Some(mut r) = old {
                    r.start = *new_addr;
                    r.len = *new_len;
                    self.carve(*pid, new_addr.0, new_addr.0.saturating_add(*new_len));
                    self.insert_region(r);
                }
            }
            Brk { pid, new_end } => {
                let p = self.proc_mut(*pid);
                if p.heap_start.is_none() {
                    p.heap_start = Some(new_end.0);
                }
                p.heap_end = new_end.0;
            }
            Fork { parent, child } => {
                let (maps, hs, he) = match self.procs.get(parent) {
                    Some(p) => (p.maps.clone(), p.heap_start, p.heap_end),
                    None => (BTreeMap::new(), None, 0),
                };
                let room = MAX_REGIONS.saturating_sub(self.n_regions);
                let c = self.proc_mut(*child);
                c.info.parent = Some(*parent);
                c.heap_start = hs;
                c.heap_end = he;
                c.maps = maps
                    .into_iter()
                    .take(room)
                    .map(|(k, mut r)| {
                        r.pid = *child;
                        (k, r)
                    })
                    .collect();
                let n = c.maps.len();
                self.n_regions += n;
            }
            Vfork { parent, child } => {
                // The child has no regions of its own: it runs in the parent's until its exec.
                let c = self.proc_mut(*child);
                c.info.parent = Some(*parent);
            }
            Exec { pid } => {
                let p = self.proc_mut(*pid);
                p.info.execs += 1;
                let n = p.maps.len();
                p.maps.clear();
                p.heap_start = None;
                p.heap_end = 0;
                self.n_regions -= n;
            }
            Exit { pid } => self.proc_mut(*pid).info.exited = true,
            FileOpen { file, size, name }
                if !self.files.iter().any(|f| f.file == *file)
                    && self.files.len() < MAX_REGIONS =>
            {
                self.files.push(FileInfo {
                    file: *file,
                    size: *size,
                    name: name.as_deref().map(String::from),
                });
            }
            _ => {}
        }
    }

    fn insert_region(&mut self, r: Region) {
        if self.n_regions >= MAX_REGIONS {
            self.trailer.regions_truncated = true;
            return;
        }
        self.n_regions += 1;
        let pid = r.pid;
        self.proc_mut(pid).maps.insert(r.start.0, r);
    }

    /// Removes `[start, end)` from `pid`'s live regions, splitting the ones it cuts.
    fn carve(&mut self, pid: Pid, start: u64, end: u64) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        let hit: Vec<u64> = p
            .maps
            .range(..end)
            .rev()
            .take_while(|(_, r)| r.start.0.saturating_add(r.len) > start || r.start.0 >= start)
            .filter(|(_, r)| r.start.0.saturating_add(r.len) > start)
            .map(|(&k, _)| k)
            .collect();
        for k in hit {
            let Some(r) = p.maps.remove(&k) else { continue };
            self.n_regions -= 1;
            let r_end = r.start.0.saturating_add(r.len);
            if r.start.0 < start {
                let mut left = r.clone();
                left.len = start - r.start.0;
                p.maps.insert(left.start.0, left);
                self.n_regions += 1;
            }
            if r_end > end {
                let mut right = r.clone();
                right.start = Vaddr(end);
                right.len = r_end - end;
                p.maps.insert(end, right);
                self.n_regions += 1;
            }
        }
    }

    /// Notes that the recorder saw a `brk` refused that a native kernel would have granted
    /// (`Trailer::brk_refused`): the recording's heap departs from the native one.
    pub fn note_brk_refused(&mut self) {
        self.trailer.brk_refused += 1;
    }

    /// Writes the last block, the trailer and the footer, flushes, and returns the trailer.
    pub fn finish(mut self) -> Result<Finished<W>, TraceError> {
        self.flush_run()?;
        self.close_block()?;
        self.fold_proc_counts();
        let mut t = std::mem::take(&mut self.trailer);
        t.bytes = self.offset;
        for pid in &self.proc_order {
            let Some(p) = self.procs.get(pid) else {
                continue;
            };
            t.processes.push(p.info.clone());
            t.regions.extend(p.maps.values().cloned());
            if let Some(hs) = p.heap_start {
                t.regions.push(Region {
                    pid: *pid,
                    start: Vaddr(hs),
                    len: p.heap_end.saturating_sub(hs),
                    prot: Prot::RW,
                    flags: MmapFlags::ANON,
                    file: None,
                    heap: true,
                });
            }
        }
        t.files = std::mem::take(&mut self.files);
        let payload = t.encode();
        let trailer_at = self.offset;
        let mut buf = Vec::with_capacity(payload.len() + 32);
        buf.push(FRAME_TRAILER);
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        buf.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        buf.extend_from_slice(&payload);
        buf.extend_from_slice(&trailer_at.to_le_bytes());
        buf.extend_from_slice(FOOTER_MAGIC);
        self.out
            .write_all(&buf)
            .map_err(|e| TraceError::io(self.offset, e))?;
        self.out
            .flush()
            .map_err(|e| TraceError::io(self.offset, e))?;
        self.offset += buf.len() as u64;
        Ok(Finished {
            trailer: t,
            file_bytes: self.offset,
            out: self.out,
        })
    }
}
