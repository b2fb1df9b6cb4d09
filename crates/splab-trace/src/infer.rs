//! Region inference for traces without syscalls (ChampSim) or without the initial address space
//! (lackey): before the first access to an aligned chunk that no mapping covers, emit an `Mmap`
//! of the whole chunk, flagged `INFERRED`.
//!
//! Why aligned chunks: the simulator needs a mapping under every access, and which pages the
//! program touched is all the trace knows; a chunk of the largest superpage size common to the
//! machines (2MB) lets every policy build superpages where the program's own allocator would
//! have had them, and costs nothing for untouched pages (memory is only counted when touched).

use std::collections::{BTreeMap, HashSet};

use crate::error::TraceError;
use crate::event::*;
use crate::writer::TraceWriter;

/// Default chunk: 2MB.
pub const DEFAULT_CHUNK: u64 = 2 << 20;

pub struct RegionInference {
    chunk_shift: u32,
    /// Chunks already covered by an inferred mapping, per pid.
    chunks: HashSet<(Pid, u64)>,
    /// Real mappings seen (start -> end), per pid, so that accesses inside them infer nothing.
    maps: BTreeMap<(Pid, u64), u64>,
    last: Option<(Pid, u64)>,
    pub inferred: u64,
}

impl RegionInference {
    /// `chunk` must be a power of two (rounded up otherwise).
    pub fn new(chunk: u64) -> Self {
        let chunk = chunk.max(4096).next_power_of_two();
        RegionInference {
            chunk_shift: chunk.trailing_zeros(),
            chunks: HashSet::new(),
            maps: BTreeMap::new(),
            last: None,
            inferred: 0,
        }
    }

    /// Notes a real mapping (so that accesses inside it infer nothing).
    pub fn note_mapping(&mut self, pid: Pid, addr: u64, len: u64) {
        self.maps.insert((pid, addr), addr.saturating_add(len));
    }

    /// Emits an inferred Mmap when `va` lies in a chunk not seen before and outside every
    /// noted mapping. Call before writing the access.
    #[inline]
    pub fn before_access<W: std::io::Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Pid,
        va: u64,
        size: u32,
    ) -> Result<(), TraceError> {
        let c = va >> self.chunk_shift;
        if self.last == Some((pid, c))
            && (va.wrapping_add(size.max(1) as u64 - 1) >> self.chunk_shift) == c
        {
            return Ok(());
        }
        self.slow(w, pid, va, size)
    }

    #[cold]
    fn slow<W: std::io::Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Pid,
        va: u64,
        size: u32,
    ) -> Result<(), TraceError> {
        let first = va >> self.chunk_shift;
        let last = va.saturating_add(size.max(1) as u64 - 1) >> self.chunk_shift;
        for c in first..=last {
            if self.chunks.contains(&(pid, c)) {
                continue;
            }
            let start = c << self.chunk_shift;
            let inside = self
                .maps
                .range(..=(pid, va))
                .next_back()
                .is_some_and(|(&(p, s), &e)| p == pid && s <= va && va < e);
            self.chunks.insert((pid, c));
            if inside {
                continue;
            }
            self.inferred += 1;
            w.write(&TraceEvent::Mmap {
                pid,
                addr: Vaddr(start),
                len: 1 << self.chunk_shift,
                prot: Prot::RW,
                flags: MmapFlags::ANON.union(MmapFlags::INFERRED),
                file: None,
                offset: 0,
            })?;
        }
        self.last = Some((pid, first));
        Ok(())
    }
}
